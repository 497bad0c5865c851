// SPDX-License-Identifier: MIT
/*
 * io_uring fixed buffers: the kernel takes at most 1 GiB per registered
 * iovec, so a buffer is split into iovecs of at most 1 GiB; with a unit
 * (a stream's slot size) each iovec holds whole units, so a READ_FIXED into
 * one unit never straddles two fixed buffers.
 */
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ctx.h"

static size_t chunk_of(size_t unit)
{
	return unit ? PM_URING_IOVEC_MAX / unit * unit : PM_URING_IOVEC_MAX;
}

int pm_buf_iovecs(const struct pm_buf *buf, size_t unit, struct iovec *iov,
		  unsigned int max)
{
	size_t chunk, off, n, i;

	if (!buf || (max && !iov) || unit > PM_URING_IOVEC_MAX)
		return -EINVAL;
	chunk = chunk_of(unit);
	n = (buf->size + chunk - 1) / chunk;
	if (n > INT32_MAX)
		return -EOVERFLOW;
	for (i = 0, off = 0; i < n && i < max; i++, off += chunk) {
		iov[i].iov_base = (uint8_t *)buf->ptr + off;
		iov[i].iov_len = buf->size - off < chunk ? buf->size - off : chunk;
	}
	return (int)n;
}

int pm_buf_register_uring(struct pm_buf *buf, struct io_uring *ring, size_t unit)
{
	struct pm_uring_reg *reg;
	struct pm_ctx *ctx;
	struct iovec *iov;
	char sz[32];
	int n, r;

	if (!buf || !ring)
		return -EINVAL;
	ctx = buf->ctx;
	n = pm_buf_iovecs(buf, unit, NULL, 0);
	if (n < 0)
		return pm_ctx_error(ctx, n, "pm_buf_register_uring: unit %zu is over 1 GiB", unit);
	iov = calloc((size_t)n, sizeof(*iov));
	reg = calloc(1, sizeof(*reg));
	if (!iov || !reg) {
		free(iov);
		free(reg);
		return pm_ctx_error(ctx, -ENOMEM, "pm_buf_register_uring: out of memory");
	}
	pm_buf_iovecs(buf, unit, iov, (unsigned int)n);
	r = io_uring_register_buffers(ring, iov, (unsigned int)n);
	free(iov);
	if (r) {
		free(reg);
		pm_fmt_bytes(sz, sizeof(sz), buf->size);
		if (r == -EBUSY)
			return pm_ctx_error(ctx, r,
					    "io_uring already has fixed buffers; register several buffers at once from pm_buf_iovecs()");
		if (r == -ENOMEM)
			return pm_ctx_error(ctx, r,
					    "io_uring refused to register %s: it charges RLIMIT_MEMLOCK too; raise it with ulimit -l",
					    sz);
		return pm_ctx_error(ctx, r, "io_uring_register_buffers of %s (%d iovecs) failed: %s",
				    sz, n, strerror(-r));
	}
	reg->ring = ring;
	pthread_mutex_lock(&ctx->lock);
	reg->next = buf->rings;
	buf->rings = reg;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

int pm_buf_unregister_uring(struct pm_buf *buf, struct io_uring *ring)
{
	struct pm_uring_reg **pp, *reg;
	struct pm_ctx *ctx;
	int r;

	if (!buf || !ring)
		return -EINVAL;
	ctx = buf->ctx;
	pthread_mutex_lock(&ctx->lock);
	for (pp = &buf->rings; *pp && (*pp)->ring != ring; pp = &(*pp)->next)
		;
	reg = *pp;
	pthread_mutex_unlock(&ctx->lock);
	if (!reg)
		return pm_ctx_error(ctx, -EINVAL,
				    "pm_buf_unregister_uring: the buffer is not registered with this ring");
	r = io_uring_unregister_buffers(ring);
	if (r)
		return pm_ctx_error(ctx, r, "io_uring_unregister_buffers failed: %s",
				    strerror(-r));
	pthread_mutex_lock(&ctx->lock);
	for (pp = &buf->rings; *pp != reg; pp = &(*pp)->next)
		;
	*pp = reg->next;
	pthread_mutex_unlock(&ctx->lock);
	free(reg);
	return 0;
}
