// SPDX-License-Identifier: MIT
/*
 * Choosing a copy backend, and the public device-memory and copy calls,
 * which forward to the context's backend and turn its failures into the
 * context's last error.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "ctx.h"

void pm_backend_init(struct pm_backend *be, const struct pm_backend_ops *ops)
{
	be->ops = ops;
	be->err[0] = '\0';
	be->pci_bus_id[0] = '\0';
	be->cuda_device = -1;
	pthread_mutex_init(&be->err_lock, NULL);
}

void pm_backend_fini(struct pm_backend *be)
{
	pthread_mutex_destroy(&be->err_lock);
}

int pm_backend_error(struct pm_backend *be, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&be->err_lock);
	va_start(ap, fmt);
	vsnprintf(be->err, sizeof(be->err), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&be->err_lock);
	return err;
}

char *pm_backend_last_error(struct pm_backend *be, char *out, size_t len)
{
	pthread_mutex_lock(&be->err_lock);
	snprintf(out, len, "%s", be->err);
	pthread_mutex_unlock(&be->err_lock);
	return out;
}

bool pm_gpu_present(const char *root, char *what, size_t len)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *d;

	root = root ? root : "";
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/gpus", root);
	d = opendir(path);
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	if (n) {
		snprintf(what, len, "%s lists %d", path, n);
		return true;
	}
	snprintf(path, sizeof(path), "%s/dev/nvidia0", root);
	if (!stat(path, &st) && S_ISCHR(st.st_mode)) {
		snprintf(what, len, "%s exists", path);
		return true;
	}
	snprintf(what, len, "no entries in %s/proc/driver/nvidia/gpus, no %s", root, path);
	return false;
}

int pm_backend_create(enum pm_backend_kind kind, const struct pm_backend_cfg *cfg,
		      struct pm_backend **bep, char *note, size_t note_len)
{
	char scratch[8], why[384], gpu[PATH_MAX + 32];
	int r;

	if (!note) {
		note = scratch;
		note_len = sizeof(scratch);
	}
	note[0] = '\0';
	*bep = NULL;
	switch (kind) {
	case PM_BACKEND_NONE:
		return 0;
	case PM_BACKEND_HOST:
		return pm_backend_host_create(bep);
	case PM_BACKEND_CUDA:
#ifdef PM_HAVE_CUDA
		r = pm_backend_cuda_create(cfg, bep, note, note_len);
		return r == -ELIBACC ? -ENODEV : r;
#else
		snprintf(note, note_len, "libpinmem was built without CUDA");
		return -EOPNOTSUPP;
#endif
	case PM_BACKEND_AUTO:
#ifdef PM_HAVE_CUDA
		r = pm_backend_cuda_create(cfg, bep, why, sizeof(why));
		if (!r)
			return 0;
#else
		r = -ELIBACC;
		snprintf(why, sizeof(why), "libpinmem was built without CUDA");
#endif
		/* "device" pointers in host memory make GPU kernels fault: never silently */
		if (pm_gpu_present(cfg ? cfg->root : NULL, gpu, sizeof(gpu))) {
			/* where to point it only when no runtime could be loaded */
			snprintf(note, note_len,
				 "an NVIDIA GPU is present (%s) but the cuda backend is not usable: %s%s",
				 gpu, why, r != -ELIBACC ? "" :
				 "; set PINMEM_CUDART (or cuda_library) to a libcudart.so, e.g. the one a pip-installed PyTorch carries in site-packages/nvidia/cu13/lib/ (CUDA 13 wheels) or site-packages/nvidia/cuda_runtime/lib/ (CUDA 12), or ask for the host backend");
			return -ENODEV;
		}
		snprintf(note, note_len, "%s; no NVIDIA GPU here (%s), so copies go to host memory",
			 why, gpu);
		return pm_backend_host_create(bep);
	}
	return -EINVAL;
}

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
