#!/usr/bin/env bash
#
# bench/soak.sh: the mcp-chain soak run.
#
# Builds mcp-chain and the bench tools if needed (meson/ninja in $BUILD_DIR,
# default ./build, as bench/run.sh does), then runs ONE mcp-chain with one
# mcp-bench-server backend under mixed, checked traffic for the duration
# (bench/soak.mjs: echo calls at c=1/16/64, progress calls at c=8, tools/list,
# a reload by SIGHUP every RELOAD seconds alternating two pipelines), sampling
# the chain's VmRSS every few seconds, and prints a summary: start, peak and
# end RSS, the slope per hour (least squares after the first tenth of the
# run), requests done, errors, reloads, exit status. Exit 0 only if there was
# no error. The test suite never runs it.
#
# usage: bench/soak.sh [-d SECONDS] [-s SAMPLE_SECONDS] [-R RELOAD_SECONDS]
#                      [--samples FILE]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build}
duration=1800
sample=5
reload=120
samples_out=

# Print the usage text.
usage() {
	sed -n '/^# usage:/,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
	cat <<'EOF'
  -d SECONDS        how long to run (default 1800: 30 minutes)
  -s SECONDS        RSS sampling interval (default 5)
  -R SECONDS        SIGHUP reload interval (default 120)
  --samples FILE    also write the samples ("seconds rss_kb" lines) to FILE
  env BUILD_DIR     meson build directory (default <repo>/build)
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	-d) duration=$2; shift 2 ;;
	-s) sample=$2; shift 2 ;;
	-R) reload=$2; shift 2 ;;
	--samples) samples_out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

# Print a progress message on stderr.
log() {
	printf '[soak.sh] %s\n' "$*" >&2
}

command -v node >/dev/null || { log "node is needed (the driver)"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-soak.XXXXXX")
# Remove the temporary directory unless KEEP_TMP is set.
cleanup() {
	if [ -n "${KEEP_TMP:-}" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

if [ ! -f "$build/build.ninja" ]; then
	log "configuring $build"
	meson setup "$build" "$root" >"$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log" >&2; exit 1; }
fi
log "building in $build"
ninja -C "$build" mcp-chain bench/mcp-bench-server >"$tmp/ninja.log" 2>&1 ||
	{ tail -n 20 "$tmp/ninja.log" >&2; exit 1; }

log "soak: ${duration}s, RSS every ${sample}s, a reload every ${reload}s ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
status=0
node "$here/soak.mjs" --chain "$build/mcp-chain" --server "$build/bench/mcp-bench-server" \
	--dir "$tmp" --duration "$duration" --sample "$sample" --reload "$reload" \
	--samples "${samples_out:-$tmp/samples.txt}" >"$tmp/summary.json" || status=$?
if [ ! -s "$tmp/summary.json" ]; then
	log "the driver failed (status $status); chain stderr:"
	tail -n 20 "$tmp/chain.stderr" >&2 || true
	exit 1
fi
node -e '
	const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
	const mib = (kb) => kb == null ? "-" : (kb / 1024).toFixed(2) + " MiB";
	const kinds = Object.entries(s.by_kind).map(([k, v]) => `${k} ${v.ok}` + (v.errors ? ` (${v.errors} failed)` : "")).join(", ");
	console.log(`duration        ${s.duration_s} s, ${s.samples} RSS samples`);
	console.log(`RSS start       ${mib(s.rss_start_kb)} (after initialize)`);
	console.log(`RSS peak        ${mib(s.rss_peak_kb)}`);
	console.log(`RSS end         ${mib(s.rss_end_kb)}`);
	console.log(`RSS slope       ${s.rss_slope_kb_per_h} kB/h (least squares after the first tenth, from ${mib(s.rss_steady_first_kb)})`);
	console.log(`operations ok   ${s.requests_ok} (${kinds})`);
	console.log(`progress notes  ${s.progress_notifications} (missing ${s.progress_missing}, unknown ${s.progress_unknown})`);
	console.log(`reloads         ${s.reloads}`);
	console.log(`errors          ${s.errors}`);
	console.log(`exit            ${JSON.stringify(s.exit)}`);
	for (const e of s.first_errors) console.log(`  error: ${e}`);
' "$tmp/summary.json"
if [ "$status" -ne 0 ]; then
	log "chain stderr (last lines):"
	tail -n 20 "$tmp/chain.stderr" >&2 || true
fi
exit "$status"
