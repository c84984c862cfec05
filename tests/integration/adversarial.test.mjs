// Adversarial conversations with the real binary: a hostile backend (the C
// fixture with its --garbage... flags) and a client that mixes mutated and
// hostile lines between valid calls; and a client that stops reading.
// Invariants: mcp-chain stays up, writes only JSON, answers every valid
// request exactly once and correctly, reports nothing from a sanitizer,
// keeps its memory bounded, exits 0 at the end of input and leaves no
// process behind.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

import {
  CHAIN, RawChain, SKIP_NO_FIXTURE, brief, descendants, fixtureServer, isAlive, sleep, waitFor,
  writeConfig,
} from './lib.mjs';

const T = { timeout: 60_000, skip: SKIP_NO_FIXTURE };
const SANITIZER = /AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/;

/** Resident memory of PID in kB (VmRSS in /proc/PID/status), or 0 once it is gone. */
function rssKb(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch { return 0; }
}

/** A mutated copy of LINE: a few bytes flipped, cut, or doubled (seeded). */
function mutate(line, seed) {
  let x = seed * 2654435761 >>> 0;
  const rnd = (n) => { x = (x * 1103515245 + 12345) >>> 0; return (x >>> 8) % n; };
  const b = Buffer.from(line);
  switch (rnd(4)) {
    case 0: for (let i = 0; i < 3; i++) b[rnd(b.length)] ^= 1 << rnd(8); return b;
    case 1: return b.subarray(0, rnd(b.length));
    case 2: { const i = rnd(b.length); return Buffer.concat([b.subarray(0, i), b.subarray(i - 1)]); }
    default: return Buffer.concat([b, Buffer.from([0xc0 + rnd(0x40)])]);
  }
}

/** Client lines no valid request may suffer from (none of them \n-free problems). */
const HOSTILE = [
  '{',
  '}',
  '\u0000',
  'not json',
  Buffer.from([0xff, 0xfe, 0x7b, 0x7d]),
  Buffer.from('{"jsonrpc":"2.0","method":"x\xc0\xaf"}', 'latin1'),
  '{"jsonrpc":"2.0","id":"nul-key","method":"tools/call","params":{"name":"echo","arguments":{"a\\u0000b":1}}}',
  '{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
  '{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"x":' + '['.repeat(5000) + ']'.repeat(5000) + '}}',
  '{"jsonrpc":"2.0","id":"long","method":"ping","params":{"x":"' + 'y'.repeat(20000) + '"}}',
  '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
  '{"jsonrpc":"2.0","id":987654321,"result":{}}',
  '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody","progress":1}}',
  '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-sent"}}',
  '[]',
  '[{"jsonrpc":"2.0","method":"ping"}]',
  '{"jsonrpc":"2.0","id":"s\\ud800","method":"ping"}',
];

/** Checks and closes C: exit 0 at the end of input, no sanitizer report, no process left. */
async function finish(c) {
  const tree = [c.proc.pid, ...descendants(c.proc.pid)];
  c.proc.stdin.end();
  const r = await Promise.race([c.exited, sleep(10_000).then(() => null)]);
  assert.ok(r, 'mcp-chain exits after the end of its input');
  assert.deepEqual(r, { code: 0, signal: null }, `exit status; stderr tail:\n${c.stderr.slice(-2000)}`);
  await waitFor(() => tree.every((p) => !isAlive(p)), { what: 'no process left behind' });
  assert.doesNotMatch(c.stderr, SANITIZER, 'no sanitizer report');
  c.assertAllJson();
}

/** Waits until every id of VALID has a response; names the missing ones if not. */
async function allAnswered(c, valid, timeoutMs) {
  const missing = () => [...valid.keys()].filter((k) => !c.lines.some((e) => e.msg
    && JSON.stringify(e.msg.id) === k && e.msg.method === undefined));
  try {
    await waitFor(() => missing().length === 0, { timeoutMs, what: 'every valid call answered' });
  } catch (e) {
    e.message += `; unanswered: ${missing().join(', ')}`;
    throw e;
  }
}

/*
 * The responses RESPONSES hold, by id: every id of VALID answered exactly
 * once, nothing else but ids the client sent (or null).
 */
function checkAnswers(lines, valid, sent) {
  const byId = new Map();
  sent.add('"init-1"');   /* RawChain.initialize()'s id, checked there */
  for (const { msg } of lines) {
    if (!msg || Array.isArray(msg) || msg.method !== undefined) continue;
    const k = JSON.stringify(msg.id);
    assert.ok(msg.id === null || sent.has(k), `a response to an id never sent: ${brief(msg)}`);
    byId.set(k, [...(byId.get(k) ?? []), msg]);
  }
  for (const [id, check] of valid) {
    const got = byId.get(id) ?? [];
    assert.equal(got.length, 1, `request ${id} answered ${got.length} times: ${got.map(brief).join(' | ')}`);
    check(got[0]);
  }
}

test('hostile backend and hostile client: every valid call answered once, process sound', T, async () => {
  const server = fixtureServer(['--garbage', '--unknown-ids', '--bogus-progress',
    '--deep-array', '5000', '--long-line', '10000']);
  const c = new RawChain({ server, args: ['--config', writeConfig(server, { extra: { maxMessageBytes: 8192 } })] });
  try {
    await c.initialize();
    const valid = new Map(), sent = new Set();
    const send = (m) => { sent.add(JSON.stringify(m.id)); c.send(m); };
    const N = 40;
    for (let i = 0; i < N; i++) {
      const id = i % 3 === 0 ? `call-${i}` : i;
      send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { i } } });
      valid.set(JSON.stringify(id), (r) => {
        assert.ok(r.result, `call ${id}: ${brief(r)}`);
        assert.equal(r.result.structuredContent.params.arguments.i, i, `call ${id} answered with its own result`);
      });
      const h = HOSTILE[i % HOSTILE.length];
      c.send(i % 2 ? h : mutate(JSON.stringify({ jsonrpc: '2.0', id: `m-${i}`, method: 'tools/call',
        params: { name: 'echo', arguments: { i, _meta: { progressToken: i } } } }), i));
      sent.add(JSON.stringify(`m-${i}`));
      for (const x of ['nul-key', 'deep', 'long', 1e400, 987654321, { a: 1 }, 's\ud800']) sent.add(JSON.stringify(x));
    }
    /* a real id beyond int64 and one that is integral: answered with the id as sent */
    c.send('{"jsonrpc":"2.0","id":10000000000000000000.5,"method":"ping"}');   /* JSON.stringify would drop the ".5" */
    sent.add(JSON.stringify(10000000000000000000.5));
    send({ jsonrpc: '2.0', id: -9111111111111111111111.1, method: 'ping' });
    send({ jsonrpc: '2.0', id: 'last', method: 'ping' });
    valid.set(JSON.stringify(10000000000000000000.5), (r) => assert.deepEqual(r.result, {}));
    valid.set(JSON.stringify(-9111111111111111111111.1), (r) => assert.deepEqual(r.result, {}));
    valid.set(JSON.stringify('last'), (r) => assert.deepEqual(r.result, {}));
    await allAnswered(c, valid, 20_000);
    await sleep(300);   /* duplicates the backend sends would arrive by now */
    checkAnswers(c.lines, valid, sent);
    /* a NUL in a key is refused at once with -32700, whichever path takes it */
    assert.ok(c.lines.some((e) => e.msg?.error?.code === -32700), 'parse errors answered');
    assert.ok(isAlive(c.proc.pid), 'mcp-chain is still up');
    await finish(c);
  } catch (e) {
    e.message += `\n--- stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    c.proc.kill('SIGKILL');
    throw e;
  }
});

test('a NUL in a nested key is answered -32700 at once, not forwarded', T, async () => {
  const c = new RawChain({ server: fixtureServer() });
  try {
    await c.initialize();
    c.send('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a\\u0000b":1}}}');
    const r = await c.response(5000);
    assert.equal(r.error?.code, -32700, brief(r));
    assert.deepEqual(await c.request(8, 'ping'), { jsonrpc: '2.0', id: 8, result: {} });
    await finish(c);
  } catch (e) {
    c.proc.kill('SIGKILL');
    throw e;
  }
});

test('a backend that dies after half a line: every call answered once, restarts, exit 0', T, async () => {
  const server = fixtureServer(['--die-after', '4', '--garbage']);
  const cfg = writeConfig(server, { extra: {} });
  const c = new RawChain({ server, args: ['--config', cfg] });
  try {
    await c.initialize();
    const valid = new Map(), sent = new Set();
    for (let i = 0; i < 12; i++) {
      sent.add(JSON.stringify(i));
      c.send({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo', arguments: { i } } });
      valid.set(JSON.stringify(i), (r) => {
        if (r.result) assert.equal(r.result.structuredContent.params.arguments.i, i);
        else assert.equal(typeof r.error?.code, 'number', brief(r));
      });
      await waitFor(() => c.lines.some((e) => e.msg && e.msg.id === i && e.msg.method === undefined),
        { timeoutMs: 10_000, what: `call ${i} answered` });
    }
    await sleep(200);
    checkAnswers(c.lines, valid, sent);
    assert.ok(c.lines.some((e) => e.msg?.error), 'calls to the dead backend get errors');
    await finish(c);
  } catch (e) {
    e.message += `\n--- stderr (tail) ---\n${c.stderr.slice(-3000)}`;
    c.proc.kill('SIGKILL');
    throw e;
  }
});

test('a client that writes "{" lines and never reads: memory bounded, nothing lost', T, async () => {
  const server = fixtureServer();
  const cfg = writeConfig(server);
  /* ASan's quarantine would hold every freed reply: measure the queues, not it */
  const proc = spawn(CHAIN, ['--config', cfg], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ASAN_OPTIONS: `${process.env.ASAN_OPTIONS ?? ''}:quarantine_size_mb=1` },
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; if (stderr.length > 100_000) stderr = stderr.slice(-100_000); });
  const exited = new Promise((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  try {
    proc.stdout.pause();
    const lines = 300_000;                    /* 600 kB in, about 40 MB of -32700 replies */
    const chunk = Buffer.from('{\n'.repeat(1000));
    await sleep(200);
    const base = rssKb(proc.pid);
    let peak = base;
    for (let i = 0; i < lines / 1000; i++) proc.stdin.write(chunk);
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) {
      peak = Math.max(peak, rssKb(proc.pid));
      await sleep(50);
    }
    /* the client's writes wait: mcp-chain stopped reading it */
    assert.ok(proc.stdin.writableLength > 100_000,
      `mcp-chain kept reading a client that does not read (${proc.stdin.writableLength} bytes unread)`);
    assert.ok(peak - base < 24 * 1024, `RSS grew by ${peak - base} kB (from ${base} kB)`);
    /* the client reads again: every line answered, then a request after them */
    let buf = '', replies = 0, parseErrors = 0, pong = null;
    proc.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (m.id === 'after') pong = m;
        else { replies++; if (m.error?.code === -32700 && m.id === null) parseErrors++; }
        if (replies % 20000 === 0) peak = Math.max(peak, rssKb(proc.pid));
      }
    });
    proc.stdout.resume();
    proc.stdin.write('{"jsonrpc":"2.0","id":"after","method":"ping"}\n');
    await waitFor(() => pong !== null, { timeoutMs: 40_000, what: 'the request after the junk answered' });
    assert.equal(replies, lines);
    assert.equal(parseErrors, lines);
    assert.ok(peak - base < 24 * 1024, `RSS grew by ${peak - base} kB while draining`);
    proc.stdin.end();
    const r = await Promise.race([exited, sleep(10_000).then(() => null)]);
    assert.deepEqual(r, { code: 0, signal: null });
    assert.doesNotMatch(stderr, SANITIZER);
  } catch (e) {
    e.message += `\n--- stderr (tail) ---\n${stderr.slice(-3000)}`;
    proc.kill('SIGKILL');
    throw e;
  }
});

/*
 * A backend whose progress tokens are reals. mcp-chain gives a backend
 * integer tokens (its own request ids); a token 2.5 is not 2, and the full
 * path (rpc_id_key: 'r' + the double) finds no exchange for it. The fast
 * path (src/core/fastpath.c, fast_progress) reads the token's text with
 * span_int, which stops at the '.': 2.5 is taken for 2 and the progress
 * reaches the client under its token; and 100000000000000000000.5 makes
 * span_int overflow (UBSan: signed integer overflow at fastpath.c:99).
 * FIXED by the one message path: msg.c takes a token for an integer only
 * when its text is digits alone (at most 18), whatever the form.
 */
const REAL_TOKEN_BACKEND = `
const rl = require('readline').createInterface({ input: process.stdin });
const out = (m) => process.stdout.write((typeof m === 'string' ? m : JSON.stringify(m)) + '\\n');
rl.on('line', (l) => {
  const m = JSON.parse(l);
  if (m.method === 'initialize')
    out({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: {} }, serverInfo: { name: 'real-token', version: '1' } } });
  else if (m.method === 'tools/call') {
    const t = m.params._meta.progressToken;
    out('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":100000000000000000000.5,"progress":1}}');
    out('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":' + t + '.5,"progress":2}}');
    out({ jsonrpc: '2.0', id: m.id, result: { content: [] } });
  } else if (m.id !== undefined) out({ jsonrpc: '2.0', id: m.id, result: {} });
});`;

test('progress with a real token from a backend: not taken for an integer one, no UB',
  T, async () => {
    const c = new RawChain({ server: { command: process.execPath, args: ['-e', REAL_TOKEN_BACKEND] } });
    try {
      await c.initialize();
      c.send({ jsonrpc: '2.0', id: 'call', method: 'tools/call',
        params: { name: 'x', arguments: {}, _meta: { progressToken: 'client-tok' } } });
      const r = await c.response(10_000);
      assert.equal(r.id, 'call');
      await sleep(100);
      const progress = c.lines.filter((e) => e.msg?.method === 'notifications/progress');
      assert.deepEqual(progress.map((e) => e.raw), [], 'no progress for tokens the backend was never given');
      await finish(c);
    } catch (e) {
      e.message += `\n--- stderr (tail) ---\n${c.stderr.slice(-3000)}`;
      c.proc.kill('SIGKILL');
      throw e;
    }
  });
