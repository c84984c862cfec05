/*
 * chain.h - moving messages between client sessions and backends.
 *
 * The chain knows peers, not transports: a front hands it the messages a
 * client sends once its lifecycle allows traffic, a backend hands it what
 * the server sends once its own handshake is done. The chain keeps the
 * open exchanges, maps ids and progress tokens at each hop, translates
 * cancellations, runs every message through the middleware pipeline, and
 * routes.
 *
 * Routing (one backend for now; the several-backends work replaces
 * chain_route_backend): client requests and notifications go to the
 * backend; backend notifications go to every ready client; a backend's
 * own request goes to the client that has a request open at that backend,
 * else the first ready client.
 */
#ifndef MCPC_CHAIN_H
#define MCPC_CHAIN_H

#include <jansson.h>

#include "middleware.h"
#include "peer.h"

/* Registers a peer with the chain (clients and backends alike). */
void chain_add_peer(struct peer *p);

/* Unregisters a peer (before freeing it). */
void chain_remove_peer(struct peer *p);

/* Ends every exchange involving P, answering or cancelling them with
 * REASON; P stays registered but not ready. */
void chain_peer_gone(struct peer *p, const char *reason);

/* Sets the global pipeline (takes a reference; NULL for none). */
void chain_set_pipeline(struct pipeline *pl);

/*
 * The fast path: moves the message in LINE (LEN bytes, no "\n") without
 * parsing it into a tree, when nothing needs to read it (no middleware,
 * one backend, a plain request, response or notification). Returns true
 * when done; false means the caller parses it and calls chain_receive.
 */
bool chain_fast(struct peer *from, const char *line, size_t len);

/* Handles a message from peer FROM; steals MSG. */
void chain_receive(struct peer *from, json_t *msg);

/* The peer a client's initialize goes to (see router_init_target). */
struct peer *chain_route_backend(struct peer *client);

/* The first registered peer of ROLE, or NULL. */
struct peer *chain_first_peer(enum peer_role role);

/* Runs a notification (stolen) from FROM through the pipeline to TO
 * (NULL: every ready client). */
void chain_notify(struct peer *from, struct peer *to, json_t *msg);

/*
 * Sends a request of mcp-chain's own to TO; steals PARAMS. CB gets the
 * response (borrowed) or a synthesized error; returns 0 or -1.
 */
int chain_call(struct peer *to, const char *method, json_t *params,
	       void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg);

/*
 * Flow control: P's output queue passed its high-water mark (CONGESTED)
 * or drained. While any peer is congested, reading from every peer of the
 * other role is paused, so a slow reader never makes memory grow without
 * bound.
 */
void chain_congestion(struct peer *p, bool congested);

/* Like chain_call, walking TO's own pipeline PL (may be NULL); CB may be
 * NULL when nobody waits for the answer. */
int chain_call_via(struct peer *to, const char *method, json_t *params,
		   struct pipeline *pl,
		   void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg);

/* Number of exchanges open anywhere (for shutdown). */
size_t chain_open_exchanges(void);

/* Frees chain-wide state at exit. */
void chain_release(void);

#endif
