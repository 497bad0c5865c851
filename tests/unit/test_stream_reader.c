// SPDX-License-Identifier: MIT
/*
 * lib/stream/reader.c: what a completion means.  Short reads continue where they
 * stopped, end of file before the needed bytes is -ENODATA, O_DIRECT
 * padding past the end of the file is not needed, EAGAIN is retried, other
 * errors fail the read; the ring comes up with the best setup flags the
 * kernel takes; and a stream still delivers the right bytes when the kernel
 * refuses flags, registered files or registered buffers (this program stands
 * in for those liburing calls and passes the rest to the real ones).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "pinmem_stream.h"
#include "reader.h"

/* --- stand-ins for liburing calls, refusing on request --- */

static unsigned int refuse_flags;	/* setup flags answered with -EINVAL */
static int refuse_init;			/* io_uring_queue_init_params result when set */
static int refuse_files, refuse_buffers;
static int buffers_first_ok;	/* registrations let through before refuse_buffers applies */
static unsigned int init_calls;

int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
			       struct io_uring_params *p)
{
	int (*real)(unsigned, struct io_uring *, struct io_uring_params *) =
		(int (*)(unsigned, struct io_uring *, struct io_uring_params *))
		dlsym(RTLD_NEXT, "io_uring_queue_init_params");

	__atomic_fetch_add(&init_calls, 1, __ATOMIC_SEQ_CST);
	if (refuse_init)
		return refuse_init;
	if (p->flags & refuse_flags)
		return -EINVAL;
	return real(entries, ring, p);
}

int io_uring_register_files(struct io_uring *ring, const int *files, unsigned nr)
{
	int (*real)(struct io_uring *, const int *, unsigned) =
		(int (*)(struct io_uring *, const int *, unsigned))
		dlsym(RTLD_NEXT, "io_uring_register_files");

	return refuse_files ? refuse_files : real(ring, files, nr);
}

int io_uring_register_buffers(struct io_uring *ring, const struct iovec *iov, unsigned nr)
{
	int (*real)(struct io_uring *, const struct iovec *, unsigned) =
		(int (*)(struct io_uring *, const struct iovec *, unsigned))
		dlsym(RTLD_NEXT, "io_uring_register_buffers");

	/* lanes register at the same time */
	if (__atomic_load_n(&buffers_first_ok, __ATOMIC_SEQ_CST) > 0 &&
	    __atomic_fetch_sub(&buffers_first_ok, 1, __ATOMIC_SEQ_CST) > 0)
		return real(ring, iov, nr);
	return refuse_buffers ? refuse_buffers : real(ring, iov, nr);
}

static unsigned int submit_delay_us;	/* each submit of a reader lane sleeps this long */
static unsigned long lanes_submitted;	/* bit N: lane pinmem-readN submitted */

int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int (*real)(struct io_uring *, unsigned) =
		(int (*)(struct io_uring *, unsigned))dlsym(RTLD_NEXT, "io_uring_submit_and_wait");
	char name[16];
	unsigned int lane;

	if (submit_delay_us && !pthread_getname_np(pthread_self(), name, sizeof(name)) &&
	    sscanf(name, "pinmem-read%u", &lane) == 1 && lane < 64) {
		__atomic_fetch_or(&lanes_submitted, 1UL << lane, __ATOMIC_SEQ_CST);
		usleep(submit_delay_us);
	}
	return real(ring, wait_nr);
}

static struct pm_read rd_of(uint32_t len, uint32_t need, uint32_t align)
{
	struct pm_read rd;

	memset(&rd, 0, sizeof(rd));
	rd.len = len;
	rd.need = need;
	rd.align = align;
	return rd;
}

static void test_full_and_short(void **state)
{
	struct pm_read rd = rd_of(8192, 8192, 0);

	assert_int_equal(pm_read_complete(&rd, 8192), 0);
	assert_int_equal(rd.done, 8192);

	/* buffered short reads: resubmit the rest until all of it arrived */
	rd = rd_of(10000, 10000, 0);
	assert_int_equal(pm_read_complete(&rd, 3000), 1);
	assert_int_equal(rd.done, 3000);
	assert_int_equal(pm_read_complete(&rd, 1), 1);
	assert_int_equal(rd.done, 3001);
	assert_int_equal(pm_read_complete(&rd, 6999), 0);
	assert_int_equal(rd.resubmits, 2);
	/* ... and end of file before the end is an error */
	rd = rd_of(10000, 10000, 0);
	assert_int_equal(pm_read_complete(&rd, 4000), 1);
	assert_int_equal(pm_read_complete(&rd, 0), -ENODATA);
	assert_int_equal(rd.done, 4000);
}

static void test_direct(void **state)
{
	/* the aligned superset ends past end of file: the item's bytes are enough */
	struct pm_read rd = rd_of(8192, 5000, 4096);

	assert_int_equal(pm_read_complete(&rd, 5000), 0);
	rd = rd_of(8192, 5000, 4096);
	assert_int_equal(pm_read_complete(&rd, 4096), 1);	/* aligned short: go on */
	assert_int_equal(pm_read_complete(&rd, 904), 0);
	/* an unaligned short O_DIRECT read is end of file: not resubmitted */
	rd = rd_of(8192, 8192, 4096);
	assert_int_equal(pm_read_complete(&rd, 5000), -ENODATA);
	rd = rd_of(8192, 8192, 512);
	assert_int_equal(pm_read_complete(&rd, 4608), 1);
	assert_int_equal(pm_read_complete(&rd, 0), -ENODATA);
}

static void test_errors(void **state)
{
	struct pm_read rd = rd_of(4096, 4096, 0);

	assert_int_equal(pm_read_complete(&rd, -EAGAIN), 1);
	assert_int_equal(pm_read_complete(&rd, -EINTR), 1);
	assert_int_equal(rd.done, 0);
	assert_int_equal(rd.resubmits, 2);
	assert_int_equal(pm_read_complete(&rd, -EIO), -EIO);
	assert_int_equal(pm_read_complete(&rd, -EFAULT), -EFAULT);
	/* zero bytes when nothing more is needed is simply done */
	rd = rd_of(4096, 0, 0);
	assert_int_equal(pm_read_complete(&rd, 0), 0);
}

static unsigned int ring_flags_with(unsigned int refused)
{
	struct pm_reader r;
	unsigned int flags;

	refuse_flags = refused;
	assert_int_equal(pm_reader_init(&r, 8), 0);
	flags = r.flags;
	pm_reader_exit(&r);
	refuse_flags = 0;
	return flags;
}

/* Each flag the kernel refuses is dropped, best combination first. */
static void test_ring_fallback(void **state)
{
	struct pm_reader r;

	assert_int_equal(ring_flags_with(IORING_SETUP_DEFER_TASKRUN),
			 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN);
	assert_int_equal(ring_flags_with(IORING_SETUP_SINGLE_ISSUER),
			 IORING_SETUP_COOP_TASKRUN);
	assert_int_equal(ring_flags_with(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN), 0);
	init_calls = 0;
	refuse_init = -ENOMEM;		/* not a flag problem: no retry */
	assert_int_equal(pm_reader_init(&r, 8), -ENOMEM);
	assert_int_equal(init_calls, 1);
	assert_false(r.ring_ok);
	refuse_init = 0;
}

/* Refused registrations: plain descriptors and plain reads, same bytes. */
static void test_registration_fallback(void **state)
{
	char exe[PATH_MAX], path[PATH_MAX + 32], err[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	static unsigned char data[300000];
	struct pm_open_opts oo = { .backend = PM_BACKEND_HOST };
	struct pm_stream_stats st;
	struct pm_stream_opts o;
	struct pm_manifest *m;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	int fd;

	assert_true(n > 0);
	exe[n] = 0;
	snprintf(path, sizeof(path), "%s/reader-test.%d", dirname(exe), (int)getpid());
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 131 + (i >> 9));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	close(fd);
	assert_int_equal(pm_open(&ctx, &oo), 0);
	assert_int_equal(pm_manifest_create(&m), 0);
	assert_int_equal(pm_manifest_add_file(m, path, 7777, err, sizeof(err)), 0);
	pm_stream_opts_init(&o);
	o.batch_bytes = 64 << 10;
	for (int k = 0; k < 4; k++) {
		uint64_t bytes = 0;

		refuse_files = k == 0 || k == 2 ? -EMFILE : 0;
		refuse_buffers = k >= 1 ? -ENOMEM : 0;
		/* 3: two lanes, one registers its buffer, the other falls back */
		o.readers = k == 3 ? 2 : 0;
		buffers_first_ok = k == 3;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
		while (!pm_stream_next(s, &b) && b) {
			for (uint32_t i = 0; i < b->nitems; i++) {
				assert_memory_equal((char *)b->host + b->items[i].slot_offset,
						    data + b->items[i].file_offset,
						    b->items[i].length);
				bytes += b->items[i].length;
			}
			pm_stream_release(s, b);
		}
		assert_int_equal(bytes, sizeof(data));
		assert_int_equal(pm_stream_stats(s, &st), 0);
		print_message("fallback %d: %s\n", k, st.ring_note);
		assert_true(!refuse_files ||
			    strstr(st.ring_note, "plain file descriptors: registering files failed (Too many open files)"));
		assert_true(!refuse_buffers ||
			    strstr(st.ring_note, "plain reads: registering buffers failed (Cannot allocate memory)"));
		if (k == 3) {
			const char *r = strstr(st.ring_note, "reader ");

			assert_non_null(r);	/* which lane registered first is a race */
			assert_true(!strncmp(r, "reader 0: plain reads", 21) ||
				    !strncmp(r, "reader 1: plain reads", 21));
			assert_null(strstr(r + 1, "reader "));
		}
		pm_stream_destroy(s);
	}
	refuse_files = refuse_buffers = 0;
	pm_manifest_destroy(m);
	pm_close(ctx);
	unlink(path);
}

/* A file of n bytes next to the test binary; its path in path. */
static void data_file(char *path, size_t len, const unsigned char *data, size_t n)
{
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int fd;

	assert_true(k > 0);
	exe[k] = 0;
	snprintf(path, len, "%s/lanes-test.%d", dirname(exe), (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

/*
 * Every lane reads from the start, before the consumer releases anything:
 * each lane's submit takes 20 ms here, so one lane alone would leave the
 * other idle until the first release.  And with prefetch below the slots,
 * a consumer that asks for the next batch while holding one is answered
 * (the lane held back by prefetch is woken when a batch is handed over).
 */
static void test_lanes_start_together(void **state)
{
	static unsigned char data[8 << 16];
	char path[PATH_MAX + 32];
	struct pm_open_opts oo = { .backend = PM_BACKEND_NONE };
	struct pm_stream_opts o;
	struct pm_manifest *m;
	struct pm_stream *s;
	struct pm_batch *b[8], *held;
	struct pm_ctx *ctx;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 3);
	data_file(path, sizeof(path), data, sizeof(data));
	assert_int_equal(pm_open(&ctx, &oo), 0);
	assert_int_equal(pm_manifest_create(&m), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pm_manifest_add(m, path, (uint64_t)i << 16, 1 << 16, false, 0,
						 NULL, 0), 0);
	pm_stream_opts_init(&o);
	o.readers = 2;
	o.slots = 8;
	o.batch_items = 1;
	o.direct = PM_DIRECT_OFF;
	lanes_submitted = 0;
	submit_delay_us = 20000;
	alarm(30);	/* a lane left asleep hangs the 5th next: fail instead */
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(pm_stream_next(s, &b[i]), 0);
		assert_non_null(b[i]);
		assert_memory_equal(b[i]->host, data + (b[i]->items[0].index << 16), 1 << 16);
	}
	submit_delay_us = 0;
	assert_int_equal(__atomic_load_n(&lanes_submitted, __ATOMIC_SEQ_CST), 3);
	for (int i = 0; i < 8; i++)
		pm_stream_release(s, b[i]);
	pm_stream_destroy(s);

	/* prefetch 1: hold a batch, ask for the next (hung before: nothing woke the lanes) */
	o.prefetch = 1;
	for (uint32_t readers = 1; readers <= 2; readers++) {
		o.readers = readers;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
		assert_int_equal(pm_stream_next(s, &held), 0);
		for (int i = 1; i < 8; i++) {
			assert_int_equal(pm_stream_next(s, &b[0]), 0);
			assert_non_null(b[0]);
			assert_int_equal(b[0]->seq, i);
			assert_int_equal(pm_stream_release(s, held), 0);
			held = b[0];
		}
		assert_int_equal(pm_stream_release(s, held), 0);
		assert_int_equal(pm_stream_next(s, &b[0]), 0);
		assert_null(b[0]);
		pm_stream_destroy(s);
	}
	alarm(0);
	pm_manifest_destroy(m);
	pm_close(ctx);
	unlink(path);
}

static void test_ring(void **state)
{
	struct pm_reader r;
	struct utsname u;
	char names[64];
	int major, minor;

	assert_int_equal(pm_reader_init(&r, 8), 0);
	assert_true(r.ring_ok);
	pm_reader_flag_names(r.flags, names, sizeof(names));
	print_message("io_uring setup: %s\n", names);
	/* 6.1 and later have both; the fallbacks serve older kernels */
	assert_int_equal(uname(&u), 0);
	if (sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
	    (major > 6 || (major == 6 && minor >= 1)))
		assert_string_equal(names, "SINGLE_ISSUER|DEFER_TASKRUN");
	else
		assert_true(names[0]);
	pm_reader_exit(&r);
	assert_false(r.ring_ok);
	pm_reader_flag_names(0, names, sizeof(names));
	assert_string_equal(names, "none");
	pm_reader_flag_names(1U << 8, names, sizeof(names));
	assert_string_equal(names, "COOP_TASKRUN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_and_short),
		cmocka_unit_test(test_direct),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_ring_fallback),
		cmocka_unit_test(test_registration_fallback),
		cmocka_unit_test(test_lanes_start_together),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
