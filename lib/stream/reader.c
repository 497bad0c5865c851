// SPDX-License-Identifier: MIT
/*
 * io_uring reads into registered buffers.  liburing 2.3 and older kernels
 * lack some setup flags: each is tried best first and dropped on -EINVAL, so
 * the same binary runs on 5.x and 6.x kernels.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pinmem.h"
#include "populate.h"
#include "reader.h"

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN	(1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER	(1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN	(1U << 13)
#endif

static void note(struct pm_reader *r, const char *what, int err)
{
	size_t n = strlen(r->note);

	snprintf(r->note + n, sizeof(r->note) - n, "%s%s (%s)", n ? "; " : "",
		 what, strerror(-err));
}

int pm_reader_init(struct pm_reader *r, unsigned int qd)
{
	/* Best first: task work only when we wait, one submitter. */
	static const unsigned int tries[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;

	memset(r, 0, sizeof(*r));
	r->qd = qd;
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		struct io_uring_params p = { .flags = tries[i] };

		/*
		 * Room for every read and the statx and open linked before
		 * it: the caller queues under its lock and submits (inline
		 * reads copy) outside it, so queueing must never have to
		 * submit.
		 */
		ret = io_uring_queue_init_params(3 * qd, &r->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret)
		return ret;
	r->flags = r->ring.flags;
	r->cqe_skip = r->ring.features & IORING_FEAT_CQE_SKIP;
	r->ring_ok = true;
	return 0;
}

void pm_reader_register_files(struct pm_reader *r, const int *fds, unsigned int n)
{
	int ret = io_uring_register_files(&r->ring, fds, n);

	if (ret)
		note(r, "plain file descriptors: registering files failed", ret);
	else
		r->files_registered = true;
}

int pm_reader_register_table(struct pm_reader *r, unsigned int n)
{
	int ret = io_uring_register_files_sparse(&r->ring, n);

	if (!ret)
		r->files_registered = true;
	return ret;
}

void pm_reader_register_buf(struct pm_reader *r, struct pm_buf *buf, size_t unit)
{
	int n, ret;

	n = pm_buf_iovecs(buf, unit, NULL, 0);
	if (n <= 0) {
		note(r, "plain reads: no iovec layout", n ? n : -EINVAL);
		return;
	}
	r->iov = calloc(n, sizeof(*r->iov));
	if (!r->iov) {
		note(r, "plain reads", -ENOMEM);
		return;
	}
	ret = pm_buf_iovecs(buf, unit, r->iov, n);
	if (ret == n)
		ret = pm_buf_register_uring(buf, &r->ring, unit);
	else if (ret >= 0)
		ret = -EINVAL;
	if (ret) {
		note(r, "plain reads: registering buffers failed", ret);
		free(r->iov);
		r->iov = NULL;
		return;
	}
	r->niov = n;
	r->buf = buf;
	r->bufs_registered = true;
}

int pm_reader_buf_index(const struct pm_reader *r, const void *addr, size_t len)
{
	const char *a = addr;

	for (int i = 0; i < r->niov; i++) {
		const char *b = r->iov[i].iov_base;

		if (a >= b && a + len <= b + r->iov[i].iov_len)
			return i;
	}
	return -1;
}

/* Tags the open of a read in user_data; pm_read is at least 8-byte aligned. */
#define OPEN_TAG 1

void pm_reader_queue(struct pm_reader *r, struct pm_read *rd)
{
	struct io_uring_sqe *sqe;
	char *dst = rd->dst + rd->done;
	uint32_t len = rd->len - rd->done;

	/* the ring has 3 * qd entries, a read, its statx and open for each: full only if misused */
	if (io_uring_sq_space_left(&r->ring) < (rd->open_path ? 3u : 1u)) {
		io_uring_submit(&r->ring);
		r->queued = 0;
	}
	if (rd->open_path) {
		/*
		 * What the path is just before it is opened, for the caller
		 * to tell whether it is still the file it planned for (a
		 * statx by path: the open cannot be asked, a direct
		 * descriptor has no fstat).
		 */
		sqe = io_uring_get_sqe(&r->ring);
		io_uring_prep_statx(sqe, rd->open_dir, rd->open_path, 0, STATX_BASIC_STATS,
				    &rd->stx);
		sqe->flags |= IOSQE_IO_LINK | (r->cqe_skip ? IOSQE_CQE_SKIP_SUCCESS : 0);
		io_uring_sqe_set_data(sqe, (char *)rd + OPEN_TAG);
		r->queued++;
		sqe = io_uring_get_sqe(&r->ring);
		/* a direct descriptor: no fd used, the read finds it by index once it is open */
		io_uring_prep_openat_direct(sqe, rd->open_dir, rd->open_path,
					    O_RDONLY | (rd->align ? O_DIRECT : 0), 0,
					    (unsigned int)rd->fd);
		sqe->flags |= IOSQE_IO_LINK | (r->cqe_skip ? IOSQE_CQE_SKIP_SUCCESS : 0);
		io_uring_sqe_set_data(sqe, (char *)rd + OPEN_TAG);
		rd->open_path = NULL;
		rd->open_err = 0;
		rd->opened = true;
		r->queued++;
	}
	sqe = io_uring_get_sqe(&r->ring);
	if (rd->populate) {
		/* io_uring runs madvise in its workers: the faults block there */
		io_uring_prep_madvise(sqe, rd->dst, rd->len, MADV_POPULATE_READ);
		io_uring_sqe_set_data(sqe, rd);
		r->inflight++;
		r->queued++;
		return;
	}
	if (rd->buf_index >= 0)
		io_uring_prep_read_fixed(sqe, rd->fd, dst, len, rd->off + rd->done,
					 rd->buf_index);
	else
		io_uring_prep_read(sqe, rd->fd, dst, len, rd->off + rd->done);
	if (rd->fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
	/*
	 * A buffered read issued inline (io_uring's default: without blocking
	 * first, a miss waits for the page asynchronously) copies out of the
	 * page cache in this thread.  The owner of a ring that is its process's
	 * only reader asks for io_uring's workers instead, which copy on the
	 * other cores: measured on a loaded 2-core VM (pinstream --compare
	 * --rounds 5), inline 0.85-1.04x a pread loop warm, workers 1.26-1.56x.
	 */
	if (!rd->align && r->punt_buffered)
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data(sqe, rd);
	r->inflight++;
	r->queued++;
}

int pm_reader_submit(struct pm_reader *r, unsigned int wait_nr)
{
	int ret;

	do {
		if (wait_nr)
			ret = io_uring_submit_and_wait(&r->ring, wait_nr);
		else
			ret = io_uring_submit_and_get_events(&r->ring);
	} while (ret == -EINTR);
	if (ret < 0)
		return ret;
	r->queued = 0;
	return 0;
}

int pm_read_complete(struct pm_read *rd, int res)
{
	if (rd->populate)
		return res < 0 ? res : 0;
	if (rd->open_err)
		return rd->open_err;	/* the read itself was cancelled */
	if (res == -EAGAIN || res == -EINTR) {
		rd->resubmits++;
		return 1;
	}
	if (res < 0)
		return res;
	if (res == 0)
		return rd->done >= rd->need ? 0 : -ENODATA;
	rd->done += res;
	if (rd->done >= rd->need)
		return 0;
	if (rd->align && (rd->done % rd->align)) {
		/* an unaligned short O_DIRECT read only happens at end of file */
		return -ENODATA;
	}
	rd->resubmits++;
	return 1;
}

int pm_reader_reap(struct pm_reader *r, pm_read_done_fn done, void *arg)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	io_uring_for_each_cqe(&r->ring, head, cqe) {
		uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
		struct pm_read *rd = (struct pm_read *)(ud & ~(uintptr_t)OPEN_TAG);
		int ret;

		n++;
		if (ud & OPEN_TAG) {
			/* without CQE_SKIP the open's -ECANCELED follows a failed statx */
			if (cqe->res >= 0 || rd->open_err)
				continue;
			rd->open_err = cqe->res;
			/*
			 * A link head with CQE_SKIP_SUCCESS that fails takes
			 * its cancelled links' completions with it; without
			 * the flag the read's -ECANCELED comes next.
			 */
			if (r->cqe_skip) {
				r->inflight--;
				done(arg, rd, rd->open_err);
			}
			continue;
		}
		ret = pm_read_complete(rd, cqe->res);
		r->inflight--;
		if (ret == 1)
			pm_reader_queue(r, rd);
		else
			done(arg, rd, ret);
	}
	io_uring_cq_advance(&r->ring, n);
	return (int)n;
}

void pm_reader_exit(struct pm_reader *r)
{
	if (!r->ring_ok)
		return;
	if (r->bufs_registered)
		pm_buf_unregister_uring(r->buf, &r->ring);
	if (r->files_registered)
		io_uring_unregister_files(&r->ring);
	io_uring_queue_exit(&r->ring);
	free(r->iov);
	r->iov = NULL;
	r->ring_ok = false;
}

const char *pm_reader_flag_names(unsigned int flags, char *buf, size_t len)
{
	static const struct {
		unsigned int flag;
		const char *name;
	} names[] = {
		{ IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER" },
		{ IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN" },
		{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },
	};
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (flags & names[i].flag)
			n += snprintf(buf + n, n < len ? len - n : 0, "%s%s",
				      n ? "|" : "", names[i].name);
	if (!n)
		snprintf(buf, len, "none");
	return buf;
}
