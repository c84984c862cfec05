/*
 * session.c - FrontMCPServer: lifecycle, version negotiation, batches.
 */
#include "session.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chain.h"
#include "era.h"
#include "log.h"
#include "observe.h"
#include "rpc.h"
#include "wiretap.h"
#include "stateless.h"

const char *const *const session_versions = era_handshake_versions;

#define BATCH_VERSION "2025-03-26"

/* A JSON-RPC batch being answered; complete when every request is. */
struct batch {
	json_t *replies;        /* array of responses gathered so far */
	size_t expected;        /* requests in the batch */
	bool sealed;            /* all elements were handed on */
	struct batch *next;
};

struct session {
	struct peer peer;
	enum session_state state;
	char *name;
	char *version;          /* negotiated */
	char *principal;        /* clientInfo.name */
	char trace_tag[65];     /* mcp.session.id of its spans, "" when none */
	json_t *init_id;        /* the initialize request being answered */
	json_t *queue;          /* messages that arrived while initializing */
	struct batch *batches;
	session_write_fn write;
	void (*pause)(void *arg, bool paused);
	session_unanswered_fn unanswered;
	void *route;            /* the front's route of the input in hand */
	struct own_call *calls; /* the front's own calls (session_call) */
	uint64_t next_call;
	void *arg;
	enum era era;           /* what the client began with */
	double round_ttl;       /* seconds a call waits for a stateless client's retry */
	struct stateless *st;   /* ERA_STATELESS: the era's own state */
	json_t *init_result;    /* the backend's initialize result (for server/discover) */
	bool offer_stateless;   /* 2026-07-28 whatever the backends speak ("eras": "both") */
	bool resumed;           /* continued from elsewhere (session_resume): its
				 * client said initialized there */
};

/* A call of the front's own, waiting for its response. */
struct own_call {
	struct msg_val id;      /* "mcpc-front-N", as JSON text */
	void (*cb)(void *arg, json_t *response);
	void *arg;
	struct own_call *next;
};

#define OWN_CALL_PREFIX "\"mcpc-front-"

static void handle(struct session *s, struct msg *m);
static int write_out(struct session *s, struct session_out *o, const struct msg_val *about,
		     struct exchange *ex);

/* True when V is a version of the handshake era we speak. */
bool session_version_supported(const char *v)
{
	return era_handshake_supported(v);
}

/* Sends and frees B once sealed and every request in it is answered. */
static void batch_finish_if_done(struct session *s, struct batch *b)
{
	if (!b->sealed || json_array_size(b->replies) < b->expected)
		return;
	if (b->expected > 0) {
		wiretap_json(&s->peer, WIRETAP_OUT, b->replies);
		struct session_out o = { .kind = SESSION_OUT_BATCH, .tree = b->replies };
		write_out(s, &o, NULL, NULL);
	}
	for (struct batch **pp = &s->batches; *pp; pp = &(*pp)->next) {
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	}
	json_decref(b->replies);
	free(b);
}

/* Adds a response to its batch. */
static void batch_add(struct session *s, struct batch *b, json_t *msg)
{
	json_array_append(b->replies, msg);
	batch_finish_if_done(s, b);
}

/* The session_out kind of a peer_out kind. */
static enum session_out_kind out_kind(enum peer_out_kind k)
{
	switch (k) {
	case PEER_OUT_REQUEST: return SESSION_OUT_REQUEST;
	case PEER_OUT_RESPONSE: return SESSION_OUT_RESPONSE;
	case PEER_OUT_PROGRESS: return SESSION_OUT_PROGRESS;
	default: return SESSION_OUT_NOTIFICATION;
	}
}

/* The own call whose id ABOUT is, unlinked, or NULL. */
static struct own_call *own_call_take(struct session *s, const struct msg_val *about)
{
	if (!s->calls || !about || about->n <= strlen(OWN_CALL_PREFIX) ||
	    strncmp(msg_val_text(about), OWN_CALL_PREFIX, strlen(OWN_CALL_PREFIX)) != 0)
		return NULL;
	for (struct own_call **pp = &s->calls; *pp; pp = &(*pp)->next) {
		struct own_call *c = *pp;
		if (c->id.n == about->n && memcmp(msg_val_text(&c->id), msg_val_text(about), about->n) == 0) {
			*pp = c->next;
			return c;
		}
	}
	return NULL;
}

/*
 * Tells the observers that the client's request (EX, when the chain made
 * it) ended with the JSON-RPC error O carries. Only on the error path: a
 * message still as bytes is read here, and only then.
 */
static void note_error(struct session *s, const struct session_out *o, struct exchange *ex)
{
	json_t *t = o->tree, *own = NULL;
	if (!t && o->iov) {
		struct buf line = BUF_INIT;
		for (int i = 0; i < o->n && buf_pending(&line) < 65536; i++)
			buf_append(&line, o->iov[i].iov_base, o->iov[i].iov_len);
		if (buf_pending(&line) < 65536)
			t = own = json_loadb(line.data ? line.data : "", buf_pending(&line), 0, NULL);
		buf_release(&line);
	}
	json_t *err = json_object_get(t, "error");
	struct obs_event e = {
		.kind = OBS_ERROR, .what = "error", .source = s->name,
		.method = ex ? chain_request_method(ex) : NULL, .client = s->principal,
		.detail = json_string_value(json_object_get(err, "message")),
		.code = o->error_code ? o->error_code :
			(int)json_integer_value(json_object_get(err, "code")),
		.ex = ex,
	};
	observe_note(&e);
	json_decref(own);
}

/*
 * Hands O to the front, ABOUT (borrowed) being the client's request it is
 * about when the caller knows it; else it is read off the tree (the
 * session's own answers, which are trees). The answer to one of the
 * front's own calls goes to its callback instead. EX: the client's
 * request the chain answers with O, or NULL.
 */
static int write_out(struct session *s, struct session_out *o, const struct msg_val *about,
		     struct exchange *ex)
{
	struct msg_val idv = { .n = 0 };
	json_t *t = o->tree;
	if (!about && t && (o->kind == SESSION_OUT_RESPONSE || o->kind == SESSION_OUT_BATCH)) {
		json_t *id = json_object_get(o->kind == SESSION_OUT_BATCH ? json_array_get(t, 0) : t, "id");
		for (size_t i = 1; o->kind == SESSION_OUT_BATCH && json_is_null(id ? id : json_null()) &&
		     i < json_array_size(t); i++)
			id = json_object_get(json_array_get(t, i), "id");
		char *text = id && !json_is_null(id) ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		if (text && msg_val_set(&idv, text, strlen(text)) == 0)
			about = &idv;
		free(text);
	}
	if (t && o->kind == SESSION_OUT_RESPONSE) {
		json_t *err = json_object_get(t, "error");
		o->error_code = (int)json_integer_value(json_object_get(err, "code"));
		o->outcome = err ? 1 : json_is_true(json_object_get(json_object_get(t, "result"),
								    "isError")) ? 2 : 0;
	}
	o->about = about;
	if (o->kind == SESSION_OUT_RESPONSE)
		o->route = s->route;   /* the input in hand, answered when no request routes it */
	struct own_call *c = o->kind == SESSION_OUT_RESPONSE ? own_call_take(s, about) : NULL;
	int rc = 0;
	if (c) {
		json_t *resp = t;
		if (!resp) {   /* the bytes of a call of the front's own: read here */
			struct buf line = { 0 };
			for (int i = 0; i < o->n; i++)
				buf_append(&line, o->iov[i].iov_base, o->iov[i].iov_len);
			resp = json_loadb(line.data ? line.data : "", buf_pending(&line), 0, NULL);
			buf_release(&line);
		} else {
			json_incref(resp);
		}
		if (resp)
			if (c->cb)
				c->cb(c->arg, resp);
		json_decref(resp);
		msg_val_release(&c->id);
		free(c);
	} else {
		if (o->kind == SESSION_OUT_RESPONSE && o->outcome == 1)
			note_error(s, o, ex);
		rc = s->write(s->arg, o);
	}
	msg_val_release(&idv);
	return rc;
}

/* Writes a message to the client, or into the batch it answers. The one
 * place every tree bound for the client passes: mcp-chain's own _meta keys
 * (era.h) come off here, whichever era and whichever kind of message. PO
 * (NULL for the session's own) says what the chain said it is. */
static int send_msg(struct session *s, json_t *msg, struct batch *b, const struct peer_out *po)
{
	if (s->state == SESSION_CLOSING)
		return -1;
	json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
	if (json_object_get(meta, ERA_META_INPUT_KEY) || json_object_get(meta, ERA_META_RELATED)) {
		json_t *copy = json_deep_copy(msg);
		if (!copy)
			return -1;
		era_strip_own_meta(copy);
		int rc = send_msg(s, copy, b, po);
		json_decref(copy);
		return rc;
	}
	if (b) {
		batch_add(s, b, msg);
		return 0;
	}
	wiretap_json(&s->peer, WIRETAP_OUT, msg);
	struct session_out o = { .tree = msg };
	if (po) {
		o.kind = out_kind(po->kind);
		o.outcome = po->outcome;
	} else {
		o.kind = !json_object_get(msg, "method") ? SESSION_OUT_RESPONSE :
			json_object_get(msg, "id") ? SESSION_OUT_REQUEST :
			SESSION_OUT_NOTIFICATION;
	}
	return write_out(s, &o, po ? po->about_id : NULL, po ? po->about : NULL);
}

/* The stateless era's own writes (already shaped for the client); PO: what
 * the chain said of a message it passes on as it came, or NULL. */
static int stateless_write(void *arg, json_t *msg, const struct peer_out *po)
{
	return send_msg(arg, msg, NULL, po && po->kind != PEER_OUT_RESPONSE ? po : NULL);
}

/* The peer's send operation: the chain delivering to the client. */
static int peer_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct session *s = (struct session *)p;
	struct exchange *ex = o->kind == PEER_OUT_RESPONSE ? o->about : NULL;
	struct batch *b = ex ? chain_request_batch(ex) : NULL;
	if (!ex && o->kind == PEER_OUT_RESPONSE)
		b = s->peer.batch;  /* an answer made while the batch is read */
	if (s->st && s->state != SESSION_CLOSING)
		return stateless_send(s->st, msg, o);
	return send_msg(s, msg, b, o);
}

/* The peer's pause operation: flow control on the client's input. */
static void peer_pause(struct peer *p, bool paused)
{
	struct session *s = (struct session *)p;
	if (s->pause)
		s->pause(s->arg, paused);
}

/* Delivery to the client of a message still as its bytes. */
static int peer_send_raw(struct peer *p, const struct iovec *iov, int n,
			 const struct peer_out *po)
{
	struct session *s = (struct session *)p;
	if (s->state == SESSION_CLOSING || s->st)
		return -1;   /* a stateless-era client's messages are reshaped: trees */
	wiretap_iov(&s->peer, WIRETAP_OUT, iov, n);
	struct session_out o = { .kind = out_kind(po->kind), .outcome = po->outcome,
				 .iov = iov, .n = n };
	return write_out(s, &o, po->about_id, po->about);
}

/* A request was cancelled: the front, and its batch, no longer wait for it. */
static void peer_unanswered(struct peer *p, struct exchange *ex)
{
	struct session *s = (struct session *)p;
	struct batch *b = chain_request_batch(ex);
	const struct msg_val *id = chain_request_id(ex);
	if (s->unanswered && id->n)
		s->unanswered(s->arg, id);
	if (!b || b->expected == 0)
		return;
	b->expected--;
	batch_finish_if_done(s, b);
}

static const struct peer_ops session_ops = {
	.send = peer_send, .pause = peer_pause, .send_raw = peer_send_raw,
	.unanswered = peer_unanswered,
};

/* Sets the function told of requests that end unanswered. */
void session_set_unanswered(struct session *s, session_unanswered_fn fn)
{
	s->unanswered = fn;
}

static void handle_batch(struct session *s, json_t *arr);

/* A line from the client: one message or a batch, whatever reads it later. */
bool session_receive_line(struct session *s, const char *line, size_t len)
{
	struct msg m;
	json_t *err = NULL;
	if (s->state == SESSION_CLOSING)
		return true;
	if (msg_init_line(&m, line, len, &err) < 0) {
		s->peer.rx_bytes = len;
		wiretap_line(&s->peer, WIRETAP_IN, line, len);
		session_reject(s, err);
		return true;
	}
	session_receive_msg(s, &m, NULL);
	return true;
}

/* A message the front scanned: one message or a batch. */
void session_receive_msg(struct session *s, struct msg *m, void *route)
{
	if (s->state == SESSION_CLOSING) {
		msg_release(m);
		return;
	}
	void *outer = s->route;   /* an answer to the input in hand may end another */
	s->route = route;
	s->peer.rx_bytes = m->raw_len;
	if (m->raw)
		wiretap_line(&s->peer, WIRETAP_IN, m->raw, m->raw_len);
	else
		wiretap_json(&s->peer, WIRETAP_IN, m->tree);
	if (json_is_array(m->tree)) {
		json_t *arr = json_incref(m->tree);
		msg_release(m);
		handle_batch(s, arr);
	} else {
		handle(s, m);
	}
	s->route = outer;
}

/* The client's transport gave up request ID: its cancellation, as the
 * client would send it (the modules see it like any other). */
void session_cancel(struct session *s, const struct msg_val *id, const char *reason)
{
	json_t *rid = msg_val_json(id);
	if (!rid || s->state == SESSION_CLOSING) {
		json_decref(rid);
		return;
	}
	struct msg m;
	msg_init_tree(&m, rpc_notification("notifications/cancelled",
		json_pack("{s:o,s:s}", "requestId", rid, "reason", reason)));
	handle(s, &m);
}

/* A call of the front's own: a request of the client's, whose answer
 * comes back to CB (write_out) instead of the front. */
/* A request of the front's own (see session_call), registered: its tree,
 * or NULL (PARAMS is stolen either way). */
static json_t *own_request(struct session *s, const char *method, json_t *params,
			   void (*cb)(void *arg, json_t *response), void *arg)
{
	struct own_call *c = calloc(1, sizeof *c);
	char id[48];
	int n = snprintf(id, sizeof id, OWN_CALL_PREFIX "%llu\"",
			 (unsigned long long)++s->next_call);
	json_t *req = c && s->state != SESSION_CLOSING ? json_object() : NULL;
	if (!req || msg_val_set(&c->id, id, (size_t)n) < 0) {
		json_decref(req);
		json_decref(params);
		free(c);
		return NULL;
	}
	json_object_set_new(req, "jsonrpc", json_string("2.0"));
	json_object_set_new(req, "id", json_stringn(id + 1, (size_t)n - 2));
	json_object_set_new(req, "method", json_string(method));
	if (params)
		json_object_set_new(req, "params", params);
	c->cb = cb;
	c->arg = arg;
	c->next = s->calls;
	s->calls = c;
	return req;
}

int session_call(struct session *s, const char *method, json_t *params,
		 void (*cb)(void *arg, json_t *response), void *arg)
{
	json_t *req = own_request(s, method, params, cb, arg);
	if (!req)
		return -1;
	struct msg m;
	msg_init_tree(&m, req);
	handle(s, &m);   /* may answer at once (from a cache) */
	return 0;
}

/* Sets how long a stateless client's call waits for its retry. */
void session_set_input_ttl(struct session *s, double seconds)
{
	if (seconds > 0)
		s->round_ttl = seconds;
}

/* Offers 2026-07-28 whatever the backends speak, or only when they do. */
void session_offer_stateless(struct session *s, bool always)
{
	s->offer_stateless = always;
}

/* The era the client began with. */
int session_era(const struct session *s)
{
	return (int)s->era;
}

/* The stateless instance, or 0. */
uint64_t session_instance(const struct session *s)
{
	return s->st ? stateless_instance(s->st) : 0;
}

/* Sets the transport's pause function. */
void session_set_pause(struct session *s, void (*pause)(void *arg, bool paused))
{
	s->pause = pause;
}

/* New session. */
struct session *session_new(struct chain *chain, const char *name, session_write_fn write,
			    void *arg)
{
	struct session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->name = strdup(name);
	s->round_ttl = 300.;
	s->write = write;
	s->arg = arg;
	peer_init(&s->peer, &session_ops, PEER_CLIENT, s->name);
	chain_add_peer(chain, &s->peer);
	return s;
}

/* Sends an error answering ID (borrowed; NULL for null). */
static void reply_error(struct session *s, json_t *id, int code, const char *text)
{
	json_t *e = rpc_error(id, code, text, NULL);
	send_msg(s, e, s->peer.batch, NULL);
	json_decref(e);
}

/* Picks the version to offer the backend for what the client asked. */
static const char *negotiate(const char *asked)
{
	return session_version_supported(asked) ? asked : session_versions[0];
}

/* Replays messages that arrived while the handshake was running. */
static void drain_queue(struct session *s)
{
	json_t *q = s->queue;
	size_t i;
	json_t *m;
	s->queue = NULL;
	json_array_foreach(q, i, m) {
		struct msg one;
		msg_init_tree(&one, json_incref(m));
		handle(s, &one);
	}
	json_decref(q);
}

/* Checks the backend's answer and completes the client's initialize. */
static void on_backend_init(void *arg, json_t *resp)
{
	struct session *s = arg;
	json_t *id = s->init_id;
	json_t *result = json_object_get(resp, "result");
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	s->init_id = NULL;
	if (s->state != SESSION_INITIALIZING) {
		json_decref(id);
		return;
	}
	if (!result) {
		json_t *e = json_deep_copy(resp);
		json_object_set(e, "id", id);
		send_msg(s, e, NULL, NULL);
		json_decref(e);
		s->state = SESSION_UNINITIALIZED;
	} else if (!session_version_supported(v)) {
		json_t *e = rpc_errorf(id, RPC_INTERNAL_ERROR,
			"the backend answered protocol version \"%s\", which mcp-chain does not speak",
			v ? v : "(none)");
		send_msg(s, e, NULL, NULL);
		json_decref(e);
		s->state = SESSION_UNINITIALIZED;
	} else {
		free(s->version);
		s->version = strdup(v);
		s->peer.version = s->version;
		json_decref(s->init_result);
		s->init_result = json_incref(result);
		s->era = ERA_HANDSHAKE;
		json_t *ok = rpc_result(id, json_incref(result));
		s->state = SESSION_READY;
		s->peer.ready = true;
		send_msg(s, ok, NULL, NULL);
		json_decref(ok);
		log_info("%s: initialized (%s, protocol %s)", s->name,
			 s->principal ? s->principal : "unnamed client", v);
	}
	json_decref(id);
	drain_queue(s);
}

/* What the backends are initialized with for a client's initialize PARAMS
 * (borrowed): its own, with a version we speak (new reference); its
 * clientInfo.name becomes the session's principal. */
static json_t *init_params(struct session *s, json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	json_t *fwd = json_deep_copy(params);
	json_object_set_new(fwd, "protocolVersion", json_string(negotiate(asked)));
	free(s->principal);
	s->principal = NULL;
	const char *cname = json_string_value(json_object_get(json_object_get(params, "clientInfo"), "name"));
	if (cname)
		s->principal = strdup(cname);
	s->peer.principal = s->principal;
	return fwd;
}

/* The backends are ready (or not) for a session continued from elsewhere:
 * nothing is written to the client, whose initialize was answered there. */
static void on_resume_init(void *arg, json_t *resp)
{
	struct session *s = arg;
	json_t *result = json_object_get(resp, "result");
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	if (s->state != SESSION_INITIALIZING)
		return;
	if (!result || !session_version_supported(v)) {
		/* what waits is answered with the backend's error, as a stateless
		 * client's calls are when the backends cannot start */
		json_t *err = json_object_get(resp, "error");
		json_t *q = s->queue;
		size_t i;
		json_t *m;
		s->queue = NULL;
		log_warn("%s: cannot continue the session here: %s", s->name,
			 result ? "the backend answered another protocol version" :
			 json_string_value(json_object_get(err, "message")) ?
			 json_string_value(json_object_get(err, "message")) : "the backend failed");
		s->state = SESSION_UNINITIALIZED;
		json_array_foreach(q, i, m) {
			json_t *id = json_object_get(m, "id");
			const char *own = json_string_value(id);
			if (!id || !json_object_get(m, "method") ||
			    (own && strncmp(own, &OWN_CALL_PREFIX[1], sizeof OWN_CALL_PREFIX - 2) == 0))
				continue;   /* no answer, or one of the session's own replays */
			json_t *e = err ? json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id, "error", err)
					: rpc_error(id, RPC_BACKEND_GONE,
						    "the session cannot be continued on this instance", NULL);
			send_msg(s, e, NULL, NULL);
			json_decref(e);
		}
		json_decref(q);
		return;
	}
	free(s->version);
	s->version = strdup(v);
	s->peer.version = s->version;
	json_decref(s->init_result);
	s->init_result = json_incref(result);
	s->era = ERA_HANDSHAKE;
	s->state = SESSION_READY;
	s->peer.ready = true;
	log_info("%s: continued (%s, protocol %s)", s->name,
		 s->principal ? s->principal : "unnamed client", v);
	/* what its client said after its initialize, the backends hear from us */
	chain_receive(&s->peer, rpc_notification("notifications/initialized", NULL));
	drain_queue(s);
}

void session_resume_hold(struct session *s)
{
	if (s->state == SESSION_UNINITIALIZED) {
		s->state = SESSION_INITIALIZING;
		s->resumed = true;
	}
}

int session_resume(struct session *s, json_t *params, json_t *replay, char *why, size_t n)
{
	if ((s->state != SESSION_UNINITIALIZED && !(s->resumed && s->state == SESSION_INITIALIZING)) ||
	    s->init_id) {
		snprintf(why, n, "the session has begun already");
		return -1;
	}
	if (!json_is_object(params) ||
	    !json_is_string(json_object_get(params, "protocolVersion"))) {
		snprintf(why, n, "no initialize parameters to continue with");
		return -1;
	}
	json_t *fwd = init_params(s, params);
	s->state = SESSION_INITIALIZING;
	s->resumed = true;
	/* what the session held is asked again before anything its client sent */
	json_t *q = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(replay, i, e) {
		const char *method = json_string_value(json_object_get(e, "method"));
		json_t *req = method ? own_request(s, method,
				json_deep_copy(json_object_get(e, "params")), NULL, NULL) : NULL;
		if (req)
			json_array_append_new(q, req);
	}
	if (s->queue)
		json_array_extend(q, s->queue);
	json_decref(s->queue);
	s->queue = json_array_size(q) ? q : NULL;
	if (!s->queue)
		json_decref(q);
	int rc = chain_initialize(&s->peer, fwd, on_resume_init, s, why, n);
	json_decref(fwd);
	if (rc < 0) {
		json_t *busy = json_pack("{s:{s:i,s:s}}", "error", "code", RPC_BACKEND_GONE,
					 "message", why);
		on_resume_init(s, busy);   /* what waits is answered */
		json_decref(busy);
	}
	return rc;
}

/* Validates initialize params; returns an error text or NULL. */
static const char *check_init_params(json_t *params)
{
	if (!json_is_object(params))
		return "initialize needs params {protocolVersion, capabilities, clientInfo}";
	if (!json_is_string(json_object_get(params, "protocolVersion")))
		return "initialize: \"protocolVersion\" must be a string";
	json_t *caps = json_object_get(params, "capabilities");
	if (caps && !json_is_object(caps))
		return "initialize: \"capabilities\" must be an object";
	json_t *info = json_object_get(params, "clientInfo");
	if (info && (!json_is_object(info) || !json_is_string(json_object_get(info, "name"))))
		return "initialize: \"clientInfo\" must be an object with a \"name\"";
	return NULL;
}

/* Handles initialize: the backend is initialized with the client's own params. */
static void on_initialize(struct session *s, json_t *msg, json_t *id)
{
	json_t *params = json_object_get(msg, "params");
	const char *bad = check_init_params(params);
	if (s->state != SESSION_UNINITIALIZED) {
		reply_error(s, id, RPC_INVALID_REQUEST, "already initialized: initialize may be sent only once per session");
		return;
	}
	if (s->peer.batch) {
		reply_error(s, id, RPC_INVALID_REQUEST, "initialize must not be part of a JSON-RPC batch");
		return;
	}
	if (bad) {
		reply_error(s, id, RPC_INVALID_PARAMS, bad);
		return;
	}
	json_t *fwd = init_params(s, params);
	s->init_id = json_incref(id);
	s->state = SESSION_INITIALIZING;
	char why[300];
	if (chain_initialize(&s->peer, fwd, on_backend_init, s, why, sizeof why) < 0) {
		s->init_id = NULL;
		s->state = SESSION_UNINITIALIZED;
		reply_error(s, id, RPC_BACKEND_GONE, why);
		json_decref(id);
	}
	json_decref(fwd);
}

/* Sends the result or error REPLY (stolen) to the request in M. */
static void reply_to(struct session *s, struct msg *m, json_t *reply)
{
	struct msg_val id = { .n = 0 };
	if (msg_id_get(m, &id) == 0)
		json_object_set_new(reply, "id", msg_val_json(&id));
	msg_val_release(&id);
	send_msg(s, reply, s->peer.batch, NULL);
	json_decref(reply);
}

/* The server/discover result, from what the backend said at initialize. */
static json_t *discover_result(struct session *s)
{
	json_t *ir = s->init_result;
	json_t *caps = json_object_get(ir, "capabilities");
	json_t *r = json_pack("{s:o,s:o,s:s}", "supportedVersions", era_all_versions(),
			      "capabilities", json_is_object(caps) ? json_deep_copy(caps) : json_object(),
			      "resultType", "complete");
	stateless_stamp(r, "server/discover");
	json_t *instructions = json_object_get(ir, "instructions");
	if (json_is_string(instructions))
		json_object_set(r, "instructions", instructions);
	json_t *info = json_object_get(ir, "serverInfo");
	if (json_is_object(info))
		json_object_set_new(r, "_meta", json_pack("{s:O}", ERA_META_SERVER_INFO, info));
	return r;
}

/*
 * The backends speak the handshake era only and the client is offered what
 * they speak: its stateless start is answered as they would answer it --
 * server/discover is a method they do not have, any other request comes
 * before initialize -- and the session waits for the client's initialize.
 * The backends were initialized with the capabilities and clientInfo the
 * client's probe declared (the ones its initialize declares); its
 * initialize is answered from their result, and its initialized reaches
 * them before they may ask it anything.
 */
static void refuse_stateless(struct session *s)
{
	json_t *q = s->queue;
	size_t i;
	json_t *m;
	s->queue = NULL;
	s->state = SESSION_UNINITIALIZED;
	s->peer.ready = false;
	stateless_free(s->st);
	s->st = NULL;
	s->era = ERA_UNKNOWN;
	log_info("%s: the backends speak the handshake era: %s is offered that era, as they "
		 "would offer it (\"eras\": \"both\" offers 2026-07-28 whatever is behind)",
		 s->name, s->principal ? s->principal : "the client");
	json_array_foreach(q, i, m) {
		json_t *id = json_object_get(m, "id");
		const char *method = json_string_value(json_object_get(m, "method"));
		if (!id || !method)
			continue;
		json_t *e = strcmp(method, "server/discover") == 0
			? rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found: server/discover "
				    "(the servers behind speak the handshake era: send initialize)", NULL)
			: rpc_error(id, RPC_NOT_INITIALIZED,
				    "Server not initialized: send initialize first", NULL);
		send_msg(s, e, NULL, NULL);
		json_decref(e);
	}
	json_decref(q);
}

/* True when the client may stay in the stateless era: the peer that
 * answers it speaks 2026-07-28, or every client is offered it. */
static bool stateless_offered(struct session *s)
{
	if (s->offer_stateless)
		return true;
	struct peer *t = chain_init_target(&s->peer);
	return t && (t->eras & ERA_BIT_STATELESS);
}

/* The backends are ready (or not) for a client of the stateless era. */
static void on_stateless_ready(void *arg, json_t *resp)
{
	struct session *s = arg;
	json_t *result = json_object_get(resp, "result");
	if (s->state != SESSION_INITIALIZING)
		return;
	if (result && !stateless_offered(s)) {
		refuse_stateless(s);
		return;
	}
	if (result) {
		json_decref(s->init_result);
		s->init_result = json_incref(result);
		s->state = SESSION_READY;
		s->peer.ready = true;
		free(s->version);
		s->version = strdup(ERA_STATELESS_VERSION);
		s->peer.version = s->version;
		log_info("%s: serving %s (protocol %s, stateless)", s->name,
			 s->principal ? s->principal : "unnamed client", ERA_STATELESS_VERSION);
		/* what a handshake-era client says next, the backends hear from us */
		chain_receive(&s->peer, rpc_notification("notifications/initialized", NULL));
		drain_queue(s);
		return;
	}
	/* every request that waited is answered with the backend's error */
	json_t *err = json_object_get(resp, "error");
	json_t *q = s->queue;
	size_t i;
	json_t *m;
	s->queue = NULL;
	s->state = SESSION_UNINITIALIZED;
	stateless_free(s->st);
	s->st = NULL;
	s->era = ERA_UNKNOWN;
	json_array_foreach(q, i, m) {
		json_t *id = json_object_get(m, "id");
		if (!id || !json_object_get(m, "method"))
			continue;
		json_t *e = err ? json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id, "error", err)
				: rpc_error(id, RPC_BACKEND_GONE, "the backend could not start", NULL);
		send_msg(s, e, NULL, NULL);
		json_decref(e);
	}
	json_decref(q);
}

/*
 * A request before any initialize that says it is of the stateless era
 * (server/discover, or a protocol version in its _meta): the session is
 * of that era from now on, and the backends are made ready for it with
 * the capabilities the request declares. True when handled.
 */
static bool begin_stateless(struct session *s, struct msg *m, const char *method)
{
	json_t *t = msg_tree(m);
	json_t *params = json_object_get(t, "params");
	const char *v = era_request_version(params);
	if (!v && strcmp(method, "server/discover") != 0)
		return false;
	if (v && !era_stateless_supported(v)) {
		reply_to(s, m, era_unsupported_error(NULL, v));
		return true;
	}
	if (s->peer.batch) {
		reply_error(s, json_object_get(t, "id"), RPC_INVALID_REQUEST,
			    "a JSON-RPC batch is not part of protocol " ERA_STATELESS_VERSION);
		return true;
	}
	s->st = stateless_new(&s->peer, stateless_write, s, s->round_ttl);
	if (!s->st) {
		reply_to(s, m, rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory"));
		return true;
	}
	s->era = ERA_STATELESS;
	json_t *caps = era_meta(params, ERA_META_CLIENT_CAPS);
	json_t *info = era_meta(params, ERA_META_CLIENT_INFO);
	json_t *init = json_pack("{s:s,s:o,s:o}", "protocolVersion", ERA_STATELESS_VERSION,
		"capabilities", json_is_object(caps) ? json_deep_copy(caps) : json_object(),
		"clientInfo", json_is_object(info) ? json_deep_copy(info)
			: json_pack("{s:s,s:s}", "name", "stateless-client", "version", "0"));
	const char *cname = json_string_value(json_object_get(json_object_get(init, "clientInfo"), "name"));
	free(s->principal);
	s->principal = cname ? strdup(cname) : NULL;
	s->peer.principal = s->principal;
	s->state = SESSION_INITIALIZING;
	s->queue = json_array();
	json_array_append(s->queue, t);
	char why[300];
	if (chain_initialize(&s->peer, init, on_stateless_ready, s, why, sizeof why) < 0) {
		json_t *e = rpc_error(NULL, RPC_BACKEND_GONE, why, NULL);
		json_t *r = json_pack("{s:o}", "error", json_incref(json_object_get(e, "error")));
		on_stateless_ready(s, r);
		json_decref(r);
		json_decref(e);
	}
	json_decref(init);
	return true;
}

/* A request of a stateless-era session: its _meta checked, then what the
 * proxy answers itself; true if done. */
static bool stateless_locally(struct session *s, struct msg *m, const char *method)
{
	json_t *t = msg_tree(m);
	if (!t)
		return false;
	json_t *params = json_object_get(t, "params");
	bool discover = strcmp(method, "server/discover") == 0;
	int code;
	const char *bad = era_check_envelope(params, &code);
	if (era_stateless_removed(method)) {
		reply_to(s, m, rpc_errorf(NULL, RPC_METHOD_NOT_FOUND, "Method not found: %s is not part of "
			"protocol " ERA_STATELESS_VERSION " (this connection began without initialize)", method));
		return true;
	}
	if (bad && code == RPC_UNSUPPORTED_VERSION) {
		reply_to(s, m, era_unsupported_error(NULL, era_request_version(params)));
		return true;
	}
	if (bad && !discover) {
		reply_to(s, m, rpc_error(NULL, code, bad, NULL));
		return true;
	}
	if (discover) {
		reply_to(s, m, rpc_result(NULL, discover_result(s)));
		return true;
	}
	return stateless_request(s->st, t);
}

/* Requests mcp-chain answers itself, whatever the backend; true if done. */
static bool answer_locally(struct session *s, struct msg *m, const char *method)
{
	if (s->era == ERA_STATELESS)
		return stateless_locally(s, m, method);
	if (s->state == SESSION_READY && method[0] != 'i' && method[0] != 's')
		return false;   /* most requests: none of the session's own */
	if (strcmp(method, "initialize") == 0) {
		json_t *t = msg_tree(m);
		on_initialize(s, t, json_object_get(t, "id"));
		return true;
	}
	if (s->state == SESSION_UNINITIALIZED && begin_stateless(s, m, method))
		return true;
	if (strcmp(method, "server/discover") == 0 && s->state == SESSION_READY) {
		reply_to(s, m, stateless_offered(s) ? rpc_result(NULL, discover_result(s))
			 : rpc_error(NULL, RPC_METHOD_NOT_FOUND, "Method not found: server/discover "
				     "(the servers behind speak the handshake era)", NULL));
		return true;
	}
	if (strcmp(method, "ping") == 0 && s->state != SESSION_READY) {
		reply_to(s, m, rpc_result(NULL, json_object()));
		return true;
	}
	if (s->state == SESSION_UNINITIALIZED) {
		reply_to(s, m, rpc_error(NULL, RPC_NOT_INITIALIZED,
					 "Server not initialized: send initialize first", NULL));
		return true;
	}
	return false;
}

/* Handles one (non-batch) message according to the lifecycle; takes *M. */
static void handle(struct session *s, struct msg *m)
{
	struct rpc_info in;
	enum rpc_kind kind = msg_classify(m, &in);

	if (s->state == SESSION_INITIALIZING && kind != RPC_INVALID &&
	    !(kind == RPC_REQUEST && (strcmp(in.method, "ping") == 0 ||
				      strcmp(in.method, "initialize") == 0))) {
		json_t *t = msg_tree(m);
		if (t) {
			if (!s->queue)
				s->queue = json_array();
			json_array_append(s->queue, t);
		}
		msg_release(m);
		return;
	}
	switch (kind) {
	case RPC_INVALID:
		if (in.id || !json_object_get(m->tree, "result"))
			reply_error(s, in.id, in.code, in.reason);
		log_debug("%s: invalid message: %s", s->name, in.reason);
		break;
	case RPC_REQUEST:
		if (!answer_locally(s, m, in.method)) {
			chain_receive_msg(&s->peer, m);
			return;
		}
		break;
	case RPC_NOTIFICATION:
		if (s->st && s->state == SESSION_READY && strcmp(in.method, "notifications/cancelled") == 0 &&
		    stateless_notification(s->st, msg_tree(m)))
			break;
		/* fall through */
	case RPC_RESPONSE:
		if (s->state == SESSION_READY) {
			chain_receive_msg(&s->peer, m);
			return;
		}
		log_debug("%s: %s before initialization ignored", s->name,
			  in.method ? in.method : "response");
		break;
	}
	msg_release(m);
}

/* Handles a JSON-RPC batch (2025-03-26 only). */
static void handle_batch(struct session *s, json_t *arr)
{
	if (json_array_size(arr) == 0) {
		reply_error(s, NULL, RPC_INVALID_REQUEST, "empty batch");
		json_decref(arr);
		return;
	}
	if (s->state != SESSION_READY || strcmp(s->version, BATCH_VERSION) != 0) {
		char text[200];
		snprintf(text, sizeof text,
			 "JSON-RPC batches are supported only in protocol version %s (this session: %s)",
			 BATCH_VERSION, s->version ? s->version : "not initialized");
		reply_error(s, NULL, RPC_INVALID_REQUEST, text);
		json_decref(arr);
		return;
	}
	struct batch *b = calloc(1, sizeof *b);
	b->replies = json_array();
	b->next = s->batches;
	s->batches = b;
	size_t i;
	json_t *m;
	json_array_foreach(arr, i, m) {
		struct rpc_info in;
		enum rpc_kind k = rpc_classify(m, &in);
		if (k == RPC_REQUEST || (k == RPC_INVALID && (in.id || !json_object_get(m, "result"))))
			b->expected++;
	}
	s->peer.batch = b;
	json_array_foreach(arr, i, m) {
		struct msg one;
		msg_init_tree(&one, json_incref(m));
		handle(s, &one);
	}
	s->peer.batch = NULL;
	json_decref(arr);
	b->sealed = true;
	batch_finish_if_done(s, b);
}

/* Sends an error for input that never became a message. */
void session_reject(struct session *s, json_t *err)
{
	send_msg(s, err, NULL, NULL);
	json_decref(err);
}

/* Closes: cancels what is open and stops sending. */
void session_close(struct session *s, const char *reason)
{
	if (s->state == SESSION_CLOSING)
		return;
	if (s->state == SESSION_INITIALIZING && s->init_id) {
		/* the backend's answer would come too late: say so now */
		chain_forget_initialize(&s->peer, s);
		json_t *e = rpc_errorf(s->init_id, RPC_BACKEND_GONE,
			"the backend was not ready before the session ended (%s)", reason);
		send_msg(s, e, NULL, NULL);
		json_decref(e);
		json_decref(s->init_id);
		s->init_id = NULL;
	}
	s->state = SESSION_CLOSING;
	chain_peer_gone(&s->peer, reason);
	stateless_free(s->st);
	s->st = NULL;
}

/* True while the session waits for something it must still answer. */
bool session_holds_requests(const struct session *s)
{
	return s->st && stateless_holds_requests(s->st);
}

bool session_busy(const struct session *s)
{
	return s->peer.received.count > 0 || s->state == SESSION_INITIALIZING;
}

/* Frees the session. */
void session_free(struct session *s)
{
	if (!s)
		return;
	session_close(s, "session freed");
	while (s->batches) {
		struct batch *b = s->batches;
		s->batches = b->next;
		json_decref(b->replies);
		free(b);
	}
	while (s->calls) {   /* never answered: their callbacks are not called */
		struct own_call *c = s->calls;
		s->calls = c->next;
		msg_val_release(&c->id);
		free(c);
	}
	json_decref(s->queue);
	json_decref(s->init_id);
	json_decref(s->init_result);
	chain_remove_peer(&s->peer);
	peer_release(&s->peer);
	free(s->version);
	free(s->principal);
	free(s->name);
	free(s);
}

/* Lifecycle state. */
enum session_state session_state(const struct session *s) { return s->state; }

/* Negotiated version or NULL. */
const char *session_version(const struct session *s) { return s->version; }

/* The session as a chain peer. */
struct peer *session_peer(struct session *s) { return &s->peer; }

/* Both live in the peer, which the chain reads for the spans. */
void session_set_trace_tags(struct session *s, const char *transport, const char *tag)
{
	s->peer.transport = transport;
	snprintf(s->trace_tag, sizeof s->trace_tag, "%s", tag ? tag : "");
	s->peer.session_tag = tag ? s->trace_tag : NULL;
}

/* Borrowed for the receipt of the message in hand (see session.h). */
void session_set_trace_context(struct session *s, const char *parent, const char *state)
{
	s->peer.trace_parent = parent;
	s->peer.trace_state = state;
}

/* The transport credential lives in the peer (see peer_set_credential):
 * a newer one replaces it; exchanges that read the old keep theirs. */
int session_set_credential(struct session *s, const char *cred, size_t n)
{
	return peer_set_credential(&s->peer, cred, n);
}
