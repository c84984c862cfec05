/*
 * msg.c - one JSON-RPC message as bytes-with-spans or as a tree (msg.h).
 *
 * Every question about a message (its kind, method, id, progress token,
 * a cancellation's request id, its subject) and every change the chain
 * makes to one (id, token, request id) is answered or done here, for both
 * forms, so no caller branches on the representation.
 */
#include "msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "method.h"

/* ---- short values ---- */

/* Sets V to the N bytes at P. */
int msg_val_set(struct msg_val *v, const char *p, size_t n)
{
	msg_val_release(v);
	if (n > UINT32_MAX)
		return -1;
	if (n <= sizeof v->buf) {
		buf_copy_short(v->buf, p, n);
	} else {
		if (!(v->heap = malloc(n)))
			return -1;
		memcpy(v->heap, p, n);
	}
	v->n = (uint32_t)n;
	return 0;
}

/* Writes the decimal digits of U backwards, ending before END; returns the first. */
static inline __attribute__((always_inline)) char *digits_u32(char *end, uint32_t u)
{
	static const char pairs[] =
		"0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849"
		"5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
	while (u >= 100) {
		unsigned d = (u % 100) * 2;
		u /= 100;
		*--end = pairs[d + 1];
		*--end = pairs[d];
	}
	if (u >= 10) {
		*--end = pairs[u * 2 + 1];
		*--end = pairs[u * 2];
	} else {
		*--end = (char)('0' + u);
	}
	return end;
}

/*
 * Sets V to the decimal text of X, written in place from its last digit,
 * in 32-bit steps: it runs for every request (its new id), whose ids are
 * small, and every response.
 */
void msg_val_set_int(struct msg_val *v, int64_t x)
{
	uint64_t u = x < 0 ? 0ULL - (uint64_t)x : (uint64_t)x;
	uint32_t n = x < 0;
	if (u < 1000000000) {   /* nine digits at most: 32 bits */
		static const uint32_t pow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000,
			10000000, 100000000, 1000000000 };
		uint32_t w = (uint32_t)u | 1;   /* as many digits as u; never 0 */
		uint32_t t = (uint32_t)(32 - __builtin_clz(w)) * 1233 >> 12;   /* ~log10 */
		n += t + 1 - (w < pow10[t]);
	} else {
		n += 10;
		for (uint64_t q = u / 1000000000; q >= 10; q /= 10)
			n++;
	}
	if (v->heap)
		msg_val_release(v);
	v->n = n;   /* at most 20: "-9223372036854775808" */
	char *t = v->buf + n;
	while (u >= 1000000000) {   /* nine digits at a time from the right */
		uint32_t low = (uint32_t)(u % 1000000000);
		u /= 1000000000;
		char *from = digits_u32(t, low);
		while (from > t - 9)
			*--from = '0';
		t -= 9;
	}
	t = digits_u32(t, (uint32_t)u);
	if (x < 0)
		*--t = '-';
}

/* Sets V to a copy of W's text. */
static int val_copy(struct msg_val *v, const struct msg_val *w)
{
	if (w->heap)
		return msg_val_set(v, w->heap, w->n);
	if (v->heap)
		msg_val_release(v);
	*v = *w;   /* the text is in BUF: a copy of the struct is one */
	return 0;
}

/* Frees V's text. */
void msg_val_release(struct msg_val *v)
{
	if (v->heap) {
		free(v->heap);
		v->heap = NULL;
	}
	v->n = 0;
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

/* The integer in [P, P+N) when it is a plain one of at most 18 digits. */
static bool text_int(const char *p, size_t n, int64_t *out)
{
	bool neg = n > 0 && p[0] == '-';
	if (n - neg > 18 || !all_digits(p + neg, p + n))
		return false;
	int64_t x = 0;
	for (const char *c = p + neg; c < p + n; c++)
		x = x * 10 + (*c - '0');
	*out = neg ? -x : x;
	return true;
}

/* A jansson value for the JSON text [P, P+N): plain ints and strings directly. */
static json_t *text_json(const char *p, size_t n)
{
	int64_t x;
	if (n == 0)
		return NULL;
	if (p[0] == '"' && n >= 2 && !memchr(p, '\\', n))
		return json_stringn(p + 1, n - 2);
	if (text_int(p, n, &x))
		return json_integer(x);
	return json_loadb(p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

/* V as a jansson value. */
json_t *msg_val_json(const struct msg_val *v)
{
	return text_json(msg_val_text(v), v->n);
}

/* The id key of V's text. */
size_t msg_val_key(const struct msg_val *v, unsigned char *key)
{
	return rpc_id_key_text(msg_val_text(v), v->n, key);
}

static ssize_t msg_dump_bytes(struct msg *m, char **out);

/* ---- life ---- */

/* Scans a line into M (every field but OWN and SET). */
static bool take_scan(struct msg *m, const char *line, size_t len)
{
	if (!jscan_message(line, len, &m->js) || m->js.method.n >= sizeof m->method)
		return false;
	m->tree = NULL;
	m->raw = line;
	m->raw_len = len;
	m->id_is_int = m->js.id.p && !m->js.id_is_string;
	if (m->js.method.p) {
		if (m->js.method.n <= 32)
			buf_copy_short(m->method, m->js.method.p, m->js.method.n);
		else
			memcpy(m->method, m->js.method.p, m->js.method.n);
		m->method[m->js.method.n] = '\0';
		m->kind = m->js.id.p ? RPC_REQUEST : RPC_NOTIFICATION;
	} else {
		m->method[0] = '\0';
		m->kind = RPC_RESPONSE;
	}
	return true;
}

static int copy_bytes(struct msg *m);

/*
 * Makes M's bytes, whose white space holds raw CR or LF, a copy with
 * spaces there: a peer that reads one message a line (a stdio backend or
 * client) would take what follows a line break as messages of their own,
 * that no module saw and whose ids no exchange maps. JSON has raw CR and
 * LF nowhere but in white space (jscan.h), so every one of them goes; the
 * length stays, and so does every span.
 */
static int blank_lines(struct msg *m)
{
	if (copy_bytes(m) < 0)
		return -1;
	for (char *p = m->own, *e = p + m->raw_len; p < e; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	m->js.lines = false;
	return 0;
}

/*
 * Takes a line: scanned, or parsed. Either way no raw line break is left
 * in what will be written: a tree is written compact, and bytes with one
 * are copied and blanked, which compact lines never pay for.
 */
int msg_init_line(struct msg *m, const char *line, size_t len, json_t **err)
{
	m->own = NULL;   /* on every message: what take_scan does not write */
	for (int i = 0; i < 3; i++) {
		m->set[i].heap = NULL;
		m->set[i].n = 0;
	}
	if (take_scan(m, line, len) &&
	    (__builtin_expect(!m->js.lines, 1) || blank_lines(m) == 0))
		return 0;
	memset(m, 0, sizeof *m);
	json_t *t = rpc_parse(line, len, err);
	if (!t)
		return -1;
	m->tree = t;
	return 0;
}

/* Takes a response of our own, as bytes. */
void msg_init_own(struct msg *m, const char *line, size_t len, struct jspan id,
		  int64_t id_int, struct jspan result)
{
	memset(m, 0, sizeof *m);
	m->raw = line;
	m->raw_len = len;
	m->js.id = id;
	m->js.result = result;
	m->id_is_int = true;
	m->js.id_int = id_int;
	m->kind = RPC_RESPONSE;
}

/* Takes a tree. */
void msg_init_tree(struct msg *m, json_t *tree)
{
	memset(m, 0, sizeof *m);
	m->tree = tree;
}

/* Forgets what M owns without freeing it: M is empty (the rest is stale). */
static void forget(struct msg *m)
{
	m->tree = NULL;
	m->raw = NULL;
	m->raw_len = 0;
	m->own = NULL;
	m->kind = RPC_INVALID;
	m->id_is_int = m->js.is_error = false;
	for (int i = 0; i < 3; i++) {
		m->set[i].heap = NULL;
		m->set[i].n = 0;
	}
}

/* An empty message. */
void msg_init_empty(struct msg *m)
{
	forget(m);
}

/* Moves a message. */
void msg_move(struct msg *dst, struct msg *src)
{
	*dst = *src;
	forget(src);
}

/* Frees a message's contents (msg_release: M is not empty). */
void msg_release_(struct msg *m)
{
	/* bytes, copies and replacements go together: an empty M holds none */
	if (m->tree)
		json_decref(m->tree);
	if (m->own)   /* on every message: no calls for what is not there */
		free(m->own);
	for (int i = 0; i < 3; i++)
		if (m->set[i].heap)
			free(m->set[i].heap);
	forget(m);
}

/* ---- facts ---- */

/* Kind and facts. */
enum rpc_kind msg_classify(struct msg *m, struct rpc_info *info)
{
	memset(info, 0, sizeof *info);
	if (m->tree)
		return rpc_classify(m->tree, info);
	info->kind = m->kind;
	info->method = m->kind == RPC_RESPONSE ? NULL : m->method;
	return m->kind;
}

/* The method. */
const char *msg_method(struct msg *m)
{
	if (m->tree)
		return json_string_value(json_object_get(m->tree, "method"));
	return m->raw && m->kind != RPC_RESPONSE ? m->method : NULL;
}

/* The text of span I with its replacement, if any. */
static struct jspan current(const struct msg *m, int i)
{
	if (i < 3 && m->set[i].n)
		return (struct jspan){ msg_val_text(&m->set[i]), m->set[i].n };
	return m->js.span[i];
}

/* The progress token of a tree: params._meta.progressToken, or params.progressToken. */
static json_t *tree_token(json_t *t, json_t **holder)
{
	json_t *params = json_object_get(t, "params");
	const char *method = json_string_value(json_object_get(t, "method"));
	*holder = method && strcmp(method, "notifications/progress") == 0 ? params :
		json_object_get(t, "id") ? json_object_get(params, "_meta") : NULL;
	return json_object_get(*holder, "progressToken");
}

/* The id key. */
size_t msg_id_key(struct msg *m, unsigned char *key)
{
	if (m->tree)
		return rpc_id_key(json_object_get(m->tree, "id"), key);
	if (m->id_is_int && !m->set[MSG_SPAN_ID].n)
		return rpc_id_key_int(m->js.id_int, key);
	struct jspan s = current(m, MSG_SPAN_ID);
	return rpc_id_key_text(s.p, s.n, key);
}

/* The id as an integer. */
bool msg_id_int(struct msg *m, int64_t *v)
{
	if (m->tree) {
		json_t *id = json_object_get(m->tree, "id");
		if (!json_is_integer(id))
			return false;
		*v = json_integer_value(id);
		return true;
	}
	if (m->id_is_int && !m->set[MSG_SPAN_ID].n) {
		*v = m->js.id_int;
		return true;
	}
	struct jspan s = current(m, MSG_SPAN_ID);
	return s.p && text_int(s.p, s.n, v);
}

/* Copies the JSON text of value J into OUT. */
static int val_from_json(struct msg_val *out, json_t *j)
{
	char *t = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!t)
		return -1;
	int r = msg_val_set(out, t, strlen(t));
	free(t);
	return r;
}

/* The id text. */
int msg_id_get(struct msg *m, struct msg_val *out)
{
	if (m->tree) {
		json_t *id = json_object_get(m->tree, "id");
		return id ? val_from_json(out, id) : -1;
	}
	struct jspan s = current(m, MSG_SPAN_ID);
	return s.p ? msg_val_set(out, s.p, s.n) : -1;
}

/* The progress token text. */
int msg_token_get(struct msg *m, struct msg_val *out)
{
	if (m->tree) {
		json_t *holder, *t = tree_token(m->tree, &holder);
		if (!t)
			return 0;
		return val_from_json(out, t) < 0 ? -1 : 1;
	}
	struct jspan s = current(m, MSG_SPAN_TOKEN);
	if (!s.p)
		return 0;
	return msg_val_set(out, s.p, s.n) < 0 ? -1 : 1;
}

/* The progress token as an integer. */
bool msg_token_int(struct msg *m, int64_t *v)
{
	if (m->tree) {
		json_t *holder, *t = tree_token(m->tree, &holder);
		if (!json_is_integer(t))
			return false;
		*v = json_integer_value(t);
		return true;
	}
	struct jspan s = current(m, MSG_SPAN_TOKEN);
	return s.p && text_int(s.p, s.n, v);
}

/* The key of a cancellation's requestId. */
size_t msg_rid_key(struct msg *m, unsigned char *key)
{
	if (m->tree)
		return rpc_id_key(json_object_get(json_object_get(m->tree, "params"), "requestId"),
				  key);
	struct jspan s = current(m, MSG_SPAN_RID);
	return s.p ? rpc_id_key_text(s.p, s.n, key) : 0;
}

/* ---- changes ---- */

/* Records the replacement of span I by V, or sets it in the tree via SET. */
static int set_span(struct msg *m, int i, const struct msg_val *v)
{
	return val_copy(&m->set[i], v);
}

/*
 * Setting a value changes the tree when there is one and the bytes when
 * there are some: a message a module read but did not change still
 * leaves as its bytes (see msg_bytes_current).
 */

/* Sets the id. */
int msg_set_id(struct msg *m, const struct msg_val *v)
{
	if (m->raw && m->js.span[MSG_SPAN_ID].p && set_span(m, MSG_SPAN_ID, v) < 0)
		return -1;
	if (m->tree)   /* only where there is one, as on the bytes */
		return json_object_get(m->tree, "id") ?
			json_object_set_new(m->tree, "id", msg_val_json(v)) : -1;
	return m->js.span[MSG_SPAN_ID].p ? 0 : -1;
}

/* Sets the id to an integer. */
int msg_set_id_int(struct msg *m, int64_t v)
{
	if (m->raw && m->js.span[MSG_SPAN_ID].p)
		msg_val_set_int(&m->set[MSG_SPAN_ID], v);
	if (m->tree)
		return json_object_get(m->tree, "id") ?
			json_object_set_new(m->tree, "id", json_integer(v)) : -1;
	return m->js.span[MSG_SPAN_ID].p ? 0 : -1;
}

/* Sets the progress token (only where there is one). */
int msg_set_token(struct msg *m, const struct msg_val *v)
{
	if (m->raw && m->js.span[MSG_SPAN_TOKEN].p && set_span(m, MSG_SPAN_TOKEN, v) < 0)
		return -1;
	if (m->tree) {
		json_t *holder;
		if (!tree_token(m->tree, &holder))
			return -1;
		return json_object_set_new(holder, "progressToken", msg_val_json(v));
	}
	return m->js.span[MSG_SPAN_TOKEN].p ? 0 : -1;
}

/* Sets the progress token to an integer (only where there is one). */
int msg_set_token_int(struct msg *m, int64_t v)
{
	if (m->raw && m->js.token.p)
		msg_val_set_int(&m->set[MSG_SPAN_TOKEN], v);
	if (m->tree) {
		json_t *holder;
		if (!tree_token(m->tree, &holder))
			return -1;
		return json_object_set_new(holder, "progressToken", json_integer(v));
	}
	return m->js.token.p ? 0 : -1;
}

/* Sets a cancellation's requestId. */
int msg_set_rid(struct msg *m, const struct msg_val *v)
{
	if (m->raw && m->js.span[MSG_SPAN_RID].p && set_span(m, MSG_SPAN_RID, v) < 0)
		return -1;
	if (m->tree) {
		json_t *params = json_object_get(m->tree, "params");
		return json_object_get(params, "requestId") ?
			json_object_set_new(params, "requestId", msg_val_json(v)) : -1;
	}
	return m->js.span[MSG_SPAN_RID].p ? 0 : -1;
}

/* Drops the bytes and everything about them. */
static void drop_bytes(struct msg *m)
{
	free(m->own);
	m->own = NULL;
	m->raw = NULL;
	m->raw_len = 0;
	memset(&m->js, 0, sizeof m->js);
	for (int i = 0; i < 3; i++)
		msg_val_release(&m->set[i]);
}

/* Makes the tree; the bytes stay, for as long as the tree says the same. */
json_t *msg_tree(struct msg *m)
{
	if (m->tree || !m->raw)
		return m->tree;
	json_t *t = json_loadb(m->raw, m->raw_len, JSON_ALLOW_NUL, NULL);
	if (!t)
		return NULL;
	json_t *holder, *params = json_object_get(t, "params");
	if (m->set[MSG_SPAN_ID].n)
		json_object_set_new(t, "id", msg_val_json(&m->set[MSG_SPAN_ID]));
	if (m->set[MSG_SPAN_TOKEN].n && tree_token(t, &holder))
		json_object_set_new(holder, "progressToken", msg_val_json(&m->set[MSG_SPAN_TOKEN]));
	if (m->set[MSG_SPAN_RID].n && json_object_get(params, "requestId"))
		json_object_set_new(params, "requestId", msg_val_json(&m->set[MSG_SPAN_RID]));
	m->tree = t;
	return t;
}

/* True when the bytes (with their replacements) still say what the tree says. */
bool msg_bytes_current(struct msg *m)
{
	if (!m->raw)
		return false;
	if (!m->tree)
		return true;
	char *text;
	ssize_t n = msg_dump_bytes(m, &text);
	if (n < 0)
		return false;
	json_t *t = json_loadb(text, (size_t)n, JSON_ALLOW_NUL, NULL);
	bool same = t && json_equal(t, m->tree);
	json_decref(t);
	free(text);
	if (!same)
		drop_bytes(m);   /* a module changed it: the tree is the message */
	return same;
}

/* Replaces the message by a tree. */
void msg_set_tree(struct msg *m, json_t *t)
{
	if (t == m->tree)
		return;
	drop_bytes(m);
	json_decref(m->tree);
	m->tree = t;
}

/* Copies M's borrowed bytes into OWN, its spans with them; -1 (M unchanged) without memory. */
static int copy_bytes(struct msg *m)
{
	char *copy = malloc(m->raw_len ? m->raw_len : 1);
	if (!copy)
		return -1;
	memcpy(copy, m->raw, m->raw_len);
	for (int i = 0; i < MSG_SPANS; i++)
		if (m->js.span[i].p)
			m->js.span[i].p = copy + (m->js.span[i].p - m->raw);
	if (m->js.name.p)
		m->js.name.p = copy + (m->js.name.p - m->raw);
	if (m->js.uri.p)
		m->js.uri.p = copy + (m->js.uri.p - m->raw);
	m->js.method = (struct jspan){ NULL, 0 };   /* not kept (msg.h): METHOD is */
	m->raw = m->own = copy;
	return 0;
}

/* Copies borrowed bytes. */
int msg_keep(struct msg *m)
{
	if (!m->raw || m->own || copy_bytes(m) == 0)
		return 0;
	int r = msg_tree(m) ? 0 : -1;   /* no memory for a copy: the tree, then */
	drop_bytes(m);
	return r;
}

/* ---- writing ---- */

/* The line's pieces with the replacements spliced, in text order. */
int msg_iov(const struct msg *m, struct iovec *iov)
{
	if (!m->raw)
		return -1;
	if (m->set[0].n && m->js.id.p && !m->set[1].n && !m->set[2].n) {
		/* only the id replaced, as in most requests and responses */
		iov[0] = (struct iovec){ (void *)m->raw, (size_t)(m->js.id.p - m->raw) };
		iov[1] = (struct iovec){ (void *)msg_val_text(&m->set[0]), m->set[0].n };
		const char *rest = m->js.id.p + m->js.id.n;
		iov[2] = (struct iovec){ (void *)rest, (size_t)(m->raw + m->raw_len - rest) };
		return 3;
	}
	const struct jspan *at[3];
	const struct msg_val *val[3];
	int k = 0, n = 0;
	for (int i = 0; i < 3; i++) {   /* ID, TOKEN, RID, put in text order */
		if (!m->set[i].n || !m->js.span[i].p)
			continue;
		int j = k++;
		for (; j > 0 && at[j - 1]->p > m->js.span[i].p; j--) {
			at[j] = at[j - 1];
			val[j] = val[j - 1];
		}
		at[j] = &m->js.span[i];
		val[j] = &m->set[i];
	}
	const char *cur = m->raw;
	for (int i = 0; i < k; i++) {
		iov[n].iov_base = (void *)cur;
		iov[n++].iov_len = (size_t)(at[i]->p - cur);
		iov[n].iov_base = (void *)msg_val_text(val[i]);
		iov[n++].iov_len = val[i]->n;
		cur = at[i]->p + at[i]->n;
	}
	iov[n].iov_base = (void *)cur;
	iov[n++].iov_len = (size_t)(m->raw + m->raw_len - cur);
	return n;
}

/* The message as one line. */
ssize_t msg_dump(struct msg *m, char **out)
{
	*out = NULL;
	if (m->tree && !msg_bytes_current(m)) {
		*out = json_dumps(m->tree, JSON_COMPACT);
		return *out ? (ssize_t)strlen(*out) : -1;
	}
	return msg_dump_bytes(m, out);
}

/* The bytes with their replacements as one line. */
static ssize_t msg_dump_bytes(struct msg *m, char **out)
{
	struct iovec iov[MSG_IOV_MAX];
	int n = msg_iov(m, iov);
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	char *p = malloc(len + 1);
	if (n < 0 || !p) {
		free(p);
		return -1;
	}
	*out = p;
	for (int i = 0; i < n; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	*p = '\0';
	return (ssize_t)len;
}

/* ---- what a request is about ---- */

/* The subject from a tree. */
static const char *tree_subject(json_t *t, const char *method, enum mcp_method code)
{
	json_t *params = json_object_get(t, "params");
	if (code == MCP_TOOLS_CALL || code == MCP_PROMPTS_GET)
		return json_string_value(json_object_get(params, "name"));
	if (strncmp(method, "resources/", 10) == 0)
		return json_string_value(json_object_get(params, "uri"));
	if (code == MCP_COMPLETION_COMPLETE) {
		json_t *ref = json_object_get(params, "ref");
		const char *n = json_string_value(json_object_get(ref, "name"));
		return n ? n : json_string_value(json_object_get(ref, "uri"));
	}
	return NULL;
}

/* The LEN bytes at S as a string in BUF (N bytes) if they fit, else in a
 * new *HEAP; NULL when out of memory. */
static const char *keep_subject(const char *s, size_t len, char *buf, size_t n, char **heap)
{
	if (len < n) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		return buf;
	}
	return *heap = strndup(s, len);
}

/* The subject of a request. */
const char *msg_subject(struct msg *m, char *buf, size_t n, char **heap)
{
	const char *method = msg_method(m);
	*heap = NULL;
	if (!method)
		return NULL;
	enum mcp_method code = mcp_method_code(method);
	if (!m->tree) {
		struct jspan s = { NULL, 0 };
		bool deep = code == MCP_COMPLETION_COMPLETE;
		if (code == MCP_TOOLS_CALL || code == MCP_PROMPTS_GET)
			s = m->js.name;
		else if (strncmp(method, "resources/", 10) == 0)
			s = m->js.uri;
		if (!deep && !m->js.subject_escaped)
			return s.p ? keep_subject(s.p, s.n, buf, n, heap) : NULL;
		if (!msg_tree(m))
			return NULL;
		method = msg_method(m);
	}
	const char *s = tree_subject(m->tree, method, code);
	return s ? keep_subject(s, strlen(s), buf, n, heap) : NULL;
}

/* How a response ended. */
int msg_outcome(struct msg *m)
{
	if (!m->tree)
		return m->js.is_error ? 2 : 0;
	if (json_object_get(m->tree, "error"))
		return 1;
	json_t *res = json_object_get(m->tree, "result");
	return json_is_true(json_object_get(res, "isError")) ? 2 : 0;
}

/* True unless M certainly has no params._meta[KEY]. */
bool msg_meta_has(struct msg *m, const char *key)
{
	if (m->tree || !m->raw) {
		json_t *params = json_object_get(m->tree, "params");
		return !m->tree || json_object_get(json_object_get(params, "_meta"), key);
	}
	struct jspan meta = m->js.span[MSG_SPAN_META];
	if (!meta.p)
		return false;   /* no params._meta: the common case, at once */
	size_t kn = strlen(key);
	if (meta.n < kn + 2)
		return false;
	/* the scanner declines escaped keys, so a member KEY is there as "KEY" */
	for (const char *p = meta.p, *e = meta.p + meta.n - kn - 1; p < e; p++) {
		p = memchr(p, '"', (size_t)(e - p));
		if (!p)
			return false;
		if (memcmp(p + 1, key, kn) == 0 && p[kn + 1] == '"')
			return true;
	}
	return false;
}

const char *msg_meta_str(struct msg *m, const char *key)
{
	if (!msg_meta_has(m, key))
		return NULL;
	json_t *params = json_object_get(msg_tree(m), "params");
	return json_string_value(json_object_get(json_object_get(params, "_meta"), key));
}

/* The object MEMBER of OBJ, made when missing; NULL when it is something else. */
static json_t *object_member(json_t *obj, const char *member)
{
	json_t *v = json_object_get(obj, member);
	if (!v && json_is_object(obj) && json_object_set_new(obj, member, json_object()) == 0)
		v = json_object_get(obj, member);
	return json_is_object(v) ? v : NULL;
}

/* True when S may go into JSON text as it is: printable, no quote or backslash. */
static bool plain_text(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\' || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* Inserts TEXT (N bytes) at offset AT of M's bytes; 0 or -1 (M unchanged). */
static int insert_bytes(struct msg *m, size_t at, const char *text, size_t n)
{
	char *data = malloc(m->raw_len + n);
	if (!data)
		return -1;
	memcpy(data, m->raw, at);
	memcpy(data + at, text, n);
	memcpy(data + at + n, m->raw + at, m->raw_len - at);
	msg_take_bytes(m, data, m->raw_len + n, at, at);
	return 0;
}

/*
 * msg_meta_set on the bytes, without a tree: the member goes first into
 * params._meta, or a new _meta goes after params.name (or uri), which the
 * scanner found inside params. 1 when done, 0 when the bytes do not allow
 * it (the tree then), -1 without memory.
 */
static int meta_set_bytes(struct msg *m, const char *key, const char *value)
{
	struct jspan meta = m->js.span[MSG_SPAN_META], subj = m->js.name.p ? m->js.name : m->js.uri;
	char text[640];
	if (!msg_is_raw(m) || m->js.subject_escaped || !plain_text(key) || !plain_text(value) ||
	    strlen(key) + strlen(value) > 600)
		return 0;
	if (meta.p) {
		if (meta.p[0] != '{' || msg_meta_has(m, key))
			return 0;
		const char *q = meta.p + 1;
		while (*q == ' ' || *q == '\t')
			q++;
		int n = snprintf(text, sizeof text, "\"%s\":\"%s\"%s", key, value, *q == '}' ? "" : ",");
		return insert_bytes(m, (size_t)(meta.p + 1 - m->raw), text, (size_t)n) < 0 ? -1 : 1;
	}
	size_t at = subj.p ? (size_t)(subj.p + subj.n - m->raw) : 0;
	if (!subj.p || at >= m->raw_len || m->raw[at] != '"')
		return 0;
	int n = snprintf(text, sizeof text, ",\"_meta\":{\"%s\":\"%s\"}", key, value);
	if (insert_bytes(m, at + 1, text, (size_t)n) < 0)
		return -1;
	m->js.span[MSG_SPAN_META] = (struct jspan){ m->raw + at + 1 + 9, (size_t)n - 9 };
	return 1;
}

int msg_meta_set(struct msg *m, const char *key, const char *value)
{
	int done = meta_set_bytes(m, key, value);
	if (done)
		return done < 0 ? -1 : 0;
	json_t *meta = object_member(object_member(msg_tree(m), "params"), "_meta");
	if (!meta || json_object_set_new(meta, key, json_string(value)) < 0)
		return -1;
	drop_bytes(m);   /* the tree is the message now */
	return 0;
}

/* Moves span S of the old bytes [OLD, OLD+OLDLEN) into DATA after an edit of [FROM, TO). */
static void move_span(struct jspan *s, const char *old, size_t oldlen, char *data, size_t len,
		      size_t from, size_t to)
{
	if (!s->p)
		return;
	size_t at = (size_t)(s->p - old), end = at + s->n, tail = oldlen - to;
	if (at < from && end > to)
		*s = (struct jspan){ data + at, s->n + len - oldlen };
	else if (end <= from)
		s->p = data + at;
	else if (at >= to)
		s->p = data + len - tail + (at - to);
	else
		*s = (struct jspan){ NULL, 0 };  /* inside the edit: no routing member lives there */
}

/* Replaces the raw bytes after an edit. */
void msg_take_bytes(struct msg *m, char *data, size_t len, size_t from, size_t to)
{
	for (int i = 0; i < MSG_SPANS; i++)
		move_span(&m->js.span[i], m->raw, m->raw_len, data, len, from, to);
	move_span(&m->js.name, m->raw, m->raw_len, data, len, from, to);
	move_span(&m->js.uri, m->raw, m->raw_len, data, len, from, to);
	m->js.method = (struct jspan){ NULL, 0 };
	free(m->own);
	m->raw = m->own = data;
	m->raw_len = len;
}
