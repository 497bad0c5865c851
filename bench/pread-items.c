// SPDX-License-Identifier: MIT
/*
 * The tight loop pinstream is measured against on many small files: for
 * each item of a manifest, open its file, pread the item into pinned memory
 * (a libpinmem buffer), close.  One thread, no io_uring.
 * Usage: pread-items MANIFEST  -> "items N bytes B seconds S items/s R"
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinmem.h"
#include "pinmem_stream.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct pm_manifest *m;
	struct pm_ctx *ctx;
	struct pm_buf *buf;
	uint64_t bytes = 0, largest = 0;
	char err[512];
	double t0;
	size_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MANIFEST\n", argv[0]);
		return 2;
	}
	if (pm_manifest_create(&m) || pm_manifest_load(m, argv[1], err, sizeof(err))) {
		fprintf(stderr, "pread-items: %s\n", err);
		return 1;
	}
	n = pm_manifest_count(m);
	for (size_t i = 0; i < n; i++) {
		struct pm_item it;

		pm_manifest_item(m, i, &it);
		if (it.length > largest)
			largest = it.length;
	}
	if (pm_open(&ctx, NULL) || pm_buf_alloc(ctx, largest, NULL, &buf)) {
		fprintf(stderr, "pread-items: no pinned buffer\n");
		return 1;
	}
	t0 = now();
	for (size_t i = 0; i < n; i++) {
		struct pm_item it;
		int fd;

		pm_manifest_item(m, i, &it);
		fd = open(it.path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || pread(fd, pm_buf_ptr(buf), it.length, (off_t)it.offset) !=
			      (ssize_t)it.length) {
			fprintf(stderr, "pread-items: %s: %s\n", it.path, strerror(errno));
			return 1;
		}
		close(fd);
		bytes += it.length;
	}
	t0 = now() - t0;
	printf("items %zu bytes %llu seconds %.3f items/s %.0f\n", n,
	       (unsigned long long)bytes, t0, n / t0);
	pm_buf_free(ctx, buf);
	pm_close(ctx);
	pm_manifest_destroy(m);
	return 0;
}
