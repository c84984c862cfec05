// Shared helpers for the mcp-chain integration tests.
//
// Environment:
//   MCP_CHAIN  path of the built mcp-chain binary (default: <repo>/build/mcp-chain if it exists)
//   FIXTURE    path of the C fixture server    (default: <repo>/build/tests/fixtures/mcp-fixture-server if it exists)
//   MCP_CHAIN_LOG  passed through to mcp-chain (e.g. "debug")
//   IT_VERBOSE=1   echo the stderr of every spawned server/proxy to our stderr
//
// Every test talks to a server in one of these modes:
//   "direct"  - the SDK client spawns the backend itself
//   "chain"   - the SDK client spawns `mcp-chain --config <tmp>` whose config names the backend
//   "modules" - the same with five middleware modules configured to change nothing
//               (MODULES_PIPELINE): most messages then walk the pipeline unparsed
// Tests that compare modes (compareModes) run the same client sequence in each
// and compare the (normalised) transcripts deeply with the direct one.

import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, '..', '..');
export const SE_DIR = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-everything');
export const SE_ENTRY = path.join(SE_DIR, 'dist', 'index.js');

/** Default per-test timeout (ms). */
export const TEST_TIMEOUT = 30_000;

function resolveBin(envName, fallback) {
  const v = process.env[envName];
  if (v) return path.resolve(v);
  return existsSync(fallback) ? fallback : null;
}

/** Absolute path of the mcp-chain binary, or null when it is not available. */
export const CHAIN = resolveBin('MCP_CHAIN', path.join(ROOT, 'build', 'mcp-chain'));
/** Absolute path of the fixture server binary, or null when it is not available. */
export const FIXTURE = resolveBin('FIXTURE', path.join(ROOT, 'build', 'tests', 'fixtures', 'mcp-fixture-server'));

/** Modes in which comparison tests run. */
export const MODES = CHAIN ? ['direct', 'chain'] : ['direct'];
/** Modes compareModes runs (and compares with "direct"). */
export const COMPARE_MODES = CHAIN ? ['direct', 'chain', 'modules'] : ['direct'];

/** The token the "modules" mode's auth module is given in $MCP_CHAIN_TOKEN. */
const MODULES_TOKEN = 'integration-token';

/**
 * Five modules that must change nothing a client can see: auth (the token from
 * the environment), log to a file, a policy denying only names nobody has, a
 * rewrite of a tool nobody has, and a limit far above what a test sends.
 */
export function modulesPipeline() {
  return [
    { use: 'auth', tokens: [{ sha256: createHash('sha256').update(MODULES_TOKEN).digest('hex'),
                              principal: 'integration', roles: ['test'] }] },
    { use: 'log', sink: 'file', path: path.join(getTmpDir(), `audit-${process.pid}.jsonl`) },
    { use: 'policy', rules: [{ deny: ['no-such-tool-*'] }, { deny: ['no-such://*'], on: 'resources' }] },
    { use: 'rewrite', tools: { 'no-such-tool-x': { description: 'never listed' } } },
    { use: 'limit', rules: [{ concurrency: 256, queue: 256 }] },
  ];
}

export const SKIP_NO_CHAIN = CHAIN ? false : 'MCP_CHAIN not set and build/mcp-chain not found';
export const SKIP_NO_FIXTURE = !FIXTURE
  ? 'FIXTURE not set and build/tests/fixtures/mcp-fixture-server not found'
  : !CHAIN ? SKIP_NO_CHAIN : false;

// ---------------------------------------------------------------------------
// temp config files

let tmpDir = null;
let cfgCounter = 0;
function getTmpDir() {
  if (!tmpDir) {
    tmpDir = mkdtempSync(path.join(tmpdir(), 'mcp-chain-it-'));
    process.on('exit', () => {
      try { rmSync(tmpDir, { recursive: true, force: true }); } catch { /* ignore */ }
    });
  }
  return tmpDir;
}

/** A path inside this run's temp dir (removed at exit). */
export function tmpPath(name) {
  return path.join(getTmpDir(), name);
}

/**
 * Write an mcp-chain config (Claude's `mcpServers` shape) for one backend and
 * return its path. `server` is {command, args, env, cwd}.
 */
export function writeConfig(server, { name = 'backend', extra } = {}) {
  const entry = { command: server.command, args: server.args ?? [] };
  if (server.env) entry.env = server.env;
  if (server.cwd) entry.cwd = server.cwd;
  if (server.scope) entry.scope = server.scope;
  const cfg = { mcpServers: { [name]: entry }, ...(extra ?? {}) };
  const file = path.join(getTmpDir(), `chain-${process.pid}-${++cfgCounter}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

// ---------------------------------------------------------------------------
// backends

/** server-everything, run as `node <abs>/dist/index.js stdio`. */
export function everythingServer({ env, cwd } = {}) {
  return { command: 'node', args: [SE_ENTRY, 'stdio'], env, cwd };
}

/** The C fixture server with the given flags. */
export function fixtureServer(flags = [], { env, cwd } = {}) {
  if (!FIXTURE) throw new Error('fixture server binary not available');
  return { command: FIXTURE, args: flags, env, cwd };
}

/**
 * Parameters for `StdioClientTransport` (also usable for a raw spawn):
 * `{command, args, env, cwd}` for the direct server or for mcp-chain wrapping it.
 */
export function serverParams(mode, server, { name = 'backend', chainArgs, extra } = {}) {
  if (mode === 'direct') {
    return {
      command: server.command === 'node' ? process.execPath : server.command,
      args: server.args ?? [],
      env: server.env,
      cwd: server.cwd,
    };
  }
  if (mode !== 'chain' && mode !== 'modules') throw new Error(`unknown mode ${mode}`);
  if (!CHAIN) throw new Error('mcp-chain binary not available (set MCP_CHAIN)');
  const cfg = mode === 'modules'
    ? writeConfig(server, { name, extra: { ...extra, middleware: modulesPipeline() } })
    : writeConfig(server, { name, extra });
  const env = {};
  if (process.env.MCP_CHAIN_LOG) env.MCP_CHAIN_LOG = process.env.MCP_CHAIN_LOG;
  if (mode === 'modules') env.MCP_CHAIN_TOKEN = MODULES_TOKEN;
  return {
    command: CHAIN,
    args: chainArgs ? chainArgs(cfg) : ['--config', cfg],
    env,
    config: cfg,
  };
}

// ---------------------------------------------------------------------------
// process helpers (Linux /proc)

function readStat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // rest[k] is field k + 3 of proc(5): state, ppid, ... starttime (22)
    return { state: rest[0], ppid: Number(rest[1]), start: rest[19] };
  } catch {
    return null;
  }
}

/*
 * The start time of each process these helpers have seen, by pid. The
 * kernel reuses a pid (pid_max is 32768 here, and the suite starts
 * thousands of processes, in parallel test files), so a pid recorded early
 * in a test may name another test's process by the time it is checked:
 * the pair (pid, start time) names one process for good.
 */
const startOf = new Map();

/** Notes that PID is, from now on, the process whose stat is ST. */
function remember(pid, st) {
  startOf.set(Number(pid), st.start);
}

/**
 * True while the process `pid` named when these helpers first saw it
 * exists and is not a zombie: false once that pid names another process.
 */
export function isAlive(pid) {
  const st = readStat(pid);
  if (st === null || st.state === 'Z' || st.state === 'X') return false;
  const known = startOf.get(Number(pid));
  if (known === undefined) remember(pid, st);
  return known === undefined || known === st.start;
}

/** All live descendants of `pid` (children, grandchildren...). */
export function descendants(pid) {
  const byParent = new Map();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const st = readStat(e);
    if (!st) continue;
    if (!byParent.has(st.ppid)) byParent.set(st.ppid, []);
    byParent.get(st.ppid).push([Number(e), st]);
  }
  const out = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    for (const [c, st] of byParent.get(p) ?? []) {
      remember(c, st);   /* a descendant now: this is the process the pid names */
      if (st.state !== 'Z' && st.state !== 'X') out.push(c);
      stack.push(c);
    }
  }
  return out;
}

export function killAll(pids, signal = 'SIGKILL') {
  for (const p of pids) {
    try { process.kill(p, signal); } catch { /* gone */ }
  }
}

// ---------------------------------------------------------------------------
// small async helpers

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll `pred` until it returns truthy or `timeoutMs` elapses (then throw). */
export async function waitFor(pred, { timeoutMs = 5000, interval = 20, what = 'condition' } = {}) {
  const t0 = Date.now();
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(interval);
  }
}

/** Run a promise-returning fn and capture {ok, value} / {ok:false, code, message} for comparisons. */
export async function outcome(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    return { ok: false, code: e?.code ?? null, message: String(e?.message ?? e) };
  }
}

// ---------------------------------------------------------------------------
// wire recording

function attachRecorder(transport) {
  const wire = { sent: [], received: [], seq: 0 };
  const origSend = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    wire.sent.push({ seq: ++wire.seq, t: Date.now(), msg: structuredClone(msg) });
    return origSend(msg, opts);
  };
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() { return handler && ((m, e) => handler(m, e)); },
    set(fn) {
      handler = fn
        ? (msg, extra) => {
            wire.received.push({ seq: ++wire.seq, t: Date.now(), msg: structuredClone(msg) });
            return fn(msg, extra);
          }
        : fn;
    },
  });
  return wire;
}

function collectStream(stream, sink, limit = 256 * 1024) {
  if (!stream) return;
  stream.on('data', (chunk) => {
    sink.text += chunk.toString('utf8');
    if (sink.text.length > limit) sink.text = sink.text.slice(-limit);
    if (process.env.IT_VERBOSE) process.stderr.write(chunk);
  });
  stream.on('error', () => {});
}

export const DEFAULT_CLIENT_INFO = { name: 'mcp-chain-integration', version: '1.2.3' };

/**
 * Connect an SDK 1.x client in `mode` to `server`.
 * opts: capabilities, clientInfo, setup(client) (register handlers before connect),
 *       maxBufferSize, name (config key), chainArgs(cfg) -> argv, clientOptions
 * Returns a session {client, transport, wire, stderr(), pid, mode, close()}.
 */
export async function connect(mode, server, opts = {}) {
  const params = serverParams(mode, server, opts);
  const transport = new StdioClientTransport({
    command: params.command,
    args: params.args,
    env: params.env,
    cwd: params.cwd,
    stderr: 'pipe',
    maxBufferSize: opts.maxBufferSize,
  });
  const err = { text: '' };
  collectStream(transport.stderr, err);
  const wire = attachRecorder(transport);
  const client = new Client(opts.clientInfo ?? DEFAULT_CLIENT_INFO, {
    capabilities: opts.capabilities ?? {},
    ...(opts.clientOptions ?? {}),
  });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  opts.setup?.(client);
  const session = {
    mode, client, transport, wire, errors, config: params.config,
    stderr: () => err.text,
    pid: null,
    tree: [],
    closed: false,
    async close() {
      if (session.closed) return;
      session.closed = true;
      const pid = transport.pid;
      const tree = pid ? [pid, ...descendants(pid)] : [];
      try { await client.close(); } catch { /* ignore */ }
      // never leak processes, whatever the proxy did
      const left = tree.filter(isAlive);
      if (left.length) {
        await sleep(200);
        killAll(left.filter(isAlive));
      }
      session.leftovers = left;
    },
  };
  try {
    await client.connect(transport);
  } catch (e) {
    await session.close();
    throw annotate(e, session);
  }
  session.pid = transport.pid;
  return session;
}

function annotate(e, session) {
  const tail = session.stderr().slice(-4000);
  if (e && typeof e === 'object' && tail && !String(e.message).includes('--- stderr')) {
    try { e.message += `\n--- ${session.mode} stderr (tail) ---\n${tail}`; } catch { /* ignore */ }
  }
  return e;
}

/** Connect, run fn(session), always close. Adds the server's stderr tail to failures. */
export async function withClient(mode, server, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  const session = await connect(mode, server, opts);
  try {
    return await fn(session);
  } catch (e) {
    throw annotate(e, session);
  } finally {
    await session.close();
  }
}

/**
 * Run the same scenario in every available mode (COMPARE_MODES) and deep-compare
 * each transcript (after `normalize`) with the direct one. Returns {direct, chain?, modules?}.
 */
export async function compareModes(t, server, opts, scenario, { normalize = (x) => x } = {}) {
  const results = {};
  for (const mode of COMPARE_MODES) {
    results[mode] = normalize(await withClient(mode, server, opts, (s) => scenario(s, mode)));
  }
  for (const mode of COMPARE_MODES.slice(1)) {
    assert.deepEqual(results[mode], results.direct,
      `transcript through mcp-chain${mode === 'modules' ? ' with five modules' : ''} differs from direct`);
  }
  if (COMPARE_MODES.length === 1)
    t?.diagnostic?.('mcp-chain not available: only the direct run was checked');
  return results;
}

/** Deep copy replacing time-of-day strings (e.g. "2:03:04 AM") by "<time>". */
export function scrubTimes(x) {
  if (typeof x === 'string') return x.replace(/\b\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?/g, '<time>');
  if (Array.isArray(x)) return x.map(scrubTimes);
  if (x && typeof x === 'object') {
    const o = {};
    for (const [k, v] of Object.entries(x)) o[k] = scrubTimes(v);
    return o;
  }
  return x;
}

// ---------------------------------------------------------------------------
// raw stdio (no SDK)

/** Shorten a JSON value for assertion messages. */
export const brief = (x) => {
  const j = JSON.stringify(x);
  return j && j.length > 600 ? `${j.slice(0, 600)}…(${j.length} chars)` : j;
};

export const RAW_CLIENT_INFO = { name: 'raw-test', version: '0.0.1' };

/**
 * mcp-chain wrapping `server` (or, with mode 'direct', the server itself) spawned
 * with pipes; stdout is split into lines, each parsed as JSON.
 */
export class RawChain {
  constructor({ server, env = {}, args, mode = 'chain', extra } = {}) {
    this.mode = mode;
    let cmd;
    if (mode === 'direct') {
      cmd = server.command === 'node' ? process.execPath : server.command;
      args = server.args ?? [];
      env = { ...env, ...(server.env ?? {}) };
    } else {
      if (!CHAIN) throw new Error('mcp-chain binary not available (set MCP_CHAIN)');
      this.config = writeConfig(server, { extra });
      cmd = CHAIN;
      args = args ?? ['--config', this.config];
    }
    this.proc = spawn(cmd, args, {
      cwd: mode === 'direct' ? server.cwd : undefined,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined)),
    });
    this.lines = [];       // {raw, msg} | {raw, parseError}
    this.stderr = '';
    this.waiters = [];
    let buf = Buffer.alloc(0);
    this.proc.stdout.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let i;
      while ((i = buf.indexOf(0x0a)) >= 0) {
        const raw = buf.subarray(0, i).toString('utf8');
        buf = buf.subarray(i + 1);
        let entry;
        try { entry = { raw, msg: JSON.parse(raw) }; } catch (e) { entry = { raw, parseError: String(e) }; }
        this.lines.push(entry);
        this._wake();
      }
    });
    this.proc.stderr.on('data', (c) => {
      this.stderr += c;
      if (this.stderr.length > 200_000) this.stderr = this.stderr.slice(-200_000);
      if (process.env.IT_VERBOSE) process.stderr.write(c);
    });
    this.proc.stdin.on('error', () => {});
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    this.exited.then(() => this._wake());
    this.cursor = 0;       // index of the next unconsumed line
  }

  _wake() { for (const w of this.waiters.splice(0)) w(); }

  /** Write one line (object -> JSON, string/Buffer as-is) terminated by \n. */
  send(x) {
    const data = Buffer.isBuffer(x) ? x : Buffer.from(typeof x === 'string' ? x : JSON.stringify(x));
    this.proc.stdin.write(Buffer.concat([data, Buffer.from('\n')]));
  }

  /** Next unconsumed stdout message (skipping none). */
  async next(timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    while (this.cursor >= this.lines.length) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message from mcp-chain within ${timeoutMs} ms; stderr tail:\n${this.stderr.slice(-2000)}`);
      await new Promise((r) => { this.waiters.push(r); setTimeout(r, left); });
    }
    const e = this.lines[this.cursor++];
    if (e.parseError) throw new Error(`mcp-chain wrote a non-JSON line to stdout: ${JSON.stringify(e.raw.slice(0, 200))}`);
    return e.msg;
  }

  /** Next message that is a response (skips server notifications/requests). */
  async response(timeoutMs = 5000) {
    for (;;) {
      const m = await this.next(timeoutMs);
      if (Array.isArray(m) || m.method === undefined) return m;
    }
  }

  /** Assert nothing (other than server-initiated messages) arrives for `ms`. */
  async expectNoResponse(ms) {
    await sleep(ms);
    const extra = this.lines.slice(this.cursor).filter((e) => e.parseError || Array.isArray(e.msg) || e.msg.method === undefined);
    assert.deepEqual(extra.map((e) => e.raw), [], 'unexpected output');
  }

  async request(id, method, params) {
    this.send({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) });
    return this.response();
  }

  async initialize(protocolVersion = '2025-06-18', id = 'init-1', caps = {}) {
    const res = await this.request(id, 'initialize', { protocolVersion, capabilities: caps, clientInfo: RAW_CLIENT_INFO });
    assert.equal(res.id, id);
    assert.ok(res.result, `initialize failed: ${brief(res)}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return res;
  }

  /** Every stdout line so far parsed as JSON. */
  assertAllJson() {
    const bad = this.lines.filter((e) => e.parseError).map((e) => e.raw);
    assert.deepEqual(bad, [], 'every stdout line must be JSON');
  }

  async close() {
    const tree = this.proc.pid ? [this.proc.pid, ...descendants(this.proc.pid)] : [];
    try { this.proc.stdin.end(); } catch { /* ignore */ }
    const r = await Promise.race([this.exited, sleep(3000).then(() => null)]);
    if (!r) this.proc.kill('SIGKILL');
    await sleep(50);
    killAll(tree.filter(isAlive));
  }
}

export async function withRaw(opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  const c = new RawChain(opts);
  try {
    await fn(c);
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- ${c.mode} stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
}

