// SPDX-License-Identifier: MIT
/*
 * What used to take the kernel down, from an unprivileged user or with a
 * page pinned too often: each case failed on the module before issue #26
 * with an oops, a WARN or a pin the uapi refuses.  This program runs last
 * (name order) and turns on panic_on_oops and panic_on_warn first, so a
 * regression ends the VM at once (no verdict: the run fails) instead of
 * leaving it to spin.
 *
 *  - PINMEM_IOC_CGROUP GET of "cgroup.procs/x" and friends, as uid 1000
 *    with no capabilities while the file is held open: kernfs's path walk
 *    looked the name up inside a file and oopsed (kernfs_find_ns); now
 *    ENOTDIR, and GETs after it work.
 *  - mmap(MAP_SHARED) of a block device node: devtmpfs has tmpfs's magic,
 *    so the page cache of the device was pinned long-term; now EOPNOTSUPP.
 *  - one memfd page mapped 65,000 times, its range pinned again and again:
 *    each pin adds 1024 to the page's reference count until GUP WARNs at
 *    the overflow; now the PIN that would pass 2^29 is refused with
 *    ETOOMANYREFS (reason PAGE_REFS) and nothing WARNs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "common.h"

#define PG		KT_PAGE
#define CGROOT		"/sys/fs/cgroup"
#define CG2_MAGIC	0x63677270

static int cg_get(int fd, const char *path, struct pinmem_cgroup *out)
{
	struct pinmem_cgroup c = { .path = (uintptr_t)path, .path_len = strlen(path) };
	int ret = kt_ioctl(fd, PINMEM_IOC_CGROUP, &c);

	if (out)
		*out = c;
	return ret;
}

static int file_paths(void *arg)
{
	static const char *const paths[] = {
		"cgroup.procs/x", "cgroup.procs/x/y", "/cgroup.procs//x",
		"cgroup.controllers/..", "cgroup.procs/.", "pmtz/cgroup.procs/x",
		"pmtz/cgroup.type/x", "pmtz/cgroup.events/x/y",
	};
	int fd = kt_open(), held = open(CGROOT "/cgroup.procs", O_RDONLY);
	struct pinmem_cgroup c;
	size_t i;

	kt_ok(held >= 0, "uid 1000 holds %s open", CGROOT "/cgroup.procs");
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		kt_eq(cg_get(fd, paths[i], NULL), -ENOTDIR,
		      "uid 1000: GET \"%s\" is ENOTDIR, no oops", paths[i]);
	kt_eq(cg_get(fd, "pmtz/nosuch/x", NULL), -ENOENT, "uid 1000: GET of a missing parent is ENOENT");
	kt_eq(cg_get(fd, "pmtz/..", NULL), -ENOENT, "uid 1000: \"..\" names nothing (ENOENT)");
	kt_eq(cg_get(fd, "pmtz", &c), 0, "uid 1000: GET pmtz after them works (no stall)");
	kt_eq(cg_get(fd, "//pmtz//", &c), 0, "uid 1000: empty components are skipped");
	kt_eq(cg_get(fd, "", NULL), 0, "uid 1000: GET of the root works");
	if (held >= 0)
		close(held);
	close(fd);
	return 0;
}

static void test_cgroup_paths(void)
{
	struct statfs sfs;

	if (statfs(CGROOT, &sfs) || sfs.f_type != CG2_MAGIC) {
		if (mount("cgroup2", CGROOT, "cgroup2", 0, NULL)) {
			kt_skip("cgroup paths: no cgroup2 (%s)", strerror(errno));
			return;
		}
	}
	if (mkdir(CGROOT "/pmtz", 0755) && errno != EEXIST)
		kt_bail("mkdir pmtz: %s", strerror(errno));
	kt_eq(kt_run_as(1000, 0, file_paths, NULL), 0, "cgroup paths through files, as uid 1000");
	rmdir(CGROOT "/pmtz");
}

/* A block device node to map: an existing one, else a loop device made here. */
static int open_blockdev(char *name, size_t len)
{
	static const char *const cand[] = { "/dev/vda", "/dev/vdb", "/dev/loop0", "/dev/ram0" };
	size_t i;
	int fd;

	for (i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		fd = open(cand[i], O_RDWR);
		if (fd >= 0) {
			snprintf(name, len, "%s", cand[i]);
			return fd;
		}
	}
	if (mknod("/dev/pmt-loop0", S_IFBLK | 0600, makedev(7, 0)) == 0 || errno == EEXIST) {
		fd = open("/dev/pmt-loop0", O_RDWR);
		if (fd >= 0) {
			snprintf(name, len, "/dev/pmt-loop0");
			return fd;
		}
	}
	return -1;
}

static void test_device_node(void)
{
	struct pinmem_pin p;
	char name[64];
	int fd, dev;
	void *m;

	dev = open_blockdev(name, sizeof(name));
	if (dev < 0) {
		kt_skip("device node: no block device to map");
		return;
	}
	m = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dev, 0);
	if (m == MAP_FAILED) {
		kt_skip("device node: mmap of %s: %s", name, strerror(errno));
		close(dev);
		return;
	}
	fd = kt_open();
	kt_eq(kt_pin(fd, m, 16 * PG, &p), -EOPNOTSUPP,
	      "PIN of a shared mapping of the block device %s is EOPNOTSUPP", name);
	kt_eq(p.refused, PINMEM_REFUSED_MAPPING, "reason MAPPING");
	kt_eq(kt_regions_total(fd), 0, "nothing pinned");
	close(fd);
	munmap(m, 16 * PG);
	close(dev);
	unlink("/dev/pmt-loop0");
}

#define NMAP	65000
#define NPINS	40

static void test_page_refs(void)
{
	int fd, mfd, ok = 0, refused = 0, other = 0, i;
	uint64_t handles[NPINS];
	struct pinmem_pin p;
	char *base;
	long j;

	if (kt_write("/proc/sys/vm/max_map_count", "200000"))
		kt_bail("max_map_count");
	mfd = (int)syscall(SYS_memfd_create, "pmt-refs", 0);
	if (mfd < 0 || ftruncate(mfd, PG))
		kt_bail("memfd: %s", strerror(errno));
	base = mmap(NULL, NMAP * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		kt_bail("reserve: %s", strerror(errno));
	for (j = 0; j < NMAP; j++)
		if (mmap(base + j * PG, PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd, 0) ==
		    MAP_FAILED)
			kt_bail("mmap %ld: %s", j, strerror(errno));
	kt_limits_save();
	kt_limits_open();
	fd = kt_open();
	for (i = 0; i < NPINS; i++) {
		int ret = kt_pin(fd, base, NMAP * PG, &p);

		handles[i] = ret ? 0 : p.handle;
		if (!ret)
			ok++;
		else if (ret == -ETOOMANYREFS && p.refused == PINMEM_REFUSED_PAGE_REFS)
			refused++;
		else
			other++, kt_diag("PIN %d: %s, reason %u", i, strerror(-ret), p.refused);
	}
	kt_diag("one page mapped %d times, pinned whole %d times: %d pinned, %d refused", NMAP, NPINS,
		ok, refused);
	kt_ok(ok >= 4 && ok < NPINS, "the PINs up to 2^29 references pass (%d)", ok);
	kt_eq(refused, NPINS - ok, "the rest are ETOOMANYREFS, reason PAGE_REFS");
	kt_eq(other, 0, "no other failure");
	kt_eq(kt_regions_total(fd), ok, "the refused PINs left no region");
	for (i = 0; i < NPINS; i++)
		if (handles[i])
			kt_unpin(fd, handles[i]);
	close(fd);
	munmap(base, NMAP * PG);
	close(mfd);
	kt_limits_restore();
}

int main(void)
{
	if (kt_write("/proc/sys/kernel/panic_on_oops", "1") ||
	    kt_write("/proc/sys/kernel/panic_on_warn", "1"))
		kt_bail("cannot set panic_on_oops and panic_on_warn");
	test_cgroup_paths();
	test_device_node();
	test_page_refs();
	kt_expect_clean("t_zz_crash end");
	return kt_done();
}
