// SPDX-License-Identifier: MIT
/*
 * `pinctl top`: status on an interval.  On a terminal each frame redraws the
 * screen and keeps to its height; otherwise frames follow each other so that
 * a log or a test can read every one of them.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "pinctl.h"

/* Seconds with up to three decimals, 0.1 .. 86400, as milliseconds. */
static int parse_interval(const char *s, uint64_t *ms)
{
	uint64_t whole = 0, frac = 0;
	unsigned int digits = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > 86400)
			return -ERANGE;
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (++digits > 3)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		if (!digits)
			return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	while (digits++ < 3)
		frac *= 10;
	*ms = whole * 1000 + frac;
	return *ms < 100 || *ms > 86400000 ? -ERANGE : 0;
}

static int screen_rows(FILE *f)
{
	struct winsize ws;

	if (ioctl(fileno(f), TIOCGWINSZ, &ws) || ws.ws_row < 16)
		return 24;
	return ws.ws_row;
}

/* On a terminal a frame keeps to the screen: header, users, then processes. */
static int proc_rows(FILE *f, const struct pctl_snapshot *snap)
{
	int rows = screen_rows(f) - 16 - (int)snap->nr_users;

	return rows < 1 ? 1 : rows;
}

int pctl_cmd_top(const struct pctl_env *env, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "source", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum pctl_source src = PCTL_SRC_AUTO;
	uint64_t interval_ms = 2000, count = 0;
	struct pctl_snapshot snap;
	bool json = false, tty;
	char why[256];
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (parse_interval(optarg, &interval_ms)) {
				pctl_err(env, "top: invalid interval '%s' (seconds, 0.1 to 86400)",
					 optarg);
				return PCTL_EXIT_USAGE;
			}
			break;
		case 'n':
			if (pctl_parse_u64(optarg, &count) || !count) {
				pctl_err(env, "top: invalid iteration count '%s' (a positive number)",
					 optarg);
				return PCTL_EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 's':
			if (pctl_parse_source(env, "top", optarg, &src))
				return PCTL_EXIT_USAGE;
			break;
		case 'h':
			pctl_help_top(env->out);
			return PCTL_EXIT_OK;
		default:
			return pctl_opt_error(env, "top", c, argv);
		}
	}
	if (pctl_extra_args(env, "top", argc, argv))
		return PCTL_EXIT_USAGE;
	tty = !json && isatty(fileno(env->out));

	for (uint64_t i = 1; !count || i <= count; i++) {
		if (pctl_snapshot_collect(env, src, &snap, why, sizeof(why))) {
			pctl_err(env, "top: %s", why);
			return PCTL_EXIT_FAIL;
		}
		if (json) {
			struct pctl_json j;

			pctl_json_init(&j, env->out, false);
			pctl_render_json(&j, &snap);
			pctl_json_done(&j);
		} else {
			if (tty)
				fputs("\033[H\033[2J", env->out);
			else if (i > 1)
				fputc('\n', env->out);
			fprintf(env->out, "pinctl top: every %gs, refresh %llu\n",
				(double)interval_ms / 1000, (unsigned long long)i);
			pctl_render_text(env->out, &snap, tty ? proc_rows(env->out, &snap) : -1);
		}
		pctl_snapshot_free(&snap);
		fflush(env->out);
		if (count && i == count)
			break;
		struct timespec ts = {
			.tv_sec = (time_t)(interval_ms / 1000),
			.tv_nsec = (long)(interval_ms % 1000) * 1000000L,
		};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	return PCTL_EXIT_OK;
}
