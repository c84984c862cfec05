// The aggregate with tasks (2025-11-25 experimental tasks) and list caching
// hints (ttlMs / cacheScope), driving the built mcp-chain over raw stdio with
// two backends: a small raw JSON-RPC node server written below (no SDK: it
// answers exactly what a task-capable backend sends, so that the ids and
// hints the client sees can be checked byte for byte). Each scenario runs
// without modules ("chain") and with five modules that read every message
// ("modules", lib.mjs modulesPipeline).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';

import { RawChain, SKIP_NO_CHAIN, modulesPipeline, tmpPath, waitFor } from './lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_CHAIN };

// A backend with tasks: tools/call with params.task makes task tN (working),
// which completes 100 ms later with notifications/tasks/status; its
// tools/list carries ttlMs/cacheScope from $TTL/$SCOPE.
const SERVER = `
const name = process.argv[2];
const tasks = new Map();
let n = 0;
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
const now = () => new Date().toISOString();
function answer(m) {
  const p = m.params || {};
  switch (m.method) {
  case 'initialize':
    return { protocolVersion: p.protocolVersion, serverInfo: { name, version: '1' },
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } };
  case 'tools/list': {
    const r = { tools: [{ name: 'work', inputSchema: { type: 'object' } }] };
    if (process.env.TTL) r.ttlMs = Number(process.env.TTL);
    if (process.env.SCOPE) r.cacheScope = process.env.SCOPE;
    return r;
  }
  case 'tools/call': {
    if (!p.task) return { content: [{ type: 'text', text: name + ' did it' }] };
    const t = { taskId: 't' + (++n), status: 'working', ttl: 60000, createdAt: now(), lastUpdatedAt: now() };
    tasks.set(t.taskId, t);
    setTimeout(() => {
      if (t.status !== 'working') return;
      t.status = 'completed';
      send({ method: 'notifications/tasks/status', params: t });
    }, 100);
    return { task: t };
  }
  case 'tasks/get': case 'tasks/cancel': case 'tasks/result': {
    const t = tasks.get(p.taskId);
    if (!t) return { error: { code: -32602, message: 'Task not found: ' + p.taskId } };
    if (m.method === 'tasks/cancel') t.status = 'cancelled';
    if (m.method === 'tasks/result')
      return { content: [{ type: 'text', text: name + ' result of ' + t.taskId }],
        _meta: { 'io.modelcontextprotocol/related-task': { taskId: t.taskId } } };
    return { ...t };
  }
  case 'tasks/list': return { tasks: [...tasks.values()] };
  case 'ping': return {};
  default: return { error: { code: -32601, message: 'Method not found' } };
  }
}
let buf = '';
process.stdin.on('data', (c) => {
  buf += c;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    const m = JSON.parse(line);
    if (m.id === undefined || !m.method) continue;
    const r = answer(m);
    if (r.error) send({ id: m.id, error: r.error });
    else send({ id: m.id, result: r });
  }
});
process.stdin.on('end', () => process.exit(0));
`;

const serverFile = tmpPath(`agg-tasks-server-${process.pid}.cjs`);
writeFileSync(serverFile, SERVER);

const backend = (name, env) => ({ command: process.execPath, args: [serverFile, name], env });

let cfgN = 0;
/** mcp-chain over raw stdio with BACKENDS ({name: entry}), modules or not. */
function chainWith(backends, modules) {
  const cfg = { shutdownGraceMs: 300, mcpServers: backends };
  if (modules) cfg.middleware = modulesPipeline();
  const file = tmpPath(`agg-tasks-${process.pid}-${++cfgN}.json`);
  writeFileSync(file, JSON.stringify(cfg));
  return new RawChain({ server: backends[Object.keys(backends)[0]], args: ['--config', file],
    env: { MCP_CHAIN_TOKEN: 'integration-token' } });
}

async function run(c, fn) {
  try {
    await fn();
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
}

/** Waits for notifications/tasks/status of TASKID with STATUS among what was read. */
async function statusNote(c, taskId, status) {
  await waitFor(() => c.lines.some((e) => e.msg?.method === 'notifications/tasks/status'
    && e.msg.params?.taskId === taskId && e.msg.params?.status === status),
  { what: `notifications/tasks/status ${taskId} ${status}` });
}

for (const modules of [false, true]) {
  const mode = modules ? 'modules' : 'chain';

  test(`[${mode}] two backends: task ids unique, routed to their maker; lists carry merged hints`, T, async () => {
    const c = chainWith({
      one: backend('one', { TTL: '60000', SCOPE: 'public' }),
      two: backend('two', { TTL: '5000', SCOPE: 'public' }),
    }, modules);
    await run(c, async () => {
      const init = await c.initialize('2025-11-25');
      assert.deepEqual(init.result.capabilities.tasks,
        { list: {}, cancel: {}, requests: { tools: { call: {} } } });

      const list = await c.request(1, 'tools/list');
      assert.deepEqual(list.result.tools.map((t) => t.name).sort(), ['one__work', 'two__work']);
      assert.equal(list.result.ttlMs, 5000);           // the smaller one
      assert.equal(list.result.cacheScope, 'public');

      const a = await c.request(2, 'tools/call', { name: 'one__work', arguments: {}, task: { ttl: 60000 } });
      const b = await c.request(3, 'tools/call', { name: 'two__work', arguments: {}, task: { ttl: 60000 } });
      // both backends call their task "t1": the client sees two ids
      assert.equal(a.result.task.taskId, 'one__t1');
      assert.equal(b.result.task.taskId, 'two__t1');
      assert.equal(a.result.task.status, 'working');

      await statusNote(c, 'one__t1', 'completed');
      await statusNote(c, 'two__t1', 'completed');

      const g = await c.request(4, 'tasks/get', { taskId: 'two__t1' });
      assert.equal(g.result.taskId, 'two__t1');
      assert.equal(g.result.status, 'completed');

      const r = await c.request(5, 'tasks/result', { taskId: 'one__t1' });
      assert.deepEqual(r.result.content, [{ type: 'text', text: 'one result of t1' }]);
      assert.equal(r.result._meta['io.modelcontextprotocol/related-task'].taskId, 'one__t1');

      const x = await c.request(6, 'tasks/cancel', { taskId: 'nobody__t1' });
      assert.equal(x.error?.code, -32602);
      assert.match(x.error.message, /nobody__t1/);

      const p1 = await c.request(7, 'tasks/list');
      assert.deepEqual(p1.result.tasks.map((t) => t.taskId), ['one__t1']);
      assert.ok(p1.result.nextCursor);
      const p2 = await c.request(8, 'tasks/list', { cursor: p1.result.nextCursor });
      assert.deepEqual(p2.result.tasks.map((t) => t.taskId), ['two__t1']);
      assert.equal(p2.result.nextCursor, undefined);

      // a call without a task still goes straight through
      const plain = await c.request(9, 'tools/call', { name: 'two__work', arguments: {} });
      assert.deepEqual(plain.result.content, [{ type: 'text', text: 'two did it' }]);
    });
  });

  test(`[${mode}] one backend: tasks and hints pass through unchanged`, T, async () => {
    const c = chainWith({ only: backend('only', { TTL: '60000', SCOPE: 'private' }) }, modules);
    await run(c, async () => {
      await c.initialize('2025-11-25');
      const list = await c.request(1, 'tools/list');
      assert.deepEqual(list.result, { tools: [{ name: 'work', inputSchema: { type: 'object' } }],
        ttlMs: 60000, cacheScope: 'private' });
      const a = await c.request(2, 'tools/call', { name: 'work', arguments: {}, task: {} });
      assert.equal(a.result.task.taskId, 't1');
      await statusNote(c, 't1', 'completed');
      const g = await c.request(3, 'tasks/get', { taskId: 't1' });
      assert.equal(g.result.taskId, 't1');
      const x = await c.request(4, 'tasks/get', { taskId: 'nope' });
      assert.equal(x.error?.code, -32602);   // the backend's own answer
      assert.match(x.error.message, /Task not found: nope/);
    });
  });
}
