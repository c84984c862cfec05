/*
 * http.c - the Streamable HTTP front: requests from the HTTP/1.1 layer
 * (http_conn.h), one struct session per Mcp-Session-Id, and the routing
 * of what each session writes to the HTTP stream that waits for it
 * (http_front.h, docs/http-front.md).
 *
 * Objects: a struct hreq is one HTTP request; a POST that carries
 * requests, and a GET, become response streams (an SSE stream, or a JSON
 * body sent in chunks). A stream is owned jointly by its connection (the
 * request context, released in on_end), by its session's kept list while
 * it may be resumed, and by the calls held for the tool list: it is
 * freed when all have let go. A struct hsess is one session; it
 * lists its open streams, and a stream points back to it until it is
 * detached (its request ended, or the session did).
 */
#include "http_front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "buf.h"
#include "chain.h"
#include "config.h"
#include "hmap.h"
#include "http_check.h"
#include "http_ring.h"
#include "http_routes.h"
#include "http_sid.h"
#include "http_stats.h"
#include "sse_frame.h"
#include "log.h"
#include "http_conn.h"
#include "msg.h"
#include "rpc.h"
#include "era.h"
#include "session.h"
#include "stateless.h"
#include "http_int.h"

static int reply_now_or_stream(struct hreq *r, const char *sid);
static const char *bearer(struct hc_conn *c, size_t *n);
static void ring_keep(struct hsess *hs, uint64_t seq, const char *bytes, size_t n);
static void kept_remove(struct hreq *r);
static struct hsess *sess_new(struct http_front *f, const char *caps, char *why, size_t n);
static char *caps_key(json_t *params);
static void sess_add_stream(struct hsess *hs, struct hreq *r);

/* The monotonic clock, in seconds (request durations). */
static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- streams ---- */

/* Drops a reference to R; frees it with the last. */
static void req_unref(struct hreq *r)
{
	if (--r->refs > 0)
		return;
	ev_timer_stop(EV_DEFAULT, &r->grace);
	buf_release(&r->body);
	buf_release(&r->out);
	buf_release(&r->err);
	buf_release(&r->first);
	free(r->sid);
	http_ring_release(&r->ring);
	for (size_t i = 0; i < r->nids; i++)
		msg_val_release(&r->ids[i]);
	free(r->ids);
	if (r->scanned)
		msg_release(&r->msg);
	free(r->methods);
	free(r);
}

/* Something new for R: its connection takes it before the loop sleeps. */
static void stream_wake(struct hreq *r)
{
	if (r->conn)
		hc_resume(r->conn);
}

/*
 * Gives up each request R still waits for (counted for /metrics): with
 * REASON, the session gets a cancellation of it, as if the client had sent
 * one; without, nothing (the session is ending and answers it itself).
 */
static void stream_give_up(struct hreq *r, struct hsess *hs, const char *reason)
{
	for (size_t i = 0; i < r->nids; i++) {
		if (!http_routes_drop_id(&hs->routes, &r->ids[i], r))
			continue;
		r->f->outcomes[r->methods ? r->methods[i] : HTTP_STATS_NMETHODS - 1][REQ_GIVEN_UP]++;
		if (!reason)
			continue;
		session_cancel(hs->s, &r->ids[i], reason);
	}
}

/* Takes R out of its session: what it waited for is cancelled with
 * REASON (NULL: nothing is left to cancel). */
static void stream_detach(struct hreq *r, const char *reason)
{
	struct hsess *hs = r->sess;
	if (!hs)
		return;
	r->sess = NULL;
	for (struct hreq **pp = &hs->streams; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	if (hs->get == r) {
		hs->get = NULL;
		if (hs->legacy)
			http_legacy_closed(hs, r);
	}
	stream_give_up(r, hs, r->pending > 0 ? reason : NULL);
}

/* Ends R once what it holds is sent. */
static void stream_finish(struct hreq *r)
{
	r->done = true;
	stream_detach(r, NULL);
	stream_wake(r);
}

/* Drops R's connection and R: the client stalled or left (its requests
 * are cancelled with REASON). May free R. */
static void stream_abort(struct hreq *r, const char *reason)
{
	r->aborted = true;
	stream_detach(r, reason);
	stream_wake(r);
	kept_remove(r);
}

/* ---- resumable streams (docs/http-front.md, "Resuming a stream") ---- */

/* Makes R, a POST stream of HS, one a client may resume: its events are
 * kept, and HS's kept list holds a reference to it. */
static void kept_add(struct hsess *hs, struct hreq *r)
{
	r->keep = true;
	r->home = hs;
	r->knext = hs->kept;
	hs->kept = r;
	r->refs++;
}

/*
 * R is no longer resumable: out of its session's kept list, its kept
 * events freed (those its connection has not taken yet move to OUT, so a
 * stream still being written ends whole). May free R.
 */
static void kept_remove(struct hreq *r)
{
	if (!r->keep)
		return;
	for (struct hreq **pp = &r->home->kept; *pp; pp = &(*pp)->knext) {
		if (*pp == r) {
			*pp = r->knext;
			break;
		}
	}
	r->keep = false;
	r->parked = false;
	r->home = NULL;
	ev_timer_stop(EV_DEFAULT, &r->grace);
	if (!r->aborted && r->ring.unsent > 0 && http_ring_drain(&r->ring, &r->out) == 0)
		stream_wake(r);
	http_ring_release(&r->ring);
	req_unref(r);
}

/* True when R, whose connection is gone, may wait for a resume: it is
 * resumable, its client holds one of its event ids, and it has not ended
 * or it ended with an answer the client may not have read. */
static bool stream_can_park(const struct hreq *r)
{
	return r->keep && r->primed && !r->parked && !r->f->stopped && (r->sess || r->done);
}

/* A parked stream's wait ended with no resume: what it waited for is
 * cancelled at the backend, as for a client that leaves. */
static void on_grace(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hreq *r = w->data;
	(void)loop;
	(void)revents;
	if (r->sess) {
		log_info("http: session #%u: a POST stream was not resumed within %g s: its "
			 "request(s) are cancelled", r->sess->serial, r->f->resume_grace);
		stream_detach(r, "the client disconnected");
	} else if (r->home) {
		log_debug("http: session #%u: stream %u ended with an answer nobody resumed to read",
			  r->home->serial, r->stream_no);
	}
	kept_remove(r);
}

/*
 * R's connection is gone before R ended: R keeps its requests and its
 * events for resumeGraceMs, and what comes for it meanwhile is kept too
 * (bounded by streamBufferBytes).
 */
static void stream_park(struct hreq *r)
{
	r->parked = true;
	r->aborted = true;   /* that connection is done with */
	buf_release(&r->out);
	ev_timer_set(&r->grace, r->f->resume_grace, 0.);
	ev_timer_start(EV_DEFAULT, &r->grace);
	stream_wake(r);
	log_debug("http: session #%u: stream %u lost its connection; kept %g s for a resume",
		  r->home->serial, r->stream_no, r->f->resume_grace);
}

/* R's client left (REASON) before R ended: parked when it may be resumed,
 * else dropped with its requests cancelled. May free R. */
static void stream_lost(struct hreq *r, const char *reason)
{
	if (stream_can_park(r))
		stream_park(r);
	else
		stream_abort(r, reason);
}

/*
 * Appends one message line to R. A reader that stalls is dropped once
 * more than streamBufferBytes wait before a message: memory stays bounded
 * (by that and one message), and one large message always passes.
 */
/*
 * A stateless call's first line, while its HTTP status is not sent yet:
 * an error answer that the era gives a status of its own is sent with
 * that status.
 */
static void defer_note(struct hreq *r, const struct session_out *o)
{
	if (!r->deferred || r->nfirst > 0 || !r->sess->stateless ||
	    o->kind != SESSION_OUT_RESPONSE || o->outcome != 1)
		return;
	int code = o->error_code;
	if (session_era(r->sess->s) != ERA_STATELESS)
		r->status_hint = 400;   /* refused as the handshake-era servers behind refuse it */
	else
		r->status_hint = code == RPC_METHOD_NOT_FOUND ? 404 :
			code == RPC_INVALID_PARAMS || code == RPC_UNSUPPORTED_VERSION ||
			code == RPC_MISSING_CLIENT_CAPABILITY || code == -32020 ? 400 : 0;
}

/*
 * A line for R before its response is queued: held. An SSE reader is
 * woken to decide at once (JSON when it is the whole answer, else a
 * stream); a JSON one only once it has all (stream_finish wakes it).
 */
static void defer_line(struct hreq *r, const char *line, size_t n)
{
	if (buf_append(&r->first, line, n) < 0 || buf_append(&r->first, "\n", 1) < 0) {
		log_error("http: session #%u: out of memory for a stream", r->sess->serial);
		stream_abort(r, "mcp-chain ran out of memory");
		return;
	}
	r->nfirst++;
	if (r->sse)
		stream_wake(r);
}

static void stream_send(struct hreq *r, const char *line, size_t n)
{
	struct hsess *hs = r->sess;
	if (!hs)
		return;  /* dropped while a batch of messages was being sent */
	if (r->deferred) {
		defer_line(r, line, n);
		return;
	}
	size_t waiting = r->keep ? r->ring.fresh : buf_pending(&r->out);
	if (waiting > r->f->stream_buffer) {
		if (r->parked)
			log_warn("http: session #%u: dropped a POST stream waiting to be resumed "
				 "(%zu bytes held for it)", hs->serial, waiting);
		else
			log_warn("http: session #%u: dropped a %s stream whose client does not read "
				 "(%zu bytes waiting)", hs->serial, r == hs->get ? "GET" : "POST", waiting);
		stream_abort(r, r->parked ? "the client disconnected" : "the client's stream stalled");
		return;
	}
	int rc;
	if (r->keep) {   /* framed once, into the ring its connection reads */
		rc = http_ring_add_event(&r->ring, r->stream_no, ++r->seq, line, n);
	} else if (r->sse) {
		bool get = r == hs->get;
		uint64_t seq = get ? ++hs->get_seq : ++r->seq;
		rc = sse_frame_event(&r->out, get ? 0 : r->stream_no, seq, line, n);
		size_t added = buf_pending(&r->out) - waiting;
		if (rc == 0 && get && !hs->legacy)
			ring_keep(hs, seq, r->out.data + r->out.len - added, added);
	} else {
		rc = buf_append(&r->out, line, n);
	}
	if (rc < 0) {
		log_error("http: session #%u: out of memory for a stream", hs->serial);
		stream_abort(r, "mcp-chain ran out of memory");
		return;
	}
	if (r->sse)
		r->primed = true;
	stream_wake(r);
}

/* The response's reader: what is queued, or HC_READ_WAIT until more comes. */
static ssize_t stream_read(void *cls, char *out, size_t max)
{
	struct hreq *r = cls;
	if (r->aborted)
		return HC_READ_ERROR;
	size_t n = buf_pending(&r->out);
	if (n > 0) {
		n = n < max ? n : max;
		memcpy(out, r->out.data + r->out.off, n);
		buf_consume(&r->out, n);
		buf_shrink(&r->out, 65536);
		return (ssize_t)n;
	}
	if (r->keep && r->ring.unsent > 0) {
		n = http_ring_read(&r->ring, out, max);
		http_ring_trim(&r->ring, r->f->stream_buffer);  /* what a resume may still ask for */
		return (ssize_t)n;
	}
	return r->done ? HC_READ_END : HC_READ_WAIT;
}

/* ---- replies ---- */

/* The headers every SSE response carries: nginx then passes each event
 * on at once even where proxy_buffering is on (else progress and the GET
 * stream wait in its buffer). */
#define SSE_HEADERS "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"

/* Queues a complete response; CTYPE may be NULL for an empty body. */
static int reply(struct hreq *r, struct hc_conn *c, unsigned status,
		 const char *ctype, const char *body, size_t n, const char *sid)
{
	char h[512] = "";
	int len = 0;
	if (ctype)
		len += snprintf(h + len, sizeof h - (size_t)len, "Content-Type: %s\r\n%s", ctype,
				strcmp(ctype, SSE_TYPE) == 0 ? SSE_HEADERS : "");
	if (sid)
		len += snprintf(h + len, sizeof h - (size_t)len, SID_HEADER ": %s\r\n", sid);
	if (status == 405)
		len += snprintf(h + len, sizeof h - (size_t)len, "Allow: GET, POST, DELETE\r\n");
	if (status == 401)
		snprintf(h + len, sizeof h - (size_t)len, "WWW-Authenticate: %s\r\n",
			 bearer(c, &(size_t){ 0 }) ? "Bearer realm=\"mcp-chain\", error=\"invalid_token\""
						  : "Bearer realm=\"mcp-chain\"");
	if (r)
		r->queued = true;
	return hc_reply(c, status, h, body, n) < 0 ? -1 : 0;
}

/* Queues STATUS with a JSON-RPC error body (id null) saying TEXT. */
static int reply_error(struct hreq *r, struct hc_conn *c, unsigned status,
				   int code, const char *text)
{
	/* the id of the one request the body holds, once read; else null */
	json_t *id = r && r->nids == 1 ? msg_val_json(&r->ids[0]) : NULL;
	json_t *e = rpc_error(id, code, text, NULL);
	json_decref(id);
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	int rc = reply(r, c, status, JSON_TYPE, s ? s : "", s ? strlen(s) : 0, NULL);
	free(s);
	return rc;
}

/* Queues R's stream response: SSE or a JSON body, as it comes. */
static int reply_stream(struct hreq *r, const char *sid)
{
	char h[256];
	int len = snprintf(h, sizeof h, "Content-Type: %s\r\n%s", r->sse ? SSE_TYPE : JSON_TYPE,
			   r->sse ? SSE_HEADERS : "");
	if (sid)
		snprintf(h + len, sizeof h - (size_t)len, SID_HEADER ": %s\r\n", sid);
	r->queued = true;
	return hc_stream(r->conn, 200, h, stream_read) < 0 ? -1 : 0;
}

/* ---- sessions ---- */

/* Keeps a copy of a GET stream event for a resume; the oldest go past
 * streamBufferBytes. */
static void ring_keep(struct hsess *hs, uint64_t seq, const char *bytes, size_t n)
{
	if (http_ring_add(&hs->ring, seq, bytes, n) < 0)
		return;
	http_ring_mark_sent(&hs->ring);
	http_ring_trim(&hs->ring, hs->f->stream_buffer);
}

/*
 * A GET with Last-Event-ID of the GET stream's event SEQ: the kept events
 * after it go first on R. An id older than all kept replays what is kept
 * (the gap is logged); one newer than all, nothing.
 */
static void get_replay(struct hsess *hs, struct hreq *r, uint64_t seq)
{
	uint64_t lost;
	size_t count = http_ring_rewind(&hs->ring, seq, &lost);
	if (lost)
		log_warn("http: session #%u: GET stream resumed after event %llu; %llu event(s) "
			 "after it were no longer kept", hs->serial, (unsigned long long)seq,
			 (unsigned long long)lost);
	if (http_ring_drain(&hs->ring, &r->out) < 0)
		count = 0;
	log_debug("http: session #%u: GET stream resumed: %zu event(s) sent again", hs->serial,
		  count);
}

/* Frees the lines held for the GET stream. */
static void held_clear(struct hsess *hs)
{
	while (hs->held) {
		struct held *h = hs->held;
		hs->held = h->next;
		free(h);
	}
	hs->held_tail = &hs->held;
	hs->held_bytes = 0;
}

/* A message for the GET stream: sent, or held (oldest dropped) until one opens. */
static void to_get_stream(struct hsess *hs, const char *line, size_t n)
{
	if (hs->stateless) {
		/* no GET stream in this era: the call's (or the listen's) own stream */
		for (struct hreq *r = hs->streams; r; r = r->next) {
			if (r->sse) {
				stream_send(r, line, n);
				return;
			}
		}
		log_debug("http: stateless #%u: a message with no stream to carry it was dropped",
			  hs->serial);
		return;
	}
	if (hs->get) {
		stream_send(hs->get, line, n);
		return;
	}
	struct held *h = malloc(sizeof *h + n);
	if (!h)
		return;
	h->next = NULL;
	h->n = n;
	memcpy(h->line, line, n);
	*hs->held_tail = h;
	hs->held_tail = &h->next;
	hs->held_bytes += n;
	size_t dropped = 0;
	while (hs->held_bytes > hs->f->stream_buffer && hs->held != h) {
		struct held *old = hs->held;
		hs->held = old->next;
		hs->held_bytes -= old->n;
		free(old);
		dropped++;
	}
	if (dropped && hs->held_dropped == 0)  /* once until a GET stream opens */
		log_warn("http: session #%u: no GET stream open and %zu bytes held for it: "
			 "dropping the oldest messages", hs->serial, hs->held_bytes);
	hs->held_dropped += dropped;
}

/* The place of request ID among R's requests, or -1. */
static int req_slot(const struct hreq *r, const struct msg_val *id)
{
	unsigned char k[RPC_KEY_MAX], k2[RPC_KEY_MAX];
	size_t n = id->n ? msg_val_key(id, k) : 0;
	for (size_t i = 0; n && i < r->nids; i++)
		if (msg_val_key(&r->ids[i], k2) == n && memcmp(k, k2, n) == 0)
			return (int)i;
	return -1;
}

/* Counts the answer to R's request ID (OUTCOME: msg_outcome's) by method,
 * and how long it took since its POST. */
static void count_answer(struct hreq *r, const struct msg_val *id, int outcome)
{
	int i = req_slot(r, id);
	unsigned m = i >= 0 && r->methods ? r->methods[i] : HTTP_STATS_NMETHODS - 1;
	static const enum req_outcome outcomes[] = { REQ_OK, REQ_ERROR, REQ_TOOL_ERROR };
	double took = mono_now() - r->t0;
	struct http_front *f = r->f;
	f->outcomes[m][outcomes[outcome >= 0 && outcome <= 2 ? outcome : 1]]++;
	f->latency[m][http_stats_latency_bucket(took)]++;
	f->latency_sum[m] += took;
}

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
			count_answer(r, &v, json_object_get(e, "error") ? 1 :
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

/* ---- the x-mcp-header marks before a list was served ---- */

#define PROBE_BOUND 10.0      /* s the fetch of the tool list may take */
#define PROBE_RETRY 5.0       /* s before a failed fetch is tried again */
#define PROBE_MAX_PAGES 100

/* Learns the marks of a tools/list RESULT (borrowed) crossing the front;
 * its last page makes them known. */
static void learn_marks(struct http_front *f, json_t *result)
{
	json_t *tools = json_object_get(result, "tools");
	if (!json_is_array(tools))
		return;
	param_learn(&f->params, tools, "http", false);
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (!next || !*next)
		f->marks_known = true;
}

static void probe_answer(void *arg, json_t *m);
static void probe_end(struct http_front *f, const char *why);

/* The probe session's next tools/list (CURSOR: NULL for the first page),
 * a call of the front's own through its session. */
static void probe_send(struct http_front *f, const char *cursor)
{
	json_t *params = json_pack("{s:O}", "_meta", f->probe_meta);
	if (cursor)
		json_object_set_new(params, "cursor", json_string(cursor));
	f->probe_pages++;
	if (session_call(f->probe->s, "tools/list", params, probe_answer, f->probe) < 0)
		probe_end(f, "out of memory");
}

/*
 * The fetch is over (WHY: NULL, or why it failed): the held calls go on
 * (each POST is taken again from the start: now checked against what was
 * learned). The probe session ends as a stateless call's does, soon after.
 */
static void probe_end(struct http_front *f, const char *why)
{
	struct hsess *hs = f->probe;
	if (!hs)
		return;
	f->probe = NULL;
	ev_timer_stop(EV_DEFAULT, &f->probe_bound);
	json_decref(f->probe_meta);
	f->probe_meta = NULL;
	if (why) {
		f->probe_after = ev_now(EV_DEFAULT) + PROBE_RETRY;
		log_warn("http: the tool list for checking Mcp-Param-* headers could not be fetched "
			 "(%s): calls are checked against the lists served", why);
	} else {
		log_debug("http: tool list fetched for checking Mcp-Param-* headers");
	}
	hs->idle.repeat = 0.5;
	ev_timer_again(EV_DEFAULT, &hs->idle);
	while (f->probe_wait) {
		struct hreq *r = f->probe_wait;
		f->probe_wait = r->pnext;
		r->pnext = NULL;
		stream_wake(r);
		req_unref(r);
	}
}

/* The probe's bound passed. */
static void on_probe_bound(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_end(w->data, "no answer in time");
}

/* The answer to the probe's tools/list (M borrowed). */
static void probe_answer(void *arg, json_t *m)
{
	struct hsess *hs = arg;
	struct http_front *f = hs->f;
	if (f->probe != hs)
		return;   /* the fetch ended already */
	json_t *result = json_object_get(m, "result");
	json_t *tools = json_object_get(result, "tools");
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (!json_is_array(tools)) {
		const char *e = json_string_value(json_object_get(json_object_get(m, "error"), "message"));
		char why[200];
		snprintf(why, sizeof why, "%s", e ? e : "no tool list in the answer");
		probe_end(f, why);
		return;
	}
	param_learn(&f->params, tools, "http", false);
	if (next && *next && f->probe_pages < PROBE_MAX_PAGES) {
		probe_send(f, next);
		return;
	}
	f->marks_known = true;
	probe_end(f, NULL);
}

/*
 * A 2026-07-28 tools/call R (PARAMS its params, borrowed) came before the
 * front learned any tool list, so it cannot tell which arguments the tool
 * marks x-mcp-header (a client may list on another instance, or before a
 * restart): R is held while a stateless session of its own, bound to R's
 * credential, fetches the list as that client would see it. True when R
 * is held (taken again from the start when the fetch ends).
 */
static bool probe_hold(struct http_front *f, struct hreq *r, json_t *params)
{
	if (f->marks_known || f->stopped || ev_now(EV_DEFAULT) < f->probe_after)
		return false;
	bool start = !f->probe;
	if (start) {
		char why[300] = "";
		json_t *meta = json_object(), *v;
		const char *k;
		json_object_foreach(json_object_get(params, "_meta"), k, v)
			if (strncmp(k, "io.modelcontextprotocol/", 24) == 0)
				json_object_set(meta, k, v);
		char *caps = caps_key(params);
		struct hsess *hs = caps ? sess_new(f, caps, why, sizeof why) : NULL;
		free(caps);
		if (!hs) {
			json_decref(meta);
			return false;
		}
		hs->stateless = true;
		hf_bind_credential(hs, r->conn);
		f->probe = hs;
		f->probe_meta = meta;
		f->probe_pages = 0;
		ev_timer_set(&f->probe_bound, PROBE_BOUND, 0.);
		ev_timer_start(EV_DEFAULT, &f->probe_bound);
		log_debug("http: session #%u: fetching the tool list to check Mcp-Param-* headers",
			  hs->serial);
	}
	r->refs++;
	r->pnext = f->probe_wait;
	f->probe_wait = r;   /* no answer yet: probe_end takes it again */
	if (start)
		probe_send(f, NULL);   /* may end at once (an answer from a cache) */
	return true;
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
	size_t n;
	const char *line = out_line(f, o, &n);
	if (!line) {
		log_error("http: session #%u: out of memory for a message", hs->serial);
		return;
	}
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
			buf_append(&in->err, line, n);
			stream_finish(in);
			return;
		}
		if (r)
			count_answer(r, id, o->outcome);
		if (r && r->lists_tools) {   /* the marks a 2026-07-28 call's headers follow */
			json_t *t = o->tree ? json_incref(o->tree) : json_loadb(line, n, 0, NULL);
			learn_marks(f, json_object_get(t, "result"));
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
		defer_note(r, o);
		stream_send(r, line, n);
		if (response && r->sess && --r->pending == 0)
			stream_finish(r);
	} else {
		to_get_stream(hs, line, n);
	}
	msg_val_release(&v);
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
		stream_finish(r);
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
		stream_send(r, line, strlen(line));
	free(line);
	json_decref(all);
	stream_finish(r);
}

/* Ends HS: its streams end, its requests are cancelled; logs REASON. */
static void sess_end(struct hsess *hs, const char *reason)
{
	struct http_front *f = hs->f;
	if (f->probe == hs)
		probe_end(f, reason);
	hmap_del(&f->sessions, hs->sid, HTTP_SID_LEN);
	if (hs->instance)
		hmap_del(&f->instances, &hs->instance, sizeof hs->instance);
	ev_timer_stop(EV_DEFAULT, &hs->idle);
	while (hs->streams) {
		struct hreq *r = hs->streams;
		if (r == hs->get)
			stream_finish(r);         /* an orderly end of the GET stream */
		else if (r->pending > 0)
			stream_fail(r, reason);   /* answered, then ended; cancelled at the backend */
		else
			stream_abort(r, NULL);    /* session_close cancels what is open */
	}
	while (hs->kept)   /* ended streams kept for a resume */
		kept_remove(hs->kept);
	ev_timer_stop(EV_DEFAULT, &hs->reap);
	session_close(hs->s, reason);
	session_free(hs->s);
	if (f->chain_release)
		f->chain_release(f->chain_arg, hs->chain, hs->serial);
	http_routes_release(&hs->routes);
	held_clear(hs);
	http_ring_release(&hs->ring);
	if (hs->stateless)
		log_debug("http: stateless #%u ended (%s)", hs->serial, reason);
	else
		log_info("http: session #%u ended (%s)", hs->serial, reason);
	free(hs->caps);
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
	 * client like this one, at most inputTimeoutMs (on_stateless_post) */
	double ttl = hs->f->input_ttl > 0 ? hs->f->input_ttl : 300.;
	if (hs->stateless && session_holds_requests(hs->s) && ev_now(EV_DEFAULT) - hs->used < ttl) {
		ev_timer_again(EV_DEFAULT, w);
		return;
	}
	sess_end(hs, hs->stateless ? "its call ended" : "expired after being idle");
}

/*
 * The capabilities a 2026-07-28 call's PARAMS (borrowed) declare, as the
 * canonical JSON text that names the backends such calls share (owned by
 * the caller), or NULL when out of memory.
 */
static char *caps_key(json_t *params)
{
	json_t *c = era_meta(params, ERA_META_CLIENT_CAPS);
	json_t *none = json_is_object(c) ? NULL : json_object();
	char *key = json_dumps(none ? none : c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(none);
	return key;
}

/*
 * A new session; CAPS (borrowed): for a 2026-07-28 client's call, the
 * capabilities it declares (caps_key), which choose the backends it may
 * share; NULL for a session of the handshake era. NULL when out of memory
 * or randomness, or when its chain cannot be made (the reason in WHY, N
 * bytes).
 */
static struct hsess *sess_new(struct http_front *f, const char *caps, char *why, size_t n)
{
	struct hsess *hs = calloc(1, sizeof *hs);
	char name[32];
	if (!hs || http_sid_new(hs->sid) < 0) {
		free(hs);
		log_error("http: cannot make a session id");
		return NULL;
	}
	hs->f = f;
	hs->serial = ++f->serial;
	hs->used = ev_now(EV_DEFAULT);
	hs->held_tail = &hs->held;
	http_ring_init(&hs->ring);
	if (caps && !(hs->caps = strdup(caps))) {
		free(hs);
		return NULL;
	}
	hs->chain = f->chain_make ? f->chain_make(f->chain_arg, hs->serial, caps, why, n) : f->chain;
	if (!hs->chain) {
		free(hs->caps);
		free(hs);
		return NULL;
	}
	http_routes_init(&hs->routes);
	snprintf(name, sizeof name, "http#%u", hs->serial);
	hs->s = session_new(hs->chain, name, sess_write, hs);
	if (!hs->s || hmap_put(&f->sessions, hs->sid, HTTP_SID_LEN, hs) < 0) {
		session_free(hs->s);
		if (f->chain_release)
			f->chain_release(f->chain_arg, hs->chain, hs->serial);
		free(hs->caps);
		free(hs);
		return NULL;
	}
	session_set_unanswered(hs->s, sess_unanswered);
	session_offer_stateless(hs->s, f->offer_stateless);
	ev_init(&hs->idle, on_idle);
	hs->idle.repeat = f->session_idle;
	hs->idle.data = hs;
	ev_timer_again(EV_DEFAULT, &hs->idle);
	if (caps)   /* a 2026-07-28 call's: started and ended at the same level */
		log_debug("http: stateless #%u started", hs->serial);
	else
		log_info("http: session #%u started", hs->serial);
	return hs;
}

/* ---- the session caps (listen.maxSessions, ...PerClient, ...PerPrincipal) ---- */

/* The SHA-256 of a bearer token TOK (N bytes): sessions are counted per
 * token without keeping it; 0 or -1. */
static int cred_key(const char *tok, size_t n, unsigned char out[32])
{
	unsigned len = 0;
	return EVP_Digest(tok, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

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
	sess_end(hs, "ended to make room for a new session");
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
	const char *tok = bearer(c, &n);
	struct cap_scan cs = { .peer = hc_peer(c), .cred = tok && cred_key(tok, n, key) == 0 ? key : NULL };
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

/* A new handshake-era session for the client of C (see sess_new), room
 * made under the caps first; NULL with WHY (N bytes). */
static struct hsess *sess_open(struct http_front *f, struct hc_conn *c, char *why, size_t n)
{
	const char *full = sess_make_room(f, c);
	if (full) {
		snprintf(why, n, "%s", full);
		return NULL;
	}
	struct hsess *hs = sess_new(f, NULL, why, n);
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
static void sess_add_stream(struct hsess *hs, struct hreq *r)
{
	r->sess = hs;
	r->next = hs->streams;
	hs->streams = r;
}

/* ---- requests ---- */

/* A header of C, or NULL. */
static const char *header(struct hc_conn *c, const char *name)
{
	return hc_header(c, name);
}

/*
 * Finds the session a request names: 0 with *HS, or an HTTP status (400
 * without a session id, 404 for one we do not know) with *WHY.
 */
static unsigned find_session(struct http_front *f, struct hc_conn *c,
			     struct hsess **hs, const char **why)
{
	const char *sid = header(c, SID_HEADER);
	const char *v = header(c, VERSION_HEADER);
	*hs = NULL;
	if (!sid) {
		*why = "Bad Request: Mcp-Session-Id header is required";
		return 400;
	}
	if (!http_sid_valid(sid) || !(*hs = hmap_get(&f->sessions, sid, HTTP_SID_LEN)) ||
	    (*hs)->legacy) {   /* an HTTP+SSE session is reached by its own endpoint */
		*hs = NULL;
		*why = "Session not found";
		return 404;
	}
	if (v && !session_version_supported(v)) {
		*why = "Bad Request: unsupported MCP-Protocol-Version";
		*hs = NULL;
		return 400;
	}
	if (hf_bind_credential(*hs, c) < 0) {
		*why = "Unauthorized: this session belongs to another bearer token";
		*hs = NULL;
		return 401;
	}
	ev_timer_again(EV_DEFAULT, &(*hs)->idle);
	(*hs)->used = ev_now(EV_DEFAULT);
	return 0;
}

/* Records the request in the message M of R: its id and method. */
static void note_request(struct hreq *r, struct msg *m)
{
	struct rpc_info in;
	if (msg_classify(m, &in) != RPC_REQUEST)
		return;
	struct msg_val *ids = realloc(r->ids, (r->nids + 1) * sizeof *ids);
	if (!ids)
		return;
	r->ids = ids;
	unsigned char *methods = realloc(r->methods, r->nids + 1);
	if (!methods)
		return;
	r->methods = methods;
	memset(&ids[r->nids], 0, sizeof ids[0]);
	if (msg_id_get(m, &ids[r->nids]) < 0)
		return;
	methods[r->nids] = (unsigned char)http_stats_method_index(msg_method(m));
	r->nids++;
}

/*
 * Reads what the body asks, once: the requests it carries (into R),
 * whether it is an initialize; the scanned message stays in R->msg for
 * the session (session_receive_msg). Returns false when it is not JSON
 * (*ERR: the -32700).
 */
static bool scan_body(struct hreq *r, bool *is_init, bool *is_discover, json_t **err)
{
	struct msg *m = &r->msg;
	*is_init = *is_discover = false;
	for (size_t i = 0; i < r->nids; i++)   /* a POST held and taken again: afresh */
		msg_val_release(&r->ids[i]);
	r->nids = 0;
	if (r->scanned)
		msg_release(m);
	r->scanned = false;
	if (msg_init_line(m, r->body.data ? r->body.data : "", buf_pending(&r->body), err) < 0)
		return false;
	r->scanned = true;
	if (json_is_array(m->tree)) {
		size_t i;
		json_t *e;
		json_array_foreach(m->tree, i, e) {
			struct msg one;
			msg_init_tree(&one, json_incref(e));
			note_request(r, &one);
			msg_release(&one);
		}
	} else {
		const char *method = msg_method(m);
		*is_init = method && strcmp(method, "initialize") == 0;
		*is_discover = method && strcmp(method, "server/discover") == 0;
		r->lists_tools = method && strcmp(method, "tools/list") == 0;
		note_request(r, m);
	}
	return true;
}

/* True when HS's POST streams may be resumed: a Streamable HTTP session
 * of the handshake era (2026-07-28 has no resumption), resumeGraceMs > 0. */
static bool sess_resumable(const struct hsess *hs)
{
	return hs->f->resume_grace > 0 && !hs->stateless && !hs->legacy;
}

/*
 * Makes the POST stream R resumable: its head is the retry hint and, for
 * a client of 2025-11-25 or later (older ones may choke on an event with
 * empty data), the priming event, so the client holds an id at once
 * (R->head, set in post_to_session).
 */
static void stream_open_resumable(struct hsess *hs, struct hreq *r)
{
	bool prime = r->head == 2;
	kept_add(hs, r);
	if (sse_frame_head(&r->out, r->stream_no, hs->f->retry_ms, prime) == 0 && prime)
		r->primed = true;
}

/* Hands R's body to HS's session and queues what answers it. */
static int post_to_session(struct hreq *r, struct hsess *hs, bool is_init)
{
	struct hc_conn *c = r->conn;
	const char *sid = is_init ? hs->sid : NULL;
	for (size_t i = 0; i < r->nids; i++) {
		if (http_routes_add_id(&hs->routes, &r->ids[i], r) != 0) {
			for (size_t j = 0; j < i; j++)
				http_routes_drop_id(&hs->routes, &r->ids[j], r);
			r->nids = 0;  /* nothing of ours to cancel */
			return reply_error(r, c, 400, RPC_INVALID_REQUEST,
				"Bad Request: a request with this id is already open in this session");
		}
	}
	r->pending = r->nids;
	r->sse = http_check_accepts(header(c, "Accept"), SSE_TYPE);
	r->stream_no = ++hs->next_stream;
	r->t0 = mono_now();
	r->deferred = r->nids > 0;   /* one body or a stream: its first line decides */
	if (sess_resumable(hs)) {
		const char *v = session_version(hs->s);
		r->head = v && strcmp(v, "2025-11-25") >= 0 ? 2 : 1;
	}
	sess_add_stream(hs, r);
	r->scanned = false;   /* the session takes the message (its bytes, borrowed, for the call) */
	session_receive_msg(hs->s, &r->msg, r);
	buf_release(&r->body);
	if (buf_pending(&r->err) > 0) {
		r->deferred = false;
		stream_detach(r, NULL);  /* refused whole: nothing of it is open */
		return reply(r, c, 400, JSON_TYPE, r->err.data,
			     buf_pending(&r->err), sid);
	}
	if (r->nids == 0) {
		stream_detach(r, NULL);
		return reply(r, c, 202, NULL, "", 0, sid);
	}
	if (!r->done && !(r->sse && r->nfirst > 0)) {
		/*
		 * Nothing is sent before the first line: an answer that comes
		 * before anything else goes as one JSON body (the client need
		 * not read a stream; a 2026-07-28 error gets its era's status),
		 * else, for an SSE reader, a stream starts with it.
		 */
		if (sid && !(r->sid = strdup(sid)))
			return -1;
		return 0;   /* no answer yet: on_resume gives it */
	}
	return reply_now_or_stream(r, sid);
}

/*
 * R's response, now that something of it is there (or all of it). All of
 * it: one body with its length, sent with the headers -- JSON for a client
 * that reads no stream (and for a 2026-07-28 error with its era's status),
 * else the SSE events a stream would have carried. Not all of it yet: an
 * SSE stream that begins with the lines held.
 */
static int reply_now_or_stream(struct hreq *r, const char *sid)
{
	struct hc_conn *c = r->conn;
	const char *held = r->first.data + r->first.off;
	size_t n = buf_pending(&r->first);
	r->deferred = false;
	if (r->done && n == 0 && !r->sse)   /* cancelled by its client: nothing will answer */
		return reply(r, c, 202, NULL, "", 0, sid);
	if (r->done && (!r->sse || r->status_hint)) {
		if (n > 0 && held[n - 1] == '\n')
			n--;
		return reply(r, c, r->status_hint ? r->status_hint : 200, JSON_TYPE, held, n,
			     sid);
	}
	if (r->done) {
		struct buf body = { 0 };
		int rc = r->head ? sse_frame_head(&body, r->stream_no, r->f->retry_ms, r->head == 2) : 0;
		for (size_t i = 0; i < n && rc == 0;) {
			size_t len = (size_t)((const char *)memchr(held + i, '\n', n - i) - (held + i));
			rc = sse_frame_event(&body, r->stream_no, ++r->seq, held + i, len);
			i += len + 1;
		}
		int res = rc < 0 ? -1 :
			reply(r, c, 200, SSE_TYPE, body.data + body.off, buf_pending(&body), sid);
		buf_release(&body);
		return res;
	}
	struct hsess *hs = r->sess;   /* NULL once R has all its answers */
	if (hs && sess_resumable(hs))
		stream_open_resumable(hs, r);
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(held + i, '\n', n - i);
		size_t len = (size_t)(nl - (held + i));
		int rc = r->keep ? http_ring_add_event(&r->ring, r->stream_no, ++r->seq, held + i, len)
			: sse_frame_event(&r->out, r->stream_no, ++r->seq, held + i, len);
		if (rc < 0)
			return -1;
		r->primed = true;
		i += len + 1;
	}
	buf_release(&r->first);
	r->nfirst = 0;
	return reply_stream(r, sid);
}

/* Replies STATUS with the error response E (stolen). */
static int reply_json_error(struct hreq *r, struct hc_conn *c, unsigned status,
					json_t *e)
{
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	int rc = reply(r, c, status, JSON_TYPE, s ? s : "", s ? strlen(s) : 0, NULL);
	free(s);
	return rc;
}

/* The value of header C:NAME, decoded from the "=?base64?...?=" form
 * (malloc'd), or NULL when absent or badly encoded (*BAD set). */
static char *header_value(struct hc_conn *c, const char *name, bool *bad)
{
	const char *v = header(c, name);
	*bad = false;
	if (!v)
		return NULL;
	while (*v == ' ' || *v == '\t')   /* whitespace around a field value is not part of it */
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (n < 11 || strncmp(v, "=?base64?", 9) != 0 || strncmp(v + n - 2, "?=", 2) != 0)
		return strndup(v, n);
	size_t len = n - 11;
	unsigned char *out = malloc(len / 4 * 3 + 4);
	int got = out && len % 4 == 0 ? EVP_DecodeBlock(out, (const unsigned char *)v + 9, (int)len) : -1;
	if (got < 0) {
		free(out);
		*bad = true;
		return NULL;
	}
	while (len >= 1 && v[9 + len - 1] == '=' && got > 0) {   /* padding decodes to zeros */
		got--;
		len--;
	}
	out[got] = '\0';
	return (char *)out;
}

/*
 * The standard headers of a 2026-07-28 request, and the Mcp-Param-* ones of
 * a tools/call, checked against its body:
 * NULL, or why they disagree (answered 400, -32020).
 */
static char *param_header(void *c, const char *name, bool *bad)
{
	return header_value(c, name, bad);
}

static const char *check_stateless_headers(struct http_front *f, struct hc_conn *c,
					   json_t *body, const char *method, char *why, size_t n)
{
	json_t *params = json_object_get(body, "params");
	const char *bv = era_request_version(params);
	const char *hv = header(c, VERSION_HEADER);
	bool bad;
	if (!hv)
		return "the MCP-Protocol-Version header is required";
	if (bv && strcmp(bv, hv) != 0) {
		snprintf(why, n, "the MCP-Protocol-Version header says %.40s but the request's _meta says %.40s",
			 hv, bv);
		return why;
	}
	char *hm = header_value(c, "Mcp-Method", &bad);
	if (!hm || strcmp(hm, method) != 0) {
		snprintf(why, n, hm ? "the Mcp-Method header says %.60s but the body's method is %.60s"
				    : "the Mcp-Method header is required (the body's method is %.60s%.0s)",
			 hm ? hm : method, method);
		free(hm);
		return why;
	}
	free(hm);
	const char *key = strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ? "name"
		: strcmp(method, "resources/read") == 0 ? "uri" : NULL;
	const char *want = key ? json_string_value(json_object_get(params, key)) : NULL;
	if (!want)
		return NULL;
	char *hn = header_value(c, "Mcp-Name", &bad);
	const char *err = NULL;
	if (bad)
		err = "the Mcp-Name header's Base64 form cannot be decoded";
	else if (!hn)
		err = "the Mcp-Name header is required for this method";
	else if (strcmp(hn, want) != 0)
		err = "the Mcp-Name header does not match the body";
	free(hn);
	if (!err && strcmp(method, "tools/call") == 0)   /* the arguments it marks x-mcp-header */
		err = param_check(&f->params, want, json_object_get(params, "arguments"), param_header,
				  c, why, n);
	return err;
}

struct holding {
	const char *caps;
	struct hsess *found;
};

static void find_holding(void *value, void *arg)
{
	struct hsess *hs = value;
	struct holding *h = arg;
	if (!h->found && hs->stateless && hs->caps && strcmp(hs->caps, h->caps) == 0 &&
	    session_holds_requests(hs->s) && !session_busy(hs->s))
		h->found = hs;
}

/*
 * The stateless session that holds a backend's requests no call carried,
 * for the next call of a client that declares CAPS (the calls such
 * clients make share those backends): that call goes to it, to be asked
 * them first. NULL when none.
 */
static struct hsess *holding_session(struct http_front *f, const char *caps)
{
	struct holding h = { caps, NULL };
	hmap_each(&f->sessions, find_holding, &h);
	return h.found;
}

/*
 * A POST without a session that is of the 2026-07-28 era (a request whose
 * _meta or MCP-Protocol-Version header says so, or server/discover): true,
 * with the reply in *RC. Each such request gets a session of its own for
 * the life of its call; a retry after input_required goes to the session
 * whose call it continues.
 */
static bool on_stateless_post(struct http_front *f, struct hreq *r, bool is_discover,
			      int *rc)
{
	struct hc_conn *c = r->conn;
	const char *hv = header(c, VERSION_HEADER);
	json_t *body = r->scanned ? msg_tree(&r->msg) : NULL;   /* read once: the session reads it so */
	json_t *params = json_object_get(body, "params");
	const char *method = json_string_value(json_object_get(body, "method"));
	if (!json_is_object(body) ||
	    !(is_discover || era_request_version(params) || era_of_version(hv) == ERA_STATELESS)) {
		return false;
	}
	char why[200];
	json_t *id = json_object_get(body, "id");
	const char *bad = id && method ? check_stateless_headers(f, c, body, method, why, sizeof why) : NULL;
	if (bad) {
		*rc = reply_json_error(r, c, 400, rpc_error(id, -32020, bad, NULL));
		return true;
	}
	/* what the session would answer in-band, answered with the era's HTTP status */
	int code;
	const char *wrong = id && method ? era_check_envelope(params, &code) : NULL;
	if (id && method && era_stateless_removed(method)) {
		*rc = reply_json_error(r, c, 404, rpc_errorf(id, RPC_METHOD_NOT_FOUND,
			"Method not found: %s is not part of protocol " ERA_STATELESS_VERSION, method));
		return true;
	}
	if (wrong) {
		*rc = reply_json_error(r, c, 400, code == RPC_UNSUPPORTED_VERSION ?
			era_unsupported_error(id, era_request_version(params)) : rpc_error(id, code, wrong, NULL));
		return true;
	}
	if (id && method && strcmp(method, "tools/call") == 0 && probe_hold(f, r, params)) {
		/* held until the marks its headers follow are known */
		*rc = 0;
		return true;
	}
	struct hsess *hs = NULL;
	uint64_t inst;
	if (stateless_state_instance(json_string_value(json_object_get(params, "requestState")), &inst))
		hs = hmap_get(&f->instances, &inst, sizeof inst);
	char *caps = hs ? NULL : caps_key(params);
	if (!hs && caps)
		hs = holding_session(f, caps);
	if (!hs) {
		char refused[300] = "";
		if (!f->stopped && caps)
			hs = sess_new(f, caps, refused, sizeof refused);
		free(caps);
		caps = NULL;
		if (!hs && refused[0]) {
			/* no chain for a client without a session: it may fall back to one */
			*rc = reply_error(r, c, 400, RPC_UNSUPPORTED_VERSION, refused);
			return true;
		}
		if (!hs) {
			*rc = reply_error(r, c, 503, -32000,
					  "Service Unavailable: cannot serve a request now");
			return true;
		}
		hs->stateless = true;
		if (f->input_ttl > 0)
			session_set_input_ttl(hs->s, f->input_ttl);
		hs->idle.repeat = 0.5;   /* it ends soon after its call */
		ev_timer_again(EV_DEFAULT, &hs->idle);
	}
	free(caps);
	*rc = post_to_session(r, hs, false);
	if (!hs->instance && (hs->instance = session_instance(hs->s)) &&
	    hmap_put(&f->instances, &hs->instance, sizeof hs->instance, hs) < 0)
		hs->instance = 0;
	return true;
}

/* A complete POST. */
static int on_post(struct http_front *f, struct hreq *r)
{
	struct hc_conn *c = r->conn;
	json_t *err = NULL;
	bool is_init, is_discover;
	struct hsess *hs;
	const char *why;
	if (!scan_body(r, &is_init, &is_discover, &err)) {
		char *s = json_dumps(err, JSON_COMPACT);
		json_decref(err);
		int rc = reply(r, c, 400, JSON_TYPE, s ? s : "",
					   s ? strlen(s) : 0, NULL);
		free(s);
		return rc;
	}
	if (f->draining && r->nids > 0)
		return reply_error(r, c, 503, -32000,
				   "Service Unavailable: mcp-chain is shutting down");
	int src;
	if ((!is_init || era_of_version(header(c, VERSION_HEADER)) == ERA_STATELESS) &&
	    !header(c, SID_HEADER) && on_stateless_post(f, r, is_discover, &src))
		return src;
	if (is_init && !header(c, SID_HEADER)) {
		char refused[300] = "";
		if (f->stopped || !(hs = sess_open(f, c, refused, sizeof refused)))
			return reply_error(r, c, 503, -32000, refused[0] ?
					   refused : "Service Unavailable: cannot open a session now");
		hf_bind_credential(hs, c);
	} else {
		unsigned status = find_session(f, c, &hs, &why);
		if (status)
			return reply_error(r, c, status, -32000, why);
	}
	return post_to_session(r, hs, is_init);
}

/*
 * A GET with Last-Event-ID naming event SEQ of the POST stream STREAM: G
 * takes that stream over -- the kept events after SEQ first, then what
 * comes for it, and it ends after the stream's last answer, as the POST's
 * response would have. The connection that stream had, if we had not seen
 * it go yet, is closed. 400 when HS keeps no such stream (it ended, or was
 * not resumed within resumeGraceMs and its requests were cancelled).
 */
static int resume_post(struct hsess *hs, struct hreq *g, unsigned stream,
				   uint64_t seq)
{
	struct hreq *r = hs->kept;
	uint64_t lost;
	while (r && r->stream_no != stream)
		r = r->knext;
	if (!r)
		return reply_error(g, g->conn, 400, -32000,
			"Bad Request: Last-Event-ID names a stream this session does not keep (it "
			"ended, or was not resumed within listen.resumeGraceMs)");
	size_t count = http_ring_rewind(&r->ring, seq, &lost);
	if (lost)
		log_warn("http: session #%u: stream %u resumed after event %llu; %llu event(s) after "
			 "it were no longer kept", hs->serial, stream, (unsigned long long)seq,
			 (unsigned long long)lost);
	log_info("http: session #%u: stream %u resumed after event %llu (%zu event(s) sent again)",
		 hs->serial, stream, (unsigned long long)seq, count);
	g->sse = true;
	g->stream_no = r->stream_no;
	g->seq = r->seq;
	g->primed = true;
	g->t0 = r->t0;
	http_ring_move(&g->ring, &r->ring);
	/* its requests, and the routes of their answers and progress, are G's now */
	g->ids = r->ids;
	g->nids = r->nids;
	g->methods = r->methods;
	g->pending = r->pending;
	r->ids = NULL;
	r->methods = NULL;
	r->nids = r->pending = 0;
	if (r->sess) {
		for (size_t i = 0; i < g->nids; i++)
			if (http_routes_drop_id(&hs->routes, &g->ids[i], r))
				http_routes_add_id(&hs->routes, &g->ids[i], g);
		stream_detach(r, NULL);   /* nothing of it is left to route */
		sess_add_stream(hs, g);
	} else {
		g->done = true;           /* it had ended: its answer is among the kept events */
	}
	r->aborted = true;
	stream_wake(r);
	kept_add(hs, g);
	kept_remove(r);
	if (sse_frame_head(&g->out, g->stream_no, hs->f->retry_ms, false) < 0)
		return -1;
	return reply_stream(g, NULL);
}

/*
 * A GET: the session's stream for messages not tied to a request (with
 * Last-Event-ID of it: resumed), or, with Last-Event-ID of a POST stream's
 * event, that stream resumed.
 */
static int on_get(struct http_front *f, struct hreq *r)
{
	struct hc_conn *c = r->conn;
	struct hsess *hs;
	const char *why;
	unsigned stream;
	uint64_t seq;
	if (!http_check_accepts(header(c, "Accept"), SSE_TYPE))
		return reply_error(r, c, 406, -32000,
				   "Not Acceptable: the GET stream is text/event-stream");
	unsigned status = find_session(f, c, &hs, &why);
	if (status)
		return reply_error(r, c, status, -32000, why);
	bool resume = sse_frame_id_parse(header(c, "Last-Event-ID"), &stream, &seq) == 0;
	if (resume && stream > 0)
		return resume_post(hs, r, stream, seq);
	if (f->draining)
		return reply_error(r, c, 503, -32000,
				   "Service Unavailable: mcp-chain is shutting down");
	if (hs->get)
		return reply_error(r, c, 409, -32000,
				   "Conflict: this session's GET stream is already open");
	r->sse = true;
	sess_add_stream(hs, r);
	hs->get = r;
	if (resume)
		get_replay(hs, r, seq);
	while (hs->held) {
		struct held *h = hs->held;
		hs->held = h->next;
		stream_send(r, h->line, h->n);
		free(h);
	}
	held_clear(hs);  /* empty, unless the stream was dropped on the way */
	hs->held_tail = &hs->held;
	hs->held_bytes = 0;
	if (hs->held_dropped)
		log_info("http: session #%u: GET stream open; %zu message(s) held for it were "
			 "dropped", hs->serial, hs->held_dropped);
	hs->held_dropped = 0;
	return reply_stream(r, NULL);
}

/* A DELETE: the client ends its session. */
static int on_delete(struct http_front *f, struct hreq *r)
{
	struct hsess *hs;
	const char *why;
	unsigned status = find_session(f, r->conn, &hs, &why);
	if (status)
		return reply_error(r, r->conn, status, -32000, why);
	sess_end(hs, "deleted by the client");
	return reply(r, r->conn, 200, NULL, "", 0, NULL);
}

/* /healthz and /readyz. */
static int on_health(struct http_front *f, struct hc_conn *c, bool ready)
{
	bool ok = !ready || !f->ready || f->ready(f->ready_arg);
	const char *body = ok ? "ok\n" : "not ready\n";
	return reply(NULL, c, ok ? 200 : 503, "text/plain",
		     body, strlen(body), NULL);
}

/*
 * Checks what the headers allow before any body is read: 0, or an HTTP
 * status with *WHY. Host and Origin first (DNS rebinding), then the method.
 */
static unsigned check_headers(struct http_front *f, struct hc_conn *c,
			      const char *method, enum req_kind *kind, const char **why)
{
	*kind = strcmp(method, "POST") == 0 ? REQ_POST : strcmp(method, "GET") == 0 ? REQ_GET :
		strcmp(method, "DELETE") == 0 ? REQ_DELETE : REQ_OTHER;
	if (hc_over(c)) {
		*why = "Service Unavailable: too many connections";
		return 503;
	}
	if (!http_check_host(header(c, "Host"), f->port, f->hosts)) {
		*why = "Forbidden: Host not allowed";
		return 403;
	}
	if (!http_check_origin(header(c, "Origin"), f->port, f->origins)) {
		*why = "Forbidden: Origin not allowed";
		return 403;
	}
	if (*kind == REQ_OTHER) {
		*why = "Method Not Allowed";
		return 405;
	}
	if (*kind == REQ_POST && !http_check_json_type(header(c, "Content-Type"))) {
		*why = "Unsupported Media Type: POST application/json";
		return 415;
	}
	return 0;
}

/* The answer to a request the HTTP layer refuses itself (bad framing,
 * too large, over the bounds): a JSON-RPC error, as the front's own. */
static void on_refuse(void *cls, struct hc_conn *c, unsigned status, const char *why)
{
	struct http_front *f = cls;
	char text[200];
	if (status == 413) {
		snprintf(text, sizeof text, "message too large: it exceeds maxMessageBytes (%zu)",
			 f->max_message);
		why = text;
	}
	reply_error(NULL, c, status, status == 413 ? RPC_INVALID_REQUEST : -32000, why);
}

/* A request to one of the front's other paths: health, readiness, metrics. */
static int on_other_path(struct http_front *f, struct hc_conn *c, const char *url,
			 const char *method)
{
	if (strcmp(method, "GET") == 0 && strcmp(url, "/healthz") == 0)
		return on_health(f, c, false);
	if (strcmp(method, "GET") == 0 && strcmp(url, "/readyz") == 0)
		return on_health(f, c, true);
	if (strcmp(method, "GET") == 0 && strcmp(url, "/metrics") == 0)
		return hf_on_metrics(f, c);
	return reply(NULL, c, 404, "text/plain", "not found\n", 10, NULL);
}

/* A request's head: checked before any of its body is read; GET and
 * DELETE are answered, a POST's body is read (on_body). */
static int on_head(void *cls, struct hc_conn *c)
{
	struct http_front *f = cls;
	const char *url = hc_path(c), *method = hc_method(c);
	int ep = http_legacy_endpoint(f, url);
	if (ep < 0)
		return on_other_path(f, c, url, method);
	struct hreq *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	r->f = f;
	r->conn = c;
	r->refs = 1;   /* the connection's: on_end lets go */
	r->ep = (enum http_ep)ep;
	ev_init(&r->grace, on_grace);
	r->grace.data = r;
	http_ring_init(&r->ring);
	hc_set_ctx(c, r);
	const char *why = NULL;
	unsigned status = check_headers(f, c, method, &r->kind, &why);
	if (!status)
		status = hf_check_auth(f, c, &why);
	if (!status && ((r->ep == EP_SSE && r->kind != REQ_GET) ||
			(r->ep == EP_MESSAGES && r->kind != REQ_POST))) {
		status = 405;
		why = "Method Not Allowed";
	}
	uint64_t length;
	if (!status && r->kind == REQ_POST && hc_has_body(c, &length) && length != UINT64_MAX &&
	    length > f->max_message)
		status = 413;   /* before any of it is read */
	if (status == 413) {
		on_refuse(f, c, 413, NULL);
		return 0;
	}
	if (status)   /* a body not read closes its connection after the answer */
		return reply_error(r, c, status, -32000, why);
	if ((r->kind == REQ_GET || r->kind == REQ_DELETE) && !header(c, SID_HEADER) &&
	    era_of_version(header(c, VERSION_HEADER)) == ERA_STATELESS)
		return reply_error(r, c, 405, -32000,
			"Method Not Allowed: protocol " ERA_STATELESS_VERSION " uses POST only");
	if (r->kind == REQ_GET)
		return r->ep == EP_SSE ? http_legacy_open(f, r) : on_get(f, r);
	if (r->kind == REQ_DELETE)
		return on_delete(f, r);
	hc_read_body(c);
	return 0;
}

/* A POST's body is whole. */
static int on_body(void *cls, struct hc_conn *c, struct buf *body)
{
	struct http_front *f = cls;
	struct hreq *r = hc_ctx(c);
	if (!r)
		return -1;
	r->body = *body;   /* taken */
	memset(body, 0, sizeof *body);
	return r->ep == EP_MESSAGES ? http_legacy_post(f, r) : on_post(f, r);
}

/* Something came for a request that has no answer yet. */
static int on_resume(void *cls, struct hc_conn *c)
{
	struct http_front *f = cls;
	struct hreq *r = hc_ctx(c);
	if (!r)
		return 0;
	if (r->aborted)   /* its client left, or it was dropped */
		return -1;
	if (r->deferred) {   /* its first line (or its end) came */
		if (!r->done && !r->sse)   /* a JSON body waits for all of it */
			return 0;
		return reply_now_or_stream(r, r->sid);
	}
	if (r->kind == REQ_POST && !r->queued)   /* held for the tool list: taken again */
		return r->ep == EP_MESSAGES ? http_legacy_post(f, r) : on_post(f, r);
	return 0;
}

/* A request ended: a stream still waiting was left by its client. */
static void on_end(void *cls, struct hc_conn *c, void *ctx, bool ok)
{
	struct hreq *r = ctx;
	(void)cls;
	(void)c;
	r->conn = NULL;
	if (ok) {
		stream_detach(r, NULL);
		kept_remove(r);            /* all of it was sent: nothing to resume */
	} else if (!r->parked && (r->sess || r->keep)) {
		stream_lost(r, "the client disconnected");
	}
	req_unref(r);
}

/* ---- life ---- */

/* A copy of a NULL-terminated string vector (NULL stays NULL). */
static char **strv_dup(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	if (!v)
		return NULL;
	char **out = calloc(n + 1, sizeof *out);
	for (size_t i = 0; out && i < n; i++)
		out[i] = strdup(v[i]);
	return out;
}

/* Frees a NULL-terminated string vector. */
static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* True for an address only this machine reaches. */
static bool loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* Listens on the address with L's bounds; 0 or -1 (logged). */
static int front_listen(struct http_front *f, const struct cfg_listen *l)
{
	static const struct hc_handler handler = {
		.on_head = on_head, .on_body = on_body, .on_resume = on_resume,
		.on_end = on_end, .on_refuse = on_refuse,
	};
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, f->address, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)l->port);
		len = sizeof *v4;
	} else if (inet_pton(AF_INET6, f->address, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)l->port);
		len = sizeof *v6;
	} else {
		return log_fail("http: %s is not a numeric address", f->address);
	}
	if (!loopback(&ss))
		log_warn("http: listening on %s, which other machines may reach: check "
			 "\"allowedHosts\", \"allowedOrigins\" and add authentication", f->address);
	struct hc_limits lim = {
		.max_conns = f->max_conns,
		.timeout = l->conn_timeout >= 1 ? l->conn_timeout : 60,
		.max_head = HTTP_MAX_HEAD,
		.max_body = f->max_message,
		.body_budget = l->body_budget ? l->body_budget : 2 * (uint64_t)f->max_message,
	};
	f->hs = hc_server_new((struct sockaddr *)&ss, len, &lim, &handler, f, &f->port);
	if (!f->hs)
		return log_fail("http: cannot listen on %s port %u: %s", f->address, l->port,
				strerror(errno));
	return 0;
}

/* Starts the front. */
struct http_front *http_front_new(struct chain *chain, const struct cfg_listen *l, size_t max)
{
	struct http_front *f = calloc(1, sizeof *f);
	struct hmap empty = HMAP_INIT;
	if (!f)
		return NULL;
	f->chain = chain;
	f->sessions = empty;
	f->instances = empty;
	ev_init(&f->probe_bound, on_probe_bound);
	f->probe_bound.data = f;
	f->address = strdup(l->address ? l->address : CFG_DEFAULT_LISTEN_ADDRESS);
	f->path = strdup(l->path ? l->path : CFG_DEFAULT_LISTEN_PATH);
	if (l->sse_path && l->messages_path) {
		f->sse_path = strdup(l->sse_path);
		f->messages_path = strdup(l->messages_path);
	}
	f->origins = strv_dup(l->origins);
	f->hosts = strv_dup(l->hosts);
	f->max_conns = l->max_connections ? l->max_connections : 256;
	f->max_sessions = l->max_sessions ? l->max_sessions : 4096;
	f->max_per_client = l->max_sessions_per_client ? l->max_sessions_per_client : 1024;
	f->max_per_principal = l->max_sessions_per_principal ? l->max_sessions_per_principal : 256;
	f->session_idle = l->session_idle > 0 ? l->session_idle : 1800;
	f->stream_buffer = l->stream_buffer ? l->stream_buffer : (8 << 20);
	f->resume_grace = l->resume_grace;
	/* a client told to wait this long between attempts resumes within the
	 * grace even on its second try */
	double retry = l->resume_grace * 1000 / 3;
	f->retry_ms = l->resume_grace <= 0 ? 0 : retry > 1000 ? 1000 : retry < 1 ? 1 : (unsigned)retry;
	f->max_message = max;
	if (front_listen(f, l) < 0) {
		http_front_free(f);
		return NULL;
	}
	bool v6 = strchr(f->address, ':') != NULL;
	log_info("http: listening on http://%s%s%s:%u%s", v6 ? "[" : "", f->address,
		 v6 ? "]" : "", f->port, f->path);
	if (f->sse_path)
		log_info("http: legacy HTTP+SSE (2024-11-05) on http://%s%s%s:%u%s", v6 ? "[" : "",
			 f->address, v6 ? "]" : "", f->port, f->sse_path);
	return f;
}

unsigned http_front_port(const struct http_front *f) { return f->port; }

void http_front_set_ready(struct http_front *f, bool (*ready)(void *arg), void *arg)
{
	f->ready = ready;
	f->ready_arg = arg;
}

size_t http_front_sessions(const struct http_front *f) { return f->sessions.count; }

void http_front_set_session_chains(struct http_front *f, http_chain_make_fn make,
				   http_chain_release_fn release, void *arg)
{
	f->chain_make = make;
	f->chain_release = release;
	f->chain_arg = arg;
}

void http_front_set_input_ttl(struct http_front *f, double seconds) { f->input_ttl = seconds; }
void http_front_offer_stateless(struct http_front *f, bool always) { f->offer_stateless = always; }

/* Ends every session (the map changes under us: one at a time). */
static void end_all(struct http_front *f, const char *reason)
{
	size_t n;
	void **all = hmap_drain(&f->sessions, &n);
	for (size_t i = 0; i < n; i++) {
		struct hsess *hs = all[i];
		hmap_put(&f->sessions, hs->sid, HTTP_SID_LEN, hs);  /* sess_end removes it */
		sess_end(hs, reason);
	}
	free(all);
}

/* Closes the listening socket: no new connection. */
static void stop_accepting(struct http_front *f)
{
	if (!f->hs || f->draining)
		return;
	f->draining = true;
	hc_server_quiesce(f->hs);
}

/* Ends the GET stream of a session (a hmap_each callback). */
static void end_get(void *value, void *arg)
{
	struct hsess *hs = value;
	(void)arg;
	if (hs->get && !hs->legacy)  /* a legacy stream carries its answers too */
		stream_finish(hs->get);
}

/* Stops accepting, ends GET streams; open requests go on. */
void http_front_drain(struct http_front *f)
{
	stop_accepting(f);
	hmap_each(&f->sessions, end_get, NULL);
	log_info("http: draining (%zu session(s), %zu request(s) open)", f->sessions.count,
		 http_front_busy(f));
}

/* Adds a session's awaited responses to *ARG (a hmap_each callback). */
static void count_pending(void *value, void *arg)
{
	struct hsess *hs = value;
	for (struct hreq *r = hs->streams; r; r = r->next)
		*(size_t *)arg += r->pending;
	if (hs->legacy && session_busy(hs->s))
		*(size_t *)arg += 1;
}

/* Requests still waiting for their response, in every session. */
size_t http_front_busy(const struct http_front *f)
{
	size_t n = 0;
	hmap_each(&f->sessions, count_pending, &n);
	return n;
}

/* Stops accepting and ends the sessions. */
void http_front_stop(struct http_front *f, const char *reason)
{
	if (f->stopped)
		return;
	f->stopped = true;
	stop_accepting(f);
	if (f->hs)
		hc_server_stop(f->hs);
	end_all(f, reason);
}

/* Frees the front: its sessions end, then its connections close. */
void http_front_free(struct http_front *f)
{
	if (!f)
		return;
	http_front_stop(f, "mcp-chain is shutting down");
	hc_server_free(f->hs);
	f->hs = NULL;
	hmap_release(&f->sessions);
	hmap_release(&f->instances);
	param_table_release(&f->params);
	buf_release(&f->line);
	ev_timer_stop(EV_DEFAULT, &f->probe_bound);
	strv_free(f->origins);
	strv_free(f->hosts);
	free(f->address);
	free(f->path);
	free(f->sse_path);
	free(f->messages_path);
	free(f);
}

/* ---- shared with http_legacy.c (http_int.h) ---- */

const char *hf_header(struct hc_conn *c, const char *name) { return header(c, name); }

int hf_reply(struct hreq *r, struct hc_conn *c, unsigned status,
			 const char *ctype, const char *body, size_t n, const char *sid)
{
	return reply(r, c, status, ctype, body, n, sid);
}

int hf_reply_error(struct hreq *r, struct hc_conn *c, unsigned status,
			       int code, const char *text)
{
	return reply_error(r, c, status, code, text);
}

int hf_reply_stream(struct hreq *r) { return reply_stream(r, NULL); }

struct hsess *hf_sess_new(struct http_front *f, struct hc_conn *c, char *why, size_t n)
{
	return sess_open(f, c, why, n);
}

void hf_sess_add_stream(struct hsess *hs, struct hreq *r) { sess_add_stream(hs, r); }

void hf_stream_send(struct hreq *r, const char *line, size_t n) { stream_send(r, line, n); }

void hf_sess_end(struct hsess *hs, const char *reason) { sess_end(hs, reason); }

/* ---- bearer credentials (the auth module checks them through the core) ---- */

/* The bearer token of C's Authorization header (*N bytes), or NULL. */
static const char *bearer(struct hc_conn *c, size_t *n)
{
	const char *v = header(c, "Authorization");
	if (!v || strncasecmp(v, "Bearer ", 7) != 0)
		return NULL;
	v += 7;
	while (*v == ' ')
		v++;
	size_t len = strlen(v);
	while (len > 0 && v[len - 1] == ' ')
		len--;
	*n = len;
	return len ? v : NULL;
}

/*
 * 0, or 401 with *WHY when a module checks credentials (auth) and C's
 * bearer token is missing or unknown. The token goes to the modules
 * through the core (chain_check_credential), never to a log.
 */
unsigned hf_check_auth(struct http_front *f, struct hc_conn *c, const char **why)
{
	size_t n = 0;
	const char *tok = bearer(c, &n);
	if (chain_check_credential(f->chain, tok, n) >= 0)
		return 0;
	*why = tok ? "Unauthorized: the bearer token is not valid" :
		     "Unauthorized: a bearer token is required (Authorization: Bearer ...)";
	return 401;
}

/* Binds C's bearer token to HS (modules read it as ctx->credential);
 * -1 when HS is bound to another. */
int hf_bind_credential(struct hsess *hs, struct hc_conn *c)
{
	size_t n = 0;
	const char *tok = bearer(c, &n);
	if (!tok)
		return 0;
	if (session_set_credential(hs->s, tok, n) < 0)
		return -1;
	if (!hs->has_cred)
		hs->has_cred = cred_key(tok, n, hs->cred) == 0;
	return 0;
}

/* ---- /metrics ---- */

void http_front_set_metrics(struct http_front *f, void (*fn)(struct buf *out, void *arg),
			    void *arg)
{
	f->metrics = fn;
	f->metrics_arg = arg;
}

/* Counts the sessions of each transport (a hmap_each callback). */
static void count_legacy(void *value, void *arg)
{
	if (((struct hsess *)value)->legacy)
		(*(size_t *)arg)++;
}

/* True when requests with method M were counted. */
static bool method_seen(const struct http_front *f, unsigned m)
{
	for (unsigned o = 0; o < REQ_NOUTCOMES; o++)
		if (f->outcomes[m][o])
			return true;
	return false;
}

/* Requests by method and outcome, and the latency histogram (methods
 * never seen are left out; a seen one has every outcome and bucket). */
static void request_metrics(struct http_front *f, struct buf *b)
{
	static const char *const outcome[REQ_NOUTCOMES] = { "ok", "error", "tool_error", "given_up" };
	buf_printf(b, "# HELP mcp_chain_http_requests_total Streamable HTTP requests by method and "
		   "how they ended: ok, error (JSON-RPC), tool_error (isError), given_up (the client "
		   "left and did not resume, or the session ended first).\n"
		   "# TYPE mcp_chain_http_requests_total counter\n");
	for (unsigned m = 0; m < HTTP_STATS_NMETHODS; m++)
		for (unsigned o = 0; method_seen(f, m) && o < REQ_NOUTCOMES; o++)
			buf_printf(b, "mcp_chain_http_requests_total{method=\"%s\",outcome=\"%s\"} %llu\n",
				   http_stats_methods[m], outcome[o], f->outcomes[m][o]);
	buf_printf(b, "# HELP mcp_chain_http_request_duration_seconds Time from a request's POST "
		   "to its answer, by method.\n"
		   "# TYPE mcp_chain_http_request_duration_seconds histogram\n");
	for (unsigned m = 0; m < HTTP_STATS_NMETHODS; m++) {
		if (!method_seen(f, m))
			continue;
		unsigned long long n = 0;
		for (unsigned i = 0; i <= HTTP_STATS_NBUCKETS; i++) {
			n += f->latency[m][i];
			if (i < HTTP_STATS_NBUCKETS)
				buf_printf(b, "mcp_chain_http_request_duration_seconds_bucket{method=\"%s\","
					   "le=\"%g\"} %llu\n", http_stats_methods[m], http_stats_latency_bounds[i], n);
		}
		buf_printf(b, "mcp_chain_http_request_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} "
			   "%llu\nmcp_chain_http_request_duration_seconds_sum{method=\"%s\"} %.9g\n"
			   "mcp_chain_http_request_duration_seconds_count{method=\"%s\"} %llu\n",
			   http_stats_methods[m], n, http_stats_methods[m], f->latency_sum[m], http_stats_methods[m], n);
	}
}

/* The front's own lines: sessions, connections, responses by status, bytes. */
static void front_metrics(struct http_front *f, struct buf *b)
{
	size_t legacy = 0;
	hmap_each(&f->sessions, count_legacy, &legacy);
	buf_printf(b, "# HELP mcp_chain_http_sessions Client sessions open, by transport.\n"
		   "# TYPE mcp_chain_http_sessions gauge\n"
		   "mcp_chain_http_sessions{transport=\"streamable\"} %zu\n"
		   "mcp_chain_http_sessions{transport=\"sse\"} %zu\n"
		   "# HELP mcp_chain_http_sessions_started_total Client sessions started.\n"
		   "# TYPE mcp_chain_http_sessions_started_total counter\n"
		   "mcp_chain_http_sessions_started_total %u\n"
		   "# HELP mcp_chain_http_connections HTTP connections open.\n"
		   "# TYPE mcp_chain_http_connections gauge\n"
		   "mcp_chain_http_connections %u\n"
		   "# HELP mcp_chain_http_responses_total HTTP responses, by status.\n"
		   "# TYPE mcp_chain_http_responses_total counter\n",
		   f->sessions.count - legacy, legacy, f->serial, hc_server_conns(f->hs));
	for (unsigned s = 100; s < 600; s++)
		if (hc_server_responses(f->hs, s))
			buf_printf(b, "mcp_chain_http_responses_total{code=\"%u\"} %llu\n", s,
				   hc_server_responses(f->hs, s));
	buf_printf(b, "# HELP mcp_chain_http_received_bytes_total Request bodies received.\n"
		   "# TYPE mcp_chain_http_received_bytes_total counter\n"
		   "mcp_chain_http_received_bytes_total %llu\n"
		   "# HELP mcp_chain_http_sent_bytes_total Response bodies sent.\n"
		   "# TYPE mcp_chain_http_sent_bytes_total counter\n"
		   "mcp_chain_http_sent_bytes_total %llu\n", hc_server_bytes_in(f->hs),
		   hc_server_bytes_out(f->hs));
	request_metrics(f, b);
}

int hf_on_metrics(struct http_front *f, struct hc_conn *c)
{
	enum req_kind kind;
	const char *why = NULL;
	unsigned status = check_headers(f, c, "GET", &kind, &why);
	if (!status)
		status = hf_check_auth(f, c, &why);
	if (status)
		return reply_error(NULL, c, status, -32000, why);
	struct buf b = BUF_INIT;
	front_metrics(f, &b);
	if (f->metrics)
		f->metrics(&b, f->metrics_arg);
	int rc = reply(NULL, c, 200, "text/plain; version=0.0.4; charset=utf-8",
				   b.data ? b.data : "", buf_pending(&b), NULL);
	buf_release(&b);
	return rc;
}
