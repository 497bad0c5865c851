// SPDX-License-Identifier: MIT
/*
 * Epoch order, sharding and batch packing, of units: a manifest's samples
 * (a tar's members of one WebDataset key, a group), each kept whole, or
 * its items when none are grouped.  The shuffle is a Fisher-Yates
 * permutation driven by splitmix64 seeded from (seed, epoch): the same seed
 * gives the same order on every machine and every rank (it is not PyTorch's
 * permutation).  Sharding follows DistributedSampler: rank r takes positions
 * r, r + world, ... of the epoch's order, after padding or dropping per
 * enum pm_shard_pad.
 *
 * Equal steps: with several ranks every rank delivers the same number of
 * batches per epoch, whatever the item sizes -- DDP runs collectives once
 * per step, so a rank with one batch more waits forever.  Greedy packing
 * gives ranks different counts when sizes differ, so each rank packs every
 * rank's share (the plan is a pure function of the manifest: O(items) per
 * epoch, nothing exchanged), and a rank with fewer batches splits its
 * fullest batches in two until it has as many.  A rank with fewer items
 * than that (one item less, in EXACT sharding) repeats its first item, as
 * PAD does; one with none (fewer items than ranks) reads the item PAD
 * would give it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, bound) without modulo bias (Lemire). */
static uint64_t bounded(uint64_t *s, uint64_t bound)
{
	unsigned __int128 m = (unsigned __int128)splitmix64(s) * bound;
	uint64_t low = (uint64_t)m;

	if (low < bound) {
		uint64_t t = -bound % bound;

		while (low < t) {
			m = (unsigned __int128)splitmix64(s) * bound;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

size_t pm_plan_rank_count(size_t n, uint32_t rank, uint32_t world,
			  enum pm_shard_pad pad)
{
	if (!world || rank >= world)
		return 0;
	switch (pad) {
	case PM_SHARD_PAD:
		return (n + world - 1) / world;
	case PM_SHARD_DROP:
		return n / world;
	default:
		return n > rank ? (n - rank + world - 1) / world : 0;
	}
}

int pm_plan_init(struct pm_plan *p, const struct pm_manifest *m, uint32_t rank,
		 uint32_t world, enum pm_shard_pad pad, bool shuffle,
		 uint64_t seed)
{
	size_t count;

	memset(p, 0, sizeof(*p));
	if (!world || rank >= world || pad > PM_SHARD_DROP)
		return -EINVAL;
	p->m = m;
	p->nunits = m->n;
	if (m->nsamples != m->n) {
		/* samples are runs of consecutive items with ascending ids */
		p->ufirst = malloc((m->nsamples + 1) * sizeof(*p->ufirst));
		if (!p->ufirst)
			return -ENOMEM;
		p->nunits = 0;
		for (size_t i = 0; i < m->n; i++)
			if (!i || m->items[i].sample != m->items[i - 1].sample)
				p->ufirst[p->nunits++] = i;
		p->ufirst[p->nunits] = m->n;
	}
	count = pm_plan_rank_count(p->nunits, rank, world, pad);
	p->rank = rank;
	p->world = world;
	p->pad = pad;
	p->shuffle = shuffle;
	p->seed = seed;
	/* one more: equal steps may repeat an item */
	p->order = malloc((count + 1) * sizeof(*p->order));
	if (shuffle)
		p->perm = malloc((p->nunits ? p->nunits : 1) * sizeof(*p->perm));
	if (!p->order || (shuffle && !p->perm)) {
		pm_plan_free(p);
		return -ENOMEM;
	}
	return 0;
}

void pm_plan_free(struct pm_plan *p)
{
	free(p->order);
	free(p->perm);
	free(p->bounds);
	free(p->ufirst);
	p->order = p->perm = p->ufirst = NULL;
	p->bounds = NULL;
}

/* Unit of position k of rank's share of the current epoch. */
static uint64_t share_item(const struct pm_plan *p, uint32_t rank, size_t k)
{
	size_t pos = (rank + k * (size_t)p->world) % p->nunits;

	if (rank == p->rank && k < p->count)
		return p->order[k];	/* this rank's, with a repeated item */
	return p->shuffle ? p->perm[pos] : pos;
}

/* Slot offset after unit u's items placed from cur. */
static uint64_t place_unit(const struct pm_plan *p, uint64_t u, uint64_t cur,
			   const uint32_t *align)
{
	uint64_t first = pm_unit_first(p, u), n = pm_unit_items(p, u);

	for (uint64_t i = first; i < first + n; i++) {
		const struct pm_mitem *it = &p->m->items[i];
		struct pm_place pl;

		pm_plan_place(cur, it, align[it->path_id], &pl);
		cur = pl.end;
	}
	return cur;
}

/* Units of the batch starting at position pos of rank's share (count units), greedy. */
static size_t pack(const struct pm_plan *p, uint32_t rank, size_t count, size_t pos,
		   const uint32_t *align, uint64_t slot_bytes, uint32_t max_items,
		   uint64_t *span)
{
	uint64_t cur = 0, end;
	size_t k;

	for (k = 0; pos + k < count; k++) {
		if (max_items && k == max_items)
			break;
		end = place_unit(p, share_item(p, rank, pos + k), cur, align);
		if (end > slot_bytes)
			break;
		cur = end;
	}
	*span = cur;
	return k;
}

static size_t count_batches(const struct pm_plan *p, uint32_t rank)
{
	size_t count = pm_plan_rank_count(p->nunits, rank, p->world, p->pad), n = 0;
	uint64_t span;

	for (size_t pos = 0, k; pos < count; pos += k, n++) {
		k = pack(p, rank, count, pos, p->align, p->slot_bytes, p->max_items, &span);
		if (!k)
			k = 1;	/* too big for a slot: pm_stream_create refuses it */
	}
	return n;
}

/* This rank's batch bounds for the epoch, as many batches as the rank with the most. */
static int equal_steps(struct pm_plan *p)
{
	size_t target = 0, n = 0, *b = p->bounds;
	uint64_t span;

	for (uint32_t r = 0; r < p->world; r++) {
		size_t c = count_batches(p, r);

		if (c > target)
			target = c;
	}
	if (p->count < target) {
		/* at most one short (see above); a rank with none takes its padded item, as PAD */
		p->order[p->count] = p->count ? p->order[0] : share_item(p, p->rank, 0);
		p->count++;
	}
	for (size_t pos = 0, k; pos < p->count; pos += k) {
		k = pack(p, p->rank, p->count, pos, p->align, p->slot_bytes, p->max_items, &span);
		if (!k)
			k = 1;
		if (n == target)
			return -EINVAL;	/* cannot be: every rank's greedy count is <= target */
		b[n++] = pos;
	}
	b[n] = p->count;
	/* split the fullest batch until there are target batches */
	while (n < target) {
		size_t best = 0;

		for (size_t i = 1; i < n; i++)
			if (b[i + 1] - b[i] > b[best + 1] - b[best])
				best = i;
		if (b[best + 1] - b[best] < 2)
			break;	/* fewer items than batches: cannot be after the repeat */
		memmove(&b[best + 2], &b[best + 1], (n - best) * sizeof(*b));
		b[best + 1] = b[best] + (b[best + 2] - b[best]) / 2;
		n++;
	}
	p->nbatches = n;
	return 0;
}

int pm_plan_packing(struct pm_plan *p, const uint32_t *align, uint64_t slot_bytes,
		    uint32_t max_items)
{
	/* a rank has at most one item more than another: bounds for all of them, + 1 */
	size_t most = pm_plan_rank_count(p->nunits, 0, p->world, p->pad) + 3;

	p->align = align;
	p->slot_bytes = slot_bytes;
	p->max_items = max_items;
	if (p->world == 1)
		return 0;
	free(p->bounds);
	p->bounds = malloc(most * sizeof(*p->bounds));
	return p->bounds ? 0 : -ENOMEM;
}

int pm_plan_epoch(struct pm_plan *p, uint32_t epoch)
{
	size_t n = p->nunits, count = pm_plan_rank_count(n, p->rank, p->world, p->pad);
	uint64_t s;

	if (p->shuffle) {
		s = p->seed ^ splitmix64(&(uint64_t){ (uint64_t)epoch + 1 });
		for (size_t i = 0; i < n; i++)
			p->perm[i] = i;
		for (size_t i = n; i > 1; i--) {
			size_t j = bounded(&s, i);
			uint64_t t = p->perm[i - 1];

			p->perm[i - 1] = p->perm[j];
			p->perm[j] = t;
		}
	}
	/* position k of this rank is position rank + k * world of the padded order */
	p->count = 0;
	for (size_t k = 0; k < count; k++)
		p->order[k] = share_item(p, p->rank, k);
	p->count = count;
	p->nbatches = 0;
	if (p->bounds)
		return equal_steps(p);
	return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

void pm_plan_place(uint64_t cur, const struct pm_mitem *it, uint32_t align,
		   struct pm_place *pl)
{
	if (!align) {
		pl->read_slot = align_up(cur, PM_PLAN_BUF_ALIGN);
		pl->read_off = it->offset;
		pl->read_len = it->length;
		pl->data_slot = pl->read_slot;
	} else {
		uint64_t head = it->offset % align;

		pl->read_slot = align_up(cur, align);
		pl->read_off = it->offset - head;
		pl->read_len = align_up(head + it->length, align);
		pl->data_slot = pl->read_slot + head;
	}
	pl->end = pl->read_slot + pl->read_len;
}

uint64_t pm_plan_footprint(const struct pm_mitem *it, uint32_t align)
{
	struct pm_place pl;

	pm_plan_place(0, it, align, &pl);
	return pl.read_len + (align ? align : PM_PLAN_BUF_ALIGN) - 1;
}

uint64_t pm_plan_first_need(const struct pm_plan *p, uint64_t u, const uint32_t *align)
{
	return place_unit(p, u, 0, align);
}

/* Worst-case slot bytes of unit u wherever it is placed. */
static uint64_t unit_footprint(const struct pm_plan *p, uint64_t u, const uint32_t *align)
{
	uint64_t first = pm_unit_first(p, u), n = pm_unit_items(p, u), sum = 0;

	for (uint64_t i = first; i < first + n; i++)
		sum += pm_plan_footprint(&p->m->items[i], align[p->m->items[i].path_id]);
	return sum;
}

size_t pm_plan_batch(const struct pm_plan *p, size_t pos, const uint32_t *align,
		     uint64_t slot_bytes, uint32_t max_items, uint64_t *span)
{
	if (p->nbatches) {
		/* equal steps: the batch that starts at pos ends at the next bound */
		size_t lo = 0, hi = p->nbatches;

		while (lo + 1 < hi) {
			size_t mid = (lo + hi) / 2;

			if (p->bounds[mid] <= pos)
				lo = mid;
			else
				hi = mid;
		}
		if (p->bounds[lo] == pos && (!max_items || p->bounds[lo + 1] - pos < max_items))
			max_items = (uint32_t)(p->bounds[lo + 1] - pos);
	}
	return pack(p, p->rank, p->count, pos, align, slot_bytes, max_items, span);
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

uint64_t pm_plan_slot_for_items(const struct pm_plan *p, const uint32_t *align,
				uint32_t max_items)
{
	uint64_t *fp, sum = 0;
	size_t n = p->nunits;

	fp = malloc((n ? n : 1) * sizeof(*fp));
	if (!fp)
		return 0;
	for (size_t u = 0; u < n; u++)
		fp[u] = unit_footprint(p, u, align);
	qsort(fp, n, sizeof(*fp), cmp_desc);
	for (size_t i = 0; i < n && i < max_items; i++)
		sum += fp[i];
	free(fp);
	return sum;
}

/* Epochs x items beyond which the slot is sized by the bound instead (setup stays short). */
#define EXACT_SLOT_WORK (64ULL << 20)

/*
 * Largest sum of footprints over rank's batches of max_items this epoch:
 * each starts at a multiple of max_items of its share, since the slot is
 * sized for every such batch; a short last one may get equal steps' repeat.
 */
static uint64_t share_slot(const struct pm_plan *p, uint32_t rank, const uint32_t *align,
			   uint32_t max_items)
{
	size_t count = pm_plan_rank_count(p->nunits, rank, p->world, p->pad);
	uint64_t most = 0;

	for (size_t pos = 0; pos < count || (!pos && p->world > 1); pos += max_items) {
		uint64_t sum = 0;
		size_t k;

		for (k = 0; k < max_items && pos + k < count; k++)
			sum += unit_footprint(p, share_item(p, rank, pos + k), align);
		/* equal steps may append the rank's first unit (or, with none, a padded one) */
		if (k < max_items && p->world > 1)
			sum += unit_footprint(p, share_item(p, rank, 0), align);
		if (sum > most)
			most = sum;
	}
	return most;
}

uint64_t pm_plan_slot_for_batches(struct pm_plan *p, const uint32_t *align,
				  uint32_t max_items, uint32_t epochs)
{
	uint32_t scan = p->shuffle ? epochs : 1;
	uint64_t most = 0;

	if ((uint64_t)scan * p->m->n > EXACT_SLOT_WORK)
		return pm_plan_slot_for_items(p, align, max_items);
	for (uint32_t e = 0; e < scan; e++) {
		pm_plan_epoch(p, e);
		/* every rank's batches, so that every rank sizes the same slot */
		for (uint32_t r = 0; r < p->world; r++) {
			uint64_t sum = share_slot(p, r, align, max_items);

			if (sum > most)
				most = sum;
		}
	}
	pm_plan_epoch(p, 0);
	return most;
}
