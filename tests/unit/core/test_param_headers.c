/*
 * test_param_headers.c - unit tests for src/core/param_headers.c: the
 * 2026-07-28 era's x-mcp-header marks learned from tools/list results
 * (invalid tools left out), the Mcp-Param-* headers of a tools/call, and
 * the encoding of a header value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "log.h"
#include "param_headers.h"

/* TEXT parsed (a new reference); fails the test when it does not parse. */
static json_t *parse(const char *text)
{
	json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
	assert_non_null(j);
	return j;
}

static void expect_encoded(const char *in, size_t n, const char *want)
{
	char *got = param_encode(in, n);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* The specification's own examples, and the edges. */
static void test_encode(void **state)
{
	(void)state;
	expect_encoded("us-west1", 8, "us-west1");
	expect_encoded("a b\tc", 5, "a b\tc");                       /* inner space and tab */
	expect_encoded("Hello, \xe4\xb8\x96\xe7\x95\x8c", 13, "=?base64?SGVsbG8sIOS4lueVjA==?=");
	expect_encoded(" padded ", 8, "=?base64?IHBhZGRlZCA=?=");
	expect_encoded("line1\nline2", 11, "=?base64?bGluZTEKbGluZTI=?=");
	expect_encoded("=?base64?literal?=", 18, "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
	expect_encoded("=?base64?", 9, "=?base64?");                 /* not the whole pattern */
	expect_encoded("", 0, "=?base64?" "?=");   /* an empty value ("??=" would be a trigraph) */
	expect_encoded("a\0b", 3, "=?base64?YQBi?=");                 /* NUL: not header-safe */
	expect_encoded("\x7f", 1, "=?base64?fw==?=");
}

struct got {
	char names[8][64];
	char values[8][128];
	int n;
	int fail_at;   /* ADD fails on this call (1-based), 0: never */
};

static int add(void *arg, const char *name, const char *value)
{
	struct got *g = arg;
	if (++g->n == g->fail_at)
		return -7;
	assert_true(g->n <= 8);
	snprintf(g->names[g->n - 1], sizeof g->names[0], "%s", name);
	snprintf(g->values[g->n - 1], sizeof g->values[0], "%s", value);
	return 0;
}

static const char *value_of(const struct got *g, const char *name)
{
	for (int i = 0; i < g->n; i++)
		if (strcmp(g->names[i], name) == 0)
			return g->values[i];
	return NULL;
}

#define TOOLS \
	"[{\"name\":\"deploy\",\"inputSchema\":{\"type\":\"object\",\"properties\":{" \
	"  \"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"}," \
	"  \"opts\":{\"type\":\"object\",\"properties\":{" \
	"    \"zone\":{\"type\":\"integer\",\"x-mcp-header\":\"Zone\"}," \
	"    \"dry\":{\"type\":\"boolean\",\"x-mcp-header\":\"Dry-Run\"}}}," \
	"  \"query\":{\"type\":\"string\"}}}}," \
	" {\"name\":\"plain\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}}," \
	" {\"name\":\"in_items\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"l\":{\"type\":\"array\"," \
	"  \"items\":{\"type\":\"string\",\"x-mcp-header\":\"L\"}}}}}," \
	" {\"name\":\"a_number\",\"inputSchema\":{\"type\":\"object\",\"properties\":{" \
	"  \"n\":{\"type\":\"number\",\"x-mcp-header\":\"N\"}}}}," \
	" {\"name\":\"twice\",\"inputSchema\":{\"type\":\"object\",\"properties\":{" \
	"  \"a\":{\"type\":\"string\",\"x-mcp-header\":\"Same\"},\"b\":{\"type\":\"string\",\"x-mcp-header\":\"same\"}}}}," \
	" {\"name\":\"not_token\",\"inputSchema\":{\"type\":\"object\",\"properties\":{" \
	"  \"a\":{\"type\":\"string\",\"x-mcp-header\":\"Re gion\\r\\nX\"}}}}," \
	" {\"name\":\"on_root\",\"inputSchema\":{\"type\":\"object\",\"x-mcp-header\":\"Root\"}}," \
	" {\"name\":\"in_oneof\",\"inputSchema\":{\"type\":\"object\",\"oneOf\":[{\"properties\":{" \
	"  \"a\":{\"type\":\"string\",\"x-mcp-header\":\"A\"}}}]}}," \
	" {\"name\":\"empty\",\"inputSchema\":{\"type\":\"object\",\"properties\":{" \
	"  \"a\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}}]"

/* Valid marks are learned, reachable through "properties" alone; a tool
 * with any invalid mark is left out of the list; others stay as they are. */
static void test_learn(void **state)
{
	(void)state;
	struct param_table t = PARAM_TABLE_INIT;
	json_t *tools = parse(TOOLS);
	assert_int_equal(param_learn(&t, tools, "b", true), 7);
	assert_int_equal(json_array_size(tools), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 0), "name")), "deploy");
	assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 1), "name")), "plain");
	assert_non_null(hmap_get(&t.tools, "deploy", 6));
	assert_null(hmap_get(&t.tools, "plain", 5));       /* nothing to mirror */
	assert_null(hmap_get(&t.tools, "in_items", 8));

	struct got g = { 0 };
	json_t *args = parse("{\"region\":\"us-west1\",\"query\":\"SELECT 1\","
				"\"opts\":{\"zone\":-7,\"dry\":false}}");
	assert_int_equal(param_headers(&t, "deploy", args, add, &g), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(value_of(&g, "Mcp-Param-Region"), "us-west1");
	assert_string_equal(value_of(&g, "Mcp-Param-Zone"), "-7");
	assert_string_equal(value_of(&g, "Mcp-Param-Dry-Run"), "false");
	json_decref(args);

	/* absent or null: no header; 42.0 is the integer 42; text is encoded */
	memset(&g, 0, sizeof g);
	args = parse("{\"region\":\"Z\\u00fcrich \",\"opts\":{\"zone\":42.0,\"dry\":null}}");
	assert_int_equal(param_headers(&t, "deploy", args, add, &g), 0);
	assert_int_equal(g.n, 2);
	assert_string_equal(value_of(&g, "Mcp-Param-Region"), "=?base64?WsO8cmljaCA=?=");
	assert_string_equal(value_of(&g, "Mcp-Param-Zone"), "42");
	json_decref(args);
	memset(&g, 0, sizeof g);
	assert_int_equal(param_headers(&t, "deploy", NULL, add, &g), 0);   /* no arguments */
	assert_int_equal(g.n, 0);
	assert_int_equal(param_headers(&t, "plain", NULL, add, &g), 0);
	assert_int_equal(param_headers(&t, NULL, NULL, add, &g), 0);
	assert_int_equal(g.n, 0);

	/* an ADD that fails stops the walk with its code */
	memset(&g, 0, sizeof g);
	g.fail_at = 1;
	args = parse("{\"region\":\"r\",\"opts\":{\"zone\":1}}");
	assert_int_equal(param_headers(&t, "deploy", args, add, &g), -7);
	json_decref(args);

	/* a later listing replaces a tool's marks, and can drop them */
	json_decref(tools);
	tools = parse("[{\"name\":\"deploy\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
			 "\"region\":{\"type\":\"string\"}}}}]");
	assert_int_equal(param_learn(&t, tools, "b", true), 0);
	assert_null(hmap_get(&t.tools, "deploy", 6));
	json_decref(tools);
	/* not a list, tools without names or schemas: nothing learned, nothing lost */
	tools = parse("[{\"inputSchema\":{}},{\"name\":\"n\"},7]");
	assert_int_equal(param_learn(&t, tools, "b", true), 0);
	assert_int_equal(json_array_size(tools), 3);
	assert_int_equal(param_learn(&t, NULL, "b", true), 0);
	json_decref(tools);
	param_table_release(&t);
}

/* Request headers for param_check: "Name: value" pairs, NULL-ended. */
static char *get_header(void *arg, const char *name, bool *bad)
{
	const char *const *h = arg;
	*bad = false;
	for (; *h; h += 2)
		if (strcasecmp(h[0], name) == 0) {
			if (strcmp(h[1], "BAD") == 0) {
				*bad = true;
				return NULL;
			}
			return strdup(h[1]);
		}
	return NULL;
}

static const char *check(const struct param_table *t, const char *args, const char *const *hdrs,
			 char *why, size_t n)
{
	json_t *a = parse(args);
	const char *r = param_check(t, "deploy", a, get_header, (void *)hdrs, why, n);
	json_decref(a);
	return r;
}

/* As a server: marks learned without dropping anything; a call's headers
 * must carry each marked argument it has, equal to it. */
static void test_check(void **state)
{
	(void)state;
	struct param_table t = PARAM_TABLE_INIT;
	json_t *tools = parse(TOOLS);
	assert_int_equal(param_learn(&t, tools, "front", false), 7);
	assert_int_equal(json_array_size(tools), 9);   /* a server offers what it has */
	json_decref(tools);
	char why[200];
	const char *ok[] = { "mcp-param-region", "eu", "Mcp-Param-Zone", "7.0", "Mcp-Param-Dry-Run",
			     "true", NULL };
	assert_null(check(&t, "{\"region\":\"eu\",\"opts\":{\"zone\":7,\"dry\":true}}", ok,
			  why, sizeof why));
	assert_null(check(&t, "{\"region\":\"eu\",\"opts\":{\"dry\":null}}", ok, why, sizeof why));
	const char *none[] = { NULL };
	assert_null(check(&t, "{}", none, why, sizeof why));   /* nothing marked is there */
	/* a value no header can carry (1.5 for an integer, an object) is not
	 * sent by param_headers, so not expected either: the schema's to refuse */
	const char *region[] = { "Mcp-Param-Region", "eu", NULL };
	assert_null(check(&t, "{\"region\":\"eu\",\"opts\":{\"zone\":1.5,\"dry\":{}}}", region,
			  why, sizeof why));
	const char *r = check(&t, "{\"region\":\"eu\"}", none, why, sizeof why);
	assert_non_null(r);
	assert_non_null(strstr(r, "the Mcp-Param-Region header is required"));
	const char *wrong[] = { "Mcp-Param-Region", "eu", "Mcp-Param-Zone", "8", "Mcp-Param-Dry-Run",
				"True", NULL };
	r = check(&t, "{\"region\":\"eu\",\"opts\":{\"zone\":7}}", wrong, why, sizeof why);
	assert_non_null(r);
	assert_non_null(strstr(r, "the Mcp-Param-Zone header does not match the body"));
	r = check(&t, "{\"region\":\"eu\",\"opts\":{\"dry\":true}}", wrong, why, sizeof why);
	assert_non_null(strstr(r, "the Mcp-Param-Dry-Run header does not match the body"));
	r = check(&t, "{\"region\":\"EU\"}", ok, why, sizeof why);   /* values are case-sensitive */
	assert_non_null(strstr(r, "the Mcp-Param-Region header does not match the body"));
	const char *bad[] = { "Mcp-Param-Region", "BAD", NULL };
	r = check(&t, "{\"region\":\"eu\"}", bad, why, sizeof why);
	assert_non_null(strstr(r, "Base64 form cannot be decoded"));
	/* a tool with invalid marks is not learned: not checked */
	json_t *a = parse("{\"n\":1.5}");
	assert_null(param_check(&t, "a_number", a, get_header, (void *)none, why, sizeof why));
	json_decref(a);
	param_table_release(&t);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	log_open_file("/dev/null");   /* the left-out tools are logged */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_learn),
		cmocka_unit_test(test_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
