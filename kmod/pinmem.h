/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem internal shared state: the per-open-file object and the counters
 * every budget keeps.  Which lock guards which field is written next to it.
 */
#ifndef _PINMEM_H
#define _PINMEM_H

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/xarray.h>

#include <uapi/pinmem.h>

#include "pinmem_compat.h"
#include "folio.h"

struct mm_struct;
struct pid;
struct pinmem_cg;
struct pinmem_user;
struct user_struct;

/**
 * struct pinmem_acct - use and history of one budget (global, user or file)
 * @pinned_bytes: bytes charged now, @reserved_bytes included
 * @reserved_bytes: bytes of @pinned_bytes that PINs in progress reserved
 *	for the chunk they are pinning (its worst case, settled to what its
 *	pages keep allocated once they are known)
 * @peak_bytes: highest @pinned_bytes seen without reservations
 * @regions: regions held now (PINs that succeeded, not yet released)
 * @pinning: PINs in progress, each holding a region of the caps
 * @pins: successful PINs
 * @unpins: regions released
 * @refused_global: PINs refused by the global budget
 * @refused_user: PINs refused by the per-user budget
 * @refused_rlimit: PINs refused by RLIMIT_MEMLOCK
 * @refused_fault: PINs that failed on the mapping or while pinning
 *	(@refused_refs not included)
 * @refused_regions: PINs refused by a cap on regions
 * @refused_cgroup: PINs refused by a cgroup budget
 * @refused_refs: PINs refused for too many references to a folio or page
 * @kmem_bytes: kernel memory used by the bookkeeping of the regions
 *
 * Every instance is guarded by the budget lock (kmod/budget.c).
 */
struct pinmem_acct {
	u64 pinned_bytes;
	u64 reserved_bytes;
	u64 peak_bytes;
	u64 regions;
	u64 pinning;
	u64 pins;
	u64 unpins;
	u64 refused_global;
	u64 refused_user;
	u64 refused_rlimit;
	u64 refused_fault;
	u64 refused_regions;
	u64 refused_cgroup;
	u64 refused_refs;
	u64 kmem_bytes;
};

/**
 * struct pinmem_file - state of one open /dev/pinmem
 * @lock: serialises changes and walks of @regions against each other
 * @regions: struct pinmem_region by handle, handles from 1
 * @next_handle: cursor for cyclic handle allocation, so a stale handle does
 *	not name a new region right away; guarded by @lock
 * @mm: the opener's mm (mmgrab): pins are charged to its pinned_vm
 * @tgid: the opener's thread group: only its tasks, on @mm, may PIN, UNPIN
 *	and list REGIONS; also shown in the stats file
 * @ustruct: the opener's user_struct (get_uid): pins are charged to its
 *	locked_vm, the RLIMIT_MEMLOCK account io_uring, VFIO and iommufd use
 * @cg_id: id of the cgroup the last PIN was charged to (the opener's at
 *	open until then), 0 for the root cgroup; budget lock
 * @cg_refuser: id of the cgroup that refused the last refused PIN, 0 when
 *	that PIN was refused by anything else (set by pinmem_budget_refuse()
 *	from the reason the PIN gave up with), for STATS and the stats file
 *	only (the refusal is counted with the id the refused PIN got back, as
 *	other threads may refuse meanwhile); budget lock
 * @folios: large folios this file holds pins in (kmod/folio.c), each charged
 *	once; guarded by @lock
 * @comm: the opener's name at open time
 * @uid: the opener's uid, shown in the stats file and deciding who sees it
 * @budget_uid: the user every PIN through this file is charged to: the
 *	real user behind the opener's user namespaces
 *	(pinmem_budget_current_user())
 * @user: the per-user budget entry of @budget_uid (a reference held while
 *	open)
 * @acct: this file's counters; budget lock
 * @id: the file's id in the table of open files (kmod/file.c)
 */
struct pinmem_file {
	struct mutex lock;		/* guards regions and next_handle */
	struct xarray regions;
	u32 next_handle;
	struct mm_struct *mm;
	struct pid *tgid;
	struct user_struct *ustruct;
	u64 cg_id;
	u64 cg_refuser;
	struct pinmem_folios folios;
	char comm[TASK_COMM_LEN];
	kuid_t uid;
	kuid_t budget_uid;
	struct pinmem_user *user;
	struct pinmem_acct acct;
	u32 id;
};

/* kmod/file.c: per-open-file operations, called with validated arguments */
struct pinmem_file *pinmem_file_open(void);
void pinmem_file_release(struct pinmem_file *f);
bool pinmem_file_is_owner(struct pinmem_file *f);
int pinmem_file_pin(struct pinmem_file *f, struct pinmem_pin *pin,
		    struct pinmem_pin __user *upin);
int pinmem_file_unpin(struct pinmem_file *f, u64 handle);
int pinmem_file_regions(struct pinmem_file *f, struct pinmem_regions *arg);

/**
 * struct pinmem_file_view - a copy of one open file for the stats file
 * @tgid: the opener's thread group (a reference, put by
 *	pinmem_files_snapshot_free())
 * @uid: the opener's uid
 * @budget_uid: the user the file's pins are charged to
 * @comm: the opener's name at open time
 * @acct: the file's counters
 * @mm_pinned_bytes: the owner's mm->pinned_vm in bytes
 */
struct pinmem_file_view {
	struct pid *tgid;
	kuid_t uid;
	kuid_t budget_uid;
	char comm[TASK_COMM_LEN];
	struct pinmem_acct acct;
	u64 mm_pinned_bytes;
};

int pinmem_files_snapshot(struct pinmem_file_view **views, size_t *nr);
void pinmem_files_snapshot_free(struct pinmem_file_view *views, size_t nr);

/* kmod/stats.c */
int pinmem_stats_init(void);
void pinmem_stats_exit(void);
void pinmem_stats_fill(struct pinmem_file *f, struct pinmem_stats *st);
void pinmem_refusals_fill(struct pinmem_file *f, struct pinmem_refusals *r);

#endif /* _PINMEM_H */
