#!/bin/sh
# SPDX-License-Identifier: MIT
# `make vm-check`: run tests/vm/run.sh for every installed kernel that has a
# build tree (/boot/vmlinuz-KV + /lib/modules/KV/build).  Debian's 6.1 and the
# 6.12 from bookworm-backports are the matrix: fail if either is missing.
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
for kv in "$@"; do
	t0=$(date +%s)
	if tests/vm/run.sh --kernel "/boot/vmlinuz-$kv" \
		--kbuild "/lib/modules/$kv/build" --kver "$kv" --accel "$accel" \
		--disks "${VM_DISKS-ext4 xfs}"; then
		r=PASS
	else
		r=FAIL
		status=1
	fi
	summary="$summary$(printf '  %-28s %s  %4ss (build + boot + tests)' "$kv" "$r" $(($(date +%s) - t0)))
"
done
echo "vm-check summary ($accel):"
printf '%s' "$summary"
[ "$status" = 0 ] && echo "vm-check: all kernels passed" || echo "vm-check: FAIL"
exit "$status"
