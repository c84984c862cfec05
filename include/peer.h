/*
 * peer.h - one end of the chain: a client session or a backend.
 *
 * Both ends are peers so that forwarding is symmetric: client requests go
 * to backends and server->client requests (sampling, elicitation, roots,
 * ping) go to clients through the same code. Each peer is its own id
 * space: a request forwarded TO a peer gets a fresh integer id from that
 * peer's counter, recorded in its "sent" table; a request received FROM a
 * peer is recorded under the peer's own id in its "received" table, so
 * that its cancellation can be found. The same exchange object sits in
 * both tables while it is open.
 */
#ifndef MCPC_PEER_H
#define MCPC_PEER_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "hmap.h"
#include "idmap.h"
#include "middleware.h"
#include "msg.h"

struct exchange;
struct peer;

/* What a message the chain hands a peer is. */
enum peer_out_kind {
	PEER_OUT_REQUEST,
	PEER_OUT_RESPONSE,
	PEER_OUT_PROGRESS,        /* notifications/progress */
	PEER_OUT_NOTIFICATION,    /* any other notification */
};

/*
 * Told with each message sent to a peer, so that it need not read the
 * message to know where it belongs (the chain's one answer to "whose
 * request is this"):
 *   ABOUT: the receiver's own request the message is part of -- the one a
 *   response answers, the one whose progress it is, the one a request of
 *   the other side belongs to (a server's sampling during a client's
 *   call); NULL when none, or when nothing tells (SEVERAL then says more
 *   than one could be). Borrowed, valid during the call (chain.h has its
 *   accessors: the exchange is the core's).
 *   ABOUT_ID: that request's id as the receiver sent it (borrowed), also
 *   where the exchange is gone by now (progress that walked the modules).
 *   OUTCOME: responses, msg_outcome(): result, JSON-RPC error, tool error.
 */
struct peer_out {
	enum peer_out_kind kind;
	struct exchange *about;
	const struct msg_val *about_id;
	bool several;
	int outcome;
};

struct peer_ops {
	/* Delivers MSG (borrowed), described by O, to the peer. Returns 0, or
	 * -1 if it cannot. */
	int (*send)(struct peer *p, json_t *msg, const struct peer_out *o);
	/*
	 * Backends only: performs the MCP handshake as a client with the
	 * front client's initialize PARAMS (borrowed), then calls CB with the
	 * response (a result or an error, borrowed). Returns 0 or -1.
	 */
	int (*initialize)(struct peer *p, json_t *params,
			  void (*cb)(void *arg, json_t *response), void *arg);
	/*
	 * Optional: delivers a message still as its bytes, given as pieces that
	 * together form one JSON line without its "\n", described by O.
	 * Returns 0 or -1.
	 */
	int (*send_raw)(struct peer *p, const struct iovec *iov, int n, const struct peer_out *o);
	/* Optional: EX, a request from this peer, ends without a response
	 * (it was cancelled). */
	void (*unanswered)(struct peer *p, struct exchange *ex);
	/* Backends: drops a pending initialize callback registered with ARG
	 * (its session is going away). */
	void (*forget_initialize)(struct peer *p, void *arg);
	/* Stops (PAUSED) or resumes reading from the peer: flow control. */
	void (*pause)(struct peer *p, bool paused);
};

/*
 * A client's transport credential, shared by its peer and by the
 * exchanges whose modules may read it (mw_ctx.credential) while they walk:
 * a client that presents a new token (an OAuth refresh) replaces the
 * peer's, and the old one lives on, wiped at the end, until the last
 * exchange that read it ends.
 */
struct peer_cred {
	unsigned refs;
	size_t len;
	unsigned char hash[32];   /* SHA-256 of S: made once, for the modules */
	char s[];   /* LEN bytes and a NUL */
};

enum peer_role { PEER_CLIENT, PEER_BACKEND };

struct peer {
	const struct peer_ops *ops;
	enum peer_role role;
	const char *name;        /* owned by the container; for logs */
	const char *principal;   /* client identity (clients only); may be NULL */
	const char *version;     /* clients: the protocol version they speak
				  * (owned by the container); may be NULL */
	struct peer_cred *cred;  /* clients: the secret presented on the
				  * transport (HTTP bearer token), for
				  * mw_ctx.credential; NULL when none. Never
				  * logged. Set with peer_set_credential. */
	const char *trace_parent; /* clients: the traceparent and tracestate the
				  * transport carried the message in hand
				  * with (HTTP headers), borrowed while it is
				  * received; NULL when none (trace.h) */
	const char *trace_state;
	const char *transport;   /* clients: network.transport of their spans
				  * ("pipe", "tcp"), static; NULL: unknown */
	const char *session_tag; /* clients: mcp.session.id of their spans
				  * (owned by the container); NULL: none */
	bool ready;              /* handshake done; may carry traffic */
	bool congested;          /* its output queue is over the high-water mark */
	bool over_limit;         /* its last request went over the chain's bound */
	bool answers_inline;     /* in-process (the aggregate): it may answer a
				  * request before its send returns */
	int paused;              /* congested peers holding its input paused */
	char why_down[200];      /* why it is not ready, for error messages */
	struct pipeline *pl;     /* backends: their own middleware (borrowed) */
	json_t *init_result;     /* backends: their initialize result (borrowed) */
	unsigned eras;           /* backends: the eras it speaks itself
				  * (ERA_BIT_*), known once its handshake is
				  * done; 0 before */
	bool told_initialized;   /* backends: this run was sent
				  * notifications/initialized (by whichever
				  * client's aggregate came first: one for a
				  * backend serving several) */
	double timeout;          /* seconds a request may stay open here; 0: none */
	unsigned long long answered[3]; /* responses it sent to requests the chain
				  * forwarded to it, by outcome (msg_outcome:
				  * result, JSON-RPC error, tool error);
				  * counted by the chain, read for /metrics */
	double answered_seconds; /* those responses' time since their requests
				  * began (ev_now), summed: the live page's
				  * mean latency */
	size_t rx_bytes;         /* wire size of the message being received,
				  * set by the transport before handing it on */
	json_int_t next_id;
	struct idmap sent;       /* our id -> exchange */
	struct hmap received;    /* rpc_id_key(peer's id) -> exchange */
	void *batch;             /* clients: the batch being received, copied
				  * into exchanges made from it */
	struct chain *chain;     /* set by chain_add_peer */
	struct chain **serves;   /* backends: other chains whose clients it
				  * serves too (chain_link_peer); owned array
				  * of borrowed chains */
	size_t nserves;
	struct peer *next;       /* in the chain's list */
};

/* Prepares a peer. NAME is borrowed for the peer's life. */
void peer_init(struct peer *p, const struct peer_ops *ops, enum peer_role role,
	       const char *name);

/* Frees the tables; call chain_peer_gone first to end open exchanges. */
void peer_release(struct peer *p);

/*
 * Sets P's transport credential to a copy of S (N bytes); NULL drops it.
 * Nothing changes when S is the one P has. 0, or -1 out of memory.
 */
int peer_set_credential(struct peer *p, const char *s, size_t n);

/* Another holder of C (may be NULL); returns C. */
struct peer_cred *peer_cred_ref(struct peer_cred *c);

/* A holder of C (may be NULL) lets go; the last wipes and frees it. */
void peer_cred_unref(struct peer_cred *c);

#endif
