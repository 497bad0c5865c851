// SPDX-License-Identifier: MIT
/*
 * The changes of `pinctl limits set`, `limits clear` and `limits apply`:
 * every argument is checked (sizes parsed, users resolved, cgroup paths
 * normalised and found on the cgroup2 mount and by the module) before the
 * first change.  The global, default and first user change go in one
 * all-or-nothing SET_LIMITS, each further user in its own, then each cgroup
 * in one PINMEM_IOC_CGROUP; a failure part way says exactly what was
 * applied.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define CG_V2_NEEDED "cgroup budgets need cgroup v2 (mount cgroup2 at /sys/fs/cgroup, " \
	"or boot with systemd.unified_cgroup_hierarchy=1)"

/*
 * One line: "pinctl: CMD: [WHERE: ]MESSAGE"; while a file is read (WHERE
 * is "FILE line N") it ends "; nothing changed": one bad line refuses all.
 */
static void __attribute__((format(printf, 3, 4)))
perr(const struct pctl_env *env, const struct pctl_plan *plan, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pctl_err(env, "%s: %s%s%s%s", plan->cmd, plan->where, plan->where[0] ? ": " : "", msg,
		 plan->where[0] ? "; nothing changed" : "");
}

struct pctl_plan *pctl_plan_new(const struct pctl_env *env, const char *cmd)
{
	struct pctl_plan *plan = calloc(1, sizeof(*plan));

	if (!plan)
		return NULL;
	snprintf(plan->cmd, sizeof(plan->cmd), "%s", cmd);
	plan->mem_err = pctl_mem_total(env, &plan->mem_total);
	if (plan->mem_err)
		plan->mem_total = 0;
	/* paths given under the mount are taken relative to it */
	plan->mount_err = pctl_cgroup_mount(env, plan->mnt, sizeof(plan->mnt), plan->mnt_dir,
					    sizeof(plan->mnt_dir));
	return plan;
}

void pctl_plan_free(struct pctl_plan *plan)
{
	if (!plan)
		return;
	for (unsigned int i = 0; i < plan->nr_cgroups; i++)
		free(plan->cgroups[i].path);
	free(plan);
}

bool pctl_plan_empty(const struct pctl_plan *plan)
{
	return !plan->flags && !plan->nr_users && !plan->nr_cgroups;
}

static uint64_t page_size(void)
{
	long n = sysconf(_SC_PAGESIZE);

	return n > 0 ? (uint64_t)n : 4096;
}

/* What a limit of @bytes means, after its size in messages: 0 allows no pin. */
static const char *zero_note(uint64_t bytes)
{
	return bytes ? "" : " (no pins allowed)";
}

/*
 * A limit: pctl_parse_size()'s sizes, and "no limit" as pinctl.8 lists it
 * (unlimited, any case) and as the module parameters take it (U64_MAX,
 * which modprobe.d/pinmem.conf documents).  A size the module would round
 * down to no page at all ("1", "0%", "1K") is refused unless it is an
 * explicit zero ("0", "0G"): a typo must not stop every pin on the node.
 */
static int size_arg(const struct pctl_env *env, const struct pctl_plan *plan, const char *opt,
		    const char *arg, uint64_t *bytes)
{
	char a[PCTL_SIZE_LEN], p[PCTL_SIZE_LEN];
	uint64_t page = page_size();
	int ret;

	if (!strcmp(arg, "18446744073709551615")) {
		*bytes = PCTL_UNLIMITED;
		return 0;
	}
	if (!strcmp(arg, "-1") || !strcasecmp(arg, "none") || !strcasecmp(arg, "infinity")) {
		perr(env, plan, "'%s' is not a size for %s: write unlimited for no limit, or 0 to allow no pins",
		     arg, opt);
		return PCTL_EXIT_USAGE;
	}
	ret = pctl_parse_size(arg, plan->mem_total, bytes);
	if (!ret && *bytes != PCTL_UNLIMITED && *bytes < page && (*bytes || strchr(arg, '%'))) {
		perr(env, plan, "size '%s' for %s is %s, less than one page (%s): the module would round it to 0 and allow no pins; write 0 if that is meant",
		     arg, opt, pctl_format_size(*bytes, a, sizeof(a)),
		     pctl_format_size(page, p, sizeof(p)));
		return PCTL_EXIT_USAGE;
	}
	if (!ret)
		return 0;
	if (ret == -ERANGE)
		perr(env, plan, "size '%s' for %s is out of range%s", arg, opt,
		     strchr(arg, '%') ? " (at most 100%)" : "");
	else if (strchr(arg, '%') && !plan->mem_total)
		perr(env, plan, "cannot use '%s' for %s: MemTotal unknown (%s)", arg, opt,
		     strerror(-plan->mem_err));
	else
		perr(env, plan, "invalid size '%s' for %s (use e.g. 512M, 64G, 10%%, unlimited)",
		     arg, opt);
	return PCTL_EXIT_USAGE;
}

int pctl_plan_limit(const struct pctl_env *env, struct pctl_plan *plan, uint32_t bit,
		    const char *opt, const char *size)
{
	if (plan->flags & bit) {
		perr(env, plan, "%s is given twice", opt);
		return PCTL_EXIT_USAGE;
	}
	if (size_arg(env, plan, opt, size,
		     bit == PINMEM_LIMIT_SET_GLOBAL ? &plan->global : &plan->def_user))
		return PCTL_EXIT_USAGE;
	plan->flags |= bit;
	return 0;
}

int pctl_plan_enforce(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		      const char *val)
{
	if (plan->flags & PINMEM_LIMIT_SET_RLIMIT) {
		perr(env, plan, "%s is given twice", opt);
		return PCTL_EXIT_USAGE;
	}
	if (!strcasecmp(val, "on") || !strcmp(val, "1") || !strcasecmp(val, "yes")) {
		plan->enforce = 1;
	} else if (!strcasecmp(val, "off") || !strcmp(val, "0") || !strcasecmp(val, "no")) {
		plan->enforce = 0;
	} else {
		perr(env, plan, "%s takes on or off, not '%s'", opt, val);
		return PCTL_EXIT_USAGE;
	}
	plan->flags |= PINMEM_LIMIT_SET_RLIMIT;
	return 0;
}

int pctl_plan_user(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		   const char *name, const char *size, const char *arg)
{
	struct pctl_user_op *op;

	if (!name[0] || strlen(name) >= sizeof(op->name)) {
		perr(env, plan, "%s '%s' names no user", opt, arg);
		return PCTL_EXIT_USAGE;
	}
	if (plan->nr_users == PCTL_MAX_OPS) {
		perr(env, plan, "more than %d user changes at once", PCTL_MAX_OPS);
		return PCTL_EXIT_USAGE;
	}
	op = &plan->users[plan->nr_users];
	memset(op, 0, sizeof(*op));
	snprintf(op->name, sizeof(op->name), "%s", name);
	op->clear = !size;
	if (pctl_user_uid(env, name, &op->uid)) {
		perr(env, plan, "unknown user '%s' in %s %s", name, opt, arg);
		return PCTL_EXIT_USAGE;
	}
	for (unsigned int i = 0; i < plan->nr_users; i++) {
		if (plan->users[i].uid == op->uid) {
			perr(env, plan, "user '%s' (uid %u) is given twice", name, op->uid);
			return PCTL_EXIT_USAGE;
		}
	}
	if (size && size_arg(env, plan, opt, size, &op->bytes))
		return PCTL_EXIT_USAGE;
	plan->nr_users++;
	return 0;
}

int pctl_plan_cgroup(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
		     const char *path, const char *size)
{
	struct pctl_cg_op *op;
	char norm[PCTL_CG_PATH_MAX + 1];
	const char *why;

	if (pctl_cgroup_normalize(path, plan->mount_err ? NULL : plan->mnt, norm, sizeof(norm),
				  &why)) {
		perr(env, plan, "%s '%.200s%s': %s", opt, path, strlen(path) > 200 ? "..." : "", why);
		return PCTL_EXIT_USAGE;
	}
	if (plan->nr_cgroups == PCTL_MAX_OPS) {
		perr(env, plan, "more than %d cgroup changes at once", PCTL_MAX_OPS);
		return PCTL_EXIT_USAGE;
	}
	for (unsigned int i = 0; i < plan->nr_cgroups; i++) {
		if (!strcmp(plan->cgroups[i].path, norm)) {
			perr(env, plan, "cgroup '/%.200s' is given twice", norm);
			return PCTL_EXIT_USAGE;
		}
	}
	op = &plan->cgroups[plan->nr_cgroups];
	memset(op, 0, sizeof(*op));
	/* a cgroup without a limit is unlimited (as its ancestors allow); any case, as sizes */
	op->clear = !size || !strcasecmp(size, "none") || !strcasecmp(size, "unlimited");
	if (!op->clear && size_arg(env, plan, opt, size, &op->bytes))
		return PCTL_EXIT_USAGE;
	if (op->bytes == PCTL_UNLIMITED)
		op->clear = true;
	op->path = strdup(norm);
	if (!op->path) {
		perr(env, plan, "%s", strerror(ENOMEM));
		return PCTL_EXIT_FAIL;
	}
	plan->nr_cgroups++;
	return 0;
}

/* SET_LIMITS calls the plan makes (the first carries flags and a user). */
static unsigned int nr_limit_calls(const struct pctl_plan *plan)
{
	if (plan->nr_users)
		return plan->nr_users;
	return plan->flags ? 1 : 0;
}

/* Describe change @k ("global 64 GiB, user alice 16 GiB", "cgroup /x 1 GiB"). */
static void describe(const struct pctl_plan *plan, unsigned int k, char *buf, size_t len)
{
	char a[PCTL_SIZE_LEN];
	size_t n = 0;

#define ADD(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
	buf[0] = '\0';
	if (k >= nr_limit_calls(plan)) {
		const struct pctl_cg_op *op = &plan->cgroups[k - nr_limit_calls(plan)];

		if (op->clear)
			ADD("cgroup /%s back to no limit", op->path);
		else
			ADD("cgroup /%s %s%s", op->path, pctl_format_size(op->bytes, a, sizeof(a)),
			    zero_note(op->bytes));
		return;
	}
	if (!k) {
		if (plan->flags & PINMEM_LIMIT_SET_GLOBAL)
			ADD("%sglobal %s%s", n ? ", " : "", pctl_format_size(plan->global, a, sizeof(a)),
			    zero_note(plan->global));
		if (plan->flags & PINMEM_LIMIT_SET_DEFAULT_USER)
			ADD("%sdefault-user %s%s", n ? ", " : "",
			    pctl_format_size(plan->def_user, a, sizeof(a)), zero_note(plan->def_user));
		if (plan->flags & PINMEM_LIMIT_SET_RLIMIT)
			ADD("%senforce-rlimit %s", n ? ", " : "", plan->enforce ? "on" : "off");
	}
	if (k < plan->nr_users) {
		const struct pctl_user_op *op = &plan->users[k];

		if (op->clear)
			ADD("%suser %s (uid %u) back to the default", n ? ", " : "", op->name, op->uid);
		else
			ADD("%suser %s (uid %u) %s%s", n ? ", " : "", op->name, op->uid,
			    pctl_format_size(op->bytes, a, sizeof(a)), zero_note(op->bytes));
	}
#undef ADD
}

static void cg_missing(const struct pctl_env *env, struct pctl_plan *plan,
		       struct pctl_cg_op *op, const char *how)
{
	op->skip = true;
	if (plan->missing_ok)
		fprintf(env->out, "skipped cgroup /%s: %s\n", op->path, how);
}

/* Every cgroup is a directory on the cgroup2 mount; PCTL_EXIT_* or -1 to go on. */
static int check_mount(const struct pctl_env *env, struct pctl_plan *plan)
{
	char dir[8192];
	struct stat st;

	if (!plan->nr_cgroups)
		return -1;
	if (plan->mount_err == -ENOENT) {
		perr(env, plan, CG_V2_NEEDED "; nothing changed");
		return PCTL_EXIT_FAIL;
	}
	if (plan->mount_err) {
		perr(env, plan, "cannot read %s/self/mounts to find cgroup2: %s; nothing changed",
		     env->proc_root, strerror(-plan->mount_err));
		return PCTL_EXIT_FAIL;
	}
	for (unsigned int i = 0; i < plan->nr_cgroups; i++) {
		struct pctl_cg_op *op = &plan->cgroups[i];

		snprintf(dir, sizeof(dir), "%s/%s", plan->mnt_dir, op->path);
		if (!stat(dir, &st) && S_ISDIR(st.st_mode))
			continue;
		if (!plan->missing_ok) {
			perr(env, plan, "no cgroup '/%.300s' (no directory %.300s/%.300s); nothing changed",
			     op->path, plan->mnt, op->path);
			return PCTL_EXIT_FAIL;
		}
		cg_missing(env, plan, op, "no such cgroup");
	}
	return -1;
}

static int cg_ioctl(int fd, const struct pctl_cg_op *op, uint32_t flags)
{
	struct pinmem_cgroup c;

	memset(&c, 0, sizeof(c));
	c.path = (uintptr_t)op->path;
	c.path_len = (uint32_t)strlen(op->path);
	c.flags = flags;
	if (flags & PINMEM_CGROUP_SET)
		c.limit_bytes = op->bytes;
	return ioctl(fd, PINMEM_IOC_CGROUP, &c) ? -errno : 0;
}

/* The module knows every cgroup (GET); PCTL_EXIT_* or -1 to go on. */
static int check_module_cgroups(const struct pctl_env *env, struct pctl_plan *plan, int fd,
				unsigned int maj, unsigned int min)
{
	if (!plan->nr_cgroups)
		return -1;
	if (maj == 1 && min < 2) {
		perr(env, plan, "the loaded pinmem module speaks ABI %u.%u, which has no cgroup budgets (1.2 or later); nothing changed",
		     maj, min);
		return PCTL_EXIT_FAIL;
	}
	for (unsigned int i = 0; i < plan->nr_cgroups; i++) {
		struct pctl_cg_op *op = &plan->cgroups[i];
		int ret = op->skip ? 0 : cg_ioctl(fd, op, 0);

		if (ret == -ENOENT && plan->missing_ok) {
			cg_missing(env, plan, op, "the module does not find it");
		} else if (ret == -ENOENT) {
			perr(env, plan, "the module finds no cgroup '/%.300s' (in its cgroup namespace); nothing changed",
			     op->path);
			return PCTL_EXIT_FAIL;
		} else if (ret == -EOPNOTSUPP) {
			perr(env, plan, CG_V2_NEEDED "; nothing changed");
			return PCTL_EXIT_FAIL;
		} else if (ret) {
			perr(env, plan, "reading cgroup '/%.300s' failed: %s; nothing changed",
			     op->path, strerror(-ret));
			return PCTL_EXIT_FAIL;
		}
	}
	return -1;
}

static int open_dev(const struct pctl_env *env, const struct pctl_plan *plan,
		    unsigned int *maj, unsigned int *min)
{
	int fd = pctl_dev_open(env, maj, min);

	if (fd == -ENOENT)
		perr(env, plan, "pinmem module not loaded (no %s/pinmem); nothing changed",
		     env->dev_root);
	else if (fd == -EPROTO)
		perr(env, plan, "the loaded pinmem module speaks ABI %u.%u, this pinctl ABI %d.x; nothing changed",
		     *maj, *min, PINMEM_ABI_MAJOR);
	else if (fd < 0)
		perr(env, plan, "cannot open %s/pinmem: %s; nothing changed", env->dev_root,
		     strerror(-fd));
	return fd;
}

/* Change @k: one SET_LIMITS or one PINMEM_IOC_CGROUP; 0 or -errno. */
static int apply_one(int fd, const struct pctl_plan *plan, unsigned int k)
{
	struct pinmem_limits lim;

	if (k >= nr_limit_calls(plan)) {
		const struct pctl_cg_op *op = &plan->cgroups[k - nr_limit_calls(plan)];

		return cg_ioctl(fd, op, op->clear ? PINMEM_CGROUP_CLEAR : PINMEM_CGROUP_SET);
	}
	memset(&lim, 0, sizeof(lim));
	if (!k) {
		lim.flags = plan->flags;
		lim.global_limit = plan->global;
		lim.default_user_limit = plan->def_user;
		lim.enforce_rlimit = plan->enforce;
	}
	if (k < plan->nr_users) {
		lim.flags |= plan->users[k].clear ? PINMEM_LIMIT_CLEAR_USER : PINMEM_LIMIT_SET_USER;
		lim.uid = plan->users[k].uid;
		lim.user_limit = plan->users[k].bytes;
	}
	return ioctl(fd, PINMEM_IOC_SET_LIMITS, &lim) ? -errno : 0;
}

static bool skipped(const struct pctl_plan *plan, unsigned int k)
{
	return k >= nr_limit_calls(plan) && plan->cgroups[k - nr_limit_calls(plan)].skip;
}

/* "a, b, c" of what was applied, for a failure part way; "..." when long. */
static void append(char *done, size_t size, bool any, const char *what)
{
	size_t n = strlen(done), w = strlen(what);

	if (n + w + 8 < size) {
		if (any) {
			memcpy(done + n, ", ", 2);
			n += 2;
		}
		memcpy(done + n, what, w + 1);
	} else if (!strstr(done, ", ...")) {
		memcpy(done + n, ", ...", 6);
	}
}

int pctl_plan_run(const struct pctl_env *env, struct pctl_plan *plan)
{
	unsigned int maj = 0, min = 0, k, n = nr_limit_calls(plan) + plan->nr_cgroups;
	char done[2048] = "", what[4400];
	bool any = false;
	int fd, ret;

	ret = check_mount(env, plan);
	if (ret >= 0)
		return ret;
	if (plan->dry_run) {
		for (k = 0; k < n; k++) {
			if (skipped(plan, k))
				continue;
			describe(plan, k, what, sizeof(what));
			fprintf(env->out, "would set %s\n", what);
		}
		return PCTL_EXIT_OK;
	}
	fd = open_dev(env, plan, &maj, &min);
	if (fd < 0)
		return PCTL_EXIT_FAIL;
	ret = check_module_cgroups(env, plan, fd, maj, min);
	if (ret >= 0) {
		close(fd);
		return ret;
	}
	for (k = 0; k < n; k++) {
		if (skipped(plan, k))
			continue;
		describe(plan, k, what, sizeof(what));
		ret = apply_one(fd, plan, k);
		if (ret) {
			close(fd);
			if (ret == -EPERM)
				perr(env, plan, "changing limits needs CAP_SYS_ADMIN (run as root): %s; %s%s",
				     strerror(-ret), any ? "applied only: " : "nothing changed", done);
			else
				perr(env, plan, "setting %s failed: %s; %s%s", what, strerror(-ret),
				     any ? "applied only: " : "nothing changed", done);
			return PCTL_EXIT_FAIL;
		}
		append(done, sizeof(done), any, what);
		any = true;
		fprintf(env->out, "set %s\n", what);
	}
	close(fd);
	return PCTL_EXIT_OK;
}
