// SPDX-License-Identifier: MIT
/*
 * The files of a stream: opened at create when few, else checked at create
 * and opened by each read into a bounded table of direct descriptors (see
 * stream_files.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "pinmem_stream.h"
#include "reader.h"
#include "stream_files.h"

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC	0x9fa0
#endif
#ifndef SYSFS_MAGIC
#define SYSFS_MAGIC		0x62656572
#endif

/* Most files opened at create, each holding a file descriptor. */
#define EAGER_MAX	4096
/* Most entries of the lazy table. */
#define TABLE_MAX	4096
#define NONE		UINT32_MAX

__attribute__((format(printf, 2, 3)))
static uint8_t note(struct pm_stream_files *fs, const char *fmt, ...)
{
	char buf[sizeof(fs->notes[0])];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (uint32_t i = 0; i < fs->nnotes; i++)
		if (!strcmp(fs->notes[i], buf))
			return (uint8_t)i;
	if (fs->nnotes == PM_SFILE_NOTES) {
		/* keep the last one for the rest: notes are few in practice */
		snprintf(fs->notes[PM_SFILE_NOTES - 1], sizeof(buf), "%s",
			 "(one of many reasons; the first ones are kept)");
		return PM_SFILE_NOTES - 1;
	}
	memcpy(fs->notes[fs->nnotes], buf, sizeof(buf));
	return (uint8_t)fs->nnotes++;
}

static const char *type_name(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode))
		return "a character device";
	return "not a regular file";
}

/*
 * Only regular files and block devices are read: anything else (a FIFO with
 * no writer, a terminal) could block the reader forever.
 */
static int check_type(const char *path, mode_t mode, char *err, size_t errlen)
{
	if (S_ISDIR(mode)) {
		snprintf(err, errlen, "%s: is a directory", path);
		return -EISDIR;
	}
	if (!S_ISREG(mode) && !S_ISBLK(mode)) {
		snprintf(err, errlen, "%s: %s, not a regular file or block device",
			 path, type_name(mode));
		return -EINVAL;
	}
	return 0;
}

/* open() that never waits (a FIFO's open waits for a writer), then blocking reads. */
static int open_nowait(const char *path, int flags)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);

	if (fd < 0)
		return -errno;
	return fd;
}

static int clear_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	/* io_uring returns -EAGAIN instead of waiting on an O_NONBLOCK file */
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK))
		return -errno;
	return 0;
}

/*
 * O_DIRECT alignment of the file fd (opened with or without O_DIRECT) from
 * its statx (DIOALIGN where the kernel has it, else its block size); 0 with
 * the reason in *nt when it cannot be read with O_DIRECT.
 */
static uint32_t stx_align(struct pm_stream_files *fs, int fd, const struct statx *stx,
			  uint8_t *nt)
{
	struct statfs sfs;
	uint32_t a;

	if (S_ISREG(stx->stx_mode) && fstatfs(fd, &sfs) == 0 &&
	    (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC)) {
		*nt = note(fs, "buffered: pseudo file system");
		return 0;
	}
	if ((stx->stx_mask & STATX_DIOALIGN) && !stx->stx_dio_offset_align) {
		*nt = note(fs, "buffered: the file system has no O_DIRECT for it (statx DIOALIGN)");
		return 0;
	}
	if (stx->stx_mask & STATX_DIOALIGN)
		a = stx->stx_dio_offset_align > stx->stx_dio_mem_align ?
		    stx->stx_dio_offset_align : stx->stx_dio_mem_align;
	else
		a = stx->stx_blksize ? stx->stx_blksize : 4096;
	if (a & (a - 1) || a > (1u << 20)) {
		*nt = note(fs, "buffered: O_DIRECT alignment %u is not usable", a);
		return 0;
	}
	*nt = note(fs, "%s", "");
	return a < 512 ? 512 : a;
}

static int open_one(struct pm_stream_files *fs, uint32_t id, int direct,
		    char *err, size_t errlen)
{
	struct pm_sfile *f = &fs->f[id];
	const char *path = fs->m->paths[id];
	struct statx stx;
	struct statfs sfs;
	uint32_t a;
	int fd, dfd, ret;

	fd = open_nowait(path, 0);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s%s", path, strerror(-fd),
			 fd == -EMFILE ? " (raise the open files limit, ulimit -n)" : "");
		return fd;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE | STATX_DIOALIGN, &stx)) {
		ret = -errno;
		close(fd);
		snprintf(err, errlen, "%s: statx: %s", path, strerror(-ret));
		return ret;
	}
	ret = check_type(path, stx.stx_mode, err, errlen);
	if (!ret)
		ret = clear_nonblock(fd);
	if (ret) {
		close(fd);
		if (ret != -EISDIR && ret != -EINVAL)
			snprintf(err, errlen, "%s: fcntl: %s", path, strerror(-ret));
		return ret;
	}
	/* pseudo files (procfs, sysfs) report size 0 whatever they hold */
	f->size_known = S_ISREG(stx.stx_mode) && !(fstatfs(fd, &sfs) == 0 &&
		(sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC));
	f->size = stx.stx_size;
	f->fd = fd;
	f->align = 0;

	if (direct == PM_DIRECT_OFF) {
		f->note = note(fs, "buffered: O_DIRECT turned off");
		return 0;
	}
	a = stx_align(fs, fd, &stx, &f->note);
	if (a) {
		dfd = open_nowait(path, O_DIRECT);
		if (dfd >= 0 && clear_nonblock(dfd)) {
			close(dfd);
			dfd = -errno;
		}
		if (dfd < 0) {
			f->note = note(fs, "buffered: O_DIRECT open failed: %s", strerror(-dfd));
		} else {
			close(fd);
			f->fd = dfd;
			f->align = a;
		}
	}
	if (!f->align && direct == PM_DIRECT_ON) {
		snprintf(err, errlen, "%s: O_DIRECT asked for but not possible: %s",
			 path, fs->notes[f->note] + strlen("buffered: "));
		return -EINVAL;
	}
	return 0;
}

static uint64_t stx_dev(const struct statx *stx)
{
	return (uint64_t)stx->stx_dev_major << 32 | stx->stx_dev_minor;
}

static int fstatx_dir(int fd, struct statx *stx)
{
	return statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_INO, stx) ? -errno : 0;
}

/* Record what a statx of a lazily opened file says it is. */
static void stat_record(struct pm_sfile *f, const struct statx *stx)
{
	f->dev = stx_dev(stx);
	f->ino = stx->stx_ino;
	f->size = stx->stx_size;
	f->mtime_s = stx->stx_mtime.tv_sec;
	f->mtime_ns = stx->stx_mtime.tv_nsec;
	f->stat_known = true;
}

/* Lazy: only what statx tells; the file is opened by its reads. */
static int check_one(struct pm_stream_files *fs, uint32_t id, char *err, size_t errlen)
{
	struct pm_sfile *f = &fs->f[id];
	const char *path = fs->m->paths[id];
	struct statx stx;
	int ret;

	if (statx(fs->cwd, path, 0, STATX_BASIC_STATS, &stx)) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	ret = check_type(path, stx.stx_mode, err, errlen);
	if (ret)
		return ret;
	/* procfs and sysfs files say 0 whatever they hold: a 0 is not checked (statfs per path costs too much) */
	f->size_known = S_ISREG(stx.stx_mode) && stx.stx_size;
	if (S_ISREG(stx.stx_mode))
		stat_record(f, &stx);
	f->size = stx.stx_size;
	return 0;
}

/*
 * Lazy: the O_DIRECT alignment of one file of a device, learned by opening
 * it with O_DIRECT; *cache: whether the answer holds for its whole device
 * (not when the open failed for a reason of this file's own).
 */
static uint32_t probe_align(struct pm_stream_files *fs, uint32_t id, uint8_t *nt,
			    bool *cache)
{
	const char *path = fs->m->paths[id];
	struct statx stx;
	uint32_t a = 0;
	int dfd;

	fs->probes++;
	*cache = true;
	dfd = openat(fs->cwd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_DIRECT);
	if (dfd < 0) {
		*cache = errno == EINVAL;	/* the file system refuses O_DIRECT */
		*nt = note(fs, "buffered: O_DIRECT open failed: %s", strerror(errno));
		return 0;
	}
	if (statx(dfd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_DIOALIGN, &stx))
		*nt = note(fs, "buffered: statx: %s", strerror(errno));
	else
		a = stx_align(fs, dfd, &stx, nt);
	close(dfd);
	return a;
}

/* Lazy: how path id is read, from what its device allows (learned once per device). */
static void lazy_align(struct pm_stream_files *fs, uint32_t id, int direct)
{
	struct pm_sfile *f = &fs->f[id];
	struct pm_sdev *d;
	bool cache;

	if (f->open_err)
		return;
	if (direct == PM_DIRECT_OFF) {
		f->note = note(fs, "buffered: O_DIRECT turned off");
		return;
	}
	for (uint32_t k = 0; f->dev && k < fs->ndevs; k++) {
		if (fs->devs[k].dev == f->dev) {
			f->align = fs->devs[k].align;
			f->note = fs->devs[k].note;
			return;
		}
	}
	f->align = probe_align(fs, id, &f->note, &cache);
	if (!f->dev || !cache || fs->ndevs == PM_SFILE_DEVS)
		return;		/* more devices than that: each file is probed */
	d = &fs->devs[fs->ndevs++];
	d->dev = f->dev;
	d->align = f->align;
	d->note = f->note;
}

/*
 * Record path id's check or open result: 0 to go on, else the error that
 * fails the stream (any error unless skip; a wrong type or too many open
 * files always).
 */
static int keep(struct pm_stream_files *fs, uint32_t id, int ret, bool skip)
{
	struct pm_sfile *f = &fs->f[id];

	if (ret && (!skip || ret == -EINVAL || ret == -EMFILE || ret == -ENFILE))
		return ret;
	f->open_err = ret;
	if (ret)
		f->note = note(fs, "cannot open: %s", strerror(-ret));
	fs->align[id] = f->align;
	return 0;
}

/* Directories listed so far, by the prefix of a path up to its last '/'. */
struct dirset {
	const char **p;		/* into the manifest's paths */
	uint32_t *len;
	uint64_t *dev;		/* the directory's device, 0: unknown */
	bool *ino_ok;		/* its listing's inode numbers are statx's */
	uint32_t size, n;	/* size: power of two, > 2 * n */
};

static void dirset_free(struct dirset *d)
{
	free(d->p);
	free(d->len);
	free(d->dev);
	free(d->ino_ok);
}

/*
 * The slot of p[0..len), added when not there (*added); -1 on no memory
 * (then every path is statx'ed).
 */
static int dirset_slot(struct dirset *d, const char *p, uint32_t len, bool *added)
{
	uint32_t h = 2166136261u, i;

	*added = false;
	if (2 * (d->n + 1) >= d->size) {
		struct dirset g = { .size = d->size ? d->size * 2 : 64 };
		bool dummy;

		g.p = calloc(g.size, sizeof(*g.p));
		g.len = calloc(g.size, sizeof(*g.len));
		g.dev = calloc(g.size, sizeof(*g.dev));
		g.ino_ok = calloc(g.size, sizeof(*g.ino_ok));
		if (!g.p || !g.len || !g.dev || !g.ino_ok) {
			dirset_free(&g);
			return -1;
		}
		for (uint32_t k = 0; k < d->size; k++) {
			if (d->p[k]) {
				int j = dirset_slot(&g, d->p[k], d->len[k], &dummy);

				g.dev[j] = d->dev[k];
				g.ino_ok[j] = d->ino_ok[k];
			}
		}
		dirset_free(d);
		*d = g;
	}
	for (uint32_t k = 0; k < len; k++)
		h = (h ^ (unsigned char)p[k]) * 16777619u;
	for (i = h & (d->size - 1); d->p[i]; i = (i + 1) & (d->size - 1))
		if (d->len[i] == len && !memcmp(d->p[i], p, len))
			return (int)i;
	d->p[i] = p;
	d->len[i] = len;
	d->n++;
	*added = true;
	return (int)i;
}

/*
 * File systems whose directory listing gives the inode number statx gives
 * (overlayfs, for one, may not): there a listing tells a file's identity.
 */
static bool listing_inodes(long type)
{
	switch (type) {
	case 0xEF53:		/* ext2/3/4 */
	case 0x58465342:	/* xfs */
	case 0x9123683E:	/* btrfs */
	case 0x01021994:	/* tmpfs */
		return true;
	default:
		return false;
	}
}

/*
 * Note the d_type and inode of every manifest path listed in the directory
 * prefix[0..len), and the directory's device (*dev, 0: unknown) and whether
 * the inodes are statx's (*ino_ok).
 */
static void list_dir(struct pm_stream_files *fs, const char *prefix, size_t len,
		     uint8_t *dtype, uint64_t *ino, uint64_t *dev, bool *ino_ok)
{
	char path[PATH_MAX];
	struct statx stx;
	struct statfs sfs;
	struct dirent *de;
	DIR *d;

	*dev = 0;
	*ino_ok = false;
	if (len >= sizeof(path))
		return;
	memcpy(path, prefix, len);
	path[len] = 0;
	d = opendir(len ? path : ".");
	if (!d)
		return;		/* its paths are statx'ed, which names the error */
	if (!fstatx_dir(dirfd(d), &stx) && !fstatfs(dirfd(d), &sfs)) {
		*dev = stx_dev(&stx);
		*ino_ok = listing_inodes((long)sfs.f_type);
	}
	while ((de = readdir(d))) {
		size_t nl = strlen(de->d_name);
		uint32_t id;

		/* links and unknown types are statx'ed: they may lead anywhere */
		if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK || len + nl >= sizeof(path))
			continue;
		memcpy(path + len, de->d_name, nl);
		if (!pm_manifest_find(fs->m, path, len + nl, &id)) {
			dtype[id] = de->d_type;
			ino[id] = de->d_ino;
		}
	}
	closedir(d);
}

/*
 * Lazy: the type and identity of every path, from its directory's listing
 * where it can (getdents gives d_type and d_ino for a whole directory at
 * once; a statx per path costs ~6-13 us on a small VM, 2.6 s for 200,000
 * files), else statx; and how each is read (lazy_align).
 */
static int check_lazy(struct pm_stream_files *fs, int direct, bool skip,
		      char *err, size_t errlen)
{
	uint8_t *dtype = calloc(fs->n, 1);
	uint64_t *ino = calloc(fs->n, sizeof(*ino));
	struct dirset dirs = { 0 };
	int ret = 0;

	if (!ino) {
		free(dtype);
		dtype = NULL;	/* every path is statx'ed */
	}
	for (uint32_t i = 0; i < fs->n; i++) {
		const char *p = fs->m->paths[i], *slash = strrchr(p, '/');
		uint32_t len = slash ? (uint32_t)(slash - p + 1) : 0;
		bool added;
		int k = dtype ? dirset_slot(&dirs, p, len, &added) : -1;

		if (k >= 0 && added) {
			list_dir(fs, p, len, dtype, ino, &dirs.dev[k], &dirs.ino_ok[k]);
		}
		if (k >= 0 && dtype[i] == DT_REG && ino[i] && dirs.ino_ok[k] && dirs.dev[k]) {
			fs->f[i].dev = dirs.dev[k];
			fs->f[i].ino = ino[i];
			ret = 0;	/* size unknown until the first open */
		} else if (k >= 0 && dtype[i] && dtype[i] != DT_BLK && dtype[i] != DT_REG) {
			ret = check_type(p, DTTOIF(dtype[i]), err, errlen);
		} else {
			ret = check_one(fs, i, err, errlen);
		}
		if (!ret)
			lazy_align(fs, i, direct);
		ret = keep(fs, i, ret, skip);
		if (!ret && !fs->f[i].align && direct == PM_DIRECT_ON && !fs->f[i].open_err) {
			snprintf(err, errlen, "%s: O_DIRECT asked for but not possible: %s",
				 p, fs->notes[fs->f[i].note] + strlen("buffered: "));
			ret = -EINVAL;
		}
		if (ret)
			break;
	}
	dirset_free(&dirs);
	free(ino);
	free(dtype);
	return ret;
}

static uint32_t nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > UINT32_MAX)
		return UINT32_MAX;
	return (uint32_t)rl.rlim_cur;
}

int pm_sfiles_open(struct pm_stream_files *fs, const struct pm_manifest *m,
		   int direct, bool skip, char *err, size_t errlen)
{
	uint32_t nofile = nofile_limit();
	int ret;

	memset(fs, 0, sizeof(*fs));
	fs->m = m;
	fs->n = m->npaths;
	fs->f = calloc(fs->n, sizeof(*fs->f));
	fs->align = calloc(fs->n, sizeof(*fs->align));
	if (!fs->f || !fs->align) {
		snprintf(err, errlen, "no memory for a stream of %u files", fs->n);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < fs->n; i++) {
		fs->f[i].fd = -1;
		fs->f[i].entry = -1;
	}
	fs->lazy = fs->n > EAGER_MAX || fs->n > nofile / 2;
	fs->cwd = -1;
	if (fs->lazy) {
		fs->cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fs->cwd < 0) {
			ret = -errno;
			snprintf(err, errlen,
				 "cannot open the working directory, where relative paths are read: %s",
				 strerror(-ret));
			return ret;
		}
		/* the kernel refuses a table larger than RLIMIT_NOFILE */
		fs->table = fs->n < TABLE_MAX ? fs->n : TABLE_MAX;
		if (fs->table > nofile / 2)
			fs->table = nofile / 2 > 8 ? nofile / 2 : 8;
		fs->entries = calloc(fs->table, sizeof(*fs->entries));
		if (!fs->entries) {
			snprintf(err, errlen, "no memory for a table of %u files", fs->table);
			return -ENOMEM;
		}
		pm_sfiles_parts(fs, 1);
	}
	if (fs->lazy)
		return check_lazy(fs, direct, skip, err, errlen);
	for (uint32_t i = 0; i < fs->n; i++) {
		ret = keep(fs, i, open_one(fs, i, direct, err, errlen), skip);
		if (ret)
			return ret;
	}
	return 0;
}

int pm_sfiles_cap_align(struct pm_stream_files *fs, uint32_t max, bool direct_on,
			char *err, size_t errlen)
{
	for (uint32_t i = 0; i < fs->n; i++) {
		struct pm_sfile *f = &fs->f[i];
		uint32_t a = f->align;
		int fl;

		if (!a || max % a == 0)
			continue;
		if (direct_on) {
			snprintf(err, errlen,
				 "%s: O_DIRECT alignment %u does not divide the %u several ranks pack batches with",
				 fs->m->paths[i], a, max);
			return -EINVAL;
		}
		/* a lazily opened file is opened by its reads, without O_DIRECT now */
		fl = fs->lazy ? 0 : fcntl(f->fd, F_GETFL);
		if (!fs->lazy && (fl < 0 || fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0)) {
			int ret = -errno;

			snprintf(err, errlen, "%s: fcntl: %s", fs->m->paths[i], strerror(-ret));
			return ret;
		}
		f->align = 0;
		fs->align[i] = 0;
		f->note = note(fs, "buffered: O_DIRECT alignment %u does not divide the %u several ranks pack batches with",
			       a, max);
	}
	return 0;
}

void pm_sfiles_close(struct pm_stream_files *fs)
{
	for (uint32_t i = 0; fs->f && i < fs->n; i++) {
		if (fs->f[i].fd >= 0)
			close(fs->f[i].fd);
		free(fs->f[i].populated);
	}
	free(fs->f);
	free(fs->align);
	free(fs->entries);
	if (fs->lazy && fs->cwd >= 0)
		close(fs->cwd);
	fs->cwd = -1;
	fs->f = NULL;
	fs->align = NULL;
	fs->entries = NULL;
}

void pm_sfiles_parts(struct pm_stream_files *fs, uint32_t n)
{
	uint32_t base = 0;

	fs->nparts = n;
	for (uint32_t p = 0; p < n; p++) {
		struct pm_fpart *pt = &fs->parts[p];

		pt->base = base;
		pt->size = fs->table / n + (p < fs->table % n);
		pt->lru_head = base;
		pt->lru_tail = base + pt->size - 1;
		for (uint32_t i = base; i < base + pt->size; i++) {
			fs->entries[i].path = NONE;
			fs->entries[i].refs = 0;
			fs->entries[i].opening = false;
			fs->entries[i].prev = i > base ? i - 1 : NONE;
			fs->entries[i].next = i + 1 < base + pt->size ? i + 1 : NONE;
		}
		base += pt->size;
	}
}

int pm_sfiles_register(struct pm_stream_files *fs, uint32_t part, struct pm_reader *r,
		       char *err, size_t errlen)
{
	int *fds, ret;

	if (fs->lazy) {
		ret = pm_reader_register_table(r, fs->parts[part].size);
		if (ret)
			snprintf(err, errlen,
				 "io_uring file table of %u entries for %u files opened as they are read: %s",
				 fs->parts[part].size, fs->n, strerror(-ret));
		return ret;
	}
	fds = malloc(fs->n * sizeof(*fds));
	if (!fds) {
		snprintf(err, errlen, "no memory to register %u files", fs->n);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < fs->n; i++)
		fds[i] = fs->f[i].fd;
	pm_reader_register_files(r, fds, fs->n);	/* on failure: plain fds, noted */
	free(fds);
	return 0;
}

static struct pm_fpart *part_of(struct pm_stream_files *fs, uint32_t e)
{
	uint32_t p = 0;

	while (e >= fs->parts[p].base + fs->parts[p].size)
		p++;
	return &fs->parts[p];
}

static void lru_unlink(struct pm_stream_files *fs, uint32_t e)
{
	struct pm_fentry *x = &fs->entries[e];
	struct pm_fpart *pt = part_of(fs, e);

	if (x->prev != NONE)
		fs->entries[x->prev].next = x->next;
	else
		pt->lru_head = x->next;
	if (x->next != NONE)
		fs->entries[x->next].prev = x->prev;
	else
		pt->lru_tail = x->prev;
	x->prev = x->next = NONE;
}

/* Idle entry e goes last (most recently used), or first when it is empty. */
static void lru_add(struct pm_stream_files *fs, uint32_t e, bool first)
{
	struct pm_fentry *x = &fs->entries[e];
	struct pm_fpart *pt = part_of(fs, e);

	if (first) {
		x->prev = NONE;
		x->next = pt->lru_head;
		if (pt->lru_head != NONE)
			fs->entries[pt->lru_head].prev = e;
		else
			pt->lru_tail = e;
		pt->lru_head = e;
	} else {
		x->next = NONE;
		x->prev = pt->lru_tail;
		if (pt->lru_tail != NONE)
			fs->entries[pt->lru_tail].next = e;
		else
			pt->lru_head = e;
		pt->lru_tail = e;
	}
}

int pm_sfiles_get(struct pm_stream_files *fs, uint32_t part, uint32_t id, bool *open)
{
	struct pm_fpart *pt = &fs->parts[part];
	struct pm_sfile *f = &fs->f[id];
	struct pm_fentry *x;
	uint32_t e;

	*open = false;
	if (f->entry >= 0) {
		e = (uint32_t)f->entry;
		x = &fs->entries[e];
		/* a read issued before the open completed would find another file */
		if (x->opening)
			return -EBUSY;
		if (e - pt->base < pt->size) {
			if (!x->refs++)
				lru_unlink(fs, e);
			return (int)(e - pt->base);
		}
		/* open in another lane's ring: taken over once its reads there are done */
		if (x->refs)
			return -EBUSY;
		lru_unlink(fs, e);
		x->path = NONE;
		lru_add(fs, e, true);
		f->entry = -1;
	}
	e = pt->lru_head;
	if (e == NONE)
		return -EBUSY;
	x = &fs->entries[e];
	lru_unlink(fs, e);
	if (x->path != NONE)
		fs->f[x->path].entry = -1;	/* the open replaces it in the table */
	x->path = id;
	x->refs = 1;
	x->opening = true;
	f->entry = (int32_t)e;
	fs->opens++;
	*open = true;
	return (int)(e - pt->base);
}

void pm_sfiles_put(struct pm_stream_files *fs, uint32_t part, uint32_t index,
		   uint32_t id, bool drop)
{
	uint32_t e = fs->parts[part].base + index;
	struct pm_fentry *x = &fs->entries[e];
	struct pm_sfile *f = &fs->f[id];

	if (x->path == id && x->opening)
		x->opening = false;	/* this read opened it: the others may go */
	if (drop && x->path == id) {
		/* reads still in flight on it finish there; no new one starts */
		f->entry = -1;
		x->path = NONE;
	}
	if (!--x->refs)
		lru_add(fs, e, x->path == NONE);
}

int pm_sfiles_check(struct pm_stream_files *fs, uint32_t id, const struct statx *stx,
		    char *err, size_t errlen)
{
	struct pm_sfile *f = &fs->f[id];
	uint64_t dev = stx_dev(stx);

	if (f->ino && (f->dev != dev || f->ino != stx->stx_ino)) {
		snprintf(err, errlen,
			 "replaced since the stream was created (device %llu:%llu inode %llu then, %llu:%llu inode %llu now)",
			 (unsigned long long)(f->dev >> 32),
			 (unsigned long long)(f->dev & 0xffffffffu), (unsigned long long)f->ino,
			 (unsigned long long)stx->stx_dev_major,
			 (unsigned long long)stx->stx_dev_minor,
			 (unsigned long long)stx->stx_ino);
		return -ESTALE;
	}
	if (!f->stat_known) {
		/* a device says size 0: no size to check, as check_one() decides */
		if (!S_ISREG(stx->stx_mode))
			return 0;
		stat_record(f, stx);
		f->size_known = stx->stx_size != 0;
		return 0;
	}
	if (f->size != stx->stx_size || f->mtime_s != stx->stx_mtime.tv_sec ||
	    f->mtime_ns != stx->stx_mtime.tv_nsec) {
		snprintf(err, errlen,
			 "changed since the stream first saw it (%llu bytes modified at %lld.%09u then, %llu bytes modified at %lld.%09u now)",
			 (unsigned long long)f->size, (long long)f->mtime_s, f->mtime_ns,
			 (unsigned long long)stx->stx_size, (long long)stx->stx_mtime.tv_sec,
			 stx->stx_mtime.tv_nsec);
		return -ESTALE;
	}
	return 0;
}

void pm_sfiles_direct_refused(struct pm_stream_files *fs, uint32_t id, int err)
{
	struct pm_sfile *f = &fs->f[id];

	if (!f->align)
		return;
	f->note = note(fs, "buffered: O_DIRECT refused when read (%s); placed for alignment %u",
		       strerror(-err), f->align);
	f->align = 0;	/* fs->align, where batches place it, stays */
}

const char *pm_sfiles_note(const struct pm_stream_files *fs, uint32_t id)
{
	return fs->notes[fs->f[id].note];
}
