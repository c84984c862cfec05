/*
 * mw_test.h - helpers shared by the middleware modules' unit tests:
 * building pipelines from JSON (and expecting them to fail), walking one
 * message at a time through a pipeline as the chain would, reading what
 * came out, and running the default loop while a module works.
 *
 * Every helper fails the running cmocka test rather than returning an
 * error. Texts given to them are borrowed unless a comment says otherwise.
 */
#ifndef MCPC_MW_TEST_H
#define MCPC_MW_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "middleware.h"
#include "rpc.h"

/* ---- building ---- */

/* True when some error line contains TEXT. */
bool mwt_has_error(const struct cfg_errors *e, const char *text);

/*
 * Builds (does not start) a pipeline from the JSON array TEXT, errors into
 * E. Returns a new pipeline (the caller unrefs it) or NULL.
 */
struct pipeline *mwt_build(const char *text, struct cfg_errors *e);

/* Same from a printf-formatted array. */
struct pipeline *mwt_buildf(struct cfg_errors *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Builds a pipeline from TEXT that must build without an error, and does
 * not start it. Returns a new pipeline: the caller unrefs it.
 */
struct pipeline *mwt_build_ok(const char *text);

/* mwt_build_ok, and the pipeline must start. The caller unrefs it. */
struct pipeline *mwt_start_ok(const char *text);

/* mwt_start_ok from a printf-formatted array. The caller unrefs it. */
struct pipeline *mwt_start_okf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Asserts that TEXT does not build and that an error line contains WANT. */
void mwt_expect_error(const char *text, const char *want);

/*
 * Asserts that the one-module pipeline [{"use":USE,OPTS}] (OPTS: an
 * object's members as text) does not build, with an error containing WANT.
 */
void mwt_expect_module_error(const char *use, const char *opts, const char *want);

/* ---- messages ---- */

/*
 * TEXT parsed as JSON (any value), failing the test when it is not.
 * Returns a new reference: the caller frees it or hands it on.
 */
json_t *mwt_json(const char *text);

/*
 * Makes W carry TEXT (borrowed, kept alive by the caller) unparsed, as the
 * chain does for a scanned message: raw bytes and spans, msg NULL.
 * Returns false when the scanner declines TEXT.
 */
bool mwt_set_raw(struct mw_walk *w, const char *text);

/* ---- walking one message ---- */

/*
 * One message's walk, as the chain runs it: the walk, its context and
 * what done() reported. The walk comes first, so that done() finds the
 * run. A run owns ID, GOT, TEXT and CTX.SCRATCH; mwt_run_release frees
 * them. Strings the context points to (client, backend, name) are the
 * caller's and must outlive the run; METHOD is a copy.
 */
struct mwt_run {
	struct mw_walk w;         /* must be first */
	struct mw_ctx ctx;
	struct msg m;             /* the message walked (w.m points here) */
	char method[64];          /* ctx.method points here */
	char name[256];           /* and ctx.name, a copy as the chain keeps one:
				   * a module may free the message's own */
	json_t *id;               /* the requester's id, ctx.id borrows it (owned) */
	char *text;               /* a copy of the text walked unparsed (owned) */
	json_t *got;              /* the message done() last received (owned);
				   * NULL when nobody read an unparsed one */
	char *went_on;            /* then, a copy of the bytes it went on as
				   * (modules may have edited them), owned */
	char *went_on_id;         /* and of its spans: the id, the result */
	char *went_on_result;     /* (NULL when absent), owned */
	enum mw_verdict verdict;  /* the verdict done() last received */
	int done;                 /* how many times done() was called */
};

/*
 * What to walk and the context the chain would give it. Give the message
 * as MSG (stolen), or as TEXT (borrowed): parsed, or walked unparsed when
 * RAW (the run keeps its own copy of the text until it is released).
 */
struct mwt_msg {
	enum mw_dir dir;          /* forward: MW_TO_BACKEND unless told */
	enum rpc_kind kind;       /* forward: RPC_INVALID means "request when the
				   * message has an id, else notification" */
	const char *method;       /* forward: NULL means the message's own */
	const char *client;       /* forward: ctx.client, borrowed */
	const char *credential;   /* forward: ctx.credential (a transport's
				   * bearer token), borrowed; NULL: none */
	const char *backend;      /* ctx.backend, borrowed; back: NULL keeps it */
	const char *name;         /* forward: ctx.name, borrowed */
	double start;             /* forward: ctx.start */
	size_t bytes;             /* ctx.request_bytes, or response_bytes back */
	json_t *msg;              /* the message, stolen */
	const char *text;         /* or its text, borrowed */
	bool raw;                 /* walk TEXT unparsed, with the spans the
				   * scanner finds (it must accept TEXT) */
	bool unscanned;           /* with RAW: the bytes alone, no spans (as for
				   * a text the scanner declines) */
	mw_done_fn done;          /* forward: NULL means mwt_on_done; another
				   * must call mwt_on_done */
};

/*
 * The walk of the run W is over: records the verdict V and keeps MSG
 * (stolen; NULL when the message went on unread), freeing the one before.
 */
void mwt_on_done(struct mw_walk *w, enum mw_verdict v);

/*
 * Starts walking M forward through PL in R, which it overwrites: the
 * context is filled in as the chain does (a request's id from the message
 * goes to ctx.id). Returns what done() got so far (borrowed from R): NULL
 * when the walk is held by a module, or went on unread.
 */
json_t *mwt_forward(struct mwt_run *r, struct pipeline *pl, const struct mwt_msg *m);

/* mwt_forward, and asserts that done() came back at once. */
json_t *mwt_walk(struct mwt_run *r, struct pipeline *pl, const struct mwt_msg *m);

/*
 * Starts walking the response M back through the modules R's request
 * passed; ctx.outcome is read from the message, as the chain does.
 * Returns what done() got so far (borrowed from R).
 */
json_t *mwt_back(struct mwt_run *r, const struct mwt_msg *m);

/*
 * Asserts that R's request passed, walks the response M back and asserts
 * that done() came back at once. Returns what it got (borrowed from R).
 */
json_t *mwt_respond(struct mwt_run *r, const struct mwt_msg *m);

/*
 * Walks the client request METHOD with PARAMS (stolen; id 9) through PL
 * with mwt_walk; a tools/call is about the tool PARAMS name (ctx.name).
 * Returns what done() got (borrowed from R).
 */
json_t *mwt_request(struct mwt_run *r, struct pipeline *pl, const char *method, json_t *params);

/*
 * mwt_respond with the response MSG (stolen); WIRE is its size as
 * received. Returns what done() got (borrowed from R).
 */
json_t *mwt_respond_msg(struct mwt_run *r, json_t *msg, size_t wire);

/*
 * mwt_respond_msg with a response carrying RESULT (stolen) to the id R's
 * request went on with. Returns what done() got (borrowed from R).
 */
json_t *mwt_respond_result(struct mwt_run *r, json_t *result);

/*
 * Frees what R owns (GOT, ID, TEXT, CTX.SCRATCH) and zeroes R; tells the
 * modules nothing, so it may follow pipeline_unref for a walk left open.
 */
void mwt_run_release(struct mwt_run *r);

/*
 * Ends R as the chain ends an exchange: a request that passed and got no
 * response is abandoned (the modules it reached are told), then R is
 * released. Call it while R's pipeline is alive.
 */
void mwt_run_end(struct mwt_run *r);

/*
 * When R's message went on unread (got is NULL): the bytes it went on as,
 * parsed; a new reference (the caller frees it). NULL when it was read.
 */
json_t *mwt_went_on(const struct mwt_run *r);

/*
 * Asserts that A and B (a message a module handled unparsed and the same
 * handled as a tree) are the same but for their ids, which the chain sets
 * itself. Borrows both.
 */
void mwt_expect_same_but_id(json_t *a, json_t *b);

/*
 * Asserts that the message a list edit gave as bytes (BYTES) and the one
 * the same modules gave as a parsed tree (TREE) are the same but for
 * their ids (the parsed walk carries the test's own). When R's message
 * went on unread, also that the spans the chain splices from still hold
 * the id ID's text and BYTES' result. Borrows all.
 */
void mwt_expect_same_list(const struct mwt_run *r, json_t *bytes, json_t *tree,
			  const char *id);

/* The error code of the reply R got (0 when none). */
json_int_t mwt_error_code(const struct mwt_run *r);

/* The error message of the reply R got (borrowed), or NULL. */
const char *mwt_error_message(const struct mwt_run *r);

/* ---- reading JSON ---- */

/*
 * Member PATH of V (keys and array indexes, dot-separated), or NULL.
 * Borrowed from V.
 */
json_t *mwt_at(json_t *v, const char *path);

/* The string at PATH of V (borrowed from V), or NULL. */
const char *mwt_str_at(json_t *v, const char *path);

/* Asserts that V at PATH equals the JSON text WANT. */
void mwt_expect_json(json_t *v, const char *path, const char *want);

/* ---- the loop ---- */

/* Runs the default loop until *FLAG becomes nonzero or SECONDS pass. */
void mwt_run_until(const int *flag, double seconds);

/* Runs the default loop for SECONDS. */
void mwt_run_for(double seconds);

#endif
