// SPDX-License-Identifier: MIT
/*
 * `pinctl limits` shows the budgets; `pinctl limits set` changes them with
 * PINMEM_IOC_SET_LIMITS.  Every argument is checked (sizes parsed, users
 * resolved) before the first ioctl; the global, default and first user
 * change go in one all-or-nothing call, each further user in its own, and a
 * failure part way says exactly what was applied.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define MAX_USER_OPS 256

int pctl_memlock_limit(const struct pctl_env *env, uint64_t *soft, uint64_t *hard)
{
	char *text, *line, s[32], h[32];
	int ret = pctl_read_at(env->proc_root, "self/limits", &text, NULL);

	if (ret)
		return ret;
	line = strstr(text, "Max locked memory");
	ret = -ENOENT;
	if (line && sscanf(line + strlen("Max locked memory"), "%31s %31s", s, h) == 2) {
		ret = 0;
		if (!strcmp(s, "unlimited"))
			*soft = PCTL_UNLIMITED;
		else
			ret = pctl_parse_u64(s, soft);
		if (!ret && !strcmp(h, "unlimited"))
			*hard = PCTL_UNLIMITED;
		else if (!ret)
			ret = pctl_parse_u64(h, hard);
	}
	free(text);
	return ret;
}

/* A module parameter: decimal bytes, or Y/N for a bool. */
static int read_param(const struct pctl_env *env, const char *name, uint64_t *val)
{
	char rel[128], *text;
	size_t len;
	int ret;

	snprintf(rel, sizeof(rel), "module/pinmem/parameters/%s", name);
	ret = pctl_read_at(env->sys_root, rel, &text, &len);
	if (ret)
		return ret;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (!strcmp(text, "Y") || !strcmp(text, "y"))
		*val = 1;
	else if (!strcmp(text, "N") || !strcmp(text, "n"))
		*val = 0;
	else if (!strcmp(text, "unlimited"))
		*val = PCTL_UNLIMITED;
	else
		ret = pctl_parse_u64(text, val);
	free(text);
	return ret;
}

struct limits_view {
	bool module;
	uint64_t global, def_user, enforce;	/* enforce: 0, 1, or UNLIMITED = unknown */
	struct pctl_snapshot snap;		/* users with overrides */
	bool have_users;
	bool have_memlock;
	uint64_t soft, hard;
};

static bool module_present(const struct pctl_env *env)
{
	uint64_t v;

	return read_param(env, "global_limit", &v) != -ENOENT;
}

/* GET_LIMITS through the device, for when the parameters are not readable. */
static int limits_ioctl(const struct pctl_env *env, struct limits_view *v, char *why, size_t len)
{
	struct pinmem_limits lim;
	unsigned int maj = 0, min = 0;
	int ret, fd = pctl_dev_open(env, &maj, &min);

	if (fd == -EPROTO) {
		snprintf(why, len,
			 "the loaded pinmem module speaks ABI %u.%u, this pinctl ABI %d.x; install matching versions",
			 maj, min, PINMEM_ABI_MAJOR);
		return fd;
	}
	if (fd < 0) {
		snprintf(why, len, "cannot read the pinmem parameters nor open %s/pinmem: %s",
			 env->dev_root, strerror(-fd));
		return fd;
	}
	memset(&lim, 0, sizeof(lim));
	lim.uid = getuid();
	ret = ioctl(fd, PINMEM_IOC_GET_LIMITS, &lim) ? -errno : 0;
	close(fd);
	if (ret) {
		snprintf(why, len, "GET_LIMITS ioctl: %s", strerror(-ret));
		return ret;
	}
	v->global = lim.global_limit;
	v->def_user = lim.default_user_limit;
	v->enforce = lim.enforce_rlimit;
	return 0;
}

static int limits_read(const struct pctl_env *env, struct limits_view *v, char *why, size_t len)
{
	char *text;
	int ret;

	memset(v, 0, sizeof(*v));
	v->have_memlock = !pctl_memlock_limit(env, &v->soft, &v->hard);
	/* the stats file names the module's ABI and the per-user overrides */
	ret = pctl_read_at(env->proc_root, "driver/pinmem/stats", &text, NULL);
	if (!ret) {
		ret = pctl_stats_parse(text, &v->snap, why, len);
		free(text);
		if (ret == -EPROTO || ret == -ENOMEM)
			return ret;
		v->have_users = !ret;
		if (v->have_users) {
			pctl_snapshot_sort(&v->snap);
			pctl_snapshot_names(env, &v->snap);
		}
	} else if (!module_present(env)) {
		unsigned int maj, min;
		int fd = pctl_dev_open(env, &maj, &min);

		if (fd == -ENOENT)
			return 0;	/* not loaded */
		if (fd >= 0)
			close(fd);
	}
	v->module = true;
	ret = read_param(env, "global_limit", &v->global);
	if (!ret)
		ret = read_param(env, "default_user_limit", &v->def_user);
	if (!ret && read_param(env, "enforce_rlimit", &v->enforce))
		v->enforce = PCTL_UNLIMITED;
	if (ret)
		return limits_ioctl(env, v, why, len);
	return 0;
}

static void show_json(FILE *f, const struct limits_view *v)
{
	struct pctl_json j;

	pctl_json_init(&j, f, true);
	pctl_json_obj_begin(&j);
	pctl_json_key(&j, "module_loaded");
	pctl_json_bool(&j, v->module);
	if (v->module) {
		pctl_json_key(&j, "global_limit_bytes");
		pctl_json_limit(&j, v->global);
		pctl_json_key(&j, "default_user_limit_bytes");
		pctl_json_limit(&j, v->def_user);
		pctl_json_key(&j, "enforce_rlimit");
		if (v->enforce == PCTL_UNLIMITED)
			pctl_json_null(&j);
		else
			pctl_json_bool(&j, v->enforce);
		pctl_json_key(&j, "overrides");
		if (!v->have_users) {
			pctl_json_null(&j);
		} else {
			pctl_json_arr_begin(&j);
			for (size_t i = 0; i < v->snap.nr_users; i++) {
				const struct pctl_user *u = &v->snap.users[i];

				if (!u->overridden)
					continue;
				pctl_json_obj_begin(&j);
				pctl_json_key(&j, "uid");
				pctl_json_u64(&j, u->uid);
				pctl_json_key(&j, "user");
				pctl_json_str(&j, u->name);
				pctl_json_key(&j, "limit_bytes");
				pctl_json_limit(&j, u->c.limit_bytes);
				pctl_json_obj_end(&j);
			}
			pctl_json_arr_end(&j);
		}
	}
	pctl_json_key(&j, "memlock");
	if (v->have_memlock) {
		pctl_json_obj_begin(&j);
		pctl_json_key(&j, "soft_bytes");
		pctl_json_limit(&j, v->soft);
		pctl_json_key(&j, "hard_bytes");
		pctl_json_limit(&j, v->hard);
		pctl_json_obj_end(&j);
	} else {
		pctl_json_null(&j);
	}
	pctl_json_obj_end(&j);
	pctl_json_done(&j);
}

static void show_text(FILE *f, const struct limits_view *v)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN];
	bool any = false;

	if (!v->module) {
		fprintf(f, "pinmem module not loaded: no pinning budget is enforced\n");
	} else {
		fprintf(f, "global limit        %s\n", pctl_format_size(v->global, a, sizeof(a)));
		fprintf(f, "default user limit  %s\n", pctl_format_size(v->def_user, a, sizeof(a)));
		fprintf(f, "RLIMIT_MEMLOCK      %s\n", v->enforce == PCTL_UNLIMITED ? "unknown" :
			v->enforce ? "enforced for callers without CAP_IPC_LOCK" : "not enforced");
		fprintf(f, "user overrides     ");
		if (!v->have_users)
			fprintf(f, " unknown (cannot read the stats file)\n");
		for (size_t i = 0; v->have_users && i < v->snap.nr_users; i++) {
			const struct pctl_user *u = &v->snap.users[i];

			if (!u->overridden)
				continue;
			fprintf(f, "%s %s (uid %u) %s\n", any ? "                   " : "",
				u->name, u->uid, pctl_format_size(u->c.limit_bytes, a, sizeof(a)));
			any = true;
		}
		if (v->have_users && !any)
			fprintf(f, " none\n");
	}
	if (v->have_memlock)
		fprintf(f, "your RLIMIT_MEMLOCK %s soft, %s hard\n",
			pctl_format_size(v->soft, a, sizeof(a)),
			pctl_format_size(v->hard, b, sizeof(b)));
}

static int limits_show(const struct pctl_env *env, int argc, char **argv)
{
	struct limits_view v;
	bool json = false;
	char why[256];
	int ret;

	ret = pctl_json_help_opts(env, "limits", pctl_help_limits, argc, argv, &json);
	if (ret >= 0)
		return ret;
	if (limits_read(env, &v, why, sizeof(why))) {
		pctl_err(env, "limits: %s", why);
		return PCTL_EXIT_FAIL;
	}
	if (json)
		show_json(env->out, &v);
	else
		show_text(env->out, &v);
	pctl_snapshot_free(&v.snap);
	return PCTL_EXIT_OK;
}

/* One user change: set an override or clear it. */
struct user_op {
	const char *name;
	uint32_t uid;
	bool clear;
	uint64_t bytes;
};

struct limits_plan {
	uint32_t flags;		/* PINMEM_LIMIT_SET_GLOBAL etc. for the first call */
	uint64_t global, def_user;
	uint32_t enforce;
	struct user_op users[MAX_USER_OPS];
	unsigned int nr_users;
	bool dry_run;
};

static int size_arg(const struct pctl_env *env, const char *opt, const char *arg,
		    uint64_t mem_total, int mem_err, uint64_t *bytes)
{
	int ret = pctl_parse_size(arg, mem_total, bytes);

	if (!ret)
		return 0;
	if (ret == -ERANGE)
		pctl_err(env, "limits set: size '%s' for %s is out of range%s", arg, opt,
			 strchr(arg, '%') ? " (at most 100%)" : "");
	else if (strchr(arg, '%') && !mem_total)
		pctl_err(env, "limits set: cannot use '%s' for %s: MemTotal unknown (%s)",
			 arg, opt, strerror(-mem_err));
	else
		pctl_err(env, "limits set: invalid size '%s' for %s (use e.g. 512M, 64G, 10%%, unlimited)",
			 arg, opt);
	return PCTL_EXIT_USAGE;
}

static int add_user_op(const struct pctl_env *env, struct limits_plan *plan,
		       const char *arg, bool clear, uint64_t mem_total, int mem_err)
{
	const char *opt = clear ? "--clear-user" : "--user";
	struct user_op *op;
	char name[256];
	const char *eq = clear ? NULL : strchr(arg, '=');
	size_t n = clear ? strlen(arg) : eq ? (size_t)(eq - arg) : 0;
	int ret;

	if (!clear && !eq) {
		pctl_err(env, "limits set: %s takes NAME=SIZE, not '%s'", opt, arg);
		return PCTL_EXIT_USAGE;
	}
	if (!n || n >= sizeof(name)) {
		pctl_err(env, "limits set: %s '%s' names no user", opt, arg);
		return PCTL_EXIT_USAGE;
	}
	if (plan->nr_users == MAX_USER_OPS) {
		pctl_err(env, "limits set: more than %d user changes at once", MAX_USER_OPS);
		return PCTL_EXIT_USAGE;
	}
	op = &plan->users[plan->nr_users];
	memcpy(name, arg, n);
	name[n] = '\0';
	op->name = arg;
	op->clear = clear;
	ret = pctl_user_uid(env, name, &op->uid);
	if (ret) {
		pctl_err(env, "limits set: unknown user '%s' in %s %s", name, opt, arg);
		return PCTL_EXIT_USAGE;
	}
	for (unsigned int i = 0; i < plan->nr_users; i++) {
		if (plan->users[i].uid == op->uid) {
			pctl_err(env, "limits set: user '%s' (uid %u) is given twice", name, op->uid);
			return PCTL_EXIT_USAGE;
		}
	}
	if (!clear && size_arg(env, opt, eq + 1, mem_total, mem_err, &op->bytes))
		return PCTL_EXIT_USAGE;
	plan->nr_users++;
	return 0;
}

static int parse_plan(const struct pctl_env *env, int argc, char **argv, struct limits_plan *plan)
{
	static const struct option opts[] = {
		{ "global", required_argument, NULL, 'g' },
		{ "default-user", required_argument, NULL, 'D' },
		{ "user", required_argument, NULL, 'u' },
		{ "clear-user", required_argument, NULL, 'c' },
		{ "enforce-rlimit", required_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t mem_total = 0;
	int c, mem_err = pctl_mem_total(env, &mem_total);

	if (mem_err)
		mem_total = 0;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
		case 'D': {
			uint32_t bit = c == 'g' ? PINMEM_LIMIT_SET_GLOBAL : PINMEM_LIMIT_SET_DEFAULT_USER;
			const char *opt = c == 'g' ? "--global" : "--default-user";

			if (plan->flags & bit) {
				pctl_err(env, "limits set: %s is given twice", opt);
				return PCTL_EXIT_USAGE;
			}
			if (size_arg(env, opt, optarg, mem_total, mem_err,
				     c == 'g' ? &plan->global : &plan->def_user))
				return PCTL_EXIT_USAGE;
			plan->flags |= bit;
			break;
		}
		case 'u':
		case 'c':
			if (add_user_op(env, plan, optarg, c == 'c', mem_total, mem_err))
				return PCTL_EXIT_USAGE;
			break;
		case 'r':
			if (!strcasecmp(optarg, "on") || !strcmp(optarg, "1") ||
			    !strcasecmp(optarg, "yes")) {
				plan->enforce = 1;
			} else if (!strcasecmp(optarg, "off") || !strcmp(optarg, "0") ||
				   !strcasecmp(optarg, "no")) {
				plan->enforce = 0;
			} else {
				pctl_err(env, "limits set: --enforce-rlimit takes on or off, not '%s'",
					 optarg);
				return PCTL_EXIT_USAGE;
			}
			plan->flags |= PINMEM_LIMIT_SET_RLIMIT;
			break;
		case 'n':
			plan->dry_run = true;
			break;
		case 'h':
			pctl_help_limits(env->out);
			return -1;
		default:
			return pctl_opt_error(env, "limits set", c, argv);
		}
	}
	if (pctl_extra_args(env, "limits set", argc, argv))
		return PCTL_EXIT_USAGE;
	if (!plan->flags && !plan->nr_users) {
		pctl_err(env, "limits set: nothing to set (see pinctl limits --help)");
		return PCTL_EXIT_USAGE;
	}
	return 0;
}

/* Describe call @k of the plan ("global 64 GiB, user alice 16 GiB") into @buf. */
static void describe(const struct limits_plan *plan, unsigned int k, char *buf, size_t len)
{
	char a[PCTL_SIZE_LEN];
	size_t n = 0;

#define ADD(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
	buf[0] = '\0';
	if (!k) {
		if (plan->flags & PINMEM_LIMIT_SET_GLOBAL)
			ADD("%sglobal %s", n ? ", " : "", pctl_format_size(plan->global, a, sizeof(a)));
		if (plan->flags & PINMEM_LIMIT_SET_DEFAULT_USER)
			ADD("%sdefault-user %s", n ? ", " : "",
			    pctl_format_size(plan->def_user, a, sizeof(a)));
		if (plan->flags & PINMEM_LIMIT_SET_RLIMIT)
			ADD("%senforce-rlimit %s", n ? ", " : "", plan->enforce ? "on" : "off");
	}
	if (k < plan->nr_users) {
		const struct user_op *op = &plan->users[k];
		int nl = op->clear ? (int)strlen(op->name) : (int)(strchr(op->name, '=') - op->name);

		if (op->clear)
			ADD("%suser %.*s (uid %u) back to the default", n ? ", " : "", nl, op->name,
			    op->uid);
		else
			ADD("%suser %.*s (uid %u) %s", n ? ", " : "", nl, op->name, op->uid,
			    pctl_format_size(op->bytes, a, sizeof(a)));
	}
#undef ADD
}

static unsigned int nr_calls(const struct limits_plan *plan)
{
	unsigned int n = plan->nr_users ? plan->nr_users : 1;

	return n;
}

static int apply_plan(const struct pctl_env *env, const struct limits_plan *plan)
{
	char done[1024] = "", what[512];
	unsigned int maj = 0, min = 0, k;
	int fd = pctl_dev_open(env, &maj, &min);

	if (fd == -ENOENT) {
		pctl_err(env, "limits set: pinmem module not loaded (no %s/pinmem); nothing changed",
			 env->dev_root);
		return PCTL_EXIT_FAIL;
	}
	if (fd == -EPROTO) {
		pctl_err(env, "limits set: the loaded pinmem module speaks ABI %u.%u, this pinctl ABI %d.x; nothing changed",
			 maj, min, PINMEM_ABI_MAJOR);
		return PCTL_EXIT_FAIL;
	}
	if (fd < 0) {
		pctl_err(env, "limits set: cannot open %s/pinmem: %s; nothing changed",
			 env->dev_root, strerror(-fd));
		return PCTL_EXIT_FAIL;
	}
	for (k = 0; k < nr_calls(plan); k++) {
		struct pinmem_limits lim;

		memset(&lim, 0, sizeof(lim));
		if (!k) {
			lim.flags = plan->flags;
			lim.global_limit = plan->global;
			lim.default_user_limit = plan->def_user;
			lim.enforce_rlimit = plan->enforce;
		}
		if (k < plan->nr_users) {
			lim.flags |= plan->users[k].clear ? PINMEM_LIMIT_CLEAR_USER :
							    PINMEM_LIMIT_SET_USER;
			lim.uid = plan->users[k].uid;
			lim.user_limit = plan->users[k].bytes;
		}
		describe(plan, k, what, sizeof(what));
		if (ioctl(fd, PINMEM_IOC_SET_LIMITS, &lim)) {
			int err = errno;

			close(fd);
			if (err == EPERM)
				pctl_err(env, "limits set: changing limits needs CAP_SYS_ADMIN (run as root): %s; %s%s",
					 strerror(err), k ? "applied only: " : "nothing changed",
					 done);
			else
				pctl_err(env, "limits set: setting %s failed: %s; %s%s", what,
					 strerror(err), k ? "applied only: " : "nothing changed", done);
			return PCTL_EXIT_FAIL;
		}
		snprintf(done + strlen(done), sizeof(done) - strlen(done), "%s%s",
			 k ? ", " : "", what);
		fprintf(env->out, "set %s\n", what);
	}
	close(fd);
	return PCTL_EXIT_OK;
}

static int limits_set(const struct pctl_env *env, int argc, char **argv)
{
	struct limits_plan *plan = calloc(1, sizeof(*plan));
	char what[512];
	int ret;

	if (!plan) {
		pctl_err(env, "limits set: %s", strerror(ENOMEM));
		return PCTL_EXIT_FAIL;
	}
	ret = parse_plan(env, argc, argv, plan);
	if (ret) {
		free(plan);
		return ret < 0 ? PCTL_EXIT_OK : ret;
	}
	if (plan->dry_run) {
		for (unsigned int k = 0; k < nr_calls(plan); k++) {
			describe(plan, k, what, sizeof(what));
			fprintf(env->out, "would set %s\n", what);
		}
		free(plan);
		return PCTL_EXIT_OK;
	}
	ret = apply_plan(env, plan);
	free(plan);
	return ret;
}

int pctl_cmd_limits(const struct pctl_env *env, int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "set"))
		return limits_set(env, argc - 1, argv + 1);
	return limits_show(env, argc, argv);
}
