#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the pinmem test VM: load pinmem.ko, run every test program, unload,
# reload, check that every FOLL_PIN was released, print one verdict line and
# power off.  The host (tests/vm/run.sh) reads the serial console; lines it
# parses start with "PINMEM-VM".  Nothing printed here may contain the words
# the host treats as kernel splats.

/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1

# Test programs need a tmpfs, a ramfs (a file system pinmem must refuse),
# hugetlbfs with reserved huge pages, and THP on request (MADV_HUGEPAGE).
mkdir -p /tmp /mnt/ramfs /dev/hugepages /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t ramfs ramfs /mnt/ramfs
mount -t hugetlbfs hugetlbfs /dev/hugepages
chmod 1777 /tmp /dev/shm /mnt/ramfs /dev/hugepages
vm-hugepages 64	# outside ZONE_MOVABLE (see tests/vm/hugepages.c)
echo madvise >/sys/kernel/mm/transparent_hugepage/enabled

. /etc/pinmem-vm.conf
echo "PINMEM-VM: kernel $(uname -r) hugepages $(cat /proc/sys/vm/nr_hugepages) cpus $(nproc)"

# Optional hook of the run (run.sh --hook): boot, loaded, unloaded.
hook() {
	[ ! -x /hook.sh ] || /hook.sh "$1"
}
hook boot

ntests=0
nfailed=0
failed_list=

record() {	# name rc seconds
	ntests=$((ntests + 1))
	if [ "$2" = 0 ]; then
		echo "PINMEM-VM: pass $1 (${3}s)"
	else
		nfailed=$((nfailed + 1))
		failed_list="$failed_list $1"
		echo "PINMEM-VM: fail $1 rc=$2 (${3}s)"
	fi
}

run_test() {	# name command...
	name=$1
	shift
	echo "PINMEM-VM: begin $name"
	t0=$(date +%s)
	timeout -s KILL "$PINMEM_TEST_TIMEOUT" "$@"
	rc=$?
	record "$name" "$rc" $(($(date +%s) - t0))
}

check() {	# name command...: a check of the harness itself, quiet on success
	name=$1
	shift
	if "$@"; then rc=0; else rc=1; fi
	record "$name" "$rc" 0
}

module_gone() {
	! grep -q '^pinmem ' /proc/modules && [ ! -e /dev/pinmem ] &&
		[ ! -e /proc/driver/pinmem ]
}

loaded=0
load() {	# name [module parameters]
	name=$1
	shift
	if insmod /pinmem.ko "$@"; then
		loaded=1
		# What packaging/udev/60-pinmem.rules does on a real system.
		chgrp "$PINMEM_GID" /dev/pinmem && chmod 0660 /dev/pinmem
		hook loaded
		record "$name" 0 0
		check "$name-devnode" test -c /dev/pinmem
	else
		loaded=0
		record "$name" 1 0
	fi
}

unload() {	# name
	if rmmod pinmem; then
		loaded=0
		hook unloaded
		record "$1" 0 0
		check "$1-gone" module_gone
	else
		record "$1" 1 0
	fi
}

# Scratch disks (run.sh --disks): their modules, then each file system at
# /mnt/FS, where pass 2 runs the disk tests.
disks=
while read -r m; do
	insmod "$m" || record "insmod-${m##*/}" 1 0
done </etc/pinmem-vm-modules
while read -r fs dev; do
	mkdir -p "/mnt/$fs"
	if mount -t "$fs" "/dev/$dev" "/mnt/$fs" && chmod 1777 "/mnt/$fs"; then
		disks="$disks $fs"
		record "mount-$fs" 0 0
	else
		record "mount-$fs" 1 0
	fi
done </etc/pinmem-vm-disks

# Module signatures (make vm-check-debug: module.sig_enforce=1, /pinmem.ko
# signed with a key the kernel trusts): copies of it unsigned or signed by
# another key are refused with EKEYREJECTED and `pinctl doctor` (pinctl_vm
# under pinctl's name) names the refusal; then the signed one loads below.
sig=0
grep -q 'module.sig_enforce=1' /proc/cmdline && [ -d /sig ] && sig=1
if [ "$sig" = 1 ]; then
	check sig-enforced grep -qx Y /sys/module/module/parameters/sig_enforce
	for ko in /sig/*.ko; do
		name=${ko##*/}
		if insmod "$ko" >/tmp/insmod.out 2>&1; then
			rmmod pinmem
			record "sig-refused-${name%.ko}" 1 0
		else
			check "sig-refused-${name%.ko}" grep -q 'Key was rejected by service' /tmp/insmod.out
		fi
	done
	ln -sf /tests/kernel/pinctl_vm /bin/pinctl
	pinctl doctor >/tmp/doctor.out 2>&1
	sed 's/^/PINMEM-VM-DOCTOR: /' /tmp/doctor.out
	check sig-doctor-refused grep -q '^\[FAIL\] signature the kernel refused a module for its signature' /tmp/doctor.out
fi

# Pass 1: every test program, in name order.
load insmod
if [ "$loaded" = 1 ] && [ "$sig" = 1 ]; then
	# Verified: no taint E (unsigned or untrusted module) on pinmem.
	check sig-accepted-untainted sh -c '! grep -q E /sys/module/pinmem/taint'
	pinctl doctor >/tmp/doctor.out 2>&1
	sed 's/^/PINMEM-VM-DOCTOR: /' /tmp/doctor.out
	check sig-doctor-accepted grep -q "^\[ ok \] signature module signatures enforced (module.sig_enforce=1); pinmem.ko's was accepted" /tmp/doctor.out
fi
if [ "$loaded" = 1 ]; then
	for t in /tests/kernel/*; do
		[ -x "$t" ] && run_test "${t##*/}" "$t"
	done
	unload rmmod
fi

# Pass 2: a reloaded module works; other parts' programs run against it.
if [ "$loaded" = 0 ]; then
	# Load-time parameters (what modprobe.d/pinmem.conf sets) are kept.
	load reload global_limit=805306368 default_user_limit=536870912 enforce_rlimit=1
	if [ "$loaded" = 1 ]; then
		p=/sys/module/pinmem/parameters
		check reload-params test "$(cat $p/global_limit) $(cat $p/default_user_limit)" = \
			"805306368 536870912"
		for t in $PINMEM_RELOAD_TESTS; do
			run_test "reload-$t" "/tests/kernel/$t"
		done
		for t in /tests/extra/*; do
			[ -x "$t" ] && run_test "extra-${t##*/}" "$t"
		done
		# Copied onto the disk: the tests keep their files next to themselves.
		for fs in $disks; do
			mkdir -p "/mnt/$fs/tests"
			for t in /tests/disk/*; do
				[ -x "$t" ] || continue
				if cp "$t" "/mnt/$fs/tests/"; then
					run_test "$fs-${t##*/}" "/mnt/$fs/tests/${t##*/}"
				else
					record "$fs-${t##*/}" 1 0
				fi
			done
		done
		unload rmmod-final
	fi
fi

for fs in $disks; do
	check "umount-$fs" umount "/mnt/$fs"
done

# Every FOLL_PIN taken since boot must have been released by now (fold the
# per-cpu deltas into the totals first).
echo 1 >/proc/sys/vm/stat_refresh
acq=$(awk '$1 == "nr_foll_pin_acquired" { print $2 }' /proc/vmstat)
rel=$(awk '$1 == "nr_foll_pin_released" { print $2 }' /proc/vmstat)
check foll-pin-balanced test "${acq:-x}" = "${rel:-y}"
# Taint bits: 32 bad page, 128 died (oops), 512 warned, 16384 soft lockup.
tainted=$(cat /proc/sys/kernel/tainted)
check taint-clean test $((tainted & (32 | 128 | 512 | 16384))) = 0

verdict=PASS
[ "$nfailed" = 0 ] || verdict=FAIL
echo "PINMEM-VM-RESULT kernel=$(uname -r) tests=$ntests failed=$nfailed" \
	"foll_pin_acquired=$acq foll_pin_released=$rel tainted=$tainted" \
	"failed_list=${failed_list# }"
echo "PINMEM-VM-VERDICT $verdict"
sync
poweroff -f
echo o >/proc/sysrq-trigger
sleep 10
