/*
 * jskim: the JSON skimmer used by mcp-bench-server's fast path and by
 * mcp-bench-load to read responses without building jansson trees (see
 * jskim.h for what it checks and what it does not).
 */
#include "jskim.h"

#include <string.h>

/* Skip JSON white space from p. */
const char *jskim_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Skip a JSON string starting at its quote. */
const char *jskim_string(const char *p, const char *e, bool *escaped)
{
	if (p >= e || *p != '"')
		return NULL;
	for (p++; p < e;) {
		/* Short strings: a plain loop is cheapest. */
		const char *lim = e - p > 32 ? p + 32 : e;
		for (; p < lim; p++) {
			if (*p == '"')
				return p + 1;
			if (*p == '\\') {
				if (escaped)
					*escaped = true;
				p++; /* skip the escaped character */
			}
		}
		if (p >= e)
			return NULL;
		/* Long strings (a blob): let memchr do the scanning. */
		const char *q = memchr(p, '"', (size_t)(e - p));
		if (!q)
			return NULL;
		const char *bs = memchr(p, '\\', (size_t)(q - p));
		if (!bs)
			return q + 1;
		if (escaped)
			*escaped = true;
		p = bs + 2;
	}
	return NULL;
}

/* Skip a JSON number or literal (true, false, null). */
static const char *skim_scalar(const char *p, const char *e)
{
	const char *start = p;
	while (p < e && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
	                 *p == '-' || *p == '+' || *p == '.' || *p == 'E'))
		p++;
	return p > start ? p : NULL;
}

/* Skip any JSON value. */
const char *jskim_value(const char *p, const char *e)
{
	p = jskim_ws(p, e);
	if (p >= e)
		return NULL;
	if (*p == '"')
		return jskim_string(p, e, NULL);
	if (*p == '{')
		return jskim_object(p, e, NULL, NULL, 0);
	if (*p == '[')
		return jskim_array(p, e, NULL, NULL, 0, NULL);
	return skim_scalar(p, e);
}

/* Walk an object, handing each member to fn. */
const char *jskim_object(const char *p, const char *e, jskim_fn *fn,
                         void *ctx, int depth)
{
	p = jskim_ws(p, e);
	if (p >= e || *p != '{')
		return NULL;
	p = jskim_ws(p + 1, e);
	if (p < e && *p == '}')
		return p + 1;
	for (;;) {
		const char *k = jskim_ws(p, e);
		const char *kend = jskim_string(k, e, NULL);
		if (!kend)
			return NULL;
		p = jskim_ws(kend, e);
		if (p >= e || *p != ':')
			return NULL;
		const char *v = jskim_ws(p + 1, e);
		const char *vend = fn ? fn(ctx, k + 1, (size_t)(kend - k - 2), v, e,
		                           depth) : NULL;
		if (!vend)
			vend = jskim_value(v, e);
		if (!vend)
			return NULL;
		p = jskim_ws(vend, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		return p < e && *p == '}' ? p + 1 : NULL;
	}
}

/* Walk an array, optionally walking its first element with fn. */
const char *jskim_array(const char *p, const char *e, jskim_fn *fn, void *ctx,
                        int depth, long *count)
{
	long n = 0;
	p = jskim_ws(p, e);
	if (p >= e || *p != '[')
		return NULL;
	p = jskim_ws(p + 1, e);
	if (count)
		*count = 0;
	if (p < e && *p == ']')
		return p + 1;
	for (;;) {
		const char *q = NULL;
		if (n == 0 && fn && p < e && *p == '{')
			q = jskim_object(p, e, fn, ctx, depth);
		p = q ? q : jskim_value(p, e);
		if (!p)
			return NULL;
		n++;
		if (count)
			*count = n;
		p = jskim_ws(p, e);
		if (p < e && *p == ',') {
			p = jskim_ws(p + 1, e);
			continue;
		}
		return p < e && *p == ']' ? p + 1 : NULL;
	}
}

/* Compare a raw key with a name. */
bool jskim_key_is(const char *key, size_t klen, const char *name)
{
	return strlen(name) == klen && memcmp(key, name, klen) == 0;
}

/* Compare a raw string span (with quotes) with a name. */
bool jskim_str_is(const char *v, const char *vend, const char *name)
{
	size_t n = strlen(name);
	return (size_t)(vend - v) == n + 2 && v[0] == '"' &&
	       memcmp(v + 1, name, n) == 0;
}
