/*
 * sse_frame.h - Server-Sent Events as the HTTP front writes them: one
 * JSON-RPC message an event, with an id that says which stream of the
 * session it belongs to and where in it, and the head of a resumable
 * stream. The reading side is sse.h. Pure, unit tested
 * (tests/unit/front/test_sse_frame.c) and fuzzed against sse.h (fuzz_http).
 *
 * SSE event ids name the stream and the event's place in it: "S-N", S the
 * stream's number in its session (0: the session's GET stream; POST
 * streams count from 1) and N the event's number in that stream (from 1;
 * 0 is a POST stream's priming event). So they are unique across a
 * session's streams, and a Last-Event-ID says which stream to resume and
 * after which event.
 */
#ifndef MCPC_SSE_FRAME_H
#define MCPC_SSE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "buf.h"

/*
 * Appends one SSE event carrying the line DATA (N bytes) to OUT: the id
 * "STREAM-SEQ", "event: message", data lines (a CR or LF in DATA starts a
 * new data line, so no input can end the event early) and the blank line.
 * Returns 0 or -1.
 */
int sse_frame_event(struct buf *out, unsigned stream, uint64_t seq, const char *data, size_t n);

/*
 * Appends the head of a resumable stream to OUT: "retry: RETRY_MS" (when
 * not 0: how long a client waits before it reconnects) and, when PRIME,
 * the priming event -- id "STREAM-0" and an empty data line -- so that the
 * client holds an id before the first message. Returns 0 or -1.
 */
int sse_frame_head(struct buf *out, unsigned stream, unsigned retry_ms, bool prime);

/* Reads an event id made by sse_frame_event into *STREAM and *SEQ: 0, or
 * -1 when S is not one (NULL, another shape, out of range). */
int sse_frame_id_parse(const char *s, unsigned *stream, uint64_t *seq);

/*
 * The same event in two steps, for a caller that frames it into memory of
 * its own (the ring: one allocation of the exact size). The id and type
 * lines of event STREAM-SEQ, written into ID once; then the event, counted
 * with OUT NULL and written into OUT (that many bytes) with the same
 * arguments. sse_frame_event is these two on a buf.
 */
#define SSE_FRAME_ID_MAX 64
/* Writes the id and type lines of event STREAM-SEQ into ID; their length. */
size_t sse_frame_id_lines(char id[SSE_FRAME_ID_MAX], unsigned stream, uint64_t seq);
/* Frames the event: ID (IDN bytes, from sse_frame_id_lines), DATA (N
 * bytes) as data lines, the blank line, into OUT; with OUT NULL only
 * counts. Returns its length. */
size_t sse_frame_write(char *out, const char *id, size_t idn, const char *data, size_t n);

/* Appends event STREAM-SEQ whose data is one message line in N pieces
 * (IOV; no CR or LF in them), copied once; 0 or -1. */
int sse_frame_event_iov(struct buf *out, unsigned stream, uint64_t seq, const struct iovec *iov,
			int n);

#endif
