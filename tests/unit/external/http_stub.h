/*
 * http_stub.h - a scripted HTTP/1.1 server for the HTTP upstream tests.
 *
 * It listens on 127.0.0.1 (a port of the kernel's choosing) and runs on
 * libev's default loop in the test process, so a test drives both ends by
 * running the loop. Every request (method, path, headers, body) is kept in
 * order; the test's handler, called once per complete request, answers it
 * at once (stub_reply) or starts a response to finish later (stub_head,
 * stub_write, stub_close): an SSE stream kept open, a body in several
 * pieces, a connection closed mid-response. Every response says
 * "Connection: close", so each request has a connection of its own.
 *
 * One stub per process. Helpers fail the running cmocka test on error.
 */
#ifndef MCPC_HTTP_STUB_H
#define MCPC_HTTP_STUB_H

#include <stdbool.h>
#include <stddef.h>

/* One request as it arrived. */
struct stub_req {
	char method[16];
	char path[512];
	char *head;          /* the header lines, "Name: value\r\n"... */
	char *body;          /* NUL-terminated */
	size_t body_len;
	struct stub_conn *conn;
};

/* A connection; valid until stub_stop, even after it closed. */
struct stub_conn;

/* Called for each complete request R (borrowed) on C; ARG as given to stub_start. */
typedef void (*stub_fn)(struct stub_conn *c, const struct stub_req *r, void *arg);

/* Starts listening; returns the port. */
int stub_start(stub_fn fn, void *arg);

/* Closes every connection and the listener; forgets the requests. */
void stub_stop(void);

/* Requests received so far, and request I of them (0-based; NULL if none). */
size_t stub_count(void);
const struct stub_req *stub_get(size_t i);

/* Number of requests with METHOD. */
size_t stub_count_method(const char *method);

/*
 * The value of header NAME (any case) of R, copied into a static buffer,
 * or NULL when R has none.
 */
const char *stub_header(const struct stub_req *r, const char *name);

/* A whole response: STATUS, Content-Type CTYPE (NULL: none), EXTRA header
 * lines ("A: b\r\n"..., or NULL), BODY with its length; then closes. */
void stub_reply(struct stub_conn *c, int status, const char *ctype, const char *extra,
		const char *body);

/* The head of a response whose body follows with stub_write and ends
 * with stub_close (no Content-Length: the end is the close). */
void stub_head(struct stub_conn *c, int status, const char *ctype, const char *extra);

/* Writes TEXT on C (ignored once C is closed). */
void stub_write(struct stub_conn *c, const char *text);

/* Closes C (ignored when closed already). */
void stub_close(struct stub_conn *c);

/* True while C is open (the client has not closed it either). */
bool stub_open(const struct stub_conn *c);

/* A port nothing listens on (bound, then closed). */
int stub_dead_port(void);

#endif
