/*
 * fuzz_session.c - libFuzzer target for the client-facing server
 * (src/front/session.c with stateless.c and core/era.c): the lifecycle,
 * both protocol eras, the 2026-07-28 envelope checks, input_required
 * rounds and their requestState, listen streams and batches, driven with
 * a fake backend behind the chain.
 *
 * What must hold whatever the input: no crash, leak or undefined
 * behaviour; every line the client gets is one JSON-RPC message (a
 * response with an id, or a method); none carries in params._meta the
 * keys mcp-chain adds for itself (io.mcp-chain/inputKey, /relatedRequest),
 * which are taken off before a client sees a message; and once both sides
 * are gone no exchange stays open.
 *
 * The input is lines:
 *   "c LINE"  a line from the client
 *   "b LINE"  a line from the backend
 *   "r N"     the backend answers the N-th request it got (modulo their
 *             number) with a result, "e N" with an error
 *   "q N"     the backend asks the client (elicitation/create), its
 *             request naming the N-th request it got as the call it
 *             belongs to (io.mcp-chain/relatedRequest)
 *   "y N"     the client retries the call of the N-th input_required
 *             result it got (modulo), answering every input request with
 *             the requestState it was given: the round trip a fuzzer
 *             cannot forge (the state is signed)
 *   "t"       the loop runs once (timers due now: gathered rounds)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <jansson.h>

#include "chain.h"
#include "era.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"
#include "session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_session: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

#define MAX_LINES 64  /* of one input: keeps a run short */

/* ---- the fake backend ---- */

struct fbe {
	struct peer peer;   /* must be first */
	json_t *got;        /* requests it received (their ids), in order */
	void (*cb)(void *arg, json_t *response);
	void *cb_arg;
	json_t *init_params;
	json_t *init_result;  /* peer.init_result points here */
	unsigned asked;     /* requests it sent the client */
};

static struct fbe be;
static json_t *inputs;  /* input_required results the client got: {id, params} */

/* Keeps the id of a request the backend received. */
static void be_got(json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	if (id && json_object_get(msg, "method"))
		json_array_append(be.got, id);
}

static int be_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)p;
	(void)o;
	be_got(msg);
	return 0;
}

/* The pieces of one line, parsed: new (the chain only writes JSON). */
static json_t *parse_iov(const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	char *line = malloc(len + 1);
	CHECK(line);
	len = 0;
	for (int i = 0; i < n; i++) {
		memcpy(line + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	json_t *m = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
	CHECK(m);
	free(line);
	return m;
}

static int be_send_raw(struct peer *p, const struct iovec *iov, int n, const struct peer_out *o)
{
	(void)p;
	json_t *m = parse_iov(iov, n);
	if (o->kind == PEER_OUT_REQUEST)
		be_got(m);
	json_decref(m);
	return 0;
}

static int be_initialize(struct peer *p, json_t *params, void (*cb)(void *arg, json_t *response),
			 void *arg)
{
	(void)p;
	json_decref(be.init_params);
	be.init_params = json_deep_copy(params);
	json_t *v = json_object_get(params, "protocolVersion");
	json_t *r = json_pack("{s:O,s:{s:{s:b},s:{s:b},s:{}},s:{s:s,s:s}}",
			      "protocolVersion", v ? v : json_null(),
			      "capabilities", "tools", "listChanged", 1, "resources", "subscribe", 1,
			      "logging", "serverInfo", "name", "fake", "version", "1.0");
	json_decref(be.init_result);
	be.init_result = json_incref(r);
	be.peer.init_result = r;
	be.peer.ready = true;
	json_t *resp = rpc_result(json_null(), r);
	cb(arg, resp);
	json_decref(resp);
	return 0;
}

static const struct peer_ops be_ops = { .send = be_send, .send_raw = be_send_raw,
					.initialize = be_initialize };

/* ---- the client ---- */

static struct session *S;
static bool verbose;    /* FUZZ_VERBOSE set: what the client gets, on stderr */

/* True when M's params._meta holds one of the keys mcp-chain adds for
 * itself (era.h), which are taken off before a client sees a message. A
 * backend may say anything elsewhere: that crosses as it is. */
static bool has_own_meta(json_t *m)
{
	json_t *meta = json_object_get(json_object_get(m, "params"), "_meta");
	return json_object_get(meta, ERA_META_INPUT_KEY) || json_object_get(meta, ERA_META_RELATED);
}

/* One message the client got: checked; input_required results kept. */
static void client_got(json_t *m)
{
	CHECK(json_is_object(m));
	const char *v = json_string_value(json_object_get(m, "jsonrpc"));
	CHECK(v && strcmp(v, "2.0") == 0);
	CHECK(json_is_string(json_object_get(m, "method")) || json_object_get(m, "id"));
	CHECK(!has_own_meta(m));
	if (verbose) {
		char *t = json_dumps(m, JSON_COMPACT);
		fprintf(stderr, "client got: %s\n", t ? t : "?");
		free(t);
	}
	json_t *r = json_object_get(m, "result");
	const char *type = json_string_value(json_object_get(r, "resultType"));
	if (type && strcmp(type, "input_required") == 0 && json_array_size(inputs) < 16)
		json_array_append_new(inputs, json_pack("{s:O,s:O}", "id", json_object_get(m, "id"),
							"result", r));
}

static void client_take(json_t *msg)
{
	CHECK(msg);
	if (json_is_array(msg)) {
		size_t i;
		json_t *x;
		json_array_foreach(msg, i, x)
			client_got(x);
	} else {
		client_got(msg);
	}
}

/* What the session writes: a tree, or one line in pieces. */
static int client_write(void *arg, const struct session_out *o)
{
	(void)arg;
	if (!o->iov) {
		client_take(o->tree);
		return 0;
	}
	json_t *m = parse_iov(o->iov, o->n);
	client_take(m);
	json_decref(m);
	return 0;
}

/* ---- the script ---- */

/* The N-th request the backend got (modulo), or NULL when none. */
static json_t *nth_request(unsigned long n)
{
	size_t k = json_array_size(be.got);
	return k ? json_array_get(be.got, n % k) : NULL;
}

/* The backend answers its N-th request, with a result or an error. */
static void be_answer(unsigned long n, bool error)
{
	json_t *id = nth_request(n);
	if (!id)
		return;
	json_t *m = error ? rpc_error(id, -32602, "fuzzed error", NULL) :
		rpc_result(id, json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", "ok"));
	chain_receive(&be.peer, m);
}

/* The backend asks the client, naming its N-th request as the call. */
static void be_ask(unsigned long n)
{
	json_t *id = nth_request(n);
	json_t *m = json_pack("{s:s,s:s,s:s,s:{s:s,s:{s:s,s:{}}}}", "jsonrpc", "2.0",
			      "id", "", "method", "elicitation/create", "params",
			      "message", "name?", "requestedSchema", "type", "object", "properties");
	char ask[32];
	snprintf(ask, sizeof ask, "ask-%u", be.asked++);
	json_object_set_new(m, "id", json_string(ask));
	if (id)
		json_object_set_new(json_object_get(m, "params"), "_meta",
				    json_pack("{s:O}", "io.mcp-chain/relatedRequest", id));
	chain_receive(&be.peer, m);
}

/* The client retries the call of its N-th input_required result. */
static void client_retry(unsigned long n)
{
	size_t k = json_array_size(inputs);
	if (!k)
		return;
	json_t *in = json_array_get(inputs, n % k), *r = json_object_get(in, "result");
	json_t *responses = json_object(), *req;
	const char *key;
	json_object_foreach(json_object_get(r, "inputRequests"), key, req)
		json_object_set_new(responses, key, json_pack("{s:s,s:{s:s}}", "action", "accept",
							      "content", "name", "Ada"));
	json_t *params = json_pack("{s:s,s:o,s:{s:s,s:{s:{}}}}", "name", "t",
				   "inputResponses", responses, "_meta",
				   "io.modelcontextprotocol/protocolVersion", "2026-07-28",
				   "io.modelcontextprotocol/clientCapabilities", "elicitation");
	json_t *state = json_object_get(r, "requestState");
	if (state)
		json_object_set(params, "requestState", state);
	json_t *m = json_pack("{s:s,s:O,s:s,s:o}", "jsonrpc", "2.0", "id", json_object_get(in, "id"),
			      "method", "tools/call", "params", params);
	char *text = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	CHECK(text);
	session_receive_line(S, text, strlen(text));
	free(text);
}

static void run_line(const char *line, size_t len)
{
	if (len < 1)
		return;
	char op = line[0];
	const char *arg = len > 2 ? line + 2 : "";
	size_t alen = len > 2 ? len - 2 : 0;
	unsigned long n = strtoul(arg, NULL, 10);
	switch (op) {
	case 'c':
		session_receive_line(S, arg, alen);
		break;
	case 'b': {
		json_t *err = NULL;
		chain_receive_line(&be.peer, arg, alen, &err);
		json_decref(err);
		break;
	}
	case 'r':
	case 'e':
		be_answer(n, op == 'e');
		break;
	case 'q':
		be_ask(n);
		break;
	case 'y':
		client_retry(n);
		break;
	case 't':
		ev_run(EV_DEFAULT, EVRUN_NOWAIT);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;
	if (!once) {
		once = true;
		verbose = getenv("FUZZ_VERBOSE") != NULL;
		log_set_level(verbose ? LOG_DEBUG : LOG_ERROR);
		ev_default_loop(0);
	}
	/* strtoul and the line functions want a terminated copy */
	char *text = malloc(size + 1);
	CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';

	struct chain *c = chain_new();
	CHECK(c);
	memset(&be, 0, sizeof be);
	peer_init(&be.peer, &be_ops, PEER_BACKEND, "be");
	be.got = json_array();
	inputs = json_array();
	chain_add_peer(c, &be.peer);
	S = session_new(c, "client", client_write, NULL);
	CHECK(S);

	int lines = 0;
	for (char *p = text, *end = text + size; p < end && lines < MAX_LINES; lines++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		run_line(p, len);
		p += len + 1;
	}
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);

	/* both sides go: nothing may stay open */
	session_close(S, "fuzz: the client went away");
	chain_peer_gone(&be.peer, "fuzz: the backend went away");
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);
	session_free(S);
	S = NULL;
	chain_remove_peer(&be.peer);
	be.peer.init_result = NULL;
	peer_release(&be.peer);
	json_decref(be.init_result);
	CHECK(chain_open_exchanges(c) == 0);
	chain_free(c);
	json_decref(be.got);
	json_decref(be.init_params);
	json_decref(inputs);
	free(text);
	return 0;
}
