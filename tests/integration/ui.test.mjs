// The live page (/ui) of `mcp-chain --listen`: served by mcp-chain itself,
// loaded in headless Chromium (puppeteer-core) against a chain of two
// fixture backends with a policy that denies one tool and a rewrite that
// renames another. The page shows both backends and the test's own SDK
// session, a backend killed with SIGKILL going down and coming back up
// without a reload, the events (the policy's refusal, the restart, the
// rewrite of the page's own call) as they happen, and a tool called from
// its form through the chain. Curl-level cases: /ui off (404), the data
// endpoints asking what /metrics asks (401 without the token, 403 for a
// foreign Origin), the static assets' headers, and the bound on
// /ui/events streams.
//
// Screenshots are kept under $MESON_BUILD_ROOT/ui-screens/ (else the
// system's temporary directory); their path is printed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { FIXTURE, SKIP_NO_FIXTURE, tmpPath, waitFor } from './lib.mjs';
import { openStream, processesUnder, request, withChain } from './http_lib.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
let puppeteer = null;
try { puppeteer = (await import('puppeteer-core')).default; } catch { /* skipped below */ }
const SKIP_NO_BROWSER = SKIP_NO_FIXTURE
  || (!existsSync(CHROMIUM) ? `no Chromium at ${CHROMIUM}` : false)
  || (!puppeteer ? 'puppeteer-core not installed (npm ci in tests/integration)' : false);

const T = { timeout: 120_000, skip: SKIP_NO_FIXTURE };
const T_BROWSER = { timeout: 180_000, skip: SKIP_NO_BROWSER };
const SCREENS = path.join(process.env.MESON_BUILD_ROOT ?? os.tmpdir(), 'ui-screens');

const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const TOKEN = 'ui-test-token-0123456789abcdef';

let cfgCount = 0;
/** Writes CFG to a temporary file; its path. */
function writeCfg(cfg) {
  const file = tmpPath(`ui-${process.pid}-${++cfgCount}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** Two fixture backends, shared by every session: alpha (its "big" renamed
 * "make_text" by its own rewrite module) and beta (two more tools, a
 * restart delay long enough for a snapshot to see it restarting); a policy
 * that denies beta__tool_0000; MORE merged in. */
function twoBackends(more = {}) {
  return {
    mcpServers: {
      alpha: { command: FIXTURE, scope: 'shared',
        middleware: [{ use: 'rewrite', tools: { big: { rename: 'make_text' } } }] },
      beta: { command: FIXTURE, args: ['--tools', '2'], scope: 'shared',
        restart: { initialDelayMs: 2500 } },
    },
    middleware: [{ use: 'policy', rules: [{ deny: ['beta__tool_0000'] }] }],
    shutdownGraceMs: 300,
    ...more,
  };
}

/** An SDK client (v1, Streamable HTTP) of CHAIN named NAME, with HEADERS. */
async function sdkClient(chain, name, headers) {
  const transport = new StreamableHTTPClientTransport(chain.url,
    headers ? { requestInit: { headers } } : undefined);
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

/** Keeps a screenshot of PAGE as NAME; prints where. */
async function screenshot(page, name) {
  mkdirSync(SCREENS, { recursive: true });
  const file = path.join(SCREENS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`# screenshot: ${file}`);
}

/** A headless Chromium page that records console errors, page errors,
 * failed requests and HTTP errors into PROBLEMS. */
async function openBrowser(problems) {
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  return { browser, page };
}

/** The text of the events list. */
const eventsText = (page) => page.$eval('#events', (e) => e.textContent);

test('the live page: backends, sessions, a restart seen live, events, a tool called from its form', T_BROWSER, async () => {
  await withChain(null, { config: writeCfg(twoBackends()) }, async (chain) => {
    const { client, transport } = await sdkClient(chain, 'ui-test-client');
    const problems = [];
    let browser;
    try {
      // the policy's refusal, before the page opens: it comes from the kept events
      const denied = await client.callTool({ name: 'beta__tool_0000', arguments: {} });
      assert.equal(denied.isError, true);
      assert.match(denied.content[0].text, /Refused by the mcp-chain policy/);
      const ok = await client.callTool({ name: 'alpha__make_text', arguments: { bytes: 3 } });
      assert.equal(ok.content[0].text, 'xxx');

      ({ browser } = await openBrowser(problems));
      const page = (await browser.pages()).at(-1);
      const res = await page.goto(`${chain.base}/ui`, { waitUntil: 'domcontentloaded' });
      assert.equal(res.status(), 200);
      assert.match(res.headers()['content-security-policy'], /default-src 'self'/);
      await page.evaluate(() => { window.__testMarker = 'same page'; });

      // both backends, ready, with their tools; the test's session
      await page.waitForFunction(() => document.querySelectorAll('#backends tbody tr[data-state="ready"]').length === 2,
        { timeout: 20_000 });
      const backends = await page.$$eval('#backends tbody tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
      assert.deepEqual(backends.map((r) => r[0]).sort(), ['alpha', 'beta']);
      const tools = (n) => Number(backends.find((r) => r[0] === n)[3]);
      assert.ok(tools('alpha') > 5 && tools('beta') === tools('alpha') + 2, `tool counts: ${backends}`);
      const sid8 = transport.sessionId.slice(0, 8);
      await page.waitForSelector(`#sessions tr[data-sid="${sid8}"]`, { timeout: 10_000 });
      const row = await page.$eval(`#sessions tr[data-sid="${sid8}"]`, (r) => [...r.cells].map((c) => c.textContent));
      assert.equal(row[2], 'ui-test-client');
      assert.equal(row[4], '2025-11-25');
      await page.waitForFunction(() => /denied.*beta__tool_0000/.test(document.getElementById('events').textContent),
        { timeout: 10_000 });
      await screenshot(page, '1-loaded');

      // beta's process killed: the page shows it restarting, then ready again, without a reload
      const betas = processesUnder(chain, /--tools 2/);
      assert.equal(betas.length, 1, `one beta process: ${betas}`);
      process.kill(betas[0], 'SIGKILL');
      await page.waitForFunction(() => document.querySelector('#backends tr[data-backend="beta"]')?.dataset.state === 'restarting',
        { timeout: 20_000 });
      await page.waitForFunction(() => /backend down \[beta\]/.test(document.getElementById('events').textContent),
        { timeout: 10_000 });
      await screenshot(page, '2-beta-down');
      await page.waitForFunction(() => {
        const r = document.querySelector('#backends tr[data-backend="beta"]');
        return r?.dataset.state === 'ready' && r.dataset.restarts === '1';
      }, { timeout: 30_000 });
      const ev = await eventsText(page);
      assert.match(ev, /backend restarting \[beta\]/);
      assert.ok(ev.indexOf('backend up [beta]') < ev.indexOf('backend down [beta]'), 'newest first: up after down');
      assert.equal(await page.evaluate(() => window.__testMarker), 'same page', 'no reload');
      assert.equal(await page.evaluate(() => performance.getEntriesByType('navigation').length), 1);

      // a tool called from the form, as the page's own client, through the chain
      await page.waitForSelector('#tool-select option[value="alpha__make_text"]', { timeout: 10_000 });
      const listed = await page.$$eval('#tool-select option', (o) => o.map((x) => x.value));
      assert.ok(!listed.includes('beta__tool_0000'), 'the denied tool is not listed');
      await page.select('#tool-select', 'alpha__make_text');
      await page.waitForSelector('#call-form input[name="bytes"]');
      await page.type('#call-form input[name="bytes"]', '7');
      await page.click('#call-submit');
      await page.waitForFunction(() => document.getElementById('call-status').textContent === 'ok', { timeout: 15_000 });
      assert.equal(await page.$eval('#call-output', (e) => e.textContent), 'xxxxxxx');
      // the call in the events (the rewrite module's decision, by the page's client) and in the traffic
      await page.waitForFunction(() => /rewritten \[rewrite\] tools\/call big → alpha by mcp-chain-ui : make_text/.test(
        document.getElementById('events').textContent), { timeout: 10_000 });
      await page.waitForFunction(() => Number(document.querySelector('#traffic tr[data-method="tools/call"]')?.cells[2].textContent) >= 1,
        { timeout: 10_000 });
      // a tool error from the form: isError shown
      await page.$eval('#call-form input[name="bytes"]', (e) => { e.value = '-1'; });
      await page.click('#call-submit');
      await page.waitForFunction(() => document.getElementById('call-status').textContent === 'isError', { timeout: 15_000 });
      assert.match(await page.$eval('#call-output', (e) => e.textContent), /out of range/);
      await screenshot(page, '3-called');
      assert.equal(await page.evaluate(() => window.__testMarker), 'same page', 'still no reload');
      assert.deepEqual(problems, [], 'no console error, no failed request');
    } finally {
      await browser?.close();
      await client.close();
    }
  });
});

test('the live page with a bearer token: the page asks for it, then shows the data', T_BROWSER, async () => {
  const cfg = twoBackends({ middleware: [{ use: 'auth', tokens: [{ sha256: sha256(TOKEN), principal: 'operator' }], env: false }] });
  await withChain(null, { config: writeCfg(cfg) }, async (chain) => {
    const problems = [];
    const { browser, page } = await openBrowser(problems);
    try {
      await page.goto(`${chain.base}/ui`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector('#token-form:not([hidden])', { timeout: 10_000 });
      assert.ok(problems.some((p) => /HTTP 401: .*\/ui\/events/.test(p)), `the stream was refused: ${problems}`);
      await page.type('#token', TOKEN);
      await page.click('#token-form button');
      await page.waitForFunction(() => document.querySelectorAll('#backends tbody tr').length === 2, { timeout: 20_000 });
      // the page's own session, as the token's principal
      await page.waitForSelector('#tool-select option[value="alpha__make_text"]', { timeout: 15_000 });
      await page.waitForFunction(() => [...document.querySelectorAll('#sessions tbody tr')].some((r) => r.cells[2].textContent === 'mcp-chain-ui'),
        { timeout: 10_000 });
      assert.equal(await page.evaluate(() => sessionStorage.getItem('mcp-chain-token')), TOKEN);
      await screenshot(page, '4-token');
    } finally {
      await browser.close();
    }
  });
});

test('/ui is 404 when listen.ui is false', T, async () => {
  await withChain(null, { config: writeCfg(twoBackends({ listen: { ui: false } })) }, async (chain) => {
    for (const p of ['/ui', '/ui/', '/ui/app.js', '/ui/state', '/ui/events'])
      assert.equal((await request(chain.port, { method: 'GET', path: p })).status, 404, p);
    assert.equal((await request(chain.port, { method: 'GET', path: '/metrics' })).status, 200);
  });
});

test('/ui: assets after Host/Origin only, data as /metrics (token, Origin), a snapshot bounded and whole', T, async () => {
  const cfg = twoBackends();
  cfg.middleware.unshift({ use: 'auth', tokens: [{ sha256: sha256(TOKEN), principal: 'operator' }], env: false });
  await withChain(null, { config: writeCfg(cfg) }, async (chain) => {
    const port = chain.port;
    const auth = { Authorization: `Bearer ${TOKEN}` };
    for (const [p, type] of [['/ui', /^text\/html/], ['/ui/app.js', /^text\/javascript/], ['/ui/app.css', /^text\/css/]]) {
      const r = await request(port, { method: 'GET', path: p });
      assert.equal(r.status, 200, p);
      assert.match(r.headers['content-type'], type);
      assert.match(r.headers['content-security-policy'], /default-src 'self'/);
      assert.equal(r.headers['x-content-type-options'], 'nosniff');
      assert.equal(r.headers['cache-control'], 'no-store');
    }
    const page = await request(port, { method: 'GET', path: '/ui' });
    assert.match(page.body, /<script type="module" src="\/ui\/app.js"><\/script>/);
    assert.doesNotMatch(page.body, /<script>|style=|\son[a-z]+=/, 'no inline script, style or handler');
    assert.equal((await request(port, { method: 'GET', path: '/ui/nope' })).status, 404);
    assert.equal((await request(port, { method: 'POST', path: '/ui/state', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{}' })).status, 405);
    // a foreign Origin or Host: 403 for assets and data alike
    for (const p of ['/ui', '/ui/state', '/ui/events']) {
      assert.equal((await request(port, { method: 'GET', path: p, headers: { ...auth, Origin: 'http://evil.example' } })).status, 403, p);
      assert.equal((await request(port, { method: 'GET', path: p, headers: { ...auth, Host: 'evil.example' } })).status, 403, p);
    }
    // the data: 401 without the token or with a wrong one, as /metrics
    for (const p of ['/ui/state', '/ui/events', '/metrics']) {
      const r = await request(port, { method: 'GET', path: p });
      assert.equal(r.status, 401, p);
      assert.match(r.headers['www-authenticate'] ?? '', /^Bearer/, p);
      assert.equal((await request(port, { method: 'GET', path: p, headers: { Authorization: 'Bearer wrong' } })).status, 401, p);
    }
    // with it: a snapshot, its sessions listed with a short id only
    const { client, transport } = await sdkClient(chain, 'state-client', auth);
    try {
      assert.equal((await client.callTool({ name: 'beta__tool_0000', arguments: {} })).isError, true);
      await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
      const r = await request(port, { method: 'GET', path: '/ui/state', headers: auth });
      assert.equal(r.status, 200);
      const s = JSON.parse(r.body);
      assert.deepEqual(s.backends.map((b) => b.name), ['alpha', 'beta']);
      assert.ok(s.backends.every((b) => b.state === 'ready' && b.tools > 0), r.body);
      assert.equal(s.sessions.count, 1);
      const me = s.sessions.list[0];
      assert.equal(me.sid, transport.sessionId.slice(0, 8));
      assert.ok(!r.body.includes(transport.sessionId), 'the whole session id is never shown');
      assert.equal(me.client, 'state-client');
      assert.match(me.principal, /^[0-9a-f]{16}$/);
      assert.equal(s.traffic['tools/call'].error, 1, r.body);
      assert.equal(s.traffic['tools/call'].tool_error, 1, r.body);
      const denied = s.events.find((e) => e.kind === 'decision' && e.what === 'denied');
      assert.equal(denied.name, 'beta__tool_0000');
      assert.equal(denied.client, 'operator', 'the principal the auth module named');
      assert.ok(s.events.some((e) => e.kind === 'error' && e.method === 'tools/call' && e.client === 'state-client'), r.body);
      assert.ok(s.events.some((e) => e.kind === 'session' && e.what === 'opened'), r.body);
      assert.ok(s.events.filter((e) => e.kind === 'backend' && e.what === 'up').length >= 2, r.body);
    } finally {
      await transport.terminateSession();
      await client.close();
    }
    // the session's end told as an event
    await waitFor(async () => JSON.parse((await request(port, { method: 'GET', path: '/ui/state', headers: auth })).body)
      .events.some((e) => e.kind === 'session' && e.what === 'closed'), { what: 'the closed event' });
  });
});

test('/ui/events: a snapshot at once then every second, events as they happen, at most 16 streams', T, async () => {
  await withChain(null, { config: writeCfg(twoBackends()) }, async (chain) => {
    const port = chain.port;
    const h = { Accept: 'text/event-stream' };
    const first = await openStream(port, { path: '/ui/events', headers: h });
    const streams = [first];
    try {
      assert.equal(first.status, 200);
      assert.match(first.headers['content-type'], /^text\/event-stream/);
      const s0 = JSON.parse((await first.next((e) => e.event === 'snapshot', 'a first snapshot')).data);
      assert.ok(Array.isArray(s0.events), 'the first snapshot carries the kept events');
      await waitFor(() => first.events.filter((e) => e.event === 'snapshot').length >= 3,
        { timeoutMs: 15_000, what: 'snapshots every second' });
      const later = JSON.parse(first.events.filter((e) => e.event === 'snapshot')[1].data);
      assert.equal(later.events, undefined, 'later snapshots do not repeat the events');
      // an event as it happens: a session opened
      const { client, transport } = await sdkClient(chain, 'events-client');
      const ev = await first.next((e) => e.event === 'event' && JSON.parse(e.data).kind === 'session', 'a session event');
      assert.equal(JSON.parse(ev.data).what, 'opened');
      await transport.terminateSession();   // DELETE: the session ends now
      await client.close();
      await first.next((e) => e.event === 'event' && JSON.parse(e.data).what === 'closed', 'the closed event');
      // the bound: 16 streams, the 17th refused
      for (let i = 1; i < 16; i++) {
        const s = await openStream(port, { path: '/ui/events', headers: h });
        streams.push(s);
        assert.equal(s.status, 200, `stream ${i + 1}`);
      }
      const over = await openStream(port, { path: '/ui/events', headers: h });
      assert.equal(over.status, 503);
      await over.closed;
      // one closed: room again
      streams.pop().close();
      await waitFor(async () => {
        const s = await openStream(port, { path: '/ui/events', headers: h });
        if (s.status === 200) { streams.push(s); return true; }
        s.close();
        return false;
      }, { timeoutMs: 10_000, interval: 100, what: 'room for a stream again' });
    } finally {
      for (const s of streams) s.close();
    }
  });
});
