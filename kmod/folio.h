/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem large folios: charged whole, once per file (kmod/folio.c).
 */
#ifndef _PINMEM_FOLIO_H
#define _PINMEM_FOLIO_H

#include <linux/rbtree.h>
#include <linux/types.h>

struct list_head;
struct pinmem_cg;
struct pinmem_region;

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
int pinmem_folio_add(struct pinmem_folios *fs, struct pinmem_region *r,
		     struct pinmem_cg *cg, u64 *charge, s64 *kmem);
u64 pinmem_folio_remove(struct pinmem_folios *fs, struct pinmem_region *r,
			s64 *kmem, struct list_head *gone);
void pinmem_folio_release(struct list_head *gone,
			  void (*uncharge)(void *arg, struct pinmem_cg *cg,
					   u64 bytes),
			  void *arg);

#endif /* _PINMEM_FOLIO_H */
