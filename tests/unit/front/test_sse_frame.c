/*
 * test_sse_frame.c - unit tests for src/front/sse_frame.c: SSE events (one
 * data line per line, ids on every event), the head of a resumable stream,
 * event ids read back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sse_frame.h"

/* Compares what B holds with WANT and empties B. */
static void check_buf(struct buf *b, const char *want)
{
	assert_int_equal(buf_pending(b), strlen(want));
	assert_memory_equal(b->data + b->off, want, strlen(want));
	buf_release(b);
}

/* Appends an event and compares the whole buffer with WANT; framed in
 * two steps into memory of its own (as the ring does), the same bytes. */
static void check_event(unsigned stream, uint64_t seq, const char *data, const char *want)
{
	struct buf b = BUF_INIT;
	assert_int_equal(sse_frame_event(&b, stream, seq, data, strlen(data)), 0);
	check_buf(&b, want);
	char id[SSE_FRAME_ID_MAX];
	size_t idn = sse_frame_id_lines(id, stream, seq);
	size_t len = sse_frame_write(NULL, id, idn, data, strlen(data));
	assert_int_equal(len, strlen(want));
	char *own = malloc(len);
	assert_non_null(own);
	assert_int_equal(sse_frame_write(own, id, idn, data, strlen(data)), len);
	assert_memory_equal(own, want, len);
	free(own);
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

/* The head of a resumable stream: retry, priming event, both or nothing. */
static void test_sse_head(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(sse_frame_head(&b, 4, 1000, true), 0);
	check_buf(&b, "retry: 1000\nid: 4-0\ndata: \n\n");
	assert_int_equal(sse_frame_head(&b, 4, 250, false), 0);
	check_buf(&b, "retry: 250\n\n");
	assert_int_equal(sse_frame_head(&b, 2, 0, true), 0);
	check_buf(&b, "id: 2-0\ndata: \n\n");
	assert_int_equal(sse_frame_head(&b, 2, 0, false), 0);
	assert_int_equal(buf_pending(&b), 0);
}

/* Event ids read back; anything else is refused. */
static void test_event_id(void **state)
{
	(void)state;
	unsigned s = 99;
	uint64_t n = 99;
	assert_int_equal(sse_frame_id_parse("3-17", &s, &n), 0);
	assert_int_equal(s, 3);
	assert_true(n == 17);
	assert_int_equal(sse_frame_id_parse("0-0", &s, &n), 0);
	assert_true(s == 0 && n == 0);
	assert_int_equal(sse_frame_id_parse("4294967295-18446744073709551615", &s, &n), 0);
	assert_true(s == UINT32_MAX && n == UINT64_MAX);
	static const char *const bad[] = {
		"", "17", "3-", "-3", "3--1", "3-+1", "+3-1", " 3-1", "3-1 ", "3-1-2", "a-1",
		"4294967296-1", "1-18446744073709551616", "3.1", NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		s = 99;
		assert_int_equal(sse_frame_id_parse(bad[i], &s, &n), -1);
		assert_int_equal(s, 99);
	}
	assert_int_equal(sse_frame_id_parse(NULL, &s, &n), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sse),
		cmocka_unit_test(test_sse_head),
		cmocka_unit_test(test_event_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
