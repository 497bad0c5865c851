// SPDX-License-Identifier: MIT
/*
 * Round trip: GET_VERSION, PIN, REGIONS, STATS, the stats file, UNPIN.  The
 * pinned pages are the ones the process sees: the data written before and
 * after the pin is intact and the physical frames do not change while pinned,
 * not even when memory is compacted.  Anonymous, shared anonymous, memfd and
 * tmpfs mappings can be pinned.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

#define LEN	(16 * KT_MIB)

static void test_version(int fd)
{
	struct pinmem_version v;

	memset(&v, 0xff, sizeof(v));
	v.flags = 0;
	v.reserved[0] = v.reserved[1] = 0;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_GET_VERSION, &v), 0, "GET_VERSION");
	kt_eq(v.abi_major, PINMEM_ABI_MAJOR, "abi_major %u", PINMEM_ABI_MAJOR);
	kt_ok(v.abi_minor + 1 > PINMEM_ABI_MINOR, "abi_minor >= %u", PINMEM_ABI_MINOR);
	kt_eq(v.page_size, sysconf(_SC_PAGESIZE), "page_size");
	kt_ok(!v.reserved[0] && !v.reserved[1] && !v.flags, "version reserved zeroed");
}

/* The default global limit is a share of RAM, not "unlimited". */
static void test_defaults(void)
{
	uint64_t g = kt_param("global_limit");
	long pages = sysconf(_SC_PHYS_PAGES);

	kt_ok(g > 0 && g < (uint64_t)pages * KT_PAGE, "default global_limit %llu is below RAM",
	      (unsigned long long)g);
	kt_eq(kt_param("enforce_rlimit"), 1, "enforce_rlimit defaults to 1");
}

/* Frames of every 16th page; returns how many differ from @pfns (or records). */
static int frames(const char *buf, size_t len, uint64_t *pfns, int record)
{
	size_t i, n = 0;
	int diff = 0;

	for (i = 0; i < len; i += 16 * KT_PAGE, n++) {
		uint64_t pfn = kt_pfn(buf + i);

		if (record)
			pfns[n] = pfn;
		else if (pfn != pfns[n] || !pfn)
			diff++;
	}
	return diff;
}

/* Pages of [buf, buf + len) in ZONE_MOVABLE, -1 without that zone. */
static long movable_frames(const char *buf, size_t len)
{
	uint64_t start, end;
	long n = 0;
	size_t i;

	if (kt_zone_movable(&start, &end))
		return -1;
	for (i = 0; i < len; i += KT_PAGE) {
		uint64_t pfn = kt_pfn(buf + i);

		n += pfn >= start && pfn < end;
	}
	return n;
}

static void test_round_trip(int fd)
{
	static uint64_t pfns[LEN / (16 * KT_PAGE)];
	struct pinmem_region_info info[4];
	struct pinmem_regions r;
	struct pinmem_stats st;
	struct pinmem_pin p;
	char *buf = kt_map(LEN, 1);
	uint64_t v;

	kt_fill(buf, LEN, 1);
	kt_ok(movable_frames(buf, LEN) > 0, "some of the buffer starts in ZONE_MOVABLE");
	kt_eq(kt_pin(fd, buf, LEN, &p), 0, "PIN 16 MiB anonymous");
	/* FOLL_LONGTERM moves pages out of ZONE_MOVABLE before pinning them. */
	kt_eq(movable_frames(buf, LEN), 0, "no pinned page in ZONE_MOVABLE (long-term pin)");
	frames(buf, LEN, pfns, 1);
	kt_ok(p.handle != 0, "handle is not 0");
	kt_eq(p.pages, LEN / KT_PAGE, "pages = length / page size");
	kt_ok(p.segments >= 1 && p.segments <= p.pages, "1 <= segments (%llu) <= pages",
	      (unsigned long long)p.segments);
	kt_ok(p.huge_bytes <= LEN, "huge_bytes <= length");
	kt_ok(!p.reserved[0] && !p.reserved[1] && !p.pad2,
	      "PIN reserved zero on output");
	kt_eq(p.refused, 0, "PIN refused 0 on success");
	kt_ok(p.charged_bytes >= LEN, "PIN charged_bytes %llu >= length",
	      (unsigned long long)p.charged_bytes);
	kt_eq(kt_check(buf, LEN, 1), -1, "data written before PIN intact");

	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.global.pinned_bytes, LEN, "global pinned_bytes");
	kt_eq(st.global.regions, 1, "global regions");
	kt_eq(st.user.pinned_bytes, LEN, "user pinned_bytes");
	kt_eq(st.uid, getuid(), "stats uid");
	kt_eq(st.file.pinned_bytes, LEN, "file pinned_bytes");
	kt_eq(st.file.regions, 1, "file regions");
	kt_ok(st.global.peak_bytes >= LEN, "global peak_bytes >= pinned");
	kt_eq(st.mm_pinned_bytes, LEN, "mm_pinned_bytes");
	kt_eq(kt_vmpin_kb(0), LEN / 1024, "VmPin shows the pin");
	kt_eq(kt_statfile_version(), PINMEM_STATS_VERSION, "stats file version line");
	v = 0;
	kt_eq(kt_statfile("global", 0, "pinned_bytes", &v), 0, "stats file global row");
	kt_eq(v, LEN, "stats file global pinned_bytes");
	v = 0;
	kt_eq(kt_statfile("user", getuid(), "pinned_bytes", &v), 0, "stats file user row");
	kt_eq(v, LEN, "stats file user pinned_bytes");
	v = 0;
	kt_eq(kt_statfile("process", getpid(), "regions", &v), 0, "stats file process row");
	kt_eq(v, 1, "stats file process regions");

	memset(&r, 0, sizeof(r));
	memset(info, 0xff, sizeof(info));
	r.regions = (uintptr_t)info;
	r.capacity = 4;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REGIONS, &r), 0, "REGIONS");
	kt_eq(r.count, 1, "REGIONS count");
	kt_eq(r.total, 1, "REGIONS total");
	kt_ok(info[0].handle == p.handle && info[0].addr == (uintptr_t)buf &&
	      info[0].length == LEN && info[0].pages == p.pages &&
	      info[0].segments == p.segments && info[0].huge_bytes == p.huge_bytes,
	      "REGIONS entry matches the PIN");
	kt_eq(info[1].handle, ~0ULL, "REGIONS writes no more than count entries");

	/* Writes after the pin land in the pinned frames, which stay put. */
	kt_fill(buf, LEN, 2);
	kt_eq(kt_check(buf, LEN, 2), -1, "data written after PIN intact");
	kt_eq(frames(buf, LEN, pfns, 0), 0, "frames unchanged by writes");
	kt_eq(kt_write("/proc/sys/vm/compact_memory", "1"), 0, "compact memory");
	kt_eq(frames(buf, LEN, pfns, 0), 0, "frames unchanged by compaction");
	kt_eq(kt_check(buf, LEN, 2), -1, "data intact after compaction");

	kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	kt_eq(kt_check(buf, LEN, 2), -1, "data intact after UNPIN");
	kt_eq(kt_stats(fd, &st), 0, "STATS after UNPIN");
	kt_eq(st.file.pinned_bytes, 0, "file pinned_bytes 0");
	kt_eq(st.file.regions, 0, "file regions 0");
	kt_eq(st.file.pins, 1, "file pins 1");
	kt_eq(st.file.unpins, 1, "file unpins 1");
	kt_eq(st.global.pinned_bytes, 0, "global pinned_bytes 0");
	kt_eq(kt_regions_total(fd), 0, "no regions left");
	munmap(buf, LEN);
}

/* Never-touched memory is faulted in writable by the pin itself. */
static void test_unpopulated(int fd)
{
	char *buf = kt_map(LEN, 0);
	uint64_t h, pfn;

	kt_eq(kt_pin_handle(fd, buf, LEN, &h), 0, "PIN never-touched memory");
	pfn = kt_pfn(buf + LEN / 2);
	kt_ok(pfn != 0, "pages present after PIN");
	kt_eq(buf[LEN / 2], 0, "faulted-in page reads zero");
	kt_fill(buf, LEN, 3);
	kt_eq(kt_pfn(buf + LEN / 2), pfn, "first write keeps the pinned frame");
	kt_eq(kt_check(buf, LEN, 3), -1, "data intact");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	munmap(buf, LEN);
}

static void test_many(int fd)
{
	struct pinmem_region_info info[3];
	struct pinmem_regions r = { 0 };
	char *buf = kt_map(3 * KT_MIB, 1);
	uint64_t h[3];
	int i;

	for (i = 0; i < 3; i++)
		kt_eq(kt_pin_handle(fd, buf + i * KT_MIB, KT_MIB, &h[i]), 0, "PIN part %d", i);
	kt_ok(h[0] != h[1] && h[1] != h[2] && h[0] != h[2], "distinct handles");
	kt_eq(kt_regions_total(fd), 3, "three regions");
	kt_eq(kt_unpin(fd, h[1]), 0, "UNPIN the middle one");
	r.regions = (uintptr_t)info;
	r.capacity = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REGIONS, &r), 0, "REGIONS capacity 1");
	kt_ok(r.count == 1 && r.total == 2, "count 1 of total 2");
	kt_eq(info[0].handle, h[0] < h[2] ? h[0] : h[2], "first in handle order");
	kt_eq(kt_unpin(fd, h[0]), 0, "UNPIN first");
	kt_eq(kt_unpin(fd, h[2]), 0, "UNPIN last");
	kt_eq(kt_regions_total(fd), 0, "none left");
	munmap(buf, 3 * KT_MIB);
}

/* Thousands of one-page regions: listed in handle order, released on close. */
static void test_thousands(void)
{
	enum { N = 2000 };
	static struct pinmem_region_info info[N];
	struct pinmem_regions r = { .regions = (uintptr_t)info, .capacity = N };
	char *buf = kt_map(N * KT_PAGE, 1);
	int fd = kt_open(), i, bad = 0, sorted = 1;
	uint64_t h;

	for (i = 0; i < N; i++)
		bad += kt_pin_handle(fd, buf + (size_t)i * KT_PAGE, KT_PAGE, &h) != 0;
	kt_eq(bad, 0, "%d one-page PINs", N);
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REGIONS, &r), 0, "REGIONS of %d", N);
	kt_ok(r.count == N && r.total == N, "count and total %d", N);
	for (i = 1; i < N; i++)
		sorted &= info[i].handle > info[i - 1].handle;
	kt_ok(sorted, "listed in increasing handle order");
	kt_eq(kt_vmpin_kb(0), N * 4, "VmPin counts them all");
	close(fd);
	kt_expect_clean("2000 regions closed");
	munmap(buf, N * KT_PAGE);
}

/*
 * Handles are not reused right away, so a stale handle (double UNPIN after a
 * new PIN) cannot release somebody else's region.
 */
static void test_stale_handle(int fd)
{
	char *buf = kt_map(KT_MIB, 1);
	uint64_t h1, h2;

	kt_eq(kt_pin_handle(fd, buf, KT_MIB, &h1), 0, "PIN");
	kt_eq(kt_unpin(fd, h1), 0, "UNPIN");
	kt_eq(kt_pin_handle(fd, buf, KT_MIB, &h2), 0, "PIN the same range again");
	kt_ok(h2 != h1, "new region gets a new handle");
	kt_eq(kt_unpin(fd, h1), -ENOENT, "stale handle is ENOENT");
	kt_eq(kt_regions_total(fd), 1, "the new region is untouched");
	kt_eq(kt_unpin(fd, h2), 0, "UNPIN the new region");
	munmap(buf, KT_MIB);
}

/* The same pages pinned twice are two regions and are charged twice. */
static void test_overlap(int fd)
{
	char *buf = kt_map(4 * KT_MIB, 1);
	struct pinmem_stats st;
	uint64_t h1, h2;

	kt_eq(kt_pin_handle(fd, buf, 4 * KT_MIB, &h1), 0, "PIN 4 MiB");
	kt_eq(kt_pin_handle(fd, buf + 2 * KT_MIB, 2 * KT_MIB, &h2), 0, "PIN its second half again");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.pinned_bytes, 6 * KT_MIB, "both PINs charged");
	kt_eq(kt_unpin(fd, h1), 0, "UNPIN the first");
	kt_fill(buf + 2 * KT_MIB, 2 * KT_MIB, 8);
	kt_eq(kt_check(buf + 2 * KT_MIB, 2 * KT_MIB, 8), -1, "second region's data intact");
	kt_eq(kt_unpin(fd, h2), 0, "UNPIN the second");
	munmap(buf, 4 * KT_MIB);
}

/* One range over several mappings: anonymous, memfd, anonymous with THP. */
static void test_multi_vma(int fd)
{
	int mfd = memfd_create("pinmem-multi", MFD_CLOEXEC);
	char *buf = kt_map_aligned(6 * KT_MIB, KT_HPAGE);
	uint64_t h;

	if (mfd < 0 || ftruncate(mfd, 2 * KT_MIB) ||
	    mmap(buf + 2 * KT_MIB, 2 * KT_MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 mfd, 0) == MAP_FAILED || madvise(buf + 4 * KT_MIB, 2 * KT_MIB, MADV_HUGEPAGE))
		kt_bail("multi-mapping setup");
	kt_fill(buf, 6 * KT_MIB, 9);
	kt_eq(kt_pin_handle(fd, buf, 6 * KT_MIB, &h), 0, "PIN across anonymous, memfd and THP mappings");
	kt_eq(kt_check(buf, 6 * KT_MIB, 9), -1, "data intact across the mappings");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	munmap(buf, 6 * KT_MIB);
	close(mfd);
}

static void pin_mapping(int fd, void *p, const char *what)
{
	uint64_t h;

	if (p == MAP_FAILED) {
		kt_ok(0, "map %s", what);
		return;
	}
	kt_fill(p, 4 * KT_MIB, 7);
	kt_eq(kt_pin_handle(fd, p, 4 * KT_MIB, &h), 0, "PIN %s", what);
	kt_eq(kt_check(p, 4 * KT_MIB, 7), -1, "%s data intact", what);
	kt_eq(kt_unpin(fd, h), 0, "UNPIN %s", what);
	munmap(p, 4 * KT_MIB);
}

static void test_shared(int fd)
{
	int mfd = memfd_create("pinmem-test", MFD_CLOEXEC);
	int tfd = open("/tmp/pinmem-tmpfs", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	pin_mapping(fd, mmap(NULL, 4 * KT_MIB, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0), "shared anonymous");
	if (mfd < 0 || ftruncate(mfd, 4 * KT_MIB))
		kt_bail("memfd");
	pin_mapping(fd, mmap(NULL, 4 * KT_MIB, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0),
		    "memfd MAP_SHARED");
	if (tfd < 0 || ftruncate(tfd, 4 * KT_MIB))
		kt_bail("tmpfs file");
	pin_mapping(fd, mmap(NULL, 4 * KT_MIB, PROT_READ | PROT_WRITE, MAP_SHARED, tfd, 0),
		    "tmpfs file MAP_SHARED");
	close(mfd);
	close(tfd);
	unlink("/tmp/pinmem-tmpfs");
}

int main(void)
{
	int fd = kt_open();

	test_defaults();
	kt_limits_save();
	kt_limits_open();
	test_version(fd);
	test_round_trip(fd);
	test_unpopulated(fd);
	test_many(fd);
	test_stale_handle(fd);
	test_overlap(fd);
	test_shared(fd);
	test_multi_vma(fd);
	test_thousands();
	close(fd);
	kt_limits_restore();
	kt_expect_clean("t_basic end");
	return kt_done();
}
