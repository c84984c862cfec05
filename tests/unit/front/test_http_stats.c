/*
 * test_http_stats.c - unit tests for src/front/http_stats.c: the methods
 * /metrics names and the latency buckets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_stats.h"

/* Known methods by name, anything else (or none) as "other". */
static void test_methods(void **state)
{
	(void)state;
	const char *const *m = http_stats_methods;
	assert_string_equal(m[http_stats_method_index("tools/call")], "tools/call");
	assert_string_equal(m[http_stats_method_index("initialize")], "initialize");
	assert_string_equal(m[http_stats_method_index("subscriptions/listen")],
			    "subscriptions/listen");
	assert_int_equal(http_stats_method_index("tools/call/x"), HTTP_STATS_NMETHODS - 1);
	assert_int_equal(http_stats_method_index("other"), HTTP_STATS_NMETHODS - 1);
	assert_int_equal(http_stats_method_index(NULL), HTTP_STATS_NMETHODS - 1);
	assert_string_equal(m[HTTP_STATS_NMETHODS - 1], "other");
	for (unsigned i = 0; i + 1 < HTTP_STATS_NMETHODS; i++)
		assert_int_equal(http_stats_method_index(m[i]), i);
}

/* Latency buckets by bound, bounds inclusive and rising, +Inf last. */
static void test_buckets(void **state)
{
	(void)state;
	const double *b = http_stats_latency_bounds;
	assert_int_equal(http_stats_latency_bucket(0), 0);
	assert_int_equal(http_stats_latency_bucket(0.0001), 0);   /* le: bounds are inclusive */
	assert_int_equal(http_stats_latency_bucket(0.00011), 1);
	assert_true(b[http_stats_latency_bucket(0.7)] == 1.0);
	assert_true(b[HTTP_STATS_NBUCKETS - 1] == 30.0);
	assert_int_equal(http_stats_latency_bucket(30.5), HTTP_STATS_NBUCKETS);
	for (unsigned i = 1; i < HTTP_STATS_NBUCKETS; i++)
		assert_true(b[i] > b[i - 1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_methods),
		cmocka_unit_test(test_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
