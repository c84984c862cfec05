// Helpers for the tests that drive `mcp-chain --listen` (HTTP+SSE,
// conformance, auth, load): start a chain on a free port, raw requests,
// an open SSE stream read event by event.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import { CHAIN, sleep, waitFor, writeConfig, descendants, isAlive, killAll } from './lib.mjs';

/** mcp-chain --listen 127.0.0.1:0 on SERVER (a lib.mjs server, or CONFIG: a
 * file); LISTEN null: no HTTP front; FLOW: --flow FLOW too (chain.flowUrl,
 * and chain.flowHash when mcp-chain made its certificate). */
export async function startChain(server, { extra, config, listen = '127.0.0.1:0', flow, env, args = [] } = {}) {
  const file = config ?? writeConfig(server, { extra });
  const fronts = [...(listen ? ['--listen', listen] : []), ...(flow ? ['--flow', flow] : [])];
  const proc = spawn(CHAIN, ['--config', file, ...fronts, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: env ? { ...process.env, ...env } : undefined,
  });
  const chain = { proc, stderr: '', port: 0 };
  proc.stderr.on('data', (c) => {
    chain.stderr += c;
    if (process.env.IT_VERBOSE) process.stderr.write(c);
  });
  chain.exited = new Promise((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  const re = listen ? /listening on http:\/\/127\.0\.0\.1:(\d+)\// : /serving MCP-Flow/;
  const flowRe = /serving MCP-Flow \(WebTransport\) on (https:\/\/\S+)/;
  await waitFor(() => (re.test(chain.stderr) && (!flow || flowRe.test(chain.stderr))) || proc.exitCode !== null,
    { timeoutMs: 10_000, what: 'mcp-chain to listen' });
  const m = re.exec(chain.stderr);
  assert.ok(m, `mcp-chain did not listen:\n${chain.stderr}`);
  if (listen) {
    chain.port = Number(m[1]);
    chain.base = `http://127.0.0.1:${chain.port}`;
    chain.url = new URL(`${chain.base}/mcp`);
  }
  if (flow) {
    chain.flowUrl = flowRe.exec(chain.stderr)?.[1];
    chain.flowHash = /\(hex ([0-9a-f]{64})\)/.exec(chain.stderr)?.[1];
  }
  chain.stop = async () => {
    const tree = [proc.pid, ...descendants(proc.pid)];
    proc.kill('SIGTERM');
    let timer;
    const r = await Promise.race([chain.exited, new Promise((res) => { timer = setTimeout(res, 5000, null); })]);
    clearTimeout(timer);   // a pending 5 s timer would keep the test file's process alive
    if (!r) proc.kill('SIGKILL');
    await sleep(50);
    killAll(tree.filter(isAlive));
    return r;
  };
  return chain;
}

/** PROMISE, or a failure naming WHAT after MS: a stream that never ends
 * fails its test instead of holding it (and its processes) open. */
export function within(promise, what, ms = 15_000) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The command line of PID as one string, or ''. */
export function cmdline(pid) {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' '); } catch { return ''; }
}

/** Pids under CHAIN whose command line matches RE, sorted; each is recorded
 * in chain.seen (withCheckedChain checks none of them is left at the end). */
export function processesUnder(chain, re) {
  const pids = descendants(chain.proc.pid).filter((p) => re.test(cmdline(p)));
  for (const p of pids) chain.seen?.add(p);
  return pids.sort((x, y) => x - y);
}

/**
 * Runs FN with a chain from startChain(SERVER, OPTS); its result is FN's.
 * FN may send the SIGTERM itself; otherwise it is sent after FN. When FN
 * passed, demands: exit 0 within EXIT_MS (SIGKILL after it), no sanitizer
 * report, and no process left of those mcp-chain started — its descendants
 * at the end and every one recorded during FN in chain.seen (by
 * processesUnder, or by chain.remember(), which records them all). When FN
 * failed, only cleans up: its own failure says more.
 */
export async function withCheckedChain(server, opts, fn, { exitMs = 10_000 } = {}) {
  const chain = await startChain(server, opts);
  chain.seen = new Set();
  chain.remember = () => { for (const p of descendants(chain.proc.pid)) chain.seen.add(p); };
  let ok = false;
  try {
    const out = await fn(chain);
    ok = true;
    return out;
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    chain.remember();
    if (chain.proc.exitCode === null && chain.proc.signalCode === null) chain.proc.kill('SIGTERM');
    const r = await within(chain.exited, 'mcp-chain to exit', exitMs).catch(() => null);
    if (!r) chain.proc.kill('SIGKILL');
    await sleep(100);
    const left = [...chain.seen].filter(isAlive);
    killAll(left);
    if (ok) {
      assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}\n${chain.stderr.slice(-2000)}`);
      assert.deepEqual(left, [], 'no process is left after mcp-chain exits');
      assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
    }
  }
}

/** Runs FN with a chain, always stops it (exit 0, no sanitizer report). */
export async function withChain(server, opts, fn) {
  const chain = await startChain(server, opts);
  try {
    return await fn(chain);
  } catch (e) {
    e.message += `\n--- mcp-chain stderr (tail) ---\n${chain.stderr.slice(-3000)}`;
    throw e;
  } finally {
    const r = await chain.stop();
    assert.ok(r && r.code === 0, `mcp-chain exited ${JSON.stringify(r)}\n${chain.stderr.slice(-2000)}`);
    assert.doesNotMatch(chain.stderr, /AddressSanitizer|runtime error|LeakSanitizer/);
  }
}

/** One raw HTTP request; resolves {status, headers, body}. */
export function request(port, { method = 'POST', path = '/mcp', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/**
 * A request whose response stays open (a GET stream, or a POST answered
 * with SSE): {status, headers, events, next(), close(), closed}.
 * events collects {event, data, id} (text: the body as it came); next(pred)
 * waits for one matching;
 * closed resolves when the response is over, with complete: true only if
 * it ended properly (the chunked terminator came), false if it was cut.
 */
export function openStream(port, { path = '/mcp', headers = {}, method = 'GET', body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const s = { status: res.statusCode, headers: res.headers, events: [], text: '', ended: false, complete: false, res, req };
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        s.text += c;
        buf += c;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = { event: 'message', data: '' , id: undefined };
          const data = [];
          for (const line of block.split('\n')) {
            const [k, ...v] = line.split(':');
            const val = v.join(':').replace(/^ /, '');
            if (k === 'event') ev.event = val;
            else if (k === 'data') data.push(val);
            else if (k === 'id') ev.id = val;
          }
          ev.data = data.join('\n');
          s.events.push(ev);
        }
      });
      s.closed = new Promise((done) => {
        res.on('end', () => { s.ended = true; s.complete = res.complete; });
        res.on('error', () => { s.ended = true; });
        res.on('close', () => { s.ended = true; done({ complete: s.complete }); });
      });
      s.next = async (pred, what = 'an event') => {
        let found;
        await waitFor(() => (found = s.events.find(pred)) || s.ended, { what });
        assert.ok(found, `stream ended before ${what}`);
        return found;
      };
      s.close = () => req.destroy();
      resolve(s);
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** JSON and SSE both accepted, as the SDK client sends. */
export const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

/**
 * A raw Streamable HTTP session on PORT, initialized (protocol 2025-06-18, client NAME),
 * with its GET stream open: {sid, h (headers for its POSTs), get (openStream's stream)}.
 */
export async function openSession(port, name = 'raw-client') {
  const init = await request(port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name, version: '1' } } }) });
  assert.equal(init.status, 200, init.body);
  const sid = init.headers['mcp-session-id'];
  const h = { ...JSON_HEADERS, 'Mcp-Session-Id': sid };
  assert.equal((await request(port, { headers: h,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).status, 202);
  const get = await openStream(port, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
  assert.equal(get.status, 200);
  return { sid, h, get };
}
