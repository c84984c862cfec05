/*
 * test_redact.c - unit tests for src/core/redact.c: the "redact" option
 * and its errors, and redaction of a line: keys inside bodies (and inside
 * body strings holding a JSON document), patterns in every string and in
 * member names inside bodies, the replacement taken literally and growing
 * the text, and a string that cannot be checked replaced whole.
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

#include "cfg_test.h"
#include "config.h"
#include "middleware.h"
#include "redact.h"

/* ---- helpers ---- */

/* TEXT parsed as JSON, failing the test when it is not (new reference). */
static json_t *J(const char *text)
{
	json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
	if (!j)
		fail_msg("not JSON: %s", text);
	return j;
}

/* Parses the "redact" option OPT (JSON text; NULL: absent) into *R;
 * returns redact_parse's result, errors in E. */
static int parse(const char *opt, struct redact **r, struct cfg_errors *e)
{
	struct mw_build b = { .file = "t.json", .path = "/middleware/0", .errs = e };
	json_t *j = opt ? J(opt) : NULL;
	int rc = redact_parse(j, &b, r);
	json_decref(j);
	assert_int_equal(b.nerr, (int)e->count);
	return rc;
}

/* Rules from OPT, which must parse and have something to do. */
static struct redact *rules(const char *opt)
{
	struct cfg_errors e = { 0 };
	struct redact *r = NULL;
	assert_int_equal(parse(opt, &r, &e), 0);
	assert_int_equal(e.count, 0);
	assert_non_null(r);
	return r;
}

/* Asserts that OPT does not parse, with an error line starting with WANT. */
static void expect_error(const char *opt, const char *want)
{
	struct cfg_errors e = { 0 };
	struct redact *r = (struct redact *)&e;   /* must become NULL */
	assert_int_equal(parse(opt, &r, &e), -1);
	assert_null(r);
	if (!cfgt_has_error_prefix(&e, want))
		fail_msg("no error \"%s\" (got: %s)", want, e.count ? e.lines[0] : "none");
	cfg_errors_release(&e);
}

/* Redacts the line LINE (JSON text) with R; asserts the result is WANT. */
static void expect_redacted(const struct redact *r, const char *line, const char *want)
{
	json_t *l = J(line), *w = J(want);
	redact_line(r, l);
	if (!json_equal(l, w)) {
		char *got = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS);
		fail_msg("redacted: %s", got);
	}
	json_decref(l);
	json_decref(w);
}

/* ---- the option ---- */

/* Nothing to redact gives no rules and no error. */
static void test_parse_nothing(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct redact *r = (struct redact *)&e;
	assert_int_equal(parse(NULL, &r, &e), 0);
	assert_null(r);
	r = (struct redact *)&e;
	assert_int_equal(parse("{}", &r, &e), 0);
	assert_null(r);
	assert_int_equal(parse("{\"replacement\":\"x\",\"keys\":[],\"patterns\":[]}", &r, &e), 0);
	assert_null(r);
	assert_int_equal(e.count, 0);
	redact_free(NULL);
}

/* Each wrong option is reported at its own path; all of them. */
static void test_parse_errors(void **state)
{
	(void)state;
	expect_error("[]", "t.json: /middleware/0/redact: must be an object");
	expect_error("{\"key\":[]}", "t.json: /middleware/0/redact/key: unknown option");
	expect_error("{\"keys\":\"password\"}", "t.json: /middleware/0/redact/keys: must be an array");
	expect_error("{\"keys\":[\"a\",\"\"]}", "t.json: /middleware/0/redact/keys/1: must be a non-empty string");
	expect_error("{\"patterns\":[\"ok\",\"(unclosed\"]}",
		     "t.json: /middleware/0/redact/patterns/1: does not compile at offset");
	expect_error("{\"patterns\":[\"x*\"]}", "t.json: /middleware/0/redact/patterns/0: matches the empty string");
	expect_error("{\"patterns\":[\"x\"],\"replacement\":1}", "t.json: /middleware/0/redact/replacement: must be a string");

	struct cfg_errors e = { 0 };
	struct redact *r;
	assert_int_equal(parse("{\"keys\":[1,2],\"patterns\":[\"(\",\"ok\",\"a?\"],\"zz\":0,"
			       "\"replacement\":[]}", &r, &e), -1);
	assert_null(r);
	assert_int_equal(e.count, 6);
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/keys/0:"));
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/keys/1:"));
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/patterns/0: does not compile"));
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/patterns/2: matches the empty string"));
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/zz: unknown option"));
	assert_true(cfgt_has_error_prefix(&e, "t.json: /middleware/0/redact/replacement: must be a string"));
	cfg_errors_release(&e);
}

/* ---- keys ---- */

/* Keys replace members inside bodies only, whatever their case. */
static void test_keys(void **state)
{
	(void)state;
	struct redact *r = rules("{\"keys\":[\"password\",\"token\"]}");
	expect_redacted(r,
		"{\"client\":\"c\",\"token\":\"top\",\"params\":{\"user\":\"bob\",\"Password\":\"pw\","
		"\"deep\":[{\"a\":{\"TOKEN\":{\"nested\":1}}}],\"n\":7},"
		"\"result\":{\"token\":[1,2]},\"error\":{\"data\":{\"password\":null}}}",
		"{\"client\":\"c\",\"token\":\"top\",\"params\":{\"user\":\"bob\",\"Password\":\"[REDACTED]\","
		"\"deep\":[{\"a\":{\"TOKEN\":\"[REDACTED]\"}}],\"n\":7},"
		"\"result\":{\"token\":\"[REDACTED]\"},\"error\":{\"data\":{\"password\":\"[REDACTED]\"}}}");
	redact_free(r);
}

/* A body string holding a JSON document: keys apply inside it, and it is
 * written again only when something changed. */
static void test_keys_in_embedded_json(void **state)
{
	(void)state;
	struct redact *r = rules("{\"keys\":[\"password\"],\"replacement\":\"<x>\"}");
	expect_redacted(r,
		"{\"result\":{\"content\":[{\"text\":\" \\n{\\\"password\\\": \\\"pw\\\", \\\"ok\\\": true}\"},"
		"{\"text\":\"[ {\\\"a\\\": 1} ]\"},{\"text\":\"{not json, password}\"},"
		"{\"text\":\"plain password\"}]},\"name\":\"{\\\"password\\\":1}\"}",
		"{\"result\":{\"content\":[{\"text\":\"{\\\"password\\\":\\\"<x>\\\",\\\"ok\\\":true}\"},"
		"{\"text\":\"[ {\\\"a\\\": 1} ]\"},{\"text\":\"{not json, password}\"},"
		"{\"text\":\"plain password\"}]},\"name\":\"{\\\"password\\\":1}\"}");
	redact_free(r);
}

/* ---- patterns ---- */

/* Patterns apply to every string, and to member names inside bodies. */
static void test_patterns(void **state)
{
	(void)state;
	struct redact *r = rules("{\"patterns\":[\"sk-[A-Za-z0-9]{8,}\"]}");
	expect_redacted(r,
		"{\"id\":\"sk-ABCDEFGH12\",\"name\":\"login sk-ABCDEFGH12\",\"sk-ABCDEFGH99\":\"top\","
		"\"params\":{\"note\":\"use sk-ABCDEFGH12 or sk-ZZZZZZZZ please\",\"sk-ABCDEFGH12\":\"v\","
		"\"short\":\"sk-ABC\",\"n\":12},\"result\":[\"sk-QQQQQQQQ\"]}",
		"{\"id\":\"[REDACTED]\",\"name\":\"login [REDACTED]\",\"sk-ABCDEFGH99\":\"top\","
		"\"params\":{\"note\":\"use [REDACTED] or [REDACTED] please\",\"[REDACTED]\":\"v\","
		"\"short\":\"sk-ABC\",\"n\":12},\"result\":[\"[REDACTED]\"]}");
	redact_free(r);
}

/* Patterns run in order, each on what the one before left; the
 * replacement is literal and may make the text grow. */
static void test_patterns_in_order_literal(void **state)
{
	(void)state;
	struct redact *r = rules("{\"patterns\":[\"(a)b\"],\"replacement\":\"$1-LONGER-THAN-AB\"}");
	expect_redacted(r, "{\"name\":\"ab ab ab ab ab ab ab ab ab ab\"}",
		"{\"name\":\"$1-LONGER-THAN-AB $1-LONGER-THAN-AB $1-LONGER-THAN-AB $1-LONGER-THAN-AB "
		"$1-LONGER-THAN-AB $1-LONGER-THAN-AB $1-LONGER-THAN-AB $1-LONGER-THAN-AB "
		"$1-LONGER-THAN-AB $1-LONGER-THAN-AB\"}");
	redact_free(r);
	/* the second pattern sees the first one's output */
	r = rules("{\"patterns\":[\"secret\",\"\\\\[REDACTED\\\\] \\\\d+\"]}");
	expect_redacted(r, "{\"name\":\"secret 42, 42\"}", "{\"name\":\"[REDACTED], 42\"}");
	redact_free(r);
}

/* A string the pattern cannot be run over is replaced whole. */
static void test_fails_closed(void **state)
{
	(void)state;
	struct redact *r = rules("{\"patterns\":[\"^(\\\\w+\\\\s?)+$\"],\"replacement\":\"<gone>\"}");
	char line[256], text[80];
	memset(text, 'a', 60);
	strcpy(text + 60, "!");
	snprintf(line, sizeof line, "{\"name\":\"%s\",\"method\":\"word\"}", text);
	expect_redacted(r, line, "{\"name\":\"<gone>\",\"method\":\"<gone>\"}");
	redact_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_nothing),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_keys_in_embedded_json),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_patterns_in_order_literal),
		cmocka_unit_test(test_fails_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
