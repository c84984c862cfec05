// app.js - mcp-chain's live page (/ui). Reads /ui/events (SSE, through
// fetch so that the bearer token can be sent: an EventSource cannot),
// renders the snapshots and events it carries, keeps 5 minutes of traffic
// history itself (from successive cumulative snapshots: the server keeps
// none), and is an MCP client of the chain's own endpoint on this origin to
// call a tool as this page's principal, through the modules.
// Everything from the server is written with textContent: nothing is
// parsed as HTML.

const TOKEN_KEY = 'mcp-chain-token';
const HISTORY_MS = 5 * 60 * 1000;
const MAX_EVENTS = 200;
const PROTOCOL = '2025-11-25';

const $ = (id) => document.getElementById(id);
const state = {
  history: [],          // {t, traffic, backends} of each snapshot, 5 minutes
  events: new Map(),    // serial -> event
  mcpPath: '/mcp',
  tools: [],
  mcp: null,            // {sid, nextId}
  streaming: false,
};
window.__mcpChainUi = { snapshots: 0, loadedAt: Date.now() };

// ---- the token ----

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
function authHeaders(h = {}) {
  const t = token();
  return t ? { ...h, Authorization: `Bearer ${t}` } : h;
}
function askToken() {
  $('token-form').hidden = false;
  setConn('token needed', 'bad');
}
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
  $('token').value = '';
  $('token-form').hidden = true;
  state.mcp = null;
  startStream();
  loadTools();
});

function setConn(text, cls = '') {
  const c = $('conn');
  c.textContent = text;
  c.className = `badge ${cls}`;
}

// ---- small helpers ----

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k ?? ''));
  return e;
}
function fmtSeconds(s) {
  if (s === undefined || s === null || !isFinite(s)) return '';
  if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(1)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(0)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
function fmtRate(r) { return r ? r.toFixed(r < 10 ? 2 : 0) : '0'; }
function replaceRows(tbody, rows) { tbody.replaceChildren(...rows); }

// ---- SSE over fetch ----

/** Reads an SSE body: ON(event, data) for each event. */
async function readSse(body, on) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(buf[i] === '\r' ? i + 4 : i + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const k = c < 0 ? line : line.slice(0, c);
        const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (k === 'event') event = v;
        else if (k === 'data') data.push(v);
      }
      if (data.length) {
        if (on(event, data.join('\n')) === false) { reader.cancel().catch(() => {}); return; }
      }
    }
  }
}

let streamAbort = null;
async function startStream() {
  if (streamAbort) streamAbort.abort();
  const ac = new AbortController();
  streamAbort = ac;
  setConn('connecting');
  try {
    const res = await fetch('/ui/events', { headers: authHeaders({ Accept: 'text/event-stream' }), signal: ac.signal, cache: 'no-store' });
    if (res.status === 401) { askToken(); return; }
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    setConn('live', 'ok');
    await readSse(res.body, (event, data) => {
      const d = JSON.parse(data);
      if (event === 'snapshot') onSnapshot(d);
      else if (event === 'event') addEvent(d, true);
    });
    if (ac.signal.aborted) return;
    setConn('reconnecting', 'bad');
  } catch (e) {
    if (ac.signal.aborted) return;
    setConn('reconnecting', 'bad');
  }
  setTimeout(() => { if (streamAbort === ac) startStream(); }, 2000);
}

// ---- snapshots ----

function onSnapshot(s) {
  window.__mcpChainUi.snapshots++;
  $('version').textContent = `v${s.version}`;
  if (s.mcpPath) state.mcpPath = s.mcpPath;
  const now = Date.now();
  state.history.push({ t: now, traffic: s.traffic, backends: s.backends });
  while (state.history.length > 2 && now - state.history[0].t > HISTORY_MS) state.history.shift();
  renderBackends(s.backends);
  renderSessions(s.sessions);
  renderTraffic();
  for (const e of s.events ?? []) addEvent(e, false);
  renderEvents();
}

/** The snapshot at least MS before the last one (or the oldest kept). */
function past(ms) {
  const h = state.history;
  const last = h[h.length - 1];
  for (let i = h.length - 2; i >= 0; i--) if (last.t - h[i].t >= ms) return h[i];
  return h.length > 1 ? h[0] : null;
}

function renderBackends(list) {
  const before = past(10_000);
  const last = state.history[state.history.length - 1];
  const key = (x) => (x.session ? `${x.name}#${x.session}` : x.name);
  const rows = list.map((b) => {
    const old = before?.backends.find((x) => key(x) === key(b));
    const dt = before ? (last.t - before.t) / 1000 : 0;
    const rate = old && dt > 0 ? Math.max(0, b.requests - old.requests) / dt : 0;
    const n = old ? b.answered - old.answered : 0;
    const mean = n > 0 ? (b.seconds - old.seconds) / n : b.answered ? b.seconds / b.answered : undefined;
    const tr = el('tr', { 'data-backend': b.name, 'data-state': b.state, 'data-restarts': String(b.restarts) },
      el('td', {}, b.name, b.session ? el('span', { class: 'muted' }, ` (session #${b.session})`) : ''),
      el('td', {}, el('span', { class: `badge state-${b.state}` }, b.state)),
      el('td', {}, String(b.restarts)),
      el('td', {}, b.tools === undefined ? '' : String(b.tools)),
      el('td', {}, fmtRate(rate)),
      el('td', {}, String(b.errors)),
      el('td', {}, fmtSeconds(mean)),
      el('td', {}, b.protocol ?? ''),
      el('td', { class: 'reason' }, b.reason ?? ''));
    return tr;
  });
  replaceRows($('backends').tBodies[0], rows);
}

function renderSessions(s) {
  $('sessions-count').textContent = `(${s.count})`;
  const rows = s.list.sort((a, b) => a.serial - b.serial).map((x) => el('tr', { 'data-sid': x.sid },
    el('td', {}, el('code', {}, `${x.sid}…`)),
    el('td', {}, String(x.serial)),
    el('td', {}, x.client ?? ''),
    el('td', {}, x.principal ?? ''),
    el('td', {}, x.version ?? ''),
    el('td', {}, x.transport),
    el('td', {}, fmtSeconds(x.age)),
    el('td', {}, String(x.open))));
  replaceRows($('sessions').tBodies[0], rows);
  $('sessions-more').textContent = s.more ? `and ${s.more} more not listed` : '';
}

const OUTCOMES = ['ok', 'error', 'tool_error', 'given_up'];
function total(m) { return OUTCOMES.reduce((n, o) => n + (m?.[o] ?? 0), 0); }

function renderTraffic() {
  const h = state.history;
  const last = h[h.length - 1];
  const first = h[0];
  const ten = past(10_000);
  const methods = Object.keys(last.traffic).filter((k) => k !== 'latency_bounds');
  const rows = methods.sort().map((m) => {
    const now = last.traffic[m];
    const was = first.traffic[m] ?? {};
    const tenWas = ten?.traffic[m] ?? {};
    const dt = ten ? (last.t - ten.t) / 1000 : 0;
    const rate = dt > 0 ? (total(now) - total(tenWas)) / dt : 0;
    const cells = OUTCOMES.map((o) => el('td', {}, String((now[o] ?? 0) - (h.length > 1 ? was[o] ?? 0 : 0))));
    const answered = (x) => (x.ok ?? 0) + (x.error ?? 0) + (x.tool_error ?? 0);
    const n = answered(now) - (h.length > 1 ? answered(was) : 0);
    const secs = now.seconds - (h.length > 1 ? was.seconds ?? 0 : 0);
    return el('tr', { 'data-method': m }, el('td', {}, m), el('td', {}, fmtRate(rate)), ...cells,
      el('td', {}, n > 0 ? fmtSeconds(secs / n) : ''));
  });
  replaceRows($('traffic').tBodies[0], rows);
  renderSpark();
}

/** Requests per second between successive snapshots, as bars. */
function renderSpark() {
  const h = state.history;
  const svg = $('spark');
  const pts = [];
  for (let i = 1; i < h.length; i++) {
    const dt = (h[i].t - h[i - 1].t) / 1000;
    let n = 0;
    for (const m of Object.keys(h[i].traffic)) if (m !== 'latency_bounds') n += total(h[i].traffic[m]) - total(h[i - 1].traffic[m]);
    pts.push(dt > 0 ? Math.max(0, n / dt) : 0);
  }
  const max = Math.max(1, ...pts);
  const w = 300 / Math.max(60, pts.length);
  const NS = 'http://www.w3.org/2000/svg';
  const bars = pts.map((v, i) => {
    const r = document.createElementNS(NS, 'rect');
    const ht = (v / max) * 38;
    r.setAttribute('x', String(300 - (pts.length - i) * w));
    r.setAttribute('y', String(40 - ht));
    r.setAttribute('width', String(Math.max(0.5, w - 0.5)));
    r.setAttribute('height', String(ht));
    return r;
  });
  svg.replaceChildren(...bars);
  svg.setAttribute('aria-label', `requests per second, peak ${fmtRate(max)}`);
}

// ---- events ----

function addEvent(e, render) {
  if (state.events.has(e.serial)) return;
  state.events.set(e.serial, e);
  while (state.events.size > MAX_EVENTS) state.events.delete(state.events.keys().next().value);
  if (render) renderEvents();
}

function eventText(e) {
  const parts = [e.kind, e.what];
  if (e.source) parts.push(`[${e.source}]`);
  if (e.method) parts.push(e.method);
  if (e.name) parts.push(e.name);
  if (e.backend && e.backend !== e.source) parts.push(`→ ${e.backend}`);
  if (e.client) parts.push(`by ${e.client}`);
  if (e.code) parts.push(`(${e.code})`);
  if (e.detail) parts.push(`: ${e.detail}`);
  return parts.join(' ');
}

function renderEvents() {
  const list = [...state.events.values()].sort((a, b) => b.serial - a.serial);
  const items = list.map((e) => el('li', { class: `k-${e.kind}`, 'data-kind': e.kind, 'data-what': e.what ?? '' },
    el('time', {}, new Date(e.time * 1000).toLocaleTimeString()), ' ', eventText(e)));
  $('events').replaceChildren(...items);
}

// ---- the MCP client (the chain's own endpoint, same origin) ----

/** One JSON-RPC message MSG POSTed; the answer to its id (JSON or SSE), or null for a notification. */
async function mcpPost(msg) {
  const h = authHeaders({ 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' });
  if (state.mcp?.sid) { h['Mcp-Session-Id'] = state.mcp.sid; h['MCP-Protocol-Version'] = state.mcp.version; }
  const res = await fetch(state.mcpPath, { method: 'POST', headers: h, body: JSON.stringify(msg), cache: 'no-store' });
  if (res.status === 401) { askToken(); throw new Error('a bearer token is needed'); }
  if (res.status === 404 && state.mcp?.sid) { state.mcp = null; const e = new Error('session expired'); e.expired = true; throw e; }
  const sid = res.headers.get('Mcp-Session-Id');
  if (msg.id === undefined) { await res.text(); return { res, sid }; }
  const type = res.headers.get('Content-Type') ?? '';
  let answer = null;
  if (type.startsWith('text/event-stream')) {
    await readSse(res.body, (event, data) => {
      let m;
      try { m = JSON.parse(data); } catch { return true; }
      // read on to its end: a stream left early would wait to be resumed
      if (m.id === msg.id && (m.result !== undefined || m.error !== undefined)) answer = m;
      return true;
    });
  } else if (type.startsWith('application/json')) {
    answer = await res.json();
  } else {
    throw new Error(`HTTP ${res.status}`);
  }
  if (!answer) throw new Error(`no answer (HTTP ${res.status})`);
  return { res, sid, answer };
}

async function mcpSession() {
  if (state.mcp) return state.mcp;
  const init = await mcpPost({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'mcp-chain-ui', version: '1' } } });
  if (init.answer.error) throw new Error(init.answer.error.message);
  state.mcp = { sid: init.sid, nextId: 2, version: init.answer.result.protocolVersion ?? PROTOCOL };
  await mcpPost({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return state.mcp;
}

/** A request METHOD with PARAMS in the page's session (opened again once if it expired). */
async function mcpCall(method, params, again = true) {
  try {
    const s = await mcpSession();
    const { answer } = await mcpPost({ jsonrpc: '2.0', id: s.nextId++, method, params });
    return answer;
  } catch (e) {
    if (e.expired && again) return mcpCall(method, params, false);
    throw e;
  }
}

async function loadTools() {
  const sel = $('tool-select');
  try {
    const tools = [];
    let cursor;
    do {
      const a = await mcpCall('tools/list', cursor ? { cursor } : {});
      if (a.error) throw new Error(a.error.message);
      tools.push(...a.result.tools);
      cursor = a.result.nextCursor;
    } while (cursor && tools.length < 10_000);
    state.tools = tools.sort((x, y) => x.name.localeCompare(y.name));
    sel.replaceChildren(el('option', { value: '' }, `choose one of ${tools.length} tools`),
      ...state.tools.map((t) => el('option', { value: t.name }, t.name)));
  } catch (e) {
    sel.replaceChildren(el('option', { value: '' }, `cannot list tools: ${e.message}`));
  }
  renderForm();
}

/** A form made from the chosen tool's inputSchema. */
function renderForm() {
  const form = $('call-form');
  const tool = state.tools.find((t) => t.name === $('tool-select').value);
  $('tool-desc').textContent = tool?.description ?? '';
  if (!tool) { form.replaceChildren(); return; }
  const props = tool.inputSchema?.properties ?? {};
  const required = new Set(tool.inputSchema?.required ?? []);
  const fields = Object.entries(props).map(([name, sch]) => field(name, sch ?? {}, required.has(name)));
  form.replaceChildren(...fields, el('button', { type: 'submit', id: 'call-submit' }, `call ${tool.name}`));
}

function field(name, sch, required) {
  const label = el('label', {}, `${name}${required ? ' *' : ''} `);
  const type = Array.isArray(sch.type) ? sch.type.find((t) => t !== 'null') : sch.type;
  let input;
  if (Array.isArray(sch.enum)) {
    input = el('select', {}, ...(required ? [] : [el('option', { value: '' }, '')]),
      ...sch.enum.map((v) => el('option', { value: JSON.stringify(v) }, String(v))));
    input.dataset.kind = 'enum';
  } else if (type === 'boolean') {
    input = el('input', { type: 'checkbox' });
    if (sch.default === true) input.checked = true;
    input.dataset.kind = 'boolean';
  } else if (type === 'number' || type === 'integer') {
    input = el('input', { type: 'number', step: type === 'integer' ? '1' : 'any' });
    if (sch.default !== undefined) input.value = String(sch.default);
    input.dataset.kind = type;
  } else if (type === 'string') {
    input = el('input', { type: 'text' });
    if (sch.default !== undefined) input.value = String(sch.default);
    input.dataset.kind = 'string';
  } else {
    input = el('textarea', { placeholder: type === 'array' ? '[ ]' : '{ }' });
    if (sch.default !== undefined) input.value = JSON.stringify(sch.default);
    input.dataset.kind = 'json';
  }
  input.name = name;
  if (required && input.type !== 'checkbox') input.required = true;
  if (sch.description) label.title = sch.description;
  label.append(input);
  return label;
}

/** The arguments the form holds. */
function formArgs() {
  const args = {};
  for (const input of $('call-form').querySelectorAll('[name]')) {
    const k = input.dataset.kind;
    if (k === 'boolean') { args[input.name] = input.checked; continue; }
    if (input.value === '') continue;
    if (k === 'enum' || k === 'json') args[input.name] = JSON.parse(input.value);
    else if (k === 'integer') args[input.name] = parseInt(input.value, 10);
    else if (k === 'number') args[input.name] = Number(input.value);
    else args[input.name] = input.value;
  }
  return args;
}

function showResult(status, cls, text) {
  $('call-result').hidden = false;
  $('call-status').textContent = status;
  $('call-status').className = `badge ${cls}`;
  $('call-output').textContent = text;
}

$('tool-select').addEventListener('change', renderForm);
$('tools-reload').addEventListener('click', loadTools);
$('call-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const name = $('tool-select').value;
  let args;
  try { args = formArgs(); } catch (err) { showResult('bad input', 'bad', `not JSON: ${err.message}`); return; }
  showResult('calling', '', '');
  try {
    const a = await mcpCall('tools/call', { name, arguments: args });
    if (a.error) {
      showResult(`error ${a.error.code}`, 'bad', a.error.message);
    } else {
      const r = a.result;
      const text = (r.content ?? []).map((c) => (c.type === 'text' ? c.text : `[${c.type}] ${JSON.stringify(c).slice(0, 2000)}`)).join('\n');
      showResult(r.isError ? 'isError' : 'ok', r.isError ? 'bad' : 'ok',
        text || JSON.stringify(r.structuredContent ?? r, null, 2));
    }
  } catch (err) {
    showResult('failed', 'bad', err.message);
  }
});

startStream();
loadTools();
