/* SPDX-License-Identifier: MIT */
/*
 * The files of a stream.  Few files are opened at create, each once, and
 * registered with the ring (O_DIRECT where the file allows it).  A dataset of
 * more files than half the open-files limit (ImageNet has 1.28 million) is
 * opened lazily: create only checks each path's type (from its directory's
 * listing, else statx), and
 * each read opens its file into a sparse registered file table as a direct
 * descriptor (IORING_OP_OPENAT linked before the read), so no file
 * descriptor is used for them and the number open at once is the table's size.
 * A table entry is reused, least recently used first, once no read of its
 * file is in flight.  A relative path is opened in the working directory of
 * create, kept open (O_PATH), not in the one of the read: programs chdir
 * after create (Hydra does).
 *
 * Lazily opened files are read with O_DIRECT where their file system allows
 * it: slots are planned before a file is opened, so the alignment is learned
 * per device at create (one file of each device opened with O_DIRECT and
 * asked statx STATX_DIOALIGN, else its block size) and every file of the
 * device is placed with it.  A file whose O_DIRECT open or read is refused
 * (-EINVAL) all the same is read buffered from then on, in the places
 * planned for O_DIRECT (an aligned superset of its bytes), and says so.
 *
 * A lazily opened file is the file create saw: create records its device and
 * inode (the directory listing's, on file systems whose listing gives the
 * inode statx gives, else statx's), each open is preceded by a statx of the
 * path linked before it, and a file whose device or inode differ, or whose
 * size or modification time differ from the first open's (or create's
 * statx), fails the item being read with -ESTALE naming the path.
 *
 * A stream with several reader lanes splits the table into one part per
 * lane (each ring has its own table of direct descriptors).  A file open in
 * another lane's part is taken over once no read of it is in flight there:
 * forgotten in that part (its ring closes it when the entry is reused) and
 * opened again in the asking lane's.
 *
 * get and put are called under the stream's lock (from any lane); open,
 * parts, close and the queries while no lane runs.
 */
#ifndef PM_STREAM_FILES_H
#define PM_STREAM_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/stat.h>

#include "manifest.h"

struct pm_reader;

struct pm_sfile {
	uint64_t size;
	int fd;			/* opened at create; -1 when lazy or not opened */
	int open_err;		/* -errno: cannot be opened (skip policy) */
	uint32_t align;		/* O_DIRECT alignment reads use, 0: buffered */
	int32_t entry;		/* lazy: table entry holding the file, -1: none */
	bool size_known;	/* false for pseudo files (procfs, sysfs) */
	bool stat_known;	/* lazy: size and mtime recorded (create's statx or the first open's) */
	uint8_t note;		/* index into notes */
	uint64_t dev, ino;	/* lazy: identity create saw (dev: major << 32 | minor) */
	int64_t mtime_s;	/* lazy: with stat_known */
	uint32_t mtime_ns;
	uint64_t *populated;	/* populate.h: chunks this stream populated, NULL: none yet */
};

/* The O_DIRECT alignment learned for one device (lazily opened files). */
struct pm_sdev {
	uint64_t dev;
	uint32_t align;		/* 0: buffered */
	uint8_t note;
};

#define PM_SFILE_DEVS 32

/* A lazy table entry: the file it holds and the reads in flight on it. */
struct pm_fentry {
	uint32_t path;		/* UINT32_MAX: empty */
	uint32_t refs;		/* reads in flight on it */
	bool opening;		/* its open is in flight: no other read may start */
	uint32_t prev, next;	/* LRU list of entries with refs == 0 */
};

#define PM_SFILE_NOTES 16
#define PM_SFILE_PARTS 64

/* One lane's part of the lazy table: entries [base, base + size). */
struct pm_fpart {
	uint32_t base, size;
	uint32_t lru_head;	/* least recently used idle entry, UINT32_MAX: none */
	uint32_t lru_tail;
};

struct pm_stream_files {
	const struct pm_manifest *m;
	uint32_t n;
	struct pm_sfile *f;
	uint32_t *align;	/* per path: the alignment reads are placed with */
	bool lazy;
	int cwd;		/* lazy: the working directory at open, O_PATH; relative paths are opened in it */
	uint32_t table;		/* lazy: entries of the registered table */
	struct pm_fentry *entries;
	struct pm_fpart parts[PM_SFILE_PARTS];
	uint32_t nparts;
	uint64_t opens;		/* lazy: opens queued so far */
	char notes[PM_SFILE_NOTES][160];	/* distinct notes; files keep an index */
	uint32_t nnotes;
	struct pm_sdev devs[PM_SFILE_DEVS];	/* lazy: alignments by device, learned at create */
	uint32_t ndevs;
	uint32_t probes;	/* lazy: files opened at create to learn an alignment */
};

/*
 * Open (or, for many files, check) every path of m.  A path that cannot be
 * opened fails with a sentence in err unless skip, where it is recorded and
 * its items fail when read; a non-regular file (FIFO, socket, character
 * device) and O_DIRECT asked for but impossible always fail.
 */
int pm_sfiles_open(struct pm_stream_files *fs, const struct pm_manifest *m,
		   int direct, bool skip, char *err, size_t errlen);
/*
 * Read buffered every file whose O_DIRECT alignment does not divide max
 * (direct_on: fail with a sentence in err instead); it is placed for
 * buffered reads too.
 */
int pm_sfiles_cap_align(struct pm_stream_files *fs, uint32_t max, bool direct_on,
			char *err, size_t errlen);
/* Close everything (files open at create; the table goes with the ring). */
void pm_sfiles_close(struct pm_stream_files *fs);
/* Lazy: split the table into n parts (n <= the table's size, PM_SFILE_PARTS). */
void pm_sfiles_parts(struct pm_stream_files *fs, uint32_t n);
/* Register the files (or part `part` of the lazy table) with r; -errno with err set. */
int pm_sfiles_register(struct pm_stream_files *fs, uint32_t part, struct pm_reader *r,
		       char *err, size_t errlen);
/*
 * Take a reference on path id for one read by the lane of `part`: the
 * index in its ring's table (or the fd) to read from, and in *open whether
 * the read must open it first.  -EBUSY when every entry of the part has
 * reads in flight, or another part's reads of the file are in flight:
 * retry after one completes.
 */
int pm_sfiles_get(struct pm_stream_files *fs, uint32_t part, uint32_t id, bool *open);
/*
 * A read of path id through entry `index` of part `part` finished; drop:
 * the entry must not be read again (its open failed, the file changed, or
 * O_DIRECT was refused): a later read opens the file anew.
 */
void pm_sfiles_put(struct pm_stream_files *fs, uint32_t part, uint32_t index,
		   uint32_t id, bool drop);
/*
 * Lazy: the statx taken before path id was opened.  0 when it is the file
 * create saw (the first open records its size and mtime when create did not),
 * else -ESTALE with a sentence in err.
 */
int pm_sfiles_check(struct pm_stream_files *fs, uint32_t id, const struct statx *stx,
		    char *err, size_t errlen);
/* Lazy: O_DIRECT of path id was refused when read (err): read it buffered from now on. */
void pm_sfiles_direct_refused(struct pm_stream_files *fs, uint32_t id, int err);
/* Why path id is read as it is ("" when with O_DIRECT). */
const char *pm_sfiles_note(const struct pm_stream_files *fs, uint32_t id);

#endif
