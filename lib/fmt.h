/* SPDX-License-Identifier: MIT */
/*
 * Pieces of the sentences the library writes: byte sizes a person reads,
 * and notes appended one sentence after another.
 */
#ifndef PM_FMT_H
#define PM_FMT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Room for one sentence (a backend note of 640 bytes and its call). */
#define PM_SENTENCE_MAX	768

/* "8.0 GiB", "64.0 MiB", "512 B": one decimal, binary units. */
char *pm_fmt_bytes(char *out, size_t len, uint64_t bytes);
/* "30.5 of 32.0 GiB", or "12.0 MiB of 32.0 GiB" when the units differ. */
char *pm_fmt_use(char *out, size_t len, uint64_t used, uint64_t limit);
/* Append a sentence to note (of len bytes), "; " after what is there. */
void pm_note_add(char *note, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void pm_note_vadd(char *note, size_t len, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#endif /* PM_FMT_H */
