/*
 * test_log_line.c - unit tests for src/middleware/log_line.c: the audit
 * line as text (log_line_text) and as a jansson tree (log_line_json).
 * The text builder must write the very bytes json_dumps writes for the
 * tree, for awkward strings, ids given as wire text, integers at their
 * limits and times; the tree must hold the members in order, share the
 * line's values and cut long error messages.
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

#include <jansson.h>

#include "buf.h"
#include "msg.h"
#include "src/middleware/log_int.h"

/* ---- the text of a line ---- */

/* Asserts that L as text is L as a jansson object dumped. */
static void assert_text_is_json(const struct log_line *l)
{
	struct buf b = BUF_INIT;
	json_t *o = log_line_json(l);
	char *want = json_dumps(o, JSON_COMPACT);
	assert_non_null(want);
	assert_int_equal(log_line_text(l, &b), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.data, want, b.len);
	free(want);
	json_decref(o);
	buf_release(&b);
}

/* A string of LEN bytes: FILL repeated, with AT (if any) written at POS. */
static json_t *long_string(size_t len, char fill, const char *at, size_t pos)
{
	char *s = malloc(len);
	memset(s, fill, len);
	if (at)
		memcpy(s + pos, at, strlen(at));
	json_t *v = json_stringn(s, len);
	free(s);
	assert_non_null(v);
	return v;
}

/* The text builder writes what json_dumps writes, for awkward content. */
static void test_text_matches_json(void **state)
{
	(void)state;
	json_t *ids[] = { json_integer(7), json_integer(-9223372036854775807LL - 1),
			  json_string("id \"q\" \\ \x01"), json_real(1.5), json_null(), NULL };
	static const char odd[] = "nul\0tab\tquote\"bs\\ctl\x1f\x7f";
	json_t *msgs[] = {
		json_stringn(odd, sizeof odd - 1),
		long_string(600, 'm', NULL, 0),
		long_string(600, 'm', "\xc3\xa9", 255),           /* é across the cut */
		long_string(600, 'm', "\xe2\x82\xac", 254),       /* € across the cut */
		long_string(600, 'm', "\xf0\x9f\x98\x80", 256),   /* 😀 right at it */
		long_string(600, 'm', "\0", 100),                 /* NUL before it */
		long_string(256, 'x', NULL, 0), NULL,
	};
	json_t *params = json_loads("{\"name\":\"\\u00e9\\u20ac\\ud83d\\ude00\",\"a\":[1,2.5,"
				    "true,null,\"\\u0000\\u001f\\\"\\\\/\"],\"o\":{}}", 0, NULL);
	json_t *result = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"hi\\n\"}]}", 0, NULL);
	json_t *error = json_loads("{\"code\":-1,\"message\":\"m\",\"data\":[]}", 0, NULL);
	json_t *code = json_integer(-32602);
	static const char *const strs[] = {
		"plain", "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
		"\xff\xfe", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xe2\x82", "",
	};
	double times[] = { 0.0, 1700000000.9996, 1700000000.25, 1700000001.0, 1.5e9 };
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		struct log_line l = {
			.time = times[i % 5], .from = "client", .client = strs[i],
			.backend = strs[(i + 1) % 9], .method = "tools/call", .name = strs[(i + 2) % 9],
			.id = ids[i % 6], .outcome = i % 2 ? "error" : "ok", .code = i % 2 ? code : NULL,
			.message = msgs[i % 8], .duration_us = (json_int_t)i * 1000003,
			.bytes_in = 123, .bytes_out = i ? 456 : 0,
			.params = i % 3 ? params : NULL, .result = i % 2 ? NULL : result,
			.error = i % 2 ? error : NULL,
		};
		assert_text_is_json(&l);
		l.notification = true;
		assert_text_is_json(&l);
	}
	for (size_t i = 0; i < 6; i++)
		json_decref(ids[i]);
	for (size_t i = 0; i < 8; i++)
		json_decref(msgs[i]);
	json_decref(params);
	json_decref(result);
	json_decref(error);
	json_decref(code);
}

/*
 * The id as the chain gives it, as its wire text (ctx->id_text): the
 * line is the same as through jansson, and a plain integer is copied.
 */
static void test_text_id_from_wire(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"0", "7", "-3", "123456789012345678", "1234567890123456789",
		"9223372036854775807", "-9223372036854775808",
		"-0", "1.0", "1e3", "-1.5E-3", "\"abc\"", "\"\\u0041\\/\"", "\"a/b\"", "\"\"",
		"\"\\u00e9\\ud83d\\ude00\"", "\"7\"",
	};
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct msg_val v = { 0 };
		assert_int_equal(msg_val_set(&v, texts[i], strlen(texts[i])), 0);
		struct log_line l = {
			.time = 1700000000.5, .from = "client", .method = "tools/call",
			.id_text = &v, .outcome = "ok",
		};
		assert_text_is_json(&l);
		/* the same line as with the id already made by mw_id() */
		struct buf a = BUF_INIT, b = BUF_INIT;
		assert_int_equal(log_line_text(&l, &a), 0);
		l.id = msg_val_json(&v);
		assert_non_null(l.id);
		assert_int_equal(log_line_text(&l, &b), 0);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.data, b.data, a.len);
		json_decref(l.id);
		buf_release(&a);
		buf_release(&b);
		msg_val_release(&v);
	}
	/* no id: no member */
	struct msg_val none = { 0 };
	struct log_line l = { .time = 1.0, .from = "client", .id_text = &none, .outcome = "ok" };
	struct buf b = BUF_INIT;
	assert_int_equal(log_line_text(&l, &b), 0);
	assert_null(memmem(b.data, b.len, "\"id\"", 4));
	assert_text_is_json(&l);
	buf_release(&b);
}

/* The escapes themselves, and where a long message is cut. */
static void test_text_escaping(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	json_t *message = long_string(300, 'm', "\xc3\xa9", 255);
	struct log_line l = {
		.time = 1700000000.125, .from = "client",
		.client = "q\"b\\s\n\t\x01\x1f\x7f/\xc3\xa9\xf0\x9f\x98\x80",
		.backend = "bad\xff", .outcome = "error", .message = message,
	};
	assert_int_equal(log_line_text(&l, &b), 0);
	assert_int_equal(buf_append(&b, "", 1), 0);
	assert_non_null(strstr(b.data, "{\"time\":\"2023-11-14T22:13:20.125Z\",\"from\":\"client\","));
	assert_non_null(strstr(b.data, "\"client\":\"q\\\"b\\\\s\\n\\t\\u0001\\u001F\x7f/"
				       "\xc3\xa9\xf0\x9f\x98\x80\""));
	assert_null(strstr(b.data, "\"backend\""));   /* not UTF-8: left out */
	/* 255 'm', and the é that would straddle byte 256 goes with the rest */
	const char *m = strstr(b.data, "\"message\":\"");
	assert_non_null(m);
	m += strlen("\"message\":\"");
	assert_int_equal(strspn(m, "m"), 255);
	assert_memory_equal(m + 255, "...\",", 5);
	json_decref(message);
	buf_release(&b);
}

/* Asserts that a line holding the N bytes at S in every string member
 * (and as the message and a string id, when S is UTF-8) is as jansson
 * writes it. */
static void assert_string_as_json(const char *s, size_t n)
{
	json_t *js = json_stringn(s, n);   /* NULL when S is not UTF-8 */
	char *c = strndup(s, n);           /* the C string: up to a NUL */
	assert_non_null(c);
	struct log_line l = {
		.time = 1700000000.5, .from = c, .client = c, .backend = c, .method = c,
		.name = c, .id = js, .outcome = c, .message = js, .duration_us = 1,
	};
	assert_text_is_json(&l);
	json_decref(js);
	free(c);
}

/*
 * Strings and numbers at the edges of the text builder's fast paths:
 * every byte value at every place of a word and of the tail after it,
 * lengths around 8 and 16, UTF-8 across a word's end, invalid UTF-8,
 * and integers at each change of digit count and at the limits.
 */
static void test_text_edges(void **state)
{
	(void)state;
	static const char *const strs[] = {
		"", "a", "/", "\x7f", "\"", "\\", "\x01", "\x1f", " ", "~", "!#$%&'()*+,-.",
		"1234567", "12345678", "123456789", "123456789012345", "1234567890123456",
		"12345678901234567", "abcdefg\"", "abcdefgh\\", "abcdefghi\x01", "\"abcdefgh",
		"abcdefgh\x7f/", "abcdefghijklmno\n", "abcdefghijklmnop\t", "a/b/c/d/e/f/g/h/",
		"abcdefg\xc3\xa9", "abcdefg\xe2\x82\xac", "abcdef\xf0\x9f\x98\x80xyz",
		"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" "abcdefghijk", "abcdefgh\xff", "abcdefg\xc3",
		"abcdefghijklmno\x80", "\xc3\xa9\xc3", "abcdefghijkl\xf0\x9f\x98", "abcdefgh\xed\xa0\x80",
		"abcdefgh\xc0\xaf", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f",
		"\x1f\x20\x21\x22\x23\x5b\x5c\x5d\x7e\x7f",
	};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		assert_string_as_json(strs[i], strlen(strs[i]));
	/* a NUL: the C strings end at it, the message and the id go on */
	assert_string_as_json("abcdefgh\0ijklmnop", 17);
	for (int c = 1; c < 256; c++) {
		for (size_t len = 1; len <= 17; len += 8) {
			for (size_t at = 0; at < len; at++) {
				char s[24];
				memset(s, 'x', len);
				s[at] = (char)c;
				assert_string_as_json(s, len);
			}
		}
	}
	/* the milliseconds of the time, against printf's */
	static const double ms[] = { 0.0, 0.001, 0.009, 0.01, 0.099, 0.1, 0.5, 0.999, 0.9996 };
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		struct buf b = BUF_INIT;
		double t = 1700000000.0 + ms[i];
		char want[64];
		snprintf(want, sizeof want, "{\"time\":\"2023-11-14T22:13:20.%03dZ\",",
			 (int)((t - 1700000000.0) * 1000.0));
		assert_int_equal(log_line_text(&(struct log_line){ .time = t }, &b), 0);
		assert_true(b.len > strlen(want));
		assert_memory_equal(b.data, want, strlen(want));
		buf_release(&b);
	}
	json_int_t nums[80];
	size_t n = 0;
	nums[n++] = 0;
	nums[n++] = INT64_MAX;
	nums[n++] = INT64_MIN;
	nums[n++] = INT64_MIN + 1;
	for (json_int_t p = 1; n + 4 <= 80; p *= 10) {
		nums[n++] = p;
		nums[n++] = p - 1;
		nums[n++] = -p;
		nums[n++] = -(p + 1);
		if (p > INT64_MAX / 10)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *id = json_integer(nums[i]);
		struct log_line l = {
			.time = 1700000000.0, .from = "client", .id = id, .outcome = "ok",
			.duration_us = nums[i], .bytes_in = nums[(i + 1) % n],
			.bytes_out = nums[(i + 2) % n],
		};
		assert_text_is_json(&l);
		json_decref(id);
	}
}


/* ---- the tree ---- */

/* The names of O's members, in order, joined by commas. */
static void member_names(json_t *o, char *out, size_t n)
{
	const char *k;
	json_t *v;
	size_t len = 0;
	out[0] = '\0';
	json_object_foreach(o, k, v)
		len += (size_t)snprintf(out + len, n - len, "%s%s", len ? "," : "", k);
	assert_true(len < n);
}

/* Every member, in order; the values shared with the line, not copied. */
static void test_json_members_shared(void **state)
{
	(void)state;
	json_t *id = json_string("req-1"), *code = json_integer(-32602);
	json_t *message = json_string("Unknown tool");
	json_t *params = json_pack("{s:s}", "name", "echo");
	json_t *result = json_pack("{s:[]}", "content"), *error = json_pack("{s:i}", "code", 1);
	struct log_line l = {
		.time = 1700000000.125, .from = "client", .client = "c", .protocol = "stdio",
		.backend = "fx", .method = "tools/call", .name = "echo", .id = id,
		.outcome = "error", .code = code, .message = message, .duration_us = 42,
		.bytes_in = 7, .bytes_out = 9, .params = params, .result = result, .error = error,
	};
	json_t *o = log_line_json(&l);
	assert_non_null(o);
	char names[512];
	member_names(o, names, sizeof names);
	assert_string_equal(names, "time,from,client,protocol,backend,method,name,id,outcome,"
			    "code,message,duration_us,bytes_in,bytes_out,params,result,error");
	assert_string_equal(json_string_value(json_object_get(o, "time")), "2023-11-14T22:13:20.125Z");
	assert_ptr_equal(json_object_get(o, "id"), id);
	assert_ptr_equal(json_object_get(o, "code"), code);
	assert_ptr_equal(json_object_get(o, "message"), message);   /* short: kept as is */
	assert_ptr_equal(json_object_get(o, "params"), params);
	assert_ptr_equal(json_object_get(o, "result"), result);
	assert_ptr_equal(json_object_get(o, "error"), error);
	assert_int_equal(params->refcount, 2);
	assert_int_equal(json_integer_value(json_object_get(o, "duration_us")), 42);
	assert_int_equal(json_integer_value(json_object_get(o, "bytes_in")), 7);
	assert_int_equal(json_integer_value(json_object_get(o, "bytes_out")), 9);
	json_decref(o);
	assert_int_equal(params->refcount, 1);   /* the line's reference given back */

	/* a notification: "kind", no numbers; NULL members left out */
	struct log_line n = { .time = 1.0, .notification = true, .method = "notifications/x",
			      .duration_us = 5, .bytes_in = 5, .bytes_out = 5 };
	o = log_line_json(&n);
	member_names(o, names, sizeof names);
	assert_string_equal(names, "time,kind,method");
	assert_string_equal(json_string_value(json_object_get(o, "kind")), "notification");
	json_decref(o);
	json_decref(id);
	json_decref(code);
	json_decref(message);
	json_decref(params);
	json_decref(result);
	json_decref(error);
}

/* A long message is cut in the tree too; an id from wire text is parsed;
 * a string member that is not UTF-8 is left out. */
static void test_json_message_id_utf8(void **state)
{
	(void)state;
	json_t *message = long_string(300, 'm', NULL, 0);
	struct msg_val v = { 0 };
	assert_int_equal(msg_val_set(&v, "\"abc\"", 5), 0);
	struct log_line l = { .time = 1.0, .client = "bad\xff", .id_text = &v, .message = message };
	json_t *o = log_line_json(&l);
	json_t *m = json_object_get(o, "message");
	assert_ptr_not_equal(m, message);
	assert_int_equal(json_string_length(m), 256 + 3);
	assert_int_equal(strspn(json_string_value(m), "m"), 256);
	assert_string_equal(json_string_value(m) + 256, "...");
	assert_string_equal(json_string_value(json_object_get(o, "id")), "abc");
	assert_null(json_object_get(o, "client"));
	json_decref(o);
	msg_val_release(&v);
	json_decref(message);
}

/* The text is appended after what OUT holds; log_dump_to_buf appends. */
static void test_text_appends(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(buf_append(&b, "prefix ", 7), 0);
	struct log_line l = { .time = 1700000000.0, .from = "client", .outcome = "ok" };
	assert_int_equal(log_line_text(&l, &b), 0);
	assert_int_equal(log_line_text(&l, &b), 0);
	static const char one[] = "{\"time\":\"2023-11-14T22:13:20.000Z\",\"from\":\"client\","
				  "\"outcome\":\"ok\",\"duration_us\":0,\"bytes_in\":0,\"bytes_out\":0}";
	assert_int_equal(b.len, 7 + 2 * (sizeof one - 1));
	assert_memory_equal(b.data, "prefix ", 7);
	assert_memory_equal(b.data + 7, one, sizeof one - 1);
	assert_memory_equal(b.data + 7 + sizeof one - 1, one, sizeof one - 1);
	buf_release(&b);

	json_t *v = json_pack("[i,s]", 1, "x");
	assert_int_equal(buf_append(&b, "=", 1), 0);
	assert_int_equal(json_dump_callback(v, log_dump_to_buf, &b, JSON_COMPACT), 0);
	assert_int_equal(b.len, 8);
	assert_memory_equal(b.data, "=[1,\"x\"]", 8);
	json_decref(v);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_matches_json),
		cmocka_unit_test(test_text_id_from_wire),
		cmocka_unit_test(test_text_escaping),
		cmocka_unit_test(test_text_edges),
		cmocka_unit_test(test_json_members_shared),
		cmocka_unit_test(test_json_message_id_utf8),
		cmocka_unit_test(test_text_appends),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
