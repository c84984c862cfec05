// MCP-Flow (MCP over WebTransport) from the client's side: web/mcp-flow.js
// against the Deno MCP-Flow server tests/fixtures/flow-server.ts, two of
// them on free loopback ports with a fresh ECDSA P-256 certificate (valid
// 10 days: Chromium takes a serverCertificateHashes certificate only under
// 14), one with datagrams, one without.
//
// - the module's CBOR codec against RFC 8949 Appendix A's vectors, in Node;
// - the cases of fixtures/flow-cases.js (a JSON session: progress on the
//   control stream; a CBOR session: progress as datagrams; both: initialize,
//   ping, tools/list, echo, a 1 MiB execution stream checked byte by byte,
//   a cancel answered -32000, a frame in the wrong encoding answered -32003,
//   $/shutdown closing the session) from Deno as a client;
// - the same cases in headless Chromium (puppeteer-core), from a page
//   served by a small Node HTTP server on 127.0.0.1 (a secure context).
//
// The servers and Deno are started here and killed by PID at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';

import { ROOT, isAlive, killAll, waitFor } from './lib.mjs';
import {
  DENO, SKIP_NO_BROWSER, SKIP_NO_DENO, checkRecord, makeCert, runDenoCases, runPageCases,
  staticServer, withBrowser,
} from './flow_lib.mjs';
import { decodeCbor, encodeCbor, FrameReader, frame } from '../../web/mcp-flow.js';

const SERVER_TS = path.join(ROOT, 'tests', 'fixtures', 'flow-server.ts');
const EXPECT = { serverName: 'flow-fixture', tools: ['echo', 'big', 'slow'] };

const hex = (b) => Buffer.from(b).toString('hex');
const unhex = (h) => new Uint8Array(Buffer.from(h, 'hex'));

/* ------------------------------------------------------------------ */
/* CBOR: RFC 8949 Appendix A                                            */
/* ------------------------------------------------------------------ */

/* [hex, value]: decoded to VALUE and, VALUE encoded, back to HEX (the
 * preferred serialization). */
const ROUND_TRIP = [
  ['00', 0], ['01', 1], ['0a', 10], ['17', 23], ['1818', 24], ['1819', 25], ['1864', 100],
  ['1903e8', 1000], ['1a000f4240', 1000000], ['1b000000e8d4a51000', 1000000000000],
  ['1b001fffffffffffff', Number.MAX_SAFE_INTEGER],
  ['20', -1], ['29', -10], ['3863', -100], ['3903e7', -1000],
  ['f98000', -0.0], ['fb3ff199999999999a', 1.1], ['f93e00', 1.5], ['fa7f7fffff', 3.4028234663852886e+38],
  ['fb7e37e43c8800759c', 1.0e+300], ['f90001', 5.960464477539063e-8], ['f90400', 0.00006103515625],
  ['fbc010666666666666', -4.1], ['f97c00', Infinity], ['f97e00', NaN], ['f9fc00', -Infinity],
  ['f4', false], ['f5', true], ['f6', null],
  ['40', new Uint8Array(0)], ['4401020304', unhex('01020304')],
  ['60', ''], ['6161', 'a'], ['6449455446', 'IETF'], ['62225c', '"\\'], ['62c3bc', '\u00fc'],
  ['63e6b0b4', '\u6c34'], ['64f0908591', '\u{10151}'],
  ['80', []], ['83010203', [1, 2, 3]], ['8301820203820405', [1, [2, 3], [4, 5]]],
  ['98190102030405060708090a0b0c0d0e0f101112131415161718181819', Array.from({ length: 25 }, (_, i) => i + 1)],
  ['a0', {}], ['a26161016162820203', { a: 1, b: [2, 3] }], ['826161a161626163', ['a', { b: 'c' }]],
  ['a56161614161626142616361436164614461656145', { a: 'A', b: 'B', c: 'C', d: 'D', e: 'E' }],
];

/* [hex, value]: decoded only (other serializations, indefinite lengths,
 * tags; and floats with an integral value, which JavaScript cannot tell
 * from integers: they are encoded as integers, 1.0 as 01). */
const DECODE_ONLY = [
  ['f90000', 0], ['f93c00', 1], ['f97bff', 65504], ['fa47c35000', 100000], ['f9c400', -4],
  ['f7', undefined],
  ['fa7f800000', Infinity], ['fa7fc00000', NaN], ['faff800000', -Infinity],
  ['fb7ff0000000000000', Infinity], ['fb7ff8000000000000', NaN], ['fbfff0000000000000', -Infinity],
  ['c074323031332d30332d32315432303a30343a30305a', '2013-03-21T20:04:00Z'],
  ['c11a514b67b0', 1363896240], ['c1fb41d452d9ec200000', 1363896240.5],
  ['d74401020304', unhex('01020304')], ['d818456449455446', unhex('6449455446')],
  ['d82076687474703a2f2f7777772e6578616d706c652e636f6d', 'http://www.example.com'],
  ['5f42010243030405ff', unhex('0102030405')], ['7f657374726561646d696e67ff', 'streaming'],
  ['9fff', []], ['9f018202039f0405ffff', [1, [2, 3], [4, 5]]], ['9f01820203820405ff', [1, [2, 3], [4, 5]]],
  ['83018202039f0405ff', [1, [2, 3], [4, 5]]], ['83019f0203ff820405', [1, [2, 3], [4, 5]]],
  ['9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff', Array.from({ length: 25 }, (_, i) => i + 1)],
  ['bf61610161629f0203ffff', { a: 1, b: [2, 3] }], ['826161bf61626163ff', ['a', { b: 'c' }]],
  ['bf6346756ef563416d7421ff', { Fun: true, Amt: -2 }],
];

/* Appendix A items this codec refuses: integers beyond 2^53, bignums,
 * simple values, maps with non-text keys; and malformed input. */
const REFUSED = [
  '1bffffffffffffffff', '3bffffffffffffffff', 'c249010000000000000000', 'c349010000000000000000',
  'f0', 'f818', 'f8ff', 'a201020304',
  '18', '62c3', '9f01', 'ff', '1c', '0000', '7f6161', '5f6161ff',
];

test('CBOR: RFC 8949 Appendix A vectors decode, and encode to the preferred serialization', () => {
  for (const [h, v] of ROUND_TRIP) {
    assert.deepEqual(decodeCbor(unhex(h)), v, `decode ${h}`);
    assert.equal(hex(encodeCbor(v)), h, `encode ${h}`);
  }
  for (const [h, v] of DECODE_ONLY) assert.deepEqual(decodeCbor(unhex(h)), v, `decode ${h}`);
  assert.equal(hex(encodeCbor(1.0)), '01');
  for (const h of REFUSED) assert.throws(() => decodeCbor(unhex(h)), `refuse ${h}`);
  assert.throws(() => encodeCbor(1n), TypeError);
  assert.throws(() => encodeCbor({ big: 2n ** 70n }), TypeError);
});

test('CBOR: a JSON-RPC message round-trips; large and deep values stay bounded', () => {
  const m = { jsonrpc: '2.0', id: 4294967295, method: 'tools/call',
    params: { name: 'x', arguments: { f: 0.1, n: -(2 ** 53) + 1, s: 'é'.repeat(70000), a: [null, true, {}] } } };
  assert.deepEqual(decodeCbor(encodeCbor(m)), m);
  const blob = new Uint8Array(70000).map((_, i) => i & 0xff);
  assert.deepEqual(decodeCbor(encodeCbor({ blob })).blob, blob);
  assert.equal(hex(encodeCbor(2 ** 53)), 'fa5a000000', 'an unsafe integer goes as a float');
  assert.throws(() => decodeCbor(new Uint8Array(2000).fill(0x81)), /too deep|truncated/);
  assert.throws(() => decodeCbor(unhex('5a7fffffff00')), /truncated/, 'a length beyond the input');
});

test('framing: frames split across reads and several in one read', () => {
  const bodies = [encodeCbor({ a: 1 }), new Uint8Array(0), encodeCbor('x'.repeat(300))];
  const all = Buffer.concat(bodies.map((b) => frame(b)));
  for (const cut of [1, 3, 4, 5, 7, all.length]) {
    const r = new FrameReader();
    const got = [];
    for (let off = 0; off < all.length; off += cut) {
      r.push(all.subarray(off, off + cut));
      for (let b = r.next(); b; b = r.next()) got.push(hex(b));
    }
    assert.deepEqual(got, bodies.map(hex), `chunks of ${cut}`);
    assert.equal(r.pending, 0);
  }
  /* a large frame in small reads, between small ones: growth and compaction */
  const large = new Uint8Array(1 << 20).map((_, i) => i % 253);
  const mixed = Buffer.concat([frame(unhex('a0')), frame(large), frame(unhex('80')), frame(unhex('a0'))]);
  const r = new FrameReader();
  const got = [];
  for (let off = 0; off < mixed.length; off += 1000) {
    r.push(mixed.subarray(off, off + 1000));
    for (let b = r.next(); b; b = r.next()) got.push(b);
  }
  assert.deepEqual(got.map((b) => b.length), [1, 1 << 20, 1, 1]);
  assert.deepEqual(got[1], large);
  assert.equal(r.pending, 0);

  const small = new FrameReader(10);
  small.push(frame(new Uint8Array(11)).subarray(0, 4));
  assert.throws(() => small.next(), /over the limit/);
});

/* ------------------------------------------------------------------ */
/* The servers, and the cases from Deno and Chromium                    */
/* ------------------------------------------------------------------ */

const procs = [];
let servers = null;   /* { url, urlNoDgram, hash } */

/** Starts a flow-server with EXTRA args; resolves to its port once it
 * printed LISTENING. */
async function startServer(cert, key, extra = []) {
  const p = spawn(DENO, ['run', '--unstable-net', '--v8-flags=--expose-gc', '--allow-net', '--allow-read',
    SERVER_TS, '--port', '0', '--cert', cert, '--key', key, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const port = await waitFor(() => /LISTENING (\d+)/.exec(out)?.[1], { timeoutMs: 60_000, what: `flow-server LISTENING (stderr: ${err})` });
  return Number(port);
}

before(async () => {
  if (SKIP_NO_DENO) return;
  const { cert, key, hash } = makeCert('flow-client');
  const [p1, p2] = await Promise.all([startServer(cert, key), startServer(cert, key, ['--no-datagrams'])]);
  servers = { url: `https://127.0.0.1:${p1}/mcp-flow`, urlNoDgram: `https://127.0.0.1:${p2}/mcp-flow`, hash };
});

after(async () => {
  const pids = procs.map((p) => p.pid).filter(Boolean);
  killAll(pids, 'SIGTERM');
  await waitFor(() => pids.every((pid) => !isAlive(pid)), { timeoutMs: 10_000, what: 'the Deno processes to end' })
    .catch(() => killAll(pids, 'SIGKILL'));
});

test('MCP-Flow from Deno: JSON and CBOR sessions, streams, progress, cancel, shutdown',
  { timeout: 180_000, skip: SKIP_NO_DENO }, async () => {
    checkRecord(await runDenoCases(servers, procs), 'deno', EXPECT);
  });

test('MCP-Flow from headless Chromium: JSON and CBOR sessions, streams, progress, cancel, shutdown',
  { timeout: 240_000, skip: SKIP_NO_BROWSER }, async () => {
    const srv = await staticServer();
    try {
      await withBrowser(procs, async (browser) => {
        const page = await browser.newPage();
        checkRecord(await runPageCases(page, srv, servers), 'chromium', EXPECT);

        /* web/example.html: connect, list the tools, call echo from its form */
        await page.goto(`http://127.0.0.1:${srv.address().port}/web/example.html`);
        await page.$eval('#url', (e, v) => { e.value = v; }, servers.url);
        await page.$eval('#hash', (e, v) => { e.value = v; }, servers.hash);
        await page.click('#conn button');
        await page.waitForFunction(() => document.getElementById('out').textContent.includes('"slow"'), { timeout: 60_000 });
        assert.match(await page.$eval('#out', (e) => e.textContent), /"encoding": "cbor"/);
        await page.select('#tool', 'echo');
        await page.$eval('#args', (e) => { e.value = '{"text": "from the example"}'; });
        await page.click('#call button');
        await page.waitForFunction(() => document.getElementById('out').textContent.includes('from the example'), { timeout: 60_000 });
        await page.click('#bye');
        await page.waitForFunction(() => document.getElementById('out').textContent === 'session closed', { timeout: 60_000 });
      });
    } finally {
      srv.close();
    }
  });
