#!/bin/sh
# SPDX-License-Identifier: MIT
# Creates (or reuses) the chroot that gives `make vm-check` the newest Debian
# kernel: a debootstrap'd Debian 13 "trixie" with trixie-backports, holding
# that suite's linux-image-amd64 + linux-headers-amd64 (kernel 7.x) and the
# compiler that kernel was built with (trixie's gcc-14, a dependency of the
# headers), so pinmem.ko is built for it there (tests/vm/run.sh --chroot)
# rather than with the host's older gcc.
#
#   prepare.sh [--refresh | --offline]
#
# The chroot lives outside the checkout, in
#   $PINMEM_CACHE/newest-kernel/trixie-<inputs hash>/root
# (PINMEM_CACHE: default /var/cache/pinmem, or ~/.cache/pinmem where that is
# not writable).  The hash covers the inputs that make it: suites, mirror,
# package lists and this recipe's version; change one and a new chroot is
# made (the old one stays until removed by hand).  A complete chroot is
# reused; once its package lists are older than $PINMEM_NEWEST_MAX_AGE
# seconds (default 86400) it runs `apt-get update` and installs the newest
# kernel, headers and trixie updates; a kernel package that is no longer the
# one linux-image-amd64 depends on is purged.  --refresh checks now;
# --offline (or PINMEM_NEWEST_MAX_AGE=inf) never does.  When the check
# cannot reach the mirror the cached kernel is used, with a warning.
#
# On success stdout ends with shell assignments (for eval):
#   root=<chroot directory>
#   kver=<kernel release, e.g. 7.0.1+bpo-amd64>
#   kernel=<root>/boot/vmlinuz-<kver>             (bzImage, a host path)
#   kbuild=/lib/modules/<kver>/build              (module build tree, inside
#                                                  the chroot)
#   prepare_secs=<wall seconds this call took>
# Progress goes to stderr; logs are beside the chroot.  Needs root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
suite=trixie
bpo=trixie-backports
mirror=${PINMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# From trixie-backports: the kernel and its headers (they bring gcc-14,
# linux-kbuild, linux-headers-*-common).
bpo_pkgs="linux-image-amd64 linux-headers-amd64"
# From trixie: what an out-of-tree module build uses beyond that (make,
# the C library headers for conftest-style probes, pahole for BTF), kmod for
# the module indexes run.sh reads.
pkgs="make gcc libc6-dev dwarves kmod"
recipe=1	# bump when this script changes what a chroot holds
max_age=${PINMEM_NEWEST_MAX_AGE:-86400}

log() { echo "vm-newest: $*" >&2; }
die() { log "error: $*"; exit 1; }

mode=auto
case ${1:-} in
'') ;;
--refresh) mode=refresh ;;
--offline) mode=offline ;;
*) echo "usage: $0 [--refresh | --offline]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"
[ "$max_age" = inf ] && mode=offline
t0=$(date +%s)

cache=${PINMEM_CACHE:-}
if [ -z "$cache" ]; then
	cache=/var/cache/pinmem
	{ mkdir -p $cache && [ -w $cache ]; } 2>/dev/null ||
		cache=${XDG_CACHE_HOME:-$HOME/.cache}/pinmem
fi
key=$(printf 'recipe=%s\nsuite=%s\nbpo=%s\nmirror=%s\npkgs=%s\nbpo_pkgs=%s\n' \
	"$recipe" "$suite" "$bpo" "$mirror" "$pkgs" "$bpo_pkgs" | sha256sum | cut -c1-12)
dir=$cache/newest-kernel/$suite-$key
root=$dir/root
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

inchroot() { "$here/in-chroot.sh" --exclusive "$@"; }

# The kernel release linux-image-amd64 (from backports) depends on.
chroot_kver() {
	"$here/in-chroot.sh" "$1" -- dpkg-query -W -f='${Depends}' linux-image-amd64 |
		tr ',|' '\n\n' | sed -n 's/^ *linux-image-\([^ ]*\).*/\1/p' | head -n 1
}

install_pkgs() {	# root
	inchroot "$1" -- apt-get install -y -q --no-install-recommends $pkgs
	inchroot "$1" -- apt-get install -y -q --no-install-recommends -t $bpo $bpo_pkgs
}

# Kernel images and headers that are not the metapackages' current ones go;
# autoremove then takes what only they needed (linux-kbuild-*, *-common).
purge_old() {	# root kver
	old=$("$here/in-chroot.sh" "$1" -- dpkg-query -W -f='${Package} ${db:Status-Status}\n' \
		'linux-image-[0-9]*' 'linux-headers-[0-9]*-amd64' 2>/dev/null |
		awk -v kv="$2" '$2 == "installed" && $1 != "linux-image-" kv &&
			$1 != "linux-headers-" kv { print $1 }' || true)
	if [ -n "$old" ]; then
		log "purging old kernel packages:" $old
		# shellcheck disable=SC2086
		inchroot "$1" -- apt-get purge -y -q $old
	fi
	inchroot "$1" -- apt-get autoremove --purge -y -q
}

if [ ! -f "$dir/.complete" ]; then
	if ! command -v debootstrap >/dev/null 2>&1; then
		log "installing debootstrap"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
			die "cannot install debootstrap"
	fi
	new=$dir/root.new
	rm -rf "$new" "$new.lock"
	blog=$dir/debootstrap.log
	log "debootstrap $suite from $mirror into $new (log $blog)"
	# In a private mount namespace: the /proc etc. it mounts cannot outlive it.
	unshare -m --propagation private debootstrap --variant=minbase \
		--components=main "$suite" "$new" "$mirror" >"$blog" 2>&1 ||
		{ tail -n 20 "$blog" >&2; die "debootstrap failed (log $blog)"; }
	rm -f "$new/etc/apt/sources.list"
	cat >"$new/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates $bpo
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	# No services, no recommends, no documentation in the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
	chmod 755 "$new/usr/sbin/policy-rc.d"
	printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
		>"$new/etc/apt/apt.conf.d/90pinmem"
	printf 'path-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\npath-exclude=/usr/share/locale/*\n' \
		>"$new/etc/dpkg/dpkg.cfg.d/90pinmem-nodoc"
	ilog=$dir/install.log
	log "installing $pkgs and $bpo_pkgs from $bpo (log $ilog)"
	{ inchroot "$new" -- apt-get update -q && install_pkgs "$new"; } >"$ilog" 2>&1 ||
		{ tail -n 30 "$ilog" >&2; die "package install failed (log $ilog)"; }
	inchroot "$new" -- apt-get clean
	rm -rf "$root" "$root.lock"
	mv "$new" "$root"
	rm -f "$new.lock"
	touch "$dir/.complete" "$dir/.checked"
	log "created $root in $(($(date +%s) - t0)) s"
else
	age=$(($(date +%s) - $(stat -c %Y "$dir/.checked" 2>/dev/null || echo 0)))
	if [ "$mode" = refresh ] || { [ "$mode" = auto ] && [ "$age" -ge "$max_age" ]; }; then
		ulog=$dir/update.log
		log "checking $suite/$bpo for a newer kernel (lists ${age} s old; log $ulog)"
		if inchroot "$root" -- apt-get update -q >"$ulog" 2>&1; then
			{ install_pkgs "$root" && inchroot "$root" -- apt-get upgrade -y -q &&
			  purge_old "$root" "$(chroot_kver "$root")" &&
			  inchroot "$root" -- apt-get clean; } >>"$ulog" 2>&1 ||
				{ tail -n 30 "$ulog" >&2; die "upgrade failed (log $ulog)"; }
			touch "$dir/.checked"
		else
			log "warning: cannot update the package lists (see $ulog); using the cached kernel"
		fi
	else
		log "reusing $root"
	fi
fi

kver=$(chroot_kver "$root")
[ -n "$kver" ] || die "no kernel release: linux-image-amd64 is not installed in $root"
[ -r "$root/boot/vmlinuz-$kver" ] || die "$root/boot/vmlinuz-$kver missing"
[ -f "$root/lib/modules/$kver/build/Makefile" ] ||
	die "no module build tree /lib/modules/$kver/build in $root (linux-headers-$kver)"
[ -f "$root/lib/modules/$kver/modules.dep.bin" ] ||
	die "no module index in $root/lib/modules/$kver (depmod did not run)"
echo "$kver" >"$dir/kver"
log "kernel $kver, gcc $("$here/in-chroot.sh" "$root" -- gcc -dumpfullversion), $(($(date +%s) - t0)) s"
echo "root=$root"
echo "kver=$kver"
echo "kernel=$root/boot/vmlinuz-$kver"
echo "kbuild=/lib/modules/$kver/build"
echo "prepare_secs=$(($(date +%s) - t0))"
