// SPDX-License-Identifier: MIT
/*
 * pinmem._pinmem.keep_heap(batch_bytes): make a loader worker's malloc keep
 * the memory of a batch's samples for the next batch.
 *
 * A worker builds batch after batch of samples of about the same size:
 * allocated by the dataset, copied into the ring, freed.  glibc's malloc
 * serves allocations over 128 KiB with mmap until one is freed, then raises
 * that threshold to the freed block's size and keeps up to twice it free on
 * top of the heap; a batch's freed samples exceed that, so the heap's top
 * goes back to the kernel after every batch and the next batch faults its
 * samples' pages in and has them zeroed again.  Here the mmap threshold
 * starts where glibc's adaptation ends (32 MiB on 64-bit), so it is never
 * lower than glibc would make it, and up to two batches (at least glibc's
 * own ceiling, 64 MiB) stay free on top of the heap between batches.  What
 * is kept is at most what the worker used at its peak anyway.
 *
 * The user's own settings win: nothing is changed when MALLOC_TRIM_THRESHOLD_,
 * MALLOC_MMAP_THRESHOLD_ or a glibc.malloc tunable for either is set, or
 * when malloc is not glibc's (another C library, a sanitizer's or a
 * preloaded allocator, which glibc's mallopt would not reach).  Returns
 * whether the settings changed.
 */
#include "pinmem_py.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>

/* mallinfo's int fields wrap past 2 GiB; mallinfo2 is glibc 2.33's */
#if __GLIBC_PREREQ(2, 33)
#define PMPY_MALLINFO mallinfo2
#else
#define PMPY_MALLINFO mallinfo
#endif

/* glibc's DEFAULT_MMAP_THRESHOLD_MAX: where its adaptive threshold stops. */
#define PMPY_MMAP_THRESHOLD (sizeof(long) == 8 ? 32 * 1024 * 1024 : 512 * 1024)

static bool user_tuned(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	if (getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_MMAP_THRESHOLD_"))
		return true;
	return t && (strstr(t, "glibc.malloc.trim_threshold") ||
		     strstr(t, "glibc.malloc.mmap_threshold"));
}

/*
 * Whether malloc is glibc's own, not interposed (by a sanitizer or a
 * preloaded allocator, which glibc's mallopt would not reach): a block
 * malloc gives must show in glibc's own accounting.  (Comparing addresses
 * is no test: a non-PIE python3 makes its PLT entry the canonical malloc.)
 */
static bool glibc_malloc(void)
{
	const size_t probe = 64 * 1024;	/* under any mmap threshold: from an arena */
	size_t before = PMPY_MALLINFO().uordblks, after;
	char *volatile p = malloc(probe);

	if (!p)
		return false;
	after = PMPY_MALLINFO().uordblks;
	free(p);
	return after >= before + probe;
}
#endif

PyObject *pmpy_keep_heap(PyObject *self, PyObject *arg)
{
	long long batch = PyLong_AsLongLong(arg);

	if (batch == -1 && PyErr_Occurred())
		return NULL;
	if (batch <= 0) {
		PyErr_Format(PyExc_ValueError, "keep_heap: batch_bytes must be positive, not %lld", batch);
		return NULL;
	}
#ifdef __GLIBC__
	{
		long long keep = batch > INT_MAX / 2 ? INT_MAX : 2 * batch;

		if (keep < 2 * (long long)PMPY_MMAP_THRESHOLD)
			keep = 2 * (long long)PMPY_MMAP_THRESHOLD;
		/* glibc never refuses either value */
		if (!user_tuned() && glibc_malloc() &&
		    mallopt(M_MMAP_THRESHOLD, (int)PMPY_MMAP_THRESHOLD) == 1 &&
		    mallopt(M_TRIM_THRESHOLD, (int)keep) == 1)
			Py_RETURN_TRUE;
	}
#endif
	Py_RETURN_FALSE;
}
