/* SPDX-License-Identifier: MIT */
/*
 * Internal view of a context, shared by the library's files.
 *
 * Every system call that touches /dev/pinmem or locks memory goes through
 * struct pm_sys_ops, so host unit tests can stand in for the module (which
 * cannot be faked as a character device) and check the refusal messages and
 * fallback decisions; the real device is exercised in the VM.
 */
#ifndef PM_CTX_H
#define PM_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>
#include <stdint.h>

#include "pinmem.h"
#include "uapi/pinmem.h"

struct pm_backend;

struct pm_sys_ops {
	int (*open)(const char *path, int flags);	/* fd or -errno */
	int (*close)(int fd);
	int (*ioctl)(int fd, unsigned long req, void *arg);	/* 0 or -errno */
	int (*mlock)(const void *addr, size_t len);	/* 0 or -errno */
	int (*munlock)(const void *addr, size_t len);
	/* RLIMIT_MEMLOCK soft limit (UINT64_MAX: unlimited), bytes locked now. */
	int (*memlock)(uint64_t *limit, uint64_t *locked);
	/* Prefix of the /proc, /sys and /dev paths probed (tests); NULL: the real ones. */
	const char *root;
};

/* The real system calls. */
extern const struct pm_sys_ops pm_sys_default;

struct pm_ctx {
	const struct pm_sys_ops *sys;
	int dev_fd;			/* -1: no module */
	struct pinmem_version ver;
	size_t page_size;
	struct pm_backend *backend;	/* NULL: PM_BACKEND_NONE */
	const char *backend_name;
	bool uring, thp, hugetlb;
	uint64_t hugetlb_page_size, hugetlb_free_pages;
	unsigned int cpus;
	pid_t pid;			/* the process that opened it; a forked child may not use it */
	int gpu_node;			/* NUMA node of the cuda device, -1 unknown or none */

	uint64_t serial;		/* unique per pm_open: files each thread's sentence */
	pthread_mutex_t lock;		/* bufs */
	struct pm_buf *bufs;		/* live buffers, newest first */
	char module_note[192];
	char backend_note[640];
	char numa_note[192];		/* why gpu_node is -1, "" otherwise */
};

/* pm_open with other system calls (tests). */
int pm_open_sys(struct pm_ctx **ctxp, const struct pm_open_opts *opts,
		const struct pm_sys_ops *sys);

/* Record the sentence for pm_ctx_last_error(); returns err (negative). */
int pm_ctx_error(struct pm_ctx *ctx, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * 0, or -ECHILD with the sentence recorded when called in a process forked
 * after pm_open: the child has no slot mappings (MADV_DONTFORK), no library
 * threads and no CUDA state, and its calls would corrupt the parent's.
 */
int pm_ctx_check_owner(struct pm_ctx *ctx, const char *call);
/* True in a process forked after pm_open (no sentence). */
bool pm_ctx_forked(const struct pm_ctx *ctx);

/* "8.0 GiB", "64.0 MiB", "512 B": one decimal, binary units. */
char *pm_fmt_bytes(char *out, size_t len, uint64_t bytes);

#endif /* PM_CTX_H */
