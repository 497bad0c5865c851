// SPDX-License-Identifier: MIT
/*
 * Streams: a ring of pinned slots that recycles itself.
 *
 * A slot goes FREE -> READING (a lane owns it, reads in flight) ->
 * COPYING (device copy queued) or READY (no copy) or FAILED -> HELD (the
 * consumer has it) -> FREE.  A FREE slot is read into again only once its
 * last copy's event fired (PM_HANDOFF_QUEUED hands batches out before that)
 * and once the event of pm_stream_release_on fired, in every mode: the
 * consumer's work may read the host slot too (its own copy of labels from
 * b->host), not only the device buffer.  The lanes poll for both;
 * the consumer never blocks on them.  Nothing ever writes into a slot (host
 * or device) the consumer or the device still uses.
 *
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
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "crc32c.h"
#include "ctx.h"
#include "plan.h"
#include "reader.h"
#include "stream_files.h"
#include "stream_hist.h"

#define DEF_SLOTS	4
#define DEF_BATCH	(16ULL << 20)
#define DEF_QD		32
#define DEF_CHUNK	(1U << 20)
#define MAX_SLOTS	4096
#define MAX_QD		4096
#define DEF_LANES_MAX	4
#define MAX_LANES	64
_Static_assert(MAX_LANES <= PM_SFILE_PARTS, "a lazy file table part per lane");
#define ERRLEN		384

enum slot_state {
	SLOT_FREE,
	SLOT_READING,
	SLOT_COPYING,
	SLOT_READY,
	SLOT_FAILED,
	SLOT_HELD,
};

struct lane;

struct slot {
	struct pm_batch b;
	struct pm_batch_item *items;
	struct pm_place *place;
	uint32_t cap;
	enum slot_state state;
	uint32_t pending;	/* reads in flight */
	uint32_t next_item;	/* issue cursor */
	uint64_t next_rel;
	bool issued;		/* every read queued (or the batch failed) */
	int err;
	char errmsg[ERRLEN];
	struct lane *lane;	/* the lane reading it (READING) */
	uint64_t ev;		/* the copy's event; kept until it fired */
	uint64_t rel_ev;	/* pm_stream_release_on's event, until it is waited for */
	bool copy_done;
	uint64_t t_read0, t_copy0;
};

struct pm_stream;

/* One reader thread, its ring and its reads; filling is read under s->lock. */
struct lane {
	struct pm_stream *s;
	struct pm_reader rd;
	int *buf_index;		/* per slot: the ring's registered buffer, -1: none */
	struct pm_read *reads, *free_reads;
	struct slot *filling;	/* the batch it issues reads for */
	struct slot *ra;	/* started, its readahead not yet asked for */
	uint32_t reading;	/* its batches in READING state */
	bool ring_failed;	/* the kernel may hold reads into the slots */
	pthread_t thread;
	bool started;
};

struct pm_stream {
	struct pm_ctx *ctx;
	const struct pm_manifest *m;
	struct pm_stream_opts o;
	struct pm_plan plan;
	bool backend;
	bool copies;		/* a backend and a device buffer per slot (not PM_HANDOFF_HOST) */
	bool slot_pending;	/* a FREE slot waits for an event: the reader polls */

	struct pm_stream_files fs;	/* s->fs.align: per path, for the plan */

	struct pm_buf *buf;
	uint64_t slot_bytes, stride;
	uint32_t nslots;
	struct slot *slots;

	/* reader lanes */
	struct lane *lanes;
	uint32_t nlanes;
	uint32_t lanes_setup;	/* lanes whose ring is set up (or failed to) */
	uint32_t lanes_exited;
	uint32_t lanes_idle;	/* lanes waiting for a slot */
	uint64_t t_idle0;	/* when the last of them began to */
	int setup_err;
	uint32_t epoch;
	size_t pos;
	bool plan_done;
	uint64_t issued_seq;

	pthread_mutex_t lock;
	pthread_cond_t reader_cv, consumer_cv;
	bool stop;		/* destroy: finish what is in flight, nothing more */
	bool halt;		/* a batch failed under PM_ON_ERROR_STOP: start no new batch */
	bool reader_exited;	/* every lane exited */
	int reader_err;
	uint32_t ahead;		/* batches started, not yet handed out */
	uint32_t held;
	uint64_t next_seq;
	int sticky_err;
	bool ended;
	char err[ERRLEN];
	char reader_errmsg[ERRLEN];

	/* stats, under lock */
	uint64_t t_start, t_end, t_first_read;
	uint64_t bytes, read_bytes, batches, items, failed_batches, failed_items;
	uint64_t consumer_wait_ns, reader_wait_ns;
	uint64_t total_items, total_bytes;
	struct pm_hist read_hist, copy_hist;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void pm_stream_opts_init(struct pm_stream_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->slots = DEF_SLOTS;
	o->qd = DEF_QD;
	o->chunk_bytes = DEF_CHUNK;
	o->epochs = 1;
	o->world_size = 1;
}

static bool stopping(struct pm_stream *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

static void set_stop(struct pm_stream *s)
{
	__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
}

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

/* Whether event *ev fired (or failed: then nothing runs any more); forgets it if so. */
/*
 * A copy that failed after its batch was handed over (PM_HANDOFF_QUEUED: the
 * consumer never waited for it) stops the stream with its error, so bad
 * bytes never pass unreported (s->lock held).
 */
static void copy_failed_late(struct pm_stream *s, struct slot *sl, int err)
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
		copy_failed_late(s, sl, r);
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

static int slot_reserve(struct slot *sl, uint32_t n)
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
		s->read_bytes += sl->b.span;
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

static void read_done(void *arg, struct pm_read *rd, int res)
{
	struct lane *l = arg;
	struct pm_stream *s = l->s;
	struct slot *sl = rd->owner;

	if (s->fs.lazy) {
		/* the table is shared by the lanes */
		pthread_mutex_lock(&s->lock);
		pm_sfiles_put(&s->fs, sl->items[rd->owner_item].path_id, rd->open_err != 0);
		pthread_mutex_unlock(&s->lock);
	}
	if (res) {
		const struct pm_batch_item *it = &sl->items[rd->owner_item];

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

/*
 * Whether [start, end) looks cached: its first and last bytes read without
 * blocking.  Two one-byte reads cost far less than WILLNEED walking a cached
 * range page by page in a lane.
 */
static bool cached(int fd, uint64_t start, uint64_t end)
{
	char c;
	struct iovec v = { .iov_base = &c, .iov_len = 1 };

	return preadv2(fd, &v, 1, (off_t)start, RWF_NOWAIT) == 1 &&
	       preadv2(fd, &v, 1, (off_t)(end - 1), RWF_NOWAIT) == 1;
}

/*
 * Buffered reads: ask the page cache for the batch at once, in runs of
 * adjacent items, unless it is there already.  With many reads in flight
 * readahead cannot see the order; without this, cold buffered streams read
 * in small pieces.  The kernel reads at most max(read_ahead_kb, the
 * device's largest I/O) of each run now; the workers' own reads bring the
 * rest.  Asking in 2 MiB pieces to get all of it measured the same
 * (pinstream --compare --cold-only --rounds 3, three pairs: 1.25x, 1.30x,
 * 1.34x pread cold as is; 1.21x, 1.36x, 1.36x in pieces).
 */
static void readahead_batch(struct pm_stream *s, struct slot *sl)
{
	uint64_t start = 0, end = 0;
	uint32_t path = UINT32_MAX;

	for (uint32_t i = 0; i <= sl->b.nitems; i++) {
		const struct pm_batch_item *it = i < sl->b.nitems ? &sl->items[i] : NULL;

		if (it && (s->fs.f[it->path_id].align || s->fs.lazy))
			continue;
		if (it && it->path_id == path && it->file_offset == end) {
			end += it->length;
			continue;
		}
		if (path != UINT32_MAX && !cached(s->fs.f[path].fd, start, end))
			posix_fadvise(s->fs.f[path].fd, (off_t)start, (off_t)(end - start),
				      POSIX_FADV_WILLNEED);
		if (!it)
			break;
		path = it->path_id;
		start = it->file_offset;
		end = start + it->length;
	}
}

/* Pick the next batch from the plan into a free slot for lane l; false when none. */
static bool batch_start(struct pm_stream *s, struct lane *l)
{
	struct slot *sl = free_slot(s);
	uint64_t span, cur = 0;
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
	k = pm_plan_batch(&s->plan, s->pos, s->fs.align, s->slot_bytes,
			  s->o.batch_items, &span);
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
	sl->issued = false;
	sl->t_read0 = now_ns();
	if (slot_reserve(sl, k ? (uint32_t)k : 1)) {
		k = 0;	/* one item (reserved at create) carries the failure */
		sl->err = -ENOMEM;
	}
	s->ahead++;
	sl->state = SLOT_READING;
	sl->lane = l;
	l->reading++;
	sl->b.items = sl->items;
	sl->b.nitems = k ? (uint32_t)k : 1;
	for (size_t i = 0; i < sl->b.nitems; i++) {
		uint64_t idx = s->plan.order[s->pos + i];
		const struct pm_mitem *mi = &s->m->items[idx];
		struct pm_batch_item *it = &sl->items[i];

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
	sl->b.span = k ? span : 0;
	s->pos += sl->b.nitems;
	if (s->pos == s->plan.count && s->epoch + 1 >= s->o.epochs) {
		s->plan_done = true;	/* known now, so the consumer sees the end */
		pthread_cond_broadcast(&s->reader_cv);	/* idle lanes leave */
	}
	if (sl->err == -ENOMEM) {
		item_fail(s, sl, 0, -ENOMEM, "no memory for the batch's item list");
	} else if (!k) {
		item_fail(s, sl, 0, -EFBIG,
			  "needs %llu bytes, more than a slot (%llu bytes; raise the batch size)",
			  (unsigned long long)pm_plan_footprint(&s->m->items[sl->items[0].index],
				s->fs.align[sl->items[0].path_id]),
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
	l->ra = sl;	/* asked for once s->lock is dropped: it may block */
	l->filling = sl;
	return true;
}

/* Queue the next read of lane l's batch; false when its file must wait for a table entry. */
static bool issue_one(struct pm_stream *s, struct lane *l)
{
	struct slot *sl = l->filling;
	const struct pm_place *pl = &sl->place[sl->next_item];
	const struct pm_batch_item *it = &sl->items[sl->next_item];
	const struct pm_sfile *f = &s->fs.f[it->path_id];
	struct pm_read *rd = l->free_reads;
	uint64_t chunk = s->o.chunk_bytes, len, data_end;
	bool open = false;
	int fd;

	if (s->fs.lazy) {
		fd = pm_sfiles_get(&s->fs, (uint32_t)(l - s->lanes), it->path_id, &open);
		if (fd < 0)
			return false;	/* -EBUSY: its table entries have reads in flight */
	} else {
		fd = l->rd.files_registered ? (int)it->path_id : f->fd;
	}

	if (f->align) {
		chunk = chunk / f->align * f->align;
		if (!chunk)
			chunk = f->align;
	}
	len = pl->read_len - sl->next_rel;
	if (len > chunk)
		len = chunk;
	data_end = pl->data_slot - pl->read_slot + it->length;

	l->free_reads = rd->next;
	if (!s->t_first_read)
		s->t_first_read = now_ns();	/* under s->lock (fill) */
	rd->fd = fd;
	rd->fixed_file = l->rd.files_registered;
	rd->open_path = open ? s->m->paths[it->path_id] : NULL;
	rd->open_err = 0;
	rd->buf_index = l->buf_index[sl->b.slot];
	rd->align = f->align;
	rd->off = pl->read_off + sl->next_rel;
	rd->dst = (char *)sl->b.host + pl->read_slot + sl->next_rel;
	rd->len = (uint32_t)len;
	rd->need = data_end - sl->next_rel < len ? (uint32_t)(data_end - sl->next_rel)
						 : (uint32_t)len;
	rd->done = 0;
	rd->owner = sl;
	rd->owner_item = sl->next_item;
	sl->pending++;
	pm_reader_queue(&l->rd, rd);

	sl->next_rel += len;
	if (sl->next_rel == pl->read_len) {
		sl->next_rel = 0;
		if (++sl->next_item == sl->b.nitems) {
			sl->issued = true;
			l->filling = NULL;
		}
	}
	return true;
}

/*
 * Queue lane l's reads while it has room; called with s->lock held.  True
 * when a read must wait for a file table entry: for one of the lane's own
 * reads, or, when it has none in flight, for another lane's.
 */
static bool fill(struct pm_stream *s, struct lane *l)
{
	while (l->free_reads && !stopping(s)) {
		if (!l->filling) {
			if (l->ra || !can_start(s, l) || !batch_start(s, l))
				break;	/* one readahead at a time, outside s->lock */
			continue;
		}
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
			copy_failed_late(s, sl, r);
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
		bool blocked = fill(s, l);

		if (l->ra) {
			struct slot *sl = l->ra;

			/* WILLNEED submits the batch's reads from the disk: not under s->lock */
			l->ra = NULL;
			pthread_mutex_unlock(&s->lock);
			readahead_batch(s, sl);
			pthread_mutex_lock(&s->lock);
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
				if (s->slot_pending)
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
	return NULL;
}

/* --- consumer --- */

static bool in_flight(const struct slot *sl)
{
	return sl->state != SLOT_FREE && sl->state != SLOT_HELD;
}

static bool earlier_in_flight(const struct pm_stream *s, uint64_t seq)
{
	for (uint32_t i = 0; i < s->nslots; i++)
		if (in_flight(&s->slots[i]) && s->slots[i].b.seq < seq)
			return true;
	return false;
}

/* The slot pm_stream_next should look at next, or NULL. */
static struct slot *pick(struct pm_stream *s)
{
	struct slot *best = NULL, *oldest = NULL;

	for (uint32_t i = 0; i < s->nslots; i++) {
		struct slot *sl = &s->slots[i];

		if (s->o.order == PM_ORDER_IN_ORDER) {
			if (in_flight(sl) && sl->state != SLOT_READING &&
			    sl->b.seq == s->next_seq)
				return sl;
			continue;
		}
		if (!in_flight(sl) || sl->state == SLOT_READING)
			continue;
		/* stopping: every batch before the failed one arrives first */
		if (sl->state == SLOT_FAILED && s->o.on_error == PM_ON_ERROR_STOP &&
		    earlier_in_flight(s, sl->b.seq))
			continue;
		if (sl->state == SLOT_COPYING && !sl->copy_done &&
		    s->o.handoff == PM_HANDOFF_COPIED &&
		    pm_event_query(s->ctx, sl->ev) == 0) {
			if (!oldest || sl->b.seq < oldest->b.seq)
				oldest = sl;
			continue;
		}
		if (!best || sl->b.seq < best->b.seq)
			best = sl;
	}
	return best ? best : oldest;
}

static bool stream_over(struct pm_stream *s)
{
	if (!(s->plan_done || s->halt || s->reader_exited))
		return false;
	for (uint32_t i = 0; i < s->nlanes; i++)
		if (s->lanes[i].filling)
			return false;
	for (uint32_t i = 0; i < s->nslots; i++)
		if (in_flight(&s->slots[i]))
			return false;
	return s->reader_exited || s->plan_done;
}

/* Back to the ring; its events are checked before it is read into again. */
static void slot_free(struct pm_stream *s, struct slot *sl)
{
	sl->state = SLOT_FREE;
	pthread_cond_broadcast(&s->reader_cv);
}

/* -ECHILD (sentence in pm_stream_error) in a process forked after the stream's context was opened. */
static int owner_check(struct pm_stream *s, const char *call)
{
	int ret = pm_ctx_check_owner(s->ctx, call);

	if (ret)
		snprintf(s->err, sizeof(s->err), "%s", pm_ctx_last_error(s->ctx));
	return ret;
}

int pm_stream_next(struct pm_stream *s, struct pm_batch **batch)
{
	uint64_t t0 = now_ns();
	struct slot *sl;
	int ret = 0;

	*batch = NULL;
	ret = owner_check(s, "pm_stream_next");
	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->sticky_err) {
			ret = s->sticky_err;
			break;
		}
		/*
		 * A lane's ring failed: that is the error, before any batch the
		 * other lanes finished as "stream stopped" (they stop with it).
		 */
		if (s->reader_err) {
			ret = s->sticky_err = s->reader_err;
			snprintf(s->err, sizeof(s->err), "%s", s->reader_errmsg);
			break;
		}
		sl = pick(s);
		if (!sl) {
			if (stream_over(s)) {
				if (!s->ended) {
					s->ended = true;
					s->t_end = now_ns();
				}
				break;
			}
			if (s->held == s->nslots) {
				ret = -EDEADLK;
				snprintf(s->err, sizeof(s->err),
					 "the consumer holds all %u slots: release a batch before asking for the next",
					 s->nslots);
				break;
			}
			pthread_cond_wait(&s->consumer_cv, &s->lock);
			continue;
		}
		if (sl->state == SLOT_COPYING && s->o.handoff == PM_HANDOFF_COPIED) {
			uint64_t ev = sl->ev;

			pthread_mutex_unlock(&s->lock);
			ret = pm_event_wait(s->ctx, ev);
			pthread_mutex_lock(&s->lock);
			if (!sl->copy_done) {
				sl->copy_done = true;
				pm_hist_add(&s->copy_hist, now_ns() - sl->t_copy0);
			}
			if (ret) {
				sl->err = ret;
				snprintf(sl->errmsg, sizeof(sl->errmsg),
					 "batch %llu: copy to the device failed: %s (%s)",
					 (unsigned long long)sl->b.seq,
					 pm_ctx_last_error(s->ctx), strerror(-ret));
				sl->state = SLOT_FAILED;
				ret = 0;
			}
		}
		/* a lane held back by prefetch may start the next batch */
		if (s->ahead-- == s->o.prefetch)
			pthread_cond_broadcast(&s->reader_cv);
		if (s->o.order == PM_ORDER_IN_ORDER)
			s->next_seq++;
		if (sl->state == SLOT_FAILED) {
			s->failed_batches++;
			s->failed_items += sl->b.nitems;
			ret = sl->err;
			snprintf(s->err, sizeof(s->err), "%s", sl->errmsg);
			slot_free(s, sl);
			if (s->o.on_error == PM_ON_ERROR_SKIP) {
				ret = 0;
				continue;
			}
			s->sticky_err = ret;
			s->halt = true;
			pthread_cond_broadcast(&s->reader_cv);
			break;
		}
		sl->state = SLOT_HELD;
		s->held++;
		s->batches++;
		s->items += sl->b.nitems;
		s->bytes += sl->b.bytes;
		*batch = &sl->b;
		break;
	}
	s->consumer_wait_ns += now_ns() - t0;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* The slot of a batch the consumer holds (s->lock held), or NULL. */
static struct slot *held_slot(struct pm_stream *s, struct pm_batch *batch)
{
	struct slot *sl;

	if (!batch || batch->slot >= s->nslots)
		return NULL;
	sl = &s->slots[batch->slot];
	return &sl->b == batch && sl->state == SLOT_HELD ? sl : NULL;
}

int pm_stream_release(struct pm_stream *s, struct pm_batch *batch)
{
	struct slot *sl;

	if (owner_check(s, "pm_stream_release"))
		return -ECHILD;
	pthread_mutex_lock(&s->lock);
	sl = held_slot(s, batch);
	if (sl) {
		s->held--;
		slot_free(s, sl);
	}
	pthread_mutex_unlock(&s->lock);
	return sl ? 0 : -EINVAL;
}

int pm_stream_batch_wait(struct pm_stream *s, struct pm_batch *batch, void *cuda_stream)
{
	struct slot *sl;
	uint64_t ev = 0;
	int ret = owner_check(s, "pm_stream_batch_wait");

	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	sl = held_slot(s, batch);
	if (!sl)
		ret = -EINVAL;
	else if (s->copies && s->o.handoff == PM_HANDOFF_QUEUED)
		ev = sl->ev;	/* stays live while the slot is held */
	pthread_mutex_unlock(&s->lock);
	if (ev) {
		ret = pm_event_stream_wait(s->ctx, cuda_stream, ev);
		if (ret)
			snprintf(s->err, sizeof(s->err), "batch %llu: %s",
				 (unsigned long long)batch->seq, pm_ctx_last_error(s->ctx));
	}
	return ret;
}

int pm_stream_release_on(struct pm_stream *s, struct pm_batch *batch, void *cuda_stream)
{
	struct slot *sl;
	uint64_t ev = 0;
	int ret = owner_check(s, "pm_stream_release_on");

	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	sl = held_slot(s, batch);
	pthread_mutex_unlock(&s->lock);
	if (!sl)
		return -EINVAL;
	/* Recorded outside s->lock: the reader queues copies meanwhile. */
	if (s->backend) {
		ret = pm_event_record_on(s->ctx, cuda_stream, &ev);
		if (ret) {
			snprintf(s->err, sizeof(s->err), "batch %llu stays held: %s",
				 (unsigned long long)batch->seq, pm_ctx_last_error(s->ctx));
			return ret;
		}
	}
	pthread_mutex_lock(&s->lock);
	if (sl->rel_ev)		/* cannot happen: the slot was read into only after it passed */
		pm_event_release(s->ctx, sl->rel_ev);
	sl->rel_ev = ev;
	s->held--;
	slot_free(s, sl);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

const char *pm_stream_error(struct pm_stream *s)
{
	return s->err;
}

/* The lanes' notes, each named, when they differ. */
static void lane_notes(const struct pm_stream *s, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < s->nlanes; i++)
		if (s->lanes[i].rd.note[0] && n < len)
			n += snprintf(buf + n, len - n, "%sreader %u: %s", n ? "; " : "", i,
				      s->lanes[i].rd.note);
}

int pm_stream_stats(struct pm_stream *s, struct pm_stream_stats *st)
{
	uint64_t end;

	memset(st, 0, sizeof(*st));
	/* a forked child: s->lock may have been held by a parent thread at fork */
	if (owner_check(s, "pm_stream_stats"))
		return -ECHILD;
	pthread_mutex_lock(&s->lock);
	end = s->ended ? s->t_end : now_ns();
	st->bytes = s->bytes;
	st->read_bytes = s->read_bytes;
	st->batches = s->batches;
	st->items = s->items;
	st->failed_batches = s->failed_batches;
	st->failed_items = s->failed_items;
	st->elapsed_s = (end - s->t_start) / 1e9;
	st->gbps = st->elapsed_s > 0 ? s->bytes / st->elapsed_s / 1e9 : 0;
	if (s->t_first_read && end > s->t_first_read)
		st->io_s = (end - s->t_first_read) / 1e9;
	st->io_gbps = st->io_s > 0 ? s->bytes / st->io_s / 1e9 : 0;
	st->consumer_wait_s = s->consumer_wait_ns / 1e9;
	st->reader_wait_s = s->reader_wait_ns / 1e9;
	pm_hist_latency(&s->read_hist, &st->read_lat);
	pm_hist_latency(&s->copy_hist, &st->copy_lat);
	for (uint32_t i = 0; i < s->fs.n; i++) {
		if (s->fs.f[i].align)
			st->files_direct++;
		else if (!s->fs.f[i].open_err)
			st->files_buffered++;
	}
	/* every lane's ring is set up alike; a fallback may hit some lanes only */
	st->ring_flags = s->lanes[0].rd.flags;
	pm_reader_flag_names(st->ring_flags, st->ring_setup, sizeof(st->ring_setup));
	snprintf(st->ring_note, sizeof(st->ring_note), "%s", s->lanes[0].rd.note);
	for (uint32_t i = 1; i < s->nlanes; i++) {
		if (strcmp(s->lanes[i].rd.note, s->lanes[0].rd.note)) {
			lane_notes(s, st->ring_note, sizeof(st->ring_note));
			break;
		}
	}
	st->readers = s->nlanes;
	st->slots = s->nslots;
	st->slot_bytes = s->slot_bytes;
	st->pin = pm_buf_pin_mode(s->buf);
	st->numa_node = pm_buf_numa_node(s->buf);
	st->gpu_numa_node = s->ctx->gpu_node;
	st->total_items = s->total_items;
	st->total_bytes = s->total_bytes;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

uint32_t pm_stream_nfiles(struct pm_stream *s)
{
	return s->fs.n;
}

int pm_stream_file(struct pm_stream *s, uint32_t id, struct pm_stream_file *f)
{
	if (id >= s->fs.n)
		return -ERANGE;
	f->path = s->m->paths[id];
	f->direct = s->fs.f[id].align != 0;
	f->align = s->fs.f[id].align ? s->fs.f[id].align : 1;
	f->note = pm_sfiles_note(&s->fs, id);
	f->open_error = s->fs.f[id].open_err;
	return 0;
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
	    (unsigned)o->shard_pad > PM_SHARD_DROP || (unsigned)o->handoff > PM_HANDOFF_HOST)
		return pm_ctx_error(ctx, -EINVAL,
				    "unknown direct, on_error, order, shard_pad or handoff value");
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i] || o->reserved32)
			return pm_ctx_error(ctx, -EINVAL,
					    "pm_stream_opts: reserved options must be zero (a program built for a newer libpinmem than %s?)",
					    pm_version());
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
		s->slot_bytes = pm_plan_slot_for_batches(&s->plan, s->fs.align, o->batch_items,
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

/* An item larger than a slot fails at create, not when its batch comes up late in an epoch. */
static int check_items_fit(struct pm_stream *s)
{
	for (size_t i = 0; i < s->m->n; i++) {
		const struct pm_mitem *mi = &s->m->items[i];
		uint64_t need = pm_plan_footprint(mi, s->fs.align[mi->path_id]);

		if (need > s->slot_bytes)
			return pm_ctx_error(s->ctx, -EFBIG,
					    "item %zu (%s offset %llu length %llu) needs %llu bytes, more than a slot (%llu bytes; raise the batch size)",
					    i, s->m->paths[mi->path_id],
					    (unsigned long long)mi->offset,
					    (unsigned long long)mi->length,
					    (unsigned long long)need,
					    (unsigned long long)s->slot_bytes);
	}
	return 0;
}

static void totals(struct pm_stream *s)
{
	size_t per = s->plan.count;

	/* exact bytes need each epoch's order; padding and drops make it differ */
	s->total_items = (uint64_t)per * s->o.epochs;
	if (s->o.world_size == 1) {
		s->total_bytes = s->m->bytes * s->o.epochs;
	} else {
		uint64_t b = 0;

		for (size_t k = 0; k < per; k++)
			b += s->m->items[s->plan.order[k]].length;
		s->total_bytes = b * s->o.epochs;	/* exact unless shuffled */
	}
}

/*
 * How many lanes read.  Buffered reads copy out of the page cache in the
 * thread that issues them: a lane per CPU this process may run on copies on
 * every core at once, where one thread (or io_uring's workers handing every
 * read back to it) was no faster than a pread loop.  At most DEF_LANES_MAX:
 * past that memory bandwidth, not cores, limits the copy.  Files opened as
 * they are read (fs.lazy) need at least one entry of the table per lane.
 */
static uint32_t lane_count(const struct pm_stream *s)
{
	cpu_set_t cpus;
	uint32_t n = s->o.readers;

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

/* Start the lanes' threads; each sets up its ring (create waits for them). */
static int lanes_start(struct pm_stream *s)
{
	s->nlanes = lane_count(s);
	if (s->fs.lazy)
		pm_sfiles_parts(&s->fs, s->nlanes);
	s->lanes = calloc(s->nlanes, sizeof(*s->lanes));
	if (!s->lanes)
		return pm_ctx_error(s->ctx, -ENOMEM, "no memory for %u reader lanes", s->nlanes);
	for (uint32_t i = 0; i < s->nlanes; i++) {
		struct lane *l = &s->lanes[i];

		l->s = s;
		l->reads = calloc(lane_qd(s, l), sizeof(*l->reads));
		l->buf_index = calloc(s->nslots, sizeof(*l->buf_index));
		if (!l->reads || !l->buf_index)
			return pm_ctx_error(s->ctx, -ENOMEM, "no memory for %u reader lanes",
					    s->nlanes);
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
	if (!s->plan.order || !pm_plan_rank_count(m->n, s->o.rank, s->o.world_size,
						  s->o.shard_pad)) {
		ret = pm_ctx_error(ctx, -EINVAL, "rank %u of %u gets no items (%zu items)",
				   s->o.rank, s->o.world_size, m->n);
		goto fail;
	}
	pm_plan_epoch(&s->plan, 0);
	totals(s);
	ret = size_slots(s);
	if (!ret)
		ret = check_items_fit(s);
	if (ret)
		goto fail;
	/* several ranks: the same number of batches on each, now that slots are sized */
	if (pm_plan_packing(&s->plan, s->fs.align, s->slot_bytes, s->o.batch_items) ||
	    pm_plan_epoch(&s->plan, 0)) {
		ret = pm_ctx_error(ctx, -ENOMEM, "no memory for the plan's batches");
		goto fail;
	}

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
		ret = slot_reserve(&s->slots[i], 1);
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
	ret = lanes_start(s);
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
	pm_sfiles_close(&s->fs);
	pm_plan_free(&s->plan);
	free(s->slots);
	for (uint32_t i = 0; s->lanes && i < s->nlanes; i++) {
		free(s->lanes[i].reads);
		free(s->lanes[i].buf_index);
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
