// SPDX-License-Identifier: MIT
/*
 * Cleanup: regions belong to the open file.  Closing it, exiting, being
 * killed (also in the middle of a 1 GiB PIN), a thread exiting, munmap of a
 * pinned range before UNPIN, and fork (the child inherits the fd, its writes
 * go to its own copy, its PIN is EPERM; the fd outliving its opener) all end
 * with nothing pinned, nothing charged, VmPin 0, the memory back and
 * FOLL_PIN balanced.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define LEN	(16 * KT_MIB)
#define BIG	(1024 * KT_MIB)

static long long meminfo_kb(const char *field)
{
	FILE *f = fopen("/proc/meminfo", "re");
	size_t n = strlen(field);
	char line[128];
	long long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = strtoll(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static void expect_global(uint64_t bytes, const char *what)
{
	struct pinmem_stats st;
	int fd = kt_open();

	kt_eq(kt_stats(fd, &st), 0, "%s: STATS", what);
	kt_eq(st.global.pinned_bytes, bytes, "%s: global pinned_bytes %llu", what,
	      (unsigned long long)bytes);
	close(fd);
}

static void test_close(void)
{
	char *buf = kt_map(2 * LEN, 1);
	int fd = kt_open();
	uint64_t h;

	kt_eq(kt_pin_handle(fd, buf, LEN, &h), 0, "close: PIN");
	kt_eq(kt_pin_handle(fd, buf + LEN, LEN, &h), 0, "close: PIN a second region");
	kt_eq(kt_vmpin_kb(0), 2 * LEN / 1024, "close: VmPin counts both");
	close(fd);
	kt_expect_clean("after close");
	kt_fill(buf, 2 * LEN, 5);
	kt_eq(kt_check(buf, 2 * LEN, 5), -1, "close: memory still usable");
	munmap(buf, 2 * LEN);
}

static void test_exit(int killed)
{
	const char *what = killed ? "SIGKILL with regions" : "exit with regions";
	int pfd[2], status;
	uint64_t v = 0;
	pid_t pid;
	char c;

	if (pipe(pfd))
		kt_bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char *buf = kt_map(4 * LEN, 1);
		int fd = kt_open();
		uint64_t h;

		if (kt_pin_handle(fd, buf, 4 * LEN, &h))
			_exit(1);
		if (write(pfd[1], "x", 1) != 1)
			_exit(2);
		if (killed)
			pause();
		_exit(0);
	}
	kt_eq(read(pfd[0], &c, 1), 1, "%s: child pinned 64 MiB", what);
	if (killed) {
		kt_eq(kt_statfile("process", pid, "regions", &v), 0, "%s: child in the stats file", what);
		kt_eq(v, 1, "%s: child holds one region", what);
		kill(pid, SIGKILL);
	}
	waitpid(pid, &status, 0);
	kt_ok(killed ? WIFSIGNALED(status) : WIFEXITED(status) && !WEXITSTATUS(status),
	      "%s: child ended as expected", what);
	kt_eq(kt_statfile("process", pid, "regions", &v), -ENOENT, "%s: child gone from the stats file", what);
	close(pfd[0]);
	close(pfd[1]);
	kt_expect_clean(what);
}

/* SIGKILL while a 1 GiB PIN is faulting pages in. */
static void test_kill_during_pin(void)
{
	long long free_before = meminfo_kb("MemFree");
	struct pinmem_stats a, b, st;
	int fd = kt_open(), status, caught = 0;
	double t0, t_kill = 0, t_reaped;
	pid_t pid;

	kt_stats(fd, &a);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char *big = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		int cfd = kt_open();
		uint64_t h;

		if (big == MAP_FAILED)
			_exit(3);
		kt_pin_handle(cfd, big, BIG, &h);
		pause();
		_exit(0);
	}
	/* Kill once the PIN is charged but not all of it is faulted in yet. */
	t0 = kt_now();
	while (kt_now() - t0 < 60) {
		long long rss = -1;
		char path[64], line[128];
		FILE *f;

		if (kt_stats(fd, &st) || st.global.pinned_bytes < BIG)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "VmRSS: %lld", &rss) == 1)
				break;
		if (f)
			fclose(f);
		caught = rss >= 0 && rss * 1024 < (long long)(BIG * 3 / 4);
		kill(pid, SIGKILL);
		t_kill = kt_now();
		kt_diag("kill during pin: charged after %.2fs, child RSS %lld kB", t_kill - t0, rss);
		break;
	}
	if (!t_kill) {
		kill(pid, SIGKILL);
		t_kill = kt_now();
	}
	waitpid(pid, &status, 0);
	t_reaped = kt_now();
	kt_ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "1 GiB PIN: child killed");
	kt_ok(caught, "1 GiB PIN: kill landed while pages were still being pinned");
	kt_diag("kill to reap: %.2fs", t_reaped - t_kill);
	kt_stats(fd, &b);
	kt_eq(b.global.pinned_bytes, 0, "1 GiB PIN: nothing left charged");
	if (caught)
		kt_ok(b.global.refused_fault == a.global.refused_fault + 1 &&
		      b.global.pins == a.global.pins,
		      "1 GiB PIN: aborted PIN counted as refused_fault, not as a pin");
	close(fd);
	kt_ok(meminfo_kb("MemFree") > free_before - 64 * 1024,
	      "1 GiB PIN: memory returned (MemFree %lld -> %lld kB)", free_before,
	      meminfo_kb("MemFree"));
	kt_expect_clean("after SIGKILL during PIN");
}

static void test_fork(int parent_closes_first)
{
	static uint64_t pfns[LEN / KT_PAGE];
	const char *what = parent_closes_first ? "fork, parent closes first" : "fork";
	char *buf = kt_map(LEN, 1), *other = kt_map(KT_MIB, 1);
	int fd = kt_open(), status, moved = 0;
	size_t i;
	uint64_t h;
	pid_t pid;

	kt_fill(buf, LEN, 21);
	kt_eq(kt_pin_handle(fd, buf, LEN, &h), 0, "%s: parent PIN", what);
	for (i = 0; i < LEN / KT_PAGE; i++)
		pfns[i] = kt_pfn(buf + i * KT_PAGE);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int bad = 0;

		if (parent_closes_first)
			usleep(300000);
		kt_fill(buf, LEN, 22);
		bad |= kt_check(buf, LEN, 22) != -1;
		bad |= (kt_pin(fd, other, KT_MIB, NULL) != -EPERM) << 1;
		_exit(bad);
	}
	if (parent_closes_first) {
		close(fd);
		fd = -1;
	}
	waitpid(pid, &status, 0);
	kt_ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 1), "%s: child writes its own copy", what);
	kt_ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 2), "%s: child PIN through inherited fd is EPERM", what);
	kt_eq(kt_check(buf, LEN, 21), -1, "%s: parent's pinned data intact", what);
	for (i = 0; i < LEN / KT_PAGE; i++)
		moved += kt_pfn(buf + i * KT_PAGE) != pfns[i];
	kt_eq(moved, 0, "%s: parent still maps the pinned frames", what);
	if (fd >= 0) {
		kt_eq(kt_regions_total(fd), 1, "%s: region survives the child's exit", what);
		kt_fill(buf, LEN, 23);
		kt_eq(kt_unpin(fd, h), 0, "%s: UNPIN", what);
		kt_eq(kt_check(buf, LEN, 23), -1, "%s: data intact", what);
		close(fd);
	}
	kt_expect_clean(what);
	munmap(buf, LEN);
	munmap(other, KT_MIB);
}

/*
 * An fd that outlives its opener: once the opener is reaped its pid may name
 * another process, so the stats file no longer shows it.
 */
static void test_owner_gone(void)
{
	int go[2], res[2], status, r = 1;
	uint64_t v;
	pid_t a;

	if (pipe(go) || pipe(res))
		kt_bail("pipe: %s", strerror(errno));
	fflush(stdout);
	a = fork();
	if (a < 0)
		kt_bail("fork: %s", strerror(errno));
	if (a == 0) {
		pid_t self = getpid(), b;

		kt_open();
		b = fork();
		if (b == 0) {
			close(go[1]);
			if (read(go[0], &r, 1) != 1)
				_exit(1);
			r = kt_statfile("process", self, "regions", &v);
			_exit(write(res[1], &r, sizeof(r)) != sizeof(r));
		}
		_exit(b < 0);
	}
	if (waitpid(a, &status, 0) != a || !WIFEXITED(status) || WEXITSTATUS(status))
		kt_bail("opener did not exit cleanly");
	if (write(go[1], "x", 1) != 1 || read(res[0], &r, sizeof(r)) != sizeof(r))
		kt_bail("inheritor did not answer");
	kt_eq(r, -ENOENT, "fd outlives its opener: the stats file drops the opener's pid");
	close(go[0]);
	close(go[1]);
	close(res[0]);
	close(res[1]);
}

/* Sampled frames of @n that are still allocated anonymous pages. */
static int anon_frames(const uint64_t *pfns, int n)
{
	int i, anon = 0;

	for (i = 0; i < n; i++)
		anon += (kt_pageflags(pfns[i]) & KT_KPF_ANON) != 0;
	return anon;
}

/*
 * munmap before UNPIN: the pinned pages stay allocated until the UNPIN
 * frees them.  Judged on the frames' own flags (an allocated anonymous page
 * keeps KPF_ANON until it is freed), as MemFree hides pages freed into the
 * per-cpu lists.
 */
static void test_munmap(void)
{
	static uint64_t pfns[64];
	size_t big = 64 * KT_MIB;
	char *buf = kt_map(big, 1);
	int fd = kt_open(), i;
	uint64_t h;

	kt_eq(kt_pin_handle(fd, buf, big, &h), 0, "munmap: PIN 64 MiB");
	for (i = 0; i < 64; i++)
		pfns[i] = kt_pfn(buf + i * KT_MIB);
	kt_eq(anon_frames(pfns, 64), 64, "munmap: sampled frames are anonymous pages");
	kt_eq(munmap(buf, big), 0, "munmap the pinned range");
	kt_eq(anon_frames(pfns, 64), 64, "munmap: pinned frames not freed by munmap");
	expect_global(big, "munmap: still pinned");
	kt_eq(kt_regions_total(fd), 1, "munmap: region still listed");
	/* New memory at the same address is not disturbed by the UNPIN. */
	buf = mmap(buf, big, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
	kt_fill(buf, big, 31);
	kt_eq(kt_unpin(fd, h), 0, "munmap: UNPIN after munmap");
	kt_eq(anon_frames(pfns, 64), 0, "munmap: UNPIN freed the frames");
	kt_eq(kt_check(buf, big, 31), -1, "munmap: new mapping at the address intact");
	munmap(buf, big);

	buf = kt_map(LEN, 1);
	kt_eq(kt_pin_handle(fd, buf, LEN, &h), 0, "munmap then close: PIN");
	for (i = 0; i < 16; i++)
		pfns[i] = kt_pfn(buf + i * KT_MIB);
	munmap(buf, LEN);
	close(fd);
	kt_eq(anon_frames(pfns, 16), 0, "munmap then close: close freed the frames");
	kt_expect_clean("munmap then close");
}

struct thread_pin {
	int fd;
	char *buf;
	int ret;
};

static void *pin_thread(void *p)
{
	struct thread_pin *t = p;
	uint64_t h;

	t->ret = kt_pin_handle(t->fd, t->buf, LEN, &h);
	return NULL;
}

static void test_thread(void)
{
	struct thread_pin t = { .fd = kt_open(), .buf = kt_map(LEN, 1) };
	struct pinmem_region_info info;
	struct pinmem_regions r = { .regions = (uintptr_t)&info, .capacity = 1 };
	pthread_t th;

	pthread_create(&th, NULL, pin_thread, &t);
	pthread_join(th, NULL);
	kt_eq(t.ret, 0, "thread: PIN from a thread");
	kt_eq(kt_ioctl(t.fd, PINMEM_IOC_REGIONS, &r), 0, "thread: REGIONS");
	kt_eq(r.total, 1, "thread: region outlives the thread");
	kt_eq(kt_unpin(t.fd, info.handle), 0, "thread: main thread UNPINs it");
	close(t.fd);
	kt_expect_clean("thread");
	munmap(t.buf, LEN);
}

/*
 * exec: the fd survives exec (no O_CLOEXEC) with its regions, but the new
 * program is another mm than the opener's, so its PIN is EPERM; its exit
 * releases the regions pinned in the old mm.
 */
static int after_exec(int fd)
{
	char *buf = kt_map(KT_MIB, 1);
	struct pinmem_stats st;
	int bad = 0;

	bad |= (kt_pin(fd, buf, KT_MIB, NULL) != -EPERM) << 0;
	bad |= (kt_stats(fd, &st) || st.file.pinned_bytes != LEN) << 1;
	return bad;
}

static void test_exec(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int fd = open(PINMEM_DEVICE, O_RDWR);
		char arg[16];
		uint64_t h;

		if (fd < 0 || kt_pin_handle(fd, kt_map(LEN, 1), LEN, &h))
			_exit(100);
		snprintf(arg, sizeof(arg), "%d", fd);
		execl("/proc/self/exe", "t_cleanup", "--after-exec", arg, (char *)NULL);
		_exit(101);
	}
	waitpid(pid, &status, 0);
	kt_ok(WIFEXITED(status) && WEXITSTATUS(status) < 100, "exec: child pinned and exec'd (%d)",
	      WEXITSTATUS(status));
	kt_ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 1), "exec: PIN after exec is EPERM");
	kt_ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 2), "exec: regions survive exec");
	kt_expect_clean("exit after exec");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--after-exec"))
		return after_exec(atoi(argv[2]));
	kt_limits_save();
	kt_limits_open();
	test_close();
	test_exit(0);
	test_exit(1);
	test_kill_during_pin();
	test_fork(0);
	test_fork(1);
	test_owner_gone();
	test_munmap();
	test_thread();
	test_exec();
	kt_limits_restore();
	kt_expect_clean("t_cleanup end");
	return kt_done();
}
