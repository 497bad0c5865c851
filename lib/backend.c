// SPDX-License-Identifier: MIT
/*
 * Choosing a copy backend, and what every backend shares: its error detail
 * and the probe for an NVIDIA GPU.  The context's device-memory and copy
 * calls, which forward to its backend, are in ctx_dev.c.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"

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
