#!/bin/sh
# SPDX-License-Identifier: MIT
# `make vm-check-debug`: build or reuse the sanitizing debug kernel
# (build-kernel.sh), boot it with pinmem.ko and the whole in-VM suite through
# tests/vm/run.sh (which judges tests, splats and FOLL_PIN balance), then judge
# what only a debug kernel reports: KASAN, lockdep, kmemleak leaks that belong
# to pinmem (scanned after each rmmod by kmemleak-hook.sh), and that lockdep
# and kmemleak were really working.
#   VM_DEBUG_TIMEOUT       boot limit in seconds (default 2700)
#   VM_DEBUG_TEST_TIMEOUT  limit per test program in the VM (default 900)
set -eu
cd "$(dirname "$0")/../.."
here=tests/vm-debug
O=${O:-build}
export O
out=$O/vm-debug

t0=$(date +%s)
kdir=$($here/build-kernel.sh | tail -n 1)
t1=$(date +%s)
kver=$(cat "$kdir/kver")
echo "vm-check-debug: kernel $kver from $kdir (build $(cat "$kdir/build-time")s when it was built; $((t1 - t0))s now)"

rc=0
VM_TEST_TIMEOUT=${VM_DEBUG_TEST_TIMEOUT:-900} tests/vm/run.sh \
	--kernel "$kdir/bzImage" --kbuild "$kdir/linux" --kver "debug-$kver" \
	--out "$out" --timeout "${VM_DEBUG_TIMEOUT:-2700}" \
	--hook "$here/kmemleak-hook.sh" --append "kasan_multi_shot" || rc=$?
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
grep -aq '^PINMEM-DEBUG: debug_locks=1' "$log" || fail "lockdep was off at the end (debug_locks != 1)"
loads=$(grep -ac '^PINMEM-KMEMLEAK-MODULE ' "$log" || true)
scans=$(grep -ac '^PINMEM-KMEMLEAK-END ' "$log" || true)
[ "$loads" -gt 0 ] || fail "no module load seen by the hook"
[ "$scans" = "$loads" ] || fail "$scans kmemleak scans after $loads loads"

# Leaks: a record names pinmem when a backtrace frame is a pinmem symbol or,
# once the module is gone and its symbols no longer resolve, an address
# inside one of the places the module was loaded at.
hex16() {	# bc's upper-case hex -> 16 lower-case digits, compared as strings
	h=$(echo "$1" | tr A-F a-f)
	while [ ${#h} -lt 16 ]; do h=0$h; done
	echo "$h"
}
ranges=$(grep -a '^PINMEM-KMEMLEAK-MODULE ' "$log" | while read -r _ b s; do
	b=$(echo "${b#base=0x}" | tr a-f A-F)
	e=$(echo "obase=16; ibase=16; $b + $(printf '%X' "${s#size=}")" | bc)
	echo "$(hex16 "$b")-$(hex16 "$e")"
done)
leaks=$out/kmemleak-pinmem.txt
awk -v ranges="$ranges" '
	BEGIN { n = split(ranges, r, " ") }
	/^PINMEM-KMEMLEAK-BEGIN/ { inside = 1; next }
	/^PINMEM-KMEMLEAK-END/ { flush(); inside = 0; next }
	!inside { next }
	/^unreferenced object/ { flush() }
	{ rec = rec $0 "\n" }
	/\[<[0-9a-f]+>\]/ {
		if ($0 ~ /pinmem/) hit = 1
		a = $0; sub(/.*\[</, "", a); sub(/>\].*/, "", a)
		a = sprintf("%16s", a); gsub(/ /, "0", a)
		for (i = 1; i <= n; i++) {
			split(r[i], lh, "-")
			if (a >= lh[1] && a < lh[2]) hit = 1
		}
	}
	function flush() { if (hit) printf "%s", rec; rec = ""; hit = 0 }
' "$log" >"$leaks"
nleaks=$(grep -c '^unreferenced object' "$leaks" || true)
allleaks=$(grep -ac '^unreferenced object' "$log" || true)
if [ "$nleaks" != 0 ]; then
	fail "$nleaks kmemleak reports name pinmem ($leaks)"
	head -n 60 "$leaks"
fi

if [ -n "$reasons" ]; then
	grep -a -B 2 -A 30 -m 2 -E 'BUG: KASAN|WARNING: possible|INFO: possible' "$log" | head -n 80 || true
	echo "vm-check-debug: FAIL (${reasons#; }) log $log"
	exit 1
fi
echo "vm-check-debug: PASS: $kver with KASAN, lockdep, kmemleak, DEBUG_VM;" \
	"boot + suite $((t2 - t1))s, $scans kmemleak scans, $allleaks suspects none pinmem's"
