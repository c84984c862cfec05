// bench/flow-load.ts: a closed-loop load driver for mcp-chain's MCP-Flow
// front (MCP over WebTransport), the MCP-Flow counterpart of mcp-bench-load.
//
//   deno run --unstable-net --allow-net --allow-read bench/flow-load.ts \
//     --url https://127.0.0.1:PORT/mcp-flow --hash HEX --pid PID \
//     [--encoding json|cbor] [--mode echo|blob] [-n N] [-c K] [--warmup W]
//     [--size B] [--bytes N] [--timeout S] [--clk-tck HZ]
//
// One session (web/mcp-flow.js on Deno's WebTransport client) to the chain
// at URL, whose certificate has the SHA-256 HEX; K requests in flight on its
// control stream until N have been answered, after W unmeasured ones. Echo
// mode calls tools/call echo {text} and checks the text came back; blob mode
// calls tools/call blob {bytes} and checks the result arrived whole on an
// execution stream. PID is the mcp-chain process: its CPU time is read
// before and after the measured phase, its VmHWM after it.
//
// Prints ONE JSON line on stdout: {"mode","encoding","n","c","ok","errors",
// "rps","p50_us","p99_us","max_us","wall_ms","chain_cpu_us_per_req",
// "chain_stat_cpu_us_per_req","chain_peak_rss_kb"} (field meanings: see
// bench/README.md, "MCP-Flow"), or {"fatal": "..."} and exit status 1.

import { connect } from '../web/mcp-flow.js';

type Opts = {
  url: string; hash: string; pid: number; encoding: string; mode: string;
  n: number; c: number; warmup: number; size: number; bytes: number; timeout: number; tck: number;
};

/** The command line as options, or an exception naming what is wrong. */
function parseArgs(argv: string[]): Opts {
  const o: Opts = { url: '', hash: '', pid: 0, encoding: 'json', mode: 'echo', n: 1000, c: 1,
    warmup: -1, size: 32, bytes: 1 << 20, timeout: 120, tck: 100 };
  const num: Record<string, keyof Opts> = { '-n': 'n', '-c': 'c', '--warmup': 'warmup', '--pid': 'pid',
    '--size': 'size', '--bytes': 'bytes', '--timeout': 'timeout', '--clk-tck': 'tck' };
  const str: Record<string, keyof Opts> = { '--url': 'url', '--hash': 'hash', '--encoding': 'encoding', '--mode': 'mode' };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (num[k]) {
      if (!/^\d+$/.test(v)) throw new Error(`${k}: not a number: ${v}`);
      (o as any)[num[k]] = Number(v);
    } else if (str[k]) {
      (o as any)[str[k]] = v;
    } else {
      throw new Error(`unknown option ${k}`);
    }
  }
  if (!o.url || !o.pid) throw new Error('--url and --pid are required');
  if (!['json', 'cbor'].includes(o.encoding)) throw new Error(`--encoding json or cbor, not ${o.encoding}`);
  if (!['echo', 'blob'].includes(o.mode)) throw new Error(`--mode echo or blob, not ${o.mode}`);
  if (o.n < 1 || o.c < 1 || o.tck < 1) throw new Error('-n, -c and --clk-tck must be at least 1');
  if (o.warmup < 0) o.warmup = o.mode === 'blob' ? 0 : Math.min(1000, Math.floor(o.n / 10));
  return o;
}

/** CPU time of process PID in µs: {stat: utime+stime from /proc/PID/stat
 * (clock ticks of 1/TCK s), exact: the sum over its threads of
 * /proc/PID/task/TID/schedstat's run time (ns; the clock behind
 * clock_getcpuclockid, which mcp-bench-load reads), or null}. */
function cpuUs(pid: number, tck: number): { stat: number; exact: number | null } {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');   /* f[0] is field 3, state */
  const ticks = Number(f[11]) + Number(f[12]);                    /* fields 14 and 15 */
  let exact: number | null = 0;
  try {
    for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
      exact += Number(Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/schedstat`).split(' ')[0]) / 1000;
    }
  } catch {
    exact = null;
  }
  return { stat: ticks * 1e6 / tck, exact };
}

/** VmHWM of process PID in kB (its peak resident set so far). */
function peakRssKb(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Number(m[1]) : -1;
}

/** The echo text of operation I: SIZE bytes that name it. */
function echoText(i: number, size: number): string {
  const s = `op-${i}-`;
  return s.length >= size ? s : s + 'x'.repeat(size - s.length);
}

/** Runs one operation I on CLIENT; throws when the answer is wrong. */
async function operation(client: any, o: Opts, i: number): Promise<void> {
  if (o.mode === 'echo') {
    const text = echoText(i, o.size);
    const r = await client.request('tools/call', { name: 'echo', arguments: { text } });
    if (r?.content?.[0]?.text !== text) throw new Error(`echo ${i}: wrong answer ${JSON.stringify(r).slice(0, 200)}`);
    return;
  }
  const r = await client.request('tools/call', { name: 'blob', arguments: { bytes: o.bytes } });
  const item = r?.content?.[0];
  if (item?.type !== 'stream') throw new Error(`blob: not on an execution stream: ${JSON.stringify(r).slice(0, 200)}`);
  if (item.bytes.length !== o.bytes) throw new Error(`blob: ${item.bytes.length} bytes, not ${o.bytes}`);
}

/** Runs COUNT operations, K at a time, numbered from FIRST; pushes each
 * one's latency (µs) to LAT; the number that failed. */
async function runPhase(client: any, o: Opts, first: number, count: number, lat: number[] | null): Promise<number> {
  let next = 0, errors = 0;
  const worker = async () => {
    while (next < count) {
      const i = first + next++;
      const t0 = performance.now();
      try {
        await operation(client, o, i);
        lat?.push((performance.now() - t0) * 1000);
      } catch (e) {
        if (errors++ < 3) console.error(`flow-load: ${(e as Error)?.message ?? e}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.c, count) }, worker));
  return errors;
}

/** The Q-quantile of the sorted array S (nearest rank). */
function quantile(s: number[], q: number): number {
  return s.length ? s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] : 0;
}

/** Connects, warms up, measures; the result record. */
async function main(o: Opts, tck: number): Promise<Record<string, unknown>> {
  /* mcp-flow.js is plain JS: its option types are inferred from defaults, so typed loosely here */
  const client = await (connect as any)(o.url, {
    serverCertificateHashes: o.hash ? [o.hash] : undefined, encodings: [o.encoding], datagrams: false,
    clientInfo: { name: 'flow-load', version: '1' },
  });
  if (client.encoding !== o.encoding) throw new Error(`the server chose ${client.encoding}, not ${o.encoding}`);
  const werr = await runPhase(client, o, 0, o.warmup, null);
  if (werr) throw new Error(`${werr} of ${o.warmup} warm-up operations failed`);
  const lat: number[] = [];
  const cpu0 = cpuUs(o.pid, tck);
  const t0 = performance.now();
  const errors = await runPhase(client, o, o.warmup, o.n, lat);
  const wallMs = performance.now() - t0;
  const cpu1 = cpuUs(o.pid, tck);
  const peak = peakRssKb(o.pid);
  await client.shutdown({ timeoutMs: 5000 });
  lat.sort((a, b) => a - b);
  const r2 = (x: number) => Math.round(x * 100) / 100;
  return {
    mode: o.mode, encoding: o.encoding, n: o.n, c: o.c, ok: lat.length, errors,
    rps: r2(lat.length / (wallMs / 1000)), p50_us: r2(quantile(lat, 0.5)), p99_us: r2(quantile(lat, 0.99)),
    max_us: r2(lat[lat.length - 1] ?? 0), wall_ms: r2(wallMs),
    chain_cpu_us_per_req: cpu0.exact === null ? r2((cpu1.stat - cpu0.stat) / o.n) : r2((cpu1.exact! - cpu0.exact) / o.n),
    chain_stat_cpu_us_per_req: r2((cpu1.stat - cpu0.stat) / o.n),
    chain_peak_rss_kb: peak,
  };
}

let opts: Opts;
try {
  opts = parseArgs(Deno.args);
} catch (e) {
  console.log(JSON.stringify({ fatal: String((e as Error).message) }));
  Deno.exit(2);
}
const timer = setTimeout(() => {
  console.log(JSON.stringify({ fatal: `no result within ${opts.timeout} s` }));
  Deno.exit(1);
}, opts.timeout * 1000);
try {
  console.log(JSON.stringify(await main(opts, opts.tck)));
  clearTimeout(timer);
  Deno.exit(0);
} catch (e) {
  console.log(JSON.stringify({ fatal: String((e as Error)?.message ?? e) }));
  Deno.exit(1);
}
