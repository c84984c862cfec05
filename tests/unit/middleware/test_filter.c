/*
 * test_mw_filter.c - unit tests for the "filter" middleware module
 * (src/middleware/filter.c): option validation, nothing started before
 * start, the line sent to the program, every action (pass, pass changed,
 * reply, drop) for requests, notifications and responses, answers out of
 * order and noise, the failure modes when the program answers nonsense,
 * hangs or dies, its restart, and destruction with a message pending.
 *
 * The filter program is a small POSIX shell script written at start-up;
 * messages are walked through pipelines and the default loop is run
 * until the program's answer resumes them.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "mw_test.h"
#include <ev.h>

#include "config.h"
#include "middleware.h"
#include "mw_filter.h"
#include "tmpdir_test.h"

static char script[128];    /* the filter program */
static char linelog[128];   /* where the program appends each line it reads */

static const char SCRIPT[] =
	"#!/bin/sh\n"
	"# test filter: decides by the tool name in each line\n"
	"held=\n"
	"while IFS= read -r line; do\n"
	"  [ -n \"$FILTER_LOG\" ] && printf '%s\\n' \"$line\" >> \"$FILTER_LOG\"\n"
	"  id=${line#'{\"id\":'}; id=${id%%,*}\n"
	"  case \"$line\" in\n"
	"  *'\"kind\":\"response\"'*) printf '{\"id\":%s,\"action\":\"pass\",\"message\":{\"result\":{\"filtered\":true}}}\\n' \"$id\";;\n"
	"  *'\"name\":\"deny\"'*) printf '{\"id\":%s,\"action\":\"drop\",\"reason\":\"not here\"}\\n' \"$id\";;\n"
	"  *'\"name\":\"answer\"'*) printf '{\"id\":%s,\"action\":\"reply\",\"result\":{\"by\":\"filter\"}}\\n' \"$id\";;\n"
	"  *'\"name\":\"fail\"'*) printf '{\"id\":%s,\"action\":\"reply\",\"error\":{\"code\":-1,\"message\":\"nope\"}}\\n' \"$id\";;\n"
	"  *'\"name\":\"change\"'*) printf '{\"id\":%s,\"action\":\"pass\",\"message\":{\"jsonrpc\":\"2.0\",\"id\":999,\"method\":\"evil\",\"params\":{\"name\":\"changed\"}}}\\n' \"$id\";;\n"
	"  *'\"name\":\"broken\"'*) printf '{\"id\":%s,\"action\":\"pass\",\"message\":{\"params\":7}}\\n' \"$id\";;\n"
	"  *'\"name\":\"bad\"'*) printf '{\"id\":%s,\"action\":\"explode\"}\\n' \"$id\";;\n"
	"  *'\"name\":\"noise\"'*) printf 'not json\\n{\"id\":12345,\"action\":\"pass\"}\\n{\"id\":%s,\"action\":\"pass\"}\\n' \"$id\";;\n"
	"  *'\"name\":\"first\"'*) held=$id;;\n"
	"  *'\"name\":\"second\"'*) printf '{\"id\":%s,\"action\":\"drop\"}\\n{\"id\":%s,\"action\":\"pass\"}\\n' \"$id\" \"$held\";;\n"
	"  *'\"name\":\"hang\"'*) ;;\n"
	"  *'\"name\":\"die\"'*) echo 'dying now' >&2; exit 5;;\n"
	"  *'notifications/drop'*) printf '{\"id\":%s,\"action\":\"drop\"}\\n' \"$id\";;\n"
	"  *) printf '{\"id\":%s,\"action\":\"pass\"}\\n' \"$id\";;\n"
	"  esac\n"
	"done\n";

/* ---- helpers ---- */

/* A started pipeline with the test filter and the extra options OPTS. */
static struct pipeline *filter_with(const char *opts)
{
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"filter\",\"command\":\"sh\","
		"\"args\":[\"%s\"],\"env\":{\"FILTER_LOG\":\"%s\"}%s%s}]",
		script, linelog, *opts ? "," : "", opts);
	unlink(linelog);
	return pl;
}

/* Starts walking the message TEXT in direction DIR through PL. */
static void send_dir(struct mwt_run *x, struct pipeline *pl, enum mw_dir dir, const char *text)
{
	mwt_forward(x, pl, &(struct mwt_msg){ .dir = dir, .client = "alice", .backend = "fx",
		.text = text });
}

/* Walks a tools/call of NAME from the client and waits for the verdict. */
static enum mw_verdict call(struct mwt_run *x, struct pipeline *pl, const char *name)
{
	char text[256];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"%s\",\"arguments\":{}}}", name);
	send_dir(x, pl, MW_TO_BACKEND, text);
	mwt_run_until(&x->done, 5.0);
	assert_int_equal(x->done, 1);
	return x->verdict;
}

/* Reads the program's line log (caller frees). */
static char *read_log(void)
{
	FILE *f = fopen(linelog, "rb");
	char *s = calloc(1, 65536);
	assert_non_null(s);
	if (f) {
		size_t n = fread(s, 1, 65535, f);
		s[n] = '\0';
		fclose(f);
	}
	return s;
}

/* ---- options ---- */

/* Valid options are accepted and nothing is started by create(). */
static void test_options_valid(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_buildf(&e, "[{\"use\":\"filter\",\"command\":\"/no/such/program\"},"
		"{\"use\":\"filter\",\"command\":\"${HOME}/x\",\"args\":[\"a\",\"\"],\"env\":{\"K\":\"v\"},"
		"\"cwd\":\"/\",\"timeoutMs\":10,\"failure\":\"open\",\"from\":\"client\","
		"\"responses\":true,\"methods\":[\"tools/*\"],\"restartDelayMs\":0}]");
	for (size_t i = 0; i < e.count; i++)
		print_message("  error: %s\n", e.lines[i]);
	assert_non_null(pl);
	assert_int_equal(e.count, 0);
	pipeline_unref(pl);
	cfg_errors_release(&e);
}

/* Each wrong option is reported at its own path. */
static void test_options_errors(void **state)
{
	(void)state;
	mwt_expect_error("[{\"use\":\"filter\"}]", "t.json: /middleware/0/command: missing");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"\"}]", "/middleware/0/command: must be a non-empty");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"${NO_SUCH_VAR_X}\"}]", "/middleware/0/command: ");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"args\":\"-v\"}]", "/middleware/0/args: must be an array");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"args\":[\"a\",3]}]", "/middleware/0/args/1: must be");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"env\":[]}]", "/middleware/0/env: must be an object");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"env\":{\"A\":1}}]", "/middleware/0/env/A: must be");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"timeoutMs\":0}]", "/middleware/0/timeoutMs: must be a whole number");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"restartDelayMs\":\"1s\"}]", "/middleware/0/restartDelayMs: must be");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"failure\":\"half\"}]", "/middleware/0/failure: must be \"closed\"");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"from\":\"server\"}]", "/middleware/0/from: must be");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"responses\":1}]", "/middleware/0/responses: must be true or false");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"methods\":[]}]", "/middleware/0/methods: empty");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"methods\":[\"[a\"]}]", "/middleware/0/methods/0: unterminated");
	mwt_expect_error("[{\"use\":\"filter\",\"command\":\"x\",\"argv\":[]}]", "/middleware/0/argv: unknown option");
}

/* A program that cannot be started fails the start, with the reason. */
static void test_start_fails(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_buildf(&e, "[{\"use\":\"filter\",\"command\":\"/no/such/program\"}]");
	assert_non_null(pl);
	assert_int_equal(pipeline_start(pl), -1);
	pipeline_unref(pl);
	cfg_errors_release(&e);
}

/* ---- actions ---- */

/* Each action on a request; the line carries direction, kind and context. */
static void test_request_actions(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("");
	struct mwt_run x;
	assert_int_equal(call(&x, pl, "echo"), MW_PASS);
	assert_string_equal(json_string_value(json_object_get(json_object_get(x.got, "params"),
							      "name")), "echo");
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "deny"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_FILTER_REFUSED);
	assert_string_equal(mwt_error_message(&x), "request \"tools/call\" refused by the filter: not here");
	assert_int_equal(json_integer_value(json_object_get(x.got, "id")), 7);
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "answer"), MW_REPLY);
	assert_string_equal(json_string_value(json_object_get(json_object_get(x.got, "result"), "by")),
			    "filter");
	assert_int_equal(json_integer_value(json_object_get(x.got, "id")), 7);
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "fail"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), -1);
	mwt_run_release(&x);
	/* changed: id and method stay the requester's */
	assert_int_equal(call(&x, pl, "change"), MW_PASS);
	assert_int_equal(json_integer_value(json_object_get(x.got, "id")), 7);
	assert_string_equal(json_string_value(json_object_get(x.got, "method")), "tools/call");
	assert_string_equal(json_string_value(json_object_get(json_object_get(x.got, "params"),
							      "name")), "changed");
	mwt_run_release(&x);
	char *log = read_log();
	assert_non_null(strstr(log, "{\"id\":1,\"direction\":\"toBackend\",\"kind\":\"request\","
			       "\"context\":{\"method\":\"tools/call\",\"client\":\"alice\","
			       "\"backend\":\"fx\"},\"message\":{\"jsonrpc\":\"2.0\",\"id\":7,"));
	free(log);
	pipeline_unref(pl);
}

/* Notifications pass or are dropped; "from" and "methods" pick what is sent. */
static void test_notifications_and_selection(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("\"from\":\"client\",\"methods\":[\"notifications/*\",\"tools/call\"]");
	struct mwt_run x;
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/drop\"}");
	mwt_run_until(&x.done, 5.0);
	assert_int_equal(x.verdict, MW_DROP);
	mwt_run_release(&x);
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/keep\","
		 "\"params\":{\"a\":1}}");
	mwt_run_until(&x.done, 5.0);
	assert_int_equal(x.verdict, MW_PASS);
	assert_string_equal(x.method, json_string_value(json_object_get(x.got, "method")));
	mwt_run_release(&x);
	/* not selected: answered at once, never sent */
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	assert_int_equal(x.done, 1);
	mwt_run_release(&x);
	send_dir(&x, pl, MW_TO_CLIENT, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/drop\"}");
	assert_int_equal(x.done, 1);
	assert_int_equal(x.verdict, MW_PASS);
	mwt_run_release(&x);
	char *log = read_log();
	assert_null(strstr(log, "\"ping\""));
	assert_non_null(strstr(log, "\"kind\":\"notification\""));
	assert_null(strstr(log, "toClient"));
	free(log);
	pipeline_unref(pl);
}

/* With "responses": the response goes to the program too, and may change. */
static void test_responses(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("\"responses\":true");
	struct mwt_run x;
	assert_int_equal(call(&x, pl, "echo"), MW_PASS);
	mwt_back(&x, &(struct mwt_msg){
		.text = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"secret\":1}}" });
	for (double t0 = ev_time(); x.done < 2 && ev_time() < t0 + 5.0;)
		mwt_run_for(0.01);
	assert_int_equal(x.done, 2);
	assert_true(json_is_true(json_object_get(json_object_get(x.got, "result"), "filtered")));
	assert_null(json_object_get(json_object_get(x.got, "result"), "secret"));
	assert_int_equal(json_integer_value(json_object_get(x.got, "id")), 7);
	mwt_run_release(&x);
	char *log = read_log();
	assert_non_null(strstr(log, "\"direction\":\"toClient\",\"kind\":\"response\""));
	free(log);
	pipeline_unref(pl);
}

/* Answers are matched by id, not order; noise and strangers are ignored. */
static void test_out_of_order_and_noise(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("");
	struct mwt_run a, b;
	send_dir(&a, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"first\"}}");
	send_dir(&b, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"second\"}}");
	mwt_run_until(&a.done, 5.0);
	mwt_run_until(&b.done, 5.0);
	assert_int_equal(a.verdict, MW_PASS);
	assert_int_equal(b.verdict, MW_REPLY);
	mwt_run_release(&a);
	mwt_run_release(&b);
	assert_int_equal(call(&a, pl, "noise"), MW_PASS);
	mwt_run_release(&a);
	pipeline_unref(pl);
}

/* ---- failure ---- */

/* Nonsense answers get the failure mode: closed refuses, open passes. */
static void test_bad_answers(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("");
	struct mwt_run x;
	assert_int_equal(call(&x, pl, "bad"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_FILTER_UNAVAILABLE);
	assert_non_null(strstr(mwt_error_message(&x), "invalid action or message"));
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "broken"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_FILTER_UNAVAILABLE);
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "echo"), MW_PASS);   /* still running */
	mwt_run_release(&x);
	pipeline_unref(pl);
	pl = filter_with("\"failure\":\"open\"");
	assert_int_equal(call(&x, pl, "bad"), MW_PASS);
	assert_string_equal(json_string_value(json_object_get(json_object_get(x.got, "params"),
							      "name")), "bad");
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* A program that misses the deadline is stopped and restarted. */
static void test_hang_and_restart(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("\"timeoutMs\":100,\"restartDelayMs\":50");
	struct mwt_run x;
	assert_int_equal(call(&x, pl, "hang"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_FILTER_UNAVAILABLE);
	assert_non_null(strstr(mwt_error_message(&x), "did not answer within 0.1 s"));
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "echo"), MW_REPLY);   /* down: no waiting */
	assert_non_null(strstr(mwt_error_message(&x), "not running"));
	mwt_run_release(&x);
	mwt_run_for(0.5);                                    /* reaped, restarted */
	assert_int_equal(call(&x, pl, "echo"), MW_PASS);
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* A program that dies: pending and later messages get the failure mode. */
static void test_death(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("\"restartDelayMs\":100000,\"failure\":\"open\"");
	struct mwt_run x;
	assert_int_equal(call(&x, pl, "die"), MW_PASS);
	mwt_run_release(&x);
	mwt_run_for(0.2);
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/drop\"}");
	assert_int_equal(x.done, 1);
	assert_int_equal(x.verdict, MW_PASS);
	mwt_run_release(&x);
	pipeline_unref(pl);
	pl = filter_with("\"restartDelayMs\":100000");
	assert_int_equal(call(&x, pl, "die"), MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_FILTER_UNAVAILABLE);
	mwt_run_release(&x);
	mwt_run_for(0.2);
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/keep\"}");
	assert_int_equal(x.done, 1);
	assert_int_equal(x.verdict, MW_DROP);
	mwt_run_release(&x);
	assert_int_equal(call(&x, pl, "echo"), MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&x), "exited with status 5"));
	mwt_run_release(&x);
	pipeline_unref(pl);
}

/* Destroying the module with a message pending frees it. */
static void test_destroy_pending(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("");
	struct mwt_run x;
	send_dir(&x, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"hang\"}}");
	mwt_run_for(0.1);
	assert_int_equal(x.done, 0);
	pipeline_unref(pl);
	mwt_run_for(0.1);
	mwt_run_release(&x);
}

/*
 * A request cancelled while the program decides is forgotten at once
 * (on_cancel): it is never resumed, and the program's late answer for it
 * is ignored.
 */
static void test_cancel_pending(void **state)
{
	(void)state;
	struct pipeline *pl = filter_with("");
	struct mwt_run a, b;
	send_dir(&a, pl, MW_TO_BACKEND, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"first\"}}");    /* the program holds it */
	mwt_run_for(0.1);
	assert_int_equal(a.done, 0);
	assert_true(mw_walk_cancel(&a.w));
	assert_null(a.m.tree);
	/* "second" makes the program answer it, then the held one */
	assert_int_equal(call(&b, pl, "second"), MW_REPLY);   /* refused: dropped by the program */
	mwt_run_for(0.1);
	assert_int_equal(a.done, 0);               /* never resumed */
	mwt_run_release(&b);
	assert_int_equal(call(&b, pl, "other"), MW_PASS);   /* and the filter works on */
	mwt_run_end(&b);
	mwt_run_release(&a);
	pipeline_unref(pl);
}

/* Writes the filter script into a fresh temporary directory. */
static int setup(void **state)
{
	if (tmpd_setup(state) < 0)
		return -1;
	tmpd_path(script, sizeof script, "filter.sh");
	tmpd_path(linelog, sizeof linelog, "lines.jsonl");
	FILE *f = fopen(script, "w");
	if (!f)
		return -1;
	fputs(SCRIPT, f);
	fclose(f);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Runs the tests. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_valid),
		cmocka_unit_test(test_options_errors),
		cmocka_unit_test(test_start_fails),
		cmocka_unit_test(test_request_actions),
		cmocka_unit_test(test_notifications_and_selection),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_out_of_order_and_noise),
		cmocka_unit_test(test_bad_answers),
		cmocka_unit_test(test_hang_and_restart),
		cmocka_unit_test(test_death),
		cmocka_unit_test(test_destroy_pending),
		cmocka_unit_test(test_cancel_pending),
	};
	return cmocka_run_group_tests(tests, setup, tmpd_teardown);
}
