/* SPDX-License-Identifier: MIT */
/*
 * libpinmem streams: read dataset items from files straight into pinned batch
 * slots with io_uring, copy each batch to the device, recycle the slot.
 *
 * A manifest (struct pm_manifest) lists items: a path, a byte offset, a
 * length and optionally a crc32c.  Its text form, one item per line:
 *
 *     # comment (also after an item, separated by white space)
 *     path offset length [crc32c]
 *
 * offset and length are decimal or 0x-hex; crc32c is 8 hex digits (0x
 * optional).  A relative path is relative to the manifest's directory.  A
 * relative path in the manifest itself (pm_manifest_add) is read in the
 * working directory of pm_stream_create, whatever the program's is later.  A
 * backslash escapes the next character, so "a\ b" is the path "a b".  Empty
 * lines are ignored; a zero length, an offset + length that overflows, or any
 * other malformed line is an error naming the line number.
 *
 * A stream walks the manifest epoch by epoch (optionally shuffled with a seed,
 * and sharded by rank like PyTorch's DistributedSampler), packs the items into
 * batches that fit one slot, reads them with one io_uring (registered files,
 * READ_FIXED into the registered slots, O_DIRECT where the file allows it),
 * checks crc32c, queues an async copy of the slot to its device buffer and
 * hands the batch to the consumer (see "GPU hand-off" below).  A slot is
 * reused only after the consumer released its batch.
 *
 * GPU hand-off (struct pm_stream_opts.handoff):
 *
 *   PM_HANDOFF_COPIED  (default) a batch is delivered once its copy to
 *                      batch->dev completed; any stream may read it.
 *                      pm_stream_next blocks the consumer thread until the
 *                      copy completed (cudaEventSynchronize): simple, but a
 *                      host synchronisation per batch.  GPU consumers
 *                      should use QUEUED.
 *   PM_HANDOFF_QUEUED  a batch is delivered as soon as its copy is queued;
 *                      order GPU work after it with pm_stream_batch_wait()
 *                      (cudaStreamWaitEvent on the copy's event).  A copy
 *                      that fails after delivery stops the stream: the next
 *                      pm_stream_next returns its error (before it returns
 *                      the end, it waits for the copies still queued).  No
 *                      host synchronisation on the consumer's thread until
 *                      then.
 *   PM_HANDOFF_HOST    no device buffers (batch->dev is NULL); the slots are
 *                      pinned and registered, the consumer copies from
 *                      batch->host on its own stream.
 *
 * Release a batch read by GPU work with pm_stream_release_on(s, b, stream):
 * the slot (its host memory and its device buffer, in every mode) is
 * rewritten only after the work queued on that stream before the call
 * completed; the reader threads wait for that, the consumer never does.  The
 * usual loop, one process per GPU (opts: cuda_device = LOCAL_RANK):
 *
 *     while (!pm_stream_next(s, &b) && b) {
 *             pm_stream_batch_wait(s, b, stream);   // QUEUED: after the copy
 *             forward(b->dev, stream);              // kernels on `stream`
 *             pm_stream_release_on(s, b, stream);   // reuse after them
 *     }
 *
 * A plain pm_stream_release() says the consumer is done with the slot now,
 * which is right only for host consumers or after a synchronisation.
 *
 * Files: up to 4096 (and half the open-files limit) are opened at create,
 * each kept open.  More are opened as they are read, into a bounded io_uring
 * table, with O_DIRECT where their file system allows it (the alignment is
 * learned per device at create; a file whose O_DIRECT open or read is
 * refused all the same is read buffered, pm_stream_file's note says why).
 * A file opened as it is read must be the file create saw: one whose device
 * or inode differ (renamed over), or whose size or modification time differ
 * from its first open's, fails its items with -ESTALE, the sentence naming
 * its path.
 *
 * Errors: calls return 0 or a negative errno.  pm_stream_create records its
 * failure sentence in pm_ctx_last_error(); a failed batch's sentence (naming
 * the item, its file, offset and length, and the errno) is pm_stream_error().
 *
 * Thread safety: a manifest is built by one thread and then read-only; a
 * stream's calls are for one consumer thread (the stream runs its own reader
 * threads, opts.readers), except pm_stream_stats which any thread may call.
 */
#ifndef PINMEM_STREAM_H
#define PINMEM_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinmem.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pm_manifest;
struct pm_stream;

/* One item of a manifest; path lives as long as the manifest. */
struct pm_item {
	const char *path;
	uint32_t path_id;	/* index of path among the manifest's paths */
	bool has_crc32c;
	uint32_t crc32c;
	uint64_t offset;
	uint64_t length;	/* never 0 */
};

/* Create an empty manifest.  One thread. */
PM_API int pm_manifest_create(struct pm_manifest **mp);
/* Free a manifest (NULL is fine).  One thread. */
PM_API void pm_manifest_destroy(struct pm_manifest *m);
/* Append one item; -EINVAL for length 0 or overflow (message in err).  One thread. */
PM_API int pm_manifest_add(struct pm_manifest *m, const char *path,
			   uint64_t offset, uint64_t length, bool has_crc32c,
			   uint32_t crc32c, char *err, size_t errlen);
/* Append a whole file cut into items of item_bytes (0: one item); an empty file adds none; -ENOENT etc. for unreadable, -EINVAL for a FIFO, directory or other non-regular file.  One thread. */
PM_API int pm_manifest_add_file(struct pm_manifest *m, const char *path,
				uint64_t item_bytes, char *err, size_t errlen);
/* Append the items of manifest text; name and base_dir are for messages and relative paths.  One thread. */
PM_API int pm_manifest_parse(struct pm_manifest *m, const char *text,
			     size_t len, const char *name, const char *base_dir,
			     char *err, size_t errlen);
/* Append the items of a manifest file (see the format above).  One thread. */
PM_API int pm_manifest_load(struct pm_manifest *m, const char *path,
			    char *err, size_t errlen);
/*
 * Append one item per regular member of a tar archive (POSIX ustar, GNU
 * long names and base-256 sizes, pax path/size records), read in place by
 * offset from the archive.  Members are grouped into samples by WebDataset
 * key (the member's path up to the first dot of its file name), as
 * webdataset's group_by_keys does: consecutive members with one key, a
 * new sample when the key changes or a field repeats; a member's field
 * (pm_manifest_field) is the rest of its name after that dot, lower-cased
 * ("000001.Input.NPY": key "000001", field "input.npy").  A stream never
 * splits a sample over batches or ranks, shuffles and shards whole samples,
 * and batch_items counts samples.
 * Empty members and archives add no items.  A bad archive (truncated, corrupt header checksum, a member past the end,
 * an unreadable size) is -EINVAL with a sentence naming the archive and the
 * header's offset, and adds nothing.  One thread.
 */
PM_API int pm_manifest_add_tar(struct pm_manifest *m, const char *path,
			       char *err, size_t errlen);
/* Sample number of item i (items not from a tar or a group are a sample each); -ERANGE when out of range.  Any thread. */
PM_API int64_t pm_manifest_sample(const struct pm_manifest *m, size_t i);
/* Field name of item i in its sample (a tar member's name after its key: "input.npy"), "" for none, NULL when out of range.  Any thread. */
PM_API const char *pm_manifest_field(const struct pm_manifest *m, size_t i);
/*
 * Make the items from first to the last one added one sample (several files
 * of one sample, say), item first + k named fields[k] (fields NULL, or an
 * entry NULL or "": no name).  -EINVAL, changing nothing, when first is out
 * of range, splits the sample of the item before it, or a name repeats.
 * One thread.
 */
PM_API int pm_manifest_group(struct pm_manifest *m, size_t first, const char *const *fields,
			     char *err, size_t errlen);
/* Number of items.  Any thread. */
PM_API size_t pm_manifest_count(const struct pm_manifest *m);
/* Sum of item lengths.  Any thread. */
PM_API uint64_t pm_manifest_bytes(const struct pm_manifest *m);
/* Number of distinct paths.  Any thread. */
PM_API uint32_t pm_manifest_npaths(const struct pm_manifest *m);
/* Path number id, NULL when out of range.  Any thread. */
PM_API const char *pm_manifest_path(const struct pm_manifest *m, uint32_t id);
/* Item i; -ERANGE when out of range.  Any thread. */
PM_API int pm_manifest_item(const struct pm_manifest *m, size_t i,
			    struct pm_item *item);

/* crc32c (Castagnoli) of buf, continuing crc (start with 0), as manifests give it.  Any thread. */
PM_API uint32_t pm_crc32c(uint32_t crc, const void *buf, size_t len);

/* Whether a file is read with O_DIRECT. */
enum pm_direct {
	PM_DIRECT_AUTO = 0,	/* O_DIRECT where the file system allows it, else buffered */
	PM_DIRECT_ON,		/* O_DIRECT or fail (-EINVAL naming the file) */
	PM_DIRECT_OFF,		/* buffered (page cache) reads */
};

/*
 * Shard-sequential reads (struct pm_stream_opts.coalesce): consecutive items
 * of a batch from one file, in file order, with small gaps between them (tar
 * members and their headers), are read as one range of up to
 * PM_COALESCE_BYTES (O_DIRECT where the file is, aligned) into a staging
 * buffer of the reader thread and copied to their places in the slot.  A
 * run takes the next item while the gap before it is at most
 * PM_COALESCE_GAP and the run's gap bytes stay at most its item bytes; a
 * run of one item is read as before.  AUTO coalesces runs whose items
 * average under PM_COALESCE_SMALL, not counting items under PM_COALESCE_TINY
 * when the run has larger ones (a label beside an image): larger items read
 * fast alone, and staged they would cost a second copy and have fewer reads
 * in flight.  Buffered runs are asked of the page cache as one range
 * (WILLNEED or a populate) by the same rule, gaps included and no other.
 * Each reader thread (readers) has up to 4 staging buffers of
 * PM_COALESCE_BYTES, 4 MiB a thread, allocated at create unless coalescing
 * is off; they are not pinned.  A failed range read fails the batch, naming
 * the first of its items the error reaches (the item end of file cut, else
 * the run's first).  Files opened as they are read (see "Files" above)
 * coalesce too: a range read opens its file as an item's read does.
 */
enum pm_coalesce {
	PM_COALESCE_AUTO = 0,	/* runs whose items average under PM_COALESCE_SMALL (see above) */
	PM_COALESCE_ON,		/* every run, whatever its items' sizes */
	PM_COALESCE_OFF,	/* one read per item (and per chunk_bytes), as before */
};
#define PM_COALESCE_BYTES	(1U << 20)
#define PM_COALESCE_GAP		(64U << 10)
#define PM_COALESCE_SMALL	(64U << 10)
#define PM_COALESCE_TINY	(4U << 10)

/* What a failed batch does to the stream. */
enum pm_on_error {
	PM_ON_ERROR_STOP = 0,	/* every batch before the failed one arrives (PM_ORDER_AS_COMPLETED: in any order, and some after it may too), then pm_stream_next returns its error on every call */
	PM_ON_ERROR_SKIP,	/* the batch is dropped and counted; streaming goes on */
};

/* Which ready batch pm_stream_next returns. */
enum pm_order {
	PM_ORDER_IN_ORDER = 0,	/* batch sequence order */
	PM_ORDER_AS_COMPLETED,	/* whichever batch finished first */
};

/*
 * Sharding when the item count is not a multiple of world_size:
 * EXACT gives every item to exactly one rank (ranks differ by at most one
 * item); PAD repeats items from the start of the epoch's order so every rank
 * gets the same count (DistributedSampler, drop_last=False); DROP drops the
 * tail so every rank gets the same count (drop_last=True).
 *
 * Whatever the item sizes, every rank gets the same number of batches per
 * epoch (DDP hangs otherwise): a rank that packs into fewer batches splits
 * its fullest ones, and under EXACT a rank with one item less than needed
 * repeats its first item of the epoch.  With fewer items than ranks, EXACT
 * gives a rank without an item of its own the one PAD would (a repeat),
 * and DROP fails create on every rank alike (-EINVAL).  The packing and
 * the slot size are a function of the manifest, the options and world_size
 * only, the same on every rank: with world_size > 1 items are packed as if every file were
 * read with O_DIRECT alignment 4096 (as if buffered with PM_DIRECT_OFF),
 * whatever each node's file systems allow and whether its files are opened
 * lazily, and a file whose O_DIRECT alignment does not divide 4096 is read
 * buffered (PM_DIRECT_ON: create fails).
 */
enum pm_shard_pad {
	PM_SHARD_EXACT = 0,
	PM_SHARD_PAD,
	PM_SHARD_DROP,
};

/* When a batch is handed to the consumer (see "GPU hand-off" above). */
enum pm_handoff {
	PM_HANDOFF_COPIED = 0,	/* after its copy to batch->dev completed */
	PM_HANDOFF_QUEUED,	/* once its copy is queued; pm_stream_batch_wait orders after it */
	PM_HANDOFF_HOST,	/* no device buffer: batch->dev is NULL, the consumer copies */
};

/* Stream options; zero means the default given in brackets. */
struct pm_stream_opts {
	uint32_t slots;		/* ring slots [4] */
	uint32_t prefetch;	/* most batches read ahead of the consumer [slots] */
	/*
	 * Slot size; a batch takes items while they fit [16 MiB, or with
	 * batch_items the largest batch the plan makes for any rank].  An item
	 * fits when it fits first in a batch (at offset 0, its O_DIRECT head
	 * and tail padding included); create fails with -EFBIG naming the first
	 * item in manifest order that does not.
	 */
	uint64_t batch_bytes;
	uint32_t batch_items;	/* most samples per batch (items when none are grouped) [no limit] */
	uint32_t qd;		/* most reads in flight [32] */
	uint32_t chunk_bytes;	/* largest single read of an item; large items are split [1 MiB]; a coalesced read (enum pm_coalesce) is not: it covers up to PM_COALESCE_BYTES (alignment included) whatever chunk_bytes is */
	uint32_t epochs;	/* passes over the manifest [1]; a batch never spans two */
	enum pm_direct direct;
	enum pm_on_error on_error;
	enum pm_order order;
	bool shuffle;		/* permute items each epoch, from seed and epoch */
	bool no_crc;		/* do not check the manifest's crc32c values */
	uint64_t seed;
	uint32_t rank;		/* this process's shard [0] */
	uint32_t world_size;	/* number of shards [1] */
	enum pm_shard_pad shard_pad;
	unsigned int buf_flags;	/* extra PM_BUF_* flags for the slot buffer */
	enum pm_pin_mode pin;	/* pin mode asked for the slot buffer [auto] */
	enum pm_page_kind pages;	/* pages asked for the slot buffer [PM_PAGES_DEFAULT asks for THP: slots are large and long-lived] */
	enum pm_handoff handoff;	/* when batches are delivered [PM_HANDOFF_COPIED] */
	uint32_t numa;		/* NUMA node of the slots: PM_NUMA_* [the GPU's node] */
	/*
	 * Reader threads, each with its own io_uring and its share of qd; a
	 * batch is read by one of them [the CPUs this process may run on, at
	 * most 4; 1 when every file is read with O_DIRECT].
	 * Buffered reads copy out of the page cache in these threads.  Each
	 * ring registers the slots (io_uring charges RLIMIT_MEMLOCK per ring
	 * without CAP_IPC_LOCK; a lane refused reads unregistered, ring_note
	 * says so).  A run of adjacent buffered items of 2 MiB or more that
	 * is not cached is first faulted into the page cache in huge folios
	 * through a read-only MADV_HUGEPAGE mapping of the file (Linux 5.18
	 * and later), so later epochs copy out of 2 MiB folios; each thread
	 * keeps up to 8 such mappings of 256 MiB while the stream lives, and
	 * their pages count in the process's RSS as mapped page cache.
	 */
	uint32_t readers;
	enum pm_coalesce coalesce;	/* shard-sequential reads (see enum pm_coalesce) [auto] */
	/*
	 * Resume: the first batch handed over is batch number start_batch of
	 * the stream these options make (b->seq counts from it, over epochs),
	 * found from the plan alone (a function of the manifest, the options,
	 * the seed, the epoch and the rank): nothing before it is read.
	 * Equal to the stream's number of batches: nothing is left (the first
	 * pm_stream_next returns the end); more: create fails (-EINVAL).  [0]
	 */
	uint64_t start_batch;
	/*
	 * Room to grow: new options are carved out of it, so a program built
	 * against this header keeps working with a later library.  Must be
	 * zero (pm_stream_opts_init zeroes it): -EINVAL otherwise.
	 */
	uint64_t reserved[6];
};

/* One item of a delivered batch. */
struct pm_batch_item {
	uint64_t index;		/* item index in the manifest */
	uint32_t path_id;
	uint32_t reserved;
	uint64_t file_offset;
	uint64_t length;
	uint64_t slot_offset;	/* item bytes are host + slot_offset and dev + slot_offset */
};

/* A batch handed to the consumer; valid until pm_stream_release or pm_stream_release_on. */
struct pm_batch {
	uint64_t seq;		/* batch number in stream order, from 0 */
	uint32_t epoch;
	uint32_t slot;
	void *host;		/* the slot in pinned host memory */
	void *dev;		/* its device copy; NULL with backend "none" or PM_HANDOFF_HOST */
	uint64_t span;		/* bytes of the slot in use (copied to dev) */
	uint64_t bytes;		/* item bytes (sum of lengths) */
	uint32_t nitems;
	const struct pm_batch_item *items;
};

/* How one file of a stream is read. */
struct pm_stream_file {
	const char *path;
	bool direct;		/* O_DIRECT */
	uint32_t align;		/* offset and memory alignment used (1: buffered) */
	const char *note;	/* why it is buffered, "" when direct */
	int open_error;		/* -errno when it could not be opened (skip policy) */
};

/* Latency percentiles in seconds. */
struct pm_latency {
	double p50, p90, p99, max;
};

struct pm_stream_stats {
	uint64_t bytes;		/* item bytes delivered */
	uint64_t read_bytes;	/* bytes the reads of delivered batches transferred from files: O_DIRECT alignment padding and the gaps a coalesced read spans (tar headers) included */
	uint64_t batches;	/* batches delivered */
	uint64_t items;		/* items delivered */
	uint64_t failed_batches;	/* batches that failed (skipped or stopping) */
	uint64_t failed_items;	/* items in failed batches */
	double elapsed_s;	/* from create to now (or to the end of the stream) */
	double gbps;		/* bytes / elapsed_s / 1e9 */
	double io_s;		/* from the first read queued to now or the end: setup left out, as fio counts */
	double io_gbps;		/* bytes / io_s / 1e9 */
	double consumer_wait_s;	/* time pm_stream_next waited for data: input-bound */
	double reader_wait_s;	/* time the reader waited for a free slot: consumer-bound */
	struct pm_latency read_lat;	/* per batch: first read queued to last read done */
	struct pm_latency copy_lat;	/* per batch: copy queued to copy done */
	uint32_t files_direct;	/* files read with O_DIRECT */
	uint32_t files_buffered;
	uint32_t ring_flags;	/* io_uring setup flags obtained */
	char ring_setup[64];	/* the same as "SINGLE_ISSUER|DEFER_TASKRUN", or "none" */
	char ring_note[160];	/* what fell back (plain fds, unregistered buffers) and why, "" if nothing */
	uint32_t slots;
	uint64_t slot_bytes;
	enum pm_pin_mode pin;	/* pin mode of the slot buffer */
	uint64_t total_items;	/* items this rank will see over all epochs, equal steps' repeats included (shuffled: epoch 0's count times epochs) */
	uint64_t total_bytes;	/* their bytes (shuffled and sharded: epoch 0's share times epochs) */
	int32_t numa_node;	/* NUMA node of the slots' first page, -1 when not placed */
	int32_t gpu_numa_node;	/* the GPU's NUMA node, -1 when unknown or no GPU */
	uint32_t readers;	/* reader threads (opts.readers as applied) */
	uint32_t reserved32;	/* zero */
	/*
	 * bytes of cold runs populated before their reads (see readers):
	 * runs rounded out to 2 MiB, pages found cached on the way included
	 */
	uint64_t populated_bytes;
	uint64_t coalesced_reads;	/* range reads that covered several items (enum pm_coalesce) */
	uint64_t coalesced_items;	/* items read by them */
	uint64_t reserved[12];	/* room for new counters; zero */
};

/* Zero opts then set the defaults (optional: zero means default anyway).  Any thread. */
PM_API void pm_stream_opts_init(struct pm_stream_opts *opts);
/* Open files, plan, allocate and register the slots, start reading; see pm_ctx_last_error on failure.  One thread. */
PM_API int pm_stream_create(struct pm_ctx *ctx, const struct pm_manifest *m,
			    const struct pm_stream_opts *opts,
			    struct pm_stream **sp);
/*
 * Stop reading, wait for queued I/O and copies, free everything, at any
 * point.  The events of pm_stream_release_on are waited for before the
 * slots are unregistered and freed; a batch still held is freed as it is,
 * so GPU work reading its b->host (PM_HANDOFF_HOST: the consumer's own copy)
 * or b->dev must be finished (or the batch released against its stream)
 * before this call.  One thread, last call.
 */
PM_API void pm_stream_destroy(struct pm_stream *s);
/*
 * Next batch (COPIED: its copy completed; QUEUED: its copy queued): 0 with
 * *batch set, 0 with *batch NULL at the end, -errno for a failed batch
 * (pm_stream_error names the item), -EDEADLK when the consumer holds every
 * slot.  One thread: -EBUSY for a second thread calling while another
 * waits in it.
 */
PM_API int pm_stream_next(struct pm_stream *s, struct pm_batch **batch);
/*
 * Give a batch's slot back to the ring now (host consumers); -EINVAL if not
 * a batch held by the consumer.  Each hand-over gives a pointer of its own,
 * so a batch released already is refused (never the later batch in its
 * slot) for the next 3 hand-overs of its slot; from the 4th it names that
 * slot's new batch.  One thread.
 */
PM_API int pm_stream_release(struct pm_stream *s, struct pm_batch *batch);
/*
 * Order cuda_stream after the batch's copy: cuda backend, queues a wait
 * (cudaStreamWaitEvent) and returns at once; host backend, blocks until the
 * copy completed.  cuda_stream is a cudaStream_t of the context's device;
 * NULL is the context device's legacy default stream.  PM_HANDOFF_HOST,
 * COPIED or backend "none": nothing to wait for.  -EINVAL if not a batch
 * held by the consumer.  One thread.
 */
PM_API int pm_stream_batch_wait(struct pm_stream *s, struct pm_batch *batch,
				void *cuda_stream);
/*
 * Give a batch's slot back to the ring once the work queued on cuda_stream
 * (a cudaStream_t of the context's device; NULL: its legacy default stream)
 * before this call completed: an event is recorded on it, and in every mode
 * the reader threads wait for it before reading into the host slot, so
 * neither the host slot nor the device buffer is rewritten under that work.
 * The caller never blocks.  On failure (-EINVAL: not a held batch; a CUDA error, sentence in
 * pm_stream_error) the batch stays held.  One thread.
 */
PM_API int pm_stream_release_on(struct pm_stream *s, struct pm_batch *batch,
				void *cuda_stream);
/* Sentence describing the last failed batch, "" if none.  One thread. */
PM_API const char *pm_stream_error(struct pm_stream *s);
/* Counters and latencies so far; -ECHILD in a forked child.  Any thread. */
PM_API int pm_stream_stats(struct pm_stream *s, struct pm_stream_stats *st);
/*
 * Where a resume from here loses no batch: *batch is the lowest batch
 * number neither handed over nor dropped as failed (PM_ON_ERROR_SKIP; a
 * batch that stopped the stream counts as not handed over).  In order it
 * is the batch after the last one handed over; with PM_ORDER_AS_COMPLETED
 * batches above it may have been handed over already (fewer than the
 * slots): a resume at *batch (opts.start_batch) reads them again, and the
 * consumer drops them (pinmem.Stream's state_dict() lists them).
 * -ECHILD in a forked child.  One thread.
 */
PM_API int pm_stream_resume_batch(struct pm_stream *s, uint64_t *batch);
/*
 * The items of batch b named field in their sample ("input.npy"), one per
 * sample that has it, in batch order: the first max in out; returns how
 * many there are (-EINVAL for a NULL batch or field).  A sample's items are
 * consecutive in a batch and never split over batches or ranks.  One thread.
 */
PM_API int pm_stream_batch_field(struct pm_stream *s, const struct pm_batch *b, const char *field,
				 const struct pm_batch_item **out, uint32_t max);
/* Number of files (the manifest's paths).  Any thread. */
PM_API uint32_t pm_stream_nfiles(struct pm_stream *s);
/* How file id is read; -ERANGE when out of range.  Any thread. */
PM_API int pm_stream_file(struct pm_stream *s, uint32_t id,
			  struct pm_stream_file *f);

#ifdef __cplusplus
}
#endif

#endif /* PINMEM_STREAM_H */
