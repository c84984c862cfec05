/*
 * flow.c - the MCP-Flow front's connections: QUIC (quic.h) carrying
 * HTTP/3 (h3.h) with one WebTransport session each.
 *
 * What HTTP/3 asks of a WebTransport server, and no more: our control
 * stream with its SETTINGS; the peer's control stream read for its
 * SETTINGS; QPACK streams accepted and left unread (the dynamic table is
 * 0, so they carry nothing); one request stream per connection accepted
 * as the session's CONNECT (403 for an Origin not allowed, 404 for another
 * path, 400 for any other request); WebTransport streams and datagrams
 * handed to the session (flow_sess.c); anything else refused with HTTP/3's
 * codes.
 */
#include "flow_front.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chain.h"
#include "config.h"
#include "flow_int.h"
#include "log.h"
#include "selfcert.h"

/* A request stream's HEADERS frame at most. */
#define FLOW_MAX_HEADERS 16384
/* A control stream's frame at most (SETTINGS, GOAWAY: small). */
#define FLOW_MAX_CONTROL_FRAME 4096

int flow_conn_write(struct flow_conn *c, int64_t sid, const void *p, size_t len, bool fin)
{
	if (c->gone)
		return -1;
	return quic_stream_write(c->qc, sid, p, len, fin);
}

/* The stream SID of C, made when NEW is true; NULL when absent. */
static struct flow_stream *stream_get(struct flow_conn *c, int64_t sid, bool make)
{
	for (struct flow_stream *s = c->streams; s; s = s->next)
		if (s->sid == sid)
			return s;
	if (!make)
		return NULL;
	struct flow_stream *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->sid = sid;
	s->kind = H3_PRE_MORE;
	s->next = c->streams;
	c->streams = s;
	return s;
}

/* Forgets stream SID of C. */
static void stream_drop(struct flow_conn *c, int64_t sid)
{
	for (struct flow_stream **pp = &c->streams; *pp; pp = &(*pp)->next) {
		if ((*pp)->sid == sid) {
			struct flow_stream *s = *pp;
			*pp = s->next;
			buf_release(&s->in);
			free(s);
			return;
		}
	}
}

/* Ends C's connection with HTTP/3 error CODE (WHY logged). */
static void conn_fail(struct flow_conn *c, uint64_t code, const char *why)
{
	log_info("flow: connection #%u from %s: %s", c->serial, quic_conn_peer(c->qc), why);
	if (c->ws)
		flow_sess_end(c->ws, why, false);
	if (!c->gone)
		quic_conn_close(c->qc, code, why);
	c->gone = true;
}

/* Answers request stream S of C with STATUS and ends it. */
static void answer_status(struct flow_conn *c, struct flow_stream *s, int status)
{
	struct buf b = { 0 };
	if (h3_response_append(&b, status, false) == 0)
		flow_conn_write(c, s->sid, b.data + b.off, buf_pending(&b), true);
	buf_release(&b);
	quic_stream_stop_reading(c->qc, s->sid, H3_NO_ERROR);
	s->ignored = true;
}

/* True when ORIGIN is a loopback page's (http or https, any port) or one
 * of the configured ones. */
static bool origin_allowed(const struct flow_front *f, const char *origin)
{
	for (char **o = f->cfg->origins; o && *o; o++)
		if (strcasecmp(*o, origin) == 0)
			return true;
	const char *h = NULL;
	if (strncasecmp(origin, "http://", 7) == 0)
		h = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		h = origin + 8;
	if (!h)
		return false;
	static const char *const loop[] = { "localhost", "127.0.0.1", "[::1]" };
	for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
		size_t n = strlen(loop[i]);
		if (strncasecmp(h, loop[i], n) == 0 && (h[n] == '\0' || h[n] == ':'))
			return true;
	}
	return false;
}

/* The HEADERS of request stream S (PAYLOAD, LEN): the CONNECT, or refused. */
static void on_request(struct flow_conn *c, struct flow_stream *s, const uint8_t *payload,
		       size_t len)
{
	struct flow_front *f = c->f;
	struct h3_request r;
	char why[128];
	if (h3_request_decode(payload, len, &r, why, sizeof why) < 0) {
		conn_fail(c, H3_MESSAGE_ERROR, why);   /* QPACK trouble is the connection's */
		return;
	}
	if (r.bad_pseudo || r.truncated) {
		log_info("flow: connection #%u: malformed request headers", c->serial);
		answer_status(c, s, 400);
		return;
	}
	if (strcmp(r.method, "CONNECT") != 0 || strcmp(r.protocol, "webtransport") != 0) {
		log_info("flow: connection #%u: %s %s%s%s refused: only a WebTransport CONNECT "
			 "is served", c->serial, r.method, r.path,
			 r.protocol[0] ? " :protocol " : "", r.protocol);
		answer_status(c, s, r.method[0] && strcmp(r.method, "CONNECT") ? 405 : 400);
		return;
	}
	if (r.has_origin && !origin_allowed(f, r.origin)) {
		log_info("flow: connection #%u: Origin %s is not allowed (403)", c->serial, r.origin);
		answer_status(c, s, 403);
		return;
	}
	const char *q = strchr(r.path, '?');
	size_t plen = q ? (size_t)(q - r.path) : strlen(r.path);
	if (plen != strlen(f->cfg->path) || memcmp(r.path, f->cfg->path, plen) != 0) {
		answer_status(c, s, 404);
		return;
	}
	if (c->ws || f->draining) {
		answer_status(c, s, f->draining ? 503 : 429);
		return;
	}
	struct buf b = { 0 };
	int rc = h3_response_append(&b, 200, true);
	if (rc == 0)
		rc = flow_conn_write(c, s->sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
	if (rc < 0 || !(c->ws = flow_sess_new(c, s->sid))) {
		conn_fail(c, H3_INTERNAL_ERROR, "out of memory for a session");
		return;
	}
}

/* Reads request stream S's frames: HEADERS first, then (the session's
 * CONNECT) its DATA to the session. */
static void request_data(struct flow_conn *c, struct flow_stream *s, bool fin)
{
	if (!s->headers_seen) {
		uint64_t type;
		const uint8_t *payload;
		size_t plen;
		ssize_t used = h3_frame_parse((const uint8_t *)s->in.data + s->in.off,
					      buf_pending(&s->in), FLOW_MAX_HEADERS, &type,
					      &payload, &plen);
		if (used < 0) {
			conn_fail(c, H3_EXCESSIVE_LOAD, "request headers too large");
			return;
		}
		if (used == 0) {
			if (fin)
				answer_status(c, s, 400);
			return;
		}
		if (type != H3_FRAME_HEADERS) {
			conn_fail(c, H3_FRAME_UNEXPECTED, "a request that does not begin with HEADERS");
			return;
		}
		s->headers_seen = true;
		on_request(c, s, payload, plen);
		buf_consume(&s->in, (size_t)used);
		if (c->gone || s->ignored)
			return;
	}
	if (c->ws && c->ws->connect_sid == s->sid) {
		size_t n = buf_pending(&s->in);
		const uint8_t *p = (const uint8_t *)s->in.data + s->in.off;
		buf_reset(&s->in);   /* the session keeps what it needs */
		flow_sess_connect_data(c->ws, p, n, fin);
	}
}

/* Reads the peer's control stream S: SETTINGS first, then GOAWAY and
 * frames that are ignored. */
static void control_data(struct flow_conn *c, struct flow_stream *s, bool fin)
{
	for (;;) {
		uint64_t type;
		const uint8_t *payload;
		size_t plen;
		ssize_t used = h3_frame_parse((const uint8_t *)s->in.data + s->in.off,
					      buf_pending(&s->in), FLOW_MAX_CONTROL_FRAME, &type,
					      &payload, &plen);
		if (used < 0) {
			conn_fail(c, H3_EXCESSIVE_LOAD, "a control frame too large");
			return;
		}
		if (used == 0)
			break;
		if (!c->settings_seen && type != H3_FRAME_SETTINGS) {
			conn_fail(c, H3_MISSING_SETTINGS, "the control stream does not begin "
				  "with SETTINGS");
			return;
		}
		if (type == H3_FRAME_SETTINGS) {
			if (c->settings_seen || h3_settings_parse(payload, plen, &c->peer) < 0) {
				conn_fail(c, c->settings_seen ? H3_FRAME_UNEXPECTED : H3_SETTINGS_ERROR,
					  "bad SETTINGS");
				return;
			}
			c->settings_seen = true;
		} else if (type == H3_FRAME_DATA || type == H3_FRAME_HEADERS ||
			   type == H3_FRAME_PUSH_PROMISE) {
			conn_fail(c, H3_FRAME_UNEXPECTED, "a request frame on the control stream");
			return;
		} else if (type == H3_FRAME_GOAWAY && c->ws) {
			flow_sess_shutdown(c->ws);
		}
		buf_consume(&s->in, (size_t)used);
	}
	buf_compact(&s->in);
	if (fin)
		conn_fail(c, H3_CLOSED_CRITICAL_STREAM, "the peer closed its control stream");
}

/* The linger after a session's end is over: the connection closes. */
static void on_linger(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct flow_conn *c = w->data;
	ev_timer_stop(loop, w);
	if (!c->gone && !c->ws) {
		quic_conn_close(c->qc, H3_NO_ERROR, "session closed");
		c->gone = true;
	}
}

void flow_conn_session_ended(struct flow_conn *c, bool now)
{
	if (c->gone)
		return;
	/* a WebTransport client (Deno's) may wait for the connection's end
	 * rather than the close capsule: it comes shortly after the capsule */
	ev_timer_set(&c->linger, now ? 0. : 0.25, 0.);
	ev_timer_start(EV_DEFAULT, &c->linger);
}

/* ---- QUIC callbacks ---- */

/* Handshake done: our control stream and its SETTINGS. */
static void on_ready(void *arg, struct quic_conn *qc)
{
	struct flow_conn *c = arg;
	int64_t sid;
	struct buf b = { 0 };
	if (quic_stream_open(qc, false, &sid) < 0 || h3_control_preamble(&b, true, 1) < 0 ||
	    flow_conn_write(c, sid, b.data + b.off, buf_pending(&b), false) < 0)
		conn_fail(c, H3_INTERNAL_ERROR, "cannot open the HTTP/3 control stream");
	buf_release(&b);
	log_debug("flow: connection #%u from %s ready", c->serial, quic_conn_peer(qc));
}

static void on_stream_data(void *arg, struct quic_conn *qc, int64_t sid, const uint8_t *data,
			   size_t len, bool fin)
{
	struct flow_conn *c = arg;
	if (c->gone)
		return;
	bool bidi = (sid & 0x2) == 0;
	if ((sid & 0x1) != 0)
		return;   /* ours (server-initiated): nothing comes back on a uni stream */
	struct flow_stream *s = stream_get(c, sid, true);
	if (!s) {
		conn_fail(c, H3_INTERNAL_ERROR, "out of memory for a stream");
		return;
	}
	if (s->ignored)
		return;
	/* WebTransport streams go to the session as they come */
	if (s->kind == H3_PRE_WT_BIDI || s->kind == H3_PRE_WT_UNI) {
		if (!c->ws) {
			quic_stream_abort(qc, sid, H3_WT_SESSION_GONE);
			s->ignored = true;
		} else if (s->kind == H3_PRE_WT_BIDI) {
			flow_sess_stream_data(c->ws, sid, data, len, fin);
		} else {
			flow_sess_uni_data(c->ws, sid, data, len, fin);
		}
		return;
	}
	if (buf_pending(&s->in) + len > FLOW_MAX_HEADERS + 64 && s->kind != H3_PRE_REQUEST) {
		conn_fail(c, H3_EXCESSIVE_LOAD, "too many bytes before a stream's type");
		return;
	}
	if (len && buf_append(&s->in, data, len) < 0) {
		conn_fail(c, H3_INTERNAL_ERROR, "out of memory for a stream");
		return;
	}
	if (s->kind == H3_PRE_MORE) {
		uint64_t session = 0;
		enum h3_preamble_kind kind;
		size_t used = h3_preamble_parse((const uint8_t *)s->in.data + s->in.off,
						buf_pending(&s->in), bidi, &kind, &session);
		if (kind == H3_PRE_MORE) {
			if (fin)
				stream_drop(c, sid);
			return;
		}
		s->kind = kind;
		buf_consume(&s->in, used);
		if (kind == H3_PRE_WT_BIDI || kind == H3_PRE_WT_UNI) {
			if (!c->ws || (int64_t)session != c->ws->connect_sid) {
				/* a stream of no session we know: refused */
				quic_stream_abort(qc, sid, H3_WT_SESSION_GONE);
				s->ignored = true;
				return;
			}
			size_t n = buf_pending(&s->in);
			const uint8_t *p = (const uint8_t *)s->in.data + s->in.off;
			if (kind == H3_PRE_WT_BIDI)
				flow_sess_stream_data(c->ws, sid, p, n, fin);
			else
				flow_sess_uni_data(c->ws, sid, p, n, fin);
			if (stream_get(c, sid, false))
				buf_release(&s->in);
			return;
		}
		if (kind == H3_PRE_UNKNOWN || kind == H3_PRE_PUSH) {
			quic_stream_stop_reading(qc, sid, H3_STREAM_CREATION_ERROR);
			s->ignored = true;
			buf_release(&s->in);
			return;
		}
	}
	switch (s->kind) {
	case H3_PRE_REQUEST:
		request_data(c, s, fin);
		break;
	case H3_PRE_CONTROL:
		control_data(c, s, fin);
		break;
	case H3_PRE_QPACK_ENCODER:
	case H3_PRE_QPACK_DECODER:
		/* a zero table: nothing may come; what does is dropped */
		buf_reset(&s->in);
		break;
	default:
		break;
	}
}

static void on_stream_reset(void *arg, struct quic_conn *qc, int64_t sid, uint64_t code,
			    bool reset)
{
	struct flow_conn *c = arg;
	if (c->gone)
		return;
	struct flow_stream *s = stream_get(c, sid, false);
	if (c->ws && sid == c->ws->connect_sid) {
		flow_sess_end(c->ws, "the client reset the session's CONNECT stream", false);
		return;
	}
	if (s && s->kind == H3_PRE_CONTROL) {
		conn_fail(c, H3_CLOSED_CRITICAL_STREAM, "the peer reset its control stream");
		return;
	}
	if (c->ws)
		flow_sess_stream_gone(c->ws, sid, true);
	(void)reset;
}

static void on_stream_close(void *arg, struct quic_conn *qc, int64_t sid)
{
	struct flow_conn *c = arg;
	if (c->ws && !c->gone) {
		if (sid == c->ws->connect_sid)
			flow_sess_end(c->ws, "the CONNECT stream closed", false);
		else
			flow_sess_stream_gone(c->ws, sid, false);
	}
	stream_drop(c, sid);
}

static void on_writable(void *arg, struct quic_conn *qc, int64_t sid)
{
	struct flow_conn *c = arg;
	if (c->ws && !c->gone)
		flow_sess_writable(c->ws, sid);
}

static void on_datagram(void *arg, struct quic_conn *qc, const uint8_t *data, size_t len)
{
	struct flow_conn *c = arg;
	uint64_t q;
	size_t used = h3_datagram_parse(data, len, &q);
	if (c->gone)
		return;
	if (used == 0 || !c->ws || q * 4 != (uint64_t)c->ws->connect_sid) {
		log_debug("flow: connection #%u: a datagram of no session dropped", c->serial);
		return;
	}
	flow_sess_datagram(c->ws, data + used, len - used);
}

static void on_closed(void *arg, struct quic_conn *qc, const char *reason)
{
	struct flow_conn *c = arg;
	c->gone = true;
	ev_timer_stop(EV_DEFAULT, &c->linger);
	if (c->ws)
		flow_sess_end(c->ws, reason, false);
	while (c->streams)
		stream_drop(c, c->streams->sid);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	log_debug("flow: connection #%u closed: %s", c->serial, reason);
	free(c);
}

static const struct quic_conn_ops conn_ops = {
	.ready = on_ready,
	.stream_data = on_stream_data,
	.stream_reset = on_stream_reset,
	.stream_close = on_stream_close,
	.writable = on_writable,
	.datagram = on_datagram,
	.closed = on_closed,
};

/* A new QUIC connection. */
static const struct quic_conn_ops *on_accept(void *arg, struct quic_conn *qc, void **conn_arg)
{
	struct flow_front *f = arg;
	if (f->stopped)
		return NULL;
	struct flow_conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->f = f;
	c->qc = qc;
	c->serial = ++f->next_serial;
	ev_init(&c->linger, on_linger);
	c->linger.data = c;
	c->next = f->conns;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &f->conns;
	f->conns = c;
	*conn_arg = c;
	return &conn_ops;
}

/* ---- the front ---- */

struct flow_front *flow_front_new(struct chain *chain, const struct cfg_flow *cfg, size_t max)
{
	struct flow_front *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->chain = chain;
	f->cfg = cfg;
	f->max = max;
	f->input_ttl = 300;
	struct quic_server_opts o = {
		.cert_file = cfg->cert_file, .key_file = cfg->key_file, .alpn = "h3",
		.idle_timeout = cfg->idle_timeout, .max_conns = cfg->max_connections,
		/* the CONNECT, the control stream, a few more refused politely */
		.max_streams_bidi = 16,
		/* the peer's control and QPACK streams, and client streams refused */
		.max_streams_uni = 16,
		.max_datagram = 65535,
	};
	char why[256];
	struct selfcert sc;
	bool own = !cfg->cert_file;
	if (own) {   /* no certificate given: a short-lived one of our own */
		if (selfcert_make(&sc, 10, why, sizeof why) < 0) {
			log_error("flow: %s", why);
			free(f);
			return NULL;
		}
		o.cert_file = sc.cert_file;
		o.key_file = sc.key_file;
	}
	f->ep = quic_server_new(cfg->address, (int)cfg->port, &o, on_accept, f, why, sizeof why);
	if (own)
		selfcert_remove(&sc);   /* loaded: the files are not needed */
	if (own && f->ep)
		log_info("flow: no certificate configured: a self-signed ECDSA P-256 one, valid 10 "
			 "days; its SHA-256 (serverCertificateHashes) is %s (hex %s)", sc.hash_b64,
			 sc.hash_hex);
	if (!f->ep) {
		log_error("flow: cannot serve on %s port %u: %s", cfg->address, cfg->port, why);
		free(f);
		return NULL;
	}
	log_info("flow: serving MCP-Flow (WebTransport) on https://%s%s%s:%d%s",
		 strchr(cfg->address, ':') ? "[" : "", cfg->address,
		 strchr(cfg->address, ':') ? "]" : "", quic_endpoint_port(f->ep), cfg->path);
	return f;
}

int flow_front_port(const struct flow_front *f)
{
	return quic_endpoint_port(f->ep);
}

void flow_front_set_session_chains(struct flow_front *f, flow_chain_make_fn make,
				   flow_chain_release_fn release, void *arg)
{
	f->make = make;
	f->release = release;
	f->chain_arg = arg;
}

void flow_front_set_input_ttl(struct flow_front *f, double seconds)
{
	f->input_ttl = seconds;
}

void flow_front_offer_stateless(struct flow_front *f, bool always)
{
	f->offer_stateless = always;
}

bool flow_front_busy(const struct flow_front *f)
{
	for (const struct flow_conn *c = f ? f->conns : NULL; c; c = c->next)
		if (c->ws && flow_sess_busy(c->ws))
			return true;
	return false;
}

void flow_front_drain(struct flow_front *f)
{
	if (!f)
		return;
	f->draining = true;
	for (struct flow_conn *c = f->conns; c; c = c->next)
		if (c->ws)
			flow_sess_shutdown(c->ws);
}

void flow_front_stop(struct flow_front *f, const char *reason)
{
	if (!f || f->stopped)
		return;
	f->stopped = f->draining = true;
	for (struct flow_conn *c = f->conns; c; c = c->next)
		if (c->ws)
			flow_sess_end(c->ws, reason, true);
	quic_endpoint_free(f->ep, H3_NO_ERROR);   /* every connection's closed() runs */
	f->ep = NULL;
}

void flow_front_free(struct flow_front *f)
{
	if (!f)
		return;
	flow_front_stop(f, "mcp-chain is shutting down");
	free(f);
}
