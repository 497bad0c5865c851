// SPDX-License-Identifier: MIT
/*
 * lib/reader.c: what a completion means.  Short reads continue where they
 * stopped, end of file before the needed bytes is -ENODATA, O_DIRECT
 * padding past the end of the file is not needed, EAGAIN is retried, other
 * errors fail the read; and the ring comes up with the best setup flags.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <cmocka.h>

#include "reader.h"

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
