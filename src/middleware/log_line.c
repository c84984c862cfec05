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
#include "msg.h"

#define MESSAGE_MAX 256        /* bytes of an error message kept in a line */

/* ---- JSON text ---- */

#define BAD_UTF8 (-2)   /* put_str: the string is not UTF-8 */
#define INT_MAX_LEN 20  /* "-9223372036854775808" */

/*
 * Room for N more bytes at the end of B: where to write them, or NULL
 * when out of memory. done() then says how far the writing went. The
 * *_text writers below write at such a pointer and return the end.
 */
static inline char *room(struct buf *b, size_t n)
{
	if (b->cap - b->len < n && buf_reserve(b, n) < 0)
		return NULL;
	return b->data + b->len;
}

/* Ends a write begun at room(): the bytes up to O now belong to B. */
static inline void done(struct buf *b, char *o)
{
	b->len = (size_t)(o - b->data);
}

/* Writes the N bytes at P at O; returns the end. */
static inline char *raw_text(char *o, const char *p, size_t n)
{
	memcpy(o, p, n);
	return o + n;
}

/* Writes the string literal LIT at O; returns the end. */
#define LIT(o, lit) raw_text((o), (lit), sizeof(lit) - 1)

/* Appends the N bytes at P. */
static inline int put_raw(struct buf *b, const char *p, size_t n)
{
	char *o = room(b, n);
	if (!o)
		return -1;
	done(b, raw_text(o, p, n));
	return 0;
}

/* Appends the string literal LIT. */
#define PUT_LIT(b, lit) put_raw((b), (lit), sizeof(lit) - 1)

/*
 * 1 for a byte that stands for itself in a JSON string: ASCII but
 * controls, the quote (0x22) and the backslash (0x5c). As jansson, '/'
 * and DEL (0x7f) are not escaped.
 */
static const unsigned char plain_bytes[256] = {
	[0x20] = 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,   /* 0x22 '"' */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,            /* 0x5c '\\' */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,            /* to 0x7f */
};

/* True for a byte that stands for itself in a JSON string. */
static inline bool plain(unsigned char c)
{
	return plain_bytes[c];
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
 * True when one of the 8 bytes in W is not plain: a control (below
 * 0x20), '"', '\\' or part of a multi-byte character (0x80 and up).
 * Each part is the "has a zero byte" word trick, which never misses a
 * byte; a borrow only sets bits above a byte that did match, so the
 * answer is exact.
 */
static inline bool word_special(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
	uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
	return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((bs - ones) & ~bs) | w) & high;
}

/*
 * The N bytes at P (1 to 8) as one word, read in two overlapping loads
 * that stay inside them; the bytes not filled are spaces (plain).
 */
static inline uint64_t load_short(const unsigned char *p, size_t n)
{
	uint32_t a, b;
	uint16_t c, d;
	if (n >= 4) {
		memcpy(&a, p, 4);
		memcpy(&b, p + n - 4, 4);
		return a | (uint64_t)b << 32;
	}
	if (n >= 2) {
		memcpy(&c, p, 2);
		memcpy(&d, p + n - 2, 2);
		return c | (uint64_t)d << 16 | 0x2020202000000000u;
	}
	return p[0] | 0x2020202020202000u;
}

/*
 * Writes the N bytes at S as a JSON string at O (room: 6 * N + 2
 * bytes), escaped as json_dumps does (quote, backslash and controls;
 * UTF-8 kept as it is). Returns the end, or NULL when S is not UTF-8.
 * Plain ASCII goes 8 bytes at a time, and the last 1 to 8 in one go
 * (most strings of a line are that short).
 */
static char *str_text(char *o, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *e = p + n;
	*o++ = '"';
	while (p < e) {
		uint64_t w;
		size_t left = (size_t)(e - p);
		if (left > 8 && (memcpy(&w, p, 8), !word_special(w))) {
			memcpy(o, p, 8);
			o += 8;
			p += 8;
			continue;
		}
		if (left <= 8 && !word_special(load_short(p, left))) {
			buf_copy_short(o, p, left);
			o += left;
			break;
		}
		/* a word that is not all plain: byte by byte */
		const unsigned char *stop = e - p > 8 ? p + 8 : e;
		while (p < stop) {
			if (plain(*p)) {
				*o++ = (char)*p++;
			} else if (*p >= 0x80) {
				size_t k = utf8_len(p, (size_t)(e - p));
				if (!k)
					return NULL;
				o = raw_text(o, (const char *)p, k);
				p += k;
			} else {
				o = put_escape(o, *p++);
			}
		}
	}
	*o++ = '"';
	return o;
}

/*
 * Appends the N bytes at S as a JSON string (str_text). Returns 0, -1
 * when out of memory, or BAD_UTF8 (B unchanged either way).
 */
static int put_str(struct buf *b, const char *s, size_t n)
{
	char *o = room(b, 6 * n + 2);
	if (!o)
		return -1;
	o = str_text(o, s, n);
	if (!o)
		return BAD_UTF8;
	done(b, o);
	return 0;
}

/* "00" to "99": integers are written two digits at a time. */
static const char digit_pairs[] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Writes V in decimal at O (room: INT_MAX_LEN), as jansson writes an
 * integer; returns the end. The digits are counted first, then written
 * from the last one back. */
static char *int_text(char *o, json_int_t v)
{
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	unsigned long long t = u;
	size_t len = 1;
	if (v < 0)
		*o++ = '-';
	for (; t >= 100; t /= 100)
		len += 2;
	len += t >= 10;
	char *e = o + len, *p = e;
	for (; u >= 100; u /= 100) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * (u % 100), 2);
	}
	if (u >= 10)
		memcpy(p - 2, digit_pairs + 2 * u, 2);
	else
		p[-1] = (char)('0' + u);
	return e;
}

/* Appends V in decimal, as jansson writes an integer. */
static int put_int(struct buf *b, json_int_t v)
{
	char *o = room(b, INT_MAX_LEN);
	if (!o)
		return -1;
	done(b, int_text(o, v));
	return 0;
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

/* Length of the string S, 0 for NULL. */
static inline size_t str_len(const char *s)
{
	return s ? strlen(s) : 0;
}

/*
 * Writes the member KEY (KLEN bytes of ,"name": text) with the string S
 * (N bytes) at O (room: KLEN + 6 * N + 2), or nothing when S is NULL or
 * not UTF-8, as json_string() refuses it. Returns the end.
 */
static inline char *member_text(char *o, const char *key, size_t klen, const char *s, size_t n)
{
	if (!s)
		return o;
	char *v = raw_text(o, key, klen);
	if (n > 0 && n <= 8 && !word_special(load_short((const unsigned char *)s, n))) {
		/* most members are a few plain bytes: inline, no call */
		*v++ = '"';
		buf_copy_short(v, s, n);
		v[n] = '"';
		return v + n + 1;
	}
	char *end = str_text(v, s, n);
	return end ? end : o;
}

#define MEMBER_TEXT(o, key, s, n) member_text((o), (key), sizeof(key) - 1, (s), (n))

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
	memcpy(o, digit_pairs + 2 * (ms % 100), 2);
	o += 2;
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

/* Room text_head needs beyond 6 * N for its strings: more than its
 * keys (92 bytes), the time (48 with a NUL) and 5 pairs of quotes. */
#define HEAD_ROOM 256

/* Room for the three numbers: more than 3 keys (40) and 3 * INT_MAX_LEN. */
#define NUMBERS_ROOM 128

/*
 * True when the N bytes at P are an integer as jansson writes it back:
 * -?(0|[1-9][0-9]*) with at most 18 digits, and not -0.
 */
static bool plain_int_text(const char *p, size_t n)
{
	size_t i = n > 0 && p[0] == '-';
	if (n == i || n - i > 18 || (p[i] == '0' && (n - i > 1 || i)))
		return false;
	for (; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

/*
 * Appends the id member: from L->id, or else from L->id_text, whose
 * bytes are copied as they are when jansson would write them the same
 * (the common integer id), and otherwise go through jansson.
 */
static int put_id(struct buf *b, const struct log_line *l)
{
	if (l->id || !l->id_text || !l->id_text->n)
		return MEMBER_JSON(b, ",\"id\":", l->id);
	const char *t = msg_val_text(l->id_text);
	size_t n = l->id_text->n;
	if (plain_int_text(t, n)) {
		char *o = room(b, sizeof ",\"id\":" + n);
		if (!o)
			return -1;
		o = LIT(o, ",\"id\":");
		memcpy(o, t, n);
		done(b, o + n);
		return 0;
	}
	json_t *v = msg_val_json(l->id_text);
	int rc = MEMBER_JSON(b, ",\"id\":", v);
	json_decref(v);
	return rc;
}

/* Appends L's members from "time" to "id": one reservation for all but
 * the id, as their lengths are known. */
static int text_head(const struct log_line *l, struct buf *b)
{
	size_t from = str_len(l->from), client = str_len(l->client), protocol = str_len(l->protocol),
	       backend = str_len(l->backend), method = str_len(l->method), name = str_len(l->name);
	char *o = room(b, HEAD_ROOM + 6 * (from + client + protocol + backend + method + name));
	if (!o)
		return -1;
	o = LIT(o, "{\"time\":\"");
	o += iso_time(l->time, o);   /* ASCII: nothing to escape */
	o = LIT(o, "\"");
	if (l->notification)
		o = LIT(o, ",\"kind\":\"notification\"");
	o = MEMBER_TEXT(o, ",\"from\":", l->from, from);
	o = MEMBER_TEXT(o, ",\"client\":", l->client, client);
	o = MEMBER_TEXT(o, ",\"protocol\":", l->protocol, protocol);
	o = MEMBER_TEXT(o, ",\"backend\":", l->backend, backend);
	o = MEMBER_TEXT(o, ",\"method\":", l->method, method);
	o = MEMBER_TEXT(o, ",\"name\":", l->name, name);
	done(b, o);
	return put_id(b, l);
}

/* Appends L's members from "outcome" to the end. */
static int text_tail(const struct log_line *l, struct buf *b)
{
	size_t outcome = str_len(l->outcome);
	char *o = room(b, sizeof ",\"outcome\":" + 6 * outcome + 2);
	if (!o)
		return -1;
	done(b, MEMBER_TEXT(o, ",\"outcome\":", l->outcome, outcome));
	if (MEMBER_JSON(b, ",\"code\":", l->code) < 0 ||
	    (l->message && (PUT_LIT(b, ",\"message\":") < 0 || put_message(b, l->message) < 0)))
		return -1;
	if (!l->notification) {
		if (!(o = room(b, NUMBERS_ROOM)))
			return -1;
		o = int_text(LIT(o, ",\"duration_us\":"), l->duration_us);
		o = int_text(LIT(o, ",\"bytes_in\":"), l->bytes_in);
		o = int_text(LIT(o, ",\"bytes_out\":"), l->bytes_out);
		done(b, o);
	}
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
	set_str(o, "protocol", l->protocol);
	set_str(o, "backend", l->backend);
	set_str(o, "method", l->method);
	set_str(o, "name", l->name);
	if (l->id)
		set_val(o, "id", l->id);
	else if (l->id_text && l->id_text->n)
		json_object_set_new(o, "id", msg_val_json(l->id_text));
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
