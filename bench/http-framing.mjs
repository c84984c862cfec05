#!/usr/bin/env node
// http-framing.mjs: a fake Streamable HTTP MCP server that frames its answers
// in one chosen way, to check that mcp-bench-load --url reads every framing a
// server may use (bench/http-framing.sh runs it under the driver).  It speaks
// raw HTTP/1.1 over node:net so that the framing, and how the bytes are cut
// into writes, is exactly what it says; every response is written in small
// pieces on separate turns of the event loop, so the driver sees partial
// headers, chunk sizes, SSE lines and JSON split across reads.
//
// usage: node http-framing.mjs --port PORT --framing MODE
//
// MODE (how a tools/call is answered; initialize is answered the same way):
//   json-length    application/json, Content-Length
//   json-chunked   application/json, chunked
//   json-close     application/json, no length, Connection: close (body until close)
//   sse-length     text/event-stream, Content-Length
//   sse-chunked    text/event-stream, chunked, CRLF line ends, comments, event:/id:
//                  lines and the JSON cut over two data: lines
//   sse-close      text/event-stream, no length, Connection: close
//   bad-noanswer   SSE that ends without the request's answer     (each call an error)
//   bad-status     HTTP 500 with a JSON-RPC error body             (each call an error)
//   bad-reset      the connection destroyed mid-response           (each call an error)
// Progress (tools/call slow with a progressToken) is sent before the result in
// the SSE modes.

import net from 'node:net';

const args = process.argv.slice(2);
const opt = { port: 0, framing: 'json-length' };
for (let i = 0; i < args.length; i += 2) opt[args[i].replace(/^--/, '')] = args[i + 1];
const SID = 'framing-session-1';

/** Write the pieces of buf one by one, each on its own turn of the loop. */
function dribble(sock, pieces, end) {
  let i = 0;
  const next = () => {
    if (sock.destroyed) return;
    if (i < pieces.length) {
      sock.write(pieces[i++]);
      setImmediate(next);
    } else if (end) {
      end();
    }
  };
  next();
}

/** Cut s into pieces of n bytes. */
function cut(s, n) {
  const out = [];
  for (let i = 0; i < s.length; i += n) out.push(s.subarray(i, i + n));
  return out;
}

/** The JSON-RPC messages answering request msg: progress first, then the result. */
function answer(msg) {
  if (msg.method === 'initialize') {
    return [{ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-06-18',
      capabilities: { tools: {} }, serverInfo: { name: 'http-framing', version: '1' } } }];
  }
  const { name, arguments: a = {}, _meta: meta } = msg.params ?? {};
  const out = [];
  if (name === 'slow' && meta?.progressToken !== undefined && opt.framing.startsWith('sse')) {
    for (let k = 1; k <= (a.steps ?? 1); k++) {
      out.push({ jsonrpc: '2.0', method: 'notifications/progress',
        params: { progressToken: meta.progressToken, progress: k, total: a.steps } });
    }
  }
  const text = name === 'echo' ? a.text : `slow: ${a.steps} steps done`;
  out.push({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text }] } });
  return out;
}

/** The SSE text for messages msgs, in the style of the framing. */
function sseBody(msgs) {
  if (opt.framing !== 'sse-chunked') return msgs.map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join('');
  return ': a comment first\r\n\r\n' + msgs.map((m, k) => {
    const j = JSON.stringify(m);
    const h = j.indexOf(',"') + 1;  // a newline is white space there (data: lines join with one)
    return `id: ${k}\r\nevent: message\r\ndata: ${j.slice(0, h)}\r\ndata:${j.slice(h)}\r\n\r\n`;
  }).join('');
}

/** Answer one parsed request on sock. */
function respond(sock, head, body) {
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    sock.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  const sid = msg.method === 'initialize' ? `Mcp-Session-Id: ${SID}\r\n` : '';
  if (msg.id === undefined) {
    dribble(sock, cut(Buffer.from('HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n'), 5));
    return;
  }
  if (msg.method !== 'initialize' && !/mcp-session-id: framing-session-1/i.test(head)) {
    sock.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  const f = msg.method === 'initialize' && opt.framing.startsWith('bad') ? 'sse-length' : opt.framing;
  const msgs = answer(msg);
  if (f === 'bad-status') {
    const b = JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32603, message: 'boom' } });
    sock.write(`HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n${b}`);
    return;
  }
  if (f === 'bad-reset') {
    dribble(sock, [Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n: hi\n\r\n')],
      () => sock.destroy());
    return;
  }
  const json = f.startsWith('json');
  const text = Buffer.from(json ? JSON.stringify(msgs[msgs.length - 1])
    : sseBody(f === 'bad-noanswer' ? msgs.slice(0, -1) : msgs));
  const type = json ? 'application/json' : 'text/event-stream';
  let hdr = `HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\n${sid}`;
  let pieces;
  if (f.endsWith('-length') || f === 'bad-noanswer') {
    hdr += `Content-Length: ${text.length}\r\n\r\n`;
    pieces = cut(Buffer.concat([Buffer.from(hdr), text]), 7);
  } else if (f.endsWith('-chunked')) {
    hdr += 'Transfer-Encoding: chunked\r\n\r\n';
    const chunks = cut(text, 11).map((c) => Buffer.concat([Buffer.from(`${c.length.toString(16)};x=1\r\n`), c,
      Buffer.from('\r\n')]));
    pieces = cut(Buffer.concat([Buffer.from(hdr), ...chunks, Buffer.from('0\r\nX-Trailer: t\r\n\r\n')]), 5);
  } else {
    hdr += 'Connection: close\r\n\r\n';
    dribble(sock, cut(Buffer.concat([Buffer.from(hdr), text]), 9), () => sock.end());
    return;
  }
  dribble(sock, pieces);
}

const server = net.createServer((sock) => {
  let buf = Buffer.alloc(0);
  sock.on('error', () => {});
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString();
      const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      const body = buf.subarray(end + 4, end + 4 + len).toString();
      buf = buf.subarray(end + 4 + len);
      respond(sock, head, body);
    }
  });
});
server.listen(Number(opt.port), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
