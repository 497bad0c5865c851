// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem large folios: what a pin keeps allocated is charged, once per file.
 *
 * A pinned folio can be neither split nor freed, so a PIN of one 4 KiB page
 * of a 2 MiB THP or hugetlb page keeps all 2 MiB allocated, also after the
 * range is unmapped.  Each open file keeps the large folios it holds pins in,
 * with the number of its pinned pages in each: the folio is charged whole
 * when the count leaves zero and un-charged when it returns to zero, as
 * io_uring charges a huge page once for all buffers of a ring
 * (headpage_already_acct()).  Base pages are charged one by one.
 *
 * A file may hold at most PINMEM_FOLIO_MAX_PINS pins per page of a
 * large folio (folio.h says why): a PIN that would pass that is refused
 * with -ETOOMANYREFS and leaves the tree as it found it.
 *
 * A folio is charged to the cgroup of the PIN that took it first, and
 * un-charged from that cgroup when the file lets go of it, whichever
 * region does: the folio keeps a reference to that cgroup's entry.
 *
 * The tree is guarded by pinmem_file.lock; its nodes come from a cache
 * charged to the memory cgroup and are counted in the file's kmem_bytes.
 */
#include <linux/mm.h>
#include <linux/rbtree.h>
#include <linux/slab.h>

#include "cgroup.h"
#include "folio.h"
#include "region.h"

/**
 * struct pinmem_folio_ref - a large folio a file holds pins in
 * @node: entry in pinmem_file.folios, by @pfn
 * @gone: once out of the tree: entry in a list of folios to un-charge
 * @pfn: the folio's first frame
 * @pages: pages of the folio
 * @pinned: pages of it this file holds pinned (regions may overlap)
 * @cg: the cgroup entry the folio is charged to (a reference held), or NULL
 */
struct pinmem_folio_ref {
	union {
		struct rb_node node;
		struct list_head gone;
	};
	unsigned long pfn;
	unsigned long pages;
	unsigned long pinned;
	struct pinmem_cg *cg;
};

static struct kmem_cache *pinmem_folio_cache;

/**
 * pinmem_folio_init() - create the cache of folio references
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_folio_init(void)
{
	pinmem_folio_cache = KMEM_CACHE(pinmem_folio_ref, SLAB_ACCOUNT);
	return pinmem_folio_cache ? 0 : -ENOMEM;
}

/** pinmem_folio_exit() - destroy the cache; every file is gone */
void pinmem_folio_exit(void)
{
	kmem_cache_destroy(pinmem_folio_cache);
}

/**
 * pinmem_folio_ref_bytes() - kernel memory of one folio reference
 *
 * Return: the cache's object size.
 */
u64 pinmem_folio_ref_bytes(void)
{
	return kmem_cache_size(pinmem_folio_cache);
}

/* The reference of the folio at @pfn, or where to link a new one. */
static struct pinmem_folio_ref *pinmem_folio_find(struct rb_root *root,
						  unsigned long pfn,
						  struct rb_node ***link,
						  struct rb_node **parent)
{
	struct rb_node **p = &root->rb_node;
	struct pinmem_folio_ref *ref;

	*parent = NULL;
	while (*p) {
		ref = rb_entry(*p, struct pinmem_folio_ref, node);
		if (pfn == ref->pfn)
			return ref;
		*parent = *p;
		p = pfn < ref->pfn ? &(*p)->rb_left : &(*p)->rb_right;
	}
	*link = p;
	return NULL;
}

/**
 * struct pinmem_folio_walk - state of one add or remove walk over a region
 * @fs: the file's folios
 * @cg: add: the cgroup entry new folios are charged to
 * @gone: remove: where folios the file no longer holds go; NULL to free
 *	them at once (undoing an add that failed: they hold no reference yet)
 * @charge: bytes the walk charged (add: base pages and new folios) or
 *	un-charged (remove: base pages)
 * @kmem: kernel bytes the walk allocated (add) or freed (remove)
 * @added: add: new folios
 * @left: pages still to walk; a failed add undoes only what it added
 */
struct pinmem_folio_walk {
	struct pinmem_folios *fs;
	struct pinmem_cg *cg;
	struct list_head *gone;
	u64 charge;
	s64 kmem;
	unsigned int added;
	unsigned long left;
};

static int pinmem_folio_add_one(void *arg, unsigned long folio_pfn,
				unsigned long folio_pages, unsigned long pfn,
				unsigned long n)
{
	struct pinmem_folio_walk *w = arg;
	struct pinmem_folio_ref *ref;
	struct rb_node **link, *parent;

	if (folio_pages == 1) {
		w->charge += n << PAGE_SHIFT;
		w->left -= n;
		return 0;
	}
	ref = pinmem_folio_find(&w->fs->root, folio_pfn, &link, &parent);
	if (ref && ref->pinned + n >
		   (u64)PINMEM_FOLIO_MAX_PINS * folio_pages)
		return -ETOOMANYREFS;
	if (!ref) {
		ref = kmem_cache_alloc(pinmem_folio_cache, GFP_KERNEL_ACCOUNT);
		if (!ref)
			return -ENOMEM;
		ref->pfn = folio_pfn;
		ref->pages = folio_pages;
		ref->pinned = 0;
		ref->cg = w->cg;
		w->added++;
		rb_link_node(&ref->node, parent, link);
		rb_insert_color(&ref->node, &w->fs->root);
		w->fs->bytes += (u64)folio_pages << PAGE_SHIFT;
		w->charge += (u64)folio_pages << PAGE_SHIFT;
		w->kmem += pinmem_folio_ref_bytes();
	}
	ref->pinned += n;
	w->left -= n;
	return 0;
}

static int pinmem_folio_del_one(void *arg, unsigned long folio_pfn,
				unsigned long folio_pages, unsigned long pfn,
				unsigned long n)
{
	struct pinmem_folio_walk *w = arg;
	struct pinmem_folio_ref *ref;
	struct rb_node **link, *parent;

	if (!w->left)
		return 1;
	n = min(n, w->left);
	w->left -= n;
	if (folio_pages == 1) {
		w->charge += n << PAGE_SHIFT;
		return 0;
	}
	ref = pinmem_folio_find(&w->fs->root, folio_pfn, &link, &parent);
	if (WARN_ON_ONCE(!ref || ref->pinned < n))
		return 0;
	ref->pinned -= n;
	if (!ref->pinned) {
		rb_erase(&ref->node, &w->fs->root);
		if (w->gone)
			list_add_tail(&ref->gone, w->gone);
		else
			kmem_cache_free(pinmem_folio_cache, ref);
		w->fs->bytes -= (u64)folio_pages << PAGE_SHIFT;
		w->kmem -= pinmem_folio_ref_bytes();
	}
	return 0;
}

/* Call @fn for each stretch of @pages (pinned) inside one folio, in order. */
static int pinmem_folio_walk_pages(struct page **pages, unsigned long n,
				   pinmem_region_fn fn, void *arg)
{
	unsigned long i, j;
	struct folio *folio;
	int ret;

	for (i = 0; i < n; i = j) {
		folio = page_folio(pages[i]);
		for (j = i + 1; j < n && page_folio(pages[j]) == folio; j++)
			;
		ret = fn(arg, folio_pfn(folio), folio_nr_pages(folio),
			 page_to_pfn(pages[i]), j - i);
		if (ret)
			return ret;
	}
	return 0;
}

/**
 * pinmem_folio_add_pages() - count @n freshly pinned pages in @fs
 * @fs: the file's folios; the file's lock is held
 * @pages: the pages, pinned
 * @n: how many
 * @cg: the cgroup entry they are charged to, or NULL; each large folio new
 *	to the file is charged there and takes a reference on it
 * @charge: out: the bytes to charge: the base pages and every large folio
 *	the file held no pin in before
 * @kmem: out: kernel bytes allocated
 *
 * Return: 0; -ENOMEM, or -ETOOMANYREFS when the file would hold more than
 * PINMEM_FOLIO_MAX_PINS pins per page of a large folio, both with @fs
 * unchanged.
 */
int pinmem_folio_add_pages(struct pinmem_folios *fs, struct page **pages,
			   unsigned long n, struct pinmem_cg *cg, u64 *charge,
			   s64 *kmem)
{
	struct pinmem_folio_walk w = { .fs = fs, .cg = cg, .left = n };
	int ret;

	ret = pinmem_folio_walk_pages(pages, n, pinmem_folio_add_one, &w);
	if (ret) {
		/* Undo the pages added before the failure, nothing more. */
		struct pinmem_folio_walk undo = { .fs = fs, .left = n - w.left };

		pinmem_folio_walk_pages(pages, n, pinmem_folio_del_one, &undo);
		WARN_ON_ONCE(w.kmem + undo.kmem);
		return ret;
	}
	pinmem_cg_get(cg, w.added);
	*charge = w.charge;
	*kmem = w.kmem;
	return 0;
}

/**
 * pinmem_folio_del_pages() - take @n pages counted by
 *	pinmem_folio_add_pages() out of @fs again
 * @fs: the file's folios; the file's lock is held
 * @pages: the pages, still pinned
 * @n: how many
 * @kmem: out: kernel bytes freed once @gone is released, as a negative
 *	number
 * @gone: out: the large folios the file no longer holds a pin in, for
 *	pinmem_folio_release() once the pages are unpinned
 *
 * Return: the bytes of the base pages among @pages, to un-charge.
 */
u64 pinmem_folio_del_pages(struct pinmem_folios *fs, struct page **pages,
			   unsigned long n, s64 *kmem, struct list_head *gone)
{
	struct pinmem_folio_walk w = { .fs = fs, .gone = gone, .left = n };

	pinmem_folio_walk_pages(pages, n, pinmem_folio_del_one, &w);
	*kmem = w.kmem;
	return w.charge;
}

/**
 * pinmem_folio_remove() - drop the pins of @r from @fs
 * @fs: the file's folios; the file's lock is held
 * @r: a region counted by pinmem_folio_add(), still pinned
 * @kmem: out: kernel bytes freed (once @gone is released), as a negative
 *	number
 * @gone: out: the large folios the file no longer holds any pin in, for
 *	pinmem_folio_release() once @r is unpinned
 *
 * Return: the bytes of @r's base pages, to un-charge from @r's cgroup.
 */
u64 pinmem_folio_remove(struct pinmem_folios *fs, struct pinmem_region *r,
			s64 *kmem, struct list_head *gone)
{
	struct pinmem_folio_walk w = {
		.fs = fs, .gone = gone, .left = r->pinned,
	};

	pinmem_region_for_each(r, pinmem_folio_del_one, &w);
	*kmem = w.kmem;
	return w.charge;
}

/**
 * pinmem_folio_release() - un-charge and free folios pinmem_folio_remove()
 *	took out
 * @gone: the list; empty afterwards
 * @uncharge: called with each folio's cgroup entry and size, or NULL when
 *	they were never charged (a PIN that failed)
 * @arg: passed on
 */
void pinmem_folio_release(struct list_head *gone,
			  void (*uncharge)(void *arg, struct pinmem_cg *cg,
					   u64 bytes),
			  void *arg)
{
	struct pinmem_folio_ref *ref, *tmp;

	list_for_each_entry_safe(ref, tmp, gone, gone) {
		list_del(&ref->gone);
		if (uncharge)
			uncharge(arg, ref->cg, (u64)ref->pages << PAGE_SHIFT);
		pinmem_cg_put(ref->cg);
		kmem_cache_free(pinmem_folio_cache, ref);
	}
}
