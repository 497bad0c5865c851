// SPDX-License-Identifier: MIT
/*
 * Cgroup budgets in pinctl: the stats file's "cgroup id N ..." lines (ABI
 * 1.2), their paths (the module keeps cgroups by id, which is the directory's
 * inode number on the cgroup2 mount, so pinctl finds the path by walking
 * SYS_ROOT/fs/cgroup), and the table of `pinctl status` and its JSON.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pinctl.h"

int pctl_cgroup_parse(char **tok, int n, struct pctl_snapshot *snap, const char **bad)
{
	struct pctl_cgroup *c, *all;
	uint64_t *field;
	int i;

	all = realloc(snap->cgroups, (snap->nr_cgroups + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	snap->cgroups = all;
	c = &all[snap->nr_cgroups];
	memset(c, 0, sizeof(*c));
	c->limit_bytes = PCTL_UNLIMITED;
	for (i = 1; i + 1 < n; i += 2) {
		*bad = tok[i];
		field = !strcmp(tok[i], "id") ? &c->id :
			!strcmp(tok[i], "pinned_bytes") ? &c->pinned_bytes :
			!strcmp(tok[i], "limit_bytes") ? &c->limit_bytes :
			!strcmp(tok[i], "peak_bytes") ? &c->peak_bytes :
			!strcmp(tok[i], "refused") ? &c->refused : NULL;
		if (field && pctl_parse_u64(tok[i + 1], field))
			return -EPROTO;
	}
	snap->nr_cgroups++;
	return 0;
}

/* Depth-first under @dir (path @rel from the mount) for ids still unnamed. */
static void walk(struct pctl_snapshot *snap, const char *dir, const char *rel, int depth,
		 size_t *left)
{
	char path[4096], sub[4096];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (depth > 64 || !*left || !(d = opendir(dir)))
		return;
	while (*left && (de = readdir(d))) {
		if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name);
		for (size_t i = 0; i < snap->nr_cgroups; i++) {
			struct pctl_cgroup *c = &snap->cgroups[i];

			if (!c->path[0] && c->id == (uint64_t)st.st_ino) {
				snprintf(c->path, sizeof(c->path), "%s", sub);
				(*left)--;
			}
		}
		walk(snap, path, sub, depth + 1, left);
	}
	closedir(d);
}

void pctl_cgroup_paths(const struct pctl_env *env, struct pctl_snapshot *snap)
{
	size_t left = snap->nr_cgroups;
	char root[256];

	snprintf(root, sizeof(root), "%s/fs/cgroup", env->sys_root);
	walk(snap, root, "", 0, &left);
	for (size_t i = 0; i < snap->nr_cgroups; i++)
		if (!snap->cgroups[i].path[0])
			snprintf(snap->cgroups[i].path, sizeof(snap->cgroups[i].path),
				 "(removed, id %llu)", (unsigned long long)snap->cgroups[i].id);
}

void pctl_cgroup_render(FILE *f, const struct pctl_snapshot *snap)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN], c[PCTL_SIZE_LEN];

	if (!snap->nr_cgroups)
		return;
	fprintf(f, "\n%-32s %11s %12s %11s %8s\n", "CGROUP", "PINNED", "LIMIT", "PEAK", "REFUSED");
	for (size_t i = 0; i < snap->nr_cgroups; i++) {
		const struct pctl_cgroup *g = &snap->cgroups[i];

		fprintf(f, "%-32s %11s %12s %11s %8llu\n", g->path,
			pctl_format_size(g->pinned_bytes, a, sizeof(a)),
			g->limit_bytes == PCTL_UNLIMITED ? "unlimited" :
			pctl_format_size(g->limit_bytes, b, sizeof(b)),
			pctl_format_size(g->peak_bytes, c, sizeof(c)),
			(unsigned long long)g->refused);
	}
}

void pctl_cgroup_json(struct pctl_json *j, const struct pctl_snapshot *snap)
{
	pctl_json_key(j, "cgroups");
	pctl_json_arr_begin(j);
	for (size_t i = 0; i < snap->nr_cgroups; i++) {
		const struct pctl_cgroup *g = &snap->cgroups[i];

		pctl_json_obj_begin(j);
		pctl_json_key(j, "cgroup");
		pctl_json_str(j, g->path);
		pctl_json_key(j, "id");
		pctl_json_u64(j, g->id);
		pctl_json_key(j, "pinned_bytes");
		pctl_json_u64(j, g->pinned_bytes);
		pctl_json_key(j, "limit_bytes");
		pctl_json_limit(j, g->limit_bytes);
		pctl_json_key(j, "peak_bytes");
		pctl_json_u64(j, g->peak_bytes);
		pctl_json_key(j, "refused");
		pctl_json_u64(j, g->refused);
		pctl_json_obj_end(j);
	}
	pctl_json_arr_end(j);
}
