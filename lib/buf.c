// SPDX-License-Identifier: MIT
/*
 * Pinned buffers: allocate (map, fault in, pin, register with the copy
 * backend) and free in the reverse order.  A context keeps its live buffers
 * in a list, so pm_buf_free() recognises a buffer that is not live (double
 * free, foreign pointer) without touching it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "buf.h"
#include "numa.h"

#define BUF_FLAGS (PM_BUF_STRICT_PIN | PM_BUF_STRICT_PAGES | PM_BUF_NO_BACKEND)

void pm_buf_add_note(struct pm_buf *b, const char *fmt, ...)
{
	size_t used = strlen(b->note);
	va_list ap;

	if (used && used + 2 < sizeof(b->note)) {
		memcpy(b->note + used, "; ", 3);
		used += 2;
	}
	va_start(ap, fmt);
	vsnprintf(b->note + used, sizeof(b->note) - used, fmt, ap);
	va_end(ap);
}

/* Pin, measure and register b->ptr/b->size; on error nothing stays done. */
static int make_ready(struct pm_ctx *ctx, struct pm_buf *b,
		      const struct pm_buf_opts *o)
{
	struct pm_backend *be = ctx->backend;
	char sz[32], detail[sizeof(be->err)];
	int r;

	r = pm_pin(ctx, b, o->pin, o->flags & PM_BUF_STRICT_PIN);
	if (r)
		return r;
	if (b->pin != PM_PIN_MODULE)
		b->huge_bytes = b->pages == PM_PAGES_HUGETLB ? b->size :
				pm_smaps_huge_bytes(b->ptr, b->size);
	if (be && !(o->flags & PM_BUF_NO_BACKEND)) {
		r = be->ops->register_host(be, b->ptr, b->size);
		if (r) {
			pm_unpin(ctx, b);
			return pm_ctx_error(ctx, r, "registering %s with the %s backend failed: %s",
					    pm_fmt_bytes(sz, sizeof(sz), b->size), be->ops->name,
					    pm_backend_last_error(be, detail, sizeof(detail)));
		}
		b->backend_registered = true;
	}
	return 0;
}

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
	char sz[32];
	int r;

	r = pm_fault_in_on(b->ptr, b->size, b->step,
			   pm_fault_threads(ctx, b->size, o->fault_threads), cpus);
	if (r)
		r = pm_ctx_error(ctx, r, "faulting in %s at %p failed: %s",
				 pm_fmt_bytes(sz, sizeof(sz), b->size), b->ptr, strerror(-r));
	else
		r = make_ready(ctx, b, o);
	if (r) {
		pm_pages_unmap(b);
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
	if (!size)
		r = pm_ctx_error(ctx, -EINVAL, "pm_buf_alloc: size is zero");
	else
		r = pm_pages_map(ctx, b, size, o->pages, o->flags & PM_BUF_STRICT_PAGES);
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
		pm_pages_unmap(b);
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

/* Undo a live, unlinked buffer in reverse order. */
void pm_buf_release(struct pm_buf *b)
{
	struct pm_ctx *ctx = b->ctx;

	if (b->backend_registered)
		ctx->backend->ops->unregister_host(ctx->backend, b->ptr);
	pm_unpin(ctx, b);
	pm_pages_unmap(b);
	pm_buf_forget(b);
}

void pm_buf_forget(struct pm_buf *b)
{
	struct pm_uring_reg *reg;

	while ((reg = b->rings)) {
		b->rings = reg->next;
		free(reg);
	}
	free(b);
}

int pm_buf_free(struct pm_ctx *ctx, struct pm_buf *buf)
{
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
	pm_buf_release(buf);
	return 0;
}

void *pm_buf_ptr(const struct pm_buf *buf)
{
	return buf->ptr;
}

size_t pm_buf_size(const struct pm_buf *buf)
{
	return buf->size;
}

enum pm_pin_mode pm_buf_pin_mode(const struct pm_buf *buf)
{
	return buf->pin;
}

enum pm_page_kind pm_buf_page_kind(const struct pm_buf *buf)
{
	return buf->pages;
}

uint64_t pm_buf_huge_bytes(const struct pm_buf *buf)
{
	return buf->huge_bytes;
}

uint64_t pm_buf_segments(const struct pm_buf *buf)
{
	return buf->segments;
}

int pm_buf_numa_node(const struct pm_buf *buf)
{
	return buf->numa_node;
}

bool pm_buf_backend_registered(const struct pm_buf *buf)
{
	return buf->backend_registered;
}

const char *pm_buf_note(const struct pm_buf *buf)
{
	return buf->note;
}

const char *pm_pin_mode_name(enum pm_pin_mode mode)
{
	static const char *const names[] = { "auto", "module", "mlock", "none" };

	return (unsigned int)mode <= PM_PIN_NONE ? names[mode] : "unknown";
}

const char *pm_page_kind_name(enum pm_page_kind kind)
{
	static const char *const names[] = { "default", "thp", "hugetlb" };

	return (unsigned int)kind <= PM_PAGES_HUGETLB ? names[kind] : "unknown";
}
