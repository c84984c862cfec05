/*
 * test_rewrite_result.c - unit tests for src/middleware/rewrite_result.c:
 * the "rewrite" module's "results" patterns (PCRE2, replaced in the text
 * a client gets; a failing pattern withholds the text) and the
 * "maxResultBytes" cap. The functions are called directly first
 * (rw_results_parse / rw_results_apply), then through the module as the
 * chain walks a call and its result.
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
#include "log.h"
#include "middleware.h"
#include "src/middleware/rewrite_int.h"
#include "rpc.h"

/* ---- helpers ---- */

/* Parses the options OPTS (JSON object text) into RS; returns the number of errors. */
static int parse(const char *opts, struct rw_results *rs, struct cfg_errors *errs)
{
	json_t *o = mwt_json(opts);
	struct mw_build b = { .file = "t.json", .path = "/middleware/0", .errs = errs };
	memset(rs, 0, sizeof *rs);
	rw_results_parse(&b, o, rs);
	json_decref(o);   /* RS keeps nothing of the options */
	return b.nerr;
}

/* ---- options ---- */

/* Every bad "results" or "maxResultBytes" option is reported at its path. */
static void test_option_errors(void **state)
{
	(void)state;
	mwt_expect_module_error("rewrite", "\"results\":{}", "/middleware/0/results: must be an array");
	mwt_expect_module_error("rewrite", "\"results\":[1]", "/results/0: must be an object");
	mwt_expect_module_error("rewrite", "\"results\":[{\"replace\":\"x\"}]", "/results/0/pattern: must be a non-empty string");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"(a\"}]", "/results/0/pattern: does not compile at offset 2");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"a\",\"with\":\"b\"}]", "/results/0/with: unknown option");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"x*\"}]", "/results/0/pattern: matches the empty string");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"a\",\"replace\":7}]", "/results/0/replace: must be a string");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"(a)\",\"replace\":\"$2\"}]",
			     "/results/0/replace: \"$2\" names no group of the pattern");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"(?<n>a)\",\"replace\":\"${m}\"}]",
			     "/results/0/replace: \"$m\" names no group");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"a\",\"replace\":\"US$ 5\"}]",
			     "/results/0/replace: a lone \"$\"");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"(a)\",\"replace\":\"${1\"}]",
			     "/results/0/replace: \"${\" without its \"}\"");
	mwt_expect_module_error("rewrite", "\"results\":[{\"pattern\":\"a\",\"tools\":[\"[\"]}]",
			     "/results/0/tools/0: unterminated");
	mwt_expect_module_error("rewrite", "\"maxResultBytes\":0", "/middleware/0/maxResultBytes: must be a positive integer");
	mwt_expect_module_error("rewrite", "\"maxResultBytes\":\"10\"", "/maxResultBytes: must be a positive integer");
	mwt_expect_module_error("rewrite", "\"maxResultBytes\":1.5", "/maxResultBytes: must be a positive integer");

	/* every problem at once, each at its own path; nothing kept */
	struct cfg_errors errs = { 0 };
	struct rw_results rs;
	assert_int_equal(parse("{\"results\":[{\"pattern\":\"(\"},{\"pattern\":\"\"},"
			       "{\"pattern\":\"ok\"}],\"maxResultBytes\":-1}", &rs, &errs), 3);
	assert_int_equal(errs.count, 3);
	assert_non_null(strstr(errs.lines[0], "t.json: /middleware/0/results/0/pattern"));
	assert_non_null(strstr(errs.lines[1], "/results/1/pattern"));
	assert_non_null(strstr(errs.lines[2], "/maxResultBytes: must be a positive integer"));
	assert_int_equal(rs.max_result, 0);
	rw_results_release(&rs);
	cfg_errors_release(&errs);
}

/* ---- called directly ---- */

/* Nothing asked: nothing to do, and a response is left as it is. */
static void test_direct_inactive(void **state)
{
	(void)state;
	struct cfg_errors errs = { 0 };
	struct rw_results rs;
	assert_int_equal(parse("{}", &rs, &errs), 0);
	assert_false(rw_results_active(&rs));
	json_t *msg = mwt_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":"
			       "[{\"type\":\"text\",\"text\":\"a@b.cd\"}]}}");
	json_t *copy = json_deep_copy(msg);
	rw_results_apply(&rs, "t", msg, 0);
	assert_true(json_equal(msg, copy));
	json_decref(copy);
	json_decref(msg);
	rw_results_release(&rs);

	assert_int_equal(parse("{\"maxResultBytes\":5}", &rs, &errs), 0);
	assert_true(rw_results_active(&rs));
	assert_int_equal(rs.max_result, 5);
	rw_results_release(&rs);
	assert_int_equal(parse("{\"results\":[{\"pattern\":\"a\"}]}", &rs, &errs), 0);
	assert_true(rw_results_active(&rs));
	assert_int_equal(rs.nrules, 1);
	rw_results_release(&rs);
	assert_int_equal(errs.count, 0);
}

/* Rules in order, group references, the default replacement, tool globs. */
static void test_direct_apply(void **state)
{
	(void)state;
	struct cfg_errors errs = { 0 };
	struct rw_results rs;
	assert_int_equal(parse("{\"results\":["
		"{\"pattern\":\"(?<k>key)=(\\\\w+)\",\"replace\":\"${k}=<$2:$$>\"},"
		"{\"pattern\":\"<abc\"},"   /* runs on the first rule's output */
		"{\"pattern\":\"secret\",\"replace\":\"S\",\"tools\":[\"db_*\"]}]}",
		&rs, &errs), 0);
	rw_results_start(&rs);   /* JIT when there is one; the same results */
	json_t *msg = mwt_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":"
			       "[{\"type\":\"text\",\"text\":\"key=abc secret\"}]}}");
	rw_results_apply(&rs, "fs_read", msg, 0);
	assert_string_equal(mwt_str_at(msg, "result.content.0.text"), "key=[redacted]:$> secret");
	json_decref(msg);

	msg = mwt_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":"
		       "[{\"type\":\"text\",\"text\":\"a secret, another secret\"}]}}");
	rw_results_apply(&rs, "db_query", msg, 0);
	assert_string_equal(mwt_str_at(msg, "result.content.0.text"), "a S, another S");
	json_decref(msg);

	/* no tool known: only the rules for every tool */
	msg = mwt_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,"
		       "\"message\":\"key=zz secret\"}}");
	rw_results_apply(&rs, NULL, msg, 0);
	assert_string_equal(mwt_str_at(msg, "error.message"), "key=<zz:$> secret");
	json_decref(msg);
	rw_results_release(&rs);
	cfg_errors_release(&errs);
}

/* The cap counts the bytes of text a client gets; the wire size spares the count. */
static void test_direct_cap(void **state)
{
	(void)state;
	struct cfg_errors errs = { 0 };
	struct rw_results rs;
	assert_int_equal(parse("{\"maxResultBytes\":4}", &rs, &errs), 0);
	const char *text = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":"
			   "[{\"type\":\"text\",\"text\":\"abcdef\"}]}}";
	json_t *msg = mwt_json(text);
	rw_results_apply(&rs, "t", msg, 3);   /* said to be 3 bytes on the wire: not measured */
	assert_string_equal(mwt_str_at(msg, "result.content.0.text"), "abcdef");
	json_decref(msg);
	msg = mwt_json(text);
	rw_results_apply(&rs, "t", msg, 0);   /* size unknown: measured and cut */
	assert_string_equal(mwt_str_at(msg, "result.content.0.text"), "abcd");
	assert_non_null(strstr(mwt_str_at(msg, "result.content.1.text"), "truncated: 4 of 6 bytes"));
	json_decref(msg);
	/* an error response has no result to cut */
	msg = mwt_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,"
		       "\"message\":\"a long error message\"}}");
	rw_results_apply(&rs, "t", msg, 0);
	assert_string_equal(mwt_str_at(msg, "error.message"), "a long error message");
	json_decref(msg);
	rw_results_release(&rs);
	cfg_errors_release(&errs);
}

/* ---- through the module ---- */

/* ---- results: patterns ---- */

static const char redact_module[] =
	"[{\"use\":\"rewrite\",\"results\":["
	"{\"pattern\":\"[\\\\w.+-]+@[\\\\w-]+(\\\\.[\\\\w-]+)+\",\"replace\":\"[email]\"},"
	"{\"pattern\":\"(key|token)=(\\\\w+)\",\"replace\":\"$1=***\"},"
	"{\"pattern\":\"internal\",\"tools\":[\"read_*\"]}]}]";

/* Calls TOOL and walks back the result RESULT (JSON text). */
static json_t *call_with_result(struct mwt_run *r, struct pipeline *pl, const char *tool,
				const char *result, size_t wire)
{
	mwt_request(r, pl, "tools/call", json_pack("{s:s}", "name", tool));
	return mwt_respond_msg(r, rpc_result(json_object_get(r->got, "id"), mwt_json(result)), wire);
}

/* Patterns replace in text, resource text, structured content and errors. */
static void test_patterns(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok(redact_module);
	struct mwt_run r;
	json_t *out = call_with_result(&r, pl, "read_file",
		"{\"content\":[{\"type\":\"text\",\"text\":\"mail ann.lee@example.co.uk or b@x.org; key=abc123 internal\"},"
		"{\"type\":\"image\",\"data\":\"a@b.cd\",\"mimeType\":\"image/png\"},"
		"{\"type\":\"resource\",\"resource\":{\"uri\":\"u@v.wx\",\"text\":\"token=zz é@ü.de\"}}],"
		"\"structuredContent\":{\"who\":[\"c@d.ef\",{\"deep\":\"key=1\"}],\"n\":3,\"text\":\"internal\"},"
		"\"type\":\"a@b.cd\"}", 0);
	assert_string_equal(mwt_str_at(out, "result.content.0.text"),
			    "mail [email] or [email]; key=*** [redacted]");
	assert_string_equal(mwt_str_at(out, "result.content.1.data"), "a@b.cd");       /* not text */
	assert_string_equal(mwt_str_at(out, "result.content.2.resource.uri"), "u@v.wx");
	assert_string_equal(mwt_str_at(out, "result.content.2.resource.text"), "token=*** [email]");
	mwt_expect_json(out, "result.structuredContent",
			"{\"who\":[\"[email]\",{\"deep\":\"key=***\"}],\"n\":3,\"text\":\"[redacted]\"}");
	assert_string_equal(mwt_str_at(out, "result.type"), "a@b.cd");                 /* not content */
	mwt_run_release(&r);

	/* a rule limited to some tools; untouched strings stay the same objects */
	mwt_request(&r, pl, "tools/call", json_pack("{s:s}", "name", "other"));
	json_t *res = mwt_json("{\"content\":[{\"type\":\"text\",\"text\":\"internal only\"}]}");
	json_t *text = mwt_at(res, "content.0.text");
	out = mwt_respond_result(&r, res);
	assert_ptr_equal(mwt_at(out, "result.content.0.text"), text);
	assert_string_equal(json_string_value(text), "internal only");
	mwt_run_release(&r);

	/* error messages are redacted too */
	mwt_request(&r, pl, "tools/call", json_pack("{s:s}", "name", "x"));
	out = mwt_respond_msg(&r, rpc_error(json_object_get(r.got, "id"), -32000, "no access for z@z.zz", NULL), 0);
	assert_string_equal(mwt_str_at(out, "error.message"), "no access for [email]");
	mwt_run_release(&r);

	/* other methods are not touched */
	mwt_request(&r, pl, "resources/read", json_pack("{s:s}", "uri", "x"));
	out = mwt_respond_result(&r, mwt_json("{\"contents\":[{\"uri\":\"x\",\"text\":\"a@b.cd\"}]}"));
	assert_string_equal(mwt_str_at(out, "result.contents.0.text"), "a@b.cd");
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* A pattern that runs away is stopped, and the text withheld, not leaked. */
static void test_pattern_failure_withholds(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok("[{\"use\":\"rewrite\",\"results\":[{\"pattern\":\"^(\\\\w+\\\\s?)+$\"}]}]");
	char text[200], result[400];
	memset(text, 'a', 60);
	strcpy(text + 60, "!");
	snprintf(result, sizeof result, "{\"content\":[{\"type\":\"text\",\"text\":\"%s\"}]}", text);
	struct mwt_run r;
	log_set_level(LOG_ERROR);
	json_t *out = call_with_result(&r, pl, "t", result, 0);
	assert_non_null(strstr(mwt_str_at(out, "result.content.0.text"), "withheld"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* ---- results: size cap ---- */

/* Results over the cap are cut, with a marker. */
static void test_size_cap(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok("[{\"use\":\"rewrite\",\"maxResultBytes\":10}]");
	struct mwt_run r;
	/* under the cap: untouched */
	json_t *out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123456789\"}]}", 0);
	mwt_expect_json(out, "result.content", "[{\"type\":\"text\",\"text\":\"0123456789\"}]");
	mwt_run_release(&r);
	/* over it: cut, later items dropped, and a marker says so */
	out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123\"},{\"type\":\"text\",\"text\":\"456789abcdef\"},"
		"{\"type\":\"text\",\"text\":\"ghij\"}],\"isError\":false}", 0);
	json_t *c = mwt_at(out, "result.content");
	assert_int_equal(json_array_size(c), 3);
	assert_string_equal(mwt_str_at(c, "0.text"), "0123");
	assert_string_equal(mwt_str_at(c, "1.text"), "456789");
	assert_string_equal(mwt_str_at(c, "2.type"), "text");
	assert_non_null(strstr(mwt_str_at(c, "2.text"), "truncated: 10 of 20 bytes kept"));
	assert_non_null(strstr(mwt_str_at(c, "2.text"), "limit is 10"));
	assert_true(json_is_false(mwt_at(out, "result.isError")));
	mwt_run_release(&r);
	/* cuts never split a UTF-8 character; binary items are dropped, not cut */
	out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"image\",\"data\":\"QUJDREVGR0hJSktM\",\"mimeType\":\"image/png\"},"
		"{\"type\":\"text\",\"text\":\"abcdefghi\\u00e9\\u00e9\"}]}", 0);
	c = mwt_at(out, "result.content");
	assert_int_equal(json_array_size(c), 2);
	assert_string_equal(mwt_str_at(c, "0.text"), "abcdefghi");
	assert_non_null(strstr(mwt_str_at(c, "1.text"), "truncated: 9 of 29 bytes"));
	mwt_run_release(&r);
	/* structured content that does not fit goes, and the marker says so */
	out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"short\"}],\"structuredContent\":{\"a\":\"bbbbbbbbbbbb\"}}", 0);
	assert_null(mwt_at(out, "result.structuredContent"));
	assert_string_equal(mwt_str_at(out, "result.content.0.text"), "short");
	assert_non_null(strstr(mwt_str_at(out, "result.content.1.text"), "structured content removed"));
	mwt_run_release(&r);
	/* a response whose wire size is within the cap is not even measured */
	out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123456789abc\"}]}", 10);
	assert_string_equal(mwt_str_at(out, "result.content.0.text"), "0123456789abc");
	mwt_run_release(&r);
	out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123456789abc\"}]}", 11);
	assert_string_equal(mwt_str_at(out, "result.content.0.text"), "0123456789");
	mwt_run_release(&r);
	/* errors and results without content */
	out = call_with_result(&r, pl, "t", "{\"structuredContent\":{\"a\":\"bbbbbbbbbbbb\"}}", 0);
	assert_null(mwt_at(out, "result.structuredContent"));
	assert_non_null(strstr(mwt_str_at(out, "result.content.0.text"), "truncated"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

/* Redaction runs before the cap, which counts what the client gets. */
static void test_patterns_then_cap(void **state)
{
	(void)state;
	struct pipeline *pl = mwt_start_ok("[{\"use\":\"rewrite\",\"maxResultBytes\":12,"
					   "\"results\":[{\"pattern\":\"s3cr3t\",\"replace\":\"[a longer marker]\"}]}]");
	struct mwt_run r;
	/* the wire size was small, but the replacement made it grow past the cap */
	json_t *out = call_with_result(&r, pl, "t",
		"{\"content\":[{\"type\":\"text\",\"text\":\"s3cr3t\"}]}", 40);
	assert_string_equal(mwt_str_at(out, "result.content.0.text"), "[a longer ma");
	assert_non_null(strstr(mwt_str_at(out, "result.content.1.text"), "truncated"));
	mwt_run_release(&r);
	pipeline_unref(pl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_option_errors),
		cmocka_unit_test(test_direct_inactive),
		cmocka_unit_test(test_direct_apply),
		cmocka_unit_test(test_direct_cap),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_pattern_failure_withholds),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_patterns_then_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
