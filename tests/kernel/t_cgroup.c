// SPDX-License-Identifier: MIT
/*
 * Per-cgroup budgets (cgroup v2, hierarchical): a PIN is charged to the
 * pinning task's cgroup at PIN time and to every ancestor; a PIN one page
 * over the tightest limit on that path is EDQUOT with reason CGROUP and the
 * refusing cgroup named in STATS.  A task moved after opening is judged by
 * its new cgroup; a charge (also a THP's, charged once per file) stays where
 * it was made when the task moves, a cgroup can be removed while charged
 * (its limit goes), paths are relative to a cgroup namespace, SET is
 * EOPNOTSUPP without a cgroup2 mount (GET and CLEAR still work), and
 * everything is back to zero at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sched.h>
#include <linux/capability.h>
#include "common.h"

#define PG		KT_PAGE
#define HP		KT_HPAGE
#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)
#define CGROOT		"/sys/fs/cgroup"
#define CG2_MAGIC	0x63677270

static int cg_ioctl(int fd, const char *path, uint32_t flags, uint64_t limit,
		    struct pinmem_cgroup *out)
{
	struct pinmem_cgroup c = { .path = (uintptr_t)path, .path_len = strlen(path),
				   .flags = flags, .limit_bytes = limit };
	int ret = kt_ioctl(fd, PINMEM_IOC_CGROUP, &c);

	if (out)
		*out = c;
	return ret;
}

static uint64_t cg_pinned(int fd, const char *path)
{
	struct pinmem_cgroup c;

	if (cg_ioctl(fd, path, 0, 0, &c))
		return ~0ULL;
	return c.pinned_bytes;
}

static uint64_t cg_id(const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), CGROOT "/%s", rel);
	return stat(p, &st) ? 0 : st.st_ino;
}

/*
 * A process in cgroup @rel that opens /dev/pinmem there, pins @ok bytes,
 * tries one page more, reports, then waits for a byte on @go before it
 * optionally moves to @move_to, reports again and exits (releasing).
 */
struct holder {
	const char *rel;
	size_t ok;
	const char *move_to;
	int res[2], go[2];
	pid_t pid;
};

struct report {
	int enter, pin, over;
	uint32_t over_reason;
	uint64_t cgroup_id, refuser;
};

static void holder_start(struct holder *h)
{
	if (pipe(h->res) || pipe(h->go))
		kt_bail("pipe");
	fflush(stdout);
	h->pid = fork();
	if (h->pid < 0)
		kt_bail("fork");
	if (h->pid == 0) {
		struct report r = { 0 };
		char *buf = kt_map(h->ok + PG, 1), c;
		struct pinmem_stats st;
		struct pinmem_pin p;
		int fd;

		r.enter = kt_cg_enter(h->rel);
		fd = kt_open();
		r.pin = kt_pin(fd, buf, h->ok, NULL);
		r.over = kt_pin(fd, buf + h->ok, PG, &p);
		r.over_reason = p.refused;
		if (!kt_stats(fd, &st)) {
			r.cgroup_id = st.cgroup_id;
			r.refuser = st.refused_cgroup_id;
		}
		if (write(h->res[1], &r, sizeof(r)) != sizeof(r) || read(h->go[0], &c, 1) != 1)
			_exit(1);
		if (h->move_to) {
			r.enter = kt_cg_enter(h->move_to);
			if (write(h->res[1], &r, sizeof(r)) != sizeof(r) ||
			    read(h->go[0], &c, 1) != 1)
				_exit(1);
		}
		close(fd);
		_exit(0);
	}
}

static void holder_report(struct holder *h, struct report *r)
{
	if (read(h->res[0], r, sizeof(*r)) != sizeof(*r))
		kt_bail("holder in %s did not report", h->rel);
}

static void holder_step(struct holder *h)
{
	if (write(h->go[1], "x", 1) != 1)
		kt_bail("holder in %s gone", h->rel);
}

static void holder_end(struct holder *h)
{
	int status;

	holder_step(h);
	waitpid(h->pid, &status, 0);
	close(h->res[0]);
	close(h->res[1]);
	close(h->go[0]);
	close(h->go[1]);
}

static void test_hierarchy(int fd)
{
	struct holder b = { .rel = "pmt/a/b", .ok = 2 * KT_MIB };
	struct holder c = { .rel = "pmt/a/c", .ok = 2 * KT_MIB, .move_to = "pmt" };
	struct pinmem_cgroup g;
	struct report r;

	kt_eq(cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_SET, 4 * KT_MIB + 100, &g), 0, "SET pmt/a 4 MiB + 100");
	kt_eq(g.limit_bytes, 4 * KT_MIB, "limit rounded down to pages");
	kt_eq(g.cgroup_id, cg_id("pmt/a"), "cgroup_id is the directory's inode number");
	kt_eq(cg_ioctl(fd, "/pmt/a/b", PINMEM_CGROUP_SET, 2 * KT_MIB, NULL), 0, "SET /pmt/a/b 2 MiB");

	holder_start(&b);
	holder_report(&b, &r);
	kt_eq(r.enter, 0, "holder entered pmt/a/b");
	kt_eq(r.cgroup_id, cg_id("pmt/a/b"), "its file is charged to pmt/a/b");
	kt_eq(r.pin, 0, "pmt/a/b: PIN its 2 MiB limit");
	kt_eq(r.over, -EDQUOT, "pmt/a/b: one page over is EDQUOT");
	kt_eq(r.over_reason, PINMEM_REFUSED_CGROUP, "reason: cgroup");
	kt_eq(r.refuser, cg_id("pmt/a/b"), "refused by pmt/a/b itself");
	kt_eq(cg_pinned(fd, "pmt/a/b"), 2 * KT_MIB, "pmt/a/b holds 2 MiB");
	kt_eq(cg_pinned(fd, "pmt/a"), 2 * KT_MIB, "pmt/a counts its child's 2 MiB");

	holder_start(&c);
	holder_report(&c, &r);
	kt_eq(r.pin, 0, "pmt/a/c (no limit of its own): PIN 2 MiB");
	kt_eq(r.over, -EDQUOT, "pmt/a/c: one page over pmt/a's 4 MiB is EDQUOT");
	kt_eq(r.refuser, cg_id("pmt/a"), "refused by the ancestor pmt/a");
	kt_eq(cg_pinned(fd, "pmt/a"), 4 * KT_MIB, "pmt/a holds 4 MiB");
	kt_eq(cg_ioctl(fd, "pmt/a", 0, 0, &g), 0, "GET pmt/a");
	kt_eq(g.refused, 1, "pmt/a refused 1");
	kt_eq(g.peak_bytes, 4 * KT_MIB, "pmt/a peak 4 MiB");

	/* The charge stays where it was made when the task moves... */
	holder_step(&c);
	holder_report(&c, &r);
	kt_eq(r.enter, 0, "holder moved from pmt/a/c to pmt");
	kt_eq(cg_pinned(fd, "pmt/a/c"), 2 * KT_MIB, "pmt/a/c keeps the moved task's charge");
	kt_eq(cg_pinned(fd, "pmt"), 4 * KT_MIB, "pmt: 4 MiB, not counted twice");
	/* ... and when its cgroup is removed. */
	kt_eq(kt_cg_rmdir("pmt/a/c"), 0, "rmdir pmt/a/c while its pins live");
	kt_eq(cg_pinned(fd, "pmt/a"), 4 * KT_MIB, "pmt/a still holds the removed child's charge");
	holder_end(&c);
	kt_eq(cg_pinned(fd, "pmt/a"), 2 * KT_MIB, "released: pmt/a back to 2 MiB");
	holder_end(&b);
	kt_eq(cg_pinned(fd, "pmt/a"), 0, "pmt/a back to 0");
	kt_eq(cg_pinned(fd, "pmt"), 0, "pmt back to 0");
	kt_eq(cg_ioctl(fd, "pmt/a/b", PINMEM_CGROUP_CLEAR, 0, &g), 0, "CLEAR pmt/a/b");
	kt_eq(g.limit_bytes, PINMEM_UNLIMITED, "pmt/a/b unlimited again");
	kt_eq(cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_CLEAR, 0, NULL), 0, "CLEAR pmt/a");
	{
		uint64_t v;

		kt_eq(kt_statfile("cgroup", (long long)cg_id("pmt/a"), "pinned_bytes", &v), -ENOENT,
		      "no stats line for pmt/a once it has no pins and no limit");
	}
}

/*
 * The contract of ABI 1.4: an unlimited cgroup the module keeps only for a
 * limited child forgets its peak once nothing is charged to it, as the
 * uapi says (the module before kept it); a struct one GET filled works as
 * it is for the next GET (it was EINVAL).
 */
static void test_contract(int fd)
{
	struct holder h = { .rel = "pmt/p/c", .ok = 2 * PG };
	struct pinmem_cgroup g;
	struct report r;

	kt_cg_mkdir("pmt/p");
	kt_cg_mkdir("pmt/p/c");
	kt_eq(cg_ioctl(fd, "pmt/p/c", PINMEM_CGROUP_SET, 2 * PG, NULL), 0, "SET pmt/p/c 2 pages");
	holder_start(&h);
	holder_report(&h, &r);
	kt_eq(r.pin, 0, "pmt/p/c: PIN 2 pages");
	kt_eq(cg_ioctl(fd, "pmt/p", 0, 0, &g), 0, "GET pmt/p (no limit of its own)");
	kt_eq(g.peak_bytes, 2 * PG, "pmt/p: peak 2 pages while they are pinned");
	holder_end(&h);
	kt_eq(cg_ioctl(fd, "pmt/p", 0, 0, &g), 0, "GET pmt/p after the last pin went");
	kt_eq(g.pinned_bytes, 0, "pmt/p: nothing pinned");
	kt_eq(g.peak_bytes, 0, "pmt/p: an unlimited cgroup forgets its peak with its last pin");
	kt_eq(kt_ioctl(fd, PINMEM_IOC_CGROUP, &g), 0, "the struct that GET filled works for the next GET");
	kt_eq(g.cgroup_id, cg_id("pmt/p"), "and names pmt/p");
	kt_eq(cg_ioctl(fd, "pmt/p/c", 0, 0, &g), 0, "GET pmt/p/c");
	kt_eq(g.peak_bytes, 2 * PG, "a limited cgroup keeps its peak");
	kt_eq(g.refused, 1, "and its refusals");
	kt_eq(cg_ioctl(fd, "pmt/p/c", PINMEM_CGROUP_CLEAR, 0, &g), 0, "CLEAR pmt/p/c");
	kt_eq(g.peak_bytes, 0, "cleared with nothing pinned: its peak goes too");
	kt_cg_rmdir("pmt/p/c");
	kt_eq(kt_cg_rmdir("pmt/p"), 0, "contract: cgroups removed");
}

/*
 * This process opens /dev/pinmem in unlimited pmt/o and moves to pmt/m
 * (4 pages): its next PINs are charged to and refused by pmt/m.  What was
 * pinned in pmt/o, and a THP taken first there, are un-charged from pmt/o
 * whichever cgroup the UNPIN comes from.
 */
static void test_pin_time(int fd)
{
	char *buf = kt_map(8 * PG, 1), *thp = kt_map_thp(1);
	char *none = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pinmem_stats st = { 0 };
	struct pinmem_pin p;
	uint64_t h1, h2, t1;
	int pfd;

	kt_cg_mkdir("pmt/o");
	kt_cg_mkdir("pmt/m");
	kt_eq(cg_ioctl(fd, "pmt/m", PINMEM_CGROUP_SET, 4 * PG, NULL), 0, "SET pmt/m 4 pages");
	kt_eq(kt_cg_enter("pmt/o"), 0, "entered pmt/o (no limit)");
	pfd = kt_open();
	kt_eq(kt_pin_handle(pfd, buf, 2 * PG, &h1), 0, "pmt/o: PIN 2 pages");
	kt_eq(kt_cg_enter("pmt/m"), 0, "moved to pmt/m with the file open");
	kt_eq(kt_pin_handle(pfd, buf + 2 * PG, 4 * PG, &h2), 0, "pmt/m: PIN its 4-page limit");
	kt_eq(kt_pin(pfd, buf + 6 * PG, PG, &p), -EDQUOT,
	      "pmt/m: one page more is EDQUOT (the file was opened in unlimited pmt/o)");
	kt_eq(p.refused, PINMEM_REFUSED_CGROUP, "reason: cgroup");
	kt_stats(pfd, &st);
	kt_eq(st.refused_cgroup_id, cg_id("pmt/m"), "refused by pmt/m");
	kt_eq(st.cgroup_id, cg_id("pmt/m"), "STATS cgroup_id: the cgroup of the last PIN");
	/* refused_cgroup_id follows the last refusal: 0 when no cgroup's. */
	kt_eq(kt_param_set("default_user_limit", 6 * PG), 0, "default_user_limit = 6 pages");
	kt_eq(kt_pin(pfd, buf + 6 * PG, PG, &p), -EDQUOT, "one page more: EDQUOT");
	kt_eq(p.refused, PINMEM_REFUSED_USER, "reason: the user budget, checked first");
	kt_stats(pfd, &st);
	kt_eq(st.refused_cgroup_id, 0, "refused by the user budget: refused_cgroup_id 0");
	kt_limits_open();
	kt_eq(kt_pin(pfd, buf + 6 * PG, PG, &p), -EDQUOT, "user limit open: pmt/m refuses again");
	kt_stats(pfd, &st);
	kt_eq(st.refused_cgroup_id, cg_id("pmt/m"), "refused_cgroup_id: pmt/m again");
	kt_eq(cg_pinned(fd, "pmt/o"), 2 * PG, "pmt/o holds the 2 pages pinned there");
	kt_eq(cg_pinned(fd, "pmt/m"), 4 * PG, "pmt/m holds the 4 pages pinned there");
	kt_eq(kt_unpin(pfd, h1), 0, "UNPIN, from pmt/m, the region pinned in pmt/o");
	kt_eq(cg_pinned(fd, "pmt/o"), 0, "un-charged from pmt/o");
	kt_eq(cg_pinned(fd, "pmt/m"), 4 * PG, "pmt/m unchanged");

	kt_eq(kt_cg_enter("pmt/o"), 0, "back to pmt/o");
	kt_eq(kt_pin(pfd, thp, PG, &p), 0, "pmt/o: PIN one page of a THP");
	t1 = p.handle;
	kt_eq(p.charged_bytes, HP, "the whole THP is charged");
	kt_eq(cg_pinned(fd, "pmt/o"), HP, "to pmt/o");
	kt_eq(kt_cg_enter("pmt/m"), 0, "to pmt/m again (full)");
	kt_eq(kt_pin(pfd, none, PG, NULL), -EACCES, "PIN of a PROT_NONE page: EACCES");
	kt_stats(pfd, &st);
	kt_eq(st.refused_cgroup_id, 0, "refused by no cgroup: refused_cgroup_id 0");
	kt_eq(kt_pin(pfd, thp + PG, PG, &p), 0, "pmt/m: PIN another page of the same THP");
	kt_eq(p.charged_bytes, 0, "nothing charged: the file holds the THP");
	kt_stats(pfd, &st);
	kt_eq(st.refused_cgroup_id, 0,
	      "pmt/m refused it on the way, but it succeeded: refused_cgroup_id still 0");
	kt_eq(cg_pinned(fd, "pmt/m"), 4 * PG, "pmt/m still at its 4 pages");
	kt_eq(kt_unpin(pfd, t1), 0, "UNPIN the THP page pinned in pmt/o");
	kt_eq(cg_pinned(fd, "pmt/o"), HP, "pmt/o keeps the THP's charge while the file holds it");
	kt_eq(kt_unpin(pfd, p.handle), 0, "UNPIN the THP page pinned in pmt/m");
	kt_eq(cg_pinned(fd, "pmt/o"), 0, "THP let go: un-charged from pmt/o, where it was charged");
	kt_eq(cg_pinned(fd, "pmt/m"), 4 * PG, "pmt/m unchanged");
	close(pfd);
	kt_eq(cg_pinned(fd, "pmt/m"), 0, "close: pmt/m back to 0");
	kt_eq(kt_cg_enter(""), 0, "back to the root cgroup");
	cg_ioctl(fd, "pmt/m", PINMEM_CGROUP_CLEAR, 0, NULL);
	kt_cg_rmdir("pmt/o");
	kt_cg_rmdir("pmt/m");
	munmap(buf, 8 * PG);
	munmap(thp, HP);
	munmap(none, PG);
}

/*
 * The limit of a removed cgroup goes away (its charge stays until its pins
 * go), and a cgroup made again at the same path starts without a limit.
 */
static void test_removed(int fd)
{
	char *buf = kt_map(8 * PG, 1);
	struct pinmem_cgroup g;
	uint64_t old, v = 0;
	int pfd;

	kt_cg_mkdir("pmt/r");
	old = cg_id("pmt/r");
	kt_eq(cg_ioctl(fd, "pmt/r", PINMEM_CGROUP_SET, 3 * PG, NULL), 0, "SET pmt/r 3 pages");
	kt_eq(kt_cg_enter("pmt/r"), 0, "entered pmt/r");
	pfd = kt_open();
	kt_eq(kt_pin(pfd, buf, 2 * PG, NULL), 0, "pmt/r: PIN 2 pages");
	kt_eq(kt_cg_enter(""), 0, "back to the root cgroup");
	kt_eq(kt_cg_rmdir("pmt/r"), 0, "rmdir pmt/r with its pins live");
	kt_eq(cg_ioctl(fd, "pmt/r", 0, 0, NULL), -ENOENT, "GET pmt/r: ENOENT");
	kt_eq(kt_statfile("cgroup", (long long)old, "limit_bytes", &v), 0, "removed pmt/r still has a stats line");
	kt_eq(v, PINMEM_UNLIMITED, "the removed cgroup's limit is gone");
	kt_eq(kt_statfile("cgroup", (long long)old, "pinned_bytes", &v), 0, "pinned_bytes of removed pmt/r");
	kt_eq(v, 2 * PG, "its charge stays while its pins live");

	kt_cg_mkdir("pmt/r");
	kt_ok(cg_id("pmt/r") != old, "pmt/r made again has a new id");
	kt_eq(cg_ioctl(fd, "pmt/r", 0, 0, &g), 0, "GET the new pmt/r");
	kt_eq(g.limit_bytes, PINMEM_UNLIMITED, "the new pmt/r has no limit");
	kt_eq(g.pinned_bytes, 0, "and nothing charged");
	kt_eq(kt_cg_enter("pmt/r"), 0, "entered the new pmt/r");
	kt_eq(kt_pin(pfd, buf + 2 * PG, 4 * PG, NULL), 0, "the new pmt/r: PIN 4 pages (the old limit was 3)");
	kt_eq(kt_cg_enter(""), 0, "back to the root cgroup");
	close(pfd);
	kt_eq(kt_statfile("cgroup", (long long)old, "pinned_bytes", &v), -ENOENT,
	      "pins gone: no stats line for the removed cgroup");
	kt_eq(cg_pinned(fd, "pmt/r"), 0, "the new pmt/r back to 0");
	kt_eq(kt_cg_rmdir("pmt/r"), 0, "rmdir the new pmt/r");
	munmap(buf, 8 * PG);
}

struct ns_ids {
	uint64_t ns, x, a;
};

/* The stats file, read without CAP_SYS_ADMIN in the namespace of pmt/ns. */
static int ns_stats_reader(void *arg)
{
	const struct ns_ids *id = arg;
	uint64_t v;

	kt_eq(kt_statfile("cgroup", id->x, "pinned_bytes", &v), 0,
	      "unprivileged reader in the namespace: the line of pmt/ns/x");
	kt_eq(v, 2 * PG, "pmt/ns/x: 2 pages");
	kt_eq(kt_statfile("cgroup", id->a, "limit_bytes", &v), -ENOENT,
	      "no line of pmt/a, outside the namespace");
	return 0;
}

/* In a cgroup namespace rooted at pmt/ns: paths are relative to it. */
static int in_cgroup_ns(void *arg)
{
	const struct ns_ids *id = arg;
	char *buf = kt_map(4 * PG, 1), line[256] = "";
	struct pinmem_cgroup g;
	struct pinmem_stats st = { 0 };
	struct pinmem_pin p;
	uint64_t v;
	FILE *f;
	int fd;

	if (kt_cg_enter("pmt/ns") || unshare(CLONE_NEWCGROUP))
		kt_bail("cgroup namespace: %s", strerror(errno));
	fd = kt_open();
	kt_eq(cg_ioctl(fd, "/", 0, 0, &g), 0, "in the namespace: GET /");
	kt_eq(g.cgroup_id, id->ns, "/ is pmt/ns");
	kt_eq(cg_ioctl(fd, "x", PINMEM_CGROUP_SET, 2 * PG, &g), 0, "in the namespace: SET x 2 pages");
	kt_eq(g.cgroup_id, id->x, "x is pmt/ns/x");
	kt_eq(cg_ioctl(fd, "pmt/ns/x", 0, 0, NULL), -ENOENT, "the path from the real root is ENOENT there");
	kt_eq(kt_cg_enter("pmt/ns/x"), 0, "moved to pmt/ns/x (the mount shows the real root)");
	f = fopen("/proc/self/cgroup", "re");
	if (!f || !fgets(line, sizeof(line), f))
		kt_bail("/proc/self/cgroup");
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	kt_ok(!strcmp(line, "0::/x"), "/proc/self/cgroup: 0::/x (%s)", line);
	kt_eq(kt_pin(fd, buf, 2 * PG, NULL), 0, "x: PIN its 2 pages");
	kt_eq(kt_pin(fd, buf + 2 * PG, PG, &p), -EDQUOT, "x: one page more is EDQUOT");
	kt_stats(fd, &st);
	kt_eq(st.refused_cgroup_id, id->x, "refused by pmt/ns/x");
	kt_eq(kt_statfile("cgroup", id->a, "limit_bytes", &v), 0,
	      "CAP_SYS_ADMIN reader in the namespace: every cgroup line (pmt/a)");
	kt_eq(kt_run_as(0, ALL_CAPS & ~KT_CAP(CAP_SYS_ADMIN), ns_stats_reader, (void *)id), 0,
	      "unprivileged reader ran");
	kt_eq(cg_ioctl(fd, "x", 0, 0, &g), 0, "GET x");
	kt_eq(g.pinned_bytes, 2 * PG, "x holds 2 pages");
	kt_eq(cg_ioctl(fd, "x", PINMEM_CGROUP_CLEAR, 0, NULL), 0, "CLEAR x");
	close(fd);
	return 0;
}

static void test_cgroup_ns(void)
{
	struct ns_ids id;
	int fd = kt_open();

	kt_cg_mkdir("pmt/ns");
	kt_cg_mkdir("pmt/ns/x");
	id.ns = cg_id("pmt/ns");
	id.x = cg_id("pmt/ns/x");
	id.a = cg_id("pmt/a");
	kt_eq(cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_SET, 64 * PG, NULL), 0,
	      "SET pmt/a, outside the namespace, so it has a line");
	kt_eq(kt_run_as(0, ALL_CAPS, in_cgroup_ns, &id), 0, "cgroup namespace case ran");
	cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_CLEAR, 0, NULL);
	close(fd);
	kt_cg_rmdir("pmt/ns/x");
	kt_eq(kt_cg_rmdir("pmt/ns"), 0, "cgroup namespace: cgroups removed");
}

#define FB_THREADS	8

struct fallback {
	int fd;
	char *thp;
	double end;
	long tries, other;
};

/* PIN a whole THP the file does not hold, over and over: always EDQUOT. */
static void *fallback_pinner(void *arg)
{
	struct fallback *a = arg;
	struct pinmem_pin p;

	while (kt_now() < a->end) {
		a->tries++;
		if (kt_pin(a->fd, a->thp, HP, &p) != -EDQUOT) {
			a->other++;
			kt_unpin(a->fd, p.handle);
		}
	}
	return NULL;
}

/*
 * A file at its cgroup's limit with a THP charged may pin a range no larger
 * than that before charging it (the range may lie in folios it holds); 8
 * threads doing so with THPs it does not hold must not hold more than one
 * such range at a time: real pins never pass the charged ones by more than
 * one THP (sampled from /proc/vmstat, with room for per-cpu counter lag).
 */
static void test_fallback_storm(int fd)
{
	char *thp = kt_map_thp(FB_THREADS + 1);
	struct fallback a[FB_THREADS];
	pthread_t t[FB_THREADS];
	long long base, v, max = 0;
	long tries = 0, other = 0;
	double end;
	int pfd, i;

	kt_cg_mkdir("pmt/f");
	kt_eq(cg_ioctl(fd, "pmt/f", PINMEM_CGROUP_SET, HP, NULL), 0, "SET pmt/f 2 MiB");
	kt_eq(kt_cg_enter("pmt/f"), 0, "entered pmt/f");
	pfd = kt_open();
	kt_eq(kt_pin(pfd, thp, PG, NULL), 0, "pmt/f: PIN one page of a THP, charged 2 MiB: full");
	base = kt_foll_pinned();
	end = kt_now() + 3;
	for (i = 0; i < FB_THREADS; i++) {
		a[i] = (struct fallback){ .fd = pfd, .thp = thp + (size_t)(i + 1) * HP, .end = end };
		if (pthread_create(&t[i], NULL, fallback_pinner, &a[i]))
			kt_bail("pthread_create");
	}
	while (kt_now() < end) {
		v = kt_foll_pinned() - base;
		if (v > max)
			max = v;
	}
	for (i = 0; i < FB_THREADS; i++) {
		pthread_join(t[i], NULL);
		tries += a[i].tries;
		other += a[i].other;
	}
	kt_eq(other, 0, "%ld PINs of a whole THP from %d threads: every one EDQUOT", tries, FB_THREADS);
	kt_ok(max <= 512 + 128,
	      "pinned before charged: at most one THP at a time (peak %lld pages over the charged ones, allowed 512 + 128 for counter lag)",
	      max);
	kt_eq(cg_pinned(fd, "pmt/f"), HP, "pmt/f still at its 2 MiB");
	close(pfd);
	kt_eq(kt_cg_enter(""), 0, "back to the root cgroup");
	cg_ioctl(fd, "pmt/f", PINMEM_CGROUP_CLEAR, 0, NULL);
	kt_eq(kt_cg_rmdir("pmt/f"), 0, "rmdir pmt/f");
	munmap(thp, (FB_THREADS + 1) * HP);
}

/* Pin and unpin 1-3 pages at random in @rel until @end; exit 0. */
static void storm_child(const char *rel, double end, unsigned int seed)
{
	char *buf;
	uint64_t h[8] = { 0 };
	int fd, i;

	if (kt_cg_enter(rel))
		_exit(1);
	fd = kt_open();
	buf = kt_map(8 * 4 * PG, 1);
	while (kt_now() < end) {
		i = (int)(rand_r(&seed) % 8);
		if (h[i]) {
			kt_unpin(fd, h[i]);
			h[i] = 0;
		} else if (kt_pin_handle(fd, buf + i * 4 * PG, (1 + rand_r(&seed) % 3) * PG, &h[i])) {
			h[i] = 0;
		}
	}
	close(fd);
	_exit(0);
}

/* Processes in two sibling cgroups under one limit: never over it. */
static void test_storm(int fd)
{
	uint64_t limit = 24 * PG, max = 0, v;
	pid_t pids[4];
	double end = kt_now() + 3;
	int i, status, ok = 1;

	kt_cg_mkdir("pmt/s");
	kt_cg_mkdir("pmt/s/x");
	kt_cg_mkdir("pmt/s/y");
	kt_eq(cg_ioctl(fd, "pmt/s", PINMEM_CGROUP_SET, limit, NULL), 0, "SET pmt/s 24 pages");
	kt_eq(cg_ioctl(fd, "pmt/s/x", PINMEM_CGROUP_SET, 16 * PG, NULL), 0, "SET pmt/s/x 16 pages");
	fflush(stdout);
	for (i = 0; i < 4; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			storm_child(i % 2 ? "pmt/s/x" : "pmt/s/y", end, (unsigned int)i + 1);
	}
	while (kt_now() < end) {
		v = cg_pinned(fd, "pmt/s");
		if (v > max && v != ~0ULL)
			max = v;
		v = cg_pinned(fd, "pmt/s/x");
		ok &= v <= 16 * PG;
	}
	for (i = 0; i < 4; i++) {
		waitpid(pids[i], &status, 0);
		ok &= WIFEXITED(status) && !WEXITSTATUS(status);
	}
	kt_ok(max <= limit && max > 0, "storm: pmt/s peaked at %llu pages, limit 24",
	      (unsigned long long)(max / PG));
	kt_ok(ok, "storm: pmt/s/x never over 16 pages, children exited cleanly");
	kt_eq(cg_pinned(fd, "pmt/s"), 0, "storm: back to 0");
	cg_ioctl(fd, "pmt/s/x", PINMEM_CGROUP_CLEAR, 0, NULL);
	cg_ioctl(fd, "pmt/s", PINMEM_CGROUP_CLEAR, 0, NULL);
	kt_cg_rmdir("pmt/s/x");
	kt_cg_rmdir("pmt/s/y");
	kt_eq(kt_cg_rmdir("pmt/s"), 0, "storm: cgroups removed");
}

static int unprivileged_set(void *arg)
{
	int fd = kt_open();
	struct pinmem_cgroup g;

	kt_eq(cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_SET, KT_MIB, NULL), -EPERM, "SET without CAP_SYS_ADMIN is EPERM");
	kt_eq(cg_ioctl(fd, "pmt/a", 0, 0, &g), 0, "GET without privileges works");
	close(fd);
	return 0;
}

static void test_bad(int fd)
{
	struct pinmem_cgroup c = { 0 };

	kt_eq(cg_ioctl(fd, "", PINMEM_CGROUP_SET, KT_MIB, NULL), -EINVAL, "SET on the root cgroup is EINVAL");
	kt_eq(cg_ioctl(fd, "pmt/nope", 0, 0, NULL), -ENOENT, "unknown cgroup is ENOENT");
	kt_eq(cg_ioctl(fd, "pmt/a/cgroup.procs", 0, 0, NULL), -ENOTDIR,
	      "a path to a file in a cgroup is ENOTDIR");
	kt_eq(cg_ioctl(fd, "pmt/a", PINMEM_CGROUP_SET | PINMEM_CGROUP_CLEAR, KT_MIB, NULL), -EINVAL,
	      "SET with CLEAR is EINVAL");
	kt_eq(cg_ioctl(fd, "pmt/a", 4, 0, NULL), -EINVAL, "unknown flag is EINVAL");
	kt_eq(cg_ioctl(fd, "pmt/a", 0, KT_MIB, &c), 0, "limit_bytes without SET is ignored (ABI 1.4)");
	kt_eq(c.limit_bytes, PINMEM_UNLIMITED, "and the limit in force comes back");
	c.path = (uintptr_t)"pmt/a";
	c.path_len = 5;
	c.reserved[2] = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_CGROUP, &c), -EINVAL, "reserved[2] = 1 is EINVAL");
	c.reserved[2] = 0;
	c.path_len = 4096;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_CGROUP, &c), -EINVAL, "path of 4096 bytes is EINVAL");
	c.path_len = 5;
	c.path = 0;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_CGROUP, &c), -EFAULT, "path NULL is EFAULT");
	kt_eq(kt_run_as(1000, 0, unprivileged_set, NULL), 0, "uid 1000");
}

static int cg2_mounted(void)
{
	struct statfs sfs;

	return !statfs(CGROOT, &sfs) && sfs.f_type == CG2_MAGIC;
}

/*
 * A cgroup v1-only host: no cgroup2 file system mounted, perhaps a v1
 * hierarchy.  Every task stays in the root of v2, so a new limit could
 * never apply: SET says "cgroup budgets need cgroup v2" (EOPNOTSUPP).  A
 * limit SET before the last cgroup2 mount went still holds, so GET and
 * CLEAR still work on it (and an unknown path is ENOENT as ever).
 */
static void test_v1_only(void)
{
	struct pinmem_cgroup c;
	int fd = kt_open(), v1;

	if (!cg2_mounted() && mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
		kt_bail("mount cgroup2 on %s: %s", CGROOT, strerror(errno));
	kt_cg_mkdir("pmtv1");
	kt_eq(cg_ioctl(fd, "pmtv1", PINMEM_CGROUP_SET, KT_MIB, NULL), 0,
	      "cgroup2 mounted: SET pmtv1 to 1 MiB");
	if (umount(CGROOT)) {
		kt_skip("v1-only: cannot unmount cgroup2 from %s: %s", CGROOT, strerror(errno));
		goto out;
	}
	kt_eq(cg_ioctl(fd, "", 0, 0, &c), 0, "no cgroup2 mounted: GET of the root works");
	kt_eq(c.limit_bytes, PINMEM_UNLIMITED, "no cgroup2 mounted: the root is unlimited");
	kt_eq(cg_ioctl(fd, "pmtv1", PINMEM_CGROUP_SET, 2 * KT_MIB, NULL), -EOPNOTSUPP,
	      "no cgroup2 mounted: SET is EOPNOTSUPP");
	kt_eq(cg_ioctl(fd, "pmtv1", 0, 0, &c), 0, "no cgroup2 mounted: GET of a limited cgroup works");
	kt_eq(c.limit_bytes, KT_MIB, "no cgroup2 mounted: the limit SET before is still there");
	kt_eq(cg_ioctl(fd, "pmt-nosuch", 0, 0, NULL), -ENOENT,
	      "no cgroup2 mounted: GET of an unknown path is ENOENT");
	kt_eq(cg_ioctl(fd, "pmt-nosuch", PINMEM_CGROUP_CLEAR, 0, NULL), -ENOENT,
	      "no cgroup2 mounted: CLEAR of an unknown path is ENOENT");
	v1 = !mkdir("/tmp/pmt-v1", 0755) || errno == EEXIST;
	if (v1 && !mount("cgroup", "/tmp/pmt-v1", "cgroup", 0, "none,name=pmtv1")) {
		kt_eq(cg_ioctl(fd, "pmtv1", PINMEM_CGROUP_SET, 2 * KT_MIB, NULL), -EOPNOTSUPP,
		      "only a v1 hierarchy mounted: SET is EOPNOTSUPP");
		umount("/tmp/pmt-v1");
	} else {
		kt_skip("v1-only: cannot mount a named v1 hierarchy: %s", strerror(errno));
	}
	rmdir("/tmp/pmt-v1");
	kt_eq(cg_ioctl(fd, "pmtv1", PINMEM_CGROUP_CLEAR, 0, &c), 0,
	      "no cgroup2 mounted: CLEAR of the limit works");
	kt_eq(c.limit_bytes, PINMEM_UNLIMITED, "no cgroup2 mounted: CLEAR dropped the limit");
	if (mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
		kt_bail("mount cgroup2 on %s: %s", CGROOT, strerror(errno));
out:
	cg_ioctl(fd, "pmtv1", PINMEM_CGROUP_CLEAR, 0, NULL);
	kt_cg_rmdir("pmtv1");
	close(fd);
}

/* Whether the kernel has the cgroup2 file system (/proc/filesystems). */
static int have_cgroup2(void)
{
	FILE *f = fopen("/proc/filesystems", "r");
	char line[128];
	int found = 0;

	if (!f)
		kt_bail("/proc/filesystems: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "\tcgroup2\n") != NULL;
	fclose(f);
	return found;
}

int main(void)
{
	int fd;

	if (!have_cgroup2()) {
		/* A kernel built without cgroups: the ioctl says so. */
		fd = kt_open();
		kt_eq(cg_ioctl(fd, "pmt", 0, 0, NULL), -EOPNOTSUPP,
		      "no cgroup v2 in this kernel: CGROUP is EOPNOTSUPP");
		close(fd);
		kt_expect_clean("t_cgroup end");
		return kt_done();
	}
	test_v1_only();
	if (!cg2_mounted() && mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
		kt_bail("mount cgroup2 on %s: %s", CGROOT, strerror(errno));
	kt_cg_mkdir("pmt");
	kt_cg_mkdir("pmt/a");
	kt_cg_mkdir("pmt/a/b");
	kt_cg_mkdir("pmt/a/c");
	kt_limits_save();
	kt_limits_open();
	fd = kt_open();
	test_hierarchy(fd);
	test_pin_time(fd);
	test_removed(fd);
	test_contract(fd);
	test_cgroup_ns();
	test_storm(fd);
	test_fallback_storm(fd);
	test_bad(fd);
	close(fd);
	kt_cg_rmdir("pmt/a/b");
	kt_cg_rmdir("pmt/a");
	kt_cg_rmdir("pmt");
	kt_limits_restore();
	kt_expect_clean("t_cgroup end");
	return kt_done();
}
