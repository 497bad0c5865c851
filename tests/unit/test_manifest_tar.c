// SPDX-License-Identifier: MIT
/*
 * lib/manifest_tar.c: archives written by GNU tar in its gnu, pax and ustar
 * formats index into items whose bytes are the members' (read back from the
 * archive by offset); WebDataset keys group members into samples; headers
 * made here cover base-256 sizes; truncated and corrupt archives are refused
 * with a sentence naming the archive and offset, adding nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pinmem_stream.h"
#include "pm_test.h"

static char dir[PATH_MAX - 512];

static void path_in(char *p, size_t len, const char *name)
{
	snprintf(p, len, "%s/%s", dir, name);
}

static void write_file(const char *name, const void *data, size_t n)
{
	char p[PATH_MAX];
	int fd;

	path_in(p, sizeof(p), name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

static void run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	return test_dir_make(dir, sizeof(dir), "tar-test");
}

static int teardown(void **state)
{
	run("rm -rf '%s'", dir);
	return 0;
}

/* Item i's bytes, read from the archive, equal the file src. */
static void item_is(const struct pm_manifest *m, size_t i, const char *src)
{
	char p[PATH_MAX], *want, *got;
	struct pm_item it;
	FILE *f;
	long n;
	int fd;

	assert_int_equal(pm_manifest_item(m, i, &it), 0);
	path_in(p, sizeof(p), src);
	f = fopen(p, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	want = malloc((size_t)n);
	got = malloc((size_t)n);
	assert_int_equal(fread(want, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	assert_int_equal(it.length, (uint64_t)n);
	fd = open(it.path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, (size_t)n, (off_t)it.offset), n);
	close(fd);
	assert_memory_equal(got, want, (size_t)n);
	free(want);
	free(got);
}

/* A WebDataset shard: 3 samples of .jpg + .cls, written in tar format fmt. */
static void shard(const char *fmt, const char *name)
{
	char data[3000];

	run("mkdir -p '%s/ds'", dir);
	for (int k = 0; k < 3; k++) {
		char f[64];

		memset(data, 'a' + k, sizeof(data));
		snprintf(f, sizeof(f), "ds/%06d.jpg", k);
		write_file(f, data, 1000 + (size_t)k * 700);
		snprintf(f, sizeof(f), "ds/%06d.cls", k);
		write_file(f, data, 1 + (size_t)k);
	}
	run("cd '%s' && tar --format=%s -cf %s ds/000000.jpg ds/000000.cls ds/000001.jpg "
	    "ds/000001.cls ds/000002.jpg ds/000002.cls", dir, fmt, name);
}

static void test_formats_and_samples(void **state)
{
	static const char *const fmts[] = { "gnu", "posix", "ustar", "v7" };

	for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		struct pm_manifest *m;
		char p[PATH_MAX], err[512];

		shard(fmts[f], "shard.tar");
		path_in(p, sizeof(p), "shard.tar");
		assert_int_equal(pm_manifest_create(&m), 0);
		assert_int_equal(pm_manifest_add(m, p, 0, 1, false, 0, NULL, 0), 0);	/* sample 0 */
		assert_int_equal(pm_manifest_add_tar(m, p, err, sizeof(err)), 0);
		assert_int_equal(pm_manifest_count(m), 7);
		for (int k = 0; k < 3; k++) {
			char jpg[64], cls[64];

			snprintf(jpg, sizeof(jpg), "ds/%06d.jpg", k);
			snprintf(cls, sizeof(cls), "ds/%06d.cls", k);
			item_is(m, 1 + 2 * (size_t)k, jpg);
			item_is(m, 2 + 2 * (size_t)k, cls);
			/* one sample per key, numbered after the item before */
			assert_int_equal(pm_manifest_sample(m, 1 + 2 * (size_t)k), 1 + k);
			assert_int_equal(pm_manifest_sample(m, 2 + 2 * (size_t)k), 1 + k);
		}
		assert_int_equal(pm_manifest_sample(m, 0), 0);
		assert_int_equal(pm_manifest_sample(m, 7), -ERANGE);
		/* a plain item after the shard is a sample of its own */
		assert_int_equal(pm_manifest_add(m, p, 0, 1, false, 0, NULL, 0), 0);
		assert_int_equal(pm_manifest_sample(m, 7), 4);
		pm_manifest_destroy(m);
	}
}

/* Names longer than 100 bytes: GNU 'L' headers, pax path records, ustar prefixes. */
static void test_long_names(void **state)
{
	static const char *const fmts[] = { "gnu", "posix", "ustar" };
	char sub[300], f[400], data[777];

	memset(data, 'z', sizeof(data));
	/* 3 directories of 60 bytes: over 100 bytes, under ustar's 155 + 100 */
	snprintf(sub, sizeof(sub), "%0*d/%0*d/%0*d", 60, 1, 60, 2, 60, 3);
	run("mkdir -p '%s/%s'", dir, sub);
	snprintf(f, sizeof(f), "%s/sample.bin", sub);
	write_file(f, data, sizeof(data));
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		struct pm_manifest *m;
		char p[PATH_MAX], err[512];

		run("cd '%s' && tar --format=%s -cf long.tar '%s'", dir, fmts[k], f);
		path_in(p, sizeof(p), "long.tar");
		assert_int_equal(pm_manifest_create(&m), 0);
		assert_int_equal(pm_manifest_add_tar(m, p, err, sizeof(err)), 0);
		assert_int_equal(pm_manifest_count(m), 1);	/* directories have no items */
		item_is(m, 0, f);
		pm_manifest_destroy(m);
	}
}

/* len - 1 octal digits and a NUL (v must fit) */
static void put_octal(unsigned char *f, size_t len, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%0*llo", (int)len - 1, (unsigned long long)v);
	memcpy(f, buf, len);
}

/* A ustar header for name and size (base-256 when big256), checksum set. */
static void header(unsigned char *h, const char *name, uint64_t size, bool big256)
{
	unsigned sum = 0;

	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	put_octal(h + 100, 8, 0644);
	put_octal(h + 108, 8, 0);
	put_octal(h + 116, 8, 0);
	if (big256) {
		h[124] = 0x80;
		for (int i = 11; i > 0; i--, size >>= 8)
			h[124 + i] = (unsigned char)size;
	} else {
		put_octal(h + 124, 12, size);
	}
	put_octal(h + 136, 12, 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void test_base256_size(void **state)
{
	unsigned char a[4 * 512] = { 0 };
	struct pm_manifest *m;
	char p[PATH_MAX], err[512];
	struct pm_item it;

	header(a, "x.bin", 600, true);
	memset(a + 512, 'q', 600);
	write_file("b256.tar", a, sizeof(a));
	path_in(p, sizeof(p), "b256.tar");
	assert_int_equal(pm_manifest_create(&m), 0);
	assert_int_equal(pm_manifest_add_tar(m, p, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_count(m), 1);
	assert_int_equal(pm_manifest_item(m, 0, &it), 0);
	assert_int_equal(it.offset, 512);
	assert_int_equal(it.length, 600);
	pm_manifest_destroy(m);
}

/* Refused with the archive and offset named; the manifest is left as it was. */
static void refused(const char *name, const char *want)
{
	struct pm_manifest *m;
	char p[PATH_MAX], err[512] = "";

	path_in(p, sizeof(p), name);
	assert_int_equal(pm_manifest_create(&m), 0);
	assert_int_equal(pm_manifest_add(m, p, 0, 1, false, 0, NULL, 0), 0);
	assert_int_equal(pm_manifest_add_tar(m, p, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want) || !strstr(err, name))
		fail_msg("%s: got '%s', want '%s'", name, err, want);
	assert_int_equal(pm_manifest_count(m), 1);
	assert_int_equal(pm_manifest_npaths(m), 1);
	pm_manifest_destroy(m);
}

static void test_bad_archives(void **state)
{
	unsigned char a[4 * 512] = { 0 };
	char p[PATH_MAX];

	shard("gnu", "good.tar");
	path_in(p, sizeof(p), "good.tar");
	/* cut inside the first member's data (1000 bytes at 512) */
	run("head -c 1000 '%s' > '%s/cut-data.tar'", p, dir);
	refused("cut-data.tar", "header at offset 0: member of 1000 bytes ends past the archive's end (1000 bytes): truncated");
	/* cut inside the second header (at 1536) */
	run("head -c 1600 '%s' > '%s/cut-header.tar'", p, dir);
	refused("cut-header.tar", "header at offset 1536: truncated: the archive ends inside a header");
	/* one flipped byte in the second header's name */
	run("cp '%s' '%s/flip.tar' && printf 'X' | dd of='%s/flip.tar' bs=1 seek=1540 conv=notrunc 2>/dev/null",
	    p, dir, dir);
	refused("flip.tar", "header at offset 1536: checksum mismatch");
	/* not a tar at all */
	run("head -c 2048 /dev/urandom > '%s/random.tar'", dir);
	refused("random.tar", "header at offset 0: checksum mismatch (a corrupt header, or not a tar archive)");
	/* a member claiming more bytes than the archive holds */
	header(a, "big.bin", 1ULL << 32, false);
	write_file("past.tar", a, sizeof(a));
	refused("past.tar", "header at offset 0: member of 4294967296 bytes ends past the archive's end (2048 bytes)");
	/* a size that is not a number */
	header(a, "nan.bin", 10, false);
	memcpy(a + 124, "12x45678901", 11);
	{
		unsigned sum = 0;

		memset(a + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += a[i];
		snprintf((char *)a + 148, 8, "%06o", sum);
	}
	write_file("nan.tar", a, sizeof(a));
	refused("nan.tar", "header at offset 0: size field is not a number");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_formats_and_samples),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_base256_size),
		cmocka_unit_test(test_bad_archives),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
