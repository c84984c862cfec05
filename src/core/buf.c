/*
 * buf.c - growable byte buffer.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frees the memory. */
void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->off = b->len = b->cap = 0;
}

/* Grows geometrically so appends are amortised O(1). */
int buf_reserve(struct buf *b, size_t n)
{
	if (b->cap - b->len >= n)
		return 0;
	if (b->off > 0 && b->off >= b->cap / 2) {
		buf_compact(b);
		if (b->cap - b->len >= n)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n) {
		if (cap > ((size_t)-1) / 2)
			return -1;
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = cap;
	return 0;
}

/* Appends bytes. */
int buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (buf_reserve(b, n) < 0)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Consumes bytes from the front. */
void buf_consume(struct buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len)
		b->off = b->len = 0;
}

/* Slides pending bytes to offset 0. */
void buf_compact(struct buf *b)
{
	if (b->off == 0)
		return;
	memmove(b->data, b->data + b->off, b->len - b->off);
	b->len -= b->off;
	b->off = 0;
}

/* Returns a large allocation to the system once it is idle. */
void buf_shrink(struct buf *b, size_t limit)
{
	if (b->len == b->off && b->cap > limit) {
		free(b->data);
		b->data = NULL;
		b->off = b->len = b->cap = 0;
	}
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n + 1) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int buf_dump_cb(const char *p, size_t n, void *data)
{
	return buf_append(data, p, n);
}
