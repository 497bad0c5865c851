// SPDX-License-Identifier: MIT
/* Streams: options, create and destroy (see stream_int.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ctx.h"
#include "stream_int.h"

void pm_stream_opts_init(struct pm_stream_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->slots = DEF_SLOTS;
	o->qd = DEF_QD;
	o->chunk_bytes = DEF_CHUNK;
	o->epochs = 1;
	o->world_size = 1;
}

/* --- create / destroy --- */

static int check_opts(struct pm_ctx *ctx, struct pm_stream_opts *o)
{
	if (!o->slots)
		o->slots = DEF_SLOTS;
	if (!o->prefetch || o->prefetch > o->slots)
		o->prefetch = o->slots;
	if (!o->qd)
		o->qd = DEF_QD;
	if (!o->chunk_bytes)
		o->chunk_bytes = DEF_CHUNK;
	if (!o->epochs)
		o->epochs = 1;
	if (!o->world_size)
		o->world_size = 1;
	if (o->slots > MAX_SLOTS)
		return pm_ctx_error(ctx, -EINVAL, "slots %u: at most %u", o->slots, MAX_SLOTS);
	if (o->qd > MAX_QD)
		return pm_ctx_error(ctx, -EINVAL, "queue depth %u: at most %u", o->qd, MAX_QD);
	if (o->readers > MAX_LANES || o->readers > o->qd)
		return pm_ctx_error(ctx, -EINVAL,
				    "readers %u: at most %u, and no more than the queue depth (%u)",
				    o->readers, MAX_LANES, o->qd);
	if (o->chunk_bytes < 4096 || (o->chunk_bytes & 4095) || o->chunk_bytes > (1U << 30))
		return pm_ctx_error(ctx, -EINVAL,
				    "chunk size %u: a multiple of 4096 up to 1 GiB",
				    o->chunk_bytes);
	if (o->rank >= o->world_size)
		return pm_ctx_error(ctx, -EINVAL, "rank %u is not below the world size %u",
				    o->rank, o->world_size);
	if ((unsigned)o->direct > PM_DIRECT_OFF || (unsigned)o->on_error > PM_ON_ERROR_SKIP ||
	    (unsigned)o->order > PM_ORDER_AS_COMPLETED ||
	    (unsigned)o->shard_pad > PM_SHARD_DROP || (unsigned)o->handoff > PM_HANDOFF_HOST ||
	    (unsigned)o->coalesce > PM_COALESCE_OFF)
		return pm_ctx_error(ctx, -EINVAL,
				    "unknown direct, on_error, order, shard_pad, handoff or coalesce value");
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i])
			return pm_ctx_error(ctx, -EINVAL,
					    "pm_stream_opts: reserved options must be zero (a program built for a newer libpinmem than %s?)",
					    pm_version());
	return 0;
}

/*
 * The alignments batches are packed with.  One rank packs with its files'
 * own.  Several ranks must pack alike (equal steps), but a file's O_DIRECT
 * alignment, and whether it is read buffered (lazily opened files are),
 * depend on the node and the open-files limit: they pack every file as if
 * read with PM_PLAN_DIRECT_ALIGN, which bounds the placement of every
 * alignment dividing it and of buffered reads (or, O_DIRECT off, as
 * buffered).  A file whose alignment does not divide it is read buffered.
 */
static int plan_aligns(struct pm_stream *s)
{
	uint32_t a = s->o.direct == PM_DIRECT_OFF ? 0 : PM_PLAN_DIRECT_ALIGN;
	char err[ERRLEN];
	int ret;

	if (s->o.world_size == 1) {
		s->palign = s->fs.align;
		return 0;
	}
	ret = pm_sfiles_cap_align(&s->fs, PM_PLAN_DIRECT_ALIGN, s->o.direct == PM_DIRECT_ON,
				  err, sizeof(err));
	if (ret)
		return pm_ctx_error(s->ctx, ret, "%s", err);
	s->palign = malloc((s->fs.n ? s->fs.n : 1) * sizeof(*s->palign));
	if (!s->palign)
		return pm_ctx_error(s->ctx, -ENOMEM, "no memory for the plan of %u files", s->fs.n);
	for (uint32_t i = 0; i < s->fs.n; i++)
		s->palign[i] = a;
	return 0;
}

/* Slot size and layout; needs the files' alignments. */
static int size_slots(struct pm_stream *s)
{
	struct pm_stream_opts *o = &s->o;
	uint32_t amax = 4096;

	if (o->batch_bytes) {
		s->slot_bytes = o->batch_bytes;
	} else if (o->batch_items) {
		/* the largest batch that comes up, not batch_items of the largest items */
		s->slot_bytes = pm_plan_slot_for_batches(&s->plan, s->palign, o->batch_items,
							 o->epochs);
		if (!s->slot_bytes)
			return pm_ctx_error(s->ctx, -ENOMEM, "no memory to size the slots");
	} else {
		s->slot_bytes = DEF_BATCH;
	}
	for (uint32_t i = 0; i < s->fs.n; i++)
		if (s->fs.align[i] > amax)
			amax = s->fs.align[i];
	/* round up only sizes that cannot wrap: near UINT64_MAX the stride would be 0 */
	if (s->slot_bytes <= PM_URING_IOVEC_MAX)
		s->stride = (s->slot_bytes + amax - 1) / amax * amax;
	if (s->slot_bytes > PM_URING_IOVEC_MAX || s->stride > PM_URING_IOVEC_MAX)
		return pm_ctx_error(s->ctx, -EINVAL,
				    "batch of %llu bytes: a slot is at most 1 GiB (io_uring buffer limit)",
				    (unsigned long long)s->slot_bytes);
	if (s->stride * o->slots / o->slots != s->stride)
		return pm_ctx_error(s->ctx, -EOVERFLOW, "slots * batch size overflows");
	return 0;
}

/*
 * An item (or sample) that does not fit a slot fails at create, not when
 * its batch comes up late in an epoch.  Exact: it fits when it fits first
 * in a batch (at slot offset 0, O_DIRECT head and tail padding included),
 * and the first in manifest order that does not is named.
 */
static int check_items_fit(struct pm_stream *s)
{
	for (size_t u = 0; u < s->plan.nunits; u++) {
		uint64_t i = pm_unit_first(&s->plan, u), n = pm_unit_items(&s->plan, u);
		const struct pm_mitem *mi = &s->m->items[i];
		uint64_t need = pm_plan_first_need(&s->plan, u, s->palign);
		char sample[64] = "";

		if (need <= s->slot_bytes)
			continue;
		if (n > 1)
			snprintf(sample, sizeof(sample), ", the first of a sample of %llu items,",
				 (unsigned long long)n);
		return pm_ctx_error(s->ctx, -EFBIG,
				    "item %llu (%s offset %llu length %llu)%s needs %llu bytes, more than a slot (%llu bytes; raise batch_bytes: pinstream --batch-bytes, pinmem.Stream(batch_bytes=...))",
				    (unsigned long long)i, s->m->paths[mi->path_id],
				    (unsigned long long)mi->offset,
				    (unsigned long long)mi->length, sample,
				    (unsigned long long)need,
				    (unsigned long long)s->slot_bytes);
	}
	return 0;
}

/* What this rank will read: epoch 0's share (and its repeat, if any) times epochs. */
static void totals(struct pm_stream *s)
{
	uint64_t items = 0, b = 0;

	/* exact bytes need each epoch's order; padding and drops make it differ */
	for (size_t k = 0; k < s->plan.count; k++) {
		uint64_t u = s->plan.order[k], first = pm_unit_first(&s->plan, u);

		for (uint64_t i = first; i < first + pm_unit_items(&s->plan, u); i++) {
			items++;
			b += s->m->items[i].length;
		}
	}
	s->total_items = items * s->o.epochs;
	s->total_bytes = b * s->o.epochs;	/* exact unless shuffled and sharded */
}

/*
 * pm_plan_epoch allocates nothing: its only failure is -EINVAL from equal
 * steps, a rank whose greedy packing needs more batches than the rank with
 * the most.  That cannot happen (every rank's count is part of that most,
 * and a short rank's repeat adds a unit only where it has fewer units than
 * batches), so no test reaches it; it is reported as what it would be, a
 * plan that contradicts itself, not as a lack of memory.
 */
static int plan_epoch_error(struct pm_stream *s, int err)
{
	return pm_ctx_error(s->ctx, err,
			    "epoch %u of rank %u of %u: the plan cannot cut this rank's share into as many batches as the other ranks' (%s; a libpinmem bug)",
			    s->epoch, s->o.rank, s->o.world_size, strerror(-err));
}

/*
 * Resume at batch o.start_batch: the plan packs the batches before it (per
 * epoch: the order, then each batch's items) without reading any.
 */
static int seek_batches(struct pm_stream *s)
{
	uint64_t done = 0, span;
	int ret;

	while (done < s->o.start_batch) {
		size_t k;

		if (s->pos == s->plan.count) {
			if (s->epoch + 1 >= s->o.epochs)
				return pm_ctx_error(s->ctx, -EINVAL,
						    "start_batch %llu is past the end: the stream has %llu batches",
						    (unsigned long long)s->o.start_batch,
						    (unsigned long long)done);
			ret = pm_plan_epoch(&s->plan, ++s->epoch);
			if (ret)
				return plan_epoch_error(s, ret);
			s->pos = 0;
			continue;
		}
		k = pm_plan_batch(&s->plan, s->pos, s->palign, s->slot_bytes,
				  s->o.batch_items, &span);
		s->pos += k ? k : 1;
		done++;
	}
	s->issued_seq = s->next_seq = done;
	return 0;
}

int pm_stream_create(struct pm_ctx *ctx, const struct pm_manifest *m,
		     const struct pm_stream_opts *opts, struct pm_stream **sp)
{
	struct pm_ctx_info info;
	struct pm_buf_opts bo = { 0 };
	struct pm_stream *s;
	char err[ERRLEN];
	int ret;

	*sp = NULL;
	ret = pm_ctx_check_owner(ctx, "pm_stream_create");
	if (ret)
		return ret;
	if (!m || !m->n)
		return pm_ctx_error(ctx, -EINVAL, "the manifest has no items");
	s = calloc(1, sizeof(*s));
	if (!s)
		return pm_ctx_error(ctx, -ENOMEM, "no memory for a stream");
	s->ctx = ctx;
	s->m = m;
	s->halt_seq = UINT64_MAX;
	s->t_start = now_ns();
	if (opts)
		s->o = *opts;
	else
		pm_stream_opts_init(&s->o);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->reader_cv, NULL);
	pthread_cond_init(&s->consumer_cv, NULL);
	ret = check_opts(ctx, &s->o);
	if (ret)
		goto fail;
	ret = pm_ctx_info(ctx, &info);
	if (ret)
		goto fail;
	s->backend = strcmp(info.backend, "none") != 0;
	s->copies = s->backend && s->o.handoff != PM_HANDOFF_HOST;

	s->slots = calloc(s->o.slots, sizeof(*s->slots));
	if (!s->slots) {
		ret = pm_ctx_error(ctx, -ENOMEM, "no memory for a stream of %u slots",
				   s->o.slots);
		goto fail;
	}
	ret = pm_sfiles_open(&s->fs, m, s->o.direct, s->o.on_error == PM_ON_ERROR_SKIP,
			     err, sizeof(err));
	if (ret) {
		ret = pm_ctx_error(ctx, ret, "%s", err);
		goto fail;
	}

	ret = pm_plan_init(&s->plan, m, s->o.rank, s->o.world_size, s->o.shard_pad,
			   s->o.shuffle, s->o.seed);
	if (ret) {
		ret = pm_ctx_error(ctx, ret, "no memory for the plan of %zu items", m->n);
		goto fail;
	}
	/* rank 0 gets the most: with none, every rank refuses alike (EXACT gives the others a repeat) */
	if (!pm_plan_rank_count(s->plan.nunits, 0, s->o.world_size, s->o.shard_pad)) {
		ret = pm_ctx_error(ctx, -EINVAL,
				   "%zu %s for %u ranks: PM_SHARD_DROP leaves every rank without items",
				   s->plan.nunits, s->plan.ufirst ? "samples" : "items",
				   s->o.world_size);
		goto fail;
	}
	pm_plan_epoch(&s->plan, 0);
	ret = plan_aligns(s);
	if (!ret)
		ret = size_slots(s);
	if (!ret)
		ret = check_items_fit(s);
	if (ret)
		goto fail;
	/* several ranks: the same number of batches on each, now that slots are sized */
	ret = pm_plan_packing(&s->plan, s->palign, s->slot_bytes, s->o.batch_items);
	if (ret) {
		ret = pm_ctx_error(ctx, ret, "no memory for the batch bounds of %u ranks' shares",
				   s->o.world_size);
		goto fail;
	}
	ret = pm_plan_epoch(&s->plan, 0);
	if (ret) {
		ret = plan_epoch_error(s, ret);
		goto fail;
	}
	totals(s);	/* with the item equal steps may repeat */
	ret = seek_batches(s);
	if (ret)
		goto fail;

	s->nslots = s->o.slots;
	bo.pin = s->o.pin;
	/* huge pages fault, pin and register in a fraction of the time */
	bo.pages = s->o.pages == PM_PAGES_DEFAULT ? PM_PAGES_THP : s->o.pages;
	bo.flags = s->o.buf_flags;
	bo.numa = s->o.numa;
	ret = pm_buf_alloc(ctx, s->stride * s->nslots, &bo, &s->buf);
	if (ret)
		goto fail;	/* pm_buf_alloc said why */
	for (uint32_t i = 0; i < s->nslots; i++) {
		s->slots[i].b.host = (char *)pm_buf_ptr(s->buf) + (size_t)i * s->stride;
		s->slots[i].b.slot = i;
		/*
		 * Room for one item from the start: a batch whose item list
		 * cannot grow later still records the item it fails on.
		 */
		ret = pm_stream_slot_reserve(&s->slots[i], 1);
		if (ret) {
			ret = pm_ctx_error(ctx, ret, "no memory for the slots' item lists");
			goto fail;
		}
		if (s->copies) {
			ret = pm_dev_alloc(ctx, s->slot_bytes, &s->slots[i].b.dev);
			if (ret)
				goto fail;
		}
	}
	ret = pm_lanes_start(s);
	if (ret)
		goto fail;
	pthread_mutex_lock(&s->lock);
	while (s->lanes_setup < s->nlanes)
		pthread_cond_wait(&s->consumer_cv, &s->lock);
	ret = s->setup_err;
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		ret = pm_ctx_error(ctx, ret, "%s", s->reader_errmsg);
		goto fail;
	}
	*sp = s;
	return 0;
fail:
	pm_stream_destroy(s);
	return ret;
}

static void drain_event(struct pm_stream *s, uint64_t ev)
{
	if (ev) {
		pm_event_wait(s->ctx, ev);
		pm_event_release(s->ctx, ev);
	}
}

void pm_stream_destroy(struct pm_stream *s)
{
	bool forked;

	if (!s)
		return;
	/* in a forked child the reader threads, the slots and the events are the parent's */
	forked = pm_ctx_forked(s->ctx);
	if (s->lanes && !forked) {
		pthread_mutex_lock(&s->lock);
		set_stop(s);
		pthread_cond_broadcast(&s->reader_cv);
		pthread_mutex_unlock(&s->lock);
		for (uint32_t i = 0; i < s->nlanes; i++)
			if (s->lanes[i].started)
				pthread_join(s->lanes[i].thread, NULL);
	}
	for (uint32_t i = 0; s->slots && i < s->o.slots; i++) {
		struct slot *sl = &s->slots[i];

		/* the copy and the consumer's work may read the slot until then */
		if (!forked) {
			drain_event(s, sl->ev);
			drain_event(s, sl->rel_ev);
			if (sl->b.dev)
				pm_dev_free(s->ctx, sl->b.dev);
		}
		free(sl->items);
		free(sl->place);
	}
	/* a ring that failed with reads in flight keeps its buffer: never reuse it */
	if (s->buf && !s->reader_err && !forked)
		pm_buf_free(s->ctx, s->buf);
	if (s->palign != s->fs.align)
		free(s->palign);
	pm_sfiles_close(&s->fs);
	pm_plan_free(&s->plan);
	free(s->slots);
	for (uint32_t i = 0; s->lanes && i < s->nlanes; i++) {
		free(s->lanes[i].reads);
		free(s->lanes[i].buf_index);
		/* after a ring failure the kernel may still write into them */
		for (uint32_t k = 0; k < s->lanes[i].nstages && !s->lanes[i].ring_failed; k++)
			free(s->lanes[i].stages[k]);
		free(s->lanes[i].stages);
	}
	free(s->lanes);
	/* a child's copies may list the parent's waiters: destroying them would block */
	if (!forked) {
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->reader_cv);
		pthread_cond_destroy(&s->consumer_cv);
	}
	free(s);
}
