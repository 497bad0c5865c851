// SPDX-License-Identifier: MIT
/* Windows through which cold runs are populated (populate.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "populate.h"

/*
 * Linux 5.18 made a fault on a MADV_HUGEPAGE file mapping read a whole
 * 2 MiB folio (and gave XFS large folios).  Before, a fault read around
 * the page into 4 KiB pages, and with MADV_RANDOM only the page itself:
 * populating would read the run 4 KiB at a time.
 */
bool pm_populate_supported(const char *release)
{
	unsigned int major, minor;

	if (sscanf(release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor >= 18);
}

/*
 * Whether mincore tells this process about fd's page cache.  It does for
 * the file's owner and whoever may write it; to anyone else every page
 * looks resident (Linux 5.0).  A page past the end of the file is not
 * cached (but for a large folio across EOF, as tmpfs huge=always makes:
 * then this says no, which only costs the pagemap way): mapped, never
 * touched, and asked about, it tells which.
 */
static bool mincore_truthful(int fd, uint64_t eof, uint64_t pg)
{
	unsigned char v = 1;
	char *m = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, (off_t)eof);
	bool ok;

	if (m == MAP_FAILED)
		return false;
	ok = !mincore(m, pg, &v) && !(v & 1);
	munmap(m, pg);
	return ok;
}

/*
 * 1 when the page of window w holding addr is cached, else 0, reading
 * nothing from the file: mincore where it tells the truth; elsewhere
 * whether this window maps the page (/proc/self/pagemap's present bit);
 * -EACCES when pagemap cannot be read (an undumpable process, some
 * sandboxes): the caller reads without windows then, rather than populate
 * every run of every epoch.  A read that may not block (RWF_NOWAIT) would
 * start readahead of a cold page, in small folios, and could find it read
 * by the time it looks.
 */
static int resident(struct pm_popwins *ws, const struct pm_popwin *w,
		    const char *addr, uint64_t pg)
{
	uintptr_t page = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	unsigned char v = 0;
	uint64_t ent = 0;

	if (w->mincore_ok) {
		if (mincore((void *)page, 1, &v))
			return -errno;
		return v & 1;
	}
	if (!ws->pagemap_tried) {
		ws->pagemap_tried = true;
		ws->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	}
	if (ws->pagemap < 0 ||
	    pread(ws->pagemap, &ent, sizeof(ent), (off_t)(page / pg * sizeof(ent))) != sizeof(ent))
		return -EACCES;
	return (int)(ent >> 63);	/* present */
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
static int map(struct pm_popwin *w, uint32_t path, int fd, uint64_t eof, uint64_t pg,
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
	/*
	 * Without huge folios the fault path reads around the fault, before the
	 * run too.  MADV_RANDOM: a fault reads its own 2 MiB folio and nothing
	 * after it.  Otherwise it reads the next one as well, and the fault on
	 * that one starts async readahead into the next piece, which another
	 * io_uring worker is populating at the same time: where the two meet,
	 * readahead finds folios present and falls back to 4 KiB pages (6.1
	 * and 6.12 left 5-20% of an in-order XFS stream in them).
	 */
	if (madvise(m, e - a, MADV_HUGEPAGE) || madvise(m, e - a, MADV_RANDOM) ||
	    madvise(m, e - a, MADV_DONTFORK)) {
		int err = -errno;

		munmap(m, e - a);
		return err;
	}
	unmap(w);
	w->mincore_ok = mincore_truthful(fd, eof, pg);
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
		ret = map(w, path, fd, eof, pg, start, end);
		if (ret)
			return ret;
	}
	w->used = ++ws->clock;
	r0 = resident(ws, w, w->addr + (start - w->off), pg);
	r1 = resident(ws, w, w->addr + (end - 1 - w->off), pg);
	if (r0 < 0 || r1 < 0)
		return r0 < 0 ? r0 : r1;
	if (r0 && r1)
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

void pm_populated_mark(uint64_t **bm, uint64_t size, uint64_t start, uint64_t end)
{
	uint64_t *b = __atomic_load_n(bm, __ATOMIC_ACQUIRE);

	if (!b) {
		uint64_t *nb = calloc((size / PM_POPULATE_ALIGN + 64) / 64, sizeof(*nb));

		if (!nb)
			return;	/* a hint: the next epoch populates again */
		if (__atomic_compare_exchange_n(bm, &b, nb, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			b = nb;
		else
			free(nb);	/* another lane's came first: b is it */
	}
	/* whole chunks only, and the last one of the file */
	for (uint64_t c = (start + PM_POPULATE_ALIGN - 1) / PM_POPULATE_ALIGN;
	     c * PM_POPULATE_ALIGN < end && ((c + 1) * PM_POPULATE_ALIGN <= end || end >= size); c++)
		__atomic_fetch_or(&b[c / 64], 1ull << (c % 64), __ATOMIC_RELAXED);
}

bool pm_populated_all(uint64_t **bm, uint64_t start, uint64_t end)
{
	uint64_t *b = __atomic_load_n(bm, __ATOMIC_ACQUIRE);

	if (!b || start >= end)
		return false;
	for (uint64_t c = start / PM_POPULATE_ALIGN; c * PM_POPULATE_ALIGN < end; c++)
		if (!(__atomic_load_n(&b[c / 64], __ATOMIC_RELAXED) & (1ull << (c % 64))))
			return false;
	return true;
}

void pm_popwins_release(struct pm_popwins *ws, bool unmap_windows)
{
	for (uint32_t i = 0; i < PM_POPULATE_WINDOWS && unmap_windows; i++)
		unmap(&ws->w[i]);
	if (ws->pagemap_tried && ws->pagemap >= 0)
		close(ws->pagemap);
	ws->pagemap_tried = false;
}
