/*
 * backend.h - ExternalMCPServer over stdio: a child process that
 * mcp-chain speaks MCP to as a client.
 *
 * The backend performs its initialize handshake with the front client's
 * own parameters (see peer_ops.initialize), reads newline-delimited
 * JSON-RPC from the child's stdout (a line that is not JSON is logged and
 * skipped, never forwarded), and hands every message to the chain.
 */
#ifndef MCPC_BACKEND_H
#define MCPC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "peer.h"

enum backend_state {
	BACKEND_STOPPED,       /* not started, or gone */
	BACKEND_STARTED,       /* running, not initialized */
	BACKEND_INITIALIZING,
	BACKEND_READY,
	BACKEND_STOPPING,
};

struct backend;

/* Called once the backend's process has ended and its pipes are closed. */
typedef void (*backend_gone_fn)(struct backend *b, void *arg);

/*
 * New backend for entry CFG of configuration TOP (both borrowed; they must
 * outlive it). Registered with the chain.
 */
struct backend *backend_new(const struct cfg *top, const struct cfg_server *cfg,
			    backend_gone_fn on_gone, void *arg);

/* Spawns the child; returns 0 or -1 (logged). */
int backend_start(struct backend *b);

/* Closes the child's stdin, then escalates after GRACE seconds. */
void backend_stop(struct backend *b, double grace);

/* True while a child process exists. */
bool backend_running(const struct backend *b);

enum backend_state backend_state(const struct backend *b);
struct peer *backend_peer(struct backend *b);

/* Frees a stopped backend. */
void backend_free(struct backend *b);

#endif
