/*
 * backend.h - ExternalMCPServer: a server mcp-chain speaks MCP to as a
 * client, over a transport (a child process on stdio; HTTP later).
 *
 * The generic part here owns what every transport shares: the peer the
 * chain routes to, the initialize handshake (done with the front client's
 * own parameters and cached, so that a restarted backend is initialized
 * again the same way; with a 2026-07-28 backend server/discover instead,
 * and every message translated between the eras by be_era.c, so that the
 * chain and the clients see a handshake-era server), the start-up bound, and supervision: a backend
 * whose transport goes down unexpectedly fails its pending requests at
 * once, then is restarted with exponential backoff until it crash-loops
 * (a start that fails counts as a quick failure; one that can never
 * succeed, such as a missing command, gives up at once). A backend that
 * ends cleanly on its own is not restarted (backend_ended).
 *
 * A transport implements struct be_transport_ops and reports back with
 * backend_deliver (a message arrived), backend_down (it is gone) and
 * chain_congestion (flow control).
 */
#ifndef MCPC_BACKEND_H
#define MCPC_BACKEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "config.h"
#include "era.h"
#include "peer.h"

enum backend_state {
	BACKEND_STOPPED,       /* not started yet */
	BACKEND_STARTED,       /* transport up, not initialized */
	BACKEND_INITIALIZING,
	BACKEND_READY,
	BACKEND_RESTARTING,    /* down, a restart is scheduled */
	BACKEND_FAILED,        /* down for good (crash loop, cannot start) */
	BACKEND_STOPPING,      /* shutting down on purpose */
	BACKEND_GONE,          /* shut down */
	BACKEND_ENDED,         /* ended on its own, cleanly (exit status 0): not restarted */
};

struct backend;

/* Transport operations. */
struct be_transport_ops {
	const char *kind;
	/* Starts (spawns, connects); 0, or -1 with peer.why_down set: -1 when
	 * a retry may succeed, BE_START_PERMANENT when it cannot (a command
	 * that does not exist). */
	int (*start)(struct backend *b);
	/* Queues MSG (borrowed); 0 or -1. */
	int (*send)(struct backend *b, json_t *msg);
	/* Optional: queues the pieces of one line (no "\n"); 0 or -1. */
	int (*send_raw)(struct backend *b, const struct iovec *iov, int n);
	/* Begins a graceful stop; backend_down follows (expected). */
	void (*stop)(struct backend *b, double grace);
	/* True while anything of the transport is still running. */
	bool (*running)(struct backend *b);
	/* Flow control on what the backend sends. */
	void (*pause)(struct backend *b, bool paused);
	/* Frees the transport's state (after it is down). */
	void (*destroy)(struct backend *b);
	/* Optional: passes a signal on to what runs (a process group). */
	void (*signal)(struct backend *b, int sig);
	/* Optional: the credentials kept for it changed (backend_credentials_changed). */
	void (*credentials_changed)(struct backend *b);
};

#define BE_START_PERMANENT (-2)

enum backend_event {
	BACKEND_EV_READY,      /* initialized (first time or after a restart) */
	BACKEND_EV_DOWN,       /* went down; pending requests were failed */
	BACKEND_EV_FAILED,     /* gave up restarting */
	BACKEND_EV_GONE,       /* stopped on purpose and fully down */
	BACKEND_EV_ENDED,      /* ended on its own, cleanly; pending requests were failed */
};

/* State changes, for the owner (the router, the app). */
typedef void (*backend_event_fn)(struct backend *b, enum backend_event ev, void *arg);

/*
 * New backend for entry CFG of configuration TOP (both borrowed; they must
 * outlive it), registered with the chain. Not started.
 */
struct chain;
struct backend *backend_new(struct chain *chain, const struct cfg *top,
			    const struct cfg_server *cfg,
			    backend_event_fn on_event, void *arg);

/* Starts the transport; 0 or -1 (the reason is in the peer's why_down). */
int backend_start(struct backend *b);

/* Stops on purpose: no restart; BACKEND_EV_GONE follows. */
void backend_stop(struct backend *b, double grace);

/* True while the transport has anything running (e.g. a child process). */
bool backend_running(const struct backend *b);

/* Passes SIG on to what the transport runs, if anything (a child's
 * process group); stopping is still up to backend_stop. */
void backend_signal(struct backend *b, int sig);

enum backend_state backend_state(const struct backend *b);
const char *backend_state_name(enum backend_state s);
struct peer *backend_peer(struct backend *b);
const struct cfg_server *backend_cfg(const struct backend *b);
const struct cfg *backend_top(const struct backend *b);

/* The cached initialize result (borrowed), or NULL before the first. With
 * a 2026-07-28 backend it is made from its server/discover answer. */
json_t *backend_init_result(const struct backend *b);

/* The era the backend speaks (ERA_UNKNOWN before its first handshake; the
 * one being tried while it is initializing). */
enum era backend_era(const struct backend *b);

/* The protocol revision it speaks, for the status report and logs: its
 * negotiated handshake version, "2026-07-28", or "unknown". Static. */
const char *backend_protocol(const struct backend *b);

/* Reload: the backend's entry in the new configuration TOP (both
 * borrowed; same launch settings). */
void backend_set_cfg(struct backend *b, const struct cfg *top, const struct cfg_server *cfg);

/* Reload: B will initialize with the same client parameters as FROM. */
void backend_adopt_init_params(struct backend *b, const struct backend *from);

/*
 * The principal whose credentials the backend uses (an upstream with
 * "oauth": {"perPrincipal": true}): SUBJECT, 32 bytes (the HTTP front's
 * hash of who a bearer token stands for), copied; set before
 * backend_start. backend_principal is NULL when none was set.
 */
void backend_set_principal(struct backend *b, const unsigned char subject[32]);
const unsigned char *backend_principal(const struct backend *b);

/* The credentials kept for B changed (its principal signed in or out):
 * the transport reads them again, if it keeps any. */
void backend_credentials_changed(struct backend *b);

/* Frees a backend; its transport must be down. */
void backend_free(struct backend *b);

/* Statistics for the status report. */
struct backend_stats {
	double started_at;     /* loop time the current run started, 0 if down */
	unsigned restarts;
	unsigned long requests;
	/* its JSON-RPC errors are counted once, by the chain: peer.answered */
};
const struct backend_stats *backend_stats(const struct backend *b);

/* --- for transports --- */

/* The transport's state (set by the transport's start). */
void *backend_transport(struct backend *b);
void backend_set_transport(struct backend *b, void *t);

/* Hands a message from the backend to the chain; steals MSG. BYTES is its
 * size on the wire. */
void backend_deliver(struct backend *b, json_t *msg, size_t bytes);

/* Hands a received line (borrowed) to the chain; false when it is not
 * JSON (the caller reports it). */
bool backend_deliver_line(struct backend *b, const char *line, size_t len);

/* --- for the era translation (be_era.c) --- */

/* The client's initialize params the backend was started with (borrowed), or NULL. */
json_t *backend_init_params(const struct backend *b);

/* Sends MSG (borrowed) through the transport untranslated; 0 or -1. */
int backend_send_transport(struct backend *b, json_t *msg);

/* The transport is down; REASON names why ("exited with status 1"). */
void backend_down(struct backend *b, const char *reason);

/*
 * The transport ended on its own and cleanly (a child that exited with
 * status 0 unasked), as a server run directly ends its output: pending
 * requests are failed, it is not restarted (state BACKEND_ENDED, event
 * BACKEND_EV_ENDED). While stopping on purpose this is backend_down.
 */
void backend_ended(struct backend *b, const char *reason);

/* Transport for stdio children (src/external/be_stdio.c). */
extern const struct be_transport_ops be_stdio_ops;

/* Transport for HTTP upstreams, Streamable HTTP and legacy HTTP+SSE
 * (src/external/be_http.c); backend_cfg(b)->transport tells which. */
extern const struct be_transport_ops be_http_ops;

/* Transport for MCP-Flow upstreams, MCP over WebTransport
 * (src/external/be_flow.c). */
extern const struct be_transport_ops be_flow_ops;

/* Which transport serves the entries of one configuration type. */
struct be_transport_def {
	enum cfg_transport transport;
	const struct be_transport_ops *ops;
};

/*
 * The transports mcp-chain knows (src/external/transports.c), ending with
 * ops NULL: a new backend type is a file in src/external/ and one line
 * there. The generic backend names none of them.
 */
extern const struct be_transport_def be_transports[];

/*
 * The transports backend_new picks from by an entry's type (borrowed, kept
 * for the process's life): set by the wiring (main.c: be_transports)
 * before any backend is made; tests give their own.
 */
void backend_use_transports(const struct be_transport_def *defs);

#endif
