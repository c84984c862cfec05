#!/usr/bin/env bash
# one.sh - one bounded libFuzzer run (the meson test of a fuzz target).
#   one.sh TARGET SEEDS DICT WORK
# Runs TARGET for FUZZ_SECONDS (default 30) on a working corpus in
# WORK/corpus, starting from the committed SEEDS (read only), with the
# dictionary DICT. Extra libFuzzer flags come from FUZZ_ARGS. When the
# target finds something, exits 1 with the reproducer's path and its
# bytes (escaped and in hex).
set -uo pipefail

target=$1 seeds=$2 dict=$3 work=$4
secs=${FUZZ_SECONDS:-30}
mkdir -p "$work/corpus" "$work/artifacts"
rm -f "$work/artifacts"/*

# shellcheck disable=SC2086
"$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
	-dict="$dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
	${FUZZ_ARGS:-} "$work/corpus" "$seeds" 2>&1 </dev/null |
	grep -v -e '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)' -e '# Uses: '
rc=${PIPESTATUS[0]}
found=$(ls -t "$work/artifacts" 2>/dev/null | head -1)
if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
	echo "fuzz: $(basename "$target") exited with status $rc"
	if [ -n "$found" ]; then
		f=$work/artifacts/$found
		echo "fuzz: reproducer: $f ($(wc -c <"$f") bytes)"
		echo "fuzz: escaped: $(od -An -c -v "$f" | tr -s ' \n' ' ' | head -c 4000)"
		echo "fuzz: hex:"
		od -An -tx1 -v "$f" | head -64
		echo "fuzz: replay with: $target $f"
	fi
	exit 1
fi
exit 0
