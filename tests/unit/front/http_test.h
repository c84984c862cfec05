/*
 * http_test.h - what the HTTP front's unit tests share: the front started
 * in-process on 127.0.0.1 (an ephemeral port) over a chain with a fake
 * backend, and a plain-socket HTTP/1.1 client driven from the same loop.
 */
#ifndef MCPC_TEST_HTTP_TEST_H
#define MCPC_TEST_HTTP_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "chain.h"
#include "config.h"
#include "http_front.h"
#include "peer.h"

/* The fake backend: answers initialize with the client's version and
 * every request (on the loop's next turn) with {"echo": METHOD}, or a
 * tools/list with {"tools": TOOLS} when TOOLS is set. */
struct htb {
	struct peer peer;            /* must be first */
	json_t *got;                 /* messages sent to it (copies) */
	json_t *pending;             /* responses to send on the next turn */
	json_t *tools;               /* owned, or NULL */
	bool hold;                   /* do not answer requests */
};

extern struct chain *htt_chain;
extern struct htb htt_be;
extern struct http_front *htt_front;

/* Chain and backend; then the front with L (NULL: defaults, port 0) and
 * MAX message bytes. AUTH_TOKENS, when not NULL, adds an auth module
 * with that "tokens" array (JSON text). */
void htt_start(const struct cfg_listen *l, size_t max, const char *auth_tokens);
/* Frees the front, the chain and the backend. */
void htt_stop(void);

/* A response as read from the socket. */
struct hres {
	int status;
	char *head;                  /* the status line and headers (owned) */
	char *body;                  /* the body, de-chunked (owned) */
	size_t body_n;
};

/* Sends RAW (a whole request; it should say Connection: close) and reads
 * the response until the server closes. */
void htt_do(const char *raw, struct hres *out);
void hres_release(struct hres *r);

/* A request built from its parts: METHOD PATH with HEADERS (each ending
 * "\r\n", may be "") and BODY (may be NULL); Host is added unless HEADERS
 * has one. */
void htt_req(const char *method, const char *path, const char *headers, const char *body,
	     struct hres *out);

/* The value of header NAME in R (a static copy), or NULL. */
const char *hres_header(const struct hres *r, const char *name);
/* The body parsed as JSON (new reference), failing the test if it is not. */
json_t *hres_json(const struct hres *r);

/* An open connection (a stream). */
struct hconn {
	int fd;
	char *data;                  /* everything read so far, raw */
	size_t n;
	bool eof;
};

/* Sends the request and returns with its connection open. */
void htt_open(const char *method, const char *path, const char *headers, const char *body,
	      struct hconn *c);
/* Reads C until its bytes contain WANT (true) or it closes or SECONDS pass (false). */
bool htt_wait(struct hconn *c, const char *want, double seconds);
void htt_close(struct hconn *c);
/* Splits what C has read so far into OUT: status, head, body (de-chunked;
 * whole chunks only). */
void htt_parse(struct hconn *c, struct hres *out);

/* Runs the loop for SECONDS. */
void htt_run_for(double seconds);

/* Opens a Streamable HTTP session (initialize at VERSION with HEADERS);
 * its Mcp-Session-Id into SID (at least 64 bytes). */
void htt_initialize(const char *version, const char *headers, char *sid);

#endif
