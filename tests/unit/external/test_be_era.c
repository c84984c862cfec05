/*
 * test_be_era.c - unit tests for src/external/be_era.c (a 2026-07-28
 * backend behind handshake-era clients) and the era choice in backend.c.
 *
 * The pure parts first: the initialize result made from server/discover,
 * how a 2026-only server's refusal of initialize is recognized, the
 * envelope. Then a real backend and chain with a fake transport (the
 * table given to backend_use_transports runs "type":"http" entries on it)
 * and a fake client peer: the discover probe and
 * its fallback, the envelope on every request, resultType removed, ping
 * and logging/setLevel answered here, an input_required round (the
 * elicitation goes to the client, the call is sent again with its answer
 * under a fresh id, the result leaves with the client's id), a failed and
 * a cancelled round, and subscriptions/listen (filter, replacement on
 * subscribe, the subscription id removed, a replaced stream's notification
 * dropped).
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
#include <ev.h>

#include "backend.h"
#include "be_era.h"
#include "chain.h"
#include "config.h"
#include "era.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"

/* Parses TEXT, which must be JSON (a new reference). */
static json_t *J(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
	if (!v)
		fail_msg("bad test JSON (%s): %s", e.text, text);
	return v;
}

/* ---- pure parts ---- */

/* initialize's answer from discover: identity from _meta, the client's version. */
static void test_init_result(void **state)
{
	(void)state;
	json_t *d = J("{\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{\"tools\":"
		      "{\"listChanged\":true},\"extensions\":{\"x\":{}}},\"instructions\":\"use me\","
		      "\"resultType\":\"complete\",\"_meta\":{\"" ERA_META_SERVER_INFO
		      "\":{\"name\":\"srv\",\"version\":\"3\"}}}");
	json_t *p = J("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}");
	json_t *r = be_era_init_result(d, p, "be");
	json_t *want = J("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":"
			 "{\"listChanged\":true}},\"serverInfo\":{\"name\":\"srv\",\"version\":\"3\"},"
			 "\"instructions\":\"use me\"}");
	assert_true(json_equal(r, want));
	json_decref(r);
	json_decref(want);
	json_decref(p);
	/* a version mcp-chain does not speak in the handshake era: its newest */
	p = J("{\"protocolVersion\":\"2026-07-28\"}");
	json_object_del(json_object_get(d, "_meta"), ERA_META_SERVER_INFO);
	r = be_era_init_result(d, p, "be");
	assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")),
			    era_handshake_versions[0]);
	/* no identity stated: the backend's name */
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "serverInfo"),
							      "name")), "be");
	json_decref(r);
	json_decref(p);
	json_decref(d);
}

/* How a 2026-only server refuses initialize, and what is not that. */
static void test_refuses_initialize(void **state)
{
	(void)state;
	static const struct { const char *resp; bool refuses; } cases[] = {
		/* what @modelcontextprotocol/server 2.4 serveStdio(legacy: 'reject') says */
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32022,\"message\":\"Unsupported "
		  "protocol version: 2025-11-25\",\"data\":{\"supported\":[\"2026-07-28\"],"
		  "\"requested\":\"2025-11-25\"}}}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"message\":\"no\","
		  "\"data\":{\"supported\":[\"2026-07-28\"]}}}", true },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"message\":\"no\","
		  "\"data\":{\"supported\":[\"2026-07-28\",\"2025-06-18\"]}}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"x\"}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"x\"}}", false },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *r = J(cases[i].resp);
		if (be_era_refuses_initialize(r) != cases[i].refuses)
			fail_msg("case %zu: %s", i, cases[i].resp);
		json_decref(r);
	}
}

/* The envelope: version, the client's capabilities and identity, the level. */
static void test_envelope(void **state)
{
	(void)state;
	json_t *p = J("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"elicitation\":{}},"
		      "\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}");
	json_t *env = be_era_envelope(p, "info");
	json_t *want = J("{\"" ERA_META_VERSION "\":\"2026-07-28\",\"" ERA_META_CLIENT_CAPS
			 "\":{\"elicitation\":{}},\"" ERA_META_CLIENT_INFO "\":{\"name\":\"c\","
			 "\"version\":\"1\"},\"" ERA_META_LOG_LEVEL "\":\"info\"}");
	assert_true(json_equal(env, want));
	json_decref(env);
	json_decref(want);
	/* no params yet (a probe before any client): empty capabilities */
	env = be_era_envelope(NULL, NULL);
	want = J("{\"" ERA_META_VERSION "\":\"2026-07-28\",\"" ERA_META_CLIENT_CAPS "\":{}}");
	assert_true(json_equal(env, want));
	json_decref(env);
	json_decref(want);
	json_decref(p);
}

/* ---- the fake transport and client ---- */

static struct chain *CH;
static json_t *SENT;          /* what the transport was given (copies) */
static bool UP;

static int ft_start(struct backend *b)
{
	UP = true;
	backend_set_transport(b, &UP);
	return 0;
}

static int ft_send(struct backend *b, json_t *msg)
{
	(void)b;
	json_array_append_new(SENT, json_deep_copy(msg));
	return 0;
}

static void ft_stop(struct backend *b, double grace)
{
	(void)grace;
	UP = false;
	backend_down(b, "stopped");
}

static bool ft_running(struct backend *b)
{
	(void)b;
	return UP;
}

static void ft_destroy(struct backend *b)
{
	backend_set_transport(b, NULL);
}

static const struct be_transport_ops fake_ops = {
	.kind = "fake",
	.start = ft_start,
	.send = ft_send,
	.stop = ft_stop,
	.running = ft_running,
	.destroy = ft_destroy,
};

struct fake_client {
	struct peer peer;
	json_t *got;
};

static int fc_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct fake_client *c = (struct fake_client *)p;
	(void)o;
	json_array_append_new(c->got, json_deep_copy(msg));
	return 0;
}

static const struct peer_ops fc_ops = { .send = fc_send };

static struct cfg *C;
static struct backend *BE;
static struct fake_client CL;
static json_t *INIT;          /* the client's initialize answers */

static void on_init(void *arg, json_t *resp)
{
	(void)arg;
	json_array_append_new(INIT, json_deep_copy(resp));
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	CH = chain_new();
	SENT = json_array();
	INIT = json_array();
	memset(&CL, 0, sizeof CL);
	peer_init(&CL.peer, &fc_ops, PEER_CLIENT, "client");
	CL.got = json_array();
	CL.peer.ready = true;
	chain_add_peer(CH, &CL.peer);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (BE) {
		backend_free(BE);
		BE = NULL;
	}
	cfg_free(C);
	C = NULL;
	chain_peer_gone(&CL.peer, "test over");
	chain_remove_peer(&CL.peer);
	peer_release(&CL.peer);
	json_decref(CL.got);
	json_decref(SENT);
	json_decref(INIT);
	assert_int_equal(chain_open_exchanges(CH), 0);
	chain_free(CH);
	return 0;
}

/* Makes and starts the backend of an HTTP entry with "protocol" PROTO. */
static void make(const char *proto)
{
	char text[512];
	struct cfg_errors errs = { 0 };
	snprintf(text, sizeof text, "{\"mcpServers\":{\"be\":{\"type\":\"http\","
		 "\"url\":\"http://127.0.0.1:9/mcp\",\"protocol\":\"%s\"}}}", proto);
	C = cfg_load_string(text, "test.json", &errs);
	assert_non_null(C);
	BE = backend_new(CH, C, &C->servers[0], NULL, NULL);
	assert_non_null(BE);
	assert_int_equal(backend_start(BE), 0);
}

/* Runs the loop a few turns (answers given here leave at the next turn). */
static void turn(void)
{
	for (int i = 0; i < 3; i++)
		ev_run(EV_DEFAULT, EVRUN_NOWAIT);
}

/* The last message the transport got, which must be METHOD (NULL: a response). */
static json_t *last_sent(const char *method)
{
	json_t *m = json_array_get(SENT, json_array_size(SENT) - 1);
	assert_non_null(m);
	const char *got = json_string_value(json_object_get(m, "method"));
	if (method)
		assert_string_equal(got ? got : "(response)", method);
	return m;
}

/* The last message the client got. */
static json_t *last_got(void)
{
	json_t *m = json_array_get(CL.got, json_array_size(CL.got) - 1);
	assert_non_null(m);
	return m;
}

/* The backend sends TEXT. */
static void backend_says(const char *text)
{
	backend_deliver(BE, J(text), strlen(text));
}

/* The backend answers request REQ with RESULT (JSON text). */
static void answer(json_t *req, const char *result)
{
	json_t *r = rpc_result(json_object_get(req, "id"), J(result));
	backend_deliver(BE, r, 100);
}

/* The client sends TEXT. */
static void client_says(const char *text)
{
	chain_receive(&CL.peer, J(text));
}

static const char *const PARAMS =
	"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"elicitation\":{}},"
	"\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}";

static const char *const DISCOVER =
	"{\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true},"
	"\"resources\":{\"subscribe\":true}},\"resultType\":\"complete\",\"ttlMs\":0,"
	"\"_meta\":{\"" ERA_META_SERVER_INFO "\":{\"name\":\"srv\",\"version\":\"3\"}}}";

/* True when MSG's params carry the full envelope of PARAMS. */
static void assert_enveloped(json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	json_t *p = J(PARAMS);
	assert_string_equal(era_request_version(params), ERA_STATELESS_VERSION);
	assert_true(json_equal(era_meta(params, ERA_META_CLIENT_CAPS),
			       json_object_get(p, "capabilities")));
	assert_true(json_equal(era_meta(params, ERA_META_CLIENT_INFO),
			       json_object_get(p, "clientInfo")));
	json_decref(p);
}

/* The client's initialize through a stateless backend; returns the listen request. */
static json_t *init_stateless(const char *proto)
{
	make(proto);
	struct peer *p = backend_peer(BE);
	json_t *params = J(PARAMS);
	assert_int_equal(p->ops->initialize(p, params, on_init, NULL), 0);
	json_decref(params);
	json_t *d = last_sent("server/discover");
	assert_enveloped(d);
	assert_int_equal(json_array_size(SENT), 1);  /* no initialize before it */
	answer(d, DISCOVER);
	assert_int_equal(backend_state(BE), BACKEND_READY);
	assert_int_equal(backend_era(BE), ERA_STATELESS);
	assert_string_equal(backend_protocol(BE), "2026-07-28");
	json_t *r = json_object_get(json_array_get(INIT, 0), "result");
	assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-06-18");
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "serverInfo"),
							      "name")), "srv");
	assert_null(json_object_get(r, "resultType"));
	assert_null(json_object_get(r, "ttlMs"));
	/* the listen stream: list_changed for tools only (no resources listChanged) */
	json_t *l = last_sent("subscriptions/listen");
	json_t *want = J("{\"toolsListChanged\":true}");
	assert_true(json_equal(json_object_get(json_object_get(l, "params"), "notifications"), want));
	json_decref(want);
	assert_enveloped(l);
	return l;
}

/* ---- the era choice ---- */

/* "auto" over HTTP: discover first; a refusal falls back to initialize, and
 * the handshake era then sends requests as they are. */
static void test_auto_http_fallback(void **state)
{
	(void)state;
	make("auto");
	struct peer *p = backend_peer(BE);
	json_t *params = J(PARAMS);
	assert_int_equal(p->ops->initialize(p, params, on_init, NULL), 0);
	json_t *d = last_sent("server/discover");
	backend_deliver(BE, rpc_errorf(json_object_get(d, "id"), RPC_BACKEND_GONE,
				       "HTTP 400 from http://127.0.0.1:9/mcp"), 0);
	json_t *i = last_sent("initialize");
	assert_true(json_equal(json_object_get(i, "params"), params));
	assert_null(json_object_get(json_object_get(i, "params"), "_meta"));
	answer(i, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
		  "\"serverInfo\":{\"name\":\"old\",\"version\":\"1\"}}");
	assert_int_equal(backend_state(BE), BACKEND_READY);
	assert_int_equal(backend_era(BE), ERA_HANDSHAKE);
	assert_string_equal(backend_protocol(BE), "2025-06-18");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}");
	assert_null(json_object_get(last_sent("tools/list"), "params"));
	json_decref(params);
}

/* "2026-07-28" pinned: a refused discover is a failed handshake, no initialize. */
static void test_pinned_stateless_no_fallback(void **state)
{
	(void)state;
	make("2026-07-28");
	struct peer *p = backend_peer(BE);
	json_t *params = J(PARAMS);
	assert_int_equal(p->ops->initialize(p, params, on_init, NULL), 0);
	json_t *d = last_sent("server/discover");
	backend_deliver(BE, rpc_errorf(json_object_get(d, "id"), -32601, "Method not found"), 0);
	assert_int_equal(json_array_size(SENT), 1);
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	assert_non_null(json_object_get(json_array_get(INIT, 0), "error"));
	assert_non_null(strstr(backend_peer(BE)->why_down, "server/discover failed"));
	json_decref(params);
}

/* ---- translation ---- */

/* Requests carry the envelope; results lose resultType; ping and
 * logging/setLevel are answered here, the level then rides the envelope. */
static void test_envelope_and_local_answers(void **state)
{
	(void)state;
	init_stateless("auto");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{}}");
	json_t *req = last_sent("tools/list");
	assert_enveloped(req);
	answer(req, "{\"tools\":[],\"resultType\":\"complete\",\"ttlMs\":5,\"cacheScope\":\"public\","
		    "\"_meta\":{\"" ERA_META_SERVER_INFO "\":{\"name\":\"srv\"},\"k\":1}}");
	json_t *want = J("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[],\"_meta\":{\"k\":1}}}");
	assert_true(json_equal(last_got(), want));
	json_decref(want);

	size_t sent = json_array_size(SENT);
	client_says("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"logging/setLevel\","
		    "\"params\":{\"level\":\"debug\"}}");
	client_says("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	assert_int_equal(json_array_size(SENT), sent);  /* none of these reached it */
	turn();
	assert_int_equal(json_array_size(CL.got), 3);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(CL.got, 1), "id")), 8);
	assert_int_equal(json_object_size(json_object_get(json_array_get(CL.got, 1), "result")), 0);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(CL.got, 2), "id")), 9);
	client_says("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"prompts/list\"}");
	assert_string_equal(json_string_value(era_meta(json_object_get(last_sent("prompts/list"),
					      "params"), ERA_META_LOG_LEVEL)), "debug");
}

/* One input_required round: the elicitation goes to the client, its answer
 * comes back in the retry (fresh id, requestState echoed), the result
 * leaves with the client's id. */
static void test_input_round(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
		    "{\"name\":\"ask\",\"arguments\":{\"a\":1},\"_meta\":{\"progressToken\":\"t\"}}}");
	json_t *call = json_incref(last_sent("tools/call"));
	json_int_t first = json_integer_value(json_object_get(call, "id"));
	answer(call, "{\"resultType\":\"input_required\",\"requestState\":\"s1\",\"inputRequests\":"
		     "{\"who\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Name?\"}}}}");
	json_t *el = last_got();
	assert_string_equal(json_string_value(json_object_get(el, "method")), "elicitation/create");
	assert_string_equal(json_string_value(json_object_get(json_object_get(el, "params"),
							      "message")), "Name?");
	assert_true(json_is_integer(json_object_get(el, "id")));  /* the client's own id space */
	char text[256];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{\"action\":\"accept\",\"content\":{\"name\":\"Ada\"}}}",
		 json_integer_value(json_object_get(el, "id")));
	client_says(text);
	json_t *retry = last_sent("tools/call");
	json_int_t second = json_integer_value(json_object_get(retry, "id"));
	assert_true(second != first);
	json_t *rp = json_object_get(retry, "params");
	assert_string_equal(json_string_value(json_object_get(rp, "requestState")), "s1");
	json_t *want = J("{\"who\":{\"action\":\"accept\",\"content\":{\"name\":\"Ada\"}}}");
	assert_true(json_equal(json_object_get(rp, "inputResponses"), want));
	json_decref(want);
	assert_string_equal(json_string_value(json_object_get(rp, "name")), "ask");
	/* the same progress token as the first attempt (the chain's, not "t") */
	assert_non_null(era_meta(rp, "progressToken"));
	assert_true(json_equal(era_meta(rp, "progressToken"),
			       era_meta(json_object_get(call, "params"), "progressToken")));
	assert_enveloped(retry);
	/* progress during the retry still reaches the client's token */
	char *tok = json_dumps(era_meta(rp, "progressToken"), JSON_ENCODE_ANY);
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
		 "\"params\":{\"progressToken\":%s,\"progress\":1}}", tok);
	free(tok);
	backend_says(text);
	json_t *prog = last_got();
	assert_string_equal(json_string_value(json_object_get(prog, "method")), "notifications/progress");
	assert_string_equal(json_string_value(json_object_get(json_object_get(prog, "params"),
							      "progressToken")), "t");
	answer(retry, "{\"content\":[{\"type\":\"text\",\"text\":\"hello Ada\"}],"
		      "\"resultType\":\"complete\"}");
	want = J("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\","
		 "\"text\":\"hello Ada\"}]}}");
	assert_true(json_equal(last_got(), want));
	json_decref(want);
	assert_int_equal(chain_open_exchanges(CH), 0);
	json_decref(call);
}

/* A client's error to the input request answers the call with an error. */
static void test_input_error(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"prompts/get\",\"params\":{\"name\":\"p\"}}");
	json_t *call = last_sent("prompts/get");
	answer(call, "{\"resultType\":\"input_required\",\"inputRequests\":{\"a\":{\"method\":"
		     "\"roots/list\"},\"b\":{\"method\":\"sampling/createMessage\",\"params\":{}}}}");
	assert_int_equal(json_array_size(CL.got), 2);
	size_t sent = json_array_size(SENT);
	json_t *first = json_array_get(CL.got, 0);
	char text[256];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"error\":{\"code\":-1,\"message\":\"user said no\"}}",
		 json_integer_value(json_object_get(first, "id")));
	client_says(text);
	turn();
	assert_int_equal(json_array_size(SENT), sent);  /* no retry */
	/* the other input request is cancelled at the client; the call gets an error */
	bool cancelled = false, failed = false;
	for (size_t i = 2; i < json_array_size(CL.got); i++) {
		json_t *m = json_array_get(CL.got, i);
		const char *method = json_string_value(json_object_get(m, "method"));
		if (method && strcmp(method, "notifications/cancelled") == 0)
			cancelled = true;
		if (json_integer_value(json_object_get(m, "id")) == 5) {
			const char *msg = json_string_value(json_object_get(
				json_object_get(m, "error"), "message"));
			assert_non_null(msg);
			assert_non_null(strstr(msg, "user said no"));
			failed = true;
		}
	}
	assert_true(cancelled);
	assert_true(failed);
	assert_int_equal(chain_open_exchanges(CH), 0);
}

/* The client cancels its call during a round: its input request is cancelled,
 * nothing reaches the backend (no attempt is open there), a late answer is dropped. */
static void test_cancel_in_round(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\"}}");
	answer(last_sent("tools/call"), "{\"resultType\":\"input_required\",\"inputRequests\":"
		     "{\"a\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"?\"}}}}");
	json_int_t el_id = json_integer_value(json_object_get(last_got(), "id"));
	size_t sent = json_array_size(SENT);
	client_says("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		    "{\"requestId\":5,\"reason\":\"no\"}}");
	turn();
	assert_int_equal(json_array_size(SENT), sent);
	json_t *c = last_got();
	assert_string_equal(json_string_value(json_object_get(c, "method")), "notifications/cancelled");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "params"), "requestId")),
			 el_id);
	char text[160];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{\"action\":\"accept\"}}", el_id);
	size_t got = json_array_size(CL.got);
	client_says(text);
	turn();
	assert_int_equal(json_array_size(SENT), sent);
	assert_int_equal(json_array_size(CL.got), got);
	assert_int_equal(chain_open_exchanges(CH), 0);
}

/* The client cancels a retried call: the cancellation names the retry's id. */
static void test_cancel_retry(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\"}}");
	answer(last_sent("tools/call"), "{\"resultType\":\"input_required\",\"inputRequests\":"
		     "{\"a\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"?\"}}}}");
	char text[160];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"result\":{\"action\":\"decline\"}}",
		 json_integer_value(json_object_get(last_got(), "id")));
	client_says(text);
	json_int_t retry = json_integer_value(json_object_get(last_sent("tools/call"), "id"));
	client_says("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		    "{\"requestId\":5,\"reason\":\"no\"}}");
	json_t *c = last_sent("notifications/cancelled");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "params"), "requestId")),
			 retry);
	assert_int_equal(chain_open_exchanges(CH), 0);
}

/* More rounds than BE_ERA_MAX_ROUNDS end the call with an error. */
static void test_round_bound(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":{\"uri\":\"x://y\"}}");
	for (int i = 0; i <= BE_ERA_MAX_ROUNDS; i++) {
		json_t *m = last_sent("resources/read");
		/* a round with no input requests, only state: sent again at once */
		answer(m, "{\"resultType\":\"input_required\",\"requestState\":\"again\"}");
	}
	turn();
	json_t *e = last_got();
	assert_int_equal(json_integer_value(json_object_get(e, "id")), 5);
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(e, "error"),
								 "message")), "asked for input more than"));
	assert_int_equal(chain_open_exchanges(CH), 0);
}

/* subscribe replaces the listen stream (filter with the URI, the old one
 * cancelled); notifications lose the subscription id; a replaced stream's
 * are dropped; unsubscribe goes back to list_changed only. */
static void test_listen(void **state)
{
	(void)state;
	json_t *l1 = json_incref(init_stateless("auto"));
	const char *id1 = json_string_value(json_object_get(l1, "id"));
	backend_says("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\","
		     "\"params\":{\"notifications\":{\"toolsListChanged\":true}}}");
	char text[512];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\","
		 "\"params\":{\"_meta\":{\"" ERA_META_SUBSCRIPTION "\":\"%s\"}}}", id1);
	backend_says(text);
	json_t *want = J("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{}}");
	assert_int_equal(json_array_size(CL.got), 1);  /* the acknowledgement stayed here */
	assert_true(json_equal(last_got(), want));
	json_decref(want);

	client_says("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/subscribe\","
		    "\"params\":{\"uri\":\"test://a\"}}");
	json_t *cancel = last_sent("notifications/cancelled");
	assert_string_equal(json_string_value(json_object_get(json_object_get(cancel, "params"),
							      "requestId")), id1);
	json_t *l2 = json_array_get(SENT, json_array_size(SENT) - 2);
	assert_string_equal(json_string_value(json_object_get(l2, "method")), "subscriptions/listen");
	want = J("{\"toolsListChanged\":true,\"resourceSubscriptions\":[\"test://a\"]}");
	assert_true(json_equal(json_object_get(json_object_get(l2, "params"), "notifications"), want));
	json_decref(want);
	turn();
	assert_int_equal(json_integer_value(json_object_get(last_got(), "id")), 3);
	size_t got = json_array_size(CL.got);
	backend_says(text);  /* the replaced stream */
	assert_int_equal(json_array_size(CL.got), got);
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
		 "\"params\":{\"uri\":\"test://a\",\"_meta\":{\"" ERA_META_SUBSCRIPTION "\":\"%s\",\"k\":1}}}",
		 json_string_value(json_object_get(l2, "id")));
	backend_says(text);
	want = J("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
		 "\"params\":{\"uri\":\"test://a\",\"_meta\":{\"k\":1}}}");
	assert_true(json_equal(last_got(), want));
	json_decref(want);

	client_says("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/unsubscribe\","
		    "\"params\":{\"uri\":\"test://a\"}}");
	json_t *l3 = json_array_get(SENT, json_array_size(SENT) - 2);
	want = J("{\"toolsListChanged\":true}");
	assert_true(json_equal(json_object_get(json_object_get(l3, "params"), "notifications"), want));
	json_decref(want);
	json_decref(l1);
}

/* The transport goes down during a round: the call fails (the chain's
 * doing), the round is forgotten, the restarted backend discovers again. */
static void test_down_in_round(void **state)
{
	(void)state;
	init_stateless("2026-07-28");
	client_says("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\"}}");
	answer(last_sent("tools/call"), "{\"resultType\":\"input_required\",\"inputRequests\":"
		     "{\"a\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"?\"}}}}");
	backend_stop(BE, 0.1);
	assert_int_equal(chain_open_exchanges(CH), 0);
	bool failed = false;
	for (size_t i = 0; i < json_array_size(CL.got); i++) {
		json_t *m = json_array_get(CL.got, i);
		if (json_integer_value(json_object_get(m, "id")) == 5 && json_object_get(m, "error"))
			failed = true;
	}
	assert_true(failed);
	turn();
}

/* "type":"http" entries on the fake. */
static const struct be_transport_def transports[] = {
	{ CFG_HTTP, &fake_ops },
	{ CFG_STDIO, NULL },
};

int main(void)
{
	backend_use_transports(transports);
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_result),
		cmocka_unit_test(test_refuses_initialize),
		cmocka_unit_test(test_envelope),
		T(test_auto_http_fallback),
		T(test_pinned_stateless_no_fallback),
		T(test_envelope_and_local_answers),
		T(test_input_round),
		T(test_input_error),
		T(test_cancel_in_round),
		T(test_cancel_retry),
		T(test_round_bound),
		T(test_listen),
		T(test_down_in_round),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
