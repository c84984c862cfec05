/*
 * http_front.h - the Streamable HTTP front: many client sessions over
 * HTTP (MCP revisions 2025-03-26 to 2025-11-25 with sessions, 2026-07-28
 * without), on the loop.
 *
 * The HTTP/1.1 connections are http_conn.h's, on the loop: a request's
 * head is checked before its body is read, and a response stream waiting
 * for messages is asked again when the session's output resumes it. No
 * thread, no blocking call.
 *
 * Each Mcp-Session-Id is one struct session (session.h). What a session
 * writes goes to the POST that carried the request it answers (or whose
 * progress token it carries), else to the session's GET stream, else into
 * a bounded per-session backlog. docs/http-front.md has the design.
 */
#ifndef MCPC_HTTP_FRONT_H
#define MCPC_HTTP_FRONT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct chain;
struct cfg_listen;
struct http_front;

/*
 * Starts listening as L says (copied) for sessions of CHAIN; messages up
 * to MAX bytes. Logs the address it listens on (with the port it got
 * when L->port is 0). Returns NULL (logged) when it cannot.
 */
struct http_front *http_front_new(struct chain *chain, const struct cfg_listen *l, size_t max);

/* The port it listens on. */
unsigned http_front_port(const struct http_front *f);

/* Sets what /readyz asks: true when every backend is ready. */
void http_front_set_ready(struct http_front *f, bool (*ready)(void *arg), void *arg);

/*
 * Adds what /metrics shows beyond the front's own counters: FN appends
 * Prometheus text exposition lines to OUT (the chain's and backends'
 * counters, kept where they happen).
 */
struct buf;
void http_front_set_metrics(struct http_front *f, void (*fn)(struct buf *out, void *arg),
			    void *arg);

/*
 * Where each session's chain comes from (all three borrowed). MAKE is
 * asked when a session is created (a client's initialize, or a 2026-07-28
 * client's call: then CAPS, borrowed, is the canonical JSON text of the
 * capabilities that call declares, else NULL), with the serial number that names it in logs
 * ("session #SERIAL"): it returns the chain the session is to use -- the
 * one given to http_front_new, or one made for this session -- or NULL
 * with a reason in WHY (N bytes), which the client gets as a JSON-RPC
 * error: -32000 with HTTP 503 for a session, -32022 (unsupported protocol
 * version, so that a dual-era client falls back to initialize) with HTTP
 * 400 for a stateless call. WHY is empty on entry. SUBJECT (32 bytes,
 * borrowed) is who the session's bearer token stands for (the modules'
 * subject, else a hash of the token): the principal its own backends act
 * for; NULL without a token, and for a stateless call (whose chain is
 * shared by every call declaring the same capabilities).
 * RELEASE gets the chain back once the session was closed and freed (at
 * DELETE, idle expiry or shutdown); a chain made for the session is the
 * caller's to stop and free. Unset, every session uses the front's chain.
 */
typedef struct chain *(*http_chain_make_fn)(void *arg, unsigned serial, const char *caps,
					   const unsigned char *subject, char *why, size_t n);
typedef void (*http_chain_release_fn)(void *arg, struct chain *c, unsigned serial);
void http_front_set_session_chains(struct http_front *f, http_chain_make_fn make,
				   http_chain_release_fn release, void *arg);

/*
 * Ends the idlest handshake-era session that has a chain of its own (made
 * by the factory above) and nothing open -- no request, no stream -- to
 * make room for a new one; logged. False when there is none. The factory
 * asks it at its bound (listen.maxScopedSessions) before refusing.
 */
bool http_front_make_room(struct http_front *f);

/* Sessions open now. */
size_t http_front_sessions(const struct http_front *f);

/*
 * Begins a graceful stop: the listening socket closes, GET streams end,
 * new requests get 503; requests already open go on (http_front_busy).
 */
void http_front_drain(struct http_front *f);

/* /readyz answers 503 from now on (a drain is coming: the load balancer
 * is to send new sessions elsewhere); nothing else changes. */
void http_front_unready(struct http_front *f);

/*
 * Several instances as one service: session ids are sealed with KEYS[0]
 * of the N keys (copied), opened with any, begin with TAG (copied) and
 * are honoured MAX_AGE seconds; a request naming one this instance does
 * not hold continues the session here (docs/http-front.md). STORE_CLOSED:
 * a moved session is refused while Redis (redis_default) cannot say what
 * it held, else it goes on without it. N 0: random ids (the default).
 */
void http_front_set_cluster(struct http_front *f, const unsigned char (*keys)[32], size_t n,
			    const char *tag, double max_age, bool store_closed);

/*
 * The other instances (cluster.instances: TAGS[i] at base URL URLS[i],
 * both copied, NULL-terminated): a 2026-07-28 retry whose call another
 * instance holds is forwarded there. RS_CLOSED: a retry is refused (503)
 * while Redis cannot record its requestState's single use, else it goes
 * on unrecorded.
 */
void http_front_set_peers(struct http_front *f, char *const *tags, char *const *urls,
			  bool rs_closed);

/* Requests of every session still waiting for their response. */
size_t http_front_busy(const struct http_front *f);

/*
 * Stops accepting connections and ends every session with REASON: open
 * requests are cancelled, streams end. Idempotent.
 */
void http_front_stop(struct http_front *f, const char *reason);

/* How long a 2026-07-28 client's call waits for its retry (session_set_input_ttl). */
void http_front_set_input_ttl(struct http_front *f, double seconds);

/* Whether sessions that start afterwards offer 2026-07-28 whatever the
 * backends speak (session_offer_stateless). */
void http_front_offer_stateless(struct http_front *f, bool always);

/*
 * Extra GET routes under PREFIX (copied; "/oauth/"), served by FN (ARG
 * borrowed), after the Host and Origin checks every request has. A
 * request that carries a bearer token has it checked as /mcp's are (a
 * refused one is answered 401/403 here); one without reaches FN with no
 * subject. FN answers with http_route_reply, now or later (holding the
 * request meanwhile); it returns 0, or -1 to close the connection.
 */
struct http_route;
typedef int (*http_route_fn)(void *arg, struct http_route *q);
void http_front_set_routes(struct http_front *f, const char *prefix, http_route_fn fn,
			   void *arg);
/* The request's path (without the query), and the decoded value of query
 * parameter NAME or NULL (valid until the next call, or the request ends). */
const char *http_route_path(struct http_route *q);
const char *http_route_query(struct http_route *q, const char *name);
/* Who its bearer token stands for (32 bytes), or NULL without one. */
const unsigned char *http_route_subject(struct http_route *q);
/* Keeps Q past FN's return (an answer later); release it after. */
void http_route_hold(struct http_route *q);
void http_route_release(struct http_route *q);
/* Answers Q: STATUS, CTYPE (NULL: no body), BODY (N bytes, copied), EXTRA
 * header lines ("Name: value\r\n"..., or NULL). Nothing when its client
 * left. 0 or -1. */
int http_route_reply(struct http_route *q, unsigned status, const char *ctype,
		     const char *body, size_t n, const char *extra);

/*
 * The live page (/ui, docs/http-front.md): ASSETS (N, borrowed for the
 * front's life) are served at their paths to a GET after the Host and
 * Origin checks alone -- they hold no data. The data are checked as
 * /metrics is (Host, Origin, bearer token): GET /ui/state answers one
 * snapshot, GET /ui/events is an SSE stream of one at once and every
 * second ("event: snapshot"), and of what http_front_ui_send adds. SNAPSHOT
 * appends one JSON object to OUT (WITH_EVENTS: the first of a stream, and
 * /ui/state). At most HTTP_UI_STREAMS streams at once (then 503); a reader
 * that falls behind by more than HTTP_UI_BUFFER bytes is dropped. Unset
 * (listen.ui false), /ui is 404.
 */
#define HTTP_UI_STREAMS 16
#define HTTP_UI_BUFFER (1u << 20)
struct http_ui_asset {
	const char *path;            /* "/ui", "/ui/app.js" */
	const char *ctype;           /* "text/html; charset=utf-8" */
	const unsigned char *body;
	size_t n;
};
typedef void (*http_ui_snapshot_fn)(void *arg, struct buf *out, bool with_events);
void http_front_set_ui(struct http_front *f, const struct http_ui_asset *assets, size_t n,
		       http_ui_snapshot_fn snapshot, void *arg);
/* Sends DATA (N bytes of one JSON line) as "event: EVENT" to every /ui/events stream. */
void http_front_ui_send(struct http_front *f, const char *event, const char *data, size_t n);
/* Open /ui/events streams. */
size_t http_front_ui_streams(const struct http_front *f);

/*
 * One session as the live page lists it (every string borrowed for the
 * call). SID is the first 8 characters of its id only: the whole id is a
 * credential of its client's.
 */
struct http_session_info {
	unsigned serial;             /* "session #SERIAL" in the logs */
	char sid[9];
	const char *client;          /* clientInfo.name, or NULL */
	const unsigned char *subject;/* who its bearer token stands for (32
				      * bytes), or NULL */
	const char *version;         /* its protocol revision, or NULL before initialize */
	const char *transport;       /* "streamable", "sse" or "stateless" */
	const char *peer;            /* the client address that opened it */
	double age, idle;            /* seconds since it began, since its last request */
	size_t open;                 /* its requests waiting for their response */
};
/* FN(ARG, I) for each session open now (the set must not change meanwhile). */
void http_front_each_session(struct http_front *f,
			     void (*fn)(void *arg, const struct http_session_info *i), void *arg);

/*
 * The front's requests so far (what /metrics counts), by method: a JSON
 * object (new reference) {"tools/call": {"ok": N, "error": N, "tool_error":
 * N, "given_up": N, "seconds": S (the answered ones' durations summed),
 * "buckets": [N...] (the answered ones by latency_bounds)}, ...,
 * "latency_bounds": [seconds...]}, methods never seen left out.
 */
json_t *http_front_traffic(const struct http_front *f);

/* Stops (if needed) and frees everything. */
void http_front_free(struct http_front *f);

#endif
