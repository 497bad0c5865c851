// SPDX-License-Identifier: MIT
/*
 * The context's buffer calls: allocate (map, place on a NUMA node, fault
 * in, make ready), pin caller-owned memory in place, and free.  A context
 * keeps its live buffers in a list, so pm_buf_free() recognises a buffer
 * that is not live (double free, foreign pointer) without touching it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "buf.h"
#include "ctx.h"
#include "fmt.h"
#include "numa.h"

#define BUF_FLAGS (PM_BUF_STRICT_PIN | PM_BUF_STRICT_PAGES | PM_BUF_NO_BACKEND)

/* Checks shared by pm_buf_alloc and pm_buf_pin_inplace; a new buffer in *bp. */
static int begin(struct pm_ctx *ctx, const struct pm_buf_opts *o,
		 struct pm_buf **bufp, const char *call, struct pm_buf **bp)
{
	if (!bufp)
		return pm_ctx_error(ctx, -EINVAL, "%s: no place for the buffer", call);
	*bufp = NULL;
	if (o->flags & ~BUF_FLAGS)
		return pm_ctx_error(ctx, -EINVAL, "%s: unknown buffer flags 0x%x", call,
				    o->flags & ~BUF_FLAGS);
	if (o->reserved[0] || o->reserved[1] || o->reserved[2] || o->reserved[3])
		return pm_ctx_error(ctx, -EINVAL, "%s: reserved options must be zero", call);
	if (o->numa > PM_NUMA_NODE(PM_NUMA_MAX - 1))
		return pm_ctx_error(ctx, -EINVAL, "%s: NUMA choice %u: PM_NUMA_AUTO, PM_NUMA_NONE or PM_NUMA_NODE(n < %d)",
				    call, o->numa, PM_NUMA_MAX);
	if ((unsigned int)o->pin > PM_PIN_NONE)
		return pm_ctx_error(ctx, -EINVAL, "%s: unknown pin mode %d", call, (int)o->pin);
	if ((unsigned int)o->pages > PM_PAGES_HUGETLB)
		return pm_ctx_error(ctx, -EINVAL, "%s: unknown page kind %d", call,
				    (int)o->pages);
	*bp = calloc(1, sizeof(**bp));
	if (!*bp)
		return pm_ctx_error(ctx, -ENOMEM, "%s: out of memory", call);
	(*bp)->ctx = ctx;
	(*bp)->numa_node = -1;
	return 0;
}

/* Fault in (on cpus, NULL: anywhere), pin, register and link b; on error b is undone and freed. */
static int finish(struct pm_ctx *ctx, struct pm_buf *b, const struct pm_buf_opts *o,
		  const cpu_set_t *cpus, struct pm_buf **bufp)
{
	char sz[32], err[PM_SENTENCE_MAX];
	struct pm_buf_env env;
	int r;

	r = pm_fault_in_on(b->ptr, b->size, b->step,
			   pm_fault_threads(ctx, b->size, o->fault_threads), cpus);
	if (r) {
		r = pm_ctx_error(ctx, r, "faulting in %s at %p failed: %s",
				 pm_fmt_bytes(sz, sizeof(sz), b->size), b->ptr, strerror(-r));
	} else {
		pm_ctx_buf_env(ctx, &env);
		r = pm_buf_make_ready(&env, b, o->pin, o->flags, err, sizeof(err));
		if (r)
			r = pm_ctx_error(ctx, r, "%s", err);
	}
	if (r) {
		pm_pages_unmap(b->map, b->map_len);
		free(b);
		return r;
	}
	if (b->numa_node >= 0)
		b->numa_node = pm_numa_node_of(b->ptr);	/* where it landed */
	pthread_mutex_lock(&ctx->lock);
	b->next = ctx->bufs;
	ctx->bufs = b;
	pthread_mutex_unlock(&ctx->lock);
	*bufp = b;
	return 0;
}

/*
 * Prefer the NUMA node asked for (or the GPU's) for the unfaulted mapping;
 * *on_cpus when the node's CPUs are in *cpus for the faulting threads.  Only
 * an explicit node that cannot be used is an error.
 */
static int place(struct pm_ctx *ctx, struct pm_buf *b, const struct pm_buf_opts *o,
		 cpu_set_t *cpus, bool *on_cpus)
{
	int node = o->numa == PM_NUMA_AUTO ? ctx->gpu_node :
		   o->numa == PM_NUMA_NONE ? -1 : (int)(o->numa - PM_NUMA_NODE(0));
	int r;

	*on_cpus = false;
	/* a GPU whose node is unknown deserves a note; a machine without one does not */
	if (o->numa == PM_NUMA_AUTO && node < 0 && ctx->backend && ctx->backend->pci_bus_id[0])
		pm_buf_add_note(b, "not placed on a NUMA node: %s", ctx->numa_note);
	if (node < 0)
		return 0;
	r = pm_numa_place(b->map, b->map_len, node);
	if (r && o->numa != PM_NUMA_AUTO)
		return pm_ctx_error(ctx, r, "pm_buf_alloc: NUMA node %d: mbind: %s%s", node,
				    strerror(-r), r == -EINVAL ? " (no such node with memory?)" : "");
	if (r) {
		pm_buf_add_note(b, "not placed on the GPU's NUMA node %d: mbind: %s", node,
				strerror(-r));
		return 0;
	}
	b->numa_node = node;
	*on_cpus = !pm_numa_cpus(ctx->sys->root, node, cpus);
	return 0;
}

int pm_buf_alloc(struct pm_ctx *ctx, size_t size, const struct pm_buf_opts *opts,
		 struct pm_buf **bufp)
{
	static const struct pm_buf_opts defaults;
	const struct pm_buf_opts *o = opts ? opts : &defaults;
	struct pm_page_sizes ps;
	char err[PM_SENTENCE_MAX];
	struct pm_buf *b;
	cpu_set_t cpus;
	bool on_cpus;
	int r;

	if (!ctx)
		return -EINVAL;
	r = pm_ctx_check_owner(ctx, "pm_buf_alloc");
	if (r)
		return r;
	r = begin(ctx, o, bufp, "pm_buf_alloc", &b);
	if (r)
		return r;
	if (!size) {
		r = pm_ctx_error(ctx, -EINVAL, "pm_buf_alloc: size is zero");
	} else {
		pm_ctx_page_sizes(ctx, &ps);
		r = pm_buf_map(&ps, b, size, o->pages, o->flags & PM_BUF_STRICT_PAGES,
			       err, sizeof(err));
		if (r)
			r = pm_ctx_error(ctx, r, "%s", err);
	}
	if (r) {
		free(b);
		return r;
	}
	/*
	 * Before any page exists: a process forking later (DataLoader
	 * workers) neither copies pinned pages eagerly nor maps them at all.
	 */
	if (madvise(b->map, b->map_len, MADV_DONTFORK))
		pm_buf_add_note(b, "MADV_DONTFORK failed (%s): a fork copies this buffer",
				strerror(errno));
	r = place(ctx, b, o, &cpus, &on_cpus);
	if (r) {
		pm_pages_unmap(b->map, b->map_len);
		free(b);
		return r;
	}
	return finish(ctx, b, o, on_cpus ? &cpus : NULL, bufp);
}

int pm_buf_pin_inplace(struct pm_ctx *ctx, void *ptr, size_t len,
		       const struct pm_buf_opts *opts, struct pm_buf **bufp)
{
	static const struct pm_buf_opts defaults;
	const struct pm_buf_opts *o = opts ? opts : &defaults;
	uintptr_t a = (uintptr_t)ptr;
	struct pm_buf *b;
	int r;

	if (!ctx)
		return -EINVAL;
	r = pm_ctx_check_owner(ctx, "pm_buf_pin_inplace");
	if (r)
		return r;
	/* caller-owned memory keeps its fork behaviour (a shared ring workers write) */
	r = begin(ctx, o, bufp, "pm_buf_pin_inplace", &b);
	if (r)
		return r;
	if (o->pages != PM_PAGES_DEFAULT)
		r = pm_ctx_error(ctx, -EINVAL,
				 "pm_buf_pin_inplace: the page kind of caller-owned memory is the caller's; pass PM_PAGES_DEFAULT");
	else if (o->numa >= PM_NUMA_NODE(0))
		r = pm_ctx_error(ctx, -EINVAL,
				 "pm_buf_pin_inplace: caller-owned memory is not moved to a NUMA node; pass PM_NUMA_AUTO");
	else if (!ptr || !len)
		r = pm_ctx_error(ctx, -EINVAL, "pm_buf_pin_inplace: %s",
				 !ptr ? "pointer is NULL" : "length is zero");
	else if (a % ctx->page_size || len % ctx->page_size)
		r = pm_ctx_error(ctx, -EINVAL,
				 "pm_buf_pin_inplace: %p + %zu is not aligned to %zu-byte pages",
				 ptr, len, ctx->page_size);
	else if (a + len < a)
		r = pm_ctx_error(ctx, -EINVAL, "pm_buf_pin_inplace: %p + %zu wraps around",
				 ptr, len);
	if (r) {
		free(b);
		return r;
	}
	b->ptr = ptr;
	b->size = len;
	b->step = ctx->page_size;
	b->pages = PM_PAGES_DEFAULT;
	return finish(ctx, b, o, NULL, bufp);
}

int pm_buf_free(struct pm_ctx *ctx, struct pm_buf *buf)
{
	struct pm_buf_env env;
	struct pm_buf **pp;
	int r;

	if (!ctx)
		return -EINVAL;
	r = pm_ctx_check_owner(ctx, "pm_buf_free");
	if (r)
		return r;
	pthread_mutex_lock(&ctx->lock);
	for (pp = &ctx->bufs; *pp && *pp != buf; pp = &(*pp)->next)
		;
	if (!*pp || !buf) {
		pthread_mutex_unlock(&ctx->lock);
		return pm_ctx_error(ctx, -EINVAL,
				    "pm_buf_free: %p is not a live buffer of this context (freed twice?)",
				    (void *)buf);
	}
	if (buf->rings) {
		pthread_mutex_unlock(&ctx->lock);
		return pm_ctx_error(ctx, -EBUSY,
				    "pm_buf_free: the buffer is still registered with an io_uring; pm_buf_unregister_uring first");
	}
	*pp = buf->next;
	pthread_mutex_unlock(&ctx->lock);
	pm_ctx_buf_env(ctx, &env);
	pm_buf_release(&env, buf);
	return 0;
}
