// SPDX-License-Identifier: MIT
/*
 * crc32c with the SSE4.2 instruction where the CPU has it and a
 * slice-by-8 table otherwise.  Both give the standard check value
 * crc32c("123456789") = 0xe3069283.
 */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u	/* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1)));
		table[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				      table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	pthread_once(&table_once, table_init);
	while (len && ((uintptr_t)p & 7)) {
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= crc;
		crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^
		      table[5][(v >> 16) & 0xff] ^ table[4][(v >> 24) & 0xff] ^
		      table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
		      table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t pm_crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc32c_hw(crc, buf, len);
#endif
	return ~crc32c_sw(crc, buf, len);
}

uint32_t pm_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32c_sw(~crc, buf, len);
}
