/*
 * http_util.c - header checks, session ids, SSE framing and the routing
 * table of the Streamable HTTP front (see http_util.h).
 */
#include "http_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "rpc.h"

static const char *const loopback_names[] = { "localhost", "127.0.0.1", "[::1]", NULL };

/* True when [S, S+N) equals the NUL-terminated T, ignoring case. */
static bool span_ieq(const char *s, size_t n, const char *t)
{
	return strlen(t) == n && strncasecmp(s, t, n) == 0;
}

/* Splits "name[:port]" (name may be "[v6]"); *PORT is -1 without one. */
static bool split_host(const char *h, size_t *name_len, long *port)
{
	const char *colon = h[0] == '[' ? strchr(h, ']') : h;
	if (!colon)
		return false;
	colon = strchr(colon, ':');
	*port = -1;
	*name_len = colon ? (size_t)(colon - h) : strlen(h);
	if (!colon)
		return *name_len > 0;
	char *end;
	if (!colon[1])
		return false;
	*port = strtol(colon + 1, &end, 10);
	return *end == '\0' && *port >= 0 && *port <= 65535 && *name_len > 0;
}

/* True when HOST names us. */
bool http_host_allowed(const char *host, unsigned port, char *const *extra)
{
	size_t n;
	long p;
	if (!host || !split_host(host, &n, &p))
		return false;
	for (size_t i = 0; extra && extra[i]; i++) {
		if (strcasecmp(extra[i], host) == 0)
			return true;
		size_t en;
		long ep;
		if (split_host(extra[i], &en, &ep) && ep < 0 && span_ieq(host, n, extra[i]))
			return true;  /* an entry without a port: any port */
	}
	if (p >= 0 && (unsigned long)p != port)
		return false;
	for (size_t i = 0; loopback_names[i]; i++)
		if (span_ieq(host, n, loopback_names[i]))
			return true;
	return false;
}

/* True when ORIGIN may call us. */
bool http_origin_allowed(const char *origin, unsigned port, char *const *extra)
{
	if (!origin)
		return true;
	for (size_t i = 0; extra && extra[i]; i++)
		if (strcasecmp(extra[i], origin) == 0)
			return true;
	const char *rest;
	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	else
		return false;
	size_t n;
	long p;
	if (strchr(rest, '/') || !split_host(rest, &n, &p) || p < 0 || (unsigned long)p != port)
		return false;
	for (size_t i = 0; loopback_names[i]; i++)
		if (span_ieq(rest, n, loopback_names[i]))
			return true;
	return false;
}

/* Skips spaces and tabs. */
static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* True when the parameters [P, END) of a media range give q=0. */
static bool q_zero(const char *p, const char *end)
{
	while (p < end) {
		p = skip_ws(p);
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			double q = strtod(p + 2, NULL);
			return q <= 0.0;
		}
		const char *semi = memchr(p, ';', (size_t)(end - p));
		p = semi ? semi + 1 : end;
	}
	return false;
}

/* True when ACCEPT lists TYPE. */
bool http_accepts(const char *accept, const char *type)
{
	const char *p = accept;
	while (p && *p) {
		const char *comma = strchr(p, ',');
		const char *end = comma ? comma : p + strlen(p);
		const char *s = skip_ws(p);
		const char *semi = memchr(s, ';', (size_t)(end - s));
		const char *tend = semi ? semi : end;
		while (tend > s && (tend[-1] == ' ' || tend[-1] == '\t'))
			tend--;
		if (span_ieq(s, (size_t)(tend - s), type) && !(semi && q_zero(semi + 1, end)))
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

/* True for application/json, with or without parameters. */
bool http_is_json_type(const char *ct)
{
	if (!ct)
		return false;
	const char *s = skip_ws(ct);
	size_t n = strcspn(s, "; \t");
	return span_ieq(s, n, "application/json");
}

/* A new session id from getrandom(2). */
int http_sid_new(char out[HTTP_SID_LEN + 1])
{
	unsigned char r[HTTP_SID_LEN / 2];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	out[HTTP_SID_LEN] = '\0';
	return 0;
}

/* True for HTTP_SID_LEN lowercase hex digits. */
bool http_sid_valid(const char *s)
{
	if (!s || strlen(s) != HTTP_SID_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Appends an SSE event. */
int http_sse_event(struct buf *out, uint64_t id, const char *data, size_t n)
{
	char head[64];
	int h = snprintf(head, sizeof head, "id: %llu\nevent: message\n", (unsigned long long)id);
	if (buf_append(out, head, (size_t)h) < 0)
		return -1;
	size_t i = 0;
	bool broke;
	do {   /* one data line per line of DATA, the last one too when DATA ends a line */
		size_t j = i;
		while (j < n && data[j] != '\n' && data[j] != '\r')
			j++;
		if (buf_append(out, "data: ", 6) < 0 || buf_append(out, data + i, j - i) < 0 ||
		    buf_append(out, "\n", 1) < 0)
			return -1;
		broke = j < n;
		if (j < n && data[j] == '\r' && j + 1 < n && data[j + 1] == '\n')
			j++;
		i = j + 1;
	} while (i < n || (broke && i == n));
	return buf_append(out, "\n", 1);
}

/* ---- routing table ---- */

void http_routes_init(struct http_routes *r)
{
	struct hmap empty = HMAP_INIT;
	r->ids = empty;
	r->tokens = empty;
}

void http_routes_release(struct http_routes *r)
{
	hmap_release(&r->ids);
	hmap_release(&r->tokens);
}

/* Routes responses to ID to STREAM. */
int http_routes_add_id(struct http_routes *r, const struct msg_val *id, void *stream)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = id->n ? msg_val_key(id, key) : 0;
	return k ? hmap_add(&r->ids, key, k, stream) : -1;
}

/* Routes progress with TOKEN to STREAM. */
int http_routes_add_token(struct http_routes *r, const struct msg_val *token, void *stream)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = token->n ? msg_val_key(token, key) : 0;
	return k ? hmap_put(&r->tokens, key, k, stream) : -1;
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

/* The stream for TOKEN. */
void *http_routes_token(const struct http_routes *r, const struct msg_val *token)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = token->n ? msg_val_key(token, key) : 0;
	return k ? hmap_get(&r->tokens, key, k) : NULL;
}

/* Drops TOKEN when it routes to STREAM. */
void http_routes_drop_token(struct http_routes *r, const struct msg_val *token, void *stream)
{
	unsigned char key[RPC_KEY_MAX];
	size_t k = token->n ? msg_val_key(token, key) : 0;
	if (k && hmap_get(&r->tokens, key, k) == stream)
		hmap_del(&r->tokens, key, k);
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
