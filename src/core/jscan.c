/*
 * jscan.c - validating JSON scanner that records routing members.
 */
#include "jscan.h"

#include <string.h>

#define MAX_DEPTH 64

struct scan {
	const char *p;
	const char *e;
	int depth;
	bool ok;
};

static const char *value(struct scan *s, const char *p);

/* Skips white space. */
static const char *ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Length of a valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_len(const unsigned char *p, const unsigned char *e)
{
	unsigned c = p[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, min = 0x10000;
	else
		return 0;
	if ((size_t)(e - p) < n)
		return 0;
	unsigned v = c & (0x7F >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	return n;
}

/* Checks the 4 hex digits of a \u escape; surrogates are declined. */
static bool hex4(const char *p, const char *e)
{
	unsigned v = 0;
	if (e - p < 4)
		return false;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return false;
	}
	return !(v >= 0xD800 && v <= 0xDFFF);
}

/* Bytes that need a closer look inside a string: controls, '"', '\\', non-ASCII. */
static bool special(unsigned char c)
{
	return c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
}

/* Scans a string at p ('"'); returns the byte after it or NULL. */
static const char *string(const char *p, const char *e, bool *escaped)
{
	for (p++; p < e;) {
		while (p + 4 <= e && !special((unsigned char)p[0]) && !special((unsigned char)p[1]) &&
		       !special((unsigned char)p[2]) && !special((unsigned char)p[3]))
			p += 4;  /* plain ASCII, the common case, four at a time */
		while (p < e && !special((unsigned char)*p))
			p++;
		if (p >= e)
			return NULL;
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c == '\\') {
			if (escaped)
				*escaped = true;
			if (++p >= e)
				return NULL;
			if (*p == 'u') {
				if (!hex4(p + 1, e))
					return NULL;
				p += 5;
			} else if (strchr("\"\\/bfnrt", *p) && *p) {
				p++;
			} else {
				return NULL;
			}
			continue;
		}
		size_t n = utf8_len((const unsigned char *)p, (const unsigned char *)e);
		if (!n)
			return NULL;
		p += n;
	}
	return NULL;
}

/* Scans a number; declines integers jansson might overflow. */
static const char *number(const char *p, const char *e)
{
	const char *start;
	if (p < e && *p == '-')
		p++;
	start = p;
	if (p < e && *p == '0')
		p++;
	else if (p < e && *p >= '1' && *p <= '9')
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	size_t int_digits = (size_t)(p - start);
	bool real = false;
	if (p < e && *p == '.') {
		real = true;
		const char *d = ++p;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
		if (p == d)
			return NULL;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		real = true;
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		const char *d = p;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
		if (p == d || p - d > 2)
			return NULL;
	}
	if ((!real && int_digits > 18) || int_digits > 300)
		return NULL;
	return p;
}

/* Scans a literal. */
static const char *literal(const char *p, const char *e, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(e - p) < n || memcmp(p, word, n) != 0)
		return NULL;
	return p + n;
}

/* Scans an array. */
static const char *array(struct scan *s, const char *p)
{
	p = ws(p + 1, s->e);
	if (p < s->e && *p == ']')
		return p + 1;
	for (;;) {
		p = value(s, p);
		if (!p)
			return NULL;
		p = ws(p, s->e);
		if (p < s->e && *p == ',') {
			p++;
			continue;
		}
		return p < s->e && *p == ']' ? p + 1 : NULL;
	}
}

/* Called for each member: may record it. */
typedef void (*member_fn)(void *ctx, const char *k, size_t kn, bool kesc,
			  const char *v, const char *vend, struct scan *s);

/* Scans an object, calling FN (if any) for each member. */
static const char *object(struct scan *s, const char *p, member_fn fn, void *ctx)
{
	p = ws(p + 1, s->e);
	if (p < s->e && *p == '}')
		return p + 1;
	for (;;) {
		if (p >= s->e || *p != '"')
			return NULL;
		bool kesc = false;
		const char *kend = string(p, s->e, &kesc);
		if (!kend)
			return NULL;
		const char *q = ws(kend, s->e);
		if (q >= s->e || *q != ':')
			return NULL;
		const char *v = ws(q + 1, s->e);
		const char *vend = value(s, v);
		if (!vend)
			return NULL;
		if (fn)
			fn(ctx, p + 1, (size_t)(kend - p - 2), kesc, v, vend, s);
		p = ws(vend, s->e);
		if (p < s->e && *p == ',') {
			p = ws(p + 1, s->e);
			continue;
		}
		return p < s->e && *p == '}' ? p + 1 : NULL;
	}
}

/* Scans any value. */
static const char *value(struct scan *s, const char *p)
{
	const char *r;
	p = ws(p, s->e);
	if (p >= s->e)
		return NULL;
	switch (*p) {
	case '"':
		return string(p, s->e, NULL);
	case '{':
	case '[':
		if (++s->depth > MAX_DEPTH)
			return NULL;
		r = *p == '{' ? object(s, p, NULL, NULL) : array(s, p);
		s->depth--;
		return r;
	case 't':
		return literal(p, s->e, "true");
	case 'f':
		return literal(p, s->e, "false");
	case 'n':
		return literal(p, s->e, "null");
	default:
		return number(p, s->e);
	}
}

/* True when [k, k+kn) is NAME. */
static bool key_is(const char *k, size_t kn, const char *name)
{
	return strlen(name) == kn && memcmp(k, name, kn) == 0;
}

/* Sets a span once; a second occurrence makes the scan decline. */
static void set_span(struct jspan *sp, const char *v, const char *vend, struct scan *s)
{
	if (sp->p)
		s->ok = false;
	sp->p = v;
	sp->n = (size_t)(vend - v);
}

/* Members of params._meta. */
static void meta_member(void *ctx, const char *k, size_t kn, bool kesc,
			const char *v, const char *vend, struct scan *s)
{
	struct jscan *out = ctx;
	if (kesc)
		s->ok = false;
	else if (key_is(k, kn, "progressToken"))
		set_span(&out->token, v, vend, s);
}

/* Members of params. */
static void params_member(void *ctx, const char *k, size_t kn, bool kesc,
			  const char *v, const char *vend, struct scan *s)
{
	struct jscan *out = ctx;
	if (kesc) {
		s->ok = false;
		return;
	}
	if (key_is(k, kn, "_meta") && *v == '{') {
		s->depth++;
		object(s, v, meta_member, out);
		s->depth--;
	} else if (key_is(k, kn, "progressToken")) {
		set_span(&out->token, v, vend, s);
	} else if (key_is(k, kn, "requestId")) {
		set_span(&out->request_id, v, vend, s);
	}
}

/* Members of the message itself. */
static void top_member(void *ctx, const char *k, size_t kn, bool kesc,
		       const char *v, const char *vend, struct scan *s)
{
	struct jscan *out = ctx;
	if (kesc) {
		s->ok = false;
		return;
	}
	if (key_is(k, kn, "id")) {
		set_span(&out->id, v, vend, s);
		out->id_is_string = *v == '"';
		if (*v != '"' && *v != '-' && (*v < '0' || *v > '9'))
			s->ok = false;  /* null, objects...: the full path answers */
		if (*v == '"' && memchr(v, '\\', (size_t)(vend - v)))
			s->ok = false;
		if (*v != '"' && memchr(v, '.', (size_t)(vend - v)))
			s->ok = false;
	} else if (key_is(k, kn, "method")) {
		if (*v != '"' || memchr(v, '\\', (size_t)(vend - v)))
			s->ok = false;
		else
			set_span(&out->method, v + 1, vend - 1, s);
	} else if (key_is(k, kn, "jsonrpc")) {
		if (vend - v != 5 || memcmp(v, "\"2.0\"", 5) != 0 || out->has_jsonrpc)
			s->ok = false;
		out->has_jsonrpc = true;
	} else if (key_is(k, kn, "params")) {
		if (*v == '{') {
			s->depth++;
			object(s, v, params_member, out);
			s->depth--;
		} else if (*v != '[') {
			s->ok = false;
		}
		out->has_params = true;
	} else if (key_is(k, kn, "result")) {
		if (out->has_result)
			s->ok = false;
		out->has_result = true;
	} else if (key_is(k, kn, "error")) {
		out->has_error = true;
		s->ok = false;  /* error objects are checked on the full path */
	}
}

/* Scans a whole message. */
bool jscan_message(const char *p, size_t n, struct jscan *out)
{
	struct scan s = { .p = p, .e = p + n, .ok = true };
	memset(out, 0, sizeof *out);
	const char *q = ws(p, s.e);
	if (q >= s.e || *q != '{')
		return false;
	s.depth = 1;
	q = object(&s, q, top_member, out);
	if (!q || ws(q, s.e) != s.e || !s.ok || !out->has_jsonrpc)
		return false;
	if (out->method.p)
		return !out->has_result && !out->has_error;
	return out->id.p && (out->has_result != out->has_error);
}

/* Compares a span with a string. */
bool jspan_eq(struct jspan s, const char *str)
{
	return s.p && strlen(str) == s.n && memcmp(s.p, str, s.n) == 0;
}
