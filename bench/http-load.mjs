#!/usr/bin/env node
// http-load.mjs - load for an MCP Streamable HTTP endpoint, for bench/run.sh:
// starts the front under test (the command after --), waits for URL to
// answer, opens S sessions (initialize + initialized, as a client must,
// Accept: application/json, text/event-stream), runs W warm-up then N
// tools/call echo at concurrency C spread over the sessions, and prints one
// JSON line like mcp-bench-load: c, ok, errors, rps, p50_us, p99_us, and the
// front's peak RSS (VmHWM of the process it started, children not counted).
//
// usage: node http-load.mjs --url URL [-n N] [-c C] [--sessions S] [--warmup W] -- CMD ARGS...

import http from 'node:http';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const opts = { n: 5000, c: 16, sessions: 1, warmup: 500, url: '' };
for (let i = 0; i < (dash < 0 ? argv.length : dash); i += 2) {
  const k = argv[i].replace(/^-+/, '');
  opts[k] = k === 'url' ? argv[i + 1] : Number(argv[i + 1]);
}
const cmd = dash < 0 ? [] : argv.slice(dash + 1);
if (!opts.url || !cmd.length) {
  process.stderr.write('usage: http-load.mjs --url URL [-n N] [-c C] [--sessions S] [--warmup W] -- CMD...\n');
  process.exit(2);
}
const url = new URL(opts.url);
const agent = new http.Agent({ keepAlive: true, maxSockets: opts.c + 4 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One POST of BODY; resolves {status, headers, msg} (the JSON-RPC answer, JSON or SSE). */
function post(body, sid) {
  return new Promise((resolve, reject) => {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-06-18' };
    if (sid) headers['Mcp-Session-Id'] = sid;
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => { text += c; });
        res.on('end', () => {
          let msg;
          if (/event-stream/.test(res.headers['content-type'] ?? '')) {
            for (const line of text.split('\n'))
              if (line.startsWith('data:')) {
                const m = JSON.parse(line.slice(5));
                if (m.id !== undefined && (m.result || m.error)) msg = m;
              }
          } else if (text) {
            msg = JSON.parse(text);
          }
          resolve({ status: res.statusCode, headers: res.headers, msg });
        });
      });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** A new session; its id (undefined for a stateless front). */
async function session() {
  const r = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {
    protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'http-load', version: '1' } } });
  if (r.status !== 200 || !r.msg?.result) throw new Error(`initialize: HTTP ${r.status} ${JSON.stringify(r.msg)}`);
  const sid = r.headers['mcp-session-id'];
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sid);
  return sid;
}

/** Peak RSS of PID in kB. */
function hwm(pid) {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  } catch {
    return 0;
  }
}

const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
let childErr = '';
child.stderr.on('data', (c) => { childErr = (childErr + c).slice(-4000); });
const out = { c: opts.c, n: opts.n, ok: 0, errors: 0 };
try {
  const t0 = Date.now();
  let sids;
  for (;;) {
    try {
      sids = [];
      for (let i = 0; i < opts.sessions; i++) sids.push(await session());
      break;
    } catch (e) {
      if (Date.now() - t0 > 20_000) throw new Error(`the front did not answer: ${e.message}\n${childErr}`);
      await sleep(50);
    }
  }
  let next = 0;
  const lat = [];
  const run = async (total, record) => {
    let issued = 0;
    const worker = async (w) => {
      const sid = sids[w % sids.length];
      while (issued < total) {
        issued++;
        const id = ++next;
        const t = process.hrtime.bigint();
        try {
          const r = await post({ jsonrpc: '2.0', id, method: 'tools/call',
            params: { name: 'echo', arguments: { text: 'hello' } } }, sid);
          if (r.msg?.id === id && r.msg.result) {
            if (record) { out.ok++; lat.push(Number(process.hrtime.bigint() - t) / 1000); }
          } else if (record) out.errors++;
        } catch {
          if (record) out.errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: opts.c }, (_, w) => worker(w)));
  };
  await run(opts.warmup, false);
  const t1 = process.hrtime.bigint();
  await run(opts.n, true);
  const secs = Number(process.hrtime.bigint() - t1) / 1e9;
  lat.sort((a, b) => a - b);
  out.rps = Math.round(out.ok / secs);
  out.p50_us = Math.round(lat[Math.floor(lat.length * 0.5)] ?? 0);
  out.p99_us = Math.round(lat[Math.floor(lat.length * 0.99)] ?? 0);
  out.sessions = opts.sessions;
  out.rss_kb = hwm(child.pid);
} catch (e) {
  out.errors++;
  out.fatal = String(e.message).slice(0, 300);
} finally {
  try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
  agent.destroy();
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
