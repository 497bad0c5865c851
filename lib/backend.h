/* SPDX-License-Identifier: MIT */
/*
 * Copy backends: one small interface in front of "move bytes from pinned host
 * memory to the device".  cuda (lib/backend_cuda.c) uses the CUDA runtime,
 * loaded with dlopen; host (lib/backend_host.c) is a worker thread copying
 * into ordinary memory so the pipeline runs without a GPU.
 *
 * Every op returns 0 or -errno and is safe to call from any thread (each
 * backend serializes internally).  Copies run in submission order on one
 * queue (one non-blocking CUDA stream, one worker thread), so an event covers
 * its copy and every copy queued before it; record_on names the work queued
 * so far on a caller's stream instead.  An event id is never 0; it stays
 * valid until released, and a released or unknown id is -EINVAL.  The cuda
 * backend runs every CUDA call under its device guard (lib/backend_cuda.c).
 */
#ifndef PM_BACKEND_H
#define PM_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinmem.h"

struct pm_backend;

struct pm_backend_ops {
	const char *name;
	/* Make [ptr, ptr + len) usable for async copies (cudaHostRegister). */
	int (*register_host)(struct pm_backend *be, void *ptr, size_t len);
	/* Undo register_host of ptr. */
	int (*unregister_host)(struct pm_backend *be, void *ptr);
	int (*dev_alloc)(struct pm_backend *be, size_t len, void **devp);
	int (*dev_free)(struct pm_backend *be, void *dev);
	/*
	 * Queue a copy; if evp, record an event after it into *evp.  On
	 * failure nothing of the copy is left running (it no longer reads src).
	 */
	int (*copy_h2d)(struct pm_backend *be, void *dst, const void *src,
			size_t len, uint64_t *evp);
	/* Record an event covering the work queued so far on a caller's stream (cuda: cudaStream_t). */
	int (*record_on)(struct pm_backend *be, void *stream, uint64_t *evp);
	/* Make a caller's stream wait for ev without blocking (cuda); host: wait for ev. */
	int (*stream_wait)(struct pm_backend *be, void *stream, uint64_t ev);
	/* Synchronous device -> host copy after everything queued. */
	int (*copy_d2h)(struct pm_backend *be, void *dst, const void *src,
			size_t len);
	/* 1 done, 0 pending, -errno when a copy up to ev failed. */
	int (*event_query)(struct pm_backend *be, uint64_t ev);
	/* 0 when done, -errno when a copy up to ev failed. */
	int (*event_wait)(struct pm_backend *be, uint64_t ev);
	int (*event_release)(struct pm_backend *be, uint64_t ev);
	/* Wait for queued copies, free device memory and events, free be. */
	void (*destroy)(struct pm_backend *be);
};

/* Set by a backend's create; ops and the error detail live here. */
struct pm_backend {
	const struct pm_backend_ops *ops;
	pthread_mutex_t err_lock;
	/* Detail of the last failure (e.g. the CUDA error name), "" if none. */
	char err[160];
	/* The device's PCI address ("0000:41:00.0"), "" without a device. */
	char pci_bus_id[32];
	/* The CUDA device it copies to, -1 without one. */
	int cuda_device;
};

/* Set up and tear down the common part (a backend's create and destroy). */
void pm_backend_init(struct pm_backend *be, const struct pm_backend_ops *ops);
void pm_backend_fini(struct pm_backend *be);
/* Record the detail of a failure; returns err. */
int pm_backend_error(struct pm_backend *be, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Copy the last failure's detail into out. */
char *pm_backend_last_error(struct pm_backend *be, char *out, size_t len);

/* Options a backend create needs from pm_open_opts. */
struct pm_backend_cfg {
	const char *cuda_library;
	int cuda_device;
	const char *root;	/* prefix of the paths probed for a GPU, NULL: "" */
};

/*
 * Create the backend of that kind.  AUTO picks cuda when it works; else host
 * only when this machine has no NVIDIA GPU (pm_gpu_present), writing why into
 * note (may be NULL); a GPU that cuda cannot use fails AUTO with -ENODEV and
 * a sentence on where the runtime was looked for and how to point at one.
 * NONE sets *bep to NULL.  -EOPNOTSUPP: cuda asked for but not built in;
 * -ENODEV: no usable GPU or runtime (note says which).
 */
int pm_backend_create(enum pm_backend_kind kind, const struct pm_backend_cfg *cfg,
		      struct pm_backend **bep, char *note, size_t note_len);

int pm_backend_host_create(struct pm_backend **bep);

/*
 * Whether an NVIDIA GPU is installed, without the CUDA runtime: entries in
 * <root>/proc/driver/nvidia/gpus/ or a <root>/dev/nvidia0 device; what was
 * found goes to what (for sentences).
 */
bool pm_gpu_present(const char *root, char *what, size_t len);

/*
 * Only in builds with PM_HAVE_CUDA.  -ELIBACC when no usable CUDA runtime
 * could be loaded (pm_backend_create tells where to point it), -ENODEV when
 * the runtime loaded but says the GPU is not usable (note names its error).
 */
int pm_backend_cuda_create(const struct pm_backend_cfg *cfg,
			   struct pm_backend **bep, char *note, size_t note_len);

#endif /* PM_BACKEND_H */
