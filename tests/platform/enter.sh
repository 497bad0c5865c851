#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs a command inside a platform chroot (tests/platform/prepare.sh) without
# touching the host:
#
#   enter.sh [--net] [--bind HOST_DIR DIR]... [--ro-bind HOST_DIR DIR]... ROOT -- CMD [ARG...]
#
# Everything is mounted in a private mount namespace (unshare -m), so it
# exists only for the command and vanishes with it, also when the command
# fails or is killed: nothing can stay mounted on the host, and no trap is
# needed for it.  The host's /dev is not bound in: /dev is a fresh tmpfs with
# its own null, zero, full, random, urandom and tty nodes and a private
# /dev/shm (torch's workers share tensors there), so a package script or a
# test that chmods or removes /dev/null changes only its own copy.  /proc is
# a new proc mount, /sys a read-only sysfs.  Without --net the command also
# gets its own network namespace with nothing but loopback (up): the tests
# and the clients prove they download nothing.  --bind mounts HOST_DIR
# writable at DIR (created inside ROOT when missing), --ro-bind read-only.
# The environment is a clean one: PATH, HOME, LANG=C.UTF-8,
# DEBIAN_FRONTEND=noninteractive.
set -eu

net=0
binds=
while [ $# -gt 0 ]; do
	case $1 in
	--net) net=1 ;;
	--bind | --ro-bind)
		[ $# -ge 3 ] || { echo "enter: $1 HOST_DIR DIR" >&2; exit 2; }
		# newline-separated triples; paths with newlines are not supported
		binds="$binds${1#--}
$2
$3
"
		shift 2 ;;
	--) shift; break ;;
	-*) echo "enter: unknown option $1" >&2; exit 2 ;;
	*) root=$1 ;;
	esac
	shift
done
[ -n "${root:-}" ] && [ $# -gt 0 ] ||
	{ echo "usage: enter.sh [--net] [--bind|--ro-bind HOST_DIR DIR]... ROOT -- CMD [ARG...]" >&2; exit 2; }
[ -x "$root/usr/bin/env" ] || { echo "enter: $root is not a chroot" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "enter: needs root (chroot, mount namespaces)" >&2; exit 1; }
root=$(cd "$root" && pwd)
[ "$root" != / ] || { echo "enter: refusing / as the chroot" >&2; exit 1; }

ns=-m
[ "$net" = 1 ] || ns=-mn

# The inner shell gets the root, the binds and the network choice as
# arguments, then the command.
# shellcheck disable=SC2016
exec unshare $ns --propagation private sh -eu -c '
	root=$1 binds=$2 net=$3
	shift 3
	[ "$net" = 1 ] || ip link set lo up
	mount -t proc proc "$root/proc"
	mount -t sysfs -o ro sysfs "$root/sys"
	mount -t tmpfs -o mode=0755,nosuid,size=64m pinmem-dev "$root/dev"
	for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
		name=${n%%:*} majmin=${n#*:}
		mknod -m 0666 "$root/dev/$name" c "${majmin%:*}" "${majmin#*:}"
	done
	ln -s /proc/self/fd "$root/dev/fd"
	ln -s /proc/self/fd/0 "$root/dev/stdin"
	ln -s /proc/self/fd/1 "$root/dev/stdout"
	ln -s /proc/self/fd/2 "$root/dev/stderr"
	mkdir "$root/dev/shm" "$root/dev/pts"
	mount -t tmpfs -o mode=1777,nosuid,nodev pinmem-shm "$root/dev/shm"
	printf "%s" "$binds" | while IFS= read -r kind && IFS= read -r src && IFS= read -r dst; do
		mkdir -p "$root$dst"
		mount --bind "$src" "$root$dst"
		[ "$kind" = bind ] || mount -o remount,bind,ro "$root$dst"
	done
	exec chroot "$root" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		"$@"
' enter "$root" "$binds" "$net" "$@"
