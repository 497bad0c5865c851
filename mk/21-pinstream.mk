# SPDX-License-Identifier: MIT
# pinstream: $(O)/pinstream from tools/pinstream/pinstream*.c, linked with
# $(O)/libpinmem.a (and pinctl's size parser/formatter, tools/pinctl/pinctl_size.c);
# `make demo`; the benchmarks in bench/; the stream test in the VM.

PINSTREAM_SRCS := $(sort $(wildcard tools/pinstream/pinstream*.c))
PINSTREAM_OBJS := $(PINSTREAM_SRCS:%.c=$(O)/%.o)

.PHONY: pinstream demo bench-fio bench-gpu-check pinstream-check
all: pinstream
pinstream: $(O)/pinstream

$(PINSTREAM_OBJS): $(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(PINSTREAM_OBJS:.o=.d)

$(O)/pinstream: $(PINSTREAM_OBJS) $(O)/tools/pinctl/pinctl_size.o $(LIBPINMEM_A)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PM_LDLIBS)

# A synthetic dataset in a temporary directory on the checkout's file system
# (tmpfs has no O_DIRECT), streamed through every --compare mode, then removed.
DEMO_SIZE ?= 1G
DEMO_FILES ?= 8
DEMO_DIR ?= $(O)
# It installs the build packages first (a fresh machine has no liburing-dev).
demo: deps-build
	+@$(MAKE) --no-print-directory $(O)/pinstream
	@set -e; mkdir -p $(DEMO_DIR); d=$$(mktemp -d $(abspath $(DEMO_DIR))/demo.XXXXXX); \
	trap 'rm -rf "$$d"' EXIT INT TERM; \
	$(O)/pinstream --make-dataset $$d --size $(DEMO_SIZE) --files $(DEMO_FILES); \
	$(O)/pinstream --manifest $$d/manifest.txt --no-progress; \
	$(O)/pinstream --compare $$d/data-*.bin

# Side by side with fio on the same file, block size and queue depth.
bench-fio: $(O)/pinstream
	O=$(O) bench/fio-compare.sh

# Prepared for a machine with a GPU (see the script); builds with CUDA.
bench-gpu-check:
	O=$(O) bench/gpu-check.sh

# The command line's bad-input cases and a short real run.
pinstream-check: $(O)/pinstream
	tests/pinstream/cli.sh $(O)/pinstream

# The cgroup room --compare's settle_memory is capped by, on a made-up tree.
UNIT_EXTRA_test_pinstream_cgroup := $(O)/tools/pinstream/pinstream_cgroup.o
UNIT_LDFLAGS_test_pinstream_cgroup := -Itools/pinstream

# The stream's unit test also runs in the VM against the real /dev/pinmem.
UNIT_EXTRA_test_stream :=
$(O)/vm/test_stream_module: tests/unit/test_stream.c $(LIBPINMEM_A) $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) -Itests/unit -Itests/cuda_stub -DPM_TEST_MODULE=1 $(CFLAGS) \
		$(LDFLAGS) -o $@ $< $(LIBPINMEM_A) -lcmocka $(PM_LDLIBS)
VM_EXTRA_TESTS += $(O)/vm/test_stream_module
vm-check: $(O)/vm/test_stream_module
# Both again on ext4 and XFS disks in the VM (tests/vm/README.md): real
# O_DIRECT, page cache that can be cold, the populate path on 6.1 and 6.12.
VM_DISK_TESTS += $(O)/vm/test_stream_module $(O)/unit/test_stream_populate

CHECK_STEPS += pinstream-check

# Many small files (ImageNet-shaped): pinstream under `ulimit -n 1024`
# against a tight open+pread+close loop into pinned memory, same files,
# cold then warm.  SMALL_FILES=200000 SMALL_ITEM=1K-32K by default.
SMALL_FILES ?= 200000
SMALL_ITEM ?= 1K-32K
.PHONY: bench-small-files
$(O)/bench/pread-items: bench/pread-items.c $(LIBPINMEM_A)
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBPINMEM_A) $(PM_LDLIBS)

bench-small-files: $(O)/pinstream $(O)/bench/pread-items
	O=$(O) SMALL_FILES=$(SMALL_FILES) SMALL_ITEM=$(SMALL_ITEM) bench/small-files.sh
