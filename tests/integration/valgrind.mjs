// One scenario through mcp-chain under valgrind: every kind of traffic
// (handshake, lists, calls with progress, cancellation, a server->client
// request, a big result, bad input, a backend crash), then end of input.
// Fails if valgrind finds an error or a definite/indirect leak, or if any
// answer is wrong. Run by the 'valgrind' meson suite (non-sanitized build).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import assert from 'node:assert/strict';

const dir = mkdtempSync(join(tmpdir(), 'mcpc-vg-'));
const cfg = join(dir, 'chain.json');
writeFileSync(cfg, JSON.stringify({
  mcpServers: { fx: { command: process.env.FIXTURE, args: ['--string-ids'] } },
}));

const child = spawn('valgrind', ['--quiet', '--leak-check=full', '--error-exitcode=99',
  '--errors-for-leak-kinds=definite,indirect', '--show-leak-kinds=definite,indirect',
  '--track-fds=no', process.env.MCP_CHAIN, '--config', cfg], { stdio: ['pipe', 'pipe', 'pipe'] });
let stderr = '';
child.stderr.on('data', (d) => { stderr += d; });

const waiters = [];
const seen = [];
createInterface({ input: child.stdout }).on('line', (line) => {
  const msg = JSON.parse(line);  // every stdout line must be JSON
  seen.push(msg);
  for (const w of [...waiters]) {
    if (w.match(msg)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(msg); }
  }
});

function wait(match, what, ms = 60000) {
  const hit = seen.find(match);
  if (hit) { seen.splice(seen.indexOf(hit), 1); return Promise.resolve(hit); }
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    waiters.push({ match, resolve: (m) => { clearTimeout(t); seen.splice(seen.indexOf(m), 1); resolve(m); } });
  });
}
const send = (m) => child.stdin.write((typeof m === 'string' ? m : JSON.stringify(m)) + '\n');
const byId = (id) => (m) => m.id === id && !m.method;

send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: { sampling: {} }, clientInfo: { name: 'vg', version: '1' } } });
const init = await wait(byId(0), 'initialize');
assert.equal(init.result.serverInfo.name, 'mcp-fixture-server');
send({ jsonrpc: '2.0', method: 'notifications/initialized' });
send({ jsonrpc: '2.0', id: 'list', method: 'tools/list' });
assert.ok((await wait(byId('list'), 'tools/list')).result.tools.length > 5);
send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow', arguments: { ms: 400, steps: 4 }, _meta: { progressToken: 'tok' } } });
await wait((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok', 'progress');
send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'test' } });
send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'sample', arguments: {} } });
const req = await wait((m) => m.method === 'sampling/createMessage', 'sampling request');
send({ jsonrpc: '2.0', id: req.id, result: { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm' } });
const sampled = await wait(byId(3), 'sample result');
assert.match(sampled.result.content[0].text, /hi/);
send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'big', arguments: { bytes: 1000000 } } });
assert.equal((await wait(byId(4), 'big')).result.content[0].text.length, 1000000);
send('{"jsonrpc":"2.0","id":5,"method":');
assert.equal((await wait((m) => m.error?.code === -32700, 'parse error')).id, null);
send({ jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'crash', arguments: {} } });
const crashed = await wait(byId(6), 'crash error');
assert.equal(crashed.error.code, -32000);
send({ jsonrpc: '2.0', id: 7, method: 'tools/list' });
assert.ok((await wait(byId(7), 'after crash')).error);
child.stdin.end();
const code = await new Promise((r) => child.on('exit', (c) => r(c)));
assert.ok(!seen.some((m) => m.id === 2 && !m.method), 'a cancelled request was answered');
if (code !== 0) {
  console.error(stderr);
  assert.fail(`mcp-chain under valgrind exited ${code}`);
}
console.log('valgrind scenario: 1 passed, 0 failed');
