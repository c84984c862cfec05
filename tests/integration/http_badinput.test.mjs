// Bad HTTP input to `mcp-chain --listen` that http_front.test.mjs does not
// cover: malformed requests (a garbage request line, no version, an unknown
// version, a bad Content-Length, bad chunked framing, headers too large) are
// refused and their connection closed while other sessions go on; a POST
// without a JSON Content-Type; unknown methods (405 with Allow); a body over
// maxMessageBytes sent slowly is read and dropped as it streams (413, and
// mcp-chain's memory does not grow by the body's size); a body that stalls and
// a kept-alive connection left idle are closed after connectionTimeoutMs,
// while an open GET stream is not.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';

import { JSON_HEADERS, openSession, openStream, request, withChain } from './http_lib.mjs';
import { SKIP_NO_FIXTURE, fixtureServer, sleep, waitFor } from './lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bad-input', version: '1' } } });

/** Resident memory of PID in kB. */
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

/** Asserts session S still works: a call with progress on its own SSE stream, its GET stream open. */
async function stillWorks(port, s, id) {
  const call = await openStream(port, { method: 'POST', headers: s.h, body: JSON.stringify({ jsonrpc: '2.0', id,
    method: 'tools/call', params: { name: 'slow', arguments: { ms: 100, steps: 2 }, _meta: { progressToken: id } } }) });
  assert.deepEqual(await call.closed, { complete: true });
  const msgs = call.events.filter((e) => e.data).map((e) => JSON.parse(e.data));   // (a priming event has no data)
  assert.deepEqual(msgs.map((m) => m.params?.progress ?? m.id), [1, 2, id], JSON.stringify(msgs));
  assert.equal(s.get.ended, false, 'its GET stream is still open');
}

/**
 * Writes TEXT on a new connection and reads until the server closes it (or
 * WAITMS pass): {out, closed, ms}.
 */
function raw(port, text, waitMs = 5000) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const t0 = Date.now();
    let out = '';
    const timer = setTimeout(() => { sock.destroy(); resolve({ out, closed: false, ms: Date.now() - t0 }); }, waitMs);
    sock.on('data', (c) => { out += c.toString('latin1'); });
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve({ out, closed: true, ms: Date.now() - t0 }); });
    sock.write(text);
  });
}

test('malformed requests are refused and their connection closed; other sessions are unaffected', T, async () => {
  await withChain({ ...fixtureServer(), scope: 'shared' }, {}, async (chain) => {
    const port = chain.port;
    const s = await openSession(port, 'bad-input');
    const host = `Host: 127.0.0.1:${port}\r\n`;
    const post = `POST /mcp HTTP/1.1\r\n${host}Content-Type: application/json\r\n`;
    const cases = [
      ['a garbage request line', 'GARBAGE\r\n\r\n', /^HTTP\/1\.1 400 /],
      ['a request line without a version', 'POST /mcp\r\n\r\n', /^HTTP\/1\.1 400 /],
      ['an unknown HTTP version', `POST /mcp HTTP/9.9\r\n${host}\r\n`, /^HTTP\/1\.1 505 /],
      ['a Content-Length that is not a number', `${post}Content-Length: abc\r\n\r\n{}`, /^HTTP\/1\.1 400 /],
      ['bad chunked framing', `${post}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, /^HTTP\/1\.1 400 /],
      ['headers too large', `GET /mcp HTTP/1.1\r\n${host}X-Big: ${'a'.repeat(70_000)}\r\n\r\n`, /^HTTP\/1\.1 431 /],
    ];
    for (const [what, text, want] of cases) {
      const r = await raw(port, text);
      assert.match(r.out, want, `${what}: ${JSON.stringify(r.out.slice(0, 120))}`);
      assert.ok(r.closed && r.ms < 3000, `${what}: the connection is closed (after ${r.ms} ms)`);
    }
    await stillWorks(port, s, 'after-garbage');
    const health = await request(port, { method: 'GET', path: '/healthz' });
    assert.equal(health.status, 200);
    s.get.close();
  });
});

test('Content-Type and method: no Content-Type 415, a JSON type with parameters passes; unknown methods 405 with Allow', T, async () => {
  await withChain({ ...fixtureServer(), scope: 'shared' }, {}, async (chain) => {
    const port = chain.port;
    const none = await request(port, { headers: { Accept: 'application/json' }, body: INIT });
    assert.equal(none.status, 415, none.body);
    const withParams = await request(port, { headers: { ...JSON_HEADERS, 'Content-Type': 'application/json; charset=utf-8',
      Accept: 'application/json' }, body: INIT });
    assert.equal(withParams.status, 200, withParams.body);
    for (const method of ['PATCH', 'BREW']) {
      const r = await request(port, { method, headers: { 'Mcp-Session-Id': withParams.headers['mcp-session-id'] } });
      assert.equal(r.status, 405, `${method}: ${r.status}`);
      assert.equal(r.headers.allow, 'GET, POST, DELETE', method);
      assert.equal(JSON.parse(r.body).error.code, -32000);
    }
  });
});

test('a body over maxMessageBytes is refused 413 before it is read (Content-Length) or once its chunks pass the limit (chunked); the connection closes; memory does not grow',
  T, async () => {
    const MAX = 1 << 20;
    const CHUNK = 1 << 20;
    // ASan keeps freed memory in quarantine: off, so that RSS shows what is held
    const env = { ASAN_OPTIONS: 'quarantine_size_mb=0:detect_leaks=1' };
    await withChain({ ...fixtureServer(), scope: 'shared' }, { extra: { maxMessageBytes: MAX }, env }, async (chain) => {
      const port = chain.port;
      const s = await openSession(port, 'bad-input');
      const received = async () => Number(/^mcp_chain_http_received_bytes_total (\d+)$/m
        .exec((await request(port, { method: 'GET', path: '/metrics' })).body)[1]);
      for (const [framing, total] of [['Content-Length', 64 * CHUNK], ['chunked', 32 * CHUNK]]) {
        const before = rssKb(chain.proc.pid);
        const bytesBefore = await received();
        let peak = before;
        const headers = { ...s.h, Accept: 'application/json' };
        if (framing === 'Content-Length') headers['Content-Length'] = String(total);
        let answered = false;
        const answer = new Promise((resolve, reject) => {
          const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp', headers, agent: false }, (res) => {
            answered = true;
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c) => { text += c; });
            res.on('end', () => resolve({ status: res.statusCode, body: text, close: res.headers.connection }));
          });
          // writing on after the answer meets the closed connection: not an error of the test
          req.on('error', (e) => { if (!answered) reject(e); });
          (async () => {
            const piece = Buffer.alloc(CHUNK, 'x');
            req.write('{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"pad":"');
            for (let sent = 0; sent < total && !answered; sent += CHUNK) {
              if (!req.write(piece)) await Promise.race([new Promise((r) => req.once('drain', r)), sleep(200)]);
              await sleep(10);   // slowly: the answer comes while the body is still streaming
              peak = Math.max(peak, rssKb(chain.proc.pid));
            }
            if (!answered) req.end('"}}}');
          })().catch(() => {});
        });
        const r = await answer;
        peak = Math.max(peak, rssKb(chain.proc.pid));
        assert.equal(r.status, 413, `${framing}: ${r.body.slice(0, 200)}`);
        assert.match(JSON.parse(r.body).error.message, /maxMessageBytes \(1048576\)/);
        assert.equal(r.close, 'close', `${framing}: the connection closes after the 413`);
        const read = await received() - bytesBefore;
        assert.ok(read <= 2 * MAX, `${framing}: mcp-chain read ${read} bytes of a ${total >> 20} MiB body`);
        const grew = peak - before;
        console.log(`${framing}: a ${total >> 20} MiB body over a 1 MiB limit: RSS ${before} kB, peak ${peak} kB (+${grew} kB)`);
        assert.ok(grew < 16 * 1024, `${framing}: memory grew by ${grew} kB while ${total >> 20} MiB streamed past`);
      }
      await stillWorks(port, s, 'after-413');
      s.get.close();
    });
  });

test('timeouts: a stalled body and an idle kept-alive connection are closed after connectionTimeoutMs; an open GET stream is not',
  T, async () => {
    await withChain({ ...fixtureServer(), scope: 'shared' }, { extra: { listen: { connectionTimeoutMs: 1000 } } }, async (chain) => {
      const port = chain.port;
      const s = await openSession(port, 'bad-input');
      // headers complete, 100 bytes announced, 5 sent, then nothing
      const stalled = await raw(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\nMcp-Session-Id: ${s.sid}\r\nContent-Length: 100\r\n\r\n{"jso`, 6000);
      assert.ok(stalled.closed && stalled.ms >= 900 && stalled.ms < 4000, `a stalled body: closed after ${stalled.ms} ms`);
      assert.equal(stalled.out, '', 'nothing is answered to half a request');
      // a request answered on a kept-alive connection, which is then left idle
      const ping = JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'ping' });
      const idle = await raw(port, `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\nMcp-Session-Id: ${s.sid}\r\nContent-Length: ${ping.length}\r\n\r\n${ping}`, 6000);
      assert.match(idle.out, /^HTTP\/1\.1 200 OK\r\n/);
      assert.doesNotMatch(idle.out, /Connection: close/i, 'kept alive');
      assert.match(idle.out, /"id":"p","result":\{\}/);
      assert.ok(idle.closed && idle.ms >= 900 && idle.ms < 4000, `an idle connection: closed after ${idle.ms} ms`);
      // the GET stream has been quiet for longer than the timeout all along
      assert.equal(s.get.ended, false, 'an open GET stream does not time out');
      await stillWorks(port, s, 'after-timeouts');
      s.get.close();
      await waitFor(() => s.get.ended, { what: 'the GET stream to close' });
    });
  });
