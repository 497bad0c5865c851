/* SPDX-License-Identifier: MIT */
/*
 * The system calls that touch /dev/pinmem or lock memory, behind a table:
 * host unit tests stand in for the module (which cannot be faked as a
 * character device) and check the refusal messages and fallback decisions;
 * the real device is exercised in the VM.  lib/sys.c has the real calls.
 */
#ifndef PM_SYS_H
#define PM_SYS_H

#include <stddef.h>
#include <stdint.h>

struct pm_sys_ops {
	int (*open)(const char *path, int flags);	/* fd or -errno */
	int (*close)(int fd);
	int (*ioctl)(int fd, unsigned long req, void *arg);	/* 0 or -errno */
	int (*mlock)(const void *addr, size_t len);	/* 0 or -errno */
	int (*munlock)(const void *addr, size_t len);
	/* RLIMIT_MEMLOCK soft limit (UINT64_MAX: unlimited), bytes locked now. */
	int (*memlock)(uint64_t *limit, uint64_t *locked);
	/* Prefix of the /proc, /sys and /dev paths probed (tests); NULL: the real ones. */
	const char *root;
};

/* The real system calls. */
extern const struct pm_sys_ops pm_sys_default;

#endif /* PM_SYS_H */
