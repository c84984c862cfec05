// The 2026-07-28 era in front: the official TypeScript SDK v2 client
// (@modelcontextprotocol/client, versionNegotiation auto or pinned) on stdio
// through mcp-chain to handshake-era servers (server-everything, our C
// fixture). mcp-chain answers server/discover, checks every request's _meta,
// stamps resultType, turns the backend's requests (elicitation, sampling)
// into input_required round trips, and serves subscriptions/listen.
// Every scenario runs with no middleware ("chain") and with five modules
// that read every message ("modules").

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as V1Stdio } from '@modelcontextprotocol/sdk/client/stdio.js';

import {
  CHAIN, FIXTURE, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT, descendants, everythingServer,
  fixtureServer, isAlive, killAll, serverParams, sleep, waitFor,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };
const TF = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN || SKIP_NO_FIXTURE };
const MODES = CHAIN ? ['chain', 'modules'] : [];
const CLIENT_INFO = { name: 'era-front-it', version: '2.0.0' };
const CAPS = { elicitation: { form: {} }, sampling: {} };
/* the bridge: 2026-07-28 offered whatever is behind (these backends speak the handshake era) */
const BRIDGE = { eras: 'both' };

/** A stdio transport subclass: the v2 client then probes on this very connection. */
class InPlaceStdio extends StdioClientTransport {}

/** Records what the client sends and receives on TRANSPORT. */
function record(transport) {
  const wire = { sent: [], received: [] };
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => { wire.sent.push(structuredClone(msg)); return send(msg, opts); };
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() { return handler; },
    set(fn) { handler = fn && ((msg, extra) => { wire.received.push(structuredClone(msg)); return fn(msg, extra); }); },
  });
  return wire;
}

async function with2026(mode, server, { negotiation = { mode: 'auto' }, Transport = StdioClientTransport } = {}, fn) {
  const p = serverParams(mode, server, { extra: BRIDGE });
  const transport = new Transport({ command: p.command, args: p.args, env: p.env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const wire = record(transport);
  const client = new Client(CLIENT_INFO, { capabilities: CAPS, versionNegotiation: negotiation });
  const asked = [];
  client.setRequestHandler('elicitation/create', async (req) => {
    asked.push(req.method ?? 'elicitation/create');
    return { action: 'accept', content: { name: 'Ada', check: true, color: 'red', email: 'ada@example.com', integer: 3, number: 2.5 } };
  });
  client.setRequestHandler('sampling/createMessage', async (req) => {
    asked.push('sampling/createMessage');
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${req.params.messages?.[0]?.content?.text ?? ''}` } };
  });
  let tree = [];
  try {
    await client.connect(transport);
    if (transport.pid) tree = [transport.pid, ...descendants(transport.pid)];
    return await fn({ client, wire, asked });
  } catch (e) {
    if (stderr) e.message += `\n--- mcp-chain stderr (tail) ---\n${stderr.slice(-3000)}`;
    throw e;
  } finally {
    try { await client.close(); } catch { /* ignore */ }
    const left = tree.filter(isAlive);
    if (left.length) { await sleep(200); killAll(left.filter(isAlive)); }
  }
}

/** The tool list once server-everything has registered its conditional tools. */
async function toolsWhenComplete(client) {
  let names = [];
  await waitFor(async () => {
    names = (await client.listTools()).tools.map((t) => t.name);
    return names.includes('trigger-elicitation-request');
  }, { timeoutMs: 5000, what: 'the conditional tools' });
  return names;
}

for (const mode of MODES) {
  test(`[${mode}] auto negotiation lands on 2026-07-28; lists, calls and progress work`, T, async () => {
    await with2026(mode, everythingServer(), {}, async ({ client, wire }) => {
      assert.equal(client.getProtocolEra(), 'modern');
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
      // no initialize on this connection: the era is stateless
      assert.ok(!wire.sent.some((m) => m.method === 'initialize'));
      const names = await toolsWhenComplete(client);
      assert.ok(names.includes('echo'));
      const listed = wire.received.filter((m) => m.result?.tools);
      assert.ok(listed.every((m) => m.result.resultType === 'complete' && m.result.cacheScope && m.result.ttlMs >= 0));
      const r = await client.callTool({ name: 'echo', arguments: { message: 'stateless' } });
      assert.deepEqual(r.content, [{ type: 'text', text: 'Echo: stateless' }]);
      const sent = wire.sent.find((m) => m.method === 'tools/call');
      assert.equal(sent.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
      const progress = [];
      const long = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        { onprogress: (p) => progress.push(p.progress) });
      assert.match(long.content[0].text, /completed/);
      const notes = wire.received.filter((m) => m.method === 'notifications/progress');
      assert.equal(notes.length, 4, 'every progress notification crossed');
      const prompts = await client.listPrompts();
      assert.ok(prompts.prompts.length > 0);
      const res = await client.listResources();
      assert.ok(res.resources.length > 0);
      const read = await client.readResource({ uri: res.resources[0].uri });
      assert.ok(read.contents.length > 0);
    });
  });

  test(`[${mode}] elicitation and sampling complete through input_required round trips`, T, async () => {
    await with2026(mode, everythingServer(), {}, async ({ client, wire, asked }) => {
      await toolsWhenComplete(client);
      const e = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      assert.match(JSON.stringify(e.content), /Ada/);
      const s = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello there', maxTokens: 20 } });
      assert.match(JSON.stringify(s.content), /sampled: .*hello there/);
      assert.deepEqual(asked.sort(), ['elicitation/create', 'sampling/createMessage']);
      // on the wire: never a server->client request, always input_required and a retry
      assert.ok(!wire.received.some((m) => m.method && m.id !== undefined), 'no request reached the client');
      const rounds = wire.received.filter((m) => m.result?.resultType === 'input_required');
      assert.equal(rounds.length, 2);
      for (const round of rounds) {
        assert.equal(typeof round.result.requestState, 'string');
        const retry = wire.sent.find((m) => m.params?.requestState === round.result.requestState);
        assert.ok(retry, 'the client retried with the state');
        assert.ok(retry.params.inputResponses, 'with its answers');
        assert.notEqual(retry.id, round.id);
        const final = wire.received.find((m) => m.id === retry.id);
        assert.equal(final.result.resultType, 'complete');
      }
    });
  });

  test(`[${mode}] in-place probe: server/discover answered with versions, capabilities and serverInfo`, T, async () => {
    await with2026(mode, everythingServer(), { Transport: InPlaceStdio }, async ({ client, wire }) => {
      const probe = wire.sent[0];
      assert.equal(probe.method, 'server/discover');
      const answer = wire.received.find((m) => m.id === probe.id);
      assert.ok(answer.result, JSON.stringify(answer));
      assert.ok(answer.result.supportedVersions.includes('2026-07-28'));
      assert.ok(answer.result.capabilities.tools);
      assert.equal(answer.result.resultType, 'complete');
      assert.equal(answer.result._meta['io.modelcontextprotocol/serverInfo'].name, 'mcp-servers/everything');
      assert.equal(client.getProtocolEra(), 'modern');
      const r = await client.callTool({ name: 'echo', arguments: { message: 'x' } });
      assert.equal(r.content[0].text, 'Echo: x');
    });
  });

  test(`[${mode}] pinned 2026-07-28 works`, T, async () => {
    await with2026(mode, everythingServer(), { negotiation: { mode: { pin: '2026-07-28' } }, Transport: InPlaceStdio },
      async ({ client }) => {
        assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
        const r = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
        assert.match(r.content[0].text, /5/);
      });
  });

  test(`[${mode}] list_changed and resources/updated reach the client through subscriptions/listen only`, TF, async () => {
    await with2026(mode, fixtureServer(), {}, async ({ client, wire }) => {
      const before = wire.received.filter((m) => m.method === 'notifications/tools/list_changed').length;
      await client.callTool({ name: 'notify', arguments: { kind: 'tools' } });
      await sleep(100);
      assert.equal(wire.received.filter((m) => m.method === 'notifications/tools/list_changed').length, before,
        'nothing is sent before a listen asks for it');
      const sub = await client.listen({ toolsListChanged: true, resourceSubscriptions: ['fixture://a'] });
      await client.callTool({ name: 'notify', arguments: { kind: 'tools' } });
      await client.callTool({ name: 'notify', arguments: { kind: 'prompts' } });
      await client.callTool({ name: 'notify', arguments: { kind: 'updated' } });
      await waitFor(() => wire.received.some((m) => m.method === 'notifications/resources/updated'),
        { what: 'resources/updated' });
      const changed = wire.received.filter((m) => m.method === 'notifications/tools/list_changed');
      assert.equal(changed.length, before + 1);
      const listenId = wire.sent.find((m) => m.method === 'subscriptions/listen').id;
      assert.equal(changed.at(-1).params._meta['io.modelcontextprotocol/subscriptionId'], listenId);
      assert.ok(!wire.received.some((m) => m.method === 'notifications/prompts/list_changed'), 'not asked for');
      await sub.close();
      await sleep(50);
      await client.callTool({ name: 'notify', arguments: { kind: 'tools' } });
      await sleep(100);
      assert.equal(wire.received.filter((m) => m.method === 'notifications/tools/list_changed').length, before + 1);
    });
  });
}

test('two backends behind one endpoint: a stateless client lists both, and elicitation reaches it from the right one', TF, async () => {
  const { writeFileSync } = await import('node:fs');
  const { tmpPath } = await import('./lib.mjs');
  const se = everythingServer();
  const cfg = tmpPath(`era-two-${process.pid}.json`);
  writeFileSync(cfg, JSON.stringify({ ...BRIDGE, mcpServers: {
    everything: { command: process.execPath, args: se.args },
    fx: { command: FIXTURE, args: [] },
  } }));
  const transport = new StdioClientTransport({ command: CHAIN, args: ['--config', cfg], stderr: 'pipe' });
  const client = new Client(CLIENT_INFO, { capabilities: CAPS, versionNegotiation: { mode: 'auto' } });
  let asked = 0;
  client.setRequestHandler('elicitation/create', async () => { asked++; return { action: 'decline' }; });
  await client.connect(transport);
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.some((n) => n.includes('echo')) && names.some((n) => n.includes('elicit')), names.join(','));
    const elicit = names.find((n) => n === 'elicit' || n.endsWith('elicit'));
    const r = await client.callTool({ name: elicit, arguments: {} });
    assert.equal(asked, 1);
    assert.match(JSON.stringify(r), /decline/);
  } finally {
    await client.close();
  }
});

test('a handshake-era client on the same build still gets the handshake (SDK 1.32)', T, async () => {
  const p = serverParams('chain', everythingServer(), { extra: BRIDGE });
  const transport = new V1Stdio({ command: p.command, args: p.args, env: p.env, stderr: 'pipe' });
  const client = new V1Client({ name: 'v1', version: '1' }, { capabilities: {} });
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion().name, 'mcp-servers/everything');
    const r = await client.callTool({ name: 'echo', arguments: { message: 'legacy' } });
    assert.equal(r.content[0].text, 'Echo: legacy');
    assert.equal(r.resultType, undefined, 'no resultType for a handshake-era client');
  } finally {
    await client.close();
  }
});

test('a requestState that is forged, replayed or foreign is refused and nothing reaches the backend', TF, async () => {
  // raw lines: the SDK would never send a bad state itself
  const { spawn } = await import('node:child_process');
  const p = serverParams('chain', fixtureServer(), { extra: BRIDGE });
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
  const open = () => {
    const child = spawn(p.command, p.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const got = [];
    let buf = '';
    child.stdout.on('data', (c) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) { got.push(JSON.parse(buf.slice(0, i))); buf = buf.slice(i + 1); }
    });
    const send = (m) => child.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
    const reply = (id) => waitFor(() => got.find((m) => m.id === id), { what: `reply ${id}` });
    return { child, got, send, reply };
  };
  const a = open();
  const b = open();
  try {
    a.send({ id: 1, method: 'tools/call', params: { name: 'elicit', arguments: {}, _meta: meta } });
    const round = (await a.reply(1)).result;
    assert.equal(round.resultType, 'input_required');
    const key = Object.keys(round.inputRequests)[0];
    assert.equal(round.inputRequests[key].method, 'elicitation/create');
    // refused retries answer 'cancel', the genuine one 'decline': the call's result tells which reached the backend
    const retry = (id, state, action = 'cancel') => ({ id, method: 'tools/call',
      params: { name: 'elicit', arguments: {}, _meta: meta, inputResponses: { [key]: { action } }, requestState: state } });
    // forged: one character of the signature changed
    const forged = round.requestState.slice(0, -1) + (round.requestState.endsWith('0') ? '1' : '0');
    a.send(retry(2, forged));
    const e2 = await a.reply(2);
    assert.equal(e2.error.code, -32602);
    assert.match(e2.error.message, /requestState refused: .*forged/);
    // foreign: another mcp-chain (another session, another key)
    b.send({ id: 1, method: 'server/discover', params: { _meta: meta } });
    await b.reply(1);
    b.send(retry(2, round.requestState));
    const eb = await b.reply(2);
    assert.equal(eb.error.code, -32602);
    assert.match(eb.error.message, /requestState refused/);
    // genuine: accepted, the call ends with the backend's answer
    a.send(retry(3, round.requestState, 'decline'));
    const ok = await a.reply(3);
    assert.equal(ok.result.resultType, 'complete');
    assert.match(JSON.stringify(ok.result), /decline/);
    assert.doesNotMatch(JSON.stringify(ok.result), /cancel/, 'no refused retry reached the backend');
    // replayed
    a.send(retry(4, round.requestState));
    const e4 = await a.reply(4);
    assert.equal(e4.error.code, -32602);
    assert.match(e4.error.message, /requestState refused/);
  } finally {
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
  }
});

// ---------------------------------------------------------------------------
// the HTTP front (--listen): 2026-07-28 clients have no session

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { writeConfig } from './lib.mjs';
import { withChain, request as httpRequest } from './http_lib.mjs';
import { writeFileSync } from 'node:fs';

async function withListen(server, fn) {
  return withChain(server, { extra: BRIDGE }, (chain) => fn(chain.url.href));
}

async function httpClient(url) {
  const seen = [];
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: async (u, init) => {
      const res = await fetch(u, init);
      seen.push({ method: init?.method, status: res.status, sid: res.headers.get('mcp-session-id') });
      return res;
    },
  });
  const client = new Client(CLIENT_INFO, { capabilities: CAPS, versionNegotiation: { mode: 'auto' } });
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada', check: true, color: 'red', email: 'ada@example.com', integer: 3, number: 2.5 } }));
  client.setRequestHandler('sampling/createMessage', async () => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text: 'sampled over http' } }));
  await client.connect(transport);
  return { client, seen };
}

test('[http] a 2026-07-28 client: no session, lists, calls, progress, input_required across POSTs', T, async () => {
  await withListen(everythingServer(), async (url) => {
    const { client, seen } = await httpClient(url);
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
      const names = await toolsWhenComplete(client);
      assert.ok(names.includes('echo'));
      const r = await client.callTool({ name: 'echo', arguments: { message: 'over http' } });
      assert.equal(r.content[0].text, 'Echo: over http');
      const progress = [];
      await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
        { onprogress: (p) => progress.push(p.progress) });
      assert.ok(progress.length >= 2, `progress streamed: ${progress.length}`);
      const e = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      assert.match(JSON.stringify(e.content), /Ada/);
      const s = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'p', maxTokens: 5 } });
      assert.match(JSON.stringify(s.content), /sampled over http/);
      assert.ok(seen.every((x) => !x.sid), 'no Mcp-Session-Id in this era');
      assert.ok(seen.every((x) => x.method === 'POST'), seen.map((x) => x.method).join(','));
    } finally {
      await client.close();
    }
  });
});

test('[http] x-mcp-header: a 2026-07-28 call must carry the arguments its tool marks as Mcp-Param-* headers', T, async () => {
  await withListen(SERVER2026, async (url) => {
    const { client } = await httpClient(url);
    try {
      // the SDK client mirrors region itself once it has seen the list, as a conforming client does
      const tool = (await client.listTools()).tools.find((t) => t.name === 'deploy');
      assert.equal(tool.inputSchema.properties.region['x-mcp-header'], 'Region');
      const r = await client.callTool({ name: 'deploy', arguments: { region: 'eu-west', replicas: 2 } });
      assert.equal(r.content[0].text, 'deployed 2 to eu-west');
    } finally {
      await client.close();
    }
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'deploy', arguments: { region: 'eu-west' }, _meta: meta } };
    const post = (headers) => fetch(url, { method: 'POST', body: JSON.stringify(call), headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'deploy', ...headers } });
    for (const [name, headers, text] of [
      ['missing', {}, /Mcp-Param-Region header is required/],
      ['different', { 'mcp-param-region': 'us-east' }, /Mcp-Param-Region header does not match/],
    ]) {
      const res = await post(headers);
      assert.equal(res.status, 400, name);
      const body = await res.json();
      assert.deepEqual([body.id, body.error.code], [7, -32020], name);
      assert.match(body.error.message, text, name);
    }
    const res = await post({ 'mcp-param-region': `=?base64?${Buffer.from('eu-west').toString('base64')}?=` });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /deployed 1 to eu-west/);
  });
});

test('[http] x-mcp-header before any list was served: mcp-chain fetches the list itself, so the first calls are checked too', T, async () => {
  // a client may have listed on another instance behind the same load balancer, or before a restart
  await withChain(SERVER2026, { args: ['--log-level', 'debug'] }, async (chain) => {
    const url = chain.url.href;
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const post = (id, headers) => fetch(url, { method: 'POST',
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'deploy', arguments: { region: 'eu-west' }, _meta: meta } }),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'deploy', ...headers } });
    // three at once, before anything was listed: all held while the one fetch runs
    const [missing, wrong, right] = await Promise.all([post(1, {}), post(2, { 'mcp-param-region': 'us-east' }),
      post(4, { 'mcp-param-region': 'eu-west' })]);
    assert.equal(right.status, 200);
    assert.match(await right.text(), /deployed 1 to eu-west/);
    assert.equal(missing.status, 400);
    const m = await missing.json();
    assert.deepEqual([m.id, m.error.code], [1, -32020]);
    assert.match(m.error.message, /Mcp-Param-Region header is required/);
    assert.equal(wrong.status, 400);
    assert.match((await wrong.json()).error.message, /Mcp-Param-Region header does not match/);
    const good = await post(3, { 'mcp-param-region': 'eu-west' });
    assert.equal(good.status, 200);
    assert.match(await good.text(), /deployed 1 to eu-west/);
    assert.equal((chain.stderr.match(/fetching the tool list to check Mcp-Param/g) || []).length, 1, chain.stderr);
  });
});

test('[http] 2026-07-28 requests: headers checked against the body, GET and DELETE refused', T, async () => {
  await withListen(everythingServer(), async (url) => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const post = (body, headers) => fetch(url, { method: 'POST', body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } });
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { message: 'h' }, _meta: meta } };
    const good = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' };
    const ok = await post(call, good);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('mcp-session-id'), null);
    const text = await ok.text();
    assert.match(text, /Echo: h/);
    assert.match(text, /"resultType":"complete"/);
    for (const [name, headers] of [
      ['Mcp-Method mismatch', { ...good, 'mcp-method': 'tools/list' }],
      ['Mcp-Name mismatch', { ...good, 'mcp-name': 'other' }],
      ['Mcp-Name missing', { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call' }],
      ['version mismatch', { ...good, 'mcp-protocol-version': '2025-11-25' }],
    ]) {
      const res = await post(call, headers);
      assert.equal(res.status, 400, name);
      const body = await res.json();
      assert.equal(body.error.code, -32020, `${name}: ${JSON.stringify(body)}`);
    }
    // the Base64 form of a header, and whitespace around a value
    const b64 = { ...good, 'mcp-name': `=?base64?${Buffer.from('echo').toString('base64')}?=` };
    assert.equal((await post(call, b64)).status, 200);
    assert.equal((await post(call, { ...good, 'mcp-name': '  echo ' })).status, 200);
    // initialize with the era's header and no session: not part of the era
    const init26 = await post({ jsonrpc: '2.0', id: 5, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'initialize' });
    assert.equal(init26.status, 404);
    assert.deepEqual(await init26.json().then((b) => [b.id, b.error.code]), [5, -32601]);
    // what the era answers with an HTTP status: no envelope, an unknown version, a removed method
    const noCaps = { ...call, params: { ...call.params, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } };
    let res = await post(noCaps, good);
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json().then((b) => [b.id, b.error.code]), [1, -32602]);
    res = await post({ ...call, params: { ...call.params, _meta: { ...meta, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } },
      { ...good, 'mcp-protocol-version': '2099-01-01' });
    assert.equal(res.status, 400);
    const unsupported = await res.json();
    assert.equal(unsupported.error.code, -32022);
    assert.ok(unsupported.error.data.supported.includes('2026-07-28'));
    res = await post({ jsonrpc: '2.0', id: 9, method: 'ping', params: { _meta: meta } },
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'ping' });
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json().then((b) => [b.id, b.error.code]), [9, -32601]);
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(url, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2026-07-28' } });
      assert.equal(res.status, 405, method);
    }
    // the handshake era on the same endpoint still works
    const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '1' } } }, {});
    assert.equal(init.status, 200);
    assert.ok(init.headers.get('mcp-session-id'));
  });
});

test('[http] subscriptions/listen: list_changed on the listen stream', TF, async () => {
  await withListen(fixtureServer(), async (url) => {
    const { client } = await httpClient(url);
    const got = [];
    try {
      const sub = await client.listen({ toolsListChanged: true });
      client.setNotificationHandler('notifications/tools/list_changed', (n) => { got.push(n); });
      await client.callTool({ name: 'notify', arguments: { kind: 'tools' } });
      await waitFor(() => got.length > 0, { what: 'list_changed on the listen stream' });
      await client.callTool({ name: 'notify', arguments: { kind: 'prompts' } });
      await sub.close();
    } finally {
      await client.close();
    }
  });
});

test('the log module records the client\'s era', TF, async () => {
  const { readFileSync } = await import('node:fs');
  const { tmpPath } = await import('./lib.mjs');
  const file = tmpPath(`era-log-${process.pid}.jsonl`);
  const cfg = writeConfig(fixtureServer(), { extra: { ...BRIDGE, middleware: [{ use: 'log', sink: 'file', path: file }] } });
  const transport = new StdioClientTransport({ command: CHAIN, args: ['--config', cfg], stderr: 'pipe' });
  const client = new Client(CLIENT_INFO, { capabilities: CAPS, versionNegotiation: { mode: 'auto' } });
  await client.connect(transport);
  try {
    await client.callTool({ name: 'echo', arguments: { text: 'logged' } });
  } finally {
    await client.close();
  }
  const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const call = lines.find((l) => l.method === 'tools/call');
  assert.equal(call.protocol, '2026-07-28', JSON.stringify(call));
  assert.equal(call.client, CLIENT_INFO.name);
});

test('policy "ask" asks a 2026-07-28 client with input_required; its answer decides', TF, async () => {
  const cfg = writeConfig(fixtureServer(), { extra: { ...BRIDGE, middleware: [{ use: 'policy', rules: [{ ask: ['echo'] }] }] } });
  const transport = new StdioClientTransport({ command: CHAIN, args: ['--config', cfg], stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; });
  const client = new Client(CLIENT_INFO, { capabilities: CAPS, versionNegotiation: { mode: 'auto' } });
  const answers = [{ action: 'accept', content: {} }, { action: 'decline' }];
  const asked = [];
  client.setRequestHandler('elicitation/create', async (req) => { asked.push(req.params.message); return answers.shift(); });
  await client.connect(transport);
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    const ok = await client.callTool({ name: 'echo', arguments: { text: 'allowed' } });
    assert.ok(!ok.isError, JSON.stringify(ok));
    assert.match(asked[0], /"echo"/);
    const no = await client.callTool({ name: 'echo', arguments: { text: 'refused' } });
    assert.equal(no.isError, true);
    assert.equal(asked.length, 2);
  } catch (e) {
    e.message += `\n--- mcp-chain stderr ---\n${stderr.slice(-2000)}`;
    throw e;
  } finally {
    await client.close();
  }
});

// ---------------------------------------------------------------------------
// 2026-07-28 on both sides: an SDK v2 client in 2026 mode through mcp-chain to
// a server that speaks only 2026-07-28 (fixtures/server2026.mjs)

const SERVER2026 = { command: 'node', args: [new URL('./fixtures/server2026.mjs', import.meta.url).pathname] };

for (const mode of MODES) {
  test(`[${mode}] a 2026-07-28 client through mcp-chain to a 2026-only server: calls, progress, input_required rounds, listen`, T, async () => {
    await with2026(mode, SERVER2026, {}, async ({ client, wire }) => {
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names.sort(), ['ask', 'bump', 'deploy', 'echo', 'slow']);
      assert.equal((await client.callTool({ name: 'echo', arguments: { text: 'both ways' } })).content[0].text, 'echo: both ways');
      const progress = [];
      await client.callTool({ name: 'slow', arguments: { steps: 3 } }, { onprogress: (p) => progress.push(p.progress) });
      assert.ok(progress.length >= 2, `progress: ${progress.length}`);
      const r = await client.callTool({ name: 'ask', arguments: { rounds: 2 } });
      assert.match(r.content[0].text, /hello Ada,Ada \(2 rounds\)/);
      assert.equal(wire.received.filter((m) => m.result?.resultType === 'input_required').length, 2);
      const sub = await client.listen({ resourcesListChanged: true, resourceSubscriptions: ['test://counter'] });
      await client.callTool({ name: 'bump', arguments: {} });
      await waitFor(() => wire.received.some((m) => m.method === 'notifications/resources/updated'),
        { what: 'resources/updated through both eras' });
      await sub.close();
      const prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'Bea' } });
      assert.match(JSON.stringify(prompt.messages), /Hello, Bea!/);
    });
  });
}

// inputTimeoutMs bounds how long a call waits for a 2026-07-28 client's
// retry after input_required; a reload (SIGHUP) sets it for the calls that
// start afterwards, on the HTTP front as on stdio.
test('[http] inputTimeoutMs: a retry after it is refused as expired; after a reload the new value holds', TF, async () => {
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
  const file = writeConfig({ ...fixtureServer(), scope: 'shared' }, { extra: { ...BRIDGE, inputTimeoutMs: 1000 } });
  await withChain(null, { config: file }, async (chain) => {
    const post = async (body) => {
      const r = await httpRequest(chain.port, { body: JSON.stringify({ jsonrpc: '2.0', ...body }), headers: {
        'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': body.method, 'Mcp-Name': body.params.name } });
      const text = r.headers['content-type']?.startsWith('text/event-stream')
        ? r.body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).pop() : r.body;
      return JSON.parse(text);
    };
    const call = (id) => post({ id, method: 'tools/call', params: { name: 'elicit', arguments: {}, _meta: meta } });
    const retry = (id, round) => post({ id, method: 'tools/call', params: { name: 'elicit', arguments: {},
      _meta: meta, requestState: round.requestState,
      inputResponses: { [Object.keys(round.inputRequests)[0]]: { action: 'decline' } } } });

    const r1 = (await call(1)).result;
    assert.equal(r1.resultType, 'input_required', JSON.stringify(r1));
    await sleep(1600);
    const late = await retry(2, r1);
    assert.equal(late.error?.code, -32602, JSON.stringify(late));
    assert.match(late.error.message, /requestState refused/);
    await waitFor(() => /expired/.test(chain.stderr), { what: 'the expiry logged' });

    writeFileSync(file, JSON.stringify({ ...BRIDGE, mcpServers: { backend: { command: fixtureServer().command,
      args: fixtureServer().args ?? [], scope: 'shared' } }, inputTimeoutMs: 20000 }));
    const before = chain.stderr.length;
    chain.proc.kill('SIGHUP');
    await waitFor(() => chain.stderr.slice(before).includes('reload: done'), { what: 'the reload' });
    const r2 = (await call(3)).result;
    assert.equal(r2.resultType, 'input_required', JSON.stringify(r2));
    await sleep(1600);
    const ok = await retry(4, r2);
    assert.equal(ok.result?.resultType, 'complete', JSON.stringify(ok));
    assert.match(JSON.stringify(ok.result), /decline/);
  });
});
