/*
 * http_ring.h - the kept events of one SSE stream of the HTTP front, for a
 * client that resumes it (GET with Last-Event-ID): a queue that is both
 * the stream's send queue and its replay buffer, bounded by trimming what
 * was handed out. Knows neither HTTP nor the loop; unit tested
 * (tests/unit/front/test_http_ring.c).
 */
#ifndef MCPC_HTTP_RING_H
#define MCPC_HTTP_RING_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

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
 * framed as sse_frame_event does, straight into the ring (one allocation
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

#endif
