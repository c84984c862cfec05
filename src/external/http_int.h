/*
 * http_int.h - internals of the HTTP upstream transport, shared by
 * http_xfer.c (transfers, the inbox, delivery), be_http.c (Streamable
 * HTTP and the transport operations) and be_sse.c (legacy HTTP+SSE).
 *
 * Nothing reaches the chain from inside a libcurl callback: what a
 * transfer receives is parsed into messages that wait in the transport's
 * inbox; an ev_prepare watcher (the flush) hands them on at a safe point,
 * posts messages that were held back, and reports the transport down
 * after the messages that came before. libcurl's multi calls are made
 * only from the loop (curl_ev.h).
 */
#ifndef MCPC_HTTP_INT_H
#define MCPC_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "curl_dl.h"
#include <ev.h>
#include <jansson.h>

#include "backend.h"
#include "buf.h"
#include "curl_ev.h"
#include "param_headers.h"
#include "sse.h"

#define HTTP_ERRBODY_MAX 65536    /* bytes of an error reply kept */

enum hx_kind {
	HX_POST,      /* one message POSTed */
	HX_GET,       /* Streamable HTTP: the stream for server-initiated messages */
	HX_RESUME,    /* Streamable HTTP: a POST's stream resumed with Last-Event-ID */
	HX_DELETE,    /* Streamable HTTP: ending the session */
	HX_STREAM,    /* legacy HTTP+SSE: the event stream */
};

/* Who a POSTed message is for: the chain, or the transport itself. */
enum out_kind {
	OUT_CHAIN,        /* from the chain (send) */
	OUT_REINIT,       /* our initialize for a new session */
	OUT_REINIT_DONE,  /* our notifications/initialized after it */
	OUT_RELIST,       /* our tools/list after a -32020 (http_relist.c) */
};

/* A message to POST, serialized once and kept for one retry. */
struct out {
	char *body;             /* owned, compact JSON */
	size_t len;
	json_t *id;             /* owned: the request's id; NULL unless a request */
	enum out_kind kind;
	bool is_init;           /* an initialize request */
	bool is_initialized;    /* notifications/initialized */
	bool retried;           /* already sent again after a lost session */
	bool relisted;          /* already sent again after a -32020 */
	bool auth_retried;      /* already sent again after a 401 and a refresh */
	char *version;          /* owned: the 2026-07-28 era's protocol version
				 * the message states in its _meta, or NULL
				 * (handshake era: the session's headers apply) */
	char *method;           /* owned: its method (stateless era), or NULL */
	char *name;             /* owned: params.name / params.uri (stateless era), or NULL */
	char *traceparent;      /* owned: params._meta.traceparent / tracestate, */
	char *tracestate;       /* sent as HTTP headers too (trace.h); or NULL */
	unsigned resumes;       /* stream resumptions without progress */
	long retry;             /* the stream's reconnection delay (ms), or -1 */
	struct out *next;       /* in the held list */
};

struct be_http;
struct hx;

/* Called when a transfer ended (from the loop); the transfer is freed after. */
typedef void (*hx_done_fn)(struct hx *x, CURLcode rc);

/* One HTTP transfer. */
struct hx {
	struct curl_ev_xfer base;   /* first member */
	struct be_http *s;
	enum hx_kind kind;
	hx_done_fn on_done;
	struct out *msg;            /* owned: what a POST carries, what a resume is for */
	struct curl_slist *hdrs;    /* owned request headers */
	char err[CURL_ERROR_SIZE];
	long status;                /* HTTP status; 0 before (or without) a reply */
	bool sse;                   /* the reply is text/event-stream */
	bool got_response;          /* the response to msg arrived */
	bool dispatched;            /* an event with data arrived */
	bool oversize;              /* a JSON body passed maxMessageBytes */
	bool refused;               /* the reply was not of the kind expected */
	bool paused;                /* its write callback asked libcurl to pause */
	bool sent_session;          /* carried Mcp-Session-Id */
	unsigned gen;               /* the session generation it was sent in */
	char *session;              /* owned: Mcp-Session-Id of the reply */
	char *start_id;             /* owned: the Last-Event-ID it sent */
	char *www_auth;             /* owned: the reply's WWW-Authenticate, or NULL */
	char why[160];              /* why it was refused */
	struct buf body;            /* a JSON reply, or the head of an error reply */
	struct sse parser;
	ev_timer wait;              /* a delayed start */
	struct hx *prev, *next;     /* in the transport's list */
};

/* A message waiting in the inbox. */
struct in_msg {
	json_t *msg;                /* owned */
	size_t bytes;
	struct in_msg *next;
};

/* What differs between Streamable HTTP and legacy HTTP+SSE. */
struct http_mode {
	/* Starts a POST of O (taken on success); 0 or -1. */
	int (*post)(struct be_http *s, struct out *o);
	/* True when messages may be POSTed now (else they are held). */
	bool (*can_post)(struct be_http *s);
	/* Looks at a message before delivery; true when it was consumed. */
	bool (*intercept)(struct be_http *s, json_t *msg);
	/* An event other than "message" (inside libcurl); 0, or -1 to abort. */
	int (*named_event)(struct hx *x, const struct sse_event *ev);
};

extern const struct http_mode http_streamable, http_legacy;

/* The transport state of one backend. */
struct be_http {
	struct backend *b;
	const struct http_mode *mode;
	const char *name;           /* borrowed: the backend's name */
	const char *url;            /* borrowed from the config */
	size_t max;                 /* maxMessageBytes */
	struct hx *xfers;           /* every transfer, started or waiting */
	struct in_msg *in_head, **in_tail;
	struct out *held, **held_tail;
	ev_prepare flush;
	ev_idle kick;               /* one loop turn without blocking after a flush */
	bool paused;                /* the chain asked for flow control */
	bool stopping;              /* stop() was called */
	bool down;                  /* down for this run (maybe not reported yet) */
	bool down_pending;          /* backend_down still to be called */
	char why[200];
	/* Streamable HTTP */
	char *session;              /* owned: Mcp-Session-Id */
	unsigned gen;               /* bumped with every session change */
	char *proto;                /* owned: the negotiated protocol version */
	struct param_table params;  /* the tools' x-mcp-header marks (2026-07-28) */
	struct relist *relists;     /* owned: calls waiting for a fresh list */
	unsigned relist_seq;        /* numbers our tools/list requests */
	json_t *init_id;            /* owned: id of the chain's initialize in flight */
	json_t *init_params;        /* owned: its params, to start a new session */
	int reinit;                 /* REINIT_* */
	json_t *reinit_id;          /* owned: id of our own initialize */
	unsigned reinits;           /* new sessions since a request last succeeded */
	struct hx *get;             /* the GET stream (maybe waiting to reconnect) */
	char *get_last_id;          /* owned: its last event id */
	unsigned get_fails;
	bool get_off;               /* no GET stream: not offered, or given up */
	/* OAuth ("oauth" configured; http_oauth.c) */
	struct oauth_tokens *tok;   /* owned: the stored registration and tokens */
	struct oauth_refresh *refresh;  /* a refresh under way */
	bool login;                 /* perPrincipal without a usable token: it
				     * answers every request itself, with -32042
				     * (URL elicitation required: the login link) */
	bool signing_in;            /* tokens came: a session with the upstream is
				     * being started (the lists then changed) */
	char elicit_id[33];         /* the elicitation the -32042s name */
	bool single;                /* login: a single-user upstream's, asked of a
				     * client that declared URL elicitation */
	char *login_why;            /* single: the "needs login" of a client
				     * that did not */
	char *login_url;            /* single: the authorization URL, once known */
	json_t *url_waiters;        /* single: ids of requests waiting for it */
	bool url_asked;             /* single: the wiring was asked for it */
	/* legacy HTTP+SSE */
	char *endpoint;             /* owned: where to POST */
	struct hx *stream;
};

enum { REINIT_NONE, REINIT_WAIT, REINIT_NOTIFY };

/* --- http_xfer.c --- */

/* New transport state for B speaking MODE (not started); NULL when out of
 * memory. */
struct be_http *http_new(struct backend *b, const struct http_mode *mode);

/* Aborts everything and frees S. */
void http_free(struct be_http *s);

/* New message from MSG (borrowed); NULL when out of memory. */
struct out *out_new(json_t *msg, enum out_kind kind);
void out_free(struct out *o);

/*
 * New transfer of KIND to URL (borrowed) for S; takes MSG (may be NULL).
 * Common options and the configured headers are set; add more with
 * hx_header, then hx_start. NULL (MSG then still the caller's) on failure.
 */
struct hx *hx_new(struct be_http *s, enum hx_kind kind, const char *url, struct out *msg,
		  hx_done_fn on_done);

/* New POST of O (taken; NULL on failure, O then still the caller's). */
struct hx *hx_new_post(struct be_http *s, const char *url, struct out *o, hx_done_fn on_done);

/* Queues the messages of X's JSON reply body. */
void hx_push_body(struct hx *x);

/* Adds a request header "NAME: VALUE"; 0 or -1. */
int hx_header(struct hx *x, const char *name, const char *value);

/*
 * Adds the 2026-07-28 era's headers to X, a POST of a message stating that
 * era (x->msg->version): MCP-Protocol-Version, Mcp-Method and Mcp-Name
 * (the tool or prompt name, the resource URI), as the body says; no
 * session. 0 or -1.
 */
int hx_stateless_headers(struct hx *x);

/* Adds the Streamable HTTP headers (session, protocol version) to X. */
int hx_session_headers(struct hx *x, bool with_proto);

/*
 * Starts X after DELAY seconds (0: now). On failure X is freed (with its
 * message) and -1 returned; with a delay, a later failure ends X through
 * its done callback.
 */
int hx_start(struct hx *x, double delay);

/* Detaches and returns X's message. */
struct out *hx_take_msg(struct hx *x);

/* Aborts and frees a transfer (not from inside libcurl). */
void hx_abort(struct hx *x);

/* Aborts every transfer of S. */
void http_abort_all(struct be_http *s);

/* Queues MSG (stolen) for delivery. */
void http_push(struct be_http *s, json_t *msg, size_t bytes);

/* Answers O's request with a -32000 (or CODE) error and logs; borrows O. */
void http_fail(struct be_http *s, const struct out *o, int code, long status,
	       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Describes why X failed (curl's error, else RC's) into OUT. */
const char *hx_error(const struct hx *x, CURLcode rc);

/* The message of a JSON-RPC error in X's reply body, or NULL. */
const char *hx_reply_message(struct hx *x, char *out, size_t outlen);

/* X's reply body as a JSON-RPC error response to ID (borrowed): new, or NULL. */
json_t *hx_reply_error(struct hx *x, json_t *id);

/* Holds O until the mode can post. */
void http_hold(struct be_http *s, struct out *o);

/* Makes the flush run at the next safe point. */
void http_wake(struct be_http *s);

/* The transport is down for WHY: aborts it and reports after the inbox. */
void http_down(struct be_http *s, const char *why);

/* Frees the held messages. */
void http_drop_held(struct be_http *s);

/* ---- http_oauth.c: an upstream's OAuth tokens ---- */

/*
 * Reads the tokens kept for S's backend when it has "oauth". 0 (none
 * configured, or usable tokens), or BE_START_PERMANENT with the reason
 * ("needs login: ...") in WHY.
 */
int http_auth_load(struct be_http *s, char *why, size_t n);

/* Adds "Authorization: Bearer ..." to X when S has a token; 0 or -1. */
int http_auth_header(struct hx *x);

/* True when messages may be POSTed as far as the token goes; starts a
 * refresh (and says false) when the token is about to expire. */
bool http_auth_ready(struct be_http *s);

/*
 * X (a POST) was answered 401 or 403. True when that was handled here:
 * the message held for a refresh and one more try, or the transport down
 * with "needs login: ..." (also for an upstream without "oauth" that asks
 * for it, and for a step-up's insufficient_scope).
 */
bool http_auth_refused(struct be_http *s, struct hx *x);

/* Frees S's OAuth state. */
void http_auth_release(struct be_http *s);

/* While S needs its principal's login: answers MSG (borrowed, one message)
 * itself and returns true; false otherwise. */
bool http_auth_answer(struct be_http *s, json_t *msg);

/* The principal's tokens changed (backend_credentials_changed): signed in
 * (a session with the upstream starts: http_renew_session), or signed out
 * (down, and back needing login). */
void http_auth_reload(struct be_http *s);

/* The session http_renew_session started after a sign-in is up: the
 * client hears the lists changed and the elicitation completed. */
void http_auth_signed_in(struct be_http *s);

/* --- be_http.c --- */

/* Starts a session with the upstream with what the chain initialized S
 * with (after a sign-in); http_auth_signed_in follows once it is up. */
void http_renew_session(struct be_http *s);

/* ---- http_relist.c: a 2026-07-28 call refused for its headers ---- */

struct relist;

/*
 * True when X, a POST of O that failed with the error response ERR
 * (borrowed), is a 2026-07-28 tools/call refused with 400 / -32020
 * (HeaderMismatch) for the first time: its tool's x-mcp-header marks
 * changed since they were learned.
 */
bool relist_wanted(const struct out *o, const struct hx *x, json_t *err);

/*
 * Fetches the tool list again (every page, each answer teaching S the
 * marks as any tools/list answer does), then POSTs CALL once more with
 * headers made from them. CALL and REFUSAL (the error the client gets if
 * the list cannot be had) are stolen on success; 0, or -1 (both still the
 * caller's).
 */
int relist_begin(struct be_http *s, struct out *call, json_t *refusal);

/* Before delivery: true when MSG answered one of our tools/list (consumed). */
bool relist_intercept(struct be_http *s, json_t *msg);

/* Our tools/list POST X ended with RC. */
void relist_step_done(struct be_http *s, struct hx *x, CURLcode rc);

/* The client cancelled request RID (borrowed): its call is not sent again. */
void relist_cancel(struct be_http *s, json_t *rid);

/* Frees every pending relist of S. */
void relist_drop_all(struct be_http *s);

/* --- be_http.c / be_sse.c --- */

/* Starts the legacy event stream; 0 or -1 with the reason in the peer. */
int sse_start(struct be_http *s);

#endif
