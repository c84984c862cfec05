/*
 * fuzz_sse.c - libFuzzer target for src/external/sse.c: the same bytes
 * fed whole and cut in arbitrary chunks (sizes from the input's first
 * byte) give the same events (type, data, total, oversize, last id) and
 * the same retry delay; every event respects the bound.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_sse: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* The events of one run, each as one record of bytes. */
struct trace {
	char *b;
	size_t n, cap;
	size_t max;
	size_t events;
};

static void put(struct trace *t, const void *p, size_t n)
{
	if (t->n + n > t->cap) {
		t->cap = (t->n + n) * 2;
		t->b = realloc(t->b, t->cap);
		CHECK(t->b);
	}
	memcpy(t->b + t->n, p, n);
	t->n += n;
}

static void put_str(struct trace *t, const char *s)
{
	size_t n = s ? strlen(s) + 1 : 0;
	put(t, &n, sizeof n);
	if (s)
		put(t, s, n);
}

static int on_event(const struct sse_event *ev, void *arg)
{
	struct trace *t = arg;
	CHECK(ev->type && ev->data);
	CHECK(ev->data[ev->len] == '\0');
	CHECK(ev->oversize ? ev->total > t->max && ev->len <= t->max + SSE_PREFIX &&
	      ev->len <= ev->total :
	      ev->len == ev->total && ev->len <= t->max);
	put_str(t, ev->type);
	put_str(t, ev->id);
	put(t, &ev->len, sizeof ev->len);
	put(t, ev->data, ev->len);
	put(t, &ev->total, sizeof ev->total);
	put(t, &ev->oversize, sizeof ev->oversize);
	t->events++;
	return t->events < 100000 ? 0 : -1;
}

/* Parses DATA cut by SEED (0: whole) into T; returns the final retry delay. */
static long run(const uint8_t *data, size_t size, size_t max, unsigned seed, struct trace *t)
{
	struct sse p;
	sse_init(&p, max);
	t->max = max;
	for (size_t off = 0; off < size;) {
		size_t n = size - off;
		if (seed) {
			seed = seed * 1103515245u + 12345u;
			size_t c = (seed >> 16) % 23;
			n = c < n ? c : n;   /* empty chunks too */
		}
		if (sse_feed(&p, (const char *)data + off, n, on_event, t) < 0)
			break;
		off += n;
	}
	long retry = p.retry;
	sse_release(&p);
	return retry;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t max = data[0] < 0xF0 ? data[0] % 48 : 8192;
	unsigned seed = data[1] | 1u;
	data += 2;
	size -= 2;
	struct trace a = { 0 }, b = { 0 };
	long ra = run(data, size, max, 0, &a), rb = run(data, size, max, seed, &b);
	CHECK(a.events == b.events);
	CHECK(a.n == b.n && (a.n == 0 || memcmp(a.b, b.b, a.n) == 0));
	CHECK(ra == rb);
	free(a.b);
	free(b.b);
	return 0;
}
