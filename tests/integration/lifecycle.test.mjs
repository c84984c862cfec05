// End of input while the backend is still starting: the client's initialize
// is answered (a result if the backend makes it within the grace period, an
// error otherwise), never left hanging, and mcp-chain exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { CHAIN, FIXTURE, RawChain, SKIP_NO_FIXTURE, descendants, isAlive, killAll, sleep, tmpPath, waitFor }
  from './lib.mjs';

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
