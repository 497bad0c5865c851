// SPDX-License-Identifier: MIT
/* lib/uring.c: fixed-buffer iovecs of at most 1 GiB, registration, READ_FIXED past 1 GiB. */
#include <liburing.h>
#include <stdlib.h>
#include <unistd.h>

#include "pinmem.h"
#include "buf.h"
#include "pm_test.h"

/* A buffer description only: pm_buf_iovecs reads ptr and size. */
static struct pm_buf fake_buf(size_t size)
{
	struct pm_buf b;

	memset(&b, 0, sizeof(b));
	b.ptr = (void *)(uintptr_t)(1ULL << 40);
	b.size = size;
	return b;
}

static void splits_at_1gib(void **state)
{
	struct pm_buf b = fake_buf(5 * GiB / 2);
	struct iovec iov[4];

	assert_int_equal(pm_buf_iovecs(&b, 0, iov, 4), 3);
	assert_ptr_equal(iov[0].iov_base, b.ptr);
	assert_int_equal(iov[0].iov_len, GiB);
	assert_ptr_equal(iov[1].iov_base, (uint8_t *)b.ptr + GiB);
	assert_int_equal(iov[1].iov_len, GiB);
	assert_ptr_equal(iov[2].iov_base, (uint8_t *)b.ptr + 2 * GiB);
	assert_int_equal(iov[2].iov_len, GiB / 2);
	/* Asking for the count, or for fewer than needed. */
	assert_int_equal(pm_buf_iovecs(&b, 0, NULL, 0), 3);
	memset(iov, 0, sizeof(iov));
	assert_int_equal(pm_buf_iovecs(&b, 0, iov, 1), 3);
	assert_int_equal(iov[0].iov_len, GiB);
	assert_int_equal(iov[1].iov_len, 0);
	b.size = GiB;
	assert_int_equal(pm_buf_iovecs(&b, 0, iov, 4), 1);
	b.size = 4096;
	assert_int_equal(pm_buf_iovecs(&b, 0, iov, 4), 1);
	assert_int_equal(iov[0].iov_len, 4096);
}

/* With a unit, every iovec holds whole units: no unit straddles two. */
static void whole_units(void **state)
{
	size_t unit = 3 * MiB, off = 0;
	struct pm_buf b = fake_buf(700 * unit);
	struct iovec iov[4];
	int n, i;

	n = pm_buf_iovecs(&b, unit, iov, 4);
	assert_int_equal(n, 3);
	for (i = 0; i < n; i++) {
		assert_ptr_equal(iov[i].iov_base, (uint8_t *)b.ptr + off);
		assert_true(iov[i].iov_len <= GiB);
		assert_int_equal(iov[i].iov_len % unit, 0);
		off += iov[i].iov_len;
	}
	assert_int_equal(off, b.size);
	assert_int_equal(iov[0].iov_len, 341 * unit);
	assert_int_equal(pm_buf_iovecs(&b, GiB, iov, 4), 3);
	assert_int_equal(pm_buf_iovecs(&b, GiB + 1, iov, 4), -EINVAL);
	assert_int_equal(pm_buf_iovecs(&b, 0, NULL, 2), -EINVAL);
	assert_int_equal(pm_buf_iovecs(NULL, 0, iov, 2), -EINVAL);
}

/* A real buffer over 1 GiB: registered as two fixed buffers, READ_FIXED into the second. */
static void register_over_1gib(void **state)
{
	struct pm_open_opts oo = { .flags = PM_OPEN_NO_MODULE, .backend = PM_BACKEND_NONE };
	struct pm_buf_opts bo = { .pin = PM_PIN_NONE, .pages = PM_PAGES_THP };
	struct io_uring ring, other;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	uint8_t want[4096], *dst;
	struct pm_ctx *ctx;
	struct pm_buf *b;
	int fd;

	assert_int_equal(pm_open(&ctx, &oo), 0);
	assert_int_equal(pm_buf_alloc(ctx, GiB + 4 * MiB, &bo, &b), 0);
	assert_int_equal(io_uring_queue_init(4, &ring, 0), 0);
	assert_int_equal(io_uring_queue_init(4, &other, 0), 0);
	assert_int_equal(pm_buf_register_uring(b, &ring, 0), 0);

	fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, want, sizeof(want), 0), sizeof(want));
	dst = (uint8_t *)pm_buf_ptr(b) + GiB + 8192;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, fd, dst, sizeof(want), 0, 1);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_int_equal(cqe->res, sizeof(want));
	io_uring_cqe_seen(&ring, cqe);
	assert_memory_equal(dst, want, sizeof(want));
	/* Fixed buffer 0 ends at 1 GiB: a read crossing into buffer 1 is refused. */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, fd, (uint8_t *)pm_buf_ptr(b) + GiB - 2048,
				 sizeof(want), 0, 0);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_int_equal(cqe->res, -EFAULT);
	io_uring_cqe_seen(&ring, cqe);
	close(fd);

	/* One set of fixed buffers per ring. */
	assert_int_equal(pm_buf_register_uring(b, &ring, 0), -EBUSY);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "already has fixed buffers"));
	assert_int_equal(pm_buf_register_uring(b, &ring, GiB + 1), -EINVAL);
	/* Still registered: free refuses, unregister with the wrong ring refuses. */
	assert_int_equal(pm_buf_free(ctx, b), -EBUSY);
	assert_int_equal(pm_buf_unregister_uring(b, &other), -EINVAL);
	assert_int_equal(pm_buf_unregister_uring(b, &ring), 0);
	assert_int_equal(pm_buf_unregister_uring(b, &ring), -EINVAL);
	/* Two rings at once, then pm_close with one still registered frees it anyway. */
	assert_int_equal(pm_buf_register_uring(b, &ring, 2 * MiB), 0);
	assert_int_equal(pm_buf_register_uring(b, &other, 0), 0);
	assert_int_equal(pm_buf_unregister_uring(b, &ring), 0);
	pm_close(ctx);
	io_uring_queue_exit(&other);
	io_uring_queue_exit(&ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(splits_at_1gib),
		cmocka_unit_test(whole_units),
		cmocka_unit_test(register_over_1gib),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
