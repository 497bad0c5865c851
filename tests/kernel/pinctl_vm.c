// SPDX-License-Identifier: MIT
/*
 * pinctl against the real module, inside the test VM.  This program is also
 * pinctl (called with argv[0] "pinctl" it runs pinctl's main), so the VM
 * needs no second binary; each case runs it through exec like a user would.
 *
 *  - status (text, JSON, Prometheus, STATS ioctl) shows a process's region
 *    with the right size, owner and command; top and doctor run;
 *  - limits set by root take effect (parameters, GET_LIMITS, a refused pin),
 *    by a user without CAP_SYS_ADMIN are refused with nothing changed, and
 *    bad input changes nothing;
 *  - cgroup budgets (cgroup v2 mounted here if it is not): limits set
 *    --cgroup on two levels takes effect (GET, a refused pin), limits and
 *    status --prometheus show path, pinned, limit, peak and refusals, limits
 *    clear / PATH=none drop them, limits apply FILE sets them, and bad input,
 *    a missing cgroup or a user without CAP_SYS_ADMIN changes nothing;
 *  - with the module unloaded, the kernel-counter view matches /proc/vmstat,
 *    /proc/meminfo and a process's VmLck; then the module is loaded again by
 *    packaging/modprobe.d/pinmem.conf's install line (insmod for modprobe):
 *    without /etc/pinmem/limits.conf the cgroup limits are gone, with it
 *    that line puts them back.
 *  A kernel without cgroups (the debug kernel) gets "need cgroup v2".
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "pinctl.h"

#define USER_UID	1000
#define USER_NAME	"pmuser"
#define PIN_BYTES	(8 * KT_MIB)
#define LOCK_BYTES	(4 * KT_MIB)
#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)
#define OUT_MAX		(256 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

static int slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + total, len - 1 - (size_t)total)) > 0)
		total += n;
	buf[total] = '\0';
	close(fd);
	return 0;
}

/*
 * Run "pinctl ARGS..." as @uid with @caps (uid 0 and ALL_CAPS: plain root);
 * stdout and stderr land in out/err.  Returns the exit status.
 */
static int pinctl(uid_t uid, uint64_t caps, ...)
{
	char *argv[32] = { "pinctl" };
	int argc = 1, status;
	va_list ap;
	pid_t pid;

	va_start(ap, caps);
	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		kt_bail("fork: %s", strerror(errno));
	if (!pid) {
		int o = open("/tmp/pinctl-vm.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open("/tmp/pinctl-vm.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		/* root regains every capability on exec unless the bounding set drops it */
		for (int c = 0; c <= CAP_LAST_CAP; c++)
			if (!(caps & (1ULL << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) &&
			    errno != EINVAL)
				_exit(124);
		if ((uid || caps != ALL_CAPS) && kt_become(uid, caps))
			_exit(125);
		/* static binary: no NSS, read the VM's passwd file directly */
		setenv("PINCTL_PASSWD", "/etc/passwd", 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid)
		kt_bail("waitpid: %s", strerror(errno));
	slurp("/tmp/pinctl-vm.out", out, sizeof(out));
	slurp("/tmp/pinctl-vm.err", err, sizeof(err));
	if (!WIFEXITED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

#define ROOT 0, ALL_CAPS
#define USER USER_UID, 0

/* Value of the Prometheus series @series ("name{labels}") in out, or -1. */
/* SERIES{labels}: the labels named first; pinctl may add more (a cgroup's id). */
static long long prom(const char *series)
{
	size_t n = strlen(series), m = n && series[n - 1] == '}' ? n - 1 : n;

	for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		const char *v = p + m;

		if (strncmp(p, series, m))
			continue;
		if (m < n) {
			if (*v == ',')
				v = strpbrk(v, "}\n");
			if (!v || *v != '}')
				continue;
			v++;
		}
		if (*v == ' ')
			return strtoll(v + 1, NULL, 10);
	}
	return -1;
}

static int has(const char *buf, const char *s)
{
	return strstr(buf, s) != NULL;
}

static int one_line(const char *buf)
{
	const char *nl = strchr(buf, '\n');

	return nl && !nl[1];
}

/* Print pinctl's output as TAP comments, for the log (and the README). */
static void show(const char *title)
{
	const char *l = out, *nl;

	printf("# --- %s\n", title);
	for (; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		if (!nl)
			nl = l + strlen(l) - 1;
		printf("#   %.*s\n", (int)(nl - l + (*nl != '\n')), l);
	}
}

/* A child that pins @len bytes (as USER_UID or root) or mlocks them, until released. */
enum hold { PIN_AS_USER, PIN_AS_ROOT, MLOCK };
static const char *const hold_comm[] = { "pctl-pinner", "pctl-rootpin", "pctl-locker" };

struct holder {
	pid_t pid;
	int release;	/* write end: closing it lets the child go */
};

/*
 * Fork a child that runs @work(@arg) (0, or a failure code it reports) and
 * then holds what it did until holder_stop(); the child's code, or 5 when
 * it died before saying.
 */
static char holder_fork(struct holder *h, const char *comm, char (*work)(void *), void *arg)
{
	int ready[2], go[2];
	char status = 1;

	if (pipe(ready) || pipe(go))
		kt_bail("pipe: %s", strerror(errno));
	fflush(stdout);
	h->pid = fork();
	if (h->pid < 0)
		kt_bail("fork: %s", strerror(errno));
	if (!h->pid) {
		char c, dummy;

		close(ready[0]);
		close(go[1]);
		prctl(PR_SET_NAME, comm);
		c = work(arg);
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		while (read(go[0], &dummy, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	h->release = go[1];
	if (read(ready[0], &status, 1) != 1)
		status = 5;
	close(ready[0]);
	return status;
}

struct hold_work {
	size_t len;
	enum hold how;
};

static char hold_work(void *arg)
{
	const struct hold_work *w = arg;
	void *buf = kt_map(w->len, 1);
	char c = 0;
	int fd;

	if (w->how == MLOCK)
		return mlock(buf, w->len) ? 4 : 0;
	if (w->how == PIN_AS_USER && kt_become(USER_UID, 0))
		c = 2;
	fd = c ? -1 : open(PINMEM_DEVICE, O_RDWR | O_CLOEXEC);
	if (!c && (fd < 0 || kt_pin(fd, buf, w->len, NULL)))
		c = 3;
	return c;
}

static void holder_start(struct holder *h, size_t len, enum hold how)
{
	struct hold_work w = { .len = len, .how = how };
	char status = holder_fork(h, hold_comm[how], hold_work, &w);

	if (status)
		kt_bail("%s child failed (%d)", hold_comm[how], status);
}

static void holder_stop(struct holder *h)
{
	int st;

	close(h->release);
	waitpid(h->pid, &st, 0);
}

/* A pin of @len bytes by USER_UID, in a child; 0 or -errno. */
static int user_pin(void *arg)
{
	size_t len = *(size_t *)arg;
	void *buf = kt_map(len, 1);
	int fd = kt_open(), ret = kt_pin(fd, buf, len, NULL);

	close(fd);
	return ret == -EDQUOT ? 0 : 1;
}

static void status_views(const struct holder *h)
{
	char series[256];
	int rc;

	rc = pinctl(ROOT, "status", NULL);
	kt_eq(rc, 0, "status exits 0");
	show("pinctl status (8 MiB pinned by pmuser's pctl-pinner)");
	snprintf(series, sizeof(series), "%8d %-16s %-16s %8d %11s", h->pid, USER_NAME,
		 "pctl-pinner", 1, "8 MiB");
	kt_ok(has(out, series), "status lists pid %d, pmuser, pctl-pinner, 1 region, 8 MiB", h->pid);
	kt_ok(has(out, "budgets enforced"), "status says budgets are enforced");

	/* bounded by default: no series per process, the rest as pid="other" */
	rc = pinctl(ROOT, "status", "--prometheus", NULL);
	kt_eq(rc, 0, "status --prometheus exits 0");
	kt_ok(!has(out, "pid=\"1") && !has(out, "pid=\"2") && !has(out, "pid=\"3") &&
	      !has(out, "comm=\"pctl-pinner\""), "prometheus: no process series by default");
	kt_eq(prom("pinmem_process_pinned_bytes{pid=\"other\"}"), PIN_BYTES,
	      "prometheus: pid=\"other\" holds the 8 MiB");
	rc = pinctl(ROOT, "status", "--prometheus", "--processes=5", NULL);
	kt_eq(rc, 0, "status --prometheus --processes=5 exits 0");
	snprintf(series, sizeof(series),
		 "pinmem_process_pinned_bytes{pid=\"%d\",uid=\"%d\",user=\"%s\",comm=\"pctl-pinner\"}",
		 h->pid, USER_UID, USER_NAME);
	kt_eq(prom(series), PIN_BYTES, "prometheus: the process pinned 8 MiB");
	kt_eq(prom("pinmem_process_pinned_bytes{pid=\"other\"}"), 0,
	      "prometheus: nothing left for pid=\"other\"");
	snprintf(series, sizeof(series),
		 "pinmem_process_regions{pid=\"%d\",uid=\"%d\",user=\"%s\",comm=\"pctl-pinner\"}",
		 h->pid, USER_UID, USER_NAME);
	kt_eq(prom(series), 1, "prometheus: in one region");
	kt_eq(prom("pinmem_user_pinned_bytes{uid=\"1000\",user=\"pmuser\"}"), PIN_BYTES,
	      "prometheus: charged to pmuser");
	kt_eq(prom("pinmem_pinned_bytes"), PIN_BYTES, "prometheus: global pinned 8 MiB");
	kt_eq(prom("pinmem_module_loaded"), 1, "prometheus: module loaded");

	rc = pinctl(ROOT, "status", "--json", NULL);
	kt_eq(rc, 0, "status --json exits 0");
	snprintf(series, sizeof(series), "\"pid\": %d,\n      \"uid\": %d,\n      \"user\": \"%s\",\n"
		 "      \"comm\": \"pctl-pinner\",\n      \"regions\": 1,\n      \"pinned_bytes\": %lu,",
		 h->pid, USER_UID, USER_NAME, PIN_BYTES);
	kt_ok(has(out, series), "json: the process, its owner and 8 MiB");

	rc = pinctl(ROOT, "status", "--source", "ioctl", "--prometheus", NULL);
	kt_eq(rc, 0, "status --source ioctl exits 0");
	kt_eq(prom("pinmem_pinned_bytes"), PIN_BYTES, "STATS ioctl: global pinned 8 MiB");

	rc = pinctl(USER, "status", NULL);
	kt_eq(rc, 0, "status as pmuser exits 0");
	kt_ok(has(out, "pctl-pinner"), "pmuser sees the process too");

	rc = pinctl(ROOT, "top", "-n", "2", "-d", "0.1", NULL);
	kt_eq(rc, 0, "top -n 2 exits 0");
	kt_ok(has(out, "refresh 1\n") && has(out, "refresh 2\n") && !has(out, "refresh 3"),
	      "top printed two frames");

	rc = pinctl(USER, "doctor", NULL);
	show("pinctl doctor (as pmuser)");
	kt_ok(has(out, "[ ok ] module    pinmem loaded, ABI 1."), "doctor: module ok");
	kt_ok(has(out, "[ ok ] device    /dev/pinmem"), "doctor: pmuser may open /dev/pinmem");
	kt_eq(rc, 0, "doctor exits 0 (no FAIL)");
}

static void limits_cases(void)
{
	uint64_t g = kt_param("global_limit"), d = kt_param("default_user_limit");
	struct pinmem_limits lim;
	size_t len = 12 * KT_MIB;
	int rc, fd;

	/* refused: bad input, no CAP_SYS_ADMIN (a user, and root without it) */
	rc = pinctl(ROOT, "limits", "set", "--global", "12Q", NULL);
	kt_eq(rc, 2, "limits set --global 12Q: usage error");
	kt_ok(one_line(err) && !out[0], "one line on stderr: %s", err);
	rc = pinctl(ROOT, "limits", "set", "--global", "1G", "--user", "nosuchuser=1G", NULL);
	kt_eq(rc, 2, "limits set --user nosuchuser=1G: usage error");
	rc = pinctl(USER, "limits", "set", "--global", "1G", "--user", "pmuser=1G", NULL);
	kt_eq(rc, 1, "limits set as pmuser fails");
	kt_ok(one_line(err) && has(err, "CAP_SYS_ADMIN") && has(err, "nothing changed"),
	      "pmuser is told: %s", err);
	rc = pinctl(0, ALL_CAPS & ~(1ULL << CAP_SYS_ADMIN), "limits", "set", "--global", "1G", NULL);
	kt_eq(rc, 1, "limits set as root without CAP_SYS_ADMIN fails");
	/* a user who may not open /dev/pinmem at all */
	kt_eq(chmod(PINMEM_DEVICE, 0600), 0, "chmod 0600 /dev/pinmem");
	rc = pinctl(USER, "limits", "set", "--global", "1G", NULL);
	kt_eq(rc, 1, "limits set by a user without access fails");
	kt_ok(one_line(err) && has(err, "Permission denied") && has(err, "nothing changed"),
	      "and says: %s", err);
	rc = pinctl(USER, "doctor", NULL);
	kt_eq(rc, 1, "doctor fails for that user");
	kt_ok(has(out, "[FAIL] device    /dev/pinmem (mode 0600, owner 0:990): Permission denied for uid 1000"),
	      "doctor names the device's mode and the user");
	kt_eq(chmod(PINMEM_DEVICE, 0660), 0, "chmod 0660 /dev/pinmem");
	kt_eq(kt_param("global_limit"), g, "global limit unchanged");
	kt_eq(kt_param("default_user_limit"), d, "default user limit unchanged");

	/* root: one call for global, default and the first user */
	rc = pinctl(ROOT, "limits", "set", "--global", "64M", "--user", "pmuser=16M",
		    "--default-user", "32M", "--enforce-rlimit", "on", NULL);
	kt_eq(rc, 0, "limits set by root exits 0");
	kt_ok(has(out, "set global 64 MiB, default-user 32 MiB, enforce-rlimit on, user pmuser (uid 1000) 16 MiB"),
	      "it says what it set: %s", out);
	kt_eq(kt_param("global_limit"), 64 * KT_MIB, "global_limit parameter is 64 MiB");
	kt_eq(kt_param("default_user_limit"), 32 * KT_MIB, "default_user_limit is 32 MiB");
	fd = kt_open();
	kt_eq(kt_get_limits(fd, USER_UID, &lim), 0, "GET_LIMITS");
	close(fd);
	kt_eq(lim.user_limit, 16 * KT_MIB, "pmuser's limit is 16 MiB");
	kt_ok(lim.user_flags & PINMEM_USER_OVERRIDDEN, "as an override");
	/* 8 MiB held + 12 MiB > 16 MiB: the user budget refuses */
	kt_eq(kt_run_as(USER_UID, 0, user_pin, &len), 0, "a 12 MiB pin of pmuser is refused (EDQUOT)");

	rc = pinctl(ROOT, "limits", NULL);
	kt_eq(rc, 0, "limits exits 0");
	show("pinctl limits");
	kt_ok(has(out, "global limit        64 MiB") && has(out, "pmuser (uid 1000) 16 MiB"),
	      "limits shows them");
	rc = pinctl(ROOT, "status", "--prometheus", NULL);
	kt_eq(prom("pinmem_user_limit_bytes{uid=\"1000\",user=\"pmuser\"}"), 16 * KT_MIB,
	      "status shows pmuser's 16 MiB limit");
	kt_ok(prom("pinmem_user_refused_total{uid=\"1000\",user=\"pmuser\",reason=\"user\"}") >= 1,
	      "and the refusal");
	/* a second user and process: sorted largest first, the bar at half */
	struct holder rootpin;
	char row[160];

	holder_start(&rootpin, 24 * KT_MIB, PIN_AS_ROOT);
	rc = pinctl(ROOT, "status", NULL);
	kt_eq(rc, 0, "status with two pinning users");
	show("pinctl status (limits set, a refused pin, two users)");
	kt_ok(has(out, "[####################....................] 32 MiB of 64 MiB (50.0%)"),
	      "the bar is at half of the 64 MiB global limit");
	snprintf(row, sizeof(row), "%8d %-16s %-16s %8d %11s", rootpin.pid, "root",
		 "pctl-rootpin", 1, "24 MiB");
	kt_ok(has(out, row) && strstr(out, row) < strstr(out, "pctl-pinner"),
	      "the 24 MiB process is listed before the 8 MiB one");
	kt_ok(strstr(out, "\nroot ") && strstr(out, "\nroot ") < strstr(out, "\npmuser "),
	      "and root before pmuser");
	holder_stop(&rootpin);

	/* back: --clear-user and the saved numbers, through pinctl */
	char gs[32], ds[32];

	snprintf(gs, sizeof(gs), "%llu", (unsigned long long)g);
	snprintf(ds, sizeof(ds), "%llu", (unsigned long long)d);
	rc = pinctl(ROOT, "limits", "set", "--global", g == PINMEM_UNLIMITED ? "unlimited" : gs,
		    "--default-user", d == PINMEM_UNLIMITED ? "unlimited" : ds,
		    "--clear-user", "pmuser", NULL);
	kt_eq(rc, 0, "limits set back: %s", err);
	kt_eq(kt_param("global_limit"), g, "global limit restored");
	kt_eq(kt_param("default_user_limit"), d, "default user limit restored");
	fd = kt_open();
	kt_get_limits(fd, USER_UID, &lim);
	close(fd);
	kt_ok(!(lim.user_flags & PINMEM_USER_OVERRIDDEN), "pmuser's override cleared");
}

#define CGROOT		"/sys/fs/cgroup"
#define CG2_MAGIC	0x63677270
#define LIMITS_CONF	"/tmp/pinctl-limits.conf"

/* The cgroup v2 limit of @rel as the module has it (GET), or 0 on error. */
static uint64_t cg_limit(const char *rel)
{
	struct pinmem_cgroup c = { .path = (uintptr_t)rel, .path_len = strlen(rel) };
	int fd = kt_open(), ret = kt_ioctl(fd, PINMEM_IOC_CGROUP, &c);

	close(fd);
	return ret ? 0 : c.limit_bytes;
}

static int cg_enter(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), CGROOT "/%s/cgroup.procs", rel);
	return kt_write(p, "0");
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		kt_bail("cannot write %s: %s", path, strerror(errno));
}

struct cg_work {
	const char *rel;
	size_t ok, over;
};

static char cg_work(void *arg)
{
	const struct cg_work *w = arg;
	char *buf = kt_map(w->ok + w->over, 1);
	struct pinmem_pin p;
	char c = 0;
	int fd;

	if (cg_enter(w->rel))
		c = 2;
	fd = c ? -1 : open(PINMEM_DEVICE, O_RDWR | O_CLOEXEC);
	if (!c && (fd < 0 || kt_pin(fd, buf, w->ok, NULL)))
		c = 3;
	if (!c && (kt_pin(fd, buf + w->ok, w->over, &p) != -EDQUOT ||
		   p.refused != PINMEM_REFUSED_CGROUP))
		c = 4;
	return c;
}

/*
 * A child in cgroup @rel that opens /dev/pinmem there, pins @ok bytes and
 * tries @over more, which its cgroup budget must refuse; held until stopped.
 */
static void cg_holder_start(struct holder *h, const char *rel, size_t ok, size_t over)
{
	struct cg_work w = { .rel = rel, .ok = ok, .over = over };
	char status = holder_fork(h, "pctl-cgpin", cg_work, &w);

	kt_eq(status, 0, "pctl-cgpin in %s pinned %zu bytes, %zu more refused by its cgroup (%d)",
	      rel, ok, over, status);
}

/* Whether this kernel has the cgroup2 file system; mount it if so. */
static int cgroup2_mounted(void)
{
	char line[128];
	struct statfs sfs;
	int found = 0;
	FILE *f = fopen("/proc/filesystems", "r");

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "\tcgroup2\n") != NULL;
	if (f)
		fclose(f);
	if (!found)
		return 0;
	if ((statfs(CGROOT, &sfs) || sfs.f_type != CG2_MAGIC) &&
	    mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
		kt_bail("mount cgroup2 on %s: %s", CGROOT, strerror(errno));
	return 1;
}

static void cgroup_bad_input(void)
{
	int rc;

	rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=8M", "--cgroup", "pctl/nope=1M", NULL);
	kt_eq(rc, 1, "limits set with a missing cgroup fails");
	kt_ok(one_line(err) && has(err, "no cgroup '/pctl/nope'") && has(err, "nothing changed") &&
	      !out[0], "and names it: %s", err);
	rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=8M", "--cgroup", "pctl/job=12Q", NULL);
	kt_eq(rc, 2, "limits set --cgroup pctl/job=12Q: usage error");
	kt_ok(one_line(err) && has(err, "invalid size '12Q'"), "says: %s", err);
	rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=8M", "--cgroup", "pctl/../x=1M", NULL);
	kt_eq(rc, 2, "limits set --cgroup pctl/../x: usage error");
	rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=8M", "--cgroup", "/=1M", NULL);
	kt_eq(rc, 2, "limits set --cgroup /: usage error (the root has no budget)");
	rc = pinctl(USER, "limits", "set", "--cgroup", "pctl=8M", NULL);
	kt_eq(rc, 1, "limits set --cgroup as pmuser fails");
	kt_ok(one_line(err) && has(err, "CAP_SYS_ADMIN") && has(err, "nothing changed"),
	      "pmuser is told: %s", err);
	put_file(LIMITS_CONF, "cgroup pctl 6M\ncgroup pctl/job 2Q\n");
	rc = pinctl(ROOT, "limits", "apply", LIMITS_CONF, NULL);
	kt_eq(rc, 2, "limits apply with a bad line: usage error");
	kt_ok(has(err, "line 2: invalid size '2Q'"), "names the line: %s", err);
	kt_eq(cg_limit("pctl"), PINMEM_UNLIMITED, "pctl still has no limit");
	kt_eq(cg_limit("pctl/job"), PINMEM_UNLIMITED, "pctl/job still has no limit");
}

/* Budgets on two levels, seen by limits, status --prometheus; then dropped. */
static void cgroup_cases(void)
{
	struct holder h;
	char row[256];
	int rc;

	if (!cgroup2_mounted()) {
		rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=8M", NULL);
		kt_eq(rc, 1, "no cgroup2 in this kernel: limits set --cgroup fails");
		kt_ok(one_line(err) && has(err, "cgroup budgets need cgroup v2"), "says: %s", err);
		return;
	}
	kt_eq(mkdir(CGROOT "/pctl", 0755) || mkdir(CGROOT "/pctl/job", 0755), 0, "mkdir pctl/job");
	cgroup_bad_input();

	rc = pinctl(ROOT, "limits", "set", "--cgroup", "/sys/fs/cgroup/pctl=8M", "--cgroup",
		    "pctl/job/=4M", NULL);
	kt_eq(rc, 0, "limits set --cgroup on two levels: %s", err);
	kt_ok(has(out, "set cgroup /pctl 8 MiB\nset cgroup /pctl/job 4 MiB\n"), "says so: %s", out);
	kt_eq(cg_limit("pctl"), 8 * KT_MIB, "the module has pctl at 8 MiB");
	kt_eq(cg_limit("pctl/job"), 4 * KT_MIB, "and pctl/job at 4 MiB");
	/* 3 MiB fit pctl/job's 4 MiB; 2 MiB more do not */
	cg_holder_start(&h, "pctl/job", 3 * KT_MIB, 2 * KT_MIB);

	rc = pinctl(ROOT, "limits", NULL);
	kt_eq(rc, 0, "limits exits 0");
	show("pinctl limits (cgroup limits set)");
	snprintf(row, sizeof(row), "  %-32s %11s %12s %11s %8d", "/pctl/job", "3 MiB", "4 MiB",
		 "3 MiB", 1);
	kt_ok(has(out, row), "limits lists /pctl/job: 3 MiB pinned, 4 MiB limit, 1 refused");
	snprintf(row, sizeof(row), "  %-32s %11s %12s %11s %8d", "/pctl", "3 MiB", "8 MiB",
		 "3 MiB", 0);
	kt_ok(has(out, row), "and /pctl: its child's 3 MiB, 8 MiB limit");
	rc = pinctl(ROOT, "limits", "--json", NULL);
	kt_eq(rc, 0, "limits --json exits 0");
	kt_ok(has(out, "\"cgroup\": \"/pctl/job\",") &&
	      has(out, "\"pinned_bytes\": 3145728,\n      \"limit_bytes\": 4194304,"),
	      "json: /pctl/job 3 MiB of 4 MiB");

	rc = pinctl(ROOT, "status", "--prometheus", NULL);
	kt_eq(rc, 0, "status --prometheus exits 0");
	kt_eq(prom("pinmem_cgroup_pinned_bytes{cgroup=\"/pctl/job\"}"), 3 * KT_MIB,
	      "prometheus: /pctl/job pinned 3 MiB");
	kt_eq(prom("pinmem_cgroup_limit_bytes{cgroup=\"/pctl/job\"}"), 4 * KT_MIB,
	      "prometheus: /pctl/job limit 4 MiB");
	kt_eq(prom("pinmem_cgroup_peak_bytes{cgroup=\"/pctl/job\"}"), 3 * KT_MIB,
	      "prometheus: /pctl/job peak 3 MiB");
	kt_eq(prom("pinmem_cgroup_refused_total{cgroup=\"/pctl/job\"}"), 1,
	      "prometheus: /pctl/job refused 1");
	kt_eq(prom("pinmem_cgroup_pinned_bytes{cgroup=\"/pctl\"}"), 3 * KT_MIB,
	      "prometheus: /pctl counts its child");
	kt_eq(prom("pinmem_cgroup_limit_bytes{cgroup=\"/pctl\"}"), 8 * KT_MIB,
	      "prometheus: /pctl limit 8 MiB");
	kt_eq(prom("pinmem_cgroup_refused_total{cgroup=\"/pctl\"}"), 0,
	      "prometheus: /pctl refused none itself");
	rc = pinctl(ROOT, "status", NULL);
	show("pinctl status (pctl-cgpin in /pctl/job)");
	holder_stop(&h);

	rc = pinctl(ROOT, "limits", "clear", "--cgroup", "pctl/job", NULL);
	kt_eq(rc, 0, "limits clear --cgroup pctl/job: %s", err);
	kt_eq(cg_limit("pctl/job"), PINMEM_UNLIMITED, "pctl/job has no limit");
	rc = pinctl(ROOT, "limits", "set", "--cgroup", "pctl=none", NULL);
	kt_eq(rc, 0, "limits set --cgroup pctl=none");
	kt_eq(cg_limit("pctl"), PINMEM_UNLIMITED, "pctl has no limit");
	rc = pinctl(ROOT, "status", "--prometheus", NULL);
	kt_eq(prom("pinmem_cgroup_limit_bytes{cgroup=\"/pctl\"}"), -1,
	      "prometheus: no limit sample once cleared");

	put_file(LIMITS_CONF, "# kept for after the reload\ncgroup /pctl 6M\ncgroup pctl/job 2M\n"
		 "cgroup pctl/gone 1M\n");
	rc = pinctl(ROOT, "limits", "apply", LIMITS_CONF, NULL);
	kt_eq(rc, 1, "limits apply naming a missing cgroup fails");
	kt_eq(cg_limit("pctl"), PINMEM_UNLIMITED, "and sets nothing");
	rc = pinctl(ROOT, "limits", "apply", "--missing-ok", LIMITS_CONF, NULL);
	kt_eq(rc, 0, "limits apply --missing-ok: %s", err);
	kt_ok(has(out, "skipped cgroup /pctl/gone: no such cgroup\n"), "skips the missing one");
	kt_eq(cg_limit("pctl"), 6 * KT_MIB, "apply set pctl to 6 MiB");
	kt_eq(cg_limit("pctl/job"), 2 * KT_MIB, "and pctl/job to 2 MiB");
}

/* The limits reload() put back: cleared, and the cgroups removed. */
static void cgroup_after_reload(void)
{
	int rc;

	if (access(CGROOT "/pctl/job", F_OK))
		return;
	rc = pinctl(ROOT, "limits", "clear", "--cgroup", "pctl/job", "--cgroup", "pctl", NULL);
	kt_eq(rc, 0, "limits clear both");
	kt_eq(rmdir(CGROOT "/pctl/job") || rmdir(CGROOT "/pctl"), 0, "rmdir pctl/job, pctl");
}

static long long vmstat_pinned(void)
{
	long long a = kt_vmstat("nr_foll_pin_acquired"), r = kt_vmstat("nr_foll_pin_released");

	return a < 0 || r < 0 ? -1 : (a - r) * (long long)KT_PAGE;
}

static long long mlocked(void)
{
	char buf[8192];
	uint64_t v = 0;

	if (slurp("/proc/meminfo", buf, sizeof(buf)) || pctl_kv_kb(buf, "Mlocked", &v))
		return -1;
	return (long long)v;
}

static void no_module_view(void)
{
	struct holder locker;
	char series[256];
	long long foll = -2, ml = -2, f0, m0;
	int rc = 0, tries;

	kt_eq(syscall(SYS_delete_module, "pinmem", O_NONBLOCK), 0, "unload pinmem");
	kt_ok(access(PINMEM_STATS_PATH, F_OK) && access(PINMEM_DEVICE, F_OK), "module gone");
	holder_start(&locker, LOCK_BYTES, MLOCK);
	/* the counters must not move while pinctl reads them */
	for (tries = 0; tries < 5; tries++) {
		f0 = vmstat_pinned();
		m0 = mlocked();
		rc = pinctl(ROOT, "status", "--prometheus", "--processes=100", NULL);
		foll = prom("pinmem_machine_foll_pin_bytes");
		ml = prom("pinmem_machine_mlocked_bytes");
		if (f0 == vmstat_pinned() && m0 == mlocked())
			break;
	}
	kt_eq(rc, 0, "status without the module exits 0");
	kt_eq(prom("pinmem_module_loaded"), 0, "module_loaded 0");
	kt_eq(foll, f0, "FOLL_PIN bytes = (acquired - released) pages of /proc/vmstat");
	kt_eq(ml, m0, "Mlocked = /proc/meminfo");
	snprintf(series, sizeof(series),
		 "pinmem_process_vmlck_bytes{pid=\"%d\",uid=\"0\",user=\"root\",comm=\"pctl-locker\"}",
		 locker.pid);
	kt_eq(prom(series), (long long)LOCK_BYTES, "the locker's VmLck is 4 MiB");
	kt_ok(kt_vmpin_kb(locker.pid) == 0, "and its VmPin 0");

	rc = pinctl(ROOT, "status", NULL);
	kt_eq(rc, 0, "status text without the module");
	show("pinctl status (no module; pctl-locker mlocked 4 MiB)");
	kt_ok(has(out, "budgets are NOT enforced"), "says budgets are not enforced");
	snprintf(series, sizeof(series), "%8d %-16s %-16s %11s %11s", locker.pid, "root",
		 "pctl-locker", "0 B", "4 MiB");
	kt_ok(has(out, series), "lists the locker with VmLck 4 MiB");
	holder_stop(&locker);

	rc = pinctl(ROOT, "limits", "set", "--global", "1G", NULL);
	kt_eq(rc, 1, "limits set without the module fails");
	kt_ok(one_line(err) && has(err, "not loaded"), "and says: %s", err);
	rc = pinctl(ROOT, "doctor", NULL);
	kt_eq(rc, 1, "doctor without the module exits 1");
	kt_ok(has(out, "[FAIL] module"), "doctor names the module");
}

/* packaging/modprobe.d/pinmem.conf, put in the VM by mk/20-pinctl.mk */
#define MODPROBE_CONF	"/etc/pinmem/modprobe.conf"
#define ETC_LIMITS	"/etc/pinmem/limits.conf"
#define MODPROBE_CMD	"/sbin/modprobe --ignore-install pinmem $CMDLINE_OPTS"

/*
 * The commented-out install line of modprobe.d/pinmem.conf, with insmod of
 * /pinmem.ko for the modprobe it runs (the VM has no modules.dep); 0 or -1.
 */
static int install_line(char *cmd, size_t len)
{
	char line[1024], *mod;
	FILE *f = fopen(MODPROBE_CONF, "r");
	int ret = -1;

	while (f && ret && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "#install pinmem ", 16))
			continue;
		line[strcspn(line, "\n")] = '\0';
		mod = strstr(line, MODPROBE_CMD);
		kt_ok(mod != NULL, "the install line runs '%s'", MODPROBE_CMD);
		if (mod && (size_t)snprintf(cmd, len, "%.*sinsmod /pinmem.ko%s", (int)(mod - line - 16),
					    line + 16, mod + strlen(MODPROBE_CMD)) < len)
			ret = 0;
	}
	if (f)
		fclose(f);
	return ret;
}

/* Run @cmd as modprobe would (sh -c); its exit status. */
static int run_install(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void unload(const char *why)
{
	kt_eq(syscall(SYS_delete_module, "pinmem", O_NONBLOCK), 0, "unload pinmem (%s)", why);
}

static void reload(void)
{
	int cgroups = !access(CGROOT "/pctl/job", F_OK);
	char cmd[1200], buf[4096];
	int fd;

	if (install_line(cmd, sizeof(cmd))) {
		kt_skip("no %s with an install line: plain insmod", MODPROBE_CONF);
		fd = open("/pinmem.ko", O_RDONLY | O_CLOEXEC);
		kt_ok(fd >= 0, "open /pinmem.ko");
		kt_eq(fd < 0 ? -1 : syscall(SYS_finit_module, fd, "", 0), 0, "load pinmem again");
		if (fd >= 0)
			close(fd);
		if (cgroups) {
			kt_eq(cg_limit("pctl"), PINMEM_UNLIMITED, "reloaded module: pctl's limit is gone");
			kt_eq(pinctl(ROOT, "limits", "apply", "--missing-ok", LIMITS_CONF, NULL), 0,
			      "limits apply after the reload");
		}
	} else {
		/* modprobe runs it with sh; pinctl is this program under that name */
		kt_diag("install line: %s", cmd);
		mkdir("/usr", 0755);
		mkdir("/usr/bin", 0755);
		unlink("/usr/bin/pinctl");
		kt_eq(symlink("/tests/kernel/pinctl_vm", "/usr/bin/pinctl"), 0, "/usr/bin/pinctl");
		unlink(ETC_LIMITS);
		kt_eq(run_install(cmd), 0, "install line without %s: loads pinmem", ETC_LIMITS);
		kt_ok(!access(PINMEM_DEVICE, F_OK), "pinmem is loaded");
		if (cgroups) {
			kt_eq(cg_limit("pctl"), PINMEM_UNLIMITED,
			      "limits are not kept across reload: pctl has none");
			unload("to load it with limits.conf");
			if (slurp(LIMITS_CONF, buf, sizeof(buf)))
				kt_bail("cannot read %s", LIMITS_CONF);
			put_file(ETC_LIMITS, buf);
			kt_eq(run_install(cmd), 0, "install line with %s: loads pinmem, applies it",
			      ETC_LIMITS);
		}
	}
	if (cgroups) {
		kt_eq(cg_limit("pctl"), 6 * KT_MIB, "pctl 6 MiB again");
		kt_eq(cg_limit("pctl/job"), 2 * KT_MIB, "pctl/job 2 MiB again");
	}
	/* as tests/vm/init.sh and the udev rule do */
	kt_eq(chown(PINMEM_DEVICE, 0, KT_PINMEM_GID) || chmod(PINMEM_DEVICE, 0660), 0,
	      "/dev/pinmem root:pinmem 0660");
}

int main(int argc, char **argv)
{
	struct holder pinner;
	const char *base = strrchr(argv[0], '/');

	if (!strcmp(base ? base + 1 : argv[0], "pinctl"))
		return pctl_main(argc, argv);

	/* children inherit it: only the budgets under test may refuse their pins */
	struct rlimit rl = { 64 * KT_MIB, 64 * KT_MIB };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		kt_bail("setrlimit: %s", strerror(errno));
	kt_limits_save();
	kt_limits_open();
	holder_start(&pinner, PIN_BYTES, PIN_AS_USER);
	status_views(&pinner);
	limits_cases();
	holder_stop(&pinner);
	kt_limits_restore();
	cgroup_cases();
	no_module_view();
	reload();
	cgroup_after_reload();
	return kt_done();
}
