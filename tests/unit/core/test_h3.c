/*
 * test_h3.c - unit tests for src/core/h3.c: varints (every length, its
 * boundaries, RFC 9000 A.1), WebTransport's error code space both ways,
 * frames cut at every byte, payloads over the bound, SETTINGS (Chromium's
 * own, GREASE, duplicates, HTTP/2 identifiers), the control preamble read
 * back, every stream preamble (whole and cut), capsules and
 * CLOSE_WEBTRANSPORT_SESSION, the datagram prefix, and QPACK both ways:
 * RFC 9204 B.1 and hand-written field lines with a zero table, a
 * Chromium-like CONNECT Huffman-coded by nghttp3's encoder, refusals
 * (dynamic references, truncation, bad pseudo-headers), responses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp3/nghttp3.h>

#include "buf.h"
#include "h3.h"

static struct buf out = BUF_INIT;  /* released by the teardown */

static int teardown(void **state)
{
	(void)state;
	buf_release(&out);
	return 0;
}

/* OUT's bytes. */
static const uint8_t *ob(void)
{
	return (const uint8_t *)out.data;
}

/* ---- varints ---- */

static void test_varint_lengths(void **state)
{
	(void)state;
	static const struct { uint64_t v; size_t n; } cases[] = {
		{ 0, 1 }, { 63, 1 }, { 64, 2 }, { 16383, 2 }, { 16384, 4 },
		{ (UINT64_C(1) << 30) - 1, 4 }, { UINT64_C(1) << 30, 8 }, { H3_VARINT_MAX, 8 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t p[8];
		uint64_t v = 0;
		assert_int_equal(h3_varint_len(cases[i].v), cases[i].n);
		assert_int_equal(h3_varint_put(p, cases[i].v), cases[i].n);
		assert_int_equal(h3_varint_get(p, cases[i].n, &v), cases[i].n);
		assert_true(v == cases[i].v);
		for (size_t k = 0; k < cases[i].n; k++)
			assert_int_equal(h3_varint_get(p, k, &v), 0);
		buf_reset(&out);
		assert_int_equal(h3_varint_append(&out, cases[i].v), 0);
		assert_int_equal(out.len, cases[i].n);
		assert_memory_equal(out.data, p, cases[i].n);
	}
	assert_int_equal(h3_varint_len(H3_VARINT_MAX + 1), 0);
	assert_int_equal(h3_varint_append(&out, H3_VARINT_MAX + 1), -1);
}

static void test_varint_rfc9000(void **state)
{
	(void)state;
	static const struct { uint8_t b[8]; size_t n; uint64_t v; } ex[] = {
		{ { 0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c }, 8, UINT64_C(151288809941952652) },
		{ { 0x9d, 0x7f, 0x3e, 0x7d }, 4, 494878333 },
		{ { 0x7b, 0xbd }, 2, 15293 },
		{ { 0x25 }, 1, 37 },
		{ { 0x40, 0x25 }, 2, 37 },  /* not minimal, still 37 */
	};
	for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
		uint64_t v = 0;
		assert_int_equal(h3_varint_get(ex[i].b, ex[i].n, &v), ex[i].n);
		assert_true(v == ex[i].v);
		if (i < 4) {
			uint8_t p[8];
			assert_int_equal(h3_varint_put(p, v), ex[i].n);
			assert_memory_equal(p, ex[i].b, ex[i].n);
		}
	}
}

/* ---- WebTransport error codes ---- */

#define WT_FIRST UINT64_C(0x52e4a40fa8db)
#define WT_LAST UINT64_C(0x52e5ac983162)

static void test_wt_errors(void **state)
{
	(void)state;
	uint32_t e = 1;
	assert_true(h3_wt_error_to_h3(0) == WT_FIRST);
	assert_true(h3_wt_error_to_h3(0x1d) == WT_FIRST + 0x1d);
	assert_true(h3_wt_error_to_h3(0x1e) == WT_FIRST + 0x1f);  /* skips WT_FIRST + 0x1e */
	assert_true(h3_wt_error_to_h3(UINT32_MAX) == WT_LAST);
	assert_true(h3_wt_error_from_h3(WT_FIRST, &e) && e == 0);
	assert_true(h3_wt_error_from_h3(WT_LAST, &e) && e == UINT32_MAX);
	assert_false(h3_wt_error_from_h3(WT_FIRST - 1, &e));
	assert_false(h3_wt_error_from_h3(WT_LAST + 1, &e));
	assert_false(h3_wt_error_from_h3(WT_FIRST + 0x1e, &e));       /* reserved */
	assert_false(h3_wt_error_from_h3(WT_FIRST + 0x1e + 0x1f, &e));
	assert_false(h3_wt_error_from_h3(H3_NO_ERROR, &e));
	assert_false(h3_wt_error_from_h3(H3_WT_SESSION_GONE, &e));
	/* both ends of the range: every code maps back, never onto a reserved one */
	for (uint64_t k = 0; k < 2000; k++) {
		uint32_t lo = (uint32_t)k, hi = UINT32_MAX - (uint32_t)k;
		uint32_t in[2] = { lo, hi };
		for (int j = 0; j < 2; j++) {
			uint64_t c = h3_wt_error_to_h3(in[j]);
			assert_true((c - 0x21) % 0x1f != 0);
			assert_true(h3_wt_error_from_h3(c, &e));
			assert_int_equal(e, in[j]);
		}
	}
	/* every codepoint near the bottom: reserved ones refused, the others round trip */
	unsigned reserved = 0;
	for (uint64_t c = WT_FIRST; c < WT_FIRST + 31 * 40; c++) {
		if ((c - 0x21) % 0x1f == 0) {
			reserved++;
			assert_false(h3_wt_error_from_h3(c, &e));
		} else {
			assert_true(h3_wt_error_from_h3(c, &e));
			assert_true(h3_wt_error_to_h3(e) == c);
		}
	}
	assert_int_equal(reserved, 40);
}

/* ---- frames ---- */

/* Appends a frame of TYPE with N bytes of payload (byte i is i + SEED). */
static void frame(struct buf *b, uint64_t type, size_t n, uint8_t seed)
{
	assert_int_equal(h3_frame_head_append(b, type, n), 0);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)(i + seed);
		assert_int_equal(buf_append(b, &c, 1), 0);
	}
}

/* Walks the frames of P (LEN bytes) as a stream reader; returns how many were whole. */
static size_t walk(const uint8_t *p, size_t len, uint64_t *types, size_t *lens, size_t *taken)
{
	size_t n = 0, off = 0;
	for (;;) {
		uint64_t t;
		const uint8_t *pl;
		size_t plen;
		ssize_t r = h3_frame_parse(p + off, len - off, 1000, &t, &pl, &plen);
		assert_true(r >= 0);
		if (r == 0)
			break;
		assert_ptr_equal(pl + plen, p + off + r);
		types[n] = t;
		lens[n++] = plen;
		off += (size_t)r;
	}
	*taken = off;
	return n;
}

static void test_frames_split(void **state)
{
	(void)state;
	static const uint64_t types[] = { H3_FRAME_HEADERS, H3_FRAME_DATA, 0x21 + 0x1f * 3,
					  H3_FRAME_SETTINGS, H3_FRAME_DATA };
	static const size_t lens[] = { 3, 70, 0, 12, 900 };
	size_t ends[5];
	for (size_t i = 0; i < 5; i++) {
		frame(&out, types[i], lens[i], (uint8_t)i);
		ends[i] = out.len;
	}
	for (size_t k = 0; k <= out.len; k++) {
		uint64_t t[5];
		size_t l[5], taken;
		size_t n = walk(ob(), k, t, l, &taken);
		size_t want = 0;
		while (want < 5 && ends[want] <= k)
			want++;
		assert_int_equal(n, want);
		assert_int_equal(taken, want ? ends[want - 1] : 0);
		for (size_t i = 0; i < n; i++) {
			assert_true(t[i] == types[i]);
			assert_int_equal(l[i], lens[i]);
		}
		/* the head alone is there as soon as its two varints are */
		if (want < 5) {
			uint64_t ht, hl;
			size_t h = h3_frame_head(ob() + taken, k - taken, &ht, &hl);
			size_t need = h3_varint_len(types[want]) + h3_varint_len(lens[want]);
			assert_int_equal(h, k - taken >= need ? need : 0);
			if (h) {
				assert_true(ht == types[want]);
				assert_true(hl == lens[want]);
			}
		}
	}
}

static void test_frame_max(void **state)
{
	(void)state;
	uint64_t t;
	const uint8_t *pl;
	size_t plen;
	frame(&out, H3_FRAME_DATA, 101, 0);
	assert_int_equal(h3_frame_parse(ob(), out.len, 101, &t, &pl, &plen), (ssize_t)out.len);
	assert_int_equal(h3_frame_parse(ob(), out.len, 100, &t, &pl, &plen), -1);
	/* refused from the head alone, before the payload arrives */
	assert_int_equal(h3_frame_parse(ob(), 3, 100, &t, &pl, &plen), -1);
	assert_int_equal(h3_frame_parse(ob(), 3, 101, &t, &pl, &plen), 0);
	buf_reset(&out);
	assert_int_equal(h3_frame_head_append(&out, H3_FRAME_HEADERS, H3_VARINT_MAX), 0);
	assert_int_equal(h3_frame_parse(ob(), out.len, 1 << 20, &t, &pl, &plen), -1);
	assert_int_equal(h3_frame_parse(ob(), out.len, SIZE_MAX, &t, &pl, &plen), 0);  /* unbounded: waits */
	assert_int_equal(h3_frame_head_append(&out, H3_VARINT_MAX + 1, 0), -1);
}

/* ---- SETTINGS ---- */

/* Appends the pair ID = V to B. */
static void pair(struct buf *b, uint64_t id, uint64_t v)
{
	assert_int_equal(h3_varint_append(b, id), 0);
	assert_int_equal(h3_varint_append(b, v), 0);
}

/* Chromium 156's SETTINGS payload, with a GREASE identifier. */
static void chromium_settings(struct buf *b)
{
	pair(b, 0x1, 65536);
	pair(b, 0x6, 16384);
	pair(b, 0x7, 100);
	pair(b, 0x33, 1);
	pair(b, 0xffd277, 1);
	pair(b, 0x2b603742, 1);
	pair(b, UINT64_C(0x1f) * 0x2a3b4c + 0x21, 0x7e5a);
}

static void test_settings_chromium(void **state)
{
	(void)state;
	struct h3_settings s;
	chromium_settings(&out);
	assert_int_equal(h3_settings_parse(ob(), out.len, &s), 0);
	assert_true(s.qpack_max_table_capacity == 65536);
	assert_true(s.max_field_section_size == 16384);
	assert_true(s.qpack_blocked_streams == 100);
	assert_true(s.h3_datagram);
	assert_true(s.enable_webtransport);
	assert_false(s.enable_connect_protocol);
	assert_true(s.webtransport_max_sessions == 0);
	/* every cut inside a pair is refused; a cut between pairs is not */
	for (size_t k = 0; k < out.len; k++) {
		size_t off = 0;
		bool boundary = k == 0;
		while (off < k) {
			uint64_t v;
			off += h3_varint_get(ob() + off, out.len - off, &v);
			off += h3_varint_get(ob() + off, out.len - off, &v);
			boundary = off == k;
		}
		assert_int_equal(h3_settings_parse(ob(), k, &s), boundary ? 0 : -1);
	}
	assert_int_equal(h3_settings_parse(NULL, 0, &s), 0);
	assert_false(s.h3_datagram);
}

static void test_settings_refused(void **state)
{
	(void)state;
	struct h3_settings s;
	struct buf b = BUF_INIT;
	for (uint64_t id = 2; id <= 5; id++) {   /* HTTP/2's */
		buf_reset(&b);
		pair(&b, 0x33, 1);
		pair(&b, id, 0);
		assert_int_equal(h3_settings_parse((uint8_t *)b.data, b.len, &s), -1);
		assert_false(s.h3_datagram);  /* zeroed again */
	}
	static const uint64_t dup[] = { 0x1, 0x33, 0x2b603742, 0x1f * 9 + 0x21, 0x1234567 };
	for (size_t i = 0; i < sizeof dup / sizeof dup[0]; i++) {
		buf_reset(&b);
		pair(&b, dup[i], 1);
		pair(&b, 0x6, 10);
		pair(&b, dup[i], 1);
		assert_int_equal(h3_settings_parse((uint8_t *)b.data, b.len, &s), -1);
	}
	static const uint64_t flags[] = { 0x08, 0x33, 0xffd277, 0x2b603742 };
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		buf_reset(&b);
		pair(&b, flags[i], 2);
		assert_int_equal(h3_settings_parse((uint8_t *)b.data, b.len, &s), -1);
		buf_reset(&b);
		pair(&b, flags[i], 0);
		assert_int_equal(h3_settings_parse((uint8_t *)b.data, b.len, &s), 0);
		assert_false(s.enable_connect_protocol || s.h3_datagram || s.enable_webtransport);
	}
	/* the draft-04 identifier alone says H3_DATAGRAM too */
	buf_reset(&b);
	pair(&b, 0xffd277, 1);
	assert_int_equal(h3_settings_parse((uint8_t *)b.data, b.len, &s), 0);
	assert_true(s.h3_datagram);
	buf_release(&b);
}

static void test_control_preamble(void **state)
{
	(void)state;
	for (int server = 0; server <= 1; server++) {
		enum h3_preamble_kind k;
		uint64_t sid = 9, t;
		const uint8_t *pl;
		size_t plen;
		struct h3_settings s;
		buf_reset(&out);
		assert_int_equal(h3_control_preamble(&out, server, 5), 0);
		size_t a = h3_preamble_parse(ob(), out.len, false, &k, &sid);
		assert_int_equal(a, 1);
		assert_int_equal(k, H3_PRE_CONTROL);
		ssize_t r = h3_frame_parse(ob() + a, out.len - a, 1024, &t, &pl, &plen);
		assert_int_equal(r, (ssize_t)(out.len - a));
		assert_true(t == H3_FRAME_SETTINGS);
		assert_int_equal(h3_settings_parse(pl, plen, &s), 0);
		assert_int_equal(s.enable_connect_protocol, server);
		assert_true(s.h3_datagram && s.enable_webtransport);
		assert_true(s.qpack_max_table_capacity == 0);
		assert_true(s.webtransport_max_sessions == 5);
	}
	assert_int_equal(h3_control_preamble(&out, true, H3_VARINT_MAX + 1), -1);
}

/* ---- stream preambles ---- */

/* Expects P (LEN) to be KIND of length N with SESSION, and each shorter cut to need more. */
static void expect_pre(const uint8_t *p, size_t len, bool bidi, enum h3_preamble_kind kind,
		       size_t n, uint64_t session)
{
	enum h3_preamble_kind k;
	uint64_t sid = 77;
	assert_int_equal(h3_preamble_parse(p, len, bidi, &k, &sid), n);
	assert_int_equal(k, kind);
	assert_true(sid == session);
	size_t whole = n ? n : 1;
	for (size_t c = 0; c < whole; c++) {
		assert_int_equal(h3_preamble_parse(p, c, bidi, &k, &sid), 0);
		assert_int_equal(k, H3_PRE_MORE);
	}
}

static void test_preambles(void **state)
{
	(void)state;
	static const struct { uint8_t b[9]; size_t len; bool bidi; enum h3_preamble_kind k;
			      size_t n; uint64_t sid; } cases[] = {
		{ { 0x40, 0x41, 0x00 }, 3, true, H3_PRE_WT_BIDI, 3, 0 },
		{ { 0x40, 0x41, 0x04, 0xaa }, 4, true, H3_PRE_WT_BIDI, 3, 4 },
		{ { 0x40, 0x41, 0x80, 0x01, 0x00, 0x00, 0xbb }, 7, true, H3_PRE_WT_BIDI, 6, 65536 },
		{ { 0x01, 0x03, 0x00, 0x00, 0xd9 }, 5, true, H3_PRE_REQUEST, 0, 0 },
		{ { 0x00, 0x05 }, 2, true, H3_PRE_REQUEST, 0, 0 },
		{ { 0x00, 0x04 }, 2, false, H3_PRE_CONTROL, 1, 0 },
		{ { 0x01, 0x02 }, 2, false, H3_PRE_PUSH, 1, 0 },
		{ { 0x02 }, 1, false, H3_PRE_QPACK_ENCODER, 1, 0 },
		{ { 0x03 }, 1, false, H3_PRE_QPACK_DECODER, 1, 0 },
		{ { 0x40, 0x54, 0x08, 0x01 }, 4, false, H3_PRE_WT_UNI, 3, 8 },
		{ { 0x21, 0x00 }, 2, false, H3_PRE_UNKNOWN, 1, 0 },
		{ { 0x80, 0x00, 0x02, 0x2f }, 4, false, H3_PRE_UNKNOWN, 4, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_pre(cases[i].b, cases[i].len, cases[i].bidi, cases[i].k, cases[i].n,
			   cases[i].sid);
	/* what we write reads back */
	static const uint64_t sessions[] = { 0, 4, 16384, H3_VARINT_MAX - 3 };
	for (int bidi = 0; bidi <= 1; bidi++) {
		for (size_t i = 0; i < 4; i++) {
			buf_reset(&out);
			assert_int_equal(h3_wt_preamble(&out, bidi, sessions[i]), 0);
			expect_pre(ob(), out.len, bidi, bidi ? H3_PRE_WT_BIDI : H3_PRE_WT_UNI, out.len,
				   sessions[i]);
			assert_int_equal(out.len, 2 + h3_varint_len(sessions[i]));
		}
	}
}

/* ---- capsules ---- */

/* Reads back a DATA frame holding one CLOSE capsule from OUT. */
static void read_close(uint32_t *code, const char **reason, size_t *rlen)
{
	uint64_t t;
	const uint8_t *pl, *v;
	size_t plen, vlen;
	assert_int_equal(h3_frame_parse(ob(), out.len, 4096, &t, &pl, &plen), (ssize_t)out.len);
	assert_true(t == H3_FRAME_DATA);
	assert_int_equal(h3_capsule_parse(pl, plen, 2048, &t, &v, &vlen), (ssize_t)plen);
	assert_true(t == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION);
	assert_int_equal(h3_close_parse(v, vlen, code, reason, rlen), 0);
}

static void test_close_round_trip(void **state)
{
	(void)state;
	uint32_t code;
	const char *reason;
	size_t rlen;
	assert_int_equal(h3_close_append(&out, 0xdeadbeef, "bye \xc3\xa9t\xc3\xa9"), 0);
	read_close(&code, &reason, &rlen);
	assert_int_equal(code, 0xdeadbeef);
	assert_int_equal(rlen, 9);
	assert_memory_equal(reason, "bye \xc3\xa9t\xc3\xa9", 9);

	buf_reset(&out);
	assert_int_equal(h3_close_append(&out, 0, NULL), 0);
	read_close(&code, &reason, &rlen);
	assert_int_equal(code, 0);
	assert_int_equal(rlen, 0);

	/* a long reason is cut at 1024 bytes, never inside a character */
	char big[1500];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	buf_reset(&out);
	assert_int_equal(h3_close_append(&out, 7, big), 0);
	read_close(&code, &reason, &rlen);
	assert_int_equal(rlen, 1024);
	memcpy(big + 1023, "\xc3\xa9", 2);
	buf_reset(&out);
	assert_int_equal(h3_close_append(&out, 7, big), 0);
	read_close(&code, &reason, &rlen);
	assert_int_equal(rlen, 1023);
	memcpy(big + 1022, "\xe2\x82\xac", 3);
	buf_reset(&out);
	assert_int_equal(h3_close_append(&out, 7, big), 0);
	read_close(&code, &reason, &rlen);
	assert_int_equal(rlen, 1022);
}

static void test_close_refused(void **state)
{
	(void)state;
	uint32_t code;
	const char *reason;
	size_t rlen;
	static const struct { const char *b; size_t n; } bad[] = {
		{ "", 0 }, { "\0\0\0", 3 },
		{ "\0\0\0\0\xc0\x80", 6 },          /* overlong */
		{ "\0\0\0\0\xed\xa0\x80", 7 },      /* a surrogate */
		{ "\0\0\0\0ok\xe2\x82", 8 },        /* cut inside a character */
		{ "\0\0\0\0\xf4\x90\x80\x80", 8 },  /* above U+10FFFF */
		{ "\0\0\0\0\xff", 5 },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(h3_close_parse((const uint8_t *)bad[i].b, bad[i].n, &code, &reason,
						&rlen), -1);
	uint8_t v[4 + 1025];
	memset(v, 'r', sizeof v);
	assert_int_equal(h3_close_parse(v, 4 + 1024, &code, &reason, &rlen), 0);
	assert_int_equal(h3_close_parse(v, 4 + 1025, &code, &reason, &rlen), -1);
	assert_int_equal(h3_close_parse((const uint8_t *)"\0\0\0\x2a\xf0\x9f\x98\x80", 8, &code,
					&reason, &rlen), 0);
	assert_int_equal(code, 42);
}

static void test_capsules_walk(void **state)
{
	(void)state;
	/* a GREASE capsule before the close, as Chromium sends them */
	struct buf c = BUF_INIT;
	assert_int_equal(h3_frame_head_append(&c, 0x29 * 0x1f + 0x17, 3), 0);
	assert_int_equal(buf_append(&c, "xyz", 3), 0);
	assert_int_equal(h3_close_append(&out, 3, "done"), 0);
	uint64_t t;
	const uint8_t *pl, *v;
	size_t plen, vlen;
	assert_true(h3_frame_parse(ob(), out.len, 100, &t, &pl, &plen) > 0);
	assert_int_equal(buf_append(&c, pl, plen), 0);
	const uint8_t *p = (const uint8_t *)c.data;
	for (size_t k = 0; k <= c.len; k++) {
		size_t off = 0, n = 0;
		ssize_t r;
		while ((r = h3_capsule_parse(p + off, k - off, 100, &t, &v, &vlen)) > 0) {
			n++;
			off += (size_t)r;
		}
		assert_int_equal(r, 0);
		assert_int_equal(n, k == c.len ? 2 : k >= 6 ? 1 : 0);
		if (k == c.len) {
			uint32_t code;
			const char *reason;
			size_t rlen;
			assert_true(t == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION);
			assert_int_equal(h3_close_parse(v, vlen, &code, &reason, &rlen), 0);
			assert_int_equal(code, 3);
			assert_memory_equal(reason, "done", 4);
		}
	}
	assert_int_equal(h3_capsule_parse(p, c.len, 2, &t, &v, &vlen), -1);
	buf_release(&c);
}

static void test_datagram(void **state)
{
	(void)state;
	uint64_t q = 9;
	assert_int_equal(h3_datagram_parse((const uint8_t *)"\x01payload", 8, &q), 1);
	assert_true(q == 1);
	assert_int_equal(h3_datagram_parse((const uint8_t *)"", 0, &q), 0);
	assert_int_equal(h3_datagram_parse((const uint8_t *)"\x40", 1, &q), 0);
	uint8_t p[8];
	h3_varint_put(p, (UINT64_C(1) << 60) - 1);
	assert_int_equal(h3_datagram_parse(p, 8, &q), 8);
	assert_true(q == (UINT64_C(1) << 60) - 1);
	h3_varint_put(p, UINT64_C(1) << 60);
	assert_int_equal(h3_datagram_parse(p, 8, &q), 0);
}

/* ---- QPACK ---- */

/* Encodes the N fields (name, value pairs) into OUT with nghttp3's own encoder. */
static void encode(const char *const *f, size_t n)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_encoder *enc;
	nghttp3_nv nva[16];
	nghttp3_buf pb, rb, eb;
	assert_true(n <= 16);
	for (size_t i = 0; i < n; i++) {
		nghttp3_nv nv = { (uint8_t *)(uintptr_t)f[2 * i], (uint8_t *)(uintptr_t)f[2 * i + 1],
				  strlen(f[2 * i]), strlen(f[2 * i + 1]), NGHTTP3_NV_FLAG_NONE };
		nva[i] = nv;
	}
	nghttp3_buf_init(&pb);
	nghttp3_buf_init(&rb);
	nghttp3_buf_init(&eb);
	assert_int_equal(nghttp3_qpack_encoder_new(&enc, 0, mem), 0);
	assert_int_equal(nghttp3_qpack_encoder_encode(enc, &pb, &rb, &eb, 0, nva, n), 0);
	assert_int_equal(nghttp3_buf_len(&eb), 0);
	buf_reset(&out);
	assert_int_equal(buf_append(&out, pb.pos, nghttp3_buf_len(&pb)), 0);
	assert_int_equal(buf_append(&out, rb.pos, nghttp3_buf_len(&rb)), 0);
	nghttp3_buf_free(&pb, mem);
	nghttp3_buf_free(&rb, mem);
	nghttp3_buf_free(&eb, mem);
	nghttp3_qpack_encoder_del(enc);
}

/* Whether S occurs in P (LEN bytes). */
static bool contains(const uint8_t *p, size_t len, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(p + i, s, n) == 0)
			return true;
	return false;
}

/* Whether the field section P (LEN) holds NAME: VALUE, decoded by nghttp3 itself. */
static bool has_field(const uint8_t *p, size_t len, const char *name, const char *value)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_decoder *dec;
	nghttp3_qpack_stream_context *sctx;
	bool found = false;
	assert_int_equal(nghttp3_qpack_decoder_new(&dec, 0, 0, mem), 0);
	assert_int_equal(nghttp3_qpack_stream_context_new(&sctx, 0, mem), 0);
	for (;;) {
		nghttp3_qpack_nv nv;
		uint8_t flags = 0;
		nghttp3_ssize r = nghttp3_qpack_decoder_read_request(dec, sctx, &nv, &flags, p, len, 1);
		assert_true(r >= 0);
		p += r;
		len -= (size_t)r;
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
			nghttp3_vec n = nghttp3_rcbuf_get_buf(nv.name);
			nghttp3_vec v = nghttp3_rcbuf_get_buf(nv.value);
			found = found || (n.len == strlen(name) && !memcmp(n.base, name, n.len) &&
					  v.len == strlen(value) && !memcmp(v.base, value, v.len));
			nghttp3_rcbuf_decref(nv.name);
			nghttp3_rcbuf_decref(nv.value);
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
			break;
		assert_true(r > 0 || (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT));
	}
	nghttp3_qpack_stream_context_del(sctx);
	nghttp3_qpack_decoder_del(dec);
	return found;
}

static const char *const chromium_connect[] = {
	":method", "CONNECT",
	":protocol", "webtransport",
	":scheme", "https",
	":authority", "127.0.0.1:4433",
	":path", "/mcp-flow",
	"sec-webtransport-http3-draft02", "1",
	"origin", "https://example.test",
	"user-agent", ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
		       "Chrome/156.0.0.0 Safari/537.36"),
};

/* Expects R to be the Chromium-like CONNECT. */
static void expect_connect(const struct h3_request *r, const char *origin)
{
	assert_string_equal(r->method, "CONNECT");
	assert_string_equal(r->protocol, "webtransport");
	assert_string_equal(r->scheme, "https");
	assert_string_equal(r->authority, "127.0.0.1:4433");
	assert_string_equal(r->path, "/mcp-flow");
	assert_true(r->wt_draft02);
	assert_int_equal(r->has_origin, origin != NULL);
	if (origin)
		assert_string_equal(r->origin, origin);
	assert_false(r->truncated);
	assert_false(r->bad_pseudo);
}

static void test_request_huffman(void **state)
{
	(void)state;
	struct h3_request r;
	char why[128] = "";
	encode(chromium_connect, 8);
	/* nghttp3 Huffman-codes the values it can shorten, as Chromium does */
	assert_false(contains(ob(), out.len, "webtransport"));
	assert_false(contains(ob(), out.len, "example.test"));
	assert_int_equal(h3_request_decode(ob(), out.len, &r, why, sizeof why), 0);
	expect_connect(&r, "https://example.test");
	/* a cut before the end (origin last) is refused or, at a field line's
	 * end, decodes fewer fields */
	encode(chromium_connect, 7);
	for (size_t k = 0; k < out.len; k++) {
		int rc = h3_request_decode(ob(), k, &r, why, sizeof why);
		if (rc == 0)
			assert_false(r.wt_draft02 && r.has_origin && !strcmp(r.path, "/mcp-flow"));
		else
			assert_true(why[0] != '\0');
	}
}

static void test_request_rfc9204(void **state)
{
	(void)state;
	struct h3_request r;
	char why[128];
	/* RFC 9204 B.1: a literal with a static name reference, ":path: /index.html" */
	static const uint8_t b1[] = { 0x00, 0x00, 0x51, 0x0b, 0x2f, 0x69, 0x6e, 0x64, 0x65, 0x78,
				      0x2e, 0x68, 0x74, 0x6d, 0x6c };
	assert_int_equal(h3_request_decode(b1, sizeof b1, &r, why, sizeof why), 0);
	assert_string_equal(r.path, "/index.html");
	/* static references (:method CONNECT = 15, :scheme https = 23), a
	 * literal with the name :authority (0), literal names */
	static const uint8_t hand[] =
		"\x00\x00"
		"\xcf"
		"\xd7"
		"\x50\x0e" "127.0.0.1:4433"
		"\x27\x02" ":protocol" "\x0c" "webtransport"
		"\x51\x09" "/mcp-flow"
		"\x27\x17" "sec-webtransport-http3-draft02" "\x01" "1"
		"\x5f\x4b\x14" "https://example.test";  /* origin: static 90 = 15 + 0x4b */
	assert_int_equal(h3_request_decode(hand, sizeof hand - 1, &r, why, sizeof why), 0);
	expect_connect(&r, "https://example.test");
}

static void test_request_dynamic_refused(void **state)
{
	(void)state;
	struct h3_request r;
	char why[128];
	static const struct { const char *b; size_t n; } bad[] = {
		{ "\x02\x00\x80", 3 },            /* Required Insert Count 1, an indexed line */
		{ "\x00\x00\x80", 3 },            /* dynamic index 0 with no table */
		{ "\x00\x00\x10", 3 },            /* post-base index */
		{ "\x00\x00\x40\x01x", 5 },       /* literal with a dynamic name reference */
		{ "\x00\x00\x00", 3 },            /* post-base name reference */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why[0] = '\0';
		assert_int_equal(h3_request_decode((const uint8_t *)bad[i].b, bad[i].n, &r, why,
						   sizeof why), -1);
		assert_true(why[0] != '\0');
	}
	strcpy(why, "?");
	assert_int_equal(h3_request_decode((const uint8_t *)"\x02\x00\x80", 3, &r, why, sizeof why),
			 -1);
	assert_non_null(strstr(why, "dynamic"));
	assert_int_equal(h3_request_decode((const uint8_t *)"", 0, &r, NULL, 0), -1);
}

static void test_request_fields(void **state)
{
	(void)state;
	struct h3_request r;
	char why[128];
	/* values cut to their field's size */
	char longauth[400];
	memset(longauth, 'h', sizeof longauth - 1);
	longauth[sizeof longauth - 1] = '\0';
	const char *const cut[] = { ":method", "CONNECT", ":authority", longauth };
	encode(cut, 2);
	assert_int_equal(h3_request_decode(ob(), out.len, &r, why, sizeof why), 0);
	assert_true(r.truncated);
	assert_int_equal(strlen(r.authority), sizeof r.authority - 1);
	assert_false(r.bad_pseudo);
	/* pseudo-headers: unknown, a response's, repeated, after a regular field */
	static const char *const bad[][6] = {
		{ ":method", "GET", ":bogus", "x", "a", "b" },
		{ ":status", "200", ":method", "GET", "a", "b" },
		{ ":path", "/a", ":path", "/b", "a", "b" },
		{ ":method", "GET", "origin", "o", ":path", "/" },
	};
	for (size_t i = 0; i < 4; i++) {
		encode(bad[i], 3);
		assert_int_equal(h3_request_decode(ob(), out.len, &r, why, sizeof why), 0);
		assert_true(r.bad_pseudo);
	}
	/* the draft-02 header says 1 or it does not count */
	const char *const two[] = { ":method", "CONNECT", "sec-webtransport-http3-draft02", "2" };
	encode(two, 2);
	assert_int_equal(h3_request_decode(ob(), out.len, &r, why, sizeof why), 0);
	assert_false(r.wt_draft02);
	/* malformed field lines (RFC 9114 4.2) */
	const char *const upper[] = { ":method", "CONNECT", "Origin", "x" };
	encode(upper, 2);
	assert_int_equal(h3_request_decode(ob(), out.len, &r, why, sizeof why), -1);
	static const uint8_t nul[] = "\x00\x00\x50\x03" "a\0b";
	assert_int_equal(h3_request_decode(nul, sizeof nul - 1, &r, why, sizeof why), -1);
	static const uint8_t crlf[] = "\x00\x00\x51\x03" "/\r\n";
	assert_int_equal(h3_request_decode(crlf, sizeof crlf - 1, &r, why, sizeof why), -1);
	/* a value longer than its bytes */
	static const uint8_t shortv[] = "\x00\x00\x51\x0b/ind";
	assert_int_equal(h3_request_decode(shortv, sizeof shortv - 1, &r, why, sizeof why), -1);
}

static void test_response(void **state)
{
	(void)state;
	static const uint8_t ok[] = { 0x01, 0x03, 0x00, 0x00, 0xd9 };
	uint64_t t;
	const uint8_t *pl;
	size_t plen;
	assert_int_equal(h3_response_append(&out, 200, false), 0);
	assert_int_equal(out.len, sizeof ok);
	assert_memory_equal(out.data, ok, sizeof ok);
	assert_int_equal(h3_response_status(ok + 2, 3), 200);
	static const int codes[] = { 100, 200, 204, 400, 404, 429, 500, 503, 599 };
	for (int wt = 0; wt <= 1; wt++) {
		for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
			buf_reset(&out);
			assert_int_equal(h3_response_append(&out, codes[i], wt), 0);
			assert_int_equal(h3_frame_parse(ob(), out.len, 100, &t, &pl, &plen),
					 (ssize_t)out.len);
			assert_true(t == H3_FRAME_HEADERS);
			assert_int_equal(h3_response_status(pl, plen), codes[i]);
			/* the draft-02 answer rides on a WebTransport 200 alone */
			bool draft = has_field(pl, plen, "sec-webtransport-http3-draft", "draft02");
			assert_int_equal(draft, wt && codes[i] == 200);
		}
	}
	assert_int_equal(h3_response_append(&out, 99, false), -1);
	assert_int_equal(h3_response_append(&out, 600, false), -1);
}

static void test_response_status_refused(void **state)
{
	(void)state;
	static const char *const cases[][4] = {
		{ ":method", "GET", "a", "b" },      /* a request */
		{ "server", "x", "a", "b" },         /* no :status */
		{ ":status", "20", "a", "b" },
		{ ":status", "2000", "a", "b" },
		{ ":status", "abc", "a", "b" },
		{ ":status", "099", "a", "b" },
		{ ":status", "200", ":status", "204" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		encode(cases[i], 2);
		assert_int_equal(h3_response_status(ob(), out.len), -1);
	}
	assert_int_equal(h3_response_status((const uint8_t *)"\x00\x00", 2), -1);
	assert_int_equal(h3_response_status((const uint8_t *)"\x01\x00\xd9", 3), -1);
	assert_int_equal(h3_response_status((const uint8_t *)"\x00\x00\xd9\x40", 4), -1);
}

static void test_connect_round_trip(void **state)
{
	(void)state;
	struct h3_request r;
	char why[128] = "";
	uint64_t t;
	const uint8_t *pl;
	size_t plen;
	for (int o = 0; o <= 1; o++) {
		const char *origin = o ? "https://example.test" : NULL;
		buf_reset(&out);
		assert_int_equal(h3_connect_append(&out, "127.0.0.1:4433", "/mcp-flow", origin), 0);
		assert_int_equal(h3_frame_parse(ob(), out.len, 4096, &t, &pl, &plen),
				 (ssize_t)out.len);
		assert_true(t == H3_FRAME_HEADERS);
		enum h3_preamble_kind k;
		uint64_t sid;
		assert_int_equal(h3_preamble_parse(ob(), out.len, true, &k, &sid), 0);
		assert_int_equal(k, H3_PRE_REQUEST);
		assert_int_equal(h3_request_decode(pl, plen, &r, why, sizeof why), 0);
		expect_connect(&r, origin);
		assert_int_equal(h3_response_status(pl, plen), -1);  /* a request has no :status */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_varint_lengths, teardown),
		cmocka_unit_test_teardown(test_varint_rfc9000, teardown),
		cmocka_unit_test_teardown(test_wt_errors, teardown),
		cmocka_unit_test_teardown(test_frames_split, teardown),
		cmocka_unit_test_teardown(test_frame_max, teardown),
		cmocka_unit_test_teardown(test_settings_chromium, teardown),
		cmocka_unit_test_teardown(test_settings_refused, teardown),
		cmocka_unit_test_teardown(test_control_preamble, teardown),
		cmocka_unit_test_teardown(test_preambles, teardown),
		cmocka_unit_test_teardown(test_close_round_trip, teardown),
		cmocka_unit_test_teardown(test_close_refused, teardown),
		cmocka_unit_test_teardown(test_capsules_walk, teardown),
		cmocka_unit_test_teardown(test_datagram, teardown),
		cmocka_unit_test_teardown(test_request_huffman, teardown),
		cmocka_unit_test_teardown(test_request_rfc9204, teardown),
		cmocka_unit_test_teardown(test_request_dynamic_refused, teardown),
		cmocka_unit_test_teardown(test_request_fields, teardown),
		cmocka_unit_test_teardown(test_response, teardown),
		cmocka_unit_test_teardown(test_response_status_refused, teardown),
		cmocka_unit_test_teardown(test_connect_round_trip, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
