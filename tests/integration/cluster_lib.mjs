// Helpers for the tests that run several mcp-chain instances as one service
// behind a load balancer (cluster.test.mjs): redis-server, N instances of
// `mcp-chain --listen`, HAProxy and nginx started from the SHIPPED files in
// deploy/ (only addresses, ports and paths filled in), each on a free
// loopback port, each stopped by its pid. Every process's stderr goes to a
// file in the cluster's temp dir and to a buffer the tests read.
//
// Environment (besides lib.mjs's MCP_CHAIN, FIXTURE, IT_VERBOSE):
//   HAPROXY       haproxy binary        (default /usr/sbin/haproxy)
//   NGINX         nginx binary          (default /usr/sbin/nginx)
//   REDIS_SERVER  redis-server binary   (default /usr/bin/redis-server)
//   KEEP_CLUSTER_DIR=1  keep the temp dir (logs, generated configs) after stop

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { CHAIN, ROOT, descendants, isAlive, killAll, sleep, waitFor } from './lib.mjs';

const bin = (env, dflt) => process.env[env] || dflt;
export const HAPROXY = bin('HAPROXY', '/usr/sbin/haproxy');
export const NGINX = bin('NGINX', '/usr/sbin/nginx');
export const REDIS = bin('REDIS_SERVER', '/usr/bin/redis-server');
export const DEPLOY = path.join(ROOT, 'deploy');

export const SKIP_NO_HAPROXY = existsSync(HAPROXY) ? false : `${HAPROXY} not installed`;
export const SKIP_NO_NGINX = existsSync(NGINX) ? false : `${NGINX} not installed`;
export const SKIP_NO_REDIS = existsSync(REDIS) ? false : `${REDIS} not installed`;

/** A port free on 127.0.0.1 right now (another process may still take it). */
/* ports handed out by freePort in this process: one is never given twice,
 * since two instances started at once could otherwise be told the same
 * port the kernel gave back (one then fails with "Address already in use") */
const givenPorts = new Set();

export async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

/** True when something accepts a TCP connection on 127.0.0.1:PORT. */
export function accepts(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/**
 * Spawns CMD ARGS with stdout and stderr appended to LOGFILE and kept in
 * p.log (stdin ignored). p.exited resolves {code, signal}.
 */
function spawnLogged(name, cmd, args, { env, logFile, cwd } = {}) {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd,
    env: { ...process.env, ...(env ?? {}) } });
  const file = createWriteStream(logFile, { flags: 'a' });
  const p = { name, proc, pid: proc.pid, log: '', logFile, seen: new Set() };
  const take = (c) => {
    p.log += c;
    file.write(c);
    if (process.env.IT_VERBOSE) process.stderr.write(`[${name}] ${c}`);
  };
  proc.stdout.setEncoding('utf8');
  proc.stderr.setEncoding('utf8');
  proc.stdout.on('data', take);
  proc.stderr.on('data', take);
  p.exited = new Promise((r) => proc.once('exit', (code, signal) => { file.end(); r({ code, signal }); }));
  p.running = () => proc.exitCode === null && proc.signalCode === null;
  return p;
}

/** Waits until P listens on PORT (polled), failing early when P exits. */
async function waitListening(p, port, timeoutMs = 10_000) {
  await waitFor(async () => !p.running() || await accepts(port),
    { timeoutMs, interval: 25, what: `${p.name} to listen on ${port}` });
  assert.ok(p.running(), `${p.name} exited before it listened: ${JSON.stringify(p.proc.exitCode)}\n${p.log.slice(-3000)}`);
}

/**
 * Stops P: SIGTERM, then SIGKILL after GRACE_MS; then SIGKILL to any of its
 * descendants still alive 2 s later (seen now or recorded in p.seen).
 * Resolves its exit {code, signal, left: how many descendants were killed}.
 */
export async function stopProcess(p, { graceMs = 10_000, signal = 'SIGTERM' } = {}) {
  for (const d of descendants(p.pid)) p.seen.add(d);
  if (p.running()) p.proc.kill(signal);
  let timer;
  let r = await Promise.race([p.exited, new Promise((res) => { timer = setTimeout(res, graceMs, null); })]);
  clearTimeout(timer);
  if (!r) {
    p.proc.kill('SIGKILL');
    r = await p.exited;
  }
  // what it started gets a moment to see its stdin close; then SIGKILL, counted
  const left = await waitFor(() => [...p.seen].filter(isAlive).length === 0, { timeoutMs: 2000, what: `${p.name}'s children to exit` })
    .then(() => [], () => [...p.seen].filter(isAlive));
  killAll(left);
  return { ...r, left: left.length };
}

/** Records P's live descendants in p.seen (so stop can reap orphans). */
function remember(p) {
  for (const d of descendants(p.pid)) p.seen.add(d);
}

/** The shipped nginx template with only addresses, ports and paths filled in. */
export function nginxConfig({ listen, upstreams, stateDir }) {
  const tpl = readFileSync(path.join(DEPLOY, 'nginx.conf.in'), 'utf8');
  const [a, b = a, c = a] = upstreams;
  const out = tpl.replaceAll('@LISTEN@', listen).replaceAll('@STATE_DIR@', stateDir)
    .replaceAll('@A@', a).replaceAll('@B@', b).replaceAll('@C@', c);
  const left = out.replace(/^\s*#.*$/gm, '').match(/@[A-Z_]+@/g);
  assert.equal(left, null, `placeholders left in deploy/nginx.conf.in: ${left}`);
  return out;
}

/**
 * A set of processes making one service; everything it starts lives in
 * c.dir and is stopped by c.stop().
 *   c.instances: Map tag -> {tag, port, addr, url, proc fields..., runs}
 *   c.redis, c.haproxy, c.nginx: {port, url, log, ...} once started
 */
export class Cluster {
  constructor() {
    this.dir = mkdtempSync(path.join(tmpdir(), 'mcp-chain-cluster-'));
    this.instances = new Map();
    this.procs = new Set();
  }

  _log(name) {
    return path.join(this.dir, `${name}.log`);
  }

  /** redis-server on a free port, no persistence. */
  /** Stops redis-server by its PID (SIGTERM); startRedis(sameport) starts it again. */
  async stopRedis() {
    const p = this.redis;
    await stopProcess(p, { graceMs: 5000 });
    this.procs.delete(p);
  }

  async startRedis(samePort) {
    for (let attempt = 0; ; attempt++) {
      const port = samePort ?? await freePort();
      const p = spawnLogged('redis', REDIS, ['--port', String(port), '--bind', '127.0.0.1',
        '--save', '', '--appendonly', 'no', '--dir', this.dir], { logFile: this._log('redis') });
      this.procs.add(p);
      try {
        await waitListening(p, port);
      } catch (e) {
        this.procs.delete(p);
        await stopProcess(p, { graceMs: 1000 });
        if (attempt < 2 && /Address already in use/.test(p.log)) continue;
        throw e;
      }
      p.port = port;
      this.redis = p;
      return p;
    }
  }

  /**
   * Starts one instance per tag of TAGS with `mcp-chain --config CONFIG
   * --listen 127.0.0.1:0` and MCP_CHAIN_INSTANCE=<tag> (plus ENV); each
   * keeps the port it got for its restarts.
   */
  async startInstances({ config, tags = ['a', 'b', 'c'], env = {}, args = [], ports = {} }) {
    assert.ok(CHAIN, 'MCP_CHAIN not set');
    for (const tag of tags) this.instances.set(tag, { tag, config, env, args, port: ports[tag] ?? 0, runs: 0, allLog: '' });
    await Promise.all(tags.map((t) => this._startInstance(this.instances.get(t))));
    return [...this.instances.values()];
  }

  async _startInstance(inst) {
    const listen = `127.0.0.1:${inst.port}`;
    const p = spawnLogged(`mcp-chain-${inst.tag}`, CHAIN, ['--config', inst.config, '--listen', listen, ...inst.args],
      { env: { MCP_CHAIN_INSTANCE: inst.tag, ...inst.env }, logFile: this._log(`mcp-chain-${inst.tag}`) });
    this.procs.add(p);
    const re = /listening on http:\/\/127\.0\.0\.1:(\d+)\//;
    await waitFor(() => re.test(p.log) || !p.running(), { timeoutMs: 10_000, what: `instance ${inst.tag} to listen` });
    const m = re.exec(p.log);
    assert.ok(m && p.running(), `instance ${inst.tag} did not listen:\n${p.log.slice(-3000)}`);
    inst.port = Number(m[1]);
    inst.addr = `127.0.0.1:${inst.port}`;
    inst.url = `http://${inst.addr}/mcp`;
    inst.p = p;
    inst.runs++;
    return inst;
  }

  /** The instance TAG (its current process in inst.p; inst.p.log its stderr). */
  instance(tag) {
    const inst = this.instances.get(tag);
    assert.ok(inst, `no instance ${tag}`);
    return inst;
  }

  /** Everything instance TAG has written to stderr, all of its runs. */
  instanceLog(tag) {
    const inst = this.instance(tag);
    return inst.allLog + (inst.p?.log ?? '');
  }

  /** Records every instance's children (session backends) for the final reaping. */
  remember() {
    for (const inst of this.instances.values()) if (inst.p?.running()) remember(inst.p);
  }

  /** SIGKILL to instance TAG (its children are left to notice stdin EOF). */
  async kill9(tag) {
    const inst = this.instance(tag);
    remember(inst.p);
    inst.p.proc.kill('SIGKILL');
    const r = await inst.p.exited;
    return r;
  }

  /** SIGTERM to instance TAG (a drain); resolves its exit once it is gone. */
  async stopInstance(tag, { graceMs = 15_000 } = {}) {
    const inst = this.instance(tag);
    const r = await stopProcess(inst.p, { graceMs });
    return r;
  }

  /** Starts instance TAG again on its port (stopping it first if it runs). */
  async restart(tag) {
    const inst = this.instance(tag);
    // a killed run's children too are waited for (they see stdin EOF)
    if (inst.p) await this.stopInstance(tag);
    inst.allLog += inst.p?.log ?? '';
    this.procs.delete(inst.p);
    // the port was ours a moment ago; another process could take it meanwhile
    await waitFor(async () => !(await accepts(inst.port)), { timeoutMs: 5000, what: `port ${inst.port} to be free` });
    return this._startInstance(inst);
  }

  _upstreams() {
    const list = [...this.instances.values()].map((i) => i.addr);
    assert.ok(list.length >= 1 && list.length <= 3, 'the deploy files name up to three instances');
    return list;
  }

  /** HAProxy with deploy/haproxy.cfg as shipped; the instances by env vars. */
  async startHaproxy() {
    const [a, b = a, c = a] = this._upstreams();
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      const p = spawnLogged('haproxy', HAPROXY, ['-f', path.join(DEPLOY, 'haproxy.cfg'), '-db'], {
        env: { MCP_LB_BIND: `127.0.0.1:${port}`, MCP_A: a, MCP_B: b, MCP_C: c },
        logFile: this._log('haproxy') });
      this.procs.add(p);
      try {
        await waitListening(p, port);
      } catch (e) {
        this.procs.delete(p);
        await stopProcess(p, { graceMs: 1000 });
        if (attempt < 2 && /Address already in use|cannot bind/i.test(p.log)) continue;
        throw e;
      }
      Object.assign(p, { port, url: `http://127.0.0.1:${port}/mcp` });
      this.haproxy = p;
      return p;
    }
  }

  /** nginx from deploy/nginx.conf.in, unprivileged, in the foreground. */
  async startNginx() {
    const prefix = path.join(this.dir, 'nginx');
    mkdirSync(path.join(prefix, 'logs'), { recursive: true });
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      const conf = path.join(prefix, 'nginx.conf');
      writeFileSync(conf, nginxConfig({ listen: `127.0.0.1:${port}`, upstreams: this._upstreams(), stateDir: prefix }));
      const p = spawnLogged('nginx', NGINX, ['-p', prefix, '-c', conf,
        '-g', `daemon off; pid ${prefix}/nginx.pid; error_log stderr;`], { logFile: this._log('nginx') });
      this.procs.add(p);
      try {
        await waitListening(p, port);
      } catch (e) {
        this.procs.delete(p);
        await stopProcess(p, { graceMs: 1000 });
        if (attempt < 2 && /Address already in use/.test(p.log)) continue;
        throw e;
      }
      remember(p);   // its workers
      Object.assign(p, { port, url: `http://127.0.0.1:${port}/mcp`, accessLog: () => {
        try { return readFileSync(path.join(prefix, 'access.log'), 'utf8'); } catch { return ''; }
      } });
      this.nginx = p;
      return p;
    }
  }

  /** The tail of every log, for a failure message. */
  logs(max = 1500) {
    return [...this.procs].map((p) => `--- ${p.name} (${p.logFile}) ---\n${p.log.slice(-max)}`).join('\n');
  }

  /**
   * Stops everything (balancers first, then instances, then redis);
   * resolves {name: exit} for each process that was still running.
   */
  async stop() {
    this.remember();
    const order = (p) => (/haproxy|nginx/.test(p.name) ? 0 : /mcp-chain/.test(p.name) ? 1 : 2);
    const out = {};
    for (const rank of [0, 1, 2]) {
      await Promise.all([...this.procs].filter((p) => order(p) === rank).map(async (p) => {
        const was = p.running();
        const r = await stopProcess(p);
        if (was) out[p.name] = r;
      }));
    }
    if (!process.env.KEEP_CLUSTER_DIR) rmSync(this.dir, { recursive: true, force: true });
    else console.log(`cluster logs kept in ${this.dir}`);
    return out;
  }
}

/**
 * Runs FN(cluster) with a fresh Cluster, stopping it afterwards whatever
 * happens; a failure gets every process's log tail appended. When FN
 * passed, demands of each instance still running at the end: exit 0 on
 * SIGTERM, no child process left behind, no sanitizer report.
 */
export async function withCluster(fn) {
  const c = new Cluster();
  let out;
  try {
    out = await fn(c);
  } catch (e) {
    e.message += `\n${c.logs()}`;
    await c.stop();
    throw e;
  }
  const exits = await c.stop();
  for (const p of c.procs) {
    if (!/^mcp-chain/.test(p.name)) continue;
    const r = exits[p.name];
    if (r) assert.deepEqual([r.code, r.left], [0, 0], `${p.name} exits 0 with no child left: ${JSON.stringify(r)}\n${p.log.slice(-2000)}`);
    assert.doesNotMatch(p.log, /AddressSanitizer|runtime error|LeakSanitizer/, p.name);
  }
  return out;
}

export { sleep };
