// Transparency: the official TypeScript SDK v2 client (@modelcontextprotocol/client
// 2.4) run twice, directly against a server and through mcp-chain with that server
// as its one backend, must see the same thing: the same negotiated protocol
// version, the same lists and results, every progress step, the questions the
// server asks (sampling, elicitation, roots). On stdio (the client spawns
// `mcp-chain --config FILE`) and on the HTTP front (`mcp-chain --listen`; directly,
// server-everything's own Streamable HTTP), with clients in the default
// (handshake) negotiation and in `versionNegotiation: {mode: 'auto'}`.
//
//   1. server-everything: versions, lists, results, progress, sampling,
//      elicitation, roots.
//   2. server-filesystem started with one directory while the client declares
//      another as its root: the client's root is the one allowed by the first
//      tool call, every time (3 runs per mode; default and auto); and a pinned
//      2026-07-28 client with `"eras": "both"` (stdio and HTTP), asked for its
//      roots in its first call.
//   3. two 2026-07-28 clients with different capabilities through one HTTP front
//      (`"eras": "both"`): each sees the tool list its own capabilities earn.
//   4. a 2026-07-28 client (`"eras": "both"`): progress sent after an
//      input_required round belongs to the retry's own progressToken.
//
// What the v2 client does (2.4.0): the default mode sends `initialize`
// (2025-11-25) and nothing else; 'auto' sends `server/discover` first — on stdio
// from a short-lived sibling process spawned from the same parameters (so through
// mcp-chain, a second mcp-chain), on HTTP on the connection itself — and falls
// back to `initialize` on an error (server-everything answers -32601 on stdio,
// 400 over HTTP; mcp-chain with `"eras": "follow"` and handshake-era servers
// behind answers -32601, over HTTP with 400); a pin fails when discover does not
// offer the version. Its onprogress callback loses a progress notification that
// arrives just before the response ("unknown token" on client.onerror), so
// progress is compared as the client received it on the wire.

import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import {
  CHAIN, HERE, SE_ENTRY, SKIP_NO_CHAIN, descendants, everythingServer, isAlive, killAll, serverParams, sleep, tmpPath,
  waitFor, writeConfig,
} from './lib.mjs';
import { startChain, within } from './http_lib.mjs';

const T = { timeout: 40_000, skip: SKIP_NO_CHAIN };
const CLIENT_INFO = { name: 'transparent-it', version: '2.4.0' };
const FULL_CAPS = { roots: { listChanged: true }, sampling: {}, elicitation: { form: {} } };
const CONDITIONAL = ['get-roots-list', 'trigger-elicitation-request', 'trigger-sampling-request'];
const NEGOTIATIONS = { default: undefined, auto: { mode: 'auto' }, pinned: { mode: { pin: '2026-07-28' } } };
const ELICITED = { name: 'Ada', check: true, email: 'ada@example.com', integer: 3, number: 2.5 };

const FS_ENTRY = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const ASK_PROGRESS = path.join(HERE, 'fixtures', 'ask-progress-server.mjs');

// the client's root (with a file in it) and the directory server-filesystem is started with
const DIRS = (() => {
  const base = tmpPath('transparent');
  const root = path.join(base, 'client-root');
  const served = path.join(base, 'server-dir');
  mkdirSync(root, { recursive: true });
  mkdirSync(served, { recursive: true });
  const note = `only in the client's root ${process.pid}\n`;
  writeFileSync(path.join(root, 'note.txt'), note);
  writeFileSync(path.join(served, 'other.txt'), 'only in the server directory\n');
  return { base, root: realpathSync(root), served: realpathSync(served), note };
})();
const ROOTS = [{ uri: pathToFileURL(DIRS.root).href, name: 'client-root' }];

// Whatever a test started and left (a probe sibling, a backend) is ended here,
// by pid: every process below this test file's own.
afterEach(async () => {
  const left = descendants(process.pid).filter(isAlive);
  if (left.length) { killAll(left, 'SIGTERM'); await sleep(200); killAll(left.filter(isAlive)); }
});

// ---------------------------------------------------------------------------
// clients

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

/**
 * An SDK v2 client connected to TARGET: {stdio: {command, args}} (spawned by the
 * client) or {http: URL}. NEGOTIATION is a key of NEGOTIATIONS. The client
 * answers, for the capabilities it declares: roots/list with ROOTS,
 * sampling/createMessage with "sampled: PROMPT", elicitation/create by accepting
 * ELICITED. Returns {client, wire, asked, errors, stderr(), close()}.
 */
async function open(target, { negotiation = 'default', caps = FULL_CAPS } = {}) {
  let transport;
  let stderr = '';
  if (target.stdio) {
    transport = new StdioClientTransport({ command: target.stdio.command, args: target.stdio.args,
      ...(target.stdio.env ? { env: { ...process.env, ...target.stdio.env } } : {}), stderr: 'pipe' });
    transport.stderr?.on('data', (c) => { stderr += c; if (stderr.length > 200_000) stderr = stderr.slice(-200_000); });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(target.http));
  }
  const wire = record(transport);
  const client = new Client(CLIENT_INFO, { capabilities: caps, versionNegotiation: NEGOTIATIONS[negotiation] });
  const asked = [];
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  if (caps.roots) {
    client.setRequestHandler('roots/list', async () => { asked.push({ method: 'roots/list' }); return { roots: ROOTS }; });
  }
  if (caps.sampling) {
    client.setRequestHandler('sampling/createMessage', async (req) => {
      const text = req.params.messages?.[0]?.content?.text ?? '';
      asked.push({ method: 'sampling/createMessage', text });
      return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${text}` } };
    });
  }
  if (caps.elicitation) {
    client.setRequestHandler('elicitation/create', async (req) => {
      asked.push({ method: 'elicitation/create', text: req.params.message });
      return { action: 'accept', content: ELICITED };
    });
  }
  let tree = [];
  const session = {
    client, wire, asked, errors, stderr: () => stderr,
    async close() {
      if (transport.pid) tree = [...new Set([...tree, transport.pid, ...descendants(transport.pid)])];
      try { await client.close(); } catch { /* ignore */ }
      const left = tree.filter(isAlive);
      if (left.length) { await sleep(200); killAll(left.filter(isAlive)); }
    },
  };
  try {
    await client.connect(transport);
  } catch (e) {
    await session.close();
    if (stderr) e.message += `\n--- stderr (tail) ---\n${stderr.slice(-2000)}`;
    throw e;
  }
  if (transport.pid) tree = [transport.pid, ...descendants(transport.pid)];
  return session;
}

/** Runs FN(session) with a client from open(), always closing it; failures get the stderr tail. */
async function withClient(target, opts, fn) {
  const s = await open(target, opts);
  try {
    return await fn(s);
  } catch (e) {
    const tail = s.stderr().slice(-2500);
    if (tail) e.message += `\n--- stderr (tail) ---\n${tail}`;
    throw e;
  } finally {
    await s.close();
  }
}

/** The stdio target for mcp-chain wrapping SERVER ({command, args}); EXTRA goes into the config. */
function chainStdio(server, extra) {
  return { stdio: { command: CHAIN, args: ['--config', writeConfig(server, { extra })] } };
}

/** The stdio target for SERVER itself. */
function directStdio(server) {
  return { stdio: { command: server.command === 'node' ? process.execPath : server.command, args: server.args ?? [] } };
}

/** Runs FN(chain) with `mcp-chain --listen 127.0.0.1:0` on SERVER, always stopping it. */
async function withHttpChain(server, extra, fn) {
  const chain = await startChain(server, { extra });
  try {
    return await fn(chain);
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await chain.stop();
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

/** server-everything serving Streamable HTTP itself (`streamableHttp`, port from $PORT). */
async function withEverythingHttp(fn) {
  let proc;
  let out = '';
  let url;
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    out = '';
    proc = spawn(process.execPath, [SE_ENTRY, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.on('data', (c) => { out += c; });
    proc.stderr.on('data', (c) => { out += c; });
    await waitFor(() => /listening on port/.test(out) || proc.exitCode !== null,
      { timeoutMs: 10_000, what: 'server-everything to listen' });
    if (/listening on port/.test(out)) { url = `http://127.0.0.1:${port}/mcp`; break; }
    if (attempt >= 2) assert.fail(`server-everything did not listen:\n${out}`);
  }
  const exited = new Promise((r) => proc.once('exit', r));
  try {
    return await fn(url);
  } finally {
    proc.kill('SIGINT');
    let timer;
    const gone = await Promise.race([exited.then(() => true), new Promise((r) => { timer = setTimeout(r, 3000, false); })]);
    clearTimeout(timer);
    if (!gone) proc.kill('SIGKILL');
  }
}

const names = (list) => list.map((x) => x.name);

/** The tool names once they equal EXPECTED (or, after MS, whatever they are). */
async function toolsSettled(client, expected, ms = 3000) {
  let seen = [];
  await waitFor(async () => {
    seen = names((await client.listTools()).tools);
    return JSON.stringify(seen) === JSON.stringify(expected);
  }, { timeoutMs: ms, interval: 100, what: 'the tool list' }).catch(() => {});
  return seen;
}

/** Progress notifications the client received after index FROM: [token, progress, total]. */
function progressSince(wire, from) {
  return wire.received.slice(from).filter((m) => m.method === 'notifications/progress')
    .map((m) => [m.params.progressToken, m.params.progress, m.params.total]);
}

// ---------------------------------------------------------------------------
// 1. server-everything

/** What a client sees of server-everything, as comparable data. */
async function everythingTranscript({ client, wire, asked }) {
  const out = {
    version: client.getNegotiatedProtocolVersion(),
    era: client.getProtocolEra(),
    server: client.getServerVersion()?.name,
  };
  let tools = [];
  await waitFor(async () => {
    tools = names((await client.listTools()).tools);
    return CONDITIONAL.every((n) => tools.includes(n));
  }, { timeoutMs: 5000, interval: 100, what: 'the tools server-everything offers a client with sampling, elicitation and roots' })
    .catch(() => {});
  out.tools = tools;
  out.prompts = names((await client.listPrompts()).prompts);
  out.resources = names((await client.listResources()).resources);
  out.echo = (await client.callTool({ name: 'echo', arguments: { message: 'transparent' } })).content;
  out.sum = (await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } })).content;

  const from = wire.received.length;
  const long = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
    { onprogress: () => {} });
  out.long = long.content;
  const call = wire.sent.filter((m) => m.method === 'tools/call' && m.params?.name === 'trigger-long-running-operation').at(-1);
  const token = call.params._meta?.progressToken;
  assert.notEqual(token, undefined, 'the client sent a progressToken');
  const progress = progressSince(wire, from);
  assert.ok(progress.every(([t]) => t === token),
    `every progress notification carries the call's own token ${token}: ${JSON.stringify(progress)}`);
  out.progress = progress.map(([, p, total]) => [p, total]);

  out.sampling = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello there', maxTokens: 20 } })
    .then((r) => r.content, (e) => `error: ${e.message}`);
  out.elicitation = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} })
    .then((r) => r.content, (e) => `error: ${e.message}`);
  out.roots = await client.callTool({ name: 'get-roots-list', arguments: {} })
    .then((r) => r.content, (e) => `error: ${e.message}`);
  out.asked = asked.filter((a) => a.method !== 'roots/list');
  out.askedRoots = asked.some((a) => a.method === 'roots/list');
  return out;
}

/** The facts every run must show, whatever the comparison says. */
function checkEverything(t) {
  assert.equal(t.server, 'mcp-servers/everything');
  for (const n of ['echo', 'get-sum', 'trigger-long-running-operation', ...CONDITIONAL]) assert.ok(t.tools.includes(n), `${n} listed`);
  assert.ok(t.prompts.length > 0 && t.resources.length > 0);
  assert.deepEqual(t.echo, [{ type: 'text', text: 'Echo: transparent' }]);
  assert.match(JSON.stringify(t.sum), /42/);
  assert.deepEqual(t.progress, [[1, 3], [2, 3], [3, 3]], 'every progress step');
  assert.match(JSON.stringify(t.sampling), /sampled: .*hello there/);
  assert.match(JSON.stringify(t.elicitation), /Name: Ada/);
  assert.ok(JSON.stringify(t.roots).includes(ROOTS[0].uri), `roots listed: ${JSON.stringify(t.roots)}`);
  assert.deepEqual(t.asked.map((a) => a.method), ['sampling/createMessage', 'elicitation/create']);
  assert.equal(t.askedRoots, true, 'the server asked for the roots');
}

for (const transport of ['stdio', 'http']) {
  for (const negotiation of ['default', 'auto']) {
    test(`[${transport}/${negotiation}] server-everything: the same versions, lists, results, progress, sampling, elicitation and roots directly and through mcp-chain`, T, async () => {
      const se = everythingServer();
      const run = (target) => withClient(target, { negotiation }, everythingTranscript);
      let direct, chained;
      if (transport === 'stdio') {
        [direct, chained] = await Promise.all([run(directStdio(se)), run(chainStdio(se))]);
      } else {
        [direct, chained] = await Promise.all([
          withEverythingHttp((url) => run({ http: url })),
          withHttpChain(se, undefined, (chain) => run({ http: chain.url.href })),
        ]);
      }
      checkEverything(direct);
      // server-everything speaks only the handshake era: an auto client falls back to it
      assert.equal(direct.version, '2025-11-25');
      assert.equal(direct.era, 'legacy');
      assert.deepEqual(chained, direct, 'what the client sees through mcp-chain differs from what it sees directly');
    });
  }
}

// the same through five modules that read every message and change nothing
for (const negotiation of ['default', 'auto']) {
  test(`[stdio/${negotiation}, modules] server-everything: the same through modules that read every message`, T, async () => {
    const se = everythingServer();
    const run = (target) => withClient(target, { negotiation }, everythingTranscript);
    const m = serverParams('modules', se);
    const [direct, chained] = await Promise.all([run(directStdio(se)),
      run({ stdio: { command: m.command, args: m.args, env: m.env } })]);
    checkEverything(direct);
    assert.deepEqual(chained, direct, 'what the client sees through mcp-chain and its modules differs from what it sees directly');
  });
}

// ---------------------------------------------------------------------------
// 2. server-filesystem: the client's roots replace the server's directory

const FS_SERVER = { command: 'node', args: [FS_ENTRY, DIRS.served] };
const ROOTS_APPLIED = /Updated allowed directories from MCP roots/;

/**
 * One client session with server-filesystem: waits (at most 2 s) for the server
 * to say it applied the client's roots (its stderr, relayed by mcp-chain), then
 * the first tool call reads the file in the client's root. Returns what happened.
 * (The wait is needed directly too: server-filesystem asks roots/list from its
 * `notifications/initialized` handler and does not hold calls meanwhile, so a
 * call sent the moment connect() resolves is refused "Access denied" even
 * directly. Directly the roots are applied some 20-60 ms after connect.)
 */
async function filesystemRun(target, negotiation, stderrOf) {
  return withClient(target, { negotiation, caps: { roots: { listChanged: true } } }, async (s) => {
    const err = () => (stderrOf ? stderrOf() : s.stderr());
    const applied = await waitFor(() => ROOTS_APPLIED.test(err()), { timeoutMs: 2000, what: 'roots applied' })
      .then(() => true, () => false);
    const read = await s.client.callTool({ name: 'read_text_file', arguments: { path: path.join(DIRS.root, 'note.txt') } });
    const allowed = await s.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    return {
      version: s.client.getNegotiatedProtocolVersion(),
      rootsAsked: s.asked.length > 0,
      applied,
      read: read.isError ? `error: ${read.content?.[0]?.text}` : read.content?.[0]?.text,
      allowed: allowed.content?.[0]?.text,
    };
  });
}

const FS_OK = { rootsAsked: true, applied: true, read: DIRS.note, allowed: `Allowed directories:\n${DIRS.root}` };

// default and auto as configured by default ("eras": "follow": both end in the
// handshake era, as directly)
for (const transport of ['stdio', 'http']) {
  for (const negotiation of ['default', 'auto']) {
    test(`[${transport}/${negotiation}] server-filesystem: the client's root, not the server's directory, is allowed by the first tool call (3 runs through mcp-chain)`, T, async () => {
      // directly (stdio: server-filesystem speaks nothing else; and only the handshake era)
      const direct = await filesystemRun(directStdio(FS_SERVER), negotiation);
      const { version, ...directRest } = direct;
      assert.deepEqual(directRest, FS_OK, 'directly');
      const runs = [];
      for (let i = 0; i < 3; i++) {
        const r = transport === 'stdio'
          ? await filesystemRun(chainStdio(FS_SERVER), negotiation)
          : await withHttpChain(FS_SERVER, undefined, (chain) => filesystemRun({ http: chain.url.href }, negotiation, () => chain.stderr));
        runs.push(r);
      }
      assert.deepEqual(runs, [1, 2, 3].map(() => ({ version, ...FS_OK })),
        `every run through mcp-chain: version ${version}, the client asked for its roots, the server applied them before the first call, the file read: ${JSON.stringify(runs)}`);
    });
  }
}

/*
 * A pinned 2026-07-28 client on stdio with "eras": "both" (the bridge): the
 * era has no requests outside a call, so the roots/list server-filesystem
 * sends after initialized waits in mcp-chain and is put to the client as an
 * input_required round of its first tool call, whose retry goes on to the
 * server only after the server has the answer. (server-filesystem applies
 * roots asynchronously, so that very call may still race it, as a fast
 * client's first call does directly: the second call is the one checked.)
 */
/** One pinned 2026-07-28 run against TARGET (STDERR: the server's stderr as relayed). */
async function filesystemPinned(target, stderrOf) {
  return withClient(target, { negotiation: 'pinned', caps: { roots: { listChanged: true } } }, async (s) => {
    const err = () => (stderrOf ? stderrOf() : s.stderr());
    await sleep(300);   // the server asked for its roots meanwhile: nothing reaches the client
    const askedBefore = s.asked.length;
    await s.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    const askedInCall = s.asked.length - askedBefore;
    await waitFor(() => ROOTS_APPLIED.test(err()), { timeoutMs: 2000, what: 'roots applied' });
    const read = await s.client.callTool({ name: 'read_text_file', arguments: { path: path.join(DIRS.root, 'note.txt') } });
    const allowed = await s.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    return { version: s.client.getNegotiatedProtocolVersion(), askedBefore, askedInCall,
      read: read.isError ? `error: ${read.content?.[0]?.text}` : read.content?.[0]?.text,
      allowed: allowed.content?.[0]?.text };
  });
}

for (const transport of ['stdio', 'http']) {
  test(`[${transport}/pinned, eras both] server-filesystem: the roots/list the server sent outside any call is asked in the first call; the client's root is then allowed (3 runs)`, T, async () => {
    for (let i = 0; i < 3; i++) {
      const got = transport === 'stdio'
        ? await filesystemPinned(chainStdio(FS_SERVER, { eras: 'both' }))
        : await withHttpChain(FS_SERVER, { eras: 'both' }, (chain) => filesystemPinned({ http: chain.url.href }, () => chain.stderr));
      assert.deepEqual(got, { version: '2026-07-28', askedBefore: 0, askedInCall: 1, read: DIRS.note,
        allowed: `Allowed directories:\n${DIRS.root}` }, `run ${i + 1}`);
    }
  });
}

// ---------------------------------------------------------------------------
// 3. two 2026-07-28 clients with different capabilities through one HTTP front

let directListsMemo = null;
/**
 * The tool lists server-everything gives a client declaring no capabilities and
 * one declaring sampling, elicitation and roots, directly over HTTP: in
 * 2026-07-28 when it speaks it, otherwise with handshake-era clients.
 */
function directLists() {
  directListsMemo ??= withEverythingHttp(async (url) => {
    const pinned = await open({ http: url }, { negotiation: 'pinned', caps: {} }).then(
      async (s) => { await s.close(); return true; }, () => false);
    const negotiation = pinned ? 'pinned' : 'default';
    const none = await withClient({ http: url }, { negotiation, caps: {} }, async ({ client }) => {
      await sleep(300);
      return names((await client.listTools()).tools);
    });
    const full = await withClient({ http: url }, { negotiation, caps: FULL_CAPS }, async ({ client }) => {
      let seen = [];
      await waitFor(async () => {
        seen = names((await client.listTools()).tools);
        return CONDITIONAL.every((n) => seen.includes(n));
      }, { timeoutMs: 5000, interval: 100, what: 'the conditional tools' });
      return seen;
    });
    return { era: pinned ? '2026-07-28' : 'handshake', none, full };
  });
  return directListsMemo;
}

for (const order of [['none', 'full'], ['full', 'none']]) {
  test(`[http, eras both] two 2026-07-28 clients through one front, ${order[0]} capabilities first: each sees the tools its own capabilities earn`, T, async (t) => {
    const ref = await directLists();
    t.diagnostic(`reference: server-everything directly over HTTP, ${ref.era} clients`);
    assert.ok(CONDITIONAL.every((n) => ref.full.includes(n) && !ref.none.includes(n)), JSON.stringify(ref));
    const capsOf = { none: {}, full: FULL_CAPS };
    await withHttpChain(everythingServer(), { eras: 'both' }, async (chain) => {
      const target = { http: chain.url.href };
      const first = await open(target, { negotiation: 'pinned', caps: capsOf[order[0]] });
      try {
        assert.equal(first.client.getNegotiatedProtocolVersion(), '2026-07-28');
        const seen = {};
        seen[`${order[0]} (first)`] = await toolsSettled(first.client, ref[order[0]]);
        const second = await open(target, { negotiation: 'pinned', caps: capsOf[order[1]] });
        try {
          assert.equal(second.client.getNegotiatedProtocolVersion(), '2026-07-28');
          seen[`${order[1]} (second)`] = await toolsSettled(second.client, ref[order[1]]);
          seen[`${order[0]} (first, again)`] = names((await first.client.listTools()).tools);
          const expected = {
            [`${order[0]} (first)`]: ref[order[0]],
            [`${order[1]} (second)`]: ref[order[1]],
            [`${order[0]} (first, again)`]: ref[order[0]],
          };
          // the capability-dependent tools first: a short, readable difference
          const conditional = (lists) => Object.fromEntries(Object.entries(lists)
            .map(([k, v]) => [k, CONDITIONAL.filter((n) => v.includes(n))]));
          assert.deepEqual(conditional(seen), conditional(expected),
            `the capability-dependent tools each client sees (expected: what its capabilities get directly): ${JSON.stringify(conditional(seen))}`);
          assert.deepEqual(seen, expected, 'each client\'s whole tool list is the one its capabilities get directly');
          // and the client with the capabilities can use what they earn
          const full = order[0] === 'full' ? first : second;
          const e = await full.client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
          assert.match(JSON.stringify(e.content), /Name: Ada/);
        } finally {
          await second.close();
        }
      } finally {
        await first.close();
      }
    });
  });
}

// ---------------------------------------------------------------------------
// 4. progress after an input_required round belongs to the retry

const ASK_SERVER = { command: 'node', args: [ASK_PROGRESS] };

/**
 * Calls ask_then_progress (KIND) with an onprogress callback and returns
 * {first, retry, result, progress (wire, [token, progress, total]), callback}.
 */
async function askThenProgress({ client, wire }, kind) {
  const from = wire.received.length;
  const sentFrom = wire.sent.length;
  const callback = [];
  const r = await client.callTool({ name: 'ask_then_progress', arguments: { kind } },
    { onprogress: (p) => callback.push(p) });
  await sleep(50);
  const calls = wire.sent.slice(sentFrom).filter((m) => m.method === 'tools/call');
  return {
    calls,
    result: r.content,
    progress: progressSince(wire, from),
    // the SDK reports its own input_required rounds through onprogress too (with a message)
    callback: callback.filter((p) => !/^Fulfilling input required/.test(p.message ?? '')).map((p) => [p.progress, p.total]),
  };
}

test('[stdio] directly (handshake era): ask_then_progress reports its progress on the call\'s token', T, async () => {
  await withClient(directStdio(ASK_SERVER), { caps: FULL_CAPS }, async (s) => {
    for (const kind of ['elicitation', 'sampling']) {
      const got = await askThenProgress(s, kind);
      assert.equal(got.calls.length, 1);
      const token = got.calls[0].params._meta.progressToken;
      assert.deepEqual(got.progress, [[token, 1, 3], [token, 2, 3], [token, 3, 3]]);
      assert.deepEqual(got.callback, [[1, 3], [2, 3], [3, 3]]);
      assert.equal(got.result[0].text, kind === 'sampling' ? 'answered sampled: say something; progress 3' : 'answered Ada; progress 3');
    }
  });
});

for (const transport of ['stdio', 'http']) {
  test(`[${transport}, eras both] a 2026-07-28 client: progress after an input_required round goes to the retry's own progressToken, never the first request's`, T, async () => {
    const check = async (s) => {
      assert.equal(s.client.getNegotiatedProtocolVersion(), '2026-07-28');
      const seen = {};
      const expected = {};
      for (const kind of ['elicitation', 'sampling']) {
        const got = await askThenProgress(s, kind);
        const [first, retry] = got.calls;
        const firstToken = first?.params._meta?.progressToken;
        const retryToken = retry?.params._meta?.progressToken;
        // tokens by whose they are: the retry's, the first request's, or another
        const whose = (tok) => (tok === retryToken ? 'retry' : tok === firstToken ? 'first request' : `other: ${JSON.stringify(tok)}`);
        seen[kind] = {
          result: got.result?.[0]?.text,
          calls: got.calls.length,
          round: s.wire.received.find((m) => m.id === first?.id)?.result?.resultType,
          retryHasState: typeof retry?.params.requestState === 'string',
          distinctTokens: retryToken !== undefined && retryToken !== firstToken,
          progress: got.progress.map(([tok, p, total]) => [whose(tok), p, total]),
          onprogress: got.callback,
        };
        expected[kind] = {
          result: kind === 'sampling' ? 'answered sampled: say something; progress 3' : 'answered Ada; progress 3',
          calls: 2,
          round: 'input_required',
          retryHasState: true,
          distinctTokens: true,
          progress: [['retry', 1, 3], ['retry', 2, 3], ['retry', 3, 3]],
          onprogress: [[1, 3], [2, 3], [3, 3]],
        };
      }
      assert.deepEqual(seen, expected,
        `one call and its retry; every progress step on the retry's own token and reaching onprogress: ${JSON.stringify(seen)}`);
      assert.deepEqual(s.errors.filter((e) => /progress/.test(e)), [], 'no progress for an unknown token');
    };
    if (transport === 'stdio') {
      await withClient(chainStdio(ASK_SERVER, { eras: 'both' }), { negotiation: 'pinned' }, check);
    } else {
      await withHttpChain(ASK_SERVER, { eras: 'both' }, (chain) =>
        withClient({ http: chain.url.href }, { negotiation: 'pinned' }, check));
    }
  });
}

// ---------------------------------------------------------------------------
// 5. a server's request during a call, on Streamable HTTP (handshake era): on the
// call's own POST stream, as server-everything sends it directly; a client that
// opened no GET stream (it is optional) is asked all the same

/** Raw Streamable HTTP: initialize, initialized, then tools/call NAME with no GET
 * stream open; answers the server's first request on the call's stream with
 * ANSWER. Returns the methods of the events of the call's stream, in order. */
async function callWithoutGetStream(url, name, args, answer) {
  const base = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
  const post = (body, headers = {}) => fetch(url, { method: 'POST', headers: { ...base, ...headers }, body: JSON.stringify(body) });
  const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25',
    capabilities: { sampling: {} }, clientInfo: { name: 'no-get-stream', version: '1' } } });
  const sid = init.headers.get('mcp-session-id');
  await init.text();
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
  await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, h)).text();
  const res = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: args } }, h);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const seen = [];
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const deadline = Date.now() + 10_000;
  try {
    for (;;) {
      const { value, done } = await Promise.race([reader.read(),
        sleep(Math.max(0, deadline - Date.now())).then(() => ({ done: true, timedOut: true }))]);
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('');
        if (!data) continue;
        const m = JSON.parse(data);
        seen.push(m.method ?? (m.id === 2 ? 'result' : `answer ${m.id}`));
        if (m.method && m.id !== undefined)
          await (await post({ jsonrpc: '2.0', id: m.id, result: answer }, h)).text();
        if (m.id === 2 && !m.method) return seen;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
    await fetch(url, { method: 'DELETE', headers: h }).catch(() => {});
  }
  return seen;
}

test('[http] a server\'s request during a call comes on the call\'s POST stream, directly and through mcp-chain, with no GET stream open', T, async () => {
  const answer = { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'sampled' } };
  const run = (url) => callWithoutGetStream(url, 'trigger-sampling-request', { prompt: 'hi', maxTokens: 5 }, answer);
  const direct = await withEverythingHttp((url) => run(url));
  const chained = await withHttpChain(everythingServer(), undefined, (chain) => run(chain.url.href));
  assert.deepEqual(direct.filter((x) => x !== 'notifications/message'), ['sampling/createMessage', 'result'], 'directly');
  assert.deepEqual(chained.filter((x) => x !== 'notifications/message'), ['sampling/createMessage', 'result'], 'through mcp-chain');
});

/*
 * The same with two calls open at once, to two backends (namespaced): each
 * server's request comes on the stream of the call it belongs to -- the
 * chain knows (the one call of this client open at that backend), so the
 * front need not guess. Before the typed edge the front could tell only
 * when one POST stream was open: with two it sent both requests to the GET
 * stream, which this client never opened, and both calls hung.
 */
test('[http] two calls at two backends: each server request comes on its own call\'s POST stream, with no GET stream open', T, async () => {
  const cfg = path.join(DIRS.base, 'two-ask.json');
  writeFileSync(cfg, JSON.stringify({ mcpServers: { a: ASK_SERVER, b: ASK_SERVER } }));
  const chain = await startChain(null, { config: cfg });
  const base = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
  const url = chain.url.href;
  const post = (body, headers = {}) => fetch(url, { method: 'POST', headers: { ...base, ...headers }, body: JSON.stringify(body) });
  try {
    const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25',
      capabilities: { sampling: {}, elicitation: {} }, clientInfo: { name: 'two-calls', version: '1' } } });
    const sid = init.headers.get('mcp-session-id');
    await init.text();
    const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, h)).text();
    const tools = await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...h, Accept: 'application/json' })).json();
    const names = tools.result.tools.map((t) => t.name).filter((n) => /ask_then_progress/.test(n)).sort();
    assert.equal(names.length, 2, `both backends' tools: ${JSON.stringify(tools)}`);
    /** Opens the call NAME (id ID) and yields its stream's messages. */
    async function* events(id, name, kind) {
      const res = await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { kind, steps: 1 } } }, h);
      assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const data = buf.slice(0, i).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('');
            buf = buf.slice(i + 2);
            if (data) yield JSON.parse(data);
          }
        }
      } finally {
        reader.cancel().catch(() => {});
      }
    }
    const first = events(10, names[0], 'elicitation');
    const q1 = (await within(first.next(), 'the first call\'s question')).value;
    assert.equal(q1.method, 'elicitation/create', `on the first call's stream: ${JSON.stringify(q1)}`);
    // the first call is still open (its question unanswered) when the second asks
    const second = events(11, names[1], 'sampling');
    const q2 = (await within(second.next(), 'the second call\'s question')).value;
    assert.equal(q2.method, 'sampling/createMessage', `on the second call's stream: ${JSON.stringify(q2)}`);
    await (await post({ jsonrpc: '2.0', id: q2.id, result: { model: 'm', role: 'assistant', content: { type: 'text', text: 'two' } } }, h)).text();
    await (await post({ jsonrpc: '2.0', id: q1.id, result: { action: 'accept', content: { name: 'one' } } }, h)).text();
    const resultOf = async (gen, id) => {
      for (;;) {
        const { value, done } = await within(gen.next(), `the answer to ${id}`);
        assert.ok(!done, `stream of ${id} ended without its answer`);
        if (value.id === id && !value.method) return value.result.content[0].text;
      }
    };
    assert.match(await resultOf(second, 11), /^answered two/);
    assert.match(await resultOf(first, 10), /^answered one/);
    await fetch(url, { method: 'DELETE', headers: h }).catch(() => {});
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await chain.stop();
  }
});
