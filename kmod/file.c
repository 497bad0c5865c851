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
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "budget.h"
#include "pinmem.h"
#include "region.h"

static DEFINE_MUTEX(pinmem_files_lock);
static LIST_HEAD(pinmem_files);

/**
 * pinmem_file_open() - state for a new open of /dev/pinmem
 *
 * The opener's mm, uid, process and name are recorded now: the regions of
 * this file are charged to them for the file's whole life.
 *
 * Return: the file state, or ERR_PTR(-EINVAL) without a user mm,
 * ERR_PTR(-ENOMEM).
 */
struct pinmem_file *pinmem_file_open(void)
{
	struct pinmem_file *f;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return ERR_PTR(-ENOMEM);
	f->uid = current_uid();
	f->user = pinmem_user_get(f->uid);
	if (!f->user) {
		kfree(f);
		return ERR_PTR(-ENOMEM);
	}
	mutex_init(&f->lock);
	xa_init_flags(&f->regions, XA_FLAGS_ALLOC1);
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

/* Unpin @r, then un-charge it: real pins never exceed what is charged. */
static void pinmem_file_drop_region(struct pinmem_file *f,
				    struct pinmem_region *r)
{
	u64 bytes = pinmem_region_bytes(r);

	pinmem_region_free(r, true);
	pinmem_budget_release(f, bytes);
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
		xa_erase(&f->regions, handle);
		pinmem_file_drop_region(f, r);
	}
	xa_destroy(&f->regions);
	mutex_destroy(&f->lock);
	pinmem_user_put(f->user);
	put_pid(f->tgid);
	mmdrop(f->mm);
	kfree(f);
}

/* Checks of PIN's range that need no mapping: -EINVAL or -EFAULT. */
static int pinmem_pin_args(const struct pinmem_pin *pin)
{
	u64 end;

	if (!pin->length || !PAGE_ALIGNED(pin->addr) ||
	    !PAGE_ALIGNED(pin->length))
		return -EINVAL;
	if (check_add_overflow(pin->addr, pin->length, &end))
		return -EINVAL;
	if (end > TASK_SIZE ||
	    !access_ok(u64_to_user_ptr(pin->addr), pin->length))
		return -EFAULT;
	return 0;
}

/**
 * pinmem_file_pin() - PINMEM_IOC_PIN: pin a user range and charge it
 * @f: the file; the caller must run on its owner mm
 * @pin: the validated request; the result is written back to @upin
 * @upin: the caller's struct
 *
 * Checks the arguments, then the mapping, then charges every budget, then
 * pins.  Any failure after that unwinds in reverse order, so nothing stays
 * pinned or charged; refusals and failures are counted by reason.
 *
 * Return: 0; -EPERM from another mm than the opener's; -EINVAL for zero,
 * unaligned or wrapping ranges; -EFAULT for ranges outside user space, holes,
 * pin faults or an unwritable @upin; -EACCES, -EOPNOTSUPP for mappings that
 * cannot be pinned; -EINTR on a fatal signal; -ENOMEM; a budget errno.
 */
int pinmem_file_pin(struct pinmem_file *f, struct pinmem_pin *pin,
		    struct pinmem_pin __user *upin)
{
	struct pinmem_region *r;
	u32 handle;
	u64 bytes;
	int ret;

	if (current->mm != f->mm)
		return -EPERM;
	ret = pinmem_pin_args(pin);
	if (ret)
		return ret;
	bytes = pin->length;

	ret = pinmem_region_check(f->mm, pin->addr, bytes);
	if (ret) {
		pinmem_budget_count_fault(f);
		return ret;
	}

	ret = pinmem_budget_charge(f, bytes);
	if (ret)
		return ret;

	r = pinmem_region_alloc(pin->addr, bytes >> PAGE_SHIFT);
	if (!r) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	ret = pinmem_region_pin(r);
	if (ret)
		goto err_unpin;

	mutex_lock(&f->lock);
	ret = xa_alloc_cyclic(&f->regions, &handle, r, XA_LIMIT(1, U32_MAX),
			      &f->next_handle, GFP_KERNEL);
	if (ret < 0)
		goto err_unlock;
	r->handle = handle;
	pin->handle = handle;
	pin->pages = r->npages;
	pin->segments = r->segments;
	pin->huge_bytes = r->huge_bytes;
	if (copy_to_user(upin, pin, sizeof(*pin))) {
		ret = -EFAULT;
		goto err_erase;
	}
	/* Under f->lock, so no UNPIN releases it before it is counted. */
	pinmem_budget_commit(f);
	mutex_unlock(&f->lock);
	return 0;

err_erase:
	xa_erase(&f->regions, handle);
err_unlock:
	mutex_unlock(&f->lock);
err_unpin:
	pinmem_region_free(r, false);
err_uncharge:
	pinmem_budget_abort(f, bytes);
	return ret;
}

/**
 * pinmem_file_unpin() - PINMEM_IOC_UNPIN: release one region of @f
 * @f: the file
 * @handle: from PIN
 *
 * The pages are marked dirty: the device or the process may have written
 * them while pinned.
 *
 * Return: 0, or -ENOENT when @f holds no region @handle.
 */
int pinmem_file_unpin(struct pinmem_file *f, u64 handle)
{
	struct pinmem_region *r = NULL;

	if (!handle || handle > U32_MAX)
		return -ENOENT;
	mutex_lock(&f->lock);
	r = xa_erase(&f->regions, handle);
	mutex_unlock(&f->lock);
	if (!r)
		return -ENOENT;
	pinmem_file_drop_region(f, r);
	return 0;
}

/**
 * pinmem_file_regions() - PINMEM_IOC_REGIONS: list the regions of @f
 * @f: the file
 * @arg: @arg->regions and @arg->capacity in; @arg->count and @arg->total out
 *
 * Return: 0, or -EFAULT when the array is not writable.
 */
int pinmem_file_regions(struct pinmem_file *f, struct pinmem_regions *arg)
{
	struct pinmem_region_info __user *uinfo = u64_to_user_ptr(arg->regions);
	struct pinmem_region_info info;
	struct pinmem_region *r;
	unsigned long handle;
	u64 total = 0;
	u32 count = 0;
	int ret = 0;

	mutex_lock(&f->lock);
	xa_for_each(&f->regions, handle, r) {
		total++;
		if (count == arg->capacity || ret)
			continue;
		memset(&info, 0, sizeof(info));
		info.handle = r->handle;
		info.addr = r->addr;
		info.length = pinmem_region_bytes(r);
		info.pages = r->npages;
		info.segments = r->segments;
		info.huge_bytes = r->huge_bytes;
		if (copy_to_user(&uinfo[count], &info, sizeof(info)))
			ret = -EFAULT;
		else
			count++;
	}
	mutex_unlock(&f->lock);
	arg->count = count;
	arg->total = total;
	return ret;
}

/**
 * pinmem_files_for_each() - call @fn on every open file, in open order
 * @fn: called with the list lock held; may sleep, must not open or close
 * @arg: passed to @fn
 */
void pinmem_files_for_each(void (*fn)(struct pinmem_file *f, void *arg),
			   void *arg)
{
	struct pinmem_file *f;

	mutex_lock(&pinmem_files_lock);
	list_for_each_entry(f, &pinmem_files, node)
		fn(f, arg);
	mutex_unlock(&pinmem_files_lock);
}
