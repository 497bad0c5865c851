// SPDX-License-Identifier: MIT
/*
 * Concurrency: many threads pin and unpin random sizes against one small
 * budget (global, per-user, RLIMIT_MEMLOCK) while another thread samples the
 * charged bytes.  The budget is never overshot, every PIN either succeeds or
 * gets that budget's errno, the counters add up exactly, and all ends at zero.
 */
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "common.h"

#define THREADS		8
#define HOLD		4
#define BUF		(4 * KT_MIB)
#define SECONDS		4.0	/* at least, and until enough of both outcomes */
#define MAX_SECONDS	60.0
#define LIMIT		(8 * KT_MIB)
#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)

enum budget { B_GLOBAL, B_USER, B_RLIMIT };

struct run {
	enum budget budget;
	int expect_errno;
	int shared_fd;
	atomic_int stop;
	atomic_llong held;		/* bytes of successful PINs not yet unpinned */
	atomic_llong max_held, max_kernel;
	atomic_llong pins, refusals, other_errors, unpin_errors;
};

struct worker {
	struct run *run;
	int fd;
	unsigned int seed;
	char *buf;
};

static void bump_max(atomic_llong *m, long long v)
{
	long long cur = atomic_load(m);

	while (v > cur && !atomic_compare_exchange_weak(m, &cur, v))
		;
}

static void *work(void *p)
{
	struct worker *w = p;
	struct run *r = w->run;
	uint64_t h[HOLD] = { 0 };
	size_t len[HOLD] = { 0 };
	int slot = 0, i;

	while (!atomic_load(&r->stop)) {
		size_t n = (1 + rand_r(&w->seed) % 256) * KT_PAGE;
		size_t off = (rand_r(&w->seed) % ((BUF - n) / KT_PAGE + 1)) * KT_PAGE;
		int ret;

		if (h[slot]) {
			atomic_fetch_sub(&r->held, (long long)len[slot]);
			if (kt_unpin(w->fd, h[slot]))
				atomic_fetch_add(&r->unpin_errors, 1);
			h[slot] = 0;
		}
		ret = kt_pin_handle(w->fd, w->buf + off, n, &h[slot]);
		if (!ret) {
			len[slot] = n;
			bump_max(&r->max_held, atomic_fetch_add(&r->held, (long long)n) + (long long)n);
			atomic_fetch_add(&r->pins, 1);
		} else if (ret == -r->expect_errno) {
			atomic_fetch_add(&r->refusals, 1);
		} else {
			atomic_fetch_add(&r->other_errors, 1);
		}
		slot = (slot + 1) % HOLD;
	}
	for (i = 0; i < HOLD; i++) {
		if (!h[i])
			continue;
		atomic_fetch_sub(&r->held, (long long)len[i]);
		if (kt_unpin(w->fd, h[i]))
			atomic_fetch_add(&r->unpin_errors, 1);
	}
	return NULL;
}

static void *sample(void *p)
{
	struct run *r = p;
	struct pinmem_stats st;
	int fd = kt_open();

	while (!atomic_load(&r->stop)) {
		if (kt_stats(fd, &st))
			continue;
		if (r->budget == B_GLOBAL)
			bump_max(&r->max_kernel, (long long)st.global.pinned_bytes);
		else if (r->budget == B_USER)
			bump_max(&r->max_kernel, (long long)st.user.pinned_bytes);
		/*
		 * mm->pinned_vm may rise above RLIMIT_MEMLOCK for an instant
		 * while a refused PIN backs out (as in ib_umem_get()), so the
		 * rlimit is judged on what was really pinned (max_held).
		 */
	}
	close(fd);
	return NULL;
}

static int storm(void *p)
{
	struct run *r = p;
	struct worker w[THREADS];
	pthread_t t[THREADS], s;
	struct pinmem_stats a, b;
	int shared = kt_open(), i;
	const char *name = r->budget == B_GLOBAL ? "global" : r->budget == B_USER ? "user" : "rlimit";

	if (r->budget == B_RLIMIT) {
		struct rlimit rl = { LIMIT, LIMIT };

		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			kt_bail("setrlimit");
	}
	kt_stats(shared, &a);
	for (i = 0; i < THREADS; i++) {
		w[i].run = r;
		w[i].fd = i % 2 ? kt_open() : shared;
		w[i].seed = 1234 + i;
		w[i].buf = kt_map(BUF, 1);
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	pthread_create(&s, NULL, sample, r);
	{
		double t0 = kt_now();

		/* Time alone is not enough on a loaded host: count outcomes. */
		while (kt_now() - t0 < MAX_SECONDS &&
		       (kt_now() - t0 < SECONDS || r->pins < 500 || r->refusals < 50))
			usleep(100000);
	}
	atomic_store(&r->stop, 1);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_join(s, NULL);
	kt_stats(shared, &b);

	kt_diag("%s: %lld pins, %lld refusals, max held %lld, max charged %lld",
		name, (long long)r->pins, (long long)r->refusals,
		(long long)r->max_held, (long long)r->max_kernel);
	kt_ok(r->pins > 100 && r->refusals > 10, "%s: budget both granted and refused", name);
	kt_eq(r->other_errors, 0, "%s: no other errors than %s", name, strerror(r->expect_errno));
	kt_eq(r->unpin_errors, 0, "%s: every UNPIN succeeded", name);
	kt_ok(r->max_held <= (long long)LIMIT, "%s: pinned bytes never above the limit", name);
	kt_ok(r->max_kernel <= (long long)LIMIT, "%s: charged bytes never above the limit", name);
	kt_eq(b.global.pins - a.global.pins, r->pins, "%s: global pins counter exact", name);
	kt_eq(b.global.unpins - a.global.unpins, r->pins, "%s: global unpins counter exact", name);
	if (r->budget == B_GLOBAL)
		kt_eq(b.global.refused_global - a.global.refused_global, r->refusals,
		      "%s: refused_global counter exact", name);
	else if (r->budget == B_USER)
		kt_eq(b.user.refused_user - a.user.refused_user, r->refusals,
		      "%s: refused_user counter exact", name);
	else
		kt_eq(b.user.refused_rlimit - a.user.refused_rlimit, r->refusals,
		      "%s: refused_rlimit counter exact", name);
	kt_eq(b.global.pinned_bytes, 0, "%s: global back to zero", name);
	kt_eq(b.user.pinned_bytes, 0, "%s: user back to zero", name);
	kt_eq(kt_vmpin_kb(0), 0, "%s: VmPin back to zero", name);
	for (i = 0; i < THREADS; i++)
		if (w[i].fd != shared)
			close(w[i].fd);
	close(shared);
	return 0;
}

/* Two threads UNPIN the same handle at once: exactly one wins. */
struct race {
	pthread_barrier_t go;
	int fd;
	uint64_t handle;
	int ret[2];
	int stop;
};

static void *race_unpin(void *p)
{
	struct race *r = p;

	for (;;) {
		pthread_barrier_wait(&r->go);
		if (r->stop)
			break;
		r->ret[1] = kt_unpin(r->fd, r->handle);
		pthread_barrier_wait(&r->go);
	}
	return NULL;
}

static void test_double_unpin_race(void)
{
	struct race r = { .fd = kt_open() };
	char *buf = kt_map(KT_MIB, 1);
	int i, wins = 0, bad = 0;
	pthread_t t;

	pthread_barrier_init(&r.go, NULL, 2);
	pthread_create(&t, NULL, race_unpin, &r);
	for (i = 0; i < 500; i++) {
		if (kt_pin_handle(r.fd, buf + (i % 256) * KT_PAGE, KT_PAGE, &r.handle))
			kt_bail("PIN");
		pthread_barrier_wait(&r.go);
		r.ret[0] = kt_unpin(r.fd, r.handle);
		pthread_barrier_wait(&r.go);
		wins += (r.ret[0] == 0) + (r.ret[1] == 0);
		bad += !((r.ret[0] == 0 && r.ret[1] == -ENOENT) ||
			 (r.ret[1] == 0 && r.ret[0] == -ENOENT));
	}
	r.stop = 1;
	pthread_barrier_wait(&r.go);
	pthread_join(t, NULL);
	kt_eq(bad, 0, "racing UNPINs of one handle: one 0, one ENOENT (500 rounds)");
	kt_eq(wins, 500, "each region released exactly once");
	kt_eq(kt_regions_total(r.fd), 0, "no region left");
	close(r.fd);
	munmap(buf, KT_MIB);
	kt_expect_clean("UNPIN race");
}

/*
 * Two threads pin the same fresh pages at the same moment.  The pages start
 * in ZONE_MOVABLE, so each long-term PIN first migrates them, and one
 * migration can fail while the other thread holds the page: a valid PIN
 * within every budget must still succeed (and must never answer ENOMEM, the
 * errno of RLIMIT_MEMLOCK).
 */
struct same {
	pthread_barrier_t go;
	int fd;
	char *buf;
	int rounds;
	atomic_int failed, enomem;
};

static void *pin_same(void *p)
{
	struct same *s = p;
	int i;

	for (i = 0; i < s->rounds; i++) {
		uint64_t h;
		int ret;

		pthread_barrier_wait(&s->go);
		ret = kt_pin_handle(s->fd, s->buf + (size_t)i * 4 * KT_PAGE, 4 * KT_PAGE, &h);
		if (ret) {
			atomic_fetch_add(&s->failed, 1);
			if (ret == -ENOMEM)
				atomic_fetch_add(&s->enomem, 1);
		} else {
			kt_unpin(s->fd, h);
		}
	}
	return NULL;
}

static void test_same_pages(void)
{
	struct same s = { .fd = kt_open(), .rounds = 300 };
	size_t len = (size_t)s.rounds * 4 * KT_PAGE, i;
	uint64_t start, end;
	int movable = 0;
	pthread_t t[2];

	s.buf = kt_map(len, 1);
	kt_eq(kt_zone_movable(&start, &end), 0, "same pages: the VM has a ZONE_MOVABLE");
	for (i = 0; i < len; i += KT_PAGE)
		movable += kt_pfn(s.buf + i) >= start && kt_pfn(s.buf + i) < end;
	kt_ok(movable > 0, "same pages: %d of %zu pages start in ZONE_MOVABLE", movable, len / KT_PAGE);
	pthread_barrier_init(&s.go, NULL, 2);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, pin_same, &s);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	kt_eq(s.enomem, 0, "same pages from two threads: no ENOMEM without an rlimit");
	kt_eq(s.failed, 0, "same pages from two threads: all %d PINs succeed", 2 * s.rounds);
	close(s.fd);
	munmap(s.buf, len);
	kt_expect_clean("same pages");
}

/* Threads keep pinning through a file while it is closed under them. */
struct closer {
	int fd;
	char *buf;
	atomic_int stop;
	atomic_long odd;
	atomic_int odd_errno;
	atomic_int next_slice;
};

static void *pin_until_closed(void *p)
{
	struct closer *c = p;
	unsigned int seed = (unsigned int)(uintptr_t)&seed;
	/* Own pages per thread: same-page races are test_same_pages()'s. */
	char *mine = c->buf + (size_t)atomic_fetch_add(&c->next_slice, 1) * KT_MIB;

	while (!atomic_load(&c->stop)) {
		uint64_t h;
		int ret = kt_pin_handle(c->fd, mine + (rand_r(&seed) % 252) * KT_PAGE,
					KT_PAGE * (1 + rand_r(&seed) % 4), &h);

		if (!ret && rand_r(&seed) % 2)
			ret = kt_unpin(c->fd, h);
		if (ret && ret != -EBADF && ret != -ENOENT) {
			if (atomic_fetch_add(&c->odd, 1) < 5)
				kt_diag("close race: %s on fd %d", strerror(-ret), c->fd);
			atomic_store(&c->odd_errno, -ret);
		}
	}
	return NULL;
}

static void test_close_race(void)
{
	struct closer c = { .buf = kt_map(4 * KT_MIB, 1) };
	pthread_t t[4];
	int round, i;

	for (round = 0; round < 50; round++) {
		c.fd = kt_open();
		atomic_store(&c.stop, 0);
		atomic_store(&c.next_slice, 0);
		for (i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, pin_until_closed, &c);
		usleep(20000);
		close(c.fd);	/* in-flight ioctls keep the file until they return */
		usleep(5000);
		atomic_store(&c.stop, 1);
		for (i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
	kt_eq(c.odd, 0, "PIN/UNPIN racing close: only EBADF or ENOENT (else %s)",
	      strerror(c.odd_errno));
	munmap(c.buf, 4 * KT_MIB);
	kt_expect_clean("close race");
}

/* Worker of test_consistent_lines(): PIN and UNPIN until told to stop. */
static void *pin_unpin(void *p)
{
	struct closer *c = p;
	char *buf = kt_map(64 * KT_PAGE, 1);
	uint64_t h;

	while (!atomic_load(&c->stop))
		if (!kt_pin_handle(c->fd, buf, (1 + rand() % 64) * KT_PAGE, &h))
			kt_unpin(c->fd, h);
	munmap(buf, 64 * KT_PAGE);
	return NULL;
}

/* regions, pins and unpins of the global line of one read of the stats file. */
static int global_line(unsigned long long *regions, unsigned long long *pins,
		       unsigned long long *unpins)
{
	static char buf[1 << 16];
	char *l;
	int n = 0;

	if (kt_read_file(PINMEM_STATS_PATH, buf, sizeof(buf)) < 0)
		return -1;
	l = strstr(buf, "\nglobal ");
	if (!l)
		return -1;
	l = strstr(l, " regions ");
	n += l && sscanf(l, " regions %llu pins %llu unpins %llu", regions, pins, unpins) == 3;
	return n == 1 ? 0 : -1;
}

/*
 * Each line of the stats file is one consistent snapshot: while 4 threads
 * PIN and UNPIN, the global line's regions are always pins - unpins (a PIN
 * in progress shows in pinning, not regions).  The module before issue #26
 * counted a PIN in progress in regions before pins: lines up to 5 apart.
 */
static void test_consistent_lines(void)
{
	struct closer c = { 0 };
	unsigned long long regions, pins, unpins;
	long reads = 0, bad = 0;
	pthread_t t[4];
	double end;
	int i;

	c.fd = kt_open();
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, pin_unpin, &c);
	end = kt_now() + 3;
	while (kt_now() < end) {
		if (global_line(&regions, &pins, &unpins))
			kt_bail("stats file: no global line");
		reads++;
		if (regions != pins - unpins) {
			if (!bad)
				kt_diag("regions %llu, pins %llu, unpins %llu", regions, pins, unpins);
			bad++;
		}
	}
	atomic_store(&c.stop, 1);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	close(c.fd);
	kt_eq(bad, 0, "stats file: regions == pins - unpins in every one of %ld reads", reads);
}

int main(void)
{
	static struct run g = { .budget = B_GLOBAL, .expect_errno = ENOSPC };
	static struct run u = { .budget = B_USER, .expect_errno = EDQUOT };
	static struct run r = { .budget = B_RLIMIT, .expect_errno = ENOMEM };

	kt_limits_save();
	kt_limits_open();
	kt_param_set("global_limit", LIMIT);
	storm(&g);
	kt_limits_open();
	kt_param_set("default_user_limit", LIMIT);
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), storm, &u), 0, "uid 1000 storm");
	kt_limits_open();
	kt_param_set("enforce_rlimit", 1);
	kt_eq(kt_run_as(0, ALL_CAPS & ~KT_CAP(CAP_IPC_LOCK), storm, &r), 0, "rlimit storm");
	kt_limits_open();
	test_double_unpin_race();
	test_same_pages();
	test_close_race();
	test_consistent_lines();
	kt_limits_restore();
	kt_expect_clean("t_concurrency end");
	return kt_done();
}
