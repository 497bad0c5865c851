// SPDX-License-Identifier: MIT
/*
 * lib/stream/manifest_tar.c: archives written by GNU tar in its gnu, pax and ustar
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
#include "alloc_fail.h"
#include "tar_test.h"

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
	resum(a);
	write_file("nan.tar", a, sizeof(a));
	refused("nan.tar", "header at offset 0: size field is not a number");
}

/* An archive built header by header, each 512-byte aligned. */
struct ar {
	unsigned char b[40 * 512];
	size_t n;
};

/* A header of type t whose size field says size (no data added). */
static void put_header(struct ar *a, const char *name, char t, uint64_t size)
{
	assert_true(a->n + 512 <= sizeof(a->b));
	header(a->b + a->n, name, size, false);
	a->b[a->n + 156] = (unsigned char)t;
	resum(a->b + a->n);
	a->n += 512;
}

static void put_data(struct ar *a, const void *data, size_t n)
{
	assert_true(a->n + (n + 511) / 512 * 512 <= sizeof(a->b));
	memcpy(a->b + a->n, data, n);
	a->n += (n + 511) / 512 * 512;
}

/* A member of type t with its data. */
static void put(struct ar *a, const char *name, char t, const char *data)
{
	put_header(a, name, t, strlen(data));
	put_data(a, data, strlen(data));
}

/* The two zero blocks that end an archive, and the file named name. */
static void put_end(struct ar *a, const char *name)
{
	a->n += 1024;
	assert_true(a->n <= sizeof(a->b));
	write_file(name, a->b, a->n);
}

/* Archive name indexes; returns the manifest (the caller destroys it). */
static struct pm_manifest *indexed(const char *name)
{
	struct pm_manifest *m;
	char p[PATH_MAX], err[512] = "";

	path_in(p, sizeof(p), name);
	assert_int_equal(pm_manifest_create(&m), 0);
	if (pm_manifest_add_tar(m, p, err, sizeof(err)))
		fail_msg("%s: %s", name, err);
	return m;
}

static void item_at(const struct pm_manifest *m, size_t i, uint64_t off, uint64_t len)
{
	struct pm_item it;

	assert_int_equal(pm_manifest_item(m, i, &it), 0);
	assert_int_equal(it.offset, off);
	assert_int_equal(it.length, len);
}

/* GNU 'S' and pax GNU.sparse.* (0.0, 0.1, 1.0) members: data is a map, not the file. */
static void test_sparse_refused(void **state)
{
	static const char *const keys[] = {
		"21 GNU.sparse.size=9\n",				/* 0.0 */
		"26 GNU.sparse.map=0,4,8,1\n",			/* 0.1 */
		"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n",	/* 1.0 */
	};
	struct ar a = { .n = 0 };

	put(&a, "000000.jpg", '0', "good");
	put(&a, "000001.bin", 'S', "HEAD");
	put_end(&a, "sparse-S.tar");
	refused("sparse-S.tar", "header at offset 1024: sparse member (GNU type 'S') not supported");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		a.n = 0;
		memset(a.b, 0, sizeof(a.b));
		put(&a, "000000.jpg", '0', "good");
		put(&a, "PaxHeaders/000001.bin", 'x', keys[k]);
		put(&a, "GNUSparseFile.0/000001.bin", '0', "\x31\n0\n4\nHEAD");
		put_end(&a, "sparse-pax.tar");
		refused("sparse-pax.tar", "header at offset 1024: sparse member (pax GNU.sparse keys) not supported");
	}
}

/* Directories and hard links have no data whatever their size field says. */
static void test_size_by_type(void **state)
{
	static const char types[] = "15";
	struct pm_manifest *m;
	struct ar a;

	for (int k = 0; types[k]; k++) {
		memset(&a, 0, sizeof(a));
		put_header(&a, "dir/", types[k], 1024);	/* its "data": the next two headers */
		put(&a, "000001.jpg", '0', "12345");
		put(&a, "000001.cls", '0', "7");
		put_end(&a, "typed.tar");
		m = indexed("typed.tar");
		assert_int_equal(pm_manifest_count(m), 2);
		item_at(m, 0, 1024, 5);
		item_at(m, 1, 2048, 1);
		pm_manifest_destroy(m);
		/* the last member: not "past the archive's end" */
		memset(&a, 0, sizeof(a));
		put(&a, "000001.jpg", '0', "12345");
		put_header(&a, "dir/", types[k], 1ULL << 30);
		put_end(&a, "typed-last.tar");
		m = indexed("typed-last.tar");
		assert_int_equal(pm_manifest_count(m), 1);
		pm_manifest_destroy(m);
	}
	/* symlinks, devices, FIFOs with data: GNU tar skips it, tarfile does not */
	for (const char *t = "2346"; *t; t++) {
		char want[64];

		memset(&a, 0, sizeof(a));
		put(&a, "000001.jpg", '0', "12345");
		put_header(&a, "odd", *t, 512);
		put(&a, "000001.cls", '0', "7");
		put_end(&a, "odd.tar");
		snprintf(want, sizeof(want), "header at offset 1024: type '%c' member with a size of 512", *t);
		refused("odd.tar", want);
	}
}

/* Sample of item i equals that of item j (want true) or not. */
static void same_sample(const struct pm_manifest *m, size_t i, size_t j, bool want)
{
	assert_int_equal(pm_manifest_sample(m, i) == pm_manifest_sample(m, j), want);
}

/*
 * An extension header (a long name, a pax path or size) with no member
 * after it, the archive cut there or ended by zero blocks: truncated, never
 * an archive that quietly has fewer members.
 */
static void test_extension_without_member(void **state)
{
	struct ar a = { .n = 0 };

	put(&a, "ok.bin", '0', "data");
	put(&a, "PaxHeaders/1", 'x', "14 path=x.cls\n");
	write_file("pax-cut.tar", a.b, a.n);
	refused("pax-cut.tar", "header at offset 1024: truncated: the archive ends before the member this header describes (2048 bytes)");
	put_end(&a, "pax-end.tar");
	refused("pax-end.tar", "header at offset 1024: the archive ends (a zero block at offset 2048) before the member this header describes");
	a.n = 1024;
	put(&a, "././@LongLink", 'L', "a/long/name.jpg");
	write_file("long-cut.tar", a.b, a.n);
	refused("long-cut.tar", "header at offset 1024: truncated");
}

/*
 * WebDataset's grouping: a sample is consecutive members of one key; a
 * repeated field starts a new one (group_by_keys); fields are the name
 * after the key's dot, lower-cased; a name without a dot is all key.
 */
static void test_sample_fields(void **state)
{
	struct ar a = { .n = 0 };
	struct pm_manifest *m;

	put(&a, "d/000001.Input.NPY", '0', "in1");
	put(&a, "d/000001.label.txt", '0', "1");
	put(&a, "d/000001.label.txt", '0', "1 again");	/* repeated: a new sample */
	put(&a, "d/000002.input.npy", '0', "in2");
	put(&a, "d/README", '0', "no dot");
	put(&a, "e.x/000002.input.npy", '0', "in3");	/* another key: the dot in the directory is not one */
	put_end(&a, "fields.tar");
	m = indexed("fields.tar");
	assert_int_equal(pm_manifest_count(m), 6);
	assert_string_equal(pm_manifest_field(m, 0), "input.npy");
	assert_string_equal(pm_manifest_field(m, 1), "label.txt");
	assert_string_equal(pm_manifest_field(m, 2), "label.txt");
	assert_string_equal(pm_manifest_field(m, 4), "");
	assert_string_equal(pm_manifest_field(m, 5), "input.npy");
	same_sample(m, 0, 1, true);
	same_sample(m, 1, 2, false);
	same_sample(m, 2, 3, false);
	same_sample(m, 3, 4, false);
	same_sample(m, 4, 5, false);
	assert_int_equal(pm_manifest_sample(m, 5), 4);
	pm_manifest_destroy(m);
}

/* An empty member of a new key ends the sample before it (webdataset). */
static void test_empty_member_ends_sample(void **state)
{
	struct ar a = { .n = 0 };
	struct pm_manifest *m;

	put(&a, "000002.jpg", '0', "jpg");
	put(&a, "e.txt", '0', "");		/* no item, but a new key */
	put(&a, "000002.cls", '0', "7");
	put(&a, "000003.jpg", '0', "jpg");
	put(&a, "000003.txt", '0', "");	/* the same key: the sample goes on */
	put(&a, "000003.cls", '0', "8");
	put_end(&a, "empty.tar");
	m = indexed("empty.tar");
	assert_int_equal(pm_manifest_count(m), 4);
	same_sample(m, 0, 1, false);
	same_sample(m, 2, 3, true);
	pm_manifest_destroy(m);
}

/*
 * A tar that is no WebDataset, whose names after the first dot all differ
 * (app.N.log), indexes with a field per member (4,096 were once the most);
 * a WebDataset added to the same manifest after it still gets its fields.
 */
static void test_many_fields(void **state)
{
	enum { N = 4200 };
	size_t sz = (size_t)(N + 4) * 1024;
	unsigned char *b = calloc(1, sz);
	struct ar a = { .n = 0 };
	struct pm_manifest *m;
	char p[PATH_MAX], err[512] = "", name[32];
	size_t n = 0;
	FILE *fp;

	assert_non_null(b);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "app.%d.log", i);
		header(b + n, name, 1, false);
		n += 512;
		b[n] = 'x';
		n += 512;
	}
	n += 1024;
	path_in(p, sizeof(p), "many.tar");
	fp = fopen(p, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(b, 1, n, fp), n);
	fclose(fp);
	free(b);
	m = indexed("many.tar");
	assert_int_equal(pm_manifest_count(m), N);
	assert_string_equal(pm_manifest_field(m, 0), "0.log");
	assert_string_equal(pm_manifest_field(m, N - 1), "4199.log");
	put(&a, "000001.jpg", '0', "jpg");
	put(&a, "000001.cls", '0', "1");
	put_end(&a, "wds.tar");
	path_in(p, sizeof(p), "wds.tar");
	if (pm_manifest_add_tar(m, p, err, sizeof(err)))
		fail_msg("wds.tar after many.tar: %s", err);
	assert_int_equal(pm_manifest_count(m), N + 2);
	assert_string_equal(pm_manifest_field(m, N), "jpg");
	assert_string_equal(pm_manifest_field(m, N + 1), "cls");
	same_sample(m, N, N + 1, true);
	pm_manifest_destroy(m);
}

/*
 * A pax size= and a pending long name belong to the next member header alone:
 * not to an 'L', 'K', 'x' or 'g' header between, and those do not drop them.
 */
static void test_extension_headers(void **state)
{
	char lname[200], hname[101];
	struct pm_manifest *m;
	struct ar a;

	/* two 'x' in a row, the first with size=, then a 'g' */
	memset(&a, 0, sizeof(a));
	put(&a, "PaxHeaders/1", 'x', "10 size=5\n");
	put(&a, "PaxHeaders/2", 'x', "29 comment=second pax header\n");
	put(&a, "GlobalHead/3", 'g', "20 comment=a global\n");
	put_header(&a, "000001.jpg", '0', 0);	/* 0: the size is pax's */
	put_data(&a, "12345", 5);
	put_end(&a, "xx.tar");
	m = indexed("xx.tar");
	assert_int_equal(pm_manifest_count(m), 1);
	item_at(m, 0, 7 * 512, 5);
	pm_manifest_destroy(m);

	/* 'x' with size= before an 'L': the long name keeps its own size */
	snprintf(lname, sizeof(lname), "d/%0150d.jpg", 1);
	memset(&a, 0, sizeof(a));
	put(&a, "PaxHeaders/1", 'x', "10 size=3\n");
	put(&a, "././@LongLink", 'L', lname);
	put_header(&a, "short", '0', 0);
	put_data(&a, "abc", 3);
	put_end(&a, "xL.tar");
	m = indexed("xL.tar");
	assert_int_equal(pm_manifest_count(m), 1);
	item_at(m, 0, 5 * 512, 3);
	pm_manifest_destroy(m);

	/*
	 * 'L' then an 'x' without path=, and 'L' then 'K': the long names
	 * (keys ...A and ...B) stand, not the 100 bytes both headers share.
	 */
	memset(&a, 0, sizeof(a));
	snprintf(lname, sizeof(lname), "d/%0120dA.jpg", 0);
	snprintf(hname, sizeof(hname), "%.99s", lname);	/* what both headers hold */
	put(&a, "././@LongLink", 'L', lname);
	put(&a, "PaxHeaders/1", 'x', "13 mtime=1.5\n");
	put(&a, hname, '0', "AAAA");
	snprintf(lname, sizeof(lname), "d/%0120dB.jpg", 0);
	put(&a, "././@LongLink", 'L', lname);
	put(&a, "././@LongLink", 'K', "some/link/target");
	put(&a, hname, '0', "BBBB");
	snprintf(lname, sizeof(lname), "d/%0120dB.cls", 0);
	put(&a, "././@LongLink", 'L', lname);
	put(&a, hname, '0', "7");
	put_end(&a, "lx.tar");
	m = indexed("lx.tar");
	assert_int_equal(pm_manifest_count(m), 3);
	same_sample(m, 0, 1, false);
	same_sample(m, 1, 2, true);
	pm_manifest_destroy(m);
}

/* Member paths over the limit are refused alike from 'L' and pax path=, not cut. */
static void test_long_name_limit(void **state)
{
	char *rec = malloc(6000), *name = malloc(5001);
	struct ar *a = calloc(1, sizeof(*a));

	memset(name, 'n', 5000);
	name[5000] = 0;
	put(a, "././@LongLink", 'L', name);
	put(a, "short.jpg", '0', "x");
	put_end(a, "L5000.tar");
	refused("L5000.tar", "header at offset 0: GNU long name of 5000 bytes is too long (at most 4095)");
	memset(a, 0, sizeof(*a));
	snprintf(rec, 6000, "5011 path=%s\n", name);
	put(a, "PaxHeaders/1", 'x', rec);
	put(a, "short.jpg", '0', "x");
	put_end(a, "pax5000.tar");
	refused("pax5000.tar", "header at offset 0: pax path of 5000 bytes is too long (at most 4095)");
	free(a);
	free(rec);
	free(name);
}

/* A pax path= with a NUL inside would be cut there, and join another sample: refused. */
static void test_pax_path_nul(void **state)
{
	static const char rec[] = "20 path=a.jpg\0b.cls\n";
	struct ar *a = calloc(1, sizeof(*a));

	put_header(a, "PaxHeaders/1", 'x', sizeof(rec) - 1);
	put_data(a, rec, sizeof(rec) - 1);
	put(a, "short.jpg", '0', "x");
	put_end(a, "paxnul.tar");
	refused("paxnul.tar", "header at offset 0: pax path holds a NUL byte");
	free(a);
}

/* GNU headers (magic "ustar  \0") keep atime and ctime where POSIX has the prefix. */
static void test_prefix_posix_only(void **state)
{
	struct pm_manifest *m;
	struct ar a;

	memset(&a, 0, sizeof(a));
	put(&a, "000001.jpg", '0', "J");
	put(&a, "000001.cls", '0', "C");
	for (size_t h = 0; h < 2 * 1024; h += 1024) {
		memcpy(a.b + h + 257, "ustar  ", 8);
		put_octal(a.b + h + 345, 12, 014567123456 + h);	/* atime */
		put_octal(a.b + h + 357, 12, 014567123457);	/* ctime */
		resum(a.b + h);
	}
	/* POSIX: "p" + "000002.jpg" is one sample with "p/000002.cls" */
	put(&a, "000002.jpg", '0', "J");
	memcpy(a.b + a.n - 1024 + 345, "p", 2);
	resum(a.b + a.n - 1024);
	put(&a, "p/000002.cls", '0', "C");
	put_end(&a, "gnu-atime.tar");
	m = indexed("gnu-atime.tar");
	assert_int_equal(pm_manifest_count(m), 4);
	same_sample(m, 0, 1, true);
	same_sample(m, 1, 2, false);
	same_sample(m, 2, 3, true);
	pm_manifest_destroy(m);
}

/* One zero block then more headers is damage; at the end it is tolerated. */
static void test_lone_zero_block(void **state)
{
	struct pm_manifest *m;
	struct ar a;

	memset(&a, 0, sizeof(a));
	put(&a, "000001.jpg", '0', "1111");
	a.n += 512;
	put(&a, "000001.cls", '0', "2");
	put_end(&a, "lonezero.tar");
	refused("lonezero.tar", "zero block at offset 1024 followed by more members: the archive is damaged");
	/* a lone zero block as the archive's last block */
	memset(&a, 0, sizeof(a));
	put(&a, "000001.jpg", '0', "1111");
	a.n += 512;
	write_file("zero-at-end.tar", a.b, a.n);
	m = indexed("zero-at-end.tar");
	assert_int_equal(pm_manifest_count(m), 1);
	pm_manifest_destroy(m);
	/* two zero blocks end it, whatever follows */
	memset(&a, 0, sizeof(a));
	put(&a, "000001.jpg", '0', "1111");
	a.n += 1024;
	memset(a.b + a.n, 'j', 512);
	a.n += 512;
	write_file("junk-after-end.tar", a.b, a.n);
	m = indexed("junk-after-end.tar");
	assert_int_equal(pm_manifest_count(m), 1);
	pm_manifest_destroy(m);
}

/* Each allocation failing in turn: -ENOMEM, "out of memory" said, nothing added. */
static void test_out_of_memory(void **state)
{
	struct ar a = { .n = 0 };
	struct pm_manifest *m;
	char p[PATH_MAX], lname[200];

	snprintf(lname, sizeof(lname), "d/%0150d.jpg", 1);
	put(&a, "././@LongLink", 'L', lname);
	put(&a, "short", '0', "abc");
	put(&a, "PaxHeaders/1", 'x', "14 path=x.cls\n");
	put(&a, "short", '0', "7");
	put_end(&a, "nomem.tar");
	path_in(p, sizeof(p), "nomem.tar");
	assert_int_equal(pm_manifest_create(&m), 0);
	assert_int_equal(pm_manifest_add(m, "/keep", 0, 1, false, 0, NULL, 0), 0);
	/* both extension headers' data and the path */
	assert_true(each_allocation_fails(pm_manifest_add_tar, m, p, "nomem.tar") >= 3);
	assert_int_equal(pm_manifest_count(m), 3);
	pm_manifest_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_formats_and_samples),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_base256_size),
		cmocka_unit_test(test_bad_archives),
		cmocka_unit_test(test_sparse_refused),
		cmocka_unit_test(test_size_by_type),
		cmocka_unit_test(test_extension_headers),
		cmocka_unit_test(test_sample_fields),
		cmocka_unit_test(test_empty_member_ends_sample),
		cmocka_unit_test(test_many_fields),
		cmocka_unit_test(test_extension_without_member),
		cmocka_unit_test(test_long_name_limit),
		cmocka_unit_test(test_pax_path_nul),
		cmocka_unit_test(test_prefix_posix_only),
		cmocka_unit_test(test_lone_zero_block),
		cmocka_unit_test(test_out_of_memory),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
