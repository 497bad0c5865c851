/* SPDX-License-Identifier: MIT */
/*
 * Shared by the library's unit tests: a stand-in for /dev/pinmem and mlock
 * behind struct pm_sys_ops (a character device cannot be faked, so the
 * library routes those calls through an ops table), and probes of this
 * process's mappings and locked memory to show that nothing leaked.
 *
 * The stand-in module keeps real budgets (global, per user, RLIMIT) with
 * use and limits set by the test, refuses with the uapi's errnos, and
 * answers STATS with the same numbers, so refusal sentences are built from
 * the path the real module takes.
 */
#ifndef PM_TEST_H
#define PM_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ctx.h"

#define FAKE_FD 1000
#define FAKE_REGIONS 64

struct fake_sys {
	int open_err;			/* open() result when < 0 */
	int opens, closes;
	struct pinmem_version ver;
	int version_err;
	int pin_err;			/* forced PIN result when != 0 */
	uint32_t pin_reason;		/* pinmem_pin.refused written with it */
	uint64_t user_locked;		/* STATS user_locked_bytes */
	/* PINMEM_IOC_CGROUP answers these for any path (or cg_err when != 0);
	 * STATS names cg_refuser. */
	uint64_t cg_id, cg_used, cg_limit, cg_refuser;
	int cg_err;
	uint64_t global_used, global_limit;
	uint64_t user_used, user_limit;
	uint64_t rlimit_used, rlimit_limit;
	uint64_t handles[FAKE_REGIONS], lengths[FAKE_REGIONS];
	int regions, pins, unpins, unpin_unknown;
	uint64_t refused_global, refused_user, refused_rlimit, refused_fault;
	uint64_t next_handle;
	int mlock_err;			/* forced mlock result when != 0 */
	int mlocks, munlocks;
	uint64_t memlock_limit, memlock_locked;
	void (*on_call)(const char *what);	/* ordering probe, may be NULL */
};

/* The one stand-in of the test program. */
static struct fake_sys fake __attribute__((unused));

static inline void fake_reset(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.ver.abi_major = PINMEM_ABI_MAJOR;
	fake.ver.abi_minor = PINMEM_ABI_MINOR;
	fake.ver.page_size = 4096;
	fake.global_limit = fake.user_limit = fake.rlimit_limit = PINMEM_UNLIMITED;
	fake.memlock_limit = UINT64_MAX;
	fake.next_handle = 1;
}

static inline int fake_open(const char *path, int flags)
{
	fake.opens++;
	return fake.open_err ? fake.open_err : FAKE_FD;
}

static inline int fake_close(int fd)
{
	assert_int_equal(fd, FAKE_FD);
	fake.closes++;
	return 0;
}

static inline bool fake_over(uint64_t used, uint64_t limit, uint64_t len)
{
	return limit != PINMEM_UNLIMITED && used + len > limit;
}

static inline int fake_pin(struct pinmem_pin *p)
{
	if (p->flags || p->pad || !p->length || p->addr % 4096 || p->length % 4096)
		return -EINVAL;
	/* A module of ABI 1.0 writes no reason. */
	bool why = fake.ver.abi_minor >= 1;

	if (fake.pin_err) {
		fake.refused_fault++;
		p->refused = fake.pin_reason;
		return fake.pin_err;
	}
	if (fake_over(fake.global_used, fake.global_limit, p->length)) {
		fake.refused_global++;
		p->refused = why ? PINMEM_REFUSED_GLOBAL : 0;
		return -PINMEM_ERR_GLOBAL;
	}
	if (fake_over(fake.user_used, fake.user_limit, p->length)) {
		fake.refused_user++;
		p->refused = why ? PINMEM_REFUSED_USER : 0;
		return -PINMEM_ERR_USER;
	}
	if (fake_over(fake.rlimit_used, fake.rlimit_limit, p->length)) {
		fake.refused_rlimit++;
		p->refused = why ? PINMEM_REFUSED_RLIMIT : 0;
		return -PINMEM_ERR_RLIMIT;
	}
	assert_true(fake.regions < FAKE_REGIONS);
	fake.global_used += p->length;
	fake.user_used += p->length;
	fake.rlimit_used += p->length;
	p->handle = fake.next_handle++;
	p->pages = p->length / 4096;
	p->segments = 3;
	p->huge_bytes = 0;
	fake.handles[fake.regions] = p->handle;
	fake.lengths[fake.regions++] = p->length;
	fake.pins++;
	if (fake.on_call)
		fake.on_call("pin");
	return 0;
}

static inline int fake_unpin(struct pinmem_unpin *u)
{
	int i;

	if (fake.on_call)
		fake.on_call("unpin");
	for (i = 0; i < fake.regions; i++)
		if (fake.handles[i] == u->handle) {
			fake.global_used -= fake.lengths[i];
			fake.user_used -= fake.lengths[i];
			fake.rlimit_used -= fake.lengths[i];
			fake.handles[i] = fake.handles[--fake.regions];
			fake.lengths[i] = fake.lengths[fake.regions];
			fake.unpins++;
			return 0;
		}
	fake.unpin_unknown++;
	return -ENOENT;
}

static inline int fake_ioctl(int fd, unsigned long req, void *arg)
{
	struct pinmem_stats *st = arg;

	assert_int_equal(fd, FAKE_FD);
	switch (req) {
	case PINMEM_IOC_GET_VERSION:
		if (fake.version_err)
			return fake.version_err;
		memcpy(arg, &fake.ver, sizeof(fake.ver));
		return 0;
	case PINMEM_IOC_PIN:
		return fake_pin(arg);
	case PINMEM_IOC_UNPIN:
		return fake_unpin(arg);
	case PINMEM_IOC_CGROUP: {
		struct pinmem_cgroup *cg = arg;

		if (fake.cg_err)
			return fake.cg_err;
		cg->cgroup_id = fake.cg_id;
		cg->pinned_bytes = fake.cg_used;
		cg->limit_bytes = fake.cg_limit;
		return 0;
	}
	case PINMEM_IOC_STATS:
		memset(st, 0, sizeof(*st));
		st->global.pinned_bytes = fake.global_used;
		st->global.limit_bytes = fake.global_limit;
		st->user.pinned_bytes = fake.user_used;
		st->user.limit_bytes = fake.user_limit;
		st->file.limit_bytes = fake.rlimit_limit;
		st->file.refused_global = fake.refused_global;
		st->file.refused_user = fake.refused_user;
		st->file.refused_rlimit = fake.refused_rlimit;
		st->file.refused_fault = fake.refused_fault;
		st->mm_pinned_bytes = fake.rlimit_used;
		st->user_locked_bytes = fake.user_locked;
		st->refused_cgroup_id = fake.cg_refuser;
		st->file.regions = (uint64_t)fake.regions;
		return 0;
	}
	return -ENOTTY;
}

static inline int fake_mlock(const void *addr, size_t len)
{
	fake.mlocks++;
	if (fake.mlock_err)
		return fake.mlock_err;
	if (fake.on_call)
		fake.on_call("mlock");
	return 0;
}

static inline int fake_munlock(const void *addr, size_t len)
{
	fake.munlocks++;
	if (fake.on_call)
		fake.on_call("munlock");
	return 0;
}

static inline int fake_memlock(uint64_t *limit, uint64_t *locked)
{
	*limit = fake.memlock_limit;
	*locked = fake.memlock_locked;
	return 0;
}

static const struct pm_sys_ops fake_ops __attribute__((unused)) = {
	.open = fake_open,
	.close = fake_close,
	.ioctl = fake_ioctl,
	.mlock = fake_mlock,
	.munlock = fake_munlock,
	.memlock = fake_memlock,
};

/*
 * Mappings in /proc/self/maps: unchanged across a call means it left no
 * mapping behind.  Under ASan only mappings with a name count (files, the
 * io_uring rings): the sanitizer's allocator and thread bookkeeping keep
 * splitting and merging anonymous mappings, so their number moves without a
 * leak; the plain unit-check run counts anonymous buffers too.
 */
static inline int count_maps(void)
{
	char line[512], name[256];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		name[0] = '\0';
		sscanf(line, "%*s %*s %*s %*s %*s %255s", name);
#if defined(__SANITIZE_ADDRESS__)
		if (!name[0])
			continue;
#endif
		n++;
	}
	fclose(f);
	return n;
}

/*
 * VmSize of this process in bytes.  A leaked buffer mapping grows it by the
 * buffer's size; sanitizer runtimes split and join their reserved regions
 * (so the number of mappings moves) without changing it.
 */
static inline uint64_t vm_size(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

/* Nothing of at least 256 KiB was left mapped since vm_size() said before. */
#define assert_no_mapping_leak(before) assert_true(vm_size() < (before) + 256 * 1024)

/* VmLck of this process in bytes. */
static inline uint64_t vm_locked(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

/* A context on the stand-in module and the host backend. */
static inline struct pm_ctx *fake_ctx(unsigned int flags, enum pm_backend_kind be)
{
	struct pm_open_opts o = { .flags = flags, .backend = be };
	struct pm_ctx *ctx = NULL;

	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), 0);
	return ctx;
}

/* Give up CAP_IPC_LOCK, so RLIMIT_MEMLOCK applies to this (root) process. */
static inline int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1U << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1U << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d) ? -1 : 0;
}

/* Run fn in a child process; its exit status (0 = passed), or -1. */
static inline int in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (!pid)
		_exit(fn());
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Deterministic pseudo-random bytes (xorshift) from seed: test file contents. */
static inline void test_fill(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
}

/* Open file descriptors of this process (entries of /proc/self/fd, "." and ".." included). */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/*
 * A new directory "name.XXXXXX" next to the test binary, on the checkout's
 * file system (not /tmp, which may be a tmpfs without O_DIRECT); 0 or -1.
 */
static inline int test_dir_make(char *dir, size_t len, const char *name)
{
	char exe[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	if ((size_t)snprintf(dir, len, "%s/%s.XXXXXX", exe, name) >= len)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

#endif /* PM_TEST_H */
