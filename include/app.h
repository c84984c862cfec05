/*
 * app.h - the running mcp-chain: one process-wide chain with its router
 * (the aggregate) and backends, the front that serves it, and what ties
 * them over time: SIGHUP reloads (src/app/reload.c), the status resource
 * and /metrics (src/app/status.c), sessions' own chains with --listen
 * (src/app/scoped.c), signals and the orderly stop (src/app/app.c).
 *
 * This is the wiring layer: it alone names fronts, backend types and the
 * aggregate, which know nothing of it. main.c parses the command line and
 * hands it a configuration.
 *
 * Ownership: an app owns its chain, aggregate, backends, fronts, session
 * chains and every configuration it was given or reloaded (a->cfg is the
 * one in force; replaced ones wait in a->old while a backend points into
 * them).
 */
#ifndef MCPC_APP_H
#define MCPC_APP_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>
#include <jansson.h>

#include "backend.h"
#include "buf.h"
#include "config.h"
#include "log.h"

enum app_phase { APP_RUNNING, APP_DRAINING, APP_STOPPING };

struct app;
struct aggregate;
struct chain;
struct http_front;
struct pipeline;
struct redis;
struct tracer;
struct stdio_front;

/*
 * A session's own chain (--listen with session-scoped servers): the
 * session's backends and an aggregate over them and over the app's shared
 * backends (linked to its chain), made when the session is created and
 * released when it ends (http_front_set_session_chains). Its own backends
 * start at once and are initialized by the session's initialize, with
 * that client's parameters; released, they are stopped as at shutdown,
 * it lets go of the shared ones, and the whole is freed
 * (app_sweep_session_chains) once every one of its own is down. It keeps
 * its configuration and pipelines alive meanwhile, so a reload leaves a
 * running session as it was (but for a shared backend the reload
 * replaced or removed).
 */
struct schain {
	struct app *a;
	struct cfg *cfg;           /* borrowed: kept by struct app while used */
	struct chain *chain;       /* owned */
	struct aggregate *agg;     /* owned: the chain's router */
	struct backend **backends; /* owned: the session-scoped ones */
	struct pipeline **pls;     /* a reference to each backend's pipeline */
	size_t nbackends;
	struct backend **shared;   /* borrowed: the app's shared backends its
				    * aggregate includes, linked to its chain
				    * (chain_link_peer) until it is released */
	size_t nshared;
	struct backend **all;      /* both, in configuration order (status) */
	size_t nall;
	unsigned serial;           /* the session's number, for logs */
	bool released;             /* its session ended: stopping */
	char *caps;                /* owned: 2026-07-28 calls declaring these
				    * capabilities (canonical JSON) share it;
				    * NULL: a session's own */
	struct schain *next;
};

struct app {
	struct cfg *cfg;
	struct cfg **old;          /* configurations replaced by a reload: kept
				    * while a backend (one being stopped, say)
				    * points into them */
	size_t nold;
	const char *level_flag;    /* --log-level or $MCP_CHAIN_LOG, if given */
	struct backend **backends; /* in service (the configuration's) */
	size_t nbackends;
	struct backend **retired;  /* replaced or removed by a reload: being
				    * stopped, freed at a later reload once down
				    * (not in the status view or /metrics) */
	size_t nretired;
	struct stdio_front *front;
	struct http_front *http;   /* --listen: the HTTP front instead of stdio */
	struct flow_front *flow;   /* --flow: the MCP-Flow front (beside --listen, or alone) */
	struct chain *chain;
	struct aggregate *agg;     /* the chain's router: one backend or several */
	bool listening;            /* --listen: scopes apply (cfg_server.scope) */
	struct schain *schains;    /* sessions' own chains, live and released */
	const struct cfg *first;   /* the configuration the app was made with: kept
				    * until app_free, reloads or not (the --record
				    * recorder reads it) */
	double tokens, tokens_at;  /* maxStartsPerSecond: a token bucket */
	enum app_phase phase;
	int signals;               /* SIGINT/SIGTERM received */
	int forced;                /* the signal that forced the exit, or 0 */
	ev_signal sigterm, sigint, sighup;
	ev_prepare step;           /* advances the shutdown before the loop sleeps */
	ev_timer deadline;
	ev_timer drain_wait;       /* listen.drainDelayMs: /readyz said 503,
				    * the balancer is given time to notice */
	const char *drain_why;     /* the signal's name, for the log */
	struct app_login *login;   /* --listen with perPrincipal upstreams: the
				    * front's /oauth/ routes (login.c) */
	struct app_single *single; /* stdio: single-user logins asked of the
				    * client (single.c) */
	struct redis *redis;       /* the configuration's "redis": the shared
				    * store (redis_default), or NULL; kept as
				    * made at start across reloads */
	struct tracer *tracer;     /* the configuration's "telemetry", or NULL
				    * (telemetry.c) */
};

/* ---- app.c: making, running and stopping ---- */

/*
 * Makes the app for configuration CFG (stolen: the app frees it, or the
 * one a reload put in its place): its chain, aggregate and the backends
 * of the process-wide chain, none started, and no front yet. LEVEL_FLAG
 * (borrowed, may be NULL) is the log level given outside the file, which
 * a reload leaves alone; LISTENING makes "scope" count. NULL when a
 * module cannot start or memory runs out (CFG freed then too).
 */
struct app *app_new(struct cfg *cfg, const char *level_flag, bool listening);

/*
 * Opens the fronts: Streamable HTTP on LISTEN ("-": the "listen" section)
 * and MCP-Flow on FLOW ("-": the "flow" section) when given, else stdio
 * on fds 0 and 1. Returns 0, or -1 (said why).
 */
int app_open_front(struct app *a, const char *listen, const char *flow);

/*
 * Starts every backend, runs the loop until the stop is over and returns
 * the exit status: 0, or 128 + the signal that forced the exit.
 */
int app_run(struct app *a);

/* Frees A and everything it owns (NULL is fine). */
void app_free(struct app *a);

/* True when entry S runs in the process-wide chain: always on stdio (one
 * session, so scope changes nothing); with --listen only when shared. */
bool app_shared_entry(const struct app *a, const struct cfg_server *s);

/*
 * Makes a chain for configuration CFG (borrowed: it must outlive them)
 * with an aggregate as its router, whose status resource STATUS_FN(ARG)
 * describes: the process-wide one, or a session's own. 0, or -1 out of
 * memory (what was made is in *C and *AGG, for the caller to free).
 */
int app_chain_new(const struct cfg *cfg, struct chain **c, struct aggregate **agg,
		  json_t *(*status_fn)(void *arg), void *arg);

/* Creates a backend of the process-wide chain for entry S of C (borrowed:
 * kept alive by the app) and registers it, not started. NULL on failure. */
struct backend *app_add_backend(struct app *a, struct cfg *c, struct cfg_server *s);

/* Keeps AGG's view of its backend B current after event EV (ready, or
 * down for whatever reason). */
void app_backend_event(struct aggregate *agg, struct backend *b, enum backend_event ev);

/* Closes the session(s) and starts stopping every backend; logs WHY at
 * LEVEL. Once only: later calls do nothing. */
void app_begin_stop(struct app *a, const char *why, enum log_level level);

/* True while a backend has anything running, sessions' own included. */
bool app_any_running(const struct app *a);

/* ---- reload.c: SIGHUP ---- */

/* True when two entries would start the same process or connection (a
 * reload keeps such a backend running, with the new entry's settings). */
bool app_same_launch(const struct cfg_server *x, const struct cfg_server *y);

/*
 * Reads the configuration file again and applies it: the new pipelines
 * for new requests, kept backends updated, changed ones replaced, removed
 * ones stopped, added ones started. Keeps the running configuration (and
 * logs why) when the file has an error or the change needs a restart.
 * Does nothing once the stop has begun.
 */
void app_reload(struct app *a);

/* Traces (telemetry.c): the tracer made from the configuration at start,
 * kept or replaced on reload (N: the new configuration), its queue flushed
 * at the stop (bounded), freed. */
void app_telemetry_start(struct app *a);
void app_telemetry_reload(struct app *a, const struct cfg *n);
void app_telemetry_stop(struct app *a);
void app_telemetry_free(struct app *a);

/* Frees the retired backends that are down with nothing left running. */
void app_sweep_retired(struct app *a);

/* ---- status.c: what a client and a scraper are told ---- */

/* The status resource for the N backends V (a new reference). */
json_t *app_describe(struct backend *const *v, size_t n);

/* The status resource of the process-wide chain (ARG: the app). */
json_t *app_describe_backends(void *arg);

/* /readyz: true when every backend is ready or gone (ARG: the app). */
bool app_all_ready(void *arg);

/* Appends /metrics beyond the front's own to B (ARG: the app). */
void app_write_metrics(struct buf *b, void *arg);

/* ---- scoped.c: sessions' own backends (--listen, "scope": "session") ---- */

/*
 * The HTTP front's factory (http_chain_make_fn, ARG: the app): the
 * process-wide chain when the configuration has no session-scoped
 * server, else a chain of the session's own, its backends started now.
 * NULL with WHY (N bytes) set when a bound or the stop refuses it.
 * SUBJECT (32 bytes, or NULL) is the session's principal, handed to its
 * perPrincipal backends (backend_set_principal) before they start.
 */
struct chain *app_session_chain(void *arg, unsigned serial, const char *caps,
				const unsigned char *subject, char *why, size_t n);

/* The HTTP front gives a session's chain back: its own backends stop. */
void app_release_session_chain(void *arg, struct chain *c, unsigned serial);

/*
 * A shared backend of the app changed, for the sessions' own chains that
 * include it: B left service (a reload removed or replaced it; each lets
 * go of it), or B is new (each whose configuration names it shared takes
 * it in, so a replaced backend stays in running sessions), or B's state
 * changed (EV, for their aggregates).
 */
void app_sessions_drop_shared(struct app *a, struct backend *b);
void app_sessions_add_shared(struct app *a, struct backend *b);
void app_sessions_shared_event(struct app *a, struct backend *b, enum backend_event ev);

/* Frees the released session chains whose backends are all down and
 * whose chain has nothing open (ALL: every one, the loop being over). */
void app_sweep_session_chains(struct app *a, bool all);

/* True while a released session chain waits to be freed. */
bool app_sweep_pending(const struct app *a);

/* Has the released session chains freed before the loop sleeps, once they
 * can be (app.c's step watcher, which runs until none is left). */
void app_schedule_sweep(struct app *a);

/*
 * Whether a session may start NEED child processes now, against
 * listen.maxScopedSessions, maxProcesses and maxStartsPerSecond (a token
 * bucket, taken from on success). 0, or -1 with the bound named in WHY
 * (N bytes) and logged.
 */
int app_within_bounds(struct app *a, unsigned serial, size_t need, char *why, size_t n);

/* Child processes running now, of every backend. */
size_t app_processes_running(const struct app *a);

/* Passes SIG on to every backend's process group, sessions' own included. */
void app_signal_backends(struct app *a, int sig);

/* ---- login.c: a perPrincipal upstream's sign-in through the HTTP front ---- */

/*
 * With perPrincipal upstreams: the front's GET /oauth/login, /oauth/callback
 * and /oauth/logout (http_front_set_routes), and the login links the HTTP
 * upstreams put in their -32042 errors (oauth_set_login_link). 0, or -1
 * (said why). Nothing without such an upstream.
 */
int app_login_start(struct app *a);

/* Cancels the logins under way and frees their state. */
void app_login_free(struct app *a);

/* ---- ui.c: the live page ---- */

/*
 * --listen with listen.ui (the default): the front's /ui (its assets, built
 * into the binary), its snapshots (backends, sessions, traffic, events)
 * and the events told as they happen (an observe.h listener). 0, or -1
 * out of memory. Nothing when the page is off.
 */
int app_ui_start(struct app *a);

/* Stops telling the page events (before the front is freed). */
void app_ui_stop(struct app *a);

/* ---- loopback.c: a single-user login with a loopback redirect ---- */

struct loopback_login;
struct oauth_tokens;

/* What a loopback login tells its owner: the authorization URL to open
 * (borrowed; once), then its end (ERR NULL: the tokens are in the plain
 * store; else why not). Free the login after done, not from inside it. */
struct loopback_ops {
	void (*url)(void *arg, struct loopback_login *l, const char *url);
	void (*done)(void *arg, struct loopback_login *l, const char *err);
};

/*
 * Starts the login of S (borrowed for its life; an HTTP upstream with
 * "oauth"), asking SCOPE too (copied, may be NULL), on the loop: discovery,
 * a listener on 127.0.0.1 (callbackPort, else the registered port, else a
 * free one), registration, OPS->url, the redirect, the exchange, the store,
 * OPS->done -- which TIMEOUT seconds end too, and which may come before
 * this returns. NULL when out of memory.
 */
struct loopback_login *loopback_login_start(const struct cfg_server *s, const char *scope,
					    double timeout, const struct loopback_ops *ops,
					    void *arg);
/* The tokens obtained (owned by L), once done said so. */
const struct oauth_tokens *loopback_login_tokens(struct loopback_login *l);
/* Stops L (its listener closed, nothing called) and frees it. NULL is fine. */
void loopback_login_free(struct loopback_login *l);

/* ---- single.c: a single-user upstream's sign-in asked of a stdio client ---- */

/*
 * On the stdio front: the logins the HTTP upstreams start for a client that
 * declared URL-mode elicitation (oauth_set_single_login), each a loopback
 * login whose authorization URL goes into their -32042 errors. 0 or -1.
 */
int app_single_start(struct app *a);
/* Stops the logins under way. */
void app_single_free(struct app *a);

/* "mcp-chain auth login|status|logout ..." (auth.c): ARGV[0] is "auth".
 * Returns the exit code. */
int app_auth_main(int argc, char **argv);

#endif
