/*
 * test_mw_log.c - unit tests for the "log" middleware module
 * (src/middleware/log.c, log_sink.c, log_redact.c, audit.c): option
 * validation, the fields of a line, outcomes, cancellation, redaction in
 * every sink, the hash chain across restarts and reopening, and
 * audit_verify on intact and damaged files; which messages the module
 * reads, the same line whether the message was read or not, the text
 * line builder against jansson's, and lines queued per loop iteration.
 *
 * The module is driven directly: pipelines are built from JSON and
 * messages walked through them by the driver in mw_test.c, as the chain
 * would walk them.
 * Lines are written before the loop waits: the helpers run one loop
 * iteration (loop_once) where the chain's loop would.
 */
#include <dirent.h>
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
#include "mw_log.h"
#include "src/middleware/log_int.h"

static char dir[64];   /* a temporary directory for the whole run */

/* ---- helpers ---- */

/* Writes the path of NAME inside the temporary directory into OUT. */
static void tpath(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* Reads a whole file (caller frees), or NULL if it does not exist. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = calloc(1, (size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return s;
}

/* Writes TEXT as the whole content of PATH. */
static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Number of newline-terminated lines in S. */
static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* Start of line I (0-based) of S. */
static const char *line_ptr(const char *s, size_t i)
{
	while (i-- > 0) {
		s = strchr(s, '\n');
		assert_non_null(s);
		s++;
	}
	return s;
}

/* Line I of S parsed as JSON (new reference). */
static json_t *line_at(const char *s, size_t i)
{
	const char *p = line_ptr(s, i);
	const char *e = strchr(p, '\n');
	json_error_t je;
	json_t *o = json_loadb(p, e ? (size_t)(e - p) : strlen(p), 0, &je);
	if (!o)
		fail_msg("line %zu is not JSON: %s", i, je.text);
	return o;
}

/* Runs one loop iteration, whose prepare watchers write queued lines. */
static void loop_once(void)
{
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);
}

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
	loop_once();
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
	loop_once();
}

/* Walks the notification NOTE (text) through PL from the client. */
static void send_notification(struct pipeline *pl, const char *note)
{
	walk_notification(pl, note, false);
}

static int saved_stderr = -1;

/* Sends fd 2 to the file PATH until capture_end. */
static void capture_begin(const char *path)
{
	fflush(stderr);
	saved_stderr = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved_stderr >= 0);
	dup2(fd, 2);
	close(fd);
}

/* Gives fd 2 back. */
static void capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
}

/* audit_verify on PATH; the report goes to REPORT (BUFLEN bytes). */
static int verify(const char *path, char *report, size_t buflen)
{
	FILE *f = fmemopen(report, buflen, "w");
	assert_non_null(f);
	int rc = audit_verify(path, f);
	fclose(f);
	return rc;
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
	tpath(p, sizeof p, "valid.jsonl");
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
	mwt_expect_error("[{\"use\":\"log\",\"redact\":[]}]", "/middleware/0/redact: must be an object");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"key\":[]}}]", "/middleware/0/redact/key: unknown option");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"keys\":\"password\"}}]", "/middleware/0/redact/keys: must be an array");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"keys\":[\"a\",\"\"]}}]", "/middleware/0/redact/keys/1: must be a non-empty string");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"patterns\":[\"ok\",\"(unclosed\"]}}]",
			 "/middleware/0/redact/patterns/1: does not compile at offset");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"patterns\":[\"x*\"]}}]",
			 "/middleware/0/redact/patterns/0: matches the empty string");
	mwt_expect_error("[{\"use\":\"log\",\"redact\":{\"patterns\":[\"x\"],\"replacement\":1}}]",
			 "/middleware/0/redact/replacement: must be a string");
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
	snprintf(text, sizeof text, "[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s/no/such/dir/a.jsonl\"}]", dir);
	struct pipeline *pl = mwt_build(text, &e);
	assert_non_null(pl);
	char cap[128];
	tpath(cap, sizeof cap, "stderr-badpath.txt");
	capture_begin(cap);
	int rc = pipeline_start(pl);
	capture_end();
	assert_int_equal(rc, -1);
	char *err = slurp(cap);
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
	tpath(p, sizeof p, "fields.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 1);
	json_t *l = line_at(s, 0);
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
	tpath(p, sizeof p, "outcomes.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: x\"}}", "x");
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"isError\":true}}", "echo");
	memset(longmsg, 'm', sizeof longmsg - 1);
	longmsg[sizeof longmsg - 1] = '\0';
	snprintf(resp, sizeof resp, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"%s\"}}", longmsg);
	exchange(pl, REQ_ECHO, resp, "echo");
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 3);
	json_t *a = line_at(s, 0), *b = line_at(s, 1), *c = line_at(s, 2);
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
	tpath(p, sizeof p, "bodies.jsonl");
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
	char *s = slurp(p);
	json_t *a = line_at(s, 0), *b = line_at(s, 1);
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
	tpath(p, sizeof p, "methods.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"methods\":[\"tools/*\"]}]", p);
	exchange(pl, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", NULL);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	exchange(pl, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}", NULL);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 2);
	assert_null(strstr(s, "\"ping\""));
	free(s);
	pipeline_unref(pl);
}

/* Notifications are logged only when asked. */
static void test_notifications(void **state)
{
	(void)state;
	char p1[128], p2[128];
	tpath(p1, sizeof p1, "notes-off.jsonl");
	tpath(p2, sizeof p2, "notes-on.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"},"
					    "{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"notifications\":true,\"params\":true}]", p1, p2);
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\",\"params\":{\"a\":1}}");
	char *s1 = slurp(p1), *s2 = slurp(p2);
	assert_int_equal(count_lines(s1), 0);
	assert_int_equal(count_lines(s2), 1);
	json_t *l = line_at(s2, 0);
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
	tpath(p, sizeof p, "cancelled.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct mwt_run x, y;
	send_request(&x, pl, REQ_ECHO, "slow");
	send_request(&y, pl, REQ_ECHO, "other");
	/* the client cancels x: the notification passes, the chain frees x */
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}");
	mwt_run_end(&x);
	loop_once();
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 1);
	json_t *l = line_at(s, 0);
	assert_string_equal(json_string_value(json_object_get(l, "outcome")), "cancelled");
	assert_string_equal(json_string_value(json_object_get(l, "name")), "slow");
	assert_int_equal(json_integer_value(json_object_get(l, "bytes_out")), 0);
	json_decref(l);
	free(s);
	/* y still open: finishes normally */
	send_response(&y, RESP_OK);
	mwt_run_end(&y);
	loop_once();
	s = slurp(p);
	assert_int_equal(count_lines(s), 2);
	free(s);
	pipeline_unref(pl);
}

/* An exchange left behind (its client went away) is written as cancelled. */
static void test_abandoned_written_at_destroy(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof p, "abandoned.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct mwt_run x;
	send_request(&x, pl, REQ_ECHO, "gone");
	mwt_run_end(&x);
	pipeline_unref(pl);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 1);
	assert_non_null(strstr(s, "\"outcome\":\"cancelled\""));
	free(s);
}

/* The stderr sink writes the same line to fd 2. */
static void test_stderr_sink(void **state)
{
	(void)state;
	char cap[128];
	tpath(cap, sizeof cap, "stderr-sink.txt");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\"}]");
	capture_begin(cap);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	capture_end();
	char *s = slurp(cap);
	assert_int_equal(count_lines(s), 1);
	json_t *l = line_at(s, 0);
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
	tpath(p1, sizeof p1, "redact-plain.jsonl");
	tpath(p2, sizeof p2, "redact-chain.jsonl");
	tpath(cap, sizeof cap, "redact-stderr.txt");
	struct pipeline *pl = mwt_start_okf(
		"[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"params\":true,\"result\":true," REDACT "},"
		"{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true,\"params\":true,\"result\":true," REDACT "},"
		"{\"use\":\"log\",\"params\":true,\"result\":true,\"notifications\":true," REDACT "}]", p1, p2);
	capture_begin(cap);
	exchange(pl, REQ_SECRET, RESP_SECRET, "login " SECRET_KEY);
	exchange(pl, REQ_ECHO, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,"
		 "\"message\":\"bad key " SECRET_KEY "\",\"data\":{\"password\":\"hunter2-pw\"}}}", "echo");
	send_notification(pl, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
			  "\"params\":{\"data\":{\"token\":\"tok-value-1\"}}}");
	capture_end();
	char *a = slurp(p1), *b = slurp(p2), *c = slurp(cap);
	assert_clean(a, "[REDACTED]");
	assert_clean(b, "[REDACTED]");
	assert_clean(c, "[REDACTED]");
	assert_int_equal(count_lines(a), 2);
	assert_int_equal(count_lines(c), 3);
	/* the redacted text is what the chain hashes: it verifies */
	assert_int_equal(verify(p2, rep, sizeof rep), 0);
	/* keys match whatever the case; the text document was rewritten */
	json_t *l = line_at(a, 0);
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
	tpath(p, sizeof p, "redact-repl.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"params\":true,"
					    "\"redact\":{\"keys\":[\"password\",\"token\"],\"patterns\":[\"sk-[A-Za-z0-9]{20,}\"],"
					    "\"replacement\":\"<hidden>\"}}]", p);
	exchange(pl, REQ_SECRET, RESP_SECRET, "login");
	char *s = slurp(p);
	assert_clean(s, "<hidden>");
	assert_null(strstr(s, "\"result\""));
	free(s);
	pipeline_unref(pl);
}

/* ---- the hash chain ---- */

/* Writes N exchanges to the chained file PATH (one pipeline's life). */
static void write_chained(const char *path, int n)
{
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", path);
	for (int i = 0; i < n; i++)
		exchange(pl, REQ_ECHO, RESP_OK, "echo");
	pipeline_unref(pl);
}

/* Lines carry prev/hash; the chain survives a restart. */
static void test_chain_survives_restart(void **state)
{
	(void)state;
	char p[128], rep[512];
	tpath(p, sizeof p, "chain-restart.jsonl");
	write_chained(p, 2);
	write_chained(p, 2);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 4);
	json_t *l0 = line_at(s, 0), *l1 = line_at(s, 1), *l2 = line_at(s, 2);
	assert_string_equal(json_string_value(json_object_get(l0, "prev")),
			    "0000000000000000000000000000000000000000000000000000000000000000");
	assert_string_equal(json_string_value(json_object_get(l2, "prev")),
			    json_string_value(json_object_get(l1, "hash")));
	json_decref(l0);
	json_decref(l1);
	json_decref(l2);
	free(s);
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "4 lines, hash chain intact"));
}

/* Copies the file SRC to DST with line I replaced by the text WITH
 * (NULL: removed) or swapped with line I + 1 (SWAP). */
static void doctor(const char *src, const char *dst, size_t i, const char *with, bool swap)
{
	char *s = slurp(src);
	FILE *f = fopen(dst, "wb");
	size_t n = count_lines(s);
	for (size_t k = 0; k < n; k++) {
		size_t src_k = swap && k == i ? i + 1 : swap && k == i + 1 ? i : k;
		const char *p = line_ptr(s, src_k);
		size_t len = (size_t)(strchr(p, '\n') - p);
		if (!swap && k == i) {
			if (with)
				fprintf(f, "%s\n", with);
			continue;
		}
		fwrite(p, 1, len + 1, f);
	}
	fclose(f);
	free(s);
}

/* audit_verify: intact, edited, removed, reordered, truncated, garbage. */
static void test_verify_detects_damage(void **state)
{
	(void)state;
	char p[128], q[128], rep[1024];
	tpath(p, sizeof p, "chain-verify.jsonl");
	tpath(q, sizeof q, "chain-damaged.jsonl");
	write_chained(p, 4);
	assert_int_equal(verify(p, rep, sizeof rep), 0);

	/* edited: one character of line 2 changed */
	char *s = slurp(p);
	char *l2 = (char *)line_ptr(s, 1);
	char *at = strstr(l2, "\"echo\"");
	at[1] = 'E';
	spit(q, s);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, "chain-damaged.jsonl:2: "));
	assert_non_null(strstr(rep, "changed"));

	/* the last line edited is caught too */
	free(s);
	s = slurp(p);
	at = strstr((char *)line_ptr(s, 3), "\"ok\"");
	memcpy(at, "\"no\"", 4);
	spit(q, s);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":4: "));
	free(s);

	/* removed: line 2 gone, line 3 (now 2) no longer follows line 1 */
	doctor(p, q, 1, NULL, false);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":2: \"prev\" is not the hash of line 1"));

	/* reordered: lines 2 and 3 swapped */
	doctor(p, q, 1, NULL, true);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":2: "));

	/* truncated in the middle of the last line */
	s = slurp(p);
	s[strlen(s) - 20] = '\0';
	spit(q, s);
	free(s);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":4: incomplete"));

	/* a line that is not a chained record */
	doctor(p, q, 2, "{\"time\":\"x\"}", false);
	assert_int_equal(verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":3: not a chained audit record"));
}

/* audit_verify on a missing file and on an empty one. */
static void test_verify_unreadable_and_empty(void **state)
{
	(void)state;
	char p[128], rep[512];
	tpath(p, sizeof p, "does-not-exist.jsonl");
	assert_int_equal(verify(p, rep, sizeof rep), -1);
	assert_non_null(strstr(rep, "cannot read"));
	tpath(p, sizeof p, "empty.jsonl");
	spit(p, "");
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "empty"));
}

/* A chained file whose last line is broken is not continued. */
static void test_chain_refuses_broken_tail(void **state)
{
	(void)state;
	char p[128], text[512], cap[128];
	tpath(p, sizeof p, "chain-broken-tail.jsonl");
	tpath(cap, sizeof cap, "stderr-broken-tail.txt");
	spit(p, "{\"time\":\"not chained\"}\n");
	snprintf(text, sizeof text, "[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", p);
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_build(text, &e);
	assert_non_null(pl);
	capture_begin(cap);
	int rc = pipeline_start(pl);
	capture_end();
	assert_int_equal(rc, -1);
	char *err = slurp(cap);
	assert_non_null(strstr(err, "cannot continue the hash chain"));
	free(err);
	pipeline_unref(pl);
}

/* SIGHUP after a rotation: a new 0600 file that continues the chain. */
static void test_reopen_after_rotation(void **state)
{
	(void)state;
	char p[128], old[128], rep[1024];
	tpath(p, sizeof p, "rotate.jsonl");
	tpath(old, sizeof old, "rotate.jsonl.1");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", p);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	assert_int_equal(mw_log_reopen_all(), 0);   /* nothing moved: same file */
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	assert_int_equal(rename(p, old), 0);
	assert_int_equal(mw_log_reopen_all(), 0);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	pipeline_unref(pl);
	char *a = slurp(old), *b = slurp(p);
	assert_int_equal(count_lines(a), 2);
	assert_int_equal(count_lines(b), 1);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	json_t *last = line_at(a, 1), *first = line_at(b, 0);
	assert_string_equal(json_string_value(json_object_get(first, "prev")),
			    json_string_value(json_object_get(last, "hash")));
	json_decref(last);
	json_decref(first);
	free(a);
	free(b);
	assert_int_equal(verify(old, rep, sizeof rep), 0);
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "continues a chain"));
}

/* Two modules on one file share it, so the chain does not fork. */
static void test_shared_file(void **state)
{
	(void)state;
	char p[128], rep[512], cap[128];
	tpath(p, sizeof p, "shared.jsonl");
	tpath(cap, sizeof cap, "stderr-shared.txt");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true},"
					    "{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", p, p);
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	exchange(pl, REQ_ECHO, RESP_OK, "echo");
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 4);
	free(s);
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	/* a module that wants the same file without a chain is refused */
	char text[512];
	snprintf(text, sizeof text, "[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	struct cfg_errors e = { 0 };
	struct pipeline *other = mwt_build(text, &e);
	assert_non_null(other);
	capture_begin(cap);
	int rc = pipeline_start(other);
	capture_end();
	assert_int_equal(rc, -1);
	pipeline_unref(other);
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
	const char *p = line_ptr(s, i);
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
	loop_once();
}

/* Asserts that lines I and I + 1 of the file PATH are the same line. */
static void assert_same_lines(const char *path, size_t i)
{
	char *s = slurp(path);
	assert_true(count_lines(s) >= i + 2);
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
		snprintf(p, sizeof p, "%s/unread-%zu.jsonl", dir, o);
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
	tpath(p, sizeof p, "unread-notes.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"notifications\":true}]", p);
	static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
				   "\"params\":{\"progress\":1}}";
	walk_notification(pl, note, false);
	walk_notification(pl, note, true);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 2);
	char *a = line_masked(s, 0), *b = line_masked(s, 1);
	assert_non_null(strstr(a, "\"kind\""));
	assert_string_equal(strstr(a, "\"kind\""), strstr(b, "\"kind\""));   /* all but the time */
	free(a);
	free(b);
	free(s);
	pipeline_unref(pl);
}

/* ---- the text of a line ---- */

/* Asserts that L as text is L as a jansson object dumped. */
static void assert_text_is_json(const struct log_line *l)
{
	struct buf b = BUF_INIT;
	json_t *o = log_line_json(l);
	char *want = json_dumps(o, JSON_COMPACT);
	assert_non_null(want);
	assert_int_equal(log_line_text(l, &b), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.data, want, b.len);
	free(want);
	json_decref(o);
	buf_release(&b);
}

/* A string of LEN bytes: FILL repeated, with AT (if any) written at POS. */
static json_t *long_string(size_t len, char fill, const char *at, size_t pos)
{
	char *s = malloc(len);
	memset(s, fill, len);
	if (at)
		memcpy(s + pos, at, strlen(at));
	json_t *v = json_stringn(s, len);
	free(s);
	assert_non_null(v);
	return v;
}

/* The text builder writes what json_dumps writes, for awkward content. */
static void test_text_matches_json(void **state)
{
	(void)state;
	json_t *ids[] = { json_integer(7), json_integer(-9223372036854775807LL - 1),
			  json_string("id \"q\" \\ \x01"), json_real(1.5), json_null(), NULL };
	static const char odd[] = "nul\0tab\tquote\"bs\\ctl\x1f\x7f";
	json_t *msgs[] = {
		json_stringn(odd, sizeof odd - 1),
		long_string(600, 'm', NULL, 0),
		long_string(600, 'm', "\xc3\xa9", 255),           /* é across the cut */
		long_string(600, 'm', "\xe2\x82\xac", 254),       /* € across the cut */
		long_string(600, 'm', "\xf0\x9f\x98\x80", 256),   /* 😀 right at it */
		long_string(600, 'm', "\0", 100),                 /* NUL before it */
		long_string(256, 'x', NULL, 0), NULL,
	};
	json_t *params = json_loads("{\"name\":\"\\u00e9\\u20ac\\ud83d\\ude00\",\"a\":[1,2.5,"
				    "true,null,\"\\u0000\\u001f\\\"\\\\/\"],\"o\":{}}", 0, NULL);
	json_t *result = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"hi\\n\"}]}", 0, NULL);
	json_t *error = json_loads("{\"code\":-1,\"message\":\"m\",\"data\":[]}", 0, NULL);
	json_t *code = json_integer(-32602);
	static const char *const strs[] = {
		"plain", "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
		"\xff\xfe", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xe2\x82", "",
	};
	double times[] = { 0.0, 1700000000.9996, 1700000000.25, 1700000001.0, 1.5e9 };
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		struct log_line l = {
			.time = times[i % 5], .from = "client", .client = strs[i],
			.backend = strs[(i + 1) % 9], .method = "tools/call", .name = strs[(i + 2) % 9],
			.id = ids[i % 6], .outcome = i % 2 ? "error" : "ok", .code = i % 2 ? code : NULL,
			.message = msgs[i % 8], .duration_us = (json_int_t)i * 1000003,
			.bytes_in = 123, .bytes_out = i ? 456 : 0,
			.params = i % 3 ? params : NULL, .result = i % 2 ? NULL : result,
			.error = i % 2 ? error : NULL,
		};
		assert_text_is_json(&l);
		l.notification = true;
		assert_text_is_json(&l);
	}
	for (size_t i = 0; i < 6; i++)
		json_decref(ids[i]);
	for (size_t i = 0; i < 8; i++)
		json_decref(msgs[i]);
	json_decref(params);
	json_decref(result);
	json_decref(error);
	json_decref(code);
}

/*
 * The id as the chain gives it, as its wire text (ctx->id_text): the
 * line is the same as through jansson, and a plain integer is copied.
 */
static void test_text_id_from_wire(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"0", "7", "-3", "123456789012345678", "1234567890123456789",
		"9223372036854775807", "-9223372036854775808",
		"-0", "1.0", "1e3", "-1.5E-3", "\"abc\"", "\"\\u0041\\/\"", "\"a/b\"", "\"\"",
		"\"\\u00e9\\ud83d\\ude00\"", "\"7\"",
	};
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct msg_val v = { 0 };
		assert_int_equal(msg_val_set(&v, texts[i], strlen(texts[i])), 0);
		struct log_line l = {
			.time = 1700000000.5, .from = "client", .method = "tools/call",
			.id_text = &v, .outcome = "ok",
		};
		assert_text_is_json(&l);
		/* the same line as with the id already made by mw_id() */
		struct buf a = BUF_INIT, b = BUF_INIT;
		assert_int_equal(log_line_text(&l, &a), 0);
		l.id = msg_val_json(&v);
		assert_non_null(l.id);
		assert_int_equal(log_line_text(&l, &b), 0);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.data, b.data, a.len);
		json_decref(l.id);
		buf_release(&a);
		buf_release(&b);
		msg_val_release(&v);
	}
	/* no id: no member */
	struct msg_val none = { 0 };
	struct log_line l = { .time = 1.0, .from = "client", .id_text = &none, .outcome = "ok" };
	struct buf b = BUF_INIT;
	assert_int_equal(log_line_text(&l, &b), 0);
	assert_null(memmem(b.data, b.len, "\"id\"", 4));
	assert_text_is_json(&l);
	buf_release(&b);
}

/* The escapes themselves, and where a long message is cut. */
static void test_text_escaping(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	json_t *message = long_string(300, 'm', "\xc3\xa9", 255);
	struct log_line l = {
		.time = 1700000000.125, .from = "client",
		.client = "q\"b\\s\n\t\x01\x1f\x7f/\xc3\xa9\xf0\x9f\x98\x80",
		.backend = "bad\xff", .outcome = "error", .message = message,
	};
	assert_int_equal(log_line_text(&l, &b), 0);
	assert_int_equal(buf_append(&b, "", 1), 0);
	assert_non_null(strstr(b.data, "{\"time\":\"2023-11-14T22:13:20.125Z\",\"from\":\"client\","));
	assert_non_null(strstr(b.data, "\"client\":\"q\\\"b\\\\s\\n\\t\\u0001\\u001F\x7f/"
				       "\xc3\xa9\xf0\x9f\x98\x80\""));
	assert_null(strstr(b.data, "\"backend\""));   /* not UTF-8: left out */
	/* 255 'm', and the é that would straddle byte 256 goes with the rest */
	const char *m = strstr(b.data, "\"message\":\"");
	assert_non_null(m);
	m += strlen("\"message\":\"");
	assert_int_equal(strspn(m, "m"), 255);
	assert_memory_equal(m + 255, "...\",", 5);
	json_decref(message);
	buf_release(&b);
}

/* Asserts that a line holding the N bytes at S in every string member
 * (and as the message and a string id, when S is UTF-8) is as jansson
 * writes it. */
static void assert_string_as_json(const char *s, size_t n)
{
	json_t *js = json_stringn(s, n);   /* NULL when S is not UTF-8 */
	char *c = strndup(s, n);           /* the C string: up to a NUL */
	assert_non_null(c);
	struct log_line l = {
		.time = 1700000000.5, .from = c, .client = c, .backend = c, .method = c,
		.name = c, .id = js, .outcome = c, .message = js, .duration_us = 1,
	};
	assert_text_is_json(&l);
	json_decref(js);
	free(c);
}

/*
 * Strings and numbers at the edges of the text builder's fast paths:
 * every byte value at every place of a word and of the tail after it,
 * lengths around 8 and 16, UTF-8 across a word's end, invalid UTF-8,
 * and integers at each change of digit count and at the limits.
 */
static void test_text_edges(void **state)
{
	(void)state;
	static const char *const strs[] = {
		"", "a", "/", "\x7f", "\"", "\\", "\x01", "\x1f", " ", "~", "!#$%&'()*+,-.",
		"1234567", "12345678", "123456789", "123456789012345", "1234567890123456",
		"12345678901234567", "abcdefg\"", "abcdefgh\\", "abcdefghi\x01", "\"abcdefgh",
		"abcdefgh\x7f/", "abcdefghijklmno\n", "abcdefghijklmnop\t", "a/b/c/d/e/f/g/h/",
		"abcdefg\xc3\xa9", "abcdefg\xe2\x82\xac", "abcdef\xf0\x9f\x98\x80xyz",
		"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" "abcdefghijk", "abcdefgh\xff", "abcdefg\xc3",
		"abcdefghijklmno\x80", "\xc3\xa9\xc3", "abcdefghijkl\xf0\x9f\x98", "abcdefgh\xed\xa0\x80",
		"abcdefgh\xc0\xaf", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f",
		"\x1f\x20\x21\x22\x23\x5b\x5c\x5d\x7e\x7f",
	};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		assert_string_as_json(strs[i], strlen(strs[i]));
	/* a NUL: the C strings end at it, the message and the id go on */
	assert_string_as_json("abcdefgh\0ijklmnop", 17);
	for (int c = 1; c < 256; c++) {
		for (size_t len = 1; len <= 17; len += 8) {
			for (size_t at = 0; at < len; at++) {
				char s[24];
				memset(s, 'x', len);
				s[at] = (char)c;
				assert_string_as_json(s, len);
			}
		}
	}
	/* the milliseconds of the time, against printf's */
	static const double ms[] = { 0.0, 0.001, 0.009, 0.01, 0.099, 0.1, 0.5, 0.999, 0.9996 };
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		struct buf b = BUF_INIT;
		double t = 1700000000.0 + ms[i];
		char want[64];
		snprintf(want, sizeof want, "{\"time\":\"2023-11-14T22:13:20.%03dZ\",",
			 (int)((t - 1700000000.0) * 1000.0));
		assert_int_equal(log_line_text(&(struct log_line){ .time = t }, &b), 0);
		assert_true(b.len > strlen(want));
		assert_memory_equal(b.data, want, strlen(want));
		buf_release(&b);
	}
	json_int_t nums[80];
	size_t n = 0;
	nums[n++] = 0;
	nums[n++] = INT64_MAX;
	nums[n++] = INT64_MIN;
	nums[n++] = INT64_MIN + 1;
	for (json_int_t p = 1; n + 4 <= 80; p *= 10) {
		nums[n++] = p;
		nums[n++] = p - 1;
		nums[n++] = -p;
		nums[n++] = -(p + 1);
		if (p > INT64_MAX / 10)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *id = json_integer(nums[i]);
		struct log_line l = {
			.time = 1700000000.0, .from = "client", .id = id, .outcome = "ok",
			.duration_us = nums[i], .bytes_in = nums[(i + 1) % n],
			.bytes_out = nums[(i + 2) % n],
		};
		assert_text_is_json(&l);
		json_decref(id);
	}
}

/* ---- lines queued per loop iteration ---- */

/* Sends an exchange about NAME through PL without running the loop. */
static void exchange_queued(struct pipeline *pl, const char *name, const char *resp)
{
	struct mwt_run x;
	send_request(&x, pl, REQ_ECHO, name);
	send_response(&x, resp);
	mwt_run_end(&x);
}

/* Lines wait for the end of the loop iteration, then all go, in order. */
static void test_batched_per_iteration(void **state)
{
	(void)state;
	char p[128], rep[512];
	tpath(p, sizeof p, "batch.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	static const char *const names[] = { "n0", "n1", "n2", "n3", "n4" };
	for (size_t i = 0; i < 5; i++)
		exchange_queued(pl, names[i], RESP_OK);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 0);
	free(s);
	loop_once();
	s = slurp(p);
	assert_int_equal(count_lines(s), 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *l = line_at(s, i);
		assert_string_equal(json_string_value(json_object_get(l, "name")), names[i]);
		json_decref(l);
	}
	free(s);
	pipeline_unref(pl);

	/* two chained modules on one file: whole lines, one unbroken chain */
	tpath(p, sizeof p, "batch-chain.jsonl");
	pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true},"
			   "{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", p, p);
	for (size_t i = 0; i < 3; i++)
		exchange_queued(pl, names[i], RESP_OK);
	loop_once();
	exchange_queued(pl, names[3], RESP_OK);
	loop_once();
	s = slurp(p);
	assert_int_equal(count_lines(s), 8);
	free(s);
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "8 lines, hash chain intact"));
	pipeline_unref(pl);
}

/* Past 64 KiB queued, lines are written at once. */
static void test_batch_flushed_when_large(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof p, "batch-large.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\","
					    "\"result\":true}]", p);
	size_t n = 30000;
	char *resp = malloc(n + 200);
	int k = snprintf(resp, n + 200, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":"
			 "[{\"type\":\"text\",\"text\":\"");
	memset(resp + k, 'z', n);
	strcpy(resp + k + n, "\"}]}}");
	exchange_queued(pl, "big", resp);
	exchange_queued(pl, "big", resp);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 0);   /* 60 KB: still queued */
	free(s);
	exchange_queued(pl, "big", resp);      /* 90 KB: written now */
	s = slurp(p);
	assert_int_equal(count_lines(s), 3);
	free(s);
	exchange_queued(pl, "big", resp);
	loop_once();
	s = slurp(p);
	assert_int_equal(count_lines(s), 4);
	assert_int_equal(s[strlen(s) - 1], '\n');
	free(s);
	free(resp);
	pipeline_unref(pl);
}

/* Queued lines are written when the sink is released and on reopen. */
static void test_batch_flushed_on_release_and_reopen(void **state)
{
	(void)state;
	char p[128], old[128], rep[1024];
	tpath(p, sizeof p, "batch-release.jsonl");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\"}]", p);
	exchange_queued(pl, "a", RESP_OK);
	exchange_queued(pl, "b", RESP_OK);
	pipeline_unref(pl);
	char *s = slurp(p);
	assert_int_equal(count_lines(s), 2);
	free(s);

	tpath(p, sizeof p, "batch-reopen.jsonl");
	tpath(old, sizeof old, "batch-reopen.jsonl.1");
	pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"%s\",\"chain\":true}]", p);
	exchange_queued(pl, "before", RESP_OK);
	assert_int_equal(rename(p, old), 0);
	assert_int_equal(mw_log_reopen_all(), 0);
	exchange_queued(pl, "after", RESP_OK);
	loop_once();
	char *a = slurp(old), *b = slurp(p);
	assert_int_equal(count_lines(a), 1);
	assert_non_null(strstr(a, "\"before\""));
	assert_int_equal(count_lines(b), 1);
	assert_non_null(strstr(b, "\"after\""));
	free(a);
	free(b);
	assert_int_equal(verify(p, rep, sizeof rep), 0);
	pipeline_unref(pl);
}

/* A sink that cannot be written says so once, not per line or batch. */
static void test_write_failure_reported_once(void **state)
{
	(void)state;
	char cap[128];
	if (access("/dev/full", W_OK) != 0)
		skip();
	tpath(cap, sizeof cap, "stderr-full.txt");
	struct pipeline *pl = mwt_start_okf("[{\"use\":\"log\",\"sink\":\"file\",\"path\":\"/dev/full\"}]");
	capture_begin(cap);
	for (int i = 0; i < 3; i++)
		exchange(pl, REQ_ECHO, RESP_OK, "echo");
	capture_end();
	char *err = slurp(cap);
	const char *first = strstr(err, "cannot write to audit file /dev/full");
	assert_non_null(first);
	assert_null(strstr(first + 1, "cannot write to audit file"));
	free(err);
	pipeline_unref(pl);
}

/* Creates the temporary directory. */
static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_mw_log.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

/* Removes the temporary directory and its files. */
static int teardown(void **state)
{
	(void)state;
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	return 0;
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
		cmocka_unit_test(test_chain_survives_restart),
		cmocka_unit_test(test_verify_detects_damage),
		cmocka_unit_test(test_verify_unreadable_and_empty),
		cmocka_unit_test(test_chain_refuses_broken_tail),
		cmocka_unit_test(test_reopen_after_rotation),
		cmocka_unit_test(test_shared_file),
		cmocka_unit_test(test_reads),
		cmocka_unit_test(test_unread_same_line),
		cmocka_unit_test(test_text_matches_json),
		cmocka_unit_test(test_text_id_from_wire),
		cmocka_unit_test(test_text_escaping),
		cmocka_unit_test(test_text_edges),
		cmocka_unit_test(test_batched_per_iteration),
		cmocka_unit_test(test_batch_flushed_when_large),
		cmocka_unit_test(test_batch_flushed_on_release_and_reopen),
		cmocka_unit_test(test_write_failure_reported_once),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
