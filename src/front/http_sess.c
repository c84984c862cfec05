/*
 * http_sess.c - the HTTP front's sessions (struct hsess): one struct
 * session each, made with its chain and ended (by DELETE, idleness, the
 * front's stop, or to make room under listen.maxSessions*), and the
 * routing of what each session writes to the stream that waits for it:
 * a response to its request's stream, progress and a server's request to
 * the SSE stream of the call they belong to, the rest to the GET stream.
 */
#include <ev.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "era.h"
#include "hmap.h"
#include "http_conn.h"
#include "http_int.h"
#include "http_ring.h"
#include "http_routes.h"
#include "http_sid.h"
#include "log.h"
#include "msg.h"
#include "observe.h"
#include "peer.h"
#include "trace.h"
#include "rpc.h"
#include "session.h"

/* ---- routing what a session writes ---- */

/* Counts each answer of a batch's array ARR to R's requests (and takes its
 * id out of the routes: the array answers them all at once). */
static void count_batch(struct hreq *r, json_t *arr)
{
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e) {
		json_t *id = json_object_get(e, "id");
		char *s = id ? json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		struct msg_val v = { .n = 0 };
		if (s && msg_val_set(&v, s, strlen(s)) == 0 &&
		    http_routes_drop_id(&r->sess->routes, &v, r)) {
			json_t *res = json_object_get(e, "result");
			http_metrics_count_answer(r, &v, json_object_get(e, "error") ? 1 :
				     json_is_true(json_object_get(res, "isError")) ? 2 : 0);
		}
		msg_val_release(&v);
		free(s);
	}
}

/* The stream waiting for a batch's answers: the first of its ids that
 * routes (an invalid element's error may have a null id); its id into V. */
static struct hreq *batch_stream(struct hsess *hs, json_t *arr, struct msg_val *v)
{
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e) {
		json_t *id = json_object_get(e, "id");
		char *s = id ? json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		msg_val_release(v);
		if (s)
			msg_val_set(v, s, strlen(s));
		free(s);
		struct hreq *r = v->n ? http_routes_peek_id(&hs->routes, v) : NULL;
		if (r)
			return r;
	}
	return NULL;
}

/*
 * What the session hands the front, as one line: its bytes when they are
 * one piece (no copy), else gathered into the front's scratch line, or
 * the tree written out once. NULL when memory fails.
 */
static const char *out_line(struct http_front *f, const struct session_out *o, size_t *n)
{
	if (o->iov && o->n == 1) {
		*n = o->iov[0].iov_len;
		return o->iov[0].iov_base;
	}
	buf_reset(&f->line);
	if (o->iov) {
		for (int i = 0; i < o->n; i++)
			if (buf_append(&f->line, o->iov[i].iov_base, o->iov[i].iov_len) < 0)
				return NULL;
	} else if (json_dump_callback(o->tree, buf_dump_cb, &f->line, JSON_COMPACT) < 0) {
		return NULL;
	}
	*n = buf_pending(&f->line);
	return f->line.data ? f->line.data : "";
}

/*
 * Routes what the session wrote, by what the session says it is (no
 * reading it again): a response to the stream waiting for its id (and an
 * answer to the POST being handed in, when it had no usable id); progress
 * to the SSE stream of its request; a server's request to the SSE stream
 * of the client's call it belongs to, where the transport says a server
 * sends it (a client need not open a GET stream); everything else to the
 * GET stream.
 */
static void route_out(struct hsess *hs, const struct session_out *o)
{
	struct http_front *f = hs->f;
	struct hreq *r = NULL;
	struct msg_val v = { .n = 0 };
	const struct msg_val *id = o->about;
	size_t n = 0;
	/* as one line only where one is needed: the pieces go to a stream as
	 * they are (http_stream_send_iov) */
	bool pieces = o->iov && o->n > 1 && !hs->legacy;
	const char *line = pieces ? NULL : out_line(f, o, &n);
	if (!line && !pieces)
		goto oom;
	if (hs->legacy) {
		http_legacy_route(hs, line, n);
		return;
	}
	switch (o->kind) {
	case SESSION_OUT_BATCH:
		r = batch_stream(hs, o->tree, &v);
		if (r) {
			count_batch(r, o->tree);
			r->pending = 1;  /* the whole batch answers it at once */
		}
		id = &v;
		break;
	case SESSION_OUT_RESPONSE:
		r = id ? http_routes_peek_id(&hs->routes, id) : NULL;
		if (!r && o->route && !((struct hreq *)o->route)->queued) {
			/* no request of it routes: an answer to the body being handed in (400) */
			struct hreq *in = o->route;
			if (!line && !(line = out_line(f, o, &n)))
				goto oom;
			buf_append(&in->err, line, n);
			http_stream_finish(in);
			return;
		}
		if (r)
			http_metrics_count_answer(r, id, o->outcome);
		if (r && r->lists_tools) {   /* the marks a 2026-07-28 call's headers follow */
			const char *text = o->tree || line ? line : out_line(f, o, &n);
			json_t *t = o->tree ? json_incref(o->tree) : text ? json_loadb(text, n, 0, NULL) : NULL;
			http_probe_learn(f, json_object_get(t, "result"));
			json_decref(t);
		}
		break;
	case SESSION_OUT_PROGRESS:
		r = id ? http_routes_peek_id(&hs->routes, id) : NULL;
		if (!r) {
			log_debug("http: session #%u: progress for a request whose POST is gone was "
				  "dropped", hs->serial);
			return;
		}
		if (!r->sse)
			r = NULL;  /* a JSON body has no room for it: the GET stream */
		break;
	case SESSION_OUT_REQUEST:
		r = id && !hs->stateless ? http_routes_peek_id(&hs->routes, id) : NULL;
		if (r && !r->sse)
			r = NULL;  /* a JSON body carries its answer only: the GET stream */
		break;
	case SESSION_OUT_NOTIFICATION:
		break;
	}
	bool response = o->kind == SESSION_OUT_RESPONSE || o->kind == SESSION_OUT_BATCH;
	if (response && !r) {
		log_debug("http: session #%u: a response nobody waits for was dropped", hs->serial);
	} else if (r) {
		if (response)
			http_routes_drop_id(&hs->routes, id, r);
		http_stream_defer_note(r, o);
		if (o->iov)
			http_stream_send_iov(r, o->iov, o->n);
		else
			http_stream_send(r, line, n);
		if (response && r->sess && --r->pending == 0)
			http_stream_finish(r);
	} else if (line || (line = out_line(f, o, &n))) {
		http_stream_to_get(hs, line, n);
	} else {
		goto oom;
	}
	msg_val_release(&v);
	return;
oom:
	msg_val_release(&v);
	log_error("http: session #%u: out of memory for a message", hs->serial);
}

/* The session's write function. */
static int sess_write(void *arg, const struct session_out *o)
{
	struct hsess *hs = arg;
	if (hs == hs->f->probe)
		return 0;   /* the probe's own call is answered to its callback */
	route_out(hs, o);
	return 0;
}

/*
 * The session's client cancelled a request: nothing will answer it, so its
 * stream waits for it no more, and ends (properly) once it waits for
 * nothing; it no longer counts as open (http_front_busy, the drain).
 */
static void sess_unanswered(void *arg, const struct msg_val *id)
{
	struct hsess *hs = arg;
	struct hreq *r = http_routes_peek_id(&hs->routes, id);
	if (!r || !http_routes_drop_id(&hs->routes, id, r))
		return;
	if (r->pending > 0 && --r->pending == 0)
		http_stream_finish(r);
}

/* ---- a session's life ---- */

/* Tells the observers that HS WHAT ("opened", "closed": REASON). A
 * 2026-07-28 call's session is not told: it lives as long as its call. */
static void sess_note(struct hsess *hs, const char *what, const char *reason)
{
	char source[32];
	snprintf(source, sizeof source, "session #%u", hs->serial);
	struct obs_event e = {
		.kind = OBS_SESSION, .what = what, .source = source,
		.client = hs->s ? session_peer(hs->s)->principal : NULL, .detail = reason,
	};
	observe_note(&e);
}

/*
 * R's session ends (REASON) with requests of R still open: each gets an
 * error answer (one array for a batch), then R ends properly. A client cut
 * off instead would wait for its own timeout, or try to resume a stream
 * of a session that is gone.
 */
static void stream_fail(struct hreq *r, const char *reason)
{
	json_t *all = json_array();
	for (size_t i = 0; all && i < r->nids; i++) {
		if (http_routes_peek_id(&r->sess->routes, &r->ids[i]) != r)
			continue;   /* answered or cancelled already */
		json_t *id = json_loadb(msg_val_text(&r->ids[i]), r->ids[i].n, JSON_DECODE_ANY, NULL);
		json_array_append_new(all, rpc_errorf(id, RPC_BACKEND_GONE,
			"the session ended before this request was answered (%s)", reason));
		json_decref(id);
	}
	json_t *answer = r->nids > 1 ? all : json_array_get(all, 0);
	char *line = answer && json_array_size(all) > 0 ? json_dumps(answer, JSON_COMPACT) : NULL;
	if (line)
		http_stream_send(r, line, strlen(line));
	free(line);
	json_decref(all);
	http_stream_finish(r);
}

/* Ends HS: its streams end, its requests are cancelled; logs REASON. */
void http_sess_end(struct hsess *hs, const char *reason)
{
	struct http_front *f = hs->f;
	if (f->probe == hs)
		http_probe_end(f, reason);
	else if (!hs->stateless)
		sess_note(hs, "closed", reason);
	hmap_del(&f->sessions, hs->sid, hs->sid_len);
	http_cluster_forget(hs);
	if (hs->instance)
		hmap_del(&f->instances, &hs->instance, sizeof hs->instance);
	ev_timer_stop(EV_DEFAULT, &hs->idle);
	while (hs->streams) {
		struct hreq *r = hs->streams;
		if (r == hs->get)
			http_stream_finish(r);         /* an orderly end of the GET stream */
		else if (r->pending > 0)
			stream_fail(r, reason);   /* answered, then ended; cancelled at the backend */
		else
			http_stream_abort(r, NULL);    /* session_close cancels what is open */
	}
	while (hs->kept)   /* ended streams kept for a resume */
		http_stream_kept_remove(hs->kept);
	ev_timer_stop(EV_DEFAULT, &hs->reap);
	session_close(hs->s, reason);
	session_free(hs->s);
	if (f->chain_release)
		f->chain_release(f->chain_arg, hs->chain, hs->serial);
	http_routes_release(&hs->routes);
	http_stream_held_clear(hs);
	http_ring_release(&hs->ring);
	if (hs->stateless)
		log_debug("http: stateless #%u ended (%s)", hs->serial, reason);
	else
		log_info("http: session #%u ended (%s)", hs->serial, reason);
	free(hs->caps);
	free(hs->sid);
	free(hs);
}

/* A session idle for too long expires (not while a stream is open). */
static void on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hsess *hs = w->data;
	(void)loop;
	(void)revents;
	if (hs->streams || (hs->stateless && session_busy(hs->s))) {
		ev_timer_again(EV_DEFAULT, w);
		return;
	}
	/* a backend's requests no call carried wait for the next call of a
	 * client like this one, at most inputTimeoutMs (http_stateless_post) */
	double ttl = hs->f->input_ttl > 0 ? hs->f->input_ttl : 300.;
	if (hs->stateless && session_holds_requests(hs->s) && ev_now(EV_DEFAULT) - hs->used < ttl) {
		ev_timer_again(EV_DEFAULT, w);
		return;
	}
	http_sess_end(hs, hs->stateless ? "its call ended" : "expired after being idle");
}

/*
 * The capabilities a 2026-07-28 call's PARAMS (borrowed) declare, as the
 * canonical JSON text that names the backends such calls share (owned by
 * the caller), or NULL when out of memory.
 */
char *http_sess_caps_key(json_t *params)
{
	json_t *c = era_meta(params, ERA_META_CLIENT_CAPS);
	json_t *none = json_is_object(c) ? NULL : json_object();
	char *key = json_dumps(none ? none : c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(none);
	return key;
}

/*
 * A new session; CAPS (borrowed): for a 2026-07-28 client's call, the
 * capabilities it declares (http_sess_caps_key), which choose the backends it may
 * share; NULL for a session of the handshake era. NULL when out of memory
 * or randomness, or when its chain cannot be made (the reason in WHY, N
 * bytes).
 */
struct hsess *http_sess_new(struct http_front *f, const char *caps, const unsigned char *subject,
			    const char *sid, char *why, size_t n)
{
	struct hsess *hs = calloc(1, sizeof *hs);
	char name[32], rnd[HTTP_SID_LEN + 1];
	if (!hs || (!sid && http_sid_new(rnd) < 0) || !(hs->sid = strdup(sid ? sid : rnd))) {
		free(hs);
		log_error("http: cannot make a session id");
		return NULL;
	}
	hs->sid_len = strlen(hs->sid);
	hs->f = f;
	hs->serial = ++f->serial;
	hs->used = hs->born = ev_now(EV_DEFAULT);
	hs->held_tail = &hs->held;
	http_ring_init(&hs->ring);
	if (caps && !(hs->caps = strdup(caps))) {
		free(hs->sid);
		free(hs);
		return NULL;
	}
	hs->chain = f->chain_make ? f->chain_make(f->chain_arg, hs->serial, caps, subject,
							why, n) : f->chain;
	if (!hs->chain) {
		free(hs->caps);
		free(hs->sid);
		free(hs);
		return NULL;
	}
	http_routes_init(&hs->routes);
	snprintf(name, sizeof name, "http#%u", hs->serial);
	hs->s = session_new(hs->chain, name, sess_write, hs);
	if (!hs->s || hmap_put(&f->sessions, hs->sid, hs->sid_len, hs) < 0) {
		session_free(hs->s);
		if (f->chain_release)
			f->chain_release(f->chain_arg, hs->chain, hs->serial);
		free(hs->caps);
		free(hs->sid);
		free(hs);
		return NULL;
	}
	session_set_unanswered(hs->s, sess_unanswered);
	if (trace_active()) {
		/* mcp.session.id: the id is a secret, so a digest that names it */
		unsigned char d[SHA256_DIGEST_LENGTH];
		char tag[33];
		SHA256((const unsigned char *)hs->sid, hs->sid_len, d);
		trace_hex(d, 16, tag);
		session_set_trace_tags(hs->s, "tcp", tag);
	} else {
		session_set_trace_tags(hs->s, "tcp", NULL);
	}
	session_offer_stateless(hs->s, f->offer_stateless);
	ev_init(&hs->idle, on_idle);
	hs->idle.repeat = f->session_idle;
	hs->idle.data = hs;
	ev_timer_again(EV_DEFAULT, &hs->idle);
	if (caps) {   /* a 2026-07-28 call's: started and ended at the same level */
		log_debug("http: stateless #%u started", hs->serial);
	} else {
		log_info("http: session #%u started", hs->serial);
		sess_note(hs, "opened", NULL);
	}
	return hs;
}

/* ---- the session caps (listen.maxSessions, ...PerClient, ...PerPrincipal) ---- */

/* Who a new session would belong to, and what the caps find for it. */
struct cap_scan {
	const char *peer;
	const unsigned char *cred;   /* NULL: no bearer token */
	size_t all, same_peer, same_cred;
	struct hsess *idlest, *idlest_peer, *idlest_cred;   /* may make room */
	bool own_chains_only;        /* only sessions with a chain of their own */
	struct hsess *idlest_own;
};

/* True when HS may be ended to make room: a handshake-era session with no
 * request open and no stream (a GET stream, a POST still answering or
 * waiting for a resume). */
static bool sess_evictable(const struct hsess *hs)
{
	return !hs->stateless && !hs->streams && !hs->kept && hs != hs->f->probe &&
	       !session_busy(hs->s);
}

/* Keeps the idler of *BEST and HS in *BEST. */
static void keep_idler(struct hsess **best, struct hsess *hs)
{
	if (!*best || hs->used < (*best)->used)
		*best = hs;
}

/* Counts one session for a cap_scan (a hmap_each callback). */
static void cap_count(void *value, void *arg)
{
	struct hsess *hs = value;
	struct cap_scan *cs = arg;
	if (hs->stateless)
		return;   /* a call's own, ended with it */
	bool peer = strcmp(hs->peer, cs->peer) == 0;
	bool cred = cs->cred && hs->has_cred && memcmp(hs->cred, cs->cred, 32) == 0;
	cs->all++;
	cs->same_peer += peer;
	cs->same_cred += cred;
	if (!sess_evictable(hs))
		return;
	keep_idler(&cs->idlest, hs);
	if (peer)
		keep_idler(&cs->idlest_peer, hs);
	if (cred)
		keep_idler(&cs->idlest_cred, hs);
	if (hs->chain != hs->f->chain)
		keep_idler(&cs->idlest_own, hs);
}

/* Ends HS to make room for a new session (WHAT: the cap it made room under). */
static void sess_evict(struct hsess *hs, const char *what)
{
	log_info("http: session #%u is ended to make room for a new one (%s; it was the idlest "
		 "without a request or stream open)", hs->serial, what);
	http_sess_end(hs, "ended to make room for a new session");
}

/*
 * Room for a new session of the client of C under each cap: the idlest
 * session of the group at a cap that has nothing open is ended first.
 * NULL, or why there is no room (the client gets 503).
 */
static const char *sess_make_room(struct http_front *f, struct hc_conn *c)
{
	size_t n = 0;
	unsigned char key[32];
	const char *tok = http_auth_bearer(c, &n);
	const struct hreq *r = hc_ctx(c);
	struct cap_scan cs = { .peer = hc_peer(c) };
	if (r && r->has_subject)   /* counted per person, whatever token they hold */
		cs.cred = r->subject;
	else if (tok && http_auth_cred_key(tok, n, key) == 0)
		cs.cred = key;
	hmap_each(&f->sessions, cap_count, &cs);
	if (cs.same_peer >= f->max_per_client) {
		if (!cs.idlest_peer)
			return "Service Unavailable: too many sessions from this client address, each "
			       "with a request or stream open (listen.maxSessionsPerClient)";
		sess_evict(cs.idlest_peer, "listen.maxSessionsPerClient");
		return NULL;
	}
	if (cs.cred && cs.same_cred >= f->max_per_principal) {
		if (!cs.idlest_cred)
			return "Service Unavailable: too many sessions with this bearer token, each "
			       "with a request or stream open (listen.maxSessionsPerPrincipal)";
		sess_evict(cs.idlest_cred, "listen.maxSessionsPerPrincipal");
		return NULL;
	}
	if (cs.all >= f->max_sessions) {
		if (!cs.idlest)
			return "Service Unavailable: too many sessions, each with a request or stream "
			       "open (listen.maxSessions)";
		sess_evict(cs.idlest, "listen.maxSessions");
	}
	return NULL;
}

/* A new handshake-era session for the client of C (see http_sess_new), room
 * made under the caps first; NULL with WHY (N bytes). */
struct hsess *http_sess_open(struct http_front *f, struct hc_conn *c, const char *sid,
			     char *why, size_t n)
{
	const char *full = sess_make_room(f, c);
	if (full) {
		snprintf(why, n, "%s", full);
		return NULL;
	}
	unsigned char who[32];
	bool known = http_auth_subject(hc_ctx(c), who);
	struct hsess *hs = http_sess_new(f, NULL, known ? who : NULL, sid, why, n);
	if (hs)
		snprintf(hs->peer, sizeof hs->peer, "%s", hc_peer(c));
	return hs;
}

/* Ends the idlest session with a chain of its own that has nothing open. */
bool http_front_make_room(struct http_front *f)
{
	struct cap_scan cs = { .peer = "" };
	hmap_each(&f->sessions, cap_count, &cs);
	if (!cs.idlest_own)
		return false;
	sess_evict(cs.idlest_own, "listen.maxScopedSessions");
	return true;
}

/* Adds R to HS's open streams. */
void http_sess_add_stream(struct hsess *hs, struct hreq *r)
{
	r->sess = hs;
	r->next = hs->streams;
	hs->streams = r;
}

/* True when HS's POST streams may be resumed: a Streamable HTTP session
 * of the handshake era (2026-07-28 has no resumption), resumeGraceMs > 0. */
bool http_sess_resumable(const struct hsess *hs)
{
	return hs->f->resume_grace > 0 && !hs->stateless && !hs->legacy;
}

/* ---- what the live page lists ---- */

struct each_arg {
	void (*fn)(void *arg, const struct http_session_info *i);
	void *arg;
	double now;
};

/* Describes one session to the caller's function (a hmap_each callback). */
static void each_one(void *value, void *arg)
{
	struct hsess *hs = value;
	struct each_arg *ea = arg;
	if (hs == hs->f->probe)
		return;   /* the front's own */
	struct http_session_info i = {
		.serial = hs->serial, .client = session_peer(hs->s)->principal,
		.subject = hs->has_cred ? hs->cred : NULL, .version = session_version(hs->s),
		.transport = hs->legacy ? "sse" : hs->stateless ? "stateless" : "streamable",
		.peer = hs->peer, .age = ea->now - hs->born, .idle = ea->now - hs->used,
	};
	snprintf(i.sid, sizeof i.sid, "%.8s", hs->sid);
	for (struct hreq *r = hs->streams; r; r = r->next)
		i.open += r->pending;
	if (hs->legacy && session_busy(hs->s))
		i.open++;
	ea->fn(ea->arg, &i);
}

/* Each session as the live page lists it (not the front's own probe). */
void http_front_each_session(struct http_front *f,
			     void (*fn)(void *arg, const struct http_session_info *i), void *arg)
{
	struct each_arg ea = { fn, arg, ev_now(EV_DEFAULT) };
	hmap_each(&f->sessions, each_one, &ea);
}
