// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem budgets: where pins are charged, refused and un-charged.
 *
 * These budgets apply to every PIN, in this order:
 *  - RLIMIT_MEMLOCK of the pinning process, charged on mm->pinned_vm with an
 *    add-then-check-then-undo exactly as ib_umem_get() does (RDMA's view;
 *    shows as VmPin), and on the opener's user->locked_vm with the cmpxchg
 *    loop of io_uring's __io_account_mem() (the account io_uring, VFIO and
 *    iommufd check).  Each of pinmem, RDMA and io_uring thus sees the others'
 *    pins, and a re-exec or a second process of the same user does not start
 *    from zero.  The checks are skipped with CAP_IPC_LOCK or when
 *    enforce_rlimit is 0; both charges are always made so VmPin and
 *    locked_vm stay truthful.
 *  - the caps on regions per file and per user, which bound the kernel
 *    memory a user can make the module spend on bookkeeping.
 *  - the global limit, the caller's per-user limit and the limits of the
 *    pinning task's cgroup and its ancestors (kmod/cgroup.c), checked and
 *    charged together under pinmem_budget_lock, so concurrent charges never
 *    take any counter past its limit, not even transiently.
 *
 * A PIN charges before it pins (kmod/file.c): each chunk its worst case,
 * settled to what its pages keep once they are known.  The charges of PINs
 * in progress (reserved_bytes) count like any other, also in the
 * RLIMIT_MEMLOCK counters io_uring, RDMA and VFIO read: for that moment
 * they see the reservation.
 *
 * The same lock guards the limits, the per-user table and every counter
 * (global, user and file), so a stats reader sees one consistent state.
 *
 * A user's counters are kept for the module's lifetime, not only while it
 * has a file open: an entry no file holds, without override, whose pins or
 * refusals are not zero goes to the tail of pinmem_users_idle, and is taken
 * off again when a file or an override holds it.  At most
 * pinmem_max_idle_users are idle; the one at the head (idle longest) is
 * dropped when one more would pass that, its counters added to
 * pinmem_users_evicted, so the kernel memory users cost stays bounded
 * whoever makes new uids, and every refusal stays counted somewhere.  All
 * of it is O(1) under the lock.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/mm_types.h>
#include <linux/moduleparam.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <linux/user_namespace.h>
#include <linux/wait.h>

#include "budget.h"
#include "cgroup.h"
#include "snapshot.h"

/**
 * struct pinmem_user - per-user budget entry
 * @node: entry in pinmem_users, by @uid
 * @idle: entry in pinmem_users_idle while no file holds it and no
 *	override keeps it (then kept for its counters), else empty
 * @uid: the user (pinmem_budget_current_user())
 * @refs: open files charging this user
 * @overridden: @limit applies instead of the default user limit
 * @limit: the per-uid override
 * @acct: counters
 * @tail_lock: held by the one PIN of this user that pins a page before it
 *	is charged in full (kmod/file.c, pinmem_file_reserve())
 * @gup_lock: held by the one PIN of this user that runs GUP
 *	(pinmem_region_pin_chunk()), so this user adds at most one chunk's
 *	references to a page at a time (PINMEM_FOLIO_REFS_MAX, kmod/region.c)
 *
 * Lives while a file holds it, an override is set or, idle, until dropped
 * for a newer idle one.  All fields but the two mutexes are guarded by
 * pinmem_budget_lock.
 */
struct pinmem_user {
	struct rb_node node;
	struct list_head idle;
	kuid_t uid;
	unsigned int refs;
	bool overridden;
	u64 limit;
	struct pinmem_acct acct;
	struct mutex tail_lock;
	struct mutex gup_lock;
};

/**
 * struct pinmem_limit_param - a limit module parameter
 * @bytes: the limit, a page multiple or PINMEM_UNLIMITED
 * @set: given at load time, so init keeps it instead of the default
 */
struct pinmem_limit_param {
	u64 bytes;
	bool set;
};

static DEFINE_SPINLOCK(pinmem_budget_lock);
static struct rb_root pinmem_users = RB_ROOT;
static LIST_HEAD(pinmem_users_idle);
static u64 pinmem_users_idle_nr;
static struct pinmem_acct pinmem_users_evicted;
static u64 pinmem_users_evicted_nr;
static struct pinmem_acct pinmem_global;
static struct pinmem_limit_param pinmem_global_limit;
static struct pinmem_limit_param pinmem_default_user_limit;
static unsigned int pinmem_max_regions_per_file = 65536;
static unsigned int pinmem_max_regions_per_user = 262144;
static unsigned int pinmem_max_idle_users = 1024;
static bool pinmem_enforce_rlimit = true;
static bool pinmem_params_locked;	/* after load: writers need CAP_SYS_ADMIN */

/*
 * Parameters given to insmod/modprobe are taken as they are; later writes
 * through /sys/module/pinmem/parameters need CAP_SYS_ADMIN, as SET_LIMITS
 * does, so a root without it (a confined container) cannot raise limits.
 */
static int pinmem_param_may_write(void)
{
	if (READ_ONCE(pinmem_params_locked) && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	return 0;
}

/** pinmem_budget_enter() - take the budget lock (kmod/cgroup.c's entries) */
void pinmem_budget_enter(void)
	__acquires(&pinmem_budget_lock)
{
	spin_lock(&pinmem_budget_lock);
}

/** pinmem_budget_leave() - release the budget lock */
void pinmem_budget_leave(void)
	__releases(&pinmem_budget_lock)
{
	spin_unlock(&pinmem_budget_lock);
}

static u64 pinmem_round_limit(u64 bytes)
{
	if (bytes == PINMEM_UNLIMITED)
		return bytes;
	return bytes & ~((u64)PAGE_SIZE - 1);
}

static int pinmem_param_set_limit(const char *val,
				  const struct kernel_param *kp)
{
	struct pinmem_limit_param *p = kp->arg;
	u64 bytes;
	int ret;

	ret = pinmem_param_may_write();
	if (ret)
		return ret;
	ret = kstrtoull(val, 0, &bytes);
	if (ret)
		return ret;
	spin_lock(&pinmem_budget_lock);
	p->bytes = pinmem_round_limit(bytes);
	p->set = true;
	spin_unlock(&pinmem_budget_lock);
	return 0;
}

static int pinmem_param_get_limit(char *buffer, const struct kernel_param *kp)
{
	struct pinmem_limit_param *p = kp->arg;
	u64 bytes;

	spin_lock(&pinmem_budget_lock);
	bytes = p->bytes;
	spin_unlock(&pinmem_budget_lock);
	return sysfs_emit(buffer, "%llu\n", bytes);
}

static const struct kernel_param_ops pinmem_limit_ops = {
	.set = pinmem_param_set_limit,
	.get = pinmem_param_get_limit,
};

static int pinmem_param_set_bool(const char *val, const struct kernel_param *kp)
{
	bool v;
	int ret;

	ret = pinmem_param_may_write();
	if (ret)
		return ret;
	ret = kstrtobool(val, &v);
	if (ret)
		return ret;
	spin_lock(&pinmem_budget_lock);
	WRITE_ONCE(*(bool *)kp->arg, v);
	spin_unlock(&pinmem_budget_lock);
	return 0;
}

static int pinmem_param_get_bool(char *buffer, const struct kernel_param *kp)
{
	return sysfs_emit(buffer, "%d\n", READ_ONCE(*(bool *)kp->arg));
}

static const struct kernel_param_ops pinmem_bool_ops = {
	.set = pinmem_param_set_bool,
	.get = pinmem_param_get_bool,
};

static int pinmem_param_set_uint(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = pinmem_param_may_write();
	if (ret)
		return ret;
	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (!v)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int pinmem_param_get_uint(char *buffer, const struct kernel_param *kp)
{
	return sysfs_emit(buffer, "%u\n", READ_ONCE(*(unsigned int *)kp->arg));
}

static const struct kernel_param_ops pinmem_uint_ops = {
	.set = pinmem_param_set_uint,
	.get = pinmem_param_get_uint,
};

static void pinmem_users_trim(void);

/* max_idle_users: a lowered bound holds as soon as the write returns. */
static int pinmem_param_set_idle(const char *val, const struct kernel_param *kp)
{
	int ret = pinmem_param_set_uint(val, kp);

	if (!ret)
		pinmem_users_trim();
	return ret;
}

static const struct kernel_param_ops pinmem_idle_ops = {
	.set = pinmem_param_set_idle,
	.get = pinmem_param_get_uint,
};

module_param_cb(global_limit, &pinmem_limit_ops, &pinmem_global_limit, 0644);
MODULE_PARM_DESC(global_limit,
		 "Bytes all users together may pin (default: half of RAM)");
module_param_cb(default_user_limit, &pinmem_limit_ops,
		&pinmem_default_user_limit, 0644);
MODULE_PARM_DESC(default_user_limit,
		 "Bytes one user without an override may pin (default: half of RAM)");
module_param_cb(enforce_rlimit, &pinmem_bool_ops, &pinmem_enforce_rlimit,
		0644);
MODULE_PARM_DESC(enforce_rlimit,
		 "Check RLIMIT_MEMLOCK for callers without CAP_IPC_LOCK (default: 1)");
module_param_cb(max_regions_per_file, &pinmem_uint_ops,
		&pinmem_max_regions_per_file, 0644);
MODULE_PARM_DESC(max_regions_per_file,
		 "Regions one open file may hold, 1 or more (default: 65536)");
module_param_cb(max_regions_per_user, &pinmem_uint_ops,
		&pinmem_max_regions_per_user, 0644);
MODULE_PARM_DESC(max_regions_per_user,
		 "Regions all files of one user may hold, 1 or more (default: 262144)");
module_param_cb(max_idle_users, &pinmem_idle_ops, &pinmem_max_idle_users,
		0644);
MODULE_PARM_DESC(max_idle_users,
		 "Users without open files kept for their counters, 1 or more (default: 1024)");

/**
 * pinmem_budget_init() - fill in the limits not given at load time
 *
 * From now on parameter writes need CAP_SYS_ADMIN.
 *
 * The default of both limits is half of RAM: enough for a loader's batch
 * ring, while the rest of the machine keeps room to reclaim and migrate.
 */
void pinmem_budget_init(void)
{
	u64 half = pinmem_round_limit(((u64)totalram_pages() << PAGE_SHIFT) / 2);

	spin_lock(&pinmem_budget_lock);
	if (!pinmem_global_limit.set)
		pinmem_global_limit.bytes = half;
	if (!pinmem_default_user_limit.set)
		pinmem_default_user_limit.bytes = half;
	WRITE_ONCE(pinmem_params_locked, true);
	spin_unlock(&pinmem_budget_lock);
}

/**
 * pinmem_budget_exit() - free the per-user table at module unload
 *
 * No file is open any more (the module is pinned by every open file), so
 * only entries kept for their overrides or their counters (idle) remain.
 */
void pinmem_budget_exit(void)
{
	struct pinmem_user *u, *tmp;

	rbtree_postorder_for_each_entry_safe(u, tmp, &pinmem_users, node) {
		WARN_ON_ONCE(u->refs || u->acct.pinned_bytes);
		mutex_destroy(&u->gup_lock);
		mutex_destroy(&u->tail_lock);
		kfree(u);
	}
	pinmem_users = RB_ROOT;
	INIT_LIST_HEAD(&pinmem_users_idle);
	pinmem_users_idle_nr = 0;
}

/**
 * pinmem_budget_current_user() - the user the caller's PINs are charged to
 *
 * The real user behind the caller's user namespaces, as mlock's ucounts
 * charge it at the top: the caller's uid, or, inside user namespaces an
 * unprivileged user made, that user (the owner of the outermost of them,
 * walking up until the initial namespace or a namespace root made).  A
 * user who maps subordinate uids in a namespace of its own thus stays one
 * user, with one budget and one region cap, however many uids it maps.
 * Namespaces root made (container runtimes, which give each container its
 * own range of host uids) keep the host uid of each process: root chose
 * those uids, and its containers do not share root's budget.
 *
 * Return: the kuid.
 */
kuid_t pinmem_budget_current_user(void)
{
	const struct user_namespace *ns = current_user_ns();
	kuid_t uid = current_uid();

	for (; ns != &init_user_ns; ns = ns->parent) {
		if (uid_eq(ns->owner, GLOBAL_ROOT_UID))
			break;
		uid = ns->owner;
	}
	return uid;
}

/*
 * The entry of @uid, or NULL; with @after, the first entry above @uid.
 * Caller holds pinmem_budget_lock.  O(log users).
 */
static struct pinmem_user *pinmem_user_search(kuid_t uid, bool after)
{
	struct rb_node *n = pinmem_users.rb_node;
	struct pinmem_user *u, *above = NULL;

	while (n) {
		u = rb_entry(n, struct pinmem_user, node);
		if (uid_gt(u->uid, uid)) {
			above = u;
			n = n->rb_left;
		} else if (uid_lt(u->uid, uid)) {
			n = n->rb_right;
		} else if (after) {
			n = n->rb_right;
		} else {
			return u;
		}
	}
	return after ? above : NULL;
}

static struct pinmem_user *pinmem_user_find(kuid_t uid)
{
	return pinmem_user_search(uid, false);
}

/* Caller holds pinmem_budget_lock and knows @uid has no entry yet. */
static void pinmem_user_insert(struct pinmem_user *new, kuid_t uid)
{
	struct rb_node **p = &pinmem_users.rb_node, *parent = NULL;
	struct pinmem_user *u;

	new->uid = uid;
	while (*p) {
		parent = *p;
		u = rb_entry(parent, struct pinmem_user, node);
		p = uid_gt(u->uid, uid) ? &parent->rb_left : &parent->rb_right;
	}
	rb_link_node(&new->node, parent, p);
	rb_insert_color(&new->node, &pinmem_users);
}

/* A zeroed entry, not in the table yet; NULL when out of memory. */
static struct pinmem_user *pinmem_user_alloc(void)
{
	/* Charged to the opener's memory cgroup: an entry can outlive its files. */
	struct pinmem_user *u = kzalloc(sizeof(*u), GFP_KERNEL_ACCOUNT);

	if (u) {
		INIT_LIST_HEAD(&u->idle);
		mutex_init(&u->tail_lock);
		mutex_init(&u->gup_lock);
	}
	return u;
}

static void pinmem_user_free(struct pinmem_user *u)
{
	if (!u)
		return;
	mutex_destroy(&u->gup_lock);
	mutex_destroy(&u->tail_lock);
	kfree(u);
}

/*
 * Find @uid's entry or insert @*spare for it; the spare is consumed if used.
 * The caller is about to hold the entry (a file or an override), so it is
 * idle no more.
 */
static struct pinmem_user *pinmem_user_lookup(kuid_t uid,
					      struct pinmem_user **spare)
{
	struct pinmem_user *u = pinmem_user_find(uid);

	if (!u) {
		u = *spare;
		*spare = NULL;
		pinmem_user_insert(u, uid);
	} else if (!list_empty(&u->idle)) {
		list_del_init(&u->idle);
		pinmem_users_idle_nr--;
	}
	return u;
}

/* PINs of @a refused, for any reason. */
static u64 pinmem_acct_refused_all(const struct pinmem_acct *a)
{
	return a->refused_global + a->refused_user + a->refused_rlimit +
	       a->refused_fault + a->refused_regions + a->refused_cgroup +
	       a->refused_refs;
}

/* Add the history of @src (what only grows) to @dst. */
static void pinmem_acct_fold(struct pinmem_acct *dst,
			     const struct pinmem_acct *src)
{
	dst->pins += src->pins;
	dst->unpins += src->unpins;
	dst->refused_global += src->refused_global;
	dst->refused_user += src->refused_user;
	dst->refused_rlimit += src->refused_rlimit;
	dst->refused_fault += src->refused_fault;
	dst->refused_regions += src->refused_regions;
	dst->refused_cgroup += src->refused_cgroup;
	dst->refused_refs += src->refused_refs;
	dst->peak_bytes = max(dst->peak_bytes, src->peak_bytes);
}

/* Entries pinmem_user_retire() may hand back to free: itself and one more. */
#define PINMEM_RETIRE_MAX	2
/* Entries pinmem_users_trim() drops per hold of the budget lock. */
#define PINMEM_TRIM_BATCH	64

/*
 * Caller holds pinmem_budget_lock.  Drop the idle entry idle longest, its
 * counters folded into pinmem_users_evicted; NULL when none is over the
 * bound.  The caller frees what it returns after unlocking.
 */
static struct pinmem_user *pinmem_user_evict(void)
{
	struct pinmem_user *old;

	if (pinmem_users_idle_nr <= READ_ONCE(pinmem_max_idle_users))
		return NULL;
	old = list_first_entry(&pinmem_users_idle, struct pinmem_user, idle);
	list_del_init(&old->idle);
	pinmem_users_idle_nr--;
	pinmem_acct_fold(&pinmem_users_evicted, &old->acct);
	pinmem_users_evicted_nr++;
	rb_erase(&old->node, &pinmem_users);
	return old;
}

/*
 * Caller holds pinmem_budget_lock and has just dropped a hold on @u (a
 * file's or the override).  An entry still held stays; one with nothing to
 * show is unlinked; any other becomes the newest idle one, and the one
 * idle longest is dropped if that passes pinmem_max_idle_users (the bound
 * held before, pinmem_users_trim() sees to that).  Returns how many
 * entries it put in @gone, for the caller to free after unlocking.
 */
static unsigned int pinmem_user_retire(struct pinmem_user *u,
				       struct pinmem_user **gone)
{
	struct pinmem_user *old;
	unsigned int n = 0;

	if (u->refs || u->overridden)
		return 0;
	if (!u->acct.pins && !pinmem_acct_refused_all(&u->acct)) {
		rb_erase(&u->node, &pinmem_users);
		gone[n++] = u;
		return n;
	}
	if (list_empty(&u->idle)) {
		list_add_tail(&u->idle, &pinmem_users_idle);
		pinmem_users_idle_nr++;
	}
	while (n < PINMEM_RETIRE_MAX && (old = pinmem_user_evict()))
		gone[n++] = old;
	return n;
}

static void pinmem_user_free_all(struct pinmem_user **gone, unsigned int n)
{
	while (n--)
		pinmem_user_free(gone[n]);
}

/*
 * Drop idle entries until at most pinmem_max_idle_users remain, a batch
 * per hold of the lock (after the bound was lowered).
 */
static void pinmem_users_trim(void)
{
	struct pinmem_user *gone[PINMEM_TRIM_BATCH];
	unsigned int n;

	do {
		spin_lock(&pinmem_budget_lock);
		for (n = 0; n < PINMEM_TRIM_BATCH; n++) {
			gone[n] = pinmem_user_evict();
			if (!gone[n])
				break;
		}
		spin_unlock(&pinmem_budget_lock);
		pinmem_user_free_all(gone, n);
		cond_resched();	/* from a very large bound to a small one */
	} while (n == PINMEM_TRIM_BATCH);
}

/**
 * pinmem_user_get() - find or create the budget entry of @uid, take a ref
 * @uid: the user
 *
 * Return: the entry, or NULL when out of memory.
 */
struct pinmem_user *pinmem_user_get(kuid_t uid)
{
	struct pinmem_user *spare, *u;

	spare = pinmem_user_alloc();
	if (!spare)
		return NULL;
	spin_lock(&pinmem_budget_lock);
	u = pinmem_user_lookup(uid, &spare);
	u->refs++;
	spin_unlock(&pinmem_budget_lock);
	pinmem_user_free(spare);
	return u;
}

/**
 * pinmem_user_put() - drop a ref from pinmem_user_get()
 * @u: the entry; when no file holds it and it has no override, kept idle
 *	for its counters (freed if they are all zero or when dropped to keep
 *	max_idle_users)
 */
void pinmem_user_put(struct pinmem_user *u)
{
	struct pinmem_user *gone[PINMEM_RETIRE_MAX];
	unsigned int n;

	spin_lock(&pinmem_budget_lock);
	u->refs--;
	n = pinmem_user_retire(u, gone);
	spin_unlock(&pinmem_budget_lock);
	pinmem_user_free_all(gone, n);
}

/**
 * pinmem_budget_tail_lock() - take the tail lock of @f's user
 * @f: the file pinning
 *
 * Held by a PIN while it pins pages one at a time ahead of their charge
 * (kmod/file.c), so a user has at most one such page at any moment however
 * many threads and files it pins with.
 *
 * Return: 0 or -EINTR on a fatal signal.
 */
int pinmem_budget_tail_lock(struct pinmem_file *f)
{
	return mutex_lock_killable(&f->user->tail_lock) ? -EINTR : 0;
}

/**
 * pinmem_budget_tail_unlock() - release what pinmem_budget_tail_lock() took
 * @f: the file
 */
void pinmem_budget_tail_unlock(struct pinmem_file *f)
{
	mutex_unlock(&f->user->tail_lock);
}

/**
 * pinmem_budget_gup_lock() - take the GUP lock of @f's user
 * @f: the file pinning
 *
 * Taken before the mmap lock, around one chunk's GUP: a user waits only
 * for its own PINs.
 *
 * Return: 0 or -EINTR on a fatal signal.
 */
int pinmem_budget_gup_lock(struct pinmem_file *f)
{
	return mutex_lock_killable(&f->user->gup_lock) ? -EINTR : 0;
}

/**
 * pinmem_budget_gup_unlock() - release what pinmem_budget_gup_lock() took
 * @f: the file
 */
void pinmem_budget_gup_unlock(struct pinmem_file *f)
{
	mutex_unlock(&f->user->gup_lock);
}

/* Caller holds pinmem_budget_lock. */
static u64 pinmem_user_limit(const struct pinmem_user *u)
{
	return u->overridden ? u->limit : pinmem_default_user_limit.bytes;
}

static bool pinmem_fits(u64 pinned, u64 limit, u64 bytes)
{
	if (limit == PINMEM_UNLIMITED)
		return true;
	return pinned <= limit && bytes <= limit - pinned;
}

static void pinmem_acct_peak(struct pinmem_acct *a)
{
	if (a->pinned_bytes - a->reserved_bytes > a->peak_bytes)
		a->peak_bytes = a->pinned_bytes - a->reserved_bytes;
}

static void pinmem_acct_charge(struct pinmem_acct *a, u64 bytes, bool reserve)
{
	a->pinned_bytes += bytes;
	if (reserve)
		a->reserved_bytes += bytes;
	pinmem_acct_peak(a);
}

/* Apply @fn to the global, the user's and the file's counters. */
#define pinmem_acct_all(f, fn, ...)				\
	do {							\
		fn(&pinmem_global, ##__VA_ARGS__);		\
		fn(&(f)->user->acct, ##__VA_ARGS__);		\
		fn(&(f)->acct, ##__VA_ARGS__);			\
	} while (0)

static void pinmem_acct_refuse(struct pinmem_acct *a, u32 reason)
{
	switch (reason) {
	case PINMEM_REFUSED_RLIMIT:
	case PINMEM_REFUSED_RLIMIT_USER:
		a->refused_rlimit++;
		break;
	case PINMEM_REFUSED_GLOBAL:
		a->refused_global++;
		break;
	case PINMEM_REFUSED_USER:
		a->refused_user++;
		break;
	case PINMEM_REFUSED_REGIONS_FILE:
	case PINMEM_REFUSED_REGIONS_USER:
		a->refused_regions++;
		break;
	case PINMEM_REFUSED_CGROUP:
		a->refused_cgroup++;
		break;
	case PINMEM_REFUSED_FOLIO_PINS:
	case PINMEM_REFUSED_PAGE_REFS:
		a->refused_refs++;
		break;
	default:
		a->refused_fault++;
		break;
	}
}

/**
 * pinmem_acct_refused() - one refusal counter of @a
 * @a: a copy of the counters
 * @reason: PINMEM_REASON_*
 *
 * Return: PINs refused for @reason, 0 for a reason not counted.
 */
u64 pinmem_acct_refused(const struct pinmem_acct *a, unsigned int reason)
{
	switch (reason) {
	case PINMEM_REASON_GLOBAL:
		return a->refused_global;
	case PINMEM_REASON_USER:
		return a->refused_user;
	case PINMEM_REASON_RLIMIT:
		return a->refused_rlimit;
	case PINMEM_REASON_FAULT:
		return a->refused_fault;
	case PINMEM_REASON_REGIONS:
		return a->refused_regions;
	case PINMEM_REASON_CGROUP:
		return a->refused_cgroup;
	case PINMEM_REASON_REFS:
		return a->refused_refs;
	}
	return 0;
}

/**
 * pinmem_budget_is_bytes() - is @reason a budget of bytes (not of regions)?
 * @reason: PINMEM_REFUSED_*
 *
 * Return: true for the global, user, cgroup and RLIMIT_MEMLOCK budgets.
 */
bool pinmem_budget_is_bytes(u32 reason)
{
	return (reason >= PINMEM_REFUSED_GLOBAL &&
		reason <= PINMEM_REFUSED_RLIMIT_USER) ||
	       reason == PINMEM_REFUSED_CGROUP;
}

/**
 * pinmem_budget_errno() - the errno PIN returns for a budget refusal
 * @reason: PINMEM_REFUSED_*
 *
 * Return: the negative errno of include/uapi/pinmem.h.
 */
int pinmem_budget_errno(u32 reason)
{
	switch (reason) {
	case PINMEM_REFUSED_GLOBAL:
		return -PINMEM_ERR_GLOBAL;
	case PINMEM_REFUSED_USER:
		return -PINMEM_ERR_USER;
	case PINMEM_REFUSED_RLIMIT:
	case PINMEM_REFUSED_RLIMIT_USER:
		return -PINMEM_ERR_RLIMIT;
	case PINMEM_REFUSED_REGIONS_FILE:
	case PINMEM_REFUSED_REGIONS_USER:
		return -PINMEM_ERR_REGIONS;
	case PINMEM_REFUSED_CGROUP:
		return -PINMEM_ERR_CGROUP;
	case PINMEM_REFUSED_FOLIO_PINS:
	case PINMEM_REFUSED_PAGE_REFS:
		return -PINMEM_ERR_FOLIO_PINS;
	}
	return -EFAULT;
}

/*
 * Charge @npages to user->locked_vm unless that passes @limit pages: the
 * cmpxchg loop of io_uring's __io_account_mem(), so both refuse alike.
 */
static bool pinmem_locked_vm_charge(struct user_struct *u,
				    unsigned long npages, unsigned long limit)
{
	unsigned long cur = atomic_long_read(&u->locked_vm), new;

	do {
		new = cur + npages;
		if (new < cur || new > limit)
			return false;
	} while (!atomic_long_try_cmpxchg(&u->locked_vm, &cur, new));
	return true;
}

/*
 * Charge @npages to @f->mm->pinned_vm and @f->ustruct->locked_vm; refuse
 * when either passes RLIMIT_MEMLOCK.  Returns 0 or PINMEM_REFUSED_RLIMIT*.
 */
/*
 * CAP_IPC_LOCK, asked only when over, as ib_umem_get() does: no audit
 * noise.  A reservation that does not fit is tried again smaller
 * (kmod/file.c), so it asks without auditing.
 */
static bool pinmem_ipc_lock(bool reserve)
{
	return reserve ? ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK) :
			 capable(CAP_IPC_LOCK);
}

static u32 pinmem_rlimit_charge(struct pinmem_file *f, unsigned long npages,
				bool reserve)
{
	unsigned long limit = ULONG_MAX;

	if (READ_ONCE(pinmem_enforce_rlimit))
		limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;

	if (atomic64_add_return(npages, &f->mm->pinned_vm) > limit &&
	    !pinmem_ipc_lock(reserve)) {
		atomic64_sub(npages, &f->mm->pinned_vm);
		return PINMEM_REFUSED_RLIMIT;
	}
	if (!pinmem_locked_vm_charge(f->ustruct, npages, limit)) {
		if (!pinmem_ipc_lock(reserve)) {
			atomic64_sub(npages, &f->mm->pinned_vm);
			return PINMEM_REFUSED_RLIMIT_USER;
		}
		atomic_long_add(npages, &f->ustruct->locked_vm);
	}
	return 0;
}

static void pinmem_rlimit_uncharge(struct pinmem_file *f, unsigned long npages)
{
	atomic64_sub(npages, &f->mm->pinned_vm);
	atomic_long_sub(npages, &f->ustruct->locked_vm);
}

/* A PIN in progress takes a region of the caps until it is committed. */
static void pinmem_acct_reserve(struct pinmem_acct *a, bool region)
{
	a->pinning += region;
}

/**
 * pinmem_budget_charge() - charge @bytes (and a region) to every budget
 * @f: the file pinning; the caller runs on @f->mm
 * @cg: the cgroup entry the PIN is charged to (the pinning task's), or NULL
 * @bytes: page multiple
 * @flags: PINMEM_CHARGE_REGION: also take one region of the caps (a new
 *	PIN); PINMEM_CHARGE_RESERVE: @bytes are a chunk's worst case, for
 *	pinmem_budget_settle() once its pages are known
 * @refuser: out: the id of the cgroup whose limit refused, else 0; for
 *	pinmem_budget_refuse(), as @f->cg_refuser may be another thread's by
 *	then
 *
 * Either every budget is charged or none is.  A refusal is not counted:
 * the caller counts it with pinmem_budget_refuse() once it gives up.
 *
 * Return: 0 or PINMEM_REFUSED_* (see pinmem_budget_errno()).
 */
u32 pinmem_budget_charge(struct pinmem_file *f, struct pinmem_cg *cg,
			 u64 bytes, unsigned int flags, u64 *refuser)
{
	bool region = flags & PINMEM_CHARGE_REGION;
	bool reserve = flags & PINMEM_CHARGE_RESERVE;
	unsigned long npages = bytes >> PAGE_SHIFT;
	struct pinmem_cg *over;
	u32 reason;

	*refuser = 0;
	reason = pinmem_rlimit_charge(f, npages, reserve);

	spin_lock(&pinmem_budget_lock);
	f->cg_id = cg ? cg->id : 0;
	if (!reason && region &&
	    f->acct.regions + f->acct.pinning >=
	    READ_ONCE(pinmem_max_regions_per_file))
		reason = PINMEM_REFUSED_REGIONS_FILE;
	if (!reason && region &&
	    f->user->acct.regions + f->user->acct.pinning >=
	    READ_ONCE(pinmem_max_regions_per_user))
		reason = PINMEM_REFUSED_REGIONS_USER;
	if (!reason && !pinmem_fits(pinmem_global.pinned_bytes,
				    pinmem_global_limit.bytes, bytes))
		reason = PINMEM_REFUSED_GLOBAL;
	if (!reason && !pinmem_fits(f->user->acct.pinned_bytes,
				    pinmem_user_limit(f->user), bytes))
		reason = PINMEM_REFUSED_USER;
	if (!reason) {
		over = pinmem_cg_refuser(cg, bytes);
		if (over) {
			reason = PINMEM_REFUSED_CGROUP;
			*refuser = over->id;
		}
	}
	if (!reason) {
		pinmem_acct_all(f, pinmem_acct_charge, bytes, reserve);
		pinmem_acct_all(f, pinmem_acct_reserve, region);
		pinmem_cg_charge(cg, bytes, reserve ? bytes : 0);
	}
	spin_unlock(&pinmem_budget_lock);

	if (reason && reason != PINMEM_REFUSED_RLIMIT &&
	    reason != PINMEM_REFUSED_RLIMIT_USER)
		pinmem_rlimit_uncharge(f, npages);
	return reason;
}

/* Woken when a reservation is settled or given back. */
static DECLARE_WAIT_QUEUE_HEAD(pinmem_settle_wq);

static u64 pinmem_room(u64 pinned, u64 limit)
{
	if (limit == PINMEM_UNLIMITED)
		return U64_MAX;
	return pinned < limit ? limit - pinned : 0;
}

/**
 * pinmem_budget_room() - bytes @f could charge now
 * @f: the file pinning; the caller runs on @f->mm
 * @cg: the cgroup entry its PIN is charged to, or NULL
 *
 * The least room left in any budget a charge of @f would go to, the
 * caller's RLIMIT_MEMLOCK (on mm->pinned_vm and user->locked_vm) included
 * unless it is not bound by it.  A hint for sizing a reservation (it may
 * be gone by the time the charge is made), so a PIN charges once what
 * fits rather than trying sizes: io_uring, RDMA and VFIO, which share the
 * RLIMIT_MEMLOCK counters, see only reservations that fit.
 *
 * Return: bytes, U64_MAX when nothing limits it.
 */
u64 pinmem_budget_room(struct pinmem_file *f, struct pinmem_cg *cg)
{
	u64 room = U64_MAX, used, lim;
	struct pinmem_cg *c;

	if (READ_ONCE(pinmem_enforce_rlimit) &&
	    !ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK)) {
		lim = rlimit(RLIMIT_MEMLOCK);
		used = max_t(u64, atomic64_read(&f->mm->pinned_vm),
			     atomic_long_read(&f->ustruct->locked_vm));
		if (lim != RLIM_INFINITY)
			room = pinmem_room(used << PAGE_SHIFT, lim);
	}
	spin_lock(&pinmem_budget_lock);
	room = min(room, pinmem_room(pinmem_global.pinned_bytes,
				     pinmem_global_limit.bytes));
	room = min(room, pinmem_room(f->user->acct.pinned_bytes,
				     pinmem_user_limit(f->user)));
	for (c = cg; c; c = c->parent)
		if (c->limited)
			room = min(room, pinmem_room(c->pinned_bytes, c->limit));
	spin_unlock(&pinmem_budget_lock);
	return room;
}

/*
 * Bytes reserved by PINs in progress in the budget that refused with
 * @reason (@refuser: the cgroup, for a cgroup's refusal).  RLIMIT_MEMLOCK
 * counts a user's and a process's pins, of which the user's reservations
 * are the ones pinmem knows.
 */
static u64 pinmem_refuser_reserved(struct pinmem_file *f, struct pinmem_cg *cg,
				   u32 reason, u64 refuser)
{
	u64 bytes = 0;

	spin_lock(&pinmem_budget_lock);
	switch (reason) {
	case PINMEM_REFUSED_GLOBAL:
		bytes = pinmem_global.reserved_bytes;
		break;
	case PINMEM_REFUSED_USER:
	case PINMEM_REFUSED_RLIMIT:
	case PINMEM_REFUSED_RLIMIT_USER:
		bytes = f->user->acct.reserved_bytes;
		break;
	case PINMEM_REFUSED_CGROUP:
		for (; cg; cg = cg->parent)
			if (cg->id == refuser)
				bytes = cg->reserved_bytes;
		break;
	}
	spin_unlock(&pinmem_budget_lock);
	return bytes;
}

/**
 * pinmem_budget_wait_reserved() - wait for reservations in a refusing budget
 * @f: the file whose charge was refused
 * @cg: its cgroup entry, or NULL
 * @reason: the refusal
 * @refuser: the refusing cgroup's id, for PINMEM_REFUSED_CGROUP
 * @timeout: jiffies to wait at most
 *
 * A refusal while other PINs hold reservations in the same budget may be
 * only their worst cases, settled a moment later to what their pages take:
 * the caller may try again once they are.
 *
 * Return: true when that budget held reservations (try again), false when
 * the refusal stands or on a fatal signal.
 */
bool pinmem_budget_wait_reserved(struct pinmem_file *f, struct pinmem_cg *cg,
				 u32 reason, u64 refuser, long timeout)
{
	if (!pinmem_refuser_reserved(f, cg, reason, refuser))
		return false;
	return wait_event_killable_timeout(pinmem_settle_wq,
		!pinmem_refuser_reserved(f, cg, reason, refuser), timeout) >= 0;
}

static void pinmem_acct_settle(struct pinmem_acct *a, u64 reserved,
			       u64 actual)
{
	a->pinned_bytes -= reserved - actual;
	a->reserved_bytes -= reserved;
	pinmem_acct_peak(a);
}

/**
 * pinmem_budget_settle() - turn a chunk's reservation into its real charge
 * @f: the file
 * @cg: as charged
 * @reserved: the chunk's worst case, charged with PINMEM_CHARGE_RESERVE
 * @actual: what its pages keep allocated, at most @reserved; the rest is
 *	given back
 */
void pinmem_budget_settle(struct pinmem_file *f, struct pinmem_cg *cg,
			  u64 reserved, u64 actual)
{
	if (WARN_ON_ONCE(actual > reserved))
		actual = reserved;
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_settle, reserved, actual);
	pinmem_cg_charge(cg, -(s64)(reserved - actual), -(s64)reserved);
	spin_unlock(&pinmem_budget_lock);
	pinmem_rlimit_uncharge(f, (reserved - actual) >> PAGE_SHIFT);
	if (reserved)
		wake_up_all(&pinmem_settle_wq);
}

static void pinmem_acct_commit(struct pinmem_acct *a)
{
	a->pinning--;
	a->regions++;
	a->pins++;
}

/**
 * pinmem_budget_commit() - count a PIN charged earlier as a successful one
 * @f: the file
 */
void pinmem_budget_commit(struct pinmem_file *f)
{
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_commit);
	spin_unlock(&pinmem_budget_lock);
}

static void pinmem_acct_uncharge(struct pinmem_acct *a, u64 bytes,
				 bool reserve)
{
	WARN_ON_ONCE(a->pinned_bytes < bytes);
	a->pinned_bytes -= bytes;
	if (reserve)
		a->reserved_bytes -= bytes;
}

static void pinmem_acct_unreserve(struct pinmem_acct *a, bool region)
{
	a->pinning -= region;
}

/**
 * pinmem_budget_uncharge() - undo pinmem_budget_charge(), counting nothing
 * @f: the file
 * @cg: as charged
 * @bytes: as charged
 * @flags: as charged
 */
void pinmem_budget_uncharge(struct pinmem_file *f, struct pinmem_cg *cg,
			    u64 bytes, unsigned int flags)
{
	bool reserve = flags & PINMEM_CHARGE_RESERVE;

	if (!bytes && !(flags & PINMEM_CHARGE_REGION))
		return;
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_uncharge, bytes, reserve);
	pinmem_acct_all(f, pinmem_acct_unreserve,
			!!(flags & PINMEM_CHARGE_REGION));
	pinmem_cg_charge(cg, -(s64)bytes, reserve ? -(s64)bytes : 0);
	spin_unlock(&pinmem_budget_lock);
	pinmem_rlimit_uncharge(f, bytes >> PAGE_SHIFT);
	if (reserve && bytes)
		wake_up_all(&pinmem_settle_wq);
}

/**
 * pinmem_budget_refuse() - count a PIN that failed for @reason
 * @f: the file
 * @cg: the cgroup entry the PIN was to be charged to, or NULL
 * @reason: PINMEM_REFUSED_*; the non-budget ones count as refused_fault
 * @refuser: for PINMEM_REFUSED_CGROUP, the id pinmem_budget_charge() gave
 *	back: that ancestor of @cg counts the refusal; else 0
 */
void pinmem_budget_refuse(struct pinmem_file *f, struct pinmem_cg *cg,
			  u32 reason, u64 refuser)
{
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_refuse, reason);
	/*
	 * Named by the refusal the PIN ended with, not by a budget that
	 * refused on the way (a PIN may still succeed through the fallback):
	 * 0 when that refusal was not a cgroup's.
	 */
	f->cg_refuser = reason == PINMEM_REFUSED_CGROUP ? refuser : 0;
	for (; reason == PINMEM_REFUSED_CGROUP && cg; cg = cg->parent)
		if (cg->id == refuser)
			cg->refused++;
	spin_unlock(&pinmem_budget_lock);
}

static void pinmem_acct_kmem(struct pinmem_acct *a, s64 bytes)
{
	a->kmem_bytes += bytes;
}

/**
 * pinmem_budget_kmem() - count kernel memory of bookkeeping made or freed
 * @f: the file
 * @bytes: positive when allocated, negative when freed
 */
void pinmem_budget_kmem(struct pinmem_file *f, s64 bytes)
{
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_kmem, bytes);
	spin_unlock(&pinmem_budget_lock);
}

static void pinmem_acct_release(struct pinmem_acct *a)
{
	a->regions--;
	a->unpins++;
}

/**
 * pinmem_budget_release() - un-charge a released region
 * @f: the file that held it; its owner mm is un-charged even after exit
 * @cg: the cgroup entry it was charged to, or NULL
 * @bytes: as charged
 */
void pinmem_budget_release(struct pinmem_file *f, struct pinmem_cg *cg,
			   u64 bytes)
{
	spin_lock(&pinmem_budget_lock);
	pinmem_acct_all(f, pinmem_acct_uncharge, bytes, false);
	pinmem_acct_all(f, pinmem_acct_release);
	pinmem_cg_charge(cg, -(s64)bytes, 0);
	spin_unlock(&pinmem_budget_lock);
	pinmem_rlimit_uncharge(f, bytes >> PAGE_SHIFT);
}

/**
 * pinmem_budget_user_locked() - the opener's user->locked_vm
 * @f: the file
 *
 * Return: bytes pinned or locked by every process of @f's opener's user
 * through pinmem, io_uring, VFIO and iommufd.
 */
u64 pinmem_budget_user_locked(struct pinmem_file *f)
{
	return (u64)atomic_long_read(&f->ustruct->locked_vm) << PAGE_SHIFT;
}

/*
 * Whether @t has CAP_IPC_LOCK in the initial user namespace, as
 * capable(CAP_IPC_LOCK) would answer for it.  has_capability_noaudit() is
 * not exported from 7.x on; under the capability rules a task has a
 * capability in the initial namespace only with its creds there.
 */
static bool pinmem_task_ipc_lock(struct task_struct *t)
{
	const struct cred *cred = get_task_cred(t);
	bool cap = cred->user_ns == &init_user_ns &&
		   cap_raised(cred->cap_effective, CAP_IPC_LOCK);

	put_cred(cred);
	return cap;
}

/**
 * pinmem_budget_rlimit() - the RLIMIT_MEMLOCK in force for the owner of @f
 * @f: the file
 *
 * A caller on @f's mm is judged as PIN judges it; any other holder of the
 * file (a child that inherited it) is told about the owner process instead.
 *
 * Return: bytes, PINMEM_UNLIMITED when not enforced for the owner or when
 * the owner has exited.
 */
u64 pinmem_budget_rlimit(struct pinmem_file *f)
{
	struct task_struct *t;
	unsigned long lim;
	bool cap;

	if (!READ_ONCE(pinmem_enforce_rlimit))
		return PINMEM_UNLIMITED;
	if (current->mm == f->mm) {
		lim = rlimit(RLIMIT_MEMLOCK);
		cap = ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK);
	} else {
		t = get_pid_task(f->tgid, PIDTYPE_TGID);
		if (!t)
			return PINMEM_UNLIMITED;
		lim = task_rlimit(t, RLIMIT_MEMLOCK);
		cap = pinmem_task_ipc_lock(t);
		put_task_struct(t);
	}
	if (lim == RLIM_INFINITY || cap)
		return PINMEM_UNLIMITED;
	return lim;
}

/**
 * pinmem_budget_global() - copy the global budget
 * @v: filled in
 */
void pinmem_budget_global(struct pinmem_global_view *v)
{
	spin_lock(&pinmem_budget_lock);
	v->limit = pinmem_global_limit.bytes;
	v->default_user_limit = pinmem_default_user_limit.bytes;
	v->enforce_rlimit = pinmem_enforce_rlimit;
	v->max_regions_per_file = READ_ONCE(pinmem_max_regions_per_file);
	v->max_regions_per_user = READ_ONCE(pinmem_max_regions_per_user);
	v->max_idle_users = READ_ONCE(pinmem_max_idle_users);
	v->idle_users = pinmem_users_idle_nr;
	v->evicted_users = pinmem_users_evicted_nr;
	v->acct = pinmem_global;
	v->evicted = pinmem_users_evicted;
	spin_unlock(&pinmem_budget_lock);
}

/* Caller holds pinmem_budget_lock; @u may be NULL (a user never seen). */
static void pinmem_user_view(const struct pinmem_user *u, kuid_t uid,
			     struct pinmem_user_view *v)
{
	memset(v, 0, sizeof(*v));
	v->uid = uid;
	v->limit = pinmem_default_user_limit.bytes;
	if (!u)
		return;
	v->limit = pinmem_user_limit(u);
	v->overridden = u->overridden;
	v->acct = u->acct;
}

/**
 * pinmem_budget_user() - copy the budget of @uid
 * @uid: the user; one without an entry has zero use and the default limit
 * @v: filled in
 */
void pinmem_budget_user(kuid_t uid, struct pinmem_user_view *v)
{
	spin_lock(&pinmem_budget_lock);
	pinmem_user_view(pinmem_user_find(uid), uid, v);
	spin_unlock(&pinmem_budget_lock);
}

/**
 * pinmem_budget_file() - copy the counters of @f
 * @f: the file
 * @acct: filled in
 */
void pinmem_budget_file(struct pinmem_file *f, struct pinmem_acct *acct)
{
	spin_lock(&pinmem_budget_lock);
	*acct = f->acct;
	spin_unlock(&pinmem_budget_lock);
}

/**
 * pinmem_budget_file_cgroup() - the cgroup of @f's last PIN, the last refuser
 * @f: the file
 * @id: out: the id of the cgroup its last PIN was charged to (the opener's
 *	at open before any PIN), 0 for the root cgroup
 * @refuser: out: the cgroup whose limit refused its last refused PIN, or 0
 */
void pinmem_budget_file_cgroup(struct pinmem_file *f, u64 *id, u64 *refuser)
{
	spin_lock(&pinmem_budget_lock);
	*id = f->cg_id;
	*refuser = f->cg_refuser;
	spin_unlock(&pinmem_budget_lock);
}

/**
 * pinmem_budget_round() - a limit in bytes as the module keeps it
 * @bytes: bytes or PINMEM_UNLIMITED
 *
 * Return: @bytes rounded down to whole pages.
 */
u64 pinmem_budget_round(u64 bytes)
{
	return pinmem_round_limit(bytes);
}

/* Users copied per hold of the budget lock by pinmem_budget_users_snapshot(). */
#define PINMEM_USERS_BATCH	64

/**
 * pinmem_budget_users_snapshot() - copy every known user's budget
 * @views: out: an array of @nr views by uid, kvfree() it
 * @nr: out: entries
 *
 * The budget lock is held for at most PINMEM_USERS_BATCH users at a time,
 * each batch found in O(log users) from the last uid copied, so however
 * many users a machine has, a stats reader never holds up a PIN for
 * longer than that.  Each user's row is consistent in itself; a user made
 * or dropped while the copy runs may be missing or shown.
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_budget_users_snapshot(struct pinmem_user_view **views, size_t *nr)
{
	struct pinmem_user_view *v = NULL;
	size_t cap = 0, n = 0, i;
	struct pinmem_user *u;
	kuid_t last = INVALID_UID;
	bool first = true;

	for (;;) {
		if (pinmem_snapshot_room((void **)&v, &cap, n, sizeof(*v),
					 PINMEM_USERS_BATCH)) {
			kvfree(v);
			return -ENOMEM;
		}
		spin_lock(&pinmem_budget_lock);
		u = first ? rb_entry_safe(rb_first(&pinmem_users),
					  struct pinmem_user, node) :
			    pinmem_user_search(last, true);
		for (i = 0; u && i < PINMEM_USERS_BATCH; i++) {
			pinmem_user_view(u, u->uid, &v[n++]);
			last = u->uid;
			u = rb_entry_safe(rb_next(&u->node), struct pinmem_user,
					  node);
		}
		spin_unlock(&pinmem_budget_lock);
		first = false;
		if (!u)
			break;
	}
	*views = v;
	*nr = n;
	return 0;
}

/**
 * pinmem_budget_get_limits() - PINMEM_IOC_GET_LIMITS
 * @l: @l->uid in, the limits out
 *
 * Return: 0, or -EINVAL when @l->uid has no mapping in the caller's user
 * namespace.
 */
int pinmem_budget_get_limits(struct pinmem_limits *l)
{
	kuid_t uid = make_kuid(current_user_ns(), l->uid);
	struct pinmem_user_view v;

	if (!uid_valid(uid))
		return -EINVAL;
	spin_lock(&pinmem_budget_lock);
	l->global_limit = pinmem_global_limit.bytes;
	l->default_user_limit = pinmem_default_user_limit.bytes;
	l->enforce_rlimit = pinmem_enforce_rlimit;
	pinmem_user_view(pinmem_user_find(uid), uid, &v);
	spin_unlock(&pinmem_budget_lock);
	l->user_limit = v.limit;
	l->user_flags = v.overridden ? PINMEM_USER_OVERRIDDEN : 0;
	return 0;
}

/**
 * pinmem_budget_set_limits() - PINMEM_IOC_SET_LIMITS
 * @l: the limits chosen by @l->flags; the caller checked CAP_SYS_ADMIN
 *
 * Every field is validated before anything changes, and all changes are
 * made under one hold of the lock, so no reader or PIN sees half of them.
 * Limits lowered below current use refuse new pins and leave regions alone.
 *
 * Return: 0; -EINVAL for no or unknown flags, SET_USER together with
 * CLEAR_USER, a uid without mapping, enforce_rlimit other than 0 or 1, a
 * non-zero field the flags do not select; -ENOMEM.
 */
int pinmem_budget_set_limits(const struct pinmem_limits *l)
{
	struct pinmem_user *spare = NULL, *u, *gone[PINMEM_RETIRE_MAX];
	unsigned int ngone = 0;
	u32 uflags = PINMEM_LIMIT_SET_USER | PINMEM_LIMIT_CLEAR_USER;
	kuid_t uid = INVALID_UID;

	if (!l->flags || (l->flags & ~PINMEM_LIMIT_ALL_FLAGS))
		return -EINVAL;
	if ((l->flags & uflags) == uflags)
		return -EINVAL;
	/* ABI 1.1: what the flags do not select must be zero, not ignored. */
	if (l->user_flags ||
	    (!(l->flags & PINMEM_LIMIT_SET_GLOBAL) && l->global_limit) ||
	    (!(l->flags & PINMEM_LIMIT_SET_DEFAULT_USER) &&
	     l->default_user_limit) ||
	    (!(l->flags & uflags) && l->uid) ||
	    (!(l->flags & PINMEM_LIMIT_SET_USER) && l->user_limit) ||
	    (!(l->flags & PINMEM_LIMIT_SET_RLIMIT) && l->enforce_rlimit))
		return -EINVAL;
	if (l->flags & uflags) {
		uid = make_kuid(current_user_ns(), l->uid);
		if (!uid_valid(uid))
			return -EINVAL;
	}
	if ((l->flags & PINMEM_LIMIT_SET_RLIMIT) && l->enforce_rlimit > 1)
		return -EINVAL;
	if (l->flags & PINMEM_LIMIT_SET_USER) {
		spare = pinmem_user_alloc();
		if (!spare)
			return -ENOMEM;
	}

	spin_lock(&pinmem_budget_lock);
	if (l->flags & PINMEM_LIMIT_SET_GLOBAL) {
		pinmem_global_limit.bytes = pinmem_round_limit(l->global_limit);
		pinmem_global_limit.set = true;
	}
	if (l->flags & PINMEM_LIMIT_SET_DEFAULT_USER) {
		pinmem_default_user_limit.bytes =
			pinmem_round_limit(l->default_user_limit);
		pinmem_default_user_limit.set = true;
	}
	if (l->flags & PINMEM_LIMIT_SET_USER) {
		u = pinmem_user_lookup(uid, &spare);
		u->limit = pinmem_round_limit(l->user_limit);
		u->overridden = true;
	}
	if (l->flags & PINMEM_LIMIT_CLEAR_USER) {
		u = pinmem_user_find(uid);
		if (u) {
			u->overridden = false;
			ngone = pinmem_user_retire(u, gone);
		}
	}
	if (l->flags & PINMEM_LIMIT_SET_RLIMIT)
		WRITE_ONCE(pinmem_enforce_rlimit, !!l->enforce_rlimit);
	spin_unlock(&pinmem_budget_lock);

	pinmem_user_free(spare);
	pinmem_user_free_all(gone, ngone);
	return 0;
}
