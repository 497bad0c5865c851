# SPDX-License-Identifier: MIT
# `make vm-check-debug`: the in-VM suite (tests/vm/run.sh) under a debug
# kernel built from Debian's linux-source-6.12 with KASAN, lockdep, kmemleak
# and DEBUG_VM (tests/vm-debug/).  The kernel build is cached outside the
# checkout in $PINMEM_CACHE/debug-kernel/ (default /var/cache/pinmem) and
# reused while its source version and tests/vm-debug/debug.config are unchanged.
#   make vm-debug-kernel   only build (or find) the debug kernel
#   make vm-check-debug-canary  boot a pinmem.ko broken on purpose and pass
#                          only if the check catches its lockdep and KASAN
#                          reports and its leak
#   VM_DEBUG_TIMEOUT, VM_DEBUG_TEST_TIMEOUT: see tests/vm-debug/check.sh

.PHONY: vm-debug-kernel vm-check-debug vm-check-debug-canary
vm-debug-kernel:
	tests/vm-debug/build-kernel.sh

vm-check-debug: vm-tests $(VM_EXTRA_TESTS)
	+O=$(O) MAKE="$(MAKE)" tests/vm-debug/check.sh

vm-check-debug-canary: vm-tests $(VM_EXTRA_TESTS)
	+O=$(O) MAKE="$(MAKE)" tests/vm-debug/check.sh --canary

CHECK_STEPS += vm-check-debug
