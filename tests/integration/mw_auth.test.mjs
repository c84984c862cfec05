// The "auth" middleware through the real binary wrapping the C fixture
// server: tokens in _meta checked against SHA-256 hashes and stripped
// before the backend sees them, clear refusals, principals that "policy"
// rules name, the environment credential taken at start and never passed
// on to a backend, and no secret in any log (even at debug level).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';

import {
  FIXTURE, SKIP_NO_FIXTURE, TEST_TIMEOUT, connect, fixtureServer, outcome, tmpPath,
  waitFor, RawChain, writeConfig,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const KEY = 'io.mcp-chain/token';
const ALICE = 'alice-' + 'A'.repeat(20) + '-secret';
const BOB = 'bob-' + 'B'.repeat(20) + '-secret';
const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const TOKENS = [
  { sha256: sha256(ALICE), principal: 'alice', roles: ['admin'] },
  { sha256: sha256(BOB), principal: 'bob' },
];

const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

/** Like lib.mjs's withRaw, and fails on a sanitizer report once mcp-chain exited. */
async function withRaw(opts, fn) {
  const c = new RawChain(opts);
  try {
    await fn(c);
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
  assert.doesNotMatch(c.stderr, SANITIZER_REPORT);
}

/** A config wrapping SERVER (default: the fixture) with the given modules. */
const configWith = (middleware, server = fixtureServer()) =>
  writeConfig(server, { name: 'fx', extra: { middleware } });

/** An SDK session through mcp-chain with MIDDLEWARE; CLIENT names the client. */
async function session(middleware, clientName = 'mcp-chain-integration') {
  const cfg = configWith(middleware);
  return connect('chain', fixtureServer(), {
    chainArgs: () => ['--config', cfg],
    clientInfo: { name: clientName, version: '1.0.0' },
  });
}

/** Runs FN with a session; fails on a sanitizer report from mcp-chain. */
async function run(middleware, fn, clientName) {
  const s = await session(middleware, clientName);
  try {
    return await fn(s);
  } finally {
    await s.close();
    assert.doesNotMatch(s.stderr(), SANITIZER_REPORT);
  }
}

/** The request the fixture's echo tool received. */
const echoed = (r) => r.structuredContent;

test('a token in _meta names the principal and never reaches the backend', T, async () => {
  await run([{ use: 'auth', tokens: TOKENS, env: false }], async ({ client, stderr }) => {
    const r = await client.callTool({ name: 'echo', arguments: { x: 1 }, _meta: { [KEY]: ALICE, other: 'kept' } });
    const got = echoed(r);
    assert.equal(got.params.name, 'echo');
    assert.deepEqual(got.params.arguments, { x: 1 });
    assert.equal(got.params._meta[KEY], undefined, 'the token was stripped');
    assert.equal(got.params._meta.other, 'kept');
    assert.ok(!JSON.stringify(got).includes(ALICE));
    // the only _meta member: _meta goes away
    const r2 = await client.callTool({ name: 'echo', arguments: {}, _meta: { [KEY]: BOB } });
    assert.equal(echoed(r2).params._meta, undefined);
    assert.ok(!stderr().includes(ALICE) && !stderr().includes(BOB), 'no token in the log');
  });
});

test('no token, a wrong token: refused with a clear error; ping is public', T, async () => {
  await run([{ use: 'auth', tokens: TOKENS, env: false }], async ({ client, stderr }) => {
    const none = await outcome(() => client.callTool({ name: 'echo', arguments: {} }));
    assert.equal(none.ok, false);
    assert.equal(none.code, -32010);
    assert.match(none.message, /unauthenticated: put a token in params\._meta\["io\.mcp-chain\/token"\]/);
    const wrong = await outcome(() => client.callTool({ name: 'echo', arguments: {}, _meta: { [KEY]: 'guess' } }));
    assert.equal(wrong.code, -32010);
    assert.match(wrong.message, /matches no configured token/);
    const list = await outcome(() => client.listTools());
    assert.equal(list.code, -32010, 'tools/list needs a credential too');
    assert.deepEqual(await client.ping(), {});
    await waitFor(() => stderr().includes('auth: request "tools/call" refused'), { what: 'the refusal in the log' });
    assert.ok(!stderr().includes('guess'), 'not even a wrong token is logged');
  });
});

test('policy rules name principals; a self-declared clientInfo name is no principal', T, async () => {
  const mw = [
    { use: 'auth', tokens: TOKENS, env: false, public: ['ping', 'tools/list'] },
    { use: 'policy', rules: [{ deny: ['echo'], clients: ['bob'] }, { allow: ['*'], clients: ['alice'] }] },
  ];
  await run(mw, async ({ client }) => {
    const asAlice = await client.callTool({ name: 'echo', arguments: {}, _meta: { [KEY]: ALICE } });
    assert.equal(echoed(asAlice).params.name, 'echo');
    const asBob = await outcome(() => client.callTool({ name: 'echo', arguments: {}, _meta: { [KEY]: BOB } }));
    const refused = asBob.ok ? asBob.value.isError && asBob.value.content[0].text : asBob.message;
    assert.match(String(refused), /not allowed|denied|refused/i, `bob is refused by policy: ${JSON.stringify(asBob)}`);
  }, 'alice');
});

test('the environment credential: used, removed before backends start, never logged', T, async () => {
  const envFile = tmpPath(`backend-env-${process.pid}.txt`);
  // the backend writes its environment to a file, then becomes the fixture
  const server = { command: 'sh', args: ['-c', 'env > "$1"; exec "$2"', 'sh', envFile, FIXTURE] };
  const cfg = configWith([
    { use: 'auth', tokens: TOKENS },
    { use: 'log', params: true },
  ], server);
  let stderr = '';
  await withRaw({ server, args: ['--config', cfg], env: { MCP_CHAIN_TOKEN: ALICE, MCP_CHAIN_LOG: 'debug' } }, async (c) => {
    await c.initialize();
    const r = await c.request(1, 'tools/call', { name: 'echo', arguments: { a: 1 } });
    assert.ok(r.result, `authenticated by the environment: ${JSON.stringify(r)}`);
    // a token in _meta still wins
    const r2 = await c.request(2, 'tools/call', { name: 'echo', arguments: {}, _meta: { [KEY]: 'wrong' } });
    assert.equal(r2.error?.code, -32010);
    stderr = c.stderr;
  });
  await waitFor(() => existsSync(envFile), { what: 'the backend environment dump' });
  const env = readFileSync(envFile, 'utf8');
  assert.ok(!env.includes('MCP_CHAIN_TOKEN'), 'the variable is not passed on to the backend');
  assert.ok(!env.includes(ALICE), 'the token is not passed on to the backend');
  assert.match(stderr, /auth: \$MCP_CHAIN_TOKEN identifies the client as "alice"/);
  assert.ok(!stderr.includes(ALICE), 'the token is in no log line');
  assert.ok(!stderr.includes('"wrong"'), 'a wrong token is in no log line');
});

// Known core issue: the chain sets ctx->client again from the session's
// clientInfo.name when it routes a request, so modules after auth see the
// principal on the request but not on the response (auth puts it back only
// when the response reaches it). Passes once the chain keeps a principal a
// module set.
test('modules after auth see the principal on the response too', T, async () => {
  const cfg = configWith([{ use: 'auth', tokens: TOKENS, env: false }, { use: 'log' }]);
  await withRaw({ server: fixtureServer(), args: ['--config', cfg] }, async (c) => {
    await c.initialize();
    assert.ok((await c.request(1, 'tools/call', { name: 'echo', arguments: {}, _meta: { [KEY]: ALICE } })).result);
    await waitFor(() => c.stderr.includes('"outcome"'), { what: 'the audit line' });
    assert.match(c.stderr, /"client":"alice"/, 'the audit line names the principal');
  });
});

test('an environment token that matches nothing: requests are refused, and say why', T, async () => {
  const cfg = configWith([{ use: 'auth', tokens: TOKENS }]);
  await withRaw({ server: fixtureServer(), args: ['--config', cfg], env: { MCP_CHAIN_TOKEN: 'nobody-has-this' } }, async (c) => {
    await c.initialize();
    const r = await c.request(1, 'tools/call', { name: 'echo', arguments: {} });
    assert.equal(r.error?.code, -32010);
    assert.match(r.error.message, /\$MCP_CHAIN_TOKEN matches no configured token/);
    const ok = await c.request(2, 'tools/call', { name: 'echo', arguments: {}, _meta: { [KEY]: BOB } });
    assert.ok(ok.result);
    assert.ok(!c.stderr.includes('nobody-has-this'));
  });
});

test('mcp-chain check reports every bad option with its path', T, async () => {
  const { spawnSync } = await import('node:child_process');
  const { CHAIN } = await import('./lib.mjs');
  const cfg = configWith([{ use: 'auth', tokens: [{ sha256: 'xyz', principal: '' }], metaKey: 3, env: 'A-B' }]);
  const r = spawnSync(CHAIN, ['check', cfg], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /\/middleware\/0\/tokens\/0\/sha256: missing or not 64 hex digits/);
  assert.match(r.stderr, /\/middleware\/0\/tokens\/0\/principal: missing/);
  assert.match(r.stderr, /\/middleware\/0\/metaKey: must be a non-empty string/);
  assert.match(r.stderr, /\/middleware\/0\/env: must be an environment variable name/);
});
