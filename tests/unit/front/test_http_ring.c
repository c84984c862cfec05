/*
 * test_http_ring.c - unit tests for src/front/http_ring.c: the kept
 * events of a stream as a send queue read in any pieces, rewound for a
 * resume, trimmed, moved; events framed straight into it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_ring.h"
#include "sse_frame.h"

/* Compares what B holds with WANT and empties B. */
static void check_buf(struct buf *b, const char *want)
{
	assert_int_equal(buf_pending(b), strlen(want));
	assert_memory_equal(b->data + b->off, want, strlen(want));
	buf_release(b);
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

/* An event framed straight into the ring is the same bytes as
 * sse_frame_event's, and counts as one event of that number. */
static void test_add_event(void **state)
{
	(void)state;
	static const char *const data[] = { "{\"a\":1}", "a\r\nb\rc", "a\n", "", NULL };
	for (size_t i = 0; data[i]; i++) {
		struct http_ring g;
		struct buf want = BUF_INIT, got = BUF_INIT;
		assert_int_equal(sse_frame_event(&want, 3, i + 1, data[i], strlen(data[i])), 0);
		http_ring_init(&g);
		assert_int_equal(http_ring_add_event(&g, 3, i + 1, data[i], strlen(data[i])), 0);
		assert_int_equal(g.bytes, buf_pending(&want));
		assert_true(g.last == i + 1);
		assert_int_equal(http_ring_drain(&g, &got), 0);
		assert_int_equal(buf_pending(&got), buf_pending(&want));
		assert_memory_equal(got.data + got.off, want.data + want.off, buf_pending(&want));
		buf_release(&want);
		buf_release(&got);
		http_ring_release(&g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_add_event),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
