// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem cgroup budgets: pinned bytes per cgroup v2 directory, hierarchical.
 *
 * A PIN is charged to the cgroup the pinning task is in at PIN time, and
 * every charge goes to that cgroup and each ancestor below the root, each
 * checked against its limit if it has one.  The region (and each large
 * folio it was the first of its file to pin) keeps a reference to the entry
 * it was charged to, so the un-charge goes back there even after the task
 * moved.  Entries are kept by cgroup id, never by cgroup pointer: a removed
 * cgroup's entry keeps its charge until the pins charged to it let go, and
 * ids are not reused, so no pin can land on a stale entry.
 *
 * An entry lives while a region or folio is charged to it, while a child
 * entry lives, or while it has a limit; the limit of a removed cgroup is
 * dropped (pinmem_cg_prune()).  Counters, limits, the table and the
 * references are guarded by the budget lock (kmod/budget.c), taken by the
 * callers here through pinmem_budget_enter()/leave().
 */
#include <linux/cgroup.h>
#include <linux/fs.h>
#include <linux/kernfs.h>
#include <linux/module.h>
#include <linux/rbtree.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>

#include "budget.h"
#include "cgroup.h"
#include "snapshot.h"

/*
 * The entries by id, and the limited ones (those pinmem_cg_prune() checks)
 * in the order they were last checked.  A user with a delegated subtree
 * can make many entries; every walk under the budget lock is O(log n) or
 * bounded by a batch size.
 */
static struct rb_root pinmem_cgs = RB_ROOT;
static LIST_HEAD(pinmem_cg_limited);

/* Limited entries pinmem_cg_prune() checks per hold of the budget lock. */
#define PINMEM_CG_PRUNE_BATCH	16

/*
 * The entry @id, or NULL; with @after, the first entry above @id.  Caller
 * holds the budget lock.
 */
static struct pinmem_cg *pinmem_cg_search(u64 id, bool after)
{
	struct rb_node *n = pinmem_cgs.rb_node;
	struct pinmem_cg *cg, *above = NULL;

	while (n) {
		cg = rb_entry(n, struct pinmem_cg, node);
		if (cg->id > id) {
			above = cg;
			n = n->rb_left;
		} else if (cg->id < id || after) {
			n = n->rb_right;
		} else {
			return cg;
		}
	}
	return after ? above : NULL;
}

static __maybe_unused struct pinmem_cg *pinmem_cg_find(u64 id)
{
	return pinmem_cg_search(id, false);
}

static void pinmem_cg_insert(struct pinmem_cg *new)
{
	struct rb_node **p = &pinmem_cgs.rb_node, *parent = NULL;

	while (*p) {
		parent = *p;
		p = rb_entry(parent, struct pinmem_cg, node)->id > new->id ?
		    &parent->rb_left : &parent->rb_right;
	}
	rb_link_node(&new->node, parent, p);
	rb_insert_color(&new->node, &pinmem_cgs);
}

/* Drop one reference; caller holds the budget lock.  Returns the entries to free. */
static void pinmem_cg_put_locked(struct pinmem_cg *cg, struct list_head *dead)
{
	struct pinmem_cg *parent;

	while (cg && !--cg->refs) {
		WARN_ON_ONCE(cg->pinned_bytes);
		parent = cg->parent;
		rb_erase(&cg->node, &pinmem_cgs);
		list_add(&cg->dead, dead);
		cg = parent;
	}
}

static void pinmem_cg_free(struct list_head *dead)
{
	struct pinmem_cg *cg, *tmp;

	list_for_each_entry_safe(cg, tmp, dead, dead)
		kfree(cg);
}

#ifdef CONFIG_CGROUPS
#define PINMEM_CG_DEPTH	64

/*
 * The ids of @cgrp and its ancestors below the root, leaf first; returns
 * how many.  Only the PINMEM_CG_DEPTH levels nearest the root are kept: a
 * task deeper than that is charged to its ancestor at that depth, so every
 * limit a SET can place still holds for it.
 */
static int pinmem_cg_ids(struct cgroup *cgrp, u64 *ids)
{
	int n = 0;

	while (cgrp->level > PINMEM_CG_DEPTH)
		cgrp = cgroup_parent(cgrp);
	for (; cgroup_parent(cgrp); cgrp = cgroup_parent(cgrp))
		ids[n++] = cgroup_id(cgrp);
	return n;
}

/*
 * Find or create the entries of the chain @ids (leaf first) and take one
 * reference on the leaf.  A new entry takes a reference on its parent; an
 * entry that existed already has its ancestors.  Returns the leaf, NULL for
 * an empty chain, or an ERR_PTR.
 */
static struct pinmem_cg *pinmem_cg_chain_get(const u64 *ids, int n)
{
	struct pinmem_cg *spare[PINMEM_CG_DEPTH], *cg, *prev = NULL, *leaf = NULL;
	int i, used = 0;
	bool existed;

	if (!n)
		return NULL;
	for (i = 0; i < n; i++) {
		spare[i] = kzalloc(sizeof(*spare[i]), GFP_KERNEL_ACCOUNT);
		if (!spare[i]) {
			while (i--)
				kfree(spare[i]);
			return ERR_PTR(-ENOMEM);
		}
	}
	pinmem_budget_enter();
	for (i = 0; i < n; i++) {
		cg = pinmem_cg_find(ids[i]);
		existed = cg;
		if (!cg) {
			cg = spare[used++];
			cg->id = ids[i];
			cg->limit = PINMEM_UNLIMITED;
			INIT_LIST_HEAD(&cg->limited_node);
			pinmem_cg_insert(cg);
		}
		cg->refs++;
		if (prev)
			prev->parent = cg;
		else
			leaf = cg;
		if (existed)
			break;
		prev = cg;
	}
	pinmem_budget_leave();
	for (i = used; i < n; i++)
		kfree(spare[i]);
	return leaf;
}

/**
 * pinmem_cg_get_current() - the cgroup entry of the caller, referenced
 *
 * Return: the entry of the caller's cgroup v2 (NULL in the root cgroup), or
 * ERR_PTR(-ENOMEM).
 */
struct pinmem_cg *pinmem_cg_get_current(void)
{
	u64 ids[PINMEM_CG_DEPTH];
	struct pinmem_cg *cg;
	int n;

	rcu_read_lock();
	n = pinmem_cg_ids(task_dfl_cgroup(current), ids);
	rcu_read_unlock();
	if (!n)
		return NULL;
	/* Usually the entry exists: take it without allocating. */
	pinmem_budget_enter();
	cg = pinmem_cg_find(ids[0]);
	if (cg)
		cg->refs++;
	pinmem_budget_leave();
	if (cg)
		return cg;
	/* A cgroup new to the module: a good time to forget removed ones. */
	pinmem_cg_prune(PINMEM_CG_PRUNE_BATCH);
	return pinmem_cg_chain_get(ids, n);
}

/**
 * pinmem_cg_current_id() - the id of the caller's cgroup v2
 *
 * Return: the id as PINMEM_IOC_STATS reports it, 0 in the root cgroup.
 */
u64 pinmem_cg_current_id(void)
{
	struct cgroup *cgrp;
	u64 id;

	rcu_read_lock();
	cgrp = task_dfl_cgroup(current);
	id = cgroup_parent(cgrp) ? cgroup_id(cgrp) : 0;
	rcu_read_unlock();
	return id;
}

#else
/* A kernel without cgroups: every PIN is in the root, with no budget. */
struct pinmem_cg *pinmem_cg_get_current(void)
{
	return NULL;
}

u64 pinmem_cg_current_id(void)
{
	return 0;
}
#endif /* CONFIG_CGROUPS */

/**
 * pinmem_cg_get() - take @n more references on @cg
 * @cg: an entry the caller holds a reference on, or NULL
 * @n: references to take
 */
void pinmem_cg_get(struct pinmem_cg *cg, unsigned int n)
{
	if (!cg || !n)
		return;
	pinmem_budget_enter();
	cg->refs += n;
	pinmem_budget_leave();
}

/**
 * pinmem_cg_put() - drop a reference from pinmem_cg_get_current()
 * @cg: the entry, or NULL
 */
void pinmem_cg_put(struct pinmem_cg *cg)
{
	LIST_HEAD(dead);

	if (!cg)
		return;
	pinmem_budget_enter();
	pinmem_cg_put_locked(cg, &dead);
	pinmem_budget_leave();
	pinmem_cg_free(&dead);
}

/**
 * pinmem_cg_refuser() - the entry whose limit @bytes more would break
 * @cg: the leaf, or NULL; the budget lock is held
 * @bytes: bytes to charge
 *
 * Return: the lowest such entry, or NULL when every limit holds.
 */
struct pinmem_cg *pinmem_cg_refuser(struct pinmem_cg *cg, u64 bytes)
{
	for (; cg; cg = cg->parent) {
		if (cg->limited &&
		    (cg->pinned_bytes > cg->limit ||
		     bytes > cg->limit - cg->pinned_bytes))
			return cg;
	}
	return NULL;
}

/* Back to what an entry the module had never seen would show. */
static void pinmem_cg_forget_history(struct pinmem_cg *cg)
{
	if (!cg->limited && !cg->pinned_bytes)
		cg->peak_bytes = cg->refused = 0;
}

/**
 * pinmem_cg_charge() - add @bytes to @cg and every ancestor
 * @cg: the leaf, or NULL; the budget lock is held
 * @bytes: may be negative, to un-charge
 * @reserved: how much of @bytes is (or, negative, was) a reservation
 *
 * An entry without a limit that is left with nothing charged forgets its
 * peak and refusals, as the uapi says (struct pinmem_cgroup), whether or
 * not a child keeps it in the table.
 */
void pinmem_cg_charge(struct pinmem_cg *cg, s64 bytes, s64 reserved)
{
	for (; cg; cg = cg->parent) {
		WARN_ON_ONCE(bytes < 0 && cg->pinned_bytes < (u64)-bytes);
		cg->pinned_bytes += bytes;
		cg->reserved_bytes += reserved;
		if (cg->pinned_bytes - cg->reserved_bytes > cg->peak_bytes)
			cg->peak_bytes = cg->pinned_bytes - cg->reserved_bytes;
		pinmem_cg_forget_history(cg);
	}
}

#ifdef CONFIG_CGROUPS
static unsigned int pinmem_cg_nr_limited;

/* @cg gets the limit it keeps a reference on @cgrp for; budget lock held. */
static void pinmem_cg_limit(struct pinmem_cg *cg, struct cgroup *cgrp)
{
	cg->limited = true;
	cg->cgrp = cgrp;
	list_add_tail(&cg->limited_node, &pinmem_cg_limited);
	pinmem_cg_nr_limited++;
}

/* @cg loses its limit; returns the cgroup to put.  Budget lock held. */
static struct cgroup *pinmem_cg_unlimit(struct pinmem_cg *cg)
{
	struct cgroup *cgrp = cg->cgrp;

	list_del_init(&cg->limited_node);
	pinmem_cg_nr_limited--;
	cg->cgrp = NULL;
	cg->limited = false;
	cg->limit = PINMEM_UNLIMITED;
	pinmem_cg_forget_history(cg);
	return cgrp;
}

/**
 * pinmem_cg_prune() - drop the limits of removed cgroups
 * @max: limited entries to check at most (UINT_MAX: each of them once)
 *
 * Their ids never come back, so such a limit could only keep the entry
 * (and the cgroup's memory) for nothing.  An entry still charged stays,
 * unlimited, until its pins let go.  The limit holds a reference on the
 * cgroup, so a removed one is seen dying here however long ago it went.
 * Only limited entries are checked (an admin sets each), the longest
 * unchecked first, PINMEM_CG_PRUNE_BATCH per hold of the budget lock.
 * Called with UINT_MAX before the entries are read (CGROUP ioctl, stats
 * file), with a batch when a PIN adds entries.
 */
void pinmem_cg_prune(unsigned int max)
{
	struct pinmem_cg *stale[PINMEM_CG_PRUNE_BATCH], *cg;
	struct cgroup *cgrps[PINMEM_CG_PRUNE_BATCH];
	unsigned int left = 0, checked;
	bool first = true;
	LIST_HEAD(dead);
	int i, n;

	do {
		n = 0;
		checked = 0;
		pinmem_budget_enter();
		if (first)
			left = min(max, pinmem_cg_nr_limited);
		first = false;
		while (left && checked < PINMEM_CG_PRUNE_BATCH &&
		       !list_empty(&pinmem_cg_limited)) {
			cg = list_first_entry(&pinmem_cg_limited,
					      struct pinmem_cg, limited_node);
			left--;
			checked++;
			/* rmdir clears CSS_ONLINE of the cgroup itself. */
			if (READ_ONCE(cg->cgrp->self.flags) & CSS_ONLINE) {
				list_move_tail(&cg->limited_node,
					       &pinmem_cg_limited);
				continue;
			}
			cgrps[n] = pinmem_cg_unlimit(cg);
			stale[n++] = cg;
		}
		/* The limits' references: may free entries and parents. */
		for (i = 0; i < n; i++)
			pinmem_cg_put_locked(stale[i], &dead);
		pinmem_budget_leave();
		for (i = 0; i < n; i++)
			cgroup_put(cgrps[i]);
		pinmem_cg_free(&dead);
	} while (left && checked == PINMEM_CG_PRUNE_BATCH);
}

static void pinmem_cg_sb_seen(struct super_block *sb, void *seen)
{
	*(bool *)seen = true;
}

/*
 * Whether cgroup v2 is in use: a cgroup2 file system is mounted somewhere.
 * The default hierarchy exists in every kernel with cgroups, but on a host
 * that mounts only v1 hierarchies every task stays in its root, so no
 * budget there could ever be charged: better to say so than to accept a
 * limit that never applies.
 */
static bool pinmem_cg_v2_mounted(void)
{
	struct file_system_type *fs = get_fs_type("cgroup2");
	bool seen = false;

	if (!fs)
		return false;
	iterate_supers_type(fs, pinmem_cg_sb_seen, &seen);
	module_put(fs->owner);	/* put_filesystem(), which is not exported */
	return seen;
}

/*
 * The cgroup at @path below the caller's cgroup namespace root, resolved a
 * component at a time: each must be a directory of the cgroup2 hierarchy
 * (-ENOTDIR, -ENOENT).  kernfs's own walk, which cgroup_get_from_path()
 * hands a path to, looks a name up in whatever node the previous one named
 * without checking that it is a directory, and oopses on a file
 * ("cgroup.procs/x").  Empty components ("a//b", a leading or trailing
 * '/') are skipped; "." and ".." name nothing.
 */
static struct cgroup *pinmem_cg_lookup(const char *path)
{
	struct kernfs_node *kn, *next;
	struct cgroup *root, *cgrp = NULL;
	char *buf, *p, *name;
	int err = 0;

	buf = kstrdup(path, GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	/* "/" walks no component: the namespace's root, as the stats file's. */
	root = cgroup_get_from_path("/");
	if (IS_ERR(root)) {
		kfree(buf);
		return root;
	}
	kn = root->kn;
	kernfs_get(kn);
	cgroup_put(root);
	p = buf;
	while ((name = strsep(&p, "/"))) {
		if (!*name)
			continue;
		if (kernfs_type(kn) != KERNFS_DIR) {
			err = -ENOTDIR;
			break;
		}
		next = kernfs_find_and_get_ns(kn, name, NULL);
		kernfs_put(kn);
		kn = next;
		if (!kn) {
			err = -ENOENT;
			break;
		}
	}
	if (!err && kernfs_type(kn) != KERNFS_DIR)
		err = -ENOTDIR;
	if (!err) {
		rcu_read_lock();
		cgrp = rcu_dereference(*(void __rcu __force **)&kn->priv);
		if (!cgrp || !(READ_ONCE(cgrp->self.flags) & CSS_ONLINE) ||
		    !cgroup_tryget(cgrp))
			cgrp = NULL;
		rcu_read_unlock();
		if (!cgrp)
			err = -ENOENT;
	}
	if (kn)
		kernfs_put(kn);
	kfree(buf);
	return err ? ERR_PTR(err) : cgrp;
}

/**
 * pinmem_cg_ioctl() - PINMEM_IOC_CGROUP on the cgroup at @path
 * @path: NUL-terminated, relative to the caller's cgroup namespace root
 * @arg: flags and limit_bytes in; the cgroup's numbers out
 *
 * Only cgroups the caller's cgroup namespace shows can be named, as only
 * those show in the stats file for it.
 *
 * Return: 0; -EOPNOTSUPP for SET when no cgroup2 file system is mounted (a
 * cgroup v1-only host; GET and CLEAR still reach a limit SET before the
 * last cgroup2 mount went); -ENOENT; -ENOTDIR (a component is a file);
 * -EINVAL (a limit on the root cgroup); -ENOMEM; -E2BIG (a cgroup more
 * than 64 levels deep).
 */
int pinmem_cg_ioctl(const char *path, struct pinmem_cgroup *arg)
{
	struct cgroup *cgrp, *put[2] = { NULL, NULL };
	struct pinmem_cg *cg, *leaf = NULL;
	u64 ids[PINMEM_CG_DEPTH];
	LIST_HEAD(dead);
	int n;

	if ((arg->flags & PINMEM_CGROUP_SET) && !pinmem_cg_v2_mounted())
		return -EOPNOTSUPP;
	pinmem_cg_prune(UINT_MAX);
	cgrp = pinmem_cg_lookup(path);
	if (IS_ERR(cgrp))
		return PTR_ERR(cgrp);
	put[0] = cgrp;
	if (cgrp->level > PINMEM_CG_DEPTH) {
		cgroup_put(cgrp);
		return -E2BIG;
	}
	n = pinmem_cg_ids(cgrp, ids);
	if (!n) {	/* the root: never limited, use is the global budget's */
		arg->cgroup_id = cgroup_id(cgrp);
		cgroup_put(cgrp);
		if (arg->flags & PINMEM_CGROUP_SET)
			return -EINVAL;
		arg->limit_bytes = PINMEM_UNLIMITED;
		arg->pinned_bytes = arg->peak_bytes = arg->refused = 0;
		return 0;
	}
	if (arg->flags & PINMEM_CGROUP_SET) {
		leaf = pinmem_cg_chain_get(ids, n);
		if (IS_ERR(leaf)) {
			cgroup_put(cgrp);
			return PTR_ERR(leaf);
		}
	}
	pinmem_budget_enter();
	cg = pinmem_cg_find(ids[0]);
	if (cg && (arg->flags & PINMEM_CGROUP_SET)) {
		cg->limit = pinmem_budget_round(arg->limit_bytes);
		if (!cg->limited) {
			/* The references on entry and cgroup stay for the limit. */
			pinmem_cg_limit(cg, cgrp);
			put[0] = NULL;
			leaf = NULL;
		}
	}
	if (cg && (arg->flags & PINMEM_CGROUP_CLEAR) && cg->limited) {
		put[1] = pinmem_cg_unlimit(cg);
		leaf = cg;	/* drop the limit's reference below */
	}
	arg->cgroup_id = ids[0];
	arg->limit_bytes = cg && cg->limited ? cg->limit : PINMEM_UNLIMITED;
	arg->pinned_bytes = cg ? cg->pinned_bytes : 0;
	arg->peak_bytes = cg ? cg->peak_bytes : 0;
	arg->refused = cg ? cg->refused : 0;
	if (leaf)
		pinmem_cg_put_locked(leaf, &dead);
	pinmem_budget_leave();
	pinmem_cg_free(&dead);
	for (n = 0; n < 2; n++)
		if (put[n])
			cgroup_put(put[n]);
	return 0;
}

/**
 * pinmem_cg_ns_root_id() - the cgroup the caller's cgroup namespace shows
 *	as its root
 *
 * Return: its id; 0 for the root cgroup (the initial namespace: every entry
 * is below it); U64_MAX when it cannot be found (nothing is below it).
 */
u64 pinmem_cg_ns_root_id(void)
{
	struct cgroup *cgrp = cgroup_get_from_path("/");
	u64 id;

	if (IS_ERR(cgrp))
		return U64_MAX;
	id = cgroup_parent(cgrp) ? cgroup_id(cgrp) : 0;
	cgroup_put(cgrp);
	return id;
}

#else
void pinmem_cg_prune(unsigned int max)
{
}

u64 pinmem_cg_ns_root_id(void)
{
	return 0;
}

int pinmem_cg_ioctl(const char *path, struct pinmem_cgroup *arg)
{
	return -EOPNOTSUPP;
}
#endif /* CONFIG_CGROUPS */

/**
 * pinmem_cg_exit() - free the entries kept for their limits at unload
 */
void pinmem_cg_exit(void)
{
	struct pinmem_cg *cg, *tmp;

	rbtree_postorder_for_each_entry_safe(cg, tmp, &pinmem_cgs, node) {
		WARN_ON_ONCE(cg->pinned_bytes);
#ifdef CONFIG_CGROUPS	/* only then can a limit hold a cgroup */
		if (cg->cgrp)
			cgroup_put(cg->cgrp);
#endif
		kfree(cg);
	}
	pinmem_cgs = RB_ROOT;
	INIT_LIST_HEAD(&pinmem_cg_limited);
}

/**
 * pinmem_cg_inside() - is @cg the cgroup @root or below it?
 * @cg: an entry; the budget lock is held, so its parents stay
 * @root: from pinmem_cg_ns_root_id()
 *
 * Return: true when @root is 0 or @cg or one of its ancestors is @root.
 */
bool pinmem_cg_inside(const struct pinmem_cg *cg, u64 root)
{
	if (!root)
		return true;
	for (; cg; cg = cg->parent)
		if (cg->id == root)
			return true;
	return false;
}

/* Entries copied per hold of the budget lock by pinmem_cg_snapshot(). */
#define PINMEM_CG_COPY_BATCH	64

/**
 * pinmem_cg_snapshot() - copy the entries at or below a cgroup, by id
 * @rows: out: the copies (their links mean nothing), kvfree() it
 * @nr: out: entries
 * @root: from pinmem_cg_ns_root_id(): only entries inside it
 *
 * The budget lock is held for at most PINMEM_CG_COPY_BATCH entries at a
 * time, each batch found in O(log n) from the last id copied, so a stats
 * reader never holds up a PIN for long however many cgroups there are.
 * Each row is consistent in itself.
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_cg_snapshot(struct pinmem_cg **rows, size_t *nr, u64 root)
{
	struct pinmem_cg *v = NULL, *cg;
	size_t cap = 0, n = 0, i;
	u64 last = 0;
	bool first = true;

	for (;;) {
		if (pinmem_snapshot_room((void **)&v, &cap, n, sizeof(*v),
					 PINMEM_CG_COPY_BATCH)) {
			kvfree(v);
			return -ENOMEM;
		}
		pinmem_budget_enter();
		cg = first ? rb_entry_safe(rb_first(&pinmem_cgs),
					   struct pinmem_cg, node) :
			     pinmem_cg_search(last, true);
		for (i = 0; cg && i < PINMEM_CG_COPY_BATCH; i++) {
			if (pinmem_cg_inside(cg, root))
				v[n++] = *cg;
			last = cg->id;
			cg = rb_entry_safe(rb_next(&cg->node), struct pinmem_cg,
					   node);
		}
		pinmem_budget_leave();
		first = false;
		if (!cg)
			break;
	}
	*rows = v;
	*nr = n;
	return 0;
}
