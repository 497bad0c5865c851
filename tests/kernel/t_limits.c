// SPDX-License-Identifier: MIT
/*
 * Limit administration: only CAP_SYS_ADMIN may SET_LIMITS (EPERM otherwise,
 * also for root without it), only root may write the module parameters, and
 * refused attempts change nothing.  Limits changed at runtime, through the
 * parameters or SET_LIMITS, take effect on the next PIN and show up in both
 * places; lowering below current use keeps existing regions.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

#define ALL_CAPS	((1ULL << (CAP_LAST_CAP + 1)) - 1)
#define PARAM_DIR	"/sys/module/pinmem/parameters/"

static const char *const params[] = { "global_limit", "default_user_limit", "enforce_rlimit" };

static int same_limits(const struct pinmem_limits *a, const struct pinmem_limits *b)
{
	return a->global_limit == b->global_limit &&
	       a->default_user_limit == b->default_user_limit &&
	       a->user_limit == b->user_limit && a->user_flags == b->user_flags &&
	       a->enforce_rlimit == b->enforce_rlimit;
}

/* Every SET_LIMITS is EPERM and every parameter write fails; nothing moves. */
static int unprivileged(void *p)
{
	const char *who = p;
	struct pinmem_limits before, after, l;
	int fd = kt_open();
	unsigned int i;

	kt_eq(kt_get_limits(fd, 1002, &before), 0, "%s: GET_LIMITS allowed", who);
	kt_eq(kt_statfile_version(), PINMEM_STATS_VERSION, "%s: stats file readable", who);
	for (i = 0; i < 5; i++) {
		memset(&l, 0, sizeof(l));
		l.flags = 1U << i;
		l.uid = 1002;
		l.global_limit = l.default_user_limit = l.user_limit = 12345 * KT_PAGE;
		kt_eq(kt_set_limits(fd, &l), -EPERM, "%s: SET_LIMITS flag 0x%x is EPERM", who, l.flags);
	}
	kt_eq(kt_get_limits(fd, 1002, &after), 0, "%s: GET_LIMITS", who);
	kt_ok(same_limits(&before, &after), "%s: limits unchanged", who);
	close(fd);
	return 0;
}

static int param_writer(void *p)
{
	unsigned int i;

	for (i = 0; i < 3; i++) {
		char path[128];
		int fd;

		snprintf(path, sizeof(path), PARAM_DIR "%s", params[i]);
		fd = open(path, O_WRONLY);
		kt_ok(fd < 0 && errno == EACCES, "uid 1000: %s not writable (EACCES)", params[i]);
		if (fd >= 0) {
			kt_ok(write(fd, "4096", 4) < 0, "uid 1000: write to %s refused", params[i]);
			close(fd);
		}
	}
	return 0;
}

/* Parameters follow SET_LIMITS: CAP_SYS_ADMIN, not the file mode, decides. */
static int root_param_writer(void *p)
{
	unsigned int i;

	for (i = 0; i < 3; i++) {
		char path[128];

		snprintf(path, sizeof(path), PARAM_DIR "%s", params[i]);
		kt_eq(kt_write(path, "1"), -EPERM, "root without CAP_SYS_ADMIN: %s write is EPERM",
		      params[i]);
	}
	return 0;
}

static void test_permissions(void)
{
	uint64_t g = kt_param("global_limit"), u = kt_param("default_user_limit");
	uint64_t r = kt_param("enforce_rlimit");

	kt_eq(kt_run_as(1000, 0, unprivileged, "uid 1000"), 0, "uid 1000 cannot change limits");
	kt_eq(kt_run_as(1000, ALL_CAPS & ~KT_CAP(CAP_SYS_ADMIN), unprivileged,
			"uid 1000 with all capabilities but CAP_SYS_ADMIN"), 0,
	      "only CAP_SYS_ADMIN counts");
	kt_eq(kt_run_as(0, ALL_CAPS & ~KT_CAP(CAP_SYS_ADMIN), unprivileged,
			"root without CAP_SYS_ADMIN"), 0, "root without CAP_SYS_ADMIN cannot either");
	kt_eq(kt_run_as(1000, 0, param_writer, NULL), 0, "uid 1000 cannot write parameters");
	kt_eq(kt_run_as(0, ALL_CAPS & ~KT_CAP(CAP_SYS_ADMIN), root_param_writer, NULL), 0,
	      "root without CAP_SYS_ADMIN cannot write parameters");
	kt_ok(kt_param("global_limit") == g && kt_param("default_user_limit") == u &&
	      kt_param("enforce_rlimit") == r, "parameters unchanged");
}

static int admin_cap(void *p)
{
	struct pinmem_limits l = { .flags = PINMEM_LIMIT_SET_GLOBAL, .global_limit = 64 * KT_MIB };
	int fd = kt_open();

	kt_eq(kt_set_limits(fd, &l), 0, "uid 1000 with CAP_SYS_ADMIN: SET_LIMITS allowed");
	close(fd);
	return 0;
}

static void test_admin_capability(void)
{
	kt_eq(kt_run_as(1000, KT_CAP(CAP_SYS_ADMIN), admin_cap, NULL), 0, "CAP_SYS_ADMIN, not uid 0, decides");
	kt_eq(kt_param("global_limit"), 64 * KT_MIB, "the change is visible in the parameter");
}

static void test_runtime(void)
{
	char *buf = kt_map(16 * KT_MIB, 1);
	struct pinmem_limits l;
	int fd = kt_open();
	uint64_t h1, h2;

	kt_limits_open();
	kt_eq(kt_param_set("global_limit", 4 * KT_MIB), 0, "parameter global_limit = 4 MiB");
	kt_eq(kt_get_limits(fd, 0, &l), 0, "GET_LIMITS");
	kt_eq(l.global_limit, 4 * KT_MIB, "GET_LIMITS shows the parameter");
	kt_eq(kt_pin_handle(fd, buf, 4 * KT_MIB, &h1), 0, "PIN 4 MiB at a 4 MiB limit");
	kt_eq(kt_param_set("global_limit", 2 * KT_MIB), 0, "lower the limit below use");
	kt_eq(kt_regions_total(fd), 1, "the region stays");
	kt_eq(kt_pin(fd, buf + 4 * KT_MIB, KT_PAGE, NULL), -ENOSPC, "new PIN refused");
	kt_eq(kt_param_set("global_limit", 8 * KT_MIB), 0, "raise the limit to 8 MiB");
	kt_eq(kt_pin_handle(fd, buf + 4 * KT_MIB, 4 * KT_MIB, &h2), 0, "PIN 4 MiB more");
	kt_eq(kt_pin(fd, buf + 8 * KT_MIB, KT_PAGE, NULL), -ENOSPC, "one page over refused");
	kt_eq(kt_unpin(fd, h2), 0, "UNPIN");

	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_GLOBAL | PINMEM_LIMIT_SET_DEFAULT_USER;
	l.global_limit = 12 * KT_MIB + 100;
	l.default_user_limit = 6 * KT_MIB;
	kt_eq(kt_set_limits(fd, &l), 0, "SET_LIMITS global 12 MiB + 100, default user 6 MiB");
	kt_eq(kt_param("global_limit"), 12 * KT_MIB, "parameter shows it, rounded down to pages");
	kt_eq(kt_param("default_user_limit"), 6 * KT_MIB, "parameter default_user_limit follows");
	kt_eq(kt_pin(fd, buf + 4 * KT_MIB, 2 * KT_MIB + KT_PAGE, NULL), -EDQUOT,
	      "new default user limit refuses one page over");
	kt_eq(kt_pin_handle(fd, buf + 4 * KT_MIB, 2 * KT_MIB, &h2), 0, "and allows the limit");
	kt_eq(kt_unpin(fd, h2), 0, "UNPIN");

	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_RLIMIT;
	l.enforce_rlimit = 0;
	kt_eq(kt_set_limits(fd, &l), 0, "SET_LIMITS enforce_rlimit 0");
	kt_eq(kt_param("enforce_rlimit"), 0, "parameter enforce_rlimit follows");
	l.enforce_rlimit = 1;
	kt_eq(kt_set_limits(fd, &l), 0, "SET_LIMITS enforce_rlimit 1");
	kt_eq(kt_param("enforce_rlimit"), 1, "parameter enforce_rlimit follows");

	/* Validation comes before any change. */
	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_GLOBAL | PINMEM_LIMIT_SET_RLIMIT;
	l.global_limit = KT_MIB;
	l.enforce_rlimit = 2;
	kt_eq(kt_set_limits(fd, &l), -EINVAL, "SET_LIMITS with enforce_rlimit 2 is EINVAL");
	kt_eq(kt_param("global_limit"), 12 * KT_MIB, "and its valid global part was not applied");
	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_USER | PINMEM_LIMIT_CLEAR_USER;
	l.uid = 1000;
	kt_eq(kt_set_limits(fd, &l), -EINVAL, "SET_USER with CLEAR_USER is EINVAL");
	l.flags = 0;
	kt_eq(kt_set_limits(fd, &l), -EINVAL, "SET_LIMITS without flags is EINVAL");
	kt_eq(kt_write(PARAM_DIR "global_limit", "lots"), -EINVAL, "parameter write of text is EINVAL");
	kt_eq(kt_param("global_limit"), 12 * KT_MIB, "and changes nothing");

	kt_eq(kt_unpin(fd, h1), 0, "UNPIN");
	close(fd);
	munmap(buf, 16 * KT_MIB);
}

int main(void)
{
	kt_limits_save();
	test_permissions();
	test_admin_capability();
	test_runtime();
	kt_limits_restore();
	kt_expect_clean("t_limits end");
	return kt_done();
}
