// SPDX-License-Identifier: MIT
/*
 * Who may act through an fd (include/uapi/pinmem.h): only the opener's
 * process (its threads, on the mm it had at open) may PIN, UNPIN and list
 * REGIONS.  A process the fd was passed to (SCM_RIGHTS), a fork child and a
 * vfork child (same mm, another process) get EPERM for all three and may
 * still ask STATS, GET_VERSION and GET_LIMITS; the opener's regions stay.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define PG	KT_PAGE

/* Bits of what a non-owner got wrong; 0 when everything was as the ABI says. */
static int non_owner_checks(int fd, void *buf, uint64_t handle)
{
	struct pinmem_region_info info;
	struct pinmem_regions r = { .regions = (uintptr_t)&info, .capacity = 1 };
	struct pinmem_version v;
	struct pinmem_stats st;
	struct pinmem_limits l;
	struct pinmem_pin p;
	int bad = 0;

	bad |= (kt_pin(fd, buf, PG, &p) != -EPERM) << 0;
	bad |= (p.refused != PINMEM_REFUSED_ACCESS) << 1;
	bad |= (kt_unpin(fd, handle) != -EPERM) << 2;
	bad |= (kt_ioctl(fd, PINMEM_IOC_REGIONS, &r) != -EPERM) << 3;
	bad |= (kt_stats(fd, &st) != 0) << 4;
	memset(&v, 0, sizeof(v));
	bad |= (kt_ioctl(fd, PINMEM_IOC_GET_VERSION, &v) != 0) << 5;
	bad |= (kt_get_limits(fd, 0, &l) != 0) << 6;
	return bad;
}

static void report(int bad, const char *who)
{
	static const char *const what[] = {
		"PIN is EPERM", "PIN writes reason ACCESS", "UNPIN is EPERM",
		"REGIONS is EPERM", "STATS works", "GET_VERSION works",
		"GET_LIMITS works",
	};
	size_t i;

	for (i = 0; i < sizeof(what) / sizeof(what[0]); i++)
		kt_ok(!(bad & (1 << i)), "%s: %s", who, what[i]);
}

static void expect_region_kept(int fd, uint64_t handle, const char *who)
{
	kt_eq(kt_regions_total(fd), 1, "%s: the opener's region is still there", who);
	kt_eq(kt_unpin(fd, handle), 0, "%s: the opener UNPINs it", who);
}

static void send_fd(int sock, int fd)
{
	char c = 'f', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(sock, &msg, 0) != 1)
		kt_bail("sendmsg: %s", strerror(errno));
}

static int recv_fd(int sock)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd = -1;

	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* The fd passed over a socket to a process that never held it. */
static void test_scm_rights(void)
{
	char *buf = kt_map(4 * PG, 1);
	int sv[2], fd, status;
	uint64_t h;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		if (errno != EAFNOSUPPORT && errno != ENOSYS)
			kt_bail("socketpair: %s", strerror(errno));
		kt_skip("SCM_RIGHTS: this kernel has no AF_UNIX sockets (CONFIG_NET/CONFIG_UNIX): %s",
			strerror(errno));
		munmap(buf, 4 * PG);
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int got;

		close(sv[0]);
		got = recv_fd(sv[1]);
		if (got < 0)
			_exit(0xff);
		/* The file is new: its first handle is 1. */
		_exit(non_owner_checks(got, buf, 1));
	}
	close(sv[1]);
	/* Opened after the fork: the child never inherited this file. */
	fd = kt_open();
	kt_eq(kt_pin_handle(fd, buf, 2 * PG, &h), 0, "opener PINs");
	send_fd(sv[0], fd);
	waitpid(pid, &status, 0);
	kt_ok(WIFEXITED(status) && WEXITSTATUS(status) != 0xff, "SCM_RIGHTS: the receiver got the fd");
	report(WIFEXITED(status) ? WEXITSTATUS(status) : 0x7f, "SCM_RIGHTS receiver");
	expect_region_kept(fd, h, "SCM_RIGHTS");
	close(sv[0]);
	close(fd);
	munmap(buf, 4 * PG);
}

static void test_fork(void)
{
	char *buf = kt_map(4 * PG, 1);
	int fd = kt_open(), status;
	uint64_t h;
	pid_t pid;

	kt_eq(kt_pin_handle(fd, buf, 2 * PG, &h), 0, "opener PINs");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(non_owner_checks(fd, buf + 2 * PG, h));
	waitpid(pid, &status, 0);
	report(WIFEXITED(status) ? WEXITSTATUS(status) : 0x7f, "fork child");
	expect_region_kept(fd, h, "fork");
	close(fd);
	munmap(buf, 4 * PG);
}

/*
 * A vfork child runs on the parent's mm until it execs or exits, but it is
 * another process: it may not pin into the parent's file.
 */
static void test_vfork(void)
{
	char *buf = kt_map(4 * PG, 1);
	int fd = kt_open(), status;
	volatile int pin_ret = 1, unpin_ret = 1;
	struct pinmem_pin p = { .addr = (uintptr_t)buf + 2 * PG, .length = PG };
	struct pinmem_unpin u = { 0 };
	uint64_t h;
	pid_t pid;

	kt_eq(kt_pin_handle(fd, buf, 2 * PG, &h), 0, "opener PINs");
	u.handle = h;
	fflush(stdout);
	pid = vfork();
	if (pid == 0) {
		pin_ret = ioctl(fd, PINMEM_IOC_PIN, &p) ? -errno : 0;
		unpin_ret = ioctl(fd, PINMEM_IOC_UNPIN, &u) ? -errno : 0;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	kt_eq(pin_ret, -EPERM, "vfork child: PIN on the parent's mm is EPERM");
	kt_eq(p.refused, PINMEM_REFUSED_ACCESS, "vfork child: reason ACCESS");
	kt_eq(unpin_ret, -EPERM, "vfork child: UNPIN is EPERM");
	expect_region_kept(fd, h, "vfork");
	close(fd);
	munmap(buf, 4 * PG);
}

struct thread_arg {
	int fd;
	char *buf;
	int ret;
};

static void *thread_pin(void *p)
{
	struct thread_arg *a = p;
	uint64_t h;

	a->ret = kt_pin_handle(a->fd, a->buf, PG, &h);
	if (!a->ret)
		a->ret = kt_unpin(a->fd, h);
	return NULL;
}

static void test_thread(void)
{
	struct thread_arg a = { .fd = kt_open(), .buf = kt_map(PG, 1), .ret = 1 };
	pthread_t t;

	if (pthread_create(&t, NULL, thread_pin, &a))
		kt_bail("pthread_create");
	pthread_join(t, NULL);
	kt_eq(a.ret, 0, "a thread of the opener may PIN and UNPIN");
	close(a.fd);
	munmap(a.buf, PG);
}

int main(void)
{
	kt_limits_save();
	kt_limits_open();
	test_scm_rights();
	test_fork();
	test_vfork();
	test_thread();
	kt_limits_restore();
	kt_expect_clean("t_owner end");
	return kt_done();
}
