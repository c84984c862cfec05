// TLS for `mcp-chain --listen`: mcp-chain serves plain HTTP on 127.0.0.1 and
// a TLS-terminating reverse proxy in front of it serves https (the way the
// README and docs/http-front.md describe, with nginx and Caddy recipes). The
// proxy here is written with node's https module and a self-signed
// certificate made with openssl at test time; it streams each response chunk
// as it comes (what `proxy_buffering off` gives nginx), speaks HTTP/1.1 to
// mcp-chain with keep-alive, and either passes the client's Host on (nginx
// `proxy_set_header Host $host`, Caddy's default) or rewrites it to the
// upstream's (nginx's default). The SDK client runs in a child process that
// trusts the certificate through NODE_EXTRA_CA_CERTS.
//
// What the Host/Origin checks see through the proxy: a Host passed on names
// the proxy (localhost:PROXY), not mcp-chain's port, so it must be listed in
// listen.allowedHosts; a rewritten Host passes as mcp-chain's own (the proxy
// then is the one to check names); a browser's Origin names the proxy too,
// so it must be listed in listen.allowedOrigins.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';

import { startChain } from './http_lib.mjs';
import { HERE, SKIP_NO_FIXTURE, fixtureServer, tmpPath, waitFor } from './lib.mjs';

const HAVE_OPENSSL = spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;
const SKIP = SKIP_NO_FIXTURE || (!HAVE_OPENSSL && 'openssl is not on PATH (scripts/bootstrap test installs it)');
const CLIENT = path.join(HERE, 'fixtures', 'https-client.mjs');
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tls-raw', version: '1' } } });

/** A self-signed certificate for localhost and 127.0.0.1: {key, cert, certFile}. */
function makeCert() {
  const keyFile = tmpPath(`tls-key-${process.pid}.pem`);
  const certFile = tmpPath(`tls-cert-${process.pid}.pem`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'pipe' });
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}

// hop-by-hop headers: a proxy never forwards these (RFC 9110, 7.6.1)
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** HEADERS without the hop-by-hop ones. */
function endToEnd(headers) {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP.has(k)));
}

/**
 * A TLS-terminating reverse proxy on 127.0.0.1:0 to 127.0.0.1:proxy.upstream
 * (set once mcp-chain listens). HOST: 'pass' keeps the client's Host,
 * 'rewrite' sends the upstream's. Records what it forwarded in proxy.seen,
 * and the X-Accel-Buffering header of each SSE response in proxy.sse.
 */
async function startProxy(tls, host) {
  const proxy = { upstream: 0, seen: [], sse: [] };
  const agent = new http.Agent({ keepAlive: true });   // HTTP/1.1, connections reused
  proxy.server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const headers = { ...endToEnd(req.headers), 'x-forwarded-proto': 'https', 'x-forwarded-for': req.socket.remoteAddress };
    if (host === 'rewrite') headers.host = `127.0.0.1:${proxy.upstream}`;
    proxy.seen.push({ method: req.method, host: headers.host });
    const up = http.request({ host: '127.0.0.1', port: proxy.upstream, method: req.method, path: req.url, headers, agent },
      (ur) => {
        if (ur.headers['content-type'] === 'text/event-stream') proxy.sse.push(ur.headers['x-accel-buffering']);
        res.writeHead(ur.statusCode, endToEnd(ur.headers));
        res.flushHeaders();
        ur.pipe(res);   // each chunk as it comes: no buffering of SSE
        ur.on('aborted', () => res.destroy());   // cut upstream: cut here too, never a clean end
      });
    up.on('error', () => { if (res.headersSent) res.destroy(); else res.writeHead(502).end(); });
    // the client left: the upstream request goes too (mcp-chain then cancels it)
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    req.pipe(up);
  });
  await new Promise((r) => proxy.server.listen(0, '127.0.0.1', r));
  proxy.port = proxy.server.address().port;
  proxy.url = `https://localhost:${proxy.port}/mcp`;
  proxy.close = () => { proxy.server.closeAllConnections(); proxy.server.close(); agent.destroy(); };
  return proxy;
}

/** One https request through PROXY (trusting CA unless told); {status, headers, body}. */
function viaProxy(proxy, { ca, method = 'POST', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: 'localhost', port: proxy.port, path: '/mcp', method, ca, agent: false,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Runs the SDK client (fixtures/https-client.mjs) on URL trusting CAFILE
 * (null: only the system's CAs); its JSON report. */
function sdkClient(url, caFile) {
  const env = { ...process.env, NODE_EXTRA_CA_CERTS: caFile };
  if (!caFile) delete env.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, url], { cwd: HERE, stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '', stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      try {
        resolve({ code, signal, ...JSON.parse(stdout.trim().split('\n').at(-1)) });
      } catch {
        reject(new Error(`https-client: ${code ?? signal}\n${stdout}\n${stderr}`));
      }
    });
  });
}

/**
 * Runs FN({tls, chain, pass, other, rewrite}): mcp-chain behind three
 * proxies, PASS (Host kept, listed in allowedHosts and its origin in
 * allowedOrigins), OTHER (Host kept, not listed) and REWRITE (Host rewritten).
 * Everything is stopped after; mcp-chain must exit 0.
 */
async function withProxies(fn) {
  const tls = makeCert();
  const [pass, other, rewrite] = await Promise.all([startProxy(tls, 'pass'), startProxy(tls, 'pass'),
    startProxy(tls, 'rewrite')]);
  let chain;
  try {
    chain = await startChain({ ...fixtureServer(), scope: 'shared' }, { extra: { listen: {
      allowedHosts: [`localhost:${pass.port}`], allowedOrigins: [`https://localhost:${pass.port}`] } } });
    for (const p of [pass, other, rewrite]) p.upstream = chain.port;
    await fn({ tls, chain, pass, other, rewrite });
  } catch (e) {
    if (chain) e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    for (const p of [pass, other, rewrite]) p.close();
    const r = chain ? await chain.stop() : { code: 0 };
    assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}`);
    if (chain) assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
  }
}

/** Asserts REPORT (of sdkClient) is a complete, clean run. */
function assertCleanRun(report, what) {
  assert.equal(report.code, 0, `${what}: ${JSON.stringify(report)}`);
  assert.match(report.sessionId, /^[0-9a-f]{32}$/);
  assert.ok(report.tools.includes('slow') && report.tools.includes('echo'), `${what}: tools/list`);
  assert.deepEqual(report.progress.map((p) => p.progress), [1, 2, 3], `${what}: progress over SSE`);
  assert.equal(report.result, 'done');
  // streamed, not buffered by the proxy: the first progress comes long before the result
  assert.ok(report.progress[0].at < report.resultAt - 600,
    `${what}: progress at ${report.progress.map((p) => p.at)} ms, result at ${report.resultAt} ms`);
  assert.equal(report.listChanged, true, `${what}: a notification on the GET stream`);
  assert.equal(report.deleted, true, `${what}: DELETE`);
  assert.deepEqual(report.errors, [], `${what}: no transport error`);
}

test('an SDK client over https through a TLS-terminating proxy: initialize, tools/list, a call with progress ' +
  'over SSE, a GET stream, DELETE; Host passed on (in allowedHosts) or rewritten', { timeout: 60_000, skip: SKIP }, async () => {
  await withProxies(async ({ tls, chain, pass, rewrite }) => {
    const viaPass = await sdkClient(pass.url, tls.certFile);
    assertCleanRun(viaPass, 'Host passed on');
    const viaRewrite = await sdkClient(rewrite.url, tls.certFile);
    assertCleanRun(viaRewrite, 'Host rewritten');
    // what reached mcp-chain: every method of the transport, with the Host of each kind of proxy
    assert.deepEqual([...new Set(pass.seen.map((s) => s.method))].sort(), ['DELETE', 'GET', 'POST']);
    assert.ok(pass.seen.every((s) => s.host === `localhost:${pass.port}`));
    assert.ok(rewrite.seen.every((s) => s.host === `127.0.0.1:${chain.port}`));
    // SSE responses tell nginx not to buffer them (X-Accel-Buffering), even where proxy_buffering is on
    assert.ok(pass.sse.length >= 3, `SSE responses seen: ${pass.sse.length}`);
    assert.deepEqual([...new Set(pass.sse)], ['no']);
    await waitFor(() => (chain.stderr.match(/ended \(deleted by the client\)/g) ?? []).length === 2,
      { what: 'both sessions to end' });
    assert.match(chain.stderr, /initialized \(https-client/);
    // the same client that does not trust the certificate gets no further than TLS
    const untrusted = await sdkClient(pass.url, null);
    assert.notEqual(untrusted.code, 0);
    assert.match(`${untrusted.error} ${untrusted.message}`, /self[- ]signed|certificate/i, JSON.stringify(untrusted));
  });
});

test('Host and Origin through the proxy: a Host passed on must be in allowedHosts, a browser Origin in allowedOrigins (403 otherwise)',
  { timeout: 60_000, skip: SKIP }, async () => {
    await withProxies(async ({ tls, pass, other, rewrite }) => {
      const ca = tls.cert;
      const ok = await viaProxy(pass, { ca, headers: { Accept: 'application/json' }, body: INIT });
      assert.equal(ok.status, 200, ok.body);
      // a proxy that passes Host on, whose name is not listed: refused as DNS rebinding would be
      const host = await viaProxy(other, { ca, body: INIT });
      assert.equal(host.status, 403, host.body);
      assert.match(JSON.parse(host.body).error.message, /Host not allowed/);
      // a browser on the proxy's origin: listed, it passes; any other origin is refused
      const listed = await viaProxy(pass, { ca, headers: { Accept: 'application/json', Origin: `https://localhost:${pass.port}` }, body: INIT });
      assert.equal(listed.status, 200, listed.body);
      const evil = await viaProxy(pass, { ca, headers: { Origin: 'https://evil.example' }, body: INIT });
      assert.equal(evil.status, 403);
      assert.match(JSON.parse(evil.body).error.message, /Origin not allowed/);
      // a rewritten Host passes, but a browser's Origin still names the proxy: it must be listed
      const unlisted = await viaProxy(rewrite, { ca, headers: { Origin: `https://localhost:${rewrite.port}` }, body: INIT });
      assert.equal(unlisted.status, 403, unlisted.body);
      const plain = await viaProxy(rewrite, { ca, headers: { Accept: 'application/json' }, body: INIT });
      assert.equal(plain.status, 200, 'a client that sends no Origin (not a browser) passes');
      // and TLS is real: a client that does not trust the certificate is refused by the proxy
      await assert.rejects(viaProxy(pass, { body: INIT }), /self[- ]signed|certificate/i);
    });
  });
