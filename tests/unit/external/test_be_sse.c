/*
 * test_be_sse.c - unit tests for src/external/be_sse.c, the legacy
 * HTTP+SSE generation of the HTTP upstream transport: the event stream is
 * opened at start; messages wait until its "endpoint" event names where to
 * POST (relative to the stream's URL, and only on its origin); every
 * answer arrives on the stream, to the client with its own id; a POST that
 * fails answers its request with an error; the transport is down, with the
 * reason, when the stream cannot be opened, is not an event stream, names
 * an endpoint elsewhere, or ends.
 *
 * The backend and chain are real; the upstream is the scripted server of
 * http_stub.c on the same loop; a fake ready client (ext_test.h) sends
 * requests through the chain and receives what comes back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "curl_ev.h"
#include "ext_test.h"
#include "http_stub.h"
#include "up_test.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"


/* ---- the scripted server ---- */

static struct {
	int get_status;              /* answer to the stream's GET: 200 unless set */
	const char *get_type;        /* its Content-Type, text/event-stream unless set */
	struct stub_conn *stream;    /* the open event stream */
	int post_status;             /* answer to POSTs: 202 unless set; -1: hang up */
	bool answer;                 /* answer requests on the stream */
} SV;

/* Sends one "message" event with TEXT on the stream. */
static void push(const char *text)
{
	char *ev;
	assert_true(asprintf(&ev, "event: message\ndata: %s\n\n", text) > 0);
	stub_write(SV.stream, ev);
	free(ev);
}

static void handler(struct stub_conn *c, const struct stub_req *r, void *arg)
{
	(void)arg;
	if (strcmp(r->method, "GET") == 0) {
		int st = SV.get_status ? SV.get_status : 200;
		if (st != 200) {
			stub_reply(c, st, "text/plain", NULL, "no stream here");
			return;
		}
		stub_head(c, 200, SV.get_type ? SV.get_type : "text/event-stream", NULL);
		SV.stream = c;
		return;
	}
	int st = SV.post_status ? SV.post_status : 202;
	if (st < 0) {  /* hang up without a reply */
		stub_close(c);
		return;
	}
	stub_reply(c, st, "text/plain", NULL, st == 202 ? "Accepted" : "refused here");
	if (st != 202 || !SV.answer)
		return;
	json_t *m = ext_json(r->body);
	json_t *id = json_object_get(m, "id");
	const char *method = json_string_value(json_object_get(m, "method"));
	if (id && method) {
		json_t *res = strcmp(method, "initialize") == 0 ?
			ext_json("{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},"
				 "\"serverInfo\":{\"name\":\"old\",\"version\":\"1\"}}") :
			json_pack("{s:s}", "echo", method);
		json_t *resp = rpc_result(id, res);
		char *t = json_dumps(resp, JSON_COMPACT);
		push(t);
		free(t);
		json_decref(resp);
	}
	json_decref(m);
}

/* ---- helpers ---- */

static bool stream_open(const void *arg)
{
	(void)arg;
	return SV.stream != NULL;
}

/* Makes the "sse" backend and starts it: the stream's GET goes out. */
static void make(void)
{
	up_make(ext_cfgf("{\"mcpServers\":{\"old\":{\"type\":\"sse\","
			 "\"url\":\"http://127.0.0.1:%d/sse?k=1\",\"restart\":false,"
			 "\"headers\":{\"Authorization\":\"Bearer cfg-token\"}}}}", U.port));
}

/* Asks the backend to initialize (the answer comes to U.init_answers). */
static void ask_initialize(void)
{
	up_ask_initialize("{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},"
			  "\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}");
}

/* Started, given the endpoint, initialized. */
static void make_ready(void)
{
	SV.answer = true;
	make();
	assert_true(ext_run_until(stream_open, NULL, 5.0));
	stub_write(SV.stream, "event: endpoint\ndata: /messages?sessionId=abc\n\n");
	ask_initialize();
	assert_true(ext_run_until(up_init_answered, NULL, 5.0));
	assert_int_equal(backend_state(U.be), BACKEND_READY);
}

static void call(int id, const char *name)
{
	chain_receive(&U.cl.peer, json_pack("{s:s, s:i, s:s, s:{s:s}}", "jsonrpc", "2.0",
					  "id", id, "method", "tools/call", "params", "name", name));
}

static void assert_has(const char *s, const char *text)
{
	if (!s || !strstr(s, text))
		fail_msg("\"%s\" lacks \"%s\"", s ? s : "(null)", text);
}

static const char *error_message(size_t i, int id)
{
	json_t *m = ext_client_msg(&U.cl, i);
	assert_int_equal(json_integer_value(json_object_get(m, "id")), id);
	json_t *e = json_object_get(m, "error");
	assert_non_null(e);
	return json_string_value(json_object_get(e, "message"));
}

static bool requests_at_least(const void *arg)
{
	return stub_count() >= (uintptr_t)arg;
}

static int setup(void **state)
{
	(void)state;
	memset(&SV, 0, sizeof SV);
	up_setup(handler);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	up_teardown(0.5);
	return 0;
}

/* ---- tests ---- */

/*
 * The stream is opened at start with the configured headers; initialize
 * waits for the endpoint, then is POSTed to it (resolved against the
 * stream's URL); answers arrive on the stream; a client's request gets its
 * answer with its own id.
 */
static void test_endpoint_then_posts(void **state)
{
	(void)state;
	SV.answer = true;
	make();
	assert_true(ext_run_until(stream_open, NULL, 5.0));
	const struct stub_req *g = stub_get(0);
	assert_string_equal(g->method, "GET");
	assert_string_equal(g->path, "/sse?k=1");
	assert_string_equal(stub_header(g, "Accept"), "text/event-stream");
	assert_string_equal(stub_header(g, "Authorization"), "Bearer cfg-token");

	ask_initialize();
	ext_run_for(0.05);
	assert_int_equal(stub_count(), 1);  /* held: no endpoint yet */
	assert_int_equal(json_array_size(U.init_answers), 0);

	stub_write(SV.stream, ": a comment\n\nevent: endpoint\ndata: /messages?sessionId=abc\n\n");
	assert_true(ext_run_until(up_init_answered, NULL, 5.0));
	assert_int_equal(backend_state(U.be), BACKEND_READY);
	const struct stub_req *p = stub_get(1);
	assert_string_equal(p->method, "POST");
	assert_string_equal(p->path, "/messages?sessionId=abc");
	assert_string_equal(stub_header(p, "Authorization"), "Bearer cfg-token");
	assert_string_equal(stub_header(p, "Content-Type"), "application/json");
	assert_null(stub_header(p, "Mcp-Session-Id"));
	json_t *body = ext_json(p->body);
	assert_string_equal(json_string_value(json_object_get(body, "method")), "initialize");
	json_decref(body);

	call(42, "t");
	ext_wait_got(&U.cl, 1, 5.0);
	json_t *m = ext_client_msg(&U.cl, 0);
	assert_int_equal(json_integer_value(json_object_get(m, "id")), 42);
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "result"), "echo")),
			    "tools/call");
	assert_int_equal(chain_open_exchanges(U.ch), 0);
}

/* A server's own message on the stream reaches the client; a POST refused
 * with an error status, or hung up on, answers its request with an error
 * naming the endpoint. */
static void test_push_and_post_error(void **state)
{
	(void)state;
	make_ready();
	push("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	     "\"params\":{\"level\":\"info\",\"data\":\"hi\"}}");
	ext_wait_got(&U.cl, 1, 5.0);
	assert_string_equal(json_string_value(json_object_get(ext_client_msg(&U.cl, 0), "method")),
			    "notifications/message");
	SV.post_status = 500;
	call(8, "t");
	ext_wait_got(&U.cl, 2, 5.0);
	const char *msg = error_message(1, 8);
	assert_has(msg, "HTTP 500 from http://127.0.0.1:");
	assert_has(msg, "/messages?sessionId=abc: refused here");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(
		ext_client_msg(&U.cl, 1), "error"), "data"), "httpStatus")), 500);
	SV.post_status = -1;
	call(9, "t");
	ext_wait_got(&U.cl, 3, 5.0);
	msg = error_message(2, 9);
	assert_has(msg, "HTTP request to http://127.0.0.1:");
	assert_has(msg, "/messages?sessionId=abc failed: ");
	assert_int_equal(backend_state(U.be), BACKEND_READY);  /* the stream still stands */
}

/* The stream ends: the open request is failed with the reason, and the
 * backend is down (failed, with restart off). */
static void test_stream_lost(void **state)
{
	(void)state;
	make_ready();
	SV.answer = false;  /* the request stays open */
	call(6, "t");
	assert_true(ext_run_until(requests_at_least, (const void *)(uintptr_t)3, 5.0));
	stub_close(SV.stream);
	ext_wait_state(U.be, BACKEND_FAILED, 5.0);
	assert_string_equal(backend_peer(U.be)->why_down, "the SSE stream closed");
	ext_wait_got(&U.cl, 1, 1.0);
	assert_has(error_message(0, 6), "the SSE stream closed");
	assert_int_equal(chain_open_exchanges(U.ch), 0);
}

/* An endpoint on another origin is refused: nothing is POSTed there (the
 * configured credentials stay home) and the transport is down. */
static void test_endpoint_other_origin(void **state)
{
	(void)state;
	make();
	assert_true(ext_run_until(stream_open, NULL, 5.0));
	ask_initialize();
	stub_write(SV.stream, "event: endpoint\ndata: http://127.0.0.2:1/steal\n\n");
	ext_wait_state(U.be, BACKEND_FAILED, 5.0);
	assert_has(backend_peer(U.be)->why_down, "is not on the stream's origin");
	assert_int_equal(stub_count(), 1);
	assert_true(ext_run_until(up_init_answered, NULL, 1.0));
	assert_non_null(json_object_get(json_array_get(U.init_answers, 0), "error"));
}

/* A stream that cannot be had: an error status, or a reply that is not an
 * event stream; each is down with its reason. */
static void test_stream_refused(void **state)
{
	(void)state;
	SV.get_status = 404;
	make();
	ext_wait_state(U.be, BACKEND_FAILED, 5.0);
	assert_has(backend_peer(U.be)->why_down, "HTTP 404 for the SSE stream http://127.0.0.1:");
	assert_has(backend_peer(U.be)->why_down, ": no stream here");
	backend_free(U.be);
	U.be = NULL;
	cfg_free(U.cfg);
	U.cfg = NULL;

	SV.get_status = 200;
	SV.get_type = "application/json";
	make();
	assert_true(ext_run_until(stream_open, NULL, 5.0));
	stub_write(SV.stream, "{}");
	stub_close(SV.stream);
	ext_wait_state(U.be, BACKEND_FAILED, 5.0);
	assert_has(backend_peer(U.be)->why_down, "is not an event stream");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_endpoint_then_posts),
		T(test_push_and_post_error),
		T(test_stream_lost),
		T(test_endpoint_other_origin),
		T(test_stream_refused),
	};
	return ext_curl_main("be_sse", tests, sizeof tests / sizeof tests[0]);
}
