/*
 * stateless.h - what a client session of the 2026-07-28 era needs beyond
 * the handshake era, between the session and the chain (front-private).
 *
 * The chain speaks one model, the handshake era's: backends (whatever
 * era they speak themselves) send their requests to the client
 * (elicitation, sampling, roots), their list_changed and resources/updated
 * notifications to every client, and results without resultType. For a
 * client of the stateless era this file:
 *  - stamps every result with resultType "complete";
 *  - turns a backend's request to the client into an input_required
 *    result of the client's open call (multi round-trip requests): the
 *    call stays open at the backend under an id of mcp-chain's own, the
 *    client's retry (inputResponses + requestState) answers the backend's
 *    waiting requests and takes the call over under the retry's id;
 *  - authenticates requestState (HMAC-SHA-256 with a per-process key,
 *    bound to the session, the call and its round, expiring), so that a
 *    forged, replayed, expired or foreign state is refused and nothing
 *    reaches the backend;
 *  - passes log messages only from the level the client's requests ask
 *    for in their _meta (none when they ask for none), and tells the
 *    backend with logging/setLevel when that level changes;
 *  - serves subscriptions/listen: list_changed and resources/updated go
 *    only to the listen streams that asked for them (resource URIs are
 *    subscribed at the backend through the chain).
 *
 * Ownership: every json_t argument is borrowed.
 */
#ifndef MCPC_FRONT_STATELESS_H
#define MCPC_FRONT_STATELESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct peer;
struct stateless;

struct peer_out;

/* Writes MSG (borrowed) to the client; O: what the chain said of a
 * message passed on as it came (progress: whose), else NULL. 0 or -1. */
typedef int (*stateless_write_fn)(void *arg, json_t *msg, const struct peer_out *o);

/*
 * State for the stateless-era client CLIENT (the session's peer,
 * borrowed), writing through WRITE. ROUND_TTL bounds how long a call
 * waits for the client's retry (seconds).
 */
struct stateless *stateless_new(struct peer *client, stateless_write_fn write, void *arg,
				double round_ttl);

/* Frees ST (the session is ending: the chain ends the exchanges). */
void stateless_free(struct stateless *st);

/*
 * A request from the client, before the chain sees it. True when it was
 * handled here (subscriptions/listen, a retry, a refused requestState);
 * false: the chain takes it as it is.
 */
bool stateless_request(struct stateless *st, json_t *req);

/* True while backend requests that no call carried wait for the client's
 * next call (which is asked them first). */
bool stateless_holds_requests(const struct stateless *st);

/* A notification from the client; true when handled here (a listen's or
 * a suspended call's cancellation). */
bool stateless_notification(struct stateless *st, json_t *note);

/* Everything the chain sends the client goes through here, O (borrowed)
 * saying what it is and which request of the client's it is about. 0 or
 * -1. */
int stateless_send(struct stateless *st, json_t *msg, const struct peer_out *o);

/* Completes RESULT (changed in place) for the era: resultType, and the
 * cache fields of cacheable methods when the backend gave none (ttlMs 0,
 * cacheScope "private": nothing is cached unless a backend says so). */
void stateless_stamp(json_t *result, const char *method);

/* The session instance a requestState names (unauthenticated: a hint for
 * routing a retry to its session, which checks the state); false if none. */
bool stateless_state_instance(const char *state, uint64_t *instance);

/*
 * Several instances: requestStates are signed with a key derived from
 * KEYS[0] (of N, borrowed for the call) and verified with any, and name
 * TAG (copied), the instance that holds their call. Before any call:
 * a random key of the process's own, no tag.
 */
void stateless_use_keys(const unsigned char (*keys)[32], size_t n, const char *tag);

/* When STATE is a requestState of this deployment (its MAC verifies):
 * true, with the tag of the instance that holds its call in TAG (N bytes;
 * "" when none was configured). */
bool stateless_state_holder(const char *state, char *tag, size_t n);

/* ST's instance (what its requestStates name). */
uint64_t stateless_instance(const struct stateless *st);

/* True for methods whose results are cacheable in the stateless era. */
bool stateless_cacheable(const char *method);

#endif
