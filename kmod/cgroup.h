/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem cgroup budgets (kmod/cgroup.c).
 */
#ifndef _PINMEM_CGROUP_H
#define _PINMEM_CGROUP_H

#include <linux/list.h>
#include <linux/types.h>

struct cgroup;

#include <uapi/pinmem.h>

/**
 * struct pinmem_cg - the budget of one cgroup v2 directory
 * @node: entry in the table, by @id
 * @dead: entry in a list of entries to free
 * @id: the cgroup's id
 * @parent: the parent's entry, NULL below the root (a reference held)
 * @refs: regions and large folios charged to it, child entries, and one
 *	for a limit
 * @limited: @limit applies
 * @cgrp: the cgroup, referenced while @limited, so pinmem_cg_prune() sees
 *	it removed
 * @limit: bytes it and its descendants may pin
 * @pinned_bytes: bytes charged to it and its descendants
 * @peak_bytes: highest @pinned_bytes seen
 * @refused: PINs its limit refused
 *
 * Guarded by the budget lock.
 */
struct pinmem_cg {
	struct hlist_node node;
	struct list_head dead;
	u64 id;
	struct pinmem_cg *parent;
	unsigned int refs;
	bool limited;
	struct cgroup *cgrp;
	u64 limit;
	u64 pinned_bytes;
	u64 peak_bytes;
	u64 refused;
};

struct pinmem_cg *pinmem_cg_get_current(void);
u64 pinmem_cg_current_id(void);
void pinmem_cg_get(struct pinmem_cg *cg, unsigned int n);
void pinmem_cg_put(struct pinmem_cg *cg);
struct pinmem_cg *pinmem_cg_refuser(struct pinmem_cg *cg, u64 bytes);
void pinmem_cg_charge(struct pinmem_cg *cg, s64 bytes);
int pinmem_cg_ioctl(const char *path, struct pinmem_cgroup *arg);
void pinmem_cg_prune(void);
u64 pinmem_cg_ns_root_id(void);
bool pinmem_cg_inside(const struct pinmem_cg *cg, u64 root);
void pinmem_cg_exit(void);
void pinmem_cg_for_each(void (*fn)(const struct pinmem_cg *cg, void *arg),
			void *arg);

#endif /* _PINMEM_CGROUP_H */
