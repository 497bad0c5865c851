# SPDX-License-Identifier: MIT
# The kernel module pinmem.ko (Kbuild, kmod/).
#   make kmod [KVER=6.1.0-57-amd64] [KDIR=/lib/modules/KVER/build] [C=1|2] [W=1]
#       builds $(O)/kmod/$(KVER)/pinmem.ko
#   make kmod-all
#       every /lib/modules/*/build with W=1 and -Werror, then sparse (C=2);
#       fails on any compiler, kernel-doc or sparse warning
# Each kernel builds in its own copy of the sources under $(O)/kmod/$(KVER)/,
# so builds for several kernels never share objects or probe results, and the
# source tree stays clean.

KMOD_KVERS := $(sort $(patsubst /lib/modules/%/build,%,$(wildcard /lib/modules/*/build)))
ifeq ($(origin KVER),undefined)
KMOD_RUNNING := $(shell uname -r)
KVER := $(if $(wildcard /lib/modules/$(KMOD_RUNNING)/build),$(KMOD_RUNNING),$(lastword $(shell printf '%s\n' $(KMOD_KVERS) | sort -V)))
endif
KDIR ?= /lib/modules/$(KVER)/build
KMOD_OUT = $(O)/kmod/$(KVER)
KMOD_JOBS ?= 2
KMOD_SOURCES := Kbuild VERSION include/uapi/pinmem.h \
	$(filter-out kmod/pinmem_compat.h,$(wildcard kmod/*.c kmod/*.h kmod/*.sh))

# The kernel's make must not see this make's command line (O=, C=, ...) through
# MAKEFLAGS: O= means something else to kbuild.  C, W and V pass explicitly.
KMOD_MAKE = env -u MAKEFLAGS -u MAKEOVERRIDES -u MFLAGS -u MAKELEVEL \
	$(MAKE) -j$(KMOD_JOBS) -C $(KDIR) M=$(abspath $(KMOD_OUT)) \
	$(if $(findstring s,$(firstword -$(MAKEFLAGS))),-s) \
	$(if $(C),C=$(C)) $(if $(W),W=$(W)) $(if $(V),V=$(V))

.PHONY: kmod kmod-all kmod-clean
kmod:
	@test -n "$(KVER)" -a -d "$(KDIR)" || \
		{ echo "kmod: no kernel build tree '$(KDIR)' (KVER='$(KVER)')" >&2; exit 1; }
	@mkdir -p $(KMOD_OUT)
	@rsync -a --relative $(KMOD_SOURCES) $(KMOD_OUT)/
	+$(KMOD_MAKE) modules

# One kernel, fresh: W=1 build, then sparse over every file; any warning fails.
kmod-check-%:
	@rm -rf $(O)/kmod/$*
	@set -e; log=$(O)/kmod/$*.log; mkdir -p $(O)/kmod; \
	echo "kmod: $* (W=1 -Werror, then sparse C=2)"; \
	{ $(MAKE) --no-print-directory kmod KVER=$* KDIR=/lib/modules/$*/build W=1 && \
	  $(MAKE) --no-print-directory kmod KVER=$* KDIR=/lib/modules/$*/build C=2; } \
		> $$log 2>&1 || { cat $$log; exit 1; }; \
	if grep -E 'warning|error|: note:' $$log; then \
		echo "kmod: $* has warnings (full log: $$log)" >&2; exit 1; fi

kmod-all: $(addprefix kmod-check-,$(KMOD_KVERS))
	@test -n "$(KMOD_KVERS)" || { echo "kmod-all: no /lib/modules/*/build" >&2; exit 1; }
	@echo "kmod-all: built clean for $(KMOD_KVERS)"

kmod-clean:
	rm -rf $(O)/kmod

CHECK_STEPS += kmod-all
