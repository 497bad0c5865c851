// SPDX-License-Identifier: MIT
/*
 * lib/stream/manifest.c and lib/stream/crc32c.c: the manifest text format line by line,
 * every malformed line (with its line number, leaving the manifest as it
 * was), whole files cut into items, and crc32c against known values.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "crc32c.h"
#include "manifest.h"
#include "alloc_fail.h"

static struct pm_manifest *mk(void)
{
	struct pm_manifest *m;

	assert_int_equal(pm_manifest_create(&m), 0);
	return m;
}

static int parse(struct pm_manifest *m, const char *text, char *err)
{
	return pm_manifest_parse(m, text, strlen(text), "t.txt", "/data", err, 256);
}

static void test_parse_good(void **state)
{
	struct pm_manifest *m = mk();
	struct pm_item it;
	char err[256] = "";
	const char *text =
		"# a comment\n"
		"\n"
		"a.bin 0 100\n"
		"  a.bin\t100 0x64   e3069283  # trailing comment\n"
		"/abs/b\\ c.bin 0x0 7 0xE3069283\r\n"
		"sub/d.bin 18446744073709551 1";	/* no final newline */

	assert_int_equal(parse(m, text, err), 0);
	assert_int_equal(pm_manifest_count(m), 4);
	assert_int_equal(pm_manifest_bytes(m), 100 + 100 + 7 + 1);
	assert_int_equal(pm_manifest_npaths(m), 3);
	assert_int_equal(pm_manifest_item(m, 0, &it), 0);
	assert_string_equal(it.path, "/data/a.bin");
	assert_int_equal(it.offset, 0);
	assert_int_equal(it.length, 100);
	assert_false(it.has_crc32c);
	assert_int_equal(pm_manifest_item(m, 1, &it), 0);
	assert_string_equal(it.path, "/data/a.bin");
	assert_int_equal(it.path_id, 0);
	assert_int_equal(it.offset, 100);
	assert_int_equal(it.length, 100);
	assert_true(it.has_crc32c);
	assert_int_equal(it.crc32c, 0xe3069283);
	assert_int_equal(pm_manifest_item(m, 2, &it), 0);
	assert_string_equal(it.path, "/abs/b c.bin");	/* absolute: kept; escaped space */
	assert_int_equal(it.path_id, 1);
	assert_int_equal(it.crc32c, 0xe3069283);
	assert_int_equal(pm_manifest_item(m, 3, &it), 0);
	assert_string_equal(it.path, "/data/sub/d.bin");
	assert_int_equal(it.offset, 18446744073709551ULL);
	assert_string_equal(pm_manifest_path(m, 2), "/data/sub/d.bin");
	assert_null(pm_manifest_path(m, 3));
	assert_int_equal(pm_manifest_item(m, 4, &it), -ERANGE);
	pm_manifest_destroy(m);
}

/* Every malformed line: -EINVAL, a message with file and line, nothing added. */
static void test_parse_bad_lines(void **state)
{
	static const struct {
		const char *line;
		const char *msg;
	} cases[] = {
		{ "a.bin\n", "t.txt:2: expected 'path offset length [crc32c]', got 1 field" },
		{ "a.bin 0\n", "t.txt:2: expected 'path offset length [crc32c]', got 2 fields" },
		{ "a.bin x 1\n", "t.txt:2: offset 'x' is not a number" },
		{ "a.bin 0 -5\n", "t.txt:2: length '-5' is not a number" },
		{ "a.bin 0 +5\n", "t.txt:2: length '+5' is not a number" },
		/* white space strtoull would skip (\v and \f do not split fields) */
		{ "a.bin \v5 1\n", "t.txt:2: offset '\\x0b5' is not a number" },
		{ "a.bin 0 \f7\n", "t.txt:2: length '\\x0c7' is not a number" },
		{ "a.bin 0 \v-7\n", "t.txt:2: length '\\x0b-7' is not a number" },
		{ "a.bin 0 5k\n", "t.txt:2: length '5k' is not a number" },
		{ "a.bin 0x 5\n", "t.txt:2: offset '0x' is not a number" },
		{ "a.bin 0 99999999999999999999\n", "t.txt:2: length '99999999999999999999' is not a number" },
		{ "a.bin 0 0\n", "t.txt:2: zero-length item" },
		{ "a.bin 9223372036854775807 1\n", "t.txt:2: offset + length does not fit a file offset" },
		{ "a.bin 18446744073709551615 2\n", "t.txt:2: offset + length does not fit a file offset" },
		{ "a.bin 0 1 123\n", "t.txt:2: crc32c '123' is not 8 hex digits" },
		{ "a.bin 0 1 e306928g\n", "t.txt:2: crc32c 'e306928g' is not 8 hex digits" },
		{ "a.bin 0 1 e3069283 extra\n", "t.txt:2: unexpected field 'extra' after 'path offset length [crc32c]'" },
		{ "a.bin\\\n", "t.txt:2: backslash at the end of the line" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pm_manifest *m = mk();
		char text[256], err[256] = "";

		/* a good item first: it must be gone after the failure */
		assert_int_equal(pm_manifest_add(m, "/keep", 0, 10, false, 0, NULL, 0), 0);
		snprintf(text, sizeof(text), "new.bin 0 1\n%s", cases[i].line);
		assert_int_equal(parse(m, text, err), -EINVAL);
		assert_string_equal(err, cases[i].msg);
		assert_int_equal(pm_manifest_count(m), 1);
		assert_int_equal(pm_manifest_bytes(m), 10);
		assert_int_equal(pm_manifest_npaths(m), 1);
		assert_null(pm_manifest_path(m, 1));
		/* and the path table still works after the roll-back */
		assert_int_equal(pm_manifest_add(m, "/keep", 10, 1, false, 0, NULL, 0), 0);
		assert_int_equal(pm_manifest_npaths(m), 1);
		pm_manifest_destroy(m);
	}
}

static void test_parse_empty(void **state)
{
	struct pm_manifest *m = mk();
	char err[256];

	assert_int_equal(parse(m, "# nothing\n\n   \n", err), -EINVAL);
	assert_string_equal(err, "t.txt: no items");
	assert_int_equal(pm_manifest_parse(m, "", 0, NULL, NULL, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "manifest: no items");
	pm_manifest_destroy(m);
}

static void test_parse_nul_and_long(void **state)
{
	struct pm_manifest *m = mk();
	char err[256], *text = malloc(6000);

	assert_int_equal(pm_manifest_parse(m, "a\0b 0 1\n", 8, "t", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "t:1: NUL byte in the line");
	memset(text, 'p', 5000);
	strcpy(text + 5000, " 0 1\n");
	assert_int_equal(pm_manifest_parse(m, text, strlen(text), "t", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "t:1: field longer than"));
	assert_int_equal(pm_manifest_count(m), 0);
	free(text);
	pm_manifest_destroy(m);
}

static void test_add(void **state)
{
	struct pm_manifest *m = mk();
	char err[256];

	assert_int_equal(pm_manifest_add(m, "/x", 5, 0, false, 0, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "/x offset 5: zero-length item");
	assert_int_equal(pm_manifest_add(m, "", 0, 1, false, 0, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "empty path");
	assert_int_equal(pm_manifest_add(m, "/x", UINT64_MAX, 2, false, 0, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(pm_manifest_count(m), 0);
	/* the sum of lengths must not wrap: refused, nothing added */
	assert_int_equal(pm_manifest_add(m, "/big", 0, INT64_MAX, false, 0, NULL, 0), 0);
	assert_int_equal(pm_manifest_add(m, "/big", 0, INT64_MAX, false, 0, NULL, 0), 0);
	assert_int_equal(pm_manifest_add(m, "/big2", 0, 2, false, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "total"));
	assert_int_equal(pm_manifest_count(m), 2);
	assert_int_equal(pm_manifest_npaths(m), 1);
	assert_true(pm_manifest_bytes(m) == 2 * (uint64_t)INT64_MAX);
	pm_manifest_destroy(m);
	m = mk();
	/* many paths: the hash table grows and still finds each */
	for (int i = 0; i < 5000; i++) {
		char p[32];

		snprintf(p, sizeof(p), "/f%d", i % 1000);
		assert_int_equal(pm_manifest_add(m, p, i, 1, false, 0, NULL, 0), 0);
	}
	assert_int_equal(pm_manifest_npaths(m), 1000);
	assert_string_equal(pm_manifest_path(m, 999), "/f999");
	pm_manifest_destroy(m);
}

static char dir[PATH_MAX];

static void path_in(char *p, size_t len, const char *name)
{
	snprintf(p, len, "%s/%s", dir, name);
}

static void write_file(const char *name, const char *data, size_t len)
{
	char p[PATH_MAX + 64];
	int fd;

	path_in(p, sizeof(p), name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/pm-test-manifest.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_load(void **state)
{
	struct pm_manifest *m = mk();
	struct pm_item it;
	char p[PATH_MAX + 64], err[512];

	write_file("m.txt", "d.bin 0 3\n/abs 1 2\n", 19);
	path_in(p, sizeof(p), "m.txt");
	assert_int_equal(pm_manifest_load(m, p, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_item(m, 0, &it), 0);
	path_in(p, sizeof(p), "d.bin");
	assert_string_equal(it.path, p);	/* relative to the manifest's directory */
	assert_int_equal(pm_manifest_item(m, 1, &it), 0);
	assert_string_equal(it.path, "/abs");

	write_file("bad.txt", "d.bin 0 3\n\nd.bin 0\n", 19);
	path_in(p, sizeof(p), "bad.txt");
	assert_int_equal(pm_manifest_load(m, p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad.txt:3: expected"));
	assert_int_equal(pm_manifest_count(m), 2);

	path_in(p, sizeof(p), "missing.txt");
	assert_int_equal(pm_manifest_load(m, p, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "missing.txt: No such file or directory"));
	pm_manifest_destroy(m);
}

/* Each allocation failing in turn: -ENOMEM, "out of memory" said, nothing added. */
static void test_load_out_of_memory(void **state)
{
	struct pm_manifest *m = mk();
	char p[PATH_MAX + 64], *text = malloc(300 * 32);
	size_t len = 0;

	/* 300 items (the item array grows past 256) of 40 paths (the hash grows) */
	for (int i = 0; i < 300; i++)
		len += (size_t)sprintf(text + len, "f%d.bin %d 1\n", i % 40, i);
	write_file("many.txt", text, len);
	path_in(p, sizeof(p), "many.txt");
	assert_int_equal(pm_manifest_add(m, "/keep", 0, 1, false, 0, NULL, 0), 0);
	/* a copy of each path at least */
	assert_true(each_allocation_fails(pm_manifest_load, m, p, "many.txt") > 40);
	assert_int_equal(pm_manifest_count(m), 301);
	pm_manifest_destroy(m);
	free(text);
}

static void test_add_file(void **state)
{
	struct pm_manifest *m = mk();
	struct pm_item it;
	char p[PATH_MAX + 64], err[512], data[10000];

	memset(data, 7, sizeof(data));
	write_file("f.bin", data, sizeof(data));
	path_in(p, sizeof(p), "f.bin");
	assert_int_equal(pm_manifest_add_file(m, p, 4096, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_count(m), 3);
	assert_int_equal(pm_manifest_item(m, 2, &it), 0);
	assert_int_equal(it.offset, 8192);
	assert_int_equal(it.length, 10000 - 8192);
	assert_int_equal(pm_manifest_add_file(m, p, 0, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_count(m), 4);
	assert_int_equal(pm_manifest_item(m, 3, &it), 0);
	assert_int_equal(it.length, 10000);
	assert_int_equal(pm_manifest_npaths(m), 1);

	write_file("empty.bin", "", 0);
	path_in(p, sizeof(p), "empty.bin");
	assert_int_equal(pm_manifest_add_file(m, p, 0, err, sizeof(err)), 0);	/* no items */
	assert_int_equal(pm_manifest_count(m), 4);
	/* a FIFO is refused at once, not waited on for a writer */
	path_in(p, sizeof(p), "fifo");
	unlink(p);
	assert_int_equal(mkfifo(p, 0600), 0);
	alarm(10);
	assert_int_equal(pm_manifest_add_file(m, p, 0, err, sizeof(err)), -EINVAL);
	alarm(0);
	assert_non_null(strstr(err, "fifo: not a regular file"));
	path_in(p, sizeof(p), "nope.bin");
	assert_int_equal(pm_manifest_add_file(m, p, 0, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "nope.bin: No such file or directory"));
	assert_int_equal(pm_manifest_add_file(m, dir, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	path_in(p, sizeof(p), "f.bin/x");
	assert_int_equal(pm_manifest_add_file(m, p, 0, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(pm_manifest_count(m), 4);
	assert_int_equal(pm_manifest_npaths(m), 1);
	pm_manifest_destroy(m);
}

static void test_crc32c(void **state)
{
	unsigned char *buf = malloc(70000);
	uint64_t x = 88172645463325252ull;

	assert_int_equal(pm_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(pm_crc32c_sw(0, "123456789", 9), 0xe3069283);
	assert_int_equal(pm_crc32c(0, "", 0), 0);
	/* 32 zero bytes: a published iSCSI test vector */
	memset(buf, 0, 32);
	assert_int_equal(pm_crc32c(0, buf, 32), 0x8a9136aa);
	memset(buf, 0xff, 32);
	assert_int_equal(pm_crc32c(0, buf, 32), 0x62a8ab43);
	for (size_t i = 0; i < 70000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	/* every alignment and length: the fast path equals the table */
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len < 300; len += 7)
			assert_int_equal(pm_crc32c(0, buf + off, len),
					 pm_crc32c_sw(0, buf + off, len));
	/* continuing a crc over pieces equals one pass */
	assert_int_equal(pm_crc32c(pm_crc32c(0, buf, 12345), buf + 12345, 70000 - 12345),
			 pm_crc32c(0, buf, 70000));
	assert_int_equal(pm_crc32c_sw(pm_crc32c_sw(0, buf, 3), buf + 3, 70000 - 3),
			 pm_crc32c(0, buf, 70000));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_bad_lines),
		cmocka_unit_test(test_parse_empty),
		cmocka_unit_test(test_parse_nul_and_long),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_load_out_of_memory),
		cmocka_unit_test(test_add_file),
		cmocka_unit_test(test_crc32c),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
