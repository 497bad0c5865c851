// SPDX-License-Identifier: MIT
/*
 * lib/pin.c: which pin mode a buffer gets.  Module decisions run against the
 * stand-in module (pm_test.h); mlock runs for real, including a real
 * RLIMIT_MEMLOCK refusal in a child that gave up CAP_IPC_LOCK.
 */
#include <sys/resource.h>
#include <unistd.h>

#include "pinmem.h"
#include "pm_test.h"

static int setup(void **state)
{
	fake_reset();
	return 0;
}

static struct pm_buf *alloc_ok(struct pm_ctx *ctx, size_t size, enum pm_pin_mode pin,
			       unsigned int flags)
{
	struct pm_buf_opts o = { .pin = pin, .flags = flags };
	struct pm_buf *b = NULL;

	assert_int_equal(pm_buf_alloc(ctx, size, &o, &b), 0);
	return b;
}

/* pm_buf_alloc fails with err, leaving no mapping, pin or lock behind. */
static void alloc_fails(struct pm_ctx *ctx, size_t size, enum pm_pin_mode pin,
			unsigned int flags, int err)
{
	struct pm_buf_opts o = { .pin = pin, .flags = flags };
	struct pm_buf *b = (void *)1;
	uint64_t vsz = vm_size();
	int regions = fake.regions;

	assert_int_equal(pm_buf_alloc(ctx, size, &o, &b), err);
	assert_null(b);
	assert_no_mapping_leak(vsz);
	assert_int_equal(fake.regions, regions);
}

static void module_pin(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *b = alloc_ok(ctx, 4 * MiB, PM_PIN_AUTO, 0);

	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_int_equal(pm_buf_segments(b), 3);
	assert_string_equal(pm_buf_note(b), "");
	assert_int_equal(fake.regions, 1);
	assert_int_equal(fake.lengths[0], 4 * MiB);
	assert_int_equal(fake.mlocks, 0);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(fake.regions, 0);
	assert_int_equal(fake.unpin_unknown, 0);
	pm_close(ctx);
}

/* A budget refusal is an error with its sentence, never a step down to mlock. */
static void budget_refusals_are_errors(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);

	fake.user_used = 61 * MiB / 2;
	fake.user_limit = 32 * MiB;
	alloc_fails(ctx, 8 * MiB, PM_PIN_AUTO, 0, -EDQUOT);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 MiB would exceed the per-user budget: 30.5 of 32.0 MiB in use");
	fake.user_limit = PINMEM_UNLIMITED;
	fake.global_limit = 4 * MiB;
	alloc_fails(ctx, 8 * MiB, PM_PIN_MODULE, 0, -ENOSPC);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "global budget"));
	fake.global_limit = PINMEM_UNLIMITED;
	fake.rlimit_limit = 64 * 1024;
	alloc_fails(ctx, 8 * MiB, PM_PIN_AUTO, 0, -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 8.0 MiB would exceed RLIMIT_MEMLOCK: 0 B of 64.0 KiB in use; raise it with ulimit -l");
	assert_int_equal(fake.mlocks, 0);
	assert_int_equal(fake.pins, 0);
	pm_close(ctx);
}

static void unpinnable_mapping_steps_down(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *b;

	fake.pin_err = -EOPNOTSUPP;
	b = alloc_ok(ctx, 1 * MiB, PM_PIN_AUTO, 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_string_equal(pm_buf_note(b),
			    "/dev/pinmem cannot pin this mapping (Operation not supported): used mlock");
	assert_int_equal(fake.mlocks, 1);
	pm_buf_free(ctx, b);
	assert_int_equal(fake.munlocks, 1);

	alloc_fails(ctx, 1 * MiB, PM_PIN_MODULE, PM_BUF_STRICT_PIN, -EOPNOTSUPP);
	assert_int_equal(fake.mlocks, 1);
	pm_close(ctx);
}

static void other_module_errors_fail(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);

	fake.pin_err = -EFAULT;
	alloc_fails(ctx, 1 * MiB, PM_PIN_AUTO, 0, -EFAULT);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB through /dev/pinmem failed: Bad address");
	/* ENOMEM the module says was its own memory, not RLIMIT_MEMLOCK (ABI 1.1). */
	fake.pin_err = -ENOMEM;
	fake.pin_reason = PINMEM_REFUSED_KMEM;
	fake.rlimit_limit = 64 * MiB;
	alloc_fails(ctx, 1 * MiB, PM_PIN_AUTO, 0, -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB through /dev/pinmem failed: the kernel is out of memory for its bookkeeping (no budget refused it)");
	assert_int_equal(fake.mlocks, 0);
	pm_close(ctx);
}

/* A module of ABI 1.0 writes no reason: the refusal counters tell. */
static void abi_1_0_enomem_by_counters(void **state)
{
	struct pm_ctx *ctx;

	fake.ver.abi_minor = 0;
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	fake.pin_err = -ENOMEM;
	fake.rlimit_limit = 64 * MiB;
	alloc_fails(ctx, 1 * MiB, PM_PIN_AUTO, 0, -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB through /dev/pinmem failed: Cannot allocate memory (no budget refused it)");
	fake.pin_err = 0;
	fake.rlimit_used = 64 * MiB;
	alloc_fails(ctx, 1 * MiB, PM_PIN_AUTO, 0, -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pinning 1.0 MiB would exceed RLIMIT_MEMLOCK: 64.0 of 64.0 MiB in use; raise it with ulimit -l");
	pm_close(ctx);
}

static void no_module(void **state)
{
	struct pm_ctx *ctx;
	struct pm_buf *b;

	fake.open_err = -ENOENT;
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	b = alloc_ok(ctx, 1 * MiB, PM_PIN_AUTO, 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_string_equal(pm_buf_note(b),
			    "no module (/dev/pinmem: No such file or directory (is pinmem.ko loaded?)): used mlock");
	pm_buf_free(ctx, b);
	b = alloc_ok(ctx, 1 * MiB, PM_PIN_MODULE, PM_BUF_STRICT_PAGES);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	pm_buf_free(ctx, b);
	alloc_fails(ctx, 1 * MiB, PM_PIN_MODULE, PM_BUF_STRICT_PIN, -ENODEV);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "module pinning was asked for strictly but the module is unusable: /dev/pinmem: No such file or directory (is pinmem.ko loaded?)");
	assert_int_equal(fake.mlocks, 2);
	assert_int_equal(fake.munlocks, 2);
	pm_close(ctx);
}

static void explicit_modes(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *b;

	b = alloc_ok(ctx, 1 * MiB, PM_PIN_MLOCK, PM_BUF_STRICT);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_int_equal(pm_buf_segments(b), 0);
	assert_int_equal(fake.pins, 0);
	pm_buf_free(ctx, b);
	b = alloc_ok(ctx, 1 * MiB, PM_PIN_NONE, PM_BUF_STRICT);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_NONE);
	pm_buf_free(ctx, b);
	assert_int_equal(fake.pins, 0);
	assert_int_equal(fake.mlocks, 1);
	assert_int_equal(fake.munlocks, 1);
	pm_close(ctx);
}

/* mlock refused by RLIMIT_MEMLOCK: an error, the locked prefix undone. */
static void mlock_refusal(void **state)
{
	struct pm_ctx *ctx = fake_ctx(PM_OPEN_NO_MODULE, PM_BACKEND_HOST);

	fake.mlock_err = -ENOMEM;
	fake.memlock_limit = 64 * 1024;
	alloc_fails(ctx, 8 * MiB, PM_PIN_AUTO, 0, -ENOMEM);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "mlock of 8.0 MiB exceeds RLIMIT_MEMLOCK (64.0 KiB); raise it with ulimit -l or use /dev/pinmem");
	assert_int_equal(fake.munlocks, 1);
	pm_close(ctx);
}

static void real_mlock(void **state)
{
	struct pm_open_opts o = { .flags = PM_OPEN_NO_MODULE, .backend = PM_BACKEND_NONE };
	struct pm_buf_opts bo = { .pin = PM_PIN_MLOCK, .flags = PM_BUF_STRICT };
	uint64_t before = vm_locked();
	struct pm_ctx *ctx;
	struct pm_buf *b;

	assert_int_equal(pm_open(&ctx, &o), 0);
	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, &bo, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_int_equal(vm_locked(), before + 8 * MiB);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(vm_locked(), before);
	pm_close(ctx);
}

static int child_rlimit(void)
{
	struct pm_open_opts o = { .flags = PM_OPEN_NO_MODULE, .backend = PM_BACKEND_NONE };
	struct pm_buf_opts bo = { .pin = PM_PIN_MLOCK };
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	struct pm_ctx *ctx;
	struct pm_buf *b;
	int r;

	if (drop_ipc_lock() || setrlimit(RLIMIT_MEMLOCK, &rl) || pm_open(&ctx, &o))
		return 10;
	r = pm_buf_alloc(ctx, 8 * MiB, &bo, &b);
	if (r != -ENOMEM)
		return 11;
	if (!strstr(pm_ctx_last_error(ctx),
		    "mlock of 8.0 MiB exceeds RLIMIT_MEMLOCK (64.0 KiB"))
		return 12;
	if (vm_locked() != 0)
		return 13;
	pm_close(ctx);
	return 0;
}

/* Without CAP_IPC_LOCK (root has it), RLIMIT_MEMLOCK applies to mlock. */
static void real_mlock_rlimit_refusal(void **state)
{
	assert_int_equal(in_child(child_rlimit), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(module_pin, setup),
		cmocka_unit_test_setup(budget_refusals_are_errors, setup),
		cmocka_unit_test_setup(abi_1_0_enomem_by_counters, setup),
		cmocka_unit_test_setup(unpinnable_mapping_steps_down, setup),
		cmocka_unit_test_setup(other_module_errors_fail, setup),
		cmocka_unit_test_setup(no_module, setup),
		cmocka_unit_test_setup(explicit_modes, setup),
		cmocka_unit_test_setup(mlock_refusal, setup),
		cmocka_unit_test_setup(real_mlock, setup),
		cmocka_unit_test_setup(real_mlock_rlimit_refusal, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
