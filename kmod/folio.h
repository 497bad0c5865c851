/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem large folios: charged whole, once per file (kmod/folio.c).
 */
#ifndef _PINMEM_FOLIO_H
#define _PINMEM_FOLIO_H

#include <linux/rbtree.h>
#include <linux/types.h>

#include <uapi/pinmem.h>

struct list_head;
struct page;
struct pinmem_cg;
struct pinmem_region;

/*
 * PINMEM_FOLIO_MAX_PINS (uapi/pinmem.h): how many pins one file may hold in
 * a large folio, per page of the folio (pages pinned by several
 * overlapping regions count once per region).
 *
 * Each page a FOLL_PIN pin takes of a large folio adds 1 to the folio's
 * reference count, and a pin of a large folio the file already holds is
 * charged nothing, so without a bound one charge would buy any number of
 * references: a user pinning one 1 GiB hugetlb page (or a tmpfs THP) in
 * many overlapping regions could drive the count towards 2^31, where GUP
 * WARNs (a panic with panic_on_warn) and refuses every further pin of the
 * folio, for everyone.  With the bound, a file holding pins in a folio of P
 * pages is charged P pages and holds at most 16 * P of its references, so
 * 2^31 references through pinmem take at least 2^31 / (16 * P) files
 * charged P pages each: 2^27 pages, 512 GiB of 4 KiB pages charged to the
 * budgets at once, whatever the folio's size.  The global budget (a share
 * of RAM) refuses that long before, on any machine with less than 512 GiB
 * it may pin.  16 leaves room for the overlapping regions a program really
 * makes (a buffer pinned whole and in slices) while a refused PIN says
 * ETOOMANYREFS.
 */

/**
 * struct pinmem_folios - the large folios one file holds pins in
 * @root: struct pinmem_folio_ref by first frame
 * @bytes: their total size, all charged
 */
struct pinmem_folios {
	struct rb_root root;
	u64 bytes;
};

int pinmem_folio_init(void);
void pinmem_folio_exit(void);
u64 pinmem_folio_ref_bytes(void);
int pinmem_folio_add_pages(struct pinmem_folios *fs, struct page **pages,
			   unsigned long n, struct pinmem_cg *cg, u64 *charge,
			   s64 *kmem);
u64 pinmem_folio_del_pages(struct pinmem_folios *fs, struct page **pages,
			   unsigned long n, s64 *kmem, struct list_head *gone);
u64 pinmem_folio_remove(struct pinmem_folios *fs, struct pinmem_region *r,
			s64 *kmem, struct list_head *gone);
void pinmem_folio_release(struct list_head *gone,
			  void (*uncharge)(void *arg, struct pinmem_cg *cg,
					   u64 bytes),
			  void *arg);

#endif /* _PINMEM_FOLIO_H */
