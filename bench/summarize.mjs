/*
 * summarize.mjs: turns the JSON lines written by bench/run.sh (one per
 * mcp-bench-load run, tagged with path, case and round) into the Markdown
 * report: medians per path, paired ratios against the direct and relay
 * paths, the project's targets with pass/fail, and the extra cases.
 *
 * usage: node summarize.mjs RECORDS.jsonl META.json
 */
import { readFileSync } from 'node:fs';

const [recordsFile, metaFile] = process.argv.slice(2);
const meta = JSON.parse(readFileSync(metaFile, 'utf8'));
const records = readFileSync(recordsFile, 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));

const PATHS = ['direct', 'relay', 'line-relay', 'scan-relay', 'mcp-chain', 'mcp-chain+5mw', 'sdk-proxy',
  'mcp-chain@base', 'mcp-chain+5mw@base'];
const out = [];

// Append a line to the report.
function emit(line = '') {
  out.push(line);
}

// The median of the finite numbers in xs, or NaN.
function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Format a number with d decimals, or "–" when missing.
function fmt(x, d = 0) {
  if (!Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

// Format a ratio as "1.23×".
function ratio(x) {
  return Number.isFinite(x) ? `${x.toFixed(2)}×` : '–';
}

// Records of one case (and optionally one path and concurrency).
function select(kind, path, c) {
  return records.filter((r) => r.case === kind && (path === undefined || r.path === path)
    && (c === undefined || r.c === c) && !r.skipped);
}

// True if a record is a clean run (all answered, nothing fatal).
function clean(r) {
  return r.errors === 0 && !r.fatal && r.ok === r.n;
}

// The median of field f over the clean records rs.
function med(rs, f) {
  return median(rs.filter(clean).map((r) => r[f]));
}

// The per-round ratios a/b for field f, pairing runs of the same round.
function pairedRatios(kind, c, pa, pb, f) {
  const xs = [];
  for (const a of select(kind, pa, c).filter(clean)) {
    const b = select(kind, pb, c).find((r) => r.round === a.round && clean(r));
    if (b && b[f] > 0) xs.push(a[f] / b[f]);
  }
  return xs;
}

// Their median.
function pairedRatio(kind, c, pa, pb, f) {
  return median(pairedRatios(kind, c, pa, pb, f));
}

// The median of the per-round ratios with their range: "0.84× (rounds 0.73–0.93)",
// so that a reader sees how far one run's median can move.
function ratioWithRange(xs) {
  const v = xs.filter((x) => Number.isFinite(x));
  if (v.length < 2) return ratio(median(v));
  return `${ratio(median(v))} (rounds ${Math.min(...v).toFixed(2)}–${Math.max(...v).toFixed(2)})`;
}

// Reasons recorded for skipped runs of a case.
function skips(kind) {
  return records.filter((r) => r.case === kind && r.skipped);
}

// A short description of why the runs in rs were not clean.
function failures(rs) {
  const bad = rs.filter((r) => !clean(r));
  if (bad.length === 0) return '';
  const why = [...new Set(bad.map((r) => r.fatal ?? `${r.errors} errors`))];
  return `${bad.length}/${rs.length} runs failed (${why.join('; ')})`;
}

emit('# mcp-chain benchmark results');
emit();
emit(`- Date: ${meta.date}`);
emit(`- Machine: ${meta.nproc} CPUs (${meta.cpu}), ${meta.mem}, Linux ${meta.kernel}`);
emit(`- mcp-chain: ${meta.chain_version} (commit ${meta.commit}); node ${meta.node}; `
  + `@modelcontextprotocol/sdk ${meta.sdk}`);
emit(`- Command: \`${meta.command}\``);
emit(`- Rounds: ${meta.rounds}; in each round every path runs once per concurrency, `
  + 'in an order rotated every round (A/B alternation in one run). Figures are medians '
  + 'over rounds; ratios are medians of the per-round ratios (paired runs).');
emit();
// The stdio comparison and its targets (absent from a --http-only run).
const STDIO_CASES = ['echo', 'progress', 'progress-burst', 'list-1x10000', 'list-20x500', 'idle-3',
  'blob', 'inflight', 'startup'];
const hasStdio = records.some((r) => STDIO_CASES.includes(r.case));
const concs = [...new Set(select('echo').map((r) => r.c))].sort((a, b) => a - b);
if (concs.length) {
  emit('Paths: **direct** = mcp-bench-load → mcp-bench-server; **relay** = through '
    + 'mcp-bench-relay (splice, no parsing: the floor for any stdio proxy); **line-relay** = '
    + 'mcp-bench-relay --lines (read/write through user space, whole lines only: the least a '
    + 'proxy that looks at each message does, still without parsing); **scan-relay** = '
    + 'mcp-bench-relay --scan (the same, each line also checked by mcp-chain\'s validating '
    + 'scanner: the least a proxy that refuses malformed messages does, with no id mapping); '
    + '**mcp-chain** = '
    + 'through mcp-chain with one backend and no middleware; **mcp-chain+5mw** = the same with five modules (auth, log to a file, policy, rewrite, limit); **sdk-proxy** = through a '
    + 'minimal proxy written with the official TypeScript SDK.');
  emit();

  emit(`## tools/call echo, n=${meta.n} per run`);
  emit();
  emit('| path | c | rps | p50 µs | p90 µs | p99 µs | proxy CPU µs/req | all CPU µs/req '
    + '| proxy peak RSS kB | rps vs direct | rps vs relay | p50 vs direct | p50 vs relay | runs |');
  emit('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const c of concs) {
    for (const p of PATHS) {
      const rs = select('echo', p, c);
      if (rs.length === 0) continue;
      const isDirect = p === 'direct';
      emit(`| ${p} | ${c} | ${fmt(med(rs, 'rps'))} | ${fmt(med(rs, 'p50_us'), 1)} `
        + `| ${fmt(med(rs, 'p90_us'), 1)} | ${fmt(med(rs, 'p99_us'), 1)} `
        + `| ${isDirect ? '(server) ' : ''}${fmt(med(rs, 'child_cpu_us_per_req'), 2)} `
        + `| ${fmt(med(rs, 'tree_cpu_us_per_req'), 2)} `
        + `| ${isDirect ? '(server) ' : ''}${fmt(med(rs, 'child_peak_rss_kb'))} `
        + `| ${ratio(pairedRatio('echo', c, p, 'direct', 'rps'))} `
        + `| ${ratio(pairedRatio('echo', c, p, 'relay', 'rps'))} `
        + `| ${ratio(pairedRatio('echo', c, p, 'direct', 'p50_us'))} `
        + `| ${ratio(pairedRatio('echo', c, p, 'relay', 'p50_us'))} `
        + `| ${rs.filter(clean).length}/${rs.length} |`);
    }
  }
  emit();
  emit('"proxy CPU" is the CPU time of the process the load driver spawned (the proxy; for '
    + '*direct* the server itself) during the measured phase, from its POSIX CPU clock; '
    + '"all CPU" adds every descendant (the backend server). "peak RSS" is that process\'s '
    + 'VmHWM read from /proc just before it is told to exit (wait4\'s ru_maxrss would be '
    + 'the largest of the proxy and the backend it reaped, not the proxy\'s own).');
  for (const p of PATHS) {
    for (const c of concs) {
      const f = failures(select('echo', p, c));
      if (f) emit(`\n**${p}, c=${c}:** ${f}`);
    }
  }
  emit();
}

// ---- targets ----
const T = [];
// Add a target row: name, measured value text, limit text, pass (bool or null).
// A string for pass is written as the result (a reason the target cannot be met).
function target(name, value, limit, pass) {
  const res = typeof pass === 'string' ? pass : pass === null ? 'n/a' : pass ? 'PASS' : '**MISS**';
  T.push(`| ${name} | ${value} | ${limit} | ${res} |`);
}
// The largest of field f over the clean records rs, or NaN.
function maxOf(rs, f) {
  const v = rs.filter(clean).map((r) => r[f]).filter((x) => Number.isFinite(x));
  return v.length ? Math.max(...v) : NaN;
}
const c1 = concs.includes(1) ? 1 : concs[0];
const c16 = concs.includes(16) ? 16 : concs[concs.length - 1];
{
  const r = pairedRatio('echo', c1, 'mcp-chain', 'relay', 'p50_us');
  target(`c=${c1} p50 latency vs relay`, ratio(r), '≤ 1.15×', Number.isFinite(r) ? r <= 1.15 : null);
  // The issue's "(≤ 1.25× direct)" assumed a relay at 1.09× direct; where the
  // relay alone is over 1.25×, no stdio proxy can meet it, and the row says so.
  const rd = pairedRatio('echo', c1, 'mcp-chain', 'direct', 'p50_us');
  const relayd = pairedRatio('echo', c1, 'relay', 'direct', 'p50_us');
  target(`c=${c1} p50 latency vs direct`, ratio(rd), '≤ 1.25×',
    !Number.isFinite(rd) ? null : rd <= 1.25 ? true
      : relayd > 1.25 ? `cannot: the byte relay alone is ${ratio(relayd)} direct` : false);
  const r2s = pairedRatios('echo', c16, 'mcp-chain', 'relay', 'rps');
  const r2 = median(r2s);
  target(`c=${c16} rps vs relay`, ratioWithRange(r2s), '≥ 0.80×', Number.isFinite(r2) ? r2 >= 0.8 : null);
  const r3 = pairedRatio('echo', c16, 'mcp-chain', 'sdk-proxy', 'rps');
  target(`c=${c16} rps vs SDK proxy`, ratio(r3), '≥ 6×', Number.isFinite(r3) ? r3 >= 6 : null);
  const cpu = med(select('echo', 'mcp-chain', c16), 'child_cpu_us_per_req');
  target(`mcp-chain CPU per request at c=${c16}`, `${fmt(cpu, 2)} µs`, '≤ 4 µs',
    Number.isFinite(cpu) ? cpu <= 4 : null);
  const rssAll = select('echo', 'mcp-chain', c16).filter(clean).map((r) => r.child_peak_rss_kb);
  const rss = rssAll.length ? Math.max(...rssAll) : NaN;
  target(`mcp-chain peak RSS at c=${c16} (max over rounds)`, `${fmt(rss)} kB`, '≤ 8 MiB (8192 kB)',
    Number.isFinite(rss) ? rss <= 8192 : null);
  const idle = select('idle-3', 'mcp-chain');
  const idleRss = maxOf(idle, 'child_peak_rss_kb');
  target('mcp-chain peak RSS with three idle backends (max over runs)',
    idle.length ? `${fmt(idleRss)} kB` : 'not run', '≤ 4 MiB (4096 kB)',
    idle.length ? idle.every(clean) && idleRss <= 4096 : null);
  const rbs = pairedRatios('echo', c16, 'mcp-chain', 'mcp-chain@base', 'rps');
  const rb = median(rbs);
  if (Number.isFinite(rb))
    target(`c=${c16} rps vs the base binary (BASE_CHAIN)`, ratioWithRange(rbs), '≥ 0.95×', rb >= 0.95);
  const rb1 = pairedRatio('echo', c1, 'mcp-chain', 'mcp-chain@base', 'p50_us');
  if (Number.isFinite(rb1))
    target(`c=${c1} p50 vs the base binary (BASE_CHAIN)`, ratio(rb1), '≤ 1.05×', rb1 <= 1.05);
  const r5 = pairedRatio('echo', c16, 'mcp-chain+5mw', 'mcp-chain', 'rps');
  target(`c=${c16} rps, five-module pipeline vs no middleware`, ratio(r5), '≥ 0.70×',
    Number.isFinite(r5) ? r5 >= 0.7 : null);
  const pr = select('progress', 'mcp-chain');
  if (pr.length) {
    const good = pr.filter((r) => clean(r) && r.progress_received === r.progress_expected
      && r.progress_late === 0);
    const got = pr.map((r) => `${r.progress_received ?? 0}/${r.progress_expected ?? '?'}`
      + (r.progress_late ? ` (${r.progress_late} late)` : ''));
    target('progress notifications before their response', `${[...new Set(got)].join(', ')} `
      + `in ${good.length}/${pr.length} runs`, `${meta.steps}/${meta.steps}, none late`,
    good.length === pr.length);
  } else {
    target('progress notifications before their response', 'not run', `${meta.steps}/${meta.steps}`, null);
  }
  const l20 = select('list-20x500', 'mcp-chain');
  const l20p50 = med(l20, 'p50_us') / 1000;
  target('tools/list over 20 backends × 500 tools, p50', l20.length ? `${fmt(l20p50, 2)} ms` : 'not run',
    '≤ 10 ms', l20.length ? l20.every(clean) && l20p50 <= 10 : null);
  const blob = select('blob', 'mcp-chain');
  const blobX = maxOf(blob, 'child_peak_rss_kb') * 1024 / meta.blob_bytes;
  target(`one ${fmt(meta.blob_bytes / 1048576)} MiB result: peak RSS vs payload (max over runs)`,
    blob.length ? ratio(blobX) : 'not run', '≤ 3×', blob.length ? blob.every(clean) && blobX <= 3 : null);
  const inf = select('inflight', 'mcp-chain');
  const infErr = inf.reduce((a, r) => a + (r.errors ?? 0) + ((r.n ?? 0) - (r.ok ?? 0)), 0);
  target(`${inf.length ? inf[0].c : 1000} requests in flight: errors`,
    inf.length ? `${infErr} in ${inf.length} runs` : 'not run', '0',
    inf.length ? inf.every(clean) && infErr === 0 : null);
}
if (hasStdio) {
  emit('## Targets (mcp-chain, same run)');
  emit();
  emit('| target | measured | limit | result |');
  emit('|---|---|---|---|');
  for (const t of T) emit(t);
  emit();
}

// ---- extras ----
const progCases = [['progress', `${meta.steps} notifications over ${meta.progress_ms} ms`],
  ['progress-burst', `${meta.steps} notifications and the result written at once`]];
if (progCases.some(([k]) => select(k).length)) {
  emit('## Progress relay (tools/call slow with a progressToken)');
  emit();
  emit('| case | path | runs | received before response | late | never | out of order | p50 ms |');
  emit('|---|---|---:|---|---:|---:|---:|---:|');
  for (const [k, label] of progCases) {
    for (const p of PATHS) {
      const rs = select(k, p);
      if (!rs.length) continue;
      const sum = (f) => rs.reduce((a, r) => a + (r[f] ?? 0), 0);
      emit(`| ${label} | ${p} | ${rs.filter(clean).length}/${rs.length} `
        + `| ${sum('progress_received')}/${sum('progress_expected')} | ${sum('progress_late')} `
        + `| ${sum('progress_missing')} | ${sum('progress_disorder')} `
        + `| ${fmt(med(rs, 'p50_us') / 1000, 1)} |`);
    }
  }
  emit();
}

const listCases = [['list-1x10000', 'one backend, 10000 tools, pages of 500'],
  ['list-20x500', '20 backends × 500 tools (one page each)']];
if (listCases.some(([k]) => records.some((r) => r.case === k))) {
  emit('## tools/list, every page, repeatedly');
  emit();
  emit('| case | path | runs | tools | pages | p50 ms per listing | p90 ms | proxy CPU ms/listing | proxy peak RSS kB |');
  emit('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const [k, label] of listCases) {
    for (const p of PATHS) {
      const rs = select(k, p);
      if (!rs.length) continue;
      emit(`| ${label} | ${p} | ${rs.filter(clean).length}/${rs.length} | ${fmt(med(rs, 'tools_per_list'))} `
        + `| ${fmt(med(rs, 'pages_per_list'))} | ${fmt(med(rs, 'p50_us') / 1000, 2)} `
        + `| ${fmt(med(rs, 'p90_us') / 1000, 2)} | ${fmt(med(rs, 'child_cpu_us_per_req') / 1000, 2)} `
        + `| ${fmt(med(rs, 'child_peak_rss_kb'))} |`);
      const f = failures(rs);
      if (f) emit(`| | | ${f} | | | | | | |`);
    }
    for (const s of skips(k)) emit(`| ${label} | ${s.path} | skipped: ${s.skipped} | | | | | | |`);
  }
  emit();
}

if (select('idle-3').length) {
  emit('## Three idle backends (start, initialize, one listing)');
  emit();
  emit('| path | runs | tools | proxy peak RSS kB (median) | max kB |');
  emit('|---|---:|---:|---:|---:|');
  const rs = select('idle-3', 'mcp-chain');
  emit(`| mcp-chain | ${rs.filter(clean).length}/${rs.length} | ${fmt(med(rs, 'tools_per_list'))} `
    + `| ${fmt(med(rs, 'child_peak_rss_kb'))} | ${fmt(maxOf(rs, 'child_peak_rss_kb'))} |`);
  const f = failures(rs);
  if (f) emit(`| | ${f} | | | |`);
  emit();
}

if (select('blob').length || skips('blob').length) {
  emit(`## One ${fmt(meta.blob_bytes / 1048576)} MiB tools/call result`);
  emit();
  emit('| path | runs ok | time ms (p50) | MiB/s | proxy CPU ms | proxy peak RSS kB | note |');
  emit('|---|---:|---:|---:|---:|---:|---|');
  for (const p of [...PATHS, 'sdk-proxy (default limits)']) {
    const rs = select('blob', p);
    if (!rs.length) continue;
    const okRuns = rs.reduce((a, r) => a + (r.ok ?? 0), 0);
    const all = rs.reduce((a, r) => a + (r.n ?? 0), 0);
    emit(`| ${p} | ${okRuns}/${all} | ${fmt(med(rs, 'p50_us') / 1000, 1)} `
      + `| ${fmt(med(rs, 'mib_per_s'), 1)} | ${fmt(med(rs, 'child_cpu_us_per_req') / 1000, 1)} `
      + `| ${fmt(median(rs.map((r) => r.child_peak_rss_kb)))} | ${failures(rs)} |`);
  }
  emit();
}

if (select('inflight').length) {
  const c = select('inflight')[0].c;
  emit(`## ${c} requests in flight (tools/call echo, n=${select('inflight')[0].n})`);
  emit();
  emit('| path | runs | rps | p50 ms | p99 ms | max ms | proxy CPU µs/req | proxy peak RSS kB |');
  emit('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const p of PATHS) {
    const rs = select('inflight', p);
    if (!rs.length) continue;
    emit(`| ${p} | ${rs.filter(clean).length}/${rs.length} | ${fmt(med(rs, 'rps'))} `
      + `| ${fmt(med(rs, 'p50_us') / 1000, 2)} | ${fmt(med(rs, 'p99_us') / 1000, 2)} `
      + `| ${fmt(med(rs, 'max_us') / 1000, 2)} | ${fmt(med(rs, 'child_cpu_us_per_req'), 2)} `
      + `| ${fmt(median(rs.map((r) => r.child_peak_rss_kb)))} |`);
    const f = failures(rs);
    if (f) emit(`| | ${f} | | | | | | |`);
  }
  emit();
}

if (select('startup').length) {
  emit('## Start-up: spawn → initialize answered → first tools/call answered');
  emit();
  emit('| path | starts | initialize p50 ms | first call p50 ms | p90 ms | CPU ms per start (whole life) | peak RSS kB |');
  emit('|---|---:|---:|---:|---:|---:|---:|');
  for (const p of PATHS) {
    const rs = select('startup', p);
    if (!rs.length) continue;
    const starts = rs.reduce((a, r) => a + (r.ok ?? 0), 0);
    emit(`| ${p} | ${starts} | ${fmt(med(rs, 'init_p50_us') / 1000, 2)} `
      + `| ${fmt(med(rs, 'p50_us') / 1000, 2)} | ${fmt(med(rs, 'p90_us') / 1000, 2)} `
      + `| ${fmt(med(rs, 'child_cpu_us_per_req') / 1000, 2)} `
      + `| ${fmt(median(rs.map((r) => r.child_peak_rss_kb)))} |`);
  }
  emit();
}

// ---- HTTP fronts ----
const PEERS = ['http:supergateway', 'http:mcp-proxy'];
const CHAINS = ['mcp-chain', 'mcp-chain@base']; // the @base rows only with BASE_CHAIN
const FRONTS = [...CHAINS.map((p) => `http:${p}`), ...PEERS];
const ACCEPTS = ['both', 'json'];

// Records of HTTP case kind for front p, concurrency c and Accept a (any when undefined).
function hsel(kind, p, c, a) {
  return select(kind, p, c).filter((r) => a === undefined || r.accept === a);
}

// The clean records of hsel(...) by round.
function byRound(kind, p, c, a) {
  const m = new Map();
  for (const r of hsel(kind, p, c, a).filter(clean)) m.set(r.round, r);
  return m;
}

// Median over rounds of front's field (Accept a; front mcp-chain unless given)
// over the best peer's of the same round (Accept both); pick chooses the best
// of the peers' values.
function vsBestPeer(c, a, field, pick, front = 'http:mcp-chain') {
  const chain = byRound('http-echo', front, c, a);
  const peers = PEERS.map((p) => byRound('http-echo', p, c, 'both'));
  const xs = [];
  for (const [round, r] of chain) {
    const vals = peers.map((m) => m.get(round)?.[field]).filter((v) => v > 0);
    if (vals.length) xs.push(r[field] / pick(...vals));
  }
  return median(xs);
}

// Median over rounds of mcp-chain's HTTP c=1 p50 (Accept a) over its stdio p50.
function vsStdio(a) {
  const stdio = byRound('http-stdio', 'stdio:mcp-chain', 1);
  const xs = [];
  for (const [round, r] of byRound('http-echo', 'http:mcp-chain', 1, a)) {
    const s = stdio.get(round);
    if (s && s.p50_us > 0) xs.push(r.p50_us / s.p50_us);
  }
  return median(xs);
}

// How the measured calls of rs were answered: JSON, SSE, both, or '–'.
function answeredAs(rs) {
  const j = rs.reduce((x, r) => x + (r.resp_json ?? 0), 0);
  const e = rs.reduce((x, r) => x + (r.resp_sse ?? 0), 0);
  if (j && e) return `${fmt(j)} JSON, ${fmt(e)} SSE`;
  return j ? 'JSON' : e ? 'SSE' : '–';
}

// The sum of field f over rs.
function sumOf(rs, f) {
  return rs.reduce((x, r) => x + (r[f] ?? 0), 0);
}

const httpKinds = ['http-echo', 'http-progress', 'http-inflight', 'http-idle'];
const HT = [];
if (httpKinds.some((k) => select(k).length) || skips('http-echo').length) {
  const echoRecs = select('http-echo');
  const hconcs = [...new Set(echoRecs.map((r) => r.c))].filter(Number.isFinite).sort((a, b) => a - b);
  const peerJson406 = PEERS.every((p) => {
    const rs = hsel('http-echo', p, undefined, 'json');
    return rs.length > 0 && rs.every((r) => /HTTP 406/.test(r.fatal ?? ''));
  });
  emit(`## HTTP fronts (Streamable HTTP), n=${meta.n} per echo run`);
  emit();
  emit('Each front wraps mcp-bench-server on stdio and serves Streamable HTTP on 127.0.0.1; '
    + '`mcp-bench-load --url` drives the three alike: one keep-alive TCP connection per request '
    + 'in flight, each session opened with `initialize` + `notifications/initialized`, '
    + '`Mcp-Session-Id` and `MCP-Protocol-Version: 2025-06-18` on every later POST, every '
    + 'answer checked. **mcp-chain** = `mcp-chain --listen`, the echo server one backend shared '
    + 'by every session (`"scope": "shared"`); **supergateway** = supergateway 4.0.0 '
    + '`--stateful`, which starts one echo server per session; **mcp-proxy** = mcp-proxy '
    + '6.7.19, one echo server for all sessions. **Accept both** = `Accept: application/json, '
    + 'text/event-stream`, what the specification asks of a client (mcp-chain then answers '
    + 'every call with an SSE stream: it streams whenever the client accepts it); **Accept '
    + 'json** = `Accept: application/json` alone (mcp-chain then answers with a JSON body). '
    + (peerJson406 ? 'Both peers (the MCP SDK\'s transport) answer Accept json with 406 Not '
      + 'Acceptable at `initialize`: they have no JSON rows, and mcp-chain\'s JSON figures are '
      + 'compared with their SSE ones. ' : '')
    + '"answered as" counts the measured calls by the Content-Type of the response that '
    + 'carried their answer. "server" figures are the front\'s own process (CPU clock over '
    + 'the measured phase; VmHWM), not the echo servers below it; "all CPU" adds them. '
    + '**stdio:mcp-chain** is mcp-chain on stdio in the same rounds (c=1 and c=16), for the '
    + 'c=1 target and the CPU comparison. **mcp-chain@base** (front and stdio), when present, '
    + 'is the same with the binary in BASE_CHAIN. '
    + 'Medians over rounds; ratios are medians of per-round ratios against the faster peer '
    + 'of that round (Accept both).');
  emit();
  emit('| front | Accept | c | answered as | rps | p50 µs | p90 µs | p99 µs | server CPU µs/req '
    + '| all CPU µs/req | server peak RSS kB | driver CPU µs/req | rps ÷ faster peer '
    + '| p50 ÷ faster peer | runs |');
  emit('|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const c of hconcs) {
    for (const a of ACCEPTS) {
      for (const p of FRONTS) {
        const rs = hsel('http-echo', p, c, a);
        if (!rs.length) continue;
        const ok = rs.filter(clean);
        const isChain = CHAINS.includes(p.slice(5));
        emit(`| ${p} | ${a} | ${c} | ${answeredAs(ok)} | ${fmt(med(rs, 'rps'))} `
          + `| ${fmt(med(rs, 'p50_us'), 1)} | ${fmt(med(rs, 'p90_us'), 1)} | ${fmt(med(rs, 'p99_us'), 1)} `
          + `| ${fmt(med(rs, 'child_cpu_us_per_req'), 2)} | ${fmt(med(rs, 'tree_cpu_us_per_req'), 2)} `
          + `| ${fmt(med(rs, 'child_peak_rss_kb'))} | ${fmt(med(rs, 'load_cpu_us_per_req'), 2)} `
          + `| ${isChain ? ratio(vsBestPeer(c, a, 'rps', Math.max, p)) : ''} `
          + `| ${isChain ? ratio(vsBestPeer(c, a, 'p50_us', Math.min, p)) : ''} `
          + `| ${ok.length}/${rs.length} |`);
      }
    }
    for (const sp of CHAINS.map((p) => `stdio:${p}`)) {
      const st = select('http-stdio', sp, c);
      if (!st.length) continue;
      emit(`| ${sp} | (stdio) | ${c} | – | ${fmt(med(st, 'rps'))} | ${fmt(med(st, 'p50_us'), 1)} `
        + `| ${fmt(med(st, 'p90_us'), 1)} | ${fmt(med(st, 'p99_us'), 1)} `
        + `| ${fmt(med(st, 'child_cpu_us_per_req'), 2)} | ${fmt(med(st, 'tree_cpu_us_per_req'), 2)} `
        + `| ${fmt(med(st, 'child_peak_rss_kb'))} | ${fmt(med(st, 'load_cpu_us_per_req'), 2)} `
        + `| | | ${st.filter(clean).length}/${st.length} |`);
    }
  }
  emit();
  emit('"driver CPU" is mcp-bench-load\'s own CPU per call: what the load generator costs, '
    + 'on the same cores.');
  emit();
  // the failed runs of each front and Accept, over every concurrency
  for (const p of FRONTS) {
    for (const a of ACCEPTS) {
      const rs = hsel('http-echo', p, undefined, a);
      const f = failures(rs);
      const cs = [...new Set(rs.filter((r) => !clean(r)).map((r) => r.c))];
      if (f) emit(`**${p}, Accept ${a}, c=${cs.join(', ')}:** ${f}\n`);
    }
  }
  for (const sp of CHAINS.map((p) => `stdio:${p}`)) {
    const stf = failures(select('http-stdio', sp));
    if (stf) emit(`**${sp}:** ${stf}\n`);
  }
  for (const s of skips('http-echo')) emit(`**${s.path}:** skipped: ${s.skipped}\n`);

  const prog = select('http-progress');
  if (prog.length) {
    emit(`### ${meta.steps} progress notifications over ${meta.progress_ms} ms, over SSE `
      + '(tools/call slow with a progressToken, Accept both)');
    emit();
    emit('Each notification is checked in the order of the POST\'s SSE stream: before the '
      + 'event that carries the result, after it (late), or never (no GET stream is open, so a '
      + 'notification that does not come on the POST\'s stream is lost to the client).');
    emit();
    emit('| front | runs | before the result | late | never | out of order | p50 ms |');
    emit('|---|---:|---|---:|---:|---:|---:|');
    for (const p of FRONTS) {
      const rs = select('http-progress', p);
      if (!rs.length) continue;
      emit(`| ${p} | ${rs.filter(clean).length}/${rs.length} `
        + `| ${sumOf(rs, 'progress_received')}/${sumOf(rs, 'progress_expected')} `
        + `| ${sumOf(rs, 'progress_late')} | ${sumOf(rs, 'progress_missing')} `
        + `| ${sumOf(rs, 'progress_disorder')} | ${fmt(med(rs, 'p50_us') / 1000, 1)} |`);
      const f = failures(rs);
      if (f) emit(`| | ${f} | | | | | |`);
    }
    emit();
  }

  const inf = select('http-inflight');
  if (inf.length) {
    emit(`### ${inf[0].c} requests in flight across ${inf[0].sessions} sessions `
      + `(tools/call echo, Accept both, n=${inf[0].n})`);
    emit();
    emit('| front | runs | errors | rps | p50 ms | p99 ms | max ms | server CPU µs/req '
      + '| server peak RSS kB | new connections (measured phase) |');
    emit('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const p of FRONTS) {
      const rs = select('http-inflight', p);
      if (!rs.length) continue;
      const errs = rs.reduce((x, r) => x + (r.errors ?? 0), 0);
      emit(`| ${p} | ${rs.filter(clean).length}/${rs.length} | ${fmt(errs)} | ${fmt(med(rs, 'rps'))} `
        + `| ${fmt(med(rs, 'p50_us') / 1000, 2)} | ${fmt(med(rs, 'p99_us') / 1000, 2)} `
        + `| ${fmt(med(rs, 'max_us') / 1000, 2)} | ${fmt(med(rs, 'child_cpu_us_per_req'), 2)} `
        + `| ${fmt(median(rs.map((r) => r.child_peak_rss_kb)))} | ${fmt(med(rs, 'connects'))} |`);
      const f = failures(rs);
      if (f) emit(`| | ${f} | | | | | | | | |`);
    }
    emit();
  }

  const idle = select('http-idle');
  if (idle.length) {
    emit(`### Idle sessions: the front's memory per session (${idle[0].idle_sessions} sessions)`);
    emit();
    emit('Session 1 is opened, the connections closed and, after '
      + `${idle[0].settle_ms} ms, the front's VmRSS read; then the other sessions are opened `
      + '(16 at a time), the connections closed and VmRSS read again after the same wait. '
      + 'KB per idle session = the growth ÷ (sessions − 1), the front\'s own process only: '
      + 'the processes below it (echo servers, mcp-chain\'s watchdog) are counted apart.');
    emit();
    emit('| front | runs | VmRSS, 1 session kB | VmRSS, all kB | KB per idle session | '
      + 'processes below | their VmRSS MB | handshake p50 ms |');
    emit('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const p of FRONTS) {
      const rs = select('http-idle', p);
      if (!rs.length) continue;
      emit(`| ${p} | ${rs.filter(clean).length}/${rs.length} | ${fmt(med(rs, 'rss_one_kb'))} `
        + `| ${fmt(med(rs, 'rss_all_kb'))} | ${fmt(med(rs, 'kb_per_session'), 2)} `
        + `| ${fmt(med(rs, 'backend_procs'))} | ${fmt(med(rs, 'backend_rss_kb') / 1024, 1)} `
        + `| ${fmt(med(rs, 'p50_us') / 1000, 2)} |`);
      const f = failures(rs);
      if (f) emit(`| | ${f} | | | | | | |`);
    }
    emit();
  }

  // ---- HTTP targets ----
  const verdict = (pass) => (typeof pass === 'string' ? pass : pass === null ? 'n/a'
    : pass ? 'PASS' : '**MISS**');
  const htarget = (name, value, limit, pass) => HT.push(`| ${name} | ${value} | ${limit} | ${verdict(pass)} |`);
  // A ratio target against the faster peer, or why it cannot be computed.
  const peerTarget = (name, x, limit, ok, c, a) => {
    const chainRuns = hsel('http-echo', 'http:mcp-chain', c, a);
    const peerRuns = PEERS.flatMap((p) => hsel('http-echo', p, c, 'both'));
    const why = !chainRuns.length && !peerRuns.length ? 'not run'
      : !chainRuns.some(clean) ? 'no clean mcp-chain run'
        : !peerRuns.some(clean) ? 'no clean peer run' : 'no round with both';
    htarget(name, Number.isFinite(x) ? ratio(x) : why, limit, Number.isFinite(x) ? ok(x) : null);
  };
  for (const c of [16, 64]) {
    for (const a of ACCEPTS) {
      peerTarget(`c=${c} rps, mcp-chain (Accept ${a}) ÷ the faster peer (Accept both)`,
        vsBestPeer(c, a, 'rps', Math.max), '≥ 20×', (x) => x >= 20, c, a);
    }
  }
  for (const a of ACCEPTS) {
    peerTarget(`c=1 p50, mcp-chain (Accept ${a}) ÷ the faster peer's (Accept both)`,
      vsBestPeer(1, a, 'p50_us', Math.min), '≤ 0.2×', (x) => x <= 0.2, 1, a);
  }
  for (const a of ACCEPTS) {
    const x = vsStdio(a);
    htarget(`c=1 p50, mcp-chain HTTP (Accept ${a}) ÷ mcp-chain stdio, same rounds`,
      Number.isFinite(x) ? ratio(x) : 'not run', '≤ 1.5×', Number.isFinite(x) ? x <= 1.5 : null);
  }
  {
    const rs = select('http-idle', 'http:mcp-chain');
    const kb = maxOf(rs, 'kb_per_session');
    const n = rs.length ? rs[0].idle_sessions : 1000;
    htarget(`mcp-chain memory per idle session, ${fmt(n)} sessions (max over runs, backends excluded)`,
      rs.length ? (Number.isFinite(kb) ? `${fmt(kb, 2)} KB` : failures(rs)) : 'not run', '≤ 16 KB',
      rs.length ? rs.every(clean) && kb <= 16 : null);
  }
  {
    const rs = select('http-progress', 'http:mcp-chain');
    const good = rs.filter((r) => clean(r) && r.progress_received === r.progress_expected
      && r.progress_late === 0 && r.progress_disorder === 0);
    htarget('progress notifications before their result over SSE',
      rs.length ? `${sumOf(rs, 'progress_received')}/${sumOf(rs, 'progress_expected')} in `
        + `${good.length}/${rs.length} runs` : 'not run',
      `${meta.steps}/${meta.steps} per call, none late`, rs.length ? good.length === rs.length : null);
  }
  {
    const rs = select('http-inflight', 'http:mcp-chain');
    const errs = sumOf(rs, 'errors');
    htarget(`${rs.length ? rs[0].c : 1000} requests in flight across `
      + `${rs.length ? rs[0].sessions : 100} sessions: errors`,
      rs.length ? `${fmt(errs)} in ${rs.length} runs` : 'not run', '0',
      rs.length ? rs.every(clean) && errs === 0 : null);
  }
  emit('### Targets (HTTP front, same run)');
  emit();
  emit('| target | measured | limit | result |');
  emit('|---|---|---|---|');
  for (const t of HT) emit(t);
  emit();

  issue33Targets(verdict);
  issue34Targets(verdict);
}

// The section "Bearer tokens (issue 34)": c=16 echo calls over HTTP (Accept
// json) with the auth module checking a static token and validating a JWT,
// in the same rounds; and the module's cost per check from mcp-bench-jwt.
function issue34Targets(verdict) {
  const st = byRound('http-auth-static', 'http:mcp-chain', 16, 'json');
  const jw = byRound('http-auth-jwt', 'http:mcp-chain', 16, 'json');
  const costs = select('jwt-cost', 'auth-module');
  if (!st.size && !jw.size && !costs.length) return;
  const per = (f) => [...jw].filter(([k]) => st.has(k) && st.get(k)[f] > 0).map(([k, r]) => r[f] / st.get(k)[f]);
  const rps = per('rps'), cpu = per('child_cpu_us_per_req');
  const medOf = (m, f) => median([...m.values()].map((r) => r[f]));
  emit('### Bearer tokens: JWT validation against static tokens (issue 34, same rounds)');
  emit();
  emit('| measure | static token | JWT (RS256, cached by hash) | JWT ÷ static | target | result |');
  emit('|---|---|---|---|---|---|');
  const x = median(rps);
  emit(`| c=16 rps, HTTP, Accept json | ${fmt(medOf(st, 'rps'))} | ${fmt(medOf(jw, 'rps'))} | `
    + `${rps.length ? ratioWithRange(rps) : 'not run'} | ≥ 0.95× | ${verdict(Number.isFinite(x) ? x >= 0.95 : null)} |`);
  emit(`| c=16 server CPU µs per request | ${fmt(medOf(st, 'child_cpu_us_per_req'), 2)} | `
    + `${fmt(medOf(jw, 'child_cpu_us_per_req'), 2)} | ${cpu.length ? ratioWithRange(cpu) : 'not run'} | | |`);
  emit();
  if (costs.length) {
    const m = (f) => fmt(median(costs.map((r) => r[f])), 2);
    emit(`The auth module's check, through the module as the front asks it (mcp-bench-jwt, `
      + `${costs[0].n} tokens per kind, medians of ${costs.length} runs): a cold validation (a token `
      + `seen for the first time: hash, issuer, signature, claims, principal) **${m('cold_rs256_us')} µs** `
      + `for RS256 and **${m('cold_es256_us')} µs** for ES256; a cached one ${m('warm_us')} µs; a `
      + `static token ${m('static_us')} µs. The front asks once at a request's head and once per `
      + 'request message of its body.');
    emit();
  }
}

// The per-round ratios of chain binary name's HTTP front (http-echo, c, Accept
// a) over its own stdio path in the same round (http-stdio, same c), for field f.
function vsOwnStdio(name, c, a, f) {
  const st = byRound('http-stdio', `stdio:${name}`, c);
  const xs = [];
  for (const [round, r] of byRound('http-echo', `http:${name}`, c, a)) {
    const s = st.get(round);
    if (s && s[f] > 0 && Number.isFinite(r[f])) xs.push(r[f] / s[f]);
  }
  return xs;
}

// Why a ratio of front runs hr to reference runs sr (named ref) could not be computed.
function whyMissing(hr, sr, ref) {
  if (!hr.length) return 'not run';
  if (!hr.some(clean)) return 'no clean run';
  if (!sr.length) return `${ref} not run`;
  return sr.some(clean) ? 'no round with both' : `no clean ${ref} run`;
}

// The section "HTTP front targets (issue 33)": for mcp-chain and, when it ran,
// mcp-chain@base side by side, the front's CPU and latency against the same
// binary's stdio path in the same rounds, its throughput against the faster
// peer, and its memory per idle session. verdict maps pass to the result text.
function issue33Targets(verdict) {
  const names = CHAINS.filter((p) => records.some((r) => !r.skipped
    && (r.path === `http:${p}` || r.path === `stdio:${p}`)));
  if (!names.length) return;
  const rows = [];
  // A row: label, limit, and per name a [value text, pass] pair.
  const row = (label, limit, cell) => rows.push([label, limit, ...names.map((p) => {
    const [text, pass] = cell(p);
    return `${text} | ${verdict(pass)}`;
  })]);
  // A cell of binary p's front (Accept a) over its stdio at concurrency c for
  // field f: the per-round ratios, then the medians as "front ÷ stdio" (d
  // decimals, unit); ok is the pass test.
  const ratioCell = (p, c, a, f, d, unit, ok) => {
    const xs = vsOwnStdio(p, c, a, f);
    const hr = hsel('http-echo', `http:${p}`, c, a);
    const sr = select('http-stdio', `stdio:${p}`, c);
    const x = median(xs);
    if (!Number.isFinite(x)) return [whyMissing(hr, sr, `stdio c=${c}`), null];
    return [`${ratioWithRange(xs)}; medians ${fmt(med(hr, f), d)} ÷ ${fmt(med(sr, f), d)} ${unit}`, ok(x)];
  };
  for (const a of ACCEPTS) {
    row(`c=16 server CPU per request, HTTP (Accept ${a}) ÷ stdio, same rounds`, '≤ 3×', (p) =>
      ratioCell(p, 16, a, 'child_cpu_us_per_req', 2, 'µs', (x) => x <= 3));
  }
  for (const [a, how] of [['json', 'JSON'], ['both', 'SSE']]) {
    row(`c=1 p50, HTTP (Accept ${a}: ${how} answers) ÷ stdio, same rounds`, '≤ 1.1×', (p) =>
      ratioCell(p, 1, a, 'p50_us', 1, 'µs', (x) => x <= 1.1));
  }
  row('c=16 rps, HTTP (Accept both) ÷ the faster of supergateway and mcp-proxy (Accept both)',
    '≥ 20×', (p) => {
      const x = vsBestPeer(16, 'both', 'rps', Math.max, `http:${p}`);
      if (Number.isFinite(x)) return [ratio(x), x >= 20];
      return [whyMissing(hsel('http-echo', `http:${p}`, 16, 'both'),
        PEERS.flatMap((q) => hsel('http-echo', q, 16, 'both')), 'peer'), null];
    });
  const idleN = select('http-idle').map((r) => r.idle_sessions).find(Number.isFinite);
  row(`memory per idle session${idleN ? `, ${fmt(idleN)} sessions` : ''} `
    + '(max over runs, backends excluded)', '≤ 1.93 KB', (p) => {
    const rs = select('http-idle', `http:${p}`);
    const kb = maxOf(rs, 'kb_per_session');
    if (!rs.length) return ['not run', null];
    return [Number.isFinite(kb) ? `${fmt(kb, 2)} KB` : failures(rs), rs.every(clean) && kb <= 1.93];
  });
  emit('## HTTP front targets (issue 33)');
  emit();
  emit('Each binary against itself in the same run: "server CPU" is the front\'s own process '
    + '(`child_cpu_us_per_req`), "stdio" that binary on stdio (`stdio:…` above) in the same '
    + 'round; a ratio is the median of the per-round ratios (range over rounds when more than '
    + 'one), followed by the medians of the two sides. Throughput is against the '
    + 'faster peer of the same round; memory per idle session is the idle case\'s growth ÷ '
    + '(sessions − 1), as above.');
  emit();
  emit(`| target | limit | ${names.map((p) => `${p} | result`).join(' | ')} |`);
  emit(`|---|---|${names.map(() => '---|---').join('|')}|`);
  for (const r of rows) emit(`| ${r.join(' | ')} |`);
  emit();
}

const otherSkips = records.filter((r) => r.skipped && !r.case.startsWith('list-'));
if (otherSkips.length) {
  emit('## Skipped');
  emit();
  for (const s of otherSkips) emit(`- ${s.case} / ${s.path}: ${s.skipped}`);
  emit();
}
emit('## Where the numbers come from');
emit();
emit('Profiles (callgrind instruction counts) and the reasoning behind each target that is met or');
emit('missed are in [ANALYSIS.md](ANALYSIS.md), written by hand for the run recorded here.');
emit();
if (meta.notes && meta.notes.length) {
  emit('## Notes');
  emit();
  for (const n of meta.notes) emit(`- ${n}`);
  emit();
}
process.stdout.write(out.join('\n'));
