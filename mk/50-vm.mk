# SPDX-License-Identifier: MIT
# VM tests: tests/kernel/ programs (static, so the initramfs needs no
# libraries) and the qemu harness in tests/vm/ (README.md) that boots every installed
# target kernel with pinmem.ko.  VM_EXTRA_TESTS: more executables (with their
# ldd libraries) other parts want run inside the VM; VM_DISK_TESTS: executables
# run again from each scratch disk (ext4, xfs; VM_DISKS); VM_EXTRA_ROOT: directories
# copied as they are into the initramfs root.

VM_TEST_SRCS := $(filter-out tests/kernel/common.c,$(wildcard tests/kernel/*.c))
VM_TEST_BINS := $(patsubst tests/kernel/%.c,$(O)/tests/kernel/%,$(VM_TEST_SRCS))
VM_TEST_CFLAGS := $(PM_CFLAGS) -Itests/kernel -pthread
VM_EXTRA_TESTS ?=
VM_EXTRA_ROOT ?=
VM_DISK_TESTS ?=
VM_TIMEOUT ?= 1800
export VM_EXTRA_TESTS VM_EXTRA_ROOT VM_DISK_TESTS VM_TIMEOUT

.PHONY: vm-tests vm-check
vm-tests: $(VM_TEST_BINS) $(O)/vm/vm-hugepages

$(O)/vm/vm-hugepages: tests/vm/hugepages.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PM_CFLAGS) -static -o $@ $<

$(O)/tests/kernel/common.o: tests/kernel/common.c tests/kernel/common.h include/uapi/pinmem.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(VM_TEST_CFLAGS) -c -o $@ $<

$(O)/tests/kernel/%: tests/kernel/%.c $(O)/tests/kernel/common.o tests/kernel/common.h include/uapi/pinmem.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(VM_TEST_CFLAGS) -static -o $@ $< $(O)/tests/kernel/common.o -pthread

vm-check: vm-tests $(VM_EXTRA_TESTS) $(VM_DISK_TESTS)
	+O=$(O) MAKE="$(MAKE)" tests/vm/check-all.sh

CHECK_STEPS += vm-check
