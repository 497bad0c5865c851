// SPDX-License-Identifier: MIT
/*
 * Unload safety: while any /dev/pinmem file is open (with regions, without,
 * or only in a child that inherited it) delete_module() is refused and the
 * module keeps working; the VM's /init then unloads and reloads it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static int try_rmmod(unsigned int flags)
{
	return syscall(SYS_delete_module, "pinmem", flags) ? -errno : 0;
}

static int loaded(void)
{
	FILE *f = fopen("/proc/modules", "re");
	char line[256];
	int found = 0;

	while (f && fgets(line, sizeof(line), f))
		found |= !strncmp(line, "pinmem ", 7);
	if (f)
		fclose(f);
	return found;
}

static void expect_refused(const char *what)
{
	int r1 = try_rmmod(O_NONBLOCK), r2 = try_rmmod(0);

	kt_ok(r1 == -EAGAIN || r1 == -EBUSY, "%s: rmmod (O_NONBLOCK) refused (%s)", what, strerror(-r1));
	kt_ok(r2 == -EAGAIN || r2 == -EBUSY, "%s: rmmod refused (%s)", what, strerror(-r2));
	kt_ok(loaded() && access(PINMEM_DEVICE, F_OK) == 0, "%s: module still loaded", what);
}

int main(void)
{
	char *buf = kt_map(4 * KT_MIB, 1);
	struct pinmem_stats st;
	int fd = kt_open(), pfd[2], status;
	uint64_t h;
	pid_t pid;
	char c;

	kt_limits_save();
	kt_eq(kt_pin_handle(fd, buf, 4 * KT_MIB, &h), 0, "PIN 4 MiB");
	expect_refused("fd with a region");
	kt_eq(kt_regions_total(fd), 1, "region still there");
	kt_eq(kt_stats(fd, &st), 0, "STATS still works");
	kt_eq(st.global.pinned_bytes, 4 * KT_MIB, "still charged");
	kt_fill(buf, 4 * KT_MIB, 41);
	kt_eq(kt_unpin(fd, h), 0, "UNPIN still works");
	kt_eq(kt_check(buf, 4 * KT_MIB, 41), -1, "data intact");
	expect_refused("fd without regions");

	if (pipe(pfd))
		kt_bail("pipe");
	kt_eq(kt_pin_handle(fd, buf, 4 * KT_MIB, &h), 0, "PIN again");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(pfd[0]);
	close(fd);
	expect_refused("fd only open in a child");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(pfd[1]);
	kt_limits_restore();
	kt_expect_clean("t_rmmod end");
	return kt_done();
}
