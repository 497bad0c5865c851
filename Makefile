# SPDX-License-Identifier: MIT
# pinmem: user-space build and the entry points `make demo` and `make check`.
# Each part keeps its rules in mk/NN-part.mk; this file holds what they share.

VERSION := $(shell cat VERSION)
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
O ?= build

CFLAGS ?= -O2 -g
PM_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wno-unused-parameter -fvisibility=hidden \
	-D_GNU_SOURCE -DPINMEM_VERSION=\"$(VERSION)\" -Iinclude -Ilib -Ilib/stream
PM_LDLIBS := -pthread

# Steps of `make check`, in order; each mk file appends its own.
CHECK_STEPS :=

.PHONY: all check deps deps-build demo clean
all:

include $(sort $(wildcard mk/*.mk))

# Debian/Ubuntu packages: everything `make check` needs, or (deps-build)
# only what building the library and tools needs, for `make demo`.
deps:
	scripts/install-deps.sh
deps-build:
	scripts/install-deps.sh --build-only

check: deps
	@set -e; for step in $(CHECK_STEPS); do \
		echo "==> make $$step"; $(MAKE) --no-print-directory $$step; done
	@echo "==> make check: all steps passed ($(CHECK_STEPS))"

clean:
	rm -rf $(O)
