// The Streamable HTTP front: `mcp-chain --listen 127.0.0.1:0` driven by the
// official SDK's StreamableHTTPClientTransport, and by node's http module for
// what an SDK never sends (bad input, a client that leaves mid-call).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { existsSync, readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { request, startChain, withChain } from './http_lib.mjs';

import {
  CHAIN, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT, DEFAULT_CLIENT_INFO,
  everythingServer, fixtureServer, scrubTimes, sleep, tmpPath, waitFor, withClient, writeConfig,
  descendants, isAlive, killAll,
} from './lib.mjs';

const T = { timeout: 60_000 };
const INIT = {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-http', version: '1' },
};

/** An SDK client connected over HTTP to URL. */
async function httpClient(url, caps = {}) {
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: caps });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, transport, errors };
}


const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

/** Initializes a session with raw requests; returns its id. */
async function rawSession(port) {
  const r = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
  assert.equal(r.status, 200, r.body);
  const sid = r.headers['mcp-session-id'];
  assert.match(sid, /^[0-9a-f]{32}$/);
  assert.equal(JSON.parse(r.body).id, 1);
  const n = await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(n.status, 202);
  return sid;
}

/** The same calls on a client, for comparing stdio with HTTP. */
async function scenario(client) {
  const out = {};
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.echo = await client.callTool({ name: 'echo', arguments: { message: 'héllo "http" ✓' } });
  out.sum = await client.callTool({ name: 'get-sum', arguments: { a: 19, b: 23.5 } });
  out.prompt = await client.getPrompt({ name: 'simple-prompt' });
  out.read = await client.readResource({ uri: out.resources[0] });
  return scrubTimes(out);
}

test('server-everything over HTTP: the same lists and results as over stdio; progress before the result; DELETE at close',
  { ...T, skip: SKIP_NO_CHAIN }, async () => {
    const server = everythingServer();
    const viaStdio = await withClient('chain', server, {}, (s) => scenario(s.client));
    await withChain(server, {}, async (chain) => {
      const { client, transport } = await httpClient(chain.url);
      assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
      assert.deepEqual(await scenario(client), viaStdio);
      const events = [];
      await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        undefined, { onprogress: (p) => events.push(p.progress) });
      events.push('result');
      assert.deepEqual(events.slice(0, 3), [1, 2, 3], 'progress arrives before the result');
      assert.equal(events.at(-1), 'result');
      await transport.terminateSession();
      await client.close();
      await waitFor(() => /session #1 ended \(deleted by the client\)/.test(chain.stderr),
        { what: 'the session to end' });
      assert.doesNotMatch(chain.stderr, new RegExp(transport.sessionId ?? 'no-such-id'),
        'the session id never reaches the log');
    });
  });

test('20 sessions at once through one shared backend: interleaved calls and progress, each sees only its own',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain({ ...fixtureServer(), scope: 'shared' }, {}, async (chain) => {
      const clients = await Promise.all(Array.from({ length: 20 }, () => httpClient(chain.url)));
      const ids = new Set(clients.map((c) => c.transport.sessionId));
      assert.equal(ids.size, 20, 'every session has its own id');
      await Promise.all(clients.map(async ({ client }, i) => {
        for (let round = 0; round < 3; round++) {
          const progress = [];
          const [slow, echo] = await Promise.all([
            client.callTool({ name: 'slow', arguments: { ms: 60, steps: 3 } }, undefined,
              { onprogress: (p) => progress.push(p.progress) }),
            client.callTool({ name: 'echo', arguments: { who: i, round } }),
          ]);
          assert.equal(slow.content[0].text, 'done');
          assert.ok(progress.length >= 2, `session ${i} got its progress: ${progress}`);
          assert.deepEqual(progress, [...progress].sort(), 'in order');
          const said = JSON.parse(echo.content[0].text);
          assert.deepEqual(said.params.arguments, { who: i, round }, 'its own echo');
        }
      }));
      for (const { client, errors } of clients) {
        assert.deepEqual(errors.map(String).filter((e) => /unknown token|Unknown message/.test(e)), [],
          'no progress or response reached the wrong session');
        await client.close();
      }
    });
  });

test('bad input: 404, 400, 415, 413, 400 with -32700, 405, 403, 406',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    // eras "both": the 2026-07-28 probe below reaches the bridge (the fixture speaks the handshake era)
    await withChain({ ...fixtureServer(), scope: 'shared' }, { extra: { maxMessageBytes: 4096, eras: 'both' } }, async (chain) => {
      const port = chain.port;
      const sid = await rawSession(port);
      const call = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
      const cases = [
        ['unknown session', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': 'f'.repeat(32) }, body: call }, 404],
        ['malformed session id', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': 'x' }, body: call }, 404],
        ['missing session id', { headers: JSON_HEADERS, body: call }, 400],
        ['unsupported protocol version', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid,
          'MCP-Protocol-Version': '1999-01-01' }, body: call }, 400],
        ['text/plain', { headers: { ...JSON_HEADERS, 'Content-Type': 'text/plain', 'Mcp-Session-Id': sid }, body: call }, 415],
        ['too large', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
          body: JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/call',
            params: { name: 'echo', arguments: { pad: 'x'.repeat(10_000) } } }) }, 413],
        ['PUT', { method: 'PUT', headers: JSON_HEADERS, body: call }, 405],
        ['other path', { path: '/other', headers: JSON_HEADERS, body: call }, 404],
        ['bad Origin', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid, Origin: 'http://evil.example' }, body: call }, 403],
        ['bad Host', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid, Host: 'evil.example' }, body: call }, 403],
        ['Host with another port', { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid, Host: '127.0.0.1:1' }, body: call }, 403],
        ['GET without text/event-stream', { method: 'GET', headers: { Accept: 'application/json', 'Mcp-Session-Id': sid } }, 406],
        ['GET unknown session', { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': 'a'.repeat(32) } }, 404],
        ['DELETE without a session', { method: 'DELETE' }, 400],
      ];
      for (const [what, opts, status] of cases) {
        const r = await request(port, opts);
        assert.equal(r.status, status, `${what}: ${r.status} ${r.body}`);
      }
      const bad = await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid }, body: '{"jsonrpc":' });
      assert.equal(bad.status, 400);
      assert.equal(JSON.parse(bad.body).error.code, -32700, bad.body);
      const big = await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid }, body: 'x'.repeat(100_000) });
      assert.equal(big.status, 413, 'a large body is read and dropped, then refused');
      // the allowed Origin and the session still work
      const ok = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid,
        Origin: `http://localhost:${port}`, 'MCP-Protocol-Version': '2025-06-18' }, body: call });
      assert.equal(ok.status, 200, ok.body);
      assert.equal(ok.headers['content-type'], 'application/json');
      assert.ok(JSON.parse(ok.body).result.tools.length > 0);
      const del = await request(port, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
      assert.equal(del.status, 200);
      const gone = await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid }, body: call });
      assert.equal(gone.status, 404, 'a deleted session is not found');
      const bare = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: {} }) });
      assert.equal(bare.status, 400, 'a 2026-07-28 request needs its headers');
      assert.equal(JSON.parse(bare.body).error.code, -32020);
      const env = { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } };
      const probe = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json',
        'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'server/discover' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: env }) });
      assert.equal(probe.status, 200, 'a 2026-07-28 probe without a session is answered');
      assert.equal(JSON.parse(probe.body).id, 'd');
      assert.ok(JSON.parse(probe.body).result.supportedVersions.includes('2026-07-28'), probe.body);
      assert.equal(probe.headers['mcp-session-id'], undefined, 'no session in that era');
      const health = await request(port, { method: 'GET', path: '/healthz' });
      assert.equal(health.status, 200);
      const ready = await request(port, { method: 'GET', path: '/readyz' });
      assert.equal(ready.status, 200);
    });
  });

test('a client that disconnects mid-call: the backend sees the cancellation',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const log = tmpPath(`http-cancel-${process.pid}.log`);
    await withChain(fixtureServer(['--cancel-log', log]), {}, async (chain) => {
      const sid = await rawSession(chain.port);
      for (const accept of ['text/event-stream, application/json', 'application/json']) {
        const before = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
        const req = http.request({ host: '127.0.0.1', port: chain.port, method: 'POST', path: '/mcp', agent: false,
          headers: { ...JSON_HEADERS, Accept: accept, 'Mcp-Session-Id': sid } });
        req.on('error', () => {});
        const gotHeaders = new Promise((r) => req.on('response', r));
        req.end(JSON.stringify({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call',
          params: { name: 'slow', arguments: { ms: 20_000, steps: 1 } } }));
        // no progress asked for: nothing is sent before the result, in either mode
        const early = await Promise.race([gotHeaders.then(() => true), sleep(300).then(() => false)]);
        assert.equal(early, false, 'no headers before the first line of the answer');
        req.destroy();
        await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').split('\n').filter(Boolean).length > before,
          { timeoutMs: 5000, what: `the backend to log a cancellation (${accept})` });
      }
      // the session lives on
      const r = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }) });
      assert.equal(r.status, 200, r.body);
    });
  });

test('the GET stream carries what is not tied to a request; event ids on every event',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain(fixtureServer(), {}, async (chain) => {
      const sid = await rawSession(chain.port);
      const events = [];
      let text = '';
      const req = http.request({ host: '127.0.0.1', port: chain.port, method: 'GET', path: '/mcp', agent: false,
        headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
      req.on('error', () => {});
      const res = await new Promise((r) => { req.on('response', r); req.end(); });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'text/event-stream');
      res.setEncoding('utf8');
      res.on('data', (c) => {
        text += c;
        let i;
        while ((i = text.indexOf('\n\n')) >= 0) {
          events.push(text.slice(0, i));
          text = text.slice(i + 2);
        }
      });
      const second = await request(chain.port, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
      assert.equal(second.status, 409, 'one GET stream per session');
      const r = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'notify', arguments: { kind: 'tools' } } }) });
      assert.equal(r.status, 200, r.body);
      // the whole answer at once: SSE as the client accepts it, one body with its length;
      // a retry hint first (no priming event: a 2025-06-18 client)
      assert.equal(r.headers['content-type'], 'text/event-stream');
      assert.ok(r.headers['content-length'], 'sent whole, with its length');
      assert.match(r.body, /^retry: \d+\n\nid: [1-9]\d*-1\nevent: message\ndata: /);
      await waitFor(() => events.some((e) => e.includes('notifications/tools/list_changed')),
        { what: 'list_changed on the GET stream' });
      for (const e of events) assert.match(e, /^id: 0-\d+\nevent: message\ndata: \{/);
      req.destroy();
    });
  });

test('a server→client request (sampling) reaches the SDK client on its GET stream, and its answer the backend',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const { CreateMessageRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    await withChain(fixtureServer(), {}, async (chain) => {
      const transport = new StreamableHTTPClientTransport(chain.url);
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: { sampling: {} } });
      const asked = [];
      client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        asked.push(req.params.messages[0].content.text);
        return { role: 'assistant', content: { type: 'text', text: 'sampled over http' }, model: 'm' };
      });
      await client.connect(transport);
      const r = await client.callTool({ name: 'sample', arguments: {} });
      assert.deepEqual(asked, ['hello']);
      assert.match(JSON.stringify(r), /sampled over http/);
      await transport.terminateSession();
      await client.close();
    });
  });

test('a batch is answered in a 2025-03-26 session and refused (400) in a 2025-06-18 one',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    // one chain each, so that each version is the backend's own first answer
    // (a later session of a shared backend is told the version it asked for
    // when it is older: http_inject.test.mjs checks that)
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'echo', arguments: { n: 2 } } },
    ]);
    const init = async (port, protocolVersion) => {
      const r = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { ...INIT, protocolVersion } }) });
      assert.equal(JSON.parse(r.body).result.protocolVersion, protocolVersion);
      const sid = r.headers['mcp-session-id'];
      await request(port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
      return sid;
    };
    await withChain(fixtureServer(), {}, async (chain) => {
      const old = await init(chain.port, '2025-03-26');
      const ok = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': old,
        'MCP-Protocol-Version': '2025-03-26' }, body: batch });
      assert.equal(ok.status, 200, ok.body);
      const answers = JSON.parse(ok.body);
      assert.deepEqual(answers.map((a) => a.id).sort(), ['a', 'b']);
      const sse = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': old }, body: batch });
      assert.equal(sse.status, 200, sse.body);
      assert.match(sse.body, /^retry: \d+\n\nid: \d+-1\nevent: message\ndata: \[/);
      const only = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': old },
        body: JSON.stringify([{ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }]) });
      assert.equal(only.status, 202, 'a batch of notifications is accepted');
      const mixed = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': old },
        body: JSON.stringify([{ bad: 1 }, { jsonrpc: '2.0', id: 'x', method: 'ping' }]) });
      assert.equal(mixed.status, 200, mixed.body);
      assert.deepEqual(JSON.parse(mixed.body).map((a) => a.id), [null, 'x'],
        'an answer array whose first id is null still reaches its POST');
    });
    await withChain(fixtureServer(), {}, async (chain) => {
      const neu = await init(chain.port, '2025-06-18');
      const no = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': neu }, body: batch });
      assert.equal(no.status, 400, no.body);
      assert.equal(JSON.parse(no.body).error.code, -32600);
    });
  });

test('an idle session expires (then 404); a connection over maxConnections gets 503',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const extra = { listen: { sessionIdleMs: 1000, maxConnections: 2 } };
    await withChain(fixtureServer(), { extra }, async (chain) => {
      const sid = await rawSession(chain.port);
      await waitFor(() => /session #1 ended \(expired after being idle\)/.test(chain.stderr),
        { timeoutMs: 5000, what: 'the session to expire' });
      const r = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
      assert.equal(r.status, 404);
      // two open streams hold both connections; a third is refused
      const s1 = await rawSession(chain.port);
      const s2 = await rawSession(chain.port);
      const open = [];
      for (const s of [s1, s2]) {
        const req = http.request({ host: '127.0.0.1', port: chain.port, method: 'GET', path: '/mcp', agent: false,
          headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': s } });
        req.on('error', () => {});
        const res = await new Promise((resolve) => { req.on('response', resolve); req.end(); });
        assert.equal(res.statusCode, 200);
        open.push(req);
      }
      const third = await request(chain.port, { method: 'GET', path: '/healthz' }).catch((e) => ({ status: 0, body: String(e) }));
      const busy = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': s1 },
        body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }) });
      assert.equal(busy.status, 503, busy.body);
      assert.ok(third.status === 200 || third.status === 503, `healthz: ${third.status}`);
      for (const req of open) req.destroy();
      await waitFor(async () => (await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': s1,
        Accept: 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }) })).status === 200,
      { what: 'the connections to be free again' });
    });
  });

test('SIGTERM drains: no new connection, the open request still gets its answer, then exit 0',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const chain = await startChain(fixtureServer(), { extra: { shutdownGraceMs: 5000 } });
    try {
      const sid = await rawSession(chain.port);
      const slow = request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow', arguments: { ms: 800, steps: 1 } } }) });
      await waitFor(() => /tools\/call|http#1/.test(chain.stderr), { what: 'the call to start' });
      await sleep(100);
      chain.proc.kill('SIGTERM');
      await waitFor(() => /http: draining/.test(chain.stderr), { what: 'the drain to begin' });
      const refused = await request(chain.port, { method: 'GET', path: '/healthz' }).then(() => false, () => true);
      assert.ok(refused, 'a new connection is refused while draining');
      const r = await slow;
      assert.equal(r.status, 200, r.body);
      assert.equal(JSON.parse(r.body).result.content[0].text, 'done');
      const end = await Promise.race([chain.exited, sleep(8000).then(() => null)]);
      assert.deepEqual(end, { code: 0, signal: null });
      assert.match(chain.stderr, /session #1 ended \(mcp-chain is shutting down\)/);
      assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error/);
    } catch (e) {
      e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
      throw e;
    } finally {
      await chain.stop();
    }
  });

test('a port already in use: exit 1 at once with the address named, no backend started, nothing leaked',
  { ...T, skip: SKIP_NO_CHAIN }, async () => {
    const busy = net.createServer();
    await new Promise((r) => busy.listen(0, '127.0.0.1', r));
    const port = busy.address().port;
    const marker = tmpPath('port-busy-backend-started');
    // a backend that leaves a mark when it runs: it must never run
    const server = { command: process.execPath,
      args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran'); setInterval(() => {}, 1000)`] };
    const t0 = Date.now();
    try {
      const proc = spawn(CHAIN, ['--config', writeConfig(server), '--listen', `127.0.0.1:${port}`],
        { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      proc.stderr.on('data', (c) => { stderr += c; });
      const code = await new Promise((r) => proc.once('exit', (c) => r(c)));
      assert.equal(code, 1, stderr);   // under ASan a leak would make this 23
      assert.ok(Date.now() - t0 < 5000, 'it ends at once');
      assert.match(stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1 port ${port}: Address already in use`));
      assert.doesNotMatch(stderr, /AddressSanitizer|LeakSanitizer|runtime error/);
      await sleep(300);
      assert.ok(!existsSync(marker), 'the backend was never started');
    } finally {
      busy.close();
    }
  });

test('a client that stops reading its SSE stream is dropped at streamBufferBytes; its request is cancelled',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const log = tmpPath(`http-stall-${process.pid}.log`);
    const extra = { listen: { streamBufferBytes: 65536 } };
    await withChain(fixtureServer(['--cancel-log', log]), { extra }, async (chain) => {
      const sid = await rawSession(chain.port);
      const body = JSON.stringify({ jsonrpc: '2.0', id: 'flood', method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 3000, steps: 60000 }, _meta: { progressToken: 'p' } } });
      const sock = net.connect(chain.port, '127.0.0.1');
      sock.on('error', () => {});
      await new Promise((r) => sock.once('connect', r));
      sock.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${chain.port}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${sid}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      sock.pause();  // never read: the kernel's buffers fill, then ours
      await waitFor(() => /dropped a POST stream whose client does not read/.test(chain.stderr),
        { timeoutMs: 20_000, what: 'the stalled stream to be dropped' });
      // (the backend logs its own id for the request: the chain's, not "flood")
      await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').trim().split('\n').length === 1,
        { timeoutMs: 5000, what: 'the backend to see the cancellation' });
      sock.destroy();
      const r = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
      assert.equal(r.status, 200, 'the session lives on');
    });
  });

test('a connection whose headers stall is closed after connectionTimeoutMs',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain(fixtureServer(), { extra: { listen: { connectionTimeoutMs: 1000 } } }, async (chain) => {
      const sock = net.connect(chain.port, '127.0.0.1');
      sock.on('error', () => {});
      await new Promise((r) => sock.once('connect', r));
      const t0 = Date.now();
      const closed = new Promise((r) => sock.once('close', r));
      sock.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n');  // and nothing more
      await Promise.race([closed, sleep(5000).then(() => { throw new Error('the stalled connection stayed open'); })]);
      const took = Date.now() - t0;
      assert.ok(took >= 900 && took < 4000, `closed after ${took} ms`);
    });
  });

/** Opens the GET stream of SID (again while the last one's end is not yet
 * seen: 409); collects its events as {id, data}. */
async function openGet(port, sid, lastEventId) {
  const headers = { Accept: 'text/event-stream', 'Mcp-Session-Id': sid };
  if (lastEventId !== undefined) headers['Last-Event-ID'] = String(lastEventId);
  let req, res;
  for (let tries = 0; ; tries++) {
    req = http.request({ host: '127.0.0.1', port, method: 'GET', path: '/mcp', agent: false, headers });
    req.on('error', () => {});
    res = await new Promise((r) => { req.on('response', r); req.end(); });
    if (res.statusCode !== 409 || tries > 50) break;
    req.destroy();
    await sleep(100);
  }
  assert.equal(res.statusCode, 200);
  const get = { req, events: [], closed: false };
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (c) => {
    text += c;
    let i;
    while ((i = text.indexOf('\n\n')) >= 0) {
      const ev = text.slice(0, i);
      text = text.slice(i + 2);
      const [, id, seq] = /^id: (0-(\d+))\n/.exec(ev);
      get.events.push({ id, seq: Number(seq), data: JSON.parse(/\ndata: (.*)$/.exec(ev)[1]) });
    }
  });
  res.on('close', () => { get.closed = true; });
  return get;
}

test('a GET stream resumed with Last-Event-ID gets the events after it again, then what was held',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain(fixtureServer(), {}, async (chain) => {
      const sid = await rawSession(chain.port);
      const notify = async (kind, id) => {
        const r = await request(chain.port, { headers: { ...JSON_HEADERS, Accept: 'application/json', 'Mcp-Session-Id': sid },
          body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'notify', arguments: { kind } } }) });
        assert.equal(r.status, 200, r.body);
      };
      const first = await openGet(chain.port, sid);
      await notify('tools', 10);
      await notify('prompts', 11);
      await waitFor(() => first.events.length === 2, { what: 'two events on the GET stream' });
      first.req.destroy();
      await sleep(200);
      await notify('resources', 12);  // held: no GET stream open (or sent on the dying one)
      const again = await openGet(chain.port, sid, first.events[0].id);
      await waitFor(() => again.events.length === 2, { what: 'the replayed and the held event' });
      assert.deepEqual(again.events.map((e) => e.data.method),
        ['notifications/prompts/list_changed', 'notifications/resources/list_changed']);
      assert.equal(again.events[0].id, first.events[1].id, 'a replayed event keeps its id');
      assert.equal(again.events[1].seq, first.events[1].seq + 1, 'the GET stream numbers its events in order');
      again.req.destroy();
      const fromPost = await openGet(chain.port, sid, 999999);
      await notify('tools', 13);
      await waitFor(() => fromPost.events.length === 1, { what: 'the new event' });
      assert.equal(fromPost.events[0].data.method, 'notifications/tools/list_changed', 'an unknown id replays nothing');
      fromPost.req.destroy();
    });
  });

test('even at debug level, no session id and no Authorization value reaches the log',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain(fixtureServer(), { env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
      const sid = await rawSession(chain.port);
      const auth = { Authorization: 'Bearer s3cret-token-value' };
      const r = await request(chain.port, { headers: { ...JSON_HEADERS, ...auth, 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: {} } }) });
      assert.equal(r.status, 200);
      const bad = await request(chain.port, { headers: { ...JSON_HEADERS, ...auth, 'Mcp-Session-Id': 'e'.repeat(32) },
        body: '{}' });
      assert.equal(bad.status, 404);
      const del = await request(chain.port, { method: 'DELETE', headers: { ...auth, 'Mcp-Session-Id': sid } });
      assert.equal(del.status, 200);
      await waitFor(() => /session #1 ended/.test(chain.stderr), { what: 'the session to end' });
      assert.match(chain.stderr, /debug: /, 'debug logging was on');
      assert.doesNotMatch(chain.stderr, new RegExp(sid), 'no session id in the log');
      assert.doesNotMatch(chain.stderr, /s3cret-token-value/, 'no Authorization value in the log');
    });
  });
