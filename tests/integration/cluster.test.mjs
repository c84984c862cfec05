// Several mcp-chain instances as one service behind a load balancer: HAProxy
// 2.6 (deploy/haproxy.cfg, affinity learned from the Mcp-Session-Id of the
// initialize response) and nginx 1.22 (deploy/nginx.conf.in, affinity from
// the instance tag the id begins with). Each case runs through both, on
// three instances (tags a, b, c) and a redis-server (cluster_lib.mjs).
//
// Through each balancer: 100 SDK sessions with interleaved calls and
// progress; 2026-07-28 stateless calls spread over every instance;
// HAProxy's retry + redispatch and /readyz checks around a killed
// instance; nginx's tag routing, with backups for a dead instance's tag;
// kill -9 of an instance mid-run (its sessions continue elsewhere from
// their sealed ids, without a new initialize); a rolling restart under
// load (drainDelayMs, /readyz 503) with no failed call. Then what the
// instances share: a shared rate limit (N across three, Redis stopped and
// back), 2026-07-28 retries on other instances (forwarded to the holder of
// a bridged call; a 2026 backend's rounds anywhere; a replay refused), and
// a moved session's own initialize params and log level.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { DEFAULT_CLIENT_INFO, FIXTURE, SKIP_NO_FIXTURE, outcome, sleep, tmpPath, waitFor } from './lib.mjs';
import { request, within } from './http_lib.mjs';
import path from 'node:path';
import { SKIP_NO_HAPROXY, SKIP_NO_NGINX, SKIP_NO_REDIS, freePort, withCluster } from './cluster_lib.mjs';

const SESSIONS = 100;
const SERVER2026 = path.join(import.meta.dirname, 'fixtures', 'server2026.mjs');
const BATCH = 20;
const TAGGED = /^([A-Za-z0-9_-]+)\./;
const JSON_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

const BALANCERS = [
  { name: 'haproxy', skip: SKIP_NO_HAPROXY, start: (c) => c.startHaproxy(), learns: true },
  { name: 'nginx', skip: SKIP_NO_NGINX, start: (c) => c.startNginx(), learns: false },
];

let nconfig = 0;
/**
 * The instances' configuration, in the shape of config/cluster.json (which
 * names a real backend): the fixture server as a child process, so
 * session-scoped (a process for each session); listen bounds raised for a
 * hundred sessions; "eras": "both" for the 2026-07-28 calls.
 */
function writeClusterConfig(redisPort, ports, extra = {}) {
  // the key list every instance shares (one key: 64 hex digits), mode 600
  const keyFile = tmpPath(`cluster-keys-${process.pid}-${nconfig + 1}`);
  writeFileSync(keyFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const cfg = {
    mcpServers: { fixture: { command: FIXTURE, args: [] } },
    eras: 'both',
    listen: {
      // HAProxy passes the client's Host (127.0.0.1:<its port>) on
      allowedHosts: ['127.0.0.1', 'localhost'],
      maxConnections: 1024,
      maxScopedSessions: 256,
      maxProcesses: 512,
      maxStartsPerSecond: 1000,
      drainDelayMs: 5000,
    },
    cluster: { instance: '${MCP_CHAIN_INSTANCE}', keyFile,
      instances: Object.fromEntries(Object.entries(ports).map(([t, p]) => [t, `http://127.0.0.1:${p}`])) },
    redis: { host: '127.0.0.1', port: redisPort, timeoutMs: 2000 },
    ...extra,
  };
  const file = tmpPath(`cluster-${process.pid}-${++nconfig}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** Runs FN(cluster, lb) on redis, instances a, b, c and balancer B. */
function withService(b, fn, extra) {
  return withCluster(async (c) => {
    await c.startRedis();
    const tags = ['a', 'b', 'c'];
    const ports = {};
    for (const t of tags) ports[t] = await freePort();
    await c.startInstances({ config: writeClusterConfig(c.redis.port, ports, extra), tags, ports });
    const lb = await b.start(c);
    return fn(c, lb);
  });
}

/** An SDK client session through URL. */
async function openClient(url) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client(DEFAULT_CLIENT_INFO, { capabilities: {} });
  await client.connect(transport);
  return { client, transport, sid: transport.sessionId };
}

/** Runs FN over ITEMS, SIZE at a time. */
async function inBatches(items, size, fn) {
  const out = [];
  for (let k = 0; k < items.length; k += size) {
    out.push(...await Promise.all(items.slice(k, k + size).map((x, j) => fn(x, k + j))));
  }
  return out;
}

/** The value of METRIC (summed over its label sets matching LABEL) on an instance. */
async function metric(inst, name, label = '') {
  const r = await request(inst.port, { method: 'GET', path: '/metrics', headers: { Host: 'localhost' } });
  assert.equal(r.status, 200, r.body);
  let sum = 0;
  for (const line of r.body.split('\n')) {
    if (line.startsWith(name) && (line[name.length] === ' ' || line[name.length] === '{') && line.includes(label)) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/**
 * Three interleaved calls of session I: two echoes and a slow call with
 * 1..4 progress steps (the count, and the total each notification carries,
 * differ between neighbouring sessions: progress routed to the wrong
 * session shows). Asserts every answer and every progress notification.
 */
async function exercise(s, i) {
  const steps = 1 + (i % 4);
  const progress = [];
  const [e1, slow, e2] = await Promise.all([
    s.client.callTool({ name: 'echo', arguments: { session: i, call: 1 } }),
    // the last progress comes at ms * (steps - 1) / steps: >= 100 ms before the result (the SDK
    // drops progress read in one chunk with its response; see MCP-NOTES "fields dropped")
    s.client.callTool({ name: 'slow', arguments: { ms: 400, steps } }, undefined,
      { onprogress: (p) => progress.push(p) }),
    s.client.callTool({ name: 'echo', arguments: { session: i, call: 2 } }),
  ]);
  assert.deepEqual(JSON.parse(e1.content[0].text).params.arguments, { session: i, call: 1 }, `session ${i}: its own echo`);
  assert.deepEqual(JSON.parse(e2.content[0].text).params.arguments, { session: i, call: 2 }, `session ${i}: its own echo`);
  assert.equal(slow.content[0].text, 'done', `session ${i}: slow`);
  assert.equal(progress.length, steps, `session ${i}: its ${steps} progress notifications: ${JSON.stringify(progress)}`);
  for (const p of progress) assert.equal(p.total, steps, `session ${i}: only its own progress: ${JSON.stringify(p)}`);
  assert.equal(s.transport.sessionId, s.sid, 'the session id never changes');
}

/** A raw initialize through LB; resolves the session id it issued. */
async function rawSessionId(lb) {
  const r = await request(lb.port, { headers: { ...JSON_HEADERS, Accept: 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tag-probe', version: '1' } } }) });
  assert.equal(r.status, 200, r.body);
  return r.headers['mcp-session-id'];
}

/** Ends the sessions of S (DELETE through the balancer), then closes their clients. */
async function closeAll(sessions) {
  await inBatches(sessions, BATCH, async (s) => {
    await s.transport.terminateSession().catch(() => {});
    await s.client.close();
  });
}

for (const b of BALANCERS) {
  const skip = SKIP_NO_FIXTURE || SKIP_NO_REDIS || b.skip;

  describe(`through ${b.name}`, () => {
    test(`[${b.name}] ${SESSIONS} SDK sessions, 3 interleaved calls each with progress: every answer right, progress to its own session`,
      { timeout: 120_000, skip }, async (t) => {
        await withService(b, async (c, lb) => {
          // nginx routes on the tag the id begins with (HAProxy learns the id)
          assert.match(await rawSessionId(lb), TAGGED, 'session ids carry their instance tag');
          const sessions = await inBatches(Array.from({ length: SESSIONS }), BATCH, () => openClient(lb.url));
          assert.equal(new Set(sessions.map((s) => s.sid)).size, SESSIONS, 'a session id each');
          // interleave: each batch takes sessions from all over the list
          const order = sessions.map((s, i) => [s, i]).sort((x, y) => (x[1] % BATCH) - (y[1] % BATCH) || x[1] - y[1]);
          await inBatches(order, BATCH, ([s, i]) => within(exercise(s, i), `session ${i}'s calls`, 30_000));
          // and once more, every session's tools/list on the instance that holds it
          const lists = await inBatches(sessions, BATCH, async (s) => (await s.client.listTools()).tools.map((x) => x.name).sort());
          for (const l of lists) assert.deepEqual(l, lists[0], 'the same tools in every session');
          const started = await Promise.all([...c.instances.values()].map((i) => metric(i, 'mcp_chain_http_sessions_started_total')));
          console.log(`[${b.name}] sessions started per instance: ${started.join(' ')}`);
          assert.ok(started.filter((n) => n > 0).length >= 2, `sessions spread over the instances: ${started}`);
          assert.ok(started.reduce((x, y) => x + y) >= SESSIONS);
          await closeAll(sessions);
        });
      });

    test(`[${b.name}] 2026-07-28 clients: stateless POSTs spread over every instance, all answered`,
      { timeout: 60_000, skip }, async () => {
        await withService(b, async (c, lb) => {
          const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
          const instances = [...c.instances.values()];
          const before = await Promise.all(instances.map((i) => metric(i, 'mcp_chain_http_request_duration_seconds_count', 'tools/call')));
          const N = 90;
          await inBatches(Array.from({ length: N }), 10, async (_, k) => {
            const res = await fetch(lb.url, { method: 'POST', headers: { ...JSON_HEADERS,
              'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' },
            body: JSON.stringify({ jsonrpc: '2.0', id: k, method: 'tools/call',
              params: { name: 'echo', arguments: { k }, _meta: meta } }) });
            const text = await res.text();
            assert.equal(res.status, 200, text);
            assert.equal(res.headers.get('mcp-session-id'), null, 'no session in this era');
            const body = res.headers.get('content-type').startsWith('text/event-stream')
              ? JSON.parse(text.split('\n').filter((l) => l.startsWith('data: ') && l.length > 6).pop().slice(6))
              : JSON.parse(text);
            assert.equal(body.id, k);
            assert.equal(body.result.resultType, 'complete', text);
            assert.deepEqual(JSON.parse(body.result.content[0].text).params.arguments, { k });
          });
          const after = await Promise.all(instances.map((i) => metric(i, 'mcp_chain_http_request_duration_seconds_count', 'tools/call')));
          const served = after.map((n, i) => n - before[i]);
          console.log(`[${b.name}] 2026-07-28 calls per instance: ${served.join(' ')}`);
          assert.equal(served.reduce((x, y) => x + y), N, 'each call reached exactly one instance');
          assert.ok(served.every((n) => n > 0), `every instance served some: ${served}`);
        });
      });

    if (b.name === 'haproxy') {
      test('[haproxy] a killed instance: new sessions go elsewhere at once (retry + redispatch), /readyz checks take it out and bring it back',
        { timeout: 60_000, skip }, async () => {
          await withService(b, async (c, lb) => {
            await c.kill9('b');
            // before any check noticed: a connection refused is retried on another server
            const first = await inBatches(Array.from({ length: 9 }), 9, () => openClient(lb.url));
            await inBatches(first, 9, (s, i) => exercise(s, i));
            await waitFor(() => /Server mcp_chain\/b is DOWN/.test(lb.log), { timeoutMs: 10_000, what: 'HAProxy to mark b down' });
            await c.restart('b');
            await waitFor(() => /Server mcp_chain\/b is UP, reason: Layer7 check passed, code: 200/.test(lb.log),
              { timeoutMs: 15_000, what: 'HAProxy to bring b back after GET /readyz answered 200' });
            // leastconn: b, holding no connection, gets new sessions again
            const again = await inBatches(Array.from({ length: 9 }), 9, () => openClient(lb.url));
            await inBatches(again, 9, (s, i) => exercise(s, i));
            assert.ok(await metric(c.instance('b'), 'mcp_chain_http_sessions_started_total') > 0, 'b takes sessions again');
            await closeAll([...first, ...again]);
          });
        });
    }

    if (b.name === 'nginx') {
      test('[nginx] the instance tag of Mcp-Session-Id picks the upstream; a dead instance\'s tag falls to a backup',
        { timeout: 60_000, skip }, async () => {
          await withService(b, async (c, lb) => {
            const addr = (t) => c.instance(t).addr;
            const probe = async (sid) => {
              const before = lb.accessLog().length;
              const r = await request(lb.port, { headers: { ...JSON_HEADERS, 'Mcp-Session-Id': sid },
                body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
              let line;
              await waitFor(() => (line = lb.accessLog().slice(before).trim()), { what: 'the access log line' });
              return { status: r.status, upstream: / upstream=(.*?) upstream_status=/.exec(line)[1], line };
            };
            // ids nobody issued: the instance the tag names answers 404 (unknown session)
            for (const t of ['a', 'b', 'c']) {
              const r = await probe(`${t}.not-a-session-${t}`);
              assert.deepEqual([r.status, r.upstream], [404, addr(t)], r.line);
            }
            // no tag, or a tag no upstream has: all instances, round-robin
            const spread = new Set();
            for (const sid of ['0123456789abcdef0123456789abcdef', 'zz.unknown-tag', 'x', 'y', 'z', 'w']) {
              const r = await probe(sid);
              assert.equal(r.status, 404, r.line);
              spread.add(r.upstream);
            }
            assert.equal(spread.size, 3, `untagged ids go to every instance: ${[...spread]}`);
            // a dead instance: its tag's requests reach a backup (not 502)
            await c.kill9('a');
            const r = await probe('a.after-kill');
            assert.equal(r.status, 404, r.line);
            const tried = r.upstream.split(', ');
            assert.equal(tried[0], addr('a'), `a first: ${r.line}`);
            assert.ok([addr('b'), addr('c')].includes(tried.at(-1)), `then a backup: ${r.line}`);
          });
        });
    }

    test(`[${b.name}] kill -9 of one instance mid-run: its sessions go on elsewhere without a new initialize`,
      { timeout: 120_000, skip }, async () => {
        await withService(b, async (c, lb) => {
          const sessions = await inBatches(Array.from({ length: 30 }), 10, () => openClient(lb.url));
          const tools = await Promise.all(sessions.map(async (s) => (await s.client.listTools()).tools.map((x) => x.name).sort()));
          const tagOf = (s) => TAGGED.exec(s.sid)?.[1];
          assert.ok(sessions.every(tagOf), 'sealed ids carry their instance tag');
          const victim = tagOf(sessions[0]);
          const onVictim = sessions.filter((s) => tagOf(s) === victim);
          assert.ok(onVictim.length > 0 && onVictim.length < sessions.length, 'sessions on the victim and elsewhere');
          // a call in flight in every session, then the victim dies
          const inflight = sessions.map((s, i) => outcome(() =>
            s.client.callTool({ name: 'slow', arguments: { ms: 1500, steps: 0 } }).then((r) => r.content[0].text)));
          await sleep(300);
          await c.kill9(victim);
          const results = await within(Promise.all(inflight), 'the calls in flight to end', 30_000);
          sessions.forEach((s, i) => {
            const r = results[i];
            if (tagOf(s) !== victim) assert.deepEqual(r, { ok: true, value: 'done' }, `session ${i} elsewhere: unaffected`);
            // on the victim: an error, or (nginx resends a POST whose connection failed:
            // non_idempotent) the right answer from the instance that took over
            else assert.ok(!r.ok || r.value === 'done', `session ${i} on the victim: ${JSON.stringify(r)}`);
          });
          assert.ok(results.some((r, i) => tagOf(sessions[i]) === victim && !r.ok) || b.name === 'nginx',
            'HAProxy does not resend a call that reached the dead instance');
          // every later call of every session succeeds, same session, same tools
          await inBatches(sessions, 10, async (s, i) => {
            const e = await s.client.callTool({ name: 'echo', arguments: { after: i } });
            assert.deepEqual(JSON.parse(e.content[0].text).params.arguments, { after: i });
            assert.equal(s.transport.sessionId, s.sid, 'no new initialize');
            assert.deepEqual((await s.client.listTools()).tools.map((x) => x.name).sort(), tools[i]);
          });
          const survivors = [...c.instances.values()].filter((i) => i.tag !== victim);
          assert.ok(survivors.some((i) => /session/.test(i.p.log)), 'the survivors took the sessions over');
          await closeAll(sessions);
        });
      });

    test(`[${b.name}] rolling restart under load (SIGTERM each instance in turn, start it again): 0 failed calls`,
      { timeout: 180_000, skip }, async () => {
        await withService(b, async (c, lb) => {
          const sessions = await inBatches(Array.from({ length: 20 }), 10, () => openClient(lb.url));
          let stop = false;
          let calls = 0;
          const failures = [];
          const load = sessions.map(async (s, i) => {
            for (let n = 0; !stop; n++) {
              try {
                const e = await s.client.callTool({ name: 'echo', arguments: { i, n } });
                assert.deepEqual(JSON.parse(e.content[0].text).params.arguments, { i, n });
                assert.equal(s.transport.sessionId, s.sid);
                calls++;
              } catch (err) {
                failures.push(`session ${i} call ${n}: ${err.message}`);
                await sleep(50);   // a broken session does not spin
              }
            }
          });
          for (const tag of ['a', 'b', 'c']) {
            await sleep(1000);
            // SIGTERM: /readyz turns 503 (HAProxy's check takes the instance out,
            // nginx sees refused connections), open requests finish, then it exits
            const r = await c.stopInstance(tag, { graceMs: 30_000 });
            assert.equal(r.code, 0, `instance ${tag} drained and exited 0: ${JSON.stringify(r)}`);
            const inst = await c.restart(tag);
            await waitFor(async () => (await request(inst.port, { method: 'GET', path: '/readyz',
              headers: { Host: 'localhost' } }).catch(() => ({}))).status === 200,
            { timeoutMs: 10_000, what: `instance ${tag} ready again` });
            // HAProxy: rise 2 x inter 2s before it is back in; nginx: fail_timeout 5s
            await sleep(5000);
          }
          stop = true;
          await within(Promise.all(load), 'the load to stop', 30_000);
          assert.equal(failures.length, 0, `no call failed; of ${calls + failures.length}, ${failures.length} failed:\n${failures.slice(0, 10).join('\n')}`);
          assert.ok(calls > 100, `calls made: ${calls}`);
          await closeAll(sessions);
        });
      });
  });
}

// What several instances must agree on: HAProxy in front, the instances
// addressed directly where a case needs a request to land elsewhere.
describe('shared state across instances', () => {
  const skip = SKIP_NO_FIXTURE || SKIP_NO_REDIS || SKIP_NO_HAPROXY;
  const haproxy = BALANCERS[0];

  test('a shared rate limit holds across the three instances (N, not 3N); Redis stopped: fails open as configured, no stall; back: enforced again',
    { timeout: 120_000, skip }, async () => {
      const N = 6;
      const extra = { middleware: [{ use: 'limit', rules: [{ methods: ['tools/call'], per: 'client',
        rate: 0.001, burst: N, shared: true, onStoreDown: 'open' }] }] };
      await withService(haproxy, async (c) => {
        // one client name, a session on each instance, calls spread over them
        const insts = [...c.instances.values()];
        const sessions = await Promise.all(insts.map((i) => openClient(i.url)));
        const results = [];
        for (let k = 0; k < 3 * N; k++) {
          results.push(await outcome(() => sessions[k % 3].client.callTool({ name: 'echo', arguments: { k } })));
        }
        const passed = results.filter((r) => r.ok).length;
        assert.equal(passed, N, `${N} calls pass across the instances, the rest are refused: ${JSON.stringify(results.map((r) => r.ok ? 'ok' : r.code))}`);
        const refused = results.find((r) => !r.ok);
        assert.equal(refused.code, -32012, refused.message);
        assert.match(refused.message, /across instances/);
        // Redis gone: the rule fails open, at once (no stall), and it is counted
        await c.stopRedis();
        const t0 = Date.now();
        for (let k = 0; k < 3; k++) {
          const r = await sessions[k].client.callTool({ name: 'echo', arguments: { down: k } });
          assert.deepEqual(JSON.parse(r.content[0].text).params.arguments, { down: k });
        }
        assert.ok(Date.now() - t0 < 5000, `calls while Redis is down do not stall: ${Date.now() - t0} ms`);
        const m = await request(insts[0].port, { method: 'GET', path: '/metrics', headers: { Host: 'localhost' } });
        assert.match(m.body, /^mcp_chain_redis_up 0$/m);
        assert.match(m.body, /mcp_chain_redis_fallbacks_total\{use="limit",outcome="open"\} [1-9]/);
        // back: the bucket is new (Redis kept nothing), and enforced again across instances
        await c.startRedis(c.redis.port);
        await waitFor(async () => /^mcp_chain_redis_up 1$/m.test((await request(insts[1].port, { method: 'GET',
          path: '/metrics', headers: { Host: 'localhost' } })).body), { timeoutMs: 15_000, what: 'the store back up' });
        await waitFor(async () => /^mcp_chain_redis_up 1$/m.test((await request(insts[2].port, { method: 'GET',
          path: '/metrics', headers: { Host: 'localhost' } })).body) && /^mcp_chain_redis_up 1$/m.test((await request(insts[0].port, { method: 'GET',
          path: '/metrics', headers: { Host: 'localhost' } })).body), { timeoutMs: 15_000, what: 'the store back up everywhere' });
        // every call that reached the store is counted again: N of them pass (what
        // passed beyond N would have gone on without the store, as /metrics counts)
        const fallbacks = async () => (await Promise.all(insts.map(async (i) => Number(/mcp_chain_redis_fallbacks_total\{use="limit",outcome="open"\} (\d+)/
          .exec((await request(i.port, { method: 'GET', path: '/metrics', headers: { Host: 'localhost' } })).body)?.[1] ?? 0)))).reduce((x, y) => x + y);
        const f0 = await fallbacks();
        const again = [];
        for (let k = 0; k < 2 * N; k++) again.push(await outcome(() => sessions[k % 3].client.callTool({ name: 'echo', arguments: { k } })));
        const open = await fallbacks() - f0;
        const passedAgain = again.filter((r) => r.ok).length;
        assert.ok(open < N, `most calls reached the store once it was back: ${open} went on without it`);
        assert.equal(passedAgain, N + open, `enforced again once Redis is back: ${passedAgain} passed, ${open} of them without the store`);
        assert.equal(again.filter((r) => !r.ok && r.code === -32012).length, N - open, 'the rest refused by the shared rule');
        await closeAll(sessions);
      }, extra);
    });

  test('2026-07-28: a call bridged to a handshake-era backend continues on whichever instance gets its retry (forwarded to the one holding it); a replayed requestState is refused on a third',
    { timeout: 60_000, skip }, async () => {
      await withService(haproxy, async (c) => {
        const [a, b, cc] = [...c.instances.values()];
        const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
        const post = (inst, id, params) => fetch(inst.url, { method: 'POST', headers: { ...JSON_HEADERS,
          Accept: 'application/json', 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'elicit' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }) }).then(async (r) => ({ status: r.status, body: await r.json() }));
        const first = await post(a, 1, { name: 'elicit', arguments: {}, _meta: meta });
        assert.equal(first.status, 200, JSON.stringify(first.body));
        const round = first.body.result;
        assert.equal(round.resultType, 'input_required', JSON.stringify(round));
        const key = Object.keys(round.inputRequests)[0];
        const retry = { name: 'elicit', arguments: {}, _meta: meta, requestState: round.requestState,
          inputResponses: { [key]: { action: 'accept', content: { name: 'Ada' } } } };
        // the retry reaches instance b: forwarded to a, which holds the call
        const done = await post(b, 2, retry);
        assert.equal(done.status, 200, JSON.stringify(done.body));
        assert.equal(done.body.result?.resultType, 'complete', JSON.stringify(done.body));
        assert.match(JSON.stringify(done.body.result), /Ada|accept/);
        assert.match(c.instanceLog('a') + c.instanceLog('b'), /session|stateless|forward/);
        // the same requestState again, on c: refused (accepted once, on any instance)
        const replay = await post(cc, 3, retry);
        assert.ok(replay.body.error, JSON.stringify(replay.body));
        assert.match(replay.body.error.message, /requestState refused/);
        // a forged one: refused everywhere, not forwarded
        const forged = await post(b, 4, { ...retry, requestState: round.requestState.slice(0, -1) + (round.requestState.endsWith('0') ? '1' : '0') });
        assert.ok(forged.body.error, JSON.stringify(forged.body));
        assert.match(forged.body.error.message, /requestState refused/);
      });
    });

  test('2026-07-28: a 2026-era backend\'s multi-round call goes on across instances (its requestState passes through, each round on another instance)',
    { timeout: 60_000, skip }, async () => {
      const extra = { mcpServers: { s26: { command: process.execPath, args: [SERVER2026] } } };
      await withService(haproxy, async (c) => {
        const insts = [...c.instances.values()];
        const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
        const post = (inst, id, params) => fetch(inst.url, { method: 'POST', headers: { ...JSON_HEADERS,
          Accept: 'application/json', 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'ask' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }) }).then(async (r) => ({ status: r.status, body: await r.json() }));
        let res = await post(insts[0], 1, { name: 'ask', arguments: { rounds: 2 }, _meta: meta });
        const names = ['Ada', 'Bea'];
        for (let round = 0; round < 2; round++) {
          assert.equal(res.body.result?.resultType, 'input_required', JSON.stringify(res.body));
          const key = Object.keys(res.body.result.inputRequests)[0];
          res = await post(insts[round + 1], round + 2, { name: 'ask', arguments: { rounds: 2 }, _meta: meta,
            requestState: res.body.result.requestState,
            inputResponses: { [key]: { action: 'accept', content: { name: names[round] } } } });
        }
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.result.content[0].text, 'hello Ada,Bea (2 rounds)');
      }, extra);
    });

  test('a session moved to another instance is initialized there with its client\'s own params and gets back its log level (from Redis); a DELETE is refused everywhere after',
    { timeout: 60_000, skip }, async () => {
      await withService(haproxy, async (c) => {
        const [a, b, cc] = [...c.instances.values()];
        const h = { ...JSON_HEADERS, Accept: 'application/json', 'MCP-Protocol-Version': '2025-06-18' };
        const post = (inst, body, sid) => fetch(inst.url, { method: 'POST',
          headers: { ...h, ...(sid ? { 'Mcp-Session-Id': sid } : {}) }, body: JSON.stringify(body) })
          .then(async (r) => ({ status: r.status, sid: r.headers.get('mcp-session-id'), text: await r.text() }));
        const clientInfo = { name: 'moved-client', version: '7.1' };
        const init = await post(a, { jsonrpc: '2.0', id: 0, method: 'initialize', params: {
          protocolVersion: '2025-06-18', capabilities: { roots: {} }, clientInfo } });
        assert.equal(init.status, 200, init.text);
        const sid = init.sid;
        assert.match(sid, /^a\./, 'the id begins with the instance tag');
        assert.equal((await post(a, { jsonrpc: '2.0', method: 'notifications/initialized' }, sid)).status, 202);
        const lvl = await post(a, { jsonrpc: '2.0', id: 1, method: 'logging/setLevel', params: { level: 'debug' } }, sid);
        assert.equal(lvl.status, 200, lvl.text);
        await c.kill9('a');
        // on b: no initialize from the client; its backend got the client's own params
        const r = await post(b, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'init_params', arguments: {} } }, sid);
        assert.equal(r.status, 200, r.text);
        const got = JSON.parse(JSON.parse(r.text).result.content[0].text);
        assert.deepEqual(got.clientInfo, clientInfo);
        assert.deepEqual(got.capabilities.roots, {});
        // its log level asked again of b's backend: the fixture's answer to it is a log message
        const ac = new AbortController();
        const get = await fetch(b.url, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid,
          'MCP-Protocol-Version': '2025-06-18' }, signal: ac.signal });
        assert.equal(get.status, 200);
        let seen = '';
        const reader = get.body.getReader();
        await within((async () => {
          while (!/log level set to debug/.test(seen)) {
            const { value, done } = await reader.read();
            if (done) break;
            seen += new TextDecoder().decode(value);
          }
        })(), 'the log level asked again on b', 10_000);
        ac.abort();
        assert.match(seen, /log level set to debug/);
        // DELETE on b; then c (which never held it) refuses it: 404
        const del = await fetch(b.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' } });
        assert.equal(del.status, 200);
        await waitFor(async () => (await post(cc, { jsonrpc: '2.0', id: 3, method: 'ping' }, sid)).status === 404,
          { timeoutMs: 5000, what: 'the deleted session refused on c' });
        // a forged id: 404 everywhere
        const forged = sid.slice(0, -2) + (sid.endsWith('AA') ? 'BB' : 'AA');
        assert.equal((await post(cc, { jsonrpc: '2.0', id: 4, method: 'ping' }, forged)).status, 404);
      });
    });
});
