/*
 * fuzz_h3.c - libFuzzer target for src/core/h3.c (HTTP/3 and WebTransport
 * framing). Byte 0 (mod 8) picks the parser the rest is fed to:
 *   0 frames, walked as a stream reader walks them (bound 1024): each one
 *     lies inside the input, its head reads alike through h3_frame_head
 *     and re-encodes to a head that parses back; where the walk stops the
 *     rest really is short (or over the bound);
 *   1 a SETTINGS payload: what parses writes back (its known settings as
 *     pairs) and parses again to the same values;
 *   2 capsules on a CONNECT stream, a CLOSE_WEBTRANSPORT_SESSION read with
 *     h3_close_parse and, without NUL in its reason, written back by
 *     h3_close_append and read again alike;
 *   3, 4 a bidirectional / unidirectional stream's preamble: no longer
 *     than the input, every shorter cut needs more, a WebTransport one
 *     written back reads the same;
 *   5 a datagram's prefix (and the input's first 8 bytes as an HTTP/3
 *     error code and as a varint, both round-tripped);
 *   6 a request's field section: strings stay inside their fields, a
 *     refusal has a reason, and the same bytes as a response have a valid
 *     :status or none;
 *   7 a response's field section: a :status found is in 100..599 and
 *     written back reads the same.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "h3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_h3: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* Walks frames; checks each against h3_frame_head and a re-encoded head. */
static void frames(const uint8_t *p, size_t len)
{
	size_t off = 0;
	struct buf b = BUF_INIT;
	for (;;) {
		uint64_t t, ht, hl;
		const uint8_t *pl;
		size_t plen;
		ssize_t r = h3_frame_parse(p + off, len - off, 1024, &t, &pl, &plen);
		size_t h = h3_frame_head(p + off, len - off, &ht, &hl);
		if (r < 0) {
			CHECK(h && hl > 1024);
			break;
		}
		if (r == 0) {
			CHECK(!h || hl > len - off - h);
			break;
		}
		CHECK(h && ht == t && hl == plen && h + plen == (size_t)r);
		CHECK(pl == p + off + h && (size_t)r <= len - off);
		buf_reset(&b);
		CHECK(h3_frame_head_append(&b, t, plen) == 0);
		CHECK(b.len <= h && h3_frame_head((uint8_t *)b.data, b.len, &ht, &hl) == b.len);
		CHECK(ht == t && hl == plen);
		off += (size_t)r;
	}
	buf_release(&b);
}

/* Parses a SETTINGS payload; what parses round-trips through pairs. */
static void settings(const uint8_t *p, size_t len)
{
	struct h3_settings s, s2;
	if (h3_settings_parse(p, len, &s) < 0)
		return;
	struct buf b = BUF_INIT;
	const struct { uint64_t id, v; } pairs[] = {
		{ H3_SETTING_QPACK_MAX_TABLE_CAPACITY, s.qpack_max_table_capacity },
		{ H3_SETTING_MAX_FIELD_SECTION_SIZE, s.max_field_section_size },
		{ H3_SETTING_QPACK_BLOCKED_STREAMS, s.qpack_blocked_streams },
		{ H3_SETTING_ENABLE_CONNECT_PROTOCOL, s.enable_connect_protocol },
		{ H3_SETTING_H3_DATAGRAM, s.h3_datagram },
		{ H3_SETTING_ENABLE_WEBTRANSPORT, s.enable_webtransport },
		{ H3_SETTING_WEBTRANSPORT_MAX_SESSIONS, s.webtransport_max_sessions },
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
		CHECK(h3_varint_append(&b, pairs[i].id) == 0 && h3_varint_append(&b, pairs[i].v) == 0);
	CHECK(h3_settings_parse((uint8_t *)b.data, b.len, &s2) == 0);
	CHECK(s2.qpack_max_table_capacity == s.qpack_max_table_capacity);
	CHECK(s2.max_field_section_size == s.max_field_section_size);
	CHECK(s2.qpack_blocked_streams == s.qpack_blocked_streams);
	CHECK(s2.enable_connect_protocol == s.enable_connect_protocol);
	CHECK(s2.h3_datagram == s.h3_datagram && s2.enable_webtransport == s.enable_webtransport);
	CHECK(s2.webtransport_max_sessions == s.webtransport_max_sessions);
	buf_release(&b);
}

/* A close capsule's value: parsed, and written back when its reason has no NUL. */
static void close_value(const uint8_t *v, size_t vlen)
{
	uint32_t code, code2;
	const char *reason, *reason2;
	size_t rlen, rlen2;
	if (h3_close_parse(v, vlen, &code, &reason, &rlen) < 0)
		return;
	CHECK(rlen <= 1024 && reason == (const char *)v + 4 && rlen == vlen - 4);
	if (memchr(reason, 0, rlen))
		return;
	char text[1025];
	memcpy(text, reason, rlen);
	text[rlen] = '\0';
	struct buf b = BUF_INIT;
	uint64_t t;
	const uint8_t *pl, *cv;
	size_t plen, cvlen;
	CHECK(h3_close_append(&b, code, text) == 0);
	CHECK(h3_frame_parse((uint8_t *)b.data, b.len, 2048, &t, &pl, &plen) == (ssize_t)b.len);
	CHECK(t == H3_FRAME_DATA);
	CHECK(h3_capsule_parse(pl, plen, 2048, &t, &cv, &cvlen) == (ssize_t)plen);
	CHECK(t == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION);
	CHECK(h3_close_parse(cv, cvlen, &code2, &reason2, &rlen2) == 0);
	CHECK(code2 == code && rlen2 == rlen && memcmp(reason2, reason, rlen) == 0);
	buf_release(&b);
}

/* Walks capsules as the CONNECT stream's reader does. */
static void capsules(const uint8_t *p, size_t len)
{
	size_t off = 0;
	for (;;) {
		uint64_t t;
		const uint8_t *v;
		size_t vlen;
		ssize_t r = h3_capsule_parse(p + off, len - off, 2048, &t, &v, &vlen);
		if (r <= 0)
			break;
		CHECK((size_t)r <= len - off && v + vlen == p + off + r);
		if (t == H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION)
			close_value(v, vlen);
		off += (size_t)r;
	}
}

/* A stream preamble: bounded, cut short it needs more, WebTransport's written back. */
static void preamble(const uint8_t *p, size_t len, bool bidi)
{
	enum h3_preamble_kind k, k2;
	uint64_t sid, sid2;
	size_t n = h3_preamble_parse(p, len, bidi, &k, &sid);
	CHECK(n <= len);
	if (k == H3_PRE_MORE || k == H3_PRE_REQUEST) {
		CHECK(n == 0 && sid == 0);
		CHECK(k == H3_PRE_REQUEST ? bidi && len > 0 : true);
		return;
	}
	CHECK(n > 0);
	CHECK(bidi ? k == H3_PRE_WT_BIDI : k != H3_PRE_WT_BIDI);
	for (size_t c = 0; c < n; c++) {
		CHECK(h3_preamble_parse(p, c, bidi, &k2, &sid2) == 0);
		CHECK(k2 == H3_PRE_MORE);
	}
	if (k != H3_PRE_WT_BIDI && k != H3_PRE_WT_UNI)
		return;
	struct buf b = BUF_INIT;
	CHECK(h3_wt_preamble(&b, bidi, sid) == 0);
	CHECK(h3_preamble_parse((uint8_t *)b.data, b.len, bidi, &k2, &sid2) == b.len);
	CHECK(k2 == k && sid2 == sid);
	buf_release(&b);
}

/* A datagram prefix; an error code and a varint from the first bytes. */
static void datagram(const uint8_t *p, size_t len)
{
	uint64_t q, v, c = 0;
	size_t n = h3_datagram_parse(p, len, &q);
	CHECK(n <= len && n <= 8);
	if (n)
		CHECK(q < (UINT64_C(1) << 60));
	for (size_t i = 0; i < 8 && i < len; i++)
		c = c << 8 | p[i];
	uint32_t e;
	if (h3_wt_error_from_h3(c, &e))
		CHECK(h3_wt_error_to_h3(e) == c);
	else
		CHECK(c < UINT64_C(0x52e4a40fa8db) || c > UINT64_C(0x52e5ac983162) ||
		      (c - 0x21) % 0x1f == 0);
	CHECK(h3_wt_error_from_h3(h3_wt_error_to_h3((uint32_t)c), &e) && e == (uint32_t)c);
	n = h3_varint_get(p, len, &v);
	if (n) {
		uint8_t w[8];
		size_t m = h3_varint_put(w, v);
		CHECK(m > 0 && m <= n && h3_varint_get(w, m, &q) == m && q == v);
	}
}

/* A request's field section. */
static void request(const uint8_t *p, size_t len)
{
	struct h3_request r;
	char why[128] = "";
	if (h3_request_decode(p, len, &r, why, sizeof why) < 0) {
		CHECK(why[0] != '\0');
	} else {
		CHECK(strlen(r.method) < sizeof r.method && strlen(r.protocol) < sizeof r.protocol);
		CHECK(strlen(r.scheme) < sizeof r.scheme);
		CHECK(strlen(r.authority) < sizeof r.authority && strlen(r.path) < sizeof r.path);
		CHECK(strlen(r.origin) < sizeof r.origin && (r.has_origin || !r.origin[0]));
	}
	int s = h3_response_status(p, len);
	CHECK(s == -1 || (s >= 100 && s <= 599));
}

/* A response's field section: a status found is written back and read alike. */
static void response(const uint8_t *p, size_t len)
{
	int s = h3_response_status(p, len);
	if (s < 0)
		return;
	CHECK(s >= 100 && s <= 599);
	for (int wt = 0; wt <= 1; wt++) {
		struct buf b = BUF_INIT;
		uint64_t t;
		const uint8_t *pl;
		size_t plen;
		CHECK(h3_response_append(&b, s, wt) == 0);
		CHECK(h3_frame_parse((uint8_t *)b.data, b.len, 1024, &t, &pl, &plen) == (ssize_t)b.len);
		CHECK(t == H3_FRAME_HEADERS && h3_response_status(pl, plen) == s);
		buf_release(&b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t len = size - 1;
	switch (data[0] % 8) {
	case 0: frames(p, len); break;
	case 1: settings(p, len); break;
	case 2: capsules(p, len); break;
	case 3: preamble(p, len, true); break;
	case 4: preamble(p, len, false); break;
	case 5: datagram(p, len); break;
	case 6: request(p, len); break;
	default: response(p, len); break;
	}
	return 0;
}
