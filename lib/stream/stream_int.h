/* SPDX-License-Identifier: MIT */
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
 */
#ifndef PM_STREAM_INT_H
#define PM_STREAM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "pinmem_stream.h"
#include "plan.h"
#include "populate.h"
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
#define MAX_STAGES	4	/* staging buffers per lane */

enum slot_state {
	SLOT_FREE,
	SLOT_READING,
	SLOT_COPYING,
	SLOT_READY,
	SLOT_FAILED,
	SLOT_HELD,
};

struct lane;

/*
 * Each hand-over of a slot's batch gives the consumer its own copy of b,
 * the next of SLOT_OUTS in turn: a pointer kept after its release (a double
 * release) is told from the batch now held in the slot until the slot was
 * handed over SLOT_OUTS - 1 more times.
 */
#define SLOT_OUTS	4

struct slot {
	struct pm_batch b;
	struct pm_batch out[SLOT_OUTS];	/* what the consumer got, out[(outs - 1) % SLOT_OUTS] last */
	uint64_t outs;		/* hand-overs so far (never wraps) */
	struct pm_batch_item *items;
	struct pm_place *place;
	uint32_t cap;
	enum slot_state state;
	uint32_t pending;	/* reads in flight */
	uint32_t next_item;	/* issue cursor */
	uint64_t next_rel;
	uint64_t read_bytes;	/* bytes its completed reads transferred (stats.read_bytes) */
	bool issued;		/* every read queued (or the batch failed) */
	uint32_t populating;	/* populates in flight: its reads wait for them (populate.h) */
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
	struct pm_read *retry;	/* reads to queue again buffered: O_DIRECT was refused (lazy files) */
	uint32_t reading;	/* its batches in READING state */
	bool ring_failed;	/* the kernel may hold reads into the slots */
	bool no_populate;	/* before 5.18, or windows or MADV_POPULATE_READ refused */
	struct pm_popwins pop;	/* its windows for populates */
	char **stages;		/* staging buffers of coalesced reads (enum pm_coalesce) */
	uint32_t nstages;
	uint32_t free_stages;	/* bit k: stages[k] is free */
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

	struct pm_stream_files fs;	/* s->fs.align: per path, where reads are placed */
	uint32_t *palign;	/* per path, what batches are packed with (plan_aligns) */

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
	bool in_next;		/* a thread is in pm_stream_next: a second one is refused */
	uint64_t next_seq;
	uint64_t halt_seq;	/* the batch that stopped the stream (PM_ON_ERROR_STOP), UINT64_MAX: none */
	int sticky_err;
	bool ended;
	char err[ERRLEN];
	char reader_errmsg[ERRLEN];

	/* stats, under lock */
	uint64_t t_start, t_end, t_first_read;
	uint64_t bytes, read_bytes, batches, items, failed_batches, failed_items;
	uint64_t consumer_wait_ns, reader_wait_ns;
	uint64_t total_items, total_bytes;
	uint64_t populated_bytes;	/* atomic: lanes add as populates complete */
	uint64_t coalesced_reads, coalesced_items;
	struct pm_hist read_hist, copy_hist;
};

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline bool stopping(struct pm_stream *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

static inline void set_stop(struct pm_stream *s)
{
	__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
}

int pm_stream_slot_reserve(struct slot *sl, uint32_t n);
/* A handed-over batch's copy failed (PM_HANDOFF_QUEUED): stop the stream with it (s->lock held). */
void pm_stream_copy_failed_late(struct pm_stream *s, struct slot *sl, int err);

/* Start the lanes' threads; each sets up its ring (create waits for them). */
int pm_lanes_start(struct pm_stream *s);

#endif
