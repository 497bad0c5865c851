// SPDX-License-Identifier: MIT
/*
 * lib/buf.c and lib/pages.c: allocation, page kinds and their step-down,
 * pinning caller-owned memory, backend registration, free and double free.
 *
 * Built a second time with PM_TEST_MODULE (make: $(O)/vm/test_buf_module)
 * for the VM, where it also runs the module cases against the real
 * /dev/pinmem: real pins, hugetlb, a file mapping the module refuses, and
 * real budget refusals (limits changed with SET_LIMITS, then restored).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinmem.h"
#include "buf.h"
#include "numa.h"
#include "pm_test.h"

static int setup(void **state)
{
	fake_reset();
	return 0;
}

static void alloc_rounds_and_reports(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *b;
	uint8_t *p;

	assert_int_equal(pm_buf_alloc(ctx, 5000, NULL, &b), 0);
	p = pm_buf_ptr(b);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_int_equal(pm_buf_size(b), 8192);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_int_equal(pm_buf_page_kind(b), PM_PAGES_DEFAULT);
	assert_true(pm_buf_backend_registered(b));
	assert_true(pm_buf_huge_bytes(b) <= pm_buf_size(b));
	p[0] = 1;
	p[8191] = 2;
	assert_int_equal(fake.lengths[0], 8192);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	pm_close(ctx);
}

static void bad_arguments(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { 0 };
	struct pm_buf *b = (void *)1;
	uint64_t vsz = vm_size();

	assert_int_equal(pm_buf_alloc(ctx, 0, NULL, &b), -EINVAL);
	assert_null(b);
	assert_string_equal(pm_ctx_last_error(ctx), "pm_buf_alloc: size is zero");
	assert_int_equal(pm_buf_alloc(ctx, SIZE_MAX - 4096, NULL, &b), -EOVERFLOW);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "overflows"));
	o.flags = 1U << 9;
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), -EINVAL);
	assert_string_equal(pm_ctx_last_error(ctx), "pm_buf_alloc: unknown buffer flags 0x200");
	o.flags = 0;
	o.pin = (enum pm_pin_mode)7;
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), -EINVAL);
	o.pin = PM_PIN_AUTO;
	o.pages = (enum pm_page_kind)9;
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), -EINVAL);
	o.pages = PM_PAGES_DEFAULT;
	o.reserved[3] = 1;
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), -EINVAL);
	assert_string_equal(pm_ctx_last_error(ctx), "pm_buf_alloc: reserved options must be zero");
	o.reserved[3] = 0;
	o.numa = PM_NUMA_NODE(PM_NUMA_MAX);
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "NUMA choice"));
	o.numa = PM_NUMA_NODE(0);	/* caller-owned memory is never moved */
	assert_int_equal(pm_buf_pin_inplace(ctx, &o, 4096, &o, &b), -EINVAL);
	assert_int_equal(pm_buf_alloc(ctx, 4096, NULL, NULL), -EINVAL);
	assert_int_equal(pm_buf_alloc(NULL, 4096, NULL, &b), -EINVAL);
	/* Far more than the address space: the mapping fails, nothing is left. */
	assert_int_equal(pm_buf_alloc(ctx, SIZE_MAX / 2, NULL, &b), -ENOMEM);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "mapping"));
	assert_no_mapping_leak(vsz);
	assert_int_equal(fake.pins, 0);
	pm_close(ctx);
}

static void double_free_detected(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_ctx *other = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *a, *b;
	int local;

	assert_int_equal(pm_buf_alloc(ctx, 4096, NULL, &a), 0);
	assert_int_equal(pm_buf_alloc(ctx, 4096, NULL, &b), 0);
	assert_int_equal(pm_buf_free(ctx, a), 0);
	assert_int_equal(pm_buf_free(ctx, a), -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "not a live buffer of this context (freed twice?)"));
	assert_int_equal(pm_buf_free(ctx, (struct pm_buf *)&local), -EINVAL);
	assert_int_equal(pm_buf_free(ctx, NULL), -EINVAL);
	assert_int_equal(pm_buf_free(other, b), -EINVAL);
	assert_int_equal(pm_buf_free(NULL, b), -EINVAL);
	/* b survived all of that. */
	assert_int_equal(fake.regions, 1);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(fake.regions, 0);
	assert_int_equal(fake.unpin_unknown, 0);
	pm_close(other);
	pm_close(ctx);
}

static void *map_pages(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

static void inplace_pins_caller_memory(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	size_t len = 64 * 4096, i;
	uint8_t *p = map_pages(len, PROT_READ | PROT_WRITE);
	struct pm_buf *b;

	for (i = 0; i < len; i += 4096 * 3)
		p[i] = (uint8_t)(i / 4096 + 1);
	assert_int_equal(pm_buf_pin_inplace(ctx, p, len, NULL, &b), 0);
	assert_ptr_equal(pm_buf_ptr(b), p);
	assert_int_equal(pm_buf_size(b), len);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_true(pm_buf_backend_registered(b));
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(fake.regions, 0);
	/* Still mapped and unchanged: the caller owns it. */
	for (i = 0; i < len; i += 4096)
		assert_int_equal(p[i], i % (4096 * 3) ? 0 : (uint8_t)(i / 4096 + 1));
	munmap(p, len);
	pm_close(ctx);
}

static void inplace_bad_arguments(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	uint8_t *p = map_pages(4 * 4096, PROT_READ | PROT_WRITE);
	struct pm_buf_opts o = { .pages = PM_PAGES_THP };
	struct pm_buf *b = (void *)1;

	assert_int_equal(pm_buf_pin_inplace(ctx, p + 1, 4096, NULL, &b), -EINVAL);
	assert_null(b);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "is not aligned to 4096-byte pages"));
	assert_int_equal(pm_buf_pin_inplace(ctx, p, 4095, NULL, &b), -EINVAL);
	assert_int_equal(pm_buf_pin_inplace(ctx, p, 0, NULL, &b), -EINVAL);
	assert_string_equal(pm_ctx_last_error(ctx), "pm_buf_pin_inplace: length is zero");
	assert_int_equal(pm_buf_pin_inplace(ctx, NULL, 4096, NULL, &b), -EINVAL);
	assert_int_equal(pm_buf_pin_inplace(ctx, (void *)(uintptr_t)-8192, 16384, NULL, &b),
			 -EINVAL);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "wraps around"));
	assert_int_equal(pm_buf_pin_inplace(ctx, p, 4096, &o, &b), -EINVAL);
	assert_int_equal(fake.pins, 0);
	munmap(p, 4 * 4096);
	pm_close(ctx);
}

/* Memory that cannot be written cannot be faulted in for pinning. */
static void inplace_readonly_fails(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	uint8_t *p = map_pages(4 * 4096, PROT_READ);
	struct pm_buf *b;
	int r;

	r = pm_buf_pin_inplace(ctx, p, 4 * 4096, NULL, &b);
	assert_true(r < 0);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "faulting in 16.0 KiB at"));
	assert_int_equal(fake.pins, 0);
	munmap(p, 4 * 4096);
	pm_close(ctx);
}

/* The copy backend refuses a second registration of the same memory; the pin is undone. */
static void inplace_overlap_refused_by_backend(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf *a, *b;

	assert_int_equal(pm_buf_alloc(ctx, 8 * 4096, NULL, &a), 0);
	assert_int_equal(pm_buf_pin_inplace(ctx, (uint8_t *)pm_buf_ptr(a) + 4096, 4096, NULL, &b),
			 -EEXIST);
	assert_non_null(strstr(pm_ctx_last_error(ctx),
			       "registering 4.0 KiB with the host backend failed:"));
	assert_non_null(strstr(pm_ctx_last_error(ctx), "overlaps memory already registered"));
	assert_int_equal(fake.regions, 1);
	assert_int_equal(fake.pins, 2);
	/* Without backend registration the same memory pins fine. */
	{
		struct pm_buf_opts o = { .flags = PM_BUF_NO_BACKEND };

		assert_int_equal(pm_buf_pin_inplace(ctx, pm_buf_ptr(a), 4096, &o, &b), 0);
		assert_false(pm_buf_backend_registered(b));
		assert_int_equal(pm_buf_free(ctx, b), 0);
	}
	assert_int_equal(pm_buf_free(ctx, a), 0);
	assert_int_equal(fake.regions, 0);
	pm_close(ctx);
}

static void backend_none_registers_nothing(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_NONE);
	struct pm_buf *b;

	assert_int_equal(pm_buf_alloc(ctx, 4096, NULL, &b), 0);
	assert_false(pm_buf_backend_registered(b));
	pm_buf_free(ctx, b);
	pm_close(ctx);
}

static void thp_pages(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { .pages = PM_PAGES_THP, .pin = PM_PIN_NONE };
	struct pm_ctx_info in;
	struct pm_buf *b;

	pm_ctx_info(ctx, &in);
	assert_int_equal(pm_buf_alloc(ctx, 3 * MiB, &o, &b), 0);
	if (in.thp) {
		assert_int_equal(pm_buf_page_kind(b), PM_PAGES_THP);
		assert_int_equal((uintptr_t)pm_buf_ptr(b) % (2 * MiB), 0);
		assert_int_equal(pm_buf_size(b), 4 * MiB);
		assert_string_equal(pm_buf_note(b), "");
	} else {
		assert_int_equal(pm_buf_page_kind(b), PM_PAGES_DEFAULT);
	}
	assert_true(pm_buf_huge_bytes(b) <= pm_buf_size(b));
	pm_buf_free(ctx, b);
	pm_close(ctx);
}

/* Opens of /proc/self/smaps by the library: fopen is taken here before libc's. */
static int smaps_opens;
static bool smaps_emfile;	/* the next opens fail as at the open-files limit */

FILE *fopen(const char *restrict path, const char *restrict mode)
{
	FILE *(*real)(const char *, const char *) =
		(FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");

	if (!strcmp(path, "/proc/self/smaps")) {
		smaps_opens++;
		if (smaps_emfile) {
			errno = EMFILE;
			return NULL;
		}
	}
	return real(path, mode);
}

/* smaps is slow to read (~12 ms beside torch's mappings): read for huge_bytes when
 * asked, once, and never for a module pin, which the module counts. */
static void huge_bytes_read_when_asked(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { .pages = PM_PAGES_THP, .pin = PM_PIN_NONE };
	struct pm_buf *b, *m;
	uint64_t h;

	smaps_opens = 0;
	assert_int_equal(pm_buf_alloc(ctx, 4 * MiB, &o, &b), 0);
	assert_int_equal(pm_buf_alloc(ctx, 8192, NULL, &m), 0);
	assert_int_equal(pm_buf_pin_mode(m), PM_PIN_MODULE);
	assert_int_equal(smaps_opens, 0);
	/* smaps not readable: 0 now, and not kept as the answer */
	smaps_emfile = true;
	assert_int_equal(pm_buf_huge_bytes(b), 0);
	smaps_emfile = false;
	assert_int_equal(smaps_opens, 1);
	smaps_opens = 0;
	h = pm_buf_huge_bytes(b);
	assert_int_equal(smaps_opens, 1);
	assert_true(h <= pm_buf_size(b));
	assert_int_equal(pm_buf_huge_bytes(b), h);
	assert_int_equal(pm_buf_huge_bytes(m), 0);
	assert_int_equal(smaps_opens, 1);
	pm_buf_free(ctx, m);
	pm_buf_free(ctx, b);
	pm_close(ctx);
}

/* THP switched off on the machine: step down to base pages, or fail strictly. */
static void thp_disabled(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { .pages = PM_PAGES_THP };
	struct pm_buf *b;
	uint64_t vsz;

	ctx->thp = false;
	assert_int_equal(pm_buf_alloc(ctx, 3 * MiB, &o, &b), 0);
	assert_int_equal(pm_buf_page_kind(b), PM_PAGES_DEFAULT);
	assert_int_equal(pm_buf_size(b), 3 * MiB);
	assert_string_equal(pm_buf_note(b),
			    "transparent huge pages are disabled (transparent_hugepage/enabled is never): used base pages");
	pm_buf_free(ctx, b);
	o.flags = PM_BUF_STRICT_PAGES;
	vsz = vm_size();
	assert_int_equal(pm_buf_alloc(ctx, 3 * MiB, &o, &b), -EOPNOTSUPP);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "THP buffer of 3.0 MiB: transparent huge pages are disabled"));
	assert_no_mapping_leak(vsz);
	assert_int_equal(fake.regions, 0);
	pm_close(ctx);
}

/* hugetlb: real pages when the pool has them, else the step-down to THP. */
static void hugetlb_pages(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { .pages = PM_PAGES_HUGETLB };
	struct pm_ctx_info in;
	struct pm_buf *b;
	uint64_t vsz;

	pm_ctx_info(ctx, &in);
	assert_int_equal(pm_buf_alloc(ctx, 3 * MiB, &o, &b), 0);
	if (in.hugetlb && in.hugetlb_free_pages * in.hugetlb_page_size >= 4 * MiB) {
		assert_int_equal(pm_buf_page_kind(b), PM_PAGES_HUGETLB);
		assert_int_equal(pm_buf_size(b) % in.hugetlb_page_size, 0);
		pm_buf_free(ctx, b);
		pm_close(ctx);
		return;
	}
	assert_int_equal(pm_buf_page_kind(b), in.thp ? PM_PAGES_THP : PM_PAGES_DEFAULT);
	assert_non_null(strstr(pm_buf_note(b), "(raise vm.nr_hugepages): tried THP"));
	pm_buf_free(ctx, b);
	o.flags = PM_BUF_STRICT;
	vsz = vm_size();
	assert_int_equal(pm_buf_alloc(ctx, 3 * MiB, &o, &b), -ENOMEM);
	assert_non_null(strstr(pm_ctx_last_error(ctx), "hugetlb buffer of 3.0 MiB: hugetlb has"));
	assert_no_mapping_leak(vsz);
	pm_close(ctx);
}

/* Both steps fail: two sentences in the note. */
static void hugetlb_and_thp_step_down(void **state)
{
	struct pm_ctx *ctx = fake_ctx(0, PM_BACKEND_HOST);
	struct pm_buf_opts o = { .pages = PM_PAGES_HUGETLB };
	struct pm_buf *b;

	ctx->thp = false;
	ctx->hugetlb_page_size = 0;
	assert_int_equal(pm_buf_alloc(ctx, 4096, &o, &b), 0);
	assert_int_equal(pm_buf_page_kind(b), PM_PAGES_DEFAULT);
	assert_string_equal(pm_buf_note(b),
			    "hugetlb pages are not supported: tried THP; transparent huge pages are disabled (transparent_hugepage/enabled is never): used base pages");
	pm_buf_free(ctx, b);
	pm_close(ctx);
}

static void *alloc_loop(void *arg)
{
	struct pm_ctx *ctx = arg;
	struct pm_buf *b[4];
	int i, j;

	for (i = 0; i < 25; i++) {
		for (j = 0; j < 4; j++)
			if (pm_buf_alloc(ctx, (size_t)(j + 1) * 65536, NULL, &b[j]))
				return (void *)1;
		for (j = 3; j >= 0; j--)
			if (pm_buf_free(ctx, b[j]) || pm_buf_free(ctx, b[j]) != -EINVAL)
				return (void *)2;
	}
	return NULL;
}

/* Allocation and free from several threads on one context (real mlock, host backend). */
static void threads_share_a_context(void **state)
{
	struct pm_open_opts o = { .flags = PM_OPEN_NO_MODULE, .backend = PM_BACKEND_HOST };
	uint64_t locked = vm_locked();
	struct pm_ctx *ctx;
	pthread_t t[4];
	void *ret;
	int i;

	assert_int_equal(pm_open(&ctx, &o), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, alloc_loop, ctx), 0);
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], &ret);
		assert_null(ret);
	}
	assert_null(ctx->bufs);
	assert_int_equal(vm_locked(), locked);
	pm_close(ctx);
}

static void names(void **state)
{
	assert_string_equal(pm_pin_mode_name(PM_PIN_AUTO), "auto");
	assert_string_equal(pm_pin_mode_name(PM_PIN_MODULE), "module");
	assert_string_equal(pm_pin_mode_name(PM_PIN_MLOCK), "mlock");
	assert_string_equal(pm_pin_mode_name(PM_PIN_NONE), "none");
	assert_string_equal(pm_pin_mode_name((enum pm_pin_mode)4), "unknown");
	assert_string_equal(pm_page_kind_name(PM_PAGES_DEFAULT), "default");
	assert_string_equal(pm_page_kind_name(PM_PAGES_THP), "thp");
	assert_string_equal(pm_page_kind_name(PM_PAGES_HUGETLB), "hugetlb");
	assert_string_equal(pm_page_kind_name((enum pm_page_kind)-1), "unknown");
}

#ifdef PM_TEST_MODULE
/* The real module, in the VM. */

static int dev_fd = -1;
static struct pinmem_limits limits_before;

static struct pm_ctx *module_ctx(void)
{
	struct pm_open_opts o = { .flags = PM_OPEN_REQUIRE_MODULE, .backend = PM_BACKEND_HOST };
	struct pm_ctx *ctx = NULL;
	char err[256] = "";

	o.errbuf = err;
	o.errbuf_len = sizeof(err);
	if (pm_open(&ctx, &o))
		fail_msg("pm_open: %s", err);
	return ctx;
}

static struct pinmem_stats stats(void)
{
	struct pinmem_stats st;

	memset(&st, 0, sizeof(st));
	assert_int_equal(ioctl(dev_fd, PINMEM_IOC_STATS, &st), 0);
	return st;
}

static int module_setup(void **state)
{
	dev_fd = open(PINMEM_DEVICE, O_RDWR | O_CLOEXEC);
	if (dev_fd < 0)
		return -1;
	memset(&limits_before, 0, sizeof(limits_before));
	return ioctl(dev_fd, PINMEM_IOC_GET_LIMITS, &limits_before);
}

/* Whatever a failed case left behind, the next VM test sees the limits it found. */
static int module_teardown(void **state)
{
	struct pinmem_limits l = limits_before;

	l.flags = PINMEM_LIMIT_SET_GLOBAL | PINMEM_LIMIT_SET_DEFAULT_USER |
		  PINMEM_LIMIT_SET_RLIMIT;
	l.user_limit = 0;
	l.user_flags = 0;
	ioctl(dev_fd, PINMEM_IOC_SET_LIMITS, &l);
	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_CLEAR_USER;
	l.uid = getuid();
	ioctl(dev_fd, PINMEM_IOC_SET_LIMITS, &l);
	close(dev_fd);
	return 0;
}

static void module_info(void **state)
{
	struct pm_ctx *ctx = module_ctx();
	struct pm_ctx_info in;

	pm_ctx_info(ctx, &in);
	assert_true(in.module);
	assert_int_equal(in.module_abi_major, PINMEM_ABI_MAJOR);
	assert_string_equal(in.module_note, "");
	pm_close(ctx);
}

static void module_alloc_pins_and_unpins(void **state)
{
	struct pm_buf_opts o = { .pin = PM_PIN_MODULE, .flags = PM_BUF_STRICT, .fault_threads = 2 };
	uint64_t before = stats().user.pinned_bytes;
	struct pm_ctx *ctx = module_ctx();
	struct pm_buf *b;

	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, &o, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_true(pm_buf_segments(b) >= 1);
	assert_int_equal(stats().user.pinned_bytes, before + 8 * MiB);
	memset(pm_buf_ptr(b), 0x5a, 8 * MiB);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(pm_buf_free(ctx, b), -EINVAL);
	assert_int_equal(stats().user.pinned_bytes, before);
	/* pm_close unpins what is left. */
	assert_int_equal(pm_buf_alloc(ctx, 4 * MiB, &o, &b), 0);
	assert_int_equal(stats().user.pinned_bytes, before + 4 * MiB);
	pm_close(ctx);
	assert_int_equal(stats().user.pinned_bytes, before);
}

static void module_hugetlb(void **state)
{
	struct pm_buf_opts o = { .pin = PM_PIN_MODULE, .pages = PM_PAGES_HUGETLB,
				 .flags = PM_BUF_STRICT };
	struct pm_ctx *ctx = module_ctx();
	struct pm_buf *b;

	assert_int_equal(pm_buf_alloc(ctx, 4 * MiB, &o, &b), 0);
	assert_int_equal(pm_buf_page_kind(b), PM_PAGES_HUGETLB);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_int_equal(pm_buf_huge_bytes(b), 4 * MiB);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	pm_close(ctx);
}

static void module_inplace(void **state)
{
	struct pm_ctx *ctx = module_ctx();
	uint8_t *p = map_pages(16 * 4096, PROT_READ | PROT_WRITE);
	struct pm_buf *b;

	p[5 * 4096] = 42;
	assert_int_equal(pm_buf_pin_inplace(ctx, p, 16 * 4096, NULL, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	assert_int_equal(p[5 * 4096], 42);
	assert_int_equal(pm_buf_free(ctx, b), 0);
	munmap(p, 16 * 4096);
	pm_close(ctx);
}

/* A ramfs file mapping cannot be pinned long-term: AUTO steps down to mlock. */
static void module_file_mapping_steps_down(void **state)
{
	struct pm_buf_opts strict = { .pin = PM_PIN_MODULE, .flags = PM_BUF_STRICT_PIN };
	struct pm_ctx *ctx = module_ctx();
	size_t len = 16 * 4096;
	struct pm_buf *b;
	void *p;
	int fd;

	fd = open("/mnt/ramfs/test_buf", O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(pm_buf_pin_inplace(ctx, p, len, NULL, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MLOCK);
	assert_non_null(strstr(pm_buf_note(b), "cannot pin this mapping"));
	assert_int_equal(pm_buf_free(ctx, b), 0);
	assert_int_equal(pm_buf_pin_inplace(ctx, p, len, &strict, &b), -EOPNOTSUPP);
	munmap(p, len);
	close(fd);
	unlink("/mnt/ramfs/test_buf");
	pm_close(ctx);
}

static void set_limits(struct pinmem_limits *l)
{
	assert_int_equal(ioctl(dev_fd, PINMEM_IOC_SET_LIMITS, l), 0);
}

/* Real refusals: the errno names the budget and the sentence its numbers. */
static void module_budget_refusals(void **state)
{
	struct pm_buf_opts o = { .pin = PM_PIN_AUTO };
	struct pinmem_limits saved, l;
	struct pm_ctx *ctx = module_ctx();
	struct pm_buf *b;
	char want[160];
	uint64_t vsz;

	memset(&saved, 0, sizeof(saved));
	assert_int_equal(ioctl(dev_fd, PINMEM_IOC_GET_LIMITS, &saved), 0);

	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_USER;
	l.uid = getuid();
	l.user_limit = stats().user.pinned_bytes + 4 * MiB;
	set_limits(&l);
	vsz = vm_size();
	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, &o, &b), -EDQUOT);
	assert_no_mapping_leak(vsz);
	assert_non_null(strstr(pm_ctx_last_error(ctx),
			       "pinning 8.0 MiB would exceed the per-user budget: "));
	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_CLEAR_USER;
	l.uid = getuid();
	set_limits(&l);

	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_GLOBAL;
	l.global_limit = stats().global.pinned_bytes + 4 * MiB;
	set_limits(&l);
	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, &o, &b), -ENOSPC);
	snprintf(want, sizeof(want), "pinning 8.0 MiB would exceed the global budget: ");
	assert_non_null(strstr(pm_ctx_last_error(ctx), want));
	l.global_limit = saved.global_limit;
	set_limits(&l);

	assert_int_equal(pm_buf_alloc(ctx, 8 * MiB, &o, &b), 0);
	assert_int_equal(pm_buf_pin_mode(b), PM_PIN_MODULE);
	pm_close(ctx);
}

/* In a child without CAP_IPC_LOCK and a 1 MiB RLIMIT_MEMLOCK (no cmocka asserts here). */
static int child_module_rlimit(void)
{
	struct pm_open_opts oo = { .flags = PM_OPEN_REQUIRE_MODULE, .backend = PM_BACKEND_NONE };
	struct pm_buf_opts o = { .pin = PM_PIN_MODULE };
	struct rlimit rl = { 1 * MiB, 1 * MiB };
	struct pm_ctx *ctx;
	struct pm_buf *b;
	const char *e;

	if (drop_ipc_lock() || setrlimit(RLIMIT_MEMLOCK, &rl) || pm_open(&ctx, &oo))
		return 10;
	if (pm_buf_alloc(ctx, 8 * MiB, &o, &b) != -ENOMEM)
		return 11;
	e = pm_ctx_last_error(ctx);
	if (!strstr(e, "pinning 8.0 MiB would exceed RLIMIT_MEMLOCK: ") ||
	    !strstr(e, " of 1.0 MiB in use; raise it with ulimit -l")) {
		fprintf(stderr, "got: %s\n", e);
		return 12;
	}
	if (pm_buf_alloc(ctx, 512 * 1024, &o, &b) || pm_buf_pin_mode(b) != PM_PIN_MODULE)
		return 13;
	pm_close(ctx);
	return 0;
}

static void module_rlimit_refusal(void **state)
{
	struct pinmem_limits saved, l;

	memset(&saved, 0, sizeof(saved));
	assert_int_equal(ioctl(dev_fd, PINMEM_IOC_GET_LIMITS, &saved), 0);
	memset(&l, 0, sizeof(l));
	l.flags = PINMEM_LIMIT_SET_RLIMIT;
	l.enforce_rlimit = 1;
	set_limits(&l);
	assert_int_equal(in_child(child_module_rlimit), 0);
	l.enforce_rlimit = saved.enforce_rlimit;
	set_limits(&l);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(alloc_rounds_and_reports, setup),
		cmocka_unit_test_setup(bad_arguments, setup),
		cmocka_unit_test_setup(double_free_detected, setup),
		cmocka_unit_test_setup(inplace_pins_caller_memory, setup),
		cmocka_unit_test_setup(inplace_bad_arguments, setup),
		cmocka_unit_test_setup(inplace_readonly_fails, setup),
		cmocka_unit_test_setup(inplace_overlap_refused_by_backend, setup),
		cmocka_unit_test_setup(backend_none_registers_nothing, setup),
		cmocka_unit_test_setup(thp_pages, setup),
		cmocka_unit_test_setup(huge_bytes_read_when_asked, setup),
		cmocka_unit_test_setup(thp_disabled, setup),
		cmocka_unit_test_setup(hugetlb_pages, setup),
		cmocka_unit_test_setup(hugetlb_and_thp_step_down, setup),
		cmocka_unit_test_setup(threads_share_a_context, setup),
		cmocka_unit_test(names),
	};
	int failed = cmocka_run_group_tests_name("buf", tests, NULL, NULL);

#ifdef PM_TEST_MODULE
	const struct CMUnitTest module_tests[] = {
		cmocka_unit_test(module_info),
		cmocka_unit_test(module_alloc_pins_and_unpins),
		cmocka_unit_test(module_hugetlb),
		cmocka_unit_test(module_inplace),
		cmocka_unit_test(module_file_mapping_steps_down),
		cmocka_unit_test(module_budget_refusals),
		cmocka_unit_test(module_rlimit_refusal),
	};

	failed += cmocka_run_group_tests_name("buf_module", module_tests, module_setup,
					      module_teardown);
#endif
	return failed;
}
