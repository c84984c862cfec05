#!/usr/bin/env bash
#
# bench/telemetry.sh: what OpenTelemetry traces cost mcp-chain.
#
# In one run, with the three cases alternating in a rotated order every
# round, mcp-bench-load drives tools/call echo at concurrency C through
# mcp-chain (stdio) in front of mcp-bench-server:
#
#   off      no "telemetry" section
#   on-1.0   traces to a collector that answers (a small node receiver
#            taking OTLP/HTTP JSON on a loopback port), sampling 1.0:
#            two spans a call, the context put in every forwarded request
#   on-0.01  the same with sampling 0.01
#
# and reports each case's median throughput, its ratio to "off", and
# mcp-chain's CPU per request (user+system of the mcp-chain process alone
# during the measured phase: mcp-bench-load reads it from the child's CPU
# clock, the figure /proc/PID/stat's utime+stime gives), plus the spans the
# receiver took.
#
# usage: bench/telemetry.sh [-r ROUNDS] [-n N] [-c C]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build}
rounds=5
n=20000
c=16
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-c) c=$2; shift 2 ;;
	*) sed -n '/^# usage:/p' "$0" >&2; exit 2 ;;
	esac
done

log() { printf '[telemetry.sh] %s\n' "$*" >&2; }

ninja -C "$build" mcp-chain bench/mcp-bench-server bench/mcp-bench-load >&2
chain="$build/mcp-chain"
server="$build/bench/mcp-bench-server"
load="$build/bench/mcp-bench-load"
tmp=$(mktemp -d)
receiver_pid=
cleanup() {
	[ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# The collector: answers every POST 200 and counts the spans it took.
cat >"$tmp/receiver.mjs" <<'JS'
import http from 'node:http';
import { writeFileSync } from 'node:fs';
let spans = 0;
const srv = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    try {
      for (const rs of JSON.parse(body).resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? []) spans += (ss.spans ?? []).length;
    } catch { /* not ours */ }
    writeFileSync(process.argv[3], String(spans));
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
});
srv.listen(0, '127.0.0.1', () => writeFileSync(process.argv[2], String(srv.address().port)));
JS
node "$tmp/receiver.mjs" "$tmp/port" "$tmp/spans" &
receiver_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
port=$(cat "$tmp/port")
log "receiver on 127.0.0.1:$port"

# A configuration for case $1 into $2.
write_config() {
	local tel=
	case $1 in
	on-1.0) tel=1.0 ;;
	on-0.01) tel=0.01 ;;
	esac
	node -e '
		const [server, port, ratio] = process.argv.slice(1);
		const cfg = { mcpServers: { echo: { command: server, args: [] } } };
		if (ratio) cfg.telemetry = { endpoint: `http://127.0.0.1:${port}/v1/traces`, sampling: Number(ratio) };
		process.stdout.write(JSON.stringify(cfg, null, 2) + "\n");
	' "$server" "$port" "$tel" >"$2"
}

cases=(off on-1.0 on-0.01)
for k in "${cases[@]}"; do write_config "$k" "$tmp/$k.json"; done
: >"$tmp/records"
warm=$(( n / 10 > 1000 ? 1000 : n / 10 ))
for r in $(seq 1 "$rounds"); do
	for i in 0 1 2; do
		k=${cases[$(( (i + r) % 3 ))]}
		line=$("$load" -n "$n" -c "$c" --warmup "$warm" -- "$chain" --config "$tmp/$k.json" \
			--log-level warn 2>>"$tmp/load.log") || true
		printf '{"case":"%s","round":%d,%s\n' "$k" "$r" "${line#\{}" >>"$tmp/records"
		log "$k r$r $(printf '%s' "$line" | sed -E 's/.*"rps":([0-9.]+).*"child_cpu_us_per_req":([0-9.]+).*/rps=\1 cpu_us=\2/')"
	done
done

node -e '
	const fs = require("fs");
	const [file, spansFile, c, n, rounds] = process.argv.slice(1);
	const recs = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
	const med = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
	const by = {};
	for (const r of recs) (by[r.case] ??= []).push(r);
	const off = med(by.off.map((r) => r.rps));
	console.log(`## Traces: tools/call echo, c=${c}, n=${n}, ${rounds} rounds (medians)\n`);
	console.log("| case | rps | vs off | mcp-chain CPU us/req | errors |");
	console.log("|---|---|---|---|---|");
	for (const k of ["off", "on-1.0", "on-0.01"]) {
		const rs = by[k] ?? [];
		const rps = med(rs.map((r) => r.rps));
		const cpu = med(rs.map((r) => r.child_cpu_us_per_req));
		const errs = rs.reduce((a, r) => a + (r.errors ?? 0), 0);
		console.log(`| ${k} | ${rps.toFixed(0)} | ${(rps / off).toFixed(3)}x | ${cpu.toFixed(2)} | ${errs} |`);
	}
	const spans = fs.existsSync(spansFile) ? fs.readFileSync(spansFile, "utf8") : "0";
	console.log(`\nSpans the receiver took over the run: ${spans}`);
' "$tmp/records" "$tmp/spans" "$c" "$n" "$rounds"
