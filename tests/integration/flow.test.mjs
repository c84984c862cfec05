// mcp-chain --flow: MCP-Flow (MCP over WebTransport) in front of a real
// MCP server, from two independent clients, web/mcp-flow.js in headless
// Chromium and in Deno, running the cases of fixtures/flow-cases.js: a JSON
// session (progress on the control stream) and a CBOR session (progress as
// datagrams), tools/list, a call, a 1 MiB blob on an execution stream, a
// $/cancel that reaches the backend, a frame in the wrong encoding,
// $/shutdown. Then the certificate mcp-chain makes itself, and a client that
// vanishes mid-call.
//
// Two chains: one with datagrams, one without ("datagrams": false), both
// with the same fresh certificate; behind each, fixtures/flow-backend.mjs
// (official SDK 1.32) on stdio.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';

import { HERE, SKIP_NO_CHAIN, killAll, waitFor } from './lib.mjs';
import { startChain } from './http_lib.mjs';
import {
  DENO, SKIP_NO_BROWSER, SKIP_NO_DENO, checkRecord, makeCert, runDenoCases, runPageCases,
  staticServer, withBrowser,
} from './flow_lib.mjs';

const BACKEND = { command: process.execPath, args: [path.join(HERE, 'fixtures', 'flow-backend.mjs')] };
const EXPECT = { serverName: 'flow-backend', tools: ['echo', 'big', 'slow', 'log'] };
const SKIP = SKIP_NO_CHAIN || SKIP_NO_DENO;

const procs = [];
const chains = [];
let servers = null;   /* { url, urlNoDgram, hash } */

before(async () => {
  if (SKIP) return;
  const { cert, key, hash } = makeCert('flow-chain');
  const flow = (datagrams) => ({ flow: { certificate: cert, key, datagrams } });
  const [a, b] = await Promise.all([
    startChain(BACKEND, { listen: null, flow: '127.0.0.1:0', extra: flow(true) }),
    startChain(BACKEND, { listen: null, flow: '127.0.0.1:0', extra: flow(false) }),
  ]);
  chains.push(a, b);
  servers = { url: a.flowUrl, urlNoDgram: b.flowUrl, hash };
});

after(async () => {
  for (const c of chains) await c.stop();
  killAll(procs.map((p) => p.pid).filter(Boolean));
});

/** Runs a Deno script SRC (a module's text, ARGS in Deno.args) with the
 * client module; what it printed last, parsed. */
async function deno(src, args) {
  const p = spawn(DENO, ['run', '--unstable-net', '--v8-flags=--expose-gc', '--allow-net', '--allow-read',
    '--ext=js', '-', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  p.stdin.end(src);
  const timer = setTimeout(() => killAll([p.pid]), 60_000);
  const [code] = await once(p, 'exit');
  clearTimeout(timer);
  assert.equal(code, 0, `deno: ${out} ${err}`);
  return JSON.parse(out.trim().split('\n').pop());
}

const MODULE = path.join(HERE, '..', '..', 'web', 'mcp-flow.js');

test('through mcp-chain --flow from Deno: JSON and CBOR sessions, streams, progress, cancel, shutdown',
  { timeout: 180_000, skip: SKIP }, async () => {
    checkRecord(await runDenoCases(servers, procs), 'deno', EXPECT);
    /* the $/cancels reached the backend as notifications/cancelled */
    await waitFor(() => (chains[0].stderr.match(/cancelled slow/g) ?? []).length >= 1 &&
      (chains[1].stderr.match(/cancelled slow/g) ?? []).length >= 1, { timeoutMs: 10_000, what: 'the backends to see the cancels' });
  });

test('through mcp-chain --flow from headless Chromium: the same cases',
  { timeout: 240_000, skip: SKIP || SKIP_NO_BROWSER }, async () => {
    const srv = await staticServer();
    try {
      await withBrowser(procs, async (browser) => {
        checkRecord(await runPageCases(await browser.newPage(), srv, servers), 'chromium', EXPECT);
      });
    } finally {
      srv.close();
    }
  });

test('mcp-chain makes its own certificate when none is configured, and logs its hash',
  { timeout: 60_000, skip: SKIP }, async () => {
    const c = await startChain(BACKEND, { listen: null, flow: '127.0.0.1:0', extra: { flow: {} } });
    chains.push(c);
    assert.match(c.flowHash ?? '', /^[0-9a-f]{64}$/, c.stderr);
    const r = await deno(`
      import { connect } from ${JSON.stringify(MODULE)};
      const [url, hash] = Deno.args;
      const c = await connect(url, { serverCertificateHashes: [hash], encodings: ['cbor'] });
      const out = { encoding: c.encoding, echo: (await c.request('tools/call', { name: 'echo', arguments: { text: 'self' } })).content };
      out.shutdown = await c.shutdown({ timeoutMs: 10000 });
      console.log(JSON.stringify(out));
      Deno.exit(0);`, [c.flowUrl, c.flowHash]);
    assert.deepEqual(r, { encoding: 'cbor', echo: [{ type: 'text', text: 'self' }], shutdown: 'closed' });
  });

test('a client that vanishes mid-call: the call is cancelled at the backend',
  { timeout: 60_000, skip: SKIP }, async () => {
    const before = (chains[1].stderr.match(/cancelled slow/g) ?? []).length;
    const r = await deno(`
      import { connect } from ${JSON.stringify(MODULE)};
      const [url, hash] = Deno.args;
      const c = await connect(url, { serverCertificateHashes: [hash], encodings: ['json'] });
      c.request('tools/call', { name: 'slow', arguments: { ms: 60000, steps: 2 } }).catch(() => {});
      await new Promise((r) => setTimeout(r, 300));
      console.log(JSON.stringify({ sent: true }));
      Deno.exit(0);   /* no $/cancel, no $/shutdown: the process is gone */`, [servers.urlNoDgram, servers.hash]);
    assert.deepEqual(r, { sent: true });
    await waitFor(() => (chains[1].stderr.match(/cancelled slow/g) ?? []).length > before,
      { timeoutMs: 30_000, what: 'the backend to see the vanished client\'s call cancelled' });
  });
