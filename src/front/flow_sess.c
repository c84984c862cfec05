/*
 * flow_sess.c - one WebTransport session as an MCP-Flow session: its
 * control stream of length-prefixed frames, the encoding negotiated at
 * initialize, $/cancel and $/shutdown, large results on execution
 * streams, progress and log messages as datagrams; and the chain's
 * session (session.h) it feeds, the same object the other fronts make.
 *
 * Every frame of the client becomes one line handed to the session (a
 * CBOR frame is turned into its JSON first), so that one path handles a
 * message whatever its encoding; what the session writes goes out as one
 * frame in the session's encoding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cbor_json.h"
#include "chain.h"
#include "config.h"
#include "flow_int.h"
#include "log.h"
#include "rpc.h"
#include "session.h"

static void maybe_finish(struct flow_sess *ws);
static void keep_alive(struct flow_sess *ws);

/* ---- writing frames ---- */

/* Writes one frame on the control stream: its body the N pieces of IOV. */
static int write_iov(struct flow_sess *ws, const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	uint8_t hdr[FLOW_FRAME_HDR];
	if (ws->control_sid < 0 || len > UINT32_MAX)
		return -1;
	flow_frame_hdr(hdr, (uint32_t)len);
	if (flow_conn_write(ws->c, ws->control_sid, hdr, sizeof hdr, false) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (iov[i].iov_len &&
		    flow_conn_write(ws->c, ws->control_sid, iov[i].iov_base, iov[i].iov_len,
				    false) < 0)
			return -1;
	return 0;
}

/* Writes one frame of body P (N bytes) on the control stream. */
static int write_body(struct flow_sess *ws, const void *p, size_t n)
{
	struct iovec one = { (void *)p, n };
	return write_iov(ws, &one, 1);
}

/* Encodes T (borrowed) in ENC into OUT: 0 or -1. */
static int encode_tree(json_t *t, enum flow_encoding enc, struct buf *out)
{
	char why[128];
	if (enc == FLOW_ENC_CBOR) {
		if (cbor_from_json(t, out, why, sizeof why) == 0)
			return 0;
		log_error("flow: a message cannot be written as CBOR: %s", why);
		return -1;
	}
	return json_dump_callback(t, buf_dump_cb, out, JSON_COMPACT) == 0 ? 0 : -1;
}

/* Writes message T (borrowed) as one frame in the session's encoding. */
static int write_tree(struct flow_sess *ws, json_t *t)
{
	struct buf b = { 0 };
	int rc = encode_tree(t, ws->enc, &b);
	if (rc == 0)
		rc = write_body(ws, b.data + b.off, buf_pending(&b));
	buf_release(&b);
	return rc;
}

/* Joins the N pieces of IOV into B. */
static int join_iov(const struct iovec *iov, int n, struct buf *b)
{
	for (int i = 0; i < n; i++)
		if (buf_append(b, iov[i].iov_base, iov[i].iov_len) < 0)
			return -1;
	return 0;
}

/* A message of the session as a tree (new reference), or NULL. */
static json_t *out_tree(const struct session_out *o)
{
	if (!o->iov)
		return json_incref(o->tree);
	struct buf b = { 0 };
	json_t *t = NULL;
	if (join_iov(o->iov, o->n, &b) == 0)
		t = json_loadb(b.data + b.off, buf_pending(&b), 0, NULL);
	buf_release(&b);
	return t;
}

/* Writes what the session handed out, as it is, in the session's encoding. */
static int write_out(struct flow_sess *ws, const struct session_out *o)
{
	if (ws->enc == FLOW_ENC_JSON && o->iov)
		return write_iov(ws, o->iov, o->n);
	json_t *t = out_tree(o);
	int rc = t ? write_tree(ws, t) : -1;
	json_decref(t);
	return rc;
}

/* Writes an error answer to ID (borrowed; NULL: null) with CODE and MESSAGE. */
static void write_error(struct flow_sess *ws, json_t *id, int code, const char *message)
{
	json_t *e = rpc_error(id, code, message, NULL);
	if (e)
		write_tree(ws, e);
	json_decref(e);
}

/* ---- the client's open requests ---- */

/* The open request whose id has key K (KN bytes), with its link. */
static struct flow_open **open_find(struct flow_sess *ws, const unsigned char *k, size_t kn)
{
	unsigned char key[RPC_KEY_MAX];
	for (struct flow_open **pp = &ws->open; *pp; pp = &(*pp)->next) {
		size_t n = msg_val_key(&(*pp)->id, key);
		if (n == kn && memcmp(key, k, n) == 0)
			return pp;
	}
	return NULL;
}

/* Forgets the open request ID (borrowed); true when it was open. */
static bool open_drop(struct flow_sess *ws, const struct msg_val *id)
{
	unsigned char key[RPC_KEY_MAX];
	size_t kn = id ? msg_val_key(id, key) : 0;
	struct flow_open **pp = kn ? open_find(ws, key, kn) : NULL;
	if (!pp)
		return false;
	struct flow_open *o = *pp;
	*pp = o->next;
	msg_val_release(&o->id);
	free(o);
	ws->nopen--;
	return true;
}

/* Notes the request in M (one message) as open. */
static void open_note(struct flow_sess *ws, struct msg *m)
{
	struct rpc_info in;
	if (msg_classify(m, &in) != RPC_REQUEST)
		return;
	struct flow_open *o = calloc(1, sizeof *o);
	if (!o || msg_id_get(m, &o->id) < 0 || o->id.n == 0) {
		free(o);
		return;
	}
	o->next = ws->open;
	ws->open = o;
	ws->nopen++;
	keep_alive(ws);
}

/* The session's client gave up a request (notifications/cancelled). */
static void on_unanswered(void *arg, const struct msg_val *id)
{
	struct flow_sess *ws = arg;
	open_drop(ws, id);
	maybe_finish(ws);
}

/* ---- execution streams ---- */

/* True with *V when ID (a msg_val's text) is an integer that a stream
 * header can carry (0 to 2^32-1). */
static bool id_u32(const struct msg_val *id, uint32_t *v)
{
	if (!id || id->n == 0 || id->n > 10)
		return false;
	const char *p = msg_val_text(id);
	uint64_t x = 0;
	for (uint32_t i = 0; i < id->n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		x = x * 10 + (uint64_t)(p[i] - '0');
	}
	if (x > UINT32_MAX)
		return false;
	*v = (uint32_t)x;
	return true;
}

/* Decodes standard base64 TEXT (N bytes) into a new buffer (*OUT, *OUTN). */
static int b64_decode(const char *text, size_t n, unsigned char **out, size_t *outn)
{
	if (n % 4 != 0 || n > INT32_MAX)
		return -1;
	unsigned char *b = malloc(n / 4 * 3 + 1);
	if (!b)
		return -1;
	int got = n ? EVP_DecodeBlock(b, (const unsigned char *)text, (int)n) : 0;
	if (got < 0) {
		free(b);
		return -1;
	}
	size_t pad = n >= 1 && text[n - 1] == '=' ? (n >= 2 && text[n - 2] == '=' ? 2 : 1) : 0;
	*out = b;
	*outn = (size_t)got - pad;
	return 0;
}

/* One content item that may leave the control stream. */
struct candidate {
	json_t *item;       /* the content item (borrowed from the result) */
	json_t *holder;     /* what holds KEY: the item or its embedded resource */
	const char *key;    /* "text", "blob" or "data" */
	size_t size;        /* its text's bytes */
};

/* Orders candidates largest first. */
static int by_size(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* Sends PAYLOAD (N bytes) on a new execution stream for REQUEST_ID; its tag
 * in *TAG. 0, or -1 when no stream can be opened now. */
static int exec_send(struct flow_sess *ws, uint32_t request_id, const void *payload, size_t n,
		     uint32_t *tag)
{
	int64_t sid;
	if (quic_stream_open(ws->c->qc, false, &sid) < 0)
		return -1;
	struct flow_exec *e = calloc(1, sizeof *e);
	struct buf b = { 0 };
	uint8_t hdr[FLOW_EXEC_HDR];
	if (!e || h3_wt_preamble(&b, false, (uint64_t)ws->connect_sid) < 0) {
		free(e);
		buf_release(&b);
		quic_stream_abort(ws->c->qc, sid, h3_wt_error_to_h3(0));
		return -1;
	}
	e->sid = sid;
	e->request_id = request_id;
	e->tag = ++ws->next_tag;
	flow_exec_hdr_put(hdr, request_id, e->tag);
	int rc = buf_append(&b, hdr, sizeof hdr);
	if (rc == 0)
		rc = flow_conn_write(ws->c, sid, b.data + b.off, buf_pending(&b), false);
	if (rc == 0)
		rc = flow_conn_write(ws->c, sid, payload, n, true);
	buf_release(&b);
	e->next = ws->execs;
	ws->execs = e;
	ws->nexecs++;
	*tag = e->tag;
	if (rc < 0) {
		/* it failed mid-way: the client hears of it */
		json_t *t = json_pack("{s:s, s:s, s:{s:I, s:I, s:s}}", "jsonrpc", "2.0", "method",
				      "$/streamError", "params", "requestId", (json_int_t)request_id,
				      "streamTag", (json_int_t)e->tag, "error",
				      "the stream could not be written");
		quic_stream_abort(ws->c->qc, sid, h3_wt_error_to_h3(0));
		if (t)
			write_tree(ws, t);
		json_decref(t);
	}
	return 0;
}

/*
 * A result of SIZE bytes above the threshold (T, borrowed and changed):
 * its largest content items leave on execution streams, replaced by
 * ref/stream items, until what stays is under the threshold. 1 when T was
 * changed, 0 when nothing could move, -1 when the stream limit refuses it.
 */
static int move_to_streams(struct flow_sess *ws, uint32_t rid, json_t *t, size_t size)
{
	json_t *result = json_object_get(t, "result");
	json_t *items = json_object_get(result, "content");
	if (!json_is_array(items))
		items = json_object_get(result, "contents");   /* resources/read */
	if (!json_is_array(items) || json_array_size(items) == 0)
		return 0;
	size_t n = json_array_size(items), nc = 0;
	struct candidate *c = calloc(n, sizeof *c);
	if (!c)
		return 0;
	for (size_t i = 0; i < n; i++) {
		json_t *it = json_array_get(items, i);
		json_t *res = json_object_get(it, "resource");   /* an embedded resource */
		json_t *h = json_is_object(res) ? res : it;
		static const char *const keys[] = { "text", "blob", "data" };
		for (size_t k = 0; k < 3; k++) {
			json_t *v = json_object_get(h, keys[k]);
			if (json_is_string(v)) {
				c[nc++] = (struct candidate){ it, h, keys[k], json_string_length(v) };
				break;
			}
		}
	}
	qsort(c, nc, sizeof *c, by_size);
	size_t take = 0, left = size;
	while (take < nc && left > ws->c->f->cfg->stream_threshold) {
		left -= c[take].size < left ? c[take].size : left;
		take++;
	}
	if (take == 0) {
		free(c);
		return 0;
	}
	if (ws->nexecs + take > ws->c->f->cfg->max_streams || ws->shutting_down) {
		free(c);
		return -1;
	}
	int changed = 0;
	for (size_t i = 0; i < take; i++) {
		json_t *v = json_object_get(c[i].holder, c[i].key);
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		unsigned char *bytes = NULL;
		size_t nbytes = len;
		bool text = strcmp(c[i].key, "text") == 0;
		if (!text && b64_decode(s, len, &bytes, &nbytes) < 0)
			continue;   /* not base64 after all: it stays */
		uint32_t tag;
		int rc = exec_send(ws, rid, text ? (const void *)s : bytes, nbytes, &tag);
		free(bytes);
		if (rc < 0)
			break;      /* no stream now: the rest stays inline */
		json_t *mime = json_object_get(c[i].holder, "mimeType");
		json_t *uri = json_object_get(c[i].holder, "uri");
		json_t *ref = json_pack("{s:s, s:I, s:s}", "type", "ref/stream", "streamTag",
					(json_int_t)tag, "mimeType",
					json_is_string(mime) ? json_string_value(mime) :
					text ? "text/plain; charset=utf-8" :
					"application/octet-stream");
		if (ref && json_is_string(uri))
			json_object_set(ref, "uri", uri);
		/* the item is replaced where it is (a borrowed pointer: find it) */
		for (size_t j = 0; ref && j < json_array_size(items); j++)
			if (json_array_get(items, j) == c[i].item) {
				json_array_set_new(items, j, ref);
				ref = NULL;
				changed = 1;
				break;
			}
		json_decref(ref);
	}
	free(c);
	return changed;
}

/* Forgets execution stream SID; true when it was one. */
static bool exec_drop(struct flow_sess *ws, int64_t sid)
{
	for (struct flow_exec **pp = &ws->execs; *pp; pp = &(*pp)->next) {
		if ((*pp)->sid == sid) {
			struct flow_exec *e = *pp;
			*pp = e->next;
			free(e);
			ws->nexecs--;
			return true;
		}
	}
	return false;
}

/* Aborts the execution streams of request RID ($/cancel). */
static void exec_abort_request(struct flow_sess *ws, uint32_t rid)
{
	struct flow_exec **pp = &ws->execs;
	while (*pp) {
		struct flow_exec *e = *pp;
		if (e->request_id == rid) {
			quic_stream_abort(ws->c->qc, e->sid, h3_wt_error_to_h3(0));
			*pp = e->next;
			free(e);
			ws->nexecs--;
		} else {
			pp = &e->next;
		}
	}
}

/* ---- datagrams ---- */

/* Sends message T (borrowed) on CHANNEL for request RID as a datagram:
 * 0, or -1 when it must go on the control stream (too large, over the
 * rate, no room). */
static int dgram_send(struct flow_sess *ws, uint8_t channel, uint32_t rid, json_t *t)
{
	const struct cfg_flow *cfg = ws->c->f->cfg;
	double now = ev_now(EV_DEFAULT);
	ws->dgram_tokens += (now - ws->dgram_at) * cfg->datagram_rate;
	if (ws->dgram_tokens > cfg->datagram_rate)
		ws->dgram_tokens = cfg->datagram_rate;
	ws->dgram_at = now;
	if (ws->dgram_tokens < 1)
		return -1;   /* throttled: the control stream carries it */
	struct buf b = { 0 };
	uint8_t hdr[FLOW_DGRAM_HDR];
	flow_dgram_hdr_put(hdr, channel, rid);
	int rc = h3_varint_append(&b, (uint64_t)ws->connect_sid / 4);
	if (rc == 0)
		rc = buf_append(&b, hdr, sizeof hdr);
	if (rc == 0)
		rc = encode_tree(t, ws->enc, &b);
	if (rc == 0 && buf_pending(&b) > quic_datagram_max(ws->c->qc))
		rc = -1;
	if (rc == 0)
		rc = quic_datagram_send(ws->c->qc, (const uint8_t *)b.data + b.off, buf_pending(&b));
	buf_release(&b);
	if (rc == 0)
		ws->dgram_tokens -= 1;
	return rc;
}

/* ---- what the session writes ---- */

/* Adds the transport's capabilities to the initialize answer T (borrowed). */
static void add_transport(struct flow_sess *ws, json_t *t)
{
	json_t *result = json_object_get(t, "result");
	if (!json_is_object(result))
		return;
	const struct cfg_flow *cfg = ws->c->f->cfg;
	json_object_set_new(result, "transport",
		json_pack("{s:s, s:s, s:s, s:I, s:b}", "type", "mcp-flow", "version", "0.1",
			  "encoding", ws->want == FLOW_ENC_CBOR ? "cbor" : "json",
			  "maxConcurrentStreams", (json_int_t)cfg->max_streams,
			  "datagramsSupported", cfg->datagrams));
}

/* The session's write function: one frame per message, or an execution
 * stream, or a datagram. */
static int sess_write(void *arg, const struct session_out *o)
{
	struct flow_sess *ws = arg;
	if (ws->state == FLOW_CLOSED || ws->c->gone)
		return 0;
	uint32_t rid;
	bool answered = false;
	if (o->kind == SESSION_OUT_RESPONSE || o->kind == SESSION_OUT_BATCH)
		answered = open_drop(ws, o->about);
	if (o->kind == SESSION_OUT_RESPONSE && ws->init_pending && o->about &&
	    o->about->n == ws->init_id.n &&
	    memcmp(msg_val_text(o->about), msg_val_text(&ws->init_id), o->about->n) == 0) {
		/* the initialize answer: JSON, with the transport's terms; the
		 * negotiated encoding from the next frame on */
		json_t *t = out_tree(o);
		if (t) {
			if (o->outcome == 0)
				add_transport(ws, t);
			write_tree(ws, t);
		}
		json_decref(t);
		ws->init_pending = false;
		if (o->outcome == 0) {
			ws->enc = ws->want;
			ws->state = FLOW_READY;
		} else {
			ws->state = FLOW_CONTROL_OPENED;  /* it may try again */
		}
		msg_val_release(&ws->init_id);
		maybe_finish(ws);
		return 0;
	}
	size_t size = 0;
	for (int i = 0; o->iov && i < o->n; i++)
		size += o->iov[i].iov_len;
	if (o->kind == SESSION_OUT_RESPONSE && o->outcome != 1 && id_u32(o->about, &rid) &&
	    (!o->iov || size > ws->c->f->cfg->stream_threshold)) {
		json_t *t = out_tree(o);
		if (t && !o->iov) {
			char *s = json_dumps(t, JSON_COMPACT);
			size = s ? strlen(s) : 0;
			free(s);
		}
		int moved = t && size > ws->c->f->cfg->stream_threshold ?
			    move_to_streams(ws, rid, t, size) : 0;
		if (moved < 0) {
			json_t *id = msg_val_json(o->about);
			char m[160];
			snprintf(m, sizeof m, "Stream limit exceeded: %u execution streams are open "
				 "(maxConcurrentStreams %u)", ws->nexecs,
				 ws->c->f->cfg->max_streams);
			write_error(ws, id, FLOW_ERR_STREAM_LIMIT, m);
			json_decref(id);
		} else if (moved > 0) {
			write_tree(ws, t);
		}
		json_decref(t);
		if (moved != 0) {
			maybe_finish(ws);
			return 0;
		}
	}
	if (ws->dgrams && o->kind == SESSION_OUT_PROGRESS && id_u32(o->about, &rid)) {
		json_t *t = out_tree(o);
		int rc = t ? dgram_send(ws, FLOW_CH_PROGRESS, rid, t) : -1;
		json_decref(t);
		if (rc == 0)
			return 0;
	} else if (ws->dgrams && o->kind == SESSION_OUT_NOTIFICATION) {
		json_t *t = out_tree(o);
		const char *m = json_string_value(json_object_get(t, "method"));
		int rc = m && strcmp(m, "notifications/message") == 0 ?
			 dgram_send(ws, FLOW_CH_LOG, 0, t) : -1;
		json_decref(t);
		if (rc == 0)
			return 0;
	}
	write_out(ws, o);
	if (answered)
		maybe_finish(ws);
	return 0;
}

/* ---- what the client sends ---- */

/* The id of the request in BODY (N bytes, in encoding ENC), or NULL: an
 * error about a frame in the wrong encoding still names its request.
 * *NOTIFICATION: the frame reads as a notification (a method, no id),
 * which JSON-RPC never answers. */
static json_t *body_id(const uint8_t *body, size_t n, int enc, bool *notification)
{
	char why[64];
	json_t *t = enc == FLOW_ENC_CBOR ? cbor_to_json(body, n, why, sizeof why) :
		    enc == FLOW_ENC_JSON ? json_loadb((const char *)body, n, 0, NULL) : NULL;
	json_t *id = json_object_get(t, "id");
	*notification = json_is_string(json_object_get(t, "method")) && !id;
	id = json_is_string(id) || json_is_integer(id) ? json_incref(id) : NULL;
	json_decref(t);
	return id;
}

/* $/cancel {requestId, reason}: the request is cancelled at the backend and
 * answered with -32000 "Cancelled". */
static void on_cancel(struct flow_sess *ws, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	const char *reason = json_string_value(json_object_get(params, "reason"));
	if (!json_is_integer(rid) && !json_is_string(rid))
		return;
	char *text = json_dumps(rid, JSON_ENCODE_ANY | JSON_COMPACT);
	struct msg_val id = { 0 };
	if (!text || msg_val_set(&id, text, strlen(text)) < 0) {
		free(text);
		return;
	}
	free(text);
	if (open_drop(ws, &id)) {
		session_cancel(ws->s, &id, reason ? reason : "$/cancel");
		uint32_t r;
		if (id_u32(&id, &r))
			exec_abort_request(ws, r);
		write_error(ws, rid, FLOW_ERR_STREAM_LIMIT, "Cancelled");
	}
	msg_val_release(&id);
	maybe_finish(ws);
}

/* The client's initialize (tree T, borrowed and changed): the encoding and
 * datagrams it asks for; its "transport" member is the hop's, not passed
 * on. -1 with the error written when its transport is not MCP-Flow's. */
static int on_initialize(struct flow_sess *ws, json_t *t)
{
	json_t *params = json_object_get(t, "params");
	json_t *tr = json_object_get(params, "transport");
	ws->want = FLOW_ENC_JSON;
	ws->dgrams = false;
	if (!tr)
		return 0;
	json_t *type = json_object_get(tr, "type");
	json_t *encs = json_object_get(tr, "encodings");
	const char *bad = NULL;
	if (!json_is_object(tr) || (type && (!json_is_string(type) ||
					     strcmp(json_string_value(type), "mcp-flow"))))
		bad = "Invalid Request: params.transport.type must be \"mcp-flow\"";
	else if (encs && !json_is_array(encs))
		bad = "Invalid Request: params.transport.encodings must be an array";
	if (!bad && encs) {
		bool any = json_array_size(encs) == 0;
		size_t i;
		json_t *e;
		json_array_foreach(encs, i, e) {
			const char *s = json_string_value(e);
			if (s && (!strcmp(s, "cbor") || !strcmp(s, "json"))) {
				ws->want = !strcmp(s, "cbor") ? FLOW_ENC_CBOR : FLOW_ENC_JSON;
				any = true;
				break;
			}
		}
		if (!any)
			bad = "Invalid Request: none of params.transport.encodings is spoken "
			      "here (\"cbor\", \"json\")";
	}
	if (bad) {
		write_error(ws, json_object_get(t, "id"), RPC_INVALID_REQUEST, bad);
		return -1;
	}
	ws->dgrams = json_is_true(json_object_get(tr, "datagrams")) && ws->c->f->cfg->datagrams &&
		     ws->c->peer.h3_datagram;
	json_object_del(params, "transport");
	return 0;
}

/* One frame of the control stream: BODY (N bytes, borrowed). */
static void on_frame(struct flow_sess *ws, const uint8_t *body, size_t n)
{
	int enc = flow_body_encoding(body, n);
	enum flow_encoding expect = ws->state == FLOW_READY ? ws->enc : FLOW_ENC_JSON;
	char why[160];
	if (enc != (int)expect) {
		bool notification = false;
		json_t *id = enc >= 0 ? body_id(body, n, enc, &notification) : NULL;
		if (notification) {   /* never answered: dropped, said in the log */
			log_info("flow: session #%u: a notification in the wrong encoding dropped",
				 ws->serial);
			return;
		}
		snprintf(why, sizeof why, "Encoding mismatch: this session's messages are %s%s",
			 expect == FLOW_ENC_CBOR ? "CBOR" : "JSON",
			 ws->state == FLOW_READY ? "" : " until initialize is answered");
		write_error(ws, id, enc < 0 ? RPC_PARSE_ERROR : FLOW_ERR_ENCODING,
			    enc < 0 ? "Parse error: a frame neither JSON nor CBOR" : why);
		json_decref(id);
		return;
	}
	char *line = NULL;
	size_t len = n;
	if (enc == FLOW_ENC_CBOR) {
		json_t *t = cbor_to_json(body, n, why, sizeof why);
		if (!t) {
			char m[200];
			snprintf(m, sizeof m, "Parse error: CBOR: %s", why);
			write_error(ws, NULL, RPC_PARSE_ERROR, m);
			return;
		}
		line = json_dumps(t, JSON_COMPACT);
		json_decref(t);
		if (!line)
			return;
		len = strlen(line);
	}
	struct msg m;
	json_t *err = NULL;
	if (msg_init_line(&m, line ? line : (const char *)body, len, &err) < 0) {
		if (err)
			write_tree(ws, err);
		json_decref(err);
		free(line);
		return;
	}
	const char *method = msg_method(&m);
	if (method && method[0] == '$' && method[1] == '/') {
		json_t *t = msg_tree(&m);
		if (!strcmp(method, "$/cancel"))
			on_cancel(ws, json_object_get(t, "params"));
		else if (!strcmp(method, "$/shutdown"))
			flow_sess_shutdown(ws);
		else if (!strcmp(method, "$/streamError"))
			log_info("flow: session #%u: the client reports a stream error",
				 ws->serial);
		else if (json_object_get(t, "id"))
			write_error(ws, json_object_get(t, "id"), -32601, "Method not found");
		msg_release(&m);
		free(line);
		return;
	}
	if (ws->shutting_down && json_object_get(msg_tree(&m), "id") && method) {
		write_error(ws, json_object_get(msg_tree(&m), "id"), RPC_INVALID_REQUEST,
			    "Invalid Request: the session is shutting down ($/shutdown)");
		msg_release(&m);
		free(line);
		return;
	}
	if (method && !strcmp(method, "initialize") && ws->state < FLOW_READY &&
	    !ws->init_pending) {
		json_t *t = msg_tree(&m);
		if (on_initialize(ws, t) < 0) {
			msg_release(&m);
			free(line);
			return;
		}
		json_incref(t);
		msg_release(&m);
		msg_init_tree(&m, t);   /* without its transport member */
		msg_val_release(&ws->init_id);
		if (msg_id_get(&m, &ws->init_id) == 0 && ws->init_id.n) {
			ws->init_pending = true;
			ws->state = FLOW_INITIALIZING;
		}
	} else if (method && ws->state == FLOW_CONTROL_OPENED && msg_id_int(&m, &(int64_t){ 0 })) {
		/* a client that does not initialize (a 2026-07-28 one): JSON stays */
		ws->state = FLOW_READY;
	}
	if (json_is_array(m.tree)) {
		size_t i;
		json_t *e;
		json_array_foreach(m.tree, i, e) {
			struct msg one;
			msg_init_tree(&one, json_incref(e));
			open_note(ws, &one);
			msg_release(&one);
		}
	} else {
		open_note(ws, &m);
	}
	session_receive_msg(ws->s, &m, NULL);
	free(line);
}

void flow_sess_stream_data(struct flow_sess *ws, int64_t sid, const uint8_t *p, size_t n,
			   bool fin)
{
	if (ws->control_sid < 0 && ws->state == FLOW_CONNECTED) {
		ws->control_sid = sid;
		ws->state = FLOW_CONTROL_OPENED;
	} else if (sid != ws->control_sid) {
		/* one control stream per session: another bidi stream is refused */
		quic_stream_abort(ws->c->qc, sid, h3_wt_error_to_h3(0));
		return;
	}
	if (ws->skip > 0) {   /* the rest of a frame too large, dropped */
		size_t k = n < ws->skip ? n : (size_t)ws->skip;
		ws->skip -= k;
		p += k;
		n -= k;
	}
	if (n && flow_reader_feed(&ws->rd, p, n) < 0) {
		flow_sess_end(ws, "out of memory", true);
		return;
	}
	const uint8_t *body;
	size_t len;
	for (;;) {
		enum flow_read r = flow_reader_next(&ws->rd, &body, &len);
		if (r == FLOW_READ_MORE)
			break;
		if (r == FLOW_READ_TOO_BIG) {
			char m[160];
			snprintf(m, sizeof m, "Invalid Request: a frame of %zu bytes; this server "
				 "takes at most %zu", len, ws->rd.max);
			write_error(ws, NULL, RPC_INVALID_REQUEST, m);
			/* what of it was read is dropped, the rest as it comes; when
			 * all of it is here, what follows it is the next frame */
			size_t held = flow_reader_pending(&ws->rd) - FLOW_FRAME_HDR;
			if (held >= len) {
				buf_consume(&ws->rd.in, FLOW_FRAME_HDR + len);
				continue;
			}
			ws->skip = len - held;
			buf_reset(&ws->rd.in);
			continue;
		}
		on_frame(ws, body, len);   /* never ends the session itself */
	}
	if (fin) {
		if (flow_reader_pending(&ws->rd) > 0)
			log_info("flow: session #%u: the control stream ended in a truncated "
				 "frame (%zu bytes)", ws->serial, flow_reader_pending(&ws->rd));
		flow_sess_end(ws, "the client closed its control stream", true);
	}
}

void flow_sess_uni_data(struct flow_sess *ws, int64_t sid, const uint8_t *p, size_t n, bool fin)
{
	/* The guide has the server open execution streams; a client's are
	 * not taken: its header is read for the log, the stream refused. */
	if (n >= FLOW_EXEC_HDR) {
		uint32_t rid, tag;
		flow_exec_hdr_get(p, &rid, &tag);
		log_info("flow: session #%u: a client execution stream (request %u, tag %u) "
			 "refused", ws->serial, rid, tag);
	}
	quic_stream_stop_reading(ws->c->qc, sid, h3_wt_error_to_h3(0));
}

void flow_sess_stream_gone(struct flow_sess *ws, int64_t sid, bool reset)
{
	if (exec_drop(ws, sid)) {
		if (reset)
			log_info("flow: session #%u: the client stopped an execution stream",
				 ws->serial);
		maybe_finish(ws);
	} else if (sid == ws->control_sid && reset) {
		flow_sess_end(ws, "the client reset its control stream", true);
	}
}

void flow_sess_datagram(struct flow_sess *ws, const uint8_t *p, size_t n)
{
	uint8_t channel;
	uint32_t rid;
	const uint8_t *payload;
	size_t plen;
	if (!flow_dgram_parse(p, n, &channel, &rid, &payload, &plen)) {
		log_debug("flow: session #%u: a malformed datagram dropped", ws->serial);
		return;
	}
	/* nothing the client sends by datagram is defined: read, dropped */
	log_debug("flow: session #%u: a datagram on channel %u dropped", ws->serial, channel);
}

void flow_sess_connect_data(struct flow_sess *ws, const uint8_t *p, size_t n, bool fin)
{
	while (n > 0 && ws->state != FLOW_CLOSED) {
		if (ws->data_left == 0) {
			/* a frame head: DATA carries capsules, others are skipped */
			size_t held = buf_pending(&ws->capsules);
			(void)held;
			uint64_t type, plen;
			size_t used = h3_frame_head(p, n, &type, &plen);
			if (used == 0)
				break;   /* a head split across reads is rare: see below */
			p += used;
			n -= used;
			if (type != H3_FRAME_DATA) {
				size_t k = n < plen ? n : (size_t)plen;
				p += k;
				n -= k;
				continue;
			}
			ws->data_left = plen;
			continue;
		}
		size_t k = n < ws->data_left ? n : (size_t)ws->data_left;
		if (buf_pending(&ws->capsules) + k > 65536) {
			flow_sess_end(ws, "a capsule too large", true);
			return;
		}
		buf_append(&ws->capsules, p, k);
		p += k;
		n -= k;
		ws->data_left -= k;
		for (;;) {
			uint64_t type;
			const uint8_t *v;
			size_t vlen;
			ssize_t used = h3_capsule_parse((const uint8_t *)ws->capsules.data +
							ws->capsules.off, buf_pending(&ws->capsules),
							65536, &type, &v, &vlen);
			if (used <= 0)
				break;
			if (type == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION) {
				uint32_t code = 0;
				const char *reason = NULL;
				size_t rlen = 0;
				h3_close_parse(v, vlen, &code, &reason, &rlen);
				log_info("flow: session #%u: the client closed the session (%u)",
					 ws->serial, code);
				flow_conn_write(ws->c, ws->connect_sid, NULL, 0, true);
				flow_sess_end(ws, "the client closed the session", false);
				return;
			}
			if (type == H3_CAPSULE_DRAIN_WEBTRANSPORT_SESSION)
				flow_sess_shutdown(ws);
			buf_consume(&ws->capsules, (size_t)used);
		}
		buf_compact(&ws->capsules);
	}
	if (fin && ws->state != FLOW_CLOSED)
		flow_sess_end(ws, "the client ended the session's CONNECT stream", false);
}

void flow_sess_writable(struct flow_sess *ws, int64_t sid)
{
	(void)ws;
	(void)sid;   /* streams are written whole: nothing waits for room */
}

/* ---- the session's life ---- */

/* Keeps the connection alive while work is open: a slow backend leaves it
 * quiet, and a client may time out sooner than we do. */
static void keep_alive(struct flow_sess *ws)
{
	bool busy = flow_sess_busy(ws);
	if (busy != ws->kept_alive && !ws->c->gone) {
		quic_conn_keep_alive(ws->c->qc, busy ? 2.0 : 0);
		ws->kept_alive = busy;
	}
}

/* A $/shutdown that has nothing left to wait for ends the session. */
static void maybe_finish(struct flow_sess *ws)
{
	keep_alive(ws);
	if (ws->shutting_down && ws->state != FLOW_CLOSED && !flow_sess_busy(ws))
		ev_feed_event(EV_DEFAULT, &ws->drain, EV_TIMER);
}

/* The drain's end (all done, or its time is up). */
static void on_drain(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct flow_sess *ws = w->data;
	ev_timer_stop(loop, w);
	flow_sess_end(ws, "$/shutdown", true);
}

bool flow_sess_busy(const struct flow_sess *ws)
{
	return ws->nopen > 0 || ws->nexecs > 0 || ws->init_pending;
}

void flow_sess_shutdown(struct flow_sess *ws)
{
	if (ws->shutting_down || ws->state == FLOW_CLOSED)
		return;
	ws->shutting_down = true;
	ev_timer_set(&ws->drain, ws->c->f->cfg->idle_timeout, 0);
	ev_timer_start(EV_DEFAULT, &ws->drain);
	maybe_finish(ws);
}

struct flow_sess *flow_sess_new(struct flow_conn *c, int64_t connect_sid)
{
	struct flow_front *f = c->f;
	struct flow_sess *ws = calloc(1, sizeof *ws);
	if (!ws)
		return NULL;
	ws->c = c;
	ws->connect_sid = connect_sid;
	ws->control_sid = -1;
	ws->state = FLOW_CONNECTED;
	ws->serial = c->serial;
	ws->dgram_at = ev_now(EV_DEFAULT);
	ws->dgram_tokens = f->cfg->datagram_rate;
	flow_reader_init(&ws->rd, f->max);
	ev_init(&ws->drain, on_drain);
	ws->drain.data = ws;
	snprintf(ws->peer, sizeof ws->peer, "%s", quic_conn_peer(c->qc));
	char why[200] = "";
	ws->chain = f->make ? f->make(f->chain_arg, ws->serial, NULL, NULL, why, sizeof why) :
		    f->chain;
	if (!ws->chain) {
		log_info("flow: session #%u refused: %s", ws->serial, why);
		flow_reader_release(&ws->rd);
		free(ws);
		return NULL;
	}
	char name[48];
	snprintf(name, sizeof name, "flow #%u", ws->serial);
	ws->s = session_new(ws->chain, name, sess_write, ws);
	if (!ws->s) {
		if (f->make && f->release)
			f->release(f->chain_arg, ws->chain, ws->serial);
		flow_reader_release(&ws->rd);
		free(ws);
		return NULL;
	}
	session_set_unanswered(ws->s, on_unanswered);
	session_set_input_ttl(ws->s, f->input_ttl);
	session_offer_stateless(ws->s, f->offer_stateless);
	session_set_trace_tags(ws->s, "quic", NULL);
	log_info("flow: session #%u opened from %s", ws->serial, ws->peer);
	return ws;
}

void flow_sess_end(struct flow_sess *ws, const char *reason, bool close_capsule)
{
	if (ws->state == FLOW_CLOSED)
		return;
	ws->state = FLOW_CLOSED;
	struct flow_conn *c = ws->c;
	struct flow_front *f = c->f;
	ev_timer_stop(EV_DEFAULT, &ws->drain);
	if (close_capsule && !c->gone) {
		struct buf b = { 0 };
		if (h3_close_append(&b, 0, reason) == 0)
			flow_conn_write(c, ws->connect_sid, b.data + b.off, buf_pending(&b), true);
		buf_release(&b);
	}
	while (ws->execs) {
		if (!c->gone)
			quic_stream_abort(c->qc, ws->execs->sid, h3_wt_error_to_h3(0));
		exec_drop(ws, ws->execs->sid);
	}
	session_close(ws->s, reason);
	session_free(ws->s);
	if (f->make && f->release)
		f->release(f->chain_arg, ws->chain, ws->serial);
	while (ws->open) {
		struct flow_open *o = ws->open;
		ws->open = o->next;
		msg_val_release(&o->id);
		free(o);
	}
	msg_val_release(&ws->init_id);
	flow_reader_release(&ws->rd);
	buf_release(&ws->capsules);
	log_info("flow: session #%u closed: %s", ws->serial, reason);
	c->ws = NULL;
	free(ws);
	flow_conn_session_ended(c, !close_capsule);
}
