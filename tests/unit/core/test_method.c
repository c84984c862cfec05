/*
 * test_method.c - unit tests for src/core/method.c (method names to codes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "method.h"

/* Every code's name gives the code back, by length and NUL-terminated. */
static void test_every_name_round_trips(void **state)
{
	(void)state;
	for (int c = MCP_OTHER + 1; c < MCP_METHOD_COUNT; c++) {
		const char *name = mcp_method_name((enum mcp_method)c);
		assert_true(strlen(name) > 0);
		assert_int_equal(mcp_method_of(name, strlen(name)), c);
		assert_int_equal(mcp_method_code(name), c);
	}
	assert_string_equal(mcp_method_name(MCP_TOOLS_CALL), "tools/call");
	assert_string_equal(mcp_method_name(MCP_OTHER), "");
	assert_string_equal(mcp_method_name(MCP_METHOD_COUNT), "");
}

/* Names that are near a known one, or none, are MCP_OTHER. */
static void test_near_names_are_other(void **state)
{
	static const char *const other[] = {
		"", "tools/cal", "tools/calls", "Tools/call", "tools/call\n", "resources/",
		"notifications/progres", "notifications/message", "sampling/createMessage",
		"elicitation/create", "roots/list", "x", "zzz", "\xff", "ping ",
	};
	(void)state;
	for (size_t i = 0; i < sizeof other / sizeof *other; i++)
		assert_int_equal(mcp_method_code(other[i]), MCP_OTHER);
	assert_int_equal(mcp_method_code(NULL), MCP_OTHER);
	assert_int_equal(mcp_method_of(NULL, 4), MCP_OTHER);
}

/* Bytes past N are not looked at: a method inside a longer buffer. */
static void test_length_bounds_the_name(void **state)
{
	(void)state;
	assert_int_equal(mcp_method_of("tools/call\",\"params\"", 10), MCP_TOOLS_CALL);
	assert_int_equal(mcp_method_of("tools/callx", 10), MCP_TOOLS_CALL);
	assert_int_equal(mcp_method_of("tools/call", 9), MCP_OTHER);
	/* a NUL inside the bytes is part of the name */
	assert_int_equal(mcp_method_of("ping\0", 5), MCP_OTHER);
}

/* The resource methods, whose subject is a URI. */
static void test_resource_methods(void **state)
{
	(void)state;
	assert_true(mcp_method_on_resource(MCP_RESOURCES_READ));
	assert_true(mcp_method_on_resource(MCP_RESOURCES_SUBSCRIBE));
	assert_true(mcp_method_on_resource(MCP_RESOURCES_UNSUBSCRIBE));
	assert_false(mcp_method_on_resource(MCP_RESOURCES_LIST));
	assert_false(mcp_method_on_resource(MCP_RESOURCES_TEMPLATES_LIST));
	assert_false(mcp_method_on_resource(MCP_TOOLS_CALL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_name_round_trips),
		cmocka_unit_test(test_near_names_are_other),
		cmocka_unit_test(test_length_bounds_the_name),
		cmocka_unit_test(test_resource_methods),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
