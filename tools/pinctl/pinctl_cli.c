// SPDX-License-Identifier: MIT
/*
 * Command-line helpers shared by the commands: one clear line for every
 * option error, and the --source choice.
 */
#include <getopt.h>
#include <string.h>

#include "pinctl.h"

int pctl_opt_error(const struct pctl_env *env, const char *cmd, int c, char **argv)
{
	const char *opt = optind > 0 ? argv[optind - 1] : "?";
	char shortopt[3] = { '-', (char)optopt, 0 };

	/* an unknown short option inside a cluster is not argv[optind - 1] */
	if (optopt && c == '?')
		opt = shortopt;
	if (c == ':')
		pctl_err(env, "%s: option '%s' needs an argument (see pinctl %s --help)",
			 cmd, opt, cmd);
	else
		pctl_err(env, "%s: unknown option '%s' (see pinctl %s --help)", cmd, opt, cmd);
	return PCTL_EXIT_USAGE;
}

int pctl_extra_args(const struct pctl_env *env, const char *cmd, int argc, char **argv)
{
	if (optind >= argc)
		return 0;
	pctl_err(env, "%s: unexpected argument '%s' (see pinctl %s --help)",
		 cmd, argv[optind], cmd);
	return PCTL_EXIT_USAGE;
}

int pctl_json_help_opts(const struct pctl_env *env, const char *cmd,
			void (*help)(FILE *f), int argc, char **argv, bool *json)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*json = false;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'j') {
			*json = true;
		} else if (c == 'h') {
			help(env->out);
			return PCTL_EXIT_OK;
		} else {
			return pctl_opt_error(env, cmd, c, argv);
		}
	}
	if (pctl_extra_args(env, cmd, argc, argv))
		return PCTL_EXIT_USAGE;
	return -1;
}

int pctl_parse_source(const struct pctl_env *env, const char *cmd, const char *arg,
		      enum pctl_source *src)
{
	static const char *const names[] = { "auto", "proc", "ioctl", "kernel" };

	for (int i = 0; i < 4; i++) {
		if (!strcmp(arg, names[i])) {
			*src = (enum pctl_source)i;
			return 0;
		}
	}
	pctl_err(env, "%s: unknown --source '%s' (auto, proc, ioctl or kernel)", cmd, arg);
	return PCTL_EXIT_USAGE;
}
