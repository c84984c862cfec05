// HTTP upstreams: mcp-chain as an MCP client of servers it reaches over HTTP.
//
// (1) @modelcontextprotocol/server-everything in its Streamable HTTP mode:
//     lists and calls, progress on the POST's SSE stream, a sampling request
//     from the server answered by the SDK client, the GET stream and the DELETE
//     at exit;
// (2) the same server in its legacy HTTP+SSE mode ("type": "sse");
// (3) a small fault-injecting server written here (Streamable HTTP and a
//     legacy one): headers sent (configured ones, session, protocol version),
//     a 500, slow headers, a stream dropped mid-response, SSE split into odd
//     chunks with CRLF, a lost session (404 -> new session, one retry), a
//     stream resumed with Last-Event-ID, oversized replies, an unreachable
//     server, a legacy stream that drops.
//
// Each test closes its client in `finally` and kills what is left of the
// process tree; under ASan/UBSan mcp-chain's stderr is checked for reports.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  CHAIN, RawChain, SE_ENTRY, SKIP_NO_CHAIN, descendants, isAlive, killAll, outcome, sleep, tmpPath, waitFor,
} from './lib.mjs';

const T = { timeout: 30_000, skip: SKIP_NO_CHAIN };
const BASE = { shutdownGraceMs: 500 };
const SANITIZER_REPORT = /ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// ---------------------------------------------------------------------------
// mcp-chain with an SDK client

let cfgCount = 0;
function writeCfg(cfg) {
  const file = tmpPath(`http-${process.pid}-${++cfgCount}.json`);
  writeFileSync(file, JSON.stringify({ ...BASE, ...cfg }, null, 2));
  return file;
}

function chainEnv() {
  const env = {};
  for (const k of ['MCP_CHAIN_LOG', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'])
    if (process.env[k]) env[k] = process.env[k];
  return env;
}

/** Records what the client receives, in order. */
function recordReceived(transport) {
  const received = [];
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() { return handler; },
    set(fn) {
      handler = fn && ((msg, extra) => { received.push(structuredClone(msg)); return fn(msg, extra); });
    },
  });
  return received;
}

/** Starts mcp-chain on CFG and connects a client; {client, received, stderr(), close()}. */
async function openChain(cfg, opts = {}) {
  const transport = new StdioClientTransport({
    command: CHAIN, args: ['--config', writeCfg(cfg)], env: chainEnv(), stderr: 'pipe',
  });
  let err = '';
  let errEnded = false;
  transport.stderr?.on('data', (c) => {
    err += c.toString('utf8');
    if (process.env.IT_VERBOSE) process.stderr.write(c);
  });
  transport.stderr?.on('end', () => { errEnded = true; });
  const received = recordReceived(transport);
  const client = new Client({ name: 'mcp-chain-http-test', version: '1.0.0' },
    { capabilities: opts.capabilities ?? {} });
  client.onerror = () => {};
  opts.setup?.(client);
  const s = {
    client, received, stderr: () => err, closed: false,
    async close() {
      if (s.closed) return;
      s.closed = true;
      const pid = transport.pid;
      const tree = pid ? [pid, ...descendants(pid)] : [];
      try { await client.close(); } catch { /* ignore */ }
      const t0 = Date.now();
      while (tree.some(isAlive) && Date.now() - t0 < 4000) await sleep(25);
      s.exitMs = Date.now() - t0;
      s.leftovers = tree.filter(isAlive);
      killAll(s.leftovers);
      const t1 = Date.now();
      while (!errEnded && Date.now() - t1 < 1000) await sleep(20);
      const m = err.match(SANITIZER_REPORT);
      if (m) {
        const at = err.indexOf(m[0]);
        throw new Error(`sanitizer report from mcp-chain:\n${err.slice(Math.max(0, at - 200), at + 4000)}`);
      }
      // killed, it would skip LeakSanitizer's check at exit
      if (s.leftovers.length) throw new Error(`mcp-chain did not exit on its own:\n${err.slice(-2000)}`);
    },
  };
  try {
    await client.connect(transport);
  } catch (e) {
    await s.close().catch(() => {});
    e.message += `\n--- mcp-chain stderr ---\n${err.slice(-3000)}`;
    throw e;
  }
  return s;
}

/** Runs fn(session) on a fresh mcp-chain, always closing it. */
async function withChain(cfg, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  const s = await openChain(cfg, opts);
  let failed = false;
  try {
    return await fn(s);
  } catch (e) {
    failed = true;
    e.message += `\n--- mcp-chain stderr ---\n${s.stderr().slice(-4000)}`;
    throw e;
  } finally {
    try { await s.close(); } catch (e) { if (!failed) throw e; }
  }
}

const httpEntry = (url, more = {}) => ({ mcpServers: { e: { type: 'http', url, ...more } } });

// ---------------------------------------------------------------------------
// server-everything over HTTP

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

/** Runs server-everything in MODE ('streamableHttp' or 'sse') on a free port. */
async function startEverything(mode) {
  const port = await freePort();
  const proc = spawn(process.execPath, [SE_ENTRY, mode], {
    env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = { text: '' };
  for (const st of [proc.stdout, proc.stderr]) {
    st.on('data', (c) => {
      log.text += c;
      if (process.env.IT_VERBOSE) process.stderr.write(c);
    });
  }
  await waitFor(() => canConnect(port), { timeoutMs: 15000, what: `server-everything ${mode} on ${port}` });
  return {
    port, log,
    stop() { killAll([proc.pid, ...descendants(proc.pid)]); },
  };
}

/** Runs fn(server) with server-everything in MODE, stopping it after. */
async function withEverything(mode, fn) {
  const se = await startEverything(mode);
  try {
    return await fn(se);
  } catch (e) {
    e.message += `\n--- server-everything log ---\n${se.log.text.slice(-2000)}`;
    throw e;
  } finally {
    se.stop();
  }
}

const SAMPLING = { capabilities: { sampling: {} } };

/** Answers sampling/createMessage; the requests land in SEEN. */
function samplingSetup(seen) {
  return (client) => client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.push(req.params);
    return { model: 'test-model', role: 'assistant',
      content: { type: 'text', text: `sampled: ${req.params.messages[0].content.text}` } };
  });
}

/** Lists, calls echo and get-sum. */
async function basicCalls(client) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const n of ['echo', 'get-sum', 'trigger-long-running-operation'])
    assert.ok(names.includes(n), `tool ${n} listed (got ${names.join(', ')})`);
  assert.equal(text(await client.callTool({ name: 'echo', arguments: { message: 'over http' } })),
    'Echo: over http');
  assert.match(text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } })), /42/);
}

/** A long-running call: 3 progress notifications precede the result on the wire. */
async function progressCall(s) {
  let seen = 0;
  const r = await s.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
    undefined, { onprogress: () => { seen++; } });
  assert.match(text(r), /Long running operation completed/);
  const at = s.received.findIndex((m) => m.result && /Long running/.test(JSON.stringify(m.result)));
  const prog = s.received.slice(0, at).filter((m) => m.method === 'notifications/progress');
  assert.deepEqual(prog.map((m) => m.params.progress), [1, 2, 3]);
  assert.ok(seen >= 2, `onprogress called ${seen} times`);
}

/** The server asks the client to sample, inside a tool call. */
async function samplingCall(client, seen) {
  const r = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: '2+2?', maxTokens: 7 } });
  assert.equal(seen.length, 1);
  assert.equal(seen[0].maxTokens, 7);
  assert.match(text(r), /sampled: .*2\+2\?/);
}

test('Streamable HTTP (server-everything): lists, calls, GET stream, DELETE at exit', T, async () => {
  await withEverything('streamableHttp', async (se) => {
    await withChain(httpEntry(`http://127.0.0.1:${se.port}/mcp`), async (s) => {
      const v = s.client.getServerVersion();
      assert.equal(v.name, 'mcp-servers/everything');
      await basicCalls(s.client);
      await waitFor(() => /Establishing new SSE stream/.test(se.log.text), { what: 'the GET stream' });
    });
    await waitFor(() => /session termination request/.test(se.log.text), { what: 'the DELETE' });
  });
});

test('Streamable HTTP (server-everything): progress on the POST stream, before the result', T, async () => {
  await withEverything('streamableHttp', async (se) => {
    await withChain(httpEntry(`http://127.0.0.1:${se.port}/mcp`), progressCall);
  });
});

test('Streamable HTTP (server-everything): sampling request answered by the client', T, async () => {
  const seen = [];
  await withEverything('streamableHttp', async (se) => {
    await withChain(httpEntry(`http://127.0.0.1:${se.port}/mcp`), { ...SAMPLING, setup: samplingSetup(seen) },
      (s) => samplingCall(s.client, seen));
  });
});

test('HTTP+SSE legacy (server-everything sse): lists, calls, progress, sampling', T, async () => {
  const seen = [];
  await withEverything('sse', async (se) => {
    const cfg = { mcpServers: { e: { type: 'sse', url: `http://127.0.0.1:${se.port}/sse` } } };
    await withChain(cfg, { ...SAMPLING, setup: samplingSetup(seen) }, async (s) => {
      await basicCalls(s.client);
      await progressCall(s);
      await samplingCall(s.client, seen);
    });
  });
});

// ---------------------------------------------------------------------------
// a fault-injecting Streamable HTTP server

const FLOOD = 400;               // 32 KiB notifications in the flood reply (about 13 MB)
const PROTOCOL = '2025-03-26';   // what the fault server negotiates, whatever is asked
const FAULT_TOOLS = ['ok', 'fail500', 'plain500', 'other400', 'slow', 'drop', 'chunked', 'expire', 'resume', 'huge', 'hugesse', 'flood']
  .map((name) => ({ name, inputSchema: { type: 'object' } }));

const rpcResult = (id, result) => JSON.stringify({ jsonrpc: '2.0', id, result });
const toolResult = (id, t) => rpcResult(id, { content: [{ type: 'text', text: t }] });

function readBody(req) {
  return new Promise((resolve) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
}

/** Writes PIECES (strings) to RES one by one, a few ms apart. */
async function dribble(res, pieces) {
  for (const p of pieces) {
    res.write(p);
    await sleep(5);
  }
}

/** Tool behaviours; each gets (st, req, res, msg). */
const FAULTS = {
  ok(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(toolResult(msg.id, 'ok'));
  },
  fail500(st, req, res, msg) {
    res.writeHead(500, { 'content-type': 'application/json' })
      .end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32603, message: 'boom' } }));
  },
  plain500(st, req, res) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end('upstream fell over');
  },
  other400(st, req, res) {   // an error response, but to some other request
    res.writeHead(400, { 'content-type': 'application/json' })
      .end(JSON.stringify({ jsonrpc: '2.0', id: 'not-yours', error: { code: -32602, message: 'bad' } }));
  },
  async slow(st, req, res, msg) {
    res.on('close', () => { if (!res.writableEnded) st.abandoned = (st.abandoned ?? 0) + 1; });
    await sleep(1500);
    if (!res.destroyed) FAULTS.ok(st, req, res, msg);
  },
  async drop(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const token = msg.params?._meta?.progressToken;
    res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress',
      params: { progressToken: token, progress: 1, total: 2 } })}\n\n`);
    await sleep(50);
    req.socket.destroy();
  },
  async chunked(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const note = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message',
      params: { level: 'info', data: 'line1\nline2' } });
    const resp = toolResult(msg.id, 'chunked ok');
    const cut = resp.indexOf(',') + 1;   // two data lines, joined by a "\n" between JSON tokens
    const stream = `: comment\r\nevent: message\r\ndata: ${note}\r\n\r\ndata: ${resp.slice(0, cut)}\r\ndata: ${resp.slice(cut)}\r\n\r\n`;
    const pieces = [];
    for (let i = 0; i < stream.length; i += 7) pieces.push(stream.slice(i, i + 7));
    await dribble(res, pieces);
    res.end();
  },
  expire(st, req, res, msg) {
    if (st.expired) return FAULTS.ok(st, req, res, msg);
    st.expired = true;
    st.sessions.delete(req.headers['mcp-session-id']);
    res.writeHead(404).end();
  },
  resume(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    st.resumable.set('ev-1', msg.id);
    res.end('id: ev-1\nretry: 100\ndata: \n\n');   // primed, then closed before the response
  },
  huge(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(toolResult(msg.id, 'x'.repeat(200000)));
  },
  async flood(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const pad = 'z'.repeat(32 * 1024);
    for (let i = 0; i < FLOOD; i++) {
      const note = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: { i, pad } } };
      if (!res.write(`data: ${JSON.stringify(note)}\n\n`)) await new Promise((r) => res.once('drain', r));
    }
    res.end(`data: ${toolResult(msg.id, 'flood done')}\n\n`);
  },
  hugesse(st, req, res, msg) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`data: ${toolResult(msg.id, 'y'.repeat(200000))}\n\ndata: ${JSON.stringify({ jsonrpc: '2.0',
      method: 'notifications/message', params: { level: 'info', data: 'after the big one' } })}\n\n`);
  },
};

const logNote = (data) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message',
  params: { level: 'info', data } });

/** GET with st.getStream: one event then a close; resumed from it, one more, kept open. */
function getStream(st, req, res, last) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (!last) return res.end(`retry: 50\nid: g-1\ndata: ${logNote('first')}\n\n`);
  res.write(`id: g-2\ndata: ${logNote(`second after ${last}`)}\n\n`);
  return undefined;  // open until the session ends
}

/** GET: resumes a stream by Last-Event-ID, else 405. */
function faultGet(st, req, res) {
  const last = req.headers['last-event-id'];
  if (st.getStream && (!last || last === 'g-1')) return getStream(st, req, res, last);
  if (!last || !st.resumable.has(last)) return res.writeHead(405).end();
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(`id: ev-2\ndata: ${toolResult(st.resumable.get(last), 'resumed')}\n\n`);
}

/** One POSTed message. */
async function faultPost(st, req, res, msg) {
  if (msg.method === 'initialize') {
    const sid = `session-${++st.next}`;
    st.sessions.add(sid);
    st.inits.push(msg.params);
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': sid });
    return res.end(rpcResult(msg.id, { protocolVersion: PROTOCOL,
      capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'fault', version: '1.0.0' } }));
  }
  if (!st.sessions.has(req.headers['mcp-session-id'])) return res.writeHead(404).end();
  if (msg.id === undefined || msg.method === undefined) return res.writeHead(202).end();
  if (msg.method === 'tools/list') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(rpcResult(msg.id, { tools: FAULT_TOOLS }));
  }
  const f = msg.method === 'tools/call' && FAULTS[msg.params.name];
  if (f) return f(st, req, res, msg);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } }));
}

/**
 * Starts the fault server; {url, st, close()}. st.requests holds {method, headers, body}.
 * opts: getStream (offer a GET stream), hangDelete (never answer DELETE).
 */
async function startFault(opts = {}) {
  const st = { requests: [], sessions: new Set(), inits: [], next: 0, resumable: new Map(), expired: false,
    ...opts };
  const server = http.createServer(async (req, res) => {
    const raw = await readBody(req);
    const body = raw ? JSON.parse(raw) : null;
    st.requests.push({ method: req.method, headers: req.headers, body });
    if (req.method === 'GET') return faultGet(st, req, res);
    if (req.method === 'DELETE') return st.hangDelete ? undefined : res.writeHead(200).end();
    return faultPost(st, req, res, body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    st, url: `http://127.0.0.1:${server.address().port}/mcp`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

async function withFault(cfgMore, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  const f = await startFault(cfgMore.server);
  try {
    return await withChain({ ...httpEntry(f.url, cfgMore.entry ?? {}), ...(cfgMore.top ?? {}) }, opts,
      (s) => fn(s, f));
  } finally {
    await f.close();
  }
}

const posts = (st, pred = () => true) => st.requests.filter((r) => r.method === 'POST' && pred(r.body));

test('fault server: headers — configured ones, Accept, session, negotiated protocol version; GET 405; DELETE', T, async () => {
  const f = await startFault();
  try {
    const cfg = httpEntry(f.url, { headers: { Authorization: 'Bearer t0ken', 'X-Extra': 'yes' } });
    await withChain(cfg, async (s) => {
      assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
      await waitFor(() => f.st.requests.some((r) => r.method === 'GET'), { what: 'the GET stream attempt' });
    });
    await waitFor(() => f.st.requests.some((r) => r.method === 'DELETE'), { what: 'the DELETE' });
    const { requests } = f.st;
    for (const r of requests) {
      assert.equal(r.headers.authorization, 'Bearer t0ken', `${r.method} carries the configured header`);
      assert.equal(r.headers['x-extra'], 'yes');
    }
    // "protocol": "auto" probes an HTTP upstream with server/discover first (the era's
    // headers, no session); this legacy server answers -32601, so initialize follows
    const [probe, init, ...rest] = requests;
    assert.equal(probe.body.method, 'server/discover');
    assert.equal(probe.headers['mcp-protocol-version'], '2026-07-28');
    assert.equal(probe.headers['mcp-method'], 'server/discover');
    assert.equal(probe.headers['mcp-session-id'], undefined);
    assert.equal(probe.body.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.equal(init.body.method, 'initialize');
    assert.equal(init.headers['mcp-method'], undefined, 'no 2026 headers in the handshake era');
    assert.equal(init.headers['mcp-session-id'], undefined);
    assert.equal(init.headers['mcp-protocol-version'], undefined, 'no version header on initialize');
    assert.match(init.headers.accept, /application\/json/);
    assert.match(init.headers.accept, /text\/event-stream/);
    assert.equal(init.headers['content-type'], 'application/json');
    for (const r of rest) {
      assert.equal(r.headers['mcp-session-id'], 'session-1', `${r.method} ${r.body?.method ?? ''}`);
      // the backend's negotiated version, not the client's (which asked for a newer one)
      assert.equal(r.headers['mcp-protocol-version'], PROTOCOL);
    }
    const get = requests.find((r) => r.method === 'GET');
    const initialized = requests.findIndex((r) => r.body?.method === 'notifications/initialized');
    assert.ok(initialized > 0 && requests.indexOf(get) > initialized, 'GET after notifications/initialized');
    assert.equal(get.headers.accept, 'text/event-stream');
    assert.equal(requests.filter((r) => r.method === 'GET').length, 1, '405: no second attempt');
  } finally {
    await f.close();
  }
});

test('fault server: an error status with the server\'s JSON-RPC error answers with that error; ' +
  'without one, -32000 with the status and what the body said; the next call works', T, async () => {
  await withFault({}, async (s) => {
    let r = await outcome(() => s.client.callTool({ name: 'fail500', arguments: {} }));
    assert.equal(r.ok, false);
    assert.equal(r.code, -32603);   // as the server said it, not a gateway's code
    assert.match(r.message, /^MCP error -32603: boom$/);
    r = await outcome(() => s.client.callTool({ name: 'plain500', arguments: {} }));
    assert.equal(r.code, -32000);
    assert.match(r.message, /HTTP 500/);
    assert.match(r.message, /upstream fell over/);
    r = await outcome(() => s.client.callTool({ name: 'other400', arguments: {} }));
    assert.equal(r.code, -32000);   // an error for another id is not this call's answer
    assert.match(r.message, /HTTP 400/);
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
  });
});

test('fault server: slow headers do not hold up other requests', T, async () => {
  await withFault({}, async (s) => {
    const order = [];
    const slow = s.client.callTool({ name: 'slow', arguments: {} }).then((r) => order.push(`slow:${text(r)}`));
    await sleep(100);
    const fast = s.client.callTool({ name: 'ok', arguments: {} }).then((r) => order.push(`fast:${text(r)}`));
    await Promise.all([slow, fast]);
    assert.deepEqual(order, ['fast:ok', 'slow:ok']);
  });
});

test('fault server: a cancelled request is cancelled upstream and its reply no longer awaited', T, async () => {
  await withFault({}, async (s, f) => {
    const ac = new AbortController();
    const call = outcome(() => s.client.callTool({ name: 'slow', arguments: {} }, undefined, { signal: ac.signal }));
    await waitFor(() => posts(f.st, (b) => b?.params?.name === 'slow').length === 1, { what: 'the slow call' });
    ac.abort('changed my mind');
    assert.equal((await call).ok, false);
    await waitFor(() => posts(f.st, (b) => b?.method === 'notifications/cancelled').length === 1,
      { what: 'notifications/cancelled upstream' });
    const slowId = posts(f.st, (b) => b?.params?.name === 'slow')[0].body.id;
    assert.equal(posts(f.st, (b) => b?.method === 'notifications/cancelled')[0].body.params.requestId, slowId);
    await waitFor(() => f.st.abandoned === 1, { what: 'the reply connection closed' });
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
  });
});

test('fault server: a stream dropped mid-response fails the call; what came before is delivered', T, async () => {
  await withFault({}, async (s) => {
    let progress = 0;
    const r = await outcome(() => s.client.callTool({ name: 'drop', arguments: {} }, undefined,
      { onprogress: () => { progress++; } }));
    assert.equal(r.ok, false);
    assert.equal(r.code, -32000);
    assert.match(r.message, /ended the reply stream before the response/);
    assert.equal(progress, 1);
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
  });
});

test('fault server: SSE in 7-byte chunks with CRLF, multi-line data, a notification first', T, async () => {
  const logs = [];
  const setup = (client) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  await withFault({}, { setup }, async (s) => {
    assert.equal(text(await s.client.callTool({ name: 'chunked', arguments: {} })), 'chunked ok');
    await waitFor(() => logs.length === 1, { what: 'the log notification' });
    assert.equal(logs[0].data, 'line1\nline2');
  });
});

test('fault server: a lost session (404) -> a new session with the same parameters, one retry', T, async () => {
  await withFault({}, async (s, f) => {
    assert.equal(text(await s.client.callTool({ name: 'expire', arguments: {} })), 'ok');
    assert.equal(f.st.inits.length, 2);
    assert.deepEqual(f.st.inits[1], f.st.inits[0], 'initialized again with the same parameters');
    const calls = posts(f.st, (b) => b?.params?.name === 'expire');
    assert.equal(calls.length, 2, 'sent once more');
    assert.equal(calls[0].headers['mcp-session-id'], 'session-1');
    assert.equal(calls[1].headers['mcp-session-id'], 'session-2');
    const inits = f.st.requests.flatMap((r, i) => (r.body?.method === 'initialize' ? [i] : []));
    assert.equal(f.st.requests[inits[1]].headers['mcp-session-id'], undefined);
    // the next POST (a GET for the new session's stream may come first) is the handshake's end
    const nextPost = f.st.requests.slice(inits[1] + 1).find((r) => r.method === 'POST');
    assert.equal(nextPost.body.method, 'notifications/initialized',
      'the new session is initialized before the retry');
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
    assert.equal(posts(f.st, (b) => b?.params?.name === 'ok').at(-1).headers['mcp-session-id'], 'session-2');
  });
});

test('fault server: a reply stream closed after an event id is resumed with GET + Last-Event-ID', T, async () => {
  await withFault({}, async (s, f) => {
    assert.equal(text(await s.client.callTool({ name: 'resume', arguments: {} })), 'resumed');
    const get = f.st.requests.find((r) => r.method === 'GET' && r.headers['last-event-id']);
    assert.equal(get.headers['last-event-id'], 'ev-1');
    assert.equal(get.headers['mcp-session-id'], 'session-1');
  });
});

test('fault server: the GET stream brings server messages and is reopened with Last-Event-ID', T, async () => {
  const logs = [];
  const setup = (client) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params.data); });
  await withFault({ server: { getStream: true } }, { setup }, async (s, f) => {
    await waitFor(() => logs.length === 2, { what: 'two notifications on the GET stream' });
    assert.deepEqual(logs, ['first', 'second after g-1']);
    const gets = f.st.requests.filter((r) => r.method === 'GET');
    assert.equal(gets.length, 2);
    assert.equal(gets[0].headers['last-event-id'], undefined);
    assert.equal(gets[1].headers['last-event-id'], 'g-1');
    assert.equal(gets[1].headers['mcp-session-id'], 'session-1');
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
  });
});

test('fault server: an unanswered DELETE at exit is bounded', T, async () => {
  const f = await startFault({ hangDelete: true });
  try {
    const s = await openChain(httpEntry(f.url));
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
    await s.close();
    assert.ok(f.st.requests.some((r) => r.method === 'DELETE'), 'DELETE sent');
    assert.ok(s.exitMs < 3000, `exited after ${s.exitMs} ms`);
  } finally {
    await f.close();
  }
});

test('fault server: replies over maxMessageBytes (JSON body, SSE event) fail their call only', T, async () => {
  const logs = [];
  const setup = (client) => client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  await withFault({ top: { maxMessageBytes: 100000 } }, { setup }, async (s) => {
    for (const name of ['huge', 'hugesse']) {
      const r = await outcome(() => s.client.callTool({ name, arguments: {} }));
      assert.equal(r.ok, false, name);
      assert.equal(r.code, -32603, name);
      assert.match(r.message, /exceeds maxMessageBytes/);
    }
    await waitFor(() => logs.length === 1, { what: 'the event after the big one' });
    assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
  });
});

test('fault server: a client that stops reading pauses the reply stream; nothing is lost', T, async () => {
  const f = await startFault();
  const c = new RawChain({ server: { command: 'unused' }, args: ['--config', writeCfg(httpEntry(f.url))],
    env: { MCP_CHAIN_LOG: 'debug' } });
  try {
    await c.initialize('2025-06-18');
    c.proc.stdout.pause();
    c.send({ jsonrpc: '2.0', id: 'f', method: 'tools/call', params: { name: 'flood', arguments: {} } });
    await waitFor(() => /pausing its sources/.test(c.stderr), { what: 'congestion', timeoutMs: 10000 });
    await sleep(300);
    c.proc.stdout.resume();
    const seen = [];
    for (;;) {
      const m = await c.next(10000);
      if (m.id === 'f') {
        assert.equal(m.result.content[0].text, 'flood done');
        break;
      }
      if (m.method === 'notifications/message') seen.push(m.params.data.i);
    }
    assert.deepEqual(seen, [...Array(FLOOD).keys()], 'every notification, in order');
    assert.match(c.stderr, /drained/);
    assert.match(c.stderr, /e: reply paused \(flow control\)/);
    assert.match(c.stderr, /e: reply resumed/);
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- mcp-chain stderr ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
    await f.close();
  }
  assert.deepEqual(await c.exited, { code: 0, signal: null }, 'exited on its own');
  assert.doesNotMatch(c.stderr, SANITIZER_REPORT);
});

test('unreachable server at start: initialize fails with the reason', T, async () => {
  const port = await freePort();
  const cfg = httpEntry(`http://127.0.0.1:${port}/mcp`, { restart: { initialDelayMs: 50, maxRestarts: 1 } });
  const r = await outcome(() => openChain(cfg));
  assert.equal(r.ok, false);
  assert.match(r.message, /cannot reach http:\/\/127\.0\.0\.1:\d+\/mcp/);
});

// ---------------------------------------------------------------------------
// a legacy HTTP+SSE server whose stream can be dropped

async function startLegacy() {
  const st = { streams: new Set(), gets: 0 };
  const server = http.createServer(async (req, res) => {
    if (req.method === 'GET') {
      st.gets++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`event: endpoint\ndata: /messages?session=${st.gets}\n\n`);
      st.streams.add(res);
      req.on('close', () => st.streams.delete(res));
      return;
    }
    const msg = JSON.parse(await readBody(req));
    res.writeHead(202).end('Accepted');
    if (msg.id === undefined || msg.method === undefined) return;
    const out = [...st.streams].at(-1);
    let result = { content: [{ type: 'text', text: 'ok' }] };
    if (msg.method === 'initialize')
      result = { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'legacy', version: '1' } };
    if (msg.method === 'tools/call' && msg.params.name === 'die') {
      out.destroy();
      return;
    }
    out.write(`event: message\ndata: ${rpcResult(msg.id, result)}\n\n`);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { st, url: `http://127.0.0.1:${server.address().port}/sse`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

test('legacy HTTP+SSE: a dropped stream takes the backend down; it restarts and works again', T, async () => {
  const l = await startLegacy();
  try {
    const cfg = { mcpServers: { e: { type: 'sse', url: l.url, restart: { initialDelayMs: 100 } } } };
    await withChain(cfg, async (s) => {
      assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
      const r = await outcome(() => s.client.callTool({ name: 'die', arguments: {} }));
      assert.equal(r.ok, false);
      assert.equal(r.code, -32000);
      assert.match(s.stderr(), /SSE stream (closed|broke)/);
      await waitFor(() => l.st.gets === 2 && /e: ready/.test(s.stderr().split('restarting').at(-1)),
        { what: 'the restart', timeoutMs: 5000 });
      assert.equal(text(await s.client.callTool({ name: 'ok', arguments: {} })), 'ok');
    });
  } finally {
    await l.close();
  }
});

// ---------------------------------------------------------------------------
// three stdio servers and one HTTP upstream behind one stdio entry

test('three real stdio servers and server-everything over HTTP, behind one mcp-chain', T, async () => {
  const { mkdtempSync, existsSync } = await import('node:fs');
  const path = await import('node:path');
  const os = await import('node:os');
  const mcp = path.dirname(path.dirname(SE_ENTRY));
  const FS = path.join(path.dirname(mcp), 'server-filesystem', 'dist', 'index.js');
  const MEM = path.join(path.dirname(mcp), 'server-memory', 'dist', 'index.js');
  assert.ok(existsSync(FS) && existsSync(MEM), 'server-filesystem and server-memory installed');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mcpc-mix-'));
  writeFileSync(path.join(dir, 'hello.txt'), 'hello from a file');
  await withEverything('streamableHttp', async (se) => {
    const cfg = { ...BASE, mcpServers: {
      fs: { command: process.execPath, args: [FS, dir] },
      mem: { command: process.execPath, args: [MEM], env: { MEMORY_FILE_PATH: path.join(dir, 'mem.jsonl') } },
      local: { command: process.execPath, args: [SE_ENTRY, 'stdio'] },
      web: { type: 'http', url: `http://127.0.0.1:${se.port}/mcp` },
    } };
    await withChain(cfg, async (s) => {
      const names = (await s.client.listTools()).tools.map((t) => t.name);
      for (const n of ['fs__read_text_file', 'mem__create_entities', 'local__echo', 'web__echo'])
        assert.ok(names.includes(n), `${n} listed`);
      for (const n of names) assert.match(n, /^[a-zA-Z0-9_-]{1,64}$/);
      assert.equal(text(await s.client.callTool({ name: 'web__echo', arguments: { message: 'via http' } })),
        'Echo: via http');
      assert.equal(text(await s.client.callTool({ name: 'local__echo', arguments: { message: 'via stdio' } })),
        'Echo: via stdio');
      const file = await s.client.callTool({ name: 'fs__read_text_file',
        arguments: { path: path.join(dir, 'hello.txt') } });
      assert.match(text(file), /hello from a file/);
      const ent = await s.client.callTool({ name: 'mem__create_entities', arguments: { entities: [
        { name: 'mcp-chain', entityType: 'proxy', observations: ['behind one entry'] }] } });
      assert.match(text(ent), /mcp-chain/);
    });
  });
});
