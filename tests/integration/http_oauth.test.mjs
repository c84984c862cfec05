// The HTTP front as an OAuth 2.1 resource server (the auth module's "oauth"
// options), driven through the built binary against a real OpenID provider
// (fixtures/oidc-server.mjs, oidc-provider) and the official SDK's OAuth
// client: the SDK end to end (401 -> RFC 9728 -> RFC 8414 -> DCR -> code +
// PKCE + resource), the challenge and the metadata document, every kind of
// bad token (401 invalid_token, nothing reaches the backend, never logged),
// insufficient scope (403), a session that survives a refreshed token, JWKS
// trouble (last good keys, garbage, slow, bounded refetch on unknown kid),
// introspection of opaque tokens (cached), and static tokens alongside.
//
// What the backend receives is read from a transparent relay
// (stdio_tee.mjs) between mcp-chain and the fixture server.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, createPublicKey, createSign, generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { SKIP_NO_FIXTURE, FIXTURE, HERE, tmpPath, sleep, waitFor } from './lib.mjs';
import { withChain, request } from './http_lib.mjs';
import {
  startOidc, clientCredentialsToken, tokenRequest, userAgent, sdkOAuthConnect, fetchJwks, decodeJwt,
  RS_CLIENT, PUBLIC_CLIENT,
} from './oidc_lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };
const TEE = path.join(HERE, 'stdio_tee.mjs');
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'oauth-it', version: '1' } };
const H = { 'Content-Type': 'application/json', Accept: 'application/json' };
const auth = (tok) => (tok ? { Authorization: `Bearer ${tok}` } : {});
const b64u = (x) => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x)).toString('base64url');
const sha256 = (s) => createHash('sha256').update(s).digest('hex');

// three providers for the whole file: JWT (the trusted one), JWT with 2 s
// tokens (expiry; an untrusted issuer elsewhere), opaque (introspection);
// 2 s, not 1: exp is in whole seconds, a 1 s token may be over before the
// session's initialize is
let P1, P2, P3;
before(async () => { [P1, P2, P3] = await Promise.all([startOidc(), startOidc({ tokenTtl: 2 }), startOidc({ tokenFormat: 'opaque' })]); });
after(async () => { await Promise.all([P1?.stop(), P2?.stop(), P3?.stop()]); });

let teeN = 0;
/** The fixture server behind a relay that records every line: { server, lines(), calls() }. */
function recordedFixture() {
  const log = tmpPath(`oauth-tee-${process.pid}-${++teeN}.jsonl`);
  const lines = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  return {
    server: { command: process.execPath, args: [TEE, log, FIXTURE] },
    raw: () => (existsSync(log) ? readFileSync(log, 'utf8') : ''),
    /** the tools/call requests the backend received */
    calls: () => lines().filter((l) => l.dir === 'c2s').map((l) => { try { return JSON.parse(l.line); } catch { return {}; } })
      .filter((m) => m.method === 'tools/call'),
  };
}

/** initialize (+ initialized) with TOKEN: the response and the session id. */
async function init(port, token) {
  const r = await request(port, { headers: { ...H, ...auth(token) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
  const sid = r.headers['mcp-session-id'];
  if (sid) {
    const n = await request(port, { headers: { ...H, ...auth(token), 'Mcp-Session-Id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    assert.equal(n.status, 202, n.body);
  }
  return { r, sid };
}

/** One request METHOD (PARAMS) in session SID with TOKEN: the HTTP response. */
const rpc = (port, sid, token, method, params = {}, id = 2) => request(port, {
  headers: { ...H, ...auth(token), ...(sid ? { 'Mcp-Session-Id': sid } : {}) },
  body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
});
const echo = (port, sid, token, id = 2) => rpc(port, sid, token, 'tools/call', { name: 'echo', arguments: { x: id } }, id);

/** A WWW-Authenticate Bearer challenge's parameters. */
function challenge(h) {
  assert.ok(h, 'a WWW-Authenticate header');
  assert.match(h, /^Bearer realm="mcp-chain"/);
  const out = {};
  for (const m of h.matchAll(/([a-z_]+)="([^"]*)"/g)) out[m[1]] = m[2];
  return out;
}

/** An access token for USER through the authorization code flow (test-public, PKCE, RESOURCE). */
async function codeToken(oidc, { user, resource, scope = 'mcp:read mcp:call' }) {
  const redirect = `http://127.0.0.1:${40000 + Math.floor(Math.random() * 20000)}/callback`;
  const verifier = randomBytes(32).toString('base64url');
  const challengeS = createHash('sha256').update(verifier).digest('base64url');
  const u = new URL(`${oidc.issuer}/auth`);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: PUBLIC_CLIENT.id, redirect_uri: redirect,
    scope, resource, state: 's', code_challenge: challengeS, code_challenge_method: 'S256' }))
    u.searchParams.set(k, v);
  const back = new URL(await userAgent(u, { user }));
  const code = back.searchParams.get('code');
  assert.ok(code, back.href);
  const t = await tokenRequest(oidc, { grant_type: 'authorization_code', code, redirect_uri: redirect,
    code_verifier: verifier, resource }, { client: PUBLIC_CLIENT.id, secret: null });
  assert.equal(t.status, 200, JSON.stringify(t.body));
  return t.body.access_token;
}

/** A compact JWS signed RS256 with PRIVATEKEY (node KeyObject), header HEADER. */
function signRs256(header, payload, privateKey) {
  const input = `${b64u(header)}.${b64u(payload)}`;
  const s = createSign('RSA-SHA256').update(input).sign(privateKey);
  return `${input}.${s.toString('base64url')}`;
}

/** Claims that would pass for ISSUER and AUD, valid for an hour. */
const claims = (issuer, aud, extra = {}) => {
  const now = Math.floor(Date.now() / 1000);
  return { iss: issuer, aud, sub: 'mallory', client_id: 'test-cc', scope: 'mcp:read mcp:call', iat: now, exp: now + 3600,
    jti: randomBytes(8).toString('hex'), ...extra };
};

/** A tiny local HTTP server: HANDLER(req, res, n) with n the request count; { url, port, count(), close() }. */
async function tinyServer(handler) {
  let n = 0;
  const server = http.createServer((req, res) => { n++; handler(req, res, n); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    port, base: `http://127.0.0.1:${port}`, count: () => n,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

const oauthMw = (oauth, more = []) => [{ use: 'auth', env: false, oauth }, ...more];

// ---------------------------------------------------------------------------

test('the official SDK OAuth client end to end: connected, lists and calls; the backend and the log never see the token; policy sees the sub', T, async () => {
  const fx = recordedFixture();
  const mw = oauthMw({ issuer: P1.issuer, scopes: ['mcp:read'] },
    [{ use: 'policy', rules: [{ deny: ['echo'], clients: ['bob'] }, { allow: ['*'], clients: ['*'] }] }, { use: 'log', params: true }]);
  await withChain(fx.server, { extra: { middleware: mw }, env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
    const secrets = [];
    const alice = await sdkOAuthConnect(chain.url.href, { user: 'alice' });
    try {
      const { state } = alice;
      assert.equal(state.authorizationUrls.length, 1);
      const au = new URL(state.authorizationUrls[0]);
      assert.equal(au.searchParams.get('resource'), chain.url.href, 'the resource of the PRM');
      assert.equal(au.searchParams.get('scope'), 'mcp:read', 'the scope of the 401');
      assert.equal(state.discovery?.authorizationServerMetadata?.issuer, P1.issuer);
      const at = decodeJwt(alice.tokens.access_token).payload;
      assert.equal(at.sub, 'alice');
      assert.equal(at.aud, chain.url.href);
      secrets.push(alice.tokens.access_token, alice.tokens.refresh_token);

      const tools = await alice.client.listTools();
      assert.ok(tools.tools.some((t) => t.name === 'echo'));
      const r = await alice.client.callTool({ name: 'echo', arguments: { hello: 'world' } });
      const seen = r.content[0].text;
      assert.match(seen, /"hello":"world"/);
      assert.ok(!seen.includes('eyJ') && !/bearer|authorization/i.test(seen) && !seen.includes(alice.tokens.access_token),
        `the backend never sees the token: ${seen}`);
    } finally {
      await alice.close();
    }

    const bob = await sdkOAuthConnect(chain.url.href, { user: 'bob' });
    try {
      assert.equal(decodeJwt(bob.tokens.access_token).payload.sub, 'bob');
      secrets.push(bob.tokens.access_token, bob.tokens.refresh_token);
      let refused;
      try {
        const r = await bob.client.callTool({ name: 'echo', arguments: {} });
        refused = r.isError ? r.content[0].text : null;
      } catch (e) {
        refused = e.message;
      }
      assert.match(String(refused), /not allowed|denied|refused/i, 'policy refuses bob (principal = sub)');
      assert.ok((await bob.client.listTools()).tools.length > 0, 'bob may list');
    } finally {
      await bob.close();
    }
    const raw = fx.raw();
    assert.ok(raw.length > 0, 'the relay recorded the backend traffic');
    assert.equal(fx.calls().filter((c) => c.params?.name === 'echo').length, 1, 'only alice\'s echo reached the backend');
    for (const s of secrets.filter(Boolean)) {
      assert.ok(!raw.includes(s), 'no token in what the backend received');
      assert.ok(!chain.stderr.includes(s), 'no token in the log (debug level)');
    }
    assert.ok(!raw.includes('eyJ') && !/bearer/i.test(raw), 'nothing JWT-like or Bearer reaches the backend');
    assert.match(chain.stderr, /"client":"alice"/, 'the log names the principal (sub)');
  });
});

test('401 without a token: the challenge names the metadata and the scope, no error; the metadata at both paths', T, async () => {
  await withChain(recordedFixture().server, { extra: { middleware: oauthMw({ issuer: P1.issuer, scopes: ['mcp:read'],
    require: [{ tools: ['echo'], scopes: ['mcp:call'] }] }) } }, async (chain) => {
    const port = chain.port;
    const r = await request(port, { headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
    assert.equal(r.status, 401, r.body);
    const c = challenge(r.headers['www-authenticate']);
    assert.equal(c.resource_metadata, `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`);
    assert.equal(c.scope, 'mcp:read');
    assert.equal(c.error, undefined, `no error without a token: ${r.headers['www-authenticate']}`);
    assert.equal(c.error_description, undefined);
    assert.equal(r.headers['mcp-session-id'], undefined);

    for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const m = await request(port, { method: 'GET', path: p });
      assert.equal(m.status, 200, `${p}: ${m.body}`);
      assert.match(m.headers['content-type'], /application\/json/);
      const md = JSON.parse(m.body);
      assert.equal(md.resource, `http://127.0.0.1:${port}/mcp`, p);
      assert.deepEqual(md.authorization_servers, [P1.issuer], p);
      assert.deepEqual([...md.scopes_supported].sort(), ['mcp:call', 'mcp:read'], p);
      assert.deepEqual(md.bearer_methods_supported, ['header'], p);
    }
    assert.equal((await request(port, { method: 'GET', path: '/.well-known/oauth-protected-resource/other' })).status, 404);
    // with a Host header the client used, the URLs follow it
    const viaHost = await request(port, { headers: { ...H, Host: `localhost:${port}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT }) });
    assert.equal(viaHost.status, 401);
    assert.equal(challenge(viaHost.headers['www-authenticate']).resource_metadata,
      `http://localhost:${port}/.well-known/oauth-protected-resource/mcp`);
  });
});

test('bad tokens: each a 401 invalid_token, nothing reaches the backend, the reason is logged, the token never', T, async () => {
  const fx = recordedFixture();
  const mw = oauthMw({ issuer: P1.issuer, leeway: 0 }, [{ use: 'log', params: true }]);
  await withChain(fx.server, { extra: { middleware: mw }, env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
    const port = chain.port;
    const aud = chain.url.href;
    const good = await clientCredentialsToken(P1, { resource: aud });
    const s = await init(port, good);
    assert.equal(s.r.status, 200, s.r.body);
    assert.equal((await echo(port, s.sid, good, 2)).status, 200);
    assert.equal(fx.calls().length, 1);

    const jwks = await fetchJwks(P1);
    const rsa = jwks.keys.find((k) => k.kid === 'rsa1');
    const pem = createPublicKey({ key: rsa, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    const hsInput = `${b64u({ alg: 'HS256', typ: 'at+jwt', kid: 'rsa1' })}.${b64u(claims(P1.issuer, aud))}`;
    const hs256 = `${hsInput}.${createHmac('sha256', pem).update(hsInput).digest('base64url')}`;
    const none = `${b64u({ alg: 'none', typ: 'at+jwt' })}.${b64u(claims(P1.issuer, aud))}.`;
    const [h0, p0, sig0] = good.split('.');
    const mid = Math.floor(sig0.length / 2);
    const altered = `${h0}.${p0}.${sig0.slice(0, mid)}${sig0[mid] === 'A' ? 'B' : 'A'}${sig0.slice(mid + 1)}`;
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const unknownKid = signRs256({ alg: 'RS256', typ: 'at+jwt', kid: 'nope' }, claims(P1.issuer, aud), stranger);
    const otherAud = await clientCredentialsToken(P1, { resource: 'http://127.0.0.1:9/other' });
    const otherIss = await clientCredentialsToken(P2, { resource: aud });
    const opaque = await clientCredentialsToken(P3, { resource: aud });
    assert.equal(opaque.split('.').length, 1);
    const bad = [
      ['wrong audience', otherAud, /another resource|aud/i],
      ['untrusted issuer', otherIss, /issuer/i],
      ['alg none', none, /alg|none|algorithm/i],
      ['HS256 keyed with the RSA public key', hs256, /alg|HS256|algorithm/i],
      ['altered signature', altered, /signature/i],
      ['unknown kid', unknownKid, /kid|key/i],
      ['garbage', 'garbage-' + 'g'.repeat(30), /JWT|introspection/i],
      ['opaque, no introspection', opaque, /JWT|introspection/i],
    ];
    let id = 10;
    for (const [what, tok, reason] of bad) {
      const fresh = await init(port, tok);
      assert.equal(fresh.r.status, 401, `${what} (initialize): ${fresh.r.body}`);
      assert.equal(fresh.sid, undefined, `${what}: no session`);
      const r = await echo(port, s.sid, tok, ++id);
      assert.equal(r.status, 401, `${what}: ${r.body}`);
      const c = challenge(r.headers['www-authenticate']);
      assert.equal(c.error, 'invalid_token', `${what}: ${r.headers['www-authenticate']}`);
      assert.match(c.error_description ?? '', reason, `${what}: ${r.headers['www-authenticate']}`);
      assert.match(c.resource_metadata, /\/\.well-known\/oauth-protected-resource\/mcp$/);
      assert.ok(!r.headers['www-authenticate'].includes(tok), `${what}: the token is not echoed`);
      assert.ok(!r.body.includes(tok), `${what}: nor in the body`);
    }
    assert.equal(fx.calls().length, 1, 'no bad token\'s call reached the backend');

    // the session is unharmed
    assert.equal((await echo(port, s.sid, good, 99)).status, 200);
    assert.equal(fx.calls().length, 2);
    for (const [what, tok] of bad) {
      assert.ok(!chain.stderr.includes(tok), `${what}: the token is never logged`);
      assert.ok(!fx.raw().includes(tok), `${what}: never sent to the backend`);
    }
    assert.ok(!chain.stderr.includes(good) && !fx.raw().includes(good));
    const refusals = chain.stderr.split('\n').filter((l) => /refused \(401\)/.test(l));
    assert.ok(refusals.length >= bad.length, `the reasons are logged:\n${refusals.join('\n')}`);
    for (const re of [/another resource/, /trusted issuer/, /signature/i])
      assert.ok(refusals.some((l) => re.test(l)), `a log line says ${re}:\n${refusals.join('\n')}`);
  });
});

test('an expired token (provider tokenTtl 2, leeway 0): 401 invalid_token, once good and never used alike', T, async () => {
  const fx = recordedFixture();
  await withChain(fx.server, { extra: { middleware: oauthMw({ issuer: P2.issuer, leeway: 0 }) } }, async (chain) => {
    const aud = chain.url.href;
    const used = await clientCredentialsToken(P2, { resource: aud });
    const unused = await clientCredentialsToken(P2, { resource: aud });
    const s = await init(chain.port, used);
    assert.equal(s.r.status, 200, s.r.body);
    await sleep(3200);
    for (const [what, tok] of [['used before', used], ['never used', unused]]) {
      const r = await echo(chain.port, s.sid, tok, 5);
      assert.equal(r.status, 401, `${what}: ${r.body}`);
      const c = challenge(r.headers['www-authenticate']);
      assert.equal(c.error, 'invalid_token', what);
      assert.match(c.error_description, /expired|exp/i, what);
    }
    assert.equal(fx.calls().length, 0);
    assert.ok(!chain.stderr.includes(used) && !chain.stderr.includes(unused));
  });
});

test('scope: a token with mcp:read only lists tools, but calling echo (needs mcp:call) is a 403 insufficient_scope', T, async () => {
  const fx = recordedFixture();
  const mw = oauthMw({ issuer: P1.issuer, scopes: ['mcp:read'], require: [{ tools: ['echo'], scopes: ['mcp:call'] }] });
  await withChain(fx.server, { extra: { middleware: mw } }, async (chain) => {
    const port = chain.port;
    const aud = chain.url.href;
    const reader = await clientCredentialsToken(P1, { resource: aud, scope: 'mcp:read' });
    const s = await init(port, reader);
    assert.equal(s.r.status, 200, s.r.body);
    const list = await rpc(port, s.sid, reader, 'tools/list', {}, 3);
    assert.equal(list.status, 200, list.body);
    assert.ok(JSON.parse(list.body).result.tools.some((t) => t.name === 'echo'));
    const r = await echo(port, s.sid, reader, 4);
    assert.equal(r.status, 403, r.body);
    const c = challenge(r.headers['www-authenticate']);
    assert.equal(c.error, 'insufficient_scope', r.headers['www-authenticate']);
    assert.match(c.scope, /\bmcp:call\b/);
    assert.match(c.resource_metadata, /\/\.well-known\/oauth-protected-resource\/mcp$/);
    assert.equal(fx.calls().length, 0, 'the call never reached the backend');
    // a batch with the call is refused too
    const batch = await request(port, { headers: { ...H, ...auth(reader), 'Mcp-Session-Id': s.sid },
      body: JSON.stringify([{ jsonrpc: '2.0', id: 7, method: 'tools/list' }, { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'echo', arguments: {} } }]) });
    assert.ok([400, 403].includes(batch.status), `batch: ${batch.status} ${batch.body}`);
    assert.equal(fx.calls().length, 0);
    // a token without even mcp:read: 403 at once (or 401 with the scope), never a session
    const none = await clientCredentialsToken(P1, { resource: aud, scope: 'mcp:admin' });
    const n = await init(port, none);
    assert.equal(n.r.status, 403, n.r.body);
    assert.match(challenge(n.r.headers['www-authenticate']).scope, /mcp:read/);
    // and a token with both scopes calls
    const caller = await clientCredentialsToken(P1, { resource: aud, scope: 'mcp:read mcp:call' });
    const ok = await echo(port, s.sid, caller, 9);
    assert.equal(ok.status, 200, ok.body);
    assert.equal(fx.calls().length, 1);
  });
});

test('a session survives a refreshed token of the same subject; another subject\'s token is refused on it', T, async () => {
  const fx = recordedFixture();
  await withChain(fx.server, { extra: { middleware: oauthMw({ issuer: P1.issuer }) } }, async (chain) => {
    const port = chain.port;
    const aud = chain.url.href;
    const a = await clientCredentialsToken(P1, { resource: aud });
    const b = await clientCredentialsToken(P1, { resource: aud });
    assert.notEqual(a, b);
    assert.equal(decodeJwt(a).payload.sub, decodeJwt(b).payload.sub, 'client_credentials tokens carry sub = client_id');
    const s = await init(port, a);
    assert.equal(s.r.status, 200, s.r.body);
    assert.equal((await echo(port, s.sid, a, 2)).status, 200);
    const r = await echo(port, s.sid, b, 3);
    assert.equal(r.status, 200, `the refreshed token keeps the session: ${r.body}`);
    assert.equal((await echo(port, s.sid, a, 4)).status, 200, 'the first token is still valid too');

    const alice1 = await codeToken(P1, { user: 'alice', resource: aud });
    const alice2 = await codeToken(P1, { user: 'alice', resource: aud });
    const bob = await codeToken(P1, { user: 'bob', resource: aud });
    const u = await init(port, alice1);
    assert.equal(u.r.status, 200, u.r.body);
    assert.equal((await echo(port, u.sid, alice2, 5)).status, 200, 'alice\'s second token, same session');
    const stolen = await echo(port, u.sid, bob, 6);
    assert.equal(stolen.status, 401, `bob on alice's session: ${stolen.body}`);
    assert.equal((await echo(port, s.sid, alice1, 7)).status, 401, 'alice on test-cc\'s session');
    assert.equal(fx.calls().length, 4);
    assert.equal((await echo(port, u.sid, alice1, 8)).status, 200, 'alice\'s session still works');
  });
});

// ---------------------------------------------------------------------------
// JWKS trouble: the keys from a local server we control

/** A JWKS server for P1's keys; MODE(n, req, res) may answer itself (return true). */
async function jwksServer(mode) {
  const body = JSON.stringify(await fetchJwks(P1));
  return tinyServer((req, res, n) => {
    if (mode && mode(n, req, res)) return;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  });
}

test('JWKS: the last good keys stay in use when the server fails; an unknown kid refetches once per refetchInterval', T, async () => {
  let failing = false;
  const js = await jwksServer((n, req, res) => {
    if (!failing) return false;
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('down');
    return true;
  });
  try {
    const mw = oauthMw({ issuer: P1.issuer, jwksUri: `${js.base}/jwks`, refetchInterval: 1 });
    await withChain(recordedFixture().server, { extra: { middleware: mw } }, async (chain) => {
      const port = chain.port;
      const aud = chain.url.href;
      await waitFor(() => js.count() >= 1, { what: 'the first JWKS fetch' });
      const t1 = await clientCredentialsToken(P1, { resource: aud });
      const s = await init(port, t1);
      assert.equal(s.r.status, 200, s.r.body);
      assert.equal(js.count(), 1, 'fetched once at start');

      // (d) an unknown kid: one refetch (past refetchInterval), then 401
      await sleep(1100);
      const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
      const k1 = signRs256({ alg: 'RS256', typ: 'at+jwt', kid: 'nope' }, claims(P1.issuer, aud), stranger);
      const r1 = await echo(port, s.sid, k1, 3);
      assert.equal(r1.status, 401, r1.body);
      assert.equal(challenge(r1.headers['www-authenticate']).error, 'invalid_token');
      assert.equal(js.count(), 2, 'an unknown kid refetched the keys once');
      const k2 = signRs256({ alg: 'RS256', typ: 'at+jwt', kid: 'nope2' }, claims(P1.issuer, aud), stranger);
      const r2 = await echo(port, s.sid, k2, 4);
      assert.equal(r2.status, 401, r2.body);
      assert.equal(js.count(), 2, 'a second unknown kid within refetchInterval does not refetch');

      // (a) the server fails from now on; an unknown kid makes it try (and fail) ...
      failing = true;
      await sleep(1100);
      const k3 = signRs256({ alg: 'RS256', typ: 'at+jwt', kid: 'nope3' }, claims(P1.issuer, aud), stranger);
      const r3 = await echo(port, s.sid, k3, 5);
      assert.equal(js.count(), 3, 'refetched after the interval');
      assert.ok([401, 503].includes(r3.status), `unknown kid while the keys are out of reach: ${r3.status} ${r3.body}`);
      // ... and a new token signed by a known key still validates with the last good keys
      const t2 = await clientCredentialsToken(P1, { resource: aud });
      const r4 = await echo(port, s.sid, t2, 6);
      assert.equal(r4.status, 200, `last good keys: ${r4.body}`);
      const fresh = await init(port, await clientCredentialsToken(P1, { resource: aud }));
      assert.equal(fresh.r.status, 200, fresh.r.body);
      assert.match(chain.stderr, /last keys stay in use|HTTP 500/);
    });
  } finally {
    await js.close();
  }
});

test('JWKS: garbage from the start is a 503 that says why, not a hang', T, async () => {
  const js = await tinyServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"keys": [ this is not json');
  });
  try {
    const mw = oauthMw({ issuer: P1.issuer, jwksUri: `${js.base}/jwks` });
    await withChain(recordedFixture().server, { extra: { middleware: mw } }, async (chain) => {
      await waitFor(() => js.count() >= 1, { what: 'the first JWKS fetch' });
      await sleep(200);
      const tok = await clientCredentialsToken(P1, { resource: chain.url.href });
      const started = Date.now();
      const r = await Promise.race([init(chain.port, tok).then((x) => x.r),
        sleep(15_000).then(() => ({ status: 'no answer in 15 s' }))]);
      const countAfter = js.count();
      assert.equal(r.status, 503, `${r.status} ${r.body ?? ''} (JWKS fetched ${countAfter} times, ${Date.now() - started} ms)`);
      assert.match(JSON.parse(r.body).error.message, /cannot be checked|keys|JSON/i);
      assert.ok(countAfter <= 3, `a bounded number of JWKS fetches, not a loop: ${countAfter}`);
      assert.ok(!chain.stderr.includes(tok));
    });
  } finally {
    await js.close();
  }
});

test('JWKS: a slow endpoint (3 s): the first request waits for the keys, then succeeds', T, async () => {
  const js = await jwksServer((n, req, res) => {
    if (n > 1) return false;
    return setTimeout(() => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(js.body); }, 3000) && true;
  });
  js.body = JSON.stringify(await fetchJwks(P1));
  try {
    const mw = oauthMw({ issuer: P1.issuer, jwksUri: `${js.base}/jwks` });
    await withChain(recordedFixture().server, { extra: { middleware: mw } }, async (chain) => {
      const tok = await clientCredentialsToken(P1, { resource: chain.url.href });
      await waitFor(() => js.count() >= 1, { what: 'the first JWKS fetch' });   // under way, answered in 3 s
      const t0 = Date.now();
      const s = await init(chain.port, tok);
      const waited = Date.now() - t0;
      assert.equal(s.r.status, 200, `${s.r.status} ${s.r.body} after ${waited} ms`);
      assert.ok(waited >= 500, `it waited for the keys (${waited} ms)`);
      assert.equal(js.count(), 1, 'one fetch');
      assert.equal((await echo(chain.port, s.sid, tok, 2)).status, 200);
    });
  } finally {
    await js.close();
  }
});

test('introspection of opaque tokens: an active token works and is introspected once; an inactive one is a 401', T, async () => {
  const proxy = await tinyServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      proxy.bodies.push(Buffer.concat(chunks).toString('utf8'));
      proxy.auths.push(req.headers.authorization);
      const r = await fetch(P3.introspectionEndpoint, { method: 'POST',
        headers: { authorization: req.headers.authorization ?? '', 'content-type': req.headers['content-type'] ?? '' },
        body: Buffer.concat(chunks) });
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
      res.end(await r.text());
    });
  });
  proxy.bodies = [];
  proxy.auths = [];
  const fx = recordedFixture();
  try {
    const mw = oauthMw({ issuer: P3.issuer,
      introspection: { url: `${proxy.base}/introspect`, clientId: RS_CLIENT.id, clientSecret: RS_CLIENT.secret } },
    [{ use: 'policy', rules: [{ allow: ['*'], clients: ['alice'] }] }]);
    await withChain(fx.server, { extra: { middleware: mw }, env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
      const port = chain.port;
      const aud = chain.url.href;
      const tok = await codeToken(P3, { user: 'alice', resource: aud });
      assert.equal(tok.split('.').length, 1, 'opaque');
      const s = await init(port, tok);
      assert.equal(s.r.status, 200, s.r.body);
      assert.equal(proxy.count(), 1, 'introspected');
      assert.match(proxy.bodies[0], /token=/);
      assert.equal(proxy.auths[0], `Basic ${Buffer.from(`${RS_CLIENT.id}:${RS_CLIENT.secret}`).toString('base64')}`);
      const r = await echo(port, s.sid, tok, 2);
      assert.equal(r.status, 200, r.body);
      assert.ok(!JSON.parse(r.body).result?.isError, `policy allowed alice (the introspected sub): ${r.body}`);
      assert.equal(proxy.count(), 1, 'the second request does not introspect again');

      const other = await codeToken(P3, { user: 'alice', resource: 'http://127.0.0.1:9/other' });
      const wa = await echo(port, s.sid, other, 3);
      assert.equal(wa.status, 401, `another resource's opaque token: ${wa.body}`);

      const inactive = 'opaque-' + randomBytes(16).toString('hex');
      for (const i of [4, 5]) {
        const x = await echo(port, s.sid, inactive, i);
        assert.equal(x.status, 401, x.body);
        assert.equal(challenge(x.headers['www-authenticate']).error, 'invalid_token');
      }
      assert.equal(proxy.count(), 3, 'an inactive token is asked about once (its answer is cached too)');
      assert.equal(fx.calls().length, 1);
      for (const t of [tok, other, inactive]) assert.ok(!chain.stderr.includes(t), 'never logged');
      assert.ok(!fx.raw().includes(tok));
    });
  } finally {
    await proxy.close();
  }
});

test('static tokens still work alongside oauth', T, async () => {
  const STATIC = 'static-' + 'S'.repeat(24) + '-secret';
  const fx = recordedFixture();
  const mw = [{ use: 'auth', env: false, tokens: [{ sha256: sha256(STATIC), principal: 'robot' }], oauth: { issuer: P1.issuer } },
    { use: 'policy', rules: [{ allow: ['*'], clients: ['robot', 'test-cc'] }] }, { use: 'log', params: true }];
  await withChain(fx.server, { extra: { middleware: mw }, env: { MCP_CHAIN_LOG: 'debug' } }, async (chain) => {
    const port = chain.port;
    const st = await init(port, STATIC);
    assert.equal(st.r.status, 200, st.r.body);
    const r = await echo(port, st.sid, STATIC, 2);
    assert.equal(r.status, 200, r.body);
    assert.ok(!JSON.parse(r.body).result.isError, r.body);
    const jwt = await clientCredentialsToken(P1, { resource: chain.url.href });
    const o = await init(port, jwt);
    assert.equal(o.r.status, 200, o.r.body);
    assert.equal((await echo(port, o.sid, jwt, 3)).status, 200);
    assert.equal((await echo(port, st.sid, jwt, 4)).status, 401, 'the oauth subject on the static token\'s session');
    assert.equal((await echo(port, o.sid, STATIC, 5)).status, 401, 'and the other way');
    const wrong = await init(port, STATIC + 'x');
    assert.equal(wrong.r.status, 401);
    assert.equal(challenge(wrong.r.headers['www-authenticate']).error, 'invalid_token');
    assert.equal(fx.calls().length, 2);
    assert.match(chain.stderr, /"client":"robot"/);
    assert.match(chain.stderr, /"client":"test-cc"/);
    assert.ok(!chain.stderr.includes(STATIC) && !chain.stderr.includes(jwt));
    assert.ok(!fx.raw().includes(STATIC) && !fx.raw().includes(jwt));
  });
});

test('cacheSize bounds the answers kept, not the tokens accepted: past the bound a token is checked each time', T, async () => {
  const fx = recordedFixture();
  await withChain(fx.server, { extra: { middleware: oauthMw({ issuer: P1.issuer, cacheSize: 1 }) } }, async (chain) => {
    const port = chain.port;
    const aud = chain.url.href;
    const a = await clientCredentialsToken(P1, { resource: aud });
    const b = await clientCredentialsToken(P1, { resource: aud });
    const s = await init(port, a);               // a's answer fills the cache
    assert.equal(s.r.status, 200, s.r.body);
    const r = await echo(port, s.sid, b, 2);     // b: valid, same subject, past the bound
    assert.equal(r.status, 200, r.body);
    const body = JSON.parse(r.body);
    assert.equal(body.error, undefined, `a valid token past the cache bound is accepted: ${r.body}`);
    assert.equal(fx.calls().length, 1);
  });
});

test('JWKS out of reach from the start (connection refused): a 503 at once, a bounded number of attempts', T, async () => {
  const closed = await tinyServer(() => {});
  const port0 = closed.port;
  await closed.close();
  await withChain(recordedFixture().server, { extra: { middleware: oauthMw({ issuer: P1.issuer, jwksUri: `http://127.0.0.1:${port0}/jwks` }) } }, async (chain) => {
    await sleep(300);
    const tok = await clientCredentialsToken(P1, { resource: chain.url.href });
    const r = await Promise.race([init(chain.port, tok).then((x) => x.r), sleep(10_000).then(() => ({ status: 'no answer in 10 s' }))]);
    assert.equal(r.status, 503, `${r.status} ${r.body ?? ''}`);
    assert.equal(r.headers['retry-after'], '5');
    assert.match(JSON.parse(r.body).error.message, /cannot be checked now .*keys/);
    const attempts = chain.stderr.split('\n').filter((l) => /auth: issuer .*keys:/.test(l)).length;
    assert.ok(attempts <= 3, `bounded attempts to fetch the keys: ${attempts}`);
  });
});

test('cacheSize with opaque tokens: past the bound a valid token is still introspected and accepted', T, async () => {
  const fx = recordedFixture();
  const mw = oauthMw({ issuer: P3.issuer, cacheSize: 1,
    introspection: { url: P3.introspectionEndpoint, clientId: RS_CLIENT.id, clientSecret: RS_CLIENT.secret } });
  await withChain(fx.server, { extra: { middleware: mw } }, async (chain) => {
    const aud = chain.url.href;
    const a = await codeToken(P3, { user: 'alice', resource: aud });
    const b = await codeToken(P3, { user: 'alice', resource: aud });
    const s = await init(chain.port, a);
    assert.equal(s.r.status, 200, s.r.body);
    const r = await echo(chain.port, s.sid, b, 2);
    assert.equal(r.status, 200, `${r.status} ${r.headers['www-authenticate']} ${r.body}`);
    assert.equal(JSON.parse(r.body).error, undefined, r.body);
    assert.equal(fx.calls().length, 1);
  });
});
