// The HTTP front under hostile clients: the contract of the security fixes.
//
// A. HTTP/1.1 framing to the letter: an ambiguous or malformed request
//    (Content-Length with Transfer-Encoding, two differing Content-Lengths,
//    unknown or badly placed transfer codings, a Content-Length that is not
//    plain decimal, a NUL in a field value, Host missing or doubled, a
//    one-token request line, bare LF, obsolete line folding, HTTP/2.0 on the
//    HTTP/1.1 port) is answered with its status and `Connection: close`, and
//    the connection is closed: the valid request pipelined behind it on the
//    same connection is never answered (no smuggling). The accepted edges
//    (`chunked ` with a trailing space, two equal Content-Lengths) are served.
// B. The front always accepts again: rounds of maxConnections + 32
//    connections opened and closed, then /healthz answers within 1 s.
// C. Slowloris: a head sent one byte at a time must be complete within
//    connectionTimeoutMs.
// D. Memory is bounded by the server: a body announced over maxMessageBytes
//    (Content-Length or a chunk size) is refused with 413 before it is sent;
//    bodies being received share listen.maxBodyBufferBytes (503 past it);
//    twenty huge requests at once do not grow the process's peak RSS.
// E. Expect: 100-continue is answered only for a request that will be read;
//    any other expectation is 417.
// F. Sessions are bounded per client address, per bearer principal and in
//    all: at a bound, the idlest session with nothing open is ended (its id
//    then gets 404); when none can be, 503 with a JSON-RPC error. The same
//    for maxScopedSessions (sessions with backends of their own).
//
// Raw TCP (node:net) throughout for the framing: node's http client would
// normalize these requests. Every wait is bounded.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';

import { startChain, withCheckedChain } from './http_lib.mjs';
import { FIXTURE, SKIP_NO_FIXTURE, sleep, tmpPath } from './lib.mjs';

const T = { timeout: 30_000, skip: SKIP_NO_FIXTURE };
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'http-security', version: '1' } } });
const PING = JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'ping' });
const JSON_ONLY = { 'Content-Type': 'application/json', Accept: 'application/json' };
const BIG = 146800640;   // 140 MiB: above the default maxMessageBytes (128 MiB)
const MiB = 1 << 20;

// ---------------------------------------------------------------------------
// configurations and chains

let ncfg = 0;
/** A configuration with the fixture as a shared backend, plus EXTRA (top-level keys). */
function sharedCfg(extra = {}) {
  return { mcpServers: { fx: { command: FIXTURE, args: [], scope: 'shared' } }, ...extra };
}

/**
 * Runs FN with a chain on configuration CFG (an object); then SIGTERM: it
 * must exit 0 and leave no process behind (withCheckedChain).
 */
function withCfg(cfg, fn, { env } = {}) {
  const file = tmpPath(`security-${process.pid}-${++ncfg}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return withCheckedChain(null, { config: file, env }, fn);
}

// ---------------------------------------------------------------------------
// raw HTTP/1.1 on a socket

/**
 * The HTTP/1.x responses in BUF, in order: {responses: [{status, headers
 * (lower-cased name -> [values]), body}], partial (the last one is cut),
 * garbage (bytes that are no response)}. A response with neither length nor
 * chunked framing runs to the end of BUF (to the close).
 */
function parseResponses(buf) {
  const responses = [];
  let i = 0;
  const cut = () => ({ responses, partial: true, garbage: false });
  while (i < buf.length) {
    const end = buf.indexOf('\r\n\r\n', i, 'latin1');
    if (end < 0) {
      if (/^HTTP\/\d\.\d/.test(buf.subarray(i, i + 8).toString('latin1')) || buf.length - i < 8) return cut();
      return { responses, partial: false, garbage: true };
    }
    const [statusLine, ...lines] = buf.subarray(i, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/\d\.\d (\d{3})(?: .*)?$/.exec(statusLine);
    if (!m) return { responses, partial: false, garbage: true };
    const status = Number(m[1]);
    const headers = {};
    for (const l of lines) {
      const colon = l.indexOf(':');
      (headers[l.slice(0, colon).trim().toLowerCase()] ??= []).push(l.slice(colon + 1).trim());
    }
    let j = end + 4;
    let body = Buffer.alloc(0);
    if ((status >= 100 && status < 200) || status === 204 || status === 304) {
      /* no body */
    } else if (/chunked/i.test((headers['transfer-encoding'] ?? []).join(','))) {
      const pieces = [];
      for (;;) {
        const le = buf.indexOf('\r\n', j, 'latin1');
        if (le < 0) return cut();
        const size = parseInt(buf.subarray(j, le).toString('latin1').split(';')[0], 16);
        if (!(size >= 0)) return { responses, partial: false, garbage: true };
        j = le + 2;
        if (size === 0) {   // trailers, then the empty line
          const te = buf.indexOf('\r\n\r\n', j - 2, 'latin1');
          if (te < 0) return cut();
          j = te + 4;
          break;
        }
        if (buf.length < j + size + 2) return cut();
        pieces.push(buf.subarray(j, j + size));
        j += size + 2;
      }
      body = Buffer.concat(pieces);
    } else if (headers['content-length']) {
      const n = Number(headers['content-length'][0]);
      if (buf.length < j + n) return cut();
      body = buf.subarray(j, j + n);
      j += n;
    } else {
      body = buf.subarray(j);
      j = buf.length;
    }
    responses.push({ status, statusLine, headers, body: body.toString('utf8') });
    i = j;
  }
  return { responses, partial: false, garbage: false };
}

/** A raw connection to 127.0.0.1:PORT that records what comes and when it closes. */
class RawConn {
  constructor(port) {
    this.t0 = Date.now();
    this.parts = [];
    this.closed = false;     // by the peer (or an error), before our own destroy
    this.closedAt = null;
    this.firstAt = null;
    this.error = null;
    this.waiters = new Set();
    this.sock = net.connect(port, '127.0.0.1');
    this.sock.on('connect', () => this.wake());
    this.sock.on('data', (c) => { this.parts.push(c); this.firstAt ??= Date.now(); this.wake(); });
    this.sock.on('error', (e) => { this.error = e.code; });
    this.sock.on('close', () => {
      if (!this.mine) { this.closed = true; this.closedAt = Date.now(); }
      this.wake();
    });
  }

  wake() { for (const w of [...this.waiters]) w(); }

  get buf() { return Buffer.concat(this.parts); }
  get text() { return this.buf.toString('latin1'); }
  parsed() { return parseResponses(this.buf); }
  /** The final (non-1xx) responses so far. */
  finals() { return this.parsed().responses.filter((r) => r.status >= 200); }

  write(data) {
    if (this.sock.destroyed || this.closed) return true;
    try { return this.sock.write(data); } catch { return true; }
  }

  /** Writes DATA; waits for 'drain' at most MS when the socket is full. */
  async writeBounded(data, ms = 500) {
    if (this.write(data)) return;
    await new Promise((r) => {
      const done = () => { clearTimeout(tm); this.sock.off('drain', done); this.sock.off('close', done); r(); };
      const tm = setTimeout(done, ms);
      this.sock.once('drain', done);
      this.sock.once('close', done);
    });
  }

  /** Resolves after MS or at the next data or close. */
  tick(ms) {
    return new Promise((r) => {
      const w = () => { clearTimeout(tm); this.waiters.delete(w); r(); };
      const tm = setTimeout(w, ms);
      this.waiters.add(w);
    });
  }

  /** Waits until PRED(this) holds, the peer closes, or MS pass; PRED's value. */
  async until(pred, ms) {
    const end = Date.now() + ms;
    while (!pred(this) && !this.closed && Date.now() < end) await this.tick(end - Date.now());
    return pred(this);
  }

  /** Waits until the peer closes or MS pass: whether it closed. */
  async closedWithin(ms) {
    await this.until(() => this.closed, ms);
    return this.closed;
  }

  destroy() { this.mine = !this.closed; this.sock.destroy(); }
}

/**
 * Sends DATA on a new connection and reads until the server closes it or
 * WAITMS pass: {buf, text, parsed, closed, ms (to the close), firstMs}.
 */
async function exchange(port, data, waitMs = 3000) {
  const c = new RawConn(port);
  c.write(data);
  const closed = await c.closedWithin(waitMs);
  const out = { buf: c.buf, text: c.text, parsed: c.parsed(), closed, ms: (c.closedAt ?? Date.now()) - c.t0,
    firstMs: c.firstAt && c.firstAt - c.t0 };
  c.destroy();
  return out;
}

/** Printable start of a raw exchange for messages. */
const show = (text, n = 300) => JSON.stringify(text.length > n ? `${text.slice(0, n)}…` : text);

/**
 * Asserts R (exchange's) is exactly one response of STATUS carrying
 * `Connection: close`, after which the server closed the connection.
 */
function assertRefusedAndClosed(r, status, what) {
  const { responses, partial, garbage } = r.parsed;
  assert.ok(responses.length >= 1, `${what}: a ${status} answer, got ${show(r.text)} (closed: ${r.closed})`);
  assert.equal(responses[0].status, status, `${what}: ${show(r.text)}`);
  assert.ok((responses[0].headers.connection ?? []).some((v) => /(^|,)\s*close\s*(,|$)/i.test(v)),
    `${what}: the answer says Connection: close: ${show(r.text)}`);
  assert.ok(r.closed, `${what}: the server closed the connection after its answer (waited ${r.ms} ms)`);
  assert.equal(responses.length, 1, `${what}: one answer only, nothing for what followed it: ${show(r.text, 800)}`);
  assert.ok(!partial && !garbage, `${what}: nothing after the answer: ${show(r.text, 800)}`);
}

/** A request with node's http, bounded by MS: {status, headers, body}. */
function httpReq(port, { method = 'POST', path = '/mcp', headers = {}, body } = {}, ms = 5000) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => { clearTimeout(tm); resolve({ status: res.statusCode, headers: res.headers, body: text }); });
      res.on('error', (e) => { clearTimeout(tm); reject(e); });
    });
    const tm = setTimeout(() => req.destroy(new Error(`no answer to ${method} ${path} within ${ms} ms`)), ms);
    req.on('error', (e) => { clearTimeout(tm); reject(e); });
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** GET /healthz on a new connection: its status, within MS. */
async function health(port, ms = 1000) {
  const c = new RawConn(port);
  c.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  await c.until(() => c.finals().length > 0, ms);
  const [r] = c.finals();
  const t = Date.now() - c.t0;
  c.destroy();
  return { status: r?.status ?? null, ms: t };
}

/** A raw initialize (+ notifications/initialized) with HEADERS added: {r, sid}. */
async function init(port, headers = {}) {
  const r = await httpReq(port, { headers: { ...JSON_ONLY, ...headers }, body: INIT });
  const sid = r.headers['mcp-session-id'];
  if (r.status === 200 && sid) {
    const n = await httpReq(port, { headers: { ...JSON_ONLY, ...headers, 'Mcp-Session-Id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    assert.equal(n.status, 202, n.body);
  }
  return { r, sid };
}

/** A ping in session SID (with HEADERS added): its HTTP status. */
async function ping(port, sid, headers = {}) {
  const r = await httpReq(port, { headers: { ...JSON_ONLY, ...headers, 'Mcp-Session-Id': sid }, body: PING });
  if (r.status === 200) assert.deepEqual(JSON.parse(r.body).result, {}, r.body);
  return r.status;
}

/** Opens session SID's GET stream on a raw connection (left open): the connection, its head received. */
async function openGet(port, sid) {
  const c = new RawConn(port);
  c.write(`GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sid}\r\n\r\n`);
  await c.until(() => c.text.includes('\r\n\r\n'), 3000);
  assert.match(c.text, /^HTTP\/1\.1 200 /, `the GET stream opens: ${show(c.text)}`);
  return c;
}

/** `LEN-in-hex CRLF DATA CRLF 0 CRLF CRLF`: DATA as one chunk and the end. */
const chunked = (data) => `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n0\r\n\r\n`;

/** Peak resident memory of PID in kB. */
const hwmKb = (pid) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

// ---------------------------------------------------------------------------
// A. framing

describe('A. HTTP/1.1 framing to the letter', { skip: SKIP_NO_FIXTURE }, () => {
  let chain;
  let sid;
  before(async () => {
    const file = tmpPath(`security-${process.pid}-${++ncfg}.json`);
    writeFileSync(file, JSON.stringify(sharedCfg()));
    chain = await startChain(null, { config: file });
    const s = await init(chain.port);
    assert.equal(s.r.status, 200, s.r.body);
    sid = s.sid;
  });
  after(async () => {
    if (!chain) return;
    const r = await chain.stop();
    assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}\n${chain.stderr.slice(-2000)}`);
    assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
  });

  // Each case: [what, status, (port, sid) => the bytes of the bad request].
  // A lenient server would answer most of them 200 (an initialize, a ping in
  // the session, /healthz); each is followed on its connection by a valid
  // GET /healthz that must never be answered.
  const host = (p) => `Host: 127.0.0.1:${p}\r\n`;
  const post = (p, fields, body) => `POST /mcp HTTP/1.1\r\n${host(p)}Content-Type: application/json\r\n` +
    `Accept: application/json\r\n${fields}\r\n${body}`;
  const te = (value) => (p) => post(p, `Transfer-Encoding: ${value}\r\n`, chunked(INIT));
  const cl = (value) => (p) => post(p, `Content-Length: ${value}\r\n`, INIT);
  let nping = 0;   // each case's ping its own id: the cases run at once in one session
  const inSession = (field) => (p, s) => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: `framing-${++nping}`, method: 'ping' });
    return `POST /mcp HTTP/1.1\r\n${host(p)}Content-Type: application/json\r\n` +
      `Accept: application/json\r\nMcp-Session-Id: ${s}\r\n${field}Content-Length: ${body.length}\r\n\r\n${body}`;
  };
  const cases = [
    ['Content-Length: 5 with Transfer-Encoding: chunked', 400,
      (p) => post(p, 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', chunked(INIT))],
    ['two Content-Length headers with different values', 400,
      (p) => post(p, `Content-Length: ${INIT.length}\r\nContent-Length: ${INIT.length + 1}\r\n`, `${INIT} `)],
    ['"Transfer-Encoding :" (a space before the colon)', 400,
      (p) => post(p, 'Transfer-Encoding : chunked\r\n', chunked(INIT))],
    ['Transfer-Encoding: chunked, identity', 400, te('chunked, identity')],
    ['Transfer-Encoding: xchunked', 400, te('xchunked')],
    ['Transfer-Encoding: chunked;x=1', 400, te('chunked;x=1')],
    ['Transfer-Encoding: gzip, chunked', 501, te('gzip, chunked')],
    ['Transfer-Encoding: identity, chunked', 501, te('identity, chunked')],
    ['two Transfer-Encoding header lines', 400,
      (p) => post(p, 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', chunked(INIT))],
    ['Content-Length: 18446744073709551615', 400, cl('18446744073709551615')],
    ['Content-Length: 0x10', 400, cl('0x10')],
    ['Content-Length: +5', 400, cl('+5')],
    ['Content-Length: 1e3', 400, cl('1e3')],
    ['Content-Length: 5 5', 400, cl('5 5')],
    ['a NUL in Mcp-Session-Id', 400, (p, s) => inSession('')(p, `${s}\0junk`)],
    ['Authorization: Bearer tok\\0junk', 400, inSession('Authorization: Bearer tok\0junk\r\n')],
    ['Host: 127.0.0.1:PORT\\0.evil.com', 400,
      (p) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${p}\0.evil.com\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\nContent-Length: ${INIT.length}\r\n\r\n${INIT}`],
    ['two Host headers', 400,
      (p) => `POST /mcp HTTP/1.1\r\n${host(p)}Host: evil.example\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\nContent-Length: ${INIT.length}\r\n\r\n${INIT}`],
    ['no Host in HTTP/1.1', 400, () => 'GET /healthz HTTP/1.1\r\nUser-Agent: t\r\n\r\n'],
    ['a one-token request line', 400, () => 'GET\r\n\r\n'],
    ['bare LF line endings', 400, (p) => `GET /healthz HTTP/1.1\nHost: 127.0.0.1:${p}\n\n`],
    ['obsolete line folding', 400, (p) => `GET /healthz HTTP/1.1\r\n${host(p)}X-Folded: a\r\n b\r\n\r\n`],
    ['HTTP/2.0 as the version', 505, (p) => `GET /healthz HTTP/2.0\r\n${host(p)}\r\n`],
  ];

  describe('refused with Connection: close, the connection closed, nothing pipelined behind answered',
    { concurrency: true }, () => {
      for (const [what, status, make] of cases) {
        test(`${what} -> ${status}`, { timeout: 10_000 }, async () => {
          const p = chain.port;
          const bytes = Buffer.from(make(p, sid) + `GET /healthz HTTP/1.1\r\n${host(p)}\r\n`, 'latin1');
          assertRefusedAndClosed(await exchange(p, bytes, 3000), status, what);
        });
      }
    });

  test('accepted: "Transfer-Encoding: chunked " (a trailing space) with a chunked initialize is answered', T, async () => {
    const p = chain.port;
    const c = new RawConn(p);
    c.write(Buffer.from(post(p, 'Transfer-Encoding: chunked \r\n', chunked(INIT)), 'latin1'));
    await c.until(() => c.finals().length > 0, 3000);
    const [r] = c.finals();
    c.destroy();
    assert.equal(r?.status, 200, show(c.text));
    assert.equal(JSON.parse(r.body).result.protocolVersion, '2025-06-18', r.body);
  });

  test('accepted: two equal Content-Length headers count as one', T, async () => {
    const p = chain.port;
    const c = new RawConn(p);
    c.write(post(p, `Content-Length: ${INIT.length}\r\nContent-Length: ${INIT.length}\r\n`, INIT));
    await c.until(() => c.finals().length > 0, 3000);
    const [r] = c.finals();
    c.destroy();
    assert.equal(r?.status, 200, show(c.text));
    assert.equal(JSON.parse(r.body).result.protocolVersion, '2025-06-18', r.body);
  });

  test('after all that, /healthz and the session still answer', T, async () => {
    assert.equal((await health(chain.port)).status, 200);
    assert.equal(await ping(chain.port, sid), 200);
  });
});

// ---------------------------------------------------------------------------
// B. accepting again

test('B. maxConnections 16: ten rounds of 48 connections opened and closed; /healthz answers within 1 s after each',
  T, async () => {
    await withCfg(sharedCfg({ listen: { maxConnections: 16 } }), async (chain) => {
      const port = chain.port;
      for (let round = 0; round < 10; round++) {
        const conns = Array.from({ length: 48 }, (_, i) => {
          const c = new RawConn(port);
          if (i % 2) c.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Partial: `);   // a partial head
          return c;
        });
        await Promise.all(conns.map((c) => c.until((x) => x.sock.readyState === 'open', 1000)));
        await sleep(100);
        let probe;
        if (round === 0 || round === 9) {
          // one more while they are open: a 503 now, or it waits and is served once they close
          probe = new RawConn(port);
          probe.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
          await probe.until(() => probe.finals().length > 0, 1000);
          const [r] = probe.finals();
          // 503, or no answer yet (it waits); 200 too if room was made by closing an idle connection
          if (r) assert.ok([200, 503].includes(r.status), `round ${round}: with 48 open, one more: ${show(probe.text)}`);
        }
        for (const [i, c] of conns.entries()) {
          const { responses } = c.parsed();   // none sent a whole request: a 503 at most (or closed as idle)
          assert.ok(responses.every((r) => r.status === 503), `round ${round}, connection ${i}: ${show(c.text)}`);
          // even rounds: a plain close each; odd rounds: a close, a half-close (FIN) or a reset (RST)
          const how = round % 2 === 0 ? 0 : i % 3;
          if (how === 0) c.destroy();
          else if (how === 1) c.sock.end();
          else c.sock.resetAndDestroy();
        }
        if (probe) {
          if (probe.finals().length === 0) {
            await probe.until(() => probe.finals().length > 0, 1000);
            assert.ok([200, 503].includes(probe.finals()[0]?.status),
              `round ${round}: the connection that waited is answered within 1 s once the others closed: ${show(probe.text)}`);
          }
          probe.destroy();
        }
        const h = await health(port, 1000);
        for (const c of conns) c.destroy();
        assert.equal(h.status, 200, `round ${round}: /healthz after the connections closed (${h.ms} ms)`);
      }
    });
  });

// ---------------------------------------------------------------------------
// C. slowloris

test('C. connectionTimeoutMs 2000: a head sent one byte every 300 ms is cut within ~3 s; /healthz answers meanwhile',
  T, async () => {
    await withCfg(sharedCfg({ listen: { connectionTimeoutMs: 2000 } }), async (chain) => {
      const port = chain.port;
      const head = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: slowloris\r\n\r\n`;
      const slow = new RawConn(port);
      await slow.until((x) => x.sock.readyState === 'open', 1000);
      const t0 = Date.now();
      const healths = [];
      (async () => {
        for (let i = 0; i < head.length && !slow.closed && !slow.sock.destroyed; i++) {
          slow.write(head[i]);
          await sleep(300);
        }
      })();
      while (!slow.closed && Date.now() - t0 < 5000) {
        healths.push(await health(port, 1000));
        await slow.tick(400);
      }
      const ms = (slow.closedAt ?? Date.now()) - t0;
      const out = slow.text;
      slow.destroy();
      assert.ok(slow.closed, `the slow head is still open after ${ms} ms`);
      assert.ok(ms >= 1500 && ms <= 3500, `closed ${ms} ms after its first byte (connectionTimeoutMs 2000)`);
      assert.match(out, /^$|^HTTP\/1\.1 408 /, `nothing, or a 408: ${show(out)}`);
      assert.ok(healths.length >= 2, 'health was asked meanwhile');
      assert.deepEqual(healths.map((h) => h.status), healths.map(() => 200),
        `/healthz answered meanwhile: ${JSON.stringify(healths)}`);
    });
  });

// ---------------------------------------------------------------------------
// D. memory bounded by the server

describe('D. memory bounded by the server', { skip: SKIP_NO_FIXTURE }, () => {
  test('a Content-Length over maxMessageBytes: 413 on the head alone, the connection closed', T, async () => {
    await withCfg(sharedCfg(), async (chain) => {
      const port = chain.port;
      const c = new RawConn(port);
      c.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\nContent-Length: ${BIG}\r\n\r\n`);
      await c.until(() => c.finals().length > 0, 2000);
      const answered = Date.now() - c.t0;
      const closed = await c.closedWithin(1500);
      c.destroy();
      assert.equal(c.finals()[0]?.status, 413, `within 2 s of the head (${answered} ms): ${show(c.text)}`);
      assert.ok(closed, 'the connection is closed after the 413');
      assert.equal((await health(port)).status, 200);
    });
  });

  test('a chunked body whose first chunk size is FFFFFFFFFF: 413 at once, the connection closed', T, async () => {
    await withCfg(sharedCfg(), async (chain) => {
      const port = chain.port;
      const c = new RawConn(port);
      c.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
        'Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFF\r\n{"jsonrpc":"2.0","id":1,');
      await c.until(() => c.finals().length > 0, 2000);
      const closed = await c.closedWithin(1500);
      c.destroy();
      assert.equal(c.finals()[0]?.status, 413, show(c.text));
      assert.ok(closed, 'the connection is closed after the 413');
      assert.equal((await health(port)).status, 200);
    });
  });

  test('maxBodyBufferBytes 8 MiB: three chunked bodies of 3 MiB being received at once: one gets 503 and is closed',
    T, async () => {
      await withCfg(sharedCfg({ maxMessageBytes: 4 * MiB, listen: { maxBodyBufferBytes: 8 * MiB } }), async (chain) => {
        const port = chain.port;
        const { sid } = await init(port);
        assert.ok(sid);
        const conns = [0, 1, 2].map((i) => {
          const c = new RawConn(port);
          const start = `{"jsonrpc":"2.0","id":"big-${i}","method":"tools/call","params":{"name":"echo","arguments":{"pad":"`;
          c.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
            `Accept: application/json\r\nMcp-Session-Id: ${sid}\r\nTransfer-Encoding: chunked\r\n\r\n` +
            `${start.length.toString(16)}\r\n${start}\r\n`);
          return c;
        });
        const piece = Buffer.concat([Buffer.from(`${(256 * 1024).toString(16)}\r\n`), Buffer.alloc(256 * 1024, 'x'),
          Buffer.from('\r\n')]);
        try {
          for (let k = 0; k < 12; k++) {   // 12 x 256 KiB = 3 MiB each, interleaved; never the last chunk
            for (const c of conns) await c.writeBounded(piece, 300);
            await sleep(10);
          }
          const refused = () => conns.filter((c) => c.finals().some((r) => r.status === 503));
          await conns[0].until(() => refused().length > 0, 3000);
          for (const c of refused()) await c.closedWithin(1500);
          const statuses = conns.map((c) => c.finals().map((r) => r.status));
          assert.ok(refused().length >= 1, `one of three 3 MiB bodies past an 8 MiB budget gets 503: ${JSON.stringify(statuses)}`);
          for (const c of refused()) assert.ok(c.closed, 'a 503 body\'s connection is closed');
          assert.ok(statuses.flat().every((s) => s === 503), `nothing else is answered: ${JSON.stringify(statuses)}`);
        } finally {
          for (const c of conns) c.destroy();
        }
        assert.equal((await health(port)).status, 200);
        assert.equal(await ping(port, sid), 200);
      });
    });

  test('ten 140 MiB Content-Length POSTs and ten chunked with huge chunk sizes at once: all 413; peak RSS grows < 100 MB',
    T, async () => {
      // ASan keeps freed memory in quarantine: off, so that RSS shows what is held
      const env = { ASAN_OPTIONS: 'quarantine_size_mb=0:detect_leaks=1' };
      await withCfg(sharedCfg(), async (chain) => {
        const port = chain.port;
        const { sid } = await init(port);
        assert.ok(sid);
        assert.equal(await ping(port, sid), 200);
        const before = hwmKb(chain.proc.pid);
        const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
          `Accept: application/json\r\nMcp-Session-Id: ${sid}\r\n`;
        const sizes = ['8C00000', '8C00001', '9000000', 'A000000', 'FFFFFFF', '10000000', '7FFFFFFF', 'FFFFFFFF',
          'FFFFFFFFF', 'FFFFFFFFFF'];
        const conns = [
          ...Array.from({ length: 10 }, () => [`${head}Content-Length: ${BIG}\r\n\r\n`]),
          ...sizes.map((s) => [`${head}Transfer-Encoding: chunked\r\n\r\n${s}\r\n`]),
        ].map(([start]) => { const c = new RawConn(port); c.write(start); return c; });
        const piece = Buffer.alloc(MiB, 'x');
        try {
          // each waits a moment for an early answer (as a client does), then streams up to
          // 8 MiB of its body while it is not answered: a server that held bodies would grow.
          // (Writing on past the answer would make node drop it: a write that meets the
          // server's reset destroys the socket before what came is read.)
          const answered = (c) => c.closed || c.finals().length > 0;
          await Promise.all(conns.map(async (c) => {
            await c.until(answered, 300);
            for (let k = 0; k < 8 && !answered(c); k++) {
              await c.writeBounded(piece, 200);
              await c.until(answered, 10);
            }
          }));
          await Promise.all(conns.map((c) => c.until(() => c.finals().length > 0, 3000)));
          const statuses = conns.map((c) => c.finals()[0]?.status ?? null);
          assert.deepEqual(statuses, conns.map(() => 413), `every one is refused 413: ${JSON.stringify(statuses)}`);
        } finally {
          for (const c of conns) c.destroy();
        }
        const grew = hwmKb(chain.proc.pid) - before;
        console.log(`twenty huge requests: peak RSS ${before} kB before, +${grew} kB`);
        assert.ok(grew < 100 * 1024, `peak RSS grew by ${grew} kB`);
        assert.equal((await health(port)).status, 200);
      }, { env });
    });
});

// ---------------------------------------------------------------------------
// E. Expect: 100-continue

describe('E. Expect', { skip: SKIP_NO_FIXTURE }, () => {
  let chain;
  before(async () => {
    const file = tmpPath(`security-${process.pid}-${++ncfg}.json`);
    writeFileSync(file, JSON.stringify(sharedCfg()));
    chain = await startChain(null, { config: file });
  });
  after(async () => {
    if (!chain) return;
    const r = await chain.stop();
    assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}\n${chain.stderr.slice(-2000)}`);
  });

  const head = (p, { hostValue = `127.0.0.1:${p}`, type = 'application/json', length = INIT.length, expect = '100-continue' } = {}) =>
    `POST /mcp HTTP/1.1\r\nHost: ${hostValue}\r\nContent-Type: ${type}\r\nAccept: application/json\r\n` +
    `Content-Length: ${length}\r\nExpect: ${expect}\r\n\r\n`;

  for (const [what, opts, status] of [
    ['a Host not allowed', { hostValue: 'evil.example' }, 403],
    ['a Content-Length over maxMessageBytes', { length: BIG }, 413],
    ['Content-Type: text/plain', { type: 'text/plain' }, 415],
  ]) {
    test(`Expect: 100-continue with ${what}: ${status} on the head, never 100 Continue`, T, async () => {
      const c = new RawConn(chain.port);
      c.write(head(chain.port, opts));
      await c.until(() => c.parsed().responses.length > 0, 2000);
      await sleep(50);
      const { responses } = c.parsed();
      c.destroy();
      assert.ok(responses.length > 0, `an answer to the head alone within 2 s: ${show(c.text)}`);
      assert.ok(!/HTTP\/1\.1 100/.test(c.text), `no 100 Continue: ${show(c.text)}`);
      assert.equal(responses[0].status, status, show(c.text));
    });
  }

  test('Expect: 100-continue on a valid initialize: 100 Continue, then, after the body, its answer', T, async () => {
    const c = new RawConn(chain.port);
    c.write(head(chain.port));
    await c.until(() => c.parsed().responses.length > 0, 2000);
    const first = c.parsed().responses[0];
    assert.equal(first?.status, 100, `100 Continue before the body: ${show(c.text)}`);
    assert.equal(c.finals().length, 0, 'nothing final before the body');
    c.write(INIT);
    await c.until(() => c.finals().length > 0, 3000);
    c.destroy();
    const [r] = c.finals();
    assert.equal(r?.status, 200, show(c.text));
    assert.equal(JSON.parse(r.body).result.protocolVersion, '2025-06-18');
  });

  test('Expect: something -> 417', T, async () => {
    const c = new RawConn(chain.port);
    c.write(head(chain.port, { expect: 'something' }) + INIT);
    await c.until(() => c.finals().length > 0, 2000);
    c.destroy();
    assert.ok(!/HTTP\/1\.1 100/.test(c.text), `no 100 Continue: ${show(c.text)}`);
    assert.equal(c.finals()[0]?.status, 417, show(c.text));
  });
});

// ---------------------------------------------------------------------------
// F. sessions are bounded

describe('F. session bounds: the idlest idle session is ended, else 503', { skip: SKIP_NO_FIXTURE }, () => {
  /** Asserts R (an initialize's answer) is a 503 with a JSON-RPC error and no session. */
  const refused503 = (r, what) => {
    assert.equal(r.status, 503, `${what}: ${r.status} ${r.body}`);
    const err = JSON.parse(r.body).error;
    assert.ok(err && Number.isInteger(err.code) && typeof err.message === 'string', `${what}: a JSON-RPC error: ${r.body}`);
    assert.equal(JSON.parse(r.body).id, 1, `${what}: the refused request's own id, not null`);
    assert.equal(r.headers['mcp-session-id'], undefined, `${what}: no session id`);
  };

  test('maxSessionsPerClient 3: a fourth initialize ends the idlest session (404), the other three work', T, async () => {
    await withCfg(sharedCfg({ listen: { maxSessionsPerClient: 3 } }), async (chain) => {
      const port = chain.port;
      const sids = [];
      for (let i = 0; i < 3; i++) {
        const { r, sid } = await init(port);
        assert.equal(r.status, 200, r.body);
        sids.push(sid);
        await sleep(20);
      }
      assert.equal(await ping(port, sids[1]), 200);
      await sleep(20);
      assert.equal(await ping(port, sids[2]), 200);
      await sleep(20);
      const fourth = await init(port);
      assert.equal(fourth.r.status, 200, `the fourth initialize succeeds: ${fourth.r.body}`);
      sids.push(fourth.sid);
      assert.equal(await ping(port, sids[0]), 404, 'the idlest session was ended');
      for (const s of sids.slice(1)) assert.equal(await ping(port, s), 200, 'the others work');
    });
  });

  test('maxSessions 2 (per client 100): a third initialize ends the idlest session', T, async () => {
    await withCfg(sharedCfg({ listen: { maxSessions: 2, maxSessionsPerClient: 100 } }), async (chain) => {
      const port = chain.port;
      const a = await init(port);
      await sleep(20);
      const b = await init(port);
      await sleep(20);
      const c = await init(port);
      assert.deepEqual([a, b, c].map((s) => s.r.status), [200, 200, 200]);
      assert.equal(await ping(port, a.sid), 404, 'the idlest session was ended');
      assert.equal(await ping(port, b.sid), 200);
      assert.equal(await ping(port, c.sid), 200);
    });
  });

  test('maxSessionsPerClient 2, both sessions with a GET stream open: a third initialize gets 503', T, async () => {
    await withCfg(sharedCfg({ listen: { maxSessionsPerClient: 2 } }), async (chain) => {
      const port = chain.port;
      const streams = [];
      try {
        const sids = [];
        for (let i = 0; i < 2; i++) {
          const { r, sid } = await init(port);
          assert.equal(r.status, 200, r.body);
          sids.push(sid);
          streams.push(await openGet(port, sid));
        }
        const third = await httpReq(port, { headers: JSON_ONLY, body: INIT });
        refused503(third, 'a third session while both have a stream open');
        for (const s of sids) assert.equal(await ping(port, s), 200, 'the two sessions still work');
        assert.ok(streams.every((g) => !g.closed), 'their GET streams are still open');
      } finally {
        for (const g of streams) g.destroy();
      }
    });
  });

  test('maxSessionsPerPrincipal 2, two tokens: A\'s third session ends A\'s idlest, B\'s are untouched', T, async () => {
    const A = 'alice-' + 'A'.repeat(20) + '-secret';
    const B = 'bob-' + 'B'.repeat(20) + '-secret';
    const sha = (s) => createHash('sha256').update(s).digest('hex');
    const cfg = sharedCfg({
      middleware: [{ use: 'auth', env: false, tokens: [{ sha256: sha(A), principal: 'alice' }, { sha256: sha(B), principal: 'bob' }] }],
      listen: { maxSessionsPerPrincipal: 2, maxSessionsPerClient: 100 },
    });
    await withCfg(cfg, async (chain) => {
      const port = chain.port;
      const as = (t) => ({ Authorization: `Bearer ${t}` });
      const opened = {};
      // B's first is the idlest of all: only A's own may make room for A
      for (const [name, tok] of [['b1', B], ['a1', A], ['b2', B], ['a2', A]]) {
        const { r, sid } = await init(port, as(tok));
        assert.equal(r.status, 200, `${name}: ${r.body}`);
        opened[name] = sid;
        await sleep(20);
      }
      const a3 = await init(port, as(A));
      assert.equal(a3.r.status, 200, `A's third session opens: ${a3.r.body}`);
      assert.equal(await ping(port, opened.a1, as(A)), 404, 'A\'s idlest session was ended');
      assert.equal(await ping(port, opened.a2, as(A)), 200);
      assert.equal(await ping(port, a3.sid, as(A)), 200);
      assert.equal(await ping(port, opened.b1, as(B)), 200, 'B\'s sessions are untouched');
      assert.equal(await ping(port, opened.b2, as(B)), 200, 'B\'s sessions are untouched');
    });
  });

  test('maxScopedSessions 2 (a backend per session): a third initialize ends the idlest idle session', T, async () => {
    const cfg = { mcpServers: { fx: { command: FIXTURE, args: [], scope: 'session' } }, listen: { maxScopedSessions: 2 } };
    await withCfg(cfg, async (chain) => {
      const port = chain.port;
      const tools = async (sid) => {
        const r = await httpReq(port, { headers: { ...JSON_ONLY, 'Mcp-Session-Id': sid },
          body: JSON.stringify({ jsonrpc: '2.0', id: 't', method: 'tools/list' }) });
        if (r.status === 200) assert.ok(Array.isArray(JSON.parse(r.body).result.tools), r.body);
        return r.status;
      };
      const a = await init(port);
      await sleep(20);
      const b = await init(port);
      await sleep(20);
      assert.deepEqual([a.r.status, b.r.status], [200, 200], `${a.r.body} ${b.r.body}`);
      assert.equal(await tools(b.sid), 200);
      await sleep(20);
      const c = await init(port);
      assert.equal(c.r.status, 200, `the third initialize succeeds by ending the idlest session: ${c.r.body}`);
      assert.equal(await tools(a.sid), 404, 'the idlest session was ended');
      assert.equal(await tools(b.sid), 200);
      assert.equal(await tools(c.sid), 200);
      chain.remember();
    });
  });
});
