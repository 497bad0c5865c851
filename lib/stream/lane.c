// SPDX-License-Identifier: MIT
/*
 * Reading is done by lanes: a lane is one reader thread with its own
 * io_uring (SINGLE_ISSUER).  A lane starts a batch (takes the plan cursor
 * and a FREE slot under s->lock) and issues every read of that batch on its
 * own ring, so a slot in READING state belongs to the one lane filling it.
 * With several lanes the copies out of the page cache run in several threads
 * at once (see lane_count); s->lock guards state changes, the plan cursor
 * and counters.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "crc32c.h"
#include "ctx.h"
#include "stream_int.h"

/* --- item errors --- */

__attribute__((format(printf, 5, 6)))
static void item_fail(struct pm_stream *s, struct slot *sl, uint32_t k, int err,
		      const char *fmt, ...)
{
	const struct pm_batch_item *it = &sl->items[k];
	char what[200];
	va_list ap;

	if (sl->err)
		return;		/* the first failure names the batch */
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	sl->err = err;
	snprintf(sl->errmsg, sizeof(sl->errmsg),
		 "batch %llu, item %llu (%s offset %llu length %llu): %s (%s)",
		 (unsigned long long)sl->b.seq, (unsigned long long)it->index,
		 s->m->paths[it->path_id], (unsigned long long)it->file_offset,
		 (unsigned long long)it->length, what, strerror(-err));
}

/* --- reader lanes --- */

/*
 * A copy that failed after its batch was handed over (PM_HANDOFF_QUEUED: the
 * consumer never waited for it) stops the stream with its error, so bad
 * bytes never pass unreported (s->lock held).
 */
void pm_stream_copy_failed_late(struct pm_stream *s, struct slot *sl, int err)
{
	if (s->o.handoff != PM_HANDOFF_QUEUED || s->sticky_err)
		return;
	s->sticky_err = err;
	s->halt = true;
	snprintf(s->err, sizeof(s->err),
		 "batch %llu: its copy to the device failed after it was handed over (PM_HANDOFF_QUEUED): %s",
		 (unsigned long long)sl->b.seq, pm_ctx_last_error(s->ctx));
	pthread_cond_broadcast(&s->consumer_cv);
	pthread_cond_broadcast(&s->reader_cv);	/* idle lanes leave */
}

/* Whether event *ev fired (or failed: then nothing runs any more); forgets it if so. */
static bool event_passed(struct pm_stream *s, struct slot *sl, uint64_t *ev)
{
	int r;

	if (!*ev)
		return true;
	r = pm_event_query(s->ctx, *ev);
	if (!r)
		return false;
	if (ev == &sl->ev && !sl->copy_done) {
		sl->copy_done = true;
		pm_hist_add(&s->copy_hist, now_ns() - sl->t_copy0);
	}
	if (r < 0 && ev == &sl->ev)
		pm_stream_copy_failed_late(s, sl, r);
	pm_event_release(s->ctx, *ev);
	*ev = 0;
	return true;
}

/* A FREE slot nothing reads any more: its copy done, and the consumer's work released against. */
static struct slot *free_slot(struct pm_stream *s)
{
	s->slot_pending = false;
	for (uint32_t i = 0; i < s->nslots; i++) {
		struct slot *sl = &s->slots[i];

		if (sl->state != SLOT_FREE)
			continue;
		if (event_passed(s, sl, &sl->ev) && event_passed(s, sl, &sl->rel_ev))
			return sl;
		s->slot_pending = true;
	}
	return NULL;
}

/*
 * Whether lane l may start a batch: one is due, a slot is free, and the lane
 * reads fewer than its share of the prefetch, so that small batches spread
 * over the lanes (one lane queueing them all would copy them all).
 */
static bool can_start(struct pm_stream *s, struct lane *l)
{
	return !stopping(s) && !s->halt && !s->plan_done && s->ahead < s->o.prefetch &&
	       l->reading < (s->o.prefetch + s->nlanes - 1) / s->nlanes && free_slot(s);
}

int pm_stream_slot_reserve(struct slot *sl, uint32_t n)
{
	struct pm_batch_item *items;
	struct pm_place *place;
	uint32_t cap;

	if (n <= sl->cap)
		return 0;
	cap = n < 64 ? 64 : n;
	items = realloc(sl->items, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	sl->items = items;
	sl->b.items = items;
	place = realloc(sl->place, cap * sizeof(*place));
	if (!place)
		return -ENOMEM;
	sl->place = place;
	sl->cap = cap;
	return 0;
}

/* Batch done reading (or failed): check, queue the copy, hand it on. */
static void batch_finish(struct pm_stream *s, struct slot *sl, bool locked)
{
	uint64_t t = now_ns();
	int ret;

	if (!sl->err && !s->o.no_crc) {
		for (uint32_t k = 0; k < sl->b.nitems; k++) {
			const struct pm_mitem *mi = &s->m->items[sl->items[k].index];
			uint32_t crc;

			if (!mi->has_crc32c)
				continue;
			crc = pm_crc32c(0, (char *)sl->b.host + sl->items[k].slot_offset,
					sl->items[k].length);
			if (crc != mi->crc32c) {
				item_fail(s, sl, k, -EBADMSG,
					  "crc32c %08x, the manifest says %08x", crc,
					  mi->crc32c);
				break;
			}
		}
	}
	if (!sl->err && stopping(s)) {
		sl->err = -ECANCELED;
		snprintf(sl->errmsg, sizeof(sl->errmsg), "batch %llu: stream stopped",
			 (unsigned long long)sl->b.seq);
	}
	if (!sl->err && s->copies) {
		sl->copy_done = false;
		sl->t_copy0 = now_ns();
		/* the consumer's work on this slot finished before it was read into */
		ret = pm_copy_h2d(s->ctx, sl->b.dev, sl->b.host, sl->b.span, &sl->ev);
		if (ret) {
			sl->err = ret;
			sl->ev = 0;
			snprintf(sl->errmsg, sizeof(sl->errmsg),
				 "batch %llu: copy to the device failed: %s (%s)",
				 (unsigned long long)sl->b.seq,
				 pm_ctx_last_error(s->ctx), strerror(-ret));
		}
	}
	if (!locked)
		pthread_mutex_lock(&s->lock);
	if (!sl->err) {
		pm_hist_add(&s->read_hist, t - sl->t_read0);
		s->read_bytes += sl->read_bytes;
	}
	sl->state = sl->err ? SLOT_FAILED : s->copies ? SLOT_COPYING : SLOT_READY;
	sl->lane->reading--;
	if (sl->err && s->o.on_error == PM_ON_ERROR_STOP) {
		s->halt = true;		/* batches before this one still arrive */
		pthread_cond_broadcast(&s->reader_cv);	/* idle lanes leave */
	}
	pthread_cond_broadcast(&s->consumer_cv);
	if (!locked)
		pthread_mutex_unlock(&s->lock);
}

/*
 * One of the batch's populates completed; the last one lets its reads go.
 * A populate is a hint: a failure is not the batch's (its reads report
 * what is wrong with the file), but a kernel without MADV_POPULATE_READ
 * (before 5.14) or without io_uring's madvise is not asked again.
 */
static void populate_done(struct lane *l, struct pm_read *rd, int res)
{
	struct pm_stream *s = l->s;
	struct slot *sl = rd->owner;
	struct pm_popwin *w = rd->win;

	if (res == -EINVAL || res == -EOPNOTSUPP)
		l->no_populate = true;
	if (res == 0) {
		uint64_t off = w->off + (uint64_t)(rd->dst - w->addr);
		struct pm_sfile *f = &s->fs.f[w->path];

		__atomic_fetch_add(&s->populated_bytes, rd->len, __ATOMIC_RELAXED);
		if (!w->mincore_ok)
			pm_populated_mark(&f->populated, f->size, off, off + rd->len);
	}
	w->inflight--;
	sl->populating--;
}

/*
 * A read of a lazily opened file completed (res): check that the file it
 * opened is the one create saw (*res becomes -ESTALE, the item failed with
 * the sentence, if not), and give the table entry back.  True when O_DIRECT
 * was refused (-EINVAL): the read is queued again on l->retry, to be read
 * buffered in the places planned for O_DIRECT.
 */
static bool lazy_done(struct lane *l, struct pm_read *rd, int *res)
{
	struct pm_stream *s = l->s;
	struct slot *sl = rd->owner;
	uint32_t id = sl->items[rd->owner_item].path_id;
	bool drop = rd->open_err != 0, retry;
	char why[256];
	int ret = 0;

	/* the table is shared by the lanes */
	pthread_mutex_lock(&s->lock);
	if (rd->opened && !rd->open_err) {
		ret = pm_sfiles_check(&s->fs, id, &rd->stx, why, sizeof(why));
		drop |= ret != 0;
	}
	retry = !ret && *res == -EINVAL && rd->align && s->o.direct != PM_DIRECT_ON;
	if (retry) {
		pm_sfiles_direct_refused(&s->fs, id, *res);
		drop = true;
	}
	pm_sfiles_put(&s->fs, (uint32_t)(l - s->lanes), (uint32_t)rd->fd, id, drop);
	if (retry) {
		rd->next = l->retry;
		l->retry = rd;
	}
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		item_fail(s, sl, rd->owner_item, ret, "%s", why);
		*res = ret;
	}
	return retry;
}

/*
 * Queue again the reads whose O_DIRECT was refused, buffered (s->lock
 * held); true when one must wait for a table entry.  Stopping fails them.
 */
static bool retry_reads(struct pm_stream *s, struct lane *l)
{
	while (l->retry) {
		struct pm_read *rd = l->retry;
		struct slot *sl = rd->owner;
		uint32_t id = sl->items[rd->owner_item].path_id;
		bool open;
		int fd;

		if (stopping(s)) {
			l->retry = rd->next;
			item_fail(s, sl, rd->owner_item, -ECANCELED, "stream stopped");
			if (rd->stage >= 0) {
				l->free_stages |= 1U << rd->stage;	/* a range read's */
				rd->stage = -1;
			}
			rd->next = l->free_reads;
			l->free_reads = rd;
			if (!--sl->pending && sl->issued)
				batch_finish(s, sl, true);
			continue;
		}
		fd = pm_sfiles_get(&s->fs, (uint32_t)(l - s->lanes), id, &open);
		if (fd < 0)
			return true;
		l->retry = rd->next;
		rd->fd = fd;
		rd->open_path = open ? s->m->paths[id] : NULL;
		rd->opened = false;
		rd->open_err = 0;
		rd->align = s->fs.f[id].align;
		pm_reader_queue(&l->rd, rd);
	}
	return false;
}

/*
 * A coalesced read completed: copy its items from the staging buffer to
 * their places in the slot, or, when it failed, point rd->owner_item at the
 * item to blame (end of file: the first item it cut).  Frees the buffer.
 */
static void staged_done(struct lane *l, struct pm_read *rd, int res)
{
	struct slot *sl = rd->owner;
	const char *stage = l->stages[rd->stage];

	for (uint32_t k = rd->owner_item; k < rd->owner_item + rd->owner_items; k++) {
		const struct pm_batch_item *it = &sl->items[k];

		if (res) {
			if (res == -ENODATA && it->file_offset + it->length > rd->off + rd->done) {
				rd->owner_item = k;
				break;
			}
			continue;
		}
		memcpy((char *)sl->b.host + it->slot_offset, stage + (it->file_offset - rd->off),
		       it->length);
	}
	l->free_stages |= 1U << rd->stage;
	rd->stage = -1;
}

static void read_done(void *arg, struct pm_read *rd, int res)
{
	struct lane *l = arg;
	struct pm_stream *s = l->s;
	struct slot *sl = rd->owner;

	if (rd->populate) {
		populate_done(l, rd, res);
		rd->populate = false;
		rd->next = l->free_reads;
		l->free_reads = rd;
		return;
	}
	if (s->fs.lazy && lazy_done(l, rd, &res))
		return;		/* queued again, buffered */
	if (rd->stage >= 0)
		staged_done(l, rd, res);
	/* what the read transferred: O_DIRECT padding and a range's gaps too, end of file not */
	if (!res)
		sl->read_bytes += rd->done;
	if (res) {
		const struct pm_batch_item *it = &sl->items[rd->owner_item];

		/* a changed file was named by lazy_done: the first failure names the batch */
		if (rd->open_err)
			item_fail(s, sl, rd->owner_item, res, "cannot open the file");
		else if (res == -ENODATA)
			item_fail(s, sl, rd->owner_item, res,
				  "end of file at or after offset %llu before the item's end at %llu (file shrank or item past end of file)",
				  (unsigned long long)(rd->off + rd->done),
				  (unsigned long long)(it->file_offset + it->length));
		else
			item_fail(s, sl, rd->owner_item, res,
				  "read of %u bytes at offset %llu failed",
				  rd->len, (unsigned long long)rd->off);
		pthread_mutex_lock(&s->lock);	/* the consumer reads l->filling */
		if (l->filling == sl) {
			l->filling = NULL;	/* issue nothing more for it */
			sl->issued = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	rd->next = l->free_reads;
	l->free_reads = rd;
	if (!--sl->pending && sl->issued)
		batch_finish(s, sl, false);
}

/* Whether the byte at off of fd is in the page cache: a one-byte read that may not block. */
static bool cached_byte(int fd, uint64_t off)
{
	char c;
	struct iovec v = { .iov_base = &c, .iov_len = 1 };

	return preadv2(fd, &v, 1, (off_t)off, RWF_NOWAIT) == 1;
}

/*
 * Whether the run [start, end) looks cached (one not populated, or one a
 * stream populated before through a window since evicted): its first and
 * last bytes read without blocking.  Two one-byte reads cost far less than
 * WILLNEED walking a cached range page by page in a lane.  On a cold run
 * they start readahead of a few pages (RWF_NOWAIT does not stop it), and
 * may find those read by the time they look: then only the hint (WILLNEED
 * or the populate) is missed, the reads still fetch the run.
 */
static bool cached(int fd, uint64_t start, uint64_t end)
{
	return cached_byte(fd, start) && cached_byte(fd, end - 1);
}

/*
 * Populate the cold run [start, end) of file path through one of the lane's
 * windows (populate.h), in pieces so that the device gets several requests
 * at once; the batch's reads wait for them.  False when nothing was asked
 * for and the run is not known to be cached: the caller falls back to
 * WILLNEED.
 */
static bool populate_run(struct pm_stream *s, struct lane *l, struct slot *sl,
			 uint32_t path, uint64_t start, uint64_t end)
{
	struct pm_sfile *f = &s->fs.f[path];
	uint64_t nfree = 0, piece, a, e;
	struct pm_popwin *w;
	int ret;

	if (l->no_populate || !f->size_known || end - start < PM_POPULATE_MIN)
		return false;
	for (struct pm_read *rd = l->free_reads; rd; rd = rd->next)
		nfree++;
	if (!nfree)
		return false;
	ret = pm_popwin_get(&l->pop, path, f->fd, f->size, start, end, &w, &a, &e);
	if (ret < 0 && ret != -EBUSY)
		l->no_populate = true;	/* refused, or cannot tell what is cached: do not retry every run */
	if (ret <= 0)
		return ret == 0;	/* cached: nothing to ask for */
	/*
	 * Populated before, through a window since evicted: cached, unless
	 * reclaim took it since.  The one-byte reads tell (and only where
	 * reclaim did do they start readahead).
	 */
	if (!w->mincore_ok && pm_populated_all(&f->populated, a, e) &&
	    cached(f->fd, start, end))
		return true;
	piece = (e - a + nfree - 1) / nfree;
	piece = (piece + PM_POPULATE_ALIGN - 1) & ~(uint64_t)(PM_POPULATE_ALIGN - 1);
	if (piece > PM_POPULATE_PIECE_MAX)
		piece = PM_POPULATE_PIECE_MAX;	/* rd->len is 32 bits */
	/* pieces past the lane's free entries (huge runs, capped pieces) are read as they are */
	for (uint64_t o = a; o < e && l->free_reads; o += piece) {
		struct pm_read *rd = l->free_reads;

		l->free_reads = rd->next;
		memset(rd, 0, sizeof(*rd));
		rd->populate = true;
		rd->stage = -1;
		rd->win = w;
		rd->dst = w->addr + (o - w->off);
		rd->len = (uint32_t)(e - o < piece ? e - o : piece);
		rd->buf_index = -1;
		rd->owner = sl;
		w->inflight++;
		sl->populating++;
		pm_reader_queue(&l->rd, rd);
	}
	return true;
}

/*
 * Buffered reads: ask the page cache for the batch at once, in runs of
 * adjacent items (or close ones, when the lane coalesces), unless it is
 * there already.  With many reads in flight
 * readahead cannot see the order: it would read each run in small pieces
 * into 4 KiB folios.  Runs of PM_POPULATE_MIN and more are populated in
 * huge folios (populate_run).  Shorter ones, and every run where that
 * cannot be done, get WILLNEED: the kernel reads at most max(read_ahead_kb,
 * the device's largest I/O) of each run now, the lanes' reads the rest.
 */
static uint32_t coalesce_span(const struct pm_stream *s, const struct lane *l,
			      const struct slot *sl, uint32_t i, uint64_t a,
			      uint64_t *start, uint64_t *end);

static void readahead_batch(struct pm_stream *s, struct lane *l, struct slot *sl)
{
	uint64_t start = 0, end = 0, rs, re;
	uint32_t path = UINT32_MAX;

	for (uint32_t i = 0; i <= sl->b.nitems;) {
		const struct pm_batch_item *it = i < sl->b.nitems ? &sl->items[i] : NULL;

		if (it && (s->fs.f[it->path_id].align || s->fs.lazy)) {
			i++;
			continue;
		}
		/*
		 * What one coalesced read covers, gaps (tar headers) included: the same
		 * rule as the reads, so the page cache is asked for no gap they skip.
		 */
		if (it) {
			i += coalesce_span(s, l, sl, i, 1, &rs, &re);
			if (it->path_id == path && rs == end) {
				end = re;
				continue;
			}
		}
		if (path != UINT32_MAX && !populate_run(s, l, sl, path, start, end) &&
		    !cached(s->fs.f[path].fd, start, end))
			posix_fadvise(s->fs.f[path].fd, (off_t)start, (off_t)(end - start),
				      POSIX_FADV_WILLNEED);
		if (!it)
			break;
		path = it->path_id;
		start = rs;
		end = re;
	}
}

/* Pick the next batch from the plan into a free slot for lane l; false when none. */
static bool batch_start(struct pm_stream *s, struct lane *l)
{
	struct slot *sl = free_slot(s);
	uint64_t span, cur = 0, nitems = 0;
	void *dev;
	size_t k;

	if (s->pos == s->plan.count) {
		if (s->epoch + 1 >= s->o.epochs) {
			s->plan_done = true;
			pthread_cond_broadcast(&s->consumer_cv);
			pthread_cond_broadcast(&s->reader_cv);	/* idle lanes leave */
			return false;
		}
		pm_plan_epoch(&s->plan, ++s->epoch);
		s->pos = 0;
	}
	/* k units (samples), nitems items */
	k = pm_plan_batch(&s->plan, s->pos, s->palign, s->slot_bytes,
			  s->o.batch_items, &span);
	for (size_t u = 0; u < (k ? k : 1); u++)
		nitems += pm_unit_items(&s->plan, s->plan.order[s->pos + u]);
	dev = sl->b.dev;
	memset(&sl->b, 0, sizeof(sl->b));
	sl->b.seq = s->issued_seq++;
	sl->b.epoch = s->epoch;
	sl->b.slot = (uint32_t)(sl - s->slots);
	sl->b.host = (char *)pm_buf_ptr(s->buf) + (size_t)(sl - s->slots) * s->stride;
	sl->b.dev = dev;
	sl->err = 0;
	sl->errmsg[0] = 0;
	sl->pending = 0;
	sl->next_item = 0;
	sl->next_rel = 0;
	sl->read_bytes = 0;
	sl->issued = false;
	sl->populating = 0;
	sl->t_read0 = now_ns();
	if (nitems > UINT32_MAX || pm_stream_slot_reserve(sl, (uint32_t)nitems)) {
		k = 0;	/* one item (reserved at create) carries the failure */
		sl->err = -ENOMEM;
	}
	s->ahead++;
	sl->state = SLOT_READING;
	sl->lane = l;
	l->reading++;
	sl->b.items = sl->items;
	sl->b.nitems = k ? (uint32_t)nitems : 1;
	for (size_t i = 0, u = 0, j = 0; i < sl->b.nitems; i++) {
		uint64_t unit = s->plan.order[s->pos + u];
		uint64_t idx = pm_unit_first(&s->plan, unit) + j;
		const struct pm_mitem *mi = &s->m->items[idx];
		struct pm_batch_item *it = &sl->items[i];

		if (++j == pm_unit_items(&s->plan, unit)) {
			u++;	/* the next sample's items follow */
			j = 0;
		}

		it->index = idx;
		it->path_id = mi->path_id;
		it->reserved = 0;
		it->file_offset = mi->offset;
		it->length = mi->length;
		pm_plan_place(cur, mi, s->fs.align[mi->path_id], &sl->place[i]);
		cur = sl->place[i].end;
		it->slot_offset = sl->place[i].data_slot;
		sl->b.bytes += mi->length;
	}
	sl->b.span = k ? cur : 0;	/* packed with s->palign, placed with the files' own */
	s->pos += k ? k : 1;
	if (s->pos == s->plan.count && s->epoch + 1 >= s->o.epochs) {
		s->plan_done = true;	/* known now, so the consumer sees the end */
		pthread_cond_broadcast(&s->reader_cv);	/* idle lanes leave */
	}
	if (sl->err == -ENOMEM) {
		item_fail(s, sl, 0, -ENOMEM, "no memory for the batch's item list");
	} else if (!k) {
		item_fail(s, sl, 0, -EFBIG,
			  "needs %llu bytes, more than a slot (%llu bytes; raise batch_bytes)",
			  (unsigned long long)pm_plan_first_need(&s->plan, s->plan.order[s->pos - 1],
								 s->palign),
			  (unsigned long long)s->slot_bytes);
	}
	for (uint32_t i = 0; i < sl->b.nitems && !sl->err; i++) {
		const struct pm_batch_item *it = &sl->items[i];
		const struct pm_sfile *f = &s->fs.f[it->path_id];

		if (f->open_err)
			item_fail(s, sl, i, f->open_err, "cannot open the file");
		else if (f->size_known && it->file_offset + it->length > f->size)
			item_fail(s, sl, i, -ENODATA,
				  "past the end of the file (%llu bytes)",
				  (unsigned long long)f->size);
	}
	if (sl->err) {
		sl->issued = true;
		batch_finish(s, sl, true);
		return true;
	}
	/* its readahead is asked for once s->lock is dropped (it may block), then its reads */
	l->ra = sl;
	return true;
}

/* --- shard-sequential reads (enum pm_coalesce) --- */

/*
 * The items of lane l's batch from item i on that one coalesced read covers
 * (see enum pm_coalesce): their count, 1 when item i is read alone, and
 * [*start, *end), their bytes with the gaps between them, *start rounded
 * down to a (the file's O_DIRECT alignment, else 1).
 */
static uint32_t coalesce_span(const struct pm_stream *s, const struct lane *l,
			      const struct slot *sl, uint32_t i, uint64_t a,
			      uint64_t *start, uint64_t *end)
{
	const struct pm_batch_item *it = &sl->items[i];
	uint64_t gaps = 0, data = it->length, e = it->file_offset + it->length;
	uint64_t big = 0, nbig = 0;
	uint32_t n = 1;

	*start = it->file_offset / a * a;
	*end = e;
	if (!l->nstages)
		return 1;
	if (it->length >= PM_COALESCE_TINY) {
		big += it->length;
		nbig++;
	}
	while (i + n < sl->b.nitems) {
		const struct pm_batch_item *nx = &sl->items[i + n];
		uint64_t nend = nx->file_offset + nx->length;

		if (nx->path_id != it->path_id || nx->file_offset < e ||
		    nx->file_offset - e > PM_COALESCE_GAP ||
		    gaps + (nx->file_offset - e) > data + nx->length ||
		    (nend + a - 1) / a * a - *start > PM_COALESCE_BYTES)
			break;
		gaps += nx->file_offset - e;
		data += nx->length;
		if (nx->length >= PM_COALESCE_TINY) {
			big += nx->length;
			nbig++;
		}
		e = nend;
		n++;
	}
	/*
	 * Large items read fast alone; staged, they cost a second copy and fewer
	 * reads in flight.  A sample's tiny members (a label) do not make its
	 * large ones (an image) look small.
	 */
	if (n == 1 || (s->o.coalesce == PM_COALESCE_AUTO &&
		       (nbig ? big / nbig : data / n) >= PM_COALESCE_SMALL))
		return 1;
	*end = e;
	return n;
}

/*
 * The items of lane l's batch from sl->next_item on that one read covers:
 * their count (1: the item is read alone, in chunks, as without coalescing)
 * and the range [*off, *off + *len), of which *need bytes must arrive.  The
 * staging buffers are aligned to 4096: files with a larger or odd O_DIRECT
 * alignment are read item by item.
 */
static uint32_t coalesce_run(const struct pm_stream *s, const struct lane *l,
			     const struct slot *sl, uint64_t *off, uint64_t *len,
			     uint64_t *need)
{
	const struct pm_sfile *f = &s->fs.f[sl->items[sl->next_item].path_id];
	uint64_t a = f->align ? f->align : 1, start, end;
	uint32_t n;

	if (!l->nstages || sl->next_rel || (f->align && 4096 % f->align))
		return 1;
	n = coalesce_span(s, l, sl, sl->next_item, a, &start, &end);
	if (n == 1)
		return 1;
	*off = start;
	*need = end - start;
	*len = (end + a - 1) / a * a - start;
	return n;
}

/* Queue the next read of lane l's batch; false when its file must wait for a table entry or a staging buffer. */
static bool issue_one(struct pm_stream *s, struct lane *l)
{
	struct slot *sl = l->filling;
	const struct pm_place *pl = &sl->place[sl->next_item];
	const struct pm_batch_item *it = &sl->items[sl->next_item];
	const struct pm_sfile *f = &s->fs.f[it->path_id];
	struct pm_read *rd = l->free_reads;
	uint64_t chunk = s->o.chunk_bytes, len, data_end, off, need;
	bool open = false;
	uint32_t n;
	int fd, stage = -1;

	n = coalesce_run(s, l, sl, &off, &len, &need);
	if (n > 1 && !l->free_stages)
		return false;	/* the lane's reads in flight free one */
	if (s->fs.lazy) {
		/* a reference on the file's table entry, from here until the read completes */
		fd = pm_sfiles_get(&s->fs, (uint32_t)(l - s->lanes), it->path_id, &open);
		if (fd < 0)
			return false;	/* -EBUSY: its table entries have reads in flight */
	} else {
		fd = l->rd.files_registered ? (int)it->path_id : f->fd;
	}
	if (n > 1) {
		stage = __builtin_ctz(l->free_stages);
		l->free_stages &= ~(1U << stage);
	} else {
		if (f->align) {
			chunk = chunk / f->align * f->align;
			if (!chunk)
				chunk = f->align;
		}
		len = pl->read_len - sl->next_rel;
		if (len > chunk)
			len = chunk;
		data_end = pl->data_slot - pl->read_slot + it->length;
		off = pl->read_off + sl->next_rel;
		need = data_end - sl->next_rel < len ? data_end - sl->next_rel : len;
	}

	l->free_reads = rd->next;
	if (!s->t_first_read)
		s->t_first_read = now_ns();	/* under s->lock (fill) */
	rd->fd = fd;
	rd->fixed_file = l->rd.files_registered;
	rd->open_path = open ? s->m->paths[it->path_id] : NULL;
	rd->open_dir = s->fs.cwd;
	rd->open_err = 0;
	rd->opened = false;
	/* a coalesced read lands in the lane's staging buffer, not registered */
	rd->buf_index = stage < 0 ? l->buf_index[sl->b.slot] : -1;
	rd->align = f->align;
	rd->off = off;
	rd->dst = stage < 0 ? (char *)sl->b.host + pl->read_slot + sl->next_rel : l->stages[stage];
	rd->len = (uint32_t)len;
	rd->need = (uint32_t)need;
	rd->done = 0;
	rd->owner = sl;
	rd->owner_item = sl->next_item;
	rd->owner_items = n;
	rd->stage = stage;
	sl->pending++;
	pm_reader_queue(&l->rd, rd);

	if (n > 1) {
		s->coalesced_reads++;
		s->coalesced_items += n;
		sl->next_item += n - 1;
	} else if ((sl->next_rel += len) < pl->read_len) {
		return true;	/* the item's next chunk follows */
	}
	sl->next_rel = 0;
	if (++sl->next_item == sl->b.nitems) {
		sl->issued = true;
		l->filling = NULL;
	}
	return true;
}

/*
 * Queue lane l's reads while it has room; called with s->lock held.  True
 * when a read must wait: for a staging buffer (the lane's reads in flight
 * free one) or a file table entry (for one of the lane's own reads, or,
 * when it has none in flight, for another lane's).
 */
static bool fill(struct pm_stream *s, struct lane *l)
{
	while (l->free_reads && !stopping(s)) {
		if (!l->filling) {
			if (l->ra || !can_start(s, l) || !batch_start(s, l))
				break;	/* one readahead at a time, outside s->lock */
			continue;
		}
		if (l->filling->populating)
			break;	/* its reads wait for the pages (populate_run) */
		if (!issue_one(s, l))
			return true;
	}
	return false;
}

static void poll_copies(struct pm_stream *s)
{
	uint64_t t = now_ns();

	for (uint32_t i = 0; i < s->nslots; i++) {
		struct slot *sl = &s->slots[i];
		int r;

		/* PM_HANDOFF_QUEUED hands COPYING slots over: HELD and FREE ones count too */
		if (sl->state == SLOT_READING || !sl->ev || sl->copy_done)
			continue;	/* READING: its lane writes ev and copy_done unlocked */
		r = pm_event_query(s->ctx, sl->ev);
		if (r) {
			sl->copy_done = true;
			pm_hist_add(&s->copy_hist, t - sl->t_copy0);
		}
		if (r < 0)
			pm_stream_copy_failed_late(s, sl, r);
	}
}

/* The lane's share of opts.qd, the stream's most reads in flight. */
static unsigned int lane_qd(const struct pm_stream *s, const struct lane *l)
{
	uint32_t i = (uint32_t)(l - s->lanes);

	return s->o.qd / s->nlanes + (i < s->o.qd % s->nlanes);
}

/* The lane's ring, its files and buffer registered; -errno with err set. */
static int lane_setup(struct lane *l, char *err, size_t errlen)
{
	struct pm_stream *s = l->s;
	unsigned int qd = lane_qd(s, l);
	int ret = pm_reader_init(&l->rd, qd);

	if (ret) {
		snprintf(err, errlen, "io_uring_queue_init(%u): %s", qd, strerror(-ret));
		return ret;
	}
	/* one lane: io_uring's workers copy on the other cores (pm_reader_queue) */
	l->rd.punt_buffered = s->nlanes == 1;
	ret = pm_sfiles_register(&s->fs, (uint32_t)(l - s->lanes), &l->rd, err, errlen);
	if (ret)
		return ret;
	pm_reader_register_buf(&l->rd, s->buf, s->stride);
	for (uint32_t i = 0; i < s->nslots; i++)
		l->buf_index[i] = pm_reader_buf_index(&l->rd,
			(char *)pm_buf_ptr(s->buf) + (size_t)i * s->stride, s->stride);
	for (uint32_t i = 0; i < qd; i++) {
		l->reads[i].next = l->free_reads;
		l->free_reads = &l->reads[i];
	}
	return 0;
}

/* Sleep on reader_cv for at most 200 us (events fire without a signal). */
static void wait_briefly(struct pm_stream *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 200000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&s->reader_cv, &s->lock, &ts);
}

/* A lane's thread is done: the last one out ends the reading (s->lock held). */
static void lane_exit(struct pm_stream *s)
{
	if (++s->lanes_exited == s->nlanes)
		s->reader_exited = true;
	pthread_cond_broadcast(&s->consumer_cv);
	pthread_cond_broadcast(&s->reader_cv);
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct pm_stream *s = l->s;
	struct pm_reader *r = &l->rd;
	char err[ERRLEN], name[16];
	int ret, fails = 0;

	/* top -H, perf and the tests tell the readers by name */
	snprintf(name, sizeof(name), "pinmem-read%u", (unsigned int)(l - s->lanes));
	pthread_setname_np(pthread_self(), name);
	ret = lane_setup(l, err, sizeof(err));

	pthread_mutex_lock(&s->lock);
	if (ret && !s->setup_err) {
		s->setup_err = ret;
		snprintf(s->reader_errmsg, sizeof(s->reader_errmsg), "%s", err);
	}
	/* the last lane set up lets the others (and create) go */
	if (++s->lanes_setup == s->nlanes) {
		pthread_cond_broadcast(&s->reader_cv);
		pthread_cond_broadcast(&s->consumer_cv);
	}
	/* every lane's ring exists before any reads: create fails as a whole */
	while (s->lanes_setup < s->nlanes && !s->stop)
		pthread_cond_wait(&s->reader_cv, &s->lock);
	if (s->setup_err) {
		lane_exit(s);
		pthread_mutex_unlock(&s->lock);
		pm_reader_exit(r);	/* nothing was queued on it */
		return NULL;
	}
	for (;;) {
		bool blocked = retry_reads(s, l);

		blocked |= fill(s, l);

		if (l->ra) {
			struct slot *sl = l->ra;

			/* WILLNEED submits the batch's reads from the disk: not under s->lock */
			l->ra = NULL;
			pthread_mutex_unlock(&s->lock);
			readahead_batch(s, l, sl);
			pthread_mutex_lock(&s->lock);
			l->filling = sl;
			continue;
		}
		if (!r->inflight && blocked && !s->stop) {
			wait_briefly(s);	/* another lane's reads hold the file */
			continue;
		}
		if (!r->inflight) {
			uint64_t t0;

			if (s->stop || ((s->plan_done || s->halt) && !l->filling))
				break;
			/* nothing in flight and nothing to start: all slots busy */
			t0 = now_ns();
			if (++s->lanes_idle == s->nlanes)
				s->t_idle0 = t0;
			while (!can_start(s, l) && !s->stop && !s->plan_done && !s->halt) {
				/* prefetch full: handing a batch over wakes us */
				if (s->slot_pending && s->ahead < s->o.prefetch)
					wait_briefly(s);	/* an event to poll */
				else
					pthread_cond_wait(&s->reader_cv, &s->lock);
			}
			/* the readers waited while every lane did */
			if (s->lanes_idle-- == s->nlanes)
				s->reader_wait_ns += now_ns() - s->t_idle0;
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		ret = pm_reader_submit(r, 1);
		if (ret) {
			/* the kernel holds reads into our slots: retry, do not leave */
			if (++fails == 1000) {
				pthread_mutex_lock(&s->lock);
				l->ring_failed = true;
				if (!s->reader_err) {
					s->reader_err = ret;
					snprintf(s->reader_errmsg, sizeof(s->reader_errmsg),
						 "io_uring_enter: %s", strerror(-ret));
				}
				set_stop(s);
				break;
			}
			usleep(1000);
		} else {
			fails = 0;
		}
		pm_reader_reap(r, read_done, l);
		pthread_mutex_lock(&s->lock);
		poll_copies(s);
	}
	lane_exit(s);
	pthread_mutex_unlock(&s->lock);
	if (!l->ring_failed)
		pm_reader_exit(r);
	/* after a ring failure the kernel may still fault through the windows */
	pm_popwins_release(&l->pop, !l->ring_failed);
	return NULL;
}

/* Whether any file is read through the page cache. */
static bool buffered_files(const struct pm_stream *s)
{
	for (uint32_t i = 0; i < s->fs.n; i++)
		if (!s->fs.f[i].align && !s->fs.f[i].open_err)
			return true;
	return false;
}

/*
 * How many lanes read.  Buffered reads copy out of the page cache in the
 * thread that issues them: a lane per CPU this process may run on copies on
 * every core at once, where one thread (or io_uring's workers handing every
 * read back to it) was no faster than a pread loop.  At most DEF_LANES_MAX:
 * past that memory bandwidth, not cores, limits the copy.  Files opened as
 * they are read (fs.lazy) need at least one entry of the table per lane.
 * With O_DIRECT only, the device does the copying: one lane.
 */
static uint32_t lane_count(const struct pm_stream *s)
{
	cpu_set_t cpus;
	uint32_t n = s->o.readers;

	if (!n && !buffered_files(s))
		n = 1;	/* O_DIRECT only: the device copies, and each ring charges its registration */
	if (!n) {
		n = sched_getaffinity(0, sizeof(cpus), &cpus) ? 1 : (uint32_t)CPU_COUNT(&cpus);
		if (n > DEF_LANES_MAX)
			n = DEF_LANES_MAX;
	}
	if (n > s->o.qd)
		n = s->o.qd;	/* a lane has at least one read in flight */
	if (s->fs.lazy && n > s->fs.table)
		n = s->fs.table;
	return n ? n : 1;
}

/*
 * Lane l's staging buffers for coalesced reads (enum pm_coalesce), unless
 * coalescing is off: at most
 * MAX_STAGES and its share of qd.  Without memory for them the lane reads
 * item by item.
 */
static void stages_alloc(struct pm_stream *s, struct lane *l)
{
	uint32_t n = lane_qd(s, l) < MAX_STAGES ? lane_qd(s, l) : MAX_STAGES;

	if (s->o.coalesce == PM_COALESCE_OFF)
		return;
	l->stages = calloc(n, sizeof(*l->stages));
	if (!l->stages)
		return;
	for (; l->nstages < n; l->nstages++) {
		void *p;

		if (posix_memalign(&p, 4096, PM_COALESCE_BYTES))
			break;
		l->stages[l->nstages] = p;
		l->free_stages |= 1U << l->nstages;
	}
}

/* Start the lanes' threads; each sets up its ring (create waits for them). */
int pm_lanes_start(struct pm_stream *s)
{
	struct utsname uts;

	s->nlanes = lane_count(s);
	if (s->fs.lazy)
		pm_sfiles_parts(&s->fs, s->nlanes);
	s->lanes = calloc(s->nlanes, sizeof(*s->lanes));
	if (!s->lanes)
		return pm_ctx_error(s->ctx, -ENOMEM, "no memory for %u reader lanes", s->nlanes);
	if (uname(&uts))
		uts.release[0] = 0;
	for (uint32_t i = 0; i < s->nlanes; i++) {
		struct lane *l = &s->lanes[i];

		l->s = s;
		l->no_populate = !pm_populate_supported(uts.release);
		l->reads = calloc(lane_qd(s, l), sizeof(*l->reads));
		l->buf_index = calloc(s->nslots, sizeof(*l->buf_index));
		if (!l->reads || !l->buf_index)
			return pm_ctx_error(s->ctx, -ENOMEM, "no memory for %u reader lanes",
					    s->nlanes);
		stages_alloc(s, l);
	}
	for (uint32_t i = 0; i < s->nlanes; i++) {
		int ret = pthread_create(&s->lanes[i].thread, NULL, lane_main, &s->lanes[i]);

		if (ret) {
			/* the started lanes wait for every ring; let them go */
			pthread_mutex_lock(&s->lock);
			set_stop(s);
			pthread_cond_broadcast(&s->reader_cv);
			pthread_mutex_unlock(&s->lock);
			return pm_ctx_error(s->ctx, -ret, "cannot start reader thread %u of %u",
					    i + 1, s->nlanes);
		}
		s->lanes[i].started = true;
	}
	return 0;
}
