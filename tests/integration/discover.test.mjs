// @modelcontextprotocol/client v2 with versionNegotiation {mode: 'auto'}:
// connect() probes with `server/discover` (2026-07-28 era); mcp-chain answers
// -32601, so the client falls back to the 2025 `initialize` handshake.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import {
  MODES, TEST_TIMEOUT, descendants, everythingServer, isAlive, killAll, serverParams, sleep,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT };
const SERVER = everythingServer();
const CLIENT_INFO = { name: 'mcp-chain-it-v2', version: '2.0.0' };

/** A subclass of the SDK stdio transport: the v2 client then probes in place (same process). */
class InPlaceStdioTransport extends StdioClientTransport {}

function record(transport) {
  const wire = { sent: [], received: [] };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => { wire.sent.push(structuredClone(msg)); return send(msg, opts); };
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() { return handler; },
    set(fn) {
      handler = fn && ((msg, extra) => { wire.received.push(structuredClone(msg)); return fn(msg, extra); });
    },
  });
  return wire;
}

async function withV2(mode, TransportClass, negotiation, fn) {
  const p = serverParams(mode, SERVER);
  const transport = new TransportClass({ command: p.command, args: p.args, env: p.env, cwd: p.cwd, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const wire = record(transport);
  const client = new Client(CLIENT_INFO, { capabilities: {}, versionNegotiation: negotiation });
  let tree = [];
  try {
    return await fn({ client, transport, wire, connect: async () => {
      await client.connect(transport);
      if (transport.pid) tree = [transport.pid, ...descendants(transport.pid)];
    } });
  } catch (e) {
    if (stderr) e.message += `\n--- ${mode} stderr (tail) ---\n${stderr.slice(-3000)}`;
    throw e;
  } finally {
    try { await client.close(); } catch { /* ignore */ }
    const left = tree.filter(isAlive);
    if (left.length) { await sleep(200); killAll(left.filter(isAlive)); }
  }
}

for (const mode of MODES) {
  test(`[${mode}] auto negotiation (disposable sibling probe) falls back to initialize; tools work`, T, async () => {
    await withV2(mode, StdioClientTransport, { mode: 'auto' }, async ({ client, wire, connect }) => {
      await connect();
      assert.equal(client.getProtocolEra(), 'legacy');
      assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything');
      assert.ok(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'].includes(client.getNegotiatedProtocolVersion()),
        `negotiated ${client.getNegotiatedProtocolVersion()}`);
      // the session transport itself only ever saw the legacy handshake
      assert.equal(wire.sent[0].method, 'initialize');
      const tools = await client.listTools();
      assert.ok(tools.tools.some((x) => x.name === 'echo'));
      const r = await client.callTool({ name: 'echo', arguments: { message: 'v2 client' } });
      assert.deepEqual(r.content, [{ type: 'text', text: 'Echo: v2 client' }]);
    });
  });

  test(`[${mode}] auto negotiation probing in place: server/discover -> -32601, then initialize on the same connection`, T, async () => {
    await withV2(mode, InPlaceStdioTransport, { mode: 'auto' }, async ({ client, wire, connect }) => {
      await connect();
      const probe = wire.sent[0];
      assert.equal(probe.method, 'server/discover', 'first message is the probe');
      const answer = wire.received.find((m) => m.id === probe.id);
      assert.ok(answer, 'probe answered');
      assert.equal(answer.jsonrpc, '2.0');
      assert.equal(answer.result, undefined);
      assert.equal(answer.error?.code, -32601, `probe answer: ${JSON.stringify(answer)}`);
      assert.equal(typeof answer.error.message, 'string');
      assert.equal(wire.sent[1].method, 'initialize', 'fallback to initialize');
      assert.equal(wire.sent[1].params.clientInfo.name, CLIENT_INFO.name);
      const init = wire.received.find((m) => m.id === wire.sent[1].id);
      assert.equal(init.result.serverInfo.name, 'mcp-servers/everything');
      assert.equal(client.getProtocolEra(), 'legacy');
      const tools = await client.listTools();
      assert.ok(tools.tools.length > 5);
      assert.deepEqual(await client.ping(), {});
    });
  });

  test(`[${mode}] pinned modern version fails loudly and promptly (no fallback)`, T, async () => {
    await withV2(mode, InPlaceStdioTransport, { mode: { pin: '2026-07-28' } }, async ({ wire, connect }) => {
      const t0 = Date.now();
      await assert.rejects(connect(), (e) => {
        assert.match(String(e.message), /pinned protocol version 2026-07-28|Version negotiation failed/);
        return true;
      });
      assert.ok(Date.now() - t0 < 10_000, 'rejected without waiting for a timeout');
      assert.equal(wire.sent[0].method, 'server/discover');
      assert.equal(wire.received.find((m) => m.id === wire.sent[0].id)?.error?.code, -32601);
    });
  });
}
