// SPDX-License-Identifier: MIT
/*
 * lib/stream/ with several ranks (stream.c's slot sizing and plan
 * alignments, plan.c's equal steps): every rank of a world makes the same
 * slot and the same number of batches per epoch, whatever the item sizes,
 * the options, the files' O_DIRECT alignment or the open-files limit of
 * each process -- DDP waits forever on a rank with one batch less.  Ranks
 * are streamed one after the other in this one process.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pm_test.h"
#include "pinmem_stream.h"

#define DATA_SIZE (4 << 20)
#define NSMALL 40

static char dir[PATH_MAX - 64];
static char data_path[PATH_MAX];
static unsigned char *data;
static char small_path[NSMALL][PATH_MAX];

static struct pm_ctx *open_ctx(void)
{
	fake_reset();
	return fake_ctx(0, PM_BACKEND_NONE);
}

static void write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
}

static int setup(void **state)
{
	if (test_dir_make(dir, sizeof(dir), "ranks-test"))
		return -1;
	data = malloc(DATA_SIZE);
	if (!data)
		return -1;
	test_fill(data, DATA_SIZE, 3);
	snprintf(data_path, sizeof(data_path), "%s/data.bin", dir);
	write_file(data_path, data, DATA_SIZE);
	/* small files holding the first bytes of data, for lazily opened streams */
	for (int i = 0; i < NSMALL; i++) {
		snprintf(small_path[i], sizeof(small_path[i]), "%s/s%02d.bin", dir, i);
		write_file(small_path[i], data, 64 << 10);
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	free(data);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

/* Items of sizes[i % nsizes] bytes, back to back in data.bin. */
static struct pm_manifest *sized_items(size_t n, const uint64_t *sizes, size_t nsizes)
{
	struct pm_manifest *m;
	uint64_t off = 0;

	assert_int_equal(pm_manifest_create(&m), 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t len = sizes[i % nsizes];

		assert_true(off + len <= DATA_SIZE);
		assert_int_equal(pm_manifest_add(m, data_path, off, len, false, 0, NULL, 0), 0);
		off += len;
	}
	return m;
}

struct rank_run {
	uint64_t slot_bytes;
	uint64_t batches[8];	/* per epoch */
	uint64_t items, total_items, bytes, total_bytes;
};

/* Stream rank r of o's world to the end: batch counts per epoch, every byte checked. */
static void run_rank(struct pm_ctx *ctx, struct pm_manifest *m, struct pm_stream_opts *o,
		     uint32_t r, struct rank_run *rr)
{
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;

	memset(rr, 0, sizeof(*rr));
	o->rank = r;
	ret = pm_stream_create(ctx, m, o, &s);
	if (ret)
		fail_msg("rank %u of %u: pm_stream_create: %d %s", r, o->world_size, ret,
			 pm_ctx_last_error(ctx));
	while (!(ret = pm_stream_next(s, &b)) && b) {
		assert_true(b->epoch < 8);
		rr->batches[b->epoch]++;
		if (o->batch_items)
			assert_true(b->nitems <= o->batch_items);
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];

			assert_true(it->slot_offset + it->length <= b->span);
			assert_memory_equal((char *)b->host + it->slot_offset,
					    data + (it->file_offset % DATA_SIZE), it->length);
		}
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	if (ret)
		fail_msg("rank %u: %d %s", r, ret, pm_stream_error(s));
	assert_int_equal(pm_stream_stats(s, &st), 0);
	rr->slot_bytes = st.slot_bytes;
	rr->items = st.items;
	rr->total_items = st.total_items;
	rr->bytes = st.bytes;
	rr->total_bytes = st.total_bytes;
	pm_stream_destroy(s);
}

/* Every rank of o's world: the same slot size and batches per epoch. */
static void ranks_agree(struct pm_ctx *ctx, struct pm_manifest *m, struct pm_stream_opts *o)
{
	struct rank_run first, rr;

	for (uint32_t r = 0; r < o->world_size; r++) {
		struct rank_run *cur = r ? &rr : &first;

		run_rank(ctx, m, o, r, cur);
		if (!o->shuffle) {
			/* the totals count equal steps' repeated item too */
			assert_int_equal(cur->total_items, cur->items);
			assert_int_equal(cur->total_bytes, cur->bytes);
		}
		if (!r)
			continue;
		assert_int_equal(rr.slot_bytes, first.slot_bytes);
		for (uint32_t e = 0; e < o->epochs; e++) {
			if (rr.batches[e] != first.batches[e])
				fail_msg("world %u batch_items %u shuffle %d epoch %u: rank 0 %llu batches, rank %u %llu",
					 o->world_size, o->batch_items, o->shuffle, e,
					 (unsigned long long)first.batches[e], r,
					 (unsigned long long)rr.batches[e]);
		}
	}
}

static void base_opts(struct pm_stream_opts *o)
{
	pm_stream_opts_init(o);
	o->handoff = PM_HANDOFF_HOST;
	o->readers = 1;
	o->slots = 3;
	o->seed = 7;
}

/*
 * batch_items without batch_bytes: the slot is sized for the largest batch
 * of any rank's share, not of this rank's (which packed the others' shares
 * into a different number of batches).  The first case is the smallest:
 * items of 4096 and 5000 bytes alternate, so rank 0 reads only 4096-byte
 * ones and packed rank 1's pairs one item per batch.
 */
/* n items of a and b bytes in turn, two ranks, batches of two items. */
static void alternating(struct pm_ctx *ctx, uint64_t a, uint64_t b, size_t n)
{
	const uint64_t sizes[] = { a, b };
	struct pm_manifest *m = sized_items(n, sizes, 2);
	struct pm_stream_opts o;

	base_opts(&o);
	o.direct = PM_DIRECT_OFF;
	o.world_size = 2;
	o.batch_items = 2;
	ranks_agree(ctx, m, &o);
	pm_manifest_destroy(m);
}

static void test_batch_items_same_steps(void **state)
{
	static const uint64_t mixed[] = { 4096, 5000, 100, 70000, 9, 12345, 65536, 3 };
	static const uint32_t bis[] = { 1, 2, 3, 5 };
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m;
	struct pm_stream_opts o;

	alternating(ctx, 4096, 5000, 8);
	m = sized_items(53, mixed, 8);
	for (int d = 0; d < 2; d++)
		for (uint32_t w = 2; w <= 4; w++)
			for (size_t bi = 0; bi < sizeof(bis) / sizeof(bis[0]); bi++)
				for (int sh = 0; sh < 2; sh++) {
					base_opts(&o);
					o.direct = d ? PM_DIRECT_AUTO : PM_DIRECT_OFF;
					o.world_size = w;
					o.batch_items = bis[bi];
					o.shuffle = sh;
					o.epochs = sh ? 3 : 1;
					o.shard_pad = (enum pm_shard_pad)((w + bi) % 3);
					ranks_agree(ctx, m, &o);
				}
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/*
 * An item larger than this rank's batches but read only by another rank:
 * every rank creates its stream (the slot holds every rank's batches).
 */
static void test_item_of_another_rank(void **state)
{
	struct pm_ctx *ctx = open_ctx();

	alternating(ctx, 4096, 100000, 4);
	pm_close(ctx);
}

/*
 * Five items, two ranks, a batch each: rank 1 repeats an item to make its
 * third batch, and its stats' totals count it.
 */
static void test_totals_count_repeat(void **state)
{
	static const uint64_t size[] = { 4096 };
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = sized_items(5, size, 1);
	struct pm_stream_opts o;

	base_opts(&o);
	o.world_size = 2;
	o.batch_items = 1;
	o.batch_bytes = 65536;
	o.epochs = 2;
	ranks_agree(ctx, m, &o);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/*
 * Fewer items than ranks: under EXACT a rank without an item of its own
 * reads the one PAD would give it, so every rank has its batch each epoch
 * (failing create on some ranks only would hang the others); under DROP
 * every rank refuses alike.
 */
static void test_fewer_items_than_ranks(void **state)
{
	static const uint64_t sizes[] = { 4096, 70000, 9 };
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = sized_items(3, sizes, 3);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct rank_run rr;
	char first[256] = "";

	for (int bi = 0; bi < 2; bi++) {
		base_opts(&o);
		o.world_size = 5;
		o.batch_items = bi;
		o.epochs = 2;
		o.shuffle = bi;
		ranks_agree(ctx, m, &o);
		for (uint32_t r = 0; r < 5; r++) {
			run_rank(ctx, m, &o, r, &rr);
			assert_int_equal(rr.items, 2);	/* one a epoch, its own or a repeat */
			assert_int_equal(rr.batches[0], 1);
		}
	}
	base_opts(&o);
	o.world_size = 5;
	o.shard_pad = PM_SHARD_DROP;
	for (uint32_t r = 0; r < 5; r++) {
		o.rank = r;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
		if (!r)
			snprintf(first, sizeof(first), "%s", pm_ctx_last_error(ctx));
		assert_string_equal(pm_ctx_last_error(ctx), first);
	}
	assert_non_null(strstr(first, "3 items for 5 ranks"));
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/*
 * The packing does not depend on the process: a rank whose open-files
 * limit makes it open the files lazily (read buffered) packs like one that
 * reads them with O_DIRECT, with a fixed batch size and with batch_items.
 */
static void test_nofile_limit_same_steps(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m;
	struct pm_stream_opts o;
	struct rank_run eager, lazy;
	struct rlimit saved, low;

	assert_int_equal(pm_manifest_create(&m), 0);
	for (int i = 0; i < 160; i++) {
		uint64_t len = 1 + (uint64_t)(i * 7919) % 20000;

		assert_int_equal(pm_manifest_add(m, small_path[i % NSMALL], (uint64_t)(i * 131) % 4000,
						 len, false, 0, NULL, 0), 0);
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	for (int bi = 0; bi < 2; bi++) {
		base_opts(&o);
		o.world_size = 2;
		o.rank = 1;
		o.shuffle = true;
		o.epochs = 2;
		if (bi)
			o.batch_items = 4;
		else
			o.batch_bytes = 64 << 10;
		run_rank(ctx, m, &o, 1, &eager);
		low = saved;
		low.rlim_cur = NSMALL + 8;	/* more files than half of it: opened lazily */
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
		run_rank(ctx, m, &o, 1, &lazy);
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
		assert_int_equal(lazy.slot_bytes, eager.slot_bytes);
		for (int e = 0; e < 2; e++)
			assert_int_equal(lazy.batches[e], eager.batches[e]);
	}
	pm_manifest_destroy(m);
	pm_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_items_same_steps),
		cmocka_unit_test(test_item_of_another_rank),
		cmocka_unit_test(test_totals_count_repeat),
		cmocka_unit_test(test_fewer_items_than_ranks),
		cmocka_unit_test(test_nofile_limit_same_steps),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
