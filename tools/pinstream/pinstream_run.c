// SPDX-License-Identifier: MIT
/*
 * pinstream's main job: stream the items, show a live line on a terminal,
 * then a summary table (or one JSON object).  The consumer here only takes
 * and releases batches, so the numbers are the pipeline's own limit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinstream.h"

static void progress(const struct pm_stream_stats *st)
{
	char done[32], total[32], eta[32] = "?";
	double el = st->elapsed_s > 0 ? st->elapsed_s : 1e-9;
	double rate = st->bytes / el;

	if (rate > 0 && st->total_bytes >= st->bytes)
		snprintf(eta, sizeof(eta), "%.0fs", (st->total_bytes - st->bytes) / rate);
	fprintf(stderr, "\r%s / %s  %.2f GB/s  ETA %s  input-bound %.0f%%  consumer-bound %.0f%%   ",
		ps_bytes(st->bytes, done, sizeof(done)),
		ps_bytes(st->total_bytes, total, sizeof(total)), rate / 1e9, eta,
		100 * st->consumer_wait_s / el, 100 * st->reader_wait_s / el);
}

static void lat_row(const char *name, const struct pm_latency *l)
{
	printf("  %-12s p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", name,
	       l->p50 * 1e3, l->p90 * 1e3, l->p99 * 1e3, l->max * 1e3);
}

static void lat_json(const char *name, const struct pm_latency *l)
{
	printf(",\"%s\":{\"p50_s\":%.6f,\"p90_s\":%.6f,\"p99_s\":%.6f,\"max_s\":%.6f}",
	       name, l->p50, l->p90, l->p99, l->max);
}

static void files_line(struct pm_stream *s, const struct pm_stream_stats *st)
{
	uint32_t n = pm_stream_nfiles(s), shown = 0;

	printf("  %-12s %u (%u O_DIRECT, %u buffered", "files", n, st->files_direct,
	       st->files_buffered);
	if (n > st->files_direct + st->files_buffered)
		printf(", %u unreadable", n - st->files_direct - st->files_buffered);
	printf(")\n");
	/* say why files fell back, a few of them */
	for (uint32_t i = 0; i < n && shown < 3; i++) {
		struct pm_stream_file f;

		if (pm_stream_file(s, i, &f) || f.direct)
			continue;
		printf("  %-12s %s: %s\n", "", f.path, f.note);
		shown++;
	}
}

/* Which NUMA node the slots are on, against the GPU's. */
static void numa_line(const struct pm_stream_stats *st)
{
	if (st->numa_node >= 0 && st->gpu_numa_node >= 0)
		printf("  %-12s slots on node %d, the GPU's node is %d%s\n", "numa", st->numa_node,
		       st->gpu_numa_node, st->numa_node == st->gpu_numa_node ? "" : " (remote)");
	else if (st->numa_node >= 0)
		printf("  %-12s slots on node %d\n", "numa", st->numa_node);
	else if (st->gpu_numa_node >= 0)
		printf("  %-12s slots not placed, the GPU's node is %d\n", "numa", st->gpu_numa_node);
}

/* Seconds spent before the first batch: loading the items, pm_stream_create. */
struct setup_times {
	double load_s, create_s;
};

static void summary(struct pm_stream *s, struct pm_ctx *ctx, const struct ps_args *a,
		    const struct pm_stream_stats *st, const struct setup_times *su, int ret)
{
	struct pm_ctx_info ci;
	char b1[32], b2[32], dev[32] = "";
	double el = st->elapsed_s > 0 ? st->elapsed_s : 1e-9;

	pm_ctx_info(ctx, &ci);
	if (!strcmp(ci.backend, "cuda"))
		snprintf(dev, sizeof(dev), " (device %u)", a->device);
	printf("pinstream: %s in %llu items, %llu batches, %u epoch%s%s\n",
	       ps_bytes(st->bytes, b1, sizeof(b1)), (unsigned long long)st->items,
	       (unsigned long long)st->batches, a->so.epochs, a->so.epochs == 1 ? "" : "s",
	       ret ? " (stopped by an error)" : "");
	files_line(s, st);
	printf("  %-12s %u x %s, pin %s, backend %s%s, %u reader%s, io_uring %s\n", "slots",
	       st->slots, ps_bytes(st->slot_bytes, b2, sizeof(b2)), pm_pin_mode_name(st->pin),
	       ci.backend, dev, st->readers, st->readers == 1 ? "" : "s", st->ring_setup);
	numa_line(st);
	if (st->pin != PM_PIN_MODULE && ci.module_note[0])
		printf("  %-12s not pinned by /dev/pinmem: %s\n", "", ci.module_note);
	if (ci.backend_note[0])
		printf("  %-12s no cuda backend: %s\n", "", ci.backend_note);
	if (st->ring_note[0])
		printf("  %-12s %s\n", "", st->ring_note);
	printf("  %-12s %.2f GB/s (%.3f GB in %.2f s; %.2f GB/s from the first read, setup left out; %.3f GB read incl. alignment)\n",
	       "throughput", st->gbps, st->bytes / 1e9, st->elapsed_s, st->io_gbps,
	       st->read_bytes / 1e9);
	if (st->coalesced_reads)
		printf("  %-12s %llu items read by %llu range reads (shard-sequential)\n", "coalesced",
		       (unsigned long long)st->coalesced_items,
		       (unsigned long long)st->coalesced_reads);
	printf("  %-12s items loaded in %.2f s, pm_stream_create %.2f s\n", "setup",
	       su->load_s, su->create_s);
	printf("  %-12s consumer waited %.2f s (%.0f%%, input-bound), reader waited %.2f s (%.0f%%, consumer-bound)\n",
	       "stalls", st->consumer_wait_s, 100 * st->consumer_wait_s / el,
	       st->reader_wait_s, 100 * st->reader_wait_s / el);
	lat_row("read/batch", &st->read_lat);
	lat_row("copy/batch", &st->copy_lat);
	printf("  %-12s %llu failed batches (%llu items)\n", "errors",
	       (unsigned long long)st->failed_batches, (unsigned long long)st->failed_items);
}

static void json(struct pm_stream *s, struct pm_ctx *ctx, const struct ps_args *a,
		 const struct pm_stream_stats *st, const struct setup_times *su, int ret)
{
	struct pm_ctx_info ci;

	pm_ctx_info(ctx, &ci);
	printf("{\"bytes\":%llu,\"read_bytes\":%llu,\"items\":%llu,\"batches\":%llu,"
	       "\"epochs\":%u,\"failed_batches\":%llu,\"failed_items\":%llu,"
	       "\"elapsed_s\":%.6f,\"gbps\":%.4f,\"io_s\":%.6f,\"io_gbps\":%.4f,"
	       "\"consumer_wait_s\":%.6f,"
	       "\"reader_wait_s\":%.6f,\"slots\":%u,\"slot_bytes\":%llu,\"pin\":\"%s\","
	       "\"backend\":\"%s\",\"readers\":%u,\"ring_flags\":\"%s\",\"files_direct\":%u,"
	       "\"files_buffered\":%u,\"device\":%u,\"numa_node\":%d,\"gpu_numa_node\":%d",
	       (unsigned long long)st->bytes, (unsigned long long)st->read_bytes,
	       (unsigned long long)st->items, (unsigned long long)st->batches,
	       a->so.epochs, (unsigned long long)st->failed_batches,
	       (unsigned long long)st->failed_items, st->elapsed_s, st->gbps, st->io_s,
	       st->io_gbps, st->consumer_wait_s, st->reader_wait_s, st->slots,
	       (unsigned long long)st->slot_bytes, pm_pin_mode_name(st->pin), ci.backend,
	       st->readers, st->ring_setup, st->files_direct,
	       st->files_buffered, a->device, st->numa_node, st->gpu_numa_node);
	lat_json("read_latency", &st->read_lat);
	lat_json("copy_latency", &st->copy_lat);
	printf(",\"populated_bytes\":%llu", (unsigned long long)st->populated_bytes);
	printf(",\"coalesced_reads\":%llu,\"coalesced_items\":%llu",
	       (unsigned long long)st->coalesced_reads, (unsigned long long)st->coalesced_items);
	printf(",\"load_s\":%.6f,\"create_s\":%.6f,\"ring_note\":", su->load_s, su->create_s);
	ps_json_str(stdout, st->ring_note);
	printf(",\"error\":");
	ps_json_str(stdout, ret ? pm_stream_error(s) : "");
	printf(",\"errno\":%d}\n", -ret);
	(void)s;
}

int ps_run(const struct ps_args *a)
{
	double t0 = ps_now();
	struct pm_manifest *m = ps_load_items(a);
	struct setup_times su = { .load_s = ps_now() - t0 };
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	struct pm_ctx *ctx;
	bool show;
	double last = 0;
	int ret;

	if (!m)
		return PS_EXIT_FAIL;
	ctx = ps_open(a->backend, a->device);
	if (!ctx) {
		pm_manifest_destroy(m);
		return PS_EXIT_FAIL;
	}
	t0 = ps_now();
	ret = pm_stream_create(ctx, m, &a->so, &s);
	su.create_s = ps_now() - t0;
	if (ret) {
		ps_err("%s", pm_ctx_last_error(ctx));
		pm_close(ctx);
		pm_manifest_destroy(m);
		return PS_EXIT_FAIL;
	}
	show = a->progress == 1 || (a->progress < 0 && !a->json && isatty(2));
	while (!(ret = pm_stream_next(s, &b)) && b) {
		pm_stream_release(s, b);
		if (show && ps_now() - last > 0.25) {
			last = ps_now();
			pm_stream_stats(s, &st);
			progress(&st);
		}
	}
	pm_stream_stats(s, &st);
	if (show) {
		progress(&st);
		fputc('\n', stderr);
	}
	if (ret)
		ps_err("%s", pm_stream_error(s));
	if (a->json)
		json(s, ctx, a, &st, &su, ret);
	else
		summary(s, ctx, a, &st, &su, ret);
	pm_stream_destroy(s);
	pm_close(ctx);
	pm_manifest_destroy(m);
	return ret ? PS_EXIT_FAIL : 0;
}
