// SPDX-License-Identifier: MIT
/*
 * Refusals since load (ABI 1.5): a PIN refused for each reason the module
 * counts (global, user, cgroup and RLIMIT_MEMLOCK budgets, a region cap, a
 * fault, too many references to a folio) by a process of a user of its own
 * that then exits.  Afterwards the refusal is still counted: globally and
 * for that reason only (REFUSALS), on the user's line of the stats file,
 * in REFUSALS of a later process of that user, and in pinctl's text, JSON
 * and Prometheus outputs.  The users kept for their counters are bounded
 * (max_idle_users): with 8 allowed and 40 users refused one after the
 * other, 8 stay, the rest are summed in users_evicted, and the users' and
 * the evicted counters still add up to the global ones.  A user that only
 * opened and closed leaves nothing behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define PG		KT_PAGE
#define UID_REASON	2100	/* + PINMEM_REASON_* */
#define UID_BOUND	3000
#define NBOUND		40
#define BOUND		8
#define CGROOT		"/sys/fs/cgroup"
#define CG2_MAGIC	0x63677270
#define PINCTL		"/tests/kernel/pinctl_vm"
#define OUT_MAX		(512 * 1024)

/*
 * The stats file's key for each reason (refused_fault also counts
 * refused_refs, as before ABI 1.5) and pinctl's name for it.
 */
static const char *const stat_key[PINMEM_REASON_COUNT] = {
	"refused_global", "refused_user", "refused_rlimit", "refused_fault",
	"refused_regions", "refused_cgroup", "refused_refs",
};
static const char *const pinctl_name[PINMEM_REASON_COUNT] = {
	"global", "user", "rlimit", "fault", "regions", "cgroup", "refs",
};
static const int reason_errno[PINMEM_REASON_COUNT] = {
	ENOSPC, EDQUOT, ENOMEM, EFAULT, EMFILE, EDQUOT, ETOOMANYREFS,
};

static char out[OUT_MAX];
static int have_cg, have_thp;

/* The child: one PIN refused for @arg's reason; exits non-zero otherwise. */
static int refuse(void *arg)
{
	unsigned int r = (unsigned int)(uintptr_t)arg;
	int fd = kt_open(), ret, i;
	struct pinmem_pin p;
	char *buf;

	switch (r) {
	case PINMEM_REASON_RLIMIT:
		kt_set_memlock(PG);
		/* fall through */
	case PINMEM_REASON_GLOBAL:
	case PINMEM_REASON_USER:
	case PINMEM_REASON_CGROUP:
		buf = kt_map(2 * PG, 1);
		ret = kt_pin(fd, buf, 2 * PG, &p);
		break;
	case PINMEM_REASON_FAULT:
		buf = kt_map(2 * PG, 0);
		munmap(buf, 2 * PG);
		ret = kt_pin(fd, buf, 2 * PG, &p);
		break;
	case PINMEM_REASON_REGIONS:
		buf = kt_map(2 * PG, 1);
		if (kt_pin(fd, buf, PG, &p))
			return 3;
		ret = kt_pin(fd, buf + PG, PG, &p);
		break;
	case PINMEM_REASON_REFS:
		buf = kt_map_thp(1);
		for (i = 0; i < PINMEM_FOLIO_MAX_PINS; i++)
			if (kt_pin(fd, buf, KT_HPAGE, &p))
				return 3;
		ret = kt_pin(fd, buf, KT_HPAGE, &p);
		break;
	default:
		return 2;
	}
	if (ret != -reason_errno[r])
		return 1;
	/* the file counts its own refusal, of that reason only */
	{
		struct pinmem_refusals rf;
		unsigned int k;

		if (kt_refusals(fd, &rf))
			return 4;
		for (k = 0; k < PINMEM_REASON_SLOTS; k++)
			if (rf.file[k] != (k == r))
				return 5;
	}
	/* exits with its regions and file: only the counters stay */
	return 0;
}

/* A later process of the same user sees its refusal in REFUSALS and STATS. */
static int check_later(void *arg)
{
	unsigned int r = (unsigned int)(uintptr_t)arg, i;
	int fd = kt_open(), bad = 0;
	struct pinmem_refusals rf;
	struct pinmem_stats st;

	if (kt_refusals(fd, &rf) || kt_stats(fd, &st))
		return 2;
	for (i = 0; i < PINMEM_REASON_SLOTS; i++)
		bad |= rf.user[i] != (i == r);
	for (i = 0; i < PINMEM_REASON_SLOTS; i++)
		bad |= rf.file[i] != 0;
	bad |= rf.uid != UID_REASON + r;
	bad |= rf.nr_reasons != PINMEM_REASON_COUNT;
	/* STATS's counters have no cgroup or refs field: fault counts refs */
	bad |= st.user.refused_global + st.user.refused_user + st.user.refused_rlimit +
	       st.user.refused_fault + st.user.refused_regions !=
	       (r == PINMEM_REASON_CGROUP ? 0 : 1);
	return bad;
}

/* Only opens and closes the device. */
static int open_close(void *arg)
{
	(void)arg;
	close(kt_open());
	return 0;
}

static int cg2_mounted(void)
{
	struct statfs sfs;

	return !statfs(CGROOT, &sfs) && sfs.f_type == CG2_MAGIC;
}

static int cg_set(const char *path, uint32_t flags, uint64_t limit)
{
	struct pinmem_cgroup c = { .path = (uintptr_t)path, .path_len = strlen(path),
				   .flags = flags, .limit_bytes = limit };
	int fd = kt_open(), ret = kt_ioctl(fd, PINMEM_IOC_CGROUP, &c);

	close(fd);
	return ret;
}

static void set_user_limit(uint32_t uid, uint32_t flags, uint64_t limit)
{
	struct pinmem_limits l = { .flags = flags, .uid = uid, .user_limit = limit };
	int fd = kt_open();

	if (kt_set_limits(fd, &l))
		kt_bail("SET_LIMITS for uid %u", uid);
	close(fd);
}

static void set_global_limit(uint64_t limit)
{
	struct pinmem_limits l = { .flags = PINMEM_LIMIT_SET_GLOBAL, .global_limit = limit };
	int fd = kt_open();

	if (kt_set_limits(fd, &l))
		kt_bail("SET_LIMITS global");
	close(fd);
}

/* Make the budget of reason @r refuse a 2-page PIN; undo() puts it back. */
static void arrange(unsigned int r, uint64_t *saved)
{
	switch (r) {
	case PINMEM_REASON_GLOBAL:
		set_global_limit(PG);
		break;
	case PINMEM_REASON_USER:
		set_user_limit(UID_REASON + r, PINMEM_LIMIT_SET_USER, PG);
		break;
	case PINMEM_REASON_REGIONS:
		*saved = kt_param("max_regions_per_file");
		if (kt_param_set("max_regions_per_file", 1))
			kt_bail("max_regions_per_file=1");
		break;
	case PINMEM_REASON_CGROUP:
		kt_cg_mkdir("pmref");
		if (cg_set("pmref", PINMEM_CGROUP_SET, PG) || kt_cg_enter("pmref"))
			kt_bail("cgroup pmref with a 1-page limit");
		break;
	}
}

static void undo(unsigned int r, uint64_t saved)
{
	switch (r) {
	case PINMEM_REASON_GLOBAL:
		set_global_limit(PINMEM_UNLIMITED);
		break;
	case PINMEM_REASON_USER:
		set_user_limit(UID_REASON + r, PINMEM_LIMIT_CLEAR_USER, 0);
		break;
	case PINMEM_REASON_REGIONS:
		kt_param_set("max_regions_per_file", saved);
		break;
	case PINMEM_REASON_CGROUP:
		kt_cg_enter("");
		cg_set("pmref", PINMEM_CGROUP_CLEAR, 0);
		kt_cg_rmdir("pmref");
		break;
	}
}

static int reason_runs(unsigned int r)
{
	if (r == PINMEM_REASON_CGROUP && !have_cg) {
		kt_skip("cgroup: no cgroup v2 in this kernel");
		return 0;
	}
	if (r == PINMEM_REASON_REFS && !have_thp) {
		kt_skip("refs: no THP in this kernel");
		return 0;
	}
	return 1;
}

static void one_reason(unsigned int r)
{
	uid_t uid = UID_REASON + r;
	struct pinmem_refusals a, b;
	uint64_t saved = 0, v;
	int fd = kt_open(), status;
	unsigned int i, bad = 0;

	if (!reason_runs(r))
		goto out;
	kt_eq(kt_refusals(fd, &a), 0, "%s: REFUSALS before", pinctl_name[r]);
	arrange(r, &saved);
	status = kt_run_as(uid, r == PINMEM_REASON_REFS ? KT_CAP(CAP_IPC_LOCK) : 0,
			   refuse, (void *)(uintptr_t)r);
	undo(r, saved);
	kt_eq(status, 0, "%s: uid %u's PIN refused with %s, then it exited", pinctl_name[r],
	      (unsigned)uid, strerror(reason_errno[r]));
	kt_eq(kt_refusals(fd, &b), 0, "%s: REFUSALS after", pinctl_name[r]);
	for (i = 0; i < PINMEM_REASON_SLOTS; i++)
		bad |= (b.global[i] - a.global[i] != (i == r)) << i;
	kt_eq(bad, 0, "%s: global count of that reason +1, no other", pinctl_name[r]);
	kt_eq(kt_statfile("user", uid, stat_key[r], &v), 0, "%s: uid %u keeps its stats line",
	      pinctl_name[r], (unsigned)uid);
	kt_eq(v, 1, "%s: and its %s is 1", pinctl_name[r], stat_key[r]);
	kt_eq(kt_statfile("user", uid, "regions", &v) || v, 0, "%s: with no region",
	      pinctl_name[r]);
	kt_eq(kt_run_as(uid, 0, check_later, (void *)(uintptr_t)r), 0,
	      "%s: a later process of uid %u sees it in REFUSALS and STATS", pinctl_name[r],
	      (unsigned)uid);
out:
	close(fd);
}

/* Run pinctl (this VM's pinctl_vm under that name) as root into out. */
static int pinctl3(const char *a1, const char *a2, const char *a3)
{
	char *argv[] = { "pinctl", (char *)a1, (char *)a2, (char *)a3, NULL };
	int pfd[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(pfd))
		kt_bail("pipe");
	fflush(stdout);
	pid = fork();
	if (!pid) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		setenv("PINCTL_PASSWD", "/etc/passwd", 1);
		execv(PINCTL, argv);
		_exit(127);
	}
	close(pfd[1]);
	while (got + 1 < sizeof(out) && (n = read(pfd[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int pinctl(const char *a1, const char *a2)
{
	return pinctl3(a1, a2, NULL);
}

/* pinmem_user_refused_total{uid="U",...,reason="R"} in out, or -1. */
static long long prom_user(unsigned int uid, const char *reason)
{
	char head[64], tail[64];

	snprintf(head, sizeof(head), "pinmem_user_refused_total{uid=\"%u\",", uid);
	snprintf(tail, sizeof(tail), ",reason=\"%s\"} ", reason);
	for (char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		char *t, *nl = strchr(p, '\n');

		if (strncmp(p, head, strlen(head)))
			continue;
		t = strstr(p, tail);
		if (t && (!nl || t < nl))
			return strtoll(t + strlen(tail), NULL, 10);
	}
	return -1;
}

/* In pinctl's JSON: the "refused" object after "uid": @uid, its @reason. */
static long long json_user(unsigned int uid, const char *reason)
{
	char key[64], *p, *q;

	snprintf(key, sizeof(key), "\"uid\": %u,", uid);
	p = strstr(out, key);
	if (!p || !(p = strstr(p, "\"refused\": {")))
		return -1;
	q = strchr(p, '}');
	snprintf(key, sizeof(key), "\"%s\": ", reason);
	p = strstr(p, key);
	if (!p || p > q)
		return -1;
	return strtoll(p + strlen(key), NULL, 10);
}

/*
 * As the refused user, through the STATS and REFUSALS ioctls (what pinctl
 * reads without the stats file): its own refusals by every reason.
 */
static int ioctl_view(void *arg)
{
	unsigned int r = (unsigned int)(uintptr_t)arg, i;
	int bad = 0;

	if (pinctl3("status", "--source=ioctl", "--prometheus"))
		return 2;
	for (i = 0; i < PINMEM_REASON_COUNT; i++)
		bad |= prom_user(UID_REASON + r, pinctl_name[i]) != (i == r);
	return bad;
}

static void pinctl_views(void)
{
	unsigned int r;
	char want[64];

	if (access(PINCTL, X_OK)) {
		kt_skip("pinctl: %s not in this VM", PINCTL);
		return;
	}
	kt_eq(pinctl("status", "--prometheus"), 0, "pinctl status --prometheus");
	for (r = 0; r < PINMEM_REASON_COUNT; r++)
		if (reason_runs(r))
			kt_eq(prom_user(UID_REASON + r, pinctl_name[r]), 1,
			      "prometheus: uid %u reason=\"%s\" 1 after it exited",
			      UID_REASON + r, pinctl_name[r]);
	kt_ok(strstr(out, "pinmem_refused_total{reason=\"refs\"}") &&
	      strstr(out, "pinmem_refused_total{reason=\"cgroup\"}") &&
	      strstr(out, "pinmem_refused_total{reason=\"regions\"}"),
	      "prometheus: machine refusals by every reason");
	for (r = 0; r < PINMEM_REASON_COUNT; r++)
		if (reason_runs(r))
			kt_eq(kt_run_as(UID_REASON + r, 0, ioctl_view, (void *)(uintptr_t)r), 0,
			      "pinctl --source=ioctl as uid %u: refused %s 1, other reasons 0",
			      UID_REASON + r, pinctl_name[r]);
	kt_eq(pinctl("status", "--json"), 0, "pinctl status --json");
	for (r = 0; r < PINMEM_REASON_COUNT; r++)
		if (reason_runs(r))
			kt_eq(json_user(UID_REASON + r, pinctl_name[r]), 1,
			      "json: uid %u refused.%s 1 after it exited", UID_REASON + r,
			      pinctl_name[r]);
	kt_eq(pinctl("status", NULL), 0, "pinctl status");
	for (r = 0; r < PINMEM_REASON_COUNT; r++) {
		snprintf(want, sizeof(want), ", %s ", pinctl_name[r]);
		kt_ok(strstr(out, r ? want : "since load: global ") != NULL,
		      "text: refusals since load name %s", pinctl_name[r]);
		snprintf(want, sizeof(want), "%u ", UID_REASON + r);
		if (reason_runs(r))
			kt_ok(strstr(out, want) != NULL, "text: a row for uid %u", UID_REASON + r);
	}
}

/* Sum of @key over the lines of the stats file that start with @rec. */
static uint64_t lines_sum(const char *rec, const char *key)
{
	static char buf[1 << 20];
	uint64_t sum = 0;
	char *line, *save = NULL;

	if (kt_read_file(PINMEM_STATS_PATH, buf, sizeof(buf)) < 0)
		kt_bail("read %s", PINMEM_STATS_PATH);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char k[40], *p;

		if (strncmp(line, rec, strlen(rec)) || line[strlen(rec)] != ' ')
			continue;
		snprintf(k, sizeof(k), " %s ", key);
		p = strstr(line, k);
		if (p)
			sum += strtoull(p + strlen(k), NULL, 10);
	}
	return sum;
}

static void bound(void)
{
	uint64_t saved = kt_param("max_idle_users"), v, idle, evicted, bad = 0;
	struct pinmem_refusals a, b;
	int fd = kt_open();
	unsigned int i;

	kt_eq(saved, 1024, "max_idle_users defaults to 1024");
	kt_eq(kt_param_set("max_idle_users", 0), -EINVAL, "max_idle_users=0 is refused");
	kt_eq(kt_param("max_idle_users"), saved, "and changes nothing");
	kt_eq(kt_run_as(3100, 0, open_close, NULL), 0, "uid 3100 opens and closes");
	kt_eq(kt_statfile("user", 3100, "pins", &v), -ENOENT, "no line for a user with nothing to show");
	kt_eq(kt_param_set("max_idle_users", BOUND), 0, "max_idle_users=%d", BOUND);
	kt_eq(kt_refusals(fd, &a), 0, "REFUSALS");
	kt_eq(a.max_idle_users, BOUND, "REFUSALS: max_idle_users %d", BOUND);
	kt_ok(a.idle_users <= BOUND, "the bound holds once written (%llu idle)",
	      (unsigned long long)a.idle_users);
	for (i = 0; i < NBOUND; i++)
		if (kt_run_as(UID_BOUND + i, 0, refuse, (void *)(uintptr_t)PINMEM_REASON_FAULT))
			kt_bail("uid %u: no fault refusal", UID_BOUND + i);
	kt_eq(kt_refusals(fd, &b), 0, "REFUSALS after %d users refused", NBOUND);
	kt_eq(b.idle_users, BOUND, "%d idle users kept", BOUND);
	kt_eq(b.evicted_users - a.evicted_users, a.idle_users + NBOUND - BOUND,
	      "the rest evicted");
	kt_eq(kt_statfile_line("idle_users", &idle), 0, "stats file: idle_users");
	kt_eq(idle, BOUND, "stats file: idle_users %d", BOUND);
	kt_eq(kt_statfile_line("max_idle_users", &v), 0, "stats file: max_idle_users");
	kt_eq(v, BOUND, "stats file: max_idle_users %d", BOUND);
	for (i = 0; i < NBOUND; i++)
		bad |= (uint64_t)((kt_statfile("user", UID_BOUND + i, "refused_fault", &v) == 0) !=
				  (i >= NBOUND - BOUND)) << i;
	kt_eq(bad, 0, "the %d users refused last have lines, the older ones none", BOUND);
	evicted = lines_sum("users_evicted", "users");
	kt_eq(evicted, b.evicted_users, "stats file: users_evicted users = REFUSALS'");
	for (i = 0; i < PINMEM_REASON_COUNT; i++) {
		uint64_t users = lines_sum("user", stat_key[i]);

		if (i == PINMEM_REASON_FAULT)
			users -= lines_sum("user", "refused_refs");
		kt_eq(users + b.evicted[i], b.global[i],
		      "%s: users' lines + evicted = global", pinctl_name[i]);
		kt_eq(lines_sum("users_evicted", stat_key[i]) -
		      (i == PINMEM_REASON_FAULT ? lines_sum("users_evicted", "refused_refs") : 0),
		      b.evicted[i],
		      "%s: stats file's users_evicted = REFUSALS'", pinctl_name[i]);
	}
	/* Lowering the bound drops the idle longest at once. */
	kt_eq(kt_param_set("max_idle_users", 2), 0, "max_idle_users=2");
	kt_eq(kt_refusals(fd, &a), 0, "REFUSALS after lowering the bound");
	kt_eq(a.idle_users, 2, "2 idle users kept");
	kt_eq(a.evicted_users - b.evicted_users, BOUND - 2, "%d more evicted", BOUND - 2);
	for (i = 0; i < PINMEM_REASON_COUNT; i++)
		kt_eq(a.global[i], b.global[i], "%s: global count unchanged", pinctl_name[i]);
	kt_ok(kt_statfile("user", UID_BOUND + NBOUND - 1, "refused_fault", &v) == 0 &&
	      kt_statfile("user", UID_BOUND + NBOUND - 3, "refused_fault", &v) == -ENOENT,
	      "the 2 refused last keep their lines");
	kt_eq(kt_param_set("max_idle_users", saved), 0, "max_idle_users back to %llu",
	      (unsigned long long)saved);
	close(fd);
}

static void bad_input(void)
{
	struct pinmem_refusals r;
	int fd = kt_open();

	memset(&r, 0, sizeof(r));
	r.flags = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, &r), -EINVAL, "REFUSALS flags 1: EINVAL");
	memset(&r, 0, sizeof(r));
	r.pad = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, &r), -EINVAL, "REFUSALS pad 1: EINVAL");
	memset(&r, 0, sizeof(r));
	r.pad2 = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, &r), -EINVAL, "REFUSALS pad2 1: EINVAL");
	memset(&r, 0, sizeof(r));
	r.reserved[3] = 1;
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, &r), -EINVAL, "REFUSALS reserved[3] 1: EINVAL");
	memset(&r, 0xff, sizeof(r));
	r.flags = r.pad = r.pad2 = 0;
	memset(r.reserved, 0, sizeof(r.reserved));
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, &r), 0, "REFUSALS ignores the out fields on input");
	kt_eq(r.nr_reasons, PINMEM_REASON_COUNT, "nr_reasons %d", PINMEM_REASON_COUNT);
	kt_eq(r.global[PINMEM_REASON_COUNT], 0, "slots past nr_reasons are 0");
	kt_eq(kt_ioctl(fd, PINMEM_IOC_REFUSALS, NULL), -EFAULT, "REFUSALS NULL: EFAULT");
	kt_eq(kt_ioctl(fd, _IOWR(PINMEM_IOC_MAGIC, 0x08, struct pinmem_stats), &r), -EINVAL,
	      "REFUSALS's number with another size: EINVAL");
	close(fd);
}

int main(void)
{
	unsigned int r;

	have_thp = !access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK);
	have_cg = cg2_mounted() || !mount("cgroup2", CGROOT, "cgroup2", 0, NULL);
	kt_limits_save();
	kt_limits_open();
	if (kt_param_set("enforce_rlimit", 1))
		kt_bail("enforce_rlimit=1");
	bad_input();
	for (r = 0; r < PINMEM_REASON_COUNT; r++)
		one_reason(r);
	pinctl_views();
	bound();
	kt_limits_restore();
	kt_expect_clean("t_refusals");
	return kt_done();
}
