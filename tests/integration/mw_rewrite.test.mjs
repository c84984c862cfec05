// The "rewrite" middleware through the real binary: an SDK 1.x client talks to
// mcp-chain wrapping the C fixture server (whose echo tool returns the request
// it received, so what reached the backend can be checked) or server-everything.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';

import {
  SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT,
  connect, everythingServer, fixtureServer, outcome, withClient,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const TE = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };

/** chainArgs for lib.mjs: the generated config plus top-level `middleware`. */
const withMiddleware = (middleware) => (cfg) => {
  const c = JSON.parse(readFileSync(cfg, 'utf8'));
  writeFileSync(cfg, JSON.stringify({ ...c, middleware }));
  return ['--config', cfg];
};

/** Options for a chain session with a rewrite module of options OPTS (and more modules after). */
const rewrite = (opts, ...more) => ({ chainArgs: withMiddleware([{ use: 'rewrite', ...opts }, ...more]) });

const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

/** withClient through mcp-chain, failing on a sanitizer report once it has exited. */
async function run(server, opts, fn) {
  const s = await connect('chain', server, opts);
  let failed = false;
  try {
    return await fn(s);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    await s.close();
    const m = s.stderr().match(SANITIZER_REPORT);
    if (m && !failed) throw new Error(`sanitizer report from mcp-chain:\n${s.stderr().slice(s.stderr().indexOf(m[0]) - 200)}`);
  }
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const listed = async (client) => Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));

// ---------------------------------------------------------------------------

test('rename: listed and called under the new name, routed to the real one; the old name is unknown', T, async () => {
  const opts = rewrite({ tools: { echo: { rename: 'mirror', title: 'Mirror', description: 'Shows the request.' } } });
  await run(fixtureServer(), opts, async ({ client }) => {
    const tools = await listed(client);
    assert.ok(!tools.echo, 'the old name is not listed');
    assert.equal(tools.mirror.title, 'Mirror');
    assert.equal(tools.mirror.description, 'Shows the request.');
    const r = await client.callTool({ name: 'mirror', arguments: { a: 1 } });
    assert.equal(r.structuredContent.params.name, 'echo', 'the backend got its own name');
    assert.deepEqual(r.structuredContent.params.arguments, { a: 1 });
    const old = await outcome(() => client.callTool({ name: 'echo', arguments: {} }));
    assert.equal(old.ok, false);
    assert.equal(old.code, -32602);
    assert.match(old.message, /Unknown tool: echo/);
  });
});

test('hide: absent from tools/list and unknown when called', T, async () => {
  await run(fixtureServer(), rewrite({ tools: { crash: { hide: true } } }), async ({ client }) => {
    const tools = await listed(client);
    assert.ok(!tools.crash);
    assert.ok(tools.echo);
    const r = await outcome(() => client.callTool({ name: 'crash', arguments: {} }));
    assert.equal(r.ok, false);
    assert.match(r.message, /Unknown tool: crash/);
    // the backend is alive: crash never reached it
    assert.equal((await client.callTool({ name: 'echo', arguments: {} })).structuredContent.method, 'tools/call');
  });
});

test('fixed arguments are enforced and absent from the schema; defaults fill gaps', T, async () => {
  const opts = rewrite({ tools: {
    echo: { fixed: { mode: 'safe', depth: { max: 2 } }, defaults: { limit: 100 } },
    big: { fixed: { bytes: 5 } },
  } });
  await run(fixtureServer(), opts, async ({ client }) => {
    const tools = await listed(client);
    assert.deepEqual(tools.big.inputSchema.properties, {}, 'bytes is gone from the schema');
    const r = await client.callTool({ name: 'echo', arguments: { mode: 'unsafe', path: 'p' } });
    assert.deepEqual(r.structuredContent.params.arguments, { mode: 'safe', depth: { max: 2 }, path: 'p', limit: 100 });
    const r2 = await client.callTool({ name: 'echo', arguments: { limit: 3 } });
    assert.deepEqual(r2.structuredContent.params.arguments, { limit: 3, mode: 'safe', depth: { max: 2 } });
    const b = await client.callTool({ name: 'big', arguments: { bytes: 100000 } });
    assert.equal(text(b).length, 5, 'the client asked for 100000 bytes, the fixed value won');
  });
});

test('result patterns redact text and structured content', T, async () => {
  const opts = rewrite({ results: [
    { pattern: '[\\w.+-]+@[\\w-]+(\\.[\\w-]+)+', replace: '[email]' },
    { pattern: '(sk)-[A-Za-z0-9]{8,}', replace: '$1-***' },
  ] });
  await run(fixtureServer(), opts, async ({ client }) => {
    const r = await client.callTool({ name: 'echo', arguments: { who: 'ann.lee@example.com', key: 'sk-abcdef123456' } });
    assert.doesNotMatch(text(r), /ann\.lee|abcdef123456/);
    assert.match(text(r), /\[email\]/);
    assert.match(text(r), /sk-\*\*\*/);
    assert.deepEqual(r.structuredContent.params.arguments, { who: '[email]', key: 'sk-***' });
  });
});

test('size cap: the result is cut with a visible marker', T, async () => {
  await run(fixtureServer(), rewrite({ maxResultBytes: 1000 }), async ({ client }) => {
    const small = await client.callTool({ name: 'big', arguments: { bytes: 1000 } });
    assert.equal(small.content.length, 1);
    assert.equal(text(small).length, 1000);
    const r = await client.callTool({ name: 'big', arguments: { bytes: 50000 } });
    assert.equal(r.content.length, 2);
    assert.equal(r.content[0].text.length, 1000);
    assert.match(r.content[1].text, /truncated: 1000 of 50000 bytes kept, the limit is 1000/);
  });
});

test('order matters: a policy after rewrite sees the real names', T, async () => {
  const opts = rewrite({ tools: { echo: { rename: 'mirror' } } }, { use: 'policy', rules: [{ deny: ['echo'] }] });
  await run(fixtureServer(), opts, async ({ client }) => {
    const tools = await listed(client);
    assert.ok(!tools.mirror && !tools.echo, 'denied under its real name, so hidden under both');
    const r = await client.callTool({ name: 'mirror', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /"echo" is not allowed/);
  });
});

test('server-everything: get-sum renamed with a fixed argument', TE, async () => {
  const opts = rewrite({ tools: { 'get-sum': { rename: 'add-ten', fixed: { b: 10 } } } });
  await run(everythingServer(), opts, async ({ client }) => {
    const tools = await listed(client);
    assert.ok(!tools['get-sum']);
    assert.deepEqual(Object.keys(tools['add-ten'].inputSchema.properties), ['a']);
    assert.deepEqual(tools['add-ten'].inputSchema.required, ['a']);
    const r = await client.callTool({ name: 'add-ten', arguments: { a: 1 } });
    assert.match(text(r), /11/);
  });
});

test('a bad rewrite is reported with the option path and mcp-chain does not start', T, async () => {
  const opts = rewrite({ tools: { echo: { rename: '' } }, results: [{ pattern: '(' }] });
  const r = await outcome(() => run(fixtureServer(), opts, () => null));
  assert.equal(r.ok, false);
  assert.match(r.message, /\/middleware\/0\/tools\/echo\/rename: must be a non-empty string/);
  assert.match(r.message, /\/middleware\/0\/results\/0\/pattern: does not compile/);
});
