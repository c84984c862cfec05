// Real third-party MCP clients, run twice — straight at a server, and through
// mcp-chain with that server as its one backend — must see the same thing.
//
// 1. Claude Code (@anthropic-ai/claude-code, its native binary), offline, in a
//    temporary HOME/XDG tree: `claude mcp add` (stdio and --transport http),
//    `claude mcp list` (its health check connects to every server) and
//    `claude mcp get NAME`. Checked: "Connected" both ways; the same handshake
//    (method and protocol version: Claude Code probes with server/discover and
//    falls back to initialize) as direct; the same tools; no process left.
//    What Claude Code said is read from a transparent relay (stdio_tee.mjs) on
//    stdio, or from a logging reverse proxy in this process over HTTP.
// 2. mcp-remote (default and --protocol auto) driven by the official SDK v1
//    client over stdio, in front of server-everything's Streamable HTTP and in
//    front of `mcp-chain --listen`: the same initialize answer, tools list,
//    sampling, elicitation and roots round trips.
//
// Skipped when mcp-chain, Claude Code's binary or mcp-remote is missing.

import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { CHAIN, HERE, SE_ENTRY, descendants, isAlive, killAll, sleep, waitFor } from './lib.mjs';
import { startChain, within } from './http_lib.mjs';

const TEE = path.join(HERE, 'stdio_tee.mjs');
const MCP_REMOTE = path.join(HERE, 'node_modules', 'mcp-remote', 'dist', 'proxy.js');
const pkgVersion = (name) => {
  try { return JSON.parse(readFileSync(path.join(HERE, 'node_modules', name, 'package.json'), 'utf8')).version; } catch { return null; }
};
const CLAUDE_VERSION = pkgVersion('@anthropic-ai/claude-code');
const MCP_REMOTE_VERSION = pkgVersion('mcp-remote');

/** The native Claude Code binary: the platform package's, or the one postinstall copied into bin/. */
function findClaude() {
  const plat = `${process.platform}-${process.arch}`;
  const base = path.join(HERE, 'node_modules', '@anthropic-ai');
  for (const p of [path.join(base, `claude-code-${plat}`, 'claude'), path.join(base, `claude-code-${plat}-musl`, 'claude'),
    path.join(base, 'claude-code', 'bin', 'claude.exe')]) {
    try { if (statSync(p).size > 1_000_000) return p; } catch { /* not there */ }
  }
  return null;
}
const CLAUDE = findClaude();

const SKIP_CHAIN = CHAIN ? false : 'MCP_CHAIN not set and build/mcp-chain not found';
const SKIP_CLAUDE = SKIP_CHAIN || (CLAUDE ? false : '@anthropic-ai/claude-code is not installed (npm ci --prefix tests/integration)');
const SKIP_REMOTE = SKIP_CHAIN || (existsSync(MCP_REMOTE) ? false : 'mcp-remote is not installed (npm ci --prefix tests/integration)');

const T = { timeout: 120_000 };
const TAG_VAR = 'MCP_CHAIN_COMPARE_TAG';
const PV = 'io.modelcontextprotocol/protocolVersion';

// ---------------------------------------------------------------------------
// processes

function procState(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ')[0];
  } catch { return null; }
}

/** Live (not zombie) processes whose environment holds TAG_VAR=TAG. */
function tagged(tag) {
  const want = `${TAG_VAR}=${tag}`;
  const out = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    let env;
    try { env = readFileSync(`/proc/${e}/environ`, 'latin1'); } catch { continue; }
    if (!env.split('\0').includes(want)) continue;
    const st = procState(e);
    if (st && st !== 'Z' && st !== 'X') out.push(Number(e));
  }
  return out;
}

function cmdlineOf(pid) {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim(); } catch { return '?'; }
}

/** Waits up to MS for every process tagged TAG to be gone; kills the rest; returns what was left (with command lines). */
async function leftTagged(tag, ms = 5000) {
  let left = [];
  const t0 = Date.now();
  do {
    left = tagged(tag);
    if (!left.length) return [];
    await sleep(100);
  } while (Date.now() - t0 < ms);
  const described = left.map((p) => `${p}: ${cmdlineOf(p)}`);
  killAll(left);
  return described;
}

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

/** server-everything serving Streamable HTTP on a free port (its PORT variable). */
async function startEverythingHttp() {
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const proc = spawn(process.execPath, [SE_ENTRY, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const se = { port, proc, log: '', url: `http://127.0.0.1:${port}/mcp` };
    for (const s of [proc.stdout, proc.stderr]) s.on('data', (c) => { se.log += c; });
    se.stop = () => { killAll([proc.pid, ...descendants(proc.pid)].filter(isAlive)); };
    try {
      await waitFor(async () => proc.exitCode !== null || /listening on port/.test(se.log) && await canConnect(port),
        { timeoutMs: 15_000, what: `server-everything streamableHttp on ${port}` });
      if (proc.exitCode === null) return se;
      lastErr = new Error(`server-everything exited: ${se.log}`);
    } catch (e) { lastErr = e; }
    se.stop();
  }
  throw lastErr;
}

// ---------------------------------------------------------------------------
// what a client and a server said to each other

/** Messages logged by stdio_tee.mjs: [{dir: 'c2s'|'s2c', msg}] (and the relay's start/exit records). */
function readTee(file) {
  if (!existsSync(file)) return { msgs: [], records: [] };
  const records = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const msgs = [];
  for (const r of records) {
    if (r.dir !== 'c2s' && r.dir !== 's2c') continue;
    let m;
    try { m = JSON.parse(r.line); } catch { continue; }
    for (const one of Array.isArray(m) ? m : [m]) msgs.push({ dir: r.dir, msg: one });
  }
  return { msgs, records };
}

/**
 * The connections in a transcript: one per server/discover or initialize the
 * client sent, in order, each {method, asked, answer} where answer is the
 * protocol version granted (initialize: the result's; server/discover: the
 * version asked for when the result lists it) or {error: code[, status]}.
 * `final` is the last one that succeeded: what the client connected with.
 */
function handshakes(msgs) {
  const steps = [];
  msgs.forEach((m, i) => {
    const { msg } = m;
    if (m.dir !== 'c2s' || (msg.method !== 'initialize' && msg.method !== 'server/discover') || msg.id === undefined) return;
    const asked = msg.method === 'initialize' ? msg.params?.protocolVersion : msg.params?._meta?.[PV];
    // the answer: by id, or (HTTP) the id-less error the same exchange got
    const res = msgs.slice(i + 1).find((r) => r.dir === 's2c' && r.msg.method === undefined
      && (r.msg.id === msg.id || (r.msg.id == null && m.ex !== undefined && r.ex === m.ex)));
    let answer;
    if (!res) answer = { error: 'no answer', ...(m.status ? { status: m.status } : {}) };
    else if (res.msg.error) answer = { error: res.msg.error.code, ...(res.status ? { status: res.status } : {}) };
    else if (msg.method === 'initialize') answer = res.msg.result?.protocolVersion;
    else answer = (res.msg.result?.supportedVersions ?? []).includes(asked) ? asked : { error: 'version not offered' };
    steps.push({ method: msg.method, asked, answer, clientInfo: msg.params?.clientInfo?.name ?? msg.params?._meta?.['io.modelcontextprotocol/clientInfo']?.name });
  });
  const ok = steps.filter((s) => typeof s.answer === 'string');
  const final = ok.length ? { method: ok.at(-1).method, protocolVersion: ok.at(-1).answer } : null;
  return { steps, final };
}

/** The tools of the last tools/list answer in a transcript. */
function toolsIn(msgs) {
  let out = null;
  msgs.forEach((m, i) => {
    if (m.dir !== 'c2s' || m.msg.method !== 'tools/list') return;
    const res = msgs.slice(i + 1).find((r) => r.dir === 's2c' && r.msg.method === undefined && r.msg.id === m.msg.id);
    if (res?.msg.result?.tools) out = res.msg.result.tools;
  });
  return out;
}

/**
 * A logging reverse proxy in this process in front of http://127.0.0.1:TARGET:
 * every request and response passes byte for byte; the JSON-RPC messages in
 * request bodies (c2s) and in JSON or SSE response bodies (s2c) are kept in
 * `msgs` in the order they passed, with the HTTP status; `requests` lists
 * {method, path, headers, status}.
 */
async function loggingProxy(target) {
  const lp = { msgs: [], requests: [] };
  const agent = new http.Agent({ keepAlive: false });
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const rec = { method: req.method, path: req.url, headers: req.headers, status: null };
      const ex = lp.requests.push(rec);
      const sent = [];
      if (body.length) {
        try {
          const m = JSON.parse(body.toString('utf8'));
          for (const one of Array.isArray(m) ? m : [m]) {
            const entry = { dir: 'c2s', msg: one, path: req.url, ex };
            sent.push(entry);
            lp.msgs.push(entry);
          }
        } catch { /* not JSON: passed on as it is */ }
      }
      // as a reverse proxy does: the Host is the upstream's (mcp-chain refuses another with 403)
      const headers = { ...req.headers, host: `127.0.0.1:${target}` };
      const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers, agent }, (ures) => {
        rec.status = ures.statusCode;
        for (const e of sent) e.status = ures.statusCode;
        res.writeHead(ures.statusCode, ures.rawHeaders);
        const sse = /text\/event-stream/.test(ures.headers['content-type'] ?? '');
        let text = '';
        const take = (data) => {
          try {
            const m = JSON.parse(data);
            for (const one of Array.isArray(m) ? m : [m]) lp.msgs.push({ dir: 's2c', msg: one, status: ures.statusCode, path: req.url, ex });
          } catch { /* an empty priming event, or not JSON */ }
        };
        ures.on('data', (c) => {
          res.write(c);
          text += c.toString('utf8');
          if (!sse) return;
          let i;
          while ((i = text.search(/\r?\n\r?\n/)) >= 0) {
            const block = text.slice(0, i);
            text = text.slice(i).replace(/^\r?\n\r?\n/, '');
            const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
            if (data) take(data);
          }
        });
        ures.on('end', () => {
          if (!sse && text && /json/.test(ures.headers['content-type'] ?? '')) take(text);
          res.end();
        });
        ures.on('error', () => res.destroy());
      });
      up.on('error', () => { if (!res.headersSent) { res.writeHead(502); res.end(); } else res.destroy(); });
      res.on('close', () => up.destroy());
      up.end(body);
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  lp.port = srv.address().port;
  lp.url = `http://127.0.0.1:${lp.port}/mcp`;
  lp.close = async () => {
    srv.closeAllConnections?.();
    await new Promise((r) => srv.close(r));
    agent.destroy();
  };
  return lp;
}

// ---------------------------------------------------------------------------
// Claude Code in a home of its own

/**
 * A temporary HOME (and XDG dirs, TMPDIR, Claude's config dir) for Claude
 * Code, with its network traffic other than to MCP servers turned off. Every
 * process it starts carries TAG_VAR=tag in its environment, so what is left
 * after a command can be found and named.
 */
function claudeHome() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cc-compare-'));
  const tag = randomUUID();
  for (const d of ['.config', '.cache', '.local/share', '.local/state', 'tmp']) mkdirSync(path.join(dir, d), { recursive: true });
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, '.config'),
    XDG_CACHE_HOME: path.join(dir, '.cache'),
    XDG_DATA_HOME: path.join(dir, '.local/share'),
    XDG_STATE_HOME: path.join(dir, '.local/state'),
    TMPDIR: path.join(dir, 'tmp'),
    CLAUDE_CONFIG_DIR: path.join(dir, '.claude'),
    TERM: 'dumb',
    NO_COLOR: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    MCP_TIMEOUT: '30000',
    [TAG_VAR]: tag,
  };
  const home = {
    dir, tag, env,
    /** Runs `claude ARGS` in its own process group; {code, signal, stdout, stderr, ms}. */
    run(args, { timeoutMs = 60_000 } = {}) {
      return new Promise((resolve) => {
        const t0 = Date.now();
        const p = spawn(CLAUDE, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
        let stdout = '';
        let stderr = '';
        p.stdout.on('data', (c) => { stdout += c; });
        p.stderr.on('data', (c) => { stderr += c; });
        const timer = setTimeout(() => {
          stderr += `\n[test] claude ${args.join(' ')}: killed after ${timeoutMs} ms`;
          try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ }
        }, timeoutMs);
        p.on('close', (code, signal) => {
          clearTimeout(timer);
          if (process.env.IT_VERBOSE) process.stderr.write(`[claude ${args.join(' ')}] ${stdout}${stderr}\n`);
          resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 });
        });
      });
    },
    /** `claude ARGS`, which must exit 0; its result. */
    async ok(args, opts) {
      const r = await home.run(args, opts);
      assert.equal(r.code, 0, `claude ${args.join(' ')} exited ${r.code} (${r.signal ?? ''}):\n${r.stdout}\n${r.stderr}`);
      return r;
    },
    /** The servers Claude Code wrote for this project into $HOME/.claude.json (or the config dir's). */
    servers() {
      for (const f of [path.join(dir, '.claude.json'), path.join(dir, '.claude', '.claude.json')]) {
        if (!existsSync(f)) continue;
        const j = JSON.parse(readFileSync(f, 'utf8'));
        const proj = j.projects?.[dir] ?? Object.values(j.projects ?? {})[0];
        return { file: f, ...(proj?.mcpServers ?? {}), ...(j.mcpServers ?? {}) };
      }
      return null;
    },
    async cleanup() {
      const left = await leftTagged(tag, 0);
      try { rmSync(dir, { recursive: true, force: true }); } catch { /* ignore */ }
      return left;
    },
  };
  return home;
}

/** `claude mcp list` output → {NAME: status text}. */
function parseList(stdout) {
  const out = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Za-z0-9_-]+): .* - (.+)$/.exec(line.trim());
    if (m) out[m[1]] = m[2].trim();
  }
  return out;
}
const connected = (status) => /^✔ Connected$|^Connected$/.test(status ?? '');

/** A file in HOME's folder for a transcript. */
const logIn = (home, name) => path.join(home.dir, `${name}.jsonl`);

/** mcp-chain's config with server-everything (stdio) as its one backend. */
function chainConfig(home, name, extra = {}) {
  const file = path.join(home.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({
    ...extra,
    mcpServers: { everything: { command: process.execPath, args: [SE_ENTRY, 'stdio'] } },
  }, null, 2));
  return file;
}

/** The protocol version mcp-chain's log says it settled on with Claude Code. */
function chainLogProtocol(text) {
  const m = /(?:client|http#\d+): (?:initialized \(claude-code, protocol ([0-9-]+)\)|serving claude-code \(protocol ([0-9-]+))/.exec(text);
  return m ? (m[1] ?? m[2]) : null;
}

function summary(h) {
  return h.steps.map((s) => `${s.method}(${s.asked}) → ${typeof s.answer === 'string' ? s.answer : JSON.stringify(s.answer)}`).join(', ');
}

// ---------------------------------------------------------------------------
// Claude Code

test('Claude Code: the binary runs offline and reports the installed version', { ...T, skip: SKIP_CLAUDE }, async () => {
  const home = claudeHome();
  try {
    const r = await home.ok(['--version'], { timeoutMs: 30_000 });
    assert.match(r.stdout, new RegExp(`^${CLAUDE_VERSION.replace(/\./g, '\\.')} \\(Claude Code\\)`));
    assert.deepEqual(await leftTagged(home.tag), [], 'claude --version leaves no process');
  } finally {
    await home.cleanup();
  }
});

test('Claude Code over stdio: mcp add/list/get, Connected directly and through mcp-chain, the same handshake and tools', { ...T, skip: SKIP_CLAUDE }, async (t) => {
  const home = claudeHome();
  const realConfig = path.join(os.homedir(), '.claude.json');
  const realBefore = existsSync(realConfig) ? statSync(realConfig).mtimeMs : null;
  try {
    const directLog = logIn(home, 'direct');
    const chainLog = logIn(home, 'chain');
    const chainDebug = path.join(home.dir, 'mcp-chain.log');
    const cfg = chainConfig(home, 'chain');

    let r = await home.ok(['mcp', 'add', 'direct', '-e', `${TAG_VAR}=${home.tag}`, '--',
      process.execPath, TEE, directLog, process.execPath, SE_ENTRY, 'stdio']);
    assert.match(r.stdout, /Added stdio MCP server direct with command: /);
    r = await home.ok(['mcp', 'add', 'chain', '-e', `${TAG_VAR}=${home.tag}`, '--',
      process.execPath, TEE, chainLog, CHAIN, '--config', cfg, '--log-file', chainDebug]);
    assert.match(r.stdout, /Added stdio MCP server chain with command: /);

    const saved = home.servers();
    assert.ok(saved, 'claude mcp add wrote its config in the temporary HOME');
    assert.equal(saved.direct?.command, process.execPath);
    assert.deepEqual(saved.chain?.args, [TEE, chainLog, CHAIN, '--config', cfg, '--log-file', chainDebug]);
    assert.deepEqual(saved.chain?.env, { [TAG_VAR]: home.tag });

    r = await home.ok(['mcp', 'list']);
    const list = parseList(r.stdout);
    t.diagnostic(`claude mcp list (${r.ms} ms): ${JSON.stringify(list)}`);
    assert.ok(connected(list.direct), `direct: ${list.direct}\n${r.stdout}`);
    assert.ok(connected(list.chain), `through mcp-chain: ${list.chain}\n${r.stdout}\n--- mcp-chain log ---\n${existsSync(chainDebug) ? readFileSync(chainDebug, 'utf8').slice(-3000) : '(none)'}`);
    assert.deepEqual(await leftTagged(home.tag), [], 'no process is left after claude mcp list');

    for (const name of ['direct', 'chain']) {
      r = await home.ok(['mcp', 'get', name]);
      assert.match(r.stdout, new RegExp(`^${name}:`, 'm'));
      assert.match(r.stdout, /Status: ✔ Connected/, r.stdout);
      assert.match(r.stdout, /Type: stdio/);
      assert.match(r.stdout, new RegExp(`${TAG_VAR}=${home.tag}`));
      assert.deepEqual(await leftTagged(home.tag), [], `no process is left after claude mcp get ${name}`);
    }

    const direct = readTee(directLog);
    const chain = readTee(chainLog);
    const hd = handshakes(direct.msgs);
    const hc = handshakes(chain.msgs);
    t.diagnostic(`direct: ${summary(hd)}`);
    t.diagnostic(`through mcp-chain: ${summary(hc)}`);
    // list + get NAME: Claude Code connected twice to each
    assert.equal(hd.steps.filter((s) => typeof s.answer === 'string').length, 2, summary(hd));
    assert.ok(hd.final, 'Claude Code connected to server-everything directly');
    assert.equal(hd.steps[0].method, 'server/discover', 'Claude Code probes a stdio server with server/discover first');
    assert.equal(hd.steps[0].clientInfo, 'claude-code');
    assert.deepEqual(hc.final, hd.final, 'Claude Code negotiates through mcp-chain what it negotiates directly');
    assert.deepEqual(hc.steps.map((s) => [s.method, s.asked, typeof s.answer === 'string' ? s.answer : 'refused']),
      hd.steps.map((s) => [s.method, s.asked, typeof s.answer === 'string' ? s.answer : 'refused']),
      'each connection goes the same way through mcp-chain as directly');
    assert.equal(chainLogProtocol(readFileSync(chainDebug, 'utf8')), hd.final.protocolVersion, 'mcp-chain logs the same version');

    const td = toolsIn(direct.msgs);
    const tc = toolsIn(chain.msgs);
    assert.ok(td?.some((x) => x.name === 'echo'), 'Claude Code listed the tools directly');
    assert.deepEqual(tc?.map((x) => x.name), td.map((x) => x.name), 'the same tool names through mcp-chain');
    assert.deepEqual(tc, td, 'the same tools through mcp-chain');

    // the relays saw their server end: Claude Code ends each server it started
    for (const [what, log] of [['direct', direct], ['chain', chain]]) {
      const starts = log.records.filter((x) => x.dir === 'start').length;
      const exits = log.records.filter((x) => x.dir === 'exit');
      assert.equal(exits.length, starts, `${what}: every server started was seen to exit`);
    }
    const realAfter = existsSync(realConfig) ? statSync(realConfig).mtimeMs : null;
    assert.equal(realAfter, realBefore, `${realConfig} is left alone`);
  } finally {
    const left = await home.cleanup();
    assert.deepEqual(left, [], 'no process left at the end');
  }
});

test('Claude Code over stdio with "eras": "both": connects through mcp-chain in the 2026-07-28 era', { ...T, skip: SKIP_CLAUDE }, async (t) => {
  const home = claudeHome();
  try {
    const directLog = logIn(home, 'direct');
    const chainLog = logIn(home, 'both');
    const chainDebug = path.join(home.dir, 'mcp-chain.log');
    const cfg = chainConfig(home, 'both', { eras: 'both' });
    await home.ok(['mcp', 'add', 'direct', '-e', `${TAG_VAR}=${home.tag}`, '--',
      process.execPath, TEE, directLog, process.execPath, SE_ENTRY, 'stdio']);
    await home.ok(['mcp', 'add', 'both', '-e', `${TAG_VAR}=${home.tag}`, '--',
      process.execPath, TEE, chainLog, CHAIN, '--config', cfg, '--log-file', chainDebug]);
    const r = await home.ok(['mcp', 'list']);
    const list = parseList(r.stdout);
    assert.ok(connected(list.direct), `direct: ${list.direct}\n${r.stdout}`);
    assert.ok(connected(list.both), `${list.both}\n${r.stdout}\n--- mcp-chain log ---\n${existsSync(chainDebug) ? readFileSync(chainDebug, 'utf8').slice(-3000) : '(none)'}`);
    const h = handshakes(readTee(chainLog).msgs);
    t.diagnostic(`through mcp-chain ("eras": "both"): ${summary(h)}`);
    assert.deepEqual(h.final, { method: 'server/discover', protocolVersion: '2026-07-28' });
    assert.ok(!h.steps.some((s) => s.method === 'initialize'), 'no initialize once server/discover was answered');
    assert.equal(chainLogProtocol(readFileSync(chainDebug, 'utf8')), '2026-07-28');
    const tools = toolsIn(readTee(chainLog).msgs);
    assert.ok(tools?.some((x) => x.name === 'echo'), 'tools/list answered in the 2026-07-28 era');
    assert.deepEqual(await leftTagged(home.tag), [], 'no process is left after claude mcp list');
    const direct = toolsIn(readTee(directLog).msgs);
    assert.ok(direct.some((x) => x.name === 'get-roots-list'), 'directly, Claude Code (roots) gets get-roots-list');
    assert.deepEqual(tools.map((x) => x.name), direct.map((x) => x.name), 'the same tools as directly');
  } finally {
    assert.deepEqual(await home.cleanup(), []);
  }
});

/**
 * Claude Code over HTTP: `claude mcp add --transport http` for DIRECT_URL
 * (through a logging proxy) and for mcp-chain --listen on CONFIG (through
 * another); list and get must say Connected for both, with the same handshake
 * and tools. Returns the two transcripts.
 */
async function claudeHttpCompare(t, directPort, chainConfigFile, { eras } = {}) {
  const home = claudeHome();
  let dp = null;
  let chain = null;
  let cp = null;
  const seen = new Set();
  let failed = false;
  try {
    dp = await loggingProxy(directPort);
    chain = await startChain(null, { config: chainConfigFile });
    cp = await loggingProxy(chain.port);
    let r = await home.ok(['mcp', 'add', '--transport', 'http', 'direct', dp.url]);
    assert.match(r.stdout, new RegExp(`Added HTTP MCP server direct with URL: ${dp.url}`));
    r = await home.ok(['mcp', 'add', '--transport', 'http', 'chain', cp.url]);
    const saved = home.servers();
    assert.deepEqual({ type: saved.chain?.type, url: saved.chain?.url }, { type: 'http', url: cp.url });

    r = await home.ok(['mcp', 'list']);
    const list = parseList(r.stdout);
    t.diagnostic(`claude mcp list (${r.ms} ms): ${JSON.stringify(list)}`);
    assert.ok(connected(list.direct), `direct: ${list.direct}\n${r.stdout}`);
    assert.ok(connected(list.chain), `through mcp-chain: ${list.chain}\n${r.stdout}`);
    for (const name of ['direct', 'chain']) {
      r = await home.ok(['mcp', 'get', name]);
      assert.match(r.stdout, /Status: ✔ Connected/, r.stdout);
      assert.match(r.stdout, /Type: http/);
    }
    assert.deepEqual(await leftTagged(home.tag), [], 'Claude Code leaves no process');

    const hd = handshakes(dp.msgs);
    const hc = handshakes(cp.msgs);
    t.diagnostic(`direct: ${summary(hd)}`);
    t.diagnostic(`through mcp-chain: ${summary(hc)}`);
    assert.equal(hd.steps.filter((s) => typeof s.answer === 'string').length, 2, summary(hd));
    assert.ok(hd.final, 'Claude Code connected directly');
    const td = toolsIn(dp.msgs);
    const tc = toolsIn(cp.msgs);
    assert.ok(td?.some((x) => x.name === 'echo'));
    assert.ok(tc?.some((x) => x.name === 'echo'), 'Claude Code listed the tools through mcp-chain');
    if (eras === 'both') {
      assert.deepEqual(hc.final, { method: 'server/discover', protocolVersion: '2026-07-28' });
      assert.equal(chainLogProtocol(chain.stderr), '2026-07-28');
      // a 2026-07-28 client must still get the tools server-everything offers only to a client with roots/elicitation
      assert.deepEqual(tc.map((x) => x.name), td.map((x) => x.name), 'the same tools as directly');
      return { direct: dp, chain: cp };
    }
    assert.deepEqual(hc.final, hd.final, 'Claude Code negotiates through mcp-chain what it negotiates directly');
    assert.deepEqual(hc.steps.map((s) => [s.method, s.asked, typeof s.answer === 'string' ? s.answer : 'refused']),
      hd.steps.map((s) => [s.method, s.asked, typeof s.answer === 'string' ? s.answer : 'refused']),
      'each connection goes the same way through mcp-chain as directly');
    assert.equal(chainLogProtocol(chain.stderr), hd.final.protocolVersion, 'mcp-chain logs the same version');
    assert.deepEqual(tc?.map((x) => x.name), td.map((x) => x.name), 'the same tool names through mcp-chain');
    assert.deepEqual(tc, td, 'the same tools through mcp-chain');

    // what Claude Code leaves open at mcp-chain: it never DELETEs its sessions
    const methods = cp.requests.map((q) => q.method);
    t.diagnostic(`HTTP requests Claude Code sent mcp-chain: ${JSON.stringify(methods)}; `
      + `mcp-chain's processes afterwards: ${descendants(chain.proc.pid).length}`);
    return { direct: dp, chain: cp };
  } catch (e) {
    failed = true;
    if (chain) e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    let stopped = null;
    if (chain) {
      for (const p of descendants(chain.proc.pid)) seen.add(p);
      stopped = await chain.stop();
    }
    await dp?.close();
    await cp?.close();
    await sleep(100);
    const left = [...seen].filter(isAlive);
    killAll(left);
    const leftClaude = await home.cleanup();
    if (!failed) {
      assert.ok(stopped && stopped.code === 0, `mcp-chain exited ${JSON.stringify(stopped)}`);
      assert.deepEqual(left.map(cmdlineOf), [], 'no process of mcp-chain is left after it stops');
      assert.deepEqual(leftClaude, []);
    }
  }
}

/** Claude Code over HTTP, directly at server-everything and at mcp-chain --listen with
 * the configuration ENTRY(se) makes (EXTRA: its top-level keys and what is expected). */
async function claudeHttpCase(t, entry, extra) {
  const se = await startEverythingHttp();
  const home = mkdtempSync(path.join(os.tmpdir(), 'cc-compare-cfg-'));
  try {
    const cfg = path.join(home, 'chain.json');
    writeFileSync(cfg, JSON.stringify({ ...extra, mcpServers: { everything: entry(se) } }));
    await claudeHttpCompare(t, se.port, cfg, extra);
  } finally {
    se.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

test('Claude Code over HTTP: Connected to server-everything and to mcp-chain --listen (stdio backend), the same handshake and tools', { ...T, skip: SKIP_CLAUDE }, (t) =>
  claudeHttpCase(t, () => ({ command: process.execPath, args: [SE_ENTRY, 'stdio'] })));

test('Claude Code over HTTP: Connected to server-everything and to mcp-chain --listen with that server as its HTTP upstream', { ...T, skip: SKIP_CLAUDE }, (t) =>
  claudeHttpCase(t, (se) => ({ type: 'http', url: se.url })));

test('Claude Code over HTTP with "eras": "both": Connected to mcp-chain --listen in the 2026-07-28 era, server-everything as its HTTP upstream', { ...T, skip: SKIP_CLAUDE }, (t) =>
  claudeHttpCase(t, (se) => ({ type: 'http', url: se.url }), { eras: 'both' }));

// ---------------------------------------------------------------------------
// mcp-remote

const ROOTS = [{ uri: 'file:///tmp/mcp-chain-compare-root', name: 'compare-root' }];
const ELICITED = { name: 'Ada Lovelace', check: true, integer: 7 };

/**
 * The official SDK v1 client spawning mcp-remote URL ...ARGS on stdio (HOME and
 * mcp-remote's config dir temporary), answering sampling, elicitation and
 * roots; lists the tools and calls the three tools that ask the client. The
 * transcript: what the client saw and what it was asked.
 */
async function throughMcpRemote(url, args) {
  const home = mkdtempSync(path.join(os.tmpdir(), 'mcp-remote-compare-'));
  const tag = randomUUID();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MCP_REMOTE, url, ...args],
    env: { HOME: home, MCP_REMOTE_CONFIG_DIR: path.join(home, '.mcp-auth'), [TAG_VAR]: tag },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr += c; if (process.env.IT_VERBOSE) process.stderr.write(c); });
  const client = new Client({ name: 'compare-client', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } });
  const asked = { sampling: [], elicitation: [], roots: 0 };
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    asked.sampling.push(req.params);
    return { model: 'compare-model', role: 'assistant', content: { type: 'text', text: `sampled: ${req.params.messages[0].content.text}` } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.elicitation.push({ message: req.params.message, fields: Object.keys(req.params.requestedSchema?.properties ?? {}) });
    return { action: 'accept', content: ELICITED };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => { asked.roots++; return { roots: ROOTS }; });
  const out = { asked };
  try {
    await within(client.connect(transport), 'mcp-remote to connect', 45_000);
    out.pid = transport.pid;
    out.serverVersion = client.getServerVersion();
    out.capabilities = client.getServerCapabilities();
    out.instructions = client.getInstructions();
    out.tools = (await within(client.listTools(), 'tools/list', 30_000)).tools;
    const call = (name, a) => within(client.callTool({ name, arguments: a }), name, 30_000);
    out.sampling = await call('trigger-sampling-request', { prompt: 'compare sampling', maxTokens: 25 });
    out.elicitation = await call('trigger-elicitation-request', {});
    out.roots = await call('get-roots-list', {});
    out.echo = await call('echo', { message: 'through mcp-remote' });
    return out;
  } catch (e) {
    e.message += `\n--- mcp-remote stderr (tail) ---\n${stderr.slice(-3000)}`;
    throw e;
  } finally {
    await client.close().catch(() => {});
    out.left = await leftTagged(tag, 5000);
    out.stderr = stderr;
    rmSync(home, { recursive: true, force: true });
  }
}

const textOf = (r) => (r?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

/** What server-everything answers when the client answered as ours does. */
function assertAnswered(out, where) {
  assert.ok(out.tools.some((x) => x.name === 'trigger-sampling-request'), `${where}: sampling tool listed`);
  assert.ok(out.tools.some((x) => x.name === 'trigger-elicitation-request'), `${where}: elicitation tool listed`);
  assert.ok(out.tools.some((x) => x.name === 'get-roots-list'), `${where}: roots tool listed`);
  assert.match(textOf(out.sampling), /"text": "sampled: Resource trigger-sampling-request context: compare sampling"/, where);
  assert.match(textOf(out.sampling), /"model": "compare-model"/);
  assert.equal(out.asked.sampling.length, 1, `${where}: one sampling request reached the client`);
  assert.equal(out.asked.sampling[0].maxTokens, 25);
  assert.match(textOf(out.elicitation), /User provided the requested information/, where);
  assert.match(textOf(out.elicitation), /- Name: Ada Lovelace/);
  assert.match(textOf(out.elicitation), /- Favorite Integer: 7/);
  assert.equal(out.asked.elicitation.length, 1);
  assert.ok(out.asked.elicitation[0].fields.includes('name'));
  assert.match(textOf(out.roots), /Current MCP Roots \(1 total\)/, where);
  assert.match(textOf(out.roots), /URI: file:\/\/\/tmp\/mcp-chain-compare-root/);
  assert.ok(out.asked.roots >= 1, `${where}: roots/list reached the client`);
  assert.equal(textOf(out.echo), 'Echo: through mcp-remote');
  assert.deepEqual(out.left, [], `${where}: mcp-remote left no process`);
}

/** The part of a transcript that must not differ: what the client saw. */
const seenByClient = (o) => ({
  serverVersion: o.serverVersion, capabilities: o.capabilities, instructions: o.instructions, tools: o.tools,
  sampling: o.sampling, elicitation: o.elicitation, roots: o.roots, echo: o.echo,
  asked: { sampling: o.asked.sampling, elicitation: o.asked.elicitation },
});

const REMOTE_MODES = [
  { name: 'default', args: [] },
  { name: '--protocol auto', args: ['--protocol', 'auto'] },
  { name: '--protocol auto, mcp-chain with "eras": "both"', args: ['--protocol', 'auto'], eras: 'both' },
];

for (const mode of REMOTE_MODES) {
  test(`mcp-remote ${MCP_REMOTE_VERSION ?? ''} (${mode.name}) + SDK client: server-everything directly and through mcp-chain --listen see the same tools, sampling, elicitation and roots`,
    { ...T, skip: SKIP_REMOTE }, async (t) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-remote-compare-cfg-'));
      const cfg = path.join(dir, 'chain.json');
      writeFileSync(cfg, JSON.stringify({
        ...(mode.eras ? { eras: mode.eras } : {}),
        mcpServers: { everything: { command: process.execPath, args: [SE_ENTRY, 'stdio'] } },
      }));
      let se = null;
      let dp = null;
      let chain = null;
      let cp = null;
      const seen = new Set();
      let failed = false;
      try {
        se = await startEverythingHttp();
        dp = await loggingProxy(se.port);
        const direct = await throughMcpRemote(dp.url, mode.args);
        assertAnswered(direct, 'direct');

        chain = await startChain(null, { config: cfg });
        cp = await loggingProxy(chain.port);
        const via = await throughMcpRemote(cp.url, mode.args);
        for (const p of descendants(chain.proc.pid)) seen.add(p);
        assert.deepEqual(via.left, [], 'mcp-remote left no process');
        if (mode.args.length) assert.match(via.stderr, /Using protocol mode: auto/, 'this mcp-remote has --protocol auto');

        const hd = handshakes(dp.msgs);
        const hc = handshakes(cp.msgs);
        t.diagnostic(`direct: ${summary(hd)}`);
        t.diagnostic(`through mcp-chain: ${summary(hc)}`);
        const refusals = (h) => h.steps.filter((s) => typeof s.answer !== 'string').map((s) => `${s.method}: ${JSON.stringify(s.answer)}`);
        t.diagnostic(`refused probes — direct: ${JSON.stringify(refusals(hd))}; through mcp-chain: ${JSON.stringify(refusals(hc))}`);
        t.diagnostic(`HTTP requests mcp-remote sent mcp-chain: ${JSON.stringify(cp.requests.map((q) => `${q.method} ${q.path} ${q.status}`))}`);
        // the connection that carried the client (mcp-remote names it "... (via mcp-remote X)")
        const main = (h) => h.steps.filter((s) => typeof s.answer === 'string' && /via mcp-remote/.test(s.clientInfo ?? '')).at(-1)
          ?? h.steps.filter((s) => typeof s.answer === 'string').at(-1);
        assert.ok(main(hd), `mcp-remote connected directly: ${summary(hd)}`);
        if (mode.args.length) {
          assert.ok(hd.steps.some((s) => s.method === 'server/discover'), '--protocol auto probes with server/discover');
        } else {
          assert.ok(!hd.steps.some((s) => s.method === 'server/discover'), 'the default mode sends no server/discover');
        }

        if (mode.eras === 'both') {
          // mcp-chain offers 2026-07-28 and mcp-remote takes it; what the client sees must not change
          assert.deepEqual({ method: main(hc)?.method, protocolVersion: main(hc)?.answer },
            { method: 'server/discover', protocolVersion: '2026-07-28' }, summary(hc));
          assert.equal(textOf(via.echo), 'Echo: through mcp-remote');
          // the tools that exist only for a client with sampling/elicitation/roots, and their round trips (input_required ⇄ server requests)
          assertAnswered(via, 'through mcp-chain');
          assert.deepEqual(seenByClient(via), seenByClient(direct), 'the client sees the same through mcp-chain as directly');
          return;
        }

        assertAnswered(via, 'through mcp-chain');
        assert.deepEqual(seenByClient(via), seenByClient(direct), 'the client sees the same through mcp-chain as directly');
        assert.deepEqual({ method: main(hc)?.method, protocolVersion: main(hc)?.answer },
          { method: main(hd).method, protocolVersion: main(hd).answer },
          'mcp-remote negotiates through mcp-chain what it negotiates directly');
        assert.deepEqual(hc.steps.map((s) => [s.method, s.asked, s.clientInfo, typeof s.answer === 'string' ? s.answer : 'refused']),
          hd.steps.map((s) => [s.method, s.asked, s.clientInfo, typeof s.answer === 'string' ? s.answer : 'refused']),
          'each connection mcp-remote makes goes the same way through mcp-chain as directly');
      } catch (e) {
        failed = true;
        if (chain) e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
        if (se) e.message += `\n--- server-everything log (tail) ---\n${se.log.slice(-1500)}`;
        throw e;
      } finally {
        let stopped = null;
        if (chain) {
          for (const p of descendants(chain.proc.pid)) seen.add(p);
          stopped = await chain.stop();
        }
        await cp?.close();
        await dp?.close();
        se?.stop();
        rmSync(dir, { recursive: true, force: true });
        await sleep(100);
        const left = [...seen].filter(isAlive);
        killAll(left);
        if (!failed) {
          assert.ok(stopped && stopped.code === 0, `mcp-chain exited ${JSON.stringify(stopped)}`);
          assert.deepEqual(left.map(cmdlineOf), [], 'no process of mcp-chain is left after it stops');
        }
      }
    });
}
