#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one platform of the Python matrix (make python-check: host, make
# platform-check, make clients-check; mk/82-platform.mk):
#
#   run.sh [--clients] host|trixie|sid
#
# host: the host's own Debian (12 here) with $PYTHON (default
# /usr/bin/python3) and its python3-torch, in a venv.  trixie, sid: the
# platform chroot tests/platform/prepare.sh makes or reuses (cached outside
# the checkout), entered through tests/platform/enter.sh: its own /dev, /proc,
# /sys and /tmp, no network, nothing mounted on the host.  Either way a clean
# copy of the checkout (tracked and not-ignored files) goes to
# $O/platform/<distro>[-clients]/src and tests/platform/suite.sh installs it
# with pip into a --system-site-packages venv there and runs tests/python
# (with --clients: tests/platform/clients) against that install.  Nothing is
# written into the checkout outside $O, nor into the cached chroot (the
# chroot's /tmp is a directory of the work tree).
#
# stdout's last line is the platform's line,
#   platform: <distro> python X.Y torch A.B: N passed, M failed, K skipped
# and the exit status says whether it passed.  Logs stay in the work
# directory.  Environment: O (default build), PYTHON, PINMEM_CUDA and
# CUDA_HOME (the CUDA stand-in's cases, as make python-check runs them),
# PYTEST_ADDOPTS (passed on), PINMEM_PLATFORM_TIMEOUT (seconds, default
# 3600: a guard against a hang).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
clients=
[ "${1:-}" = --clients ] && { clients=--clients; shift; }
distro=${1:-}
case $distro in
host | trixie | sid) ;;
*) echo "usage: $0 [--clients] host|trixie|sid" >&2; exit 2 ;;
esac
O=${O:-build}
case $O in /*) ;; *) O=$src/$O ;; esac
cuda=${PINMEM_CUDA:-0}
limit=${PINMEM_PLATFORM_TIMEOUT:-3600}

name=$distro
[ "$distro" = host ] && name=$(. /etc/os-release && echo "${VERSION_CODENAME:-$ID}")
work=$O/platform/$distro${clients:+-clients}
rm -rf "$work"
mkdir -p "$work/src" "$work/tmp"
chmod 1777 "$work/tmp"
# A clean checkout, as a user's: git's files (tracked and not ignored, as
# they are in the working tree), or all but build/ and .git without git.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git -C "$src" ls-files -z -co --exclude-standard |
		tar -C "$src" --null --ignore-failed-read -T - -cf - 2>/dev/null
else
	tar -C "$src" --exclude=./build --exclude=./.git -cf - .
fi | tar -C "$work/src" -xf -

if [ "$distro" = host ]; then
	exec env PINMEM_CUDA="$cuda" CUDA_HOME="${CUDA_HOME:-}" TMPDIR="$work/tmp" \
		timeout -k 30 "$limit" "$here/suite.sh" $clients "$work" "${PYTHON:-/usr/bin/python3}" "$name"
fi

prep=$("$here/prepare.sh" "$distro") || exit 1
root=$(printf '%s\n' "$prep" | sed -n 's/^root=//p')
set -- --bind "$work" /build --bind "$work/tmp" /tmp
cuda_home=
if [ "$cuda" = 1 ]; then
	# The toolkit's headers, read-only, at /opt/cuda.
	cuda_home=/opt/cuda
	set -- "$@" --ro-bind "$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")" $cuda_home
fi
exec timeout -k 30 "$limit" "$here/enter.sh" "$@" "$root" -- \
	env PINMEM_CUDA="$cuda" CUDA_HOME="$cuda_home" PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-}" \
	PINMEM_PLATFORM_LOG="$work/pytest.log" \
	sh /build/src/tests/platform/suite.sh $clients /build /usr/bin/python3 "$name"
