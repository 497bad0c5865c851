# SPDX-License-Identifier: MIT
# The stream runtime's sources (lib/stream/), linked into libpinmem by mk/10-lib.mk.
LIB_SRCS += $(wildcard lib/stream/*.c)
