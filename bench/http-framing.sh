#!/usr/bin/env bash
#
# bench/http-framing.sh: checks that mcp-bench-load --url reads every way a
# Streamable HTTP server may frame its answers (Content-Length, chunked with
# extensions and trailers, until close; JSON or SSE with CRLF lines, comments
# and data split over several lines; everything cut into small writes), and
# that it counts a broken answer (no answer in the stream, HTTP 500, a reset
# connection) as an error of that call and goes on.  The server is the fake
# http-framing.mjs.  Prints one line per framing; exits 1 if any is wrong.
#
# usage: bench/http-framing.sh            (env BUILD_DIR as for run.sh)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${BUILD_DIR:-$(dirname "$here")/build}
load="$build/bench/mcp-bench-load"
[ -x "$load" ] || { echo "http-framing.sh: build $load first (ninja -C $build)" >&2; exit 2; }
n=200
fail=0
port=$(( 30000 + RANDOM % 20000 ))

# Run the driver against the fake server in framing $1 with the driver
# arguments that follow; prints the result line.
drive() {
	local framing=$1; shift
	port=$(( port + 1 ))
	"$load" --url "http://127.0.0.1:$port/mcp" --timeout 20 --quiet "$@" \
		-- node "$here/http-framing.mjs" --port "$port" --framing "$framing" || true
}

# The value of numeric field $2 in JSON line $1.
field() {
	sed -nE "s/.*\"$2\":([0-9]+).*/\\1/p" <<<"$1"
}

for f in json-length json-chunked json-close sse-length sse-chunked sse-close; do
	line=$(drive "$f" -n "$n" -c 4 --sessions 2)
	ok=$(field "$line" ok); err=$(field "$line" errors)
	prog_line=ok
	if [[ $f == sse-* ]]; then
		p=$(drive "$f" --mode progress -n 4 -c 2 --steps 7 --ms 5 --grace-ms 0)
		if [ "$(field "$p" progress_received)" != 28 ] || [ "$(field "$p" errors)" != 0 ]; then
			prog_line="progress wrong: $p"
		fi
	fi
	if [ "$ok" = "$n" ] && [ "$err" = 0 ] && [[ $line != *'"fatal"'* ]] && [ "$prog_line" = ok ]; then
		printf 'ok    %-13s %s calls answered%s\n' "$f" "$ok" "$([[ $f == sse-* ]] && echo ', 28/28 progress in order')"
	else
		printf 'WRONG %-13s %s\n      %s\n' "$f" "$line" "$prog_line"
		fail=1
	fi
done
for f in bad-noanswer bad-status bad-reset; do
	line=$(drive "$f" -n 50 -c 2 --warmup 0)
	ok=$(field "$line" ok); err=$(field "$line" errors)
	if [ "$ok" = 0 ] && [ "$err" = 50 ] && [[ $line != *'"fatal"'* ]]; then
		printf 'ok    %-13s 50/50 calls counted as errors, the run went on\n' "$f"
	else
		printf 'WRONG %-13s %s\n' "$f" "$line"
		fail=1
	fi
done
exit "$fail"
