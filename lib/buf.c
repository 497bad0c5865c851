// SPDX-License-Identifier: MIT
/*
 * Pinned buffers: made ready (map, fault in, pin, register with the copy
 * backend) and undone in the reverse order, with what the owner gives;
 * and what a buffer says about itself.  The context's calls that allocate,
 * pin in place and free buffers are in ctx_buf.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fmt.h"

void pm_buf_add_note(struct pm_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pm_note_vadd(b->note, sizeof(b->note), fmt, ap);
	va_end(ap);
}

int pm_buf_map(const struct pm_page_sizes *ps, struct pm_buf *b, size_t size,
	       enum pm_page_kind want, bool strict, char *err, size_t err_len)
{
	struct pm_mapping m;
	int r;

	r = pm_pages_map(ps, size, want, strict, &m, b->note, sizeof(b->note), err, err_len);
	if (r)
		return r;
	b->map = b->ptr = m.map;
	b->map_len = b->size = m.len;
	b->step = m.step;
	b->pages = m.kind;
	return 0;
}

int pm_buf_make_ready(const struct pm_buf_env *env, struct pm_buf *b,
		      enum pm_pin_mode pin_mode, unsigned int flags, char *err, size_t err_len)
{
	struct pm_backend *be = env->backend;
	char sz[32], detail[sizeof(be->err)];
	int r;

	r = pm_pin(&env->pinner, b->ptr, b->size, pin_mode, flags & PM_BUF_STRICT_PIN,
		   &b->pinned, b->note, sizeof(b->note), err, err_len);
	if (r)
		return r;
	/* Otherwise only /proc/self/smaps says, and reading it takes ~12 ms in a
	 * process with torch's mappings: pm_buf_huge_bytes() reads it when asked. */
	if (b->pinned.mode == PM_PIN_MODULE)
		b->huge_bytes = b->pinned.huge_bytes;
	else if (b->pages == PM_PAGES_HUGETLB)
		b->huge_bytes = b->size;
	else
		b->huge_bytes = PM_BUF_HUGE_UNKNOWN;
	if (be && !(flags & PM_BUF_NO_BACKEND)) {
		r = be->ops->register_host(be, b->ptr, b->size);
		if (r) {
			pm_unpin(&env->pinner, b->ptr, b->size, &b->pinned);
			snprintf(err, err_len, "registering %s with the %s backend failed: %s",
				 pm_fmt_bytes(sz, sizeof(sz), b->size), be->ops->name,
				 pm_backend_last_error(be, detail, sizeof(detail)));
			return r;
		}
		b->backend_registered = true;
	}
	return 0;
}

void pm_buf_release(const struct pm_buf_env *env, struct pm_buf *b)
{
	if (b->backend_registered)
		env->backend->ops->unregister_host(env->backend, b->ptr);
	pm_unpin(&env->pinner, b->ptr, b->size, &b->pinned);
	pm_pages_unmap(b->map, b->map_len);
	b->map = NULL;
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
	return buf->pinned.mode;
}

enum pm_page_kind pm_buf_page_kind(const struct pm_buf *buf)
{
	return buf->pages;
}

uint64_t pm_buf_huge_bytes(const struct pm_buf *buf)
{
	uint64_t h = __atomic_load_n(&buf->huge_bytes, __ATOMIC_RELAXED);

	if (h == PM_BUF_HUGE_UNKNOWN) {
		/*
		 * Any thread may ask: racing readers store the same answer.  A
		 * smaps that could not be read is asked again next time (0 now).
		 */
		h = pm_smaps_huge_bytes(buf->ptr, buf->size);
		if (h == UINT64_MAX)
			return 0;
		__atomic_store_n(&((struct pm_buf *)buf)->huge_bytes, h, __ATOMIC_RELAXED);
	}
	return h;
}

uint64_t pm_buf_segments(const struct pm_buf *buf)
{
	return buf->pinned.segments;
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
