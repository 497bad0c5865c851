// SPDX-License-Identifier: MIT
/*
 * pinmem._pinmem.keep_heap(batch_bytes): make a loader worker's malloc keep
 * the memory of a batch's samples for the next batch.
 *
 * A worker builds batch after batch of samples of about the same size:
 * allocated by the dataset, copied into the ring, freed.  glibc's malloc
 * serves allocations over 128 KiB with mmap until one is freed, then from
 * the heap, but gives the heap's free top back to the kernel whenever it
 * exceeds twice the largest freed block, which a whole batch's samples do:
 * every batch then faults its samples' pages in again and has them zeroed.
 * Here allocations under a batch (at most glibc's 32 MiB ceiling) come from
 * the heap, and up to two batches of free top are kept.  What is kept is
 * what the worker used anyway at each batch's peak; only the valleys
 * between batches stay filled.
 *
 * The user's own settings win: nothing is changed when MALLOC_TRIM_THRESHOLD_,
 * MALLOC_MMAP_THRESHOLD_ or a glibc.malloc tunable for either is set, or
 * when the C library is not glibc.  Returns whether the settings changed.
 */
#include "pinmem_py.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>

/* glibc refuses an M_MMAP_THRESHOLD above HEAP_MAX_SIZE / 2: 32 MiB on 64-bit. */
#define PMPY_MMAP_THRESHOLD_MAX ((long long)4 * 1024 * 1024 * (long long)sizeof(long))
#define PMPY_MMAP_THRESHOLD_MIN (128 * 1024)

static bool user_tuned(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	if (getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_MMAP_THRESHOLD_"))
		return true;
	return t && (strstr(t, "glibc.malloc.trim_threshold") ||
		     strstr(t, "glibc.malloc.mmap_threshold"));
}

static int clamp_int(long long v, long long lo, long long hi)
{
	return (int)(v < lo ? lo : v > hi ? hi : v);
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
	if (!user_tuned() &&
	    mallopt(M_MMAP_THRESHOLD, clamp_int(batch, PMPY_MMAP_THRESHOLD_MIN,
						PMPY_MMAP_THRESHOLD_MAX)) &&
	    mallopt(M_TRIM_THRESHOLD, clamp_int(2 * batch, PMPY_MMAP_THRESHOLD_MIN, INT_MAX)))
		Py_RETURN_TRUE;
#endif
	Py_RETURN_FALSE;
}
