/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem cgroup budgets (kmod/cgroup.c).
 */
#ifndef _PINMEM_CGROUP_H
#define _PINMEM_CGROUP_H

#include <linux/list.h>
#include <linux/rbtree.h>
#include <linux/types.h>

struct cgroup;

#include <uapi/pinmem.h>

/**
 * struct pinmem_cg - the budget of one cgroup v2 directory
 * @node: entry in the table, by @id
 * @dead: entry in a list of entries to free
 * @limited_node: entry in the list of limited entries while @limited
 * @id: the cgroup's id
 * @parent: the parent's entry, NULL below the root (a reference held)
 * @refs: regions and large folios charged to it, child entries, and one
 *	for a limit
 * @limited: @limit applies
 * @cgrp: the cgroup, referenced while @limited, so pinmem_cg_prune() sees
 *	it removed
 * @limit: bytes it and its descendants may pin
 * @pinned_bytes: bytes charged to it and its descendants, reservations of
 *	PINs in progress included
 * @reserved_bytes: of @pinned_bytes, reservations (kmod/file.c)
 * @peak_bytes: highest @pinned_bytes seen without reservations; back to 0
 *	when @pinned_bytes is, unless @limited
 * @refused: PINs its limit refused
 *
 * Guarded by the budget lock.
 */
struct pinmem_cg {
	struct rb_node node;
	struct list_head dead;
	struct list_head limited_node;
	u64 id;
	struct pinmem_cg *parent;
	unsigned int refs;
	bool limited;
	struct cgroup *cgrp;
	u64 limit;
	u64 pinned_bytes;
	u64 reserved_bytes;
	u64 peak_bytes;
	u64 refused;
};

struct pinmem_cg *pinmem_cg_get_current(void);
u64 pinmem_cg_current_id(void);
void pinmem_cg_get(struct pinmem_cg *cg, unsigned int n);
void pinmem_cg_put(struct pinmem_cg *cg);
struct pinmem_cg *pinmem_cg_refuser(struct pinmem_cg *cg, u64 bytes);
void pinmem_cg_charge(struct pinmem_cg *cg, s64 bytes, s64 reserved);
int pinmem_cg_ioctl(const char *path, struct pinmem_cgroup *arg);
void pinmem_cg_prune(unsigned int max);
u64 pinmem_cg_ns_root_id(void);
bool pinmem_cg_inside(const struct pinmem_cg *cg, u64 root);
void pinmem_cg_exit(void);
int pinmem_cg_snapshot(struct pinmem_cg **rows, size_t *nr, u64 root);

#endif /* _PINMEM_CGROUP_H */
