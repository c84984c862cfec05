/*
 * flow_int.h - what the MCP-Flow front's files share: flow.c (QUIC
 * connections, HTTP/3, the WebTransport CONNECT and its streams) and
 * flow_sess.c (one WebTransport session as an MCP-Flow session: its
 * control stream, encodings, execution streams, datagrams).
 */
#ifndef MCPC_FLOW_INT_H
#define MCPC_FLOW_INT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "flow_front.h"
#include "flow_wire.h"
#include "h3.h"
#include "msg.h"
#include "quic.h"

struct config;
struct session;

struct flow_front {
	struct chain *chain;
	const struct cfg_flow *cfg;
	size_t max;                   /* one message's bytes at most */
	struct quic_endpoint *ep;
	struct flow_conn *conns;
	unsigned next_serial;
	flow_chain_make_fn make;
	flow_chain_release_fn release;
	void *chain_arg;
	double input_ttl;
	bool offer_stateless;
	bool draining;                /* no new session */
	bool stopped;
};

/* One client stream (or our own control stream) as HTTP/3 sees it. */
struct flow_stream {
	int64_t sid;
	enum h3_preamble_kind kind;   /* H3_PRE_MORE until its first bytes tell */
	struct buf in;                /* bytes not taken yet */
	bool headers_seen;            /* a request stream: its HEADERS came */
	bool ignored;                 /* the rest is dropped */
	struct flow_stream *next;
};

/* One QUIC connection: HTTP/3 with at most one WebTransport session. */
struct flow_conn {
	struct flow_front *f;
	struct quic_conn *qc;
	struct flow_conn *next, **pprev;
	struct flow_stream *streams;
	unsigned serial;
	bool settings_seen;           /* the peer's SETTINGS came */
	struct h3_settings peer;
	struct flow_sess *ws;         /* the WebTransport session, or NULL */
	bool gone;                    /* closed: nothing more is sent */
	ev_timer linger;              /* the session ended: the connection's end */
};

enum flow_state {
	FLOW_CONNECTED,               /* CONNECT accepted, no control stream yet */
	FLOW_CONTROL_OPENED,          /* control stream open, initialize not yet */
	FLOW_INITIALIZING,            /* initialize received, not answered yet */
	FLOW_READY,                   /* answered: the negotiated encoding */
	FLOW_CLOSED,
};

/* An execution stream being sent. */
struct flow_exec {
	int64_t sid;
	uint32_t request_id;
	uint32_t tag;
	struct flow_exec *next;
};

/* A request of the client still open. */
struct flow_open {
	struct msg_val id;
	struct flow_open *next;
};

struct flow_sess {
	struct flow_conn *c;
	int64_t connect_sid;          /* the CONNECT stream; its quarter id prefixes datagrams */
	int64_t control_sid;          /* -1 until the client opens it */
	enum flow_state state;
	struct flow_reader rd;
	uint64_t skip;                /* bytes of a frame too large still to drop */
	ev_timer drain;               /* $/shutdown's bound */
	struct buf capsules;          /* the CONNECT stream's capsule bytes */
	uint64_t data_left;           /* ... of the DATA frame being read */
	enum flow_encoding enc;       /* JSON until initialize is answered */
	enum flow_encoding want;      /* what initialize negotiated */
	bool dgrams;                  /* progress and logs go as datagrams */
	double dgram_tokens, dgram_at;
	struct session *s;
	struct chain *chain;
	unsigned serial;
	struct msg_val init_id;       /* the initialize being answered */
	bool init_pending;
	struct flow_open *open;       /* the client's requests not answered yet */
	size_t nopen;
	struct flow_exec *execs;      /* execution streams being sent */
	unsigned nexecs;
	uint32_t next_tag;
	bool shutting_down;           /* $/shutdown: drain, then close */
	bool kept_alive;              /* PINGs while work is open */
	char peer[64];
};

/* flow_sess.c */
struct flow_sess *flow_sess_new(struct flow_conn *c, int64_t connect_sid);
/* Bytes of the session's control stream (or of a second bidi stream: refused). */
void flow_sess_stream_data(struct flow_sess *ws, int64_t sid, const uint8_t *p, size_t n,
			   bool fin);
/* A client's unidirectional WebTransport stream's bytes. */
void flow_sess_uni_data(struct flow_sess *ws, int64_t sid, const uint8_t *p, size_t n,
			bool fin);
/* One of the session's streams is gone (reset or closed). */
void flow_sess_stream_gone(struct flow_sess *ws, int64_t sid, bool reset);
/* A datagram of the session (after its quarter stream id). */
void flow_sess_datagram(struct flow_sess *ws, const uint8_t *p, size_t n);
/* The CONNECT stream's bytes after the 200 (DATA frames of capsules). */
void flow_sess_connect_data(struct flow_sess *ws, const uint8_t *p, size_t n, bool fin);
/* Room again on SID. */
void flow_sess_writable(struct flow_sess *ws, int64_t sid);
/* Ends the session (REASON); CLOSE_CAPSULE sends the close capsule and FIN
 * on the CONNECT stream first. Frees WS; C->ws is cleared. */
void flow_sess_end(struct flow_sess *ws, const char *reason, bool close_capsule);
/* Starts $/shutdown's drain (the front is stopping). */
void flow_sess_shutdown(struct flow_sess *ws);
bool flow_sess_busy(const struct flow_sess *ws);

/* flow.c */
/* C's session ended (REASON, static): the connection closes once the
 * client has had time to read the close (or at once when it ended it). */
void flow_conn_session_ended(struct flow_conn *c, bool now);
/* Writes LEN bytes on SID of C (copied); FIN ends it. 0 or -1. */
int flow_conn_write(struct flow_conn *c, int64_t sid, const void *p, size_t len, bool fin);

#endif
