// A 2026-07-28 backend behind a handshake-era client.
//
// The SDK 1.32 client (handshake era) talks to mcp-chain, whose one backend
// is fixtures/server2026.mjs, a server written with @modelcontextprotocol/
// server 2.x that speaks only 2026-07-28 (it refuses initialize), on stdio
// and over Streamable HTTP; each case runs without modules and with a `log`
// module that reads every message, and must give the same results:
// initialize (the server's identity, instructions and capabilities from
// server/discover), the three lists, calls, progress, an elicitation the
// server asks for with input_required over two rounds (the client's
// handler answers each; the call's result arrives), a failed elicitation,
// a cancelled round, resources/subscribe -> resources/updated and
// list_changed, prompts/get, resources/read, ping and logging/setLevel.
// Over HTTP the server logs the headers of every POST: the era's three
// headers, no session.
//
// Then the era choice: "auto" on stdio never sends server/discover to a
// legacy server (fixtures/legacy_no_probe.mjs exits on one); "handshake"
// pinned never probes (a 2026-only server then fails to initialize, and
// the chain says why); "auto" over HTTP falls back to initialize with a
// legacy Streamable HTTP server (server-everything).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ElicitRequestSchema, ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema,
  CancelledNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { CHAIN, HERE, SE_ENTRY, SKIP_NO_CHAIN, descendants, isAlive, killAll, outcome, sleep, tmpPath, waitFor } from './lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_CHAIN };
const SERVER2026 = path.join(HERE, 'fixtures', 'server2026.mjs');
const LEGACY = path.join(HERE, 'fixtures', 'legacy_no_probe.mjs');
const SANITIZER_REPORT = /ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

let cfgCount = 0;
function writeCfg(cfg) {
  const file = tmpPath(`era-${process.pid}-${++cfgCount}.json`);
  writeFileSync(file, JSON.stringify({ shutdownGraceMs: 500, ...cfg }, null, 2));
  return file;
}

/** Starts mcp-chain on CFG with an SDK 1.32 client: {client, stderr(), close()}. */
async function openChain(cfg, { setup, capabilities = {} } = {}) {
  const env = {};
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS', 'PATH'])
    if (process.env[k]) env[k] = process.env[k];
  env.MCP_CHAIN_LOG = 'debug';
  const transport = new StdioClientTransport({ command: CHAIN, args: ['--config', writeCfg(cfg)], env, stderr: 'pipe' });
  let err = '';
  let errEnded = false;
  transport.stderr?.on('data', (c) => { err += c; if (process.env.IT_VERBOSE) process.stderr.write(c); });
  transport.stderr?.on('end', () => { errEnded = true; });
  const client = new Client({ name: 'era-test', version: '1.0.0' }, { capabilities });
  client.onerror = () => {};
  setup?.(client);
  const s = {
    client, stderr: () => err, closed: false,
    async close() {
      if (s.closed) return;
      s.closed = true;
      const pid = transport.pid;
      const tree = pid ? [pid, ...descendants(pid)] : [];
      try { await client.close(); } catch { /* ignore */ }
      const t0 = Date.now();
      while (tree.some(isAlive) && Date.now() - t0 < 4000) await sleep(25);
      const left = tree.filter(isAlive);
      killAll(left);
      const t1 = Date.now();
      while (!errEnded && Date.now() - t1 < 1000) await sleep(20);
      const m = err.match(SANITIZER_REPORT);
      if (m) throw new Error(`sanitizer report from mcp-chain:\n${err.slice(Math.max(0, err.indexOf(m[0]) - 200), err.indexOf(m[0]) + 4000)}`);
      if (left.length) throw new Error(`mcp-chain did not exit on its own:\n${err.slice(-2000)}`);
    },
  };
  try {
    await client.connect(transport);
  } catch (e) {
    await s.close().catch(() => {});
    e.message += `\n--- mcp-chain stderr ---\n${err.slice(-3000)}`;
    throw e;
  }
  return s;
}

async function withChain(cfg, opts, fn) {
  const s = await openChain(cfg, opts);
  let failed = false;
  try {
    return await fn(s);
  } catch (e) {
    failed = true;
    e.message += `\n--- mcp-chain stderr ---\n${s.stderr().slice(-5000)}`;
    throw e;
  } finally {
    try { await s.close(); } catch (e) { if (!failed) throw e; }
  }
}

/** Runs server2026 over HTTP: {url, log, stop()}. */
async function startHttp2026() {
  const proc = spawn(process.execPath, [SERVER2026, '--http'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = { text: '', out: '' };
  proc.stderr.on('data', (c) => { log.text += c; });
  proc.stdout.on('data', (c) => { log.out += c; });
  await waitFor(() => /listening (\d+)/.test(log.out), { timeoutMs: 15000, what: 'server2026 --http' });
  const port = Number(log.out.match(/listening (\d+)/)[1]);
  return { url: `http://127.0.0.1:${port}/mcp`, log, stop() { killAll([proc.pid]); } };
}

const LOG_MODULE = [{ use: 'log', sink: 'stderr', params: true, result: true, notifications: true }];

/** The elicitation handler: answers with the next name, recording each request. */
function asker(seen, names = ['Ada', 'Bea', 'Cy']) {
  return (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.push(req.params);
    return { action: 'accept', content: { name: names[(seen.length - 1) % names.length] } };
  });
}

/** Everything a handshake-era client does, checked; the same whatever the transport and modules. */
async function exercise(s, seen) {
  const { client } = s;
  assert.deepEqual(client.getServerVersion(), { name: 'server2026', version: '2.0.0' });
  assert.equal(client.getInstructions(), 'A 2026-07-28 test server.');
  const caps = client.getServerCapabilities();
  assert.equal(caps.tools?.listChanged, true);
  assert.equal(caps.resources?.subscribe, true);
  assert.equal(caps.prompts?.listChanged, true);

  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  assert.deepEqual(tools, ['ask', 'bump', 'deploy', 'echo', 'slow']);
  assert.deepEqual((await client.listPrompts()).prompts.map((p) => p.name), ['greet']);
  assert.deepEqual((await client.listResources()).resources.map((r) => r.uri), ['test://counter']);

  const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  assert.equal(text(echo), 'echo: hi');
  assert.equal('resultType' in echo, false, 'resultType is removed');
  assert.equal(echo._meta?.['io.modelcontextprotocol/serverInfo'], undefined);
  // arguments marked x-mcp-header: over HTTP mcp-chain mirrors them into
  // Mcp-Param-* headers (the SDK refuses the call with -32020 otherwise),
  // a value that is not header-safe in its Base64 form
  const deployed = await client.callTool({ name: 'deploy', arguments: { region: 'eu-west', replicas: 3 } });
  assert.equal(text(deployed), 'deployed 3 to eu-west', JSON.stringify(deployed));
  const zurich = await client.callTool({ name: 'deploy', arguments: { region: 'Z\u00fcrich ' } });
  assert.equal(text(zurich), 'deployed 1 to Z\u00fcrich ', JSON.stringify(zurich));

  // progress on the call, before its result
  const progress = [];
  const slow = await client.callTool({ name: 'slow', arguments: { steps: 3 } }, undefined,
    { onprogress: (p) => progress.push(p) });
  assert.equal(text(slow), 'done');
  assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3]);
  assert.equal(progress[2].message, 'step 3');

  // input_required, two rounds: two elicitations, then the result
  seen.length = 0;
  const ask = await client.callTool({ name: 'ask', arguments: { rounds: 2 } });
  assert.equal(text(ask), 'hello Ada,Bea (2 rounds)');
  assert.deepEqual(seen.map((p) => p.message), ['Your name? (round 1)', 'Your name? (round 2)']);
  assert.equal(seen[0].requestedSchema.properties.name.type, 'string');

  // subscribe, change: resources/updated and list_changed arrive
  const updated = [];
  let listChanged = 0;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { listChanged++; });
  await client.subscribeResource({ uri: 'test://counter' });
  const bump = await client.callTool({ name: 'bump', arguments: {} });
  const count = text(bump);
  await waitFor(() => updated.length > 0 && listChanged > 0, { timeoutMs: 5000, what: 'resources/updated and list_changed' });
  assert.deepEqual(updated, ['test://counter']);
  const read = await client.readResource({ uri: 'test://counter' });
  assert.equal(read.contents[0].text, count);
  await client.unsubscribeResource({ uri: 'test://counter' });
  await client.callTool({ name: 'bump', arguments: {} });
  await sleep(300);
  assert.deepEqual(updated, ['test://counter'], 'no resources/updated after unsubscribe');

  const prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'Bo' } });
  assert.equal(prompt.messages[0].content.text, 'Hello, Bo!');
  assert.deepEqual(await client.ping(), {});
  assert.deepEqual(await client.setLoggingLevel('info'), {});

  // the server's own errors, as it said them (over HTTP: a 404 with -32601, a 200 with -32602)
  const nope = await outcome(() => client.callTool({ name: 'nope', arguments: {} }));
  assert.equal(nope.code, -32602, nope.message);
  assert.match(nope.message, /Tool nope not found/);
  const unknown = await outcome(() => client.complete({ ref: { type: 'ref/prompt', name: 'greet' },
    argument: { name: 'name', value: 'B' } }));
  assert.equal(unknown.code, -32601, unknown.message);
  assert.doesNotMatch(unknown.message, /HTTP|backend/);
}

for (const transport of ['stdio', 'http']) {
  for (const modules of [false, true]) {
    test(`2026-only server over ${transport}${modules ? ', with a log module' : ''}: a handshake-era client sees a server like any other`, T, async () => {
      const http = transport === 'http' ? await startHttp2026() : null;
      try {
        const entry = http ? { type: 'http', url: http.url } : { command: process.execPath, args: [SERVER2026] };
        const cfg = { mcpServers: { s: entry }, ...(modules ? { middleware: LOG_MODULE } : {}) };
        const seen = [];
        await withChain(cfg, { capabilities: { elicitation: {} }, setup: asker(seen) }, async (s) => {
          await exercise(s, seen);
          assert.match(s.stderr(), /s: ready: server2026 2\.0\.0, protocol 2026-07-28/);
          if (modules) assert.match(s.stderr(), /tools\/call/, 'the log module saw the traffic');
          if (transport === 'stdio')
            assert.match(s.stderr(), /refuses initialize \(Unsupported protocol version/);
        });
        if (http) {
          const posts = http.log.text.split('\n').filter((l) => l.startsWith('got '));
          assert.ok(posts.length > 10, http.log.text);
          for (const l of posts) {
            const [, method, hMethod, hVersion, hName, hSession] = l.split(' ');
            assert.equal(hMethod, method, l);
            assert.equal(hVersion, '2026-07-28', l);
            assert.equal(hSession, '-', `no session id: ${l}`);
            if (method === 'tools/call' || method === 'prompts/get') assert.notEqual(hName, '-', l);
          }
          assert.ok(posts.some((l) => l.startsWith('got server/discover ')), 'probed with server/discover');
          assert.ok(posts.some((l) => l.startsWith('got subscriptions/listen ')), 'listened');
          assert.ok(!posts.some((l) => l.startsWith('got initialize ')), 'no initialize after a discover answer');
          assert.ok(posts.some((l) => /^got tools\/call tools\/call 2026-07-28 echo /.test(l)), 'Mcp-Name is the tool');
          assert.ok(posts.some((l) => / deploy - region=eu-west$/.test(l)), 'Mcp-Param-Region');
          assert.ok(posts.some((l) => / region==\?base64\?WsO8cmljaCA=\?=$/.test(l)), 'Mcp-Param-Region, Base64');
        }
      } finally {
        http?.stop();
      }
    });
  }
}

// A tool's x-mcp-header mark changed after mcp-chain learned it: the server
// refuses the call (400, -32020 HeaderMismatch), mcp-chain lists again and
// sends the call once more with the new header; the client sees the result.
test('2026-only server over HTTP: a call refused for a changed x-mcp-header mark is sent again after a fresh list', T, async () => {
  const http = await startHttp2026();
  try {
    const cfg = { mcpServers: { s: { type: 'http', url: http.url } } };
    await withChain(cfg, {}, async (s) => {
      const { client } = s;
      await client.listTools();
      const eu = await client.callTool({ name: 'deploy', arguments: { region: 'eu' } });
      assert.equal(text(eu), 'deployed 1 to eu', JSON.stringify(eu));
      const r = await fetch(http.url.replace(/\/mcp$/, '/test/remark?to=Area'), { method: 'POST' });
      assert.equal(r.status, 204);
      const ap = await client.callTool({ name: 'deploy', arguments: { region: 'ap' } });
      assert.equal(text(ap), 'deployed 1 to ap', JSON.stringify(ap));
      assert.match(s.stderr(), /"deploy" was refused for its Mcp-Param headers \(-32020\): fetching the tool list again/);
    });
    const posts = http.log.text.split('\n').filter((l) => l.startsWith('got '));
    const refused = posts.findIndex((l) => / deploy - region=ap$/.test(l));
    assert.ok(refused >= 0, `the call with the old header:\n${http.log.text}`);
    const after = posts.slice(refused + 1);
    const listed = after.findIndex((l) => l.startsWith('got tools/list '));
    const again = after.findIndex((l) => / deploy - area=ap$/.test(l));
    assert.ok(listed >= 0 && again > listed, `listed, then sent with Mcp-Param-Area:\n${http.log.text}`);
  } finally {
    http.stop();
  }
});

test('the status resource says which protocol each backend speaks', T, async () => {
  const cfg = { status: true, mcpServers: {
    s: { command: process.execPath, args: [SERVER2026] },
    old: { command: process.execPath, args: [LEGACY] },
  } };
  await withChain(cfg, {}, async (s) => {
    const st = JSON.parse((await s.client.readResource({ uri: 'mcp-chain://status' })).contents[0].text);
    assert.equal(st.backends.s.protocol, '2026-07-28');
    assert.equal(st.backends.old.protocol, '2025-11-25');
    assert.equal(st.backends.s.state, 'ready');
    const tools = (await s.client.listTools()).tools.map((t) => t.name).sort();
    assert.ok(tools.includes('s__echo') && tools.includes('old__echo'), tools.join(','));
    assert.equal(text(await s.client.callTool({ name: 's__echo', arguments: { text: 'm' } })), 'echo: m');
  });
});

test('input_required: an elicitation the client fails answers the call with an error; the next call works', T, async () => {
  const cfg = { mcpServers: { s: { command: process.execPath, args: [SERVER2026] } } };
  const setup = (client) => client.setRequestHandler(ElicitRequestSchema, async () => { throw new Error('user said no'); });
  await withChain(cfg, { capabilities: { elicitation: {} }, setup }, async (s) => {
    await assert.rejects(s.client.callTool({ name: 'ask', arguments: {} }), /input the backend asked for \(name\) failed: .*user said no/);
    assert.equal(text(await s.client.callTool({ name: 'echo', arguments: { text: 'still' } })), 'echo: still');
  });
});

test('input_required: cancelling the call cancels the open elicitation; the next call works', T, async () => {
  const cfg = { mcpServers: { s: { command: process.execPath, args: [SERVER2026] } } };
  let asked;
  const askedP = new Promise((r) => { asked = r; });
  const cancelled = [];
  const setup = (client) => {
    client.setRequestHandler(ElicitRequestSchema, (req, extra) => new Promise((resolve) => {
      asked();
      extra.signal.addEventListener('abort', () => resolve({ action: 'cancel' }));
    }));
    client.setNotificationHandler(CancelledNotificationSchema, (n) => { cancelled.push(n.params); });
  };
  await withChain(cfg, { capabilities: { elicitation: {} }, setup }, async (s) => {
    const ac = new AbortController();
    const call = s.client.callTool({ name: 'ask', arguments: {} }, undefined, { signal: ac.signal });
    await askedP;
    ac.abort('changed my mind');
    await assert.rejects(call);
    await waitFor(() => cancelled.length > 0, { timeoutMs: 5000, what: 'the elicitation cancelled' });
    assert.equal(typeof cancelled[0].requestId, 'number', "the client's own id for the elicitation");
    assert.equal(text(await s.client.callTool({ name: 'echo', arguments: { text: 'after' } })), 'echo: after');
  });
});

test('"auto" on stdio never probes a legacy server with server/discover (it would exit)', T, async () => {
  const cfg = { mcpServers: { old: { command: process.execPath, args: [LEGACY] } } };
  await withChain(cfg, {}, async (s) => {
    assert.deepEqual(s.client.getServerVersion(), { name: 'legacy-no-probe', version: '1.0.0' });
    assert.equal(text(await s.client.callTool({ name: 'echo', arguments: { text: 'x' } })), 'legacy echo: x');
    assert.deepEqual(await s.client.ping(), {});
    await sleep(200);
    const err = s.stderr();
    assert.doesNotMatch(err, /got server\/discover/);
    assert.doesNotMatch(err, /restarting|exited with status 3/);
    assert.match(err, /old: ready: legacy-no-probe 1\.0\.0, protocol 2025-11-25/);
  });
});

test('"protocol": "2026-07-28" pinned: the discover comes first (a legacy server that exits on it is down)', T, async () => {
  const cfg = { mcpServers: { old: { command: process.execPath, args: [LEGACY], protocol: '2026-07-28', restart: false } } };
  await assert.rejects(openChain(cfg), /legacy_no_probe: got server\/discover: exiting[\s\S]*old: exited with status 3/);
});

test('"protocol": "handshake" pinned: a 2026-only server is never probed and fails to initialize, saying why', T, async () => {
  const cfg = { mcpServers: { s: { command: process.execPath, args: [SERVER2026], protocol: 'handshake' } } };
  const err = await openChain(cfg).then(async (s) => { await s.close(); return null; }, (e) => e);
  assert.ok(err, 'connect must fail');
  assert.match(err.message, /initialize failed: Unsupported protocol version/);
  assert.doesNotMatch(err.message, /asking server\/discover/);
});

test('"protocol": "handshake" pinned with a legacy server: initialize, no probe', T, async () => {
  const cfg = { mcpServers: { old: { command: process.execPath, args: [LEGACY], protocol: 'handshake' } } };
  await withChain(cfg, {}, async (s) => {
    assert.equal(text(await s.client.callTool({ name: 'echo', arguments: { text: 'y' } })), 'legacy echo: y');
    assert.doesNotMatch(s.stderr(), /server\/discover/);
  });
});

test('"auto" over HTTP: a legacy Streamable HTTP server refuses the discover probe; initialize follows', T, async () => {
  const net = await import('node:net');
  const port = await new Promise((r) => { const srv = net.createServer(); srv.listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => r(p)); }); });
  const proc = spawn(process.execPath, [SE_ENTRY, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await waitFor(() => new Promise((r) => { const c = net.connect(port, '127.0.0.1', () => { c.destroy(); r(true); }); c.on('error', () => r(false)); }),
      { timeoutMs: 15000, what: 'server-everything' });
    const cfg = { mcpServers: { e: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } } };
    await withChain(cfg, {}, async (s) => {
      assert.match(s.client.getServerVersion().name, /everything/i);
      const r = await s.client.callTool({ name: 'echo', arguments: { message: 'z' } });
      assert.match(text(r), /z/);
      assert.match(s.stderr(), /e: no server\/discover \(.*\): speaking the handshake era/);
    });
  } finally {
    killAll([proc.pid, ...descendants(proc.pid)]);
  }
});
