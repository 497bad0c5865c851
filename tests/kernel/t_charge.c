// SPDX-License-Identifier: MIT
/*
 * What a PIN is charged is never below what it keeps allocated: a pin of any
 * page of a THP or hugetlb page keeps the whole huge page (a pinned folio
 * cannot be split or freed, also after munmap), so it is charged the whole
 * page, once per file; STATS, the stats file and VmPin agree.  Bookkeeping is
 * small and counted (kmem_bytes), regions are capped per file and per user
 * (EMFILE), one file holds at most PINMEM_FOLIO_MAX_PINS pins per page of a
 * huge page (ETOOMANYREFS), and every failed PIN says why in
 * pinmem_pin.refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/capability.h>
#include "common.h"

#define PG	KT_PAGE
#define HP	KT_HPAGE
#define NTHP	16

static uint64_t file_pinned(int fd)
{
	struct pinmem_stats st;

	if (kt_stats(fd, &st))
		kt_bail("STATS");
	return st.file.pinned_bytes;
}

/* STATS, the stats file row of this process and VmPin all say @bytes. */
static void expect_charged(int fd, uint64_t bytes, const char *what)
{
	struct pinmem_stats st;
	uint64_t row = ~0ULL;

	kt_eq(kt_stats(fd, &st), 0, "%s: STATS", what);
	kt_eq(st.file.pinned_bytes, bytes, "%s: file pinned_bytes", what);
	kt_eq(st.user.pinned_bytes, bytes, "%s: user pinned_bytes", what);
	kt_eq(st.mm_pinned_bytes, bytes, "%s: mm_pinned_bytes", what);
	kt_eq(kt_vmpin_kb(0) * 1024, bytes, "%s: VmPin", what);
	kt_statfile("process", getpid(), "pinned_bytes", &row);
	kt_eq(row, bytes, "%s: stats file process pinned_bytes", what);
}

static void test_thp_slice(void)
{
	char *buf = kt_map_thp(2);
	struct pinmem_pin p1, p2, p3, p4;
	int fd = kt_open();

	kt_eq(kt_pin(fd, buf + 5 * PG, PG, &p1), 0, "PIN 4 KiB inside a THP");
	kt_eq(p1.charged_bytes, HP, "charged_bytes: the whole 2 MiB");
	expect_charged(fd, HP, "4 KiB slice of a THP");
	kt_eq(kt_pin(fd, buf + 9 * PG, PG, &p2), 0, "PIN another 4 KiB of the same THP");
	kt_eq(p2.charged_bytes, 0, "the same THP is not charged again by the same file");
	kt_eq(kt_pin(fd, buf, HP, &p3), 0, "PIN the whole THP");
	kt_eq(p3.charged_bytes, 0, "whole THP: nothing more charged");
	expect_charged(fd, HP, "three PINs of one THP");
	kt_eq(kt_pin(fd, buf + 2 * HP - PG, PG, &p4), 0, "PIN the last page of the second THP");
	kt_eq(p4.charged_bytes, HP, "second THP charged whole");
	kt_eq(kt_unpin(fd, p1.handle), 0, "UNPIN the first slice");
	kt_eq(kt_unpin(fd, p3.handle), 0, "UNPIN the whole THP");
	expect_charged(fd, 2 * HP, "one slice of each THP left");
	kt_eq(kt_unpin(fd, p2.handle), 0, "UNPIN the last pin of the first THP");
	expect_charged(fd, HP, "first THP released");
	kt_eq(kt_unpin(fd, p4.handle), 0, "UNPIN");
	expect_charged(fd, 0, "all released");

	/* A slice pinned, the THP unmapped: the pin still holds 2 MiB. */
	kt_eq(kt_pin(fd, buf + HP + 3 * PG, PG, &p1), 0, "PIN 4 KiB, then munmap the THP");
	munmap(buf, 2 * HP);
	expect_charged(fd, HP, "after munmap");
	kt_eq(kt_unpin(fd, p1.handle), 0, "UNPIN after munmap");
	expect_charged(fd, 0, "after UNPIN");
	close(fd);
}

static void test_mixed(void)
{
	char *buf = kt_map_aligned(2 * HP, HP);
	struct pinmem_pin p;
	int fd = kt_open();

	if (madvise(buf, HP, MADV_HUGEPAGE) || madvise(buf + HP, HP, MADV_NOHUGEPAGE))
		kt_bail("madvise");
	kt_fill(buf, 2 * HP, 41);
	kt_eq(kt_pin(fd, buf + HP - PG, 3 * PG, &p), 0, "PIN the last THP page and 2 small pages");
	kt_eq(p.charged_bytes, HP + 2 * PG, "charged: the THP and the 2 small pages");
	expect_charged(fd, HP + 2 * PG, "THP + small pages");
	kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	close(fd);
	munmap(buf, 2 * HP);
}

static void test_hugetlb_slice(void)
{
	char *buf = mmap(NULL, HP, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	struct pinmem_pin p;
	int fd = kt_open();

	if (buf == MAP_FAILED)
		kt_bail("MAP_HUGETLB");
	buf[0] = 1;
	kt_eq(kt_pin(fd, buf + 7 * PG, PG, &p), 0, "PIN 4 KiB of a hugetlb page");
	kt_eq(p.charged_bytes, HP, "hugetlb slice charged 2 MiB");
	expect_charged(fd, HP, "hugetlb slice");
	kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	close(fd);
	munmap(buf, HP);
}

/* Sixteen 4 KiB slices of sixteen THPs against a small RLIMIT_MEMLOCK. */
static int slices_under_rlimit(void *arg)
{
	size_t lim = *(size_t *)arg, i;
	char *buf = kt_map_thp(NTHP);
	struct pinmem_pin p;
	int fd, ok = 0, refused = 0, ret;

	kt_set_memlock(lim);
	fd = kt_open();
	for (i = 0; i < NTHP; i++) {
		ret = kt_pin(fd, buf + i * HP + PG, PG, &p);
		if (!ret) {
			ok++;
		} else if (ret == -ENOMEM && p.refused == PINMEM_REFUSED_RLIMIT) {
			refused++;
		} else {
			kt_diag("slice %zu: %s, refused %u", i, strerror(-ret), p.refused);
		}
	}
	kt_eq(ok, lim / HP, "rlimit %zu KiB: %zu of 16 slices pinned", lim / 1024, lim / HP);
	kt_eq(refused, NTHP - lim / HP, "the others refused by RLIMIT_MEMLOCK (reason RLIMIT)");
	kt_eq(file_pinned(fd), (lim / HP) * HP, "charged: whole THPs, within the limit");
	kt_ok(kt_vmpin_kb(0) * 1024 <= (long long)lim, "VmPin %lld kB within the limit", kt_vmpin_kb(0));
	if (lim >= HP) {
		kt_eq(kt_pin(fd, buf + 2 * PG, PG, &p), 0, "another slice of a THP already charged");
		kt_eq(p.charged_bytes, 0, "is not charged again");
	}
	close(fd);
	munmap(buf, NTHP * HP);
	return 0;
}

static void test_rlimit(void)
{
	size_t small = 64 * 1024, one = HP;

	kt_eq(kt_run_as(1000, 0, slices_under_rlimit, &small), 0,
	      "16 THP slices, RLIMIT_MEMLOCK 64 KiB");
	kt_eq(kt_run_as(1000, 0, slices_under_rlimit, &one), 0,
	      "16 THP slices, RLIMIT_MEMLOCK 2 MiB");
}

/* Kernel memory of the bookkeeping: counted, small, all freed. */
static void test_kmem(void)
{
	size_t n = 256, i, len = 32 * HP;
	char *small = kt_map(n * 2 * PG, 1), *thp = kt_map_thp(32);
	uint64_t handles[256], kmem, row = 0, h;
	struct pinmem_stats st;
	int fd = kt_open();

	for (i = 0; i < n; i++)
		if (kt_pin_handle(fd, small + 2 * i * PG, PG, &handles[i]))
			kt_bail("one-page PIN %zu", i);
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kmem = st.file.kmem_bytes;
	kt_diag("%zu one-page regions: %llu bytes of bookkeeping, %llu per region",
		n, (unsigned long long)kmem, (unsigned long long)(kmem / n));
	kt_ok(kmem >= n * 64 && kmem <= n * 256,
	      "one-page regions: %llu bytes each (counted, at most 256)",
	      (unsigned long long)(kmem / n));
	kt_eq(st.user.kmem_bytes, kmem, "user kmem_bytes agrees");
	kt_ok(st.global.kmem_bytes >= kmem, "global kmem_bytes counts it");
	kt_statfile("process", getpid(), "kmem_bytes", &row);
	kt_eq(row, kmem, "stats file process kmem_bytes agrees");
	for (i = 0; i < n; i++)
		kt_unpin(fd, handles[i]);
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.kmem_bytes, 0, "all bookkeeping freed");

	kt_eq(kt_pin_handle(fd, thp, len, &h), 0, "PIN 64 MiB of THP");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kmem = st.file.kmem_bytes;
	kt_diag("64 MiB of THP: %llu bytes of bookkeeping, %llu per GiB",
		(unsigned long long)kmem, (unsigned long long)(kmem * 16));
	kt_ok(kmem > 0 && kmem * 16 <= 64 * 1024,
	      "THP: %llu bytes per GiB pinned (at most 64 KiB)",
	      (unsigned long long)(kmem * 16));
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.kmem_bytes, 0, "all bookkeeping freed");
	close(fd);
	munmap(small, n * 2 * PG);
	munmap(thp, len);
}

static void test_region_caps(void)
{
	uint64_t was_file = kt_param("max_regions_per_file");
	uint64_t was_user = kt_param("max_regions_per_user");
	char *buf = kt_map(32 * PG, 1);
	struct pinmem_stats st;
	struct pinmem_pin p;
	uint64_t h[16], h2;
	int fd = kt_open(), fd2 = kt_open(), i, ok = 1;

	kt_eq(kt_param_set("max_regions_per_file", 0), -EINVAL, "max_regions_per_file 0 is EINVAL");
	kt_eq(kt_param_set("max_regions_per_file", 8), 0, "max_regions_per_file = 8");
	kt_eq(kt_param_set("max_regions_per_user", 10), 0, "max_regions_per_user = 10");
	for (i = 0; i < 8; i++)
		ok &= !kt_pin_handle(fd, buf + i * PG, PG, &h[i]);
	kt_ok(ok, "8 regions in one file");
	kt_eq(kt_pin(fd, buf + 8 * PG, PG, &p), -EMFILE, "the 9th is EMFILE");
	kt_eq(p.refused, PINMEM_REFUSED_REGIONS_FILE, "reason: regions per file");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.refused_regions, 1, "file refused_regions 1");
	kt_eq(st.file.refused_fault + st.file.refused_rlimit + st.file.refused_user +
	      st.file.refused_global, 0, "no other refusal counted");
	kt_eq(st.file.pinned_bytes, 8 * PG, "nothing more charged");
	kt_eq(kt_pin_handle(fd2, buf + 8 * PG, PG, &h[8]), 0, "another file: 9th region of the user");
	kt_eq(kt_pin_handle(fd2, buf + 9 * PG, PG, &h[9]), 0, "10th region of the user");
	kt_eq(kt_pin(fd2, buf + 10 * PG, PG, &p), -EMFILE, "the user's 11th is EMFILE");
	kt_eq(p.refused, PINMEM_REFUSED_REGIONS_USER, "reason: regions per user");
	kt_eq(kt_unpin(fd, h[0]), 0, "UNPIN one");
	kt_eq(kt_pin_handle(fd2, buf + 10 * PG, PG, &h2), 0, "then one more fits");
	kt_param_set("max_regions_per_file", was_file);
	kt_param_set("max_regions_per_user", was_user);
	close(fd);
	close(fd2);
	munmap(buf, 32 * PG);
}

/*
 * One file holds at most PINMEM_FOLIO_MAX_PINS pins per page of a large
 * folio: overlapping PINs of one huge page are charged once, and each takes
 * folio references, so the 17th whole-page PIN is ETOOMANYREFS with nothing
 * pinned, charged or counted as pinned; other huge pages still pin.
 */
static void folio_pins(char *buf, const char *what)
{
	uint64_t h[PINMEM_FOLIO_MAX_PINS];
	struct pinmem_stats before, after;
	long long pinned = kt_foll_pinned();
	struct pinmem_pin p;
	int fd = kt_open(), i, ok = 1;

	for (i = 0; i < PINMEM_FOLIO_MAX_PINS; i++) {
		ok &= kt_pin(fd, buf, HP, &p) == 0;
		ok &= p.charged_bytes == (i ? 0 : HP);
		h[i] = p.handle;
	}
	kt_ok(ok, "%s: %d PINs of one huge page, charged once", what, PINMEM_FOLIO_MAX_PINS);
	expect_charged(fd, HP, what);
	kt_eq(kt_stats(fd, &before), 0, "%s: STATS", what);
	kt_eq(kt_pin(fd, buf, HP, &p), -ETOOMANYREFS, "%s: PIN #%d of it is ETOOMANYREFS",
	      what, PINMEM_FOLIO_MAX_PINS + 1);
	kt_eq(p.refused, PINMEM_REFUSED_FOLIO_PINS, "%s: reason: folio pins", what);
	kt_eq(kt_pin(fd, buf + HP - PG, 2 * PG, &p), -ETOOMANYREFS,
	      "%s: a PIN of its last page and the next huge page too", what);
	kt_eq(kt_stats(fd, &after), 0, "%s: STATS", what);
	kt_eq(after.file.pinned_bytes, before.file.pinned_bytes, "%s: file charge unchanged", what);
	kt_eq(after.user.pinned_bytes, before.user.pinned_bytes, "%s: user charge unchanged", what);
	kt_eq(after.global.pinned_bytes, before.global.pinned_bytes, "%s: global charge unchanged", what);
	kt_eq(after.mm_pinned_bytes, before.mm_pinned_bytes, "%s: VmPin unchanged", what);
	kt_eq(after.file.regions, before.file.regions, "%s: regions unchanged", what);
	kt_eq(after.file.pins, before.file.pins, "%s: pins unchanged", what);
	kt_eq(after.file.kmem_bytes, before.file.kmem_bytes, "%s: kmem unchanged", what);
	kt_eq(after.file.refused_fault, before.file.refused_fault + 2,
	      "%s: both refusals counted", what);
	kt_eq(kt_foll_pinned() - pinned, PINMEM_FOLIO_MAX_PINS * (HP / PG),
	      "%s: FOLL_PIN holds only the %d regions", what, PINMEM_FOLIO_MAX_PINS);
	kt_eq(kt_pin(fd, buf + HP, PG, &p), 0, "%s: the next huge page still pins", what);
	kt_eq(p.charged_bytes, HP, "%s: and is charged whole", what);
	kt_eq(kt_unpin(fd, p.handle), 0, "%s: UNPIN it", what);
	kt_eq(kt_unpin(fd, h[0]), 0, "%s: UNPIN one of the %d", what, PINMEM_FOLIO_MAX_PINS);
	kt_eq(kt_pin(fd, buf + PG, PG, &p), 0, "%s: room for one more page", what);
	h[0] = p.handle;
	for (i = 0; i < PINMEM_FOLIO_MAX_PINS; i++)
		ok &= kt_unpin(fd, h[i]) == 0;
	kt_ok(ok, "%s: UNPIN all", what);
	expect_charged(fd, 0, what);
	kt_eq(kt_foll_pinned(), pinned, "%s: FOLL_PIN back where it was", what);
	close(fd);
}

static void test_folio_pins(void)
{
	char *buf = kt_map_thp(2);

	folio_pins(buf, "THP");
	munmap(buf, 2 * HP);
	buf = mmap(NULL, 2 * HP, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (buf == MAP_FAILED) {
		kt_skip("MAP_HUGETLB of 2 huge pages: %s", strerror(errno));
		return;
	}
	memset(buf, 1, 2 * HP);
	folio_pins(buf, "hugetlb");
	munmap(buf, 2 * HP);
}

/* Every failure writes its reason; success writes 0. */
static void test_reasons(void)
{
	char *buf = kt_map(4 * PG, 1), *ro;
	struct pinmem_pin p = { .addr = (uintptr_t)buf + 1, .length = PG };
	int fd = kt_open();

	kt_eq(kt_ioctl(fd, PINMEM_IOC_PIN, &p), -EINVAL, "unaligned PIN");
	kt_eq(p.refused, PINMEM_REFUSED_ARGS, "reason: arguments");
	memset(&p, 0, sizeof(p));
	p.addr = (uintptr_t)buf;
	p.length = PG;
	p.refused = 3;			/* left from a refused PIN: a retry reuses the struct */
	p.charged_bytes = 12345;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_PIN, &p), 0, "out fields left from an earlier call are ignored on input");
	kt_eq(p.refused, 0, "reason: none");
	kt_eq(kt_unpin(fd, p.handle), 0, "unpin it");
	ro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	kt_eq(kt_pin(fd, ro, PG, &p), -EACCES, "read-only mapping");
	kt_eq(p.refused, PINMEM_REFUSED_MAPPING, "reason: mapping");
	kt_eq(kt_param_set("global_limit", 2 * PG), 0, "global_limit = 2 pages");
	kt_eq(kt_pin(fd, buf, 3 * PG, &p), -ENOSPC, "over the global limit");
	kt_eq(p.refused, PINMEM_REFUSED_GLOBAL, "reason: global");
	kt_limits_open();
	kt_eq(kt_param_set("default_user_limit", 2 * PG), 0, "default_user_limit = 2 pages");
	kt_eq(kt_pin(fd, buf, 3 * PG, &p), -EDQUOT, "over the user limit");
	kt_eq(p.refused, PINMEM_REFUSED_USER, "reason: user");
	kt_limits_open();
	kt_eq(kt_pin(fd, buf, PG, &p), 0, "PIN");
	kt_eq(p.refused, 0, "success: reason 0");
	kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	close(fd);
	munmap(ro, PG);
	munmap(buf, 4 * PG);
}

int main(void)
{
	kt_limits_save();
	kt_limits_open();
	test_thp_slice();
	test_mixed();
	test_hugetlb_slice();
	test_folio_pins();
	test_rlimit();
	test_kmem();
	test_region_caps();
	test_reasons();
	kt_limits_restore();
	kt_expect_clean("t_charge end");
	return kt_done();
}
