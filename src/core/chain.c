/*
 * chain.c - exchanges, id and progress-token mapping, cancellation and
 * routing between client sessions and backends.
 *
 * Life of a request: chain_receive() records an exchange under the
 * requester's id, walks the middleware pipeline, routes, gives the
 * request a fresh id in the responder's id space (its progress token
 * becomes that same id, unique per responder) and sends it. The response
 * is found by that id, walks the pipeline back, gets the requester's id
 * again and is delivered; the exchange is freed. A cancellation from the
 * requester is forwarded with the responder's id and ends the exchange at
 * once, so a late response finds nothing and is dropped.
 */
#include "chain.h"

#include <ev.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_internal.h"
#include "log.h"
#include "pool.h"
#include "router.h"
#include "rpc.h"

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

static struct peer *peers;
static struct pipeline *global_pl;
static size_t open_count;

/*
 * Freed exchanges kept for reuse, linked through their arg member and
 * otherwise poisoned for AddressSanitizer while kept.
 */
#define POOL_MAX 256
#define ARG_AT offsetof(struct exchange, arg)
#define ARG_END (ARG_AT + sizeof(void *))
static struct exchange *pool;
static size_t pool_count;

/* Marks EX, kept in the pool, unusable but for its link. */
static void pool_poison(struct exchange *ex)
{
	POOL_POISON(ex, ARG_AT);
	POOL_POISON((char *)ex + ARG_END, sizeof *ex - ARG_END);
}

/* Makes EX, taken from the pool, usable again. */
static void pool_unpoison(struct exchange *ex)
{
	POOL_UNPOISON(ex, ARG_AT);
	POOL_UNPOISON((char *)ex + ARG_END, sizeof *ex - ARG_END);
}

/* A notification on its way through the pipeline. */
struct note {
	struct mw_walk walk;
	struct mw_ctx ctx;
	struct peer *from;
	struct peer *to;   /* NULL: every ready client */
};

static void deliver_response(struct exchange *ex, json_t *msg);
static void send_notification(struct peer *from, struct peer *to, json_t *msg,
			      const char *method);

/* Registers a peer. */
void chain_add_peer(struct peer *p)
{
	p->next = peers;
	peers = p;
}

/* Unregisters a peer. */
void chain_remove_peer(struct peer *p)
{
	for (struct peer **pp = &peers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->next = NULL;
}

/* The global pipeline. */
struct pipeline *chain_global_pipeline(void)
{
	return global_pl;
}

/* The registered peers. */
struct peer *chain_peers(void)
{
	return peers;
}

/* Replaces the global pipeline. */
void chain_set_pipeline(struct pipeline *pl)
{
	pipeline_unref(global_pl);
	global_pl = pipeline_ref(pl);
}

/* The first registered peer of a role. */
struct peer *chain_first_peer(enum peer_role role)
{
	struct peer *found = NULL;
	for (struct peer *p = peers; p; p = p->next)
		if (p->role == role)
			found = p;  /* the list is newest first: keep the oldest */
	return found;
}

/* The peer a client's initialize goes to. */
struct peer *chain_route_backend(struct peer *client)
{
	return router_init_target(client);
}

/* The client for a backend's own request: one with a request open there. */
struct peer *chain_route_client(struct peer *backend)
{
	struct peer *first = NULL;
	for (struct peer *p = peers; p; p = p->next) {
		if (p->role != PEER_CLIENT || !p->ready)
			continue;
		if (!first)
			first = p;
		if (p->received.count > 0 && backend->sent.count > 0)
			return p;
	}
	return first;
}

/* Pauses or resumes the peers that feed a congested one. */
void chain_congestion(struct peer *p, bool congested)
{
	if (p->congested == congested)
		return;
	p->congested = congested;
	log_debug("%s: output %s", p->name, congested ? "congested, pausing its sources" : "drained");
	for (struct peer *q = peers; q; q = q->next) {
		if (q->role == p->role || !q->ops->pause)
			continue;
		if (congested && q->paused++ == 0)
			q->ops->pause(q, true);
		else if (!congested && q->paused > 0 && --q->paused == 0)
			q->ops->pause(q, false);
	}
}

/* Exchanges open anywhere. */
size_t chain_open_exchanges(void)
{
	return open_count;
}

static int abort_exchange(struct exchange *ex, int code, const char *message);

/* A request stayed open at its responder longer than allowed. */
static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct exchange *ex = w->data;
	char msg[300];
	(void)loop;
	(void)revents;
	snprintf(msg, sizeof msg, "request \"%s\" timed out after %g s at %s",
		 ex->method, ex->to->timeout, ex->to->name);
	log_warn("%s", msg);
	abort_exchange(ex, RPC_REQUEST_TIMEOUT, msg);
}

/* Makes an exchange for a request from FROM (NULL: our own). */
struct exchange *chain_exchange_new(struct peer *from, json_t *id, const char *method)
{
	struct exchange *ex = pool;
	if (ex) {
		pool = ex->arg;
		pool_count--;
		pool_unpoison(ex);
		memset(ex, 0, sizeof *ex);
	} else if (!(ex = calloc(1, sizeof *ex))) {
		return NULL;
	}
	ex->from = from;
	ex->from_id = json_incref(id);
	size_t mlen = strlen(method);
	ex->method = mlen < sizeof ex->method_buf ?
		memcpy(ex->method_buf, method, mlen + 1) : strdup(method);
	ex->ctx.kind = RPC_REQUEST;
	ex->ctx.method = ex->method;
	ex->ctx.start = ev_now(EV_DEFAULT);
	ex->ctx.chain = ex;
	ex->ctx.request_bytes = from ? from->rx_bytes : 0;
	ex->ctx.id = ex->from_id;
	ex->walk.ctx = &ex->ctx;
	ev_init(&ex->timer, on_timeout);
	ex->timer.data = ex;
	open_count++;
	return ex;
}

/* The requester's id, made from its text on first use. */
json_t *chain_exchange_id(struct exchange *ex)
{
	if (!ex->from_id && ex->id_text_n)
		ex->from_id = chain_span_value((struct jspan){ ex->id_text, ex->id_text_n });
	return ex->from_id;
}

/* Unregisters and frees an exchange. */
void chain_exchange_free(struct exchange *ex)
{
	unsigned char key[RPC_KEY_MAX];
	ev_timer_stop(EV_DEFAULT, &ex->timer);
	if (!ex->responded && ex->walk.reached > 0)
		mw_walk_abandon(&ex->walk);
	if (ex->in_sent)
		hmap_del(&ex->to->sent, &ex->to_id, sizeof ex->to_id);
	if (ex->in_received) {
		size_t klen = ex->from_id ? rpc_id_key(ex->from_id, key) :
			chain_id_key_text(ex->id_text, ex->id_text_n, key);
		hmap_del(&ex->from->received, key, klen);
	}
	json_decref(ex->from_id);
	json_decref(ex->from_token);
	json_decref(ex->ctx.scratch);
	free(ex->walk.raw_own);
	pipeline_unref(ex->pl[0]);
	pipeline_unref(ex->pl[1]);
	if (ex->method != ex->method_buf)
		free(ex->method);
	free(ex->name);
	open_count--;
	if (pool_count < POOL_MAX) {
		ex->arg = pool;
		pool = ex;
		pool_count++;
		pool_poison(ex);
	} else {
		free(ex);
	}
}

/* Client identity for the context. */
static const char *principal_of(struct peer *a, struct peer *b)
{
	if (a && a->role == PEER_CLIENT)
		return a->principal;
	if (b && b->role == PEER_CLIENT)
		return b->principal;
	return NULL;
}

/* Backend name for the context. */
static const char *backend_of(struct peer *a, struct peer *b)
{
	if (a && a->role == PEER_BACKEND)
		return a->name;
	if (b && b->role == PEER_BACKEND)
		return b->name;
	return NULL;
}

/* Gives EX its id at TO, registers it there and starts its timeout. */
void chain_exchange_assign(struct exchange *ex, struct peer *to)
{
	ex->to = to;
	ex->to_id = to->next_id++;
	ex->ctx.backend = backend_of(ex->from, to);
	if (!ex->ctx.client)  /* a module (auth) may have set the principal */
		ex->ctx.client = principal_of(ex->from, to);
	if (hmap_put(&to->sent, &ex->to_id, sizeof ex->to_id, ex) == 0)
		ex->in_sent = true;
	if (to->timeout > 0 && ex->from) {
		ev_timer_set(&ex->timer, to->timeout, 0.);
		ev_timer_start(EV_DEFAULT, &ex->timer);
	}
}

/* Answers EX's requester with an error about its responder. */
void chain_exchange_fail(struct exchange *ex, const char *reason)
{
	if (ex->in_sent)
		hmap_del(&ex->to->sent, &ex->to_id, sizeof ex->to_id);
	ex->in_sent = false;
	deliver_response(ex, rpc_errorf(NULL, RPC_BACKEND_GONE, "%s: %s", ex->to->name, reason));
}

/* Parses the bytes EX's walk still carries (NULL if none or invalid). */
static json_t *parse_raw(struct exchange *ex)
{
	json_t *msg = NULL;
	if (ex->walk.raw)
		msg = json_loadb(ex->walk.raw, ex->walk.raw_len, JSON_ALLOW_NUL, NULL);
	ex->walk.raw = NULL;
	return msg;
}

/* Sends the request EX's walk carries as bytes to TO, with TO's id. */
static void forward_raw(struct exchange *ex, struct peer *to)
{
	struct mw_walk *w = &ex->walk;
	chain_exchange_assign(ex, to);
	struct jspan id = w->span[MW_SPAN_ID], token = w->span[MW_SPAN_TOKEN];
	if (token.p)
		ex->from_token = chain_span_value(token);
	char idtext[24];
	size_t idn = chain_int_text(ex->to_id, idtext);
	if (!token.p || !ex->from_token)
		token.p = NULL;
	int rc = w->raw ? chain_send_spliced(to, w->raw, w->raw_len, true, id, idtext, idn,
					     token, idtext, idn) : -1;
	w->raw = NULL;
	if (rc < 0)
		chain_exchange_fail(ex, "cannot send the request");
}

/* Gives EX its id on TO, rewrites id and progress token, and sends. */
static void forward_request(struct exchange *ex, struct peer *to, json_t *msg)
{
	if (!msg && to->ops->send_raw) {
		forward_raw(ex, to);
		return;
	}
	if (!msg && !(msg = parse_raw(ex))) {
		chain_exchange_assign(ex, to);
		chain_exchange_fail(ex, "cannot read the request");
		return;
	}
	chain_exchange_assign(ex, to);
	json_object_set_new(msg, "id", json_integer(ex->to_id));
	json_t *token = rpc_progress_token(msg);
	if (token) {
		ex->from_token = json_incref(token);
		json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
		json_object_set_new(meta, "progressToken", json_integer(ex->to_id));
	}
	if (to->ops->send(to, msg, NULL) < 0)
		chain_exchange_fail(ex, "cannot send the request");
	json_decref(msg);
}

/* Answers a request that found no usable responder. */
static void answer_unroutable(struct exchange *ex, struct peer *to, json_t *msg,
			      int code, const char *why)
{
	json_t *reply;
	if (why)
		reply = rpc_error(NULL, code, why, NULL);
	else if (strcmp(ex->method, "ping") == 0)
		reply = rpc_result(NULL, json_object());
	else if (!to)
		reply = rpc_errorf(NULL, RPC_BACKEND_GONE, "no %s to send \"%s\" to",
				   ex->from && ex->from->role == PEER_BACKEND ?
				   "client" : "backend", ex->method);
	else
		reply = rpc_errorf(NULL, RPC_BACKEND_GONE, "%s %s is not available%s%s%s",
				   to->role == PEER_BACKEND ? "backend" : "client", to->name,
				   to->why_down[0] ? " (" : "", to->why_down,
				   to->why_down[0] ? ")" : "");
	json_decref(msg);
	deliver_response(ex, reply);
}

/* The request walked the pipeline: route it, or answer it. */
static void request_walked(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct exchange *ex = container_of(w, struct exchange, walk);
	ex->walking = false;
	if (v != MW_PASS || ex->abandoned)
		w->raw = NULL;   /* the bytes are not forwarded */
	if (ex->abandoned) {
		json_decref(msg);
		chain_exchange_free(ex);
		return;
	}
	if (v == MW_DROP) {
		json_decref(msg);
		msg = rpc_errorf(NULL, RPC_INVALID_REQUEST,
				 "request \"%s\" refused by middleware", ex->method);
		v = MW_REPLY;
	}
	if (v == MW_REPLY) {
		deliver_response(ex, msg);
		return;
	}
	if (ex->routed) {
		forward_request(ex, ex->to, msg);
		return;
	}
	int code = 0;
	char why[300] = "";
	struct peer *to = ex->from->role == PEER_CLIENT ?
		router_route_request(ex->from, msg, ex->method, &code, why, sizeof why) :
		chain_route_client(ex->from);
	if (!to || !to->ready) {
		answer_unroutable(ex, to, msg, code, why[0] ? why : NULL);
		return;
	}
	ex->routed = true;
	ex->to = to;
	ex->ctx.backend = backend_of(ex->from, to);
	if (!ex->ctx.client)  /* a module (auth) may have set the principal */
		ex->ctx.client = principal_of(ex->from, to);
	if (to->role == PEER_BACKEND && pipeline_size(to->pl) > 0) {
		/* on to the backend's own modules, which see its own names */
		ex->pl[1] = pipeline_ref(to->pl);
		ex->walk.stage[1] = ex->pl[1];
		ex->walk.msg = msg;
		ex->walking = true;
		mw_walk_forward(&ex->walk);
		return;
	}
	forward_request(ex, to, msg);
}

/* The name a request is about, for middleware context (or NULL). */
static const char *subject_of(json_t *msg, const char *method)
{
	json_t *params = json_object_get(msg, "params");
	if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
		return json_string_value(json_object_get(params, "name"));
	if (strncmp(method, "resources/", 10) == 0)
		return json_string_value(json_object_get(params, "uri"));
	if (strcmp(method, "completion/complete") == 0) {
		json_t *ref = json_object_get(params, "ref");
		const char *n = json_string_value(json_object_get(ref, "name"));
		return n ? n : json_string_value(json_object_get(ref, "uri"));
	}
	return NULL;
}

/*
 * The exchange for a request from FROM with ID (borrowed) and METHOD, made
 * ready to walk: registered under KEY, its context filled in, its
 * pipelines referenced. The subject (ctx.name) and the message are the
 * caller's to set. NULL when out of memory.
 */
static struct exchange *request_begin(struct peer *from, json_t *id, const char *method,
				      const unsigned char *key, size_t klen)
{
	struct exchange *ex = chain_exchange_new(from, id, method);
	if (!ex)
		return NULL;
	if (klen && hmap_put(&from->received, key, klen, ex) == 0)
		ex->in_received = true;
	ex->batch = from->batch;
	ex->ctx.dir = from->role == PEER_CLIENT ? MW_TO_BACKEND : MW_TO_CLIENT;
	ex->ctx.client = principal_of(from, NULL);
	ex->ctx.backend = backend_of(from, NULL);
	if (from->role == PEER_BACKEND && pipeline_size(from->pl) > 0) {
		/* from a backend: its own modules first, then the global ones */
		ex->pl[1] = pipeline_ref(global_pl);
		ex->pl[0] = pipeline_ref(from->pl);
		ex->walk.stage[1] = ex->pl[1];
	} else {
		ex->pl[0] = pipeline_ref(global_pl);
	}
	ex->walk.stage[0] = ex->pl[0];
	ex->walk.done = request_walked;
	return ex;
}

/* Sets EX's subject (ctx.name) to the N bytes at NAME. */
static void set_subject(struct exchange *ex, const char *name, size_t n)
{
	ex->name = strndup(name, n);
	ex->ctx.name = ex->name;
}

/* A request from a peer. */
static void on_request(struct peer *from, json_t *msg, struct rpc_info *info)
{
	unsigned char key[RPC_KEY_MAX];
	size_t klen = rpc_id_key(info->id, key);
	if (klen && hmap_get(&from->received, key, klen)) {
		json_t *err = rpc_errorf(info->id, RPC_INVALID_REQUEST,
			"id already in use by a request still in progress");
		from->ops->send(from, err, NULL);
		json_decref(err);
		json_decref(msg);
		return;
	}
	struct exchange *ex = request_begin(from, info->id, info->method, key, klen);
	if (!ex) {
		json_decref(msg);
		return;
	}
	const char *subject = subject_of(msg, info->method);
	if (subject)
		set_subject(ex, subject, strlen(subject));
	ex->walk.msg = msg;
	ex->walking = true;
	mw_walk_forward(&ex->walk);
}

/* The subject of a scanned request, as subject_of() finds it; false to decline. */
static bool raw_subject(const struct jscan *js, const char *method, struct jspan *out)
{
	*out = (struct jspan){ NULL, 0 };
	if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
		*out = js->name;
	else if (strncmp(method, "resources/", 10) == 0)
		*out = js->uri;
	else if (strcmp(method, "completion/complete") == 0)
		return false;  /* its subject is deeper: the full path */
	return true;
}

/* A request that came in as bytes, walked unparsed. */
bool chain_raw_request(struct peer *from, const char *line, size_t len,
		       const struct jscan *js)
{
	char method[128];
	struct jspan subject;
	if (js->method.n >= sizeof method || js->subject_escaped ||
	    (js->token.p && from->role == PEER_BACKEND))
		return false;
	memcpy(method, js->method.p, js->method.n);
	method[js->method.n] = '\0';
	if (!raw_subject(js, method, &subject))
		return false;
	json_t *id = chain_span_value(js->id);
	unsigned char key[RPC_KEY_MAX];
	size_t klen = id ? rpc_id_key(id, key) : 0;
	struct exchange *ex = NULL;
	if (klen && !hmap_get(&from->received, key, klen))  /* else the full path answers */
		ex = request_begin(from, id, method, key, klen);
	json_decref(id);
	if (!ex)
		return false;
	if (subject.p)
		set_subject(ex, subject.p, subject.n);
	ex->walk.raw = line;
	ex->walk.raw_len = len;
	ex->walk.span[MW_SPAN_ID] = js->id;
	ex->walk.span[MW_SPAN_TOKEN] = js->token;
	ex->walk.span[MW_SPAN_META] = js->meta;
	ex->walking = true;
	mw_walk_forward(&ex->walk);
	return true;
}

/* The response walked back: hand it to the requester. */
static void response_walked(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct exchange *ex = container_of(w, struct exchange, walk);
	(void)v;
	ex->walking = false;
	if (!msg && w->raw && ex->from && !ex->abandoned && !ex->on_response &&
	    ex->from->ops->send_raw) {
		/* unread by every module: the bytes, with the requester's id */
		char buf[32], *heap;
		size_t n = chain_from_id_text(ex, buf, sizeof buf, &heap);
		struct jspan none = { NULL, 0 };
		chain_send_spliced(ex->from, w->raw, w->raw_len, false, w->span[MW_SPAN_ID],
				   heap ? heap : buf, n, none, NULL, 0);
		free(heap);
		w->raw = NULL;
		chain_exchange_free(ex);
		return;
	}
	if (!msg && !ex->on_response && (!ex->from || ex->abandoned)) {
		w->raw = NULL;   /* nobody to deliver it to */
		chain_exchange_free(ex);
		return;
	}
	if (!msg && !(msg = parse_raw(ex)))
		msg = rpc_errorf(NULL, RPC_INTERNAL_ERROR, "mcp-chain could not read the response");
	w->raw = NULL;
	if (ex->on_response) {
		ex->on_response(ex, msg, ex->arg);
	} else if (ex->from && !ex->abandoned) {
		json_object_set(msg, "id", chain_exchange_id(ex));
		ex->from->ops->send(ex->from, msg, ex);
	}
	json_decref(msg);
	chain_exchange_free(ex);
}

/* How the response MSG ended. */
static enum mw_outcome outcome_of(json_t *msg)
{
	if (json_object_get(msg, "error"))
		return MW_OUTCOME_ERROR;
	json_t *res = json_object_get(msg, "result");
	return json_is_true(json_object_get(res, "isError")) ? MW_OUTCOME_TOOL_ERROR :
		MW_OUTCOME_OK;
}

/*
 * Sends MSG (stolen) back through the pipeline to EX's requester; NULL
 * when the response travels as the bytes in ex->walk.raw (the caller set
 * them and ctx.outcome).
 */
static void deliver_response(struct exchange *ex, json_t *msg)
{
	if (msg) {
		ex->walk.raw = NULL;
		ex->ctx.outcome = outcome_of(msg);
	}
	ex->ctx.kind = RPC_RESPONSE;
	ex->responded = true;
	ex->walk.msg = msg;
	ex->walk.done = response_walked;
	ex->walking = true;
	mw_walk_back(&ex->walk);
}

/* A response from TO to a request sent to it. */
static void on_response(struct peer *to, json_t *msg, struct rpc_info *info)
{
	struct exchange *ex = NULL;
	if (json_is_integer(info->id)) {
		json_int_t id = json_integer_value(info->id);
		ex = hmap_del(&to->sent, &id, sizeof id);
	}
	if (!ex) {
		log_debug("%s: response to an unknown or cancelled request dropped",
			  to->name);
		json_decref(msg);
		return;
	}
	ex->in_sent = false;
	ex->ctx.response_bytes = to->rx_bytes;
	deliver_response(ex, msg);
}

/* A scanned response from FROM to EX's request, walked back unparsed. */
bool chain_raw_response(struct peer *from, struct exchange *ex, const char *line,
			size_t len, const struct jscan *js)
{
	if (!ex->from || ex->on_response || ex->batch || ex->walking || !ex->from->ready ||
	    !ex->from->ops->send_raw || js->has_error)
		return false;
	hmap_del(&from->sent, &ex->to_id, sizeof ex->to_id);
	ex->in_sent = false;
	ex->ctx.response_bytes = from->rx_bytes;
	ex->ctx.outcome = js->is_error ? MW_OUTCOME_TOOL_ERROR : MW_OUTCOME_OK;
	ex->walk.raw = line;
	ex->walk.raw_len = len;
	memset(ex->walk.span, 0, sizeof ex->walk.span);
	ex->walk.span[MW_SPAN_ID] = js->id;
	ex->walk.span[MW_SPAN_RESULT] = js->result;
	deliver_response(ex, NULL);
	return true;
}

/*
 * Ends EX, whose requester cancelled it or went away: now, unless a module
 * holds its walk and cannot let go, in which case the walk ends it when it
 * resumes, without going on.
 */
static void end_abandoned(struct exchange *ex)
{
	if (ex->walking && !mw_walk_cancel(&ex->walk)) {
		ex->abandoned = true;
		return;
	}
	ex->walking = false;
	chain_exchange_free(ex);
}

/* A cancellation from the requester: forward it with the responder's id. */
static void on_cancelled(struct peer *from, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	unsigned char key[RPC_KEY_MAX];
	size_t klen = rpc_id_key(json_object_get(params, "requestId"), key);
	struct exchange *ex = klen ? hmap_get(&from->received, key, klen) : NULL;
	if (!ex) {
		log_debug("%s: cancellation of an unknown or finished request ignored",
			  from->name);
		json_decref(msg);
		return;
	}
	if (ex->in_sent) {
		json_object_set_new(params, "requestId", json_integer(ex->to_id));
		send_notification(from, ex->to, msg, "notifications/cancelled");
	} else {
		json_decref(msg);
	}
	if (from->ops->unanswered)
		from->ops->unanswered(from, ex);
	end_abandoned(ex);
}

/* Progress from the responder: give it back the requester's token. */
static void on_progress(struct peer *from, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	json_t *token = json_object_get(params, "progressToken");
	struct exchange *ex = NULL;
	if (json_is_integer(token)) {
		json_int_t id = json_integer_value(token);
		ex = hmap_get(&from->sent, &id, sizeof id);
	}
	if (!ex || !ex->from_token || !ex->from) {
		log_debug("%s: progress for an unknown token dropped", from->name);
		json_decref(msg);
		return;
	}
	json_object_set(params, "progressToken", ex->from_token);
	send_notification(from, ex->from, msg, "notifications/progress");
}

/* Delivers a walked notification to its destination(s). */
static void note_walked(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct note *n = container_of(w, struct note, walk);
	if (v == MW_PASS && msg) {
		if (n->to) {
			n->to->ops->send(n->to, msg, NULL);
		} else {
			for (struct peer *p = peers; p; p = p->next)
				if (p->role == PEER_CLIENT && p->ready)
					p->ops->send(p, msg, NULL);
		}
	}
	json_decref(msg);
	json_decref(n->ctx.scratch);
	pipeline_unref(n->walk.stage[0]);
	pipeline_unref(n->walk.stage[1]);
	free(n);
}

/* Runs a notification through the pipeline to TO (NULL: all clients). */
static void send_notification(struct peer *from, struct peer *to, json_t *msg,
			      const char *method)
{
	struct note *n = calloc(1, sizeof *n);
	if (!n) {
		json_decref(msg);
		return;
	}
	n->from = from;
	n->to = to;
	n->ctx.dir = from->role == PEER_CLIENT ? MW_TO_BACKEND : MW_TO_CLIENT;
	n->ctx.kind = RPC_NOTIFICATION;
	n->ctx.method = method;
	n->ctx.client = principal_of(from, to);
	n->ctx.backend = backend_of(from, to);
	n->ctx.start = ev_now(EV_DEFAULT);
	struct peer *be = from->role == PEER_BACKEND ? from : to;
	struct pipeline *own = be && be->role == PEER_BACKEND && pipeline_size(be->pl) ? be->pl : NULL;
	n->walk.stage[0] = pipeline_ref(from == be ? (own ? own : global_pl) : global_pl);
	n->walk.stage[1] = pipeline_ref(own ? (from == be ? global_pl : own) : NULL);
	n->walk.ctx = &n->ctx;
	n->walk.msg = msg;
	n->walk.done = note_walked;
	mw_walk_forward(&n->walk);
}

/* A notification from a peer. */
static void on_notification(struct peer *from, json_t *msg, struct rpc_info *info)
{
	if (strcmp(info->method, "notifications/cancelled") == 0) {
		on_cancelled(from, msg);
		return;
	}
	if (strcmp(info->method, "notifications/progress") == 0) {
		on_progress(from, msg);
		return;
	}
	struct peer *to = NULL;
	if (from->role == PEER_CLIENT && router_client_notification(from, msg, info->method))
		return;
	if (from->role == PEER_BACKEND && router_backend_notification(from, msg, info->method))
		return;
	if (from->role == PEER_CLIENT) {
		int code;
		char why[300];
		to = router_route_request(from, msg, info->method, &code, why, sizeof why);
		if (!to || !to->ready) {
			log_debug("%s: %s dropped: no backend ready", from->name, info->method);
			json_decref(msg);
			return;
		}
	}
	send_notification(from, to, msg, info->method);
}

/* Logs a message's passage at debug level. */
static void trace(struct peer *from, const struct rpc_info *info)
{
	char id[64] = "";
	if (json_is_integer(info->id))
		snprintf(id, sizeof id, " id %" JSON_INTEGER_FORMAT, json_integer_value(info->id));
	else if (json_is_string(info->id))
		snprintf(id, sizeof id, " id \"%.40s\"", json_string_value(info->id));
	log_debug("%s -> chain: %s%s", from->name,
		  info->kind == RPC_RESPONSE ? "response" : info->method, id);
}

/* Entry point for every message a peer sends once it carries traffic. */
void chain_receive(struct peer *from, json_t *msg)
{
	struct rpc_info info;
	enum rpc_kind kind = rpc_classify(msg, &info);
	if (log_enabled(LOG_DEBUG) && kind != RPC_INVALID)
		trace(from, &info);
	switch (kind) {
	case RPC_REQUEST:
		on_request(from, msg, &info);
		return;
	case RPC_NOTIFICATION:
		on_notification(from, msg, &info);
		return;
	case RPC_RESPONSE:
		on_response(from, msg, &info);
		return;
	case RPC_INVALID:
		break;
	}
	log_warn("%s: invalid message dropped: %s", from->name, info.reason);
	if (info.id && from->role == PEER_BACKEND && !json_object_get(msg, "method")) {
		/* a malformed answer to one of our requests still ends it */
		struct rpc_info fake = { .kind = RPC_RESPONSE, .id = info.id };
		json_t *err = rpc_errorf(NULL, RPC_INTERNAL_ERROR,
			"backend %s sent an invalid response: %s", from->name, info.reason);
		json_t *id = json_incref(info.id);
		json_decref(msg);
		fake.id = id;
		on_response(from, err, &fake);
		json_decref(id);
		return;
	}
	json_decref(msg);
}

/* Ignores the response to a request nobody waits for. */
static void ignore_response(struct exchange *ex, json_t *msg, void *arg)
{
	(void)ex;
	(void)msg;
	(void)arg;
}

/* Sends a request of our own, through TO's pipeline PL if any. */
/* The exchange for a request of our own to TO, not sent yet (NULL: no memory). */
static struct exchange *call_new(struct peer *to, const char *method,
				 void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	struct exchange *ex = chain_exchange_new(NULL, NULL, method);
	if (!ex)
		return NULL;
	ex->on_response = cb ? cb : ignore_response;
	ex->arg = arg;
	ex->ctx.dir = to->role == PEER_BACKEND ? MW_TO_BACKEND : MW_TO_CLIENT;
	ex->ctx.backend = backend_of(NULL, to);
	ex->ctx.client = principal_of(NULL, to);
	return ex;
}

/* Sends EX's request (METHOD, PARAMS stolen) to TO, through PL if any. */
static void call_send(struct exchange *ex, struct peer *to, const char *method, json_t *params,
		      struct pipeline *pl)
{
	json_t *msg = rpc_request(0, method, params);
	if (pipeline_size(pl) == 0) {
		forward_request(ex, to, msg);
		return;
	}
	ex->routed = true;
	ex->to = to;
	ex->pl[0] = pipeline_ref(pl);
	ex->walk.stage[0] = ex->pl[0];
	ex->walk.msg = msg;
	ex->walk.done = request_walked;
	ex->walking = true;
	mw_walk_forward(&ex->walk);
}

/* Sends a request of our own, through TO's pipeline PL if any. */
int chain_call_via(struct peer *to, const char *method, json_t *params,
		   struct pipeline *pl,
		   void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	struct exchange *ex = call_new(to, method, cb, arg);
	if (!ex) {
		json_decref(params);
		return -1;
	}
	call_send(ex, to, method, params, pl);
	return 0;
}

/* Sends a request of our own. */
int chain_call(struct peer *to, const char *method, json_t *params,
	       void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	return chain_call_via(to, method, params, NULL, cb, arg);
}

/* Runs a notification of a component's own through the pipeline. */
void chain_notify(struct peer *from, struct peer *to, json_t *msg)
{
	send_notification(from, to, msg, json_string_value(json_object_get(msg, "method")));
}

/* A module's own request to a client, open until answered (or failed). */
struct ask {
	void (*cb)(json_t *response, void *arg);
	void *arg;
	struct exchange *ex;      /* the request's exchange */
	struct ask *next;         /* in the list of open questions */
};

static struct ask *asks;

/* Hands the response of a module's request to the module. */
static void on_ask_response(struct exchange *ex, json_t *msg, void *arg)
{
	struct ask *a = arg;
	(void)ex;
	for (struct ask **pp = &asks; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	a->cb(msg, a->arg);
	free(a);
}

/* Withdraws the open question asked for ARG (see middleware.h). */
int mw_ask_withdraw(void *arg, const char *reason)
{
	for (struct ask *a = asks; a; a = a->next)
		if (a->arg == arg)
			return abort_exchange(a->ex, RPC_INTERNAL_ERROR, reason);
	return -1;
}

/* Sends a module's request to the exchange's client. */
int mw_ask_client(struct mw_ctx *ctx, const char *method, json_t *params,
		  void (*cb)(json_t *response, void *arg), void *arg)
{
	struct exchange *ex = ctx->chain;
	struct peer *client = NULL;
	if (ex && ex->from && ex->from->role == PEER_CLIENT)
		client = ex->from;
	else if (ex && ex->to && ex->to->role == PEER_CLIENT)
		client = ex->to;
	struct ask *a = calloc(1, sizeof *a);
	if (!client || !client->ready || !a) {
		free(a);
		json_decref(params);
		json_t *err = rpc_errorf(NULL, RPC_BACKEND_GONE, "no client to ask");
		cb(err, arg);
		json_decref(err);
		return -1;
	}
	a->cb = cb;
	a->arg = arg;
	a->ex = call_new(client, method, on_ask_response, a);
	if (!a->ex) {
		free(a);
		json_decref(params);
		json_t *err = rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory");
		cb(err, arg);  /* exactly once, as promised */
		json_decref(err);
		return -1;
	}
	a->next = asks;
	asks = a;
	call_send(a->ex, client, method, params, NULL);  /* may answer (fail) at once */
	return 0;
}

/* Ends an open request with an error and cancels it downstream. */
int mw_abort(struct mw_ctx *ctx, int code, const char *message)
{
	return abort_exchange(ctx->chain, code, message);
}

/* Answers EX with an error now and cancels it at its responder. */
static int abort_exchange(struct exchange *ex, int code, const char *message)
{
	if (!ex || ex->walking || !ex->in_sent)
		return -1;
	ev_timer_stop(EV_DEFAULT, &ex->timer);
	json_t *c = rpc_notification("notifications/cancelled",
		json_pack("{s:I,s:s}", "requestId", (json_int_t)ex->to_id, "reason", message));
	ex->to->ops->send(ex->to, c, NULL);
	json_decref(c);
	hmap_del(&ex->to->sent, &ex->to_id, sizeof ex->to_id);
	ex->in_sent = false;
	deliver_response(ex, rpc_error(NULL, code, message, NULL));
	return 0;
}

/* Cancels the requests P made, then fails the requests sent to P. */
void chain_peer_gone(struct peer *p, const char *reason)
{
	size_t n;
	void **v = hmap_drain(&p->received, &n);
	for (size_t i = 0; v && i < n; i++) {
		struct exchange *ex = v[i];
		ex->in_received = false;
		if (ex->in_sent) {
			json_t *c = rpc_notification("notifications/cancelled",
				json_pack("{s:I,s:s}", "requestId", (json_int_t)ex->to_id,
					  "reason", reason));
			ex->to->ops->send(ex->to, c, NULL);
			json_decref(c);
		}
		end_abandoned(ex);
	}
	free(v);
	v = hmap_drain(&p->sent, &n);
	for (size_t i = 0; v && i < n; i++) {
		struct exchange *ex = v[i];
		ex->in_sent = false;
		deliver_response(ex, rpc_errorf(NULL, RPC_BACKEND_GONE, "%s: %s",
						 p->name, reason));
	}
	free(v);
	p->ready = false;
	chain_congestion(p, false);
}

/* Frees chain-wide state. */
void chain_release(void)
{
	while (pool) {
		struct exchange *ex = pool;
		pool = ex->arg;
		pool_unpoison(ex);
		free(ex);
	}
	pool_count = 0;
	pipeline_unref(global_pl);
	global_pl = NULL;
}
