/*
 * test_http_legacy.c - unit tests for src/front/http_legacy.c: the legacy
 * HTTP+SSE transport (MCP 2024-11-05) beside Streamable HTTP: which
 * endpoint a URL is, the GET stream and its "endpoint" event, POSTs to
 * the messages path (sessionId checks, 202, answers down the stream),
 * and the session ending with its stream.
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

#include "http_test.h"
#include "log.h"
#include "rpc.h"
#include "src/front/http_int.h"

#define JSON_HDRS "Content-Type: application/json\r\n"
#define INIT_BODY "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":" \
	"{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

static char *sse_path = "/sse", *messages_path = "/messages";

static int setup(void **state)
{
	(void)state;
	struct cfg_listen l = { .address = "127.0.0.1", .sse_path = sse_path,
				.messages_path = messages_path };
	htt_start(&l, 4096, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	htt_stop();
	return 0;
}

/* Sends R, expects STATUS and an error body whose message contains TEXT. */
static void expect_error(const char *method, const char *path, const char *headers,
			 const char *body, int status, const char *text)
{
	struct hres r;
	htt_req(method, path, headers, body, &r);
	if (r.status != status)
		fail_msg("%s %s: HTTP %d, wanted %d: %s", method, path, r.status, status, r.body);
	json_t *b = hres_json(&r);
	const char *msg = json_string_value(json_object_get(json_object_get(b, "error"), "message"));
	assert_non_null(msg);
	if (!strstr(msg, text))
		fail_msg("%s %s: message \"%s\" lacks \"%s\"", method, path, msg, text);
	json_decref(b);
	hres_release(&r);
}

/* Opens the legacy stream on C; its messages URL into URL (256 bytes). */
static void open_stream(struct hconn *c, char *url)
{
	htt_open("GET", "/sse", "Accept: text/event-stream\r\n", NULL, c);
	assert_true(htt_wait(c, "event: endpoint\ndata: ", 2.));
	assert_true(htt_wait(c, "sessionId=", 2.));
	const char *d = strstr(c->data, "event: endpoint\ndata: ") + strlen("event: endpoint\ndata: ");
	/* the id is 32 hex digits */
	char want[128];
	snprintf(want, sizeof want, "%.*s", (int)(strstr(d, "sessionId=") - d) + 10 + 32, d);
	assert_true(htt_wait(c, want, 2.));
	assert_true(htt_wait(c, "\n\n", 2.));
	snprintf(url, 256, "%s", want);
	assert_true(strncmp(url, "/messages?sessionId=", 20) == 0);
	assert_non_null(strstr(c->data, "HTTP/1.1 200"));
	assert_non_null(strstr(c->data, "text/event-stream"));
}

/* The endpoint of a URL, with the legacy transport on and off. */
static void test_endpoint(void **state)
{
	(void)state;
	struct http_front f;
	memset(&f, 0, sizeof f);
	f.path = "/mcp";
	assert_int_equal(http_legacy_endpoint(&f, "/mcp"), EP_MCP);
	assert_int_equal(http_legacy_endpoint(&f, "/sse"), -1);
	assert_int_equal(http_legacy_endpoint(&f, "/messages"), -1);
	f.sse_path = "/sse";
	f.messages_path = "/messages";
	assert_int_equal(http_legacy_endpoint(&f, "/mcp"), EP_MCP);
	assert_int_equal(http_legacy_endpoint(&f, "/sse"), EP_SSE);
	assert_int_equal(http_legacy_endpoint(&f, "/messages"), EP_MESSAGES);
	assert_int_equal(http_legacy_endpoint(&f, "/sse/"), -1);
	assert_int_equal(http_legacy_endpoint(&f, "/mcp2"), -1);
	assert_int_equal(http_legacy_endpoint(&f, ""), -1);
}

/* The whole exchange: the stream names the messages URL; a POST there is
 * accepted at once and its answer comes down the stream. */
static void test_stream_and_post(void **state)
{
	(void)state;
	struct hconn c;
	char url[256];
	open_stream(&c, url);
	assert_int_equal(http_front_sessions(htt_front), 1);
	struct hres r;
	htt_req("POST", url, JSON_HDRS, INIT_BODY, &r);
	assert_int_equal(r.status, 202);
	assert_string_equal(r.body, "Accepted");
	assert_null(hres_header(&r, "Mcp-Session-Id"));
	hres_release(&r);
	assert_true(htt_wait(&c, "\"protocolVersion\":\"2024-11-05\"", 2.));
	assert_non_null(strstr(c.data, "event: message\ndata: {"));
	htt_req("POST", url, JSON_HDRS, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
	assert_int_equal(r.status, 202);
	hres_release(&r);
	htt_req("POST", url, JSON_HDRS, "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"tools/list\"}", &r);
	assert_int_equal(r.status, 202);
	hres_release(&r);
	assert_true(htt_wait(&c, "{\"echo\":\"tools/list\"}", 2.));
	assert_non_null(strstr(c.data, "\"id\":\"q\""));
	/* a backend's notification goes down the one stream too */
	chain_receive(&htt_be.peer, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
					      "notifications/tools/list_changed"));
	assert_true(htt_wait(&c, "notifications/tools/list_changed", 2.));
	/* the session's id is not an Mcp-Session-Id */
	const char *sid = strstr(url, "sessionId=") + 10;
	char hdrs[256];
	snprintf(hdrs, sizeof hdrs, JSON_HDRS "Accept: application/json\r\nMcp-Session-Id: %s\r\n", sid);
	expect_error("POST", "/mcp", hdrs, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", 404,
		     "Session not found");
	htt_close(&c);
}

static void test_post_refusals(void **state)
{
	(void)state;
	struct hconn c;
	char url[256], bad[300];
	open_stream(&c, url);
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
	expect_error("POST", "/messages", JSON_HDRS, body, 400, "sessionId parameter is required");
	expect_error("POST", "/messages?sessionId=0123456789abcdef0123456789abcdef", JSON_HDRS, body, 404,
		     "Session not found");
	expect_error("POST", "/messages?sessionId=zz", JSON_HDRS, body, 404, "Session not found");
	snprintf(bad, sizeof bad, "MCP-Protocol-Version: 1999-01-01\r\n" JSON_HDRS);
	expect_error("POST", url, bad, body, 400, "unsupported MCP-Protocol-Version");
	expect_error("POST", url, "Content-Type: text/plain\r\n", body, 415, "Unsupported Media Type");
	expect_error("POST", url, "Origin: http://evil.example\r\n" JSON_HDRS, body, 403, "Origin");
	/* not JSON: 400 with the parse error */
	struct hres r;
	htt_req("POST", url, JSON_HDRS, "{\"jsonrpc\"", &r);
	assert_int_equal(r.status, 400);
	json_t *b = hres_json(&r);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(b, "error"), "code")),
			 RPC_PARSE_ERROR);
	json_decref(b);
	hres_release(&r);
	/* too big */
	char big[4300];
	memset(big, ' ', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memcpy(big, body, strlen(body));
	expect_error("POST", url, JSON_HDRS, big, 413, "maxMessageBytes (4096)");
	/* the wrong method on either path */
	expect_error("POST", "/sse", JSON_HDRS, body, 405, "Method Not Allowed");
	expect_error("GET", url, "Accept: text/event-stream\r\n", NULL, 405, "Method Not Allowed");
	expect_error("DELETE", "/sse", "", NULL, 405, "Method Not Allowed");
	/* none of it reached the backend, and the session lives on */
	assert_int_equal(json_array_size(htt_be.got), 0);
	assert_int_equal(http_front_sessions(htt_front), 1);
	htt_close(&c);
}

/* The stream closing ends its session (on the loop's next turn); its id
 * is then unknown. */
static void test_stream_close_ends_session(void **state)
{
	(void)state;
	struct hconn a, b;
	char url_a[256], url_b[256];
	open_stream(&a, url_a);
	open_stream(&b, url_b);
	assert_string_not_equal(url_a, url_b);
	assert_int_equal(http_front_sessions(htt_front), 2);
	htt_close(&a);
	for (int i = 0; i < 50 && http_front_sessions(htt_front) != 1; i++)
		htt_run_for(0.02);
	assert_int_equal(http_front_sessions(htt_front), 1);
	expect_error("POST", url_a, JSON_HDRS, INIT_BODY, 404, "Session not found");
	struct hres r;
	htt_req("POST", url_b, JSON_HDRS, INIT_BODY, &r);
	assert_int_equal(r.status, 202);
	hres_release(&r);
	htt_close(&b);
}

/* Shutting down: a new stream is refused; stopping ends the open ones. */
static void test_stop(void **state)
{
	(void)state;
	struct hconn c;
	char url[256];
	open_stream(&c, url);
	http_front_stop(htt_front, "test stop");
	assert_int_equal(http_front_sessions(htt_front), 0);
	assert_true(htt_wait(&c, NULL, 2.));   /* the stream ends */
	htt_close(&c);
}

int main(void)
{
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_endpoint),
		T(test_stream_and_post),
		T(test_post_refusals),
		T(test_stream_close_ends_session),
		T(test_stop),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
