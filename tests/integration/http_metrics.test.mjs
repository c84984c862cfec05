// GET /metrics on `mcp-chain --listen`: Prometheus text exposition of the
// counters kept where things happen (the front: sessions, connections,
// responses by status, bytes; the chain: requests, responses by outcome,
// its own errors by kind, cancellations; each backend: state, restarts,
// requests). Host/Origin checked like the MCP endpoint, auth too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

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
  for (const line of r.body.split('\n')) {
    if (!line || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    const m = /^([a-z_]+(?:\{[a-z_]+="(?:[^"\\]|\\.)*"(?:,[a-z_]+="(?:[^"\\]|\\.)*")*\})?) (\d+)$/.exec(line);
    assert.ok(m, `a valid exposition line: ${JSON.stringify(line)}`);
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
