/*
 * test_http_xfer.c - unit tests for src/external/http_xfer.c, the part of
 * the HTTP upstream transport that does not depend on the protocol
 * generation, through http_int.h: messages serialized for POSTing
 * (out_new: request id, initialize markers, the 2026-07-28 era's header
 * values), request headers (configured ones minus those the transport
 * sets itself, session and era headers), error replies read back
 * (hx_reply_message, hx_reply_error, hx_error), the inbox and its flush
 * (delivery in order at the loop's safe point, held back while paused,
 * http_fail's error answer, http_down reported after what came before,
 * also when it is called from inside another prepare watcher).
 *
 * No transfer is started: a transfer is made (hx_new) and inspected, its
 * reply body filled by hand. The backend is a real one (an "http" entry,
 * never started); what it delivers reaches a fake ready client.
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
#include <strings.h>

#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "era.h"
#include "ext_test.h"
#include "../../../src/external/http_int.h"  /* the folder's internal header */
#include "log.h"
#include "peer.h"
#include "rpc.h"

static struct chain *CH;
static struct cfg *C;
static struct backend *BE;
static struct be_http *S;

static struct ext_client CL;

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	CH = chain_new();
	ext_client_init(&CL, CH);
	C = ext_cfg("{\"maxMessageBytes\":4096,\"mcpServers\":{\"h\":{\"type\":\"http\","
		    "\"url\":\"http://127.0.0.1:9/mcp\",\"restart\":false,"
		    "\"headers\":{\"Authorization\":\"Bearer t\",\"Accept\":\"x/y\","
		    "\"mcp-session-id\":\"forged\",\"X-Extra\":\"1\"}}}}");
	BE = backend_new(CH, C, &C->servers[0], NULL, NULL);
	assert_non_null(BE);
	S = http_new(BE, &http_streamable);
	assert_non_null(S);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	http_free(S);
	S = NULL;
	backend_free(BE);
	BE = NULL;
	cfg_free(C);
	C = NULL;
	ext_client_release(&CL);
	chain_free(CH);
	CH = NULL;
	return 0;
}

/* True when X's request headers include the line LINE exactly. */
static bool has_header(const struct hx *x, const char *line)
{
	for (const struct curl_slist *l = x->hdrs; l; l = l->next)
		if (strcmp(l->data, line) == 0)
			return true;
	return false;
}

/* Number of X's request headers that start with PREFIX (any case). */
static int count_headers(const struct hx *x, const char *prefix)
{
	int n = 0;
	for (const struct curl_slist *l = x->hdrs; l; l = l->next)
		n += strncasecmp(l->data, prefix, strlen(prefix)) == 0;
	return n;
}

/* ---- out_new ---- */

/* A request keeps its id; a notification, a response or an id null none;
 * initialize and notifications/initialized are marked; the body is the
 * compact JSON. */
static void test_out_new_handshake_era(void **state)
{
	(void)state;
	json_t *m = ext_json("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"initialize\", "
			  "\"params\": {\"protocolVersion\": \"2025-06-18\"}}");
	struct out *o = out_new(m, OUT_CHAIN);
	assert_non_null(o);
	assert_string_equal(o->body, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\","
			    "\"params\":{\"protocolVersion\":\"2025-06-18\"}}");
	assert_int_equal(o->len, strlen(o->body));
	assert_int_equal(json_integer_value(o->id), 7);
	assert_true(o->is_init);
	assert_false(o->is_initialized);
	assert_int_equal(o->kind, OUT_CHAIN);
	assert_int_equal(o->retry, -1);
	assert_null(o->version);  /* the session's headers apply */
	assert_null(o->method);
	out_free(o);
	json_decref(m);

	m = ext_json("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	o = out_new(m, OUT_REINIT_DONE);
	assert_null(o->id);
	assert_false(o->is_init);
	assert_true(o->is_initialized);
	assert_int_equal(o->kind, OUT_REINIT_DONE);
	out_free(o);
	json_decref(m);

	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");  /* a response */
	o = out_new(m, OUT_CHAIN);
	assert_null(o->id);
	assert_false(o->is_init);
	out_free(o);
	json_decref(m);

	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
	o = out_new(m, OUT_CHAIN);
	assert_null(o->id);
	out_free(o);
	json_decref(m);
	out_free(NULL);
}

/* A request stating the 2026-07-28 era in its _meta carries the values of
 * its headers: version, method, and the tool name or resource URI. */
static void test_out_new_stateless_era(void **state)
{
	(void)state;
	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":"
			  "{\"name\":\"echo\",\"_meta\":{\"" ERA_META_VERSION "\":\""
			  ERA_STATELESS_VERSION "\"}}}");
	struct out *o = out_new(m, OUT_CHAIN);
	assert_string_equal(json_string_value(o->id), "a");
	assert_string_equal(o->version, ERA_STATELESS_VERSION);
	assert_string_equal(o->method, "tools/call");
	assert_string_equal(o->name, "echo");
	out_free(o);
	json_decref(m);

	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":"
		  "{\"uri\":\"file:///a\",\"_meta\":{\"" ERA_META_VERSION "\":\""
		  ERA_STATELESS_VERSION "\"}}}");
	o = out_new(m, OUT_CHAIN);
	assert_string_equal(o->name, "file:///a");
	out_free(o);
	json_decref(m);

	/* a version of no era this side knows: no era headers */
	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":"
		  "{\"_meta\":{\"" ERA_META_VERSION "\":\"1999-01-01\"}}}");
	o = out_new(m, OUT_CHAIN);
	assert_null(o->version);
	assert_null(o->method);
	out_free(o);
	json_decref(m);
}

/* ---- headers ---- */

/* A new transfer carries the configured headers except those the
 * transport sets itself; a POST adds its own content headers and drops
 * curl's "Expect". */
static void test_headers_configured_and_post(void **state)
{
	(void)state;
	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	struct out *o = out_new(m, OUT_CHAIN);
	json_decref(m);
	struct hx *x = hx_new_post(S, S->url, o, NULL);
	assert_non_null(x);
	assert_ptr_equal(S->xfers, x);
	assert_ptr_equal(x->msg, o);
	assert_int_equal(x->kind, HX_POST);
	assert_true(has_header(x, "Authorization: Bearer t"));
	assert_true(has_header(x, "X-Extra: 1"));
	assert_false(has_header(x, "Accept: x/y"));
	assert_int_equal(count_headers(x, "mcp-session-id:"), 0);
	assert_true(has_header(x, "Content-Type: application/json"));
	assert_true(has_header(x, "Accept: application/json, text/event-stream"));
	assert_true(has_header(x, "Expect:"));  /* empty value: curl's own dropped */
	assert_ptr_equal(hx_take_msg(x), o);
	assert_null(x->msg);
	out_free(o);
	hx_abort(x);
	assert_null(S->xfers);
}

/* A request whose params._meta carries a W3C trace context (the chain put
 * it there, trace.h) sends it as the traceparent and tracestate headers
 * too; a value that is no header value (a line break) is not sent. */
static void test_headers_trace_context(void **state)
{
	(void)state;
	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
			  "{\"name\":\"echo\",\"_meta\":{\"traceparent\":"
			  "\"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\","
			  "\"tracestate\":\"k=v\"}}}");
	struct out *o = out_new(m, OUT_CHAIN);
	json_decref(m);
	struct hx *x = hx_new_post(S, S->url, o, NULL);
	assert_non_null(x);
	assert_true(has_header(x, "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
	assert_true(has_header(x, "tracestate: k=v"));
	hx_abort(x);
	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":"
		  "{\"_meta\":{\"traceparent\":\"a\\r\\nX-Evil: 1\"}}}");
	o = out_new(m, OUT_CHAIN);
	json_decref(m);
	assert_null(o->traceparent);
	x = hx_new_post(S, S->url, o, NULL);
	assert_non_null(x);
	assert_int_equal(count_headers(x, "traceparent:"), 0);
	hx_abort(x);
	assert_null(S->xfers);
}

/* Session headers: the session id when there is one, the protocol version
 * when asked; the generation is noted. Era headers: version, method, and
 * a name only when it has no line break. */
static void test_headers_session_and_era(void **state)
{
	(void)state;
	struct hx *x = hx_new(S, HX_GET, S->url, NULL, NULL);
	assert_int_equal(hx_session_headers(x, true), 0);
	assert_false(x->sent_session);
	assert_int_equal(count_headers(x, "Mcp-Session-Id"), 0);
	assert_int_equal(count_headers(x, "MCP-Protocol-Version"), 0);  /* none negotiated */
	hx_abort(x);

	S->session = strdup("abc");
	S->proto = strdup("2025-06-18");
	S->gen = 4;
	x = hx_new(S, HX_GET, S->url, NULL, NULL);
	assert_int_equal(hx_session_headers(x, false), 0);
	assert_true(x->sent_session);
	assert_int_equal(x->gen, 4);
	assert_true(has_header(x, "Mcp-Session-Id: abc"));
	assert_int_equal(count_headers(x, "MCP-Protocol-Version"), 0);
	assert_int_equal(hx_session_headers(x, true), 0);
	assert_true(has_header(x, "MCP-Protocol-Version: 2025-06-18"));
	hx_abort(x);

	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":"
			  "{\"name\":\"p\",\"_meta\":{\"" ERA_META_VERSION "\":\""
			  ERA_STATELESS_VERSION "\"}}}");
	struct out *o = out_new(m, OUT_CHAIN);
	json_decref(m);
	x = hx_new(S, HX_POST, S->url, o, NULL);
	assert_int_equal(hx_stateless_headers(x), 0);
	assert_true(has_header(x, "MCP-Protocol-Version: " ERA_STATELESS_VERSION));
	assert_true(has_header(x, "Mcp-Method: prompts/get"));
	assert_true(has_header(x, "Mcp-Name: p"));
	assert_int_equal(count_headers(x, "Mcp-Session-Id"), 0);
	hx_abort(x);  /* frees O with it */

	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"a\\r\\nX-Evil: 1\",\"_meta\":{\"" ERA_META_VERSION "\":\""
		  ERA_STATELESS_VERSION "\"}}}");
	o = out_new(m, OUT_CHAIN);
	json_decref(m);
	x = hx_new(S, HX_POST, S->url, o, NULL);
	assert_int_equal(hx_stateless_headers(x), 0);
	/* no header injection: the name goes in its Base64 form */
	assert_true(has_header(x, "Mcp-Name: =?base64?YQ0KWC1FdmlsOiAx?="));
	assert_int_equal(count_headers(x, "X-Evil"), 0);
	hx_abort(x);
}

/* A stateless-era request for METHOD with PARAMS (JSON members), as out_new makes it. */
static struct out *stateless_out(int id, const char *method, const char *params)
{
	json_t *m = ext_json("{}");
	json_object_set_new(m, "jsonrpc", json_string("2.0"));
	json_object_set_new(m, "id", json_integer(id));
	json_object_set_new(m, "method", json_string(method));
	json_t *p = ext_json(params);
	json_object_set_new(p, "_meta", json_pack("{s:s}", ERA_META_VERSION, ERA_STATELESS_VERSION));
	json_object_set_new(m, "params", p);
	struct out *o = out_new(m, OUT_CHAIN);
	json_decref(m);
	assert_non_null(o);
	return o;
}

/*
 * 2026-07-28: the answer to the transport's tools/list teaches it the
 * tools' x-mcp-header marks, and a tool with invalid marks never reaches
 * the chain; a tools/call of a marked tool then carries Mcp-Param-*
 * headers from its arguments (encoded where a value is not header-safe).
 */
static void test_param_headers(void **state)
{
	(void)state;
	struct hx *x = hx_new(S, HX_POST, S->url, stateless_out(3, "tools/list", "{}"), NULL);
	const char *reply = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":["
		"{\"name\":\"deploy\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
		"\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
		"\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"}}}},"
		"{\"name\":\"bad\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
		"\"f\":{\"type\":\"number\",\"x-mcp-header\":\"F\"}}}}]}}";
	assert_int_equal(buf_append(&x->body, reply, strlen(reply)), 0);
	hx_push_body(x);
	assert_true(x->got_response);
	hx_abort(x);
	assert_non_null(S->in_head);
	json_t *tools = json_object_get(json_object_get(S->in_head->msg, "result"), "tools");
	assert_int_equal(json_array_size(tools), 1);   /* "bad" left out */
	assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 0), "name")), "deploy");

	x = hx_new(S, HX_POST, S->url, stateless_out(4, "tools/call",
		"{\"name\":\"deploy\",\"arguments\":{\"region\":\"eu west \",\"n\":5}}"), NULL);
	assert_int_equal(hx_stateless_headers(x), 0);
	assert_true(has_header(x, "Mcp-Name: deploy"));
	assert_true(has_header(x, "Mcp-Param-Region: =?base64?ZXUgd2VzdCA=?="));
	assert_true(has_header(x, "Mcp-Param-N: 5"));
	hx_abort(x);
	/* an argument left out: no header for it; another method: none at all */
	x = hx_new(S, HX_POST, S->url, stateless_out(5, "tools/call",
		"{\"name\":\"deploy\",\"arguments\":{\"region\":\"eu\"}}"), NULL);
	assert_int_equal(hx_stateless_headers(x), 0);
	assert_true(has_header(x, "Mcp-Param-Region: eu"));
	assert_int_equal(count_headers(x, "Mcp-Param-"), 1);
	hx_abort(x);
	x = hx_new(S, HX_POST, S->url, stateless_out(6, "prompts/get",
		"{\"name\":\"deploy\",\"arguments\":{\"region\":\"eu\"}}"), NULL);
	assert_int_equal(hx_stateless_headers(x), 0);
	assert_int_equal(count_headers(x, "Mcp-Param-"), 0);
	hx_abort(x);
}

/* ---- error replies ---- */

static struct hx *with_body(const char *body)
{
	struct hx *x = hx_new(S, HX_POST, S->url, NULL, NULL);
	assert_non_null(x);
	if (body)
		assert_int_equal(buf_append(&x->body, body, strlen(body)), 0);
	return x;
}

/* The message of an error reply: the JSON-RPC error's, else the first
 * printable text (at most 160 bytes), else none. */
static void test_reply_message(void **state)
{
	(void)state;
	char out[200];
	struct hx *x = with_body("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,"
				 "\"message\":\"no such session\"}}");
	assert_string_equal(hx_reply_message(x, out, sizeof out), "no such session");
	hx_abort(x);

	x = with_body("Bad Gateway\r\nmore");
	assert_string_equal(hx_reply_message(x, out, sizeof out), "Bad Gateway");
	hx_abort(x);

	char long_text[300];
	memset(long_text, 'z', sizeof long_text - 1);
	long_text[sizeof long_text - 1] = '\0';
	x = with_body(long_text);
	assert_int_equal(strlen(hx_reply_message(x, out, sizeof out)), 160);
	char small[8];
	assert_string_equal(hx_reply_message(x, small, sizeof small), "zzzzzzz");
	hx_abort(x);

	x = with_body(NULL);
	assert_null(hx_reply_message(x, out, sizeof out));
	hx_abort(x);
}

/* An error reply becomes the answer to request ID only when it is a
 * well-formed error response to that id (or to id null). */
static void test_reply_error(void **state)
{
	(void)state;
	json_t *id = json_integer(5);
	struct hx *x = with_body("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
				 "\"message\":\"bad\",\"data\":{\"k\":1}}}");
	json_t *r = hx_reply_error(x, id);
	assert_non_null(r);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 5);
	json_t *e = json_object_get(r, "error");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32600);
	assert_string_equal(json_string_value(json_object_get(e, "message")), "bad");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "data"), "k")), 1);
	json_decref(r);
	hx_abort(x);

	static const char *const refused[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":6,\"error\":{\"code\":1,\"message\":\"m\"}}",  /* other id */
		"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,\"message\":\"m\"}}",          /* no id */
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":\"1\",\"message\":\"m\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":1}}",
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}",
		"<html>502</html>",
		NULL,
	};
	for (int i = 0; refused[i]; i++) {
		x = with_body(refused[i]);
		if (hx_reply_error(x, id))
			fail_msg("taken as an error response: %s", refused[i]);
		hx_abort(x);
	}
	json_decref(id);
}

/* Why a transfer failed: a refusal's reason, else curl's error text, else
 * the code's description. */
static void test_hx_error(void **state)
{
	(void)state;
	struct hx *x = with_body(NULL);
	assert_string_equal(hx_error(x, CURLE_COULDNT_CONNECT),
			    curl_easy_strerror(CURLE_COULDNT_CONNECT));
	snprintf(x->err, sizeof x->err, "Failed to connect to 127.0.0.1 port 9");
	assert_string_equal(hx_error(x, CURLE_COULDNT_CONNECT),
			    "Failed to connect to 127.0.0.1 port 9");
	x->refused = true;
	snprintf(x->why, sizeof x->why, "the reply is not an event stream");
	assert_string_equal(hx_error(x, CURLE_WRITE_ERROR), "the reply is not an event stream");
	hx_abort(x);
}

/* ---- the inbox ---- */

static json_t *note(int n)
{
	return json_pack("{s:s, s:s, s:{s:i}}", "jsonrpc", "2.0", "method",
			 "notifications/message", "params", "n", n);
}

static json_int_t got_n(size_t i)
{
	return json_integer_value(json_object_get(json_object_get(json_array_get(CL.got, i),
								  "params"), "n"));
}

/* Pushed messages wait for the loop's safe point, then leave in order;
 * while paused they wait; resumed, they go on. */
static void test_inbox_order_and_pause(void **state)
{
	(void)state;
	http_push(S, note(1), 10);
	http_push(S, note(2), 10);
	assert_int_equal(json_array_size(CL.got), 0);  /* never from inside the push */
	ext_spin(2);
	assert_int_equal(json_array_size(CL.got), 2);
	assert_int_equal(got_n(0), 1);
	assert_int_equal(got_n(1), 2);
	assert_false(ev_is_active(&S->flush));  /* disarmed once empty */

	S->paused = true;
	http_push(S, note(3), 10);
	ext_spin(3);
	assert_int_equal(json_array_size(CL.got), 2);
	S->paused = false;
	http_wake(S);
	ext_spin(2);
	assert_int_equal(json_array_size(CL.got), 3);
	assert_int_equal(got_n(2), 3);
}

/* http_fail answers a request of the chain's with an error naming the
 * backend, with the HTTP status as data; the transport's own requests and
 * notifications get none. */
static void test_http_fail(void **state)
{
	(void)state;
	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}");
	struct out *o = out_new(m, OUT_CHAIN);
	struct out *own = out_new(m, OUT_REINIT);
	json_decref(m);
	http_fail(S, o, RPC_BACKEND_GONE, 503, "HTTP %d", 503);
	http_fail(S, own, RPC_BACKEND_GONE, 503, "HTTP %d", 503);
	http_fail(S, NULL, RPC_BACKEND_GONE, 0, "nothing to answer");
	assert_non_null(S->in_head);
	assert_null(S->in_head->next);  /* one error queued */
	json_t *err = S->in_head->msg;
	assert_int_equal(json_integer_value(json_object_get(err, "id")), 9);
	json_t *e = json_object_get(err, "error");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), RPC_BACKEND_GONE);
	assert_string_equal(json_string_value(json_object_get(e, "message")), "backend h: HTTP 503");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "data"),
							     "httpStatus")), 503);
	out_free(o);
	out_free(own);

	m = ext_json("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}");
	o = out_new(m, OUT_CHAIN);
	json_decref(m);
	http_fail(S, o, RPC_INTERNAL_ERROR, 0, "no status");
	assert_null(json_object_get(json_object_get(S->in_head->next->msg, "error"), "data"));
	out_free(o);
}

/* http_down: held messages are dropped and the session forgotten at once;
 * the backend hears of the down only after the messages that came before
 * it were delivered, even while paused; a second down changes nothing. */
static void test_down_after_inbox(void **state)
{
	(void)state;
	assert_int_equal(backend_state(BE), BACKEND_STOPPED);  /* S is not its transport */
	json_t *m = ext_json("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}");
	http_hold(S, out_new(m, OUT_CHAIN));
	http_hold(S, out_new(m, OUT_CHAIN));
	json_decref(m);
	S->session = strdup("s1");
	S->paused = true;
	http_push(S, note(1), 10);
	http_down(S, "HTTP 404: session gone");
	http_down(S, "second reason");
	assert_true(S->down);
	assert_null(S->held);
	assert_null(S->session);
	assert_int_equal(json_array_size(CL.got), 0);
	assert_int_equal(backend_state(BE), BACKEND_STOPPED);
	ext_spin(2);
	assert_int_equal(json_array_size(CL.got), 1);
	assert_int_equal(backend_state(BE), BACKEND_FAILED);  /* "restart": false */
	assert_string_equal(backend_peer(BE)->why_down, "HTTP 404: session gone");
	assert_false(S->down_pending);
	assert_false(ev_is_active(&S->flush));
}

/* A prepare watcher that takes S down from inside its callback, as the
 * app's step does when it stops the backends at shutdown. */
static void down_from_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)revents;
	ev_prepare_stop(loop, w);
	http_down(S, "stopped");
}

static void watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* http_down from inside another prepare watcher's callback: the flush it
 * arms runs at the next turn without the loop blocking in between (it
 * used to wait for any other event: here the 2 s watchdog, at shutdown
 * the deadline, past the grace). */
static void test_down_from_prepare(void **state)
{
	(void)state;
	ev_prepare p;
	ev_timer dog;
	ev_prepare_init(&p, down_from_prepare);
	ev_prepare_start(EV_DEFAULT, &p);
	ev_timer_init(&dog, watchdog, 2.0, 0.);
	ev_timer_start(EV_DEFAULT, &dog);
	double t0 = ev_time();
	for (int i = 0; i < 5 && backend_state(BE) != BACKEND_FAILED; i++)
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	double took = ev_time() - t0;
	ev_timer_stop(EV_DEFAULT, &dog);
	ev_prepare_stop(EV_DEFAULT, &p);
	assert_true(S->down);
	assert_int_equal(backend_state(BE), BACKEND_FAILED);   /* "restart": false */
	assert_true(took < 0.5);
	assert_false(S->down_pending);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_out_new_handshake_era),
		T(test_out_new_stateless_era),
		T(test_headers_configured_and_post),
		T(test_headers_trace_context),
		T(test_headers_session_and_era),
		T(test_param_headers),
		T(test_reply_message),
		T(test_reply_error),
		T(test_hx_error),
		T(test_inbox_order_and_pause),
		T(test_http_fail),
		T(test_down_after_inbox),
		T(test_down_from_prepare),
	};
	return ext_curl_main("http_xfer", tests, sizeof tests / sizeof tests[0]);
}
