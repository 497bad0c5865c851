// SPDX-License-Identifier: MIT
/*
 * Huge pages: THP (MADV_HUGEPAGE) and hugetlb regions report the bytes backed
 * by huge pages, exactly as much as the kernel shows in smaps, and are kept
 * as few physically contiguous runs (not one entry per 4 KiB page).
 */
#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "common.h"

static void pin_and_compare(int fd, char *buf, size_t len, long long huge_kb,
			    const char *what)
{
	struct pinmem_region_info info;
	struct pinmem_regions r = { .regions = (uintptr_t)&info, .capacity = 1 };
	struct pinmem_pin p;

	kt_fill(buf, len, 11);
	kt_eq(kt_pin(fd, buf, len, &p), 0, "%s: PIN %zu MiB", what, len / KT_MIB);
	kt_eq(p.huge_bytes, huge_kb * 1024, "%s: huge_bytes = %lld kB", what, huge_kb);
	kt_ok(p.segments >= 1 && p.segments <= (len - huge_kb * 1024) / KT_PAGE +
	      huge_kb * 1024 / KT_HPAGE, "%s: segments %llu: at most one per huge page",
	      what, (unsigned long long)p.segments);
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REGIONS, &r), 0, "%s: REGIONS", what);
	kt_eq(info.huge_bytes, p.huge_bytes, "%s: REGIONS huge_bytes", what);
	kt_eq(kt_check(buf, len, 11), -1, "%s: data intact", what);
	kt_fill(buf, len, 12);
	kt_eq(kt_unpin(fd, p.handle), 0, "%s: UNPIN", what);
	kt_eq(kt_check(buf, len, 12), -1, "%s: data intact after UNPIN", what);
}

static void test_thp(int fd)
{
	size_t len = 64 * KT_MIB;
	char *buf = kt_map_aligned(len, KT_HPAGE);
	long long kb;

	if (madvise(buf, len, MADV_HUGEPAGE))
		kt_bail("MADV_HUGEPAGE");
	kt_fill(buf, len, 10);
	kb = kt_smaps_kb(buf, "AnonHugePages");
	kt_ok(kb > 0 && kb % 2048 == 0, "THP backs the mapping (%lld kB)", kb);
	pin_and_compare(fd, buf, len, kb, "THP");
	munmap(buf, len);

	/* Half huge, half small pages: only the huge half counts. */
	buf = kt_map_aligned(8 * KT_MIB, KT_HPAGE);
	if (madvise(buf, 4 * KT_MIB, MADV_HUGEPAGE))
		kt_bail("MADV_HUGEPAGE");
	kt_fill(buf, 8 * KT_MIB, 10);
	kb = kt_smaps_kb(buf, "AnonHugePages");
	kt_eq(kt_smaps_kb(buf + 4 * KT_MIB, "AnonHugePages"), 0, "second half has no THP");
	kt_ok(kb > 0, "first half has THP (%lld kB)", kb);
	pin_and_compare(fd, buf, 8 * KT_MIB, kb, "THP + small pages");
	munmap(buf, 8 * KT_MIB);

	/* THP faulted in by the pin itself. */
	buf = kt_map_aligned(16 * KT_MIB, KT_HPAGE);
	if (madvise(buf, 16 * KT_MIB, MADV_HUGEPAGE))
		kt_bail("MADV_HUGEPAGE");
	{
		struct pinmem_pin p;

		kt_eq(kt_pin(fd, buf, 16 * KT_MIB, &p), 0, "PIN untouched THP mapping");
		kb = kt_smaps_kb(buf, "AnonHugePages");
		kt_eq(p.huge_bytes, kb * 1024, "untouched THP: huge_bytes = smaps (%lld kB)", kb);
		kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	}
	munmap(buf, 16 * KT_MIB);
}

static long long free_hugepages(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	long long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %lld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static void test_hugetlb(int fd)
{
	size_t len = 32 * KT_MIB;
	long long before = free_hugepages();
	char *buf;
	int hfd;

	kt_ok(before >= 32, "32 free huge pages reserved (%lld)", before);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (buf == MAP_FAILED)
		kt_bail("MAP_HUGETLB");
	pin_and_compare(fd, buf, len, len / 1024, "hugetlb anonymous");
	munmap(buf, len);
	kt_eq(free_hugepages(), before, "hugetlb pages all free again");

	hfd = open("/dev/hugepages/pinmem-test", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (hfd < 0)
		kt_bail("hugetlbfs file");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, hfd, 0);
	if (buf == MAP_FAILED)
		kt_bail("hugetlbfs mmap");
	pin_and_compare(fd, buf, len, len / 1024, "hugetlbfs file MAP_SHARED");
	munmap(buf, len);
	close(hfd);
	unlink("/dev/hugepages/pinmem-test");
	kt_eq(free_hugepages(), before, "hugetlbfs pages all free again");
}

static long long nr_hugepages(void)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "re");
	long long v = -1;

	if (f && fscanf(f, "%lld", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

static int set_nr_hugepages(long long n)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", n);
	return kt_write("/proc/sys/vm/nr_hugepages", v);
}

/*
 * A hugetlb page in ZONE_MOVABLE.  Kernels that still GUP hugetlb through
 * follow_hugetlb_page() (up to 6.6) cannot long-term pin it (they WARN), so
 * pinmem refuses it with EOPNOTSUPP; later kernels migrate it out of the zone
 * and the PIN succeeds.  The pool outside the zone (tests/vm/hugepages.c)
 * gives the migration its target.
 */
static void test_hugetlb_movable(int fd)
{
	size_t len = 8 * KT_HPAGE, i;
	long long pool = nr_hugepages();
	struct utsname u;
	int major = 0, minor = 0, in_movable = 0, still = 0, ret;
	uint64_t start, end, h;
	char *buf;

	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	kt_eq(kt_zone_movable(&start, &end), 0, "the VM has a ZONE_MOVABLE");
	/* New pool pages come from the highest zone, and are handed out first. */
	if (set_nr_hugepages(pool + 8))
		kt_bail("nr_hugepages");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (buf == MAP_FAILED)
		kt_bail("MAP_HUGETLB");
	kt_fill(buf, len, 13);
	for (i = 0; i < len; i += KT_HPAGE)
		in_movable += kt_pfn(buf + i) >= start && kt_pfn(buf + i) < end;
	kt_ok(in_movable > 0, "%d of 8 hugetlb pages in ZONE_MOVABLE", in_movable);
	ret = kt_pin_handle(fd, buf, len, &h);
	if (major < 6 || (major == 6 && minor < 7)) {
		kt_eq(ret, -EOPNOTSUPP, "%d.%d: PIN of hugetlb in ZONE_MOVABLE is EOPNOTSUPP", major, minor);
		kt_eq(kt_regions_total(fd), 0, "nothing pinned");
	} else {
		kt_eq(ret, 0, "%d.%d: PIN of hugetlb in ZONE_MOVABLE", major, minor);
		for (i = 0; i < len; i += KT_HPAGE)
			still += kt_pfn(buf + i) >= start && kt_pfn(buf + i) < end;
		kt_eq(still, 0, "pinned hugetlb pages were moved out of ZONE_MOVABLE");
		kt_eq(kt_check(buf, len, 13), -1, "data intact after the move");
		kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	}
	munmap(buf, len);
	kt_eq(set_nr_hugepages(pool), 0, "hugetlb pool back to %lld pages", pool);
}

int main(void)
{
	int fd = kt_open();

	kt_limits_save();
	kt_limits_open();
	test_thp(fd);
	test_hugetlb(fd);
	test_hugetlb_movable(fd);
	close(fd);
	kt_limits_restore();
	kt_expect_clean("t_huge end");
	return kt_done();
}
