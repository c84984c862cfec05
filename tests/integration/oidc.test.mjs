// The authorization-server fixture (fixtures/oidc-server.mjs, oidc-provider 9)
// and the OAuth harness (oidc_lib.mjs) checked against real parts, before any
// mcp-chain test relies on them: discovery, client_credentials JWTs verified
// with node:crypto, DCR + authorization code + PKCE + resource + refresh through
// the headless user agent, opaque tokens and introspection, and the official
// SDK's OAuth client connecting to a protected MCP server built with the SDK.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';

import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

import {
  startOidc, clientCredentialsToken, tokenRequest, userAgent, sdkOAuthConnect,
  fetchJwks, verifyJwt, decodeJwt, RS_CLIENT, PUBLIC_CLIENT,
} from './oidc_lib.mjs';

const T = { timeout: 30_000 };
const RESOURCE = 'http://127.0.0.1:9/mcp';   // a resource indicator: nothing listens there

let oidc;
before(async () => { oidc = await startOidc(); });
after(async () => { await oidc?.stop(); });

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

const getJson = async (url) => {
  const r = await fetch(url);
  assert.equal(r.status, 200, `${url}: ${r.status}`);
  return r.json();
};

test('discovery: RFC 8414 and OpenID documents name S256, registration, jwks_uri, iss in responses', T, async () => {
  for (const wk of ['oauth-authorization-server', 'openid-configuration']) {
    const m = await getJson(`${oidc.issuer}/.well-known/${wk}`);
    assert.equal(m.issuer, oidc.issuer, wk);
    assert.deepEqual(m.code_challenge_methods_supported, ['S256'], wk);
    assert.equal(m.registration_endpoint, oidc.registrationEndpoint, wk);
    assert.equal(m.jwks_uri, oidc.jwksUri, wk);
    assert.equal(m.authorization_response_iss_parameter_supported, true, wk);
    assert.equal(m.introspection_endpoint, oidc.introspectionEndpoint, wk);
    assert.ok(m.grant_types_supported.includes('client_credentials') && m.grant_types_supported.includes('refresh_token'), wk);
    assert.deepEqual(m.response_types_supported, ['code'], wk);
    for (const s of ['mcp:read', 'mcp:call', 'mcp:admin']) assert.ok(m.scopes_supported.includes(s), `${wk}: ${s}`);
  }
  const jwks = await fetchJwks(oidc);
  assert.deepEqual(jwks.keys.map((k) => [k.kid, k.kty]).sort(), [['ec1', 'EC'], ['rsa1', 'RSA']]);
  assert.ok(jwks.keys.every((k) => k.d === undefined), 'no private parts published');
});

test('client_credentials: an RS256 JWT for the resource asked, signed by a key of the JWKS, with the scope asked', T, async () => {
  const token = await clientCredentialsToken(oidc, { resource: RESOURCE, scope: 'mcp:read mcp:call' });
  const jwks = await fetchJwks(oidc);
  const { header, payload } = verifyJwt(token, jwks);
  assert.equal(header.alg, 'RS256');
  assert.equal(header.kid, 'rsa1');
  assert.equal(header.typ, 'at+jwt');
  assert.equal(payload.iss, oidc.issuer);
  assert.equal(payload.aud, RESOURCE);
  assert.equal(payload.scope, 'mcp:read mcp:call');
  assert.equal(payload.client_id, 'test-cc');
  assert.equal(payload.exp - payload.iat, 3600);

  const tampered = token.slice(0, token.lastIndexOf('.') + 1) + Buffer.alloc(256, 1).toString('base64url');
  assert.throws(() => verifyJwt(tampered, jwks), /bad RS256 signature/);

  const bad = await tokenRequest(oidc, { grant_type: 'client_credentials', resource: 'not-a-url', scope: 'mcp:read' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error, 'invalid_target');
  const wrong = await tokenRequest(oidc, { grant_type: 'client_credentials', resource: RESOURCE }, { secret: 'nope' });
  assert.equal(wrong.status, 401);
  assert.equal(wrong.body.error, 'invalid_client');
});

test('ES256 and PS256 when asked, and a short token lifetime', T, async () => {
  await Promise.all(['ES256', 'PS256'].map(async (alg) => {
    const other = await startOidc({ alg, tokenTtl: 5 });
    try {
      const token = await clientCredentialsToken(other, { resource: RESOURCE, scope: 'mcp:admin' });
      const { header, payload } = verifyJwt(token, await fetchJwks(other));
      assert.equal(header.alg, alg);
      assert.equal(header.kid, alg === 'ES256' ? 'ec1' : 'rsa1');
      assert.equal(payload.aud, RESOURCE);
      assert.equal(payload.scope, 'mcp:admin');
      assert.equal(payload.exp - payload.iat, 5);
    } finally {
      const { code } = await other.stop();
      assert.equal(code, 0, 'exits 0 on SIGTERM');
    }
  }));
});

test('opaque access tokens and RFC 7662 introspection', T, async () => {
  const other = await startOidc({ tokenFormat: 'opaque' });
  try {
    const token = await clientCredentialsToken(other, { resource: RESOURCE, scope: 'mcp:call' });
    assert.equal(token.split('.').length, 1, `not a JWT: ${token}`);
    const intro = async (t) => {
      const r = await fetch(other.introspectionEndpoint, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${RS_CLIENT.id}:${RS_CLIENT.secret}`).toString('base64')}`,
                   'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: t }),
      });
      assert.equal(r.status, 200);
      return r.json();
    };
    const info = await intro(token);
    assert.equal(info.active, true);
    assert.equal(info.aud, RESOURCE);
    assert.equal(info.scope, 'mcp:call');
    assert.equal(info.client_id, 'test-cc');
    assert.equal(info.iss, other.issuer);
    assert.deepEqual(await intro('no-such-token'), { active: false });
  } finally {
    await other.stop();
  }
});

test('DCR + authorization code + PKCE + resource through the user agent; iss on the redirect; refresh', T, async () => {
  const redirect = 'http://127.0.0.1:5555/cb';
  const reg = await fetch(oidc.registrationEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // no refresh_token asked: the fixture adds it to an auth-code client
    body: JSON.stringify({ client_name: 'dcr-test', redirect_uris: [redirect], grant_types: ['authorization_code'],
                           response_types: ['code'], token_endpoint_auth_method: 'none', application_type: 'native' }),
  });
  assert.equal(reg.status, 201);
  const client = await reg.json();
  assert.ok(client.client_id);
  assert.equal(client.client_secret, undefined, 'public client');
  assert.deepEqual(client.grant_types, ['authorization_code', 'refresh_token']);

  const { verifier, challenge } = pkce();
  const auth = new URL(`${oidc.issuer}/auth`);
  const st = randomBytes(8).toString('hex');
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: client.client_id, redirect_uri: redirect,
    scope: 'mcp:read mcp:call', resource: RESOURCE, state: st, code_challenge: challenge, code_challenge_method: 'S256' }))
    auth.searchParams.set(k, v);
  const hops = [];
  const back = new URL(await userAgent(auth, { user: 'bob', hops }));
  assert.equal(`${back.origin}${back.pathname}`, redirect, JSON.stringify(hops));
  assert.equal(back.searchParams.get('state'), st);
  assert.equal(back.searchParams.get('iss'), oidc.issuer, 'RFC 9207');
  const code = back.searchParams.get('code');
  assert.ok(code, back.href);

  const redeem = (v) => tokenRequest(oidc, { grant_type: 'authorization_code', code, redirect_uri: redirect,
    code_verifier: v, resource: RESOURCE }, { client: client.client_id, secret: null });
  const wrongVerifier = await redeem(pkce().verifier);
  assert.equal(wrongVerifier.body.error, 'invalid_grant', 'PKCE checked');
  // PKCE is checked before the code is consumed: the right verifier still works
  const tok = await redeem(verifier);
  assert.equal(tok.status, 200, JSON.stringify(tok.body));
  assert.ok(tok.body.refresh_token, 'a refresh token without offline_access');
  const jwks = await fetchJwks(oidc);
  const at = verifyJwt(tok.body.access_token, jwks).payload;
  assert.equal(at.sub, 'bob');
  assert.equal(at.aud, RESOURCE);
  assert.equal(at.scope, 'mcp:read mcp:call');
  assert.equal(at.client_id, client.client_id);

  const ref = await tokenRequest(oidc, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token },
    { client: client.client_id, secret: null });
  assert.equal(ref.status, 200, JSON.stringify(ref.body));
  assert.notEqual(ref.body.access_token, tok.body.access_token);
  const at2 = verifyJwt(ref.body.access_token, jwks).payload;
  assert.equal(at2.sub, 'bob');
  assert.equal(at2.aud, RESOURCE, 'the granted resource is kept on refresh');
  assert.equal(at2.scope, 'mcp:read mcp:call');
  const narrowed = await tokenRequest(oidc, { grant_type: 'refresh_token', refresh_token: ref.body.refresh_token ?? tok.body.refresh_token,
    scope: 'mcp:read', resource: RESOURCE }, { client: client.client_id, secret: null });
  assert.equal(narrowed.status, 200, JSON.stringify(narrowed.body));
  assert.equal(decodeJwt(narrowed.body.access_token).payload.scope, 'mcp:read');

  // a replayed code is refused, and what the grant issued is revoked with it
  const replay = await redeem(verifier);
  assert.equal(replay.body.error, 'invalid_grant');
  const afterReplay = await tokenRequest(oidc, { grant_type: 'refresh_token', refresh_token: narrowed.body.refresh_token },
    { client: client.client_id, secret: null });
  assert.equal(afterReplay.body.error, 'invalid_grant', JSON.stringify(afterReplay.body));
});

test('PKCE is required; the pre-registered native client takes a loopback redirect on any port; the user can refuse', T, async () => {
  const redirect = `http://127.0.0.1:${40000 + Math.floor(Math.random() * 20000)}/callback`;
  const base = { response_type: 'code', client_id: PUBLIC_CLIENT.id, redirect_uri: redirect, scope: 'mcp:read', resource: RESOURCE, state: 's1' };
  const url = (extra) => {
    const u = new URL(`${oidc.issuer}/auth`);
    for (const [k, v] of Object.entries({ ...base, ...extra })) u.searchParams.set(k, v);
    return u;
  };
  const noPkce = new URL(await userAgent(url({})));
  assert.equal(noPkce.searchParams.get('error'), 'invalid_request');
  assert.match(noPkce.searchParams.get('error_description'), /PKCE/);

  const { verifier, challenge } = pkce();
  const back = new URL(await userAgent(url({ code_challenge: challenge, code_challenge_method: 'S256' })));
  assert.equal(back.origin + back.pathname, redirect);
  const tok = await tokenRequest(oidc, { grant_type: 'authorization_code', code: back.searchParams.get('code'),
    redirect_uri: redirect, code_verifier: verifier }, { client: PUBLIC_CLIENT.id, secret: null });
  assert.equal(tok.status, 200, JSON.stringify(tok.body));
  const at = verifyJwt(tok.body.access_token, await fetchJwks(oidc)).payload;
  assert.equal(at.sub, 'alice', 'the default user');
  assert.equal(at.aud, RESOURCE, 'the resource of the authorization request');

  const denied = new URL(await userAgent(url({ code_challenge: challenge, code_challenge_method: 'S256' }), { user: '!deny' }));
  assert.equal(denied.searchParams.get('error'), 'access_denied');
  assert.equal(denied.searchParams.get('iss'), oidc.issuer);

  // a redirect the client did not register (another path) never reaches it
  await assert.rejects(userAgent(url({ redirect_uri: 'http://127.0.0.1:5/elsewhere', code_challenge: challenge,
    code_challenge_method: 'S256' })), /answered 400.*redirect_uri/s);
});

/**
 * A Streamable HTTP MCP server built from the SDK's own parts: the RFC 9728
 * metadata router, requireBearerAuth with a verifier that checks the JWT
 * against the provider's JWKS (jose), and one tool that says who called.
 * Returns { url, seen: [sub...], close() }.
 */
async function protectedMcpServer(issuer, metadata) {
  const app = express();
  app.use(express.json());
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  const url = new URL(`http://127.0.0.1:${server.address().port}/mcp`);
  const jwks = createRemoteJWKSet(new URL(metadata.jwks_uri));
  const seen = [];
  const verifier = {
    async verifyAccessToken(token) {
      try {
        const { payload } = await jwtVerify(token, jwks, { issuer, audience: url.href, typ: 'at+jwt' });
        return { token, clientId: payload.client_id, scopes: String(payload.scope ?? '').split(' ').filter(Boolean),
                 expiresAt: payload.exp, resource: new URL(payload.aud), extra: { sub: payload.sub } };
      } catch (e) {
        throw new InvalidTokenError(e.message);
      }
    },
  };
  app.use(mcpAuthMetadataRouter({ oauthMetadata: metadata, resourceServerUrl: url,
    scopesSupported: ['mcp:read', 'mcp:call'], resourceName: 'oidc-test' }));
  const bearer = requireBearerAuth({ verifier, requiredScopes: ['mcp:call'], expectedResource: url,
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(url) });
  app.all('/mcp', bearer, async (req, res) => {
    const mcp = new McpServer({ name: 'protected', version: '1.0.0' });
    mcp.registerTool('whoami', { description: 'the caller' }, async (extra) => {
      const sub = extra.authInfo?.extra?.sub;
      seen.push(sub);
      return { content: [{ type: 'text', text: JSON.stringify({ sub, scopes: extra.authInfo?.scopes }) }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); mcp.close(); });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  return {
    url: url.href, seen,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

test('the official SDK client: 401 -> RFC 9728 -> RFC 8414 -> DCR -> code + PKCE + resource -> connected; refresh on a 401', T, async () => {
  const metadata = await getJson(oidc.metadataUrl);
  const rs = await protectedMcpServer(oidc.issuer, metadata);
  let conn;
  try {
    const unauth = await fetch(rs.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(unauth.status, 401);
    assert.match(unauth.headers.get('www-authenticate'), /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/);

    conn = await sdkOAuthConnect(rs.url, { user: 'carol', clientName: 'sdk-oauth-test' });
    const { state } = conn;
    assert.equal(state.authorizationUrls.length, 1);
    const authUrl = new URL(state.authorizationUrls[0]);
    assert.equal(authUrl.origin + authUrl.pathname, metadata.authorization_endpoint);
    assert.equal(authUrl.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authUrl.searchParams.get('resource'), rs.url);
    assert.equal(authUrl.searchParams.get('scope'), 'mcp:call', 'the scope of the 401 (SEP-835)');
    assert.equal(state.issuer, oidc.issuer, 'iss on the redirect');
    assert.ok(state.clientInformation.client_id, 'registered dynamically');
    assert.ok(conn.tokens.refresh_token);
    const at = verifyJwt(conn.tokens.access_token, await fetchJwks(oidc)).payload;
    assert.equal(at.aud, rs.url);
    assert.equal(at.sub, 'carol');

    const r = await conn.client.callTool({ name: 'whoami', arguments: {} });
    assert.deepEqual(JSON.parse(r.content[0].text), { sub: 'carol', scopes: ['mcp:call'] });
    assert.deepEqual(rs.seen, ['carol']);

    // the access token goes bad: the SDK refreshes on the 401 and retries, no new authorization
    conn.state.tokens = { ...conn.tokens, access_token: 'garbage' };
    const r2 = await conn.client.callTool({ name: 'whoami', arguments: {} });
    assert.equal(JSON.parse(r2.content[0].text).sub, 'carol');
    assert.equal(state.authorizationUrls.length, 1, 'refreshed, not re-authorized');
    assert.equal(state.tokenHistory.length, 2);
    assert.notEqual(state.tokenHistory[1].access_token, state.tokenHistory[0].access_token);
  } finally {
    await conn?.close();
    await rs.close();
  }
});
