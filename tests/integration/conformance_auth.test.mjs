// The official conformance suite's CLIENT authorization scenarios against
// mcp-chain's OAuth client of upstreams: @modelcontextprotocol/conformance
// 0.1.16 (`client --suite auth`) and 0.2.0-alpha.12 (`--suite auth` for the
// 2026-07-28 revision, and the 2026-07-28 scenarios outside the suite: the
// resource parameter, offline_access, an authorization server that moves,
// RFC 9207 iss checks, an issuer mismatch). The client under test is
// fixtures/conformance-auth-client.mjs: an upstream with "oauth", `mcp-chain
// auth login` with the printed URL followed as a browser would, then `list`
// and a tool call through mcp-chain (a step-up logs in again with the scope
// the hint names, as a person would, at most once).
// Not run: the 2025-03-26 back-compat scenarios (no metadata; default
// endpoints on the server's origin), and the extensions (client credentials,
// DPoP, enterprise-managed authorization), which mcp-chain does not implement.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';

import { HERE, SKIP_NO_CHAIN } from './lib.mjs';

const SHIM = path.join(HERE, 'fixtures', 'glob-shim.mjs');
const CLIENT = path.join(HERE, 'fixtures', 'conformance-auth-client.mjs');
const V1 = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const NEXT = path.join(HERE, 'node_modules', 'conformance-next', 'dist', 'index.js');

/** Runs the conformance CLI with ARGS: {scenarios: {name: {passed, failed}}, out}. */
function runClient(cli, args) {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', SHIM, cli, 'client', '--command', `node ${CLIENT}`, ...args],
      { maxBuffer: 64 << 20, timeout: 300_000, env: process.env }, (err, stdout, stderr) => {
        const out = (stdout + stderr).replace(/\x1b\[[0-9;]*m/g, '');
        const scenarios = {};
        for (const m of out.matchAll(/^[✓✗] (\S+): (\d+) passed, (\d+) failed/gm))
          scenarios[m[1]] = { passed: Number(m[2]), failed: Number(m[3]) };
        const one = /^Passed: (\d+)\/(\d+), (\d+) failed/m.exec(out);
        resolve({ scenarios, one: one && { passed: Number(one[1]), failed: Number(one[3]) }, out });
      });
  });
}

const T = { timeout: 600_000, skip: SKIP_NO_CHAIN };

test('conformance 0.1.16, client --suite auth: every scenario passes through mcp-chain\'s OAuth client', T, async () => {
  const r = await runClient(V1, ['--suite', 'auth']);
  const names = Object.keys(r.scenarios);
  assert.ok(names.length >= 14, `the suite ran its scenarios (${names.length}):\n${r.out.slice(-3000)}`);
  const failed = names.filter((n) => r.scenarios[n].failed > 0);
  assert.deepEqual(failed, [], `scenarios with failed checks:\n${r.out.slice(-4000)}`);
});

test('conformance 0.2.0-alpha, client --suite auth (2026-07-28) and its 2026 scenarios outside the suite', T, async () => {
  const r = await runClient(NEXT, ['--suite', 'auth', '--spec-version', '2026-07-28']);
  const names = Object.keys(r.scenarios);
  assert.ok(names.length >= 14, `the suite ran its scenarios (${names.length}):\n${r.out.slice(-3000)}`);
  const failed = names.filter((n) => r.scenarios[n].failed > 0);
  assert.deepEqual(failed, [], `scenarios with failed checks:\n${r.out.slice(-4000)}`);
  const more = ['auth/resource-mismatch', 'auth/offline-access-scope', 'auth/offline-access-not-supported',
    'auth/authorization-server-migration', 'auth/iss-supported', 'auth/iss-not-advertised',
    'auth/iss-supported-missing', 'auth/iss-wrong-issuer', 'auth/iss-unexpected', 'auth/iss-normalized',
    'auth/metadata-issuer-mismatch'];
  const results = await Promise.all(more.map((s) => runClient(NEXT, ['--scenario', s])));
  const bad = more.filter((s, i) => !results[i].one || results[i].one.failed > 0 || results[i].one.passed === 0);
  assert.deepEqual(bad, [], bad.map((s) => `${s}:\n${results[more.indexOf(s)].out.slice(-2000)}`).join('\n'));
});
