#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs a command inside the newest-kernel chroot (tests/vm-newest/prepare.sh)
# with that system's own tools (its make, gcc, apt, modprobe):
#
#   in-chroot.sh [--exclusive] [--bind HOST_DIR DIR]... ROOT -- CMD [ARG...]
#
# The command runs in a private mount namespace (unshare -m): /proc, /sys,
# /dev and every --bind (HOST_DIR mounted at DIR inside ROOT, created if
# needed) exist only for it and vanish with it, also when it is killed, so
# nothing stays mounted on the host.  The environment is a clean one (PATH,
# HOME, LANG=C.UTF-8, DEBIAN_FRONTEND=noninteractive, and INITRD=No so a
# kernel install makes no initramfs the harness never boots).
# Users of a chroot hold a shared flock on ROOT.lock; --exclusive (prepare.sh
# refreshing or upgrading it) waits until they are done and keeps new ones out.
set -eu

lock=-s
binds=
while [ $# -gt 0 ]; do
	case $1 in
	--exclusive) lock=-x ;;
	--bind)
		[ $# -ge 3 ] || { echo "in-chroot: --bind HOST_DIR DIR" >&2; exit 2; }
		# newline-separated pairs; paths with newlines are not supported
		binds="$binds$2
$3
"
		shift 2 ;;
	--) shift; break ;;
	-*) echo "in-chroot: unknown option $1" >&2; exit 2 ;;
	*) root=$1 ;;
	esac
	shift
done
[ -n "${root:-}" ] && [ $# -gt 0 ] ||
	{ echo "usage: in-chroot.sh [--exclusive] [--bind HOST_DIR DIR]... ROOT -- CMD [ARG...]" >&2; exit 2; }
[ -x "$root/usr/bin/env" ] || { echo "in-chroot: $root is not a chroot" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "in-chroot: needs root (chroot, mount namespaces)" >&2; exit 1; }
root=$(cd "$root" && pwd)

exec 8>"$root.lock"
flock $lock 8

# The inner shell gets the root and the binds as arguments, then the command.
# shellcheck disable=SC2016
exec unshare -m --propagation private sh -eu -c '
	root=$1 binds=$2
	shift 2
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
	mount --rbind /dev "$root/dev"
	printf "%s" "$binds" | while IFS= read -r src && IFS= read -r dst; do
		mkdir -p "$root$dst"
		mount --bind "$src" "$root$dst"
	done
	exec chroot "$root" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive INITRD=No \
		"$@"
' in-chroot "$root" "$binds" "$@"
