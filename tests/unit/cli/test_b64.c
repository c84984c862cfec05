/*
 * test_b64.c - unit tests for src/cli/b64.c.
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

/* Decodes IN and compares with WANT (N bytes). */
static void expect(const char *in, const char *want, size_t n)
{
	size_t len = 99;
	unsigned char *out = cli_b64_decode(in, &len);
	assert_non_null(out);
	assert_int_equal(len, n);
	assert_memory_equal(out, want, n);
	free(out);
}

static void test_decode(void **state)
{
	(void)state;
	expect("", "", 0);
	expect("Zg==", "f", 1);
	expect("Zm8=", "fo", 2);
	expect("Zm9v", "foo", 3);
	expect("Zm9vYmFy", "foobar", 6);
	expect("Zm9v\nYmFy\r\n", "foobar", 6);   /* line breaks */
	expect("Zg", "f", 1);                     /* no padding */
	expect("__8=", "\xff\xff", 2);            /* URL alphabet */
	expect("//8=", "\xff\xff", 2);
	expect("AAEC", "\x00\x01\x02", 3);        /* bytes, NUL included */
}

static void test_invalid(void **state)
{
	size_t len;
	(void)state;
	assert_null(cli_b64_decode("Zm9v!", &len));
	assert_null(cli_b64_decode("\xc3\xa9", &len));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
