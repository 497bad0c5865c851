// SPDX-License-Identifier: MIT
/*
 * The stats file is private: a reader without CAP_SYS_ADMIN sees the global
 * line and every user's line, but process lines only of its own uid, and a
 * hidden_processes line counting the rest; CAP_SYS_ADMIN sees every line.
 * Processes outside the pid namespace of the proc mount read are never
 * listed, and pids are those of that namespace.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include "common.h"

#define PG	KT_PAGE

struct probe {
	pid_t root_pid;
};

/* As uid 1000: own row shown, root's hidden, both users' totals shown. */
static int reader(void *p)
{
	const struct probe *pr = p;
	char *buf = kt_map(PG, 1);
	uint64_t v = 0, hidden = 0;
	int fd = kt_open();

	if (kt_pin(fd, buf, PG, NULL))
		kt_bail("PIN as uid 1000");
	kt_eq(kt_statfile("process", getpid(), "pinned_bytes", &v), 0, "uid 1000 sees its own process line");
	kt_eq(v, PG, "with its bytes");
	kt_eq(kt_statfile("process", pr->root_pid, "pinned_bytes", &v), -ENOENT,
	      "uid 1000 does not see root's process line");
	kt_eq(kt_statfile("user", 0, "pinned_bytes", &v), 0, "uid 1000 sees root's user totals");
	kt_eq(v, 2 * PG, "root's user total");
	kt_eq(kt_statfile("global", 0, "pinned_bytes", &v), 0, "uid 1000 sees the global line");
	kt_eq(v, 3 * PG, "global total");
	kt_eq(kt_statfile_line("hidden_processes", &hidden), 0, "hidden_processes line");
	kt_ok(hidden >= 1, "hidden_processes %llu >= 1", (unsigned long long)hidden);
	close(fd);
	return 0;
}

static int admin_reader(void *p)
{
	const struct probe *pr = p;
	uint64_t v = 0, hidden = 1;

	kt_eq(kt_statfile("process", pr->root_pid, "pinned_bytes", &v), 0,
	      "uid 1000 with CAP_SYS_ADMIN sees root's process line");
	kt_eq(kt_statfile_line("hidden_processes", &hidden), 0, "hidden_processes line");
	kt_eq(hidden, 0, "CAP_SYS_ADMIN: nothing hidden");
	return 0;
}

/*
 * pid 1 of a new pid namespace with its own /proc: it is listed as pid 1,
 * the test process (outside) is not, even for root.
 */
static int in_pid_ns(pid_t outside)
{
	char *buf = kt_map(PG, 1);
	uint64_t v = 0, hidden = 0;
	int fd, bad = 0;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("proc", "/proc", "proc", 0, NULL))
		return 0x40;
	fd = kt_open();
	if (kt_pin(fd, buf, PG, NULL))
		return 0x80;
	bad |= (kt_statfile("process", 1, "pinned_bytes", &v) || v != PG) << 0;
	bad |= (kt_statfile("process", outside, "pinned_bytes", &v) != -ENOENT) << 1;
	bad |= (kt_statfile_line("hidden_processes", &hidden) || hidden < 1) << 2;
	close(fd);
	return bad;
}

static void test_pid_ns(void)
{
	pid_t outer = getpid(), pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWPID | CLONE_NEWNS))
			_exit(errno == EINVAL ? 0x21 : 0x20);	/* EINVAL: no CONFIG_PID_NS */
		inner = fork();
		if (inner == 0)
			_exit(in_pid_ns(outer));
		if (inner < 0 || waitpid(inner, &status, 0) != inner || !WIFEXITED(status))
			_exit(0x10);
		_exit(WEXITSTATUS(status));
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		status = 0xff00;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0x21) {
		kt_skip("pid namespace: this kernel has none (CONFIG_PID_NS)");
		return;
	}
	kt_ok(WIFEXITED(status) && WEXITSTATUS(status) < 0x10, "pid namespace set up (status 0x%x)",
	      WEXITSTATUS(status));
	kt_ok(!(WEXITSTATUS(status) & 1), "pid namespace: its own process shows as pid 1");
	kt_ok(!(WEXITSTATUS(status) & 2), "pid namespace: a process outside it is not listed");
	kt_ok(!(WEXITSTATUS(status) & 4), "pid namespace: hidden_processes counts it");
}

int main(void)
{
	struct probe pr = { .root_pid = getpid() };
	char *buf = kt_map(2 * PG, 1);
	int fd;

	kt_limits_save();
	kt_limits_open();
	fd = kt_open();
	kt_eq(kt_pin(fd, buf, 2 * PG, NULL), 0, "root PINs 2 pages");
	kt_eq(kt_run_as(1000, 0, reader, &pr), 0, "reader uid 1000");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_SYS_ADMIN), admin_reader, &pr), 0, "reader uid 1000 with CAP_SYS_ADMIN");
	test_pid_ns();
	close(fd);
	kt_limits_restore();
	kt_expect_clean("t_statspriv end");
	return kt_done();
}
