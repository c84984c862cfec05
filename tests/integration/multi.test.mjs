// mcp-chain with several backends behind one endpoint: the reference servers
// (everything, filesystem, memory) and the C fixture server, driven by the
// official SDK client. Covers namespaced and merged lists, routing, progress,
// sampling and cancellation across backends, client-safe names, the start-up
// bound and the join bound (a slow or stuck backend joins later), a per-backend
// policy refusing like the global one, supervision (restart after kill -9, crash
// loop -> failed), the status resource `mcp-chain://status`, `mcp-chain check`
// and list_changed.
//
// Every session runs `mcp-chain --config <tmp>.json` with a config written
// here; each test closes its client in `finally` and kills whatever is left of
// the process tree (never leaks processes). Under ASan/UBSan the stderr of
// mcp-chain is checked for sanitizer reports when the session closes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  CHAIN, FIXTURE, HERE, SE_ENTRY, SKIP_NO_CHAIN, SKIP_NO_FIXTURE,
  brief, descendants, isAlive, killAll, outcome, sleep, tmpPath, waitFor,
} from './lib.mjs';

const MCP = path.join(HERE, 'node_modules', '@modelcontextprotocol');
const FS_ENTRY = path.join(MCP, 'server-filesystem', 'dist', 'index.js');
const MEM_ENTRY = path.join(MCP, 'server-memory', 'dist', 'index.js');

const SKIP_NO_REFS = SKIP_NO_CHAIN
  || (!existsSync(SE_ENTRY) || !existsSync(FS_ENTRY) || !existsSync(MEM_ENTRY)
    ? 'reference servers not installed (npm ci in tests/integration)' : false);
// the mixed tests need the fixture as well
const SKIP_MIXED = SKIP_NO_FIXTURE || SKIP_NO_REFS;

const T = { timeout: 30_000, skip: SKIP_NO_FIXTURE };
const T_REFS = { timeout: 60_000, skip: SKIP_NO_REFS };
const T_MIXED = { timeout: 60_000, skip: SKIP_MIXED };

/** What Claude accepts as a tool or prompt name. */
const SAFE_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const STATUS_URI = 'mcp-chain://status';
/** Shorter shutdown steps than the default 2 s, so that closing is quick. */
const BASE = { shutdownGraceMs: 300 };

// ---------------------------------------------------------------------------
// helpers

/** A fixture backend entry. */
const fx = (args = [], more = {}) => ({ command: FIXTURE, args, ...more });
/** Reference servers, run with this node. */
const everything = () => ({ command: process.execPath, args: [SE_ENTRY, 'stdio'] });
const filesystem = (dir) => ({ command: process.execPath, args: [FS_ENTRY, dir] });
const memory = (file) => ({ command: process.execPath, args: [MEM_ENTRY], env: { MEMORY_FILE_PATH: file } });

let cfgCount = 0;
/** Writes CFG (an mcp-chain config object) to a temp file; returns its path. */
function writeCfg(cfg) {
  const file = tmpPath(`multi-${process.pid}-${++cfgCount}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** Environment for mcp-chain: the SDK adds only a safe default set. */
function chainEnv() {
  const env = {};
  for (const k of ['MCP_CHAIN_LOG', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'])
    if (process.env[k]) env[k] = process.env[k];
  return env;
}

const SANITIZER_REPORT = /ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

/** Records every message sent and received, in wire order ({sent, received}, each {seq, msg}). */
function recordWire(transport) {
  const wire = { sent: [], received: [], seq: 0 };
  const send = transport.send.bind(transport);
  transport.send = (msg, o) => {
    wire.sent.push({ seq: ++wire.seq, msg: structuredClone(msg) });
    return send(msg, o);
  };
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() { return handler; },
    set(fn) {
      handler = fn && ((msg, extra) => {
        wire.received.push({ seq: ++wire.seq, msg: structuredClone(msg) });
        return fn(msg, extra);
      });
    },
  });
  return wire;
}

/**
 * Starts mcp-chain on CFG and connects an SDK client.
 * opts: capabilities, setup(client) (handlers before connect).
 * Returns {client, pid, config, stderr(), status(), close()}.
 */
async function openChain(cfg, opts = {}) {
  const config = writeCfg({ ...BASE, ...cfg });
  const transport = new StdioClientTransport({
    command: CHAIN, args: ['--config', config], env: chainEnv(), stderr: 'pipe',
  });
  let err = '';
  let errEnded = false;
  transport.stderr?.on('data', (c) => {
    err += c.toString('utf8');
    if (err.length > 512 * 1024) err = err.slice(-512 * 1024);
    if (process.env.IT_VERBOSE) process.stderr.write(c);
  });
  transport.stderr?.on('end', () => { errEnded = true; });
  transport.stderr?.on('error', () => {});
  const wire = recordWire(transport);
  const client = new Client({ name: 'mcp-chain-multi-test', version: '1.0.0' },
    { capabilities: opts.capabilities ?? {} });
  client.onerror = () => {};
  opts.setup?.(client);
  const s = {
    client, config, wire, pid: null, closed: false,
    stderr: () => err,
    async status() {
      const r = await client.readResource({ uri: STATUS_URI });
      assert.equal(r.contents.length, 1);
      assert.equal(r.contents[0].uri, STATUS_URI);
      return JSON.parse(r.contents[0].text);
    },
    async close() {
      if (s.closed) return;
      s.closed = true;
      const pid = transport.pid ?? s.pid;
      const tree = pid ? [pid, ...descendants(pid)] : [];
      try { await client.close(); } catch { /* ignore */ }
      const t0 = Date.now();
      while (tree.some(isAlive) && Date.now() - t0 < 3000) await sleep(50);
      s.leftovers = tree.filter(isAlive);
      killAll(s.leftovers);
      const t1 = Date.now();
      while (!errEnded && Date.now() - t1 < 1000) await sleep(20);
      const m = err.match(SANITIZER_REPORT);
      if (m) {
        const at = err.indexOf(m[0]);
        throw new Error(`sanitizer report from mcp-chain:\n${err.slice(Math.max(0, at - 200), at + 4000)}`);
      }
    },
  };
  try {
    await client.connect(transport);
  } catch (e) {
    s.pid = transport.pid;
    await s.close().catch(() => {});
    throw withTail(e, s);
  }
  s.pid = transport.pid;
  return s;
}

function withTail(e, s) {
  if (e && typeof e === 'object' && !String(e.message).includes('--- mcp-chain stderr')) {
    try { e.message += `\n--- mcp-chain stderr (tail) ---\n${s.stderr().slice(-4000)}`; } catch { /* ignore */ }
  }
  return e;
}

/** Runs fn(session) on a fresh mcp-chain; always closes it. */
async function withChain(cfg, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  const s = await openChain(cfg, opts);
  let failure = null;
  try {
    return await fn(s);
  } catch (e) {
    failure = withTail(e, s);
    throw failure;
  } finally {
    try {
      await s.close();
    } catch (e) {
      if (!failure) throw e;   // a sanitizer report fails an otherwise passing test
    }
  }
}

/** Every tool (following cursors). */
async function listTools(client) {
  const out = [];
  let cursor;
  do {
    const r = await client.listTools(cursor ? { cursor } : undefined);
    out.push(...r.tools);
    cursor = r.nextCursor;
  } while (cursor);
  return out;
}

async function listResources(client, method = 'listResources', key = 'resources') {
  const out = [];
  const seen = new Set();
  let cursor;
  do {
    const r = await client[method](cursor ? { cursor } : undefined);
    out.push(...r[key]);
    cursor = r.nextCursor;
    assert.ok(!cursor || !seen.has(cursor), `cursor ${cursor} repeats`);
    if (cursor) seen.add(cursor);
  } while (cursor);
  return out;
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const call = (client, name, args = {}, options) =>
  client.request({ method: 'tools/call', params: { name, arguments: args } }, CallToolResultSchema, options);

/** The fixture's echo: the request the backend received. */
async function echo(client, name, args) {
  const r = await call(client, name, args);
  return r.structuredContent ?? JSON.parse(text(r));
}

function assertSafeUnique(names, what = 'names') {
  const bad = names.filter((n) => !SAFE_NAME.test(n));
  assert.deepEqual(bad, [], `${what} not matching ${SAFE_NAME}`);
  const dup = names.filter((n, i) => names.indexOf(n) !== i);
  assert.deepEqual(dup, [], `${what} not unique`);
}

/** Argument vector of a live process. */
function cmdline(pid) {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean); } catch { return []; }
}

/** The live fixture child of mcp-chain whose arguments include MARKER. */
function fixtureChild(s, marker) {
  const pids = descendants(s.pid).filter((p) => {
    const a = cmdline(p);
    return a.length && path.basename(a[0]) === path.basename(FIXTURE) && a.includes(marker);
  });
  return pids.length === 1 ? pids[0] : null;
}

/** Per-backend request counters from the status resource. */
async function counters(s) {
  const st = await s.status();
  return Object.fromEntries(Object.entries(st.backends).map(([k, v]) => [k, v.requests]));
}

/**
 * Calls tool NAME and returns the backend it reached, from the request counters
 * of the status resource (exactly one backend must have received one request).
 */
async function reachedBy(s, name, args = {}) {
  const before = await counters(s);
  const r = await outcome(() => call(s.client, name, args));
  const after = await counters(s);
  const grew = Object.keys(after).filter((k) => after[k] !== before[k]);
  if (grew.length === 0) return { backend: null, r };
  assert.equal(grew.length, 1, `${name}: several backends got requests: ${brief({ before, after })}`);
  assert.equal(after[grew[0]] - before[grew[0]], 1, `${name}: one request`);
  return { backend: grew[0], r };
}

// ---------------------------------------------------------------------------
// reference servers from npm behind one mcp-chain

/** Tools of a server connected directly (what the backend itself lists). */
async function directTools(server, capabilities = {}) {
  const transport = new StdioClientTransport({ ...server, stderr: 'pipe' });
  transport.stderr?.on('data', () => {});
  const client = new Client({ name: 'direct', version: '1' }, { capabilities });
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
  await client.connect(transport);
  const pid = transport.pid;
  try {
    // everything registers some tools after initialization (list_changed)
    if (server.args?.[0] === SE_ENTRY) await waitFor(() => changed > 0, { timeoutMs: 10_000, what: 'direct list_changed' });
    await sleep(200);
    return await listTools(client);
  } finally {
    const tree = [pid, ...descendants(pid)];
    await client.close().catch(() => {});
    killAll(tree.filter(isAlive));
  }
}

function refSetup() {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'mcp-chain-multi-fs-')));
  const memFile = path.join(realpathSync(mkdtempSync(path.join(tmpdir(), 'mcp-chain-multi-mem-'))), 'memory.jsonl');
  const cleanup = () => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(path.dirname(memFile), { recursive: true, force: true });
  };
  return { dir, memFile, cleanup };
}

test('reference servers: everything, filesystem and memory merged with prefixes; calls reach each', T_REFS, async () => {
  const { dir, memFile, cleanup } = refSetup();
  try {
    const servers = { everything: everything(), filesystem: filesystem(dir), memory: memory(memFile) };
    // what each backend lists on its own
    const direct = {};
    for (const [name, srv] of Object.entries(servers)) direct[name] = await directTools(srv);
    const expected = new Map();
    for (const [name, tools] of Object.entries(direct))
      for (const t of tools) expected.set(`${name}__${t.name}`, { ...t, name: `${name}__${t.name}` });
    assert.ok(expected.has('everything__echo') && expected.has('filesystem__read_text_file') &&
      expected.has('memory__create_entities'), 'reference servers list their usual tools');

    await withChain({ mcpServers: servers }, async (s) => {
      const { client } = s;
      // everything adds tools after initialization; the merged list catches up
      let tools;
      await waitFor(async () => {
        tools = await listTools(client);
        return tools.length === expected.size;
      }, { timeoutMs: 15_000, what: `merged tools/list with ${expected.size} tools` }).catch((e) => {
        e.message += `\nmissing: ${[...expected.keys()].filter((n) => !tools.some((t) => t.name === n))}` +
          `\nextra: ${tools.map((t) => t.name).filter((n) => !expected.has(n))}`;
        throw e;
      });
      const names = tools.map((t) => t.name);
      assertSafeUnique(names, 'merged tool names');
      assert.deepEqual([...names].sort(), [...expected.keys()].sort(), 'each backend\'s tools, prefixed');
      for (const t of tools)
        assert.deepEqual(t, expected.get(t.name), `${t.name}: only the name differs from the backend's own entry`);

      // everything
      const e = await call(client, 'everything__echo', { message: 'hello through the chain' });
      assert.equal(text(e), 'Echo: hello through the chain');

      // filesystem: read a file written here, write one and read it here
      const file = path.join(dir, 'note.txt');
      writeFileSync(file, 'line one\nline two ✓\n');
      const read = await call(client, 'filesystem__read_text_file', { path: file });
      assert.equal(read.isError ?? false, false, brief(read));
      assert.equal(text(read), 'line one\nline two ✓\n');
      const out = path.join(dir, 'written.txt');
      const w = await call(client, 'filesystem__write_file', { path: out, content: 'from the client' });
      assert.equal(w.isError ?? false, false, brief(w));
      assert.equal(readFileSync(out, 'utf8'), 'from the client');
      const outside = await call(client, 'filesystem__read_text_file', { path: '/etc/hostname' });
      assert.equal(outside.isError, true, 'filesystem still confines to its folder');

      // memory
      const created = await call(client, 'memory__create_entities', {
        entities: [{ name: 'mcp-chain-it', entityType: 'test', observations: ['created through mcp-chain'] }],
      });
      assert.equal(created.isError ?? false, false, brief(created));
      const opened = await call(client, 'memory__open_nodes', { names: ['mcp-chain-it'] });
      assert.match(text(opened), /created through mcp-chain/);
      assert.match(readFileSync(memFile, 'utf8'), /mcp-chain-it/, 'memory wrote its own file');

      // a name the aggregate does not know
      const unknown = await outcome(() => call(client, 'echo', { message: 'x' }));
      assert.equal(unknown.ok, false, 'unprefixed names are not routed');

      // the status resource lists every backend as ready
      const st = await s.status();
      assert.deepEqual(Object.keys(st.backends).sort(), ['everything', 'filesystem', 'memory']);
      for (const [n, b] of Object.entries(st.backends)) assert.equal(b.state, 'ready', `${n}: ${brief(b)}`);
    });
  } finally {
    cleanup();
  }
});

test('reference servers: progress and sampling from a backend that is not the first', T_REFS, async () => {
  const { dir, memFile, cleanup } = refSetup();
  try {
    const cfg = { mcpServers: { filesystem: filesystem(dir), memory: memory(memFile), everything: everything() } };
    const samples = [];
    await withChain(cfg, {
      capabilities: { sampling: {} },
      setup: (c) => c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        samples.push(req.params);
        return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'sampled by the client' } };
      }),
    }, async ({ client, wire }) => {
      // progress: everything's long-running operation, tokens mapped both ways
      const progress = [];
      const r = await client.callTool(
        { name: 'everything__trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
        CallToolResultSchema,
        { onprogress: (p) => progress.push(p) });
      assert.match(text(r), /Long running operation completed/);
      // On the wire: the 3 notifications under the client's own token, then the result.
      // (The SDK 1.x client dispatches notifications asynchronously: the last one, read
      // in the same chunk as the response, may miss onprogress, so that is checked >= 2.)
      const req = wire.sent.find((x) => x.msg.method === 'tools/call');
      const token = req.msg.params._meta.progressToken;
      const seq = wire.received.filter((x) => x.seq > req.seq)
        .map((x) => (x.msg.method === 'notifications/progress' ? [x.msg.params.progressToken, x.msg.params.progress, x.msg.params.total]
          : x.msg.id === req.msg.id ? 'result' : null))
        .filter(Boolean);
      assert.deepEqual(seq, [[token, 1, 3], [token, 2, 3], [token, 3, 3], 'result']);
      assert.ok(progress.length >= 2, `onprogress called ${progress.length} times`);
      assert.deepEqual(progress.map((p) => [p.progress, p.total]), [[1, 3], [2, 3], [3, 3]].slice(0, progress.length));

      // sampling: the tool exists once everything saw the client's capabilities
      await waitFor(async () => (await listTools(client)).some((t) => t.name === 'everything__trigger-sampling-request'),
        { timeoutMs: 10_000, what: 'everything__trigger-sampling-request listed' });
      const sr = await call(client, 'everything__trigger-sampling-request', { prompt: 'ping from the test', maxTokens: 7 });
      assert.equal(samples.length, 1, 'the client answered one sampling request');
      assert.equal(samples[0].maxTokens, 7);
      assert.match(samples[0].messages[0].content.text, /ping from the test/);
      assert.match(text(sr), /sampled by the client/);
      assert.match(text(sr), /test-model/);
    });
  } finally {
    cleanup();
  }
});

test('resources: merged list and templates; reads go to the backend that serves the URI', T_MIXED, async () => {
  await withChain({ mcpServers: { fx: fx(), everything: everything() } }, async (s) => {
    const { client } = s;
    const resources = await listResources(client);
    const uris = resources.map((r) => r.uri);
    assert.equal(new Set(uris).size, uris.length, 'no resource listed twice');
    for (const u of [STATUS_URI, 'fixture://a', 'fixture://b', 'demo://resource/static/document/features.md'])
      assert.ok(uris.includes(u), `${u} listed`);
    const templates = (await listResources(client, 'listResourceTemplates', 'resourceTemplates')).map((t) => t.uriTemplate);
    assert.ok(templates.includes('fixture://item/{id}'), 'fixture template listed');
    assert.ok(templates.includes('demo://resource/dynamic/text/{resourceId}'), 'everything template listed');

    const a = await client.readResource({ uri: 'fixture://a' });
    assert.equal(a.contents[0].uri, 'fixture://a');
    const item = await client.readResource({ uri: 'fixture://item/42' });
    assert.equal(item.contents[0].uri, 'fixture://item/42');
    const doc = await client.readResource({ uri: 'demo://resource/static/document/features.md' });
    assert.equal(doc.contents[0].uri, 'demo://resource/static/document/features.md');
    assert.ok(doc.contents[0].text.length > 0);
    const dyn = await client.readResource({ uri: 'demo://resource/dynamic/text/5' });
    assert.equal(dyn.contents[0].uri, 'demo://resource/dynamic/text/5');

    // prompts: both backends' prompts, namespaced, routed
    const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
    assertSafeUnique(prompts, 'prompt names');
    assert.ok(prompts.includes('fx__greet'), brief(prompts));
    assert.ok(prompts.includes('everything__simple-prompt'), brief(prompts));
    const g = await client.getPrompt({ name: 'fx__greet', arguments: { name: 'Ada' } });
    assert.match(JSON.stringify(g.messages), /Ada/);
    const sp = await client.getPrompt({ name: 'everything__simple-prompt' });
    assert.ok(sp.messages.length >= 1);
  });
});

test('resources: a link returned by a tool is read from its backend without listing first', T_MIXED, async () => {
  // a client may read any URI it was given (resource links need not be listed)
  await withChain({ mcpServers: { fx: fx(), everything: everything() } }, async ({ client }) => {
    const r = await call(client, 'everything__get-resource-links', { count: 2 });
    const links = r.content.filter((c) => c.type === 'resource_link').map((c) => c.uri);
    assert.ok(links.length === 2, brief(r));
    for (const uri of links) {
      const got = await outcome(() => client.readResource({ uri }));
      assert.ok(got.ok, `resources/read ${uri} (owned by everything, fx listed first): ${brief(got)}`);
      assert.equal(got.value.contents[0].uri, uri);
    }
  });
});

// ---------------------------------------------------------------------------
// fixtures: paging, names, start-up bound

test('pagination: a backend with 120 extra tools over 50-item pages appears whole', T, async () => {
  await withChain({ mcpServers: { big: fx(['--tools', '120', '--page-size', '50']), small: fx() } }, async ({ client }) => {
    const names = (await listTools(client)).map((t) => t.name);
    assertSafeUnique(names);
    const big = names.filter((n) => n.startsWith('big__'));
    const small = names.filter((n) => n.startsWith('small__'));
    assert.equal(big.length, 15 + 120, 'every page of the big backend');
    assert.equal(small.length, 15);
    assert.equal(names.length, big.length + small.length);
    for (let i = 0; i < 120; i++)
      assert.ok(big.includes(`big__tool_${String(i).padStart(4, '0')}`), `big__tool_${i}`);
    assert.equal(text(await call(client, 'big__tool_0119')), 'tool_0119 called');
    assert.equal(text(await call(client, 'big__tool_0050')), 'tool_0050 called');
    const seen = await echo(client, 'small__echo', { x: 1 });
    assert.equal(seen.params.name, 'echo');
  });
});

const LONG = 'a-very-long-backend-name.that.goes-on_and_on_and_on_for_more_than_64_chars';
const namesCfg = () => ({
  mcpServers: {
    one: fx(['--tools', '2'], { prefix: 'dup' }),
    two: fx(['--tools', '4'], { prefix: 'dup' }),
    [LONG]: fx(),
  },
});
/** Tools safe to call on the fixture, and what their answer says about the name. */
const SAFE_TOOLS = ['echo', 'init_params', 'cancelled_ids', 'seen_notifications'];

test('names: same prefix twice and names over 64 chars are safe, unique, stable, and reach the right backend', T, async () => {
  let first;
  await withChain(namesCfg(), async (s) => {
    const tools = await listTools(s.client);
    const names = tools.map((t) => t.name);
    first = names;
    assertSafeUnique(names, 'exposed tool names');
    assert.equal(names.length, 17 + 19 + 15, 'every tool of every backend is exposed');
    const prompts = (await s.client.listPrompts()).prompts.map((p) => p.name);
    assertSafeUnique(prompts, 'exposed prompt names');
    assert.equal(prompts.length, 3);

    // call every side-effect-free tool under every exposed name
    const reached = {};   // original name -> backends reached
    for (const t of tools) {
      const orig = SAFE_TOOLS.find((o) => t.description === FIXTURE_DESCRIPTIONS[o]) ??
        (t.description === 'Generated tool' ? 'generated' : null);
      if (!orig) continue;
      const { backend, r } = await reachedBy(s, t.name, { probe: t.name });
      assert.ok(r.ok, `${t.name}: ${brief(r)}`);
      assert.ok(backend, `${t.name} reached no backend`);
      let seenName;
      if (orig === 'echo') {
        seenName = r.value.structuredContent.params.name;
        assert.deepEqual(r.value.structuredContent.params.arguments, { probe: t.name });
      } else if (orig === 'generated') {
        seenName = text(r.value).replace(/ called$/, '');
      } else {
        seenName = orig;
      }
      (reached[seenName] ??= []).push(backend);
    }
    const sorted = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, [...v].sort()]).sort());
    assert.deepEqual(sorted(reached), sorted({
      echo: ['one', 'two', LONG],
      init_params: ['one', 'two', LONG],
      cancelled_ids: ['one', 'two', LONG],
      seen_notifications: ['one', 'two', LONG],
      tool_0000: ['one', 'two'],
      tool_0001: ['one', 'two'],
      tool_0002: ['two'],
      tool_0003: ['two'],
    }), 'each exposed name reaches the backend of that tool (the backend received its own name)');

    // prompts: each reaches a backend under its own name
    for (const p of prompts) {
      const g = await s.client.getPrompt({ name: p, arguments: { name: 'Bob' } });
      assert.match(JSON.stringify(g.messages), /Bob/, p);
    }
  });
  // the same configuration gives the same names
  await withChain(namesCfg(), async ({ client }) => {
    assert.deepEqual((await listTools(client)).map((t) => t.name), first, 'names are stable across runs');
  });
});

/** Descriptions of the fixture's built-in tools (to know a tool whatever its exposed name). */
const FIXTURE_DESCRIPTIONS = {
  echo: 'Return the whole request message as received',
  init_params: 'Return the recorded initialize params',
  cancelled_ids: 'Return the request ids seen cancelled',
  seen_notifications: 'Return client notification counts',
};

test('names: a colliding backend going down does not hand its names to the other', T, async () => {
  const cfg = {
    mcpServers: {
      one: fx(['--stderr-lines', '1'], { prefix: 'dup', restart: { initialDelayMs: 3000 } }),
      two: fx(['--stderr-lines', '2'], { prefix: 'dup' }),
    },
  };
  await withChain(cfg, async (s) => {
    const { client } = s;
    const echoNames = async () => (await listTools(client))
      .filter((t) => t.description === FIXTURE_DESCRIPTIONS.echo).map((t) => t.name);
    const before = await echoNames();
    assert.equal(before.length, 2);
    const owner = {};
    for (const n of before) owner[n] = (await reachedBy(s, n)).backend;
    assert.deepEqual(Object.values(owner).sort(), ['one', 'two']);
    const oneName = before.find((n) => owner[n] === 'one');
    const twoName = before.find((n) => owner[n] === 'two');

    const pid = fixtureChild(s, '1');
    assert.ok(pid, 'child of backend "one" found');
    process.kill(pid, 'SIGKILL');
    await waitFor(async () => (await s.status()).backends.one.state !== 'ready', { what: 'one down' });

    // while "one" waits to restart: "two" keeps its name, and "one"'s name leads nowhere
    const during = await echoNames();
    assert.deepEqual(during, [twoName], `while "one" is down, "two"'s echo keeps its name ${twoName}`);
    const r2 = await reachedBy(s, twoName);
    assert.equal(r2.backend, 'two');
    const r1 = await reachedBy(s, oneName);
    assert.equal(r1.backend, null, `${oneName} (backend "one"'s echo) must not be routed to "two" while "one" is down`);
    assert.equal(r1.r.ok, false);

    await waitFor(async () => (await s.status()).backends.one.state === 'ready', { timeoutMs: 10_000, what: 'one back' });
    await waitFor(async () => (await echoNames()).length === 2, { what: 'both echoes listed again' });
    assert.deepEqual((await echoNames()).sort(), [...before].sort(), 'names after the restart are the names before');
    assert.equal((await reachedBy(s, oneName)).backend, 'one');
    assert.equal((await reachedBy(s, twoName)).backend, 'two');
  });
});

test('start-up bound: a backend that never answers initialize does not hold up the others', T, async () => {
  const cfg = {
    initTimeoutMs: 1500,
    mcpServers: { hang: fx(['--no-init-response']), ok: fx() },
  };
  const t0 = Date.now();
  await withChain(cfg, async (s) => {
    const took = Date.now() - t0;
    assert.ok(took < 1500 + 2500, `initialize answered in ${took} ms (bound 1500 ms)`);
    const { client } = s;
    const names = (await listTools(client)).map((t) => t.name);
    assert.ok(names.includes('ok__echo'), brief(names));
    assert.deepEqual(names.filter((n) => n.startsWith('hang')), [], 'the silent backend lists nothing');
    const seen = await echo(client, 'ok__echo', { a: 1 });
    assert.deepEqual(seen.params, { name: 'echo', arguments: { a: 1 } });
    const r = await outcome(() => call(client, 'hang__echo'));
    assert.equal(r.ok, false, 'a call to the silent backend fails');

    const st = await s.status();
    assert.equal(st.backends.ok.state, 'ready');
    assert.notEqual(st.backends.hang.state, 'ready');
    assert.equal(typeof st.backends.hang.reason, 'string');
    assert.match(st.backends.hang.reason, /initialize/, brief(st.backends.hang));
    // the status resource is listed first
    const res = await client.listResources();
    assert.equal(res.resources[0].uri, STATUS_URI);
  });
});

test('join bound: a backend slow to initialize does not hold the client; it joins later with list_changed', T, async () => {
  // initJoinMs defaults to 5 s: under Codex's 10 s and Claude Desktop's 30 s connection
  // timeouts. Before it, the client's initialize waited for the slow backend (8 s here,
  // up to initTimeoutMs, 60 s by default).
  let changed = 0;
  const cfg = { mcpServers: { slow: fx(['--init-delay-ms', '8000']), ok: fx() } };
  const t0 = Date.now();
  await withChain(cfg, {
    setup: (c) => c.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; }),
  }, async (s) => {
    const took = Date.now() - t0;
    assert.ok(took < 7000, `initialize answered in ${took} ms (join bound 5000 ms)`);
    const { client } = s;
    let names = (await listTools(client)).map((t) => t.name);
    assert.ok(names.includes('ok__echo'), brief(names));
    assert.deepEqual(names.filter((n) => n.startsWith('slow')), [], 'the slow backend is not listed yet');
    let st = await s.status();
    assert.equal(st.backends.ok.state, 'ready');
    assert.equal(st.backends.slow.state, 'initializing', brief(st.backends.slow));
    assert.equal(changed, 0);

    await waitFor(() => changed > 0, { timeoutMs: 15_000, what: 'tools/list_changed when slow joins' });
    names = (await listTools(client)).map((t) => t.name);
    assert.ok(names.includes('slow__echo'), brief(names));
    assert.ok(names.includes('ok__echo'), brief(names));
    st = await s.status();
    assert.equal(st.backends.slow.state, 'ready', brief(st.backends.slow));
    const seen = await echo(client, 'slow__echo', { late: true });
    assert.deepEqual(seen.params, { name: 'echo', arguments: { late: true } });
  });
});

test('join bound: initJoinMs is the bound for a backend that never answers; it is shown not ready with the reason', T, async () => {
  const cfg = {
    initJoinMs: 800,
    initTimeoutMs: 3000,
    mcpServers: { hang: fx(['--no-init-response']), ok: fx() },
  };
  const t0 = Date.now();
  await withChain(cfg, async (s) => {
    const took = Date.now() - t0;
    assert.ok(took < 800 + 1500, `initialize answered in ${took} ms (initJoinMs 800)`);
    const { client } = s;
    let st = await s.status();
    assert.equal(st.backends.hang.state, 'initializing', brief(st.backends.hang));
    assert.equal((await echo(client, 'ok__echo', { a: 1 })).params.arguments.a, 1);
    await waitFor(async () => /initialize/.test((await s.status()).backends.hang.reason ?? ''),
      { timeoutMs: 6000, what: 'hang given up after initTimeoutMs' });
    st = await s.status();
    assert.notEqual(st.backends.hang.state, 'ready');
    assert.equal(st.backends.ok.state, 'ready');
    const r = await outcome(() => call(client, 'hang__echo'));
    assert.equal(r.ok, false, 'a call to the silent backend fails');
  });
});

test('policy: a tool denied by one backend\'s own policy is refused like one the global policy denies (isError)', T, async () => {
  const deny = (names) => [{ use: 'policy', rules: [{ deny: names }] }];
  const cfg = {
    middleware: deny(['b__big']),
    mcpServers: { a: fx([], { middleware: deny(['echo']) }), b: fx() },
  };
  await withChain(cfg, async ({ client }) => {
    const names = (await listTools(client)).map((t) => t.name);
    assert.ok(!names.includes('a__echo') && !names.includes('b__big'), brief(names));
    assert.ok(names.includes('b__echo') && names.includes('a__big'), brief(names));
    const own = await call(client, 'a__echo', { x: 1 });
    const global = await call(client, 'b__big', { bytes: 3 });
    for (const [what, r] of [['per-backend', own], ['global', global]]) {
      assert.equal(r.isError, true, `${what}: ${brief(r)}`);
      assert.match(text(r), /Refused by the mcp-chain policy/, `${what}: ${brief(r)}`);
    }
    assert.match(text(own), /"echo"/);
    // a name no backend has is still unknown (a JSON-RPC error)
    const r = await outcome(() => call(client, 'zz__echo'));
    assert.equal(r.ok, false);
  });
});

// ---------------------------------------------------------------------------
// cancellation, list_changed

test('cancellation reaches only the backend of the cancelled call', T, async () => {
  await withChain({ mcpServers: { a: fx(), b: fx() } }, async ({ client }) => {
    const ac = new AbortController();
    const cancelled = call(client, 'a__slow', { ms: 20_000 }, { signal: ac.signal });
    const other = call(client, 'b__slow', { ms: 600 });
    await sleep(200);
    ac.abort('test cancels');
    await assert.rejects(cancelled);
    const ids = async (n) => JSON.parse(text(await call(client, `${n}__cancelled_ids`)));
    await waitFor(async () => (await ids('a')).length === 1, { what: 'a saw notifications/cancelled' });
    assert.equal(text(await other), 'done', 'b finishes its own call');
    assert.deepEqual(await ids('b'), [], 'b saw no cancellation');
    const aIds = await ids('a');
    assert.equal(aIds.length, 1);
    assert.ok(typeof aIds[0] === 'number' || typeof aIds[0] === 'string');
  });
});

test('list_changed from one backend reaches the client', T, async () => {
  const counts = { tools: 0, prompts: 0, resources: 0 };
  await withChain({ mcpServers: { a: fx(), b: fx() } }, {
    setup: (c) => {
      c.setNotificationHandler(ToolListChangedNotificationSchema, () => { counts.tools++; });
      c.setNotificationHandler(PromptListChangedNotificationSchema, () => { counts.prompts++; });
      c.setNotificationHandler(ResourceListChangedNotificationSchema, () => { counts.resources++; });
    },
  }, async ({ client }) => {
    await listTools(client);
    await sleep(200);
    for (const kind of ['tools', 'prompts', 'resources']) {
      const before = counts[kind];
      assert.equal(text(await call(client, 'b__notify', { kind })), 'notified');
      await waitFor(() => counts[kind] > before, { what: `notifications/${kind}/list_changed from b` });
    }
    // the lists are still whole afterwards
    const names = (await listTools(client)).map((t) => t.name);
    assert.equal(names.filter((n) => n.startsWith('a__')).length, 15);
    assert.equal(names.filter((n) => n.startsWith('b__')).length, 15);
  });
});

// ---------------------------------------------------------------------------
// faults

test('kill -9 of a backend mid-call: the call fails within 1 s, it restarts, list_changed, later calls work', T, async () => {
  let changed = 0;
  const cfg = { mcpServers: { a: fx(['--stderr-lines', '1']), b: fx(['--stderr-lines', '2'], { restart: { initialDelayMs: 100 } }) } };
  await withChain(cfg, {
    setup: (c) => c.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; }),
  }, async (s) => {
    const { client } = s;
    const pid = fixtureChild(s, '2');
    assert.ok(pid, `child of b among ${descendants(s.pid).map((p) => cmdline(p).join(' '))}`);
    let progressed = 0;
    const pending = call(client, 'b__slow', { ms: 20_000, steps: 200 }, { onprogress: () => { progressed++; } });
    pending.catch(() => {});
    await waitFor(() => progressed > 0, { what: 'the slow call running (first progress)' });
    const changedBefore = changed;
    const t0 = Date.now();
    process.kill(pid, 'SIGKILL');
    const r = await outcome(() => pending);
    const took = Date.now() - t0;
    assert.equal(r.ok, false, 'the pending call fails');
    assert.ok(took < 1000, `failed after ${took} ms`);
    assert.ok(r.code === -32000 || typeof r.code === 'number', brief(r));

    // a keeps serving meanwhile
    assert.equal((await echo(client, 'a__echo', {})).params.name, 'echo');

    await waitFor(async () => {
      const st = (await s.status()).backends.b;
      return st.state === 'ready' && st.restarts >= 1;
    }, { timeoutMs: 10_000, what: 'b restarted and ready' });
    const npid = fixtureChild(s, '2');
    assert.ok(npid && npid !== pid, 'a new child for b');
    await waitFor(() => changed > changedBefore, { what: 'notifications/tools/list_changed' });
    await waitFor(async () => (await listTools(client)).some((t) => t.name === 'b__echo'), { what: 'b__echo listed again' });
    const seen = await echo(client, 'b__echo', { after: 'restart' });
    assert.deepEqual(seen.params, { name: 'echo', arguments: { after: 'restart' } });
    assert.equal(text(await call(client, 'b__slow', { ms: 10 })), 'done');
  });
});

test('crash loop: the backend ends failed with a reason, the other keeps serving', T, async () => {
  const cfg = {
    mcpServers: {
      ok: fx(),
      loop: fx(['--exit-after-init'], { restart: { initialDelayMs: 50, maxRestarts: 2, windowMs: 10_000 } }),
    },
  };
  await withChain(cfg, async (s) => {
    const { client } = s;
    let st;
    await waitFor(async () => {
      st = await s.status();
      return st.backends.loop.state === 'failed';
    }, { timeoutMs: 10_000, what: 'loop failed' }).catch((e) => { e.message += `\n${brief(st)}`; throw e; });
    const loop = st.backends.loop;
    assert.equal(loop.restarts, 2, brief(loop));
    assert.equal(typeof loop.reason, 'string');
    assert.match(loop.reason, /crash loop/, brief(loop));
    assert.equal(st.backends.ok.state, 'ready');
    assert.equal(fixtureChild(s, '--exit-after-init'), null, 'no process left for loop');

    const names = (await listTools(client)).map((t) => t.name);
    assert.deepEqual(names.filter((n) => n.startsWith('loop__')), [], 'a failed backend lists nothing');
    assert.equal(names.filter((n) => n.startsWith('ok__')).length, 15);
    const r = await outcome(() => call(client, 'loop__echo'));
    assert.equal(r.ok, false);
    assert.deepEqual((await echo(client, 'ok__echo', { still: 'here' })).params.arguments, { still: 'here' });
    await sleep(300);
    assert.equal((await s.status()).backends.loop.state, 'failed', 'stays failed');
  });
});

// ---------------------------------------------------------------------------
// mcp-chain check

test('mcp-chain check: a config with three entries is valid', { timeout: 10_000, skip: SKIP_NO_FIXTURE }, () => {
  const file = writeCfg({
    separator: '__',
    initTimeoutMs: 5000,
    mcpServers: {
      everything: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything@2026.8.31', 'stdio'] },
      fx: { command: FIXTURE, args: ['--tools', '3'], prefix: 'fixture', timeout: 30_000,
        restart: { initialDelayMs: 50, maxDelayMs: 1000, maxRestarts: 2, windowMs: 10_000 } },
      mem: { command: 'node', args: ['x.js'], env: { MEMORY_FILE_PATH: '/tmp/m.jsonl' }, restart: false },
    },
  });
  const r = spawnSync(CHAIN, ['check', file], { encoding: 'utf8', env: { ...process.env }, timeout: 8000 });
  assert.equal(r.status, 0, `check failed: ${r.stderr}`);
  for (const n of ['everything', 'fx', 'mem']) assert.match(r.stderr, new RegExp(`"${n}"`), r.stderr);

  const bad = writeCfg({
    mcpServers: { a: { command: 'x' }, b: { command: 'y', prefix: 'not ok!' }, c: { command: 'z', restart: 'sometimes' } },
  });
  const rb = spawnSync(CHAIN, ['check', bad], { encoding: 'utf8', timeout: 8000 });
  assert.equal(rb.status, 1);
  assert.match(rb.stderr, /\/mcpServers\/b\/prefix/);
  assert.match(rb.stderr, /\/mcpServers\/c\/restart/);

  const clash = writeCfg({ mcpServers: { one: { command: 'x', prefix: 'dup' }, two: { command: 'y', prefix: 'dup' } } });
  const rc = spawnSync(CHAIN, ['check', clash], { encoding: 'utf8', timeout: 8000 });
  assert.equal(rc.status, 0, rc.stderr);
  assert.match(rc.stderr, /exposed as dup__NAME/);
  assert.match(rc.stderr, /warning: servers "one" and "two" share the prefix "dup"/);
});

test('every example in config/ passes mcp-chain check; the team example shares the memory server', { timeout: 30_000, skip: SKIP_NO_CHAIN }, () => {
  const dir = path.join(HERE, '..', '..', 'config');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.ok(files.length >= 10, files.join(' '));
  // the per-user example's token store key, as its operator would make it (0600)
  const key = path.join(mkdtempSync(path.join(tmpdir(), 'mcpc-key-')), 'token-store.key');
  writeFileSync(key, randomBytes(32), { mode: 0o600 });
  // ... and the cluster example's key list and instance tag
  const keys = path.join(path.dirname(key), 'cluster.keys');
  writeFileSync(keys, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const env = { ...process.env, MCP_CHAIN_TOKEN_KEY: key, MCP_CHAIN_CLUSTER_KEYS: keys, MCP_CHAIN_INSTANCE: 'a' };
  for (const f of files) {
    const r = spawnSync(CHAIN, ['check', path.join(dir, f)], { encoding: 'utf8', timeout: 8000, env });
    assert.equal(r.status, 0, `${f}: ${r.stderr}`);
  }
  // one server-memory per session would be several processes writing one file
  const r = spawnSync(CHAIN, ['check', path.join(dir, 'http-team.json')], { encoding: 'utf8', timeout: 8000 });
  assert.match(r.stderr, /server "everything": npx .* \(with --listen: one for each session\)/);
  assert.match(r.stderr, /server "memory": npx .* \(with --listen: one for every session\)/);
});

test('config/multi.json is a valid documented example', { timeout: 10_000, skip: SKIP_NO_CHAIN }, () => {
  const file = path.join(HERE, '..', '..', 'config', 'multi.json');
  const cfg = JSON.parse(readFileSync(file, 'utf8'));
  assert.deepEqual(Object.keys(cfg.mcpServers), ['everything', 'filesystem', 'memory']);
  for (const e of Object.values(cfg.mcpServers)) {
    assert.equal(e.command, 'npx');
    assert.equal(e.args[0], '-y');
    assert.match(e.args[1], /^@modelcontextprotocol\/server-[a-z]+@\d+\.\d+\.\d+$/, 'pinned version');
  }
  const r = spawnSync(CHAIN, ['check', file], { encoding: 'utf8', timeout: 8000 });
  assert.equal(r.status, 0, r.stderr);
});

test('status resource: a backend\'s JSON-RPC errors are counted for child processes too (one counter with /metrics)', T, async () => {
  await withChain({ mcpServers: { one: fx(), two: fx() } }, async (s) => {
    const errors = (st) => Object.values(st.backends).map((b) => b.errors);
    assert.deepEqual(errors(await s.status()), [0, 0]);
    // a fixture answers a resource it does not have with -32002
    const r = await outcome(() => s.client.readResource({ uri: 'fixture://nothing-here' }));
    assert.equal(r.ok, false);
    const st = await s.status();
    assert.deepEqual(errors(st).sort(), [0, 1], JSON.stringify(st.backends));
  });
});
