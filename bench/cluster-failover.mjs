#!/usr/bin/env node
// bench/cluster-failover.mjs: what moving a session between instances costs.
// Starts redis-server, three mcp-chain instances (a "cluster" section, one
// key file) and HAProxy from deploy/haproxy.cfg, all on loopback (the
// integration tests' cluster_lib.mjs), with the fixture server as each
// session's own backend process, and measures with raw HTTP (no SDK in the
// timing):
//
//   call, own instance     tools/call echo on the instance that holds the session
//   first call elsewhere   the first request of a session on an instance that does
//                          not hold it (the session is continued there: its backend
//                          process started and initialized), then the second there
//   death -> next success  kill -9 of one instance, then each of its sessions calls
//                          through HAProxy until one succeeds (20 ms between tries):
//                          the time from the kill to that success
//
// usage: node bench/cluster-failover.mjs [SESSIONS]   (default 30; BUILD_DIR, as
// bench/cluster.sh; HAPROXY, REDIS_SERVER). Run by hand, not by CI.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const build = process.env.BUILD_DIR ?? path.join(root, 'build');
process.env.MCP_CHAIN ??= path.join(build, 'mcp-chain');
process.env.FIXTURE ??= path.join(build, 'tests', 'fixtures', 'mcp-fixture-server');
const { Cluster, freePort } = await import('../tests/integration/cluster_lib.mjs');

const S = Number(process.argv[2] ?? 30);
const HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
  Host: 'localhost' };

/** POSTs BODY to URL (with session SID); the status, session id and parsed answer. */
async function post(url, body, sid) {
  const h = { ...HEADERS, 'MCP-Protocol-Version': '2025-06-18' };
  if (sid) h['Mcp-Session-Id'] = sid;
  const r = await fetch(url, { method: 'POST', headers: h, body: JSON.stringify(body) });
  const text = await r.text();
  const line = text.split('\n').find((l) => l.startsWith('data: '));
  return { status: r.status, sid: r.headers.get('mcp-session-id'),
    json: text ? JSON.parse(line ? line.slice(6) : text) : null };
}

async function call(url, sid, k) {
  const t0 = performance.now();
  const r = await post(url, { jsonrpc: '2.0', id: k, method: 'tools/call', params: { name: 'echo', arguments: { k } } }, sid);
  if (r.status !== 200 || !r.json?.result) throw new Error(`call: ${r.status} ${JSON.stringify(r.json)}`);
  return performance.now() - t0;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const ms = (x) => `${x.toFixed(1)} ms`;

const c = new Cluster();
try {
  await c.startRedis();
  const tags = ['a', 'b', 'c'];
  const ports = {};
  for (const t of tags) ports[t] = await freePort();
  const keyFile = path.join(c.dir, 'cluster.keys');
  writeFileSync(keyFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const config = path.join(c.dir, 'cluster.json');
  writeFileSync(config, JSON.stringify({
    mcpServers: { fixture: { command: process.env.FIXTURE, args: [] } },
    listen: { allowedHosts: ['127.0.0.1', 'localhost'], maxScopedSessions: 256, maxProcesses: 512,
      maxStartsPerSecond: 1000 },
    cluster: { instance: '${MCP_CHAIN_INSTANCE}', keyFile },
    redis: { host: '127.0.0.1', port: c.redis.port, timeoutMs: 2000 },
  }));
  await c.startInstances({ config, tags, ports });
  const lb = await c.startHaproxy();
  const url = (t) => c.instance(t).url;

  // sessions through HAProxy, each initialized where HAProxy put it
  const sessions = [];
  for (let i = 0; i < S; i++) {
    const r = await post(lb.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
    await post(lb.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, r.sid);
    sessions.push({ sid: r.sid, tag: r.sid.split('.')[0] });
  }
  // a call on its own instance, twice (the second is timed)
  const own = [];
  for (const s of sessions) {
    await call(url(s.tag), s.sid, 1);
    own.push(await call(url(s.tag), s.sid, 2));
  }
  // the first and second request of each session on the next instance
  const first = [], second = [];
  for (const s of sessions) {
    const other = tags[(tags.indexOf(s.tag) + 1) % tags.length];
    first.push(await call(url(other), s.sid, 3));
    second.push(await call(url(other), s.sid, 4));
  }
  // death -> next success, for the sessions HAProxy keeps on the victim
  const victim = sessions[0].tag;
  const onVictim = sessions.filter((s) => s.tag === victim);
  const t0 = performance.now();
  await c.kill9(victim);
  const recovered = await Promise.all(onVictim.map(async (s, i) => {
    for (;;) {
      try {
        await call(lb.url, s.sid, 100 + i);
        return performance.now() - t0;
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }));
  console.log(`| measure (${S} sessions, 3 instances, HAProxy) | p50 | max |`);
  console.log('|---|---|---|');
  console.log(`| call, own instance | ${ms(median(own))} | ${ms(Math.max(...own))} |`);
  console.log(`| first call on another instance (session continued there) | ${ms(median(first))} | ${ms(Math.max(...first))} |`);
  console.log(`| second call there | ${ms(median(second))} | ${ms(Math.max(...second))} |`);
  console.log(`| kill -9 -> the session's next successful call through HAProxy (${onVictim.length} sessions) | ${ms(median(recovered))} | ${ms(Math.max(...recovered))} |`);
} finally {
  await c.stop();
}
