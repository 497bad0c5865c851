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
 *   PINMEM_ERR_REGIONS a cap on the number of regions (EMFILE)
 *   PINMEM_ERR_CGROUP  a cgroup budget (EDQUOT, as the per-user one; ABI 1.2)
 * and, from ABI 1.1, PIN writes the reason of any failure to
 * pinmem_pin.refused (PINMEM_REFUSED_*), so a caller tells "RLIMIT_MEMLOCK"
 * from "out of kernel memory" without racing the refusal counters.
 *
 * From ABI 1.3, a PIN that would make one file hold more than
 * PINMEM_FOLIO_MAX_PINS (16) pins per page of a huge or large folio, counted
 * over the whole folio (16 times its pages; overlapping regions of the same
 * THP or hugetlb page) is refused with ETOOMANYREFS (PINMEM_ERR_FOLIO_PINS,
 * reason PINMEM_REFUSED_FOLIO_PINS): each pinned page takes a reference on
 * its folio, and a pin of a folio the file holds already is charged nothing,
 * so those references need a bound of their own.
 *
 * What is charged (ABI 1.1): every base page a PIN pins, and, for a page of
 * a huge or large folio (THP, hugetlb), the whole folio, once per open file
 * however many of its pages and regions the file pins: a pinned folio cannot
 * be split or freed while any of its pages is pinned, so a 4 KiB PIN inside
 * a 2 MiB THP keeps 2 MiB allocated and is charged 2 MiB (io_uring's rule for
 * registered buffers).  Base pages pinned twice (overlapping PINs) are
 * charged twice.  The same amount is charged to every budget: global, user,
 * file, the owner's mm->pinned_vm (VmPin, as RDMA does) and the opener's
 * user->locked_vm (as io_uring, VFIO and iommufd do).  RLIMIT_MEMLOCK is
 * checked against both of the last two, so pinmem, RDMA and io_uring share one
 * limit in both directions and a re-exec or a fresh process of the same user
 * does not get a fresh one.  CAP_IPC_LOCK skips the RLIMIT_MEMLOCK checks,
 * never the charges.
 *
 * When it is charged (ABI 1.4): before it is pinned.  A PIN pins its range
 * in chunks; each chunk is first charged the most its pages could keep
 * allocated (each page in a folio of its own, as large as the mapping
 * allows: a PMD for anonymous and shmem memory where THP is built in; the
 * huge pages it spans for hugetlb), then pinned, then charged what its
 * pages turn out to keep, the rest given back.  Near a limit the chunk
 * shrinks, down to one page charged what room there is, pinned, then
 * charged the rest or refused and unpinned at once.  So what a file has
 * pinned passes what its budgets were charged only for that last page's
 * folio less the room there was, one such page per user at a time, and
 * only between GUP's return and that charge, without waiting on anything
 * (also: a hugetlb page unmapped and faulted again by another thread in
 * the middle of one chunk's GUP, until that chunk is charged).  While a
 * PIN runs, pinned_bytes (and VmPin, and the RLIMIT_MEMLOCK counters
 * io_uring and RDMA read) include its chunk's charge, shown as
 * reserved_bytes in the stats file; peak_bytes leaves reservations out.
 * A PIN whose length cannot fit (less what the file holds in large folios
 * already) is refused before anything is pinned.  A fault that only user
 * space could resolve (a userfaultfd-registered range) fails the PIN with
 * EFAULT instead of waiting.
 *
 * Who is a user (ABI 1.4): the per-user budget, the per-user region cap and
 * the stats file's user rows belong to the real user behind the pinning
 * process's user namespaces: its uid, or, inside user namespaces that an
 * unprivileged user made, that user (the owner of the outermost of them,
 * up to the initial namespace or a namespace root made).  Mapping
 * subordinate uids in a rootless container does not make a user a new one.
 * Namespaces root made (container runtimes giving each container its own
 * host uids) keep each process's host uid.  RLIMIT_MEMLOCK is still checked
 * on the process (mm->pinned_vm) and on the kernel's per-uid locked_vm, as
 * io_uring's is.
 *
 * Refusals since load (ABI 1.5): every refused PIN is counted by reason
 * (PINMEM_REASON_*) globally, for its user and for its file, except a PIN
 * with bad arguments (PINMEM_REFUSED_ARGS) or from a process that does not
 * own the file (PINMEM_REFUSED_ACCESS): the caller's mistakes, not
 * refusals.  A user's counters outlive its last open file: a user no file
 * holds any more whose counters are not all zero is kept, up to the module
 * parameter max_idle_users of them; beyond that the one idle longest is
 * dropped and its counters are added to those of the dropped users
 * (REFUSALS @evicted, the stats file's users_evicted line), so the sum over
 * users and that bucket stays the global count and kernel memory stays
 * bounded however many uids come and go.  Which uids used pinmem since load
 * is thus visible to every reader of the stats (as the users holding pins
 * were before); a container root that cycles more uids than the bound
 * pushes other users' history into the dropped bucket, never out of the
 * global counts.
 *
 * Who may act through a file (ABI 1.1): the file belongs to the process that
 * opened it (its thread group, on the mm it had at open).  Only that process
 * may PIN, UNPIN and list REGIONS (addresses of its address space); any other
 * holder of the fd (SCM_RIGHTS, fork, vfork, exec) gets EPERM for those.
 * GET_VERSION, STATS and GET_LIMITS work for any holder; SET_LIMITS needs
 * CAP_SYS_ADMIN whoever holds the file.  Closing the last reference, by any
 * holder, releases every region.
 */
#ifndef _UAPI_LINUX_PINMEM_H
#define _UAPI_LINUX_PINMEM_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define PINMEM_ABI_MAJOR	1
#define PINMEM_ABI_MINOR	5

#define PINMEM_DEVICE		"/dev/pinmem"
#define PINMEM_STATS_PATH	"/proc/driver/pinmem/stats"
#define PINMEM_STATS_VERSION	1

#define PINMEM_ERR_GLOBAL	ENOSPC
#define PINMEM_ERR_USER		EDQUOT
#define PINMEM_ERR_RLIMIT	ENOMEM
#define PINMEM_ERR_REGIONS	EMFILE
#define PINMEM_ERR_CGROUP	EDQUOT
#define PINMEM_ERR_FOLIO_PINS	ETOOMANYREFS

/* Pins one file may hold per page of a large folio (PINMEM_ERR_FOLIO_PINS). */
#define PINMEM_FOLIO_MAX_PINS	16

/*
 * pinmem_pin.refused: why a PIN failed (ABI 1.1; 0 from older modules and
 * on success).
 */
#define PINMEM_REFUSED_NONE		0
#define PINMEM_REFUSED_GLOBAL		1	/* global budget (ENOSPC) */
#define PINMEM_REFUSED_USER		2	/* per-user budget (EDQUOT) */
#define PINMEM_REFUSED_RLIMIT		3	/* RLIMIT_MEMLOCK on the owner's
						 * mm->pinned_vm (ENOMEM) */
#define PINMEM_REFUSED_RLIMIT_USER	4	/* RLIMIT_MEMLOCK on the user's
						 * locked_vm, shared with io_uring
						 * and other processes (ENOMEM) */
#define PINMEM_REFUSED_REGIONS_FILE	5	/* max_regions_per_file (EMFILE) */
#define PINMEM_REFUSED_REGIONS_USER	6	/* max_regions_per_user (EMFILE) */
#define PINMEM_REFUSED_KMEM		7	/* kernel memory for bookkeeping
						 * (ENOMEM) */
#define PINMEM_REFUSED_MAPPING		8	/* the range or its pages (EFAULT,
						 * EACCES, EOPNOTSUPP, EAGAIN, ...) */
#define PINMEM_REFUSED_ACCESS		9	/* not the file's owner (EPERM) */
#define PINMEM_REFUSED_INTR		10	/* fatal signal (EINTR) */
#define PINMEM_REFUSED_ARGS		11	/* bad argument (EINVAL) */
#define PINMEM_REFUSED_CGROUP		12	/* the budget of the pinning
						 * task's cgroup at PIN time or of
						 * an ancestor (EDQUOT; ABI 1.2);
						 * STATS refused_cgroup_id names it */
#define PINMEM_REFUSED_FOLIO_PINS	13	/* the file would hold more than
						 * PINMEM_FOLIO_MAX_PINS pins per
						 * page of a large folio
						 * (ETOOMANYREFS; ABI 1.3) */
#define PINMEM_REFUSED_PAGE_REFS	14	/* a pinned page's reference
						 * count would come near its
						 * limit (a page mapped and
						 * pinned many times;
						 * ETOOMANYREFS; ABI 1.4) */

/*
 * Refusal counters by reason (ABI 1.5), the index into the arrays of struct
 * pinmem_refusals.  Each groups PINMEM_REFUSED_* values.
 */
#define PINMEM_REASON_GLOBAL	0	/* PINMEM_REFUSED_GLOBAL */
#define PINMEM_REASON_USER	1	/* PINMEM_REFUSED_USER */
#define PINMEM_REASON_RLIMIT	2	/* PINMEM_REFUSED_RLIMIT, _RLIMIT_USER */
#define PINMEM_REASON_FAULT	3	/* others: _KMEM, _MAPPING, _INTR */
#define PINMEM_REASON_REGIONS	4	/* PINMEM_REFUSED_REGIONS_FILE, _USER */
#define PINMEM_REASON_CGROUP	5	/* PINMEM_REFUSED_CGROUP */
#define PINMEM_REASON_REFS	6	/* PINMEM_REFUSED_FOLIO_PINS, _PAGE_REFS */
#define PINMEM_REASON_COUNT	7	/* reasons this ABI minor counts */
#define PINMEM_REASON_SLOTS	16	/* entries of each array */

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
 * @charged_bytes: bytes this PIN added to the budgets (ABI 1.1): whole huge
 *	folios the file did not hold yet, plus the base pages; may be more or
 *	less than @length (out; ignored on input, so a struct reused from an
 *	earlier call works, as ABI 1.0 programs do)
 * @refused: PINMEM_REFUSED_* on failure, 0 on success (ABI 1.1; out, also
 *	when PIN fails; ignored on input)
 * @pad2: must be zero
 * @reserved: must be zero on input; zero on output
 *
 * The range must be mapped writable memory that may be pinned long-term:
 * anonymous, shared anonymous/tmpfs/memfd or hugetlb.  Errors: EINVAL (zero
 * or unaligned length or address, overflow, flags, reserved), EFAULT (not
 * user memory or not mapped), EACCES (not writable, PROT_NONE), EOPNOTSUPP
 * (file-backed or I/O mapping, device nodes), EPERM (fd used by another
 * process than its opener), EMFILE (a region cap), EINTR (fatal signal
 * while pinning), EAGAIN (the kernel kept losing a race migrating the pages
 * out of movable memory, e.g. while another thread pins the same fresh
 * pages; retry), ETOOMANYREFS (too many overlapping pins of one large
 * folio, see PINMEM_ERR_FOLIO_PINS, or of one page:
 * PINMEM_REFUSED_PAGE_REFS), a budget errno above.
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
	__u64 charged_bytes;
	__u32 refused;
	__u32 pad2;
	__u64 reserved[2];
};

/**
 * struct pinmem_unpin - PINMEM_IOC_UNPIN: release a region, pages marked dirty
 * @handle: from PIN (in)
 * @flags: must be zero (in)
 * @pad: must be zero
 * @reserved: must be zero
 *
 * Errors: ENOENT (no such region in this file), EPERM (not the file's owner
 * process), EINVAL, EINTR (fatal signal while another PIN or UNPIN of the
 * file held it).
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
 *
 * Errors: EPERM (not the file's owner process), EFAULT, EINVAL, ENOMEM,
 * EINTR (fatal signal while another PIN or UNPIN of the file held it).
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
 * @pinned_bytes: bytes charged now, with what PINs in progress charged for
 *	the chunk they are pinning
 * @limit_bytes: the budget (PINMEM_UNLIMITED if none applies)
 * @peak_bytes: highest @pinned_bytes seen, those charges left out
 * @regions: regions held now
 * @pins: successful PINs
 * @unpins: regions released (UNPIN, close, exit)
 * @refused_global: PINs refused by the global budget
 * @refused_user: PINs refused by the per-user budget
 * @refused_rlimit: PINs refused by RLIMIT_MEMLOCK
 * @refused_fault: PINs that failed while pinning (fault, signal, mapping),
 *	and those refused for too many references to a page or folio (their
 *	own reason, PINMEM_REASON_REFS, in struct pinmem_refusals from ABI 1.5)
 * @kmem_bytes: kernel memory the module's bookkeeping of these regions uses
 *	(ABI 1.1)
 * @refused_regions: PINs refused by a cap on regions (ABI 1.1)
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
	__u64 kmem_bytes;
	__u64 refused_regions;
};

/**
 * struct pinmem_stats - PINMEM_IOC_STATS
 * @flags: must be zero (in)
 * @uid: the user whose budget @user describes: the real user behind the
 *	caller's user namespaces (see "Who is a user"), as the caller's
 *	namespace maps it (the overflow uid when it does not) (out)
 * @global: the machine-wide budget (out)
 * @user: the caller's per-user budget (out)
 * @file: this open file; @file.limit_bytes is the RLIMIT_MEMLOCK in force
 *	for its owner, PINMEM_UNLIMITED when not enforced (out)
 * @mm_pinned_bytes: the owner process's mm->pinned_vm in bytes, which also
 *	counts pins made by other drivers (RDMA, io_uring) (out)
 * @user_locked_bytes: the opener's user->locked_vm in bytes: pinmem's and
 *	io_uring's pins of every process of that user, checked against
 *	RLIMIT_MEMLOCK too (ABI 1.1; out)
 * @cgroup_id: the cgroup v2 id this file's last PIN, refused or not, was
 *	to be charged to (the pinning task's cgroup then, or its ancestor 64
 *	levels below the root for a task deeper than that; the opener's
 *	cgroup at open before any PIN), 0 for the root cgroup (ABI 1.2; out)
 * @refused_cgroup: this file's PINs refused by a cgroup budget (ABI 1.2;
 *	out)
 * @refused_cgroup_id: the cgroup whose budget refused this file's last
 *	refused PIN, 0 if none (ABI 1.2; out)
 * @reserved: must be zero on input (the out fields above, carved from the
 *	reserved space of ABI 1.0, are ignored on input)
 */
struct pinmem_stats {
	__u32 flags;
	__u32 uid;
	struct pinmem_counters global;
	struct pinmem_counters user;
	struct pinmem_counters file;
	__u64 mm_pinned_bytes;
	__u64 user_locked_bytes;
	__u64 cgroup_id;
	__u64 refused_cgroup;
	__u64 refused_cgroup_id;
	__u64 reserved[3];
};

/**
 * struct pinmem_refusals - PINMEM_IOC_REFUSALS: refused PINs by reason (ABI 1.5)
 * @flags: must be zero (in)
 * @uid: the user @user counts, as STATS's @uid (out)
 * @nr_reasons: entries of each array the module fills, PINMEM_REASON_COUNT
 *	of its ABI minor; the rest are zero (out)
 * @pad: must be zero
 * @global: PINs refused since the module was loaded, by PINMEM_REASON_* (out)
 * @user: the same for @uid, since load: kept after its last file is closed
 *	(see "Refusals since load"; counted from zero again only if dropped)
 *	(out)
 * @file: the same for this open file (out)
 * @evicted: the counters of the users dropped to keep the bound (out)
 * @evicted_users: users dropped so far (out)
 * @idle_users: users kept for their counters that no file holds (out)
 * @max_idle_users: the bound on @idle_users (the module parameter) (out)
 * @pad2: must be zero
 * @reserved: must be zero on input
 *
 * The out fields are ignored on input.  Each array is copied under one
 * lock, so its entries agree with each other.  Any holder of the file may
 * ask.  Errors: EINVAL, EFAULT.
 */
struct pinmem_refusals {
	__u32 flags;
	__u32 uid;
	__u32 nr_reasons;
	__u32 pad;
	__u64 global[PINMEM_REASON_SLOTS];
	__u64 user[PINMEM_REASON_SLOTS];
	__u64 file[PINMEM_REASON_SLOTS];
	__u64 evicted[PINMEM_REASON_SLOTS];
	__u64 evicted_users;
	__u64 idle_users;
	__u32 max_idle_users;
	__u32 pad2;
	__u64 reserved[4];
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
 * existing regions alone.  SET needs CAP_SYS_ADMIN (EPERM; CAP_SYS_RESOURCE
 * is not enough, as for the module parameters) and validates every field
 * before it changes anything: from ABI 1.1 a field the flags do not select
 * (a limit not set, @uid without a user flag, @user_limit with CLEAR_USER,
 * @user_flags) must be zero (EINVAL).
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

/* pinmem_cgroup.flags */
#define PINMEM_CGROUP_SET		(1U << 0)	/* set @limit_bytes */
#define PINMEM_CGROUP_CLEAR		(1U << 1)	/* drop the limit */

/**
 * struct pinmem_cgroup - PINMEM_IOC_CGROUP: a cgroup v2 budget (ABI 1.2)
 * @path: user pointer to the cgroup's path, relative to the caller's cgroup
 *	namespace root on the cgroup2 mount ("/" or "" is the root), not
 *	NUL-terminated (in)
 * @path_len: bytes at @path, 0 to 4095 (in)
 * @flags: 0 to read; PINMEM_CGROUP_SET or PINMEM_CGROUP_CLEAR (in)
 * @limit_bytes: SET: the limit, rounded down to pages; out: the limit in
 *	force, PINMEM_UNLIMITED if none
 * @pinned_bytes: bytes charged to the cgroup and its descendants (out)
 * @peak_bytes: highest @pinned_bytes seen, reservations of PINs in
 *	progress left out (out)
 * @refused: PINs refused by this cgroup's own limit (out); @peak_bytes and
 *	@refused go back to 0 whenever a cgroup without a limit (also one
 *	whose limit was just cleared) has nothing charged
 * @cgroup_id: the cgroup's id, its inode number on the cgroup2 mount (out)
 * @reserved: must be zero
 *
 * From ABI 1.4 the out fields are ignored on input, and @limit_bytes too
 * without SET, so a struct filled by one GET can be reused for the next.
 *
 * A PIN is charged to the cgroup the pinning task is in at PIN time and to
 * every ancestor; each limit on that path must hold.  A large folio is
 * charged once per file, to the cgroup of the PIN that took it first.  The
 * charge stays there until UNPIN, close or exit, wherever the task moves,
 * and a cgroup removed while charged keeps its charge until then.  Limits are
 * kept by cgroup id (ids are not reused, so a cgroup made again at the same
 * path starts without one); the limit of a removed cgroup is dropped, and
 * all are lost on module unload.
 * SET and CLEAR need CAP_SYS_ADMIN (EPERM).  Errors: ENOENT (no such
 * cgroup), ENOTDIR (the path names a file, such as x/cgroup.procs),
 * EOPNOTSUPP (cgroup budgets need cgroup v2: a kernel without cgroups, for
 * every request; SET when no cgroup2 file system is mounted, as on a cgroup
 * v1-only host, while GET and CLEAR still reach a limit SET before the last
 * cgroup2 mount went), EINVAL, EFAULT, ENOMEM, E2BIG (more than 64 levels
 * deep).
 */
struct pinmem_cgroup {
	__u64 path;
	__u32 path_len;
	__u32 flags;
	__u64 limit_bytes;
	__u64 pinned_bytes;
	__u64 peak_bytes;
	__u64 refused;
	__u64 cgroup_id;
	__u64 reserved[3];
};

#define PINMEM_IOC_MAGIC	0xB9

#define PINMEM_IOC_GET_VERSION	_IOWR(PINMEM_IOC_MAGIC, 0x00, struct pinmem_version)
#define PINMEM_IOC_PIN		_IOWR(PINMEM_IOC_MAGIC, 0x01, struct pinmem_pin)
#define PINMEM_IOC_UNPIN	_IOW(PINMEM_IOC_MAGIC, 0x02, struct pinmem_unpin)
#define PINMEM_IOC_REGIONS	_IOWR(PINMEM_IOC_MAGIC, 0x03, struct pinmem_regions)
#define PINMEM_IOC_STATS	_IOWR(PINMEM_IOC_MAGIC, 0x04, struct pinmem_stats)
#define PINMEM_IOC_GET_LIMITS	_IOWR(PINMEM_IOC_MAGIC, 0x05, struct pinmem_limits)
#define PINMEM_IOC_SET_LIMITS	_IOW(PINMEM_IOC_MAGIC, 0x06, struct pinmem_limits)
#define PINMEM_IOC_CGROUP	_IOWR(PINMEM_IOC_MAGIC, 0x07, struct pinmem_cgroup)
#define PINMEM_IOC_REFUSALS	_IOWR(PINMEM_IOC_MAGIC, 0x08, struct pinmem_refusals)

#endif /* _UAPI_LINUX_PINMEM_H */
