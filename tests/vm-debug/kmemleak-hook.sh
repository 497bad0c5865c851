#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# shellcheck shell=dash
# /hook.sh of the debug-kernel VM (tests/vm/run.sh --hook), run by /init:
#   boot      mount debugfs, scan once and forget boot-time suspects
#   loaded    print where pinmem.ko's memory starts and how many modules are
#             loaded, so the host can attribute leaks whose symbols died
#             with the module
#   unloaded  scan twice with a pause (an object must be unreferenced and
#             older than 5 s) and print every suspected leak, then whether
#             lockdep is still on (it turns itself off after its first report)
# Lines the host parses start with "PINMEM-KMEMLEAK" or "PINMEM-LOCKDEP".
# Nothing printed may contain what the host treats as a splat ("BUG:" also
# matches "DEBUG:"), so hex dumps are dropped: leaked bytes could spell it.
export PATH=/bin
km=/sys/kernel/debug/kmemleak

ready() {
	grep -q ' /sys/kernel/debug ' /proc/mounts ||
		mount -t debugfs debugfs /sys/kernel/debug
	if [ ! -w $km ]; then
		echo "PINMEM-KMEMLEAK: unavailable ($km missing)"
		return 1
	fi
}

scan() {
	echo scan >$km || { echo "PINMEM-KMEMLEAK: scan refused (kmemleak disabled?)"; return 1; }
}

case $1 in
boot)
	ready || exit 0
	t0=$(date +%s)
	scan && echo clear >$km &&
		echo "PINMEM-KMEMLEAK: boot suspects cleared ($(($(date +%s) - t0))s)"
	;;
loaded)
	# /proc/modules: name size refcount deps state address
	awk '$1 == "pinmem" { b = $6; s = $2 } END {
		print "PINMEM-KMEMLEAK-MODULE base=" b " size=" s " modules=" NR }' /proc/modules
	;;
unloaded)
	ready || exit 0
	t0=$(date +%s)
	scan || exit 0
	sleep 6
	scan || exit 0
	echo "PINMEM-KMEMLEAK-BEGIN"
	grep -Ev '^ +([0-9a-f]{2} )+ ' $km
	echo "PINMEM-KMEMLEAK-END scanned in $(($(date +%s) - t0))s"
	awk '$1 == "debug_locks:" { print "PINMEM-LOCKDEP debug_locks=" $2 }' \
		/proc/lockdep_stats
	;;
esac
exit 0
