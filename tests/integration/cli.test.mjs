// The shell commands (`mcp-chain list`, `call`, `read`, `prompt`, `--direct`)
// through the real binary, against server-everything and server-filesystem
// behind one config, and the C fixture server where a test needs to see what
// the backend received (cancellation).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import {
  CHAIN, HERE, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT, everythingServer, fixtureServer,
  tmpPath, waitFor,
} from './lib.mjs';

const TE = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };
const TF = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const FS_ENTRY = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-filesystem',
  'dist', 'index.js');
const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

let cfgN = 0;
/** Writes a config with `servers` ({name: {command, args}}) and `extra` top-level keys. */
function config(servers, extra = {}) {
  const file = tmpPath(`cli-${process.pid}-${++cfgN}.json`);
  const mcpServers = {};
  for (const [name, s] of Object.entries(servers)) {
    mcpServers[name] = { command: s.command === 'node' ? process.execPath : s.command, args: s.args ?? [] };
  }
  writeFileSync(file, JSON.stringify({ mcpServers, ...extra }, null, 2));
  return file;
}

/** A directory with one known file, for server-filesystem. */
function fsRoot() {
  const dir = tmpPath(`cli-root-${process.pid}`);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'hello.txt'), 'hello from the file\n');
  }
  return dir;
}

/** The two reference servers behind one config ("everything", "fs"). */
function twoServers(extra = {}) {
  return config({
    everything: everythingServer(),
    fs: { command: 'node', args: [FS_ENTRY, fsRoot()] },
  }, extra);
}

/** Runs mcp-chain ARGS to completion; returns {code, stdout, stderr}. */
function run(args, { env = {}, input } = {}) {
  const r = spawnSync(CHAIN, args, {
    env: { ...process.env, ...env }, input, encoding: 'utf8', timeout: TEST_TIMEOUT - 2000,
  });
  assert.doesNotMatch(r.stderr ?? '', SANITIZER_REPORT, r.stderr);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// ---------------------------------------------------------------------------
// list

test('list: every backend ready, tools with the names a client sees and their arguments', TE, () => {
  const cfg = twoServers();
  const r = run(['list', '-c', cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^everything \(ready\)$/m);
  assert.match(r.stdout, /^fs \(ready\)$/m);
  assert.match(r.stdout, /^ {4}everything__echo\(message\*\) {2}- Echoes back the input/m);
  assert.match(r.stdout, /^ {4}everything__get-sum\(a\*, b\*\)/m);
  assert.match(r.stdout, /^ {4}fs__read_text_file\(path\*, tail, head\)/m);
  assert.match(r.stdout, /^ {4}everything__args-prompt\(city\*, state\)/m);
  assert.match(r.stdout, /demo:\/\/resource\/static\/document\/features\.md/);
  assert.match(r.stdout, /demo:\/\/resource\/dynamic\/text\/\{resourceId\}/);
  // fs tools sit under fs, not under everything
  const fsPart = r.stdout.split(/^fs \(ready\)$/m)[1];
  assert.match(fsPart, /fs__list_directory/);
  assert.doesNotMatch(fsPart.split(/^resources/m)[0], /everything__/);
});

test('list --json: one document, tools per backend as the client sees them', TE, () => {
  const r = run(['list', '--json', '-c', twoServers()]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert.deepEqual(doc.backends.map((b) => [b.name, b.state]), [['everything', 'ready'], ['fs', 'ready']]);
  const ev = doc.backends[0];
  const echo = ev.tools.find((t) => t.name === 'everything__echo');
  assert.deepEqual(echo.inputSchema.required, ['message']);
  assert.ok(doc.backends[1].tools.every((t) => t.name.startsWith('fs__')));
  assert.ok(ev.prompts.some((p) => p.name === 'everything__simple-prompt'));
  assert.ok(doc.resources.some((x) => x.uri === 'mcp-chain://status'));
  assert.ok(doc.resourceTemplates.length > 0);
});

test('list: a backend that fails makes the exit non-zero with the reason', TF, () => {
  const cfg = config({
    good: fixtureServer(),
    bad: { command: tmpPath('no-such-server'), args: [] },
  }, { initTimeoutMs: 5000 });
  const r = run(['list', '-c', cfg]);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /backend "bad" is (restarting|failed|starting|stopped)(: .*cannot start)?/);
  assert.match(r.stdout, /^good \(ready\)$/m);
  assert.match(r.stdout, /^bad \((restarting|failed|starting|stopped)/m);
});

test('list, call, --direct: a chain that cannot initialize exits 3 with the reason and its log', TF, () => {
  const cfg = config({ fx: fixtureServer(['--no-init-response']) }, { initTimeoutMs: 1000 });
  for (const args of [['list'], ['call', 'echo']]) {
    const r = run([...args, '-c', cfg]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /the chain did not initialize: backend fx did not answer initialize within 1 s/);
    assert.match(r.stderr, /chain: stderr: .*not answering initialize/);
    assert.equal(r.stderr.match(/the chain did not initialize/g).length, 1);
  }
  const d = direct(cfg, [req(1, 'echo')]);
  assert.equal(d.code, 3);
  assert.equal(d.byId.get(1).error.code, -32000);
  assert.match(d.byId.get(1).error.message, /the chain did not come up/);
});

test('list: states without the status resource; -v lets the chain log through', TF, () => {
  const r = run(['list', '-c', config({ a: fixtureServer(), b: fixtureServer() }, { status: false })]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^a \(unknown\)$/m);
  assert.match(r.stdout, /^ {4}b__echo\(\)/m);
  assert.equal(r.stderr, '');  // the chain's log stays out of the way
  const one = run(['list', '-v', '-c', config({ solo: fixtureServer() })]);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stdout, /^solo \(ready\)$/m);
  assert.match(one.stdout, /^ {4}echo\(\)/m);  // one backend: names as the server gives them
  assert.match(one.stderr, /^\S+ mcp-chain info: solo: ready: mcp-fixture-server/m);  // unchanged
});

test('list: a configuration error is reported before anything starts', TE, () => {
  const file = tmpPath(`cli-bad-${process.pid}.json`);
  writeFileSync(file, '{"mcpServers": {"x": {"comand": "y"}}}');
  const r = run(['list', '-c', file]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /comand/);
});

// ---------------------------------------------------------------------------
// list follows list_changed (the settle window of docs/cli.md)

/*
 * A stdio MCP server (node, no SDK) with one tool that, once initialized,
 * sends notifications/tools/list_changed every 50 ms for as long as it runs:
 * `list` must not wait for it to stop.
 */
function chattyServer() {
  const file = tmpPath(`cli-chatty-${process.pid}.mjs`);
  writeFileSync(file, `
import { createInterface } from 'node:readline';
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.method === 'initialize') {
    send({ id: m.id, result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'chatty', version: '1' } } });
  } else if (m.method === 'notifications/initialized') {
    setInterval(() => send({ method: 'notifications/tools/list_changed' }), 50);
  } else if (m.method === 'tools/list') {
    send({ id: m.id, result: { tools: [{ name: 'chat', inputSchema: { type: 'object' } }] } });
  } else if (m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: 'no ' + m.method } });
  }
}).on('close', () => process.exit(0));
`);
  return { command: 'node', args: [file] };
}

/** Runs mcp-chain ARGS as run() does; also its duration in ms. */
function timed(args) {
  const t0 = performance.now();
  const r = run(args);
  return { ...r, ms: performance.now() - t0 };
}

test('list: a tool registered after initialized (list_changed) is listed, one backend', TE, () => {
  const cfg = config({ everything: everythingServer() });
  const r = run(['list', '-c', cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^ {4}simulate-research-query\(topic\*/m);
  const j = run(['list', '--json', '-c', cfg]);
  assert.equal(j.code, 0, j.stderr);
  const tools = JSON.parse(j.stdout).backends[0].tools.map((t) => t.name);
  assert.ok(tools.includes('simulate-research-query'), tools.join(' '));
  assert.ok(tools.includes('echo'));
});

// (initJoinMs: the client's initialize waits for both backends however
// loaded the machine, so that what follows is about list_changed alone)
test('list: a tool registered after initialized is listed with two backends too', TE, () => {
  const cfg = config({ everything: everythingServer(), fx: fixtureServer() }, { initJoinMs: 25_000 });
  const r = run(['list', '-c', cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^ {4}everything__simulate-research-query\(topic\*/m);
  assert.match(r.stdout, /^ {4}fx__echo\(\)/m);
  const j = run(['list', '--json', '-c', cfg]);
  assert.equal(j.code, 0, j.stderr);
  const doc = JSON.parse(j.stdout);
  assert.deepEqual(doc.backends.map((b) => [b.name, b.state]), [['everything', 'ready'], ['fx', 'ready']]);
  assert.ok(doc.backends[0].tools.some((t) => t.name === 'everything__simulate-research-query'));
});

test('call: a tool registered after initialized is found (its schema checked), not "unknown"', TE, () => {
  const cfg = config({ everything: everythingServer(), fx: fixtureServer() }, { initJoinMs: 25_000 });
  const r = run(['call', '-c', cfg, 'everything__simulate-research-query', 'ambiguous=false']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /everything__simulate-research-query: missing required argument "topic"/);
  assert.doesNotMatch(r.stderr, /is listed/);
});

test('list: no wait without list_changed, and a server that never stops sending them is cut off', { ...TF, skip: SKIP_NO_FIXTURE || SKIP_NO_CHAIN }, () => {
  // the fixture sends no list_changed: list ends once the short quiet
  // window after initialized is over; the chatty server keeps sending them,
  // and list ends at the cap of the window (2 s after initialized)
  const quiet = timed(['list', '-c', config({ fx: fixtureServer() })]);
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.match(quiet.stdout, /^ {4}echo\(\)/m);
  const chatty = timed(['list', '-c', config({ chatty: chattyServer() })]);
  assert.equal(chatty.code, 0, chatty.stderr);
  assert.match(chatty.stdout, /^ {4}chat\(\)/m);
  assert.ok(quiet.ms < 0.75 * chatty.ms,
    `a list with no list_changed took ${quiet.ms.toFixed(0)} ms, one cut off at the cap ${chatty.ms.toFixed(0)} ms`);
});

// ---------------------------------------------------------------------------
// call

test('call: key=value arguments (JSON values), text result on stdout, exit 0', TE, () => {
  const cfg = twoServers();
  let r = run(['call', '-c', cfg, 'everything__get-sum', 'a=2', 'b=40']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'The sum of 2 and 40 is 42.\n');
  r = run(['call', '-c', cfg, 'everything__echo', 'message=42']);  // a string property keeps the text
  assert.equal(r.stdout, 'Echo: 42\n');
  r = run(['call', '-c', cfg, 'fs.read_text_file', `path=${path.join(fsRoot(), 'hello.txt')}`]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'hello from the file\n');
});

test('call: one JSON object as arguments; --json prints the whole result', TE, () => {
  const r = run(['call', '--json', '-c', twoServers(), 'everything__echo', '{"message":"hi"}']);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { content: [{ type: 'text', text: 'Echo: hi' }] });
});

test('call: arguments checked against the inputSchema before the call, naming the key', TE, () => {
  const cfg = twoServers();
  let r = run(['call', '-c', cfg, 'everything__get-sum', 'a=1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /everything__get-sum: missing required argument "b"/);
  r = run(['call', '-c', cfg, 'everything__get-sum', 'a=one', 'b=2']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /argument "a": expected number, got string "one"/);
  r = run(['call', '-c', cfg, 'everything__get-annotated-message', 'messageType=loud']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /argument "messageType": "loud" is not one of \["error","success","debug"\]/);
  r = run(['call', '-c', cfg, 'everything__echo', 'message']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /key=value/);
});

test('call: a tool result with isError exits 1 with its text on stderr', TE, () => {
  const r = run(['call', '-c', twoServers(), 'fs__read_text_file', 'path=/etc/passwd']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /Access denied/);
});

test('call: a JSON-RPC error exits 2 with its message on stderr', TE, () => {
  // a name nobody lists is still sent (the chain decides); the server answers an error
  const r = run(['call', '-c', twoServers(), 'everything__no-such-tool']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Unknown tool: everything__no-such-tool/);
  assert.match(r.stderr, /no tool named "everything__no-such-tool" is listed/);
});

test('call: a tool denied by a policy module is hidden and refused with exit 1', TE, () => {
  const cfg = twoServers({ middleware: [{ use: 'policy', rules: [{ deny: ['everything__echo'] }] }] });
  const list = run(['list', '--json', '-c', cfg]);
  assert.equal(list.code, 0, list.stderr);
  assert.ok(!JSON.parse(list.stdout).backends[0].tools.some((t) => t.name === 'everything__echo'));
  const r = run(['call', '-c', cfg, 'everything__echo', 'message=x']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /Refused by the mcp-chain policy: the tool "everything__echo" is not allowed/);
  const ok = run(['call', '-c', cfg, 'everything__get-sum', 'a=1', 'b=1']);
  assert.equal(ok.code, 0, ok.stderr);
});

test('read and prompt: text to stdout', TE, () => {
  const cfg = twoServers();
  let r = run(['read', '-c', cfg, 'demo://resource/dynamic/text/7']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Resource 7: This is a plaintext resource/);
  r = run(['read', '-c', cfg, 'demo://resource/dynamic/blob/4']);  // a blob: its bytes, decoded
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^Resource 4: This is a base64 blob created at .*[^\n]$/);
  r = run(['read', '--json', '-c', cfg, 'demo://resource/dynamic/blob/4']);
  assert.equal(Buffer.from(JSON.parse(r.stdout).contents[0].blob, 'base64').toString().slice(0, 12), 'Resource 4: ');
  r = run(['prompt', '-c', cfg, 'everything__args-prompt', 'city=Paris']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\[user\]\n.*Paris/);
  r = run(['prompt', '-c', cfg, 'everything__args-prompt']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /missing required argument "city"/);
  r = run(['read', '-c', cfg, 'nosuch://x']);
  assert.equal(r.code, 2);
});

test('call: progress is a line per update when stderr is not a terminal', TE, () => {
  const r = run(['call', '-c', twoServers(), 'everything__trigger-long-running-operation',
    'duration=1', 'steps=3']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Long running operation completed/);
  assert.deepEqual(r.stderr.match(/^progress: .*$/mg),
    ['progress: 1/3 (33%)', 'progress: 2/3 (67%)', 'progress: 3/3 (100%)']);
});

test('call: progress draws a bar in a pseudo-terminal', { ...TE, skip: SKIP_NO_CHAIN || (spawnSync('script', ['--version']).status !== 0 && 'no script(1)') }, () => {
  const cmd = [CHAIN, 'call', '-c', twoServers(), 'everything__trigger-long-running-operation',
    'duration=1', 'steps=2'].map((a) => `'${a}'`).join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', timeout: 20000 });
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.stdout, /\r\x1b\[K\[#{15}\.{15}\]  50% 1\/2/);
  assert.match(r.stdout, /\r\x1b\[K\[#{30}\] 100% 2\/2/);
  assert.match(r.stdout, /Long running operation completed/);
  assert.doesNotMatch(r.stdout, /progress: /);
});

test('call: Ctrl-C mid-call reaches the backend as a cancellation, exit 130', TF, async () => {
  const log = tmpPath(`cli-cancel-${process.pid}.log`);
  const cfg = config({ fx: fixtureServer(['--cancel-log', log]) });
  const child = spawn(CHAIN, ['call', '-c', cfg, 'slow', 'ms=20000', 'steps=20'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  await waitFor(() => /progress: 1\/20/.test(stderr), { timeoutMs: 10000, what: 'first progress' });
  child.kill('SIGINT');
  const code = await new Promise((r) => child.on('exit', (c) => r(c)));
  assert.equal(code, 130);
  assert.match(stderr, /interrupted: the request is cancelled/);
  assert.doesNotMatch(stderr, SANITIZER_REPORT);
  // the fixture wrote the backend-side id of the cancelled call before it exited
  await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').trim() !== '', { what: 'cancel log' });
  assert.match(readFileSync(log, 'utf8'), /^\d+\n$/);
});

test('call: --timeout cancels the call and exits 124', TF, () => {
  const log = tmpPath(`cli-timeout-${process.pid}.log`);
  // the timeout covers start-up too: 3 s leaves room for it on a loaded machine
  const r = run(['call', '--timeout', '3', '-c', config({ fx: fixtureServer(['--cancel-log', log]) }),
    'slow', 'ms=20000', 'steps=2']);
  assert.equal(r.code, 124);
  assert.match(r.stderr, /timed out after 3 s: the request is cancelled/);
  assert.match(readFileSync(log, 'utf8'), /^\d+\n$/);
});

test('call: the auth module takes its token from $MCP_CHAIN_TOKEN', TE, () => {
  const token = 'cli-secret';
  const cfg = twoServers({ middleware: [{ use: 'auth', tokens: [{
    sha256: createHash('sha256').update(token).digest('hex'), principal: 'me' }] }] });
  let r = run(['call', '-c', cfg, 'everything__echo', 'message=hi'], { env: { MCP_CHAIN_TOKEN: token } });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'Echo: hi\n');
  r = run(['call', '-c', cfg, 'everything__echo', 'message=hi'], { env: { MCP_CHAIN_TOKEN: 'wrong' } });
  assert.notEqual(r.code, 0);
});

test('call: a server request for elicitation is refused when stdin is not a terminal', TF, () => {
  const r = run(['call', '-c', config({ fx: fixtureServer() }), 'elicit'], { input: '' });
  assert.match(r.stderr, /server asked for elicitation, but stdin is not a terminal/);
});

const NO_SCRIPT = spawnSync('script', ['--version']).status !== 0 && 'no script(1)';

/** Runs CMD in a pseudo-terminal (script(1)) with INPUT typed; returns its output. */
function inPty(args, input) {
  const cmd = [CHAIN, ...args].map((a) => `'${a}'`).join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', input, timeout: 20000 });
  assert.doesNotMatch(r.stdout, SANITIZER_REPORT, r.stdout);
  return { code: r.status, out: r.stdout.replace(/\r/g, '') };
}

test('call: elicitation is asked field by field on a terminal', { ...TF, skip: SKIP_NO_FIXTURE || NO_SCRIPT }, () => {
  const r = inPty(['call', '-c', config({ fx: fixtureServer() }), 'elicit'], 'Ada\n\n');
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /The server asks: Need input/);
  assert.match(r.out, /name \(string\): /);
  assert.match(r.out, /\{"action":"accept","content":\{"name":"Ada"\}\}/);
});

test('call: elicitation declined on a terminal', { ...TF, skip: SKIP_NO_FIXTURE || NO_SCRIPT }, () => {
  const r = inPty(['call', '-c', config({ fx: fixtureServer() }), 'elicit'], 'Ada\nn\n');
  assert.match(r.out, /\{"action":"decline"\}/);
});

test('call: sampling is answered by the person on a terminal', { ...TF, skip: SKIP_NO_FIXTURE || NO_SCRIPT }, () => {
  const r = inPty(['call', '-c', config({ fx: fixtureServer() }), 'sample'], 'a reply\n');
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /\[user\] hello/);
  assert.match(r.out, /"content":\{"type":"text","text":"a reply"\}/);
});

test('usage errors exit 2 with the usage', TE, () => {
  let r = run(['call']);
  assert.equal(r.code, 2);
  r = run(['list', '-c', twoServers(), '--bogus']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown option "--bogus"/);
  r = run(['--help']);
  assert.match(r.stdout, /call NAME \[ARGS\]/);
  assert.match(r.stdout, /replay OUT/);
  r = run(['-c', twoServers(), '--json', 'call', 'everything__echo', 'message=options first']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).content[0].text, 'Echo: options first');
  r = run(['call', '--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /mcp-chain call +\[-c FILE\]/);
});

// ---------------------------------------------------------------------------
// --direct

/** Runs `mcp-chain --direct` with MESSAGES (objects or raw lines); returns {code, byId, notes, stderr}. */
function direct(cfg, messages, opts = {}) {
  const input = messages.map((m) => (typeof m === 'string' ? m : JSON.stringify(m))).join('\n') + '\n';
  const r = run(['--direct', '-c', cfg], { ...opts, input });
  const lines = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const byId = new Map(lines.filter((m) => 'id' in m && !('method' in m)).map((m) => [m.id, m]));
  return { code: r.code, byId, notes: lines.filter((m) => 'method' in m), stderr: r.stderr };
}

const req = (id, method, params) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

test('--direct: tools are methods, by their namespaced name or with "."', TE, () => {
  const r = direct(twoServers(), [
    req(1, 'everything__get-sum', { a: 2, b: 3 }),
    req(2, 'everything.echo', { message: 'hi' }),
    req('s', 'fs.read_text_file', { path: path.join(fsRoot(), 'hello.txt') }),
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.byId.get(1).result, { content: [{ type: 'text', text: 'The sum of 2 and 3 is 5.' }] });
  assert.deepEqual(r.byId.get(2).result.content, [{ type: 'text', text: 'Echo: hi' }]);
  assert.equal(r.byId.get('s').result.content[0].text, 'hello from the file\n');
});

test('--direct: rpc.discover lists the callable tools with their input schemas', TE, () => {
  const r = direct(twoServers(), [req(1, 'rpc.discover')]);
  const { methods } = r.byId.get(1).result;
  const sum = methods.find((m) => m.name === 'everything__get-sum');
  assert.equal(sum.inputSchema.type, 'object');
  assert.deepEqual(sum.params.map((p) => [p.name, p.required]), [['a', true], ['b', true]]);
  assert.ok(methods.some((m) => m.name === 'fs__list_directory'));
});

test('--direct: unknown method -32601, bad arguments -32602 with the complaint, parse errors', TE, () => {
  const r = direct(twoServers(), [
    req(1, 'nosuch'),
    req(2, 'everything__get-sum', { a: 'x', b: 1 }),
    req(3, 'everything__echo', [1]),
    'not json',
    req(4, 'everything__get-sum', { a: 1 }),
  ]);
  assert.equal(r.byId.get(1).error.code, -32601);
  assert.equal(r.byId.get(2).error.code, -32602);
  assert.equal(r.byId.get(2).error.message, 'argument "a": expected number, got string "x"');
  assert.equal(r.byId.get(3).error.code, -32602);
  assert.match(r.byId.get(4).error.message, /missing required argument "b"/);
  assert.equal(r.byId.get(null).error.code, -32700);
});

test('--direct: MCP methods still work', TE, () => {
  const r = direct(twoServers(), [
    req(1, 'tools/list'),
    req(2, 'resources/read', { uri: 'demo://resource/dynamic/text/2' }),
    req(3, 'ping'),
  ]);
  assert.ok(r.byId.get(1).result.tools.some((t) => t.name === 'everything__echo'));
  assert.match(r.byId.get(2).result.contents[0].text, /^Resource 2:/);
  assert.deepEqual(r.byId.get(3).result, {});
});

test('--direct: progress arrives as notifications carrying the request id', TE, () => {
  const r = direct(twoServers(), [req(9, 'everything__trigger-long-running-operation', { duration: 1, steps: 2 })]);
  assert.match(r.byId.get(9).result.content[0].text, /completed/);
  const progress = r.notes.filter((n) => n.method === 'notifications/progress');
  assert.deepEqual(progress.map((n) => [n.params.progressToken, n.params.progress, n.params.total]),
    [[9, 1, 2], [9, 2, 2]]);
});

test('--direct: through the same middleware (policy refuses, auth needs the token)', TE, () => {
  const token = 'direct-secret';
  const cfg = twoServers({ middleware: [
    { use: 'auth', tokens: [{ sha256: createHash('sha256').update(token).digest('hex'), principal: 'me' }] },
    { use: 'policy', rules: [{ deny: ['everything__echo'] }] },
  ] });
  const r = direct(cfg, [req(1, 'rpc.discover'), req(2, 'everything__get-sum', { a: 1, b: 1 })],
    { env: { MCP_CHAIN_TOKEN: token } });
  assert.ok(!r.byId.get(1).result.methods.some((m) => m.name === 'everything__echo'));
  assert.equal(r.byId.get(2).result.content[0].text, 'The sum of 1 and 1 is 2.');
  // a denied tool is not a method here (the list hides it)
  const denied = direct(cfg, [req(1, 'everything__echo', { message: 'x' })], { env: { MCP_CHAIN_TOKEN: token } });
  assert.equal(denied.byId.get(1).error.code, -32601);
  // and without the token nothing passes
  const anon = direct(cfg, [req(1, 'tools/list')], { env: { MCP_CHAIN_TOKEN: '' } });
  assert.ok(anon.code !== 0 || anon.byId.get(1)?.error, JSON.stringify([...anon.byId.values()]));
});

test('--direct: initialize is answered (an MCP client may use it too); cancellation reaches the backend', TF, () => {
  const log = tmpPath(`cli-direct-cancel-${process.pid}.log`);
  const r = direct(config({ fx: fixtureServer(['--cancel-log', log]) }), [
    req(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } }),
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    req(2, 'slow', { ms: 20000, steps: 2 }),
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'changed my mind' } },
    req(3, 'echo', {}),
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.byId.get(1).result.serverInfo.name, 'mcp-fixture-server');
  assert.ok(!r.byId.has(2), 'a cancelled request gets no answer');
  assert.ok(r.byId.get(3).result);
  assert.match(readFileSync(log, 'utf8'), /^\d+\n$/);
});

// ---------------------------------------------------------------------------
// --record and replay

/** What an SDK client sees of a server: lists, results, progress. */
async function session(command, args) {
  const transport = new StdioClientTransport({ command, args, stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'replay-test', version: '1' }, { capabilities: {} });
  await client.connect(transport);
  try {
    const seen = {
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      tools: await client.listTools(),
      prompts: await client.listPrompts(),
      resources: await client.listResources(),
      templates: await client.listResourceTemplates(),
      sum: await client.callTool({ name: 'everything__get-sum', arguments: { a: 20, b: 22 } }),
      sumAgain: await client.callTool({ name: 'everything__get-sum', arguments: { a: 20, b: 22 } }),
      file: await client.callTool({ name: 'fs__read_text_file', arguments: { path: path.join(fsRoot(), 'hello.txt') } }),
      read: await client.readResource({ uri: 'demo://resource/static/document/features.md' }),
      prompt: await client.getPrompt({ name: 'everything__args-prompt', arguments: { city: 'Lyon' } }),
      progress: [],
    };
    seen.long = await client.callTool({ name: 'everything__trigger-long-running-operation',
      arguments: { duration: 1, steps: 2 } }, undefined,
      { onprogress: (p) => seen.progress.push([p.progress, p.total]) });
    return seen;
  } finally {
    await client.close();
    assert.doesNotMatch(stderr, SANITIZER_REPORT, stderr);
  }
}

test('a recorded session replayed gives an SDK client the same lists and results', { ...TE, timeout: 60_000 }, async () => {
  const rec = tmpPath(`cli-rec-${process.pid}.jsonl`);
  const cfg = twoServers();
  const live = await session(CHAIN, ['--config', cfg, '--record', rec]);
  const lines = readFileSync(rec, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(lines.every((l) => typeof l.t === 'string' && l.msg &&
    ['in', 'out', 'to-backend', 'from-backend'].includes(l.dir)), 'every line has a time, a direction, a message');
  const sumCall = lines.find((l) => l.dir === 'in' && l.msg.params?.name === 'everything__get-sum');
  assert.equal(sumCall.backend, 'everything');
  // the chain's side too, exact: each backend's handshake, and the call under the backend's own name
  for (const b of ['everything', 'fs']) {
    assert.ok(lines.some((l) => l.dir === 'to-backend' && l.backend === b && l.msg.method === 'initialize'), b);
    assert.ok(lines.some((l) => l.dir === 'from-backend' && l.backend === b && l.msg.result?.serverInfo), b);
  }
  const atBackend = lines.find((l) => l.dir === 'to-backend' && l.msg.params?.name === 'get-sum');
  assert.equal(atBackend.backend, 'everything');
  assert.ok(lines.some((l) => l.dir === 'from-backend' && l.backend === 'everything' && l.msg.id === atBackend.msg.id));
  assert.equal(lines.find((l) => l.dir === 'out' && l.msg.id === sumCall.msg.id).backend, 'everything');
  assert.equal(lines.find((l) => l.msg.params?.name === 'fs__read_text_file').backend, 'fs');
  const replayed = await session(CHAIN, ['replay', rec]);
  // the SDK may drop a progress notification that arrives just before its
  // response (docs/MCP-NOTES), live or replayed: progress is compared on the wire below
  for (const s of [live, replayed]) {
    assert.ok(s.progress.length >= 1, JSON.stringify(s.progress));
    delete s.progress;
  }
  assert.deepEqual(replayed, live);
  // on the wire: both recorded progress notifications, with the new token, then the result
  const progressOf = (dir) => lines.filter((l) => l.dir === dir && l.msg.method === 'notifications/progress')
    .map((l) => l.msg.params.progress);
  assert.deepEqual(progressOf('out'), [1, 2]);
  assert.deepEqual(progressOf('from-backend'), [1, 2]);   // as the backend sent them, with its token
  const r = spawnSync(CHAIN, ['replay', rec], { encoding: 'utf8', input: [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'everything__trigger-long-running-operation',
      arguments: { duration: 1, steps: 2 }, _meta: { progressToken: 'tok' } } },
  ].map((m) => JSON.stringify(m)).join('\n') + '\n' });
  const out = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(out.slice(1).map((m) => m.method ? [m.params.progressToken, m.params.progress] : m.id),
    [['tok', 1], ['tok', 2], 2]);
  assert.match(out[3].result.content[0].text, /Long running operation completed/);
});

test('--record redacts secrets as the log module does; replay matches redacted values', TE, async () => {
  const rec = tmpPath(`cli-rec-secret-${process.pid}.jsonl`);
  const cfg = twoServers({ middleware: [{ use: 'log', sink: 'file', path: tmpPath(`cli-audit-${process.pid}.jsonl`),
    redact: { patterns: ['s3cret-[a-z]+'] } }] });
  const msgs = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 's3cret-value' } } },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'everything__get-sum', arguments: { a: 1, b: 2, password: 'hunter2' } } },
  ];
  const child = spawn(CHAIN, ['--config', cfg, '--record', rec], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  for (const m of msgs) child.stdin.write(JSON.stringify(m) + '\n');
  await waitFor(() => out.split('\n').filter(Boolean).length >= 3, { timeoutMs: 15000, what: 'answers' });
  child.stdin.end();
  assert.equal(await new Promise((r) => child.on('exit', (c) => r(c))), 0);
  assert.match(out, /Echo: s3cret-value/);  // the client sees the real answer
  const text = readFileSync(rec, 'utf8');
  assert.doesNotMatch(text, /s3cret|hunter2/);
  assert.match(text, /\[REDACTED\]/);
  // the redacted request still finds its answer in replay
  const r = spawnSync(CHAIN, ['replay', rec], { encoding: 'utf8', input: [
    msgs[0], { ...msgs[3], id: 'x', params: { ...msgs[3].params, arguments: { a: 1, b: 2, password: 'other' } } },
    { jsonrpc: '2.0', id: 'y', method: 'tools/call', params: { name: 'everything__get-sum', arguments: { a: 5, b: 5 } } },
  ].map((m) => JSON.stringify(m)).join('\n') + '\n' });
  const answers = new Map(r.stdout.trim().split('\n').map((l) => JSON.parse(l)).map((m) => [m.id, m]));
  assert.equal(answers.get('x').result.content[0].text, 'The sum of 1 and 2 is 3.');
  assert.match(answers.get('y').error.message, /replay: nothing recorded for tools\/call/);
});

test('replay: a file that is not a recording is refused with the line', TE, () => {
  const bad = tmpPath(`cli-rec-bad-${process.pid}.jsonl`);
  writeFileSync(bad, '{"t":"x","dir":"in","msg":{}}\nnot json\n');
  const r = run(['replay', bad], { input: '' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /:2: not a recording line/);
});
