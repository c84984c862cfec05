// The "policy" middleware through the real binary: an SDK 1.x client talks to
// mcp-chain wrapping the C fixture server or server-everything, with a policy
// in the configuration's "middleware".

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';

import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  DEFAULT_CLIENT_INFO, SKIP_NO_CHAIN, SKIP_NO_FIXTURE, TEST_TIMEOUT,
  connect, everythingServer, fixtureServer, outcome, sleep, waitFor, withClient,
} from './lib.mjs';

const T = { timeout: TEST_TIMEOUT, skip: SKIP_NO_FIXTURE };
const TE = { timeout: TEST_TIMEOUT, skip: SKIP_NO_CHAIN };

/** chainArgs for lib.mjs: the generated config plus top-level `middleware`. */
const withMiddleware = (middleware) => (cfg) => {
  const c = JSON.parse(readFileSync(cfg, 'utf8'));
  writeFileSync(cfg, JSON.stringify({ ...c, middleware }));
  return ['--config', cfg];
};

/** Options for a chain session with POLICY (the module options) and client options. */
const policy = (opts, extra = {}) => ({ chainArgs: withMiddleware([{ use: 'policy', ...opts }]), ...extra });

const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/;

/** withClient through mcp-chain, failing on a sanitizer report once it has exited. */
async function run(server, opts, fn) {
  const s = await connect('chain', server, opts);
  let failed = false;
  try {
    return await fn(s);
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    await s.close();
    const m = s.stderr().match(SANITIZER_REPORT);
    if (m && !failed) throw new Error(`sanitizer report from mcp-chain:\n${s.stderr().slice(s.stderr().indexOf(m[0]) - 200)}`);
  }
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name);

/** Client options answering every elicitation with ANSWER and recording the questions. */
function elicitingClient(answer, asked) {
  return {
    capabilities: { elicitation: {} },
    setup: (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params);
      return answer;
    }),
  };
}

// ---------------------------------------------------------------------------

test('deny: the tool is absent from tools/list and refused when called', T, async () => {
  const opts = policy({ rules: [{ deny: ['crash', 'no*'] }] });
  await run(fixtureServer(), opts, async ({ client }) => {
    const names = await toolNames(client);
    assert.ok(names.includes('echo'), 'other tools are listed');
    for (const n of ['crash', 'noise', 'notify']) assert.ok(!names.includes(n), `${n} is hidden`);
    // refused as a tool result the model can read; the backend never sees it
    const r = await client.callTool({ name: 'crash', arguments: { code: 3 } });
    assert.equal(r.isError, true);
    assert.match(text(r), /policy.*"crash" is not allowed/);
    // the backend is still alive (crash would have ended it)
    const e = await client.callTool({ name: 'echo', arguments: { still: 'here' } });
    assert.deepEqual(e.structuredContent.params.arguments, { still: 'here' });
  });
});

test('allow list limited to a client: others are unaffected', T, async () => {
  const rules = [{ allow: ['echo', 'big'], clients: [DEFAULT_CLIENT_INFO.name] }];
  await run(fixtureServer(), policy({ rules }), async ({ client }) => {
    assert.deepEqual((await toolNames(client)).sort(), ['big', 'echo']);
    const r = await client.callTool({ name: 'slow', arguments: { ms: 1 } });
    assert.equal(r.isError, true);
    assert.match(text(r), /"slow" is not allowed/);
  });
  const other = policy({ rules }, { clientInfo: { name: 'another-client', version: '1' } });
  await run(fixtureServer(), other, async ({ client }) => {
    const names = await toolNames(client);
    assert.ok(names.includes('slow') && names.includes('crash'));
    const r = await client.callTool({ name: 'slow', arguments: { ms: 1 } });
    assert.notEqual(r.isError, true);
  });
});

test('prompts and resources: hidden from lists, refused with a JSON-RPC error', T, async () => {
  const rules = [
    { deny: ['greet'], on: 'prompts' },
    { deny: ['fixture://b', 'fixture://item/*'], on: ['resources'] },
  ];
  await run(fixtureServer(), policy({ rules }), async ({ client }) => {
    assert.deepEqual((await client.listPrompts()).prompts, []);
    const p = await outcome(() => client.getPrompt({ name: 'greet', arguments: { name: 'x' } }));
    assert.equal(p.ok, false);
    assert.equal(p.code, -32602);
    assert.match(p.message, /prompt "greet" is not allowed/);
    const uris = (await client.listResources()).resources.map((r) => r.uri);
    assert.deepEqual(uris, ['fixture://a']);
    assert.deepEqual((await client.listResourceTemplates()).resourceTemplates, []);
    const rb = await outcome(() => client.readResource({ uri: 'fixture://b' }));
    assert.equal(rb.ok, false);
    assert.match(rb.message, /resource "fixture:\/\/b" is not allowed/);
    const ra = await client.readResource({ uri: 'fixture://a' });
    assert.equal(ra.contents.length, 1);
  });
});

test('ask: accepted, the call goes on; the user saw the tool and its arguments', T, async () => {
  const asked = [];
  const opts = policy({ rules: [{ ask: ['echo'] }] }, elicitingClient({ action: 'accept', content: {} }, asked));
  await run(fixtureServer(), opts, async ({ client }) => {
    const r = await client.callTool({ name: 'echo', arguments: { path: '/tmp/x' } });
    assert.notEqual(r.isError, true);
    assert.deepEqual(r.structuredContent.params.arguments, { path: '/tmp/x' });
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /"echo"/);
    assert.match(asked[0].message, /\/tmp\/x/);
    assert.match(asked[0].message, new RegExp(DEFAULT_CLIENT_INFO.name));
    assert.equal(asked[0].requestedSchema.type, 'object');
    // names not under "ask" are not asked about
    await client.callTool({ name: 'big', arguments: { bytes: 3 } });
    assert.equal(asked.length, 1);
  });
});

test('ask: declined or cancelled, the call is refused and never reaches the backend', T, async () => {
  for (const action of ['decline', 'cancel']) {
    const asked = [];
    const opts = policy({ rules: [{ ask: ['crash'] }] }, elicitingClient({ action }, asked));
    await run(fixtureServer(), opts, async ({ client }) => {
      const r = await client.callTool({ name: 'crash', arguments: {} });
      assert.equal(r.isError, true, action);
      assert.match(text(r), action === 'decline' ? /declined/ : /did not confirm.*cancelled/);
      assert.match(text(r), /not called/);
      assert.equal(asked.length, 1);
      // crash was never called: the backend still answers
      const e = await client.callTool({ name: 'echo', arguments: {} });
      assert.equal(e.structuredContent.method, 'tools/call');
    });
  }
});

test('ask: a client without elicitation gets a refusal that says why', T, async () => {
  await run(fixtureServer(), policy({ rules: [{ ask: ['crash'] }] }), async ({ client }) => {
    const r = await client.callTool({ name: 'crash', arguments: {} });
    assert.equal(r.isError, true);
    assert.match(text(r), /elicitation unavailable/);
    assert.match(text(r), /-32601/);
    const e = await client.callTool({ name: 'echo', arguments: {} });
    assert.equal(e.structuredContent.method, 'tools/call');
  });
});

test('ask: concurrent calls are asked about independently', T, async () => {
  const asked = [];
  const opts = {
    ...policy({ rules: [{ ask: ['echo'] }] }),
    capabilities: { elicitation: {} },
    setup: (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      // accept the even ones, a little later than the odd ones are declined
      const even = /"n":\s*\d*[02468]\b/.test(req.params.message);
      await new Promise((r) => setTimeout(r, even ? 30 : 5));
      return { action: even ? 'accept' : 'decline' };
    }),
  };
  await run(fixtureServer(), opts, async ({ client }) => {
    const rs = await Promise.all([0, 1, 2, 3, 4, 5].map((n) => client.callTool({ name: 'echo', arguments: { n } })));
    assert.equal(asked.length, 6);
    rs.forEach((r, n) => {
      if (n % 2) assert.equal(r.isError, true, `call ${n} declined`);
      else assert.equal(r.structuredContent.params.arguments.n, n, `call ${n} accepted`);
    });
  });
});

test('ask: the client cancels its call while the user decides; the late yes does nothing', T, async () => {
  let release;
  const answered = new Promise((r) => { release = r; });
  const asked = [];
  const opts = {
    ...policy({ rules: [{ ask: ['crash'] }] }),
    capabilities: { elicitation: {} },
    setup: (client) => client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params);
      await answered;
      return { action: 'accept' };
    }),
  };
  await run(fixtureServer(), opts, async ({ client }) => {
    const ac = new AbortController();
    const call = outcome(() => client.callTool({ name: 'crash', arguments: {} }, undefined, { signal: ac.signal }));
    await waitFor(() => asked.length === 1, { what: 'the question' });
    ac.abort('changed my mind');
    assert.equal((await call).ok, false);
    release();
    await sleep(100);
    // crash never ran: the backend still answers
    const e = await client.callTool({ name: 'echo', arguments: {} });
    assert.equal(e.structuredContent.method, 'tools/call');
  });
});

test('ask: the client goes away while the user is asked; mcp-chain exits cleanly', T, async () => {
  const asked = [];
  const opts = {
    ...policy({ rules: [{ ask: ['echo'] }] }),
    capabilities: { elicitation: {} },
    setup: (client) => client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params);
      return new Promise(() => {});   // never answers
    }),
  };
  let session;
  await run(fixtureServer(), opts, async (s) => {
    session = s;
    outcome(() => s.client.callTool({ name: 'echo', arguments: {} }));
    await waitFor(() => asked.length === 1, { what: 'the question' });
  });
  assert.deepEqual(session.leftovers, [], 'mcp-chain and its backend exited');
});

test('server-everything: get-env denied, the rest listed as direct', TE, async () => {
  const all = await withClient('direct', everythingServer(), {}, ({ client }) => toolNames(client));
  assert.ok(all.includes('get-env'));
  await run(everythingServer(), policy({ rules: [{ deny: ['get-env'] }] }), async ({ client }) => {
    assert.deepEqual(await toolNames(client), all.filter((n) => n !== 'get-env'));
    const r = await client.callTool({ name: 'get-env', arguments: {} });
    assert.equal(r.isError, true);
    assert.doesNotMatch(text(r), /PATH/);
    const e = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    assert.equal(text(e), 'Echo: hi');
  });
});

test('a bad policy is reported with the option path and mcp-chain does not start', T, async () => {
  const opts = policy({ rules: [{ deny: ['a['], on: 'tool' }] });
  const r = await outcome(() => run(fixtureServer(), opts, () => null));
  assert.equal(r.ok, false);
  assert.match(r.message, /\/middleware\/0\/rules\/0\/deny\/0: unterminated/);
  assert.match(r.message, /\/middleware\/0\/rules\/0\/on: must be/);
});
