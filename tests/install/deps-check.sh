#!/bin/bash
# SPDX-License-Identifier: MIT
# scripts/install-deps.sh against stand-ins for dpkg-query, apt-get, sudo
# and id (a directory first on PATH), so no package is installed or removed:
#  - with nothing missing it runs no apt-get at all, in every mode (a second
#    `make demo` or `make check` installs nothing);
#  - --build-only with liburing-dev missing installs the build packages and
#    neither kernels nor test tools; the full mode installs those too;
#  - a user who is not root goes through sudo, and without sudo is told
#    what is missing and that root is needed;
#  - an unknown option is refused.
# Then, on this machine's real package database, each mode finds nothing
# missing (make check installed everything) and would install nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

me=deps-check
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
has() { grep "$@" > /dev/null; }
tmp=$(mktemp -d /tmp/pinmem-deps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
script=$PWD/scripts/install-deps.sh

# The stand-ins log their command lines to $tmp/log.
fake=$tmp/bin
mkdir -p "$fake"
cat > "$fake/dpkg-query" <<'FAKE'
#!/bin/sh
# dpkg-query -W -f=FMT PKG: installed unless PKG is in $FAKE_MISSING.
for p; do :; done
case " $FAKE_MISSING " in *" $p "*) exit 1 ;; esac
printf 'install ok installed'
FAKE
printf '#!/bin/sh\necho "apt-get $*" >> "$FAKE_LOG"\n' > "$fake/apt-get"
printf '#!/bin/sh\necho "sudo $1" >> "$FAKE_LOG"\nexec "$@"\n' > "$fake/sudo"
printf '#!/bin/sh\necho "${FAKE_UID:-0}"\n' > "$fake/id"
chmod +x "$fake"/*
# A PATH with the stand-ins and the few real tools the script uses, so that
# leaving sudo out of it means "no sudo on this machine".
nosudo=$tmp/nosudo
mkdir -p "$nosudo"
for t in dpkg-query apt-get id; do ln -s "$fake/$t" "$nosudo/$t"; done
for t in sh grep ls tee cat; do ln -s "$(command -v $t)" "$nosudo/$t"; done

# run NAME MISSING UID PATH ARGS...: the script's output in $tmp/out,
# stand-ins' calls in $tmp/log, exit status in $rc.
run() {
	local name=$1 missing=$2 uid=$3 path=$4
	shift 4
	: > "$tmp/log"
	rc=0
	env PATH="$path" FAKE_MISSING="$missing" FAKE_UID="$uid" FAKE_LOG="$tmp/log" \
		sh "$script" "$@" > "$tmp/out" 2>&1 || rc=$?
	echo "$me: $name: exit $rc, $(grep -c . "$tmp/log" || true) apt/sudo call(s)"
}
installs() { has -x "apt-get install .* $1\( .*\)\?" "$tmp/log"; }

# Nothing missing (and a 6.12 kernel: the real /lib/modules of a machine
# that ran make deps), nothing run.
if ls /lib/modules/*/build/Makefile 2>/dev/null | has '/6\.12\.'; then
	modes="--build-only --deb full"
else
	modes="--build-only --deb"
fi
for m in $modes; do
	arg=$m; [ "$m" != full ] || arg=
	run "nothing missing, $m" "" 0 "$fake:$PATH" $arg
	[ "$rc" = 0 ] && [ ! -s "$tmp/log" ] && [ ! -s "$tmp/out" ] ||
		fail "$m with nothing missing: exit $rc, calls: $(cat "$tmp/log"), said: $(cat "$tmp/out")"
done

run "liburing-dev missing, --build-only" liburing-dev 0 "$fake:$PATH" --build-only
[ "$rc" = 0 ] || fail "--build-only: exit $rc: $(cat "$tmp/out")"
has -x 'apt-get update -qq' "$tmp/log" || fail "--build-only did not run apt-get update"
installs liburing-dev || fail "--build-only did not install liburing-dev: $(cat "$tmp/log")"
installs build-essential || fail "--build-only did not ask for build-essential"
for p in linux-headers-amd64 libcmocka-dev qemu-system-x86 debhelper; do
	! installs "$p" || fail "--build-only installs $p, which make demo does not need"
done
has -x 'install-deps: installing liburing-dev' "$tmp/out" || fail "--build-only said: $(cat "$tmp/out")"

run "liburing-dev missing, full" liburing-dev 0 "$fake:$PATH"
for p in liburing-dev libcmocka-dev qemu-system-x86 dh-dkms lintian linux-headers-amd64; do
	installs "$p" || fail "the full mode does not install $p: $(cat "$tmp/log")"
done

run "dh-dkms missing, --deb" dh-dkms 0 "$fake:$PATH" --deb
installs dh-dkms && installs liburing-dev && ! installs qemu-system-x86 ||
	fail "--deb: $(cat "$tmp/log")"

run "not root, sudo" liburing-dev 1000 "$fake:$PATH" --build-only
[ "$rc" = 0 ] && has -x 'sudo apt-get' "$tmp/log" || fail "a user was not sent through sudo: $(cat "$tmp/log")"

run "not root, no sudo" liburing-dev 1000 "$nosudo" --build-only
[ "$rc" = 1 ] && [ ! -s "$tmp/log" ] && has 'missing liburing-dev; run this as root or install sudo' "$tmp/out" ||
	fail "without sudo: exit $rc, calls: $(cat "$tmp/log"), said: $(cat "$tmp/out")"

run "dry run" liburing-dev 0 "$fake:$PATH" --build-only --dry-run
[ "$rc" = 0 ] && [ ! -s "$tmp/log" ] && has -x 'install-deps: would install liburing-dev' "$tmp/out" ||
	fail "--dry-run: exit $rc, calls: $(cat "$tmp/log"), said: $(cat "$tmp/out")"

run "bad option" "" 0 "$fake:$PATH" --bogus
[ "$rc" = 2 ] && [ ! -s "$tmp/log" ] || fail "--bogus: exit $rc"

# This machine's own package database.
for m in $modes; do
	arg=$m; [ "$m" != full ] || arg=
	out=$(sh "$script" $arg --dry-run) || fail "install-deps $arg --dry-run failed"
	[ -z "$out" ] || fail "this machine lacks packages for $m: $out (run make deps)"
done
echo "$me: OK"
