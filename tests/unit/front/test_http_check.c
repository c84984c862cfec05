/*
 * test_http_check.c - unit tests for src/front/http_check.c: Host and
 * Origin checks, Accept and Content-Type parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_check.h"

/* Loopback names with our port or none; anything else refused. */
static void test_host(void **state)
{
	(void)state;
	assert_true(http_check_host("localhost:8080", 8080, NULL));
	assert_true(http_check_host("LOCALHOST:8080", 8080, NULL));
	assert_true(http_check_host("127.0.0.1:8080", 8080, NULL));
	assert_true(http_check_host("[::1]:8080", 8080, NULL));
	assert_true(http_check_host("localhost", 8080, NULL));
	assert_false(http_check_host("localhost:8081", 8080, NULL));
	assert_false(http_check_host("evil.example:8080", 8080, NULL));
	assert_false(http_check_host("localhost.evil.example", 8080, NULL));
	assert_false(http_check_host("127.0.0.1:8080x", 8080, NULL));
	assert_false(http_check_host("127.0.0.1:", 8080, NULL));
	assert_false(http_check_host("[::1", 8080, NULL));
	assert_false(http_check_host("", 8080, NULL));
	assert_false(http_check_host(NULL, 8080, NULL));
}

/* Extra hosts: exactly, or any port for an entry without one. */
static void test_host_extra(void **state)
{
	(void)state;
	char *extra[] = { "mcp.internal", "gw.example:443", NULL };
	assert_true(http_check_host("mcp.internal", 8080, extra));
	assert_true(http_check_host("mcp.internal:9999", 8080, extra));
	assert_true(http_check_host("gw.example:443", 8080, extra));
	assert_false(http_check_host("gw.example:444", 8080, extra));
	assert_false(http_check_host("gw.example", 8080, extra));
	assert_true(http_check_host("localhost:8080", 8080, extra));
}

/* No Origin passes (not a browser); a loopback origin needs our port. */
static void test_origin(void **state)
{
	(void)state;
	char *extra[] = { "https://app.example", NULL };
	assert_true(http_check_origin(NULL, 8080, NULL));
	assert_true(http_check_origin("http://localhost:8080", 8080, NULL));
	assert_true(http_check_origin("https://127.0.0.1:8080", 8080, NULL));
	assert_true(http_check_origin("http://[::1]:8080", 8080, NULL));
	assert_false(http_check_origin("http://localhost", 8080, NULL));
	assert_false(http_check_origin("http://localhost:9", 8080, NULL));
	assert_false(http_check_origin("http://evil.example:8080", 8080, NULL));
	assert_false(http_check_origin("http://localhost:8080/x", 8080, NULL));
	assert_false(http_check_origin("null", 8080, NULL));
	assert_false(http_check_origin("file://localhost:8080", 8080, NULL));
	assert_false(http_check_origin("https://app.example", 8080, NULL));
	assert_true(http_check_origin("https://app.example", 8080, extra));
	assert_false(http_check_origin("https://app.example.evil", 8080, extra));
}

/* Accept lists: spaces, parameters, q=0, case. */
static void test_accept(void **state)
{
	(void)state;
	assert_true(http_check_accepts("application/json, text/event-stream", "text/event-stream"));
	assert_true(http_check_accepts("text/event-stream", "text/event-stream"));
	assert_true(http_check_accepts("application/json;q=0.9,Text/Event-Stream ; q=0.5", "text/event-stream"));
	assert_false(http_check_accepts("application/json", "text/event-stream"));
	assert_false(http_check_accepts("*/*", "text/event-stream"));
	assert_false(http_check_accepts("text/event-stream;q=0", "text/event-stream"));
	assert_false(http_check_accepts("text/event-streams", "text/event-stream"));
	assert_false(http_check_accepts("", "text/event-stream"));
	assert_false(http_check_accepts(NULL, "text/event-stream"));
	assert_true(http_check_accepts("text/event-stream;q=0, application/json", "application/json"));
}

/* Content-Type: application/json with or without parameters. */
static void test_content_type(void **state)
{
	(void)state;
	assert_true(http_check_json_type("application/json"));
	assert_true(http_check_json_type("Application/JSON; charset=utf-8"));
	assert_true(http_check_json_type("application/json;charset=utf-8"));
	assert_false(http_check_json_type("application/jsonx"));
	assert_false(http_check_json_type("text/plain"));
	assert_false(http_check_json_type(""));
	assert_false(http_check_json_type(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_host_extra),
		cmocka_unit_test(test_origin),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_content_type),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
