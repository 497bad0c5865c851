// SPDX-License-Identifier: MIT
/*
 * Bad input: every field of every ioctl, bad ranges and mappings, unknown
 * handles, wrong struct sizes and unknown commands each get their errno from
 * include/uapi/pinmem.h, and change nothing: counters (except refused_fault
 * for mapping errors), regions, VmPin, limits and FOLL_PIN balance are as
 * before.  A region is held throughout so "nothing changed" is not "zero".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>
#include "common.h"

#define PG	KT_PAGE

static int fd;
static char *buf;		/* 16 pages, read-write, populated */
static uint64_t held;		/* a region held throughout */
static long long outstanding;	/* FOLL_PIN references it holds */

static long long foll_pin_outstanding(void)
{
	return kt_vmstat("nr_foll_pin_acquired") - kt_vmstat("nr_foll_pin_released");
}

struct state {
	struct pinmem_stats st;
	struct pinmem_limits lim;
	long long regions, vmpin;
};

static void take(struct state *s)
{
	if (kt_stats(fd, &s->st) || kt_get_limits(fd, 0, &s->lim))
		kt_bail("STATS/GET_LIMITS failed");
	s->regions = kt_regions_total(fd);
	s->vmpin = kt_vmpin_kb(0);
}

/* Counters equal, but refused_fault may grow by @fault (0 or 1). */
static int same_counters(const struct pinmem_counters *a, const struct pinmem_counters *b,
			 int fault)
{
	struct pinmem_counters x = *a, y = *b;

	if (y.refused_fault != x.refused_fault &&
	    !(fault && y.refused_fault == x.refused_fault + 1))
		return 0;
	x.refused_fault = y.refused_fault = 0;
	return !memcmp(&x, &y, sizeof(x));
}

static void expect(int got, int err, const char *what, const struct state *before)
{
	int fault = err == EFAULT || err == EACCES || err == EOPNOTSUPP;
	struct state after;

	kt_eq(got, -err, "%s: %s", what, strerror(err));
	take(&after);
	kt_ok(same_counters(&before->st.global, &after.st.global, fault) &&
	      same_counters(&before->st.user, &after.st.user, fault) &&
	      same_counters(&before->st.file, &after.st.file, fault) &&
	      before->st.mm_pinned_bytes == after.st.mm_pinned_bytes &&
	      before->regions == after.regions && before->vmpin == after.vmpin &&
	      !memcmp(&before->lim, &after.lim, sizeof(after.lim)) &&
	      foll_pin_outstanding() == outstanding,
	      "%s: nothing changed", what);
}

#define CASE(err, what, call)			\
	do {					\
		struct state b_;		\
		take(&b_);			\
		expect((call), (err), (what), &b_); \
	} while (0)

static int pin_raw(uint64_t addr, uint64_t len)
{
	struct pinmem_pin p = { .addr = addr, .length = len };

	return kt_ioctl(fd, PINMEM_IOC_PIN, &p);
}

static int pin_field(int which)
{
	struct pinmem_pin p = { .addr = (uintptr_t)buf, .length = PG };

	if (which < 2)
		p.reserved[which] = 1;
	else if (which == 7)
		p.pad2 = 1;
	else if (which == 4)
		p.pad = 1;
	else if (which == 5)
		p.flags = 1;
	else
		p.flags = 0x80000000;
	return kt_ioctl(fd, PINMEM_IOC_PIN, &p);
}

/*
 * PIN whose struct the module can read but not write back: the pin is done
 * and charged before the copy out fails, and must be undone completely.
 */
static int pin_readonly_arg(void)
{
	struct pinmem_pin *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ret;

	if (p == MAP_FAILED)
		kt_bail("mmap");
	memset(p, 0, sizeof(*p));
	p->addr = (uintptr_t)buf + 8 * PG;
	p->length = 2 * PG;
	if (mprotect(p, PG, PROT_READ))
		kt_bail("mprotect");
	ret = kt_ioctl(fd, PINMEM_IOC_PIN, p);
	munmap(p, PG);
	return ret;
}

/* As CASE(), but the peaks may rise: the pages were charged for a moment. */
static void pin_readonly_result(void)
{
	const char *what = "PIN whose result cannot be written back";
	struct state b, a;

	take(&b);
	kt_eq(pin_readonly_arg(), -EFAULT, "%s: EFAULT", what);
	take(&a);
	kt_ok(a.st.global.pinned_bytes == b.st.global.pinned_bytes &&
	      a.st.user.pinned_bytes == b.st.user.pinned_bytes &&
	      a.st.file.pinned_bytes == b.st.file.pinned_bytes &&
	      a.st.mm_pinned_bytes == b.st.mm_pinned_bytes &&
	      a.st.file.regions == b.st.file.regions && a.st.file.pins == b.st.file.pins &&
	      a.st.file.unpins == b.st.file.unpins &&
	      a.st.file.kmem_bytes == b.st.file.kmem_bytes &&
	      a.st.file.refused_fault == b.st.file.refused_fault + 1 &&
	      a.regions == b.regions && a.vmpin == b.vmpin &&
	      foll_pin_outstanding() == outstanding,
	      "%s: nothing pinned, charged or listed; counted as refused_fault", what);
}

static void bad_pin(void)
{
	uintptr_t b = (uintptr_t)buf;
	char name[64];
	char *m;
	int i, rfd;

	CASE(EINVAL, "PIN length 0", pin_raw(b, 0));
	CASE(EINVAL, "PIN length 4097", pin_raw(b, PG + 1));
	CASE(EINVAL, "PIN length 100", pin_raw(b, 100));
	CASE(EINVAL, "PIN address + 1", pin_raw(b + 1, PG));
	CASE(EINVAL, "PIN address + 2048", pin_raw(b + 2048, PG));
	CASE(EINVAL, "PIN addr + length wraps", pin_raw(b, -(uint64_t)PG));
	CASE(EINVAL, "PIN addr + length wraps to 0", pin_raw(b, -(uint64_t)b));
	for (i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "PIN reserved[%d] = 1", i);
		CASE(EINVAL, name, pin_field(i));
	}
	CASE(EINVAL, "PIN pad2 = 1", pin_field(7));
	CASE(EINVAL, "PIN pad = 1", pin_field(4));
	CASE(EINVAL, "PIN flags = 1", pin_field(5));
	CASE(EINVAL, "PIN flags = 0x80000000", pin_field(6));

	CASE(EFAULT, "PIN kernel address (direct map)", pin_raw(0xffff888000000000ULL, PG));
	CASE(EFAULT, "PIN kernel address (text)", pin_raw(0xffffffff81000000ULL, PG));
	CASE(EFAULT, "PIN vsyscall page", pin_raw(0xffffffffff600000ULL, PG));
	CASE(EFAULT, "PIN user range running into kernel space",
	     pin_raw(0x7ffffffff000ULL - 4 * PG, 0x800000000000ULL));
	CASE(EFAULT, "PIN page 0", pin_raw(0, PG));

	m = kt_map(4 * PG, 1);
	munmap(m + 2 * PG, 2 * PG);
	CASE(EFAULT, "PIN unmapped range", pin_raw((uintptr_t)m + 2 * PG, 2 * PG));
	CASE(EFAULT, "PIN mapped then unmapped (rollback)", pin_raw((uintptr_t)m, 4 * PG));
	munmap(m, 2 * PG);
	m = kt_map(3 * PG, 1);
	munmap(m + PG, PG);
	CASE(EFAULT, "PIN over a hole", pin_raw((uintptr_t)m, 3 * PG));
	munmap(m, 3 * PG);

	m = kt_map(4 * PG, 1);
	mprotect(m, 4 * PG, PROT_NONE);
	CASE(EACCES, "PIN PROT_NONE", pin_raw((uintptr_t)m, 4 * PG));
	mprotect(m, 2 * PG, PROT_READ | PROT_WRITE);
	CASE(EACCES, "PIN read-write then PROT_NONE (rollback)", pin_raw((uintptr_t)m, 4 * PG));
	mprotect(m, 4 * PG, PROT_READ);
	CASE(EACCES, "PIN read-only anonymous (populated)", pin_raw((uintptr_t)m, 4 * PG));
	munmap(m, 4 * PG);
	m = mmap(NULL, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CASE(EACCES, "PIN read-only anonymous (never touched)", pin_raw((uintptr_t)m, 4 * PG));
	munmap(m, 4 * PG);

	rfd = open("/mnt/ramfs/pinmem-file", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (rfd < 0 || ftruncate(rfd, 4 * PG))
		kt_bail("ramfs file: %s", strerror(errno));
	m = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
	if (m == MAP_FAILED)
		kt_bail("mmap ramfs file");
	memset(m, 1, 4 * PG);
	CASE(EOPNOTSUPP, "PIN MAP_SHARED file on ramfs", pin_raw((uintptr_t)m, 4 * PG));
	munmap(m, 4 * PG);
	/* Anonymous memory followed by the ramfs file: refused as a whole. */
	m = kt_map(8 * PG, 1);
	if (mmap(m + 4 * PG, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, rfd, 0) ==
	    MAP_FAILED)
		kt_bail("mmap ramfs file");
	CASE(EOPNOTSUPP, "PIN anonymous then ramfs file (rollback)", pin_raw((uintptr_t)m, 8 * PG));
	munmap(m, 8 * PG);
	close(rfd);
	unlink("/mnt/ramfs/pinmem-file");
	rfd = memfd_create("pinmem-ro", MFD_CLOEXEC);
	if (rfd < 0 || ftruncate(rfd, 4 * PG))
		kt_bail("memfd");
	m = mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, rfd, 0);
	CASE(EACCES, "PIN read-only MAP_SHARED memfd", pin_raw((uintptr_t)m, 4 * PG));
	munmap(m, 4 * PG);
	close(rfd);

	CASE(EFAULT, "PIN with NULL argument", kt_ioctl(fd, PINMEM_IOC_PIN, NULL));
	pin_readonly_result();
	CASE(EFAULT, "PIN with kernel argument pointer",
	     kt_ioctl(fd, PINMEM_IOC_PIN, (void *)0xffff888000000000ULL));
}

/* @which: 0 nothing, 1 flags, 2 pad, 3 + i reserved[i] made non-zero. */
static void spoil(int which, __u32 *flags, __u32 *pad, __u64 *reserved)
{
	if (which == 1)
		*flags = 1;
	else if (which == 2)
		*pad = 1;
	else if (which >= 3)
		reserved[which - 3] = 1;
}

static int unpin_raw(uint64_t handle, int which)
{
	struct pinmem_unpin u = { .handle = handle };

	spoil(which, &u.flags, &u.pad, u.reserved);
	return kt_ioctl(fd, PINMEM_IOC_UNPIN, &u);
}

static void bad_unpin(void)
{
	int other = kt_open();
	uint64_t h;

	CASE(ENOENT, "UNPIN unknown handle", unpin_raw(0xdeadbeefULL, 0));
	CASE(ENOENT, "UNPIN handle 0", unpin_raw(0, 0));
	CASE(ENOENT, "UNPIN held handle + 2^32", unpin_raw(held + (1ULL << 32), 0));
	CASE(ENOENT, "UNPIN held handle + 2^63", unpin_raw(held | (1ULL << 63), 0));
	CASE(ENOENT, "UNPIN another file's handle",
	     ({ int r_ = kt_ioctl(other, PINMEM_IOC_UNPIN, &(struct pinmem_unpin){ .handle = held });
		r_; }));
	CASE(EINVAL, "UNPIN held handle, flags = 1", unpin_raw(held, 1));
	CASE(EINVAL, "UNPIN held handle, pad = 1", unpin_raw(held, 2));
	CASE(EINVAL, "UNPIN held handle, reserved[0] = 1", unpin_raw(held, 3));
	CASE(EINVAL, "UNPIN held handle, reserved[1] = 1", unpin_raw(held, 4));
	CASE(EFAULT, "UNPIN with NULL argument", kt_ioctl(fd, PINMEM_IOC_UNPIN, NULL));

	if (kt_pin_handle(fd, buf + 8 * PG, PG, &h))
		kt_bail("PIN");
	kt_eq(kt_unpin(fd, h), 0, "UNPIN once");
	CASE(ENOENT, "UNPIN twice", kt_unpin(fd, h));
	close(other);
}

static int regions_raw(int which, uint64_t ptr, uint32_t cap)
{
	struct pinmem_regions r = { .regions = ptr, .capacity = cap };

	spoil(which, &r.flags, &r.pad, r.reserved);
	return kt_ioctl(fd, PINMEM_IOC_REGIONS, &r);
}

static void bad_regions(void)
{
	struct pinmem_region_info info[2];

	CASE(EINVAL, "REGIONS flags = 1", regions_raw(1, (uintptr_t)info, 2));
	CASE(EINVAL, "REGIONS pad = 1", regions_raw(2, (uintptr_t)info, 2));
	CASE(EINVAL, "REGIONS reserved[0] = 1", regions_raw(3, (uintptr_t)info, 2));
	CASE(EINVAL, "REGIONS reserved[1] = 1", regions_raw(4, (uintptr_t)info, 2));
	CASE(EFAULT, "REGIONS into a kernel address", regions_raw(0, 0xffff888000000000ULL, 2));
	CASE(EFAULT, "REGIONS into NULL", regions_raw(0, 0, 1));
	CASE(EFAULT, "REGIONS with NULL argument", kt_ioctl(fd, PINMEM_IOC_REGIONS, NULL));
}

static int stats_raw(int which)
{
	struct pinmem_stats s;

	memset(&s, 0, sizeof(s));
	if (which == 0)
		s.flags = 1;
	else if (which == 99)
		s.user_locked_bytes = 1;
	else if (which == 100)
		s.cgroup_id = 1;
	else if (which == 101)
		s.refused_cgroup_id = 1;
	else
		s.reserved[which - 1] = 1;
	return kt_ioctl(fd, PINMEM_IOC_STATS, &s);
}

static int version_raw(int which)
{
	struct pinmem_version v = { 0 };

	if (which == 0)
		v.flags = 1;
	else
		v.reserved[which - 1] = 1;
	return kt_ioctl(fd, PINMEM_IOC_GET_VERSION, &v);
}

static int limits_raw(unsigned long cmd, int which, uint32_t flags)
{
	struct pinmem_limits l = { .flags = flags, .global_limit = 7 * KT_MIB };

	if (which >= 0)
		l.reserved[which] = 1;
	return kt_ioctl(fd, cmd, &l);
}

/* SET_LIMITS: a field the flags do not select must be zero (ABI 1.1). */
static int set_limits_field(int which)
{
	struct pinmem_limits l = { .flags = PINMEM_LIMIT_SET_GLOBAL,
				   .global_limit = PINMEM_UNLIMITED };

	switch (which) {
	case 0: l.default_user_limit = KT_MIB; break;
	case 1: l.uid = 1000; break;
	case 2: l.user_limit = KT_MIB; break;
	case 3: l.user_flags = 1; break;
	case 4: l.enforce_rlimit = 1; break;
	case 5: l.flags = PINMEM_LIMIT_CLEAR_USER; l.uid = 1000; l.user_limit = KT_MIB;
		l.global_limit = 0; break;
	}
	return kt_set_limits(fd, &l);
}

static void bad_set_limits_fields(void)
{
	uint64_t global = kt_param("global_limit");

	CASE(EINVAL, "SET_LIMITS global with default_user_limit set", set_limits_field(0));
	CASE(EINVAL, "SET_LIMITS global with uid set", set_limits_field(1));
	CASE(EINVAL, "SET_LIMITS global with user_limit set", set_limits_field(2));
	CASE(EINVAL, "SET_LIMITS global with user_flags set", set_limits_field(3));
	CASE(EINVAL, "SET_LIMITS global with enforce_rlimit set", set_limits_field(4));
	CASE(EINVAL, "SET_LIMITS CLEAR_USER with user_limit set", set_limits_field(5));
	kt_eq(kt_param("global_limit"), global, "SET_LIMITS with ignored fields changed nothing");
}

static void bad_others(void)
{
	char name[64];
	int i;

	CASE(EINVAL, "STATS flags = 1", stats_raw(0));
	/* A struct reused from an earlier call (ABI 1.0 programs do) still works. */
	kt_eq(stats_raw(99), 0, "STATS ignores user_locked_bytes (out) on input");
	kt_eq(stats_raw(100), 0, "STATS ignores cgroup_id (out) on input");
	kt_eq(stats_raw(101), 0, "STATS ignores refused_cgroup_id (out) on input");
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "STATS reserved[%d] = 1", i);
		CASE(EINVAL, name, stats_raw(i + 1));
	}
	CASE(EFAULT, "STATS with NULL argument", kt_ioctl(fd, PINMEM_IOC_STATS, NULL));
	CASE(EINVAL, "GET_VERSION flags = 1", version_raw(0));
	CASE(EINVAL, "GET_VERSION reserved[0] = 1", version_raw(1));
	CASE(EINVAL, "GET_VERSION reserved[1] = 1", version_raw(2));
	CASE(EINVAL, "GET_LIMITS flags = 1", limits_raw(PINMEM_IOC_GET_LIMITS, -1, 1));
	CASE(EINVAL, "GET_LIMITS uid -1", ({ struct pinmem_limits l_ = { .uid = ~0U };
		kt_ioctl(fd, PINMEM_IOC_GET_LIMITS, &l_); }));
	CASE(EINVAL, "SET_LIMITS unknown flag 0x20", limits_raw(PINMEM_IOC_SET_LIMITS, -1, 0x20));
	CASE(EINVAL, "SET_LIMITS flags 0x80000001", limits_raw(PINMEM_IOC_SET_LIMITS, -1, 0x80000001));
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "GET_LIMITS reserved[%d] = 1", i);
		CASE(EINVAL, name, limits_raw(PINMEM_IOC_GET_LIMITS, i, 0));
		snprintf(name, sizeof(name), "SET_LIMITS reserved[%d] = 1", i);
		CASE(EINVAL, name, limits_raw(PINMEM_IOC_SET_LIMITS, i, PINMEM_LIMIT_SET_GLOBAL));
	}
	CASE(EFAULT, "SET_LIMITS with NULL argument", kt_ioctl(fd, PINMEM_IOC_SET_LIMITS, NULL));
	bad_set_limits_fields();
}

static void bad_commands(void)
{
	static const struct { unsigned long cmd; const char *name; } known[] = {
		{ PINMEM_IOC_GET_VERSION, "GET_VERSION" }, { PINMEM_IOC_PIN, "PIN" },
		{ PINMEM_IOC_UNPIN, "UNPIN" }, { PINMEM_IOC_REGIONS, "REGIONS" },
		{ PINMEM_IOC_STATS, "STATS" }, { PINMEM_IOC_GET_LIMITS, "GET_LIMITS" },
		{ PINMEM_IOC_SET_LIMITS, "SET_LIMITS" }, { PINMEM_IOC_CGROUP, "CGROUP" },
	};
	static uint64_t big[128];	/* zeroed, larger than any struct */
	static const int delta[] = { -8, 8, -4, 4 };
	char name[80];
	unsigned int i, j;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		unsigned long c = known[i].cmd;
		unsigned long size = _IOC_SIZE(c);

		for (j = 0; j < 4; j++) {
			snprintf(name, sizeof(name), "%s with size %lu", known[i].name, size + delta[j]);
			CASE(EINVAL, name, kt_ioctl(fd, _IOC(_IOC_DIR(c), _IOC_TYPE(c), _IOC_NR(c),
							     size + delta[j]), big));
		}
		snprintf(name, sizeof(name), "%s with size 0", known[i].name);
		CASE(EINVAL, name, kt_ioctl(fd, _IOC(_IOC_DIR(c), _IOC_TYPE(c), _IOC_NR(c), 0), big));
	}
	CASE(ENOTTY, "unknown nr 0x09", kt_ioctl(fd, _IOWR(PINMEM_IOC_MAGIC, 0x09, struct pinmem_pin), big));
	CASE(ENOTTY, "unknown nr 0x80", kt_ioctl(fd, _IOWR(PINMEM_IOC_MAGIC, 0x80, struct pinmem_pin), big));
	CASE(ENOTTY, "unknown nr 0xff, no data", kt_ioctl(fd, _IO(PINMEM_IOC_MAGIC, 0xff), big));
	CASE(ENOTTY, "other magic, PIN's nr and size", kt_ioctl(fd, _IOWR(0xB8, 0x01, struct pinmem_pin), big));
	CASE(ENOTTY, "command 0", kt_ioctl(fd, 0, big));
	CASE(ENOTTY, "TCGETS", kt_ioctl(fd, TCGETS, big));
}

int main(void)
{
	fd = kt_open();
	kt_limits_save();
	kt_limits_open();
	buf = kt_map(16 * PG, 1);
	if (kt_pin_handle(fd, buf, 4 * PG, &held))
		kt_bail("PIN of the held region failed");
	outstanding = foll_pin_outstanding();
	kt_eq(outstanding, 4, "the held region holds 4 FOLL_PIN references");
	bad_pin();
	bad_unpin();
	bad_regions();
	bad_others();
	bad_commands();
	kt_eq(kt_unpin(fd, held), 0, "UNPIN the held region");
	held = 0;
	close(fd);
	kt_limits_restore();
	kt_expect_clean("t_badinput end");
	return kt_done();
}
