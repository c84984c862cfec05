// The legacy HTTP+SSE transport (2024-11-05) of `mcp-chain --listen`:
// GET /sse opens a session whose first event names the POST endpoint;
// POSTs there get 202 and every answer goes down the stream. Driven by the
// official SDK's SSEClientTransport, and by raw requests for what it never sends.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  SKIP_NO_CHAIN, SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, everythingServer, fixtureServer, waitFor, sleep, tmpPath,
} from './lib.mjs';
import { withChain, request, openStream } from './http_lib.mjs';

const T = { timeout: 60_000 };
const INIT = {
  protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw-sse', version: '1' },
};
const J = { 'Content-Type': 'application/json' };
/** The id of a message event, or undefined. */
const idOf = (e) => (e.event === 'message' ? JSON.parse(e.data).id : undefined);

test('SSEClientTransport through mcp-chain to server-everything: initialize, tools/list, a call with progress, the session ends with its stream',
  { ...T, skip: SKIP_NO_CHAIN }, async (t) => {
    await withChain(everythingServer(), {}, async (chain) => {
      assert.match(chain.stderr, /legacy HTTP\+SSE \(2024-11-05\) on http:\/\/127\.0\.0\.1:\d+\/sse/);
      const transport = new SSEClientTransport(new URL(`${chain.base}/sse`));
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
      const errors = [];
      client.onerror = (e) => errors.push(e);
      t.after(() => client.close());
      await client.connect(transport);
      assert.equal(client.getServerVersion().name.length > 0, true);
      assert.ok(client.getServerCapabilities().tools, 'the backend\'s capabilities came back');
      const tools = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('echo') && tools.includes('trigger-long-running-operation'), tools.join());
      const echo = await client.callTool({ name: 'echo', arguments: { message: 'über sse' } });
      assert.match(echo.content[0].text, /über sse/);
      const events = [];
      const r = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        undefined, { onprogress: (p) => events.push(p.progress) });
      events.push('result');
      assert.match(JSON.stringify(r), /Long running operation completed/);
      // the stream keeps order; the SDK may drop the last progress when its
      // response follows at once (MCP-NOTES), as over Streamable HTTP
      assert.deepEqual(events.slice(0, 3), [1, 2, 3], 'progress arrives on the stream before the result');
      assert.equal(events.at(-1), 'result');
      const endpoint = transport._endpoint;
      assert.match(endpoint.pathname + endpoint.search, /^\/messages\?sessionId=[0-9a-f]{32}$/);
      await client.close();
      await waitFor(() => /session #1 ended \(its HTTP\+SSE stream closed\)/.test(chain.stderr),
        { what: 'the session to end with its stream' });
      const late = await request(chain.port, { path: endpoint.pathname + endpoint.search, headers: J,
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }) });
      assert.equal(late.status, 404, 'the session is gone with its stream');
      // the one error the SDK itself makes: the last progress, handled after its response
      assert.deepEqual(errors.map(String).filter((e) => !/progress notification for an unknown token.*"progress":4/.test(e)), []);
      assert.doesNotMatch(chain.stderr, new RegExp(endpoint.searchParams.get('sessionId')),
        'the session id never reaches the log');
    });
  });

test('HTTP+SSE: a server→client request (sampling) goes down the stream and its answer, POSTed, reaches the backend',
  { ...T, skip: SKIP_NO_FIXTURE }, async (t) => {
    await withChain(fixtureServer(), {}, async (chain) => {
      const transport = new SSEClientTransport(new URL(`${chain.base}/sse`));
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: { sampling: {} } });
      const asked = [];
      client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        asked.push(req.params.messages[0].content.text);
        return { role: 'assistant', content: { type: 'text', text: 'sampled over sse' }, model: 'm' };
      });
      t.after(() => client.close());
      await client.connect(transport);
      const r = await client.callTool({ name: 'sample', arguments: {} });
      assert.deepEqual(asked, ['hello']);
      assert.match(JSON.stringify(r), /sampled over sse/);
      await client.close();
    });
  });

test('HTTP+SSE raw: endpoint event, 202 and the answer on the stream, 400/404/405/403/415, not reachable as Mcp-Session-Id, ssePath null turns it off',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain(fixtureServer(), {}, async (chain) => {
      const port = chain.port;
      const s = await openStream(port, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      assert.equal(s.status, 200);
      assert.match(s.headers['content-type'], /^text\/event-stream/);
      const ep = await s.next((e) => e.event === 'endpoint', 'the endpoint event');
      assert.equal(s.events[0], ep, 'the endpoint is the first event');
      assert.match(ep.data, /^\/messages\?sessionId=[0-9a-f]{32}$/);
      const sid = ep.data.split('=')[1];
      const post = (body, headers = {}, path = ep.data) =>
        request(port, { path, headers: { ...J, ...headers }, body });
      const init = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }));
      assert.equal(init.status, 202);
      const answer = await s.next((e) => idOf(e) === 1, 'the initialize answer');
      assert.equal(JSON.parse(answer.data).result.protocolVersion, '2024-11-05');
      assert.equal((await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).status, 202);
      assert.equal((await post(JSON.stringify({ jsonrpc: '2.0', id: 'two', method: 'tools/list' }))).status, 202);
      const list = await s.next((e) => idOf(e) === 'two', 'tools/list');
      assert.ok(JSON.parse(list.data).result.tools.length > 0);

      const bad = [
        ['not JSON', () => post('{oops'), 400, /-32700/],
        ['no sessionId', () => post('{}', {}, '/messages'), 400, /sessionId/],
        ['unknown sessionId', () => post('{}', {}, `/messages?sessionId=${'f'.repeat(32)}`), 404, /not found/],
        ['bad version header', () => post('{}', { 'MCP-Protocol-Version': '1999-01-01' }), 400, /MCP-Protocol-Version/],
        ['text/plain', () => post('{}', { 'Content-Type': 'text/plain' }), 415, /Media Type/],
        ['bad Origin', () => post('{}', { Origin: 'http://evil.example' }), 403, /Origin/],
        ['GET /messages', () => request(port, { method: 'GET', path: ep.data }), 405, /Method/],
        ['POST /sse', () => request(port, { path: '/sse', headers: J, body: '{}' }), 405, /Method/],
        ['GET /sse bad Host', () => request(port, { method: 'GET', path: '/sse', headers: { Host: 'evil.example' } }), 403, /Host/],
        ['its id as Mcp-Session-Id', () => request(port, { headers: { ...J, Accept: 'application/json', 'Mcp-Session-Id': sid },
          body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }) }), 404, /not found/],
      ];
      for (const [what, fn, status, body] of bad) {
        const r = await fn();
        assert.equal(r.status, status, `${what}: ${r.status} ${r.body}`);
        assert.match(r.body, body, what);
      }
      s.close();
      await waitFor(() => /ended \(its HTTP\+SSE stream closed\)/.test(chain.stderr), { what: 'the session end' });
      assert.equal((await post(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list' }))).status, 404);
    });
    await withChain(fixtureServer(), { extra: { listen: { ssePath: null } } }, async (chain) => {
      assert.doesNotMatch(chain.stderr, /legacy HTTP\+SSE/);
      const r = await request(chain.port, { method: 'GET', path: '/sse' });
      assert.equal(r.status, 404);
    });
  });

test('HTTP+SSE: a client that leaves mid-call ends its session and the backend sees the cancellation',
  { ...T, skip: SKIP_NO_FIXTURE }, async () => {
    const log = tmpPath(`sse-cancel-${process.pid}.log`);
    await withChain(fixtureServer(['--cancel-log', log]), {}, async (chain) => {
      const s = await openStream(chain.port, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      const ep = (await s.next((e) => e.event === 'endpoint')).data;
      const post = (m) => request(chain.port, { path: ep, headers: J, body: JSON.stringify(m) });
      await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT });
      await s.next((e) => idOf(e) === 1);
      await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
      assert.equal((await post({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 20_000, steps: 1 } } })).status, 202);
      await sleep(300);
      s.close();
      await waitFor(() => /ended \(its HTTP\+SSE stream closed\)/.test(chain.stderr), { what: 'the session end' });
      await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').trim().length > 0,
        { what: 'the backend to log the cancellation' });
      const r = await request(chain.port, { method: 'GET', path: '/healthz' });
      assert.equal(r.status, 200, 'mcp-chain lives on');
    });
  });
