// SPDX-License-Identifier: MIT
/*
 * pinctl: see and manage locked-page budgets on a shared server.
 * This file only dispatches; each command lives in its own file, and main()
 * in pinctl_main.c so that the VM test can link pinctl into itself.
 */
#include <string.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#ifndef PINMEM_VERSION
#error "PINMEM_VERSION must be defined by the build (see Makefile)"
#endif

struct command {
	const char *name;
	int (*run)(const struct pctl_env *env, int argc, char **argv);
	void (*help)(FILE *f);
};

static const struct command commands[] = {
	{ "status", pctl_cmd_status, pctl_help_status },
	{ "top", pctl_cmd_top, pctl_help_top },
	{ "limits", pctl_cmd_limits, pctl_help_limits },
	{ "doctor", pctl_cmd_doctor, pctl_help_doctor },
};

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

int pctl_main(int argc, char **argv)
{
	const struct command *cmd;
	struct pctl_env env;
	int ret;

	pctl_env_init(&env);
	if (argc < 2) {
		pctl_err(&env, "no command given: status, top, limits or doctor (see pinctl --help)");
		return PCTL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		pctl_help_main(env.out);
		return PCTL_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("pinctl %s (pinmem ABI %d.%d, stats format %d)\n", PINMEM_VERSION,
		       PINMEM_ABI_MAJOR, PINMEM_ABI_MINOR, PINMEM_STATS_VERSION);
		return PCTL_EXIT_OK;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc == 2 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
			pctl_help_main(env.out);
			return PCTL_EXIT_OK;
		}
		cmd = find(argv[2]);
		if (!cmd || argc > 3) {
			pctl_err(&env, "help: unknown command '%s' (status, top, limits, doctor)",
				 argv[2]);
			return PCTL_EXIT_USAGE;
		}
		cmd->help(env.out);
		return PCTL_EXIT_OK;
	}
	cmd = find(argv[1]);
	if (!cmd) {
		if (argv[1][0] == '-')
			pctl_err(&env, "unknown option '%s' (see pinctl --help)", argv[1]);
		else
			pctl_err(&env, "unknown command '%s' (see pinctl --help)", argv[1]);
		return PCTL_EXIT_USAGE;
	}
	ret = cmd->run(&env, argc - 1, argv + 1);
	if (fflush(stdout) || ferror(stdout)) {
		pctl_err(&env, "cannot write the output");
		return PCTL_EXIT_FAIL;
	}
	return ret;
}
