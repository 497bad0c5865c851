/* SPDX-License-Identifier: MIT */
/*
 * Control side of the test-only CUDA runtime stand-in (cudart_stub.c).  The
 * stand-in implements the runtime calls lib/backend_cuda.c makes (and the
 * few driver calls of its device guard), with the real prototypes from
 * cuda_runtime_api.h and cuda.h, on ordinary memory, as strictly as the real
 * runtime where libpinmem could go wrong on a multi-GPU node:
 *
 * - a current device per thread (0 until set), and a stack of driver
 *   contexts pushed over it (cuCtxPushCurrent);
 * - a device's context is created by the first call that needs one with that
 *   device current (and by cudaSetDevice, as CUDA 12 does), so a test can
 *   assert that no context was ever created on a device;
 * - streams and events belong to the device current at their creation;
 *   cudaEventRecord of an event on another device than the stream's fails
 *   with cudaErrorInvalidResourceHandle, as the runtime does;
 * - every stream has a worker thread that runs its work later, in stream
 *   order: copies, event records, cudaStreamWaitEvent and a consumer
 *   "kernel" (cudastub_kernel_read) that reads device memory, so a copy that
 *   overwrites a buffer before the consumer read it is caught.
 *
 * Host memory counts as pinned for a device's copies and kernels only if
 * registered Portable or with that device current; device memory only on
 * its own device.  Built with -DCUDASTUB_NO_DRIVER it lacks the driver's
 * cuCtx* calls, like a runtime whose driver library cannot be found.
 *
 * It logs every call (and the calling process) in order, can fail the Nth call of a function with a
 * chosen error, and can hold the workers so tests see work pending.  Tests
 * dlopen the same path libpinmem loads and dlsym these functions.
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
	int dev;		/* the calling thread's current device */
	int pid;		/* the calling process (getpid) */
};

/* Forget everything; devices present, or count_err from cudaGetDeviceCount. */
typedef void cudastub_reset_fn(int devices, int count_err);
/* The nth call (1 = next) of fn returns err without doing anything. */
typedef void cudastub_fail_fn(const char *fn, int nth, int err);
/*
 * Hold the stream workers (1): queued work stays pending until released or
 * synchronized; 2: synchronizing calls (cudaEventSynchronize...) block
 * until it is released too, so a test sees a caller still waiting.
 */
typedef void cudastub_hold_fn(int on);
/* Copies queued from now on take at least us microseconds each (0: as fast as memcpy). */
typedef void cudastub_copy_delay_fn(unsigned int us);
/* Run everything queued so far (even while held) and wait for it. */
typedef void cudastub_complete_fn(void);
/* Add a label to the call log (e.g. "mlock" from a test's system calls). */
typedef void cudastub_mark_fn(const char *label);
typedef int cudastub_log_count_fn(void);
typedef const struct cudastub_call *cudastub_log_at_fn(int i);
/* Index of the first entry fn at or after from, -1 if none. */
typedef int cudastub_find_fn(const char *fn, int from);
/*
 * Live objects: "registrations", "allocs", "events", "streams",
 * "unregistered_copies", "pending_copies" (queued, not finished),
 * "context0".."context7" (1 once that device has a context),
 * "calls_on0".."calls_on7" (runtime calls made with that device current),
 * "retained0".."retained7" (primary context retains not yet released).
 */
typedef int cudastub_count_fn(const char *what);
/*
 * A consumer "kernel" on stream: after sleeping delay_us it copies len
 * bytes of device memory (or registered host memory) src to host memory
 * dst, when the stream reaches it.  Returns a cudaError_t (the stream must be on the current device).
 */
typedef int cudastub_kernel_read_fn(void *stream, void *dst, const void *src,
				    size_t len, unsigned int delay_us);

/* Calls logged by process pid; lock-free, for a forked child to ask. */
typedef int cudastub_calls_by_fn(int pid);

#endif /* CUDASTUB_H */
