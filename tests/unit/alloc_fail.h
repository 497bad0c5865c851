/* SPDX-License-Identifier: MIT */
/*
 * Allocation failure on demand, for a test linked with UNIT_ALLOC_WRAP
 * (mk/05-stream.mk): with alloc_fail_at = n, the n-th malloc, calloc, realloc
 * or strdup from then on returns NULL, once.  Only calls made by the test
 * program and libpinmem.a are counted; libc's and cmocka's own are not.
 * Include it after cmocka.h.
 */
#ifndef PM_ALLOC_FAIL_H
#define PM_ALLOC_FAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "pinmem_stream.h"

static unsigned alloc_fail_at;	/* 0: nothing fails */

static bool alloc_fails(void)
{
	return alloc_fail_at && !--alloc_fail_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

void *__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return alloc_fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return alloc_fails() ? NULL : __real_strdup(s);
}

/*
 * add (pm_manifest_load or pm_manifest_add_tar) of path into m, with each
 * of its allocations failing in turn until it succeeds: every failure is
 * -ENOMEM with "out of memory" and name in err, and leaves m as it was.
 * Returns how many allocations failed.
 */
static unsigned each_allocation_fails(int (*add)(struct pm_manifest *, const char *, char *, size_t),
				      struct pm_manifest *m, const char *path, const char *name)
{
	size_t items = pm_manifest_count(m);
	uint32_t paths = pm_manifest_npaths(m);
	unsigned n;

	for (n = 1;; n++) {
		char err[512] = "";
		int ret;

		alloc_fail_at = n;
		ret = add(m, path, err, sizeof(err));
		alloc_fail_at = 0;
		if (!ret)
			return n - 1;
		assert_int_equal(ret, -ENOMEM);
		if (!strstr(err, "out of memory") || !strstr(err, name))
			fail_msg("allocation %u: err '%s'", n, err);
		assert_int_equal(pm_manifest_count(m), items);
		assert_int_equal(pm_manifest_npaths(m), paths);
	}
}

#endif
