// SPDX-License-Identifier: MIT
/*
 * Sizes as operators type them ("512M", "64G", "10%") and as pinctl prints
 * them ("1.5 GiB").  Binary units throughout: a limit of 64G is 64 GiB.
 * Arithmetic is done in 128 bits so that overflow is detected, never wrapped.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "pinctl.h"

typedef unsigned __int128 u128;

static const char units[] = "KMGTPE";

/* Multiplier of a unit suffix, or 0 if @s is not one. */
static uint64_t suffix_mult(const char *s, bool *percent)
{
	const char *u;
	uint64_t mult = 1;

	*percent = false;
	if (!*s || !strcasecmp(s, "b"))
		return 1;
	if (!strcmp(s, "%")) {
		*percent = true;
		return 1;
	}
	u = strchr(units, s[0] >= 'a' && s[0] <= 'z' ? s[0] - 'a' + 'A' : s[0]);
	if (!u || !s[0])
		return 0;
	for (const char *p = units; p <= u; p++)
		mult <<= 10;
	s++;
	/* K, KB, KiB (any case) all mean 1024 */
	if (*s == 'i' || *s == 'I')
		s++;
	if (*s == 'b' || *s == 'B')
		s++;
	return *s ? 0 : mult;
}

int pctl_parse_size(const char *s, uint64_t mem_total, uint64_t *bytes)
{
	uint64_t ip = 0, frac = 0, fscale = 1, mult;
	bool percent, digits = false;
	const char *p = s;
	u128 v;

	if (!s || !*s)
		return -EINVAL;
	if (!strcasecmp(s, "unlimited")) {
		*bytes = PCTL_UNLIMITED;
		return 0;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (ip > (UINT64_MAX - d) / 10)
			return -ERANGE;
		ip = ip * 10 + d;
		digits = true;
	}
	if (*p == '.') {
		p++;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (fscale >= 1000000000ULL)
				return -EINVAL;	/* more precision than bytes have */
			frac = frac * 10 + (uint64_t)(*p - '0');
			fscale *= 10;
			digits = true;
		}
	}
	if (!digits)
		return -EINVAL;
	mult = suffix_mult(p, &percent);
	if (!mult)
		return -EINVAL;

	if (percent) {
		if (!mem_total)
			return -EINVAL;
		v = (u128)ip * fscale + frac;		/* percent * fscale */
		if (v > (u128)100 * fscale)
			return -ERANGE;
		v = v * mem_total / ((u128)100 * fscale);
	} else {
		v = (u128)ip * mult;
		if (frac) {
			u128 f = (u128)frac * mult;

			if (f % fscale)
				return -EINVAL;	/* a fraction of a byte */
			v += f / fscale;
		}
	}
	if (v >= (u128)UINT64_MAX)
		return -ERANGE;	/* UINT64_MAX means unlimited: say so instead */
	*bytes = (uint64_t)v;
	return 0;
}

char *pctl_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = {
		"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
	};
	unsigned int u = 0;
	u128 tenths;

	if (bytes == PCTL_UNLIMITED) {
		snprintf(buf, len, "unlimited");
		return buf;
	}
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (u + 1 < 6 && bytes >= (1ULL << (10 * (u + 2))))
		u++;
	if (!(bytes & ((1ULL << (10 * (u + 1))) - 1))) {
		snprintf(buf, len, "%llu %s",
			 (unsigned long long)(bytes >> (10 * (u + 1))), names[u]);
		return buf;
	}
	/* one decimal, rounded to nearest; 1023.96 MiB becomes 1.0 GiB */
	tenths = ((u128)bytes * 10 + (1ULL << (10 * (u + 1) - 1))) >> (10 * (u + 1));
	if (tenths >= 10240 && u + 1 < 6) {
		u++;
		tenths = ((u128)bytes * 10 + (1ULL << (10 * (u + 1) - 1))) >> (10 * (u + 1));
	}
	snprintf(buf, len, "%llu.%llu %s", (unsigned long long)(tenths / 10),
		 (unsigned long long)(tenths % 10), names[u]);
	return buf;
}
