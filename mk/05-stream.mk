# SPDX-License-Identifier: MIT
# The stream runtime's sources, linked into libpinmem by mk/10-lib.mk.
LIB_SRCS += lib/crc32c.c lib/manifest.c lib/manifest_tar.c lib/plan.c lib/reader.c lib/stream.c \
	lib/stream_files.c lib/stream_hist.c
