/*
 * test_log.c - unit tests for the "log" middleware module
 * (src/middleware/log.c): option validation, the fields of a line,
 * outcomes, cancellation, notifications, the stderr sink, redaction
 * reaching every sink (and the chain hashing the redacted text), which
 * messages the module reads, and the same line whether the message was
 * read or not. The line's text (log_line.c), the sinks (log_sink.c), the
 * hash chain (audit.c) and the core's redaction rules (src/core/redact.c)
 * have their own test files.
 *
 * The module is driven directly: pipelines are built from JSON and
 * messages walked through them by the driver in mw_test.c, as the chain
 * would walk them.
 * Lines are written before the loop waits: the helpers run one loop
 * iteration (lgt_loop_once) where the chain's loop would.
 */
#include <fcntl.h>
#include <setjmp.h>
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

#include "buf.h"
#include "config.h"
#include "middleware.h"
#include "log_test.h"
#include "mw_log.h"
#include "tmpdir_test.h"
#include "src/middleware/log_int.h"

/* ---- helpers ---- */

/* Walks REQ (text; RAW: unparsed) forward through PL as a client request
 * about NAME, the context filled in as the chain does. */
static void begin_request(struct mwt_run *x, struct pipeline *pl, const char *req,
			  const char *name, bool raw)
{
	mwt_walk(x, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .client = "tester", .name = name,
		.start = ev_time() - 0.010, .bytes = 123,
		.text = req, .raw = raw, .unscanned = true });
	assert_int_equal(x->verdict, MW_PASS);
}

/* Walks REQ (text) forward through PL as a client request about NAME. */
static void send_request(struct mwt_run *x, struct pipeline *pl, const char *req, const char *name)
{
	begin_request(x, pl, req, name, false);
}

/* Walks the response RESP (text; RAW: unparsed) back. */
static void back_response(struct mwt_run *x, const char *resp, bool raw)
{
	mwt_back(x, &(struct mwt_msg){ .backend = "fx", .bytes = 456, .text = resp, .raw = raw,
		.unscanned = true });
	assert_int_equal(x->done, 2);
}

/* Walks the response RESP (text) back. */
static void send_response(struct mwt_run *x, const char *resp)
{
	back_response(x, resp, false);
}

/* A whole exchange: request REQ, response RESP; its line is written. */
static void exchange(struct pipeline *pl, const char *req, const char *resp, const char *name)
{
	struct mwt_run x;
	send_request(&x, pl, req, name);
	send_response(&x, resp);
	mwt_run_end(&x);
	lgt_loop_once();
}

/* Walks the notification NOTE (text; RAW: unparsed) through PL from the
 * client, then runs the loop once. */
static void walk_notification(struct pipeline *pl, const char *note, bool raw)
{
	struct mwt_run x;
	mwt_walk(&x, pl, &(struct mwt_msg){ .kind = RPC_NOTIFICATION, .client = "tester",
		.backend = "fx", .start = ev_time(), .text = note, .raw = raw, .unscanned = true });
	assert_null(x.ctx.scratch);
	mwt_run_release(&x);
	lgt_loop_once();
}

/* Walks the notification NOTE (text) through PL from the client. */
static void send_notification(struct pipeline *pl, const char *note)
{
	walk_notification(pl, note, false);
}

static const char REQ_ECHO[] =
	"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
	"\"params\":{\"name\":\"echo\",\"arguments\":{\"x\":1}}}";
static const char RESP_OK[] =
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}";

/* ---- options ---- */

/* Every option accepted in a valid combination. */
static void test_options_valid(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "valid.jsonl");
	struct cfg_errors e = { 0 };
	char text[1024];
	snprintf(text, sizeof text,
		 "[{\"use\":\"log\"},"
		 "{\"use\":\"log\",\"sink\":\"stderr\",\"params\":true,\"result\":false,"
		 " \"notifications\":true,\"methods\":[\"tools/*\",\"ping\"]},"
		 "{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true,"
		 " \"redact\":{\"keys\":[\"password\"],\"patterns\":[\"sk-[A-Za-z0-9]{20,}\"],"
		 " \"replacement\":\"***\"}},"
		 "{\"use\":\"log\",\"sink\":\"syslog\",\"facility\":\"local3\"},"
		 "{\"use\":\"log\",\"redact\":{}}]", p);
	struct pipeline *pl = mwt_build(text, &e);
	assert_non_null(pl);
	assert_int_equal(e.count, 0);
	assert_int_equal(pipeline_size(pl), 5);
	/* create() has no side effects: the file appears only at start */
	assert_int_equal(access(p, F_OK), -1);
	pipeline_unref(pl);
	assert_int_equal(access(p, F_OK), -1);
	cfg_errors_release(&e);
}

/* Each wrong option is reported at its own path. */
static void test_options_errors(void **state)
{
	(void)state;
	mwt_expect_error("[{\"use\":\"log\",\"bogus\":1}]", "t.json: /middleware/0/bogus: unknown option");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"tcp\"}]", "/middleware/0/sink: must be");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":3}]", "/middleware/0/sink: must be");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"file\"}]", "/middleware/0/path: missing");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"\"}]", "/middleware/0/path: must be a non-empty string");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"file\",\"path\":[]}]", "/middleware/0/path: must be");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"${MW_LOG_TEST_UNSET}/a\"}]",
			 "/middleware/0/path: ");
	mwt_expect_error("[{\"use\":\"log\",\"path\":\"/tmp/x\"}]", "/middleware/0/path: only with \"sink\": \"file\"");
	mwt_expect_error("[{\"use\":\"log\",\"chain\":true}]", "/middleware/0/chain: only with \"sink\": \"file\"");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"/tmp/x\",\"chain\":1}]",
			 "/middleware/0/chain: must be true or false");
	mwt_expect_error("[{\"use\":\"log\",\"params\":\"yes\"}]", "/middleware/0/params: must be true or false");
	mwt_expect_error("[{\"use\":\"log\",\"result\":null}]", "/middleware/0/result: must be true or false");
	mwt_expect_error("[{\"use\":\"log\",\"notifications\":0}]", "/middleware/0/notifications: must be true or false");
	mwt_expect_error("[{\"use\":\"log\",\"facility\":\"user\"}]", "/middleware/0/facility: only with \"sink\": \"syslog\"");
	mwt_expect_error("[{\"use\":\"log\",\"sink\":\"syslog\",\"facility\":\"local9\"}]", "/middleware/0/facility: must be one of");
	mwt_expect_error("[{\"use\":\"log\",\"methods\":[]}]", "/middleware/0/methods: must be a non-empty array");
	mwt_expect_error("[{\"use\":\"log\",\"methods\":\"tools/call\"}]", "/middleware/0/methods: must be");
	mwt_expect_error("[{\"use\":\"log\",\"methods\":[\"ping\",2]}]", "/middleware/0/methods/1: must be a non-empty string");
}

/* Several errors in one entry are all reported. */
static void test_options_all_errors_reported(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_build("[{\"use\":\"log\",\"sink\":\"file\",\"params\":1,"
				    "\"redact\":{\"patterns\":[\"(\"]},\"zzz\":0}]", &e);
	assert_null(pl);
	assert_true(mwt_has_error(&e, "/middleware/0/path: missing"));
	assert_true(mwt_has_error(&e, "/middleware/0/params: must be"));
	assert_true(mwt_has_error(&e, "/middleware/0/redact/patterns/0"));
	assert_true(mwt_has_error(&e, "/middleware/0/zzz: unknown option"));
	cfg_errors_release(&e);
}

/* start fails (and says why) when the file cannot be opened. */
static void test_start_fails_on_bad_path(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	char text[512];
	snprintf(text, sizeof text, "[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s/no/such/dir/a.jsonl\"}]", tmpd_dir);
	struct pipeline *pl = mwt_build(text, &e);
	assert_non_null(pl);
	char cap[128];
	tmpd_path(cap, sizeof cap, "stderr-badpath.txt");
	lgt_capture_begin(cap);
	int rc = pipeline_start(pl);
	lgt_capture_end();
	assert_int_equal(rc, -1);
	char *err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "cannot open audit file"));
	free(err);
	pipeline_unref(pl);
}

/* ---- lines ---- */

/* A request/response pair gives one line with every field. */
static void test_line_fields(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "fields.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 1);
	json_t *l = lgt_line_at(s, 0);
	const char *t = json_string_value(json_object_get(l, "time"));
	assert_non_null(t);
	assert_int_equal(strlen(t), 24);   /* 2025-01-31T12:34:56.789Z */
	assert_true(t[4] == '-' && t[10] == 'T' && t[19] == '.' && t[23] == 'Z');
	assert_string_equal(json_string_value(json_object_get(l, "from")), "client");
	assert_string_equal(json_string_value(json_object_get(l, "client")), "tester");
	assert_string_equal(json_string_value(json_object_get(l, "backend")), "fx");
	assert_string_equal(json_string_value(json_object_get(l, "method")), "tools/call");
	assert_string_equal(json_string_value(json_object_get(l, "name")), "echo");
	assert_int_equal(json_integer_value(json_object_get(l, "id")), 7);
	assert_string_equal(json_string_value(json_object_get(l, "outcome")), "ok");
	json_int_t us = json_integer_value(json_object_get(l, "duration_us"));
	assert_true(us >= 10000 && us < 5000000);
	assert_int_equal(json_integer_value(json_object_get(l, "bytes_in")), 123);
	assert_int_equal(json_integer_value(json_object_get(l, "bytes_out")), 456);
	/* bodies only when asked; no code for a success; no chain fields */
	assert_null(json_object_get(l, "params"));
	assert_null(json_object_get(l, "result"));
	assert_null(json_object_get(l, "code"));
	assert_null(json_object_get(l, "prev"));
	assert_null(json_object_get(l, "hash"));
	json_decref(l);
	free(s);
	pipeline_unref(pl);
}

/* Outcomes: JSON-RPC error (code, message cut short), tool error. */
static void test_outcomes(void **state)
{
	(void)state;
	char p[128], resp[1024], longmsg[600];
	tmpd_path(p, sizeof p, "outcomes.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: x\"}}", "x");
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"isError\":true}}", "echo");
	memset(longmsg, 'm', sizeof longmsg - 1);
	longmsg[sizeof longmsg - 1] = '\0';
	snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"%s\"}}", longmsg);
	exchange(pl, REQ_ECHO, resp, "echo");
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 3);
	json_t *a = lgt_line_at(s, 0), *b = lgt_line_at(s, 1), *c = lgt_line_at(s, 2);
	assert_string_equal(json_string_value(json_object_get(a, "outcome")), "error");
	assert_int_equal(json_integer_value(json_object_get(a, "code")), -32602);
	assert_string_equal(json_string_value(json_object_get(a, "message")), "Unknown tool: x");
	assert_string_equal(json_string_value(json_object_get(b, "outcome")), "tool_error");
	assert_null(json_object_get(b, "code"));
	assert_int_equal(json_integer_value(json_object_get(c, "code")), -32000);
	assert_true(json_string_length(json_object_get(c, "message")) < 300);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	free(s);
	pipeline_unref(pl);
}

/* "params" and "result" add the bodies; params are a snapshot. */
static void test_params_and_result(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "bodies.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"params\":true,\"result\":true}]", p);
	struct mwt_run x;
	send_request(&x, pl, REQ_ECHO, "echo");
	/* a later module changes the request in place: the log keeps what it saw */
	json_object_set_new(json_object_get(json_object_get(x.got, "params"), "arguments"),
			    "x", json_integer(99));
	send_response(&x, RESP_OK);
	mwt_run_end(&x);
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,\"message\":\"m\",\"data\":{\"d\":1}}}", "echo");
	char *s = tmpd_slurp(p);
	json_t *a = lgt_line_at(s, 0), *b = lgt_line_at(s, 1);
	json_t *want = json_pack("{s:s,s:{s:i}}", "name", "echo", "arguments", "x", 1);
	assert_true(json_equal(json_object_get(a, "params"), want));
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(json_object_get(a, "result"), "content"), 0), "text")), "hi");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		json_object_get(b, "error"), "data"), "d")), 1);
	json_decref(want);
	json_decref(a);
	json_decref(b);
	free(s);
	pipeline_unref(pl);
}

/* "methods" limits what is logged. */
static void test_methods_filter(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "methods.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"methods\":[\"tools/*\"]}]", p);
	exchange(pl, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", NULL);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	exchange(pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}", NULL);
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 2);
	assert_null(strstr(s, "\"ping\""));
	free(s);
	pipeline_unref(pl);
}

/* Notifications are logged only when asked. */
static void test_notifications(void **state)
{
	(void)state;
	char p1[128], p2[128];
	tmpd_path(p1, sizeof p1, "notes-off.jsonl");
	tmpd_path(p2, sizeof p2, "notes-on.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"},"
					    "{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"notifications\":true,\"params\":true}]", p1, p2);
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\",\"params\":{\"a\":1}}");
	char *s1 = tmpd_slurp(p1), *s2 = tmpd_slurp(p2);
	assert_int_equal(lgt_count_lines(s1), 0);
	assert_int_equal(lgt_count_lines(s2), 1);
	json_t *l = lgt_line_at(s2, 0);
	assert_string_equal(json_string_value(json_object_get(l, "kind")), "notification");
	assert_string_equal(json_string_value(json_object_get(l, "method")), "notifications/roots/list_changed");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(l, "params"), "a")), 1);
	json_decref(l);
	free(s1);
	free(s2);
	pipeline_unref(pl);
}

/* An exchange freed without a response is logged as cancelled. */
static void test_cancelled(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "cancelled.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct mwt_run x, y;
	send_request(&x, pl, REQ_ECHO, "slow");
	send_request(&y, pl, REQ_ECHO, "other");
	/* the client cancels x: the notification passes, the chain frees x */
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}");
	mwt_run_end(&x);
	lgt_loop_once();
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 1);
	json_t *l = lgt_line_at(s, 0);
	assert_string_equal(json_string_value(json_object_get(l, "outcome")), "cancelled");
	assert_string_equal(json_string_value(json_object_get(l, "name")), "slow");
	assert_int_equal(json_integer_value(json_object_get(l, "bytes_out")), 0);
	json_decref(l);
	free(s);
	/* y still open: finishes normally */
	send_response(&y, RESP_OK);
	mwt_run_end(&y);
	lgt_loop_once();
	s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 2);
	free(s);
	pipeline_unref(pl);
}

/* An exchange left behind (its client went away) is written as cancelled. */
static void test_abandoned_written_at_destroy(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "abandoned.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct mwt_run x;
	send_request(&x, pl, REQ_ECHO, "gone");
	mwt_run_end(&x);
	pipeline_unref(pl);
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 1);
	assert_non_null(strstr(s, "\"outcome\":\"cancelled\""));
	free(s);
}

/* The stderr sink writes the same line to fd 2. */
static void test_stderr_sink(void **state)
{
	(void)state;
	char cap[128];
	tmpd_path(cap, sizeof cap, "stderr-sink.txt");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\"}]");
	lgt_capture_begin(cap);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	lgt_capture_end();
	char *s = tmpd_slurp(cap);
	assert_int_equal(lgt_count_lines(s), 1);
	json_t *l = lgt_line_at(s, 0);
	assert_string_equal(json_string_value(json_object_get(l, "outcome")), "ok");
	json_decref(l);
	free(s);
	pipeline_unref(pl);
}

/* ---- redaction ---- */

#define SECRET_KEY "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"

/* A request and a response full of secrets in hard places. */
static const char REQ_SECRET[] =
	"{\"jsonrpc\":\"2.0\",\"id\":\"" SECRET_KEY "\",\"method\":\"tools/call\","
	"\"params\":{\"name\":\"login\",\"arguments\":{"
	"\"user\":\"bob\",\"Password\":\"hunter2-pw\","
	"\"deep\":[{\"a\":{\"b\":[1,{\"token\":{\"nested\":\"tok-value-1\"}}]}}],"
	"\"note\":\"use " SECRET_KEY " please\","
	"\"" SECRET_KEY "\":\"key as a member name\"}}}";
static const char RESP_SECRET[] =
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\","
	"\"text\":\"{\\\"password\\\":\\\"hunter2-pw\\\",\\\"ok\\\":true}\"},"
	"{\"type\":\"text\",\"text\":\"your key is " SECRET_KEY "\"}],"
	"\"structuredContent\":{\"session\":{\"TOKEN\":\"tok-value-2\"}}}}";

/* Asserts that TEXT shows none of the secrets, and the replacement. */
static void assert_clean(const char *text, const char *with)
{
	assert_non_null(text);
	assert_true(strlen(text) > 0);
	assert_null(strstr(text, "hunter2-pw"));
	assert_null(strstr(text, "tok-value-1"));
	assert_null(strstr(text, "tok-value-2"));
	assert_null(strstr(text, "sk-ABCDEF"));
	assert_non_null(strstr(text, with));
	assert_non_null(strstr(text, "bob"));   /* not everything went */
}

#define REDACT "\"redact\":{\"keys\":[\"password\",\"token\"],\"patterns\":[\"sk-[A-Za-z0-9]{20,}\"]}"

/* No secret reaches the file, the chained file or stderr. */
static void test_redaction_every_sink(void **state)
{
	(void)state;
	char p1[128], p2[128], cap[128], rep[512];
	tmpd_path(p1, sizeof p1, "redact-plain.jsonl");
	tmpd_path(p2, sizeof p2, "redact-chain.jsonl");
	tmpd_path(cap, sizeof cap, "redact-stderr.txt");
	struct pipeline *pl = mwt_start_okf(
		"[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"params\":true,\"result\":true," REDACT "},"
		"{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true,\"params\":true,\"result\":true," REDACT "},"
		"{\"use\":\"log\",\"params\":true,\"result\":true,\"notifications\":true," REDACT "}]", p1, p2);
	lgt_capture_begin(cap);
	exchange(pl, REQ_SECRET, RESP_SECRET, "login " SECRET_KEY);
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,"
		 "\"message\":\"bad key " SECRET_KEY "\",\"data\":{\"password\":\"hunter2-pw\"}}}", "echo");
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
			  "\"params\":{\"data\":{\"token\":\"tok-value-1\"}}}");
	lgt_capture_end();
	char *a = tmpd_slurp(p1), *b = tmpd_slurp(p2), *c = tmpd_slurp(cap);
	assert_clean(a, "[REDACTED]");
	assert_clean(b, "[REDACTED]");
	assert_clean(c, "[REDACTED]");
	assert_int_equal(lgt_count_lines(a), 2);
	assert_int_equal(lgt_count_lines(c), 3);
	/* the redacted text is what the chain hashes: it verifies */
	assert_int_equal(lgt_verify(p2, rep, sizeof rep), 0);
	/* keys match whatever the case; the text document was rewritten */
	json_t *l = lgt_line_at(a, 0);
	json_t *args = json_object_get(json_object_get(l, "params"), "arguments");
	assert_string_equal(json_string_value(json_object_get(args, "Password")), "[REDACTED]");
	assert_string_equal(json_string_value(json_object_get(args, "note")), "use [REDACTED] please");
	assert_non_null(json_object_get(args, "[REDACTED]"));
	assert_string_equal(json_string_value(json_object_get(l, "id")), "[REDACTED]");
	assert_string_equal(json_string_value(json_object_get(l, "name")), "login [REDACTED]");
	json_decref(l);
	free(a);
	free(b);
	free(c);
	pipeline_unref(pl);
}

/* A custom replacement; bodies not asked for are never written. */
static void test_redaction_replacement(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "redact-repl.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"params\":true,"
					    "\"redact\":{\"keys\":[\"password\",\"token\"],\"patterns\":[\"sk-[A-Za-z0-9]{20,}\"],"
					    "\"replacement\":\"<hidden>\"}}]", p);
	exchange(pl, REQ_SECRET, RESP_SECRET, "login");
	char *s = tmpd_slurp(p);
	assert_clean(s, "<hidden>");
	assert_null(strstr(s, "\"result\""));
	free(s);
	pipeline_unref(pl);
}

/* ---- reading messages only when needed ---- */

/* A log module made from the options OPTS (JSON text), not started. */
static struct mw_module *make_log(const char *opts)
{
	struct cfg_errors e = { 0 };
	struct mw_build b = { .file = "t.json", .path = "/middleware/0", .errs = &e };
	json_t *o = json_loads(opts, 0, NULL);
	assert_non_null(o);
	struct mw_module *m = mw_log_create(o, &b);
	json_decref(o);
	assert_non_null(m);
	assert_non_null(m->ops->reads);
	cfg_errors_release(&e);
	return m;
}

/* M's reads() for a message of KIND and METHOD (a response: OUTCOME). */
static bool reads(struct mw_module *m, enum rpc_kind kind, const char *method,
		  enum mw_outcome outcome)
{
	struct mw_ctx ctx = { .kind = kind, .method = method,
			      .method_code = mcp_method_code(method), .outcome = outcome,
			      .dir = MW_TO_BACKEND };
	return m->ops->reads(m, &ctx);
}

/* reads(): params for requests and notifications, results and errors. */
static void test_reads(void **state)
{
	(void)state;
	struct mw_module *m = make_log("{\"use\":\"log\"}");
	assert_false(reads(m, RPC_REQUEST, "tools/call", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_NOTIFICATION, "notifications/progress", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_OK));
	assert_false(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_TOOL_ERROR));
	assert_true(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_ERROR));  /* code, message */
	assert_true(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_NONE));   /* not told: read */
	assert_false(reads(m, RPC_REQUEST, NULL, MW_OUTCOME_NONE));
	m->ops->destroy(m);

	m = make_log("{\"use\":\"log\",\"params\":true}");
	assert_true(reads(m, RPC_REQUEST, "tools/call", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_NOTIFICATION, "notifications/progress", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_OK));
	m->ops->destroy(m);

	m = make_log("{\"use\":\"log\",\"params\":true,\"notifications\":true}");
	assert_true(reads(m, RPC_NOTIFICATION, "notifications/progress", MW_OUTCOME_NONE));
	m->ops->destroy(m);

	m = make_log("{\"use\":\"log\",\"notifications\":true}");
	assert_false(reads(m, RPC_NOTIFICATION, "notifications/progress", MW_OUTCOME_NONE));
	m->ops->destroy(m);

	m = make_log("{\"use\":\"log\",\"result\":true}");
	assert_false(reads(m, RPC_REQUEST, "tools/call", MW_OUTCOME_NONE));
	assert_true(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_OK));
	assert_true(reads(m, RPC_RESPONSE, "tools/call", MW_OUTCOME_TOOL_ERROR));
	m->ops->destroy(m);

	/* methods not logged are never read */
	m = make_log("{\"use\":\"log\",\"params\":true,\"result\":true,\"notifications\":true,"
		     "\"methods\":[\"tools/*\"]}");
	assert_true(reads(m, RPC_REQUEST, "tools/call", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_REQUEST, "ping", MW_OUTCOME_NONE));
	assert_false(reads(m, RPC_RESPONSE, "ping", MW_OUTCOME_ERROR));
	assert_false(reads(m, RPC_NOTIFICATION, "notifications/progress", MW_OUTCOME_NONE));
	m->ops->destroy(m);
}

/* Line I of S (a copy, caller frees) with the digits of duration_us
 * taken out: the one member that differs between two runs. */
static char *line_masked(const char *s, size_t i)
{
	const char *p = lgt_line_ptr(s, i);
	char *l = strndup(p, (size_t)(strchr(p, '\n') - p));
	char *d = strstr(l, "\"duration_us\":");
	assert_non_null(l);
	if (d) {
		char *v = d + strlen("\"duration_us\":"), *e = v;
		while (*e >= '0' && *e <= '9')
			e++;
		memmove(v, e, strlen(e) + 1);
	}
	return l;
}

/* One exchange with the request and response read (RAW false) or not. */
static void exchange_as(struct pipeline *pl, const char *resp, bool raw, double start,
			bool expect_unread)
{
	struct mwt_run x;
	begin_request(&x, pl, REQ_ECHO, "echo", raw);
	if (expect_unread)
		assert_null(x.got);   /* nobody read it: it would travel as bytes */
	x.ctx.start = start;
	back_response(&x, resp, raw);
	if (expect_unread)
		assert_null(x.got);
	mwt_run_end(&x);
	lgt_loop_once();
}

/* Asserts that lines I and I + 1 of the file PATH are the same line. */
static void assert_same_lines(const char *path, size_t i)
{
	char *s = tmpd_slurp(path);
	assert_true(lgt_count_lines(s) >= i + 2);
	char *a = line_masked(s, i), *b = line_masked(s, i + 1);
	assert_string_equal(a, b);
	free(a);
	free(b);
	free(s);
}

/* A walk with *msg == NULL (reads() said no) gives the line a read
 * message gives, for every outcome and option. */
static void test_unread_same_line(void **state)
{
	(void)state;
	static const char *const resps[] = {
		RESP_OK,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"isError\":true}}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Unknown \\\"x\\\"\"}}",
	};
	static const char *const opts[] = { "", ",\"params\":true", ",\"result\":true" };
	double start = ev_time() - 0.5;
	for (size_t o = 0; o < 3; o++) {
		char p[128];
		snprintf(p, sizeof p, "%s/unread-%zu.jsonl", tmpd_dir, o);
		struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\""
						    "%s}]", p, opts[o]);
		for (size_t r = 0; r < 3; r++) {
			exchange_as(pl, resps[r], false, start, false);
			exchange_as(pl, resps[r], true, start, o == 0 && r < 2);
			assert_same_lines(p, 2 * r);
		}
		pipeline_unref(pl);
	}
	/* a notification logged without params is not read either */
	char p[128];
	tmpd_path(p, sizeof p, "unread-notes.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"notifications\":true}]", p);
	static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
				   "\"params\":{\"progress\":1}}";
	walk_notification(pl, note, false);
	walk_notification(pl, note, true);
	char *s = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(s), 2);
	char *a = line_masked(s, 0), *b = line_masked(s, 1);
	assert_non_null(strstr(a, "\"kind\""));
	assert_string_equal(strstr(a, "\"kind\""), strstr(b, "\"kind\""));   /* all but the time */
	free(a);
	free(b);
	free(s);
	pipeline_unref(pl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_valid),
		cmocka_unit_test(test_options_errors),
		cmocka_unit_test(test_options_all_errors_reported),
		cmocka_unit_test(test_start_fails_on_bad_path),
		cmocka_unit_test(test_line_fields),
		cmocka_unit_test(test_outcomes),
		cmocka_unit_test(test_params_and_result),
		cmocka_unit_test(test_methods_filter),
		cmocka_unit_test(test_notifications),
		cmocka_unit_test(test_cancelled),
		cmocka_unit_test(test_abandoned_written_at_destroy),
		cmocka_unit_test(test_stderr_sink),
		cmocka_unit_test(test_redaction_every_sink),
		cmocka_unit_test(test_redaction_replacement),
		cmocka_unit_test(test_reads),
		cmocka_unit_test(test_unread_same_line),
	};
	return cmocka_run_group_tests(tests, tmpd_setup, tmpd_teardown);
}
