/*
 * mw_limit.h - the "limit" middleware module: per tool, backend, client
 * or rule, a concurrency limit with a bounded queue, a token-bucket rate
 * limit, and a timeout of its own. Options: docs/middleware/limit.md.
 */
#ifndef MCPC_MW_LIMIT_H
#define MCPC_MW_LIMIT_H

#include "middleware.h"

/* JSON-RPC error code: too many requests in flight and the queue is full,
 * or a queued request waited too long. */
#define MW_LIMIT_BUSY -32011

/* JSON-RPC error code: over the rate limit; data.retryAfterMs says when. */
#define MW_LIMIT_RATE -32012

/*
 * Creates the module from its entry OPTS (borrowed). Returns NULL after
 * at least one mw_error when the options are wrong.
 */
struct mw_module *mw_limit_create(json_t *opts, struct mw_build *b);

#endif
