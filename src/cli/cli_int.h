/*
 * cli_int.h - inside src/cli/: the MCP client connection to a spawned
 * chain (conn.c), and the commands that use it.
 */
#ifndef MCPC_CLI_INT_H
#define MCPC_CLI_INT_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>

#include "cli.h"
#include "framer.h"
#include "proc.h"
#include "writer.h"

struct conn;

/*
 * A response arrived: exactly one of RESULT and ERROR is set (both
 * borrowed). When the chain went away before answering, ERROR is a
 * -32000 error made up here.
 */
typedef void (*conn_reply_fn)(struct conn *c, json_t *result, json_t *error, void *arg);

/* A notification from the chain; PARAMS borrowed (may be NULL). */
typedef void (*conn_notify_fn)(struct conn *c, const char *method, json_t *params, void *arg);

/*
 * A request from the chain (sampling, elicitation...). Returns the result
 * (new reference), or NULL with *ERROR set to an error object
 * ({code, message}, new reference).
 */
typedef json_t *(*conn_request_fn)(struct conn *c, const char *method, json_t *params,
				   json_t **error, void *arg);

/* The connection is up (initialized) or could not come up (READY false). */
typedef void (*conn_ready_fn)(struct conn *c, bool ready, void *arg);

struct conn_hooks {
	conn_ready_fn on_ready;
	conn_notify_fn on_notify;
	conn_request_fn on_request;   /* NULL: every request but ping refused */
	void *arg;
};

/*
 * Spawns `/proc/self/exe --config CONFIG` and initializes it, declaring
 * elicitation and sampling only when INTERACTIVE. The loop must then run;
 * on_ready is called once. Returns NULL (message printed) on failure.
 */
struct conn *conn_start(const struct cli_opts *o, bool interactive, const struct conn_hooks *h);

/* Sends a request; steals PARAMS (may be NULL). Returns its id, or -1. */
json_int_t conn_request(struct conn *c, const char *method, json_t *params,
			conn_reply_fn fn, void *arg);

/* Sends a notification; steals PARAMS (may be NULL). */
void conn_notify(struct conn *c, const char *method, json_t *params);

/* Forgets the pending request ID: its reply, if any, is dropped. */
void conn_forget(struct conn *c, json_int_t id);

/*
 * Ends the session: closes the chain's stdin, waits for it to exit and
 * stops the loop; cli_conn_exit_code then gives CODE.
 */
void conn_finish(struct conn *c, int code);

/* True once conn_finish was called. */
bool conn_finishing(const struct conn *c);

/* Prints the chain's last stderr lines (on failure, without -v). */
void conn_show_tail(struct conn *c);

/* The exit code given to conn_finish (CLI_EXIT_CHAIN when it died). */
int conn_exit_code(const struct conn *c);

/* Frees C; the loop has stopped. */
void conn_free(struct conn *c);

/* The `initialize` result (borrowed), once ready. */
json_t *conn_server_info(struct conn *c);

/*
 * Fetches every page of LIST_METHOD ("tools/list") and calls FN with the
 * concatenated RESULT_KEY ("tools") array as RESULT, or with ERROR.
 */
void conn_list_all(struct conn *c, const char *list_method, const char *result_key,
		   conn_reply_fn fn, void *arg);

/*
 * Following list_changed: what a client sees may change right after
 * `initialized` (a server that registers tools once it knows the client's
 * capabilities says so with notifications/tools/list_changed). The kinds a
 * list_changed names are kept (CONN_TOOLS, CONN_PROMPTS, CONN_RESOURCES),
 * for the first CONN_SETTLE_MAX seconds after `initialized` only.
 */
enum { CONN_TOOLS = 1, CONN_PROMPTS = 2, CONN_RESOURCES = 4 };
#define CONN_SETTLE_QUIET 0.25   /* lists settle this long after the last list_changed */
#define CONN_SETTLE_MAX 2.0      /* ... and never later than this after initialized */

/* The lists settled (CHANGED 0), or a list_changed named CHANGED. */
typedef void (*conn_settle_fn)(struct conn *c, unsigned changed, void *arg);

/*
 * Calls FN once (from the loop, or at once): with the kinds named by a
 * list_changed since they were last cleared, if any (the caller lists
 * them again and calls conn_settle again); else with 0 once
 * CONN_SETTLE_QUIET passed without one (counted from `initialized` when
 * none came), or CONN_SETTLE_MAX after `initialized`, or at once when the
 * chain declared no listChanged. Replaces an earlier FN not yet called.
 */
void conn_settle(struct conn *c, conn_settle_fn fn, void *arg);

/* Forgets the list_changed of KINDS (their list is being asked for). */
void conn_changed_clear(struct conn *c, unsigned kinds);

/* Prints "mcp-chain: " and the message on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Takes P's stderr from proc's line logging and copies it to ours as it
 * comes, unchanged, through W; cli_pass_stderr_stop closes it.
 */
void cli_pass_stderr(struct proc *p, ev_io *w);
void cli_pass_stderr_stop(ev_io *w);

/* Writes what W still holds, waiting for the fd (at exit only). */
void cli_drain(struct writer *w);

/* The error's message (borrowed) or "unknown error". */
const char *cli_error_message(json_t *error);

/*
 * conn_request_fn for sampling and elicitation: asks the user on the
 * terminal when stdin is one, else refuses with an error saying why.
 */
json_t *cli_ask_user(struct conn *c, const char *method, json_t *params, json_t **error,
		     void *arg);

/* The commands. Each returns the process exit code. */
int cli_list(const struct cli_opts *o);
int cli_call(const struct cli_opts *o);   /* call, read, prompt */
int cli_direct(const struct cli_opts *o);
int cli_replay(const struct cli_opts *o);



#endif
