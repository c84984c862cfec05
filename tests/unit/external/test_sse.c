/*
 * test_sse.c - unit tests for src/external/sse.c (Server-Sent Events
 * framing): chunking at every byte, line endings, multi-line data, ids,
 * comments, retry and the size bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sse.h"

#define MAX_EVENTS 16

/* What the parser dispatched, copied out of its buffers. */
struct seen {
	int n;
	struct {
		char type[32];
		char id[32];
		bool has_id;
		char data[256];
		size_t len, total;
		bool oversize;
	} ev[MAX_EVENTS];
};

static struct sse parser;

/* A fresh parser with a 1 MiB bound for each test. */
static int setup(void **state)
{
	(void)state;
	sse_init(&parser, 1 << 20);
	return 0;
}

/* Frees it. */
static int teardown(void **state)
{
	(void)state;
	sse_release(&parser);
	return 0;
}

/* Records an event. */
static int record(const struct sse_event *ev, void *arg)
{
	struct seen *s = arg;
	assert_true(s->n < MAX_EVENTS);
	assert_int_equal(ev->data[ev->len], '\0');
	snprintf(s->ev[s->n].type, sizeof s->ev[0].type, "%s", ev->type);
	s->ev[s->n].has_id = ev->id != NULL;
	snprintf(s->ev[s->n].id, sizeof s->ev[0].id, "%s", ev->id ? ev->id : "");
	size_t n = ev->len < sizeof s->ev[0].data - 1 ? ev->len : sizeof s->ev[0].data - 1;
	memcpy(s->ev[s->n].data, ev->data, n);
	s->ev[s->n].data[n] = '\0';
	s->ev[s->n].len = ev->len;
	s->ev[s->n].total = ev->total;
	s->ev[s->n].oversize = ev->oversize;
	s->n++;
	return 0;
}

/* Feeds a whole string in one chunk. */
static void feed(struct sse *p, const char *s, struct seen *out)
{
	assert_int_equal(sse_feed(p, s, strlen(s), record, out), 0);
}

/* A multi-line event with CRLF. */
static void test_basic(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, "data: hello\n\ndata: a\r\ndata: b\r\n\r\n", &s);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.ev[0].type, "message");
	assert_string_equal(s.ev[0].data, "hello");
	assert_false(s.ev[0].has_id);
	assert_string_equal(s.ev[1].data, "a\nb");
	assert_int_equal(s.ev[1].len, 3);
	assert_int_equal(s.ev[1].total, 3);
}

/* Lone "\r" ends lines too. */
static void test_cr_only(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, "data: a\r\rdata: b\n\rdata: c\r\n\n", &s);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.ev[0].data, "a");
	assert_string_equal(s.ev[1].data, "b");
	assert_string_equal(s.ev[2].data, "c");
}

/* The type applies to one event; the id outlives it. */
static void test_type_and_id(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, "event: endpoint\nid: 7\ndata: /messages?s=1\n\ndata: {}\n\n", &s);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.ev[0].type, "endpoint");
	assert_string_equal(s.ev[0].id, "7");
	assert_string_equal(s.ev[0].data, "/messages?s=1");
	assert_string_equal(s.ev[1].type, "message");
	assert_true(s.ev[1].has_id);
	assert_string_equal(s.ev[1].id, "7");
	assert_string_equal(parser.id, "7");
}

/* An event without data is not dispatched, but its id is kept. */
static void test_priming_event(void **state)
{
	struct seen s = { 0 };
	(void)state;
	static const char nul_id[] = "id: prime-1\n\nid: x\0y\n\n";
	assert_int_equal(sse_feed(&parser, nul_id, sizeof nul_id - 1, record, &s), 0);
	assert_int_equal(s.n, 0);
	assert_string_equal(parser.id, "prime-1");
	feed(&parser, "id: 2\ndata:\n\n", &s);  /* empty data is still data */
	assert_int_equal(s.n, 1);
	assert_int_equal(s.ev[0].len, 0);
	assert_string_equal(s.ev[0].id, "2");
	feed(&parser, "id\n\n", &s);  /* an empty id clears it */
	assert_null(parser.id);
}

/* Comments, unknown fields, a field with no colon, spaces after the colon. */
static void test_fields(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, ": ping\n:\nfoo: bar\n\n", &s);
	assert_int_equal(s.n, 0);
	feed(&parser, "data:x\ndata:  y\ndata\n\n", &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.ev[0].data, "x\n y\n");
}

/* retry: only digits count. */
static void test_retry(void **state)
{
	struct seen s = { 0 };
	(void)state;
	assert_int_equal(parser.retry, -1);
	feed(&parser, "retry: 3000\n\n", &s);
	assert_int_equal(parser.retry, 3000);
	feed(&parser, "retry: 12x\nretry:\nretry: -5\n\n", &s);
	assert_int_equal(parser.retry, 3000);
	feed(&parser, "retry: 0\n\n", &s);
	assert_int_equal(parser.retry, 0);
	assert_int_equal(s.n, 0);
}

/* A last event without its blank line is never dispatched. */
static void test_incomplete_tail(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, "data: one\n\ndata: two\n", &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.ev[0].data, "one");
}

/* A byte-order mark may open the stream, and only there. */
static void test_bom(void **state)
{
	struct seen s = { 0 };
	(void)state;
	feed(&parser, "\xEF\xBB\xBF" "data: a\n\n" "\xEF\xBB\xBF" "data: b\n\n", &s);
	assert_int_equal(s.n, 1);  /* the second "field" is not "data" */
	assert_string_equal(s.ev[0].data, "a");
}

static const char STREAM[] =
	"\xEF\xBB\xBF: comment\r\n"
	"retry: 1500\r\n"
	"id: 1\r\n"
	"data: {\"a\":1}\r\n"
	"\r\n"
	"event: endpoint\n"
	"data: /m?x=1\n"
	"\n"
	"data: line1\r"
	"data: line2\r"
	"\r"
	"id: 2\n"
	"data:\n"
	"data: tail\r\n"
	"\n";

/* Checks what STREAM yields. */
static void check_stream(const struct seen *s, const struct sse *p)
{
	assert_int_equal(s->n, 4);
	assert_string_equal(s->ev[0].data, "{\"a\":1}");
	assert_string_equal(s->ev[0].id, "1");
	assert_string_equal(s->ev[1].type, "endpoint");
	assert_string_equal(s->ev[1].data, "/m?x=1");
	assert_string_equal(s->ev[2].data, "line1\nline2");
	assert_string_equal(s->ev[2].type, "message");
	assert_string_equal(s->ev[3].data, "\ntail");
	assert_string_equal(s->ev[3].id, "2");
	assert_int_equal(p->retry, 1500);
}

/* Every split of the stream in two chunks gives the same events. */
static void test_split_everywhere(void **state)
{
	size_t n = sizeof STREAM - 1;
	(void)state;
	for (size_t cut = 0; cut <= n; cut++) {
		struct sse p;
		struct seen s = { 0 };
		sse_init(&p, 1 << 20);
		assert_int_equal(sse_feed(&p, STREAM, cut, record, &s), 0);
		assert_int_equal(sse_feed(&p, STREAM + cut, n - cut, record, &s), 0);
		check_stream(&s, &p);
		sse_release(&p);
	}
}

/* One byte at a time, and empty chunks between. */
static void test_byte_by_byte(void **state)
{
	struct seen s = { 0 };
	(void)state;
	for (size_t i = 0; i < sizeof STREAM - 1; i++) {
		assert_int_equal(sse_feed(&parser, STREAM + i, 1, record, &s), 0);
		assert_int_equal(sse_feed(&parser, "", 0, record, &s), 0);
	}
	check_stream(&s, &parser);
}

/* Data over the bound is reported once, with a prefix; the stream goes on. */
static void test_oversize(void **state)
{
	struct sse p;
	struct seen s = { 0 };
	char big[200];
	(void)state;
	memset(big, 'x', sizeof big);
	sse_init(&p, 16);
	feed(&p, "data: 0123456789\n", &s);
	assert_int_equal(sse_feed(&p, "data: ", 6, record, &s), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(sse_feed(&p, big, sizeof big, record, &s), 0);
	feed(&p, "\n\ndata: small\n\n", &s);
	assert_int_equal(s.n, 2);
	assert_true(s.ev[0].oversize);
	assert_int_equal(s.ev[0].total, 10 + 1 + 5 * sizeof big);
	assert_memory_equal(s.ev[0].data, "0123456789\nxxxx", 15);
	assert_false(s.ev[1].oversize);
	assert_string_equal(s.ev[1].data, "small");
	/* several lines that only together pass the bound */
	feed(&p, "data: 0123456789\ndata: 0123456789\n\n", &s);
	assert_int_equal(s.n, 3);
	assert_true(s.ev[2].oversize);
	assert_int_equal(s.ev[2].total, 21);
	/* exactly at the bound is fine */
	feed(&p, "data: 0123456789abcdef\n\n", &s);
	assert_false(s.ev[3].oversize);
	assert_int_equal(s.ev[3].len, 16);
	sse_release(&p);
}

/* A large single-line event arrives whole (the buffer is handed over). */
static void test_large_event(void **state)
{
	size_t n = 300000;
	char *line = malloc(n + 8);
	struct seen s = { 0 };
	(void)state;
	assert_non_null(line);
	memcpy(line, "data: ", 6);
	memset(line + 6, 'y', n);
	memcpy(line + 6 + n, "\n\n", 2);
	for (size_t off = 0; off < n + 8; off += 1000)
		assert_int_equal(sse_feed(&parser, line + off, off + 1000 > n + 8 ? n + 8 - off : 1000,
					  record, &s), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.ev[0].len, n);
	assert_false(s.ev[0].oversize);
	free(line);
}

/* Stops when the callback says so. */
static int stop_at_first(const struct sse_event *ev, void *arg)
{
	(void)ev;
	(*(int *)arg)++;
	return -1;
}

/* The callback's -1 stops the feed. */
static void test_stop(void **state)
{
	int calls = 0;
	(void)state;
	const char *s = "data: a\n\ndata: b\n\n";
	assert_int_equal(sse_feed(&parser, s, strlen(s), stop_at_first, &calls), -1);
	assert_int_equal(calls, 1);
}

/* Runs every test. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_basic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cr_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_type_and_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_priming_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_incomplete_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_split_everywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_by_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
