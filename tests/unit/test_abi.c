// SPDX-License-Identifier: MIT
/*
 * The library ABI (mk/11-abi.mk checks the exported symbols): pm_version(),
 * the reserved room that lets option and stats structs grow (non-zero
 * reserved options are refused, stats leave it zero), and the layout of the
 * public structs pinned, so a change that would break programs built
 * against an older header fails here.  A new option or counter is carved
 * out of `reserved` (shrink the array by what the new field takes); only an
 * incompatible change (with a soname bump, mk/10-lib.mk) edits the numbers.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "pm_test.h"
#include "pinmem_stream.h"

_Static_assert(sizeof(struct pm_stream_opts) == 152, "pm_stream_opts layout changed");
_Static_assert(offsetof(struct pm_stream_opts, start_batch) == 96, "pm_stream_opts moved an option");
_Static_assert(offsetof(struct pm_stream_opts, reserved) == 104, "pm_stream_opts grew outside reserved");
_Static_assert(sizeof(struct pm_stream_stats) == 568, "pm_stream_stats layout changed");
_Static_assert(offsetof(struct pm_stream_stats, reserved) == 472, "pm_stream_stats grew outside reserved");
_Static_assert(offsetof(struct pm_stream_stats, coalesced_reads) == 456, "pm_stream_stats moved a counter");
_Static_assert(offsetof(struct pm_stream_opts, coalesce) == 92, "pm_stream_opts moved an option");
_Static_assert(offsetof(struct pm_stream_stats, populated_bytes) == 448, "pm_stream_stats moved a counter");
_Static_assert(sizeof(struct pm_open_opts) == 80, "pm_open_opts layout changed");
_Static_assert(sizeof(struct pm_buf_opts) == 56, "pm_buf_opts layout changed");
_Static_assert(sizeof(struct pm_batch) == 64, "pm_batch layout changed");
_Static_assert(sizeof(struct pm_batch_item) == 40, "pm_batch_item layout changed");
_Static_assert(sizeof(struct pm_item) == 40, "pm_item layout changed");
_Static_assert(sizeof(struct pm_stream_file) == 32, "pm_stream_file layout changed");

static void test_version(void **state)
{
	assert_string_equal(pm_version(), PINMEM_VERSION);
}

static void test_reserved(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX + 16], buf[4096] = { 1 };
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_manifest *m;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	int fd;

	assert_int_equal(test_dir_make(dir, sizeof(dir), "abi-test"), 0);
	snprintf(path, sizeof(path), "%s/f.bin", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	fake_reset();
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	assert_int_equal(pm_manifest_create(&m), 0);
	assert_int_equal(pm_manifest_add(m, path, 0, sizeof(buf), false, 0, NULL, 0), 0);

	pm_stream_opts_init(&o);
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		assert_int_equal(o.reserved[i], 0);
	o.reserved[5] = 1;	/* an option of a newer header */
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "reserved options must be zero"));
	o.reserved[5] = 0;
	o.coalesce = (enum pm_coalesce)(PM_COALESCE_OFF + 1);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "coalesce"));

	o.coalesce = PM_COALESCE_AUTO;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	while (!pm_stream_next(s, &b) && b)
		pm_stream_release(s, b);
	memset(&st, 0xff, sizeof(st));
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, 1);
	assert_int_equal(st.reserved32, 0);
	for (size_t i = 0; i < sizeof(st.reserved) / sizeof(st.reserved[0]); i++)
		assert_int_equal(st.reserved[i], 0);
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_reserved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
