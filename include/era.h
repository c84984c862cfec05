/*
 * era.h - the two protocol eras: the handshake era (initialize, revisions
 * 2024-11-05 to 2025-11-25) and the stateless era (2026-07-28: no
 * handshake, server/discover, every request's facts in its _meta,
 * input_required results instead of server-to-client requests).
 *
 * One place for the revision lists, the _meta keys and the errors both
 * sides of mcp-chain use when they meet the stateless era.
 *
 * Ownership: functions taking json_t borrow it; those returning json_t
 * return a new reference.
 */
#ifndef MCPC_ERA_H
#define MCPC_ERA_H

#include <jansson.h>
#include <stdbool.h>

#define ERA_STATELESS_VERSION "2026-07-28"

/* _meta keys of the stateless era */
#define ERA_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define ERA_META_CLIENT_CAPS "io.modelcontextprotocol/clientCapabilities"
#define ERA_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define ERA_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define ERA_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define ERA_META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"

/* mcp-chain's own: the inputRequests key a 2026-07-28 backend gave one of
 * its input requests, carried on the request it becomes inside mcp-chain
 * so that a stateless client is asked under the backend's own key; taken
 * off before any client sees the request */
#define ERA_META_INPUT_KEY "io.mcp-chain/inputKey"

/* mcp-chain's own: on a backend's request to a client, the id the chain
 * gave (at that backend) the client request it belongs to, when the
 * backend's transport knows it (a 2026-07-28 backend's input request);
 * the chain routes by it, and it is taken off before a client sees it */
#define ERA_META_RELATED "io.mcp-chain/relatedRequest"

/* Takes mcp-chain's own _meta keys off MSG (a request to a client; changed
 * in place); true when there were any. */
bool era_strip_own_meta(json_t *msg);

/* error codes of the stateless era */
#define RPC_MISSING_CLIENT_CAPABILITY -32021
#define RPC_UNSUPPORTED_VERSION -32022

enum era {
	ERA_UNKNOWN,     /* nothing said yet */
	ERA_HANDSHAKE,   /* initialize, 2024-11-05 .. 2025-11-25 */
	ERA_STATELESS,   /* 2026-07-28 */
};

/* The eras a server speaks, as bits (struct peer.eras). */
#define ERA_BIT_HANDSHAKE 1u
#define ERA_BIT_STATELESS 2u

/* NULL-terminated, newest first. */
extern const char *const era_handshake_versions[];
extern const char *const era_stateless_versions[];

bool era_handshake_supported(const char *version);
bool era_stateless_supported(const char *version);

/* The era a revision string belongs to (ERA_UNKNOWN when it is neither). */
enum era era_of_version(const char *version);

/*
 * The entry of era_handshake_versions that reads VERSION (static: it
 * outlives the caller's params), or NULL when it is none of them.
 */
const char *era_handshake_version(const char *version);

/*
 * The initialize RESULT (borrowed) that a backend gave one client's
 * handshake, as another client that asked for revision ASKED is to get it
 * (a new reference): naming ASKED when it is a handshake-era revision
 * older than the one RESULT names (a server answers the revision a client
 * asks for when it speaks it, and one that speaks a revision is taken to
 * speak the older ones too), else RESULT itself. The client whose own
 * request RESULT answers gets RESULT as it came: not this.
 */
json_t *era_result_for(json_t *result, const char *asked);

/*
 * params._meta[KEY] of a request's PARAMS (borrowed; NULL when absent).
 */
json_t *era_meta(json_t *params, const char *key);

/* The protocol version a stateless request states in its _meta, or NULL. */
const char *era_request_version(json_t *params);

/*
 * The UnsupportedProtocolVersion error response for request ID (borrowed)
 * that asked for REQUESTED (may be NULL): data {supported, requested}.
 */
json_t *era_unsupported_error(json_t *id, const char *requested);

/*
 * Checks a stateless-era request's PARAMS (borrowed) for the _meta every
 * request of the era carries (protocolVersion, clientCapabilities). NULL
 * when it is fine, else what is wrong, with *CODE the error to answer
 * (RPC_INVALID_PARAMS when something is missing, RPC_UNSUPPORTED_VERSION
 * for a version mcp-chain does not speak: answer with era_unsupported_error).
 */
const char *era_check_envelope(json_t *params, int *code);

/* True for the methods the stateless era removed (initialize, ping,
 * logging/setLevel, resources/subscribe and unsubscribe): -32601 there. */
bool era_stateless_removed(const char *method);

/* Every supported revision of both eras as a new array, newest first. */
json_t *era_all_versions(void);

#endif
