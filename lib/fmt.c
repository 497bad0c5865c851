// SPDX-License-Identifier: MIT
/* Byte sizes and notes for the library's sentences (lib/fmt.h). */
#include <stdio.h>
#include <string.h>

#include "fmt.h"

static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

static unsigned int unit_of(uint64_t bytes)
{
	unsigned int u = 0;

	while (u < 6 && bytes >= (1024ULL << (10 * u)))
		u++;
	return u;
}

static double in_unit(uint64_t bytes, unsigned int u)
{
	return (double)bytes / (double)(1ULL << (10 * u));
}

char *pm_fmt_bytes(char *out, size_t len, uint64_t bytes)
{
	unsigned int u = unit_of(bytes);

	if (!u)
		snprintf(out, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(out, len, "%.1f %s", in_unit(bytes, u), units[u]);
	return out;
}

char *pm_fmt_use(char *out, size_t len, uint64_t used, uint64_t limit)
{
	unsigned int uu = unit_of(used), lu = unit_of(limit);
	char a[32], b[32];

	if (uu == lu && lu)
		snprintf(out, len, "%.1f of %.1f %s", in_unit(used, lu),
			 in_unit(limit, lu), units[lu]);
	else
		snprintf(out, len, "%s of %s", pm_fmt_bytes(a, sizeof(a), used),
			 pm_fmt_bytes(b, sizeof(b), limit));
	return out;
}

void pm_note_vadd(char *note, size_t len, const char *fmt, va_list ap)
{
	size_t used = strlen(note);

	if (used && used + 2 < len) {
		memcpy(note + used, "; ", 3);
		used += 2;
	}
	vsnprintf(note + used, len - used, fmt, ap);
}

void pm_note_add(char *note, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pm_note_vadd(note, len, fmt, ap);
	va_end(ap);
}
