/*
 * http_util.h - the pure parts of the Streamable HTTP front: header
 * checks (Host, Origin, Accept, Content-Type), session ids, SSE framing
 * and the table that routes a session's output to its HTTP streams.
 * Nothing here knows the HTTP layer or the loop, so all of it is unit
 * tested (tests/unit/front/test_http_util.c).
 */
#ifndef MCPC_HTTP_UTIL_H
#define MCPC_HTTP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hmap.h"
#include "msg.h"

/*
 * True when the Host header HOST names this server: localhost, 127.0.0.1
 * or [::1], with PORT or without a port, or one of EXTRA (NULL-terminated,
 * may be NULL; an entry without a port matches any port). A missing Host
 * (HTTP/1.0) is refused: NULL gives false.
 */
bool http_host_allowed(const char *host, unsigned port, char *const *extra);

/*
 * True when the Origin header ORIGIN may call us: absent (NULL: not a
 * browser), http(s)://localhost, 127.0.0.1 or [::1] with PORT, or exactly
 * one of EXTRA (NULL-terminated, may be NULL). "null" is refused.
 */
bool http_origin_allowed(const char *origin, unsigned port, char *const *extra);

/* True when the Accept header ACCEPT lists TYPE (exactly, q > 0). */
bool http_accepts(const char *accept, const char *type);

/* True when the Content-Type CT is application/json (parameters ignored). */
bool http_is_json_type(const char *ct);

/* Length of a session id's text: 128 random bits as hex. */
#define HTTP_SID_LEN 32

/* Writes a new session id (HTTP_SID_LEN hex digits and a NUL) from the
 * kernel's CSPRNG; returns 0 or -1. */
int http_sid_new(char out[HTTP_SID_LEN + 1]);

/* True when S has the shape of one of our session ids. */
bool http_sid_valid(const char *s);

/*
 * SSE event ids name the stream and the event's place in it: "S-N", S the
 * stream's number in its session (0: the session's GET stream; POST
 * streams count from 1) and N the event's number in that stream (from 1;
 * 0 is a POST stream's priming event). So they are unique across a
 * session's streams, and a Last-Event-ID says which stream to resume and
 * after which event.
 */

/*
 * Appends one SSE event carrying the line DATA (N bytes) to OUT: the id
 * "STREAM-SEQ", "event: message", data lines (a CR or LF in DATA starts a
 * new data line, so no input can end the event early) and the blank line.
 * Returns 0 or -1.
 */
int http_sse_event(struct buf *out, unsigned stream, uint64_t seq, const char *data, size_t n);

/*
 * Appends the head of a resumable stream to OUT: "retry: RETRY_MS" (when
 * not 0: how long a client waits before it reconnects) and, when PRIME,
 * the priming event -- id "STREAM-0" and an empty data line -- so that the
 * client holds an id before the first message. Returns 0 or -1.
 */
int http_sse_head(struct buf *out, unsigned stream, unsigned retry_ms, bool prime);

/* Reads an event id made by http_sse_event into *STREAM and *SEQ: 0, or
 * -1 when S is not one (NULL, another shape, out of range). */
int http_event_id_parse(const char *s, unsigned *stream, uint64_t *seq);

/*
 * The events of one SSE stream, oldest first, kept for a client that
 * resumes it (GET with Last-Event-ID). One implementation for both kinds
 * of stream: the GET stream keeps a copy of what its connection sent; a
 * POST stream's connection reads from the ring itself (http_ring_read),
 * so each event is held once, and a resume only moves the read position
 * back (http_ring_rewind). An event is "handed out" once its connection
 * took it. Owns the events.
 */
struct http_ring_ev;
struct http_ring {
	struct http_ring_ev *head, **tail;
	struct http_ring_ev *next;  /* the first event not wholly handed out; NULL: none */
	size_t off;                 /* bytes of NEXT already handed out */
	size_t bytes;               /* of every kept event */
	size_t unsent;              /* not yet handed out */
	size_t fresh;               /* never handed out (what a rewind queues
				     * again is not counted): a reader's backlog */
	uint64_t hw_seq;            /* how far it was ever handed out: event */
	size_t hw_off;              /* ... and bytes of it */
	uint64_t last;              /* the newest event's number (kept or not); 0: none */
};

void http_ring_init(struct http_ring *g);
/* Frees the events. */
void http_ring_release(struct http_ring *g);
/* Moves FROM's events into TO (whose own are freed); FROM is left empty. */
void http_ring_move(struct http_ring *to, struct http_ring *from);
/* Appends event SEQ, N bytes already framed (copied), not handed out
 * yet; 0 or -1. */
int http_ring_add(struct http_ring *g, uint64_t seq, const char *bytes, size_t n);
/* Appends the SSE event "STREAM-SEQ" carrying the line DATA (N bytes),
 * framed as http_sse_event does, straight into the ring (one allocation
 * of its exact size); 0 or -1. */
int http_ring_add_event(struct http_ring *g, unsigned stream, uint64_t seq, const char *data,
			size_t n);
/* Counts every event handed out (a ring that only keeps a copy). */
void http_ring_mark_sent(struct http_ring *g);
/* Hands out up to MAX bytes into OUT, oldest first; returns how many. */
size_t http_ring_read(struct http_ring *g, char *out, size_t max);
/* Hands out everything not yet handed out, appended to OUT; 0 or -1. */
int http_ring_drain(struct http_ring *g, struct buf *out);
/* Frees the oldest handed-out events while more than KEEP bytes are kept;
 * never the newest event (a stream's last answer stays for a resume). */
void http_ring_trim(struct http_ring *g, size_t keep);
/*
 * A client resumes after event AFTER: the kept events after it are to be
 * handed out (again), from the first. Returns how many that is; *LOST is
 * how many events after AFTER are no longer kept (trimmed: a gap).
 */
size_t http_ring_rewind(struct http_ring *g, uint64_t after, uint64_t *lost);

/*
 * The request methods /metrics names. A client's method is counted under
 * its name only when it is one of these (the MCP methods a client
 * sends), else as "other": a client cannot grow the set of label values.
 */
#define HTTP_NMETHODS 20
extern const char *const http_methods[HTTP_NMETHODS];  /* the last is "other" */
/* The index of METHOD in http_methods ("other" for NULL or unknown). */
unsigned http_method_index(const char *method);

/* The upper bounds (seconds) of the request latency histogram's buckets,
 * 100 us to 30 s; a last bucket, +Inf, is implied. */
#define HTTP_NBUCKETS 17
extern const double http_latency_bounds[HTTP_NBUCKETS];
/* The first bucket whose bound is at least SECONDS (HTTP_NBUCKETS: +Inf). */
unsigned http_latency_bucket(double seconds);

/*
 * The routing table of one session: which open HTTP stream waits for a
 * response (by the client's request id) or carries a request's progress
 * (by its progress token). Keys are msg_val_key encodings, so 1 and "1"
 * differ and an id's spelling does not matter. Values are borrowed.
 */
struct http_routes {
	struct hmap ids;
	struct hmap tokens;
};

void http_routes_init(struct http_routes *r);
void http_routes_release(struct http_routes *r);

/* Routes the response to ID (text) to STREAM; 1 when ID is already
 * routed (nothing changes), 0 stored, -1 error or not a valid id. */
int http_routes_add_id(struct http_routes *r, const struct msg_val *id, void *stream);

/* Routes progress with TOKEN (text) to STREAM; 0 or -1. */
int http_routes_add_token(struct http_routes *r, const struct msg_val *token, void *stream);

/* The stream for ID, removed from the table; NULL when none. */
void *http_routes_take_id(struct http_routes *r, const struct msg_val *id);

/* The stream waiting for ID (left in the table); NULL when none. */
void *http_routes_peek_id(const struct http_routes *r, const struct msg_val *id);

/* The stream for progress with TOKEN; NULL when none. */
void *http_routes_token(const struct http_routes *r, const struct msg_val *token);

/* Removes TOKEN if it routes to STREAM. */
void http_routes_drop_token(struct http_routes *r, const struct msg_val *token, void *stream);

/* Removes ID if it routes to STREAM; true when it did. */
bool http_routes_drop_id(struct http_routes *r, const struct msg_val *id, void *stream);

#endif
