// SPDX-License-Identifier: MIT
/*
 * tools/pinstream/pinstream_cgroup.c: the room a cgroup v2 leaves
 * (--compare's settle_memory is capped by it), from a made-up
 * /proc/self/cgroup and cgroup tree: "max" is no limit, the tightest of the
 * cgroup and its ancestors wins, a cgroup past its limit has none left, and
 * what cannot be read limits nothing; v2 mounted alone or beside v1
 * hierarchies (root/unified), and v1's memory controller.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pm_test.h"
#include "pinstream.h"

static char dir[PATH_MAX - 128];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* ps_cgroup_room for a /proc/self/cgroup of text, the tree under dir/top. */
static uint64_t room_in(const char *top, const char *text, uint64_t *limit)
{
	char proc[PATH_MAX], root[PATH_MAX];

	put("cgroup", text);
	snprintf(proc, sizeof(proc), "%s/cgroup", dir);
	snprintf(root, sizeof(root), "%s/%s", dir, top);
	return ps_cgroup_room(proc, root, limit);
}

static uint64_t room(const char *text, uint64_t *limit)
{
	return room_in("fs", text, limit);
}

static int setup(void **state)
{
	static const char *const sub[] = { "fs", "fs/a", "fs/a/b", "h", "h/unified",
					   "h/unified/u", "h/memory", "h/memory/m" };
	char path[PATH_MAX];

	if (test_dir_make(dir, sizeof(dir), "cgroup-test"))
		return -1;
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
		if (mkdir(path, 0755))
			return -1;
	}
	put("fs/cgroup.controllers", "cpu memory\n");	/* v2 mounted at the root */
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

static void test_room(void **state)
{
	char path[PATH_MAX];
	uint64_t limit;

	/* the root cgroup has no memory.max: no limit */
	assert_int_equal(room("0::/\n", &limit), UINT64_MAX);
	assert_int_equal(limit, UINT64_MAX);
	/* "max" all the way up: no limit */
	put("fs/a/memory.max", "max\n");
	put("fs/a/memory.current", "1000\n");
	put("fs/a/b/memory.max", "max\n");
	put("fs/a/b/memory.current", "500\n");
	assert_int_equal(room("0::/a/b\n", &limit), UINT64_MAX);
	assert_int_equal(limit, UINT64_MAX);
	/* the cgroup's own limit, less what it uses */
	put("fs/a/b/memory.max", "1073741824\n");
	assert_int_equal(room("0::/a/b\n", &limit), 1073741824 - 500);
	assert_int_equal(limit, 1073741824);
	/* an ancestor's tighter limit wins (its current counts its children) */
	put("fs/a/memory.max", "536870912\n");
	put("fs/a/memory.current", "268435456\n");
	assert_int_equal(room("0::/a/b\n", &limit), 268435456);
	assert_int_equal(limit, 536870912);
	/* the cgroup's line among v1 hierarchies' lines */
	assert_int_equal(room("12:memory:/x\n1:name=systemd:/y\n0::/a/b\n", &limit), 268435456);
	/* at or past its limit: nothing left */
	put("fs/a/memory.current", "600000000\n");
	assert_int_equal(room("0::/a\n", &limit), 0);
	assert_int_equal(limit, 536870912);
	/* unreadable or unknown: no limit from it */
	put("fs/a/memory.max", "lots\n");
	assert_int_equal(room("0::/a\n", &limit), UINT64_MAX);
	assert_int_equal(room("0::/gone\n", &limit), UINT64_MAX);
	assert_int_equal(room("12:memory:/x\n", &limit), UINT64_MAX);	/* cgroup v1 only */
	assert_int_equal(room("0::/a/../..\n", &limit), UINT64_MAX);
	put("fs/a/memory.max", "max\n");
	/* no memory.current: the limit itself is the room */
	put("fs/a/b/memory.max", "4096\n");
	snprintf(path, sizeof(path), "%s/fs/a/b/memory.current", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(room("0::/a/b\n", &limit), 4096);
}

/* A hybrid system: v2 at root/unified, v1's memory controller at root/memory. */
static void test_hybrid(void **state)
{
	const char *cg = "9:name=systemd:/\n4:memory:/m\n1:cpu,cpuacct:/\n0::/u\n";
	uint64_t limit;

	/* v1's "no limit" is near 2^63, not "max" */
	put("h/memory/memory.limit_in_bytes", "9223372036854771712\n");
	put("h/memory/m/memory.limit_in_bytes", "9223372036854771712\n");
	put("h/memory/m/memory.usage_in_bytes", "416071680\n");
	assert_int_equal(room_in("h", cg, &limit), UINT64_MAX);
	assert_int_equal(limit, UINT64_MAX);
	put("h/memory/m/memory.limit_in_bytes", "1073741824\n");
	assert_int_equal(room_in("h", cg, &limit), 1073741824 - 416071680);
	assert_int_equal(limit, 1073741824);
	/* memory among other controllers of one v1 hierarchy */
	assert_int_equal(room_in("h", "4:cpu,memory:/m\n", &limit), 1073741824 - 416071680);
	/* the unified hierarchy's limit, when tighter */
	put("h/unified/u/memory.max", "536870912\n");
	put("h/unified/u/memory.current", "136870912\n");
	assert_int_equal(room_in("h", cg, &limit), 400000000);
	assert_int_equal(limit, 536870912);
}

/* This process's own cgroup, if any: whatever it is, a limit is at least the room. */
static void test_this_process(void **state)
{
	uint64_t limit, r = ps_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup", &limit);

	assert_true(r <= limit);
	print_message("this process's cgroup: room %llu, memory.max %llu\n",
		      (unsigned long long)r, (unsigned long long)limit);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_hybrid),
		cmocka_unit_test(test_this_process),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
