// SPDX-License-Identifier: MIT
/*
 * pin-bench: how fast N GiB become usable pinned memory, in one run:
 *   fault+pin, 1 thread   pm_buf_alloc faulting with one thread, then pinning
 *                         (through /dev/pinmem when usable, else mlock)
 *   fault+pin, T threads  the same with T faulting threads
 *   mlock                 mmap + mlock(2) of the same page kind, which faults
 *                         inside the call (single-threaded)
 *   fault only, 1/T       pm_buf_alloc with PM_PIN_NONE: the faulting share

 * Rounds interleave the three (ABC ABC ...) and the median is printed, since
 * these machines are noisy.  Usage: pin-bench [-s GiB] [-t threads] [-r rounds]
 * [-p default|thp|hugetlb]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pinmem.h"

#define MAX_ROUNDS 32

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Seconds for pm_buf_alloc of size bytes pinned as *mode asks; *mode obtained. */
static double lib_round(struct pm_ctx *ctx, size_t size, unsigned int threads,
			enum pm_page_kind pages, enum pm_pin_mode *mode)
{
	struct pm_buf_opts o = { .pin = *mode, .pages = pages,
				 .flags = PM_BUF_NO_BACKEND, .fault_threads = threads };
	struct pm_buf *b;
	double t0 = now(), t;
	int r = pm_buf_alloc(ctx, size, &o, &b);

	t = now() - t0;
	if (r) {
		fprintf(stderr, "pin-bench: %s\n", pm_ctx_last_error(ctx));
		exit(1);
	}
	*mode = pm_buf_pin_mode(b);
	pm_buf_free(ctx, b);
	return t;
}

/* mmap + mlock of the same page kind (hugetlb from the pool, THP by madvise). */
static double mlock_round(size_t size, enum pm_page_kind pages)
{
	double t0, t;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		       (pages == PM_PAGES_HUGETLB ? MAP_HUGETLB : 0), -1, 0);

	if (p == MAP_FAILED) {
		perror("pin-bench: mmap");
		exit(1);
	}
	if (pages == PM_PAGES_THP)
		madvise(p, size, MADV_HUGEPAGE);
	t0 = now();
	if (mlock(p, size)) {
		fprintf(stderr, "pin-bench: mlock of %zu bytes: %s (raise ulimit -l)\n",
			size, strerror(errno));
		exit(1);
	}
	t = now() - t0;
	munlock(p, size);
	munmap(p, size);
	return t;
}

static void report(const char *what, double *t, int n, double gib)
{
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("  %-24s %8.3f s %8.2f GiB/s\n", what, t[n / 2], gib / t[n / 2]);
}

int main(int argc, char **argv)
{
	struct pm_open_opts oo = { .backend = PM_BACKEND_NONE };
	enum pm_page_kind pages = PM_PAGES_DEFAULT;
	double t1[MAX_ROUNDS], tn[MAX_ROUNDS], tm[MAX_ROUNDS], f1[MAX_ROUNDS], fn[MAX_ROUNDS];
	double gib = 2;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int threads = cpus > 1 ? (unsigned int)cpus : 2;
	enum pm_pin_mode mode = PM_PIN_AUTO, none = PM_PIN_NONE;
	struct pm_ctx_info in;
	struct pm_ctx *ctx;
	int rounds = 3, c, i;
	char err[256] = "", label[64];
	size_t size;

	while ((c = getopt(argc, argv, "s:t:r:p:")) != -1) {
		switch (c) {
		case 's': gib = atof(optarg); break;
		case 't': threads = (unsigned int)atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'p':
			pages = !strcmp(optarg, "thp") ? PM_PAGES_THP :
				!strcmp(optarg, "hugetlb") ? PM_PAGES_HUGETLB : PM_PAGES_DEFAULT;
			break;
		default:
			fprintf(stderr, "usage: pin-bench [-s GiB] [-t threads] [-r rounds] [-p default|thp|hugetlb]\n");
			return 2;
		}
	}
	if (gib <= 0 || rounds < 1 || rounds > MAX_ROUNDS || threads < 1) {
		fprintf(stderr, "pin-bench: need -s > 0, 1 <= -r <= %d, -t >= 1\n", MAX_ROUNDS);
		return 2;
	}
	size = (size_t)(gib * (double)(1ULL << 30)) & ~(size_t)4095;
	oo.errbuf = err;
	oo.errbuf_len = sizeof(err);
	if (pm_open(&ctx, &oo)) {
		fprintf(stderr, "pin-bench: %s\n", err);
		return 1;
	}
	pm_ctx_info(ctx, &in);
	for (i = 0; i < rounds; i++) {
		mode = PM_PIN_AUTO;
		t1[i] = lib_round(ctx, size, 1, pages, &mode);
		mode = PM_PIN_AUTO;
		tn[i] = lib_round(ctx, size, threads, pages, &mode);
		tm[i] = mlock_round(size, pages);
		f1[i] = lib_round(ctx, size, 1, pages, &none);
		fn[i] = lib_round(ctx, size, threads, pages, &none);
	}
	printf("pin-bench: %.1f GiB, pin via %s%s, pages %s, %d rounds (median), %ld CPUs\n",
	       gib, pm_pin_mode_name(mode), in.module ? "" : " (no /dev/pinmem)",
	       pm_page_kind_name(pages), rounds, cpus);
	report("fault+pin, 1 thread", t1, rounds, gib);
	snprintf(label, sizeof(label), "fault+pin, %u threads", threads);
	report(label, tn, rounds, gib);
	report("mlock", tm, rounds, gib);
	report("fault only, 1 thread", f1, rounds, gib);
	snprintf(label, sizeof(label), "fault only, %u threads", threads);
	report(label, fn, rounds, gib);
	pm_close(ctx);
	return 0;
}
