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
 *
 * usage: gpu-check verify|h2d|reg|stream MANIFEST_OR_NOTHING [direct]
 * Linked with -cudart shared so libpinmem's dlopen finds this same runtime.
 */
#include <cuda_runtime.h>
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

static struct pm_ctx *open_cuda(void)
{
	struct pm_open_opts oo;
	struct pm_ctx_info ci;
	struct pm_ctx *ctx;
	char err[320] = "";

	memset(&oo, 0, sizeof(oo));
	oo.backend = PM_BACKEND_CUDA;
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

	CK(cudaMalloc(&dev, len));
	if (pm_buf_alloc(ctx, len, NULL, &pb)) {
		fprintf(stderr, "gpu-check: %s\n", pm_ctx_last_error(ctx));
		return 1;
	}
	pageable = malloc(len);
	memset(pageable, 1, len);
	CK(cudaHostAlloc(&hostalloc, len, cudaHostAllocDefault));
	memset(hostalloc, 1, len);
	printf("h2d 256 MiB x 10: pinmem slot (%s%s) %.1f GB/s, pageable %.1f GB/s, cudaHostAlloc %.1f GB/s\n",
	       pm_pin_mode_name(pm_buf_pin_mode(pb)),
	       pm_buf_backend_registered(pb) ? "+cudaHostRegister" : ", NOT registered",
	       h2d_gbps(pm_buf_ptr(pb), dev, len, 10), h2d_gbps(pageable, dev, len, 10),
	       h2d_gbps(hostalloc, dev, len, 10));
	cudaFreeHost(hostalloc);
	free(pageable);
	pm_buf_free(ctx, pb);
	cudaFree(dev);
	pm_close(ctx);
	return 0;
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

int main(int argc, char **argv)
{
	bool direct = argc > 3 && !strcmp(argv[3], "direct");

	if (argc >= 3 && !strcmp(argv[1], "verify"))
		return verify(argv[2], direct);
	if (argc >= 2 && !strcmp(argv[1], "h2d"))
		return h2d();
	if (argc >= 2 && !strcmp(argv[1], "reg"))
		return reg();
	if (argc >= 3 && !strcmp(argv[1], "stream"))
		return stream(argv[2], direct);
	fprintf(stderr, "usage: gpu-check verify|stream MANIFEST [direct] | h2d | reg\n");
	return 2;
}
