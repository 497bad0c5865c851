// SPDX-License-Identifier: MIT
/*
 * `pinctl limits` shows the budgets: the module's parameters, the per-user
 * overrides and the cgroup limits (both from the stats file), and the
 * caller's RLIMIT_MEMLOCK.  `limits set`, `limits clear` and `limits apply
 * FILE` read their options here and change the budgets through
 * pinctl_limits_plan.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

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

/* Cgroup lines come with ABI 1.2; the stats file has them for every limit. */
static bool cgroups_known(const struct limits_view *v)
{
	return v->have_users && (v->snap.abi_major > 1 || v->snap.abi_minor >= 2);
}

static void show_cgroups(FILE *f, const struct limits_view *v)
{
	size_t n = 0;

	for (size_t i = 0; cgroups_known(v) && i < v->snap.nr_cgroups; i++)
		n += v->snap.cgroups[i].limit_bytes != PCTL_UNLIMITED;
	if (!v->have_users)
		fprintf(f, "cgroup limits       unknown (cannot read the stats file)\n");
	else if (!cgroups_known(v))
		fprintf(f, "cgroup limits       none: module ABI %u.%u has no cgroup budgets (1.2 has)\n",
			v->snap.abi_major, v->snap.abi_minor);
	else if (!n)
		fprintf(f, "cgroup limits       none\n");
	else {
		fprintf(f, "cgroup limits       (kept until the module is unloaded)\n");
		pctl_cgroup_table(f, &v->snap, true, "  ");
	}
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
		if (cgroups_known(v)) {
			pctl_cgroup_json(&j, &v->snap, true);
		} else {
			pctl_json_key(&j, "cgroups");
			pctl_json_null(&j);
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
		show_cgroups(f, v);
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

/* "PATH=SIZE" / "NAME=SIZE": split at the last '=' (cgroup names may hold one). */
static char *split_eq(char *arg)
{
	char *eq = strrchr(arg, '=');

	if (eq)
		*eq++ = '\0';
	return eq;
}

static int add_user_arg(const struct pctl_env *env, struct pctl_plan *plan, const char *opt,
			const char *arg, bool clear)
{
	char *name, *size = NULL;
	int ret;

	/* split before any length check: a long NAME must not lose its '=' */
	name = strdup(arg);
	if (!name) {
		pctl_err(env, "%s: %s", plan->cmd, strerror(ENOMEM));
		return PCTL_EXIT_FAIL;
	}
	if (!clear) {
		size = strchr(name, '=');
		if (!size) {
			pctl_err(env, "%s: %s takes NAME=SIZE, not '%s'", plan->cmd, opt, arg);
			free(name);
			return PCTL_EXIT_USAGE;
		}
		*size++ = '\0';
	}
	ret = pctl_plan_user(env, plan, opt, name, size, arg);
	free(name);
	return ret;
}

static int add_cgroup_arg(const struct pctl_env *env, struct pctl_plan *plan, const char *arg,
			  bool clear)
{
	char *copy, *size = NULL;
	int ret;

	copy = strdup(arg);
	if (!copy) {
		pctl_err(env, "%s: %s", plan->cmd, strerror(ENOMEM));
		return PCTL_EXIT_FAIL;
	}
	if (!clear) {
		size = split_eq(copy);
		if (!size) {
			pctl_err(env, "%s: --cgroup takes PATH=SIZE (or PATH=none), not '%.200s'",
				 plan->cmd, arg);
			free(copy);
			return PCTL_EXIT_USAGE;
		}
	}
	ret = pctl_plan_cgroup(env, plan, "--cgroup", copy, size);
	free(copy);
	return ret;
}

enum { OPT_GLOBAL = 'g', OPT_DEFAULT = 'D', OPT_USER = 'u', OPT_CLEAR_USER = 'c',
       OPT_RLIMIT = 'r', OPT_CGROUP = 'C', OPT_DRY = 'n', OPT_MISSING = 'm', OPT_HELP = 'h' };

/*
 * The options of `limits set` (clear == false) or `limits clear`; 0, -1
 * after --help, or an exit status.
 */
static int parse_opts(const struct pctl_env *env, int argc, char **argv,
		      struct pctl_plan *plan, bool clear)
{
	static const struct option set_opts[] = {
		{ "global", required_argument, NULL, OPT_GLOBAL },
		{ "default-user", required_argument, NULL, OPT_DEFAULT },
		{ "user", required_argument, NULL, OPT_USER },
		{ "clear-user", required_argument, NULL, OPT_CLEAR_USER },
		{ "enforce-rlimit", required_argument, NULL, OPT_RLIMIT },
		{ "cgroup", required_argument, NULL, OPT_CGROUP },
		{ "dry-run", no_argument, NULL, OPT_DRY },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static const struct option clear_opts[] = {
		{ "user", required_argument, NULL, OPT_CLEAR_USER },
		{ "cgroup", required_argument, NULL, OPT_CGROUP },
		{ "dry-run", no_argument, NULL, OPT_DRY },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret = 0;

	optind = 0;
	opterr = 0;
	while (!ret && (c = getopt_long(argc, argv, ":h", clear ? clear_opts : set_opts,
					NULL)) != -1) {
		switch (c) {
		case OPT_GLOBAL:
			ret = pctl_plan_limit(env, plan, PINMEM_LIMIT_SET_GLOBAL, "--global", optarg);
			break;
		case OPT_DEFAULT:
			ret = pctl_plan_limit(env, plan, PINMEM_LIMIT_SET_DEFAULT_USER,
					      "--default-user", optarg);
			break;
		case OPT_USER:
		case OPT_CLEAR_USER:
			ret = add_user_arg(env, plan, clear ? "--user" : c == OPT_USER ?
					   "--user" : "--clear-user", optarg, c == OPT_CLEAR_USER);
			break;
		case OPT_RLIMIT:
			ret = pctl_plan_enforce(env, plan, "--enforce-rlimit", optarg);
			break;
		case OPT_CGROUP:
			ret = add_cgroup_arg(env, plan, optarg, clear);
			break;
		case OPT_DRY:
			plan->dry_run = true;
			break;
		case OPT_HELP:
			pctl_help_limits(env->out);
			return -1;
		default:
			return pctl_opt_error(env, plan->cmd, c, argv);
		}
	}
	if (ret)
		return ret;
	if (pctl_extra_args(env, plan->cmd, argc, argv))
		return PCTL_EXIT_USAGE;
	if (pctl_plan_empty(plan)) {
		pctl_err(env, "%s: nothing to %s (see pinctl limits --help)", plan->cmd,
			 clear ? "clear" : "set");
		return PCTL_EXIT_USAGE;
	}
	return 0;
}

/* `limits apply FILE [--dry-run] [--missing-ok]` */
static int parse_apply(const struct pctl_env *env, int argc, char **argv,
		       struct pctl_plan *plan, const char **file)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, OPT_DRY },
		{ "missing-ok", no_argument, NULL, OPT_MISSING },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == OPT_DRY) {
			plan->dry_run = true;
		} else if (c == OPT_MISSING) {
			plan->missing_ok = true;
		} else if (c == OPT_HELP) {
			pctl_help_limits(env->out);
			return -1;
		} else {
			return pctl_opt_error(env, plan->cmd, c, argv);
		}
	}
	if (optind >= argc) {
		pctl_err(env, "%s: which file? (pinctl limits apply FILE, e.g. /etc/pinmem/limits.conf)",
			 plan->cmd);
		return PCTL_EXIT_USAGE;
	}
	*file = argv[optind++];
	return pctl_extra_args(env, plan->cmd, argc, argv);
}

/* `limits set`, `limits clear`, `limits apply`: argv[0] is the subcommand. */
static int limits_change(const struct pctl_env *env, int argc, char **argv)
{
	char cmd[32];
	struct pctl_plan *plan;
	const char *file = NULL;
	int ret;

	snprintf(cmd, sizeof(cmd), "limits %s", argv[0]);
	plan = pctl_plan_new(env, cmd);
	if (!plan) {
		pctl_err(env, "%s: %s", cmd, strerror(ENOMEM));
		return PCTL_EXIT_FAIL;
	}
	if (!strcmp(argv[0], "apply")) {
		ret = parse_apply(env, argc, argv, plan, &file);
		if (!ret)
			ret = pctl_plan_read_file(env, plan, file);
		if (!ret && pctl_plan_empty(plan)) {
			fprintf(env->out, "%s sets nothing\n", file);
			ret = -1;
		}
	} else {
		ret = parse_opts(env, argc, argv, plan, !strcmp(argv[0], "clear"));
	}
	if (!ret)
		ret = pctl_plan_run(env, plan);
	pctl_plan_free(plan);
	return ret < 0 ? PCTL_EXIT_OK : ret;
}

int pctl_cmd_limits(const struct pctl_env *env, int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "set") || !strcmp(argv[1], "clear") ||
			 !strcmp(argv[1], "apply")))
		return limits_change(env, argc - 1, argv + 1);
	return limits_show(env, argc, argv);
}
