// SPDX-License-Identifier: MIT
/*
 * Budgets: the global limit (ENOSPC), the per-user limit (EDQUOT, default
 * and per-uid override) and RLIMIT_MEMLOCK (ENOMEM) each let a PIN reach
 * exactly their limit and refuse one page more, count the refusal under their
 * own name (STATS and the stats file) and change nothing else.  CAP_IPC_LOCK
 * bypasses the rlimit and nothing else; enforce_rlimit=0 turns the rlimit off.
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)
#define NO_IPC_LOCK	(ALL_CAPS & ~KT_CAP(CAP_IPC_LOCK))
#define PG		KT_PAGE

enum which { R_GLOBAL, R_USER, R_RLIMIT, R_NR };
static const char *const rname[R_NR] = { "refused_global", "refused_user", "refused_rlimit" };
static const int rerrno[R_NR] = { ENOSPC, EDQUOT, ENOMEM };

static uint64_t refused(const struct pinmem_counters *c, int w)
{
	return w == R_GLOBAL ? c->refused_global : w == R_USER ? c->refused_user :
	       c->refused_rlimit;
}

struct snap {
	struct pinmem_stats st;
	uint64_t file_global[R_NR];
	uint64_t file_user[R_NR];
};

static void take(int fd, struct snap *s)
{
	int w;

	if (kt_stats(fd, &s->st))
		kt_bail("STATS failed");
	for (w = 0; w < R_NR; w++) {
		s->file_global[w] = s->file_user[w] = ~0ULL;
		kt_statfile("global", 0, rname[w], &s->file_global[w]);
		kt_statfile("user", s->st.uid, rname[w], &s->file_user[w]);
	}
}

/* PIN of @len at @addr is refused by budget @w, and only that changes. */
static void expect_refused(int fd, void *addr, size_t len, int w, const char *what)
{
	struct snap a, b;
	int i, same = 1;

	take(fd, &a);
	kt_eq(kt_pin(fd, addr, len, NULL), -rerrno[w], "%s: refused with %s", what,
	      strerror(rerrno[w]));
	take(fd, &b);
	for (i = 0; i < R_NR; i++) {
		int d = i == w;

		same &= refused(&b.st.global, i) == refused(&a.st.global, i) + d;
		same &= refused(&b.st.user, i) == refused(&a.st.user, i) + d;
		same &= refused(&b.st.file, i) == refused(&a.st.file, i) + d;
	}
	kt_ok(same, "%s: only %s counted (global, user, file)", what, rname[w]);
	kt_eq(b.file_global[w], a.file_global[w] + 1, "%s: stats file global %s", what, rname[w]);
	kt_eq(b.file_user[w], a.file_user[w] + 1, "%s: stats file user %s", what, rname[w]);
	kt_ok(b.st.global.pinned_bytes == a.st.global.pinned_bytes &&
	      b.st.user.pinned_bytes == a.st.user.pinned_bytes &&
	      b.st.file.pinned_bytes == a.st.file.pinned_bytes &&
	      b.st.file.regions == a.st.file.regions &&
	      b.st.global.pins == a.st.global.pins &&
	      b.st.mm_pinned_bytes == a.st.mm_pinned_bytes,
	      "%s: nothing charged by the refusal", what);
}

/* Pin [buf, buf + limit) in two pieces, exactly reaching the limit. */
static void fill_to(int fd, char *buf, size_t limit, uint64_t h[2], const char *what)
{
	kt_eq(kt_pin_handle(fd, buf, limit - 2 * PG, &h[0]), 0, "%s: PIN limit - 2 pages", what);
	kt_eq(kt_pin_handle(fd, buf + limit - 2 * PG, 2 * PG, &h[1]), 0,
	      "%s: PIN the last 2 pages, exactly at the limit", what);
}

static void test_global(void)
{
	size_t lim = 8 * KT_MIB;
	char *buf = kt_map(lim + 4 * PG, 1);
	struct pinmem_stats st;
	uint64_t h[2];
	int fd = kt_open();

	kt_limits_open();
	kt_eq(kt_param_set("global_limit", lim), 0, "global_limit = 8 MiB");
	fill_to(fd, buf, lim, h, "global");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.global.limit_bytes, lim, "global limit_bytes");
	kt_eq(st.global.pinned_bytes, lim, "global at its limit");
	expect_refused(fd, buf + lim, PG, R_GLOBAL, "global one page over");
	kt_eq(kt_unpin(fd, h[1]), 0, "UNPIN 2 pages");
	expect_refused(fd, buf + lim - 2 * PG, 3 * PG, R_GLOBAL, "global 3 pages into 2 free");
	kt_eq(kt_pin_handle(fd, buf + lim - 2 * PG, 2 * PG, &h[1]), 0, "global: 2 pages fit again");
	kt_eq(kt_unpin(fd, h[0]), 0, "UNPIN");
	kt_eq(kt_unpin(fd, h[1]), 0, "UNPIN");
	close(fd);
	munmap(buf, lim + 4 * PG);
}

/* The global budget is shared between users. */
static int other_user_global(void *arg)
{
	char *buf = kt_map(3 * KT_MIB, 1);
	int fd = kt_open();
	uint64_t h;

	kt_eq(kt_pin_handle(fd, buf, 2 * KT_MIB, &h), 0, "uid 1000: PIN the rest of the global budget");
	expect_refused(fd, buf + 2 * KT_MIB, PG, R_GLOBAL, "uid 1000: global one page over");
	kt_eq(kt_unpin(fd, h), 0, "uid 1000: UNPIN");
	close(fd);
	return 0;
}

static void test_global_shared(void)
{
	char *buf = kt_map(6 * KT_MIB, 1);
	int fd = kt_open();
	uint64_t h;

	kt_limits_open();
	kt_param_set("global_limit", 8 * KT_MIB);
	kt_eq(kt_pin_handle(fd, buf, 6 * KT_MIB, &h), 0, "root: PIN 6 of 8 MiB");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), other_user_global, NULL), 0,
	      "uid 1000 shares the global budget");
	kt_eq(kt_unpin(fd, h), 0, "root: UNPIN");
	close(fd);
	munmap(buf, 6 * KT_MIB);
}

struct user_arg {
	size_t limit;
	const char *who;
};

static int user_at_limit(void *p)
{
	struct user_arg *a = p;
	char *buf = kt_map(a->limit + 2 * PG, 1);
	struct pinmem_stats st;
	int fd = kt_open();
	uint64_t h[2];

	fill_to(fd, buf, a->limit, h, a->who);
	kt_eq(kt_stats(fd, &st), 0, "%s: STATS", a->who);
	kt_eq(st.user.limit_bytes, a->limit, "%s: user limit_bytes", a->who);
	kt_eq(st.uid, getuid(), "%s: stats uid", a->who);
	expect_refused(fd, buf + a->limit, PG, R_USER, a->who);
	kt_eq(kt_unpin(fd, h[0]), 0, "%s: UNPIN", a->who);
	kt_eq(kt_unpin(fd, h[1]), 0, "%s: UNPIN", a->who);
	close(fd);
	return 0;
}

/* One user's budget covers all of its files and processes. */
static int user_two_files(void *p)
{
	char *buf = kt_map(4 * KT_MIB + PG, 1);
	int fd1 = kt_open(), fd2 = kt_open();
	uint64_t h1, h2;

	kt_eq(kt_pin_handle(fd1, buf, 3 * KT_MIB, &h1), 0, "uid 1000 fd 1: PIN 3 MiB");
	kt_eq(kt_pin_handle(fd2, buf + 3 * KT_MIB, KT_MIB, &h2), 0, "uid 1000 fd 2: PIN 1 MiB");
	expect_refused(fd2, buf + 4 * KT_MIB, PG, R_USER, "uid 1000 fd 2: user budget spans files");
	close(fd1);
	kt_eq(kt_pin_handle(fd2, buf, PG, &h1), 0, "uid 1000: closing fd 1 gave its 3 MiB back");
	close(fd2);
	return 0;
}

static void test_user(void)
{
	struct user_arg a1000 = { 4 * KT_MIB, "uid 1000 default limit" };
	struct user_arg a1001 = { 2 * KT_MIB, "uid 1001 override" };
	struct user_arg a1001d = { 4 * KT_MIB, "uid 1001 override cleared" };
	struct user_arg aroot = { 4 * KT_MIB, "root default limit" };
	struct pinmem_limits l = { 0 };
	int fd = kt_open();

	kt_limits_open();
	kt_eq(kt_param_set("default_user_limit", 4 * KT_MIB), 0, "default_user_limit = 4 MiB");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), user_at_limit, &a1000), 0, "%s", a1000.who);
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), user_two_files, NULL), 0, "uid 1000, two files");
	kt_eq(user_at_limit(&aroot), 0, "root is held to the user limit too");

	l.flags = PINMEM_LIMIT_SET_USER;
	l.uid = 1001;
	l.user_limit = 2 * KT_MIB;
	kt_eq(kt_set_limits(fd, &l), 0, "SET_LIMITS override uid 1001 = 2 MiB");
	kt_eq(kt_get_limits(fd, 1001, &l), 0, "GET_LIMITS uid 1001");
	kt_eq(l.user_limit, 2 * KT_MIB, "uid 1001 user_limit");
	kt_eq(l.user_flags & PINMEM_USER_OVERRIDDEN, PINMEM_USER_OVERRIDDEN, "uid 1001 overridden");
	kt_eq(kt_get_limits(fd, 1000, &l), 0, "GET_LIMITS uid 1000");
	kt_ok(l.user_limit == 4 * KT_MIB && !(l.user_flags & PINMEM_USER_OVERRIDDEN),
	      "uid 1000 keeps the default");
	kt_eq(kt_run_as(1001, KT_CAP(CAP_IPC_LOCK), user_at_limit, &a1001), 0, "%s", a1001.who);
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), user_at_limit, &a1000), 0,
	      "uid 1000 unaffected by uid 1001's override");

	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_CLEAR_USER;
	l.uid = 1001;
	kt_eq(kt_set_limits(fd, &l), 0, "SET_LIMITS clear uid 1001's override");
	kt_eq(kt_run_as(1001, KT_CAP(CAP_IPC_LOCK), user_at_limit, &a1001d), 0, "%s", a1001d.who);
	close(fd);
}

/* STATS from a child that lowered its own RLIMIT_MEMLOCK: 0 if it sees @lim. */
static int child_sees_rlimit(int fd, size_t lim)
{
	struct pinmem_stats st;
	int status;
	pid_t pid = fork();

	if (pid < 0)
		kt_bail("fork: %s", strerror(errno));
	if (!pid) {
		kt_set_memlock(lim / 2);
		_exit(kt_stats(fd, &st) || st.file.limit_bytes != lim);
	}
	if (waitpid(pid, &status, 0) != pid)
		kt_bail("waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int rlimit_at_limit(void *p)
{
	size_t lim = *(size_t *)p;
	char *buf = kt_map(lim + 2 * PG, 1);
	struct pinmem_stats st;
	uint64_t h[2];
	int fd;

	kt_set_memlock(lim);
	fd = kt_open();
	fill_to(fd, buf, lim, h, "rlimit");
	kt_eq(kt_vmpin_kb(0), lim / 1024, "rlimit: VmPin at the limit");
	kt_eq(kt_stats(fd, &st), 0, "rlimit: STATS");
	kt_eq(st.file.limit_bytes, lim, "rlimit: file limit_bytes is RLIMIT_MEMLOCK");
	kt_eq(child_sees_rlimit(fd, lim), 0, "rlimit: a child with its own rlimit sees the owner's");
	kt_eq(st.mm_pinned_bytes, lim, "rlimit: mm_pinned_bytes");
	expect_refused(fd, buf + lim, PG, R_RLIMIT, "rlimit one page over");
	kt_eq(kt_vmpin_kb(0), lim / 1024, "rlimit: VmPin unchanged by the refusal");
	kt_eq(kt_unpin(fd, h[1]), 0, "rlimit: UNPIN 2 pages");
	expect_refused(fd, buf + lim - 2 * PG, 3 * PG, R_RLIMIT, "rlimit 3 pages into 2 free");
	kt_eq(kt_unpin(fd, h[0]), 0, "rlimit: UNPIN");
	kt_eq(kt_vmpin_kb(0), 0, "rlimit: VmPin 0");
	close(fd);
	return 0;
}

/*
 * RLIMIT_MEMLOCK is judged on mm->pinned_vm, which io_uring's registered
 * buffers (and RDMA) also charge: pinmem sees them in mm_pinned_bytes and
 * counts them against the limit.
 */
static int rlimit_shared(void *p)
{
	char *ring_buf = kt_map(2 * KT_MIB, 1), *buf = kt_map(4 * KT_MIB, 1);
	struct io_uring_params params = { 0 };
	struct iovec iov = { ring_buf, 2 * KT_MIB };
	struct pinmem_stats st;
	int fd, ring;
	uint64_t h;

	kt_set_memlock(4 * KT_MIB);
	ring = (int)syscall(__NR_io_uring_setup, 4, &params);
	if (ring < 0)
		kt_bail("io_uring_setup: %s", strerror(errno));
	kt_eq(syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1), 0,
	      "io_uring registers a 2 MiB buffer");
	fd = kt_open();
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.mm_pinned_bytes, 2 * KT_MIB, "mm_pinned_bytes shows io_uring's pin");
	expect_refused(fd, buf, 2 * KT_MIB + PG, R_RLIMIT, "rlimit shared with io_uring, one page over");
	kt_eq(kt_pin_handle(fd, buf, 2 * KT_MIB, &h), 0, "PIN the 2 MiB io_uring left");
	kt_eq(kt_vmpin_kb(0), 4096, "VmPin counts both");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	close(ring);
	close(fd);
	return 0;
}

/* Without enforcement a small rlimit does not refuse; VmPin still counts. */
static int rlimit_off(void *p)
{
	char *buf = kt_map(2 * KT_MIB, 1);
	struct pinmem_stats st;
	int fd = kt_open();
	uint64_t h;

	kt_set_memlock(KT_MIB);
	kt_eq(kt_pin_handle(fd, buf, 2 * KT_MIB, &h), 0, "enforce_rlimit=0: PIN 2 MiB over a 1 MiB rlimit");
	kt_eq(kt_vmpin_kb(0), 2048, "enforce_rlimit=0: VmPin still charged");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.limit_bytes, PINMEM_UNLIMITED, "enforce_rlimit=0: file limit_bytes unlimited");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	close(fd);
	return 0;
}

/* CAP_IPC_LOCK: over the rlimit is fine, over the user or global budget not. */
static int ipc_lock(void *p)
{
	char *buf = kt_map(5 * KT_MIB, 1);
	struct pinmem_stats st;
	int fd = kt_open();
	uint64_t h[2];

	kt_set_memlock(KT_MIB);
	kt_eq(kt_stats(fd, &st), 0, "CAP_IPC_LOCK: STATS");
	kt_eq(st.file.limit_bytes, PINMEM_UNLIMITED, "CAP_IPC_LOCK: no rlimit in force");
	fill_to(fd, buf, 4 * KT_MIB, h, "CAP_IPC_LOCK, 4 x rlimit, user limit");
	kt_eq(kt_vmpin_kb(0), 4096, "CAP_IPC_LOCK: VmPin still charged");
	expect_refused(fd, buf + 4 * KT_MIB, PG, R_USER, "CAP_IPC_LOCK: user budget still applies");
	kt_eq(kt_unpin(fd, h[0]), 0, "UNPIN");
	kt_eq(kt_unpin(fd, h[1]), 0, "UNPIN");
	close(fd);
	return 0;
}

static int ipc_lock_global(void *p)
{
	char *buf = kt_map(3 * KT_MIB, 1);
	int fd = kt_open();
	uint64_t h[2];

	kt_set_memlock(KT_MIB);
	fill_to(fd, buf, 2 * KT_MIB, h, "CAP_IPC_LOCK, global limit");
	expect_refused(fd, buf + 2 * KT_MIB, PG, R_GLOBAL, "CAP_IPC_LOCK: global budget still applies");
	kt_eq(kt_unpin(fd, h[0]), 0, "UNPIN");
	kt_eq(kt_unpin(fd, h[1]), 0, "UNPIN");
	close(fd);
	return 0;
}

static void test_rlimit(void)
{
	size_t two = 2 * KT_MIB, one = KT_MIB;

	kt_limits_open();
	kt_eq(kt_param_set("enforce_rlimit", 1), 0, "enforce_rlimit = 1");
	kt_eq(kt_run_as(0, NO_IPC_LOCK, rlimit_at_limit, &two), 0, "root without CAP_IPC_LOCK, rlimit 2 MiB");
	kt_eq(kt_run_as(1000, 0, rlimit_at_limit, &one), 0, "uid 1000 without capabilities, rlimit 1 MiB");
	kt_eq(kt_run_as(1000, 0, rlimit_shared, NULL), 0, "rlimit shared with io_uring");
	kt_eq(kt_param_set("enforce_rlimit", 0), 0, "enforce_rlimit = 0");
	kt_eq(kt_run_as(1000, 0, rlimit_off, NULL), 0, "rlimit not enforced");
	kt_eq(kt_param_set("enforce_rlimit", 1), 0, "enforce_rlimit = 1");
	kt_eq(kt_param_set("default_user_limit", 4 * KT_MIB), 0, "default_user_limit = 4 MiB");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), ipc_lock, NULL), 0, "CAP_IPC_LOCK bypasses only the rlimit (user)");
	kt_limits_open();
	kt_eq(kt_param_set("global_limit", 2 * KT_MIB), 0, "global_limit = 2 MiB");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), ipc_lock_global, NULL), 0, "CAP_IPC_LOCK bypasses only the rlimit (global)");
}

int main(void)
{
	kt_limits_save();
	test_global();
	test_global_shared();
	test_user();
	test_rlimit();
	kt_limits_restore();
	kt_expect_clean("t_budget end");
	return kt_done();
}
