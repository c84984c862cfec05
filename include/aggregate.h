/*
 * aggregate.h - several backends behind one endpoint, and the chain's
 * router for them.
 *
 * With one backend the aggregate is transparent: every message goes to it
 * unchanged, names included (it only tells the client to list again after
 * the backend restarts). With two or more it namespaces tools and prompts
 * ("prefix" + "separator" + name, made safe for Claude clients:
 * ^[a-zA-Z0-9_-]{1,64}$, shortened with a stable hash when needed,
 * collisions resolved deterministically), answers initialize with the
 * union of the backends' capabilities, serves tools/list and prompts/list
 * from caches refreshed on each backend's list_changed, pages
 * resources/list and resources/templates/list across backends behind an
 * opaque cursor, and routes calls, reads, subscriptions and completions
 * to the owning backend with its own names. Task ids are exposed as the
 * backend's prefix + separator + its own id and routed back by it
 * (tasks/get, tasks/result, tasks/cancel, tasks/update; tasks/list is
 * paged across backends); merged lists carry the backends' smallest
 * ttlMs and narrowest cacheScope, and a cached list whose ttlMs ran out
 * is fetched again before it is served.
 *
 * It does this as a peer of its own ("mcp-chain"), so its answers pass
 * back through the middleware like a backend's, and as the chain's router
 * (chain_set_router(chain, aggregate_router(a))): the core asks it where
 * a client message goes, who answers initialize, and whether it takes a
 * notification; it knows nothing else of the aggregate.
 *
 * The client's initialize waits for every backend to be ready or failed,
 * but no longer than "initJoinMs" (or "initTimeoutMs" if shorter): a
 * backend ready later joins, and the client gets list_changed.
 */
#ifndef MCPC_AGGREGATE_H
#define MCPC_AGGREGATE_H

#include <jansson.h>
#include <stdbool.h>

#include "chain.h"
#include "config.h"
#include "peer.h"

struct aggregate;

/* A new aggregate for CHAIN and configuration CFG (both borrowed; they must
 * outlive it); NULL when out of memory. */
struct aggregate *aggregate_new(struct chain *chain, const struct cfg *cfg);

/* What to give chain_set_router(). */
struct chain_router *aggregate_router(struct aggregate *a);

/* Adds a backend peer, in configuration order, with its entry (borrowed). */
void aggregate_add_backend(struct aggregate *a, struct peer *backend,
			   const struct cfg_server *entry);

/* Reports a backend (re)initialized or down, for caches and list_changed. */
void aggregate_backend_ready(struct aggregate *a, struct peer *backend);
void aggregate_backend_down(struct aggregate *a, struct peer *backend);

/* True when the aggregate changes nothing (one backend). */
bool aggregate_transparent(const struct aggregate *a);

/* Reload: takes a backend out; NEW options; a kept backend's new entry. */
void aggregate_remove_backend(struct aggregate *a, struct peer *backend);
void aggregate_reconfigure(struct aggregate *a, const struct cfg *cfg);
void aggregate_update_backend(struct aggregate *a, struct peer *backend,
			      const struct cfg_server *entry);

/* The tools BACKEND lists (its cached list, under the names it gives),
 * or -1 when the aggregate holds no list of it now. */
long aggregate_tool_count(const struct aggregate *a, const struct peer *backend);

/* Tells clients to list tools, prompts and resources again. */
void aggregate_lists_changed(struct aggregate *a);

/* Number of backends in use (not removed by a reload). */
size_t aggregate_backends(const struct aggregate *a);

/* Installs the function that describes backends for the status resource. */
void aggregate_set_status(struct aggregate *a, json_t *(*status_fn)(void *arg), void *arg);

/* Frees A; unset it from the chain first (chain_set_router(c, NULL)). */
void aggregate_free(struct aggregate *a);

#endif
