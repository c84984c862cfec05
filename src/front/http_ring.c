/*
 * http_ring.c - the kept events of one SSE stream of the HTTP front (see
 * http_ring.h): a list of framed events with a read position, a count of
 * what was never handed out, and a high-water mark that tells the two
 * apart after a rewind.
 */
#include "http_ring.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sse_frame.h"

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
	char id[SSE_FRAME_ID_MAX];
	size_t idn = sse_frame_id_lines(id, stream, seq);
	size_t len = sse_frame_write(NULL, id, idn, data, n);
	struct http_ring_ev *e = malloc(sizeof *e + len);
	if (!e)
		return -1;
	sse_frame_write(e->bytes, id, idn, data, n);
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
