/*
 * flow_front.h - the MCP-Flow front: MCP over WebTransport (HTTP/3 over
 * QUIC, TLS 1.3), as the MCP-Flow implementation guide 0.1 describes it
 * (docs/mcp-flow.md).
 *
 * One QUIC connection carries one WebTransport session (an extended
 * CONNECT with :protocol webtransport to the configured path, its Origin
 * checked first: 403); the session's first bidirectional stream is its
 * control stream of length-prefixed JSON-RPC frames, JSON or (negotiated
 * at initialize) CBOR. Each WebTransport session is one client session of
 * the chain (session.h), the object the stdio and HTTP fronts make, so
 * modules, backends, names and eras apply unchanged. Large results leave
 * the control stream on execution streams; progress and log messages go
 * as datagrams to clients that take them; $/cancel, $/shutdown.
 */
#ifndef MCPC_FLOW_FRONT_H
#define MCPC_FLOW_FRONT_H

#include <stdbool.h>
#include <stddef.h>

struct chain;
struct cfg_flow;
struct flow_front;

/*
 * Starts serving CFG (borrowed: it must outlive the front) for CHAIN:
 * binds the UDP socket and loads the certificate. MAX bounds one message.
 * NULL with the reason logged.
 */
struct flow_front *flow_front_new(struct chain *chain, const struct cfg_flow *cfg, size_t max);

/* The UDP port the front listens on. */
int flow_front_port(const struct flow_front *f);

/*
 * Where a session's chain comes from, as for the HTTP front: MAKE gives
 * the chain for a new session (NULL with WHY refuses it), RELEASE takes it
 * back. Without them every session uses the front's chain.
 */
typedef struct chain *(*flow_chain_make_fn)(void *arg, unsigned serial, const char *caps,
					   const unsigned char *subject, char *why, size_t n);
typedef void (*flow_chain_release_fn)(void *arg, struct chain *c, unsigned serial);
void flow_front_set_session_chains(struct flow_front *f, flow_chain_make_fn make,
				   flow_chain_release_fn release, void *arg);

/* Session options handed on to each new session (session.h). */
void flow_front_set_input_ttl(struct flow_front *f, double seconds);
void flow_front_offer_stateless(struct flow_front *f, bool always);

/* True while a session has requests open or a stream is being sent. */
bool flow_front_busy(const struct flow_front *f);

/* Refuses new sessions and ends each open one with $/shutdown's drain:
 * no new streams, open requests answered, then the session closed. */
void flow_front_drain(struct flow_front *f);

/* Closes every connection now (REASON) and stops listening. */
void flow_front_stop(struct flow_front *f, const char *reason);

/* Frees the front (stopped first if it was not). */
void flow_front_free(struct flow_front *f);

#endif
