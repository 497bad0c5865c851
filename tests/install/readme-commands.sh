#!/bin/bash
# SPDX-License-Identifier: MIT
# Keeps README.md from rotting:
#  - every ```c block compiles (and links, when it has main()) against an
#    installed libpinmem, with the pkg-config flags the README tells users to
#    use; as root, each program runs with the README's path as its argument;
#  - every `make TARGET` in the README (code blocks and `inline code`) names a
#    target the Makefile has;
#  - every pinctl/pinstream command line in a code block: `pinctl SUB
#    --help` accepts the subcommand, and each --option is in the help text;
#  - pinmem/X.Y.Z, pinmem-X.Y.Z and libpinmem.so.X.Y.Z name VERSION.
# A target exists when make's database (make -p) gives it a recipe or
# prerequisites (a bare .PHONY name does nothing).  Not `make -n`: recipe
# lines that start with `+` (the recursive checks) run even under -n.
# Env: O, MAKE, VERSION, README (default README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

O=${O:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
README=${README:-README.md}
tmp=$(mktemp -d /tmp/pinmem-readme.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
errors=0
bad() { echo "readme-check: FAIL: $*" >&2; errors=$((errors + 1)); }

[ -f "$README" ] || { echo "readme-check: FAIL: no $README" >&2; exit 1; }

# Split the README: $tmp/c/N.c for ```c blocks, $tmp/code.txt for the lines
# of shell blocks (sh, bash, shell, console, untagged), $tmp/inline.txt for
# `inline code` outside blocks.
mkdir -p "$tmp/c"
awk -v dir="$tmp" '
	/^[ \t]*```/ {
		if (!inblock) {
			inblock = 1; lang = $0
			sub(/^[ \t]*```[ \t]*/, "", lang); sub(/[ \t].*/, "", lang)
			if (lang == "c") { n++; out = dir "/c/" n ".c"; printf "" > out }
			next
		}
		inblock = 0; if (lang == "c") close(out); next
	}
	inblock && lang == "c" { print > out; next }
	inblock && lang ~ /^(|sh|bash|shell|console)$/ {
		line = $0; sub(/^[ \t]*\$[ \t]+/, "", line)	# a console prompt
		print line > (dir "/code.txt"); next
	}
	inblock { next }	# text, json, ...: output, not commands
	{
		line = $0
		while (match(line, /`[^`]+`/)) {
			print substr(line, RSTART + 1, RLENGTH - 2) > (dir "/inline.txt")
			line = substr(line, RSTART + RLENGTH)
		}
	}
' "$README"
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
		n=$(basename "$f" .c)
		# A GPU example compiles against the CUDA Toolkit's headers (as
		# libpinmem's cuda backend does); without them it is not checked.
		cuda=
		if grep -q '^#include <cuda' "$f"; then
			inc=${CUDA_HOME:-/usr/local/cuda}/include
			if [ ! -f "$inc/cuda_runtime.h" ]; then
				echo "readme-check: not checked: C block $n needs the CUDA Toolkit ($inc/cuda_runtime.h)"
				continue
			fi
			cuda="-isystem $inc"
		fi
		if grep -Eq '\bmain[[:space:]]*\(' "$f"; then
			if ! $CC -Wall -Werror -o "$tmp/c/$n" "$f" $cflags $cuda $libs 2> "$tmp/cc.log"; then
				cat "$tmp/cc.log" >&2; bad "C example $n (README c block number $n) does not build"
			elif [ "$(id -u)" != 0 ]; then
				# Examples pin tens of MiB; RLIMIT_MEMLOCK stops a non-root user.
				echo "readme-check: ok: C example $n compiles and links (not run: not root)"
			elif out=$(LD_LIBRARY_PATH=$dest/usr/local/lib "$tmp/c/$n" "$README" 2>&1); then
				echo "readme-check: ok: C example $n builds and runs: $out"
			else
				bad "C example $n exits non-zero when run with $README: $out"
			fi
		elif $CC -Wall -Werror -c -o "$tmp/c/$n.o" "$f" $cflags $cuda 2> "$tmp/cc.log"; then
			echo "readme-check: ok: C fragment $n compiles"
		else
			cat "$tmp/cc.log" >&2; bad "C fragment $n (README c block number $n) does not compile"
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
		bad "README mentions 'make $t', the Makefile has no such target"
	fi
done < "$tmp/mentioned"

# --- pinmem's own version where the README spells it out (pinmem/X.Y.Z for
# dkms, /usr/src/pinmem-X.Y.Z, libpinmem.so.X.Y.Z) must be VERSION's.
VERSION=${VERSION:-$(cat VERSION)}
for v in $(grep -oE 'pinmem(/|-|\.so\.)[0-9]+\.[0-9]+\.[0-9]+' "$README" | sort -u); do
	[ "${v##*[/-]}" = "$VERSION" ] || [ "${v##*.so.}" = "$VERSION" ] ||
		bad "README says '$v', VERSION is $VERSION"
done

# --- pinctl and pinstream command lines: the subcommand is accepted by
# `pinctl SUB --help`, and every --option appears in the tool's help text.
# Lines: sudo? path/TOOL [SUB] args, as code blocks show them.
sed 's/#.*//; s/[;&|()]/\n/g' "$tmp/code.txt" |
	sed -n 's/^[[:space:]]*\(sudo[[:space:]]\+\)\?\([^[:space:]]*\/\)\?\(pinctl\|pinstream\)\([[:space:]].*\)\?$/\3\4/p' > "$tmp/tools" || true
ntool=0
while read -r tool args; do
	bin=$O/$tool
	[ -x "$bin" ] || { bad "README runs $tool, but $bin is not built"; continue; }
	sub=
	if [ "$tool" = pinctl ]; then
		first=${args%% *}
		case $first in [a-z]*) sub=$first ;; esac
	fi
	if ! help=$("$bin" $sub --help 2>&1); then
		bad "README shows '$tool $sub', but '$tool $sub --help' fails"
		continue
	fi
	[ -z "$sub" ] || help="$help
$("$bin" --help 2>&1 || true)"
	for o in $(printf '%s\n' $args | sed -n 's/^\(--[a-z][a-z0-9-]*\).*/\1/p'); do
		grep -Eq -- "(^|[^a-z-])$o([^a-z0-9-]|\$)" <<< "$help" ||
			bad "README: '$tool${sub:+ $sub} $o' is not in '$tool${sub:+ $sub} --help'"
	done
	ntool=$((ntool + 1))
done < "$tmp/tools"

[ "$errors" = 0 ] || { echo "readme-check: $errors failure(s)" >&2; exit 1; }
echo "readme-check: OK ($nc C block(s), $(wc -l < "$tmp/mentioned") make target(s), $ntool tool command line(s))"
