/*
 * be_http.c - the HTTP upstream transport: its operations, and the
 * Streamable HTTP generation (protocol revisions 2025-03-26 to 2025-11-25);
 * legacy HTTP+SSE (2024-11-05) is in be_sse.c, the shared plumbing in
 * http_xfer.c.
 *
 * Every message is POSTed to the MCP endpoint; the reply is 202 Accepted
 * (notifications and responses), one JSON body, or an SSE stream carrying
 * the server's requests and notifications for that request before its
 * response. The session id of the initialize reply and, after it, the
 * protocol version the backend negotiated go on every later request.
 * After notifications/initialized a GET stream is kept open for messages
 * the server starts (405: none offered), resumed with Last-Event-ID. A
 * POST stream that ends before its response, after an event id, is
 * resumed the same way. A 404 to a request with a session means the
 * session is gone: a new one is initialized with the same parameters and
 * the message is sent again, once. At stop the session is DELETEd. A
 * 2026-07-28 tools/call refused for its Mcp-Param headers is sent again
 * after a fresh tool list (http_relist.c).
 */
#include "http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rpc.h"

#define GET_MAX_FAILS 5      /* GET stream attempts in a row without an event */
#define GET_MAX_DELAY 30.0   /* seconds between them at most */
#define RESUME_MAX 3         /* resumptions of one reply without progress */
#define REINIT_MAX 3         /* new sessions in a row without a success */
#define DELETE_MAX 5.0       /* seconds the DELETE at stop may take */

static void post_done(struct hx *x, CURLcode rc);
static void get_open(struct be_http *s, double delay);

/* The transport state of B. */
static struct be_http *T(struct backend *b)
{
	return backend_transport(b);
}

/* Starts X after DELAY unless adding headers failed (HDR_RC < 0). */
static int start_checked(struct hx *x, int hdr_rc, double delay)
{
	if (hdr_rc < 0) {
		x->msg = NULL;
		hx_abort(x);
		return -1;
	}
	return hx_start(x, delay);
}

/* POSTs O to the MCP endpoint. */
static int st_post(struct be_http *s, struct out *o)
{
	struct hx *x = hx_new_post(s, s->url, o, post_done);
	if (!x)
		return -1;
	bool fresh = o->is_init || o->kind == OUT_REINIT;  /* starts a session */
	x->gen = s->gen;
	if (o->version)
		return start_checked(x, hx_stateless_headers(x), 0);
	return start_checked(x, fresh ? 0 : hx_session_headers(x, true), 0);
}

/* Messages may go out unless a new session is being set up. */
static bool st_can_post(struct be_http *s)
{
	return s->reinit == REINIT_NONE && http_auth_ready(s);
}

/* Keeps the protocol version of an initialize RESULT. */
static void set_proto(struct be_http *s, json_t *result)
{
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	if (!v)
		return;
	free(s->proto);
	s->proto = strdup(v);
	log_debug("%s: protocol version %s", s->name, v);
}

/* Our new session is initialized: say so, then let messages go. */
static void reinit_notify(struct be_http *s)
{
	json_t *n = rpc_notification("notifications/initialized", NULL);
	struct out *o = n ? out_new(n, OUT_REINIT_DONE) : NULL;
	json_decref(n);
	s->reinit = REINIT_NOTIFY;
	if (!o || st_post(s, o) < 0) {
		out_free(o);
		http_down(s, "the session expired and a new one could not be started");
	}
}

/* Before delivery: the protocol version, and answers to our own initialize
 * and tools/list. */
static bool st_intercept(struct be_http *s, json_t *msg)
{
	if (json_object_get(msg, "method"))
		return false;
	if (relist_intercept(s, msg))
		return true;
	json_t *id = json_object_get(msg, "id");
	json_t *result = json_object_get(msg, "result");
	if (s->init_id && json_equal(id, s->init_id)) {
		set_proto(s, result);
		json_decref(s->init_id);
		s->init_id = NULL;
		return false;
	}
	if (!s->reinit_id || !json_equal(id, s->reinit_id))
		return false;
	json_decref(s->reinit_id);
	s->reinit_id = NULL;
	if (!result) {
		http_down(s, "the session expired and the server refused a new one");
		return true;
	}
	set_proto(s, result);
	reinit_notify(s);
	return true;
}

static void reinit_start(struct be_http *s);

/* Starts a new session with the parameters of the first initialize. */
static void reinit_begin(struct be_http *s)
{
	if (!s->init_params || ++s->reinits > REINIT_MAX) {
		http_down(s, s->init_params ? "the session keeps expiring (HTTP 404)" :
			  "the session expired (HTTP 404)");
		return;
	}
	log_warn("%s: the session expired (HTTP 404); starting a new one", s->name);
	reinit_start(s);
}

void http_renew_session(struct be_http *s)
{
	if (s->mode != &http_streamable || !s->init_params) {
		/* the legacy transport's stream, or not initialized yet: a restart
		 * (or the chain's own initialize) does it */
		s->signing_in = false;
		if (s->init_params)
			http_down(s, "its principal signed in: reconnecting");
		return;
	}
	reinit_start(s);
}

/* Sends our own initialize for a new session (messages wait meanwhile). */
static void reinit_start(struct be_http *s)
{
	static unsigned counter;
	char id[48];
	free(s->session);
	s->session = NULL;
	s->gen++;
	if (s->get)
		hx_abort(s->get);
	free(s->get_last_id);
	s->get_last_id = NULL;
	s->get_fails = 0;
	snprintf(id, sizeof id, "mcp-chain-reinit-%u", ++counter);
	json_t *req = json_pack("{s:s,s:s,s:s,s:O}", "jsonrpc", "2.0", "id", id,
				"method", "initialize", "params", s->init_params);
	struct out *o = req ? out_new(req, OUT_REINIT) : NULL;
	json_decref(req);
	json_decref(s->reinit_id);
	s->reinit_id = json_string(id);
	s->reinit = REINIT_WAIT;
	if (!o || st_post(s, o) < 0) {
		out_free(o);
		http_down(s, "the session expired and a new one could not be started");
	}
}

/* A request sent in session generation GEN got 404: renew, retry O once. */
static void session_lost(struct be_http *s, struct out *o, unsigned gen)
{
	if (o && o->retried) {
		http_fail(s, o, RPC_BACKEND_GONE, 404, "the session expired again (HTTP 404)");
		out_free(o);
		o = NULL;
	}
	if (o) {
		o->retried = true;
		http_hold(s, o);
	}
	if (gen != s->gen || s->reinit != REINIT_NONE) {
		http_wake(s);  /* renewed already, or being renewed */
		return;
	}
	reinit_begin(s);
}

/* A POST of our own (a new session's) ended. */
static void reinit_step_done(struct be_http *s, struct hx *x, CURLcode rc)
{
	char why[300], m[200];
	bool ok = rc == CURLE_OK && x->status / 100 == 2;
	if (ok && !x->sse)
		hx_push_body(x);  /* the flush reads our initialize result */
	if (ok && (x->msg->kind == OUT_REINIT_DONE || x->got_response)) {
		if (x->msg->kind == OUT_REINIT)
			return;  /* the flush takes the result on */
		s->reinit = REINIT_NONE;
		log_info("%s: new session started", s->name);
		http_wake(s);
		get_open(s, 0);
		if (s->signing_in)
			http_auth_signed_in(s);
		return;
	}
	if (rc != CURLE_OK)
		snprintf(m, sizeof m, "%s", hx_error(x, rc));
	else if (!ok)
		snprintf(m, sizeof m, "HTTP %ld", x->status);
	else
		snprintf(m, sizeof m, "no initialize result");
	snprintf(why, sizeof why, "the session expired and a new one could not be started: %s", m);
	http_down(s, why);
}

static void resume_done(struct hx *x, CURLcode rc);

/* Resumes the reply stream of O's request after DELAY, from event LAST. */
static void resume(struct be_http *s, struct out *o, const char *last, double delay)
{
	struct hx *x = hx_new(s, HX_RESUME, s->url, o, resume_done);
	int rc = -1;
	if (x) {
		x->start_id = strdup(last);
		rc = hx_header(x, "Accept", "text/event-stream");
		if (rc == 0)
			rc = hx_header(x, "Last-Event-ID", last);
		if (rc == 0)
			rc = hx_session_headers(x, true);
		rc = start_checked(x, rc, delay);
	}
	if (rc < 0) {
		http_fail(s, o, RPC_BACKEND_GONE, 0, "cannot resume the reply stream");
		out_free(o);
	}
}

/* True when X's stream moved on: an event, or a new event id. */
static bool made_progress(const struct hx *x)
{
	const char *last = x->parser.id;
	return x->dispatched || (last && (!x->start_id || strcmp(last, x->start_id) != 0));
}

/* A reply stream ended (RC: how) before or after the response. */
static void stream_ended(struct be_http *s, struct hx *x, CURLcode rc)
{
	struct out *o = x->msg;
	if (!o->id || x->got_response) {
		if (o->is_initialized)
			get_open(s, 0);
		return;
	}
	if (made_progress(x))
		o->resumes = 0;
	if (x->parser.retry >= 0)
		o->retry = x->parser.retry;
	const char *last = x->parser.id;
	if (last && o->resumes < RESUME_MAX) {
		double delay = o->retry >= 0 ? o->retry / 1000.0 : 0.1 * (1u << o->resumes);
		o->resumes++;
		log_debug("%s: reply stream ended early; resuming after event %s", s->name, last);
		resume(s, hx_take_msg(x), last, delay);
		return;
	}
	http_fail(s, o, RPC_BACKEND_GONE, x->status,
		  "the server ended the reply stream before the response%s%s",
		  rc != CURLE_OK ? ": " : "", rc != CURLE_OK ? hx_error(x, rc) : "");
}

/* A resumed reply stream ended. */
static void resume_done(struct hx *x, CURLcode rc)
{
	struct be_http *s = x->s;
	if (s->down || s->stopping)
		return;
	if (x->status / 100 == 2 && x->sse && !x->refused) {
		stream_ended(s, x, rc);
		return;
	}
	char m[CURL_ERROR_SIZE + 40];
	if (x->status)
		snprintf(m, sizeof m, "HTTP %ld%s", x->status, x->sse ? "" : ", not an event stream");
	else
		snprintf(m, sizeof m, "%s", hx_error(x, rc));
	http_fail(s, x->msg, RPC_BACKEND_GONE, x->status,
		  "the reply stream broke and resuming it failed: %s", m);
	if (rc == CURLE_OK && x->status == 404 && x->sent_session)
		session_lost(s, NULL, x->gen);
}

/* A POST got an error status, or no reply at all. */
static void post_failed(struct be_http *s, struct hx *x, CURLcode rc)
{
	struct out *o = x->msg;
	char m[200], why[400];
	json_t *err;
	if (rc == CURLE_OK && o->id && !o->is_init && (err = hx_reply_error(x, o->id))) {
		if (relist_wanted(o, x, err)) {
			struct out *call = hx_take_msg(x);
			if (relist_begin(s, call, err) == 0)
				return;
			out_free(call);   /* (o, not read below) */
		}
		/* the server's own JSON-RPC error (a 2026-07-28 server's 404 for
		 * -32601, 400 for -32602...): the client gets it as it was said */
		log_warn("%s: HTTP %ld from %s: error %" JSON_INTEGER_FORMAT ": %s", s->name,
			 x->status, s->url,
			 json_integer_value(json_object_get(json_object_get(err, "error"), "code")),
			 hx_reply_message(x, m, sizeof m) ?: "");
		http_push(s, err, 0);
		return;
	}
	if (rc == CURLE_OK) {
		const char *said = hx_reply_message(x, m, sizeof m);
		bool legacy_hint = o->is_init && (x->status == 400 || x->status == 404 || x->status == 405);
		http_fail(s, o, RPC_BACKEND_GONE, x->status, "HTTP %ld from %s%s%s%s", x->status, s->url,
			  said ? ": " : "", said ? said : "",
			  legacy_hint ? " (an HTTP+SSE server? use \"type\": \"sse\")" : "");
	} else if (x->oversize) {
		http_fail(s, o, RPC_INTERNAL_ERROR, 0,
			  "the backend's response exceeds maxMessageBytes (%zu)", s->max);
	} else if (o->is_init) {
		snprintf(why, sizeof why, "cannot reach %s: %s", s->url, hx_error(x, rc));
		http_down(s, why);
	} else {
		http_fail(s, o, RPC_BACKEND_GONE, x->status, "HTTP request to %s failed: %s",
			  s->url, hx_error(x, rc));
	}
}

/* A POST got a 2xx reply. */
static void post_ok(struct be_http *s, struct hx *x, CURLcode rc)
{
	struct out *o = x->msg;
	s->reinits = 0;
	if (x->sse) {
		stream_ended(s, x, rc);
		return;
	}
	hx_push_body(x);
	if (o->id && !x->got_response)
		http_fail(s, o, RPC_BACKEND_GONE, x->status, "HTTP %ld reply without a response",
			  x->status);
	if (o->is_initialized)
		get_open(s, 0);
}

/* A POST ended. */
static void post_done(struct hx *x, CURLcode rc)
{
	struct be_http *s = x->s;
	if (s->down || s->stopping)
		return;
	if (x->msg->kind == OUT_CHAIN && rc == CURLE_OK && x->status == 404 && x->sent_session) {
		session_lost(s, hx_take_msg(x), x->gen);
		return;
	}
	if (rc == CURLE_OK && (x->status == 401 || x->status == 403) && http_auth_refused(s, x))
		return;
	if (x->msg->kind == OUT_RELIST)
		relist_step_done(s, x, rc);
	else if (x->msg->kind != OUT_CHAIN)
		reinit_step_done(s, x, rc);
	else if (x->status / 100 == 2 && (rc == CURLE_OK || x->sse))
		post_ok(s, x, rc);
	else
		post_failed(s, x, rc);
}

static void get_done(struct hx *x, CURLcode rc);

/* Opens the GET stream after DELAY seconds, if the server offers one. */
static void get_open(struct be_http *s, double delay)
{
	if (s->get || s->get_off || s->down || s->stopping || s->reinit != REINIT_NONE ||
	    s->mode != &http_streamable)
		return;
	struct hx *x = hx_new(s, HX_GET, s->url, NULL, get_done);
	if (!x)
		return;
	int rc = hx_header(x, "Accept", "text/event-stream");
	if (rc == 0 && s->get_last_id) {
		x->start_id = strdup(s->get_last_id);
		rc = hx_header(x, "Last-Event-ID", s->get_last_id);
	}
	if (rc == 0)
		rc = hx_session_headers(x, true);
	s->get = x;
	start_checked(x, rc, delay);
}

/* The GET stream ended: reopen it, unless it is not offered or keeps failing. */
static void get_done(struct hx *x, CURLcode rc)
{
	struct be_http *s = x->s;
	if (s->down || s->stopping)
		return;
	if (x->parser.id) {
		free(s->get_last_id);
		s->get_last_id = strdup(x->parser.id);
	}
	if (rc == CURLE_OK && x->status == 404 && x->sent_session) {
		session_lost(s, NULL, x->gen);
		return;
	}
	if (x->status == 405 || (x->status / 100 == 2 && !x->sse)) {
		s->get_off = true;
		log_debug("%s: the server offers no GET stream", s->name);
		return;
	}
	bool progress = made_progress(x);
	s->get_fails = progress ? 0 : s->get_fails + 1;
	if (s->get_fails > GET_MAX_FAILS) {
		s->get_off = true;
		log_warn("%s: gave up the GET stream after %u attempts (last: HTTP %ld, %s)",
			 s->name, GET_MAX_FAILS, x->status,
			 rc == CURLE_OK ? "no error" : hx_error(x, rc));
		return;
	}
	double delay = progress ? 0.5 : 1 << s->get_fails;
	if (delay > GET_MAX_DELAY)
		delay = GET_MAX_DELAY;
	if (x->parser.retry >= 0 && x->parser.retry / 1000.0 > delay)
		delay = x->parser.retry / 1000.0;
	log_debug("%s: GET stream ended; reopening in %g s", s->name, delay);
	get_open(s, delay);
}

const struct http_mode http_streamable = {
	.post = st_post,
	.can_post = st_can_post,
	.intercept = st_intercept,
};

/* --- the transport operations --- */

/* Frees the transport state. */
static void http_destroy(struct backend *b)
{
	if (T(b))
		relist_drop_all(T(b));
	http_free(T(b));
	backend_set_transport(b, NULL);
}

/* Prepares the transport; the legacy generation opens its stream now. */
static int http_start(struct backend *b)
{
	struct peer *p = backend_peer(b);
	http_destroy(b);
	if (curl_ev_setup() < 0) {
		snprintf(p->why_down, sizeof p->why_down, "cannot initialize libcurl");
		return -1;
	}
	bool legacy = backend_cfg(b)->transport == CFG_SSE;
	struct be_http *s = http_new(b, legacy ? &http_legacy : &http_streamable);
	if (!s) {
		snprintf(p->why_down, sizeof p->why_down, "out of memory");
		return -1;
	}
	backend_set_transport(b, s);
	int rc = http_auth_load(s, p->why_down, sizeof p->why_down);
	if (rc < 0 || s->login)   /* needing login, it answers on its own */
		return rc;
	return s->mode == &http_legacy ? sse_start(s) : 0;
}

/* Keeps what a new session would be initialized with. */
static void remember_init(struct be_http *s, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	json_decref(s->init_id);
	s->init_id = json_incref(json_object_get(msg, "id"));
	json_decref(s->init_params);
	s->init_params = params ? json_deep_copy(params) : json_object();
}

/* A cancelled request's reply is of no use: stop receiving it. */
static void abort_cancelled(struct be_http *s, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	if (!method || strcmp(method, "notifications/cancelled") != 0)
		return;
	json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
	relist_cancel(s, rid);
	for (struct hx *x = s->xfers; rid && x; x = x->next)
		if ((x->kind == HX_POST || x->kind == HX_RESUME) && x->msg && x->msg->id &&
		    json_equal(x->msg->id, rid)) {
			hx_abort(x);
			return;
		}
}

/* Sends one message (not a batch). */
static int send_one(struct be_http *s, json_t *msg)
{
	struct out *o = out_new(msg, OUT_CHAIN);
	if (!o)
		return -1;
	if (o->is_init)
		remember_init(s, msg);
	if (http_auth_answer(s, msg)) {
		out_free(o);
		return 0;
	}
	if (o->version && backend_era(s->b) == ERA_HANDSHAKE) {
		/* a 2026-07-28 client's request to a server of the handshake
		 * era: it goes in that era, in the session (its _meta as sent) */
		free(o->version);
		o->version = NULL;
	}
	abort_cancelled(s, msg);
	if (o->version && !o->id) {
		/* the stateless era defines no notification from a client over
		 * HTTP: closing a request's stream (above) is its cancellation */
		out_free(o);
		return 0;
	}
	if (s->held || !s->mode->can_post(s)) {
		http_hold(s, o);  /* behind what waits already, to keep the order */
		http_wake(s);
		return 0;
	}
	if (s->mode->post(s, o) == 0)
		return 0;
	out_free(o);
	return -1;
}

/* POSTs a message (each member of a batch on its own). */
static int http_send(struct backend *b, json_t *msg)
{
	struct be_http *s = T(b);
	if (!s || s->down || s->stopping)
		return -1;
	if (!json_is_array(msg))
		return send_one(s, msg);
	size_t i;
	json_t *m;
	int rc = 0;
	json_array_foreach(msg, i, m)
		if (send_one(s, m) < 0)
			rc = -1;
	return rc;
}

/* The DELETE at stop ended, whatever its outcome. */
static void delete_done(struct hx *x, CURLcode rc)
{
	log_debug("%s: session DELETE: %s", x->s->name,
		  rc == CURLE_OK ? "answered" : hx_error(x, rc));
	http_down(x->s, "stopped");
}

/* Ends the session with a DELETE bounded by GRACE; 0, or -1 if it cannot. */
static int delete_session(struct be_http *s, double grace)
{
	struct hx *x = hx_new(s, HX_DELETE, s->url, NULL, delete_done);
	if (!x)
		return -1;
	double t = grace < 0.5 ? 0.5 : grace > DELETE_MAX ? DELETE_MAX : grace;
	curl_easy_setopt(x->base.easy, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(x->base.easy, CURLOPT_TIMEOUT_MS, (long)(t * 1000));
	return start_checked(x, hx_session_headers(x, true), 0);
}

/* Stops: abort what runs, DELETE the session, then report down. */
static void http_stop(struct backend *b, double grace)
{
	struct be_http *s = T(b);
	if (!s || s->down)
		return;
	s->stopping = true;
	http_abort_all(s);
	http_drop_held(s);
	if (s->mode == &http_streamable && s->session && delete_session(s, grace) == 0)
		return;
	http_down(s, "stopped");
}

/* True while a transfer runs, a message waits, or a session is open. */
static bool http_running(struct backend *b)
{
	struct be_http *s = T(b);
	return s && (s->xfers || s->in_head || s->down_pending || (!s->down && s->session));
}

/* Flow control: replies wait in libcurl while the chain is congested. */
static void http_pause(struct backend *b, bool paused)
{
	struct be_http *s = T(b);
	if (!s)
		return;
	s->paused = paused;
	if (!paused)
		http_wake(s);
}

/* The principal's tokens changed (signed in or out). */
static void http_credentials_changed(struct backend *b)
{
	if (T(b))
		http_auth_reload(T(b));
}

const struct be_transport_ops be_http_ops = {
	.credentials_changed = http_credentials_changed,
	.kind = "http",
	.start = http_start,
	.send = http_send,
	.stop = http_stop,
	.running = http_running,
	.pause = http_pause,
	.destroy = http_destroy,
};
