// mcp-flow.js - an MCP-Flow (v0.1) client for browsers and Deno: MCP over
// WebTransport, dependency-free. See web/README.md for the API.
//
// The wire, as the implementation guide writes it (big-endian integers):
// - control stream (the first bidirectional stream, opened here): frames of
//   a 4-byte length + one JSON-RPC message; initialize and its answer in
//   JSON, everything after in the negotiated encoding (CBOR or JSON);
// - execution streams (unidirectional, opened by the server): an 8-byte
//   header (request id u32, stream tag u32), then the payload to the end;
// - datagrams: a 6-byte header (channel u8: 1 progress, 2 audio, 3 log;
//   flags u8 = 0; request id u32, 0 = session-global), then one whole
//   JSON-RPC notification in the negotiated encoding.
//
// Nothing here touches WebTransport until connect() is called, so Node can
// import the module for the CBOR codec.

const FRAME_MAX = 16 * 1024 * 1024;
const ENC = new TextEncoder();
const DEC = new TextDecoder('utf-8', { fatal: true });

export const FLOW_VERSION = '0.1';
export const ERR_CANCELLED = -32000;
export const ERR_BAD_STREAM_REF = -32001;
export const ERR_ENCODING = -32003;
export const CHANNEL = Object.freeze({ PROGRESS: 1, AUDIO: 2, LOG: 3 });

/* ------------------------------------------------------------------ */
/* CBOR (RFC 8949), the part JSON needs plus byte strings              */
/* ------------------------------------------------------------------ */

/** Converts a float to its IEEE 754 half-precision bits, or -1 when it is
 * not exactly representable as one. */
function toHalf(x) {
  if (Number.isNaN(x)) return 0x7e00;
  const f32 = new Float32Array([x]);
  if (f32[0] !== x) return -1;
  const b = new Uint32Array(f32.buffer)[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  if (exp === 0xff) return mant ? -1 : sign | 0x7c00;
  if (exp === 0 && mant === 0) return sign;
  const e = exp - 127;
  if (e >= -14 && e <= 15) {                       /* normal half */
    if (mant & 0x1fff) return -1;
    return sign | ((e + 15) << 10) | (mant >>> 13);
  }
  if (e >= -24 && e < -14) {                       /* subnormal half */
    const shift = 13 + (-14 - e);
    const full = mant | 0x800000;
    if (full & ((1 << shift) - 1)) return -1;
    return sign | (full >>> shift);
  }
  return -1;
}

/** Decodes half-precision BITS to a number (RFC 8949 Appendix D). */
function fromHalf(bits) {
  const exp = (bits >> 10) & 0x1f;
  const mant = bits & 0x3ff;
  let v;
  if (exp === 0) v = mant * 2 ** -24;
  else if (exp !== 31) v = (mant + 1024) * 2 ** (exp - 25);
  else v = mant === 0 ? Infinity : NaN;
  return bits & 0x8000 ? -v : v;
}

/** A growable byte buffer for the encoder. */
class ByteSink {
  constructor() { this.buf = new Uint8Array(256); this.len = 0; this.view = new DataView(this.buf.buffer); }
  /** Makes room for N more bytes. */
  room(n) {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const b = new Uint8Array(cap);
    b.set(this.buf.subarray(0, this.len));
    this.buf = b;
    this.view = new DataView(b.buffer);
  }
  /** Appends one byte. */
  byte(v) { this.room(1); this.buf[this.len++] = v; }
  /** Appends the bytes of B. */
  bytes(b) { this.room(b.length); this.buf.set(b, this.len); this.len += b.length; }
  /** Appends a major type MT head with argument N (a safe non-negative integer). */
  head(mt, n) {
    const m = mt << 5;
    if (n < 24) this.byte(m | n);
    else if (n < 0x100) { this.byte(m | 24); this.byte(n); }
    else if (n < 0x10000) { this.room(3); this.buf[this.len++] = m | 25; this.view.setUint16(this.len, n); this.len += 2; }
    else if (n < 0x100000000) { this.room(5); this.buf[this.len++] = m | 26; this.view.setUint32(this.len, n); this.len += 4; }
    else {
      this.room(9); this.buf[this.len++] = m | 27;
      this.view.setUint32(this.len, Math.floor(n / 0x100000000)); this.view.setUint32(this.len + 4, n >>> 0);
      this.len += 8;
    }
  }
  /** The bytes written (a copy). */
  result() { return this.buf.slice(0, this.len); }
}

/** Appends number X: an integer when safe, else the shortest float that
 * keeps its value exactly. */
function encodeNumber(s, x) {
  if (Number.isSafeInteger(x) && !Object.is(x, -0)) {
    if (x >= 0) s.head(0, x); else s.head(1, -1 - x);
    return;
  }
  const h = toHalf(x);
  if (h >= 0) { s.room(3); s.buf[s.len++] = 0xf9; s.view.setUint16(s.len, h); s.len += 2; return; }
  if (Math.fround(x) === x) { s.room(5); s.buf[s.len++] = 0xfa; s.view.setFloat32(s.len, x); s.len += 4; return; }
  s.room(9); s.buf[s.len++] = 0xfb; s.view.setFloat64(s.len, x); s.len += 8;
}

/** Appends value V at nesting DEPTH. */
function encodeValue(s, v, depth) {
  if (depth > 512) throw new RangeError('CBOR: nesting too deep');
  if (v === null) return s.byte(0xf6);
  switch (typeof v) {
    case 'boolean': return s.byte(v ? 0xf5 : 0xf4);
    case 'number': return encodeNumber(s, v);
    case 'string': { const b = ENC.encode(v); s.head(3, b.length); return s.bytes(b); }
    case 'bigint': throw new TypeError('CBOR: BigInt is not supported');
    case 'undefined': return s.byte(0xf7);
    case 'object': break;
    default: throw new TypeError(`CBOR: cannot encode a ${typeof v}`);
  }
  if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
    const b = v instanceof ArrayBuffer ? new Uint8Array(v) : v;
    s.head(2, b.length);
    return s.bytes(b);
  }
  if (Array.isArray(v)) {
    s.head(4, v.length);
    for (const x of v) encodeValue(s, x === undefined ? null : x, depth + 1);
    return;
  }
  if (typeof v.toJSON === 'function') return encodeValue(s, v.toJSON(), depth + 1);
  const keys = Object.keys(v).filter((k) => v[k] !== undefined && typeof v[k] !== 'function');
  s.head(5, keys.length);
  for (const k of keys) {
    encodeValue(s, k, depth + 1);
    encodeValue(s, v[k], depth + 1);
  }
}

/** Encodes V (what JSON carries, plus Uint8Array as a byte string) as CBOR.
 * Object keys with undefined values are left out, as JSON.stringify does;
 * a BigInt throws a TypeError. */
export function encodeCbor(v) {
  const s = new ByteSink();
  encodeValue(s, v, 0);
  return s.result();
}

/** A cursor over the bytes being decoded. */
class ByteSource {
  constructor(b) { this.b = b; this.pos = 0; this.view = new DataView(b.buffer, b.byteOffset, b.byteLength); }
  /** Checks that N more bytes are there. */
  need(n) { if (this.pos + n > this.b.length) throw new RangeError('CBOR: truncated'); }
  /** Reads one byte. */
  u8() { this.need(1); return this.b[this.pos++]; }
}

const BREAK = Symbol('break');

/** Reads the argument of a head whose additional information is AI; -1
 * for indefinite length. */
function readArg(src, ai) {
  const v = src.view;
  let n;
  if (ai < 24) return ai;
  switch (ai) {
    case 24: return src.u8();
    case 25: src.need(2); n = v.getUint16(src.pos); src.pos += 2; return n;
    case 26: src.need(4); n = v.getUint32(src.pos); src.pos += 4; return n;
    case 27: {
      src.need(8);
      const hi = v.getUint32(src.pos), lo = v.getUint32(src.pos + 4);
      src.pos += 8;
      if (hi > 0x1fffff) throw new RangeError('CBOR: integer too large for a number');
      return hi * 0x100000000 + lo;
    }
    case 31: return -1;
    default: throw new RangeError(`CBOR: reserved additional information ${ai}`);
  }
}

/** Reads a definite or indefinite string of major type MT with argument N. */
function readString(src, mt, n, depth) {
  let bytes;
  if (n >= 0) {
    src.need(n);
    bytes = src.b.slice(src.pos, src.pos + n);
    src.pos += n;
  } else {
    const parts = [];
    let total = 0;
    for (;;) {
      const ib = src.u8();
      if (ib === 0xff) break;
      if (ib >> 5 !== mt) throw new RangeError('CBOR: bad chunk in an indefinite string');
      const len = readArg(src, ib & 31);
      if (len < 0) throw new RangeError('CBOR: nested indefinite string');
      const part = readString(src, mt, len, depth + 1);
      const pb = mt === 3 ? ENC.encode(part) : part;
      parts.push(pb);
      total += pb.length;
    }
    bytes = new Uint8Array(total);
    let off = 0;
    for (const p of parts) { bytes.set(p, off); off += p.length; }
  }
  return mt === 2 ? bytes : DEC.decode(bytes);
}

/** Reads one data item at nesting DEPTH (BREAK for a break code when
 * ALLOWBREAK). */
function decodeItem(src, depth, allowBreak = false) {
  if (depth > 512) throw new RangeError('CBOR: nesting too deep');
  const ib = src.u8();
  const mt = ib >> 5, ai = ib & 31;
  if (mt === 7) {
    switch (ai) {
      case 20: return false;
      case 21: return true;
      case 22: return null;
      case 23: return undefined;
      case 25: { src.need(2); const h = src.view.getUint16(src.pos); src.pos += 2; return fromHalf(h); }
      case 26: { src.need(4); const f = src.view.getFloat32(src.pos); src.pos += 4; return f; }
      case 27: { src.need(8); const f = src.view.getFloat64(src.pos); src.pos += 8; return f; }
      case 31: if (allowBreak) return BREAK; throw new RangeError('CBOR: unexpected break');
      default: throw new RangeError(`CBOR: unsupported simple value ${ai === 24 ? 'simple(n)' : ai}`);
    }
  }
  const n = readArg(src, ai);
  switch (mt) {
    case 0: if (n < 0) break; return n;
    case 1: if (n < 0) break; return -1 - n;
    case 2: case 3: return readString(src, mt, n, depth);
    case 4: {
      const a = [];
      if (n >= 0) { for (let i = 0; i < n; i++) a.push(decodeItem(src, depth + 1)); return a; }
      for (;;) { const x = decodeItem(src, depth + 1, true); if (x === BREAK) return a; a.push(x); }
    }
    case 5: {
      const o = {};
      for (let i = 0; n < 0 || i < n; i++) {
        const k = decodeItem(src, depth + 1, n < 0);
        if (k === BREAK) break;
        if (typeof k !== 'string') throw new TypeError('CBOR: a map key that is not a text string');
        const val = decodeItem(src, depth + 1);
        Object.defineProperty(o, k, { value: val, enumerable: true, writable: true, configurable: true });
      }
      return o;
    }
    case 6:
      if (n === 2 || n === 3) throw new RangeError('CBOR: bignums are not supported');
      if (n < 0) break;
      return decodeItem(src, depth + 1);       /* other tags: their content */
  }
  throw new RangeError('CBOR: indefinite length on a major type that has none');
}

/** Decodes one CBOR data item filling all of BYTES (a Uint8Array).
 * Integers come back as numbers (beyond 2^53 a RangeError), byte strings as
 * Uint8Array, tags other than bignums as their content; map keys must be
 * text strings. */
export function decodeCbor(bytes) {
  const src = new ByteSource(bytes);
  const v = decodeItem(src, 0);
  if (src.pos !== bytes.length) throw new RangeError('CBOR: trailing bytes');
  return v;
}

/* ------------------------------------------------------------------ */
/* Framing                                                             */
/* ------------------------------------------------------------------ */

/** Accumulates bytes as they arrive; whole length-prefixed frames out.
 * The buffer grows by doubling and is compacted as frames leave, so a
 * large frame in many small reads costs linear time. */
export class FrameReader {
  constructor(max = FRAME_MAX) { this.max = max; this.buf = new Uint8Array(4096); this.start = 0; this.end = 0; }
  /** Appends CHUNK (borrowed: copied). */
  push(chunk) {
    if (this.end + chunk.length > this.buf.length) {
      const live = this.end - this.start;
      let cap = this.buf.length;
      while (cap < live + chunk.length) cap *= 2;
      if (cap === this.buf.length) this.buf.copyWithin(0, this.start, this.end);
      else {
        const b = new Uint8Array(cap);
        b.set(this.buf.subarray(this.start, this.end));
        this.buf = b;
      }
      this.start = 0;
      this.end = live;
    }
    this.buf.set(chunk, this.end);
    this.end += chunk.length;
  }
  /** The next whole frame's body (a copy), or null; throws when a frame
   * declares more than max bytes (the stream cannot be resynchronized). */
  next() {
    const avail = this.end - this.start;
    if (avail < 4) return null;
    const len = new DataView(this.buf.buffer, this.start, 4).getUint32(0);
    if (len > this.max) throw new RangeError(`MCP-Flow: a frame of ${len} bytes is over the limit`);
    if (avail < 4 + len) return null;
    const body = this.buf.slice(this.start + 4, this.start + 4 + len);
    this.start += 4 + len;
    if (this.start === this.end) this.start = this.end = 0;
    return body;
  }
  /** Bytes held that are not a whole frame yet. */
  get pending() { return this.end - this.start; }
}

/** BODY with its 4-byte length in front. */
export function frame(body) {
  const f = new Uint8Array(4 + body.length);
  new DataView(f.buffer).setUint32(0, body.length);
  f.set(body, 4);
  return f;
}

/** Encodes message M in ENCODING ('json' or 'cbor'). */
export function encodeMessage(m, encoding) {
  return encoding === 'cbor' ? encodeCbor(m) : ENC.encode(JSON.stringify(m));
}

/** Which encoding BODY is in by its first byte ('json', 'cbor' or null):
 * JSON text opens with '{' or '[' (after white space), a CBOR message with
 * a map or an array head. */
export function bodyEncoding(body) {
  for (const c of body) {
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) continue;
    if (c === 0x7b || c === 0x5b) return 'json';
    if ((c >> 5) === 4 || (c >> 5) === 5) return 'cbor';
    return null;
  }
  return null;
}

/** Decodes BODY in ENCODING; throws when BODY is in the other one. */
export function decodeMessage(body, encoding) {
  const seen = bodyEncoding(body);
  if (seen !== encoding) throw Object.assign(new Error(`MCP-Flow: a frame in ${seen ?? 'no known'} encoding, ${encoding} expected`), { code: ERR_ENCODING });
  return encoding === 'cbor' ? decodeCbor(body) : JSON.parse(DEC.decode(body));
}

/** An error answer from the server, or a local failure given a code. */
export class FlowError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = 'FlowError';
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

/** HASH (a hex string, Uint8Array or ArrayBuffer) as a BufferSource. */
function hashBytes(hash) {
  if (typeof hash !== 'string') return hash;
  const hex = hash.replace(/[^0-9a-f]/gi, '');
  const b = new Uint8Array(hex.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return b;
}

/** Reads all of READABLE after its first N bytes were taken as a header:
 * { header: Uint8Array(n), body: Uint8Array }. */
async function readAllWithHeader(readable, n) {
  const parts = [];
  let total = 0;
  const reader = readable.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value);
      total += value.length;
    }
  } finally {
    reader.releaseLock();
  }
  if (total < n) throw new FlowError(ERR_BAD_STREAM_REF, 'MCP-Flow: an execution stream shorter than its header');
  const all = new Uint8Array(total);
  let off = 0;
  for (const p of parts) { all.set(p, off); off += p.length; }
  return { header: all.subarray(0, n), body: all.subarray(n) };
}

/* ------------------------------------------------------------------ */
/* The client                                                          */
/* ------------------------------------------------------------------ */

class FlowClient {
  /** Takes over the session WT and its control stream CTL. */
  constructor(wt, ctl, opts) {
    this.wt = wt;
    this.opts = opts;
    this.writer = ctl.writable.getWriter();
    this.ctlReadable = ctl.readable;
    this.encoding = 'json';
    this.serverTransport = null;
    this.initializeResult = null;
    this.nextId = 1;
    this.pending = new Map();           /* id -> { resolve, reject, onProgress, token } */
    this.streams = new Map();           /* tag -> { requestId, promise, resolve, reject, settled } */
    this.closedReason = null;
    this.closed = wt.closed.then(() => this.fail('session closed'), (e) => this.fail(`session closed: ${e?.message ?? e}`));
  }

  /** Writes message M as one frame in ENCODING (the session's by default). */
  async send(m, encoding = this.encoding) {
    if (this.closedReason) throw new FlowError(-32000, `MCP-Flow: ${this.closedReason}`);
    await this.writer.write(frame(encodeMessage(m, encoding)));
  }

  /** The stream slot for TAG, made on first use. */
  slot(tag) {
    let s = this.streams.get(tag);
    if (!s) {
      s = { requestId: null, settled: false };
      s.promise = new Promise((res, rej) => { s.resolve = res; s.reject = rej; });
      s.promise.catch(() => {});
      this.streams.set(tag, s);
    }
    return s;
  }

  /** Reads the execution stream tagged TAG to its end: its bytes
   * (Uint8Array). The stream is forgotten once read. */
  async readStream(tag) {
    const s = this.slot(tag);
    try {
      const r = await s.promise;
      return r.bytes;
    } finally {
      this.streams.delete(tag);
    }
  }

  /** Sends request METHOD with PARAMS; resolves to its result with each
   * ref/stream content item replaced by {type: 'stream', streamTag,
   * mimeType, bytes}; rejects with a FlowError on an error answer.
   * ENCODING overrides the session's for this one frame (for tests of a
   * server's -32003). ONANSWER(result), when given, is told the answer as
   * it arrives on the control stream, before its streams are read. */
  async request(method, params = {}, { onProgress, signal, encoding, onAnswer } = {}) {
    const id = this.nextId++;
    if (id >= 2 ** 32) throw new RangeError('MCP-Flow: request ids are exhausted');
    const p = { ...(params ?? {}) };
    if (onProgress) p._meta = { ...(p._meta ?? {}), progressToken: id };
    signal?.throwIfAborted?.();
    const answer = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, onProgress, token: onProgress ? id : undefined }));
    const onAbort = () => {
      this.notify('$/cancel', { requestId: id, reason: String(signal.reason?.message ?? signal.reason ?? 'aborted') }).catch(() => {});
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this.send({ jsonrpc: '2.0', id, method, params: p }, encoding);
      const result = await answer;
      onAnswer?.(result);
      return await this.resolveStreams(id, result);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.pending.delete(id);
    }
  }

  /** RESULT with its ref/stream items read from their streams (request ID). */
  async resolveStreams(id, result) {
    if (!result || !Array.isArray(result.content)) return result;
    const content = await Promise.all(result.content.map(async (item) => {
      if (!item || item.type !== 'ref/stream') return item;
      const s = this.slot(item.streamTag);
      try {
        const r = await s.promise;
        if (r.requestId !== id) throw new FlowError(ERR_BAD_STREAM_REF, `MCP-Flow: stream ${item.streamTag} belongs to request ${r.requestId}, not ${id}`);
        return { type: 'stream', streamTag: item.streamTag, mimeType: item.mimeType, bytes: r.bytes };
      } finally {
        this.streams.delete(item.streamTag);
      }
    }));
    return { ...result, content };
  }

  /** Sends notification METHOD with PARAMS (none when undefined). */
  notify(method, params) {
    const m = { jsonrpc: '2.0', method };
    if (params !== undefined) m.params = params;
    return this.send(m);
  }

  /** Asks the server to end the session ($/shutdown): resolves when the
   * session has closed (or after TIMEOUTMS, then closes it here). */
  async shutdown({ timeoutMs = 10_000 } = {}) {
    await this.notify('$/shutdown');
    let timer;
    const late = new Promise((r) => { timer = setTimeout(r, timeoutMs, 'timeout'); });
    const how = await Promise.race([this.wt.closed.then(() => 'closed', () => 'closed'), late]);
    clearTimeout(timer);
    if (how === 'timeout') this.close();
    return how;
  }

  /** Closes the session now; pending requests fail. */
  close() {
    this.fail('closed by the client');
    try { this.wt.close({ closeCode: 0, reason: 'client close' }); } catch { /* already closed */ }
  }

  /** Fails everything pending with REASON (once). */
  fail(reason) {
    if (this.closedReason) return;
    this.closedReason = reason;
    for (const p of this.pending.values()) p.reject(new FlowError(-32000, `MCP-Flow: ${reason}`));
    for (const s of this.streams.values()) if (!s.settled) s.reject(new FlowError(-32000, `MCP-Flow: ${reason}`));
  }

  /** Routes a progress notification's PARAMS to its request's onProgress. */
  progress(params) {
    for (const p of this.pending.values()) {
      if (p.onProgress && p.token === params?.progressToken) { p.onProgress(params); return true; }
    }
    return false;
  }

  /** Handles one message M from the control stream. */
  dispatch(m) {
    if (m === null || typeof m !== 'object') return;
    if ('id' in m && m.method === undefined) {
      const p = this.pending.get(m.id);
      if (!p) return;
      if (m.error) p.reject(new FlowError(m.error.code, m.error.message, m.error.data));
      else p.resolve(m.result);
      return;
    }
    if (m.method !== undefined && 'id' in m) {       /* a request from the server */
      const answer = m.method === 'ping' ? { jsonrpc: '2.0', id: m.id, result: {} }
        : { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } };
      this.send(answer).catch(() => {});
      return;
    }
    if (m.method === 'notifications/progress') this.progress(m.params);
    if (m.method === '$/streamError') {
      const s = this.slot(m.params?.streamTag);
      s.settled = true;
      s.reject(new FlowError(ERR_BAD_STREAM_REF, `MCP-Flow: stream ${m.params?.streamTag} failed: ${JSON.stringify(m.params?.error)}`));
    }
    this.opts.onNotification?.(m);
  }

  /** Reads the control stream's frames until it ends; the first one is
   * handed to FIRST (the initialize answer, always JSON). */
  async controlLoop(first) {
    const fr = new FrameReader();
    const reader = this.ctlReadable.getReader();
    let firstDone = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        fr.push(value);
        for (let body = fr.next(); body; body = fr.next()) {
          if (!firstDone) { firstDone = true; first(decodeMessage(body, 'json')); continue; }
          let m;
          try { m = decodeMessage(body, this.encoding); } catch (e) { this.opts.onError?.(e); continue; }
          this.dispatch(m);
        }
      }
      this.fail('the control stream ended');
    } catch (e) {
      this.fail(`the control stream failed: ${e?.message ?? e}`);
    }
    if (!firstDone) first(null);
  }

  /** Takes the server's execution streams as they come. */
  async streamLoop() {
    const reader = this.wt.incomingUnidirectionalStreams.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        this.takeStream(value);
      }
    } catch { /* the session ended: fail() says why */ }
  }

  /** Reads one execution stream to its end into its tag's slot. */
  async takeStream(readable) {
    let r;
    try {
      r = await readAllWithHeader(readable, 8);
    } catch (e) {
      this.opts.onError?.(e);
      return;
    }
    const dv = new DataView(r.header.buffer, r.header.byteOffset, 8);
    const requestId = dv.getUint32(0), tag = dv.getUint32(4);
    const s = this.slot(tag);
    if (s.settled) return;                           /* a tag seen twice: first one wins */
    s.settled = true;
    s.requestId = requestId;
    s.resolve({ requestId, bytes: r.body });
  }

  /** Takes datagrams as they come: header, then a notification. */
  async datagramLoop() {
    const reader = this.wt.datagrams.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        if (value.length < 6 || value[1] !== 0 || value[0] < 1 || value[0] > 3) continue;
        const requestId = new DataView(value.buffer, value.byteOffset, 6).getUint32(2);
        const payload = value.subarray(6);
        let message;
        try { message = decodeMessage(payload, this.encoding); } catch { /* not a message: payload only */ }
        if (value[0] === CHANNEL.PROGRESS && message?.method === 'notifications/progress') this.progress(message.params);
        this.opts.onDatagram?.({ channel: value[0], requestId, message, payload });
      }
    } catch { /* the session ended */ }
  }
}

/**
 * Opens an MCP-Flow session to URL (https://host:port/mcp-flow) and runs
 * initialize; resolves to the client once the server has answered.
 * OPTS: serverCertificateHashes (hex strings or byte arrays, sha-256),
 * encodings (by preference), clientInfo, capabilities, protocolVersion,
 * onNotification(message), onDatagram({channel, requestId, message, payload})
 * (message undefined when the payload is not one in the session's encoding),
 * onError(error) for frames dropped as undecodable, datagrams (default
 * true: this module reads them; sent as params.transport.datagrams, which
 * tells a server that progress and log messages may come as datagrams).
 */
export async function connect(url, {
  serverCertificateHashes, encodings = ['cbor', 'json'], clientInfo = { name: 'mcp-flow.js', version: FLOW_VERSION },
  capabilities = {}, protocolVersion = '2025-11-25', onNotification, onDatagram, onError, datagrams = true,
} = {}) {
  const wtOpts = {};
  if (serverCertificateHashes?.length) {
    wtOpts.serverCertificateHashes = serverCertificateHashes.map((h) => ({ algorithm: 'sha-256', value: hashBytes(h) }));
  }
  const wt = new WebTransport(url, wtOpts);
  await wt.ready;
  let client;
  try {
    const ctl = await wt.createBidirectionalStream();
    client = new FlowClient(wt, ctl, { onNotification, onDatagram, onError });
    const init = new Promise((resolve) => client.controlLoop(resolve));
    client.streamLoop();
    client.datagramLoop();
    await client.send({
      jsonrpc: '2.0', id: 0, method: 'initialize',
      params: { protocolVersion, capabilities, clientInfo, transport: { type: 'mcp-flow', version: FLOW_VERSION, encodings, datagrams } },
    });
    const answer = await init;
    if (!answer) throw new FlowError(-32000, `MCP-Flow: no initialize answer (${client.closedReason})`);
    if (answer.error) throw new FlowError(answer.error.code, answer.error.message, answer.error.data);
    const t = answer.result?.transport;
    const enc = t?.encoding ?? 'json';
    if (enc !== 'json' && !(enc === 'cbor' && encodings.includes('cbor'))) throw new FlowError(ERR_ENCODING, `MCP-Flow: the server chose encoding ${enc}`);
    client.encoding = enc;
    client.serverTransport = t ?? null;
    client.initializeResult = answer.result;
    await client.notify('notifications/initialized');
    return client;
  } catch (e) {
    try { wt.close({ closeCode: 1, reason: 'initialize failed' }); } catch { /* closed */ }
    throw e;
  }
}
