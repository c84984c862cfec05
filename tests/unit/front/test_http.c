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
#include <unistd.h>

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

/* ---- the GET stream: resumption, the backlog, the slow reader ---- */

/* A notification from the backend to every session: {"n": N} and PAD
 * bytes of padding. */
static void notify(int n, size_t pad)
{
	char *p = malloc(pad + 1);
	assert_non_null(p);
	memset(p, 'x', pad);
	p[pad] = '\0';
	chain_receive(&htt_be.peer, json_pack("{s:s,s:s,s:{s:i,s:s}}", "jsonrpc", "2.0", "method",
					      "notifications/tools/list_changed", "params", "n", n,
					      "pad", p));
	free(p);
}

/* The SSE events C has read, as [{"id": ID, "n": N, "len": bytes of its data}]. */
static json_t *sse_events(struct hconn *c)
{
	struct hres r;
	htt_parse(c, &r);
	json_t *all = json_array();
	for (char *e = r.body; e && *e;) {
		char *end = strstr(e, "\n\n");
		assert_non_null(end);
		*end = '\0';
		char *id = strstr(e, "id: ");
		char *data = strstr(e, "data: ");
		if (id && data) {
			json_t *d = json_loads(data + 6, 0, NULL);
			assert_non_null(d);
			json_array_append_new(all, json_pack("{s:s%,s:I,s:i}", "id", id + 4,
				strcspn(id + 4, "\n"), "n",
				json_integer_value(json_object_get(json_object_get(d, "params"), "n")),
				"len", (int)strlen(data + 6)));
			json_decref(d);
		}
		e = end + 2;
	}
	hres_release(&r);
	return all;
}

/* Checks that EVS are exactly the events ID_0/N_0, ID_1/N_1, ... (COUNT of them). */
static void expect_events(json_t *evs, size_t count, const char *const *ids, const int *ns)
{
	if (json_array_size(evs) != count) {
		char *s = json_dumps(evs, JSON_COMPACT);
		fail_msg("wanted %zu events, got %s", count, s);
	}
	for (size_t i = 0; i < count; i++) {
		json_t *e = json_array_get(evs, i);
		assert_string_equal(json_string_value(json_object_get(e, "id")), ids[i]);
		assert_int_equal(json_integer_value(json_object_get(e, "n")), ns[i]);
	}
}

/* Opens SID's GET stream (with Last-Event-ID LAST unless NULL) and waits for its head. */
static void open_get(const char *sid, const char *last, struct hconn *c)
{
	char hdrs[256];
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n%s%s%s", sid,
		 last ? "Last-Event-ID: " : "", last ? last : "", last ? "\r\n" : "");
	htt_open("GET", "/mcp", hdrs, NULL, c);
	assert_true(htt_wait(c, "\r\n\r\n", 2.));
	if (strncmp(c->data, "HTTP/1.1 200", 12) != 0)
		fail_msg("GET stream: %s", c->data);
}

/* Closes C and lets the front see it go (its EOF is watched after 20 ms). */
static void close_get(struct hconn *c)
{
	htt_close(c);
	htt_run_for(0.1);
}

/*
 * A GET with Last-Event-ID of the GET stream's event: the kept events
 * after it again (keeping their ids), then what was held while no stream
 * was open, each once; an id past the last replays nothing; one that is
 * not an event id opens a fresh stream; one of a POST stream the session
 * does not keep is refused.
 */
static void test_get_resume(void **state)
{
	(void)state;
	char sid[64], hdrs[256];
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	open_get(sid, NULL, &c);
	for (int i = 1; i <= 3; i++)
		notify(i, 10);
	assert_true(htt_wait(&c, "id: 0-3\n", 2.));
	json_t *evs = sse_events(&c);
	expect_events(evs, 3, (const char *[]){ "0-1", "0-2", "0-3" }, (int[]){ 1, 2, 3 });
	json_decref(evs);
	close_get(&c);
	notify(4, 10);   /* held: no GET stream open */
	open_get(sid, "0-1", &c);
	assert_true(htt_wait(&c, "id: 0-4\n", 2.));
	notify(5, 10);
	assert_true(htt_wait(&c, "id: 0-5\n", 2.));
	evs = sse_events(&c);
	expect_events(evs, 4, (const char *[]){ "0-2", "0-3", "0-4", "0-5" }, (int[]){ 2, 3, 4, 5 });
	json_decref(evs);
	close_get(&c);
	/* after the newest: nothing again, numbering goes on */
	open_get(sid, "0-999", &c);
	notify(6, 10);
	assert_true(htt_wait(&c, "id: 0-6\n", 2.));
	evs = sse_events(&c);
	expect_events(evs, 1, (const char *[]){ "0-6" }, (int[]){ 6 });
	json_decref(evs);
	close_get(&c);
	/* not an event id: a fresh stream, no replay */
	open_get(sid, "yesterday", &c);
	notify(7, 10);
	assert_true(htt_wait(&c, "id: 0-7\n", 2.));
	evs = sse_events(&c);
	expect_events(evs, 1, (const char *[]){ "0-7" }, (int[]){ 7 });
	json_decref(evs);
	close_get(&c);
	/* a POST stream's id this session does not keep */
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n"
		 "Last-Event-ID: 7-1\r\n", sid);
	expect_error("GET", "/mcp", hdrs, NULL, 400, "Last-Event-ID names a stream this session "
		     "does not keep");
	/* the GET stream was not taken by the refused resume */
	open_get(sid, NULL, &c);
	htt_close(&c);
}

/* The GET stream keeps about streamBufferBytes of events for a resume: an
 * id older than those kept replays what is kept (the gap is logged). */
static void test_get_resume_after_trim(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .stream_buffer = 300 };
	htt_start(&l, 4096, NULL);
	char sid[64];
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	open_get(sid, NULL, &c);
	/* each event is about 130 bytes framed: two fit in 300, three do not */
	for (int i = 1; i <= 5; i++) {
		notify(i, 30);
		char want[32];
		snprintf(want, sizeof want, "id: 0-%d\n", i);
		assert_true(htt_wait(&c, want, 2.));
	}
	json_t *evs = sse_events(&c);
	size_t len = (size_t)json_integer_value(json_object_get(json_array_get(evs, 0), "len"));
	if (len < 110 || len > 119)   /* framed +31: two fit in 300, three do not */
		fail_msg("a line of %zu bytes: the bound's arithmetic does not hold", len);
	json_decref(evs);
	close_get(&c);
	open_get(sid, "0-1", &c);
	notify(6, 30);
	assert_true(htt_wait(&c, "id: 0-6\n", 2.));
	evs = sse_events(&c);
	expect_events(evs, 3, (const char *[]){ "0-4", "0-5", "0-6" }, (int[]){ 4, 5, 6 });
	json_decref(evs);
	htt_close(&c);
}

/*
 * With no GET stream open, what is for it is held, the oldest dropped
 * beyond streamBufferBytes (the newest always kept, however large), and
 * it goes out, in order, when a GET stream opens.
 */
static void test_held_backlog(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .stream_buffer = 300 };
	htt_start(&l, 4096, NULL);
	char sid[64];
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	/* lines of 105..145 bytes: two fit in 300, three do not */
	for (int i = 1; i <= 6; i++)
		notify(i, 50);
	open_get(sid, NULL, &c);
	assert_true(htt_wait(&c, "id: 0-2\n", 2.));
	htt_run_for(0.05);   /* nothing more comes */
	json_t *evs = sse_events(&c);
	expect_events(evs, 2, (const char *[]){ "0-1", "0-2" }, (int[]){ 5, 6 });
	size_t len = (size_t)json_integer_value(json_object_get(json_array_get(evs, 0), "len"));
	if (len < 105 || len > 145)
		fail_msg("a line of %zu bytes: the bound's arithmetic does not hold", len);
	json_decref(evs);
	close_get(&c);
	/* one message larger than the bound is held whole; the next pushes it out */
	notify(7, 500);
	open_get(sid, NULL, &c);
	assert_true(htt_wait(&c, "id: 0-3\n", 2.));
	evs = sse_events(&c);
	expect_events(evs, 1, (const char *[]){ "0-3" }, (int[]){ 7 });
	assert_true(json_integer_value(json_object_get(json_array_get(evs, 0), "len")) > 500);
	json_decref(evs);
	close_get(&c);
	notify(8, 500);
	notify(9, 10);
	open_get(sid, NULL, &c);
	assert_true(htt_wait(&c, "id: 0-4\n", 2.));
	htt_run_for(0.05);
	evs = sse_events(&c);
	expect_events(evs, 1, (const char *[]){ "0-4" }, (int[]){ 9 });
	json_decref(evs);
	htt_close(&c);
}

/* The last request with METHOD the backend got (borrowed), or NULL. */
static json_t *be_got(const char *method)
{
	json_t *found = NULL;
	size_t i;
	json_t *m;
	json_array_foreach(htt_be.got, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		if (mm && strcmp(mm, method) == 0)
			found = m;
	}
	return found;
}

/* Progress N (PAD bytes of message) from the backend for TOKEN. */
static void progress(json_t *token, int n, size_t pad)
{
	char *p = malloc(pad + 1);
	assert_non_null(p);
	memset(p, 'p', pad);
	p[pad] = '\0';
	chain_receive(&htt_be.peer, json_pack("{s:s,s:s,s:{s:O,s:i,s:s}}", "jsonrpc", "2.0",
		"method", "notifications/progress", "params", "progressToken", token, "progress", n,
		"message", p));
	free(p);
}

/* Opens a tools/call with a progress token on SID's session, SSE
 * accepted; returns the backend's copy of it (borrowed). */
static json_t *open_call(const char *sid, struct hconn *c)
{
	size_t before = json_array_size(htt_be.got);
	htt_open("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		 "\"params\":{\"name\":\"t\",\"_meta\":{\"progressToken\":\"tok\"}}}", c);
	for (int i = 0; i < 100 && json_array_size(htt_be.got) == before; i++)
		htt_run_for(0.01);
	json_t *m = be_got("tools/call");
	assert_true(json_array_size(htt_be.got) > before);
	assert_non_null(m);
	return m;
}

/*
 * A reader that does not take its stream: once more than streamBufferBytes
 * wait for it, its connection is dropped (no orderly end) and its request
 * cancelled at the backend; what came after is not sent. Another session's
 * stream, and the slow one's session, go on.
 */
static void test_slow_reader(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .stream_buffer = 4096 };
	htt_start(&l, 4096, NULL);
	char a[64], b[64];
	struct hconn ca, cb;
	htt_initialize("2025-11-25", NULL, a);
	htt_initialize("2025-11-25", NULL, b);
	htt_be.hold = true;
	json_t *ma = json_incref(open_call(a, &ca));
	json_t *mb = json_incref(open_call(b, &cb));
	json_t *ta = json_object_get(json_object_get(json_object_get(ma, "params"), "_meta"),
				     "progressToken");
	json_t *tb = json_object_get(json_object_get(json_object_get(mb, "params"), "_meta"),
				     "progressToken");
	assert_false(json_equal(ta, tb));
	/* each stream starts with its first progress */
	progress(ta, 1, 10);
	progress(tb, 1, 10);
	assert_true(htt_wait(&ca, "\"progress\":1", 2.));
	assert_true(htt_wait(&cb, "\"progress\":1", 2.));
	assert_int_equal(http_front_busy(htt_front), 2);
	/* A's reader takes nothing while 60 events of ~150 bytes come */
	for (int i = 2; i <= 60; i++)
		progress(ta, i, 100);
	assert_int_equal(http_front_busy(htt_front), 1);
	json_t *cancel = be_got("notifications/cancelled");
	assert_non_null(cancel);
	json_t *cp = json_object_get(cancel, "params");
	assert_true(json_equal(json_object_get(cp, "requestId"), json_object_get(ma, "id")));
	assert_string_equal(json_string_value(json_object_get(cp, "reason")),
			    "the client's stream stalled");
	/* its connection ends without the terminating chunk; the rest is not sent */
	assert_true(htt_wait(&ca, NULL, 2.));
	assert_true(ca.eof);
	assert_null(strstr(ca.data, "\"progress\":60"));
	assert_null(strstr(ca.data, "\r\n0\r\n\r\n"));
	htt_close(&ca);
	/* B is untouched: its progress, then its answer ends its stream */
	for (int i = 2; i <= 5; i++)
		progress(tb, i, 100);
	chain_receive(&htt_be.peer, rpc_result(json_object_get(mb, "id"),
						json_pack("{s:s}", "echo", "done")));
	assert_true(htt_wait(&cb, "\r\n0\r\n\r\n", 2.));
	for (int i = 1; i <= 5; i++) {
		char want[32];
		snprintf(want, sizeof want, "\"progress\":%d", i);
		assert_non_null(strstr(cb.data, want));
	}
	assert_non_null(strstr(cb.data, "\"result\":{\"echo\":\"done\"}"));
	htt_close(&cb);
	assert_int_equal(http_front_busy(htt_front), 0);
	/* A's session lives on */
	htt_be.hold = false;
	struct hres r;
	htt_req("POST", "/mcp", with_sid(a), LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"echo\":\"tools/list\""));
	hres_release(&r);
	json_decref(ma);
	json_decref(mb);
}

/*
 * A POST stream whose connection breaks waits resumeGraceMs for a GET with
 * Last-Event-ID of one of its events: that GET gets the events after it
 * (none twice), what came meanwhile, then the answer, and ends as the POST
 * would have; nothing is cancelled. Not resumed in time, its request is
 * cancelled and the stream is no longer kept.
 */
static void test_post_resume(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .resume_grace = 0.3 };
	htt_start(&l, 4096, NULL);
	char sid[64], hdrs[256];
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	htt_be.hold = true;
	json_t *call = json_incref(open_call(sid, &c));
	json_t *tok = json_object_get(json_object_get(json_object_get(call, "params"), "_meta"),
				      "progressToken");
	progress(tok, 1, 4);
	assert_true(htt_wait(&c, "\"progress\":1", 2.));
	/* the retry hint (a third of the grace) and the priming event come first */
	struct hres r;
	htt_parse(&c, &r);
	assert_true(strncmp(r.body, "retry: 100\nid: 2-0\ndata: \n\nid: 2-1\nevent: message\n", 50) == 0);
	hres_release(&r);
	close_get(&c);   /* cut: parked */
	progress(tok, 2, 4);
	assert_int_equal(http_front_busy(htt_front), 1);
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n"
		 "Last-Event-ID: 2-1\r\n", sid);
	htt_open("GET", "/mcp", hdrs, NULL, &c);
	assert_true(htt_wait(&c, "\"progress\":2", 2.));
	chain_receive(&htt_be.peer, rpc_result(json_object_get(call, "id"), json_pack("{s:b}", "ok", 1)));
	if (!htt_wait(&c, "\r\n0\r\n\r\n", 2.))
		fail_msg("the resumed stream did not end: %s", c.data);
	htt_parse(&c, &r);
	assert_int_equal(r.status, 200);
	assert_null(strstr(r.body, "\"progress\":1"));
	const char *p2 = strstr(r.body, "id: 2-2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
				"\"notifications/progress\"");
	const char *res = strstr(r.body, "id: 2-3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,"
				 "\"result\":{\"ok\":true}}");
	assert_non_null(p2);
	assert_non_null(res);
	assert_true(p2 < res);
	assert_null(strstr(res + 1, "id: 2-3"));
	hres_release(&r);
	htt_close(&c);
	assert_int_equal(http_front_busy(htt_front), 0);
	assert_null(be_got("notifications/cancelled"));
	json_decref(call);
	/* not resumed within the grace: cancelled, and no longer kept */
	json_array_clear(htt_be.got);
	call = json_incref(open_call(sid, &c));
	tok = json_object_get(json_object_get(json_object_get(call, "params"), "_meta"), "progressToken");
	progress(tok, 1, 4);
	assert_true(htt_wait(&c, "id: 3-1\n", 2.));
	close_get(&c);
	assert_null(be_got("notifications/cancelled"));   /* still waiting */
	htt_run_for(0.4);
	json_t *cancel = be_got("notifications/cancelled");
	assert_non_null(cancel);
	assert_true(json_equal(json_object_get(json_object_get(cancel, "params"), "requestId"),
			       json_object_get(call, "id")));
	assert_int_equal(http_front_busy(htt_front), 0);
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n"
		 "Last-Event-ID: 3-1\r\n", sid);
	expect_error("GET", "/mcp", hdrs, NULL, 400, "names a stream this session does not keep");
	json_decref(call);
}

/* ---- 2026-07-28: no session, one call per POST ---- */

#define META26 "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
	"\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define HDRS26 "Content-Type: application/json\r\nAccept: application/json\r\n" \
	"MCP-Protocol-Version: 2026-07-28\r\n"

/* Sends a 2026-07-28 POST with EXTRA headers; expects STATUS and an error
 * with CODE whose message contains TEXT, for request id 1. */
static void expect_error26(const char *extra, const char *body, int status, int code,
			   const char *text)
{
	char hdrs[512], msg[512];
	struct hres r;
	snprintf(hdrs, sizeof hdrs, HDRS26 "%s", extra);
	htt_req("POST", "/mcp", hdrs, body, &r);
	if (r.status != status)
		fail_msg("HTTP %d, wanted %d: %s", r.status, status, r.body);
	assert_int_equal(body_error(&r, msg, sizeof msg), code);
	if (!strstr(msg, text))
		fail_msg("message \"%s\" lacks \"%s\"", msg, text);
	json_t *b = hres_json(&r);
	assert_int_equal(json_integer_value(json_object_get(b, "id")), 1);
	json_decref(b);
	assert_null(hres_header(&r, "Mcp-Session-Id"));
	hres_release(&r);
}

/*
 * A 2026-07-28 POST needs no session: it gets its answer in the response,
 * no Mcp-Session-Id, and the session made for the call ends soon after.
 * Its headers must agree with its body, and a method that era removed is
 * 404; none of those reach the backend or make a session.
 */
static void test_stateless_post(void **state)
{
	(void)state;
	struct hres r;
	htt_req("POST", "/mcp", HDRS26 "Mcp-Method: tools/list\r\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META26 "}}", &r);
	if (r.status != 200)
		fail_msg("HTTP %d: %s", r.status, r.body);
	assert_null(hres_header(&r, "Mcp-Session-Id"));
	assert_non_null(strstr(hres_header(&r, "Content-Type"), "application/json"));
	json_t *b = hres_json(&r);
	assert_int_equal(json_integer_value(json_object_get(b, "id")), 1);
	assert_non_null(json_object_get(b, "result"));
	json_decref(b);
	hres_release(&r);
	json_t *sent = be_got("tools/list");
	assert_non_null(sent);
	assert_int_equal(http_front_sessions(htt_front), 1);   /* the call's, for a moment */
	htt_run_for(0.7);
	assert_int_equal(http_front_sessions(htt_front), 0);
	size_t got = json_array_size(htt_be.got);
	/* what the headers must say */
	const char *list = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META26 "}}";
	expect_error26("", list, 400, -32020,
		       "the Mcp-Method header is required (the body's method is tools/list)");
	expect_error26("Mcp-Method: tools/call\r\n", list, 400, -32020,
		       "the Mcp-Method header says tools/call but the body's method is tools/list");
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
		"\"name\":\"t\"," META26 "}}";
	expect_error26("Mcp-Method: tools/call\r\n", call, 400, -32020,
		       "the Mcp-Name header is required for this method");
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: u\r\n", call, 400, -32020,
		       "the Mcp-Name header does not match the body");
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: =?base64?d!==?=\r\n", call, 400, -32020,
		       "Base64 form cannot be decoded");
	/* the version twice, disagreeing */
	char hdrs[256];
	snprintf(hdrs, sizeof hdrs, "Content-Type: application/json\r\nMCP-Protocol-Version: 2025-11-25\r\n"
		 "Mcp-Method: tools/list\r\n");
	htt_req("POST", "/mcp", hdrs, list, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "the MCP-Protocol-Version header says 2025-11-25 but the "
			       "request's _meta says 2026-07-28"));
	hres_release(&r);
	/* removed in this era; an envelope without the client's capabilities */
	expect_error26("Mcp-Method: ping\r\n",
		       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{" META26 "}}", 404,
		       RPC_METHOD_NOT_FOUND, "ping is not part of protocol 2026-07-28");
	expect_error26("Mcp-Method: tools/list\r\n", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
		       "\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
		       "\"2026-07-28\"}}}", 400, RPC_INVALID_PARAMS, "clientCapabilities");
	assert_int_equal(json_array_size(htt_be.got), got);
	assert_int_equal(http_front_sessions(htt_front), 0);
	/* the Base64 form of Mcp-Name ("t") is decoded: the call goes through */
	htt_req("POST", "/mcp", HDRS26 "Mcp-Method: tools/call\r\nMcp-Name: =?base64?dA==?=\r\n", call, &r);
	if (r.status != 200)
		fail_msg("HTTP %d: %s", r.status, r.body);
	assert_non_null(strstr(r.body, "\"echo\":\"tools/call\""));
	hres_release(&r);
}

/* The tools/call requests the backend got so far. */
static size_t calls_got(void)
{
	size_t n = 0, i;
	json_t *m;
	json_array_foreach(htt_be.got, i, m)
		n += json_is_string(json_object_get(m, "method")) &&
		     strcmp(json_string_value(json_object_get(m, "method")), "tools/call") == 0;
	return n;
}

/*
 * x-mcp-header (2026-07-28): once the front has served a list whose tool
 * marks arguments, a call of that tool must carry each marked argument it
 * has in an Mcp-Param-* header equal to it (Base64 form decoded, integers
 * as numbers), or it is answered 400 / -32020 and reaches no backend.
 */
static void test_param_headers(void **state)
{
	(void)state;
	struct hres r;
	htt_be.tools = json_loads("[{\"name\":\"deploy\",\"inputSchema\":{\"type\":\"object\","
		"\"properties\":{\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
		"\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"}}}}]", 0, NULL);
	assert_non_null(htt_be.tools);
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
		"\"name\":\"deploy\",\"arguments\":{\"region\":\"eu\",\"n\":5}," META26 "}}";
	const char *call_h = HDRS26 "Mcp-Method: tools/call\r\nMcp-Name: deploy\r\n";
	/* no list served yet: the front fetches one (once) before it checks the call */
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: deploy\r\n", call, 400, -32020,
		       "the Mcp-Param-Region header is required");
	assert_int_equal(calls_got(), 0);
	htt_req("POST", "/mcp", HDRS26 "Mcp-Method: tools/list\r\n",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" META26 "}}", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"x-mcp-header\":\"Region\""));
	hres_release(&r);
	size_t got = calls_got();
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: deploy\r\nMcp-Param-N: 5\r\n", call, 400,
		       -32020, "the Mcp-Param-Region header is required");
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: deploy\r\nMcp-Param-Region: us\r\n"
		       "Mcp-Param-N: 5\r\n", call, 400, -32020,
		       "the Mcp-Param-Region header does not match the body");
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: deploy\r\nmcp-param-region: eu\r\n"
		       "Mcp-Param-N: 6\r\n", call, 400, -32020,
		       "the Mcp-Param-N header does not match the body");
	expect_error26("Mcp-Method: tools/call\r\nMcp-Name: deploy\r\nMcp-Param-Region: =?base64?e!==?=\r\n"
		       "Mcp-Param-N: 5\r\n", call, 400, -32020, "Base64 form cannot be decoded");
	assert_int_equal(calls_got(), got);   /* none reached the backend */
	/* agreeing: the Base64 form of "eu", 5 as 5.0 */
	char hdrs[512];
	snprintf(hdrs, sizeof hdrs, "%sMcp-Param-Region: =?base64?ZXU=?=\r\nMcp-Param-N: 5.0\r\n", call_h);
	htt_req("POST", "/mcp", hdrs, call, &r);
	if (r.status != 200)
		fail_msg("HTTP %d: %s", r.status, r.body);
	hres_release(&r);
	/* an argument the call leaves out (or null) needs no header */
	snprintf(hdrs, sizeof hdrs, "%sMcp-Param-Region: eu\r\n", call_h);
	htt_req("POST", "/mcp", hdrs, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"deploy\",\"arguments\":{\"region\":\"eu\",\"n\":null}," META26 "}}", &r);
	if (r.status != 200)
		fail_msg("HTTP %d: %s", r.status, r.body);
	hres_release(&r);
	assert_int_equal(calls_got(), got + 2);
}

/* ---- limits ---- */

/* A session nobody uses for sessionIdleMs ends; a request, or an open
 * stream, keeps it. */
static void test_idle_expiry(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .session_idle = 0.3 };
	htt_start(&l, 4096, NULL);
	char sid[64], hdrs[160];
	struct hres r;
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	htt_run_for(0.2);
	htt_req("POST", "/mcp", with_sid(sid), LIST_BODY, &r);   /* used: the wait starts again */
	assert_int_equal(r.status, 200);
	hres_release(&r);
	htt_run_for(0.2);
	assert_int_equal(http_front_sessions(htt_front), 1);
	open_get(sid, NULL, &c);
	htt_run_for(0.5);   /* a stream is open: not idle */
	assert_int_equal(http_front_sessions(htt_front), 1);
	htt_close(&c);
	htt_run_for(0.8);
	assert_int_equal(http_front_sessions(htt_front), 0);
	expect_error("POST", "/mcp", with_sid(sid), LIST_BODY, 404, "Session not found");
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\n", sid);
	expect_error("DELETE", "/mcp", hdrs, NULL, 404, "Session not found");
}

/* Connections beyond maxConnections get 503 (a POST once its body is
 * read); those inside it go on; once one closes, a new one is served. */
static void test_connection_limit(void **state)
{
	(void)state;
	htt_stop();
	struct cfg_listen l = { .address = "127.0.0.1", .max_connections = 2 };
	htt_start(&l, 4096, NULL);
	char a[64], b[64];
	struct hconn ga, gb;
	htt_initialize("2025-11-25", NULL, a);
	htt_initialize("2025-11-25", NULL, b);
	open_get(a, NULL, &ga);
	open_get(b, NULL, &gb);
	expect_error("POST", "/mcp", with_sid(a), LIST_BODY, 503,
		     "Service Unavailable: too many connections");
	char hdrs[160];
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\n", a);
	expect_error("DELETE", "/mcp", hdrs, NULL, 503, "too many connections");
	assert_int_equal(http_front_sessions(htt_front), 2);   /* not deleted */
	struct hres r;
	htt_req("GET", "/healthz", "", NULL, &r);   /* no limit on health checks */
	assert_int_equal(r.status, 200);
	hres_release(&r);
	/* the two inside the limit still carry what comes */
	notify(1, 10);
	assert_true(htt_wait(&ga, "id: 0-1\n", 2.));
	assert_true(htt_wait(&gb, "id: 0-1\n", 2.));
	close_get(&ga);
	htt_req("POST", "/mcp", with_sid(a), LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	htt_close(&gb);
}

/* ---- bodies ---- */

/*
 * What the body holds: not JSON (-32700, id null), JSON that is no
 * request (the session's -32600 with HTTP 400), and Accept deciding
 * between one JSON body and an SSE answer.
 */
static void test_bodies(void **state)
{
	(void)state;
	char sid[64], msg[256];
	struct hres r;
	htt_initialize("2025-11-25", NULL, sid);
	htt_req("POST", "/mcp", with_sid(sid), "[{\"jsonrpc\":\"2.0\",", &r);
	assert_int_equal(r.status, 400);
	assert_int_equal(body_error(&r, msg, sizeof msg), RPC_PARSE_ERROR);
	json_t *b = hres_json(&r);
	assert_true(json_is_null(json_object_get(b, "id")));
	json_decref(b);
	hres_release(&r);
	htt_req("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"id\":3}", &r);
	assert_int_equal(r.status, 400);
	assert_int_equal(body_error(&r, msg, sizeof msg), RPC_INVALID_REQUEST);
	hres_release(&r);
	assert_int_equal(json_array_size(htt_be.got), 0);   /* neither reached the backend */
	assert_int_equal(http_front_busy(htt_front), 0);
	/* Accept: JSON only -> one JSON body */
	char hdrs[256];
	snprintf(hdrs, sizeof hdrs, "Content-Type: application/json\r\nAccept: application/json\r\n"
		 "Mcp-Session-Id: %s\r\n", sid);
	htt_req("POST", "/mcp", hdrs, LIST_BODY, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(hres_header(&r, "Content-Type"), "application/json");
	b = hres_json(&r);
	assert_string_equal(json_string_value(json_object_get(json_object_get(b, "result"), "echo")),
			    "tools/list");
	json_decref(b);
	hres_release(&r);
	/* Accept: SSE only: progress and the answer that come together go as
	 * one SSE body with its length; progress alone first starts a stream */
	htt_be.hold = true;
	for (int round = 0; round < 2; round++) {
		struct hconn c;
		char body[256];
		snprintf(hdrs, sizeof hdrs, "Content-Type: application/json\r\n"
			 "Accept: text/event-stream\r\nMcp-Session-Id: %s\r\n", sid);
		snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			 "\"params\":{\"name\":\"t\",\"_meta\":{\"progressToken\":7}}}", 4 + round);
		json_array_clear(htt_be.got);
		htt_open("POST", "/mcp", hdrs, body, &c);
		for (int i = 0; i < 100 && !be_got("tools/call"); i++)
			htt_run_for(0.01);
		json_t *call = be_got("tools/call");
		assert_non_null(call);
		progress(json_object_get(json_object_get(json_object_get(call, "params"), "_meta"),
					 "progressToken"), 1, 4);
		if (round == 1)
			assert_true(htt_wait(&c, "\"progressToken\":7", 2.));
		chain_receive(&htt_be.peer, rpc_result(json_object_get(call, "id"), json_object()));
		char want[64];
		snprintf(want, sizeof want, "\"id\":%d,\"result\":{}}\n\n", 4 + round);
		if (!htt_wait(&c, round ? "\r\n0\r\n\r\n" : want, 2.))
			fail_msg("no end of the answer in: %s", c.data);
		struct hres s;
		htt_parse(&c, &s);
		assert_int_equal(s.status, 200);
		assert_string_equal(hres_header(&s, "Content-Type"), "text/event-stream");
		if (round == 0)
			assert_int_equal(atoi(hres_header(&s, "Content-Length")), s.body_n);
		else
			assert_string_equal(hres_header(&s, "Transfer-Encoding"), "chunked");
		const char *p1 = strstr(s.body, "\"progressToken\":7");
		const char *p2 = strstr(s.body, want);
		assert_non_null(p1);
		assert_non_null(p2);
		assert_true(p1 < p2);
		char ev[64];
		snprintf(ev, sizeof ev, "id: %d-1\nevent: message\ndata: {", 4 + round);  /* after initialize, {"id":3}, tools/list */
		assert_true(strncmp(s.body, ev, strlen(ev)) == 0);
		hres_release(&s);
		htt_close(&c);
	}
	assert_int_equal(http_front_busy(htt_front), 0);
}

/* Sends one more request (METHOD, HEADERS, BODY) on C's open connection
 * and waits until what C read contains WANT. */
static void send_more(struct hconn *c, const char *method, const char *headers, const char *body,
		      const char *want)
{
	char raw[1024];
	int n = snprintf(raw, sizeof raw, "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu"
			 "\r\n\r\n%s", method, headers, body ? strlen(body) : 0, body ? body : "");
	assert_int_equal(write(c->fd, raw, (size_t)n), n);
	if (!htt_wait(c, want, 2.))
		fail_msg("no \"%s\" in: %s", want, c->data);
}

/* Draining: the listening socket closes; on a connection already open,
 * new requests and GET streams get 503, a notification is still taken. */
static void test_draining(void **state)
{
	(void)state;
	char sid[64], hdrs[160];
	struct hconn c;
	htt_initialize("2025-11-25", NULL, sid);
	htt_open("POST", "/mcp", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}",
		 &c);   /* kept alive */
	assert_true(htt_wait(&c, "HTTP/1.1 202", 2.));
	htt_run_for(0.05);
	http_front_drain(htt_front);
	free(c.data);
	c.data = NULL;
	c.n = 0;
	send_more(&c, "POST", with_sid(sid), LIST_BODY, "mcp-chain is shutting down");
	assert_true(strncmp(c.data, "HTTP/1.1 503", 12) == 0);
	/* the refused request's own id */
	assert_non_null(strstr(c.data, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,"
			       "\"message\":\"Service Unavailable: mcp-chain is shutting down\"}}"));
	free(c.data);
	c.data = NULL;
	c.n = 0;
	send_more(&c, "POST", with_sid(sid), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}",
		  "\r\n\r\n");
	assert_true(strncmp(c.data, "HTTP/1.1 202", 12) == 0);
	snprintf(hdrs, sizeof hdrs, "Mcp-Session-Id: %s\r\nAccept: text/event-stream\r\n", sid);
	free(c.data);
	c.data = NULL;
	c.n = 0;
	send_more(&c, "GET", hdrs, NULL, "shutting down");
	assert_true(strncmp(c.data, "HTTP/1.1 503", 12) == 0);
	htt_close(&c);
	assert_int_equal(http_front_sessions(htt_front), 1);
	assert_null(be_got("tools/list"));   /* refused requests never reached it */
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
		T(test_get_resume),
		T(test_get_resume_after_trim),
		T(test_held_backlog),
		T(test_slow_reader),
		T(test_post_resume),
		T(test_stateless_post),
		T(test_param_headers),
		T(test_idle_expiry),
		T(test_connection_limit),
		T(test_bodies),
		T(test_draining),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
