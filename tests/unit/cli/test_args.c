/*
 * test_args.c - unit tests for src/cli/args.c: the shell commands' options,
 * key=value arguments and tool lookup.
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

#define ARGC(v) ((int)(sizeof v / sizeof *v))

static void test_wanted(void **state)
{
	char *a[] = { "mcp-chain", "list" };
	char *b[] = { "mcp-chain", "--config", "f", "--direct" };
	char *c[] = { "mcp-chain", "--config", "f" };
	char *d[] = { "mcp-chain", "check", "f" };
	char *e[] = { "mcp-chain", "--config", "f", "--", "--direct" };
	char *f[] = { "mcp-chain", "-c", "list", "--json", "call" };   /* a config named "list" */
	char *g[] = { "mcp-chain", "-c", "f", "--json", "call", "x" };
	char *h[] = { "mcp-chain", "--config", "f", "--record", "list" };  /* the server, recording to "list" */
	char *i[] = { "mcp-chain", "audit", "verify", "list" };
	(void)state;
	assert_true(cli_wanted(ARGC(f), f));
	assert_true(cli_wanted(ARGC(g), g));
	assert_false(cli_wanted(ARGC(h), h));
	assert_false(cli_wanted(ARGC(i), i));
	assert_true(cli_wanted(ARGC(a), a));
	assert_true(cli_wanted(ARGC(b), b));
	assert_false(cli_wanted(ARGC(c), c));
	assert_false(cli_wanted(ARGC(d), d));
	assert_false(cli_wanted(ARGC(e), e));
}

static void test_opts(void **state)
{
	char *v[] = { "mcp-chain", "call", "-c", "f.json", "--json", "tool", "a=1",
		      "--timeout=2.5", "n=-3", "--", "--x=y" };
	struct cli_opts o;
	char err[200];
	(void)state;
	assert_int_equal(cli_parse_opts(ARGC(v), v, &o, err, sizeof err), 0);
	assert_string_equal(o.cmd, "call");
	assert_string_equal(o.config, "f.json");
	assert_true(o.json);
	assert_true(o.timeout == 2.5);
	assert_int_equal(o.npos, 4);
	assert_string_equal(o.pos[0], "tool");
	assert_string_equal(o.pos[1], "a=1");
	assert_string_equal(o.pos[2], "n=-3");
	assert_string_equal(o.pos[3], "--x=y");   /* after "--" */
	free(o.pos);
}

static void test_opts_errors(void **state)
{
	char *a[] = { "mcp-chain", "list", "--bogus", "-c", "f" };
	char *b[] = { "mcp-chain", "call", "-c", "f", "--timeout", "soon", "t" };
	char *c[] = { "mcp-chain", "frobnicate", "-c", "f" };
	char *d[] = { "mcp-chain", "--direct", "-c", "f", "extra" };
	char *e[] = { "mcp-chain", "list", "-c" };
	struct cli_opts o;
	char err[200];
	(void)state;
	unsetenv("MCP_CHAIN_CONFIG");
	assert_int_equal(cli_parse_opts(ARGC(a), a, &o, err, sizeof err), -1);
	assert_string_equal(err, "unknown option \"--bogus\"");
	free(o.pos);
	assert_int_equal(cli_parse_opts(ARGC(b), b, &o, err, sizeof err), -1);
	assert_non_null(strstr(err, "\"soon\" is not a number of seconds"));
	free(o.pos);
	assert_int_equal(cli_parse_opts(ARGC(c), c, &o, err, sizeof err), -1);
	assert_string_equal(err, "unknown command \"frobnicate\"");
	free(o.pos);
	assert_int_equal(cli_parse_opts(ARGC(d), d, &o, err, sizeof err), -1);
	assert_string_equal(err, "--direct takes no arguments");
	free(o.pos);
	assert_int_equal(cli_parse_opts(ARGC(e), e, &o, err, sizeof err), -1);
	assert_string_equal(err, "--config needs a FILE");
	free(o.pos);
}

static void test_config_from_env(void **state)
{
	char *a[] = { "mcp-chain", "--direct" };
	struct cli_opts o;
	char err[200];
	(void)state;
	setenv("MCP_CHAIN_CONFIG", "env.json", 1);
	assert_int_equal(cli_parse_opts(ARGC(a), a, &o, err, sizeof err), 0);
	assert_string_equal(o.cmd, "direct");
	assert_string_equal(o.config, "env.json");
	free(o.pos);
	unsetenv("MCP_CHAIN_CONFIG");
	assert_int_equal(cli_parse_opts(ARGC(a), a, &o, err, sizeof err), -1);
	assert_non_null(strstr(err, "no configuration given"));
	free(o.pos);
}

/* Builds from V and compares with the JSON text WANT. */
static void expect_args(char **v, int n, json_t *schema, const char *want)
{
	char err[200] = "";
	json_t *got = cli_args_build(v, n, schema, err, sizeof err);
	json_t *exp = json_loads(want, 0, NULL);
	assert_non_null(got);
	assert_true(json_equal(got, exp));
	json_decref(got);
	json_decref(exp);
}

static void test_key_value(void **state)
{
	char *v[] = { "n=5", "f=1.5", "b=true", "s=hello world", "j={\"k\":[1]}", "e=", "q=\"5\"", "eq=a=b" };
	(void)state;
	expect_args(v, ARGC(v), NULL,
		    "{\"n\":5,\"f\":1.5,\"b\":true,\"s\":\"hello world\",\"j\":{\"k\":[1]},"
		    "\"e\":\"\",\"q\":\"5\",\"eq\":\"a=b\"}");
}

static void test_key_value_string_schema(void **state)
{
	/* a property the schema says is a string keeps the text typed */
	json_t *schema = json_loads("{\"properties\":{\"id\":{\"type\":\"string\"},"
				    "\"n\":{\"type\":\"integer\"}}}", 0, NULL);
	char *v[] = { "id=007", "n=7", "flag=null" };
	(void)state;
	expect_args(v, ARGC(v), schema, "{\"id\":\"007\",\"n\":7,\"flag\":null}");
	json_decref(schema);
}

static void test_json_object(void **state)
{
	char *v[] = { " {\"a\": [1, 2]}" };
	char *bad[] = { "{\"a\": " };
	char *dup[] = { "a=1", "a=2" };
	char *nokey[] = { "=1" };
	char err[200];
	(void)state;
	expect_args(v, 1, NULL, "{\"a\":[1,2]}");
	assert_null(cli_args_build(bad, 1, NULL, err, sizeof err));
	assert_non_null(strstr(err, "not a JSON object"));
	assert_null(cli_args_build(dup, 2, NULL, err, sizeof err));
	assert_string_equal(err, "argument \"a\" given twice");
	assert_null(cli_args_build(nokey, 1, NULL, err, sizeof err));
	assert_non_null(strstr(err, "key=value"));
	expect_args(NULL, 0, NULL, "{}");
}

static void test_tool_find(void **state)
{
	json_t *tools = json_loads("[{\"name\":\"fs__read_file\"},{\"name\":\"a.b\"},"
				   "{\"name\":\"echo\"}]", 0, NULL);
	(void)state;
	assert_ptr_equal(cli_tool_find(tools, "echo", "__"), json_array_get(tools, 2));
	assert_ptr_equal(cli_tool_find(tools, "fs.read_file", "__"), json_array_get(tools, 0));
	assert_ptr_equal(cli_tool_find(tools, "a.b", "__"), json_array_get(tools, 1));  /* exact first */
	assert_null(cli_tool_find(tools, "fs.write_file", "__"));
	assert_null(cli_tool_find(tools, "fs.read_file", NULL));
	json_decref(tools);
}

static void test_one_line(void **state)
{
	char out[12];
	(void)state;
	cli_one_line("  first line\nsecond", out, sizeof out);
	assert_string_equal(out, "first line");
	cli_one_line("a rather long line", out, sizeof out);
	assert_string_equal(out, "a rather...");
	cli_one_line("d\xc3\xa9j\xc3\xa0 vu, encore", out, 9);  /* no cut inside a UTF-8 sequence */
	assert_string_equal(out, "d\xc3\xa9j...");
	cli_one_line(NULL, out, sizeof out);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_opts_errors),
		cmocka_unit_test(test_config_from_env),
		cmocka_unit_test(test_key_value),
		cmocka_unit_test(test_key_value_string_schema),
		cmocka_unit_test(test_json_object),
		cmocka_unit_test(test_tool_find),
		cmocka_unit_test(test_one_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
