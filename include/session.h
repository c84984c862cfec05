/*
 * session.h - FrontMCPServer: one client session, whatever its transport.
 *
 * A session is the MCP server the client talks to: it owns the lifecycle
 * (Uninitialized -> Initializing -> Ready -> Closing), negotiates the
 * protocol version, answers what the proxy itself must answer (initialize,
 * ping before the backend is up, server/discover, batches, invalid input)
 * and hands all other traffic to the chain. It holds no transport: the
 * front that created it passes a write function. Sessions are objects, so
 * an HTTP front can hold many at once.
 */
#ifndef MCPC_SESSION_H
#define MCPC_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "peer.h"
#include <sys/uio.h>

enum session_state {
	SESSION_UNINITIALIZED,
	SESSION_INITIALIZING,  /* initialize received, backend handshake running */
	SESSION_READY,
	SESSION_CLOSING,
};

struct msg;
struct msg_val;

/*
 * The edge between a session and its front, outward: each message the
 * session hands its front comes with what it is about, so that the front
 * routes it without reading it.
 */
enum session_out_kind {
	SESSION_OUT_RESPONSE,     /* answers the client's request ABOUT (NULL:
				   * it had no usable id) */
	SESSION_OUT_BATCH,        /* the answers to a batch (an array); ABOUT: one
				   * of its requests, NULL when none had an id */
	SESSION_OUT_PROGRESS,     /* progress of the client's request ABOUT */
	SESSION_OUT_REQUEST,      /* a server's request: ABOUT is the client's
				   * request it is part of, NULL when none or
				   * nothing tells */
	SESSION_OUT_NOTIFICATION, /* any other notification */
};

struct session_out {
	enum session_out_kind kind;
	const struct msg_val *about;  /* the client's request id as the client
				       * sent it (borrowed), or NULL */
	void *route;                  /* responses written while an input is
				       * handed in: that input's ROUTE (it
				       * answers it when its id routes nowhere,
				       * as for -32600 with no usable id); else
				       * NULL */
	int outcome;                  /* responses: 0 a result, 1 a JSON-RPC
				       * error, 2 a tool error */
	int error_code;               /* a JSON-RPC error's code when the
				       * session made it or it is a tree;
				       * else 0 */
	const struct iovec *iov;      /* the message: pieces of one line without
				       * "\n" (borrowed, for the call) ... */
	int n;
	json_t *tree;                 /* ... or, with IOV NULL, a tree (borrowed) */
};

/* Hands OUT (borrowed, for the call) to the front; returns 0 or -1. */
typedef int (*session_write_fn)(void *arg, const struct session_out *out);

struct session;

struct chain;

/* New session of CHAIN (borrowed) named NAME (copied) writing through WRITE. */
struct session *session_new(struct chain *chain, const char *name, session_write_fn write,
			    void *arg);


/*
 * Called when a request of the client ends without an answer (the client
 * cancelled it): ID (borrowed) is the request's id as the client sent it,
 * so that whatever waits for its response can stop waiting.
 */
typedef void (*session_unanswered_fn)(void *arg, const struct msg_val *id);

/* Sets the function told of requests that end unanswered. */
void session_set_unanswered(struct session *s, session_unanswered_fn fn);

/*
 * The edge inward. A line from the client (borrowed): a message (parsed
 * only if something reads it), a batch, or bytes that are not JSON
 * (answered with -32700). Returns true (it always handles the line).
 */
bool session_receive_line(struct session *s, const char *line, size_t len);

/*
 * A message the front has scanned already (msg_init_line: a message, or a
 * batch as a tree): M is stolen, its bytes borrowed for the call. What
 * answers it without a usable id goes out with ROUTE (the front's, given
 * back in session_out.route during this call only).
 */
void session_receive_msg(struct session *s, struct msg *m, void *route);

/* The client gave up its request ID (borrowed; its transport went away):
 * as its notifications/cancelled with REASON would. */
void session_cancel(struct session *s, const struct msg_val *id, const char *reason);

/*
 * A call of the front's own, made as the session's client would make it
 * (through every module, to where the client's would go): METHOD with
 * PARAMS (stolen). CB gets the response (borrowed) once, or never when the
 * session ends first; it is not written to the front. 0 or -1.
 */
int session_call(struct session *s, const char *method, json_t *params,
		 void (*cb)(void *arg, json_t *response), void *arg);

/*
 * How long (seconds) a call of a 2026-07-28 client waits for the client's
 * retry after an input_required result (default 300); then it is
 * cancelled at the backend and its requestState refused as expired.
 */
void session_set_input_ttl(struct session *s, double seconds);

/*
 * Whether a client that begins in the 2026-07-28 era may stay in it when
 * the backends behind speak only the handshake era (ALWAYS: "eras":
 * "both", the bridge), or is answered as they would answer it, so that a
 * dual-era client negotiates what it negotiates with them directly
 * (default).
 */
void session_offer_stateless(struct session *s, bool always);

/* The era the session's client began with (era.h: ERA_UNKNOWN before its
 * first request). */
int session_era(const struct session *s);

/* A stateless-era session's instance (what its requestStates name), or 0. */
uint64_t session_instance(const struct session *s);

/* Sets how the chain pauses and resumes reading from the client. */
void session_set_pause(struct session *s, void (*pause)(void *arg, bool paused));

/* Answers a line that could not be parsed or was too large; steals ERR. */
void session_reject(struct session *s, json_t *err);

/* Ends the session: open exchanges are cancelled with REASON. */
void session_close(struct session *s, const char *reason);

/* True while requests are open or the handshake is still running. */
bool session_busy(const struct session *s);

/*
 * True while a 2026-07-28 session holds a backend's requests that no call
 * carried, for the client's next call: a front whose sessions last one
 * call (HTTP) hands that call to this session.
 */
bool session_holds_requests(const struct session *s);

/*
 * The credential the client presented on its transport (an HTTP bearer
 * token; CRED of N bytes, copied), where modules read it
 * (mw_ctx.credential); a newer one replaces it (an OAuth client refreshes
 * its token). Whether it may (the same person) is the front's to check
 * first (mw_cred_check.subject). 0, or -1 out of memory. CRED NULL forgets
 * it. Never logged.
 */
int session_set_credential(struct session *s, const char *cred, size_t n);

/*
 * What the spans of the session's requests say of it (trace.h):
 * network.transport TRANSPORT ("pipe", "tcp": static) and mcp.session.id
 * TAG (copied; NULL: none).
 */
void session_set_trace_tags(struct session *s, const char *transport, const char *tag);

/*
 * The trace context the transport carried the next input with (HTTP
 * "traceparent" and "tracestate" headers; borrowed, NULL when absent): a
 * request without params._meta.traceparent is traced under it. Set before
 * session_receive_msg, cleared (NULLs) after it.
 */
void session_set_trace_context(struct session *s, const char *parent, const char *state);

/*
 * Continuing a session another instance began (or this one, before a
 * restart), without a new initialize from its client. session_resume_hold
 * makes what the client sends wait (as during a handshake) while the
 * front finds out what the session held; session_resume then initializes
 * the backends with PARAMS (borrowed: the client's initialize's params as
 * it sent them), as that initialize did, and tells them
 * notifications/initialized; nothing is written to the client. REPLAY
 * (borrowed; an array of {method, params}, or NULL) is what the session
 * had asked of them that lasts (its log level, its subscriptions), asked
 * again first, as calls of the front's own. What
 * waited is handled once the backends answer, or answered with their
 * error. 0, or -1 with WHY (N bytes; what waited is answered with it).
 */
void session_resume_hold(struct session *s);
int session_resume(struct session *s, json_t *params, json_t *replay, char *why, size_t n);

/* Frees a closed session. */
void session_free(struct session *s);

enum session_state session_state(const struct session *s);
const char *session_version(const struct session *s);
struct peer *session_peer(struct session *s);

/* Handshake-era protocol versions spoken, newest first, NULL-terminated
 * (era.h's list). */
extern const char *const *const session_versions;

/* True when V is one of session_versions. */
bool session_version_supported(const char *v);

#endif
