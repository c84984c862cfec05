/*
 * test_http_util.c - unit tests for src/front/http_util.c: Host and Origin
 * checks, Accept and Content-Type parsing, session ids, SSE framing and
 * the routing table of the HTTP front.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_util.h"

/* Loopback names with our port or none; anything else refused. */
static void test_host(void **state)
{
	(void)state;
	assert_true(http_host_allowed("localhost:8080", 8080, NULL));
	assert_true(http_host_allowed("LOCALHOST:8080", 8080, NULL));
	assert_true(http_host_allowed("127.0.0.1:8080", 8080, NULL));
	assert_true(http_host_allowed("[::1]:8080", 8080, NULL));
	assert_true(http_host_allowed("localhost", 8080, NULL));
	assert_false(http_host_allowed("localhost:8081", 8080, NULL));
	assert_false(http_host_allowed("evil.example:8080", 8080, NULL));
	assert_false(http_host_allowed("localhost.evil.example", 8080, NULL));
	assert_false(http_host_allowed("127.0.0.1:8080x", 8080, NULL));
	assert_false(http_host_allowed("127.0.0.1:", 8080, NULL));
	assert_false(http_host_allowed("[::1", 8080, NULL));
	assert_false(http_host_allowed("", 8080, NULL));
	assert_false(http_host_allowed(NULL, 8080, NULL));
}

/* Extra hosts: exactly, or any port for an entry without one. */
static void test_host_extra(void **state)
{
	(void)state;
	char *extra[] = { "mcp.internal", "gw.example:443", NULL };
	assert_true(http_host_allowed("mcp.internal", 8080, extra));
	assert_true(http_host_allowed("mcp.internal:9999", 8080, extra));
	assert_true(http_host_allowed("gw.example:443", 8080, extra));
	assert_false(http_host_allowed("gw.example:444", 8080, extra));
	assert_false(http_host_allowed("gw.example", 8080, extra));
	assert_true(http_host_allowed("localhost:8080", 8080, extra));
}

/* No Origin passes (not a browser); a loopback origin needs our port. */
static void test_origin(void **state)
{
	(void)state;
	char *extra[] = { "https://app.example", NULL };
	assert_true(http_origin_allowed(NULL, 8080, NULL));
	assert_true(http_origin_allowed("http://localhost:8080", 8080, NULL));
	assert_true(http_origin_allowed("https://127.0.0.1:8080", 8080, NULL));
	assert_true(http_origin_allowed("http://[::1]:8080", 8080, NULL));
	assert_false(http_origin_allowed("http://localhost", 8080, NULL));
	assert_false(http_origin_allowed("http://localhost:9", 8080, NULL));
	assert_false(http_origin_allowed("http://evil.example:8080", 8080, NULL));
	assert_false(http_origin_allowed("http://localhost:8080/x", 8080, NULL));
	assert_false(http_origin_allowed("null", 8080, NULL));
	assert_false(http_origin_allowed("file://localhost:8080", 8080, NULL));
	assert_false(http_origin_allowed("https://app.example", 8080, NULL));
	assert_true(http_origin_allowed("https://app.example", 8080, extra));
	assert_false(http_origin_allowed("https://app.example.evil", 8080, extra));
}

/* Accept lists: spaces, parameters, q=0, case. */
static void test_accept(void **state)
{
	(void)state;
	assert_true(http_accepts("application/json, text/event-stream", "text/event-stream"));
	assert_true(http_accepts("text/event-stream", "text/event-stream"));
	assert_true(http_accepts("application/json;q=0.9,Text/Event-Stream ; q=0.5", "text/event-stream"));
	assert_false(http_accepts("application/json", "text/event-stream"));
	assert_false(http_accepts("*/*", "text/event-stream"));
	assert_false(http_accepts("text/event-stream;q=0", "text/event-stream"));
	assert_false(http_accepts("text/event-streams", "text/event-stream"));
	assert_false(http_accepts("", "text/event-stream"));
	assert_false(http_accepts(NULL, "text/event-stream"));
	assert_true(http_accepts("text/event-stream;q=0, application/json", "application/json"));
}

/* Content-Type: application/json with or without parameters. */
static void test_content_type(void **state)
{
	(void)state;
	assert_true(http_is_json_type("application/json"));
	assert_true(http_is_json_type("Application/JSON; charset=utf-8"));
	assert_true(http_is_json_type("application/json;charset=utf-8"));
	assert_false(http_is_json_type("application/jsonx"));
	assert_false(http_is_json_type("text/plain"));
	assert_false(http_is_json_type(""));
	assert_false(http_is_json_type(NULL));
}

/* Ids are 32 hex digits, valid by our check, and differ. */
static void test_sid(void **state)
{
	(void)state;
	char a[HTTP_SID_LEN + 1], b[HTTP_SID_LEN + 1];
	assert_int_equal(http_sid_new(a), 0);
	assert_int_equal(http_sid_new(b), 0);
	assert_int_equal(strlen(a), HTTP_SID_LEN);
	assert_true(http_sid_valid(a));
	assert_true(http_sid_valid(b));
	assert_string_not_equal(a, b);
	assert_false(http_sid_valid("x"));
	assert_false(http_sid_valid(NULL));
	a[3] = 'G';
	assert_false(http_sid_valid(a));
	char longer[HTTP_SID_LEN + 2];
	memset(longer, 'a', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	assert_false(http_sid_valid(longer));
}

/* Appends an event and compares the whole buffer with WANT; framed
 * straight into a ring, the same bytes. */
static void check_event(unsigned stream, uint64_t seq, const char *data, const char *want)
{
	struct buf b = BUF_INIT;
	struct http_ring g;
	assert_int_equal(http_sse_event(&b, stream, seq, data, strlen(data)), 0);
	assert_int_equal(buf_pending(&b), strlen(want));
	assert_memory_equal(b.data + b.off, want, strlen(want));
	buf_release(&b);
	http_ring_init(&g);
	assert_int_equal(http_ring_add_event(&g, stream, seq, data, strlen(data)), 0);
	assert_int_equal(g.bytes, strlen(want));
	assert_true(g.last == seq);
	assert_int_equal(http_ring_drain(&g, &b), 0);
	assert_int_equal(buf_pending(&b), strlen(want));
	assert_memory_equal(b.data + b.off, want, strlen(want));
	buf_release(&b);
	http_ring_release(&g);
}

/* One data line per line of input; CR, LF and CRLF all split; ids on every event. */
static void test_sse(void **state)
{
	(void)state;
	check_event(0, 7, "{\"a\":1}", "id: 0-7\nevent: message\ndata: {\"a\":1}\n\n");
	check_event(3, 8, "a\nb", "id: 3-8\nevent: message\ndata: a\ndata: b\n\n");
	check_event(1, 9, "a\r\nb\rc", "id: 1-9\nevent: message\ndata: a\ndata: b\ndata: c\n\n");
	check_event(1, 10, "a\n\nb", "id: 1-10\nevent: message\ndata: a\ndata: \ndata: b\n\n");
	check_event(1, 11, "", "id: 1-11\nevent: message\ndata: \n\n");
	check_event(UINT32_MAX, UINT64_MAX, "x",
		    "id: 4294967295-18446744073709551615\nevent: message\ndata: x\n\n");
	/* a line break at the end is a last, empty data line (found by fuzz_http:
	 * it was dropped, so the reader got "a" for "a\n") */
	check_event(1, 12, "a\n", "id: 1-12\nevent: message\ndata: a\ndata: \n\n");
	check_event(1, 13, "\r\n", "id: 1-13\nevent: message\ndata: \ndata: \n\n");
}

/* Compares what B holds with WANT and empties B. */
static void check_buf(struct buf *b, const char *want)
{
	assert_int_equal(buf_pending(b), strlen(want));
	assert_memory_equal(b->data + b->off, want, strlen(want));
	buf_release(b);
}

/* The head of a resumable stream: retry, priming event, both or nothing. */
static void test_sse_head(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(http_sse_head(&b, 4, 1000, true), 0);
	check_buf(&b, "retry: 1000\nid: 4-0\ndata: \n\n");
	assert_int_equal(http_sse_head(&b, 4, 250, false), 0);
	check_buf(&b, "retry: 250\n\n");
	assert_int_equal(http_sse_head(&b, 2, 0, true), 0);
	check_buf(&b, "id: 2-0\ndata: \n\n");
	assert_int_equal(http_sse_head(&b, 2, 0, false), 0);
	assert_int_equal(buf_pending(&b), 0);
}

/* Event ids read back; anything else is refused. */
static void test_event_id(void **state)
{
	(void)state;
	unsigned s = 99;
	uint64_t n = 99;
	assert_int_equal(http_event_id_parse("3-17", &s, &n), 0);
	assert_int_equal(s, 3);
	assert_true(n == 17);
	assert_int_equal(http_event_id_parse("0-0", &s, &n), 0);
	assert_true(s == 0 && n == 0);
	assert_int_equal(http_event_id_parse("4294967295-18446744073709551615", &s, &n), 0);
	assert_true(s == UINT32_MAX && n == UINT64_MAX);
	static const char *const bad[] = {
		"", "17", "3-", "-3", "3--1", "3-+1", "+3-1", " 3-1", "3-1 ", "3-1-2", "a-1",
		"4294967296-1", "1-18446744073709551616", "3.1", NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		s = 99;
		assert_int_equal(http_event_id_parse(bad[i], &s, &n), -1);
		assert_int_equal(s, 99);
	}
	assert_int_equal(http_event_id_parse(NULL, &s, &n), -1);
}

/* Reads everything not handed out yet from G (in pieces of STEP) into B. */
static void read_all(struct http_ring *g, struct buf *b, size_t step)
{
	char piece[64];
	size_t k;
	assert_true(step <= sizeof piece);
	while ((k = http_ring_read(g, piece, step)) > 0)
		assert_int_equal(buf_append(b, piece, k), 0);
	assert_int_equal(g->unsent, 0);
}

/* Appends event SEQ with the text T to G. */
static int ring_add(struct http_ring *g, uint64_t seq, const char *t)
{
	return http_ring_add(g, seq, t, strlen(t));
}

/* The ring as a send queue: read in any pieces, rewound for a resume,
 * trimmed of handed-out events only, never of the newest. */
static void test_ring(void **state)
{
	(void)state;
	struct http_ring g, h;
	struct buf b = BUF_INIT;
	uint64_t lost = 99;
	http_ring_init(&g);
	assert_int_equal(http_ring_rewind(&g, 0, &lost), 0);
	assert_true(lost == 0);
	assert_int_equal(ring_add(&g, 1, "aaaa"), 0);
	assert_int_equal(ring_add(&g, 2, "bb"), 0);
	assert_int_equal(ring_add(&g, 3, "cccccc"), 0);
	assert_int_equal(g.unsent, 12);
	assert_int_equal(g.fresh, 12);
	char two[2];
	assert_int_equal(http_ring_read(&g, two, 2), 2);
	assert_int_equal(g.fresh, 10);
	assert_int_equal(http_ring_rewind(&g, 0, &lost), 3);   /* back before a partly read event */
	assert_int_equal(g.unsent, 12);
	assert_int_equal(g.fresh, 10);       /* what is sent again is no new backlog */
	assert_int_equal(http_ring_read(&g, two, 2), 2);
	assert_int_equal(g.fresh, 10);
	assert_int_equal(http_ring_read(&g, two, 1), 1);       /* one byte past where it was */
	assert_int_equal(g.fresh, 9);
	assert_int_equal(http_ring_rewind(&g, 0, &lost), 3);
	read_all(&g, &b, 5);                 /* pieces across events */
	check_buf(&b, "aaaabbcccccc");
	assert_int_equal(g.fresh, 0);
	assert_int_equal(http_ring_rewind(&g, 1, &lost), 2);   /* the client had event 1 */
	assert_true(lost == 0);
	assert_int_equal(g.unsent, 8);
	assert_int_equal(g.fresh, 0);
	read_all(&g, &b, 3);
	check_buf(&b, "bbcccccc");
	assert_int_equal(http_ring_rewind(&g, 3, &lost), 0);   /* it had them all */
	assert_int_equal(http_ring_rewind(&g, 9, &lost), 0);   /* an id from the future */
	assert_true(lost == 0);

	/* trimming: handed-out events go, oldest first, down to KEEP */
	assert_int_equal(ring_add(&g, 4, "d"), 0);     /* not handed out */
	assert_int_equal(g.fresh, 1);
	http_ring_trim(&g, 7);
	assert_int_equal(g.bytes, 7);        /* 1 and 2 gone: "cccccc" + "d" */
	assert_int_equal(http_ring_rewind(&g, 0, &lost), 2);   /* 1 and 2 are lost */
	assert_true(lost == 2);
	read_all(&g, &b, 64);
	check_buf(&b, "ccccccd");
	http_ring_trim(&g, 0);
	assert_int_equal(g.bytes, 1);        /* the newest stays, handed out or not */
	assert_int_equal(http_ring_rewind(&g, 2, &lost), 1);
	assert_true(lost == 1);              /* 3 was trimmed */

	/* a partly handed-out event is not trimmed; drain hands out the rest */
	assert_int_equal(ring_add(&g, 5, "eeee"), 0);
	assert_int_equal(g.fresh, 4);        /* "d" was handed out before the rewind */
	assert_int_equal(http_ring_read(&g, two, 2), 2);       /* "d" and one "e" */
	assert_int_equal(g.fresh, 3);
	http_ring_trim(&g, 0);
	assert_int_equal(g.bytes, 4);
	assert_int_equal(http_ring_drain(&g, &b), 0);
	check_buf(&b, "eee");
	assert_int_equal(g.unsent, 0);
	assert_int_equal(g.fresh, 0);

	/* moved whole; an empty ring still knows its last number */
	http_ring_init(&h);
	http_ring_move(&h, &g);
	assert_null(g.head);
	assert_int_equal(h.bytes, 4);
	assert_true(h.last == 5);
	assert_int_equal(ring_add(&g, 1, "x"), 0);     /* FROM is usable again */
	http_ring_release(&h);
	assert_true(h.last == 5);
	assert_int_equal(http_ring_rewind(&h, 3, &lost), 0);
	assert_true(lost == 2);
	http_ring_release(&g);

	/* a ring that keeps a copy of what a connection sent */
	assert_int_equal(ring_add(&h, 6, "ff"), 0);
	assert_int_equal(ring_add(&h, 7, "g"), 0);
	assert_int_equal(h.fresh, 3);
	http_ring_mark_sent(&h);
	assert_int_equal(h.unsent, 0);
	assert_int_equal(h.fresh, 0);
	assert_int_equal(http_ring_read(&h, two, 2), 0);
	assert_int_equal(http_ring_rewind(&h, 5, &lost), 2);
	assert_true(lost == 0);
	assert_int_equal(http_ring_drain(&h, &b), 0);
	check_buf(&b, "ffg");
	assert_int_equal(h.fresh, 0);
	http_ring_release(&h);
}

/* Known methods by name, anything else (or none) as "other"; buckets by bound. */
static void test_metrics_names(void **state)
{
	(void)state;
	assert_string_equal(http_methods[http_method_index("tools/call")], "tools/call");
	assert_string_equal(http_methods[http_method_index("initialize")], "initialize");
	assert_string_equal(http_methods[http_method_index("subscriptions/listen")],
			    "subscriptions/listen");
	assert_int_equal(http_method_index("tools/call/x"), HTTP_NMETHODS - 1);
	assert_int_equal(http_method_index("other"), HTTP_NMETHODS - 1);
	assert_int_equal(http_method_index(NULL), HTTP_NMETHODS - 1);
	assert_string_equal(http_methods[HTTP_NMETHODS - 1], "other");
	for (unsigned i = 0; i + 1 < HTTP_NMETHODS; i++)
		assert_int_equal(http_method_index(http_methods[i]), i);
	assert_int_equal(http_latency_bucket(0), 0);
	assert_int_equal(http_latency_bucket(0.0001), 0);          /* le: bounds are inclusive */
	assert_int_equal(http_latency_bucket(0.00011), 1);
	assert_true(http_latency_bounds[http_latency_bucket(0.7)] == 1.0);
	assert_true(http_latency_bounds[HTTP_NBUCKETS - 1] == 30.0);
	assert_int_equal(http_latency_bucket(30.5), HTTP_NBUCKETS);
	for (unsigned i = 1; i < HTTP_NBUCKETS; i++)
		assert_true(http_latency_bounds[i] > http_latency_bounds[i - 1]);
}

/* Sets V to the JSON text T. */
static struct msg_val val(const char *t)
{
	struct msg_val v = { .n = 0 };
	msg_val_set(&v, t, strlen(t));
	return v;
}

/* Ids by value (1 is not "1"; spelling does not matter); tokens apart. */
static void test_routes(void **state)
{
	(void)state;
	struct http_routes r;
	int s1, s2;
	struct msg_val one = val("1"), one_s = val("\"1\""), one_real = val("1.0"), esc = val("\"\\u0061\""),
		a = val("\"a\""), tok = val("\"t\""), none = { .n = 0 }, null = val("null");
	http_routes_init(&r);
	assert_int_equal(http_routes_add_id(&r, &one, &s1), 0);
	assert_int_equal(http_routes_add_id(&r, &one_s, &s2), 0);
	assert_int_equal(http_routes_add_id(&r, &one_real, &s2), 1);  /* 1.0 is 1: already open */
	assert_int_equal(http_routes_add_id(&r, &none, &s1), -1);
	assert_int_equal(http_routes_add_id(&r, &null, &s1), -1);
	assert_ptr_equal(http_routes_peek_id(&r, &one_real), &s1);
	assert_ptr_equal(http_routes_peek_id(&r, &one_s), &s2);
	assert_int_equal(http_routes_add_id(&r, &esc, &s2), 0);
	assert_ptr_equal(http_routes_peek_id(&r, &a), &s2);       /* "\u0061" is "a" */
	assert_false(http_routes_drop_id(&r, &a, &s1));           /* not s1's */
	assert_true(http_routes_drop_id(&r, &a, &s2));
	assert_null(http_routes_peek_id(&r, &a));
	assert_ptr_equal(http_routes_take_id(&r, &one), &s1);
	assert_null(http_routes_take_id(&r, &one));
	assert_null(http_routes_peek_id(&r, &null));

	assert_int_equal(http_routes_add_token(&r, &tok, &s1), 0);
	assert_null(http_routes_peek_id(&r, &tok));               /* a token is not an id */
	assert_ptr_equal(http_routes_token(&r, &tok), &s1);
	http_routes_drop_token(&r, &tok, &s2);                    /* not s2's: stays */
	assert_ptr_equal(http_routes_token(&r, &tok), &s1);
	http_routes_drop_token(&r, &tok, &s1);
	assert_null(http_routes_token(&r, &tok));
	http_routes_release(&r);
	msg_val_release(&esc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_host_extra),
		cmocka_unit_test(test_origin),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_content_type),
		cmocka_unit_test(test_sid),
		cmocka_unit_test(test_sse),
		cmocka_unit_test(test_sse_head),
		cmocka_unit_test(test_event_id),
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_metrics_names),
		cmocka_unit_test(test_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
