/* SPDX-License-Identifier: MIT */
/*
 * The files of a stream.  Few files are opened at create, each once, and
 * registered with the ring (O_DIRECT where the file allows it).  A dataset of
 * more files than half the open-files limit (ImageNet has 1.28 million) is
 * opened lazily: create only checks each path's type (from its directory's
 * listing, else statx), and
 * each read opens its file into a sparse registered file table as a direct
 * descriptor (IORING_OP_OPENAT linked before the read), so no file
 * descriptor is used at all and the number open at once is the table's size.
 * A table entry is reused, least recently used first, once no read of its
 * file is in flight.  Lazily opened files are read buffered: placement in a
 * slot is planned before a file is opened, so its O_DIRECT alignment is
 * unknown.
 *
 * Every call is made by the stream's reader thread except open, close and
 * the queries, which the stream makes while the reader thread does not run
 * or under the stream's lock.
 */
#ifndef PM_STREAM_FILES_H
#define PM_STREAM_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest.h"

struct pm_reader;

struct pm_sfile {
	uint64_t size;
	int fd;			/* opened at create; -1 when lazy or not opened */
	int open_err;		/* -errno: cannot be opened (skip policy) */
	uint32_t align;		/* O_DIRECT alignment, 0: buffered */
	int32_t entry;		/* lazy: table entry holding the file, -1: none */
	bool size_known;	/* false for pseudo files (procfs, sysfs) */
	uint8_t note;		/* index into notes */
};

/* A lazy table entry: the file it holds and the reads in flight on it. */
struct pm_fentry {
	uint32_t path;		/* UINT32_MAX: empty */
	uint32_t refs;		/* reads in flight on it */
	bool opening;		/* its open is in flight: no other read may start */
	uint32_t prev, next;	/* LRU list of entries with refs == 0 */
};

#define PM_SFILE_NOTES 16

struct pm_stream_files {
	const struct pm_manifest *m;
	uint32_t n;
	struct pm_sfile *f;
	uint32_t *align;	/* per path: the alignment reads are placed with */
	bool lazy;
	uint32_t table;		/* lazy: entries of the registered table */
	struct pm_fentry *entries;
	uint32_t lru_head;	/* least recently used idle entry, UINT32_MAX: none */
	uint32_t lru_tail;
	uint64_t opens;		/* lazy: opens queued so far */
	char notes[PM_SFILE_NOTES][160];	/* distinct notes; files keep an index */
	uint32_t nnotes;
	uint8_t lazy_note;	/* "opened when read" */
};

/*
 * Open (or, for many files, check) every path of m.  A path that cannot be
 * opened fails with a sentence in err unless skip, where it is recorded and
 * its items fail when read; a non-regular file (FIFO, socket, character
 * device) and O_DIRECT asked for but impossible always fail.
 */
int pm_sfiles_open(struct pm_stream_files *fs, const struct pm_manifest *m,
		   int direct, bool skip, char *err, size_t errlen);
/* Close everything (files open at create; the table goes with the ring). */
void pm_sfiles_close(struct pm_stream_files *fs);
/* Register the files (or the lazy table) with r; -errno with err set. */
int pm_sfiles_register(struct pm_stream_files *fs, struct pm_reader *r,
		       char *err, size_t errlen);
/*
 * Take a reference on path id for one read: the registered index (or fd)
 * to read from, and in *open whether the read must open it first.
 * -EBUSY when every table entry has reads in flight: retry after one
 * completes.
 */
int pm_sfiles_get(struct pm_stream_files *fs, uint32_t id, bool *open);
/* A read of path id finished; open_failed: its open failed (the entry is empty). */
void pm_sfiles_put(struct pm_stream_files *fs, uint32_t id, bool open_failed);
/* Why path id is read as it is ("" when with O_DIRECT). */
const char *pm_sfiles_note(const struct pm_stream_files *fs, uint32_t id);

#endif
