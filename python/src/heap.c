// SPDX-License-Identifier: MIT
/*
 * pinmem._pinmem.keep_heap(slot_bytes): make a loader worker's malloc keep
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
 * lower than glibc would make it, and up to two slots (at least glibc's own
 * ceiling, 64 MiB) stay free on top of each arena's heap between batches.
 * What is kept is at most what the worker used at its peak anyway.
 *
 * The user's own settings win: nothing is changed when MALLOC_TRIM_THRESHOLD_,
 * MALLOC_MMAP_THRESHOLD_ or a glibc.malloc tunable for either is set, or
 * when malloc is not glibc 2.33's or later (another C library, a sanitizer's
 * or a preloaded allocator, which glibc's mallopt would not reach).  Returns
 * whether the settings changed.
 */
#include "pinmem_py.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* nested: where __GLIBC__ is not defined, neither is __GLIBC_PREREQ */
#ifdef __GLIBC__
#if __GLIBC_PREREQ(2, 33)
#define PMPY_GLIBC_MALLOC
#endif
#endif

#ifdef PMPY_GLIBC_MALLOC
#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <malloc.h>

/* glibc's DEFAULT_MMAP_THRESHOLD_MAX: where its adaptive threshold stops. */
#define PMPY_MMAP_THRESHOLD ((long long)(sizeof(long) == 8 ? 32 << 20 : 512 << 10))

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
 * preloaded allocator): a block malloc gives must show in glibc's own
 * accounting, asked of libc itself (an allocator may bring its own
 * mallinfo2).  Comparing addresses is no test: a non-PIE python3 makes its
 * PLT entry the canonical malloc.  Tried three times: another thread's free
 * between the two counts can hide the block.
 */
static bool glibc_malloc(void)
{
	const size_t probe = 64 * 1024;
	void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
	struct mallinfo2 (*info)(void);
	bool own = false;

	if (!libc)
		return false;
	info = (struct mallinfo2 (*)(void))dlsym(libc, "mallinfo2");
	for (int i = 0; info && !own && i < 3; i++) {
		struct mallinfo2 a = info(), b;
		/* volatile: a malloc whose block is never used may be elided with its free */
		char *volatile p = malloc(probe);

		if (!p)
			break;
		b = info();
		free(p);
		/* mmapped (hblkhd) if someone set a threshold under the probe */
		own = b.uordblks + b.hblkhd >= a.uordblks + a.hblkhd + probe;
	}
	dlclose(libc);
	return own;
}

static bool keep(long long slot)
{
	long long trim = slot > INT_MAX / 2 ? INT_MAX : 2 * slot;

	if (trim < 2 * PMPY_MMAP_THRESHOLD)
		trim = 2 * PMPY_MMAP_THRESHOLD;
	/* glibc never refuses either value */
	return !user_tuned() && glibc_malloc() &&
	       mallopt(M_MMAP_THRESHOLD, (int)PMPY_MMAP_THRESHOLD) == 1 &&
	       mallopt(M_TRIM_THRESHOLD, (int)trim) == 1;
}
#else
static bool keep(long long slot)
{
	return false;
}
#endif

PyObject *pmpy_keep_heap(PyObject *self, PyObject *arg)
{
	long long slot = PyLong_AsLongLong(arg);

	if (slot == -1 && PyErr_Occurred())
		return NULL;
	if (slot <= 0) {
		PyErr_Format(PyExc_ValueError, "keep_heap: slot_bytes must be positive, not %lld", slot);
		return NULL;
	}
	return PyBool_FromLong(keep(slot));
}
