/*
 * fuzz_http_parse.c - libFuzzer target for the strict HTTP/1.1 request
 * framing (src/front/http_parse.c). The input is read as a request head;
 * when it parses with a chunked body, what follows the head is decoded
 * as that body; the whole input is also decoded as a body on its own.
 * Checks: a head parses to at most N bytes ending in CRLF CRLF, every
 * span inside it, no bare LF, CR or NUL in it, fields consistent with what
 * the request says; a refusal carries a documented status and a reason;
 * a shorter read of the same bytes is incomplete or ends the same way
 * (the same head, or the same status); a body decodes to the same bytes
 * and the same outcome whole, cut at points taken from the input, and
 * byte by byte, within its limit, consuming nothing after its end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_http_parse: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* FNV-1a of the input: where to cut it, which limits to use. */
static uint64_t mix(const uint8_t *d, size_t n)
{
	uint64_t h = 14695981039346656037u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ d[i]) * 1099511628211u;
	return h;
}

/* True when span S lies inside [B, B + N). */
static bool inside(struct hp_span s, const char *b, size_t n)
{
	return s.p >= b && s.n <= n && (size_t)(s.p - b) <= n - s.n;
}

/* True for a status hp_parse_head documents. */
static bool head_status(unsigned st)
{
	return st == 400 || st == 414 || st == 417 || st == 431 || st == 501 || st == 505;
}

/* The bytes of a head that parsed: CRLF line ends, no NUL, CRLF CRLF at the end. */
static void check_head_bytes(const char *b, size_t n)
{
	CHECK(n >= 4 && memcmp(b + n - 4, "\r\n\r\n", 4) == 0);
	for (size_t i = 0; i < n; i++) {
		CHECK(b[i] != '\0');
		if (b[i] == '\n')
			CHECK(i > 0 && b[i - 1] == '\r');
		if (b[i] == '\r')
			CHECK(i + 1 < n && b[i + 1] == '\n');
	}
}

/* A head that parsed to N bytes of B: what REQ says agrees with itself. */
static void check_request(const struct hp_request *q, const char *b, size_t n)
{
	check_head_bytes(b, n);
	CHECK(q->method.n > 0 && inside(q->method, b, n));
	CHECK(q->target.n > 0 && q->target.n <= HP_MAX_TARGET && inside(q->target, b, n));
	CHECK(q->path.n > 0);
	CHECK(inside(q->path, q->target.p, q->target.n) || (q->path.n == 1 && q->path.p[0] == '/'));
	CHECK(q->query.n == 0 || inside(q->query, q->target.p, q->target.n));
	CHECK(q->minor <= 1);
	CHECK(q->nheaders <= HP_MAX_HEADERS);
	for (size_t i = 0; i < q->nheaders; i++) {
		CHECK(q->headers[i].name.n > 0 && inside(q->headers[i].name, b, n));
		CHECK(inside(q->headers[i].value, b, n));
	}
	const struct hp_span *host = hp_header(q, "Host");
	CHECK(host ? q->host.p == host->p && q->host.n == host->n && host->n > 0 : q->host.n == 0);
	CHECK(q->minor == 0 || host);
	CHECK(q->body != HP_BODY_CHUNKED || (q->minor == 1 && hp_header(q, "transfer-encoding")));
	CHECK(q->body != HP_BODY_LENGTH || (q->length <= INT64_MAX && hp_header(q, "content-length")));
	CHECK(q->body != HP_BODY_NONE || (!hp_header(q, "content-length") &&
					  !hp_header(q, "transfer-encoding")));
	CHECK(!q->expect_continue || (q->minor == 1 && hp_header(q, "expect")));
	CHECK(!q->keep_alive || q->minor == 1 || hp_header(q, "connection"));
}

/* hp_parse_head on the first K bytes of B: *R and *ST; checked for the shape of its answer. */
static void parse(const char *b, size_t k, size_t max, struct hp_request *q, ssize_t *r, unsigned *st)
{
	const char *why = NULL;
	*st = 0;
	*r = hp_parse_head(b, k, max, q, st, &why);
	CHECK(*r >= -1 && (*r < 0 || (size_t)*r <= k));
	CHECK(*r <= 0 || (size_t)*r <= max);
	CHECK(*r != 0 || k < max);
	CHECK(*r != -1 || (head_status(*st) && why && why[0]));
	if (*r > 0)
		check_request(q, b, (size_t)*r);
}

/* A read of the first K bytes agrees with the read of all: incomplete, or
 * the same head, or the same refusal. */
static void check_prefix(const char *b, size_t k, size_t max, ssize_t r, unsigned st)
{
	static struct hp_request q;
	ssize_t rk;
	unsigned sk;
	parse(b, k, max, &q, &rk, &sk);
	if (r > 0 && (size_t)r <= k)
		CHECK(rk == r);
	else if (rk != 0)
		CHECK(rk == -1 && r == -1 && sk == st);
}

/* A decoding of a body. */
struct run {
	ssize_t r;                   /* -1, or the bytes consumed */
	unsigned status;
	bool done;
	char *out;                   /* the decoded bytes */
	size_t n, cap;
};

/* Collects decoded bytes into the run ARG. */
static int sink(void *arg, const char *p, size_t n)
{
	struct run *u = arg;
	CHECK(n > 0 && u->n + n <= u->cap);
	memcpy(u->out + u->n, p, n);
	u->n += n;
	return 0;
}

/* The end of the piece that starts at OFF: STEP bytes on, or the next of
 * the NCUTS ascending CUTS after OFF, or N. */
static size_t piece_end(size_t off, size_t n, const size_t *cuts, size_t ncuts, size_t step)
{
	if (step)
		return n - off < step ? n : off + step;
	for (size_t i = 0; i < ncuts; i++)
		if (cuts[i] > off && cuts[i] < n)
			return cuts[i];
	return n;
}

/* Once done, the decoder takes nothing more. */
static void check_done(struct hp_chunked *c, const char *in, size_t n, struct run *u)
{
	bool done = false;
	unsigned st = 0;
	const char *why = NULL;
	CHECK(hp_chunked_feed(c, in, n, sink, u, &done, &st, &why) == 0 && done);
}

/* Decodes IN (N bytes) under MAX in pieces (see piece_end) into U. */
static void decode(const char *in, size_t n, uint64_t max, const size_t *cuts, size_t ncuts,
		   size_t step, struct run *u)
{
	struct hp_chunked c;
	size_t off = 0;
	hp_chunked_init(&c, max);
	u->n = 0;
	u->done = false;
	u->status = 0;
	do {
		size_t end = piece_end(off, n, cuts, ncuts, step);
		const char *why = NULL;
		ssize_t r = hp_chunked_feed(&c, in + off, end - off, sink, u, &u->done, &u->status, &why);
		if (r < 0) {
			CHECK(r == -1 && (u->status == 400 || u->status == 413) && why && why[0]);
			u->r = -1;
			return;
		}
		CHECK((size_t)r <= end - off && (u->done || (size_t)r == end - off));
		off += (size_t)r;
	} while (!u->done && off < n);
	u->r = (ssize_t)off;
	CHECK(c.total == u->n && c.total <= max && u->n <= off);
	CHECK(!u->done || (off >= 5 && memcmp(in + off - 2, "\r\n", 2) == 0));
	if (u->done)
		check_done(&c, in + off, n - off, u);
}

/* The same outcome and the same bytes. */
static void check_same(const struct run *a, const struct run *b)
{
	CHECK(a->r == b->r && a->status == b->status && a->done == b->done);
	CHECK(a->n == b->n && memcmp(a->out, b->out, a->n) == 0);
}

/* Decodes IN (N bytes) under MAX whole, cut at points taken from H, and
 * (when short) byte by byte: the same every way. */
static void check_body(const char *in, size_t n, uint64_t max, uint64_t h)
{
	struct run whole = { .cap = n }, cut = { .cap = n };
	whole.out = malloc(n + 1);
	cut.out = malloc(n + 1);
	CHECK(whole.out && cut.out);
	decode(in, n, max, NULL, 0, 0, &whole);
	size_t a = (size_t)(h % (n + 1)), b = (size_t)((h >> 24) % (n + 1));
	size_t cuts[3] = { a < b ? a : b, a < b ? b : a, n / 2 > (a < b ? b : a) ? n / 2 : n };
	decode(in, n, max, cuts, 3, 0, &cut);
	check_same(&whole, &cut);
	if (n <= 4096) {
		decode(in, n, max, NULL, 0, 1, &cut);
		check_same(&whole, &cut);
	}
	free(whole.out);
	free(cut.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hp_request q;
	static const size_t head_max[] = { 65536, 64, 1024, 0 };
	static const uint64_t body_max[] = { UINT64_MAX, 0, 5, 300 };
	const char *in = (const char *)data;
	uint64_t h = mix(data, size);
	size_t max = head_max[h % 4] ? head_max[h % 4] : size;   /* 0: exactly the input */
	ssize_t r;
	unsigned st;
	parse(in, size, max, &q, &r, &st);
	bool chunked = r > 0 && q.body == HP_BODY_CHUNKED;
	uint64_t bmax = body_max[(h >> 8) % 4];
	if (chunked)
		check_body(in + r, size - (size_t)r, bmax, h >> 16);
	check_body(in, size, bmax, h >> 32);
	if (size <= 512) {
		for (size_t k = 0; k < size; k++)
			check_prefix(in, k, max, r, st);
	} else {
		check_prefix(in, (size_t)(h % size), max, r, st);
		check_prefix(in, size / 2, max, r, st);
		check_prefix(in, size - 1, max, r, st);
		if (r > 0)
			check_prefix(in, (size_t)r - 1, max, r, st);
	}
	return 0;
}
