// SPDX-License-Identifier: MIT
/*
 * Cgroup budgets in pinctl: the stats file's "cgroup id N ..." lines (ABI
 * 1.2), their paths (the module keeps cgroups by id, which is the directory's
 * inode number on the cgroup2 mount, so pinctl finds the path by walking
 * the mount), the table of `pinctl status` and `pinctl limits`, their JSON
 * and Prometheus forms, and the paths an operator gives to `limits set`.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pinctl.h"

#define CG_DEFAULT_MOUNT "/sys/fs/cgroup"

/* Undo the octal escapes of /proc/self/mounts (\040 for a space) in place. */
static void mounts_unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

int pctl_cgroup_mount(const struct pctl_env *env, char *mnt, size_t mnt_len,
		      char *dir, size_t dir_len)
{
	char *text, *line, *save = NULL, *found = NULL;
	char dev[256], where[4096], type[64];
	int ret = pctl_read_at(env->proc_root, "self/mounts", &text, NULL);

	if (ret)
		return ret;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%255s %4095s %63s", dev, where, type) != 3 ||
		    strcmp(type, "cgroup2"))
			continue;
		mounts_unescape(where);
		/* several mounts (a container's bind mounts): the usual place wins */
		if (!found || !strncmp(where, CG_DEFAULT_MOUNT, strlen(CG_DEFAULT_MOUNT))) {
			free(found);
			found = strdup(where);
			if (!found) {
				free(text);
				return -ENOMEM;
			}
		}
	}
	free(text);
	if (!found)
		return -ENOENT;
	snprintf(mnt, mnt_len, "%s", found);
	/* read it under SYS_ROOT when it lies under /sys (the golden trees) */
	if (!strncmp(found, "/sys/", 5) || !strcmp(found, "/sys"))
		snprintf(dir, dir_len, "%s%s", env->sys_root, found + 4);
	else
		snprintf(dir, dir_len, "%s", found);
	free(found);
	return 0;
}

int pctl_cgroup_normalize(const char *in, const char *mnt, char *out, size_t len,
			  const char **why)
{
	size_t m, n = 0, part;
	const char *p = in;

	*why = NULL;
	if (!mnt)
		mnt = CG_DEFAULT_MOUNT;
	m = strlen(mnt);
	while (m > 1 && mnt[m - 1] == '/')
		m--;
	/* a full path on the mount: /sys/fs/cgroup/x -> x */
	if (m > 1 && !strncmp(in, mnt, m) && (in[m] == '/' || !in[m]))
		p = in + m;
	out[0] = '\0';
	while (*p) {
		while (*p == '/')
			p++;
		part = strcspn(p, "/");
		if (!part)
			break;
		if (part == 1 && p[0] == '.') {
			p += part;
			continue;
		}
		if (part == 2 && p[0] == '.' && p[1] == '.') {
			*why = "'..' is not allowed";
			return -EINVAL;
		}
		if (part > 255) {
			*why = "a part is longer than 255 bytes";
			return -ENAMETOOLONG;
		}
		if (n + !!n + part > PCTL_CG_PATH_MAX || n + !!n + part >= len) {
			*why = "longer than 4095 bytes";
			return -ENAMETOOLONG;
		}
		if (n)
			out[n++] = '/';
		memcpy(out + n, p, part);
		n += part;
		out[n] = '\0';
		p += part;
	}
	if (!n) {
		*why = *in ? "the root cgroup has no budget of its own (use --global)" :
			     "no path";
		return -EINVAL;
	}
	return 0;
}

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

/*
 * Tree order: a parent before its children, then by id the cgroups not found
 * under the mount (removed, or outside the reader's cgroup namespace).
 */
static int cmp_path(const void *a, const void *b)
{
	const struct pctl_cgroup *x = a, *y = b;
	bool xr = x->path[0] != '/', yr = y->path[0] != '/';

	if (xr != yr)
		return xr ? 1 : -1;
	if (xr)
		return x->id < y->id ? -1 : x->id > y->id;
	return strcmp(x->path, y->path);
}

void pctl_cgroup_paths(const struct pctl_env *env, struct pctl_snapshot *snap)
{
	size_t left = snap->nr_cgroups;
	char mnt[4096], root[4096];

	if (!left)
		return;
	if (pctl_cgroup_mount(env, mnt, sizeof(mnt), root, sizeof(root)))
		snprintf(root, sizeof(root), "%s/fs/cgroup", env->sys_root);
	walk(snap, root, "", 0, &left);
	for (size_t i = 0; i < snap->nr_cgroups; i++)
		if (!snap->cgroups[i].path[0])
			snprintf(snap->cgroups[i].path, sizeof(snap->cgroups[i].path),
				 "(not visible or removed, id %llu)", (unsigned long long)snap->cgroups[i].id);
	qsort(snap->cgroups, snap->nr_cgroups, sizeof(*snap->cgroups), cmp_path);
}

static bool shown(const struct pctl_cgroup *g, bool limited_only)
{
	return !limited_only || g->limit_bytes != PCTL_UNLIMITED;
}

void pctl_cgroup_table(FILE *f, const struct pctl_snapshot *snap, bool limited_only,
		       const char *indent)
{
	char a[PCTL_SIZE_LEN], b[PCTL_SIZE_LEN], c[PCTL_SIZE_LEN];
	int w = 32;

	for (size_t i = 0; i < snap->nr_cgroups; i++)
		if (shown(&snap->cgroups[i], limited_only) && (int)strlen(snap->cgroups[i].path) > w)
			w = (int)strlen(snap->cgroups[i].path);
	fprintf(f, "%s%-*s %11s %12s %11s %8s\n", indent, w, "CGROUP", "PINNED", "LIMIT", "PEAK",
		"REFUSED");
	for (size_t i = 0; i < snap->nr_cgroups; i++) {
		const struct pctl_cgroup *g = &snap->cgroups[i];

		if (!shown(g, limited_only))
			continue;
		fprintf(f, "%s%-*s %11s %12s %11s %8llu\n", indent, w, g->path,
			pctl_format_size(g->pinned_bytes, a, sizeof(a)),
			g->limit_bytes == PCTL_UNLIMITED ? "unlimited" :
			pctl_format_size(g->limit_bytes, b, sizeof(b)),
			pctl_format_size(g->peak_bytes, c, sizeof(c)),
			(unsigned long long)g->refused);
	}
}

void pctl_cgroup_render(FILE *f, const struct pctl_snapshot *snap)
{
	if (!snap->nr_cgroups)
		return;
	fputc('\n', f);
	pctl_cgroup_table(f, snap, false, "");
}

void pctl_cgroup_json(struct pctl_json *j, const struct pctl_snapshot *snap, bool limited_only)
{
	pctl_json_key(j, "cgroups");
	pctl_json_arr_begin(j);
	for (size_t i = 0; i < snap->nr_cgroups; i++) {
		const struct pctl_cgroup *g = &snap->cgroups[i];

		if (!shown(g, limited_only))
			continue;
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
