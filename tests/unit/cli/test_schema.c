/*
 * test_schema.c - unit tests for src/cli/schema.c: a tool's arguments
 * checked against its inputSchema, each complaint naming the key.
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

static const char schema_text[] =
	"{\"type\":\"object\",\"additionalProperties\":false,"
	"\"required\":[\"path\",\"mode\"],"
	"\"properties\":{"
	"\"path\":{\"type\":\"string\",\"description\":\"Where\"},"
	"\"mode\":{\"type\":\"string\",\"enum\":[\"r\",\"w\"]},"
	"\"n\":{\"type\":\"integer\"},"
	"\"x\":{\"type\":\"number\"},"
	"\"tags\":{\"type\":\"array\"},"
	"\"maybe\":{\"type\":[\"string\",\"null\"]},"
	"\"free\":{}}}";

/* Checks ARGS (JSON text) and compares the complaint with WANT (NULL: passes). */
static void expect(const char *schema_json, const char *args_json, const char *want)
{
	json_t *schema = json_loads(schema_json, 0, NULL);
	json_t *args = json_loads(args_json, JSON_DECODE_ANY, NULL);
	char err[300] = "";
	int rc = cli_schema_check(schema, args, err, sizeof err);
	if (want) {
		assert_int_equal(rc, -1);
		assert_string_equal(err, want);
	} else {
		assert_int_equal(rc, 0);
	}
	json_decref(schema);
	json_decref(args);
}

static void test_valid(void **state)
{
	(void)state;
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\"}", NULL);
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"w\",\"n\":3,\"x\":2,\"tags\":[],"
	       "\"maybe\":null,\"free\":{\"any\":1}}", NULL);
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"w\",\"n\":3.0,\"x\":2.5}", NULL);
	expect("null", "{\"anything\":1}", NULL);    /* no schema: nothing to check */
	expect("{\"type\":\"object\"}", "{\"a\":1}", NULL);  /* open by default */
}

static void test_required(void **state)
{
	(void)state;
	expect(schema_text, "{\"mode\":\"r\"}", "missing required argument \"path\": Where");
	expect(schema_text, "{\"path\":\"/a\"}", "missing required argument \"mode\"");
}

static void test_types(void **state)
{
	(void)state;
	expect(schema_text, "{\"path\":5,\"mode\":\"r\"}",
	       "argument \"path\": expected string, got integer 5");
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\",\"n\":1.5}",
	       "argument \"n\": expected integer, got number 1.5");
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\",\"x\":\"7\"}",
	       "argument \"x\": expected number, got string \"7\"");
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\",\"maybe\":true}",
	       "argument \"maybe\": expected string or null, got boolean true");
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\",\"tags\":{}}",
	       "argument \"tags\": expected array, got object {}");
}

static void test_enum_and_unknown(void **state)
{
	(void)state;
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"rw\"}",
	       "argument \"mode\": \"rw\" is not one of [\"r\",\"w\"]");
	expect(schema_text, "{\"path\":\"/a\",\"mode\":\"r\",\"colour\":1}",
	       "unknown argument \"colour\" (known: path, mode, n, x, tags, maybe, free)");
	expect(schema_text, "[1]", "the arguments must be a JSON object");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_enum_and_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
