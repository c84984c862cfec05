/*
 * h3.c - HTTP/3 and WebTransport (draft-02) framing over bytes: QUIC
 * varints, frames, SETTINGS, stream preambles, capsules, datagram
 * prefixes, and request and response headers through nghttp3's QPACK
 * codec with a dynamic table of 0 (a new encoder or decoder per call:
 * with no table there is no state to keep between field sections).
 *
 * Everything here reads untrusted bytes: no read past LEN, lengths from
 * the wire compared before they are added, and "need more" kept apart
 * from "malformed".
 */
#include "h3.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp3/nghttp3.h>

#include "buf.h"

#define WT_ERROR_FIRST UINT64_C(0x52e4a40fa8db)
#define WT_ERROR_LAST UINT64_C(0x52e5ac983162)  /* h3_wt_error_to_h3(UINT32_MAX) */
#define CLOSE_REASON_MAX 1024
#define QUARTER_ID_MAX ((UINT64_C(1) << 60) - 1)

/* Fills WHY (N bytes; may be NULL) and returns -1. */
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

/* ---- varints ---- */

/* Bytes V takes (1, 2, 4 or 8); 0 when V is above H3_VARINT_MAX. */
size_t h3_varint_len(uint64_t v)
{
	if (v < 64)
		return 1;
	if (v < 16384)
		return 2;
	if (v < (UINT64_C(1) << 30))
		return 4;
	return v <= H3_VARINT_MAX ? 8 : 0;
}

/* Writes V big-endian with its length in the top two bits; 0 when out of range. */
size_t h3_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = h3_varint_len(v);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	switch (n) {
	case 2: p[0] |= 0x40; break;
	case 4: p[0] |= 0x80; break;
	case 8: p[0] |= 0xc0; break;
	default: break;
	}
	return n;
}

/* Reads one varint (any of its encodings, minimal or not). */
size_t h3_varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
	if (len == 0)
		return 0;
	size_t n = (size_t)1 << (p[0] >> 6);
	if (len < n)
		return 0;
	uint64_t x = p[0] & 0x3f;
	for (size_t i = 1; i < n; i++)
		x = x << 8 | p[i];
	*v = x;
	return n;
}

/* Appends V; -1 also when V is out of range. */
int h3_varint_append(struct buf *out, uint64_t v)
{
	if (v > H3_VARINT_MAX || buf_reserve(out, 8) < 0)
		return -1;
	out->len += h3_varint_put((uint8_t *)out->data + out->len, v);
	return 0;
}

/* ---- WebTransport error codes ---- */

/* Application code E in HTTP/3's code space. */
uint64_t h3_wt_error_to_h3(uint32_t e)
{
	return WT_ERROR_FIRST + e + e / 0x1e;
}

/* The application code of C; false out of range or on a reserved (GREASE) codepoint. */
bool h3_wt_error_from_h3(uint64_t c, uint32_t *e)
{
	if (c < WT_ERROR_FIRST || c > WT_ERROR_LAST || (c - 0x21) % 0x1f == 0)
		return false;
	uint64_t shifted = c - WT_ERROR_FIRST;
	*e = (uint32_t)(shifted - shifted / 0x1f);
	return true;
}

/* ---- frames and capsules (the same type-length-value shape) ---- */

/* Reads a type and a length (bytes taken, 0 need more). */
size_t h3_frame_head(const uint8_t *p, size_t len, uint64_t *type, uint64_t *plen)
{
	size_t a = h3_varint_get(p, len, type);
	if (!a)
		return 0;
	size_t b = h3_varint_get(p + a, len - a, plen);
	return b ? a + b : 0;
}

/* One whole type-length-value at P: bytes taken, 0 need more, -1 over MAX. */
static ssize_t tlv_parse(const uint8_t *p, size_t len, size_t max, uint64_t *type,
			 const uint8_t **value, size_t *vlen)
{
	uint64_t t, l;
	size_t h = h3_frame_head(p, len, &t, &l);
	if (!h)
		return 0;
	if (l > max || l > (uint64_t)SSIZE_MAX - h)
		return -1;
	if (len - h < l)
		return 0;
	*type = t;
	*value = p + h;
	*vlen = (size_t)l;
	return (ssize_t)(h + l);
}

/* One whole frame. */
ssize_t h3_frame_parse(const uint8_t *p, size_t len, size_t max, uint64_t *type,
		       const uint8_t **payload, size_t *plen)
{
	return tlv_parse(p, len, max, type, payload, plen);
}

/* Appends TYPE and PLEN. */
int h3_frame_head_append(struct buf *out, uint64_t type, uint64_t plen)
{
	return h3_varint_append(out, type) < 0 || h3_varint_append(out, plen) < 0 ? -1 : 0;
}

/* One whole capsule. */
ssize_t h3_capsule_parse(const uint8_t *p, size_t len, size_t max, uint64_t *type,
			 const uint8_t **value, size_t *vlen)
{
	return tlv_parse(p, len, max, type, value, vlen);
}

/* ---- SETTINGS ---- */

/* qsort's order on uint64_t. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Stores one known setting in S; -1 when its value is not allowed. */
static int setting_store(struct h3_settings *s, uint64_t id, uint64_t v)
{
	bool *flag = NULL;
	switch (id) {
	case 0x02: case 0x03: case 0x04: case 0x05:
		return -1;  /* HTTP/2's, forbidden in HTTP/3 (RFC 9114 7.2.4.1) */
	case H3_SETTING_QPACK_MAX_TABLE_CAPACITY: s->qpack_max_table_capacity = v; return 0;
	case H3_SETTING_MAX_FIELD_SECTION_SIZE: s->max_field_section_size = v; return 0;
	case H3_SETTING_QPACK_BLOCKED_STREAMS: s->qpack_blocked_streams = v; return 0;
	case H3_SETTING_WEBTRANSPORT_MAX_SESSIONS: s->webtransport_max_sessions = v; return 0;
	case H3_SETTING_ENABLE_CONNECT_PROTOCOL: flag = &s->enable_connect_protocol; break;
	case H3_SETTING_H3_DATAGRAM: case H3_SETTING_H3_DATAGRAM_DRAFT04:
		flag = &s->h3_datagram; break;
	case H3_SETTING_ENABLE_WEBTRANSPORT: flag = &s->enable_webtransport; break;
	default:
		return 0;  /* unknown or GREASE */
	}
	if (v > 1)
		return -1;
	*flag = *flag || v == 1;
	return 0;
}

/* Parses the pairs; the identifiers go to IDS (room for LEN / 2) to find duplicates. */
int h3_settings_parse(const uint8_t *p, size_t len, struct h3_settings *s)
{
	memset(s, 0, sizeof *s);
	uint64_t *ids = malloc((len / 2 + 1) * sizeof *ids);
	size_t n = 0, off = 0;
	int rc = ids ? 0 : -1;
	while (rc == 0 && off < len) {
		uint64_t id, v;
		size_t a = h3_varint_get(p + off, len - off, &id);
		size_t b = a ? h3_varint_get(p + off + a, len - off - a, &v) : 0;
		if (!b || setting_store(s, id, v) < 0) {
			rc = -1;
			break;
		}
		ids[n++] = id;
		off += a + b;
	}
	if (rc == 0 && n > 1) {
		qsort(ids, n, sizeof *ids, cmp_u64);
		for (size_t i = 1; i < n && rc == 0; i++)
			if (ids[i] == ids[i - 1])
				rc = -1;
	}
	free(ids);
	if (rc < 0)
		memset(s, 0, sizeof *s);
	return rc;
}

/* Appends one setting pair to the scratch buffer P at *OFF. */
static void setting_put(uint8_t *p, size_t *off, uint64_t id, uint64_t v)
{
	*off += h3_varint_put(p + *off, id);
	*off += h3_varint_put(p + *off, v);
}

/* The control stream's type and our SETTINGS. */
int h3_control_preamble(struct buf *out, bool server, uint64_t max_sessions)
{
	uint8_t p[5 * 16];
	size_t n = 0;
	if (max_sessions > H3_VARINT_MAX)
		return -1;
	setting_put(p, &n, H3_SETTING_QPACK_MAX_TABLE_CAPACITY, 0);
	if (server)
		setting_put(p, &n, H3_SETTING_ENABLE_CONNECT_PROTOCOL, 1);
	setting_put(p, &n, H3_SETTING_H3_DATAGRAM, 1);
	setting_put(p, &n, H3_SETTING_ENABLE_WEBTRANSPORT, 1);
	setting_put(p, &n, H3_SETTING_WEBTRANSPORT_MAX_SESSIONS, max_sessions);
	if (h3_varint_append(out, H3_UNI_CONTROL) < 0 ||
	    h3_frame_head_append(out, H3_FRAME_SETTINGS, n) < 0)
		return -1;
	return buf_append(out, p, n);
}

/* ---- stream preambles ---- */

/* The kind of a unidirectional stream of type T. */
static enum h3_preamble_kind uni_kind(uint64_t t)
{
	switch (t) {
	case H3_UNI_CONTROL: return H3_PRE_CONTROL;
	case H3_UNI_PUSH: return H3_PRE_PUSH;
	case H3_UNI_QPACK_ENCODER: return H3_PRE_QPACK_ENCODER;
	case H3_UNI_QPACK_DECODER: return H3_PRE_QPACK_DECODER;
	case H3_UNI_WEBTRANSPORT: return H3_PRE_WT_UNI;
	default: return H3_PRE_UNKNOWN;
	}
}

/* Classifies a stream from its first bytes. */
size_t h3_preamble_parse(const uint8_t *p, size_t len, bool bidi, enum h3_preamble_kind *kind,
			 uint64_t *session)
{
	uint64_t t;
	size_t a = h3_varint_get(p, len, &t);
	*kind = H3_PRE_MORE;
	*session = 0;
	if (!a)
		return 0;
	enum h3_preamble_kind k = bidi ? (t == H3_WT_BIDI_SIGNAL ? H3_PRE_WT_BIDI : H3_PRE_REQUEST)
				       : uni_kind(t);
	if (k == H3_PRE_REQUEST) {
		*kind = k;
		return 0;  /* the frame stays for the frame reader */
	}
	if (k != H3_PRE_WT_BIDI && k != H3_PRE_WT_UNI) {
		*kind = k;
		return a;
	}
	uint64_t sid;
	size_t b = h3_varint_get(p + a, len - a, &sid);
	if (!b)
		return 0;
	*kind = k;
	*session = sid;
	return a + b;
}

/* The signal or stream type, then the session id. */
int h3_wt_preamble(struct buf *out, bool bidi, uint64_t session)
{
	return h3_varint_append(out, bidi ? H3_WT_BIDI_SIGNAL : H3_UNI_WEBTRANSPORT) < 0 ||
	       h3_varint_append(out, session) < 0 ? -1 : 0;
}

/* ---- CLOSE_WEBTRANSPORT_SESSION and datagrams ---- */

/* Length of the well-formed UTF-8 sequence at P (N bytes), 0 when ill-formed. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	size_t k;
	uint8_t lo = 0x80, hi = 0xbf;  /* bounds of the second byte (RFC 3629's table) */
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		k = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		k = 3;
		lo = c == 0xe0 ? 0xa0 : 0x80;
		hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		k = 4;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf;
	} else
		return 0;
	if (n < k || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < k; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return k;
}

/* Whether P (N bytes) is well-formed UTF-8. */
static bool utf8_valid(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq(p + i, n - i);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* The code and the reason (well-formed UTF-8, at most 1024 bytes). */
int h3_close_parse(const uint8_t *p, size_t len, uint32_t *code, const char **reason,
		   size_t *rlen)
{
	if (len < 4 || len - 4 > CLOSE_REASON_MAX || !utf8_valid(p + 4, len - 4))
		return -1;
	*code = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	*reason = (const char *)p + 4;
	*rlen = len - 4;
	return 0;
}

/* A DATA frame around the capsule; the reason is cut on a character boundary. */
int h3_close_append(struct buf *out, uint32_t code, const char *reason)
{
	size_t rl = reason ? strlen(reason) : 0;
	if (rl > CLOSE_REASON_MAX) {
		rl = CLOSE_REASON_MAX;
		while (rl > 0 && ((uint8_t)reason[rl] & 0xc0) == 0x80)
			rl--;
	}
	uint8_t c[4] = { (uint8_t)(code >> 24), (uint8_t)(code >> 16), (uint8_t)(code >> 8),
			 (uint8_t)code };
	size_t vlen = 4 + rl;
	size_t clen = h3_varint_len(H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION) + h3_varint_len(vlen) +
		      vlen;
	if (h3_frame_head_append(out, H3_FRAME_DATA, clen) < 0 ||
	    h3_frame_head_append(out, H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION, vlen) < 0 ||
	    buf_append(out, c, 4) < 0)
		return -1;
	return rl ? buf_append(out, reason, rl) : 0;
}

/* The quarter stream id's length; 0 when short or above 2^60 - 1 (RFC 9297). */
size_t h3_datagram_parse(const uint8_t *p, size_t len, uint64_t *quarter_id)
{
	uint64_t q;
	size_t n = h3_varint_get(p, len, &q);
	if (!n || q > QUARTER_ID_MAX)
		return 0;
	*quarter_id = q;
	return n;
}

/* ---- QPACK field sections ---- */

/* Called for each decoded field line; -1 (WHY filled) stops the decoding. */
typedef int (*field_fn)(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *value,
			size_t vlen, char *why, size_t n);

/* Checks a field line against RFC 9114 4.2: lowercase names, no NUL, CR or LF in values. */
static int field_check(const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen,
		       char *why, size_t n)
{
	if (nlen == 0)
		return fail(why, n, "an empty field name");
	for (size_t i = 0; i < nlen; i++)
		if (name[i] >= 'A' && name[i] <= 'Z')
			return fail(why, n, "an uppercase field name");
	for (size_t i = 0; i < vlen; i++)
		if (value[i] == 0 || value[i] == '\r' || value[i] == '\n')
			return fail(why, n, "a NUL, CR or LF in a field value");
	return 0;
}

/* Runs the decoder over the whole field section, handing each field line to FN. */
static int decode_run(nghttp3_qpack_decoder *dec, nghttp3_qpack_stream_context *sctx,
		      const uint8_t *p, size_t len, field_fn fn, void *ctx, char *why, size_t n)
{
	for (;;) {
		nghttp3_qpack_nv nv;
		uint8_t flags = 0;
		nghttp3_ssize r = nghttp3_qpack_decoder_read_request(dec, sctx, &nv, &flags, p, len, 1);
		if (r < 0)
			return fail(why, n, "QPACK: %s", nghttp3_strerror((int)r));
		p += r;
		len -= (size_t)r;
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED)
			return fail(why, n, "QPACK: a dynamic table reference");
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
			nghttp3_vec nm = nghttp3_rcbuf_get_buf(nv.name);
			nghttp3_vec v = nghttp3_rcbuf_get_buf(nv.value);
			int rc = field_check(nm.base, nm.len, v.base, v.len, why, n);
			if (rc == 0)
				rc = fn(ctx, nm.base, nm.len, v.base, v.len, why, n);
			nghttp3_rcbuf_decref(nv.name);
			nghttp3_rcbuf_decref(nv.value);
			if (rc < 0)
				return -1;
		}
		if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL)
			return len == 0 ? 0 : fail(why, n, "bytes after the field section");
		if (r == 0 && !(flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT))
			return fail(why, n, "a truncated field section");
	}
}

/* Decodes the field section P (LEN bytes) with a zero dynamic table. */
static int qpack_decode(const uint8_t *p, size_t len, field_fn fn, void *ctx, char *why,
			size_t n)
{
	/* a Required Insert Count other than 0 (RFC 9204 4.5.1.1) names the
	 * dynamic table: refused before nghttp3 would count it as blocked */
	if (len == 0)
		return fail(why, n, "an empty field section");
	if (p[0] != 0)
		return fail(why, n, "QPACK: a dynamic table reference");
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_decoder *dec = NULL;
	nghttp3_qpack_stream_context *sctx = NULL;
	int rc;
	if (nghttp3_qpack_decoder_new(&dec, 0, 0, mem) != 0 ||
	    nghttp3_qpack_stream_context_new(&sctx, 0, mem) != 0)
		rc = fail(why, n, "out of memory");
	else
		rc = decode_run(dec, sctx, p, len, fn, ctx, why, n);
	if (sctx)
		nghttp3_qpack_stream_context_del(sctx);
	if (dec)
		nghttp3_qpack_decoder_del(dec);
	return rc;
}

/* Whether the field name (N, LEN) is S. */
static bool name_is(const uint8_t *n, size_t len, const char *s)
{
	return strlen(s) == len && memcmp(n, s, len) == 0;
}

/* Copies V (VLEN bytes) into DST (SIZE bytes) as a string, cutting it to fit. */
static void value_copy(char *dst, size_t size, const uint8_t *v, size_t vlen, bool *truncated)
{
	if (vlen >= size) {
		vlen = size - 1;
		*truncated = true;
	}
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
}

struct req_state {
	struct h3_request *r;
	unsigned seen;      /* the pseudo-headers seen, one bit each */
	bool regular_seen;
};

/* Takes one request field line. */
static int request_field(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *v,
			 size_t vlen, char *why, size_t n)
{
	struct req_state *st = ctx;
	struct h3_request *r = st->r;
	(void)why;
	(void)n;
	if (name[0] != ':') {
		st->regular_seen = true;
		if (name_is(name, nlen, "origin")) {
			value_copy(r->origin, sizeof r->origin, v, vlen, &r->truncated);
			r->has_origin = true;
		} else if (name_is(name, nlen, "sec-webtransport-http3-draft02")) {
			r->wt_draft02 = vlen == 1 && v[0] == '1';
		}
		return 0;
	}
	static const char *const pseudo[] = { ":method", ":protocol", ":scheme", ":authority",
					      ":path" };
	char *dst[] = { r->method, r->protocol, r->scheme, r->authority, r->path };
	size_t size[] = { sizeof r->method, sizeof r->protocol, sizeof r->scheme,
			  sizeof r->authority, sizeof r->path };
	for (size_t i = 0; i < sizeof pseudo / sizeof pseudo[0]; i++) {
		if (!name_is(name, nlen, pseudo[i]))
			continue;
		if (st->regular_seen || (st->seen & 1u << i))
			r->bad_pseudo = true;
		else
			value_copy(dst[i], size[i], v, vlen, &r->truncated);
		st->seen |= 1u << i;
		return 0;
	}
	r->bad_pseudo = true;  /* unknown, or a response's */
	return 0;
}

/* Decodes a request's field section into R. */
int h3_request_decode(const uint8_t *p, size_t len, struct h3_request *r, char *why, size_t n)
{
	struct req_state st = { r, 0, false };
	memset(r, 0, sizeof *r);
	return qpack_decode(p, len, request_field, &st, why, n);
}

/* Takes one response field line: *CTX the status, -1 until one is seen. */
static int response_field(void *ctx, const uint8_t *name, size_t nlen, const uint8_t *v,
			  size_t vlen, char *why, size_t n)
{
	int *status = ctx;
	if (name[0] != ':')
		return 0;
	if (!name_is(name, nlen, ":status") || *status >= 0)
		return fail(why, n, "an unknown or repeated pseudo-header");
	if (vlen != 3 || v[0] < '1' || v[0] > '5' || v[1] < '0' || v[1] > '9' || v[2] < '0' ||
	    v[2] > '9')
		return fail(why, n, "a malformed :status");
	*status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
	return 0;
}

/* A response's :status. */
int h3_response_status(const uint8_t *p, size_t len)
{
	int status = -1;
	char why[64];
	if (qpack_decode(p, len, response_field, &status, why, sizeof why) < 0)
		return -1;
	return status;
}

/* A name-value pair for nghttp3 from two strings it does not keep. */
static nghttp3_nv nv_of(const char *name, const char *value)
{
	nghttp3_nv nv = { (uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value, strlen(name),
			  strlen(value), NGHTTP3_NV_FLAG_NONE };
	return nv;
}

/* Appends a HEADERS frame holding NVA encoded with a zero dynamic table. */
static int headers_append(struct buf *out, const nghttp3_nv *nva, size_t nvlen)
{
	const nghttp3_mem *mem = nghttp3_mem_default();
	nghttp3_qpack_encoder *enc = NULL;
	nghttp3_buf pbuf, rbuf, ebuf;
	nghttp3_buf_init(&pbuf);
	nghttp3_buf_init(&rbuf);
	nghttp3_buf_init(&ebuf);
	int rc = -1;
	if (nghttp3_qpack_encoder_new(&enc, 0, mem) == 0 &&
	    nghttp3_qpack_encoder_encode(enc, &pbuf, &rbuf, &ebuf, 0, nva, nvlen) == 0 &&
	    nghttp3_buf_len(&ebuf) == 0) {
		size_t pl = nghttp3_buf_len(&pbuf), rl = nghttp3_buf_len(&rbuf);
		if (h3_frame_head_append(out, H3_FRAME_HEADERS, pl + rl) == 0 &&
		    buf_append(out, pbuf.pos, pl) == 0 && buf_append(out, rbuf.pos, rl) == 0)
			rc = 0;
	}
	nghttp3_buf_free(&pbuf, mem);
	nghttp3_buf_free(&rbuf, mem);
	nghttp3_buf_free(&ebuf, mem);
	if (enc)
		nghttp3_qpack_encoder_del(enc);
	return rc;
}

/* :status (and the draft-02 answer to a WebTransport CONNECT). */
int h3_response_append(struct buf *out, int status, bool webtransport)
{
	char s[4];
	if (status < 100 || status > 599)
		return -1;
	snprintf(s, sizeof s, "%d", status);
	nghttp3_nv nva[2] = { nv_of(":status", s),
			      nv_of("sec-webtransport-http3-draft", "draft02") };
	return headers_append(out, nva, webtransport && status == 200 ? 2 : 1);
}

/* The extended CONNECT of a WebTransport client. */
int h3_connect_append(struct buf *out, const char *authority, const char *path,
		      const char *origin)
{
	nghttp3_nv nva[] = {
		nv_of(":method", "CONNECT"),
		nv_of(":protocol", "webtransport"),
		nv_of(":scheme", "https"),
		nv_of(":authority", authority),
		nv_of(":path", path),
		nv_of("sec-webtransport-http3-draft02", "1"),
		nv_of("origin", origin ? origin : ""),
	};
	return headers_append(out, nva, origin ? 7 : 6);
}
