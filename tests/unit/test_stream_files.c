// SPDX-License-Identifier: MIT
/*
 * lib/stream/stream_files.c: a dataset of more files than the open-files limit
 * allows streams, every byte right, with files opened by the reads into a
 * bounded table of direct descriptors (no file descriptor used while
 * streaming); files that share a table entry, items split into chunks,
 * a file that vanished after create, relative paths after a chdir, and bad
 * input at create (a FIFO, a missing file; types come from directory
 * listings, so a symbolic link is checked apart).  Lazily opened files are
 * read with O_DIRECT where their file system allows it (alignment learned
 * per device, a ramfs refusing it read buffered and named, a read refused
 * with -EINVAL read again buffered: this program stands in for liburing's
 * submit to refuse one), and a file
 * replaced or changed after create fails its items with -ESTALE by name.
 *
 * The open-files limit is lowered for each case (and restored), so a few
 * hundred files are "many".
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pm_test.h"
#include "pinmem_stream.h"
#include "reader.h"
#include "uring_rewrite.h"

#define NF 300

static char dir[PATH_MAX - 64];
static char paths[NF][PATH_MAX];
static unsigned char *data[NF];
static size_t sizes[NF];
static struct rlimit saved;
static bool direct_ok;		/* the test directory's file system has O_DIRECT */

/* Whether an aligned O_DIRECT read of path works. */
static bool direct_works(const char *path)
{
	void *buf = NULL;
	bool ok;
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);

	if (fd < 0)
		return false;
	ok = !posix_memalign(&buf, 4096, 4096) && pread(fd, buf, 4096, 0) >= 0;
	free(buf);
	close(fd);
	return ok;
}

/*
 * Stand-in for liburing's submit (uring_rewrite.h): when einval_reads is
 * set, that many O_DIRECT reads that succeeded are reported as -EINVAL
 * instead, what a file system that takes O_DIRECT opens but not the
 * alignment answers at read time.
 */
static int einval_reads;

static bool rewrite_active(void)
{
	return __atomic_load_n(&einval_reads, __ATOMIC_SEQ_CST) > 0;
}

static void rewrite_cqe(struct io_uring_cqe *cqe, struct pm_read *rd)
{
	int n = __atomic_load_n(&einval_reads, __ATOMIC_SEQ_CST);

	if (!rd->align || cqe->res <= 0)
		return;
	/* taken one at a time: the completions reaped with the last one are left alone */
	while (n > 0 && !__atomic_compare_exchange_n(&einval_reads, &n, n - 1, false,
						     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (n > 0)
		cqe->res = -EINVAL;
}

static int setup(void **state)
{
	if (test_dir_make(dir, sizeof(dir), "files-test"))
		return -1;
	for (int i = 0; i < NF; i++) {
		int fd;

		snprintf(paths[i], sizeof(paths[i]), "%s/s%03d.bin", dir, i);
		sizes[i] = 1 + (size_t)(i * 7919) % 20000;
		data[i] = malloc(sizes[i]);
		test_fill(data[i], sizes[i], (uint64_t)i + 1);
		fd = open(paths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, data[i], sizes[i]) != (ssize_t)sizes[i])
			return -1;
		close(fd);
	}
	direct_ok = direct_works(paths[0]);
	return getrlimit(RLIMIT_NOFILE, &saved);
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	for (int i = 0; i < NF; i++)
		free(data[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

static struct pm_ctx *open_ctx(void)
{
	fake_reset();
	return fake_ctx(0, PM_BACKEND_HOST);
}

/* Soft open-files limit: files opened lazily above half of it, table of half of it. */
static void nofile(rlim_t n)
{
	struct rlimit rl = saved;

	rl.rlim_cur = n;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static void restore(void)
{
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

/* Every file as items of at most item bytes, in file order, each file twice. */
static struct pm_manifest *manifest(size_t item)
{
	struct pm_manifest *m;

	assert_int_equal(pm_manifest_create(&m), 0);
	for (int rep = 0; rep < 2; rep++)
		for (int i = 0; i < NF; i++)
			for (size_t off = 0; off < sizes[i]; off += item)
				assert_int_equal(pm_manifest_add(m, paths[i], off,
					sizes[i] - off < item ? sizes[i] - off : item,
					false, 0, NULL, 0), 0);
	return m;
}

static int index_of(const struct pm_manifest *m, uint32_t path_id)
{
	const char *p = pm_manifest_path(m, path_id);

	for (int i = 0; i < NF; i++)
		if (!strcmp(p, paths[i]))
			return i;
	fail_msg("unknown path %s", p);
	return -1;
}

/* Every item of batch b holds its file's bytes at its offset. */
static void check_items(const struct pm_manifest *m, const struct pm_batch *b)
{
	for (uint32_t i = 0; i < b->nitems; i++) {
		const struct pm_batch_item *it = &b->items[i];
		int k = index_of(m, it->path_id);

		assert_memory_equal((char *)b->host + it->slot_offset,
				    data[k] + it->file_offset, it->length);
	}
}

/* Stream m to the end, checking every byte; returns items delivered. */
static uint64_t stream_all(struct pm_ctx *ctx, const struct pm_manifest *m,
			   const struct pm_stream_opts *o, int fds)
{
	struct pm_stream_stats st;
	struct pm_stream_file f;
	struct pm_stream *s = NULL;
	struct pm_batch *b;
	uint64_t items = 0;
	int ret;

	bool direct = direct_ok && o->direct != PM_DIRECT_OFF;

	ret = pm_stream_create(ctx, m, o, &s);
	if (ret)
		fail_msg("pm_stream_create: %d %s", ret, pm_ctx_last_error(ctx));
	for (uint32_t id = 0; id < pm_stream_nfiles(s); id++) {
		assert_int_equal(pm_stream_file(s, id, &f), 0);
		assert_int_equal(f.direct, direct);
		if (direct)
			assert_string_equal(f.note, "");
		else if (o->direct == PM_DIRECT_OFF)
			assert_string_equal(f.note, "buffered: O_DIRECT turned off");
	}
	while (!(ret = pm_stream_next(s, &b)) && b) {
		check_items(m, b);
		items += b->nitems;
		/* no file descriptor per file: the rings (one per lane, at most 4 by default) hold them */
		assert_true(count_fds() <= fds + 1 + (o->readers ? (int)o->readers : 4));
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	if (ret)
		fail_msg("stream failed: %d %s", ret, pm_stream_error(s));
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, items);
	assert_int_equal(st.items, pm_manifest_count(m) * (o->epochs ? o->epochs : 1));
	assert_int_equal(st.bytes, pm_manifest_bytes(m) * (o->epochs ? o->epochs : 1));
	assert_int_equal(st.files_buffered, direct ? 0 : NF);
	assert_int_equal(st.files_direct, direct ? NF : 0);
	if (direct && !o->readers)
		assert_int_equal(st.readers, 1);	/* O_DIRECT only: the device copies */
	pm_stream_destroy(s);
	return items;
}

/* 300 files under a limit of 40 open files: a table of 20, below the queue depth. */
static void test_many_files(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(1 << 20);
	struct pm_stream_opts o;
	int fds = count_fds();

	pm_stream_opts_init(&o);
	o.batch_bytes = 64 << 10;
	nofile(40);
	for (int d = 0; d < 2; d++) {
		o.direct = d ? PM_DIRECT_OFF : PM_DIRECT_AUTO;
		o.shuffle = false;
		o.epochs = 1;
		o.order = PM_ORDER_IN_ORDER;
		assert_int_equal(stream_all(ctx, m, &o, fds), 2 * NF);
		o.shuffle = true;
		o.seed = 3;
		o.epochs = 2;
		o.order = PM_ORDER_AS_COMPLETED;
		assert_int_equal(stream_all(ctx, m, &o, fds), 4 * NF);
	}
	restore();
	assert_int_equal(count_fds(), fds);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* Several items and chunks per file: reads of a file wait for its open, then share it. */
static void test_chunks_share_entry(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(5000);
	struct pm_stream_opts o;
	int fds = count_fds();

	pm_stream_opts_init(&o);
	o.batch_bytes = 256 << 10;
	o.chunk_bytes = 4096;	/* a 5000-byte item is two reads */
	o.qd = 8;
	nofile(24);		/* a table of 12 */
	assert_int_equal(stream_all(ctx, m, &o, fds), pm_manifest_count(m));
	o.direct = PM_DIRECT_OFF;
	assert_int_equal(stream_all(ctx, m, &o, fds), pm_manifest_count(m));
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/*
 * Several reader lanes split the table, one part per ring: every file is in
 * the manifest twice, one item per batch, shuffled, so a file open in one
 * lane's part is often wanted by another lane (taken over once idle there,
 * waited for while its reads are in flight).  Down to one entry per lane.
 */
static void test_lanes_share_table(void **state)
{
	static const struct {
		uint32_t readers, qd, nofile;
	} cases[] = { { 1, 8, 24 }, { 2, 8, 24 }, { 3, 6, 24 }, { 8, 8, 16 } };
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(5000);
	struct pm_stream_opts o;
	int fds = count_fds();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pm_stream_stats st;
		struct pm_stream *s;

		pm_stream_opts_init(&o);
		o.readers = cases[i].readers;
		o.qd = cases[i].qd;
		o.batch_items = 1;
		o.shuffle = true;
		o.seed = 9;
		o.epochs = 2;
		o.order = i & 1 ? PM_ORDER_AS_COMPLETED : PM_ORDER_IN_ORDER;
		o.direct = i & 2 ? PM_DIRECT_OFF : PM_DIRECT_AUTO;
		/* the rings take a descriptor each: room for them and what is open already */
		nofile(cases[i].nofile > (uint32_t)fds + cases[i].readers + 2 ?
		       cases[i].nofile : (uint32_t)fds + cases[i].readers + 2);
		assert_int_equal(stream_all(ctx, m, &o, fds), 2 * pm_manifest_count(m));
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.readers, cases[i].readers);
		pm_stream_destroy(s);
		restore();
	}
	assert_int_equal(count_fds(), fds);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/*
 * Relative paths are opened in the working directory of create: a program
 * that changes directory afterwards (Hydra does) still reads its files.
 */
static void test_chdir_after_create(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m;
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	char cwd[PATH_MAX];
	uint64_t items = 0;
	int ret;

	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(pm_manifest_create(&m), 0);
	for (int i = 0; i < NF; i++)
		assert_int_equal(pm_manifest_add(m, strrchr(paths[i], '/') + 1, 0, sizes[i],
						 false, 0, NULL, 0), 0);
	pm_stream_opts_init(&o);
	o.batch_bytes = 64 << 10;
	nofile(40);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	assert_int_equal(chdir("/"), 0);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];
			int k = -1;

			assert_int_equal(sscanf(pm_manifest_path(m, it->path_id), "s%d.bin", &k), 1);
			assert_memory_equal((char *)b->host + it->slot_offset, data[k], it->length);
			items++;
		}
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	if (ret)
		fail_msg("%d %s", ret, pm_stream_error(s));
	assert_int_equal(items, NF);
	pm_stream_destroy(s);
	restore();
	assert_int_equal(chdir(cwd), 0);
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* Checked at create all the same: a FIFO is refused. */
static void test_bad_at_create(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(1 << 20);
	struct pm_stream_opts o;
	struct pm_stream *s;
	char fifo[PATH_MAX + 8];

	pm_stream_opts_init(&o);
	nofile(40);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(pm_manifest_add(m, fifo, 0, 10, false, 0, NULL, 0), 0);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "fifo: a FIFO, not a regular file"));
	unlink(fifo);
	pm_manifest_destroy(m);

	/* not in its directory's listing: statx names the error; a link is followed */
	m = manifest(1 << 20);
	snprintf(fifo, sizeof(fifo), "%s/missing.bin", dir);
	assert_int_equal(pm_manifest_add(m, fifo, 0, 10, false, 0, NULL, 0), 0);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -ENOENT);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "missing.bin: No such file or directory"));
	pm_manifest_destroy(m);
	m = manifest(1 << 20);
	snprintf(fifo, sizeof(fifo), "%s/link", dir);
	unlink(fifo);
	assert_int_equal(symlink(paths[0], fifo), 0);
	assert_int_equal(pm_manifest_add(m, fifo, 0, sizes[0], false, 0, NULL, 0), 0);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	pm_stream_destroy(s);
	unlink(fifo);
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* O_DIRECT asked for with files opened as they are read: every file is read with it. */
static void test_direct_on_lazy(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(5000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_stream_file f;
	struct pm_batch *b;
	int fds = count_fds();

	if (!direct_ok)
		skip();		/* this file system has no O_DIRECT */
	pm_stream_opts_init(&o);
	o.direct = PM_DIRECT_ON;
	o.batch_bytes = 64 << 10;
	o.chunk_bytes = 4096;
	nofile(40);
	assert_int_equal(stream_all(ctx, m, &o, fds), pm_manifest_count(m));
	/* placed and read in blocks of the device's alignment */
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	assert_int_equal(pm_stream_file(s, 0, &f), 0);
	assert_true(f.align >= 512 && !(f.align & (f.align - 1)));
	while (!pm_stream_next(s, &b) && b) {
		for (uint32_t i = 0; i < b->nitems; i++)
			assert_int_equal(b->items[i].slot_offset % f.align,
					 b->items[i].file_offset % f.align);
		pm_stream_release(s, b);
	}
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_true(st.read_bytes > st.bytes);
	pm_stream_destroy(s);
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); _exit(1); } } while (0)
#define NR 40

/*
 * In a private mount namespace (root, or a user namespace): a ramfs, which
 * has no O_DIRECT, mounted beside the test directory.  -1 when neither can
 * be had here.
 */
static int private_ramfs(const char *at)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64];
	int fd;

	if (unshare(CLONE_NEWNS)) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS))
			return -1;
		fd = open("/proc/self/setgroups", O_WRONLY);
		if (fd >= 0) {
			(void)!write(fd, "deny", 4);
			close(fd);
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		fd = open("/proc/self/uid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		fd = open("/proc/self/gid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("none", at, "ramfs", 0, NULL))
		return -1;
	return 0;
}

/* The child of test_direct_refused: exit 0 when all is as it should be, 77 to skip. */
static void direct_refused_child(const char *rdir)
{
	static unsigned char rdata[NR][3000];
	char rpaths[NR][PATH_MAX];
	struct pm_manifest *m;
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream_file f;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	struct rlimit rl = saved;
	int ret;

	if (private_ramfs(rdir))
		_exit(77);
	CHECK(pm_manifest_create(&m) == 0);
	for (int i = 0; i < NF; i++)
		CHECK(pm_manifest_add(m, paths[i], 0, sizes[i], false, 0, NULL, 0) == 0);
	for (int i = 0; i < NR; i++) {
		int fd;

		snprintf(rpaths[i], sizeof(rpaths[i]), "%s/r%03d.bin", rdir, i);
		test_fill(rdata[i], sizeof(rdata[i]), 1000 + (uint64_t)i);
		fd = open(rpaths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		CHECK(fd >= 0 && write(fd, rdata[i], sizeof(rdata[i])) == sizeof(rdata[i]));
		close(fd);
		CHECK(pm_manifest_add(m, rpaths[i], 100, 2000, false, 0, NULL, 0) == 0);
	}
	rl.rlim_cur = 40;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	fake_reset();
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	CHECK(ctx);
	pm_stream_opts_init(&o);
	o.batch_bytes = 64 << 10;
	o.direct = PM_DIRECT_ON;
	CHECK(pm_stream_create(ctx, m, &o, &s) == -EINVAL);
	CHECK(strstr(pm_ctx_last_error(ctx), direct_ok ? "r000.bin: O_DIRECT asked for but not possible: O_DIRECT open failed: Invalid argument" : "s000.bin: O_DIRECT asked for but not possible"));
	o.direct = PM_DIRECT_AUTO;
	o.shuffle = true;
	CHECK(pm_stream_create(ctx, m, &o, &s) == 0);
	for (uint32_t id = 0; id < NF + NR; id++) {
		CHECK(pm_stream_file(s, id, &f) == 0);
		if (id >= NF) {
			CHECK(!f.direct);
			CHECK(!strcmp(f.note, "buffered: O_DIRECT open failed: Invalid argument"));
		} else {
			CHECK(f.direct == direct_ok);
		}
	}
	while (!(ret = pm_stream_next(s, &b)) && b) {
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];
			const unsigned char *want = it->path_id < NF ? data[it->path_id]
							: rdata[it->path_id - NF] + 100;

			CHECK(!memcmp((char *)b->host + it->slot_offset, want, it->length));
		}
		pm_stream_release(s, b);
	}
	CHECK(ret == 0);
	CHECK(pm_stream_stats(s, &st) == 0);
	CHECK(st.items == NF + NR);
	CHECK(st.files_direct == (direct_ok ? NF : 0));
	CHECK(st.files_buffered == (direct_ok ? NR : NF + NR));
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	pm_close(ctx);
	_exit(0);
}

/*
 * Lazily opened files on a file system without O_DIRECT (ramfs) beside
 * ones with it: O_DIRECT where it works, buffered with the reason where
 * not, every byte right; O_DIRECT asked for names the first that cannot.
 */
static void test_direct_refused(void **state)
{
	char rdir[PATH_MAX];
	int status;
	pid_t pid;

	snprintf(rdir, sizeof(rdir), "%s/ramfs", dir);
	assert_int_equal(mkdir(rdir, 0755), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		direct_refused_child(rdir);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	rmdir(rdir);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();		/* no mount namespace here */
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * A lazily opened file whose O_DIRECT read fails with -EINVAL at read
 * time (opened with O_DIRECT, but the alignment refused) is read buffered
 * from then on, into the places planned for O_DIRECT: every byte right,
 * and pm_stream_file and the stats say it is buffered and why.  Without
 * the fallback the item fails with -EINVAL.
 */
static void test_direct_refused_when_read(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(5000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream_file f;
	struct pm_stream *s;
	struct pm_batch *b;
	uint32_t refused = UINT32_MAX, direct = 0;
	char want[128];
	int ret;

	if (!direct_ok)
		skip();		/* this file system has no O_DIRECT */
	pm_stream_opts_init(&o);
	o.batch_bytes = 64 << 10;
	o.chunk_bytes = 4096;
	o.readers = 1;
	nofile(40);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	__atomic_store_n(&einval_reads, 1, __ATOMIC_SEQ_CST);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		check_items(m, b);
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_int_equal(__atomic_load_n(&einval_reads, __ATOMIC_SEQ_CST), 0);	/* one was refused */
	__atomic_store_n(&einval_reads, 0, __ATOMIC_SEQ_CST);
	if (ret)
		fail_msg("stream failed: %d %s", ret, pm_stream_error(s));
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, pm_manifest_count(m));
	assert_int_equal(st.bytes, pm_manifest_bytes(m));
	assert_int_equal(st.failed_batches, 0);
	/* the one file refused is buffered, with the reason; the others stay O_DIRECT */
	for (uint32_t id = 0; id < pm_stream_nfiles(s); id++) {
		assert_int_equal(pm_stream_file(s, id, &f), 0);
		if (f.direct) {
			direct++;
			assert_string_equal(f.note, "");
			continue;
		}
		assert_int_equal(refused, UINT32_MAX);
		refused = id;
		assert_int_equal(f.align, 1);
		snprintf(want, sizeof(want), "buffered: O_DIRECT refused when read (%s); placed for alignment ",
			 strerror(EINVAL));
		assert_non_null(strstr(f.note, want));
	}
	assert_int_not_equal(refused, UINT32_MAX);
	assert_int_equal(direct, NF - 1);
	assert_int_equal(st.files_direct, NF - 1);
	assert_int_equal(st.files_buffered, 1);
	pm_stream_destroy(s);
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* Write path anew with len bytes of data under another inode, renamed over it. */
static void replace_file(const char *path, const void *buf, size_t len)
{
	char tmp[PATH_MAX + 8];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	assert_int_equal(rename(tmp, path), 0);
}

/*
 * s007.bin removed (replace false) or renamed over by a copy of its bytes
 * (a new inode) after create: its items fail with err and a sentence
 * naming it, the stream stops (or, skip, both of its items are counted
 * failed), with O_DIRECT and buffered.
 */
static void changed_after_create(bool replace, int err, const char *why)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(1 << 20);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	char moved[PATH_MAX + 8];
	int ret;

	snprintf(moved, sizeof(moved), "%s.gone", paths[7]);
	pm_stream_opts_init(&o);
	o.batch_items = 1;
	o.slots = 2;
	nofile(40);
	for (int c = 0; c < 4; c++) {
		o.on_error = c & 1 ? PM_ON_ERROR_SKIP : PM_ON_ERROR_STOP;
		o.direct = c & 2 ? PM_DIRECT_OFF : PM_DIRECT_AUTO;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
		if (replace)
			replace_file(paths[7], data[7], sizes[7]);
		else
			assert_int_equal(rename(paths[7], moved), 0);
		while (!(ret = pm_stream_next(s, &b)) && b) {
			assert_int_not_equal(b->items[0].path_id, 7);
			pm_stream_release(s, b);
		}
		if (!replace)
			assert_int_equal(rename(moved, paths[7]), 0);
		assert_int_equal(pm_stream_stats(s, &st), 0);
		if (c & 1) {
			assert_int_equal(ret, 0);
			assert_int_equal(st.failed_items, 2);	/* the file is in the manifest twice */
			assert_int_equal(st.items, 2 * NF - 2);
		} else {
			assert_int_equal(ret, err);
		}
		assert_non_null(strstr(pm_stream_error(s), "s007.bin offset 0 length"));
		assert_non_null(strstr(pm_stream_error(s), why));
		pm_stream_destroy(s);
	}
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* A file removed after create fails its items by name (skip) or stops the stream. */
static void test_vanished(void **state)
{
	changed_after_create(false, -ENOENT, "cannot open the file (No such file or directory)");
}

/* A file renamed over after create is not the file create saw (the same bytes under a new inode too). */
static void test_replaced_after_create(void **state)
{
	changed_after_create(true, -ESTALE, "replaced since the stream was created");
}

/*
 * A file that grew after the stream first opened it: opened again for its
 * second item (the table of 20 entries reused it meanwhile), it fails by
 * name instead of handing over bytes of another file's version.
 */
static void test_changed_after_open(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(1 << 20);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	bool grown = false;
	int ret, fd;

	pm_stream_opts_init(&o);
	o.batch_items = 1;
	o.slots = 2;
	o.prefetch = 1;
	nofile(40);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		if (b->items[0].path_id == 7 && !grown) {
			fd = open(paths[7], O_WRONLY | O_APPEND | O_CLOEXEC);
			assert_true(fd >= 0);
			assert_int_equal(write(fd, "x", 1), 1);
			close(fd);
			grown = true;
		}
		pm_stream_release(s, b);
	}
	assert_true(grown);
	assert_int_equal(ret, -ESTALE);
	assert_non_null(strstr(pm_stream_error(s), "item 307 (")); /* its second item */
	assert_non_null(strstr(pm_stream_error(s), "s007.bin offset 0 length"));
	assert_non_null(strstr(pm_stream_error(s), "changed since the stream first saw it"));
	pm_stream_destroy(s);
	assert_int_equal(truncate(paths[7], (off_t)sizes[7]), 0);
	restore();
	pm_manifest_destroy(m);
	pm_close(ctx);
}

/* Equal steps through the stream: 4 ranks of differently sized items get as many batches each. */
static void test_equal_steps(void **state)
{
	struct pm_ctx *ctx = open_ctx();
	struct pm_manifest *m = manifest(1 << 20);
	struct pm_stream_opts o;
	uint64_t first[2] = { 0, 0 };

	pm_stream_opts_init(&o);
	o.batch_bytes = 48 << 10;
	o.world_size = 4;
	o.shuffle = true;
	o.epochs = 2;
	for (uint32_t r = 0; r < 4; r++) {
		struct pm_stream *s;
		struct pm_stream_stats st;
		struct pm_batch *b;
		uint64_t n[2] = { 0, 0 };

		o.rank = r;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), 0);
		while (!pm_stream_next(s, &b) && b) {
			n[b->epoch]++;
			pm_stream_release(s, b);
		}
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.failed_batches, 0);
		for (int e = 0; e < 2; e++) {
			if (!r)
				first[e] = n[e];
			assert_int_equal(n[e], first[e]);	/* per epoch: shuffles differ */
		}
		pm_stream_destroy(s);
	}
	pm_manifest_destroy(m);
	pm_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_files),
		cmocka_unit_test(test_chunks_share_entry),
		cmocka_unit_test(test_lanes_share_table),
		cmocka_unit_test(test_vanished),
		cmocka_unit_test(test_chdir_after_create),
		cmocka_unit_test(test_bad_at_create),
		cmocka_unit_test(test_equal_steps),
		cmocka_unit_test(test_direct_on_lazy),
		cmocka_unit_test(test_direct_refused),
		cmocka_unit_test(test_direct_refused_when_read),
		cmocka_unit_test(test_replaced_after_create),
		cmocka_unit_test(test_changed_after_open),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
