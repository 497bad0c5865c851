// SPDX-License-Identifier: MIT
/*
 * Many cgroups cost a PIN nothing: one process pins a page from each of
 * 10,000 cgroups (a user with a delegated subtree can make that many
 * entries in the module's table), then a PIN from a cgroup new to the
 * module, and one from a cgroup it knows, are timed against the same with
 * an almost empty table (medians of many).  The module before issue #26
 * walked its whole table under the budget lock on every PIN from a new
 * cgroup (to prune it) and kept 64 hash buckets: the PIN cost grew with the
 * table.  Now lookups are O(log n) and pruning looks only at limited
 * entries, a batch per lock hold; a stats read copies the table in batches,
 * so the time it holds the lock does not grow with it either (its time,
 * which must grow with the rows it prints, is shown, not judged).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "common.h"

#define PG		KT_PAGE
#define CGROOT		"/sys/fs/cgroup"
#define CG2_MAGIC	0x63677270
#define NCG		10000
/*
 * Under lockdep (the debug kernel) making a cgroup and moving into it is
 * some 50 times slower; there a tenth of the cgroups checks the same code
 * for leaks and lock order, the flatness is shown on the Debian kernels.
 */
#define NCG_DEBUG	1000
#define ROUNDS		201

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Seconds of a PIN of one page of @buf and its UNPIN, from where we are. */
static double pin_once(int fd, char *buf, const char *where)
{
	double t0 = kt_now(), t;
	uint64_t h;

	if (kt_pin_handle(fd, buf, PG, &h))
		kt_bail("PIN from %s", where);
	t = kt_now() - t0;
	kt_unpin(fd, h);
	return t;
}

/*
 * The median, over ROUNDS, of the time of a PIN from a cgroup new to the
 * module (@fresh) or from one it holds an entry for (pmts/known), divided
 * by the time of a PIN from the root cgroup (no entry) just before it: on
 * a loaded host both slow down alike, so the quotient holds still while
 * raw times do not.
 */
static double pin_cost(int fd, char *buf, int fresh, const char *tag)
{
	double q[ROUNDS], base;
	char rel[64];
	int i;

	for (i = 0; i < ROUNDS; i++) {
		base = pin_once(fd, buf, "the root");
		if (fresh) {
			snprintf(rel, sizeof(rel), "pmts/%s%d", tag, i);
			kt_cg_mkdir(rel);
		} else {
			snprintf(rel, sizeof(rel), "pmts/known");
		}
		if (kt_cg_enter(rel))
			kt_bail("enter %s", rel);
		q[i] = pin_once(fd, buf, rel) / base;
		kt_cg_enter("");
		if (fresh)
			kt_cg_rmdir(rel);
	}
	qsort(q, ROUNDS, sizeof(q[0]), cmp);
	return q[ROUNDS / 2];
}

static double stats_cost(void)
{
	static char b[1 << 16];
	double t0 = kt_now();
	int fd = open(PINMEM_STATS_PATH, O_RDONLY);

	while (fd >= 0 && read(fd, b, sizeof(b)) > 0)
		;
	if (fd >= 0)
		close(fd);
	return kt_now() - t0;
}

int main(void)
{
	double fresh0, known0, fresh1, known1, st0, st1, t0;
	char *buf = kt_map(PG, 1), rel[64];
	int ncg = access("/proc/lockdep", F_OK) ? NCG : NCG_DEBUG;
	struct statfs sfs;
	uint64_t h, keep;
	int fd, i;

	if (statfs(CGROOT, &sfs) || sfs.f_type != CG2_MAGIC) {
		if (mount("cgroup2", CGROOT, "cgroup2", 0, NULL)) {
			kt_skip("no cgroup2: %s", strerror(errno));
			return kt_done();
		}
	}
	/* Moving a process otherwise waits for an RCU grace period (6.0+). */
	if (mount("none", CGROOT, NULL, MS_REMOUNT, "favordynmods"))
		kt_diag("remount favordynmods: %s (moves are slower)", strerror(errno));
	kt_limits_save();
	kt_limits_open();
	fd = kt_open();
	kt_cg_mkdir("pmts");
	kt_cg_mkdir("pmts/known");
	kt_cg_enter("pmts/known");
	if (kt_pin_handle(fd, buf, PG, &keep))	/* keeps pmts/known's entry */
		kt_bail("PIN in pmts/known");
	kt_cg_enter("");
	fresh0 = pin_cost(fd, buf, 1, "a");
	known0 = pin_cost(fd, buf, 0, "");
	st0 = stats_cost();

	t0 = kt_now();
	for (i = 0; i < ncg; i++) {
		snprintf(rel, sizeof(rel), "pmts/e%d", i);
		kt_cg_mkdir(rel);
		if (kt_cg_enter(rel) || kt_pin_handle(fd, buf, PG, &h))
			kt_bail("PIN from %s", rel);
	}
	kt_cg_enter("");
	kt_diag("%d cgroups with a pin each made in %.1f s", ncg, kt_now() - t0);
	fresh1 = pin_cost(fd, buf, 1, "b");
	known1 = pin_cost(fd, buf, 0, "");
	st1 = stats_cost();

	kt_diag("PIN from a new cgroup: %.2fx a PIN from the root with 2 entries, %.2fx with %d",
		fresh0, fresh1, ncg + 2);
	kt_diag("PIN from a known cgroup: %.2fx, %.2fx", known0, known1);
	kt_diag("stats file read: %.1f ms, %.1f ms (it prints every row)", st0 * 1e3, st1 * 1e3);
	kt_ok(fresh1 < 3 * fresh0, "PIN from a new cgroup: flat with %d cgroups (%.2fx)", ncg,
	      fresh1 / fresh0);
	kt_ok(known1 < 3 * known0, "PIN from a known cgroup: flat with %d cgroups (%.2fx)", ncg,
	      known1 / known0);

	close(fd);	/* releases the regions and their entries */
	for (i = 0; i < ncg; i++) {
		snprintf(rel, sizeof(rel), "pmts/e%d", i);
		kt_cg_rmdir(rel);
	}
	kt_cg_rmdir("pmts/known");
	kt_cg_rmdir("pmts");
	kt_limits_restore();
	kt_expect_clean("t_scale end");
	return kt_done();
}
