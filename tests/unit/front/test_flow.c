/*
 * test_flow.c - unit tests for src/front/flow.c and flow_sess.c, the
 * MCP-Flow front, driven by bad input case by case: a real front on a
 * loopback UDP port (its certificate made here with selfcert, pinned by
 * the client), a fake backend peer in the chain, and our own QUIC client
 * (quic.h) speaking HTTP/3 and WebTransport through h3.h and MCP-Flow's
 * frames through flow_wire.h. Each case asserts the exact answer and,
 * where the session should survive, that a ping after it is answered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>
#include <jansson.h>

#include "buf.h"
#include "cbor_json.h"
#include "chain.h"
#include "config.h"
#include "flow_front.h"
#include "flow_wire.h"
#include "h3.h"
#include "log.h"
#include "peer.h"
#include "quic.h"
#include "rpc.h"
#include "selfcert.h"

#define WAIT 20.0   /* seconds: generous, for a loaded machine and ASan */

/* ---- the fake backend: echoes, tools of N-byte items, held calls ---- */

static struct peer be;
static json_t *be_pending, *be_held, *be_got;
static ev_timer be_timer;

/* Answers what was queued, from the loop (never from inside send). */
static void be_answer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	json_t *p = be_pending;
	be_pending = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(p, i, m)
		chain_receive(&be, json_incref(m));
	json_decref(p);
}

/* A tools/call's result: ARGS {"items": K, "size": N}: K text items of N bytes. */
static json_t *call_result(json_t *args)
{
	json_int_t k = json_integer_value(json_object_get(args, "items"));
	json_int_t n = json_integer_value(json_object_get(args, "size"));
	json_t *content = json_array();
	for (json_int_t i = 0; i < k; i++) {
		char *s = malloc((size_t)n + 1);
		assert_non_null(s);
		memset(s, 'a' + (int)i, (size_t)n);
		s[n] = '\0';
		json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", s));
		free(s);
	}
	return json_pack("{s:o}", "content", content);
}

/* The backend takes a message: a held call waits, the rest are answered from the loop. */
static int be_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	(void)p;
	(void)o;
	json_array_append_new(be_got, json_deep_copy(msg));
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	if (!id || !method)
		return 0;
	json_t *args = json_object_get(json_object_get(msg, "params"), "arguments");
	json_t *res;
	if (!strcmp(method, "tools/call") && json_is_true(json_object_get(args, "hold"))) {
		json_array_append(be_held, msg);
		return 0;
	}
	if (!strcmp(method, "tools/call"))
		res = call_result(args);
	else if (!strcmp(method, "tools/list"))
		res = json_pack("{s:[{s:s,s:{s:s}}]}", "tools", "name", "t", "inputSchema", "type",
				"object");
	else
		res = json_object();
	json_array_append_new(be_pending, rpc_result(id, res));
	ev_timer_stop(EV_DEFAULT, &be_timer);
	ev_timer_set(&be_timer, 0., 0.);
	ev_timer_start(EV_DEFAULT, &be_timer);
	return 0;
}

/* The backend's handshake: answered at once. */
static int be_initialize(struct peer *p, json_t *params, void (*cb)(void *arg, json_t *response),
			 void *arg)
{
	json_t *resp = rpc_result(json_null(), json_pack("{s:O,s:{s:{}},s:{s:s,s:s}}",
		"protocolVersion", json_object_get(params, "protocolVersion"), "capabilities",
		"tools", "serverInfo", "name", "fake", "version", "1"));
	p->ready = true;
	cb(arg, resp);
	json_decref(resp);
	return 0;
}

static const struct peer_ops be_ops = { .send = be_send, .initialize = be_initialize };

/* The backend got a message with METHOD (borrowed), or NULL. */
static json_t *be_saw(const char *method)
{
	size_t i;
	json_t *m;
	json_array_foreach(be_got, i, m)
		if (!strcmp(json_string_value(json_object_get(m, "method")) ?: "", method))
			return m;
	return NULL;
}

/* ---- the front ---- */

static struct chain *C;
static struct flow_front *F;
static struct cfg_flow cfg;
static struct selfcert sc;
static uint8_t pin[32];
static char *origins[] = { "https://app.example", NULL };

/* One hex digit's value. */
static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
}

/* A front with MAX_STREAMS execution streams and THRESHOLD; one message at most 4096 bytes. */
static void front_start(unsigned max_streams, size_t threshold)
{
	memset(&cfg, 0, sizeof cfg);
	cfg.set = true;
	cfg.address = "127.0.0.1";
	cfg.port = 0;
	cfg.path = "/mcp-flow";
	cfg.cert_file = sc.cert_file;
	cfg.key_file = sc.key_file;
	cfg.origins = origins;
	cfg.max_streams = max_streams;
	cfg.stream_threshold = threshold;
	cfg.datagrams = true;
	cfg.datagram_rate = 200;
	cfg.idle_timeout = 30;
	cfg.max_connections = 8;
	F = flow_front_new(C, &cfg, 4096);
	assert_non_null(F);
	assert_true(flow_front_port(F) > 0);
}

/* The chain, the fake backend and a front (4 streams, threshold 1024). */
static int setup(void **state)
{
	(void)state;
	be_pending = json_array();
	be_held = json_array();
	be_got = json_array();
	ev_init(&be_timer, be_answer);
	C = chain_new();
	peer_init(&be, &be_ops, PEER_BACKEND, "be");
	chain_add_peer(C, &be);
	front_start(4, 1024);
	return 0;
}

/* Frees what setup made. */
static int teardown(void **state)
{
	(void)state;
	flow_front_free(F);
	F = NULL;
	ev_timer_stop(EV_DEFAULT, &be_timer);
	chain_peer_gone(&be, "test over");
	chain_remove_peer(&be);
	peer_release(&be);
	chain_free(C);
	json_decref(be_pending);
	json_decref(be_held);
	json_decref(be_got);
	return 0;
}

/* ---- the loop ---- */

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Runs the loop until COND(ARG) or CAP seconds; returns COND's last value. */
static bool run_until(bool (*cond)(void *), void *arg, double cap)
{
	ev_timer tick;
	ev_timer_init(&tick, on_tick, 0.02, 0.02);
	ev_timer_start(EV_DEFAULT, &tick);
	double end = ev_now(EV_DEFAULT) + cap;
	bool ok;
	while (!(ok = cond(arg)) && ev_now(EV_DEFAULT) < end)
		ev_run(EV_DEFAULT, EVRUN_ONCE);
	ev_timer_stop(EV_DEFAULT, &tick);
	return ok;
}

/* A condition that never holds: run_until then runs for its cap. */
static bool never(void *arg)
{
	(void)arg;
	return false;
}

/* ---- our client ---- */

#define NSTREAMS 32

struct cstream {
	int64_t sid;
	struct buf in;
	bool fin;
	bool reset;       /* RESET_STREAM came */
	bool stopped;     /* STOP_SENDING came (quic.h's stream_reset with !reset) */
	bool closed;      /* closed both ways and forgotten */
};

struct cli {
	struct quic_conn *qc;
	bool ready, closed;
	int64_t connect_sid, wt_sid;
	struct cstream s[NSTREAMS];
	int n;
};

/* The stream record of SID (made when new). */
static struct cstream *cs_get(struct cli *c, int64_t sid)
{
	for (int i = 0; i < c->n; i++)
		if (c->s[i].sid == sid)
			return &c->s[i];
	assert_true(c->n < NSTREAMS);
	struct cstream *s = &c->s[c->n++];
	memset(s, 0, sizeof *s);
	s->sid = sid;
	return s;
}

/* Our client's callbacks: they record what came, per stream. */
static void c_ready(void *arg, struct quic_conn *qc)
{
	(void)qc;
	((struct cli *)arg)->ready = true;
}

static void c_data(void *arg, struct quic_conn *qc, int64_t sid, const uint8_t *data, size_t len,
		   bool fin)
{
	(void)qc;
	struct cstream *s = cs_get(arg, sid);
	if (len)
		assert_int_equal(buf_append(&s->in, data, len), 0);
	if (fin)
		s->fin = true;
}

static void c_reset(void *arg, struct quic_conn *qc, int64_t sid, uint64_t code, bool reset)
{
	(void)qc;
	(void)code;
	struct cstream *s = cs_get(arg, sid);
	if (reset)
		s->reset = true;
	else
		s->stopped = true;
}

static void c_stream_close(void *arg, struct quic_conn *qc, int64_t sid)
{
	(void)qc;
	cs_get(arg, sid)->closed = true;
}

static void c_dgram(void *arg, struct quic_conn *qc, const uint8_t *data, size_t len)
{
	(void)arg;
	(void)qc;
	(void)data;
	(void)len;
}

static void c_closed(void *arg, struct quic_conn *qc, const char *reason)
{
	(void)qc;
	(void)reason;
	struct cli *c = arg;
	c->closed = true;
	c->qc = NULL;
}

static const struct quic_conn_ops c_ops = {
	.ready = c_ready,
	.stream_data = c_data,
	.stream_reset = c_reset,
	.stream_close = c_stream_close,
	.datagram = c_dgram,
	.closed = c_closed,
};

/* The handshake is done, or failed. */
static bool is_ready(void *arg)
{
	struct cli *c = arg;
	return c->ready || c->closed;
}

/* The connection is gone. */
static bool is_closed(void *arg)
{
	return ((struct cli *)arg)->closed;
}

/* Writes B's bytes on SID (FIN as given). */
static void put(struct cli *c, int64_t sid, const void *p, size_t n, bool fin)
{
	assert_non_null(c->qc);
	assert_int_equal(quic_stream_write(c->qc, sid, p, n, fin), 0);
}

/* Connects C, handshake done, our HTTP/3 control stream sent. */
static void cli_connect(struct cli *c)
{
	memset(c, 0, sizeof *c);
	c->connect_sid = c->wt_sid = -1;
	struct quic_client_opts o = {
		.host = "127.0.0.1",
		.port = flow_front_port(F),
		.alpn = "h3",
		.pin = pin,
		.idle_timeout = 30,
		.max_datagram = 65535,
		.max_streams_bidi = 16,
		.max_streams_uni = 16,
	};
	char why[256] = "";
	c->qc = quic_client_connect(&o, &c_ops, c, why, sizeof why);
	if (!c->qc)
		fail_msg("quic_client_connect: %s", why);
	assert_true(run_until(is_ready, c, WAIT));
	assert_false(c->closed);
	int64_t sid;
	struct buf b = { 0 };
	assert_int_equal(quic_stream_open(c->qc, false, &sid), 0);
	assert_int_equal(h3_control_preamble(&b, false, 1), 0);
	put(c, sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
}

/* Closes C (if still open), waits for its end, frees its buffers. */
static void cli_free(struct cli *c)
{
	if (c->qc)
		quic_conn_close(c->qc, H3_NO_ERROR, "test over");
	assert_true(run_until(is_closed, c, WAIT));
	for (int i = 0; i < c->n; i++)
		buf_release(&c->s[i].in);
}

struct want_frame {
	struct cli *c;
	int64_t sid;
};

/* A whole HTTP/3 frame is held on the stream, or it ended. */
static bool has_frame(void *arg)
{
	struct want_frame *w = arg;
	struct cstream *s = cs_get(w->c, w->sid);
	uint64_t type;
	const uint8_t *p;
	size_t n;
	return s->fin || s->reset || w->c->closed ||
	       h3_frame_parse((const uint8_t *)s->in.data + s->in.off, buf_pending(&s->in),
			      1 << 20, &type, &p, &n) > 0;
}

/* The next HTTP/3 frame on SID: its type, payload copied into OUT. -1 when none came. */
static int next_h3_frame(struct cli *c, int64_t sid, uint64_t *type, struct buf *out)
{
	struct want_frame w = { c, sid };
	run_until(has_frame, &w, WAIT);
	struct cstream *s = cs_get(c, sid);
	const uint8_t *p;
	size_t n;
	ssize_t used = h3_frame_parse((const uint8_t *)s->in.data + s->in.off, buf_pending(&s->in),
				      1 << 20, type, &p, &n);
	if (used <= 0)
		return -1;
	assert_int_equal(buf_append(out, p, n), 0);
	buf_consume(&s->in, (size_t)used);
	return 0;
}

/* The :status answering the request on SID (-1: none). */
static int status_of(struct cli *c, int64_t sid)
{
	uint64_t type;
	struct buf b = { 0 };
	int st = -1;
	if (next_h3_frame(c, sid, &type, &b) == 0 && type == H3_FRAME_HEADERS)
		st = h3_response_status((const uint8_t *)b.data + b.off, buf_pending(&b));
	buf_release(&b);
	return st;
}

/* Sends a request of HEADERS payload P (N bytes) on a new bidi stream; its :status. */
static int request_raw(struct cli *c, const uint8_t *p, size_t n, int64_t *sidp)
{
	int64_t sid;
	struct buf b = { 0 };
	assert_int_equal(quic_stream_open(c->qc, true, &sid), 0);
	assert_int_equal(h3_frame_head_append(&b, H3_FRAME_HEADERS, n), 0);
	assert_int_equal(buf_append(&b, p, n), 0);
	put(c, sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
	if (sidp)
		*sidp = sid;
	return status_of(c, sid);
}

/* Sends a WebTransport CONNECT to PATH with ORIGIN; its :status. */
static int connect_wt(struct cli *c, const char *path, const char *origin)
{
	int64_t sid;
	struct buf b = { 0 };
	assert_int_equal(quic_stream_open(c->qc, true, &sid), 0);
	assert_int_equal(h3_connect_append(&b, "127.0.0.1", path, origin), 0);
	put(c, sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
	int st = status_of(c, sid);
	if (st == 200 && c->connect_sid < 0)
		c->connect_sid = sid;
	return st;
}

/* Opens a WebTransport bidi stream of C's session: its id. */
static int64_t wt_open(struct cli *c)
{
	int64_t sid;
	struct buf b = { 0 };
	assert_int_equal(quic_stream_open(c->qc, true, &sid), 0);
	assert_int_equal(h3_wt_preamble(&b, true, (uint64_t)c->connect_sid), 0);
	put(c, sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
	return sid;
}

/* A connected client with a session and its control stream. */
static void cli_session(struct cli *c)
{
	cli_connect(c);
	assert_int_equal(connect_wt(c, "/mcp-flow", NULL), 200);
	c->wt_sid = wt_open(c);
}

/* Writes one MCP-Flow frame of body P (N bytes) on the control stream. */
static void send_body(struct cli *c, const void *p, size_t n)
{
	uint8_t hdr[FLOW_FRAME_HDR];
	flow_frame_hdr(hdr, (uint32_t)n);
	put(c, c->wt_sid, hdr, sizeof hdr, false);
	put(c, c->wt_sid, p, n, false);
}

/* Writes TEXT as one JSON frame. */
static void send_json(struct cli *c, const char *text)
{
	send_body(c, text, strlen(text));
}

/* Sends T (stolen) as one CBOR frame. */
static void send_cbor(struct cli *c, json_t *t)
{
	struct buf b = { 0 };
	char why[128];
	assert_int_equal(cbor_from_json(t, &b, why, sizeof why), 0);
	send_body(c, b.data + b.off, buf_pending(&b));
	buf_release(&b);
	json_decref(t);
}

/* A whole MCP-Flow frame is held on the control stream. */
static bool has_body(void *arg)
{
	struct cli *c = arg;
	struct cstream *s = cs_get(c, c->wt_sid);
	size_t n = buf_pending(&s->in);
	const uint8_t *p = (const uint8_t *)s->in.data + s->in.off;
	if (c->closed || s->reset || s->fin)
		return true;
	return n >= 4 && n - 4 >= ((size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 |
				   p[3]);
}

/* The next message of the control stream (new reference; CBOR when CBOR), or NULL. */
static json_t *recv_msg(struct cli *c, bool cbor)
{
	if (!run_until(has_body, c, WAIT))
		return NULL;
	struct cstream *s = cs_get(c, c->wt_sid);
	size_t n = buf_pending(&s->in);
	const uint8_t *p = (const uint8_t *)s->in.data + s->in.off;
	if (n < 4)
		return NULL;
	size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
	if (n - 4 < len)
		return NULL;
	char why[128];
	json_t *t = cbor ? cbor_to_json(p + 4, len, why, sizeof why) :
		    json_loadb((const char *)p + 4, len, 0, NULL);
	buf_consume(&s->in, 4 + len);
	return t;
}

/* The error code of reply T, asserting its id is ID (0: null). */
static int err_code(json_t *t, json_int_t id)
{
	assert_non_null(t);
	json_t *jid = json_object_get(t, "id");
	if (id)
		assert_int_equal(json_integer_value(jid), id);
	else
		assert_true(!jid || json_is_null(jid));
	return (int)json_integer_value(json_object_get(json_object_get(t, "error"), "code"));
}

/* The error message of reply T ("" when none). */
static const char *err_message(json_t *t)
{
	return json_string_value(json_object_get(json_object_get(t, "error"), "message")) ?: "";
}

/* Sends a ping with ID and asserts it is answered with a result. */
static void ping_ok(struct cli *c, int id)
{
	char text[96];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", id);
	send_json(c, text);
	json_t *t = recv_msg(c, false);
	assert_non_null(t);
	assert_int_equal(json_integer_value(json_object_get(t, "id")), id);
	assert_true(json_is_object(json_object_get(t, "result")));
	json_decref(t);
}

/* initialize with ENCODINGS (a JSON array text, or NULL: no transport member); the answer. */
static json_t *initialize(struct cli *c, const char *encodings)
{
	char text[512];
	snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
		 "\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
		 "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}%s%s%s}}",
		 encodings ? ",\"transport\":{\"type\":\"mcp-flow\",\"datagrams\":true,"
			     "\"encodings\":" : "", encodings ? encodings : "", encodings ? "}" : "");
	send_json(c, text);
	json_t *t = recv_msg(c, false);
	assert_non_null(t);
	assert_non_null(json_object_get(t, "result"));
	json_t *note = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
				 "notifications/initialized");
	if (encodings && strstr(encodings, "cbor"))
		send_cbor(c, note);   /* the negotiated encoding from here on */
	else {
		send_json(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
		json_decref(note);
	}
	return t;
}

/* ---- the cases ---- */

/* A stream SID of C was stopped, reset or closed by the peer. */
struct want_stop {
	struct cli *c;
	int64_t sid;
};

static bool stopped(void *arg)
{
	struct want_stop *w = arg;
	struct cstream *s = cs_get(w->c, w->sid);
	return s->stopped || s->reset || s->closed || w->c->closed;
}


/* 1. initialize's answer names the transport; ping; tools/list. */
static void test_good_session(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_t *t = initialize(&c, "[\"json\"]");
	json_t *tr = json_object_get(json_object_get(t, "result"), "transport");
	assert_string_equal(json_string_value(json_object_get(tr, "type")), "mcp-flow");
	assert_string_equal(json_string_value(json_object_get(tr, "encoding")), "json");
	assert_int_equal(json_integer_value(json_object_get(tr, "maxConcurrentStreams")), 4);
	assert_true(json_is_true(json_object_get(tr, "datagramsSupported")));
	json_decref(t);
	ping_ok(&c, 2);
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	t = recv_msg(&c, false);
	json_t *tools = json_object_get(json_object_get(t, "result"), "tools");
	assert_int_equal(json_array_size(tools), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
			    "t");
	json_decref(t);
	assert_true(flow_front_busy(F) == false);
	cli_free(&c);
}

/* 2. An Origin not allowed: 403 and no session; loopback and configured ones: 200. */
static void test_origin(void **state)
{
	(void)state;
	struct cli c;
	cli_connect(&c);
	assert_int_equal(connect_wt(&c, "/mcp-flow", "https://evil.example"), 403);
	/* no session was made: a WebTransport stream naming it is refused */
	c.connect_sid = 0;   /* the refused CONNECT's stream, our first bidi one */
	int64_t sid = wt_open(&c);
	struct want_stop w = { &c, sid };
	assert_true(run_until(stopped, &w, WAIT));
	assert_true(cs_get(&c, sid)->reset || cs_get(&c, sid)->stopped || cs_get(&c, sid)->closed);
	assert_int_equal(buf_pending(&cs_get(&c, sid)->in), 0);
	assert_false(c.closed);
	cli_free(&c);
	cli_connect(&c);
	assert_int_equal(connect_wt(&c, "/mcp-flow", "http://localhost:1234"), 200);
	cli_free(&c);
	cli_connect(&c);
	assert_int_equal(connect_wt(&c, "/mcp-flow", "https://app.example"), 200);
	c.wt_sid = wt_open(&c);
	ping_ok(&c, 7);
	cli_free(&c);
}

/*
 * 3. Other requests: a CONNECT without :protocol 400, a GET 405 (QPACK
 * field sections written here by hand from the static table), a
 * WebTransport CONNECT to another path 404, a second CONNECT 429.
 */
static void test_requests(void **state)
{
	(void)state;
	/* :method CONNECT (static 15), :authority (name 0) "127.0.0.1" */
	static const uint8_t plain_connect[] = { 0, 0, 0xc0 | 15, 0x50, 9, '1', '2', '7', '.',
						 '0', '.', '0', '.', '1' };
	/* :method GET (17), :scheme https (23), :path / (1), :authority */
	static const uint8_t get[] = { 0, 0, 0xc0 | 17, 0xc0 | 23, 0xc0 | 1, 0x50, 9, '1', '2',
				       '7', '.', '0', '.', '0', '.', '1' };
	struct cli c;
	cli_connect(&c);
	assert_int_equal(request_raw(&c, plain_connect, sizeof plain_connect, NULL), 400);
	assert_int_equal(request_raw(&c, get, sizeof get, NULL), 405);
	assert_int_equal(connect_wt(&c, "/elsewhere", NULL), 404);
	assert_int_equal(connect_wt(&c, "/mcp-flow", NULL), 200);
	assert_int_equal(connect_wt(&c, "/mcp-flow", NULL), 429);
	c.wt_sid = wt_open(&c);
	ping_ok(&c, 1);
	cli_free(&c);
}

/* 4. A frame over the limit: -32600 naming both sizes, its bytes skipped, the next answered. */
static void test_frame_too_big(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	size_t big = 100000;
	uint8_t *p = malloc(big);
	assert_non_null(p);
	memset(p, ' ', big);
	send_body(&c, p, big);
	free(p);
	json_t *t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 0), RPC_INVALID_REQUEST);
	assert_non_null(strstr(err_message(t), "100000"));
	assert_non_null(strstr(err_message(t), "4096"));
	json_decref(t);
	ping_ok(&c, 5);
	/* a too large frame and the next one in one write (one packet) */
	uint8_t both[700 + 4 + 64];
	size_t n = 0;
	const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}";
	flow_frame_hdr(both, 5000);
	n = 4;
	memset(both + n, ' ', 600);
	n += 600;
	put(&c, c.wt_sid, both, n, false);   /* 4400 of the frame's bytes still to come */
	p = calloc(1, 4400 + 4 + strlen(ping));
	assert_non_null(p);
	memset(p, ' ', 4400);
	flow_frame_hdr(p + 4400, (uint32_t)strlen(ping));
	memcpy(p + 4404, ping, strlen(ping));
	put(&c, c.wt_sid, p, 4404 + strlen(ping), false);
	free(p);
	t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 0), RPC_INVALID_REQUEST);
	json_decref(t);
	t = recv_msg(&c, false);
	assert_int_equal(json_integer_value(json_object_get(t, "id")), 6);
	assert_non_null(json_object_get(t, "result"));
	json_decref(t);
	ping_ok(&c, 8);
	cli_free(&c);
}

/*
 * 4b. A front taking 512-byte messages: a 600-byte frame and a ping in one
 * write (one packet): the whole too large frame is in the reader at once,
 * and the ping after it must not be dropped with it.
 */
static void test_frame_too_big_whole(void **state)
{
	(void)state;
	flow_front_free(F);
	F = flow_front_new(C, &cfg, 512);
	assert_non_null(F);
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}";
	uint8_t both[4 + 600 + 4 + 64];
	flow_frame_hdr(both, 600);
	memset(both + 4, ' ', 600);
	flow_frame_hdr(both + 604, (uint32_t)strlen(ping));
	memcpy(both + 608, ping, strlen(ping));
	put(&c, c.wt_sid, both, 608 + strlen(ping), false);
	json_t *t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 0), RPC_INVALID_REQUEST);
	assert_non_null(strstr(err_message(t), "600"));
	assert_non_null(strstr(err_message(t), "512"));
	json_decref(t);
	t = recv_msg(&c, false);
	assert_non_null(t);
	assert_int_equal(json_integer_value(json_object_get(t, "id")), 6);
	assert_non_null(json_object_get(t, "result"));
	json_decref(t);
	ping_ok(&c, 7);
	cli_free(&c);
}

/* The session's CONNECT stream carried CLOSE_WEBTRANSPORT_SESSION: its code, or -1. */
static long close_capsule(struct cli *c)
{
	uint64_t type;
	for (int i = 0; i < 4; i++) {
		struct buf b = { 0 };
		if (next_h3_frame(c, c->connect_sid, &type, &b) < 0) {
			buf_release(&b);
			return -1;
		}
		const uint8_t *p = (const uint8_t *)b.data + b.off, *v;
		size_t n = buf_pending(&b), vn;
		ssize_t used;
		while (type == H3_FRAME_DATA && (used = h3_capsule_parse(p, n, 4096, &type, &v, &vn)) > 0) {
			if (type == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION) {
				uint32_t code;
				const char *r;
				size_t rn;
				assert_int_equal(h3_close_parse(v, vn, &code, &r, &rn), 0);
				buf_release(&b);
				return code;
			}
			p += used;
			n -= (size_t)used;
			type = H3_FRAME_DATA;
		}
		buf_release(&b);
	}
	return -1;
}

/* 5. A truncated frame then FIN: the session closes with the capsule, then the connection. */
static void test_truncated(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	uint8_t hdr[FLOW_FRAME_HDR + 10];
	flow_frame_hdr(hdr, 100);
	memcpy(hdr + 4, "{\"jsonrpc\"", 10);
	put(&c, c.wt_sid, hdr, sizeof hdr, true);
	/* the HEADERS answer was taken: the next frames carry capsules */
	assert_true(close_capsule(&c) >= 0);
	assert_true(run_until(is_closed, &c, WAIT));
	cli_free(&c);
	/* the front still serves */
	cli_session(&c);
	ping_ok(&c, 1);
	cli_free(&c);
}

/* 6. Frames in the wrong encoding: -32003 naming the request; the session goes on. */
static void test_wrong_encoding(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	send_cbor(&c, json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 41, "method", "ping"));
	json_t *t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 41), FLOW_ERR_ENCODING);
	json_decref(t);
	json_decref(initialize(&c, "[\"cbor\"]"));
	/* from here CBOR both ways: a JSON frame is refused */
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}");
	t = recv_msg(&c, true);
	assert_int_equal(err_code(t, 42), FLOW_ERR_ENCODING);
	assert_non_null(strstr(err_message(t), "CBOR"));
	json_decref(t);
	send_cbor(&c, json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 43, "method", "ping"));
	t = recv_msg(&c, true);
	assert_int_equal(json_integer_value(json_object_get(t, "id")), 43);
	assert_non_null(json_object_get(t, "result"));
	json_decref(t);
	/* 7. malformed CBOR: a map of 2 pairs holding one */
	static const uint8_t bad[] = { 0xa2, 0x61, 'a', 0x01 };
	send_body(&c, bad, sizeof bad);
	t = recv_msg(&c, true);
	assert_int_equal(err_code(t, 0), RPC_PARSE_ERROR);
	assert_non_null(strstr(err_message(t), "CBOR: "));
	assert_true(strlen(err_message(t)) > strlen("Parse error: CBOR: "));
	json_decref(t);
	send_cbor(&c, json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 44, "method", "ping"));
	t = recv_msg(&c, true);
	assert_int_equal(json_integer_value(json_object_get(t, "id")), 44);
	json_decref(t);
	cli_free(&c);
}

/* 8. A client's uni stream naming a request not in flight: stopped; the session goes on. */
static void test_injected_stream(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	int64_t sid;
	struct buf b = { 0 };
	uint8_t hdr[FLOW_EXEC_HDR];
	assert_int_equal(quic_stream_open(c.qc, false, &sid), 0);
	assert_int_equal(h3_wt_preamble(&b, false, (uint64_t)c.connect_sid), 0);
	flow_exec_hdr_put(hdr, 999, 7);
	assert_int_equal(buf_append(&b, hdr, sizeof hdr), 0);
	assert_int_equal(buf_append(&b, "injected", 8), 0);
	put(&c, sid, b.data + b.off, buf_pending(&b), false);
	buf_release(&b);
	/* ngtcp2 0.12 tells no STOP_SENDING: it answers it with RESET_STREAM
	 * itself, and the stream, never ended by us, closes */
	struct want_stop w = { &c, sid };
	assert_true(run_until(stopped, &w, WAIT));
	assert_false(c.closed);
	assert_true(cs_get(&c, sid)->stopped || cs_get(&c, sid)->closed);
	assert_int_equal(quic_stream_write(c.qc, sid, (const uint8_t *)"more", 4, false), -1);
	ping_ok(&c, 2);
	cli_free(&c);
}

/* The server-opened uni streams of C that ended, in order of their ids. */
static int exec_streams(struct cli *c, struct cstream **out, int max)
{
	int n = 0;
	for (int i = 0; i < c->n && n < max; i++)
		if ((c->s[i].sid & 3) == 3 && c->s[i].fin)
			out[n++] = &c->s[i];
	return n;
}

struct want_execs {
	struct cli *c;
	int n;
};

/* N execution streams ended, or the connection did. */
static bool execs_done(void *arg)
{
	struct want_execs *w = arg;
	struct cstream *s[NSTREAMS];
	return exec_streams(w->c, s, NSTREAMS) >= w->n || w->c->closed;
}

/*
 * 9. Execution streams: a result whose items need more streams than
 * maxConcurrentStreams is -32000 "Stream limit exceeded"; within the
 * limit its items become ref/stream items and each stream carries the
 * 8-byte header (request id, tag) then the item's bytes.
 */
static void test_streams(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"t\",\"arguments\":{\"items\":5,\"size\":2000}}}");
	json_t *t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 9), FLOW_ERR_STREAM_LIMIT);
	assert_non_null(strstr(err_message(t), "Stream limit exceeded"));
	json_decref(t);
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"t\",\"arguments\":{\"items\":2,\"size\":3000}}}");
	t = recv_msg(&c, false);
	assert_non_null(t);
	json_t *content = json_object_get(json_object_get(t, "result"), "content");
	assert_int_equal(json_array_size(content), 2);
	uint32_t tags[2];
	for (size_t i = 0; i < 2; i++) {
		json_t *it = json_array_get(content, i);
		assert_string_equal(json_string_value(json_object_get(it, "type")), "ref/stream");
		tags[i] = (uint32_t)json_integer_value(json_object_get(it, "streamTag"));
	}
	json_decref(t);
	struct want_execs w = { &c, 2 };
	assert_true(run_until(execs_done, &w, WAIT));
	struct cstream *s[NSTREAMS];
	assert_int_equal(exec_streams(&c, s, NSTREAMS), 2);
	for (int i = 0; i < 2; i++) {
		const uint8_t *p = (const uint8_t *)s[i]->in.data + s[i]->in.off;
		size_t n = buf_pending(&s[i]->in);
		enum h3_preamble_kind kind;
		uint64_t session;
		size_t used = h3_preamble_parse(p, n, false, &kind, &session);
		assert_int_equal(kind, H3_PRE_WT_UNI);
		assert_int_equal(session, (uint64_t)c.connect_sid);
		assert_int_equal(n - used, FLOW_EXEC_HDR + 3000);
		uint32_t rid, tag;
		flow_exec_hdr_get(p + used, &rid, &tag);
		assert_int_equal(rid, 10);
		assert_true(tag == tags[0] || tag == tags[1]);
		char first = (char)p[used + FLOW_EXEC_HDR];
		assert_true(first == 'a' || first == 'b');
		for (size_t k = 0; k < 3000; k++)
			assert_int_equal(p[used + FLOW_EXEC_HDR + k], (uint8_t)first);
	}
	ping_ok(&c, 11);
	cli_free(&c);
}

/* 10. Garbage datagrams are dropped; the session goes on. */
static void test_bad_datagrams(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, "[\"json\"]"));
	uint8_t d[32];
	uint64_t q = (uint64_t)c.connect_sid / 4;
	size_t qn = h3_varint_put(d, q);
	/* too short */
	assert_int_equal(quic_datagram_send(c.qc, d, qn + 3), 0);
	/* bad flags */
	flow_dgram_hdr_put(d + qn, FLOW_CH_PROGRESS, 1);
	d[qn + 1] = 0x80;
	assert_int_equal(quic_datagram_send(c.qc, d, qn + FLOW_DGRAM_HDR + 2), 0);
	/* an unknown channel */
	flow_dgram_hdr_put(d + qn, 77, 1);
	assert_int_equal(quic_datagram_send(c.qc, d, qn + FLOW_DGRAM_HDR + 2), 0);
	/* a channel a client does not send on */
	flow_dgram_hdr_put(d + qn, FLOW_CH_LOG, 1);
	assert_int_equal(quic_datagram_send(c.qc, d, qn + FLOW_DGRAM_HDR + 2), 0);
	/* another session's quarter id */
	size_t on = h3_varint_put(d, q + 9);
	flow_dgram_hdr_put(d + on, FLOW_CH_PROGRESS, 1);
	assert_int_equal(quic_datagram_send(c.qc, d, on + FLOW_DGRAM_HDR), 0);
	/* no quarter id at all: one byte of a longer varint */
	d[0] = 0x40;
	assert_int_equal(quic_datagram_send(c.qc, d, 1), 0);
	run_until(never, NULL, 0.2);
	assert_false(c.closed);
	ping_ok(&c, 3);
	cli_free(&c);
}

/* 11. A second bidi WebTransport stream is reset; the control stream goes on. */
static void test_second_bidi(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	int64_t control = c.wt_sid;
	int64_t other = wt_open(&c);
	c.wt_sid = other;
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}");
	c.wt_sid = control;
	struct want_stop w = { &c, other };
	assert_true(run_until(stopped, &w, WAIT));
	assert_true(cs_get(&c, other)->reset || cs_get(&c, other)->stopped);
	assert_int_equal(buf_pending(&cs_get(&c, other)->in), 0);
	assert_false(c.closed);
	ping_ok(&c, 5);
	cli_free(&c);
}

struct want_held {
	size_t n;
};

/* The backend holds at least N calls. */
static bool held(void *arg)
{
	return json_array_size(be_held) >= ((struct want_held *)arg)->n;
}

/* 12. $/cancel of an open call: -32000 "Cancelled", the backend told. */
static void test_cancel(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"t\",\"arguments\":{\"hold\":true}}}");
	struct want_held w = { 1 };
	assert_true(run_until(held, &w, WAIT));
	assert_true(flow_front_busy(F));
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel\",\"params\":"
		  "{\"requestId\":12,\"reason\":\"enough\"}}");
	json_t *t = recv_msg(&c, false);
	assert_int_equal(err_code(t, 12), FLOW_ERR_STREAM_LIMIT);
	assert_string_equal(err_message(t), "Cancelled");
	json_decref(t);
	assert_non_null(be_saw("notifications/cancelled"));
	/* the backend's late answer reaches no one */
	json_t *call = json_array_get(be_held, 0);
	chain_receive(&be, rpc_result(json_object_get(call, "id"), json_object()));
	ping_ok(&c, 13);
	assert_false(flow_front_busy(F));
	cli_free(&c);
}

/* The front has no request open. */
static bool not_busy(void *arg)
{
	(void)arg;
	return !flow_front_busy(F);
}

/* 13. The client vanishes mid-call: the session ends, the backend is told. */
static void test_vanish(void **state)
{
	(void)state;
	struct cli c;
	cli_session(&c);
	json_decref(initialize(&c, NULL));
	send_json(&c, "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"t\",\"arguments\":{\"hold\":true}}}");
	struct want_held w = { 1 };
	assert_true(run_until(held, &w, WAIT));
	assert_true(flow_front_busy(F));
	quic_conn_close(c.qc, H3_NO_ERROR, "gone");
	assert_true(run_until(is_closed, &c, WAIT));
	assert_true(run_until(not_busy, NULL, WAIT));
	cli_free(&c);
	/* a new client is served */
	cli_session(&c);
	ping_ok(&c, 1);
	cli_free(&c);
}

int main(void)
{
	char why[256] = "";
	ev_default_loop(0);
	log_set_level(LOG_ERROR);
	if (selfcert_make(&sc, 10, why, sizeof why) < 0) {
		fprintf(stderr, "selfcert_make: %s\n", why);
		return 1;
	}
	for (int i = 0; i < 32; i++)
		pin[i] = (uint8_t)(hexval(sc.hash_hex[2 * i]) << 4 | hexval(sc.hash_hex[2 * i + 1]));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_origin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frame_too_big, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frame_too_big_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_encoding, setup, teardown),
		cmocka_unit_test_setup_teardown(test_injected_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_datagrams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_bidi, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vanish, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	selfcert_remove(&sc);
	return rc;
}
