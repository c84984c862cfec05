/*
 * chain.h - moving messages between client sessions and backends.
 *
 * The chain knows peers, not transports: a front hands it the messages a
 * client sends once its lifecycle allows traffic, a backend hands it what
 * the server sends once its own handshake is done. The chain keeps the
 * open exchanges, maps ids and progress tokens at each hop, translates
 * cancellations, runs every message through the middleware pipeline, and
 * routes: to its one backend, or where the router set on it says
 * (struct chain_router; the aggregate of several backends is one).
 *
 * Every message takes one path, whatever its form (msg.h): a message no
 * module reads is never parsed and leaves as its bytes with the id and
 * token spliced; a message a module reads is a tree from then on. The log
 * level changes nothing on the wire.
 *
 * A chain is an object: a process may hold several (tests do), and every
 * peer belongs to one. Backend notifications go to every ready client of
 * the chain (progress and responses only to their requester); a backend's
 * own request (sampling, elicitation, roots) goes to the one client that
 * has a request open at that backend, else to the oldest ready client;
 * when several clients have requests open there it is refused with an
 * error saying so, since nothing tells which one it is for.
 */
#ifndef MCPC_CHAIN_H
#define MCPC_CHAIN_H

#include <jansson.h>

#include "middleware.h"
#include "msg.h"
#include "peer.h"

struct chain;

/* A new chain with no peers and no pipeline; NULL when out of memory. */
struct chain *chain_new(void);

/* Frees C; its peers must have been removed. */
void chain_free(struct chain *c);

/* Registers a peer with C (clients and backends alike). */
void chain_add_peer(struct chain *c, struct peer *p);

/* Unregisters a peer (before freeing it); a backend is unlinked from
 * every chain it served too (chain_unlink_peer). */
void chain_remove_peer(struct peer *p);

/*
 * Backend P, a peer of another chain, serves C's clients too: C's router
 * may route to it, its notifications reach C's clients (after C's router
 * was offered them, on a copy of their own) as well as its own chain's,
 * its requests may go to C's clients, and flow control holds it for C's
 * clients as for C's own backends. So a backend can serve one session or
 * several: the HTTP front's sessions that have backends of their own
 * reach the shared ones this way. Returns 0, or -1 when out of memory.
 */
int chain_link_peer(struct chain *c, struct peer *p);

/* Undoes chain_link_peer: the requests of C's own and of its clients
 * still open at P are cancelled there and answered with an error now.
 * Nothing when P is not linked; chain_free unlinks every peer. */
void chain_unlink_peer(struct chain *c, struct peer *p);

/* Ends every exchange involving P, answering or cancelling them with
 * REASON; P stays registered but not ready. */
void chain_peer_gone(struct peer *p, const char *reason);

/*
 * What others may read of an open request (struct exchange is the
 * core's): its method, its requester's id as the requester sent it (JSON
 * text; empty when mcp-chain asked), and the batch of the requester's it
 * came in (the front's, set on the peer while the batch is read; NULL
 * when none). Borrowed from EX, valid while it is open.
 */
const char *chain_request_method(const struct exchange *ex);
const struct msg_val *chain_request_id(const struct exchange *ex);
void *chain_request_batch(const struct exchange *ex);

/* The server span of EX, a client's request (trace.h), or NULL. */
struct span;
struct span *chain_request_span(const struct exchange *ex);

/* The open request of FROM's whose id (as FROM sent it) is the JSON text
 * ID holds (borrowed), or NULL. */
struct exchange *chain_find_request(struct peer *from, const struct msg_val *id);

/*
 * The request EX, received from its requester under one id, is from now on
 * known under the id whose JSON text NEW_ID holds (borrowed): its response
 * and cancellation follow the new id, and its progress the token whose
 * JSON text NEW_TOKEN holds (borrowed; NULL or empty: none, and progress
 * is dropped). Used where one client request spans several of the
 * client's own (a 2026-07-28 input_required round trip: the request that
 * got input_required is finished, the retry has its own token or none).
 * 0, or -1 when NEW_ID is in use.
 */
int chain_rebind_request(struct exchange *ex, const struct msg_val *new_id,
			 const struct msg_val *new_token);

/*
 * Asks C's global modules about a transport credential (see struct
 * mw_cred_check in middleware.h: a front answers 401, 403 or 503 as
 * CHK->result says, or waits on WAIT for MW_CRED_PENDING). The token is
 * not kept.
 */
void chain_check_credential(struct chain *c, struct mw_cred_check *chk,
			    struct mw_cred_wait *wait);

/* C's modules' part of the OAuth Protected Resource Metadata (RFC 9728):
 * a new object, or NULL when no module validates OAuth tokens. */
json_t *chain_resource_metadata(struct chain *c);

/* Sets C's global pipeline (takes a reference; NULL for none). */
void chain_set_pipeline(struct chain *c, struct pipeline *pl);

/*
 * Bounds the requests one peer may have open in C at once (0: none). A
 * request beyond it is answered -32000 at once, so a peer that floods
 * requests at one that never answers cannot make memory grow without end.
 */
void chain_set_max_open(struct chain *c, size_t max);

/*
 * Routing decisions the chain asks of a router (aggregate.h has one). With
 * none set, the chain is transparent: every client message goes to its
 * oldest backend, unchanged. Callbacks must not free the peers they get.
 */
struct chain_router;

struct chain_router_ops {
	/* The peer whose initialize a front calls for CLIENT (a backend, or
	 * a peer of the router's own), or NULL. */
	struct peer *(*init_target)(struct chain_router *r, struct peer *client);
	/*
	 * Where a client request or notification METHOD goes. M is borrowed:
	 * the router may read it (msg_tree) and rewrite names for the
	 * backend. Returns the peer, or NULL with *CODE and WHY (N bytes) set.
	 */
	struct peer *(*route)(struct chain_router *r, struct peer *client, struct msg *m,
			      const char *method, int *code, char *why, size_t n);
	/*
	 * A notification from FROM (a client or a backend) that the router
	 * may act on: notifications/initialized, every .../list_changed and
	 * notifications/tasks/status. MSG is borrowed; the router may change
	 * it in place. Returns true when the router consumed it; false: it
	 * goes on as any other (to route()'s pick, or to every client).
	 */
	bool (*notification)(struct chain_router *r, struct peer *from, json_t *msg,
			     const char *method);
};

struct chain_router {
	const struct chain_router_ops *ops;
};

/* Sets C's router (borrowed; NULL for none): it must outlive its use. */
void chain_set_router(struct chain *c, struct chain_router *r);

/* The peer that answers CLIENT's initialize (a backend, or a router's own
 * peer), or NULL when there is none. */
struct peer *chain_init_target(struct peer *client);

/*
 * A front's initialize: the handshake with CLIENT's target (see
 * chain_init_target) with the client's PARAMS (borrowed); CB gets the
 * response (borrowed) once, with ARG. Returns 0, or -1 with a reason in
 * WHY (N bytes) when no backend can take it now.
 */
int chain_initialize(struct peer *client, json_t *params,
		     void (*cb)(void *arg, json_t *response), void *arg, char *why, size_t n);

/* Forgets the handshake started for ARG by chain_initialize (its client is going). */
void chain_forget_initialize(struct peer *client, void *arg);

/* Handles a message from peer FROM; takes what *M owns (M is left empty). */
void chain_receive_msg(struct peer *from, struct msg *m);

/*
 * Handles one line from FROM (borrowed, no "\\n"): scanned, or parsed
 * when the scanner declines. Returns false only when it is not JSON: the
 * caller answers that (a front) or logs it (a backend); *ERR is then a
 * ready -32700 response (new reference).
 */
bool chain_receive_line(struct peer *from, const char *line, size_t len, json_t **err);

/* Handles a parsed message from FROM; steals MSG. */
void chain_receive(struct peer *from, json_t *msg);

/* The first registered peer of ROLE in C, or NULL. */
struct peer *chain_first_peer(struct chain *c, enum peer_role role);

/* Runs a notification (stolen) from FROM through the pipeline to TO
 * (NULL: every ready client). */
void chain_notify(struct peer *from, struct peer *to, json_t *msg);

/*
 * Sends a request of mcp-chain's own to TO; steals PARAMS. CB gets the
 * response (borrowed) or a synthesized error; returns 0 or -1.
 */
int chain_call(struct peer *to, const char *method, json_t *params,
	       void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg);

/* Like chain_call, walking TO's own pipeline PL (may be NULL); CB may be
 * NULL when nobody waits for the answer. */
int chain_call_via(struct peer *to, const char *method, json_t *params,
		   struct pipeline *pl,
		   void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg);

/* Like chain_call_via, for a caller of chain C (the exchange is C's: it
 * ends when C unlinks TO, a backend of another chain). */
int chain_call_in(struct chain *c, struct peer *to, const char *method, json_t *params,
		  struct pipeline *pl,
		  void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg);

/*
 * Flow control: P's output queue passed its high-water mark (CONGESTED)
 * or drained. While any peer is congested, reading from every peer of the
 * other role is paused, so a slow reader never makes memory grow without
 * bound.
 */
void chain_congestion(struct peer *p, bool congested);

/* Counters of C since it was made, kept where each thing happens. */
struct chain_stats {
	unsigned long long requests[2];     /* started, by the requester's role
					     * (enum peer_role: client, backend) */
	unsigned long long responses[3];    /* answered by the responder, by
					     * outcome: ok, JSON-RPC error, tool
					     * error (isError) */
	unsigned long long refused_over_limit;  /* past maxOpenRequests */
	unsigned long long responder_gone;  /* answered with an error because the
					     * peer went away before answering */
	unsigned long long cancelled;       /* cancelled by their requester */
};
const struct chain_stats *chain_stats(const struct chain *c);

/* Number of exchanges open in C (for shutdown). */
size_t chain_open_exchanges(const struct chain *c);

#endif
