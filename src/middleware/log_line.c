/*
 * log_line.c - the audit line of the "log" module, as text and as a
 * jansson object (for redaction). Both give the same bytes: the text is
 * escaped exactly as jansson escapes (upper-case \u00XX, UTF-8 checked),
 * so a line never depends on which way it was made.
 */
#include "log_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"

#define MESSAGE_MAX 256        /* bytes of an error message kept in a line */

/* ---- JSON text ---- */

#define BAD_UTF8 (-2)   /* put_str: the string is not UTF-8 */

/* Appends the N bytes at P; the common case (room left) inline. */
static inline int put_raw(struct buf *b, const char *p, size_t n)
{
	if (b->cap - b->len < n && buf_reserve(b, n) < 0)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Appends the string literal LIT. */
#define PUT_LIT(b, lit) put_raw((b), (lit), sizeof(lit) - 1)

/* True for a byte that stands for itself in a JSON string: ASCII but
 * controls, the quote and the backslash. */
static inline bool plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/*
 * Length of the UTF-8 sequence at S (N bytes left), or 0 when jansson
 * would refuse it: a stray continuation byte, an overlong form, a
 * surrogate or a code point past U+10FFFF.
 */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;
	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	cp = s[0] & (0x7f >> len);
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Writes the escape of the ASCII control, quote or backslash C at O. */
static char *put_escape(char *o, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	*o++ = '\\';
	switch (c) {
	case '"': *o++ = '"'; break;
	case '\\': *o++ = '\\'; break;
	case '\b': *o++ = 'b'; break;
	case '\f': *o++ = 'f'; break;
	case '\n': *o++ = 'n'; break;
	case '\r': *o++ = 'r'; break;
	case '\t': *o++ = 't'; break;
	default:   /* as jansson: \u and four upper-case hex digits */
		memcpy(o, "u00", 3);
		o[3] = hex[c >> 4];
		o[4] = hex[c & 15];
		o += 5;
	}
	return o;
}

/*
 * Appends the N bytes at S as a JSON string, escaped as json_dumps does
 * (quote, backslash and controls; UTF-8 kept as it is). Returns 0, -1
 * when out of memory, or BAD_UTF8 (B unchanged either way).
 */
static int put_str(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *e = p + n;
	if (b->cap - b->len < 6 * n + 2 && buf_reserve(b, 6 * n + 2) < 0)
		return -1;
	char *o = b->data + b->len;
	*o++ = '"';
	while (p < e) {
		if (plain(*p)) {
			*o++ = (char)*p++;
		} else if (*p >= 0x80) {
			size_t k = utf8_len(p, (size_t)(e - p));
			if (!k)
				return BAD_UTF8;
			memcpy(o, p, k);
			o += k;
			p += k;
		} else {
			o = put_escape(o, *p++);
		}
	}
	*o++ = '"';
	b->len = (size_t)(o - b->data);
	return 0;
}

/* Appends V in decimal, as jansson writes an integer. */
static int put_int(struct buf *b, json_int_t v)
{
	char tmp[24], *e = tmp + sizeof tmp, *p = e;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	return put_raw(b, p, (size_t)(e - p));
}

/* json_dump_callback's writer: appends to the buf DATA. */
int log_dump_to_buf(const char *p, size_t n, void *data)
{
	return buf_append(data, p, n);
}

/* Appends V (borrowed) as compact JSON. */
static int put_json(struct buf *b, json_t *v)
{
	if (json_is_integer(v))
		return put_int(b, json_integer_value(v));
	if (json_is_string(v))
		return put_str(b, json_string_value(v), json_string_length(v)) == 0 ? 0 : -1;
	return json_dump_callback(v, log_dump_to_buf, b, JSON_COMPACT | JSON_ENCODE_ANY);
}

/*
 * Appends the member KEY (KLEN bytes of ,"name": text) with the string
 * S unless S is NULL. S is left out when it is not UTF-8, as
 * json_string() refuses it. Returns 0 or -1 (out of memory).
 */
static int put_member_str(struct buf *b, const char *key, size_t klen, const char *s)
{
	size_t mark = b->len;
	if (!s)
		return 0;
	if (put_raw(b, key, klen) < 0)
		return -1;
	int rc = put_str(b, s, strlen(s));
	if (rc == BAD_UTF8) {
		b->len = mark;
		return 0;
	}
	return rc;
}

#define MEMBER_STR(b, key, s) put_member_str((b), (key), sizeof(key) - 1, (s))

/* Appends the member KEY (literal ,"name": text) with V unless V is NULL. */
#define MEMBER_JSON(b, key, v) ((v) ? PUT_LIT((b), key) < 0 ? -1 : put_json((b), (v)) : 0)

/* ---- lines ---- */

/*
 * Loop time T as "2025-01-31T12:34:56.789Z" into OUT; returns its
 * length. The part up to the seconds is remembered: it changes once a
 * second, and strftime is the costly part.
 */
static size_t iso_time(double t, char out[48])
{
	static time_t cached_sec;
	static char cached[40];
	static size_t cached_len;
	time_t sec = (time_t)t;
	int ms = (int)((t - (double)sec) * 1000.0);
	if (!cached_len || sec != cached_sec) {
		struct tm tm;
		gmtime_r(&sec, &tm);
		cached_len = strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
		cached_sec = sec;
	}
	ms = ms < 0 ? 0 : ms > 999 ? 999 : ms;
	memcpy(out, cached, cached_len);
	char *o = out + cached_len;
	*o++ = '.';
	*o++ = (char)('0' + ms / 100);
	*o++ = (char)('0' + ms / 10 % 10);
	*o++ = (char)('0' + ms % 10);
	*o++ = 'Z';
	*o = '\0';
	return (size_t)(o - out);
}

/* Where an error message is cut: MESSAGE_MAX bytes, back to a character
 * boundary, and never past a NUL (as json_sprintf's %.*s). */
static size_t message_cut(const char *s)
{
	size_t n = MESSAGE_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return strnlen(s, n);
}

/* MESSAGE (a string) as written: cut to MESSAGE_MAX bytes with "...". */
static json_t *short_message(json_t *message)
{
	const char *s = json_string_value(message);
	if (json_string_length(message) <= MESSAGE_MAX)
		return json_incref(message);
	return json_sprintf("%.*s...", (int)message_cut(s), s);
}

/* Appends MESSAGE as short_message() gives it. */
static int put_message(struct buf *b, json_t *message)
{
	const char *s = json_string_value(message);
	size_t n = json_string_length(message);
	if (n <= MESSAGE_MAX)
		return put_str(b, s, n) == 0 ? 0 : -1;
	if (put_str(b, s, message_cut(s)) != 0)
		return -1;
	b->len--;   /* the closing quote goes after the dots */
	return PUT_LIT(b, "...\"");
}

/* Appends L's members from "time" to "id". */
static int text_head(const struct log_line *l, struct buf *b)
{
	char t[48];
	size_t tn = iso_time(l->time, t);   /* ASCII: nothing to escape */
	if (PUT_LIT(b, "{\"time\":\"") < 0 || put_raw(b, t, tn) < 0 || PUT_LIT(b, "\"") < 0 ||
	    (l->notification && PUT_LIT(b, ",\"kind\":\"notification\"") < 0) ||
	    MEMBER_STR(b, ",\"from\":", l->from) < 0 ||
	    MEMBER_STR(b, ",\"client\":", l->client) < 0 ||
	    MEMBER_STR(b, ",\"backend\":", l->backend) < 0 ||
	    MEMBER_STR(b, ",\"method\":", l->method) < 0 ||
	    MEMBER_STR(b, ",\"name\":", l->name) < 0)
		return -1;
	return MEMBER_JSON(b, ",\"id\":", l->id);
}

/* Appends L's members from "outcome" to the end. */
static int text_tail(const struct log_line *l, struct buf *b)
{
	if (MEMBER_STR(b, ",\"outcome\":", l->outcome) < 0 ||
	    MEMBER_JSON(b, ",\"code\":", l->code) < 0 ||
	    (l->message && (PUT_LIT(b, ",\"message\":") < 0 || put_message(b, l->message) < 0)))
		return -1;
	if (!l->notification &&
	    (PUT_LIT(b, ",\"duration_us\":") < 0 || put_int(b, l->duration_us) < 0 ||
	     PUT_LIT(b, ",\"bytes_in\":") < 0 || put_int(b, l->bytes_in) < 0 ||
	     PUT_LIT(b, ",\"bytes_out\":") < 0 || put_int(b, l->bytes_out) < 0))
		return -1;
	if (MEMBER_JSON(b, ",\"params\":", l->params) < 0 ||
	    MEMBER_JSON(b, ",\"result\":", l->result) < 0 ||
	    MEMBER_JSON(b, ",\"error\":", l->error) < 0)
		return -1;
	return PUT_LIT(b, "}");
}

/* Writes L as text, member by member. */
int log_line_text(const struct log_line *l, struct buf *out)
{
	size_t mark = out->len;
	if (text_head(l, out) < 0 || text_tail(l, out) < 0) {
		out->len = mark;
		return -1;
	}
	return 0;
}

/* Sets KEY to the string S unless S is NULL (or not UTF-8). */
static void set_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

/* Sets KEY to V (borrowed) unless V is NULL. */
static void set_val(json_t *o, const char *key, json_t *v)
{
	if (v)
		json_object_set(o, key, v);
}

/* Builds L as a jansson object, member by member in the same order. */
json_t *log_line_json(const struct log_line *l)
{
	char t[48];
	json_t *o = json_object();
	if (!o)
		return NULL;
	iso_time(l->time, t);
	set_str(o, "time", t);
	if (l->notification)
		set_str(o, "kind", "notification");
	set_str(o, "from", l->from);
	set_str(o, "client", l->client);
	set_str(o, "backend", l->backend);
	set_str(o, "method", l->method);
	set_str(o, "name", l->name);
	set_val(o, "id", l->id);
	set_str(o, "outcome", l->outcome);
	set_val(o, "code", l->code);
	if (l->message)
		json_object_set_new(o, "message", short_message(l->message));
	if (!l->notification) {
		json_object_set_new(o, "duration_us", json_integer(l->duration_us));
		json_object_set_new(o, "bytes_in", json_integer(l->bytes_in));
		json_object_set_new(o, "bytes_out", json_integer(l->bytes_out));
	}
	set_val(o, "params", l->params);
	set_val(o, "result", l->result);
	set_val(o, "error", l->error);
	return o;
}
