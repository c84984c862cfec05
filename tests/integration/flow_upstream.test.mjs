// The "mcp-flow" upstream: mcp-chain as an MCP-Flow client of another
// server (src/external/be_flow.c).
//
// (a) chain to chain: the official SDK client -> mcp-chain A on stdio with
//     an mcp-flow upstream -> mcp-chain B (--flow 127.0.0.1:0, its own
//     self-signed certificate pinned by A) in front of server-everything:
//     the lists and a few calls answer as server-everything does directly;
//     and in front of fixtures/flow-backend.mjs: an 8 MiB blob that B sends
//     on an execution stream arrives through A intact.
// (b) Deno's MCP-Flow server (tests/fixtures/flow-server.ts) behind A: its
//     tools, echo, and a 1 MiB execution stream as a resource blob.
//
// Every process is started here on loopback and stopped by PID.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  HERE, ROOT, SKIP_NO_CHAIN, connect, everythingServer, isAlive, killAll, scrubTimes, tmpPath,
  waitFor,
} from './lib.mjs';
import { startChain } from './http_lib.mjs';
import { DENO, SKIP_NO_DENO, makeCert } from './flow_lib.mjs';

const SERVER_TS = path.join(ROOT, 'tests', 'fixtures', 'flow-server.ts');
const FLOW_BACKEND = { command: 'node', args: [path.join(HERE, 'fixtures', 'flow-backend.mjs')] };

let counter = 0;
/** A config file for mcp-chain A with one mcp-flow upstream ENTRY. */
function upstreamConfig(entry) {
  const file = tmpPath(`flow-upstream-${process.pid}-${++counter}.json`);
  writeFileSync(file, JSON.stringify({ mcpServers: { backend: { type: 'mcp-flow', ...entry } } }, null, 2));
  return file;
}

/** The SDK client through mcp-chain A on stdio, A's config FILE. */
function throughA(server, file) {
  // an 8 MiB blob is an 11 MiB line: above the SDK's default read buffer
  return connect('chain', server, { chainArgs: () => ['--config', file], maxBufferSize: 64 * 1024 * 1024 });
}

/** The pattern byte i = i % 251, N bytes. */
function pattern(n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = i % 251;
  return b;
}

/** What a scenario sees of server-everything: lists and a few calls. */
async function scenario(client) {
  const out = {};
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
  out.resources = (await client.listResources()).resources.map((r) => r.uri).sort();
  out.echo = await client.callTool({ name: 'echo', arguments: { message: 'hello over MCP-Flow' } });
  out.add = await client.callTool({ name: out.tools.includes('get-sum') ? 'get-sum' : 'add', arguments: { a: 2, b: 40 } });
  const first = (await client.listResources()).resources[0];
  out.read = await client.readResource({ uri: first.uri });
  const prompt = (await client.listPrompts()).prompts.find((p) => !p.arguments?.some((a) => a.required));
  if (prompt) out.prompt = await client.getPrompt({ name: prompt.name, arguments: {} });
  return scrubTimes(out);
}

const chains = [];
const procs = [];
after(async () => {
  for (const c of chains) await c.stop();
  const pids = procs.map((p) => p.pid).filter(Boolean);
  killAll(pids, 'SIGTERM');
  await waitFor(() => pids.every((pid) => !isAlive(pid)), { timeoutMs: 10_000, what: 'the Deno server to end' })
    .catch(() => killAll(pids, 'SIGKILL'));
});

test('chain to chain: server-everything through two mcp-chains answers as directly',
  { skip: SKIP_NO_CHAIN, timeout: 120_000 }, async () => {
    const b = await startChain(everythingServer(), { listen: null, flow: '127.0.0.1:0' });
    chains.push(b);
    assert.ok(b.flowUrl && b.flowHash, `B printed no MCP-Flow url and hash:\n${b.stderr}`);
    const file = upstreamConfig({ url: b.flowUrl, certificateHash: b.flowHash });
    const direct = await connect('direct', everythingServer());
    let want;
    try { want = await scenario(direct.client); } finally { await direct.close(); }
    const a = await throughA(everythingServer(), file);
    let got;
    try { got = await scenario(a.client); } finally { await a.close(); }
    assert.ok(want.tools.length > 3, `server-everything lists its tools: ${want.tools}`);
    assert.deepEqual(got, want);
  });

test('chain to chain: an 8 MiB blob on an execution stream arrives intact',
  { skip: SKIP_NO_CHAIN, timeout: 180_000 }, async () => {
    const b = await startChain(FLOW_BACKEND, { listen: null, flow: '127.0.0.1:0' });
    chains.push(b);
    const file = upstreamConfig({ url: b.flowUrl, certificateHash: b.flowHash });
    const a = await throughA(FLOW_BACKEND, file);
    try {
      const n = 8 * 1024 * 1024;
      const r = await a.client.callTool({ name: 'big', arguments: { bytes: n } }, undefined, { timeout: 120_000 });
      const item = r.content?.[0];
      assert.equal(item?.type, 'resource', `a resource item: ${JSON.stringify(r).slice(0, 300)}`);
      assert.equal(item.resource.uri, 'flow://big');
      assert.equal(item.resource.mimeType, 'application/octet-stream');
      const bytes = Buffer.from(item.resource.blob, 'base64');
      assert.equal(bytes.length, n);
      assert.ok(bytes.equals(pattern(n)), 'the blob is the pattern i % 251');
      const echo = await a.client.callTool({ name: 'echo', arguments: { text: 'after' } });
      assert.deepEqual(echo.content, [{ type: 'text', text: 'after' }]);
    } finally {
      await a.close();
    }
  });

test('a wrong certificate hash: the upstream does not come up',
  { skip: SKIP_NO_CHAIN, timeout: 60_000 }, async () => {
    const b = await startChain(FLOW_BACKEND, { listen: null, flow: '127.0.0.1:0' });
    chains.push(b);
    const file = upstreamConfig({ url: b.flowUrl, certificateHash: '00'.repeat(32) });
    await assert.rejects(async () => {
      const a = await throughA(FLOW_BACKEND, file);
      try { await a.client.listTools(); } finally { await a.close(); }
    }, /certificate does not match the pin/);
  });

/** Starts the Deno MCP-Flow server; its url and certificate hash. */
async function startDeno() {
  const { cert, key, hash } = makeCert('flow-upstream');
  const p = spawn(DENO, ['run', '--unstable-net', '--v8-flags=--expose-gc', '--allow-net', '--allow-read',
    SERVER_TS, '--port', '0', '--cert', cert, '--key', key], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(p);
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const port = await waitFor(() => /LISTENING (\d+)/.exec(out)?.[1],
    { timeoutMs: 60_000, what: `flow-server LISTENING (stderr: ${err})` });
  return { url: `https://127.0.0.1:${port}/mcp-flow`, hash };
}

test('Deno\'s MCP-Flow server behind the mcp-flow upstream',
  { skip: SKIP_NO_CHAIN || SKIP_NO_DENO, timeout: 120_000 }, async () => {
    const srv = await startDeno();
    const file = upstreamConfig({ url: srv.url, certificateHash: Buffer.from(srv.hash, 'hex').toString('base64') });
    const a = await throughA(FLOW_BACKEND, file);
    try {
      const tools = (await a.client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(tools, ['big', 'echo', 'slow']);
      const echo = await a.client.callTool({ name: 'echo', arguments: { text: 'hi Deno' } });
      assert.deepEqual(echo.content, [{ type: 'text', text: 'hi Deno' }]);
      const n = 1024 * 1024;
      const r = await a.client.callTool({ name: 'big', arguments: { bytes: n } }, undefined, { timeout: 60_000 });
      const item = r.content?.[0];
      assert.equal(item?.type, 'resource', `a resource item: ${JSON.stringify(r).slice(0, 300)}`);
      assert.match(item.resource.uri, /^mcp-flow:\/\/stream\/\d+$/);
      const bytes = Buffer.from(item.resource.blob, 'base64');
      assert.equal(bytes.length, n);
      assert.ok(bytes.equals(pattern(n)), 'the blob is the pattern i % 251');
    } finally {
      await a.close();
    }
  });
