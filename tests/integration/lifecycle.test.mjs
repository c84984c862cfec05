// End of input while the backend is still starting: the client's initialize
// is answered (a result if the backend makes it within the grace period, an
// error otherwise), never left hanging, and mcp-chain exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { CHAIN, FIXTURE, SKIP_NO_FIXTURE, tmpPath } from './lib.mjs';

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
