// SPDX-License-Identifier: MIT
/*
 * lib/stream/ (stream.c, lane.c, stream_next.c, reader.c): every delivered
 * byte equals the file's, in every mode (buffered, O_DIRECT, chunked, shuffled, sharded, epochs, as
 * completed), slots are never reused under a batch the consumer holds, and
 * every bad input (missing files, items past the end, files that shrink,
 * EIO, crc mismatch, items larger than a slot) fails the batch with a
 * sentence naming the item, stopping or skipping as asked.
 *
 * Test files live next to the test binary ($(O)/unit/ on the checkout's file
 * system), not in /tmp, which may be a tmpfs without O_DIRECT; the O_DIRECT
 * cases check which mode they actually got.
 *
 * Built a second time with PM_TEST_MODULE ($(O)/vm/test_stream_module) to run
 * in the VM against the real /dev/pinmem instead of the stand-in module.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pm_test.h"
#include "pinmem_stream.h"
#include "cudastub.h"
#if defined(PM_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#define NFILES 3

struct tfile {
	char path[PATH_MAX];
	unsigned char *data;
	size_t size;
};

static char dir[PATH_MAX - 64];
static struct tfile tf[NFILES];
static const size_t tf_size[NFILES] = { (3 << 20) + 777, (1 << 20) + 5, 5000 };

/* --- fixtures --- */

static void write_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static int setup(void **state)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = 0;
	if (strlen(exe) + 32 > sizeof(dir))
		return -1;
	snprintf(dir, sizeof(dir), "%s/stream-test.XXXXXX", dirname(exe));
	if (!mkdtemp(dir))
		return -1;
	for (int i = 0; i < NFILES; i++) {
		snprintf(tf[i].path, sizeof(tf[i].path), "%s/f%d.bin", dir, i);
		tf[i].size = tf_size[i];
		tf[i].data = malloc(tf[i].size);
		test_fill(tf[i].data, tf[i].size, i + 1);
		write_file(tf[i].path, tf[i].data, tf[i].size);
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	for (int i = 0; i < NFILES; i++)
		free(tf[i].data);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

/* Does the test directory's file system take O_DIRECT? (the library decides alone) */
static bool fs_direct(void)
{
	struct statx stx;
	int fd = open(tf[0].path, O_RDONLY | O_DIRECT);

	if (fd < 0)
		return false;
	close(fd);
	if (statx(AT_FDCWD, tf[0].path, 0, STATX_DIOALIGN, &stx))
		return false;
	return !(stx.stx_mask & STATX_DIOALIGN) || stx.stx_dio_offset_align;
}

static struct pm_ctx *open_ctx(enum pm_backend_kind be)
{
#ifdef PM_TEST_MODULE
	struct pm_open_opts o = { .flags = PM_OPEN_REQUIRE_MODULE, .backend = be };
	struct pm_ctx *ctx = NULL;

	assert_int_equal(pm_open(&ctx, &o), 0);
	return ctx;
#else
	fake_reset();
	return fake_ctx(0, be);
#endif
}

static void close_ctx(struct pm_ctx *ctx)
{
	pm_close(ctx);
#ifndef PM_TEST_MODULE
	assert_int_equal(fake.regions, 0);	/* every slot buffer unpinned */
#endif
}

static struct pm_manifest *new_manifest(void)
{
	struct pm_manifest *m;

	assert_int_equal(pm_manifest_create(&m), 0);
	return m;
}

static void add(struct pm_manifest *m, int f, uint64_t off, uint64_t len)
{
	assert_int_equal(pm_manifest_add(m, tf[f].path, off, len, false, 0, NULL, 0), 0);
}

/* n items of random files, offsets and lengths (1..maxlen), unaligned. */
static struct pm_manifest *random_items(size_t n, uint64_t seed, uint64_t maxlen)
{
	struct pm_manifest *m = new_manifest();
	uint64_t x = seed * 2654435761u + 7;

	for (size_t i = 0; i < n; i++) {
		int f;
		uint64_t len, off;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		f = (int)((x >> 33) % NFILES);
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		len = 1 + (x >> 33) % (maxlen < tf[f].size ? maxlen : tf[f].size);
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		off = (x >> 33) % (tf[f].size - len + 1);
		add(m, f, off, len);
	}
	return m;
}

static const struct tfile *file_of(const struct pm_manifest *m, uint32_t path_id)
{
	const char *p = pm_manifest_path(m, path_id);

	for (int i = 0; i < NFILES; i++)
		if (!strcmp(p, tf[i].path))
			return &tf[i];
	fail_msg("unknown path %s", p);
	return NULL;
}

/* Every item of the batch equals the file, in host memory and on the "device". */
static void check_batch(const struct pm_manifest *m, const struct pm_batch *b)
{
	uint64_t bytes = 0;

	for (uint32_t i = 0; i < b->nitems; i++) {
		const struct pm_batch_item *it = &b->items[i];
		const struct tfile *t = file_of(m, it->path_id);
		struct pm_item mi;

		assert_int_equal(pm_manifest_item(m, it->index, &mi), 0);
		assert_int_equal(mi.offset, it->file_offset);
		assert_int_equal(mi.length, it->length);
		assert_true(it->slot_offset + it->length <= b->span);
		assert_memory_equal((char *)b->host + it->slot_offset,
				    t->data + it->file_offset, it->length);
		if (b->dev)
			assert_memory_equal((char *)b->dev + it->slot_offset,
					    t->data + it->file_offset, it->length);
		bytes += it->length;
	}
	assert_int_equal(bytes, b->bytes);
}

/* Take every batch; counts[i] += deliveries of item i; returns batches. */
static uint64_t consume(struct pm_stream *s, const struct pm_manifest *m,
			uint32_t *counts, uint64_t *order, size_t *norder)
{
	struct pm_batch *b;
	uint64_t n = 0, seq = 0;
	int ret;

	while (!(ret = pm_stream_next(s, &b)) && b) {
		check_batch(m, b);
		if (counts)
			for (uint32_t i = 0; i < b->nitems; i++)
				counts[b->items[i].index]++;
		if (order)
			for (uint32_t i = 0; i < b->nitems; i++)
				order[(*norder)++] = b->items[i].index;
		assert_true(b->seq >= seq);	/* in order; skipped batches leave gaps */
		seq = b->seq + 1;
		assert_int_equal(pm_stream_release(s, b), 0);
		n++;
	}
	if (ret)
		fail_msg("stream failed: %d %s", ret, pm_stream_error(s));
	/* the end is sticky */
	assert_int_equal(pm_stream_next(s, &b), 0);
	assert_null(b);
	return n;
}

static struct pm_stream *stream_ok(struct pm_ctx *ctx, struct pm_manifest *m,
				    const struct pm_stream_opts *o)
{
	struct pm_stream *s = NULL;
	int ret = pm_stream_create(ctx, m, o, &s);

	if (ret)
		fail_msg("pm_stream_create: %d %s", ret, pm_ctx_last_error(ctx));
	return s;
}

/* Destroy the stream (NULL is fine), the manifest and the context. */
static void finish(struct pm_ctx *ctx, struct pm_manifest *m, struct pm_stream *s)
{
	pm_stream_destroy(s);
	pm_manifest_destroy(m);
	close_ctx(ctx);
}

/* --- every byte right --- */

static void stream_all(enum pm_direct direct, enum pm_backend_kind be, uint32_t chunk,
		       bool expect_direct)
{
	struct pm_ctx *ctx = open_ctx(be);
	struct pm_manifest *m = random_items(300, direct + 1, 200000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream_file f;
	struct pm_stream *s;
	uint32_t *counts = calloc(300, sizeof(*counts));
	int fds = count_fds();

	pm_stream_opts_init(&o);
	o.direct = direct;
	o.batch_bytes = 1 << 20;
	o.slots = 3;
	o.qd = 8;
	o.chunk_bytes = chunk;
	s = stream_ok(ctx, m, &o);
	for (uint32_t i = 0; i < pm_stream_nfiles(s); i++) {
		assert_int_equal(pm_stream_file(s, i, &f), 0);
		assert_int_equal(f.direct, expect_direct);
		if (f.direct)
			assert_string_equal(f.note, "");
		else
			assert_true(f.note[0]);
	}
	assert_int_equal(pm_stream_file(s, 99, &f), -ERANGE);
	consume(s, m, counts, NULL, NULL);
	for (size_t i = 0; i < 300; i++)
		assert_int_equal(counts[i], 1);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, 300);
	assert_int_equal(st.bytes, pm_manifest_bytes(m));
	assert_int_equal(st.files_direct, expect_direct ? NFILES : 0);
	assert_int_equal(st.failed_batches, 0);
	assert_true(st.read_bytes >= st.bytes);
	assert_true(st.read_lat.p50 > 0 && st.read_lat.p50 <= st.read_lat.p99 &&
		    st.read_lat.p99 <= st.read_lat.max);
	if (be != PM_BACKEND_NONE)
		assert_true(st.copy_lat.max > 0);
	assert_true(st.elapsed_s > 0);
	assert_true(st.ring_setup[0]);
	assert_string_equal(st.ring_note, "");	/* files and slots registered: READ_FIXED */
	pm_stream_destroy(s);
	assert_int_equal(count_fds(), fds);	/* every file closed */
	free(counts);
	finish(ctx, m, NULL);
}

static void test_bytes_buffered(void **state)
{
	stream_all(PM_DIRECT_OFF, PM_BACKEND_HOST, 1 << 20, false);
	stream_all(PM_DIRECT_OFF, PM_BACKEND_NONE, 4096, false);
}

static void test_bytes_direct(void **state)
{
	bool ok = fs_direct();

	print_message("O_DIRECT on %s: %s\n", dir, ok ? "yes" : "no (buffered fallback checked)");
	/* auto: O_DIRECT wherever the file system takes it, unaligned items and all */
	stream_all(PM_DIRECT_AUTO, PM_BACKEND_HOST, 64 << 10, ok);
	stream_all(PM_DIRECT_AUTO, PM_BACKEND_NONE, 4096, ok);
	if (ok) {
		stream_all(PM_DIRECT_ON, PM_BACKEND_HOST, 1 << 20, true);
	} else {
		struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
		struct pm_manifest *m = random_items(3, 1, 100);
		struct pm_stream_opts o;
		struct pm_stream *s;

		pm_stream_opts_init(&o);
		o.direct = PM_DIRECT_ON;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
		assert_non_null(strstr(pm_ctx_last_error(ctx), "O_DIRECT asked for but not possible"));
		finish(ctx, m, NULL);
	}
}

/* Whole files split in chunks, items larger than a chunk, slot-sized batches. */
static void test_large_items_chunks(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	uint32_t counts[4] = { 0 };
	char err[256];

	assert_int_equal(pm_manifest_add_file(m, tf[0].path, 0, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_add_file(m, tf[1].path, 0, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_add_file(m, tf[2].path, 0, err, sizeof(err)), 0);
	add(m, 0, 12345, 2 << 20);
	pm_stream_opts_init(&o);
	o.batch_bytes = 4 << 20;	/* f0 (3 MiB) alone, then f1 + f2 + the 2 MiB item */
	o.chunk_bytes = 128 << 10;
	o.qd = 4;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(consume(s, m, counts, NULL, NULL), 2);
	for (int i = 0; i < 4; i++)
		assert_int_equal(counts[i], 1);
	finish(ctx, m, s);
}

static void test_batch_boundaries(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(100, 11, 30000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	uint64_t next_index = 0;

	/* by count: batches of exactly 7 (the last of 2), in manifest order */
	pm_stream_opts_init(&o);
	o.batch_items = 7;
	s = stream_ok(ctx, m, &o);
	for (int n = 0; !pm_stream_next(s, &b) && b; n++) {
		check_batch(m, b);
		assert_int_equal(b->nitems, n < 14 ? 7 : 2);
		for (uint32_t i = 0; i < b->nitems; i++)
			assert_int_equal(b->items[i].index, next_index++);
		pm_stream_release(s, b);
	}
	assert_int_equal(next_index, 100);
	pm_stream_destroy(s);

	/* by bytes: each batch fits its slot and the next item would not have */
	pm_stream_opts_init(&o);
	o.batch_bytes = 65536;
	s = stream_ok(ctx, m, &o);
	next_index = 0;
	while (!pm_stream_next(s, &b) && b) {
		struct pm_item nx;

		check_batch(m, b);
		assert_true(b->span <= 65536);
		next_index += b->nitems;
		if (next_index < 100) {
			assert_int_equal(pm_manifest_item(m, next_index, &nx), 0);
			assert_true(b->span + nx.length > 65536 - 8192);
		}
		pm_stream_release(s, b);
	}
	assert_int_equal(next_index, 100);
	finish(ctx, m, s);
}

static void test_epochs_shuffle(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_NONE);
	struct pm_manifest *m = random_items(50, 3, 20000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	uint64_t a[150], b[150], c[150];
	size_t na = 0, nb = 0, nc = 0;
	uint32_t counts[50];

	pm_stream_opts_init(&o);
	o.epochs = 3;
	o.shuffle = true;
	o.seed = 1234;
	o.batch_items = 4;
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, a, &na);
	pm_stream_destroy(s);
	assert_int_equal(na, 150);
	/* each epoch is a permutation, and epochs differ */
	for (int e = 0; e < 3; e++) {
		memset(counts, 0, sizeof(counts));
		for (int i = 0; i < 50; i++)
			counts[a[e * 50 + i]]++;
		for (int i = 0; i < 50; i++)
			assert_int_equal(counts[i], 1);
	}
	assert_memory_not_equal(a, a + 50, 50 * sizeof(*a));
	/* the same seed gives the same stream, another seed another */
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, b, &nb);
	pm_stream_destroy(s);
	assert_memory_equal(a, b, sizeof(a));
	o.seed = 1235;
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, c, &nc);
	pm_stream_destroy(s);
	assert_memory_not_equal(a, c, sizeof(a));
	finish(ctx, m, NULL);
}

static void test_sharding_exactly_once(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(31, 5, 10000);
	uint32_t counts[31] = { 0 };

	for (uint32_t r = 0; r < 4; r++) {
		struct pm_stream_opts o;
		struct pm_stream_stats st;
		struct pm_stream *s;

		pm_stream_opts_init(&o);
		o.rank = r;
		o.world_size = 4;
		o.shuffle = true;
		o.seed = 77;
		o.epochs = 2;
		o.batch_items = 3;
		s = stream_ok(ctx, m, &o);
		consume(s, m, counts, NULL, NULL);
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.items, 2 * (r < 3 ? 8 : 7));
		assert_int_equal(st.total_items, st.items);
		pm_stream_destroy(s);
	}
	for (int i = 0; i < 31; i++)
		assert_int_equal(counts[i], 2);	/* once per epoch across the 4 ranks */
	finish(ctx, m, NULL);
}

static void test_as_completed(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(200, 8, 60000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	uint32_t counts[200] = { 0 };
	char seen[64] = { 0 };
	uint64_t n = 0;

	pm_stream_opts_init(&o);
	o.order = PM_ORDER_AS_COMPLETED;
	o.batch_bytes = 256 << 10;
	o.slots = 6;
	o.prefetch = 3;
	s = stream_ok(ctx, m, &o);
	while (!pm_stream_next(s, &b) && b) {
		check_batch(m, b);
		assert_true(b->seq < 64 && !seen[b->seq]);
		seen[b->seq] = 1;
		for (uint32_t i = 0; i < b->nitems; i++)
			counts[b->items[i].index]++;
		pm_stream_release(s, b);
		n++;
	}
	for (uint64_t i = 0; i < n; i++)
		assert_true(seen[i]);
	for (int i = 0; i < 200; i++)
		assert_int_equal(counts[i], 1);
	finish(ctx, m, s);
}

/*
 * Not a live thread of ours: PF_IO_WORKER in its flags (/proc/.../stat
 * field 9), an io_uring worker, or PF_EXITING, a thread already joined
 * (pthread_join returns at mm_release, before the task leaves
 * /proc/self/task: the VM's 6.1 kernel once showed a lane there just after
 * pm_stream_destroy).
 */
static bool not_live_thread(const char *tid)
{
	char path[64], buf[512], *p;
	unsigned long flags = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%.20s/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return true;	/* exited meanwhile: not a reader lane */
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return true;
	return flags & (0x10 | 0x4);
}

/*
 * Threads of this process named pinmem-read<N>: the stream's reader lanes.
 * An io_uring worker starts with the name of the thread it works for and
 * renames itself only once it runs: not counted.
 */
static int reader_threads(void)
{
	char path[64], comm[32];
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* exited meanwhile */
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "pinmem-read", 11) &&
		    !not_live_thread(e->d_name))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/*
 * Several reader lanes, each with its own ring and share of qd: every byte
 * right in order and as completed, over epochs, and as many reader threads
 * as asked for (capped by qd; the default is the CPUs, at most 4).
 */
static void test_readers(void **state)
{
	static const uint32_t readers[] = { 1, 2, 3, 5 };
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(400, 11, 150000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	uint32_t counts[400];
	cpu_set_t cpus;
	uint32_t ncpu;

	for (size_t k = 0; k < sizeof(readers) / sizeof(readers[0]); k++) {
		for (int order = 0; order < 2; order++) {
			pm_stream_opts_init(&o);
			o.direct = PM_DIRECT_OFF;
			o.readers = readers[k];
			o.qd = 6;
			o.slots = 5;
			o.epochs = 2;
			o.batch_bytes = 512 << 10;
			o.order = order ? PM_ORDER_AS_COMPLETED : PM_ORDER_IN_ORDER;
			memset(counts, 0, sizeof(counts));
			s = stream_ok(ctx, m, &o);
			assert_int_equal(reader_threads(), (int)readers[k]);
			if (order) {
				struct pm_batch *b;

				while (!pm_stream_next(s, &b) && b) {
					check_batch(m, b);
					for (uint32_t i = 0; i < b->nitems; i++)
						counts[b->items[i].index]++;
					pm_stream_release(s, b);
				}
			} else {
				consume(s, m, counts, NULL, NULL);
			}
			for (int i = 0; i < 400; i++)
				assert_int_equal(counts[i], 2);
			assert_int_equal(pm_stream_stats(s, &st), 0);
			assert_int_equal(st.readers, readers[k]);
			assert_int_equal(st.failed_batches, 0);
			pm_stream_destroy(s);
			assert_int_equal(reader_threads(), 0);
		}
	}

	/* the default: a lane per CPU this process may use, at most 4 ... */
	assert_int_equal(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
	ncpu = (uint32_t)CPU_COUNT(&cpus);
	pm_stream_opts_init(&o);
	o.direct = PM_DIRECT_OFF;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.readers, ncpu < 4 ? ncpu : 4);
	pm_stream_destroy(s);
	/* ... and one when every file is read with O_DIRECT (the device copies) */
	if (fs_direct()) {
		o.direct = PM_DIRECT_ON;
		s = stream_ok(ctx, m, &o);
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.files_direct, NFILES);
		assert_int_equal(st.readers, 1);
		pm_stream_destroy(s);
	} else {
		print_message("no O_DIRECT on %s: the one-lane default is not checked here\n", dir);
	}

	/* more readers than reads in flight, or than 64: refused with a sentence */
	o.readers = 7;
	o.qd = 6;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "readers 7: at most 64, and no more than the queue depth (6)"));
	o.readers = 65;
	o.qd = 4096;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	finish(ctx, m, NULL);
}

/*
 * Stopping on an error, as completed: a batch that fails at once (its item is
 * past the end of the file) while the batch before it is still reading does
 * not hide that batch: it arrives, then the error.
 */
static void test_stop_as_completed(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	int got = 0, ret;

	add(m, 0, 0, tf[0].size);	/* batch 0: 3 MiB, still reading ... */
	add(m, 2, 4000, 2000);		/* batch 1: past the end, fails at once */
	pm_stream_opts_init(&o);
	o.order = PM_ORDER_AS_COMPLETED;
	o.batch_items = 1;
	o.batch_bytes = 4 << 20;
	for (int round = 0; round < 20; round++) {
		s = stream_ok(ctx, m, &o);
		while (!(ret = pm_stream_next(s, &b)) && b) {
			assert_int_equal(b->seq, 0);
			check_batch(m, b);
			pm_stream_release(s, b);
			got++;
		}
		assert_int_equal(ret, -ENODATA);
		assert_non_null(strstr(pm_stream_error(s), "batch 1, item 1"));
		assert_int_equal(got, round + 1);
		assert_int_equal(pm_stream_next(s, &b), -ENODATA);	/* sticky */
		pm_stream_destroy(s);
	}
	finish(ctx, m, NULL);
}

/*
 * pm_stream_resume_batch, as completed: after each batch handed over it is
 * the lowest batch neither handed over nor dropped as failed (skip), so a
 * resume there (start_batch) misses nothing; a batch that stopped the
 * stream counts as not handed over.  In order it is the batch after the last.
 */
static void test_resume_batch(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	uint64_t low;
	int ret;

	add(m, 0, 0, tf[0].size);	/* batch 0: 3 MiB, still reading ... */
	add(m, 2, 4000, 2000);		/* batch 1: past the end, fails at once */
	for (int i = 0; i < 6; i++)
		add(m, 1, (uint64_t)i * 100, 100);	/* batches 2..7: small */
	pm_stream_opts_init(&o);
	o.order = PM_ORDER_AS_COMPLETED;
	o.batch_items = 1;
	o.batch_bytes = 4 << 20;
	o.slots = 6;
	for (int round = 0; round < 10; round++) {
		bool seen[8] = { false };
		uint64_t want;

		o.on_error = PM_ON_ERROR_SKIP;
		s = stream_ok(ctx, m, &o);
		assert_int_equal(pm_stream_resume_batch(s, &low), 0);
		assert_int_equal(low, 0);
		while (!(ret = pm_stream_next(s, &b)) && b) {
			assert_true(b->seq < 8 && b->seq != 1 && !seen[b->seq]);
			seen[b->seq] = true;
			pm_stream_release(s, b);
			assert_int_equal(pm_stream_stats(s, &st), 0);
			for (want = 0; want < 8; want++)
				if (!seen[want] && !(want == 1 && st.failed_batches))
					break;
			assert_int_equal(pm_stream_resume_batch(s, &low), 0);
			assert_int_equal(low, want);
		}
		assert_int_equal(ret, 0);
		assert_int_equal(pm_stream_resume_batch(s, &low), 0);
		assert_int_equal(low, 8);
		pm_stream_destroy(s);

		/* stopping: batch 0 arrives, batch 1 is not handed over */
		o.on_error = PM_ON_ERROR_STOP;
		s = stream_ok(ctx, m, &o);
		while (!(ret = pm_stream_next(s, &b)) && b)
			pm_stream_release(s, b);
		assert_int_equal(ret, -ENODATA);
		assert_int_equal(pm_stream_resume_batch(s, &low), 0);
		assert_int_equal(low, 1);
		pm_stream_destroy(s);
	}
	/* in order, resumed: the batch after the last one */
	o.order = PM_ORDER_IN_ORDER;
	o.on_error = PM_ON_ERROR_SKIP;
	o.start_batch = 2;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_resume_batch(s, &low), 0);
	assert_int_equal(low, 2);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		pm_stream_release(s, b);
		assert_int_equal(pm_stream_resume_batch(s, &low), 0);
		assert_int_equal(low, b->seq + 1);
	}
	assert_int_equal(low, 8);
	finish(ctx, m, s);
}

/* A FIFO in a manifest is refused at create with a sentence, not waited on in open(2). */
static void test_fifo_refused(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	char fifo[PATH_MAX + 16];
	int fds = count_fds();

	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	add(m, 0, 0, 1000);
	assert_int_equal(pm_manifest_add(m, fifo, 0, 10, false, 0, NULL, 0), 0);
	pm_stream_opts_init(&o);
	for (int skip = 0; skip < 2; skip++) {
		o.on_error = skip ? PM_ON_ERROR_SKIP : PM_ON_ERROR_STOP;
		alarm(20);
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
		alarm(0);
		assert_null(s);
		assert_non_null(strstr(pm_ctx_last_error(ctx),
				       "fifo: a FIFO, not a regular file or block device"));
		assert_int_equal(count_fds(), fds);
	}
	unlink(fifo);
	finish(ctx, m, NULL);
}

/* A held batch stays intact while every other slot is recycled many times. */
static void test_held_batch_untouched(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(400, 21, 50000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *held, *b;
	unsigned char *snap_host, *snap_dev;
	int others = 0;

	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_bytes = 128 << 10;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &held), 0);
	assert_non_null(held);
	check_batch(m, held);
	snap_host = malloc(held->span);
	snap_dev = malloc(held->span);
	memcpy(snap_host, held->host, held->span);
	memcpy(snap_dev, held->dev, held->span);
	while (!pm_stream_next(s, &b) && b) {
		assert_int_not_equal(b->slot, held->slot);
		check_batch(m, b);
		assert_int_equal(pm_stream_release(s, b), 0);
		assert_memory_equal(held->host, snap_host, held->span);
		assert_memory_equal(held->dev, snap_dev, held->span);
		others++;
	}
	assert_true(others > 20);
	check_batch(m, held);
	assert_int_equal(pm_stream_release(s, held), 0);
	assert_int_equal(pm_stream_release(s, held), -EINVAL);	/* not held twice */
	free(snap_host);
	free(snap_dev);
	finish(ctx, m, s);
}

static void test_all_slots_held(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(100, 2, 50000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b1, *b2, *b3;
	struct pm_batch fake_batch = { .slot = 0 };

	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_bytes = 64 << 10;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b1), 0);
	assert_int_equal(pm_stream_next(s, &b2), 0);
	assert_int_equal(pm_stream_next(s, &b3), -EDEADLK);
	assert_null(b3);
	assert_non_null(strstr(pm_stream_error(s), "holds all 2 slots"));
	assert_int_equal(pm_stream_release(s, &fake_batch), -EINVAL);
	assert_int_equal(pm_stream_release(s, NULL), -EINVAL);
	assert_int_equal(pm_stream_release(s, b1), 0);
	assert_int_equal(pm_stream_next(s, &b3), 0);
	assert_non_null(b3);
	assert_int_equal(b3->seq, 2);
	check_batch(m, b2);
	check_batch(m, b3);
	pm_stream_destroy(s);	/* with batches still held: nothing leaks */
	finish(ctx, m, NULL);
}

/*
 * A batch pointer kept after its release (a double release, a stale copy in
 * the caller) is refused by release, release_on and batch_wait even once
 * its slot holds a later batch, which stays held and unchanged.
 */
static void test_stale_batch_refused(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(40, 3, 5000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *old, *b[2];
	int fake_stream;

	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_items = 1;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &old), 0);
	assert_int_equal(pm_stream_release(s, old), 0);
	for (int round = 0; round < 15; round++) {
		uint64_t seq[2];

		for (int i = 0; i < 2; i++) {
			assert_int_equal(pm_stream_next(s, &b[i]), 0);
			assert_non_null(b[i]);
			seq[i] = b[i]->seq;
		}
		/* one of the two is in old's slot now */
		assert_true(b[0]->slot == old->slot || b[1]->slot == old->slot);
		assert_int_equal(pm_stream_release(s, old), -EINVAL);
		assert_int_equal(pm_stream_release_on(s, old, &fake_stream), -EINVAL);
		assert_int_equal(pm_stream_batch_wait(s, old, &fake_stream), -EINVAL);
		usleep(1000);	/* a refilled slot would show now */
		for (int i = 0; i < 2; i++) {
			assert_int_equal(b[i]->seq, seq[i]);
			check_batch(m, b[i]);
		}
		assert_int_equal(pm_stream_release(s, b[0]), 0);
		assert_int_equal(pm_stream_release(s, b[0]), -EINVAL);	/* twice */
		assert_int_equal(pm_stream_release(s, b[1]), 0);
		old = b[round % 2];
	}
	finish(ctx, m, s);
}

/*
 * The hand-off modes on the host backend (the cuda path, with a consumer on
 * its own stream, is test_cuda_* below): every byte right in each mode, no
 * device buffers in HOST mode, release_on frees the slot, and a batch not
 * held is refused by batch_wait and release_on alike.
 */
static void handoff_stream(enum pm_backend_kind be, enum pm_handoff mode)
{
	struct pm_ctx *ctx = open_ctx(be);
	struct pm_manifest *m = random_items(200, 31 + mode, 60000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b, *last = NULL;
	uint32_t *counts = calloc(200, sizeof(*counts));
	int fake_stream, n = 0;

	pm_stream_opts_init(&o);
	o.slots = 3;
	o.batch_bytes = 256 << 10;
	o.handoff = mode;
	o.numa = mode == PM_HANDOFF_HOST ? PM_NUMA_NODE(0) : PM_NUMA_AUTO;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.gpu_numa_node, -1);	/* no GPU */
	assert_int_equal(st.numa_node, mode == PM_HANDOFF_HOST ? 0 : -1);
	while (!pm_stream_next(s, &b) && b) {
		assert_int_equal(pm_stream_batch_wait(s, b, &fake_stream), 0);
		if (mode == PM_HANDOFF_HOST || be == PM_BACKEND_NONE)
			assert_null(b->dev);
		else
			assert_non_null(b->dev);
		check_batch(m, b);
		for (uint32_t i = 0; i < b->nitems; i++)
			counts[b->items[i].index]++;
		/* alternate the two releases: both give the slot back */
		if (n++ % 2)
			assert_int_equal(pm_stream_release_on(s, b, &fake_stream), 0);
		else
			assert_int_equal(pm_stream_release(s, b), 0);
		assert_int_equal(pm_stream_release_on(s, b, &fake_stream), -EINVAL);
		assert_int_equal(pm_stream_batch_wait(s, b, &fake_stream), -EINVAL);
		last = b;
	}
	assert_non_null(last);
	assert_true(n > 10);
	for (size_t i = 0; i < 200; i++)
		assert_int_equal(counts[i], 1);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.bytes, pm_manifest_bytes(m));
	/* copy latencies are measured whether or not the consumer waited for them */
	if (be != PM_BACKEND_NONE && mode != PM_HANDOFF_HOST)
		assert_true(st.copy_lat.max > 0);
	assert_int_equal(pm_stream_release_on(s, NULL, NULL), -EINVAL);
	free(counts);
	finish(ctx, m, s);
}

static void test_handoff_modes(void **state)
{
	handoff_stream(PM_BACKEND_HOST, PM_HANDOFF_COPIED);
	handoff_stream(PM_BACKEND_HOST, PM_HANDOFF_QUEUED);
	handoff_stream(PM_BACKEND_HOST, PM_HANDOFF_HOST);
	handoff_stream(PM_BACKEND_NONE, PM_HANDOFF_QUEUED);
}

/* VmRSS of this process, KiB. */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* Whether p lies in a mapping of this process. */
static bool mapped(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long a, b, x = (unsigned long)p;
	char line[512];
	bool in = false;

	while (f && !in && fgets(line, sizeof(line), f))
		in = sscanf(line, "%lx-%lx", &a, &b) == 2 && x >= a && x < b;
	if (f)
		fclose(f);
	return in;
}

/*
 * A DataLoader forks its workers after the stream exists.  The child gets no
 * slot mappings (MADV_DONTFORK: its RSS is lower than the parent's by the
 * slots, nothing copied), the stream and context fail there with -ECHILD and
 * a sentence, destroying them there touches nothing of the parent's, and
 * memory the caller pinned in place (a shared ring the workers write) stays
 * shared.  The parent streams on unharmed.
 */
static void test_fork_after_create(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(150, 7, 60000);
	const size_t slot = 4 << 20, slots = 6, ring_len = 1 << 20;
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_buf *ring_buf;
	unsigned char *ring;
	long parent_rss;
	int status, n = 1;
	pid_t pid;

	pm_stream_opts_init(&o);
	o.slots = slots;
	o.batch_bytes = slot;
	o.batch_items = 10;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	assert_non_null(b);
	check_batch(m, b);
	ring = mmap(NULL, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(ring != MAP_FAILED);
	assert_int_equal(pm_buf_pin_inplace(ctx, ring, ring_len, NULL, &ring_buf), 0);
	parent_rss = rss_kib();
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct pm_batch *b2;
		struct pm_buf *nb;
		int code = 0;

		if (parent_rss - rss_kib() < (long)(slot * slots / 1024) * 9 / 10)
			code |= 1;	/* the slots came along */
		if (mapped(b->host))
			code |= 2;
		if (pm_stream_next(s, &b2) != -ECHILD ||
		    !strstr(pm_stream_error(s), "forked from it"))
			code |= 4;
		if (pm_stream_release(s, b) != -ECHILD ||
		    pm_stream_release_on(s, b, NULL) != -ECHILD)
			code |= 8;
		if (pm_buf_alloc(ctx, 4096, NULL, &nb) != -ECHILD ||
		    !strstr(pm_ctx_last_error(ctx), "open a new context in this process"))
			code |= 16;
		if (!mapped(ring))
			code |= 32;
		{
			struct pm_stream_stats sst;

			/* s->lock may have been held by the parent's reader at fork */
			if (pm_stream_stats(s, &sst) != -ECHILD)
				code |= 64;
		}
		ring[0] = 0x5a;		/* a worker writing its batch */
		pm_stream_destroy(s);
		pm_close(ctx);
		_exit(code);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("forked child: check bits %#x failed (1 RSS, 2 slot mapped, 4 next, 8 release, 16 alloc, 32 ring, 64 stats)",
			 WEXITSTATUS(status));
	assert_int_equal(ring[0], 0x5a);
	/* the parent goes on as if nothing happened */
	check_batch(m, b);
	assert_int_equal(pm_stream_release(s, b), 0);
	n += consume(s, m, NULL, NULL, NULL);
	assert_true(n > 3);
	assert_int_equal(pm_buf_free(ctx, ring_buf), 0);
	munmap(ring, ring_len);
	finish(ctx, m, s);
}

static void test_stats_stalls(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(60, 4, 20000);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;

	/* a slow consumer: the reader waits for slots */
	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_items = 5;
	s = stream_ok(ctx, m, &o);
	while (!pm_stream_next(s, &b) && b) {
		usleep(20000);
		pm_stream_release(s, b);
	}
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.batches, 12);
	assert_true(st.reader_wait_s > 0.1);
	assert_true(st.consumer_wait_s < st.reader_wait_s);
	assert_true(st.gbps > 0);
	assert_int_equal(st.slots, 2);
	assert_int_equal(st.total_items, 60);
	assert_int_equal(st.total_bytes, pm_manifest_bytes(m));
	finish(ctx, m, s);
}

static void test_crc(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	uint32_t good = pm_crc32c(0, tf[1].data + 100, 5000);

	assert_int_equal(pm_manifest_add(m, tf[1].path, 100, 5000, true, good, NULL, 0), 0);
	assert_int_equal(pm_manifest_add(m, tf[1].path, 200, 5000, true, good, NULL, 0), 0);
	pm_stream_opts_init(&o);
	o.batch_items = 1;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	check_batch(m, b);
	pm_stream_release(s, b);
	assert_int_equal(pm_stream_next(s, &b), -EBADMSG);
	assert_null(b);
	assert_non_null(strstr(pm_stream_error(s), "item 1 ("));
	assert_non_null(strstr(pm_stream_error(s), "f1.bin offset 200 length 5000): crc32c"));
	assert_non_null(strstr(pm_stream_error(s), "the manifest says"));
	pm_stream_destroy(s);
	o.no_crc = true;
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, NULL, NULL);
	finish(ctx, m, s);
}

/* --- bad input --- */

static void test_missing_file(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	char missing[PATH_MAX + 16], notdir[PATH_MAX + 16];
	int fds = count_fds(), good = 0;
	uint64_t mapped = vm_size();

	snprintf(missing, sizeof(missing), "%s/missing.bin", dir);
	snprintf(notdir, sizeof(notdir), "%s/x", tf[0].path);
	add(m, 0, 0, 1000);
	assert_int_equal(pm_manifest_add(m, missing, 0, 10, false, 0, NULL, 0), 0);
	add(m, 1, 0, 1000);
	pm_stream_opts_init(&o);
	o.batch_items = 1;
	/* stop: the stream is not created; the sentence names the file */
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -ENOENT);
	assert_null(s);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "missing.bin: No such file or directory"));
	assert_int_equal(count_fds(), fds);
	assert_no_mapping_leak(mapped);
	/* skip: the other items still arrive; the bad one is counted and named */
	o.on_error = PM_ON_ERROR_SKIP;
	s = stream_ok(ctx, m, &o);
	while (!pm_stream_next(s, &b) && b) {
		check_batch(m, b);
		assert_int_not_equal(b->items[0].index, 1);
		pm_stream_release(s, b);
		good++;
	}
	assert_int_equal(good, 2);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.failed_batches, 1);
	assert_int_equal(st.failed_items, 1);
	assert_non_null(strstr(pm_stream_error(s), "missing.bin offset 0 length 10): cannot open the file"));
	pm_stream_destroy(s);
	pm_manifest_destroy(m);

	/* a directory, and a path through a file */
	m = new_manifest();
	assert_int_equal(pm_manifest_add(m, dir, 0, 10, false, 0, NULL, 0), 0);
	o.on_error = PM_ON_ERROR_STOP;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EISDIR);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "is a directory"));
	pm_manifest_destroy(m);
	m = new_manifest();
	assert_int_equal(pm_manifest_add(m, notdir, 0, 10, false, 0, NULL, 0), 0);
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -ENOTDIR);
	pm_manifest_destroy(m);
	assert_int_equal(count_fds(), fds);
	close_ctx(ctx);
}

static void test_past_eof(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	int err;

	add(m, 2, 0, 100);
	add(m, 2, 4000, 1001);		/* one byte past the end of the 5000-byte file */
	add(m, 2, 0, 200);
	pm_stream_opts_init(&o);
	o.batch_items = 1;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	check_batch(m, b);
	pm_stream_release(s, b);
	err = pm_stream_next(s, &b);
	assert_int_equal(err, -ENODATA);
	assert_null(b);
	assert_non_null(strstr(pm_stream_error(s), "f2.bin offset 4000 length 1001): past the end of the file (5000 bytes)"));
	/* stop means stop: the same error again, never the third batch */
	assert_int_equal(pm_stream_next(s, &b), -ENODATA);
	assert_null(b);
	finish(ctx, m, s);
}

static void test_zero_and_too_big(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	char err[128];

	assert_int_equal(pm_manifest_add(m, tf[0].path, 0, 0, false, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "zero-length item"));
	assert_int_equal(pm_stream_create(ctx, m, NULL, &s), -EINVAL);	/* no items */
	assert_non_null(strstr(pm_ctx_last_error(ctx), "no items"));

	add(m, 0, 0, 1000);
	add(m, 0, 0, 100000);		/* larger than the 64 KiB slot */
	add(m, 0, 1000, 1000);
	pm_stream_opts_init(&o);
	o.batch_bytes = 65536;
	/* found at create, whatever the policy, not when its batch comes up */
	for (int skip = 0; skip < 2; skip++) {
		o.on_error = skip ? PM_ON_ERROR_SKIP : PM_ON_ERROR_STOP;
		s = (void *)1;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EFBIG);
		assert_null(s);
		assert_non_null(strstr(pm_ctx_last_error(ctx), "item 1 ("));
		assert_non_null(strstr(pm_ctx_last_error(ctx), "length 100000) needs"));
		assert_non_null(strstr(pm_ctx_last_error(ctx), "more than a slot (65536 bytes"));
		assert_non_null(strstr(pm_ctx_last_error(ctx), "raise batch_bytes: pinstream --batch-bytes, pinmem.Stream(batch_bytes=...)"));
	}
	o.batch_bytes = 0;	/* the default slot holds it */
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, NULL, NULL);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, 3);
	assert_int_equal(st.failed_items, 0);
	(void)b;
	finish(ctx, m, s);
}

/*
 * The size check is exact: an item fits a slot when it fits first in a
 * batch (at offset 0), O_DIRECT padding included, and the refusal names the
 * first item in manifest order that does not fit.  A slot-sized item at
 * offset 0, and with O_DIRECT one whose head and tail padding make exactly a
 * slot, are delivered whole; one padding pushes past the slot is refused
 * with O_DIRECT and read buffered.
 */
static void test_exact_fit(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream_file f;
	struct pm_stream *s;

	add(m, 0, 0, 1000);
	add(m, 0, 0, 65536);		/* exactly a slot */
	add(m, 0, 4096 + 100, 65536 - 100);	/* exactly a slot from its aligned start */
	add(m, 1, 100, 65500);		/* with O_DIRECT: past a slot by its tail */
	add(m, 2, 0, 5000);
	pm_stream_opts_init(&o);
	o.batch_bytes = 65536;
	o.direct = PM_DIRECT_OFF;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(consume(s, m, NULL, NULL, NULL), 5);	/* the big ones a batch each */
	assert_int_equal(pm_stream_stats(s, &st), 0);
	assert_int_equal(st.items, 5);
	pm_stream_destroy(s);
	if (fs_direct()) {
		o.direct = PM_DIRECT_ON;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EFBIG);
		assert_non_null(strstr(pm_ctx_last_error(ctx), "item 3 ("));
		assert_non_null(strstr(pm_ctx_last_error(ctx), "offset 100 length 65500) needs"));
		o.batch_bytes = 65536 + 4096;	/* item 3 fits now: every alignment up to 4096 */
		s = stream_ok(ctx, m, &o);
		assert_int_equal(pm_stream_file(s, 0, &f), 0);
		assert_true(f.direct);
		consume(s, m, NULL, NULL, NULL);
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.items, 5);
		pm_stream_destroy(s);
		/* world_size > 1 packs with 4096 whatever the file's: the same rule */
		o.batch_bytes = 65536;
		o.world_size = 2;
		o.direct = PM_DIRECT_AUTO;
		assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EFBIG);
		assert_non_null(strstr(pm_ctx_last_error(ctx), "item 3 ("));
	}
	finish(ctx, m, NULL);
}

/*
 * Samples stay whole: 40 samples of 1 to 3 items (fields "a.bin", "b.txt",
 * "c"), shuffled over 2 epochs and 3 ranks with batch_items 4: every batch
 * holds at most 4 whole samples, each sample's items consecutive and in
 * order, every sample arrives once per epoch on one rank, and
 * pm_stream_batch_field finds each sample's field.  A sample too large for
 * a slot is refused whole, named by its first item.
 */
static void test_samples_stay_whole(void **state)
{
	static const char *const fields[] = { "a.bin", "b.txt", "c" };
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	const struct pm_batch_item *out[8];
	uint32_t seen[2][40] = { { 0 } };
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	char err[256];

	for (int q = 0; q < 40; q++) {
		size_t first = pm_manifest_count(m);

		for (int j = 0; j <= q % 3; j++)
			add(m, 0, (uint64_t)q * 1000 + (uint64_t)j * 100, 50 + (uint64_t)j);
		assert_int_equal(pm_manifest_group(m, first, fields, err, sizeof(err)), 0);
	}
	assert_string_equal(pm_manifest_field(m, 1), "a.bin");
	assert_string_equal(pm_manifest_field(m, 2), "b.txt");
	assert_null(pm_manifest_field(m, 80));
	pm_stream_opts_init(&o);
	o.world_size = 3;
	o.shuffle = true;
	o.seed = 11;
	o.epochs = 2;
	o.batch_items = 4;
	for (uint32_t r = 0; r < 3; r++) {
		o.rank = r;
		s = stream_ok(ctx, m, &o);
		while (!pm_stream_next(s, &b) && b) {
			uint32_t samples = 0, with_b = 0;

			check_batch(m, b);
			for (uint32_t i = 0; i < b->nitems; samples++) {
				int64_t q = pm_manifest_sample(m, b->items[i].index);
				uint32_t n = 1 + (uint32_t)q % 3;

				/* its items, first to last, in the batch's order */
				for (uint32_t j = 0; j < n; j++) {
					assert_true(i + j < b->nitems);
					assert_int_equal(pm_manifest_sample(m, b->items[i + j].index), q);
					assert_string_equal(pm_manifest_field(m, b->items[i + j].index),
							    fields[j]);
				}
				with_b += n > 1;
				seen[b->epoch][q]++;
				i += n;
			}
			assert_true(samples <= 4);
			assert_int_equal(pm_stream_batch_field(s, b, "b.txt", out, 8), (int)with_b);
			for (uint32_t k = 0; k < with_b; k++)
				assert_string_equal(pm_manifest_field(m, out[k]->index), "b.txt");
			assert_int_equal(pm_stream_batch_field(s, b, "nope", out, 8), 0);
			assert_int_equal(pm_stream_release(s, b), 0);
		}
		pm_stream_destroy(s);
	}
	for (int e = 0; e < 2; e++)
		for (int q = 0; q < 40; q++)
			assert_int_equal(seen[e][q], 1);
	/* the 3-item samples need 50 + 51 + 52 bytes, placed at 0, 64 and 128 */
	o.world_size = 1;
	o.rank = 0;
	o.batch_items = 0;
	o.batch_bytes = 179;
	o.direct = PM_DIRECT_OFF;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EFBIG);
	assert_non_null(strstr(pm_ctx_last_error(ctx),
			       "item 3 (" ));
	assert_non_null(strstr(pm_ctx_last_error(ctx),
			       "offset 2000 length 50), the first of a sample of 3 items, needs 180 bytes"));
	o.batch_bytes = 180;
	s = stream_ok(ctx, m, &o);
	consume(s, m, NULL, NULL, NULL);
	finish(ctx, m, s);
}

/* Grouping refuses what would split a sample or name a field twice, changing nothing. */
static void test_group_bad_input(void **state)
{
	static const char *const twice[] = { "x", "y", "x" };
	struct pm_manifest *m = new_manifest();
	char err[256];

	for (int i = 0; i < 4; i++)
		add(m, 0, (uint64_t)i * 10, 10);
	assert_int_equal(pm_manifest_group(m, 4, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "group from item 4: the manifest has 4 items"));
	assert_int_equal(pm_manifest_group(m, 1, twice, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "field 'x' twice (items 1 and 3)"));
	assert_int_equal(pm_manifest_sample(m, 3), 3);	/* unchanged */
	assert_string_equal(pm_manifest_field(m, 1), "");
	assert_int_equal(pm_manifest_group(m, 2, NULL, err, sizeof(err)), 0);
	assert_int_equal(pm_manifest_sample(m, 3), 2);
	assert_int_equal(pm_manifest_group(m, 3, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "it is in the sample of item 2, which would be split"));
	add(m, 0, 100, 10);
	assert_int_equal(pm_manifest_sample(m, 4), 3);
	pm_manifest_destroy(m);
}

/* A run's batches: seq, epoch and items of each, read from start_batch on. */
struct run {
	uint64_t seq[512], first[513], items[8192];
	uint32_t epoch[512];
	size_t n;
	uint64_t read_bytes, bytes;
};

static void record(struct pm_ctx *ctx, struct pm_manifest *m, const struct pm_stream_opts *o,
		   struct run *r)
{
	struct pm_stream_stats st;
	struct pm_stream *s = stream_ok(ctx, m, o);
	struct pm_batch *b;
	int ret;

	r->n = 0;
	r->first[0] = 0;
	while (!(ret = pm_stream_next(s, &b)) && b) {
		check_batch(m, b);
		assert_true(r->n < 512 && r->first[r->n] + b->nitems <= 8192);
		r->seq[r->n] = b->seq;
		r->epoch[r->n] = b->epoch;
		for (uint32_t i = 0; i < b->nitems; i++)
			r->items[r->first[r->n] + i] = b->items[i].index;
		r->first[r->n + 1] = r->first[r->n] + b->nitems;
		r->n++;
		assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(pm_stream_stats(s, &st), 0);
	r->read_bytes = st.read_bytes;
	r->bytes = st.bytes;
	pm_stream_destroy(s);
}

/*
 * Resume in O(1): start_batch k gives exactly the batches a whole run gives
 * from batch k on (seq, epoch, items), shuffled over epochs on one of 3
 * ranks, found from the plan: at 90% of the stream it reads at most 11% of
 * the bytes.  The end itself is an empty stream; past it is refused.
 */
static void test_start_batch(void **state)
{
	static struct run full, part;
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(600, 21, 30000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	uint64_t ks[5];

	pm_stream_opts_init(&o);
	o.shuffle = true;
	o.seed = 4;
	o.epochs = 3;
	o.batch_items = 5;
	o.world_size = 3;
	o.rank = 1;
	record(ctx, m, &o, &full);
	assert_true(full.n >= 100);
	ks[0] = 1;
	ks[1] = full.n / 2;
	ks[2] = full.n * 9 / 10;
	ks[3] = full.n - 1;
	ks[4] = full.n;
	for (int c = 0; c < 5; c++) {
		o.start_batch = ks[c];
		record(ctx, m, &o, &part);
		assert_int_equal(part.n, full.n - ks[c]);
		for (size_t i = 0; i < part.n; i++) {
			size_t j = ks[c] + i, n = part.first[i + 1] - part.first[i];

			assert_int_equal(part.seq[i], full.seq[j]);
			assert_int_equal(part.epoch[i], full.epoch[j]);
			assert_int_equal(n, full.first[j + 1] - full.first[j]);
			assert_memory_equal(&part.items[part.first[i]], &full.items[full.first[j]],
					    n * sizeof(uint64_t));
		}
		if (c == 2)	/* nothing before batch k is read */
			assert_true(part.read_bytes * 100 <= full.read_bytes * 11);
	}
	o.start_batch = full.n + 1;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "past the end: the stream has"));
	finish(ctx, m, NULL);
}

static void test_bad_opts(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(5, 1, 100);
	struct pm_stream_opts o;
	struct pm_stream *s = (void *)1;
	int fds = count_fds();

	pm_stream_opts_init(&o);
	o.rank = 2;
	o.world_size = 2;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_null(s);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "rank 2 is not below the world size 2"));
	pm_stream_opts_init(&o);
	o.chunk_bytes = 5000;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "chunk size 5000"));
	pm_stream_opts_init(&o);
	o.batch_bytes = 2ULL << 30;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "a slot is at most 1 GiB"));
	pm_stream_opts_init(&o);
	o.batch_bytes = UINT64_MAX;	/* rounding up to the alignment must not wrap */
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "a slot is at most 1 GiB"));
	pm_stream_opts_init(&o);
	o.world_size = 8;
	o.rank = 6;		/* 5 items, 8 ranks, tail dropped: nothing for anyone */
	o.shard_pad = PM_SHARD_DROP;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "5 items for 8 ranks: PM_SHARD_DROP"));
	pm_stream_opts_init(&o);
	o.order = (enum pm_order)9;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	pm_stream_opts_init(&o);
	o.qd = 100000;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	pm_stream_opts_init(&o);
	o.handoff = (enum pm_handoff)3;
	assert_int_equal(pm_stream_create(ctx, m, &o, &s), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "handoff"));
	assert_int_equal(count_fds(), fds);
	finish(ctx, m, NULL);
}

/* A file that shrinks under the stream: the batch fails, never stale bytes. */
static void shrink(enum pm_direct direct)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	char path[PATH_MAX + 16];
	unsigned char *data = malloc(1 << 20);
	int ret, delivered = 0;

	snprintf(path, sizeof(path), "%s/shrink.bin", dir);
	test_fill(data, 1 << 20, 99);
	write_file(path, data, 1 << 20);
	for (int i = 0; i < 16; i++)
		assert_int_equal(pm_manifest_add(m, path, i * 65536, 65536, false, 0, NULL, 0), 0);
	pm_stream_opts_init(&o);
	o.direct = direct;
	o.slots = 1;		/* the reader cannot run ahead of the consumer */
	o.batch_items = 4;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	assert_memory_equal(b->host, data, 4 * 65536);
	assert_int_equal(truncate(path, 7 * 65536 + 100), 0);	/* item 7 loses its tail */
	pm_stream_release(s, b);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		/* whatever arrives is the file's bytes */
		for (uint32_t i = 0; i < b->nitems; i++)
			assert_memory_equal((char *)b->host + b->items[i].slot_offset,
					    data + b->items[i].file_offset, 65536);
		delivered++;
		pm_stream_release(s, b);
	}
	assert_int_equal(ret, -ENODATA);
	assert_int_equal(delivered, 0);	/* batch 1 holds items 4..7 */
	assert_non_null(strstr(pm_stream_error(s), "item 7 ("));
	assert_non_null(strstr(pm_stream_error(s), "shrink.bin offset 458752 length 65536): end of file"));
	pm_stream_destroy(s);
	unlink(path);
	free(data);
	finish(ctx, m, NULL);
}

static void test_file_shrinks(void **state)
{
	shrink(PM_DIRECT_OFF);
	shrink(PM_DIRECT_AUTO);
}

static void test_eio(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = new_manifest();
	struct pm_stream *s;
	struct pm_batch *b;

	/* reading /proc/self/mem where nothing is mapped is EIO */
	assert_int_equal(pm_manifest_add(m, "/proc/self/mem", 0, 4096, false, 0, NULL, 0), 0);
	assert_int_equal(pm_stream_create(ctx, m, NULL, &s), 0);
	assert_int_equal(pm_stream_next(s, &b), -EIO);
	assert_null(b);
	assert_non_null(strstr(pm_stream_error(s),
			       "item 0 (/proc/self/mem offset 0 length 4096): read of 4096 bytes at offset 0 failed (Input/output error)"));
	finish(ctx, m, s);
}

/* --- tear-down at any point --- */

static void test_destroy_anytime(void **state)
{
	struct pm_ctx *ctx = open_ctx(PM_BACKEND_HOST);
	struct pm_manifest *m = random_items(300, 6, 100000);
	int fds = count_fds(), maps = 0;
	uint64_t mapped __attribute__((unused)) = 0;

	/* round -1 warms up what outlives a stream by design (cached thread stacks) */
	for (int when = -1; when < 4; when++) {
		struct pm_stream_opts o;
		struct pm_stream *s;
		struct pm_batch *b;

		pm_stream_opts_init(&o);
		o.batch_bytes = 256 << 10;
		o.qd = 16;
		s = stream_ok(ctx, m, &o);
		if (when >= 1)		/* hold one batch */
			assert_int_equal(pm_stream_next(s, &b), 0);
		if (when >= 2)		/* reads in flight behind it */
			assert_int_equal(pm_stream_next(s, &b), 0);
		if (when == 3)
			usleep(2000);
		pm_stream_destroy(s);	/* ASan (unit-check-asan) proves no leak */
		if (when == -1) {
			mapped = vm_size();
			maps = count_maps();
		}
	}
	assert_int_equal(count_fds(), fds);
	assert_int_equal(count_maps(), maps);	/* rings, files; and buffers outside ASan */
#ifndef __SANITIZE_ADDRESS__
	/* ASan keeps freed memory mapped in its quarantine; LSan covers it there */
	assert_no_mapping_leak(mapped);
#endif
	finish(ctx, m, NULL);
}

/* A consumer killed while streaming leaves nothing behind in its parent. */
static void test_consumer_killed(void **state)
{
	int pfd[2], status;
	char c;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct pm_open_opts oo = { .backend = PM_BACKEND_HOST };
		struct pm_stream_opts o = { .epochs = 1000000 };
		struct pm_manifest *m;
		struct pm_stream *s;
		struct pm_ctx *ctx;
		struct pm_batch *b;
		char err[64];

		close(pfd[0]);
		if (pm_open(&ctx, &oo) || pm_manifest_create(&m) ||
		    pm_manifest_add_file(m, tf[0].path, 4096, err, sizeof(err)) ||
		    pm_stream_create(ctx, m, &o, &s) || pm_stream_next(s, &b) || !b)
			_exit(1);
		if (write(pfd[1], "x", 1) != 1)
			_exit(1);
		for (;;)	/* keep streaming, epoch after epoch */
			if (!pm_stream_release(s, b) && (pm_stream_next(s, &b) || !b))
				_exit(1);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &c, 1), 1);
	usleep(10000);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(pfd[0]);
	/* its files are intact; in the VM the harness checks every pin was released */
	for (int i = 0; i < NFILES; i++) {
		struct stat st;

		assert_int_equal(stat(tf[i].path, &st), 0);
		assert_int_equal(st.st_size, tf[i].size);
	}
}

/* --- the cuda backend path, on the test-only CUDA runtime stand-in --- */

#if defined(PM_HAVE_CUDA) && !defined(PM_TEST_MODULE)
/* pm_stream_next on its own thread, so a test can see it still blocked. */
struct next_call {
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;
	bool returned;
};

static void *next_on_thread(void *arg)
{
	struct next_call *nc = arg;

	nc->ret = pm_stream_next(nc->s, &nc->b);
	__atomic_store_n(&nc->returned, true, __ATOMIC_RELEASE);
	return NULL;
}

static void test_cuda_stub(void **state)
{
	const char *stub = getenv("PM_TEST_CUDA_STUB");
	cudastub_reset_fn *reset;
	cudastub_hold_fn *hold;
	cudastub_complete_fn *complete;
	cudastub_count_fn *count;
	struct pm_open_opts oo = { .backend = PM_BACKEND_CUDA };
	struct pm_manifest *m = random_items(40, 13, 80000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	unsigned char *back;
	void *h;
	int n = 0;

	assert_non_null(stub);	/* make unit-check sets it */
	h = dlopen(stub, RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(h);
	reset = (cudastub_reset_fn *)dlsym(h, "cudastub_reset");
	hold = (cudastub_hold_fn *)dlsym(h, "cudastub_hold");
	complete = (cudastub_complete_fn *)dlsym(h, "cudastub_complete");
	count = (cudastub_count_fn *)dlsym(h, "cudastub_count");
	assert_true(reset && hold && complete && count);
	reset(1, 0);
	oo.cuda_library = stub;
	assert_int_equal(pm_open(&ctx, &oo), 0);

	pm_stream_opts_init(&o);
	o.slots = 3;
	o.batch_bytes = 256 << 10;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(count("registrations"), 1);	/* the slot buffer */
	assert_int_equal(count("allocs"), 3);		/* a device buffer per slot */
	back = malloc(256 << 10);
	while (!pm_stream_next(s, &b) && b) {
		/* the bytes on the "device", read back through the backend */
		assert_int_equal(pm_copy_d2h(ctx, back, b->dev, b->span), 0);
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct tfile *t = file_of(m, b->items[i].path_id);

			assert_memory_equal(back + b->items[i].slot_offset,
					    t->data + b->items[i].file_offset, b->items[i].length);
		}
		check_batch(m, b);
		pm_stream_release(s, b);
		n++;
	}
	assert_true(n > 3);
	pm_stream_destroy(s);
	assert_int_equal(count("allocs"), 0);

	/* copies held pending: no batch is handed out before its copy completed */
	hold(2);
	s = stream_ok(ctx, m, &o);
	{
		struct next_call nc = { .s = s };
		struct pm_stream_stats st;
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, next_on_thread, &nc), 0);
		usleep(200000);
		assert_false(__atomic_load_n(&nc.returned, __ATOMIC_ACQUIRE));
		/* one consumer thread: a second caller is refused, not queued */
		assert_int_equal(pm_stream_next(s, &b), -EBUSY);
		assert_null(b);
		assert_non_null(strstr(pm_stream_error(s), "one consumer thread"));
		assert_int_equal(pm_stream_stats(s, &st), 0);
		assert_int_equal(st.batches, 0);
		assert_int_equal(st.copy_lat.max, 0);
		hold(0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(nc.ret, 0);
		b = nc.b;
	}
	assert_non_null(b);
	check_batch(m, b);
	pm_stream_destroy(s);
	pm_close(ctx);
	assert_int_equal(count("registrations"), 0);
	assert_int_equal(count("allocs"), 0);
	assert_int_equal(count("events"), 0);
	free(back);
	pm_manifest_destroy(m);
	dlclose(h);
}

/* The stand-in's control calls and the runtime calls a consumer makes. */
struct stub {
	void *h;
	cudastub_reset_fn *reset;
	cudastub_count_fn *count;
	cudastub_kernel_read_fn *kernel_read;
	__typeof__(cudaGetDevice) *get_device;
	__typeof__(cudaSetDevice) *set_device;
	__typeof__(cudaStreamCreateWithFlags) *stream_create;
	__typeof__(cudaStreamSynchronize) *stream_sync;
	__typeof__(cudaStreamDestroy) *stream_destroy;
};

static void stub_open(struct stub *st, int devices)
{
	const char *path = getenv("PM_TEST_CUDA_STUB");

	assert_non_null(path);	/* make unit-check sets it */
	st->h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(st->h);
	*(void **)&st->reset = dlsym(st->h, "cudastub_reset");
	*(void **)&st->count = dlsym(st->h, "cudastub_count");
	*(void **)&st->kernel_read = dlsym(st->h, "cudastub_kernel_read");
	*(void **)&st->get_device = dlsym(st->h, "cudaGetDevice");
	*(void **)&st->set_device = dlsym(st->h, "cudaSetDevice");
	*(void **)&st->stream_create = dlsym(st->h, "cudaStreamCreateWithFlags");
	*(void **)&st->stream_sync = dlsym(st->h, "cudaStreamSynchronize");
	*(void **)&st->stream_destroy = dlsym(st->h, "cudaStreamDestroy");
	assert_true(st->reset && st->count && st->kernel_read && st->get_device &&
		    st->set_device && st->stream_create && st->stream_sync &&
		    st->stream_destroy);
	st->reset(devices, 0);
}

static struct pm_ctx *stub_ctx(int device)
{
	struct pm_open_opts oo = { .backend = PM_BACKEND_CUDA, .cuda_device = device,
				   .cuda_library = getenv("PM_TEST_CUDA_STUB") };
	struct pm_ctx *ctx;
	char err[256] = "";

	oo.errbuf = err;
	oo.errbuf_len = sizeof(err);
	if (pm_open(&ctx, &oo))
		fail_msg("pm_open: %s", err);
	return ctx;
}

/*
 * Rank 1 of a node: the program made device 1 current (as torch.cuda.set_device
 * does) and streams with cuda_device = 1.  Every batch's device bytes equal
 * the file's, device 0 never gets a context, and the program's current
 * device is 1 after every call.
 */
static void test_cuda_device1(void **state)
{
	struct pm_manifest *m = random_items(60, 17, 80000);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	struct stub st;
	unsigned char *back = malloc(256 << 10);
	int n = 0, dev = -1;

	stub_open(&st, 2);
	assert_int_equal(st.set_device(1), cudaSuccess);
	ctx = stub_ctx(1);
	pm_stream_opts_init(&o);
	o.slots = 3;
	o.batch_bytes = 256 << 10;
	s = stream_ok(ctx, m, &o);
	for (;;) {
		assert_int_equal(pm_stream_next(s, &b), 0);
		assert_int_equal(st.get_device(&dev), cudaSuccess);
		assert_int_equal(dev, 1);
		if (!b)
			break;
		assert_int_equal(pm_copy_d2h(ctx, back, b->dev, b->span), 0);
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct tfile *t = file_of(m, b->items[i].path_id);

			assert_memory_equal(back + b->items[i].slot_offset,
					    t->data + b->items[i].file_offset, b->items[i].length);
		}
		assert_int_equal(pm_stream_release(s, b), 0);
		n++;
	}
	assert_true(n > 5);
	pm_stream_destroy(s);
	pm_close(ctx);
	assert_int_equal(st.get_device(&dev), cudaSuccess);
	assert_int_equal(dev, 1);
	assert_int_equal(st.count("context0"), 0);
	assert_int_equal(st.count("calls_on0"), 0);
	assert_int_equal(st.count("events"), 0);
	free(back);
	pm_manifest_destroy(m);
	st.reset(1, 0);
	dlclose(st.h);
}

/*
 * The consumer of a training loop: its "kernel" reads each batch on its own
 * stream some time later (the stand-in's kernel_read), and the loop moves
 * on at once.  Returns how many batches the kernel saw with bytes other than
 * the file's, i.e. overwritten by a later batch before it read them.
 */
static int consumer_race(struct stub *st, enum pm_handoff mode, bool release_on,
			 bool read_host)
{
	struct pm_manifest *m = random_items(120, 23, 40000);
	struct pm_ctx *ctx = stub_ctx(1);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	cudaStream_t cs;
	struct seen {
		unsigned char *bytes;
		uint32_t nitems;
		struct pm_batch_item *items;
	} *seen = calloc(200, sizeof(*seen));
	int n = 0, bad = 0;

	assert_int_equal(st->stream_create(&cs, cudaStreamNonBlocking), cudaSuccess);
	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_bytes = 128 << 10;
	o.handoff = mode;
	s = stream_ok(ctx, m, &o);
	while (!pm_stream_next(s, &b) && b) {
		struct seen *v = &seen[n++];

		assert_true(n < 200);
		v->bytes = malloc(b->span);
		v->nitems = b->nitems;
		v->items = malloc(b->nitems * sizeof(*v->items));
		memcpy(v->items, b->items, b->nitems * sizeof(*v->items));
		assert_int_equal(pm_stream_batch_wait(s, b, cs), 0);
		assert_int_equal(st->kernel_read(cs, v->bytes,
						 read_host ? b->host : b->dev,
						 b->span, 3000), cudaSuccess);
		if (release_on)
			assert_int_equal(pm_stream_release_on(s, b, cs), 0);
		else
			assert_int_equal(pm_stream_release(s, b), 0);
	}
	assert_int_equal(st->stream_sync(cs), cudaSuccess);
	assert_true(n > 10);
	if (mode != PM_HANDOFF_HOST) {
		struct pm_stream_stats sst;

		/* measured in QUEUED too, where batches are handed over mid-copy */
		assert_int_equal(pm_stream_stats(s, &sst), 0);
		assert_true(sst.copy_lat.max > 0);
	}
	for (int k = 0; k < n; k++) {
		struct seen *v = &seen[k];
		bool ok = true;

		for (uint32_t i = 0; i < v->nitems; i++) {
			const struct tfile *t = file_of(m, v->items[i].path_id);

			ok = ok && !memcmp(v->bytes + v->items[i].slot_offset,
					   t->data + v->items[i].file_offset, v->items[i].length);
		}
		bad += !ok;
		free(v->bytes);
		free(v->items);
	}
	free(seen);
	pm_stream_destroy(s);
	assert_int_equal(st->stream_destroy(cs), cudaSuccess);
	pm_close(ctx);
	pm_manifest_destroy(m);
	return bad;
}

/*
 * PM_HANDOFF_QUEUED hands a batch over before its copy finished: a copy that
 * fails later (an asynchronous CUDA error, seen by cudaEventQuery) stops the
 * stream with that error instead of passing unnoticed.
 */
static void test_cuda_queued_copy_fails_late(void **state)
{
	struct pm_manifest *m = random_items(200, 29, 40000);
	cudastub_copy_delay_fn *copy_delay;
	cudastub_fail_fn *fail_call;
	struct pm_stream_stats sst;
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	struct stub st;
	int ret, n = 0;

	stub_open(&st, 1);
	*(void **)&fail_call = dlsym(st.h, "cudastub_fail");
	assert_non_null(fail_call);
	ctx = stub_ctx(0);
	pm_stream_opts_init(&o);
	o.slots = 2;
	o.batch_bytes = 64 << 10;
	o.handoff = PM_HANDOFF_QUEUED;
	/*
	 * Copy latencies in QUEUED mode: every batch is handed over while its
	 * (slow) copy still runs, so it is measured after the hand-over.
	 */
	*(void **)&copy_delay = dlsym(st.h, "cudastub_copy_delay");
	assert_non_null(copy_delay);
	copy_delay(3000);
	s = stream_ok(ctx, m, &o);
	n = 0;
	while (!(ret = pm_stream_next(s, &b)) && b) {
		assert_int_equal(pm_stream_release(s, b), 0);
		n++;
	}
	assert_int_equal(ret, 0);
	assert_true(n > 10);
	assert_int_equal(pm_stream_stats(s, &sst), 0);
	assert_true(sst.copy_lat.max >= 0.003);
	pm_stream_destroy(s);
	copy_delay(0);

	n = 0;
	s = stream_ok(ctx, m, &o);
	for (int k = 0; k < 8; k++)	/* from the 3rd query on, every one fails */
		fail_call("cudaEventQuery", 3 + k, cudaErrorIllegalAddress);
	while (!(ret = pm_stream_next(s, &b)) && b) {
		assert_int_equal(pm_stream_release(s, b), 0);
		n++;
	}
	assert_int_equal(ret, -EIO);
	assert_non_null(strstr(pm_stream_error(s), "failed after it was handed over"));
	assert_non_null(strstr(pm_stream_error(s), "cudaErrorIllegalAddress"));
	assert_int_equal(pm_stream_next(s, &b), -EIO);	/* sticky */
	print_message("copy failure reported after %d batches\n", n);
	pm_stream_destroy(s);
	pm_close(ctx);
	pm_manifest_destroy(m);
	st.reset(1, 0);
	dlclose(st.h);
}

/*
 * PM_HANDOFF_QUEUED: the last batches' copies fail after the reader lane
 * read everything and exited (nothing polls them any more): the stream
 * still ends with their error, not a clean end.
 */
static void test_cuda_queued_copy_fails_after_lanes(void **state)
{
	struct pm_manifest *m = new_manifest();
	cudastub_complete_fn *complete;
	cudastub_fail_fn *fail_call;
	cudastub_hold_fn *hold;
	struct pm_stream_opts o;
	struct pm_batch *b[2], *e;
	struct pm_stream *s;
	struct pm_ctx *ctx;
	struct stub st;

	stub_open(&st, 1);
	*(void **)&fail_call = dlsym(st.h, "cudastub_fail");
	*(void **)&hold = dlsym(st.h, "cudastub_hold");
	*(void **)&complete = dlsym(st.h, "cudastub_complete");
	assert_true(fail_call && hold && complete);
	ctx = stub_ctx(0);
	add(m, 0, 0, 1 << 16);
	add(m, 0, 1 << 16, 1 << 16);
	pm_stream_opts_init(&o);
	o.slots = 4;
	o.batch_items = 1;
	o.readers = 1;
	o.handoff = PM_HANDOFF_QUEUED;
	hold(1);	/* the copies stay queued */
	s = stream_ok(ctx, m, &o);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pm_stream_next(s, &b[i]), 0);
		assert_non_null(b[i]);
	}
	for (int i = 0; i < 2000 && reader_threads(); i++)
		usleep(1000);
	assert_int_equal(reader_threads(), 0);	/* the lane read everything and left */
	for (int k = 1; k <= 8; k++)
		fail_call("cudaEventQuery", k, cudaErrorIllegalAddress);
	complete();
	assert_int_equal(pm_stream_release(s, b[0]), 0);
	assert_int_equal(pm_stream_release(s, b[1]), 0);
	assert_int_equal(pm_stream_next(s, &e), -EIO);
	assert_null(e);
	assert_non_null(strstr(pm_stream_error(s), "failed after it was handed over"));
	assert_int_equal(pm_stream_next(s, &e), -EIO);	/* sticky */
	hold(0);
	pm_stream_destroy(s);
	pm_close(ctx);
	pm_manifest_destroy(m);
	st.reset(1, 0);
	dlclose(st.h);
}

/*
 * Release against the consumer's stream: zero overwritten reads in every
 * hand-off mode, whether the consumer's kernel reads the device buffer or
 * the host slot (e.g. labels copied from b->host on its stream).  A plain
 * release in the same loop lets the next copy (or the next read into the
 * host slot) overwrite batches the kernel has not read yet: the same check
 * finds them, so it can fail.  Rank 1 of a node: the program's device, the
 * context's and the consumer stream's are 1, and device 0 never sees a
 * context or a call, on any thread of the library.
 */
static void test_cuda_consumer_race(void **state)
{
	static const enum pm_handoff modes[] = {
		PM_HANDOFF_COPIED, PM_HANDOFF_QUEUED, PM_HANDOFF_HOST,
	};
	struct stub st;
	int bad;

	stub_open(&st, 2);
	assert_int_equal(st.set_device(1), cudaSuccess);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		bool host = modes[i] == PM_HANDOFF_HOST;

		bad = consumer_race(&st, modes[i], true, host);
		print_message("handoff %d, release_on: %d overwritten batches\n", modes[i], bad);
		assert_int_equal(bad, 0);
		bad = consumer_race(&st, modes[i], false, host);
		print_message("handoff %d, plain release: %d overwritten batches\n", modes[i], bad);
		assert_true(bad > 0);
		if (host)
			continue;
		bad = consumer_race(&st, modes[i], true, true);
		print_message("handoff %d, release_on, kernel reads the host slot: %d overwritten\n",
			      modes[i], bad);
		assert_int_equal(bad, 0);
	}
	assert_int_equal(st.count("context0"), 0);
	assert_int_equal(st.count("calls_on0"), 0);
	assert_int_equal(st.count("retained0"), 0);
	assert_int_equal(st.count("retained1"), 0);	/* pm_close released it */
	assert_int_equal(st.count("events"), 0);
	assert_int_equal(st.count("allocs"), 0);
	st.reset(1, 0);
	dlclose(st.h);
}

/*
 * A DataLoader worker forked while a cuda stream runs: every call in the
 * child fails with -ECHILD and makes no CUDA call at all (CUDA state does
 * not survive fork; a call there can hang on the parent's locks).
 */
static void test_cuda_fork_no_calls(void **state)
{
	struct pm_manifest *m = random_items(60, 37, 40000);
	cudastub_calls_by_fn *calls_by;
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	struct stub st;
	int status;
	pid_t pid;

	stub_open(&st, 1);
	*(void **)&calls_by = dlsym(st.h, "cudastub_calls_by");
	assert_non_null(calls_by);
	ctx = stub_ctx(0);
	pm_stream_opts_init(&o);
	o.slots = 3;
	o.batch_bytes = 64 << 10;
	o.handoff = PM_HANDOFF_QUEUED;
	s = stream_ok(ctx, m, &o);
	assert_int_equal(pm_stream_next(s, &b), 0);
	assert_non_null(b);
	assert_true(calls_by(getpid()) > 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct pm_stream_stats sst;
		struct pm_batch *b2;
		struct pm_buf *nb;
		void *dev;
		int bad = 0;

		bad |= pm_stream_next(s, &b2) != -ECHILD;
		bad |= pm_stream_batch_wait(s, b, NULL) != -ECHILD;
		bad |= pm_stream_release_on(s, b, NULL) != -ECHILD;
		bad |= pm_stream_release(s, b) != -ECHILD;
		bad |= pm_stream_stats(s, &sst) != -ECHILD;
		bad |= pm_buf_alloc(ctx, 4096, NULL, &nb) != -ECHILD;
		bad |= pm_dev_alloc(ctx, 4096, &dev) != -ECHILD;
		pm_stream_destroy(s);
		pm_close(ctx);
		_exit(bad ? 200 : calls_by(getpid()) > 199 ? 199 : calls_by(getpid()));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 200)
		fail_msg("forked child: a call did not fail with -ECHILD");
	assert_int_equal(WEXITSTATUS(status), 0);	/* CUDA calls made in the child */
	assert_int_equal(pm_stream_release(s, b), 0);
	pm_stream_destroy(s);
	pm_close(ctx);
	pm_manifest_destroy(m);
	st.reset(1, 0);
	dlclose(st.h);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_buffered),
		cmocka_unit_test(test_bytes_direct),
		cmocka_unit_test(test_large_items_chunks),
		cmocka_unit_test(test_batch_boundaries),
		cmocka_unit_test(test_epochs_shuffle),
		cmocka_unit_test(test_sharding_exactly_once),
		cmocka_unit_test(test_as_completed),
		cmocka_unit_test(test_readers),
		cmocka_unit_test(test_stop_as_completed),
		cmocka_unit_test(test_resume_batch),
		cmocka_unit_test(test_fifo_refused),
		cmocka_unit_test(test_held_batch_untouched),
		cmocka_unit_test(test_all_slots_held),
		cmocka_unit_test(test_stale_batch_refused),
		cmocka_unit_test(test_handoff_modes),
		cmocka_unit_test(test_fork_after_create),
		cmocka_unit_test(test_stats_stalls),
		cmocka_unit_test(test_crc),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_past_eof),
		cmocka_unit_test(test_zero_and_too_big),
		cmocka_unit_test(test_exact_fit),
		cmocka_unit_test(test_start_batch),
		cmocka_unit_test(test_samples_stay_whole),
		cmocka_unit_test(test_group_bad_input),
		cmocka_unit_test(test_bad_opts),
		cmocka_unit_test(test_file_shrinks),
		cmocka_unit_test(test_eio),
		cmocka_unit_test(test_destroy_anytime),
		cmocka_unit_test(test_consumer_killed),
#if defined(PM_HAVE_CUDA) && !defined(PM_TEST_MODULE)
		cmocka_unit_test(test_cuda_stub),
		cmocka_unit_test(test_cuda_device1),
		cmocka_unit_test(test_cuda_consumer_race),
		cmocka_unit_test(test_cuda_queued_copy_fails_late),
		cmocka_unit_test(test_cuda_queued_copy_fails_after_lanes),
		cmocka_unit_test(test_cuda_fork_no_calls),
#endif
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
