# SPDX-License-Identifier: MIT
# cmocka unit tests: every tests/unit/test_X.c becomes $(O)/unit/test_X,
# linked with $(O)/libpinmem.a, cmocka and the objects listed in
# UNIT_EXTRA_test_X, with the link flags in UNIT_LDFLAGS_test_X (both set by
# the part that owns the test, in an earlier mk file).  `unit-check` runs
# them all; `unit-check-asan` builds and runs them again under ASan+UBSan in
# $(O)/asan.  The cuda backend's tests load the test-only CUDA runtime
# stand-in $(O)/unit/libcudart_stub.so.
#
# In the VM, $(O)/vm/test_buf_module (tests/unit/test_buf.c built with
# PM_TEST_MODULE) runs the same buffer cases and more against the real
# /dev/pinmem; it is added to VM_EXTRA_TESTS (mk/50-vm.mk).

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
ifneq ($(CUDA),1)
UNIT_SRCS := $(filter-out tests/unit/test_backend_cuda.c,$(UNIT_SRCS))
endif
UNIT_NAMES := $(UNIT_SRCS:tests/unit/%.c=%)
UNIT_BINS := $(UNIT_NAMES:%=$(O)/unit/%)
UNIT_CFLAGS := $(PM_CFLAGS) $(filter-out -DPM_CUDA_LIBDIR=%,$(LIB_CFLAGS)) \
	-Itests/unit -Itests/cuda_stub $(shell pkg-config --cflags cmocka 2>/dev/null)
UNIT_LDLIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka) $(PM_LDLIBS)
CUDA_STUB := $(O)/unit/libcudart_stub.so
CUDA_STUB_NODRV := $(O)/unit/libcudart_stub_nodrv.so
UNIT_ENV := PM_TEST_CUDA_STUB=$(abspath $(CUDA_STUB)) \
	PM_TEST_CUDA_STUB_NODRV=$(abspath $(CUDA_STUB_NODRV))
UNIT_DEPS := $(LIBPINMEM_A) $(wildcard tests/unit/*.h) \
	$(if $(filter 1,$(CUDA)),$(CUDA_STUB) $(CUDA_STUB_NODRV))
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer

.PHONY: unit unit-check unit-check-asan
unit: $(UNIT_BINS)

define unit_rule
$(O)/unit/$(1): tests/unit/$(1).c $(UNIT_DEPS) $(UNIT_EXTRA_$(1))
	@mkdir -p $$(@D)
	$$(CC) $$(UNIT_CFLAGS) $$(CFLAGS) $$(LDFLAGS) $(UNIT_LDFLAGS_$(1)) -o $$@ $$< $(UNIT_EXTRA_$(1)) \
		$$(LIBPINMEM_A) $$(UNIT_LDLIBS)
endef
$(foreach t,$(UNIT_NAMES),$(eval $(call unit_rule,$(t))))

$(CUDA_STUB): tests/cuda_stub/cudart_stub.c tests/cuda_stub/cudastub.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -isystem $(CUDA_HOME)/include $(CFLAGS) \
		-shared -fPIC -o $@ $< -pthread

# The same stand-in without the driver's cuCtx* calls.
$(CUDA_STUB_NODRV): tests/cuda_stub/cudart_stub.c tests/cuda_stub/cudastub.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -isystem $(CUDA_HOME)/include $(CFLAGS) \
		-DCUDASTUB_NO_DRIVER -shared -fPIC -o $@ $< -pthread

# A test that hangs (a stream waiting for a read that never comes) fails.
UNIT_TIMEOUT ?= 900
unit-check: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "  UNIT $$t"; \
		$(UNIT_ENV) timeout -k 10 $(UNIT_TIMEOUT) $$t || \
		{ echo "unit-check: $$t failed (exit $$?; 124 or 137: it ran past $(UNIT_TIMEOUT) s)"; exit 1; }; done

unit-check-asan:
	+UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	$(MAKE) --no-print-directory O=build/asan CFLAGS="$(ASAN_FLAGS)" unit-check

# The in-VM library test: same source, real module.
$(O)/vm/test_buf_module: tests/unit/test_buf.c $(UNIT_DEPS)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -DPM_TEST_MODULE=1 $(CFLAGS) $(LDFLAGS) -o $@ $< \
		$(LIBPINMEM_A) $(UNIT_LDLIBS)

VM_EXTRA_TESTS += $(O)/vm/test_buf_module
vm-check: $(O)/vm/test_buf_module

CHECK_STEPS += unit-check unit-check-asan
