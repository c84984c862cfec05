/*
 * test_http_sid.c - unit tests for src/front/http_sid.c: new session ids
 * and the check of their shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_sid.h"

/* Ids are 32 hex digits, valid by our check, and differ. */
static void test_sid(void **state)
{
	(void)state;
	char a[HTTP_SID_LEN + 1], b[HTTP_SID_LEN + 1];
	assert_int_equal(http_sid_new(a), 0);
	assert_int_equal(http_sid_new(b), 0);
	assert_int_equal(strlen(a), HTTP_SID_LEN);
	assert_true(http_sid_valid(a));
	assert_true(http_sid_valid(b));
	assert_string_not_equal(a, b);
	assert_false(http_sid_valid("x"));
	assert_false(http_sid_valid(NULL));
	a[3] = 'G';
	assert_false(http_sid_valid(a));
	char longer[HTTP_SID_LEN + 2];
	memset(longer, 'a', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	assert_false(http_sid_valid(longer));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
