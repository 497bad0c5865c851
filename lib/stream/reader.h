/* SPDX-License-Identifier: MIT */
/*
 * The io_uring reader of a stream: one ring, registered files and buffers,
 * reads that complete in full or fail.  Short reads are resubmitted for the
 * rest; end of file before the bytes a read needs is -ENODATA.  All calls
 * are made from the one thread that created the ring (SINGLE_ISSUER).
 */
#ifndef PM_READER_H
#define PM_READER_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct pm_buf;

/* One read in flight; the owner fields are the caller's. */
struct pm_read {
	int fd;			/* file descriptor, or registered index when fixed_file */
	bool fixed_file;
	const char *open_path;	/* statx, then open this path into table entry fd first (linked; fixed_file; O_DIRECT with align) */
	int open_dir;		/* the directory a relative open_path is opened in */
	int open_err;		/* -errno of that statx or open when it failed */
	bool opened;		/* it was opened for this read: stx is the path's statx just before */
	struct statx stx;
	int buf_index;		/* registered buffer, -1: plain read */
	uint32_t align;		/* O_DIRECT alignment, 0 for buffered reads */
	uint64_t off;		/* file offset of byte 0 of the read */
	char *dst;		/* destination of byte 0 */
	uint32_t len;		/* bytes asked for */
	uint32_t need;		/* bytes that must arrive (<= len; the rest is O_DIRECT padding) */
	uint32_t done;		/* bytes arrived so far */
	uint32_t resubmits;	/* short reads and EAGAINs retried */
	bool populate;		/* not a read: MADV_POPULATE_READ of [dst, dst + len) */
	void *win;		/* a populate's window (populate.h) */
	void *owner;
	uint32_t owner_item;
	uint32_t owner_items;	/* items covered: a coalesced read's, else 1 */
	int stage;		/* a coalesced read's staging buffer of the lane, -1: none */
	struct pm_read *next;	/* free list of the caller */
};

struct pm_reader {
	struct io_uring ring;
	bool ring_ok;
	unsigned int flags;		/* setup flags obtained */
	unsigned int qd;
	unsigned int inflight;		/* reads the kernel holds */
	unsigned int queued;		/* SQEs not yet submitted */
	bool files_registered;
	bool cqe_skip;			/* IOSQE_CQE_SKIP_SUCCESS works */
	bool punt_buffered;		/* buffered reads to io_uring's workers (IOSQE_ASYNC) */
	bool bufs_registered;
	struct pm_buf *buf;
	struct iovec *iov;		/* layout of the registered buffer */
	int niov;
	char note[160];			/* what fell back and why */
};

/* Completion of a read: res 0 when need bytes arrived, else -errno (-ENODATA: end of file); a populate's madvise result. */
typedef void (*pm_read_done_fn)(void *arg, struct pm_read *rd, int res);

/* Ring of qd entries, the best setup flags the kernel accepts. */
int pm_reader_init(struct pm_reader *r, unsigned int qd);
/* Register fds (-1 entries allowed); on failure reads use plain fds (noted). */
void pm_reader_register_files(struct pm_reader *r, const int *fds, unsigned int n);
/* Register an empty table of n files for reads with open_path; -errno. */
int pm_reader_register_table(struct pm_reader *r, unsigned int n);
/* Register buf in iovecs that are a multiple of unit; on failure reads are not fixed (noted). */
void pm_reader_register_buf(struct pm_reader *r, struct pm_buf *buf, size_t unit);
/* Registered buffer index holding [addr, addr + len), -1 when none. */
int pm_reader_buf_index(const struct pm_reader *r, const void *addr, size_t len);
/* Queue rd, a read or a populate (the caller keeps inflight < qd). */
void pm_reader_queue(struct pm_reader *r, struct pm_read *rd);
/* Submit what is queued and wait for at least wait_nr completions; -errno on ring failure. */
int pm_reader_submit(struct pm_reader *r, unsigned int wait_nr);
/* Handle every available completion; calls done for reads that finished. */
int pm_reader_reap(struct pm_reader *r, pm_read_done_fn done, void *arg);
/* Account a completion of rd: 0 done, 1 resubmit the rest, -errno failed (-ENODATA: end of file first; its open's error when that failed; a populate's own result). */
int pm_read_complete(struct pm_read *rd, int res);
/* Unregister and close the ring (after every read completed). */
void pm_reader_exit(struct pm_reader *r);
/* "SINGLE_ISSUER|DEFER_TASKRUN" style names of flags. */
const char *pm_reader_flag_names(unsigned int flags, char *buf, size_t len);

#endif
