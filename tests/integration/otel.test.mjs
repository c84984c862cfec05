// OpenTelemetry traces through mcp-chain, with real OpenTelemetry parts:
// a client instrumented with the OTel JS SDK opens a span and calls a tool
// with its context in params._meta.traceparent (stdio) or only in the
// HTTP traceparent header (--listen); mcp-chain exports its SERVER and
// CLIENT spans as OTLP/HTTP JSON to a test receiver, as does the backend
// (fixtures/otel-server.mjs), which records a span under the context it
// was handed. One trace, linked client -> mcp-chain SERVER -> mcp-chain
// CLIENT -> backend. A policy's refusal is a span event. A collector that
// never answers changes nothing for the calls, and the queue stays
// bounded (/metrics counts the dropped spans). Every scenario runs with
// telemetry off too: then the chain is unchanged, and the backend sees the
// client's own traceparent as it was sent.

import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SpanKind } from '@opentelemetry/api';

import { CHAIN, HERE, SKIP_NO_CHAIN, waitFor, writeConfig, descendants, isAlive, killAll, sleep } from './lib.mjs';
import { request, startChain } from './http_lib.mjs';

const BACKEND = path.join(HERE, 'fixtures', 'otel-server.mjs');
const CLIENT_INFO = { name: 'otel-client', version: '1.0.0' };
const TIMEOUT = 90_000;

/** An OTLP/HTTP JSON receiver on a free loopback port: every span it got, flattened. */
async function startReceiver() {
  const spans = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const doc = JSON.parse(body);
        for (const rs of doc.resourceSpans ?? []) {
          const service = (rs.resource?.attributes ?? []).find((a) => a.key === 'service.name')?.value?.stringValue;
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) spans.push({ ...s, service, scope: ss.scope, contentType: req.headers['content-type'] });
          }
        }
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/v1/traces`;
  return { url, spans, close: () => new Promise((r) => server.close(r)) };
}

/** A collector that accepts connections and never answers. */
async function startSilent() {
  const socks = [];
  const server = net.createServer((s) => { socks.push(s); s.on('error', () => {}); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/v1/traces`;
  return { url, close: () => { for (const s of socks) s.destroy(); return new Promise((r) => server.close(r)); } };
}

/** The client's own tracer, exporting to URL. */
function clientTracer(url) {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'otel-client' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url }))],
  });
  return { provider, tracer: provider.getTracer('otel-client') };
}

/** The traceparent of SPAN. */
function traceparent(span) {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
}

/** A configuration: the backend (exporting to BACKEND_URL), a policy refusing
 * secret_tool, and TELEMETRY when given. */
function config(backendUrl, telemetry) {
  return writeConfig({ command: process.execPath, args: [BACKEND], env: { OTEL_URL: backendUrl ?? '' } }, {
    name: 'otelbe',
    extra: {
      middleware: [{ use: 'policy', rules: [{ deny: ['secret_tool'] }] }],
      ...(telemetry ? { telemetry } : {}),
    },
  });
}

/** Attributes of an OTLP span as {key: value}. */
function attrs(s) {
  const out = {};
  for (const a of s.attributes ?? []) {
    const v = a.value ?? {};
    out[a.key] = v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
  }
  return out;
}

/** An MCP client over stdio through mcp-chain with CFG. */
async function stdioClient(cfg) {
  const transport = new StdioClientTransport({ command: CHAIN, args: ['--config', cfg], stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  await client.connect(transport);
  const pid = transport.pid;
  return {
    client, stderr: () => stderr,
    async close() {
      const tree = pid ? [pid, ...descendants(pid)] : [];
      try { await client.close(); } catch { /* closed */ }
      await waitFor(() => !tree.some(isAlive), { timeoutMs: 10_000, what: 'mcp-chain to exit' }).catch(() => {});
      killAll(tree.filter(isAlive));
    },
  };
}

/** An MCP client over Streamable HTTP at URL; HDR.tp, when set, goes as the traceparent header. */
async function httpClient(url, hdr) {
  const fetchWithTrace = (u, init = {}) => {
    const h = new Headers(init.headers);
    if (hdr.tp) h.set('traceparent', hdr.tp);
    if (hdr.ts) h.set('tracestate', hdr.ts);
    return fetch(u, { ...init, headers: h });
  };
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(url, { fetch: fetchWithTrace }));
  return client;
}

/** A call of TOOL inside a client span; META (a function of that span) its params._meta. */
async function tracedCall(ct, client, tool, meta) {
  const span = ct.tracer.startSpan(`client ${tool}`, { kind: SpanKind.CLIENT });
  let result, error;
  try {
    result = await client.callTool({ name: tool, arguments: {}, ...(meta ? { _meta: meta(span) } : {}) });
  } catch (e) {
    error = e;
  } finally {
    span.end();
    await ct.provider.forceFlush();
  }
  return { span, ctx: span.spanContext(), result, error };
}

/** The spans of trace ID that RECV holds, by who made them, once WANT of them are there. */
async function trace(recv, id, want) {
  await waitFor(() => recv.spans.filter((s) => s.traceId === id).length >= want.length &&
      want.every((w) => recv.spans.some((s) => s.traceId === id && w(s))),
    { timeoutMs: 20_000, what: `the spans of trace ${id}` });
  return recv.spans.filter((s) => s.traceId === id);
}

const isChain = (kind) => (s) => s.service === 'mcp-chain' && s.kind === kind;
const isBackend = (s) => s.service === 'otel-backend';
const isClient = (s) => s.service === 'otel-client';

/** Checks the linked trace of CALL (a traced tools/call of "traced"). */
async function checkLinked(recv, call, transport) {
  const id = call.ctx.traceId;
  const spans = await trace(recv, id, [isClient, isChain(2), isChain(3), isBackend]);
  const client = spans.find(isClient);
  const srv = spans.find(isChain(2));
  const cli = spans.find(isChain(3));
  const be = spans.find(isBackend);
  assert.equal(spans.filter((s) => s.service === 'mcp-chain').length, 2, 'one server and one client span');
  assert.equal(srv.parentSpanId, client.spanId, 'mcp-chain SERVER under the client span');
  assert.equal(cli.parentSpanId, srv.spanId, 'mcp-chain CLIENT under its SERVER span');
  assert.equal(be.parentSpanId, cli.spanId, 'the backend span under mcp-chain CLIENT');
  const seen = JSON.parse(call.result.content[0].text);
  assert.equal(seen.traceparent, `00-${id}-${cli.spanId}-01`, 'the backend got the CLIENT span context');
  assert.equal(srv.name, 'tools/call traced');
  assert.equal(srv.scope.name, 'mcp-chain');
  assert.equal(srv.contentType, 'application/json');
  const a = attrs(srv);
  assert.equal(a['mcp.method.name'], 'tools/call');
  assert.equal(a['gen_ai.tool.name'], 'traced');
  assert.equal(a['gen_ai.operation.name'], 'execute_tool');
  assert.equal(a['network.transport'], transport);
  assert.equal(a['mcp_chain.client'], CLIENT_INFO.name);
  assert.ok(a['jsonrpc.request.id'] !== undefined, 'jsonrpc.request.id');
  assert.ok(a['mcp.protocol.version'], 'mcp.protocol.version');
  if (transport === 'tcp') assert.match(a['mcp.session.id'], /^[0-9a-f]{32}$/);
  const b = attrs(cli);
  assert.equal(b['mcp_chain.backend'], 'otelbe');
  assert.equal(b['mcp.method.name'], 'tools/call');
  assert.ok(BigInt(srv.startTimeUnixNano) <= BigInt(cli.startTimeUnixNano));
  assert.ok(BigInt(cli.endTimeUnixNano) <= BigInt(srv.endTimeUnixNano));
  assert.equal(srv.status?.code ?? 0, 0);
  return { srv, cli, be, seen };
}

/** A refused call: its SERVER span has the policy's event and status ERROR. */
async function checkDenied(recv, call) {
  assert.ok(call.error || call.result?.isError, 'the call was refused');
  const spans = await trace(recv, call.ctx.traceId, [isClient, isChain(2)]);
  const srv = spans.find(isChain(2));
  assert.equal(spans.filter(isChain(3)).length, 0, 'nothing went to the backend');
  const ev = (srv.events ?? []).find((e) => e.name === 'mcp_chain.denied');
  assert.ok(ev, `a mcp_chain.denied event: ${JSON.stringify(srv.events)}`);
  const ea = attrs(ev);
  assert.equal(ea['mcp_chain.module'], 'policy');
  assert.equal(srv.status?.code, 2, 'status ERROR');
  // a refused tools/call is a tool result marked isError (the model reads why)
  assert.equal(attrs(srv)['error.type'], call.error ? String(call.error.code) : 'tool_error');
}

const TELEMETRY = (url, more = {}) => ({ endpoint: url, serviceName: 'mcp-chain', sampling: 1.0,
  exportIntervalMs: 100, ...more });

test('stdio: one trace from the client through mcp-chain to the backend; policy refusals as span events',
  { skip: SKIP_NO_CHAIN, timeout: TIMEOUT }, async () => {
    const recv = await startReceiver();
    const ct = clientTracer(recv.url);
    const c = await stdioClient(config(recv.url, TELEMETRY(recv.url)));
    try {
      const call = await tracedCall(ct, c.client, 'traced', (s) => ({ traceparent: traceparent(s), tracestate: 'vendor=x' }));
      assert.equal(call.error, undefined, String(call.error));
      const { seen, srv } = await checkLinked(recv, call, 'pipe');
      assert.equal(seen.tracestate, 'vendor=x', 'tracestate passed on');
      assert.equal(srv.traceState, 'vendor=x');
      await checkDenied(recv, await tracedCall(ct, c.client, 'secret_tool', (s) => ({ traceparent: traceparent(s) })));
      const failed = await tracedCall(ct, c.client, 'fails', (s) => ({ traceparent: traceparent(s) }));
      assert.equal(failed.result?.isError, true);
      const spans = await trace(recv, failed.ctx.traceId, [isChain(2), isChain(3)]);
      for (const s of spans.filter((x) => x.service === 'mcp-chain')) {
        assert.equal(attrs(s)['error.type'], 'tool_error');
        assert.equal(s.status?.code, 2);
      }
      // a request without a context: a trace of mcp-chain's own, passed on
      const plain = await c.client.callTool({ name: 'traced', arguments: {} });
      const own = JSON.parse(plain.content[0].text).traceparent;
      assert.match(own, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      const ownId = own.slice(3, 35);
      const ownSpans = await trace(recv, ownId, [isChain(2), isChain(3), isBackend]);
      assert.equal(ownSpans.find(isChain(2)).parentSpanId ?? '', '', 'a root span');
    } finally {
      await c.close();
      await ct.provider.shutdown();
      await recv.close();
    }
  });

test('stdio, telemetry off: the backend sees the client\'s traceparent as sent; mcp-chain exports nothing',
  { skip: SKIP_NO_CHAIN, timeout: TIMEOUT }, async () => {
    const recv = await startReceiver();
    const ct = clientTracer(recv.url);
    const c = await stdioClient(config(recv.url, null));
    try {
      const call = await tracedCall(ct, c.client, 'traced', (s) => ({ traceparent: traceparent(s), tracestate: 'vendor=x' }));
      const seen = JSON.parse(call.result.content[0].text);
      assert.equal(seen.traceparent, traceparent(call.span));
      assert.equal(seen.tracestate, 'vendor=x');
      const spans = await trace(recv, call.ctx.traceId, [isClient, isBackend]);
      assert.equal(spans.find(isBackend).parentSpanId, call.ctx.spanId, 'the backend under the client span');
      const denied = await tracedCall(ct, c.client, 'secret_tool', (s) => ({ traceparent: traceparent(s) }));
      assert.ok(denied.error || denied.result?.isError, 'still refused');
      const plain = await c.client.callTool({ name: 'traced', arguments: {} });
      assert.equal(JSON.parse(plain.content[0].text).traceparent, null, 'nothing added');
      await sleep(300);
      assert.equal(recv.spans.filter((s) => s.service === 'mcp-chain').length, 0);
    } finally {
      await c.close();
      await ct.provider.shutdown();
      await recv.close();
    }
  });

for (const on of [true, false]) {
  test(`--listen: the context in the HTTP traceparent header only (telemetry ${on ? 'on' : 'off'})`,
    { skip: SKIP_NO_CHAIN, timeout: TIMEOUT }, async () => {
      const recv = await startReceiver();
      const ct = clientTracer(recv.url);
      const chain = await startChain(null, { config: config(recv.url, on ? TELEMETRY(recv.url) : null) });
      const hdr = {};
      let client;
      try {
        client = await httpClient(chain.url, hdr);
        const span = ct.tracer.startSpan('client traced', { kind: SpanKind.CLIENT });
        hdr.tp = traceparent(span);
        const result = await client.callTool({ name: 'traced', arguments: {} });
        hdr.tp = undefined;
        span.end();
        await ct.provider.forceFlush();
        const call = { span, ctx: span.spanContext(), result };
        if (on) {
          await checkLinked(recv, call, 'tcp');
          const denied = await tracedCall(ct, client, 'secret_tool', (s) => ({ traceparent: traceparent(s) }));
          await checkDenied(recv, denied);
        } else {
          // nothing reads the header: the backend gets no context at all
          assert.equal(JSON.parse(result.content[0].text).traceparent, null);
          const meta = await tracedCall(ct, client, 'traced', (s) => ({ traceparent: traceparent(s) }));
          assert.equal(JSON.parse(meta.result.content[0].text).traceparent, traceparent(meta.span));
          await sleep(300);
          assert.equal(recv.spans.filter((s) => s.service === 'mcp-chain').length, 0);
        }
      } catch (e) {
        e.message += `\n--- mcp-chain stderr ---\n${chain.stderr.slice(-3000)}`;
        throw e;
      } finally {
        await client?.close().catch(() => {});
        const r = await chain.stop();
        assert.equal(r?.code, 0, `mcp-chain exited ${JSON.stringify(r)}`);
        await ct.provider.shutdown();
        await recv.close();
      }
    });
}

/** GET /metrics as {name: value} (unlabelled series). */
async function metrics(port) {
  const r = await request(port, { method: 'GET', path: '/metrics' });
  assert.equal(r.status, 200);
  const out = {};
  for (const line of r.body.split('\n')) {
    const m = /^([a-z_]+) (\d+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

/** N calls of "traced", C at a time; the time they took (ms). */
async function calls(client, n, c = 8) {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: c }, async () => {
    while (next < n) {
      next++;
      const r = await client.callTool({ name: 'traced', arguments: {} });
      assert.equal(r.isError, undefined);
    }
  }));
  return performance.now() - t0;
}

test('a collector that never answers: calls unaffected, the queue bounded, dropped spans counted',
  { skip: SKIP_NO_CHAIN, timeout: TIMEOUT }, async () => {
    const silent = await startSilent();
    const N = 300;
    const run = async (telemetry) => {
      const chain = await startChain(null, { config: config(null, telemetry) });
      let client;
      try {
        client = await httpClient(chain.url, {});
        await calls(client, 20);   // warm
        const ms = await calls(client, N);
        const m = await metrics(chain.port);
        return { ms, m };
      } catch (e) {
        e.message += `\n--- mcp-chain stderr ---\n${chain.stderr.slice(-3000)}`;
        throw e;
      } finally {
        await client?.close().catch(() => {});
        const r = await chain.stop();   // the flush at the stop is bounded
        assert.equal(r?.code, 0, `mcp-chain exited ${JSON.stringify(r)}`);
      }
    };
    try {
      const off = await run(null);
      assert.equal(off.m.mcp_chain_trace_spans_dropped_total, 0);
      const on = await run(TELEMETRY(silent.url, { queueSize: 16, batchSize: 8, exportTimeoutMs: 60_000 }));
      const total = 2 * (N + 20);
      assert.equal(on.m.mcp_chain_trace_spans_exported_total, 0);
      // at most one batch in flight and 16 queued: the rest was dropped
      assert.ok(on.m.mcp_chain_trace_spans_dropped_total >= total - 16 - 8,
        `dropped ${on.m.mcp_chain_trace_spans_dropped_total} of ${total}`);
      const ratio = on.ms / off.ms;
      assert.ok(ratio < 5, `with a silent collector the calls took ${ratio.toFixed(2)}x as long`);
    } finally {
      await silent.close();
    }
  });
