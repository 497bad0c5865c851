// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: pins user memory long-term for GPU data loading and charges every
 * pinned page to a global, a per-user and the process's RLIMIT_MEMLOCK
 * budget.  This file holds the misc device /dev/pinmem, module setup and the
 * ioctl ABI checks (include/uapi/pinmem.h): size and direction of each
 * command, and flags, padding and reserved fields that must be zero.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/uaccess.h>

#include "budget.h"
#include "cgroup.h"
#include "folio.h"
#include "pinmem.h"

#ifndef PINMEM_VERSION
#define PINMEM_VERSION "unknown"
#endif

/* True when the @n u64 at @p are all zero. */
static bool pinmem_zero(const u64 *p, size_t n)
{
	return !memchr_inv(p, 0, n * sizeof(*p));
}

#define pinmem_reserved_zero(s) pinmem_zero((s)->reserved, ARRAY_SIZE((s)->reserved))

/**
 * pinmem_ioc_version() - PINMEM_IOC_GET_VERSION: ABI version and page size
 * @f: the file (unused)
 * @uarg: struct pinmem_version; flags and reserved must be zero on input
 *
 * Return: 0; -EFAULT; -EINVAL for non-zero flags or reserved fields.
 */
static long pinmem_ioc_version(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_version v;

	if (copy_from_user(&v, uarg, sizeof(v)))
		return -EFAULT;
	if (v.flags || !pinmem_reserved_zero(&v))
		return -EINVAL;
	v.abi_major = PINMEM_ABI_MAJOR;
	v.abi_minor = PINMEM_ABI_MINOR;
	v.page_size = PAGE_SIZE;
	return copy_to_user(uarg, &v, sizeof(v)) ? -EFAULT : 0;
}

/**
 * pinmem_ioc_pin() - PINMEM_IOC_PIN: pin and charge a user range
 * @f: the file; only its opener's mm may pin through it
 * @uarg: struct pinmem_pin; flags, pad, pad2 and reserved must be zero; the
 *	out fields of ABI 1.1 are ignored (a 1.0 program reuses its struct)
 *
 * Return: 0 with handle, pages, segments, huge_bytes and charged_bytes
 * filled in; -EINVAL for non-zero flags, pad or reserved; otherwise see
 * pinmem_file_pin().  On failure the reason is written to refused.
 */
static long pinmem_ioc_pin(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_pin pin;

	if (copy_from_user(&pin, uarg, sizeof(pin)))
		return -EFAULT;
	if (pin.flags || pin.pad || pin.pad2 || !pinmem_reserved_zero(&pin)) {
		pin.refused = PINMEM_REFUSED_ARGS;
		if (put_user(pin.refused, &((struct pinmem_pin __user *)uarg)->refused))
			return -EFAULT;
		return -EINVAL;
	}
	return pinmem_file_pin(f, &pin, uarg);
}

/**
 * pinmem_ioc_unpin() - PINMEM_IOC_UNPIN: release a region, pages dirtied
 * @f: the file holding the region
 * @uarg: struct pinmem_unpin; flags, pad and reserved must be zero
 *
 * Return: 0; -EFAULT; -EINVAL for non-zero flags, pad or reserved; -ENOENT
 * for a handle this file does not hold (also a second UNPIN of one handle).
 */
static long pinmem_ioc_unpin(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_unpin un;

	if (copy_from_user(&un, uarg, sizeof(un)))
		return -EFAULT;
	if (un.flags || un.pad || !pinmem_reserved_zero(&un))
		return -EINVAL;
	return pinmem_file_unpin(f, un.handle);
}

/**
 * pinmem_ioc_regions() - PINMEM_IOC_REGIONS: list the file's regions
 * @f: the file
 * @uarg: struct pinmem_regions; flags, pad and reserved must be zero
 *
 * Return: 0 with count and total filled in; -EFAULT when the struct or the
 * first min(capacity, total) array entries are not writable; -EINVAL;
 * -ENOMEM for the snapshot; -EINTR on a fatal signal while waiting for the
 * file's lock.
 */
static long pinmem_ioc_regions(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_regions rg;
	int ret;

	if (copy_from_user(&rg, uarg, sizeof(rg)))
		return -EFAULT;
	if (rg.flags || rg.pad || !pinmem_reserved_zero(&rg))
		return -EINVAL;
	ret = pinmem_file_regions(f, &rg);
	if (ret)
		return ret;
	return copy_to_user(uarg, &rg, sizeof(rg)) ? -EFAULT : 0;
}

/**
 * pinmem_ioc_stats() - PINMEM_IOC_STATS: global, user and file counters
 * @f: the file
 * @uarg: struct pinmem_stats; flags and reserved must be zero
 *
 * Any holder of the file may ask, also a child that inherited it.
 *
 * Return: 0; -EFAULT; -EINVAL.
 */
static long pinmem_ioc_stats(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_stats st;

	if (copy_from_user(&st, uarg, sizeof(st)))
		return -EFAULT;
	/* the out fields carved from 1.0's reserved space are ignored on input */
	if (st.flags || !pinmem_reserved_zero(&st))
		return -EINVAL;
	pinmem_stats_fill(f, &st);
	return copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
}

/**
 * pinmem_ioc_get_limits() - PINMEM_IOC_GET_LIMITS: limits in force
 * @f: the file (unused)
 * @uarg: struct pinmem_limits; flags and reserved must be zero, uid in
 *
 * Return: 0; -EFAULT; -EINVAL, also for a uid without mapping.
 */
static long pinmem_ioc_get_limits(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_limits l;
	int ret;

	if (copy_from_user(&l, uarg, sizeof(l)))
		return -EFAULT;
	if (l.flags || !pinmem_reserved_zero(&l))
		return -EINVAL;
	ret = pinmem_budget_get_limits(&l);
	if (ret)
		return ret;
	return copy_to_user(uarg, &l, sizeof(l)) ? -EFAULT : 0;
}

/**
 * pinmem_ioc_set_limits() - PINMEM_IOC_SET_LIMITS: change limits (admin)
 * @f: the file (unused)
 * @uarg: struct pinmem_limits; reserved must be zero
 *
 * Return: 0; -EPERM without CAP_SYS_ADMIN; -EFAULT; -EINVAL (see
 * pinmem_budget_set_limits()); -ENOMEM.  Nothing changes on error.
 */
static long pinmem_ioc_set_limits(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_limits l;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&l, uarg, sizeof(l)))
		return -EFAULT;
	if (!pinmem_reserved_zero(&l))
		return -EINVAL;
	return pinmem_budget_set_limits(&l);
}

/* The longest cgroup path PINMEM_IOC_CGROUP takes, as PATH_MAX - 1. */
#define PINMEM_CGROUP_PATH_MAX	4095

/**
 * pinmem_ioc_cgroup() - PINMEM_IOC_CGROUP: read, set or clear a cgroup budget
 * @f: the file (unused)
 * @uarg: struct pinmem_cgroup; reserved must be zero, the out fields (and
 *	limit_bytes without SET) are ignored
 *
 * Return: 0; -EPERM for SET or CLEAR without CAP_SYS_ADMIN; -EINVAL for
 * unknown or both flags, a path over 4095 bytes or with a NUL, non-zero
 * reserved fields, a limit on the root; -ENOENT; -ENOTDIR; -EFAULT;
 * -ENOMEM.
 */
static long pinmem_ioc_cgroup(struct pinmem_file *f, void __user *uarg)
{
	u32 both = PINMEM_CGROUP_SET | PINMEM_CGROUP_CLEAR;
	struct pinmem_cgroup cg;
	char *path;
	long ret;

	if (copy_from_user(&cg, uarg, sizeof(cg)))
		return -EFAULT;
	/*
	 * The out fields are ignored on input (ABI 1.4), as PIN's and
	 * STATS's are, so a struct one GET filled works for the next.
	 */
	if ((cg.flags & ~both) || (cg.flags & both) == both ||
	    cg.path_len > PINMEM_CGROUP_PATH_MAX || !pinmem_reserved_zero(&cg))
		return -EINVAL;
	if (!(cg.flags & PINMEM_CGROUP_SET))
		cg.limit_bytes = 0;
	if (cg.flags && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	path = memdup_user_nul(u64_to_user_ptr(cg.path), cg.path_len);
	if (IS_ERR(path))
		return PTR_ERR(path);
	if (strlen(path) != cg.path_len) {
		ret = -EINVAL;
	} else {
		ret = pinmem_cg_ioctl(path[0] ? path : "/", &cg);
		if (!ret && copy_to_user(uarg, &cg, sizeof(cg)))
			ret = -EFAULT;
	}
	kfree(path);
	return ret;
}

/**
 * pinmem_ioc_refusals() - PINMEM_IOC_REFUSALS: refused PINs by reason
 * @f: the file
 * @uarg: struct pinmem_refusals; flags, pad, pad2 and reserved must be zero,
 *	the out fields are ignored
 *
 * Any holder of the file may ask.
 *
 * Return: 0; -EFAULT; -EINVAL.
 */
static long pinmem_ioc_refusals(struct pinmem_file *f, void __user *uarg)
{
	struct pinmem_refusals r;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.flags || r.pad || r.pad2 || !pinmem_reserved_zero(&r))
		return -EINVAL;
	pinmem_refusals_fill(f, &r);
	return copy_to_user(uarg, &r, sizeof(r)) ? -EFAULT : 0;
}

typedef long (*pinmem_ioc_fn)(struct pinmem_file *f, void __user *uarg);

/**
 * struct pinmem_ioc - one ioctl command
 * @cmd: the full command: type, number, direction and size
 * @fn: its handler
 */
struct pinmem_ioc {
	unsigned int cmd;
	pinmem_ioc_fn fn;
};

/* Indexed by _IOC_NR; a hole has cmd 0, which no command equals. */
static const struct pinmem_ioc pinmem_iocs[] = {
	[_IOC_NR(PINMEM_IOC_GET_VERSION)] = { PINMEM_IOC_GET_VERSION, pinmem_ioc_version },
	[_IOC_NR(PINMEM_IOC_PIN)] = { PINMEM_IOC_PIN, pinmem_ioc_pin },
	[_IOC_NR(PINMEM_IOC_UNPIN)] = { PINMEM_IOC_UNPIN, pinmem_ioc_unpin },
	[_IOC_NR(PINMEM_IOC_REGIONS)] = { PINMEM_IOC_REGIONS, pinmem_ioc_regions },
	[_IOC_NR(PINMEM_IOC_STATS)] = { PINMEM_IOC_STATS, pinmem_ioc_stats },
	[_IOC_NR(PINMEM_IOC_GET_LIMITS)] = { PINMEM_IOC_GET_LIMITS, pinmem_ioc_get_limits },
	[_IOC_NR(PINMEM_IOC_SET_LIMITS)] = { PINMEM_IOC_SET_LIMITS, pinmem_ioc_set_limits },
	[_IOC_NR(PINMEM_IOC_CGROUP)] = { PINMEM_IOC_CGROUP, pinmem_ioc_cgroup },
	[_IOC_NR(PINMEM_IOC_REFUSALS)] = { PINMEM_IOC_REFUSALS, pinmem_ioc_refusals },
};

/*
 * An unknown command is -ENOTTY, as for any file; a known command number
 * with another size or direction is -EINVAL, so a caller built against an
 * older or newer struct learns that the command exists.
 */
static long pinmem_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	unsigned int nr = _IOC_NR(cmd);

	if (_IOC_TYPE(cmd) != PINMEM_IOC_MAGIC || nr >= ARRAY_SIZE(pinmem_iocs))
		return -ENOTTY;
	nr = array_index_nospec(nr, ARRAY_SIZE(pinmem_iocs));
	if (cmd != pinmem_iocs[nr].cmd)
		return -EINVAL;
	return pinmem_iocs[nr].fn(file->private_data, (void __user *)arg);
}

static int pinmem_open(struct inode *inode, struct file *file)
{
	struct pinmem_file *f = pinmem_file_open();

	if (IS_ERR(f))
		return PTR_ERR(f);
	file->private_data = f;
	return 0;
}

static int pinmem_release(struct inode *inode, struct file *file)
{
	pinmem_file_release(file->private_data);
	return 0;
}

static const struct file_operations pinmem_fops = {
	.owner = THIS_MODULE,
	.open = pinmem_open,
	.release = pinmem_release,
	.unlocked_ioctl = pinmem_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice pinmem_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "pinmem",
	.fops = &pinmem_fops,
};

static int __init pinmem_init(void)
{
	int ret;

	pinmem_budget_init();
	ret = pinmem_folio_init();
	if (ret)
		goto err_budget;
	ret = pinmem_stats_init();
	if (ret)
		goto err_folio;
	ret = misc_register(&pinmem_misc);
	if (ret)
		goto err_stats;
	pr_info("version %s, ABI %d.%d\n", PINMEM_VERSION, PINMEM_ABI_MAJOR,
		PINMEM_ABI_MINOR);
	return 0;

err_stats:
	pinmem_stats_exit();
err_folio:
	pinmem_folio_exit();
err_budget:
	pinmem_budget_exit();
	return ret;
}

static void __exit pinmem_exit(void)
{
	misc_deregister(&pinmem_misc);
	pinmem_stats_exit();
	pinmem_folio_exit();
	pinmem_cg_exit();
	pinmem_budget_exit();
}

module_init(pinmem_init);
module_exit(pinmem_exit);

MODULE_DESCRIPTION("Pin user memory for GPU data loading, within budgets");
MODULE_AUTHOR("pinmem developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(PINMEM_VERSION);
