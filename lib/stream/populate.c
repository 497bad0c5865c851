// SPDX-License-Identifier: MIT
/* Windows through which cold runs are populated (populate.h). */
#include <errno.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "populate.h"

/* 1 when the page holding addr is in the page cache, 0 when not, -errno. */
static int resident(const char *addr, uint64_t pg)
{
	unsigned char v = 0;

	/* mincore of a file mapping answers from the page cache, reading nothing */
	if (mincore((void *)((uintptr_t)addr & ~(uintptr_t)(pg - 1)), 1, &v))
		return -errno;
	return v & 1;
}

bool pm_cached_byte(int fd, uint64_t off)
{
	char c;
	struct iovec v = { .iov_base = &c, .iov_len = 1 };

	return preadv2(fd, &v, 1, (off_t)off, RWF_NOWAIT) == 1;
}

static void unmap(struct pm_popwin *w)
{
	if (w->addr)
		munmap(w->addr, w->len);
	w->addr = NULL;
	w->len = 0;
}

/* A free or the least recently used idle window; NULL when all are busy. */
static struct pm_popwin *victim(struct pm_popwins *ws)
{
	struct pm_popwin *v = NULL;

	for (uint32_t i = 0; i < PM_POPULATE_WINDOWS; i++) {
		struct pm_popwin *w = &ws->w[i];

		if (!w->addr)
			return w;
		if (!w->inflight && (!v || w->used < v->used))
			v = w;
	}
	return v;
}

/* Map the window for [start, end) in place of w, which is unmapped only once that worked. */
static int map(struct pm_popwin *w, uint32_t path, int fd, uint64_t eof,
	       uint64_t start, uint64_t end)
{
	uint64_t a = start & ~(PM_POPULATE_WINDOW - 1);
	uint64_t e = (end + PM_POPULATE_WINDOW - 1) & ~(PM_POPULATE_WINDOW - 1);
	char *m;

	if (e > eof)
		e = eof;	/* a page wholly past the end of the file would be SIGBUS */
	m = mmap(NULL, e - a, PROT_READ, MAP_SHARED, fd, (off_t)a);
	if (m == MAP_FAILED)
		return -errno;
	/* without huge folios the fault path reads around the fault, before the run too */
	if (madvise(m, e - a, MADV_HUGEPAGE) || madvise(m, e - a, MADV_DONTFORK)) {
		int err = -errno;

		munmap(m, e - a);
		return err;
	}
	unmap(w);
	w->path = path;
	w->off = a;
	w->addr = m;
	w->len = e - a;
	w->inflight = 0;
	return 0;
}

int pm_popwin_get(struct pm_popwins *ws, uint32_t path, int fd, uint64_t size,
		  uint64_t start, uint64_t end, struct pm_popwin **win,
		  uint64_t *pstart, uint64_t *pend)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t eof = (size + pg - 1) & ~(pg - 1);
	struct pm_popwin *w = NULL;
	int r0, r1, ret;

	if (start >= end || end > size)
		return -EINVAL;
	for (uint32_t i = 0; i < PM_POPULATE_WINDOWS && !w; i++) {
		struct pm_popwin *x = &ws->w[i];

		if (x->addr && x->path == path && x->off <= start && end <= x->off + x->len)
			w = x;
	}
	if (!w) {
		w = victim(ws);
		if (!w)
			return -EBUSY;
		ret = map(w, path, fd, eof, start, end);
		if (ret)
			return ret;
	}
	w->used = ++ws->clock;
	r0 = resident(w->addr + (start - w->off), pg);
	r1 = resident(w->addr + (end - 1 - w->off), pg);
	if (r0 < 0 || r1 < 0)
		return r0 < 0 ? r0 : r1;
	/*
	 * mincore tells the truth only to the file's owner or someone who may
	 * write it; to anyone else every page looks resident (Linux 5.0).  A
	 * read that must not block confirms it: for a cached page it reads
	 * nothing from the disk.
	 */
	if (r0 && r1 && pm_cached_byte(fd, start))
		return 0;
	*win = w;
	*pstart = start & ~(uint64_t)(PM_POPULATE_ALIGN - 1);
	*pend = (end + PM_POPULATE_ALIGN - 1) & ~(uint64_t)(PM_POPULATE_ALIGN - 1);
	if (*pstart < w->off)
		*pstart = w->off;
	if (*pend > w->off + w->len)
		*pend = w->off + w->len;
	return 1;
}

void pm_popwins_release(struct pm_popwins *ws)
{
	for (uint32_t i = 0; i < PM_POPULATE_WINDOWS; i++)
		unmap(&ws->w[i]);
}
