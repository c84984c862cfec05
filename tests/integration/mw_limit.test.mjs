// The "limit" middleware through the real binary wrapping the C fixture
// server: concurrency with a bounded queue (and a clear error beyond it),
// slots given back by responses, cancellations and timeouts alike, the
// token-bucket rate limit, and a per-tool timeout that ends the call and
// cancels it at the backend.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  SKIP_NO_FIXTURE, TEST_TIMEOUT, connect, fixtureServer, outcome, sleep, RawChain, writeConfig,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
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

/** A config wrapping the fixture with one limit module of RULES. */
const configWith = (rules) =>
  writeConfig(fixtureServer(), { name: 'fx', extra: { middleware: [{ use: 'limit', rules }] } });

/** Runs FN with an SDK session through mcp-chain limited by RULES. */
async function run(rules, fn) {
  const cfg = configWith(rules);
  const s = await connect('chain', fixtureServer(), { chainArgs: () => ['--config', cfg] });
  try {
    return await fn(s);
  } finally {
    await s.close();
    assert.doesNotMatch(s.stderr(), SANITIZER_REPORT);
  }
}

const slow = (client, ms) => client.callTool({ name: 'slow', arguments: { ms } });
const text = (r) => r.content.map((c) => c.text).join('');
const jsonText = (r) => JSON.parse(text(r));

test('concurrency: one at a time, two may wait, the next is refused clearly', T, async () => {
  await run([{ tools: 'slow', concurrency: 1, queue: 2 }], async ({ client }) => {
    const t0 = Date.now();
    const ends = [];
    const calls = [0, 1, 2, 3].map((i) => outcome(async () => {
      const r = await slow(client, 250);
      ends.push(Date.now() - t0);
      return text(r);
    }));
    const results = await Promise.all(calls);
    const ok = results.filter((r) => r.ok);
    const refused = results.filter((r) => !r.ok);
    assert.equal(ok.length, 3);
    assert.equal(refused.length, 1);
    assert.equal(refused[0].code, -32011);
    assert.match(refused[0].message, /too many concurrent requests for limit rule \/middleware\/0\/rules\/0: 1 running, 2 waiting \(concurrency 1, queue 2\)/);
    ends.sort((a, b) => a - b);
    assert.ok(ends[2] >= 3 * 250 - 50, `the three ran one after another (ends ${ends})`);
    // other tools are not counted
    assert.equal(echoName(await client.callTool({ name: 'echo', arguments: {} })), 'echo');
  });
});

const echoName = (r) => r.structuredContent.params.name;

test('rate: a burst, then a refusal with retryAfterMs, then allowed again', T, async () => {
  await run([{ tools: 'echo', rate: 1, burst: 2 }], async ({ client }) => {
    for (let i = 0; i < 2; i++) assert.equal(echoName(await client.callTool({ name: 'echo', arguments: {} })), 'echo');
    const third = await outcome(() => client.callTool({ name: 'echo', arguments: {} }));
    assert.equal(third.code, -32012);
    assert.match(third.message, /rate limit for limit rule \/middleware\/0\/rules\/0 reached \(1 per second, burst 2\); retry in [01]\.\d\d s/);
    await sleep(1100);
    assert.equal(echoName(await client.callTool({ name: 'echo', arguments: {} })), 'echo');
  });
});

test('per-tool timeout: the call ends with -32001, the backend is told, the slot is free', T, async () => {
  await run([{ tools: 'slow', timeoutMs: 300, concurrency: 1, queue: 0 }], async ({ client, stderr }) => {
    const t0 = Date.now();
    const r = await outcome(() => slow(client, 5000));
    assert.equal(r.code, -32001);
    assert.match(r.message, /request "tools\/call" \(slow\) timed out after 0\.3 s \(limit\)/);
    assert.ok(Date.now() - t0 < 2000, 'ended by the limit, not the backend');
    const ids = jsonText(await client.callTool({ name: 'cancelled_ids', arguments: {} }));
    assert.equal(ids.length, 1, 'the backend got notifications/cancelled');
    assert.equal(text(await slow(client, 10)), 'done', 'the slot was given back');
    assert.match(stderr(), /limit: request "tools\/call" \(slow\) timed out/);
  });
});

test('a cancelled call gives its slot back; a cancelled queued call never runs', T, async () => {
  const cfg = configWith([{ tools: 'slow', concurrency: 1 }]);
  await withRaw({ server: fixtureServer(), args: ['--config', cfg] }, async (c) => {
    await c.initialize();
    const call = (id, ms) => c.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms } } });
    const cancel = (id) => c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } });
    // in flight, then cancelled: the next one runs at once
    call('a', 5000);
    await sleep(100);
    cancel('a');
    const t0 = Date.now();
    call('b', 50);
    const rb = await c.response();
    assert.equal(rb.id, 'b');
    assert.ok(Date.now() - t0 < 1000, 'b did not wait for the cancelled a');
    // queued, then cancelled: it gets no answer and is never run
    call('c', 400);
    call('d', 10);
    await sleep(50);
    cancel('d');
    call('e', 10);
    const order = [(await c.response()).id, (await c.response()).id];
    assert.deepEqual(order, ['c', 'e']);
    await c.expectNoResponse(200);
  });
});
