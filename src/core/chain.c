/*
 * chain.c - exchanges, id and progress-token mapping, cancellation and
 * routing between client sessions and backends.
 *
 * Life of a request: chain_receive_msg() records an exchange under the
 * requester's id, walks the middleware pipeline, routes, gives the
 * request a fresh id in the responder's id space (its progress token
 * becomes that same id, unique per responder) and sends it. The response
 * is found by that id, walks the pipeline back, gets the requester's id
 * again and is delivered; the exchange is freed. A cancellation from the
 * requester is forwarded with the responder's id and ends the exchange at
 * once, so a late response finds nothing and is dropped.
 *
 * Each of these is written once, against struct msg: whether the message
 * is still its bytes or already a tree is msg.c's business.
 *
 * Why one file of some 1,500 lines: this is the one place where an id, a
 * progress token, a cancellation and "whose request is this" are mapped
 * (the brief asks for one place), and each of those reads and writes the
 * same exchange and peer tables; split, the halves would share struct
 * exchange's invariants across a header, which is what making it opaque
 * outside this file removed.
 */
#include "chain.h"

#include <ev.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "era.h"
#include "log.h"
#include "pool.h"
#include "rpc.h"
#include "trace.h"
#include "wiretap.h"

/* An open request crossing the chain. Owned by the chain; opaque outside
 * the core (chain.h has what the others may ask of it). */
struct exchange {
	struct peer *from;       /* requester; NULL when mcp-chain asked */
	struct peer *to;         /* responder; NULL until routed */
	struct chain *chain;     /* the chain it belongs to */
	struct msg_val from_id;  /* the requester's id, as it came (JSON text) */
	struct msg_val from_token; /* the requester's progress token, or empty */
	unsigned char key_n;     /* bytes of KEY in use; 0: FROM_ID's key did not fit */
	json_int_t to_id;        /* id on the responder's side */
	bool in_sent;            /* registered in to->sent */
	bool in_received;        /* registered in from->received */
	bool walking;            /* inside the request pipeline */
	bool abandoned;          /* cancelled or requester gone while walking */
	bool routed;             /* the responder is chosen */
	bool responded;          /* a response started back through the modules */
	char *method;            /* METHOD_BUF, or an owned copy when longer */
	const char *name;        /* tool/prompt name or resource URI: in
				  * NAME_BUF, or NAME_HEAP when longer */
	char *name_heap;         /* owned */
	struct mw_ctx ctx;
	struct mw_walk walk;
	struct pipeline *pl[2];  /* references held for the exchange's life */
	struct peer_cred *cred;  /* the requester's credential ctx.credential
				  * reads (a reference), or NULL */
	/* For requests mcp-chain makes itself: */
	void (*on_response)(struct exchange *ex, json_t *msg, void *arg);
	void *arg;
	struct exchange *about;  /* a module's question: the request it is about
				  * (open while the question is), else NULL */
	/* For the front's batches (session-owned): */
	void *batch;
	/* Traces (trace.h), only while a tracer is in use and the trace sampled: */
	struct span *srv;        /* a client's request: from receipt to its response */
	struct span *cli;        /* forwarded to a backend: until its response */
	/*
	 * Last: exchange_new clears what is above, and nothing below, which
	 * is written before it is read (the clearing is on every request).
	 */
	ev_timer timer;          /* the responder's request timeout (ev_init'ed) */
	unsigned char key[24];   /* FROM_ID's map key, KEY_N bytes of it */
	char method_buf[32];
	char name_buf[48];
	struct msg m;            /* the request, then its response, while in hand
				  * (emptied by exchange_new) */
};

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

/* A module's own request to a client, open until answered (or failed). */
struct ask {
	void (*cb)(json_t *response, void *arg);
	void *arg;
	struct exchange *ex;      /* the request's exchange */
	struct ask *next;         /* in the chain's list of open questions */
};

struct chain {
	struct peer *peers;       /* newest first */
	struct pipeline *global_pl;
	size_t open_count;
	size_t max_open;          /* per requester; 0: no bound */
	struct ask *asks;
	struct chain_router *router;  /* borrowed; NULL: one backend, unchanged */
	struct peer **links;      /* backends of other chains that serve this
				   * one's clients too (chain_link_peer); owned
				   * array of borrowed peers */
	size_t nlinks;
	struct chain_stats stats;
};

/* A notification on its way through the pipeline. */
struct note {
	struct mw_walk walk;
	struct mw_ctx ctx;
	struct msg m;
	struct chain *chain; /* whose pipeline it walks, whose clients get it */
	struct peer *from;
	struct peer *to;   /* NULL: every ready client */
	struct msg_val about; /* progress: the receiver's request it is of */
	struct peer_cred *cred; /* what ctx.credential reads (a reference) */
	char method[];     /* ctx.method */
};

/*
 * Freed exchanges kept for reuse, linked through their arg member and
 * otherwise poisoned for AddressSanitizer while kept. The pool is memory,
 * not state: it holds nothing about any session.
 */
#define POOL_MAX 256
#define ARG_AT offsetof(struct exchange, arg)
#define ARG_END (ARG_AT + sizeof(void *))
static struct exchange *pool;
static size_t pool_count;

static void deliver_response(struct exchange *ex);
static void send_notification(struct chain *c, struct peer *from, struct peer *to,
			      struct msg *m, const char *method, const struct msg_val *about);
static int abort_exchange(struct exchange *ex, int code, const char *message);
static void send_cancel(struct peer *to, json_int_t to_id, const char *reason);
static void answer_error(struct exchange *ex, json_t *err);
static void trace_abandoned(struct exchange *ex);

/* ---- the chain object ---- */

/* New chain. */
struct chain *chain_new(void)
{
	return calloc(1, sizeof(struct chain));
}

/* Frees a chain and the exchange pool with the last one. */
void chain_free(struct chain *c)
{
	if (!c)
		return;
	while (c->nlinks)
		chain_unlink_peer(c, c->links[c->nlinks - 1]);
	free(c->links);
	pipeline_unref(c->global_pl);
	free(c);
	while (pool) {
		struct exchange *ex = pool;
		pool = ex->arg;
		POOL_UNPOISON(ex, sizeof *ex);
		free(ex);
	}
	pool_count = 0;
}

/* Registers a peer. */
void chain_add_peer(struct chain *c, struct peer *p)
{
	p->chain = c;
	p->next = c->peers;
	c->peers = p;
}

/* Unregisters a peer. */
void chain_remove_peer(struct peer *p)
{
	struct chain *c = p->chain;
	while (p->nserves)
		chain_unlink_peer(p->serves[p->nserves - 1], p);
	for (struct peer **pp = c ? &c->peers : NULL; pp && *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->next = NULL;
}

/* Holds (PAUSE) or lets go of Q's input for one congested peer. */
static void hold_input(struct peer *q, bool pause)
{
	if (!q->ops->pause)
		return;
	if (pause && q->paused++ == 0)
		q->ops->pause(q, true);
	else if (!pause && q->paused > 0 && --q->paused == 0)
		q->ops->pause(q, false);
}

/* What congestion between C's peers and P (linked to C) holds, taken
 * (PAUSE) or let go. */
static void link_holds(struct chain *c, struct peer *p, bool pause)
{
	for (struct peer *q = c->peers; q; q = q->next) {
		if (q->role == p->role)
			continue;
		if (q->congested)
			hold_input(p, pause);
		if (p->congested)
			hold_input(q, pause);
	}
}

int chain_link_peer(struct chain *c, struct peer *p)
{
	if (p->chain == c)
		return 0;
	for (size_t i = 0; i < c->nlinks; i++)
		if (c->links[i] == p)
			return 0;
	struct peer **l = realloc(c->links, (c->nlinks + 1) * sizeof *l);
	if (!l)
		return -1;
	c->links = l;
	struct chain **s = realloc(p->serves, (p->nserves + 1) * sizeof *s);
	if (!s)
		return -1;
	p->serves = s;
	c->links[c->nlinks++] = p;
	p->serves[p->nserves++] = c;
	link_holds(c, p, true);
	return 0;
}

/* The exchanges of chain C found in a peer's table. */
struct of_chain {
	struct chain *c;
	struct exchange **v;   /* owned array */
	size_t n, cap;
};

/* Adds EX to ARG (a struct of_chain) when it is of ARG's chain (idmap_each). */
static void collect_of_chain(void *value, void *arg)
{
	struct exchange *ex = value;
	struct of_chain *o = arg;
	if (ex->chain != o->c)
		return;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 16;
		struct exchange **v = realloc(o->v, cap * sizeof *v);
		if (!v)
			return;   /* out of memory: the rest end with P or with C's peers */
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n++] = ex;
}

void chain_unlink_peer(struct chain *c, struct peer *p)
{
	size_t i = 0;
	while (i < c->nlinks && c->links[i] != p)
		i++;
	if (i == c->nlinks)
		return;
	link_holds(c, p, false);
	c->links[i] = c->links[--c->nlinks];
	for (size_t j = 0; j < p->nserves; j++) {
		if (p->serves[j] == c) {
			p->serves[j] = p->serves[--p->nserves];
			break;
		}
	}
	struct of_chain o = { c, NULL, 0, 0 };
	idmap_each(&p->sent, collect_of_chain, &o);
	for (size_t k = 0; k < o.n; k++) {   /* out of P's table first: answering */
		idmap_del(&p->sent, o.v[k]->to_id);   /* may start other requests */
		o.v[k]->in_sent = false;
	}
	for (size_t k = 0; k < o.n; k++) {
		struct exchange *ex = o.v[k];
		ev_timer_stop(EV_DEFAULT, &ex->timer);
		send_cancel(p, ex->to_id, "its session ended");
		answer_error(ex, rpc_errorf(NULL, RPC_BACKEND_GONE, "%s: no longer serves this "
					    "session", p->name));
	}
	free(o.v);
}

/* Bounds the requests a peer may have open. */
void chain_set_max_open(struct chain *c, size_t max)
{
	c->max_open = max;
}

/* Replaces the global pipeline. */
void chain_set_pipeline(struct chain *c, struct pipeline *pl)
{
	pipeline_unref(c->global_pl);
	c->global_pl = pipeline_ref(pl);
}

/* Sets the router. */
void chain_set_router(struct chain *c, struct chain_router *r)
{
	c->router = r;
}

/* The peer that answers a client's initialize. */
struct peer *chain_init_target(struct peer *client)
{
	struct chain *c = client->chain;
	if (c->router)
		return c->router->ops->init_target(c->router, client);
	return chain_first_peer(c, PEER_BACKEND);
}

/* A front's initialize, at the peer that answers it. */
int chain_initialize(struct peer *client, json_t *params,
		     void (*cb)(void *arg, json_t *response), void *arg, char *why, size_t n)
{
	struct peer *to = chain_init_target(client);
	if (!to) {
		snprintf(why, n, "no backend is configured");
		return -1;
	}
	if (to->ops->initialize && to->ops->initialize(to, params, cb, arg) == 0)
		return 0;
	snprintf(why, n, "backend %s is not available%s%s%s", to->name,
		 to->why_down[0] ? " (" : "", to->why_down, to->why_down[0] ? ")" : "");
	return -1;
}

/* Forgets a front's pending initialize. */
void chain_forget_initialize(struct peer *client, void *arg)
{
	struct peer *to = chain_init_target(client);
	if (to && to->ops->forget_initialize)
		to->ops->forget_initialize(to, arg);
}

/* The first registered peer of a role. */
struct peer *chain_first_peer(struct chain *c, enum peer_role role)
{
	struct peer *found = NULL;
	for (struct peer *p = c->peers; p; p = p->next)
		if (p->role == role)
			found = p;  /* the list is newest first: keep the oldest */
	return found;
}

/*
 * Whose request is this: the client's request that BX, a request on its
 * way to a client, belongs to. The one answer the stdio, HTTP and
 * 2026-07-28 paths use (peer_out.about), for routing a backend's request
 * to its client and for the client's front to put it beside that
 * request (on its POST stream, in its input_required round).
 */
struct about {
	struct peer *client;     /* the client it is for; NULL: none known */
	struct exchange *ex;     /* the request of CLIENT it is part of, or NULL */
	size_t n;                /* open requests of CLIENT at the backend */
	bool several_clients;    /* requests of several clients are open there */
};

/* Counts EX, a request open at a backend, when a ready client's (idmap_each). */
static void count_open(void *value, void *arg)
{
	struct exchange *ex = value;
	struct about *a = arg;
	if (!ex->from || ex->from->role != PEER_CLIENT || !ex->from->ready || ex->responded)
		return;
	if (!a->client)
		a->client = ex->from;
	else if (a->client != ex->from)
		a->several_clients = true;
	if (a->client == ex->from) {
		a->ex = ex;
		a->n++;
	}
}

/*
 * Fills A for BX (M its message): a module's question is about the
 * request it asked about; a backend's request belongs to the one its
 * transport named (_meta ERA_META_RELATED), else to the one request of a
 * client open at that backend (JSON-RPC carries no link: with several
 * open, A->ex stays NULL and A->n says how many).
 */
static void request_about(const struct exchange *bx, struct msg *m, struct about *a)
{
	memset(a, 0, sizeof *a);
	if (!bx->from) {
		a->ex = bx->about;
		a->client = bx->about ? bx->about->from : bx->to;
		a->n = bx->about != NULL;
		return;
	}
	struct peer *backend = bx->from;
	if (msg_meta_has(m, ERA_META_RELATED)) {
		json_t *rel = json_object_get(json_object_get(json_object_get(msg_tree(m), "params"),
							      "_meta"), ERA_META_RELATED);
		struct exchange *ex = json_is_integer(rel) ?
			idmap_get(&backend->sent, json_integer_value(rel)) : NULL;
		if (ex && ex->from && ex->from->role == PEER_CLIENT && !ex->responded) {
			a->client = ex->from;
			a->ex = ex;
			a->n = 1;
			return;
		}
	}
	idmap_each(&backend->sent, count_open, a);
	if (a->n != 1 || a->several_clients)
		a->ex = NULL;
}

/*
 * The client for a backend's own request (sampling, elicitation, roots):
 * the client of the request it belongs to; else the one client with
 * requests open at that backend; with none, the oldest ready client; with
 * several, nobody can tell which one it is for (JSON-RPC carries no
 * link), so NULL with CODE and WHY set.
 */
static struct peer *route_client(struct exchange *bx, struct msg *m, int *code, char *why,
				 size_t n)
{
	struct peer *backend = bx->from;
	struct about a;
	request_about(bx, m, &a);
	if (a.ex)
		return a.client;
	if (a.several_clients) {
		*code = RPC_INVALID_REQUEST;
		snprintf(why, n, "\"%s\" from %s refused: several clients have requests open "
			 "there, and nothing tells which one it is for", bx->method, backend->name);
		log_warn("%s", why);
		return NULL;
	}
	if (a.client)
		return a.client;
	struct peer *oldest = NULL;
	for (size_t i = 0; i <= backend->nserves && !oldest; i++) {
		struct chain *c = i ? backend->serves[i - 1] : backend->chain;
		for (struct peer *p = c->peers; p; p = p->next)
			if (p->role == PEER_CLIENT && p->ready)
				oldest = p;  /* the list is newest first */
	}
	return oldest;
}

/* Pauses or resumes the peers that feed a congested one. */
void chain_congestion(struct peer *p, bool congested)
{
	if (p->congested == congested)
		return;
	p->congested = congested;
	log_debug("%s: output %s", p->name, congested ? "congested, pausing its sources" : "drained");
	struct chain *c = p->chain;
	for (struct peer *q = c ? c->peers : NULL; q; q = q->next)
		if (q->role != p->role)
			hold_input(q, congested);
	for (size_t i = 0; c && i < c->nlinks; i++)   /* backends serving C's clients too */
		if (c->links[i]->role != p->role)
			hold_input(c->links[i], congested);
	for (size_t i = 0; i < p->nserves; i++)       /* the clients of the chains P serves */
		for (struct peer *q = p->serves[i]->peers; q; q = q->next)
			if (q->role != p->role)
				hold_input(q, congested);
}

const char *chain_request_method(const struct exchange *ex) { return ex->method; }
struct span *chain_request_span(const struct exchange *ex) { return ex->srv; }
const struct msg_val *chain_request_id(const struct exchange *ex) { return &ex->from_id; }
void *chain_request_batch(const struct exchange *ex) { return ex->batch; }

struct exchange *chain_find_request(struct peer *from, const struct msg_val *id)
{
	unsigned char key[RPC_KEY_MAX];
	size_t n = msg_val_key(id, key);
	return n ? hmap_get(&from->received, key, n) : NULL;
}

/* Exchanges open in a chain. */
size_t chain_open_exchanges(const struct chain *c)
{
	return c->open_count;
}

/* ---- sending ---- */

/* True for the peers the chain taps: backends out of process. */
static bool tapped(const struct peer *p)
{
	return p->role == PEER_BACKEND && !p->answers_inline;
}

/*
 * Writes M, described by O, to TO: as its bytes (ids spliced) when the
 * peer takes bytes and nothing made a tree, else as the tree. Returns 0
 * or -1.
 */
static int send_to(struct peer *to, struct msg *m, const struct peer_out *o)
{
	struct exchange *ex = o->kind == PEER_OUT_RESPONSE ? o->about : NULL;
	bool tap = wiretap_hook && tapped(to);   /* a client's session taps its own */
	/* mcp-chain's own _meta keys come off before a client sees a message
	 * (the session does it on the tree): such bytes never go as they are */
	bool own = to->role == PEER_CLIENT &&
		(msg_meta_has(m, ERA_META_RELATED) || msg_meta_has(m, ERA_META_INPUT_KEY));
	if (to->ops->send_raw && !own && !(ex && ex->batch) && msg_bytes_current(m)) {
		struct iovec iov[MSG_IOV_MAX];
		int n = msg_iov(m, iov);
		if (to->ops->send_raw(to, iov, n, o) == 0) {
			if (tap)
				wiretap_iov(to, WIRETAP_OUT, iov, n);
			return 0;
		}
		/* the peer takes no bytes now (nothing was written): a tree then */
	}
	json_t *t = msg_tree(m);
	if (t && tap)
		wiretap_json(to, WIRETAP_OUT, t);
	return t ? to->ops->send(to, t, o) : -1;
}

/* Sends TO a notifications/cancelled of its request TO_ID, saying REASON. */
static void send_cancel(struct peer *to, json_int_t to_id, const char *reason)
{
	json_t *c = rpc_notification("notifications/cancelled",
		json_pack("{s:I,s:s}", "requestId", (json_int_t)to_id, "reason", reason));
	if (tapped(to))
		wiretap_json(to, WIRETAP_OUT, c);
	to->ops->send(to, c, &(struct peer_out){ .kind = PEER_OUT_NOTIFICATION });
	json_decref(c);
}

/* ---- exchanges ---- */

/* A request stayed open at its responder longer than allowed. */
static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct exchange *ex = w->data;
	char text[300];
	(void)loop;
	(void)revents;
	snprintf(text, sizeof text, "request \"%s\" timed out after %g s at %s",
		 ex->method, ex->to->timeout, ex->to->name);
	log_warn("%s", text);
	abort_exchange(ex, RPC_REQUEST_TIMEOUT, text);
}

/* Makes an exchange in C for a request from FROM (NULL: our own). */
static struct exchange *exchange_new(struct chain *c, struct peer *from, const char *method)
{
	struct exchange *ex = pool;
	if (ex) {
		pool = ex->arg;
		pool_count--;
		POOL_UNPOISON(ex, sizeof *ex);
		memset(ex, 0, offsetof(struct exchange, timer));
		msg_init_empty(&ex->m);
	} else if (!(ex = calloc(1, sizeof *ex))) {
		return NULL;
	}
	ex->chain = c;
	ex->from = from;
	size_t mlen = strlen(method);
	if (mlen < sizeof ex->method_buf) {
		buf_copy_short(ex->method_buf, method, mlen + 1);
		ex->method = ex->method_buf;
	} else {
		ex->method = strdup(method);
	}
	ex->ctx.kind = RPC_REQUEST;
	ex->ctx.method = ex->method;
	ex->ctx.method_code = mcp_method_of(method, mlen);
	ex->ctx.start = ev_now(EV_DEFAULT);
	ex->ctx.ex = ex;
	ex->ctx.id_text = &ex->from_id;
	ex->ctx.request_bytes = from ? from->rx_bytes : 0;
	ex->walk.ctx = &ex->ctx;
	ex->walk.m = &ex->m;
	ev_init(&ex->timer, on_timeout);
	ex->timer.data = ex;
	c->open_count++;
	return ex;
}

/* Unregisters and frees an exchange. */
static void exchange_free(struct exchange *ex)
{
	unsigned char key[RPC_KEY_MAX];
	if (ev_is_active(&ex->timer) || ev_is_pending(&ex->timer))   /* no call for most */
		ev_timer_stop(EV_DEFAULT, &ex->timer);
	if (!ex->responded && ex->walk.reached > 0)
		mw_walk_abandon(&ex->walk);
	if (ex->srv || ex->cli)
		trace_abandoned(ex);
	if (ex->in_sent)
		idmap_del(&ex->to->sent, ex->to_id);
	if (ex->in_received) {
		if (ex->key_n)
			hmap_del(&ex->from->received, ex->key, ex->key_n);
		else
			hmap_del(&ex->from->received, key, msg_val_key(&ex->from_id, key));
	}
	msg_val_release(&ex->from_id);
	msg_val_release(&ex->from_token);
	msg_release(&ex->m);
	json_decref(ex->ctx.id);
	json_decref(ex->ctx.scratch);
	pipeline_unref(ex->pl[0]);
	pipeline_unref(ex->pl[1]);
	peer_cred_unref(ex->cred);
	if (ex->method != ex->method_buf)
		free(ex->method);
	free(ex->name_heap);
	ex->chain->open_count--;
	if (pool_count < POOL_MAX) {
		ex->arg = pool;
		pool = ex;
		pool_count++;
		POOL_POISON(ex, ARG_AT);
		POOL_POISON((char *)ex + ARG_END, sizeof *ex - ARG_END);
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

/* The client's protocol version for the context. */
static const char *version_of(struct peer *a, struct peer *b)
{
	if (a && a->role == PEER_CLIENT)
		return a->version;
	if (b && b->role == PEER_CLIENT)
		return b->version;
	return NULL;
}

/* The client FROM's transport credential into CTX (none from a backend);
 * *HOLD takes a reference to it for as long as CTX lives. */
static void credential_of(struct mw_ctx *ctx, const struct peer *from,
			  struct peer_cred **hold)
{
	struct peer_cred *c = from && from->role == PEER_CLIENT ? from->cred : NULL;
	*hold = peer_cred_ref(c);
	ctx->credential = c ? c->s : NULL;
	ctx->credential_len = c ? c->len : 0;
	ctx->credential_hash = c ? c->hash : NULL;
}

void chain_check_credential(struct chain *c, struct mw_cred_check *chk,
			    struct mw_cred_wait *wait)
{
	pipeline_check_credential(c->global_pl, chk, wait);
}

json_t *chain_resource_metadata(struct chain *c)
{
	return pipeline_resource_metadata(c->global_pl);
}

const struct chain_stats *chain_stats(const struct chain *c) { return &c->stats; }

/* Backend name for the context. */
static const char *backend_of(struct peer *a, struct peer *b)
{
	if (a && a->role == PEER_BACKEND)
		return a->name;
	if (b && b->role == PEER_BACKEND)
		return b->name;
	return NULL;
}

/* Makes EX's message the error response CODE/TEXT and sends it back. */
static void answer_error(struct exchange *ex, json_t *err)
{
	msg_set_tree(&ex->m, err);
	deliver_response(ex);
}

/* ---- traces (trace.h): reached only with a tracer in use ---- */

/* The span name "METHOD SUBJECT" (or METHOD) into BUF of N bytes. */
static const char *span_name(const struct exchange *ex, const char *subject, char *buf, size_t n)
{
	snprintf(buf, n, subject ? "%s %s" : "%s", ex->method, subject);
	return buf;
}

/* What a span of EX says of its request (semantic conventions for MCP). */
static void trace_describe(const struct exchange *ex, struct span *s, const char *subject)
{
	span_attr_str(s, "mcp.method.name", ex->method);
	const char *id = msg_val_text(&ex->from_id);
	size_t n = ex->from_id.n;
	if (n >= 2 && id[0] == '"')   /* a string id, without its quotes */
		span_attr_strn(s, "jsonrpc.request.id", id + 1, n - 2);
	else if (n)
		span_attr_strn(s, "jsonrpc.request.id", id, n);
	span_attr_str(s, "mcp.protocol.version", ex->ctx.protocol);
	if (!subject)
		return;
	if (strcmp(ex->method, "tools/call") == 0) {
		span_attr_str(s, "gen_ai.tool.name", subject);
		span_attr_str(s, "gen_ai.operation.name", "execute_tool");
	} else if (strcmp(ex->method, "prompts/get") == 0) {
		span_attr_str(s, "gen_ai.prompt.name", subject);
	} else if (strncmp(ex->method, "resources/", 10) == 0) {
		span_attr_str(s, "mcp.resource.uri", subject);
	}
}

/*
 * A client's request EX (message M) arrived: its SERVER span, under the
 * context of its params._meta.traceparent, else of the transport's
 * (FROM->trace_parent), else a trace of its own; nothing unless sampled.
 */
static void trace_received(struct exchange *ex, struct peer *from, struct msg *m)
{
	struct trace_ctx pc;
	const char *tp = msg_meta_str(m, "traceparent"), *ts = NULL;
	bool have = tp && trace_parent_parse(tp, strlen(tp), &pc) == 0;
	if (have)
		ts = msg_meta_str(m, "tracestate");
	else if ((have = from->trace_parent &&
		  trace_parent_parse(from->trace_parent, strlen(from->trace_parent), &pc) == 0))
		ts = from->trace_state;
	if (have)
		trace_state_set(&pc, ts, ts ? strlen(ts) : 0);
	ex->srv = span_start(NULL, SPAN_SERVER, have ? &pc : NULL);   /* decides first */
	if (!ex->srv)
		return;
	char buf[48], *heap, name[160];
	const char *subject = msg_subject(m, buf, sizeof buf, &heap);
	span_rename(ex->srv, span_name(ex, subject, name, sizeof name));
	trace_describe(ex, ex->srv, subject);
	span_attr_str(ex->srv, "network.transport", from->transport);
	span_attr_str(ex->srv, "mcp.session.id", from->session_tag);
	log_set_trace_id(span_trace_hex(ex->srv));
	free(heap);
}

/*
 * EX's request M goes to backend TO: its CLIENT span, child of the server
 * span, whose context M carries on in params._meta (traceparent, and
 * tracestate when there is one).
 */
static void trace_forwarded(struct exchange *ex, struct peer *to, struct msg *m)
{
	char buf[48], *heap = NULL, name[160];
	const char *subject = ex->name ? ex->name : msg_subject(m, buf, sizeof buf, &heap);
	ex->cli = span_start(span_name(ex, subject, name, sizeof name), SPAN_CLIENT,
			     span_ctx(ex->srv));
	if (ex->cli) {
		trace_describe(ex, ex->cli, subject);
		span_attr_str(ex->cli, "mcp_chain.backend", to->name);
		const struct trace_ctx *c = span_ctx(ex->cli);
		char tp[TRACE_PARENT_LEN + 1];
		trace_parent_format(c, tp);
		if (msg_meta_set(m, "traceparent", tp) < 0 ||
		    (c->state[0] && msg_meta_set(m, "tracestate", c->state) < 0))
			log_debug("%s: \"%s\" goes without its trace context", to->name, ex->method);
	}
	free(heap);
}

/* How EX ended, told to its span S: the response M, of msg_outcome OUTCOME. */
static void trace_outcome(struct exchange *ex, struct span *s, struct msg *m, int outcome)
{
	if (s == ex->srv)
		span_attr_str(s, "mcp_chain.client", ex->ctx.client);
	if (outcome == 1) {
		json_t *e = json_object_get(msg_tree(m), "error");
		char code[24];
		snprintf(code, sizeof code, "%lld",
			 (long long)json_integer_value(json_object_get(e, "code")));
		span_attr_str(s, "error.type", code);
		span_attr_str(s, "rpc.response.status_code", code);
		span_error(s, json_string_value(json_object_get(e, "message")));
	} else if (outcome == 2) {
		span_attr_str(s, "error.type", "tool_error");
		span_error(s, "the tool's result is an error (isError)");
	}
}

/* EX ends with its spans still open: no response came (cancelled, its
 * requester or responder gone). */
static void trace_abandoned(struct exchange *ex)
{
	span_error(ex->cli, "no response from the backend");
	span_end(ex->cli);
	if (ex->srv && !span_failed(ex->srv))
		span_error(ex->srv, "ended without a response");
	span_end(ex->srv);
	ex->srv = ex->cli = NULL;
}

/* Gives EX its id at TO, registers it there and starts its timeout. */
static void exchange_assign(struct exchange *ex, struct peer *to)
{
	ex->to = to;
	ex->to_id = to->next_id++;
	ex->ctx.backend = backend_of(ex->from, to);
	if (!ex->ctx.client)  /* a module (auth) may have set the principal */
		ex->ctx.client = principal_of(ex->from, to);
	if (!ex->ctx.protocol)
		ex->ctx.protocol = version_of(ex->from, to);
	if (idmap_put(&to->sent, ex->to_id, ex) == 0)
		ex->in_sent = true;
	if (to->timeout > 0 && ex->from) {
		ev_timer_set(&ex->timer, to->timeout, 0.);
		ev_timer_start(EV_DEFAULT, &ex->timer);
	}
}

/* Answers EX's requester with an error about its responder. */
static void exchange_fail(struct exchange *ex, const char *reason)
{
	if (ex->in_sent)
		idmap_del(&ex->to->sent, ex->to_id);
	ex->in_sent = false;
	answer_error(ex, rpc_errorf(NULL, RPC_BACKEND_GONE, "%s: %s", ex->to->name, reason));
}

/*
 * Gives EX's request M (ex->m, or the caller's message when no module was on
 * its way) its id on TO, its progress token too, and sends it; M is
 * released.
 */
static void forward_request(struct exchange *ex, struct peer *to, struct msg *m)
{
	struct msg moved;
	if (m == &ex->m && to->answers_inline) {
		/* the responder may answer, and so end EX, before send_to returns */
		msg_move(&moved, &ex->m);
		m = &moved;
	}
	exchange_assign(ex, to);
	if (ex->srv && to->role == PEER_BACKEND && !to->answers_inline)
		trace_forwarded(ex, to, m);
	int rc = msg_set_id_int(m, ex->to_id);
	if (rc == 0 && msg_token_get(m, &ex->from_token) == 1)
		rc = msg_set_token_int(m, ex->to_id);   /* the token becomes the id too */
	struct peer_out o = { .kind = PEER_OUT_REQUEST };
	if (rc == 0 && to->role == PEER_CLIENT) {   /* beside the client's request it belongs to */
		struct about a;
		request_about(ex, m, &a);
		o.about = a.ex;
		o.about_id = a.ex ? &a.ex->from_id : NULL;
		o.several = a.n > 1;
	}
	if (rc == 0)
		rc = send_to(to, m, &o);
	msg_release(m);   /* its bytes were borrowed from the reader */
	if (rc < 0)
		exchange_fail(ex, "cannot send the request");
}

/* Answers a request that found no usable responder. */
static void answer_unroutable(struct exchange *ex, struct peer *to, int code, const char *why)
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
	answer_error(ex, reply);
}

/* Where a client's request or notification goes; NULL with CODE and WHY set. */
static struct peer *route_to_backend(struct peer *client, struct msg *m, const char *method,
				     int *code, char *why, size_t n)
{
	struct chain_router *r = client->chain->router;
	if (r)
		return r->ops->route(r, client, m, method, code, why, n);
	struct peer *p = chain_first_peer(client->chain, PEER_BACKEND);
	if (!p) {
		*code = RPC_BACKEND_GONE;
		snprintf(why, n, "no backend is configured");
	}
	return p;
}

/* Starts EX's walk with the modules it has; or goes straight on. */
static void walk_forward(struct exchange *ex)
{
	ex->walking = true;
	if (pipeline_size(ex->walk.stage[0]) + pipeline_size(ex->walk.stage[1]) == 0) {
		ex->walk.done(&ex->walk, MW_PASS);   /* no module on its way */
		return;
	}
	mw_walk_forward(&ex->walk);
}

/*
 * Routes EX's request M (ex->m, or the caller's message when no module was
 * on its way) and sends it on, through the responder's own modules if it
 * has some; or answers it. M is released or moved into EX.
 */
static void route_request(struct exchange *ex, struct msg *m)
{
	if (ex->routed) {
		forward_request(ex, ex->to, m);
		return;
	}
	int code = 0;
	char why[300];
	why[0] = '\0';   /* not "= \"\"", which clears all 300 bytes on every request */
	struct peer *to = ex->from->role == PEER_CLIENT ?
		route_to_backend(ex->from, m, ex->method, &code, why, sizeof why) :
		route_client(ex, m, &code, why, sizeof why);
	if (!to || !to->ready) {
		if (m != &ex->m)
			msg_release(m);
		answer_unroutable(ex, to, code, why[0] ? why : NULL);
		return;
	}
	ex->routed = true;
	ex->to = to;
	ex->ctx.backend = backend_of(ex->from, to);
	if (!ex->ctx.client)  /* a module (auth) may have set the principal */
		ex->ctx.client = principal_of(ex->from, to);
	if (to->role == PEER_BACKEND && pipeline_size(to->pl) > 0) {
		/* on to the backend's own modules, which see its own names */
		if (m != &ex->m)
			msg_move(&ex->m, m);
		ex->pl[1] = pipeline_ref(to->pl);
		ex->walk.stage[1] = ex->pl[1];
		if (!ex->name) {
			ex->name = msg_subject(&ex->m, ex->name_buf, sizeof ex->name_buf,
					       &ex->name_heap);
			ex->ctx.name = ex->name;
		}
		walk_forward(ex);
		return;
	}
	forward_request(ex, to, m);
}

/* The request walked the pipeline: route it, or answer it. */
static void request_walked(struct mw_walk *w, enum mw_verdict v)
{
	struct exchange *ex = container_of(w, struct exchange, walk);
	ex->walking = false;
	if (ex->abandoned) {
		exchange_free(ex);
		return;
	}
	if (v == MW_DROP) {
		answer_error(ex, rpc_errorf(NULL, RPC_INVALID_REQUEST,
					    "request \"%s\" refused by middleware", ex->method));
		return;
	}
	if (v == MW_REPLY) {
		deliver_response(ex);
		return;
	}
	route_request(ex, &ex->m);
}

/* Sends a reply of the chain's own to a request it could not take in. */
static void reply_now(struct peer *from, struct msg *m, json_t *err)
{
	struct msg_val id = { .n = 0 };
	if (msg_id_get(m, &id) == 0)
		json_object_set_new(err, "id", msg_val_json(&id));
	from->ops->send(from, err, &(struct peer_out){ .kind = PEER_OUT_RESPONSE,
		.about_id = id.n ? &id : NULL, .outcome = 1 });
	msg_val_release(&id);
	json_decref(err);
	msg_release(m);
}

/* A request from a peer. */
static void on_request(struct peer *from, struct msg *m, const char *method)
{
	struct chain *c = from->chain;
	unsigned char key[RPC_KEY_MAX];
	if (c->max_open && from->received.count >= c->max_open) {
		if (!from->over_limit)   /* one line per episode */
			log_warn("%s: %zu requests open: more are refused until some end", from->name,
				 from->received.count);
		from->over_limit = true;
		c->stats.refused_over_limit++;
		reply_now(from, m, rpc_errorf(NULL, RPC_BACKEND_GONE,
			"too many requests in flight (%zu, maxOpenRequests): retry when some end",
			from->received.count));
		return;
	}
	from->over_limit = false;
	size_t klen = msg_id_key(m, key);
	struct exchange *ex = exchange_new(c, from, method);
	if (!ex) {
		reply_now(from, m, rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory"));
		return;
	}
	int added = klen ? hmap_add(&from->received, key, klen, ex) : -1;
	if (added == 1 || msg_id_get(m, &ex->from_id) < 0) {
		exchange_free(ex);
		reply_now(from, m, rpc_errorf(NULL, RPC_INVALID_REQUEST,
			"id already in use by a request still in progress"));
		return;
	}
	ex->in_received = added == 0;
	if (klen <= sizeof ex->key) {
		buf_copy_short(ex->key, key, klen);
		ex->key_n = (unsigned char)klen;
	}
	ex->batch = from->batch;
	c->stats.requests[from->role == PEER_CLIENT ? 0 : 1]++;
	ex->ctx.dir = from->role == PEER_CLIENT ? MW_TO_BACKEND : MW_TO_CLIENT;
	ex->ctx.client = principal_of(from, NULL);
	ex->ctx.protocol = version_of(from, NULL);
	credential_of(&ex->ctx, from, &ex->cred);
	ex->ctx.backend = backend_of(from, NULL);
	if (trace_active() && from->role == PEER_CLIENT)
		trace_received(ex, from, m);
	if (from->role == PEER_BACKEND && pipeline_size(from->pl) > 0) {
		/* from a backend: its own modules first, then the global ones */
		ex->pl[1] = pipeline_ref(c->global_pl);
		ex->pl[0] = pipeline_ref(from->pl);
		ex->walk.stage[1] = ex->pl[1];
	} else {
		ex->pl[0] = pipeline_ref(c->global_pl);
	}
	ex->walk.stage[0] = ex->pl[0];
	ex->walk.done = request_walked;
	if (pipeline_size(ex->pl[0]) + pipeline_size(ex->pl[1]) == 0) {
		route_request(ex, m);   /* no module on its way: the message stays where it is */
		return;
	}
	msg_move(&ex->m, m);
	/* what modules are told: the subject and the id */
	ex->name = msg_subject(&ex->m, ex->name_buf, sizeof ex->name_buf, &ex->name_heap);
	ex->ctx.name = ex->name;
	walk_forward(ex);
}

/* Hands EX's response M (ex->m, or the caller's when no module saw it) to the requester; frees EX. */
static void deliver(struct exchange *ex, struct msg *m)
{
	if (ex->on_response) {
		json_t *t = msg_tree(m);
		if (!t) {
			msg_set_tree(m, rpc_errorf(NULL, RPC_INTERNAL_ERROR,
						   "mcp-chain could not read the response"));
			t = m->tree;
		}
		ex->on_response(ex, t, ex->arg);
	} else if (ex->from && !ex->abandoned) {
		struct peer_out o = { .kind = PEER_OUT_RESPONSE, .about = ex,
			.about_id = &ex->from_id, .outcome = msg_outcome(m) };
		if (ex->srv)
			trace_outcome(ex, ex->srv, m, o.outcome);
		if (msg_set_id(m, &ex->from_id) < 0 || send_to(ex->from, m, &o) < 0)
			log_debug("%s: response to \"%s\" not delivered", ex->from->name, ex->method);
		span_end(ex->srv);
		ex->srv = NULL;
	}
	if (m != &ex->m)
		msg_release(m);
	exchange_free(ex);
}

/* The response walked back: hand it to the requester. */
static void response_walked(struct mw_walk *w, enum mw_verdict v)
{
	struct exchange *ex = container_of(w, struct exchange, walk);
	(void)v;
	ex->walking = false;
	deliver(ex, &ex->m);
}

/* Sends EX's message (its response, in ex->m) back through the modules. */
static void deliver_response(struct exchange *ex)
{
	static const enum mw_outcome outcomes[] = {
		MW_OUTCOME_OK, MW_OUTCOME_ERROR, MW_OUTCOME_TOOL_ERROR };
	ex->ctx.outcome = outcomes[msg_outcome(&ex->m)];
	ex->ctx.kind = RPC_RESPONSE;
	ex->responded = true;
	ex->walk.done = response_walked;
	ex->walking = true;
	if (ex->walk.reached == 0)
		response_walked(&ex->walk, MW_PASS);   /* it passed no module */
	else
		mw_walk_back(&ex->walk);
}

/* A response from TO to a request sent to it. */
static void on_response(struct peer *to, struct msg *m)
{
	int64_t id;
	struct exchange *ex = NULL;
	if (msg_id_int(m, &id))
		ex = idmap_del(&to->sent, id);
	if (!ex) {
		log_debug("%s: response to an unknown or cancelled request dropped", to->name);
		msg_release(m);
		return;
	}
	ex->in_sent = false;
	int outcome = msg_outcome(m);   /* bytes: a flag, no parse */
	if (ex->srv)
		log_set_trace_id(span_trace_hex(ex->srv));
	if (ex->cli) {
		trace_outcome(ex, ex->cli, m, outcome);
		span_end(ex->cli);
		ex->cli = NULL;
	}
	ex->chain->stats.responses[outcome]++;
	to->answered[outcome]++;
	to->answered_seconds += ev_now(EV_DEFAULT) - ex->ctx.start;
	ex->ctx.response_bytes = to->rx_bytes;
	msg_release(&ex->m);
	if (ex->walk.reached == 0) {   /* no module saw the request: none sees this */
		ex->responded = true;
		deliver(ex, m);
		return;
	}
	msg_move(&ex->m, m);
	deliver_response(ex);
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
	exchange_free(ex);
}

/* A cancellation from the requester: forward it with the responder's id. */
static void on_cancelled(struct peer *from, struct msg *m)
{
	unsigned char key[RPC_KEY_MAX];
	size_t klen = msg_rid_key(m, key);
	struct exchange *ex = klen ? hmap_get(&from->received, key, klen) : NULL;
	if (!ex) {
		log_debug("%s: cancellation of an unknown or finished request ignored", from->name);
		msg_release(m);
		return;
	}
	if (ex->in_sent) {
		struct msg_val rid = { .n = 0 };
		msg_val_set_int(&rid, ex->to_id);
		msg_set_rid(m, &rid);
		msg_val_release(&rid);
		send_notification(ex->chain, from, ex->to, m, "notifications/cancelled", NULL);
	} else {
		msg_release(m);
	}
	if (from->ops->unanswered)
		from->ops->unanswered(from, ex);
	from->chain->stats.cancelled++;
	end_abandoned(ex);
}

/* Moves EX to NEW_ID in its requester's table. */
int chain_rebind_request(struct exchange *ex, const struct msg_val *new_id,
			 const struct msg_val *new_token)
{
	unsigned char key[RPC_KEY_MAX], old[RPC_KEY_MAX];
	struct peer *from = ex->from;
	size_t klen = msg_val_key(new_id, key);
	if (!from || !klen || hmap_get(&from->received, key, klen))
		return -1;
	struct msg_val copy = { .n = 0 }, token = { .n = 0 };
	if (msg_val_set(&copy, msg_val_text(new_id), new_id->n) < 0 ||
	    (new_token && new_token->n &&
	     msg_val_set(&token, msg_val_text(new_token), new_token->n) < 0)) {
		msg_val_release(&copy);
		return -1;
	}
	msg_val_release(&ex->from_token);
	ex->from_token = token;
	if (ex->in_received)
		hmap_del(&from->received, old, msg_val_key(&ex->from_id, old));
	msg_val_release(&ex->from_id);
	ex->from_id = copy;
	ex->key_n = 0;
	if (klen <= sizeof ex->key) {
		buf_copy_short(ex->key, key, klen);
		ex->key_n = (unsigned char)klen;
	}
	ex->in_received = hmap_add(&from->received, key, klen, ex) == 0;
	json_decref(ex->ctx.id);   /* mw_id() makes it again from the new text */
	ex->ctx.id = NULL;
	return 0;
}

/* Progress from the responder: give it back the requester's token. */
static void on_progress(struct peer *from, struct msg *m)
{
	int64_t token;
	struct exchange *ex = NULL;
	if (msg_token_int(m, &token))
		ex = idmap_get(&from->sent, token);
	if (!ex || !ex->from_token.n || !ex->from || msg_set_token(m, &ex->from_token) < 0) {
		log_debug("%s: progress for an unknown token dropped", from->name);
		msg_release(m);
		return;
	}
	send_notification(ex->chain, from, ex->from, m, "notifications/progress", &ex->from_id);
}

/* Delivers a notification to its destination(s); ABOUT: the request of
 * TO whose progress it is, or NULL. */
static void deliver_note(struct chain *c, struct peer *to, struct msg *m,
			 const struct msg_val *about)
{
	struct peer_out o = { .kind = about ? PEER_OUT_PROGRESS : PEER_OUT_NOTIFICATION,
			      .about_id = about };
	if (to) {
		send_to(to, m, &o);
		return;
	}
	for (struct peer *p = c->peers; p; p = p->next)
		if (p->role == PEER_CLIENT && p->ready)
			send_to(p, m, &o);
}

/* A walked notification goes on. */
static void note_walked(struct mw_walk *w, enum mw_verdict v)
{
	struct note *n = container_of(w, struct note, walk);
	if (v == MW_PASS && !msg_empty(&n->m))
		deliver_note(n->chain, n->to, &n->m, n->about.n ? &n->about : NULL);
	msg_release(&n->m);
	msg_val_release(&n->about);
	json_decref(n->ctx.scratch);
	pipeline_unref(n->walk.stage[0]);
	pipeline_unref(n->walk.stage[1]);
	peer_cred_unref(n->cred);
	free(n);
}

/* Runs a notification through C's pipeline to TO (NULL: all C's clients);
 * takes *M. ABOUT (borrowed): progress, the id of TO's request it is of. */
static void send_notification(struct chain *c, struct peer *from, struct peer *to,
			      struct msg *m, const char *method, const struct msg_val *about)
{
	struct peer *be = from->role == PEER_BACKEND ? from : to;
	struct pipeline *own = be && be->role == PEER_BACKEND && pipeline_size(be->pl) ? be->pl : NULL;
	struct pipeline *first = from == be ? (own ? own : c->global_pl) : c->global_pl;
	struct pipeline *second = own ? (from == be ? c->global_pl : own) : NULL;
	if (pipeline_size(first) + pipeline_size(second) == 0) {
		deliver_note(c, to, m, about);   /* no module on its way */
		msg_release(m);
		return;
	}
	size_t mlen = strlen(method);
	struct note *n = calloc(1, sizeof *n + mlen + 1);
	if (!n) {
		msg_release(m);
		return;
	}
	n->chain = c;
	n->from = from;
	n->to = to;
	if (about && msg_val_set(&n->about, msg_val_text(about), about->n) < 0) {
		msg_release(m);
		free(n);
		return;
	}
	msg_move(&n->m, m);
	n->ctx.dir = from->role == PEER_CLIENT ? MW_TO_BACKEND : MW_TO_CLIENT;
	n->ctx.kind = RPC_NOTIFICATION;
	memcpy(n->method, method, mlen + 1);
	n->ctx.method = n->method;
	n->ctx.method_code = mcp_method_of(method, mlen);
	n->ctx.client = principal_of(from, to);
	n->ctx.protocol = version_of(from, to);
	credential_of(&n->ctx, from, &n->cred);
	n->ctx.backend = backend_of(from, to);
	n->ctx.start = ev_now(EV_DEFAULT);
	n->walk.stage[0] = pipeline_ref(first);
	n->walk.stage[1] = pipeline_ref(second);
	n->walk.ctx = &n->ctx;
	n->walk.m = &n->m;
	n->walk.done = note_walked;
	mw_walk_forward(&n->walk);
}

/* True for the notifications a router may act on (they are parsed for it). */
static bool router_note(const struct chain *c, const char *method)
{
	if (!c->router || strncmp(method, "notifications/", 14) != 0)
		return false;
	size_t n = strlen(method);
	return strcmp(method + 14, "initialized") == 0 ||
		strcmp(method + 14, "tasks/status") == 0 ||
		(n > 12 && strcmp(method + n - 12, "list_changed") == 0);
}

/* Hands a notification C's router acts on to it; true when it took it. */
static bool router_took(struct chain *c, struct peer *from, struct msg *m, const char *method)
{
	struct chain_router *r = c->router;
	json_t *t = msg_tree(m);
	if (!t || !r->ops->notification(r, from, t, method))
		return false;
	msg_release(m);
	return true;
}

/*
 * A notification from backend FROM that serves other chains' clients too:
 * each chain's router is offered a copy of its own (it may rewrite it, a
 * task's id, or take it, a list_changed), and what it leaves goes through
 * that chain's pipeline to that chain's clients. Takes *M.
 */
static void note_to_chains(struct peer *from, struct msg *m, const char *method)
{
	json_t *t = msg_tree(m);
	for (size_t i = 0; t && i <= from->nserves; i++) {
		struct chain *c = i ? from->serves[i - 1] : from->chain;
		struct msg copy;
		json_t *dup = json_deep_copy(t);
		if (!dup)
			break;
		msg_init_tree(&copy, dup);
		if (router_note(c, method) && router_took(c, from, &copy, method))
			continue;
		send_notification(c, from, NULL, &copy, method, NULL);
	}
	msg_release(m);
}

/* A notification from a peer. */
/*
 * A notification's METHOD kept where it outlives M's bytes (M may become a
 * tree on its way): in BUF when it fits, else an owned copy in *HEAP (the
 * caller frees it). Never cut short: modules and routing read it whole.
 */
static const char *note_method(const char *method, char buf[static 64], char **heap)
{
	size_t n = strlen(method);
	*heap = NULL;
	if (n < 64)
		return memcpy(buf, method, n + 1);
	*heap = strdup(method);
	return *heap ? *heap : "";
}

static void on_notification_named(struct peer *from, struct msg *m, const char *name);

static void on_notification(struct peer *from, struct msg *m, const char *method)
{
	char buf[64], *heap;
	on_notification_named(from, m, note_method(method, buf, &heap));
	free(heap);
}

static void on_notification_named(struct peer *from, struct msg *m, const char *name)
{
	if (strcmp(name, "notifications/cancelled") == 0) {
		on_cancelled(from, m);
		return;
	}
	if (strcmp(name, "notifications/progress") == 0) {
		on_progress(from, m);
		return;
	}
	if (from->nserves) {
		note_to_chains(from, m, name);
		return;
	}
	if (router_note(from->chain, name) && router_took(from->chain, from, m, name))
		return;
	struct peer *to = NULL;
	if (from->role == PEER_CLIENT) {
		int code;
		char why[300];
		to = route_to_backend(from, m, name, &code, why, sizeof why);
		if (!to || !to->ready) {
			log_debug("%s: %s dropped: no backend ready", from->name, name);
			msg_release(m);
			return;
		}
	}
	send_notification(from->chain, from, to, m, name, NULL);
}

/* Logs a message's passage at debug level (reads, never changes, M). */
static void trace(struct peer *from, struct msg *m, const struct rpc_info *info)
{
	struct msg_val id = { .n = 0 };
	bool has_id = info->kind != RPC_NOTIFICATION && msg_id_get(m, &id) == 0;
	log_debug("%s -> chain: %s%s%.*s", from->name,
		  info->kind == RPC_RESPONSE ? "response" : info->method,
		  has_id ? " id " : "", has_id ? (int)(id.n > 40 ? 40 : id.n) : 0,
		  has_id ? msg_val_text(&id) : "");
	msg_val_release(&id);
}

/* A message that is not valid JSON-RPC. */
static void on_invalid(struct peer *from, struct msg *m, struct rpc_info *info)
{
	log_warn("%s: invalid message dropped: %s", from->name, info->reason);
	json_t *t = m->tree;
	if (info->id && from->role == PEER_BACKEND && !json_object_get(t, "method")) {
		/* a malformed answer to one of our requests still ends it */
		json_t *err = rpc_errorf(json_incref(info->id), RPC_INTERNAL_ERROR,
			"backend %s sent an invalid response: %s", from->name, info->reason);
		json_decref(info->id);
		msg_release(m);
		struct msg e;
		msg_init_tree(&e, err);
		on_response(from, &e);
		return;
	}
	msg_release(m);
}

/* Entry point for every message a peer sends once it carries traffic. */
void chain_receive_msg(struct peer *from, struct msg *m)
{
	struct rpc_info info;
	enum rpc_kind kind = msg_classify(m, &info);
	if (log_enabled(LOG_DEBUG) && kind != RPC_INVALID)
		trace(from, m, &info);
	switch (kind) {
	case RPC_REQUEST:
		on_request(from, m, info.method);
		break;
	case RPC_NOTIFICATION:
		on_notification(from, m, info.method);
		break;
	case RPC_RESPONSE:
		on_response(from, m);
		break;
	case RPC_INVALID:
		on_invalid(from, m, &info);
		break;
	}
	if (trace_active())
		log_set_trace_id(NULL);   /* set by on_request / on_response for a traced one */
}

/* A line from a peer. */
bool chain_receive_line(struct peer *from, const char *line, size_t len, json_t **err)
{
	struct msg m;
	if (tapped(from))
		wiretap_line(from, WIRETAP_IN, line, len);
	if (msg_init_line(&m, line, len, err) < 0)
		return false;
	from->rx_bytes = len;
	chain_receive_msg(from, &m);
	return true;
}

/* A parsed message from a peer. */
void chain_receive(struct peer *from, json_t *msg)
{
	struct msg m;
	if (tapped(from))
		wiretap_json(from, WIRETAP_IN, msg);
	msg_init_tree(&m, msg);
	chain_receive_msg(from, &m);
}

/* ---- requests and notifications of mcp-chain's own ---- */

/* Ignores the response to a request nobody waits for. */
static void ignore_response(struct exchange *ex, json_t *msg, void *arg)
{
	(void)ex;
	(void)msg;
	(void)arg;
}

/* The exchange of chain C for a request of our own to TO, not sent yet
 * (NULL: no memory). */
static struct exchange *call_new(struct chain *c, struct peer *to, const char *method,
				 void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	struct exchange *ex = exchange_new(c, NULL, method);
	if (!ex)
		return NULL;
	ex->on_response = cb ? cb : ignore_response;
	ex->arg = arg;
	ex->about = NULL;
	ex->ctx.dir = to->role == PEER_BACKEND ? MW_TO_BACKEND : MW_TO_CLIENT;
	ex->ctx.backend = backend_of(NULL, to);
	ex->ctx.client = principal_of(NULL, to);
	ex->ctx.protocol = version_of(NULL, to);
	return ex;
}

/* Sends EX's request (METHOD, PARAMS stolen) to TO, through PL if any. */
static void call_send(struct exchange *ex, struct peer *to, const char *method, json_t *params,
		      struct pipeline *pl)
{
	msg_init_tree(&ex->m, rpc_request(0, method, params));
	ex->routed = true;
	ex->to = to;
	ex->pl[0] = pipeline_ref(pl);
	ex->walk.stage[0] = ex->pl[0];
	ex->walk.done = request_walked;
	walk_forward(ex);
}

/* Sends a request of our own, through TO's pipeline PL if any. */
int chain_call_via(struct peer *to, const char *method, json_t *params,
		   struct pipeline *pl,
		   void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	return chain_call_in(to->chain, to, method, params, pl, cb, arg);
}

/* The same, for a caller of chain C. */
int chain_call_in(struct chain *c, struct peer *to, const char *method, json_t *params,
		  struct pipeline *pl,
		  void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	struct exchange *ex = call_new(c, to, method, cb, arg);
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
	struct msg m;
	char buf[64], *heap;
	const char *method = note_method(json_string_value(json_object_get(msg, "method")) ?: "",
					 buf, &heap);
	msg_init_tree(&m, msg);
	send_notification(from->chain, from, to, &m, method, NULL);
	free(heap);
}

/* ---- what modules ask of the chain ---- */

/* Hands the response of a module's request to the module. */
static void on_ask_response(struct exchange *ex, json_t *msg, void *arg)
{
	struct ask *a = arg;
	for (struct ask **pp = &ex->chain->asks; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	a->cb(msg, a->arg);
	free(a);
}

/* Withdraws the open question asked for ARG in CTX's chain (see middleware.h). */
int mw_ask_withdraw(struct mw_ctx *ctx, void *arg, const char *reason)
{
	struct exchange *ex = ctx ? ctx->ex : NULL;
	for (struct ask *a = ex ? ex->chain->asks : NULL; a; a = a->next)
		if (a->arg == arg)
			return abort_exchange(a->ex, RPC_INTERNAL_ERROR, reason);
	return -1;
}

/* Sends a module's request to the exchange's client. */
int mw_ask_client(struct mw_ctx *ctx, const char *method, json_t *params,
		  void (*cb)(json_t *response, void *arg), void *arg)
{
	struct exchange *ex = ctx->ex;
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
	a->ex = call_new(client->chain, client, method, on_ask_response, a);
	if (!a->ex) {
		free(a);
		json_decref(params);
		json_t *err = rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory");
		cb(err, arg);  /* exactly once, as promised */
		json_decref(err);
		return -1;
	}
	a->ex->about = ex;
	mw_note(ctx, "asked", 0, method);
	if (ctx->walk)
		ctx->walk->noted = 0;   /* the answer decides; it is told then */
	a->next = ex->chain->asks;
	ex->chain->asks = a;
	call_send(a->ex, client, method, params, NULL);  /* may answer (fail) at once */
	return 0;
}

/* Ends an open request with an error and cancels it downstream. */
int mw_abort(struct mw_ctx *ctx, int code, const char *message)
{
	return abort_exchange(ctx->ex, code, message);
}

/* Answers EX with an error now and cancels it at its responder. */
static int abort_exchange(struct exchange *ex, int code, const char *message)
{
	if (!ex || ex->walking || !ex->in_sent)
		return -1;
	ev_timer_stop(EV_DEFAULT, &ex->timer);
	send_cancel(ex->to, ex->to_id, message);
	idmap_del(&ex->to->sent, ex->to_id);
	ex->in_sent = false;
	answer_error(ex, rpc_error(NULL, code, message, NULL));
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
		if (ex->in_sent)
			send_cancel(ex->to, ex->to_id, reason);
		end_abandoned(ex);
	}
	free(v);
	v = idmap_drain(&p->sent, &n);
	for (size_t i = 0; v && i < n; i++) {
		struct exchange *ex = v[i];
		ex->in_sent = false;
		ex->chain->stats.responder_gone++;
		answer_error(ex, rpc_errorf(NULL, RPC_BACKEND_GONE, "%s: %s", p->name, reason));
	}
	free(v);
	p->ready = false;
	chain_congestion(p, false);
}
