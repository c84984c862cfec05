// The "auth" module on the HTTP front: the request's "Authorization: Bearer"
// token reaches the modules through the core (the session's credential),
// is checked in constant time against the configured SHA-256 hashes,
// names the principal that policy sees, is never forwarded to a backend
// and never logged; missing or unknown -> 401 with WWW-Authenticate: Bearer.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

import { SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, fixtureServer } from './lib.mjs';
import { withChain, request, openStream } from './http_lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };
const ALICE = 'alice-' + 'A'.repeat(20) + '-secret';
const BOB = 'bob-' + 'B'.repeat(20) + '-secret';
const WRONG = 'wrong-' + 'W'.repeat(20) + '-guess';
const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const MW = [
  { use: 'auth', tokens: [{ sha256: sha256(ALICE), principal: 'alice' }, { sha256: sha256(BOB), principal: 'bob' }], env: false },
  { use: 'policy', rules: [{ deny: ['echo'], clients: ['bob'] }, { allow: ['*'], clients: ['alice'] }] },
  { use: 'log', params: true },
];
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'alice', version: '1' } };
const H = { 'Content-Type': 'application/json', Accept: 'application/json' };
const auth = (tok) => (tok ? { Authorization: `Bearer ${tok}` } : {});

/** initialize (+ initialized) with TOKEN: the response and the session id. */
async function init(port, token) {
  const r = await request(port, { headers: { ...H, ...auth(token) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
  const sid = r.headers['mcp-session-id'];
  if (sid)
    await request(port, { headers: { ...H, ...auth(token), 'Mcp-Session-Id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  return { r, sid };
}

/** tools/call echo in session SID with TOKEN: the HTTP response. */
const echo = (port, sid, token, id = 2) => request(port, {
  headers: { ...H, ...auth(token), 'Mcp-Session-Id': sid },
  body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { x: 1 } } }),
});

test('HTTP bearer: 401 without or with an unknown token; the token names the principal policy sees; never forwarded, never logged',
  T, async () => {
    await withChain(fixtureServer(), { extra: { middleware: MW }, env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
      const port = chain.port;
      for (const [what, tok, err] of [['no token', null, false], ['unknown token', WRONG, true], ['another scheme', null, false]]) {
        const headers = what === 'another scheme' ? { ...H, Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } : { ...H, ...auth(tok) };
        const r = await request(port, { headers,
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
        assert.equal(r.status, 401, `${what}: ${r.body}`);
        assert.match(r.headers['www-authenticate'], /^Bearer realm="mcp-chain"/, what);
        assert.equal(/error="invalid_token"/.test(r.headers['www-authenticate']), err, what);
        assert.equal(r.headers['mcp-session-id'], undefined, `${what}: no session`);
        assert.match(JSON.parse(r.body).error.message, /Unauthorized/);
      }
      const sse = await request(port, { method: 'GET', path: '/sse' });
      assert.equal(sse.status, 401, 'the legacy stream too');
      assert.equal((await request(port, { method: 'GET', path: '/healthz' })).status, 200, 'health needs no token');

      const alice = await init(port, ALICE);
      assert.equal(alice.r.status, 200, alice.r.body);
      const a = await echo(port, alice.sid, ALICE);
      assert.equal(a.status, 200, a.body);
      const seen = JSON.parse(a.body).result.content[0].text;
      assert.match(seen, /"name":"echo"/, 'alice may call echo');
      assert.ok(!seen.includes(ALICE) && !/authorization|bearer/i.test(seen), `the backend never sees the token: ${seen}`);

      const bob = await init(port, BOB);
      const b = JSON.parse((await echo(port, bob.sid, BOB)).body);
      const refused = b.error?.message ?? (b.result?.isError && b.result.content[0].text);
      assert.match(String(refused), /not allowed|denied|refused/i, `policy refuses bob: ${JSON.stringify(b)}`);

      const stolen = await echo(port, alice.sid, BOB, 3);
      assert.equal(stolen.status, 401, 'a session is bound to its token');
      assert.match(JSON.parse(stolen.body).error.message, /another bearer token/);
      assert.equal((await echo(port, alice.sid, null, 4)).status, 401, 'and every request carries it');
      assert.equal((await echo(port, alice.sid, WRONG, 5)).status, 401);

      for (const secret of [ALICE, BOB, WRONG])
        assert.ok(!chain.stderr.includes(secret), 'no token in any log line (debug level)');
      assert.match(chain.stderr, /"client":"alice"/, 'the log names the principal');
    });
  });

test('HTTP bearer with the SDK clients: Streamable HTTP and HTTP+SSE with requestInit headers', T, async () => {
  await withChain(fixtureServer(), { extra: { middleware: MW } }, async (chain) => {
    const requestInit = { headers: { Authorization: `Bearer ${ALICE}` } };
    for (const transport of [
      new StreamableHTTPClientTransport(chain.url, { requestInit }),
      new SSEClientTransport(new URL(`${chain.base}/sse`), { requestInit }),
    ]) {
      const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
      try {
        await client.connect(transport);
        const r = await client.callTool({ name: 'echo', arguments: { via: transport.constructor.name } });
        assert.match(r.content[0].text, /"via"/);
      } finally {
        await client.close();
      }
    }
    const noToken = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
    await assert.rejects(noToken.connect(new StreamableHTTPClientTransport(chain.url)), /401|Unauthorized/);
    await noToken.close();
  });
});
