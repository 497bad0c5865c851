// SPDX-License-Identifier: MIT
/* tools/pinctl/pinctl_json.c: the JSON writer's structure and string escaping. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../tools/pinctl/pinctl.h"

struct mem {
	char *buf;
	size_t len;
	FILE *f;
};

static void mem_open(struct mem *m)
{
	m->buf = NULL;
	m->len = 0;
	m->f = open_memstream(&m->buf, &m->len);
	assert_non_null(m->f);
}

/* Close the stream and compare; frees the buffer. */
static void mem_expect(struct mem *m, const char *want)
{
	fclose(m->f);
	assert_string_equal(m->buf, want);
	free(m->buf);
}

static void json_is(const char *in, const char *want)
{
	struct mem m;

	mem_open(&m);
	pctl_json_write_string(m.f, in);
	mem_expect(&m, want);
}

static void escapes(void **state)
{
	json_is("", "\"\"");
	json_is("plain", "\"plain\"");
	json_is("a\"b", "\"a\\\"b\"");
	json_is("a\\b", "\"a\\\\b\"");
	json_is("/", "\"/\"");
	json_is("\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\"");
	json_is("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
}

static void utf8(void **state)
{
	/* valid sequences of 2, 3 and 4 bytes pass through */
	json_is("caf\xc3\xa9", "\"caf\xc3\xa9\"");
	json_is("\xe2\x82\xac", "\"\xe2\x82\xac\"");
	json_is("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"");
	/* invalid: stray continuation, truncated, overlong, surrogate, > U+10FFFF, 0xff */
	json_is("a\x80z", "\"a\\ufffdz\"");
	json_is("\xc3", "\"\\ufffd\"");
	json_is("\xe2\x82", "\"\\ufffd\\ufffd\"");
	json_is("\xc0\xaf", "\"\\ufffd\\ufffd\"");
	json_is("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");
	json_is("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
	json_is("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	json_is("\xff", "\"\\ufffd\"");
}

static void structure_compact(void **state)
{
	struct pctl_json j;
	struct mem m;

	mem_open(&m);
	pctl_json_init(&j, m.f, false);
	pctl_json_obj_begin(&j);
	pctl_json_key(&j, "a");
	pctl_json_u64(&j, UINT64_MAX);
	pctl_json_key(&j, "b");
	pctl_json_arr_begin(&j);
	pctl_json_i64(&j, -5);
	pctl_json_bool(&j, true);
	pctl_json_null(&j);
	pctl_json_limit(&j, PCTL_UNLIMITED);
	pctl_json_limit(&j, 7);
	pctl_json_obj_begin(&j);
	pctl_json_obj_end(&j);
	pctl_json_arr_begin(&j);
	pctl_json_arr_end(&j);
	pctl_json_arr_end(&j);
	pctl_json_key(&j, "c\"");
	pctl_json_str(&j, "x");
	pctl_json_obj_end(&j);
	pctl_json_done(&j);
	/* a second document on the next line, as top --json writes them */
	pctl_json_obj_begin(&j);
	pctl_json_obj_end(&j);
	pctl_json_done(&j);
	mem_expect(&m, "{\"a\":18446744073709551615,\"b\":[-5,true,null,null,7,{},[]],\"c\\\"\":\"x\"}\n{}\n");
}

static void structure_pretty(void **state)
{
	struct pctl_json j;
	struct mem m;

	mem_open(&m);
	pctl_json_init(&j, m.f, true);
	pctl_json_obj_begin(&j);
	pctl_json_key(&j, "a");
	pctl_json_obj_begin(&j);
	pctl_json_key(&j, "b");
	pctl_json_u64(&j, 1);
	pctl_json_obj_end(&j);
	pctl_json_key(&j, "e");
	pctl_json_arr_begin(&j);
	pctl_json_arr_end(&j);
	pctl_json_obj_end(&j);
	pctl_json_done(&j);
	mem_expect(&m, "{\n  \"a\": {\n    \"b\": 1\n  },\n  \"e\": []\n}\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escapes),
		cmocka_unit_test(utf8),
		cmocka_unit_test(structure_compact),
		cmocka_unit_test(structure_pretty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
