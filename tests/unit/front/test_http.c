/*
 * test_http.c - unit tests for src/front/http.c: the Streamable HTTP
 * front, started in-process on 127.0.0.1 (an ephemeral port) and spoken
 * to over plain sockets from the same loop: request validation (method,
 * Host, Origin, Content-Type, body size, bearer tokens), sessions (ids,
 * DELETE, GET streams), health, /metrics and stopping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>

#include "buf.h"
#include "http_test.h"
#include "log.h"
#include "rpc.h"

#define JSON_HDRS "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
#define LIST_BODY "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}"

/* Hex SHA-256 of "tok-good" and "tok-other" (sha256sum). */
#define H_GOOD "7f2229ad1890e9f69a8cac4e933a506e4571dc3e109280c10d1c34ab417a104a"
#define H_OTHER "e3f9bc1521731470a89e52aa59943e8fb052106b3f0a15d6f51e3a18f32aaa29"

static int setup(void **state)
{
	(void)state;
	htt_start(NULL, 4096, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	htt_stop();
	return 0;
}

/* The JSON-RPC error of R's body: its code, and its message into MSG. */
static json_int_t body_error(const struct hres *r, char *msg, size_t n)
{
	json_t *b = hres_json(r);
	json_t *e = json_object_get(b, "error");
	assert_true(json_is_object(e));
	json_int_t code = json_integer_value(json_object_get(e, "code"));
	snprintf(msg, n, "%s", json_string_value(json_object_get(e, "message")));
	json_decref(b);
	return code;
}

/* Sends R, expects STATUS and an error body whose message contains TEXT. */
static void expect_error(const char *method, const char *path, const char *headers,
			 const char *body, int status, const char *text)
{
	struct hres r;
	char msg[512];
	htt_req(method, path, headers, body, &r);
	if (r.status != status)
		fail_msg("%s %s: HTTP %d, wanted %d: %s", method, path, r.status, status, r.body);
	body_error(&r, msg, sizeof msg);
	if (!strstr(msg, text))
		fail_msg("%s %s: message \"%s\" lacks \"%s\"", method, path, msg, text);
	hres_release(&r);
}

static char sid_hdr[160];

/* Headers naming session SID. */
static const char *with_sid(const char *sid)
{
	snprintf(sid_hdr, sizeof sid_hdr, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
	return sid_hdr;
}

/* ---- health, unknown paths ---- */

static bool ready_answer;
static bool ready_fn(void *arg)
{
	assert_ptr_equal(arg, &ready_answer);
	return ready_answer;
}

static void test_health(void **state)
{
	(void)state;
	struct hres r;
	htt_req("GET", "/healthz", "", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");
	hres_release(&r);
	htt_req("GET", "/readyz", "", NULL, &r);   /* nothing to ask: ready */
	assert_int_equal(r.status, 200);
	hres_release(&r);
	http_front_set_ready(htt_front, ready_fn, &ready_answer);
	ready_answer = false;
	htt_req("GET", "/readyz", "", NULL, &r);
	assert_int_equal(r.status, 503);
	assert_string_equal(r.body, "not ready\n");
	hres_release(&r);
	htt_req("GET", "/healthz", "", NULL, &r);  /* alive all the same */
	assert_int_equal(r.status, 200);
	hres_release(&r);
	ready_answer = true;
	htt_req("GET", "/readyz", "", NULL, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	htt_req("GET", "/elsewhere", "", NULL, &r);
	assert_int_equal(r.status, 404);
	hres_release(&r);
	htt_req("POST", "/mcp/x", JSON_HDRS, LIST_BODY, &r);
	assert_int_equal(r.status, 404);
	hres_release(&r);
}

/* ---- what the headers decide ---- */

static void test_bad_method(void **state)
{
	(void)state;
	struct hres r;
	htt_req("PUT", "/mcp", JSON_HDRS, LIST_BODY, &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(hres_header(&r, "Allow"), "GET, POST, DELETE");
	char msg[256];
	assert_int_equal(body_error(&r, msg, sizeof msg), -32000);
	assert_string_equal(msg, "Method Not Allowed");
	hres_release(&r);
	expect_error("PATCH", "/mcp", "", NULL, 405, "Method Not Allowed");
	/* a 2026-07-28 client has no GET or DELETE */
	expect_error("GET", "/mcp", "Accept: text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n",
		     NULL, 405, "uses POST only");
	expect_error("DELETE", "/mcp", "MCP-Protocol-Version: 2026-07-28\r\n", NULL, 405,
		     "uses POST only");
	assert_int_equal(json_array_size(htt_be.got), 0);
}

static void test_host_and_origin(void **state)
{
	(void)state;
	char hdrs[256];
	expect_error("POST", "/mcp", "Host: evil.example\r\n" JSON_HDRS, LIST_BODY, 403,
		     "Host not allowed");
	snprintf(hdrs, sizeof hdrs, "Host: evil.example:%u\r\nAccept: text/event-stream\r\n",
		 http_front_port(htt_front));
	expect_error("GET", "/mcp", hdrs, NULL, 403, "Host not allowed");
	expect_error("POST", "/mcp", "Origin: http://evil.example\r\n" JSON_HDRS, LIST_BODY, 403,
		     "Origin not allowed");
	expect_error("DELETE", "/mcp", "Origin: null\r\n", NULL, 403, "Origin not allowed");
	/* the server's own origin is fine: the request goes on to what it lacks */
	snprintf(hdrs, sizeof hdrs, "Origin: http://localhost:%u\r\nHost: localhost:%u\r\n" JSON_HDRS,
		 http_front_port(htt_front), http_front_port(htt_front));
	expect_error("POST", "/mcp", hdrs, LIST_BODY, 400, "Mcp-Session-Id header is required");
	/* Host and Origin are checked before the method */
	expect_error("PUT", "/mcp", "Host: evil.example\r\n", NULL, 403, "Host not allowed");
	assert_int_equal(json_array_size(htt_be.got), 0);
}

/* Extra Host names and origins from the configuration are allowed. */
static void test_extra_hosts_and_origins(void **state)
{
	(void)state;
	htt_stop();
	char *origins[] = { "https://app.example", NULL };
	char *hosts[] = { "mcp.example", NULL };
	struct cfg_listen l = { .address = "127.0.0.1", .origins = origins, .hosts = hosts };
	htt_start(&l, 4096, NULL);
	char sid[64];
	htt_initialize("2025-11-25", "Host: mcp.example\r\nOrigin: https://app.example\r\n", sid);
	expect_error("POST", "/mcp", "Host: other.example\r\n" JSON_HDRS, LIST_BODY, 403, "Host");
	expect_error("POST", "/mcp", "Origin: https://app.example.evil\r\n" JSON_HDRS, LIST_BODY, 403,
		     "Origin");
}

static void test_content_type(void **state)
{
	(void)state;
	expect_error("POST", "/mcp", "Content-Type: text/plain\r\n", LIST_BODY, 415,
		     "Unsupported Media Type");
	expect_error("POST", "/mcp", "", LIST_BODY, 415, "Unsupported Media Type");
	/* with parameters it is still JSON */
	expect_error("POST", "/mcp", "Content-Type: application/json; charset=utf-8\r\n", LIST_BODY, 400,
		     "Mcp-Session-Id header is required");
	assert_int_equal(http_front_sessions(htt_front), 0);
}

static void test_body_limits(void **state)
{
	(void)state;
	char big[4200];
	int n = snprintf(big, sizeof big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
			 "\"params\":{\"pad\":\"");
	memset(big + n, 'x', sizeof big - (size_t)n - 5);
	strcpy(big + sizeof big - 5, "\"}}");
	assert_true(strlen(big) > 4096);
	expect_error("POST", "/mcp", JSON_HDRS, big, 413, "exceeds maxMessageBytes (4096)");
	/* not JSON: a parse error, with its JSON-RPC code */
	struct hres r;
	char msg[256];
	htt_req("POST", "/mcp", JSON_HDRS, "{\"jsonrpc\":", &r);
	assert_int_equal(r.status, 400);
	assert_int_equal(body_error(&r, msg, sizeof msg), RPC_PARSE_ERROR);
	hres_release(&r);
	assert_int_equal(http_front_sessions(htt_front), 0);
	assert_int_equal(json_array_size(htt_be.got), 0);
}

/* ---- sessions ---- */

static void test_session_lifecycle(void **state)
{
	(void)state;
	char sid[64];
	assert_int_equal(http_front_sessions(htt_front), 0);
	htt_initialize("2025-11-25", NULL, sid);
	assert_int_equal(strlen(sid), 32);
	assert_int_equal(http_front_sessions(htt_front), 1);
	/* a request with the id is answered by the backend */
	struct hres r;
	htt_req("POST", "/mcp", with_sid(sid), LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	json_t *b = NULL;
	if (strncmp(r.body, "{", 1) == 0) {
		b = hres_json(&r);
	} else {   /* an SSE answer: its one data line */
		char *d = strstr(r.body, "data: ");
		assert_non_null(d);
		b = json_loadb(d + 6, strcspn(d + 6, "\n"), 0, NULL);
	}
	assert_non_null(b);
	assert_int_equal(json_integer_value(json_object_get(b, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(b, "result"), "echo")),
			    "tools/list");
	json_decref(b);
	hres_release(&r);
	/* a notification: 202, no body */
	htt_req("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", &r);
	assert_int_equal(r.status, 202);
	assert_int_equal(r.body_n, 0);
	hres_release(&r);
	/* no id, an unknown id, a malformed one */
	expect_error("POST", "/mcp", JSON_HDRS, LIST_BODY, 400, "Mcp-Session-Id header is required");
	expect_error("POST", "/mcp", with_sid("0123456789abcdef0123456789abcdef"), LIST_BODY, 404,
		     "Session not found");
	expect_error("POST", "/mcp", with_sid("../etc"), LIST_BODY, 404, "Session not found");
	/* a version the front does not speak */
	char hdrs[256];
	snprintf(hdrs, sizeof hdrs, "%sMCP-Protocol-Version: 1999-01-01\r\n", with_sid(sid));
	expect_error("POST", "/mcp", hdrs, LIST_BODY, 400, "unsupported MCP-Protocol-Version");
	/* the same request id twice while the first is open */
	htt_be.hold = true;
	struct hconn c;
	htt_open("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"t\"}}", &c);
	htt_run_for(0.05);
	expect_error("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
		     "\"params\":{\"name\":\"t\"}}", 400, "already open");
	assert_int_equal(http_front_busy(htt_front), 1);
	htt_close(&c);
	/* DELETE ends it: the id is unknown afterwards */
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\n", sid);
	htt_req("DELETE", "/mcp", hdrs, NULL, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	assert_int_equal(http_front_sessions(htt_front), 0);
	expect_error("POST", "/mcp", with_sid(sid), LIST_BODY, 404, "Session not found");
	expect_error("DELETE", "/mcp", hdrs, NULL, 404, "Session not found");
	expect_error("DELETE", "/mcp", "", NULL, 400, "Mcp-Session-Id header is required");
}

/* Each initialize makes its own session, with its own id. */
static void test_sessions_are_separate(void **state)
{
	(void)state;
	char a[64], b[64];
	htt_initialize("2025-06-18", NULL, a);
	htt_initialize("2025-03-26", NULL, b);
	assert_string_not_equal(a, b);
	assert_int_equal(http_front_sessions(htt_front), 2);
	char hdrs[160];
	struct hres r;
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\n", a);
	htt_req("DELETE", "/mcp", hdrs, NULL, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	assert_int_equal(http_front_sessions(htt_front), 1);
	htt_req("POST", "/mcp", with_sid(b), LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
}

/* The GET stream: SSE only, one per session, and what the session sends
 * with no request to answer goes there. */
static void test_get_stream(void **state)
{
	(void)state;
	char sid[64], hdrs[256];
	htt_initialize("2025-11-25", NULL, sid);
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: application/json\r\n", sid);
	expect_error("GET", "/mcp", hdrs, NULL, 406, "Not Acceptable");
	expect_error("GET", "/mcp", "Accept: text/event-stream\r\n", NULL, 400,
		     "Mcp-Session-Id header is required");
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n", sid);
	struct hconn c;
	htt_open("GET", "/mcp", hdrs, NULL, &c);
	assert_true(htt_wait(&c, "\r\n\r\n", 2.));
	assert_true(strncmp(c.data, "HTTP/1.1 200", 12) == 0);
	assert_non_null(strstr(c.data, "text/event-stream"));
	expect_error("GET", "/mcp", hdrs, NULL, 409, "already open");
	/* a backend's notification reaches the open GET stream */
	chain_receive(&htt_be.peer, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
					      "notifications/tools/list_changed"));
	assert_true(htt_wait(&c, "notifications/tools/list_changed", 2.));
	assert_non_null(strstr(c.data, "data: {"));
	htt_close(&c);
	/* once its connection is gone another GET may open */
	htt_run_for(0.05);
	htt_open("GET", "/mcp", hdrs, NULL, &c);
	assert_true(htt_wait(&c, "HTTP/1.1 200", 2.));
	htt_close(&c);
}

/* ---- bearer tokens ---- */

static void test_bearer_tokens(void **state)
{
	(void)state;
	htt_stop();
	htt_start(NULL, 4096, "[{\"sha256\":\"" H_GOOD "\",\"principal\":\"a\"},"
		  "{\"sha256\":\"" H_OTHER "\",\"principal\":\"b\"}]");
	struct hres r;
	htt_req("POST", "/mcp", JSON_HDRS, LIST_BODY, &r);
	assert_int_equal(r.status, 401);
	assert_string_equal(hres_header(&r, "WWW-Authenticate"), "Bearer realm=\"mcp-chain\"");
	char msg[256];
	body_error(&r, msg, sizeof msg);
	assert_non_null(strstr(msg, "a bearer token is required"));
	hres_release(&r);
	htt_req("POST", "/mcp", "Authorization: Bearer tok-bad\r\n" JSON_HDRS, LIST_BODY, &r);
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(hres_header(&r, "WWW-Authenticate"), "invalid_token"));
	body_error(&r, msg, sizeof msg);
	assert_non_null(strstr(msg, "not valid"));
	hres_release(&r);
	expect_error("GET", "/metrics", "", NULL, 401, "bearer token is required");
	expect_error("POST", "/mcp", "Authorization: Basic dG9rLWdvb2Q=\r\n" JSON_HDRS, LIST_BODY, 401,
		     "required");
	assert_int_equal(http_front_sessions(htt_front), 0);
	/* a good token opens a session, which is then bound to it */
	char sid[64], hdrs[256];
	htt_initialize("2025-11-25", "Authorization: Bearer  tok-good \r\n", sid);
	snprintf(hdrs, sizeof hdrs, "%sAuthorization: bearer tok-good\r\n", with_sid(sid));
	htt_req("POST", "/mcp", hdrs, LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	snprintf(hdrs, sizeof hdrs, "%sAuthorization: Bearer tok-other\r\n", with_sid(sid));
	expect_error("POST", "/mcp", hdrs, LIST_BODY, 401, "belongs to another bearer token");
	/* no token at all is refused before the session is looked at */
	expect_error("POST", "/mcp", with_sid(sid), LIST_BODY, 401, "required");
	htt_req("GET", "/metrics", "Authorization: Bearer tok-other\r\n", NULL, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
}

/* ---- /metrics ---- */

static void more_metrics(struct buf *out, void *arg)
{
	assert_ptr_equal(arg, &ready_answer);
	buf_append(out, "extra_metric 42\n", 16);
}

/* The value of the metric line starting with PREFIX in TEXT, or -1. */
static double metric(const char *text, const char *prefix)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			return strtod(p + strlen(prefix), NULL);
	return -1;
}

static void test_metrics(void **state)
{
	(void)state;
	char sid[64];
	htt_initialize("2025-11-25", NULL, sid);
	expect_error("PUT", "/mcp", "", NULL, 405, "Method");
	http_front_set_metrics(htt_front, more_metrics, &ready_answer);
	struct hres r;
	htt_req("GET", "/metrics", "", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(hres_header(&r, "Content-Type"), "text/plain"));
	assert_non_null(strstr(r.body, "# TYPE mcp_chain_http_sessions gauge"));
	assert_true(metric(r.body, "mcp_chain_http_sessions{transport=\"streamable\"} ") == 1);
	assert_true(metric(r.body, "mcp_chain_http_sessions{transport=\"sse\"} ") == 0);
	assert_true(metric(r.body, "mcp_chain_http_sessions_started_total ") == 1);
	assert_true(metric(r.body, "mcp_chain_http_responses_total{code=\"405\"} ") == 1);
	assert_true(metric(r.body, "mcp_chain_http_responses_total{code=\"200\"} ") >= 1);
	assert_true(metric(r.body, "extra_metric ") == 42);
	hres_release(&r);
	expect_error("GET", "/metrics", "Host: evil.example\r\n", NULL, 403, "Host not allowed");
}

/* ---- stopping ---- */

static void test_stop_ends_sessions(void **state)
{
	(void)state;
	char sid[64], hdrs[256];
	htt_initialize("2025-11-25", NULL, sid);
	htt_be.hold = true;
	struct hconn c;
	htt_open("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"t\"}}", &c);
	htt_run_for(0.05);
	assert_int_equal(http_front_busy(htt_front), 1);
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n", sid);
	http_front_drain(htt_front);
	assert_int_equal(http_front_busy(htt_front), 1);   /* open requests go on */
	http_front_stop(htt_front, "test stop");
	assert_int_equal(http_front_sessions(htt_front), 0);
	assert_int_equal(http_front_busy(htt_front), 0);
	/* the backend heard the call cancelled */
	bool cancelled = false;
	size_t i;
	json_t *m;
	json_array_foreach(htt_be.got, i, m) {
		const char *method = json_string_value(json_object_get(m, "method"));
		cancelled |= method && strcmp(method, "notifications/cancelled") == 0;
	}
	assert_true(cancelled);
	/* the open call is answered: the session ended, with the reason */
	assert_true(htt_wait(&c, "before this request was answered (test stop)", 2.));
	assert_non_null(strstr(c.data, "\"id\":9,\"error\":{\"code\":-32000"));
	htt_close(&c);
	http_front_stop(htt_front, "again");   /* idempotent */
}

int main(void)
{
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_health),
		T(test_bad_method),
		T(test_host_and_origin),
		T(test_extra_hosts_and_origins),
		T(test_content_type),
		T(test_body_limits),
		T(test_session_lifecycle),
		T(test_sessions_are_separate),
		T(test_get_stream),
		T(test_bearer_tokens),
		T(test_metrics),
		T(test_stop_ends_sessions),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
