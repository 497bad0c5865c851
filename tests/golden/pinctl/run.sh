#!/bin/sh
# SPDX-License-Identifier: MIT
# Golden-output test of pinctl: run every line of cases.txt against a
# recorded tree (trees/NAME/{proc,sys,dev} through PINCTL_PROC_ROOT,
# PINCTL_SYS_ROOT, PINCTL_DEV_ROOT, users from ./passwd) and compare exit
# status, stdout and stderr with expected/CASE.{out,err}.  JSON outputs must
# parse (python3 -m json.tool), Prometheus outputs must pass promcheck.py and
# Prometheus' own `promtool check metrics` (Debian's prometheus package), and
# a failing case must say why in exactly one line on stderr.
#
# usage: run.sh PINCTL [CASE...]       UPDATE=1 run.sh ... rewrites expected/
set -eu
pinctl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
cd "$(dirname "$0")"
[ -x "$pinctl" ] || { echo "pinctl-check: no executable $pinctl" >&2; exit 1; }
command -v python3 >/dev/null || { echo "pinctl-check: python3 is needed" >&2; exit 1; }
command -v promtool >/dev/null ||
	{ echo "pinctl-check: promtool is needed (apt-get install prometheus; scripts/install-deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p expected
nfail=0
npass=0
only=" $* "

fail() {
	echo "pinctl-check: FAIL $case: $*"
	nfail=$((nfail + 1))
}

# The checkers must be able to fail: known-bad inputs first.
for bad in '# TYPE a counter\na 1\n' '# TYPE a_total counter\na_total 1\na_total 2\n' \
	'# TYPE x gauge\nx{a="b\\q"} 1\n' '# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n' \
	'x 1\n' '# TYPE x gauge\nx 1e\n' '# TYPE x gauge\nx 1'; do
	if printf "$bad" | python3 promcheck.py >/dev/null; then
		echo "pinctl-check: FAIL promcheck.py accepts bad input: $bad"
		nfail=$((nfail + 1))
	fi
done
for bad in '# TYPE a counter\na 1\n' '# HELP x y\n# TYPE x gauge\nx{a="b} 1\n'; do
	if printf "$bad" | promtool check metrics >/dev/null 2>&1; then
		echo "pinctl-check: FAIL promtool accepts bad input: $bad"
		nfail=$((nfail + 1))
	fi
done
printf '{"a": 1,}\n' | python3 -m json.tool >/dev/null 2>&1 &&
	{ echo "pinctl-check: FAIL json.tool accepts bad JSON"; nfail=$((nfail + 1)); }

# A tree with templates (FILE.in): the module names cgroups by id, the inode
# number of the cgroup's directory, which a checkout does not keep.  Such a
# tree is copied to $tmp once, and each FILE.in becomes FILE with every
# @ino:PATH@ replaced by the inode number of sys/fs/cgroup/PATH in the copy.
# Outputs are compared with $tmp/ taken out of them and each such inode
# number of a JSON "id" or a Prometheus id label put back as @ino:PATH@
# ($tmp/trees/NAME.sed).
tree_root() {
	if [ -z "$(find "trees/$1" -name '*.in' 2>/dev/null | head -n 1)" ]; then
		echo "trees/$1"
		return
	fi
	if [ ! -d "$tmp/trees/$1" ]; then
		mkdir -p "$tmp/trees"
		cp -a "trees/$1" "$tmp/trees/"
		find "$tmp/trees/$1" -name '*.in' | while read -r t; do
			python3 - "$t" "$tmp/trees/$1/sys/fs/cgroup" "$tmp/trees/$1.sed" <<'PY'
import os, re, sys
t, root, sedfile = sys.argv[1:4]
text = open(t).read()
ino = lambda m: str(os.stat(os.path.join(root, m.group(1))).st_ino)
open(t[:-3], "w").write(re.sub(r"@ino:([^@|]*)@", ino, text))
with open(sedfile, "a") as sed:
	for p in sorted(set(re.findall(r"@ino:([^@|]*)@", text))):
		ino_p = os.stat(os.path.join(root, p)).st_ino
		sed.write("s|\"id\": %s\\b|\"id\": @ino:%s@|g\n" % (ino_p, p))
		sed.write("s|,id=\"%s\"}|,id=\"@ino:%s@\"}|g\n" % (ino_p, p))
PY
		done
	fi
	echo "$tmp/trees/$1"
}

while read -r case tree want args; do
	case $case in ''|'#'*) continue ;; esac
	case $only in "  "|*" $case "*) ;; *) continue ;; esac
	out=$tmp/$case.out
	err=$tmp/$case.err
	rc=0
	root=$(tree_root "$tree")
	eval "set -- $args"
	PINCTL_PROC_ROOT=$root/proc PINCTL_SYS_ROOT=$root/sys \
	PINCTL_DEV_ROOT=$root/dev PINCTL_PASSWD=passwd \
	PINCTL_CUDA_LIB=/nonexistent/libcuda.so.1 \
		"$pinctl" "$@" >"$out.raw" 2>"$err.raw" </dev/null || rc=$?
	set --
	ids=/dev/null
	[ ! -f "$root.sed" ] || ids=$root.sed
	sed -e "s|$tmp/||g" -f "$ids" "$out.raw" >"$out"
	sed -e "s|$tmp/||g" -f "$ids" "$err.raw" >"$err"
	if [ "${UPDATE:-0}" = 1 ]; then
		cp "$out" "expected/$case.out"
		cp "$err" "expected/$case.err"
	fi
	n=$nfail
	[ "$rc" = "$want" ] || fail "exit status $rc, want $want ($(head -c 300 "$err"))"
	cmp -s "$out" "expected/$case.out" ||
		{ fail "stdout differs:"; diff -u "expected/$case.out" "$out" | head -n 40 || true; }
	cmp -s "$err" "expected/$case.err" ||
		{ fail "stderr differs:"; diff -u "expected/$case.err" "$err" | head -n 20 || true; }
	if [ "$rc" != 0 ] && [ -s "$err" ] && [ "$(wc -l <"$err")" != 1 ]; then
		fail "error is not one line: $(cat "$err")"
	fi
	if [ "$rc" = 2 ] && { [ -s "$out" ] || [ ! -s "$err" ]; }; then
		fail "a usage error must print one line on stderr and nothing on stdout"
	fi
	case $case in
	*json*)
		if [ "$rc" = 0 ] || [ -s "$out" ]; then
			case $case in
			top*) python3 -m json.tool --json-lines "$out.raw" >/dev/null ;;
			*) python3 -m json.tool "$out.raw" >/dev/null ;;
			esac || fail "output is not valid JSON"
		fi ;;
	*prom*)
		[ "$rc" != 0 ] ||
			python3 promcheck.py "$out.raw" || fail "output breaks the Prometheus text format"
		[ "$rc" != 0 ] || promtool check metrics <"$out.raw" >"$tmp/promtool" 2>&1 ||
			fail "promtool check metrics: $(head -c 300 "$tmp/promtool")" ;;
	esac
	[ "$n" = "$nfail" ] && npass=$((npass + 1))
done <cases.txt

# top on a terminal (a pty of 23 rows from script(1)): each frame clears the
# screen and the process table keeps to the screen, saying what it left out.
if command -v script >/dev/null && case $only in "  "|*" top-tty "*) true ;; *) false ;; esac; then
	case=top-tty
	PINCTL_PROC_ROOT=trees/module/proc PINCTL_SYS_ROOT=trees/module/sys PINCTL_PASSWD=passwd \
		script -qec "stty rows 23 cols 100; '$pinctl' top -n 2 -d 0.1" /dev/null |
		tr -d '\r' >"$tmp/tty" || true
	esc=$(printf '\033')
	n=$(grep -c "^$esc\[H$esc\[2Jpinctl top: every 0.1s, refresh [12]\$" "$tmp/tty" || true)
	if [ "$n" = 2 ] && [ "$(grep -c '^(2 more)$' "$tmp/tty")" = 2 ]; then
		npass=$((npass + 1))
	else
		fail "two cleared frames of 2 processes and '(2 more)' expected:"
		cat -v "$tmp/tty" | head -n 30
	fi
fi

# The default Prometheus output has as many series with 5 processes as with
# 205: the per-process families hold only pid="other" unless asked.
if case $only in "  "|*" prom-bounded "*) true ;; *) false ;; esac; then
	case=prom-bounded
	cp -a trees/module15 "$tmp/many"
	for i in $(seq 1 200); do
		echo "process pid $((10000 + i)) uid 1000 comm job$i regions 1 pinned_bytes 4096 mm_pinned_bytes 4096"
	done >>"$tmp/many/proc/driver/pinmem/stats"
	series() {
		PINCTL_PROC_ROOT=$1/proc PINCTL_SYS_ROOT=$1/sys PINCTL_DEV_ROOT=$1/dev PINCTL_PASSWD=passwd \
			"$pinctl" status --prometheus "$2" | grep -vc '^#'
	}
	few=$(series trees/module15 --processes=0)
	many=$(series "$tmp/many" --processes=0)
	top=$(series "$tmp/many" --processes=3)
	if [ "$few" = "$many" ] && [ "$top" = $((few + 3 * 3)) ]; then
		npass=$((npass + 1))
	else
		fail "series: $few with 5 processes, $many with 205 (want equal), $top with --processes=3 (want $((few + 9)))"
	fi
fi

# Every metric family pinctl writes is documented in the man page.
for name in $(cat expected/*prom*.out | awk '$1 == "#" && $2 == "TYPE" { print $3 }' | sort -u); do
	grep -q "$name" ../../../man/pinctl.8 ||
		{ echo "pinctl-check: FAIL metric $name is not in man/pinctl.8"; nfail=$((nfail + 1)); }
done

if [ "$nfail" != 0 ]; then
	echo "pinctl-check: $nfail failed, $npass passed"
	exit 1
fi
echo "pinctl-check: all $npass cases passed (text, JSON, Prometheus, bad input)"
