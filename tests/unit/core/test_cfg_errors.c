/*
 * test_cfg_errors.c - unit tests for src/core/cfg_errors.c: error lines
 * appended in order as formatted, a line too long for the buffer cut, and
 * the list empty and reusable after a release.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cfg_errors.h"

/* Lines keep their order and their formatting. */
static void test_append_in_order(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	cfg_error(&e, "%s: %s: %s", "f.json", "/mcpServers", "must be an object");
	cfg_error(&e, "f.json:%d:%d: %s", 3, 14, "end of file expected");
	assert_int_equal(e.count, 2);
	assert_string_equal(e.lines[0], "f.json: /mcpServers: must be an object");
	assert_string_equal(e.lines[1], "f.json:3:14: end of file expected");
	cfg_errors_release(&e);
}

/* A line longer than the formatting buffer is cut, not overflowed. */
static void test_long_line_cut(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	char big[3000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	cfg_error(&e, "f.json: /a: %s", big);
	assert_int_equal(e.count, 1);
	assert_int_equal(strlen(e.lines[0]), 1023);
	assert_memory_equal(e.lines[0], "f.json: /a: xxx", 15);
	cfg_errors_release(&e);
}

/* Release empties the list, which can be used again (and released twice). */
static void test_release_reuse(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	cfg_errors_release(&e);
	cfg_error(&e, "one");
	cfg_errors_release(&e);
	assert_null(e.lines);
	assert_int_equal(e.count, 0);
	cfg_error(&e, "two");
	assert_int_equal(e.count, 1);
	assert_string_equal(e.lines[0], "two");
	cfg_errors_release(&e);
	cfg_errors_release(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_in_order),
		cmocka_unit_test(test_long_line_cut),
		cmocka_unit_test(test_release_reuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
