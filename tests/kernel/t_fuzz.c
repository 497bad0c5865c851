// SPDX-License-Identifier: MIT
/*
 * Fuzz: threads in two processes (root with every capability, and uid 1000
 * with none) issue random ioctls with random arguments for a bounded time
 * (PINMEM_FUZZ_SECONDS, default 20; up to 60 until 500 calls): known and
 * unknown command numbers around the magic, random sizes and struct bytes,
 * addresses in and around their own memory, unmapped, PROT_NONE, read-only
 * and kernel ones, while another thread keeps changing the mappings and
 * another reads the stats file.
 * Every errno must be one the ABI names; at the end nothing is pinned or
 * charged and FOLL_PIN is balanced (the VM harness also fails on any splat).
 */
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define THREADS		4
#define ARENA		(8 * KT_MIB)
#define HANDLES		32
#define FUZZ_CALLS	500	/* calls wanted from each fuzzing process */
#define FUZZ_MIN_CALLS	200	/* fewer: the fuzzer did not really run */

struct fuzz {
	char *arena;		/* churned by one thread */
	char *ro;		/* read-only */
	char *none;		/* PROT_NONE */
	int shared_fd;
	atomic_int stop;
	atomic_long calls, unexpected;
};

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

static int chance(struct rng *r, int percent)
{
	return (int)(rnd(r) % 100) < percent;
}

static uint64_t rnd_addr(struct rng *r, struct fuzz *f)
{
	static const uint64_t kernel[] = {
		0xffff888000000000ULL, 0xffffffff81000000ULL, 0xffffffffff600000ULL,
		0xffffc90000000000ULL, 0x800000000000ULL, 0,
	};
	uint64_t off = (rnd(r) % (ARENA / KT_PAGE)) * KT_PAGE;

	switch (rnd(r) % 8) {
	case 0: return kernel[rnd(r) % 6];
	case 1: return rnd(r);
	case 2: return (uintptr_t)f->ro + off % (KT_MIB);
	case 3: return (uintptr_t)f->none + off % (KT_MIB);
	case 4: return (uintptr_t)f->arena + off + (chance(r, 10) ? rnd(r) % KT_PAGE : 0);
	default: return (uintptr_t)f->arena + off;
	}
}

static uint64_t rnd_len(struct rng *r)
{
	switch (rnd(r) % 6) {
	case 0: return rnd(r);
	case 1: return rnd(r) % (4 * KT_PAGE);
	default: return (1 + rnd(r) % 64) * KT_PAGE;
	}
}

static int allowed(int err)
{
	switch (err) {
	case 0: case EINVAL: case EFAULT: case EACCES: case EOPNOTSUPP: case EPERM:
	case ENOENT: case ENOTTY: case ENOSPC: case EDQUOT: case ENOMEM: case EINTR:
	case EAGAIN:	/* a long-term migration race that outlived the retries */
		return 1;
	}
	return 0;
}

static void note(struct fuzz *f, const char *what, int ret)
{
	atomic_fetch_add(&f->calls, 1);
	if (!allowed(-ret)) {
		if (atomic_fetch_add(&f->unexpected, 1) < 10)
			kt_diag("pid %d: %s returned %d (%s)", getpid(), what, ret, strerror(-ret));
	}
}

static void fill_random(struct rng *r, void *p, size_t n)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)rnd(r);
}

static void *fuzzer(void *p)
{
	struct fuzz *f = p;
	struct rng r = { .s = 0x9e3779b97f4a7c15ULL ^ (uint64_t)pthread_self() ^ getpid() };
	static __thread uint64_t junk[128];
	static __thread struct pinmem_region_info info[64];
	uint64_t handles[HANDLES] = { 0 };
	int fd = kt_open(), nh = 0;

	while (!atomic_load(&f->stop)) {
		int use = chance(&r, 30) ? f->shared_fd : fd;
		int op = (int)(rnd(&r) % 100), ret;

		if (op < 40) {
			struct pinmem_pin pin = { .addr = rnd_addr(&r, f), .length = rnd_len(&r) };

			if (chance(&r, 5))
				pin.flags = (uint32_t)rnd(&r);
			if (chance(&r, 5))
				pin.reserved[rnd(&r) % 2] = rnd(&r);
			if (chance(&r, 3))
				pin.pad = 1;
			ret = kt_ioctl(use, PINMEM_IOC_PIN, &pin);
			note(f, "PIN", ret);
			if (!ret && use == fd) {
				if (nh == HANDLES) {
					note(f, "UNPIN", kt_unpin(fd, handles[0]));
					memmove(handles, handles + 1, sizeof(handles) - sizeof(handles[0]));
					nh--;
				}
				handles[nh++] = pin.handle;
			}
		} else if (op < 55) {
			struct pinmem_unpin u = { .handle = nh && chance(&r, 60) ?
				handles[rnd(&r) % nh] : rnd(&r) % 1000 };

			if (chance(&r, 5))
				u.flags = (uint32_t)rnd(&r);
			ret = kt_ioctl(use, PINMEM_IOC_UNPIN, &u);
			note(f, "UNPIN", ret);
		} else if (op < 65) {
			struct pinmem_regions rg = {
				.regions = chance(&r, 80) ? (uintptr_t)info : rnd_addr(&r, f),
				.capacity = (uint32_t)(rnd(&r) % 65),
			};

			if (rg.regions != (uintptr_t)info && rg.regions >= (uintptr_t)f->arena &&
			    rg.regions < (uintptr_t)f->arena + ARENA)
				rg.regions = 0xffff888000000000ULL;	/* never into live memory */
			if (chance(&r, 5))
				rg.flags = (uint32_t)rnd(&r);
			note(f, "REGIONS", kt_ioctl(use, PINMEM_IOC_REGIONS, &rg));
		} else if (op < 75) {
			static const unsigned long cmds[] = {
				PINMEM_IOC_STATS, PINMEM_IOC_GET_VERSION, PINMEM_IOC_GET_LIMITS,
			};

			memset(junk, 0, sizeof(junk));
			if (chance(&r, 30))
				fill_random(&r, junk, 64);
			note(f, "STATS/VERSION/GET_LIMITS", kt_ioctl(use, cmds[rnd(&r) % 3], junk));
		} else if (op < 80) {
			struct pinmem_limits l = { .flags = (uint32_t)(rnd(&r) % 0x40),
				.uid = (uint32_t)(rnd(&r) % 4 ? 1000 + rnd(&r) % 3 : rnd(&r)),
				.global_limit = chance(&r, 50) ? PINMEM_UNLIMITED : rnd(&r) % (256 * KT_MIB),
				.default_user_limit = chance(&r, 50) ? PINMEM_UNLIMITED : rnd(&r) % (256 * KT_MIB),
				.user_limit = rnd(&r) % (64 * KT_MIB),
				.enforce_rlimit = (uint32_t)(rnd(&r) % 3) };

			note(f, "SET_LIMITS", kt_ioctl(use, PINMEM_IOC_SET_LIMITS, &l));
		} else if (op < 92) {
			/* Random command near the magic with random size and bytes. */
			unsigned long cmd = _IOC((unsigned int)(rnd(&r) % 4),
						 chance(&r, 80) ? PINMEM_IOC_MAGIC : (unsigned int)(rnd(&r) % 256),
						 (unsigned int)(rnd(&r) % 12), (unsigned int)(rnd(&r) % 200));

			fill_random(&r, junk, sizeof(junk));
			/* A REGIONS that parses must not write into live memory. */
			junk[0] = 0xffff888000000000ULL;
			note(f, "random command", kt_ioctl(use, cmd, chance(&r, 90) ? (void *)junk :
							    (void *)(uintptr_t)rnd_addr(&r, f)));
		} else if (op < 96) {
			/* Give everything back by closing, then start over. */
			close(fd);
			fd = kt_open();
			nh = 0;
		} else {
			/* A child may not pin through the inherited fd. */
			pid_t pid = fork();

			if (pid == 0) {
				struct pinmem_pin pin = { .addr = (uintptr_t)f->arena, .length = KT_PAGE };
				int e = kt_ioctl(fd, PINMEM_IOC_PIN, &pin);

				_exit(e == -EPERM || e == -EFAULT ? 0 : 1);
			}
			if (pid > 0) {
				int st;

				if (chance(&r, 50))
					kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				if (WIFEXITED(st) && WEXITSTATUS(st))
					note(f, "child PIN through inherited fd", -EIO);
			}
		}
	}
	close(fd);
	return NULL;
}

/* Remap, mprotect and punch holes into the arena while others pin it. */
static void *churn(void *p)
{
	struct fuzz *f = p;
	struct rng r = { .s = 77 };

	while (!atomic_load(&f->stop)) {
		size_t off = (rnd(&r) % (ARENA / KT_MIB)) * KT_MIB;
		char *a = f->arena + off;

		switch (rnd(&r) % 4) {
		case 0:
			mmap(a, KT_MIB, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			break;
		case 1:
			mprotect(a, KT_MIB, chance(&r, 50) ? PROT_READ : PROT_NONE);
			break;
		case 2:
			mprotect(a, KT_MIB, PROT_READ | PROT_WRITE);
			memset(a, 0x5a, KT_MIB);
			break;
		default:
			madvise(a, KT_MIB, MADV_DONTNEED);
			break;
		}
		usleep(2000);
	}
	return NULL;
}

static void *read_stats(void *p)
{
	struct fuzz *f = p;
	uint64_t v;

	while (!atomic_load(&f->stop))
		kt_statfile("global", 0, "pinned_bytes", &v);
	return NULL;
}

static int fuzz_process(void *p)
{
	double seconds = *(double *)p;
	struct fuzz f = { 0 };
	pthread_t t[THREADS + 2];
	double t0;
	int i;

	f.arena = kt_map(ARENA, 1);
	f.ro = mmap(NULL, KT_MIB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	f.none = mmap(NULL, KT_MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	f.shared_fd = kt_open();
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, fuzzer, &f);
	pthread_create(&t[THREADS], NULL, churn, &f);
	pthread_create(&t[THREADS + 1], NULL, read_stats, &f);
	/*
	 * The time asked for, longer on a loaded host or a KASAN kernel until
	 * FUZZ_CALLS calls (at most 180 s); fewer than FUZZ_MIN_CALLS means the
	 * fuzzer did not really run, which fails.
	 */
	t0 = kt_now();
	while (kt_now() - t0 < seconds || (f.calls < FUZZ_CALLS && kt_now() - t0 < 180))
		usleep(100000);
	atomic_store(&f.stop, 1);
	for (i = 0; i < THREADS + 2; i++)
		pthread_join(t[i], NULL);
	close(f.shared_fd);
	kt_diag("pid %d uid %d: %ld calls, %ld unexpected errnos", getpid(), (int)getuid(),
		(long)f.calls, (long)f.unexpected);
	return f.unexpected ? 1 : f.calls < FUZZ_MIN_CALLS ? 2 : 0;
}

static double seconds;

static int as_root(void *p)
{
	return fuzz_process(&seconds);
}

int main(void)
{
	const char *env = getenv("PINMEM_FUZZ_SECONDS");
	uint64_t all = (1ULL << (CAP_LAST_CAP + 1)) - 1;
	int status[2];
	pid_t pid;

	seconds = env ? atof(env) : 20;
	kt_limits_save();
	kt_limits_open();
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(kt_run_as(1000, 0, as_root, NULL));
	status[0] = kt_run_as(0, all, as_root, NULL);
	waitpid(pid, &status[1], 0);
	status[1] = WIFEXITED(status[1]) ? WEXITSTATUS(status[1]) : 128 + WTERMSIG(status[1]);
	kt_eq(status[0], 0, "root fuzzer: only ABI errnos, enough calls");
	kt_eq(status[1], 0, "uid 1000 fuzzer: only ABI errnos, enough calls");
	kt_limits_restore();
	kt_expect_clean("t_fuzz end");
	{
		struct pinmem_stats st;
		int fd = kt_open();

		kt_eq(kt_stats(fd, &st), 0, "STATS");
		kt_eq(st.global.pins - st.global.unpins, 0, "global pins - unpins = 0");
		kt_eq(kt_statfile_version(), PINMEM_STATS_VERSION, "stats file still well-formed");
		close(fd);
	}
	return kt_done();
}
