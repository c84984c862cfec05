/*
 * test_cbor_json.c - unit tests for src/core/cbor_json.c: JSON-RPC messages
 * through CBOR and back unchanged, the examples of RFC 8949 Appendix A
 * decoded (and encoded where the mapping allows), the shortest exact float,
 * and every refusal with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "buf.h"
#include "cbor_json.h"

/* The bytes of the hex string HEX (spaces allowed) in OUT; their count. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	while (*hex) {
		if (*hex == ' ') {
			hex++;
			continue;
		}
		unsigned v;
		assert_int_equal(sscanf(hex, "%2x", &v), 1);
		assert_true(n < cap);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

/* The JSON text TEXT parsed (any value, NUL escapes allowed). */
static json_t *parse(const char *text)
{
	json_error_t err;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	if (!v)
		fail_msg("bad test JSON: %s: %s", text, err.text);
	return v;
}

/* True when A and B are equal with the same types all the way down (an
 * integer is never a real) and reals bit-equal in sign (-0.0). */
static int same(const json_t *a, const json_t *b)
{
	if (json_typeof(a) != json_typeof(b))
		return 0;
	if (json_is_real(a))
		return json_real_value(a) == json_real_value(b) &&
		       !signbit(json_real_value(a)) == !signbit(json_real_value(b));
	if (json_is_array(a)) {
		if (json_array_size(a) != json_array_size(b))
			return 0;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!same(json_array_get(a, i), json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (json_is_object(a)) {
		const char *k;
		size_t klen;
		json_t *m;
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_keylen_foreach((json_t *)a, k, klen, m) {
			json_t *o = json_object_getn(b, k, klen);
			if (!o || !same(m, o))
				return 0;
		}
		return 1;
	}
	return json_equal(a, b);
}

/* V (borrowed) through CBOR and back: the same value, and the CBOR is one
 * item exactly. Returns the encoded length. */
static size_t round_trip_value(const json_t *v)
{
	struct buf b = BUF_INIT;
	char why[128] = "";
	assert_int_equal(cbor_from_json(v, &b, why, sizeof why), 0);
	json_t *back = cbor_to_json((const uint8_t *)b.data, b.len, why, sizeof why);
	if (!back)
		fail_msg("decoding what was encoded: %s", why);
	assert_true(same(v, back));
	size_t len = b.len;
	json_decref(back);
	buf_release(&b);
	return len;
}

/* The JSON text TEXT through CBOR and back. */
static void round_trip(const char *text)
{
	json_t *v = parse(text);
	round_trip_value(v);
	json_decref(v);
}

/* HEX decoded must be the JSON text WANT. */
static void decodes(const char *hex, const char *want)
{
	uint8_t in[512];
	size_t n = unhex(hex, in, sizeof in);
	char why[128] = "";
	json_t *got = cbor_to_json(in, n, why, sizeof why);
	if (!got)
		fail_msg("%s: refused: %s", hex, why);
	json_t *w = parse(want);
	if (!same(got, w)) {
		char *s = json_dumps(got, JSON_ENCODE_ANY);
		fail_msg("%s: got %s, want %s", hex, s, want);
	}
	json_decref(w);
	json_decref(got);
}

/* HEX decoded must be refused with WHY containing REASON. */
static void refused(const char *hex, const char *reason)
{
	uint8_t in[512];
	size_t n = unhex(hex, in, sizeof in);
	char why[128] = "";
	json_t *got = cbor_to_json(in, n, why, sizeof why);
	if (got)
		fail_msg("%s: accepted, want refused (%s)", hex, reason);
	if (!strstr(why, reason))
		fail_msg("%s: why \"%s\", want \"%s\"", hex, why, reason);
}

/* The JSON text TEXT must encode to exactly HEX. */
static void encodes(const char *text, const char *hex)
{
	uint8_t want[512];
	size_t n = unhex(hex, want, sizeof want);
	json_t *v = parse(text);
	struct buf b = BUF_INIT;
	char why[128] = "";
	assert_int_equal(cbor_from_json(v, &b, why, sizeof why), 0);
	if (b.len != n || memcmp(b.data, want, n) != 0) {
		char got[1100] = "";
		for (size_t i = 0; i < b.len && i < 500; i++)
			sprintf(got + 2 * i, "%02x", (uint8_t)b.data[i]);
		fail_msg("%s: got %s, want %s", text, got, hex);
	}
	buf_release(&b);
	json_decref(v);
}

/* Realistic MCP messages: requests, results with nested schemas and
 * contents of every kind. */
static void test_mcp_messages_round_trip(void **state)
{
	(void)state;
	round_trip("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
		   "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"roots\":{\"listChanged\":true},"
		   "\"sampling\":{},\"elicitation\":{}},\"clientInfo\":{\"name\":\"mcp-chain\","
		   "\"version\":\"1.0.0\"}}}");
	round_trip("{\"jsonrpc\":\"2.0\",\"id\":\"tools-1\",\"result\":{\"tools\":[{\"name\":\"search\","
		   "\"description\":\"Searches the index\",\"inputSchema\":{\"type\":\"object\","
		   "\"properties\":{\"query\":{\"type\":\"string\",\"minLength\":1},"
		   "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"default\":10},"
		   "\"threshold\":{\"type\":\"number\",\"default\":0.75},"
		   "\"filters\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
		   "\"field\":{\"type\":\"string\"},\"values\":{\"type\":\"array\",\"items\":{}}},"
		   "\"required\":[\"field\"]}}},\"required\":[\"query\"],\"additionalProperties\":false},"
		   "\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":null}}],\"nextCursor\":null}}");
	round_trip("{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":["
		   "{\"type\":\"text\",\"text\":\"Résumé: naïve café, 日本語, emoji 🎉, \\\"quoted\\\"\\n\\ttab\"},"
		   "{\"type\":\"image\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==\","
		   "\"mimeType\":\"image/png\"},"
		   "{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///tmp/a.txt\",\"mimeType\":\"text/plain\","
		   "\"text\":\"hello\"}},"
		   "{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///tmp/b.bin\",\"blob\":\"AAECAwQ=\"}}],"
		   "\"structuredContent\":{\"count\":9007199254740993,\"delta\":-9223372036854775808,"
		   "\"max\":9223372036854775807,\"ratio\":0.1,\"huge\":1e300,\"tiny\":5e-324,\"neg0\":-0.0,"
		   "\"half\":1.5,\"whole\":2.0,\"single\":100000.0,\"empty\":{},\"none\":[],\"s\":\"\"},"
		   "\"isError\":false}}");
	round_trip("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
		   "{\"progressToken\":\"t\",\"progress\":0.5,\"total\":1.0,\"message\":\"half way\"}}");
	round_trip("{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"Invalid params\","
		   "\"data\":{\"path\":[\"params\",0,\"name\"]}}}");
	round_trip("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]");
	/* scalars alone, and a NUL inside a string and a key (jansson keeps both) */
	round_trip("null");
	round_trip("true");
	round_trip("\"a\\u0000b\"");
	json_t *o = json_object();   /* jansson's parser takes no NUL in a key: set it */
	json_object_setn_new(o, "k\0ey", 4, json_stringn("v\0", 2));
	json_object_set_new(o, "key", json_integer(1));
	round_trip_value(o);
	json_decref(o);
	round_trip("-0.0");
	round_trip("3.141592653589793");
	round_trip("-1");
	round_trip("0");
}

/* Every integer width, at its edges, both ways. */
static void test_integers(void **state)
{
	(void)state;
	static const json_int_t edges[] = {
		0, 1, 23, 24, 255, 256, 65535, 65536, 4294967295LL, 4294967296LL, INT64_MAX,
		-1, -24, -25, -256, -257, -65536, -65537, -4294967296LL, -4294967297LL, INT64_MIN,
	};
	for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
		json_t *v = json_integer(edges[i]);
		round_trip_value(v);
		json_decref(v);
	}
	encodes("9223372036854775807", "1b7fffffffffffffff");
	encodes("-9223372036854775808", "3b7fffffffffffffff");
	encodes("1000000000000", "1b000000e8d4a51000");
	encodes("-1000", "3903e7");
}

/* Reals take the shortest float that holds them exactly, and stay reals. */
static void test_reals_shortest(void **state)
{
	(void)state;
	encodes("0.0", "f90000");
	encodes("-0.0", "f98000");
	encodes("1.0", "f93c00");
	encodes("1.5", "f93e00");
	encodes("65504.0", "f97bff");
	encodes("5.960464477539063e-8", "f90001");   /* the smallest half subnormal */
	encodes("0.00006103515625", "f90400");       /* the smallest half normal */
	encodes("-4.0", "f9c400");
	encodes("65536.0", "fa47800000");            /* beyond half: single */
	encodes("100000.0", "fa47c35000");
	encodes("3.4028234663852886e+38", "fa7f7fffff");
	encodes("1.1", "fb3ff199999999999a");
	encodes("0.1", "fb3fb999999999999a");
	encodes("1e300", "fb7e37e43c8800759c");
	encodes("-4.1", "fbc010666666666666");
	encodes("2.98e-8", "fb3e5fff5c939522db");   /* not a single either */
	encodes("9.313225746154785e-10", "fa30800000");   /* 2^-30: below half, a single */
	encodes("1.00048828125", "fa3f801000");   /* 1 + 2^-11: one bit past half */
	/* an integral real decodes as a real, an integer as an integer */
	decodes("f94000", "2.0");
	decodes("02", "2");
	/* every half there is decodes and re-encodes to the same two bytes */
	for (unsigned h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;   /* infinities and NaNs */
		uint8_t in[3] = { 0xf9, (uint8_t)(h >> 8), (uint8_t)h };
		char why[128];
		json_t *v = cbor_to_json(in, 3, why, sizeof why);
		assert_non_null(v);
		struct buf b = BUF_INIT;
		assert_int_equal(cbor_from_json(v, &b, why, sizeof why), 0);
		assert_int_equal(b.len, 3);
		assert_memory_equal(b.data, in, 3);
		buf_release(&b);
		json_decref(v);
	}
}

/* RFC 8949 Appendix A: the examples JSON can hold. */
static void test_rfc8949_appendix_a(void **state)
{
	(void)state;
	decodes("00", "0");
	decodes("01", "1");
	decodes("0a", "10");
	decodes("17", "23");
	decodes("1818", "24");
	decodes("1819", "25");
	decodes("1864", "100");
	decodes("1903e8", "1000");
	decodes("1a000f4240", "1000000");
	decodes("1b000000e8d4a51000", "1000000000000");
	decodes("20", "-1");
	decodes("29", "-10");
	decodes("3863", "-100");
	decodes("3903e7", "-1000");
	decodes("f90000", "0.0");
	decodes("f98000", "-0.0");
	decodes("f93c00", "1.0");
	decodes("fb3ff199999999999a", "1.1");
	decodes("f93e00", "1.5");
	decodes("f97bff", "65504.0");
	decodes("fa47c35000", "100000.0");
	decodes("fa7f7fffff", "3.4028234663852886e+38");
	decodes("fb7e37e43c8800759c", "1.0e+300");
	decodes("f90001", "5.960464477539063e-8");
	decodes("f90400", "0.00006103515625");
	decodes("f9c400", "-4.0");
	decodes("fbc010666666666666", "-4.1");
	decodes("f4", "false");
	decodes("f5", "true");
	decodes("f6", "null");
	decodes("40", "\"\"");
	decodes("4401020304", "\"AQIDBA==\"");
	decodes("60", "\"\"");
	decodes("6161", "\"a\"");
	decodes("6449455446", "\"IETF\"");
	decodes("62225c", "\"\\\"\\\\\"");
	decodes("62c3bc", "\"\\u00fc\"");
	decodes("63e6b0b4", "\"\\u6c34\"");
	decodes("64f0908591", "\"\\ud800\\udd51\"");
	decodes("80", "[]");
	decodes("83010203", "[1,2,3]");
	decodes("8301820203820405", "[1,[2,3],[4,5]]");
	decodes("98190102030405060708090a0b0c0d0e0f101112131415161718181819",
		"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]");
	decodes("a0", "{}");
	decodes("a26161016162820203", "{\"a\":1,\"b\":[2,3]}");
	decodes("826161a161626163", "[\"a\",{\"b\":\"c\"}]");
	decodes("a56161614161626142616361436164614461656145",
		"{\"a\":\"A\",\"b\":\"B\",\"c\":\"C\",\"d\":\"D\",\"e\":\"E\"}");
	/* indefinite lengths */
	decodes("5f42010243030405ff", "\"AQIDBAU=\"");
	decodes("7f657374726561646d696e67ff", "\"streaming\"");
	decodes("9fff", "[]");
	decodes("9f018202039f0405ffff", "[1,[2,3],[4,5]]");
	decodes("9f01820203820405ff", "[1,[2,3],[4,5]]");
	decodes("83018202039f0405ff", "[1,[2,3],[4,5]]");
	decodes("83019f0203ff820405", "[1,[2,3],[4,5]]");
	decodes("9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff",
		"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]");
	decodes("bf61610161629f0203ffff", "{\"a\":1,\"b\":[2,3]}");
	decodes("826161bf61626163ff", "[\"a\",{\"b\":\"c\"}]");
	decodes("bf6346756ef563416d7421ff", "{\"Fun\":true,\"Amt\":-2}");
	/* and the examples JSON can hold encode as the RFC writes them */
	encodes("{\"a\":1,\"b\":[2,3]}", "a26161016162820203");
	encodes("[\"a\",{\"b\":\"c\"}]", "826161a161626163");
	encodes("\"\\u00fc\"", "62c3bc");
	encodes("\"\\ud800\\udd51\"", "64f0908591");
	encodes("[1,[2,3],[4,5]]", "8301820203820405");
}

/* Byte strings become standard base64 with padding, of every tail length,
 * also as the value of a map (an MCP blob). */
static void test_bytes_base64(void **state)
{
	(void)state;
	decodes("41fb", "\"+w==\"");
	decodes("42fbff", "\"+/8=\"");
	decodes("43fbffbf", "\"+/+/\"");
	decodes("a1646461746143000102", "{\"data\":\"AAEC\"}");
	decodes("5fff", "\"\"");
	decodes("7fff", "\"\"");
	decodes("5f4100ff", "\"AA==\"");
	/* an indefinite-length text string as a map key */
	decodes("a17f616b6179ff01", "{\"ky\":1}");
}

/* The Appendix A examples JSON cannot hold, and every other refusal. */
static void test_refusals(void **state)
{
	(void)state;
	/* integers beyond int64 */
	refused("1bffffffffffffffff", "beyond int64");
	refused("1b8000000000000000", "beyond int64");
	refused("3bffffffffffffffff", "beyond int64");
	refused("3b8000000000000000", "beyond int64");
	/* bignums and other tags */
	refused("c249010000000000000000", "tag 2");
	refused("c349010000000000000000", "tag 3");
	refused("c074323031332d30332d32315432303a30343a30305a", "tag 0");
	refused("c11a514b67b0", "tag 1");
	refused("d74401020304", "tag 23");
	refused("d818456449455446", "tag 24");
	refused("d82076687474703a2f2f7777772e6578616d706c652e636f6d", "tag 32");
	refused("d9d9f700", "tag 55799");
	refused("c600", "tag");   /* an unassigned tag libcbor refuses itself */
	/* NaN and infinities of every width */
	refused("f97c00", "NaN or infinite");
	refused("f97e00", "NaN or infinite");
	refused("f9fc00", "NaN or infinite");
	refused("fa7f800000", "NaN or infinite");
	refused("fa7fc00000", "NaN or infinite");
	refused("faff800000", "NaN or infinite");
	refused("fb7ff0000000000000", "NaN or infinite");
	refused("fb7ff8000000000000", "NaN or infinite");
	refused("fbfff0000000000000", "NaN or infinite");
	/* undefined and the other simple values */
	refused("f7", "undefined");
	refused("f0", "simple value");
	refused("e0", "simple value");
	refused("f8ff", "simple value");
	refused("f818", "simple value");
	/* map keys that are not text */
	refused("a201020304", "not a text string");
	refused("a1410001", "not a text string");
	refused("a1800001", "not a text string");
	refused("a1f600", "not a text string");
	refused("bf0102ff", "not a text string");
	/* duplicate keys */
	refused("a2616101616102", "duplicate map key");
	refused("bf6161016161f6ff", "duplicate map key");
	refused("a2616b017f616bff02", "duplicate map key");
	/* invalid UTF-8 */
	refused("61ff", "not valid UTF-8");
	refused("62c328", "not valid UTF-8");
	refused("63eda080", "not valid UTF-8");   /* a lone surrogate */
	refused("7f61c3ff", "not valid UTF-8");
	/* one item only */
	refused("0000", "1 bytes after the one item");
	refused("a0a0a0", "2 bytes after the one item");
	refused("", "empty");
	/* truncated */
	refused("6261", "truncated");
	refused("830102", "truncated");
	refused("9f01", "truncated");
	refused("a16161", "truncated");
	refused("1a0000", "truncated");
	refused("5b00000000ffffffff", "truncated");
	refused("9bffffffffffffffff00", "truncated");
	/* malformed indefinite items */
	refused("ff", "break outside");
	refused("8201ff", "break outside");
	refused("bf6161ff", "key without its value");
	refused("7f4100ff", "another type");
	refused("5f6100ff", "another type");
	refused("7f7fffff", "not a definite string");
	refused("5f01ff", "not a definite string");
	refused("7f80ff", "not a definite string");
	/* reserved codes */
	refused("1c", "reserved");
	refused("5c", "reserved");
	refused("1f", "indefinite length on an integer");
	refused("3f", "indefinite length on an integer");
	refused("fc", "reserved");
}

/* An indefinite text string's chunks are joined before the UTF-8 check:
 * a character split between chunks is accepted. */
static void test_text_chunks_join(void **state)
{
	(void)state;
	decodes("7f61c361a9ff", "\"\\u00e9\"");
	decodes("7f626869616fff", "\"hio\"");
}

/* Nesting: CBOR_JSON_MAX_DEPTH containers pass, one more is refused, both
 * ways, definite or not, arrays or maps. */
static void test_depth_limit(void **state)
{
	(void)state;
	uint8_t in[2 * (CBOR_JSON_MAX_DEPTH + 1) + 1];
	char why[128] = "";
	for (int extra = 0; extra <= 1; extra++) {
		size_t d = CBOR_JSON_MAX_DEPTH + (size_t)extra;
		/* definite arrays: 81 81 ... 80 */
		memset(in, 0x81, d - 1);
		in[d - 1] = 0x80;
		json_t *v = cbor_to_json(in, d, why, sizeof why);
		/* indefinite arrays: 9f ... ff */
		memset(in, 0x9f, d);
		memset(in + d, 0xff, d);
		json_t *w = cbor_to_json(in, 2 * d, why, sizeof why);
		if (extra) {
			assert_null(v);
			assert_null(w);
			assert_non_null(strstr(why, "nesting deeper than 256"));
		} else {
			assert_non_null(v);
			assert_non_null(w);
			assert_true(same(v, w));
			round_trip_value(v);
			json_decref(v);
			json_decref(w);
		}
	}
	/* maps: a1 61 6b ... a0 */
	uint8_t m[3 * (CBOR_JSON_MAX_DEPTH + 1) + 1];
	size_t n = 0;
	for (int i = 0; i < CBOR_JSON_MAX_DEPTH; i++) {
		m[n++] = 0xa1;
		m[n++] = 0x61;
		m[n++] = 'k';
	}
	m[n++] = 0xa0;
	json_t *mv = cbor_to_json(m, n, why, sizeof why);
	assert_null(mv);
	assert_non_null(strstr(why, "nesting deeper than 256"));
	mv = cbor_to_json(m + 3, n - 3, why, sizeof why);
	assert_non_null(mv);
	json_decref(mv);
	/* JSON to CBOR: an array nested one deeper than the bound */
	json_t *top = json_array(), *at = top;
	for (int i = 1; i < CBOR_JSON_MAX_DEPTH; i++) {
		json_t *inner = json_array();
		json_array_append_new(at, inner);
		at = inner;
	}
	round_trip_value(top);
	json_array_append_new(at, json_object());
	struct buf b = BUF_INIT;
	assert_int_equal(cbor_from_json(top, &b, why, sizeof why), -1);
	assert_non_null(strstr(why, "nesting deeper than 256"));
	assert_int_equal(b.len, 0);
	buf_release(&b);
	json_decref(top);
}

/* cbor_from_json appends to what the buffer holds, and leaves it as it
 * was when it fails. */
static void test_encode_appends_and_rolls_back(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	char why[128] = "";
	assert_int_equal(buf_append(&b, "\x01\x02", 2), 0);
	json_t *v = json_pack("{s:i}", "a", 1);
	assert_int_equal(cbor_from_json(v, &b, why, sizeof why), 0);
	assert_int_equal(b.len, 2 + 4);
	assert_memory_equal(b.data, "\x01\x02\xa1\x61\x61\x01", 6);
	json_decref(v);
	/* jansson holds no real that is not finite (the encoder's check is a
	 * guard only); a nesting too deep leaves the buffer as it was */
	v = json_real(1.0);
	assert_int_equal(json_real_set(v, NAN), -1);
	json_decref(v);
	v = json_pack("[i,[i,{s:i}]]", 1, 2, "x", 3);
	json_t *deep = v;
	for (int i = 0; i < CBOR_JSON_MAX_DEPTH; i++)
		deep = json_pack("[o]", deep);
	assert_int_equal(cbor_from_json(deep, &b, why, sizeof why), -1);
	assert_int_equal(b.len, 6);
	assert_memory_equal(b.data, "\x01\x02\xa1\x61\x61\x01", 6);
	assert_int_equal(cbor_from_json(NULL, &b, why, sizeof why), -1);
	json_decref(deep);
	buf_release(&b);
}

/* A small WHY buffer is cut, not overrun; a NULL one is allowed. */
static void test_why_bounded(void **state)
{
	(void)state;
	char why[8];
	memset(why, 'x', sizeof why);
	uint8_t in[] = { 0xf7 };
	assert_null(cbor_to_json(in, 1, why, 4));
	assert_int_equal(strlen(why), 3);
	assert_int_equal(why[4], 'x');
	assert_null(cbor_to_json(in, 1, NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mcp_messages_round_trip),
		cmocka_unit_test(test_integers),
		cmocka_unit_test(test_reals_shortest),
		cmocka_unit_test(test_rfc8949_appendix_a),
		cmocka_unit_test(test_bytes_base64),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_text_chunks_join),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_encode_appends_and_rolls_back),
		cmocka_unit_test(test_why_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
