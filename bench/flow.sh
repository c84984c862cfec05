#!/usr/bin/env bash
#
# bench/flow.sh: mcp-chain's MCP-Flow front (MCP over WebTransport) against
# its Streamable HTTP front and its stdio front, in one run.
#
# Every path goes through mcp-chain to one mcp-bench-server on stdio
# ("scope": "shared"); a fresh mcp-chain is started for every measurement:
#
#   flow-json  bench/flow-load.ts (Deno, web/mcp-flow.js) -> mcp-chain --flow, JSON frames
#   flow-cbor  the same, CBOR frames
#   http       mcp-bench-load --url (Accept: application/json) -> mcp-chain --listen
#   stdio      mcp-bench-load -> mcp-chain on its stdin and stdout
#
# tools/call echo at each concurrency (default c=1 and c=16, n=3000), the
# paths in an order rotated every round: requests/s, latency p50 and p99,
# mcp-chain's CPU per request (its own CPU time over the measured phase, not
# the backend's, divided by n). Then one 64 MiB result (tools/call blob)
# over an execution stream (flow-cbor) and over the HTTP front: wall time,
# mcp-chain's CPU and its peak RSS (VmHWM). The Markdown report (medians
# over rounds; ratios: the median of the per-round ratios) goes to stdout
# and to bench/RESULTS-flow.md (raw runs to bench/RESULTS-flow.jsonl);
# progress goes to stderr.
#
# usage: bench/flow.sh [-r ROUNDS] [-n N] [-c "1 16"] [--blob-mib M] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build}
rounds=3
n=3000
concs="1 16"
blob_mib=64
out="$here/RESULTS-flow.md"
command_line="bench/flow.sh${*:+ $*}"

# Print the usage text.
usage() {
	sed -n '/^# usage:/p' "${BASH_SOURCE[0]}" | sed 's/^# //'
	cat <<'EOF'
  -r ROUNDS      rounds, each running every path (default 3)
  -n N           measured echo calls per run (default 3000)
  -c "K ..."     concurrencies of the echo runs (default "1 16")
  --blob-mib M   size of the large result in MiB (default 64; 0: none)
  --out FILE     report file (default bench/RESULTS-flow.md)
  env BUILD_DIR  meson build directory (default <repo>/build)
  env DENO       the deno binary (default tests/integration/node_modules/.bin/deno)
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	-r|--rounds) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-c|--concurrency) concs=$2; shift 2 ;;
	--blob-mib) blob_mib=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

# Print a progress message on stderr.
log() {
	printf '[flow.sh] %s\n' "$*" >&2
}

deno=${DENO:-$root/tests/integration/node_modules/.bin/deno}
[ -x "$deno" ] || deno=$(command -v deno || true)
[ -n "$deno" ] || { log "deno is needed: npm ci in tests/integration, or set DENO"; exit 1; }
command -v node >/dev/null || { log "node is needed (configs and report)"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-flow-bench.XXXXXX")
flow_pid=
# Stop a chain left running and remove the temporary directory (unless KEEP_TMP).
cleanup() {
	[ -z "$flow_pid" ] || { kill "$flow_pid" 2>/dev/null; wait "$flow_pid" 2>/dev/null || true; }
	if [ -n "${KEEP_TMP:-}" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
records="$tmp/records.jsonl"
: >"$records"

if [ ! -f "$build/build.ninja" ]; then
	log "configuring $build"
	meson setup "$build" "$root" >"$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log" >&2; exit 1; }
fi
log "building mcp-chain and the bench tools in $build"
ninja -C "$build" mcp-chain bench/mcp-bench-server bench/mcp-bench-load >"$tmp/ninja.log" 2>&1 ||
	{ tail -n 20 "$tmp/ninja.log" >&2; exit 1; }
chain="$build/mcp-chain"
server="$build/bench/mcp-bench-server"
load="$build/bench/mcp-bench-load"
tck=$(getconf CLK_TCK)

# the echo server shared by every session; the flow config also has the
# front's section (no certificate: mcp-chain makes one and logs its hash)
node -e '
	const [dir, server] = process.argv.slice(1);
	const fs = require("fs");
	const base = { mcpServers: { echo: { command: server, scope: "shared" } } };
	fs.writeFileSync(dir + "/chain.json", JSON.stringify(base, null, 2) + "\n");
	fs.writeFileSync(dir + "/chain-flow.json", JSON.stringify({ ...base, flow: {} }, null, 2) + "\n");
' "$tmp" "$server"

# Append record LINE (one JSON object) for PATH, CASE, ROUND to the records.
record() {
	local path=$1 kind=$2 round=$3 line=$4
	[[ $line == \{* ]] || line='{"errors":1,"fatal":"the load driver printed no result"}'
	printf '{"path":"%s","case":"%s","round":%d,%s\n' "$path" "$kind" "$round" "${line#\{}" >>"$records"
	printf '[flow.sh] %-9s %-8s r%-2s %s\n' "$path" "$kind" "$round" "$(printf '%s' "$line" |
		sed -E 's/.*"c":([0-9]+),"ok":([0-9]+),"errors":([0-9]+),"rps":([0-9.]+),"p50_us":([0-9.]+).*/c=\1 ok=\2 err=\3 rps=\4 p50=\5us/; s/.*"fatal":(.*)\}$/fatal: \1/')" >&2
}

# Start mcp-chain --flow on a free UDP port; sets flow_pid, flow_url, flow_hash.
start_flow_chain() {
	local err="$tmp/flow-chain.log" i
	"$chain" --config "$tmp/chain-flow.json" --flow 127.0.0.1:0 2>"$err" &
	flow_pid=$!
	for ((i = 0; i < 200; i++)); do
		flow_url=$(sed -n 's/.*serving MCP-Flow (WebTransport) on \(https:[^ ]*\).*/\1/p' "$err")
		flow_hash=$(sed -n 's/.*(hex \([0-9a-f]\{64\}\)).*/\1/p' "$err")
		[ -z "$flow_url" ] || [ -z "$flow_hash" ] || return 0
		kill -0 "$flow_pid" 2>/dev/null || break
		sleep 0.05
	done
	log "mcp-chain --flow did not start: $(tail -n 3 "$err")"
	return 1
}

# Stop the chain start_flow_chain started; keep its log.
stop_flow_chain() {
	kill "$flow_pid" 2>/dev/null || true
	wait "$flow_pid" 2>/dev/null || true
	flow_pid=
	cat "$tmp/flow-chain.log" >>"$tmp/child-stderr.log"
}

# One MCP-Flow run: run_flow PATH CASE ROUND ENCODING LOAD-ARGS...
run_flow() {
	local path=$1 kind=$2 round=$3 enc=$4; shift 4
	local line='{"errors":1,"fatal":"mcp-chain --flow did not start"}'
	if start_flow_chain; then
		line=$("$deno" run --unstable-net -A "$here/flow-load.ts" --url "$flow_url" --hash "$flow_hash" \
			--pid "$flow_pid" --clk-tck "$tck" --encoding "$enc" "$@" 2>>"$tmp/load-stderr.log") || true
		stop_flow_chain
	fi
	record "$path" "$kind" "$round" "$line"
}

# The HTTP front's ports, counted up from below the kernel's range for
# outgoing connections (as run.sh does).
read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
hport=$(( eph_lo > 12000 ? eph_lo - 12000 + RANDOM % 10000 : 20000 + RANDOM % 10000 ))

# One HTTP run: run_http CASE ROUND LOAD-ARGS... (a taken port is retried).
run_http() {
	local kind=$1 round=$2; shift 2
	local line _try
	for _try in 1 2 3; do
		hport=$(( hport + 1 ))
		line=$("$load" --url "http://127.0.0.1:$hport/mcp" --accept json --timeout 300 \
			--child-stderr "$tmp/child-stderr.log" "$@" \
			-- "$chain" --config "$tmp/chain.json" --listen "127.0.0.1:$hport" 2>>"$tmp/load-stderr.log") || true
		[[ $line == *'already listens on'* ]] || break
	done
	record http "$kind" "$round" "$line"
}

# One stdio run: run_stdio CASE ROUND LOAD-ARGS...
run_stdio() {
	local kind=$1 round=$2; shift 2
	local line
	line=$("$load" --child-stderr "$tmp/child-stderr.log" "$@" -- "$chain" --config "$tmp/chain.json" \
		2>>"$tmp/load-stderr.log") || true
	record stdio "$kind" "$round" "$line"
}

# Run PATH for CASE in ROUND with LOAD-ARGS (the same for every path).
run_path() {
	local path=$1 kind=$2 round=$3; shift 3
	case $path in
	flow-json) run_flow flow-json "$kind" "$round" json "$@" ;;
	flow-cbor) run_flow flow-cbor "$kind" "$round" cbor "$@" ;;
	http) run_http "$kind" "$round" "$@" ;;
	stdio) run_stdio "$kind" "$round" "$@" ;;
	esac
}

# The words of $2 rotated left by $1 places, one a line.
rotated() {
	local -a ws
	read -r -a ws <<<"$2"
	local k=$(( $1 % ${#ws[@]} ))
	printf '%s\n' "${ws[@]:k}" "${ws[@]:0:k}"
}

warm=$(( n / 10 > 1000 ? 1000 : n / 10 ))
log "echo: $rounds rounds, n=$n, c in {$concs}: flow-json flow-cbor http stdio"
for ((r = 1; r <= rounds; r++)); do
	for c in $concs; do
		while read -r p; do
			run_path "$p" echo "$r" -n "$n" -c "$c" --warmup "$warm"
		done < <(rotated "$r" "flow-json flow-cbor http stdio")
	done
done

if [ "$blob_mib" -gt 0 ]; then
	log "one $blob_mib MiB result: execution stream (flow-cbor) and HTTP, $rounds rounds"
	for ((r = 1; r <= rounds; r++)); do
		while read -r p; do
			run_path "$p" blob "$r" --mode blob -n 1 --warmup 0 --bytes $(( blob_mib << 20 )) --timeout 300
		done < <(rotated "$r" "flow-cbor http")
	done
fi

if grep -qiE ' (error|warn)' "$tmp/child-stderr.log" 2>/dev/null; then
	log "mcp-chain logged errors or warnings (first lines):"
	grep -iE ' (error|warn)' "$tmp/child-stderr.log" | head -n 5 >&2 || true
fi
export M_DATE M_NPROC M_CPU M_LOAD M_COMMIT M_DENO M_COMMAND M_BLOB
M_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
M_NPROC=$(nproc)
M_CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
M_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
M_COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo n/a)
if [ -n "$(git -C "$root" status --porcelain -- src include 2>/dev/null)" ]; then
	M_COMMIT="$M_COMMIT + uncommitted changes"
fi
M_DENO=$("$deno" --version | head -n 1)
M_COMMAND=$command_line
M_BLOB=$blob_mib
node "$here/flow-report.mjs" "$records" >"$tmp/report.md"
cp "$tmp/report.md" "$out"
cp "$records" "${out%.md}.jsonl"
cat "$tmp/report.md"
log "report written to $out (raw runs: ${out%.md}.jsonl)"
