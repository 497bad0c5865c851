// SPDX-License-Identifier: MIT
/*
 * Shard-sequential reads (enum pm_coalesce): WebDataset shards of 3 KB and
 * 300 KB members (a .bin and a few-byte .cls per sample) stream byte-exact
 * in order and shuffled, buffered and with O_DIRECT, with coalescing on,
 * auto and off; coalesced reads are counted (fewer reads than members) when
 * the policy says so, none when it is off; read_bytes is what the reads
 * transferred (a range's headers included).  A member the file no longer
 * holds fails its batch naming that member, coalesced as it is.  Range reads
 * whose completions this program rewrites: a short one is read on (byte-
 * exact), an -EIO one fails its batch naming one of its items (skip: the
 * stream goes on, the batch counted).  The shards are written
 * here (ustar) in a directory next to the binary: /tmp may be a tmpfs
 * without O_DIRECT.
 */
#include <dirent.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "pinmem_stream.h"
#include "pm_test.h"
#include "tar_test.h"
#include "uring_rewrite.h"

#define NSHARDS 2
#define LAZY_SHARDS 24	/* more than half the open-files limit the lazy test sets */

static char dir[PATH_MAX - 512];

struct shard {
	char path[PATH_MAX];
	char *data;
	size_t len;
};

static struct shard sh[LAZY_SHARDS];
static int nshards = NSHARDS;	/* the shards the tests write and read */
static bool expect_lazy;	/* the shards are opened as they are read */

/*
 * Stand-in for liburing's submit (uring_rewrite.h), rewriting the
 * completions of coalesced (range) reads.  short_reads: each range read's first completion
 * reports half its bytes (aligned down to the read's O_DIRECT alignment),
 * and the bytes past that are scribbled over in the staging buffer, so
 * they are right only when read again; shorted counts them.  eio_at: the
 * eio_at-th range read (from 1) fails with -EIO, its offset and length are
 * kept in eio_off and eio_len, eio_injected set.  einval_direct: every
 * O_DIRECT range read's first completion is -EINVAL (the file system
 * refused it after all), counted in einvaled.
 */
static int short_reads, shorted, eio_at, eio_injected, einval_direct, einvaled;
static uint64_t eio_off;
static uint32_t eio_len;

static bool rewrite_active(void)
{
	return __atomic_load_n(&short_reads, __ATOMIC_SEQ_CST) ||
	       __atomic_load_n(&eio_at, __ATOMIC_SEQ_CST) > 0 ||
	       __atomic_load_n(&einval_direct, __ATOMIC_SEQ_CST);
}

static void rewrite_cqe(struct io_uring_cqe *cqe, struct pm_read *rd)
{
	uint32_t a, half;

	/* a range read's first completion */
	if (rd->stage < 0 || rd->owner_items < 2 || rd->done || cqe->res <= 0)
		return;
	if (__atomic_load_n(&einval_direct, __ATOMIC_SEQ_CST)) {
		if (rd->align) {
			cqe->res = -EINVAL;
			__atomic_fetch_add(&einvaled, 1, __ATOMIC_SEQ_CST);
		}
		return;
	}
	if (__atomic_sub_fetch(&eio_at, 1, __ATOMIC_SEQ_CST) == 0) {
		eio_off = rd->off;
		eio_len = rd->len;
		cqe->res = -EIO;
		__atomic_store_n(&eio_injected, 1, __ATOMIC_SEQ_CST);
		return;
	}
	if (!__atomic_load_n(&short_reads, __ATOMIC_SEQ_CST))
		return;
	a = rd->align ? rd->align : 1;
	half = (uint32_t)cqe->res / 2 / a * a;
	if (!half)
		return;
	memset(rd->dst + half, 0xa5, (size_t)cqe->res - half);
	cqe->res = (int)half;
	__atomic_fetch_add(&shorted, 1, __ATOMIC_SEQ_CST);
}

/* Append a ustar member name of n bytes (contents: a hash of their file offset) to *buf. */
static void member(char **buf, size_t *len, const char *name, size_t n)
{
	size_t padded = (n + 511) / 512 * 512;
	unsigned char *h;

	*buf = realloc(*buf, *len + 512 + padded);
	assert_non_null(*buf);
	h = (unsigned char *)*buf + *len;
	memset(h, 0, 512 + padded);
	header(h, name, n, false);
	*len += 512;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = (*len + i) * 0x9e3779b97f4a7c15ULL;

		(*buf)[*len + i] = (char)(x >> 56);
	}
	*len += padded;
}

/* nshards shards of samples whose .bin is about size bytes (sizes vary by a few hundred). */
static void make_shards(size_t size, int samples)
{
	for (int k = 0; k < nshards; k++) {
		struct shard *t = &sh[k];
		FILE *f;

		free(t->data);
		t->data = NULL;
		t->len = 0;
		for (int i = 0; i < samples; i++) {
			char name[64];

			snprintf(name, sizeof(name), "%06d.bin", i);
			member(&t->data, &t->len, name, size - 300 + (size_t)(i * 37 % 600));
			snprintf(name, sizeof(name), "%06d.cls", i);
			member(&t->data, &t->len, name, 1 + (size_t)(i % 7));
		}
		t->data = realloc(t->data, t->len + 1024);
		memset(t->data + t->len, 0, 1024);
		t->len += 1024;
		snprintf(t->path, sizeof(t->path), "%s/shard-%d.tar", dir, k);
		f = fopen(t->path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(t->data, 1, t->len, f), t->len);
		assert_int_equal(fclose(f), 0);
	}
}

static int setup(void **state)
{
	return test_dir_make(dir, sizeof(dir), "stream-tar-test");
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	for (int k = 0; k < LAZY_SHARDS; k++)
		free(sh[k].data);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

static bool fs_direct(void)
{
	struct statx stx;
	int fd = open(sh[0].path, O_RDONLY | O_DIRECT);

	if (fd < 0)
		return false;
	close(fd);
	if (statx(AT_FDCWD, sh[0].path, 0, STATX_DIOALIGN, &stx))
		return false;
	return !(stx.stx_mask & STATX_DIOALIGN) || stx.stx_dio_offset_align;
}

/* The file descriptors this process holds. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3;	/* ".", ".." and the directory's own */
}

static struct pm_manifest *shard_manifest(void)
{
	struct pm_manifest *m;
	char err[256];

	assert_int_equal(pm_manifest_create(&m), 0);
	for (int k = 0; k < nshards; k++)
		assert_int_equal(pm_manifest_add_tar(m, sh[k].path, err, sizeof(err)), 0);
	return m;
}

/* Options for these tests: host slots only. */
static void tar_opts(struct pm_stream_opts *o, enum pm_direct direct, enum pm_coalesce co,
		     bool shuffle, uint64_t batch_bytes)
{
	pm_stream_opts_init(o);
	o->direct = direct;
	o->coalesce = co;
	o->shuffle = shuffle;
	o->seed = 7;
	o->batch_bytes = batch_bytes;
	o->handoff = PM_HANDOFF_HOST;
}

static struct pm_stream *open_stream(struct pm_ctx **ctx, const struct pm_manifest *m,
				     const struct pm_stream_opts *o)
{
	struct pm_stream *s;

	fake_reset();
	*ctx = fake_ctx(0, PM_BACKEND_HOST);
	assert_int_equal(pm_stream_create(*ctx, m, o, &s), 0);
	return s;
}

/*
 * Stream the shards once with these options: every item's bytes are the
 * archive's at its offset, every item comes once; the stats returned, and
 * in *alone the bytes reading each item by itself transfers (O_DIRECT:
 * its aligned blocks, up to the end of the file).
 */
static void stream_check(enum pm_direct direct, enum pm_coalesce co, bool shuffle,
			 uint64_t batch_bytes, struct pm_stream_stats *st, uint64_t *alone)
{
	struct pm_manifest *m = shard_manifest();
	size_t n = pm_manifest_count(m);
	unsigned char *seen = calloc(n, 1);
	struct pm_stream_opts o;
	struct pm_ctx *ctx;
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;

	tar_opts(&o, direct, co, shuffle, batch_bytes);
	s = open_stream(&ctx, m, &o);
	*alone = 0;
	while (!(ret = pm_stream_next(s, &b)) && b) {
		/* opened as read: no descriptor of this process holds a shard */
		if (expect_lazy && b->seq == 0)
			assert_true(open_fds() < nshards);
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];
			const struct shard *t = NULL;
			struct pm_stream_file f;
			uint64_t a, end;

			for (int k = 0; k < nshards; k++)
				if (!strcmp(pm_manifest_path(m, it->path_id), sh[k].path))
					t = &sh[k];
			assert_non_null(t);
			assert_true(it->file_offset + it->length <= t->len);
			assert_int_equal(pm_stream_file(s, it->path_id, &f), 0);
			a = f.align ? f.align : 1;
			end = (it->file_offset + it->length + a - 1) / a * a;
			*alone += (end < t->len ? end : t->len) - it->file_offset / a * a;
			if (memcmp((char *)b->host + it->slot_offset, t->data + it->file_offset,
				   it->length))
				fail_msg("item %llu (offset %llu length %llu) differs, direct %d coalesce %d shuffle %d",
					 (unsigned long long)it->index,
					 (unsigned long long)it->file_offset,
					 (unsigned long long)it->length, direct, co, shuffle);
			assert_int_equal(seen[it->index], 0);
			seen[it->index] = 1;
		}
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_int_equal(ret, 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(seen[i], 1);
	assert_int_equal(pm_stream_stats(s, st), 0);
	assert_int_equal(st->items, n);
	assert_int_equal(st->failed_batches, 0);
	if (direct == PM_DIRECT_ON)
		assert_int_equal(st->files_direct, nshards);
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
	free(seen);
}

/* Every mode byte-exact; coalesced reads where the policy has them. */
static void modes(size_t size, int samples, uint64_t batch_bytes)
{
	bool direct;
	static const enum pm_direct dm[] = { PM_DIRECT_OFF, PM_DIRECT_ON };
	static const enum pm_coalesce cm[] = { PM_COALESCE_AUTO, PM_COALESCE_ON, PM_COALESCE_OFF };
	uint64_t members = (uint64_t)nshards * samples * 2;

	make_shards(size, samples);
	direct = fs_direct();
	print_message("%zu-byte members, O_DIRECT on %s: %s\n", size, dir, direct ? "yes" : "no");
	for (size_t d = 0; d < 2; d++) {
		if (dm[d] == PM_DIRECT_ON && !direct)
			continue;
		for (size_t c = 0; c < 3; c++) {
			for (int shuffle = 0; shuffle < 2; shuffle++) {
				struct pm_stream_stats st;
				uint64_t alone;
				bool want = cm[c] == PM_COALESCE_ON ||
					    (cm[c] == PM_COALESCE_AUTO && size < PM_COALESCE_SMALL);

				stream_check(dm[d], cm[c], shuffle, batch_bytes, &st, &alone);
				/*
				 * read_bytes is what the reads transferred: each item's
				 * own blocks, read alone; a range's gaps too, each item
				 * after a range's first at least its 512-byte header.
				 */
				if (cm[c] == PM_COALESCE_OFF)
					assert_int_equal(st.read_bytes, alone);
				else
					assert_true(st.read_bytes >= st.bytes + 512 *
						    (st.coalesced_items - st.coalesced_reads));
				if (!want) {
					assert_int_equal(st.coalesced_reads, 0);
					assert_int_equal(st.coalesced_items, 0);
					continue;
				}
				/* at least each sample's .bin and .cls together */
				assert_true(st.coalesced_reads > 0);
				assert_true(st.coalesced_items >= members / 2);
				assert_true(st.coalesced_items <= members);
				if (!shuffle && size < PM_COALESCE_SMALL)
					/* in order, many members per read */
					assert_true(st.coalesced_reads * 8 < members);
				else
					assert_true(st.coalesced_reads < st.coalesced_items);
			}
		}
	}
}

static void test_small_members(void **state)
{
	modes(3 << 10, 400, 1 << 20);
}

static void test_large_members(void **state)
{
	modes(300 << 10, 24, 4 << 20);
}

/* An image-sized member beside a tiny label: AUTO reads them alone (the label is not averaged in). */
static void test_label_beside_image(void **state)
{
	modes(110 << 10, 24, 4 << 20);
}

/*
 * Items that are a sparse subset of a file (4 KiB every 64 KiB: one rank's
 * share, a chosen subset): the page cache is asked for the items, not for
 * the gaps a coalesced read would skip.
 */
static void test_sparse_items_are_not_read_ahead_with_their_gaps(void **state)
{
	const uint64_t step = 64 << 10, item = 4 << 10, n = 256;
	char path[PATH_MAX], err[256];
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_manifest *m;
	struct pm_ctx *ctx;
	struct pm_stream *s;
	struct pm_batch *b;
	char *data = malloc(step * n);
	FILE *f;
	int ret;

	assert_non_null(data);
	for (uint64_t i = 0; i < step * n; i++)
		data[i] = (char)(i * 131 >> 3);
	snprintf(path, sizeof(path), "%s/sparse.bin", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, step * n, f), step * n);
	assert_int_equal(fflush(f), 0);
	/* cold: written back and dropped from the page cache, so its runs are populated */
	assert_int_equal(fsync(fileno(f)), 0);
	assert_int_equal(posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(pm_manifest_create(&m), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(pm_manifest_add(m, path, i * step, item, false, 0, err,
						 sizeof(err)), 0);
	tar_opts(&o, PM_DIRECT_OFF, PM_COALESCE_AUTO, false, 1 << 20);
	s = open_stream(&ctx, m, &o);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		for (uint32_t i = 0; i < b->nitems; i++)
			assert_memory_equal((char *)b->host + b->items[i].slot_offset,
					    data + b->items[i].file_offset, item);
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, n);
	assert_int_equal(st.coalesced_reads, 0);	/* the gaps are more than the items */
	/* runs of one item are too short to populate; the whole file would be 16 MiB */
	assert_true(st.populated_bytes < step * n / 4);
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
	free(data);
}

/*
 * A member the file no longer holds fails its batch naming that member:
 * cut before create (found by the size create saw), and cut while the
 * stream runs, inside a coalesced range (found by the range read's end of
 * file, blamed on the member it cut, not the run's first).
 */
static void cut_member(bool while_streaming)
{
	struct pm_stream_opts o;
	struct pm_manifest *m;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	struct pm_item it;
	int ret;

	make_shards(3 << 10, 200);
	m = shard_manifest();
	/* the .bin of sample 60, item 120: batch 1 of 50 samples each */
	assert_int_equal(pm_manifest_item(m, 120, &it), 0);
	tar_opts(&o, PM_DIRECT_OFF, PM_COALESCE_ON, false, 1 << 20);
	o.batch_items = 50;
	o.slots = 1;	/* batch 1 is read only after batch 0 is released */
	if (!while_streaming)
		assert_int_equal(truncate(sh[0].path, (off_t)(it.offset + 100)), 0);
	s = open_stream(&ctx, m, &o);
	if (while_streaming) {
		assert_int_equal(pm_stream_next(s, &b), 0);
		assert_non_null(b);
		assert_int_equal(b->seq, 0);
		assert_int_equal(truncate(sh[0].path, (off_t)(it.offset + 100)), 0);
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	while (!(ret = pm_stream_next(s, &b)) && b)
		pm_stream_release(s, b);
	assert_int_equal(ret, -ENODATA);
	if (!strstr(pm_stream_error(s), "item 120 ("))
		fail_msg("%s", pm_stream_error(s));
	if (while_streaming) {
		struct pm_stream_stats st;

		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_true(st.coalesced_reads > 0);
	}
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

static void test_cut_member(void **state)
{
	cut_member(false);
	cut_member(true);
}

/* A range read that completes short (not at end of file) is read on: every item byte-exact. */
static void test_short_range_read(void **state)
{
	struct pm_stream_stats st;
	uint64_t alone;

	make_shards(3 << 10, 200);
	for (int d = 0; d < 2; d++) {
		if (d && !fs_direct())
			continue;
		__atomic_store_n(&shorted, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&short_reads, 1, __ATOMIC_SEQ_CST);
		stream_check(d ? PM_DIRECT_ON : PM_DIRECT_OFF, PM_COALESCE_ON, false, 1 << 20,
			     &st, &alone);
		__atomic_store_n(&short_reads, 0, __ATOMIC_SEQ_CST);
		assert_true(st.coalesced_reads > 0);
		/* the short completions happened, and were read on */
		assert_true(__atomic_load_n(&shorted, __ATOMIC_SEQ_CST) > 0);
	}
}

/*
 * A range read that fails (-EIO) fails its batch, naming one of the range's
 * items and the read; with on_error skip the stream goes on past it and
 * counts it.
 */
static void eio_range(enum pm_on_error policy)
{
	struct pm_manifest *m;
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	unsigned long long off, len;
	uint64_t items = 0;
	const char *e, *msg;
	char want[128];
	int ret, fails = 0;

	make_shards(3 << 10, 200);
	m = shard_manifest();
	tar_opts(&o, PM_DIRECT_OFF, PM_COALESCE_ON, false, 1 << 20);
	o.batch_items = 50;
	o.on_error = policy;
	__atomic_store_n(&eio_injected, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&eio_at, 3, __ATOMIC_SEQ_CST);	/* the third range read */
	s = open_stream(&ctx, m, &o);
	for (;;) {
		ret = pm_stream_next(s, &b);
		if (ret) {
			assert_int_equal(ret, -EIO);
			assert_int_equal(policy, PM_ON_ERROR_STOP);
			if (++fails == 2)	/* and on every later call */
				break;
			continue;
		}
		if (!b)
			break;
		items += b->nitems;
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_true(__atomic_load_n(&eio_injected, __ATOMIC_SEQ_CST));
	msg = pm_stream_error(s);
	/* "batch B, item I (PATH offset O length L): read of N bytes at offset F failed" */
	e = strstr(msg, ".tar offset ");
	if (!e || sscanf(e, ".tar offset %llu length %llu", &off, &len) != 2)
		fail_msg("%s", msg);
	/* the item named is one of the failed range's */
	if (off < eio_off || off + len > eio_off + eio_len)
		fail_msg("range %llu+%u: %s", (unsigned long long)eio_off, eio_len, msg);
	snprintf(want, sizeof(want), "read of %u bytes at offset %llu failed (%s)", eio_len,
		 (unsigned long long)eio_off, strerror(EIO));
	if (!strstr(msg, want))
		fail_msg("%s", msg);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.failed_batches, 1);
	assert_true(st.failed_items > 1);	/* the range's items at least */
	if (policy == PM_ON_ERROR_SKIP)
		assert_int_equal(items + st.failed_items, pm_manifest_count(m));
	else
		assert_true(items + st.failed_items < pm_manifest_count(m));
	__atomic_store_n(&eio_at, 0, __ATOMIC_SEQ_CST);
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

static void test_eio_range_read(void **state)
{
	eio_range(PM_ON_ERROR_STOP);
	eio_range(PM_ON_ERROR_SKIP);
}

/*
 * More shards than half the open-files limit are opened as they are read
 * (an io_uring table of direct descriptors): their runs coalesce all the
 * same, byte-exact in every mode; short range reads read on; range reads
 * whose O_DIRECT is refused after all are read again buffered (the files
 * then say buffered); a failed range read fails its batch naming one of
 * its items; a shard replaced since create fails by name.
 */
static struct rlimit saved_nofile;

static int lazy_setup(void **state)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &saved_nofile))
		return -1;
	rl = saved_nofile;
	rl.rlim_cur = 40;	/* 24 shards > 40 / 2: opened as read, a table of 20 */
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return -1;
	nshards = LAZY_SHARDS;
	return 0;
}

static int lazy_teardown(void **state)
{
	__atomic_store_n(&short_reads, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&einval_direct, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&eio_at, 0, __ATOMIC_SEQ_CST);
	expect_lazy = false;
	nshards = NSHARDS;
	return setrlimit(RLIMIT_NOFILE, &saved_nofile);
}

static void test_lazily_opened_shards_coalesce(void **state)
{
	struct pm_stream_stats st;
	uint64_t alone;

	expect_lazy = true;
	modes(3 << 10, 20, 1 << 20);
	__atomic_store_n(&shorted, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&short_reads, 1, __ATOMIC_SEQ_CST);
	stream_check(fs_direct() ? PM_DIRECT_ON : PM_DIRECT_OFF, PM_COALESCE_ON, true,
		     1 << 20, &st, &alone);
	__atomic_store_n(&short_reads, 0, __ATOMIC_SEQ_CST);
	assert_true(st.coalesced_reads > 0);
	assert_true(__atomic_load_n(&shorted, __ATOMIC_SEQ_CST) > 0);
	eio_range(PM_ON_ERROR_STOP);
}

static void test_lazily_opened_shards_direct_refused(void **state)
{
	struct pm_stream_stats st;
	uint64_t alone;
	struct statx stx;

	if (!fs_direct())
		skip();
	/* the staging buffers are aligned to 4096: a larger alignment reads item by item */
	if (!statx(AT_FDCWD, sh[0].path, 0, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN) && 4096 % stx.stx_dio_offset_align)
		skip();
	expect_lazy = true;
	make_shards(3 << 10, 20);
	__atomic_store_n(&einvaled, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&einval_direct, 1, __ATOMIC_SEQ_CST);
	stream_check(PM_DIRECT_AUTO, PM_COALESCE_ON, false, 1 << 20, &st, &alone);
	__atomic_store_n(&einval_direct, 0, __ATOMIC_SEQ_CST);
	assert_true(__atomic_load_n(&einvaled, __ATOMIC_SEQ_CST) > 0);
	assert_true(st.coalesced_reads > 0);
	/* every shard's first range read was refused: every shard is read buffered */
	assert_int_equal(st.files_direct, 0);
	assert_int_equal(st.files_buffered, LAZY_SHARDS);
}

static void test_lazily_opened_shard_replaced(void **state)
{
	char copy[PATH_MAX + 8];
	struct pm_stream_opts o;
	struct pm_manifest *m;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	const struct shard *t = &sh[LAZY_SHARDS - 1];
	FILE *f;
	int ret;

	make_shards(3 << 10, 20);
	m = shard_manifest();
	tar_opts(&o, PM_DIRECT_OFF, PM_COALESCE_ON, false, 1 << 20);
	o.batch_items = 20;	/* one shard's samples a batch: the last is read last */
	o.slots = 1;		/* batch 1 is read only after batch 0 is released */
	s = open_stream(&ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	assert_non_null(b);
	/* the last shard, not opened yet, replaced by a copy of itself */
	snprintf(copy, sizeof(copy), "%s.new", t->path);
	f = fopen(copy, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(t->data, 1, t->len, f), t->len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(copy, t->path), 0);
	assert_int_equal(pm_stream_release(s, b), 0);
	while (!(ret = pm_stream_next(s, &b)) && b)
		pm_stream_release(s, b);
	assert_int_equal(ret, -ESTALE);
	if (!strstr(pm_stream_error(s), t->path) ||
	    !strstr(pm_stream_error(s), "replaced since the stream was created"))
		fail_msg("%s", pm_stream_error(s));
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_members),
		cmocka_unit_test(test_large_members),
		cmocka_unit_test(test_label_beside_image),
		cmocka_unit_test(test_sparse_items_are_not_read_ahead_with_their_gaps),
		cmocka_unit_test(test_cut_member),
		cmocka_unit_test(test_short_range_read),
		cmocka_unit_test(test_eio_range_read),
		cmocka_unit_test_setup_teardown(test_lazily_opened_shards_coalesce,
						lazy_setup, lazy_teardown),
		cmocka_unit_test_setup_teardown(test_lazily_opened_shards_direct_refused,
						lazy_setup, lazy_teardown),
		cmocka_unit_test_setup_teardown(test_lazily_opened_shard_replaced,
						lazy_setup, lazy_teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
