// SPDX-License-Identifier: MIT
/*
 * Parser of /proc/driver/pinmem/stats: one record per line, a record type and
 * then "key value" pairs, sizes in bytes.  Unknown keys and record types are
 * skipped so that a newer module with a compatible (same major) format still
 * reads; another ABI major or a newer stats version is refused by name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "pinctl.h"

#define MAX_TOKENS 64

struct key_off {
	const char *key;
	size_t off;
};

#define C(f) offsetof(struct pctl_counters, f)
static const struct key_off counter_keys[] = {
	{ "pinned_bytes", C(pinned_bytes) },
	{ "limit_bytes", C(limit_bytes) },
	{ "peak_bytes", C(peak_bytes) },
	{ "regions", C(regions) },
	{ "pins", C(pins) },
	{ "unpins", C(unpins) },
	{ "refused_global", C(refused[PCTL_REF_GLOBAL]) },
	{ "refused_user", C(refused[PCTL_REF_USER]) },
	{ "refused_rlimit", C(refused[PCTL_REF_RLIMIT]) },
	{ "refused_fault", C(refused[PCTL_REF_FAULT]) },
	{ "refused_regions", C(refused[PCTL_REF_REGIONS]) },
	{ "refused_cgroup", C(refused[PCTL_REF_CGROUP]) },
	{ "refused_refs", C(refused[PCTL_REF_REFS]) },
};

/* The module's refused_fault counts refused_refs too (ABI 1.5 split them). */
static void split_fault(struct pctl_counters *c)
{
	uint64_t *fault = &c->refused[PCTL_REF_FAULT];

	*fault -= *fault < c->refused[PCTL_REF_REFS] ? *fault : c->refused[PCTL_REF_REFS];
}
#undef C

static const char *const proc_keys[] = {
	"pid", "uid", "comm", "regions", "pinned_bytes", "mm_pinned_bytes",
};

static bool is_number(const char *s)
{
	uint64_t v;

	return !pctl_parse_u64(s, &v);
}

static bool is_proc_key(const char *s)
{
	for (size_t i = 0; i < sizeof(proc_keys) / sizeof(proc_keys[0]); i++)
		if (!strcmp(s, proc_keys[i]))
			return true;
	return false;
}

/* Split @line in place on blanks; returns the token count. */
static int tokenize(char *line, char **tok)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " \t\r", &save); t && n < MAX_TOKENS;
	     t = strtok_r(NULL, " \t\r", &save))
		tok[n++] = t;
	return n;
}

/* Undo octal escapes (\040 for a space, as /proc/mounts) in a comm. */
static void unescape(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	while (*src && n + 1 < len) {
		if (src[0] == '\\' && src[1] >= '0' && src[1] <= '3' &&
		    src[2] >= '0' && src[2] <= '7' && src[3] >= '0' && src[3] <= '7') {
			char c = (char)((src[1] - '0') * 64 + (src[2] - '0') * 8 + (src[3] - '0'));

			dst[n++] = c ? c : '?';
			src += 4;
		} else if (src[0] == '\\' && src[1] == '\\') {
			dst[n++] = '\\';
			src += 2;
		} else {
			dst[n++] = *src++;
		}
	}
	dst[n] = '\0';
}

static int set_counter(struct pctl_counters *c, const char *key, const char *val,
		       bool *known)
{
	*known = false;
	for (size_t i = 0; i < sizeof(counter_keys) / sizeof(counter_keys[0]); i++) {
		if (strcmp(key, counter_keys[i].key))
			continue;
		*known = true;
		return pctl_parse_u64(val, (uint64_t *)((char *)c + counter_keys[i].off));
	}
	return 0;
}

/* Room for one more element; tables are small (users, processes). */
static void *grow(void *arr, size_t n, size_t size)
{
	return realloc(arr, size * (n + 1));
}

static int parse_user(char **tok, int n, struct pctl_snapshot *snap, const char **bad)
{
	struct pctl_user *u, *users;
	bool known;
	uint64_t v;
	int i;

	users = grow(snap->users, snap->nr_users, sizeof(*u));
	if (!users)
		return -ENOMEM;
	snap->users = users;
	u = &users[snap->nr_users];
	memset(u, 0, sizeof(*u));
	u->c.limit_bytes = PCTL_UNLIMITED;
	for (i = 1; i + 1 < n; i += 2) {
		*bad = tok[i];
		if (!strcmp(tok[i], "uid")) {
			if (pctl_parse_u64(tok[i + 1], &v) || v > UINT32_MAX)
				return -EPROTO;
			u->uid = (uint32_t)v;
		} else if (!strcmp(tok[i], "overridden")) {
			if (pctl_parse_u64(tok[i + 1], &v) || v > 1)
				return -EPROTO;
			u->overridden = v;
		} else if (set_counter(&u->c, tok[i], tok[i + 1], &known)) {
			return -EPROTO;
		}
	}
	split_fault(&u->c);
	snap->nr_users++;
	return 0;
}

static int parse_process(char **tok, int n, struct pctl_snapshot *snap, const char **bad)
{
	struct pctl_proc *p, *procs;
	char comm[PCTL_COMM_LEN * 4];
	uint64_t v;
	int i, j;

	procs = grow(snap->procs, snap->nr_procs, sizeof(*p));
	if (!procs)
		return -ENOMEM;
	snap->procs = procs;
	p = &procs[snap->nr_procs];
	memset(p, 0, sizeof(*p));
	for (i = 1; i + 1 < n; i += 2) {
		*bad = tok[i];
		if (!strcmp(tok[i], "comm")) {
			/* a raw comm may hold blanks: run to the next "key number" */
			size_t len = 0;

			comm[0] = '\0';
			for (j = i + 1; j < n; j++) {
				if (j > i + 1 && j + 1 < n && is_proc_key(tok[j]) &&
				    is_number(tok[j + 1]))
					break;
				len += (size_t)snprintf(comm + len, sizeof(comm) - len,
							"%s%s", j > i + 1 ? " " : "", tok[j]);
				if (len >= sizeof(comm))
					len = sizeof(comm) - 1;
			}
			unescape(p->comm, sizeof(p->comm), comm);
			i = j - 2;
			continue;
		}
		if (!is_proc_key(tok[i]))
			continue;
		if (pctl_parse_u64(tok[i + 1], &v))
			return -EPROTO;
		if (!strcmp(tok[i], "pid")) {
			if (v > INT32_MAX)
				return -EPROTO;
			p->pid = (int)v;
		} else if (!strcmp(tok[i], "uid")) {
			if (v > UINT32_MAX)
				return -EPROTO;
			p->uid = (uint32_t)v;
		} else if (!strcmp(tok[i], "regions")) {
			p->regions = v;
		} else if (!strcmp(tok[i], "pinned_bytes")) {
			p->pinned_bytes = v;
		} else {
			p->mm_pinned_bytes = v;
		}
	}
	/* one line per open file: a process with several files is one row */
	for (size_t k = 0; p->pid && k < snap->nr_procs; k++) {
		struct pctl_proc *q = &procs[k];

		if (q->pid != p->pid || q->uid != p->uid)
			continue;
		q->regions += p->regions;
		q->pinned_bytes += p->pinned_bytes;
		if (p->mm_pinned_bytes > q->mm_pinned_bytes)
			q->mm_pinned_bytes = p->mm_pinned_bytes;
		return 0;
	}
	snap->nr_procs++;
	return 0;
}

static int parse_line(char **tok, int n, struct pctl_snapshot *snap, bool *versioned,
		      int lineno, char *why, size_t why_len)
{
	const char *bad = tok[0];
	unsigned int maj, min;
	bool known;
	uint64_t v;
	int ret = 0;

	if (!strcmp(tok[0], "pinmem_stats_version")) {
		if (n < 2 || pctl_parse_u64(tok[1], &v) || !v)
			goto bad_value;
		if (v > PINMEM_STATS_VERSION) {
			snprintf(why, why_len,
				 "stats format version %llu is newer than this pinctl reads (%d); upgrade pinctl",
				 (unsigned long long)v, PINMEM_STATS_VERSION);
			return -EPROTO;
		}
		snap->stats_version = (unsigned int)v;
		*versioned = true;
		return 0;
	}
	if (!*versioned) {
		snprintf(why, why_len, "not a pinmem stats file (no pinmem_stats_version line first)");
		return -EPROTO;
	}
	if (!strcmp(tok[0], "abi")) {
		char end;

		if (n < 2 || sscanf(tok[1], "%u.%u%c", &maj, &min, &end) != 2)
			goto bad_value;
		if (maj != PINMEM_ABI_MAJOR) {
			snprintf(why, why_len,
				 "the loaded pinmem module speaks ABI %u.%u, this pinctl ABI %d.x; install matching versions",
				 maj, min, PINMEM_ABI_MAJOR);
			return -EPROTO;
		}
		snap->abi_major = maj;
		snap->abi_minor = min;
	} else if (!strcmp(tok[0], "global")) {
		for (int i = 1; i + 1 < n; i += 2) {
			bad = tok[i];
			if (set_counter(&snap->global, tok[i], tok[i + 1], &known))
				goto bad_value;
		}
		split_fault(&snap->global);
	} else if (!strcmp(tok[0], "users_evicted")) {
		for (int i = 1; i + 1 < n; i += 2) {
			bad = tok[i];
			if (!strcmp(tok[i], "users")) {
				if (pctl_parse_u64(tok[i + 1], &snap->evicted_users))
					goto bad_value;
			} else if (set_counter(&snap->evicted, tok[i], tok[i + 1], &known)) {
				goto bad_value;
			}
		}
		split_fault(&snap->evicted);
		snap->have_evicted = true;
	} else if (!strcmp(tok[0], "max_idle_users")) {
		if (n < 2 || pctl_parse_u64(tok[1], &snap->max_idle_users))
			goto bad_value;
	} else if (!strcmp(tok[0], "idle_users")) {
		if (n < 2 || pctl_parse_u64(tok[1], &snap->idle_users))
			goto bad_value;
	} else if (!strcmp(tok[0], "default_user_limit_bytes")) {
		if (n < 2 || pctl_parse_u64(tok[1], &snap->default_user_limit))
			goto bad_value;
	} else if (!strcmp(tok[0], "hidden_processes")) {
		if (n < 2 || pctl_parse_u64(tok[1], &v) || v > INT64_MAX)
			goto bad_value;
		snap->hidden_procs = (int64_t)v;
	} else if (!strcmp(tok[0], "enforce_rlimit")) {
		if (n < 2 || pctl_parse_u64(tok[1], &v) || v > 1)
			goto bad_value;
		snap->enforce_rlimit = (int)v;
	} else if (!strcmp(tok[0], "user")) {
		ret = parse_user(tok, n, snap, &bad);
	} else if (!strcmp(tok[0], "process")) {
		ret = parse_process(tok, n, snap, &bad);
	} else if (!strcmp(tok[0], "cgroup")) {
		ret = pctl_cgroup_parse(tok, n, snap, &bad);
	}
	if (ret == -EPROTO)
		goto bad_value;
	return ret;
bad_value:
	snprintf(why, why_len, "line %d: malformed value for \"%s\"", lineno, bad);
	return -EPROTO;
}

int pctl_stats_parse(const char *text, struct pctl_snapshot *snap, char *why, size_t why_len)
{
	char *copy = strdup(text), *line, *save = NULL;
	char *tok[MAX_TOKENS];
	bool versioned = false;
	int ret = 0, lineno = 0;

	if (!copy)
		return -ENOMEM;
	snap->module = true;
	snap->source = PCTL_SRC_PROC;
	snap->global.limit_bytes = PCTL_UNLIMITED;
	snap->default_user_limit = PCTL_UNLIMITED;
	snap->enforce_rlimit = -1;
	snap->hidden_procs = -1;
	for (line = copy; line; line = save) {
		int n;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		n = tokenize(line, tok);
		if (!n)
			continue;
		ret = parse_line(tok, n, snap, &versioned, lineno, why, why_len);
		if (ret)
			break;
	}
	if (!ret && !versioned) {
		snprintf(why, why_len, "not a pinmem stats file (empty)");
		ret = -EPROTO;
	}
	free(copy);
	return ret;
}
