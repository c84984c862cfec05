/*
 * chain_internal.h - what chain.c shares with fastpath.c, and nothing
 * else: exchange bookkeeping both paths must do the same way.
 */
#ifndef MCPC_CHAIN_INTERNAL_H
#define MCPC_CHAIN_INTERNAL_H

#include "chain.h"
#include "jscan.h"

/* New exchange for a request from FROM (NULL: our own); borrows ID. */
struct exchange *chain_exchange_new(struct peer *from, json_t *id, const char *method);

/* Gives EX its id at TO, registers it there and starts its timeout. */
void chain_exchange_assign(struct exchange *ex, struct peer *to);

/* Answers EX's requester with an error about its responder. */
void chain_exchange_fail(struct exchange *ex, const char *reason);

/* Unregisters and frees EX. */
void chain_exchange_free(struct exchange *ex);

/* EX's requester id (borrowed), made from ex->id_text on first use; may be NULL. */
json_t *chain_exchange_id(struct exchange *ex);

/*
 * The id map key (as rpc_id_key gives for the same id) of the id text
 * [P, P+N): a plain integer or a quoted string without escapes. Returns
 * its length, 0 when it cannot be one.
 */
size_t chain_id_key_text(const char *p, size_t n, unsigned char *key);

/* The global pipeline (borrowed; may be NULL). */
struct pipeline *chain_global_pipeline(void);

/* The registered peers (newest first). */
struct peer *chain_peers(void);

/* The client that a backend's own request goes to, or NULL. */
struct peer *chain_route_client(struct peer *backend);

/* ---- messages that travel as bytes (fastpath.c) ---- */

/* A new json_t for a scanned id or token span (NULL on failure). */
json_t *chain_span_value(struct jspan s);

/* Writes the integer V in decimal into BUF (24 bytes); returns the length. */
size_t chain_int_text(json_int_t v, char *buf);

/*
 * The text of EX's id at its requester: in BUF (N bytes) for an integer,
 * else in *HEAP (malloc'd, the caller frees). Returns the length.
 */
size_t chain_from_id_text(struct exchange *ex, char *buf, size_t n, char **heap);

/* Sends LINE to TO with span A replaced by AT and, if B.p, B by BT. */
int chain_send_spliced(struct peer *to, const char *line, size_t len, bool request,
		       struct jspan a, const char *at, size_t an,
		       struct jspan b, const char *bt, size_t bn);

/*
 * The fast path for a response mcp-chain built itself in LINE (valid JSON
 * by construction, so not scanned): ID is the span of its integer id
 * ID_INT, RESULT the span of its result object. Borrows LINE; returns as
 * chain_fast.
 */
bool chain_fast_own_response(struct peer *from, const char *line, size_t len,
			     struct jspan id, int64_t id_int, struct jspan result);

/*
 * A scanned request whose way has middleware: walked unparsed, parsed only
 * if a module reads it. False (nothing done) means "take the full path".
 */
bool chain_raw_request(struct peer *from, const char *line, size_t len,
		       const struct jscan *js);

/* A scanned response to EX's request, walked back unparsed likewise. */
bool chain_raw_response(struct peer *from, struct exchange *ex, const char *line,
			size_t len, const struct jscan *js);

#endif
