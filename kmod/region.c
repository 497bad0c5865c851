// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem regions: check a user range, pin it long-term, unpin it.
 *
 * Bookkeeping is a list of blocks of runs of physically contiguous pages,
 * merged across pinning chunks, each run packed in one u64 (first pfn, page
 * count): a region of huge pages needs a few runs per GiB, and a region of
 * scattered 4 KiB pages needs 8 bytes per page, never more than an array of
 * page pointers would and never one allocation larger than a page.  Blocks
 * double in size from 64 bytes to a page, so a one-page region costs its
 * struct and 64 bytes, not a page.  All of it is charged to the memory
 * cgroup of the pinning task (GFP_KERNEL_ACCOUNT).
 */
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/hugetlb_inline.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "pinmem.h"
#include "region.h"

/*
 * A run: the first pfn in the low PINMEM_PFN_BITS bits (52-bit physical
 * addresses with 4 KiB pages), pages - 1 in the bits above, so one run
 * covers up to 64 GiB of 4 KiB pages; longer stretches take several runs.
 */
#define PINMEM_PFN_BITS		40
#define PINMEM_PFN_MASK		((1ULL << PINMEM_PFN_BITS) - 1)
#define PINMEM_RUN_MAX_PAGES	(1ULL << (64 - PINMEM_PFN_BITS))

static u64 pinmem_run_pfn(u64 run)
{
	return run & PINMEM_PFN_MASK;
}

static u64 pinmem_run_pages(u64 run)
{
	return (run >> PINMEM_PFN_BITS) + 1;
}

/**
 * struct pinmem_run_block - a block of runs
 * @node: entry in pinmem_region.blocks
 * @nr: runs used
 * @cap: runs the block holds
 * @runs: the runs, see PINMEM_PFN_BITS
 */
struct pinmem_run_block {
	struct list_head node;
	u32 nr;
	u32 cap;
	u64 runs[];
};

/* The first block of a region: one kmalloc-64 object. */
#define PINMEM_BLOCK_MIN	64

/* The size of a region's next block: double the last, at most a page. */
static size_t pinmem_block_size(const struct pinmem_region *r)
{
	if (r->nblocks >= PAGE_SHIFT - 6)
		return PAGE_SIZE;
	return PINMEM_BLOCK_MIN << r->nblocks;
}

/* What the slab allocator really hands out for @size bytes. */
static size_t pinmem_kmem_size(size_t size)
{
#ifdef PINMEM_HAVE_KMALLOC_SIZE_ROUNDUP
	return kmalloc_size_roundup(size);
#else
	return size;
#endif
}

/* Pages pinned per GUP call: one page of page pointers. */
#define PINMEM_CHUNK	(PAGE_SIZE / sizeof(struct page *))

/*
 * Only memory that may be pinned long-term on every supported kernel:
 * anonymous, shmem (shared anonymous, tmpfs, memfd, SysV shm) and hugetlb.
 * Ordinary file pages need writeback, so 6.5+ refuses to pin them with
 * FOLL_LONGTERM while 6.1 would pin them; refusing here gives one answer.
 */
static int pinmem_vma_check(struct vm_area_struct *vma)
{
	if (vma->vm_flags & (VM_IO | VM_PFNMAP))
		return -EOPNOTSUPP;
	if (vma->vm_file && !vma_is_anonymous(vma) &&
	    !is_vm_hugetlb_page(vma) &&
	    file_inode(vma->vm_file)->i_sb->s_magic != TMPFS_MAGIC)
		return -EOPNOTSUPP;
	if (!(vma->vm_flags & VM_WRITE))
		return -EACCES;
	return 0;
}

/* Check every VMA of [addr, end); the caller holds the mmap lock. */
static int pinmem_range_check(struct mm_struct *mm, unsigned long addr,
			      unsigned long end)
{
	struct vm_area_struct *vma;
	int ret;

	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		ret = pinmem_vma_check(vma);
		if (ret)
			return ret;
		addr = vma->vm_end;
	}
	return 0;
}

/**
 * pinmem_region_check() - check that [addr, addr + len) may be pinned
 * @mm: the caller's mm
 * @addr: page-aligned user address
 * @len: non-zero page multiple; the range does not wrap
 *
 * Lets PIN refuse a range before it charges any budget; on kernels whose
 * GUP does not refuse what pinmem must not pin, pinning checks each chunk
 * again under the lock it pins with (see PINMEM_PIN_LOCKED).
 *
 * Return: 0; -EFAULT for a hole; -EACCES for a mapping without write
 * permission; -EOPNOTSUPP for I/O, PFN or file-backed mappings other than
 * shmem and hugetlb; -EINTR on a fatal signal.
 */
int pinmem_region_check(struct mm_struct *mm, unsigned long addr,
			unsigned long len)
{
	int ret;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = pinmem_range_check(mm, addr, addr + len);
	mmap_read_unlock(mm);
	return ret;
}

/**
 * pinmem_region_alloc() - a region to pin, with nothing pinned yet
 * @addr: page-aligned user address
 * @npages: base pages
 *
 * Return: the region or NULL.
 */
struct pinmem_region *pinmem_region_alloc(unsigned long addr,
					  unsigned long npages)
{
	struct pinmem_region *r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);

	if (!r)
		return NULL;
	r->addr = addr;
	r->npages = npages;
	r->kmem_bytes = pinmem_kmem_size(sizeof(*r));
	INIT_LIST_HEAD(&r->blocks);
	return r;
}

static bool pinmem_page_is_huge(struct page *page)
{
#ifdef PINMEM_HAVE_PAGE_FOLIO
	return folio_size(page_folio(page)) >= PMD_SIZE;
#else
	return (PAGE_SIZE << compound_order(compound_head(page))) >= PMD_SIZE;
#endif
}

/* Extend the last run by @page, or start a new run; -ENOMEM. */
static int pinmem_region_record(struct pinmem_region *r, struct page *page)
{
	u64 pfn = page_to_pfn(page);
	struct pinmem_run_block *b = NULL;
	u64 *run;

	if (WARN_ON_ONCE(pfn > PINMEM_PFN_MASK))
		return -EOVERFLOW;
	if (!list_empty(&r->blocks)) {
		b = list_last_entry(&r->blocks, struct pinmem_run_block, node);
		run = &b->runs[b->nr - 1];
		if (pfn == pinmem_run_pfn(*run) + pinmem_run_pages(*run) &&
		    pinmem_run_pages(*run) < PINMEM_RUN_MAX_PAGES) {
			*run += 1ULL << PINMEM_PFN_BITS;
			return 0;
		}
	}
	if (!b || b->nr == b->cap) {
		size_t size = pinmem_block_size(r);

		b = kmalloc(size, GFP_KERNEL_ACCOUNT);
		if (!b)
			return -ENOMEM;
		b->nr = 0;
		b->cap = (size - sizeof(*b)) / sizeof(u64);
		list_add_tail(&b->node, &r->blocks);
		r->nblocks++;
		r->kmem_bytes += pinmem_kmem_size(size);
	}
	b->runs[b->nr++] = pfn;
	r->segments++;
	return 0;
}

/* Record @n freshly pinned pages; on failure unpin those not recorded. */
static int pinmem_region_add(struct pinmem_region *r, struct page **pages,
			     unsigned long n)
{
	unsigned long i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = pinmem_region_record(r, pages[i]);
		if (ret) {
			unpin_user_pages(pages + i, n - i);
			return ret;
		}
		r->pinned++;
		if (pinmem_page_is_huge(pages[i]))
			r->huge_bytes += PAGE_SIZE;
	}
	return 0;
}

/*
 * Before 6.5 (pin_user_pages() still took a vmas argument) GUP long-term
 * pins page cache pages of regular files, which writeback does not expect,
 * and while hugetlb is walked by follow_hugetlb_page() (6.1; gone in later
 * kernels) it WARNs on hugetlb pages in ZONE_MOVABLE.  There each chunk is checked and pinned
 * under one hold of the mmap lock, as io_uring did on those kernels, so a
 * racing mmap() cannot slip in a mapping that must not be pinned.  Later
 * kernels refuse such mappings in GUP itself, GUP-fast included, and the
 * range checked by pinmem_region_check() is pinned with
 * pin_user_pages_fast(), as DESIGN.md prefers.
 */
#if defined(PINMEM_PIN_USER_PAGES_HAS_VMAS) || \
	defined(PINMEM_HUGETLB_LONGTERM_WARNS)
#define PINMEM_PIN_LOCKED 1
#endif

#ifdef PINMEM_PIN_LOCKED
#ifdef PINMEM_HUGETLB_LONGTERM_WARNS
/*
 * This kernel WARNs and fails on a FOLL_LONGTERM pin of a hugetlb page in
 * ZONE_MOVABLE (follow_hugetlb_page() grabs it with a check meant for
 * GUP-fast).  Pin hugetlb stretches without FOLL_LONGTERM, which changes
 * nothing else for hugetlb, and refuse every page it would have had to
 * migrate: ZONE_MOVABLE, CMA and isolated pageblocks, by the kernel's own
 * test (folio_is_longterm_pinnable(), is_longterm_pinnable_page() on older
 * kernels, see kmod/conftest.sh).
 * Clamps *@n to the first stretch of hugetlb or other VMAs.  Returns the
 * pin flags for that stretch.
 */
static unsigned int pinmem_hugetlb_flags(struct mm_struct *mm,
					 unsigned long addr, unsigned long *n)
{
	unsigned long end = addr + (*n << PAGE_SHIFT), cur = addr;
	struct vm_area_struct *vma = find_vma(mm, addr);
	bool hugetlb = is_vm_hugetlb_page(vma);

	while (vma && vma->vm_start < end &&
	       is_vm_hugetlb_page(vma) == hugetlb) {
		cur = vma->vm_end;
		vma = find_vma(mm, cur);
	}
	if (cur < end)
		*n = (cur - addr) >> PAGE_SHIFT;
	return hugetlb ? FOLL_WRITE : FOLL_WRITE | FOLL_LONGTERM;
}

static long pinmem_hugetlb_check(struct page **pages, long got,
				 unsigned int flags)
{
	long i;

	if (got <= 0 || (flags & FOLL_LONGTERM))
		return got;
	for (i = 0; i < got; i++) {
		if (!pinmem_longterm_pinnable(pages[i])) {
			unpin_user_pages(pages, got);
			return -EOPNOTSUPP;
		}
	}
	return got;
}
#else
static unsigned int pinmem_hugetlb_flags(struct mm_struct *mm,
					 unsigned long addr, unsigned long *n)
{
	return FOLL_WRITE | FOLL_LONGTERM;
}

static long pinmem_hugetlb_check(struct page **pages, long got,
				 unsigned int flags)
{
	return got;
}
#endif

/* Pin up to @n pages at @addr; returns the pages pinned or an error. */
static long pinmem_pin_chunk(struct mm_struct *mm, unsigned long addr,
			     unsigned long n, struct page **pages)
{
	unsigned int flags;
	long ret;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = pinmem_range_check(mm, addr, addr + (n << PAGE_SHIFT));
	if (!ret) {
		flags = pinmem_hugetlb_flags(mm, addr, &n);
		ret = pinmem_pin_user_pages(addr, n, flags, pages);
		ret = pinmem_hugetlb_check(pages, ret, flags);
	}
	mmap_read_unlock(mm);
	return ret;
}
#else
/*
 * Here the range checked by pinmem_region_check() is pinned without the
 * mmap lock (pin_user_pages_fast(), about 3x faster than pinning each chunk
 * under the lock), so a racing mmap(MAP_FIXED) may have put another mapping
 * there since the check.  GUP refuses most of what pinmem must not pin
 * (I/O and PFN mappings, read-only mappings, file pages that need
 * writeback: -EFAULT), but not every file mapping without writeback
 * (ramfs).  What matters is what ends up pinned, and that is checked page
 * by page: every page must be anonymous, shmem (both swap-backed) or
 * hugetlb, the memory the uapi allows; anything else is unpinned and
 * refused with -EOPNOTSUPP, as the check would have.
 */
static bool pinmem_page_allowed(struct page *page)
{
	struct folio *folio = page_folio(page);

	return folio_test_anon(folio) || folio_test_swapbacked(folio) ||
	       folio_test_hugetlb(folio);
}

static long pinmem_pin_chunk(struct mm_struct *mm, unsigned long addr,
			     unsigned long n, struct page **pages)
{
	long got, i;

	got = pin_user_pages_fast(addr, n, FOLL_WRITE | FOLL_LONGTERM, pages);
	for (i = 0; i < got; i++) {
		if (!pinmem_page_allowed(pages[i])) {
			unpin_user_pages(pages, got);
			return -EOPNOTSUPP;
		}
	}
	return got;
}
#endif /* PINMEM_PIN_LOCKED */

/*
 * A long-term pin first migrates pages out of ZONE_MOVABLE and CMA, and GUP
 * fails with -ENOMEM when that migration fails, which happens for a moment
 * when another thread pins the same pages at the same time.  Try again a
 * few times; if it persists, say -EAGAIN as mlock(2) does, because ENOMEM
 * tells pinmem's callers that RLIMIT_MEMLOCK refused.
 */
#define PINMEM_PIN_TRIES	10

static long pinmem_pin_retry(struct mm_struct *mm, unsigned long addr,
			     unsigned long n, struct page **pages)
{
	long got;
	int i;

	for (i = 1; ; i++) {
		got = pinmem_pin_chunk(mm, addr, n, pages);
		if (got != -ENOMEM && got != -EAGAIN)
			return got;
		if (i == PINMEM_PIN_TRIES)
			return -EAGAIN;
		if (fatal_signal_pending(current))
			return -EINTR;
		if (i == 1)
			cond_resched();
		else
			msleep(1);
	}
}

/**
 * pinmem_region_pin() - pin all pages of @r for writing, long-term
 * @r: from pinmem_region_alloc(); the caller runs on the owning mm
 *
 * Pins in chunks of one page of page pointers, rescheduling between them
 * and stopping on a fatal signal; a short pin continues where it stopped.
 * On failure what was pinned stays recorded in @r for the caller to
 * release with pinmem_region_free().
 *
 * Return: 0; -EINTR on a fatal signal; -ENOMEM (bookkeeping); -EAGAIN when
 * pages could not be migrated for the pin; -EFAULT, -EACCES or
 * -EOPNOTSUPP when the mapping changed since pinmem_region_check() (on
 * kernels that pin with pin_user_pages_fast(), -EFAULT from GUP or
 * -EOPNOTSUPP from the check of the pinned pages);
 * -EOPNOTSUPP for hugetlb pages in ZONE_MOVABLE on kernels that cannot
 * migrate them for a long-term pin; an error of GUP (-EFAULT, -EHWPOISON,
 * ...).
 */
int pinmem_region_pin(struct pinmem_region *r)
{
	struct page **pages;
	unsigned long n;
	long got;
	int ret = 0;

	pages = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!pages)
		return -ENOMEM;

	while (r->pinned < r->npages) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		n = min_t(unsigned long, PINMEM_CHUNK, r->npages - r->pinned);
		got = pinmem_pin_retry(current->mm,
				       r->addr + (r->pinned << PAGE_SHIFT), n,
				       pages);
		if (got <= 0) {
			ret = got ? got : -EFAULT;
			break;
		}
		ret = pinmem_region_add(r, pages, got);
		if (ret)
			break;
		cond_resched();
	}
	kfree(pages);
	if (ret == -ERESTARTSYS)
		ret = -EINTR;
	return ret;
}

/**
 * pinmem_region_for_each() - walk the pinned pages of @r folio by folio
 * @r: the region; its pages stay pinned during the walk, so their folios
 *	can be neither split nor freed
 * @fn: called for each stretch of pages inside one folio, in address order
 * @arg: passed to @fn
 *
 * May sleep: reschedules between folios, so callers hold no spinlock (they
 * hold pinmem_file.lock, a mutex).
 *
 * Return: 0, or the first non-zero return of @fn.
 */
int pinmem_region_for_each(struct pinmem_region *r, pinmem_region_fn fn,
			   void *arg)
{
	unsigned long pfn, left, head, nr, n;
	struct pinmem_run_block *b;
	struct page *page;
	u32 i;
	int ret;

	list_for_each_entry(b, &r->blocks, node) {
		for (i = 0; i < b->nr; i++) {
			pfn = pinmem_run_pfn(b->runs[i]);
			left = pinmem_run_pages(b->runs[i]);
			while (left) {
				page = pfn_to_page(pfn);
#ifdef PINMEM_HAVE_PAGE_FOLIO
				head = folio_pfn(page_folio(page));
				nr = folio_nr_pages(page_folio(page));
#else
				head = page_to_pfn(compound_head(page));
				nr = compound_nr(compound_head(page));
#endif
				n = min(left, head + nr - pfn);
				ret = fn(arg, head, nr, pfn, n);
				if (ret)
					return ret;
				pfn += n;
				left -= n;
				/* A run may be 64 GiB of base pages. */
				cond_resched();
			}
		}
	}
	return 0;
}

/**
 * pinmem_region_free() - unpin every recorded page of @r and free it
 * @r: the region
 * @dirty: mark the pages dirty (a released region: the device or the
 *	process may have written them); false when rolling back a failed PIN
 *
 * May sleep: called with no lock held.
 */
void pinmem_region_free(struct pinmem_region *r, bool dirty)
{
	struct pinmem_run_block *b, *tmp;
	unsigned long i, pfn, left, n;

	list_for_each_entry_safe(b, tmp, &r->blocks, node) {
		for (i = 0; i < b->nr; i++) {
			pfn = pinmem_run_pfn(b->runs[i]);
			/*
			 * A run may be 64 GiB, and unpinning it dirty takes
			 * each folio's lock: reschedule every chunk.
			 */
			for (left = pinmem_run_pages(b->runs[i]); left;
			     left -= n, pfn += n) {
				n = min_t(unsigned long, left, PINMEM_CHUNK);
				unpin_user_page_range_dirty_lock(pfn_to_page(pfn),
								 n, dirty);
				cond_resched();
			}
		}
		list_del(&b->node);
		kfree(b);
	}
	kfree(r);
}
