# SPDX-License-Identifier: MIT
# pinctl: $(O)/pinctl from tools/pinctl/pinctl*.c (it needs neither libpinmem nor
# liburing: the ioctl ABI header and libc are enough), its golden-output
# check, the objects its unit tests link, and its VM test.
#
# PINCTL_OBJS is everything but main(): the unit tests and the VM test
# (tests/kernel/pinctl_vm.c, a static program that is also pinctl when
# called by that name) link them.

PINCTL_SRCS := $(sort $(filter-out tools/pinctl/pinctl_main.c,$(wildcard tools/pinctl/pinctl*.c)))
PINCTL_OBJS := $(PINCTL_SRCS:%.c=$(O)/%.o)
PINCTL_LDLIBS := -ldl

.PHONY: pinctl pinctl-check pinctl-check-asan metrics-check
all: pinctl
pinctl: $(O)/pinctl

$(PINCTL_OBJS) $(O)/tools/pinctl/pinctl_main.o: $(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(PM_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(PINCTL_OBJS:.o=.d) $(O)/tools/pinctl/pinctl_main.d

$(O)/pinctl: $(O)/tools/pinctl/pinctl_main.o $(PINCTL_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PINCTL_LDLIBS)

# Golden outputs (text, JSON, Prometheus) from the recorded trees under
# tests/golden/pinctl/, plus every bad-input case; see its README.
pinctl-check: $(O)/pinctl
	tests/golden/pinctl/run.sh $(O)/pinctl

# The same cases with pinctl built under ASan+UBSan (leaks included).
PINCTL_ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
pinctl-check-asan:
	+$(MAKE) --no-print-directory O=$(O)/asan CFLAGS="$(PINCTL_ASAN_FLAGS)" $(O)/asan/pinctl
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1 \
		tests/golden/pinctl/run.sh $(O)/asan/pinctl

# pinmem-metrics.service/.timer: systemd-analyze verify, and the service's
# command replacing pinmem.prom atomically (a polling reader never sees part
# of one) with output promtool accepts.
metrics-check: $(O)/pinctl
	tests/install/metrics-check.sh $(O)/pinctl

CHECK_STEPS += pinctl-check pinctl-check-asan metrics-check

# Unit tests (mk/30-unit.mk builds tests/unit/test_*.c and links
# UNIT_EXTRA_<name>).
UNIT_EXTRA_test_pinctl_size := $(O)/tools/pinctl/pinctl_size.o
UNIT_EXTRA_test_pinctl_json := $(O)/tools/pinctl/pinctl_json.o
UNIT_EXTRA_test_pinctl_stats := $(PINCTL_OBJS)
UNIT_EXTRA_test_pinctl_limits := $(PINCTL_OBJS)

# The VM test: an explicit rule, so mk/50-vm.mk's pattern rule (test file
# plus common.o only) does not apply to it; static like the other programs.
$(O)/tests/kernel/pinctl_vm: tests/kernel/pinctl_vm.c $(O)/tests/kernel/common.o \
		tests/kernel/common.h $(PINCTL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PM_CFLAGS) -Itests/kernel -Itools/pinctl -static -o $@ $< \
		$(O)/tests/kernel/common.o $(PINCTL_OBJS) $(PINCTL_LDLIBS) -pthread

# pinctl_vm loads the module again with packaging/modprobe.d/pinmem.conf's
# install line (insmod for modprobe); the file goes into the VM as
# /etc/pinmem/modprobe.conf.
PINCTL_VM_ROOT := $(O)/vm/pinctl-root
$(PINCTL_VM_ROOT)/etc/pinmem/modprobe.conf: packaging/modprobe.d/pinmem.conf
	@mkdir -p $(@D)
	cp $< $@
vm-check: VM_EXTRA_ROOT += $(PINCTL_VM_ROOT)
vm-check: $(PINCTL_VM_ROOT)/etc/pinmem/modprobe.conf
