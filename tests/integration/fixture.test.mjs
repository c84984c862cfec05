// mcp-chain wrapping the C fixture server (tests/fixtures, `mcp-fixture-server`).
// The fixture's tools expose what the backend actually received, so these tests
// check what travels across mcp-chain in both directions.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  EmptyResultSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  DEFAULT_CLIENT_INFO, MODES, SKIP_NO_FIXTURE, TEST_TIMEOUT,
  compareModes, fixtureServer, outcome, sleep, waitFor, withClient, withRaw,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const CAPS = { sampling: {}, elicitation: {}, roots: { listChanged: true } };
const OPTS = { capabilities: CAPS };
const FX = (flags = []) => fixtureServer(flags);

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const jsonText = (r) => JSON.parse(text(r));
/** Tool result via a raw client.request so that every param is sent as given. */
const rawCall = (client, params, options) =>
  client.request({ method: 'tools/call', params }, CallToolResultSchema, options);

// ---------------------------------------------------------------------------

test('echo: params, _meta and unknown fields reach the backend untouched', T, async (t) => {
  const params = {
    name: 'echo',
    arguments: { n: 1, s: 'héllo ✓ \t "q" \\ \u2028', nested: { a: [1, 2.5, { b: null }], t: true }, big: 12345678901234 },
    _meta: { 'com.example/trace': { id: 'abc', depth: [1, { x: 'y' }] }, plain: 'meta value' },
    unknownTopLevelField: { keep: ['me', 1, false] },
  };
  await compareModes(t, FX(), OPTS, async (s) => {
    const res = await rawCall(s.client, params);
    const seen = res.structuredContent;
    assert.deepEqual(jsonText(res), seen, 'text and structuredContent carry the same request');
    assert.equal(seen.jsonrpc, '2.0');
    assert.equal(seen.method, 'tools/call');
    assert.deepEqual(seen.params, params, 'params (incl. _meta and unknown fields) arrive unchanged');
    const sent = s.wire.sent.find((r) => r.msg.method === 'tools/call');
    assert.deepEqual(Object.keys(seen).sort(), ['id', 'jsonrpc', 'method', 'params']);
    assert.ok(typeof seen.id === 'number' || typeof seen.id === 'string', 'backend got a valid id');
    if (s.mode !== 'direct') {
      // remapped per hop, but the response came back under the client's own id
      const resp = s.wire.received.find((r) => r.msg.id === sent.msg.id && r.msg.method === undefined);
      assert.ok(resp, 'response carries the client id');
    }
    return { params: seen.params, method: seen.method };
  });
});

test('echo: backend ids differ from client ids and map back (string, integer, concurrent)', T, async () => {
  await withRaw({ server: FX() }, async (c) => {
    await c.initialize('2025-06-18', 'init-x', CAPS);
    const ids = ['client-id-α', 'client-id-2', 987654321, 0, -7, 'zz'];
    ids.forEach((id, n) => c.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { n } } }));
    const got = new Map();
    for (let i = 0; i < ids.length; i++) {
      const m = await c.response();
      got.set(m.id, m);
    }
    const backendIds = new Set();
    ids.forEach((id, n) => {
      const m = got.get(id);
      assert.ok(m, `response for client id ${JSON.stringify(id)}`);
      const seen = m.result.structuredContent;
      assert.equal(seen.params.arguments.n, n, `response for id ${JSON.stringify(id)} is the answer to that request`);
      assert.notDeepEqual(seen.id, id, `backend id should be remapped (client ${JSON.stringify(id)}, backend ${JSON.stringify(seen.id)})`);
      backendIds.add(JSON.stringify(seen.id));
    });
    assert.equal(backendIds.size, ids.length, 'distinct backend ids for concurrent requests');
  });
});

test('300 concurrent calls: every response goes to the right caller', T, async (t) => {
  await compareModes(t, FX(), OPTS, async ({ client }) => {
    const N = 300;
    const rs = await Promise.all(Array.from({ length: N }, (_, i) =>
      client.callTool({ name: 'echo', arguments: { i, pad: 'p'.repeat(i) } })));
    rs.forEach((r, i) => {
      assert.equal(r.structuredContent.params.arguments.i, i);
      assert.equal(r.structuredContent.params.arguments.pad.length, i);
    });
    return rs.length;
  });
});

test('progress token is remapped to the backend and mapped back on notifications', T, async () => {
  await withRaw({ server: FX() }, async (c) => {
    await c.initialize('2025-06-18', 1, CAPS);
    c.send({ jsonrpc: '2.0', id: 'e1', method: 'tools/call', params: { name: 'echo', arguments: {}, _meta: { progressToken: 'tok-client-1', other: 1 } } });
    const echo = await c.response();
    const seenMeta = echo.result.structuredContent.params._meta;
    assert.equal(seenMeta.other, 1, 'other _meta keys untouched');
    assert.ok(seenMeta.progressToken !== undefined, 'backend got a progress token');
    assert.notDeepEqual(seenMeta.progressToken, 'tok-client-1', 'progress token remapped for the backend hop');
    c.send({ jsonrpc: '2.0', id: 's1', method: 'tools/call', params: { name: 'slow', arguments: { ms: 300, steps: 3 }, _meta: { progressToken: 'tok-client-2' } } });
    const msgs = [];
    for (;;) {
      const m = await c.next();
      msgs.push(m);
      if (m.id === 's1') break;
    }
    const prog = msgs.filter((m) => m.method === 'notifications/progress');
    assert.deepEqual(prog.map((m) => m.params), [1, 2, 3].map((i) => ({ progressToken: 'tok-client-2', progress: i, total: 3, message: `step ${i}` })));
    assert.deepEqual(msgs.at(-1).result.content, [{ type: 'text', text: 'done' }]);
  });
});

test('init_params: backend is initialized with the client\'s protocolVersion, capabilities and clientInfo', T, async (t) => {
  await compareModes(t, FX(), OPTS, async (s) => {
    const res = await s.client.callTool({ name: 'init_params', arguments: {} });
    const seen = jsonText(res);
    const sent = s.wire.sent.find((r) => r.msg.method === 'initialize').msg.params;
    assert.deepEqual(seen, sent, 'backend saw exactly the client\'s initialize params');
    assert.deepEqual(seen.clientInfo, DEFAULT_CLIENT_INFO);
    assert.deepEqual(seen.capabilities, CAPS);
    // and the client got the backend's initialize result unchanged
    assert.deepEqual(s.client.getServerVersion(), { name: 'mcp-fixture-server', version: '1.0.0' });
    assert.equal(s.client.getInstructions(), 'Fixture server instructions.');
    assert.deepEqual(s.client.getServerCapabilities(), {
      tools: { listChanged: true }, resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true }, logging: {}, completions: {},
    });
    return seen;
  });
});

for (const v of ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']) {
  test(`init_params over raw stdio: protocolVersion ${v} reaches the backend`, T, async () => {
    await withRaw({ server: FX() }, async (c) => {
      const caps = { roots: {}, experimental: { 'x-test': { on: true } } };
      const init = await c.initialize(v, 'i', caps);
      assert.equal(init.result.protocolVersion, v);
      assert.deepEqual(init.result.serverInfo, { name: 'mcp-fixture-server', version: '1.0.0' });
      c.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'init_params', arguments: {} } });
      const seen = JSON.parse((await c.response()).result.content[0].text);
      assert.equal(seen.protocolVersion, v);
      assert.deepEqual(seen.capabilities, caps);
      assert.deepEqual(seen.clientInfo, { name: 'raw-test', version: '0.0.1' });
    });
  });
}

test('seen_notifications: initialized exactly once, client notifications forwarded', T, async (t) => {
  await compareModes(t, FX(), OPTS, async ({ client }) => {
    await client.sendRootsListChanged();
    await client.notification({ method: 'notifications/custom/thing', params: { x: 1 } });
    const seen = jsonText(await client.callTool({ name: 'seen_notifications', arguments: {} }));
    assert.equal(seen['notifications/initialized'], 1, `backend saw initialized once: ${JSON.stringify(seen)}`);
    assert.equal(seen['notifications/roots/list_changed'], 1);
    assert.equal(seen['notifications/custom/thing'], 1);
    return seen;
  });
});

test('slow: progress notifications in order, then the result', T, async (t) => {
  await compareModes(t, FX(), OPTS, async ({ client }) => {
    const events = [];
    const res = await client.callTool({ name: 'slow', arguments: { ms: 400, steps: 4 } }, undefined,
      { onprogress: (p) => events.push(p) });
    events.push('result');
    assert.deepEqual(events, [1, 2, 3, 4].map((i) => ({ progress: i, total: 4, message: `step ${i}` })).concat(['result']));
    assert.deepEqual(res.content, [{ type: 'text', text: 'done' }]);
    return events;
  });
});

test('progress_then_result: all 3 progress notifications arrive before the result (same write)', T, async (t) => {
  // The backend writes 3 progress notifications and the response in ONE write.
  // (The SDK 1.x client dispatches notifications asynchronously, so when they share
  // a chunk with the response its onprogress callback may miss them; we therefore
  // check the order on the wire, where every message is recorded as it is read.)
  await compareModes(t, FX(), OPTS, async (s) => {
    const res = await s.client.callTool({ name: 'progress_then_result', arguments: {} }, undefined,
      { onprogress: () => {} });
    assert.equal(text(res), 'done');
    const req = s.wire.sent.find((r) => r.msg.method === 'tools/call');
    const token = req.msg.params._meta.progressToken;
    const after = s.wire.received.filter((r) => r.seq > req.seq);
    const seq = after.map((r) => (r.msg.method === 'notifications/progress' ? r.msg.params : r.msg.id === req.msg.id ? 'result' : r.msg));
    assert.deepEqual(seq, [1, 2, 3].map((i) => ({ progressToken: token, progress: i, total: 3, message: `step ${i}` })).concat(['result']));
    return seq.length;
  });
  await withRaw({ server: FX() }, async (c) => {
    await c.initialize();
    c.send({ jsonrpc: '2.0', id: 'ptr', method: 'tools/call', params: { name: 'progress_then_result', arguments: {}, _meta: { progressToken: 'P' } } });
    const got = [await c.next(), await c.next(), await c.next(), await c.next()];
    assert.deepEqual(got.map((m) => m.method ?? m.id), ['notifications/progress', 'notifications/progress', 'notifications/progress', 'ptr']);
    assert.deepEqual(got.slice(0, 3).map((m) => [m.params.progressToken, m.params.progress]), [['P', 1], ['P', 2], ['P', 3]]);
  });
});

test('cancel: call rejects promptly, backend gets notifications/cancelled for ITS id and stops', T, async (t) => {
  await compareModes(t, FX(), OPTS, async (s) => {
    const { client } = s;
    const ac = new AbortController();
    const progress = [];
    const settled = client.callTool({ name: 'slow', arguments: { ms: 6000, steps: 60 } }, undefined, {
      signal: ac.signal,
      onprogress: (p) => progress.push({ p: p.progress, t: Date.now() }),
    }).then(() => 'resolved', (e) => e);
    await waitFor(() => progress.length >= 2, { what: 'progress from slow' });
    const t0 = Date.now();
    ac.abort('test cancel');
    const err = await settled;
    assert.notEqual(err, 'resolved');
    assert.ok(Date.now() - t0 < 1000, 'rejected promptly');
    // the backend saw exactly one cancellation...
    const ids = jsonText(await client.callTool({ name: 'cancelled_ids', arguments: {} }));
    assert.equal(ids.length, 1, `cancelled ids seen by backend: ${JSON.stringify(ids)}`);
    // ...for the id it knows the slow call by: the fixture stops the slow call only
    // if the id matches, so no more progress is sent for it.
    await sleep(150);
    const before = s.wire.received.filter((r) => r.msg.method === 'notifications/progress').length;
    await sleep(600);
    const after = s.wire.received.filter((r) => r.msg.method === 'notifications/progress').length;
    assert.equal(after, before, 'backend kept sending progress: it did not recognise the cancelled id');
    const sent = s.wire.sent.find((r) => r.msg.method === 'tools/call' && r.msg.params.name === 'slow');
    assert.equal(s.wire.received.filter((r) => r.msg.id === sent.msg.id && r.msg.method === undefined).length, 0,
      'no response for the cancelled call');
    if (s.mode === 'direct') assert.deepEqual(ids, [sent.msg.id]);
    // session still fine
    assert.equal(text(await client.callTool({ name: 'slow', arguments: { ms: 10 } })), 'done');
    const seen = jsonText(await client.callTool({ name: 'seen_notifications', arguments: {} }));
    assert.equal(seen['notifications/cancelled'], 1);
    return { count: ids.length, seen };
  });
});

test('cancel over raw stdio: notifications/cancelled is translated to the backend id', T, async () => {
  await withRaw({ server: FX() }, async (c) => {
    await c.initialize('2025-06-18', 1, CAPS);
    c.send({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call', params: { name: 'slow', arguments: { ms: 5000 } } });
    await sleep(100);
    c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow-1', reason: 'because' } });
    c.send({ jsonrpc: '2.0', id: 'ids', method: 'tools/call', params: { name: 'cancelled_ids', arguments: {} } });
    const r = await c.response();
    assert.equal(r.id, 'ids');
    const ids = JSON.parse(r.result.content[0].text);
    assert.equal(ids.length, 1, `backend cancelled ids ${JSON.stringify(ids)}`);
    assert.notEqual(ids[0], 'slow-1', 'the backend must see its own id, not the client\'s');
    // cancelling an unknown id must not reach the backend as a bogus id nor crash anything
    c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never-sent' } });
    c.send({ jsonrpc: '2.0', id: 'p', method: 'ping' });
    assert.deepEqual(await c.response(), { jsonrpc: '2.0', id: 'p', result: {} });
    // the cancelled call never answers
    await c.expectNoResponse(300);
  });
});

test('crash: the pending call fails within ~1 s instead of hanging', T, async () => {
  for (const mode of MODES) {
    await withClient(mode, FX(), OPTS, async ({ client }) => {
      const t0 = Date.now();
      const r = await within(5000, outcome(() => client.callTool({ name: 'crash', arguments: { code: 3 } }, undefined, { timeout: 10_000 })), 'crash call');
      const dt = Date.now() - t0;
      assert.equal(r.ok, false, `[${mode}] crash call must fail, got ${JSON.stringify(r)}`);
      assert.ok(dt < 1500, `[${mode}] failed after ${dt} ms`);
      // later calls fail promptly too (no hang)
      const t1 = Date.now();
      const r2 = await within(5000, outcome(() => client.callTool({ name: 'echo', arguments: {} }, undefined, { timeout: 10_000 })), 'call after crash');
      assert.equal(r2.ok, false, `[${mode}] call after crash must fail`);
      assert.ok(Date.now() - t1 < 2000, `[${mode}] call after crash failed after ${Date.now() - t1} ms`);
    });
  }
});

test('crash over raw stdio: pending request answered with a JSON-RPC error', T, async () => {
  await withRaw({ server: FX() }, async (c) => {
    await c.initialize('2025-06-18', 1);
    c.send({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'slow', arguments: { ms: 5000 } } });
    c.send({ jsonrpc: '2.0', id: 'boom', method: 'tools/call', params: { name: 'crash', arguments: { code: 3 } } });
    const t0 = Date.now();
    const a = await c.response(3000);
    const b = await c.response(3000);
    assert.ok(Date.now() - t0 < 1500, 'errors within ~1 s');
    const byId = { [a.id]: a, [b.id]: b };
    for (const id of ['slow', 'boom']) {
      assert.ok(byId[id], `response for ${id}`);
      assert.equal(typeof byId[id].error?.code, 'number', `error for ${id}: ${JSON.stringify(byId[id])}`);
    }
  });
});

test('exit_quietly: the answer arrives, later calls fail promptly', T, async () => {
  for (const mode of MODES) {
    await withClient(mode, FX(), OPTS, async ({ client }) => {
      assert.equal(text(await client.callTool({ name: 'exit_quietly', arguments: {} })), 'bye');
      const t0 = Date.now();
      const r = await within(5000, outcome(() => client.callTool({ name: 'echo', arguments: {} }, undefined, { timeout: 10_000 })), 'call after exit');
      assert.equal(r.ok, false, `[${mode}] call after backend exit must fail`);
      assert.ok(Date.now() - t0 < 2000, `[${mode}] failed after ${Date.now() - t0} ms`);
    });
  }
});

test('noise: non-JSON backend output never reaches the client', T, async (t) => {
  await compareModes(t, FX(['--noise-at-start']), OPTS, async (s) => {
    const r = await s.client.callTool({ name: 'noise', arguments: {} });
    assert.equal(text(r), 'noise sent');
    assert.equal(text(await s.client.callTool({ name: 'noise', arguments: {} })), 'noise sent');
    return { r, chainErrors: s.mode !== 'direct' ? s.errors.map(String) : [] };
  }, { normalize: (x) => ({ r: x.r }) });
  // through mcp-chain: every stdout line is JSON
  await withRaw({ server: FX(['--noise-at-start']) }, async (c) => {
    await c.initialize();
    c.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'noise', arguments: {} } });
    assert.equal((await c.response()).result.content[0].text, 'noise sent');
    c.assertAllJson();
  });
});

test('noise: SDK client sees no parse errors through mcp-chain', { ...T }, async () => {
  await withClient('chain', FX(['--noise-at-start']), OPTS, async (s) => {
    await s.client.callTool({ name: 'noise', arguments: {} });
    await sleep(50);
    assert.deepEqual(s.errors.map(String), [], 'client transport errors (non-JSON lines)');
  });
});

test('big: a 20 MB result arrives intact', { ...T, timeout: 60_000 }, async (t) => {
  const N = 20_000_000;
  await compareModes(t, FX(), { ...OPTS, maxBufferSize: 64 * 1024 * 1024 }, async ({ client }) => {
    const r = await client.callTool({ name: 'big', arguments: { bytes: N } }, undefined, { timeout: 50_000 });
    const s = r.content[0].text;
    assert.equal(s.length, N);
    assert.ok(/^x+$/.test(s), 'content is all x');
    // the session is fine afterwards
    assert.deepEqual(await client.ping(), {});
    return s.length;
  });
});

test('big request: a 4 MB argument reaches the backend intact', { ...T, timeout: 60_000 }, async (t) => {
  const blob = Array.from({ length: 4 * 1024 * 1024 / 64 }, (_, i) => `${i.toString(36).padStart(8, '0')}é✓`.padEnd(62, '-')).join('\n');
  await compareModes(t, FX(), { ...OPTS, maxBufferSize: 64 * 1024 * 1024 }, async ({ client }) => {
    const r = await client.callTool({ name: 'echo', arguments: { blob } }, undefined, { timeout: 50_000 });
    assert.equal(r.structuredContent.params.arguments.blob, blob);
    return r.structuredContent.params.arguments.blob.length;
  });
});

for (const flags of [[], ['--string-ids']]) {
  const label = flags.length ? ' (--string-ids)' : '';
  test(`server->client requests: sample, elicit, roots, ping_client${label}`, T, async (t) => {
    await compareModes(t, FX(flags), OPTS, async (s) => {
      const { client } = s;
      const got = {};
      client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        got.sample = req.params;
        return { model: 'm-1', role: 'assistant', content: { type: 'text', text: 'sampled ✓' }, stopReason: 'endTurn' };
      });
      client.setRequestHandler(ElicitRequestSchema, async (req) => {
        got.elicit = req.params;
        return { action: 'accept', content: { name: 'Grace' } };
      });
      client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work', name: 'work' }] }));
      const sample = jsonText(await client.callTool({ name: 'sample', arguments: {} }));
      assert.deepEqual(sample, { model: 'm-1', role: 'assistant', content: { type: 'text', text: 'sampled ✓' }, stopReason: 'endTurn' });
      assert.deepEqual(got.sample, { messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }], maxTokens: 10 });
      const elicit = jsonText(await client.callTool({ name: 'elicit', arguments: {} }));
      assert.deepEqual(elicit, { action: 'accept', content: { name: 'Grace' } });
      assert.equal(got.elicit.message, 'Need input');
      const roots = jsonText(await client.callTool({ name: 'roots', arguments: {} }));
      assert.deepEqual(roots, { roots: [{ uri: 'file:///work', name: 'work' }] });
      const ping = jsonText(await client.callTool({ name: 'ping_client', arguments: {} }));
      assert.deepEqual(ping, {});
      // client-side ids of server requests are valid JSON-RPC ids, unique, and answered as given
      const reqs = s.wire.received.filter((r) => r.msg.method && r.msg.id !== undefined);
      assert.equal(reqs.length, 4);
      for (const r of reqs) {
        const ans = s.wire.sent.filter((x) => x.msg.id === r.msg.id && x.msg.method === undefined);
        assert.equal(ans.length, 1, `one answer for server request ${JSON.stringify(r.msg.id)}`);
      }
      assert.equal(new Set(reqs.map((r) => JSON.stringify(r.msg.id))).size, 4);
      return { sample, elicit, roots, ping, got };
    });
  });

  test(`server->client request answered with an error reaches the backend as an error${label}`, T, async (t) => {
    await compareModes(t, FX(flags), OPTS, async ({ client }) => {
      client.setRequestHandler(CreateMessageRequestSchema, async () => { throw new Error('no sampling today'); });
      const r = await client.callTool({ name: 'sample', arguments: {} });
      assert.equal(r.isError, true);
      const err = jsonText(r);
      assert.equal(typeof err.code, 'number');
      assert.match(err.message, /no sampling today/);
      return err;
    });
  });
}

test('server->client requests over raw stdio: ids remapped and answers routed back', T, async () => {
  await withRaw({ server: FX(['--string-ids']) }, async (c) => {
    await c.initialize('2025-06-18', 1, CAPS);
    c.send({ jsonrpc: '2.0', id: 'call-roots', method: 'tools/call', params: { name: 'roots', arguments: {} } });
    const req = await c.next();
    assert.equal(req.method, 'roots/list');
    assert.ok(typeof req.id === 'string' || Number.isInteger(req.id), `valid id ${JSON.stringify(req.id)}`);
    c.send({ jsonrpc: '2.0', id: req.id, result: { roots: [{ uri: 'file:///x', _meta: { k: 'v' } }], extra: 1 } });
    const res = await c.response();
    assert.equal(res.id, 'call-roots');
    assert.deepEqual(JSON.parse(res.result.content[0].text), { roots: [{ uri: 'file:///x', _meta: { k: 'v' } }], extra: 1 });
    // two concurrent server requests answered in reverse order
    c.send({ jsonrpc: '2.0', id: 'c1', method: 'tools/call', params: { name: 'ping_client', arguments: {} } });
    c.send({ jsonrpc: '2.0', id: 'c2', method: 'tools/call', params: { name: 'elicit', arguments: {} } });
    const r1 = await c.next();
    const r2 = await c.next();
    assert.deepEqual([r1.method, r2.method], ['ping', 'elicitation/create']);
    assert.notDeepEqual(r1.id, r2.id);
    c.send({ jsonrpc: '2.0', id: r2.id, result: { action: 'decline' } });
    c.send({ jsonrpc: '2.0', id: r1.id, result: {} });
    const a = await c.response();
    const b = await c.response();
    const byId = { [a.id]: a, [b.id]: b };
    assert.deepEqual(JSON.parse(byId.c2.result.content[0].text), { action: 'decline' });
    assert.deepEqual(JSON.parse(byId.c1.result.content[0].text), {});
  });
});

test('notify: each kind of backend notification reaches the client unchanged, before the result', T, async (t) => {
  const expected = {
    tools: { method: 'notifications/tools/list_changed' },
    resources: { method: 'notifications/resources/list_changed' },
    prompts: { method: 'notifications/prompts/list_changed' },
    updated: { method: 'notifications/resources/updated', params: { uri: 'fixture://a' } },
    log: { method: 'notifications/message', params: { level: 'info', logger: 'fixture', data: 'hello log' } },
  };
  await compareModes(t, FX(), OPTS, async (s) => {
    const out = {};
    for (const kind of Object.keys(expected)) {
      const before = s.wire.received.length;
      const r = await s.client.callTool({ name: 'notify', arguments: { kind } });
      assert.equal(text(r), 'notified');
      const fresh = s.wire.received.slice(before).map((x) => x.msg);
      const n = fresh.filter((m) => m.method !== undefined && m.id === undefined);
      assert.deepEqual(n, [{ jsonrpc: '2.0', ...expected[kind] }], `notification for ${kind}`);
      const iN = fresh.indexOf(n[0]);
      const iR = fresh.findIndex((m) => m.method === undefined);
      assert.ok(iN < iR, 'notification before the tool result');
      out[kind] = n;
    }
    return out;
  });
});

test('resources, templates, prompts, completion, logging pass through', T, async (t) => {
  await compareModes(t, FX(), OPTS, async ({ client }) => {
    const out = {};
    out.resources = await client.listResources();
    assert.deepEqual(out.resources.resources.map((r) => r.uri), ['fixture://a', 'fixture://b']);
    out.templates = await client.listResourceTemplates();
    out.read = await client.readResource({ uri: 'fixture://item/42' });
    assert.equal(out.read.contents[0].text, 'Content of fixture://item/42');
    // a backend error that happens to use -32002 (resource not found) must pass through unchanged
    out.notFound = await outcome(() => client.readResource({ uri: 'fixture://nope' }));
    assert.equal(out.notFound.ok, false);
    assert.equal(out.notFound.code, -32002);
    assert.match(out.notFound.message, /Resource not found: fixture:\/\/nope/);
    assert.deepEqual(await client.subscribeResource({ uri: 'fixture://a' }), {});
    assert.deepEqual(await client.unsubscribeResource({ uri: 'fixture://a' }), {});
    out.prompts = await client.listPrompts();
    out.prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } });
    assert.equal(out.prompt.messages[0].content.text, 'Hello, Ada!');
    out.badPrompt = await outcome(() => client.getPrompt({ name: 'nope' }));
    assert.equal(out.badPrompt.code, -32602);
    out.complete = await client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'name', value: 'a' } });
    assert.deepEqual(out.complete.completion, { values: ['alpha', 'beta'], total: 2, hasMore: false });
    const logs = [];
    client.fallbackNotificationHandler = async (n) => { if (n.method === 'notifications/message') logs.push(n.params); };
    await client.setLoggingLevel('warning');
    await waitFor(() => logs.length === 1, { what: 'log notification after setLevel' });
    assert.deepEqual(logs[0], { level: 'warning', logger: 'fixture', data: 'log level set to warning' });
    out.unknownTool = await outcome(() => client.callTool({ name: 'no_such_tool', arguments: {} }));
    assert.equal(out.unknownTool.code, -32602);
    out.unknownMethod = await outcome(() => client.request({ method: 'fixture/unknown', params: {} }, EmptyResultSchema));
    assert.equal(out.unknownMethod.code, -32601);
    return out;
  });
});

test('tools/list pagination: every page via nextCursor, invalid cursor error', T, async (t) => {
  await compareModes(t, FX(['--tools', '120', '--page-size', '50']), OPTS, async ({ client }) => {
    const pages = [];
    let cursor;
    do {
      const p = await client.listTools(cursor ? { cursor } : {});
      pages.push(p);
      cursor = p.nextCursor;
    } while (cursor && pages.length < 10);
    assert.deepEqual(pages.map((p) => p.tools.length), [50, 50, 35]);
    const names = pages.flatMap((p) => p.tools.map((x) => x.name));
    assert.equal(new Set(names).size, 135);
    assert.ok(names.includes('tool_0119'));
    assert.equal(text(await client.callTool({ name: 'tool_0119', arguments: {} })), 'tool_0119 called');
    const bad = await outcome(() => client.listTools({ cursor: 'bogus' }));
    assert.equal(bad.code, -32602);
    return { pages, bad };
  });
});

test('--slow-response-ms: concurrent requests are pipelined, not serialized', T, async (t) => {
  await compareModes(t, FX(['--slow-response-ms', '400']), OPTS, async ({ client }) => {
    const t0 = Date.now();
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) =>
      client.callTool({ name: 'echo', arguments: { i } })));
    const dt = Date.now() - t0;
    assert.ok(dt < 2500, `10 concurrent 400 ms calls took ${dt} ms`);
    rs.forEach((r, i) => assert.equal(r.structuredContent.params.arguments.i, i));
    return rs.map((r) => r.structuredContent.params.arguments);
  });
});

test('--stderr-lines 20000: a chatty backend stderr does not block the session', T, async (t) => {
  await compareModes(t, FX(['--stderr-lines', '20000']), OPTS, async ({ client }) => {
    const r = await client.callTool({ name: 'echo', arguments: { ok: true } });
    assert.deepEqual(r.structuredContent.params.arguments, { ok: true });
    return r.structuredContent.params.arguments;
  });
});

test('--init-delay-ms 1500: a slow backend initialize still completes', T, async (t) => {
  await compareModes(t, FX(['--init-delay-ms', '1500']), OPTS, async ({ client }) => {
    assert.equal(client.getServerVersion().name, 'mcp-fixture-server');
    return text(await client.callTool({ name: 'slow', arguments: { ms: 1 } }));
  });
});

test('--exit-after-init: later requests fail promptly instead of hanging', { ...T, skip: SKIP_NO_FIXTURE }, async () => {
  // raw: after the backend is gone, a request gets an error response or mcp-chain exits
  await withRaw({ server: FX(['--exit-after-init']) }, async (c) => {
    await c.initialize();
    await sleep(200);
    c.send({ jsonrpc: '2.0', id: 'after', method: 'tools/list', params: {} });
    const t0 = Date.now();
    const r = await Promise.race([
      c.response(2000).catch((e) => ({ noResponse: String(e.message).split('\n')[0] })),
      c.exited.then((x) => ({ exited: x })),
    ]);
    assert.ok(r.exited || (r.id === 'after' && typeof r.error?.code === 'number'),
      `expected an error for id "after" or an exit, got ${JSON.stringify(r)}`);
    assert.ok(Date.now() - t0 < 2000);
  });
  // SDK client through mcp-chain
  await withClient('chain', FX(['--exit-after-init']), OPTS, async ({ client }) => {
    await sleep(200);
    const t0 = Date.now();
    const r = await within(5000, outcome(() => client.listTools(undefined, { timeout: 10_000 })), 'tools/list after backend exit');
    assert.equal(r.ok, false, 'tools/list after backend exit must fail');
    assert.ok(Date.now() - t0 < 2000, `failed after ${Date.now() - t0} ms`);
  });
});

/** Reject if `p` has not settled within `ms` (keeps the event loop alive meanwhile). */
function within(ms, p, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no outcome within ${ms} ms`)), ms); }),
  ]);
}
