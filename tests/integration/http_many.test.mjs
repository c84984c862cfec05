// 100 Streamable HTTP sessions at once against `mcp-chain --listen`, through
// one shared backend and through a backend of each session's own (the C
// fixture). Each session interleaves a call with progress on its own SSE
// stream, a JSON-mode call whose progress goes to its GET stream, a call it
// cancels (the backend must see the cancellation), and plain calls whose ids
// are the same in every session but whose payloads are not: each session must
// see only its own ids, tokens and results. Then every session is DELETEd:
// per-session processes must be gone, the shared one must run on until
// mcp-chain exits.
//
// Raw HTTP (node's http module) rather than the SDK: every event on every
// stream is seen (the SDK drops what it cannot match, which would hide a
// cross-delivery), and it is cheap enough for 100 sessions under ASan.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { openStream, processesUnder, request, within as withinMs, withCheckedChain } from './http_lib.mjs';
import { SKIP_NO_FIXTURE, fixtureServer, isAlive, sleep, waitFor } from './lib.mjs';

const N = 100;
const ROUNDS = 2;
const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

/** The fixture processes under CHAIN (each recorded in chain.seen). */
function fixtures(chain) {
  return processesUnder(chain, new RegExp(path.basename(fixtureServer().command)));
}

/** within() with this file's longer default: 100 sessions under ASan. */
const within = (promise, what, ms = 20_000) => withinMs(promise, what, ms);

/**
 * Runs FN with mcp-chain --listen on the fixture with SCOPE; then SIGTERM:
 * exit 0, no sanitizer report, and no process it started left.
 */
function withChain(scope, listen, fn) {
  return withCheckedChain({ ...fixtureServer(), scope }, { extra: { listen } }, fn);
}

/** A tools/call body; TOKEN adds a progress token. */
function call(id, name, args, token) {
  const params = { name, arguments: args };
  if (token !== undefined) params._meta = { progressToken: token };
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params });
}

/** Session I: initialize (its own clientInfo name), initialized, its GET stream. */
async function openSession(port, i) {
  const init = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: `many-${i}`, version: '1' } } }) });
  assert.equal(init.status, 200, `session ${i}: ${init.body}`);
  const sid = init.headers['mcp-session-id'];
  const h = { ...JSON_HEADERS, 'Mcp-Session-Id': sid };
  const note = await request(port, { headers: h,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(note.status, 202);
  const get = await openStream(port, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
  assert.equal(get.status, 200);
  return { i, sid, h, get };
}

/** The messages of a stream's events. */
const messages = (s) => s.events.filter((e) => e.data).map((e) => JSON.parse(e.data));

/** The progress tokens among MSGS. */
const tokens = (msgs) => msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progressToken);

/** One round R of a session's interleaved work; asserts what it got is its own. */
async function work(port, s, r) {
  const { h } = s;
  const i = `${s.i}.${r}`;
  const json = { ...h, Accept: 'application/json' };
  // started together: progress on its own stream, a call to cancel, a
  // JSON-mode call whose progress has only the GET stream to go to
  const [slow, doomed] = await Promise.all([
    openStream(port, { method: 'POST', headers: h, body: call(`slow-${i}`, 'slow', { ms: 400, steps: 3 }, `tok-${i}-slow`) }),
    openStream(port, { method: 'POST', headers: h, body: call(`doomed-${i}`, 'slow', { ms: 30_000, steps: 30 }, `tok-${i}-doomed`) }),
  ]);
  const viaGet = request(port, { headers: json, body: call(`json-${i}`, 'slow', { ms: 300, steps: 2 }, `tok-${i}-json`) });
  // plain calls meanwhile: the same ids in every session, payloads of its own
  for (let k = 0; k < 3; k++) {
    const args = { session: i, k, pad: 'x'.repeat(s.i) };
    const r = await request(port, { headers: json, body: call(`echo-${k}`, 'echo', args) });
    assert.equal(r.status, 200, r.body);
    const m = JSON.parse(r.body);
    assert.equal(m.id, `echo-${k}`);
    assert.deepEqual(JSON.parse(m.result.content[0].text).params.arguments, args, `session ${i}: its own echo`);
  }
  // the doomed call reached the backend (its first progress came): cancel it
  await doomed.next((e) => e.data.includes('notifications/progress'), `session ${i}: the doomed call's progress`);
  const cancel = await request(port, { headers: h, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled',
    params: { requestId: `doomed-${i}`, reason: 'the test cancels it' } }) });
  assert.equal(cancel.status, 202);
  const answer = await viaGet;
  assert.equal(answer.status, 200, answer.body);
  assert.deepEqual(JSON.parse(answer.body), { jsonrpc: '2.0', id: `json-${i}`, result: { content: [{ type: 'text', text: 'done' }] } });
  assert.deepEqual(await within(slow.closed, `session ${i}: the end of the SSE call's stream`), { complete: true },
    `session ${i}: the SSE call's stream ends properly`);
  const got = messages(slow);
  assert.deepEqual(tokens(got), [`tok-${i}-slow`, `tok-${i}-slow`, `tok-${i}-slow`], `session ${i}: its own progress`);
  assert.deepEqual(got.map((m) => m.params?.progress ?? m.id), [1, 2, 3, `slow-${i}`], 'progress in order, then the result');
  assert.equal(got[3].result.content[0].text, 'done');
  // a cancelled request is answered by no one: its stream ends without a response
  assert.deepEqual(await within(doomed.closed, `session ${i}: the end of the cancelled call's stream`), { complete: true },
    `session ${i}: the cancelled call's stream ends`);
  const d = messages(doomed);
  assert.ok(d.length >= 1 && tokens(d).every((t) => t === `tok-${i}-doomed`), `session ${i}: ${JSON.stringify(d)}`);
  assert.ok(d.every((m) => m.method === 'notifications/progress'), `session ${i}: no response to a cancelled call`);
  // the JSON-mode call's progress went to this session's GET stream
  const mine = () => tokens(messages(s.get)).filter((t) => t === `tok-${i}-json`);
  await waitFor(() => mine().length === 2, { what: `session ${i}: progress on its GET stream` });
}

/** ROUNDS rounds of work on session S; its GET stream carried its own progress only. */
async function rounds(port, s) {
  for (let r = 0; r < ROUNDS; r++) await work(port, s, r);
  const want = Array.from({ length: ROUNDS }, (_, r) => [`tok-${s.i}.${r}-json`, `tok-${s.i}.${r}-json`]).flat();
  assert.deepEqual(tokens(messages(s.get)), want, `session ${s.i}: only its own progress on its GET stream`);
  assert.equal(messages(s.get).length, want.length, `session ${s.i}: nothing else on its GET stream`);
}

/** A JSON-mode tools/call on session S; resolves the parsed result text. */
async function tool(port, s, id, name) {
  const r = await request(port, { headers: { ...s.h, Accept: 'application/json' }, body: call(id, name, {}) });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(JSON.parse(r.body).result.content[0].text);
}

/** DELETEs every session; each GET stream ends properly; every end logged. */
async function deleteAll(chain, sessions) {
  const before = (chain.stderr.match(/ended \(deleted by the client\)/g) ?? []).length;
  await Promise.all(sessions.map(async (s) => {
    const del = await request(chain.port, { method: 'DELETE', headers: { 'Mcp-Session-Id': s.sid } });
    assert.equal(del.status, 200);
    assert.deepEqual(await within(s.get.closed, `session ${s.i}: the end of its GET stream`), { complete: true },
      `session ${s.i}: its GET stream ends properly`);
  }));
  await waitFor(() => (chain.stderr.match(/ended \(deleted by the client\)/g) ?? []).length === before + sessions.length,
    { what: 'every session\'s end in the log' });
}

// The listen bounds are raised for this test only: the defaults (32 sessions
// with backends of their own, 64 processes, 8 starts a second) keep a host
// from a spawn storm of real servers; here 100 sessions open at once, each
// starting one fixture process, a small C program.
const SCOPED = { maxConnections: 1024, maxScopedSessions: N, maxProcesses: 2 * N, maxStartsPerSecond: 2 * N };

test(`${N} sessions at once through one shared backend: interleaved calls, progress and cancels, each sees only its own; ` +
  'the shared process outlives every session', { timeout: 120_000, skip: SKIP_NO_FIXTURE }, async () => {
  await withChain('shared', { maxConnections: 1024 }, async (chain) => {
    const sessions = await Promise.all(Array.from({ length: N }, (_, i) => openSession(chain.port, i)));
    assert.equal(new Set(sessions.map((s) => s.sid)).size, N);
    const shared = fixtures(chain);
    assert.equal(shared.length, 1, 'one backend process for every session');
    await Promise.all(sessions.map((s) => rounds(chain.port, s)));
    // one backend, a hundred cancellations, each with the backend's own id
    const ids = await tool(chain.port, sessions[0], 'ids', 'cancelled_ids');
    assert.equal(ids.length, N * ROUNDS, `the backend saw ${N * ROUNDS} cancellations: ${JSON.stringify(ids)}`);
    assert.equal(new Set(ids).size, N * ROUNDS, 'one per cancelled call');
    // a shared backend was initialized once, with the first session's parameters
    const names = await Promise.all(sessions.map(async (s) => (await tool(chain.port, s, 'ip', 'init_params')).clientInfo.name));
    assert.equal(new Set(names).size, 1);
    await deleteAll(chain, sessions);
    await sleep(300);
    assert.deepEqual(fixtures(chain), shared, 'the shared backend runs on after every session ended');
  });
});

test(`${N} sessions at once, each with a backend of its own: interleaved calls, progress and cancels, each sees only its own; ` +
  'every process gone once its session is', { timeout: 120_000, skip: SKIP_NO_FIXTURE }, async () => {
  await withChain('session', SCOPED, async (chain) => {
    const sessions = await Promise.all(Array.from({ length: N }, (_, i) => openSession(chain.port, i)));
    const pids = fixtures(chain);
    assert.equal(pids.length, N, `a process per session: ${pids.length}`);
    await Promise.all(sessions.map((s) => rounds(chain.port, s)));
    await Promise.all(sessions.map(async (s) => {
      // its own process, initialized with its own client's parameters ...
      const ip = await tool(chain.port, s, 'ip', 'init_params');
      assert.equal(ip.clientInfo.name, `many-${s.i}`);
      // ... which saw its own cancellations, and no other session's
      const ids = await tool(chain.port, s, 'ids', 'cancelled_ids');
      assert.equal(ids.length, ROUNDS, `session ${s.i}'s backend saw its ${ROUNDS} cancellations: ${JSON.stringify(ids)}`);
    }));
    await deleteAll(chain, sessions);
    // gone, not only out of mcp-chain's tree: a process on its way out may
    // have no command line left to match while it is not yet a zombie
    await waitFor(() => fixtures(chain).length === 0 && pids.every((p) => !isAlive(p)),
      { timeoutMs: 15_000, what: 'every session\'s process to stop' });
    assert.deepEqual(pids.filter(isAlive), [], 'every per-session process is gone');
    assert.ok(isAlive(chain.proc.pid), 'mcp-chain serves on');
    const health = await request(chain.port, { method: 'GET', path: '/healthz' });
    assert.equal(health.status, 200);
  });
});
