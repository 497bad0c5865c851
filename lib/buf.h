/* SPDX-License-Identifier: MIT */
/*
 * A pinned buffer and the steps it is made of: map pages (pages.c), fault
 * them in (fault.c), pin (pin.c), register with the copy backend; undone in
 * the reverse order.  Everything these steps need from the buffer's owner,
 * the context, comes in as arguments (struct pm_buf_env): the context's
 * calls that create and free buffers are in ctx_buf.c, above this.
 */
#ifndef PM_BUF_H
#define PM_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "fault.h"
#include "pages.h"
#include "pin.h"

struct pm_ctx;

struct pm_uring_reg {
	struct pm_uring_reg *next;
	struct io_uring *ring;
};

#define PM_BUF_HUGE_UNKNOWN UINT64_MAX

struct pm_buf {
	struct pm_buf *next;		/* the owner's live buffers, under its lock */
	struct pm_ctx *ctx;		/* the owner, for its calls that take only a buffer */
	void *map;			/* what pm_pages_unmap() unmaps; NULL in place */
	size_t map_len;
	void *ptr;
	size_t size;
	size_t step;			/* bytes per page of the mapping */
	enum pm_page_kind pages;
	struct pm_pinned pinned;	/* how it is pinned */
	uint64_t huge_bytes;		/* PM_BUF_HUGE_UNKNOWN: not read yet */
	bool backend_registered;
	int numa_node;			/* node of its first page when placed, else -1 */
	struct pm_uring_reg *rings;	/* under the owner's lock */
	char note[256];
};

/* What making a buffer ready, and undoing it, need from its owner. */
struct pm_buf_env {
	struct pm_pinner pinner;
	struct pm_backend *backend;	/* NULL: PM_BACKEND_NONE */
};

/* Append a sentence to b->note ("; " between sentences). */
void pm_buf_add_note(struct pm_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Map >= size bytes for b (see pm_pages_map); step-downs go to b->note. */
int pm_buf_map(const struct pm_page_sizes *ps, struct pm_buf *b, size_t size,
	       enum pm_page_kind want, bool strict, char *err, size_t err_len);
/*
 * Pin (pin_mode, PM_BUF_STRICT_PIN in flags), measure and register
 * (unless PM_BUF_NO_BACKEND) b->ptr/b->size; on error nothing of it stays
 * done and err has the sentence.
 */
int pm_buf_make_ready(const struct pm_buf_env *env, struct pm_buf *b,
		      enum pm_pin_mode pin_mode, unsigned int flags, char *err, size_t err_len);
/* Undo a live buffer already unlinked from its owner, in reverse order, and free it. */
void pm_buf_release(const struct pm_buf_env *env, struct pm_buf *b);
/* Free only the bookkeeping of an unlinked buffer (in a forked child). */
void pm_buf_forget(struct pm_buf *b);

#endif /* PM_BUF_H */
