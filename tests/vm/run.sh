#!/bin/sh
# SPDX-License-Identifier: MIT
# Boot one kernel under qemu with pinmem.ko and the tests/kernel programs,
# then judge its serial log.  Used by `make vm-check` (tests/vm/check-all.sh)
# for the installed Debian kernels and by the debug-kernel run for its own
# build.  Exit status 0 only when the VM printed a PASS verdict, every test
# passed, FOLL_PIN counts balance and the log holds no kernel splat.
set -eu

usage() {
	cat >&2 <<EOF
usage: $0 --kernel BZIMAGE --kbuild KERNEL_BUILD_DIR --kver NAME [options]
  --chroot ROOT    the kernel's build tree and /lib/modules are in this chroot
                   (tests/vm-newest/prepare.sh): build pinmem.ko there with
                   its own make and compiler (--kbuild is a path inside it,
                   default /lib/modules/NAME/build) and take the --disks
                   modules from ROOT/lib/modules/NAME
  --timeout S      wall-clock limit for the boot (default \$VM_TIMEOUT or 1800)
  --module KO      use this pinmem.ko instead of building one (make kmod)
  --accel A        tcg, kvm or auto (default \$VM_ACCEL or auto: kvm only if a
                   time-bounded probe boot works)
  --extra "BINS"   more test executables, with the shared libraries ldd lists
                   (default \$VM_EXTRA_TESTS)
  --append "ARGS"  more kernel command line
  --disks "FS..."  one scratch virtio disk per file system (ext4, xfs), made
                   with mkfs.FS; /init mounts it at /mnt/FS and runs the
                   --disk-tests from there (none by default; make vm-check
                   asks for ext4 and xfs)
  --disk-tests "BINS"  executables run once from each disk, with the shared
                   libraries ldd lists (default \$VM_DISK_TESTS)
  --hook FILE      executable copied to /hook.sh; /init runs it with the
                   argument boot, loaded (after insmod) or unloaded (after rmmod)
  --out DIR        work and log directory (default \$O/vm/NAME)
  --probe-only     print the accelerator auto would choose and exit
EOF
	exit 2
}

kernel= kbuild= kver= module= out= append= hook= chroot= probe_only=0
disks=
disk_tests=${VM_DISK_TESTS:-}
timeout=${VM_TIMEOUT:-1800}
accel=${VM_ACCEL:-auto}
extra=${VM_EXTRA_TESTS:-}
O=${O:-build}
MAKE=${MAKE:-make}
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift ;;
	--kbuild) kbuild=$2; shift ;;
	--chroot) chroot=$2; shift ;;
	--kver) kver=$2; shift ;;
	--timeout) timeout=$2; shift ;;
	--module) module=$2; shift ;;
	--accel) accel=$2; shift ;;
	--extra) extra=$2; shift ;;
	--append) append=$2; shift ;;
	--disks) disks=$2; shift ;;
	--disk-tests) disk_tests=$2; shift ;;
	--hook) hook=$2; shift ;;
	--out) out=$2; shift ;;
	--probe-only) probe_only=1 ;;
	*) usage ;;
	esac
	shift
done

top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
here=tests/vm
busybox=$(command -v busybox || true)
[ -n "$busybox" ] || { echo "vm: busybox not found (busybox-static)" >&2; exit 1; }
if ldd "$busybox" >/dev/null 2>&1; then
	echo "vm: $busybox is dynamic; install busybox-static" >&2
	exit 1
fi

# Time-bounded probe: nested KVM can hang, so use it only if it boots.
probe_accel() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo tcg; return; }
	[ -n "$kernel" ] || { echo tcg; return; }
	p=$(mktemp -d)
	mkdir -p "$p/root/bin"
	cp "$busybox" "$p/root/bin/busybox"
	printf '#!/bin/busybox sh\n/bin/busybox echo PINMEM-KVM-PROBE-OK\n/bin/busybox poweroff -f\n' >"$p/root/init"
	chmod 755 "$p/root/init"
	(cd "$p/root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$p/initrd.gz"
	timeout -k 2 "${VM_KVM_PROBE_TIMEOUT:-20}" qemu-system-x86_64 -accel kvm \
		-cpu host -m 256 -smp 1 -nographic -no-reboot -net none \
		-kernel "$kernel" -initrd "$p/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet" </dev/null >"$p/log" 2>&1 || true
	if grep -aq PINMEM-KVM-PROBE-OK "$p/log"; then echo kvm; else echo tcg; fi
	rm -rf "$p"
}

if [ "$probe_only" = 1 ]; then
	probe_accel
	exit 0
fi
[ -n "$kernel" ] && [ -n "$kver" ] || usage
[ -r "$kernel" ] || { echo "vm: cannot read kernel $kernel" >&2; exit 1; }
if [ -n "$chroot" ]; then
	[ -x "$chroot/usr/bin/make" ] || { echo "vm: $chroot is no chroot with make" >&2; exit 1; }
	chroot=$(cd "$chroot" && pwd)
	kbuild=${kbuild:-/lib/modules/$kver/build}
	[ -n "$module" ] || [ -d "$chroot$kbuild" ] ||
		{ echo "vm: no kernel build tree $kbuild in $chroot" >&2; exit 1; }
else
	[ -n "$module" ] || [ -d "$kbuild" ] || { echo "vm: no kernel build tree $kbuild" >&2; exit 1; }
fi
[ "$accel" = auto ] && accel=$(probe_accel)
out=${out:-$O/vm/$kver}
mkdir -p "$out"
# Helpers sharing a checkout may boot the same kernel at once: take turns
# rather than overwrite each other's initramfs and log.
exec 9>"$out/.lock"
flock 9
log=$out/console.log
rm -f "$out/failure.txt"	# written below only when this run fails

# Build: the test programs once, the module for this kernel.
$MAKE -s --no-print-directory vm-tests O="$O"
if [ -n "$module" ]; then
	:
elif [ -n "$chroot" ]; then
	# What `make kmod` does, with the chroot's make and compiler: the same
	# sources (KMOD_SOURCES of mk/40-kmod.mk) copied to $O/kmod/NAME, which
	# is mounted in the chroot for the build.
	kout=$O/kmod/$kver
	mkdir -p "$kout"
	srcs=$($MAKE -s --no-print-directory O="$O" \
		--eval 'pm-vm-kmod-sources: ; @echo $(KMOD_SOURCES)' pm-vm-kmod-sources)
	# shellcheck disable=SC2086
	rsync -a --relative $srcs "$kout/"
	tests/vm-newest/in-chroot.sh --bind "$(cd "$kout" && pwd)" /build/pinmem \
		"$chroot" -- make -s -j"${KMOD_JOBS:-2}" -C "$kbuild" M=/build/pinmem modules
	module=$kout/pinmem.ko
else
	$MAKE -s --no-print-directory kmod KVER="$kver" KDIR="$kbuild" O="$O"
	module=$O/kmod/$kver/pinmem.ko
fi
[ -f "$module" ] || { echo "vm: no module at $module" >&2; exit 1; }

# initramfs: busybox, /init, pinmem.ko, test programs and their libraries.
root=$out/initramfs
rm -rf "$root"
mkdir -p "$root/bin" "$root/etc" "$root/tests/kernel" "$root/tests/extra" \
	"$root/tests/disk" "$root/lib/vm-modules" "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
cp "$busybox" "$root/bin/busybox"
cp "$O/vm/vm-hugepages" "$root/bin/vm-hugepages"
cp "$here/init.sh" "$root/init"
chmod 755 "$root/init"
cp "$module" "$root/pinmem.ko"
if [ -n "$hook" ]; then
	cp "$hook" "$root/hook.sh"
	chmod 755 "$root/hook.sh"
fi
# VM_ONLY="t_a t_b": only these tests/kernel programs, and the reload pass's
# (VM_RELOAD_TESTS), for a quick run while working on one area; make
# vm-check always runs them all.
only=${VM_ONLY:+$VM_ONLY ${VM_RELOAD_TESTS:-t_basic}}
for t in "$O"/tests/kernel/*; do
	case $t in *.o|*.d) continue ;; esac
	if [ -n "$only" ]; then
		case " $only " in *" ${t##*/} "*) ;; *) continue ;; esac
	fi
	[ -f "$t" ] && [ -x "$t" ] && cp "$t" "$root/tests/kernel/"
done
copy_libs() {	# executable: the shared objects ldd names, at the same paths
	ldd "$1" 2>/dev/null | awk '/=> \// { print $3 } /^[ \t]*\// { print $1 }' |
	while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
for t in $extra; do
	[ -x "$t" ] || { echo "vm: extra test $t is not an executable" >&2; exit 1; }
	cp "$t" "$root/tests/extra/"
	copy_libs "$t"
done
[ -n "$disks" ] || disk_tests=
for t in $disk_tests; do
	[ -x "$t" ] || { echo "vm: disk test $t is not an executable" >&2; exit 1; }
	cp "$t" "$root/tests/disk/"
	copy_libs "$t"
done

# Scratch disks: a fresh file system per disk, attached as /dev/vda, vdb...,
# and the kernel modules (in load order, uncompressed for busybox insmod) that
# virtio-blk and those file systems need on this kernel; built-in ones need
# nothing.  The stream tests run on tmpfs otherwise, which has no O_DIRECT
# before 6.6, never drops a file's pages and has other large folios.
drives=
: >"$root/etc/pinmem-vm-disks"
: >"$root/etc/pinmem-vm-modules"
if [ -n "$disks" ]; then
	PATH=$PATH:/usr/sbin:/sbin	# modprobe, mkfs.* (not in a user's PATH on Debian)
	command -v modprobe >/dev/null 2>&1 ||
		{ echo "vm: modprobe not found (kmod), needed for --disks" >&2; exit 1; }
	# (a chroot's kernel: its module tree, read with -d ROOT)
	mods=$(for m in virtio_pci virtio_blk $disks; do
		modprobe ${chroot:+-d "$chroot"} -S "$kver" --show-depends "$m" 2>/dev/null ||
			echo "missing $m"
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 } $1 == "missing" { print }')
	case $mods in *missing*)
		echo "vm: $kver lacks $(echo "$mods" | awk '$1 == "missing" { printf "%s ", $2 }')(neither a module in $chroot/lib/modules/$kver nor built in); cannot attach --disks" >&2
		exit 1 ;;
	esac
	n=10
	for m in $mods; do
		ko=$root/lib/vm-modules/$n-$(basename "${m%.ko*}").ko
		case $m in
		*.ko.xz) unz=xz ;;
		*.ko.zst) unz=zstd ;;
		*.ko.gz) unz=gzip ;;
		*) unz=cat ;;
		esac
		command -v "$unz" >/dev/null 2>&1 ||
			{ echo "vm: $unz not found, needed to unpack $m (scripts/install-deps.sh installs it)" >&2; exit 1; }
		if [ "$unz" = cat ]; then cp "$m" "$ko"; else "$unz" -dc "$m" >"$ko"; fi
		echo "/lib/vm-modules/${ko##*/}" >>"$root/etc/pinmem-vm-modules"
		n=$((n + 1))
	done
	dev=a
	for fs in $disks; do
		command -v "mkfs.$fs" >/dev/null 2>&1 ||
			{ echo "vm: mkfs.$fs not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
		img=$out/disk-$fs.img
		rm -f "$img"
		truncate -s 1G "$img"
		# features every kernel of the matrix (6.1 and later) mounts, whatever
		# a newer mkfs would choose by default
		case $fs in
		ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img" ;;
		xfs)	# (xfsprogs 6.1 cannot read its own lts_6.1.conf: then its defaults)
			mkfs.xfs -q -f -c options=/usr/share/xfsprogs/mkfs/lts_6.1.conf \
				"$img" 2>/dev/null || mkfs.xfs -q -f "$img" ;;
		*) "mkfs.$fs" -q "$img" >/dev/null ;;
		esac
		drives="$drives -drive file=$img,if=virtio,format=raw,cache=unsafe"
		echo "$fs vd$dev" >>"$root/etc/pinmem-vm-disks"
		dev=$(echo "$dev" | tr a-y b-z)
	done
fi
# VM_EXTRA_ROOT: directories other parts want copied as they are into the
# initramfs root (the Python tests' interpreter and packages, mk/80-python.mk).
for d in ${VM_EXTRA_ROOT:-}; do
	cp -a "$d/." "$root/"
done
cat >"$root/etc/pinmem-vm.conf" <<EOF
PINMEM_TEST_TIMEOUT=${VM_TEST_TIMEOUT:-600}
PINMEM_RELOAD_TESTS="${VM_RELOAD_TESTS:-t_basic}"
EOF
# The group /dev/pinmem belongs to (packaging/udev, packaging/sysusers.d);
# tests/kernel/common.h KT_PINMEM_GID gives it to the test users.
echo 'PINMEM_GID=990' >>"$root/etc/pinmem-vm.conf"
printf 'root:x:0:0:root:/:/bin/sh\npmuser:x:1000:1000::/tmp:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\npinmem:x:990:pmuser\n' >"$root/etc/group"
(cd "$root" && find . | sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$out/initrd.gz"

cpu=max
[ "$accel" = kvm ] && cpu=host
# movablecore: user pages start out in ZONE_MOVABLE, so tests can see that
# the module's long-term pins move them out first.
echo "vm: $kver: booting ($accel, timeout ${timeout}s), log $log"
start=$(date +%s)
rc=0
timeout -k 10 "$timeout" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" \
	-m 2048 -smp 2 -nographic -no-reboot -net none \
	-kernel "$kernel" -initrd "$out/initrd.gz" $drives \
	-append "console=ttyS0 panic=-1 movablecore=512M $append" </dev/null >"$log" 2>&1 || rc=$?
secs=$(($(date +%s) - start))
rm -f "$out"/disk-*.img

# Judge the log.  Carriage returns come from the serial console.
clean=$out/console.txt
tr -d '\r' <"$log" >"$clean"
reasons=
fail() { reasons="$reasons; $*"; }
[ "$rc" = 124 ] || [ "$rc" = 137 ] && fail "timeout after ${timeout}s"
verdict=$(awk '$1 == "PINMEM-VM-VERDICT" { v = $2 } END { print v }' "$clean")
[ -n "$verdict" ] || fail "no verdict line"
[ -z "$verdict" ] || [ "$verdict" = PASS ] || fail "verdict $verdict"
splat_re='BUG:|WARNING:|Oops|general protection|Call Trace'
splats=$(grep -aE "$splat_re" "$clean" || true)
[ -z "$splats" ] || fail "kernel splat in log"
failed=$(grep -a '^PINMEM-VM: fail ' "$clean" || true)
[ -z "$failed" ] || fail "failed: $(echo "$failed" | awk '{ printf "%s ", $3 }')"
result=$(grep -a '^PINMEM-VM-RESULT ' "$clean" | tail -n 1 || true)
acq=$(echo "$result" | sed -n 's/.*foll_pin_acquired=\([0-9]*\).*/\1/p')
rel=$(echo "$result" | sed -n 's/.*foll_pin_released=\([0-9]*\).*/\1/p')
if [ -n "$result" ] && { [ -z "$acq" ] || [ "$acq" != "$rel" ]; }; then
	fail "nr_foll_pin_acquired=$acq != nr_foll_pin_released=$rel"
fi

# On failure: the tests' complaints, then what a truncated CI log must keep,
# the most telling lines last (also kept in $out/failure.txt, which
# check-all.sh prints again before its summary).
if [ -n "$reasons" ]; then
	grep -a -B 2 -A 4 -E '^not ok |^Bail out!|^PINMEM-VM: fail ' "$clean" | head -n 60 || true
	{
		echo "vm: $kver: last lines of the console:"
		tail -n 6 "$clean"
		if [ -n "$splats" ]; then
			echo "vm: $kver: first kernel splat:"
			grep -a -B 3 -A 18 -m 1 -E "$splat_re" "$clean"
			grep -a 'Kernel panic' "$clean" | head -n 2
			echo "vm: $kver: first splat line: $(echo "$splats" | head -n 1)"
		fi
		echo "vm: $kver: last test begun: $(sed -n 's/^PINMEM-VM: begin //p' "$clean" | tail -n 1)"
		echo "vm: $kver: FAIL in ${secs}s (${reasons#; }) log $log"
	} >"$out/failure.txt"
	cat "$out/failure.txt"
	exit 1
fi
ntests=$(echo "$result" | sed -n 's/.* tests=\([0-9]*\).*/\1/p')
nok=$(grep -ac '^ok ' "$clean" || true)
echo "vm: $kver: PASS in ${secs}s ($ntests programs/checks, $nok TAP cases, foll_pin $acq/$rel, $accel)"
