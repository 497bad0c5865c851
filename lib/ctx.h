/* SPDX-License-Identifier: MIT */
/*
 * Internal view of a context: what this machine offers, the copy backend
 * and the live buffers it owns, and the last error of each thread.  The
 * files below it (buffers, pinning, pages, refusals, backends) get what
 * they need from it as arguments and never include this header.
 */
#ifndef PM_CTX_H
#define PM_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>
#include <stdint.h>

#include "backend.h"
#include "buf.h"
#include "fault.h"
#include "fmt.h"
#include "pinmem.h"
#include "sys.h"
#include "uapi/pinmem.h"

struct pm_ctx {
	const struct pm_sys_ops *sys;
	int dev_fd;			/* -1: no module */
	struct pinmem_version ver;
	size_t page_size;
	struct pm_backend *backend;	/* NULL: PM_BACKEND_NONE */
	const char *backend_name;
	bool uring, thp, hugetlb;
	uint64_t hugetlb_page_size, hugetlb_free_pages;
	unsigned int cpus;
	pid_t pid;			/* the process that opened it; a forked child may not use it */
	int gpu_node;			/* NUMA node of the cuda device, -1 unknown or none */

	uint64_t serial;		/* unique per pm_open: files each thread's sentence */
	pthread_mutex_t lock;		/* bufs */
	struct pm_buf *bufs;		/* live buffers, newest first */
	char module_note[192];
	char backend_note[640];
	char numa_note[192];		/* why gpu_node is -1, "" otherwise */
};

/* pm_open with other system calls (tests). */
int pm_open_sys(struct pm_ctx **ctxp, const struct pm_open_opts *opts,
		const struct pm_sys_ops *sys);

/* Record the sentence for pm_ctx_last_error(); returns err (negative). */
int pm_ctx_error(struct pm_ctx *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * 0, or -ECHILD with the sentence recorded when called in a process forked
 * after pm_open: the child has no slot mappings (MADV_DONTFORK), no library
 * threads and no CUDA state, and its calls would corrupt the parent's.
 */
int pm_ctx_check_owner(struct pm_ctx *ctx, const char *call);
/* True in a process forked after pm_open (no sentence). */
bool pm_ctx_forked(const struct pm_ctx *ctx);

/* What the context's buffers are made and undone with. */
void pm_ctx_buf_env(const struct pm_ctx *ctx, struct pm_buf_env *env);
void pm_ctx_page_sizes(const struct pm_ctx *ctx, struct pm_page_sizes *ps);

/* Threads to fault len bytes with: asked, or one per 64 MiB up to the CPUs. */
static inline unsigned int pm_fault_threads(const struct pm_ctx *ctx, size_t len,
					    unsigned int asked)
{
	return pm_fault_threads_for(ctx->cpus, len, asked);
}

/*
 * The sentence for a failed PIN of len bytes through the context's module
 * (see pm_refusal_module), recorded; returns the errno.
 */
int pm_refuse_module(struct pm_ctx *ctx, int err, size_t len,
		     const struct pinmem_stats *before, uint32_t reason);
/* The sentence for a failed mlock of len bytes, recorded; returns the errno. */
int pm_refuse_mlock(struct pm_ctx *ctx, int err, size_t len);

/* Record an event on a caller's stream; the error goes to the context.  Any thread. */
int pm_event_record_on(struct pm_ctx *ctx, void *stream, uint64_t *ev);
/* Order a caller's stream after ev; the error goes to the context.  Any thread. */
int pm_event_stream_wait(struct pm_ctx *ctx, void *stream, uint64_t ev);

#endif /* PM_CTX_H */
