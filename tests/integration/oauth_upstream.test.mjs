// mcp-chain as an OAuth 2.1 client of a protected HTTP upstream, with real
// parts: the OpenID provider of fixtures/oidc-server.mjs (oidc-provider 9:
// DCR, PKCE S256, resource indicators -> JWT access tokens, refresh tokens,
// RFC 9207 iss) and fixtures/protected-upstream.mjs (the official SDK's
// McpServer behind requireBearerAuth, verifying the JWTs against the JWKS).
// `mcp-chain auth login` is driven headless: the test reads "open: URL" from
// its stderr, plays the user with userAgent and delivers the redirect to the
// loopback callback as the browser would.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, readdirSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { CHAIN, HERE, sleep } from './lib.mjs';
import { startOidc, userAgent } from './oidc_lib.mjs';

const T = { timeout: 60_000, skip: CHAIN ? false : 'no mcp-chain binary' };
let oidc, upstream, dir, cfgFile, state;

/** Runs mcp-chain with ARGS; resolves { code, stdout, stderr }. ONSTDERR sees stderr as it comes. */
function run(args, { onStderr, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(CHAIN, args, { env: { ...process.env, XDG_STATE_HOME: state, ...env },
      stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`mcp-chain ${args.join(' ')}: timeout\n${err}`)); }, 30_000);
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; onStderr?.(err, child); });
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, stdout: out, stderr: err }); });
  });
}

/** Starts the protected upstream; resolves { url, stop() }. */
async function startUpstream(opts) {
  const child = spawn(process.execPath, [path.join(HERE, 'fixtures', 'protected-upstream.mjs'), JSON.stringify(opts)],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c) => { out += c; if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0])); });
    child.on('exit', (code) => reject(new Error(`protected-upstream exited ${code}`)));
  });
  return { url: line.url, stop: () => { child.stdin.end(); child.kill('SIGTERM'); } };
}

/** `auth login NAME` played through: the URL from stderr, the user, the redirect. */
async function login(name = 'prot', user = 'alice', extra = []) {
  let started = false, final, agentErr;
  const r = await run(['auth', 'login', name, '-c', cfgFile, ...extra], {
    onStderr: (err) => {
      const m = /^open: (\S+)$/m.exec(err);
      if (!m || started) return;
      started = true;
      userAgent(m[1], { user })
        .then(async (redirect) => { final = redirect; const res = await fetch(redirect); await res.text(); })
        .catch((e) => { agentErr = e; });
    },
  });
  return { ...r, final, agentErr };
}

function writeConfig(oauth = true, name = 'prot') {
  writeFileSync(cfgFile, JSON.stringify({ mcpServers: { [name]: { url: upstream.url, oauth } } }));
}

const storeFiles = () => {
  try { return readdirSync(path.join(state, 'mcp-chain', 'oauth')); } catch { return []; }
};
const storePath = () => path.join(state, 'mcp-chain', 'oauth', storeFiles()[0]);
const seen = async () => (await fetch(new URL('/_seen', upstream.url))).json();

before(async () => {
  if (!CHAIN) return;
  dir = mkdtempSync(path.join(tmpdir(), 'mcpc-oauth-'));
  state = path.join(dir, 'state');
  cfgFile = path.join(dir, 'config.json');
  oidc = await startOidc({ tokenTtl: 300 });
  upstream = await startUpstream({ metadataUrl: oidc.metadataUrl });
  writeConfig();
});
after(async () => {
  upstream?.stop();
  await oidc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('no login yet: the backend is down with "needs login"', T, async () => {
  const r = await run(['list', '-c', cfgFile]);
  assert.match(r.stdout + r.stderr, /needs login: mcp-chain auth login prot/);
});

test('an upstream without "oauth" that asks for it: a hint to add it', T, async () => {
  writeConfig(false);
  try {
    const r = await run(['list', '-c', cfgFile]);
    assert.match(r.stdout + r.stderr, /needs login: the server asks for OAuth: add "oauth": true to "prot"/);
  } finally {
    writeConfig();
  }
});

test('auth login: discovery, DCR, code + PKCE + resource, the loopback redirect, the store', T, async () => {
  const r = await login();
  assert.equal(r.agentErr, undefined, String(r.agentErr));
  assert.equal(r.code, 0, r.stderr);
  const auth = new URL(/^open: (\S+)$/m.exec(r.stderr)[1]);
  assert.equal(auth.origin, oidc.issuer);
  assert.equal(auth.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(auth.searchParams.get('resource'), upstream.url);
  assert.equal(auth.searchParams.get('scope'), 'mcp:call', 'the scope of the 401 challenge');
  assert.match(auth.searchParams.get('redirect_uri'), /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
  assert.ok(auth.searchParams.get('state').length >= 32);
  assert.equal(new URL(r.final).searchParams.get('iss'), oidc.issuer);
  assert.match(r.stderr, /logged in to prot at http:\/\/127\.0\.0\.1:\d+/);
  // the store: one file, 0600 in a 0700 directory, holding tokens and the registration
  assert.equal(storeFiles().length, 1);
  assert.equal(statSync(storePath()).mode & 0o777, 0o600);
  assert.equal(statSync(path.dirname(storePath())).mode & 0o777, 0o700);
  const kept = JSON.parse(readFileSync(storePath(), 'utf8'));
  assert.equal(kept.issuer, oidc.issuer);
  assert.ok(kept.access_token && kept.refresh_token && kept.client.client_id);
  assert.equal(kept.client.registered, true);
  assert.ok(!r.stderr.includes(kept.access_token) && !r.stderr.includes(kept.refresh_token),
    'no token on stderr');
});

test('auth status shows the issuer, expiry, scope and refresh token, never a token', T, async () => {
  const kept = JSON.parse(readFileSync(storePath(), 'utf8'));
  const r = await run(['auth', 'status', '-c', cfgFile]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`prot: logged in at ${oidc.issuer}; access token expires in \\d+ s; scope: mcp:call; refresh token: yes; client: registered dynamically`));
  assert.ok(!r.stdout.includes(kept.access_token));
});

test('a call through mcp-chain carries the user\'s token, with aud = the upstream URL', T, async () => {
  const before = (await seen()).length;
  const r = await run(['call', 'whoami', '--json', '-c', cfgFile]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /alice/);
  const s = (await seen()).slice(before);
  assert.ok(s.length >= 1);
  for (const x of s) {
    assert.equal(x.sub, 'alice');
    assert.equal(x.aud, upstream.url);
  }
});

test('an expiring token is refreshed before the request, and the new one is kept', T, async () => {
  const kept = JSON.parse(readFileSync(storePath(), 'utf8'));
  kept.expires_at = Math.floor(Date.now() / 1000) + 5;   // within the refresh margin
  writeFileSync(storePath(), JSON.stringify(kept), { mode: 0o600 });
  const before = (await seen()).length;
  const r = await run(['call', 'whoami', '--json', '-c', cfgFile]);
  assert.equal(r.code, 0, r.stderr);
  const now = JSON.parse(readFileSync(storePath(), 'utf8'));
  assert.notEqual(now.access_token, kept.access_token, 'a new access token was stored');
  assert.ok(now.expires_at > kept.expires_at + 60);
  const s = (await seen()).slice(before);
  assert.ok(s.length >= 1 && s.every((x) => x.sub === 'alice'));
});

test('a refused access token (401): refreshed once and the request sent again', T, async () => {
  const kept = JSON.parse(readFileSync(storePath(), 'utf8'));
  kept.access_token = 'not-a-valid-token';
  writeFileSync(storePath(), JSON.stringify(kept), { mode: 0o600 });
  const r = await run(['call', 'echo', 'text=hi', '--json', '-c', cfgFile]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /hi/);
  const now = JSON.parse(readFileSync(storePath(), 'utf8'));
  assert.notEqual(now.access_token, 'not-a-valid-token');
});

test('a second login reuses the registration kept for the issuer', T, async () => {
  const first = JSON.parse(readFileSync(storePath(), 'utf8')).client.client_id;
  const r = await login('prot', 'bob');
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(readFileSync(storePath(), 'utf8')).client.client_id, first);
  const c = await run(['call', 'whoami', '--json', '-c', cfgFile]);
  assert.match(c.stdout, /bob/);
});

test('a redirect with a wrong state is refused and nothing is stored', T, async () => {
  const r2 = path.join(dir, 'other.json');
  writeFileSync(r2, JSON.stringify({ mcpServers: { other: { url: upstream.url, oauth: true } } }));
  let done = false;
  const r = await run(['auth', 'login', 'other', '-c', r2], {
    onStderr: (err) => {
      const m = /^open: (\S+)$/m.exec(err);
      if (!m || done) return;
      done = true;
      const u = new URL(m[1]);
      const cb = new URL(u.searchParams.get('redirect_uri'));
      cb.searchParams.set('code', 'x');
      cb.searchParams.set('state', 'forged');
      cb.searchParams.set('iss', oidc.issuer);
      fetch(cb).then((res) => res.text()).catch(() => {});
    },
  });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /state does not match/);
  assert.ok(!storeFiles().some((f) => f.startsWith('other.')));
});

test('logout removes the file: "needs login" again', T, async () => {
  const r = await run(['auth', 'logout', 'prot', '-c', cfgFile]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /prot: logged out/);
  assert.equal(storeFiles().filter((f) => f.startsWith('prot.')).length, 0);
  const l = await run(['list', '-c', cfgFile]);
  assert.match(l.stdout + l.stderr, /needs login: mcp-chain auth login prot/);
});

/** An SDK client of mcp-chain over stdio; CAPS its capabilities. */
async function stdioClient(caps) {
  const transport = new StdioClientTransport({ command: CHAIN, args: ['-c', cfgFile],
    env: { ...process.env, XDG_STATE_HOME: state }, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const client = new Client({ name: 'oauth-test', version: '1.0.0' }, { capabilities: caps });
  await client.connect(transport);
  return { client, stderr: () => stderr };
}

test('stdio, a client without URL elicitation: "needs login" as before', T, async () => {
  assert.equal(storeFiles().filter((f) => f.startsWith('prot.')).length, 0);
  // prot is the only backend: as when it is down, the initialize itself fails with the hint
  const err = await stdioClient({}).then(
    async ({ client }) => {
      const e = await client.callTool({ name: 'whoami', arguments: {} }).then(
        (r) => new Error(JSON.stringify(r)), (x) => x);
      await client.close();
      return e;
    }, (e) => e);
  assert.notEqual(err.code, -32042);
  assert.match(err.message, /needs login: mcp-chain auth login prot/);
  assert.equal(storeFiles().filter((f) => f.startsWith('prot.')).length, 0);
});

test('stdio, a client with URL elicitation: -32042 with the authorize URL, signed in in place', T, async () => {
  assert.equal(storeFiles().filter((f) => f.startsWith('prot.')).length, 0);
  const { client, stderr } = await stdioClient({ elicitation: { url: {} } });
  try {
    const err = await client.callTool({ name: 'whoami', arguments: {} }).then(
      (r) => assert.fail(JSON.stringify(r)), (e) => e);
    assert.equal(err.code, -32042, `${err.message}\n${stderr()}`);
    const [e] = err.data.elicitations;
    assert.equal(e.mode, 'url');
    assert.ok(e.elicitationId);
    assert.ok(e.url.startsWith(oidc.issuer ?? new URL(oidc.metadataUrl).origin), e.url);
    // a second call before the sign-in: the same URL
    const again = await client.callTool({ name: 'whoami', arguments: {} }).then(
      (r) => assert.fail(JSON.stringify(r)), (x) => x);
    assert.equal(again.data.elicitations[0].url, e.url);
    // the user signs in; the browser lands on mcp-chain's loopback callback
    const callback = await userAgent(e.url, { user: 'carol' });
    assert.match(callback, /^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
    const res = await fetch(callback);
    assert.equal(res.status, 200, await res.text());
    // the retry goes through with carol's token
    const before = (await seen()).length;
    let r;
    for (let i = 0; i < 50; i++) {
      r = await client.callTool({ name: 'whoami', arguments: {} }).catch((x) => x);
      if (!(r instanceof Error)) break;
      await sleep(100);
    }
    assert.ok(!(r instanceof Error), `${r?.message}\n${stderr()}`);
    assert.match(JSON.stringify(r), /carol/);
    const s = (await seen()).slice(before);
    assert.ok(s.length >= 1 && s.every((x) => x.sub === 'carol'), JSON.stringify(s));
    // kept in the plain single-user store, 0600
    const files = storeFiles().filter((f) => f.startsWith('prot.'));
    assert.equal(files.length, 1);
    const mode = statSync(path.join(state, 'mcp-chain', 'oauth', files[0])).mode & 0o777;
    assert.equal(mode, 0o600);
    assert.ok(!readFileSync(path.join(state, 'mcp-chain', 'oauth', files[0]), 'utf8').includes('sealed'));
  } finally {
    await client.close();
  }
  const st = await run(['auth', 'status', 'prot', '-c', cfgFile]);
  assert.match(st.stdout, /prot: logged in/);
});
