// SPDX-License-Identifier: MIT
/* tools/pinctl/pinctl_size.c: sizes as operators type them and as pinctl prints them. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../tools/pinctl/pinctl.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define TiB (1ULL << 40)
#define MEM (256 * GiB)

static uint64_t parse_ok(const char *s, uint64_t mem_total)
{
	uint64_t v = 12345;

	assert_int_equal(pctl_parse_size(s, mem_total, &v), 0);
	return v;
}

static void parse_units(void **state)
{
	assert_int_equal(parse_ok("0", MEM), 0);
	assert_int_equal(parse_ok("4096", MEM), 4096);
	assert_int_equal(parse_ok("4096B", MEM), 4096);
	assert_int_equal(parse_ok("512K", MEM), 512 * KiB);
	assert_int_equal(parse_ok("512k", MEM), 512 * KiB);
	assert_int_equal(parse_ok("512M", MEM), 512 * MiB);
	assert_int_equal(parse_ok("512MiB", MEM), 512 * MiB);
	assert_int_equal(parse_ok("512MB", MEM), 512 * MiB);
	assert_int_equal(parse_ok("512mib", MEM), 512 * MiB);
	assert_int_equal(parse_ok("64G", MEM), 64 * GiB);
	assert_int_equal(parse_ok("2T", MEM), 2 * TiB);
	assert_int_equal(parse_ok("1P", MEM), 1ULL << 50);
	assert_int_equal(parse_ok("15E", MEM), 15ULL << 60);
	assert_int_equal(parse_ok("unlimited", MEM), PCTL_UNLIMITED);
	assert_int_equal(parse_ok("UNLIMITED", MEM), PCTL_UNLIMITED);
}

static void parse_fractions(void **state)
{
	assert_int_equal(parse_ok("1.5G", MEM), 3 * GiB / 2);
	assert_int_equal(parse_ok("0.5K", MEM), 512);
	assert_int_equal(parse_ok(".5M", MEM), 512 * KiB);
	assert_int_equal(parse_ok("1.G", MEM), GiB);
	assert_int_equal(parse_ok("2.000000000G", MEM), 2 * GiB);
	/* a fraction that is not a whole number of bytes is refused */
	uint64_t v;

	assert_int_equal(pctl_parse_size("1.5", MEM, &v), -EINVAL);
	assert_int_equal(pctl_parse_size("0.1K", MEM, &v), -EINVAL);
	assert_int_equal(pctl_parse_size("1.0000000001G", MEM, &v), -EINVAL);
}

static void parse_percent(void **state)
{
	uint64_t v;

	assert_int_equal(parse_ok("10%", MEM), MEM / 10);
	assert_int_equal(parse_ok("100%", MEM), MEM);
	assert_int_equal(parse_ok("0%", MEM), 0);
	assert_int_equal(parse_ok("12.5%", MEM), MEM / 8);
	assert_int_equal(parse_ok("33%", 1000), 330);
	assert_int_equal(parse_ok("50%", 3), 1);	/* rounds down */
	assert_int_equal(pctl_parse_size("101%", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("100.1%", MEM, &v), -ERANGE);
	/* no MemTotal, no percentages */
	assert_int_equal(pctl_parse_size("10%", 0, &v), -EINVAL);
	assert_int_equal(pctl_parse_size("%", MEM, &v), -EINVAL);
	assert_int_equal(pctl_parse_size("10%%", MEM, &v), -EINVAL);
}

static void parse_bad(void **state)
{
	static const char *const bad[] = {
		"", "12Q", "-1G", "+1G", " 1G", "1G ", "1 G", "G", "M1", "1GG", "1GiBB",
		"1iB", "0x10", "1e3", "1,5G", "1..5G", ".", "1.5.G", "unlimitedX", "∞", "1Gi B",
		"1KiBs", "nan", "inf",
	};
	uint64_t v = 777;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = pctl_parse_size(bad[i], MEM, &v);

		if (ret != -EINVAL)
			fail_msg("'%s' gave %d, want -EINVAL", bad[i], ret);
	}
	assert_int_equal(pctl_parse_size(NULL, MEM, &v), -EINVAL);
	assert_int_equal(v, 777);	/* untouched on error */
}

static void parse_overflow(void **state)
{
	uint64_t v = 777;

	assert_int_equal(pctl_parse_size("99999999999999999999G", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("99999999999999999999", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("18446744073709551616", MEM, &v), -ERANGE);
	/* UINT64_MAX is "unlimited": typing it as a number is out of range */
	assert_int_equal(pctl_parse_size("18446744073709551615", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("16E", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("16384P", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("17179869184G", MEM, &v), -ERANGE);
	assert_int_equal(pctl_parse_size("15.9999E", MEM, &v), -EINVAL);	/* not whole bytes? */
	assert_int_equal(v, 777);
	assert_int_equal(parse_ok("18446744073709551614", MEM), UINT64_MAX - 1);
	assert_int_equal(parse_ok("17179869183G", MEM), 17179869183ULL * GiB);
}

static const char *fmt(uint64_t v)
{
	static char buf[PCTL_SIZE_LEN];

	return pctl_format_size(v, buf, sizeof(buf));
}

static void format(void **state)
{
	assert_string_equal(fmt(0), "0 B");
	assert_string_equal(fmt(1), "1 B");
	assert_string_equal(fmt(1023), "1023 B");
	assert_string_equal(fmt(1024), "1 KiB");
	assert_string_equal(fmt(1536), "1.5 KiB");
	assert_string_equal(fmt(4096), "4 KiB");
	assert_string_equal(fmt(512 * MiB), "512 MiB");
	assert_string_equal(fmt(3 * GiB / 2), "1.5 GiB");
	assert_string_equal(fmt(64 * GiB), "64 GiB");
	assert_string_equal(fmt(GiB + 1), "1.0 GiB");	/* not exact: one decimal */
	assert_string_equal(fmt(GiB - 1), "1.0 GiB");	/* 1023.99 MiB rounds up a unit */
	assert_string_equal(fmt(MiB - 1), "1.0 MiB");
	assert_string_equal(fmt(10 * MiB - 1), "10.0 MiB");
	assert_string_equal(fmt(1000 * MiB), "1000 MiB");
	assert_string_equal(fmt(2 * TiB), "2 TiB");
	assert_string_equal(fmt(1ULL << 60), "1 EiB");
	assert_string_equal(fmt(UINT64_MAX - 1), "16.0 EiB");
	assert_string_equal(fmt(PCTL_UNLIMITED), "unlimited");
}

static void format_small_buffer(void **state)
{
	char buf[4];

	/* truncated, still terminated */
	assert_string_equal(pctl_format_size(512 * MiB, buf, sizeof(buf)), "512");
}

/* What pinctl prints, it reads back as the same or a nearby size. */
static void round_trip(void **state)
{
	static const uint64_t exact[] = { 0, 1, 1023, KiB, 512 * MiB, 64 * GiB, 3 * TiB };
	char buf[PCTL_SIZE_LEN], in[PCTL_SIZE_LEN];

	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
		size_t o = 0;

		pctl_format_size(exact[i], buf, sizeof(buf));
		for (const char *p = buf; *p; p++)	/* "512 MiB" -> "512MiB" */
			if (*p != ' ')
				in[o++] = *p;
		in[o] = '\0';
		assert_int_equal(parse_ok(in, MEM), exact[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_units),
		cmocka_unit_test(parse_fractions),
		cmocka_unit_test(parse_percent),
		cmocka_unit_test(parse_bad),
		cmocka_unit_test(parse_overflow),
		cmocka_unit_test(format),
		cmocka_unit_test(format_small_buffer),
		cmocka_unit_test(round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
