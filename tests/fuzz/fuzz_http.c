/*
 * fuzz_http.c - libFuzzer target for the HTTP front's request handling
 * (src/front/http_check.c, http_sid.c, sse_frame.c, http_ring.c): the
 * Host, Origin, Accept and Content-Type checks and session ids on any
 * header text, with no undefined behaviour and the shapes they promise;
 * and SSE framing against the SSE parser (src/external/sse.c): any data
 * written as an event by sse_frame_event reads back as exactly one event
 * with that data (its line breaks, CR, LF or CRLF, read as LF), that id
 * and the type "message".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "http_check.h"
#include "http_ring.h"
#include "http_sid.h"
#include "sse_frame.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_http: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

struct got {
	int events;
	char *data;
	size_t len;
	char id[32];
	char type[16];
};

static int on_event(const struct sse_event *ev, void *arg)
{
	struct got *g = arg;
	g->events++;
	free(g->data);
	g->data = malloc(ev->len + 1);
	CHECK(g->data);
	memcpy(g->data, ev->data, ev->len);
	g->len = ev->len;
	snprintf(g->id, sizeof g->id, "%s", ev->id ? ev->id : "");
	snprintf(g->type, sizeof g->type, "%s", ev->type ? ev->type : "");
	return 0;
}

/* DATA with every CR, LF or CRLF read as one LF, into OUT (N bytes); its length. */
static size_t normalized(const char *d, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == '\r') {
			out[o++] = '\n';
			if (i + 1 < n && d[i + 1] == '\n')
				i++;
		} else {
			out[o++] = d[i];
		}
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	CHECK(s);
	memcpy(s, data, size);
	s[size] = '\0';   /* a header value as the HTTP layer hands it (NUL-terminated; it refuses a NUL inside) */
	char *const extra[] = { "example.test:8080", "http://app.example.test", NULL };
	unsigned port = size ? data[0] * 256u + (size > 1 ? data[1] : 0) : 8080;
	(void)http_check_host(s, port, extra);
	(void)http_check_host(s, port, NULL);
	(void)http_check_origin(s, port, extra);
	(void)http_check_accepts(s, "text/event-stream");
	(void)http_check_accepts(s, "application/json");
	(void)http_check_json_type(s);
	if (http_sid_valid(s)) {
		/* a random id (32 lowercase hex digits), or a sealed one: TAG.BOX, both
		 * base64url letters, visible ASCII, bounded */
		size_t tl = 0;
		bool hex = strlen(s) == HTTP_SID_LEN && strspn(s, "0123456789abcdef") == HTTP_SID_LEN;
		CHECK(hex || http_sid_sealed(s, &tl));
		CHECK(strlen(s) <= HTTP_SID_MAX);
		for (const char *c = s; *c; c++)
			CHECK(*c > 0x20 && *c < 0x7f);
		if (!hex) {
			CHECK(tl >= 1 && tl <= 32 && s[tl] == '.');
			/* opening what is not ours fails cleanly, whatever it holds */
			static const unsigned char key[1][32] = { { 1 } };
			struct http_sid_keys k = { .keys = key, .nkeys = 1, .tag = "a", .max_age = 60 };
			const char *why = NULL;
			json_t *st = http_sid_open(&k, s, 1000, &why);
			CHECK(!st && why);
		}
	}

	/* SSE: written, then read back, whole and cut in two */
	uint64_t id = 0;
	for (size_t i = 0; i < size && i < 8; i++)
		id = id * 131 + data[i];
	unsigned stream = (unsigned)(id >> 40);
	struct buf out = BUF_INIT;
	CHECK(sse_frame_event(&out, stream, id, (const char *)data, size) == 0);
	char *want = malloc(size + 1);
	CHECK(want);
	size_t wn = normalized((const char *)data, size, want);
	char idtext[48];
	snprintf(idtext, sizeof idtext, "%u-%llu", stream, (unsigned long long)id);
	unsigned ps;
	uint64_t pn;
	CHECK(sse_frame_id_parse(idtext, &ps, &pn) == 0 && ps == stream && pn == id);
	(void)sse_frame_id_parse(s, &ps, &pn);   /* any header text */
	struct http_ring ring;     /* framed straight into a ring: the same bytes */
	struct buf again = BUF_INIT;
	http_ring_init(&ring);
	CHECK(http_ring_add_event(&ring, stream, id, (const char *)data, size) == 0);
	CHECK(http_ring_drain(&ring, &again) == 0);
	CHECK(again.len == out.len && memcmp(again.data, out.data, out.len) == 0);
	buf_release(&again);
	http_ring_release(&ring);
	for (int cut = 0; cut < 2; cut++) {
		struct sse p;
		struct got g = { 0 };
		size_t at = cut ? out.len / 2 : out.len;
		sse_init(&p, size + 16);
		CHECK(sse_feed(&p, out.data, at, on_event, &g) == 0);
		CHECK(sse_feed(&p, out.data + at, out.len - at, on_event, &g) == 0);
		CHECK(g.events == 1);
		CHECK(g.len == wn && memcmp(g.data, want, wn) == 0);
		CHECK(strcmp(g.id, idtext) == 0);
		CHECK(strcmp(g.type, "message") == 0);
		free(g.data);
		sse_release(&p);
	}
	free(want);
	buf_release(&out);
	free(s);
	return 0;
}
