// SPDX-License-Identifier: MIT
/* lib/backend_host.c and the public copy calls (lib/backend.c) on the host backend. */
#include <stdlib.h>

#include "pinmem.h"
#include "pm_test.h"

static struct pm_ctx *ctx;

static int setup(void **state)
{
	fake_reset();
	ctx = fake_ctx(PM_OPEN_NO_MODULE, PM_BACKEND_HOST);
	return 0;
}

static int teardown(void **state)
{
	pm_close(ctx);
	return 0;
}

static void copies_and_events(void **state)
{
	uint8_t src[4096], back[4096];
	uint64_t ev = 0;
	void *dev;

	memset(src, 0xab, sizeof(src));
	assert_int_equal(pm_dev_alloc(ctx, 8192, &dev), 0);
	assert_int_equal(pm_copy_h2d(ctx, (uint8_t *)dev + 4096, src, sizeof(src), &ev), 0);
	assert_true(ev != 0);
	assert_int_equal(pm_event_wait(ctx, ev), 0);
	assert_int_equal(pm_event_query(ctx, ev), 1);
	assert_memory_equal((uint8_t *)dev + 4096, src, sizeof(src));
	assert_int_equal(pm_copy_d2h(ctx, back, (uint8_t *)dev + 4096, sizeof(back)), 0);
	assert_memory_equal(back, src, sizeof(src));
	assert_int_equal(pm_event_release(ctx, ev), 0);
	assert_int_equal(pm_event_query(ctx, ev), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "is unknown or released"));
	assert_int_equal(pm_event_wait(ctx, ev), -EINVAL);
	assert_int_equal(pm_event_release(ctx, ev), -EINVAL);
	assert_int_equal(pm_event_query(ctx, 0), -EINVAL);
	assert_int_equal(pm_dev_free(ctx, dev), 0);
}

/* Many copies in flight: they run in order, each event covers its copy. */
static void order_and_queue_growth(void **state)
{
	enum { N = 1000 };
	static uint64_t evs[N];
	uint32_t *src = malloc(N * sizeof(*src));
	uint32_t *dev;
	int i;

	assert_non_null(src);
	assert_int_equal(pm_dev_alloc(ctx, N * sizeof(*src) + 4, (void **)&dev), 0);
	for (i = 0; i < N; i++) {
		src[i] = (uint32_t)i * 7 + 1;
		/* Every copy also overwrites word N; the last one must win. */
		assert_int_equal(pm_copy_h2d(ctx, &dev[i], &src[i], 4, NULL), 0);
		assert_int_equal(pm_copy_h2d(ctx, &dev[N], &src[i], 4, &evs[i]), 0);
		assert_true(i == 0 || evs[i] > evs[i - 1]);
	}
	assert_int_equal(pm_event_wait(ctx, evs[N - 1]), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(pm_event_query(ctx, evs[i]), 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(dev[i], (uint32_t)i * 7 + 1);
		assert_int_equal(pm_event_release(ctx, evs[i]), 0);
	}
	assert_int_equal(dev[N], (uint32_t)(N - 1) * 7 + 1);
	assert_int_equal(pm_dev_free(ctx, dev), 0);
	free(src);
}

static void refuses_what_cuda_refuses(void **state)
{
	uint8_t src[64], host[64];
	void *dev;

	assert_int_equal(pm_dev_alloc(ctx, 0, &dev), -EINVAL);
	assert_int_equal(pm_dev_alloc(ctx, 64, NULL), -EINVAL);
	assert_int_equal(pm_dev_alloc(ctx, 64, &dev), 0);
	assert_int_equal(pm_copy_h2d(ctx, host, src, 64, NULL), -EINVAL);
	assert_string_equal(pm_ctx_last_error(ctx) + strlen(pm_ctx_last_error(ctx)) -
			    strlen("is not inside device memory from pm_dev_alloc"),
			    "is not inside device memory from pm_dev_alloc");
	assert_int_equal(pm_copy_h2d(ctx, (uint8_t *)dev + 1, src, 64, NULL), -EINVAL);
	assert_int_equal(pm_copy_h2d(ctx, NULL, src, 64, NULL), -EINVAL);
	assert_int_equal(pm_copy_h2d(ctx, dev, NULL, 64, NULL), -EINVAL);
	assert_int_equal(pm_copy_d2h(ctx, host, src, 64), -EINVAL);
	assert_int_equal(pm_dev_free(ctx, src), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "is not device memory from pm_dev_alloc"));
	assert_int_equal(pm_dev_free(ctx, dev), 0);
	assert_int_equal(pm_dev_free(ctx, dev), -EINVAL);
	assert_int_equal(pm_copy_h2d(ctx, dev, src, 64, NULL), -EINVAL);
	/* Zero bytes is a valid copy, ordered like the others. */
	assert_int_equal(pm_dev_alloc(ctx, 64, &dev), 0);
	{
		uint64_t ev;

		assert_int_equal(pm_copy_h2d(ctx, dev, src, 0, &ev), 0);
		assert_int_equal(pm_event_wait(ctx, ev), 0);
		assert_int_equal(pm_event_release(ctx, ev), 0);
	}
}

/* pm_close waits for queued copies and frees device memory left behind. */
static void close_drains(void **state)
{
	static uint8_t src[1 << 20];
	void *dev;
	int i;

	assert_int_equal(pm_dev_alloc(ctx, sizeof(src), &dev), 0);
	for (i = 0; i < 64; i++)
		assert_int_equal(pm_copy_h2d(ctx, dev, src, sizeof(src), NULL), 0);
}

static void *copier(void *arg)
{
	uint8_t *dev = arg, v;
	uint64_t ev;
	int i;

	for (i = 0; i < 200; i++) {
		v = (uint8_t)i;
		if (pm_copy_h2d(ctx, dev, &v, 1, &ev) || pm_event_wait(ctx, ev) ||
		    *dev != (uint8_t)i || pm_event_release(ctx, ev))
			return (void *)1;
	}
	return NULL;
}

static void threads_share_a_context(void **state)
{
	pthread_t t[4];
	void *dev[4], *ret;
	int i;

	for (i = 0; i < 4; i++) {
		assert_int_equal(pm_dev_alloc(ctx, 1, &dev[i]), 0);
		assert_int_equal(pthread_create(&t[i], NULL, copier, dev[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], &ret);
		assert_null(ret);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(copies_and_events, setup, teardown),
		cmocka_unit_test_setup_teardown(order_and_queue_growth, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_what_cuda_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(close_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(threads_share_a_context, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
