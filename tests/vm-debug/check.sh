#!/bin/sh
# SPDX-License-Identifier: MIT
# `make vm-check-debug`: build or reuse the sanitizing debug kernel
# (build-kernel.sh), boot it with pinmem.ko and the whole in-VM suite through
# tests/vm/run.sh (which judges tests, splats and FOLL_PIN balance), then judge
# what only a debug kernel reports: KASAN, lockdep, kmemleak leaks that belong
# to pinmem (scanned after each rmmod by kmemleak-hook.sh), and that lockdep
# and kmemleak were really working.
# The suite boots with module.sig_enforce=1, as lockdown enforces it under
# Secure Boot: the kernel trusts the test key signing/test-cert.pem (the
# enrolled MOK key of a real machine), pinmem.ko is signed with it the way
# DKMS signs (scripts/sign-file), and /init checks that an unsigned copy and
# one signed by another key are refused and that `pinctl doctor` says why.
#   check.sh --canary  boot tests/vm-debug/canary (a pinmem.ko with a lock
#                      inversion, an out-of-bounds read and a leak) instead,
#                      and pass only if the judge catches all three.
#   VM_DEBUG_TIMEOUT       boot limit in seconds (default 2700)
#   VM_DEBUG_TEST_TIMEOUT  limit per test program in the VM (default 900)
set -eu
cd "$(dirname "$0")/../.."
here=tests/vm-debug
O=${O:-build}
export O
out=$O/vm-debug
canary=0
if [ "${1:-}" = --canary ]; then
	canary=1
	out=$O/vm-debug-canary
fi

t0=$(date +%s)
kdir=$($here/build-kernel.sh | tail -n 1)
t1=$(date +%s)
kver=$(cat "$kdir/kver")
echo "vm-check-debug: kernel $kver from $kdir (build $(cat "$kdir/build-time")s when it was built; $((t1 - t0))s now)"

module=
append="kasan_multi_shot"
if [ $canary = 0 ]; then
	# pinmem.ko as DKMS installs it on a Secure Boot machine, and two the
	# kernel must refuse (in the VM as /sig/*.ko, see tests/vm/init.sh).
	sig=$out/sig
	rm -rf "$sig"
	mkdir -p "$sig/root/sig"
	$MAKE -s --no-print-directory kmod KVER="debug-$kver" KDIR="$kdir/linux" O="$O"
	plain=$O/kmod/debug-$kver/pinmem.ko
	signfile=$kdir/linux/scripts/sign-file
	[ -x "$signfile" ] || { echo "vm-check-debug: FAIL: no $signfile in the debug build" >&2; exit 1; }
	cp "$plain" "$sig/pinmem.ko"
	"$signfile" sha256 $here/signing/test-key.pem $here/signing/test-cert.pem "$sig/pinmem.ko"
	cp "$plain" "$sig/root/sig/unsigned.ko"
	openssl req -new -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=untrusted" \
		-keyout "$sig/other-key.pem" -out "$sig/other-cert.pem" 2>/dev/null
	cp "$plain" "$sig/root/sig/other-key.ko"
	"$signfile" sha256 "$sig/other-key.pem" "$sig/other-cert.pem" "$sig/root/sig/other-key.ko"
	module="--module $sig/pinmem.ko"
	append="$append module.sig_enforce=1"
	VM_EXTRA_ROOT="${VM_EXTRA_ROOT:-} $sig/root"
	export VM_EXTRA_ROOT
fi
if [ $canary = 1 ]; then
	rm -rf "$out/canary"
	mkdir -p "$out/canary"
	cp $here/canary/Kbuild $here/canary/canary.c "$out/canary/"
	env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS -u MAKELEVEL \
		make -s -C "$kdir/linux" M="$(cd "$out/canary" && pwd)" modules
	module="--module $out/canary/pinmem.ko"
fi

rc=0
# shellcheck disable=SC2086
VM_TEST_TIMEOUT=${VM_DEBUG_TEST_TIMEOUT:-900} tests/vm/run.sh \
	--kernel "$kdir/bzImage" --kbuild "$kdir/linux" --kver "debug-$kver" \
	--out "$out" --timeout "${VM_DEBUG_TIMEOUT:-2700}" \
	--hook "$here/kmemleak-hook.sh" --append "$append" $module || rc=$?
t2=$(date +%s)
log=$out/console.txt
[ -f "$log" ] || { echo "vm-check-debug: FAIL: no console log" >&2; exit 1; }

reasons=
fail() { reasons="$reasons; $*"; }
[ "$rc" = 0 ] || fail "VM suite failed (see above)"

# Sanitizer reports; run.sh already fails on BUG:/WARNING:, these name them.
for pat in 'BUG: KASAN' 'WARNING: possible' 'circular locking' \
	'INFO: possible' 'possible recursive locking' 'inconsistent lock state' \
	'suspicious RCU usage' 'BUG: sleeping function' 'BUG: MAX_LOCK' \
	'kmemleak: .*disabled' 'kmemleak: Memory pool empty'; do
	n=$(grep -ac "$pat" "$log" || true)
	[ "$n" = 0 ] || fail "$n x '$pat'"
done

# The debug machinery must have run: lockdep still on at the end, a kmemleak
# scan after every rmmod, and the module's place known for each load.
grep -aq '^PINMEM-LOCKDEP debug_locks=1' "$log" || fail "lockdep was off at the end (debug_locks != 1)"
loads=$(grep -ac '^PINMEM-KMEMLEAK-MODULE ' "$log" || true)
scans=$(grep -ac '^PINMEM-KMEMLEAK-END ' "$log" || true)
[ "$loads" -gt 0 ] || fail "no module load seen by the hook"
[ "$scans" = "$loads" ] || fail "$scans kmemleak scans after $loads loads"

# Leaks: a record names pinmem when a backtrace frame is a pinmem symbol or,
# once the module is gone and its symbols no longer resolve, a bare address
# in module space (from the lowest place pinmem was loaded at up to
# MODULES_END): pinmem is the only module the VM ever loads (checked), and its
# init text lies outside the core range /proc/modules shows.
hex16() {	# 16 lower-case digits: addresses then compare as strings
	h=$(echo "${1#0x}" | tr A-F a-f)
	while [ ${#h} -lt 16 ]; do h=0$h; done
	echo "$h"
}
lowest=$(grep -a '^PINMEM-KMEMLEAK-MODULE ' "$log" | while read -r _ b _; do
	hex16 "${b#base=}"; done | sort | head -n 1)
grep -a '^PINMEM-KMEMLEAK-MODULE ' "$log" | grep -qv ' modules=1$' &&
	fail "other modules were loaded: leaks in module space are not surely pinmem's"
leaks=$out/kmemleak-pinmem.txt
awk -v lo="${lowest:-ffffffffffffffff}" -v hi=ffffffffff000000 '
	/^PINMEM-KMEMLEAK-BEGIN/ { inside = 1; next }
	/^PINMEM-KMEMLEAK-END/ { flush(); inside = 0; next }
	!inside { next }
	/^unreferenced object/ { flush() }
	{ rec = rec $0 "\n" }
	/^ *backtrace/ { bt = 1; next }
	bt && /^    / {
		# 6.12: "    sym+off/len [mod]" or "    0xADDR"; older: "[<ADDR>] sym"
		if ($0 ~ /pinmem/) hit = 1
		a = $1; sub(/^\[</, "", a); sub(/>\]$/, "", a); sub(/^0x/, "", a)
		if (a ~ /^[0-9a-f]+$/ && length(a) <= 16) {
			a = sprintf("%16s", a); gsub(/ /, "0", a)
			if (a >= lo && a < hi) hit = 1
		}
	}
	function flush() { if (hit) printf "%s", rec; rec = ""; hit = 0; bt = 0 }
' "$log" >"$leaks"
nleaks=$(grep -c '^unreferenced object' "$leaks" || true)
allleaks=$(grep -ac '^unreferenced object' "$log" || true)
if [ "$nleaks" != 0 ]; then
	fail "$nleaks kmemleak reports name pinmem ($leaks)"
	head -n 60 "$leaks"
fi

if [ $canary = 1 ]; then
	case $reasons in
	*"'BUG: KASAN'"*"'circular locking'"*"kmemleak reports name pinmem"*)
		echo "vm-check-debug --canary: PASS: the check caught the canary (${reasons#; })"
		exit 0 ;;
	esac
	echo "vm-check-debug --canary: FAIL: the check missed the canary's bugs (${reasons#; })"
	exit 1
fi
if [ -n "$reasons" ]; then
	grep -a -B 2 -A 30 -m 2 -E 'BUG: KASAN|WARNING: possible|INFO: possible' "$log" | head -n 80 || true
	echo "vm-check-debug: FAIL (${reasons#; }) log $log"
	exit 1
fi
echo "vm-check-debug: PASS: $kver with KASAN, lockdep, kmemleak, DEBUG_VM;" \
	"boot + suite $((t2 - t1))s, $scans kmemleak scans: $allleaks suspects, none in pinmem"
