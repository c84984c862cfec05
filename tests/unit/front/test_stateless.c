/*
 * test_stateless.c - unit tests for src/front/stateless.c: what a client
 * of the 2026-07-28 era needs beyond the handshake era (resultType and
 * cache fields, input_required round trips and their requestState, log
 * levels from _meta, subscriptions/listen streams).
 *
 * The stateless layer sits between a client peer and the chain: the test
 * plays the session's part (a client peer whose send goes through
 * stateless_send, requests offered to stateless_request first) with a real
 * chain and a fake backend peer behind it (session_test.c).
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

#include "chain.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"
#include "session_test.h"
#include "src/front/stateless.h"

/* ---- the client side: what session.c does for a stateless client ---- */

struct client {
	struct peer peer;            /* must be first */
	struct stateless *st;
	json_t *out;                 /* what the layer wrote to the client (copies) */
	bool closing;
};

static int client_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct client *c = (struct client *)p;
	if (c->closing)
		return -1;
	return stateless_send(c->st, msg, o);
}

static const struct peer_ops client_ops = { .send = client_send };

static int rec_write(void *arg, json_t *msg, const struct peer_out *o)
{
	(void)o;
	struct client *c = arg;
	if (!msg)
		fail_msg("the layer wrote a NULL message");
	json_array_append_new(c->out, json_deep_copy(msg));
	return 0;
}

static struct chain *C;
static struct client cl;

static void client_open(struct client *c, const char *name, double ttl)
{
	memset(c, 0, sizeof *c);
	peer_init(&c->peer, &client_ops, PEER_CLIENT, name);
	c->peer.ready = true;
	chain_add_peer(C, &c->peer);
	c->out = json_array();
	c->st = stateless_new(&c->peer, rec_write, c, ttl);
	assert_non_null(c->st);
	assert_true(c->peer.answers_inline);
}

static void client_close(struct client *c)
{
	c->closing = true;
	chain_peer_gone(&c->peer, "test over");
	stateless_free(c->st);
	c->st = NULL;
	chain_remove_peer(&c->peer);
	peer_release(&c->peer);
	json_decref(c->out);
	c->out = NULL;
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	C = chain_new();
	sst_be_open(C, true);
	client_open(&cl, "client", 300.);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	client_close(&cl);
	chain_peer_gone(&sst_be.peer, "test over");
	sst_be_close();
	assert_int_equal(chain_open_exchanges(C), 0);
	chain_free(C);
	C = NULL;
	return 0;
}

/* ---- helpers ---- */

/* Client C sends MSG (stolen): the layer first, then the chain. Returns
 * what stateless_request / stateless_notification said. */
static bool send_cm(struct client *c, json_t *msg)
{
	bool handled;
	if (json_object_get(msg, "id"))
		handled = stateless_request(c->st, msg);
	else
		handled = stateless_notification(c->st, msg);
	if (handled)
		json_decref(msg);
	else
		chain_receive(&c->peer, msg);
	return handled;
}

static bool send_c(const char *s)
{
	return send_cm(&cl, sst_json(s));
}

static size_t n_out(void)
{
	return json_array_size(cl.out);
}

static json_t *last_out(void)
{
	json_t *m = json_array_get(cl.out, n_out() - 1);
	if (!m)
		fail_msg("the client got nothing");
	return m;
}

/* The index of the last message to the backend with METHOD, or -1. */
static long be_find(const char *method)
{
	for (size_t i = sst_n_be(); i-- > 0;) {
		const char *m = sst_str_at(sst_be_at(i), "method");
		if (m && strcmp(m, method) == 0)
			return (long)i;
	}
	return -1;
}

/* The last message to the backend answering its request ID, or NULL. */
static json_t *be_answer(json_int_t id)
{
	for (size_t i = sst_n_be(); i-- > 0;) {
		json_t *m = sst_be_at(i);
		if (!json_object_get(m, "method") && json_is_integer(json_object_get(m, "id")) &&
		    json_integer_value(json_object_get(m, "id")) == id)
			return m;
	}
	return NULL;
}

/* ---- stamping and small helpers ---- */

static void test_cacheable(void **state)
{
	(void)state;
	const char *yes[] = { "tools/list", "prompts/list", "resources/list",
		"resources/templates/list", "resources/read", "server/discover" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		assert_true(stateless_cacheable(yes[i]));
	assert_false(stateless_cacheable("tools/call"));
	assert_false(stateless_cacheable("tools/list/x"));
	assert_false(stateless_cacheable(""));
	assert_false(stateless_cacheable(NULL));
}

static void test_stamp(void **state)
{
	(void)state;
	/* not cacheable: resultType only */
	json_t *r = sst_json("{\"content\":[]}");
	stateless_stamp(r, "tools/call");
	assert_string_equal(sst_str_at(r, "resultType"), "complete");
	assert_null(json_object_get(r, "ttlMs"));
	assert_null(json_object_get(r, "cacheScope"));
	assert_int_equal(json_object_size(r), 2);
	json_decref(r);
	/* unknown method: the same */
	r = sst_json("{}");
	stateless_stamp(r, NULL);
	assert_string_equal(sst_str_at(r, "resultType"), "complete");
	assert_int_equal(json_object_size(r), 1);
	json_decref(r);
	/* a resultType already there is kept */
	r = sst_json("{\"resultType\":\"input_required\"}");
	stateless_stamp(r, "tools/call");
	assert_string_equal(sst_str_at(r, "resultType"), "input_required");
	json_decref(r);
	/* cacheable, no cache fields: nothing is cached */
	r = sst_json("{\"tools\":[]}");
	stateless_stamp(r, "tools/list");
	assert_int_equal(sst_int_at(r, "ttlMs"), 0);
	assert_string_equal(sst_str_at(r, "cacheScope"), "private");
	json_decref(r);
	/* what the backend said, when valid, stays */
	r = sst_json("{\"ttlMs\":5000,\"cacheScope\":\"public\"}");
	stateless_stamp(r, "resources/read");
	assert_int_equal(sst_int_at(r, "ttlMs"), 5000);
	assert_string_equal(sst_str_at(r, "cacheScope"), "public");
	json_decref(r);
	/* invalid values are replaced */
	r = sst_json("{\"ttlMs\":-1,\"cacheScope\":\"shared\"}");
	stateless_stamp(r, "prompts/list");
	assert_int_equal(sst_int_at(r, "ttlMs"), 0);
	assert_string_equal(sst_str_at(r, "cacheScope"), "private");
	json_decref(r);
	r = sst_json("{\"ttlMs\":\"10\",\"cacheScope\":7}");
	stateless_stamp(r, "server/discover");
	assert_int_equal(sst_int_at(r, "ttlMs"), 0);
	assert_string_equal(sst_str_at(r, "cacheScope"), "private");
	json_decref(r);
}

/* Results going to the client are stamped with a copy: the chain's own
 * message is left as it was; errors pass unchanged. */
static void test_send_stamps_results(void **state)
{
	(void)state;
	json_t *resp = sst_json("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[]}}");
	const struct peer_out resp_out = { .kind = PEER_OUT_RESPONSE };   /* its request unknown */
	assert_int_equal(stateless_send(cl.st, resp, &resp_out), 0);
	assert_null(json_object_get(json_object_get(resp, "result"), "resultType"));
	json_t *got = json_object_get(last_out(), "result");
	assert_string_equal(sst_str_at(got, "resultType"), "complete");
	assert_int_equal(sst_int_at(last_out(), "id"), 3);
	json_decref(resp);
	resp = sst_json("{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32601,\"message\":\"no\"}}");
	assert_int_equal(stateless_send(cl.st, resp, &resp_out), 0);
	assert_true(json_equal(last_out(), resp));
	json_decref(resp);
	/* other notifications pass as they are */
	resp = sst_json("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}");
	assert_int_equal(stateless_send(cl.st, resp, &resp_out), 0);
	assert_true(json_equal(last_out(), resp));
	json_decref(resp);
	assert_int_equal(n_out(), 3);
}

/* Through the chain: a call's result reaches the client stamped. */
static void test_result_through_chain(void **state)
{
	(void)state;
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}"));
	assert_int_equal(sst_n_be(), 1);
	sst_be_respond(0, "{\"tools\":[]}");
	assert_int_equal(n_out(), 1);
	assert_int_equal(sst_int_at(last_out(), "id"), 1);
	json_t *r = json_object_get(last_out(), "result");
	assert_string_equal(sst_str_at(r, "resultType"), "complete");
	assert_int_equal(sst_int_at(r, "ttlMs"), 0);
}

static void test_state_instance(void **state)
{
	(void)state;
	uint64_t inst = 0;
	assert_true(stateless_state_instance("v1.00000000deadbeef.1.2.3.m.x", &inst));
	assert_true(inst == 0xdeadbeefu);
	assert_false(stateless_state_instance(NULL, &inst));
	assert_false(stateless_state_instance("v2.00000000deadbeef.1", &inst));
	assert_false(stateless_state_instance("v1.zz", &inst));
	assert_false(stateless_state_instance("", &inst));
	/* two layers: two instances */
	struct client other;
	client_open(&other, "other", 300.);
	assert_true(stateless_instance(cl.st) != stateless_instance(other.st));
	client_close(&other);
}

/* ---- input_required round trips ---- */

static char input_key[32];
static char state_text[512];

/* The client's call (id 7) is open at the backend, which asks the client
 * for input: the call is answered input_required. */
static void call_asks_input(void)
{
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}"));
	assert_int_equal(sst_n_be(), 1);
	size_t before = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"elicitation/create\",\"params\":{\"message\":\"name?\"}}");
	assert_int_equal(n_out(), before);    /* gathered: asked once the turn is over */
	sst_run_once();
	assert_int_equal(n_out(), before + 1);
	json_t *r = json_object_get(last_out(), "result");
	assert_int_equal(sst_int_at(last_out(), "id"), 7);
	assert_string_equal(sst_str_at(r, "resultType"), "input_required");
	json_t *reqs = json_object_get(r, "inputRequests");
	assert_int_equal(json_object_size(reqs), 1);
	const char *key = json_object_iter_key(json_object_iter(reqs));
	snprintf(input_key, sizeof input_key, "%s", key);
	json_t *one = json_object_get(reqs, key);
	assert_string_equal(sst_str_at(one, "method"), "elicitation/create");
	assert_string_equal(sst_str_at(json_object_get(one, "params"), "message"), "name?");
	const char *st = sst_str_at(r, "requestState");
	assert_non_null(st);
	assert_true(strlen(st) < sizeof state_text);
	snprintf(state_text, sizeof state_text, "%s", st);
	/* the state names this layer's instance */
	uint64_t inst = 0;
	assert_true(stateless_state_instance(st, &inst));
	assert_true(inst == stateless_instance(cl.st));
}

/* The client C's retry of METHOD with id ID carrying STATE (NULL: none). */
static bool retry_as(struct client *c, int id, const char *method, const char *state)
{
	json_t *m = json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:{s:s}}}}", "jsonrpc", "2.0", "id", id,
		"method", method, "params", "name", "t", "inputResponses", input_key,
		"action", "decline");
	if (state)
		json_object_set_new(json_object_get(m, "params"), "requestState", json_string(state));
	return send_cm(c, m);
}

static bool retry_with(int id, const char *state)
{
	return retry_as(&cl, id, "tools/call", state);
}

/* The retry answers the backend's request and takes the call over; the
 * state is good for one retry. */
static void test_round_trip(void **state)
{
	(void)state;
	call_asks_input();
	size_t before = sst_n_be();
	assert_true(retry_with(8, state_text));
	assert_int_equal(sst_n_be(), before + 1);
	assert_int_equal(sst_int_at(sst_be_at(before), "id"), 100);
	assert_string_equal(sst_str_at(json_object_get(sst_be_at(before), "result"), "action"), "decline");
	size_t outs = n_out();
	sst_be_respond(0, "{\"content\":[]}");
	assert_int_equal(n_out(), outs + 1);
	assert_int_equal(sst_int_at(last_out(), "id"), 8);
	assert_string_equal(sst_str_at(json_object_get(last_out(), "result"), "resultType"), "complete");
	/* replayed: refused, nothing reaches the backend */
	before = sst_n_be();
	assert_true(retry_with(9, state_text));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_int_equal(sst_int_at(last_out(), "id"), 9);
	assert_non_null(strstr(sst_err_message(last_out()), "requestState refused"));
	assert_int_equal(sst_n_be(), before);
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* A retry that does not answer every request: the unanswered one is
 * refused at the backend. */
static void test_retry_missing_answer(void **state)
{
	(void)state;
	call_asks_input();
	snprintf(input_key, sizeof input_key, "not-the-key");
	assert_true(retry_with(8, state_text));
	json_t *a = be_answer(100);
	assert_non_null(a);
	assert_int_equal(sst_err_code(a), RPC_INVALID_REQUEST);
	assert_non_null(strstr(sst_err_message(a), "did not answer"));
}

static void test_forged_state(void **state)
{
	(void)state;
	call_asks_input();
	size_t before = sst_n_be();
	char forged[sizeof state_text];
	snprintf(forged, sizeof forged, "%s", state_text);
	char *last = forged + strlen(forged) - 1;
	*last = *last == '0' ? '1' : '0';   /* one bit of the signature */
	assert_true(retry_with(8, forged));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_non_null(strstr(sst_err_message(last_out()), "forged"));
	/* the call it names changed, with the old signature */
	snprintf(forged, sizeof forged, "%s", state_text);
	char *dot = strchr(forged + 3, '.');
	dot[1] = dot[1] == 'f' ? 'e' : 'f';
	assert_true(retry_with(8, forged));
	assert_non_null(strstr(sst_err_message(last_out()), "forged"));
	/* not one of ours at all */
	assert_true(retry_with(8, "not a state"));
	assert_non_null(strstr(sst_err_message(last_out()), "not a requestState"));
	/* a signature that is not hex */
	snprintf(forged, sizeof forged, "%s", state_text);
	forged[strlen(forged) - 1] = 'g';
	assert_true(retry_with(8, forged));
	assert_non_null(strstr(sst_err_message(last_out()), "not a requestState"));
	assert_int_equal(sst_n_be(), before);
	/* the genuine one still works */
	assert_true(retry_with(10, state_text));
	assert_int_equal(sst_n_be(), before + 1);
}

static void test_state_refusals(void **state)
{
	(void)state;
	call_asks_input();
	size_t before = sst_n_be();
	/* inputResponses without the state */
	assert_true(retry_with(8, NULL));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_non_null(strstr(sst_err_message(last_out()), "without the requestState"));
	/* the state of a tools/call, for another method */
	assert_true(retry_as(&cl, 8, "prompts/get", state_text));
	assert_non_null(strstr(sst_err_message(last_out()), "another method"));
	/* another session's layer */
	struct client other;
	client_open(&other, "other", 300.);
	assert_true(retry_as(&other, 2, "tools/call", state_text));
	json_t *e = json_array_get(other.out, json_array_size(other.out) - 1);
	assert_int_equal(sst_err_code(e), RPC_INVALID_PARAMS);
	assert_non_null(strstr(sst_err_message(e), "another session"));
	client_close(&other);
	assert_int_equal(sst_n_be(), before);
	/* a requestState alone (no inputResponses) is a retry too */
	json_t *m = json_pack("{s:s,s:i,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", 11, "method",
			      "tools/call", "params", "requestState", "v1.x");
	assert_true(send_cm(&cl, m));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_int_equal(sst_n_be(), before);
}

/* The call waits too long: its state expires, and the loop ends the call
 * (cancelled at the backend, its request refused). */
static void test_expired_state(void **state)
{
	(void)state;
	client_close(&cl);
	client_open(&cl, "client", 0.05);
	call_asks_input();
	size_t before = sst_n_be();
	sst_run_for(0.2);
	bool cancelled = false, refused = false;
	for (size_t i = before; i < sst_n_be(); i++) {
		const char *method = sst_str_at(sst_be_at(i), "method");
		cancelled |= method && strcmp(method, "notifications/cancelled") == 0;
		refused |= json_integer_value(json_object_get(sst_be_at(i), "id")) == 100 &&
			   json_object_get(sst_be_at(i), "error");
	}
	assert_true(cancelled);
	assert_true(refused);
	assert_int_equal(chain_open_exchanges(C), 0);
	before = sst_n_be();
	assert_true(retry_with(8, state_text));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_non_null(strstr(sst_err_message(last_out()), "expired"));
	assert_int_equal(sst_n_be(), before);
}

/* The call ends (the backend answers it) while the client is being asked:
 * the backend's open request still gets the client's answer (a server
 * may ask for what outlives the call: roots), and the held answer goes to
 * the client's retry, under the retry's id. */
static void test_call_ends_while_waiting(void **state)
{
	(void)state;
	call_asks_input();
	size_t outs = n_out();
	sst_be_respond(0, "{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}");
	assert_int_equal(n_out(), outs);   /* held for the retry */
	assert_null(be_answer(100));
	size_t before = sst_n_be();
	assert_true(retry_with(8, state_text));
	assert_int_equal(sst_n_be(), before + 1);   /* the answer, and nothing more */
	json_t *a = be_answer(100);
	assert_non_null(a);
	assert_string_equal(sst_str_at(json_object_get(a, "result"), "action"), "decline");
	assert_int_equal(n_out(), outs + 1);
	assert_int_equal(sst_int_at(last_out(), "id"), 8);
	json_t *r = json_object_get(last_out(), "result");
	assert_string_equal(sst_str_at(r, "resultType"), "complete");
	assert_string_equal(sst_str_at(json_array_get(json_object_get(r, "content"), 0), "text"), "done");
	/* the round is over: the same state again names an ended call */
	assert_true(retry_with(9, state_text));
	assert_non_null(strstr(sst_err_message(last_out()), "has ended"));
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* More questions come while the client is asked: its retry is answered
 * with a new input_required and a new state; the old one is spent. */
static void test_second_round(void **state)
{
	(void)state;
	call_asks_input();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"id\":101,\"method\":\"roots/list\",\"params\":{}}");
	sst_run_once();
	size_t outs = n_out();
	char first[sizeof state_text];
	snprintf(first, sizeof first, "%s", state_text);
	assert_true(retry_with(8, first));
	assert_non_null(be_answer(100));
	assert_null(be_answer(101));
	assert_int_equal(n_out(), outs + 1);
	assert_int_equal(sst_int_at(last_out(), "id"), 8);
	json_t *r = json_object_get(last_out(), "result");
	assert_string_equal(sst_str_at(r, "resultType"), "input_required");
	json_t *reqs = json_object_get(r, "inputRequests");
	assert_int_equal(json_object_size(reqs), 1);
	const char *key = json_object_iter_key(json_object_iter(reqs));
	assert_string_equal(sst_str_at(json_object_get(reqs, key), "method"), "roots/list");
	const char *second = sst_str_at(r, "requestState");
	assert_non_null(second);
	assert_string_not_equal(second, first);
	snprintf(state_text, sizeof state_text, "%s", second);
	snprintf(input_key, sizeof input_key, "%s", key);
	/* the first state is spent */
	assert_true(retry_with(9, first));
	assert_non_null(strstr(sst_err_message(last_out()), "already used"));
	/* the second answers the roots request; the call's result then goes to 10 */
	assert_true(retry_with(10, state_text));
	assert_non_null(json_object_get(be_answer(101), "result"));
	sst_be_respond(0, "{\"content\":[]}");
	assert_int_equal(sst_int_at(last_out(), "id"), 10);
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* The client cancels a call that waits for its input: the backend's
 * request is refused and the call is cancelled at the backend. */
static void test_client_cancels_waiting_call(void **state)
{
	(void)state;
	call_asks_input();
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":99}}"));
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}"));
	size_t before = sst_n_be();
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}"));
	json_t *a = be_answer(100);
	assert_non_null(a);
	assert_non_null(strstr(sst_err_message(a), "cancelled by the client"));
	long c = be_find("notifications/cancelled");
	assert_true(c >= (long)before);
	json_t *params = json_object_get(sst_be_at((size_t)c), "params");
	assert_int_equal(sst_int_at(params, "requestId"), sst_int_at(sst_be_at(0), "id"));
	assert_int_equal(chain_open_exchanges(C), 0);
	/* the state names an ended call */
	assert_true(retry_with(8, state_text));
	assert_non_null(strstr(sst_err_message(last_out()), "has ended"));
}

/* The backend withdraws its request: the client never hears of it, and its
 * retry answers nothing there. */
static void test_backend_withdraws_request(void **state)
{
	(void)state;
	call_asks_input();
	size_t outs = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":100}}");
	assert_int_equal(n_out(), outs);
	size_t before = sst_n_be();
	assert_true(retry_with(8, state_text));
	assert_null(be_answer(100));
	assert_int_equal(sst_n_be(), before);
	sst_be_respond(0, "{\"content\":[]}");
	assert_int_equal(sst_int_at(last_out(), "id"), 8);
}

/* Requests a backend sends together reach the client as one input_required,
 * under the keys a 2026-07-28 backend gave them, without mcp-chain's own
 * _meta keys; the related call decides where they go. */
static void test_gathered_and_keyed(void **state)
{
	(void)state;
	send_c("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}");
	send_c("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"u\"}}");
	json_int_t call7 = sst_int_at(sst_be_at(0), "id");   /* two calls open: only the link tells */
	char buf[512];
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"elicitation/create\",\"params\":"
		 "{\"message\":\"a\",\"_meta\":{\"io.mcp-chain/inputKey\":\"user_name\","
		 "\"io.mcp-chain/relatedRequest\":%" JSON_INTEGER_FORMAT ",\"other\":1}}}", call7);
	sst_send_b(buf);
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":101,\"method\":\"roots/list\",\"params\":"
		 "{\"_meta\":{\"io.mcp-chain/inputKey\":\"roots\",\"io.mcp-chain/relatedRequest\":%"
		 JSON_INTEGER_FORMAT "}}}", call7);
	sst_send_b(buf);
	/* a key already taken: the request's own id is its key */
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":102,\"method\":\"roots/list\",\"params\":"
		 "{\"_meta\":{\"io.mcp-chain/inputKey\":\"roots\",\"io.mcp-chain/relatedRequest\":%"
		 JSON_INTEGER_FORMAT "}}}", call7);
	sst_send_b(buf);
	size_t outs = n_out();
	sst_run_once();
	assert_int_equal(n_out(), outs + 1);
	assert_int_equal(sst_int_at(last_out(), "id"), 7);
	json_t *reqs = json_object_get(json_object_get(last_out(), "result"), "inputRequests");
	assert_int_equal(json_object_size(reqs), 3);
	json_t *e = json_object_get(reqs, "user_name");
	assert_non_null(e);
	json_t *meta = json_object_get(json_object_get(e, "params"), "_meta");
	assert_null(json_object_get(meta, "io.mcp-chain/inputKey"));
	assert_null(json_object_get(meta, "io.mcp-chain/relatedRequest"));
	assert_int_equal(sst_int_at(meta, "other"), 1);   /* the rest stays */
	assert_string_equal(sst_str_at(json_object_get(e, "params"), "message"), "a");
	json_t *roots = json_object_get(reqs, "roots");
	assert_non_null(roots);
	assert_null(json_object_get(json_object_get(roots, "params"), "_meta"));
	/* the third under a key of its own (its id at the client) */
	const char *k;
	json_t *v;
	int others = 0;
	json_object_foreach(reqs, k, v) {
		if (strcmp(k, "user_name") != 0 && strcmp(k, "roots") != 0) {
			others++;
			assert_string_equal(sst_str_at(v, "method"), "roots/list");
			assert_true(strtol(k, NULL, 10) > 0);
		}
	}
	assert_int_equal(others, 1);
}

/* Two calls open at the backend: its request cannot be placed, so it is
 * refused; none open: the same; a ping is answered by the layer. */
/*
 * A backend's request no call carries (roots/list after initialized)
 * waits for the client's next call that may be asked: that call is
 * answered input_required first, and its retry, the answers taken off,
 * goes on to the backend as the call. Several calls open: nothing tells
 * which one a request is for, refused. A ping is answered here.
 */
static void test_requests_outside_a_call(void **state)
{
	(void)state;
	size_t outs = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"roots/list\",\"params\":{}}");
	sst_run_once();
	assert_null(be_answer(99));
	assert_int_equal(n_out(), outs);
	/* a list cannot be asked anything: it goes on, the request still waits */
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}"));
	sst_be_respond(sst_n_be() - 1, "{\"tools\":[]}");
	assert_null(be_answer(99));
	size_t to_be = sst_n_be();
	/* the next call is asked first; nothing reaches the backend yet */
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
		"\"_meta\":{\"progressToken\":\"p2\"}}}"));
	assert_int_equal(sst_n_be(), to_be);
	json_t *r = json_object_get(last_out(), "result");
	assert_int_equal(sst_int_at(last_out(), "id"), 2);
	assert_string_equal(sst_str_at(r, "resultType"), "input_required");
	json_t *reqs = json_object_get(r, "inputRequests");
	assert_int_equal(json_object_size(reqs), 1);
	const char *key = json_object_iter_key(json_object_iter(reqs));
	assert_string_equal(sst_str_at(json_object_get(reqs, key), "method"), "roots/list");
	json_t *m = json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:{s:[{s:s}]}},s:s,s:{s:s}}}", "jsonrpc", "2.0",
		"id", 3, "method", "tools/call", "params", "name", "t", "inputResponses", key, "roots",
		"uri", "file:///w", "requestState", sst_str_at(r, "requestState"), "_meta",
		"progressToken", "p3");
	assert_false(send_cm(&cl, m));   /* goes on as the call */
	json_t *ans = be_answer(99);
	assert_non_null(ans);
	assert_string_equal(sst_str_at(json_array_get(json_object_get(json_object_get(ans, "result"),
		"roots"), 0), "uri"), "file:///w");
	long call = be_find("tools/call");
	assert_true(call >= 0 && (size_t)call >= to_be);
	json_t *params = json_object_get(sst_be_at((size_t)call), "params");
	assert_null(json_object_get(params, "inputResponses"));
	assert_null(json_object_get(params, "requestState"));
	assert_string_equal(sst_str_at(params, "name"), "t");
	sst_be_respond((size_t)call, "{\"content\":[]}");
	assert_int_equal(sst_int_at(last_out(), "id"), 3);
	/* two calls open: a request for one of them cannot be placed */
	send_c("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"a\"}}");
	send_c("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"b\"}}");
	outs = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"sampling/createMessage\",\"params\":{}}");
	json_t *a = be_answer(100);
	assert_non_null(a);
	assert_int_equal(sst_err_code(a), RPC_INVALID_REQUEST);
	assert_non_null(strstr(sst_err_message(a), "several calls are open"));
	/* no ping in this era: the layer answers it, the client sees nothing */
	sst_send_b("{\"jsonrpc\":\"2.0\",\"id\":101,\"method\":\"ping\"}");
	assert_true(json_is_object(json_object_get(be_answer(101), "result")));
	sst_run_once();
	assert_int_equal(n_out(), outs);
}

/* ---- log messages ---- */

static void log_note(const char *level)
{
	char buf[256];
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
		 "\"params\":{\"level\":\"%s\",\"data\":\"x\"}}", level);
	sst_send_b(buf);
}

/* None unless a request's _meta asks; then from that level on, and the
 * backend hears logging/setLevel whenever the level changes. */
static void test_log_level(void **state)
{
	(void)state;
	log_note("emergency");
	assert_int_equal(n_out(), 0);
	/* an unknown level changes nothing */
	send_c("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	       "\"io.modelcontextprotocol/logLevel\":\"loud\"}}}");
	assert_int_equal(sst_n_be(), 1);
	sst_be_respond(0, "{\"tools\":[]}");
	size_t outs = n_out();
	log_note("emergency");
	assert_int_equal(n_out(), outs);
	send_c("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	       "\"io.modelcontextprotocol/logLevel\":\"warning\"}}}");
	size_t i = sst_n_be() - 2;   /* logging/setLevel, then the request */
	assert_string_equal(sst_str_at(sst_be_at(i), "method"), "logging/setLevel");
	assert_string_equal(sst_str_at(json_object_get(sst_be_at(i), "params"), "level"), "warning");
	outs = n_out();
	sst_be_respond(i, "{}");
	assert_int_equal(n_out(), outs);   /* the answer to setLevel is the layer's own */
	log_note("info");
	assert_int_equal(n_out(), outs);
	log_note("warning");
	assert_int_equal(n_out(), outs + 1);
	log_note("error");
	assert_int_equal(n_out(), outs + 2);
	assert_string_equal(sst_str_at(json_object_get(last_out(), "params"), "level"), "error");
	/* the same level again: nothing more to the backend */
	size_t before = sst_n_be();
	send_c("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	       "\"io.modelcontextprotocol/logLevel\":\"warning\"}}}");
	assert_int_equal(sst_n_be(), before + 1);
	/* down to debug: told again, and info now passes */
	send_c("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	       "\"io.modelcontextprotocol/logLevel\":\"debug\"}}}");
	assert_int_equal(sst_n_be(), before + 3);
	assert_string_equal(sst_str_at(json_object_get(sst_be_at(before + 1), "params"), "level"), "debug");
	outs = n_out();
	log_note("info");
	assert_int_equal(n_out(), outs + 1);
	/* a message without a level is not wanted */
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"x\"}}");
	assert_int_equal(n_out(), outs + 1);
}

/* ---- listens ---- */

static const char *sub_id(json_t *m)
{
	return sst_str_at(json_object_get(json_object_get(m, "params"), "_meta"),
		      "io.modelcontextprotocol/subscriptionId");
}

/* subscriptions/listen: list_changed only to the streams that asked. */
static void test_listen(void **state)
{
	(void)state;
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
	assert_int_equal(n_out(), 0);   /* nobody listens yet */
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":\"L\",\"method\":\"subscriptions/listen\",\"params\":{"
			   "\"notifications\":{\"toolsListChanged\":true,\"promptsListChanged\":false,"
			   "\"resourceSubscriptions\":[\"file:///a\",3]}}}"));
	json_t *ack = last_out();
	assert_string_equal(sst_str_at(ack, "method"), "notifications/subscriptions/acknowledged");
	assert_string_equal(sub_id(ack), "L");
	json_t *agreed = json_object_get(json_object_get(ack, "params"), "notifications");
	assert_true(json_is_true(json_object_get(agreed, "toolsListChanged")));
	assert_null(json_object_get(agreed, "promptsListChanged"));
	assert_null(json_object_get(agreed, "resourcesListChanged"));
	json_t *subs = json_object_get(agreed, "resourceSubscriptions");
	assert_int_equal(json_array_size(subs), 1);   /* the number is not a URI */
	assert_string_equal(json_string_value(json_array_get(subs, 0)), "file:///a");
	/* the URI is subscribed at the backend */
	assert_string_equal(sst_str_at(sst_be_at(sst_n_be() - 1), "method"), "resources/subscribe");
	assert_string_equal(sst_str_at(json_object_get(sst_be_at(sst_n_be() - 1), "params"), "uri"), "file:///a");
	size_t outs = n_out();
	sst_be_respond(sst_n_be() - 1, "{}");
	assert_int_equal(n_out(), outs);   /* the subscription's answer is the layer's own */
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
	assert_int_equal(n_out(), outs + 1);
	assert_string_equal(sub_id(last_out()), "L");
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/prompts/list_changed\"}");
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/list_changed\"}");
	assert_int_equal(n_out(), outs + 1);   /* not asked for */
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"file:///b\"}}");
	assert_int_equal(n_out(), outs + 1);
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"file:///a\","
	       "\"_meta\":{\"k\":1}}}");
	assert_int_equal(n_out(), outs + 2);
	assert_string_equal(sub_id(last_out()), "L");
	assert_int_equal(sst_int_at(json_object_get(json_object_get(last_out(), "params"), "_meta"), "k"), 1);
	/* the client ends the stream: unsubscribed, nothing more */
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"L\"}}"));
	assert_string_equal(sst_str_at(sst_be_at(sst_n_be() - 1), "method"), "resources/unsubscribe");
	sst_be_respond(sst_n_be() - 1, "{}");
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
	assert_int_equal(n_out(), outs + 2);
	assert_int_equal(chain_open_exchanges(C), 0);
}

/* Two streams on one URI: subscribed once, unsubscribed with the last;
 * each stream gets its own copy, tagged with its id. */
static void test_listens_share_uri(void **state)
{
	(void)state;
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscriptions/listen\",\"params\":{"
			   "\"notifications\":{\"resourceSubscriptions\":[\"u:x\"]}}}"));
	assert_int_equal(sst_n_be(), 1);
	sst_be_respond(0, "{}");
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"subscriptions/listen\",\"params\":{"
			   "\"notifications\":{\"resourceSubscriptions\":[\"u:x\"],\"resourcesListChanged\":true}}}"));
	assert_int_equal(sst_n_be(), 1);   /* already subscribed */
	size_t outs = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"u:x\"}}");
	assert_int_equal(n_out(), outs + 2);
	json_t *a = json_object_get(json_object_get(json_array_get(cl.out, outs), "params"), "_meta");
	json_t *b = json_object_get(json_object_get(json_array_get(cl.out, outs + 1), "params"), "_meta");
	json_int_t ids = json_integer_value(json_object_get(a, "io.modelcontextprotocol/subscriptionId")) +
			 json_integer_value(json_object_get(b, "io.modelcontextprotocol/subscriptionId"));
	assert_int_equal(ids, 3);
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/list_changed\"}");
	assert_int_equal(n_out(), outs + 3);
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}"));
	assert_int_equal(sst_n_be(), 1);   /* stream 2 still wants it */
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":2}}"));
	assert_int_equal(sst_n_be(), 2);
	assert_string_equal(sst_str_at(sst_be_at(1), "method"), "resources/unsubscribe");
	/* the subscription failing is only logged */
	size_t before_out = n_out();
	char buf[256];
	snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT
		 ",\"error\":{\"code\":-32601,\"message\":\"no\"}}", sst_int_at(sst_be_at(1), "id"));
	sst_send_b(buf);
	assert_int_equal(n_out(), before_out);
	assert_int_equal(chain_open_exchanges(C), 0);
}

static void test_listen_needs_filter(void **state)
{
	(void)state;
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"subscriptions/listen\",\"params\":{}}"));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	assert_int_equal(sst_int_at(last_out(), "id"), 5);
	assert_true(send_c("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"subscriptions/listen\","
			   "\"params\":{\"notifications\":[]}}"));
	assert_int_equal(sst_err_code(last_out()), RPC_INVALID_PARAMS);
	/* nothing was opened: notifications are dropped, cancelling names nothing */
	size_t outs = n_out();
	sst_send_b("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
	assert_int_equal(n_out(), outs);
	assert_false(send_c("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":5}}"));
	assert_int_equal(sst_n_be(), 0);
}

int main(void)
{
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_cacheable),
		T(test_stamp),
		T(test_send_stamps_results),
		T(test_result_through_chain),
		T(test_state_instance),
		T(test_round_trip),
		T(test_retry_missing_answer),
		T(test_forged_state),
		T(test_state_refusals),
		T(test_expired_state),
		T(test_call_ends_while_waiting),
		T(test_second_round),
		T(test_client_cancels_waiting_call),
		T(test_backend_withdraws_request),
		T(test_gathered_and_keyed),
		T(test_requests_outside_a_call),
		T(test_log_level),
		T(test_listen),
		T(test_listens_share_uri),
		T(test_listen_needs_filter),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
