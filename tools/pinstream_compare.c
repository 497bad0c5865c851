// SPDX-License-Identifier: MIT
/*
 * --compare: the same items, batch size and order through four paths, in one
 * run so the ratios are fair on a noisy machine:
 *   (a) pread into pageable memory, then memcpy into a pinned buffer
 *       (what DataLoader(pin_memory=True) does),
 *   (b) pread straight into the pinned buffer,
 *   (c) pinmem, buffered io_uring reads into the pinned slots,
 *   (d) pinmem, O_DIRECT io_uring reads into the pinned slots.
 * Cold rows start with the files dropped from the page cache; warm rows
 * start with them cached.  CPU time is getrusage(RUSAGE_SELF): every thread
 * of the process, io_uring's workers included.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinstream.h"

enum mode { MODE_A, MODE_B, MODE_C, MODE_D };

static const char *const mode_names[] = {
	"(a) pread + memcpy to pinned",
	"(b) pread into pinned",
	"(c) pinmem buffered io_uring",
	"(d) pinmem O_DIRECT io_uring",
};

struct row {
	enum mode mode;
	bool warm;
	bool ok;
	double gbps, cpu_per_gb, cached;
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
	struct pm_buf *pinned;
	void *dev;
	char *pageable;
	char drop_note[160];
};

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Share of the dataset's pages in the page cache (mincore). */
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

static void warm_up(struct cmp *c)
{
	for (size_t i = 0; i < pm_manifest_count(c->m); i++) {
		struct pm_item it;

		pm_manifest_item(c->m, i, &it);
		for (uint64_t done = 0; done < it.length; done += c->slot) {
			uint64_t n = it.length - done < c->slot ? it.length - done : c->slot;

			if (pread_all(c->fds[it.path_id], c->pageable, n, it.offset + done))
				return;
		}
	}
}

/* (a) and (b): batches packed like the stream's, one pread per item. */
static int run_pread(struct cmp *c, bool pageable, struct row *r)
{
	char *pin = pm_buf_ptr(c->pinned), *dst = pageable ? c->pageable : pin;
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
			if (c->backend && fill) {
				uint64_t ev;

				ret = pm_copy_h2d(c->ctx, c->dev, pin, fill, &ev);
				if (!ret) {
					ret = pm_event_wait(c->ctx, ev);
					pm_event_release(c->ctx, ev);
				}
				if (ret) {
					snprintf(r->note, sizeof(r->note), "%s",
						 pm_ctx_last_error(c->ctx));
					return ret;
				}
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

static int run_stream(struct cmp *c, enum pm_direct direct, struct row *r)
{
	struct pm_stream_opts so = c->a->so;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;

	so.direct = direct;
	so.no_crc = true;	/* the baselines check nothing either */
	so.batch_bytes = c->slot;
	ret = pm_stream_create(c->ctx, c->m, &so, &s);
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
	if (!ret && direct == PM_DIRECT_ON)
		snprintf(r->note, sizeof(r->note), "%u files O_DIRECT", st.files_direct);
	pm_stream_destroy(s);
	return ret;
}

static void run_row(struct cmp *c, enum mode mode, bool warm, struct row *r)
{
	double t0, c0, t, cpu;
	int ret;

	memset(r, 0, sizeof(*r));
	r->mode = mode;
	r->warm = warm;
	if (!warm)
		drop_cache(c);
	r->cached = cached_share(c);
	t0 = ps_now();
	c0 = cpu_s();
	switch (mode) {
	case MODE_A: ret = run_pread(c, true, r); break;
	case MODE_B: ret = run_pread(c, false, r); break;
	case MODE_C: ret = run_stream(c, PM_DIRECT_OFF, r); break;
	default: ret = run_stream(c, PM_DIRECT_ON, r); break;
	}
	t = ps_now() - t0;
	cpu = cpu_s() - c0;
	r->ok = !ret;
	if (r->ok && r->bytes) {
		r->gbps = r->bytes / t / 1e9;
		r->cpu_per_gb = cpu / (r->bytes / 1e9);
	}
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
	printf("cold rows: page cache dropped first with %s; 'cached' is the share of the files in the page cache when the row started\n",
	       c->drop_note[0] ? c->drop_note : "nothing (no cold row ran)");
	printf("%-30s %-5s %7s %9s %9s %9s %7s  %s\n", "mode", "cache", "GB/s",
	       "CPU s/GB", "GB/s/(a)", "CPU/(a)", "cached", "note");
	for (int i = 0; i < n; i++) {
		struct row *r = &rows[i], *base = NULL;

		for (int j = 0; j < n; j++)
			if (rows[j].mode == MODE_A && rows[j].warm == r->warm && rows[j].ok)
				base = &rows[j];
		if (!r->ok) {
			printf("%-30s %-5s %7s %9s %9s %9s %6.0f%%  %s\n", mode_names[r->mode],
			       r->warm ? "warm" : "cold", "n/a", "", "", "", 100 * r->cached,
			       r->note);
			continue;
		}
		printf("%-30s %-5s %7.2f %9.3f", mode_names[r->mode], r->warm ? "warm" : "cold",
		       r->gbps, r->cpu_per_gb);
		if (base && base->gbps > 0 && base->cpu_per_gb > 0)
			printf(" %8.2fx %8.2fx", r->gbps / base->gbps,
			       r->cpu_per_gb / base->cpu_per_gb);
		else
			printf(" %9s %9s", "", "");
		printf(" %6.0f%%  %s\n", 100 * r->cached, r->note);
	}
}

static void print_json(struct cmp *c, struct row *rows, int n)
{
	struct pm_ctx_info ci;

	pm_ctx_info(c->ctx, &ci);
	printf("{\"bytes\":%llu,\"items\":%zu,\"batch_bytes\":%llu,\"qd\":%u,"
	       "\"chunk_bytes\":%u,\"backend\":\"%s\",\"cold_method\":",
	       (unsigned long long)pm_manifest_bytes(c->m), pm_manifest_count(c->m),
	       (unsigned long long)c->slot, c->a->so.qd, c->a->so.chunk_bytes, ci.backend);
	ps_json_str(stdout, c->drop_note);
	printf(",\"rows\":[");
	for (int i = 0; i < n; i++) {
		struct row *r = &rows[i];

		printf("%s{\"mode\":\"%c\",\"name\":", i ? "," : "", "abcd"[r->mode]);
		ps_json_str(stdout, mode_names[r->mode] + 4);
		printf(",\"cache\":\"%s\",\"ok\":%s,\"gbps\":%.4f,\"cpu_s_per_gb\":%.5f,"
		       "\"cached_at_start\":%.3f,\"note\":", r->warm ? "warm" : "cold",
		       r->ok ? "true" : "false", r->gbps, r->cpu_per_gb, r->cached);
		ps_json_str(stdout, r->note);
		printf("}");
	}
	printf("]}\n");
}

static bool fits_in_memory(uint64_t bytes)
{
	long pages = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);

	return pages > 0 && (uint64_t)pages * pg > bytes + bytes / 4;
}

int ps_compare(const struct ps_args *a)
{
	struct cmp c = { .a = a };
	struct pm_ctx_info ci;
	struct row rows[8];
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
	if (pm_buf_alloc(c.ctx, c.slot, &(struct pm_buf_opts){ .pin = a->so.pin }, &c.pinned)) {
		ps_err("%s", pm_ctx_last_error(c.ctx));
		goto out;
	}
	if (c.backend && pm_dev_alloc(c.ctx, c.slot, &c.dev)) {
		ps_err("%s", pm_ctx_last_error(c.ctx));
		goto out;
	}

	for (enum mode md = MODE_A; md <= MODE_D; md++)
		run_row(&c, md, false, &rows[n++]);
	if (!a->no_warm) {
		if (fits_in_memory(pm_manifest_bytes(c.m))) {
			warm_up(&c);
			for (enum mode md = MODE_A; md <= MODE_C; md++)
				run_row(&c, md, true, &rows[n++]);
		} else {
			fprintf(stderr, "pinstream: warm rows left out: the dataset does not fit in free memory\n");
		}
	}
	if (a->json)
		print_json(&c, rows, n);
	else
		print_table(&c, rows, n);
	ret = 0;
	for (int i = 0; i < n; i++)
		if (!rows[i].ok && rows[i].mode != MODE_D)
			ret = PS_EXIT_FAIL;	/* (d) may be impossible here: said in its note */
out:
	if (c.dev)
		pm_dev_free(c.ctx, c.dev);
	if (c.pinned)
		pm_buf_free(c.ctx, c.pinned);
	for (uint32_t i = 0; c.fds && i < pm_manifest_npaths(c.m); i++)
		if (c.fds[i] >= 0)
			close(c.fds[i]);
	free(c.fds);
	free(c.pageable);
	if (c.ctx)
		pm_close(c.ctx);
	pm_manifest_destroy(c.m);
	return ret;
}
