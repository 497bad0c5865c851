// SPDX-License-Identifier: MIT
/*
 * Faulting pages in with several threads before pinning: the faults (zeroing
 * and mapping each page), not the pin itself, are the slow part of making
 * memory resident, and they scale with threads.  Each thread write-faults its
 * own slice with MADV_POPULATE_WRITE, which leaves the bytes as they are (so
 * it also serves caller-owned memory, and refuses memory that is not
 * writable instead of crashing); kernels before 5.14 lack it and get a
 * one-write-per-page loop that adds zero atomically.  For memory placed on
 * a NUMA node the threads run on that node's CPUs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "fault.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define FAULT_SLICE_MIN	(64UL << 20)
#define FAULT_THREADS_MAX 64

struct fault_job {
	uint8_t *p;
	size_t len, step;
	int err;
};

static int fault_range(uint8_t *p, size_t len, size_t step)
{
	size_t off;

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* A supported advice with length 0 succeeds: then EINVAL meant "not writable". */
	if (!madvise(p, 0, MADV_POPULATE_WRITE))
		return -EACCES;
	for (off = 0; off < len; off += step)
		__atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED);
	return 0;
}

static void *fault_thread(void *arg)
{
	struct fault_job *j = arg;

	j->err = fault_range(j->p, j->len, j->step);
	return NULL;
}

unsigned int pm_fault_threads_for(unsigned int cpus, size_t len, unsigned int asked)
{
	size_t n;

	if (asked)
		return asked > FAULT_THREADS_MAX ? FAULT_THREADS_MAX : asked;
	n = len / FAULT_SLICE_MIN;
	if (n > cpus)
		n = cpus;
	if (n > FAULT_THREADS_MAX)
		n = FAULT_THREADS_MAX;
	return n ? (unsigned int)n : 1;
}

int pm_fault_in(void *ptr, size_t len, size_t step, unsigned int threads)
{
	return pm_fault_in_on(ptr, len, step, threads, NULL);
}

/* A faulting thread on cpus (NULL: anywhere); 0 or the pthread error. */
static int start_on(pthread_t *t, struct fault_job *j, const cpu_set_t *cpus)
{
	pthread_attr_t attr;
	int r;

	if (!cpus)
		return pthread_create(t, NULL, fault_thread, j);
	pthread_attr_init(&attr);
	r = pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
	if (!r)
		r = pthread_create(t, &attr, fault_thread, j);
	pthread_attr_destroy(&attr);
	return r;
}

int pm_fault_in_on(void *ptr, size_t len, size_t step, unsigned int threads,
		   const cpu_set_t *cpus)
{
	struct fault_job jobs[FAULT_THREADS_MAX];
	pthread_t tids[FAULT_THREADS_MAX];
	bool started[FAULT_THREADS_MAX];
	size_t pages = len / step, per, off = 0;
	unsigned int i, n = threads;
	int err = 0;

	if (n > FAULT_THREADS_MAX)
		n = FAULT_THREADS_MAX;
	if (n > pages)
		n = (unsigned int)pages;
	if (n <= 1 && !cpus)
		return fault_range(ptr, len, step);
	if (!n)
		n = 1;
	per = (pages + n - 1) / n * step;
	for (i = 0; i < n; i++) {
		jobs[i].p = (uint8_t *)ptr + off;
		jobs[i].len = off + per > len ? len - off : per;
		jobs[i].step = step;
		jobs[i].err = 0;
		off += jobs[i].len;
		/*
		 * Slice 0 runs here unless the slices must run on given CPUs;
		 * a thread that cannot start runs here too.
		 */
		started[i] = (i || cpus) && !start_on(&tids[i], &jobs[i], cpus);
	}
	for (i = 0; i < n; i++) {
		if (started[i])
			pthread_join(tids[i], NULL);
		else
			fault_thread(&jobs[i]);
		if (jobs[i].err && !err)
			err = jobs[i].err;
	}
	return err;
}
