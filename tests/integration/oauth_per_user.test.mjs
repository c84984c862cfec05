// One protected upstream, one set of tokens per principal of a shared HTTP
// front ("oauth": {"perPrincipal": true}), with real parts: the OpenID
// provider of fixtures/oidc-server.mjs, the SDK-built protected upstream of
// fixtures/protected-upstream.mjs (which records the token's sub of every
// request it accepts), and mcp-chain --listen with the auth module's static
// tokens for alice and bob in front. A call without the principal's tokens
// gets -32042 (URL elicitation required) with mcp-chain's own login link;
// userAgent plays the browser at the provider, the test delivers the
// redirect to mcp-chain's /oauth/callback; the retry then carries that
// principal's token, never another's. Sign-out removes them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync, readFileSync, readdirSync, statSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { CHAIN, HERE, sleep } from './lib.mjs';
import { startChain, request } from './http_lib.mjs';
import { startOidc, userAgent } from './oidc_lib.mjs';

const T = { timeout: 90_000, skip: CHAIN ? false : 'no mcp-chain binary' };
const ALICE = 'alice-' + 'A'.repeat(20) + '-secret';
const BOB = 'bob-' + 'B'.repeat(20) + '-secret';
const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const H = { 'Content-Type': 'application/json', Accept: 'application/json' };
const INIT = { protocolVersion: '2025-11-25', capabilities: { elicitation: { url: {} } },
  clientInfo: { name: 'per-user-test', version: '1' } };

let oidc, upstream, dir, state, keyFile, cfgFile, chain;

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

const seen = async () => (await fetch(new URL('/_seen', upstream.url))).json();
const storeDir = () => path.join(state, 'mcp-chain', 'oauth');
const storeFiles = () => { try { return readdirSync(storeDir()).filter((f) => f.endsWith('.json')); } catch { return []; } };

/** A JSON-RPC POST in session SID with TOKEN: the parsed body. */
async function rpc(token, sid, id, method, params) {
  const r = await request(chain.port, {
    headers: { ...H, Authorization: `Bearer ${token}`, ...(sid ? { 'Mcp-Session-Id': sid } : {}) },
    body: JSON.stringify(id === undefined ? { jsonrpc: '2.0', method, params } : { jsonrpc: '2.0', id, method, params }),
  });
  return { status: r.status, headers: r.headers, msg: r.body ? JSON.parse(r.body) : null };
}

/** A session of TOKEN's principal: its id. */
async function session(token) {
  const r = await rpc(token, null, 1, 'initialize', INIT);
  assert.equal(r.status, 200, JSON.stringify(r.msg));
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid);
  await rpc(token, sid, undefined, 'notifications/initialized');
  return sid;
}

let nextId = 10;
const whoami = (token, sid) => rpc(token, sid, nextId++, 'tools/call', { name: 'whoami', arguments: {} });

/** Asserts R is the -32042 error; returns its elicitation. */
function elicitation(r) {
  assert.equal(r.msg.error?.code, -32042, JSON.stringify(r.msg));
  const e = r.msg.error.data.elicitations;
  assert.equal(e.length, 1);
  assert.equal(e[0].mode, 'url');
  assert.ok(e[0].elicitationId);
  assert.match(e[0].message, /Sign in to prot/);
  assert.ok(e[0].url.startsWith(`${chain.base}/oauth/login?t=`), e[0].url);
  return e[0];
}

/** The browser: the link, the provider as USER, then mcp-chain's callback. */
async function signIn(link, user) {
  const first = await fetch(link, { redirect: 'manual' });
  assert.equal(first.status, 302, await first.text());
  const auth = first.headers.get('location');
  assert.ok(auth.startsWith(oidc.issuer), auth);
  assert.equal(new URL(auth).searchParams.get('redirect_uri'), `${chain.base}/oauth/callback`);
  const back = await userAgent(auth, { user });
  assert.ok(back.startsWith(`${chain.base}/oauth/callback?`), back);
  const page = await fetch(back);
  const text = await page.text();
  assert.equal(page.status, 200, text);
  assert.match(text, /Signed in to prot/);
  return back;
}

/** Calls whoami until it is answered as WANT ('ok' or -32042), for a few seconds. */
async function until(token, sid, want) {
  let r;
  for (let i = 0; i < 50; i++) {
    r = await whoami(token, sid);
    if (want === 'ok' ? r.msg.result : r.msg.error?.code === -32042) return r;
    await sleep(100);
  }
  assert.fail(`whoami never became ${want}: ${JSON.stringify(r.msg)}`);
}

before(async () => {
  if (!CHAIN) return;
  dir = mkdtempSync(path.join(tmpdir(), 'mcpc-peruser-'));
  state = path.join(dir, 'state');
  keyFile = path.join(dir, 'token.key');
  writeFileSync(keyFile, randomBytes(32));
  chmodSync(keyFile, 0o600);
  cfgFile = path.join(dir, 'config.json');
  oidc = await startOidc({ tokenTtl: 300 });
  upstream = await startUpstream({ metadataUrl: oidc.metadataUrl });
  writeFileSync(cfgFile, JSON.stringify({
    middleware: [{ use: 'auth', tokens: [{ sha256: sha256(ALICE), principal: 'alice' },
      { sha256: sha256(BOB), principal: 'bob' }], env: false }],
    tokenStore: { keyFile },
    // the SDK upstream may leave a session DELETE unanswered: bound it under chain.stop's 5 s
    shutdownGraceMs: 2000,
    mcpServers: { prot: { url: upstream.url, scope: 'session', oauth: { perPrincipal: true } } },
  }));
  chain = await startChain(null, { config: cfgFile, env: { XDG_STATE_HOME: state } });
});
after(async () => {
  const r = await chain?.stop();
  upstream?.stop();
  await oidc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (chain) {
    assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}\n${chain.stderr.slice(-3000)}`);
    assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
  }
});

test('per principal: -32042, sign-in through mcp-chain, each principal\'s own token, sign-out', T, async () => {
  try {
    const aliceSid = await session(ALICE);
    // alice has no token for prot: -32042 with mcp-chain's login link
    const e1 = elicitation(await whoami(ALICE, aliceSid));
    assert.equal((await seen()).length, 0, 'nothing reached the upstream');

    // a forged or altered link: 400
    const forged = await fetch(`${chain.base}/oauth/login?t=${'A'.repeat(80)}`, { redirect: 'manual' });
    assert.equal(forged.status, 400);
    assert.match(await forged.text(), /not valid/);
    const t = new URL(e1.url).searchParams.get('t');
    const altered = t.slice(0, 20) + (t[20] === 'A' ? 'B' : 'A') + t.slice(21);
    assert.equal((await fetch(`${chain.base}/oauth/login?t=${altered}`, { redirect: 'manual' })).status, 400);
    // a link is no bearer credential: a wrong Host is refused as on /mcp
    const host = await request(chain.port, { method: 'GET', path: new URL(e1.url).pathname + new URL(e1.url).search,
      headers: { Host: 'evil.example:80' } });
    assert.equal(host.status, 403);

    // alice signs in at the provider as alice-up
    const callback = await signIn(e1.url, 'alice-up');
    // the callback's state is used once
    const replay = await fetch(callback);
    assert.equal(replay.status, 400);
    assert.match(await replay.text(), /already used|unknown/);

    // alice's retry goes through, with alice-up's token
    const before1 = (await seen()).length;
    const ok = await until(ALICE, aliceSid, 'ok');
    assert.match(JSON.stringify(ok.msg.result), /alice-up/);
    const s1 = (await seen()).slice(before1);
    assert.ok(s1.length >= 1);
    assert.ok(s1.every((x) => x.sub === 'alice-up'), JSON.stringify(s1));

    // the store: one sealed file, 0600, for alice's principal
    assert.equal(storeFiles().length, 1);
    const f1 = path.join(storeDir(), storeFiles()[0]);
    assert.equal(statSync(f1).mode & 0o777, 0o600);
    const raw = readFileSync(f1, 'utf8');
    assert.ok(!raw.includes('access_token') && !raw.includes('refresh_token'), 'sealed');
    assert.equal(JSON.parse(raw).issuer, oidc.issuer);
    assert.ok(JSON.parse(raw).sealed.length > 100);

    // bob: never alice's token
    const bobSid = await session(BOB);
    const before2 = (await seen()).length;
    const e2 = elicitation(await whoami(BOB, bobSid));
    assert.equal((await seen()).length, before2, 'bob\'s call did not reach the upstream');
    assert.notEqual(new URL(e2.url).searchParams.get('t'), t);
    await signIn(e2.url, 'bob-up');
    await until(BOB, bobSid, 'ok');
    assert.equal(storeFiles().length, 2, 'one file per principal');
    for (const f of storeFiles())
      assert.equal(statSync(path.join(storeDir(), f)).mode & 0o777, 0o600);

    // both call: each upstream request carries its own principal's token
    const before3 = (await seen()).length;
    const a = await whoami(ALICE, aliceSid);
    const b = await whoami(BOB, bobSid);
    assert.match(JSON.stringify(a.msg.result), /alice-up/);
    assert.match(JSON.stringify(b.msg.result), /bob-up/);
    const s3 = (await seen()).slice(before3);
    assert.deepEqual(s3.filter((x) => x.sub !== 'alice-up' && x.sub !== 'bob-up'), []);
    assert.ok(s3.some((x) => x.sub === 'alice-up') && s3.some((x) => x.sub === 'bob-up'));

    // a new session of alice's uses her kept tokens at once
    const alice2 = await session(ALICE);
    assert.match(JSON.stringify((await until(ALICE, alice2, 'ok')).msg.result), /alice-up/);

    // logout: needs alice's bearer token
    const anon = await request(chain.port, { method: 'GET', path: '/oauth/logout?upstream=prot' });
    assert.equal(anon.status, 401);
    const out = await request(chain.port, { method: 'GET', path: '/oauth/logout?upstream=prot',
      headers: { Authorization: `Bearer ${ALICE}` } });
    assert.equal(out.status, 200, out.body);
    assert.equal(storeFiles().length, 1, 'bob\'s file stays');
    elicitation(await until(ALICE, aliceSid, -32042));
    const b2 = await until(BOB, bobSid, 'ok');
    assert.match(JSON.stringify(b2.msg.result), /bob-up/);
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-4000)}`;
    throw e;
  }
});

test('configuration: perPrincipal needs "scope": "session" and a tokenStore key that only its owner reads', T, async () => {
  const run = (cfg) => new Promise((resolve) => {
    const f = path.join(dir, 'bad.json');
    writeFileSync(f, JSON.stringify(cfg));
    const p = spawn(CHAIN, ['--config', f, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (c) => { err += c; });
    p.on('exit', (code) => resolve({ code, err }));
  });
  const prot = { url: upstream.url, oauth: { perPrincipal: true } };
  let r = await run({ tokenStore: { keyFile }, mcpServers: { prot } });
  assert.notEqual(r.code, 0);
  assert.match(r.err, /\/mcpServers\/prot\/oauth\/perPrincipal: needs "scope": "session"/);
  r = await run({ mcpServers: { prot: { ...prot, scope: 'session' } } });
  assert.match(r.err, /\/tokenStore: missing/);
  const open = path.join(dir, 'open.key');
  writeFileSync(open, randomBytes(32));
  chmodSync(open, 0o644);
  r = await run({ tokenStore: { keyFile: open }, mcpServers: { prot: { ...prot, scope: 'session' } } });
  assert.match(r.err, /\/tokenStore\/keyFile: .* may be read by group or others .*chmod 600/);
});
