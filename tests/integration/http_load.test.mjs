// `mcp-chain --listen` under many sessions, and a third-party client:
// 120 SDK sessions at once, each initializing, listing and calling, all
// answered, every session ended, memory flat from one round to the next
// (read after each round, compared as medians of three rounds);
// the MCP Inspector CLI (@modelcontextprotocol/inspector-cli 1.0.3) on
// Streamable HTTP and on HTTP+SSE: tools/list and tools/call.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { HERE, SKIP_NO_FIXTURE, DEFAULT_CLIENT_INFO, fixtureServer, sleep, waitFor } from './lib.mjs';
import { withChain } from './http_lib.mjs';

const SESSIONS = 120;

/** Resident memory of PID in kB. */
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

/** One round: SESSIONS clients open at once (all initialized and listed before
 * any calls), each then calls twice, then every session is DELETEd. */
async function round(url, tag) {
  const sessions = await Promise.all(Array.from({ length: SESSIONS }, async () => {
    const transport = new StreamableHTTPClientTransport(url);
    const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
    await client.connect(transport);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    return { transport, client, tools, sid: transport.sessionId };
  }));
  assert.equal(new Set(sessions.map((r) => r.sid)).size, SESSIONS, 'a session each, all open now');
  await Promise.all(sessions.map(async (r, i) => {
    const [echo, slow] = await Promise.all([
      r.client.callTool({ name: 'echo', arguments: { tag, i } }),
      r.client.callTool({ name: 'slow', arguments: { ms: 20, steps: 1 } }),
    ]);
    assert.ok(r.tools.includes('echo'), 'listed');
    assert.deepEqual(JSON.parse(echo.content[0].text).params.arguments, { tag, i }, 'its own answer');
    assert.equal(slow.content[0].text, 'done');
  }));
  await Promise.all(sessions.map(async (r) => {
    await r.transport.terminateSession();
    await r.client.close();
  }));
}

test(`${SESSIONS} concurrent HTTP sessions: all answered, all ended, memory flat across rounds`,
  { timeout: 240_000, skip: SKIP_NO_FIXTURE }, async () => {
    // an SDK client closes a call's SSE stream once it has the result, before the stream's
    // end: such a stream is kept resumeGraceMs for a resume; RSS is read after that grace
    const grace = 1000;
    const extra = { listen: { maxConnections: 1024, resumeGraceMs: grace } };
    // ASan's quarantine keeps freed memory resident: off, so RSS shows what we hold
    await withChain({ ...fixtureServer(), scope: 'shared' }, { extra, env: { ASAN_OPTIONS: 'quarantine_size_mb=0:detect_leaks=1' } }, async (chain) => {
      const ended = () => (chain.stderr.match(/http: session #\d+ ended \(deleted by the client\)/g) ?? []).length;
      // the allocator settles over the first rounds (seen under ASan: +9 MB over four
      // rounds, then +0.1 MB over the next four): four rounds to warm up
      for (let k = 0; k < 4; k++) {
        await round(chain.url, `warm-up-${k}`);
        await waitFor(() => ended() === (k + 1) * SESSIONS, { timeoutMs: 20_000, what: 'every session of the round to end' });
      }
      // then RSS after each of eight more rounds: the median of the last three against the
      // median of the first three, so that one low or high reading (the allocator giving
      // pages back, or not yet) does not decide; a leak grows it round after round
      const rss = [];
      for (let k = 0; k < 8; k++) {
        await round(chain.url, `round-${k}`);
        await waitFor(() => ended() === (5 + k) * SESSIONS, { timeoutMs: 20_000, what: 'every session of the round to end' });
        await sleep(grace + 200);
        rss.push(rssKb(chain.proc.pid));
      }
      const median = (xs) => [...xs].sort((a, b) => a - b)[1];
      const early = median(rss.slice(0, 3)), late = median(rss.slice(5));
      console.log(`mcp-chain RSS after each round from the 5th (kB): ${rss.join(' ')}`);
      assert.ok(late - early < Math.max(4096, early * 0.05),
        `memory stays bounded: ${early} kB -> ${late} kB (medians of three rounds, ${5 * SESSIONS} sessions apart)`);
    });
  });

// inspector-cli 1.0.3 imports "../package.json" if that path exists relative
// to the working directory (and resolves it relative to its own file): run it
// from a directory with a package.json one level up, as in a checkout of it.
const INSPECTOR = path.join(HERE, 'node_modules', '.bin', 'mcp-inspector-cli');

/** Runs the inspector CLI with ARGS; resolves its parsed JSON output. */
function inspector(args) {
  return new Promise((resolve, reject) => {
    execFile(INSPECTOR, ['--cli', ...args], { cwd: path.join(HERE, 'fixtures'), timeout: 60_000 }, (err, stdout, stderr) => {
      const at = stdout.indexOf('{');
      if (err || at < 0) reject(new Error(`inspector-cli ${args.join(' ')}: ${err?.message}\n${stdout}\n${stderr}`));
      else resolve(JSON.parse(stdout.slice(at)));
    });
  });
}

test('the MCP Inspector CLI against --listen: tools/list and tools/call over Streamable HTTP and HTTP+SSE',
  { timeout: 120_000, skip: SKIP_NO_FIXTURE }, async () => {
    await withChain({ ...fixtureServer(), scope: 'shared' }, {}, async (chain) => {
      for (const [url, transport] of [[chain.url.href, 'http'], [`${chain.base}/sse`, 'sse']]) {
        const list = await inspector([url, '--transport', transport, '--method', 'tools/list']);
        assert.ok(list.tools.some((t) => t.name === 'echo'), `${transport}: tools/list`);
        const call = await inspector([url, '--transport', transport, '--method', 'tools/call',
          '--tool-name', 'echo', '--tool-arg', 'city=Paris', 'n=3']);
        const said = JSON.parse(call.content[0].text);
        assert.deepEqual(said.params.arguments, { city: 'Paris', n: 3 }, `${transport}: tools/call`);
      }
      assert.match(chain.stderr, /initialized \(inspector-cli/, 'the inspector initialized its sessions');
    });
  });
