// SPDX-License-Identifier: MIT
/* Streams: the consumer (see stream_int.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "ctx.h"
#include "stream_int.h"

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

/*
 * PM_HANDOFF_QUEUED hands batches over before their copies completed, and
 * the lanes poll those copies only while they run.  Before the end is
 * declared every copy still outstanding is waited for (a host
 * synchronisation at the end of the stream only), and a failure stops the
 * stream as a lane would have.  s->lock held, dropped while waiting.
 */
static void settle_copies(struct pm_stream *s)
{
	if (!s->copies || s->o.handoff != PM_HANDOFF_QUEUED)
		return;
	for (uint32_t i = 0; i < s->nslots && !s->sticky_err; i++) {
		struct slot *sl = &s->slots[i];
		uint64_t ev = sl->ev;
		int r;

		if (!ev || sl->copy_done)
			continue;
		pthread_mutex_unlock(&s->lock);
		r = pm_event_wait(s->ctx, ev);
		if (!r)
			r = pm_event_query(s->ctx, ev);	/* the failure may show only here */
		pthread_mutex_lock(&s->lock);
		if (sl->ev != ev || sl->copy_done)
			continue;	/* a lane polled it meanwhile */
		sl->copy_done = true;
		pm_hist_add(&s->copy_hist, now_ns() - sl->t_copy0);
		if (r < 0)
			pm_stream_copy_failed_late(s, sl, r);
	}
}

/* Back to the ring; its events are checked before it is read into again. */
static void slot_free(struct pm_stream *s, struct slot *sl)
{
	sl->state = SLOT_FREE;
	pthread_cond_broadcast(&s->reader_cv);
}

/* A consumer call's failure sentence, under s->lock: the lanes write s->err too (copy_failed_late). */
__attribute__((format(printf, 2, 3)))
static void set_error(struct pm_stream *s, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&s->lock);
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&s->lock);
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
	if (s->in_next) {
		snprintf(s->err, sizeof(s->err),
			 "pm_stream_next called by a second thread while one waits in it: a stream has one consumer thread");
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	s->in_next = true;
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
				settle_copies(s);
				if (s->sticky_err)
					continue;
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
			if (sl->b.seq < s->halt_seq)
				s->halt_seq = sl->b.seq;	/* not handed over: a resume reads it */
			pthread_cond_broadcast(&s->reader_cv);
			break;
		}
		sl->state = SLOT_HELD;
		s->held++;
		s->batches++;
		s->items += sl->b.nitems;
		s->bytes += sl->b.bytes;
		*batch = &sl->out[sl->outs++ % SLOT_OUTS];
		**batch = sl->b;
		break;
	}
	s->consumer_wait_ns += now_ns() - t0;
	s->in_next = false;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * The slot of a batch the consumer holds (s->lock held), or NULL: the
 * slot's last hand-over, not an earlier one of the same slot (SLOT_OUTS).
 */
static struct slot *held_slot(struct pm_stream *s, struct pm_batch *batch)
{
	struct slot *sl;

	for (uint32_t i = 0; batch && i < s->nslots; i++) {
		sl = &s->slots[i];
		if (batch == &sl->out[(sl->outs - 1) % SLOT_OUTS])
			return sl->outs && sl->state == SLOT_HELD ? sl : NULL;
	}
	return NULL;
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
			set_error(s, "batch %llu: %s", (unsigned long long)batch->seq,
				  pm_ctx_last_error(s->ctx));
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
			set_error(s, "batch %llu stays held: %s", (unsigned long long)batch->seq,
				  pm_ctx_last_error(s->ctx));
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

int pm_stream_resume_batch(struct pm_stream *s, uint64_t *batch)
{
	uint64_t low;

	*batch = 0;
	if (owner_check(s, "pm_stream_resume_batch"))
		return -ECHILD;
	pthread_mutex_lock(&s->lock);
	/* batches not yet started, those in flight, and the one that stopped the stream */
	low = s->issued_seq < s->halt_seq ? s->issued_seq : s->halt_seq;
	for (uint32_t i = 0; i < s->nslots; i++)
		if (in_flight(&s->slots[i]) && s->slots[i].b.seq < low)
			low = s->slots[i].b.seq;
	pthread_mutex_unlock(&s->lock);
	*batch = low;
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
	st->populated_bytes = __atomic_load_n(&s->populated_bytes, __ATOMIC_RELAXED);
	st->coalesced_reads = s->coalesced_reads;
	st->coalesced_items = s->coalesced_items;
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

int pm_stream_batch_field(struct pm_stream *s, const struct pm_batch *b, const char *field,
			  const struct pm_batch_item **out, uint32_t max)
{
	uint32_t n = 0;

	if (!b || !field)
		return -EINVAL;
	for (uint32_t i = 0; i < b->nitems; i++) {
		const char *f = pm_manifest_field(s->m, b->items[i].index);

		if (!f || strcmp(f, field))
			continue;
		if (n < max)
			out[n] = &b->items[i];
		n++;
	}
	return (int)n;
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
