// SPDX-License-Identifier: MIT
/* lib/refusal.c: the sentences for refused pins, from STATS and RLIMIT numbers. */
#include "pinmem.h"
#include "buf.h"
#include "pm_test.h"

static struct pm_ctx *ctx;

static int setup(void **state)
{
	fake_reset();
	ctx = fake_ctx(0, PM_BACKEND_NONE);
	return 0;
}

static int teardown(void **state)
{
	pm_close(ctx);
	return 0;
}

static void bytes_format(void **state)
{
	char b[32];

	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 0), "0 B");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 1023), "1023 B");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 1024), "1.0 KiB");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 64 * MiB), "64.0 MiB");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 3 * GiB / 2), "1.5 GiB");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 8 * GiB), "8.0 GiB");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), 2048 * GiB), "2.0 TiB");
	assert_string_equal(pm_fmt_bytes(b, sizeof(b), UINT64_MAX), "16.0 EiB");
}

static void user_budget(void **state)
{
	fake.user_used = 61 * GiB / 2;
	fake.user_limit = 32 * GiB;
	assert_int_equal(pm_refuse_module(ctx, -EDQUOT, 8 * GiB, NULL, 0), -EDQUOT);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 GiB would exceed the per-user budget: 30.5 of 32.0 GiB in use");
}

static void global_budget(void **state)
{
	fake.global_used = 90 * GiB;
	fake.global_limit = 94 * GiB;
	assert_int_equal(pm_refuse_module(ctx, -ENOSPC, 8 * GiB, NULL, 0), -ENOSPC);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 GiB would exceed the global budget: 90.0 of 94.0 GiB in use");
}

static void rlimit_budget(void **state)
{
	fake.rlimit_used = 60 * MiB;
	fake.rlimit_limit = 64 * MiB;
	assert_int_equal(pm_refuse_module(ctx, -ENOMEM, 8 * MiB, NULL, 0), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 MiB would exceed RLIMIT_MEMLOCK: 60.0 of 64.0 MiB in use; raise it with ulimit -l");
}

static void units_differ(void **state)
{
	fake.user_used = 12 * MiB;
	fake.user_limit = 32 * GiB;
	pm_refuse_module(ctx, -EDQUOT, 40 * GiB, NULL, 0);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 40.0 GiB would exceed the per-user budget: 12.0 MiB of 32.0 GiB in use");
}

/* Use dropped between the refusal and STATS: say what is known, not "would exceed". */
static void numbers_moved(void **state)
{
	fake.user_used = 1 * GiB;
	fake.user_limit = 32 * GiB;
	pm_refuse_module(ctx, -EDQUOT, 1 * GiB, NULL, 0);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 GiB was refused by the per-user budget (now 1.0 of 32.0 GiB in use)");
	fake.global_used = 5 * GiB;
	pm_refuse_module(ctx, -ENOSPC, 1 * GiB, NULL, 0);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 GiB was refused by the global budget (unlimited, 5.0 GiB in use)");
}

static void other_module_error(void **state)
{
	assert_int_equal(pm_refuse_module(ctx, -EFAULT, 8 * GiB, NULL, 0), -EFAULT);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 GiB through /dev/pinmem failed: Bad address");
}

/* The module's ENOMEM is also "out of memory": the counters tell which it was. */
static void enomem_without_budget_refusal(void **state)
{
	struct pinmem_stats before;

	memset(&before, 0, sizeof(before));
	fake.rlimit_limit = 64 * MiB;
	assert_int_equal(pm_refuse_module(ctx, -ENOMEM, 1 * MiB, &before, 0), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB through /dev/pinmem failed: Cannot allocate memory (no budget refused it)");
	fake.refused_rlimit = 1;
	fake.rlimit_used = 64 * MiB;
	pm_refuse_module(ctx, -ENOMEM, 1 * MiB, &before, 0);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB would exceed RLIMIT_MEMLOCK: 64.0 of 64.0 MiB in use; raise it with ulimit -l");
}

/* ABI 1.1: the reason written back names the budget; no counters needed. */
static void reason_names_budget(void **state)
{
	fake.rlimit_limit = 64 * MiB;
	fake.rlimit_used = 64 * MiB;
	assert_int_equal(pm_refuse_module(ctx, -ENOMEM, 1 * MiB, NULL, PINMEM_REFUSED_RLIMIT), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB would exceed RLIMIT_MEMLOCK: 64.0 of 64.0 MiB in use; raise it with ulimit -l");
	fake.user_locked = 63 * MiB;
	fake.rlimit_used = 0;
	pm_refuse_module(ctx, -ENOMEM, 2 * MiB, NULL, PINMEM_REFUSED_RLIMIT_USER);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 2.0 MiB would exceed RLIMIT_MEMLOCK (counted for all processes of this user, io_uring buffers included): 63.0 of 64.0 MiB in use; raise it with ulimit -l or release pins elsewhere");
	pm_refuse_module(ctx, -ENOMEM, 2 * MiB, NULL, PINMEM_REFUSED_KMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 2.0 MiB through /dev/pinmem failed: the kernel is out of memory for its bookkeeping (no budget refused it)");
	assert_int_equal(pm_refuse_module(ctx, -EMFILE, 4096, NULL, PINMEM_REFUSED_REGIONS_FILE), -EMFILE);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 4.0 KiB was refused: this context holds as many regions as the module allows (max_regions_per_file); pin fewer, larger buffers");
	assert_int_equal(pm_refuse_module(ctx, -ETOOMANYREFS, 2 * MiB, NULL, PINMEM_REFUSED_FOLIO_PINS),
			 -ETOOMANYREFS);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 2.0 MiB was refused: this context already holds 16 times as many page pins as a huge page in that range has pages (overlapping pins); unpin some, or pin the buffer once");
	assert_int_equal(pm_refuse_module(ctx, -ETOOMANYREFS, 4096, NULL, PINMEM_REFUSED_PAGE_REFS),
			 -ETOOMANYREFS);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 4.0 KiB was refused: a page in that range is pinned so many times (a page mapped at many addresses, or pinned by many regions) that one more pin would near its reference count's limit; pin each page once");
	/* A reason that is no budget: the errno, even if it looks like one. */
	pm_refuse_module(ctx, -ENOMEM, 4096, NULL, PINMEM_REFUSED_MAPPING);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 4.0 KiB through /dev/pinmem failed: Cannot allocate memory");
}

/* ABI 1.2: a cgroup budget is named by its path, from this process's cgroup. */
static void cgroup_budget(void **state)
{
	char line[4096], want[4400], *p = NULL;
	FILE *f = fopen("/proc/self/cgroup", "re");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			p = line + 3;
			p[strcspn(p, "\n")] = '\0';
		}
	if (f)
		fclose(f);
	fake.cg_id = fake.cg_refuser = 77;
	fake.cg_used = 15 * GiB;
	fake.cg_limit = 16 * GiB;
	assert_int_equal(pm_refuse_module(ctx, -EDQUOT, 2 * GiB, NULL, PINMEM_REFUSED_CGROUP), -EDQUOT);
	if (p && strcmp(p, "/")) {
		snprintf(want, sizeof(want),
			 "pinning 2.0 GiB would exceed the budget of cgroup %s: 15.0 of 16.0 GiB in use", p);
		assert_string_equal(pm_ctx_last_error(ctx), want);
	}
	/* The refusing cgroup is not on this process's path (it moved). */
	fake.cg_refuser = 78;
	pm_refuse_module(ctx, -EDQUOT, 2 * GiB, NULL, PINMEM_REFUSED_CGROUP);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 2.0 GiB was refused by the budget of cgroup id 78 (not on this process's cgroup path any more)");
	/* cgroup2 unmounted since (the module's CGROUP ioctl is EOPNOTSUPP). */
	fake.cg_err = -EOPNOTSUPP;
	pm_refuse_module(ctx, -EDQUOT, 2 * GiB, NULL, PINMEM_REFUSED_CGROUP);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 2.0 GiB was refused by the budget of cgroup id 78; cgroup budgets need cgroup v2, which is not mounted now");
}

static void mlock_rlimit(void **state)
{
	fake.memlock_limit = 64 * MiB;
	assert_int_equal(pm_refuse_mlock(ctx, -ENOMEM, 8 * GiB), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "mlock of 8.0 GiB exceeds RLIMIT_MEMLOCK (64.0 MiB); raise it with ulimit -l or use /dev/pinmem");
	/* EPERM is mlock's answer when the limit is 0; it is the same budget. */
	fake.memlock_limit = 0;
	assert_int_equal(pm_refuse_mlock(ctx, -EPERM, 4096), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "mlock of 4.0 KiB exceeds RLIMIT_MEMLOCK (0 B); raise it with ulimit -l or use /dev/pinmem");
	fake.memlock_limit = 64 * MiB;
	fake.memlock_locked = 60 * MiB;
	pm_refuse_mlock(ctx, -ENOMEM, 8 * MiB);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "mlock of 8.0 MiB exceeds RLIMIT_MEMLOCK (64.0 MiB, 60.0 MiB already locked); raise it with ulimit -l or use /dev/pinmem");
}

static void mlock_other_error(void **state)
{
	assert_int_equal(pm_refuse_mlock(ctx, -ENOMEM, 8 * GiB), -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx), "mlock of 8.0 GiB failed: Cannot allocate memory");
	fake.memlock_limit = 64 * MiB;
	assert_int_equal(pm_refuse_mlock(ctx, -EAGAIN, 8 * MiB), -EAGAIN);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "mlock of 8.0 MiB failed: Resource temporarily unavailable");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(bytes_format, setup, teardown),
		cmocka_unit_test_setup_teardown(user_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(global_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(rlimit_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(units_differ, setup, teardown),
		cmocka_unit_test_setup_teardown(numbers_moved, setup, teardown),
		cmocka_unit_test_setup_teardown(other_module_error, setup, teardown),
		cmocka_unit_test_setup_teardown(enomem_without_budget_refusal, setup, teardown),
		cmocka_unit_test_setup_teardown(reason_names_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(cgroup_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(mlock_rlimit, setup, teardown),
		cmocka_unit_test_setup_teardown(mlock_other_error, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
