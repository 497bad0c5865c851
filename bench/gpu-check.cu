// SPDX-License-Identifier: MIT
/*
 * gpu-check: what only a real GPU can show (run by bench/gpu-check.sh).
 *
 *   verify  every byte the stream puts on the GPU equals the file: a kernel
 *           computes a position-weighted checksum of each item in device
 *           memory; the host computes the same from the file with pread
 *   h2d     cudaMemcpyAsync host->device GB/s from a pinmem slot buffer, from
 *           pageable malloc memory and from cudaHostAlloc memory
 *   reg     seconds per GiB: cudaHostRegister of faulted malloc memory,
 *           cudaHostAlloc, and pm_buf_alloc (fault + pin + register)
 *   stream  end-to-end file -> GPU GB/s through pm_stream (cuda backend)
 *   consumer  a training loop on one device: PM_HANDOFF_QUEUED, the batch
 *           waited for on the consumer's stream (pm_stream_batch_wait), a
 *           slow kernel then a checksum kernel per item on that stream, the
 *           batch released against it (pm_stream_release_on): every item's
 *           device checksum equals the file's, no context appears on any
 *           other device, the process's current device never changes, and
 *           the slots sit on the GPU's NUMA node
 *
 * usage: gpu-check verify|h2d|reg|stream|consumer MANIFEST_OR_NOTHING [direct]
 * The device is $LOCAL_RANK (one process per GPU), else 0; the program makes
 * it current first, as a training process does.  Linked with -cudart shared
 * so libpinmem's dlopen finds this same runtime.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "pinmem.h"
#include "pinmem_stream.h"
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "gpu-check: %s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* sum over bytes b[j] * ((j * golden) | 1), mod 2^64: order-sensitive, parallel */
__host__ __device__ static inline unsigned long long weight(unsigned long long j)
{
	return (j * 0x9e3779b97f4a7c15ull) | 1ull;
}

__global__ void checksum_kernel(const unsigned char *p, unsigned long long len,
				unsigned long long *out)
{
	unsigned long long acc = 0;

	for (unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	     j < len; j += (unsigned long long)gridDim.x * blockDim.x)
		acc += p[j] * weight(j);
	atomicAdd(out, acc);
}

static unsigned long long host_checksum(const unsigned char *p, size_t len)
{
	unsigned long long acc = 0;

	for (size_t j = 0; j < len; j++)
		acc += p[j] * weight(j);
	return acc;
}

static int device;	/* $LOCAL_RANK, else 0 */

static struct pm_ctx *open_cuda(void)
{
	struct pm_open_opts oo;
	struct pm_ctx_info ci;
	struct pm_ctx *ctx;
	char err[1024] = "";

	memset(&oo, 0, sizeof(oo));
	oo.backend = PM_BACKEND_CUDA;
	oo.cuda_device = device;
	oo.errbuf = err;
	oo.errbuf_len = sizeof(err);
	if (pm_open(&ctx, &oo)) {
		fprintf(stderr, "gpu-check: pm_open(cuda): %s\n", err);
		exit(1);
	}
	pm_ctx_info(ctx, &ci);
	printf("context: backend %s, module %s%s\n", ci.backend, ci.module ? "yes" : "no ",
	       ci.module ? "" : ci.module_note);
	return ctx;
}

static struct pm_manifest *load(const char *path)
{
	struct pm_manifest *m;
	char err[512];

	pm_manifest_create(&m);
	if (pm_manifest_load(m, path, err, sizeof(err))) {
		fprintf(stderr, "gpu-check: %s\n", err);
		exit(1);
	}
	return m;
}

static int verify(const char *manifest, bool direct)
{
	struct pm_ctx *ctx = open_cuda();
	struct pm_manifest *m = load(manifest);
	struct pm_stream_opts o;
	struct pm_stream *s;
	struct pm_batch *b;
	unsigned long long *d_sum, sum;
	unsigned char *buf = NULL;
	size_t cap = 0;
	uint64_t items = 0, bad = 0;
	int *fds, ret;

	pm_stream_opts_init(&o);
	o.direct = direct ? PM_DIRECT_ON : PM_DIRECT_OFF;
	o.batch_bytes = 64 << 20;
	o.slots = 4;
	if (pm_stream_create(ctx, m, &o, &s)) {
		fprintf(stderr, "gpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	fds = (int *)calloc(pm_manifest_npaths(m), sizeof(int));
	for (uint32_t i = 0; i < pm_manifest_npaths(m); i++)
		fds[i] = open(pm_manifest_path(m, i), O_RDONLY);
	CK(cudaMalloc(&d_sum, sizeof(*d_sum)));
	while (!(ret = pm_stream_next(s, &b)) && b) {
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];

			CK(cudaMemset(d_sum, 0, sizeof(*d_sum)));
			checksum_kernel<<<256, 256>>>((const unsigned char *)b->dev + it->slot_offset,
						      it->length, d_sum);
			CK(cudaGetLastError());
			CK(cudaMemcpy(&sum, d_sum, sizeof(sum), cudaMemcpyDeviceToHost));
			if (cap < it->length) {
				free(buf);
				cap = it->length;
				buf = (unsigned char *)malloc(cap);
			}
			if (pread(fds[it->path_id], buf, it->length, it->file_offset) !=
			    (ssize_t)it->length || host_checksum(buf, it->length) != sum) {
				if (bad++ < 5)
					printf("MISMATCH item %llu (%s offset %llu length %llu)\n",
					       (unsigned long long)it->index,
					       pm_manifest_path(m, it->path_id),
					       (unsigned long long)it->file_offset,
					       (unsigned long long)it->length);
			}
			items++;
		}
		pm_stream_release(s, b);
	}
	if (ret)
		printf("stream error: %s\n", pm_stream_error(s));
	printf("verify (%s): %llu items, %llu mismatches -> %s\n", direct ? "O_DIRECT" : "buffered",
	       (unsigned long long)items, (unsigned long long)bad,
	       !ret && !bad && items == pm_manifest_count(m) ? "PASS" : "FAIL");
	cudaFree(d_sum);
	free(buf);
	pm_stream_destroy(s);
	pm_close(ctx);
	return ret || bad || items != pm_manifest_count(m);
}

static double h2d_gbps(void *src, void *dst, size_t len, int reps)
{
	cudaEvent_t a, b;
	cudaStream_t st;
	float ms;

	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, st));	/* warm */
	CK(cudaEventRecord(a, st));
	for (int i = 0; i < reps; i++)
		CK(cudaMemcpyAsync(dst, src, len, cudaMemcpyHostToDevice, st));
	CK(cudaEventRecord(b, st));
	CK(cudaEventSynchronize(b));
	CK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaStreamDestroy(st);
	return (double)len * reps / (ms / 1e3) / 1e9;
}

static int h2d(void)
{
	struct pm_ctx *ctx = open_cuda();
	size_t len = 256 << 20;
	struct pm_buf *pb;
	void *dev, *pageable, *hostalloc;
	double slot, peak;
	bool ok;

	CK(cudaMalloc(&dev, len));
	if (pm_buf_alloc(ctx, len, NULL, &pb)) {
		fprintf(stderr, "gpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	pageable = malloc(len);
	memset(pageable, 1, len);
	CK(cudaHostAlloc(&hostalloc, len, cudaHostAllocDefault));
	memset(hostalloc, 1, len);
	slot = h2d_gbps(pm_buf_ptr(pb), dev, len, 10);
	peak = h2d_gbps(hostalloc, dev, len, 10);
	printf("h2d 256 MiB x 10: pinmem slot (%s%s, NUMA node %d) %.1f GB/s, pageable %.1f GB/s, cudaHostAlloc %.1f GB/s\n",
	       pm_pin_mode_name(pm_buf_pin_mode(pb)),
	       pm_buf_backend_registered(pb) ? "+cudaHostRegister" : ", NOT registered",
	       pm_buf_numa_node(pb), slot, h2d_gbps(pageable, dev, len, 10), peak);
	printf("h2d slot / pinned peak: %.2f -> %s\n", slot / peak,
	       slot >= 0.8 * peak ? "PASS" : "FAIL (slots copy slower than cudaHostAlloc memory)");
	ok = slot >= 0.8 * peak;
	cudaFreeHost(hostalloc);
	free(pageable);
	pm_buf_free(ctx, pb);
	cudaFree(dev);
	pm_close(ctx);
	return !ok;
}

static int reg(void)
{
	struct pm_ctx *ctx = open_cuda();
	size_t len = 2ULL << 30;
	double gib = len / (double)(1ULL << 30), t;
	struct pm_buf *pb;
	void *p;

	p = malloc(len);
	memset(p, 1, len);
	t = now();
	CK(cudaHostRegister(p, len, cudaHostRegisterDefault));
	printf("reg: cudaHostRegister %.3f s/GiB", (now() - t) / gib);
	CK(cudaHostUnregister(p));
	free(p);
	t = now();
	CK(cudaHostAlloc(&p, len, cudaHostAllocDefault));
	printf(", cudaHostAlloc %.3f s/GiB", (now() - t) / gib);
	cudaFreeHost(p);
	t = now();
	if (pm_buf_alloc(ctx, len, NULL, &pb)) {
		fprintf(stderr, "\ngpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	printf(", pm_buf_alloc (fault + %s + register) %.3f s/GiB\n",
	       pm_pin_mode_name(pm_buf_pin_mode(pb)), (now() - t) / gib);
	pm_buf_free(ctx, pb);
	pm_close(ctx);
	return 0;
}

static int stream(const char *manifest, bool direct)
{
	struct pm_ctx *ctx = open_cuda();
	struct pm_manifest *m = load(manifest);
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	int ret;

	pm_stream_opts_init(&o);
	o.direct = direct ? PM_DIRECT_ON : PM_DIRECT_OFF;
	o.batch_bytes = 64 << 20;
	o.slots = 8;
	o.qd = 64;
	o.no_crc = true;
	if (pm_stream_create(ctx, m, &o, &s)) {
		fprintf(stderr, "gpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	while (!(ret = pm_stream_next(s, &b)) && b)
		pm_stream_release(s, b);
	pm_stream_stats(s, &st);
	printf("stream file->GPU (%s): %.2f GB/s, %.2f GB, consumer waited %.0f%%, copy p50 %.2f ms p99 %.2f ms%s%s\n",
	       direct ? "O_DIRECT, cold" : "buffered, page cache", st.gbps, st.bytes / 1e9,
	       100 * st.consumer_wait_s / st.elapsed_s, st.copy_lat.p50 * 1e3,
	       st.copy_lat.p99 * 1e3, ret ? " ERROR " : "", ret ? pm_stream_error(s) : "");
	pm_stream_destroy(s);
	pm_close(ctx);
	return ret != 0;
}

/* Burn about `cycles` GPU clocks: a consumer slow enough for a racing copy to show. */
__global__ void spin_kernel(long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
}

/* Devices other than ours with an active primary context (-1: cannot tell). */
static int foreign_contexts(void)
{
	typedef CUresult (*state_fn)(CUdevice, unsigned int *, int *);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	state_fn state = h ? (state_fn)dlsym(h, "cuDevicePrimaryCtxGetState") : NULL;
	int n = 0, count = 0;

	if (!state || cudaGetDeviceCount(&count) != cudaSuccess)
		return -1;
	for (int d = 0; d < count; d++) {
		unsigned int flags;
		int active = 0;

		if (d != device && state(d, &flags, &active) == CUDA_SUCCESS && active)
			n++;
	}
	return n;
}

static bool still_on_device(void)
{
	int d = -1;

	return cudaGetDevice(&d) == cudaSuccess && d == device;
}

static int consumer(const char *manifest)
{
	struct pm_ctx *ctx = open_cuda();
	struct pm_manifest *m = load(manifest);
	size_t n = pm_manifest_count(m);
	unsigned long long *d_sums, *sums = (unsigned long long *)calloc(n, sizeof(*sums));
	unsigned char *buf = NULL;
	size_t cap = 0;
	uint64_t items = 0, bad = 0, moved = 0;
	struct pm_stream_opts o;
	struct pm_stream_stats st;
	struct pm_stream *s;
	struct pm_batch *b;
	cudaStream_t cs;
	int *fds, ret, foreign, fails = 0;

	CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
	CK(cudaMalloc(&d_sums, n * sizeof(*d_sums)));
	CK(cudaMemset(d_sums, 0, n * sizeof(*d_sums)));
	CK(cudaDeviceSynchronize());
	pm_stream_opts_init(&o);
	o.batch_bytes = 16 << 20;
	o.slots = 3;		/* few slots: a copy racing the consumer would show */
	o.handoff = PM_HANDOFF_QUEUED;
	if (pm_stream_create(ctx, m, &o, &s)) {
		fprintf(stderr, "gpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	while (!(ret = pm_stream_next(s, &b)) && b) {
		moved += !still_on_device();
		if (pm_stream_batch_wait(s, b, cs)) {
			fprintf(stderr, "gpu-check: batch_wait: %s\n", pm_stream_error(s));
			return 1;
		}
		spin_kernel<<<1, 1, 0, cs>>>(2000000);
		for (uint32_t i = 0; i < b->nitems; i++) {
			const struct pm_batch_item *it = &b->items[i];

			checksum_kernel<<<64, 256, 0, cs>>>(
				(const unsigned char *)b->dev + it->slot_offset, it->length,
				d_sums + it->index);
		}
		CK(cudaGetLastError());
		if (pm_stream_release_on(s, b, cs)) {
			fprintf(stderr, "gpu-check: release_on: %s\n", pm_stream_error(s));
			return 1;
		}
		moved += !still_on_device();
	}
	CK(cudaStreamSynchronize(cs));
	CK(cudaMemcpy(sums, d_sums, n * sizeof(*sums), cudaMemcpyDeviceToHost));
	fds = (int *)calloc(pm_manifest_npaths(m), sizeof(int));
	for (uint32_t i = 0; i < pm_manifest_npaths(m); i++)
		fds[i] = open(pm_manifest_path(m, i), O_RDONLY);
	for (size_t i = 0; i < n; i++) {
		struct pm_item it;

		pm_manifest_item(m, i, &it);
		if (cap < it.length) {
			free(buf);
			cap = it.length;
			buf = (unsigned char *)malloc(cap);
		}
		if (pread(fds[it.path_id], buf, it.length, it.offset) != (ssize_t)it.length ||
		    host_checksum(buf, it.length) != sums[i])
			bad++;
		items++;
	}
	pm_stream_stats(s, &st);
	foreign = foreign_contexts();
	printf("device %d consumer (queued hand-off, release_on, slow kernel): %llu items, %llu overwritten or wrong -> %s\n",
	       device, (unsigned long long)items, (unsigned long long)bad,
	       !ret && !bad ? "PASS" : "FAIL");
	fails += ret || bad;
	if (ret)
		printf("stream error: %s\n", pm_stream_error(s));
	printf("device %d current device unchanged by every call: %s\n", device,
	       moved ? "FAIL" : "PASS");
	fails += moved != 0;
	printf("device %d contexts on other devices: %d -> %s\n", device, foreign,
	       foreign == 0 ? "PASS" : foreign < 0 ? "FAIL (cannot tell)" : "FAIL");
	fails += foreign != 0;
	printf("device %d slots on NUMA node %d, the GPU's node %d -> %s\n", device,
	       st.numa_node, st.gpu_numa_node,
	       st.gpu_numa_node < 0 ? "PASS (node unknown: one node)" :
	       st.numa_node == st.gpu_numa_node ? "PASS" : "FAIL");
	fails += st.gpu_numa_node >= 0 && st.numa_node != st.gpu_numa_node;
	pm_stream_destroy(s);
	pm_close(ctx);
	cudaFree(d_sums);
	cudaStreamDestroy(cs);
	free(sums);
	free(buf);
	return fails != 0;
}

int main(int argc, char **argv)
{
	bool direct = argc > 3 && !strcmp(argv[3], "direct");
	const char *lr = getenv("LOCAL_RANK");

	device = lr && *lr ? atoi(lr) : 0;
	CK(cudaSetDevice(device));	/* a training process's device is current */
	if (argc >= 3 && !strcmp(argv[1], "consumer"))
		return consumer(argv[2]);

	if (argc >= 3 && !strcmp(argv[1], "verify"))
		return verify(argv[2], direct);
	if (argc >= 2 && !strcmp(argv[1], "h2d"))
		return h2d();
	if (argc >= 2 && !strcmp(argv[1], "reg"))
		return reg();
	if (argc >= 3 && !strcmp(argv[1], "stream"))
		return stream(argv[2], direct);
	fprintf(stderr, "usage: [LOCAL_RANK=N] gpu-check verify|stream MANIFEST [direct] | consumer MANIFEST | h2d | reg\n");
	return 2;
}
