/*
 * http_util.c - header checks, session ids, SSE framing and the routing
 * table of the Streamable HTTP front (see http_util.h).
 */
#include "http_util.h"

#include <errno.h>
#include <stdint.h>
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

/* Frames one SSE event, the id line HEAD (HN bytes) and the line DATA (N
 * bytes) as data lines, into OUT; with OUT NULL only counts. Returns its
 * length. */
static size_t sse_frame(char *out, const char *head, size_t hn, const char *data, size_t n)
{
	size_t len = 0;
#define PUT(p, k) do { if (out) memcpy(out + len, (p), (k)); len += (k); } while (0)
	PUT(head, hn);
	size_t i = 0;
	bool broke;
	do {   /* one data line per line of DATA, the last one too when DATA ends a line */
		size_t j = i;
		while (j < n && data[j] != '\n' && data[j] != '\r')
			j++;
		PUT("data: ", 6);
		PUT(data + i, j - i);
		PUT("\n", 1);
		broke = j < n;
		if (j < n && data[j] == '\r' && j + 1 < n && data[j + 1] == '\n')
			j++;
		i = j + 1;
	} while (i < n || (broke && i == n));
	PUT("\n", 1);
#undef PUT
	return len;
}

/* The id and type lines of event STREAM-SEQ into HEAD; their length. */
static size_t sse_head_lines(char head[64], unsigned stream, uint64_t seq)
{
	return (size_t)snprintf(head, 64, "id: %u-%llu\nevent: message\n", stream,
				(unsigned long long)seq);
}

/* Appends an SSE event. */
int http_sse_event(struct buf *out, unsigned stream, uint64_t seq, const char *data, size_t n)
{
	char head[64];
	size_t hn = sse_head_lines(head, stream, seq);
	size_t len = sse_frame(NULL, head, hn, data, n);
	if (buf_reserve(out, len) < 0)
		return -1;
	out->len += sse_frame(out->data + out->len, head, hn, data, n);
	return 0;
}

/* Appends a resumable stream's head: the retry hint, the priming event. */
int http_sse_head(struct buf *out, unsigned stream, unsigned retry_ms, bool prime)
{
	if (!retry_ms && !prime)
		return 0;
	if (retry_ms && buf_printf(out, "retry: %u\n", retry_ms) < 0)
		return -1;
	/* "data:" even when empty: parsers dispatch (and so record the id of)
	 * only an event with a data line */
	if (prime && buf_printf(out, "id: %u-0\ndata: \n", stream) < 0)
		return -1;
	return buf_append(out, "\n", 1);
}

/* Reads "S-N" (decimal, no sign, no spaces). */
int http_event_id_parse(const char *s, unsigned *stream, uint64_t *seq)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long st = strtoul(s, &end, 10);
	if (errno || *end != '-' || st > UINT32_MAX || end[1] < '0' || end[1] > '9')
		return -1;
	const char *n = end + 1;
	unsigned long long q = strtoull(n, &end, 10);
	if (errno || *end)
		return -1;
	*stream = (unsigned)st;
	*seq = q;
	return 0;
}

/* ---- the events of a stream ---- */

struct http_ring_ev {
	struct http_ring_ev *next;
	uint64_t seq;
	size_t n;
	char bytes[];
};

void http_ring_init(struct http_ring *g)
{
	memset(g, 0, sizeof *g);
	g->tail = &g->head;
}

void http_ring_release(struct http_ring *g)
{
	while (g->head) {
		struct http_ring_ev *e = g->head;
		g->head = e->next;
		free(e);
	}
	uint64_t last = g->last;
	http_ring_init(g);
	g->last = g->hw_seq = last;
	g->hw_off = SIZE_MAX;
}

void http_ring_move(struct http_ring *to, struct http_ring *from)
{
	http_ring_release(to);
	*to = *from;
	if (!to->head)
		to->tail = &to->head;
	http_ring_init(from);
}

/* Appends E (made for N bytes, filled) as event SEQ. */
static void ring_append(struct http_ring *g, struct http_ring_ev *e, uint64_t seq, size_t n)
{
	e->next = NULL;
	e->seq = seq;
	e->n = n;
	*g->tail = e;
	g->tail = &e->next;
	if (!g->next) {
		g->next = e;
		g->off = 0;
	}
	g->bytes += n;
	g->unsent += n;
	g->fresh += n;
	g->last = seq;
}

int http_ring_add(struct http_ring *g, uint64_t seq, const char *bytes, size_t n)
{
	struct http_ring_ev *e = malloc(sizeof *e + n);
	if (!e)
		return -1;
	memcpy(e->bytes, bytes, n);
	ring_append(g, e, seq, n);
	return 0;
}

int http_ring_add_event(struct http_ring *g, unsigned stream, uint64_t seq, const char *data,
			size_t n)
{
	char head[64];
	size_t hn = sse_head_lines(head, stream, seq);
	size_t len = sse_frame(NULL, head, hn, data, n);
	struct http_ring_ev *e = malloc(sizeof *e + len);
	if (!e)
		return -1;
	sse_frame(e->bytes, head, hn, data, n);
	ring_append(g, e, seq, len);
	return 0;
}

void http_ring_mark_sent(struct http_ring *g)
{
	g->next = NULL;
	g->off = 0;
	g->unsent = 0;
	g->fresh = 0;
	g->hw_seq = g->last;
	g->hw_off = SIZE_MAX;
}

/* Bytes FROM to TO of E were handed out: those never handed out before
 * leave the fresh count, and the high-water mark moves past them. */
static void handed_out(struct http_ring *g, const struct http_ring_ev *e, size_t from, size_t to)
{
	size_t beyond = e->seq > g->hw_seq ? to - from :
		e->seq == g->hw_seq && to > g->hw_off ? to - (from > g->hw_off ? from : g->hw_off) : 0;
	if (!beyond)
		return;
	g->fresh -= beyond;
	g->hw_seq = e->seq;
	g->hw_off = to;
}

size_t http_ring_read(struct http_ring *g, char *out, size_t max)
{
	size_t got = 0;
	while (g->next && got < max) {
		struct http_ring_ev *e = g->next;
		size_t k = e->n - g->off < max - got ? e->n - g->off : max - got;
		memcpy(out + got, e->bytes + g->off, k);
		handed_out(g, e, g->off, g->off + k);
		got += k;
		g->off += k;
		if (g->off == e->n) {
			g->next = e->next;
			g->off = 0;
		}
	}
	g->unsent -= got;
	return got;
}

int http_ring_drain(struct http_ring *g, struct buf *out)
{
	if (buf_reserve(out, g->unsent) < 0)
		return -1;
	for (; g->next; g->next = g->next->next, g->off = 0) {
		buf_append(out, g->next->bytes + g->off, g->next->n - g->off);
		handed_out(g, g->next, g->off, g->next->n);
	}
	g->unsent = 0;
	return 0;
}

void http_ring_trim(struct http_ring *g, size_t keep)
{
	while (g->bytes > keep && g->head && g->head != g->next && g->head->next) {
		struct http_ring_ev *e = g->head;
		g->head = e->next;
		g->bytes -= e->n;
		free(e);
	}
}

size_t http_ring_rewind(struct http_ring *g, uint64_t after, uint64_t *lost)
{
	struct http_ring_ev *e = g->head;
	size_t count = 0;
	*lost = 0;
	if (!e)
		*lost = g->last > after ? g->last - after : 0;
	else if (e->seq > 0 && e->seq - 1 > after)
		*lost = e->seq - 1 - after;
	while (e && e->seq <= after)
		e = e->next;
	g->next = e;
	g->off = 0;
	g->unsent = 0;
	for (; e; e = e->next, count++)
		g->unsent += e->n;
	return count;
}

/* ---- what /metrics names ---- */

const char *const http_methods[HTTP_NMETHODS] = {
	"initialize", "ping", "tools/list", "tools/call", "resources/list",
	"resources/templates/list", "resources/read", "resources/subscribe",
	"resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
	"logging/setLevel", "tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
	"server/discover", "subscriptions/listen", "other",
};

unsigned http_method_index(const char *method)
{
	for (unsigned i = 0; method && i < HTTP_NMETHODS - 1; i++)
		if (strcmp(method, http_methods[i]) == 0)
			return i;
	return HTTP_NMETHODS - 1;
}

const double http_latency_bounds[HTTP_NBUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30,
};

unsigned http_latency_bucket(double seconds)
{
	unsigned i = 0;
	while (i < HTTP_NBUCKETS && seconds > http_latency_bounds[i])
		i++;
	return i;
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
