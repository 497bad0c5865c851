#!/bin/bash
# SPDX-License-Identifier: MIT
# `make install` into a DESTDIR, for the default PREFIX (/usr/local) and for
# PREFIX=/usr: exactly the expected files with the expected modes, a
# pinmem.pc that names the right prefix and version, tests/install/hello.c
# built against the installed files with pkg-config (shared, and fully static
# with --static) and run, the tools' --version, the uapi header on its own,
# the sysusers entry; then `make uninstall` leaves no file behind.
# Env: VERSION, MAKE, O.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=${VERSION:-$(cat VERSION)}
MAKE=${MAKE:-make}
CC=${CC:-cc}
tmp=$(mktemp -d /tmp/pinmem-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install-check: FAIL: $*" >&2; exit 1; }
# grep -q would exit at the first match and fail the pipeline (pipefail).
has() { grep "$@" > /dev/null; }

mans=$(cd man 2>/dev/null && ls -- *.[1-8] 2>/dev/null || true)
echo "$mans" | has -x pinctl.8 || fail "man/pinctl.8 is missing"

# Where Debian's python3 looks for packages installed under a prefix
# (mk/80-python.mk exports the PYTHON it built the package for).
PYTHON=${PYTHON:-python3}
pysite() {
	if [ "$1" = /usr ]; then echo /usr/lib/python3/dist-packages
	else echo "$1/lib/python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages"; fi
}

# path mode [symlink target]; under PREFIX, or absolute under DESTDIR.
expected() {
	local p=$1
	cat <<EOF
$p/bin/pinctl 755
$p/bin/pinstream 755
$p/lib/libpinmem.so.$VERSION 644
$p/lib/libpinmem.so.0 link libpinmem.so.$VERSION
$p/lib/libpinmem.so link libpinmem.so.0
$p/lib/libpinmem.a 644
$p/lib/pkgconfig/pinmem.pc 644
$p/include/pinmem.h 644
$p/include/pinmem/uapi/pinmem.h 644
$p/lib/udev/rules.d/60-pinmem.rules 644
$p/lib/modules-load.d/pinmem.conf 644
$p/lib/modprobe.d/pinmem.conf 644
$p/lib/sysusers.d/pinmem.conf 644
$p/lib/systemd/system/pinmem-limits.service 644
$p/lib/systemd/system/pinmem-metrics.service 644
$p/lib/systemd/system/pinmem-metrics.timer 644
EOF
	[ ! -f include/pinmem_stream.h ] || echo "$p/include/pinmem_stream.h 644"
	for m in $mans; do echo "$p/share/man/man${m##*.}/$m 644"; done
	# The Python package (mk/80-python.mk).
	for f in $(cd python/pinmem && ls -- *.py) \
		"_pinmem$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"; do
		echo "$(pysite "$p")/pinmem/$f 644"
	done
}

check_prefix() {
	local prefix=$1 d=$2
	shift 2
	echo "install-check: make install DESTDIR=$d $*"
	# Twice: installing over an installed tree (an upgrade) must work.
	for i in 1 2; do
		$MAKE --no-print-directory install DESTDIR="$d" "$@" > "$tmp/install.log" 2>&1 ||
			{ cat "$tmp/install.log" >&2; fail "make install $* (run $i)"; }
	done

	# Exactly the expected files, with the expected modes and links.
	expected "$prefix" | sort > "$tmp/want"
	while read -r path mode target; do
		f=$d$path
		if [ "$mode" = link ]; then
			[ -L "$f" ] || fail "$path is not a symlink"
			[ "$(readlink "$f")" = "$target" ] || fail "$path -> $(readlink "$f"), want $target"
			[ -e "$f" ] || fail "$path is a dangling symlink"
		else
			[ -f "$f" ] && [ ! -L "$f" ] || fail "$path is missing"
			[ "$(stat -c %a "$f")" = "$mode" ] || fail "$path has mode $(stat -c %a "$f"), want $mode"
		fi
	done < "$tmp/want"
	(cd "$d" && find . ! -type d | sed 's|^\.||' | sort) > "$tmp/got"
	extra=$(cut -d' ' -f1 "$tmp/want" | sort | comm -13 - "$tmp/got")
	[ -z "$extra" ] || fail "make install wrote files nobody expects: $extra"

	# pkg-config as a user would, relocated into the DESTDIR.
	local pc="env PKG_CONFIG_PATH=$d$prefix/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$d pkg-config"
	v=$($pc --modversion pinmem) || fail "pkg-config does not find pinmem.pc"
	[ "$v" = "$VERSION" ] || fail "pkg-config --modversion pinmem: $v, want $VERSION"
	for var in prefix:$prefix libdir:$prefix/lib includedir:$prefix/include; do
		v=$(PKG_CONFIG_PATH=$d$prefix/lib/pkgconfig pkg-config --variable="${var%%:*}" pinmem)
		[ "$v" = "${var#*:}" ] || fail "pinmem.pc ${var%%:*}=$v, want ${var#*:}"
	done
	cflags=$($pc --cflags pinmem)
	libs=$($pc --libs pinmem)
	slibs=$($pc --static --libs pinmem)
	echo "install-check: pkg-config: cflags '$cflags' libs '$libs' static '$slibs'"

	$CC -Wall -Wextra -Werror -o "$tmp/hello" tests/install/hello.c $cflags $libs ||
		fail "hello.c does not build with pkg-config --cflags --libs pinmem"
	readelf -d "$tmp/hello" | has 'NEEDED.*\[libpinmem\.so\.0\]' ||
		fail "hello is not linked against libpinmem.so.0"
	LD_LIBRARY_PATH=$d$prefix/lib ldd "$tmp/hello" | has "libpinmem.so.0 => $d$prefix/lib/" ||
		fail "hello does not load libpinmem from the DESTDIR"
	out=$(LD_LIBRARY_PATH=$d$prefix/lib "$tmp/hello") || fail "hello (shared) failed: $out"
	echo "install-check: $out"
	echo "$out" | has -E 'pin mode (module|mlock)$' || fail "hello printed '$out'"

	$CC -Wall -Wextra -Werror -static -o "$tmp/hello-static" tests/install/hello.c \
		$cflags $slibs 2> "$tmp/static.log" ||
		{ cat "$tmp/static.log" >&2; fail "hello.c does not link with pkg-config --static"; }
	! readelf -d "$tmp/hello-static" 2>/dev/null | has NEEDED ||
		fail "hello-static still needs shared libraries"
	out=$("$tmp/hello-static") || fail "hello (static) failed: $out"
	echo "$out" | has -E 'pin mode (module|mlock)$' || fail "hello-static printed '$out'"

	# Each installed header stands alone, in C and in C++ (training stacks).
	for h in $(cd "$d$prefix/include" && find . -name '*.h' | sed 's|^\./||'); do
		echo "#include <$h>" | $CC -fsyntax-only -Wall -Werror $cflags -x c - ||
			fail "<$h> does not compile on its own"
		echo "#include <$h>" | ${CXX:-c++} -fsyntax-only -Wall -Werror $cflags -x c++ - ||
			fail "<$h> does not compile as C++"
	done

	# The installed Python package imports and opens a context (it links
	# libpinmem statically, so no library path is needed).
	out=$(cd / && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$d$(pysite "$prefix") "$PYTHON" -c 'import pinmem; print(pinmem.__file__, pinmem.open().empty(4096).pin_mode)') ||
		fail "the installed Python package does not import: $out"
	echo "$out" | has "^$d.* \(module\|mlock\)$" || fail "python: '$out'"
	echo "install-check: python: $out"

	for t in pinctl pinstream; do
		out=$(LD_LIBRARY_PATH=$d$prefix/lib "$d$prefix/bin/$t" --version 2>&1) ||
			fail "$t --version exited non-zero: $out"
		echo "$out" | has -w -- "$VERSION" || fail "$t --version: '$out', want $VERSION"
	done

	# man finds each page by name in the installed tree, and it renders
	# without groff warnings (the check lintian makes).
	if command -v man >/dev/null; then
		for m in $mans; do
			p=$(MANPATH=$d$prefix/share/man man -w "${m##*.}" "${m%.*}" 2>/dev/null) ||
				fail "man does not find ${m%.*}(${m##*.}) under $prefix/share/man"
			w=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
				man --warnings -E UTF-8 -l -Tutf8 -Z "$p" 2>&1 > /dev/null)
			[ -z "$w" ] || fail "man page $m has warnings: $w"
		done
	fi

	if command -v systemd-sysusers >/dev/null; then
		mkdir -p "$tmp/sysroot/etc"
		systemd-sysusers --dry-run --root="$tmp/sysroot" \
			"$d$prefix/lib/sysusers.d/pinmem.conf" 2>&1 | has "group 'pinmem'" ||
			fail "sysusers.d/pinmem.conf does not create the pinmem group"
	fi
	# The unit runs the pinctl this install put in bin/, and is not enabled.
	grep -qx "ExecStart=$prefix/bin/pinctl limits apply --missing-ok /etc/pinmem/limits.conf" \
		"$d$prefix/lib/systemd/system/pinmem-limits.service" ||
		fail "pinmem-limits.service does not run $prefix/bin/pinctl"
	grep -q "^ExecStart=$prefix/bin/pinctl status --prometheus " \
		"$d$prefix/lib/systemd/system/pinmem-metrics.service" ||
		fail "pinmem-metrics.service does not run $prefix/bin/pinctl"
	if command -v systemd-analyze >/dev/null; then
		systemd-analyze verify --man=no "$d$prefix/lib/systemd/system/pinmem-limits.service" \
			"$d$prefix/lib/systemd/system/pinmem-metrics.service" \
			"$d$prefix/lib/systemd/system/pinmem-metrics.timer" \
			> "$tmp/verify.log" 2>&1 || true
		# (pinctl is under DESTDIR, not where the unit names it)
		! grep -i 'pinmem-\(limits\|metrics\)\.\(service\|timer\):' "$tmp/verify.log" |
			grep -v 'is not executable' ||
			fail "systemd-analyze verify complains about the installed units"
	fi
	grep -q 'KERNEL=="pinmem".*GROUP="pinmem".*MODE="0660"' \
		"$d$prefix/lib/udev/rules.d/60-pinmem.rules" || fail "udev rule lacks group/mode"

	$MAKE --no-print-directory uninstall DESTDIR="$d" "$@" > "$tmp/uninstall.log" 2>&1 ||
		{ cat "$tmp/uninstall.log" >&2; fail "make uninstall $*"; }
	left=$(find "$d" ! -type d)
	[ -z "$left" ] || fail "make uninstall left: $left"
	echo "install-check: ok: PREFIX=$prefix ($(wc -l < "$tmp/want") files installed and removed)"
}

check_prefix /usr/local "$tmp/dest-local"
check_prefix /usr "$tmp/dest-usr" PREFIX=/usr
echo "install-check: OK"
