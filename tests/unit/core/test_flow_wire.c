/*
 * test_flow_wire.c - unit tests for src/core/flow_wire.c: the control
 * stream's frames however the bytes are cut, the size bound, the execution
 * stream's and the datagram's headers, and telling JSON from CBOR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow_wire.h"

static struct flow_reader *live;   /* released by the teardown if a test fails */

static int teardown(void **state)
{
	(void)state;
	if (live)
		flow_reader_release(live);
	live = NULL;
	return 0;
}

/* Appends a frame of body BODY (LEN bytes) to OUT at *N. */
static void put_frame(uint8_t *out, size_t *n, const char *body, size_t len)
{
	flow_frame_hdr(out + *n, (uint32_t)len);
	memcpy(out + *n + FLOW_FRAME_HDR, body, len);
	*n += FLOW_FRAME_HDR + len;
}

/* Expects the next frame to be BODY. */
static void expect_frame(struct flow_reader *r, const char *body)
{
	const uint8_t *p = NULL;
	size_t n = 0;
	assert_int_equal(flow_reader_next(r, &p, &n), FLOW_READ_FRAME);
	assert_int_equal(n, strlen(body));
	assert_memory_equal(p, body, n);
}

static const char *bodies[] = {
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
	"",
	("\xa2\x67jsonrpc\x63" "2.0\x62id\x01"),
	"[1]",
};

/* Three frames (one empty) cut at every byte boundary, fed in two pieces,
 * and one byte at a time: the same frames, in order, and nothing before a
 * frame is whole. */
static void test_split_everywhere(void **state)
{
	(void)state;
	uint8_t wire[256];
	size_t len = 0;
	for (size_t i = 0; i < 4; i++)
		put_frame(wire, &len, bodies[i], strlen(bodies[i]));
	for (size_t cut = 0; cut <= len; cut++) {
		struct flow_reader r;
		flow_reader_init(&r, 1024);
		live = &r;
		const uint8_t *p;
		size_t n, got = 0, consumed = 0;
		assert_int_equal(flow_reader_feed(&r, wire, cut), 0);
		for (; got < 4; got++) {
			size_t flen = FLOW_FRAME_HDR + strlen(bodies[got]);
			if (consumed + flen > cut)
				break;
			expect_frame(&r, bodies[got]);
			consumed += flen;
		}
		assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
		assert_int_equal(flow_reader_pending(&r), cut - consumed);
		assert_int_equal(flow_reader_feed(&r, wire + cut, len - cut), 0);
		for (size_t i = got; i < 4; i++)
			expect_frame(&r, bodies[i]);
		assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
		assert_int_equal(flow_reader_pending(&r), 0);
		flow_reader_release(&r);
		live = NULL;
	}
	/* a byte at a time */
	struct flow_reader r;
	flow_reader_init(&r, 1024);
	live = &r;
	size_t next = 0, ends = FLOW_FRAME_HDR + strlen(bodies[0]);
	for (size_t i = 0; i < len; i++) {
		const uint8_t *p;
		size_t n;
		assert_int_equal(flow_reader_feed(&r, wire + i, 1), 0);
		while (next < 4 && i + 1 == ends) {
			expect_frame(&r, bodies[next]);
			if (++next < 4)
				ends += FLOW_FRAME_HDR + strlen(bodies[next]);
		}
		assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
	}
	assert_int_equal(next, 4);
	assert_int_equal(flow_reader_pending(&r), 0);
	flow_reader_release(&r);
	live = NULL;
}

/* Many frames in one feed come out one per call. */
static void test_many_in_one_feed(void **state)
{
	(void)state;
	uint8_t wire[100 * 12];
	size_t len = 0;
	char body[8];
	for (int i = 0; i < 100; i++) {
		snprintf(body, sizeof body, "[%d]", i);
		put_frame(wire, &len, body, strlen(body));
	}
	struct flow_reader r;
	flow_reader_init(&r, 64);
	live = &r;
	assert_int_equal(flow_reader_feed(&r, wire, len), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(body, sizeof body, "[%d]", i);
		expect_frame(&r, body);
	}
	const uint8_t *p;
	size_t n;
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
	assert_int_equal(flow_reader_pending(&r), 0);
	flow_reader_release(&r);
	live = NULL;
}

/* A frame at the bound passes; one byte over is TOO_BIG as soon as its
 * header is in (its length reported, nothing consumed, and again on the
 * next call); the length is big-endian and may use all 32 bits. */
static void test_too_big(void **state)
{
	(void)state;
	struct flow_reader r;
	flow_reader_init(&r, 5);
	live = &r;
	uint8_t wire[32];
	size_t len = 0;
	put_frame(wire, &len, "12345", 5);
	assert_int_equal(flow_reader_feed(&r, wire, len), 0);
	expect_frame(&r, "12345");
	const uint8_t *p;
	size_t n = 0;
	uint8_t hdr[FLOW_FRAME_HDR];
	flow_frame_hdr(hdr, 6);
	assert_int_equal(flow_reader_feed(&r, hdr, 3), 0);
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
	assert_int_equal(flow_reader_feed(&r, hdr + 3, 1), 0);
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_TOO_BIG);
	assert_int_equal(n, 6);
	assert_int_equal(flow_reader_pending(&r), 4);
	n = 0;
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_TOO_BIG);
	assert_int_equal(n, 6);
	flow_reader_release(&r);

	flow_reader_init(&r, 1 << 20);
	const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(flow_reader_feed(&r, huge, 4), 0);
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_TOO_BIG);
	assert_int_equal(n, 0xffffffffu);
	flow_reader_release(&r);
	live = NULL;
}

/* The length is big-endian; pending counts a truncated frame at the end. */
static void test_header_and_pending(void **state)
{
	(void)state;
	uint8_t hdr[FLOW_FRAME_HDR];
	flow_frame_hdr(hdr, 0x01020304);
	assert_memory_equal(hdr, "\x01\x02\x03\x04", 4);
	flow_frame_hdr(hdr, 0);
	assert_memory_equal(hdr, "\0\0\0\0", 4);
	struct flow_reader r;
	flow_reader_init(&r, 1000);
	live = &r;
	assert_int_equal(flow_reader_pending(&r), 0);
	const uint8_t part[] = { 0, 0, 1, 0x2c, '{', '"' };   /* 300 bytes declared */
	assert_int_equal(flow_reader_feed(&r, part, sizeof part), 0);
	const uint8_t *p;
	size_t n;
	assert_int_equal(flow_reader_next(&r, &p, &n), FLOW_READ_MORE);
	assert_int_equal(flow_reader_pending(&r), sizeof part);
	assert_int_equal(flow_reader_feed(&r, NULL, 0), 0);
	assert_int_equal(flow_reader_pending(&r), sizeof part);
	flow_reader_release(&r);
	live = NULL;
}

/* An execution stream's header: request id then tag, big-endian, both ways. */
static void test_exec_header(void **state)
{
	(void)state;
	uint8_t hdr[FLOW_EXEC_HDR];
	flow_exec_hdr_put(hdr, 0x11223344u, 0xa0b0c0d0u);
	assert_memory_equal(hdr, "\x11\x22\x33\x44\xa0\xb0\xc0\xd0", 8);
	uint32_t id = 0, tag = 0;
	flow_exec_hdr_get(hdr, &id, &tag);
	assert_int_equal(id, 0x11223344u);
	assert_int_equal(tag, 0xa0b0c0d0u);
	flow_exec_hdr_put(hdr, 0, 0xffffffffu);
	flow_exec_hdr_get(hdr, &id, &tag);
	assert_int_equal(id, 0);
	assert_int_equal(tag, 0xffffffffu);
}

/* A datagram's header and what is refused: short, flags set, unknown
 * channels (0 is reserved). */
static void test_datagram(void **state)
{
	(void)state;
	uint8_t d[16];
	flow_dgram_hdr_put(d, FLOW_CH_AUDIO, 0x01020304u);
	assert_memory_equal(d, "\x02\x00\x01\x02\x03\x04", 6);
	memcpy(d + 6, "pcm", 3);
	uint8_t ch = 0;
	uint32_t id = 0;
	const uint8_t *pl = NULL;
	size_t plen = 99;
	assert_true(flow_dgram_parse(d, 9, &ch, &id, &pl, &plen));
	assert_int_equal(ch, FLOW_CH_AUDIO);
	assert_int_equal(id, 0x01020304u);
	assert_ptr_equal(pl, d + 6);
	assert_int_equal(plen, 3);
	assert_true(flow_dgram_parse(d, 6, &ch, &id, &pl, &plen));
	assert_int_equal(plen, 0);
	assert_false(flow_dgram_parse(d, 5, &ch, &id, &pl, &plen));
	assert_false(flow_dgram_parse(d, 0, &ch, &id, &pl, &plen));
	for (int c = 0; c < 256; c++) {
		flow_dgram_hdr_put(d, (uint8_t)c, 7);
		bool known = c == FLOW_CH_PROGRESS || c == FLOW_CH_AUDIO || c == FLOW_CH_LOG;
		assert_int_equal(flow_dgram_parse(d, 6, &ch, &id, &pl, &plen), known);
	}
	flow_dgram_hdr_put(d, FLOW_CH_LOG, 7);
	d[1] = 1;
	assert_false(flow_dgram_parse(d, 6, &ch, &id, &pl, &plen));
}

/* JSON by '{' or '[' after white space, CBOR by a map or array head. */
static void test_body_encoding(void **state)
{
	(void)state;
	static const struct {
		const char *p;
		size_t n;
		int want;
	} cases[] = {
		{ "{\"a\":1}", 7, FLOW_ENC_JSON },
		{ "[1]", 3, FLOW_ENC_JSON },
		{ " \t\r\n{}", 6, FLOW_ENC_JSON },
		{ "\n\n[", 3, FLOW_ENC_JSON },
		{ "\xa1\x61\x61\x01", 4, FLOW_ENC_CBOR },   /* map */
		{ "\xa0", 1, FLOW_ENC_CBOR },
		{ "\xbf\xff", 2, FLOW_ENC_CBOR },           /* indefinite map */
		{ "\x80", 1, FLOW_ENC_CBOR },               /* array */
		{ "\x9f\xff", 2, FLOW_ENC_CBOR },
		{ "\x98\x19", 2, FLOW_ENC_CBOR },
		{ "\xbb", 1, FLOW_ENC_CBOR },
		{ "", 0, -1 },
		{ "   ", 3, -1 },
		{ "\"str\"", 5, -1 },
		{ "1", 1, -1 },
		{ "null", 4, -1 },
		{ "\x61\x61", 2, -1 },                      /* CBOR text: not a message */
		{ "\x7b\x00", 2, FLOW_ENC_JSON },           /* '{': JSON, never a CBOR text head */
		{ "\xc0", 1, -1 },
		{ "\xf6", 1, -1 },
		{ "\x01{", 2, -1 },
		{ " \xa0", 2, -1 },                         /* white space then CBOR: neither */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		int got = flow_body_encoding((const uint8_t *)cases[i].p, cases[i].n);
		if (got != cases[i].want)
			fail_msg("case %zu: got %d, want %d", i, got, cases[i].want);
	}
	/* every first byte: CBOR exactly for 0x80..0xbf, JSON for '{' '[' */
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		int want = b >= 0x80 && b <= 0xbf ? FLOW_ENC_CBOR : b == '{' || b == '[' ? FLOW_ENC_JSON : -1;
		assert_int_equal(flow_body_encoding(&c, 1), want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_split_everywhere, teardown),
		cmocka_unit_test_teardown(test_many_in_one_feed, teardown),
		cmocka_unit_test_teardown(test_too_big, teardown),
		cmocka_unit_test_teardown(test_header_and_pending, teardown),
		cmocka_unit_test(test_exec_header),
		cmocka_unit_test(test_datagram),
		cmocka_unit_test(test_body_encoding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
