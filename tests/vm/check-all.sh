#!/bin/sh
# SPDX-License-Identifier: MIT
# `make vm-check`: run tests/vm/run.sh for every installed kernel that has a
# build tree (/boot/vmlinuz-KV + /lib/modules/KV/build), then for the newest
# Debian kernel (trixie-backports, 7.x) from the cached chroot that
# tests/vm-newest/prepare.sh makes or reuses, its module built there with that
# kernel's own gcc.  Debian's 6.1, the 6.12 from bookworm-backports and the
# newest kernel are the matrix: fail if any is missing or cannot be prepared.
set -eu
cd "$(dirname "$0")/../.."
O=${O:-build}
export O

kernels=
have61=0
have612=0
for v in /boot/vmlinuz-*; do
	[ -e "$v" ] || continue
	kv=${v#/boot/vmlinuz-}
	[ -d "/lib/modules/$kv/build" ] || continue
	kernels="$kernels $kv"
	case $kv in
	6.1.*) have61=1 ;;
	6.12.*) have612=1 ;;
	esac
done
missing=
[ "$have61" = 1 ] || missing="$missing 6.1 (linux-image-amd64 + linux-headers-amd64)"
[ "$have612" = 1 ] || missing="$missing 6.12 (the same from bookworm-backports)"
if [ -n "$missing" ]; then
	echo "vm-check: FAIL: kernel with headers missing:$missing; run scripts/install-deps.sh" >&2
	exit 1
fi

set -- $kernels
accel=${VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
	accel=$(tests/vm/run.sh --probe-only --kernel "/boot/vmlinuz-$1")
	echo "vm-check: accelerator: $accel"
fi

summary=
status=0
failed=	# failure.txt of each kernel that failed (tests/vm/run.sh)
for kv in "$@"; do
	t0=$(date +%s)
	if tests/vm/run.sh --kernel "/boot/vmlinuz-$kv" \
		--kbuild "/lib/modules/$kv/build" --kver "$kv" --accel "$accel" \
		--disks "${VM_DISKS-ext4 xfs}"; then
		r=PASS
	else
		r=FAIL
		status=1
		failed="$failed $O/vm/$kv/failure.txt"
	fi
	summary="$summary$(printf '  %-28s %s  %4ss (build + boot + tests)' "$kv" "$r" $(($(date +%s) - t0)))
"
done

# The newest Debian kernel, from its chroot (cached; see tests/vm-newest/).
t0=$(date +%s)
if prep=$(tests/vm-newest/prepare.sh); then
	val() { echo "$prep" | sed -n "s/^$1=//p" | tail -n 1; }
	root=$(val root) kver=$(val kver) kernel=$(val kernel) kbuild=$(val kbuild)
	prepare_secs=$(val prepare_secs)
	if tests/vm/run.sh --kernel "$kernel" --chroot "$root" --kbuild "$kbuild" \
		--kver "$kver" --accel "$accel" --disks "${VM_DISKS-ext4 xfs}"; then
		r=PASS
	else
		r=FAIL
		status=1
		failed="$failed $O/vm/$kver/failure.txt"
	fi
	summary="$summary$(printf '  %-28s %s  %4ss (build + boot + tests; chroot %ss)' "$kver" "$r" $(($(date +%s) - t0)) "$prepare_secs")
"
else
	status=1
	summary="$summary$(printf '  %-28s %s  %4ss (tests/vm-newest/prepare.sh failed: no chroot)' "trixie-backports" FAIL $(($(date +%s) - t0)))
"
fi
# Each failed kernel's splat again, near the end, where a truncated log keeps it.
for f in $failed; do
	[ ! -f "$f" ] || cat "$f"
done
echo "vm-check summary ($accel):"
printf '%s' "$summary"
[ "$status" = 0 ] && echo "vm-check: all kernels passed" || echo "vm-check: FAIL"
exit "$status"
