/*
 * http_routes.h - the routing table of one session of the HTTP front:
 * which of its open HTTP streams waits for the answer to a request (and
 * so carries its progress, and the server's requests that belong to it:
 * session_out.about names it). Knows neither HTTP nor the loop; unit tested
 * (tests/unit/front/test_http_routes.c).
 */
#ifndef MCPC_HTTP_ROUTES_H
#define MCPC_HTTP_ROUTES_H

#include <stdbool.h>

#include "hmap.h"
#include "msg.h"

/*
 * The routing table of one session: which open HTTP stream waits for a
 * response, by the client's request id. Keys are msg_val_key encodings,
 * so 1 and "1" differ and an id's spelling does not matter. Values are
 * borrowed.
 */
struct http_routes {
	struct hmap ids;
};

void http_routes_init(struct http_routes *r);
void http_routes_release(struct http_routes *r);

/* Routes the response to ID (text) to STREAM; 1 when ID is already
 * routed (nothing changes), 0 stored, -1 error or not a valid id. */
int http_routes_add_id(struct http_routes *r, const struct msg_val *id, void *stream);

/* The stream for ID, removed from the table; NULL when none. */
void *http_routes_take_id(struct http_routes *r, const struct msg_val *id);

/* The stream waiting for ID (left in the table); NULL when none. */
void *http_routes_peek_id(const struct http_routes *r, const struct msg_val *id);

/* Removes ID if it routes to STREAM; true when it did. */
bool http_routes_drop_id(struct http_routes *r, const struct msg_val *id, void *stream);

#endif
