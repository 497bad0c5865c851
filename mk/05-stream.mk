# SPDX-License-Identifier: MIT
# The stream runtime's sources (lib/stream/), linked into libpinmem by mk/10-lib.mk.
LIB_SRCS += $(wildcard lib/stream/*.c)

# The manifest tests make the library's allocations fail one at a time
# (tests/unit/alloc_fail.h): their link routes malloc and friends through it.
UNIT_ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup
UNIT_LDFLAGS_test_manifest := $(UNIT_ALLOC_WRAP)
UNIT_LDFLAGS_test_manifest_tar := $(UNIT_ALLOC_WRAP)
