#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds (or reuses) the sanitizing debug kernel for `make vm-check-debug`:
# Debian's linux-source-6.12, `make tinyconfig` + tests/vm-debug/debug.config
# (KASAN, lockdep, kmemleak, DEBUG_VM; module signatures trusting the test
# key signing/test-cert.pem), bzImage plus a module build tree.
#
#   build-kernel.sh [--print-dir]
#
# The build lives outside the checkout, in
#   $PINMEM_CACHE/debug-kernel/<source version>-<config hash>/
# (PINMEM_CACHE: default /var/cache/pinmem, or ~/.cache/pinmem where that is
# not writable)
# and is reused when complete.  On success the last line on stdout is that
# directory; it holds `bzImage`, `kver` (the kernel release), `build-time`
# (wall seconds), `build-cpu` (user and system time) and `linux/` (the module
# build tree: KDIR for pinmem.ko).
# --print-dir only prints the directory (installing the source if needed).
# Progress and the build log path go to stderr.  JOBS (default 2) sets -j.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
frag=$here/debug.config
cert=$here/signing/test-cert.pem
cache=${PINMEM_CACHE:-}
if [ -z "$cache" ]; then	# root: /var/cache/pinmem; others: their own cache
	cache=/var/cache/pinmem
	{ mkdir -p $cache && [ -w $cache ]; } 2>/dev/null ||
		cache=${XDG_CACHE_HOME:-$HOME/.cache}/pinmem
fi
cache=$cache/debug-kernel
jobs=${JOBS:-2}
pkg=linux-source-6.12
tarball=/usr/src/$pkg.tar.xz

log() { echo "build-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

# The source package comes from bookworm-backports where that is configured
# (it matches the 6.12 kernel install-deps.sh installs), else the default suite.
install_source() {
	if dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q 'ok installed' &&
	   [ -f $tarball ]; then
		return 0
	fi
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	target=
	if grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
		target="-t bookworm-backports"
	fi
	log "installing $pkg"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $target $pkg >/dev/null ||
		{ $sudo apt-get update -qq &&
		  $sudo apt-get install -y -qq --no-install-recommends $target $pkg >/dev/null; } ||
		die "cannot install $pkg"
	[ -f $tarball ] || die "$pkg installed but $tarball is missing"
}

# Every CONFIG_X=v line of the fragment must be in .config verbatim, and every
# "# CONFIG_X is not set" line must not be enabled there.
verify_config() {
	bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qx "$line" "$1" || { log "config: want $line, have: $(grep "^${line%%=*}=" "$1" || echo unset)"; bad=1; } ;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }; sym=${sym%% *}
			if grep -q "^$sym=" "$1"; then log "config: want $sym off, have $(grep "^$sym=" "$1")"; bad=1; fi ;;
		esac
	done < "$frag"
	return $bad
}

print_only=0
[ "${1:-}" = --print-dir ] && print_only=1

install_source
srcver=$(dpkg-query -W -f='${Version}' $pkg)
# The recipe (tinyconfig base) is part of the key, with the fragment and
# the certificate the kernel trusts.
hash=$( { echo "base=tinyconfig"; cat "$frag" "$cert"; } | sha256sum | cut -c1-12)
dir=$cache/$srcver-$hash
if [ $print_only = 1 ]; then echo "$dir"; exit 0; fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -f "$dir/.complete" ]; then
	log "reusing $dir (built in $(cat "$dir/build-time") s)"
	echo "$dir"
	exit 0
fi

start=$(date +%s)
src=$dir/linux
# A complete build of the same source with another fragment is a tree kbuild
# can bring to this configuration incrementally (it rebuilds what a changed
# option reaches): minutes instead of a full build.
seed=
for d in "$cache/$srcver"-*; do
	[ "$d" != "$dir" ] && [ -f "$d/.complete" ] && seed=$d
done
if [ ! -f "$dir/.unpacked" ] && [ -n "$seed" ]; then
	log "starting from the tree of $seed (an incremental build)"
	rm -rf "${src:?}"
	cp -a "$seed/linux" "$src"
	touch "$dir/.unpacked"
fi
if [ ! -f "$dir/.unpacked" ]; then
	log "unpacking $tarball"
	rm -rf "${src:?}" "${dir:?}/$pkg"
	tar -C "$dir" -xJf $tarball
	mv "$dir/$pkg" "$src"
	touch "$dir/.unpacked"
fi

buildlog=$dir/build.log
log "configuring (tinyconfig + $(basename "$frag")); log: $buildlog"
kmake() { nice -n 19 make -C "$src" ARCH=x86_64 "$@" >>"$buildlog" 2>&1; }
: > "$buildlog"
# Reconfiguring an unchanged tree rewrites the same .config; kbuild then
# rebuilds nothing.
cp "$cert" "$src/certs/pinmem-test-cert.pem"
kmake tinyconfig
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$frag") >>"$buildlog" 2>&1
kmake olddefconfig
verify_config "$src/.config" || die "the debug config did not come out as asked (see above)"

log "building bzImage and the module build tree with -j$jobs (nice 19)"
kmake -j"$jobs" all modules_prepare || { tail -30 "$buildlog" >&2; die "kernel build failed"; }
for f in .config Module.symvers include/generated/autoconf.h \
	 arch/x86/include/generated/asm scripts/mod/modpost \
	 arch/x86/boot/bzImage; do
	[ -e "$src/$f" ] || die "build tree incomplete: $f missing"
done
cp "$src/arch/x86/boot/bzImage" "$dir/bzImage"
make -s -C "$src" ARCH=x86_64 kernelrelease > "$dir/kver"
end=$(date +%s)
echo $((end - start)) > "$dir/build-time"
times | tail -n 1 > "$dir/build-cpu"	# user and system time of the build
touch "$dir/.complete"
log "built $(cat "$dir/kver") in $((end - start)) s"
echo "$dir"
