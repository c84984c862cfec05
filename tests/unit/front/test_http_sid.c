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

static const unsigned char KEYS[2][32] = {
	{ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 },
	{ 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
	  9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9 },
};

/* A sealed id: the tag, then a box only these keys open, which carries
 * what was sealed; refused when altered, of other keys, or expired; keys
 * rotate (an id sealed with the old first key opens once it is second). */
static void test_sealed(void **state)
{
	(void)state;
	struct http_sid_keys k = { .keys = KEYS, .nkeys = 2, .tag = "a-1", .max_age = 60 };
	json_t *st = json_pack("{s:{s:s},s:s}", "p", "protocolVersion", "2025-06-18", "s", "ab");
	char *sid = http_sid_seal(&k, st, 1000);
	assert_non_null(sid);
	assert_true(strncmp(sid, "a-1.", 4) == 0);
	assert_true(http_sid_valid(sid));
	size_t tl = 0;
	assert_true(http_sid_sealed(sid, &tl));
	assert_int_equal(tl, 3);
	for (const char *p = sid; *p; p++)
		assert_true(*p > 0x20 && *p < 0x7f);   /* visible ASCII */
	const char *why = NULL;
	json_t *back = http_sid_open(&k, sid, 1030, &why);
	assert_non_null(back);
	assert_string_equal(json_string_value(json_object_get(json_object_get(back, "p"),
							      "protocolVersion")), "2025-06-18");
	assert_int_equal(json_integer_value(json_object_get(back, "t")), 1000);
	json_decref(back);
	/* expired, or made in the future */
	assert_null(http_sid_open(&k, sid, 1061, &why));
	assert_string_equal(why, "it has expired");
	assert_null(http_sid_open(&k, sid, 100, &why));
	/* another deployment's keys */
	struct http_sid_keys other = { .keys = KEYS + 1, .nkeys = 1, .tag = "a-1", .max_age = 60 };
	assert_null(http_sid_open(&other, sid, 1001, &why));
	/* rotation: the old key second still opens it */
	const unsigned char rot[2][32] = { { 7 }, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
		16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 } };
	struct http_sid_keys rotated = { .keys = rot, .nkeys = 2, .tag = "b", .max_age = 60 };
	back = http_sid_open(&rotated, sid, 1001, &why);
	assert_non_null(back);
	json_decref(back);
	/* any byte altered */
	size_t n = strlen(sid);
	char *bad = strdup(sid);
	bad[n - 5] = bad[n - 5] == 'A' ? 'B' : 'A';
	assert_null(http_sid_open(&k, bad, 1001, &why));
	free(bad);
	assert_false(http_sid_valid("a.b c"));
	assert_false(http_sid_valid(".abc"));
	assert_false(http_sid_valid("abc."));
	assert_null(http_sid_open(&k, "0123456789abcdef0123456789abcdef", 1001, &why));
	free(sid);
	/* too much to carry: no id */
	json_t *big = json_object();
	char *blob = calloc(1, HTTP_SID_MAX);
	memset(blob, 'x', HTTP_SID_MAX - 1);
	json_object_set_new(big, "p", json_string(blob));
	assert_null(http_sid_seal(&k, big, 1000));
	free(blob);
	json_decref(big);
	json_decref(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sid),
		cmocka_unit_test(test_sealed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
