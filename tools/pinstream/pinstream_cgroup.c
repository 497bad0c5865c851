// SPDX-License-Identifier: MIT
/*
 * How much more memory this process's cgroup lets it take: --compare
 * touches anonymous memory before each cold row (settle_memory), and
 * inside a cgroup whose limit is below what the machine has free that
 * touch would be reclaimed, swapped or OOM-killed instead of settling
 * anything.  Every ancestor's limit applies too, so the room is the
 * smallest of the cgroup's and its ancestors'.  cgroup v2 (memory.max,
 * memory.current; mounted at the root, or at root/unified on a hybrid
 * system), and the v1 memory controller where a hybrid system still has it
 * (memory.limit_in_bytes, memory.usage_in_bytes under root/memory).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinstream.h"

/* v1's "no limit" is the page counter's maximum in bytes, about 2^63. */
#define V1_NO_LIMIT	(1ULL << 62)

/* A memory.* file's one number; "max" is UINT64_MAX; -errno when absent or not a number. */
static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char path[PATH_MAX + 32], buf[64], *end;
	FILE *f;
	bool ok;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -ENODATA;
	buf[strcspn(buf, "\n")] = 0;
	if (!strcmp(buf, "max")) {
		*v = UINT64_MAX;
		return 0;
	}
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno || end == buf || *end || buf[0] == '-' ? -EINVAL : 0;
}

/*
 * The cgroup rel (from /proc/PID/cgroup) of the hierarchy mounted at root,
 * then each ancestor up to root: lower *room and *limit to theirs.
 */
static void walk(const char *root, const char *rel, const char *max_name,
		 const char *cur_name, uint64_t *room, uint64_t *limit)
{
	char dir[PATH_MAX + 16], *slash;
	size_t rootlen = strlen(root);
	uint64_t max, cur;

	if (rel[0] != '/' || strstr(rel, "/..") ||
	    (size_t)snprintf(dir, sizeof(dir), "%s%s", root, strcmp(rel, "/") ? rel : "") >= sizeof(dir))
		return;
	for (;;) {
		if (!read_u64(dir, max_name, &max) && max != UINT64_MAX &&
		    (strcmp(max_name, "memory.limit_in_bytes") || max < V1_NO_LIMIT)) {
			if (read_u64(dir, cur_name, &cur))
				cur = 0;
			if (max < *limit)
				*limit = max;
			if ((cur < max ? max - cur : 0) < *room)
				*room = cur < max ? max - cur : 0;
		}
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < rootlen)
			break;
		*slash = 0;
	}
}

/* Whether controller list ctl ("cpu,cpuacct") names memory. */
static bool has_memory(const char *ctl, size_t len)
{
	for (const char *p = ctl; p < ctl + len;) {
		size_t n = strcspn(p, ",:");

		if (n == 6 && !strncmp(p, "memory", 6))
			return true;
		p += n + 1;
	}
	return false;
}

uint64_t ps_cgroup_room(const char *proc_cgroup, const char *root, uint64_t *limit)
{
	char line[PATH_MAX], sub[PATH_MAX];
	uint64_t room = UINT64_MAX;
	FILE *f = fopen(proc_cgroup, "re");

	*limit = UINT64_MAX;
	if (!f)
		return UINT64_MAX;
	/* "ID:CONTROLLERS:PATH": v2 is "0::PATH", v1 names its controllers */
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *rel = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!rel)
			continue;
		ctl++;
		*rel++ = 0;
		rel[strcspn(rel, "\n")] = 0;
		if (!strncmp(line, "0:", 2) && !ctl[0]) {
			/* unified: at root, or at root/unified beside v1 hierarchies */
			snprintf(sub, sizeof(sub), "%s/cgroup.controllers", root);
			if (access(sub, F_OK))
				snprintf(sub, sizeof(sub), "%s/unified", root);
			else
				snprintf(sub, sizeof(sub), "%s", root);
			walk(sub, rel, "memory.max", "memory.current", &room, limit);
		} else if (has_memory(ctl, strlen(ctl))) {
			snprintf(sub, sizeof(sub), "%s/memory", root);
			walk(sub, rel, "memory.limit_in_bytes", "memory.usage_in_bytes", &room,
			     limit);
		}
	}
	fclose(f);
	return room;
}
