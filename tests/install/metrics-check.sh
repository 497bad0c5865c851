#!/bin/sh
# SPDX-License-Identifier: MIT
# pinmem-metrics.service and .timer (packaging/systemd/): `systemd-analyze
# verify` accepts both; the timer is not enabled by default (no [Install] in
# the service, so only the timer is enabled) and repeats; the service's own
# ExecStart (its ${PINMEM_TEXTFILE_DIR} and ${PINMEM_PROCESSES} from its
# Environment= lines, pinctl from $PINCTL) run against recorded module trees
# writes pinmem.prom into a temporary directory that promtool accepts, and
# replaces it atomically: a reader polling the file while it is rewritten
# 200 times, alternately from two trees, only ever sees one of the two whole
# outputs.  A failed run (a stats file pinctl refuses, a missing directory)
# leaves the old file and no temporary file, with one line on stderr.
#
# usage: metrics-check.sh PINCTL
set -eu
pinctl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
top=$(cd "$(dirname "$0")/../.." && pwd)
unit=$top/packaging/systemd/pinmem-metrics.service
timer=$top/packaging/systemd/pinmem-metrics.timer
trees=$top/tests/golden/pinctl/trees
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nfail=0
fail() {
	echo "metrics-check: FAIL $*"
	nfail=$((nfail + 1))
}
command -v promtool >/dev/null ||
	{ echo "metrics-check: promtool is needed (apt-get install prometheus)" >&2; exit 1; }

# The units as systemd reads them (pinctl is not installed here).
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify --man=no "$unit" "$timer" >"$tmp/verify.log" 2>&1 || true
	! grep -i 'pinmem-metrics\.\(service\|timer\):' "$tmp/verify.log" |
		grep -v 'is not executable' || fail "systemd-analyze verify complains"
else
	fail "systemd-analyze is needed"
fi
grep -q '^\[Install\]' "$unit" && fail "the service has an [Install] section: only the timer is enabled"
grep -qx 'WantedBy=timers.target' "$timer" || fail "the timer is not WantedBy=timers.target"
grep -qx 'OnUnitActiveSec=15s' "$timer" || fail "the timer does not repeat every 15 s"
grep -qx 'Environment=PINMEM_TEXTFILE_DIR=/var/lib/prometheus/node-exporter' "$unit" ||
	fail "the default directory is not Debian's /var/lib/prometheus/node-exporter"

# The ExecStart line, with the unit's variables and this pinctl.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
procs=$(sed -n 's/^Environment=PINMEM_PROCESSES=//p' "$unit")
run_unit() {	# tree dir: the service's command with roots in tests/golden
	cmd=$(printf '%s\n' "$exec_start" | sed -e "s|^/usr/bin/pinctl|$pinctl|" \
		-e "s|\${PINMEM_TEXTFILE_DIR}|$2|" -e "s|\${PINMEM_PROCESSES}|$procs|")
	# shellcheck disable=SC2086
	PINCTL_PROC_ROOT=$trees/$1/proc PINCTL_SYS_ROOT=$trees/$1/sys \
	PINCTL_DEV_ROOT=$trees/$1/dev PINCTL_PASSWD=$top/tests/golden/pinctl/passwd $cmd
}

dir=$tmp/textfile
mkdir "$dir"
run_unit module "$dir" || fail "the service's command failed"
[ "$(stat -c %a "$dir/pinmem.prom" 2>/dev/null)" = 644 ] || fail "pinmem.prom is not 0644"
promtool check metrics <"$dir/pinmem.prom" >"$tmp/promtool" 2>&1 ||
	fail "promtool check metrics: $(cat "$tmp/promtool")"
grep -q '^pinmem_process_pinned_bytes{pid="other"} ' "$dir/pinmem.prom" &&
	! grep -q 'comm="' "$dir/pinmem.prom" || fail "the service's output has per-process series"
cp "$dir/pinmem.prom" "$tmp/a"
run_unit module15 "$dir" || fail "the service's command failed (module15)"
cp "$dir/pinmem.prom" "$tmp/b"
cmp -s "$tmp/a" "$tmp/b" && fail "the two trees give the same output"

# A reader polling the file while it is rewritten sees whole files only.
python3 - "$dir/pinmem.prom" "$tmp/a" "$tmp/b" "$tmp/stop" >"$tmp/reader" 2>&1 <<'PY' &
import os, sys
path, a, b, stop = sys.argv[1:5]
whole = {open(a, "rb").read(), open(b, "rb").read()}
reads = bad = 0
while not os.path.exists(stop):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        bad += 1
        print("the file was missing")
        continue
    reads += 1
    if data not in whole:
        bad += 1
        print("partial or mixed read of %d bytes" % len(data))
print("reads %d bad %d" % (reads, bad))
sys.exit(1 if bad or reads < 100 else 0)
PY
reader=$!
i=0
while [ $i -lt 100 ]; do
	run_unit module "$dir" && run_unit module15 "$dir" || { fail "a rewrite failed"; break; }
	i=$((i + 1))
done
touch "$tmp/stop"
wait "$reader" || fail "the reader saw a partial file: $(tail -n 3 "$tmp/reader")"
echo "metrics-check: $(tail -n 1 "$tmp/reader") during 200 rewrites"
left=$(find "$dir" -name '.pinmem.prom.*')
[ -z "$left" ] || fail "temporary files left: $left"

# Failures leave the old file, no temporary file, and say why in one line.
cp "$dir/pinmem.prom" "$tmp/before"
rc=0
run_unit garbage "$dir" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "a stats file pinctl refuses: exit $rc, want 1"
cmp -s "$dir/pinmem.prom" "$tmp/before" || fail "a failed run changed pinmem.prom"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "a failed run: not one line on stderr: $(cat "$tmp/err")"
rc=0
run_unit module "$tmp/nosuch" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "cannot create a file in its directory" "$tmp/err" ||
	fail "a missing directory: exit $rc, $(cat "$tmp/err")"
[ -z "$(find "$dir" -name '.pinmem.prom.*')" ] || fail "a failed run left a temporary file"
rc=0
"$pinctl" status --output "$dir/" 2>"$tmp/err" >/dev/null || rc=$?
[ "$rc" = 1 ] && grep -q "not a file name" "$tmp/err" || fail "--output DIR/: exit $rc, $(cat "$tmp/err")"

if [ "$nfail" != 0 ]; then
	echo "metrics-check: $nfail failed"
	exit 1
fi
echo "metrics-check: units verified, pinmem.prom replaced atomically and accepted by promtool"
