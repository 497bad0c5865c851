#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian packages as an operator uses them, on this machine: `make deb`,
# `apt-get install ./*.deb`, then
#  - every package says version VERSION;
#  - the pinmem-dkms postinst had DKMS build, sign (with /var/lib/dkms's
#    MOK key) and install the module for
#    every kernel with headers (Debian's 6.1 and the backports' 6.12): the
#    checks of tests/install/dkms-lib.sh (version, vermagic, modprobe finds
#    it, `dkms autoinstall` puts it back, modprobe.d names real parameters);
#  - the group "pinmem" exists, the udev rule gives it /dev/pinmem;
#  - tests/install/hello.c builds with `pkg-config --cflags --libs pinmem`
#    against /usr and runs against /usr/lib's libpinmem.so.0;
#  - /usr/bin/pinctl doctor and /usr/bin/pinstream --version run, and man
#    finds their pages; python3-pinmem, when built, imports from /usr;
# then `apt-get purge` leaves nothing: no package file, no DKMS tree, no
# module under /lib/modules, no /usr/src/pinmem-*, no group.
#
# This is the same module source as `make dkms-check` (both are written by
# `make dkms-install-src`) going through dkms add/build/install on the real
# trees, so `make check` runs this and not dkms-check as well.
#
# It changes the machine while it runs, and puts it back on exit, failure
# included.  A run killed before it could (SIGKILL, power loss) leaves a
# marker; the next run purges what that run installed before it starts.
# Packages or a "pinmem" group that deb-check did not install are left
# alone: it refuses to run.  A DKMS signing key the install made (first use
# of DKMS on the machine) is removed too.  Env: VERSION, MAKE, O.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=${VERSION:-$(cat VERSION)}
MAKE=${MAKE:-make}
O=${O:-build}
CC=${CC:-cc}
me=deb-check
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
# grep -q would exit at the first match and fail the pipeline (pipefail).
has() { grep "$@" > /dev/null; }
. tests/install/dkms-lib.sh

[ "$(id -u)" = 0 ] || { echo "$me: must run as root (apt-get install); CI runs 'make check' as root." >&2; exit 1; }

pkgs="pinmem-dkms libpinmem0 libpinmem-dev pinmem-tools"
[ ! -d python ] || pkgs="$pkgs python3-pinmem"
all_pkgs="pinmem-dkms libpinmem0 libpinmem-dev pinmem-tools python3-pinmem"
marker=/var/lib/pinmem-deb-check.installed
apt=(apt-get -y -q -o DPkg::Lock::Timeout=600)

# Installed (or half-installed, or removed with conffiles left) packages.
present() {
	local p
	for p in $all_pkgs; do
		dpkg-query -W -f='${db:Status-Status} ${Package}\n' "$p" 2>/dev/null |
			awk '$1 != "not-installed" { print $2 }' || true
	done
}

# `apt-get purge` of whatever pinmem package is present.
apt_purge() {
	local p
	p=$(present)
	[ -z "$p" ] || DEBIAN_FRONTEND=noninteractive "${apt[@]}" purge $p > "$tmp/purge.log" 2>&1 ||
		{ cat "$tmp/purge.log" >&2; return 1; }
}

# Puts the machine back after a run that failed or was killed: what
# apt-get purge would remove, and what a postinst killed half-way leaves.
scrub() {
	apt_purge || dpkg --purge $(present) > /dev/null 2>&1 || true
	dkms remove "pinmem/$VERSION" --all > /dev/null 2>&1 || true
	rm -rf /var/lib/dkms/pinmem "/usr/src/pinmem-$VERSION"
	local ko
	for ko in $(find /lib/modules -path '*/updates/dkms/pinmem.ko*'); do
		rm -f "$ko"
		depmod "$(echo "$ko" | cut -d/ -f4)"
	done
	if getent group pinmem > /dev/null; then groupdel pinmem || true; fi
	drop_new_keys
	[ -n "$(present)" ] || rm -f "$marker"
}

# DKMS makes its module signing key on first use; the marker lists the key
# files this run's install created, which go when the packages go.
drop_new_keys() {
	local k
	for k in $(cat "$marker" 2>/dev/null); do
		case $k in /var/lib/dkms/mok.*) rm -f "$k" ;; esac
	done
}

tmp=$(mktemp -d /tmp/pinmem-deb.XXXXXX)
cleanup() {
	rc=$?
	if [ -e "$marker" ]; then scrub; [ ! -e "$marker" ] || rc=1; fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# One deb-check at a time on a machine.
exec 9> /run/lock/pinmem-deb-check.lock
flock -w 1200 9 || fail "another deb-check holds /run/lock/pinmem-deb-check.lock"

if [ -e "$marker" ]; then
	echo "$me: an earlier run was interrupted; purging what it installed"
	scrub
	[ ! -e "$marker" ] || fail "could not purge what an earlier run installed: $(present)"
fi
left=$(present)
[ -z "$left" ] || fail "pinmem packages are installed and not by deb-check ($(echo $left)); purge them first"
getent group pinmem > /dev/null &&
	fail "a group 'pinmem' exists (make install?); purging the packages would remove it; delgroup pinmem first"
dkms status -m pinmem 2>/dev/null | has . &&
	fail "pinmem is registered with DKMS already (dkms remove pinmem/VERSION --all first)"
[ ! -e "/usr/src/pinmem-$VERSION" ] || fail "/usr/src/pinmem-$VERSION exists (make dkms-install-src?); remove it first"

kernels=
for d in /lib/modules/*/build; do
	[ -f "$d/Makefile" ] && kernels="$kernels $(basename "$(dirname "$d")")"
done
[ -n "$kernels" ] || fail "no kernel headers under /lib/modules/*/build"

echo "$me: make deb"
SECONDS=0
$MAKE --no-print-directory deb > "$tmp/deb.log" 2>&1 || { tail -n 60 "$tmp/deb.log" >&2; fail "make deb"; }
grep -E '^[EWI]: ' "$tmp/deb.log" | sed "s/^/$me: lintian: /" || true
echo "$me: make deb took ${SECONDS}s"
debs=
for p in $pkgs; do
	f=$(ls "$O/deb/${p}_${VERSION}_"*.deb 2>/dev/null) || fail "make deb built no $p package"
	debs="$debs ./$f"
done

echo "$me: apt-get install$debs (DKMS builds for:$kernels)"
for k in /var/lib/dkms/mok.key /var/lib/dkms/mok.pub; do
	[ -e "$k" ] || echo "$k"
done > "$marker"
SECONDS=0
DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends $debs > "$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "apt-get install$debs"; }
echo "$me: apt-get install took ${SECONDS}s"
for p in $pkgs; do
	v=$(dpkg-query -W -f='${Version}' "$p")
	[ "$v" = "$VERSION" ] || fail "$p is version $v, VERSION says $VERSION"
done
# Every file the packages own, to check the purge against.
dpkg-query -L $pkgs | sort -u > "$tmp/files"
while read -r f; do [ -d "$f" ] || echo "$f"; done < "$tmp/files" > "$tmp/owned"

# DKMS: built and installed for every kernel, on the system's own trees.
for kv in $kernels; do
	# (dkms status runs readelf, which warns about modules without .comment.)
	dkms status -m pinmem -v "$VERSION" -k "$kv" 2> /dev/null | has ': installed' ||
		fail "the pinmem-dkms postinst did not install the module for $kv: $(dkms status -m pinmem)"
	ko=$(find "/lib/modules/$kv/updates/dkms" -name 'pinmem.ko*' 2>/dev/null | head -n 1)
	[ -n "$ko" ] || fail "no pinmem.ko under /lib/modules/$kv/updates/dkms"
	dkms_check_ko "$ko" "$kv" ""
	# Signed with the machine's MOK key, what Secure Boot needs enrolled.
	dkms_check_signed "$ko" /var/lib/dkms/mok.pub
	echo "$me: $kv: $ko version $VERSION, signed by '$(modinfo -F signer "$ko")'"
done
dkms_check_autoinstall "$kv" /lib/modules
dkms_check_modprobe_conf /lib/modprobe.d/pinmem.conf "$ko"

# The group /dev/pinmem belongs to, and the rule that gives it.
getent group pinmem > /dev/null || fail "installing pinmem-dkms did not create the group pinmem"
has 'GROUP="pinmem"' /lib/udev/rules.d/60-pinmem.rules || fail "no udev rule for /dev/pinmem"
has -x pinmem /usr/lib/modules-load.d/pinmem.conf || fail "modules-load.d does not load pinmem"

# A program against the installed library, as README's users build one.
cflags=$(pkg-config --cflags pinmem) libs=$(pkg-config --libs pinmem)
[ "$(pkg-config --modversion pinmem)" = "$VERSION" ] || fail "pkg-config --modversion pinmem is not $VERSION"
$CC -Wall -Wextra -Werror -o "$tmp/hello" tests/install/hello.c $cflags $libs ||
	fail "hello.c does not build with pkg-config --cflags --libs pinmem ('$cflags' '$libs')"
# /lib is /usr/lib on a merged-/usr system: compare where the links lead.
so=$(ldd "$tmp/hello" | sed -n 's/.*libpinmem\.so\.0 => \([^ ]*\) .*/\1/p')
[ -n "$so" ] && [ "$(readlink -f "$so")" = "$(readlink -f "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libpinmem.so.0")" ] ||
	fail "hello does not load the package's libpinmem.so.0: $(ldd "$tmp/hello")"
out=$("$tmp/hello") || fail "hello failed: $out"
echo "$out" | has -E 'pin mode (module|mlock)$' || fail "hello printed '$out'"
echo "$me: hello.c with pkg-config '$cflags $libs': $out"

# The tools from /usr/bin; the module is never loaded on the build host, so
# doctor reports that as its one FAIL (exit 1); 2 and up are usage errors
# and crashes.
[ "$(command -v pinctl)" = /usr/bin/pinctl ] || fail "pinctl is not /usr/bin/pinctl on PATH"
rc=0; out=$(/usr/bin/pinctl doctor 2>&1) || rc=$?
[ "$rc" -le 1 ] && echo "$out" | has -E '^doctor: ' ||
	fail "/usr/bin/pinctl doctor exited $rc: $out"
echo "$out" | sed "s/^/$me: pinctl doctor: /"
out=$(/usr/bin/pinstream --version 2>&1) || fail "/usr/bin/pinstream --version: $out"
echo "$out" | has -w -- "$VERSION" || fail "/usr/bin/pinstream --version says '$out', not $VERSION"
for m in 8:pinctl 1:pinstream; do
	man -w "${m%%:*}" "${m#*:}" | has "^/usr/share/man/" || fail "man does not find ${m#*:}(${m%%:*})"
done

if [[ " $pkgs " == *" python3-pinmem "* ]]; then
	# Debian's interpreter, the one python3-pinmem depends on (not a pyenv
	# or virtualenv python3 first on PATH), from / so that the checkout's
	# python/ is not what gets imported.
	out=$(cd / && PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import pinmem; print(pinmem.__file__, pinmem.open().empty(4096).pin_mode)') ||
		fail "python3 cannot import pinmem from python3-pinmem: $out"
	echo "$out" | has -x '/usr/lib/python3/dist-packages/pinmem/__init__.py \(module\|mlock\)' ||
		fail "python3-pinmem: '$out', want /usr/lib/python3/dist-packages/pinmem and a pinned buffer"
	echo "$me: python3: $out"
fi

# Purge: nothing left.
echo "$me: apt-get purge $pkgs"
apt_purge || fail "apt-get purge $pkgs"
left=$(present)
[ -z "$left" ] || fail "still installed after purge: $left"
while read -r f; do [ ! -e "$f" ] && [ ! -L "$f" ] || echo "$f"; done < "$tmp/owned" > "$tmp/left"
[ ! -s "$tmp/left" ] || fail "purge left files: $(cat "$tmp/left")"
[ -z "$(find /lib/modules -path '*/updates/dkms/pinmem.ko*')" ] || fail "purge left a pinmem.ko in /lib/modules"
[ ! -e /var/lib/dkms/pinmem ] || fail "purge left /var/lib/dkms/pinmem"
[ ! -e "/usr/src/pinmem-$VERSION" ] || fail "purge left /usr/src/pinmem-$VERSION"
! getent group pinmem > /dev/null || fail "purge left the group pinmem"
drop_new_keys
rm -f "$marker"
echo "$me: OK: $(echo $pkgs | wc -w) packages $VERSION installed, checked and purged; DKMS built for:$kernels"
