/*
 * be_era.c - a 2026-07-28 backend behind handshake-era clients: the
 * translation between the two eras at the backend's edge (include/be_era.h).
 *
 * Calls that may answer input_required (tools/call, prompts/get,
 * resources/read) are remembered under the id they have at the backend
 * until their final answer, so that a round of input requests can send
 * the call again. The retry has a fresh id at the backend (the original
 * one is what the chain knows); its answer leaves with the original id.
 * Input requests go up as the backend's own requests with ids
 * "mcpc-input-N", which the chain hands back in the client's answers.
 */
#include "be_era.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "era.h"
#include "hmap.h"
#include "log.h"
#include "rpc.h"

#define INPUT_PREFIX "mcpc-input-"
#define LISTEN_PREFIX "mcpc-listen-"

struct era_call;

/* One input request of a round, sent up to the client. */
struct era_input {
	uint64_t seq;             /* its id is INPUT_PREFIX seq */
	char *key;                /* owned: its key in inputRequests */
	bool answered;
	struct era_call *call;
	struct era_input *next;   /* in the call's round */
};

/* A call that may answer input_required, open at the backend. */
struct era_call {
	json_int_t orig;          /* the id the chain gave it at the backend */
	json_int_t cur;           /* the id of the attempt in flight; 0 in a round */
	char *method;             /* owned */
	json_t *params;           /* owned: its params with the envelope */
	json_t *state;            /* owned: the round's requestState, or NULL */
	json_t *responses;        /* owned: the round's inputResponses */
	json_t *failure;          /* owned: the error decided while busy */
	unsigned rounds;
	unsigned waiting;         /* input requests not answered yet */
	bool busy;                /* its round is being sent up */
	struct era_input *inputs;
};

/* A message to hand to the chain at the next loop turn. */
struct later {
	json_t *msg;              /* owned */
	struct later *next;
};

struct be_era {
	struct backend *b;
	struct hmap by_cur;       /* attempt id at the backend -> call */
	struct hmap by_orig;      /* the chain's id -> call */
	struct hmap inputs;       /* seq -> era_input */
	struct hmap own_rounds;   /* ids at the backend of calls whose client
				   * speaks 2026-07-28 itself: it owns their
				   * rounds, their answers pass as they come */
	uint64_t next_seq;
	char *level;              /* owned: logging/setLevel's level, or NULL */
	json_t *caps;             /* owned: the backend's capabilities, or NULL */
	json_t *uris;             /* owned: subscribed resource URIs (array) */
	char *listen_id;          /* owned: the open listen request's id, or NULL */
	unsigned listen_seq;
	struct later *later, **later_tail;
	ev_timer later_timer;     /* hands LATER on from the loop, not from a send */
};

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* New translation state. */
struct be_era *be_era_new(struct backend *b)
{
	struct be_era *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->b = b;
	e->uris = json_array();
	e->later_tail = &e->later;
	ev_timer_init(&e->later_timer, later_cb, 0., 0.);
	e->later_timer.data = e;
	return e;
}

/* ---- helpers ---- */

/* Queues MSG (stolen) for the chain at the next loop turn. */
static void hand_later(struct be_era *e, json_t *msg)
{
	struct later *l = calloc(1, sizeof *l);
	if (!l) {
		json_decref(msg);
		return;
	}
	l->msg = msg;
	*e->later_tail = l;
	e->later_tail = &l->next;
	if (!ev_is_active(&e->later_timer)) {
		ev_timer_set(&e->later_timer, 0., 0.);
		ev_timer_start(EV_DEFAULT, &e->later_timer);
	}
}

/* Hands the queued messages to the chain. */
static void later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct be_era *e = w->data;
	(void)loop;
	(void)revents;
	struct later *l = e->later;
	e->later = NULL;
	e->later_tail = &e->later;
	while (l) {
		struct later *next = l->next;
		backend_deliver(e->b, l->msg, 0);
		free(l);
		l = next;
	}
}

/* Drops what waits to be handed on. */
static void drop_later(struct be_era *e)
{
	ev_timer_stop(EV_DEFAULT, &e->later_timer);
	while (e->later) {
		struct later *l = e->later;
		e->later = l->next;
		json_decref(l->msg);
		free(l);
	}
	e->later_tail = &e->later;
}

/* The envelope of the stateless era from the client's initialize params. */
json_t *be_era_envelope(json_t *params, const char *level)
{
	json_t *caps = json_object_get(params, "capabilities");
	json_t *info = json_object_get(params, "clientInfo");
	json_t *meta = json_object();
	json_object_set_new(meta, ERA_META_VERSION, json_string(ERA_STATELESS_VERSION));
	json_object_set_new(meta, ERA_META_CLIENT_CAPS,
			    json_is_object(caps) ? json_deep_copy(caps) : json_object());
	if (json_is_object(info))
		json_object_set(meta, ERA_META_CLIENT_INFO, info);
	if (level)
		json_object_set_new(meta, ERA_META_LOG_LEVEL, json_string(level));
	return meta;
}

/* Adds the envelope to MSG's params (MSG owned by the caller, changed). */
static void add_envelope(struct be_era *e, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	if (!json_is_object(params)) {
		params = json_object();
		json_object_set_new(msg, "params", params);
	}
	json_t *meta = json_object_get(params, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(params, "_meta", meta);
	}
	json_t *env = be_era_envelope(backend_init_params(e->b), e->level);
	const char *key;
	json_t *v;
	json_object_foreach(env, key, v)   /* a 2026-07-28 client's own facts stay its own */
		if (!json_object_get(meta, key))
			json_object_set(meta, key, v);
	json_decref(env);
}

/* The empty result for request ID (borrowed), answered here. */
static json_t *local_result(json_t *id)
{
	return rpc_result(id, json_object());
}

/* An error for the chain's request ORIG. */
static json_t *call_error(json_int_t orig, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static json_t *call_error(json_int_t orig, int code, const char *fmt, ...)
{
	char m[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	json_t *id = json_integer(orig);
	json_t *err = rpc_error(id, code, m, NULL);
	json_decref(id);
	return err;
}

/* Removes the era's members from a result the client gets (a discover
 * result keeps its _meta: backend.c reads the server's identity there). */
static void strip_result(json_t *result)
{
	if (!json_is_object(result) || json_object_get(result, "supportedVersions"))
		return;
	json_object_del(result, "resultType");
	json_object_del(result, "ttlMs");
	json_object_del(result, "cacheScope");
	json_t *meta = json_object_get(result, "_meta");
	if (json_is_object(meta)) {
		json_object_del(meta, ERA_META_SERVER_INFO);
		if (json_object_size(meta) == 0)
			json_object_del(result, "_meta");
	}
}

/* ---- calls and rounds ---- */

/* True for the methods whose result may be input_required. */
static bool may_need_input(const char *method)
{
	return strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ||
	       strcmp(method, "resources/read") == 0;
}

/* Forgets the round's input requests; with REASON, cancels those still open. */
static void drop_inputs(struct be_era *e, struct era_call *c, const char *reason)
{
	while (c->inputs) {
		struct era_input *in = c->inputs;
		c->inputs = in->next;
		hmap_del(&e->inputs, &in->seq, sizeof in->seq);
		if (reason && !in->answered) {
			char id[48];
			snprintf(id, sizeof id, INPUT_PREFIX "%" PRIu64, in->seq);
			hand_later(e, rpc_notification("notifications/cancelled",
				json_pack("{s:s,s:s}", "requestId", id, "reason", reason)));
		}
		free(in->key);
		free(in);
	}
	c->waiting = 0;
}

/* Frees call C, taking it out of the maps. */
static void call_free(struct be_era *e, struct era_call *c, const char *cancel_reason)
{
	drop_inputs(e, c, cancel_reason);
	if (c->cur)
		hmap_del(&e->by_cur, &c->cur, sizeof c->cur);
	hmap_del(&e->by_orig, &c->orig, sizeof c->orig);
	free(c->method);
	json_decref(c->params);
	json_decref(c->state);
	json_decref(c->responses);
	json_decref(c->failure);
	free(c);
}

/* Ends C with the error ERR (stolen) for the client, cancelling what is open. */
static void call_fail(struct be_era *e, struct era_call *c, json_t *err)
{
	log_warn("%s: %s %" JSON_INTEGER_FORMAT " failed: %s", backend_peer(e->b)->name,
		 c->method, c->orig,
		 json_string_value(json_object_get(json_object_get(err, "error"), "message")) ?: "?");
	hand_later(e, err);
	call_free(e, c, "the request it was for ended");
}

/* Sends C again with this round's answers, under a fresh id. */
static void call_retry(struct be_era *e, struct era_call *c)
{
	struct peer *p = backend_peer(e->b);
	json_t *params = json_deep_copy(c->params);
	json_object_set_new(params, "inputResponses", c->responses);
	c->responses = NULL;
	if (c->state)
		json_object_set(params, "requestState", c->state);
	drop_inputs(e, c, NULL);
	c->cur = p->next_id++;
	json_t *req = json_pack("{s:s,s:I,s:s,s:o}", "jsonrpc", "2.0", "id", (json_int_t)c->cur,
				"method", c->method, "params", params);
	if (!req || hmap_put(&e->by_cur, &c->cur, sizeof c->cur, c) < 0 ||
	    backend_send_transport(e->b, req) < 0) {
		json_decref(req);
		call_fail(e, c, call_error(c->orig, RPC_BACKEND_GONE,
					   "backend %s: cannot send the request again", p->name));
		return;
	}
	log_debug("%s: %s %" JSON_INTEGER_FORMAT " sent again as %" JSON_INTEGER_FORMAT
		  " with %s", p->name, c->method, c->orig, c->cur, "its input responses");
	json_decref(req);
}

/* Goes on with C when nothing of its round is pending any more. */
static void call_settle(struct be_era *e, struct era_call *c)
{
	if (c->busy)
		return;
	if (c->failure) {
		json_t *f = c->failure;
		c->failure = NULL;
		call_fail(e, c, f);
		return;
	}
	if (c->waiting == 0)
		call_retry(e, c);
}

/* Sends one input request up, as a request of the backend's own. */
static int input_send(struct be_era *e, struct era_call *c, const char *key, json_t *req)
{
	const char *method = json_string_value(json_object_get(req, "method"));
	json_t *params = json_object_get(req, "params");
	if (!method)
		return -1;
	struct era_input *in = calloc(1, sizeof *in);
	if (!in)
		return -1;
	in->seq = ++e->next_seq;
	in->key = strdup(key);
	in->call = c;
	in->next = c->inputs;
	c->inputs = in;
	c->waiting++;
	hmap_put(&e->inputs, &in->seq, sizeof in->seq, in);
	char id[48];
	snprintf(id, sizeof id, INPUT_PREFIX "%" PRIu64, in->seq);
	json_t *up = json_pack("{s:s,s:s,s:s}", "jsonrpc", "2.0", "id", id, "method", method);
	json_t *p = json_is_object(params) ? json_deep_copy(params) : json_object();
	json_t *meta = json_object_get(p, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(p, "_meta", meta);
	}
	json_object_set_new(meta, ERA_META_INPUT_KEY, json_string(key));  /* see era.h */
	json_object_set_new(meta, ERA_META_RELATED, json_integer(c->orig));
	json_object_set_new(up, "params", p);
	/* the chain may answer it at once (no client to ask): see input_answer */
	chain_receive(backend_peer(e->b), up);
	return 0;
}

/* C's attempt answered input_required (RESULT borrowed): asks the client. */
static void round_start(struct be_era *e, struct era_call *c, json_t *result)
{
	json_t *reqs = json_object_get(result, "inputRequests");
	hmap_del(&e->by_cur, &c->cur, sizeof c->cur);
	c->cur = 0;
	if (++c->rounds > BE_ERA_MAX_ROUNDS) {
		call_fail(e, c, call_error(c->orig, RPC_INTERNAL_ERROR,
			"backend %s asked for input more than %d times", backend_peer(e->b)->name,
			BE_ERA_MAX_ROUNDS));
		return;
	}
	json_decref(c->state);
	c->state = json_incref(json_object_get(result, "requestState"));
	json_decref(c->responses);
	c->responses = json_object();
	c->busy = true;
	const char *key;
	json_t *req;
	if (json_is_object(reqs))
		json_object_foreach(reqs, key, req)
			if (!c->failure && input_send(e, c, key, req) < 0)
				c->failure = call_error(c->orig, RPC_INTERNAL_ERROR,
					"backend %s sent an input request mcp-chain cannot pass on (%s)",
					backend_peer(e->b)->name, key);
	c->busy = false;
	log_debug("%s: %s %" JSON_INTEGER_FORMAT ": input required (round %u, %u requests)",
		  backend_peer(e->b)->name, c->method, c->orig, c->rounds, c->waiting);
	call_settle(e, c);
}

/* A client's answer MSG (borrowed) to input request SEQ. */
static void input_answer(struct be_era *e, uint64_t seq, json_t *msg)
{
	struct era_input *in = hmap_get(&e->inputs, &seq, sizeof seq);
	if (!in || in->answered)
		return;  /* its call ended already */
	struct era_call *c = in->call;
	json_t *result = json_object_get(msg, "result");
	in->answered = true;
	c->waiting--;
	if (result) {
		json_object_set(c->responses, in->key, result);
	} else if (!c->failure) {
		json_t *err = json_object_get(msg, "error");
		c->failure = call_error(c->orig, RPC_INTERNAL_ERROR,
			"the input the backend asked for (%s) failed: %s", in->key,
			json_string_value(json_object_get(err, "message")) ?: "no result");
	}
	call_settle(e, c);
}

/* The sequence number of an id "PREFIX<n>", or 0. */
static uint64_t prefixed_seq(json_t *id, const char *prefix)
{
	const char *s = json_string_value(id);
	size_t n = strlen(prefix);
	if (!s || strncmp(s, prefix, n) != 0)
		return 0;
	char *end;
	unsigned long long v = strtoull(s + n, &end, 10);
	return *end ? 0 : (uint64_t)v;
}

/* ---- the listen stream ---- */

/* Sends a cancellation of the listen request ID (borrowed text). */
static void listen_cancel(struct be_era *e, const char *id)
{
	json_t *n = rpc_notification("notifications/cancelled",
				     json_pack("{s:s,s:s}", "requestId", id, "reason", "replaced"));
	add_envelope(e, n);
	backend_send_transport(e->b, n);
	json_decref(n);
}

/* The listen filter for what the backend offers and the clients subscribed. */
static json_t *listen_filter(struct be_era *e)
{
	static const struct { const char *cap, *key; } kinds[] = {
		{ "tools", "toolsListChanged" },
		{ "prompts", "promptsListChanged" },
		{ "resources", "resourcesListChanged" },
	};
	json_t *f = json_object();
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		json_t *cap = json_object_get(e->caps, kinds[i].cap);
		if (json_is_true(json_object_get(cap, "listChanged")))
			json_object_set_new(f, kinds[i].key, json_true());
	}
	if (json_array_size(e->uris))
		json_object_set(f, "resourceSubscriptions", e->uris);
	return f;
}

/* Opens the listen stream anew for the current filter (replacing the old). */
static void relisten(struct be_era *e)
{
	json_t *filter = listen_filter(e);
	char *old = e->listen_id;
	e->listen_id = NULL;
	if (json_object_size(filter) > 0) {
		char id[48];
		snprintf(id, sizeof id, LISTEN_PREFIX "%u", ++e->listen_seq);
		json_t *req = json_pack("{s:s,s:s,s:s,s:{s:O}}", "jsonrpc", "2.0", "id", id,
					"method", "subscriptions/listen", "params",
					"notifications", filter);
		add_envelope(e, req);
		if (backend_send_transport(e->b, req) == 0)
			e->listen_id = strdup(id);
		else
			log_warn("%s: cannot open subscriptions/listen", backend_peer(e->b)->name);
		json_decref(req);
	}
	json_decref(filter);
	if (old)
		listen_cancel(e, old);
	free(old);
}

/* The backend is ready: open the listen stream. */
void be_era_ready(struct be_era *e, json_t *caps)
{
	json_decref(e->caps);
	e->caps = json_deep_copy(caps);
	free(e->listen_id);   /* a new run: the old stream went with the transport */
	e->listen_id = NULL;
	relisten(e);
}

/* Adds (ON) or removes URI from the subscriptions; true when it changed. */
static bool subscription_set(struct be_era *e, const char *uri, bool on)
{
	size_t i;
	json_t *v;
	json_array_foreach(e->uris, i, v)
		if (strcmp(json_string_value(v), uri) == 0) {
			if (!on)
				json_array_remove(e->uris, i);
			return !on;
		}
	if (on)
		json_array_append_new(e->uris, json_string(uri));
	return on;
}

/* ---- to the backend ---- */

/* A request the backend does not know in this era, answered here; true if so. */
static bool answer_here(struct be_era *e, const char *method, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	json_t *reply = NULL;
	if (strcmp(method, "ping") == 0) {
		reply = local_result(id);
	} else if (strcmp(method, "logging/setLevel") == 0) {
		const char *level = json_string_value(json_object_get(params, "level"));
		if (level) {
			free(e->level);
			e->level = strdup(level);
			reply = local_result(id);
		} else {
			reply = rpc_error(id, RPC_INVALID_PARAMS, "missing \"level\"", NULL);
		}
	} else if (strcmp(method, "resources/subscribe") == 0 ||
		   strcmp(method, "resources/unsubscribe") == 0) {
		const char *uri = json_string_value(json_object_get(params, "uri"));
		if (uri) {
			if (subscription_set(e, uri, method[10] == 's'))
				relisten(e);
			reply = local_result(id);
		} else {
			reply = rpc_error(id, RPC_INVALID_PARAMS, "missing \"uri\"", NULL);
		}
	}
	if (!reply)
		return false;
	hand_later(e, reply);
	return true;
}

/* The client cancelled request ORIG: ends its round, or points at its retry. */
static int cancel_out(struct be_era *e, json_t *msg)
{
	json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
	json_int_t orig = json_integer_value(rid);
	struct era_call *c = json_is_integer(rid) ? hmap_get(&e->by_orig, &orig, sizeof orig) : NULL;
	if (json_is_integer(rid))
		hmap_del(&e->own_rounds, &orig, sizeof orig);
	json_t *out = json_deep_copy(msg);
	int rc = 0;
	if (c && c->cur && c->cur != c->orig)
		json_object_set_new(json_object_get(out, "params"), "requestId",
				    json_integer(c->cur));
	if (!c || c->cur) {  /* the backend has an attempt open */
		add_envelope(e, out);
		rc = backend_send_transport(e->b, out);
	}
	if (c)
		call_free(e, c, "cancelled");
	json_decref(out);
	return rc;
}

/* A request from the chain: enveloped, remembered when it may need input. */
static int request_out(struct be_era *e, json_t *msg, const char *method)
{
	if (answer_here(e, method, msg))
		return 0;
	/* a 2026-07-28 client's own request: its rounds are its own
	 * (input_required, inputResponses and requestState pass as they are) */
	bool own = era_request_version(json_object_get(msg, "params")) != NULL;
	json_t *out = json_deep_copy(msg);
	add_envelope(e, out);
	json_t *id = json_object_get(out, "id");
	if (own && json_is_integer(id)) {
		json_int_t k = json_integer_value(id);
		if (hmap_put(&e->own_rounds, &k, sizeof k, e) < 0)
			own = false;
	}
	if (!own && json_is_integer(id) && may_need_input(method)) {
		struct era_call *c = calloc(1, sizeof *c);
		if (c) {
			c->orig = c->cur = json_integer_value(id);
			c->method = strdup(method);
			c->params = json_incref(json_object_get(out, "params"));
			if (hmap_put(&e->by_cur, &c->cur, sizeof c->cur, c) < 0 ||
			    hmap_put(&e->by_orig, &c->orig, sizeof c->orig, c) < 0) {
				hmap_del(&e->by_cur, &c->cur, sizeof c->cur);
				free(c->method);
				json_decref(c->params);
				free(c);
			}
		}
	}
	int rc = backend_send_transport(e->b, out);
	if (rc < 0 && json_is_integer(id)) {
		json_int_t k = json_integer_value(id);
		struct era_call *c = hmap_get(&e->by_orig, &k, sizeof k);
		if (c)
			call_free(e, c, NULL);
	}
	json_decref(out);
	return rc;
}

/* Translates and sends a message from the chain. */
int be_era_send(struct be_era *e, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (!method) {
		uint64_t seq = prefixed_seq(id, INPUT_PREFIX);
		if (seq) {
			input_answer(e, seq, msg);
			return 0;
		}
		return backend_send_transport(e->b, msg);  /* nothing else asks in this era */
	}
	if (id && !json_is_null(id))
		return request_out(e, msg, method);
	if (strcmp(method, "notifications/cancelled") == 0)
		return cancel_out(e, msg);
	if (strcmp(method, "notifications/initialized") == 0 ||
	    strcmp(method, "notifications/roots/list_changed") == 0)
		return 0;  /* no such notification in this era */
	json_t *out = json_deep_copy(msg);
	add_envelope(e, out);
	int rc = backend_send_transport(e->b, out);
	json_decref(out);
	return rc;
}

/* ---- from the backend ---- */

/* A notification: the listen stream's lose their subscription id. */
static json_t *notification_in(struct be_era *e, json_t *msg, const char *method)
{
	json_t *params = json_object_get(msg, "params");
	json_t *sub = era_meta(params, ERA_META_SUBSCRIPTION);
	if (strcmp(method, "notifications/subscriptions/acknowledged") == 0) {
		log_debug("%s: subscriptions/listen acknowledged", backend_peer(e->b)->name);
		json_decref(msg);
		return NULL;
	}
	if (!sub)
		return msg;
	if (!e->listen_id || !json_is_string(sub) ||
	    strcmp(json_string_value(sub), e->listen_id) != 0) {
		json_decref(msg);  /* a stream replaced already */
		return NULL;
	}
	json_t *meta = json_object_get(params, "_meta");
	json_object_del(meta, ERA_META_SUBSCRIPTION);
	if (json_object_size(meta) == 0)
		json_object_del(params, "_meta");
	return msg;
}

/* The answer to a listen request: the stream ended. */
static void listen_ended(struct be_era *e, json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "id"));
	json_t *err = json_object_get(msg, "error");
	bool current = e->listen_id && id && strcmp(id, e->listen_id) == 0;
	if (!current)
		return;
	/* not opened again: a server that refuses or drops it at once would
	 * make that a loop; the next subscribe opens a new one */
	if (err)
		log_warn("%s: subscriptions/listen ended: %s; list_changed and resources/updated "
			 "from it stop", backend_peer(e->b)->name,
			 json_string_value(json_object_get(err, "message")) ?: "?");
	else
		log_info("%s: the backend closed its subscriptions/listen stream",
			 backend_peer(e->b)->name);
	free(e->listen_id);
	e->listen_id = NULL;
}

/* Translates a message from the backend. */
json_t *be_era_receive(struct be_era *e, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (method)
		return id ? msg : notification_in(e, msg, method);
	if (prefixed_seq(id, LISTEN_PREFIX)) {
		listen_ended(e, msg);
		json_decref(msg);
		return NULL;
	}
	json_t *result = json_object_get(msg, "result");
	json_int_t k = json_integer_value(id);
	if (json_is_integer(id) && hmap_del(&e->own_rounds, &k, sizeof k))
		return msg;   /* for a client of the era: as it came */
	struct era_call *c = json_is_integer(id) ? hmap_get(&e->by_cur, &k, sizeof k) : NULL;
	const char *rt = json_string_value(json_object_get(result, "resultType"));
	if (rt && strcmp(rt, "input_required") == 0) {
		if (c)
			round_start(e, c, result);
		else
			hand_later(e, rpc_errorf(id, RPC_INTERNAL_ERROR,
				"backend %s asked for input on a request that cannot carry it",
				backend_peer(e->b)->name));
		json_decref(msg);
		return NULL;
	}
	if (c) {
		json_object_set_new(msg, "id", json_integer(c->orig));
		call_free(e, c, NULL);
	}
	strip_result(result);
	return msg;
}

/* ---- the handshake-era view of discover ---- */

/* The initialize result for DISCOVER. */
json_t *be_era_init_result(json_t *discover, json_t *params, const char *name)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	json_t *caps = json_object_get(discover, "capabilities");
	json_t *info = era_meta(discover, ERA_META_SERVER_INFO);
	json_t *instructions = json_object_get(discover, "instructions");
	json_t *r = json_pack("{s:s}", "protocolVersion",
			      era_handshake_supported(asked) ? asked : era_handshake_versions[0]);
	json_object_set_new(r, "capabilities",
			    json_is_object(caps) ? json_deep_copy(caps) : json_object());
	json_object_del(json_object_get(r, "capabilities"), "extensions");
	if (json_is_object(info) && json_is_string(json_object_get(info, "name")))
		json_object_set(r, "serverInfo", info);
	else
		json_object_set_new(r, "serverInfo",
				    json_pack("{s:s,s:s}", "name", name, "version", "unknown"));
	if (json_is_string(instructions))
		json_object_set(r, "instructions", instructions);
	return r;
}

/* How a 2026-only server refuses initialize. */
bool be_era_refuses_initialize(json_t *response)
{
	json_t *err = json_object_get(response, "error");
	if (!err)
		return false;
	if (json_integer_value(json_object_get(err, "code")) == RPC_UNSUPPORTED_VERSION)
		return true;
	json_t *supported = json_object_get(json_object_get(err, "data"), "supported");
	size_t i;
	json_t *v;
	bool stateless = false;
	json_array_foreach(supported, i, v) {
		if (era_handshake_supported(json_string_value(v)))
			return false;
		stateless = stateless || era_stateless_supported(json_string_value(v));
	}
	return stateless;
}

/* ---- lifecycle ---- */

/* Frees every call (the chain fails their requests itself). */
static void drop_calls(struct be_era *e)
{
	size_t n = 0;
	void **all = hmap_drain(&e->by_orig, &n);
	for (size_t i = 0; i < n; i++) {
		call_free(e, all[i], NULL);
	}
	free(all);
	hmap_release(&e->by_cur);
	hmap_release(&e->inputs);
	hmap_release(&e->own_rounds);
}

/* The transport went down. */
void be_era_reset(struct be_era *e)
{
	if (!e)
		return;
	drop_calls(e);
	drop_later(e);
	free(e->listen_id);
	e->listen_id = NULL;
}

/* Frees E. */
void be_era_free(struct be_era *e)
{
	if (!e)
		return;
	be_era_reset(e);
	hmap_release(&e->by_orig);
	free(e->level);
	json_decref(e->caps);
	json_decref(e->uris);
	free(e);
}
