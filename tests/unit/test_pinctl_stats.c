// SPDX-License-Identifier: MIT
/*
 * tools/pinctl/pinctl_statsfile.c: the stats file parser, tolerant of what a newer
 * compatible module adds and strict about what it cannot read; and
 * tools/pinctl/pinctl_prom.c's label escaping, its bounded process series
 * and the refusal reasons of ABI 1.5.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../tools/pinctl/pinctl.h"

#define HEAD "pinmem_stats_version 1\nabi 1.0\n"

static struct pctl_snapshot snap;
static char why[256];

static int setup(void **state)
{
	memset(&snap, 0, sizeof(snap));
	why[0] = '\0';
	return 0;
}

static int teardown(void **state)
{
	pctl_snapshot_free(&snap);
	return 0;
}

static int parse(const char *text)
{
	return pctl_stats_parse(text, &snap, why, sizeof(why));
}

static void full_file(void **state)
{
	assert_int_equal(parse(HEAD
		"global pinned_bytes 100 limit_bytes 200 peak_bytes 150 regions 2 pins 9 unpins 7 refused_global 1 refused_user 2 refused_rlimit 3 refused_fault 4\n"
		"default_user_limit_bytes 64\n"
		"enforce_rlimit 1\n"
		"user uid 1000 pinned_bytes 100 limit_bytes 18446744073709551615 peak_bytes 150 regions 2 pins 9 unpins 7 refused_global 0 refused_user 2 refused_rlimit 0 refused_fault 0 overridden 1\n"
		"process pid 42 uid 1000 comm python3 regions 2 pinned_bytes 100 mm_pinned_bytes 120\n"), 0);
	assert_true(snap.module);
	assert_int_equal(snap.source, PCTL_SRC_PROC);
	assert_int_equal(snap.stats_version, 1);
	assert_int_equal(snap.abi_major, 1);
	assert_int_equal(snap.abi_minor, 0);
	assert_int_equal(snap.global.pinned_bytes, 100);
	assert_int_equal(snap.global.limit_bytes, 200);
	assert_int_equal(snap.global.peak_bytes, 150);
	assert_int_equal(snap.global.regions, 2);
	assert_int_equal(snap.global.pins, 9);
	assert_int_equal(snap.global.unpins, 7);
	assert_int_equal(snap.global.refused[PCTL_REF_GLOBAL], 1);
	assert_int_equal(snap.global.refused[PCTL_REF_USER], 2);
	assert_int_equal(snap.global.refused[PCTL_REF_RLIMIT], 3);
	assert_int_equal(snap.global.refused[PCTL_REF_FAULT], 4);
	assert_int_equal(snap.default_user_limit, 64);
	assert_int_equal(snap.enforce_rlimit, 1);
	assert_int_equal(snap.nr_users, 1);
	assert_int_equal(snap.users[0].uid, 1000);
	assert_true(snap.users[0].overridden);
	assert_int_equal(snap.users[0].c.limit_bytes, PCTL_UNLIMITED);
	assert_int_equal(snap.nr_procs, 1);
	assert_int_equal(snap.procs[0].pid, 42);
	assert_int_equal(snap.procs[0].uid, 1000);
	assert_string_equal(snap.procs[0].comm, "python3");
	assert_int_equal(snap.procs[0].regions, 2);
	assert_int_equal(snap.procs[0].pinned_bytes, 100);
	assert_int_equal(snap.procs[0].mm_pinned_bytes, 120);
}

/* Process lines hidden from an unprivileged reader: counted and said. */
static void hidden_processes(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(parse(HEAD "hidden_processes 3\n"
		"process pid 42 uid 1000 comm python3 regions 2 pinned_bytes 100 mm_pinned_bytes 120\n"), 0);
	assert_int_equal(snap.hidden_procs, 3);
	f = open_memstream(&text, &len);
	pctl_render_text(f, &snap, -1);
	fclose(f);
	assert_non_null(strstr(text, "(3 more of other users or other pid namespaces are hidden from you; "
				     "run as root to see them: sudo pinctl status)"));
	free(text);
	pctl_snapshot_free(&snap);
	memset(&snap, 0, sizeof(snap));
	assert_int_equal(parse(HEAD "hidden_processes 0\n"), 0);
	assert_int_equal(snap.hidden_procs, 0);
	f = open_memstream(&text, &len);
	pctl_render_text(f, &snap, -1);
	fclose(f);
	assert_null(strstr(text, "hidden"));
	assert_non_null(strstr(text, "(no process holds pinmem regions)"));
	free(text);
}

/* Cgroup lines (ABI 1.2): parsed, named by the inode of their directory. */
static void cgroup_lines(void **state)
{
	char root[] = "/tmp/pinctl-cg-XXXXXX", dir[256], text[1024], *out = NULL;
	struct pctl_env env = { 0 };
	struct stat st;
	size_t len = 0;
	FILE *f;

	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/fs", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/fs/cgroup", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/fs/cgroup/pods", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/fs/cgroup/pods/job1", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(stat(dir, &st), 0);
	snprintf(text, sizeof(text), HEAD
		 "cgroup id %llu pinned_bytes 1048576 limit_bytes 2097152 peak_bytes 2097152 refused 3 later 1\n"
		 "cgroup id 999999999 pinned_bytes 4096 limit_bytes 18446744073709551615 peak_bytes 4096 refused 0\n",
		 (unsigned long long)st.st_ino);
	assert_int_equal(parse(text), 0);
	assert_int_equal(snap.nr_cgroups, 2);
	assert_int_equal(snap.cgroups[0].id, st.st_ino);
	assert_int_equal(snap.cgroups[0].pinned_bytes, 1048576);
	assert_int_equal(snap.cgroups[0].limit_bytes, 2097152);
	assert_int_equal(snap.cgroups[0].refused, 3);
	assert_int_equal(snap.cgroups[1].limit_bytes, PCTL_UNLIMITED);
	snprintf(env.sys_root, sizeof(env.sys_root), "%s", root);
	pctl_cgroup_paths(&env, &snap);
	assert_string_equal(snap.cgroups[0].path, "/pods/job1");
	assert_string_equal(snap.cgroups[1].path, "(not visible or removed, id 999999999)");
	f = open_memstream(&out, &len);
	pctl_render_text(f, &snap, -1);
	fclose(f);
	assert_non_null(strstr(out, "CGROUP"));
	assert_non_null(strstr(out, "/pods/job1"));
	free(out);
	rmdir(dir);
	snprintf(dir, sizeof(dir), "%s/fs/cgroup/pods", root);
	rmdir(dir);
	snprintf(dir, sizeof(dir), "%s/fs/cgroup", root);
	rmdir(dir);
	snprintf(dir, sizeof(dir), "%s/fs", root);
	rmdir(dir);
	rmdir(root);
	/* A malformed number is refused like any other line's. */
	pctl_snapshot_free(&snap);
	memset(&snap, 0, sizeof(snap));
	assert_int_equal(parse(HEAD "cgroup id x\n"), -EPROTO);
}

/*
 * Prometheus: a cgroup label escaped per the text format, an id label that
 * keeps two names of one label apart (bad\xff, bad\xfe: both U+FFFD), a limit
 * sample only for a cgroup with a limit, and no cgroup families from a module
 * before 1.2.
 */
static void cgroup_prom(void **state)
{
	static struct pctl_cgroup cgs[4];
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	memset(cgs, 0, sizeof(cgs));
	snprintf(cgs[0].path, sizeof(cgs[0].path), "/pods/we\"ird\\dir\nx");
	cgs[0].pinned_bytes = 4096;
	cgs[0].limit_bytes = PCTL_UNLIMITED;
	cgs[0].refused = 7;
	snprintf(cgs[1].path, sizeof(cgs[1].path), "/pods");
	cgs[1].limit_bytes = 8192;
	cgs[0].id = 11;
	cgs[1].id = 12;
	snprintf(cgs[2].path, sizeof(cgs[2].path), "/bad\xff");
	cgs[2].id = 13;
	cgs[2].limit_bytes = PCTL_UNLIMITED;
	snprintf(cgs[3].path, sizeof(cgs[3].path), "/bad\xfe");
	cgs[3].id = 14;
	cgs[3].limit_bytes = PCTL_UNLIMITED;
	snap.module = true;
	snap.source = PCTL_SRC_PROC;
	snap.abi_major = 1;
	snap.abi_minor = 2;
	snap.cgroups = cgs;
	snap.nr_cgroups = 4;
	f = open_memstream(&out, &len);
	pctl_render_prom(f, &snap, 0);
	fclose(f);
	assert_non_null(strstr(out, "# TYPE pinmem_cgroup_pinned_bytes gauge\n"
				    "pinmem_cgroup_pinned_bytes{cgroup=\"/pods/we\\\"ird\\\\dir\\nx\",id=\"11\"} 4096\n"
				    "pinmem_cgroup_pinned_bytes{cgroup=\"/pods\",id=\"12\"} 0\n"
				    "pinmem_cgroup_pinned_bytes{cgroup=\"/bad\xef\xbf\xbd\",id=\"13\"} 0\n"
				    "pinmem_cgroup_pinned_bytes{cgroup=\"/bad\xef\xbf\xbd\",id=\"14\"} 0\n"));
	assert_non_null(strstr(out, "# TYPE pinmem_cgroup_limit_bytes gauge\n"
				    "pinmem_cgroup_limit_bytes{cgroup=\"/pods\",id=\"12\"} 8192\n# HELP"));
	assert_non_null(strstr(out, "pinmem_cgroup_refused_total{cgroup=\"/pods/we\\\"ird\\\\dir\\nx\",id=\"11\"} 7\n"));
	assert_non_null(strstr(out, "# TYPE pinmem_cgroup_peak_bytes gauge\n"));
	free(out);
	out = NULL;
	snap.abi_minor = 1;
	f = open_memstream(&out, &len);
	pctl_render_prom(f, &snap, 0);
	fclose(f);
	assert_null(strstr(out, "pinmem_cgroup"));
	free(out);
	snap.cgroups = NULL;
	snap.nr_cgroups = 0;
}

/* Defaults when a line is missing: no limit, RLIMIT enforcement unknown. */
static void defaults(void **state)
{
	assert_int_equal(parse(HEAD), 0);
	assert_int_equal(snap.global.limit_bytes, PCTL_UNLIMITED);
	assert_int_equal(snap.default_user_limit, PCTL_UNLIMITED);
	assert_int_equal(snap.hidden_procs, -1);
	assert_int_equal(snap.enforce_rlimit, -1);
	assert_int_equal(snap.nr_users, 0);
	assert_int_equal(snap.nr_procs, 0);
}

static void tolerant(void **state)
{
	assert_int_equal(parse("pinmem_stats_version 1\nabi 1.7\n\n   \n"
		"global pinned_bytes 5 new_counter 99 limit_bytes 6\n"
		"histogram le 100 count 3\n"
		"user uid 7 pinned_bytes 5 fancy 1 overridden 0\n"
		"process pid 9 uid 7 comm a regions 1 pinned_bytes 5 mm_pinned_bytes 5 numa 0\n"
		"global_v2 whatever\n"), 0);
	assert_int_equal(snap.abi_minor, 7);
	assert_int_equal(snap.global.pinned_bytes, 5);
	assert_int_equal(snap.global.limit_bytes, 6);
	assert_int_equal(snap.nr_users, 1);
	assert_int_equal(snap.users[0].c.pinned_bytes, 5);
	assert_int_equal(snap.nr_procs, 1);
	assert_int_equal(snap.procs[0].mm_pinned_bytes, 5);
}

static void other_major_refused(void **state)
{
	assert_int_equal(parse("pinmem_stats_version 1\nabi 2.0\nglobal pinned_bytes 1\n"), -EPROTO);
	assert_non_null(strstr(why, "ABI 2.0"));
	teardown(state);
	assert_int_equal(parse("pinmem_stats_version 1\nabi 0.9\n"), -EPROTO);
	teardown(state);
	assert_int_equal(parse("pinmem_stats_version 3\nabi 1.0\n"), -EPROTO);
	assert_non_null(strstr(why, "version 3"));
}

static void malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"abi 1.0\n",					/* no version line first */
		"pinmem_stats_version x\n",
		"pinmem_stats_version 0\n",
		"pinmem_stats_version\n",
		HEAD "abi 1\n",
		HEAD "abi 1.0.1\n",
		HEAD "global pinned_bytes -1\n",
		HEAD "global pinned_bytes 18446744073709551616\n",
		HEAD "default_user_limit_bytes\n",
		HEAD "enforce_rlimit 2\n",
		HEAD "user uid 4294967296\n",
		HEAD "user uid 1 overridden 2\n",
		HEAD "user uid 1 pins 1x\n",
		HEAD "process pid 2147483648 uid 0 comm x\n",
		HEAD "process pid 1 uid 0 comm x regions 1 pinned_bytes many\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = parse(bad[i]);

		if (ret != -EPROTO)
			fail_msg("case %zu (%s) gave %d, want -EPROTO", i, bad[i], ret);
		assert_true(why[0]);
		teardown(state);
	}
	assert_int_equal(parse(HEAD "global pinned_bytes 1 limit_bytes 12x\n"), -EPROTO);
	assert_string_equal(why, "line 3: malformed value for \"limit_bytes\"");
}

/* One line per open file: a process with two files is one row. */
static void merge_process_lines(void **state)
{
	assert_int_equal(parse(HEAD
		"process pid 5 uid 1 comm a regions 1 pinned_bytes 10 mm_pinned_bytes 30\n"
		"process pid 6 uid 1 comm b regions 1 pinned_bytes 1 mm_pinned_bytes 1\n"
		"process pid 5 uid 1 comm a regions 2 pinned_bytes 20 mm_pinned_bytes 30\n"
		"process pid 0 uid 1 comm c regions 1 pinned_bytes 1 mm_pinned_bytes 1\n"
		"process pid 0 uid 1 comm d regions 1 pinned_bytes 1 mm_pinned_bytes 1\n"), 0);
	assert_int_equal(snap.nr_procs, 4);	/* pid 0 (not visible) is never merged */
	assert_int_equal(snap.procs[0].pid, 5);
	assert_int_equal(snap.procs[0].regions, 3);
	assert_int_equal(snap.procs[0].pinned_bytes, 30);
	assert_int_equal(snap.procs[0].mm_pinned_bytes, 30);
}

/* A comm with blanks (older formats) runs to the next "key number". */
static void comm_forms(void **state)
{
	assert_int_equal(parse(HEAD
		"process pid 1 uid 0 comm my worker regions 1 pinned_bytes 4096 mm_pinned_bytes 4096\n"
		"process pid 2 uid 0 comm a\\040b\\\\c regions 1 pinned_bytes 1 mm_pinned_bytes 1\n"
		"process pid 3 uid 0 comm regions regions 1 pinned_bytes 1 mm_pinned_bytes 1\n"), 0);
	assert_int_equal(snap.nr_procs, 3);
	assert_string_equal(snap.procs[0].comm, "my worker");
	assert_int_equal(snap.procs[0].pinned_bytes, 4096);
	assert_string_equal(snap.procs[1].comm, "a b\\c");
	assert_string_equal(snap.procs[2].comm, "regions");
	assert_int_equal(snap.procs[2].regions, 1);
}

static void sort_largest_first(void **state)
{
	assert_int_equal(parse(HEAD
		"user uid 3 pinned_bytes 5\nuser uid 1 pinned_bytes 50\nuser uid 2 pinned_bytes 5\n"
		"process pid 9 uid 0 comm a pinned_bytes 1\nprocess pid 8 uid 0 comm b pinned_bytes 100\n"
		"process pid 7 uid 0 comm c pinned_bytes 1\n"), 0);
	pctl_snapshot_sort(&snap);
	assert_int_equal(snap.users[0].uid, 1);
	assert_int_equal(snap.users[1].uid, 2);
	assert_int_equal(snap.users[2].uid, 3);
	assert_int_equal(snap.procs[0].pid, 8);
	assert_int_equal(snap.procs[1].pid, 7);
	assert_int_equal(snap.procs[2].pid, 9);
}

/*
 * ABI 1.5: refused_regions, _cgroup and _refs on the global and user lines
 * (refused_fault, as the module writes it, counts refs too), the bound and
 * the users_evicted bucket.
 */
static void reasons_15(void **state)
{
	assert_int_equal(parse("pinmem_stats_version 1\nabi 1.5\n"
		"global pinned_bytes 0 refused_global 1 refused_user 2 refused_rlimit 3 refused_fault 9 "
		"refused_regions 5 refused_cgroup 6 refused_refs 7\n"
		"max_idle_users 4\nidle_users 3\n"
		"user uid 7 pinned_bytes 0 refused_fault 1 refused_refs 1 refused_cgroup 2\n"
		"users_evicted users 11 pins 4 unpins 4 peak_bytes 0 refused_global 1 refused_user 0 "
		"refused_rlimit 0 refused_fault 3 refused_regions 0 refused_cgroup 0 refused_refs 2\n"), 0);
	assert_int_equal(snap.global.refused[PCTL_REF_FAULT], 2);
	assert_int_equal(snap.global.refused[PCTL_REF_REGIONS], 5);
	assert_int_equal(snap.global.refused[PCTL_REF_CGROUP], 6);
	assert_int_equal(snap.global.refused[PCTL_REF_REFS], 7);
	assert_int_equal(snap.users[0].c.refused[PCTL_REF_FAULT], 0);
	assert_int_equal(snap.users[0].c.refused[PCTL_REF_REFS], 1);
	assert_int_equal(snap.users[0].c.refused[PCTL_REF_CGROUP], 2);
	assert_true(snap.have_evicted);
	assert_int_equal(snap.max_idle_users, 4);
	assert_int_equal(snap.idle_users, 3);
	assert_int_equal(snap.evicted_users, 11);
	assert_int_equal(snap.evicted.pins, 4);
	assert_int_equal(snap.evicted.refused[PCTL_REF_GLOBAL], 1);
	assert_int_equal(snap.evicted.refused[PCTL_REF_FAULT], 1);
	assert_int_equal(snap.evicted.refused[PCTL_REF_REFS], 2);
	/* a 1.4 module: no refs key, refused_fault stays as written */
	pctl_snapshot_free(&snap);
	memset(&snap, 0, sizeof(snap));
	assert_int_equal(parse(HEAD "global refused_fault 9\n"), 0);
	assert_int_equal(snap.global.refused[PCTL_REF_FAULT], 9);
	assert_false(snap.have_evicted);
	assert_int_equal(parse(HEAD "users_evicted users x\n"), -EPROTO);
}

static char *render(size_t max)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	pctl_render_prom(f, &snap, max);
	fclose(f);
	return out;
}

/* Process series: the top N, then pid="other" with the rest; 0 by default. */
static void prom_processes(void **state)
{
	char *out;

	assert_int_equal(parse(HEAD
		"process pid 10 uid 1 comm a regions 1 pinned_bytes 100 mm_pinned_bytes 100\n"
		"process pid 11 uid 1 comm b regions 2 pinned_bytes 300 mm_pinned_bytes 300\n"
		"process pid 12 uid 1 comm c regions 3 pinned_bytes 200 mm_pinned_bytes 200\n"), 0);
	pctl_snapshot_sort(&snap);
	out = render(0);
	assert_null(strstr(out, "pid=\"1"));
	assert_non_null(strstr(out, "pinmem_process_pinned_bytes{pid=\"other\"} 600\n"));
	assert_non_null(strstr(out, "pinmem_process_regions{pid=\"other\"} 6\n"));
	assert_non_null(strstr(out, "pinmem_processes 3\n"));
	free(out);
	out = render(2);
	assert_non_null(strstr(out, "pinmem_process_pinned_bytes{pid=\"11\",uid=\"1\",user=\"\",comm=\"b\"} 300\n"
				    "pinmem_process_pinned_bytes{pid=\"12\",uid=\"1\",user=\"\",comm=\"c\"} 200\n"
				    "pinmem_process_pinned_bytes{pid=\"other\"} 100\n"));
	assert_null(strstr(out, "pid=\"10\""));
	free(out);
	out = render(5);
	assert_non_null(strstr(out, "pid=\"10\""));
	assert_non_null(strstr(out, "pinmem_process_pinned_bytes{pid=\"other\"} 0\n"));
	free(out);
}

static void prom_label(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	pctl_prom_label(f, "a\"b\\c\nd\xff\xc3\xa9");
	fclose(f);
	assert_string_equal(buf, "a\\\"b\\\\c\\nd\xef\xbf\xbd\xc3\xa9");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(full_file, setup, teardown),
		cmocka_unit_test_setup_teardown(defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(hidden_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_prom, setup, teardown),
		cmocka_unit_test_setup_teardown(tolerant, setup, teardown),
		cmocka_unit_test_setup_teardown(other_major_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(merge_process_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(comm_forms, setup, teardown),
		cmocka_unit_test_setup_teardown(sort_largest_first, setup, teardown),
		cmocka_unit_test_setup_teardown(reasons_15, setup, teardown),
		cmocka_unit_test_setup_teardown(prom_processes, setup, teardown),
		cmocka_unit_test(prom_label),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
