/*
 * jscan.c - validating JSON scanner that records routing members.
 *
 * Why one file of some 1,000 lines: one validating state machine, with its
 * SSE2 and plain paths beside each other so that both are read (and
 * fuzzed) as one; its pieces share the scanner's state and nothing else.
 */
#include "jscan.h"

#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <string.h>

#define MAX_DEPTH 64

/* Routing members seen, so that a repeated one makes the scan decline. */
enum {
	SEEN_PARAMS = 1 << 0, SEEN_RESULT = 1 << 1, SEEN_NAME = 1 << 2, SEEN_URI = 1 << 3,
	SEEN_META = 1 << 4, SEEN_IS_ERROR = 1 << 5, SEEN_REQUEST_ID = 1 << 6,
	SEEN_PARAMS_TOKEN = 1 << 7, SEEN_META_TOKEN = 1 << 8,
};

struct scan {
	const char *e;
	int depth;
	bool ok;
	unsigned seen;           /* SEEN_* */
	bool lines;              /* a raw CR or LF in the white space */
	struct jspan meta_token; /* params._meta.progressToken */
	struct jspan params_token; /* params.progressToken */
};

/* Notes routing member BIT; a second one makes the scan decline. */
static void seen(struct scan *s, unsigned bit)
{
	if (s->seen & bit)
		s->ok = false;
	s->seen |= bit;
}

static const char *value(struct scan *s, const char *p);

/* True for the four bytes JSON takes as white space. */
static inline __attribute__((always_inline)) bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * Skips white space, all of it: the hot paths come here only when there is
 * some. A raw CR or LF sets *LINES (when LINES is given): the message
 * cannot go to a line-framed peer as it is (jscan.h, "lines").
 */
static const char *skip_ws(const char *p, const char *e, bool *lines)
{
	if (p + 1 < e && *p == ' ' && (unsigned char)p[1] > ' ')
		return p + 1;   /* a lone space, as after ", " and ": " */
	for (; p < e; p++) {
		if (*p == ' ' || *p == '\t')
			continue;
		if (*p != '\n' && *p != '\r')
			break;
		if (lines)
			*lines = true;
	}
	return p;
}

/* Skips white space; compact JSON has none, so that case exits first. */
static inline __attribute__((always_inline)) const char *ws(const char *p, const char *e)
{
	if (__builtin_expect(p < e && (unsigned char)*p > ' ', 1))
		return p;
	return skip_ws(p, e, NULL);
}

/* ws() for the scan of a message (S), noting a raw line break there. */
static inline __attribute__((always_inline)) const char *sws(struct scan *s, const char *p,
							     const char *e)
{
	if (__builtin_expect(p < e && (unsigned char)*p > ' ', 1))
		return p;
	return skip_ws(p, e, &s->lines);
}

/*
 * P itself when the byte there is A or B, else P past white space: compact
 * JSON has the byte a scan expects next right there, so white space costs
 * one test in all, that the caller's own test for A or B then repeats (the
 * compiler merges the two).
 */
static inline __attribute__((always_inline)) const char *ws_unless(struct scan *s,
								   const char *p, const char *e,
								   char a, char b)
{
	if (__builtin_expect(p < e && (*p == a || *p == b), 1))
		return p;
	return skip_ws(p, e, &s->lines);
}

/* The byte after C at P (white space allowed before it), or NULL. */
static inline __attribute__((always_inline)) const char *eat(struct scan *s, const char *p,
							     const char *e, char c)
{
	p = ws_unless(s, p, e, c, c);
	return p < e && *p == c ? p + 1 : NULL;
}

/* Length of a valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_len(const unsigned char *p, const unsigned char *e)
{
	unsigned c = p[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, min = 0x10000;
	else
		return 0;
	if ((size_t)(e - p) < n)
		return 0;
	unsigned v = c & (0x7F >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	return n;
}

/* Checks the 4 hex digits of a \u escape; surrogates are declined. */
static bool hex4(const char *p, const char *e)
{
	unsigned v = 0;
	if (e - p < 4)
		return false;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return false;
	}
	return !(v >= 0xD800 && v <= 0xDFFF);
}

/* Bytes that need a closer look inside a string: controls, '"', '\\', non-ASCII. */
#define R4(a) a, a, a, a
#define R16(a) R4(a), R4(a), R4(a), R4(a)
static const bool special_byte[256] = {
	R16(1), R16(1),                                     /* 0x00-0x1F */
	0, 0, 1, R4(0), R4(0), R4(0), 0,                    /* 0x20-0x2F: '"' */
	R16(0), R16(0),                                     /* 0x30-0x4F */
	R4(0), R4(0), R4(0), 1, 0, 0, 0,                    /* 0x50-0x5F: '\\' */
	R16(0), R16(0),                                     /* 0x60-0x7F */
	R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1),  /* 0x80-0xFF */
};
#undef R16
#undef R4

/* True for a byte that needs a closer look inside a string. */
static bool special(unsigned char c)
{
	return special_byte[c];
}

/*
 * The special bytes among the 8 at P, as the high bit of each such byte
 * (the lowest set one is the first special byte: loads are little-endian
 * and the borrows of these word-at-a-time tests only run upwards).
 * (x - n) & ~x marks bytes below n (n <= 128); a '"' or '\\' becomes a
 * zero byte once XORed with it; a byte >= 0x80 has its high bit set.
 */
static uint64_t special_mask(const char *p)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t v, q, b;
	memcpy(&v, p, 8);
	q = v ^ (ones * '"');
	b = v ^ (ones * '\\');
	return (((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((b - ones) & ~b) | v) & high;
}

/* Inlined into the hot loops: a call costs as much as the work. */
#define HOT static inline __attribute__((always_inline))

/* The first special byte in [p, e), or e. */
HOT const char *next_special(const char *p, const char *e)
{
#ifdef __SSE2__
	/* sixteen at a time: '"', '\\', <= 0x1F (unsigned min), >= 0x80 (sign bit) */
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
		ctl = _mm_set1_epi8(0x1F);
	while (p + 16 <= e) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
							_mm_cmpeq_epi8(v, bslash)),
					   _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
		unsigned m = (unsigned)_mm_movemask_epi8(hit) | (unsigned)_mm_movemask_epi8(v);
		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	while (p + 8 <= e) {
		uint64_t m = special_mask(p);
		if (m)
			return p + (__builtin_ctzll(m) >> 3);
		p += 8;  /* plain ASCII, the common case, eight at a time */
	}
	while (p < e && !special((unsigned char)*p))
		p++;
	return p;
}

/*
 * The rest of a string from P, inside it, on a special byte (or E):
 * escapes and non-ASCII, out of line. Returns the byte after it or NULL.
 */
static const char *string_rest(const char *p, const char *e, bool *escaped)
{
	for (; p < e;) {
		p = next_special(p, e);
		if (p >= e)
			return NULL;
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c == '\\') {
			if (escaped)
				*escaped = true;
			if (++p >= e)
				return NULL;
			if (*p == 'u') {
				if (!hex4(p + 1, e))
					return NULL;
				p += 5;
			} else if (strchr("\"\\/bfnrt", *p) && *p) {
				p++;
			} else {
				return NULL;
			}
			continue;
		}
		size_t n = utf8_len((const unsigned char *)p, (const unsigned char *)e);
		if (!n)
			return NULL;
		p += n;
	}
	return NULL;
}

/* Scans a string at p ('"'); returns the byte after it or NULL. */
HOT const char *string(const char *p, const char *e, bool *escaped)
{
	const char *q = next_special(p + 1, e);
	if (q < e && *q == '"')
		return q + 1;   /* plain ASCII to the closing quote: the common case */
	return string_rest(q, e, escaped);
}

/* Scans a number; declines integers jansson might overflow. */
static const char *number(const char *p, const char *e)
{
	const char *start;
	if (p < e && *p == '-')
		p++;
	start = p;
	if (p < e && *p == '0')
		p++;
	else if (p < e && *p >= '1' && *p <= '9')
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	size_t int_digits = (size_t)(p - start), exp_digits = 0;
	bool real = false;
	if (p < e && *p == '.') {
		real = true;
		const char *d = ++p;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
		if (p == d)
			return NULL;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		real = true;
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		const char *d = p;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
		if (p == d || p - d > 2)
			return NULL;
		exp_digits = (size_t)(p - d);
	}
	/* jansson refuses what overflows a double: at most 10^200 * 10^99 here */
	if ((!real && int_digits > 18) || int_digits > 300 || (exp_digits && int_digits > 200))
		return NULL;
	return p;
}

/* Scans a literal. */
static const char *literal(const char *p, const char *e, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(e - p) < n || memcmp(p, word, n) != 0)
		return NULL;
	return p + n;
}

/*
 * Called for each member with its value at V; scans the value (with
 * value(), or object() to record members inside it) and returns the byte
 * after it, or NULL.
 */
typedef const char *(*member_fn)(void *ctx, const char *k, size_t kn, bool kesc,
				 const char *v, struct scan *s);

/*
 * Scans the members of an object from its first key at P (white space
 * allowed before it) to the byte after its '}', calling FN (if any) for
 * each member. Returns NULL when they do not hold together.
 */
HOT const char *members(struct scan *s, const char *p, member_fn fn, void *ctx)
{
	const char *e = s->e;
	for (;;) {
		p = ws_unless(s, p, e, '"', '"');
		if (p >= e || *p != '"')
			return NULL;
		bool kesc = false;
		const char *kend = string(p, e, &kesc);
		if (!kend)
			return NULL;
		const char *v = eat(s, kend, e, ':');
		if (!v || (v = sws(s, v, e)) >= e)
			return NULL;
		const char *vend = fn ? fn(ctx, p + 1, (size_t)(kend - p - 2), kesc, v, s) :
			value(s, v);
		if (!vend)
			return NULL;
		p = ws_unless(s, vend, e, ',', '}');
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		return p < e && *p == '}' ? p + 1 : NULL;
	}
}

/* Scans the object at P (its '{'), calling FN (if any) for each member. */
HOT const char *object(struct scan *s, const char *p, member_fn fn, void *ctx)
{
	p = ws_unless(s, p + 1, s->e, '"', '"');
	if (p < s->e && *p == '}')
		return p + 1;
	return members(s, p, fn, ctx);
}

/* Scans the object at V one level down, with FN for its members. */
HOT const char *nested(struct scan *s, const char *v, member_fn fn, void *ctx)
{
	if (++s->depth > MAX_DEPTH)
		return NULL;
	const char *r = object(s, v, fn, ctx);
	s->depth--;
	return r;
}

/* Scans a literal or a number at P, which is in range. */
static const char *scalar(const char *p, const char *e)
{
	switch (*p) {
	case 't':
		return literal(p, e, "true");
	case 'f':
		return literal(p, e, "false");
	case 'n':
		return literal(p, e, "null");
	default:
		return number(p, e);
	}
}

/*
 * True when the escaped string [P, END) (quotes included, already
 * checked) holds a \u0000 escape: jansson refuses such a key even with
 * JSON_ALLOW_NUL ("NUL byte in object key not supported"), so the scan
 * must decline it. Escaped keys are rare: this runs out of the hot loop.
 */
static bool key_has_nul(const char *p, const char *end)
{
	for (p++; p < end - 1; p++) {
		if (*p != '\\')
			continue;
		if (p[1] == 'u' && memcmp(p + 2, "0000", 4) == 0)
			return true;
		p++;   /* the escaped byte (or the 'u', whose digits are plain) */
	}
	return false;
}

/*
 * Scans any value, iteratively: containers nest up to MAX_DEPTH levels in
 * all (S->depth are open around P), remembered one bit each in OBJ (set:
 * an object, so a key comes next after a comma). White space is looked
 * for only where the byte that usually comes next is not there.
 */
static const char *value(struct scan *s, const char *p)
{
	const char *e = s->e;
	uint64_t obj = 0;
	int open = 0;
	char close;
next_value:
	if (p >= e)
		return NULL;
	if (*p == '"') {
		if (!(p = string(p, e, NULL)))
			return NULL;
	} else if (*p == '{' || *p == '[') {
		bool is_obj = *p == '{';
		if (s->depth + open + 1 > MAX_DEPTH)
			return NULL;
		p = sws(s, p + 1, e);
		if (p < e && *p == (is_obj ? '}' : ']')) {
			p++;
		} else {
			open++;
			obj = (obj << 1) | is_obj;
			if (is_obj)
				goto next_key;
			goto next_value;
		}
	} else if (is_ws(*p)) {
		p = skip_ws(p, e, &s->lines);
		goto next_value;
	} else if (!(p = scalar(p, e))) {
		return NULL;
	}
after_value:
	if (open == 0)
		return p;
	close = (obj & 1) ? '}' : ']';
	p = ws_unless(s, p, e, ',', close);
	if (p >= e)
		return NULL;
	if (*p == ',') {
		p++;
		if (obj & 1)
			goto next_key;
		goto next_value;
	}
	if (*p != close)
		return NULL;
	p++;
	open--;
	obj >>= 1;
	goto after_value;
next_key:
	p = ws_unless(s, p, e, '"', '"');
	if (p >= e || *p != '"')
		return NULL;
	const char *k = p;
	bool kesc = false;
	if (!(p = string(p, e, &kesc)) || (kesc && key_has_nul(k, p)))
		return NULL;   /* jansson refuses a NUL in a key, whatever the flags */
	if (!(p = eat(s, p, e, ':')))
		return NULL;
	goto next_value;
}

/*
 * True when [k, k+kn) is the string literal NAME. The first byte is
 * compared before the rest: memcmp of some lengths is a call, and other
 * keys of the same length ("arguments", "content") are common.
 */
#define key_is(k, kn, name) \
	((kn) == sizeof(name) - 1 && *(k) == (name)[0] && \
	 memcmp((k), (name), sizeof(name) - 1) == 0)

/* Sets a span once; a second occurrence makes the scan decline. */
static void set_span(struct jspan *sp, const char *v, const char *vend, struct scan *s)
{
	if (sp->p)
		s->ok = false;
	sp->p = v;
	sp->n = (size_t)(vend - v);
}

/* Scans the string value at V into *SP (contents, no quotes). */
HOT const char *string_member(struct jscan *out, struct jspan *sp, const char *v,
			      struct scan *s)
{
	bool esc = false;
	if (*v != '"')
		return value(s, v);  /* not a string: not a name the chain knows */
	const char *vend = string(v, s->e, &esc);
	if (!vend)
		return NULL;
	if (esc)
		out->subject_escaped = true;
	set_span(sp, v + 1, vend - 1, s);
	return vend;
}

/* Members of params._meta. */
static const char *meta_member(void *ctx, const char *k, size_t kn, bool kesc,
			       const char *v, struct scan *s)
{
	struct jscan *out = ctx;
	const char *vend = value(s, v);
	(void)out;
	if (kesc) {
		s->ok = false;
	} else if (vend && key_is(k, kn, "progressToken")) {
		seen(s, SEEN_META_TOKEN);
		s->meta_token = (struct jspan){ v, (size_t)(vend - v) };
	}
	return vend;
}

/* Members of params. */
static const char *params_member(void *ctx, const char *k, size_t kn, bool kesc,
				 const char *v, struct scan *s)
{
	struct jscan *out = ctx;
	const char *vend;
	if (kesc) {
		s->ok = false;
		return value(s, v);
	}
	if (key_is(k, kn, "_meta")) {
		seen(s, SEEN_META);
		if (*v != '{')
			return value(s, v);
		vend = nested(s, v, meta_member, out);
		if (vend)
			set_span(&out->meta, v, vend, s);
		return vend;
	}
	if (key_is(k, kn, "name")) {
		seen(s, SEEN_NAME);
		return string_member(out, &out->name, v, s);
	}
	if (key_is(k, kn, "uri")) {
		seen(s, SEEN_URI);
		return string_member(out, &out->uri, v, s);
	}
	vend = value(s, v);
	if (vend && key_is(k, kn, "progressToken")) {
		seen(s, SEEN_PARAMS_TOKEN);
		s->params_token = (struct jspan){ v, (size_t)(vend - v) };
	} else if (vend && key_is(k, kn, "requestId")) {
		seen(s, SEEN_REQUEST_ID);
		set_span(&out->request_id, v, vend, s);
	}
	return vend;
}

/* Members of result. */
static const char *result_member(void *ctx, const char *k, size_t kn, bool kesc,
				 const char *v, struct scan *s)
{
	struct jscan *out = ctx;
	const char *vend = value(s, v);
	if (kesc) {
		s->ok = false;
	} else if (vend && key_is(k, kn, "isError")) {
		seen(s, SEEN_IS_ERROR);
		out->is_error = *v == 't';
	}
	return vend;
}

/*
 * The id at V: a string without escapes, or an integer of at most 18
 * digits, read in the one pass that checks it. Anything else (a real,
 * null, a long integer...) returns NULL: the full path answers.
 */
HOT const char *id_member(struct jscan *out, const char *v, struct scan *s)
{
	const char *e = s->e, *p = v;
	if (*p == '"') {
		bool esc = false;
		if (!(p = string(v, e, &esc)) || esc)
			return NULL;
		out->id_is_string = true;
		set_span(&out->id, v, p, s);
		return p;
	}
	bool neg = *p == '-';
	p += neg;
	const char *d = p;
	uint64_t x = 0;
	if (p < e && *p == '0') {
		p++;
	} else {
		/*
		 * At most 19 digits are added up (they fit in 64 bits), and 19
		 * decline: a real's integer part may have hundreds, which
		 * overflowed the sum when it was taken after number() (found by
		 * fuzzing).
		 */
		const char *end = e - d > 19 ? d + 19 : e;
		while (p < end && *p >= '0' && *p <= '9')
			x = x * 10 + (uint64_t)(*p++ - '0');
		if (p == d || p - d > 18)
			return NULL;
	}
	if (p < e && (*p == '.' || *p == 'e' || *p == 'E'))
		return NULL;   /* a real, valid or not */
	out->id_int = neg ? -(int64_t)x : (int64_t)x;
	set_span(&out->id, v, p, s);
	return p;
}

/* Members of the message itself. */
HOT const char *top_member(void *ctx, const char *k, size_t kn, bool kesc,
			   const char *v, struct scan *s)
{
	struct jscan *out = ctx;
	if (kesc) {
		s->ok = false;
		return value(s, v);
	}
	if (key_is(k, kn, "id"))
		return id_member(out, v, s);
	if (key_is(k, kn, "method")) {
		bool esc = false;
		const char *vend = *v == '"' ? string(v, s->e, &esc) : NULL;
		if (!vend || esc)
			return NULL;   /* not a plain string: the full path answers */
		set_span(&out->method, v + 1, vend - 1, s);
		return vend;
	}
	if (key_is(k, kn, "params")) {
		seen(s, SEEN_PARAMS);
		out->has_params = true;
		if (*v == '{')
			return nested(s, v, params_member, out);
		if (*v != '[')
			s->ok = false;
		return value(s, v);
	}
	if (key_is(k, kn, "result")) {
		seen(s, SEEN_RESULT);
		out->has_result = true;
		if (*v != '{')
			return value(s, v);
		const char *vend = nested(s, v, result_member, out);
		if (vend)
			out->result = (struct jspan){ v, (size_t)(vend - v) };
		return vend;
	}
	if (key_is(k, kn, "jsonrpc")) {
		/* a string that starts "2.0" ends there: its quote is not escaped */
		if (out->has_jsonrpc || s->e - v < 5 || memcmp(v, "\"2.0\"", 5) != 0)
			return NULL;
		out->has_jsonrpc = true;
		return v + 5;
	}
	if (key_is(k, kn, "error"))
		return NULL;   /* error objects are checked on the full path */
	return value(s, v);
}

/*
 * True when the message at [P, E) starts {"jsonrpc":"2.0", as nearly all
 * do: compared as two words and a byte (memcmp is a call at this size).
 */
HOT bool jsonrpc_first(const char *p, const char *e)
{
	static const char want[] = "{\"jsonrpc\":\"2.0\",";
	uint64_t a, b, wa, wb;
	if (e - p < 17)
		return false;
	memcpy(&a, p, 8);
	memcpy(&b, p + 8, 8);
	memcpy(&wa, want, 8);
	memcpy(&wb, want + 8, 8);
	return a == wa && b == wb && p[16] == want[16];
}

/* Scans a whole message. */
bool jscan_message(const char *p, size_t n, struct jscan *out)
{
	struct scan s = { .e = p + n, .ok = true, .depth = 1 };
	memset(out, 0, sizeof *out);
	const char *q = sws(&s, p, s.e);
	if (jsonrpc_first(q, s.e)) {
		out->has_jsonrpc = true;   /* a repeat of it declines */
		q += 17;
		if (s.e - q > 5 && memcmp(q, "\"id\":", 5) == 0) {
			/* and "id": next, as in every request and response we send */
			q = sws(&s, q + 5, s.e);
			q = q < s.e ? id_member(out, q, &s) : NULL;
			if (!q || !(q = eat(&s, q, s.e, ',')))
				return false;   /* (an id alone declines anyway) */
		}
	} else if (q < s.e && *q == '{') {
		q++;   /* (an empty object declines below: no "jsonrpc") */
	} else {
		return false;
	}
	q = members(&s, q, top_member, out);
	if (!q || !s.ok || !out->has_jsonrpc)
		return false;
	if (q != s.e && skip_ws(q, s.e, &s.lines) != s.e)
		return false;
	out->lines = s.lines;
	/* a request's token is in _meta; a progress notification's in params */
	out->token = jspan_is(out->method, "notifications/progress") ? s.params_token :
		out->id.p ? s.meta_token : (struct jspan){ NULL, 0 };
	if (out->method.p)
		return !out->has_result && !out->has_error;
	return out->id.p && (out->has_result != out->has_error);
}

/* Compares a span with a string. */
bool jspan_eq(struct jspan s, const char *str)
{
	return s.p && strlen(str) == s.n && memcmp(s.p, str, s.n) == 0;
}

/* ---- walking into an accepted message ---- */

/*
 * These helpers run on bytes jscan_message() (or a parser) has already
 * checked, so they only find where values end, without checking them
 * again: a string ends at its unescaped '"', a container at its matching
 * bracket. Every read stays inside [p, e) whatever the bytes are; bytes
 * that are not valid JSON give some span or a failure, never more.
 */

/* The byte after the string whose opening '"' is at P, or NULL. */
static const char *skip_string(const char *p, const char *e)
{
	for (p++; p < e;) {
#ifdef __SSE2__
		const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
		while (p + 16 <= e) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
			unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
				_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
			if (m) {
				p += __builtin_ctz(m);
				break;
			}
			p += 16;
		}
#endif
		while (p < e && *p != '"' && *p != '\\')
			p++;
		if (p >= e)
			return NULL;
		if (*p == '"')
			return p + 1;
		p += 2;  /* an escape: the byte after the backslash is never the end */
	}
	return NULL;
}

/*
 * One byte of a container being skipped: strings (with escapes) and
 * nesting. Returns true when C closes the outermost bracket.
 */
struct skip_state {
	size_t depth;
	bool in_str, escape;
};

static inline bool skip_byte(struct skip_state *st, char c)
{
	if (st->in_str) {
		if (st->escape)
			st->escape = false;
		else if (c == '\\')
			st->escape = true;
		else if (c == '"')
			st->in_str = false;
		return false;
	}
	if (c == '"')
		st->in_str = true;
	else if (c == '[' || c == '{')
		st->depth++;
	else if (c == ']' || c == '}')
		return --st->depth == 0;
	return false;
}

/* The byte after the container opening at P, or NULL. */
static const char *skip_container(const char *p, const char *e)
{
	struct skip_state st = { 0, false, false };
#ifdef __SSE2__
	/*
	 * Sixteen bytes at a time: the quotes and brackets of a block as bits,
	 * taken in order; a block with a backslash (rare) goes byte by byte.
	 */
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
		ob = _mm_set1_epi8('['), cb = _mm_set1_epi8(']'),
		oc = _mm_set1_epi8('{'), cc = _mm_set1_epi8('}');
	while (p + 16 <= e) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned bs = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, bslash));
		if (bs || st.escape) {
			for (const char *end = p + 16; p < end; p++)
				if (skip_byte(&st, *p))
					return p + 1;
			continue;
		}
		unsigned ev = (unsigned)_mm_movemask_epi8(_mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, ob)),
			_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, cb), _mm_cmpeq_epi8(v, oc)),
				     _mm_cmpeq_epi8(v, cc))));
		while (ev) {
			int i = __builtin_ctz(ev);
			ev &= ev - 1;
			char c = p[i];
			if (c == '"')
				st.in_str = !st.in_str;
			else if (st.in_str)
				continue;
			else if (c == '[' || c == '{')
				st.depth++;
			else if (--st.depth == 0)
				return p + i + 1;
		}
		p += 16;
	}
#endif
	for (; p < e; p++)
		if (skip_byte(&st, *p))
			return p + 1;
	return NULL;
}

/* The byte after the value at P (no white space before it), or NULL. */
static const char *skip(const char *p, const char *e)
{
	if (p >= e)
		return NULL;
	if (*p == '"')
		return skip_string(p, e);
	if (*p == '{' || *p == '[')
		return skip_container(p, e);
	const char *start = p;   /* a number or a literal */
	while (p < e && *p != ',' && *p != ']' && *p != '}' && *p != ' ' &&
	       *p != '\n' && *p != '\r' && *p != '\t')
		p++;
	return p > start ? p : NULL;
}

/* Scans the member key at P ('"'): its contents in *K; NULL if invalid or escaped. */
static const char *plain_key(const char *p, const char *e, struct jspan *k)
{
	if (p >= e || *p != '"')
		return NULL;
	const char *end = skip_string(p, e);
	if (!end || memchr(p, '\\', (size_t)(end - p)))
		return NULL;
	*k = (struct jspan){ p + 1, (size_t)(end - p - 2) };
	return end;
}

/*
 * Walks the object at P (its '{'): *VAL gets the value of its last member
 * KEY (left alone when there is none). Returns the byte after the object,
 * or NULL when it is not one or has an escaped key (*ESCAPED set then).
 */
static const char *find_member(const char *p, const char *e, const char *key,
				struct jspan *val, bool *escaped)
{
	size_t kn = strlen(key);
	p = ws(p + 1, e);
	if (p < e && *p == '}')
		return p + 1;
	for (;;) {
		struct jspan k;
		if (p >= e || *p != '"')
			return NULL;
		if (!(p = plain_key(p, e, &k))) {
			*escaped = true;  /* (or unterminated, which checked bytes are not) */
			return NULL;
		}
		p = ws(p, e);
		if (p >= e || *p != ':')
			return NULL;
		const char *v = ws(p + 1, e);
		const char *vend = skip(v, e);
		if (!vend)
			return NULL;
		if (k.n == kn && memcmp(k.p, key, kn) == 0)
			*val = (struct jspan){ v, (size_t)(vend - v) };
		p = ws(vend, e);
		if (p < e && *p == ',') {
			p = ws(p + 1, e);
			continue;
		}
		return p < e && *p == '}' ? p + 1 : NULL;
	}
}

/* The value of the last member KEY of the object OBJ. */
int jscan_member(struct jspan obj, const char *key, struct jspan *val)
{
	const char *e = obj.p + obj.n, *p = ws(obj.p, e);
	struct jspan v = { NULL, 0 };
	bool escaped = false;
	if (p >= e || *p != '{' || !find_member(p, e, key, &v, &escaped))
		return -1;
	if (!v.p)
		return 0;
	*val = v;
	return 1;
}

/* Where the value of the first member KEY of the object OBJ starts. */
int jscan_member_start(struct jspan obj, const char *key, const char **at)
{
	const char *e = obj.p + obj.n, *p = ws(obj.p, e);
	size_t kn = strlen(key);
	if (p >= e || *p != '{')
		return -1;
	p = ws(p + 1, e);
	if (p < e && *p == '}')
		return 0;
	for (;;) {
		struct jspan k;
		if (p >= e || *p != '"' || !(p = plain_key(p, e, &k)))
			return -1;
		p = ws(p, e);
		if (p >= e || *p != ':')
			return -1;
		const char *v = ws(p + 1, e);
		if (k.n == kn && memcmp(k.p, key, kn) == 0) {
			*at = v;
			return 1;
		}
		if (!(p = skip(v, e)))
			return -1;
		p = ws(p, e);
		if (p < e && *p == ',') {
			p = ws(p + 1, e);
			continue;
		}
		return p < e && *p == '}' ? 0 : -1;
	}
}

/* Whether another member KEY follows the value ending at P in the object OBJ. */
int jscan_member_after(struct jspan obj, const char *p, const char *key)
{
	const char *e = obj.p + obj.n;
	size_t kn = strlen(key);
	for (;;) {
		struct jspan k;
		p = ws(p, e);
		if (p < e && *p == '}')
			return 0;
		if (p >= e || *p != ',')
			return -1;
		p = ws(p + 1, e);
		if (p >= e || *p != '"' || !(p = plain_key(p, e, &k)))
			return -1;
		if (k.n == kn && memcmp(k.p, key, kn) == 0)
			return 1;
		p = ws(p, e);
		if (p >= e || *p != ':' || !(p = skip(ws(p + 1, e), e)))
			return -1;
	}
}

/* Starts on the array ARR. */
bool jscan_items_begin(struct jscan_items *it, struct jspan arr)
{
	const char *e = arr.p + arr.n, *p = ws(arr.p, e);
	if (p >= e || *p != '[')
		return false;
	*it = (struct jscan_items){ .p = p + 1, .e = e, .first = true };
	return true;
}

/* The next element of the array, and the member FIELD of an object element. */
int jscan_items_next(struct jscan_items *it, struct jspan *item, const char *field,
		     struct jspan *fv)
{
	const char *p = ws(it->p, it->e), *end;
	if (p >= it->e)
		return -1;
	if (*p == ']') {
		it->p = p;
		return 0;
	}
	if (!it->first) {
		if (*p != ',')
			return -1;
		p = ws(p + 1, it->e);
	}
	if (fv)
		*fv = (struct jspan){ NULL, 0 };
	if (field && p < it->e && *p == '{') {
		bool escaped = false;
		end = find_member(p, it->e, field, fv, &escaped);
		if (escaped)
			it->escaped = true;
	} else {
		end = skip(p, it->e);
	}
	if (!end)
		return -1;
	*item = (struct jspan){ p, (size_t)(end - p) };
	it->p = end;
	it->first = false;
	return 1;
}
