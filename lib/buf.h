/* SPDX-License-Identifier: MIT */
/*
 * Internal view of a buffer, and the steps pm_buf_alloc() is made of:
 * map pages (pages.c), fault them in (fault.c), pin (pin.c, with refusal
 * sentences from refusal.c), register with the copy backend (buf.c).
 */
#ifndef PM_BUF_H
#define PM_BUF_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

struct pm_uring_reg {
	struct pm_uring_reg *next;
	struct io_uring *ring;
};

struct pm_buf {
	struct pm_buf *next;		/* ctx->bufs, under ctx->lock */
	struct pm_ctx *ctx;
	void *map;			/* what pm_pages_unmap() unmaps; NULL in place */
	size_t map_len;
	void *ptr;
	size_t size;
	size_t step;			/* bytes per page of the mapping */
	enum pm_pin_mode pin;
	enum pm_page_kind pages;
	uint64_t handle;		/* module region, 0 if none */
	uint64_t huge_bytes;
	uint64_t segments;
	bool backend_registered;
	int numa_node;			/* node of its first page when placed, else -1 */
	struct pm_uring_reg *rings;	/* under ctx->lock */
	char note[256];
};

/* Append a sentence to b->note ("; " between sentences). */
void pm_buf_add_note(struct pm_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Undo a live buffer already unlinked from its context, in reverse order. */
void pm_buf_release(struct pm_buf *b);
/* Free only the bookkeeping of an unlinked buffer (in a forked child). */
void pm_buf_forget(struct pm_buf *b);

/* Map >= size bytes of the page kind asked, stepping down unless strict. */
int pm_pages_map(struct pm_ctx *ctx, struct pm_buf *b, size_t size,
		 enum pm_page_kind want, bool strict);
void pm_pages_unmap(struct pm_buf *b);
/* Bytes of [ptr, ptr + len) that /proc/self/smaps shows as huge pages. */
uint64_t pm_smaps_huge_bytes(const void *ptr, size_t len);

/* Threads to fault len bytes with: asked, or one per 64 MiB up to the CPUs. */
unsigned int pm_fault_threads(const struct pm_ctx *ctx, size_t len,
			      unsigned int asked);
/* Write-fault every page of [ptr, ptr + len) without changing its bytes. */
int pm_fault_in(void *ptr, size_t len, size_t step, unsigned int threads);
/* The same with the threads on cpus (NULL: anywhere). */
int pm_fault_in_on(void *ptr, size_t len, size_t step, unsigned int threads,
		   const cpu_set_t *cpus);

/* Pin b->ptr/b->size with the best mode allowed; sets b->pin. */
int pm_pin(struct pm_ctx *ctx, struct pm_buf *b, enum pm_pin_mode want,
	   bool strict);
void pm_unpin(struct pm_ctx *ctx, struct pm_buf *b);

/*
 * The sentence for a failed PIN of len bytes.  reason is pinmem_pin.refused
 * as the module wrote it back (PINMEM_REFUSED_*, ABI 1.1), or 0 from an
 * older module: then, with before (STATS taken just before the PIN), a
 * budget errno whose refusal counter did not move is reported as the
 * failure it was (the module's ENOMEM also means "out of memory", not only
 * RLIMIT_MEMLOCK).  Use and limit come from STATS.
 */
int pm_refuse_module(struct pm_ctx *ctx, int err, size_t len,
		     const struct pinmem_stats *before, uint32_t reason);
/* The sentence for a failed mlock of len bytes. */
int pm_refuse_mlock(struct pm_ctx *ctx, int err, size_t len);

#endif /* PM_BUF_H */
