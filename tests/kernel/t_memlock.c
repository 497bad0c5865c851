// SPDX-License-Identifier: MIT
/*
 * One RLIMIT_MEMLOCK for pinmem and io_uring, in both directions.  io_uring
 * charges registered buffers to the user's locked_vm (checked) and the mm's
 * pinned_vm; pinmem charges both and checks both, so neither can pin past the
 * limit by using the other, and a fresh process or a re-exec of the same user
 * does not start from zero (pinned_vm alone would).  CAP_IPC_LOCK skips the
 * checks, not the charges.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include "common.h"

#define PG	KT_PAGE

static int ring_setup(void)
{
	struct io_uring_params params = { 0 };
	int ring = (int)syscall(__NR_io_uring_setup, 4, &params);

	if (ring < 0)
		kt_bail("io_uring_setup: %s", strerror(errno));
	return ring;
}

static int ring_register(int ring, void *buf, size_t len)
{
	struct iovec iov = { buf, len };

	return syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1) ? -errno : 0;
}

/*
 * io_uring releases a closed ring's buffers (and their locked_vm charge) from
 * a work item: wait until this user's locked_vm is back to @want bytes.
 */
static void wait_locked(uint64_t want, const char *when)
{
	struct pinmem_stats st;
	double end = kt_now() + 20;
	int fd = kt_open();

	while (!kt_stats(fd, &st) && st.user_locked_bytes != want && kt_now() < end)
		usleep(10000);
	close(fd);
	if (st.user_locked_bytes != want)
		kt_bail("%s: locked_vm stays at %llu, not %llu", when,
			(unsigned long long)st.user_locked_bytes, (unsigned long long)want);
}

/* PIN from a fresh process of the same user: 0 or -errno, reason in *why. */
static int pin_in_child(void *buf, size_t len, uint32_t *why)
{
	int pfd[2], status, res[2] = { -1, 0 };
	pid_t pid;

	if (pipe(pfd))
		kt_bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		kt_bail("fork");
	if (pid == 0) {
		struct pinmem_pin p;
		int fd = kt_open();

		res[0] = kt_pin(fd, buf, len, &p);
		res[1] = (int)p.refused;
		_exit(write(pfd[1], res, sizeof(res)) != sizeof(res));
	}
	waitpid(pid, &status, 0);
	if (read(pfd[0], res, sizeof(res)) != sizeof(res))
		kt_bail("child did not answer");
	close(pfd[0]);
	close(pfd[1]);
	*why = (uint32_t)res[1];
	return res[0];
}

/* pinmem holds the whole limit: io_uring and a fresh process are refused. */
static int pinmem_first(void *arg)
{
	size_t lim = 2 * KT_MIB;
	char *buf = kt_map(lim, 1), *more = kt_map(lim, 1);
	struct pinmem_stats st;
	uint32_t why = 0;
	int fd, ring;
	uint64_t h;

	kt_set_memlock(lim);
	wait_locked(0, "start");
	fd = kt_open();
	ring = ring_setup();
	kt_eq(kt_pin_handle(fd, buf, lim, &h), 0, "pinmem pins the whole 2 MiB limit");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.user_locked_bytes, lim, "user_locked_bytes: the user's locked_vm holds it");
	kt_eq(ring_register(ring, more, PG), -ENOMEM, "io_uring cannot register one more page");
	kt_eq(pin_in_child(more, PG, &why), -ENOMEM, "a fresh process of the user cannot pin one more page");
	kt_eq(why, PINMEM_REFUSED_RLIMIT_USER, "reason: RLIMIT_MEMLOCK on the user's locked_vm");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.file.refused_rlimit, 0, "the child's refusal is its own file's");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.user_locked_bytes, 0, "locked_vm back to 0");
	kt_eq(ring_register(ring, more, lim), 0, "io_uring registers 2 MiB once pinmem let go");
	close(ring);
	close(fd);
	wait_locked(0, "pinmem first, end");
	munmap(buf, lim);
	munmap(more, lim);
	return 0;
}

/* io_uring holds half: pinmem gets exactly the other half, per user. */
static int uring_first(void *arg)
{
	size_t lim = 2 * KT_MIB;
	char *ring_buf = kt_map(KT_MIB, 1), *buf = kt_map(lim, 1);
	struct pinmem_pin p;
	uint32_t why = 0;
	int fd, ring;

	kt_set_memlock(lim);
	wait_locked(0, "start");
	ring = ring_setup();
	kt_eq(ring_register(ring, ring_buf, KT_MIB), 0, "io_uring registers 1 MiB");
	/* A fresh process: its pinned_vm is 0, the user's locked_vm is not. */
	kt_eq(pin_in_child(buf, KT_MIB + PG, &why), -ENOMEM, "another process: 1 MiB + 1 page is refused");
	kt_eq(why, PINMEM_REFUSED_RLIMIT_USER, "reason: the user's locked_vm");
	kt_eq(pin_in_child(buf, KT_MIB, &why), 0, "another process: the 1 MiB left is allowed");
	fd = kt_open();
	kt_eq(kt_pin(fd, buf, KT_MIB + PG, &p), -ENOMEM, "same process: 1 MiB + 1 page is refused");
	kt_eq(p.refused, PINMEM_REFUSED_RLIMIT, "reason: the mm's pinned_vm (io_uring's pin is there too)");
	close(fd);
	close(ring);
	wait_locked(0, "io_uring first, end");
	munmap(ring_buf, KT_MIB);
	munmap(buf, lim);
	return 0;
}

/* CAP_IPC_LOCK: no check, but the charge is made. */
static int ipc_lock(void *arg)
{
	char *buf = kt_map(2 * KT_MIB, 1);
	struct pinmem_stats st;
	int fd;
	uint64_t h;

	kt_set_memlock(KT_MIB);
	wait_locked(0, "start");
	fd = kt_open();
	kt_eq(kt_pin_handle(fd, buf, 2 * KT_MIB, &h), 0, "CAP_IPC_LOCK: PIN twice the rlimit");
	kt_eq(kt_stats(fd, &st), 0, "STATS");
	kt_eq(st.user_locked_bytes, 2 * KT_MIB, "CAP_IPC_LOCK: still charged to locked_vm");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN");
	close(fd);
	munmap(buf, 2 * KT_MIB);
	return 0;
}

int main(void)
{
	kt_limits_save();
	kt_limits_open();
	kt_eq(kt_param_set("enforce_rlimit", 1), 0, "enforce_rlimit = 1");
	kt_eq(kt_run_as(1000, 0, pinmem_first, NULL), 0, "pinmem first, then io_uring and a new process");
	kt_eq(kt_run_as(1000, 0, uring_first, NULL), 0, "io_uring first, then pinmem");
	kt_eq(kt_run_as(1000, KT_CAP(CAP_IPC_LOCK), ipc_lock, NULL), 0, "CAP_IPC_LOCK");
	kt_limits_restore();
	kt_expect_clean("t_memlock end");
	return kt_done();
}
