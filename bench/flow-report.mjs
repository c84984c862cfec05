// bench/flow-report.mjs: the Markdown report of bench/flow.sh from its
// records (one JSON object a line: path, case, round, then what
// bench/flow-load.ts or mcp-bench-load printed) and the M_* environment
// flow.sh sets. Medians over rounds; a ratio is the median of the per-round
// ratios (the two runs of a round are paired).
//
//   node bench/flow-report.mjs RECORDS.jsonl

import { readFileSync } from 'node:fs';

const recs = readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const env = process.env;
const PATHS = ['flow-json', 'flow-cbor', 'http', 'stdio'];

/** The median of the numbers in XS (NaN when none). */
function median(xs) {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Mcp-chain's CPU per request in µs from record R, whichever driver wrote it. */
const cpu = (r) => r.chain_cpu_us_per_req ?? r.child_cpu_us_per_req;
/** Mcp-chain's peak RSS in kB from record R. */
const rss = (r) => r.chain_peak_rss_kb ?? r.child_peak_rss_kb;
/** The wall time of R's one operation in ms (blob runs: n = 1). */
const wall = (r) => r.wall_ms ?? (r.secs !== undefined ? r.secs * 1000 : NaN);

/** The records of PATH for CASE with concurrency C (any C when undefined), failed runs left out. */
function runs(path, kind, c) {
  return recs.filter((r) => r.path === path && r.case === kind && (c === undefined || r.c === c) && !r.fatal && !r.errors);
}

/** The median over rounds of F(record) for PATH, CASE, C. */
const med = (path, kind, c, f) => median(runs(path, kind, c).map(f));

/** The median of the per-round ratios F(A) / F(B) for paths A and B. */
function ratio(a, b, kind, c, f) {
  const rb = new Map(runs(b, kind, c).map((r) => [r.round, r]));
  return median(runs(a, kind, c).filter((r) => rb.has(r.round)).map((r) => f(r) / f(rb.get(r.round))));
}

/** N formatted with D decimals and thousands separators, or "n/a". */
function fmt(x, d = 0) {
  return Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : 'n/a';
}

const out = [];
const say = (s = '') => out.push(s);
say('# MCP-Flow benchmark: mcp-chain --flow against --listen and stdio');
say();
say(`${env.M_DATE}, ${env.M_NPROC} × ${env.M_CPU}, load average at the end ${env.M_LOAD}; commit ${env.M_COMMIT}; ${env.M_DENO}.`);
say(`Command: \`${env.M_COMMAND}\`.`);
say();
say('## tools/call echo');
say();
say('| c | path | requests/s | p50 | p99 | mcp-chain CPU per request | runs ok |');
say('|---:|---|---:|---:|---:|---:|---:|');
const concs = [...new Set(recs.filter((r) => r.case === 'echo' && r.c).map((r) => r.c))].sort((a, b) => a - b);
for (const c of concs) {
  for (const p of PATHS) {
    const all = recs.filter((r) => r.path === p && r.case === 'echo' && (r.c === c || (r.fatal && r.c === undefined)));
    say(`| ${c} | ${p} | ${fmt(med(p, 'echo', c, (r) => r.rps))} | ${fmt(med(p, 'echo', c, (r) => r.p50_us))} µs | ` +
      `${fmt(med(p, 'echo', c, (r) => r.p99_us))} µs | ${fmt(med(p, 'echo', c, cpu), 1)} µs | ${runs(p, 'echo', c).length} of ${all.length} |`);
  }
}
say();
say('Ratios against the HTTP front (median of the per-round ratios):');
say();
say('| c | path | requests/s | p50 | CPU per request |');
say('|---:|---|---:|---:|---:|');
for (const c of concs) {
  for (const p of ['flow-json', 'flow-cbor', 'stdio']) {
    say(`| ${c} | ${p} ÷ http | ${fmt(ratio(p, 'http', 'echo', c, (r) => r.rps), 2)}× | ` +
      `${fmt(ratio(p, 'http', 'echo', c, (r) => r.p50_us), 2)}× | ${fmt(ratio(p, 'http', 'echo', c, cpu), 2)}× |`);
  }
}

const blobs = recs.filter((r) => r.case === 'blob');
if (blobs.length) {
  say();
  say(`## One ${env.M_BLOB} MiB result`);
  say();
  say('| path | wall time | mcp-chain CPU | mcp-chain peak RSS (VmHWM) | runs ok |');
  say('|---|---:|---:|---:|---:|');
  for (const p of ['flow-cbor', 'http']) {
    say(`| ${p === 'http' ? 'http (one JSON response)' : `${p} (execution stream)`} | ${fmt(med(p, 'blob', undefined, wall))} ms | ` +
      `${fmt(med(p, 'blob', undefined, cpu) / 1000)} ms | ${fmt(med(p, 'blob', undefined, rss) / 1024, 1)} MiB | ` +
      `${runs(p, 'blob').length} of ${blobs.filter((r) => r.path === p).length} |`);
  }
  say();
  say(`flow ÷ http: wall time ${fmt(ratio('flow-cbor', 'http', 'blob', undefined, wall), 2)}×, ` +
    `CPU ${fmt(ratio('flow-cbor', 'http', 'blob', undefined, cpu), 2)}×, ` +
    `peak RSS ${fmt(ratio('flow-cbor', 'http', 'blob', undefined, rss), 2)}×.`);
}

say();
say('## Targets (from the MCP-Flow issue)');
say();
/** "met" or "NOT met" for OK (NaN-safe: "n/a"). */
const verdict = (ok, x) => (Number.isFinite(x) ? (ok ? 'met' : 'NOT met') : 'n/a');
for (const c of concs) {
  for (const p of ['flow-json', 'flow-cbor']) {
    const x = ratio(p, 'http', 'echo', c, cpu);
    say(`- ${p} CPU per request ≤ the HTTP front's at c=${c}: ${fmt(x, 2)}×, ${verdict(x <= 1, x)}`);
  }
}
if (blobs.length) {
  const w = ratio('flow-cbor', 'http', 'blob', undefined, wall);
  const m = ratio('flow-cbor', 'http', 'blob', undefined, rss);
  say(`- the ${env.M_BLOB} MiB result in less time than over HTTP: ${fmt(w, 2)}×, ${verdict(w < 1, w)}`);
  say(`- its peak RSS ≤ 1/4 of the HTTP path's: ${fmt(m, 2)}×, ${verdict(m <= 0.25, m)}`);
}
const failed = recs.filter((r) => r.fatal || r.errors);
say();
say('CPU per request is mcp-chain\'s own CPU time (user + system, every thread; not the backend\'s) over the ' +
  'measured phase divided by its requests: from its POSIX CPU clock (mcp-bench-load) and from ' +
  '/proc/PID/task/*/schedstat, the same clock (flow-load.ts; its /proc/PID/stat utime+stime, in ticks, ' +
  'is in the raw records as chain_stat_cpu_us_per_req). A fresh mcp-chain runs every measurement.');
if (failed.length) {
  say();
  say(`${failed.length} run(s) failed and are left out: ` +
    failed.map((r) => `${r.path}/${r.case}/r${r.round}: ${r.fatal ?? `${r.errors} errors`}`).join('; '));
}
process.stdout.write(out.join('\n') + '\n');
