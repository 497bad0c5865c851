# SPDX-License-Identifier: MIT
# libpinmem: $(O)/libpinmem.a, $(O)/libpinmem.so.$(VERSION) (soname
# libpinmem.so.0) and $(O)/pinmem.pc, from LIB_SRCS (the stream's sources are
# added by mk/05-stream.mk, which is read first).
#
# The cuda copy backend is compiled when the CUDA Toolkit is found
# (CUDA_HOME, default /usr/local/cuda); `make CUDA=0` leaves it out.  It only
# needs the toolkit's headers: the runtime is dlopen'ed, so the library never
# links against libcudart and loads on machines without CUDA.

CUDA_HOME ?= /usr/local/cuda
CUDA ?= $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1,0)

LIB_SRCS += lib/backend.c lib/backend_host.c lib/buf.c lib/ctx.c lib/ctx_buf.c lib/ctx_dev.c \
	lib/fault.c lib/fmt.c lib/numa.c lib/pages.c lib/pin.c lib/refusal.c lib/sys.c lib/uring.c \
	lib/version.c
LIB_CFLAGS :=
ifeq ($(CUDA),1)
LIB_SRCS += lib/backend_cuda.c
LIB_CFLAGS += -DPM_HAVE_CUDA=1 -isystem $(CUDA_HOME)/include \
	-DPM_CUDA_LIBDIR=\"$(CUDA_HOME)/lib64\"
endif
LIB_SRCS := $(sort $(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:%.c=$(O)/%.o)
LIB_LDLIBS := -luring -pthread -ldl
# What a program linking $(O)/libpinmem.a needs after it.
PM_LDLIBS += -luring -ldl

LIBPINMEM_A := $(O)/libpinmem.a
LIBPINMEM_SO := $(O)/libpinmem.so.$(VERSION)

.PHONY: lib lib-check
all: lib $(O)/bench/pin-bench
lib: $(LIBPINMEM_A) $(LIBPINMEM_SO) $(O)/pinmem.pc

# One set of position-independent objects serves both libraries.
$(O)/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) $(LIB_CFLAGS) $(CFLAGS) -fPIC -MMD -MP -c -o $@ $<

-include $(LIB_OBJS:.o=.d)

# Written aside and renamed, so a program linking while the library is
# rebuilt never sees a half-written archive.
$(LIBPINMEM_A): $(LIB_OBJS)
	@rm -f $@.tmp
	$(AR) rcs $@.tmp $^
	mv -f $@.tmp $@

# The soname's number; bump it (and only it) on an incompatible library ABI
# change.  mk/70-install.mk and version-check use it too.
PM_SOVERSION := 0

# lib/libpinmem.map names the exports and their version node (mk/11-abi.mk).
$(LIBPINMEM_SO): $(LIB_OBJS) lib/libpinmem.map
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libpinmem.so.$(PM_SOVERSION) \
		-Wl,--version-script=lib/libpinmem.map \
		-Wl,--no-undefined -o $@.tmp $(LIB_OBJS) $(LIB_LDLIBS)
	mv -f $@.tmp $@
	ln -sf libpinmem.so.$(VERSION) $(O)/libpinmem.so.$(PM_SOVERSION)
	ln -sf libpinmem.so.$(PM_SOVERSION) $(O)/libpinmem.so

$(O)/pinmem.pc: pinmem.pc.in VERSION
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(PREFIX)/lib|g' \
		-e 's|@INCLUDEDIR@|$(PREFIX)/include|g' -e 's|@VERSION@|$(VERSION)|g' \
		$< > $@.tmp && mv $@.tmp $@

# The shared library exports only the pm_ API, never needs libcudart, and
# carries the cuda backend whenever CUDA=1.
lib-check: lib $(O)/bench/pin-bench
	@set -e; so=$(LIBPINMEM_SO); \
	bad=$$(nm -D --defined-only $$so | awk '$$2 ~ /^[TDBR]$$/ && $$3 !~ /^pm_/ { print $$3 }'); \
	[ -z "$$bad" ] || { echo "lib-check: $$so exports non-pm_ symbols: $$bad"; exit 1; }; \
	! readelf -d $$so | grep -q 'NEEDED.*cuda' || { echo "lib-check: $$so links a CUDA library"; exit 1; }; \
	readelf -d $$so | grep -q 'SONAME.*\[libpinmem\.so\.0\]' || { echo "lib-check: soname is not libpinmem.so.0"; exit 1; }; \
	if [ "$(CUDA)" = 1 ]; then strings $$so | grep -qx cudaHostRegister || \
		{ echo "lib-check: CUDA=1 but the cuda backend is missing"; exit 1; }; fi; \
	echo "lib-check: $$so: pm_ exports only, soname libpinmem.so.0, no CUDA link, cuda backend $(if $(filter 1,$(CUDA)),built,off (CUDA=0))"

CHECK_STEPS += lib-check

# `make bench-pin [BENCH_PIN_ARGS="-s 2 -t 8"]`: time to make N GiB pinned.
BENCH_PIN_ARGS ?=
.PHONY: bench-pin
$(O)/bench/pin-bench: bench/pin-bench.c $(LIBPINMEM_A)
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBPINMEM_A) $(PM_LDLIBS)

bench-pin: $(O)/bench/pin-bench
	$(O)/bench/pin-bench $(BENCH_PIN_ARGS)
