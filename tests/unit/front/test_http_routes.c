/*
 * test_http_routes.c - unit tests for src/front/http_routes.c: the routing
 * table of a session, ids by value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_routes.h"

/* Sets V to the JSON text T. */
static struct msg_val val(const char *t)
{
	struct msg_val v = { .n = 0 };
	msg_val_set(&v, t, strlen(t));
	return v;
}

/* Ids by value (1 is not "1"; spelling does not matter). */
static void test_routes(void **state)
{
	(void)state;
	struct http_routes r;
	int s1, s2;
	struct msg_val one = val("1"), one_s = val("\"1\""), one_real = val("1.0"), esc = val("\"\\u0061\""),
		a = val("\"a\""), none = { .n = 0 }, null = val("null");
	http_routes_init(&r);
	assert_int_equal(http_routes_add_id(&r, &one, &s1), 0);
	assert_int_equal(http_routes_add_id(&r, &one_s, &s2), 0);
	assert_int_equal(http_routes_add_id(&r, &one_real, &s2), 1);  /* 1.0 is 1: already open */
	assert_int_equal(http_routes_add_id(&r, &none, &s1), -1);
	assert_int_equal(http_routes_add_id(&r, &null, &s1), -1);
	assert_ptr_equal(http_routes_peek_id(&r, &one_real), &s1);
	assert_ptr_equal(http_routes_peek_id(&r, &one_s), &s2);
	assert_int_equal(http_routes_add_id(&r, &esc, &s2), 0);
	assert_ptr_equal(http_routes_peek_id(&r, &a), &s2);       /* "\u0061" is "a" */
	assert_false(http_routes_drop_id(&r, &a, &s1));           /* not s1's */
	assert_true(http_routes_drop_id(&r, &a, &s2));
	assert_null(http_routes_peek_id(&r, &a));
	assert_ptr_equal(http_routes_take_id(&r, &one), &s1);
	assert_null(http_routes_take_id(&r, &one));
	assert_null(http_routes_peek_id(&r, &null));
	http_routes_release(&r);
	msg_val_release(&esc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
