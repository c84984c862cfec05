/*
 * be_flow.c - the "mcp-flow" transport of a backend: mcp-chain as an
 * MCP-Flow client (MCP over WebTransport over HTTP/3 over QUIC) of another
 * server, such as an mcp-chain with --flow.
 *
 * One QUIC connection per run (quic.h, the server's certificate pinned by
 * its SHA-256 or verified against CAs), HTTP/3's client side written here
 * with h3.h: our control stream with its SETTINGS and no QPACK streams (a
 * zero dynamic table needs none, and a Deno server never sees our streams
 * if we open silent ones), the extended CONNECT and its 200, then the
 * WebTransport bidi stream that carries MCP-Flow's control frames.
 *
 * Every message of the backend layer becomes one frame; the initialize
 * request carries MCP-Flow's "transport" member and its answer names the
 * encoding (CBOR both ways from the next frame on). Execution streams of
 * the server are read to their end; the answer that refers to them
 * (ref/stream items) is held until they are all in, then delivered with
 * the content they stand for (flow_ref.h). Datagrams carry whole
 * notifications.
 */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "buf.h"
#include "cbor_json.h"
#include "chain.h"
#include "flow_ref.h"
#include "flow_wire.h"
#include "h3.h"
#include "log.h"
#include "quic.h"
#include "rpc.h"

#define FLOW_CONNECT_TIMEOUT 10.0   /* seconds from start to an open session */
#define FLOW_MAX_HEADERS 16384      /* the CONNECT answer's HEADERS frame at most */
#define FLOW_MAX_EXEC 256           /* execution streams held at once */

enum flow_state { FS_HANDSHAKE, FS_CONNECT_SENT, FS_OPEN };

/* One stream the server opened. */
struct fstream {
	int64_t sid;
	enum h3_preamble_kind kind;
	bool hdr;              /* the execution header was read */
	bool done;             /* FIN seen */
	bool failed;           /* refused, reset or too large */
	uint32_t rid, tag;
	struct buf in;         /* preamble and header, then the payload */
	struct fstream *next;
};

/* An answer waiting for its execution streams. */
struct held {
	json_t *msg;
	uint32_t rid;
	size_t bytes;
	struct held *next;
};

struct be_flow {
	struct backend *b;
	struct quic_conn *qc;
	enum flow_state state;
	char host[64];
	bool localhost;            /* the url named localhost: the SNI */
	int port;
	char authority[128];
	char path[1024];
	int64_t connect_sid, ctl_sid;
	struct buf connect_in;     /* the CONNECT stream's bytes */
	bool got_status;
	struct flow_reader rd;     /* the control stream's frames */
	bool ctl_pre;              /* control stream's preamble read (server side: none) */
	enum flow_encoding enc;    /* of frames now */
	json_t *init_id;           /* the initialize request in flight, or NULL */
	struct buf early;          /* frames written before the session is open */
	json_t *inflight;          /* ids of our requests in flight ("17": true) */
	json_t *stream_errors;     /* request ids whose streams failed: message */
	struct fstream *streams;
	size_t nstreams;
	struct held *held;
	ev_timer timer;            /* connect timeout, then the stop's grace */
	bool stopping;
	bool down;
};

/* The transport state of B. */
static struct be_flow *T(struct backend *b)
{
	return backend_transport(b);
}

/* The backend's name, for logs. */
static const char *NAME(struct be_flow *s)
{
	return backend_peer(s->b)->name;
}

/* Reports the transport down once per run. */
static void report_down(struct be_flow *s, const char *reason)
{
	if (s->down)
		return;
	s->down = true;
	ev_timer_stop(EV_DEFAULT, &s->timer);
	backend_down(s->b, reason);
}

/* Ends the connection with REASON (logged); closed() reports it down. */
static void fail(struct be_flow *s, uint64_t code, const char *reason)
{
	if (!s->qc) {
		report_down(s, reason);
		return;
	}
	log_info("%s: mcp-flow: %s", NAME(s), reason);
	quic_conn_close(s->qc, code, reason);
}

/* ---- writing frames ---- */

/* Encodes MSG (borrowed) as one frame in the session's encoding onto OUT. */
static int frame_append(struct be_flow *s, json_t *msg, struct buf *out)
{
	char why[128];
	uint8_t hdr[FLOW_FRAME_HDR] = { 0 };
	size_t at = buf_pending(out);
	if (buf_append(out, hdr, sizeof hdr) < 0)
		return -1;
	int rc;
	if (s->enc == FLOW_ENC_CBOR) {
		rc = cbor_from_json(msg, out, why, sizeof why);
		if (rc < 0)
			log_error("%s: mcp-flow: a message cannot be written as CBOR: %s", NAME(s),
				  why);
	} else {
		rc = json_dump_callback(msg, buf_dump_cb, out, JSON_COMPACT) == 0 ? 0 : -1;
	}
	size_t len = buf_pending(out) - at - FLOW_FRAME_HDR;
	if (rc < 0 || len > UINT32_MAX) {
		out->len = out->off + at;
		return -1;
	}
	flow_frame_hdr((uint8_t *)out->data + out->off + at, (uint32_t)len);
	return 0;
}

/* Writes MSG (borrowed) as a frame, or keeps it until the session is open. */
static int write_msg(struct be_flow *s, json_t *msg)
{
	if (s->state != FS_OPEN || !s->qc)
		return frame_append(s, msg, &s->early);
	struct buf b = { 0 };
	int rc = frame_append(s, msg, &b);
	if (rc == 0)
		rc = quic_stream_write(s->qc, s->ctl_sid, (const uint8_t *)b.data + b.off,
				       buf_pending(&b), false);
	buf_release(&b);
	if (rc == 0 && quic_stream_queued(s->qc, s->ctl_sid) > QUIC_STREAM_LOW_WATER * 4)
		chain_congestion(backend_peer(s->b), true);
	return rc;
}

/* The key ID (borrowed) is kept under in a set of request ids; false when
 * it is neither a string nor an integer. */
static bool id_key(json_t *id, char *key, size_t n)
{
	if (json_is_integer(id))
		snprintf(key, n, "%lld", (long long)json_integer_value(id));
	else if (json_is_string(id))
		snprintf(key, n, "s:%s", json_string_value(id));
	else
		return false;
	return true;
}

/* Queues MSG (borrowed): the initialize request with MCP-Flow's terms. */
static int flow_send(struct backend *b, json_t *msg)
{
	struct be_flow *s = T(b);
	if (!s || s->down || s->stopping)
		return -1;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	char key[96];
	if (method && id && id_key(id, key, sizeof key))
		json_object_set_new(s->inflight, key, json_true());
	if (!method || strcmp(method, "initialize") || !id)
		return write_msg(s, msg);
	json_t *copy = json_copy(msg);
	json_t *params = json_object_get(msg, "params");
	params = json_is_object(params) ? json_copy(params) : json_object();
	json_object_set_new(params, "transport",
			    json_pack("{s:s, s:s, s:[s, s]}", "type", "mcp-flow", "version", "0.1",
				      "encodings", "cbor", "json"));
	json_object_set_new(copy, "params", params);
	json_decref(s->init_id);
	s->init_id = json_incref(id);
	int rc = write_msg(s, copy);
	json_decref(copy);
	return rc;
}

/* ---- what arrives ---- */

/* The stream the server opened for (RID, TAG), or NULL. */
static struct fstream *exec_find(struct be_flow *s, uint32_t rid, uint32_t tag)
{
	for (struct fstream *f = s->streams; f; f = f->next)
		if (f->kind == H3_PRE_WT_UNI && f->hdr && f->rid == rid && f->tag == tag)
			return f;
	return NULL;
}

/* Forgets stream F. */
static void stream_free(struct be_flow *s, struct fstream *f)
{
	for (struct fstream **pp = &s->streams; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	buf_release(&f->in);
	free(f);
	s->nstreams--;
}

/* Forgets the execution streams of request RID. */
static void exec_forget(struct be_flow *s, uint32_t rid)
{
	struct fstream *f = s->streams, *next;
	for (; f; f = next) {
		next = f->next;
		if (f->kind == H3_PRE_WT_UNI && f->hdr && f->rid == rid) {
			if (!f->done && s->qc)
				quic_stream_stop_reading(s->qc, f->sid, h3_wt_error_to_h3(0));
			stream_free(s, f);
		}
	}
}

/* Hands answer MSG (stolen) to the backend layer: its request is no longer
 * in flight. */
static void deliver_answer(struct be_flow *s, json_t *msg, size_t bytes)
{
	char key[96];
	if (id_key(json_object_get(msg, "id"), key, sizeof key))
		json_object_del(s->inflight, key);
	backend_deliver(s->b, msg, bytes);
}

/*
 * Answer H's ref items: 1 when every stream is in (then they are replaced
 * in H's message), 0 when some are still coming, -1 when one failed (its
 * message in *WHY).
 */
static int held_resolve(struct be_flow *s, struct held *h, const char **why)
{
	bool contents;
	json_t *items = flow_ref_items(h->msg, &contents);
	uint32_t tag;
	size_t i;
	json_t *it;
	char key[32];
	snprintf(key, sizeof key, "%u", h->rid);
	json_t *err = json_object_get(s->stream_errors, key);
	if (err) {
		*why = json_string_value(err);
		return -1;
	}
	json_array_foreach(items, i, it) {
		if (!flow_ref_tag(it, &tag))
			continue;
		struct fstream *f = exec_find(s, h->rid, tag);
		if (f && f->failed) {
			*why = "an execution stream of the answer failed";
			return -1;
		}
		if (!f || !f->done)
			return 0;
	}
	json_array_foreach(items, i, it) {
		if (!flow_ref_tag(it, &tag))
			continue;
		struct fstream *f = exec_find(s, h->rid, tag);
		json_t *c = flow_ref_content(it, (const uint8_t *)f->in.data + f->in.off,
					     buf_pending(&f->in), contents);
		if (!c) {
			*why = "an execution stream's content cannot be rebuilt";
			return -1;
		}
		h->bytes += buf_pending(&f->in);
		json_array_set_new(items, i, c);
	}
	return 1;
}

/* Delivers every held answer whose streams are all in (or one failed). */
static void held_check(struct be_flow *s)
{
	struct held **pp = &s->held;
	while (*pp) {
		struct held *h = *pp;
		const char *why = NULL;
		int rc = held_resolve(s, h, &why);
		if (rc == 0) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		json_t *msg = h->msg;
		if (rc < 0) {
			json_t *e = rpc_errorf(json_object_get(msg, "id"), FLOW_ERR_BAD_STREAM_REF,
					       "MCP-Flow: %s", why ? why : "stream error");
			json_decref(msg);
			msg = e;
		}
		char key[32];
		snprintf(key, sizeof key, "%u", h->rid);
		json_object_del(s->stream_errors, key);
		exec_forget(s, h->rid);
		if (msg)
			deliver_answer(s, msg, h->bytes);
		free(h);
	}
}

/* True when answer MSG (borrowed) names execution streams. */
static bool has_refs(json_t *msg)
{
	bool contents;
	json_t *items = flow_ref_items(msg, &contents), *it;
	size_t i;
	uint32_t tag;
	json_array_foreach(items, i, it)
		if (flow_ref_tag(it, &tag))
			return true;
	return false;
}

/* The initialize answer (MSG, borrowed and changed): its transport member
 * is the hop's; it names the encoding of the frames that follow. */
static void on_init_answer(struct be_flow *s, json_t *msg)
{
	json_t *result = json_object_get(msg, "result");
	json_t *tr = json_object_get(result, "transport");
	const char *enc = json_string_value(json_object_get(tr, "encoding"));
	json_decref(s->init_id);
	s->init_id = NULL;
	if (enc && strcmp(enc, "cbor") == 0)
		s->enc = FLOW_ENC_CBOR;
	log_debug("%s: mcp-flow: the session speaks %s", NAME(s),
		  s->enc == FLOW_ENC_CBOR ? "CBOR" : "JSON");
	if (json_is_object(result))
		json_object_del(result, "transport");
}

/* A $/streamError of the server: the answer it names fails. */
static void on_stream_error(struct be_flow *s, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	const char *why = json_string_value(json_object_get(params, "error"));
	char key[32];
	if (!json_is_integer(rid))
		return;
	snprintf(key, sizeof key, "%lld", (long long)json_integer_value(rid));
	log_info("%s: mcp-flow: request %s: an execution stream failed: %s", NAME(s), key,
		 why ? why : "(no reason)");
	json_object_set_new(s->stream_errors, key,
			    json_string(why ? why : "an execution stream failed"));
	held_check(s);
}

/* One message of the server (MSG stolen), BYTES on the wire. */
static void on_message(struct be_flow *s, json_t *msg, size_t bytes)
{
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (method && strcmp(method, "$/streamError") == 0) {
		on_stream_error(s, json_object_get(msg, "params"));
		json_decref(msg);
		return;
	}
	if (method || !id) {
		backend_deliver(s->b, msg, bytes);
		return;
	}
	if (s->init_id && json_equal(id, s->init_id))
		on_init_answer(s, msg);
	if (json_is_integer(id) && json_integer_value(id) >= 0 &&
	    json_integer_value(id) <= (json_int_t)UINT32_MAX && has_refs(msg)) {
		struct held *h = calloc(1, sizeof *h);
		if (h) {
			h->msg = msg;
			h->rid = (uint32_t)json_integer_value(id);
			h->bytes = bytes;
			h->next = s->held;
			s->held = h;
			held_check(s);
			return;
		}
	}
	deliver_answer(s, msg, bytes);
}

/* Decodes one frame or datagram body (P, N) in the session's encoding. */
static json_t *decode_body(struct be_flow *s, const uint8_t *p, size_t n)
{
	char why[160];
	json_error_t e;
	json_t *msg;
	int enc = flow_body_encoding(p, n);
	if (enc == FLOW_ENC_CBOR) {
		msg = cbor_to_json(p, n, why, sizeof why);
	} else if (enc == FLOW_ENC_JSON) {
		msg = json_loadb((const char *)p, n, 0, &e);
		if (!msg)
			snprintf(why, sizeof why, "%s", e.text);
	} else {
		msg = NULL;
		snprintf(why, sizeof why, "neither JSON nor CBOR");
	}
	if (msg && !json_is_object(msg)) {
		json_decref(msg);
		msg = NULL;
		snprintf(why, sizeof why, "not a JSON-RPC message");
	}
	if (!msg)
		log_warn("%s: mcp-flow: skipped a %zu-byte message: %s", NAME(s), n, why);
	return msg;
}

/* The control stream's bytes. */
static void on_control(struct be_flow *s, const uint8_t *data, size_t len, bool fin)
{
	const uint8_t *p;
	size_t n;
	enum flow_read r;
	if (flow_reader_feed(&s->rd, data, len) < 0) {
		fail(s, H3_INTERNAL_ERROR, "out of memory");
		return;
	}
	while (!s->down && (r = flow_reader_next(&s->rd, &p, &n)) != FLOW_READ_MORE) {
		if (r == FLOW_READ_TOO_BIG) {
			char why[128];
			snprintf(why, sizeof why, "a %zu-byte frame exceeds maxMessageBytes", n);
			fail(s, h3_wt_error_to_h3(0), why);
			return;
		}
		json_t *msg = decode_body(s, p, n);
		if (msg)
			on_message(s, msg, n);
	}
	if (fin && !s->down)
		fail(s, H3_NO_ERROR, "the server ended the session's control stream");
}

/* The CONNECT stream: the answer's HEADERS, then capsules in DATA frames. */
static void on_connect_stream(struct be_flow *s, const uint8_t *data, size_t len, bool fin)
{
	if (buf_append(&s->connect_in, data, len) < 0) {
		fail(s, H3_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (;;) {
		uint64_t type;
		const uint8_t *pl;
		size_t plen;
		ssize_t took = h3_frame_parse((const uint8_t *)s->connect_in.data + s->connect_in.off,
					      buf_pending(&s->connect_in), FLOW_MAX_HEADERS, &type,
					      &pl, &plen);
		if (took == 0)
			break;
		if (took < 0) {
			fail(s, H3_EXCESSIVE_LOAD, "the CONNECT stream's frame is too large");
			return;
		}
		if (type == H3_FRAME_HEADERS && !s->got_status) {
			int status = h3_response_status(pl, plen);
			s->got_status = true;
			if (status != 200) {
				char why[96];
				snprintf(why, sizeof why, "the WebTransport CONNECT was answered %d",
					 status);
				fail(s, H3_NO_ERROR, why);
				return;
			}
			struct buf b = { 0 };
			if (quic_stream_open(s->qc, true, &s->ctl_sid) < 0 ||
			    h3_wt_preamble(&b, true, (uint64_t)s->connect_sid) < 0 ||
			    buf_append(&b, s->early.data + s->early.off, buf_pending(&s->early)) < 0 ||
			    quic_stream_write(s->qc, s->ctl_sid, (const uint8_t *)b.data + b.off,
					      buf_pending(&b), false) < 0) {
				buf_release(&b);
				fail(s, H3_INTERNAL_ERROR, "cannot open the session's control stream");
				return;
			}
			buf_release(&b);
			buf_release(&s->early);
			s->state = FS_OPEN;
			ev_timer_stop(EV_DEFAULT, &s->timer);
			log_debug("%s: mcp-flow: session open", NAME(s));
		} else if (type == H3_FRAME_DATA) {
			uint64_t ct;
			const uint8_t *v;
			size_t vlen;
			uint32_t code;
			const char *reason;
			size_t rlen;
			if (h3_capsule_parse(pl, plen, plen, &ct, &v, &vlen) > 0 &&
			    ct == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION &&
			    h3_close_parse(v, vlen, &code, &reason, &rlen) == 0) {
				char why[256];
				snprintf(why, sizeof why, "the server closed the session (%u: %.*s)",
					 code, (int)(rlen > 200 ? 200 : rlen), reason);
				fail(s, H3_NO_ERROR, why);
				return;
			}
		}
		buf_consume(&s->connect_in, (size_t)took);
	}
	if (fin)
		fail(s, H3_NO_ERROR, s->got_status ? "the server ended the session" :
			"the server ended the CONNECT stream unanswered");
}

/* Refuses stream F of the server (CODE) and forgets it. */
static void refuse(struct be_flow *s, struct fstream *f, uint64_t code)
{
	quic_stream_stop_reading(s->qc, f->sid, code);
	f->failed = true;
	buf_release(&f->in);
}

/* An execution stream's 8-byte header is in F: its request must be ours
 * and in flight, else the stream is refused (-32002, stream injection). */
static void exec_header(struct be_flow *s, struct fstream *f)
{
	char key[32];
	flow_exec_hdr_get((const uint8_t *)f->in.data + f->in.off, &f->rid, &f->tag);
	buf_consume(&f->in, FLOW_EXEC_HDR);
	f->hdr = true;
	snprintf(key, sizeof key, "%u", f->rid);
	bool dup = false;
	for (struct fstream *o = s->streams; o; o = o->next)
		dup |= o != f && o->kind == H3_PRE_WT_UNI && o->hdr && o->rid == f->rid &&
		       o->tag == f->tag;
	if (!json_object_get(s->inflight, key) || dup) {
		log_warn("%s: mcp-flow: refused an execution stream for request %u (tag %u): "
			 "no such request in flight (%d)", NAME(s), f->rid, f->tag,
			 FLOW_ERR_STREAM_INJECTION);
		refuse(s, f, h3_wt_error_to_h3(0));
	}
}

/* Bytes on a stream the server opened. */
static void on_server_stream(struct be_flow *s, int64_t sid, const uint8_t *data, size_t len,
			     bool fin)
{
	struct fstream *f = s->streams;
	while (f && f->sid != sid)
		f = f->next;
	if (!f) {
		if ((sid & 0x2) == 0 || s->nstreams >= FLOW_MAX_EXEC) {
			/* a server-opened bidi stream, or one too many */
			quic_stream_abort(s->qc, sid, H3_STREAM_CREATION_ERROR);
			return;
		}
		f = calloc(1, sizeof *f);
		if (!f) {
			quic_stream_stop_reading(s->qc, sid, H3_INTERNAL_ERROR);
			return;
		}
		f->sid = sid;
		f->kind = H3_PRE_MORE;
		f->next = s->streams;
		s->streams = f;
		s->nstreams++;
	}
	if (f->failed || f->kind == H3_PRE_CONTROL || f->kind == H3_PRE_QPACK_ENCODER ||
	    f->kind == H3_PRE_QPACK_DECODER)
		return;   /* the server's SETTINGS: nothing we act on */
	if (buf_append(&f->in, data, len) < 0) {
		refuse(s, f, H3_INTERNAL_ERROR);
		return;
	}
	if (f->kind == H3_PRE_MORE) {
		uint64_t session = 0;
		size_t took = h3_preamble_parse((const uint8_t *)f->in.data + f->in.off,
						buf_pending(&f->in), false, &f->kind, &session);
		if (f->kind == H3_PRE_MORE)
			return;
		buf_consume(&f->in, took);
		if (f->kind == H3_PRE_CONTROL || f->kind == H3_PRE_QPACK_ENCODER ||
		    f->kind == H3_PRE_QPACK_DECODER) {
			buf_release(&f->in);
			return;
		}
		if (f->kind != H3_PRE_WT_UNI || session != (uint64_t)s->connect_sid) {
			refuse(s, f, H3_STREAM_CREATION_ERROR);
			return;
		}
	}
	if (!f->hdr && buf_pending(&f->in) >= FLOW_EXEC_HDR) {
		exec_header(s, f);
		if (f->failed)
			return;
	}
	if (f->hdr && buf_pending(&f->in) > backend_top(s->b)->max_message) {
		log_warn("%s: mcp-flow: request %u's execution stream %u exceeds maxMessageBytes",
			 NAME(s), f->rid, f->tag);
		refuse(s, f, h3_wt_error_to_h3(0));
		held_check(s);
		return;
	}
	if (fin && !f->hdr) {
		refuse(s, f, H3_GENERAL_PROTOCOL_ERROR);
		return;
	}
	if (fin) {
		f->done = true;
		held_check(s);
	}
}

/* ---- the connection's callbacks ---- */

/* Handshake done: our control stream and the CONNECT. */
static void on_ready(void *arg, struct quic_conn *c)
{
	struct be_flow *s = arg;
	int64_t uni;
	if (!s)
		return;
	struct buf b = { 0 };
	struct buf r = { 0 };
	int rc = quic_stream_open(c, false, &uni);
	if (rc == 0)
		rc = h3_control_preamble(&b, false, 1);
	if (rc == 0)
		rc = quic_stream_write(c, uni, (const uint8_t *)b.data + b.off, buf_pending(&b),
				       false);
	if (rc == 0)
		rc = quic_stream_open(c, true, &s->connect_sid);
	if (rc == 0)
		rc = h3_connect_append(&r, s->authority, s->path, NULL);
	if (rc == 0)
		rc = quic_stream_write(c, s->connect_sid, (const uint8_t *)r.data + r.off,
				       buf_pending(&r), false);
	buf_release(&b);
	buf_release(&r);
	if (rc < 0) {
		fail(s, H3_INTERNAL_ERROR, "cannot send the WebTransport CONNECT");
		return;
	}
	s->state = FS_CONNECT_SENT;
}

/* Bytes on stream SID. */
static void on_stream_data(void *arg, struct quic_conn *c, int64_t sid, const uint8_t *data,
			   size_t len, bool fin)
{
	struct be_flow *s = arg;
	(void)c;
	if (!s || s->down)
		return;
	if (s->state >= FS_CONNECT_SENT && sid == s->connect_sid)
		on_connect_stream(s, data, len, fin);
	else if (s->state == FS_OPEN && sid == s->ctl_sid)
		on_control(s, data, len, fin);
	else if (sid & 0x1)
		on_server_stream(s, sid, data, len, fin);
}

/* The server reset a stream or stopped reading one. */
static void on_stream_reset(void *arg, struct quic_conn *c, int64_t sid, uint64_t code,
			    bool reset)
{
	struct be_flow *s = arg;
	(void)c;
	if (!s || s->down)
		return;
	if (sid == s->connect_sid || (s->state == FS_OPEN && sid == s->ctl_sid)) {
		fail(s, H3_NO_ERROR, "the server reset the session's stream");
		return;
	}
	for (struct fstream *f = s->streams; f; f = f->next)
		if (f->sid == sid && reset && !f->done) {
			log_info("%s: mcp-flow: an execution stream was reset (0x%llx)", NAME(s),
				 (unsigned long long)code);
			f->failed = true;
			buf_release(&f->in);
			held_check(s);
			return;
		}
}

/* Stream SID is closed both ways: a stream of the server that no answer
 * waits for is forgotten (refused ones, its control and QPACK streams). */
static void on_stream_close(void *arg, struct quic_conn *c, int64_t sid)
{
	struct be_flow *s = arg;
	char key[32];
	(void)c;
	if (!s)
		return;
	for (struct fstream *f = s->streams; f; f = f->next) {
		if (f->sid != sid)
			continue;
		snprintf(key, sizeof key, "%u", f->rid);
		if (f->kind != H3_PRE_WT_UNI || !f->hdr || !json_object_get(s->inflight, key))
			stream_free(s, f);
		return;
	}
}

/* The control stream drained: the chain may send again. */
static void on_writable(void *arg, struct quic_conn *c, int64_t sid)
{
	struct be_flow *s = arg;
	(void)c;
	if (s && !s->down && s->state == FS_OPEN && sid == s->ctl_sid)
		chain_congestion(backend_peer(s->b), false);
}

/* A datagram: a whole notification in the session's encoding. */
static void on_datagram(void *arg, struct quic_conn *c, const uint8_t *data, size_t len)
{
	struct be_flow *s = arg;
	uint64_t quarter;
	uint8_t channel;
	uint32_t rid;
	const uint8_t *pl;
	size_t plen;
	(void)c;
	if (!s || s->down || s->state != FS_OPEN)
		return;
	size_t took = h3_datagram_parse(data, len, &quarter);
	if (!took || quarter != (uint64_t)s->connect_sid / 4 ||
	    !flow_dgram_parse(data + took, len - took, &channel, &rid, &pl, &plen))
		return;
	json_t *msg = decode_body(s, pl, plen);
	if (msg && !json_object_get(msg, "method")) {
		json_decref(msg);   /* only notifications travel as datagrams */
		return;
	}
	if (msg)
		backend_deliver(s->b, msg, plen);
}

/* The connection is gone (C is freed after this returns). */
static void on_closed(void *arg, struct quic_conn *c, const char *reason)
{
	struct be_flow *s = arg;
	char why[256];
	(void)c;
	if (!s)
		return;
	s->qc = NULL;
	snprintf(why, sizeof why, "mcp-flow connection to %s:%d closed: %s", s->host, s->port,
		 reason ? reason : "(no reason)");
	report_down(s, s->stopping ? "stopped" : why);
}

static const struct quic_conn_ops flow_conn_ops = {
	.ready = on_ready,
	.stream_data = on_stream_data,
	.stream_reset = on_stream_reset,
	.stream_close = on_stream_close,
	.writable = on_writable,
	.datagram = on_datagram,
	.closed = on_closed,
};

/* ---- the transport ---- */

/* The connect timeout, or the stop's grace, ran out. */
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct be_flow *s = w->data;
	(void)loop;
	(void)revents;
	if (s->stopping)
		fail(s, H3_NO_ERROR, "stopped");
	else
		fail(s, H3_NO_ERROR, "the MCP-Flow session did not open in time");
}

/*
 * Splits URL (https://HOST:PORT/PATH, checked by the configuration) into
 * S's host (localhost: 127.0.0.1), port, authority and path; -1 when it
 * does not fit.
 */
static int parse_url(struct be_flow *s, const char *url)
{
	const char *h = url + 8;
	size_t hl = strcspn(h, "/");
	const char *end = h + hl;
	const char *colon = NULL;
	if (strncmp(url, "https://", 8) || hl == 0 || hl >= sizeof s->authority)
		return -1;
	memcpy(s->authority, h, hl);
	s->authority[hl] = 0;
	for (const char *p = end - 1; p > h; p--)
		if (*p == ':') {
			colon = p;
			break;
		} else if (*p == ']') {
			break;
		}
	if (!colon)
		return -1;
	s->port = atoi(colon + 1);
	size_t n = (size_t)(colon - h);
	if (n >= 2 && h[0] == '[' && colon[-1] == ']')
		h++, n -= 2;
	if (n == 0 || n >= sizeof s->host || s->port <= 0 || s->port > 65535)
		return -1;
	memcpy(s->host, h, n);
	s->host[n] = 0;
	s->localhost = strcmp(s->host, "localhost") == 0;
	if (s->localhost)
		snprintf(s->host, sizeof s->host, "127.0.0.1");
	snprintf(s->path, sizeof s->path, "%s", *end ? end : "/");
	return 0;
}

/* Frees the transport state (its connection closed unseen). */
static void flow_destroy(struct backend *b)
{
	struct be_flow *s = T(b);
	if (!s)
		return;
	ev_timer_stop(EV_DEFAULT, &s->timer);
	if (s->qc) {
		quic_conn_set_arg(s->qc, NULL);
		quic_conn_close(s->qc, H3_NO_ERROR, "gone");
	}
	while (s->streams)
		stream_free(s, s->streams);
	while (s->held) {
		struct held *h = s->held;
		s->held = h->next;
		json_decref(h->msg);
		free(h);
	}
	buf_release(&s->connect_in);
	buf_release(&s->early);
	flow_reader_release(&s->rd);
	json_decref(s->init_id);
	json_decref(s->inflight);
	json_decref(s->stream_errors);
	free(s);
	backend_set_transport(b, NULL);
}

/* Connects: QUIC's handshake, then HTTP/3 and the CONNECT from on_ready. */
static int flow_start(struct backend *b)
{
	const struct cfg_server *c = backend_cfg(b);
	struct peer *peer = backend_peer(b);
	flow_destroy(b);
	struct be_flow *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	s->b = b;
	s->connect_sid = s->ctl_sid = -1;
	s->inflight = json_object();
	s->stream_errors = json_object();
	flow_reader_init(&s->rd, backend_top(b)->max_message);
	ev_init(&s->timer, on_timer);
	s->timer.data = s;
	backend_set_transport(b, s);
	if (!c->url || parse_url(s, c->url) < 0) {
		snprintf(peer->why_down, sizeof peer->why_down,
			 "the url must be https://HOST:PORT/PATH");
		return BE_START_PERMANENT;
	}
	struct quic_client_opts o = {
		.host = s->host,
		.port = s->port,
		.sni = s->localhost ? "localhost" : NULL,
		.alpn = "h3",
		.pin = c->has_cert_hash ? c->cert_hash : NULL,
		.ca_file = c->ca_file,
		.idle_timeout = 30,
		.max_datagram = 65535,
		.max_streams_bidi = 16,
		.max_streams_uni = FLOW_MAX_EXEC,
	};
	char why[256];
	s->qc = quic_client_connect(&o, &flow_conn_ops, s, why, sizeof why);
	if (!s->qc) {
		snprintf(peer->why_down, sizeof peer->why_down, "%s", why);
		return -1;
	}
	/* a backend's link stays up while it is quiet: PINGs keep it */
	quic_conn_keep_alive(s->qc, 5.0);
	ev_timer_set(&s->timer, FLOW_CONNECT_TIMEOUT, 0.);
	ev_timer_start(EV_DEFAULT, &s->timer);
	return 0;
}

/* Sends $/shutdown, then closes after GRACE (or when the server does). */
static void flow_stop(struct backend *b, double grace)
{
	struct be_flow *s = T(b);
	if (!s)
		return;
	if (!s->qc) {
		report_down(s, "stopped");
		return;
	}
	if (s->stopping)
		return;
	if (s->state == FS_OPEN) {
		json_t *bye = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "$/shutdown");
		if (bye)
			write_msg(s, bye);
		json_decref(bye);
	}
	s->stopping = true;
	ev_timer_stop(EV_DEFAULT, &s->timer);
	if (s->state != FS_OPEN || grace <= 0) {
		fail(s, H3_NO_ERROR, "stopped");
		return;
	}
	ev_timer_set(&s->timer, grace, 0.);
	ev_timer_start(EV_DEFAULT, &s->timer);
}

/* True while the connection exists. */
static bool flow_running(struct backend *b)
{
	struct be_flow *s = T(b);
	return s && s->qc;
}

/* Flow control: QUIC's own credit bounds what the server sends; what is
 * read is small next to it, so nothing is paused here. */
static void flow_pause(struct backend *b, bool paused)
{
	(void)b;
	(void)paused;
}

const struct be_transport_ops be_flow_ops = {
	.kind = "mcp-flow",
	.start = flow_start,
	.send = flow_send,
	.stop = flow_stop,
	.running = flow_running,
	.pause = flow_pause,
	.destroy = flow_destroy,
};
