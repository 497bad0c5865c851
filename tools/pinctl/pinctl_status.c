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
		{ "processes", required_argument, NULL, 'P' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum pctl_source src = PCTL_SRC_AUTO;
	struct pctl_snapshot snap;
	bool json = false, prom = false, procs_set = false;
	uint64_t procs = PCTL_PROM_PROCS_DEFAULT;
	const char *output = NULL;
	struct pctl_output o;
	char why[256 + 4096];
	FILE *out;
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
		case 'P':
			if (pctl_parse_u64(optarg, &procs) || procs > PCTL_PROM_PROCS_MAX) {
				pctl_err(env, "status: --processes takes a count of processes from 0 to %d, not \"%s\"",
					 PCTL_PROM_PROCS_MAX, optarg);
				return PCTL_EXIT_USAGE;
			}
			procs_set = true;
			break;
		case 'o':
			output = optarg;
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
	if (procs_set && !prom) {
		pctl_err(env, "status: --processes applies to --prometheus (text and JSON list every process)");
		return PCTL_EXIT_USAGE;
	}
	if (pctl_snapshot_collect(env, src, &snap, why, sizeof(why))) {
		pctl_err(env, "status: %s", why);
		return PCTL_EXIT_FAIL;
	}
	out = env->out;
	if (output) {
		if (pctl_output_open(&o, output, why, sizeof(why))) {
			pctl_err(env, "status: %s", why);
			pctl_snapshot_free(&snap);
			return PCTL_EXIT_FAIL;
		}
		out = o.f;
	}
	if (json) {
		struct pctl_json j;

		pctl_json_init(&j, out, true);
		pctl_render_json(&j, &snap);
		pctl_json_done(&j);
	} else if (prom) {
		pctl_render_prom(out, &snap, (size_t)procs);
	} else {
		pctl_render_text(out, &snap, -1);
	}
	pctl_snapshot_free(&snap);
	if (output && pctl_output_commit(&o, why, sizeof(why))) {
		pctl_err(env, "status: %s", why);
		return PCTL_EXIT_FAIL;
	}
	return PCTL_EXIT_OK;
}
