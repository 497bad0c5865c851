// SPDX-License-Identifier: MIT
/*
 * `pinctl limits apply FILE`: the module keeps its limits in memory only,
 * so a reload (or a reboot) starts from the module parameters; this file
 * format is what gets them back, e.g. from a modprobe.d `install` line.
 * One setting a line, the words of `pinctl limits set`, '#' comments:
 *
 *   global 384G
 *   default-user 96G
 *   enforce-rlimit on
 *   user alice 16G            (or "user alice default": drop the override)
 *   cgroup kubepods.slice 256G   (or "... none": drop the limit)
 *
 * Every line is checked before anything is applied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define MAX_WORDS 4

static int words(char *line, char **w)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (t[0] == '#')
			break;
		if (n == MAX_WORDS)
			return MAX_WORDS + 1;
		w[n++] = t;
	}
	return n;
}

static int setting(const struct pctl_env *env, struct pctl_plan *plan, char **w, int n)
{
	static const struct {
		const char *key, *args;
		int n;
	} forms[] = {
		{ "global", "SIZE", 2 },
		{ "default-user", "SIZE", 2 },
		{ "enforce-rlimit", "on or off", 2 },
		{ "user", "NAME SIZE (or NAME default)", 3 },
		{ "cgroup", "PATH SIZE (or PATH none)", 3 },
	};
	char arg[600];

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if (strcmp(w[0], forms[i].key))
			continue;
		if (n != forms[i].n) {
			pctl_err(env, "%s: %s: '%s' takes %s", plan->cmd, plan->where, w[0],
				 forms[i].args);
			return PCTL_EXIT_USAGE;
		}
		switch (i) {
		case 0:
			return pctl_plan_limit(env, plan, PINMEM_LIMIT_SET_GLOBAL, w[0], w[1]);
		case 1:
			return pctl_plan_limit(env, plan, PINMEM_LIMIT_SET_DEFAULT_USER, w[0], w[1]);
		case 2:
			return pctl_plan_enforce(env, plan, w[0], w[1]);
		case 3:
			snprintf(arg, sizeof(arg), "%.250s %.250s", w[1], w[2]);
			return pctl_plan_user(env, plan, w[0], w[1],
					      strcmp(w[2], "default") ? w[2] : NULL, arg);
		default:
			return pctl_plan_cgroup(env, plan, w[0], w[1], w[2]);
		}
	}
	pctl_err(env, "%s: %s: unknown setting '%.100s' (global, default-user, enforce-rlimit, user, cgroup)",
		 plan->cmd, plan->where, w[0]);
	return PCTL_EXIT_USAGE;
}

int pctl_plan_read_file(const struct pctl_env *env, struct pctl_plan *plan, const char *file)
{
	char *text, *line, *next, *w[MAX_WORDS];
	int ret, n, lineno = 0;

	ret = pctl_read_file(file, &text, NULL);
	if (ret) {
		pctl_err(env, "%s: cannot read %s: %s; nothing changed", plan->cmd, file,
			 strerror(-ret));
		return PCTL_EXIT_FAIL;
	}
	ret = 0;
	for (line = text; !ret && line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		snprintf(plan->where, sizeof(plan->where), "%.250s line %d", file, lineno);
		n = words(line, w);
		if (n > MAX_WORDS) {
			pctl_err(env, "%s: %s: too many words (one setting a line)", plan->cmd,
				 plan->where);
			ret = PCTL_EXIT_USAGE;
		} else if (n) {
			ret = setting(env, plan, w, n);
		}
	}
	plan->where[0] = '\0';
	free(text);
	return ret;
}
