// SPDX-License-Identifier: MIT
/*
 * --compare: the same items, batch size and order through four paths, in one
 * run so the ratios are fair on a noisy machine:
 *   (a) pread into pageable memory, then memcpy into pinned memory
 *       (what DataLoader(pin_memory=True) does),
 *   (b) pread straight into pinned memory,
 *   (c) pinmem, buffered io_uring reads into the pinned slots,
 *   (d) pinmem, O_DIRECT io_uring reads into the pinned slots,
 *   (e) DataLoader(num_workers=N, pin_memory=True): N worker threads (N =
 *       CPUs) pread whole batches into pageable memory, two batches ahead
 *       each (prefetch_factor=2), and one pin thread copies each batch, in
 *       order, into pinned memory.
 * The baselines' pinned memory is as many batch buffers as the stream has
 * slots, filled in turn (struct cmp's pinned).
 * With --coalesce on, (c) and (d) read item by item (coalescing off) and two
 * rows read close items of a file (tar members) as one range and copy them
 * into place (enum pm_coalesce):
 *   (f) pinmem buffered, coalesced,
 *   (g) pinmem O_DIRECT, coalesced.
 * Cold rows start with the files dropped from the page cache and from the
 * same memory state: as much anonymous memory as the dataset is touched and
 * freed just before each (settle_memory).  A warm row
 * is a reader's second epoch: the files are dropped, the row's own mode
 * reads them once untimed, then the row is timed.  How a reader fills the
 * page cache decides how fast every later epoch copies out of it (many
 * reads in flight used to leave 4 KiB folios, a pread loop 2 MiB ones:
 * 35-50% apart warm), so a warm row does not read what the previous row
 * left.  Every row is timed without its setup: the
 * baselines' buffers are allocated and files opened before, and the
 * stream rows count from their first read (io_s), after slots are
 * allocated and registered.  CPU time is getrusage(RUSAGE_SELF): every
 * thread of the process, io_uring's workers included.  Ratios are against
 * the strongest baseline of the same cache state (the fastest of a, b, e).
 *
 * A warm row over a 1 GiB dataset lasts ~0.1 s, and on a shared machine one
 * row can get half the CPU the next one got: every row runs --rounds times
 * (cold rounds, then warm rounds), each round in a rotated order so no mode
 * always runs first, and every other round reversed: rotating alone keeps
 * each mode after the same one, and what a row leaves behind (the page
 * cache it dropped, memory it freed, which a VM may hand back to its host)
 * falls on the next.  A row shows the median of its rounds.  The summary
 * also gives the range of each round's ratio against that round's strongest
 * baseline.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinstream.h"

enum mode { MODE_A, MODE_B, MODE_C, MODE_D, MODE_E, MODE_F, MODE_G };

static const char *const mode_names[] = {
	"(a) pread + memcpy to pinned",
	"(b) pread into pinned",
	"(c) pinmem buffered io_uring",
	"(d) pinmem O_DIRECT io_uring",
	"(e) DataLoader N workers + pin",
	"(f) pinmem buffered coalesced",
	"(g) pinmem O_DIRECT coalesced",
};

static bool baseline(enum mode m)
{
	return m == MODE_A || m == MODE_B || m == MODE_E;
}

#define MAX_ROWS	7	/* modes per cache state */
#define MAX_ROUNDS	PS_MAX_ROUNDS

struct row {
	enum mode mode;
	bool warm;
	bool ok;
	double gbps, cpu_per_gb, cached;
	double gbps_min, gbps_max;	/* over the rounds */
	double ratio_min, ratio_max;	/* each round's against its strongest baseline */
	double io_s, setup_cpu_s;	/* stream rows: from the first read; CPU of the setup */
	uint64_t bytes;
	char note[256];
};

struct cmp {
	const struct ps_args *a;
	struct pm_manifest *m;
	struct pm_ctx *ctx;
	int *fds;		/* per path, buffered */
	uint64_t slot;		/* batch bytes */
	bool backend;
	/*
	 * The baselines' pinned destination: as many batch-sized parts as the
	 * stream has slots, filled in turn, so that the baselines write as
	 * much memory as the stream does (a pipeline that copies one batch to
	 * the device while it reads the next needs that many; these wait for
	 * each copy).  One reused batch buffer stays in the CPU's cache:
	 * measured warm, a pread loop into one 16 MiB buffer spent 0.062-0.065
	 * CPU s/GB, into four in turn 0.082-0.083.  Held only while baseline
	 * rows run, so the run pins at most what the stream's ring does.
	 */
	struct pm_buf *pinned;
	uint32_t nslots;
	enum pm_pin_mode pin_mode;	/* how it was pinned */
	void *dev;
	char *pageable;
	char drop_note[160];
	char settle_note[160];	/* what settle_memory did */
	uint64_t reported_kib;	/* free memory this VM gave back to its host during the cold rounds */
	uint32_t rounds;
	/* (e) */
	uint32_t workers;
	char **wbuf;		/* 2 per worker */
	size_t *starts;		/* batch k is items [starts[k], starts[k + 1]) */
	size_t nbatches;
};

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * Share of the dataset's pages in the page cache (mincore); -1 when it
 * cannot be told: mincore reports every page of a file the caller neither
 * owns nor may write as resident (Linux 5.2 on), which said 100% for cold
 * files of another user.
 */
static double cached_share(struct cmp *c)
{
	uint64_t in = 0, all = 0;
	long pg = sysconf(_SC_PAGESIZE);

	for (uint32_t i = 0; i < pm_manifest_npaths(c->m); i++) {
		struct stat st;
		unsigned char *vec;
		size_t pages;
		void *p;

		if (fstat(c->fds[i], &st) || !st.st_size)
			continue;
		if (st.st_uid != geteuid() && geteuid() != 0 &&
		    access(pm_manifest_path(c->m, i), W_OK))
			return -1;
		pages = (st.st_size + pg - 1) / pg;
		p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, c->fds[i], 0);
		if (p == MAP_FAILED)
			continue;
		vec = malloc(pages);
		if (vec && !mincore(p, st.st_size, vec))
			for (size_t k = 0; k < pages; k++)
				in += vec[k] & 1;
		all += pages;
		free(vec);
		munmap(p, st.st_size);
	}
	return all ? (double)in / all : 0;
}

static void drop_cache(struct cmp *c)
{
	bool root = geteuid() == 0;
	int fd;

	for (uint32_t i = 0; i < pm_manifest_npaths(c->m); i++)
		posix_fadvise(c->fds[i], 0, 0, POSIX_FADV_DONTNEED);
	snprintf(c->drop_note, sizeof(c->drop_note),
		 "posix_fadvise(DONTNEED) on every file");
	if (!root)
		return;
	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd >= 0 && write(fd, "1", 1) == 1)
		snprintf(c->drop_note, sizeof(c->drop_note),
			 "posix_fadvise(DONTNEED) on every file + /proc/sys/vm/drop_caches");
	if (fd >= 0)
		close(fd);
}

/*
 * Every cold row starts from the same memory state: touch and free as much
 * anonymous memory as the dataset (at most three quarters of what is
 * available, and of what this process's cgroup still allows: touching past
 * its memory.max (v1: memory.limit_in_bytes) would reclaim, swap or
 * OOM-kill instead), so the memory
 * the row's page cache will take was just used
 * and freed, whatever the row before it left (its page cache dropped, or
 * memory a VM's free page reporting handed back to its host, which costs
 * a refault from the host on first touch).
 */
static void settle_memory(struct cmp *c)
{
	long avail = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
	uint64_t want = pm_manifest_bytes(c->m), room, cg, limit;
	char b[32], l[32], why[96] = "";
	char *p;

	room = avail > 0 ? (uint64_t)avail * (uint64_t)pg / 4 * 3 : 0;
	if (want > room)
		want = room;
	cg = ps_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup", &limit);
	if (cg != UINT64_MAX && want > cg / 4 * 3) {
		want = cg / 4 * 3;
		snprintf(why, sizeof(why), " (capped by the cgroup's memory limit of %s)",
			 ps_bytes(limit, l, sizeof(l)));
	}
	want = want / (uint64_t)pg * (uint64_t)pg;
	if (!want) {
		if (why[0])
			snprintf(c->settle_note, sizeof(c->settle_note),
				 "no anonymous memory touched: the cgroup's memory limit of %s is reached",
				 ps_bytes(limit, l, sizeof(l)));
		return;
	}
	p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	for (uint64_t off = 0; off < want; off += (uint64_t)pg)
		p[off] = 1;
	munmap(p, want);
	snprintf(c->settle_note, sizeof(c->settle_note),
		 "then %s of anonymous memory touched and freed%s", ps_bytes(want, b, sizeof(b)), why);
}

/*
 * KiB of free memory this guest reported to its host since boot
 * (virtio-balloon free page reporting), 0 when it reports none.  The host
 * drops what is reported, and the guest refaults it on its first touch: on
 * the VM this was measured on, memory freed by dropping the page cache was
 * reported within about a second and refaulted at about 1 s per GiB, so a
 * cold row was slow whenever its page cache landed on reported memory,
 * which depends on the row before it and on timing.  With reporting off
 * (page_reporting_order above the largest order) cold rows were steady.
 */
static uint64_t free_page_reporting(void)
{
	unsigned long long kib = 0;
	FILE *f = fopen("/sys/module/page_reporting/parameters/reported_kib", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &kib) != 1)
		kib = 0;
	fclose(f);
	return kib;
}

static int pread_all(int fd, char *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t r = pread(fd, p, len > (1U << 30) ? (1U << 30) : len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return -ENODATA;
		p += r;
		len -= (uint64_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* Finish a batch in pinned memory: copy it to the device when there is one. */
static int to_device(struct cmp *c, const char *pin, uint64_t fill, struct row *r)
{
	uint64_t ev;
	int ret;

	if (!c->backend || !fill)
		return 0;
	ret = pm_copy_h2d(c->ctx, c->dev, pin, fill, &ev);
	if (!ret) {
		ret = pm_event_wait(c->ctx, ev);
		pm_event_release(c->ctx, ev);
	}
	if (ret)
		snprintf(r->note, sizeof(r->note), "%s", pm_ctx_last_error(c->ctx));
	return ret;
}

/* The baselines' pinned destination, allocated unless it is: 0 or -errno (pm_ctx_last_error). */
static int baseline_alloc(struct cmp *c)
{
	int ret;

	if (c->pinned)
		return 0;
	/* the pages the stream's slots get (THP): the rows differ in how they read, not in pages */
	ret = pm_buf_alloc(c->ctx, (uint64_t)c->nslots * c->slot,
			   &(struct pm_buf_opts){ .pin = c->a->so.pin, .pages = PM_PAGES_THP },
			   &c->pinned);
	if (!ret)
		c->pin_mode = pm_buf_pin_mode(c->pinned);
	return ret;
}

static void baseline_free(struct cmp *c)
{
	if (c->pinned)
		pm_buf_free(c->ctx, c->pinned);
	c->pinned = NULL;
}

/* Batch k's part of the baselines' pinned destination. */
static char *pinned_slot(struct cmp *c, size_t k)
{
	return (char *)pm_buf_ptr(c->pinned) + (k % c->nslots) * c->slot;
}

/* (a) and (b): batches packed like the stream's, one pread per item. */
static int run_pread(struct cmp *c, bool pageable, struct row *r)
{
	size_t k = 0;
	char *pin = pinned_slot(c, k), *dst = pageable ? c->pageable : pin;
	uint64_t fill = 0;
	size_t n = pm_manifest_count(c->m);
	int ret;

	for (size_t i = 0; i <= n; i++) {
		struct pm_item it = { 0 };

		if (i < n)
			pm_manifest_item(c->m, i, &it);
		if (i == n || fill + it.length > c->slot) {
			/* the batch is complete: to pinned memory, then the device */
			if (pageable && fill)
				memcpy(pin, c->pageable, fill);
			ret = to_device(c, pin, fill, r);
			if (ret)
				return ret;
			if (fill) {
				pin = pinned_slot(c, ++k);
				dst = pageable ? c->pageable : pin;
			}
			fill = 0;
		}
		if (i == n)
			break;
		if (it.length > c->slot) {
			snprintf(r->note, sizeof(r->note),
				 "item %zu is larger than a batch", i);
			return -EFBIG;
		}
		ret = pread_all(c->fds[it.path_id], dst + fill, it.length, it.offset);
		if (ret) {
			snprintf(r->note, sizeof(r->note), "%s offset %llu: %s", it.path,
				 (unsigned long long)it.offset, strerror(-ret));
			return ret;
		}
		fill += it.length;
		r->bytes += it.length;
	}
	return 0;
}

/* Batches as the pread rows pack them; 0 or -EFBIG naming the item. */
static int plan_batches(struct cmp *c, char *why, size_t len)
{
	size_t n = pm_manifest_count(c->m);
	uint64_t fill = 0;

	c->starts = calloc(n + 1, sizeof(*c->starts));
	if (!c->starts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct pm_item it;

		pm_manifest_item(c->m, i, &it);
		if (it.length > c->slot) {
			snprintf(why, len, "item %zu is larger than a batch", i);
			return -EFBIG;
		}
		if (!i || fill + it.length > c->slot) {
			c->starts[c->nbatches++] = i;
			fill = 0;
		}
		fill += it.length;
	}
	c->starts[c->nbatches] = n;
	return 0;
}

struct dl {
	struct cmp *c;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint64_t *fill;		/* per worker buffer: bytes of its batch, 0: free */
	size_t *batch;		/* per worker buffer: which batch it holds */
	int err;
	bool stop;
};

struct dl_worker {
	struct dl *d;
	uint32_t id;
	pthread_t thread;
};

/* Worker id reads batches id, id + N, ... into its two buffers in turn. */
static void *dl_worker(void *arg)
{
	struct dl_worker *w = arg;
	struct dl *d = w->d;
	struct cmp *c = d->c;

	for (size_t k = w->id, round = 0; k < c->nbatches; k += c->workers, round++) {
		size_t b = w->id * 2 + round % 2;
		uint64_t fill = 0;
		int ret = 0;

		pthread_mutex_lock(&d->lock);
		while (d->fill[b] && !d->stop)
			pthread_cond_wait(&d->cv, &d->lock);
		pthread_mutex_unlock(&d->lock);
		if (d->stop)
			break;
		for (size_t i = c->starts[k]; i < c->starts[k + 1] && !ret; i++) {
			struct pm_item it;

			pm_manifest_item(c->m, i, &it);
			ret = pread_all(c->fds[it.path_id], c->wbuf[b] + fill, it.length, it.offset);
			fill += it.length;
		}
		pthread_mutex_lock(&d->lock);
		if (ret) {
			d->err = ret;
			d->stop = true;
		}
		d->batch[b] = k;
		d->fill[b] = fill;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->lock);
		if (ret)
			break;
	}
	return NULL;
}

/* (e): the workers read, this thread is the pin thread. */
static int run_dataloader(struct cmp *c, struct row *r)
{
	struct dl d = { .c = c };
	struct dl_worker *w = calloc(c->workers, sizeof(*w));
	uint32_t started = 0;
	int ret = 0;

	d.fill = calloc(2 * c->workers, sizeof(*d.fill));
	d.batch = calloc(2 * c->workers, sizeof(*d.batch));
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.cv, NULL);
	if (!w || !d.fill || !d.batch)
		ret = -ENOMEM;
	for (; !ret && started < c->workers; started++) {
		w[started].d = &d;
		w[started].id = started;
		ret = -pthread_create(&w[started].thread, NULL, dl_worker, &w[started]);
		if (ret)
			break;
	}
	for (size_t k = 0; !ret && k < c->nbatches; k++) {
		size_t b = (k % c->workers) * 2 + (k / c->workers) % 2;
		uint64_t fill;

		pthread_mutex_lock(&d.lock);
		while (!(d.fill[b] && d.batch[b] == k) && !d.err)
			pthread_cond_wait(&d.cv, &d.lock);
		ret = d.err;
		fill = d.fill[b];
		pthread_mutex_unlock(&d.lock);
		if (ret)
			break;
		memcpy(pinned_slot(c, k), c->wbuf[b], fill);
		ret = to_device(c, pinned_slot(c, k), fill, r);
		r->bytes += fill;
		pthread_mutex_lock(&d.lock);
		d.fill[b] = 0;
		pthread_cond_broadcast(&d.cv);
		pthread_mutex_unlock(&d.lock);
	}
	pthread_mutex_lock(&d.lock);
	d.stop = true;
	pthread_cond_broadcast(&d.cv);
	pthread_mutex_unlock(&d.lock);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	if (ret && !r->note[0])
		snprintf(r->note, sizeof(r->note), "%s", strerror(-ret));
	else if (!ret)
		snprintf(r->note, sizeof(r->note), "%u workers", c->workers);
	pthread_mutex_destroy(&d.lock);
	pthread_cond_destroy(&d.cv);
	free(d.fill);
	free(d.batch);
	free(w);
	return ret;
}

static int run_stream(struct cmp *c, enum pm_direct direct, bool coalesce, struct row *r)
{
	struct pm_stream_opts so = c->a->so;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;

	so.direct = direct;
	/* --coalesce on: (c) and (d) item by item, (f) and (g) coalesced */
	if (c->a->coalesce_set && c->a->so.coalesce == PM_COALESCE_ON)
		so.coalesce = coalesce ? PM_COALESCE_ON : PM_COALESCE_OFF;
	so.no_crc = true;	/* the baselines check nothing either */
	so.batch_bytes = c->slot;
	r->setup_cpu_s = cpu_s();
	ret = pm_stream_create(c->ctx, c->m, &so, &s);
	r->setup_cpu_s = cpu_s() - r->setup_cpu_s;
	if (ret) {
		snprintf(r->note, sizeof(r->note), "%s", pm_ctx_last_error(c->ctx));
		return ret;
	}
	while (!(ret = pm_stream_next(s, &b)) && b)
		pm_stream_release(s, b);
	if (ret)
		snprintf(r->note, sizeof(r->note), "%s", pm_stream_error(s));
	pm_stream_stats(s, &st);
	r->bytes = st.bytes;
	r->io_s = st.io_s;
	if (!ret && direct == PM_DIRECT_ON)
		snprintf(r->note, sizeof(r->note), "%u files O_DIRECT, %u reader%s",
			 st.files_direct, st.readers, st.readers == 1 ? "" : "s");
	else if (!ret)
		snprintf(r->note, sizeof(r->note), "%u reader%s", st.readers,
			 st.readers == 1 ? "" : "s");
	if (!ret && st.coalesced_reads)
		snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note),
			 ", %llu items in %llu range reads",
			 (unsigned long long)st.coalesced_items,
			 (unsigned long long)st.coalesced_reads);
	pm_stream_destroy(s);
	return ret;
}

static int run_mode(struct cmp *c, enum mode mode, struct row *r)
{
	switch (mode) {
	case MODE_A: return run_pread(c, true, r);
	case MODE_B: return run_pread(c, false, r);
	case MODE_C: return run_stream(c, PM_DIRECT_OFF, false, r);
	case MODE_D: return run_stream(c, PM_DIRECT_ON, false, r);
	case MODE_F: return run_stream(c, PM_DIRECT_OFF, true, r);
	case MODE_G: return run_stream(c, PM_DIRECT_ON, true, r);
	default: return run_dataloader(c, r);
	}
}

static void run_row(struct cmp *c, enum mode mode, bool warm, struct row *r)
{
	double t0, c0, t, cpu;
	int ret;

	/* a stream row pins its own ring: the baselines' memory is given back first */
	ret = baseline(mode) ? baseline_alloc(c) : (baseline_free(c), 0);
	if (ret) {
		memset(r, 0, sizeof(*r));
		r->mode = mode;
		r->warm = warm;
		snprintf(r->note, sizeof(r->note), "%s", pm_ctx_last_error(c->ctx));
		return;
	}
	drop_cache(c);
	if (!warm)
		settle_memory(c);
	if (warm) {
		/* the row's first epoch, untimed: its own page cache */
		memset(r, 0, sizeof(*r));
		run_mode(c, mode, r);
	}
	memset(r, 0, sizeof(*r));
	r->mode = mode;
	r->warm = warm;
	r->cached = cached_share(c);
	t0 = ps_now();
	c0 = cpu_s();
	ret = run_mode(c, mode, r);
	t = ps_now() - t0;
	cpu = cpu_s() - c0 - r->setup_cpu_s;
	if (r->io_s > 0)
		t = r->io_s;
	r->ok = !ret;
	if (r->ok && r->bytes) {
		r->gbps = r->bytes / t / 1e9;
		r->cpu_per_gb = cpu / (r->bytes / 1e9);
	}
}

/* The fastest baseline row (a, b, e) of a cache state, NULL when none ran. */
static struct row *strongest(struct row *rows, int n, bool warm)
{
	struct row *best = NULL;

	for (int i = 0; i < n; i++)
		if (baseline(rows[i].mode) && rows[i].warm == warm && rows[i].ok &&
		    (!best || rows[i].gbps > best->gbps))
			best = &rows[i];
	return best;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * One row from its rounds run[0..rounds) (the same mode and cache state):
 * the median GB/s and CPU s/GB, and the range of each round's ratio against
 * its round's strongest baseline base[r] (NULL: none ran).
 */
static void summarize(struct row *out, struct row *const *run, struct row *const *base,
		      int rounds)
{
	double g[MAX_ROUNDS], cpu[MAX_ROUNDS];
	int n = 0;

	*out = *run[0];
	out->ratio_min = out->ratio_max = 0;
	for (int r = 0; r < rounds; r++) {
		const struct row *x = run[r];

		if (!x->ok) {
			*out = *x;	/* a row that failed once failed: its note says why */
			return;
		}
		g[n] = x->gbps;
		cpu[n++] = x->cpu_per_gb;
		if (base[r] && base[r]->gbps > 0) {
			double q = x->gbps / base[r]->gbps;

			if (!out->ratio_min || q < out->ratio_min)
				out->ratio_min = q;
			if (q > out->ratio_max)
				out->ratio_max = q;
		}
	}
	out->gbps_min = out->gbps_max = g[0];
	for (int i = 1; i < n; i++) {
		if (g[i] < out->gbps_min)
			out->gbps_min = g[i];
		if (g[i] > out->gbps_max)
			out->gbps_max = g[i];
	}
	out->gbps = median(g, n);
	out->cpu_per_gb = median(cpu, n);
}

static void print_table(struct cmp *c, struct row *rows, int n)
{
	struct pm_ctx_info ci;
	char b1[32], b2[32], b3[32];

	pm_ctx_info(c->ctx, &ci);
	printf("pinstream --compare: %s in %zu items, batches of %s, qd %u, chunk %s, backend %s%s\n",
	       ps_bytes(pm_manifest_bytes(c->m), b1, sizeof(b1)), pm_manifest_count(c->m),
	       ps_bytes(c->slot, b2, sizeof(b2)), c->a->so.qd,
	       ps_bytes(c->a->so.chunk_bytes, b3, sizeof(b3)), ci.backend,
	       c->backend ? " (every row includes the copy to the device)" :
			    " (host side only: the copy to the device is the same for every row)");
	printf("cold rows: page cache dropped first with %s%s%s; warm rows: dropped, read once untimed by the same mode, then timed (a second epoch); 'cached' is the share of the files in the page cache when the row started ('?': mincore cannot tell for files this user neither owns nor may write)\n",
	       c->drop_note[0] ? c->drop_note : "nothing (no row ran)",
	       c->settle_note[0] ? ", " : "", c->settle_note);
	printf("every row ran %u round%s (cold rounds, then warm rounds; a rotated order each round, reversed every other round): GB/s and CPU s/GB are medians, 'range' the rounds' GB/s\n",
	       c->rounds, c->rounds == 1 ? "" : "s");
	if (c->reported_kib)
		printf("note: this VM gives free memory back to its host (free page reporting: %llu MiB during the cold rounds): memory it reported is refaulted from the host on first use, so a cold round whose page cache lands there (more likely after (d), which leaves none to drop) can be several times slower\n",
		       (unsigned long long)(c->reported_kib >> 10));
	printf("%-30s %-5s %7s %13s %9s %9s %9s %7s  %s\n", "mode", "cache", "GB/s",
	       "range", "CPU s/GB", "GB/s/best", "CPU/best", "cached", "note");
	for (int i = 0; i < n; i++) {
		struct row *r = &rows[i], *base = strongest(rows, n, r->warm);

		char cached[16];

		if (r->cached < 0)
			snprintf(cached, sizeof(cached), "?");
		else
			snprintf(cached, sizeof(cached), "%.0f%%", 100 * r->cached);
		if (!r->ok) {
			printf("%-30s %-5s %7s %13s %9s %9s %9s %7s  %s\n", mode_names[r->mode],
			       r->warm ? "warm" : "cold", "n/a", "", "", "", "", cached, r->note);
			continue;
		}
		snprintf(b1, sizeof(b1), "%.2f-%.2f", r->gbps_min, r->gbps_max);
		printf("%-30s %-5s %7.2f %13s %9.3f", mode_names[r->mode],
		       r->warm ? "warm" : "cold", r->gbps, b1, r->cpu_per_gb);
		if (base && base->gbps > 0 && base->cpu_per_gb > 0)
			printf(" %8.2fx %8.2fx", r->gbps / base->gbps,
			       r->cpu_per_gb / base->cpu_per_gb);
		else
			printf(" %9s %9s", "", "");
		printf(" %7s  %s\n", cached, r->note);
	}
	for (int warm = 0; warm < 2; warm++) {
		struct row *base = strongest(rows, n, warm);

		if (!base)
			continue;
		printf("%s: the strongest baseline is %s (%.2f GB/s)", warm ? "warm" : "cold",
		       mode_names[base->mode], base->gbps);
		for (int i = 0; i < n; i++)
			if (rows[i].warm == warm && !baseline(rows[i].mode) && rows[i].ok)
				printf("; %.3s %.2fx (rounds %.2f-%.2fx)", mode_names[rows[i].mode],
				       rows[i].gbps / base->gbps, rows[i].ratio_min,
				       rows[i].ratio_max);
		printf("\n");
	}
}

/* The fastest row that ran, of one cache state (warm < 0: either); NULL when none ran. */
static const struct row *fastest(const struct row *rows, int n, int warm)
{
	const struct row *best = NULL;

	for (int i = 0; i < n; i++)
		if (rows[i].ok && rows[i].gbps > 0 && (warm < 0 || rows[i].warm == warm) &&
		    (!best || rows[i].gbps > best->gbps))
			best = &rows[i];
	return best;
}

/*
 * Three closing lines for a person (the last lines of `make demo`): what
 * the fastest row means for a training job, what pinmem picks here, and
 * what to run next.
 */
static void print_meaning(struct cmp *c, const struct row *rows, int n)
{
	const struct row *best = fastest(rows, n, -1), *cold = fastest(rows, n, 0), *d = NULL;
	struct pm_ctx_info ci;
	char b1[32];

	pm_ctx_info(c->ctx, &ci);
	for (int i = 0; i < n; i++)
		if (rows[i].mode == MODE_D)
			d = &rows[i];
	ps_bytes(c->slot, b1, sizeof(b1));
	if (best) {
		printf("for a training job: the fastest row, %s (%s), fills a %s batch every %.2f ms: a training step that takes longer than that per batch never waits for input",
		       mode_names[best->mode], best->warm ? "warm: data in the page cache" : "cold",
		       b1, c->slot / (best->gbps * 1e9) * 1e3);
		if (best->warm && cold)
			printf(" (from disk, cold: %.3s at %.2f GB/s, %.2f ms)", mode_names[cold->mode],
			       cold->gbps, c->slot / (cold->gbps * 1e9) * 1e3);
		printf("\n");
	}
	if (ci.module)
		printf("pinmem here: slots pinned through /dev/pinmem (%s, budgeted)",
		       pm_pin_mode_name(c->pin_mode));
	else
		printf("pinmem here: slots pinned with %s, so no budget applies (%s)",
		       pm_pin_mode_name(c->pin_mode),
		       ci.module_note[0] ? ci.module_note : "no module");
	printf("; reads %s\n", d && d->ok ?
	       "with O_DIRECT where the file system allows it, as (d) (--direct auto)" :
	       "buffered, as (c): O_DIRECT did not run here (see (d)'s note)");
	printf("next: your own files with `pinstream --compare FILE...` or `pinstream --manifest LIST` (lines 'path offset length'); from PyTorch, pinmem.torch.DataLoader (README.md: First use, PyTorch)\n");
}

static void print_json(struct cmp *c, struct row *rows, int n)
{
	struct pm_ctx_info ci;

	pm_ctx_info(c->ctx, &ci);
	printf("{\"bytes\":%llu,\"items\":%zu,\"batch_bytes\":%llu,\"qd\":%u,"
	       "\"chunk_bytes\":%u,\"backend\":\"%s\",\"rounds\":%u,\"cold_method\":",
	       (unsigned long long)pm_manifest_bytes(c->m), pm_manifest_count(c->m),
	       (unsigned long long)c->slot, c->a->so.qd, c->a->so.chunk_bytes, ci.backend,
	       c->rounds);
	ps_json_str(stdout, c->drop_note);
	printf(",\"cold_memory\":");
	ps_json_str(stdout, c->settle_note);
	printf(",\"warm_method\":\"dropped, read once untimed by the same mode, then timed\","
	       "\"free_page_reporting_kib\":%llu", (unsigned long long)c->reported_kib);
	for (int warm = 0; warm < 2; warm++) {
		struct row *base = strongest(rows, n, warm);

		printf(",\"strongest_%s\":\"%c\"", warm ? "warm" : "cold",
		       base ? "abcde"[base->mode] : '-');
	}
	printf(",\"rows\":[");
	for (int i = 0; i < n; i++) {
		struct row *r = &rows[i];

		printf("%s{\"mode\":\"%c\",\"name\":", i ? "," : "", "abcde"[r->mode]);
		ps_json_str(stdout, mode_names[r->mode] + 4);
		printf(",\"cache\":\"%s\",\"ok\":%s,\"gbps\":%.4f,\"gbps_min\":%.4f,"
		       "\"gbps_max\":%.4f,\"ratio_min\":%.4f,\"ratio_max\":%.4f,"
		       "\"cpu_s_per_gb\":%.5f,\"cached_at_start\":%.3f,\"note\":",
		       r->warm ? "warm" : "cold", r->ok ? "true" : "false", r->gbps,
		       r->gbps_min, r->gbps_max, r->ratio_min, r->ratio_max, r->cpu_per_gb,
		       r->cached);
		ps_json_str(stdout, r->note);
		printf("}");
	}
	printf("]}\n");
}

/*
 * The modes order[0..n) of one cache state, c->rounds times, round r in
 * order rotated by r / 2, and reversed when r is odd (so for an even n too,
 * every mode comes first in turn); their summaries appended to rows[*nrows].
 */
static void run_rounds(struct cmp *c, const enum mode *order, size_t n, bool warm,
		       struct row *rows, int *nrows)
{
	static struct row run[MAX_ROUNDS][MAX_ROWS];
	struct row *runs[MAX_ROUNDS], *base[MAX_ROUNDS];

	for (uint32_t r = 0; r < c->rounds; r++)
		for (size_t i = 0; i < n; i++) {
			size_t k = (r & 1) ? (n - 1 - i + r / 2) % n : (i + r / 2) % n;

			run_row(c, order[k], warm, &run[r][k]);
		}
	for (uint32_t r = 0; r < c->rounds; r++)
		base[r] = strongest(run[r], (int)n, warm);
	for (size_t k = 0; k < n; k++) {
		for (uint32_t r = 0; r < c->rounds; r++)
			runs[r] = &run[r][k];
		summarize(&rows[(*nrows)++], runs, base, (int)c->rounds);
	}
}

static bool fits_in_memory(uint64_t bytes)
{
	long pages = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);

	return pages > 0 && (uint64_t)pages * pg > bytes + bytes / 4;
}

int ps_compare(const struct ps_args *a)
{
	struct cmp c = { .a = a, .rounds = a->rounds ? a->rounds : 1 };
	struct pm_ctx_info ci;
	/* the O_DIRECT rows last: they have no warm row */
	static const enum mode order5[] = { MODE_A, MODE_B, MODE_E, MODE_C, MODE_D };
	static const enum mode order7[] = { MODE_A, MODE_B, MODE_E, MODE_C, MODE_F, MODE_D, MODE_G };
	bool co = a->coalesce_set && a->so.coalesce == PM_COALESCE_ON;
	const enum mode *order = co ? order7 : order5;
	size_t norder = co ? 7 : 5, ndirect = co ? 2 : 1;
	struct row rows[2 * MAX_ROWS];
	int n = 0, ret = PS_EXIT_FAIL;
	uint32_t np;

	c.m = ps_load_items(a);
	if (!c.m)
		return PS_EXIT_FAIL;
	/* host side only unless a backend was asked for */
	c.ctx = ps_open(a->backend_set ? a->backend : PM_BACKEND_NONE, a->device);
	if (!c.ctx)
		goto out;
	pm_ctx_info(c.ctx, &ci);
	c.backend = strcmp(ci.backend, "none") != 0;
	c.slot = a->so.batch_bytes ? a->so.batch_bytes : 16ULL << 20;
	np = pm_manifest_npaths(c.m);
	c.fds = calloc(np, sizeof(*c.fds));
	c.pageable = malloc(c.slot);
	if (!c.fds || !c.pageable) {
		ps_err("out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < np; i++)
		c.fds[i] = -1;
	for (uint32_t i = 0; i < np; i++) {
		c.fds[i] = open(pm_manifest_path(c.m, i), O_RDONLY | O_CLOEXEC);
		if (c.fds[i] < 0) {
			ps_err("%s: %s", pm_manifest_path(c.m, i), strerror(errno));
			goto out;
		}
	}
	memset(c.pageable, 0, c.slot);	/* fault it in, as a warm DataLoader worker has */
	c.nslots = a->so.slots;	/* the stream's, from pm_stream_opts_init or --slots */
	if (baseline_alloc(&c)) {	/* refused here, not row by row */
		ps_err("%s", pm_ctx_last_error(c.ctx));
		goto out;
	}
	if (c.backend && pm_dev_alloc(c.ctx, c.slot, &c.dev)) {
		ps_err("%s", pm_ctx_last_error(c.ctx));
		goto out;
	}

	{
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		char why[128] = "out of memory";

		c.workers = cpus > 0 ? (uint32_t)cpus : 1;
		c.wbuf = calloc(2 * c.workers, sizeof(*c.wbuf));
		for (uint32_t i = 0; c.wbuf && i < 2 * c.workers; i++) {
			c.wbuf[i] = malloc(c.slot);
			if (!c.wbuf[i])
				goto nomem;
			memset(c.wbuf[i], 0, c.slot);	/* warm workers' buffers are faulted in */
		}
		if (!c.wbuf || plan_batches(&c, why, sizeof(why))) {
nomem:
			ps_err("%s", why);
			goto out;
		}
	}
	c.reported_kib = free_page_reporting();
	run_rounds(&c, order, norder, false, rows, &n);
	c.reported_kib = free_page_reporting() - c.reported_kib;
	if (!a->no_warm) {
		if (fits_in_memory(pm_manifest_bytes(c.m))) {
			run_rounds(&c, order, norder - ndirect, true, rows, &n);
		} else {
			fprintf(stderr, "pinstream: warm rows left out: the dataset does not fit in free memory\n");
		}
	}
	if (a->json)
		print_json(&c, rows, n);
	else {
		print_table(&c, rows, n);
		print_meaning(&c, rows, n);
	}
	ret = 0;
	for (int i = 0; i < n; i++)
		if (!rows[i].ok && rows[i].mode != MODE_D && rows[i].mode != MODE_G)
			ret = PS_EXIT_FAIL;	/* (d), (g) may be impossible here: said in their note */
out:
	if (c.dev)
		pm_dev_free(c.ctx, c.dev);
	baseline_free(&c);
	for (uint32_t i = 0; c.fds && i < pm_manifest_npaths(c.m); i++)
		if (c.fds[i] >= 0)
			close(c.fds[i]);
	free(c.fds);
	free(c.pageable);
	for (uint32_t i = 0; c.wbuf && i < 2 * c.workers; i++)
		free(c.wbuf[i]);
	free(c.wbuf);
	free(c.starts);
	if (c.ctx)
		pm_close(c.ctx);
	pm_manifest_destroy(c.m);
	return ret;
}
