#!/usr/bin/env bash
# run.sh - builds the libFuzzer targets of tests/fuzz in their own build
# directory (clang, ASan + UBSan) and runs each for a bounded time.
#   tests/fuzz/run.sh [TARGET...]       (default: every target; jscan or fuzz_jscan)
# Environment: FUZZ_SECONDS per target (default 30), FUZZ_BUILD (default
# build-fuzz), FUZZ_JOBS targets at once (default: the cores), FUZZ_ARGS
# extra libFuzzer flags. Installs clang and libclang-rt-14-dev with apt-get
# when missing (through sudo when not root). Exits non-zero when a target finds something, with the
# reproducer's path and bytes printed (tests/fuzz/one.sh does that).
# The results are meson tests of the "fuzz" suite: FUZZ_BUILD/meson-logs/testlog.json.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
build=${FUZZ_BUILD:-build-fuzz}
export FUZZ_SECONDS=${FUZZ_SECONDS:-30}

say() { printf 'fuzz: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# clang and its runtime (libFuzzer, the sanitizers).
need=()
command -v clang >/dev/null 2>&1 || need+=(clang)
for p in libclang-rt-14-dev; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${need[@]}" </dev/null >&2
fi

if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Db_lto=false -Dtests=disabled >&2
fi
ninja -C "$build" >&2

tests=()
known=$(meson test -C "$build" --suite fuzz --list 2>/dev/null | grep '^fuzz-')
for t in "$@"; do
	t=${t#fuzz_}   # fuzz_jscan and jscan name the same target
	if ! grep -qx "fuzz-$t" <<<"$known"; then
		say "no fuzz target named \"$t\" (targets: $(echo $known | sed 's/fuzz-//g'))"
		exit 2
	fi
	tests+=("fuzz-$t")
done
# Each target is one process on one core: as many at once as there are cores
# (FUZZ_JOBS), which keeps each target's time and halves the wall time on two.
jobs=${FUZZ_JOBS:-$(nproc)}
say "running the fuzz targets, ${FUZZ_SECONDS} s each, ${jobs} at once"
meson test -C "$build" --suite fuzz --print-errorlogs --num-processes "$jobs" "${tests[@]}" </dev/null
