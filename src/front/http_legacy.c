/*
 * http_legacy.c - the legacy HTTP+SSE transport (MCP 2024-11-05) beside
 * Streamable HTTP, on the same sessions, limits and checks (http.c,
 * http_sess.c, http_stream.c).
 *
 * GET ssePath opens a stream and a session; its first event is
 * "endpoint", the URL to POST to (messagesPath?sessionId=<id>, the id
 * 128 random bits as for Mcp-Session-Id). Each POST there carries one
 * message and is answered 202 at once; everything the session writes
 * (responses, progress, notifications, the server's own requests) goes
 * down the one stream, in order. The session ends when the stream does:
 * the client closed it, stalled past streamBufferBytes, or mcp-chain
 * stops. An HTTP+SSE session id is not accepted as an Mcp-Session-Id.
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "http_sid.h"
#include "log.h"
#include "rpc.h"
#include "session.h"

#define SID_PARAM "sessionId"

int http_legacy_endpoint(const struct http_front *f, const char *url)
{
	if (strcmp(url, f->path) == 0)
		return EP_MCP;
	if (f->sse_path && strcmp(url, f->sse_path) == 0)
		return EP_SSE;
	if (f->sse_path && strcmp(url, f->messages_path) == 0)
		return EP_MESSAGES;
	return -1;
}

/* The loop's turn after a legacy stream closed: its session ends. */
static void on_reap(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	http_sess_end(w->data, "its HTTP+SSE stream closed");
}

void http_legacy_closed(struct hsess *hs, struct hreq *r)
{
	(void)r;
	if (ev_is_active(&hs->reap))
		return;
	ev_timer_set(&hs->reap, 0., 0.);
	ev_timer_start(EV_DEFAULT, &hs->reap);
}

void http_legacy_route(struct hsess *hs, const char *line, size_t n)
{
	if (hs->get)
		http_stream_send(hs->get, line, n);
	/* else: the stream is gone and the session ends on the next turn */
}

int http_legacy_open(struct http_front *f, struct hreq *r)
{
	struct hc_conn *c = r->conn;
	struct hsess *hs;
	if (f->draining || f->stopped)
		return http_stream_reply_error(r, c, 503, -32000,
				      "Service Unavailable: mcp-chain is shutting down");
	char refused[300] = "";
	if (!(hs = http_sess_open(f, c, NULL, refused, sizeof refused)))
		return http_stream_reply_error(r, c, 503, -32000, refused[0] ?
				      refused : "Service Unavailable: cannot open a session now");
	hs->legacy = true;
	http_auth_bind(hs, r);
	ev_init(&hs->reap, on_reap);
	hs->reap.data = hs;
	r->sse = true;
	http_sess_add_stream(hs, r);
	hs->get = r;
	char ev[256];
	int n = snprintf(ev, sizeof ev, "event: endpoint\ndata: %s?" SID_PARAM "=%s\n\n",
			 f->messages_path, hs->sid);
	if (n < 0 || (size_t)n >= sizeof ev || buf_append(&r->out, ev, (size_t)n) < 0) {
		http_sess_end(hs, "out of memory");
		return -1;
	}
	log_debug("http: session #%u: HTTP+SSE stream open", hs->serial);
	return http_stream_reply_stream(r, NULL);
}

/* The legacy session a POST names (sessionId=), or NULL with an HTTP
 * status and its text. */
static struct hsess *find_legacy(struct http_front *f, struct hc_conn *c,
				 unsigned *status, const char **why)
{
	const char *sid = hc_query(c, SID_PARAM);
	const char *v = hf_header(c, "MCP-Protocol-Version");
	struct hsess *hs = NULL;
	*status = 400;
	*why = "Bad Request: the sessionId parameter is required";
	if (!sid)
		return NULL;
	*status = 404;
	*why = "Session not found";
	if (!http_sid_valid(sid) || !(hs = hmap_get(&f->sessions, sid, strlen(sid))) ||
	    !hs->legacy || !hs->get)
		return NULL;
	if (v && !session_version_supported(v)) {
		*status = 400;
		*why = "Bad Request: unsupported MCP-Protocol-Version";
		return NULL;
	}
	if (http_auth_bind(hs, hc_ctx(c)) < 0) {
		*status = 401;
		*why = "Unauthorized: this session belongs to another bearer token (another principal)";
		return NULL;
	}
	ev_timer_again(EV_DEFAULT, &hs->idle);
	return hs;
}

int http_legacy_post(struct http_front *f, struct hreq *r)
{
	struct hc_conn *c = r->conn;
	unsigned status;
	const char *why;
	struct hsess *hs = find_legacy(f, c, &status, &why);
	if (!hs)
		return http_stream_reply_error(r, c, status, -32000, why);
	struct msg m;
	json_t *err = NULL;
	if (msg_init_line(&m, r->body.data ? r->body.data : "", buf_pending(&r->body), &err) < 0) {
		char *s = json_dumps(err, JSON_COMPACT);
		json_decref(err);
		int rc = http_stream_reply(r, c, 400, "application/json",
					      s ? s : "", s ? strlen(s) : 0, NULL);
		free(s);
		return rc;
	}
	struct rpc_info in;
	bool request = msg_classify(&m, &in) == RPC_REQUEST;
	char awhy[300], chal[1024];
	unsigned astatus = http_auth_check_body(f, r, &m, awhy, chal, sizeof chal);
	msg_release(&m);
	if (astatus)
		return http_auth_refuse(r, c, astatus, awhy, chal);
	if (f->draining && request)
		return http_stream_reply_error(r, c, 503, -32000,
				      "Service Unavailable: mcp-chain is shutting down");
	session_receive_line(hs->s, r->body.data ? r->body.data : "", buf_pending(&r->body));
	buf_release(&r->body);
	return http_stream_reply(r, c, 202, "text/plain", "Accepted", 8, NULL);
}
