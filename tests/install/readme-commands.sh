#!/bin/bash
# SPDX-License-Identifier: MIT
# Keeps README.md and docs/*.md from rotting:
#  - every ```c block compiles (and links, when it has main()) against an
#    installed libpinmem, with the pkg-config flags the README tells users to
#    use; as root, each program runs with its document's path as argument;
#  - every `make TARGET` (code blocks and `inline code`) names a target the
#    Makefile has;
#  - every pinctl/pinstream command line in a code block: `pinctl SUB
#    --help` accepts the subcommand, and each --option is in the help text;
#  - pinmem/X.Y.Z, pinmem-X.Y.Z and libpinmem.so.X.Y.Z name VERSION;
#  - every shell block (sh, bash, shell, console, untagged) runs: in a
#    scratch directory (`in-tree` after the language: at the top of the
#    checkout), with $O first in PATH, under `set -e -o pipefail`.  Words
#    after the language mark blocks that cannot run here:
#      ```sh no-run (why)   not run; the words say why, and are printed
#      ```sh may-fail (why) every command runs; only exit status 2 (usage),
#                           126 or 127 (not found) fail it
#    A block that would change the machine (sudo, apt, dkms, modprobe,
#    systemctl, kubectl, usermod, make install/deb) must be no-run;
#  - every ```python block of docs/*.md runs with the built package
#    ($O/python; README's blocks run in python-check, tests/python/test_readme.py).
# A target exists when make's database (make -p) gives it a recipe or
# prerequisites (a bare .PHONY name does nothing).  Not `make -n`: recipe
# lines that start with `+` (the recursive checks) run even under -n.
# Env: O, MAKE, VERSION, PYTHON, DOCS (default README.md docs/*.md; README
# alone checks only that file), BLOCK_TIMEOUT (seconds per block, 600).
set -euo pipefail
cd "$(dirname "$0")/../.."

O=${O:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
if [ -n "${README:-}" ]; then
	DOCS=$README
else
	DOCS=${DOCS:-README.md $(ls docs/*.md 2>/dev/null)}
fi
tmp=$(mktemp -d /tmp/pinmem-readme.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
errors=0
bad() { echo "readme-check: FAIL: $*" >&2; errors=$((errors + 1)); }

# Split each document: $tmp/c/D-N.c for its ```c blocks, $tmp/sh/D-N.sh for
# its shell blocks (sh, bash, shell, console, untagged) and $tmp/py/D-N.py
# for its python blocks, each with .where (FILE:LINE) and .info (the words
# after the language); $tmp/code.txt for the lines of all shell blocks,
# $tmp/inline.txt for `inline code` outside blocks.
mkdir -p "$tmp/c" "$tmp/sh" "$tmp/py"
d=0
for doc in $DOCS; do
	[ -f "$doc" ] || { bad "no $doc"; continue; }
	d=$((d + 1))
	awk -v dir="$tmp" -v d="$d" -v doc="$doc" '
		function start(kind, ext) {
			n++; out = dir "/" kind "/" d "-" n
			printf "%s:%d\n", doc, FNR > (out ".where"); close(out ".where")
			printf "%s\n", info > (out ".info"); close(out ".info")
			out = out ext; printf "" > out
		}
		/^[ \t]*```/ {
			if (!inblock) {
				inblock = 1; lang = $0
				sub(/^[ \t]*```[ \t]*/, "", lang); info = lang
				sub(/[ \t].*/, "", lang); sub(/^[^ \t]*[ \t]*/, "", info)
				out = ""
				if (lang == "c") start("c", ".c")
				else if (lang ~ /^(|sh|bash|shell|console)$/) start("sh", ".sh")
				else if (lang == "python") start("py", ".py")
				next
			}
			inblock = 0; if (out != "") close(out); next
		}
		inblock && lang == "c" { print > out; next }
		inblock && lang ~ /^(|sh|bash|shell|console)$/ {
			line = $0; sub(/^[ \t]*\$[ \t]+/, "", line)	# a console prompt
			print line >> (dir "/code.txt"); print line > out; next
		}
		inblock && lang == "python" { print > out; next }
		inblock { next }	# text, json, ini, ...: output or files, not commands
		{
			line = $0
			while (match(line, /`[^`]+`/)) {
				print substr(line, RSTART + 1, RLENGTH - 2) >> (dir "/inline.txt")
				line = substr(line, RSTART + RLENGTH)
			}
		}
	' "$doc"
done
[ "$d" -gt 0 ] || { echo "readme-check: FAIL: no document to check" >&2; exit 1; }
touch "$tmp/code.txt" "$tmp/inline.txt"

# --- C examples, built against a DESTDIR install with pkg-config.
nc=$(find "$tmp/c" -name '*.c' | wc -l)
if [ "$nc" -gt 0 ]; then
	dest=$tmp/dest
	$MAKE --no-print-directory install DESTDIR="$dest" > "$tmp/install.log" 2>&1 ||
		{ cat "$tmp/install.log" >&2; echo "readme-check: FAIL: make install" >&2; exit 1; }
	pc="env PKG_CONFIG_PATH=$dest/usr/local/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest pkg-config"
	cflags=$($pc --cflags pinmem)
	libs=$($pc --libs pinmem)
	for f in $(find "$tmp/c" -name '*.c' | sort -V); do
		n=$(cat "${f%.c}.where")
		doc=${n%%:*}
		# A GPU example compiles against the CUDA Toolkit's headers (as
		# libpinmem's cuda backend does); without them it is not checked.
		cuda=
		if grep -q '^#include <cuda' "$f"; then
			inc=${CUDA_HOME:-/usr/local/cuda}/include
			if [ ! -f "$inc/cuda_runtime.h" ]; then
				echo "readme-check: not checked: C block at $n needs the CUDA Toolkit ($inc/cuda_runtime.h)"
				continue
			fi
			cuda="-isystem $inc"
		fi
		if grep -Eq '\bmain[[:space:]]*\(' "$f"; then
			if ! $CC -Wall -Werror -o "${f%.c}" "$f" $cflags $cuda $libs 2> "$tmp/cc.log"; then
				cat "$tmp/cc.log" >&2; bad "C example at $n does not build"
			elif [ "$(id -u)" != 0 ]; then
				# Examples pin tens of MiB; RLIMIT_MEMLOCK stops a non-root user.
				echo "readme-check: ok: C example at $n compiles and links (not run: not root)"
			elif out=$(LD_LIBRARY_PATH=$dest/usr/local/lib "${f%.c}" "$doc" 2>&1); then
				echo "readme-check: ok: C example at $n builds and runs: $out"
			else
				bad "C example at $n exits non-zero when run with $doc: $out"
			fi
		elif $CC -Wall -Werror -c -o "${f%.c}.o" "$f" $cflags $cuda 2> "$tmp/cc.log"; then
			echo "readme-check: ok: C fragment at $n compiles"
		else
			cat "$tmp/cc.log" >&2; bad "C fragment at $n does not compile"
		fi
	done
fi

# --- make targets.
{ $MAKE -npq .DEFAULT 2>/dev/null || true; } | awk '
	function flush() { if (name != "" && has) for (i = 1; i <= n; i++) print t[i]; name = "" }
	/^$/ { flush(); skip = 0; next }
	/^# Not a target/ { skip = 1; next }
	/^[^#\t=:%$][^=:$]*:([^=]|$)/ {
		flush()
		if (skip) next
		name = substr($0, 1, index($0, ":") - 1); n = split(name, t, " ")
		rest = substr($0, index($0, ":") + 1); sub(/^:/, "", rest)
		has = rest ~ /[^ \t]/
		next
	}
	name != "" && /^\t/ { has = 1 }
	END { flush() }
' | sort -u > "$tmp/targets"
grep -qx check "$tmp/targets" || { echo "readme-check: FAIL: cannot read make's targets" >&2; exit 1; }

# Commands: split on ; && || | and $( ... ), then take the words after
# `make` that are neither options nor VAR=value.  make -C/-f run other
# makefiles (the kernel's): not ours to check.
cat "$tmp/code.txt" "$tmp/inline.txt" | sed 's/#.*//; s/\$(/;/g; s/[;&|()]/\n/g' |
	sed -n 's/^[[:space:]]*\(sudo[[:space:]]\+\)\?\(env[[:space:]]\+\)\?\([A-Z_]\+=[^[:space:]]*[[:space:]]\+\)*make\b\(.*\)$/\4/p' |
	while read -r args; do
		case " $args " in *" -C"* | *" -f"*) continue ;; esac
		targets= skipnext=0
		for w in $args; do
			if [ "$skipnext" = 1 ]; then skipnext=0; continue; fi
			case $w in
			-j | -l | -o | -W) skipnext=1 ;;
			-*) ;;
			*=*) ;;
			*) targets="$targets $w" ;;
			esac
		done
		echo "${targets:- all}"
	done | tr ' ' '\n' | sed '/^$/d' | sort -u > "$tmp/mentioned"
while read -r t; do
	if grep -qxF -- "$t" "$tmp/targets"; then
		echo "readme-check: ok: make $t"
	else
		bad "the docs mention 'make $t', the Makefile has no such target"
	fi
done < "$tmp/mentioned"

# --- pinmem's own version where the README spells it out (pinmem/X.Y.Z for
# dkms, /usr/src/pinmem-X.Y.Z, libpinmem.so.X.Y.Z) must be VERSION's.
VERSION=${VERSION:-$(cat VERSION)}
for v in $(cat $DOCS 2>/dev/null | grep -oE 'pinmem(/|-|\.so\.)[0-9]+\.[0-9]+\.[0-9]+' | sort -u); do
	[ "${v##*[/-]}" = "$VERSION" ] || [ "${v##*.so.}" = "$VERSION" ] ||
		bad "the docs say '$v', VERSION is $VERSION"
done

# --- pinctl and pinstream command lines: the subcommand is accepted by
# `pinctl SUB --help`, and every --option appears in the tool's help text.
# Lines: sudo? path/TOOL [SUB] args, as code blocks show them.
sed 's/#.*//; s/[;&|()]/\n/g' "$tmp/code.txt" |
	sed -n 's/^[[:space:]]*\(sudo[[:space:]]\+\)\?\([^[:space:]]*\/\)\?\(pinctl\|pinstream\)\([[:space:]].*\)\?$/\3\4/p' > "$tmp/tools" || true
ntool=0
while read -r tool args; do
	bin=$O/$tool
	[ -x "$bin" ] || { bad "the docs run $tool, but $bin is not built"; continue; }
	sub=
	if [ "$tool" = pinctl ]; then
		first=${args%% *}
		case $first in [a-z]*) sub=$first ;; esac
	fi
	if ! help=$("$bin" $sub --help 2>&1); then
		bad "the docs show '$tool $sub', but '$tool $sub --help' fails"
		continue
	fi
	[ -z "$sub" ] || help="$help
$("$bin" --help 2>&1 || true)"
	for o in $(printf '%s\n' $args | sed -n 's/^\(--[a-z][a-z0-9-]*\).*/\1/p'); do
		grep -Eq -- "(^|[^a-z-])$o([^a-z0-9-]|\$)" <<< "$help" ||
			bad "the docs show '$tool${sub:+ $sub} $o', which is not in '$tool${sub:+ $sub} --help'"
	done
	ntool=$((ntool + 1))
done < "$tmp/tools"

# --- shell blocks run; python blocks of docs/ run with the built package.
root=$PWD
bin=$(cd "$O" && pwd)
nrun=0 nskip=0
changes='(^|[[:space:];&|(`])(sudo|apt|apt-get|dpkg|dkms|modprobe|rmmod|insmod|systemctl|kubectl|usermod|useradd)([[:space:]]|$)|(^|[[:space:];&|(])make[[:space:]][^#]*(install|deb)'
for f in $(find "$tmp/sh" -name '*.sh' | sort -V); do
	where=$(cat "${f%.sh}.where") info=$(cat "${f%.sh}.info")
	case " $info " in
	*" no-run"*)
		echo "readme-check: not run: $where:${info#*no-run}"
		nskip=$((nskip + 1)); continue ;;
	esac
	if sed 's/#.*//' "$f" | grep -Eq "$changes"; then
		bad "$where: a block that changes the machine runs in make check; mark it \`\`\`sh no-run (why)"
		continue
	fi
	{
		echo 'set -o pipefail'
		case " $info " in
		*" may-fail"*) echo 'trap '\''rc=$?; case $rc in 2|126|127) exit $rc;; esac'\'' ERR' ;;
		*) echo 'set -e' ;;
		esac
		cat "$f"
		echo 'exit 0'
	} > "${f%.sh}.run"
	case " $info " in
	*" in-tree"*) dir=$root ;;
	*) dir=$tmp/run-$(basename "${f%.sh}"); mkdir -p "$dir" ;;
	esac
	if (cd "$dir" && PATH=$bin:$PATH timeout "${BLOCK_TIMEOUT:-600}" bash "${f%.sh}.run") > "$tmp/block.log" 2>&1; then
		echo "readme-check: ok: block at $where runs"
		nrun=$((nrun + 1))
	else
		rc=$?
		sed 's/^/    /' "$tmp/block.log" | tail -n 30 >&2
		bad "the block at $where exits $rc (mark it no-run or may-fail if it cannot run here)"
	fi
done
PYTHON=${PYTHON:-python3}
for f in $(find "$tmp/py" -name '*.py' | sort -V); do
	where=$(cat "${f%.py}.where") info=$(cat "${f%.py}.info")
	case $where in README.md:*) continue ;; esac	# tests/python/test_readme.py runs them
	case " $info " in
	*" no-run"*) echo "readme-check: not run: $where:${info#*no-run}"; nskip=$((nskip + 1)); continue ;;
	esac
	if [ ! -d "$O/python/pinmem" ]; then
		echo "readme-check: not checked: python block at $where (no $O/python: make python)"
		continue
	fi
	if grep -q 'import torch' "$f" && ! "$PYTHON" -c 'import torch' 2>/dev/null; then
		echo "readme-check: not checked: python block at $where needs torch"
		continue
	fi
	dir=$tmp/run-$(basename "${f%.py}"); mkdir -p "$dir"
	if (cd "$dir" && PYTHONPATH=$bin/python PYTHONDONTWRITEBYTECODE=1 \
		timeout "${BLOCK_TIMEOUT:-600}" "$PYTHON" "$f") > "$tmp/block.log" 2>&1; then
		echo "readme-check: ok: python block at $where runs"
		nrun=$((nrun + 1))
	else
		rc=$?
		sed 's/^/    /' "$tmp/block.log" | tail -n 30 >&2
		bad "the python block at $where exits $rc"
	fi
done

[ "$errors" = 0 ] || { echo "readme-check: $errors failure(s)" >&2; exit 1; }
echo "readme-check: OK ($d document(s): $nc C block(s), $(wc -l < "$tmp/mentioned") make target(s), $ntool tool command line(s), $nrun block(s) run, $nskip marked not to run)"
