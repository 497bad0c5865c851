// SPDX-License-Identifier: MIT
/*
 * The real system calls behind struct pm_sys_ops (see lib/sys.h), each
 * returning -errno instead of setting errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

static int sys_open(const char *path, int flags)
{
	int fd = open(path, flags);

	return fd < 0 ? -errno : fd;
}

static int sys_close(int fd)
{
	return close(fd) ? -errno : 0;
}

static int sys_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) ? -errno : 0;
}

/*
 * The system calls themselves: sanitizer runtimes replace mlock() and
 * munlock() with no-ops, and a program built with ASan still needs its
 * buffers locked (and the tests need to see it).
 */
static int sys_mlock(const void *addr, size_t len)
{
	return syscall(SYS_mlock, addr, len) ? -errno : 0;
}

static int sys_munlock(const void *addr, size_t len)
{
	return syscall(SYS_munlock, addr, len) ? -errno : 0;
}

/* VmLck of /proc/self/status: what RLIMIT_MEMLOCK is charged with for mlock. */
static uint64_t locked_now(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

static int sys_memlock(uint64_t *limit, uint64_t *locked)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		return -errno;
	*limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
	*locked = locked_now();
	return 0;
}

const struct pm_sys_ops pm_sys_default = {
	.open = sys_open,
	.close = sys_close,
	.ioctl = sys_ioctl,
	.mlock = sys_mlock,
	.munlock = sys_munlock,
	.memlock = sys_memlock,
};
