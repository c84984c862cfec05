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

import { HERE, SKIP_NO_CHAIN, connect, everythingServer, killAll, waitFor } from './lib.mjs';
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
 * client module, for at most LIMITMS; what it printed last, parsed. */
async function deno(src, args, limitMs = 60_000) {
  const p = spawn(DENO, ['run', '--unstable-net', '--v8-flags=--expose-gc', '--allow-net', '--allow-read',
    '--ext=js', '-', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  p.stdin.end(src);
  const timer = setTimeout(() => killAll([p.pid]), limitMs);
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

test('head-of-line: a 64 MiB result on an execution stream while pings go on the control stream',
  { timeout: 400_000, skip: SKIP }, async () => {
    const r = await deno(`
      import { connect } from ${JSON.stringify(MODULE)};
      const [url, hash] = Deno.args;
      const gc = globalThis.gc; const timer = gc ? setInterval(gc, 50) : undefined;
      const c = await connect(url, { serverCertificateHashes: [hash], encodings: ['cbor'] });
      const pings = [];
      let streaming = false, done = false;
      const t0 = performance.now();
      let answerAt = 0;
      const big = c.request('tools/call', { name: 'big', arguments: { bytes: 64 * 1024 * 1024 } }, {
        onAnswer: () => { streaming = true; answerAt = performance.now(); } });
      const pinger = (async () => {
        while (!done) {
          if (!streaming) { await new Promise((r) => setTimeout(r, 5)); continue; }
          const s = performance.now();
          await c.request('ping');
          if (!done) pings.push(performance.now() - s);
        }
      })();
      const result = await big;
      const endAt = performance.now();
      done = true;
      await pinger;
      const bytes = result.content[0].bytes;
      let ok = bytes.length === 64 * 1024 * 1024;
      for (let i = 0; ok && i < bytes.length; i += 4093) ok = bytes[i] === i % 251;
      pings.sort((a, b) => a - b);
      console.log(JSON.stringify({ ok, type: result.content[0].type, pings: pings.length,
        p50: pings[Math.floor(pings.length / 2)], max: pings[pings.length - 1],
        streamMs: endAt - answerAt, totalMs: endAt - t0 }));
      await c.shutdown({ timeoutMs: 10000 });
      clearInterval(timer);
      Deno.exit(0);`, [servers.url, servers.hash], 360_000);
    console.log(`# 64 MiB over an execution stream: ${r.streamMs.toFixed(0)} ms after its answer ` +
      `(${r.totalMs.toFixed(0)} ms in all); ${r.pings} pings answered meanwhile, ` +
      `p50 ${r.p50?.toFixed(1)} ms, max ${r.max?.toFixed(1)} ms`);
    assert.equal(r.ok, true, 'the 64 MiB arrived intact');
    assert.equal(r.type, 'stream');
    assert.ok(r.pings >= 1, `pings were answered while the stream was being sent: ${JSON.stringify(r)}`);
  });

test('in front of server-everything, from headless Chromium: JSON and CBOR, lists as direct, a call, progress by datagram, a cancel, shutdown',
  { timeout: 240_000, skip: SKIP || SKIP_NO_BROWSER }, async () => {
    const direct = await connect('direct', everythingServer());
    let tools;
    try {
      tools = (await direct.client.listTools()).tools.map((t) => t.name).sort();
    } finally {
      await direct.close();
    }
    const { cert, key, hash } = makeCert('flow-everything');
    const c = await startChain(everythingServer(), { listen: null, flow: '127.0.0.1:0',
      extra: { flow: { certificate: cert, key } } });
    chains.push(c);
    const srv = await staticServer();
    try {
      await withBrowser(procs, async (browser) => {
        const page = await browser.newPage();
        await page.goto(`http://127.0.0.1:${srv.address().port}/t/flow-page.html`);
        await page.waitForFunction(() => window.flowReady === true, { timeout: 60_000 });
        const rec = await page.evaluate(async ({ url, hash }) => {
          const { connect } = await import('/web/mcp-flow.js');
          const out = {};
          for (const enc of ['json', 'cbor']) {
            let datagrams = 0;
            const cl = await connect(url, { serverCertificateHashes: [hash], encodings: [enc],
              onDatagram: () => { datagrams++; } });
            const r = { encoding: cl.encoding, server: cl.initializeResult.serverInfo.name };
            r.tools = (await cl.request('tools/list')).tools.map((t) => t.name).sort();
            r.echo = (await cl.request('tools/call', { name: 'echo', arguments: { message: 'through flow' } })).content;
            const progress = [];
            const long = await cl.request('tools/call', { name: 'trigger-long-running-operation',
              arguments: { duration: 1, steps: 5 } }, { onProgress: (p) => progress.push(p.progress) });
            r.long = long.content[0].text;
            r.progress = progress;
            r.datagrams = datagrams;
            const ac = new AbortController();
            const cancelled = cl.request('tools/call', { name: 'trigger-long-running-operation',
              arguments: { duration: 20, steps: 40 } }, { signal: ac.signal, onProgress: () => ac.abort('enough') })
              .then(() => ({ resolved: true }), (e) => ({ code: e.code, message: e.message }));
            r.cancel = await cancelled;
            r.ping = await cl.request('ping');
            r.shutdown = await cl.shutdown({ timeoutMs: 15000 });
            cl.close();
            out[enc] = r;
          }
          return out;
        }, { url: c.flowUrl, hash }).catch((e) => ({ error: String(e) }));
        assert.ok(!rec.error, rec.error);
        for (const enc of ['json', 'cbor']) {
          const r = rec[enc];
          assert.equal(r.encoding, enc);
          assert.deepEqual(r.tools, tools, `${enc}: the tools a client sees directly`);
          assert.deepEqual(r.echo, [{ type: 'text', text: 'Echo: through flow' }], enc);
          assert.equal(r.long, 'Long running operation completed. Duration: 1 seconds, Steps: 5.', enc);
          /* datagrams may be lost, even on loopback: at least one, in order */
          assert.ok(r.progress.length >= 1 && r.datagrams >= 1, `${enc}: ${JSON.stringify(r)}`);
          assert.deepEqual(r.progress, [...r.progress].sort((a, b) => a - b), enc);
          assert.deepEqual(r.cancel, { code: -32000, message: 'Cancelled' }, enc);
          assert.deepEqual(r.ping, {}, enc);
          assert.equal(r.shutdown, 'closed', enc);
        }
      });
    } finally {
      srv.close();
    }
  });
