// bench/soak.mjs: the soak driver behind bench/soak.sh.
//
// Starts ONE mcp-chain (the process whose memory is watched) on a config
// with one mcp-bench-server backend, does the handshake, then for the whole
// duration runs phases of mixed traffic through it, each checked response by
// response: echo calls at c=1, 16 and 64, progress calls (tools/call slow with
// a progressToken, 5 notifications each) at c=8, and tools/list at c=2, with
// a short idle gap after each phase. Every RELOAD_S seconds it rewrites the
// config (alternating no middleware / a `limit` module) and sends SIGHUP.
// Every SAMPLE_S seconds it reads VmRSS of the chain from /proc/PID/status.
// At the end it closes stdin, waits for the exit and prints one JSON summary
// line on stdout (the samples go to --samples FILE as "t_s rss_kb" lines).
//
// usage: node bench/soak.mjs --chain BIN --server BIN --dir TMPDIR
//        [--duration S] [--sample S] [--reload S] [--samples FILE]
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, openSync } from 'node:fs';
import path from 'node:path';

const opt = { duration: 1800, sample: 5, reload: 120, phase: 20, gap: 2 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const k = argv[i].replace(/^--/, ''), v = argv[i + 1];
  if (v === undefined) throw new Error(`missing value for ${argv[i]}`);
  opt[k] = ['chain', 'server', 'dir', 'samples'].includes(k) ? v : Number(v);
}
for (const k of ['chain', 'server', 'dir'])
  if (!opt[k]) throw new Error(`--${k} is required`);

const cfgFile = path.join(opt.dir, 'soak.json');
const limitModule = { use: 'limit', rules: [{ concurrency: 1024, queue: 1024 }] };
// Write the config; ALT adds a middleware module so that a reload swaps pipelines.
function writeCfg(alt) {
  const cfg = { mcpServers: { echo: { command: opt.server, args: [], timeout: alt ? 60000 : 30000 } } };
  if (alt) cfg.middleware = [limitModule];
  writeFileSync(cfgFile, JSON.stringify(cfg, null, 2) + '\n');
}
writeCfg(false);

const errFd = openSync(path.join(opt.dir, 'chain.stderr'), 'a');
const child = spawn(opt.chain, ['--config', cfgFile], { stdio: ['pipe', 'pipe', errFd] });
const t0 = Date.now();
const secs = () => (Date.now() - t0) / 1000;

// ---- JSON-RPC over the child's stdio ----------------------------------------
let nextId = 1;
const pending = new Map();     // id -> {resolve, kind, text, token, progress}
const progressByToken = new Map();
const stats = { ok: 0, errors: 0, progress: 0, progressMissing: 0, unknown: 0, reloads: 0,
                byKind: {} };
let firstErrors = [];
let buf = '';
child.stdout.setEncoding('utf8');
child.stdout.on('data', (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line) onLine(line);
  }
});

// Record an error (the first few verbatim).
function fail(what) {
  stats.errors++;
  if (firstErrors.length < 10) firstErrors.push(`${secs().toFixed(1)}s ${what}`);
}

// One line from the chain: a response to settle, a progress note, or other notifications.
function onLine(line) {
  let m;
  try { m = JSON.parse(line); } catch { fail(`bad JSON: ${line.slice(0, 120)}`); return; }
  if (m.method === 'notifications/progress') {
    const p = progressByToken.get(m.params?.progressToken);
    if (p) p.progress++; else stats.unknown++;
    return;
  }
  if (m.method) return;  /* list_changed after a reload, and the like */
  const p = pending.get(m.id);
  if (!p) { fail(`response to an unknown or answered id ${JSON.stringify(m.id)}`); return; }
  pending.delete(m.id);
  p.resolve(m);
}

// Send a request; resolves with the response message.
function request(method, params, extra = {}) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, { resolve, ...extra });
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });
}

// One checked operation of KIND.
async function operation(kind) {
  const k = (stats.byKind[kind] ??= { ok: 0, errors: 0 });
  const before = stats.errors;
  if (kind === 'echo') {
    const text = `soak-${nextId}-${'x'.repeat(nextId % 200)}`;
    const r = await request('tools/call', { name: 'echo', arguments: { text } });
    if (r.error) fail(`echo: ${JSON.stringify(r.error)}`);
    else if (r.result?.content?.[0]?.text !== text) fail(`echo: wrong text back`);
  } else if (kind === 'progress') {
    const token = `t${nextId}`;
    const rec = { progress: 0 };
    progressByToken.set(token, rec);
    const r = await request('tools/call', { name: 'slow', arguments: { ms: 20, steps: 5 },
                                            _meta: { progressToken: token } });
    progressByToken.delete(token);
    if (r.error) fail(`slow: ${JSON.stringify(r.error)}`);
    stats.progress += rec.progress;
    if (rec.progress !== 5) stats.progressMissing += 5 - rec.progress;
  } else {
    let cursor, n = 0;
    do {
      const r = await request('tools/list', cursor ? { cursor } : {});
      if (r.error) { fail(`tools/list: ${JSON.stringify(r.error)}`); break; }
      n += r.result.tools.length;
      cursor = r.result.nextCursor;
    } while (cursor);
    if (stats.errors === before && n < 3) fail(`tools/list: ${n} tools`);
  }
  if (stats.errors === before) { stats.ok++; k.ok++; } else k.errors++;
}

// Keep C operations of KIND in flight until the phase's end.
async function phase(kind, c, until) {
  const worker = async () => { while (Date.now() < until && !stopping) await operation(kind); };
  await Promise.all(Array.from({ length: c }, worker));
}

// ---- sampling and reloads ----------------------------------------------------
const samples = [];
function sampleRss() {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
    if (m) samples.push([secs(), Number(m[1])]);
  } catch { /* exited */ }
}
let alt = false;
function reload() {
  alt = !alt;
  writeCfg(alt);
  child.kill('SIGHUP');
  stats.reloads++;
}

let stopping = false;
let exitInfo = null;
const exited = new Promise((r) => child.on('exit', (code, sig) => { exitInfo = { code, sig }; r(); }));
child.on('exit', () => { if (!stopping) { stopping = true; fail('mcp-chain exited during the soak'); } });

// Least-squares slope of RSS (kB) over time (s), as kB per hour.
function slopePerHour(pts) {
  if (pts.length < 2) return 0;
  const n = pts.length, mx = pts.reduce((a, p) => a + p[0], 0) / n,
    my = pts.reduce((a, p) => a + p[1], 0) / n;
  let sxy = 0, sxx = 0;
  for (const [x, y] of pts) { sxy += (x - mx) * (y - my); sxx += (x - mx) ** 2; }
  return sxx ? (sxy / sxx) * 3600 : 0;
}

async function main() {
  const init = await request('initialize', { protocolVersion: '2025-06-18', capabilities: {},
    clientInfo: { name: 'mcp-chain-soak', version: '1' } });
  if (init.error) throw new Error(`initialize: ${JSON.stringify(init.error)}`);
  child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  sampleRss();
  const sampler = setInterval(sampleRss, opt.sample * 1000);
  const reloader = setInterval(reload, opt.reload * 1000);
  const end = t0 + opt.duration * 1000;
  const phases = [['echo', 1], ['echo', 16], ['progress', 8], ['echo', 64], ['list', 2]];
  for (let i = 0; Date.now() < end && !stopping; i++) {
    const [kind, c] = phases[i % phases.length];
    await phase(kind, c, Math.min(end, Date.now() + opt.phase * 1000));
    await new Promise((r) => setTimeout(r, opt.gap * 1000));
  }
  clearInterval(reloader);
  sampleRss();
  clearInterval(sampler);
  stopping = true;
  child.stdin.end();
  const timer = setTimeout(() => { fail('no exit within 10 s of end of input'); child.kill('SIGKILL'); }, 10000);
  await exited;
  clearTimeout(timer);
  if (exitInfo.code !== 0) fail(`exit ${JSON.stringify(exitInfo)}`);
  if (pending.size) fail(`${pending.size} requests never answered`);

  if (opt.samples) writeFileSync(opt.samples, samples.map(([t, r]) => `${t.toFixed(1)} ${r}`).join('\n') + '\n');
  const rss = samples.map((s) => s[1]);
  // The slope is fitted after the first tenth of the run (start-up and first allocations).
  const steady = samples.filter(([t]) => t >= opt.duration / 10);
  const summary = {
    duration_s: Math.round(secs()), samples: samples.length,
    rss_start_kb: rss[0] ?? null, rss_peak_kb: rss.length ? Math.max(...rss) : null,
    rss_end_kb: rss.at(-1) ?? null,
    rss_steady_first_kb: steady[0]?.[1] ?? null,
    rss_slope_kb_per_h: Math.round(slopePerHour(steady)),
    requests_ok: stats.ok, errors: stats.errors, by_kind: stats.byKind,
    progress_notifications: stats.progress, progress_missing: stats.progressMissing,
    progress_unknown: stats.unknown, reloads: stats.reloads, exit: exitInfo,
    first_errors: firstErrors,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exitCode = stats.errors ? 1 : 0;
}

main().catch((e) => { console.error(e); child.kill('SIGKILL'); process.exitCode = 2; });
