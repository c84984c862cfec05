// flow_lib.mjs - what the MCP-Flow tests share (flow_client.test.mjs: the
// client module against the Deno server; flow.test.mjs: mcp-chain --flow):
// a short-lived certificate, the page server, the cases of
// fixtures/flow-cases.js run from Deno and from headless Chromium, and the
// checks of what they recorded.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { once } from 'node:events';

import { HERE, ROOT, killAll, tmpPath } from './lib.mjs';

export const DENO = path.join(HERE, 'node_modules', '.bin', 'deno');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const CASES_TS = path.join(ROOT, 'tests', 'fixtures', 'flow-client-cases.ts');
let puppeteer = null;
try { puppeteer = (await import('puppeteer-core')).default; } catch { /* skipped below */ }
export { puppeteer };

const HAVE_OPENSSL = spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;
export const SKIP_NO_DENO = (!existsSync(DENO) ? 'no deno (npm ci in tests/integration)' : false)
  || (!HAVE_OPENSSL ? 'openssl is not on PATH' : false);
export const SKIP_NO_BROWSER = SKIP_NO_DENO
  || (!existsSync(CHROMIUM) ? `no Chromium at ${CHROMIUM}` : false)
  || (!puppeteer ? 'puppeteer-core not installed (npm ci in tests/integration)' : false);

/** A fresh ECDSA P-256 certificate valid 10 days (Chromium takes one by its
 * hash only under 14) for 127.0.0.1: {cert, key, hash} (hash: the DER's
 * SHA-256 in hex). NAME tells the files apart. */
export function makeCert(name = 'flow') {
  const cert = tmpPath(`${name}-cert.pem`), key = tmpPath(`${name}-key.pem`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-days', '10', '-nodes', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const der = Buffer.from(readFileSync(cert, 'utf8').replace(/-----[^-]+-----|\s/g, ''), 'base64');
  return { cert, key, hash: createHash('sha256').update(der).digest('hex') };
}

/** Runs fixtures/flow-cases.js from Deno against SERVERS ({url, urlNoDgram,
 * hash}); the record. PROCS collects the process (killed by the caller). */
export async function runDenoCases(servers, procs) {
  const p = spawn(DENO, ['run', '--unstable-net', '--v8-flags=--expose-gc', '--allow-net', '--allow-read',
    CASES_TS, servers.url, servers.urlNoDgram, servers.hash], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const timer = setTimeout(() => killAll([p.pid]), 150_000);
  const [code] = await once(p, 'exit');
  clearTimeout(timer);
  assert.equal(code, 0, `deno client: ${out} ${err}`);
  return JSON.parse(out.trim().split('\n').pop());
}

/** Serves web/ under /web/ and this directory's fixtures/ under /t/ on
 * 127.0.0.1 (a secure context for WebTransport); the server. */
export async function staticServer() {
  const roots = { '/web/': path.join(ROOT, 'web'), '/t/': path.join(HERE, 'fixtures') };
  const types = { '.js': 'text/javascript', '.html': 'text/html; charset=utf-8' };
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const prefix = Object.keys(roots).find((p) => url.pathname.startsWith(p));
    const name = prefix && url.pathname.slice(prefix.length);
    if (!name || !/^[\w.-]+$/.test(name) || !existsSync(path.join(roots[prefix], name))) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': types[path.extname(name)] ?? 'application/octet-stream' });
    res.end(readFileSync(path.join(roots[prefix], name)));
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  return srv;
}

/** Headless Chromium (its process in PROCS); FN(browser) runs with it. */
export async function withBrowser(procs, fn) {
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu'], protocolTimeout: 180_000 });
  procs.push(browser.process());
  try {
    return await fn(browser);
  } finally {
    await browser.close();
  }
}

/** Runs fixtures/flow-cases.js in PAGE (opened on SRV's flow-page.html)
 * against SERVERS; the record (the console's lines in its error). */
export async function runPageCases(page, srv, servers) {
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(String(e)));
  await page.goto(`http://127.0.0.1:${srv.address().port}/t/flow-page.html`);
  await page.waitForFunction(() => window.flowReady === true, { timeout: 60_000 });
  const rec = await page.evaluate((args) => window.runFlow(args).catch((e) => ({ error: String(e?.stack ?? e) })), servers);
  if (rec.error) rec.error += ` (console: ${logs.join(' | ')})`;
  return rec;
}

/**
 * Asserts what flow-cases.js recorded (WHERE: which client ran it) against
 * a server answering as SERVER_NAME with TOOLS: a JSON session on the
 * server without datagrams, a CBOR one on the server with them.
 */
export function checkRecord(rec, where, { serverName, tools }) {
  assert.ok(!rec.error, `${where}: ${rec.error}`);
  const { raw, ...sessions } = rec;
  /* by id: a ping sent before initialize is answered may be answered first */
  assert.deepEqual([...raw.split].sort((x, y) => x.id - y.id),
    [{ id: 0, encoding: 'json' }, { id: 1 }, { id: 2, tools: tools.length }],
    `${where}: a frame in pieces, two frames in one write`);
  assert.equal(raw.cborFirst.id, 7, where);
  assert.equal(raw.cborFirst.error.code, -32003, `${where}: initialize in CBOR`);
  for (const [name, r] of Object.entries(sessions)) {
    const at = `${where} ${name}`;
    const cbor = name === 'cbor';
    assert.equal(r.encoding, name, at);
    assert.deepEqual(r.transport, { type: 'mcp-flow', version: '0.1', encoding: name,
      maxConcurrentStreams: 16, datagramsSupported: cbor }, at);
    assert.equal(r.serverInfo.name, serverName, at);
    assert.deepEqual(r.ping, {}, at);
    assert.deepEqual(r.tools, tools, at);
    assert.deepEqual(r.echo, [{ type: 'text', text: 'héllo flow' }], at);
    assert.deepEqual(r.big, { type: 'stream', mimeType: 'application/octet-stream', length: 1024 * 1024, pattern: true }, at);
    assert.equal(r.slow.text, 'slept 800 ms in 4 steps', at);
    if (cbor) {
      /* datagrams may be lost, even on loopback: at least one, in order */
      assert.ok(r.slow.progress.length >= 1 && r.datagrams >= r.slow.progress.length, `${at}: ${JSON.stringify(r)}`);
      assert.deepEqual(r.slow.progress, [...r.slow.progress].sort(), at);
    } else {
      assert.deepEqual(r.slow.progress, [1, 2, 3, 4], at);
      assert.equal(r.datagrams, 0, at);
      assert.equal(r.notifications.filter((m) => m === 'notifications/progress').length, 4, at);
    }
    assert.deepEqual(r.cancel, { code: -32000, message: 'Cancelled' }, at);
    assert.equal(r.wrongEncoding.code, -32003, at);
    assert.deepEqual(r.afterWrong, {}, `${at}: the session goes on after a -32003`);
    assert.equal(r.shutdown, 'closed', at);
    assert.equal(r.afterShutdown.code, -32000, at);
  }
}
