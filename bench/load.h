/*
 * load.h: what mcp-bench-load's core (load.c: the operations, their checks
 * and the figures) and its Streamable HTTP transport (load_http.c: the
 * connections, the sessions, HTTP/1.1 and SSE framing) share.
 *
 * The core builds each JSON-RPC request and hands it to a transport; the
 * transport hands every JSON-RPC message it receives back to the core,
 * which checks it exactly as it checks a line read from a stdio child.
 */
#ifndef MCP_BENCH_LOAD_H
#define MCP_BENCH_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROG "mcp-bench-load"

/* A growable byte buffer. */
struct buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Make sure b has room for extra more bytes. */
void buf_reserve(struct buf *b, size_t extra);
/* Append n bytes at p to b. */
void buf_append(struct buf *b, const void *p, size_t n);
/* Append printf-formatted text to b. */
void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Monotonic clock in nanoseconds. */
int64_t now_ns(void);
/* Print a message to stderr and exit with status 2 (an HTTP server under
 * test is killed first). */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Remember the first fatal condition; the run stops at the next check. */
void set_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Count an error and describe the first few on stderr. */
void error_at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- load.c, called by the transport ---- */

/* A new request id for an initialize request (answered through
 * load_on_message like any other). */
long load_new_init(void);
/* One JSON-RPC message (len bytes, not NUL-terminated, borrowed) that the
 * server sent, received at t: checked and counted as on stdio. */
void load_on_message(const char *msg, size_t len, int64_t t);
/* The request id is about to be handed to write(2) at t. */
void load_on_write(long id, int64_t t);
/* True once request id has had its answer (or was given up). */
bool load_answered(long id);
/* The request id will never be answered (the error is already counted):
 * its operation ends, failed, at t. */
void load_on_lost(long id, int64_t t);
/* A session finished its handshake; dt ns after its initialize was sent. */
void load_on_session(int64_t dt);

/* ---- load_http.c: the Streamable HTTP transport ---- */

/* Set up the transport for URL (http://HOST:PORT/PATH), conns connections
 * (one per operation in flight) and sessions sessions (operation slot s
 * uses connection s and session s % sessions).  accept_sse: send
 * "Accept: application/json, text/event-stream" (what the specification
 * asks of a client); else "Accept: application/json". */
void http_init(const char *url, long conns, long sessions, bool accept_sse, const char *header);
/* Fail (fatal) unless nothing answers on the URL's port yet: the server
 * about to be started must be the one measured, not another listener. */
void http_check_port_free(void);
/* Wait until the server accepts a connection, until deadline (ns); fatal
 * if it does not or if process pid exits meanwhile. */
void http_wait_ready(pid_t pid, int64_t deadline);
/* Start the handshake (initialize, notifications/initialized) of sessions
 * [first, first + count), spread over the connections. */
void http_open_sessions(long first, long count);
/* True once every session asked for has finished its handshake. */
bool http_sessions_done(void);
/* Send the request id (body of len bytes) of operation slot slot: POSTed
 * on its connection in its session, at once or when the connection's
 * previous response has ended. */
void http_send(int32_t slot, long id, const char *body, size_t len);
/* One turn of the event loop: wait up to timeout_ms, then read and write. */
void http_pump(int timeout_ms);
/* Describe the requests still open into out (size bytes), for a message. */
void http_describe_open(char *out, size_t size);
/* Close every connection (sessions stay open on the server). */
void http_close_all(void);

/* What the transport counted, for the result line. */
struct http_counts {
	long resp_json;     /* operations answered in an application/json body */
	long resp_sse;      /* ... in a text/event-stream body */
	long events;        /* SSE events that carried data */
	long connects;      /* TCP connections opened */
	long status_other;  /* operation responses with a status other than 200 */
	int last_status;    /* that status, for the report */
};
/* The counts so far. */
struct http_counts http_counts(void);

#endif
