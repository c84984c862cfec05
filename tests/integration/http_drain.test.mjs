// SIGTERM while streams are open on `mcp-chain --listen` (the drain):
// sessions with a GET stream open and a POST SSE stream mid-progress. The
// call in flight still gets its progress and its result on its stream, GET
// streams end properly (the chunked terminator), a call the client cancelled
// does not hold the drain, a call that outlives shutdownGraceMs is answered
// with an error before its stream ends, the process exits 0, and the
// sessions' own backend processes are gone.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import {
  JSON_HEADERS, openSession, openStream, processesUnder, request, within, withCheckedChain,
} from './http_lib.mjs';
import { SKIP_NO_FIXTURE, fixtureServer, isAlive, sleep, tmpPath, waitFor } from './lib.mjs';


/** The fixture processes under CHAIN. */
function fixtures(chain) {
  return processesUnder(chain, new RegExp(path.basename(fixtureServer().command)));
}

/**
 * Runs FN with mcp-chain --listen on the fixture (FLAGS) with backends of
 * each session's own and shutdownGraceMs GRACE; FN sends the SIGTERM. After
 * it: exit 0, no sanitizer report, no process left (withCheckedChain).
 */
function withChain({ grace, flags = [] }, fn) {
  return withCheckedChain({ ...fixtureServer(flags), scope: 'session' }, { extra: { shutdownGraceMs: grace } },
    fn, { exitMs: grace + 10_000 });
}

/** A tools/call of the fixture's slow tool, with a progress token. */
function slow(id, ms, steps) {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call',
    params: { name: 'slow', arguments: { ms, steps }, _meta: { progressToken: `tok-${id}` } } });
}

/** The messages of a stream's events. */
const messages = (s) => s.events.filter((e) => e.data).map((e) => JSON.parse(e.data));

/** True once a progress event is on stream S. */
const progressed = (s) => messages(s).some((m) => m.method === 'notifications/progress');

/** The time from SIGTERM to the exit of CHAIN, in ms, and its status. */
async function terminate(chain) {
  const t0 = Date.now();
  chain.proc.kill('SIGTERM');
  await waitFor(() => /http: draining/.test(chain.stderr), { what: 'the drain to begin' });
  return async () => ({ ...(await within(chain.exited, 'mcp-chain to exit', 20_000)), ms: Date.now() - t0 });
}

test('SIGTERM with streams open: calls in flight end with their progress and result, GET streams end properly, ' +
  'a cancelled call does not hold the drain; exit 0 long before the grace; the sessions\' processes gone',
{ timeout: 60_000, skip: SKIP_NO_FIXTURE }, async () => {
  const GRACE = 8000;
  await withChain({ grace: GRACE }, async (chain) => {
    const sessions = await Promise.all([0, 1, 2].map((i) => openSession(chain.port, `drain-${i}`)));
    const pids = fixtures(chain);
    assert.equal(pids.length, 3, 'a backend process per session');
    chain.remember();
    // each session has a call in flight on its own SSE stream
    const calls = await Promise.all(sessions.map((s, i) => openStream(chain.port, { method: 'POST', headers: s.h,
      body: slow(`run-${i}`, 1500, 5) })));
    // and the first one a call it cancels before the signal
    const doomed = await openStream(chain.port, { method: 'POST', headers: sessions[0].h, body: slow('doomed', 60_000, 60) });
    await waitFor(() => calls.every(progressed) && progressed(doomed), { what: 'every call to report progress' });
    const cancel = await request(chain.port, { headers: sessions[0].h, body: JSON.stringify({ jsonrpc: '2.0',
      method: 'notifications/cancelled', params: { requestId: 'doomed', reason: 'the test' } }) });
    assert.equal(cancel.status, 202);
    assert.deepEqual(await within(doomed.closed, 'the cancelled call\'s stream to end'), { complete: true },
      'a cancelled call\'s stream ends properly, without a response');
    assert.ok(messages(doomed).every((m) => m.method === 'notifications/progress'), JSON.stringify(messages(doomed)));

    const exit = await terminate(chain);
    assert.match(chain.stderr, /http: draining \(3 session\(s\), 3 request\(s\) open\)/, 'the cancelled call is not open');
    // GET streams end at once, properly; no new connection
    for (const s of sessions) {
      assert.deepEqual(await within(s.get.closed, 'a GET stream to end'), { complete: true }, 'a GET stream ends properly');
    }
    const refused = await request(chain.port, { method: 'GET', path: '/healthz' }).then(() => false, () => true);
    assert.ok(refused, 'a new connection is refused while draining');
    // the calls in flight: all their progress, then their result, then a proper end
    for (const [i, c] of calls.entries()) {
      assert.deepEqual(await within(c.closed, `call ${i}'s stream to end`), { complete: true });
      const got = messages(c);
      assert.deepEqual(got.map((m) => m.params?.progress ?? m.id), [1, 2, 3, 4, 5, `run-${i}`], JSON.stringify(got));
      assert.ok(got.slice(0, 5).every((m) => m.params.progressToken === `tok-run-${i}`));
      assert.equal(got[5].result.content[0].text, 'done');
    }
    const end = await exit();
    assert.equal(end.code, 0);
    assert.ok(end.ms < GRACE - 3000, `exit ${end.ms} ms after SIGTERM: once the last call is answered, not at the grace's end`);
    assert.doesNotMatch(chain.stderr, /grace period over/);
    assert.equal((chain.stderr.match(/session #\d ended \(mcp-chain is shutting down\)/g) ?? []).length, 3);
    assert.deepEqual(pids.filter(isAlive), [], 'every session\'s backend process is gone');
  });
});

test('SIGTERM: calls that outlive shutdownGraceMs are answered with an error on their stream (SSE and JSON), ' +
  'which then ends properly; the backend sees the cancellation; exit 0 just after the grace',
{ timeout: 60_000, skip: SKIP_NO_FIXTURE }, async () => {
  const GRACE = 1500;
  const log = tmpPath(`http-drain-cancel-${process.pid}.log`);
  await withChain({ grace: GRACE, flags: ['--cancel-log', log] }, async (chain) => {
    const s = await openSession(chain.port, 'outlives');
    chain.remember();
    const sse = await openStream(chain.port, { method: 'POST', headers: s.h, body: slow('long-sse', 60_000, 60) });
    // a JSON-mode call gets its headers with its whole answer: not awaited before the SIGTERM
    const jsonOpen = openStream(chain.port, { method: 'POST', headers: { ...s.h, Accept: 'application/json' },
      body: slow('long-json', 60_000, 60) });
    await waitFor(() => progressed(sse) && messages(s.get).length > 0, { what: 'both calls to report progress' });
    const exit = await terminate(chain);
    const json = await within(jsonOpen, 'the JSON call\'s answer');
    assert.deepEqual(await within(s.get.closed, 'the GET stream to end'), { complete: true });
    assert.deepEqual(await within(sse.closed, 'the SSE call\'s stream to end'), { complete: true },
      'the SSE stream ends properly, not cut');
    const last = messages(sse).at(-1);
    assert.equal(last.id, 'long-sse');
    assert.equal(last.error.code, -32000, JSON.stringify(last));
    assert.match(last.error.message, /mcp-chain is shutting down/);
    assert.deepEqual(await within(json.closed, 'the JSON call\'s response to end'), { complete: true });
    assert.equal(json.status, 200);
    assert.equal(json.headers['content-type'], 'application/json');
    const body = JSON.parse(json.text);
    assert.equal(body.id, 'long-json', json.text);
    assert.equal(body.error.code, -32000);
    const end = await exit();
    assert.equal(end.code, 0);
    assert.ok(end.ms >= GRACE - 100 && end.ms < GRACE + 4000, `exit ${end.ms} ms after SIGTERM (grace ${GRACE} ms)`);
    assert.match(chain.stderr, /grace period over with requests still open/);
    await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').trim().split('\n').length === 2,
      { what: 'the backend to log both cancellations' });
  });
});

test('DELETE with a call in flight: the call is answered with an error, its stream ends properly, the backend sees the cancellation',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const log = tmpPath(`http-delete-cancel-${process.pid}.log`);
    await withChain({ grace: 2000, flags: ['--cancel-log', log] }, async (chain) => {
      const s = await openSession(chain.port, 'deleted');
      chain.remember();
      const call = await openStream(chain.port, { method: 'POST', headers: s.h, body: slow('in-flight', 60_000, 60) });
      await waitFor(() => progressed(call), { what: 'the call to report progress' });
      const del = await request(chain.port, { method: 'DELETE', headers: { 'Mcp-Session-Id': s.sid } });
      assert.equal(del.status, 200);
      assert.deepEqual(await within(call.closed, 'the call\'s stream to end'), { complete: true });
      const last = messages(call).at(-1);
      assert.equal(last.id, 'in-flight');
      assert.match(last.error.message, /the session ended before this request was answered \(deleted by the client\)/);
      assert.deepEqual(await within(s.get.closed, 'the GET stream to end'), { complete: true });
      await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').trim().split('\n').length === 1,
        { what: 'the backend to log the cancellation' });
    });
  });
