// GET /metrics on `mcp-chain --listen`: Prometheus text exposition of the
// counters kept where things happen (the front: sessions, connections,
// responses by status, bytes, requests by method and outcome and their
// latency histogram; the chain: requests, responses by outcome, its own
// errors by kind, cancellations; each backend: state, restarts, requests,
// responses by outcome). Host/Origin checked like the MCP endpoint, auth too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, fixtureServer, waitFor, sleep } from './lib.mjs';
import { withChain, request, openStream } from './http_lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };

/** GET /metrics parsed: {'name{labels}': value}; checks every line's shape. */
async function metrics(port, headers = {}) {
  const r = await request(port, { method: 'GET', path: '/metrics', headers });
  assert.equal(r.status, 200, r.body);
  assert.match(r.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const out = {};
  const types = {};
  for (const line of r.body.split('\n')) {
    const t = /^# TYPE ([a-z_]+) (counter|gauge|histogram)$/.exec(line);
    if (t) types[t[1]] = t[2];
    if (!line || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    const m = /^([a-z_]+(?:\{[a-z_]+="(?:[^"\\]|\\.)*"(?:,[a-z_]+="(?:[^"\\]|\\.)*")*\})?) (\d+(?:\.\d+)?(?:e[-+]?\d+)?)$/.exec(line);
    assert.ok(m, `a valid exposition line: ${JSON.stringify(line)}`);
    const name = m[1].replace(/\{.*/, '');
    assert.ok(types[name] || types[name.replace(/_(bucket|sum|count)$/, '')] === 'histogram',
      `a TYPE line before ${m[1]}`);
    out[m[1]] = Number(m[2]);
  }
  return out;
}

test('/metrics counts sessions, HTTP statuses, bytes, requests by outcome, chain errors, cancellations and backend states',
  T, async () => {
    await withChain({ ...fixtureServer(), scope: 'shared' }, { extra: { shutdownGraceMs: 2000 } }, async (chain) => {
      const port = chain.port;
      const m0 = await metrics(port);
      assert.equal(m0['mcp_chain_http_sessions{transport="streamable"}'], 0);
      // the backend is initialized with the first client's parameters: not before
      assert.equal(m0['mcp_chain_backend_up{backend="backend"}'], 0);
      assert.equal(m0['mcp_chain_backend_state{backend="backend",state="started"}'], 1);

      const transport = new StreamableHTTPClientTransport(chain.url);
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
      await client.connect(transport);
      await client.callTool({ name: 'echo', arguments: { pad: 'x'.repeat(1000) } });
      const toolError = await client.callTool({ name: 'big', arguments: { bytes: -1 } });
      assert.equal(toolError.isError, true);
      await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
      const sse = await openStream(port, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      await sse.next((e) => e.event === 'endpoint');
      assert.equal((await request(port, { headers: { 'Content-Type': 'application/json', 'Mcp-Session-Id': 'f'.repeat(32) },
        body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })).status, 404);

      const m1 = await metrics(port);
      assert.equal(m1['mcp_chain_backend_up{backend="backend"}'], 1);
      assert.equal(m1['mcp_chain_backend_state{backend="backend",state="ready"}'], 1);
      assert.equal(m1['mcp_chain_http_sessions{transport="streamable"}'], 1);
      assert.equal(m1['mcp_chain_http_sessions{transport="sse"}'], 1);
      assert.equal(m1['mcp_chain_http_sessions_started_total'], 2);
      assert.ok(m1['mcp_chain_http_responses_total{code="200"}'] >= 4);
      assert.ok(m1['mcp_chain_http_responses_total{code="202"}'] >= 1, 'notifications/initialized');
      assert.equal(m1['mcp_chain_http_responses_total{code="404"}'], 1);
      assert.ok(m1['mcp_chain_http_received_bytes_total'] > 1000, 'the echo body came in');
      assert.ok(m1['mcp_chain_http_sent_bytes_total'] > 1000, 'and went out');
      assert.ok(m1['mcp_chain_http_connections'] >= 2, 'the SSE stream and this request');
      assert.equal(m1['mcp_chain_requests_total{from="client"}'], 3, 'three tools/call (the session answers initialize itself)');
      assert.equal(m1['mcp_chain_responses_total{outcome="tool_error"}'], 1);
      assert.equal(m1['mcp_chain_responses_total{outcome="error"}'], 1);
      assert.ok(m1['mcp_chain_responses_total{outcome="ok"}'] >= 1);

      // a call its client leaves: a cancellation; a backend that dies mid-call: responder_gone, a restart
      const ac = new AbortController();
      const slow = client.callTool({ name: 'slow', arguments: { ms: 10_000, steps: 1 } }, undefined, { signal: ac.signal });
      await sleep(200);
      ac.abort();
      await assert.rejects(slow);
      await assert.rejects(client.callTool({ name: 'crash', arguments: { code: 3 } }));
      const m2 = await waitFor(async () => {
        const m = await metrics(port);
        return m['mcp_chain_backend_restarts_total{backend="backend"}'] >= 1 &&
          m['mcp_chain_backend_up{backend="backend"}'] === 1 && m;
      }, { timeoutMs: 10_000, what: 'the backend to be restarted and ready' });
      assert.equal(m2['mcp_chain_cancelled_total'], 1);
      assert.equal(m2['mcp_chain_errors_total{kind="responder_gone"}'], 1);
      assert.equal(m2['mcp_chain_requests_open'], 0);
      assert.ok(m2['mcp_chain_backend_requests_total{backend="backend"}'] >= 6);

      sse.close();
      await transport.terminateSession();
      await client.close();
      await waitFor(async () => (await metrics(port))['mcp_chain_http_sessions{transport="sse"}'] === 0,
        { what: 'the SSE session to end' });
      const bad = await request(port, { method: 'GET', path: '/metrics', headers: { Host: 'evil.example' } });
      assert.equal(bad.status, 403, 'Host checked');
    });
  });

test('/metrics needs the bearer token when auth is configured', T, async () => {
  const tok = 'metrics-' + 'M'.repeat(24);
  const middleware = [{ use: 'auth', env: false,
    tokens: [{ sha256: createHash('sha256').update(tok).digest('hex'), principal: 'ops' }] }];
  await withChain({ ...fixtureServer(), scope: 'shared' }, { extra: { middleware } }, async (chain) => {
    const r = await request(chain.port, { method: 'GET', path: '/metrics' });
    assert.equal(r.status, 401);
    assert.match(r.headers['www-authenticate'], /^Bearer/);
    const m = await metrics(chain.port, { Authorization: `Bearer ${tok}` });
    assert.equal(m['mcp_chain_backend_up{backend="backend"}'], 0);
    assert.ok(Object.keys(m).some((k) => k.startsWith('mcp_chain_backend_state{backend="backend"')));
    assert.equal((await request(chain.port, { method: 'GET', path: '/healthz' })).status, 200, 'health stays open');
  });
});

/** The histogram of METHOD in M: its buckets as written ([le, cumulative count]), sum and count. */
function histogram(m, method) {
  const name = 'mcp_chain_http_request_duration_seconds';
  const buckets = [];
  for (const [k, v] of Object.entries(m)) {
    const b = new RegExp(`^${name}_bucket\\{method="${method}",le="([^"]+)"\\}$`).exec(k);
    if (b) buckets.push([b[1], v]);
  }
  const le = (x) => buckets.find(([l]) => l === x)?.[1];
  return { buckets, le, sum: m[`${name}_sum{method="${method}"}`], count: m[`${name}_count{method="${method}"}`] };
}

test('/metrics: requests by method and outcome, their latency histogram, responses by backend and outcome', T, async () => {
  await withChain({ ...fixtureServer(), scope: 'shared' }, {}, async (chain) => {
    const port = chain.port;
    const transport = new StreamableHTTPClientTransport(chain.url);
    const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
    await client.connect(transport);
    await client.listTools();
    const t0 = Date.now();
    await client.callTool({ name: 'slow', arguments: { ms: 300 } });            // ok, >= 0.3 s
    const toolError = await client.callTool({ name: 'big', arguments: { bytes: -1 } });
    assert.equal(toolError.isError, true);
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));  // a JSON-RPC error
    const wall = (Date.now() - t0) / 1000;

    const m = await metrics(port);
    const req = (method, outcome) => m[`mcp_chain_http_requests_total{method="${method}",outcome="${outcome}"}`];
    assert.equal(req('tools/call', 'ok'), 1);
    assert.equal(req('tools/call', 'tool_error'), 1);
    assert.equal(req('tools/call', 'error'), 1);
    assert.equal(req('tools/call', 'given_up'), 0);
    assert.equal(req('tools/list', 'ok'), 1);
    assert.equal(req('initialize', 'ok'), 1);
    assert.equal(req('prompts/list', 'ok'), undefined, 'a method never seen has no series');

    const calls = histogram(m, 'tools/call');
    assert.equal(calls.count, 3, 'three tools/call timed');
    assert.equal(calls.buckets.length, 18, '17 bounds from 100 us to 30 s, and +Inf');
    assert.deepEqual([calls.buckets[0][0], calls.buckets.at(-2)[0], calls.buckets.at(-1)[0]], ['0.0001', '30', '+Inf']);
    assert.equal(calls.le('+Inf'), 3);
    assert.equal(calls.le('30'), 3);
    const les = calls.buckets.slice(0, -1).map(([l]) => Number(l));
    assert.deepEqual(les, [...les].sort((a, b) => a - b), 'bounds in order');
    const counts = calls.buckets.map(([, v]) => v);
    assert.deepEqual(counts, [...counts].sort((a, b) => a - b), 'cumulative');
    assert.ok(calls.le('0.25') <= 2, 'the 300 ms call is above 0.25 s');
    assert.ok(calls.sum >= 0.3 && calls.sum <= wall + 0.05, `sum ${calls.sum} s, the calls took ${wall} s`);
    assert.equal(histogram(m, 'tools/list').count, 1);
    assert.equal(histogram(m, 'initialize').count, 1);

    const be = (outcome) => m[`mcp_chain_backend_responses_total{backend="backend",outcome="${outcome}"}`];
    assert.equal(be('ok'), 3, 'its initialize (the first client\'s parameters), tools/list, the slow call');
    assert.equal(be('tool_error'), 1);
    assert.equal(be('error'), 1);

    // a client that leaves mid-call (a JSON response: nothing to resume): given up, not timed
    const req2 = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp', agent: false,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'Mcp-Session-Id': transport.sessionId } });
    req2.on('error', () => {});
    req2.end(JSON.stringify({ jsonrpc: '2.0', id: 'gone', method: 'tools/call', params: { name: 'slow', arguments: { ms: 10_000 } } }));
    await sleep(300);
    req2.destroy();
    const m2 = await waitFor(async () => {
      const x = await metrics(port);
      return x['mcp_chain_http_requests_total{method="tools/call",outcome="given_up"}'] === 1 && x;
    }, { what: 'the call to be counted as given up' });
    assert.equal(histogram(m2, 'tools/call').count, 3, 'a request never answered is not timed');
    await transport.terminateSession();
    await client.close();
  });
});

test('a backend replaced by reloads is listed once in /metrics, and its old processes are freed', T, async () => {
  const { writeFileSync } = await import('node:fs');
  const { writeConfig, descendants } = await import('./lib.mjs');
  const entry = (args) => ({ ...fixtureServer(args), scope: 'shared' });
  const file = writeConfig(entry([]));
  await withChain(null, { config: file }, async (chain) => {
    const { openSession } = await import('./http_lib.mjs');
    const session = await openSession(chain.port);   // a shared backend starts serving at a first initialize
    await waitFor(() => /backend: ready/.test(chain.stderr), { what: 'the backend to be ready' });
    const processes = descendants(chain.proc.pid).length;   // the backend, and the watchdog
    for (let i = 1; i <= 6; i++) {
      // the command changes every time (one flag more or less): replaced, not kept
      writeFileSync(file, JSON.stringify({ mcpServers: { backend: entry(i % 2 ? ['--string-ids'] : []) } }));
      const before = chain.stderr.length;
      chain.proc.kill('SIGHUP');
      await waitFor(() => chain.stderr.slice(before).includes('reload: done'), { what: `reload ${i}` });
      await waitFor(() => /backend: ready/.test(chain.stderr.slice(before)), { what: `replacement ${i} ready` });
    }
    const r = await request(chain.port, { method: 'GET', path: '/metrics' });
    assert.equal(r.status, 200);
    const up = r.body.split('\n').filter((l) => l.startsWith('mcp_chain_backend_up{'));
    assert.deepEqual(up, ['mcp_chain_backend_up{backend="backend"} 1'], 'one series per backend name');
    const states = r.body.split('\n').filter((l) => l.startsWith('mcp_chain_backend_state{'));
    assert.deepEqual(states, ['mcp_chain_backend_state{backend="backend",state="ready"} 1']);
    // the replaced processes end; only the one in service is left
    await waitFor(() => descendants(chain.proc.pid).length === processes, { what: 'one backend process left' });
    // still serving the session through the replacement
    const call = await request(chain.port, { headers: { ...session.h, Accept: 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: {} } }) });
    assert.equal(call.status, 200, call.body);
    assert.ok(JSON.parse(call.body).result, call.body);
    session.get.close();
  });
});
