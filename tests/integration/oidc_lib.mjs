// Helpers for the OAuth 2.1 / OpenID Connect tests: a real authorization server
// (fixtures/oidc-server.mjs, oidc-provider 9) run as a child process, a
// headless browser for its authorization endpoint, and the official TypeScript
// SDK's OAuth client driven end to end against an MCP URL.
//
//   startOidc(opts)                      -> { issuer, port, pid, jwksUri, ..., stop() }
//   clientCredentialsToken(oidc, {resource, scope})  -> access token string (via "test-cc")
//   tokenRequest(oidc, params, {client, secret})     -> { status, body } (a POST to /token)
//   userAgent(authorizationUrl, {user})  -> the redirect to the client's redirect_uri (a URL string)
//   sdkOAuthConnect(mcpUrl, {user, scope, clientName}) -> { client, transport, tokens, ..., close() }
//   fetchJwks(oidc), verifyJwt(token, jwks) -> node:crypto signature check, { header, payload }

import { spawn } from 'node:child_process';
import { constants, createPublicKey, createVerify, randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const OIDC_SERVER = path.join(HERE, 'fixtures', 'oidc-server.mjs');

/** The pre-registered clients of fixtures/oidc-server.mjs. */
export const CC_CLIENT = { id: 'test-cc', secret: 'test-cc-secret-0123456789abcdef' };
export const RS_CLIENT = { id: 'test-rs', secret: 'test-rs-secret-0123456789abcdef' };
export const PUBLIC_CLIENT = { id: 'test-public' };
export const MCP_SCOPES = ['mcp:read', 'mcp:call', 'mcp:admin'];

/* Children still running when this process exits are killed (a test that
 * crashed or was cancelled never stops its provider); a SIGKILLed parent
 * closes their stdin, which ends them too (exitOnEof). */
const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
  }
});

/**
 * Start fixtures/oidc-server.mjs with OPTS (its JSON options: port, alg,
 * tokenFormat, tokenTtl, refreshTtl, scopes, resources, user,
 * refreshForCodeClients, clients) and wait for its ready line.
 * Returns { issuer, port, pid, jwksUri, tokenEndpoint, introspectionEndpoint,
 *   registrationEndpoint, metadataUrl, opts, stderr(), stop() }; stop() sends
 * SIGTERM to that pid and resolves once it exited (SIGKILL after 3 s).
 */
export async function startOidc(opts = {}, { timeoutMs = 15_000 } = {}) {
  // exitOnEof: the provider watches its stdin, so it ends with this process
  // even when a signal gives no 'exit' event here
  const child = spawn(process.execPath, [OIDC_SERVER, JSON.stringify({ exitOnEof: true, ...opts })], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.on('error', () => {});
  live.add(child);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    live.delete(child);
    resolve({ code, signal });
  }));
  let err = '';
  child.stderr.on('data', (c) => {
    err += c.toString('utf8');
    if (err.length > 256 * 1024) err = err.slice(-256 * 1024);
    if (process.env.IT_VERBOSE) process.stderr.write(c);
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try { process.kill(child.pid, 'SIGTERM'); } catch { /* gone */ }
      const t = setTimeout(() => { try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
      const r = await exited;
      clearTimeout(t);
      return r;
    }
    return exited;
  };
  let ready;
  try {
    ready = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`oidc-server: no ready line in ${timeoutMs} ms`)), timeoutMs);
      child.stdout.on('data', (c) => {
        out += c.toString('utf8');
        const nl = out.indexOf('\n');
        if (nl >= 0) {
          clearTimeout(timer);
          try { resolve(JSON.parse(out.slice(0, nl))); } catch (e) { reject(e); }
        }
      });
      exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`oidc-server exited (${code ?? signal}) before it was ready`));
      });
    });
  } catch (e) {
    await stop();
    e.message += `\n--- oidc-server stderr ---\n${err.slice(-4000)}`;
    throw e;
  }
  const { issuer, port } = ready;
  return {
    issuer,
    port,
    pid: child.pid,
    opts,
    jwksUri: `${issuer}/jwks`,
    tokenEndpoint: `${issuer}/token`,
    introspectionEndpoint: `${issuer}/token/introspection`,
    registrationEndpoint: `${issuer}/reg`,
    authorizationEndpoint: `${issuer}/auth`,
    metadataUrl: `${issuer}/.well-known/oauth-authorization-server`,
    stderr: () => err,
    stop,
  };
}

const basic = (id, secret) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

/**
 * POST PARAMS (an object or URLSearchParams) to the token endpoint — with HTTP
 * Basic for a confidential CLIENT (default test-cc), or client_id in the body
 * when `secret` is null. Returns { status, body } (body parsed from JSON).
 */
export async function tokenRequest(oidc, params, { client = CC_CLIENT.id, secret = CC_CLIENT.secret, endpoint } = {}) {
  const body = new URLSearchParams(params);
  const headers = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (secret === null) body.set('client_id', client);
  else headers.authorization = basic(client, secret);
  const r = await fetch(endpoint ?? oidc.tokenEndpoint, { method: 'POST', headers, body });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: r.status, body: json };
}

/**
 * A client_credentials access token from "test-cc" for RESOURCE (its aud) with
 * SCOPE (a space-separated string; default every MCP scope). Returns the token
 * string; throws with the provider's answer otherwise.
 */
export async function clientCredentialsToken(oidc, { resource, scope = MCP_SCOPES.join(' ') } = {}) {
  const params = { grant_type: 'client_credentials' };
  if (resource) params.resource = resource;
  if (scope) params.scope = scope;
  const r = await tokenRequest(oidc, params);
  if (r.status !== 200 || !r.body.access_token)
    throw new Error(`client_credentials: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.access_token;
}

/** A cookie jar for one user agent: name -> value, paths and domains ignored (one host). */
function cookieJar() {
  const jar = new Map();
  return {
    take(res) {
      for (const line of res.headers.getSetCookie()) {
        const [pair, ...attrs] = line.split(';');
        const eq = pair.indexOf('=');
        const name = pair.slice(0, eq).trim();
        const value = pair.slice(eq + 1).trim();
        const expired = attrs.some((a) => {
          const [k, v] = a.trim().split('=');
          if (/^max-age$/i.test(k)) return Number(v) <= 0;
          if (/^expires$/i.test(k)) return Date.parse(a.trim().slice(8)) <= Date.now();
          return false;
        });
        if (expired || value === '') jar.delete(name);
        else jar.set(name, value);
      }
    },
    header() {
      return [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    },
  };
}

/**
 * Play the browser for AUTHORIZATION_URL: add login_hint=USER (when given; the
 * provider's headless user logs in as that account, "!deny" refuses), GET it and
 * follow redirects (fetch redirect: 'manual', cookies kept) through the
 * provider's interactions until a redirect leaves the provider's origin or
 * reaches the request's redirect_uri. Returns that final URL as a string
 * (code, state, iss — or error) without fetching it. Throws when a page
 * answers anything but a redirect, or after MAXHOPS redirects.
 */
export async function userAgent(authorizationUrl, { user, maxHops = 20, hops } = {}) {
  const start = new URL(authorizationUrl);
  if (user !== undefined) start.searchParams.set('login_hint', user);
  const redirectUri = start.searchParams.get('redirect_uri');
  const target = redirectUri ? new URL(redirectUri) : null;
  const jar = cookieJar();
  let url = start;
  for (let i = 0; i < maxHops; i++) {
    const cookie = jar.header();
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    jar.take(res);
    const location = res.headers.get('location');
    hops?.push({ url: url.href, status: res.status, location });
    if (res.status < 300 || res.status >= 400 || !location) {
      const text = await res.text();
      throw new Error(`userAgent: ${url.href} answered ${res.status}, not a redirect: ${text.slice(0, 1000)}`);
    }
    await res.body?.cancel();
    const next = new URL(location, url);
    const leaves = next.origin !== start.origin;
    const arrived = target && next.origin === target.origin && next.pathname === target.pathname;
    if (leaves || arrived) return next.href;
    url = next;
  }
  throw new Error(`userAgent: more than ${maxHops} redirects from ${authorizationUrl}`);
}

/**
 * Connect the official SDK's Client to MCPURL over Streamable HTTP with the
 * SDK's own OAuth support (OAuthClientProvider + StreamableHTTPClientTransport's
 * authProvider): the first connect gets the 401, discovers (RFC 9728 -> RFC 8414),
 * registers (DCR, a native public client), and calls redirectToAuthorization,
 * which runs userAgent(url, {user}); the connect throws UnauthorizedError; the
 * redirect's state and iss are checked here; transport.finishAuth(code)
 * exchanges the code (PKCE, resource); a second connect on a new transport
 * succeeds.
 * opts: user (login_hint), scope (clientMetadata.scope: the fallback when
 *   neither the 401 nor the PRM names scopes), clientName, clientInfo,
 *   redirectUrl (default http://127.0.0.1:<random>/callback, never listened on).
 * Returns { client, transport, provider, state: { clientInformation, tokens,
 *   tokenHistory, authorizationUrls, callbackUrls, codeVerifier, discovery },
 *   tokens (the latest), close() }.
 */
export async function sdkOAuthConnect(mcpUrl, {
  user, scope, clientName = 'mcp-chain-oauth-test', clientInfo = { name: 'mcp-chain-oauth-test', version: '1.0.0' },
  redirectUrl = `http://127.0.0.1:${20000 + Math.floor(Math.random() * 40000)}/callback`,
} = {}) {
  const state = {
    clientInformation: undefined, tokens: undefined, tokenHistory: [], codeVerifier: undefined,
    discovery: undefined, authorizationUrls: [], callbackUrls: [], expectedState: undefined, issuer: undefined,
  };
  const provider = {
    get redirectUrl() { return redirectUrl; },
    get clientMetadata() {
      return {
        client_name: clientName,
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        application_type: 'native',
        ...(scope ? { scope } : {}),
      };
    },
    state() { return (state.expectedState = randomUUID()); },
    clientInformation() { return state.clientInformation; },
    saveClientInformation(info) { state.clientInformation = info; },
    tokens() { return state.tokens; },
    saveTokens(tokens) { state.tokens = tokens; state.tokenHistory.push(tokens); },
    async redirectToAuthorization(url) {
      state.authorizationUrls.push(url.href);
      state.callbackUrls.push(await userAgent(url, { user }));
    },
    saveCodeVerifier(v) { state.codeVerifier = v; },
    codeVerifier() {
      if (!state.codeVerifier) throw new Error('no code verifier saved');
      return state.codeVerifier;
    },
    invalidateCredentials(what) {
      if (what === 'all' || what === 'client') state.clientInformation = undefined;
      if (what === 'all' || what === 'tokens') state.tokens = undefined;
      if (what === 'all' || what === 'verifier') state.codeVerifier = undefined;
      if (what === 'all' || what === 'discovery') state.discovery = undefined;
    },
    saveDiscoveryState(d) { state.discovery = d; },
    discoveryState() { return state.discovery; },
  };

  const client = new Client(clientInfo, { capabilities: {} });
  const newTransport = () => new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  let transport = newTransport();
  try {
    await client.connect(transport);
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    const cb = state.callbackUrls.at(-1);
    if (!cb) throw new Error(`UnauthorizedError without a redirect to the authorization server: ${e.message}`);
    const u = new URL(cb);
    if (u.searchParams.get('error'))
      throw new Error(`authorization refused: ${u.searchParams.get('error')} ${u.searchParams.get('error_description') ?? ''}`);
    if (u.searchParams.get('state') !== state.expectedState)
      throw new Error(`authorization response state ${u.searchParams.get('state')} != ${state.expectedState}`);
    const as = state.discovery?.authorizationServerMetadata?.issuer;
    if (u.searchParams.has('iss') && as && u.searchParams.get('iss') !== as)
      throw new Error(`authorization response iss ${u.searchParams.get('iss')} != ${as} (RFC 9207)`);
    state.issuer = u.searchParams.get('iss');
    const code = u.searchParams.get('code');
    if (!code) throw new Error(`no code in the authorization response ${cb}`);
    await transport.finishAuth(code);
    await transport.close().catch(() => {});
    transport = newTransport();
    await client.connect(transport);
  }
  return {
    client, transport, provider, state,
    get tokens() { return state.tokens; },
    async close() { await client.close().catch(() => {}); },
  };
}

// ---------------------------------------------------------------------------
// JWT checks with node:crypto only (no JOSE library: the test must not trust
// the code it checks)

const b64json = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));

/** The provider's JWK Set. */
export async function fetchJwks(oidc) {
  const r = await fetch(oidc.jwksUri);
  if (!r.ok) throw new Error(`jwks: ${r.status}`);
  return r.json();
}

/** Header and payload of a compact JWS, unchecked. */
export function decodeJwt(token) {
  const [h, p] = token.split('.');
  return { header: b64json(h), payload: b64json(p) };
}

/**
 * Verify compact JWS TOKEN's signature against JWKS (RS256, PS256, ES256) with
 * node:crypto; the key is the one whose kid the header names. Returns
 * { header, payload, key } or throws. Claims are not checked.
 */
export function verifyJwt(token, jwks) {
  const [h, p, s] = token.split('.');
  const header = b64json(h);
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  if (!jwk) throw new Error(`kid ${header.kid} not in the JWKS`);
  const key = createPublicKey({ key: jwk, format: 'jwk' });
  const data = Buffer.from(`${h}.${p}`);
  const sig = Buffer.from(s, 'base64url');
  const v = createVerify('SHA256').update(data);
  let ok;
  switch (header.alg) {
    case 'RS256': ok = v.verify(key, sig); break;
    case 'PS256': ok = v.verify({ key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }, sig); break;
    case 'ES256': ok = v.verify({ key, dsaEncoding: 'ieee-p1363' }, sig); break;
    default: throw new Error(`alg ${header.alg} not handled`);
  }
  if (!ok) throw new Error(`bad ${header.alg} signature (kid ${header.kid})`);
  return { header, payload: b64json(p), key: jwk };
}
