// SPDX-License-Identifier: MIT
/*
 * A small streaming JSON writer.  Strings come from the kernel (process
 * names) and from user databases, so they are escaped completely: quotes,
 * backslashes and control characters, and bytes that are not valid UTF-8
 * become U+FFFD so that the output always parses.
 */
#include <inttypes.h>
#include <string.h>

#include "pinctl.h"

void pctl_json_init(struct pctl_json *j, FILE *f, bool pretty)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->pretty = pretty;
}

size_t pctl_utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* the second byte's range rules out overlongs, surrogates, > U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void pctl_json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		size_t n;

		switch (c) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\b':
			fputs("\\b", f);
			break;
		case '\f':
			fputs("\\f", f);
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				fprintf(f, "\\u%04x", c);
			} else if (c < 0x80) {
				fputc(c, f);
			} else if ((n = pctl_utf8_len(s))) {
				fwrite(s, 1, n, f);
				s += n;
				continue;
			} else {
				fputs("\\ufffd", f);
			}
		}
		s++;
	}
	fputc('"', f);
}

static void newline(struct pctl_json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Separator before a value or a key. */
static void prefix(struct pctl_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->need_comma)
		fputc(',', j->f);
	if (j->depth)
		newline(j);
	j->need_comma = true;
}

void pctl_json_key(struct pctl_json *j, const char *key)
{
	prefix(j);
	pctl_json_write_string(j->f, key);
	fputs(j->pretty ? ": " : ":", j->f);
	j->after_key = true;
}

static void open_(struct pctl_json *j, char c)
{
	prefix(j);
	fputc(c, j->f);
	j->depth++;
	j->need_comma = false;
}

static void close_(struct pctl_json *j, char c)
{
	j->depth--;
	if (j->need_comma)
		newline(j);
	fputc(c, j->f);
	j->need_comma = true;
}

void pctl_json_obj_begin(struct pctl_json *j)
{
	open_(j, '{');
}

void pctl_json_obj_end(struct pctl_json *j)
{
	close_(j, '}');
}

void pctl_json_arr_begin(struct pctl_json *j)
{
	open_(j, '[');
}

void pctl_json_arr_end(struct pctl_json *j)
{
	close_(j, ']');
}

void pctl_json_str(struct pctl_json *j, const char *s)
{
	prefix(j);
	pctl_json_write_string(j->f, s);
}

void pctl_json_u64(struct pctl_json *j, uint64_t v)
{
	prefix(j);
	fprintf(j->f, "%" PRIu64, v);
}

void pctl_json_i64(struct pctl_json *j, int64_t v)
{
	prefix(j);
	fprintf(j->f, "%" PRId64, v);
}

void pctl_json_bool(struct pctl_json *j, bool v)
{
	prefix(j);
	fputs(v ? "true" : "false", j->f);
}

void pctl_json_null(struct pctl_json *j)
{
	prefix(j);
	fputs("null", j->f);
}

void pctl_json_limit(struct pctl_json *j, uint64_t v)
{
	if (v == PCTL_UNLIMITED)
		pctl_json_null(j);
	else
		pctl_json_u64(j, v);
}

void pctl_json_done(struct pctl_json *j)
{
	fputc('\n', j->f);
	j->need_comma = false;
	j->after_key = false;
}
