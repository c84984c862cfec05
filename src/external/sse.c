/*
 * sse.c - Server-Sent Events framing for HTTP upstreams: bytes in, in any
 * chunking; events out, with a bound on their size (see sse.h).
 */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#define LINE_SLACK 64          /* room for a field name beyond the data bound */
#define SHRINK_ABOVE 65536     /* give large buffers back after an event */

/* buf_append, skipping empty appends (an empty buffer has no memory yet). */
static int append(struct buf *b, const char *s, size_t n)
{
	return n ? buf_append(b, s, n) : 0;
}

/* Prepares a parser. */
void sse_init(struct sse *p, size_t max)
{
	memset(p, 0, sizeof *p);
	p->max = max;
	p->retry = -1;
	p->first_line = true;
}

/* Frees the buffers and strings. */
void sse_release(struct sse *p)
{
	buf_release(&p->line);
	buf_release(&p->data);
	free(p->type);
	free(p->id);
	p->type = p->id = NULL;
}

/* Appends K bytes to the current line, keeping only a prefix past the bound. */
static int line_add(struct sse *p, const char *s, size_t k)
{
	size_t keep = SSE_PREFIX + LINE_SLACK;
	p->line_total += k;
	if (!p->line_over && p->line.len + k > p->max + LINE_SLACK) {
		p->line_over = true;
		if (p->line.len > keep)
			p->line.len = keep;
	}
	if (p->line_over) {
		if (p->line.len >= keep)
			return 0;
		k = k < keep - p->line.len ? k : keep - p->line.len;
	}
	return append(&p->line, s, k);
}

/* Forgets the current line. */
static void line_reset(struct sse *p)
{
	p->line.len = 0;
	p->line_total = 0;
	p->line_over = false;
	buf_shrink(&p->line, SHRINK_ABOVE);
}

/* Forgets the current event (not the last event id nor the retry delay). */
static void event_reset(struct sse *p)
{
	p->data.len = 0;
	p->data_total = 0;
	p->data_over = false;
	free(p->type);
	p->type = NULL;
	buf_shrink(&p->data, SHRINK_ABOVE);
}

/* Hands the event to FN, if it has data (a blank line was read). */
static int dispatch(struct sse *p, sse_event_fn fn, void *arg)
{
	if (p->data_total == 0) {
		event_reset(p);
		return 0;
	}
	struct sse_event ev = {
		.type = p->type ? p->type : "message",
		.total = p->data_total - 1,
		.oversize = p->data_over,
		.id = p->id,
	};
	if (!p->data_over)
		p->data.len--;  /* the "\n" after the last data line */
	if (buf_append(&p->data, "", 1) < 0)
		return -1;
	ev.data = p->data.data;
	ev.len = p->data.len - 1;
	int rc = fn(&ev, arg);
	event_reset(p);
	return rc;
}

/* A "data:" value: appended with its "\n", or counted once past the bound. */
static int add_data(struct sse *p, const char *v, size_t vlen, bool cut)
{
	p->data_total += (cut ? p->line_total - (size_t)(v - p->line.data) : vlen) + 1;
	if (!p->data_over && (cut || p->data.len + vlen > p->max))
		p->data_over = true;
	if (p->data_over) {
		if (p->data.len >= SSE_PREFIX)
			return 0;
		vlen = vlen < SSE_PREFIX - p->data.len ? vlen : SSE_PREFIX - p->data.len;
		return append(&p->data, v, vlen);
	}
	if (p->data.len == 0 && p->data.cap < p->line.cap) {
		/* a large single-line event: take the line's buffer, not a copy */
		memmove(p->line.data, v, vlen);
		p->line.len = vlen;
		struct buf t = p->data;
		p->data = p->line;
		p->line = t;
		return buf_append(&p->data, "\n", 1);
	}
	if (append(&p->data, v, vlen) < 0)
		return -1;
	return buf_append(&p->data, "\n", 1);
}

/* True when the N bytes at S are all decimal digits (and there are some). */
static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* Applies one "field: value" line. */
static int field(struct sse *p, const char *f, size_t flen, const char *v, size_t vlen)
{
	if (flen == 4 && memcmp(f, "data", 4) == 0)
		return add_data(p, v, vlen, p->line_over);
	if (p->line_over)
		return 0;  /* nothing but data may be that long */
	if (flen == 5 && memcmp(f, "event", 5) == 0) {
		free(p->type);
		p->type = strndup(v, vlen);
		return p->type ? 0 : -1;
	}
	if (flen == 2 && memcmp(f, "id", 2) == 0) {
		if (memchr(v, '\0', vlen))
			return 0;
		free(p->id);
		p->id = vlen ? strndup(v, vlen) : NULL;
		return vlen && !p->id ? -1 : 0;
	}
	if (flen == 5 && memcmp(f, "retry", 5) == 0 && all_digits(v, vlen))
		p->retry = vlen > 9 ? 999999999L : strtol(strndupa(v, vlen), NULL, 10);
	return 0;
}

/* A whole line was read: a blank line dispatches, others are fields. */
static int line_end(struct sse *p, sse_event_fn fn, void *arg)
{
	const char *l = p->line.data;
	size_t len = p->line.len;
	int rc = 0;
	if (p->first_line && len >= 3 && memcmp(l, "\xEF\xBB\xBF", 3) == 0) {
		l += 3;
		len -= 3;
	}
	p->first_line = false;
	if (len == 0 && !p->line_over) {
		line_reset(p);
		return dispatch(p, fn, arg);
	}
	if (l[0] != ':') {
		const char *colon = memchr(l, ':', len);
		size_t flen = colon ? (size_t)(colon - l) : len;
		const char *v = colon ? colon + 1 : l + len;
		if (colon && v < l + len && *v == ' ')
			v++;
		rc = field(p, l, flen, v, (size_t)(l + len - v));
	}
	line_reset(p);
	return rc;
}

/* Length of the run of bytes at S (of N) before the first "\r" or "\n". */
static size_t to_eol(const char *s, size_t n)
{
	const char *lf = memchr(s, '\n', n);
	size_t k = lf ? (size_t)(lf - s) : n;
	const char *cr = memchr(s, '\r', k);
	return cr ? (size_t)(cr - s) : k;
}

/* Parses a chunk. */
int sse_feed(struct sse *p, const char *chunk, size_t n, sse_event_fn fn, void *arg)
{
	size_t i = 0;
	if (n > 0 && p->after_cr && chunk[0] == '\n')
		i = 1;  /* the "\n" of a "\r\n" split across chunks */
	if (n > 0)
		p->after_cr = false;
	while (i < n) {
		size_t k = to_eol(chunk + i, n - i);
		if (line_add(p, chunk + i, k) < 0)
			return -1;
		if (i + k == n)
			break;
		char eol = chunk[i + k];
		i += k + 1;
		if (eol == '\r' && i == n)
			p->after_cr = true;
		else if (eol == '\r' && chunk[i] == '\n')
			i++;
		if (line_end(p, fn, arg) < 0)
			return -1;
	}
	return 0;
}
