// Raw stdio conversations with mcp-chain (no SDK): exact JSON-RPC edge cases.
// Backend: the C fixture server when available, else server-everything.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  CHAIN, FIXTURE, RawChain, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT, brief,
  descendants, everythingServer, fixtureServer, isAlive, sleep, tmpPath, waitFor, withRaw, writeConfig,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };
const BACKEND = () => (FIXTURE ? fixtureServer() : everythingServer());
const CLIENT_INFO = { name: 'raw-test', version: '0.0.1' };
// relative to SE_DIR: only resolvable when the configured cwd is applied
const SE_ENTRY_REL = path.join('dist', 'index.js');

function assertError(res, code, id, what) {
  assert.equal(res.jsonrpc, '2.0', `${what}: jsonrpc member`);
  assert.ok(res.error, `${what}: expected an error, got ${brief(res)}`);
  assert.equal(res.error.code, code, `${what}: error code (${brief(res)})`);
  assert.equal(typeof res.error.message, 'string', `${what}: error message`);
  assert.equal(res.result, undefined, `${what}: no result alongside error`);
  if (Array.isArray(id)) assert.ok(id.some((x) => x === res.id), `${what}: id ${JSON.stringify(res.id)} not in ${JSON.stringify(id)}`);
  else assert.equal(res.id, id, `${what}: id`);
}

test('malformed JSON -> -32700 with id null; session continues', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    c.send('{"jsonrpc":"2.0","id":1,"method":');
    assertError(await c.response(), -32700, null, 'truncated JSON');
    c.send('not json at all');
    assertError(await c.response(), -32700, null, 'garbage');
    const pong = await c.request(2, 'ping');
    assert.deepEqual(pong, { jsonrpc: '2.0', id: 2, result: {} });
  });
});

test('non-object JSON values -> -32600 with id null', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    for (const line of ['42', '"x"', 'true', 'null']) {
      c.send(line);
      assertError(await c.response(), -32600, null, `line ${line}`);
    }
  });
});

test('missing or wrong "jsonrpc" -> -32600', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    c.send({ id: 5, method: 'ping' });
    assertError(await c.response(), -32600, [5, null], 'missing jsonrpc');
    c.send({ jsonrpc: '1.0', id: 6, method: 'ping' });
    assertError(await c.response(), -32600, [6, null], 'jsonrpc 1.0');
    c.send({ jsonrpc: 2, id: 7, method: 'ping' });
    assertError(await c.response(), -32600, [7, null], 'jsonrpc number');
  });
});

test('wrong id type -> -32600 with id null', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    for (const id of [{}, true, [1], { a: 1 }]) {
      c.send({ jsonrpc: '2.0', id, method: 'ping' });
      assertError(await c.response(), -32600, null, `id ${JSON.stringify(id)}`);
    }
  });
});

test('ping before initialize is answered; other requests get -32002', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    assert.deepEqual(await c.request('p-1', 'ping'), { jsonrpc: '2.0', id: 'p-1', result: {} });
    assertError(await c.request(7, 'tools/list', {}), -32002, 7, 'tools/list before initialize');
    // initialize still works afterwards
    const init = await c.initialize('2025-06-18');
    assert.equal(init.result.protocolVersion, '2025-06-18');
  });
});

test('server/discover with "eras": "both": answered before initialize (stateless era) and after it (handshake era)', T, async () => {
  const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } };
  await withRaw({ server: BACKEND(), extra: { eras: 'both' } }, async (c) => {
    const r = await c.request(11, 'server/discover', params);
    assert.equal(r.id, 11);
    assert.ok(r.result.supportedVersions.includes('2026-07-28'), brief(r));
    assert.equal(r.result.resultType, 'complete');
    // the connection is of the stateless era now: initialize is refused
    const i = await c.request(12, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } });
    assertError(i, -32601, 12, 'initialize on a stateless connection');
  });
  await withRaw({ server: BACKEND(), extra: { eras: 'both' } }, async (c) => {
    await c.initialize();
    const r = await c.request(13, 'server/discover', {});
    assert.equal(r.id, 13);
    assert.ok(r.result.supportedVersions.includes('2025-11-25'), brief(r));
  });
});

test('server/discover by default, handshake-era backend: refused as it refuses it, before and after initialize; initialize then works', T, async () => {
  const params = { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {} } };
  await withRaw({ server: BACKEND() }, async (c) => {
    assertError(await c.request(21, 'server/discover', params), -32601, 21, 'the probe');
    const other = await c.request(22, 'tools/list', params);
    assertError(other, -32002, 22, 'a 2026-07-28 request before initialize');
    const i = await c.request(23, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: CLIENT_INFO });
    assert.equal(i.result?.protocolVersion, '2025-11-25', brief(i));
    c.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    assert.ok(Array.isArray((await c.request(24, 'tools/list')).result?.tools));
    assertError(await c.request(25, 'server/discover', {}), -32601, 25, 'after initialize');
  });
});

test('initialize for each supported protocol version; ids echoed exactly', T, async () => {
  for (const v of ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']) {
    await withRaw({ server: BACKEND() }, async (c) => {
      const id = `init-${v}-\u00e9"\\`;
      const res = await c.request(id, 'initialize', { protocolVersion: v, capabilities: {}, clientInfo: CLIENT_INFO });
      assert.equal(res.id, id);
      assert.equal(res.result?.protocolVersion, v, `negotiated for ${v}: ${brief(res)}`);
      assert.equal(typeof res.result.serverInfo?.name, 'string');
      assert.equal(typeof res.result.capabilities, 'object');
      c.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      for (const rid of [0, -3, 9007199254740991, 'zz', '']) {
        assert.deepEqual(await c.request(rid, 'ping'), { jsonrpc: '2.0', id: rid, result: {} }, `ping id ${JSON.stringify(rid)}`);
      }
    });
  }
});

test('unsupported protocol version is answered with a supported one', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    const res = await c.request(1, 'initialize', { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: CLIENT_INFO });
    assert.ok(res.result, brief(res));
    assert.ok(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'].includes(res.result.protocolVersion),
      `counter-offer ${res.result.protocolVersion}`);
  });
});

test('second initialize -> -32600', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize();
    const res = await c.request(2, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: CLIENT_INFO });
    assertError(res, -32600, 2, 'second initialize');
    assert.deepEqual(await c.request(3, 'ping'), { jsonrpc: '2.0', id: 3, result: {} });
  });
});

test('unknown method is forwarded and the backend\'s -32601 comes back with our id', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize();
    assertError(await c.request(9, 'foo/bar', { x: 1 }), -32601, 9, 'unknown method');
    assertError(await c.request('s-9', 'no/such/method'), -32601, 's-9', 'unknown method (string id)');
  });
});

test('notifications get no response', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    c.send({ jsonrpc: '2.0', method: 'notifications/whatever', params: { a: 1 } });
    await c.expectNoResponse(300);
    await c.initialize();
    c.send({ jsonrpc: '2.0', method: 'notifications/unknown/thing' });
    c.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
    c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 12345, reason: 'nothing' } });
    await c.expectNoResponse(300);
    // the next response is the ping's
    assert.deepEqual(await c.request(77, 'ping'), { jsonrpc: '2.0', id: 77, result: {} });
  });
});

test('batches: array answered with an array for 2025-03-26', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize('2025-03-26');
    c.send([
      { jsonrpc: '2.0', id: 'b1', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/whatever' },
      { jsonrpc: '2.0', id: 'b2', method: 'ping' },
      { jsonrpc: '2.0', id: 'b3', method: 'no/such/method' },
    ]);
    const res = await c.response();
    assert.ok(Array.isArray(res), `batch answer must be an array: ${brief(res)}`);
    const byId = Object.fromEntries(res.map((r) => [r.id, r]));
    assert.equal(res.length, 3, 'one response per request, none for the notification');
    assert.deepEqual(byId.b1, { jsonrpc: '2.0', id: 'b1', result: {} });
    assert.deepEqual(byId.b2, { jsonrpc: '2.0', id: 'b2', result: {} });
    assert.equal(byId.b3.error?.code, -32601);
    // an empty batch is an invalid request
    c.send('[]');
    assertError(await c.response(), -32600, null, 'empty batch');
  });
});

for (const v of ['2024-11-05', '2025-06-18', '2025-11-25']) {
  test(`batches: rejected with -32600 for ${v}`, T, async () => {
    await withRaw({ server: BACKEND() }, async (c) => {
      await c.initialize(v);
      c.send([{ jsonrpc: '2.0', id: 'b1', method: 'ping' }, { jsonrpc: '2.0', id: 'b2', method: 'ping' }]);
      const res = await c.response();
      assert.ok(!Array.isArray(res), `batch must not be processed for ${v}: ${brief(res)}`);
      assertError(res, -32600, null, `batch on ${v}`);
      await c.expectNoResponse(200);
      assert.deepEqual(await c.request(1, 'ping'), { jsonrpc: '2.0', id: 1, result: {} });
    });
  });
}

test('invalid UTF-8 -> -32700; session continues', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize();
    c.send(Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}}'),
    ]));
    assertError(await c.response(), -32700, null, 'invalid UTF-8');
    assert.deepEqual(await c.request(4, 'ping'), { jsonrpc: '2.0', id: 4, result: {} });
  });
});

test('stdin EOF -> mcp-chain exits 0 within a few seconds and the backend is gone', T, async () => {
  const c = new RawChain({ server: BACKEND() });
  try {
    await c.initialize();
    assert.deepEqual(await c.request(2, 'ping'), { jsonrpc: '2.0', id: 2, result: {} });
    const kids = descendants(c.proc.pid);
    assert.ok(kids.length >= 1, 'backend child running');
    c.proc.stdin.end();
    const r = await Promise.race([c.exited, sleep(5000).then(() => null)]);
    assert.ok(r, 'mcp-chain did not exit within 5 s of stdin EOF');
    assert.deepEqual(r, { code: 0, signal: null });
    await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 2000, what: 'backend to be gone' });
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
});

test('-c FILE works like --config FILE', T, async () => {
  const cfg = writeConfig(BACKEND());
  await withRaw({ server: BACKEND(), args: ['-c', cfg] }, async (c) => {
    const init = await c.initialize();
    assert.equal(typeof init.result.serverInfo.name, 'string');
    assert.deepEqual(await c.request(2, 'ping'), { jsonrpc: '2.0', id: 2, result: {} });
  });
});

test('mcp-chain check FILE exits 0 for a valid config, 1 for invalid ones', { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN }, () => {
  const run = (file) => spawnSync(CHAIN, ['check', file], { encoding: 'utf8', timeout: 10_000 });
  const good = writeConfig(everythingServer({ env: { A: 'b' }, cwd: '/' }));
  const r0 = run(good);
  assert.equal(r0.status, 0, `valid config: ${r0.stderr}`);
  const cases = {
    'missing file': tmpPath('does-not-exist.json'),
    'invalid JSON': (() => { const f = tmpPath('bad.json'); writeFileSync(f, '{"mcpServers": {'); return f; })(),
    'no mcpServers': (() => { const f = tmpPath('nosrv.json'); writeFileSync(f, '{"servers": {}}'); return f; })(),
    'server without command': (() => { const f = tmpPath('nocmd.json'); writeFileSync(f, '{"mcpServers": {"x": {"args": []}}}'); return f; })(),
    'args not an array': (() => { const f = tmpPath('badargs.json'); writeFileSync(f, '{"mcpServers": {"x": {"command": "node", "args": "a"}}}'); return f; })(),
  };
  for (const [what, file] of Object.entries(cases)) {
    const r = run(file);
    assert.equal(r.status, 1, `${what}: exit ${r.status}, stderr ${r.stderr}`);
    assert.equal(r.stdout, '', `${what}: nothing on stdout`);
  }
});

test('MCP_CHAIN_LOG=debug raises the log level; stdout stays pure JSON', T, async () => {
  const stderrFor = async (env) => {
    let text = '';
    await withRaw({ server: BACKEND(), env }, async (c) => {
      await c.initialize();
      assert.deepEqual(await c.request(2, 'ping'), { jsonrpc: '2.0', id: 2, result: {} });
      await c.request(3, 'tools/list', {});
      await sleep(100);
      text = c.stderr;
    });
    return text;
  };
  const quiet = await stderrFor({ MCP_CHAIN_LOG: undefined });
  const debug = await stderrFor({ MCP_CHAIN_LOG: 'debug' });
  assert.ok(debug.length > quiet.length, `debug stderr (${debug.length} bytes) should exceed default (${quiet.length} bytes)`);
});

test('framing: split writes, several messages per write, CRLF line endings', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize();
    const line = JSON.stringify({ jsonrpc: '2.0', id: 'split', method: 'ping' });
    c.proc.stdin.write(line.slice(0, 10));
    await sleep(100);
    c.proc.stdin.write(line.slice(10, 25));
    await sleep(100);
    c.proc.stdin.write(`${line.slice(25)}\n`);
    assert.deepEqual(await c.response(), { jsonrpc: '2.0', id: 'split', result: {} });
    c.proc.stdin.write([1, 2, 3].map((id) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' })).join('\n') + '\n');
    const ids = [(await c.response()).id, (await c.response()).id, (await c.response()).id];
    assert.deepEqual(ids.sort(), [1, 2, 3]);
    c.proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 'crlf', method: 'ping' })}\r\n`);
    assert.deepEqual(await c.response(), { jsonrpc: '2.0', id: 'crlf', result: {} });
  });
});

test('a response to an unknown server request id is dropped; session continues', T, async () => {
  await withRaw({ server: BACKEND() }, async (c) => {
    await c.initialize();
    c.send({ jsonrpc: '2.0', id: 'never-asked', result: {} });
    c.send({ jsonrpc: '2.0', id: 424242, error: { code: -32603, message: 'x' } });
    await c.expectNoResponse(300);
    assert.deepEqual(await c.request('after', 'ping'), { jsonrpc: '2.0', id: 'after', result: {} });
  });
});

test('SIGTERM: mcp-chain exits promptly and takes its backend with it', T, async () => {
  const c = new RawChain({ server: BACKEND() });
  try {
    await c.initialize();
    const kids = descendants(c.proc.pid);
    assert.ok(kids.length >= 1, 'backend child running');
    c.proc.kill('SIGTERM');
    const r = await Promise.race([c.exited, sleep(5000).then(() => null)]);
    assert.ok(r, 'mcp-chain still running 5 s after SIGTERM');
    await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 3000, what: 'backend to be gone after SIGTERM' });
    c.assertAllJson();
  } finally {
    await c.close();
  }
});

test('unusable configs: mcp-chain exits non-zero, nothing on stdout', T, async () => {
  const bad = tmpPath('broken-config.json');
  writeFileSync(bad, '{"mcpServers": ');
  for (const args of [['--config', tmpPath('missing-config.json')], ['--config', bad], ['--no-such-flag']]) {
    const r = spawnSync(CHAIN, args, { input: '', encoding: 'utf8', timeout: 10_000 });
    assert.notEqual(r.status, 0, `${args.join(' ')}: exit status ${r.status}`);
    assert.equal(r.stdout, '', `${args.join(' ')}: stdout`);
    assert.ok(r.stderr.length > 0, `${args.join(' ')}: an explanation on stderr`);
  }
});

test('backend that cannot be started: the client gets an error or an exit, not a hang', T, async () => {
  for (const server of [
    { command: '/nonexistent/mcp-backend-binary', args: [] },
    { command: 'node', args: [SE_ENTRY_REL, 'stdio'], cwd: tmpPath('no-such-dir') },
  ]) {
    const c = new RawChain({ server });
    try {
      c.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: CLIENT_INFO } });
      const r = await Promise.race([
        c.response(5000).catch((e) => ({ noResponse: String(e.message).split('\n')[0] })),
        c.exited.then((x) => ({ exited: x })),
      ]);
      if (r.exited) {
        assert.notDeepEqual(r.exited, { code: 0, signal: null }, `${server.command}: exit status should signal failure`);
      } else {
        assert.equal(r.id, 1, `${server.command}: ${JSON.stringify(r)}`);
        assert.equal(typeof r.error?.code, 'number', `${server.command}: initialize must fail: ${JSON.stringify(r)}`);
      }
      c.assertAllJson();
    } finally {
      await c.close();
    }
  }
});

test('stdin EOF with a request still open: exits 0 within a few seconds, backend gone', { ...T, skip: SKIP_NO_FIXTURE }, async () => {
  const c = new RawChain({ server: fixtureServer() });
  try {
    await c.initialize();
    c.send({ jsonrpc: '2.0', id: 'forever', method: 'tools/call', params: { name: 'slow', arguments: { ms: 60_000 } } });
    await sleep(100);
    const kids = descendants(c.proc.pid);
    assert.ok(kids.length >= 1, 'backend child running');
    c.proc.stdin.end();
    const r = await Promise.race([c.exited, sleep(6000).then(() => null)]);
    assert.ok(r, 'mcp-chain did not exit within 6 s of stdin EOF with an open request');
    assert.deepEqual(r, { code: 0, signal: null });
    await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 2000, what: 'backend to be gone' });
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
});

test('stdin EOF with a backend that ignores EOF and SIGTERM: still exits, backend killed', T, async () => {
  const stubborn = "process.on('SIGTERM', () => {}); process.stdin.on('data', () => {}); process.stdin.on('end', () => {}); setInterval(() => {}, 1000);";
  const c = new RawChain({ server: { command: 'node', args: ['-e', stubborn] } });
  try {
    await waitFor(() => descendants(c.proc.pid).length >= 1, { what: 'backend child' });
    await sleep(300);
    const kids = descendants(c.proc.pid);
    c.proc.stdin.end();
    const r = await Promise.race([c.exited, sleep(10_000).then(() => null)]);
    assert.ok(r, 'mcp-chain did not exit within 10 s of stdin EOF');
    assert.deepEqual(r, { code: 0, signal: null }, 'exit status after stdin EOF');
    await waitFor(() => kids.every((p) => !isAlive(p)), { timeoutMs: 3000, what: 'stubborn backend to be killed' });
    c.assertAllJson();
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    throw e;
  } finally {
    await c.close();
  }
});
