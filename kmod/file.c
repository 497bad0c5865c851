// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem open files: regions belong to the file that pinned them, and every
 * region is unpinned and un-charged when the file goes away (close, exit,
 * SIGKILL), even after the owner's mm has been torn down.
 */
#include <linux/cred.h>
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

static DEFINE_MUTEX(pinmem_files_lock);
static LIST_HEAD(pinmem_files);

/**
 * pinmem_file_open() - state for a new open of /dev/pinmem
 *
 * The opener's mm, uid, process and name are recorded now: the regions of
 * this file are charged to them for the file's whole life.  The cgroup is
 * not: each PIN is charged to its pinning task's cgroup (kmod/cgroup.c).
 *
 * Return: the file state, or ERR_PTR(-EINVAL) without a user mm,
 * ERR_PTR(-ENOMEM).
 */
struct pinmem_file *pinmem_file_open(void)
{
	struct pinmem_file *f;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);
	if (!f)
		return ERR_PTR(-ENOMEM);
	f->uid = current_uid();
	f->user = pinmem_user_get(f->uid);
	if (!f->user) {
		kfree(f);
		return ERR_PTR(-ENOMEM);
	}
	mutex_init(&f->lock);
	mutex_init(&f->fallback_lock);
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
	list_add_tail(&f->node, &pinmem_files);
	mutex_unlock(&pinmem_files_lock);
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
	pinmem_budget_uncharge(arg, cg, bytes, false);
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
		pinmem_budget_uncharge(f, cg, bytes, true);
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
	list_del(&f->node);
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
	WARN_ON_ONCE(!RB_EMPTY_ROOT(&f->folios.root) || f->folios.bytes);
	xa_destroy(&f->regions);
	mutex_destroy(&f->fallback_lock);
	mutex_destroy(&f->lock);
	free_uid(f->ustruct);
	pinmem_user_put(f->user);
	put_pid(f->tgid);
	mmdrop(f->mm);
	kfree(f);
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

/*
 * Count @r's folios and charge what the file did not hold yet, beyond the
 * @length charged before pinning, to @r's cgroup; @f->lock is held.
 * Returns 0 with *@charged the bytes now charged for @r, or a
 * PINMEM_REFUSED_* reason with nothing but @length charged (a budget's
 * refusal and too many pins of a large folio are counted).
 */
static u32 pinmem_file_charge_folios(struct pinmem_file *f,
				     struct pinmem_region *r, u64 length,
				     u64 *charged)
{
	LIST_HEAD(gone);
	u64 bytes, refuser;
	s64 kmem, freed;
	u32 reason;
	int ret;

	ret = pinmem_folio_add(&f->folios, r, r->cg, &bytes, &kmem);
	if (ret == -ETOOMANYREFS) {
		pinmem_budget_refuse(f, r->cg, PINMEM_REFUSED_FOLIO_PINS, 0);
		return PINMEM_REFUSED_FOLIO_PINS;
	}
	if (ret)
		return PINMEM_REFUSED_KMEM;
	if (bytes > length) {
		reason = pinmem_budget_charge(f, r->cg, bytes - length, false,
					      &refuser);
		if (reason) {
			pinmem_folio_remove(&f->folios, r, &freed, &gone);
			pinmem_folio_release(&gone, NULL, NULL);
			pinmem_budget_refuse(f, r->cg, reason, refuser);
			return reason;
		}
	} else if (bytes < length) {
		pinmem_budget_uncharge(f, r->cg, length - bytes, false);
	}
	pinmem_budget_kmem(f, kmem + (s64)r->kmem_bytes);
	*charged = bytes;
	return 0;
}

/**
 * pinmem_file_pin() - PINMEM_IOC_PIN: pin a user range and charge it
 * @f: the file; the caller must be its owner (pinmem_file_is_owner())
 * @pin: the validated request; the result is written back to @upin
 * @upin: the caller's struct; on failure only its @refused is written
 *
 * Checks the arguments, then the mapping, then charges @pin->length to
 * every budget (refusing early, before pinning anything), then pins, then
 * charges what the pages keep allocated beyond that (whole large folios)
 * or un-charges what the file already held.  Any failure unwinds in
 * reverse order, so nothing stays pinned or charged; refusals and failures
 * are counted by reason and the reason is written to @upin->refused.
 *
 * Return: 0; -EPERM from another process than the owner; -EINVAL for zero,
 * unaligned or wrapping ranges; -EFAULT for ranges outside user space, holes,
 * pin faults or an unwritable @upin; -EACCES, -EOPNOTSUPP for mappings that
 * cannot be pinned; -EINTR on a fatal signal; -ENOMEM; -ETOOMANYREFS when
 * @f would hold more than PINMEM_FOLIO_MAX_PINS pins per page of a
 * large folio; a budget errno.
 */
int pinmem_file_pin(struct pinmem_file *f, struct pinmem_pin *pin,
		    struct pinmem_pin __user *upin)
{
	struct pinmem_region *r;
	struct pinmem_cg *cg;
	LIST_HEAD(gone);
	u64 bytes, charged;	/* charged before the pin, after it */
	u64 refuser;		/* the cgroup that refused, if one did */
	u64 addr;
	u32 handle, reason;
	bool fallback = false;
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
	bytes = pin->length;
	ret = pinmem_region_check(f->mm, addr, pin->length);
	if (ret) {
		pinmem_budget_refuse(f, NULL, pinmem_pin_reason(ret), 0);
		goto err_reason;
	}
	/* The pinning task's cgroup now, wherever the opener was. */
	cg = pinmem_cg_get_current();
	if (IS_ERR(cg)) {
		ret = PTR_ERR(cg);
		cg = NULL;
		goto err_count;
	}

	reason = pinmem_budget_charge(f, cg, bytes, true, &refuser);
	if (reason && pinmem_budget_is_bytes(reason) &&
	    bytes <= READ_ONCE(f->folios.bytes)) {
		/*
		 * The range may lie in large folios this file holds and was
		 * charged for already: pin first, then charge what the pages
		 * add.  What may be pinned uncharged meanwhile is bounded by
		 * what the file is charged for: one such PIN at a time, or N
		 * threads of an owner over its budget would hold N ranges.
		 */
		if (mutex_lock_killable(&f->fallback_lock)) {
			ret = -EINTR;
			goto err_count;
		}
		fallback = true;
		bytes = 0;
		reason = pinmem_budget_charge(f, cg, bytes, true, &refuser);
	}
	if (reason) {
		if (fallback)
			mutex_unlock(&f->fallback_lock);
		pinmem_budget_refuse(f, cg, reason, refuser);
		pinmem_cg_put(cg);
		return pinmem_pin_refused(upin, reason,
					  pinmem_budget_errno(reason));
	}

	r = pinmem_region_alloc(addr, pin->length >> PAGE_SHIFT);
	if (!r) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	r->cg = cg;
	ret = pinmem_region_pin(r);
	if (ret)
		goto err_unpin;

	if (mutex_lock_killable(&f->lock)) {
		ret = -EINTR;
		goto err_unpin;
	}
	reason = pinmem_file_charge_folios(f, r, bytes, &charged);
	if (reason) {
		mutex_unlock(&f->lock);
		pinmem_region_free(r, false);
		if (fallback)
			mutex_unlock(&f->fallback_lock);
		pinmem_budget_uncharge(f, cg, bytes, true);
		if (reason != PINMEM_REFUSED_KMEM) {
			pinmem_cg_put(cg);
			return pinmem_pin_refused(upin, reason,
						  pinmem_budget_errno(reason));
		}
		ret = -ENOMEM;
		goto err_count;
	}
	if (fallback)	/* every page of @r is charged now */
		mutex_unlock(&f->fallback_lock);
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
	pin->charged_bytes = charged;
	pin->refused = 0;
	ret = copy_to_user(upin, pin, sizeof(*pin)) ? -EFAULT : 0;
	/*
	 * Not killable: @r is pinned and charged, and either undoing or
	 * publishing it needs the lock.
	 */
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
	/* The folio accounting charged @charged in place of @bytes. */
	bytes = pinmem_file_forget_region(f, r, &gone);
	mutex_unlock(&f->lock);
	pinmem_budget_refuse(f, cg, pinmem_pin_reason(ret), 0);
	pinmem_file_drop_region(f, r, bytes, &gone, false);	/* puts @cg */
	goto err_reason;
err_unpin:
	pinmem_region_free(r, false);
err_uncharge:
	if (fallback)
		mutex_unlock(&f->fallback_lock);
	pinmem_budget_uncharge(f, cg, bytes, true);
err_count:
	pinmem_budget_refuse(f, cg, pinmem_pin_reason(ret), 0);
	pinmem_cg_put(cg);
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

/**
 * pinmem_files_snapshot() - copy every open file for the stats file
 * @views: out: an array of @nr copies in open order; free it with
 *	pinmem_files_snapshot_free()
 * @nr: out: entries
 *
 * The list lock is held only to copy, O(files); the array is allocated
 * outside it and the copy retried if files were opened meanwhile.
 *
 * Return: 0 or -ENOMEM.
 */
int pinmem_files_snapshot(struct pinmem_file_view **views, size_t *nr)
{
	struct pinmem_file_view *v = NULL, *cur;
	struct pinmem_file *f;
	size_t cap = 0, n;

	for (;;) {
		n = 0;
		mutex_lock(&pinmem_files_lock);
		list_for_each_entry(f, &pinmem_files, node) {
			if (n < cap) {
				cur = &v[n];
				cur->tgid = get_pid(f->tgid);
				cur->uid = f->uid;
				memcpy(cur->comm, f->comm, sizeof(cur->comm));
				pinmem_budget_file(f, &cur->acct);
				cur->mm_pinned_bytes =
					(u64)atomic64_read(&f->mm->pinned_vm)
					<< PAGE_SHIFT;
			}
			n++;
		}
		mutex_unlock(&pinmem_files_lock);
		if (n <= cap)
			break;
		pinmem_files_snapshot_free(v, cap);
		cap = n + 16;
		v = kvmalloc_array(cap, sizeof(*v), GFP_KERNEL);
		if (!v)
			return -ENOMEM;
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
