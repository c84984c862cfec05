#!/usr/bin/env bash
#
# bench/cluster.sh: what HAProxy in front of mcp-chain costs. Measures, in one
# run, with the paths in a rotated order every round:
#
#   direct      mcp-bench-load -> mcp-chain --listen -> mcp-bench-server
#   haproxy-1   mcp-bench-load -> HAProxy (deploy/haproxy.cfg as shipped) -> one instance
#   haproxy-3   the same with three instances (a, b, c), sessions spread by HAProxy
#
# each with tools/call echo over Streamable HTTP: c=1 (its p50 latency) and
# c=16 over 16 sessions (its throughput). Every instance runs the echo server
# as one backend shared by its sessions, as bench/run.sh's HTTP runs do.
# Prints a Markdown table with the median of the rounds and the ratios to
# direct; raw JSON lines go to $OUT_JSONL (default: /tmp/mcp-bench-cluster-last.jsonl).
# Run by hand (needs haproxy; not run by CI).
#
# usage: bench/cluster.sh [-r ROUNDS] [-n N]
#        (BUILD_DIR: the meson build directory, default ./build; HAPROXY: the binary)
#
# Internally, `bench/cluster.sh --serve K PORT CONFIG` is the server
# mcp-bench-load spawns for the haproxy paths: K instances on PORT+1..PORT+K,
# then HAProxy on PORT; SIGTERM stops them all.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build}
haproxy=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
chain="$build/mcp-chain"
server="$build/bench/mcp-bench-server"
load="$build/bench/mcp-bench-load"

# ---- the server side of the haproxy paths ------------------------------------
if [ "${1:-}" = --serve ]; then
	k=$2 port=$3 cfg=$4
	pids=()
	stop() {
		trap - TERM INT EXIT
		[ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
		wait || true
		exit 0
	}
	trap stop TERM INT EXIT
	addrs=()
	for ((i = 1; i <= k; i++)); do
		tag=$(printf "\\x$(printf %x $(( 96 + i )))")   # a, b, c
		MCP_CHAIN_INSTANCE=$tag "$chain" --config "$cfg" --listen "127.0.0.1:$(( port + i ))" --log-level warn &
		pids+=($!)
		addrs+=("127.0.0.1:$(( port + i ))")
	done
	# each instance up (its /healthz) before HAProxy starts taking connections
	for a in "${addrs[@]}"; do
		for ((t = 0; t < 200; t++)); do
			if exec 3<>"/dev/tcp/${a%:*}/${a#*:}" 2>/dev/null; then
				printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
				if head -n1 <&3 | grep -q ' 200 '; then exec 3>&-; break; fi
				exec 3>&-
			fi
			sleep 0.05
		done
	done
	# one instance: all three servers name it (the shipped file has three)
	MCP_LB_BIND=127.0.0.1:$port MCP_A=${addrs[0]} MCP_B=${addrs[1]:-${addrs[0]}} MCP_C=${addrs[2]:-${addrs[0]}} \
		"$haproxy" -f "$root/deploy/haproxy.cfg" -db >/dev/null 2>&1 &
	pids+=($!)
	wait -n || true
	stop
fi

# ---- the driver -----------------------------------------------------------------
rounds=3
n=5000
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-h|--help) sed -n '/^# usage:/,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
for f in "$chain" "$server" "$load" "$haproxy"; do
	[ -x "$f" ] || { echo "cluster.sh: $f missing (build with: meson setup build && ninja -C build)" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-bench-cluster.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=${OUT_JSONL:-${TMPDIR:-/tmp}/mcp-bench-cluster-last.jsonl}
: >"$out"
# HAProxy passes the client's Host (127.0.0.1:<its port>) on: allowed here
cat >"$tmp/chain.json" <<EOF
{ "mcpServers": { "echo": { "command": "$server", "scope": "shared" } },
  "listen": { "allowedHosts": ["127.0.0.1", "localhost"], "maxConnections": 1024 } }
EOF
log() { printf '[cluster.sh] %s\n' "$*" >&2; }

# ports counted up from below the kernel's range for outgoing connections
read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=32768
port=$(( eph_lo > 12000 ? eph_lo - 12000 + RANDOM % 8000 : 20000 + RANDOM % 8000 ))
warm=$(( n / 10 > 1000 ? 1000 : n / 10 ))

# run PATH C ROUND: one mcp-bench-load run, its JSON line appended to $out
run() {
	local p=$1 c=$2 r=$3 line cmd
	port=$(( port + 4 ))
	case $p in
	direct)    cmd=("$chain" --config "$tmp/chain.json" --listen "127.0.0.1:$port" --log-level warn) ;;
	haproxy-1) cmd=(bash "$here/cluster.sh" --serve 1 "$port" "$tmp/chain.json") ;;
	haproxy-3) cmd=(bash "$here/cluster.sh" --serve 3 "$port" "$tmp/chain.json") ;;
	esac
	line=$(HAPROXY=$haproxy BUILD_DIR=$build "$load" --url "http://127.0.0.1:$port/mcp" -n "$n" -c "$c" --sessions "$c" \
		--warmup "$warm" --child-stderr "$tmp/child-stderr.log" -- "${cmd[@]}" 2>>"$tmp/load-stderr.log") || true
	[[ $line == \{* ]] || line="{\"fatal\":\"mcp-bench-load printed no result\"}"
	printf '{"path":"%s","c":%d,"round":%d,"result":%s}\n' "$p" "$c" "$r" "$line" >>"$out"
	log "$p c=$c r$r $(printf '%s' "$line" | sed -E 's/.*"ok":([0-9]+),"errors":([0-9]+),"rps":([0-9.]+),"p50_us":([0-9.]+).*/ok=\1 err=\2 rps=\3 p50=\4us/')"
}

paths=(direct haproxy-1 haproxy-3)
log "$rounds rounds, n=$n, c=1 and c=16: ${paths[*]}"
for ((r = 1; r <= rounds; r++)); do
	k=$(( r % ${#paths[@]} ))
	for p in "${paths[@]:k}" "${paths[@]:0:k}"; do
		run "$p" 1 "$r"
		run "$p" 16 "$r"
	done
done

node - "$out" "$n" "$rounds" <<'EOF'
const [file, n, rounds] = process.argv.slice(2);
const rows = require('fs').readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[(s.length - 1) >> 1] : NaN; };
const pick = (p, c, key) => median(rows.filter((x) => x.path === p && x.c === c && x.result.ok > 0 && !x.result.errors)
  .map((x) => x.result[key]));
const failed = rows.filter((x) => !(x.result.ok > 0) || x.result.errors);
const d1 = pick('direct', 1, 'p50_us'), d16 = pick('direct', 16, 'rps');
console.log(`## mcp-chain behind HAProxy (deploy/haproxy.cfg): tools/call echo over Streamable HTTP, n=${n}, median of ${rounds} rounds\n`);
console.log('| path | c=1 p50 (µs) | vs direct | c=16 rps | vs direct |');
console.log('|---|---:|---:|---:|---:|');
for (const p of ['direct', 'haproxy-1', 'haproxy-3']) {
  const l = pick(p, 1, 'p50_us'), t = pick(p, 16, 'rps');
  console.log(`| ${p} | ${l.toFixed(0)} | ${(l / d1).toFixed(2)}x | ${t.toFixed(0)} | ${(t / d16).toFixed(2)}x |`);
}
if (failed.length) console.log(`\n${failed.length} run(s) failed or had errors (left out): ${failed.map((x) => `${x.path} c=${x.c} r${x.round}`).join(', ')}`);
console.log(`\nraw runs: ${file}`);
EOF
