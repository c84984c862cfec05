/*
 * http_routes.c - the routing table of one session of the HTTP front (see
 * http_routes.h): a map from msg_val_key encodings to streams.
 */
#include "http_routes.h"

#include "rpc.h"

void http_routes_init(struct http_routes *r)
{
	struct hmap empty = HMAP_INIT;
	r->ids = empty;
}

void http_routes_release(struct http_routes *r)
{
	hmap_release(&r->ids);
}

/* Routes responses to ID to STREAM. */
int http_routes_add_id(struct http_routes *r, const struct msg_val *id, void *stream)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = id->n ? msg_val_key(id, key) : 0;
	return k ? hmap_add(&r->ids, key, k, stream) : -1;
}

/* Takes the stream waiting for ID. */
void *http_routes_take_id(struct http_routes *r, const struct msg_val *id)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = id->n ? msg_val_key(id, key) : 0;
	return k ? hmap_del(&r->ids, key, k) : NULL;
}

/* The stream waiting for ID. */
void *http_routes_peek_id(const struct http_routes *r, const struct msg_val *id)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = id->n ? msg_val_key(id, key) : 0;
	return k ? hmap_get(&r->ids, key, k) : NULL;
}

/* Drops ID when it routes to STREAM. */
bool http_routes_drop_id(struct http_routes *r, const struct msg_val *id, void *stream)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = id->n ? msg_val_key(id, key) : 0;
	if (!k || hmap_get(&r->ids, key, k) != stream)
		return false;
	hmap_del(&r->ids, key, k);
	return true;
}
