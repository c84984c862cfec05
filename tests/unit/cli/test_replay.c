/*
 * test_replay.c - unit tests for src/cli/replay.c: how a live request's
 * params are matched to a recorded one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

/* cli_replay_same on two JSON texts. */
static bool same(const char *rec, const char *live)
{
	json_t *a = json_loads(rec, JSON_DECODE_ANY, NULL), *b = json_loads(live, JSON_DECODE_ANY, NULL);
	assert_non_null(a);
	assert_non_null(b);
	bool r = cli_replay_same(a, b);
	json_decref(a);
	json_decref(b);
	return r;
}

static void test_equal(void **state)
{
	(void)state;
	assert_true(same("{\"name\":\"t\",\"arguments\":{\"a\":1,\"b\":[1,2]}}",
			 "{\"arguments\":{\"b\":[1,2],\"a\":1},\"name\":\"t\"}"));
	assert_false(same("{\"name\":\"t\",\"arguments\":{\"a\":1}}", "{\"name\":\"t\",\"arguments\":{\"a\":2}}"));
	assert_false(same("{\"a\":1}", "{\"a\":1,\"b\":2}"));   /* a key more */
	assert_false(same("{\"a\":1,\"b\":2}", "{\"a\":1}"));   /* a key less */
	assert_false(same("[1,2]", "[1,2,3]"));
	assert_false(same("1", "1.0"));                         /* as jansson compares */
}

static void test_redacted(void **state)
{
	(void)state;
	/* a key redacted, or a pattern redacted inside a string: any value matches */
	assert_true(same("{\"password\":\"[REDACTED]\"}", "{\"password\":\"hunter2\"}"));
	assert_true(same("{\"password\":\"[REDACTED]\"}", "{\"password\":{\"nested\":1}}"));
	assert_true(same("{\"q\":\"key [REDACTED] here\"}", "{\"q\":\"key sk-123 here\"}"));
	assert_true(same("[\"[REDACTED]\",2]", "[\"x\",2]"));
	/* but the key must be there, and the rest must match */
	assert_false(same("{\"password\":\"[REDACTED]\"}", "{}"));
	assert_false(same("{\"password\":\"[REDACTED]\",\"a\":1}", "{\"password\":\"x\",\"a\":2}"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_redacted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
