// SDK 1.x Client <-> (mcp-chain ->) @modelcontextprotocol/server-everything.
// Every scenario runs directly and through mcp-chain; the transcripts must be equal.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';

import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  SE_DIR, SKIP_NO_CHAIN, TEST_TIMEOUT,
  compareModes, connect, descendants, everythingServer, isAlive, outcome, scrubTimes, sleep, waitFor,
} from './lib.mjs';

const CAPS = { sampling: {}, elicitation: {}, roots: { listChanged: true } };
const SERVER = everythingServer();
const OPTS = { capabilities: CAPS };
const T = { timeout: TEST_TIMEOUT };

const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

/** The raw JSON-RPC response to the request with `method` seen on the wire. */
function wireResponseTo(session, method) {
  const req = session.wire.sent.find((r) => r.msg.method === method);
  assert.ok(req, `no ${method} request sent`);
  const res = session.wire.received.find((r) => r.msg.id === req.msg.id && r.msg.method === undefined);
  assert.ok(res, `no response to ${method}`);
  return res.msg;
}

test('initialize: serverInfo, capabilities, instructions and protocolVersion equal direct', T, async (t) => {
  const expectedInstructions = readFileSync(path.join(SE_DIR, 'dist', 'docs', 'instructions.md'), 'utf8');
  await compareModes(t, SERVER, OPTS, async (s) => {
    const { client } = s;
    const info = client.getServerVersion();
    assert.equal(info.name, 'mcp-servers/everything');
    assert.equal(info.title, 'Everything Reference Server');
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps.tools, { listChanged: true });
    assert.deepEqual(caps.resources, { subscribe: true, listChanged: true });
    assert.ok(caps.logging, 'logging capability advertised');
    assert.ok(caps.completions, 'completions capability advertised');
    assert.ok(caps.tasks, 'tasks capability (non-standard extension) passed through');
    assert.equal(client.getInstructions(), expectedInstructions);
    const raw = wireResponseTo(s, 'initialize');
    assert.equal(raw.jsonrpc, '2.0');
    assert.equal(raw.result.protocolVersion, s.wire.sent.find((r) => r.msg.method === 'initialize').msg.params.protocolVersion);
    return raw.result;
  });
});

test('lists: tools, resources (all cursor pages), templates, prompts', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const tools = await client.listTools();
    const names = tools.tools.map((x) => x.name);
    for (const n of ['echo', 'get-sum', 'trigger-long-running-operation', 'get-structured-content',
      'trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list']) {
      assert.ok(names.includes(n), `tool ${n} listed (got ${names.join(', ')})`);
    }
    const echo = tools.tools.find((x) => x.name === 'echo');
    assert.equal(echo.inputSchema.properties.message.type, 'string');

    // resources, following nextCursor until exhausted
    const pages = [];
    let cursor;
    for (let i = 0; i < 50; i++) {
      const page = await client.listResources(cursor ? { cursor } : {});
      pages.push(page);
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    const uris = pages.flatMap((p) => p.resources.map((r) => r.uri));
    assert.ok(uris.includes('demo://resource/static/document/features.md'), 'static documents listed');
    assert.equal(new Set(uris).size, uris.length, 'no duplicate resource across pages');
    // an explicit (opaque) cursor must reach the backend untouched: same outcome both ways
    const withCursor = await outcome(() => client.listResources({ cursor: 'opaque-cursor-1' }));

    const templates = await client.listResourceTemplates();
    assert.deepEqual(templates.resourceTemplates.map((x) => x.uriTemplate).sort(), [
      'demo://resource/dynamic/blob/{resourceId}',
      'demo://resource/dynamic/text/{resourceId}',
    ]);
    const prompts = await client.listPrompts();
    assert.deepEqual(prompts.prompts.map((p) => p.name).sort(),
      ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt']);
    return { tools, pages, withCursor, templates, prompts };
  });
});

test('prompts/get with arguments, and errors', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const simple = await client.getPrompt({ name: 'simple-prompt' });
    assert.equal(simple.messages[0].content.text, 'This is a simple prompt without arguments.');
    const args = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Boston', state: 'MA' } });
    assert.equal(args.messages[0].content.text, "What's weather in Boston, MA?");
    const res = await client.getPrompt({ name: 'resource-prompt', arguments: { resourceType: 'Text', resourceId: '3' } });
    assert.equal(res.messages[1].content.type, 'resource');
    assert.equal(res.messages[1].content.resource.uri, 'demo://resource/dynamic/text/3');
    const missing = await outcome(() => client.getPrompt({ name: 'args-prompt', arguments: {} }));
    assert.equal(missing.ok, false, 'missing required argument is an error');
    const unknown = await outcome(() => client.getPrompt({ name: 'no-such-prompt' }));
    assert.equal(unknown.ok, false);
    return scrubTimes({ simple, args, res, missing, unknown });
  });
});

test('completion/complete for prompt and resource-template arguments', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const dept = await client.complete({
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'department', value: 'S' },
    });
    assert.deepEqual(dept.completion.values, ['Sales', 'Support']);
    const name = await client.complete({
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'name', value: 'A' },
      context: { arguments: { department: 'Engineering' } },
    });
    assert.deepEqual(name.completion.values, ['Alice']);
    const rid = await client.complete({
      ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
      argument: { name: 'resourceId', value: '7' },
    });
    assert.deepEqual(rid.completion.values, ['7']);
    return { dept, name, rid };
  });
});

test('resources/read: static document, dynamic text and blob, unknown uri', T, async (t) => {
  const features = readFileSync(path.join(SE_DIR, 'dist', 'docs', 'features.md'), 'utf8');
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const doc = await client.readResource({ uri: 'demo://resource/static/document/features.md' });
    assert.equal(doc.contents[0].text, features);
    assert.equal(doc.contents[0].mimeType, 'text/markdown');
    const txt = await client.readResource({ uri: 'demo://resource/dynamic/text/5' });
    assert.match(txt.contents[0].text, /^Resource 5: This is a plaintext resource created at /);
    const blob = await client.readResource({ uri: 'demo://resource/dynamic/blob/6' });
    const decoded = Buffer.from(blob.contents[0].blob, 'base64').toString('utf8');
    assert.match(decoded, /^Resource 6: This is a base64 blob created at /);
    blob.contents[0].blob = decoded;
    const bad = await outcome(() => client.readResource({ uri: 'demo://resource/dynamic/text/0' }));
    assert.equal(bad.ok, false);
    return scrubTimes({ doc, txt, blob, bad });
  });
});

test('resources/subscribe + updated notifications + unsubscribe', T, async (t) => {
  const uri = 'demo://resource/dynamic/text/1';
  await compareModes(t, SERVER, OPTS, async (s) => {
    const { client } = s;
    const updates = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params));
    assert.deepEqual(await client.subscribeResource({ uri }), {});
    const on = await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await waitFor(() => updates.length >= 1, { what: 'notifications/resources/updated' });
    assert.deepEqual(updates[0], { uri });
    const off = await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    assert.deepEqual(await client.unsubscribeResource({ uri }), {});
    return { first: updates[0], on, off };
  });
});

test('tools/call: echo, get-sum, structured content, images, resource refs, errors', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const out = {};
    out.echo = await client.callTool({ name: 'echo', arguments: { message: 'héllo wörld ✓ "quoted" \\ \n newline' } });
    assert.equal(text(out.echo), 'Echo: héllo wörld ✓ "quoted" \\ \n newline');
    out.sum = await client.callTool({ name: 'get-sum', arguments: { a: 19, b: 23.5 } });
    assert.equal(text(out.sum), 'The sum of 19 and 23.5 is 42.5.');
    out.structured = await client.callTool({ name: 'get-structured-content', arguments: { location: 'Chicago' } });
    assert.equal(typeof out.structured.structuredContent.temperature, 'number');
    out.annotated = await client.callTool({ name: 'get-annotated-message', arguments: { messageType: 'success', includeImage: true } });
    assert.ok(out.annotated.content.some((c) => c.type === 'image'));
    out.image = await client.callTool({ name: 'get-tiny-image', arguments: {} });
    const img = out.image.content.find((c) => c.type === 'image');
    assert.equal(img.mimeType, 'image/png');
    assert.equal(Buffer.from(img.data, 'base64').subarray(1, 4).toString('latin1'), 'PNG');
    out.ref = await client.callTool({ name: 'get-resource-reference', arguments: { resourceType: 'Text', resourceId: 2 } });
    assert.ok(out.ref.content.some((c) => c.type === 'resource' && c.resource.uri === 'demo://resource/dynamic/text/2'));
    out.links = await client.callTool({ name: 'get-resource-links', arguments: { count: 3 } });
    assert.equal(out.links.content.filter((c) => c.type === 'resource_link').length, 3);
    out.badArgs = await outcome(() => client.callTool({ name: 'get-sum', arguments: { a: 'x', b: 1 } }));
    out.unknown = await outcome(() => client.callTool({ name: 'no-such-tool', arguments: {} }));
    const isErr = (o) => !o.ok || o.value.isError === true;
    assert.ok(isErr(out.badArgs), 'invalid arguments reported as an error');
    assert.ok(isErr(out.unknown), 'unknown tool reported as an error');
    assert.deepEqual(await client.ping(), {});
    return scrubTimes(out);
  });
});

test('progress: every notification arrives, in order, before the result', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async (s) => {
    const events = [];
    const result = await s.client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 5 } },
      undefined,
      { onprogress: (p) => events.push({ kind: 'progress', ...p }) },
    );
    events.push({ kind: 'result' });
    const expected = [1, 2, 3, 4, 5].map((i) => ({ kind: 'progress', progress: i, total: 5 }));
    if (events.length === 5) {
      // SDK 1.x quirk: notifications are dispatched on a microtask but responses
      // synchronously, so a last progress notification read in the SAME chunk as the
      // response reaches onprogress after its handler is gone ("unknown token").
      // Accept that only when the SDK itself reports exactly that drop; the wire
      // check below still requires all 5 before the response.
      assert.ok(s.errors.some((e) => /progress notification for an unknown token.*"progress":5/.test(String(e?.message ?? e))),
        `onprogress missed step 5 without the SDK's unknown-token report: ${JSON.stringify(events)}`);
      t.diagnostic(`[${s.mode}] step 5 shared a read chunk with the response (SDK dropped it from onprogress)`);
      assert.deepEqual(events, [...expected.slice(0, 4), { kind: 'result' }]);
    } else {
      assert.deepEqual(events, [...expected, { kind: 'result' }]);
    }
    // and on the wire: all 5 progress notifications precede the response
    const req = s.wire.sent.find((r) => r.msg.method === 'tools/call');
    const token = req.msg.params._meta.progressToken;
    const prog = s.wire.received.filter((r) => r.msg.method === 'notifications/progress');
    assert.deepEqual(prog.map((p) => [p.msg.params.progress, p.msg.params.total]), [[1, 5], [2, 5], [3, 5], [4, 5], [5, 5]]);
    for (const p of prog) assert.equal(p.msg.params.progressToken, token, 'progress token mapped back to the client\'s');
    const resp = s.wire.received.find((r) => r.msg.id === req.msg.id && r.msg.method === undefined);
    assert.ok(resp, 'response on the wire');
    assert.ok(prog.every((p) => p.seq < resp.seq));
    assert.equal(text(result), 'Long running operation completed. Duration: 1 seconds, Steps: 5.');
    return { result };
  });
});

test('cancellation: AbortController rejects the call promptly and the session keeps working', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async (s) => {
    const { client } = s;
    const ac = new AbortController();
    let progressCount = 0;
    const call = client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } },
      undefined,
      {
        signal: ac.signal,
        onprogress: () => { progressCount++; },
      },
    );
    const settled = call.then(() => 'resolved', (e) => e);
    await waitFor(() => progressCount >= 1, { what: 'first progress notification' });
    const t0 = Date.now();
    ac.abort('user cancelled');
    const err = await settled;
    const elapsed = Date.now() - t0;
    assert.notEqual(err, 'resolved', 'cancelled call must reject');
    assert.ok(elapsed < 1000, `rejected ${elapsed} ms after abort`);
    const req = s.wire.sent.find((r) => r.msg.method === 'tools/call');
    const cancel = s.wire.sent.find((r) => r.msg.method === 'notifications/cancelled');
    assert.ok(cancel, 'client sent notifications/cancelled');
    assert.equal(cancel.msg.params.requestId, req.msg.id);
    // the session keeps working
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'still alive' } });
    assert.equal(text(echo), 'Echo: still alive');
    assert.deepEqual(await client.ping(), {});
    const sum = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
    assert.equal(text(sum), 'The sum of 1 and 2 is 3.');
    // no response for the cancelled request ever reaches the client
    await sleep(300);
    assert.equal(s.wire.received.filter((r) => r.msg.id === req.msg.id && r.msg.method === undefined).length, 0,
      'no response delivered for a cancelled request');
    return { echo, sum, reason: String(err?.message ?? err).includes('user cancelled') };
  });
});

test('sampling: server -> client sampling/createMessage answered by the client', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async (s) => {
    const { client } = s;
    const seen = [];
    let fail = false;
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      seen.push(req.params);
      if (fail) throw new Error('sampling refused by test client');
      return { model: 'test-model-1', role: 'assistant', stopReason: 'endTurn',
        content: { type: 'text', text: `sampled: ${req.params.messages[0].content.text}` } };
    });
    const ok = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'What is 2+2?', maxTokens: 42 } });
    assert.equal(seen.length, 1);
    assert.equal(seen[0].messages[0].content.text, 'Resource trigger-sampling-request context: What is 2+2?');
    assert.equal(seen[0].maxTokens, 42);
    assert.equal(seen[0].systemPrompt, 'You are a helpful test server.');
    assert.equal(seen[0].temperature, 0.7);
    const parsed = JSON.parse(text(ok).replace(/^LLM sampling result: \n/, ''));
    assert.deepEqual(parsed, { model: 'test-model-1', role: 'assistant', stopReason: 'endTurn',
      content: { type: 'text', text: 'sampled: Resource trigger-sampling-request context: What is 2+2?' } });
    // the server's request id seen by the client, and our response, must match on the wire
    const sreq = s.wire.received.find((r) => r.msg.method === 'sampling/createMessage');
    const sres = s.wire.sent.find((r) => r.msg.id === sreq.msg.id && r.msg.method === undefined);
    assert.ok(sres && sres.msg.result, 'client answered the id it was given');
    // an error answer from the client propagates to the tool
    fail = true;
    const refused = await outcome(() => client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'no' } }));
    assert.ok(!refused.ok || refused.value.isError, 'client error surfaces as a tool error');
    assert.match(JSON.stringify(refused), /sampling refused by test client/);
    return { seen, ok, refused };
  });
});

test('elicitation: server -> client elicitation/create answered (accept, decline)', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const seen = [];
    const answers = [
      { action: 'accept', content: { name: 'Ada Lovelace', check: true, integer: 7 } },
      { action: 'decline' },
    ];
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      seen.push(req.params);
      return answers[seen.length - 1];
    });
    const accepted = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
    assert.match(text(accepted), /User provided the requested information/);
    assert.match(text(accepted), /- Name: Ada Lovelace/);
    assert.match(text(accepted), /- Favorite Integer: 7/);
    const declined = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
    assert.match(text(declined), /User declined/);
    assert.equal(seen.length, 2);
    assert.equal(seen[0].message, 'Please provide inputs for the following fields:');
    assert.deepEqual(seen[0].requestedSchema.required, ['name']);
    return { seen, accepted, declined };
  });
});

test('roots: roots/list answered by the client, roots/list_changed triggers a new request', T, async (t) => {
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    let roots = [{ uri: 'file:///tmp/project-a', name: 'Project A' }];
    let calls = 0;
    const logs = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    client.setRequestHandler(ListRootsRequestSchema, async () => { calls++; return { roots }; });
    // server-everything asks for roots ~350 ms after initialization
    await waitFor(() => calls >= 1, { what: 'initial roots/list from the server' });
    const first = await client.callTool({ name: 'get-roots-list', arguments: {} });
    assert.match(text(first), /Current MCP Roots \(1 total\)/);
    assert.match(text(first), /URI: file:\/\/\/tmp\/project-a/);
    roots = [{ uri: 'file:///tmp/project-b', name: 'Project B' }, { uri: 'file:///tmp/project-c' }];
    const before = calls;
    await client.sendRootsListChanged();
    await waitFor(() => calls > before, { what: 'roots/list after notifications/roots/list_changed' });
    await waitFor(() => logs.some((l) => l.data === 'Roots updated: 2 root(s) received from client'),
      { what: 'log message confirming the update' });
    const second = await client.callTool({ name: 'get-roots-list', arguments: {} });
    assert.match(text(second), /Current MCP Roots \(2 total\)/);
    assert.match(text(second), /Unnamed Root\n {3}URI: file:\/\/\/tmp\/project-c/);
    return { first, second, calls };
  });
});

test('logging/setLevel filters the log notifications the client receives', T, async (t) => {
  const uri = 'demo://resource/dynamic/text/9';
  await compareModes(t, SERVER, OPTS, async ({ client }) => {
    const logs = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    await client.setLoggingLevel('info');
    // the server logs (at info) before answering the subscribe request
    await client.subscribeResource({ uri });
    const info = logs.filter((l) => String(l.data).startsWith(`Received Subscribe Resource request for URI: ${uri}`));
    assert.equal(info.length, 1, `info log received (got ${JSON.stringify(logs)})`);
    assert.equal(info[0].level, 'info');
    await client.setLoggingLevel('error');
    const n = logs.length;
    await client.unsubscribeResource({ uri });
    await client.subscribeResource({ uri });
    await sleep(200);
    assert.equal(logs.length, n, 'info logs are filtered once the level is error');
    return { info };
  });
});

test('list_changed: tools at startup, resources when a session resource is added', T, async (t) => {
  const payload = 'hello from the integration tests\n'.repeat(10);
  const dataUri = `data:text/plain;base64,${Buffer.from(payload).toString('base64')}`;
  await compareModes(t, SERVER, {
    ...OPTS,
    setup: (client) => {
      client.__toolsChanged = 0;
      client.__resourcesChanged = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => { client.__toolsChanged++; });
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { client.__resourcesChanged++; });
    },
  }, async ({ client }) => {
    // conditional tools are registered after initialization -> tools/list_changed
    await waitFor(() => client.__toolsChanged >= 1, { what: 'notifications/tools/list_changed' });
    const link = await client.callTool({ name: 'gzip-file-as-resource', arguments: { name: 'it.txt.gz', data: dataUri } });
    assert.deepEqual(link.content[0], { type: 'resource_link', uri: 'demo://resource/session/it.txt.gz', name: 'it.txt.gz', mimeType: 'application/gzip' });
    await waitFor(() => client.__resourcesChanged >= 1, { what: 'notifications/resources/list_changed' });
    const list = await client.listResources();
    assert.ok(list.resources.some((r) => r.uri === 'demo://resource/session/it.txt.gz'));
    const read = await client.readResource({ uri: 'demo://resource/session/it.txt.gz' });
    assert.equal(gunzipSync(Buffer.from(read.contents[0].blob, 'base64')).toString('utf8'), payload);
    return { link, list, read };
  });
});

test('config env and cwd reach the backend', T, async (t) => {
  const env = { MCPC_IT_MARKER: 'marker value with spaces', MCPC_IT_EMPTY: '' };
  // relative entry point: only resolvable if the configured cwd is applied
  const server = { command: 'node', args: ['dist/index.js', 'stdio'], env, cwd: SE_DIR };
  await compareModes(t, server, OPTS, async ({ client }) => {
    const res = await client.callTool({ name: 'get-env', arguments: {} });
    const vars = JSON.parse(text(res));
    assert.equal(vars.MCPC_IT_MARKER, 'marker value with spaces');
    assert.equal(vars.MCPC_IT_EMPTY, '');
    assert.ok(vars.PATH, 'inherited environment (PATH) kept alongside the configured env');
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'cwd ok' } });
    return { marker: vars.MCPC_IT_MARKER, empty: vars.MCPC_IT_EMPTY, echo };
  });
});

test('stdin EOF ends mcp-chain (exit 0) and its backend: no leaked processes', { ...T, skip: SKIP_NO_CHAIN }, async () => {
  // no roots capability: server-everything then exits promptly on EOF itself
  const s = await connect('chain', SERVER, { capabilities: {} });
  let tree = [];
  try {
    assert.equal(s.client.getServerVersion().name, 'mcp-servers/everything');
    tree = [s.pid, ...descendants(s.pid)];
    assert.ok(tree.length >= 2, 'mcp-chain spawned a backend child');
    const proc = s.transport._process;
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    const t0 = Date.now();
    proc.stdin.end();
    const res = await Promise.race([exited, sleep(3000).then(() => 'timeout')]);
    assert.notEqual(res, 'timeout', 'mcp-chain still running 3 s after stdin EOF');
    assert.deepEqual(res, { code: 0, signal: null }, 'mcp-chain exit status after EOF');
    await waitFor(() => tree.every((p) => !isAlive(p)), { timeoutMs: 3000, what: 'backend to exit' });
    assert.ok(Date.now() - t0 < 3000);
  } finally {
    await s.close();
    for (const p of tree) if (isAlive(p)) try { process.kill(p, 'SIGKILL'); } catch { /* gone */ }
  }
});
