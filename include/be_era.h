/*
 * be_era.h - a 2026-07-28 (stateless era) backend behind handshake-era
 * clients: the translation backend.c applies to what goes to such a
 * backend's transport and to what comes from it, so that the chain, the
 * modules and the front see a backend like any other.
 *
 * To the backend: every request gets the era's _meta (protocol version,
 * the client's capabilities and clientInfo from the initialize params the
 * backend keeps, the log level the client set); ping and logging/setLevel
 * are answered here; resources/subscribe and unsubscribe change the
 * subscriptions/listen stream mcp-chain keeps open at the backend (which
 * also carries list_changed); notifications/initialized is not passed on.
 *
 * From the backend: resultType and the era's result fields are removed; an
 * input_required result becomes requests of the backend's own
 * (elicitation/create, sampling/createMessage, roots/list) handed to the
 * chain as a handshake-era server would send them, and once every one is
 * answered the call is sent again with inputResponses and requestState,
 * as often as the backend asks (bounded); the client sees one request and
 * its one response. The listen stream's notifications go on without its
 * subscription id.
 *
 * Ownership: be_era_send borrows the message; be_era_receive steals it.
 */
#ifndef MCPC_BE_ERA_H
#define MCPC_BE_ERA_H

#include <jansson.h>
#include <stdbool.h>

struct backend;
struct be_era;

/* Rounds of input_required one call may take before it fails. */
#define BE_ERA_MAX_ROUNDS 16

/* New translation state for B (borrowed; it outlives the state); NULL when
 * out of memory. */
struct be_era *be_era_new(struct backend *b);

/* Frees E (NULL is fine). */
void be_era_free(struct be_era *e);

/* The transport went down: forgets open calls, rounds, the listen stream
 * and answers not yet delivered (the chain fails their requests). */
void be_era_reset(struct be_era *e);

/*
 * A message from the chain to the backend (borrowed): translated and sent
 * on through the transport, answered here, or taken (an answer to one of
 * the input requests). 0, or -1 when the transport refused it.
 */
int be_era_send(struct be_era *e, json_t *msg);

/*
 * A message from the backend (stolen): returns what the chain gets (a new
 * reference, maybe MSG changed in place), or NULL when it was consumed.
 */
json_t *be_era_receive(struct be_era *e, json_t *msg);

/* The backend is ready (discover answered): opens the listen stream for
 * what its capabilities announce. CAPS is borrowed. */
void be_era_ready(struct be_era *e, json_t *caps);

/*
 * The initialize result a handshake-era client gets for the server/discover
 * result DISCOVER, the client having asked with PARAMS (both borrowed);
 * NAME is the backend's name, used when the server states no identity.
 * A new reference.
 */
json_t *be_era_init_result(json_t *discover, json_t *params, const char *name);

/* True when RESPONSE (borrowed) to an initialize is how a 2026-only server
 * refuses it: -32022 (UnsupportedProtocolVersion), or data.supported
 * listing only stateless revisions. */
bool be_era_refuses_initialize(json_t *response);

/* The _meta a request to a stateless backend carries, from the client's
 * initialize PARAMS (borrowed) and LEVEL (NULL: none): a new object. */
json_t *be_era_envelope(json_t *params, const char *level);

#endif
