// SPDX-License-Identifier: MIT
/* Helpers shared by the tests/kernel programs; see common.h. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static int kt_cases;
static int kt_failed;

static void kt_vline(const char *prefix, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	printf("%s%s\n", prefix, buf);
	fflush(stdout);
}

int kt_ok(int cond, const char *fmt, ...)
{
	char prefix[32];
	va_list ap;

	kt_cases++;
	if (!cond)
		kt_failed++;
	snprintf(prefix, sizeof(prefix), "%sok %d - ", cond ? "" : "not ", kt_cases);
	va_start(ap, fmt);
	kt_vline(prefix, fmt, ap);
	va_end(ap);
	return cond;
}

void kt_skip(const char *fmt, ...)
{
	char prefix[32], buf[400];
	va_list ap;

	kt_cases++;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	snprintf(prefix, sizeof(prefix), "ok %d - ", kt_cases);
	printf("%s%s # SKIP\n", prefix, buf);
	fflush(stdout);
}

int kt_eq(long long got, long long want, const char *fmt, ...)
{
	char name[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (got == want)
		return kt_ok(1, "%s", name);
	return kt_ok(0, "%s (got %lld, want %lld)", name, got, want);
}

void kt_diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kt_vline("# ", fmt, ap);
	va_end(ap);
}

void kt_bail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kt_vline("Bail out! ", fmt, ap);
	va_end(ap);
	exit(99);
}

int kt_done(void)
{
	printf("1..%d\n", kt_cases);
	if (kt_failed)
		printf("# %d of %d cases failed\n", kt_failed, kt_cases);
	fflush(stdout);
	return kt_failed || !kt_cases ? 1 : 0;
}

int kt_open(void)
{
	int fd = open(PINMEM_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		kt_bail("open %s: %s", PINMEM_DEVICE, strerror(errno));
	return fd;
}

int kt_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

int kt_pin(int fd, void *addr, size_t len, struct pinmem_pin *out)
{
	struct pinmem_pin p = { .addr = (uintptr_t)addr, .length = len };
	int ret = kt_ioctl(fd, PINMEM_IOC_PIN, &p);

	if (out)
		*out = p;
	return ret;
}

int kt_pin_handle(int fd, void *addr, size_t len, uint64_t *handle)
{
	struct pinmem_pin p;
	int ret = kt_pin(fd, addr, len, &p);

	*handle = ret ? 0 : p.handle;
	return ret;
}

int kt_unpin(int fd, uint64_t handle)
{
	struct pinmem_unpin u = { .handle = handle };

	return kt_ioctl(fd, PINMEM_IOC_UNPIN, &u);
}

int kt_stats(int fd, struct pinmem_stats *st)
{
	memset(st, 0, sizeof(*st));
	return kt_ioctl(fd, PINMEM_IOC_STATS, st);
}

int kt_refusals(int fd, struct pinmem_refusals *r)
{
	memset(r, 0, sizeof(*r));
	return kt_ioctl(fd, PINMEM_IOC_REFUSALS, r);
}

int kt_get_limits(int fd, uint32_t uid, struct pinmem_limits *lim)
{
	memset(lim, 0, sizeof(*lim));
	lim->uid = uid;
	return kt_ioctl(fd, PINMEM_IOC_GET_LIMITS, lim);
}

int kt_set_limits(int fd, const struct pinmem_limits *lim)
{
	struct pinmem_limits copy = *lim;

	return kt_ioctl(fd, PINMEM_IOC_SET_LIMITS, &copy);
}

long long kt_regions_total(int fd)
{
	struct pinmem_regions r = { 0 };
	int ret = kt_ioctl(fd, PINMEM_IOC_REGIONS, &r);

	return ret ? ret : (long long)r.total;
}

int kt_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (got + 1 < size && (n = read(fd, buf + got, size - 1 - got)) > 0)
		got += n;
	close(fd);
	buf[got] = 0;
	return (int)got;
}

int kt_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

uint64_t kt_param(const char *name)
{
	char path[128], buf[64];

	snprintf(path, sizeof(path), "/sys/module/pinmem/parameters/%s", name);
	if (kt_read_file(path, buf, sizeof(buf)) <= 0)
		kt_bail("cannot read %s", path);
	return strtoull(buf, NULL, 0);
}

int kt_param_set(const char *name, uint64_t val)
{
	char path[128], buf[32];

	snprintf(path, sizeof(path), "/sys/module/pinmem/parameters/%s", name);
	snprintf(buf, sizeof(buf), "%" PRIu64, val);
	return kt_write(path, buf);
}

static uint64_t kt_saved_global, kt_saved_user, kt_saved_rlimit;

void kt_limits_save(void)
{
	kt_saved_global = kt_param("global_limit");
	kt_saved_user = kt_param("default_user_limit");
	kt_saved_rlimit = kt_param("enforce_rlimit");
}

void kt_limits_restore(void)
{
	int fd = kt_open();
	uint32_t uid;

	for (uid = 0; uid <= 1003; uid += (uid ? 1 : 1000)) {
		struct pinmem_limits l = { .flags = PINMEM_LIMIT_CLEAR_USER, .uid = uid };

		kt_set_limits(fd, &l);	/* no override is fine too */
	}
	close(fd);
	if (kt_param_set("global_limit", kt_saved_global) ||
	    kt_param_set("default_user_limit", kt_saved_user) ||
	    kt_param_set("enforce_rlimit", kt_saved_rlimit))
		kt_bail("cannot restore module parameters");
}

void kt_limits_open(void)
{
	if (kt_param_set("global_limit", PINMEM_UNLIMITED) ||
	    kt_param_set("default_user_limit", PINMEM_UNLIMITED))
		kt_bail("cannot open up module limits");
}

int kt_statfile(const char *section, long long id, const char *key, uint64_t *val)
{
	static char buf[1 << 16];
	char *line, *save = NULL;

	if (kt_read_file(PINMEM_STATS_PATH, buf, sizeof(buf)) < 0)
		return -ENOENT;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *tok[64], *s2 = NULL, *t;
		int n = 0, i, first;

		for (t = strtok_r(line, " \t", &s2); t && n < 64; t = strtok_r(NULL, " \t", &s2))
			tok[n++] = t;
		if (n < 1 || strcmp(tok[0], section))
			continue;
		first = 1;
		if (strcmp(section, "global")) {
			if (n < 3 || strtoll(tok[2], NULL, 10) != id)
				continue;
			first = 3;
		}
		for (i = first; i + 1 < n; i += 2) {
			if (!strcmp(tok[i], key)) {
				*val = strtoull(tok[i + 1], NULL, 0);
				return 0;
			}
		}
		return -ENOENT;
	}
	return -ENOENT;
}

int kt_statfile_line(const char *name, uint64_t *val)
{
	static char buf[1 << 16];
	size_t len = strlen(name);
	char *p;

	if (kt_read_file(PINMEM_STATS_PATH, buf, sizeof(buf)) < 0)
		return -ENOENT;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, len) && p[len] == ' ') {
			*val = strtoull(p + len + 1, NULL, 0);
			return 0;
		}
	}
	return -ENOENT;
}

int kt_statfile_version(void)
{
	char buf[128];
	int v = -1;

	if (kt_read_file(PINMEM_STATS_PATH, buf, sizeof(buf)) < 0)
		return -1;
	if (sscanf(buf, "pinmem_stats_version %d\n", &v) != 1)
		return -1;
	return v;
}

long long kt_vmstat(const char *name)
{
	static char buf[1 << 16];
	size_t len = strlen(name);
	char *p;

	/* Fold the per-cpu deltas into the totals first. */
	kt_write("/proc/sys/vm/stat_refresh", "1");
	if (kt_read_file("/proc/vmstat", buf, sizeof(buf)) < 0)
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, len) && p[len] == ' ')
			return strtoll(p + len + 1, NULL, 10);
	return -1;
}

long long kt_foll_pinned(void)
{
	static char buf[1 << 16];
	long long acq = -1, rel = -1;
	char *p;

	kt_write("/proc/sys/vm/stat_refresh", "1");
	if (kt_read_file("/proc/vmstat", buf, sizeof(buf)) < 0)
		kt_bail("/proc/vmstat");
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		sscanf(p, "nr_foll_pin_acquired %lld", &acq);
		sscanf(p, "nr_foll_pin_released %lld", &rel);
	}
	return acq - rel;
}

int kt_foll_pin_balanced(void)
{
	long long acq = kt_vmstat("nr_foll_pin_acquired");
	long long rel = kt_vmstat("nr_foll_pin_released");

	if (acq < 0 || acq != rel)
		kt_diag("nr_foll_pin_acquired %lld nr_foll_pin_released %lld", acq, rel);
	return acq >= 0 && acq == rel;
}

long long kt_vmpin_kb(pid_t pid)
{
	char path[64], buf[4096], *p;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	if (kt_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nVmPin:");
	return p ? strtoll(p + 7, NULL, 10) : -1;
}

void kt_expect_clean(const char *when)
{
	struct pinmem_stats st;
	int fd = kt_open();
	uint64_t v = ~0ULL;

	kt_eq(kt_stats(fd, &st), 0, "%s: STATS", when);
	kt_eq(st.global.pinned_bytes, 0, "%s: nothing pinned globally", when);
	kt_eq(st.global.regions, 0, "%s: no regions globally", when);
	kt_eq(st.user.pinned_bytes, 0, "%s: nothing charged to uid %u", when, st.uid);
	kt_eq(kt_statfile("global", 0, "pinned_bytes", &v), 0, "%s: stats file global row", when);
	kt_eq(v, 0, "%s: stats file global pinned_bytes 0", when);
	kt_eq(kt_vmpin_kb(0), 0, "%s: VmPin 0 kB", when);
	kt_ok(kt_foll_pin_balanced(), "%s: nr_foll_pin balanced", when);
	close(fd);
}

void *kt_map(size_t len, int populate)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);

	if (p == MAP_FAILED)
		kt_bail("mmap %zu: %s", len, strerror(errno));
	return p;
}

void *kt_map_aligned(size_t len, size_t align)
{
	char *p = kt_map(len + align, 0);
	uintptr_t a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);

	if (a > (uintptr_t)p)
		munmap(p, a - (uintptr_t)p);
	munmap((char *)a + len, (uintptr_t)p + align - a);
	return (void *)a;
}

static uint64_t kt_word(uint64_t seed, size_t i)
{
	return (seed * 0x9E3779B97F4A7C15ULL) ^ (i * 0xBF58476D1CE4E5B9ULL) ^ i;
}

void kt_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = kt_word(seed, i);
}

long kt_check(const void *buf, size_t len, uint64_t seed)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != kt_word(seed, i))
			return (long)(i * 8);
	return -1;
}

uint64_t kt_pfn(const void *addr)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t e = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &e, 8, (off_t)((uintptr_t)addr / KT_PAGE) * 8) != 8)
		e = 0;
	close(fd);
	return (e >> 63) ? e & ((1ULL << 55) - 1) : 0;
}

int kt_zone_movable(uint64_t *start, uint64_t *end)
{
	FILE *f = fopen("/proc/zoneinfo", "re");
	unsigned long long first = 0, spanned = 0, v;
	char line[256];
	int in = 0;

	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Node ", 5)) {
			in = strstr(line, "zone  Movable") != NULL;
			continue;
		}
		if (in && sscanf(line, " spanned %llu", &v) == 1)
			spanned = v;
		if (in && sscanf(line, " start_pfn: %llu", &v) == 1)
			first = v;
	}
	if (f)
		fclose(f);
	*start = first;
	*end = first + spanned;
	return spanned ? 0 : -ENOENT;
}

uint64_t kt_pageflags(uint64_t pfn)
{
	int fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	uint64_t e = ~0ULL;

	if (fd < 0)
		return e;
	if (pread(fd, &e, 8, (off_t)pfn * 8) != 8)
		e = ~0ULL;
	close(fd);
	return e;
}

void *kt_map_thp(size_t n)
{
	char *buf = kt_map_aligned(n * KT_HPAGE, KT_HPAGE);
	long long kb;

	if (madvise(buf, n * KT_HPAGE, MADV_HUGEPAGE))
		kt_bail("MADV_HUGEPAGE");
	kt_fill(buf, n * KT_HPAGE, 40);
	kb = kt_smaps_kb(buf, "AnonHugePages");
	if (kb != (long long)(n * KT_HPAGE / 1024))
		kt_bail("only %lld kB of %zu THP", kb, n * KT_HPAGE / 1024);
	return buf;
}

long long kt_smaps_kb(const void *addr, const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	size_t flen = strlen(field);
	unsigned long lo, hi;
	long long val = -1;
	char line[512];
	int in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && !strncmp(line, field, flen) && line[flen] == ':') {
			val = strtoll(line + flen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return val;
}

int kt_become(uid_t uid, uint64_t caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	gid_t groups[1] = { KT_PINMEM_GID };

	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(1, groups) ||
	    setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return -errno;
	memset(d, 0, sizeof(d));
	d[0].effective = d[0].permitted = (uint32_t)caps;
	d[1].effective = d[1].permitted = (uint32_t)(caps >> 32);
	if (syscall(SYS_capset, &h, d))
		return -errno;
	return 0;
}

int kt_run_as(uid_t uid, uint64_t caps, int (*fn)(void *), void *arg)
{
	int status, ret, pfd[2], counts[2];
	pid_t pid;

	fflush(stdout);
	if (pipe2(pfd, O_CLOEXEC))
		kt_bail("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		kt_bail("fork: %s", strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		ret = kt_become(uid, caps);
		if (ret) {
			kt_diag("kt_become(%u): %s", (unsigned)uid, strerror(-ret));
			_exit(125);
		}
		ret = fn(arg);
		/* The child's cases continue the parent's numbering. */
		counts[0] = kt_cases;
		counts[1] = kt_failed;
		if (write(pfd[1], counts, sizeof(counts)) != sizeof(counts))
			ret = 124;
		_exit(ret & 0xff);
	}
	close(pfd[1]);
	if (read(pfd[0], counts, sizeof(counts)) == sizeof(counts)) {
		kt_cases = counts[0];
		kt_failed = counts[1];
	}
	close(pfd[0]);
	if (waitpid(pid, &status, 0) != pid)
		kt_bail("waitpid: %s", strerror(errno));
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

#define KT_CGROOT	"/sys/fs/cgroup"

int kt_cg_enter(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), KT_CGROOT "/%s%scgroup.procs", rel, *rel ? "/" : "");
	return kt_write(p, "0");
}

void kt_cg_mkdir(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), KT_CGROOT "/%s", rel);
	if (mkdir(p, 0755) && errno != EEXIST)
		kt_bail("mkdir %s: %s", p, strerror(errno));
}

int kt_cg_rmdir(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), KT_CGROOT "/%s", rel);
	return rmdir(p) ? -errno : 0;
}

void kt_set_memlock(size_t bytes)
{
	struct rlimit rl = { bytes, bytes };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		kt_bail("setrlimit(RLIMIT_MEMLOCK, %zu): %s", bytes, strerror(errno));
}

double kt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
