#!/usr/bin/env bash
# tests/package/run.sh [BUILD_DIR] - the Debian package and "meson install",
# as a user gets them:
#   1. builds the .deb from a copy of the source tree in a temp dir
#      (dpkg-buildpackage writes beside the tree) and runs lintian on it:
#      any error (E:) fails;
#   2. "meson install --destdir" from BUILD_DIR (default: build/) installs
#      exactly the expected files, the examples being config/'s files;
#   3. installs the package (root, or sudo without a password; otherwise the
#      test is skipped: exit 77), then checks what it put on the machine: the
#      binary's version, both manual pages, the unit (systemd-analyze
#      verify), the shipped configuration (mcp-chain check; a conffile),
#      the examples and the bash completion; then purges it, leaving the
#      machine as it was.
# Run by "meson test --suite package" (scripts/bootstrap test, once, from
# the plain build).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
version=$(sed -n "s/^  version : '\([^']*\)',$/\1/p" "$here/meson.build")

say() { printf 'package: %s\n' "$*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
fail() { say "FAIL: $*"; exit 1; }

# Runs a command as root: directly, or through sudo when it needs no password.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

[ -n "$version" ] || fail "no version in meson.build"
for t in dpkg-buildpackage dh fakeroot lintian systemd-analyze man python3; do
	command -v "$t" >/dev/null 2>&1 ||
		skip "$t is not installed (Debian: debhelper dpkg-dev fakeroot lintian systemd man-db)"
done
root=yes
if [ "$(id -u)" -ne 0 ] && ! { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; then
	root=no
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-chain-package.XXXXXX")
installed=0
cleanup() {
	if [ "$installed" -eq 1 ]; then
		as_root dpkg --purge mcp-chain >"$work/purge.log" 2>&1 ||
			{ say "purging failed:"; cat "$work/purge.log" >&2; }
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# ---- 1. build and lint ----
src="$work/mcp-chain-$version"
mkdir "$src"
# the tree as it is (uncommitted changes too), without builds and npm packages
tar -C "$here" --exclude='./build*' --exclude=./tests/integration/node_modules \
	--exclude=./.git --exclude='./obj-*' --exclude=./debian/.debhelper \
	-cf - . | tar -C "$src" -xf -
say "dpkg-buildpackage -b -us -uc in $src"
# two jobs (the test machines have two cores); debian/rules runs no tests
if ! (cd "$src" && DEB_BUILD_OPTIONS="parallel=2 nocheck" dpkg-buildpackage -b -us -uc) \
	>"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log" >&2
	fail "dpkg-buildpackage failed"
fi
deb=$(ls "$work"/mcp-chain_"$version"-*_*.deb)
say "built $(basename "$deb") in $SECONDS s"
lintian --fail-on error "$deb" >"$work/lintian.log" 2>&1 || true
cat "$work/lintian.log" >&2
! grep -q '^E: ' "$work/lintian.log" || fail "lintian reports errors"

# ---- 2. meson install ----
stage="$work/stage"
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >"$work/minstall.log" 2>&1 ||
	{ cat "$work/minstall.log" >&2; fail "meson install from $build"; }
opts=$(meson introspect "$build" --buildoptions)
opt() { python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1" <<<"$opts"; }
prefix=$(opt prefix)
bindir=$(opt bindir); mandir=$(opt mandir); datadir=$(opt datadir)
unitdir=$(opt systemdunitdir)
[ -n "$unitdir" ] || unitdir=$(pkg-config --variable=systemd_system_unit_dir systemd 2>/dev/null || true)
[ -n "$unitdir" ] || unitdir=lib/systemd/system
abs() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
{
	echo "$(abs "$bindir")/mcp-chain"
	echo "$(abs "$mandir")/man1/mcp-chain.1"
	echo "$(abs "$mandir")/man5/mcp-chain.json.5"
	echo "$(abs "$unitdir")/mcp-chain.service"
	echo "$(abs "$datadir")/bash-completion/completions/mcp-chain"
	echo "$(abs "$datadir")/mcp-chain/mcp-chain.schema.json"
	for f in "$here"/config/*; do echo "$(abs "$datadir")/doc/mcp-chain/examples/$(basename "$f")"; done
} | sort >"$work/want"
(cd "$stage" && find . -type f | sed 's|^\.||' | sort) >"$work/got"
diff -u "$work/want" "$work/got" >&2 || fail "meson install's files differ from the list (- expected, + installed)"
say "meson install: $(wc -l <"$work/got") files, as expected"

# ---- 3. install and look ----
[ "$root" = yes ] ||
	skip "built, linted and meson-installed; installing the package needs root, or sudo without a password"
if dpkg-query -W -f='${Status}' mcp-chain 2>/dev/null | grep -q 'installed'; then
	skip "an mcp-chain package is installed already: this test would replace and purge it"
fi
[ ! -e /usr/bin/mcp-chain ] || skip "/usr/bin/mcp-chain exists (not from a package): not overwriting it"
as_root dpkg -i "$deb" >"$work/install.log" 2>&1 || {
	installed=1
	cat "$work/install.log" >&2
	fail "dpkg -i failed"
}
installed=1
files=$(dpkg -L mcp-chain)
has() { grep -qx "$1" <<<"$files" || fail "the package has no $1"; }

got=$(/usr/bin/mcp-chain --version)
[ "$got" = "mcp-chain $version" ] || fail "mcp-chain --version printed \"$got\", not \"mcp-chain $version\""
man -w mcp-chain >/dev/null || fail "man -w mcp-chain finds no page"
man -w 5 mcp-chain.json >/dev/null || fail "man -w 5 mcp-chain.json finds no page"
for page in $(man -w mcp-chain) $(man -w 5 mcp-chain.json); do
	warn=$(man --warnings -l "$page" 2>&1 >/dev/null) || fail "man cannot format $page"
	[ -z "$warn" ] || fail "man warns about $page: $warn"
done

unit=$(grep -E '/systemd/system/mcp-chain\.service$' <<<"$files") || fail "the package has no unit"
systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 ||
	{ cat "$work/verify.log" >&2; fail "systemd-analyze verify $unit"; }
# verify prints problems it does not fail on: none about our unit either
! grep -i 'mcp-chain' "$work/verify.log" || fail "systemd-analyze verify warns about the unit"
grep -qx 'ExecStart=/usr/bin/mcp-chain --config /etc/mcp-chain/mcp-chain.json --listen -' "$unit" ||
	fail "the unit does not run the packaged configuration's listen section"
# installed, neither enabled nor started (debian/rules says why)
[ ! -e /etc/systemd/system/multi-user.target.wants/mcp-chain.service ] ||
	fail "the package enabled the service"

/usr/bin/mcp-chain check /etc/mcp-chain/mcp-chain.json >"$work/check.log" 2>&1 ||
	{ cat "$work/check.log" >&2; fail "mcp-chain check /etc/mcp-chain/mcp-chain.json"; }
dpkg-query -W -f='${Conffiles}\n' mcp-chain | grep -q '^ /etc/mcp-chain/mcp-chain.json ' ||
	fail "/etc/mcp-chain/mcp-chain.json is not a conffile"

for f in "$here"/config/*; do
	name=$(basename "$f")
	grep -qE "^/usr/share/doc/mcp-chain/examples/$name(\.gz)?$" <<<"$files" ||
		fail "the package has no example $name"
done

has /usr/share/doc/mcp-chain/middleware
grep -qE '^/usr/share/doc/mcp-chain/README\.md(\.gz)?$' <<<"$files" || fail "the package has no README"

comp=/usr/share/bash-completion/completions/mcp-chain
has "$comp"
# the completion function itself, with bash-completion's helpers stubbed:
# the commands, the options, the log levels
out=$(bash -c '
	_init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]};
		words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
	_filedir() { COMPREPLY=(FILES); }
	complete() { :; }
	. "$1"
	c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _mcp_chain; echo "${COMPREPLY[*]}"; }
	c mcp-chain ""; c mcp-chain --c; c mcp-chain -l ""; c mcp-chain auth ""; c mcp-chain --config ""
' _ "$comp")
want=$'check audit list call read prompt auth replay schema\n--config\nerror warn info debug\nlogin status logout\nFILES'
[ "$out" = "$want" ] || fail "the bash completion completes $(printf %q "$out"), not $(printf %q "$want")"

as_root dpkg --purge mcp-chain >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge"; }
installed=0
[ ! -e /usr/bin/mcp-chain ] && [ ! -e /etc/mcp-chain/mcp-chain.json ] && [ ! -e "$unit" ] ||
	fail "files left after the purge"
say "installed, checked and purged $(basename "$deb")"
