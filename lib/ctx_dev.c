// SPDX-License-Identifier: MIT
/*
 * The context's device-memory, copy and event calls: they forward to the
 * context's copy backend and turn its failures into the context's last
 * error.
 */
#include <errno.h>
#include <stdio.h>

#include "backend.h"
#include "ctx.h"

/* The context's backend in *bep, or -errno after recording why there is none (or why not here). */
static int backend_of(struct pm_ctx *ctx, const char *call, struct pm_backend **bep)
{
	int r = pm_ctx_check_owner(ctx, call);

	if (r)
		return r;
	*bep = ctx->backend;
	if (!ctx->backend)
		return pm_ctx_error(ctx, -ENODEV,
				    "%s: the context has no copy backend (PM_BACKEND_NONE)", call);
	return 0;
}

static int fail(struct pm_ctx *ctx, struct pm_backend *be, int r, const char *call)
{
	char detail[sizeof(be->err)];

	return pm_ctx_error(ctx, r, "%s on the %s backend failed: %s", call,
			    be->ops->name, pm_backend_last_error(be, detail, sizeof(detail)));
}

int pm_dev_alloc(struct pm_ctx *ctx, size_t len, void **devp)
{
	struct pm_backend *be;
	int r;

	if (!ctx || !devp)
		return -EINVAL;
	r = backend_of(ctx, "pm_dev_alloc", &be);
	if (r)
		return r;
	if (!len)
		return pm_ctx_error(ctx, -EINVAL, "pm_dev_alloc: length is zero");
	r = be->ops->dev_alloc(be, len, devp);
	return r ? fail(ctx, be, r, "pm_dev_alloc") : 0;
}

int pm_dev_free(struct pm_ctx *ctx, void *dev)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_dev_free", &be);
	if (r)
		return r;
	r = be->ops->dev_free(be, dev);
	return r ? fail(ctx, be, r, "pm_dev_free") : 0;
}

int pm_copy_h2d(struct pm_ctx *ctx, void *dst_dev, const void *src_host,
		size_t len, uint64_t *ev)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_copy_h2d", &be);
	if (r)
		return r;
	if (!dst_dev || !src_host)
		return pm_ctx_error(ctx, -EINVAL, "pm_copy_h2d: NULL %s",
				    dst_dev ? "source" : "destination");
	r = be->ops->copy_h2d(be, dst_dev, src_host, len, ev);
	return r ? fail(ctx, be, r, "pm_copy_h2d") : 0;
}

int pm_copy_d2h(struct pm_ctx *ctx, void *dst_host, const void *src_dev, size_t len)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_copy_d2h", &be);
	if (r)
		return r;
	if (!dst_host || !src_dev)
		return pm_ctx_error(ctx, -EINVAL, "pm_copy_d2h: NULL %s",
				    dst_host ? "source" : "destination");
	r = be->ops->copy_d2h(be, dst_host, src_dev, len);
	return r ? fail(ctx, be, r, "pm_copy_d2h") : 0;
}

int pm_event_query(struct pm_ctx *ctx, uint64_t ev)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_event_query", &be);
	if (r)
		return r;
	r = be->ops->event_query(be, ev);
	return r < 0 ? fail(ctx, be, r, "pm_event_query") : r;
}

int pm_event_wait(struct pm_ctx *ctx, uint64_t ev)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_event_wait", &be);
	if (r)
		return r;
	r = be->ops->event_wait(be, ev);
	return r ? fail(ctx, be, r, "pm_event_wait") : 0;
}

int pm_event_release(struct pm_ctx *ctx, uint64_t ev)
{
	struct pm_backend *be;
	int r;

	if (!ctx)
		return -EINVAL;
	r = backend_of(ctx, "pm_event_release", &be);
	if (r)
		return r;
	r = be->ops->event_release(be, ev);
	return r ? fail(ctx, be, r, "pm_event_release") : 0;
}

int pm_event_record_on(struct pm_ctx *ctx, void *stream, uint64_t *ev)
{
	struct pm_backend *be;
	int r = backend_of(ctx, "pm_event_record_on", &be);

	if (r)
		return r;
	r = be->ops->record_on(be, stream, ev);
	return r ? fail(ctx, be, r, "recording an event on the consumer's stream") : 0;
}

int pm_event_stream_wait(struct pm_ctx *ctx, void *stream, uint64_t ev)
{
	struct pm_backend *be;
	int r = backend_of(ctx, "pm_event_stream_wait", &be);

	if (r)
		return r;
	r = be->ops->stream_wait(be, stream, ev);
	return r ? fail(ctx, be, r, "ordering the consumer's stream after the copy") : 0;
}
