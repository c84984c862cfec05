#!/usr/bin/env bash
#
# bench/run.sh: the mcp-chain benchmark.
#
# Builds the tools if needed (meson/ninja in $BUILD_DIR, default ./build;
# npm ci for the SDK proxy), then measures, in one run, with the paths
# alternating in a rotated order every round:
#
#   direct     mcp-bench-load -> mcp-bench-server
#   relay      mcp-bench-load -> mcp-bench-relay -> mcp-bench-server
#   line-relay the same with --lines: read/write, whole lines only
#   scan-relay the same with --scan: each line also checked by mcp-chain's
#              validating scanner (src/core/jscan.c), nothing else
#   mcp-chain  mcp-bench-load -> mcp-chain (temp config, no middleware) -> server
#   mcp-chain+5mw  the same with five middleware modules: auth, log (to a
#              file), policy, rewrite, limit
#   sdk-proxy  mcp-bench-load -> node sdk-proxy/proxy.mjs -> server
#   mcp-chain@base  the mcp-chain path with the binary in $BASE_CHAIN (an
#              earlier build, say), so before and after run in one run
#
# for tools/call echo at each concurrency (default c=1 and c=16, n=5000,
# 5 rounds), then the extra cases: progress relay (60 notifications), tools/list
# over 1x10000 and 20x500 tools, peak RSS with three idle backends, one
# 64 MiB result, 1000 requests in flight, start-up time; then the HTTP fronts: mcp-chain
# --listen, supergateway 4.0.0 --stateful and mcp-proxy 6.7.19 (npm ci in http-peers/), each
# wrapping mcp-bench-server on stdio, driven over Streamable HTTP by mcp-bench-load --url
# (one keep-alive connection per request in flight): tools/call echo at each HTTP
# concurrency (default 1, 16, 64) with "Accept: application/json, text/event-stream" and
# with "Accept: application/json", mcp-chain's stdio c=1 and c=16 beside them, 60 progress
# notifications over SSE, 1000 requests in flight across 100 sessions, 1000 idle sessions.
# With BASE_CHAIN set, every HTTP case also runs the front mcp-chain@base (the same command
# with the binary in $BASE_CHAIN), and its stdio c=1 and c=16 run beside mcp-chain's.
# The Markdown report goes to stdout and to bench/RESULTS.md (raw per-run JSON lines to
# bench/RESULTS.jsonl); progress goes to stderr.
#
# usage: bench/run.sh [-r ROUNDS] [-n N] [-c "1 16"] [--http-c "1 16 64"] [--paths "..."]
#                     [--no-extras] [--no-http] [--http-only] [--quick] [--out FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build}
rounds=5
n=5000
concs="1 16"
paths="direct relay line-relay scan-relay mcp-chain mcp-chain+5mw sdk-proxy"
extras=1
stdio=1
http=1
http_paths="mcp-chain supergateway mcp-proxy"
http_concs="1 16 64"
http_inflight=1000
http_inflight_sessions=100
http_idle_sessions=1000
http_timeout=120
out="$here/RESULTS.md"
steps=60
progress_ms=60
blob_mib=64
inflight=1000
inflight_n=20000
list_n=20
startup_n=5
command_line="bench/run.sh${*:+ $*}"

# Print the usage text.
usage() {
	sed -n '/^# usage:/,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
	cat <<'EOF'
  -r ROUNDS      rounds of the alternating comparison (default 5)
  -n N           measured requests per echo run (default 5000)
  -c "K ..."     concurrencies for the echo runs (default "1 16")
  --paths "..."  which of: direct relay line-relay scan-relay mcp-chain mcp-chain+5mw sdk-proxy
                 mcp-chain@base mcp-chain+5mw@base (default all but the @base ones)
  --no-extras    only the echo comparison (and the HTTP fronts)
  --http-c "K ..."
                 concurrencies for the HTTP echo runs (default "1 16 64")
  --http-paths "P ..."
                 the HTTP fronts to compare (default "mcp-chain supergateway mcp-proxy")
  --no-http      no HTTP fronts
  --http-only    only the HTTP fronts (c from --http-c, rounds from -r, n from -n)
  --quick        smoke run: -r 1 -n 500, small extras
  --out FILE     report file (default bench/RESULTS.md)
  env BUILD_DIR  meson build directory (default <repo>/build)
  env BASE_CHAIN an earlier mcp-chain binary: the paths mcp-chain@base and
                 mcp-chain+5mw@base (stdio, with --paths) and the HTTP front
                 mcp-chain@base (always, when it is an executable)
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	-r|--rounds) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-c|--concurrency) concs=$2; shift 2 ;;
	--http-c) http_concs=$2; shift 2 ;;
	--http-paths) http_paths=$2; shift 2 ;;
	--paths) paths=$2; shift 2 ;;
	--no-extras) extras=0; shift ;;
	--no-http) http=0; shift ;;
	--http-only) stdio=0; extras=0; shift ;;
	--quick) rounds=1; n=500; blob_mib=8; inflight_n=5000; list_n=3
		startup_n=2; http_idle_sessions=200; shift ;;
	--out) out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

http_inflight_n=$(( n > 5 * http_inflight ? n : 5 * http_inflight ))

# Print a progress message on stderr.
log() {
	printf '[run.sh] %s\n' "$*" >&2
}

command -v node >/dev/null || { log "node is needed (SDK proxy and report)"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-bench.XXXXXX")
# Remove the temporary directory unless KEEP_TMP is set.
cleanup() {
	if [ -n "${KEEP_TMP:-}" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
records="$tmp/records.jsonl"
: >"$records"
notes=()

# ---- build -----------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
	log "configuring $build"
	meson setup "$build" "$root" >"$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log" >&2; exit 1; }
elif [ ! -d "$build/bench" ]; then
	log "reconfiguring $build (bench/ was added after it was configured)"
	meson setup --reconfigure "$build" "$root" >"$tmp/meson.log" 2>&1 ||
		{ cat "$tmp/meson.log" >&2; exit 1; }
fi
log "building in $build"
if ! ninja -C "$build" >"$tmp/ninja.log" 2>&1; then
	tail -n 20 "$tmp/ninja.log" >&2
	log "the full build failed; building only the bench tools"
	ninja -C "$build" bench/mcp-bench-server bench/mcp-bench-load bench/mcp-bench-relay >&2
	if [ -x "$build/mcp-chain" ]; then
		notes+=("The full build failed at the time of this run: the mcp-chain measured is the binary left by an earlier build ($(date -u -r "$build/mcp-chain" '+%Y-%m-%d %H:%M UTC')).")
	fi
fi
server="$build/bench/mcp-bench-server"
load="$build/bench/mcp-bench-load"
relay="$build/bench/mcp-bench-relay"
bench_jwt="$build/bench/mcp-bench-jwt"
chain="$build/mcp-chain"
proxy="$here/sdk-proxy/proxy.mjs"

declare -A skip_reason=()
if [ ! -x "$chain" ]; then
	skip_reason[mcp-chain]="$chain was not built"
	skip_reason[mcp-chain+5mw]="$chain was not built"
fi
base_chain=${BASE_CHAIN:-}
if [ -z "$base_chain" ] || [ ! -x "$base_chain" ]; then
	skip_reason[mcp-chain@base]="BASE_CHAIN is not an executable"
	skip_reason[mcp-chain+5mw@base]="BASE_CHAIN is not an executable"
fi
if [ ! -d "$here/sdk-proxy/node_modules/@modelcontextprotocol/sdk" ]; then
	log "installing the SDK proxy's dependencies (npm ci)"
	if ! (cd "$here/sdk-proxy" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
		skip_reason[sdk-proxy]="npm ci failed in bench/sdk-proxy"
	fi
fi
for p in "${!skip_reason[@]}"; do log "skipping $p: ${skip_reason[$p]}"; done

# ---- helpers ---------------------------------------------------------------

# Write an mcp-chain config to file $1 with one server per "NAME ARGS..."
# word list given as the remaining arguments (each a single string).
write_config() {
	local file=$1; shift
	node -e '
		const [server, ...specs] = process.argv.slice(1);
		const mcpServers = {};
		for (const s of specs) {
			const [name, ...args] = s.split(" ").filter(Boolean);
			mcpServers[name] = { command: server, args };
		}
		process.stdout.write(JSON.stringify({ mcpServers }, null, 2) + "\n");
	' "$server" "$@" >"$file"
}

# Write the five-module pipeline config to file $1 (server args follow).
write_config_5mw() {
	local file=$1; shift
	local hash
	hash=$(printf %s bench-token | sha256sum | cut -d' ' -f1)
	node -e '
		const [file, server, hash, audit, ...args] = process.argv.slice(1);
		const cfg = {
			middleware: [
				{ use: "auth", tokens: [{ sha256: hash, principal: "bench" }] },
				{ use: "log", sink: "file", path: audit },
				{ use: "policy", rules: [{ deny: ["never_*"] }] },
				{ use: "rewrite", tools: { echo: { description: "echo, through mcp-chain" } } },
				{ use: "limit", rules: [{ concurrency: 4096, queue: 4096 }] },
			],
			mcpServers: { echo: { command: server, args } },
		};
		require("fs").writeFileSync(file, JSON.stringify(cfg, null, 2) + "\n");
	' "$file" "$server" "$hash" "$tmp/audit-$config_seq.jsonl" "$@"
}

# Set the global array cmd to the command line for path $1 in front of a
# server started with the remaining arguments.
set_cmd() {
	local path=$1; shift
	case $path in
	direct) cmd=("$server" "$@") ;;
	relay) cmd=("$relay" "$server" "$@") ;;
	line-relay) cmd=("$relay" --lines "$server" "$@") ;;
	scan-relay) cmd=("$relay" --scan "$server" "$@") ;;
	mcp-chain)
		local cfg="$tmp/chain-$((++config_seq)).json"
		write_config "$cfg" "echo $*"
		cmd=("$chain" --config "$cfg") ;;
	mcp-chain+5mw)
		local cfg5="$tmp/chain-$((++config_seq)).json"
		write_config_5mw "$cfg5" "$@"
		cmd=(env MCP_CHAIN_TOKEN=bench-token "$chain" --config "$cfg5") ;;
	mcp-chain@base)
		local cfgb="$tmp/chain-$((++config_seq)).json"
		write_config "$cfgb" "echo $*"
		cmd=("$base_chain" --config "$cfgb") ;;
	mcp-chain+5mw@base)
		local cfgb5="$tmp/chain-$((++config_seq)).json"
		write_config_5mw "$cfgb5" "$@"
		cmd=(env MCP_CHAIN_TOKEN=bench-token "$base_chain" --config "$cfgb5") ;;
	sdk-proxy) cmd=(node "$proxy" "$server" "$@") ;;
	"sdk-proxy (default limits)") cmd=(node "$proxy" "$server" "$@") ;;
	esac
}
config_seq=0

# Record one mcp-bench-load run: run_one PATH CASE ROUND LOAD-ARGS... -- CMD...
run_one() {
	local path=$1 kind=$2 round=$3; shift 3
	local line
	line=$("$load" --child-stderr "$tmp/child-stderr.log" "$@" 2>>"$tmp/load-stderr.log") || true
	if [[ $line != \{* ]]; then
		line='{"errors":1,"fatal":"mcp-bench-load printed no result"}'
	fi
	printf '{"path":"%s","case":"%s","round":%d,%s\n' "$path" "$kind" "$round" \
		"${line#\{}" >>"$records"
	# a one-line summary for the person watching
	printf '[run.sh] %-10s %-14s r%-2s %s\n' "$path" "$kind" "$round" "$(printf '%s' "$line" |
		sed -E 's/.*"c":([0-9]+),"ok":([0-9]+),"errors":([0-9]+),"rps":([0-9.]+),"p50_us":([0-9.]+).*/c=\1 ok=\2 err=\3 rps=\4 p50=\5us/')" >&2
}

# Record that PATH was skipped for CASE, with a reason.
skip_one() {
	local reason
	reason=$(printf '%s' "$3" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.stringify(s.trim())))')
	printf '{"path":"%s","case":"%s","skipped":%s}\n' "$1" "$2" "$reason" >>"$records"
	log "skip $2 / $1: $3"
}

# The paths to run, rotated left by $1 places (A/B alternation).
rotated() {
	local -a ps=()
	local p
	for p in $paths; do
		[ -n "${skip_reason[$p]:-}" ] || ps+=("$p")
	done
	local k=$(( $1 % ${#ps[@]} ))
	printf '%s\n' "${ps[@]:k}" "${ps[@]:0:k}"
}

# Run case KIND for every path for ROUNDS rounds: each_path KIND ROUNDS
# LOAD-ARGS... -- SERVER-ARGS...
each_path() {
	local kind=$1 nrounds=$2; shift 2
	local -a largs=() sargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do largs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	sargs=("$@")
	local r p
	for ((r = 1; r <= nrounds; r++)); do
		while read -r p; do
			set_cmd "$p" "${sargs[@]}"
			run_one "$p" "$kind" "$r" "${largs[@]}" -- "${cmd[@]}"
		done < <(rotated "$r")
	done
}

# ---- the echo comparison ---------------------------------------------------
if [ "$stdio" = 1 ]; then
log "echo comparison: $rounds rounds, n=$n, c in {$concs}, paths: $(rotated 0 | tr '\n' ' ')"
warm=$(( n / 10 > 1000 ? 1000 : n / 10 ))
for ((r = 1; r <= rounds; r++)); do
	for c in $concs; do
		while read -r p; do
			set_cmd "$p"
			run_one "$p" echo "$r" -n "$n" -c "$c" --warmup "$warm" -- "${cmd[@]}"
		done < <(rotated "$r")
	done
done

fi

# ---- extra cases -----------------------------------------------------------
xr=$(( rounds < 3 ? rounds : 3 ))
if [ "$extras" = 1 ]; then
	log "progress relay: $steps notifications per call"
	each_path progress "$rounds" --mode progress -n 1 --steps "$steps" --ms "$progress_ms" \
		--grace-ms 300 --
	each_path progress-burst "$rounds" --mode progress -n 1 --steps "$steps" --ms 0 \
		--grace-ms 300 --

	log "tools/list: one backend with 10000 tools in pages of 500"
	each_path list-1x10000 "$xr" --mode list -n "$list_n" --warmup 2 --expect-tools 10000 \
		-- --tools 10000 --page-size 500
	if [ -z "${skip_reason[mcp-chain]:-}" ] && [[ " $paths " == *" mcp-chain "* ]]; then
		log "tools/list: 20 backends with 500 tools each, through mcp-chain"
		specs=()
		for i in $(seq -w 1 20); do specs+=("s$i --tools 500 --page-size 500 --name-prefix s${i}_"); done
		write_config "$tmp/chain-20.json" "${specs[@]}"
		if check=$("$chain" check "$tmp/chain-20.json" 2>&1); then
			for ((r = 1; r <= xr; r++)); do
				run_one mcp-chain list-20x500 "$r" --mode list -n "$list_n" --warmup 2 \
					--expect-tools 10000 -- "$chain" --config "$tmp/chain-20.json"
			done
		else
			skip_one mcp-chain list-20x500 "mcp-chain rejects a 20-backend config: $(printf '%s' "$check" |
				grep -v ': server "' | head -n 3 | sed "s#$tmp/##" | tr '\n' ' ')"
		fi
	fi

	if [ -z "${skip_reason[mcp-chain]:-}" ] && [[ " $paths " == *" mcp-chain "* ]]; then
		# Peak RSS with three backends that do nothing but start, initialize
		# and answer a listing: what mcp-chain costs a user who leaves it
		# running beside Claude (VmHWM covers the start-up too).
		log "three idle backends: peak RSS of mcp-chain"
		write_config "$tmp/chain-3.json" "a --name-prefix a_" "b --name-prefix b_" "c --name-prefix c_"
		for ((r = 1; r <= xr; r++)); do
			run_one mcp-chain idle-3 "$r" --mode list -n 1 --warmup 1 --expect-tools 9 \
				-- "$chain" --config "$tmp/chain-3.json"
		done
	fi

	blob_bytes=$(( blob_mib * 1024 * 1024 ))
	log "one ${blob_mib} MiB result"
	while read -r p; do
		if [ "$p" = sdk-proxy ]; then
			# The SDK refuses messages over 10 MiB unless told otherwise: run
			# it both ways (the raised limit is what a user would have to set).
			cmd=(node "$proxy" --max-buffer-mib $(( blob_mib * 4 )) "$server")
			run_one sdk-proxy blob 1 --mode blob -n 1 --bytes "$blob_bytes" --timeout 300 -- "${cmd[@]}"
			cmd=(node "$proxy" "$server")
			run_one "sdk-proxy (default limits)" blob 1 --mode blob -n 1 --bytes "$blob_bytes" \
				--timeout 300 -- "${cmd[@]}"
		else
			set_cmd "$p"
			run_one "$p" blob 1 --mode blob -n 3 --bytes "$blob_bytes" --timeout 300 -- "${cmd[@]}"
		fi
	done < <(rotated 0)
	notes+=("sdk-proxy's blob run uses --max-buffer-mib $(( blob_mib * 4 )): by default the SDK's stdio transports drop any message over 10 MiB (row 'default limits').")

	log "$inflight requests in flight"
	each_path inflight "$xr" -n "$inflight_n" -c "$inflight" --warmup 2000 --

	log "start-up time"
	each_path startup "$xr" --mode startup -n "$startup_n" --
fi

# ---- HTTP fronts ------------------------------------------------------------
# Each front wraps mcp-bench-server on stdio and serves Streamable HTTP on a
# fresh port; mcp-bench-load --url starts it, opens its sessions and drives it
# (one keep-alive connection per request in flight), as it drives a stdio path.

# Write mcp-chain's HTTP config to file $1: the echo server as one backend
# shared by every session; $2, if given, is listen.maxConnections.
write_http_config() {
	node -e '
		const [file, server, maxConns] = process.argv.slice(1);
		const cfg = { mcpServers: { echo: { command: server, scope: "shared" } } };
		if (maxConns) cfg.listen = { maxConnections: +maxConns };
		require("fs").writeFileSync(file, JSON.stringify(cfg, null, 2) + "\n");
	' "$1" "$server" "${2:-}"
}

# Set the global array cmd to front $1 listening on port $2 (config file $3
# for mcp-chain).
set_http_cmd() {
	local port=$2 peers="$here/http-peers/node_modules"
	case $1 in
	mcp-chain)
		cmd=("$chain" --config "$3" --listen "127.0.0.1:$port" --log-level warn) ;;
	mcp-chain@base)
		cmd=("$base_chain" --config "$3" --listen "127.0.0.1:$port" --log-level warn) ;;
	supergateway)
		cmd=(node "$peers/supergateway/dist/index.js" --stdio "$server" --outputTransport streamableHttp
			--stateful --port "$port" --logLevel none) ;;
	mcp-proxy)
		cmd=(node "$peers/mcp-proxy/dist/bin/mcp-proxy.mjs" --host 127.0.0.1 --port "$port"
			--endpoint /mcp -- "$server") ;;
	esac
}

# Record one HTTP run: run_http FRONT CASE ROUND CHAIN-CONFIG LOAD-ARGS...
# A port found taken before the front started is tried again with another.
run_http() {
	local front=$1 kind=$2 round=$3 cfg=$4; shift 4
	local line try
	for try in 1 2 3; do
		hport=$(( hport + 1 ))
		set_http_cmd "$front" "$hport" "$cfg"
		line=$("$load" --url "http://127.0.0.1:$hport/mcp" --timeout "$http_timeout" \
			--child-stderr "$tmp/child-stderr.log" "$@" -- "${cmd[@]}" 2>>"$tmp/load-stderr.log") || true
		[[ $line == *'already listens on'* ]] || break
		log "port $hport was taken, trying another"
	done
	if [[ $line != \{* ]]; then
		# keep what the tables select on (c, accept) in the record of the failure
		local arg prev="" c=1 accept=both
		for arg in "$@"; do
			case $prev in -c) c=$arg ;; --accept) accept=$arg ;; esac
			prev=$arg
		done
		line="{\"c\":$c,\"accept\":\"$accept\",\"n\":0,\"ok\":0,\"errors\":1,\"fatal\":\"mcp-bench-load printed no result\"}"
	fi
	printf '{"path":"http:%s","case":"%s","round":%d,%s\n' "$front" "$kind" "$round" \
		"${line#\{}" >>"$records"
	printf '[run.sh] http:%-14s %-13s r%-2s %s\n' "$front" "$kind" "$round" "$(printf '%s' "$line" |
		sed -E 's/.*"c":([0-9]+),"ok":([0-9]+),"errors":([0-9]+),"rps":([0-9.]+),"p50_us":([0-9.]+).*"accept":"([a-z]+)".*/c=\1 accept=\6 ok=\2 err=\3 rps=\4 p50=\5us/; s/.*"fatal":(.*)\}$/fatal: \1/')" >&2
}

# The HTTP fronts to run, rotated left by $1 places.
http_rotated() {
	local k=$(( $1 % ${#hps[@]} ))
	printf '%s\n' "${hps[@]:k}" "${hps[@]:0:k}"
}

if [ "$http" = 1 ]; then
	declare -A http_skip=()
	[ -x "$chain" ] || http_skip[mcp-chain]="$chain was not built"
	if [ ! -d "$here/http-peers/node_modules/supergateway" ] || [ ! -d "$here/http-peers/node_modules/mcp-proxy" ]; then
		log "installing the HTTP peers (npm ci in bench/http-peers)"
		if ! (cd "$here/http-peers" && npm ci --no-audit --no-fund --loglevel=error) >&2; then
			http_skip[supergateway]="npm ci failed in bench/http-peers"
			http_skip[mcp-proxy]="npm ci failed in bench/http-peers"
		fi
	fi
	hps=()
	for p in $http_paths; do
		if [ -n "${http_skip[$p]:-}" ]; then skip_one "http:$p" http-echo "${http_skip[$p]}"; else hps+=("$p"); fi
		# the base binary's front, next to mcp-chain's, only when BASE_CHAIN is set
		if [ "$p" = mcp-chain ] && [ -z "${skip_reason[mcp-chain@base]:-}" ]; then
			hps+=(mcp-chain@base)
		fi
	done
	write_http_config "$tmp/chain-http.json"
	write_http_config "$tmp/chain-http-1k.json" $(( http_inflight + 100 ))
	hwarm=$(( n / 10 > 1000 ? 1000 : n / 10 ))
	# The fronts' ports, counted up from here: below the kernel's range for
	# outgoing connections (the driver's own sockets, say), which a listener
	# cannot take and the driver's check for a free port cannot see.
	read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
	hport=$(( eph_lo > 12000 ? eph_lo - 12000 + RANDOM % 10000 : 20000 + RANDOM % 10000 ))
	if [ ${#hps[@]} -gt 0 ]; then
	log "HTTP fronts: $rounds rounds, n=$n, c in {$http_concs}, Accept both and json: ${hps[*]}"
	for ((r = 1; r <= rounds; r++)); do
		for c in $http_concs; do
			for accept in both json; do
				while read -r p; do
					run_http "$p" http-echo "$r" "$tmp/chain-http.json" \
						--accept "$accept" -n "$n" -c "$c" --warmup "$hwarm"
				done < <(http_rotated "$r")
			done
		done
		# mcp-chain's own stdio latency and CPU in the same round (and the base
		# binary's): the c=1 target compares the HTTP front's p50 with it, the
		# c=16 one the front's CPU per request. The order alternates by round.
		sps=()
		[ -n "${http_skip[mcp-chain]:-}" ] || sps+=(mcp-chain)
		[ -n "${skip_reason[mcp-chain@base]:-}" ] || sps+=(mcp-chain@base)
		if [ ${#sps[@]} -eq 2 ] && (( r % 2 == 0 )); then sps=("${sps[1]}" "${sps[0]}"); fi
		for p in "${sps[@]+"${sps[@]}"}"; do
			bin=$chain
			[ "$p" = mcp-chain ] || bin=$base_chain
			for c in 1 16; do
				run_one "stdio:$p" http-stdio "$r" -n "$n" -c "$c" --warmup "$hwarm" \
					-- "$bin" --config "$tmp/chain-http.json"
			done
		done
	done

	# Bearer tokens (issue 34): the same c=16 echo calls with the auth module
	# checking a static token's hash, then validating a JWT access token
	# (RS256, keys from a file; its answer cached by the token's hash), the
	# order alternating by round; then the module's own cost per check, cold
	# (a token seen for the first time) and warm, from mcp-bench-jwt.
	if [ -x "$bench_jwt" ] && [ -z "${http_skip[mcp-chain]:-}" ] && "$bench_jwt" --emit "$tmp"; then
		log "HTTP: c=16 echo calls with bearer tokens: static hashes and JWT validation, same rounds"
		node -e '
			const [dir, server] = process.argv.slice(1);
			const fs = require("fs");
			const base = { mcpServers: { echo: { command: server, scope: "shared" } } };
			const hash = fs.readFileSync(dir + "/static.sha256", "utf8").trim();
			fs.writeFileSync(dir + "/chain-auth-static.json", JSON.stringify({ ...base, middleware: [
				{ use: "auth", env: false, tokens: [{ sha256: hash, principal: "bench" }] }] }));
			fs.writeFileSync(dir + "/chain-auth-jwt.json", JSON.stringify({ ...base, middleware: [
				{ use: "auth", env: false, oauth: { issuer: "https://issuer.invalid",
				  jwksFile: dir + "/jwks.json", resource: "https://bench.invalid/mcp",
				  scopes: ["mcp:read"] } }] }));
		' "$tmp" "$server"
		for ((r = 1; r <= rounds; r++)); do
			kinds=(static jwt)
			(( r % 2 == 0 )) && kinds=(jwt static)
			for kind in "${kinds[@]}"; do
				tokfile=$tmp/static
				[ "$kind" = jwt ] && tokfile=$tmp/jwt
				run_http mcp-chain "http-auth-$kind" "$r" "$tmp/chain-auth-$kind.json" \
					--accept json -n "$n" -c 16 --warmup "$hwarm" \
					--header "Authorization: Bearer $(cat "$tokfile")"
			done
			line=$("$bench_jwt" 2000) &&
				printf '{"path":"auth-module","case":"jwt-cost","round":%d,%s\n' "$r" "${line#\{}" >>"$records"
		done
	fi

	log "HTTP: $steps progress notifications per call over SSE"
	for ((r = 1; r <= rounds; r++)); do
		while read -r p; do
			run_http "$p" http-progress "$r" "$tmp/chain-http.json" --mode progress -n 1 \
				--steps "$steps" --ms "$progress_ms" --grace-ms 300
		done < <(http_rotated "$r")
	done

	log "HTTP: $http_inflight requests in flight across $http_inflight_sessions sessions"
	for ((r = 1; r <= xr; r++)); do
		while read -r p; do
			run_http "$p" http-inflight "$r" "$tmp/chain-http-1k.json" -n "$http_inflight_n" \
				-c "$http_inflight" --sessions "$http_inflight_sessions" --warmup "$http_inflight"
		done < <(http_rotated "$r")
	done
	notes+=("HTTP, $http_inflight in flight: mcp-chain runs with \"listen\": {\"maxConnections\": $(( http_inflight + 100 ))} (the default, 256, answers a connection beyond it 503 and leaves the rest in the accept queue); the other HTTP runs use the defaults.")

	log "HTTP: $http_idle_sessions idle sessions"
	for ((r = 1; r <= xr; r++)); do
		while read -r p; do
			run_http "$p" http-idle "$r" "$tmp/chain-http.json" --mode idle -n "$http_idle_sessions" -c 16
		done < <(http_rotated "$r")
	done
	fi
fi

# ---- report ----------------------------------------------------------------
if [ -s "$tmp/child-stderr.log" ] && grep -qiE 'error|exceeded|unknown token' "$tmp/child-stderr.log"; then
	log "stderr of the processes under test had errors (first lines):"
	grep -iE 'error|exceeded|unknown token' "$tmp/child-stderr.log" | sort | uniq -c | sort -rn | head -n 8 >&2 || true
fi
sdk_version=$(node -p 'require(process.argv[1]).version' \
	"$here/sdk-proxy/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null || echo "n/a")
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "n/a")
if [ -n "$(git -C "$root" status --porcelain -- src include meson.build 2>/dev/null)" ]; then
	commit="$commit + uncommitted changes"
fi
export M_DATE M_NPROC M_CPU M_MEM M_KERNEL M_CHAIN M_COMMIT M_NODE M_SDK M_COMMAND \
	M_ROUNDS M_N M_STEPS M_PMS M_BLOB M_NOTES
M_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
M_NPROC=$(nproc)
M_CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
M_MEM=$(free -h | awk '/^Mem:/ {print $2 " RAM"}')
M_KERNEL=$(uname -r)
M_CHAIN=$("$chain" --version 2>/dev/null | head -n 1 || echo "not built")
M_COMMIT=$commit
M_NODE=$(node --version)
M_SDK=$sdk_version
M_COMMAND=$command_line
M_ROUNDS=$rounds
M_N=$n
M_STEPS=$steps
M_PMS=$progress_ms
M_BLOB=$(( blob_mib * 1024 * 1024 ))
M_NOTES=$(printf '%s\n' "${notes[@]+"${notes[@]}"}")
node -e '
	const e = process.env;
	process.stdout.write(JSON.stringify({
		date: e.M_DATE, nproc: e.M_NPROC, cpu: e.M_CPU, mem: e.M_MEM, kernel: e.M_KERNEL,
		chain_version: e.M_CHAIN, commit: e.M_COMMIT, node: e.M_NODE, sdk: e.M_SDK,
		command: e.M_COMMAND, rounds: +e.M_ROUNDS, n: +e.M_N, steps: +e.M_STEPS,
		progress_ms: +e.M_PMS, blob_bytes: +e.M_BLOB,
		notes: e.M_NOTES.split("\n").filter(Boolean),
	}));
' >"$tmp/meta.json"
node "$here/summarize.mjs" "$records" "$tmp/meta.json" >"$tmp/report.md"
cp "$tmp/report.md" "$out"
cp "$records" "${out%.md}.jsonl"
cat "$tmp/report.md"
log "report written to $out (raw runs: ${out%.md}.jsonl)"
