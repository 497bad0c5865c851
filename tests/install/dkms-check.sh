#!/bin/bash
# SPDX-License-Identifier: MIT
# The DKMS path of the README, with the real dkms commands: `make
# dkms-install-src`, `dkms add`, `dkms build` and `dkms install` for every
# kernel with headers (Debian's 6.1 and the backports 6.12), `dkms
# autoinstall` (the new-kernel hook) after an uninstall, then `dkms remove
# --all`.  Checks that each built module says version VERSION and was built
# for its kernel, that modprobe would find it after depmod, and that every
# option named in packaging/modprobe.d/pinmem.conf is a module parameter.
#
# By default DKMS works in private trees under a temp dir (--sourcetree,
# --dkmstree, --installtree, signing key): the machine is left exactly as it
# was, even on failure, and concurrent runs do not collide.  DKMS_SYSTEM=1
# uses /usr/src, /var/lib/dkms and /lib/modules as a user would (refused when
# pinmem is already registered there); it cleans up on exit too.
# Env: VERSION, MAKE, DKMS_KERNELS (default: every /lib/modules/*/build).
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=${VERSION:-$(cat VERSION)}
MAKE=${MAKE:-make}
name=pinmem
me=dkms-check
fail() { echo "dkms-check: FAIL: $*" >&2; exit 1; }
# grep -q would exit at the first match and fail the pipeline (pipefail).
has() { grep "$@" > /dev/null; }
. tests/install/dkms-lib.sh

if [ "$(id -u)" != 0 ]; then
	echo "dkms-check: must run as root (dkms install refuses otherwise)." >&2
	echo "dkms-check: run 'sudo make dkms-check' (CI runs 'make check' as root)." >&2
	exit 1
fi
command -v dkms >/dev/null || fail "dkms is not installed (make deps installs it)"

kernels=${DKMS_KERNELS:-}
if [ -z "$kernels" ]; then
	for d in /lib/modules/*/build; do
		[ -f "$d/Makefile" ] && kernels="$kernels $(basename "$(dirname "$d")")"
	done
fi
[ -n "$kernels" ] || fail "no kernel headers under /lib/modules/*/build"

tmp=$(mktemp -d /tmp/pinmem-dkms.XXXXXX)
if [ "${DKMS_SYSTEM:-0}" = 1 ]; then
	root=
	srcdir=/usr/src/$name-$VERSION
	installtree=/lib/modules
	topt=()
	dkms status -m "$name" 2>/dev/null | has . &&
		fail "$name is already registered with DKMS on this machine; not touching it"
	[ -e "$srcdir" ] && fail "$srcdir exists; not touching it"
	# dkms creates a signing key on first use; drop it if it was ours.
	for k in /var/lib/dkms/mok.key /var/lib/dkms/mok.pub; do
		[ -e "$k" ] || newkeys="${newkeys:-} $k"
	done
else
	root=$tmp/root
	srcdir=$root/usr/src/$name-$VERSION
	installtree=$root/lib/modules
	# --no-depmod: dkms would run depmod on /lib/modules, not the private tree.
	topt=(--sourcetree "$root/usr/src" --dkmstree "$root/var/lib/dkms"
	      --installtree "$installtree" --no-depmod)
	# Sign with a throw-away key, not by creating /var/lib/dkms/mok.key.
	export mok_signing_key=$tmp/mok.key mok_certificate=$tmp/mok.pub
	mkdir -p "$root/var/lib/dkms"
	for kv in $kernels; do mkdir -p "$installtree/$kv"; done
fi
added=0
cleanup() {
	rc=$?
	if [ "$added" = 1 ]; then
		dkms remove "${topt[@]}" "$name/$VERSION" --all >/dev/null 2>&1 || rc=1
	fi
	[ -n "$root" ] || rm -rf "$srcdir" ${newkeys:-}
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "dkms-check: kernels:$kernels; trees: ${root:-system}"
$MAKE --no-print-directory dkms-install-src DESTDIR="$root" >/dev/null
[ -f "$srcdir/dkms.conf" ] || fail "make dkms-install-src did not write $srcdir/dkms.conf"
grep -qx "PACKAGE_VERSION=\"$VERSION\"" "$srcdir/dkms.conf" ||
	fail "$srcdir/dkms.conf does not say PACKAGE_VERSION=\"$VERSION\""

dkms add "${topt[@]}" "$name/$VERSION"
added=1

for kv in $kernels; do
	if ! dkms build "${topt[@]}" -j 2 "$name/$VERSION" -k "$kv"; then
		log=${root}/var/lib/dkms/$name/$VERSION/build/make.log
		tail -n 40 "$log" >&2 2>/dev/null || true
		fail "dkms build for $kv"
	fi
	if [ -n "$root" ]; then
		dkms install "${topt[@]}" --force "$name/$VERSION" -k "$kv"
	else
		dkms install --force "$name/$VERSION" -k "$kv"
	fi
	ko=$(find "$installtree/$kv/updates/dkms" -name "$name.ko*" 2>/dev/null | head -n 1)
	[ -n "$ko" ] || fail "dkms install put no $name.ko under $installtree/$kv/updates/dkms"
	if [ -n "$root" ]; then
		# What `dkms install` runs on a real tree: depmod, then modprobe finds it.
		cp /lib/modules/"$kv"/modules.order /lib/modules/"$kv"/modules.builtin* \
			"$installtree/$kv/" 2>/dev/null || true
		depmod -b "$root" "$kv"
	fi
	dkms_check_ko "$ko" "$kv" "$root"
	dkms_check_signed "$ko" "${mok_certificate:-/var/lib/dkms/mok.pub}"
	echo "dkms-check: $kv: $ko version $VERSION, signed by '$(modinfo -F signer "$ko")'"
done

dkms_check_autoinstall "$kv" "$installtree" "${topt[@]}"
# The documented examples in modprobe.d must name real parameters.
dkms_check_modprobe_conf packaging/modprobe.d/pinmem.conf "$ko"

dkms status "${topt[@]}" -m "$name" -v "$VERSION"
dkms remove "${topt[@]}" "$name/$VERSION" --all
added=0
left=$(find "$installtree" -name "$name.ko*" 2>/dev/null)
[ -z "$left" ] || fail "dkms remove --all left $left"
if [ -n "$root" ] && [ -d "$root/var/lib/dkms/$name" ]; then
	fail "dkms remove --all left $root/var/lib/dkms/$name"
fi
$MAKE --no-print-directory dkms-uninstall-src DESTDIR="$root" >/dev/null
[ ! -e "$srcdir" ] || fail "make dkms-uninstall-src left $srcdir"
echo "dkms-check: OK: pinmem $VERSION added, built, installed and removed for:$kernels"
