/*
 * fastpath.c - forwarding messages as the bytes they came in.
 *
 * A proxy's cost is what it adds per message, and building a jansson tree
 * and serializing it again costs far more than the rest of the chain put
 * together. When no middleware is configured and the router is
 * transparent, a message is only scanned (validated, its id, method and
 * progress token located) and written on with the id - and the progress
 * token - spliced. The exchange bookkeeping is the same as on the full
 * path (chain.c), so cancellation, progress mapping, timeouts and a dying
 * backend behave identically; anything unusual declines to the full path.
 */
#include "chain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_internal.h"
#include "jscan.h"
#include "log.h"
#include "router.h"
#include "rpc.h"

/* Up to two replacements, applied in text order. */
struct splice {
	struct jspan at[2];
	const char *with[2];
	size_t with_n[2];
	int n;
};

/* Adds a replacement of span S by the text W. */
static void splice_add(struct splice *sp, struct jspan s, const char *w, size_t wn)
{
	sp->at[sp->n] = s;
	sp->with[sp->n] = w;
	sp->with_n[sp->n] = wn;
	sp->n++;
}

/* Sends LINE to TO with the replacements made. */
static int splice_send(struct peer *to, const char *line, size_t len,
		       struct splice *sp, bool request)
{
	struct iovec iov[5];
	int n = 0, order[2] = { 0, 1 };
	if (sp->n == 2 && sp->at[1].p < sp->at[0].p) {
		order[0] = 1;
		order[1] = 0;
	}
	const char *cur = line;
	for (int i = 0; i < sp->n; i++) {
		int k = order[i];
		iov[n++] = (struct iovec){ (void *)cur, (size_t)(sp->at[k].p - cur) };
		iov[n++] = (struct iovec){ (void *)sp->with[k], sp->with_n[k] };
		cur = sp->at[k].p + sp->at[k].n;
	}
	iov[n++] = (struct iovec){ (void *)cur, (size_t)(line + len - cur) };
	return to->ops->send_raw(to, iov, n, request);
}

/* Writes V in decimal into BUF (at least 24 bytes); returns the length. */
static size_t int_text(json_int_t v, char *buf)
{
	static const char pairs[] =
		"0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849"
		"5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
	char tmp[24];
	char *t = tmp + sizeof tmp;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	while (u >= 100) {   /* two digits per division */
		unsigned d = (unsigned)(u % 100) * 2;
		u /= 100;
		*--t = pairs[d + 1];
		*--t = pairs[d];
	}
	if (u >= 10) {
		*--t = pairs[u * 2 + 1];
		*--t = pairs[u * 2];
	} else {
		*--t = (char)('0' + u);
	}
	if (v < 0)
		*--t = '-';
	size_t len = (size_t)(tmp + sizeof tmp - t);
	memcpy(buf, t, len);
	return len;
}

/* The integer in span S, which the scanner checked (at most 18 digits). */
static json_int_t span_int(struct jspan s)
{
	const char *p = s.p, *e = s.p + s.n;
	bool neg = p < e && *p == '-';
	json_int_t v = 0;
	for (p += neg; p < e && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	return neg ? -v : v;
}

/* True when [P, E) is one or more decimal digits. */
static bool all_digits(const char *p, const char *e)
{
	if (p >= e)
		return false;
	for (; p < e; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/*
 * A json_t for an id or token span: plain strings and integers made
 * directly, anything else (escapes, reals) parsed as jansson would.
 */
json_t *chain_span_value(struct jspan s)
{
	if (s.n == 0)
		return NULL;
	if (s.p[0] == '"') {
		if (s.n >= 2 && !memchr(s.p, '\\', s.n))
			return json_stringn(s.p + 1, s.n - 2);
	} else if (s.n <= 19 && all_digits(s.p + (s.p[0] == '-'), s.p + s.n)) {
		return json_integer(span_int(s));
	}
	return json_loadb(s.p, s.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}
#define span_value chain_span_value

/* True when nothing on the way from FROM to TO wants to read messages. */
static bool path_clear(struct peer *from, struct peer *to)
{
	if (!to || !to->ready || !to->ops->send_raw || pipeline_size(chain_global_pipeline()))
		return false;
	struct peer *be = from->role == PEER_BACKEND ? from : to;
	return pipeline_size(be->pl) == 0;
}

/* Sends LINE to TO with span A replaced by AT and, if B.p, B by BT. */
int chain_send_spliced(struct peer *to, const char *line, size_t len, bool request,
		       struct jspan a, const char *at, size_t an,
		       struct jspan b, const char *bt, size_t bn)
{
	struct splice sp = { .n = 0 };
	splice_add(&sp, a, at, an);
	if (b.p)
		splice_add(&sp, b, bt, bn);
	return splice_send(to, line, len, &sp, request);
}

/* Writes the integer V in decimal into BUF (24 bytes); returns the length. */
size_t chain_int_text(json_int_t v, char *buf)
{
	return int_text(v, buf);
}

/* Text of EX's id on the requester's side, serialized into BUF. */
size_t chain_from_id_text(struct exchange *ex, char *buf, size_t n, char **heap)
{
	*heap = NULL;
	if (ex->id_text_n && n >= ex->id_text_n) {
		memcpy(buf, ex->id_text, ex->id_text_n);   /* as the requester wrote it */
		return ex->id_text_n;
	}
	if (json_is_integer(ex->from_id) && n >= 24)
		return int_text(json_integer_value(ex->from_id), buf);
	*heap = json_dumps(ex->from_id, JSON_ENCODE_ANY | JSON_COMPACT);
	return *heap ? strlen(*heap) : 0;
}

/* The id map key of the id text [P, P+N) (see chain_internal.h). */
size_t chain_id_key_text(const char *p, size_t n, unsigned char *key)
{
	json_int_t v;
	if (n == 0 || n > sizeof ((struct exchange *)0)->id_text)
		return 0;
	if (p[0] == '"') {
		if (n < 2 || memchr(p, '\\', n))
			return 0;
		key[0] = 's';
		memcpy(key + 1, p + 1, n - 2);
		return n - 1;
	}
	if (n > 19 || !all_digits(p + (p[0] == '-'), p + n))
		return 0;
	v = span_int((struct jspan){ p, n });
	key[0] = 'n';
	memcpy(key + 1, &v, sizeof v);
	return 1 + sizeof v;
}

/* A request: new exchange, new id, spliced. */
static bool fast_request(struct peer *from, struct peer *to, const char *line,
			 size_t len, struct jscan *js)
{
	char method[128];
	if (js->method.n >= sizeof method || (js->token.p && from->role == PEER_BACKEND))
		return false;
	memcpy(method, js->method.p, js->method.n);
	method[js->method.n] = '\0';
	/* the id is kept as its text: no jansson value unless someone asks */
	unsigned char key[RPC_KEY_MAX];
	size_t klen;
	if (js->id_is_string) {
		klen = chain_id_key_text(js->id.p, js->id.n, key);
	} else {  /* the scanner took its value */
		key[0] = 'n';
		memcpy(key + 1, &js->id_int, sizeof js->id_int);
		klen = 1 + sizeof js->id_int;
		if (js->id.n > sizeof ((struct exchange *)0)->id_text)
			klen = 0;
	}
	if (!klen)
		return false;  /* unusual or long ids: the full path */
	struct exchange *ex = chain_exchange_new(from, NULL, method);
	if (!ex)
		return false;
	int added = hmap_add(&from->received, key, klen, ex);
	if (added == 1) {  /* a duplicate: the full path answers it */
		chain_exchange_free(ex);
		return false;
	}
	ex->in_received = added == 0;
	memcpy(ex->id_text, js->id.p, js->id.n);
	ex->id_text_n = (unsigned char)js->id.n;
	ex->routed = true;
	if (js->token.p)
		ex->from_token = span_value(js->token);
	chain_exchange_assign(ex, to);
	char idtext[24];
	size_t idn = int_text(ex->to_id, idtext);
	struct splice sp = { .n = 0 };
	splice_add(&sp, js->id, idtext, idn);
	if (js->token.p && ex->from_token)
		splice_add(&sp, js->token, idtext, idn);
	if (splice_send(to, line, len, &sp, true) < 0)
		chain_exchange_fail(ex, "cannot send the request");
	return true;
}

/* A response: back to the requester with its own id. */
static bool fast_response(struct peer *from, const char *line, size_t len, struct jscan *js)
{
	if (js->id_is_string)
		return false;
	json_int_t id = js->id_int;
	struct exchange *ex = hmap_get(&from->sent, &id, sizeof id);
	if (!ex)
		return false;
	if (ex->walk.reached > 0)   /* modules see it back, unparsed unless they read it */
		return chain_raw_response(from, ex, line, len, js);
	if (!ex->from || ex->on_response || ex->batch || ex->walking ||
	    !ex->from->ready || !ex->from->ops->send_raw)
		return false;
	char buf[32], *heap;
	size_t n = chain_from_id_text(ex, buf, sizeof buf, &heap);
	struct splice sp = { .n = 0 };
	splice_add(&sp, js->id, heap ? heap : buf, n);
	int rc = splice_send(ex->from, line, len, &sp, false);
	free(heap);
	if (rc < 0)
		return false;  /* the full path delivers it (or says why not) */
	chain_exchange_free(ex);
	return true;
}

/* Progress from a responder: the requester's own token. */
static bool fast_progress(struct peer *from, const char *line, size_t len, struct jscan *js)
{
	if (!js->token.p || js->token.p[0] == '"')
		return false;
	json_int_t id = span_int(js->token);
	struct exchange *ex = hmap_get(&from->sent, &id, sizeof id);
	if (!ex || !ex->from_token || !ex->from || !path_clear(ex->from, from) ||
	    !ex->from->ops->send_raw)
		return false;
	char *tok = json_dumps(ex->from_token, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!tok)
		return false;
	struct splice sp = { .n = 0 };
	splice_add(&sp, js->token, tok, strlen(tok));
	splice_send(ex->from, line, len, &sp, false);
	free(tok);
	return true;
}

/* A cancellation from a requester: the responder's id; the exchange ends. */
static bool fast_cancelled(struct peer *from, const char *line, size_t len, struct jscan *js)
{
	if (!js->request_id.p)
		return false;
	json_t *rid = span_value(js->request_id);
	unsigned char key[RPC_KEY_MAX];
	size_t klen = rid ? rpc_id_key(rid, key) : 0;
	json_decref(rid);
	struct exchange *ex = klen ? hmap_get(&from->received, key, klen) : NULL;
	if (!ex || ex->walking || !ex->in_sent || !path_clear(from, ex->to))
		return false;
	char idtext[24];
	size_t idn = int_text(ex->to_id, idtext);
	struct splice sp = { .n = 0 };
	splice_add(&sp, js->request_id, idtext, idn);
	splice_send(ex->to, line, len, &sp, false);
	chain_exchange_free(ex);
	return true;
}

/* Any other notification: as it came, to the backend or every client. */
static bool fast_notification(struct peer *from, const char *line, size_t len)
{
	struct iovec iov = { (void *)line, len };
	if (from->role == PEER_CLIENT) {
		struct peer *to = chain_route_backend(from);
		if (!path_clear(from, to))
			return false;
		to->ops->send_raw(to, &iov, 1, false);
		return true;
	}
	if (pipeline_size(chain_global_pipeline()) || pipeline_size(from->pl))
		return false;
	for (struct peer *p = chain_peers(); p; p = p->next)
		if (p->role == PEER_CLIENT && p->ready && !p->ops->send_raw)
			return false;
	for (struct peer *p = chain_peers(); p; p = p->next)
		if (p->role == PEER_CLIENT && p->ready)
			p->ops->send_raw(p, &iov, 1, false);
	return true;
}

static bool fast_route(struct peer *from, const char *line, size_t len, struct jscan *js);

/* Routes a scanned message. */
bool chain_fast(struct peer *from, const char *line, size_t len)
{
	struct jscan js;
	if (!from->ready || log_enabled(LOG_DEBUG) || !jscan_message(line, len, &js))
		return false;
	from->rx_bytes = len;
	if (!js.method.p)  /* responses need no routing, even with several backends */
		return fast_response(from, line, len, &js);
	return fast_route(from, line, len, &js);
}

/*
 * A response built by mcp-chain itself: valid by construction, so not
 * scanned again (a listing of 10,000 tools is a megabyte).
 */
bool chain_fast_own_response(struct peer *from, const char *line, size_t len,
			     struct jspan id, int64_t id_int, struct jspan result)
{
	struct jscan js;
	if (!from->ready || log_enabled(LOG_DEBUG))
		return false;
	memset(&js, 0, sizeof js);
	js.id = id;
	js.id_int = id_int;
	js.result = result;
	js.has_jsonrpc = js.has_result = true;
	from->rx_bytes = len;
	return fast_response(from, line, len, &js);
}

/* Routes a scanned request or notification. */
static bool fast_route(struct peer *from, const char *line, size_t len, struct jscan *js)
{
	if (!router_transparent())
		return false;
	if (js->id.p) {
		/* initialize and server/discover are the session's own to answer */
		if (from->role == PEER_CLIENT && (jspan_is(js->method, "initialize") ||
						  jspan_is(js->method, "server/discover")))
			return false;
		struct peer *to = from->role == PEER_CLIENT ?
			chain_route_backend(from) : chain_route_client(from);
		if (path_clear(from, to))
			return fast_request(from, to, line, len, js);
		if (!to || !to->ready || !to->ops->send_raw)
			return false;
		return chain_raw_request(from, line, len, js);
	}
	if (jspan_is(js->method, "notifications/progress"))
		return fast_progress(from, line, len, js);
	if (jspan_is(js->method, "notifications/cancelled"))
		return fast_cancelled(from, line, len, js);
	if (jspan_is(js->method, "notifications/initialized"))
		return false;  /* the router keeps track of it */
	return fast_notification(from, line, len);
}
