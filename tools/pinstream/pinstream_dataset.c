// SPDX-License-Identifier: MIT
/*
 * --make-dataset: N files of pseudo-random bytes (seeded, so a dataset can be
 * made again bit for bit) and a manifest that cuts them into items of random,
 * unaligned sizes with their crc32c, the shape of a real sample store.
 * With --item-size MIN-MAX instead: N small files of one item each
 * (DIR/NNNN/NNNNNNN.bin, 1000 per directory), the shape of ImageNet.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "pinstream.h"

#define BLOCK		(4U << 20)
#define ITEM_MIN	(64U << 10)
#define ITEM_MAX	(4U << 20)

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

struct item_cut {
	FILE *mf;
	const char *name;
	uint64_t rng;
	uint64_t start, len, pos;	/* current item */
	uint32_t crc;
	uint64_t items;
};

static void next_item(struct item_cut *c, uint64_t file_size)
{
	c->start = c->pos;
	c->len = ITEM_MIN + xorshift(&c->rng) % (ITEM_MAX - ITEM_MIN);
	if (c->start + c->len > file_size || file_size - (c->start + c->len) < ITEM_MIN)
		c->len = file_size - c->start;
	c->crc = 0;
}

/* Feed the file's next bytes to the item cutter, writing finished items. */
static void cut(struct item_cut *c, const char *p, size_t n, uint64_t file_size)
{
	while (n) {
		uint64_t left = c->start + c->len - c->pos;
		size_t take = n < left ? n : (size_t)left;

		c->crc = pm_crc32c(c->crc, p, take);
		c->pos += take;
		p += take;
		n -= take;
		if (c->pos == c->start + c->len) {
			fprintf(c->mf, "%s %llu %llu %08x\n", c->name,
				(unsigned long long)c->start, (unsigned long long)c->len,
				c->crc);
			c->items++;
			if (c->pos < file_size)
				next_item(c, file_size);
		}
	}
}

static int make_file(const char *dir, uint32_t i, uint64_t size, uint64_t seed,
		     char *buf, struct item_cut *c)
{
	char path[4096], name[32];
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + i + 1, done = 0;
	int fd, ret = 0;

	snprintf(name, sizeof(name), "data-%04u.bin", i);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		ps_err("%s: %s", path, strerror(-ret));
		return ret;
	}
	c->name = name;
	c->pos = 0;
	next_item(c, size);
	while (done < size && !ret) {
		size_t n = size - done < BLOCK ? (size_t)(size - done) : BLOCK;

		for (size_t k = 0; k < n; k += 8) {
			uint64_t v = xorshift(&rng);

			memcpy(buf + k, &v, n - k < 8 ? n - k : 8);
		}
		ret = write_all(fd, buf, n);
		if (!ret)
			cut(c, buf, n, size);
		done += n;
	}
	if (!ret && fsync(fd))
		ret = -errno;
	/* the dataset should start cold, not fill the page cache */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		ps_err("%s: %s", path, strerror(-ret));
	return ret;
}

static FILE *open_manifest(const char *dir, char *mpath, size_t len)
{
	FILE *f;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		ps_err("%s: %s", dir, strerror(errno));
		return NULL;
	}
	snprintf(mpath, len, "%s/manifest.txt", dir);
	f = fopen(mpath, "we");
	if (!f)
		ps_err("%s: %s", mpath, strerror(errno));
	return f;
}

/* N files of one item each; written without fsync, then synced once and dropped from the cache. */
static int make_small_files(const struct ps_args *a)
{
	uint64_t rng = a->so.seed * 0x9e3779b97f4a7c15ull + 0x7654321, bytes = 0;
	uint64_t span = a->item_max - a->item_min + 1;
	char mpath[4096], path[4200], sz[32];
	char *buf = malloc(a->item_max + 8);
	FILE *mf = open_manifest(a->make_dataset, mpath, sizeof(mpath));
	int ret = 0;

	if (!mf || !buf) {
		if (mf)
			fclose(mf);
		free(buf);
		return PS_EXIT_FAIL;
	}
	fprintf(mf, "# pinstream --make-dataset --files %u --item-size %llu-%llu --seed %llu\n"
		"# path offset length crc32c\n", a->dataset_files,
		(unsigned long long)a->item_min, (unsigned long long)a->item_max,
		(unsigned long long)a->so.seed);
	for (uint32_t i = 0; i < a->dataset_files && !ret; i++) {
		uint64_t len = a->item_min + xorshift(&rng) % span;
		int fd;

		if (i % 1000 == 0) {
			snprintf(path, sizeof(path), "%s/%04u", a->make_dataset, i / 1000);
			if (mkdir(path, 0755) && errno != EEXIST) {
				ret = -errno;
				break;
			}
		}
		for (uint64_t k = 0; k < len; k += 8) {
			uint64_t v = xorshift(&rng);

			memcpy(buf + k, &v, 8);
		}
		snprintf(path, sizeof(path), "%s/%04u/%07u.bin", a->make_dataset, i / 1000, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			ret = -errno;
			break;
		}
		ret = write_all(fd, buf, len);
		if (close(fd) && !ret)
			ret = -errno;
		fprintf(mf, "%04u/%07u.bin 0 %llu %08x\n", i / 1000, i,
			(unsigned long long)len, pm_crc32c(0, buf, len));
		bytes += len;
	}
	if (ret)
		ps_err("%s: %s", path, strerror(-ret));
	free(buf);
	if (fclose(mf) && !ret) {
		ps_err("%s: %s", mpath, strerror(errno));
		ret = -EIO;
	}
	if (ret)
		return PS_EXIT_FAIL;
	sync();
	/* the dataset should start cold, not fill the page cache */
	for (uint32_t i = 0; i < a->dataset_files; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/%04u/%07u.bin", a->make_dataset, i / 1000, i);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	printf("pinstream: wrote %u files, %s, %u items to %s (manifest %s)\n",
	       a->dataset_files, ps_bytes(bytes, sz, sizeof(sz)), a->dataset_files,
	       a->make_dataset, mpath);
	return 0;
}

int ps_make_dataset(const struct ps_args *a)
{
	struct item_cut c = { .rng = a->so.seed * 0x9e3779b97f4a7c15ull + 0x1234567 };
	struct statvfs sv;
	char mpath[4096], sz[32];
	uint64_t per = a->size / a->dataset_files;
	char *buf;
	int ret = 0;

	if (a->item_max)
		return make_small_files(a);
	if (mkdir(a->make_dataset, 0755) && errno != EEXIST) {
		ps_err("%s: %s", a->make_dataset, strerror(errno));
		return PS_EXIT_FAIL;
	}
	if (!statvfs(a->make_dataset, &sv) &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < a->size + (256ULL << 20)) {
		ps_err("%s: %s free, not enough for a %s dataset", a->make_dataset,
		       ps_bytes((uint64_t)sv.f_bavail * sv.f_frsize, mpath, 32),
		       ps_bytes(a->size, sz, sizeof(sz)));
		return PS_EXIT_FAIL;
	}
	snprintf(mpath, sizeof(mpath), "%s/manifest.txt", a->make_dataset);
	c.mf = fopen(mpath, "we");
	buf = malloc(BLOCK);
	if (!c.mf || !buf) {
		ps_err("%s: %s", mpath, strerror(errno));
		if (c.mf)
			fclose(c.mf);
		free(buf);
		return PS_EXIT_FAIL;
	}
	fprintf(c.mf, "# pinstream --make-dataset --size %llu --files %u --seed %llu\n"
		"# path offset length crc32c\n", (unsigned long long)a->size,
		a->dataset_files, (unsigned long long)a->so.seed);
	for (uint32_t i = 0; i < a->dataset_files && !ret; i++) {
		uint64_t size = i + 1 == a->dataset_files ?
				a->size - per * (a->dataset_files - 1) : per;

		ret = make_file(a->make_dataset, i, size, a->so.seed, buf, &c);
	}
	free(buf);
	if (fclose(c.mf) && !ret) {
		ps_err("%s: %s", mpath, strerror(errno));
		ret = -EIO;
	}
	if (ret)
		return PS_EXIT_FAIL;
	printf("pinstream: wrote %u files, %s, %llu items to %s (manifest %s)\n",
	       a->dataset_files, ps_bytes(a->size, sz, sizeof(sz)),
	       (unsigned long long)c.items, a->make_dataset, mpath);
	return 0;
}
