// SPDX-License-Identifier: MIT
/*
 * tools/pinctl/pinctl_limits*.c, `pinctl limits set`, `clear` and `apply`:
 * everything is checked before the first change (sizes, users, cgroup paths,
 * the cgroups on the mount and in the module), the global/default/rlimit/
 * first-user changes share one SET_LIMITS, each further user and each
 * cgroup gets its own call, and a failure part way says exactly what was
 * applied.  ioctl() is replaced by a recorder below (the definition in this
 * program takes precedence over libc's for every call).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include <linux/types.h>
#include "uapi/pinmem.h"
#include "../../tools/pinctl/pinctl.h"

#define GiB (1ULL << 30)
#define MAX_CALLS 16

static struct {
	unsigned long req[MAX_CALLS];
	struct pinmem_limits set[MAX_CALLS];
	int nr, nr_set;
	int set_errno[MAX_CALLS];	/* errno of the n-th SET_LIMITS, 0 = success */
	unsigned int abi_major, abi_minor;
	/* PINMEM_IOC_CGROUP calls: flags, limit and path as sent */
	struct pinmem_cgroup cg[MAX_CALLS];
	char cg_path[MAX_CALLS][256];
	int nr_cg;
	int cg_errno[MAX_CALLS];	/* errno of the n-th CGROUP call */
	const char *cg_unknown;		/* a path the module does not find */
} rec;

static int cgroup_ioctl(struct pinmem_cgroup *c)
{
	int n = rec.nr_cg++;

	if (n >= MAX_CALLS)
		return 0;
	rec.cg[n] = *c;
	snprintf(rec.cg_path[n], sizeof(rec.cg_path[n]), "%.*s", (int)c->path_len,
		 (const char *)(uintptr_t)c->path);
	if (rec.cg_unknown && !strcmp(rec.cg_path[n], rec.cg_unknown)) {
		errno = ENOENT;
		return -1;
	}
	if (rec.cg_errno[n]) {
		errno = rec.cg_errno[n];
		return -1;
	}
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (rec.nr < MAX_CALLS)
		rec.req[rec.nr] = req;
	rec.nr++;
	if (req == PINMEM_IOC_GET_VERSION) {
		struct pinmem_version *v = arg;

		v->abi_major = rec.abi_major;
		v->abi_minor = rec.abi_minor;
		return 0;
	}
	if (req == PINMEM_IOC_CGROUP)
		return cgroup_ioctl(arg);
	if (req == PINMEM_IOC_SET_LIMITS) {
		int n = rec.nr_set++;

		memcpy(&rec.set[n], arg, sizeof(rec.set[n]));
		if (rec.set_errno[n]) {
			errno = rec.set_errno[n];
			return -1;
		}
		return 0;
	}
	errno = ENOTTY;
	return -1;
}

static char dir[] = "/tmp/pinctl-limits-XXXXXX";
static struct pctl_env env;
static char *out, *err;
static size_t out_len, err_len;

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* put() for text with NUL bytes. */
static void put_bytes(const char *rel, const char *data, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static int setup(void **state)
{
	char sub[512];

	memset(&rec, 0, sizeof(rec));
	rec.abi_major = PINMEM_ABI_MAJOR;
	rec.abi_minor = PINMEM_ABI_MINOR;
	if (!mkdtemp(dir))
		return -1;
	/* cgroup2 on /sys/fs/cgroup, with cgroups a, a/b and c */
	for (const char *d = "proc\0proc/self\0sys\0sys/fs\0sys/fs/cgroup\0sys/fs/cgroup/a\0"
			     "sys/fs/cgroup/a/b\0sys/fs/cgroup/c\0"; *d; d += strlen(d) + 1) {
		snprintf(sub, sizeof(sub), "%s/%s", dir, d);
		mkdir(sub, 0755);
	}
	put("proc/self/mounts", "sysfs /sys sysfs rw 0 0\n"
				"cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
	put("pinmem", "");	/* opens; the recorder answers its ioctls */
	put("proc/meminfo", "MemTotal:       1048576 kB\n");
	put("passwd", "alice:x:1000:1000::/:/bin/sh\nbob:x:1001:1001::/:/bin/sh\n"
		      "carol:x:1002:1002::/:/bin/sh\n");
	pctl_env_init(&env);
	snprintf(env.proc_root, sizeof(env.proc_root), "%s/proc", dir);
	snprintf(env.sys_root, sizeof(env.sys_root), "%s/sys", dir);
	snprintf(env.dev_root, sizeof(env.dev_root), "%s", dir);
	snprintf(env.passwd, sizeof(env.passwd), "%s/passwd", dir);
	env.out = open_memstream(&out, &out_len);
	env.err = open_memstream(&err, &err_len);
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	fclose(env.out);
	fclose(env.err);
	free(out);
	free(err);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return -1;
	strcpy(dir, "/tmp/pinctl-limits-XXXXXX");
	return 0;
}

/* pinctl limits SUB ARGS...; returns the exit status, output flushed. */
static int vrun(const char *sub, const char *first, va_list ap)
{
	char *argv[32] = { "limits", (char *)sub, (char *)first };
	int argc = 3;
	int ret;

	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	argv[argc] = NULL;
	ret = pctl_cmd_limits(&env, argc, argv);
	fflush(env.out);
	fflush(env.err);
	return ret;
}

/* pinctl limits set ARGS... */
static int run(const char *first, ...)
{
	va_list ap;
	int ret;

	va_start(ap, first);
	ret = vrun("set", first, ap);
	va_end(ap);
	return ret;
}

static int run_sub(const char *sub, const char *first, ...)
{
	va_list ap;
	int ret;

	va_start(ap, first);
	ret = vrun(sub, first, ap);
	va_end(ap);
	return ret;
}

static void assert_reserved_zero(const struct pinmem_limits *l)
{
	for (int i = 0; i < 4; i++)
		assert_int_equal(l->reserved[i], 0);
	assert_int_equal(l->user_flags, 0);
}

static void one_call(void **state)
{
	assert_int_equal(run("--global", "64G", "--user", "alice=16G", "--default-user", "8G",
			     NULL), 0);
	assert_int_equal(rec.nr_set, 1);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_GLOBAL |
			 PINMEM_LIMIT_SET_DEFAULT_USER | PINMEM_LIMIT_SET_USER);
	assert_int_equal(rec.set[0].global_limit, 64 * GiB);
	assert_int_equal(rec.set[0].default_user_limit, 8 * GiB);
	assert_int_equal(rec.set[0].uid, 1000);
	assert_int_equal(rec.set[0].user_limit, 16 * GiB);
	assert_reserved_zero(&rec.set[0]);
	assert_string_equal(out, "set global 64 GiB, default-user 8 GiB, user alice (uid 1000) 16 GiB\n");
	assert_string_equal(err, "");
}

static void one_call_per_user(void **state)
{
	assert_int_equal(run("--user", "alice=1G", "--clear-user", "bob", "--user", "1002=10%",
			     "--enforce-rlimit", "off", NULL), 0);
	assert_int_equal(rec.nr_set, 3);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_RLIMIT | PINMEM_LIMIT_SET_USER);
	assert_int_equal(rec.set[0].enforce_rlimit, 0);
	assert_int_equal(rec.set[0].uid, 1000);
	assert_int_equal(rec.set[1].flags, PINMEM_LIMIT_CLEAR_USER);
	assert_int_equal(rec.set[1].uid, 1001);
	assert_int_equal(rec.set[1].user_limit, 0);
	assert_int_equal(rec.set[2].flags, PINMEM_LIMIT_SET_USER);
	assert_int_equal(rec.set[2].uid, 1002);
	assert_int_equal(rec.set[2].user_limit, 1048576ULL * 1024 / 10);	/* 10% of MemTotal */
	for (int i = 1; i < 3; i++) {
		assert_int_equal(rec.set[i].global_limit, 0);
		assert_int_equal(rec.set[i].default_user_limit, 0);
		assert_reserved_zero(&rec.set[i]);
	}
}

/* The second call fails: say what the first applied, never try the third. */
static void partial_failure(void **state)
{
	rec.set_errno[1] = EINVAL;
	assert_int_equal(run("--global", "1G", "--user", "alice=1G", "--user", "bob=2G",
			     "--user", "carol=3G", NULL), 1);
	assert_int_equal(rec.nr_set, 2);
	assert_string_equal(err, "pinctl: limits set: setting user bob (uid 1001) 2 GiB failed: "
			    "Invalid argument; applied only: global 1 GiB, user alice (uid 1000) 1 GiB\n");
	assert_string_equal(out, "set global 1 GiB, user alice (uid 1000) 1 GiB\n");
}

static void not_permitted(void **state)
{
	rec.set_errno[0] = EPERM;
	assert_int_equal(run("--global", "1G", "--user", "alice=1G", "--user", "bob=2G", NULL), 1);
	assert_int_equal(rec.nr_set, 1);
	assert_non_null(strstr(err, "needs CAP_SYS_ADMIN"));
	assert_non_null(strstr(err, "nothing changed\n"));
	assert_string_equal(out, "");
}

static void other_abi(void **state)
{
	rec.abi_major = PINMEM_ABI_MAJOR + 1;
	rec.abi_minor = 0;
	assert_int_equal(run("--global", "1G", NULL), 1);
	assert_int_equal(rec.nr_set, 0);
	assert_non_null(strstr(err, "speaks ABI 2.0"));
	assert_non_null(strstr(err, "nothing changed\n"));
}

/* A bad argument anywhere: no device opened, no ioctl at all. */
static void validate_first(void **state)
{
	static const char *const bad[][4] = {
		{ "--global", "1G", "--user", "alice=1Q" },
		{ "--user", "alice=1G", "--user", "mallory=1G" },
		{ "--user", "alice=1G", "--clear-user", "alice" },
		{ "--global", "1G", "--default-user", "-1" },
		{ "--global", "200%", "--user", "bob=1G" },
		{ "--global", "1G", "--enforce-rlimit", "perhaps" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rewind(env.err);
		assert_int_equal(run(bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL), 2);
		assert_int_equal(rec.nr, 0);
	}
	assert_string_equal(out, "");
}

static void dry_run(void **state)
{
	assert_int_equal(run("--global", "1G", "--user", "alice=1G", "--user", "bob=2G",
			     "--dry-run", NULL), 0);
	assert_int_equal(rec.nr, 0);
	assert_string_equal(out, "would set global 1 GiB, user alice (uid 1000) 1 GiB\n"
			    "would set user bob (uid 1001) 2 GiB\n");
}

static void assert_cg(int n, const char *path, uint32_t flags, uint64_t limit)
{
	assert_string_equal(rec.cg_path[n], path);
	assert_int_equal(rec.cg[n].path_len, strlen(path));
	assert_int_equal(rec.cg[n].flags, flags);
	assert_int_equal(rec.cg[n].limit_bytes, limit);
	assert_int_equal(rec.cg[n].pinned_bytes | rec.cg[n].peak_bytes | rec.cg[n].refused |
			 rec.cg[n].cgroup_id, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rec.cg[n].reserved[i], 0);
}

/* Every cgroup is read (GET) before the first change; one call per cgroup. */
static void cgroup_set(void **state)
{
	assert_int_equal(run("--cgroup", "a=1G", "--cgroup", "/sys/fs/cgroup/a/b/=none",
			     "--global", "2G", "--cgroup", "//c/.=unlimited", NULL), 0);
	assert_int_equal(rec.nr_set, 1);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_GLOBAL);
	assert_int_equal(rec.nr_cg, 6);
	assert_cg(0, "a", 0, 0);
	assert_cg(1, "a/b", 0, 0);
	assert_cg(2, "c", 0, 0);
	assert_cg(3, "a", PINMEM_CGROUP_SET, GiB);
	assert_cg(4, "a/b", PINMEM_CGROUP_CLEAR, 0);
	assert_cg(5, "c", PINMEM_CGROUP_CLEAR, 0);
	/* SET_LIMITS after the three GETs, before the cgroup changes */
	assert_int_equal(rec.req[4], PINMEM_IOC_SET_LIMITS);
	assert_string_equal(out, "set global 2 GiB\nset cgroup /a 1 GiB\n"
			    "set cgroup /a/b back to no limit\nset cgroup /c back to no limit\n");
	assert_string_equal(err, "");
}

static void cgroup_clear(void **state)
{
	assert_int_equal(run_sub("clear", "--cgroup", "a/b", "--user", "bob", NULL), 0);
	assert_int_equal(rec.nr_set, 1);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_CLEAR_USER);
	assert_int_equal(rec.set[0].uid, 1001);
	assert_int_equal(rec.nr_cg, 2);
	assert_cg(1, "a/b", PINMEM_CGROUP_CLEAR, 0);
}

/* A cgroup missing on the mount: not even the device is opened. */
static void cgroup_missing_dir(void **state)
{
	assert_int_equal(run("--global", "1G", "--cgroup", "a=1G", "--cgroup", "a/nope=1G", NULL), 1);
	assert_int_equal(rec.nr, 0);
	assert_string_equal(err, "pinctl: limits set: no cgroup '/a/nope' (no directory "
			    "/sys/fs/cgroup/a/nope); nothing changed\n");
	assert_string_equal(out, "");
}

/* The module does not find one (another cgroup namespace): nothing set. */
static void cgroup_module_enoent(void **state)
{
	rec.cg_unknown = "c";
	assert_int_equal(run("--global", "1G", "--cgroup", "a=1G", "--cgroup", "c=1G", NULL), 1);
	assert_int_equal(rec.nr_set, 0);
	assert_int_equal(rec.nr_cg, 2);
	assert_int_equal(rec.cg[0].flags | rec.cg[1].flags, 0);
	assert_non_null(strstr(err, "no cgroup '/c'"));
	assert_non_null(strstr(err, "nothing changed\n"));
}

/* --missing-ok: missing cgroups skipped, saying so; the rest applied. */
static void cgroup_missing_ok(void **state)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/limits.conf", dir);
	put("limits.conf", "cgroup a 1G\ncgroup gone 2G\ncgroup c 3G\n");
	rec.cg_unknown = "c";
	assert_int_equal(run_sub("apply", "--missing-ok", path, NULL), 0);
	assert_int_equal(rec.nr_cg, 3);	/* GET a, GET c (ENOENT), SET a */
	assert_cg(2, "a", PINMEM_CGROUP_SET, GiB);
	assert_string_equal(out, "skipped cgroup /gone: no such cgroup\n"
			    "skipped cgroup /c: the module does not find it\nset cgroup /a 1 GiB\n");
}

static void cgroup_v1_only(void **state)
{
	put("proc/self/mounts", "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n");
	assert_int_equal(run("--cgroup", "a=1G", NULL), 1);
	assert_int_equal(rec.nr, 0);
	assert_string_equal(err, "pinctl: limits set: cgroup budgets need cgroup v2 (mount cgroup2 "
			    "at /sys/fs/cgroup, or boot with systemd.unified_cgroup_hierarchy=1); "
			    "nothing changed\n");
}

/* A module without PINMEM_IOC_CGROUP (ABI 1.1), or one built without cgroups. */
static void cgroup_old_module(void **state)
{
	rec.abi_minor = 1;
	assert_int_equal(run("--global", "1G", "--cgroup", "a=1G", NULL), 1);
	assert_int_equal(rec.nr_set + rec.nr_cg, 0);
	assert_non_null(strstr(err, "ABI 1.1, which has no cgroup budgets"));
	rewind(env.err);
	rec.abi_minor = PINMEM_ABI_MINOR;
	rec.cg_errno[0] = EOPNOTSUPP;
	assert_int_equal(run("--global", "1G", "--cgroup", "a=1G", NULL), 1);
	assert_int_equal(rec.nr_set, 0);
	assert_non_null(strstr(err, "need cgroup v2"));
}

/* The second cgroup change fails: say what was applied. */
static void cgroup_partial(void **state)
{
	rec.cg_errno[3] = ENOMEM;
	assert_int_equal(run("--global", "1G", "--cgroup", "a=1G", "--cgroup", "c=2G", NULL), 1);
	assert_int_equal(rec.nr_cg, 4);
	assert_string_equal(err, "pinctl: limits set: setting cgroup /c 2 GiB failed: Cannot "
			    "allocate memory; applied only: global 1 GiB, cgroup /a 1 GiB\n");
}

static void cgroup_not_permitted(void **state)
{
	rec.cg_errno[1] = EPERM;
	assert_int_equal(run("--cgroup", "a=1G", NULL), 1);
	assert_non_null(strstr(err, "needs CAP_SYS_ADMIN"));
	assert_non_null(strstr(err, "nothing changed\n"));
}

/* Bad input anywhere in the list: no ioctl at all, one line, exit 2. */
static void cgroup_validate_first(void **state)
{
	static const char *const bad[][4] = {
		{ "--cgroup", "a=1G", "--cgroup", "c=1Q" },
		{ "--cgroup", "a=1G", "--cgroup", "c" },
		{ "--cgroup", "a=1G", "--cgroup", "=1G" },
		{ "--cgroup", "a=1G", "--cgroup", "/=1G" },
		{ "--cgroup", "a=1G", "--cgroup", "a/../c=1G" },
		{ "--cgroup", "a=1G", "--cgroup", "/a/=2G" },
		{ "--cgroup", "a=1G", "--user", "mallory=1G" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rewind(env.err);
		assert_int_equal(run(bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL), 2);
		assert_int_equal(rec.nr, 0);
	}
	assert_string_equal(out, "");
}

/* limits apply: the file's words are limits set's; a bad line applies nothing. */
static void apply_file(void **state)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/limits.conf", dir);
	put("limits.conf", "# pinmem\n\nglobal 64G   # all\ndefault-user 8G\nenforce-rlimit off\n"
			   "user alice 16G\nuser bob default\n cgroup /a 1G\ncgroup c none\n");
	assert_int_equal(run_sub("apply", path, NULL), 0);
	assert_int_equal(rec.nr_set, 2);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_GLOBAL | PINMEM_LIMIT_SET_DEFAULT_USER |
			 PINMEM_LIMIT_SET_RLIMIT | PINMEM_LIMIT_SET_USER);
	assert_int_equal(rec.set[0].global_limit, 64 * GiB);
	assert_int_equal(rec.set[0].user_limit, 16 * GiB);
	assert_int_equal(rec.set[1].flags, PINMEM_LIMIT_CLEAR_USER);
	assert_int_equal(rec.nr_cg, 4);
	assert_cg(2, "a", PINMEM_CGROUP_SET, GiB);
	assert_cg(3, "c", PINMEM_CGROUP_CLEAR, 0);

	memset(&rec, 0, sizeof(rec));
	rec.abi_major = PINMEM_ABI_MAJOR;
	rewind(env.err);
	put("limits.conf", "global 64G\ncgroup a 1G\ncgroup c 1G extra\n");
	assert_int_equal(run_sub("apply", path, NULL), 2);
	assert_int_equal(rec.nr, 0);
	assert_non_null(strstr(err, "limits.conf line 3: 'cgroup' takes PATH SIZE"));
}

/* A fresh recorder and empty outputs between runs of one test. */
static void reset(void)
{
	memset(&rec, 0, sizeof(rec));
	rec.abi_major = PINMEM_ABI_MAJOR;
	rec.abi_minor = PINMEM_ABI_MINOR;
	fclose(env.out);
	fclose(env.err);
	free(out);
	free(err);
	env.out = open_memstream(&out, &out_len);
	env.err = open_memstream(&err, &err_len);
}

/* limits apply FILE, where FILE holds @len bytes of @text. */
static int apply_bytes(const char *text, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/limits.conf", dir);
	put_bytes("limits.conf", text, len);
	return run_sub("apply", path, NULL);
}

#define APPLY(lit) apply_bytes(lit, sizeof(lit) - 1)

/* Refused: exit 2, not one ioctl, nothing on stdout, @what on stderr. */
static void assert_refused(int rc, const char *what)
{
	assert_int_equal(rc, 2);
	assert_int_equal(rec.nr, 0);
	assert_string_equal(out, "");
	if (!strstr(err, what))
		fail_msg("stderr '%s' does not say '%s'", err, what);
	assert_non_null(strchr(err, '\n'));
	assert_ptr_equal(strchr(err, '\n') + 1, err + strlen(err));	/* one line */
}

/*
 * The file: read as a C string it was "global 1", applied as 1
 * byte (no pins on the node), the bad lines after the NUL never seen.
 */
static void apply_nul_byte(void **state)
{
	assert_refused(APPLY("global 1\0000M\ncgroup nosuch 1G\nfrobnicate\n"),
		       "limits.conf line 1: a NUL byte");
	assert_non_null(strstr(err, "nothing changed\n"));
	/* anywhere: after good lines, in a comment, at the very end */
	reset();
	assert_refused(APPLY("global 1G\ncgroup a 1G\n# x\0y\n"), "limits.conf line 3: a NUL byte");
	reset();
	assert_refused(APPLY("global 1G\nuser alice 1G\n\0"), "limits.conf line 3: a NUL byte");
	reset();
	assert_refused(APPLY("global 1G\x01\n"), "line 1: control character 0x01");
	reset();
	assert_refused(APPLY("global 1G\ncgroup a 1G\x1b[0m\n"), "line 2: control character 0x1b");
	/* tabs and CRLF line ends are text */
	reset();
	assert_int_equal(APPLY("global\t1G\r\ncgroup\ta\t1G\r\n"), 0);
	assert_int_equal(rec.nr_set, 1);
	assert_cg(1, "a", PINMEM_CGROUP_SET, GiB);
}

/* One bad line anywhere, the last included: nothing applied, its number said. */
static void apply_bad_line_anywhere(void **state)
{
	static const struct {
		const char *text, *what;
	} cases[] = {
		{ "global 1G\nuser alice 1G\ncgroup a 1G\nfrobnicate\n", "line 4: unknown setting 'frobnicate'" },
		{ "global 1G\nuser alice 1G\ncgroup a 1G\nglobal 2G", "line 4: global is given twice" },
		{ "global 1G\n\n\n# c\ndefault-user 1Q\n", "line 5: invalid size '1Q'" },
		{ "global 1G\nuser mallory 1G\n", "line 2: unknown user 'mallory'" },
		{ "cgroup a 1G\nenforce-rlimit maybe\n", "line 2: enforce-rlimit takes on or off" },
		{ "global 1G\ncgroup a/../c 1G\n", "line 2: cgroup 'a/../c'" },
		{ "global 1G 2G\n", "line 1: 'global' takes SIZE" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		reset();
		assert_refused(apply_bytes(cases[i].text, strlen(cases[i].text)), cases[i].what);
		assert_non_null(strstr(err, "; nothing changed\n"));
	}
}

/*
 * A limit the module would round down to no page at all is a typo unless
 * written as 0; on the command line and in a file, for every kind of limit.
 */
static void zero_needs_explicit_zero(void **state)
{
	static const char *const bad[][2] = {
		{ "--global", "1" }, { "--global", "0%" }, { "--global", "4095" },
		{ "--global", "1K" }, { "--global", "0.5K" }, { "--default-user", "100" },
		{ "--user", "alice=1" }, { "--user", "bob=0%" }, { "--cgroup", "a=3K" },
		{ "--cgroup", "c=0%" },
	};
	long page = sysconf(_SC_PAGESIZE);
	char arg[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reset();
		assert_refused(run(bad[i][0], bad[i][1], NULL), "less than one page");
		assert_non_null(strstr(err, "write 0 if that is meant"));
	}
	reset();
	assert_refused(APPLY("global 64G\nuser alice 1\n"), "line 2: size '1' for user");
	assert_non_null(strstr(err, "allow no pins"));

	/* one page is a limit; more is rounded down by the module */
	reset();
	snprintf(arg, sizeof(arg), "%ld", page);
	assert_int_equal(run("--global", arg, NULL), 0);
	assert_int_equal(rec.set[0].global_limit, page);

	/* explicit zero: applied, and pinctl says what it does */
	reset();
	assert_int_equal(run("--global", "0", "--user", "alice=0G", "--cgroup", "a=0", NULL), 0);
	assert_int_equal(rec.set[0].global_limit, 0);
	assert_int_equal(rec.set[0].user_limit, 0);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_GLOBAL | PINMEM_LIMIT_SET_USER);
	assert_cg(1, "a", PINMEM_CGROUP_SET, 0);
	assert_string_equal(out, "set global 0 B (no pins allowed), user alice (uid 1000) 0 B (no pins allowed)\n"
			    "set cgroup /a 0 B (no pins allowed)\n");
	reset();
	assert_int_equal(APPLY("default-user 0\n"), 0);
	assert_int_equal(rec.set[0].flags, PINMEM_LIMIT_SET_DEFAULT_USER);
	assert_int_equal(rec.set[0].default_user_limit, 0);
	assert_string_equal(out, "set default-user 0 B (no pins allowed)\n");
	reset();
	assert_int_equal(run("--global", "0", "--dry-run", NULL), 0);
	assert_int_equal(rec.nr, 0);
	assert_string_equal(out, "would set global 0 B (no pins allowed)\n");
}

/*
 * "No limit" as pinctl.8 spells it (unlimited, any case; none for a
 * cgroup) and as the module parameters do (U64_MAX, documented in
 * modprobe.d/pinmem.conf); -1, none elsewhere and infinity are refused
 * with the spellings that work.
 */
static void unlimited_spellings(void **state)
{
	static const char *const bad[][2] = {
		{ "--global", "-1" }, { "--global", "none" }, { "--default-user", "infinity" },
		{ "--user", "alice=-1" }, { "--user", "alice=None" },
	};

	assert_int_equal(run("--global", "18446744073709551615", "--default-user", "UNLIMITED",
			     "--user", "alice=18446744073709551615", "--user", "bob=Unlimited", NULL), 0);
	assert_int_equal(rec.set[0].global_limit, UINT64_MAX);
	assert_int_equal(rec.set[0].default_user_limit, UINT64_MAX);
	assert_int_equal(rec.set[0].user_limit, UINT64_MAX);
	assert_int_equal(rec.set[1].user_limit, UINT64_MAX);
	assert_string_equal(out, "set global unlimited, default-user unlimited, user alice (uid 1000) unlimited\n"
			    "set user bob (uid 1001) unlimited\n");
	/* a cgroup without a limit has none: each spelling drops it */
	reset();
	assert_int_equal(run("--cgroup", "a=18446744073709551615", "--cgroup", "a/b=none",
			     "--cgroup", "c=unlimited", NULL), 0);
	assert_cg(3, "a", PINMEM_CGROUP_CLEAR, 0);
	assert_cg(4, "a/b", PINMEM_CGROUP_CLEAR, 0);
	assert_cg(5, "c", PINMEM_CGROUP_CLEAR, 0);
	reset();
	assert_int_equal(APPLY("global 18446744073709551615\ncgroup a none\ncgroup c 18446744073709551615\n"), 0);
	assert_int_equal(rec.set[0].global_limit, UINT64_MAX);
	assert_cg(2, "a", PINMEM_CGROUP_CLEAR, 0);
	assert_cg(3, "c", PINMEM_CGROUP_CLEAR, 0);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reset();
		assert_refused(run(bad[i][0], bad[i][1], NULL), "is not a size for");
		assert_non_null(strstr(err, "write unlimited for no limit, or 0 to allow no pins"));
	}
	reset();
	assert_refused(run("--global", "18446744073709551616", NULL), "out of range");
	reset();
	assert_refused(APPLY("global none\n"), "line 1: 'none' is not a size for global");
}

/* Cgroup paths with blanks, quotes and backslashes: double quotes in a file. */
static void apply_quoted(void **state)
{
	static const char *const dirs[] = { "a b", "x\"y\\z", "s\\x2dq", "h#1", "sp ace" };
	static const char conf[] =
		"cgroup \"a b\" 1G   # a space\n"
		"cgroup \"x\\\"y\\\\z\" 2G\n"
		"cgroup \"s\\x2dq\" 3G\n"
		"cgroup \"h#1\" none # '#' in quotes is no comment\n"
		"user \"alice\" 1G\n"
		"cgroup \"/sys/fs/cgroup/sp ace/\" 4G\n";
	char path[600];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/sys/fs/cgroup/%s", dir, dirs[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	/* ".." is refused in a quoted path as anywhere: nothing applied */
	assert_refused(APPLY("cgroup \"a b\" 1G\ncgroup \"s\\x2dq/..\" none\n"),
		       "line 2: cgroup 's\\x2dq/..'");
	reset();
	assert_int_equal(APPLY(conf), 0);
	assert_int_equal(rec.nr_set, 1);
	assert_int_equal(rec.set[0].uid, 1000);
	assert_int_equal(rec.nr_cg, 10);
	assert_cg(5, "a b", PINMEM_CGROUP_SET, GiB);
	assert_cg(6, "x\"y\\z", PINMEM_CGROUP_SET, 2 * GiB);
	assert_cg(7, "s\\x2dq", PINMEM_CGROUP_SET, 3 * GiB);
	assert_cg(8, "h#1", PINMEM_CGROUP_CLEAR, 0);
	assert_cg(9, "sp ace", PINMEM_CGROUP_SET, 4 * GiB);

	/* the command line needs no quoting of its own: the shell's does */
	reset();
	assert_int_equal(run("--cgroup", "a b=1G", NULL), 0);
	assert_cg(1, "a b", PINMEM_CGROUP_SET, GiB);
}

static void apply_bad_quotes(void **state)
{
	static const struct {
		const char *text, *what;
	} cases[] = {
		{ "global 1G\ncgroup \"a b 1G\n", "line 2: a quote is not closed" },
		{ "cgroup \"a b\n\" 1G\n", "line 1: a quote is not closed" },
		{ "cgroup a\"b 1G\n", "line 1: a quote inside a word" },
		{ "cgroup \"a\"b 1G\n", "line 1: text right after a closing quote" },
		{ "cgroup \"a\"# x\n", "line 1: text right after a closing quote" },
		{ "cgroup a 1G\ncgroup \"\" 1G\n", "line 2: cgroup ''" },
		{ "cgroup a b c d e\n", "line 1: too many words" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		reset();
		assert_refused(apply_bytes(cases[i].text, strlen(cases[i].text)), cases[i].what);
		assert_non_null(strstr(err, "nothing changed\n"));
	}
}

/* Paths as operators write them, and what the module is given. */
static void normalize(void **state)
{
	static const struct {
		const char *in, *mnt, *out;
		int ret;
	} cases[] = {
		{ "kubepods.slice/pod-x", NULL, "kubepods.slice/pod-x", 0 },
		{ "/system.slice/x.service/", NULL, "system.slice/x.service", 0 },
		{ "/sys/fs/cgroup/a//b/./c", NULL, "a/b/c", 0 },
		{ "/sys/fs/cgroupX/a", NULL, "sys/fs/cgroupX/a", 0 },
		{ "/sys/fs/cgroup/unified/a", "/sys/fs/cgroup/unified", "a", 0 },
		{ "/sys/fs/cgroup/unified/a", "/sys/fs/cgroup/unified/", "a", 0 },
		{ "a=b/c d", NULL, "a=b/c d", 0 },
		{ "...", NULL, "...", 0 },
		{ "", NULL, "", -EINVAL },
		{ "/", NULL, "", -EINVAL },
		{ "/sys/fs/cgroup", NULL, "", -EINVAL },
		{ "./.", NULL, "", -EINVAL },
		{ "a/..", NULL, "", -EINVAL },
		{ "../a", NULL, "", -EINVAL },
	};
	char norm[PCTL_CG_PATH_MAX + 1], big[5000];
	const char *why;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = pctl_cgroup_normalize(cases[i].in, cases[i].mnt, norm, sizeof(norm), &why);

		assert_int_equal(ret, cases[i].ret);
		if (!ret)
			assert_string_equal(norm, cases[i].out);
		else
			assert_non_null(why);
	}
	/* 4095 bytes is the most, 255 a part */
	memset(big, 'x', sizeof(big));
	for (int i = 200; i < 4095; i += 201)
		big[i] = '/';
	big[4095] = '\0';
	assert_int_equal(pctl_cgroup_normalize(big, NULL, norm, sizeof(norm), &why), 0);
	assert_int_equal(strlen(norm), 4095);
	big[4095] = 'x';
	big[4096] = '\0';
	assert_int_equal(pctl_cgroup_normalize(big, NULL, norm, sizeof(norm), &why), -ENAMETOOLONG);
	memset(big, 'y', 256);
	big[256] = '\0';
	assert_int_equal(pctl_cgroup_normalize(big, NULL, norm, sizeof(norm), &why), -ENAMETOOLONG);
	big[255] = '\0';
	assert_int_equal(pctl_cgroup_normalize(big, NULL, norm, sizeof(norm), &why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(one_call, setup, teardown),
		cmocka_unit_test_setup_teardown(one_call_per_user, setup, teardown),
		cmocka_unit_test_setup_teardown(partial_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(not_permitted, setup, teardown),
		cmocka_unit_test_setup_teardown(other_abi, setup, teardown),
		cmocka_unit_test_setup_teardown(validate_first, setup, teardown),
		cmocka_unit_test_setup_teardown(dry_run, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_set, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_missing_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_module_enoent, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_missing_ok, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_v1_only, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_old_module, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_partial, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_not_permitted, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_validate_first, setup, teardown),
		cmocka_unit_test_setup_teardown(apply_file, setup, teardown),
		cmocka_unit_test_setup_teardown(apply_nul_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(apply_bad_line_anywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(zero_needs_explicit_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(unlimited_spellings, setup, teardown),
		cmocka_unit_test_setup_teardown(apply_quoted, setup, teardown),
		cmocka_unit_test_setup_teardown(apply_bad_quotes, setup, teardown),
		cmocka_unit_test(normalize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
