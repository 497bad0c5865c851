// SPDX-License-Identifier: MIT
/*
 * One user, one budget, whatever uids it maps: uid 1000 makes a user
 * namespace whose uids 0-65535 map to the subordinate range 100000-165535
 * (what newuidmap does from /etc/subuid), and processes in it, as uid 5 and
 * 6 there (kuids 100005 and 100006), pin through /dev/pinmem.  Their pins
 * are charged to uid 1000's budget, which an override holds to one page:
 * the first PIN passes, the second (another mapped uid) and one of uid 1000
 * itself are EDQUOT.  The stats file shows the pin on uid 1000's user row
 * (no row for 100005), and the process row under uid 1000 with opener_uid
 * 100005, visible to uid 1000.  The module before issue #26 keyed budgets
 * by kuid: every mapped uid got a fresh budget.  A namespace root makes (a
 * container runtime giving a container its range of host uids) keeps its
 * processes' host uids: kuid 200005 there has a budget of its own, not
 * root's.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

#define PG	KT_PAGE
#define SUB	100000
#define ROOTSUB	200000	/* the range of a namespace root makes */

struct nsproc {
	pid_t pid;
	uid_t creator;	/* who makes the namespace: 1000, or root */
	int ready[2], go[2], res[2];
};

struct nsresult {
	int unshare, setuid, pin;
	uint32_t refused, st_uid;
	uint64_t user_pinned;
};

/* In a child: become uid 1000, unshare a user namespace, wait for its
 * maps, become @inner there, PIN one page, report, hold until told. */
static void ns_child(struct nsproc *n, uid_t inner)
{
	struct nsresult r = { 0 };
	struct pinmem_stats st;
	struct pinmem_pin p;
	char c = 0, *buf;
	int fd;

	if (n->creator && kt_become(n->creator, 0))
		_exit(2);
	r.unshare = unshare(CLONE_NEWUSER) ? -errno : 0;
	if (write(n->ready[1], &c, 1) != 1 || read(n->go[0], &c, 1) != 1)
		_exit(3);
	if (!r.unshare)
		r.setuid = setresgid(0, 0, 0) || setresuid(inner, inner, inner) ? -errno : 0;
	if (!r.unshare && !r.setuid) {
		buf = kt_map(PG, 1);
		fd = kt_open();
		r.pin = kt_pin(fd, buf, PG, &p);
		r.refused = p.refused;
		if (!kt_stats(fd, &st)) {
			r.st_uid = st.uid;
			r.user_pinned = st.user.pinned_bytes;
		}
	}
	if (write(n->res[1], &r, sizeof(r)) != sizeof(r))
		_exit(4);
	read(n->go[0], &c, 1);	/* hold the pin until the parent looked */
	_exit(0);
}

static int ns_start(struct nsproc *n, uid_t inner, struct nsresult *r)
{
	char path[64], map[64], c = 1;
	int ok;

	if (pipe(n->ready) || pipe(n->go) || pipe(n->res))
		kt_bail("pipe");
	fflush(stdout);
	n->pid = fork();
	if (n->pid == 0)
		ns_child(n, inner);
	if (read(n->ready[0], &c, 1) != 1)
		kt_bail("child did not start");
	snprintf(map, sizeof(map), "0 %u 65536\n", n->creator ? SUB : ROOTSUB);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", n->pid);
	ok = !kt_write(path, map);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", n->pid);
	ok &= !kt_write(path, map);
	if (write(n->go[1], &c, 1) != 1 || read(n->res[0], r, sizeof(*r)) != sizeof(*r))
		kt_bail("child failed");
	return ok;
}

static void ns_end(struct nsproc *n)
{
	char c = 1;
	int status;

	if (write(n->go[1], &c, 1) != 1)
		kt_bail("child gone");
	waitpid(n->pid, &status, 0);
	close(n->ready[0]), close(n->ready[1]);
	close(n->go[0]), close(n->go[1]);
	close(n->res[0]), close(n->res[1]);
}

/* uid 1000 itself, in the initial namespace: EDQUOT once its page is used. */
static int host_user(void *arg)
{
	char *buf = kt_map(PG, 1);
	struct pinmem_pin p;
	int fd = kt_open();
	uint64_t row = 0;

	kt_eq(kt_pin(fd, buf, PG, &p), -EDQUOT,
	      "uid 1000 in the initial namespace: its budget is the same one (EDQUOT)");
	kt_eq(kt_statfile("process", *(pid_t *)arg, "opener_uid", &row), 0,
	      "uid 1000 sees its namespace's process line");
	kt_eq(row, SUB + 5, "with opener_uid 100005");
	close(fd);
	return 0;
}

int main(void)
{
	struct pinmem_limits l = { .flags = PINMEM_LIMIT_SET_USER, .uid = 1000, .user_limit = PG };
	struct nsresult r1, r2, r3;
	struct nsproc n1 = { .creator = 1000 }, n2 = { .creator = 1000 }, n3 = { .creator = 0 };
	uint64_t v = 0;
	int fd;

	if (access("/proc/self/ns/user", F_OK)) {
		kt_skip("no user namespaces in this kernel");
		return kt_done();
	}
	kt_write("/proc/sys/kernel/unprivileged_userns_clone", "1");
	if (chmod("/dev/pinmem", 0666))
		kt_bail("chmod /dev/pinmem: %s", strerror(errno));
	kt_limits_save();
	kt_limits_open();
	fd = kt_open();
	kt_eq(kt_set_limits(fd, &l), 0, "uid 1000 may pin one page");

	kt_ok(ns_start(&n1, 5, &r1), "uid 1000's namespace maps 0-65535 to 100000-165535");
	kt_eq(r1.unshare, 0, "uid 1000 made a user namespace");
	kt_eq(r1.setuid, 0, "and became uid 5 in it (kuid 100005)");
	kt_eq(r1.pin, 0, "kuid 100005: PIN one page");
	kt_eq(r1.user_pinned, PG, "STATS: charged to the budget of the namespace's owner");
	kt_eq(r1.st_uid, 65534, "STATS uid: uid 1000, unmapped inside (overflow uid)");
	kt_eq(kt_statfile("user", 1000, "pinned_bytes", &v), 0, "stats file: a row for uid 1000");
	kt_eq(v, PG, "uid 1000's row holds the page");
	kt_eq(kt_statfile("user", SUB + 5, "pinned_bytes", &v), -ENOENT, "no row for kuid 100005");
	kt_eq(kt_statfile("process", n1.pid, "uid", &v), 0, "the process line");
	kt_eq(v, 1000, "is under uid 1000");
	kt_eq(kt_statfile("process", n1.pid, "opener_uid", &v), 0, "and says");
	kt_eq(v, SUB + 5, "it opened as kuid 100005");

	ns_start(&n2, 6, &r2);
	kt_eq(r2.pin, -EDQUOT, "kuid 100006 (another mapped uid): EDQUOT, one budget");
	kt_eq(r2.refused, PINMEM_REFUSED_USER, "reason USER");
	ns_end(&n2);
	kt_eq(kt_run_as(1000, 0, host_user, &n1.pid), 0, "uid 1000 on the host");
	ns_end(&n1);

	/* A namespace root made (a container runtime): its uids stay its own. */
	kt_ok(ns_start(&n3, 5, &r3), "root's namespace maps 0-65535 to 200000-265535");
	kt_eq(r3.pin, 0, "kuid 200005 in root's namespace: PIN one page");
	kt_eq(kt_statfile("user", ROOTSUB + 5, "pinned_bytes", &v), 0,
	      "charged to kuid 200005's own budget (a row for it)");
	kt_eq(v, PG, "which holds the page");
	kt_eq(kt_statfile("process", n3.pid, "uid", &v), 0, "its process line");
	kt_eq(v, ROOTSUB + 5, "is under kuid 200005, not root");
	ns_end(&n3);

	l.flags = PINMEM_LIMIT_CLEAR_USER;
	l.user_limit = 0;
	kt_eq(kt_set_limits(fd, &l), 0, "override cleared");
	close(fd);
	kt_limits_restore();
	chmod("/dev/pinmem", 0660);
	kt_expect_clean("t_userns end");
	return kt_done();
}
