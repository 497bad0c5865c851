// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem open files: regions belong to the file that pinned them, and every
 * region is unpinned and un-charged when the file goes away (close, exit,
 * SIGKILL), even after the owner's mm has been torn down.
 */
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/pid.h>
#include <linux/sched/mm.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "budget.h"
#include "cgroup.h"
#include "folio.h"
#include "pinmem.h"
#include "region.h"
#include "snapshot.h"

/*
 * The open files by id, in open order (ids are cyclic).  The mutex keeps a
 * file alive while the stats file copies it; a copy takes it for a batch
 * of files at a time (pinmem_files_snapshot()).
 */
static DEFINE_MUTEX(pinmem_files_lock);
static DEFINE_XARRAY_ALLOC(pinmem_files);
static u32 pinmem_files_next;

/* Free @f, which holds no region and is in no table. */
static void pinmem_file_free(struct pinmem_file *f)
{
	WARN_ON_ONCE(!RB_EMPTY_ROOT(&f->folios.root) || f->folios.bytes);
	xa_destroy(&f->regions);
	mutex_destroy(&f->lock);
	free_uid(f->ustruct);
	pinmem_user_put(f->user);
	put_pid(f->tgid);
	mmdrop(f->mm);
	kfree(f);
}

/**
 * pinmem_file_open() - state for a new open of /dev/pinmem
 *
 * The opener's mm, user, process and name are recorded now: the regions of
 * this file are charged to them for the file's whole life.  The user
 * charged is the real user behind the opener's user namespaces
 * (pinmem_budget_current_user()).  The cgroup is
 * not: each PIN is charged to its pinning task's cgroup (kmod/cgroup.c).
 *
 * Return: the file state, or ERR_PTR(-EINVAL) without a user mm,
 * ERR_PTR(-ENOMEM).
 */
struct pinmem_file *pinmem_file_open(void)
{
	struct pinmem_file *f;
	int ret;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);
	if (!f)
		return ERR_PTR(-ENOMEM);
	f->uid = current_uid();
	f->budget_uid = pinmem_budget_current_user();
	f->user = pinmem_user_get(f->budget_uid);
	if (!f->user) {
		kfree(f);
		return ERR_PTR(-ENOMEM);
	}
	mutex_init(&f->lock);
	xa_init_flags(&f->regions, XA_FLAGS_ALLOC1 | XA_FLAGS_ACCOUNT);
	f->folios.root = RB_ROOT;
	f->ustruct = get_uid(current_user());
	f->cg_id = pinmem_cg_current_id();
	f->next_handle = 1;
	f->mm = current->mm;
	mmgrab(f->mm);
	f->tgid = get_pid(task_tgid(current));
	get_task_comm(f->comm, current);

	mutex_lock(&pinmem_files_lock);
	ret = xa_alloc_cyclic(&pinmem_files, &f->id, f, xa_limit_32b,
			      &pinmem_files_next, GFP_KERNEL_ACCOUNT);
	mutex_unlock(&pinmem_files_lock);
	if (ret < 0) {
		pinmem_file_free(f);
		return ERR_PTR(ret);
	}
	return f;
}

static u64 pinmem_region_bytes(const struct pinmem_region *r)
{
	return (u64)r->npages << PAGE_SHIFT;
}

/*
 * Take @r out of @f's folio accounting; @f->lock is held.  Returns the bytes
 * of @r's base pages to un-charge once @r is unpinned, puts the large
 * folios the file no longer holds on @gone, and un-counts @r's kernel
 * memory.
 */
static u64 pinmem_file_forget_region(struct pinmem_file *f,
				     struct pinmem_region *r,
				     struct list_head *gone)
{
	s64 kmem;
	u64 bytes = pinmem_folio_remove(&f->folios, r, &kmem, gone);

	pinmem_budget_kmem(f, kmem - (s64)r->kmem_bytes);
	return bytes;
}

/* A large folio leaves @arg (the file): un-charge it where it was charged. */
static void pinmem_file_uncharge_folio(void *arg, struct pinmem_cg *cg,
				       u64 bytes)
{
	pinmem_budget_uncharge(arg, cg, bytes, 0);
}

/*
 * Unpin @r, then un-charge it and the folios on @gone: real pins never
 * exceed what is charged.  @dirty: a released region (else a failed PIN
 * rolled back, counted as no unpin).
 */
static void pinmem_file_drop_region(struct pinmem_file *f,
				    struct pinmem_region *r, u64 bytes,
				    struct list_head *gone, bool dirty)
{
	struct pinmem_cg *cg = r->cg;

	pinmem_region_free(r, dirty);
	if (dirty)
		pinmem_budget_release(f, cg, bytes);
	else
		pinmem_budget_uncharge(f, cg, bytes, PINMEM_CHARGE_REGION);
	pinmem_folio_release(gone, pinmem_file_uncharge_folio, f);
	pinmem_cg_put(cg);
}

/**
 * pinmem_file_release() - unpin and un-charge everything @f holds, free it
 * @f: the file, no longer reachable by any ioctl
 *
 * Runs after exit_mm() when the owner dies, so it un-charges through the
 * mm grabbed at open, never current->mm.
 */
void pinmem_file_release(struct pinmem_file *f)
{
	struct pinmem_region *r;
	unsigned long handle;

	mutex_lock(&pinmem_files_lock);
	xa_erase(&pinmem_files, f->id);
	mutex_unlock(&pinmem_files_lock);

	xa_for_each(&f->regions, handle, r) {
		LIST_HEAD(gone);
		u64 bytes;

		xa_erase(&f->regions, handle);
		mutex_lock(&f->lock);
		bytes = pinmem_file_forget_region(f, r, &gone);
		mutex_unlock(&f->lock);
		pinmem_file_drop_region(f, r, bytes, &gone, true);
	}
	pinmem_file_free(f);
}

/*
 * Checks of PIN's range that need no mapping: -EINVAL or -EFAULT.  @addr is
 * the untagged pin->addr.
 */
static int pinmem_pin_args(const struct pinmem_pin *pin, u64 addr)
{
	u64 end;

	if (!pin->length || !PAGE_ALIGNED(addr) || !PAGE_ALIGNED(pin->length))
		return -EINVAL;
	if (check_add_overflow(addr, pin->length, &end))
		return -EINVAL;
	if (end > TASK_SIZE || !access_ok(u64_to_user_ptr(addr), pin->length))
		return -EFAULT;
	return 0;
}

/**
 * pinmem_file_is_owner() - may the caller PIN, UNPIN and list REGIONS?
 * @f: the file
 *
 * The file belongs to the process that opened it: a task of its thread
 * group still running on the mm it had at open.  A child (fork, vfork: same
 * mm, other thread group), a process the fd was passed to, and the opener
 * after exec are other processes.
 *
 * Return: true for the owner.
 */
bool pinmem_file_is_owner(struct pinmem_file *f)
{
	return current->mm == f->mm && task_tgid(current) == f->tgid;
}

/* Tell the caller why its PIN failed; returns @err. */
static int pinmem_pin_refused(struct pinmem_pin __user *upin, u32 reason,
			      int err)
{
	/* Best effort: the errno is the answer, the reason its detail. */
	if (put_user(reason, &upin->refused))
		return err;
	return err;
}

/* The PINMEM_REFUSED_* reason of a PIN that failed with @err. */
static u32 pinmem_pin_reason(int err)
{
	switch (err) {
	case -EINVAL:
		return PINMEM_REFUSED_ARGS;
	case -EPERM:
		return PINMEM_REFUSED_ACCESS;
	case -EINTR:
		return PINMEM_REFUSED_INTR;
	case -ENOMEM:
		return PINMEM_REFUSED_KMEM;
	}
	return PINMEM_REFUSED_MAPPING;
}

/**
 * struct pinmem_pin_ctx - one PIN in progress
 * @f: the file pinning
 * @cg: the cgroup entry the PIN is charged to, or NULL
 * @reserved: bytes charged for the chunk being pinned, before its pages
 *	are known (its worst case, or what the budgets had room for)
 * @charged: bytes charged for the chunks pinned so far (their pages)
 * @kmem: kernel bytes the folio accounting allocated for them
 * @step: pages the next reservation may cover at most: twice what the last
 *	one covered, so a PIN near a limit does not try the largest first
 * @refused: the PINMEM_REFUSED_* reason the PIN ends with, when a budget or
 *	a bound refused it (0 for other failures)
 * @refuser: the cgroup that refused, for PINMEM_REFUSED_CGROUP
 * @tail: holds its user's tail lock (pinmem_budget_tail_lock()) and the
 *	file's lock around each chunk: a chunk whose worst case the budgets
 *	have no room for is one page, charged what room there is before it
 *	is pinned and the rest once it is known
 * @waited: jiffies this PIN waited for other PINs' reservations to settle
 *	(PINMEM_RESERVED_WAIT)
 */
struct pinmem_pin_ctx {
	struct pinmem_file *f;
	struct pinmem_cg *cg;
	u64 reserved;
	u64 charged;
	s64 kmem;
	unsigned long step;
	u32 refused;
	u64 refuser;
	bool tail;
	long waited;
};

/*
 * A budget refusal while other PINs hold reservations in that budget may be
 * only their worst cases, settled a moment later: wait for them and try
 * again, for this long at most per PIN.
 */
#define PINMEM_RESERVED_WAIT	(HZ / 2)

static bool pinmem_file_wait_reserved(struct pinmem_pin_ctx *c)
{
	long slice = max_t(long, 1, HZ / 100);

	if (c->waited >= PINMEM_RESERVED_WAIT || fatal_signal_pending(current))
		return false;
	c->waited += slice;
	return pinmem_budget_wait_reserved(c->f, c->cg, c->refused, c->refuser,
					   slice);
}

/* The most @n pages from @addr can keep allocated (pinmem_reserve_fn). */
static u64 pinmem_worst(unsigned long addr, unsigned long n, u64 folio_bytes,
			bool aligned)
{
	u64 first, end;

	if (!aligned)
		return n * folio_bytes;
	first = round_down((u64)addr, folio_bytes);
	end = round_up((u64)addr + ((u64)n << PAGE_SHIFT), folio_bytes);
	return end - first;
}

/*
 * pinmem_reserve_fn of a PIN (kmod/region.h): charge the worst case of as
 * many of the next @npages pages as the budgets have room for, leaving
 * half the room to others when more than one page fits.  The worst case of
 * a page is a folio of its own of @folio_bytes; in a hugetlb mapping
 * (@aligned) the pages of one aligned stretch share a folio.  (A hugetlb
 * page that another thread unmaps and faults again in the middle of one
 * GUP call may be pinned beside the new one until the chunk is settled a
 * moment later: the one case a chunk's pins pass its reservation while no
 * one waits for user space.)
 *
 * When not even one page's worst case fits, the page may still be a base
 * page or sit in a folio the file holds already: with the tail lock held,
 * reserve what room there is (at most a folio) and pin that one page, to
 * be charged the rest, or refused, as soon as it is known
 * (pinmem_file_settle()); without it, return 0 so the caller takes it.  A
 * one-page pin holds nothing while GUP may sleep in a fault, so the only
 * pins ever ahead of their charge are one such page per user, by at most
 * its folio less the room its budgets had, between GUP's return and the
 * charge, with the file's lock held and nothing else waited for.
 */
static unsigned long pinmem_file_reserve(void *arg, unsigned long addr,
					 unsigned long npages, u64 folio_bytes,
					 bool aligned)
{
	struct pinmem_pin_ctx *c = arg;
	unsigned long n = min(npages, c->step);
	u64 room = pinmem_budget_room(c->f, c->cg), want, refuser;

	while (n > 1 && pinmem_worst(addr, n, folio_bytes, aligned) > room / 2)
		n = aligned ? min_t(unsigned long, n / 2,
				    (round_up(addr + 1, folio_bytes) - addr) >>
				    PAGE_SHIFT) : n / 2;
	want = pinmem_worst(addr, n, folio_bytes, aligned);
	if (want <= room) {
		if (!pinmem_budget_charge(c->f, c->cg, want,
					  PINMEM_CHARGE_RESERVE, &refuser)) {
			c->reserved = want;
			c->step = min_t(unsigned long, 2 * n, PINMEM_CHUNK);
			return n;
		}
	}
	c->step = 1;
	c->reserved = 0;
	if (!c->tail)
		return 0;
	want = min(folio_bytes, room) & PAGE_MASK;
	if (want && !pinmem_budget_charge(c->f, c->cg, want,
					  PINMEM_CHARGE_RESERVE, &refuser))
		c->reserved = want;
	return 1;
}

/*
 * Charge the @n pages just pinned for @r what they keep allocated, in
 * place of what was reserved for them, and record them in @r; @f->lock is
 * held.  On failure they are unpinned and un-counted, c->reserved is left
 * for the caller to give back, and the pages recorded before stay in @r
 * for the caller to release.  Returns 0, 1 when the chunk should be pinned
 * again (a budget refused while other PINs held reservations in it), or a
 * negative errno (c->refused set for a budget).
 */
static int pinmem_file_settle(struct pinmem_pin_ctx *c,
			      struct pinmem_region *r, struct page **pages,
			      unsigned long n)
{
	struct pinmem_file *f = c->f;
	unsigned long recorded = 0;
	u64 actual, base, refuser;
	LIST_HEAD(gone);
	s64 kmem, freed;
	u32 reason;
	int ret;

	c->refused = 0;
	ret = pinmem_folio_add_pages(&f->folios, pages, n, c->cg, &actual,
				     &kmem);
	if (ret) {
		unpin_user_pages(pages, n);
		if (ret == -ETOOMANYREFS)
			c->refused = PINMEM_REFUSED_FOLIO_PINS;
		return ret;
	}
	if (actual > c->reserved) {
		/*
		 * A page pinned ahead of its charge (or, on a kernel with
		 * folios larger than pinmem_chunk_shape() knows of, a chunk):
		 * charge the rest now or give the pages up.
		 */
		reason = pinmem_budget_charge(f, c->cg, actual - c->reserved,
					      0, &refuser);
		if (reason) {
			pinmem_folio_del_pages(&f->folios, pages, n, &freed,
					       &gone);
			unpin_user_pages(pages, n);
			/* New to the file and never charged: free them only. */
			pinmem_folio_release(&gone, NULL, NULL);
			c->refused = reason;
			c->refuser = refuser;
			return -EDQUOT;	/* the caller decides what to say */
		}
		pinmem_budget_settle(f, c->cg, c->reserved, c->reserved);
	} else {
		pinmem_budget_settle(f, c->cg, c->reserved, actual);
	}
	c->reserved = 0;
	c->charged += actual;
	c->kmem += kmem;
	ret = pinmem_region_add(r, pages, n, &recorded);
	if (ret) {
		base = pinmem_folio_del_pages(&f->folios, pages + recorded,
					      n - recorded, &freed, &gone);
		c->kmem += freed;
		unpin_user_pages(pages + recorded, n - recorded);
		pinmem_budget_uncharge(f, c->cg, base, 0);
		pinmem_folio_release(&gone, pinmem_file_uncharge_folio, f);
	}
	return ret;
}

/* Retries of a chunk whose pages GUP could not migrate (-ENOMEM, -EAGAIN). */
#define PINMEM_PIN_TRIES	10

/*
 * Pin and settle one chunk of @r under the locks it needs: the user's GUP
 * lock around GUP, the file's lock around settling (around both in tail
 * mode, so the page pinned ahead of its charge is charged without waiting
 * for anyone).  Returns what pinmem_region_pin_chunk() or
 * pinmem_file_settle() returned (positive: pages pinned and settled).
 */
static long pinmem_file_pin_chunk(struct pinmem_pin_ctx *c,
				  struct pinmem_region *r, struct page **pages)
{
	struct pinmem_file *f = c->f;
	long got;
	int ret;

	c->refused = 0;
	if (c->tail && mutex_lock_killable(&f->lock))
		return -EINTR;
	got = pinmem_budget_gup_lock(f);
	if (!got) {
		got = pinmem_region_pin_chunk(r, pages, pinmem_file_reserve, c);
		pinmem_budget_gup_unlock(f);
	}
	if (got > 0) {
		if (!c->tail)
			mutex_lock(&f->lock);
		ret = pinmem_file_settle(c, r, pages, got);
		if (!c->tail)
			mutex_unlock(&f->lock);
		if (ret)
			got = ret;
	}
	if (c->tail)
		mutex_unlock(&f->lock);
	if (got <= 0) {
		pinmem_budget_uncharge(f, c->cg, c->reserved,
				       PINMEM_CHARGE_RESERVE);
		c->reserved = 0;
	}
	return got;
}

/*
 * Pin every page of @r, chunk by chunk, each charged before GUP runs and
 * settled to what its pages keep allocated right after
 * (pinmem_file_reserve(), pinmem_file_settle()).  Returns 0 or a negative
 * errno; on failure the pages recorded in @r stay pinned and charged for
 * the caller to release.
 */
static int pinmem_file_pin_pages(struct pinmem_pin_ctx *c,
				 struct pinmem_region *r)
{
	struct page **pages;
	int tries = 0, ret = 0;
	long got;

	pages = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	while (r->pinned < r->npages) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		got = pinmem_file_pin_chunk(c, r, pages);
		if (got > 0) {
			tries = 0;
			cond_resched();
			continue;
		}
		if (!got) {	/* not even one page's worst case fits */
			ret = pinmem_budget_tail_lock(c->f);
			if (ret)
				break;
			c->tail = true;
			continue;
		}
		if (c->refused && pinmem_budget_is_bytes(c->refused)) {
			if (pinmem_file_wait_reserved(c))
				continue;	/* pin the chunk again */
			ret = pinmem_budget_errno(c->refused);
			break;
		}
		/*
		 * A long-term pin first migrates pages out of ZONE_MOVABLE
		 * and CMA, and GUP fails with -ENOMEM when that migration
		 * fails, which happens for a moment when another thread pins
		 * the same pages at the same time.  Try again a few times; if
		 * it persists, say -EAGAIN as mlock(2) does, because ENOMEM
		 * tells pinmem's callers that RLIMIT_MEMLOCK refused.
		 */
		if ((got == -ENOMEM || got == -EAGAIN) && !c->refused &&
		    ++tries < PINMEM_PIN_TRIES) {
			if (tries == 1)
				cond_resched();
			else
				msleep(1);
			continue;
		}
		ret = got == -ENOMEM && !c->refused ? -EAGAIN : got;
		if (ret == -ETOOMANYREFS && !c->refused)
			c->refused = PINMEM_REFUSED_PAGE_REFS;
		break;
	}
	if (c->tail)
		pinmem_budget_tail_unlock(c->f);
	kfree(pages);
	return ret;
}

/**
 * pinmem_file_pin() - PINMEM_IOC_PIN: pin a user range and charge it
 * @f: the file; the caller must be its owner (pinmem_file_is_owner())
 * @pin: the validated request; the result is written back to @upin
 * @upin: the caller's struct; on failure only its @refused is written
 *
 * Checks the arguments, then the mapping, then takes a region of the caps,
 * then pins chunk by chunk: each chunk is charged to every budget the
 * most its pages could keep allocated before it is pinned, and what they
 * turn out to keep (whole large folios the file did not hold yet, base
 * pages) right after, so what this file has pinned never exceeds what its
 * budgets were charged, also while GUP waits in a fault.  Any failure
 * unwinds, so nothing stays pinned or charged; refusals and failures are
 * counted by reason and the reason is written to @upin->refused.
 *
 * Return: 0; -EPERM from another process than the owner; -EINVAL for zero,
 * unaligned or wrapping ranges; -EFAULT for ranges outside user space, holes,
 * pin faults or an unwritable @upin; -EACCES, -EOPNOTSUPP for mappings that
 * cannot be pinned; -EINTR on a fatal signal; -ENOMEM; -EAGAIN; -ETOOMANYREFS
 * when @f would hold more than PINMEM_FOLIO_MAX_PINS pins per page of a
 * large folio or a page's reference count would near its limit; a budget
 * errno.
 */
int pinmem_file_pin(struct pinmem_file *f, struct pinmem_pin *pin,
		    struct pinmem_pin __user *upin)
{
	struct pinmem_pin_ctx c = { .f = f, .step = PINMEM_CHUNK };
	struct pinmem_region *r;
	LIST_HEAD(gone);
	u64 bytes, refuser;
	u64 addr;
	u32 handle, reason;
	void *old;
	int ret;

	if (!pinmem_file_is_owner(f)) {
		ret = -EPERM;
		goto err_reason;
	}
	/*
	 * A tagged pointer (arm64 TBI, x86 LAM) names the same memory.  GUP
	 * untags by itself, but the VMA check (find_vma()) would look up the
	 * tagged address and miss the mapping, so check, pin and record the
	 * untagged one (also what REGIONS reports).
	 */
	addr = untagged_addr(pin->addr);
	ret = pinmem_pin_args(pin, addr);
	if (ret)
		goto err_reason;
	ret = pinmem_region_check(f->mm, addr, pin->length);
	if (ret) {
		pinmem_budget_refuse(f, NULL, pinmem_pin_reason(ret), 0);
		goto err_reason;
	}
	/* The pinning task's cgroup now, wherever the opener was. */
	c.cg = pinmem_cg_get_current();
	if (IS_ERR(c.cg)) {
		ret = PTR_ERR(c.cg);
		c.cg = NULL;
		goto err_count;
	}
	/*
	 * A region of the caps, and a first look at the bytes: the least
	 * the range can cost is its length less what the file holds in
	 * large folios already (pages there cost nothing more), so a PIN
	 * that cannot fit is refused before anything is pinned.
	 */
	bytes = pin->length - min_t(u64, pin->length, READ_ONCE(f->folios.bytes));
	for (;;) {
		reason = pinmem_budget_charge(f, c.cg, bytes,
					      PINMEM_CHARGE_REGION |
					      PINMEM_CHARGE_RESERVE, &refuser);
		if (!pinmem_budget_is_bytes(reason))
			break;
		c.refused = reason;
		c.refuser = refuser;
		if (!pinmem_file_wait_reserved(&c))
			break;
	}
	c.refused = 0;
	if (reason) {
		pinmem_budget_refuse(f, c.cg, reason, refuser);
		pinmem_cg_put(c.cg);
		return pinmem_pin_refused(upin, reason,
					  pinmem_budget_errno(reason));
	}
	pinmem_budget_uncharge(f, c.cg, bytes, PINMEM_CHARGE_RESERVE);
	r = pinmem_region_alloc(addr, pin->length >> PAGE_SHIFT);
	if (!r) {
		ret = -ENOMEM;
		pinmem_budget_uncharge(f, c.cg, 0, PINMEM_CHARGE_REGION);
		goto err_count;
	}
	r->cg = c.cg;
	ret = pinmem_file_pin_pages(&c, r);
	pinmem_budget_kmem(f, c.kmem + (s64)r->kmem_bytes);
	/*
	 * Not killable: @r is pinned and charged, and either undoing or
	 * publishing it needs the lock.
	 */
	mutex_lock(&f->lock);
	if (ret)
		goto err_forget;
	/*
	 * Reserve the handle only: UNPIN and REGIONS do not see @r before
	 * the result reached the caller, so the copy runs without f->lock
	 * (a fault on @upin may sleep long) and a failed copy is undone.
	 */
	ret = xa_alloc_cyclic(&f->regions, &handle, NULL, XA_LIMIT(1, U32_MAX),
			      &f->next_handle, GFP_KERNEL_ACCOUNT);
	if (ret < 0)
		goto err_forget;
	mutex_unlock(&f->lock);
	r->handle = handle;
	pin->handle = handle;
	pin->pages = r->npages;
	pin->segments = r->segments;
	pin->huge_bytes = r->huge_bytes;
	pin->charged_bytes = c.charged;
	pin->refused = 0;
	ret = copy_to_user(upin, pin, sizeof(*pin)) ? -EFAULT : 0;
	mutex_lock(&f->lock);
	if (ret)
		goto err_erase;
	/* Fills the reserved slot: allocates nothing. */
	old = xa_store(&f->regions, handle, r, GFP_KERNEL_ACCOUNT);
	if (WARN_ON_ONCE(xa_is_err(old))) {
		ret = xa_err(old);
		goto err_erase;
	}
	/* Under f->lock, so no UNPIN releases it before it is counted. */
	pinmem_budget_commit(f);
	mutex_unlock(&f->lock);
	return 0;

err_erase:
	xa_erase(&f->regions, handle);
err_forget:
	bytes = pinmem_file_forget_region(f, r, &gone);
	mutex_unlock(&f->lock);
	reason = c.refused ? c.refused : pinmem_pin_reason(ret);
	pinmem_budget_refuse(f, c.cg, reason, c.refuser);
	pinmem_file_drop_region(f, r, bytes, &gone, false);	/* puts c.cg */
	return pinmem_pin_refused(upin, reason, ret);
err_count:
	pinmem_budget_refuse(f, c.cg, pinmem_pin_reason(ret), 0);
	pinmem_cg_put(c.cg);
err_reason:
	return pinmem_pin_refused(upin, pinmem_pin_reason(ret), ret);
}

/**
 * pinmem_file_unpin() - PINMEM_IOC_UNPIN: release one region of @f
 * @f: the file
 * @handle: from PIN
 *
 * The pages are marked dirty: the device or the process may have written
 * them while pinned.
 *
 * Return: 0; -EPERM for another process than the owner; -ENOENT when @f
 * holds no region @handle; -EINTR on a fatal signal while waiting for
 * another PIN or UNPIN of @f.
 */
int pinmem_file_unpin(struct pinmem_file *f, u64 handle)
{
	struct pinmem_region *r = NULL;
	LIST_HEAD(gone);
	u64 bytes = 0;

	if (!pinmem_file_is_owner(f))
		return -EPERM;
	if (!handle || handle > U32_MAX)
		return -ENOENT;
	if (mutex_lock_killable(&f->lock))
		return -EINTR;
	/*
	 * A PIN copying its result out holds a reserved handle (no region
	 * yet): erasing it would make that PIN allocate again to publish.
	 */
	r = xa_load(&f->regions, handle);
	if (r) {
		xa_erase(&f->regions, handle);
		bytes = pinmem_file_forget_region(f, r, &gone);
	}
	mutex_unlock(&f->lock);
	if (!r)
		return -ENOENT;
	pinmem_file_drop_region(f, r, bytes, &gone, true);
	return 0;
}

/**
 * pinmem_file_regions() - PINMEM_IOC_REGIONS: list the regions of @f
 * @f: the file
 * @arg: @arg->regions and @arg->capacity in; @arg->count and @arg->total out
 *
 * The list is copied under @f->lock (one consistent snapshot, at most
 * max_regions_per_file entries) and handed to the caller after, so a fault
 * on the caller's array never holds up PIN and UNPIN.
 *
 * Return: 0; -EPERM for another process than the owner (the addresses are
 * the owner's); -EFAULT when the array is not writable; -EINTR on a fatal
 * signal while waiting for a PIN or UNPIN of @f; -ENOMEM.
 */
int pinmem_file_regions(struct pinmem_file *f, struct pinmem_regions *arg)
{
	struct pinmem_region_info __user *uinfo = u64_to_user_ptr(arg->regions);
	struct pinmem_region_info *info = NULL, *i;
	struct pinmem_region *r;
	unsigned long handle;
	u64 total = 0;
	u32 count = 0;
	int ret = 0;

	if (!pinmem_file_is_owner(f))
		return -EPERM;
	if (mutex_lock_killable(&f->lock))
		return -EINTR;
	xa_for_each(&f->regions, handle, r)
		total++;
	count = min_t(u64, total, arg->capacity);
	if (count) {
		info = kvcalloc(count, sizeof(*info), GFP_KERNEL_ACCOUNT);
		if (!info) {
			mutex_unlock(&f->lock);
			return -ENOMEM;
		}
	}
	i = info;
	xa_for_each(&f->regions, handle, r) {
		if (i == info + count)
			break;
		i->handle = r->handle;
		i->addr = r->addr;
		i->length = pinmem_region_bytes(r);
		i->pages = r->npages;
		i->segments = r->segments;
		i->huge_bytes = r->huge_bytes;
		i++;
	}
	mutex_unlock(&f->lock);
	if (count && copy_to_user(uinfo, info, count * sizeof(*info)))
		ret = -EFAULT;
	kvfree(info);
	arg->count = count;
	arg->total = total;
	return ret;
}

/* Files copied per hold of pinmem_files_lock by pinmem_files_snapshot(). */
#define PINMEM_FILES_BATCH	64

/**
 * pinmem_files_snapshot() - copy every open file for the stats file
 * @views: out: an array of @nr copies in open order; free it with
 *	pinmem_files_snapshot_free()
 * @nr: out: entries
 *
 * The table's lock is held for at most PINMEM_FILES_BATCH files at a time,
 * the next batch found from the last id copied, so however many files are
 * open a stats reader never holds up an open or a close for long.  Each
 * row is consistent in itself; a file opened or closed meanwhile may be
 * missing or shown.
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_files_snapshot(struct pinmem_file_view **views, size_t *nr)
{
	struct pinmem_file_view *v = NULL, *cur;
	size_t cap = 0, n = 0, i;
	unsigned long id = 0;
	struct pinmem_file *f;

	for (;;) {
		if (pinmem_snapshot_room((void **)&v, &cap, n, sizeof(*v),
					 PINMEM_FILES_BATCH)) {
			pinmem_files_snapshot_free(v, n);
			return -ENOMEM;
		}
		i = 0;
		mutex_lock(&pinmem_files_lock);
		xa_for_each_start(&pinmem_files, id, f, id) {
			if (i++ == PINMEM_FILES_BATCH)
				break;
			cur = &v[n++];
			cur->tgid = get_pid(f->tgid);
			cur->uid = f->uid;
			cur->budget_uid = f->budget_uid;
			memcpy(cur->comm, f->comm, sizeof(cur->comm));
			pinmem_budget_file(f, &cur->acct);
			cur->mm_pinned_bytes =
				(u64)atomic64_read(&f->mm->pinned_vm) << PAGE_SHIFT;
		}
		mutex_unlock(&pinmem_files_lock);
		if (i <= PINMEM_FILES_BATCH)
			break;
	}
	*views = v;
	*nr = n;
	return 0;
}

/**
 * pinmem_files_snapshot_free() - free a snapshot
 * @views: from pinmem_files_snapshot(), or NULL
 * @nr: its entries holding a reference
 */
void pinmem_files_snapshot_free(struct pinmem_file_view *views, size_t nr)
{
	size_t i;

	for (i = 0; views && i < nr; i++)
		put_pid(views[i].tgid);
	kvfree(views);
}
