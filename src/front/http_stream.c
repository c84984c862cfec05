/*
 * http_stream.c - the HTTP front's response streams (struct hreq as a
 * stream): their references, what is sent down them (SSE events or a JSON
 * body, held until the first line shows which), a stalled reader dropped,
 * a lost connection parked for a resume and a POST stream resumed by a
 * GET (docs/http-front.md, "Resuming a stream"), the GET stream's kept
 * events and the messages held for it while it is not open, and the
 * replies the front queues on the HTTP/1.1 layer (http_conn.h).
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "era.h"
#include "http_conn.h"
#include "http_int.h"
#include "http_ring.h"
#include "http_routes.h"
#include "http_stats.h"
#include "log.h"
#include "msg.h"
#include "rpc.h"
#include "session.h"
#include "sse_frame.h"

static void ring_keep(struct hsess *hs, uint64_t seq, const char *bytes, size_t n);

/* ---- streams ---- */

/* Drops a reference to R; frees it with the last. */
void http_stream_unref(struct hreq *r)
{
	if (--r->refs > 0)
		return;
	mw_cred_wait_cancel(&r->auth_wait);
	http_cluster_req_end(r);
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
void http_stream_wake(struct hreq *r)
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
void http_stream_detach(struct hreq *r, const char *reason)
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
void http_stream_finish(struct hreq *r)
{
	r->done = true;
	http_stream_detach(r, NULL);
	http_stream_wake(r);
}

/* Drops R's connection and R: the client stalled or left (its requests
 * are cancelled with REASON). May free R. */
void http_stream_abort(struct hreq *r, const char *reason)
{
	r->aborted = true;
	http_stream_detach(r, reason);
	http_stream_wake(r);
	http_stream_kept_remove(r);
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
void http_stream_kept_remove(struct hreq *r)
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
		http_stream_wake(r);
	http_ring_release(&r->ring);
	http_stream_unref(r);
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
void http_stream_on_grace(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hreq *r = w->data;
	(void)loop;
	(void)revents;
	if (r->sess) {
		log_info("http: session #%u: a POST stream was not resumed within %g s: its "
			 "request(s) are cancelled", r->sess->serial, r->f->resume_grace);
		http_stream_detach(r, "the client disconnected");
	} else if (r->home) {
		log_debug("http: session #%u: stream %u ended with an answer nobody resumed to read",
			  r->home->serial, r->stream_no);
	}
	http_stream_kept_remove(r);
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
	http_stream_wake(r);
	log_debug("http: session #%u: stream %u lost its connection; kept %g s for a resume",
		  r->home->serial, r->stream_no, r->f->resume_grace);
}

/* R's client left (REASON) before R ended: parked when it may be resumed,
 * else dropped with its requests cancelled. May free R. */
void http_stream_lost(struct hreq *r, const char *reason)
{
	if (stream_can_park(r))
		stream_park(r);
	else
		http_stream_abort(r, reason);
}

/*
 * A stateless call's first line, while its HTTP status is not sent yet:
 * an error answer that the era gives a status of its own is sent with
 * that status.
 */
void http_stream_defer_note(struct hreq *r, const struct session_out *o)
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
 * stream); a JSON one only once it has all (http_stream_finish wakes it).
 */
static void defer_line(struct hreq *r, const char *line, size_t n)
{
	if (buf_append(&r->first, line, n) < 0 || buf_append(&r->first, "\n", 1) < 0) {
		log_error("http: session #%u: out of memory for a stream", r->sess->serial);
		http_stream_abort(r, "mcp-chain ran out of memory");
		return;
	}
	r->nfirst++;
	if (r->sse)
		http_stream_wake(r);
}

/*
 * Appends one message line to R. A reader that stalls is dropped once
 * more than streamBufferBytes wait before a message: memory stays bounded
 * (by that and one message), and one large message always passes.
 */
void http_stream_send(struct hreq *r, const char *line, size_t n)
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
		http_stream_abort(r, r->parked ? "the client disconnected" : "the client's stream stalled");
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
		http_stream_abort(r, "mcp-chain ran out of memory");
		return;
	}
	if (r->sse)
		r->primed = true;
	http_stream_wake(r);
}

/*
 * The same for a message given as pieces (IOV, N), copied once on the
 * common ways -- held for the first answer, a JSON body, an SSE event --
 * and gathered into the front's scratch line first only for a resumable
 * stream's ring.
 */
void http_stream_send_iov(struct hreq *r, const struct iovec *iov, int n)
{
	struct hsess *hs = r->sess;
	if (!hs)
		return;
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	bool over = !r->deferred && (r->keep ? r->ring.fresh : buf_pending(&r->out)) > r->f->stream_buffer;
	if (r->keep || over || (r->sse && r == hs->get)) {
		/* the ring, the GET stream's kept events, a stalled reader: by line */
		struct buf *line = &r->f->line;
		buf_reset(line);
		for (int i = 0; i < n; i++)
			if (buf_append(line, iov[i].iov_base, iov[i].iov_len) < 0)
				goto oom;
		http_stream_send(r, line->data ? line->data : "", len);
		return;
	}
	int rc = 0;
	struct buf *to = r->deferred ? &r->first : &r->out;
	if (r->deferred || !r->sse) {
		rc = buf_reserve(to, len + 1);
		for (int i = 0; rc == 0 && i < n; i++)
			rc = buf_append(to, iov[i].iov_base, iov[i].iov_len);
		if (rc == 0 && r->deferred)
			rc = buf_append(to, "\n", 1);
	} else {
		rc = sse_frame_event_iov(&r->out, r->stream_no, ++r->seq, iov, n);
	}
	if (rc < 0)
		goto oom;
	if (r->deferred) {
		r->nfirst++;
		if (r->sse)
			http_stream_wake(r);
		return;
	}
	if (r->sse)
		r->primed = true;
	http_stream_wake(r);
	return;
oom:
	log_error("http: session #%u: out of memory for a stream", hs->serial);
	http_stream_abort(r, "mcp-chain ran out of memory");
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

#define REPLY_HEAD (512 + HTTP_SID_MAX)  /* a sealed session id is long */

/* The headers of a complete response, into H (REPLY_HEAD bytes). */
static void reply_headers(char *h, struct hc_conn *c, unsigned status, const char *ctype,
			  const char *sid)
{
	int len = 0;
	h[0] = '\0';
	if (ctype)
		len += snprintf(h + len, REPLY_HEAD - (size_t)len, "Content-Type: %s\r\n%s", ctype,
				strcmp(ctype, SSE_TYPE) == 0 ? SSE_HEADERS : "");
	if (sid)
		len += snprintf(h + len, REPLY_HEAD - (size_t)len, SID_HEADER ": %s\r\n", sid);
	if (status == 405)
		len += snprintf(h + len, REPLY_HEAD - (size_t)len, "Allow: GET, POST, DELETE\r\n");
	(void)c;
}

/* Queues a complete response; CTYPE may be NULL for an empty body. */
int http_stream_reply(struct hreq *r, struct hc_conn *c, unsigned status,
		      const char *ctype, const char *body, size_t n, const char *sid)
{
	return http_stream_reply_with(r, c, status, ctype, body, n, sid, NULL);
}

/* The same with EXTRA header lines ("Name: value\r\n"..., or NULL). */
int http_stream_reply_with(struct hreq *r, struct hc_conn *c, unsigned status,
			   const char *ctype, const char *body, size_t n, const char *sid,
			   const char *extra)
{
	char h[REPLY_HEAD + 1024];
	reply_headers(h, c, status, ctype, sid);
	if (extra)
		snprintf(h + strlen(h), sizeof h - strlen(h), "%s", extra);
	if (r)
		r->queued = true;
	return hc_reply(c, status, h, body, n) < 0 ? -1 : 0;
}

/* The same with the body in BODY, whose memory the connection takes: it is
 * written from there (the one copy between the chain and the socket is
 * the one into BODY). */
static int reply_buf(struct hreq *r, unsigned status, const char *ctype, struct buf *body,
		     const char *sid)
{
	char h[REPLY_HEAD];
	reply_headers(h, r->conn, status, ctype, sid);
	r->queued = true;
	return hc_reply_buf(r->conn, status, h, body) < 0 ? -1 : 0;
}

/* Queues STATUS with a JSON-RPC error body (id null) saying TEXT. */
int http_stream_reply_error(struct hreq *r, struct hc_conn *c, unsigned status,
			    int code, const char *text)
{
	return http_stream_reply_error_with(r, c, status, code, text, NULL);
}

/* The same with EXTRA header lines (or NULL). */
int http_stream_reply_error_with(struct hreq *r, struct hc_conn *c, unsigned status,
				 int code, const char *text, const char *extra)
{
	/* the id of the one request the body holds, once read; else null */
	json_t *id = r && r->nids == 1 ? msg_val_json(&r->ids[0]) : NULL;
	json_t *e = rpc_error(id, code, text, NULL);
	json_decref(id);
	char *s = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	int rc = http_stream_reply_with(r, c, status, JSON_TYPE, s ? s : "", s ? strlen(s) : 0,
					NULL, extra);
	free(s);
	return rc;
}

/* Queues R's stream response: SSE or a JSON body, as it comes. */
int http_stream_reply_stream(struct hreq *r, const char *sid)
{
	char h[256 + HTTP_SID_MAX];
	int len = snprintf(h, sizeof h, "Content-Type: %s\r\n%s", r->sse ? SSE_TYPE : JSON_TYPE,
			   r->sse ? SSE_HEADERS : "");
	if (sid)
		snprintf(h + len, sizeof h - (size_t)len, SID_HEADER ": %s\r\n", sid);
	r->queued = true;
	return hc_stream(r->conn, 200, h, stream_read) < 0 ? -1 : 0;
}

/* ---- the GET stream and the messages held for it ---- */

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
void http_stream_get_replay(struct hsess *hs, struct hreq *r, uint64_t seq)
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
void http_stream_held_clear(struct hsess *hs)
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
void http_stream_to_get(struct hsess *hs, const char *line, size_t n)
{
	if (hs->stateless) {
		/* no GET stream in this era: the call's (or the listen's) own stream */
		for (struct hreq *r = hs->streams; r; r = r->next) {
			if (r->sse) {
				http_stream_send(r, line, n);
				return;
			}
		}
		log_debug("http: stateless #%u: a message with no stream to carry it was dropped",
			  hs->serial);
		return;
	}
	if (hs->get) {
		http_stream_send(hs->get, line, n);
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

/* ---- answering a POST ---- */

/*
 * Makes the POST stream R resumable: its head is the retry hint and, for
 * a client of 2025-11-25 or later (older ones may choke on an event with
 * empty data), the priming event, so the client holds an id at once
 * (R->head, set in hf_post_to_session).
 */
static void stream_open_resumable(struct hsess *hs, struct hreq *r)
{
	bool prime = r->head == 2;
	kept_add(hs, r);
	if (sse_frame_head(&r->out, r->stream_no, hs->f->retry_ms, prime) == 0 && prime)
		r->primed = true;
}

/*
 * R's response, now that something of it is there (or all of it). All of
 * it: one body with its length, sent with the headers -- JSON for a client
 * that reads no stream (and for a 2026-07-28 error with its era's status),
 * else the SSE events a stream would have carried. Not all of it yet: an
 * SSE stream that begins with the lines held.
 */
int http_stream_reply_now_or_stream(struct hreq *r, const char *sid)
{
	struct hc_conn *c = r->conn;
	const char *held = r->first.data + r->first.off;
	size_t n = buf_pending(&r->first);
	r->deferred = false;
	if (r->done && n == 0 && !r->sse)   /* cancelled by its client: nothing will answer */
		return http_stream_reply(r, c, 202, NULL, "", 0, sid);
	if (r->done && (!r->sse || r->status_hint)) {
		if (n > 0 && held[n - 1] == '\n')
			r->first.len--;
		return reply_buf(r, r->status_hint ? r->status_hint : 200, JSON_TYPE, &r->first, sid);
	}
	if (r->done) {
		struct buf body = { 0 };
		int rc = r->head ? sse_frame_head(&body, r->stream_no, r->f->retry_ms, r->head == 2) : 0;
		for (size_t i = 0; i < n && rc == 0;) {
			size_t len = (size_t)((const char *)memchr(held + i, '\n', n - i) - (held + i));
			rc = sse_frame_event(&body, r->stream_no, ++r->seq, held + i, len);
			i += len + 1;
		}
		int res = rc < 0 ? -1 : reply_buf(r, 200, SSE_TYPE, &body, sid);
		buf_release(&body);
		return res;
	}
	struct hsess *hs = r->sess;   /* NULL once R has all its answers */
	if (hs && http_sess_resumable(hs))
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
	return http_stream_reply_stream(r, sid);
}

/* ---- resuming a POST stream ---- */

/*
 * A GET with Last-Event-ID naming event SEQ of the POST stream STREAM: G
 * takes that stream over -- the kept events after SEQ first, then what
 * comes for it, and it ends after the stream's last answer, as the POST's
 * response would have. The connection that stream had, if we had not seen
 * it go yet, is closed. 400 when HS keeps no such stream (it ended, or was
 * not resumed within resumeGraceMs and its requests were cancelled).
 */
int http_stream_resume_post(struct hsess *hs, struct hreq *g, unsigned stream,
			    uint64_t seq)
{
	struct hreq *r = hs->kept;
	uint64_t lost;
	while (r && r->stream_no != stream)
		r = r->knext;
	if (!r)
		return http_stream_reply_error(g, g->conn, 400, -32000,
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
		http_stream_detach(r, NULL);   /* nothing of it is left to route */
		http_sess_add_stream(hs, g);
	} else {
		g->done = true;           /* it had ended: its answer is among the kept events */
	}
	r->aborted = true;
	http_stream_wake(r);
	kept_add(hs, g);
	http_stream_kept_remove(r);
	if (sse_frame_head(&g->out, g->stream_no, hs->f->retry_ms, false) < 0)
		return -1;
	return http_stream_reply_stream(g, NULL);
}
