/*
 * mw_auth.h - the "auth" middleware module: who is calling. A client's
 * credential (a token in a request's params._meta, or one given to
 * mcp-chain in its environment at start) is checked against configured
 * SHA-256 hashes, names a principal that becomes ctx->client for the
 * modules after it, and is stripped before anything reaches a backend.
 * Options and behaviour: docs/middleware/auth.md.
 */
#ifndef MCPC_MW_AUTH_H
#define MCPC_MW_AUTH_H

#include "middleware.h"

/* JSON-RPC error code of a request refused for want of a valid credential. */
#define MW_AUTH_UNAUTHENTICATED -32010

/* Default member of params._meta that carries the token. */
#define MW_AUTH_META_KEY "io.mcp-chain/token"

/* Default environment variable read (and removed) at start. */
#define MW_AUTH_ENV "MCP_CHAIN_TOKEN"

/*
 * Creates the module from its entry OPTS (borrowed). Returns NULL after
 * at least one mw_error when the options are wrong. Reads nothing from
 * the environment: that happens in the module's start hook.
 */
struct mw_module *mw_auth_create(json_t *opts, struct mw_build *b);

#endif
