#!/bin/sh
# SPDX-License-Identifier: MIT
# Creates (or reuses) the chroot of one platform of the Python matrix
# (tests/platform/run.sh): a debootstrap'd Debian suite holding its own
# python3, python3-torch and what building and testing pinmem needs, so
# pinmem is installed there with pip into a venv and tested with that
# suite's Python and torch.
#
#   prepare.sh DISTRO        DISTRO: trixie (Debian 13) or sid (unstable)
#
# The chroot lives outside the checkout, in
#   $PINMEM_CACHE/platform/<distro>-<inputs hash>/root
# (PINMEM_CACHE: default /var/cache/pinmem).  The hash covers what makes it:
# the suite, the mirror, the package list and the text of this script and of
# enter.sh; change one and a new chroot is made (the old one stays until removed by hand).  It is built
# in a temporary directory beside it and renamed into place only when
# complete, so an interrupted or failed build never leaves a chroot that a
# later run would take as ready; the failed build's logs are kept in
# <distro>-<hash>.failed/.  A complete chroot is reused as it is (a new one
# needs a changed input, or removing the directory).
#
# On success stdout ends with shell assignments (for eval):
#   root=<chroot directory>
#   prepare_secs=<wall seconds this call took>
# Progress goes to stderr.  Needs root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
mirror=${PINMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Building the extension (gcc, python3-dev, liburing-dev for liburing.a; make
# for the CUDA stand-in, tests/cuda_stub), pip into a venv (python3-venv,
# setuptools and wheel for --no-build-isolation), and the suite's imports.
pkgs="gcc libc6-dev make liburing-dev python3 python3-dev python3-venv \
	python3-setuptools python3-wheel python3-numpy python3-pytest python3-torch"
# The real clients (tests/platform/clients) run on unstable.
sid_pkgs="python3-accelerate python3-transformers"

log() { echo "platform: $*" >&2; }
die() { log "error: $*"; exit 1; }

distro=${1:-}
case $distro in
trixie) extra= ;;
sid) extra=$sid_pkgs ;;
*) echo "usage: $0 trixie|sid" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"
t0=$(date +%s)

cache=${PINMEM_CACHE:-/var/cache/pinmem}
key=$( { printf 'suite=%s\nmirror=%s\npkgs=%s %s\n' "$distro" "$mirror" "$pkgs" "$extra"
	cat "$here/prepare.sh" "$here/enter.sh"; } | sha256sum | cut -c1-12)
top=$cache/platform
dir=$top/$distro-$key
mkdir -p "$top"
exec 9>"$dir.lock"
flock 9

if [ -f "$dir/.complete" ]; then
	log "$distro: reusing $dir/root"
	echo "root=$dir/root"
	echo "prepare_secs=$(($(date +%s) - t0))"
	exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	die "debootstrap is not installed (scripts/install-deps.sh installs it)"
fi
# The build happens in $new and becomes $dir by one rename.  Everything it
# mounts lives in private mount namespaces (debootstrap under unshare -m,
# the rest through enter.sh), so removing $new on failure cannot reach
# through a mount into the host; it is checked all the same.
new=$(mktemp -d "$dir.new.XXXXXX")
chmod 755 "$new"
failed=$dir.failed
cleanup() {
	if [ -d "$new" ]; then
		if grep -qF " $new/" /proc/self/mountinfo; then
			log "error: mounts left under $new; not removing it"
			return
		fi
		rm -rf "$failed"
		mkdir -p "$failed"
		cp "$new"/*.log "$failed/" 2>/dev/null || true
		rm -rf --one-file-system "$new"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

blog=$new/debootstrap.log
log "$distro: debootstrap from $mirror into $new (cold build; log $blog)"
unshare -m --propagation private debootstrap --variant=minbase \
	--components=main "$distro" "$new/root" "$mirror" >"$blog" 2>&1 ||
	{ tail -n 20 "$blog" >&2; die "debootstrap $distro failed (log kept in $failed/)"; }
# debootstrap left sources.list naming $mirror and $distro.  No services,
# no recommends, no documentation in the chroot; unstable's Release file is
# valid for a week only, and a mirror serving a snapshot (or a clock ahead
# of it) would refuse it: its signature is still checked.  /build and
# /opt/cuda are the mount points of run.sh's work tree and the CUDA headers.
(
	cd "$new/root"
	printf '#!/bin/sh\nexit 101\n' >usr/sbin/policy-rc.d
	chmod 755 usr/sbin/policy-rc.d
	printf 'APT::Install-%s "false";\n' Recommends Suggests >etc/apt/apt.conf.d/90pinmem
	echo 'Acquire::Check-Valid-Until "false";' >>etc/apt/apt.conf.d/90pinmem
	printf 'path-exclude=/usr/share/%s/*\n' doc man locale >etc/dpkg/dpkg.cfg.d/90pinmem-nodoc
	mkdir -p build opt/cuda
)
ilog=$new/install.log
log "$distro: installing $pkgs $extra (log $ilog)"
# shellcheck disable=SC2086
{ "$here/enter.sh" --net "$new/root" -- apt-get update -q &&
  "$here/enter.sh" --net "$new/root" -- apt-get install -y -q $pkgs $extra &&
  "$here/enter.sh" "$new/root" -- apt-get clean; } >"$ilog" 2>&1 ||
	{ tail -n 30 "$ilog" >&2; die "installing the packages into the $distro chroot failed (log kept in $failed/)"; }
"$here/enter.sh" "$new/root" -- dpkg-query -W -f='${Package} ${Version}\n' >"$new/packages.txt"
touch "$new/.complete"
rm -rf "$dir"
mv "$new" "$dir"
log "$distro: created $dir/root in $(($(date +%s) - t0)) s"
echo "root=$dir/root"
echo "prepare_secs=$(($(date +%s) - t0))"
