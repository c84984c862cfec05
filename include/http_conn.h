/*
 * http_conn.h - HTTP/1.1 connections on the loop: the listening socket,
 * each connection's head and body (framed by http_parse.h, to the
 * letter), its response (whole, or streamed as the application has
 * bytes for it), keep-alive, and the bounds that keep a client from
 * claiming what the server has not granted: connections, time, and the
 * memory of bodies being received.
 *
 * One connection serves one request at a time (a pipelined request waits
 * in the input until the response before it is written). The application
 * (the HTTP front) sees a request through struct hc_handler's callbacks
 * and answers it with hc_reply or hc_stream, at once or later; nothing
 * here knows MCP. Every write happens before the loop sleeps (an
 * ev_prepare of the highest priority), so the lines one loop iteration
 * produced for a connection leave in one write(2).
 */
#ifndef MCPC_HTTP_CONN_H
#define MCPC_HTTP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "buf.h"

struct hc_server;
struct hc_conn;

/* What a stream's reader returns beside a byte count. */
#define HC_READ_WAIT 0           /* nothing now: asked again after hc_resume */
#define HC_READ_END (-1)         /* the response is complete */
#define HC_READ_ERROR (-2)       /* abandon the response: close the connection */

/* Fills OUT (at most MAX bytes) with the next bytes of a streamed response. */
typedef ssize_t (*hc_read_fn)(void *ctx, char *out, size_t max);

struct hc_handler {
	/*
	 * A request's head is in (hc_method, hc_path, hc_header ...). The
	 * handler answers now (hc_reply, hc_stream), asks for the body
	 * (hc_read_body: on_body follows), or neither: it answers later and
	 * calls hc_resume then. Returns 0, or -1 to close the connection.
	 */
	int (*on_head)(void *arg, struct hc_conn *c);
	/* The body hc_read_body asked for is whole in BODY: the handler may
	 * take its memory (moving the struct and zeroing *BODY). 0 or -1. */
	int (*on_body)(void *arg, struct hc_conn *c, struct buf *body);
	/* hc_resume was called for C while its request had no response:
	 * answer now, or not yet. 0 or -1 (close). */
	int (*on_resume)(void *arg, struct hc_conn *c);
	/* The request C carried ended: OK when its response was written
	 * whole, false when the connection ended first. CTX is what
	 * hc_set_ctx gave it (called only when one was set); C is not to be
	 * used after this. */
	void (*on_end)(void *arg, struct hc_conn *c, void *ctx, bool ok);
	/*
	 * The layer refuses C's request itself with STATUS (bad framing 400,
	 * 413, 414, 417, 431, 501, 505; 503 when bodies in flight are over
	 * their budget or connections over the bound) because of WHY: the
	 * handler queues the answer with hc_reply (the connection closes
	 * after it). NULL: a plain-text answer.
	 */
	void (*on_refuse)(void *arg, struct hc_conn *c, unsigned status, const char *why);
};

struct hc_limits {
	unsigned max_conns;          /* connections served at once; beyond it an
				      * idle one is closed to make room, or the new
				      * one is hc_over; the listening socket is not
				      * watched beyond HC_OVERFLOW more until one
				      * closes */
	double timeout;              /* seconds: a head must arrive whole within
				      * it, an idle connection closes after it,
				      * and so does a body or a response that
				      * makes no progress for it */
	size_t max_head;             /* bytes of a request's head (431 above) */
	uint64_t max_body;           /* bytes of one body (413 above) */
	uint64_t body_budget;        /* bytes of all bodies being received at
				      * once (503 above) */
};

#define HC_OVERFLOW 16

/*
 * Listens on SA (LEN bytes) with LIMITS (copied); H and ARG (borrowed)
 * handle the requests. NULL (logged) when it cannot. *PORT gets the port
 * bound (for a port 0 request).
 */
struct hc_server *hc_server_new(const struct sockaddr *sa, socklen_t len,
				const struct hc_limits *limits, const struct hc_handler *h,
				void *arg, unsigned *port);

/* Closes the listening socket: no new connection; the open ones go on
 * (kept alive: the handler refuses what it no longer takes). */
void hc_server_quiesce(struct hc_server *s);

/* Quiesces, and closes each connection once its answer is written (idle
 * ones now; one whose request head has begun to arrive is not idle: that
 * request is answered first, within the timeout). */
void hc_server_stop(struct hc_server *s);

/* Closes every connection (on_end(false) for requests open) and frees S. */
void hc_server_free(struct hc_server *s);

/* Connections open. */
unsigned hc_server_conns(const struct hc_server *s);
/* Responses sent by status (100-599), and body bytes received and sent. */
unsigned long long hc_server_responses(const struct hc_server *s, unsigned status);
unsigned long long hc_server_bytes_in(const struct hc_server *s);
unsigned long long hc_server_bytes_out(const struct hc_server *s);

/* ---- the request a connection carries ---- */

/* Its method ("GET"), path (without the query), and the decoded value of
 * query parameter NAME (NULL when absent): NUL-terminated, valid until
 * the request ends. */
const char *hc_method(const struct hc_conn *c);
const char *hc_path(const struct hc_conn *c);
const char *hc_query(struct hc_conn *c, const char *name);
/* The first header NAME (case-insensitive), NUL-terminated, or NULL. */
const char *hc_header(const struct hc_conn *c, const char *name);
/* The request's header field I (0 ...): false past the last; *NAME (of
 * *NLEN bytes, not NUL-terminated) and *VALUE (NUL-terminated) borrowed
 * while the head is. */
bool hc_header_at(const struct hc_conn *c, size_t i, const char **name, size_t *nlen,
		  const char **value);
/* True when the request has a body (Content-Length > 0, or chunked);
 * *LENGTH its announced length, or UINT64_MAX when chunked. */
bool hc_has_body(const struct hc_conn *c, uint64_t *length);
/* The client's address as text ("127.0.0.1", "::1"). */
const char *hc_peer(const struct hc_conn *c);
/* True when C is one of the connections beyond max_conns: the handler
 * answers it 503 (but for what must answer under load, as health checks);
 * the connection closes after. */
bool hc_over(const struct hc_conn *c);

/* Attaches the handler's context to C's request (given back by on_end). */
void hc_set_ctx(struct hc_conn *c, void *ctx);
void *hc_ctx(const struct hc_conn *c);

/* Reads the request's body (sending "100 Continue" first when the client
 * waits for it); on_body follows. From on_head, or later (on_resume). */
void hc_read_body(struct hc_conn *c);

/*
 * Queues the complete response STATUS with HEADERS (each "Name: value\r\n",
 * may be NULL) and BODY (N bytes, copied). A request whose body was not
 * read closes its connection after it.
 */
int hc_reply(struct hc_conn *c, unsigned status, const char *headers, const char *body,
	     size_t n);

/* The same with the body in BODY, whose memory C takes (BODY is left
 * empty): the bytes go to the socket from where they are. */
int hc_reply_buf(struct hc_conn *c, unsigned status, const char *headers, struct buf *body);

/*
 * Starts the response STATUS with HEADERS whose body READ gives, piece by
 * piece (chunked in HTTP/1.1; HTTP/1.0 ends it by closing), READ's CTX
 * being the request's context. READ is asked when the connection can
 * take more, and again after hc_resume once it said HC_READ_WAIT. For a
 * HEAD request READ is never asked (the answer has no body).
 */
int hc_stream(struct hc_conn *c, unsigned status, const char *headers, hc_read_fn read);

/* Something new for C: its reader is asked again (or on_resume called,
 * when it has no response yet) before the loop sleeps. */
void hc_resume(struct hc_conn *c);

#endif
