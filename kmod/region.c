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
#include <linux/hugetlb.h>
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

/*
 * A regular file of tmpfs (shmem): tmpfs, memfd, shared anonymous memory
 * and SysV shm.  The file system's magic alone would also let through the
 * device nodes of devtmpfs (the same magic), whose mapping is a block
 * device's page cache; a regular file's pages are its own inode's.
 */
static bool pinmem_file_is_shmem(struct file *file)
{
	struct inode *inode = file_inode(file);

	return S_ISREG(inode->i_mode) && inode->i_sb->s_magic == TMPFS_MAGIC &&
	       file->f_mapping == inode->i_mapping;
}

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
	    !is_vm_hugetlb_page(vma) && !pinmem_file_is_shmem(vma->vm_file))
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
 * Lets PIN refuse a range before it charges any budget; each chunk is
 * checked again under the lock it is pinned with (pinmem_region_pin_chunk()).
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
	return folio_size(page_folio(page)) >= PMD_SIZE;
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

/**
 * pinmem_region_add() - record pages pinned by pinmem_region_pin_chunk()
 * @r: the region; the pages are the next @n of its range
 * @pages: the pages
 * @n: how many
 * @recorded: out: how many were recorded (all of them on success); the
 *	others are neither recorded nor unpinned
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_region_add(struct pinmem_region *r, struct page **pages,
		      unsigned long n, unsigned long *recorded)
{
	unsigned long i;
	int ret = 0;

	for (i = 0; i < n; i++) {
		ret = pinmem_region_record(r, pages[i]);
		if (ret)
			break;
		r->pinned++;
		if (pinmem_page_is_huge(pages[i]))
			r->huge_bytes += PAGE_SIZE;
	}
	*recorded = i;
	return ret;
}

/*
 * Kernels that still walk hugetlb mappings with follow_hugetlb_page() (6.1;
 * gone in later kernels) WARN and fail a FOLL_LONGTERM pin of a hugetlb page
 * in ZONE_MOVABLE (it grabs the page with a check meant for GUP-fast).  Pin
 * hugetlb stretches without FOLL_LONGTERM there, which changes nothing else
 * for hugetlb, and refuse every page it would have had to migrate:
 * ZONE_MOVABLE, CMA and isolated pageblocks, by the kernel's own test
 * (folio_is_longterm_pinnable(), see kmod/conftest.sh).
 */
#ifdef PINMEM_HUGETLB_LONGTERM_WARNS
static bool pinmem_hugetlb_unpinnable(struct page *page, unsigned int flags)
{
	return !(flags & FOLL_LONGTERM) && !pinmem_longterm_pinnable(page);
}
#else
static bool pinmem_hugetlb_unpinnable(struct page *page, unsigned int flags)
{
	return false;
}
#endif

/*
 * The first stretch of [addr, addr + *n pages) whose VMAs all pin alike
 * (hugetlb or not, see above; one page size), clamping *n to it; the mmap
 * lock is held and the range was checked.  Sets *@folio_bytes to the largest
 * folio a page of the stretch may sit in: the hugetlb page size, else a PMD
 * where large folios exist (THP, mTHP, large shmem folios; a page moved by
 * mremap() may belong to any of them), else a page.  Returns the pin flags.
 */
static unsigned int pinmem_chunk_shape(struct mm_struct *mm,
				       unsigned long addr, unsigned long *n,
				       u64 *folio_bytes)
{
	unsigned long end = addr + (*n << PAGE_SHIFT), cur = addr;
	struct vm_area_struct *vma = find_vma(mm, addr);
	unsigned long size = vma_kernel_pagesize(vma);
	bool hugetlb = is_vm_hugetlb_page(vma);

	while (vma && vma->vm_start < end &&
	       is_vm_hugetlb_page(vma) == hugetlb &&
	       vma_kernel_pagesize(vma) == size) {
		cur = vma->vm_end;
		vma = find_vma(mm, cur);
	}
	if (cur < end)
		*n = (cur - addr) >> PAGE_SHIFT;
	if (hugetlb)
		*folio_bytes = size;
	else
		*folio_bytes = IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE) ?
			       PMD_SIZE : PAGE_SIZE;
#ifdef PINMEM_HUGETLB_LONGTERM_WARNS
	if (hugetlb)
		return FOLL_WRITE;
#endif
	return FOLL_WRITE | FOLL_LONGTERM;
}

/*
 * Only what the uapi lists may stay pinned: anonymous, shmem (both
 * swap-backed) and hugetlb pages.  The VMAs were checked under the same
 * mmap lock, so this is a second line: it also holds where a kernel's GUP
 * would pin what the VMA check let through (page cache of a device node on
 * a tmpfs-like file system, say).
 */
static bool pinmem_page_allowed(struct page *page)
{
	struct folio *folio = page_folio(page);

	return folio_test_anon(folio) || folio_test_swapbacked(folio) ||
	       folio_test_hugetlb(folio);
}

/*
 * Every FOLL_PIN pin of a small folio adds GUP_PIN_COUNTING_BIAS (1024) to
 * its reference count, and a page mapped at many addresses (a memfd page
 * mapped 65,000 times) pinned by many regions is charged only 4 KiB per
 * pin: some 2^21 pins would take the count past INT_MAX, where GUP WARNs
 * (a panic with panic_on_warn) and refuses every further pin of the page.
 * pinmem refuses a pin that leaves a folio's count above this ceiling.
 * A user pins one chunk at a time (its GUP lock, kmod/budget.c), and one
 * chunk adds at most PINMEM_CHUNK * 1024 = 2^19 to any count, so pins
 * through pinmem take a count past 2^29 by at most 2^19 per real user
 * pinning at that moment: passing INT_MAX would take some 3,000 users
 * pinning one page at once.
 */
#define PINMEM_FOLIO_REFS_MAX	(1 << 29)

/* Pin @n pages at @addr with @flags and check them; the mmap lock is held. */
static long pinmem_gup(unsigned long addr, unsigned long n,
		       unsigned int flags, struct page **pages)
{
	long got, i;
	int err = 0;

	got = pinmem_pin_user_pages(addr, n, flags, pages);
	for (i = 0; i < got && !err; i++) {
		if (!pinmem_page_allowed(pages[i]) ||
		    pinmem_hugetlb_unpinnable(pages[i], flags))
			err = -EOPNOTSUPP;
		else if (folio_ref_count(page_folio(pages[i])) >
			 PINMEM_FOLIO_REFS_MAX)
			err = -ETOOMANYREFS;
	}
	if (err)
		unpin_user_pages(pages, got);
	return err ? err : got;
}

/**
 * pinmem_region_pin_chunk() - pin the next pages of @r, charged first
 * @r: the region; its next chunk starts after its @r->pinned pages
 * @pages: room for PINMEM_CHUNK page pointers: the pages pinned
 * @reserve: called with the mmap lock held before anything is pinned, with the chunk's pages and the largest folio one
 *	of them may sit in; charges the worst case of as many of those pages
 *	as the budgets allow and returns how many, 0 to pin nothing
 * @arg: passed to @reserve
 *
 * The caller holds its user's GUP lock (PINMEM_FOLIO_REFS_MAX).  Checks
 * the chunk's mappings, reserves, pins and checks the pinned pages under
 * one hold of the mmap lock, so no mapping changes in between: only
 * what pinmem_region_check() allows is pinned, and the largest folio
 * @reserve is told of is the largest a page can be in.  GUP never drops
 * that lock, so a fault only user space could resolve (userfaultfd, which
 * needs the lock dropped to wait) fails the pin instead of stalling it,
 * and no GUP waits on user space while it holds pins beyond what @reserve
 * charged.  The pages are not recorded in @r yet: see pinmem_region_add().
 *
 * Return: pages pinned (at most what @reserve allowed); 0 when @reserve
 * returned 0; -EINTR on a fatal signal; -ENOMEM or -EAGAIN when GUP lost a
 * race migrating the pages (try again); -EFAULT, -EACCES, -EOPNOTSUPP when
 * the mapping changed since pinmem_region_check() or a pinned page is of a
 * kind pinmem does not pin; -ETOOMANYREFS (PINMEM_FOLIO_REFS_MAX); an error
 * of GUP.  Whatever @reserve charged stays charged: the caller settles it.
 */
long pinmem_region_pin_chunk(struct pinmem_region *r, struct page **pages,
			     pinmem_reserve_fn reserve, void *arg)
{
	unsigned long addr = r->addr + (r->pinned << PAGE_SHIFT);
	struct mm_struct *mm = current->mm;
	unsigned long n, allowed;
	unsigned int flags;
	u64 folio_bytes;
	long got;

	n = min_t(unsigned long, PINMEM_CHUNK, r->npages - r->pinned);
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	got = pinmem_range_check(mm, addr, addr + (n << PAGE_SHIFT));
	if (got)
		goto out;
	flags = pinmem_chunk_shape(mm, addr, &n, &folio_bytes);
	allowed = reserve(arg, addr, n, folio_bytes, is_vm_hugetlb_page(find_vma(mm, addr)));
	if (!allowed)
		goto out;
	got = pinmem_gup(addr, min(n, allowed), flags, pages);
	if (!got)
		got = -EFAULT;
	else if (got == -ERESTARTSYS)
		got = -EINTR;
out:
	mmap_read_unlock(mm);
	return got;
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
				head = folio_pfn(page_folio(page));
				nr = folio_nr_pages(page_folio(page));
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
