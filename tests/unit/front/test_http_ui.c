/*
 * test_http_ui.c - unit tests for src/front/http_ui.c, the live page's
 * part of the HTTP front, started in-process: assets after the Host and
 * Origin checks alone, the data (/ui/state, /ui/events) checked as
 * /metrics, the streams (a snapshot at once, events as the app sends
 * them, at most HTTP_UI_STREAMS, a reader that does not read dropped),
 * the page off (404), and what the front tells the app: its sessions
 * (http_front_each_session) and its traffic (http_front_traffic).
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
#include "observe.h"
#include "rpc.h"

/* Hex SHA-256 of "tok-good" (sha256sum). */
#define H_GOOD "7f2229ad1890e9f69a8cac4e933a506e4571dc3e109280c10d1c34ab417a104a"
#define JSON_HDRS "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"

static const unsigned char page[] = "<!doctype html><title>t</title>";
static const unsigned char js[] = "export {};";
static const struct http_ui_asset assets[] = {
	{ "/ui", "text/html; charset=utf-8", page, sizeof page - 1 },
	{ "/ui/app.js", "text/javascript; charset=utf-8", js, sizeof js - 1 },
};

static unsigned snapshots, with_events;

/* The app's part: a snapshot that counts itself. */
static void snapshot(void *arg, struct buf *out, bool events)
{
	assert_ptr_equal(arg, &snapshots);
	snapshots++;
	with_events += events;
	buf_printf(out, "{\"n\":%u%s}", snapshots, events ? ",\"events\":[]" : "");
}

/* The front with the page on, and AUTH_TOKENS as htt_start takes them. */
static void start(const char *auth_tokens)
{
	htt_start(NULL, 4096, auth_tokens);
	snapshots = with_events = 0;
	http_front_set_ui(htt_front, assets, 2, snapshot, &snapshots);
}

static int teardown(void **state)
{
	(void)state;
	htt_stop();
	return 0;
}

/* GET PATH with HEADERS: its status. */
static int status_of(const char *path, const char *headers)
{
	struct hres r;
	htt_req("GET", path, headers, NULL, &r);
	int s = r.status;
	hres_release(&r);
	return s;
}

/* The assets: served with their type and the page's headers; "/ui/" is
 * "/ui"; an unknown path 404; another method 405; a foreign Origin or
 * Host 403. No token is asked for them. */
static void test_assets(void **state)
{
	(void)state;
	start("[{\"sha256\":\"" H_GOOD "\",\"principal\":\"alice\"}]");
	struct hres r;
	htt_req("GET", "/ui", "", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, (const char *)page);
	assert_string_equal(hres_header(&r, "Content-Type"), "text/html; charset=utf-8");
	assert_non_null(strstr(hres_header(&r, "Content-Security-Policy"), "default-src 'self'"));
	assert_string_equal(hres_header(&r, "X-Content-Type-Options"), "nosniff");
	assert_string_equal(hres_header(&r, "Cache-Control"), "no-store");
	hres_release(&r);
	htt_req("GET", "/ui/app.js", "", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(hres_header(&r, "Content-Type"), "text/javascript; charset=utf-8");
	hres_release(&r);
	assert_int_equal(status_of("/ui/", ""), 200);
	assert_int_equal(status_of("/ui/nope", ""), 404);
	assert_int_equal(status_of("/uix", ""), 404);
	htt_req("DELETE", "/ui", "", NULL, &r);
	assert_int_equal(r.status, 405);
	hres_release(&r);
	assert_int_equal(status_of("/ui", "Origin: http://evil.example\r\n"), 403);
	assert_int_equal(status_of("/ui", "Host: evil.example\r\n"), 403);
	assert_int_equal(snapshots, 0);   /* no data was asked for */
}

/* The data: 401 without the token or with another, 403 for a foreign
 * Origin, a snapshot with the events with it. */
static void test_data_checked(void **state)
{
	(void)state;
	start("[{\"sha256\":\"" H_GOOD "\",\"principal\":\"alice\"}]");
	assert_int_equal(status_of("/ui/state", ""), 401);
	assert_int_equal(status_of("/ui/events", "Accept: text/event-stream\r\n"), 401);
	assert_int_equal(status_of("/ui/state", "Authorization: Bearer tok-other\r\n"), 401);
	assert_int_equal(status_of("/ui/state", "Authorization: Bearer tok-good\r\n"
				   "Origin: http://evil.example\r\n"), 403);
	assert_int_equal(snapshots, 0);
	struct hres r;
	htt_req("GET", "/ui/state", "Authorization: Bearer tok-good\r\n", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "{\"n\":1,\"events\":[]}");
	assert_string_equal(hres_header(&r, "Cache-Control"), "no-store");
	hres_release(&r);
	assert_int_equal(with_events, 1);
}

/* A stream: a snapshot with the events at once, the app's events as it
 * sends them, a snapshot without them every second; 16 at most. */
static void test_streams(void **state)
{
	(void)state;
	start(NULL);
	struct hconn c[HTTP_UI_STREAMS + 1];
	for (int i = 0; i < HTTP_UI_STREAMS; i++) {
		htt_open("GET", "/ui/events", "Accept: text/event-stream\r\n", NULL, &c[i]);
		assert_true(htt_wait(&c[i], "\"events\":[]}\n\n", 2.));
		assert_true(strncmp(c[i].data, "HTTP/1.1 200", 12) == 0);
		assert_non_null(strstr(c[i].data, "Content-Type: text/event-stream"));
	}
	assert_int_equal(http_front_ui_streams(htt_front), HTTP_UI_STREAMS);
	htt_open("GET", "/ui/events", "Accept: text/event-stream\r\n", NULL, &c[HTTP_UI_STREAMS]);
	assert_true(htt_wait(&c[HTTP_UI_STREAMS], "too many /ui/events streams", 2.));
	assert_true(strncmp(c[HTTP_UI_STREAMS].data, "HTTP/1.1 503", 12) == 0);
	htt_close(&c[HTTP_UI_STREAMS]);
	http_front_ui_send(htt_front, "event", "{\"what\":\"up\"}", 13);
	for (int i = 0; i < HTTP_UI_STREAMS; i++)
		assert_true(htt_wait(&c[i], "event: event\ndata: {\"what\":\"up\"}\n\n", 2.));
	/* the timer: one snapshot for all, without the events */
	unsigned before = snapshots;
	assert_true(htt_wait(&c[0], "event: snapshot\ndata: {\"n\":", 3.));
	assert_true(htt_wait(&c[0], "}\n\n", 3.));
	htt_run_for(1.2);
	assert_true(snapshots > before && snapshots - before <= 3);
	assert_int_equal(with_events, HTTP_UI_STREAMS);
	/* one closed: its place is free again */
	htt_close(&c[0]);
	htt_run_for(0.1);
	assert_int_equal(http_front_ui_streams(htt_front), HTTP_UI_STREAMS - 1);
	htt_open("GET", "/ui/events", "Accept: text/event-stream\r\n", NULL, &c[0]);
	assert_true(htt_wait(&c[0], "\"events\":[]}\n\n", 2.));
	/* the stop ends them properly */
	http_front_stop(htt_front, "test");
	for (int i = 0; i < HTTP_UI_STREAMS; i++) {
		assert_true(htt_wait(&c[i], "\r\n0\r\n\r\n", 2.));
		htt_close(&c[i]);
	}
}

/* A reader that takes nothing is dropped once HTTP_UI_BUFFER bytes wait
 * for it: memory stays bounded whatever the app sends. */
static void test_slow_reader(void **state)
{
	(void)state;
	start(NULL);
	struct hconn c;
	htt_open("GET", "/ui/events", "Accept: text/event-stream\r\n", NULL, &c);
	htt_run_for(0.1);
	assert_int_equal(http_front_ui_streams(htt_front), 1);
	char *big = malloc(65536);
	assert_non_null(big);
	memset(big, 'x', 65536);
	big[0] = '"';
	big[65535] = '"';
	/* the kernel's buffers take some; then the front's, up to the bound */
	for (int i = 0; i < 2000 && http_front_ui_streams(htt_front) > 0; i++) {
		http_front_ui_send(htt_front, "event", big, 65536);
		htt_run_for(0.001);
	}
	free(big);
	assert_int_equal(http_front_ui_streams(htt_front), 0);
	htt_close(&c);
}

/* listen.ui false: the app sets nothing, and /ui is an unknown path. */
static void test_off(void **state)
{
	(void)state;
	htt_start(NULL, 4096, NULL);
	assert_int_equal(status_of("/ui", ""), 404);
	assert_int_equal(status_of("/ui/events", "Accept: text/event-stream\r\n"), 404);
}

/* A session as the app is told of it. */
static struct http_session_info seen;
static char seen_client[64];
static unsigned nseen;
static void on_session(void *arg, const struct http_session_info *i)
{
	assert_null(arg);
	seen = *i;
	snprintf(seen_client, sizeof seen_client, "%s", i->client ? i->client : "");
	nseen++;
}

/* The sessions (the first 8 characters of an id, no more) and the
 * traffic by method and outcome, as the page gets them. */
static void test_sessions_and_traffic(void **state)
{
	(void)state;
	htt_start(NULL, 4096, NULL);
	char sid[64], hdrs[256];
	htt_initialize("2025-11-25", NULL, sid);
	http_front_each_session(htt_front, on_session, NULL);
	assert_int_equal(nseen, 1);
	assert_int_equal(strlen(seen.sid), 8);
	assert_true(strncmp(seen.sid, sid, 8) == 0);
	assert_string_equal(seen.version, "2025-11-25");
	assert_string_equal(seen.transport, "streamable");
	assert_null(seen.subject);
	assert_int_equal(seen.open, 0);
	assert_true(seen.age >= 0);
	assert_string_equal(seen_client, "t");
	snprintf(hdrs, sizeof hdrs, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
	struct hres r;
	htt_req("POST", "/mcp", hdrs, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	json_t *t = http_front_traffic(htt_front);
	json_t *list = json_object_get(t, "tools/list");
	assert_int_equal(json_integer_value(json_object_get(list, "ok")), 1);
	assert_int_equal(json_integer_value(json_object_get(list, "error")), 0);
	assert_int_equal(json_array_size(json_object_get(list, "buckets")),
			 json_array_size(json_object_get(t, "latency_bounds")) + 1);
	assert_null(json_object_get(t, "prompts/list"));   /* never seen: left out */
	json_decref(t);
}

/* The events told, as "KIND:WHAT:SOURCE:METHOD:CODE:CLIENT:DETAIL " lines. */
static char told[2048];
static void on_event(void *arg, const struct obs_event *e)
{
	static const char *const kinds[] = { "decision", "backend", "error", "session" };
	(void)arg;
	size_t n = strlen(told);
	snprintf(told + n, sizeof told - n, "%s:%s:%s:%s:%d:%s:%s\n", kinds[e->kind], e->what,
		 e->source ? e->source : "", e->method ? e->method : "", e->code,
		 e->client ? e->client : "", e->detail ? e->detail : "");
}

/* What the front tells the observers (observe.h): a session opened and
 * closed (with the reason), and a request that ended with a JSON-RPC
 * error (its method, code and message), whether the error came as a
 * tree or as bytes. Answers that are not errors are not told. */
static void test_events(void **state)
{
	(void)state;
	htt_start(NULL, 4096, NULL);
	told[0] = '\0';
	assert_int_equal(observe_listen(on_event, NULL), 0);
	char sid[64], hdrs[256];
	htt_initialize("2025-11-25", NULL, sid);
	snprintf(hdrs, sizeof hdrs, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
	struct hres r;
	htt_req("POST", "/mcp", hdrs, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	assert_null(strstr(told, "error:"));
	/* the backend answers a call with an error: a tree, then bytes */
	for (int k = 0; k < 2; k++) {
		htt_be.hold = true;
		size_t before = json_array_size(htt_be.got);
		struct hconn c;
		char body[128];
		snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			 "\"params\":{\"name\":\"t\"}}", 10 + k);
		htt_open("POST", "/mcp", hdrs, body, &c);
		for (int i = 0; i < 100 && json_array_size(htt_be.got) == before; i++)
			htt_run_for(0.01);
		json_t *m = json_array_get(htt_be.got, json_array_size(htt_be.got) - 1);
		assert_string_equal(json_string_value(json_object_get(m, "method")), "tools/call");
		json_t *err = rpc_error(json_object_get(m, "id"), -32602, "no such tool", NULL);
		if (k == 0) {
			chain_receive(&htt_be.peer, err);
		} else {
			char *line = json_dumps(err, JSON_COMPACT);
			json_decref(err);
			json_t *jerr = NULL;
			assert_true(chain_receive_line(&htt_be.peer, line, strlen(line), &jerr));
			free(line);
		}
		assert_true(htt_wait(&c, "no such tool", 2.));
		htt_close(&c);
		htt_be.hold = false;
	}
	const char *want = "error:error:http#1:tools/call:-32602:t:no such tool\n";
	char *first = strstr(told, want);
	assert_non_null(first);
	assert_non_null(strstr(first + 1, want));   /* both ways */
	htt_req("DELETE", "/mcp", hdrs, NULL, &r);
	assert_int_equal(r.status, 200);
	hres_release(&r);
	assert_non_null(strstr(told, "session:opened:session #1:"));
	assert_non_null(strstr(told, "session:closed:session #1::0:t:deleted by the client\n"));
	observe_unlisten(on_event, NULL);
}

int main(void)
{
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_teardown(name, teardown)
	const struct CMUnitTest tests[] = {
		T(test_assets),
		T(test_data_checked),
		T(test_streams),
		T(test_slow_reader),
		T(test_off),
		T(test_sessions_and_traffic),
		T(test_events),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
