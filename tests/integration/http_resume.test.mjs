// Resuming a POST's SSE stream on `mcp-chain --listen` (Streamable HTTP,
// 2025-03-26 to 2025-11-25, "Resumability and Redelivery"): event ids name
// their stream ("S-N"); a POST stream whose connection breaks keeps its
// request open for listen.resumeGraceMs; a GET with Last-Event-ID of one of
// its events gets the events after it and the rest of the stream, ending
// with the answer. Nobody resumes: the backend sees notifications/cancelled.
// Driven raw (node's http) and by the official SDK client through a TCP
// proxy that cuts its connections mid-stream.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { existsSync, readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema, PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, fixtureServer, sleep, tmpPath, waitFor } from './lib.mjs';
import { request, withChain } from './http_lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };
const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

/** The request ids the backend saw cancelled (its --cancel-log). */
function cancelled(log) {
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

/** Initializes a session with raw requests (protocol VERSION); returns its id. */
async function rawSession(port, protocolVersion = '2025-11-25') {
  const r = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion, capabilities: {}, clientInfo: { name: 'raw-resume', version: '1' } } }) });
  assert.equal(r.status, 200, r.body);
  assert.equal(JSON.parse(r.body).result.protocolVersion, protocolVersion);
  const sid = r.headers['mcp-session-id'];
  const n = await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(n.status, 202);
  return sid;
}

/** One SSE block as {id, retry, data, msg (data parsed)}. */
function parseBlock(block) {
  const ev = {};
  for (const line of block.split('\n')) {
    const i = line.indexOf(':');
    const k = line.slice(0, i);
    const v = line.slice(i + 1).replace(/^ /, '');
    if (k === 'data') ev.data = ev.data === undefined ? v : `${ev.data}\n${v}`;
    else ev[k] = v;
  }
  if (ev.data) ev.msg = JSON.parse(ev.data);
  return ev;
}

/**
 * A request whose SSE answer is read as it comes:
 * {status, headers, raw, events, ended, close()}.
 */
function sseRequest(port, { method = 'POST', headers, body }) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: '/mcp', headers, agent: false });
    const s = { events: [], raw: '', ended: false, close: () => req.destroy() };
    req.on('error', (e) => (s.status === undefined ? reject(e) : (s.ended = true)));
    req.on('response', (res) => {
      s.status = res.statusCode;
      s.headers = res.headers;
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        s.raw += c;
        buf += c;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          s.events.push(parseBlock(buf.slice(0, i)));
          buf = buf.slice(i + 2);
        }
      });
      res.on('end', () => { s.ended = true; });
      res.on('error', () => { s.ended = true; });
      res.on('aborted', () => { s.ended = true; });
      resolve(s);
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** A tools/call of the fixture's slow tool with a progress token. */
function slowCall(id, ms, steps) {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call',
    params: { name: 'slow', arguments: { ms, steps }, _meta: { progressToken: `tok-${id}` } } });
}

const progressOf = (events) => events.filter((e) => e.msg?.method === 'notifications/progress')
  .map((e) => e.msg.params.progress);
const seqOf = (id) => Number(id.split('-')[1]);
const streamOf = (id) => id.split('-')[0];

test('a POST stream cut mid-call, resumed with GET + Last-Event-ID: the rest of its progress (none lost, none twice, in order), then the result',
  T, async () => {
    const log = tmpPath(`resume-a-${process.pid}.log`);
    await withChain(fixtureServer(['--cancel-log', log]), { extra: { listen: { resumeGraceMs: 5000 } } }, async (chain) => {
      const sid = await rawSession(chain.port);
      const post = await sseRequest(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
        body: slowCall('r1', 1500, 10) });
      assert.equal(post.status, 200);
      assert.equal(post.headers['content-type'], 'text/event-stream');
      await waitFor(() => progressOf(post.events).length >= 3, { what: 'three progress events' });
      post.close();
      const before = [...post.events];
      // the head: the retry hint with the priming event (an id, empty data)
      assert.match(post.raw, /^retry: \d+\nid: \d+-0\ndata: \n\n/);
      assert.ok(Number(before[0].retry) > 0 && Number(before[0].retry) <= 1000);
      assert.equal(before[0].data, '');
      const stream = streamOf(before[0].id);
      assert.notEqual(stream, '0', 'a POST stream is not the GET stream');
      before.forEach((e, i) => assert.equal(e.id, `${stream}-${i}`, 'ids number the events of one stream'));
      const last = before.at(-1).id;

      await sleep(400);   // the call goes on while nobody reads: what comes is kept
      assert.deepEqual(cancelled(log), [], 'a dropped stream is not a cancellation');
      const get = await sseRequest(chain.port, { method: 'GET',
        headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': last } });
      assert.equal(get.status, 200);
      await waitFor(() => get.ended, { what: 'the resumed stream to end after the answer' });
      assert.match(get.raw, /^retry: \d+\n\n/, 'a resumed stream repeats the retry hint');
      const after = get.events.filter((e) => e.id !== undefined);
      assert.ok(after.every((e) => streamOf(e.id) === stream), 'the same stream');
      assert.deepEqual(after.map((e) => seqOf(e.id)), after.map((_, i) => seqOf(last) + 1 + i),
        'the events after the last one seen, in order, none twice');
      assert.deepEqual(progressOf([...before, ...after]), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      const answer = after.at(-1).msg;
      assert.equal(answer.id, 'r1');
      assert.equal(answer.result.content[0].text, 'done');
      assert.deepEqual(cancelled(log), [], 'never cancelled');
      assert.match(chain.stderr, new RegExp(`stream ${stream} resumed after event ${seqOf(last)}`));

      // the stream is over: its ids resume nothing any more; a GET stream id still opens the GET stream
      const over = await request(chain.port, { method: 'GET',
        headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': last } });
      assert.equal(over.status, 400, over.body);
      assert.match(JSON.parse(over.body).error.message, /does not keep/);
      const ping = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
      assert.equal(ping.status, 200, 'the session lives on');
    });
  });

test('a resume while the POST connection is still open takes the stream over: that connection is closed, the GET carries the rest',
  T, async () => {
    const log = tmpPath(`resume-take-${process.pid}.log`);
    await withChain(fixtureServer(['--cancel-log', log]), {}, async (chain) => {
      const sid = await rawSession(chain.port);
      const post = await sseRequest(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
        body: slowCall('t1', 1200, 6) });
      await waitFor(() => progressOf(post.events).length >= 2, { what: 'two progress events' });
      const last = post.events.at(-1).id;
      const had = progressOf(post.events).at(-1);
      const get = await sseRequest(chain.port, { method: 'GET',
        headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': last } });
      assert.equal(get.status, 200);
      await waitFor(() => post.ended, { what: 'the POST connection to be closed' });
      await waitFor(() => get.ended, { what: 'the GET to end after the answer' });
      const after = get.events.filter((e) => e.id !== undefined);
      assert.deepEqual(after.map((e) => seqOf(e.id)), after.map((_, i) => seqOf(last) + 1 + i));
      assert.deepEqual(progressOf(after), [1, 2, 3, 4, 5, 6].slice(had), 'the progress after the id it gave');
      assert.equal(after.at(-1).msg.id, 't1');
      assert.equal(after.at(-1).msg.result.content[0].text, 'done');
      assert.deepEqual(cancelled(log), []);
    });
  });

test('nobody resumes: the backend sees notifications/cancelled after resumeGraceMs, not before; with resumeGraceMs 0 at once',
  T, async () => {
    for (const graceMs of [1500, 0]) {
      const log = tmpPath(`resume-b${graceMs}-${process.pid}.log`);
      await withChain(fixtureServer(['--cancel-log', log]), { extra: { listen: { resumeGraceMs: graceMs } } }, async (chain) => {
        const sid = await rawSession(chain.port);
        const post = await sseRequest(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
          body: slowCall('b1', 20_000, 40) });
        await waitFor(() => progressOf(post.events).length >= 1, { what: 'a progress event' });
        const last = post.events.at(-1).id;
        if (graceMs === 0)
          assert.doesNotMatch(post.raw, /^retry:/, 'no resumption: no retry hint, no priming event');
        const t0 = Date.now();
        post.close();
        if (graceMs > 0) {
          await sleep(graceMs / 2);
          assert.deepEqual(cancelled(log), [], 'not cancelled during the grace');
        }
        await waitFor(() => cancelled(log).length === 1, { timeoutMs: graceMs + 5000,
          what: 'the backend to see the cancellation' });
        const took = Date.now() - t0;
        if (graceMs > 0) {
          assert.ok(took >= graceMs * 0.9, `cancelled after ${took} ms`);
          assert.match(chain.stderr, /a POST stream was not resumed within 1\.5 s: its request\(s\) are cancelled/);
        } else {
          assert.ok(took < 1500, `cancelled after ${took} ms`);
        }
        const late = await request(chain.port, { method: 'GET',
          headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': last } });
        assert.equal(late.status, 400, 'too late to resume');
      });
    }
  });

/**
 * A TCP proxy to PORT that forwards both ways and cuts a connection the
 * first time CUT(conn, chunk, cuts) is true for a chunk from the server:
 * that chunk is forwarded, nothing after it, and both sides are closed
 * 50 ms later (time for the client to read it). conn.up holds what the
 * client sent on that connection, conn.down what the server sent.
 */
async function cuttingProxy(port, cut) {
  const conns = [];
  let cuts = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const c = { client, upstream, up: '', down: '' };
    conns.push(c);
    client.on('data', (d) => { c.up += d.toString('latin1'); upstream.write(d); });
    upstream.on('data', (d) => {
      if (c.cut) return;
      c.down += d.toString('latin1');
      if (cut(c, d.toString('latin1'), cuts)) {
        cuts++;
        c.cut = true;
        client.write(d, () => setTimeout(() => { client.destroy(); upstream.destroy(); }, 50));
        return;
      }
      client.write(d);
    });
    for (const s of [client, upstream]) {
      s.on('error', () => {});
      s.on('close', () => { client.destroy(); upstream.destroy(); });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: new URL(`http://127.0.0.1:${server.address().port}/mcp`),
    conns,
    cuts: () => cuts,
    close: () => {
      for (const c of conns) { c.client.destroy(); c.upstream.destroy(); }
      return new Promise((r) => server.close(r));
    },
  };
}

/** The requests' header blocks the proxy saw from clients. */
const sentHeaders = (proxy) => proxy.conns.map((c) => c.up).join('');

test('the SDK client resumes its own POST stream: cut mid-call by a proxy, it reconnects with Last-Event-ID and gets the rest and the result',
  T, async () => {
    const log = tmpPath(`resume-sdk-${process.pid}.log`);
    // the proxy's port is in the Host header: allowed by name
    const extra = { listen: { allowedHosts: ['127.0.0.1'] } };
    await withChain(fixtureServer(['--cancel-log', log]), { extra }, async (chain) => {
      const proxy = await cuttingProxy(chain.port, (c, chunk, cuts) =>
        cuts === 0 && c.up.includes('"tools/call"') && (c.down.match(/notifications\/progress/g) ?? []).length >= 2);
      try {
        const transport = new StreamableHTTPClientTransport(proxy.url);
        const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
        const errors = [];
        client.onerror = (e) => errors.push(String(e));
        await client.connect(transport);
        const progress = [];
        const tokens = [];
        const result = await client.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 2000, steps: 8 } } },
          CallToolResultSchema, { onprogress: (p) => progress.push(p.progress), onresumptiontoken: (t) => tokens.push(t) });
        assert.equal(result.content[0].text, 'done');
        assert.equal(proxy.cuts(), 1, 'the proxy cut the POST stream');
        assert.ok(errors.some((e) => /SSE stream disconnected/.test(e)), `the SDK saw the cut: ${errors}`);
        assert.deepEqual(progress, [1, 2, 3, 4, 5, 6, 7, 8], 'every progress once, in order');
        const resumed = /last-event-id: ([1-9]\d*-\d+)/i.exec(sentHeaders(proxy));
        assert.ok(resumed, 'the SDK resumed with GET and the Last-Event-ID of the POST stream');
        assert.ok(tokens.includes(resumed[1]), 'the id it resumed from is one it was given');
        assert.ok(tokens.every((t) => streamOf(t) === streamOf(tokens[0])), 'one stream');
        assert.deepEqual(tokens.map(seqOf), tokens.map((_, i) => i), 'its ids in order, none twice');
        assert.deepEqual(cancelled(log), [], 'the backend saw no cancellation');
        await transport.terminateSession();
        await client.close();
      } finally {
        await proxy.close();
      }
    });
  });

test('the SDK client resumes a call after a restart: a new transport on the session with resumptionToken gets the rest and the answer',
  T, async () => {
    const log = tmpPath(`resume-token-${process.pid}.log`);
    await withChain(fixtureServer(['--cancel-log', log]), {}, async (chain) => {
      const first = new StreamableHTTPClientTransport(chain.url);
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
      client.onerror = () => {};
      await client.connect(first);
      const tokens = [];
      const call = { method: 'tools/call', params: { name: 'slow', arguments: { ms: 1500, steps: 6 } } };
      const lost = client.request(call, CallToolResultSchema, { onprogress: () => {}, onresumptiontoken: (t) => tokens.push(t) });
      await waitFor(() => tokens.length >= 3, { what: 'the priming event and two progress ids' });
      const sessionId = first.sessionId;
      await client.close();          // the client goes away mid-call (its connections close)
      await assert.rejects(lost);

      const again = new StreamableHTTPClientTransport(chain.url, { sessionId });
      const restarted = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
      restarted.onerror = () => {};
      await restarted.connect(again);  // a known session: no initialize
      const result = await restarted.request(call, CallToolResultSchema, { resumptionToken: tokens.at(-1) });
      assert.equal(result.content[0].text, 'done', 'the answer of the call it resumed');
      assert.deepEqual(cancelled(log), [], 'the call was never cancelled');
      await again.terminateSession();
      await restarted.close();
    });
  });

test('the SDK client resumes its GET stream: cut by a proxy, it reconnects with Last-Event-ID and gets what was sent meanwhile, once each',
  T, async () => {
    const extra = { listen: { allowedHosts: ['127.0.0.1'] } };
    await withChain(fixtureServer(), { extra }, async (chain) => {
      const proxy = await cuttingProxy(chain.port, (c, chunk, cuts) =>
        cuts === 0 && /GET \/mcp HTTP/.test(c.up) && chunk.includes('list_changed'));
      try {
        const transport = new StreamableHTTPClientTransport(proxy.url);
        const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
        client.onerror = () => {};
        const seen = [];
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => { seen.push('tools'); });
        client.setNotificationHandler(PromptListChangedNotificationSchema, () => { seen.push('prompts'); });
        client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { seen.push('resources'); });
        await client.connect(transport);
        await waitFor(() => /GET \/mcp HTTP/.test(sentHeaders(proxy)), { what: 'the SDK to open its GET stream' });
        await sleep(200);  // the GET's response headers are through
        await client.callTool({ name: 'notify', arguments: { kind: 'tools' } });
        await waitFor(() => proxy.cuts() === 1 && seen.length === 1, { what: 'the first notification, then the cut' });
        await client.callTool({ name: 'notify', arguments: { kind: 'prompts' } });   // while the GET stream is down
        await client.callTool({ name: 'notify', arguments: { kind: 'resources' } });
        await waitFor(() => seen.length === 3, { timeoutMs: 10_000, what: 'the notifications sent while it was down' });
        await sleep(300);
        assert.deepEqual(seen, ['tools', 'prompts', 'resources'], 'each once, in order');
        assert.match(sentHeaders(proxy), /last-event-id: 0-[1-9]\d*\r\n/i, 'the SDK resumed the GET stream with an id of it');
        await transport.terminateSession();
        await client.close();
      } finally {
        await proxy.close();
      }
    });
  });
