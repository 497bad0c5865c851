// SPDX-License-Identifier: MIT
/*
 * tools/pinctl/pinctl_limits.c, `pinctl limits set`: everything is checked before
 * the first ioctl, the global/default/rlimit/first-user changes share one
 * SET_LIMITS, each further user gets its own, and a failure part way says
 * exactly what was applied.  ioctl() is replaced by a recorder below (the
 * definition in this program takes precedence over libc's for every call).
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
	unsigned int abi_major;
} rec;

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
		v->abi_minor = 0;
		return 0;
	}
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

static int setup(void **state)
{
	char sub[512];

	memset(&rec, 0, sizeof(rec));
	rec.abi_major = PINMEM_ABI_MAJOR;
	if (!mkdtemp(dir))
		return -1;
	snprintf(sub, sizeof(sub), "%s/proc", dir);
	mkdir(sub, 0755);
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

/* pinctl limits set ARGS...; returns the exit status, output flushed. */
static int run(const char *first, ...)
{
	char *argv[32] = { "limits", "set", (char *)first };
	int argc = 3;
	va_list ap;
	int ret;

	va_start(ap, first);
	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	ret = pctl_cmd_limits(&env, argc, argv);
	fflush(env.out);
	fflush(env.err);
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
