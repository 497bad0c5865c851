/* SPDX-License-Identifier: MIT */
/*
 * Cold runs of a buffered file enter the page cache in huge folios.
 *
 * Many reads in flight at once look random to the kernel's readahead: it
 * fills the page cache with 4 KiB folios (a cold 1 GiB stream of 1 MiB reads
 * left 237,000 of them, where a sequential pread loop leaves 2 MiB folios).
 * Every later epoch then copies out of small folios (warm reads 35-50%
 * slower, for any reader of those files), and the device gets smaller
 * requests.  So a run of at least PM_POPULATE_MIN bytes that is not cached
 * is faulted in with MADV_POPULATE_READ through a MADV_HUGEPAGE (and
 * MADV_RANDOM: only the run, populate.c) mapping of the file, in io_uring's
 * workers, before it is read: the fault path (Linux 5.18 and later) reads
 * 2 MiB folios wherever the file system supports large folios (XFS; ext4
 * since Linux 6.16), and 4 KiB pages elsewhere, as WILLNEED would.
 *
 * The mappings are windows of PM_POPULATE_WINDOW bytes of a file, kept per
 * lane (no locking) and reused, at most PM_POPULATE_WINDOWS of them; the
 * least recently used idle one is unmapped to make room.  A mapping per
 * batch, unmapped when its populates completed, was measured slower: on the
 * 2-core VM, 7 of 8 cold runs of a 1 GiB stream fell to 0.5-0.7 GB/s, where
 * kept mappings ran 2.4-4.9 GB/s (8 runs each, interleaved).  Nothing reads
 * through a window; its pages count in the process's RSS (as mapped page
 * cache) until it is unmapped, and forked children do not inherit it.
 */
#ifndef PM_POPULATE_H
#define PM_POPULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PM_POPULATE_ALIGN	(2u << 20)	/* a PMD: the folio the fault path reads */
#define PM_POPULATE_MIN		PM_POPULATE_ALIGN
#define PM_POPULATE_WINDOW	(256ull << 20)
#define PM_POPULATE_WINDOWS	8
#define PM_POPULATE_PIECE_MAX	(1ull << 30)	/* one MADV_POPULATE_READ at most */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22	/* Linux 5.14 */
#endif

/* A read-only MADV_HUGEPAGE mapping of [off, off + len) of one file. */
struct pm_popwin {
	uint32_t path;
	uint64_t off;
	char *addr;
	size_t len;
	uint32_t inflight;	/* populates through it not yet completed */
	uint64_t used;		/* LRU clock */
	bool mincore_ok;	/* mincore tells this file's page cache (populate.c) */
};

struct pm_popwins {
	struct pm_popwin w[PM_POPULATE_WINDOWS];
	uint64_t clock;
	int pagemap;		/* /proc/self/pagemap, opened when first needed */
	bool pagemap_tried;
};

/*
 * The window of file path (descriptor fd, size bytes) that holds the run
 * [start, end), mapped now if need be: *win is set, and 1 returned when the
 * run's first or last page is not cached (populate [*pstart, *pend) through
 * it: the run widened to PM_POPULATE_ALIGN and cut at the end of the file),
 * 0 when both are (nothing to do).  Asking reads nothing: for a file whose
 * page cache mincore does not show to this process, "cached" means mapped
 * in the window (populating what another process cached only maps it); if
 * /proc/self/pagemap cannot tell that either, -EACCES.  -errno when no
 * window can be had: -EBUSY every one has populates in flight; else mmap or
 * madvise refused it (nothing was unmapped for it): read the run without.
 */
int pm_popwin_get(struct pm_popwins *ws, uint32_t path, int fd, uint64_t size,
		  uint64_t start, uint64_t end, struct pm_popwin **win,
		  uint64_t *pstart, uint64_t *pend);
/*
 * The chunks (PM_POPULATE_ALIGN) of a file a stream has populated, a bitmap
 * *bm allocated on first use (shared by the lanes: atomic; freed with the
 * stream's files).  Where mincore cannot tell (someone else's file) and the
 * window that mapped a run is gone, a run populated before is only checked
 * with a read that may not block (lane.c): a dataset of more files than
 * windows would otherwise be populated again every epoch.  Warm, 3-epoch
 * streams as nobody over 24 files of 64 MiB read 19.8-25.1 GB/s so,
 * 21.8-24.7 with this, and 25.1-28.7 with the RWF_NOWAIT probe of before:
 * a stream's first epoch still populates (only maps) what it finds cached
 * by another process.
 */
void pm_populated_mark(uint64_t **bm, uint64_t size, uint64_t start, uint64_t end);
bool pm_populated_all(uint64_t **bm, uint64_t start, uint64_t end);
/*
 * Whether a kernel of this release (uname -r) populates through windows in
 * huge folios: Linux 5.18 and later (see populate.c).
 */
bool pm_populate_supported(const char *release);
/*
 * Close pagemap, and unmap every window unless unmap is false (populates
 * may still be in flight through them: the process keeps the mappings).
 */
void pm_popwins_release(struct pm_popwins *ws, bool unmap);

#endif
