/*
 * trace.h - OpenTelemetry traces: W3C Trace Context, spans, and their
 * export as OTLP/HTTP JSON to a collector, on the loop.
 *
 * The core's: it knows spans and contexts, not who makes them. The chain
 * opens a SERVER span for a client's request and a CLIENT span for the
 * request it forwards to a backend (chain.c); modules' decisions reach the
 * server span as events through observe.h; log lines carry the trace id of
 * the request in hand (log.c).
 *
 * One tracer at a time is in use (trace_use): the hooks test
 * trace_active(), one branch, and do nothing more when it is NULL. A
 * request whose trace is not sampled gets no span and is left as it came.
 *
 * Ended spans wait in a bounded queue (queueSize; one more is dropped and
 * counted) and leave in batches of batchSize, every exportInterval or when
 * a batch is full, one export in flight at a time, bounded by
 * exportTimeout (fetch.h): a slow or absent collector costs the queue and
 * nothing else.
 */
#ifndef MCPC_TRACE_H
#define MCPC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* A traceparent's text: "00-" 32 hex "-" 16 hex "-" 2 hex. */
#define TRACE_PARENT_LEN 55
/* A tracestate longer than this is not passed on (W3C: at least 512 kept). */
#define TRACE_STATE_MAX 512

/* A span context: where a span sits in its trace. */
struct trace_ctx {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;                 /* bit 0: sampled */
	char state[TRACE_STATE_MAX + 1];  /* tracestate, "" when none */
};

enum span_kind { SPAN_SERVER = 2, SPAN_CLIENT = 3 };

struct span;
struct tracer;

/* The tracer in use, or NULL (telemetry off): the hooks' one branch. */
extern struct tracer *trace_current;
static inline bool trace_active(void) { return trace_current != NULL; }

/*
 * Parses a traceparent header value S (N bytes): version 00 exactly as
 * specified, a later version by its first four fields. Returns 0 and
 * fills OUT's ids and flags, or -1 when it is invalid (lengths, lowercase
 * hex, version ff, all-zero ids). OUT's state is left alone.
 */
int trace_parent_parse(const char *s, size_t n, struct trace_ctx *out);

/* Writes C as a version 00 traceparent into OUT (TRACE_PARENT_LEN + 1 bytes). */
void trace_parent_format(const struct trace_ctx *c, char *out);

/* Sets C's tracestate to S (N bytes) when it is printable and short enough
 * to keep; else clears it. */
void trace_state_set(struct trace_ctx *c, const char *s, size_t n);

/* The lowercase hex of N bytes at P into OUT (2N + 1 bytes). */
void trace_hex(const uint8_t *p, size_t n, char *out);

/*
 * The sampling decision for a span whose parent is PARENT (NULL: a trace
 * started here): the parent's sampled flag, else RATIO (0 to 1) of new
 * traces.
 */
bool trace_should_sample(const struct trace_ctx *parent, double ratio);

/*
 * A tracer for C (borrowed for the call: copied). NULL with WHY (N bytes)
 * when the endpoint cannot be used.
 */
struct tracer *tracer_new(const struct cfg_telemetry *c, char *why, size_t n);

/* Makes T the tracer in use (NULL: off). */
void trace_use(struct tracer *t);

/*
 * Exports what T holds and runs the loop until it is gone or WAIT seconds
 * passed (at shutdown: never longer).
 */
void tracer_flush(struct tracer *t, double wait);

/* Frees T: its queue, the export in flight (cancelled); stops using it. */
void tracer_free(struct tracer *t);

/* Counters for /metrics (zero without a tracer). */
struct trace_stats {
	unsigned long long exported;   /* spans a collector took (2xx) */
	unsigned long long dropped;    /* spans dropped: the queue was full */
	unsigned long long failed;     /* exports that failed (no answer, not 2xx) */
	size_t queued;                 /* spans waiting now */
};
void trace_stats(const struct tracer *t, struct trace_stats *out);

/*
 * Starts a span of the tracer in use: NAME (copied; NULL: none yet, for
 * span_rename once the trace is known to be sampled), KIND, under PARENT
 * (NULL: a new trace). NULL when there is no tracer, the trace is not
 * sampled, or out of memory: every span function takes NULL and does
 * nothing then.
 */
struct span *span_start(const char *name, enum span_kind kind, const struct trace_ctx *parent);

/* S's own context (its trace, its span id, its flags, the parent's state). */
const struct trace_ctx *span_ctx(const struct span *s);

/* S's trace id as 32 lowercase hex digits (borrowed from S), or NULL for NULL. */
const char *span_trace_hex(const struct span *s);

/* Renames S (the subject is known later than the span's start). */
void span_rename(struct span *s, const char *name);

/* Attributes (KEY and string values copied; a string of N bytes). */
void span_attr_str(struct span *s, const char *key, const char *v);
void span_attr_strn(struct span *s, const char *key, const char *v, size_t n);
void span_attr_int(struct span *s, const char *key, long long v);
void span_attr_bool(struct span *s, const char *key, bool v);

/* An event now, NAME with up to three string attributes (NULL keys or
 * values are skipped). */
void span_event(struct span *s, const char *name, const char *k1, const char *v1,
		const char *k2, const char *v2, const char *k3, const char *v3);

/* Status ERROR with MESSAGE (copied; may be NULL). */
void span_error(struct span *s, const char *message);

/* True when S's status is ERROR already. */
bool span_failed(const struct span *s);

/* Ends S now (steals it): it joins the queue of the tracer in use, or is
 * freed when there is none or the queue is full. */
void span_end(struct span *s);

/* Drops S without exporting it (steals it). */
void span_discard(struct span *s);

#endif
