// /metrics of `mcp-chain --listen` as Prometheus' own linter reads it:
// `promtool check metrics` (Debian's prometheus package) must exit 0 and
// print no problem — names, HELP and TYPE lines, units and suffixes — for
// every family mcp-chain exposes: the front's, the chain's, two backends'
// and the shared store's (a redis section whose server is down, so that
// its families are there with their error counts).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, FIXTURE, tmpPath } from './lib.mjs';
import { withChain, request } from './http_lib.mjs';
import { freePort } from './cluster_lib.mjs';

const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';
const T = {
  timeout: 120_000,
  skip: SKIP_NO_FIXTURE || (existsSync(PROMTOOL) ? false : `${PROMTOOL} not installed (Debian: prometheus)`),
};

/** Runs promtool check metrics on TEXT: {code, out} (stdout and stderr together). */
function promtoolCheck(text) {
  return new Promise((resolve, reject) => {
    const p = spawn(PROMTOOL, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (c) => { out += c; });
    p.stderr.on('data', (c) => { out += c; });
    p.once('error', reject);
    p.once('close', (code) => resolve({ code, out }));
    p.stdin.end(text);
  });
}

test('promtool check metrics finds no problem in /metrics after traffic on two backends', T, async () => {
  // nothing listens on this port: the store stays down, its counters move
  const redisPort = await freePort();
  const backend = { command: FIXTURE, args: [], scope: 'shared' };
  const file = tmpPath('promtool.json');
  writeFileSync(file, JSON.stringify({
    mcpServers: { one: backend, two: backend },
    redis: { host: '127.0.0.1', port: redisPort, timeoutMs: 200, connectTimeoutMs: 200 },
    shutdownGraceMs: 2000,
  }, null, 2));

  await withChain(null, { config: file }, async (chain) => {
    const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
    await client.connect(new StreamableHTTPClientTransport(chain.url));
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'one__echo'), 'the first backend listed');
    assert.ok(tools.tools.some((t) => t.name === 'two__echo'), 'the second backend listed');
    await client.callTool({ name: 'one__echo', arguments: { text: 'a' } });
    await client.callTool({ name: 'two__echo', arguments: { text: 'b' } });
    const toolError = await client.callTool({ name: 'one__big', arguments: { bytes: -1 } });
    assert.equal(toolError.isError, true);
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
    await client.close();

    const r = await request(chain.port, { method: 'GET', path: '/metrics' });
    assert.equal(r.status, 200, r.body);
    // the families this test is about are all in the text promtool reads
    for (const family of ['mcp_chain_http_requests_total', 'mcp_chain_http_request_duration_seconds',
      'mcp_chain_requests_total', 'mcp_chain_backend_up', 'mcp_chain_redis_up'])
      assert.match(r.body, new RegExp(`^# TYPE ${family} `, 'm'), `${family} exposed`);
    assert.match(r.body, /^mcp_chain_backend_up\{backend="two"\} 1$/m, 'both backends counted');

    const { code, out } = await promtoolCheck(r.body);
    assert.equal(out.trim(), '', `promtool printed problems:\n${out}`);
    assert.equal(code, 0, `promtool exited ${code}`);
  });
});
