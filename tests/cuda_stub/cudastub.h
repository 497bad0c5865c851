/* SPDX-License-Identifier: MIT */
/*
 * Control side of the test-only CUDA runtime stand-in (cudart_stub.c).  The
 * stand-in implements the runtime calls lib/backend_cuda.c makes, with the
 * real prototypes from cuda_runtime_api.h, on ordinary memory; it logs every
 * call in order, can fail the Nth call of a function with a chosen error, and
 * can hold copies pending so tests see events before and after completion.
 * Tests dlopen the same path libpinmem loads and dlsym these functions.
 */
#ifndef CUDASTUB_H
#define CUDASTUB_H

#include <stddef.h>

struct cudastub_call {
	char fn[40];		/* "cudaHostRegister", or a cudastub_mark() label */
	const void *a;		/* first pointer argument (ptr, dst, event) */
	const void *b;		/* second (src, stream) */
	size_t len;
	unsigned int flags;	/* flags or kind argument, device ordinal */
	int ret;		/* cudaError_t returned */
};

/* Forget everything; devices present, or count_err from cudaGetDeviceCount. */
typedef void cudastub_reset_fn(int devices, int count_err);
/* The nth call (1 = next) of fn returns err without doing anything. */
typedef void cudastub_fail_fn(const char *fn, int nth, int err);
/* Hold copies pending (1) until cudastub_complete() or a synchronize. */
typedef void cudastub_hold_fn(int on);
typedef void cudastub_complete_fn(void);
/* Add a label to the call log (e.g. "mlock" from a test's system calls). */
typedef void cudastub_mark_fn(const char *label);
typedef int cudastub_log_count_fn(void);
typedef const struct cudastub_call *cudastub_log_at_fn(int i);
/* Index of the first entry fn at or after from, -1 if none. */
typedef int cudastub_find_fn(const char *fn, int from);
/* Live objects: "registrations", "allocs", "events", "streams", "unregistered_copies". */
typedef int cudastub_count_fn(const char *what);

#endif /* CUDASTUB_H */
