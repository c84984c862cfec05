/*
 * test_glob.c - unit tests for src/middleware/glob.c: wildcard matching
 * (stars, "?" as one UTF-8 character, byte classes, escapes, long
 * inputs), pattern syntax checks, and pattern lists parsed from options
 * with their errors reported at the option's path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mw_test.h"

#include "config.h"
#include "glob_match.h"
#include "middleware.h"

/* ---- glob ---- */

/* Globs: stars, ?, classes, escapes, UTF-8, long inputs. */
static void test_glob_match(void **state)
{
	(void)state;
	assert_true(glob_match("*", ""));
	assert_true(glob_match("*", "anything/at all"));
	assert_true(glob_match("read_*", "read_"));
	assert_true(glob_match("read_*", "read_file"));
	assert_false(glob_match("read_*", "xread_file"));
	assert_false(glob_match("read_*", "read"));
	assert_true(glob_match("*_file", "write_file"));
	assert_false(glob_match("*_file", "write_files"));
	assert_true(glob_match("a*b*c", "axxbyybzc"));
	assert_true(glob_match("*a*b", "xaxxab"));
	assert_false(glob_match("*a*b", "xaxxa"));
	assert_true(glob_match("a**b", "ab"));
	assert_true(glob_match("a?c", "abc"));
	assert_true(glob_match("a?c", "a\xc3\xa9" "c"));  /* ? is one UTF-8 character */
	assert_false(glob_match("a?c", "ac"));
	assert_false(glob_match("a?", "a"));
	assert_true(glob_match("[a-c]x", "bx"));
	assert_false(glob_match("[a-c]x", "dx"));
	assert_true(glob_match("[!a-c]x", "dx"));
	assert_false(glob_match("[^a-c]x", "ax"));
	assert_true(glob_match("[]]", "]"));
	assert_true(glob_match("[a-]", "-"));
	assert_true(glob_match("\\*", "*"));
	assert_false(glob_match("\\*", "x"));
	assert_true(glob_match("file:///tmp/*", "file:///tmp/a/b.txt"));
	assert_false(glob_match("exact", "exactly"));
	assert_false(glob_match("exact", "exac"));
	assert_true(glob_match("", ""));
	assert_false(glob_match(NULL, "x"));
	assert_false(glob_match("x", NULL));
	/* long inputs: no exponential blow-up */
	char s[4001];
	memset(s, 'a', 4000);
	s[4000] = '\0';
	assert_false(glob_match("*a*a*a*a*a*b", s));
	assert_true(glob_match("*a*a*a*a*a*", s));
}

/* Pattern syntax errors are named. */
static void test_glob_check(void **state)
{
	(void)state;
	assert_null(glob_check("read_*"));
	assert_null(glob_check("[abc]?\\*"));
	assert_string_equal(glob_check(""), "empty pattern");
	assert_string_equal(glob_check("a["), "unterminated [...]");
	assert_string_equal(glob_check("[]"), "unterminated [...]");
	assert_string_equal(glob_check("a\\"), "trailing backslash");
}

/* Classes hold bytes; escapes inside them; an unterminated "[" is literal. */
static void test_glob_match_bytes_and_escapes(void **state)
{
	(void)state;
	assert_true(glob_match("[\\]]x", "]x"));
	assert_true(glob_match("[a\\-z]", "-"));
	assert_false(glob_match("[a\\-z]", "m"));
	assert_true(glob_match("[!]]", "a"));
	assert_false(glob_match("[!]]", "]"));
	assert_true(glob_match("a[", "a["));   /* not a class: the "[" itself */
	assert_false(glob_match("a[", "ab"));
	assert_false(glob_match("A", "a"));    /* case matters */
	/* a class takes one byte, not one character */
	assert_false(glob_match("[\xc3\xa9]", "\xc3\xa9"));
	assert_true(glob_match("[\xc3][\xa9]", "\xc3\xa9"));
	/* "?" and "*" step over whole characters, and over stray bytes one by one */
	assert_true(glob_match("?", "\xf0\x9f\x98\x80"));
	assert_false(glob_match("??", "\xf0\x9f\x98\x80"));
	assert_true(glob_match("??", "\xff\xfe"));
	assert_true(glob_match("?b", "\xc3" "b"));   /* a lead byte without its tail */
	assert_false(glob_match("*\xa9", "\xc3\xa9"));   /* no stop inside a character */
	assert_true(glob_match("*\xc3\xa9", "x\xc3\xa9"));
}

/* More syntax: escapes and classes that look unterminated. */
static void test_glob_check_more(void **state)
{
	(void)state;
	assert_null(glob_check("\\["));
	assert_null(glob_check("[\\]]"));
	assert_null(glob_check("[]]"));
	assert_null(glob_check("\\\\"));
	assert_null(glob_check("*"));
	assert_string_equal(glob_check("[!]"), "unterminated [...]");
	assert_string_equal(glob_check("[\\]"), "unterminated [...]");
	assert_string_equal(glob_check("ok[a-z]\\"), "trailing backslash");
	assert_string_equal(glob_check(NULL), "empty pattern");
}

/* Parses V (JSON text) at KEY into L; returns glob_list_parse's result and
 * leaves the errors in E. */
static int parse(const char *v, struct glob_list *l, struct cfg_errors *e)
{
	struct mw_build b = { .file = "t.json", .path = "/middleware/0", .errs = e };
	json_t *j = mwt_json(v);
	int rc = glob_list_parse(&b, "/tools", j, l);
	json_decref(j);
	assert_int_equal(b.nerr, (int)e->count);
	return rc;
}

/* A pattern or an array of them; a list matches when one does. */
static void test_list(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct glob_list l;
	assert_int_equal(parse("\"read_*\"", &l, &e), 0);
	assert_int_equal(l.n, 1);
	assert_true(glob_list_match(&l, "read_file"));
	assert_false(glob_list_match(&l, "write_file"));
	assert_false(glob_list_match(&l, NULL));
	glob_list_release(&l);
	assert_null(l.v);
	assert_int_equal(l.n, 0);

	assert_int_equal(parse("[\"read_*\",\"ping\",\"[ab]?\"]", &l, &e), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.v[1], "ping");
	assert_true(glob_list_match(&l, "ping"));
	assert_true(glob_list_match(&l, "bz"));
	assert_false(glob_list_match(&l, "pong"));
	glob_list_release(&l);

	/* an empty array matches nothing */
	assert_int_equal(parse("[]", &l, &e), 0);
	assert_int_equal(l.n, 0);
	assert_false(glob_list_match(&l, ""));
	glob_list_release(&l);
	assert_int_equal(e.count, 0);
}

/* Every bad pattern is reported at its own path; the list is left empty. */
static void test_list_errors(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct glob_list l;
	assert_int_equal(parse("{\"a\":1}", &l, &e), -1);
	assert_null(l.v);
	assert_int_equal(l.n, 0);
	assert_true(mwt_has_error(&e, "t.json: /middleware/0/tools: must be a pattern or an array of patterns"));
	cfg_errors_release(&e);

	assert_int_equal(parse("\"a[\"", &l, &e), -1);
	assert_true(mwt_has_error(&e, "/middleware/0/tools: unterminated [...]"));
	assert_null(l.v);
	cfg_errors_release(&e);

	assert_int_equal(parse("[\"ok\",3,\"\",\"x\\\\\",\"fine\"]", &l, &e), -1);
	assert_int_equal(e.count, 3);
	assert_true(mwt_has_error(&e, "/middleware/0/tools/1: must be a string"));
	assert_true(mwt_has_error(&e, "/middleware/0/tools/2: empty pattern"));
	assert_true(mwt_has_error(&e, "/middleware/0/tools/3: trailing backslash"));
	assert_null(l.v);
	assert_int_equal(l.n, 0);
	cfg_errors_release(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_match),
		cmocka_unit_test(test_glob_check),
		cmocka_unit_test(test_glob_match_bytes_and_escapes),
		cmocka_unit_test(test_glob_check_more),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_list_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
