/*
 * http_util.h - the pure parts of the Streamable HTTP front: header
 * checks (Host, Origin, Accept, Content-Type), session ids, SSE framing
 * and the table that routes a session's output to its HTTP streams.
 * Nothing here knows libmicrohttpd or the loop, so all of it is unit
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
 * Appends one SSE event carrying the line DATA (N bytes) to OUT: an id
 * line, "event: message", data lines (a CR or LF in DATA starts a new
 * data line, so no input can end the event early) and the blank line.
 * Returns 0 or -1.
 */
int http_sse_event(struct buf *out, uint64_t id, const char *data, size_t n);

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
