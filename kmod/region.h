/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem regions: one PIN, its pinned pages kept as runs of contiguous pages.
 */
#ifndef _PINMEM_REGION_H
#define _PINMEM_REGION_H

#include <linux/list.h>
#include <linux/mm.h>
#include <linux/types.h>

struct mm_struct;
struct page;
struct pinmem_cg;

/* Pages pinned per GUP call at most: one page of page pointers. */
#define PINMEM_CHUNK	(PAGE_SIZE / sizeof(struct page *))

/**
 * struct pinmem_region - pages pinned by one PIN
 * @addr: user address in the owner's address space
 * @npages: base pages in the region
 * @pinned: base pages pinned and recorded in @blocks so far
 * @segments: runs of physically contiguous pages
 * @huge_bytes: bytes backed by PMD-sized or larger folios
 * @handle: the region's handle in its file
 * @kmem_bytes: kernel memory of this struct and its blocks
 * @cg: the cgroup entry the PIN was charged to (its pinning task's cgroup
 *	at PIN time; a reference held by the file), NULL for the root
 * @nblocks: blocks in @blocks; each is twice the size of the one before, up
 *	to a page, so a region of one run costs no page
 * @blocks: blocks of runs, in address order
 */
struct pinmem_region {
	unsigned long addr;
	unsigned long npages;
	unsigned long pinned;
	u64 segments;
	u64 huge_bytes;
	u32 handle;
	u32 nblocks;
	u64 kmem_bytes;
	struct pinmem_cg *cg;
	struct list_head blocks;
};

/*
 * Called by pinmem_region_for_each() for @n pinned pages from @pfn on, all
 * in one folio of @folio_pages pages whose first frame is @folio_pfn (a base
 * page is a folio of one page).  A non-zero return stops the walk.
 */
typedef int (*pinmem_region_fn)(void *arg, unsigned long folio_pfn,
				unsigned long folio_pages, unsigned long pfn,
				unsigned long n);

/*
 * Called by pinmem_region_pin_chunk(), under the mmap lock, before it pins
 * up to @npages pages from @addr, each of which may sit in a folio of up to
 * @folio_bytes; @aligned: a hugetlb mapping, whose folios are aligned to
 * their size in it, so the pages of one aligned stretch share one folio
 * (kmod/file.c has the exceptions).  Returns how many of the pages to pin,
 * 0 for none; charging for them is its business.
 */
typedef unsigned long (*pinmem_reserve_fn)(void *arg, unsigned long addr,
					   unsigned long npages,
					   u64 folio_bytes, bool aligned);

int pinmem_region_check(struct mm_struct *mm, unsigned long addr,
			unsigned long len);
struct pinmem_region *pinmem_region_alloc(unsigned long addr,
					  unsigned long npages);
long pinmem_region_pin_chunk(struct pinmem_region *r, struct page **pages,
			     pinmem_reserve_fn reserve, void *arg);
int pinmem_region_add(struct pinmem_region *r, struct page **pages,
		      unsigned long n, unsigned long *recorded);
void pinmem_region_free(struct pinmem_region *r, bool dirty);
int pinmem_region_for_each(struct pinmem_region *r, pinmem_region_fn fn,
			   void *arg);

#endif /* _PINMEM_REGION_H */
