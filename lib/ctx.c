// SPDX-License-Identifier: MIT
/*
 * The context: what this machine offers (/dev/pinmem and its ABI, a copy
 * backend, io_uring, huge pages), the live buffers, and the last error.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "buf.h"
#include "ctx.h"
#include "numa.h"
#include "refusal.h"

/*
 * Sentences are kept per thread, like errno: two threads failing on one
 * context at the same time each read their own, and a reader never races a
 * writer.  A thread remembers the last few contexts it failed on; a context's
 * serial (never reused) tells a new context at a freed one's address apart.
 */
#define ERR_CTXS 4

struct thread_err {
	uint64_t serial;
	char msg[PM_SENTENCE_MAX];	/* room for a backend note (640) and its call */
};

static __thread struct thread_err thread_errs[ERR_CTXS];
static __thread unsigned int thread_errs_next;

static struct thread_err *thread_err(const struct pm_ctx *ctx, bool make)
{
	struct thread_err *e;

	for (unsigned int i = 0; i < ERR_CTXS; i++)
		if (thread_errs[i].serial == ctx->serial)
			return &thread_errs[i];
	if (!make)
		return NULL;
	e = &thread_errs[thread_errs_next++ % ERR_CTXS];
	e->serial = ctx->serial;
	return e;
}

int pm_ctx_error(struct pm_ctx *ctx, int err, const char *fmt, ...)
{
	struct thread_err *e = thread_err(ctx, true);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return err;
}

bool pm_ctx_forked(const struct pm_ctx *ctx)
{
	return getpid() != ctx->pid;
}

int pm_ctx_check_owner(struct pm_ctx *ctx, const char *call)
{
	if (!pm_ctx_forked(ctx))
		return 0;
	return pm_ctx_error(ctx, -ECHILD,
			    "%s: this context belongs to process %d and this is a process forked from it; its pinned slots are not mapped here (MADV_DONTFORK) and its threads and CUDA state do not exist here: open a new context in this process with PM_BACKEND_HOST or PM_BACKEND_NONE (CUDA cannot be used in a process forked after it was initialised), or start workers with the spawn method",
			    call, (int)ctx->pid);
}

void pm_ctx_buf_env(const struct pm_ctx *ctx, struct pm_buf_env *env)
{
	env->pinner.sys = ctx->sys;
	env->pinner.dev_fd = ctx->dev_fd;
	env->pinner.abi_minor = ctx->ver.abi_minor;
	env->pinner.module_note = ctx->module_note;
	env->backend = ctx->backend;
}

void pm_ctx_page_sizes(const struct pm_ctx *ctx, struct pm_page_sizes *ps)
{
	ps->page_size = ctx->page_size;
	ps->hugetlb_page_size = ctx->hugetlb_page_size;
	ps->hugetlb_free_pages = ctx->hugetlb_free_pages;
	ps->thp = ctx->thp;
}

int pm_refuse_module(struct pm_ctx *ctx, int err, size_t len,
		     const struct pinmem_stats *before, uint32_t reason)
{
	char msg[PM_SENTENCE_MAX];

	err = pm_refusal_module(ctx->sys, ctx->dev_fd, err, len, before, reason, msg,
				sizeof(msg));
	return pm_ctx_error(ctx, err, "%s", msg);
}

int pm_refuse_mlock(struct pm_ctx *ctx, int err, size_t len)
{
	char msg[PM_SENTENCE_MAX];

	err = pm_refusal_mlock(ctx->sys, err, len, msg, sizeof(msg));
	return pm_ctx_error(ctx, err, "%s", msg);
}

const char *pm_ctx_last_error(struct pm_ctx *ctx)
{
	const struct thread_err *e;

	if (!ctx)
		return "no context";
	e = thread_err(ctx, false);
	return e ? e->msg : "";
}

static bool read_line(const char *path, char *line, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

static void probe_pages(struct pm_ctx *ctx)
{
	unsigned long long v;
	char line[160];
	FILE *f;

	if (read_line("/sys/kernel/mm/transparent_hugepage/enabled", line, sizeof(line)))
		ctx->thp = strstr(line, "[always]") || strstr(line, "[madvise]");
	f = fopen("/proc/meminfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			ctx->hugetlb_free_pages = v;
		else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			ctx->hugetlb_page_size = (uint64_t)v << 10;
	}
	fclose(f);
	ctx->hugetlb = ctx->hugetlb_free_pages && ctx->hugetlb_page_size;
}

static bool probe_uring(void)
{
	struct io_uring ring;

	if (io_uring_queue_init(2, &ring, 0))
		return false;
	io_uring_queue_exit(&ring);
	return true;
}

/* Open the module and check its ABI; a missing module is not an error. */
static int open_module(struct pm_ctx *ctx, const struct pm_open_opts *o)
{
	const char *path = o->device ? o->device : PINMEM_DEVICE;
	bool need = o->flags & PM_OPEN_REQUIRE_MODULE;
	int fd, r;

	if (o->flags & PM_OPEN_NO_MODULE) {
		snprintf(ctx->module_note, sizeof(ctx->module_note),
			 "not used (PM_OPEN_NO_MODULE)");
		return 0;
	}
	fd = ctx->sys->open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(ctx->module_note, sizeof(ctx->module_note), "%s: %s%s",
			 path, strerror(-fd),
			 fd == -ENOENT ? " (is pinmem.ko loaded?)" : "");
		if (need)
			return pm_ctx_error(ctx, fd == -ENOENT ? -ENODEV : fd,
					    "the pinmem module is required but %s",
					    ctx->module_note);
		return 0;
	}
	memset(&ctx->ver, 0, sizeof(ctx->ver));
	r = ctx->sys->ioctl(fd, PINMEM_IOC_GET_VERSION, &ctx->ver);
	if (r) {
		ctx->sys->close(fd);
		snprintf(ctx->module_note, sizeof(ctx->module_note),
			 "%s: GET_VERSION failed: %s", path, strerror(-r));
		if (need)
			return pm_ctx_error(ctx, r, "the pinmem module is required but %s",
					    ctx->module_note);
		return 0;
	}
	if (ctx->ver.abi_major != PINMEM_ABI_MAJOR) {
		ctx->sys->close(fd);
		return pm_ctx_error(ctx, -EPROTO,
				    "%s speaks pinmem ABI %u.%u but this libpinmem speaks ABI %u.%u; install matching versions of the module and the library",
				    path, ctx->ver.abi_major, ctx->ver.abi_minor,
				    PINMEM_ABI_MAJOR, PINMEM_ABI_MINOR);
	}
	if (ctx->ver.page_size != ctx->page_size) {
		ctx->sys->close(fd);
		return pm_ctx_error(ctx, -EPROTO,
				    "%s reports %u-byte pages but this process sees %zu-byte pages",
				    path, ctx->ver.page_size, ctx->page_size);
	}
	ctx->dev_fd = fd;
	return 0;
}

static const char *backend_names[] = {
	[PM_BACKEND_AUTO] = "auto", [PM_BACKEND_HOST] = "host",
	[PM_BACKEND_CUDA] = "cuda", [PM_BACKEND_NONE] = "none",
};

/* Context serials, from 1: what a thread's sentences are filed under. */
static uint64_t ctx_serials;

int pm_open_sys(struct pm_ctx **ctxp, const struct pm_open_opts *opts,
		const struct pm_sys_ops *sys)
{
	static const struct pm_open_opts defaults;
	const struct pm_open_opts *o = opts ? opts : &defaults;
	struct pm_backend_cfg cfg;
	struct pm_ctx *ctx;
	long v;
	int r;

	if (!ctxp || !sys) {
		r = -EINVAL;
		if (o->errbuf && o->errbuf_len)
			snprintf(o->errbuf, o->errbuf_len, "pm_open: no place for the context");
		return r;
	}
	*ctxp = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->sys = sys;
	ctx->serial = __atomic_add_fetch(&ctx_serials, 1, __ATOMIC_RELAXED);
	ctx->dev_fd = -1;
	ctx->pid = getpid();
	pthread_mutex_init(&ctx->lock, NULL);
	v = sysconf(_SC_PAGESIZE);
	ctx->page_size = v > 0 ? (size_t)v : 4096;
	v = sysconf(_SC_NPROCESSORS_ONLN);
	ctx->cpus = v > 0 ? (unsigned int)v : 1;

	if (o->flags & ~(PM_OPEN_NO_MODULE | PM_OPEN_REQUIRE_MODULE) ||
	    (o->flags & PM_OPEN_NO_MODULE && o->flags & PM_OPEN_REQUIRE_MODULE)) {
		r = pm_ctx_error(ctx, -EINVAL, "pm_open: unknown or contradictory flags 0x%x",
				 o->flags);
		goto fail;
	}
	if (o->reserved[0] || o->reserved[1] || o->reserved[2] || o->reserved[3]) {
		r = pm_ctx_error(ctx, -EINVAL, "pm_open: reserved options must be zero");
		goto fail;
	}
	if ((unsigned int)o->backend > PM_BACKEND_NONE) {
		r = pm_ctx_error(ctx, -EINVAL, "pm_open: unknown backend %d", (int)o->backend);
		goto fail;
	}
	r = open_module(ctx, o);
	if (r)
		goto fail;

	cfg.cuda_library = o->cuda_library;
	cfg.cuda_device = o->cuda_device;
	cfg.root = sys->root;
	r = pm_backend_create(o->backend, &cfg, &ctx->backend, ctx->backend_note,
			      sizeof(ctx->backend_note));
	if (r) {
		r = pm_ctx_error(ctx, r, "copy backend %s unavailable: %s",
				 backend_names[o->backend], ctx->backend_note);
		goto fail;
	}
	ctx->backend_name = ctx->backend ? ctx->backend->ops->name : "none";
	ctx->gpu_node = pm_numa_gpu_node(sys->root, ctx->backend ? ctx->backend->pci_bus_id : NULL,
					 ctx->numa_note, sizeof(ctx->numa_note));
	ctx->uring = probe_uring();
	probe_pages(ctx);
	*ctxp = ctx;
	return 0;
fail:
	if (o->errbuf && o->errbuf_len)
		snprintf(o->errbuf, o->errbuf_len, "%s", pm_ctx_last_error(ctx));
	pm_close(ctx);
	return r;
}

int pm_open(struct pm_ctx **ctxp, const struct pm_open_opts *opts)
{
	return pm_open_sys(ctxp, opts, &pm_sys_default);
}

void pm_close(struct pm_ctx *ctx)
{
	struct pm_buf_env env;
	struct pm_buf *b;

	if (!ctx)
		return;
	if (pm_ctx_forked(ctx)) {
		/* the parent's pins, registrations and threads are not ours to undo */
		while ((b = ctx->bufs)) {
			ctx->bufs = b->next;
			pm_buf_forget(b);
		}
		if (ctx->dev_fd >= 0)
			close(ctx->dev_fd);	/* this process's copy of the fd only */
		pthread_mutex_destroy(&ctx->lock);
		free(ctx);
		return;
	}
	pm_ctx_buf_env(ctx, &env);
	while ((b = ctx->bufs)) {
		ctx->bufs = b->next;
		pm_buf_release(&env, b);
	}
	if (ctx->backend)
		ctx->backend->ops->destroy(ctx->backend);
	if (ctx->dev_fd >= 0)
		ctx->sys->close(ctx->dev_fd);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

int pm_ctx_info(struct pm_ctx *ctx, struct pm_ctx_info *info)
{
	if (!ctx || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->module = ctx->dev_fd >= 0;
	if (info->module) {
		info->module_abi_major = ctx->ver.abi_major;
		info->module_abi_minor = ctx->ver.abi_minor;
	}
	info->module_note = ctx->module_note;
	info->backend = ctx->backend_name;
	info->backend_note = ctx->backend_note;
	info->uring = ctx->uring;
	info->thp = ctx->thp;
	info->hugetlb = ctx->hugetlb;
	info->hugetlb_page_size = ctx->hugetlb_page_size;
	info->hugetlb_free_pages = ctx->hugetlb_free_pages;
	info->page_size = (uint32_t)ctx->page_size;
	info->cuda_device = ctx->backend ? ctx->backend->cuda_device : -1;
	info->gpu_numa_node = ctx->gpu_node;
	return 0;
}
