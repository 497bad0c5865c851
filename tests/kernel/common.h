/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the tests/kernel programs, which run as root inside the
 * test VM against the real pinmem.ko: TAP output, ioctl wrappers that return
 * 0 or -errno, the module parameters, /proc/driver/pinmem/stats, /proc/vmstat,
 * and running a function as another user with chosen capabilities.
 */
#ifndef PINMEM_KTEST_COMMON_H
#define PINMEM_KTEST_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "../../include/uapi/pinmem.h"

#define KT_PAGE		4096UL
#define KT_MIB		(1024UL * 1024)
#define KT_HPAGE	(2 * KT_MIB)
/* Group of /dev/pinmem in the VM (tests/vm/init.sh), as udev sets it. */
#define KT_PINMEM_GID	990

/* TAP: one line per case; kt_done() prints the plan and the exit status. */
int kt_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kt_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A case the kernel cannot run (a feature not built in): TAP "# SKIP". */
void kt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kt_bail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
int kt_done(void);
/* kt_ok() of "got == want", printing both when they differ. */
int kt_eq(long long got, long long want, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* /dev/pinmem; kt_open() bails out if the device cannot be opened. */
int kt_open(void);
int kt_ioctl(int fd, unsigned long cmd, void *arg);
int kt_pin(int fd, void *addr, size_t len, struct pinmem_pin *out);
int kt_pin_handle(int fd, void *addr, size_t len, uint64_t *handle);
int kt_unpin(int fd, uint64_t handle);
int kt_stats(int fd, struct pinmem_stats *st);
/* REFUSALS (ABI 1.5), the struct zeroed first. */
int kt_refusals(int fd, struct pinmem_refusals *r);
int kt_get_limits(int fd, uint32_t uid, struct pinmem_limits *lim);
int kt_set_limits(int fd, const struct pinmem_limits *lim);
/* Region count of @fd (REGIONS with capacity 0), or -errno. */
long long kt_regions_total(int fd);

/* Read the file at @path into @buf, NUL-terminated: bytes read or -errno. */
int kt_read_file(const char *path, char *buf, size_t size);
/* Write @text to the file at @path: 0 or -errno. */
int kt_write(const char *path, const char *text);

/* /sys/module/pinmem/parameters/NAME as a number; kt_param_set: 0/-errno. */
uint64_t kt_param(const char *name);
int kt_param_set(const char *name, uint64_t val);
/* Limits as found at start; kt_limits_restore() puts them back. */
void kt_limits_save(void);
void kt_limits_restore(void);
/* Module limits wide open (global, default user, no overrides for @uid). */
void kt_limits_open(void);

/*
 * /proc/driver/pinmem/stats: value of @key on the row "@section" (global) or
 * "@section <idkey> @id" (user uid N, process pid N).  0 or -ENOENT.
 */
int kt_statfile(const char *section, long long id, const char *key, uint64_t *val);
/* The value of a one-value line "@name N" of the stats file; 0 or -ENOENT. */
int kt_statfile_line(const char *name, uint64_t *val);
/* The file's first line is "pinmem_stats_version 1". */
int kt_statfile_version(void);

/* /proc/vmstat counter, or -1 when absent. */
long long kt_vmstat(const char *name);
int kt_foll_pin_balanced(void);
/* Pages FOLL_PIN-pinned on the machine now (one read: acquired, then released). */
long long kt_foll_pinned(void);
/* VmPin of /proc/PID/status in kB (0 = self), -1 when absent. */
long long kt_vmpin_kb(pid_t pid);

/*
 * Everything released: no bytes or regions charged globally or to the
 * caller's user, VmPin 0, FOLL_PIN balanced.  Prints a TAP case per check.
 */
void kt_expect_clean(const char *when);

/* Anonymous private read-write mapping of @len bytes, faulted in if @populate. */
void *kt_map(size_t len, int populate);
void *kt_map_aligned(size_t len, size_t align);
/* @n THPs, 2 MiB aligned and faulted in; bails out without THP. */
void *kt_map_thp(size_t n);
void kt_fill(void *buf, size_t len, uint64_t seed);
/* Offset of the first byte that differs from kt_fill(@seed), or -1. */
long kt_check(const void *buf, size_t len, uint64_t seed);
/* Field (e.g. "AnonHugePages") in kB of the /proc/self/smaps VMA at @addr. */
long long kt_smaps_kb(const void *addr, const char *field);
/* /proc/kpageflags of frame @pfn (KPF_* bits), ~0 on error. */
uint64_t kt_pageflags(uint64_t pfn);
#define KT_KPF_ANON	(1ULL << 12)
/*
 * Frames [*start, *end) of ZONE_MOVABLE (the VM boots with movablecore=, see
 * tests/vm/run.sh); -ENOENT without that zone.
 */
int kt_zone_movable(uint64_t *start, uint64_t *end);
/* Physical frame of @addr via /proc/self/pagemap, 0 if not present. */
uint64_t kt_pfn(const void *addr);

/*
 * Run @fn(@arg) in a child with real/effective/saved uid and gid @uid, the
 * supplementary group KT_PINMEM_GID (may open /dev/pinmem), and exactly the
 * capabilities in @caps (bit n = capability n) effective and
 * permitted.  Returns the child's exit status, or 128 + signal number.
 * TAP cases the child prints count as the caller's.
 */
#define KT_CAP(n)	(1ULL << (n))
int kt_run_as(uid_t uid, uint64_t caps, int (*fn)(void *), void *arg);
/* Drop the calling process to @uid with exactly @caps; 0 or -errno. */
int kt_become(uid_t uid, uint64_t caps);

/*
 * Cgroup v2 directories under /sys/fs/cgroup by relative path ("" is the
 * root): move the calling process there (0 or -errno), make one (bails out
 * unless made or there), remove one (0 or -errno).
 */
int kt_cg_enter(const char *rel);
void kt_cg_mkdir(const char *rel);
int kt_cg_rmdir(const char *rel);

/* RLIMIT_MEMLOCK soft and hard limit to @bytes; bails out on failure. */
void kt_set_memlock(size_t bytes);

/* Monotonic seconds. */
double kt_now(void);

#endif
