/*
 * cbor_json.c - CBOR (RFC 8949) to and from jansson values, for MCP-Flow's
 * CBOR encoding (mapping and refusals: cbor_json.h).
 *
 * Decoding drives libcbor's streaming decoder one head at a time with
 * callbacks that build the jansson tree on an explicit stack (no recursion,
 * so the depth bound is a counter, not the C stack); indefinite-length
 * strings gather their chunks in a struct buf. Encoding walks the tree
 * recursively (bounded by the same depth) with libcbor's cbor_encode_*
 * heads; reals take the shortest float that holds them exactly.
 */
#include "cbor_json.h"

#include <cbor.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* ---- shared ---- */

/* Formats WHY (N bytes) and returns -1. */
__attribute__((format(printf, 3, 4)))
static int fail(char *why, size_t n, const char *fmt, ...)
{
	if (why && n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- JSON to CBOR ---- */

struct enc {
	struct buf *out;
	char *why;
	size_t n;
};

/* Appends what CALL, one of libcbor's cbor_encode_* given the free space
 * AT_ (at most 9 bytes: the longest head or float), writes; returns -1
 * from the caller when it cannot. */
#define HEAD(e, call) do { \
		if (buf_reserve((e)->out, 9) < 0) \
			return fail((e)->why, (e)->n, "out of memory"); \
		unsigned char *at_ = (unsigned char *)(e)->out->data + (e)->out->len; \
		size_t w_ = call; \
		if (w_ == 0) \
			return fail((e)->why, (e)->n, "cbor head did not fit"); \
		(e)->out->len += w_; \
	} while (0)
#define AT_ at_, 9

/* True when D is exactly an IEEE half; *H: its bits. */
static bool half_exact(double d, uint16_t *h)
{
	uint16_t sign = signbit(d) ? 0x8000 : 0;
	double a = fabs(d);
	if (a == 0) {
		*h = sign;
		return true;
	}
	int e;
	frexp(a, &e);
	int E = e - 1;   /* a = 1.f * 2^E */
	if (E > 15)
		return false;
	bool normal = E >= -14;
	if (!normal)
		E = -14;
	double k = ldexp(a, 10 - E);   /* exact: a power-of-two scaling */
	if (k != floor(k) || k >= 2048)
		return false;
	uint16_t m = (uint16_t)k;
	*h = normal ? (uint16_t)(sign | (uint16_t)((E + 15) << 10) | (m - 1024)) : (uint16_t)(sign | m);
	return true;
}

/* Appends the real D: half, single or double, the shortest that is exact. */
static int enc_real(struct enc *e, double d)
{
	if (!isfinite(d))
		return fail(e->why, e->n, "a real that is not finite (NaN or infinity)");
	uint16_t h;
	if (half_exact(d, &h)) {
		uint8_t b[3] = { 0xF9, (uint8_t)(h >> 8), (uint8_t)h };
		return buf_append(e->out, b, 3) < 0 ? fail(e->why, e->n, "out of memory") : 0;
	}
	if (fabs(d) <= FLT_MAX && (double)(float)d == d) {
		HEAD(e, cbor_encode_single((float)d, AT_));
		return 0;
	}
	HEAD(e, cbor_encode_double(d, AT_));
	return 0;
}

/* Appends a text string head and its LEN bytes at S. */
static int enc_text(struct enc *e, const char *s, size_t len)
{
	HEAD(e, cbor_encode_string_start(len, AT_));
	if (buf_append(e->out, s, len) < 0)
		return fail(e->why, e->n, "out of memory");
	return 0;
}

/* Appends V (borrowed) at nesting DEPTH (containers above it). */
static int enc_value(struct enc *e, const json_t *v, int depth)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
		HEAD(e, cbor_encode_null(AT_));
		return 0;
	case JSON_TRUE:
	case JSON_FALSE:
		HEAD(e, cbor_encode_bool(json_is_true(v), AT_));
		return 0;
	case JSON_INTEGER: {
		json_int_t i = json_integer_value(v);
		if (i >= 0)
			HEAD(e, cbor_encode_uint((uint64_t)i, AT_));
		else
			HEAD(e, cbor_encode_negint((uint64_t)(-1 - i), AT_));
		return 0;
	}
	case JSON_REAL:
		return enc_real(e, json_real_value(v));
	case JSON_STRING:
		return enc_text(e, json_string_value(v), json_string_length(v));
	case JSON_ARRAY: {
		if (depth >= CBOR_JSON_MAX_DEPTH)
			return fail(e->why, e->n, "nesting deeper than %d", CBOR_JSON_MAX_DEPTH);
		size_t i, n = json_array_size(v);
		HEAD(e, cbor_encode_array_start(n, AT_));
		for (i = 0; i < n; i++)
			if (enc_value(e, json_array_get(v, i), depth + 1) < 0)
				return -1;
		return 0;
	}
	case JSON_OBJECT: {
		if (depth >= CBOR_JSON_MAX_DEPTH)
			return fail(e->why, e->n, "nesting deeper than %d", CBOR_JSON_MAX_DEPTH);
		const char *k;
		size_t klen;
		json_t *m;
		HEAD(e, cbor_encode_map_start(json_object_size(v), AT_));
		json_object_keylen_foreach((json_t *)v, k, klen, m) {
			if (enc_text(e, k, klen) < 0 || enc_value(e, m, depth + 1) < 0)
				return -1;
		}
		return 0;
	}
	}
	return fail(e->why, e->n, "unknown JSON type");
}

/* Appends V as one CBOR item; on failure OUT is as it was. */
int cbor_from_json(const json_t *v, struct buf *out, char *why, size_t n)
{
	struct enc e = { out, why, n };
	size_t len = out->len;
	if (!v)
		return fail(why, n, "no value");
	if (enc_value(&e, v, 0) < 0) {
		out->len = len;
		return -1;
	}
	return 0;
}

/* ---- CBOR to JSON ---- */

enum frame_kind { F_ARRAY, F_MAP, F_BYTES, F_TEXT };

/* An open container or indefinite-length string. */
struct frame {
	enum frame_kind kind;
	bool indef;
	uint64_t left;     /* definite arrays: items; maps: keys plus values */
	json_t *v;         /* the array or object (owned) */
	json_t *key;       /* a map's key awaiting its value (owned) */
	struct buf chunks; /* an indefinite string's bytes so far */
};

struct dec {
	struct frame stack[CBOR_JSON_MAX_DEPTH + 1];   /* + 1: a string inside the deepest container */
	int top;           /* frames in use */
	int containers;    /* arrays and maps among them */
	json_t *result;    /* the finished item (owned) */
	bool err;
	char *why;
	size_t n;
	size_t at;         /* offset of the head being decoded (for WHY) */
};

/* Records the first error: later callbacks do nothing. */
__attribute__((format(printf, 2, 3)))
static void dfail(struct dec *d, const char *fmt, ...)
{
	if (d->err)
		return;
	d->err = true;
	if (d->why && d->n) {
		char msg[160];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		snprintf(d->why, d->n, "%s (byte %zu)", msg, d->at);
	}
}

static void deliver(struct dec *d, json_t *v, bool text);

/* Pops the top container and hands it to its parent. */
static void close_top(struct dec *d)
{
	struct frame *f = &d->stack[--d->top];
	json_t *v = f->v;
	f->v = NULL;
	d->containers--;
	deliver(d, v, false);
}

/* Puts the finished value V (stolen; NULL: out of memory) into the open
 * container, or makes it the result. TEXT: V came from a CBOR text string
 * (the only kind of map key). */
static void deliver(struct dec *d, json_t *v, bool text)
{
	if (!v) {
		dfail(d, "out of memory");
		return;
	}
	if (d->err) {
		json_decref(v);
		return;
	}
	if (d->top == 0) {
		d->result = v;
		return;
	}
	struct frame *f = &d->stack[d->top - 1];
	if (f->kind == F_ARRAY) {
		if (json_array_append_new(f->v, v) < 0) {
			dfail(d, "out of memory");
			return;
		}
	} else if (!f->key) {
		if (!text) {
			json_decref(v);
			dfail(d, "a map key that is not a text string");
			return;
		}
		if (json_object_getn(f->v, json_string_value(v), json_string_length(v))) {
			json_decref(v);
			dfail(d, "a duplicate map key");
			return;
		}
		f->key = v;
	} else {
		json_t *k = f->key;
		f->key = NULL;
		int rc = json_object_setn_new(f->v, json_string_value(k), json_string_length(k), v);
		json_decref(k);
		if (rc < 0) {
			dfail(d, "out of memory");
			return;
		}
	}
	if (!f->indef && --f->left == 0)
		close_top(d);
}

/* The top frame when it is an indefinite string, else NULL. */
static struct frame *in_string(struct dec *d)
{
	if (d->top == 0)
		return NULL;
	struct frame *f = &d->stack[d->top - 1];
	return f->kind == F_BYTES || f->kind == F_TEXT ? f : NULL;
}

/* False (with the error set) when a non-string item is inside an
 * indefinite-length string, or after an error. */
static bool item_ok(struct dec *d)
{
	if (d->err)
		return false;
	if (in_string(d)) {
		dfail(d, "an indefinite-length string chunk that is not a definite string of its type");
		return false;
	}
	return true;
}

/* Standard base64 with padding of LEN bytes at P: a JSON string. */
static json_t *base64_string(const uint8_t *p, size_t len)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t olen = (len + 2) / 3 * 4;
	char *s = malloc(olen + 1), *o = s;
	if (!s)
		return NULL;
	size_t i;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t w = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = abc[w >> 18];
		*o++ = abc[(w >> 12) & 63];
		*o++ = abc[(w >> 6) & 63];
		*o++ = abc[w & 63];
	}
	if (i < len) {
		uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = abc[w >> 18];
		*o++ = abc[(w >> 12) & 63];
		*o++ = i + 1 < len ? abc[(w >> 6) & 63] : '=';
		*o++ = '=';
	}
	json_t *v = json_stringn_nocheck(s, olen);
	free(s);
	return v;
}

/* A text string's JSON value, or the error (invalid UTF-8). */
static void deliver_text(struct dec *d, const uint8_t *p, size_t len)
{
	json_t *v = json_stringn((const char *)p, len);
	if (!v) {
		dfail(d, "a text string that is not valid UTF-8");
		return;
	}
	deliver(d, v, true);
}

/* Appends a chunk to the indefinite string on top when its type is KIND;
 * true when it was one. */
static bool chunk(struct dec *d, enum frame_kind kind, const uint8_t *p, size_t len)
{
	struct frame *f = in_string(d);
	if (!f)
		return false;
	if (f->kind != kind)
		dfail(d, "an indefinite-length string chunk of another type");
	else if (buf_append(&f->chunks, p, len) < 0)
		dfail(d, "out of memory");
	return true;
}

static void on_text(void *ctx, cbor_data p, size_t len)
{
	struct dec *d = ctx;
	if (d->err || chunk(d, F_TEXT, p, len))
		return;
	deliver_text(d, p, len);
}

static void on_bytes(void *ctx, cbor_data p, size_t len)
{
	struct dec *d = ctx;
	if (d->err || chunk(d, F_BYTES, p, len))
		return;
	deliver(d, base64_string(p, len), false);
}

/* Opens a frame of KIND; false (with the error set) when too deep. */
static struct frame *open_frame(struct dec *d, enum frame_kind kind, bool indef, uint64_t left)
{
	bool container = kind == F_ARRAY || kind == F_MAP;
	if (container && d->containers >= CBOR_JSON_MAX_DEPTH) {
		dfail(d, "nesting deeper than %d", CBOR_JSON_MAX_DEPTH);
		return NULL;
	}
	struct frame *f = &d->stack[d->top++];
	memset(f, 0, sizeof *f);
	f->kind = kind;
	f->indef = indef;
	f->left = left;
	if (container) {
		d->containers++;
		f->v = kind == F_ARRAY ? json_array() : json_object();
		if (!f->v) {
			dfail(d, "out of memory");
			return NULL;
		}
	}
	return f;
}

/* A container's start: definite with N items (maps: N pairs), or not. */
static void start(struct dec *d, enum frame_kind kind, bool indef, uint64_t n)
{
	if (!item_ok(d))
		return;
	if (!indef && kind == F_MAP && n > UINT64_MAX / 2) {
		dfail(d, "a map longer than the input");
		return;
	}
	struct frame *f = open_frame(d, kind, indef, kind == F_MAP ? 2 * n : n);
	if (f && !indef && n == 0)
		close_top(d);
}

static void on_array(void *ctx, size_t n) { start(ctx, F_ARRAY, false, n); }
static void on_map(void *ctx, size_t n) { start(ctx, F_MAP, false, n); }
static void on_indef_array(void *ctx) { start(ctx, F_ARRAY, true, 0); }
static void on_indef_map(void *ctx) { start(ctx, F_MAP, true, 0); }

/* An indefinite-length string of KIND begins. */
static void string_start(struct dec *d, enum frame_kind kind)
{
	if (item_ok(d))
		open_frame(d, kind, true, 0);
}

static void on_text_start(void *ctx) { string_start(ctx, F_TEXT); }
static void on_bytes_start(void *ctx) { string_start(ctx, F_BYTES); }

/* The "break" stop code: ends the indefinite item on top. */
static void on_break(void *ctx)
{
	struct dec *d = ctx;
	if (d->err)
		return;
	struct frame *f = d->top ? &d->stack[d->top - 1] : NULL;
	if (!f || !f->indef) {
		dfail(d, "a break outside an indefinite-length item");
		return;
	}
	if (f->kind == F_MAP) {
		if (f->key) {
			dfail(d, "a map key without its value");
			return;
		}
		close_top(d);
		return;
	}
	if (f->kind == F_ARRAY) {
		close_top(d);
		return;
	}
	struct buf b = f->chunks;
	enum frame_kind kind = f->kind;
	f->chunks = (struct buf)BUF_INIT;
	d->top--;
	const uint8_t *p = b.data ? (const uint8_t *)b.data : (const uint8_t *)"";
	if (kind == F_TEXT)
		deliver_text(d, p, b.len);
	else
		deliver(d, base64_string(p, b.len), false);
	buf_release(&b);
}

/* An unsigned integer U (major type 0). */
static void uint_value(struct dec *d, uint64_t u)
{
	if (!item_ok(d))
		return;
	if (u > INT64_MAX) {
		dfail(d, "an integer beyond int64 (%" PRIu64 ")", u);
		return;
	}
	deliver(d, json_integer((json_int_t)u), false);
}

/* A negative integer -1 - U (major type 1). */
static void negint_value(struct dec *d, uint64_t u)
{
	if (!item_ok(d))
		return;
	if (u > INT64_MAX) {
		dfail(d, "an integer beyond int64 (-1 - %" PRIu64 ")", u);
		return;
	}
	deliver(d, json_integer(-1 - (json_int_t)u), false);
}

static void on_u8(void *ctx, uint8_t u) { uint_value(ctx, u); }
static void on_u16(void *ctx, uint16_t u) { uint_value(ctx, u); }
static void on_u32(void *ctx, uint32_t u) { uint_value(ctx, u); }
static void on_u64(void *ctx, uint64_t u) { uint_value(ctx, u); }
static void on_n8(void *ctx, uint8_t u) { negint_value(ctx, u); }
static void on_n16(void *ctx, uint16_t u) { negint_value(ctx, u); }
static void on_n32(void *ctx, uint32_t u) { negint_value(ctx, u); }
static void on_n64(void *ctx, uint64_t u) { negint_value(ctx, u); }

/* A float of any width, as a JSON real. */
static void real_value(struct dec *d, double x)
{
	if (!item_ok(d))
		return;
	if (!isfinite(x)) {
		dfail(d, "a float that is NaN or infinite");
		return;
	}
	deliver(d, json_real(x), false);
}

static void on_f2(void *ctx, float x) { real_value(ctx, x); }
static void on_f4(void *ctx, float x) { real_value(ctx, x); }
static void on_f8(void *ctx, double x) { real_value(ctx, x); }

static void on_null(void *ctx)
{
	if (item_ok(ctx))
		deliver(ctx, json_null(), false);
}

static void on_bool(void *ctx, bool b)
{
	if (item_ok(ctx))
		deliver(ctx, json_boolean(b), false);
}

static void on_undefined(void *ctx)
{
	if (item_ok(ctx))
		dfail(ctx, "the simple value undefined");
}

static void on_tag(void *ctx, uint64_t tag)
{
	if (item_ok(ctx))
		dfail(ctx, "tag %" PRIu64 " (tags are not JSON)", tag);
}

static const struct cbor_callbacks callbacks = {
	.uint8 = on_u8, .uint16 = on_u16, .uint32 = on_u32, .uint64 = on_u64,
	.negint8 = on_n8, .negint16 = on_n16, .negint32 = on_n32, .negint64 = on_n64,
	.byte_string_start = on_bytes_start, .byte_string = on_bytes,
	.string = on_text, .string_start = on_text_start,
	.indef_array_start = on_indef_array, .array_start = on_array,
	.indef_map_start = on_indef_map, .map_start = on_map,
	.tag = on_tag,
	.float2 = on_f2, .float4 = on_f4, .float8 = on_f8,
	.undefined = on_undefined, .null = on_null, .boolean = on_bool,
	.indef_break = on_break,
};

/* Why libcbor's decoder refused the head byte B: the reserved and
 * unassigned codes it reports as a bare error. */
static const char *head_error(uint8_t b)
{
	uint8_t major = b >> 5, info = b & 31;
	if (major == 6)
		return "a tag (tags are not JSON)";
	if (major == 7 && (info < 20 || info == 24))
		return "a simple value that is not false, true or null";
	if (info >= 28 && info <= 30)
		return "a reserved additional information value";
	if (info == 31)
		return "an indefinite length on an integer";
	return "malformed CBOR";
}

/* Frees what the decoder still holds. */
static void dec_release(struct dec *d)
{
	while (d->top > 0) {
		struct frame *f = &d->stack[--d->top];
		json_decref(f->v);
		json_decref(f->key);
		buf_release(&f->chunks);
	}
}

/* The one item that is exactly DATA, as JSON. */
json_t *cbor_to_json(const uint8_t *data, size_t len, char *why, size_t n)
{
	struct dec *d = calloc(1, sizeof *d);
	if (!d) {
		fail(why, n, "out of memory");
		return NULL;
	}
	d->why = why;
	d->n = n;
	size_t off = 0;
	while (!d->err && !d->result) {
		d->at = off;
		if (off == len) {
			dfail(d, off ? "truncated: the item is not complete" : "empty: no CBOR item");
			break;
		}
		struct cbor_decoder_result r = cbor_stream_decode(data + off, len - off, &callbacks, d);
		if (r.status == CBOR_DECODER_NEDATA)
			dfail(d, "truncated: the item is not complete");
		else if (r.status == CBOR_DECODER_ERROR)
			dfail(d, "%s", head_error(data[off]));
		off += r.read;
	}
	json_t *v = d->result;
	if (!d->err && off < len) {
		d->at = off;
		dfail(d, "%zu bytes after the one item", len - off);
	}
	if (d->err) {
		json_decref(v);
		v = NULL;
	}
	dec_release(d);
	free(d);
	return v;
}
