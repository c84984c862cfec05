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

const PATHS = ['direct', 'relay', 'line-relay', 'mcp-chain', 'mcp-chain+5mw', 'sdk-proxy',
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

// The median over rounds of a/b for field f, pairing runs of the same round.
function pairedRatio(kind, c, pa, pb, f) {
  const xs = [];
  for (const a of select(kind, pa, c).filter(clean)) {
    const b = select(kind, pb, c).find((r) => r.round === a.round && clean(r));
    if (b && b[f] > 0) xs.push(a[f] / b[f]);
  }
  return median(xs);
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
emit('Paths: **direct** = mcp-bench-load → mcp-bench-server; **relay** = through '
  + 'mcp-bench-relay (splice, no parsing: the floor for any stdio proxy); **line-relay** = '
  + 'mcp-bench-relay --lines (read/write through user space, whole lines only: the least a '
  + 'proxy that looks at each message does, still without parsing); **mcp-chain** = '
  + 'through mcp-chain with one backend and no middleware; **mcp-chain+5mw** = the same with five modules (auth, log to a file, policy, rewrite, limit); **sdk-proxy** = through a '
  + 'minimal proxy written with the official TypeScript SDK.');
emit();

const concs = [...new Set(select('echo').map((r) => r.c))].sort((a, b) => a - b);
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
  // The "(≤ 1.25× direct)" assumed a relay at 1.09× direct; where the
  // relay alone is over 1.25×, no stdio proxy can meet it, and the row says so.
  const rd = pairedRatio('echo', c1, 'mcp-chain', 'direct', 'p50_us');
  const relayd = pairedRatio('echo', c1, 'relay', 'direct', 'p50_us');
  target(`c=${c1} p50 latency vs direct`, ratio(rd), '≤ 1.25×',
    !Number.isFinite(rd) ? null : rd <= 1.25 ? true
      : relayd > 1.25 ? `cannot: the byte relay alone is ${ratio(relayd)} direct` : false);
  const r2 = pairedRatio('echo', c16, 'mcp-chain', 'relay', 'rps');
  target(`c=${c16} rps vs relay`, ratio(r2), '≥ 0.80×', Number.isFinite(r2) ? r2 >= 0.8 : null);
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
  const rb = pairedRatio('echo', c16, 'mcp-chain', 'mcp-chain@base', 'rps');
  if (Number.isFinite(rb))
    target(`c=${c16} rps vs the base binary (BASE_CHAIN)`, ratio(rb), '≥ 0.95×', rb >= 0.95);
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
emit('## Targets (mcp-chain, same run)');
emit();
emit('| target | measured | limit | result |');
emit('|---|---|---|---|');
for (const t of T) emit(t);
emit();

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

const httpRecs = select('http-echo');
if (httpRecs.length) {
  emit('## HTTP fronts (Streamable HTTP, tools/call echo, one session)');
  emit();
  emit('Each front wraps mcp-bench-server on stdio; node http-load.mjs drives it (keep-alive,');
  emit('`Accept: application/json, text/event-stream` as a client must). RSS is the front\'s own');
  emit('process (VmHWM), not its child. Medians over rounds.');
  emit();
  emit('| front | c | rps | p50 µs | p99 µs | peak RSS kB | vs mcp-chain rps |');
  emit('|---|---|---|---|---|---|---|');
  for (const c of [...new Set(httpRecs.map((r) => r.c))].sort((a, b) => a - b)) {
    for (const p of [...new Set(httpRecs.map((r) => r.path))]) {
      const rs = select('http-echo', p, c);
      emit(`| ${p} | ${c} | ${fmt(med(rs, 'rps'))} | ${fmt(med(rs, 'p50_us'))} | ${fmt(med(rs, 'p99_us'))} `
        + `| ${fmt(med(rs, 'rss_kb'))} | ${ratio(pairedRatio('http-echo', c, p, 'http:mcp-chain', 'rps'))} |`);
    }
  }
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
