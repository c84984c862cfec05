// The official conformance suite (@modelcontextprotocol/conformance 0.1.16,
// every server scenario: --suite all) against our fixture server
// (fixtures/conformance-server.mjs) served directly over Streamable HTTP,
// and against `mcp-chain --listen` wrapping the same fixture on stdio.
// mcp-chain must pass every scenario the direct server passes.
// The CLI needs fs.globSync (node 22): fixtures/glob-shim.mjs provides it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import path from 'node:path';

import { HERE, SKIP_NO_CHAIN, waitFor, sleep } from './lib.mjs';
import { withChain } from './http_lib.mjs';

const CLI = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SHIM = path.join(HERE, 'fixtures', 'glob-shim.mjs');
const FIXTURE = path.join(HERE, 'fixtures', 'conformance-server.mjs');

/** Runs the suite against URL: {scenarios: {name: {passed, failed}}, total: 'Total: ...', out}. */
function runSuite(url) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', SHIM, CLI, 'server', '--url', url, '--suite', 'all'],
      { maxBuffer: 64 << 20, timeout: 240_000 }, (err, stdout, stderr) => {
        const out = stdout + stderr;
        const scenarios = {};
        for (const m of out.matchAll(/^[✓✗] (\S+): (\d+) passed, (\d+) failed/gm))
          scenarios[m[1]] = { passed: Number(m[2]), failed: Number(m[3]) };
        const total = /^Total: .*$/m.exec(out)?.[0];
        if (!total) reject(new Error(`no summary from the conformance CLI (${err?.message}):\n${out.slice(-3000)}`));
        else resolve({ scenarios, total, out });
      });
  });
}

/** A scenario passes when it ran with no failed check. */
const passes = (r) => r && r.failed === 0;

test('conformance 0.1.16: mcp-chain --listen passes every server scenario the fixture passes served directly',
  { timeout: 600_000, skip: SKIP_NO_CHAIN }, async () => {
    const direct = spawn(process.execPath, [FIXTURE, '--http', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    direct.stderr.on('data', (c) => { err += c; });
    let viaDirect;
    try {
      const m = await waitFor(() => /listening on (http:\S+)/.exec(err), { timeoutMs: 10_000, what: 'the fixture to listen' });
      viaDirect = await runSuite(m[1]);
    } finally {
      direct.kill('SIGTERM');
      await sleep(50);
    }
    const viaChain = await withChain({ command: 'node', args: [FIXTURE] }, {}, (chain) => runSuite(chain.url.href));
    console.log(`conformance direct: ${viaDirect.total}`);
    console.log(`conformance through mcp-chain: ${viaChain.total}`);
    const names = Object.keys(viaDirect.scenarios);
    assert.ok(names.length >= 30, `the suite ran its server scenarios (${names.length})`);
    const direct_ok = names.filter((n) => passes(viaDirect.scenarios[n]));
    assert.ok(direct_ok.length >= 30, `the fixture passes the scenarios it is written for: ${viaDirect.total}`);
    const lost = direct_ok.filter((n) => !passes(viaChain.scenarios[n]));
    assert.deepEqual(lost, [], `scenarios passed directly but not through mcp-chain:\n${viaChain.out.slice(-4000)}`);
    // at least as many checks: mcp-chain's POST streams are resumable (a retry hint and, for
    // 2025-11-25 clients, a priming event), which server-sse-polling counts and the fixture
    // served directly does not offer
    for (const n of direct_ok)
      assert.ok(viaChain.scenarios[n].passed >= viaDirect.scenarios[n].passed,
        `${n}: ${viaChain.scenarios[n].passed} checks passed through mcp-chain, ${viaDirect.scenarios[n].passed} directly`);
  });
