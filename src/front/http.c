/*
 * http.c - the Streamable HTTP front: the front object (its listening
 * socket, bounds and life) and the dispatch of what the HTTP/1.1 layer
 * hands it (http_conn.h): each request's head, body, resumption and end,
 * to POST, GET, DELETE and the front's other paths (http_front.h,
 * docs/http-front.md).
 *
 * Objects: a struct hreq is one HTTP request; a POST that carries
 * requests, and a GET, become response streams (an SSE stream, or a JSON
 * body sent in chunks: http_stream.c). A stream is owned jointly by its
 * connection (the request context, released in on_end), by its session's
 * kept list while it may be resumed, and by the calls held for the tool
 * list: it is freed when all have let go. A struct hsess is one session
 * (http_sess.c); it lists its open streams, and a stream points back to
 * it until it is detached (its request ended, or the session did).
 * The rest of the front: http_probe.c (the x-mcp-header marks),
 * http_stateless.c (a 2026-07-28 POST), http_auth.c (bearer tokens),
 * http_metrics.c (/metrics), http_ui.c (the live page, /ui), http_legacy.c
 * (HTTP+SSE); http_int.h is what they share.
 */
#include "http_front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "era.h"
#include "hmap.h"
#include "http_check.h"
#include "http_conn.h"
#include "http_int.h"
#include "http_ring.h"
#include "http_routes.h"
#include "http_sid.h"
#include "http_stats.h"
#include "log.h"
#include "msg.h"
#include "rpc.h"
#include "session.h"
#include "sse_frame.h"
#include "trace.h"

/* ---- requests ---- */

/* A header of C, or NULL. */
const char *hf_header(struct hc_conn *c, const char *name)
{
	return hc_header(c, name);
}

/*
 * Finds the session a request names: 0 with *HS, or an HTTP status (400
 * without a session id, 404 for one we do not know) with *WHY.
 */
static unsigned find_session(struct http_front *f, struct hc_conn *c,
			     struct hsess **hs, const char **why, bool resume)
{
	const char *sid = hf_header(c, SID_HEADER);
	const char *v = hf_header(c, VERSION_HEADER);
	*hs = NULL;
	if (!sid) {
		*why = "Bad Request: Mcp-Session-Id header is required";
		return 400;
	}
	if (v && !session_version_supported(v)) {
		*why = "Bad Request: unsupported MCP-Protocol-Version";
		return 400;
	}
	if (!http_sid_valid(sid)) {
		*why = "Session not found";
		return 404;
	}
	*hs = hmap_get(&f->sessions, sid, strlen(sid));
	if (!*hs && resume) {
		/* one this instance does not hold: continued here when sealed */
		unsigned status = http_cluster_resume(f, c, sid, hs, why);
		if (status)
			return status;
	}
	if (!*hs || (*hs)->legacy) {   /* an HTTP+SSE session is reached by its own endpoint */
		*hs = NULL;
		*why = "Session not found";
		return 404;
	}
	if (http_auth_bind(*hs, hc_ctx(c)) < 0) {
		*why = "Unauthorized: this session belongs to another bearer token (another principal)";
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

/* Hands R's body to HS's session and queues what answers it. */
int hf_post_to_session(struct hreq *r, struct hsess *hs, bool is_init)
{
	struct hc_conn *c = r->conn;
	const char *sid = is_init ? hs->sid : NULL;
	for (size_t i = 0; i < r->nids; i++) {
		if (http_routes_add_id(&hs->routes, &r->ids[i], r) != 0) {
			for (size_t j = 0; j < i; j++)
				http_routes_drop_id(&hs->routes, &r->ids[j], r);
			r->nids = 0;  /* nothing of ours to cancel */
			return http_stream_reply_error(r, c, 400, RPC_INVALID_REQUEST,
				"Bad Request: a request with this id is already open in this session");
		}
	}
	r->pending = r->nids;
	r->sse = http_check_accepts(hf_header(c, "Accept"), SSE_TYPE);
	r->stream_no = ++hs->next_stream;
	r->t0 = http_metrics_now();
	r->deferred = r->nids > 0;   /* one body or a stream: its first line decides */
	if (http_sess_resumable(hs)) {
		const char *v = session_version(hs->s);
		r->head = v && strcmp(v, "2025-11-25") >= 0 ? 2 : 1;
	}
	http_sess_add_stream(hs, r);
	r->scanned = false;   /* the session takes the message (its bytes, borrowed, for the call) */
	if (trace_active())   /* the POST's trace context goes with it */
		session_set_trace_context(hs->s, hf_header(c, "traceparent"),
					  hf_header(c, "tracestate"));
	session_receive_msg(hs->s, &r->msg, r);
	if (trace_active())
		session_set_trace_context(hs->s, NULL, NULL);
	buf_release(&r->body);
	if (buf_pending(&r->err) > 0) {
		r->deferred = false;
		http_stream_detach(r, NULL);  /* refused whole: nothing of it is open */
		return http_stream_reply(r, c, 400, JSON_TYPE, r->err.data,
			     buf_pending(&r->err), sid);
	}
	if (r->nids == 0) {
		http_stream_detach(r, NULL);
		return http_stream_reply(r, c, 202, NULL, "", 0, sid);
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
	return http_stream_reply_now_or_stream(r, sid);
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
		int rc = http_stream_reply(r, c, 400, JSON_TYPE, s ? s : "",
					   s ? strlen(s) : 0, NULL);
		free(s);
		return rc;
	}
	char awhy[300], chal[1024];
	unsigned astatus = http_auth_check_body(f, r, &r->msg, awhy, chal, sizeof chal);
	if (astatus)   /* before anything of it reaches a session */
		return http_auth_refuse(r, c, astatus, awhy, chal);
	if (f->draining && r->nids > 0)
		return http_stream_reply_error(r, c, 503, -32000,
				   "Service Unavailable: mcp-chain is shutting down");
	int src;
	if ((!is_init || era_of_version(hf_header(c, VERSION_HEADER)) == ERA_STATELESS) &&
	    !hf_header(c, SID_HEADER) && http_stateless_post(f, r, is_discover, &src))
		return src;
	if (is_init && !hf_header(c, SID_HEADER)) {
		char refused[300] = "";
		char *sealed = f->stopped ? NULL : http_cluster_sid(f, r);
		hs = f->stopped ? NULL : http_sess_open(f, c, sealed, refused, sizeof refused);
		free(sealed);
		if (!hs)
			return http_stream_reply_error(r, c, 503, -32000, refused[0] ?
					   refused : "Service Unavailable: cannot open a session now");
		http_auth_bind(hs, r);
	} else {
		unsigned status = find_session(f, c, &hs, &why, true);
		if (status)
			return http_stream_reply_error(r, c, status, -32000, why);
		if (f->sealing.nkeys && r->scanned && !json_is_array(r->msg.tree))
			http_cluster_note(hs, &r->msg);
	}
	return hf_post_to_session(r, hs, is_init);
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
	if (!http_check_accepts(hf_header(c, "Accept"), SSE_TYPE))
		return http_stream_reply_error(r, c, 406, -32000,
				   "Not Acceptable: the GET stream is text/event-stream");
	unsigned status = find_session(f, c, &hs, &why, true);
	if (status)
		return http_stream_reply_error(r, c, status, -32000, why);
	bool resume = sse_frame_id_parse(hf_header(c, "Last-Event-ID"), &stream, &seq) == 0;
	if (resume && stream > 0)
		return http_stream_resume_post(hs, r, stream, seq);
	if (f->draining)
		return http_stream_reply_error(r, c, 503, -32000,
				   "Service Unavailable: mcp-chain is shutting down");
	if (hs->get)
		return http_stream_reply_error(r, c, 409, -32000,
				   "Conflict: this session's GET stream is already open");
	r->sse = true;
	http_sess_add_stream(hs, r);
	hs->get = r;
	if (resume)
		http_stream_get_replay(hs, r, seq);
	while (hs->held) {
		struct held *h = hs->held;
		hs->held = h->next;
		http_stream_send(r, h->line, h->n);
		free(h);
	}
	http_stream_held_clear(hs);  /* empty, unless the stream was dropped on the way */
	hs->held_tail = &hs->held;
	hs->held_bytes = 0;
	if (hs->held_dropped)
		log_info("http: session #%u: GET stream open; %zu message(s) held for it were "
			 "dropped", hs->serial, hs->held_dropped);
	hs->held_dropped = 0;
	return http_stream_reply_stream(r, NULL);
}

/* A DELETE: the client ends its session. */
static int on_delete(struct http_front *f, struct hreq *r)
{
	struct hsess *hs;
	const char *why;
	unsigned status = find_session(f, r->conn, &hs, &why, false);
	const char *sid = hf_header(r->conn, SID_HEADER);
	if (status == 404 && sid && http_cluster_delete(f, sid))   /* one held elsewhere */
		return http_stream_reply(r, r->conn, 200, NULL, "", 0, NULL);
	if (status)
		return http_stream_reply_error(r, r->conn, status, -32000, why);
	http_cluster_delete(f, hs->sid);
	http_sess_end(hs, "deleted by the client");
	return http_stream_reply(r, r->conn, 200, NULL, "", 0, NULL);
}

/* /healthz and /readyz. */
static int on_health(struct http_front *f, struct hc_conn *c, bool ready)
{
	bool ok = !ready || ((!f->ready || f->ready(f->ready_arg)) && !f->unready);
	const char *body = ok ? "ok\n" : f->unready && ready ? "draining\n" : "not ready\n";
	return http_stream_reply(NULL, c, ok ? 200 : 503, "text/plain",
		     body, strlen(body), NULL);
}

/*
 * Checks what the headers allow before any body is read: 0, or an HTTP
 * status with *WHY. Host and Origin first (DNS rebinding), then the method.
 */
unsigned hf_check_headers(struct http_front *f, struct hc_conn *c,
			  const char *method, enum req_kind *kind, const char **why)
{
	*kind = strcmp(method, "POST") == 0 ? REQ_POST : strcmp(method, "GET") == 0 ? REQ_GET :
		strcmp(method, "DELETE") == 0 ? REQ_DELETE : REQ_OTHER;
	if (hc_over(c)) {
		*why = "Service Unavailable: too many connections";
		return 503;
	}
	if (!http_check_host(hf_header(c, "Host"), f->port, f->hosts)) {
		*why = "Forbidden: Host not allowed";
		return 403;
	}
	if (!http_check_origin(hf_header(c, "Origin"), f->port, f->origins)) {
		*why = "Forbidden: Origin not allowed";
		return 403;
	}
	if (*kind == REQ_OTHER) {
		*why = "Method Not Allowed";
		return 405;
	}
	if (*kind == REQ_POST && !http_check_json_type(hf_header(c, "Content-Type"))) {
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
	http_stream_reply_error(NULL, c, status, status == 413 ? RPC_INVALID_REQUEST : -32000, why);
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
		return http_metrics_serve(f, c);
	if (http_ui_path(f, url))
		return http_ui_serve(f, c, url, method);
	int rc;
	if (strcmp(method, "GET") == 0 && http_auth_metadata(f, c, url, &rc))
		return rc;
	return http_stream_reply(NULL, c, 404, "text/plain", "not found\n", 10, NULL);
}

static int head_go(struct http_front *f, struct hreq *r);
static void on_auth_ready(struct mw_cred_wait *w);
static int route_head(struct http_front *f, struct hc_conn *c, const char *method);

/* R's bearer token, asked of the modules: refused, accepted (on to
 * head_go), or waited for (on_auth_ready asks again). */
static int head_auth(struct http_front *f, struct hreq *r)
{
	char why[300], chal[1024];
	unsigned status = http_auth_check(f, r->conn, r, NULL, NULL, on_auth_ready, why, chal,
					  sizeof chal);
	if (status == HTTP_AUTH_PENDING)
		return 0;
	if (status)
		return http_auth_refuse(r, r->conn, status, why, chal);
	return head_go(f, r);
}

/* What R's token check waited for came: asked again. */
static void on_auth_ready(struct mw_cred_wait *w)
{
	struct hreq *r = (struct hreq *)(void *)w;   /* its first member */
	if (!r->conn)
		return;
	if (head_auth(r->f, r) < 0) {
		r->aborted = true;   /* on_resume closes the connection */
		hc_resume(r->conn);
	}
}

/* A request's head: checked before any of its body is read; GET and
 * DELETE are answered, a POST's body is read (on_body). */
static int on_head(void *cls, struct hc_conn *c)
{
	struct http_front *f = cls;
	const char *url = hc_path(c), *method = hc_method(c);
	if (f->route_prefix && strncmp(url, f->route_prefix, strlen(f->route_prefix)) == 0)
		return route_head(f, c, method);
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
	ev_init(&r->grace, http_stream_on_grace);
	r->grace.data = r;
	http_ring_init(&r->ring);
	hc_set_ctx(c, r);
	const char *why = NULL;
	unsigned status = hf_check_headers(f, c, method, &r->kind, &why);
	if (status)   /* a body not read closes its connection after the answer */
		return http_stream_reply_error(r, c, status, -32000, why);
	return head_auth(f, r);
}

/* A request to the extra routes, its token (if any) accepted. */
static int route_go(struct http_front *f, struct hreq *r)
{
	return f->route_fn(f->route_arg, (struct http_route *)(void *)r);
}

/* A request under the extra routes' prefix: GET only; a bearer token, if
 * it carries one, checked as /mcp's are. */
static int route_head(struct http_front *f, struct hc_conn *c, const char *method)
{
	struct hreq *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	r->f = f;
	r->conn = c;
	r->refs = 1;
	r->ep = EP_ROUTE;
	ev_init(&r->grace, http_stream_on_grace);
	r->grace.data = r;
	http_ring_init(&r->ring);
	hc_set_ctx(c, r);
	const char *why = NULL;
	unsigned status = hf_check_headers(f, c, method, &r->kind, &why);
	if (!status && r->kind != REQ_GET) {
		status = 405;
		why = "Method Not Allowed";
	}
	if (status)
		return http_stream_reply(r, c, status, "text/plain", why, strlen(why), NULL);
	size_t n;
	if (!http_auth_bearer(c, &n))
		return route_go(f, r);
	return head_auth(f, r);
}

/* R's head, its token accepted: its method, its size, then on. */
static int head_go(struct http_front *f, struct hreq *r)
{
	struct hc_conn *c = r->conn;
	if (r->ep == EP_ROUTE)
		return route_go(f, r);
	const char *why = NULL;
	unsigned status = 0;
	if (((r->ep == EP_SSE && r->kind != REQ_GET) ||
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
		return http_stream_reply_error(r, c, status, -32000, why);
	if ((r->kind == REQ_GET || r->kind == REQ_DELETE) && !hf_header(c, SID_HEADER) &&
	    era_of_version(hf_header(c, VERSION_HEADER)) == ERA_STATELESS)
		return http_stream_reply_error(r, c, 405, -32000,
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
		return http_stream_reply_now_or_stream(r, r->sid);
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
	mw_cred_wait_cancel(&r->auth_wait);
	http_cluster_req_end(r);
	if (r->ep == EP_UI)
		http_ui_end(r);
	if (ok) {
		http_stream_detach(r, NULL);
		http_stream_kept_remove(r);            /* all of it was sent: nothing to resume */
	} else if (!r->parked && (r->sess || r->keep)) {
		http_stream_lost(r, "the client disconnected");
	}
	http_stream_unref(r);
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
	f->gone = empty;
	ev_init(&f->probe_bound, http_probe_on_bound);
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

void http_front_set_routes(struct http_front *f, const char *prefix, http_route_fn fn,
			   void *arg)
{
	free(f->route_prefix);
	f->route_prefix = prefix ? strdup(prefix) : NULL;
	f->route_fn = fn;
	f->route_arg = arg;
}

const char *http_route_path(struct http_route *q)
{
	struct hreq *r = (struct hreq *)(void *)q;
	return r->conn ? hc_path(r->conn) : "";
}

const char *http_route_query(struct http_route *q, const char *name)
{
	struct hreq *r = (struct hreq *)(void *)q;
	return r->conn ? hc_query(r->conn, name) : NULL;
}

const unsigned char *http_route_subject(struct http_route *q)
{
	struct hreq *r = (struct hreq *)(void *)q;
	if (!r->has_subject && !http_auth_subject(r, r->subject))
		return NULL;
	r->has_subject = true;
	return r->subject;
}

void http_route_hold(struct http_route *q) { ((struct hreq *)(void *)q)->refs++; }
void http_route_release(struct http_route *q) { http_stream_unref((struct hreq *)(void *)q); }

int http_route_reply(struct http_route *q, unsigned status, const char *ctype,
		     const char *body, size_t n, const char *extra)
{
	struct hreq *r = (struct hreq *)(void *)q;
	if (!r->conn || r->queued)
		return 0;
	return http_stream_reply_with(r, r->conn, status, ctype, body, n, NULL, extra);
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
		hmap_put(&f->sessions, hs->sid, hs->sid_len, hs);  /* http_sess_end removes it */
		http_sess_end(hs, reason);
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
		http_stream_finish(hs->get);
}

void http_front_unready(struct http_front *f)
{
	if (!f->unready)
		log_info("http: /readyz answers 503 from now on (draining)");
	f->unready = true;
}

/* Stops accepting, ends GET streams; open requests go on. */
void http_front_drain(struct http_front *f)
{
	f->unready = true;
	stop_accepting(f);
	hmap_each(&f->sessions, end_get, NULL);
	http_ui_stop(f);
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
	http_ui_stop(f);
}

/* Frees the front: its sessions end, then its connections close. */
void http_front_free(struct http_front *f)
{
	if (!f)
		return;
	http_front_stop(f, "mcp-chain is shutting down");
	hc_server_free(f->hs);
	f->hs = NULL;
	while (f->ui_streams)   /* their connections are gone */
		http_ui_end(f->ui_streams);
	hmap_release(&f->sessions);
	hmap_release(&f->instances);
	http_cluster_free(f);
	param_table_release(&f->params);
	buf_release(&f->line);
	ev_timer_stop(EV_DEFAULT, &f->probe_bound);
	strv_free(f->origins);
	strv_free(f->hosts);
	free(f->address);
	free(f->path);
	free(f->route_prefix);
	free(f->sse_path);
	free(f->messages_path);
	free(f);
}
