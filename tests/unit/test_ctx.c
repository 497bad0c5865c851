// SPDX-License-Identifier: MIT
/* lib/ctx.c: what pm_open finds, ABI refusal, flags, info, close, per-thread errors. */
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>

#include "pinmem.h"
#include "pm_test.h"

static int setup(void **state)
{
	fake_reset();
	return 0;
}

static void open_without_device_falls_back(void **state)
{
	struct pm_ctx *ctx;
	struct pm_ctx_info in;

	fake.open_err = -ENOENT;
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	assert_int_equal(pm_ctx_info(ctx, &in), 0);
	assert_false(in.module);
	assert_int_equal(in.module_abi_major, 0);
	assert_string_equal(in.module_note,
			    "/dev/pinmem: No such file or directory (is pinmem.ko loaded?)");
	assert_string_equal(in.backend, "host");
	assert_int_equal(fake.opens, 1);
	pm_close(ctx);
	assert_int_equal(fake.closes, 0);
}

static void open_require_module_refuses(void **state)
{
	struct pm_open_opts o = { .flags = PM_OPEN_REQUIRE_MODULE };
	struct pm_ctx *ctx = (void *)1;
	char err[256] = "";

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	fake.open_err = -ENOENT;
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -ENODEV);
	assert_null(ctx);
	assert_string_equal(err, "the pinmem module is required but /dev/pinmem: No such file or directory (is pinmem.ko loaded?)");

	fake_reset();
	fake.open_err = -EACCES;
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -EACCES);
	assert_non_null(strstr(err, "Permission denied"));
}

static void open_refuses_other_abi_major(void **state)
{
	struct pm_open_opts o = { 0 };
	struct pm_ctx *ctx = (void *)1;
	char err[256] = "", want[256];

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	fake.ver.abi_major = 2;
	fake.ver.abi_minor = 3;
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -EPROTO);
	assert_null(ctx);
	snprintf(want, sizeof(want),
		 "/dev/pinmem speaks pinmem ABI 2.3 but this libpinmem speaks ABI %d.%d; install matching versions of the module and the library",
		 PINMEM_ABI_MAJOR, PINMEM_ABI_MINOR);
	assert_string_equal(err, want);
	assert_int_equal(fake.closes, fake.opens);

	/* A truncated errbuf still gets a terminated prefix. */
	o.errbuf_len = 12;
	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -EPROTO);
	assert_string_equal(err, "/dev/pinmem");
}

static void open_accepts_newer_minor(void **state)
{
	struct pm_ctx_info in;
	struct pm_ctx *ctx;

	fake.ver.abi_minor = 7;
	ctx = fake_ctx(PM_OPEN_REQUIRE_MODULE, PM_BACKEND_HOST);
	assert_int_equal(pm_ctx_info(ctx, &in), 0);
	assert_true(in.module);
	assert_int_equal(in.module_abi_major, PINMEM_ABI_MAJOR);
	assert_int_equal(in.module_abi_minor, 7);
	assert_string_equal(in.module_note, "");
	assert_int_equal(in.page_size, 4096);
	pm_close(ctx);
	assert_int_equal(fake.closes, 1);
}

static void open_version_failure(void **state)
{
	struct pm_open_opts o = { .flags = PM_OPEN_REQUIRE_MODULE };
	struct pm_ctx_info in;
	struct pm_ctx *ctx;
	char err[256];

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	fake.version_err = -ENOTTY;
	ctx = fake_ctx(0, PM_BACKEND_HOST);
	pm_ctx_info(ctx, &in);
	assert_false(in.module);
	assert_non_null(strstr(in.module_note, "GET_VERSION failed"));
	assert_int_equal(fake.closes, 1);
	pm_close(ctx);
	assert_int_equal(fake.closes, 1);

	assert_int_equal(pm_open_sys(&ctx, &o, &fake_ops), -ENOTTY);
	assert_non_null(strstr(err, "required"));
}

static void open_refuses_other_page_size(void **state)
{
	struct pm_ctx *ctx;

	fake.ver.page_size = 65536;
	assert_int_equal(pm_open_sys(&ctx, NULL, &fake_ops), -EPROTO);
	assert_int_equal(fake.closes, fake.opens);
}

static void open_no_module_flag(void **state)
{
	struct pm_ctx_info in;
	struct pm_ctx *ctx = fake_ctx(PM_OPEN_NO_MODULE, PM_BACKEND_HOST);

	assert_int_equal(fake.opens, 0);
	pm_ctx_info(ctx, &in);
	assert_false(in.module);
	assert_string_equal(in.module_note, "not used (PM_OPEN_NO_MODULE)");
	pm_close(ctx);
}

static void open_bad_arguments(void **state)
{
	struct pm_open_opts o = { .flags = 0x80 };
	struct pm_ctx *ctx;
	char err[128] = "";

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	assert_int_equal(pm_open(&ctx, &o), -EINVAL);
	assert_non_null(strstr(err, "flags 0x80"));
	o.flags = PM_OPEN_NO_MODULE | PM_OPEN_REQUIRE_MODULE;
	assert_int_equal(pm_open(&ctx, &o), -EINVAL);
	o.flags = 0;
	o.backend = (enum pm_backend_kind)9;
	assert_int_equal(pm_open(&ctx, &o), -EINVAL);
	assert_non_null(strstr(err, "unknown backend 9"));
	o.backend = PM_BACKEND_NONE;
	o.reserved[1] = 1;
	assert_int_equal(pm_open(&ctx, &o), -EINVAL);
	assert_string_equal(err, "pm_open: reserved options must be zero");
	assert_int_equal(pm_open(NULL, NULL), -EINVAL);
	assert_int_equal(fake.opens, 0);
	assert_int_equal(pm_ctx_info(NULL, NULL), -EINVAL);
	pm_close(NULL);
	assert_string_equal(pm_ctx_last_error(NULL), "no context");
}

/* The device path comes from the options; the real open reports it. */
static void open_device_path_option(void **state)
{
	struct pm_open_opts o = { .device = "/nonexistent/pinmem", .backend = PM_BACKEND_NONE };
	struct pm_ctx_info in;
	struct pm_ctx *ctx;

	assert_int_equal(pm_open(&ctx, &o), 0);
	pm_ctx_info(ctx, &in);
	assert_false(in.module);
	assert_string_equal(in.module_note,
			    "/nonexistent/pinmem: No such file or directory (is pinmem.ko loaded?)");
	assert_string_equal(in.backend, "none");
	pm_close(ctx);
}

static void info_matches_machine(void **state)
{
	struct pm_ctx_info in;
	struct io_uring ring;
	struct pm_ctx *ctx;
	bool uring, thp = false;
	char line[128] = "";
	FILE *f;

	uring = !io_uring_queue_init(2, &ring, 0);
	if (uring)
		io_uring_queue_exit(&ring);
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		thp = fgets(line, sizeof(line), f) && !strstr(line, "[never]");
		fclose(f);
	}
	ctx = fake_ctx(PM_OPEN_NO_MODULE, PM_BACKEND_NONE);
	pm_ctx_info(ctx, &in);
	assert_int_equal(in.uring, uring);
	assert_int_equal(in.thp, thp);
	assert_int_equal(in.hugetlb, in.hugetlb_free_pages > 0);
	pm_close(ctx);
}

static void backend_none_refuses_copies(void **state)
{
	struct pm_ctx *ctx = fake_ctx(PM_OPEN_NO_MODULE, PM_BACKEND_NONE);
	void *dev = NULL;
	char buf[8];

	assert_int_equal(pm_dev_alloc(ctx, 4096, &dev), -ENODEV);
	assert_string_equal(pm_ctx_last_error(ctx),
			    "pm_dev_alloc: the context has no copy backend (PM_BACKEND_NONE)");
	assert_int_equal(pm_copy_h2d(ctx, buf, buf, 8, NULL), -ENODEV);
	assert_int_equal(pm_copy_d2h(ctx, buf, buf, 8), -ENODEV);
	assert_int_equal(pm_event_query(ctx, 1), -ENODEV);
	assert_int_equal(pm_event_wait(ctx, 1), -ENODEV);
	assert_int_equal(pm_event_release(ctx, 1), -ENODEV);
	assert_int_equal(pm_dev_free(ctx, buf), -ENODEV);
	pm_close(ctx);
}

#ifndef PM_HAVE_CUDA
static void cuda_not_built(void **state)
{
	struct pm_open_opts o = { .backend = PM_BACKEND_CUDA, .flags = PM_OPEN_NO_MODULE };
	struct pm_ctx_info in;
	struct pm_ctx *ctx;
	char err[160];

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	assert_int_equal(pm_open(&ctx, &o), -EOPNOTSUPP);
	assert_string_equal(err, "copy backend cuda unavailable: libpinmem was built without CUDA");
	o.backend = PM_BACKEND_AUTO;
	assert_int_equal(pm_open(&ctx, &o), 0);
	pm_ctx_info(ctx, &in);
	assert_string_equal(in.backend, "host");
	assert_string_equal(in.backend_note, "libpinmem was built without CUDA");
	pm_close(ctx);
}
#endif

/* pm_close frees what the caller left allocated, unpinning it. */
static void close_frees_live_buffers(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *a, *b;
	uint64_t vsz = vm_size();

	assert_int_equal(pm_buf_alloc(ctx, 4 * MiB, NULL, &a), 0);
	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, NULL, &b), 0);
	assert_int_equal(fake.regions, 2);
	pm_close(ctx);
	assert_int_equal(fake.regions, 0);
	assert_int_equal(fake.unpins, 2);
	assert_int_equal(fake.closes, 1);
	assert_no_mapping_leak(vsz);
}

#define ERR_ROUNDS 100000

struct err_thread {
	struct pm_ctx *ctx;
	bool dev;		/* fail pm_dev_alloc, else pm_buf_alloc */
	int wrong;		/* rounds that read another sentence */
};

static void *fail_and_read(void *arg)
{
	struct err_thread *t = arg;
	const char *want = t->dev ? "pm_dev_alloc: length is zero" : "pm_buf_alloc: size is zero";
	struct pm_buf *b;
	void *p;

	for (int i = 0; i < ERR_ROUNDS; i++) {
		if (t->dev)
			assert_int_equal(pm_dev_alloc(t->ctx, 0, &p), -EINVAL);
		else
			assert_int_equal(pm_buf_alloc(t->ctx, 0, NULL, &b), -EINVAL);
		if (strcmp(pm_ctx_last_error(t->ctx), want))
			t->wrong++;
	}
	return NULL;
}

static void *read_only(void *arg)
{
	return (void *)pm_ctx_last_error(arg);
}

/* Two threads failing on one context each read their own sentence, never the other's. */
static void last_error_per_thread(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST), *ctx2;
	struct err_thread t[2] = { { ctx, false, 0 }, { ctx, true, 0 } };
	pthread_t th[2];
	void *seen;

	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, fail_and_read, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(t[0].wrong, 0);
	assert_int_equal(t[1].wrong, 0);
	/* a thread that never failed has no sentence */
	assert_int_equal(pthread_create(&th[0], NULL, read_only, ctx), 0);
	assert_int_equal(pthread_join(th[0], &seen), 0);
	assert_string_equal(seen, "");
	assert_int_equal(pm_dev_alloc(ctx, 0, &seen), -EINVAL);
	assert_string_equal(pm_ctx_last_error(ctx), "pm_dev_alloc: length is zero");
	/* a new context (perhaps at the freed one's address) starts with none */
	pm_close(ctx);
	ctx2 = fake_ctx(0, PM_BACKEND_HOST);
	assert_string_equal(pm_ctx_last_error(ctx2), "");
	pm_close(ctx2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(open_without_device_falls_back, setup),
		cmocka_unit_test_setup(open_require_module_refuses, setup),
		cmocka_unit_test_setup(open_refuses_other_abi_major, setup),
		cmocka_unit_test_setup(open_accepts_newer_minor, setup),
		cmocka_unit_test_setup(open_version_failure, setup),
		cmocka_unit_test_setup(open_refuses_other_page_size, setup),
		cmocka_unit_test_setup(open_no_module_flag, setup),
		cmocka_unit_test_setup(open_bad_arguments, setup),
		cmocka_unit_test_setup(open_device_path_option, setup),
		cmocka_unit_test_setup(info_matches_machine, setup),
		cmocka_unit_test_setup(backend_none_refuses_copies, setup),
#ifndef PM_HAVE_CUDA
		cmocka_unit_test_setup(cuda_not_built, setup),
#endif
		cmocka_unit_test_setup(close_frees_live_buffers, setup),
		cmocka_unit_test_setup(last_error_per_thread, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
