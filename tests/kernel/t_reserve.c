// SPDX-License-Identifier: MIT
/*
 * Charge first, pin second: while a PIN runs, what its pages keep
 * allocated ("held") never exceeds what its file is charged.  The range is
 * built to make the difference large: one 4 KiB page of each of NTHP
 * different THPs (moved side by side with mremap(), so each page keeps its
 * whole 2 MiB THP allocated once pinned), then a long unpopulated tail that
 * takes a while to fault in.  A second thread samples, over and over, the
 * pages pinned so far (FOLL_PIN counts of /proc/vmstat) and the file's
 * charge (STATS pinned_bytes, which includes the reservation of the chunk
 * being pinned): held <= charged at every sample.  The module before issue
 * #26 charged the length first and the THPs only at the end: NTHP * 2 MiB
 * held against about NTHP * 4 KiB charged for the whole tail.
 *
 * Also the attack under an 8 MiB RLIMIT_MEMLOCK (as root without
 * CAP_IPC_LOCK, so the sampler may flush the vmstat counters): the PIN is
 * refused (ENOMEM, reason RLIMIT) where the limit is, the charge never
 * passes it, and what is held passes the charge by at most the one page
 * pinned ahead of its folio's charge at the limit (the bound the uapi
 * states); and a tail page registered with userfaultfd fails the PIN with
 * EFAULT at once instead of stalling it with pins held.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include "common.h"

#define PG	KT_PAGE
#define HP	KT_HPAGE
#define NTHP	64
#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)
#define TAIL	(48 * KT_MIB)
#define KPF_COMPOUND_HEAD	15
#define KPF_COMPOUND_TAIL	16

struct layout {
	char *thp;	/* NTHP THPs, each missing the one page moved out */
	char *range;	/* NTHP moved pages, then a tail unpopulated */
	size_t len;
	int huge[NTHP];	/* the moved page still sits in a large folio */
};

static int have_thp(void)
{
	return access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0;
}

static void build(struct layout *l, size_t tail)
{
	size_t i;

	l->thp = kt_map_thp(NTHP);
	/* Until pinned pages can be looked at: each moved page in a THP. */
	for (i = 0; i < NTHP; i++)
		l->huge[i] = 1;
	l->len = NTHP * PG + tail;
	l->range = mmap(NULL, l->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l->range == MAP_FAILED)
		kt_bail("mmap range: %s", strerror(errno));
	if (madvise(l->range, l->len, MADV_NOHUGEPAGE))
		kt_bail("MADV_NOHUGEPAGE");
	for (i = 0; i < NTHP; i++) {
		char *src = l->thp + i * HP + (i % 512) * PG;

		if (mremap(src, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, l->range + i * PG) == MAP_FAILED)
			kt_bail("mremap %zu: %s", i, strerror(errno));
	}
}

/* Which moved pages sit in a large folio: read once they are pinned. */
static int count_huge(struct layout *l)
{
	int i, n = 0;

	for (i = 0; i < NTHP; i++) {
		uint64_t f = kt_pageflags(kt_pfn(l->range + (size_t)i * PG));

		l->huge[i] = f != ~0ULL &&
			     (f & ((1ULL << KPF_COMPOUND_HEAD) | (1ULL << KPF_COMPOUND_TAIL)));
		n += l->huge[i];
	}
	return n;
}

static void unbuild(struct layout *l)
{
	munmap(l->thp, NTHP * HP);
	munmap(l->range, l->len);
}

struct sampler {
	int fd;
	volatile int stop;
	long long base;
	long n;
	long long pinned[4096];
	uint64_t charged[4096];
};

static void *sample(void *arg)
{
	struct sampler *s = arg;
	struct pinmem_stats st;

	while (!s->stop) {
		/*
		 * The charge before and after the pins are counted: a chunk
		 * is charged before it is pinned and a failed one unpinned
		 * before it is un-charged, so pages counted pinned were
		 * covered by one of the two.
		 */
		uint64_t before;
		long long p;

		if (kt_stats(s->fd, &st))
			break;
		before = st.file.pinned_bytes;
		p = kt_foll_pinned() - s->base;
		if (kt_stats(s->fd, &st))
			break;
		if (s->n < 4096) {
			s->pinned[s->n] = p;
			s->charged[s->n] = before > st.file.pinned_bytes ? before :
					   st.file.pinned_bytes;
			s->n++;
		}
	}
	return NULL;
}

/* Bytes @pinned pages of @l keep allocated, pinned in address order. */
static uint64_t held(const struct layout *l, long long pinned)
{
	uint64_t b = 0;
	long long i;

	for (i = 0; i < pinned; i++)
		b += i < NTHP && l->huge[i] ? HP : PG;
	return b;
}

/* PIN the whole range while sampling; returns the PIN's result. */
/*
 * @ahead: what the uapi allows pins to be ahead of the charge: near a
 * limit (@cap), the one page a user pins before its folio is charged, by at
 * most that folio, between GUP's return and the charge; nothing without one.
 */
static int pin_sampled(struct layout *l, int fd, struct pinmem_pin *p, struct sampler *s,
		       const char *what, uint64_t cap, uint64_t ahead, int need_mid)
{
	pthread_t t;
	long i, bad = 0, over = 0, mid = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->base = kt_foll_pinned();
	if (pthread_create(&t, NULL, sample, s))
		kt_bail("pthread_create");
	ret = kt_pin(fd, l->range, l->len, p);
	s->stop = 1;
	pthread_join(t, NULL);
	if (!ret)
		count_huge(l);
	for (i = 0; i < s->n; i++) {
		uint64_t h = held(l, s->pinned[i]);

		mid += s->pinned[i] > 0 && (size_t)s->pinned[i] < l->len / PG;
		if (h > s->charged[i] + ahead) {
			if (!bad)
				kt_diag("%s: sample %ld: %lld pages pinned hold %llu bytes, charged %llu",
					what, i, s->pinned[i], (unsigned long long)h,
					(unsigned long long)s->charged[i]);
			bad++;
		}
		over += s->charged[i] > cap;
	}
	if (need_mid)
		kt_ok(s->n > 0 && mid > 0, "%s: %ld samples, %ld while the PIN ran", what, s->n, mid);
	else
		kt_diag("%s: %ld samples, %ld while the PIN ran", what, s->n, mid);
	kt_eq(bad, 0, "%s: held <= charged%s at every sample", what,
	      ahead ? " + the one page's folio" : "");
	if (cap != PINMEM_UNLIMITED)
		kt_eq(over, 0, "%s: charged never above %llu bytes", what, (unsigned long long)cap);
	return ret;
}

static void test_held_le_charged(void)
{
	struct layout l;
	struct sampler *s = calloc(1, sizeof(*s));
	struct pinmem_pin p;
	int fd, huge;

	build(&l, TAIL);
	fd = kt_open();
	kt_eq(pin_sampled(&l, fd, &p, s, "64 THP pages + 48 MiB", PINMEM_UNLIMITED, 0, 1), 0,
	      "PIN of one page of each of 64 THPs and a 48 MiB tail");
	huge = count_huge(&l);
	kt_ok(huge >= NTHP / 2, "%d of the %d moved pages sit in THPs", huge, NTHP);
	kt_eq(p.charged_bytes, (uint64_t)huge * HP + (NTHP - huge) * PG + TAIL,
	      "charged: the whole THPs and the tail");
	kt_eq(kt_unpin(fd, p.handle), 0, "UNPIN");
	close(fd);
	unbuild(&l);
	free(s);
}

/* A range whose length alone passes the limit: refused before any pin. */
static void length_over_limit(int fd)
{
	char *big = kt_map(16 * KT_MIB, 1);
	long long before = kt_vmstat("nr_foll_pin_acquired");
	struct pinmem_pin p;

	kt_eq(kt_pin(fd, big, 16 * KT_MIB, &p), -ENOMEM, "16 MiB under an 8 MiB rlimit: ENOMEM");
	kt_eq(kt_vmstat("nr_foll_pin_acquired") - before, 0, "refused before a page was pinned");
	munmap(big, 16 * KT_MIB);
}

/*
 * The case: RLIMIT_MEMLOCK 8 MiB, a range whose length
 * (64 pages and a 1 MiB tail) fits the limit but whose THPs do not: the
 * PIN gets as far as the limit allows and is refused there.  (A range
 * whose length alone passes the limit is refused before anything is
 * pinned.)
 */
static int under_rlimit(void *arg)
{
	struct layout l;
	struct sampler *s = calloc(1, sizeof(*s));
	struct pinmem_pin p;
	int fd, ret;

	kt_set_memlock(8 * KT_MIB);
	build(&l, KT_MIB);
	fd = kt_open();
	ret = pin_sampled(&l, fd, &p, s, "rlimit 8 MiB", 8 * KT_MIB, HP, 0);
	kt_eq(ret, -ENOMEM, "PIN over RLIMIT_MEMLOCK is refused (ENOMEM)");
	kt_eq(p.refused, PINMEM_REFUSED_RLIMIT, "reason RLIMIT");
	kt_eq(kt_regions_total(fd), 0, "nothing pinned");
	kt_eq(kt_vmpin_kb(0), 0, "VmPin back to 0");
	length_over_limit(fd);
	close(fd);
	unbuild(&l);
	free(s);
	return 0;
}

/*
 * A tail page registered with userfaultfd (missing mode), never resolved:
 * GUP cannot wait for user space under pinmem's mmap lock, so the PIN
 * fails with EFAULT at once; the module before #26 waited there forever
 * (killed by the alarm: the case fails) holding the THPs pinned.  All in a
 * child: a forked process does not inherit the registration.
 */
static void uffd_child(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct pinmem_pin p;
	struct layout l;
	int uffd, fd;

	alarm(30);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api))
		_exit(77);
	build(&l, KT_MIB);
	reg.range.start = (uintptr_t)l.range + NTHP * PG;
	reg.range.len = PG;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		_exit(78);
	fd = kt_open();
	_exit(kt_pin(fd, l.range, l.len, &p) == -EFAULT && kt_regions_total(fd) == 0 ? 0 : 1);
}

static void test_userfaultfd(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		uffd_child();
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		kt_skip("userfaultfd: not in this kernel");
		return;
	}
	kt_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "a userfaultfd page in the range: PIN fails with EFAULT, no stall (status %#x)", status);
}

int main(void)
{
	if (!have_thp()) {
		kt_skip("no transparent huge pages in this kernel");
		return kt_done();
	}
	kt_limits_save();
	kt_limits_open();
	test_held_le_charged();
	kt_eq(kt_run_as(0, ALL_CAPS & ~KT_CAP(CAP_IPC_LOCK), under_rlimit, NULL), 0,
	      "without CAP_IPC_LOCK, RLIMIT_MEMLOCK 8 MiB");
	test_userfaultfd();
	kt_limits_restore();
	kt_expect_clean("t_reserve end");
	return kt_done();
}
