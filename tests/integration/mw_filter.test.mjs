// The "filter" middleware through the real binary wrapping the C fixture
// server, with a filter program written in node (mw_filter_script.mjs):
// pass, pass with a changed message, reply, drop, for requests,
// notifications and responses; the line format; and the failure modes when
// the program answers nonsense, hangs or dies -- and its restart.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import {
  HERE, SKIP_NO_FIXTURE, TEST_TIMEOUT, connect, fixtureServer, outcome, sleep, tmpPath, waitFor, writeConfig,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const SCRIPT = path.join(HERE, 'mw_filter_script.mjs');
const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

let n = 0;
/** The filter module's options, with a fresh line log. */
function filter(opts = {}) {
  const log = tmpPath(`filter-lines-${process.pid}-${++n}.jsonl`);
  return { log, mw: { use: 'filter', command: process.execPath, args: [SCRIPT, log], ...opts } };
}

/** Runs FN with an SDK session through mcp-chain with the filter module MW. */
async function run(mw, fn) {
  const cfg = writeConfig(fixtureServer(), { name: 'fx', extra: { middleware: [mw] } });
  const s = await connect('chain', fixtureServer(), {
    chainArgs: () => ['--config', cfg], capabilities: { roots: { listChanged: true } },
  });
  try {
    return await fn(s);
  } finally {
    await s.close();
    assert.doesNotMatch(s.stderr(), SANITIZER_REPORT);
  }
}

const call = (client, name, args = {}) => client.callTool({ name, arguments: args });
const text = (r) => r.content.map((c) => c.text).join('');
const lines = (file) => (existsSync(file) ? readFileSync(file, 'utf8') : '')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('pass, pass changed, reply and drop for requests; the line sent', T, async () => {
  const { log, mw } = filter();
  await run(mw, async ({ client }) => {
    const plain = await call(client, 'echo', { a: 1 });
    assert.deepEqual(plain.structuredContent.params.arguments, { a: 1 });
    const changed = await call(client, 'rewrite_me', { a: 1 });
    assert.equal(changed.structuredContent.params.name, 'echo', 'the backend got the changed call');
    assert.deepEqual(changed.structuredContent.params.arguments, { rewritten: true });
    assert.equal(text(await call(client, 'answer_me')), 'answered by filter');
    const denied = await outcome(() => call(client, 'deny_me'));
    assert.equal(denied.code, -32013);
    assert.match(denied.message, /request "tools\/call" refused by the filter: deny_me is not allowed here/);
    // answers matched by id, not by order
    const [p1, p2] = await Promise.all([call(client, 'pair_one').catch((e) => e), call(client, 'pair_two').catch((e) => e)]);
    assert.ok(p1 instanceof Error && p2 instanceof Error, 'the fixture has no pair_* tools: both reached it');
    assert.match(p1.message, /pair_one/);
    assert.match(p2.message, /pair_two/);
  });
  const seen = lines(log);
  const first = seen.find((l) => l.kind === 'request' && l.message.params?.name === 'echo');
  assert.equal(first.direction, 'toBackend');
  assert.equal(first.context.method, 'tools/call');
  assert.equal(first.context.client, 'mcp-chain-integration');
  assert.equal(first.context.name, 'echo');
  assert.ok(Number.isInteger(first.id));
  assert.deepEqual(first.message.params.arguments, { a: 1 });
});

test('notifications are filtered too; responses with "responses": true', T, async () => {
  const { log, mw } = filter({ responses: true });
  await run(mw, async ({ client }) => {
    await client.sendRootsListChanged();                       // dropped by the filter
    await client.notification({ method: 'notifications/custom/thing', params: { x: 1 } });
    const redacted = await call(client, 'echo', { redactMe: 'the secret' });
    assert.equal(text(redacted), 'redacted by filter');
    assert.equal(redacted.structuredContent, undefined);
    const seen = JSON.parse(text(await call(client, 'seen_notifications')));
    assert.equal(seen['notifications/roots/list_changed'], undefined, 'dropped before the backend');
    assert.equal(seen['notifications/custom/thing'], 1);
  });
  const kinds = new Set(lines(log).map((l) => `${l.kind}:${l.direction}`));
  for (const k of ['request:toBackend', 'notification:toBackend', 'response:toClient']) assert.ok(kinds.has(k), `saw ${k}`);
});

test('fail closed: nonsense and a hung program refuse; it is restarted', T, async () => {
  const { mw } = filter({ timeoutMs: 1000, restartDelayMs: 100 });
  await run(mw, async ({ client, stderr }) => {
    const bad = await outcome(() => call(client, 'bad_answer'));
    assert.equal(bad.code, -32014);
    assert.match(bad.message, /the filter is unavailable: the program answered with an invalid action or message/);
    assert.equal(text(await call(client, 'slow', { ms: 1 })), 'done', 'still running after nonsense');
    const t0 = Date.now();
    const hung = await outcome(() => call(client, 'hang_me'));
    assert.equal(hung.code, -32014);
    assert.match(hung.message, /did not answer within 1 s/);
    assert.ok(Date.now() - t0 < 3000);
    const starts = () => (stderr().match(/filter [^:]*: started "/g) ?? []).length;
    await waitFor(() => starts() >= 2, { what: 'the restart', timeoutMs: 5000 });
    await sleep(100);
    assert.equal(text(await call(client, 'slow', { ms: 1 })), 'done', 'works again after the restart');
    assert.match(stderr(), /did not answer within 1 s; messages get the failure mode \(closed\)/);
  });
});

test('a program that dies: closed refuses until the restart, open lets through', T, async () => {
  const closed = filter({ restartDelayMs: 60000 });
  await run(closed.mw, async ({ client, stderr }) => {
    const died = await outcome(() => call(client, 'die_me'));
    assert.equal(died.code, -32014);
    await waitFor(() => stderr().includes('exited with status 7'), { what: 'the exit in the log' });
    const later = await outcome(() => call(client, 'echo'));
    assert.equal(later.code, -32014);
    assert.match(later.message, /the program is not running \(the program exited with status 7\)/);
    assert.match(stderr(), /request "tools\/call" refused \(failure mode closed\)/);
  });
  const open = filter({ restartDelayMs: 60000, failure: 'open' });
  await run(open.mw, async ({ client, stderr }) => {
    const died = await outcome(() => call(client, 'die_me', { code: 0 }));
    // passed unchecked to the fixture, whose "die_me" does not exist
    assert.equal(died.ok, false);
    assert.match(died.message, /die_me/);
    await waitFor(() => stderr().includes('exited with status 7'), { what: 'the exit in the log' });
    const r = await call(client, 'echo', { after: true });
    assert.deepEqual(r.structuredContent.params.arguments, { after: true });
    assert.match(stderr(), /passed unchecked \(failure mode open\)/);
  });
});
