// SPDX-License-Identifier: MIT
/* lib/fault.c: faulting pages in with several threads, bytes left as they were. */
#include <sys/mman.h>
#include <unistd.h>

#include "pinmem.h"
#include "buf.h"
#include "pm_test.h"

static size_t resident(const void *p, size_t len)
{
	unsigned char vec[4096];
	size_t pages = len / 4096, n = 0, i;

	assert_true(pages <= sizeof(vec));
	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

static void thread_counts(void **state)
{
	struct pm_ctx ctx = { .cpus = 4 };

	assert_int_equal(pm_fault_threads(&ctx, 1 * MiB, 0), 1);
	assert_int_equal(pm_fault_threads(&ctx, 128 * MiB, 0), 2);
	assert_int_equal(pm_fault_threads(&ctx, 1 * GiB, 0), 4);
	ctx.cpus = 128;
	assert_int_equal(pm_fault_threads(&ctx, 1 * GiB, 0), 16);
	assert_int_equal(pm_fault_threads(&ctx, 64 * GiB, 0), 64);
	assert_int_equal(pm_fault_threads(&ctx, 4096, 3), 3);
	assert_int_equal(pm_fault_threads(&ctx, 4096, 1000), 64);
}

static void faults_everything_keeps_bytes(void **state)
{
	size_t len = 16 * MiB, i;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	assert_true(p != MAP_FAILED);
	assert_int_equal(madvise(p, len, MADV_NOHUGEPAGE), 0);
	for (i = 0; i < len; i += 1 * MiB)
		p[i + 17] = (uint8_t)(i / MiB + 1);
	assert_true(resident(p, len) < len / 4096);
	assert_int_equal(pm_fault_in(p, len, 4096, 4), 0);
	assert_int_equal(resident(p, len), len / 4096);
	for (i = 0; i < len; i += 4096)
		assert_int_equal(p[i + 17], i % MiB ? 0 : (uint8_t)(i / MiB + 1));
	munmap(p, len);
}

static void more_threads_than_pages(void **state)
{
	uint8_t *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	assert_int_equal(pm_fault_in(p, 3 * 4096, 4096, 8), 0);
	assert_int_equal(resident(p, 3 * 4096), 3);
	munmap(p, 3 * 4096);
}

static void unwritable_is_an_error(void **state)
{
	uint8_t *p = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	/* The last slice of four threads is read-only; the error comes back. */
	assert_int_equal(mprotect(p + 6 * 4096, 2 * 4096, PROT_READ), 0);
	assert_int_equal(pm_fault_in(p, 8 * 4096, 4096, 4), -EACCES);
	assert_int_equal(pm_fault_in(p, 8 * 4096, 4096, 1), -EACCES);
	munmap(p, 8 * 4096);
	p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(pm_fault_in(p, 4096, 4096, 1) < 0);
	munmap(p, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(thread_counts),
		cmocka_unit_test(faults_everything_keeps_bytes),
		cmocka_unit_test(more_threads_than_pages),
		cmocka_unit_test(unwritable_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
