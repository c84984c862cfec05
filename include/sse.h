/*
 * sse.h - a Server-Sent Events parser (the "event stream interpretation"
 * of the HTML standard) for bytes that arrive in arbitrary chunks.
 *
 * Lines end with "\r\n", "\n" or "\r", also when the two bytes of a
 * "\r\n" arrive in different chunks. A blank line ends an event; "data:"
 * lines join with "\n"; "event:" names the type (default "message");
 * "id:" sets the stream's last event id, which outlives the event (it is
 * what a client sends back as Last-Event-ID); "retry:" with only digits
 * sets the reconnection delay; a line starting with ":" is a comment. An
 * event with no data is not dispatched (its id still counts), and a last
 * event without its blank line is dropped at the end of the stream.
 *
 * Memory is bounded: an event whose data exceeds the bound is not
 * buffered whole; it is reported once, oversized, with its first bytes
 * kept so that the caller can still find a request id in them.
 */
#ifndef MCPC_SSE_H
#define MCPC_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define SSE_PREFIX 4096   /* bytes of an oversized event's data kept */

/* One dispatched event; every pointer is borrowed, valid during the call. */
struct sse_event {
	const char *type;   /* "message" unless an event: field said otherwise */
	const char *data;   /* the data, NUL-terminated; the prefix when oversize */
	size_t len;         /* bytes at data */
	size_t total;       /* the whole data's length (> len only when oversize) */
	bool oversize;
	const char *id;     /* the stream's last event id, or NULL */
};

/* Receives each event; returns 0 to go on, -1 to stop parsing. */
typedef int (*sse_event_fn)(const struct sse_event *ev, void *arg);

struct sse {
	struct buf line;     /* the line being read */
	struct buf data;     /* the event's data so far */
	char *type;          /* owned: the event's type, or NULL */
	char *id;            /* owned: the last event id, or NULL */
	long retry;          /* reconnection delay in ms; -1 until one is given */
	size_t max;          /* largest event data accepted */
	size_t line_total;   /* length of the current line (also past the bound) */
	size_t data_total;   /* length of the event's data (also past the bound) */
	bool line_over;      /* the current line outgrew the bound */
	bool data_over;      /* the event's data outgrew the bound */
	bool after_cr;       /* the last line ended in "\r": skip a leading "\n" */
	bool first_line;     /* a byte-order mark may start the stream */
};

/* Prepares P for events of at most MAX bytes of data. */
void sse_init(struct sse *p, size_t max);

/* Frees what P holds. */
void sse_release(struct sse *p);

/*
 * Parses N bytes at CHUNK, calling FN for every complete event. Returns 0,
 * or -1 when FN asked to stop or memory ran out.
 */
int sse_feed(struct sse *p, const char *chunk, size_t n, sse_event_fn fn, void *arg);

#endif
