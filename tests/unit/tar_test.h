/* SPDX-License-Identifier: MIT */
/*
 * ustar headers made by the tests (test_manifest_tar.c, test_stream_tar.c):
 * a header for a name and size, and its checksum again after a change.
 */
#ifndef PM_TAR_TEST_H
#define PM_TAR_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* len - 1 octal digits and a NUL (v must fit) */
static inline void put_octal(unsigned char *f, size_t len, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%0*llo", (int)len - 1, (unsigned long long)v);
	memcpy(f, buf, len);
}

/* The header's checksum, after a change. */
static inline void resum(unsigned char *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

/* A ustar header for name and size (base-256 when big256), checksum set. */
static inline void header(unsigned char *h, const char *name, uint64_t size, bool big256)
{
	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	put_octal(h + 100, 8, 0644);
	put_octal(h + 108, 8, 0);
	put_octal(h + 116, 8, 0);
	if (big256) {
		h[124] = 0x80;
		for (int i = 11; i > 0; i--, size >>= 8)
			h[124 + i] = (unsigned char)size;
	} else {
		put_octal(h + 124, 12, size);
	}
	put_octal(h + 136, 12, 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	resum(h);
}

#endif
