/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * pinmem ioctl ABI: /dev/pinmem pins user memory against budgets.
 *
 * Rules (see DESIGN.md): every struct is made of __u64/__u32 with explicit
 * padding; reserved fields and padding must be zero on input (-EINVAL
 * otherwise); unknown flags are -EINVAL; a known command issued with a struct
 * of another size is -EINVAL, an unknown command -ENOTTY.  New fields are
 * carved out of the reserved ones and announced by a minor ABI bump.
 *
 * Budget refusals have one errno each:
 *   PINMEM_ERR_GLOBAL  the machine-wide budget      (ENOSPC)
 *   PINMEM_ERR_USER    the caller's per-user budget (EDQUOT)
 *   PINMEM_ERR_RLIMIT  the caller's RLIMIT_MEMLOCK  (ENOMEM, as mlock(2))
 */
#ifndef _UAPI_LINUX_PINMEM_H
#define _UAPI_LINUX_PINMEM_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define PINMEM_ABI_MAJOR	1
#define PINMEM_ABI_MINOR	0

#define PINMEM_DEVICE		"/dev/pinmem"
#define PINMEM_STATS_PATH	"/proc/driver/pinmem/stats"
#define PINMEM_STATS_VERSION	1

#define PINMEM_ERR_GLOBAL	ENOSPC
#define PINMEM_ERR_USER		EDQUOT
#define PINMEM_ERR_RLIMIT	ENOMEM

/* A limit that never refuses. */
#define PINMEM_UNLIMITED	(~(__u64)0)

/**
 * struct pinmem_version - PINMEM_IOC_GET_VERSION
 * @abi_major: incompatible changes bump this; a library refuses another major
 * @abi_minor: compatible additions bump this
 * @page_size: the kernel's PAGE_SIZE; PIN addresses and lengths are multiples
 * @flags: must be zero on input
 * @reserved: must be zero on input; zero on output
 */
struct pinmem_version {
	__u32 abi_major;
	__u32 abi_minor;
	__u32 page_size;
	__u32 flags;
	__u64 reserved[2];
};

/**
 * struct pinmem_pin - PINMEM_IOC_PIN: pin [addr, addr + length) for writing
 * @addr: page-aligned user address (in)
 * @length: bytes, a non-zero multiple of the page size (in)
 * @flags: must be zero; none defined yet (in)
 * @pad: must be zero
 * @handle: names the region for UNPIN and REGION lists, never 0 (out)
 * @pages: base pages pinned, length / page_size (out)
 * @segments: physically contiguous runs the region is made of (out)
 * @huge_bytes: bytes backed by PMD-sized or larger pages (THP, hugetlb) (out)
 * @reserved: must be zero on input; zero on output
 *
 * The range must be mapped writable memory that may be pinned long-term:
 * anonymous, shared anonymous/tmpfs/memfd or hugetlb.  Errors: EINVAL (zero
 * or unaligned length or address, overflow, flags, reserved), EFAULT (not
 * user memory or not mapped), EACCES (not writable, PROT_NONE), EOPNOTSUPP
 * (file-backed or I/O mapping), EPERM (fd used by another process than its
 * opener), EINTR (fatal signal while pinning), EAGAIN (the kernel kept
 * losing a race migrating the pages out of movable memory, e.g. while another
 * thread pins the same fresh pages; retry), a budget errno above.
 * Nothing stays pinned or charged on error.
 */
struct pinmem_pin {
	__u64 addr;
	__u64 length;
	__u32 flags;
	__u32 pad;
	__u64 handle;
	__u64 pages;
	__u64 segments;
	__u64 huge_bytes;
	__u64 reserved[4];
};

/**
 * struct pinmem_unpin - PINMEM_IOC_UNPIN: release a region, pages marked dirty
 * @handle: from PIN (in)
 * @flags: must be zero (in)
 * @pad: must be zero
 * @reserved: must be zero
 *
 * Errors: ENOENT (no such region in this file), EINVAL.
 */
struct pinmem_unpin {
	__u64 handle;
	__u32 flags;
	__u32 pad;
	__u64 reserved[2];
};

/**
 * struct pinmem_region_info - one region, as listed by PINMEM_IOC_REGIONS
 * @handle: region handle
 * @addr: start address in the owner's address space
 * @length: bytes
 * @pages: base pages
 * @segments: physically contiguous runs
 * @huge_bytes: bytes backed by PMD-sized or larger pages
 * @reserved: zero
 */
struct pinmem_region_info {
	__u64 handle;
	__u64 addr;
	__u64 length;
	__u64 pages;
	__u64 segments;
	__u64 huge_bytes;
	__u64 reserved[2];
};

/**
 * struct pinmem_regions - PINMEM_IOC_REGIONS: list this file's regions
 * @regions: user pointer to an array of struct pinmem_region_info (in)
 * @capacity: entries the array holds; 0 only asks for @total (in)
 * @flags: must be zero (in)
 * @count: entries written, min(capacity, total), in handle order (out)
 * @pad: must be zero
 * @total: regions the file holds (out)
 * @reserved: must be zero on input
 */
struct pinmem_regions {
	__u64 regions;
	__u32 capacity;
	__u32 flags;
	__u32 count;
	__u32 pad;
	__u64 total;
	__u64 reserved[2];
};

/**
 * struct pinmem_counters - use and history of one budget
 * @pinned_bytes: bytes charged now
 * @limit_bytes: the budget (PINMEM_UNLIMITED if none applies)
 * @peak_bytes: highest @pinned_bytes seen
 * @regions: regions held now
 * @pins: successful PINs
 * @unpins: regions released (UNPIN, close, exit)
 * @refused_global: PINs refused by the global budget
 * @refused_user: PINs refused by the per-user budget
 * @refused_rlimit: PINs refused by RLIMIT_MEMLOCK
 * @refused_fault: PINs that failed while pinning (fault, signal, mapping)
 * @reserved: zero
 */
struct pinmem_counters {
	__u64 pinned_bytes;
	__u64 limit_bytes;
	__u64 peak_bytes;
	__u64 regions;
	__u64 pins;
	__u64 unpins;
	__u64 refused_global;
	__u64 refused_user;
	__u64 refused_rlimit;
	__u64 refused_fault;
	__u64 reserved[2];
};

/**
 * struct pinmem_stats - PINMEM_IOC_STATS
 * @flags: must be zero (in)
 * @uid: the caller's uid, whose budget @user describes (out)
 * @global: the machine-wide budget (out)
 * @user: the caller's per-user budget (out)
 * @file: this open file; @file.limit_bytes is the RLIMIT_MEMLOCK in force
 *	for its owner, PINMEM_UNLIMITED when not enforced (out)
 * @mm_pinned_bytes: the owner process's mm->pinned_vm in bytes, which also
 *	counts pins made by other drivers (RDMA, io_uring) (out)
 * @reserved: must be zero on input
 */
struct pinmem_stats {
	__u32 flags;
	__u32 uid;
	struct pinmem_counters global;
	struct pinmem_counters user;
	struct pinmem_counters file;
	__u64 mm_pinned_bytes;
	__u64 reserved[7];
};

/* pinmem_limits.flags: which limits SET_LIMITS changes. */
#define PINMEM_LIMIT_SET_GLOBAL		(1U << 0)
#define PINMEM_LIMIT_SET_DEFAULT_USER	(1U << 1)
#define PINMEM_LIMIT_SET_USER		(1U << 2)	/* override for @uid */
#define PINMEM_LIMIT_CLEAR_USER		(1U << 3)	/* drop @uid's override */
#define PINMEM_LIMIT_SET_RLIMIT		(1U << 4)	/* @enforce_rlimit */
#define PINMEM_LIMIT_ALL_FLAGS		0x1fU

/* pinmem_limits.user_flags (out of GET_LIMITS) */
#define PINMEM_USER_OVERRIDDEN		(1U << 0)

/**
 * struct pinmem_limits - PINMEM_IOC_GET_LIMITS and PINMEM_IOC_SET_LIMITS
 * @flags: GET: must be zero; SET: PINMEM_LIMIT_* choosing what to change (in)
 * @uid: the user whose limit @user_limit is, in the caller's user namespace (in)
 * @global_limit: bytes the whole machine may pin
 * @default_user_limit: bytes a user without an override may pin
 * @user_limit: @uid's limit (GET: the one in force; SET: the override)
 * @user_flags: GET: PINMEM_USER_OVERRIDDEN if @uid has an override (out)
 * @enforce_rlimit: 1 if RLIMIT_MEMLOCK is checked for callers without
 *	CAP_IPC_LOCK, 0 if not
 * @reserved: must be zero
 *
 * Limits are bytes, rounded down to whole pages; PINMEM_UNLIMITED disables
 * one.  Lowering a limit below current use refuses new pins and leaves
 * existing regions alone.  SET needs CAP_SYS_ADMIN (EPERM) and validates
 * every field before it changes anything.
 */
struct pinmem_limits {
	__u32 flags;
	__u32 uid;
	__u64 global_limit;
	__u64 default_user_limit;
	__u64 user_limit;
	__u32 user_flags;
	__u32 enforce_rlimit;
	__u64 reserved[4];
};

#define PINMEM_IOC_MAGIC	0xB9

#define PINMEM_IOC_GET_VERSION	_IOWR(PINMEM_IOC_MAGIC, 0x00, struct pinmem_version)
#define PINMEM_IOC_PIN		_IOWR(PINMEM_IOC_MAGIC, 0x01, struct pinmem_pin)
#define PINMEM_IOC_UNPIN	_IOW(PINMEM_IOC_MAGIC, 0x02, struct pinmem_unpin)
#define PINMEM_IOC_REGIONS	_IOWR(PINMEM_IOC_MAGIC, 0x03, struct pinmem_regions)
#define PINMEM_IOC_STATS	_IOWR(PINMEM_IOC_MAGIC, 0x04, struct pinmem_stats)
#define PINMEM_IOC_GET_LIMITS	_IOWR(PINMEM_IOC_MAGIC, 0x05, struct pinmem_limits)
#define PINMEM_IOC_SET_LIMITS	_IOW(PINMEM_IOC_MAGIC, 0x06, struct pinmem_limits)

#endif /* _UAPI_LINUX_PINMEM_H */
