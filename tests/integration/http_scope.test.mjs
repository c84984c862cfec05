// "scope": "session" | "shared" on the HTTP front: a session-scoped backend is
// a process of each session's own, started at its initialize with that
// client's parameters (its roots reach its own server-filesystem), stopped
// when the session ends; a shared one is one process for every session; the
// listen bounds refuse a session with 503 and say which bound; both scopes
// in one configuration give each session its own and the shared ones.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  cmdline, request as rawRequest, openStream, processesUnder, withCheckedChain,
} from './http_lib.mjs';

import {
  CHAIN, HERE, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO,
  fixtureServer, sleep, tmpPath, waitFor, isAlive,
} from './lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_CHAIN || SKIP_NO_FIXTURE };
const FS_ENTRY = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-http', version: '1' } } });

let nconfig = 0;
/** Writes a configuration file for CFG; returns its path. */
function writeCfg(cfg, file = tmpPath(`scope-${process.pid}-${++nconfig}.json`)) {
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/**
 * Runs FN with a chain on CFG; then SIGTERM: it must exit 0, and no process
 * it started (seen at any time during FN via chain.seen) may be left.
 */
function withChain(cfg, fn) {
  const file = writeCfg(cfg);
  return withCheckedChain(null, { config: file }, (chain) => {
    chain.file = file;   // the tests rewrite it before a SIGHUP
    return fn(chain);
  });
}

/** The environment of PID as an object ({} when gone). */
function environ(pid) {
  try {
    return Object.fromEntries(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')
      .filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  } catch { return {}; }
}

/** Pids under CHAIN whose command line matches RE (recorded in chain.seen). */
const servers = processesUnder;

/** An SDK client over HTTP; ROOTS (directories) makes it offer roots. */
async function httpClient(url, roots) {
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: roots ? { roots: {} } : {} });
  if (roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () =>
      ({ roots: roots.map((d) => ({ uri: pathToFileURL(d).href, name: path.basename(d) })) }));
  }
  await client.connect(transport);
  return { client, transport };
}

/** The allowed directories server-filesystem reports to CLIENT. */
async function allowed(client) {
  const r = await client.callTool({ name: 'list_allowed_directories', arguments: {} });
  return r.content[0].text;
}

/** A raw HTTP request to the chain's /mcp (JSON_HEADERS unless told). */
const request = (port, { headers = JSON_HEADERS, ...o } = {}) => rawRequest(port, { headers, ...o });

/** A raw initialize: the response (status, headers, body). */
function rawInit(port) {
  return request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' }, body: INIT });
}

/** Two directories of their own for a test. */
function twoDirs(tag) {
  const a = tmpPath(`scope-${tag}-a-${process.pid}`), b = tmpPath(`scope-${tag}-b-${process.pid}`);
  mkdirSync(a, { recursive: true });
  mkdirSync(b, { recursive: true });
  return [a, b];
}

test('session scope: two sessions, two server-filesystem processes, each with its own client\'s roots; ' +
  'DELETE stops one while the other works', T, async () => {
  const [dirA, dirB] = twoDirs('roots');
  await withChain({ mcpServers: { fs: { command: 'node', args: [FS_ENTRY] } } }, async (chain) => {
    const A = await httpClient(chain.url, [dirA]);
    const B = await httpClient(chain.url, [dirB]);
    // the server asks its client for roots after notifications/initialized
    await waitFor(async () => (await allowed(A.client)).includes(dirA), { what: 'A\'s roots in A\'s server' });
    await waitFor(async () => (await allowed(B.client)).includes(dirB), { what: 'B\'s roots in B\'s server' });
    assert.doesNotMatch(await allowed(A.client), new RegExp(path.basename(dirB)), 'A does not see B\'s root');
    assert.doesNotMatch(await allowed(B.client), new RegExp(path.basename(dirA)), 'B does not see A\'s root');
    const pids = servers(chain, /server-filesystem/);
    assert.equal(pids.length, 2, `two server-filesystem processes: ${pids.map(cmdline)}`);
    assert.match(chain.stderr, /session #1: starting 1 backend\(s\) of its own/);
    // A ends its session: its process goes (stdin closed, then the group signalled)
    await A.transport.terminateSession();
    await A.client.close();
    await waitFor(() => servers(chain, /server-filesystem/).length === 1,
      { timeoutMs: 6000, what: 'A\'s server-filesystem to stop after DELETE' });
    const [left] = servers(chain, /server-filesystem/);
    assert.ok(pids.includes(left), 'the one left is B\'s');
    assert.match(await allowed(B.client), new RegExp(path.basename(dirB)), 'B still works');
    await B.client.close();
  });
});

test('shared scope: one server-filesystem process for both sessions', T, async () => {
  const [dirA] = twoDirs('shared');
  await withChain({ mcpServers: { fs: { command: 'node', args: [FS_ENTRY, dirA], scope: 'shared' } } },
    async (chain) => {
      const A = await httpClient(chain.url);
      const B = await httpClient(chain.url);
      assert.match(await allowed(A.client), new RegExp(path.basename(dirA)));
      assert.match(await allowed(B.client), new RegExp(path.basename(dirA)));
      assert.equal(servers(chain, /server-filesystem/).length, 1, 'one process for both');
      await A.transport.terminateSession();
      await A.client.close();
      await sleep(300);
      assert.equal(servers(chain, /server-filesystem/).length, 1, 'a session\'s end does not stop it');
      assert.match(await allowed(B.client), new RegExp(path.basename(dirA)));
      await B.client.close();
    });
});

test('shared scope: the one backend is told notifications/initialized once, however many sessions initialize', T, async () => {
  const fixture = fixtureServer();
  await withChain({ mcpServers: { fx: { command: fixture.command, args: fixture.args, scope: 'shared' } } }, async (chain) => {
    const sessions = [await httpClient(chain.url), await httpClient(chain.url), await httpClient(chain.url)];
    const seen = JSON.parse((await sessions[2].client.callTool({ name: 'seen_notifications', arguments: {} })).content[0].text);
    assert.equal(seen['notifications/initialized'], 1, JSON.stringify(seen));
    for (const { client } of sessions) await client.close();
  });
});

test('bounds: maxScopedSessions, maxProcesses and maxStartsPerSecond refuse with 503 and say which ' +
  '(maxScopedSessions once no session with backends of its own is idle)', T, async () => {
  const fixture = fixtureServer();
  const entry = { command: fixture.command, args: fixture.args };
  const FX = new RegExp(path.basename(fixture.command));
  const cases = [
    ['maxScopedSessions', { maxScopedSessions: 1 }],
    ['maxProcesses', { maxProcesses: 1 }],
    ['maxStartsPerSecond', { maxStartsPerSecond: 1 }],
  ];
  for (const [bound, listen] of cases) {
    await withChain({ mcpServers: { fx: entry }, listen }, async (chain) => {
      const first = await rawInit(chain.port);
      assert.equal(first.status, 200, `${bound}: the first session opens: ${first.body}`);
      const sid = first.headers['mcp-session-id'];
      // a session with a stream open is not ended to make room
      const get = await openStream(chain.port, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
      assert.equal(get.status, 200);
      const second = await rawInit(chain.port);
      assert.equal(second.status, 503, `${bound}: the second is refused: ${second.body}`);
      const err = JSON.parse(second.body).error;
      assert.equal(err.code, -32000);
      assert.match(err.message, new RegExp(`listen\\.${bound}`), `${bound} named to the client`);
      assert.equal(second.headers['mcp-session-id'], undefined, 'no session id');
      await waitFor(() => new RegExp(`warn: http: session #2 refused: .*listen\\.${bound}`).test(chain.stderr),
        { what: `the log to name ${bound}` });
      assert.equal(servers(chain, FX).length, 1, `${bound}: one backend process`);
      get.close();
      await waitFor(() => get.ended, { what: 'the GET stream to close' });
      // once the first session ends (and, for maxProcesses, its process is
      // gone; for maxStartsPerSecond, a second has passed) a new one opens
      const del = await request(chain.port, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
      assert.equal(del.status, 200);
      await waitFor(() => servers(chain, FX).length === 0, { timeoutMs: 6000, what: 'the first session\'s backend to stop' });
      // gone from the process table is not yet reaped: mcp-chain counts a
      // process until it has seen it exit (its log says so)
      await waitFor(() => /fx: stopped/.test(chain.stderr), { timeoutMs: 6000, what: 'mcp-chain to see the backend exit' });
      if (bound === 'maxStartsPerSecond') await sleep(1000);
      const third = await rawInit(chain.port);
      assert.equal(third.status, 200, `${bound}: a session opens again: ${third.body}`);
    });
  }
  // at maxScopedSessions, the idlest such session with nothing open makes room
  await withChain({ mcpServers: { fx: entry }, listen: { maxScopedSessions: 1 } }, async (chain) => {
    const first = await rawInit(chain.port);
    assert.equal(first.status, 200, first.body);
    const second = await rawInit(chain.port);
    assert.equal(second.status, 200, `an idle session makes room: ${second.body}`);
    assert.match(chain.stderr, /session #1 is ended to make room for a new one \(listen\.maxScopedSessions/);
    assert.doesNotMatch(chain.stderr, /session #2 refused/);
    const gone = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': first.headers['mcp-session-id'] },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
    assert.equal(gone.status, 404, 'the session that made room is gone');
    await waitFor(() => servers(chain, FX).length === 1, { timeoutMs: 6000, what: 'one backend process' });
  });
});

test('2026-07-28 calls on session-scoped backends share one set of backends; handshake sessions keep their own', T, async () => {
  const fixture = fixtureServer();
  const FX = new RegExp(path.basename(fixture.command));
  await withChain({ eras: 'both', mcpServers: { fx: { command: fixture.command, args: fixture.args } } }, async (chain) => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const call = (id) => request(chain.port, {
      headers: { ...JSON_HEADERS, Accept: 'application/json', 'MCP-Protocol-Version': '2026-07-28',
        'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: `c${id}` }, _meta: meta } }),
    });
    for (const id of [1, 2, 3]) {
      const r = await call(id);
      assert.equal(r.status, 200, r.body);
      assert.equal(JSON.parse(r.body).result.resultType, 'complete', r.body);
    }
    assert.equal(servers(chain, FX).length, 1, 'three calls, one process for the era');
    const ok = await rawInit(chain.port);
    assert.equal(ok.status, 200, ok.body);
    await waitFor(() => servers(chain, FX).length === 2, { what: 'the handshake session\'s own process' });
  });
});

test('reload (SIGHUP): a running session keeps its process, a new session gets the new configuration', T, async () => {
  const fixture = fixtureServer();
  const FX = new RegExp(path.basename(fixture.command));
  const cfg = (gen) => ({ mcpServers: { fx: { command: fixture.command, args: fixture.args, env: { SCOPE_GEN: gen } } } });
  await withChain(cfg('1'), async (chain) => {
    const A = await httpClient(chain.url);
    const [pa] = servers(chain, FX);
    assert.equal(environ(pa).SCOPE_GEN, '1');
    writeCfg(cfg('2'), chain.file);
    chain.proc.kill('SIGHUP');
    await waitFor(() => /reload: done/.test(chain.stderr), { what: 'the reload' });
    const B = await httpClient(chain.url);
    const pids = servers(chain, FX);
    assert.equal(pids.length, 2, 'A\'s process is kept, B has its own');
    assert.ok(pids.includes(pa) && isAlive(pa));
    const pb = pids.find((p) => p !== pa);
    assert.equal(environ(pb).SCOPE_GEN, '2', 'the new session runs the new configuration');
    const echo = await A.client.callTool({ name: 'echo', arguments: { still: 'here' } });
    assert.deepEqual(JSON.parse(echo.content[0].text).params.arguments, { still: 'here' }, 'A still works');
    // a reload may not turn a session-scoped configuration into a shared one
    writeCfg({ mcpServers: { fx: { ...cfg('3').mcpServers.fx, scope: 'shared' } } }, chain.file);
    chain.proc.kill('SIGHUP');
    await waitFor(() => /going between session-scoped and shared backends/.test(chain.stderr), { what: 'the refusal' });
    await A.client.close();
    await B.client.close();
  });
});

test('session-scoped and shared servers together: each session has its own process and reaches the shared one; ' +
  'the shared one is initialized once, its notifications and requests reach the sessions, and it outlives a session', T, async () => {
  const fixture = fixtureServer();
  const FX = new RegExp(path.basename(fixture.command));
  const [dirA] = twoDirs('mixed');
  await withChain({ mcpServers: {
    own: { command: fixture.command, args: fixture.args, env: { SCOPE_ROLE: 'own' } },
    common: { command: fixture.command, args: fixture.args, env: { SCOPE_ROLE: 'common' }, scope: 'shared' },
  } }, async (chain) => {
    const role = (pid) => environ(pid).SCOPE_ROLE;
    const A = await httpClient(chain.url, [dirA]);
    const B = await httpClient(chain.url);
    const logs = { A: [], B: [] };
    A.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.A.push(n.params));
    B.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.B.push(n.params));
    for (const { client } of [A, B]) {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('own__echo') && names.includes('common__echo'), names.join(' '));
    }
    const pids = servers(chain, FX);
    assert.deepEqual(pids.map(role).sort(), ['common', 'own', 'own'], 'two own processes, one shared');
    assert.match(chain.stderr, /session #1: starting 1 backend\(s\) of its own, with the shared ones/);

    // each session's own server was initialized by its own client; the shared one once
    const initOf = async (client, name) => JSON.parse((await client.callTool({ name, arguments: {} })).content[0].text);
    const ownA = await initOf(A.client, 'own__init_params'), ownB = await initOf(B.client, 'own__init_params');
    assert.ok(ownA.capabilities.roots, 'A\'s own server has A\'s capabilities (roots)');
    assert.ok(!ownB.capabilities.roots, 'B\'s own server has B\'s');
    const seen = await initOf(B.client, 'common__seen_notifications');
    assert.equal(seen['notifications/initialized'], 1, `the shared server is told initialized once: ${JSON.stringify(seen)}`);

    // the shared server's notification reaches both sessions
    await A.client.callTool({ name: 'common__notify', arguments: { kind: 'log' } });
    await waitFor(() => logs.A.length === 1 && logs.B.length === 1, { what: 'the shared server\'s log message in both sessions' });
    assert.equal(logs.B[0].data, 'hello log');
    // its request goes to the session whose call is open there
    const roots = await A.client.callTool({ name: 'common__roots', arguments: {} });
    assert.match(JSON.stringify(roots), new RegExp(path.basename(dirA)), 'roots/list went to A');

    // A ends: its own process stops, the shared one serves B on
    const common = pids.find((p) => role(p) === 'common');
    await A.transport.terminateSession();
    await A.client.close();
    await waitFor(() => servers(chain, FX).length === 2, { timeoutMs: 6000, what: 'A\'s own server to stop' });
    assert.ok(isAlive(common), 'the shared server runs on');
    const echo = await B.client.callTool({ name: 'common__echo', arguments: { still: 'here' } });
    assert.deepEqual(JSON.parse(echo.content[0].text).params.arguments, { still: 'here' });
    await B.client.close();
  });
});

test('both scopes under churn: sessions end with calls open at their own and the shared backend, ' +
  'the shared one notifies meanwhile; nothing crashes, ended sessions\' processes go, the rest serve on', T, async () => {
  const fixture = fixtureServer();
  const FX = new RegExp(path.basename(fixture.command));
  await withChain({
    mcpServers: {
      own: { command: fixture.command, args: fixture.args, env: { SCOPE_ROLE: 'own' } },
      common: { command: fixture.command, args: fixture.args, env: { SCOPE_ROLE: 'common' }, scope: 'shared' },
    },
    listen: { maxStartsPerSecond: 100, maxScopedSessions: 64, maxProcesses: 128 },
  }, async (chain) => {
    chain.remember?.();
    const clients = await Promise.all(Array.from({ length: 12 }, () => httpClient(chain.url)));
    const role = (pid) => environ(pid).SCOPE_ROLE;
    assert.equal(servers(chain, FX).filter((p) => role(p) === 'own').length, 12);
    // every session has a slow call open at both; half end mid-call
    const calls = clients.map(({ client }, i) => Promise.allSettled([
      client.callTool({ name: 'own__slow', arguments: { ms: 400, steps: 2 } }),
      client.callTool({ name: 'common__slow', arguments: { ms: 400, steps: 2 } }),
    ]).then((r) => ({ i, r })));
    await sleep(100);
    await clients[0].client.callTool({ name: 'common__notify', arguments: { kind: 'tools' } });
    await Promise.all(clients.filter((_, i) => i % 2 === 1).map(async ({ client, transport }) => {
      await transport.terminateSession();
      await client.close();
    }));
    const done = await Promise.all(calls);
    for (const { i, r } of done.filter((d) => d.i % 2 === 0))
      assert.deepEqual(r.map((x) => x.status), ['fulfilled', 'fulfilled'], `session ${i}: ${JSON.stringify(r)}`);
    await waitFor(() => servers(chain, FX).filter((p) => role(p) === 'own').length === 6,
      { timeoutMs: 10_000, what: 'the ended sessions\' own servers to stop' });
    // the rest still reach both, and the shared one saw one initialized
    for (const { client } of clients.filter((_, i) => i % 2 === 0)) {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('own__echo') && names.includes('common__echo'));
    }
    const seen = JSON.parse((await clients[0].client.callTool({ name: 'common__seen_notifications', arguments: {} })).content[0].text);
    assert.equal(seen['notifications/initialized'], 1, JSON.stringify(seen));
    await Promise.all(clients.filter((_, i) => i % 2 === 0).map(({ client }) => client.close()));
  });
});

test('an idle session expires and its backend process stops with it', T, async () => {
  const fixture = fixtureServer();
  const FX = new RegExp(path.basename(fixture.command));
  await withChain({ mcpServers: { fx: { command: fixture.command, args: fixture.args } },
    listen: { sessionIdleMs: 1000 } }, async (chain) => {
    const r = await rawInit(chain.port);
    assert.equal(r.status, 200, r.body);
    assert.equal(servers(chain, FX).length, 1);
    await waitFor(() => /session #1 ended \(expired after being idle\)/.test(chain.stderr),
      { timeoutMs: 5000, what: 'the session to expire' });
    await waitFor(() => servers(chain, FX).length === 0, { timeoutMs: 6000, what: 'its backend to stop' });
    const gone = await request(chain.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': r.headers['mcp-session-id'] },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    assert.equal(gone.status, 404);
  });
});
