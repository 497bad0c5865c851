// SPDX-License-Identifier: MIT
/*
 * lib/stream/plan.c: epoch order (identity, seeded shuffle), sharding by rank
 * (exact / pad / drop) and packing into slot-sized batches with O_DIRECT
 * alignment; lib/stream/stream_hist.c percentiles.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "plan.h"
#include "stream_hist.h"

static struct pm_manifest *items(size_t n, uint64_t len_mod)
{
	struct pm_manifest *m;

	assert_int_equal(pm_manifest_create(&m), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pm_manifest_add(m, i % 3 ? "/a" : "/b", i * 1000,
						 len_mod ? 1 + (i * 7919) % len_mod : 100,
						 false, 0, NULL, 0), 0);
	return m;
}

static void order_of(struct pm_manifest *m, uint32_t rank, uint32_t world,
		     enum pm_shard_pad pad, bool shuffle, uint64_t seed,
		     uint32_t epoch, uint64_t *out, size_t *count)
{
	struct pm_plan p;

	assert_int_equal(pm_plan_init(&p, m, rank, world, pad, shuffle, seed), 0);
	assert_int_equal(pm_plan_epoch(&p, epoch), 0);
	memcpy(out, p.order, p.count * sizeof(*out));
	*count = p.count;
	pm_plan_free(&p);
}

static void test_identity(void **state)
{
	struct pm_manifest *m = items(10, 0);
	uint64_t o[10];
	size_t n;

	for (uint32_t e = 0; e < 3; e++) {
		order_of(m, 0, 1, PM_SHARD_EXACT, false, 0, e, o, &n);
		assert_int_equal(n, 10);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(o[i], i);
	}
	pm_manifest_destroy(m);
}

static bool is_permutation(const uint64_t *o, size_t n)
{
	char *seen = calloc(n, 1);
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		if (o[i] >= n || seen[o[i]])
			ok = false;
		else
			seen[o[i]] = 1;
	}
	free(seen);
	return ok;
}

static void test_shuffle_deterministic(void **state)
{
	struct pm_manifest *m = items(1000, 0);
	uint64_t a[1000], b[1000], c[1000], d[1000];
	size_t n;
	size_t fixed = 0;

	order_of(m, 0, 1, PM_SHARD_EXACT, true, 42, 0, a, &n);
	assert_true(is_permutation(a, n));
	order_of(m, 0, 1, PM_SHARD_EXACT, true, 42, 0, b, &n);
	assert_memory_equal(a, b, sizeof(a));		/* same seed, same epoch */
	order_of(m, 0, 1, PM_SHARD_EXACT, true, 42, 1, c, &n);
	assert_true(is_permutation(c, n));
	assert_memory_not_equal(a, c, sizeof(a));	/* a new order each epoch */
	order_of(m, 0, 1, PM_SHARD_EXACT, true, 43, 0, d, &n);
	assert_memory_not_equal(a, d, sizeof(a));	/* another seed */
	for (size_t i = 0; i < n; i++)
		fixed += a[i] == i;
	assert_true(fixed < 20);			/* it really moves things */
	/* pinned values: the order is part of the format, the same on every machine */
	assert_int_equal(a[0], 340);
	assert_int_equal(a[1], 617);
	assert_int_equal(a[999], 494);
	pm_manifest_destroy(m);
}

/* Every rank's order together: counts per item. */
static void shard_counts(struct pm_manifest *m, size_t nitems, uint32_t world,
			 enum pm_shard_pad pad, bool shuffle, uint32_t *counts,
			 size_t *per_rank_min, size_t *per_rank_max)
{
	uint64_t *o = malloc((nitems + 1) * sizeof(*o));

	memset(counts, 0, nitems * sizeof(*counts));
	*per_rank_min = SIZE_MAX;
	*per_rank_max = 0;
	for (uint32_t r = 0; r < world; r++) {
		size_t n;

		order_of(m, r, world, pad, shuffle, 9, 2, o, &n);
		assert_int_equal(n, pm_plan_rank_count(nitems, r, world, pad));
		for (size_t i = 0; i < n; i++)
			counts[o[i]]++;
		if (n < *per_rank_min)
			*per_rank_min = n;
		if (n > *per_rank_max)
			*per_rank_max = n;
	}
	free(o);
}

static void test_sharding(void **state)
{
	for (size_t nitems = 1; nitems <= 23; nitems += 2) {
		struct pm_manifest *m = items(nitems, 0);
		uint32_t counts[32];

		for (uint32_t world = 1; world <= 8; world++) {
			for (int sh = 0; sh < 2; sh++) {
				size_t lo, hi, total = 0;

				/* exact: every item once, ranks within one item */
				shard_counts(m, nitems, world, PM_SHARD_EXACT, sh, counts, &lo, &hi);
				for (size_t i = 0; i < nitems; i++)
					assert_int_equal(counts[i], 1);
				assert_true(hi - lo <= 1);

				/* pad: equal counts, every item at least once */
				shard_counts(m, nitems, world, PM_SHARD_PAD, sh, counts, &lo, &hi);
				assert_int_equal(lo, hi);
				assert_int_equal(lo, (nitems + world - 1) / world);
				for (size_t i = 0; i < nitems; i++) {
					assert_true(counts[i] >= 1);
					total += counts[i];
				}
				assert_int_equal(total, lo * world);

				/* drop: equal counts, no item twice */
				shard_counts(m, nitems, world, PM_SHARD_DROP, sh, counts, &lo, &hi);
				assert_int_equal(lo, hi);
				assert_int_equal(lo, nitems / world);
				total = 0;
				for (size_t i = 0; i < nitems; i++) {
					assert_true(counts[i] <= 1);
					total += counts[i];
				}
				assert_int_equal(total, nitems / world * world);
			}
		}
		pm_manifest_destroy(m);
	}
}

static void test_plan_bad(void **state)
{
	struct pm_manifest *m = items(4, 0);
	struct pm_plan p;

	assert_int_equal(pm_plan_init(&p, m, 2, 2, PM_SHARD_EXACT, false, 0), -EINVAL);
	assert_int_equal(pm_plan_init(&p, m, 0, 0, PM_SHARD_EXACT, false, 0), -EINVAL);
	assert_int_equal(pm_plan_init(&p, m, 0, 1, (enum pm_shard_pad)7, false, 0), -EINVAL);
	assert_int_equal(pm_plan_rank_count(4, 5, 8, PM_SHARD_EXACT), 0);
	assert_int_equal(pm_plan_rank_count(4, 3, 8, PM_SHARD_EXACT), 1);
	pm_manifest_destroy(m);
}

static void test_place(void **state)
{
	struct pm_mitem it = { .offset = 5000, .length = 3000 };
	struct pm_place pl;

	/* buffered: exactly the item, on a 64-byte boundary */
	pm_plan_place(100, &it, 0, &pl);
	assert_int_equal(pl.read_slot, 128);
	assert_int_equal(pl.read_off, 5000);
	assert_int_equal(pl.read_len, 3000);
	assert_int_equal(pl.data_slot, 128);
	assert_int_equal(pl.end, 3128);
	/* O_DIRECT 512: the aligned superset, the item inside it */
	pm_plan_place(100, &it, 512, &pl);
	assert_int_equal(pl.read_slot, 512);
	assert_int_equal(pl.read_off, 4608);
	assert_int_equal(pl.read_len, 3584);		/* 4608..8192 */
	assert_int_equal(pl.data_slot, 512 + 392);
	assert_int_equal(pl.end, 512 + 3584);
	/* already aligned: no padding */
	it.offset = 8192;
	it.length = 4096;
	pm_plan_place(4096, &it, 4096, &pl);
	assert_int_equal(pl.read_slot, 4096);
	assert_int_equal(pl.read_len, 4096);
	assert_int_equal(pl.data_slot, 4096);
	assert_int_equal(pm_plan_footprint(&it, 4096), 4096 + 4095);
}

static void test_batches(void **state)
{
	struct pm_manifest *m = items(200, 9000);
	uint32_t align[2] = { 512, 0 };	/* /a direct, /b buffered */
	struct pm_plan p;
	size_t pos = 0, batches = 0;

	assert_int_equal(pm_plan_init(&p, m, 0, 1, PM_SHARD_EXACT, true, 5), 0);
	assert_int_equal(pm_plan_epoch(&p, 0), 0);
	while (pos < p.count) {
		uint64_t span, cur = 0;
		size_t k = pm_plan_batch(&p, pos, align, 32768, 5, &span);

		assert_true(k >= 1 && k <= 5);
		for (size_t i = 0; i < k; i++) {
			const struct pm_mitem *it = &m->items[p.order[pos + i]];
			struct pm_place pl;

			pm_plan_place(cur, it, align[it->path_id], &pl);
			assert_true(pl.read_slot >= cur);
			cur = pl.end;
		}
		assert_int_equal(span, cur);
		assert_true(span <= 32768);
		/* the batch stopped for a reason: count, end, or the next item does not fit */
		if (k < 5 && pos + k < p.count) {
			const struct pm_mitem *nx = &m->items[p.order[pos + k]];
			struct pm_place pl;

			pm_plan_place(cur, nx, align[nx->path_id], &pl);
			assert_true(pl.end > 32768);
		}
		pos += k;
		batches++;
	}
	assert_int_equal(pos, 200);
	assert_true(batches >= 40);
	/* an item larger than the slot: an empty batch, the caller reports it */
	{
		uint64_t span;

		assert_int_equal(pm_plan_batch(&p, 0, align, 100, 0, &span), 0);
		assert_int_equal(span, 0);
	}
	pm_plan_free(&p);
	/* slot for 3 items = the 3 largest footprints */
	{
		struct pm_manifest *m2;
		uint32_t al[1] = { 0 };

		assert_int_equal(pm_manifest_create(&m2), 0);
		pm_manifest_add(m2, "/a", 0, 10, false, 0, NULL, 0);
		pm_manifest_add(m2, "/a", 0, 1000, false, 0, NULL, 0);
		pm_manifest_add(m2, "/a", 0, 300, false, 0, NULL, 0);
		pm_manifest_add(m2, "/a", 0, 700, false, 0, NULL, 0);
		assert_int_equal(pm_plan_init(&p, m2, 0, 1, PM_SHARD_EXACT, false, 0), 0);
		assert_int_equal(pm_plan_slot_for_items(&p, al, 3), 1000 + 700 + 300 + 3 * 63);
		pm_plan_free(&p);
		/* a sample is one unit: its footprints add up */
		assert_int_equal(pm_manifest_group(m2, 2, NULL, NULL, 0), 0);
		assert_int_equal(pm_plan_init(&p, m2, 0, 1, PM_SHARD_EXACT, false, 0), 0);
		assert_int_equal(p.nunits, 3);
		assert_int_equal(pm_plan_slot_for_items(&p, al, 1), 300 + 700 + 2 * 63);
		pm_plan_free(&p);
		pm_manifest_destroy(m2);
	}
	pm_manifest_destroy(m);
}

static void test_hist(void **state)
{
	struct pm_hist *h = calloc(1, sizeof(*h));
	struct pm_latency l;

	pm_hist_latency(h, &l);
	assert_true(l.p50 == 0 && l.max == 0);
	for (uint64_t i = 1; i <= 1000; i++)
		pm_hist_add(h, i * 1000);	/* 1 us .. 1 ms */
	pm_hist_latency(h, &l);
	/* within the 12.5% bucket width, never above the max */
	assert_true(l.p50 >= 500e-6 && l.p50 <= 500e-6 * 1.125);
	assert_true(l.p90 >= 900e-6 && l.p90 <= 900e-6 * 1.125);
	assert_true(l.p99 >= 990e-6 && l.p99 <= 1000e-6);
	assert_true(l.max == 1000e-6);
	assert_true(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max);
	pm_hist_add(h, 5);		/* tiny values have their own buckets */
	pm_hist_add(h, UINT64_MAX / 2);	/* huge ones do not overflow */
	pm_hist_latency(h, &l);
	assert_true(l.max > 1e9);
	free(h);
}

/* Batches of one rank's epoch, packed as the stream packs them; items counted into seen. */
static size_t rank_batches(struct pm_manifest *m, uint32_t rank, uint32_t world,
			   enum pm_shard_pad pad, bool shuffle, uint32_t epoch,
			   const uint32_t *align, uint64_t slot, uint32_t max_items,
			   uint32_t *seen)
{
	struct pm_plan p;
	size_t n = 0, k;
	uint64_t span;

	assert_int_equal(pm_plan_init(&p, m, rank, world, pad, shuffle, 9), 0);
	assert_int_equal(pm_plan_packing(&p, align, slot, max_items), 0);
	assert_int_equal(pm_plan_epoch(&p, epoch), 0);
	for (size_t pos = 0; pos < p.count; pos += k, n++) {
		k = pm_plan_batch(&p, pos, align, slot, max_items, &span);
		assert_true(k > 0);
		assert_true(span <= slot);
		for (size_t i = 0; i < k; i++)
			seen[p.order[pos + i]]++;
	}
	pm_plan_free(&p);
	return n;
}

/*
 * Equal steps: items of sizes 1..30000 in 64 KiB slots pack into different
 * batch counts per rank; every rank still gets the same number each epoch,
 * every item arrives (EXACT: once, but for at most one repeat per rank).
 */
static void test_equal_steps(void **state)
{
	static const enum pm_shard_pad pads[] = { PM_SHARD_EXACT, PM_SHARD_PAD, PM_SHARD_DROP };
	struct pm_manifest *m = items(1003, 30000);
	uint32_t align[2] = { 0, 0 }, *seen = calloc(1003, sizeof(*seen));
	bool differed = false;

	for (size_t pi = 0; pi < 3; pi++)
		for (uint32_t world = 2; world <= 8; world *= 2)
			for (uint32_t e = 0; e < 3; e++) {
				size_t first = 0, repeats = 0;

				memset(seen, 0, 1003 * sizeof(*seen));
				for (uint32_t r = 0; r < world; r++) {
					size_t nb = rank_batches(m, r, world, pads[pi], e > 0, e,
								 align, 65536, 0, seen);

					if (!r)
						first = nb;
					assert_int_equal(nb, first);
				}
				for (size_t i = 0; i < 1003; i++) {
					if (pads[pi] != PM_SHARD_DROP)
						assert_true(seen[i] >= 1);
					if (seen[i] > 1)
						repeats += seen[i] - 1;
				}
				if (pads[pi] == PM_SHARD_EXACT)
					assert_true(repeats <= world);
			}
	/* without equal steps (packing not given) the same shares differ */
	for (uint32_t r = 0; r < 8 && !differed; r++) {
		struct pm_plan p;
		size_t n = 0, k, n0 = 0;
		uint64_t span;

		for (uint32_t q = 0; q < 2; q++) {
			n = 0;
			assert_int_equal(pm_plan_init(&p, m, q ? r : 0, 8, PM_SHARD_EXACT, true, 9), 0);
			assert_int_equal(pm_plan_epoch(&p, 1), 0);
			for (size_t pos = 0; pos < p.count; pos += k, n++)
				k = pm_plan_batch(&p, pos, align, 65536, 0, &span);
			pm_plan_free(&p);
			if (!q)
				n0 = n;
		}
		differed = n != n0;
	}
	assert_true(differed);	/* the case is one that needs equalizing */
	free(seen);
	pm_manifest_destroy(m);
}

/*
 * Fixed item-count batches: the slot holds the largest batch the plan makes,
 * not batch_items of the dataset's largest items.  Every 10th item is large:
 * batches of 10 hold one each, shuffled ones a few; the old bound was 10.
 * With several ranks the slot holds every rank's batches, not only its own.
 */
static void test_slot_for_batches(void **state)
{
	struct pm_manifest *m;
	uint32_t align[1] = { 0 };
	uint64_t fp_big = 10000 + 63, fp_small = 100 + 63, bound, got;
	struct pm_plan p;

	assert_int_equal(pm_manifest_create(&m), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(pm_manifest_add(m, "/a", (uint64_t)i * 10000,
						 i % 10 ? 100 : 10000, false, 0, NULL, 0), 0);
	assert_int_equal(pm_plan_init(&p, m, 0, 1, PM_SHARD_EXACT, false, 0), 0);
	bound = pm_plan_slot_for_items(&p, align, 10);
	assert_int_equal(bound, 10 * fp_big);
	assert_int_equal(pm_plan_slot_for_batches(&p, align, 10, 5), fp_big + 9 * fp_small);
	pm_plan_free(&p);

	/* shuffled: every batch of every epoch fits, and far below the bound */
	for (uint32_t world = 1; world <= 3; world += 2) {
		assert_int_equal(pm_plan_init(&p, m, world - 1, world, PM_SHARD_EXACT, true, 4), 0);
		assert_int_equal(pm_plan_packing(&p, align, UINT64_MAX, 10), 0);
		got = pm_plan_slot_for_batches(&p, align, 10, 3);
		/* every rank's batches count: with three, one of them holds 5 large items */
		assert_true(got < bound * 6 / 10);
		for (uint32_t e = 0; e < 3; e++) {
			size_t k;
			uint64_t span;

			assert_int_equal(pm_plan_epoch(&p, e), 0);
			for (size_t pos = 0; pos < p.count; pos += k) {
				k = pm_plan_batch(&p, pos, align, got, 10, &span);
				assert_true(k > 0);
				/* a batch cut short by the slot would break fixed counts */
				assert_true(k == 10 || pos + k == p.count ||
					    (world > 1 && k >= 5));
			}
		}
		pm_plan_free(&p);
	}
	pm_manifest_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_shuffle_deterministic),
		cmocka_unit_test(test_sharding),
		cmocka_unit_test(test_plan_bad),
		cmocka_unit_test(test_place),
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_equal_steps),
		cmocka_unit_test(test_slot_for_batches),
		cmocka_unit_test(test_hist),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
