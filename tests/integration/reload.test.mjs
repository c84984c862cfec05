// Configuration reload on SIGHUP, through the real binary on raw stdio:
// a new middleware pipeline applies to new requests without dropping the
// session, a changed backend is replaced, and a broken file or a change
// between one backend and several keeps the running configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { RawChain, FIXTURE, SKIP_NO_FIXTURE, TEST_TIMEOUT, sleep, tmpPath, waitFor, writeConfig } from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const fx = (args = []) => ({ command: FIXTURE, args });

// Rewrites the chain's config file and sends SIGHUP; waits for the log line.
async function reload(c, cfg, expect = 'reload: done') {
  writeFileSync(c.config, typeof cfg === 'string' ? cfg : JSON.stringify(cfg));
  const before = c.stderr.length;
  c.proc.kill('SIGHUP');
  await waitFor(() => c.stderr.slice(before).includes(expect), { what: expect });
}

async function callEcho(c, id) {
  return c.request(id, 'tools/call', { name: 'echo', arguments: { n: id } });
}

test('SIGHUP applies a new policy to new requests, session intact', T, async () => {
  const c = new RawChain({ server: fx() });
  try {
    await c.initialize();
    assert.ok((await callEcho(c, 1)).result.structuredContent, 'echo works before');
    await reload(c, { mcpServers: { backend: fx() },
      middleware: [{ use: 'policy', rules: [{ deny: ['echo'] }] }] });
    const r = await callEcho(c, 2);
    assert.equal(r.result.isError, true, 'denied after reload');
    const list = await c.request(3, 'tools/list');
    assert.ok(!list.result.tools.some((t) => t.name === 'echo'), 'echo hidden');
    const notes = c.lines.map((e) => e.msg?.method).filter(Boolean);
    assert.ok(notes.includes('notifications/tools/list_changed'), 'client told to list again');
  } finally { await c.close(); }
});

test('SIGHUP replaces a backend whose command changed; errors keep the old config', T, async () => {
  const c = new RawChain({ server: fx() });
  try {
    await c.initialize();
    await reload(c, { mcpServers: { backend: fx(['--string-ids']) } });
    await waitFor(() => c.stderr.includes('backend: ready'), { what: 'replacement ready' });
    await sleep(100);
    const r = await callEcho(c, 5);
    assert.ok(r.result, `call after replacement: ${JSON.stringify(r)}`);
    const seen = JSON.parse(r.result.content[0].text);
    assert.equal(seen.params.name, 'echo');
    await reload(c, '{"mcpServers": {', 'keeping the running configuration');
    assert.match(c.stderr, /reload: .*:1:\d+:/, 'syntax error with file:line:column');
    await reload(c, { mcpServers: { backend: fx(), other: fx() } }, 'keeping the running configuration');
    assert.ok((await callEcho(c, 6)).result, 'still serving');
  } finally { await c.close(); }
});

// --record reads the configuration mcp-chain started with (which backend a
// message is about) for the whole run. A reload that kept every backend
// used to free that configuration, and the next recorded message read
// freed memory (ASan: heap-use-after-free; without it, garbage names).
test('--record keeps recording, naming the backend, across reloads', T, async () => {
  const cfg = writeConfig(fx());
  const rec = tmpPath('reload-record.jsonl');
  const c = new RawChain({ server: fx(), args: ['--config', cfg, '--record', rec] });
  c.config = cfg;
  try {
    await c.initialize();
    assert.ok((await callEcho(c, 1)).result, 'call before the reloads');
    for (const timeout of [30000, 40000]) {
      await reload(c, { mcpServers: { backend: { ...fx(), timeout } } });
      const r = await callEcho(c, timeout);
      assert.ok(r.result, `call after reload: ${JSON.stringify(r)}`);
    }
  } finally { await c.close(); }
  assert.equal(c.proc.exitCode, 0, `exit status, stderr:\n${c.stderr}`);
  const lines = readFileSync(rec, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  // each call twice: from the client ("in", named from the configuration) and to the backend
  for (const dir of ['in', 'to-backend']) {
    const calls = lines.filter((l) => l.dir === dir && l.msg?.method === 'tools/call');
    assert.equal(calls.length, 3, `every call recorded (${dir})`);
    for (const l of calls) assert.equal(l.backend, 'backend', `named backend: ${JSON.stringify(l)}`);
  }
});
