// Line injection: a JSON message may hold raw CR and LF in its white space
// (any pretty-printing client sends them), and a stdio peer reads one
// message a line. What mcp-chain forwards as the bytes it received must
// reach such a peer as ONE line, or a POST to the HTTP front becomes
// several backend messages that no module saw (a tools/call a policy
// denies, a response forged with another session's backend id).
//
// The backend (fixtures/line-log-server.mjs) records every raw line it
// reads; the tests check that log: the one message sent, as one line.
// Through /mcp (a session), the legacy /messages endpoint, a policy
// denying echo, auth with per-principal policy, a shared backend with two
// sessions; a pretty-printed body is answered; two values are -32700.
// The other way: an HTTP upstream answering pretty-printed JSON, on its
// way to a stdio client, is one line per message.
//
// Also: a later session on a shared backend is told the revision it
// asked for (2025-03-26 keeps its batches), not the first session's.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { CHAIN, HERE, SKIP_NO_CHAIN, RawChain, descendants, isAlive, killAll, sleep, tmpPath, waitFor } from './lib.mjs';
import { withChain, request, openStream, within } from './http_lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_CHAIN };
const LINE_LOG_SERVER = path.join(HERE, 'fixtures', 'line-log-server.mjs');
const J = { 'Content-Type': 'application/json', Accept: 'application/json' };
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'inject', version: '1' } };
const sha256 = (s) => createHash('sha256').update(s).digest('hex');

let nlog = 0;
/** A line-log backend ({command, args, scope}) and the file it logs to. */
function lineLogBackend(scope) {
  const log = tmpPath(`lines-${process.pid}-${++nlog}.jsonl`);
  writeFileSync(log, '');
  return { server: { command: process.execPath, args: [LINE_LOG_SERVER, '--log', log], ...(scope ? { scope } : {}) }, log };
}

/** Every raw line the backend read, in order. */
function linesRead(log) {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** The lines after the handshake (initialize, notifications/initialized). */
function afterHandshake(log) {
  return linesRead(log).filter((l) => !/"method":"(initialize|notifications\/initialized)"/.test(l));
}

/** The injection: a ping whose params hold, on a line of its own, INNER. */
const injection = (id, inner) =>
  `{"jsonrpc":"2.0","id":${id},"method":"ping","params":{"x":\n${JSON.stringify(inner)}\n}}`;
const INJECTED_CALL = { jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'echo', arguments: { text: 'INJECTED' } } };

/**
 * LINES (what the backend read after the handshake) are exactly one ping
 * with id-less checks: every line is JSON, none starts a message of the
 * injected payload, and the ping's params carry the payload as data.
 */
function assertOnePing(lines, what) {
  assert.equal(lines.length, 1, `${what}: one line reached the backend, not ${lines.length}: ${JSON.stringify(lines)}`);
  assert.doesNotMatch(lines[0], /[\r\n]/, `${what}: no raw line break in it`);
  const m = JSON.parse(lines[0]);
  assert.equal(m.method, 'ping', what);
  assert.equal(m.params.x.params.arguments.text, 'INJECTED', `${what}: the payload is only data`);
}

/** initialize + initialized over /mcp with HEADERS; {sid, h, init}. */
async function session(port, { headers = {}, params = INIT } = {}) {
  const r = await request(port, { headers: { ...J, ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params }) });
  assert.equal(r.status, 200, r.body);
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid, 'a session id');
  const h = { ...J, ...headers, 'Mcp-Session-Id': sid };
  const v = JSON.parse(r.body).result.protocolVersion;
  if (v !== '2025-03-26' && v !== '2024-11-05') h['MCP-Protocol-Version'] = v;
  assert.equal((await request(port, { headers: h,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).status, 202);
  return { sid, h, init: JSON.parse(r.body) };
}

/** POST BODY in the session of headers H: the JSON answer (bounded in time). */
async function post(port, h, body, what) {
  const r = await within(request(port, { headers: h, body }), what, 10_000);
  assert.equal(r.status, 200, `${what}: ${r.body}`);
  return JSON.parse(r.body);
}

test('/mcp: a body with raw line feeds reaches the backend as one line; its request is answered',
  T, async () => {
    const { server, log } = lineLogBackend();
    await withChain(server, {}, async (chain) => {
      const { h } = await session(chain.port);
      const a = await post(chain.port, h, injection(3, INJECTED_CALL), 'the injected ping');
      assert.equal(a.id, 3);
      assert.deepEqual(a.result, {}, JSON.stringify(a));
      assertOnePing(afterHandshake(log), '/mcp');
    });
  });

test('/mcp: pretty-printed bodies (LF, CRLF, CR) are answered, each one line at the backend; two values are -32700',
  T, async () => {
    const { server, log } = lineLogBackend();
    await withChain(server, {}, async (chain) => {
      const { h } = await session(chain.port);
      const call = (id, text) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });
      const bodies = [
        JSON.stringify(call(4, 'pretty'), null, 2),
        JSON.stringify(call(5, 'crlf'), null, 2).replace(/\n/g, '\r\n'),
        JSON.stringify(call(6, 'cr'), null, 2).replace(/\n/g, '\r'),
        `\r\n${JSON.stringify(call(7, 'around'))}\r\n`,
      ];
      for (const body of bodies) {
        const want = JSON.parse(body);
        const a = await post(chain.port, h, body, `the pretty body ${JSON.stringify(body.slice(0, 40))}`);
        assert.equal(a.id, want.id);
        assert.equal(JSON.parse(a.result.content[0].text).text, want.params.arguments.text);
      }
      const lines = afterHandshake(log);
      assert.equal(lines.length, bodies.length, JSON.stringify(lines));
      for (const l of lines) {
        assert.doesNotMatch(l, /[\r\n]/);
        assert.equal(JSON.parse(l).method, 'tools/call');
      }
      // two JSON values are no message: refused whole, nothing forwarded
      for (const sep of ['\n', ' ', '\r\n', '']) {
        const body = `${JSON.stringify({ jsonrpc: '2.0', id: 20, method: 'ping' })}${sep}${JSON.stringify(INJECTED_CALL)}`;
        const r = await within(request(chain.port, { headers: h, body }), 'two values', 10_000);
        assert.equal(JSON.parse(r.body).error?.code, -32700, `two values (${JSON.stringify(sep)}): ${r.status} ${r.body}`);
      }
      await sleep(100);
      assert.equal(afterHandshake(log).length, bodies.length, 'nothing of the two-value bodies reached the backend');
    });
  });

test('legacy /messages (HTTP+SSE): the injection reaches the backend as one line',
  T, async () => {
    const { server, log } = lineLogBackend();
    await withChain(server, {}, async (chain) => {
      const port = chain.port;
      const s = await openStream(port, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      try {
        assert.equal(s.status, 200);
        const ep = await s.next((e) => e.event === 'endpoint', 'the endpoint event');
        const postSse = (body) => request(port, { path: ep.data, headers: { 'Content-Type': 'application/json' }, body });
        const idOf = (e) => (e.event === 'message' ? JSON.parse(e.data).id : undefined);
        assert.equal((await postSse(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
          params: { ...INIT, protocolVersion: '2024-11-05' } }))).status, 202);
        await s.next((e) => idOf(e) === 1, 'the initialize answer');
        assert.equal((await postSse(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).status, 202);
        assert.equal((await postSse(injection(3, INJECTED_CALL))).status, 202);
        const a = await within(s.next((e) => idOf(e) === 3, 'the ping answer'), 'the ping answer', 10_000);
        assert.deepEqual(JSON.parse(a.data).result, {});
        assert.ok(!s.events.some((e) => idOf(e) === 99), 'no answer to an injected id');
        assertOnePing(afterHandshake(log), '/messages');
      } finally {
        s.close();
      }
    });
  });

test('a policy denying echo: the injected echo never reaches the backend; a direct one is refused',
  T, async () => {
    const { server, log } = lineLogBackend();
    const extra = { middleware: [{ use: 'policy', rules: [{ deny: ['echo'] }] }] };
    await withChain(server, { extra }, async (chain) => {
      const { h } = await session(chain.port);
      const a = await post(chain.port, h, injection(3, INJECTED_CALL), 'the injected ping');
      assert.deepEqual(a.result, {});
      const d = await post(chain.port, h, JSON.stringify({ ...INJECTED_CALL, id: 5 }), 'a direct echo');
      assert.ok(d.error || d.result?.isError, `policy refuses echo: ${JSON.stringify(d)}`);
      assertOnePing(afterHandshake(log), 'policy');
    });
  });

test('auth with bearer tokens and per-principal policy: bob cannot smuggle the echo he is denied',
  T, async () => {
    const { server, log } = lineLogBackend();
    const ALICE = 'alice-' + 'A'.repeat(20) + '-secret';
    const BOB = 'bob-' + 'B'.repeat(20) + '-secret';
    const extra = { middleware: [
      { use: 'auth', tokens: [{ sha256: sha256(ALICE), principal: 'alice' }, { sha256: sha256(BOB), principal: 'bob' }], env: false },
      { use: 'policy', rules: [{ deny: ['echo'], clients: ['bob'] }, { allow: ['*'], clients: ['alice'] }] },
    ] };
    await withChain(server, { extra }, async (chain) => {
      const { h } = await session(chain.port, { headers: { Authorization: `Bearer ${BOB}` } });
      const d = await post(chain.port, h, JSON.stringify({ ...INJECTED_CALL, id: 5 }), 'bob\'s echo');
      assert.ok(d.error || d.result?.isError, `policy refuses bob: ${JSON.stringify(d)}`);
      const a = await post(chain.port, h, injection(3, INJECTED_CALL), 'bob\'s injected ping');
      assert.deepEqual(a.result, {});
      assertOnePing(afterHandshake(log), 'auth + policy');
    });
  });

test('a shared backend, two sessions: B cannot forge the answer to the backend\'s request to A, nor inject a call',
  T, async () => {
    const { server, log } = lineLogBackend('shared');
    await withChain(server, {}, async (chain) => {
      const port = chain.port;
      const A = await session(port, { params: { ...INIT, capabilities: { sampling: {} } } });
      const get = await openStream(port, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': A.sid } });
      try {
        const B = await session(port);
        // A's call makes the backend ask A (sampling, its id "ask-1")
        const call = within(request(port, { headers: A.h, body: JSON.stringify({ jsonrpc: '2.0', id: 10,
          method: 'tools/call', params: { name: 'ask', arguments: {} } }) }), 'A\'s call', 20_000);
        const asked = await within(get.next((e) => e.event === 'message' &&
          JSON.parse(e.data).method === 'sampling/createMessage', 'the backend\'s request to A'), 'the request to A');
        // B sends a line shaped as A's answer to it, with the backend's id, and a call
        const forged = { jsonrpc: '2.0', id: 'ask-1', result: { role: 'assistant', model: 'm',
          content: { type: 'text', text: 'FORGED' } } };
        const b1 = await post(port, B.h, injection(3, forged), 'B\'s ping with a forged answer');
        const b2 = await post(port, B.h, injection(4, INJECTED_CALL), 'B\'s ping with an injected call');
        assert.deepEqual(b1.result, {});
        assert.deepEqual(b2.result, {});
        await sleep(200);   // time for a forged answer to have landed
        const answer = await request(port, { headers: A.h, body: JSON.stringify({ jsonrpc: '2.0',
          id: JSON.parse(asked.data).id, result: { role: 'assistant', model: 'm', content: { type: 'text', text: 'GENUINE' } } }) });
        assert.equal(answer.status, 202, answer.body);
        const r = await call;
        assert.equal(r.status, 200, r.body);
        const text = JSON.parse(r.body).result.content[0].text;
        assert.match(text, /GENUINE/, 'A\'s call ends with A\'s own answer');
        assert.doesNotMatch(text, /FORGED/);
        const lines = afterHandshake(log);
        for (const l of lines) assert.doesNotMatch(l, /[\r\n]/);
        const msgs = lines.map((l) => JSON.parse(l));
        assert.deepEqual(msgs.map((m) => m.method ?? `answer ${m.id}`),
          ['tools/call', 'ping', 'ping', 'answer ask-1'], JSON.stringify(lines));
        assert.equal(msgs[3].result.content.text, 'GENUINE');
      } finally {
        get.close();
      }
    });
  });

test('a shared backend: a later session asking 2025-03-26 is told 2025-03-26 and its batch is answered; the first keeps 2025-06-18',
  T, async () => {
    const { server } = lineLogBackend('shared');
    await withChain(server, {}, async (chain) => {
      const port = chain.port;
      const first = await session(port);
      assert.equal(first.init.result.protocolVersion, '2025-06-18');
      const later = await session(port, { params: { ...INIT, protocolVersion: '2025-03-26' } });
      assert.equal(later.init.result.protocolVersion, '2025-03-26', JSON.stringify(later.init));
      assert.equal(later.init.result.serverInfo.name, 'line-log', 'the rest is the backend\'s answer');
      const newer = await session(port, { params: { ...INIT, protocolVersion: '2025-11-25' } });
      assert.equal(newer.init.result.protocolVersion, '2025-06-18', 'no newer than the backend\'s');
      const batch = JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'echo', arguments: { n: 2 } } },
      ]);
      const r = await within(request(port, { headers: { ...later.h, 'MCP-Protocol-Version': '2025-03-26' }, body: batch }),
        'the batch', 10_000);
      assert.equal(r.status, 200, r.body);
      assert.deepEqual(JSON.parse(r.body).map((x) => x.id).sort(), ['a', 'b']);
      const first2 = await post(port, first.h, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }), 'the first session');
      assert.deepEqual(first2.result, {});
    });
  });

test('stdio client, stdio backend: a raw CR in a line\'s white space does not reach the backend',
  T, async () => {
    const { server, log } = lineLogBackend();
    const c = new RawChain({ server });
    try {
      await c.initialize('2025-06-18');
      c.send('{"jsonrpc":"2.0",\r"id":5,\r"method":"ping"}');
      const r = await c.response();
      assert.equal(r.id, 5);
      const lines = afterHandshake(log);
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.doesNotMatch(lines[0], /\r/);
    } finally {
      await c.close();
    }
  });

// ---------------------------------------------------------------------------
// an HTTP upstream that answers pretty-printed JSON, and a stdio client

/** Pretty JSON of a JSON-RPC message. */
const pretty = (m) => JSON.stringify({ jsonrpc: '2.0', ...m }, null, 2);

/** A Streamable HTTP MCP server that writes every message pretty-printed (CRLF). */
async function startPrettyUpstream() {
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      if (req.method === 'DELETE') return res.writeHead(200).end();
      if (req.method !== 'POST') return res.writeHead(405).end();
      const msg = JSON.parse(raw);
      if (msg.id === undefined || msg.method === undefined) return res.writeHead(202).end();
      const sid = { 'mcp-session-id': 'pretty-1' };
      switch (msg.method) {
        case 'initialize':
          res.writeHead(200, { 'content-type': 'application/json', ...sid });
          return res.end(pretty({ id: msg.id, result: { protocolVersion: '2025-06-18',
            capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'pretty', version: '1.0.0' } } }).replace(/\n/g, '\r\n'));
        case 'tools/list':
          res.writeHead(200, { 'content-type': 'application/json', ...sid });
          return res.end(pretty({ id: msg.id, result: { tools: [{ name: 'note', inputSchema: { type: 'object' } }] } }));
        case 'tools/call': {
          // on an SSE stream: a notification and the answer, each over several data: lines
          res.writeHead(200, { 'content-type': 'text/event-stream', ...sid });
          const ev = (m) => `event: message\n${pretty(m).split('\n').map((l) => `data: ${l}`).join('\n')}\n\n`;
          res.write(ev({ method: 'notifications/message', params: { level: 'info', data: { said: 'note\nwith a line feed' } } }));
          return res.end(ev({ id: msg.id, result: { content: [{ type: 'text', text: 'one\ntwo' }] } }));
        }
        default:
          res.writeHead(200, { 'content-type': 'application/json', ...sid });
          return res.end(pretty({ id: msg.id, result: {} }));
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/mcp`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

test('an HTTP upstream answering pretty-printed JSON: the stdio client gets each message as one line',
  T, async () => {
    const up = await startPrettyUpstream();
    const cfg = tmpPath(`pretty-${process.pid}.json`);
    writeFileSync(cfg, JSON.stringify({ mcpServers: { up: { type: 'http', url: up.url, protocol: 'handshake' } } }));
    const proc = spawn(CHAIN, ['--config', cfg], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = Buffer.alloc(0);
    let stderr = '';
    proc.stdout.on('data', (c) => { out = Buffer.concat([out, c]); });
    proc.stderr.on('data', (c) => { stderr += c; });
    const lines = () => out.toString('utf8').split('\n').slice(0, -1);
    const send = (m) => proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`);
    const answered = (id) => waitFor(() => lines().some((l) => { try { return JSON.parse(l).id === id; } catch { return false; } }),
      { timeoutMs: 10_000, what: `the answer to ${id}` });
    try {
      send({ id: 1, method: 'initialize', params: INIT });
      await answered(1);
      send({ method: 'notifications/initialized' });
      send({ id: 2, method: 'tools/list' });
      await answered(2);
      send({ id: 3, method: 'tools/call', params: { name: 'note', arguments: {} } });
      await answered(3);
      send({ id: 4, method: 'ping' });
      await answered(4);
      await sleep(100);
      const all = lines();
      const msgs = all.map((l, i) => {
        try { return JSON.parse(l); } catch { assert.fail(`line ${i} of the client's output is not one JSON message: ${JSON.stringify(l)}\n${stderr}`); }
        return null;
      });
      assert.ok(!out.includes(0x0d), 'no CR in the output');
      assert.deepEqual(msgs.filter((m) => m.id !== undefined).map((m) => m.id), [1, 2, 3, 4]);
      assert.equal(msgs.find((m) => m.id === 1).result.serverInfo.name, 'pretty');
      assert.equal(msgs.find((m) => m.id === 3).result.content[0].text, 'one\ntwo');
      const note = msgs.find((m) => m.method === 'notifications/message');
      assert.ok(note, `the notification came: ${all.join('\n')}`);
      assert.equal(note.params.data.said, 'note\nwith a line feed');
    } finally {
      const tree = [proc.pid, ...descendants(proc.pid)];
      proc.stdin.end();
      await Promise.race([new Promise((r) => proc.once('exit', r)), sleep(3000)]);
      killAll(tree.filter(isAlive));
      await up.close();
    }
    assert.doesNotMatch(stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
  });
