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
 * Words are separated by blanks.  A word in double quotes may hold blanks
 * and '#' (a cgroup path with a space: cgroup "system.slice/my job.scope"
 * 8G); inside quotes \" is a quote and \\ a backslash, any other
 * backslash stays as it is (systemd's \x2d in unit names).
 *
 * The whole file is checked before anything is applied: a NUL or another
 * control byte anywhere (a damaged or binary file: read as a C string it
 * would end early, and the lines after the NUL would never be seen), or
 * one bad line, refuses all of it with the line number, and nothing is
 * changed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define MAX_WORDS 4

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/*
 * Split @line into at most MAX_WORDS words in place (quotes removed,
 * escapes resolved); the number of words, or -1 with *why set.
 */
static int words(char *line, char **w, const char **why)
{
	char *r = line, *o;
	int n = 0;

	for (;;) {
		while (blank(*r))
			r++;
		if (!*r || *r == '#')
			return n;
		if (n == MAX_WORDS) {
			*why = "too many words (one setting a line)";
			return -1;
		}
		w[n++] = o = r;
		if (*r == '"') {
			for (r++; *r != '"'; *o++ = *r++) {
				if (!*r) {
					*why = "a quote is not closed (quotes end on the same line)";
					return -1;
				}
				if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
					r++;
			}
			r++;
			if (*r && !blank(*r)) {
				*why = "text right after a closing quote (quote the whole word)";
				return -1;
			}
		} else {
			for (; *r && !blank(*r); *o++ = *r++) {
				if (*r == '"') {
					*why = "a quote inside a word (quote the whole word: \"a b\")";
					return -1;
				}
			}
		}
		if (*r)
			r++;
		*o = '\0';
	}
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
			pctl_err(env, "%s: %s: '%s' takes %s; nothing changed", plan->cmd,
				 plan->where, w[0], forms[i].args);
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
	pctl_err(env, "%s: %s: unknown setting '%.100s' (global, default-user, enforce-rlimit, user, cgroup); nothing changed",
		 plan->cmd, plan->where, w[0]);
	return PCTL_EXIT_USAGE;
}

/*
 * A NUL or a control byte other than tab and CR: 0 if there is none, else
 * the line it is on, with the byte in *bad.
 */
static int control_byte(const char *text, size_t len, unsigned char *bad)
{
	int lineno = 1;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c == '\n')
			lineno++;
		else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
			*bad = c;
			return lineno;
		}
	}
	return 0;
}

int pctl_plan_read_file(const struct pctl_env *env, struct pctl_plan *plan, const char *file)
{
	char *text, *line, *next, *w[MAX_WORDS];
	const char *why = NULL;
	unsigned char bad;
	int ret, n, lineno = 0;
	size_t len = 0;

	ret = pctl_read_file(file, &text, &len);
	if (ret) {
		pctl_err(env, "%s: cannot read %s: %s; nothing changed", plan->cmd, file,
			 strerror(-ret));
		return PCTL_EXIT_FAIL;
	}
	/* the whole file first: a NUL would end the text early */
	lineno = control_byte(text, len, &bad);
	if (lineno) {
		if (bad)
			pctl_err(env, "%s: %.250s line %d: control character 0x%02x: not a text file, or damaged; nothing changed",
				 plan->cmd, file, lineno, bad);
		else
			pctl_err(env, "%s: %.250s line %d: a NUL byte: not a text file, or damaged; nothing changed",
				 plan->cmd, file, lineno);
		free(text);
		return PCTL_EXIT_USAGE;
	}
	lineno = 0;
	ret = 0;
	for (line = text; !ret && line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		snprintf(plan->where, sizeof(plan->where), "%.250s line %d", file, lineno);
		n = words(line, w, &why);
		if (n < 0) {
			pctl_err(env, "%s: %s: %s; nothing changed", plan->cmd, plan->where, why);
			ret = PCTL_EXIT_USAGE;
		} else if (n) {
			ret = setting(env, plan, w, n);
		}
	}
	plan->where[0] = '\0';
	free(text);
	return ret;
}
