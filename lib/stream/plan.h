/* SPDX-License-Identifier: MIT */
/*
 * Plan: which items a rank reads in which order each epoch, and how they are
 * packed into batches that fit one slot.  Pure functions of the manifest and
 * the options, so every rank computes the same plan without talking.
 */
#ifndef PM_PLAN_H
#define PM_PLAN_H

#include <stdint.h>

#include "manifest.h"

/* Where an item goes in a slot and what is read for it. */
struct pm_place {
	uint64_t read_slot;	/* slot offset the read starts at */
	uint64_t read_off;	/* file offset the read starts at */
	uint64_t read_len;	/* bytes to read (aligned superset for O_DIRECT) */
	uint64_t data_slot;	/* slot offset of the item's first byte */
	uint64_t end;		/* slot offset after the read */
};

/*
 * The plan orders, shards and packs units: a manifest's samples (its
 * consecutive items that share a sample id), so that a sample's items are
 * never split over batches or ranks.  Without groups a unit is an item.
 */
struct pm_plan {
	const struct pm_manifest *m;
	size_t nunits;
	uint64_t *ufirst;	/* first item of unit u, [nunits] = items; NULL: unit u is item u */
	uint32_t rank, world;
	enum pm_shard_pad pad;
	bool shuffle;
	uint64_t seed;
	uint64_t *order;	/* unit indices of the current epoch, this rank */
	size_t count;		/* entries of order */
	uint64_t *perm;		/* scratch: the whole epoch's permutation of units */
	/* equal steps (world > 1, after pm_plan_packing): batch k is order[bounds[k] .. bounds[k + 1]) */
	const uint32_t *align;
	uint64_t slot_bytes;
	uint32_t max_items;
	size_t *bounds;
	size_t nbatches;
};

static inline uint64_t pm_unit_first(const struct pm_plan *p, uint64_t u)
{
	return p->ufirst ? p->ufirst[u] : u;
}

static inline uint64_t pm_unit_items(const struct pm_plan *p, uint64_t u)
{
	return p->ufirst ? p->ufirst[u + 1] - p->ufirst[u] : 1;
}

/* Units (or items) a rank gets per epoch out of n. */
size_t pm_plan_rank_count(size_t n, uint32_t rank, uint32_t world,
			  enum pm_shard_pad pad);
int pm_plan_init(struct pm_plan *p, const struct pm_manifest *m, uint32_t rank,
		 uint32_t world, enum pm_shard_pad pad, bool shuffle,
		 uint64_t seed);
/*
 * How batches are packed (the stream's slot size, item limit and the files'
 * alignments): from now on, with world > 1, each epoch's batches are cut so
 * that every rank gets the same number.  -ENOMEM.
 */
int pm_plan_packing(struct pm_plan *p, const uint32_t *align, uint64_t slot_bytes,
		    uint32_t max_items);
/*
 * Compute p->order and p->count for epoch (and its batch bounds, see
 * pm_plan_packing).  Allocates nothing: 0, or -EINVAL when equal steps
 * finds a rank needing more batches than the most any rank needs (cannot
 * happen; see equal_steps).
 */
int pm_plan_epoch(struct pm_plan *p, uint32_t epoch);
void pm_plan_free(struct pm_plan *p);

/*
 * Place item it after slot offset cur.  align is the file's O_DIRECT
 * alignment, or 0 for buffered reads (placed on PM_PLAN_BUF_ALIGN).
 */
#define PM_PLAN_BUF_ALIGN 64
/*
 * The alignment several ranks pack with when O_DIRECT may be used: its
 * placements bound those of every alignment that divides it (and buffered).
 */
#define PM_PLAN_DIRECT_ALIGN 4096
void pm_plan_place(uint64_t cur, const struct pm_mitem *it, uint32_t align,
		   struct pm_place *pl);
/* Worst-case slot bytes item it can take, wherever it is placed. */
uint64_t pm_plan_footprint(const struct pm_mitem *it, uint32_t align);
/*
 * Slot bytes unit u takes first in a batch (its items placed from offset
 * 0): it fits a slot of that many bytes, since every batch starts there.
 */
uint64_t pm_plan_first_need(const struct pm_plan *p, uint64_t u, const uint32_t *align);
/*
 * Units of the batch that starts at p->order[pos]: as many as fit
 * slot_bytes and max_items (0: no limit), each whole.  0 when even the
 * first does not fit.
 */
size_t pm_plan_batch(const struct pm_plan *p, size_t pos, const uint32_t *align,
		     uint64_t slot_bytes, uint32_t max_items, uint64_t *span);
/*
 * Smallest slot that holds every batch of max_items items the plan makes
 * for any rank over epochs (each epoch's order; one when not shuffled), or,
 * when that is too much work (epochs x items over 64 Mi), any max_items
 * items.  Every rank gets the same size: equal steps packs the other ranks'
 * shares with it.  Leaves the plan at epoch 0.
 */
uint64_t pm_plan_slot_for_batches(struct pm_plan *p, const uint32_t *align,
				  uint32_t max_items, uint32_t epochs);
/* Smallest slot that holds any max_items units (sum of the largest footprints). */
uint64_t pm_plan_slot_for_items(const struct pm_plan *p, const uint32_t *align,
				uint32_t max_items);

#endif
