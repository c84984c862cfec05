/*
 * chain_internal.h - what chain.c shares with fastpath.c, and nothing
 * else: exchange bookkeeping both paths must do the same way.
 */
#ifndef MCPC_CHAIN_INTERNAL_H
#define MCPC_CHAIN_INTERNAL_H

#include "chain.h"

/* New exchange for a request from FROM (NULL: our own); borrows ID. */
struct exchange *chain_exchange_new(struct peer *from, json_t *id, const char *method);

/* Gives EX its id at TO, registers it there and starts its timeout. */
void chain_exchange_assign(struct exchange *ex, struct peer *to);

/* Answers EX's requester with an error about its responder. */
void chain_exchange_fail(struct exchange *ex, const char *reason);

/* Unregisters and frees EX. */
void chain_exchange_free(struct exchange *ex);

/* The global pipeline (borrowed; may be NULL). */
struct pipeline *chain_global_pipeline(void);

/* The registered peers (newest first). */
struct peer *chain_peers(void);

/* The client that a backend's own request goes to, or NULL. */
struct peer *chain_route_client(struct peer *backend);

#endif
