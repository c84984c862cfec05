// A session's life and end, through the raw binary:
// - end of input while the backend is still starting: the client's initialize
//   is answered (a result if the backend makes it within the grace period, an
//   error otherwise), never left hanging, and mcp-chain exits 0;
// - signals as Claude Code sends them (SIGINT, SIGTERM, SIGKILL): passed on at
//   once, a second one kills, and no backend outlives mcp-chain killed outright;
// - a backend that exits with status 0: the end of a one-backend session, a
//   clean stop (not restarted) among several;
// - what stderr says: one line per event, and a missing command gives up once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { existsSync } from 'node:fs';
import { CHAIN, FIXTURE, RawChain, SE_ENTRY, SKIP_NO_FIXTURE, descendants, isAlive, killAll, sleep, tmpPath,
  waitFor } from './lib.mjs';

const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'lifecycle', version: '1' } } });

// Runs mcp-chain with stdin = one initialize line; returns its stdout lines.
function run(graceMs, delayMs, name) {
  const cfg = tmpPath(`${name}.json`);
  writeFileSync(cfg, JSON.stringify({ shutdownGraceMs: graceMs,
    mcpServers: { fx: { command: FIXTURE, args: ['--init-delay-ms', String(delayMs)] } } }));
  const r = spawnSync(CHAIN, ['--config', cfg], { input: INIT + '\n', encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /Sanitizer|runtime error/);
  return r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

test('initialize pending at end of input: answered with the result within the grace period',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, () => {
    const out = run(4000, 500, 'late-ok');
    assert.equal(out.length, 1);
    assert.equal(out[0].id, 1);
    assert.equal(out[0].result.serverInfo.name, 'mcp-fixture-server');
  });

test('initialize pending at end of input: answered with an error after the grace period',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, () => {
    const out = run(300, 3000, 'too-late');
    assert.equal(out.length, 1);
    assert.equal(out[0].id, 1);
    assert.equal(out[0].error.code, -32000);
    assert.match(out[0].error.message, /not ready/);
  });

// ---------------------------------------------------------------------------
// Signals, a backend that ends on its own, and what a session writes to stderr.

const fx = (...flags) => ({ command: FIXTURE, args: flags });

// mcp-chain with configuration CFG (an object), spawned with pipes; the
// environment has no MCP_CHAIN_LOG, so the default log level applies.
function startChain(cfg, name) {
  const file = tmpPath(`${name}.json`);
  writeFileSync(file, JSON.stringify(cfg));
  return new RawChain({ server: fx(), args: ['--config', file], env: { MCP_CHAIN_LOG: undefined } });
}

// Initializes C and returns mcp-chain's live descendants (backends, and
// whatever mcp-chain forked), read once the backend answered.
async function ready(c) {
  await c.initialize();
  return descendants(c.proc.pid);
}

// Waits (bounded) for mcp-chain to exit; returns {code, signal, ms} from T0.
async function exitOf(c, t0, capMs) {
  const r = await Promise.race([c.exited, sleep(capMs).then(() => null)]);
  assert.ok(r, `mcp-chain still running ${capMs} ms later; stderr:\n${c.stderr}`);
  return { ...r, ms: Date.now() - t0 };
}

// Kills whatever is left of PIDS (the test's own cleanup) and returns those that were alive.
function leftovers(pids) {
  const left = pids.filter(isAlive);
  killAll(left);
  return left;
}

test('SIGINT is passed on to the backend at once; shutdown ends well inside 0.5 s',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { fx: fx('--ignore-eof') } }, 'sigint');
    try {
      const kids = await ready(c);
      assert.ok(kids.length >= 1);
      const t0 = Date.now();
      c.proc.kill('SIGINT');
      const r = await exitOf(c, t0, 3000);
      assert.ok(r.ms < 500, `took ${r.ms} ms`);
      assert.equal(r.code, 0, c.stderr);
      assert.match(c.stderr, /fx: stopped \(killed by signal 2\b/);
      await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 1000, what: 'no descendant left' });
      assert.doesNotMatch(c.stderr, /Sanitizer|runtime error/);
    } finally {
      await c.close();
    }
  });

test('a second signal kills backends that ignore the first, and mcp-chain exits',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { fx: fx('--ignore-eof', '--ignore-signals') } }, 'twice');
    let kids = [];
    try {
      kids = await ready(c);
      c.proc.kill('SIGINT');
      await sleep(100);
      assert.ok(kids.some(isAlive), 'the backend ignores SIGINT');
      const t0 = Date.now();
      c.proc.kill('SIGTERM');
      const r = await exitOf(c, t0, 3000);
      assert.ok(r.ms < 500, `took ${r.ms} ms`);
      await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 1000, what: 'no descendant left' });
    } finally {
      await c.close();
      leftovers(kids);
    }
  });

test('server-everything stopped as Claude Code stops a server: nothing left when SIGKILL would come',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE || !existsSync(SE_ENTRY) }, async () => {
    // with roots, server-everything asks the client for them: a request of its own pending
    const se = { command: 'node', args: [SE_ENTRY, 'stdio'] };
    const c = startChain({ mcpServers: { e: se } }, 'everything');
    let kids = [];
    try {
      await c.initialize('2025-06-18', 'init-1', { roots: { listChanged: true } });
      kids = descendants(c.proc.pid);
      assert.ok(kids.length >= 1);
      const t0 = Date.now();
      let ms = null;
      c.exited.then(() => { ms = Date.now() - t0; });
      for (const sig of ['SIGINT', 'SIGTERM', 'SIGKILL']) {  // 0.5 s apart, as Claude Code does
        if (ms === null) c.proc.kill(sig);
        await Promise.race([c.exited, sleep(500)]);
      }
      await c.exited;
      await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 1000, what: 'every descendant gone' })
        .catch((e) => { e.message += ` (mcp-chain exited after ${ms} ms)`; throw e; });
      assert.ok(ms < 500, `took ${ms} ms`);
    } finally {
      await c.close();
      leftovers(kids);
    }
  });

test('mcp-chain killed with SIGKILL: no backend (nor its child) outlives it',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    // sh -> fixture, as npx -> sh -> node: the fixture is a grandchild
    const sh = { command: '/bin/sh', args: ['-c', `"${FIXTURE}" --ignore-eof --ignore-signals; exit $?`] };
    const c = startChain({ mcpServers: { fx: sh } }, 'sigkill');
    let kids = [];
    try {
      kids = await ready(c);
      assert.ok(kids.length >= 2, 'sh and the fixture');
      c.proc.kill('SIGKILL');
      await c.exited;
      await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 2000, what: 'every descendant gone' });
    } finally {
      await c.close();
      assert.deepEqual(leftovers(kids), []);
    }
  });

test('one backend that exits with status 0: pending requests get an error, mcp-chain exits 0',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { fx: fx() } }, 'clean-one');
    try {
      await ready(c);
      c.send({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'slow', arguments: { ms: 20000 } } });
      c.send({ jsonrpc: '2.0', id: 'bye', method: 'tools/call', params: { name: 'exit_quietly', arguments: {} } });
      const r = await exitOf(c, Date.now(), 5000);
      assert.equal(r.code, 0, c.stderr);
      const out = c.lines.slice(c.cursor).map((e) => e.msg);
      const byId = Object.fromEntries(out.filter((m) => m.id !== undefined).map((m) => [m.id, m]));
      assert.equal(byId.bye?.result?.content?.[0]?.text, 'bye', JSON.stringify(out));
      assert.ok(byId.slow?.error, `the pending call is answered with an error: ${JSON.stringify(out)}`);
      assert.deepEqual(out.filter((m) => m.method), [], 'no notification (no list_changed)');
      assert.doesNotMatch(c.stderr, /restarting|error:/);
      assert.match(c.stderr, /fx: ended on its own \(exited with status 0\)/);
      assert.doesNotMatch(c.stderr, /shutting down/, 'one line for the event');
    } finally {
      await c.close();
    }
  });

test('one of several backends exits with status 0: not restarted, its tools leave the list, calls get an error',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { a: fx(), b: fx() } }, 'clean-multi');
    try {
      await ready(c);
      const bye = await c.request(2, 'tools/call', { name: 'a__exit_quietly', arguments: {} });
      assert.equal(bye.result?.content?.[0]?.text, 'bye');
      await waitFor(() => /a: ended on its own/.test(c.stderr), { what: 'the end in the log' });
      await sleep(1200);  // longer than the first restart delay (0.5 s)
      assert.equal((c.stderr.match(/a: started/g) ?? []).length, 1, c.stderr);
      assert.doesNotMatch(c.stderr, /restarting|error:/);
      const list = await c.request(3, 'tools/list', {});
      const names = list.result.tools.map((t) => t.name);
      assert.ok(names.includes('b__echo') && !names.includes('a__echo'), names.join(' '));
      const late = await c.request(4, 'tools/call', { name: 'a__echo', arguments: {} });
      assert.ok(late.error, JSON.stringify(late));
      const other = await c.request(5, 'tools/call', { name: 'b__echo', arguments: { x: 1 } });
      assert.ok(other.result, JSON.stringify(other));
      assert.equal(c.proc.exitCode, null, 'mcp-chain keeps serving');
    } finally {
      await c.close();
    }
  });

test('a normal session writes one line per event at the default level, each with one timestamp at most',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { fx: fx('--stderr-lines', '2') } }, 'quiet');
    await ready(c);
    await c.request(2, 'tools/list', {});
    c.proc.stdin.end();
    const r = await exitOf(c, Date.now(), 5000);
    assert.equal(r.code, 0);
    const lines = c.stderr.trim().split('\n');
    const expected = [/ fx: started "/, /^\[fx\] fixture: stderr line 1$/, /^\[fx\] fixture: stderr line 2$/,
      / fx: ready: /, / client: initialized /, / client: end of input /, / fx: stopped \(exited with status 0\)/];
    assert.equal(lines.length, expected.length, c.stderr);
    for (const re of expected)
      assert.equal(lines.filter((l) => re.test(l)).length, 1, `${re} once in:\n${c.stderr}`);
    for (const l of lines)
      assert.ok((l.match(/\d{4}-\d\d-\d\dT\d\d:\d\d/g) ?? []).length <= 1, l);
  });

test('a missing command: one clear error, no retries, and the initialize is answered',
  { timeout: 30_000, skip: SKIP_NO_FIXTURE }, async () => {
    const c = startChain({ mcpServers: { m: { command: '/no/such' } } }, 'missing');
    try {
      const t0 = Date.now();
      const res = await c.request(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {},
        clientInfo: { name: 'lifecycle', version: '1' } });
      assert.ok(Date.now() - t0 < 2000);
      assert.match(res.error?.message ?? '', /\/no\/such/, JSON.stringify(res));
      await sleep(1200);  // longer than the first restart delay (0.5 s)
      const lines = c.stderr.trim().split('\n');
      assert.equal(lines.length, 1, c.stderr);
      assert.match(lines[0], /error: m: cannot start "\/no\/such": No such file or directory/);
      c.proc.stdin.end();
      const r = await exitOf(c, Date.now(), 5000);
      assert.equal(r.code, 0);
    } finally {
      await c.close();
    }
  });
