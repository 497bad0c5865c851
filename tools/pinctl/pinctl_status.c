// SPDX-License-Identifier: MIT
/*
 * `pinctl status`: one snapshot, rendered as text, JSON or Prometheus.
 */
#include <getopt.h>

#include "pinctl.h"

int pctl_cmd_status(const struct pctl_env *env, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "source", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum pctl_source src = PCTL_SRC_AUTO;
	struct pctl_snapshot snap;
	bool json = false, prom = false;
	char why[256];
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'p':
			prom = true;
			break;
		case 's':
			if (pctl_parse_source(env, "status", optarg, &src))
				return PCTL_EXIT_USAGE;
			break;
		case 'h':
			pctl_help_status(env->out);
			return PCTL_EXIT_OK;
		default:
			return pctl_opt_error(env, "status", c, argv);
		}
	}
	if (pctl_extra_args(env, "status", argc, argv))
		return PCTL_EXIT_USAGE;
	if (json && prom) {
		pctl_err(env, "status: --json and --prometheus exclude each other");
		return PCTL_EXIT_USAGE;
	}
	if (pctl_snapshot_collect(env, src, &snap, why, sizeof(why))) {
		pctl_err(env, "status: %s", why);
		return PCTL_EXIT_FAIL;
	}
	if (json) {
		struct pctl_json j;

		pctl_json_init(&j, env->out, true);
		pctl_render_json(&j, &snap);
		pctl_json_done(&j);
	} else if (prom) {
		pctl_render_prom(env->out, &snap);
	} else {
		pctl_render_text(env->out, &snap, -1);
	}
	pctl_snapshot_free(&snap);
	return PCTL_EXIT_OK;
}
