/*
 * http_int.h - what the HTTP front's files share: http.c (the front
 * object and dispatch), http_stream.c (streams and replies), http_sess.c
 * (sessions and routing), http_probe.c (x-mcp-header marks),
 * http_stateless.c (a 2026-07-28 POST), http_auth.c (bearer tokens),
 * http_metrics.c (/metrics), http_legacy.c (the legacy HTTP+SSE
 * transport). Not an API: nothing outside src/front/http*.c includes it.
 */
#ifndef MCPC_HTTP_INT_H
#define MCPC_HTTP_INT_H
#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include "http_conn.h"

#include "buf.h"
#include "hmap.h"
#include "param_headers.h"
#include "http_front.h"
#include "http_check.h"
#include "http_ring.h"
#include "http_routes.h"
#include "http_sid.h"
#include "http_stats.h"
#include "sse_frame.h"
#include "middleware.h"
#include "msg.h"

#define JSON_TYPE "application/json"
#define SSE_TYPE "text/event-stream"
#define SID_HEADER "Mcp-Session-Id"
#define VERSION_HEADER "MCP-Protocol-Version"
#define HTTP_MAX_HEAD 16384   /* bytes of a request's head */

enum req_kind { REQ_POST, REQ_GET, REQ_DELETE, REQ_OTHER };

/* How a request ended, for /metrics: answered with a result, a JSON-RPC
 * error or a tool error, or given up (its client left and did not resume,
 * or the session ended first). */
enum req_outcome { REQ_OK, REQ_ERROR, REQ_TOOL_ERROR, REQ_GIVEN_UP, REQ_NOUTCOMES };

/* Which endpoint a request came to. */
enum http_ep { EP_MCP, EP_SSE, EP_MESSAGES, EP_ROUTE, EP_UI };

struct hsess;
struct session_out;

/* A line held for a GET stream that is not open. */
struct held {
	struct held *next;
	size_t n;
	char line[];
};

/* One HTTP request; a POST with requests, or a GET, is also a stream. */
struct hreq {
	struct mw_cred_wait auth_wait;   /* a credential check it waits for */
	unsigned char subject[32];       /* who its token stands for, when HAS_SUBJECT */
	bool has_subject;
	bool per_request;                /* its token is asked about again per request message */
	struct http_front *f;
	struct hc_conn *conn;
	enum req_kind kind;
	int refs;
	/* a 2026-07-28 retry in a cluster (http_cluster.c) */
	struct fetch *fwd;        /* forwarded to the instance holding its call */
	struct redis_op *rs_op;   /* its requestState's single use being recorded */
	unsigned char rs;         /* RS_*: where that stands */
	struct buf body;          /* the POST body, once whole */
	/* as a stream */
	struct hsess *sess;       /* NULL once detached */
	struct buf out;           /* bytes the reader has not taken */
	struct buf err;           /* a null-id error answered at once (400) */
	bool sse;
	bool queued;              /* its response is queued */
	bool done;                /* end once OUT is sent */
	bool aborted;             /* close the connection */
	bool deferred;            /* no response queued yet: what comes for it is
				   * held in FIRST until its first line shows
				   * whether one JSON body will do */
	unsigned status_hint;     /* stateless: the era's HTTP status for an error answer */
	struct buf first;         /* while deferred: its lines as they came, each
				   * ended by "\n" */
	size_t nfirst;            /* lines in FIRST */
	unsigned char head;       /* its SSE answer begins with: 0 nothing, 1 the
				   * retry hint, 2 that and the priming event
				   * (a resumable session's; stream_open_resumable) */
	char *sid;                /* owned: the Mcp-Session-Id a deferred answer
				   * to initialize carries, or NULL */
	size_t pending;           /* responses still awaited */
	bool lists_tools;         /* its body is one tools/list request */
	struct msg_val *ids;      /* the requests it carries (for cancellation) */
	size_t nids;
	struct msg msg;           /* its body, scanned once (scan_body), until
				   * the session takes it */
	bool scanned;
	struct hreq *next;        /* in the session's streams */
	enum http_ep ep;          /* the endpoint it came to */
	/* as a stream a client may resume (docs/http-front.md, "Resuming a stream") */
	unsigned stream_no;       /* names its events "STREAM-SEQ" (sse_frame.h) */
	uint64_t seq;             /* its last event's number */
	bool keep;                /* resumable: its events are kept in RING, which
				   * its connection reads from (OUT only has the
				   * head), and HOME's kept list holds a reference */
	bool primed;              /* an event id went out: its client can resume */
	bool parked;              /* its connection ended before it did: it waits
				   * up to resumeGraceMs for a GET to resume it */
	struct http_ring ring;
	struct hsess *home;       /* the session whose kept list holds it */
	struct hreq *knext;       /* in home->kept */
	ev_timer grace;           /* a parked stream's wait */
	/* /metrics: each request's method (an http_stats_methods index), and when
	 * the POST that carried them was read */
	unsigned char *methods;   /* parallel to IDS */
	double t0;
	struct hreq *pnext;       /* in f->probe_wait: a 2026-07-28 call held
				   * until the x-mcp-header marks are known */
	struct hreq *unext;       /* in f->ui_streams (EP_UI): a /ui/events stream */
};

struct hsess {
	struct http_front *f;
	char *sid;                /* owned: random, or sealed (http_sid.h) */
	size_t sid_len;
	bool resumed;             /* continued here from a sealed id */
	struct redis_op *resume_op;   /* while Redis says what it held */
	json_t *resume_params;    /* ... the initialize params to continue with */
	unsigned serial;          /* names it in logs: the id is a secret */
	struct session *s;
	struct http_routes routes;
	struct hreq *streams;
	struct hreq *get;         /* the GET stream, or NULL */
	struct held *held, **held_tail;
	size_t held_bytes;
	size_t held_dropped;      /* since a GET stream last opened */
	struct http_ring ring;    /* the GET stream's last events (stream 0) */
	uint64_t get_seq;         /* the GET stream's last event number */
	unsigned next_stream;     /* the last POST stream's number */
	struct hreq *kept;        /* its resumable POST streams (hreq.keep) */
	ev_timer idle;
	bool legacy;              /* HTTP+SSE (2024-11-05): one stream carries all */
	ev_timer reap;            /* ends a legacy session once its stream closed */
	struct chain *chain;      /* its chain: the front's, or one made for it */
	bool stateless;           /* a 2026-07-28 client's: no session id, one call */
	char *caps;               /* owned, when stateless: the capabilities its
				   * call declared (canonical JSON) */
	uint64_t instance;        /* its requestStates' instance, once registered */
	/* what the session caps count (listen.maxSessions*) */
	char peer[48];            /* the client address that opened it */
	unsigned char cred[32];   /* who its bearer token stands for (the
				   * modules' subject: a hash), when HAS_CRED */
	bool has_cred;
	double used;              /* ev_now of its last request */
	double born;              /* ev_now when it began (the live page's age) */
};

struct http_front {
	struct chain *chain;
	struct hc_server *hs;     /* the HTTP/1.1 connections */
	char *address, *path;
	char *sse_path, *messages_path;  /* legacy HTTP+SSE; NULL: off */
	char **origins, **hosts;
	unsigned port;
	unsigned max_conns;
	unsigned max_sessions, max_per_client, max_per_principal;
	double session_idle;
	size_t max_message, stream_buffer;
	double resume_grace;      /* seconds a dropped POST stream waits for a
				   * resume; 0: its requests are cancelled at once */
	unsigned retry_ms;        /* the SSE retry hint of resumable streams */
	bool stopped;
	bool draining;            /* no new connection, session or stream */
	struct hmap sessions;     /* sid -> hsess */
	struct http_sid_keys sealing;  /* sealed ids (cluster), NKEYS 0: random */
	unsigned char (*keys)[32];     /* owned: SEALING's keys */
	char *tag;                     /* owned: SEALING's tag */
	struct hmap gone;         /* sealed ids ended by their client's DELETE
				   * (refused from then on): sid -> expiry */
	double drain_delay;       /* seconds /readyz says 503 before draining */
	bool unready;             /* /readyz says 503: a drain has begun */
	bool store_closed;        /* cluster.onStoreDown "closed" (sessions) */
	bool rs_closed;           /* ... (requestState's single use) */
	char **peer_tags, **peer_urls;  /* owned: cluster.instances */
	struct hmap instances;    /* stateless: requestState instance -> hsess */
	struct param_table params; /* the x-mcp-header marks of the tools it lists */
	bool marks_known;         /* PARAMS learned a whole tools/list, served or
				   * fetched (a 2026-07-28 call is checked
				   * against them) */
	struct hsess *probe;      /* the session fetching the list for that, or NULL */
	json_t *probe_meta;       /* the _meta its requests carry (owned) */
	unsigned probe_pages;
	double probe_after;       /* a failed fetch is tried again from then (ev_now) */
	ev_timer probe_bound;     /* how long the fetch may take */
	struct hreq *probe_wait;  /* the calls held until it ends (a reference each) */
	http_chain_make_fn chain_make;       /* a session's own chain, if set */
	http_chain_release_fn chain_release;
	void *chain_arg;
	double input_ttl;         /* seconds a stateless call waits for its retry */
	bool offer_stateless;     /* session_offer_stateless for new sessions */
	unsigned serial;
	bool (*ready)(void *arg);
	void *ready_arg;
	char *route_prefix;       /* extra GET routes (http_front_set_routes), or NULL */
	http_route_fn route_fn;
	void *route_arg;
	struct buf line;          /* scratch: a message gathered into one line */
	void (*metrics)(struct buf *out, void *arg);  /* the rest of /metrics */
	void *metrics_arg;
	/* counted where they happen, read by /metrics (responses by status
	 * and bytes: the HTTP layer's) */
	/* Streamable HTTP requests by method (http_stats_methods) and how they
	 * ended; the answered ones' durations as a histogram */
	unsigned long long outcomes[HTTP_STATS_NMETHODS][REQ_NOUTCOMES];
	unsigned long long latency[HTTP_STATS_NMETHODS][HTTP_STATS_NBUCKETS + 1];
	double latency_sum[HTTP_STATS_NMETHODS];
	/* the live page (http_ui.c): NULL snapshot: /ui is off */
	const struct http_ui_asset *ui_assets;
	size_t ui_nassets;
	http_ui_snapshot_fn ui_snapshot;
	void *ui_arg;
	struct hreq *ui_streams;  /* the /ui/events streams open */
	size_t ui_nstreams;
	ev_timer ui_tick;         /* a snapshot to each, every second */
};

/* ---- http.c: the front object and dispatch ---- */

/* A header of C, or NULL. */
const char *hf_header(struct hc_conn *c, const char *name);
/*
 * Checks what the headers allow before any body is read: 0, or an HTTP
 * status with *WHY. Host and Origin first (DNS rebinding), then the method
 * (its kind into *KIND).
 */
unsigned hf_check_headers(struct http_front *f, struct hc_conn *c,
			  const char *method, enum req_kind *kind, const char **why);
/* Hands R's body to HS's session and queues what answers it (IS_INIT: an
 * initialize, answered with HS's Mcp-Session-Id). */
int hf_post_to_session(struct hreq *r, struct hsess *hs, bool is_init);

/* ---- http_stream.c: streams, their replies and their resumption ---- */

/* Drops a reference to R; frees it with the last. */
void http_stream_unref(struct hreq *r);
/* Something new for R: its connection takes it before the loop sleeps. */
void http_stream_wake(struct hreq *r);
/* Takes R out of its session: what it waited for is cancelled with
 * REASON (NULL: nothing is left to cancel). */
void http_stream_detach(struct hreq *r, const char *reason);
/* Ends R once what it holds is sent. */
void http_stream_finish(struct hreq *r);
/* Drops R's connection and R: the client stalled or left (its requests
 * are cancelled with REASON). May free R. */
void http_stream_abort(struct hreq *r, const char *reason);
/* R is no longer resumable: out of its session's kept list, its kept
 * events freed (those not taken yet move to OUT). May free R. */
void http_stream_kept_remove(struct hreq *r);
/* A parked stream's wait ended with no resume (R's grace timer). */
void http_stream_on_grace(struct ev_loop *loop, ev_timer *w, int revents);
/* R's client left (REASON) before R ended: parked when it may be resumed,
 * else dropped with its requests cancelled. May free R. */
void http_stream_lost(struct hreq *r, const char *reason);
/* A stateless call's first line O, while its HTTP status is not sent
 * yet: an error answer the era gives a status of its own sets it. */
void http_stream_defer_note(struct hreq *r, const struct session_out *o);
/* Appends one message line to the stream R (framed as SSE when r->sse);
 * a reader past streamBufferBytes is dropped. */
void http_stream_send(struct hreq *r, const char *line, size_t n);
/* The same for a message in N pieces (IOV), copied once where it can be. */
void http_stream_send_iov(struct hreq *r, const struct iovec *iov, int n);
/* Queues a complete response (CTYPE may be NULL: empty body); SID adds
 * Mcp-Session-Id. R may be NULL (a request of no stream). */
int http_stream_reply(struct hreq *r, struct hc_conn *c, unsigned status,
		      const char *ctype, const char *body, size_t n, const char *sid);
/* The same with EXTRA header lines ("Name: value\r\n"..., or NULL). */
int http_stream_reply_with(struct hreq *r, struct hc_conn *c, unsigned status,
			   const char *ctype, const char *body, size_t n, const char *sid,
			   const char *extra);
/* Queues STATUS with a JSON-RPC error body (id null) saying TEXT. */
int http_stream_reply_error(struct hreq *r, struct hc_conn *c, unsigned status,
			    int code, const char *text);
/* The same with EXTRA header lines (or NULL). */
int http_stream_reply_error_with(struct hreq *r, struct hc_conn *c, unsigned status,
				 int code, const char *text, const char *extra);
/* Queues R's stream response: SSE or a JSON body, as it comes (SID: NULL,
 * or the Mcp-Session-Id it carries). */
int http_stream_reply_stream(struct hreq *r, const char *sid);
/* A message for HS's GET stream: sent, or held (oldest dropped) until one
 * opens; a stateless session's goes to its call's own SSE stream. */
void http_stream_to_get(struct hsess *hs, const char *line, size_t n);
/* Frees the lines held for HS's GET stream. */
void http_stream_held_clear(struct hsess *hs);
/* A GET with Last-Event-ID of the GET stream's event SEQ: the kept events
 * after it go first on R. */
void http_stream_get_replay(struct hsess *hs, struct hreq *r, uint64_t seq);
/* R's response, now that something of it is there (or all of it): one
 * body, or a stream that begins with the lines held. */
int http_stream_reply_now_or_stream(struct hreq *r, const char *sid);
/* A GET G with Last-Event-ID naming event SEQ of HS's POST stream STREAM:
 * G takes that stream over (400 when HS keeps no such stream). */
int http_stream_resume_post(struct hsess *hs, struct hreq *g, unsigned stream,
			    uint64_t seq);

/* ---- http_sess.c: sessions, their caps and the routing of what they write ---- */

/* A new session; CAPS (borrowed): a 2026-07-28 call's capabilities
 * (http_sess_caps_key), NULL in the handshake era. NULL when it cannot be
 * made (the reason, if any, in WHY, N bytes). */
struct hsess *http_sess_new(struct http_front *f, const char *caps, const unsigned char *subject,
			    const char *sid, char *why, size_t n);
/* A new handshake-era session for the client of C (its chain from the
 * front's factory; room made under the session caps); NULL with the
 * reason in WHY (N bytes) when it cannot be made. */
struct hsess *http_sess_open(struct http_front *f, struct hc_conn *c, const char *sid,
			     char *why, size_t n);
/* ---- http_cluster.c: sessions any instance continues ---- */
/* The sealed id of a new session whose initialize R carries (owned), or
 * NULL: a random one (no cluster keys, or too much to carry). */
char *http_cluster_sid(struct http_front *f, struct hreq *r);
/* SID is not held here: continued here when it is sealed with the
 * deployment's keys (0 with *HS), else an HTTP status with *WHY. */
unsigned http_cluster_resume(struct http_front *f, struct hc_conn *c, const char *sid,
			     struct hsess **hs, const char **why);
/* Keeps what message M of HS changes that lasts (log level, subscriptions)
 * in the store, when there is one. */
void http_cluster_note(struct hsess *hs, struct msg *m);
/* SID's client deleted it: refused from now on (here; everywhere with
 * Redis). False when SID is not a sealed id of ours. */
bool http_cluster_delete(struct http_front *f, const char *sid);
/* A 2026-07-28 retry R (its body's ID, borrowed) carrying STATE (whose
 * call this instance holds when HELD_HERE): true when answered or held
 * here (*RC the handler's return): a state of ours held while Redis
 * records its single use, refused when used already, forwarded to the
 * instance holding its call; false to go on as on one instance (a
 * backend's own state passes). */
enum { RS_UNCHECKED, RS_CHECKING, RS_FIRST };
bool http_cluster_retry(struct http_front *f, struct hreq *r, const char *state, json_t *id,
			bool held_here, int *rc);
void http_cluster_free_peers(struct http_front *f);
/* R ends: its forward or record is let go. */
void http_cluster_req_end(struct hreq *r);
/* HS ends: what its continuation waited for is forgotten. */
void http_cluster_forget(struct hsess *hs);
void http_cluster_free(struct http_front *f);
/* Ends HS now, logging REASON: its streams end, its requests are
 * cancelled. Not from inside the session's own calls. */
void http_sess_end(struct hsess *hs, const char *reason);
/* Makes R a stream of HS. */
void http_sess_add_stream(struct hsess *hs, struct hreq *r);
/* The capabilities a 2026-07-28 call's PARAMS (borrowed) declare, as
 * canonical JSON (owned by the caller), or NULL when out of memory. */
char *http_sess_caps_key(json_t *params);
/* True when HS's POST streams may be resumed. */
bool http_sess_resumable(const struct hsess *hs);

/* ---- http_probe.c: the x-mcp-header marks ---- */

/* Learns the marks of a tools/list RESULT (borrowed) crossing the front. */
void http_probe_learn(struct http_front *f, json_t *result);
/* Holds the 2026-07-28 tools/call R (PARAMS borrowed) while the tool list
 * is fetched, when the marks are not known yet: true when held. */
bool http_probe_hold(struct http_front *f, struct hreq *r, json_t *params);
/* The fetch is over (WHY: NULL, or why it failed): the held calls go on. */
void http_probe_end(struct http_front *f, const char *why);
/* The fetch's bound passed (f->probe_bound's callback). */
void http_probe_on_bound(struct ev_loop *loop, ev_timer *w, int revents);

/* ---- http_stateless.c: a 2026-07-28 POST ---- */

/* A POST R without a session: true, with the reply in *RC, when it is of
 * the 2026-07-28 era (IS_DISCOVER: a server/discover); false otherwise. */
bool http_stateless_post(struct http_front *f, struct hreq *r, bool is_discover, int *rc);

/* ---- http_auth.c: bearer tokens, OAuth resource server ---- */

/* The bearer token of C's Authorization header (*N bytes), or NULL. */
const char *http_auth_bearer(struct hc_conn *c, size_t *n);
/* The SHA-256 of a bearer token TOK (N bytes) into OUT; 0 or -1. */
int http_auth_cred_key(const char *tok, size_t n, unsigned char out[32]);
/* http_auth_check's answer when it waits (R's check resumes later). */
#define HTTP_AUTH_PENDING 1u
/*
 * Asks the modules about C's bearer token for a request of METHOD (NULL:
 * the head, before any message) about TOOL: 0 accepted (R, when given,
 * keeps who it stands for), HTTP_AUTH_PENDING (only with R: R->auth_wait
 * calls READY when asking again will tell), or the status (401, 403,
 * 503) with the reply's *WHY and its WWW-Authenticate into CHALLENGE
 * (N bytes, header lines).
 */
unsigned http_auth_check(struct http_front *f, struct hc_conn *c, struct hreq *r,
			 const char *method, const char *tool, void (*ready)(struct mw_cred_wait *),
			 char *why, char *challenge, size_t n);
/* The check again for each request of R's scanned body M (a method or a
 * tool may need a scope): 0, or the status as http_auth_check gives it. */
unsigned http_auth_check_body(struct http_front *f, struct hreq *r, struct msg *m, char *why,
			      char *chal, size_t n);
/* Who R's bearer token stands for (as http_auth_bind binds it) into OUT:
 * true, or false when R carries none. */
bool http_auth_subject(struct hreq *r, unsigned char out[32]);
/* Binds R's bearer token to HS (modules read it); -1 when HS belongs to
 * someone else. */
int http_auth_bind(struct hsess *hs, struct hreq *r);
/* Serves GET of the OAuth Protected Resource Metadata (RFC 9728) at URL;
 * false when URL is not its path or no module validates OAuth tokens. */
bool http_auth_metadata(struct http_front *f, struct hc_conn *c, const char *url, int *rc);
/* Answers R (or C) with STATUS from http_auth_check: its challenge and WHY. */
int http_auth_refuse(struct hreq *r, struct hc_conn *c, unsigned status, const char *why,
		     const char *challenge);

/* ---- http_metrics.c: /metrics ---- */

/* The monotonic clock, in seconds (request durations). */
double http_metrics_now(void);
/* Counts the answer to R's request ID (OUTCOME: msg_outcome's) by method,
 * and how long it took since its POST. */
void http_metrics_count_answer(struct hreq *r, const struct msg_val *id, int outcome);
/* GET /metrics: Prometheus text (Host/Origin and auth checked). */
int http_metrics_serve(struct http_front *f, struct hc_conn *c);

/* ---- http_ui.c: the live page ---- */

/* True when URL is the live page's (and it is on). */
bool http_ui_path(const struct http_front *f, const char *url);
/* A request for URL of the live page: an asset, a snapshot or the stream. */
int http_ui_serve(struct http_front *f, struct hc_conn *c, const char *url, const char *method);
/* R, a /ui/events stream, ended: out of the front's list. */
void http_ui_end(struct hreq *r);
/* Ends every /ui/events stream (a drain or the stop) and the timer. */
void http_ui_stop(struct http_front *f);

/* ---- http_legacy.c ---- */

/* The endpoint of URL: EP_MCP for the Streamable HTTP path, the legacy
 * ones when they are on; -1 for none of ours. */
int http_legacy_endpoint(const struct http_front *f, const char *url);
/* GET on the legacy stream path: a new session whose stream R becomes. */
int http_legacy_open(struct http_front *f, struct hreq *r);
/* A complete POST to the legacy messages path: 202, answers on the stream. */
int http_legacy_post(struct http_front *f, struct hreq *r);
/* What a legacy session writes: all of it goes down its one stream. */
void http_legacy_route(struct hsess *hs, const char *line, size_t n);
/* The legacy stream R of HS closed: the session ends soon (not now: the
 * caller may be inside the session). */
void http_legacy_closed(struct hsess *hs, struct hreq *r);

#endif
