/* SPDX-License-Identifier: MIT */
/*
 * Stand-in for liburing's io_uring_submit_and_wait, for stream tests that
 * rewrite the completions of the reader lanes' reads (an error, a short
 * read): it calls the real one, then, while rewrite_active() says so,
 * hands each completion of a read (not of an open, a statx or a populate)
 * to rewrite_cqe(), which may change cqe->res.  A lane reaps right after
 * its submit returns (with DEFER_TASKRUN every completion is posted in it).
 * The test defines both (static) functions, anywhere after this header.
 */
#ifndef PM_URING_REWRITE_H
#define PM_URING_REWRITE_H

#include <dlfcn.h>
#include <stdint.h>

#include "reader.h"

static bool rewrite_active(void);
static void rewrite_cqe(struct io_uring_cqe *cqe, struct pm_read *rd);

int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int (*real)(struct io_uring *, unsigned) =
		(int (*)(struct io_uring *, unsigned))dlsym(RTLD_NEXT, "io_uring_submit_and_wait");
	struct io_uring_cqe *cqe;
	unsigned int head;
	int ret = real(ring, wait_nr);

	if (!rewrite_active())
		return ret;
	io_uring_for_each_cqe(ring, head, cqe) {
		uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
		struct pm_read *rd = (struct pm_read *)ud;

		/* an open's or statx's completion is tagged with bit 0 */
		if (rd && !(ud & 1) && !rd->populate)
			rewrite_cqe(cqe, rd);
	}
	return ret;
}

#endif
