/*
 * http_parse.c - strict HTTP/1.1 request framing (see http_parse.h): the
 * request line, the header section and the chunked body, to the letter of
 * RFC 9112 and RFC 9110. No allocation, no I/O.
 *
 * The head is read left to right, and each check is made as soon as the
 * bytes it depends on are there: a refusal depends only on the bytes up to
 * where it is found, so a longer read of the same stream ends in the same
 * status (garbage is refused at once, not after the limit), and a head that
 * parses parses the same way whatever follows it. The chunked decoder is a
 * state machine over single bytes (data runs excepted), so any split of
 * its input decodes alike.
 */
#include "http_parse.h"

#include <arpa/inet.h>
#include <string.h>

#define HP_LINE_MAX 8192         /* a chunk size line, a trailer line, the trailer section */

enum { BAD = -1, NEED = 0, OK = 1 };

/* One hp_parse_head call. */
struct head {
	const char *b;
	size_t lim;                  /* the bytes we may look at: min(n, max) */
	size_t pos;                  /* where the next line starts */
	struct hp_request *req;
	unsigned *status;
	const char **why;
	bool host, cl, te;           /* fields seen */
	bool close, keep;            /* connection options seen */
};

/* ---- characters ---- */

/* True for an ASCII letter or digit. */
static bool is_alnum(char c)
{
	char l = (char)(c | 0x20);
	return (l >= 'a' && l <= 'z') || (c >= '0' && c <= '9');
}

/* True when C is one of the bytes of SET (never NUL). */
static bool in_set(char c, const char *set)
{
	return c != '\0' && strchr(set, c) != NULL;
}

/* RFC 9110 section 5.6.2: tchar. */
static bool is_tchar(char c)
{
	return is_alnum(c) || in_set(c, "!#$%&'*+-.^_`|~");
}

/* A hexadecimal digit's value, or -1. */
static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	char l = (char)(c | 0x20);
	return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

/* True for SP or HTAB. */
static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* A byte of a field value: VCHAR, SP, HTAB or obs-text (RFC 9110 section 5.5). */
static bool is_field_char(char c)
{
	unsigned char u = (unsigned char)c;
	return is_ws(c) || (u > 0x20 && u != 0x7f);
}

/* RFC 3986: unreserved, sub-delims (what a reg-name holds, with pct-encoded). */
static bool is_host_char(char c)
{
	return is_alnum(c) || in_set(c, "-._~!$&'()*+,;=");
}

/* RFC 3986: a byte of a path or a query but '%' (pchar, "/", "?"). */
static bool is_uri_char(char c)
{
	return is_host_char(c) || in_set(c, ":@/?");
}

/* A byte the request-target may hold at all (its parts are checked later). */
static bool is_target_char(char c)
{
	return is_uri_char(c) || in_set(c, "%[]");
}

/* Lowercases an ASCII letter. */
static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

/* True when span S equals the NUL-terminated TEXT, case-insensitively. */
bool hp_span_ieq(struct hp_span s, const char *text)
{
	size_t i = 0;
	for (; i < s.n; i++)
		if (text[i] == '\0' || lower(s.p[i]) != lower(text[i]))
			return false;
	return text[i] == '\0';
}

/* The first header field NAME (case-insensitive) of REQ, or NULL. */
const struct hp_span *hp_header(const struct hp_request *req, const char *name)
{
	for (size_t i = 0; i < req->nheaders; i++)
		if (hp_span_ieq(req->headers[i].name, name))
			return &req->headers[i].value;
	return NULL;
}

/* ---- spans and lists ---- */

/* The span of N bytes at P. */
static struct hp_span span(const char *p, size_t n)
{
	return (struct hp_span){ p, n };
}

/* S without SP and HTAB at either end. */
static struct hp_span trim(struct hp_span s)
{
	while (s.n > 0 && is_ws(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n > 0 && is_ws(s.p[s.n - 1]))
		s.n--;
	return s;
}

/* How many bytes of token start at P[I] (up to N). */
static size_t token_len(const char *p, size_t n, size_t i)
{
	size_t k = i;
	while (k < n && is_tchar(p[k]))
		k++;
	return k - i;
}

/* Skips SP and HTAB from I in P (N bytes). */
static size_t skip_ws(const char *p, size_t n, size_t i)
{
	while (i < n && is_ws(p[i]))
		i++;
	return i;
}

/* Reads a quoted-string at P[*I] (a '"'): true with *I past it. Its
 * bytes are field bytes already, the only ones a quoted-string forbids. */
static bool quoted_string(const char *p, size_t n, size_t *i)
{
	for (size_t k = *i + 1; k < n; k++) {
		if (p[k] == '"') {
			*i = k + 1;
			return true;
		}
		if (p[k] == '\\')
			k++;
	}
	return false;
}

/* The next element of the comma list V from *I, without OWS (empty ones
 * too, n == 0); false after the last. Commas in quoted strings are data. */
static bool list_next(struct hp_span v, size_t *i, struct hp_span *e)
{
	if (*i > v.n)
		return false;
	size_t k = *i;
	bool quoted = false;
	for (; k < v.n && (quoted || v.p[k] != ','); k++) {
		if (quoted && v.p[k] == '\\' && k + 1 < v.n)
			k++;
		else if (v.p[k] == '"')
			quoted = !quoted;
	}
	*e = trim(span(v.p + *i, k - *i));
	*i = k + 1;
	return true;
}

/* ---- hosts and targets (RFC 3986) ---- */

/* True when P (N bytes) holds only CLASS bytes and valid pct-encodings. */
static bool chars_ok(const char *p, size_t n, bool (*class)(char))
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			if (!class(p[i]))
				return false;
		} else if (i + 2 >= n || hex_val(p[i + 1]) < 0 || hex_val(p[i + 2]) < 0) {
			return false;
		} else {
			i += 2;
		}
	}
	return true;
}

/* True when "[...]" (N bytes at P, brackets included) is an IPv6 literal. */
static bool ipv6_ok(const char *p, size_t n)
{
	char a[INET6_ADDRSTRLEN];
	unsigned char out[16];
	if (n < 4 || n - 2 >= sizeof a)
		return false;
	memcpy(a, p + 1, n - 2);
	a[n - 2] = '\0';
	return inet_pton(AF_INET6, a, out) == 1;
}

/* True when V is uri-host [":" port] with a host that is not empty (an
 * "http" URI with an empty host is invalid, RFC 9110 section 4.2.1). */
static bool host_ok(struct hp_span v)
{
	size_t i = 0;
	if (v.n > 0 && v.p[0] == '[') {
		const char *close = memchr(v.p, ']', v.n);
		if (!close || !ipv6_ok(v.p, (size_t)(close - v.p) + 1))
			return false;
		i = (size_t)(close - v.p) + 1;
	} else {
		while (i < v.n && v.p[i] != ':')
			i++;
		if (i == 0 || !chars_ok(v.p, i, is_host_char))
			return false;
	}
	if (i == v.n)
		return true;
	if (v.p[i] != ':')
		return false;
	while (++i < v.n)
		if (v.p[i] < '0' || v.p[i] > '9')
			return false;
	return true;
}

/* Refuses with STATUS and WHY: BAD. */
static int refuse(struct head *h, unsigned status, const char *why)
{
	*h->status = status;
	*h->why = why;
	return BAD;
}

/* Splits T (what follows the authority, or origin-form) into path and query. */
static int path_query(struct head *h, struct hp_span t)
{
	size_t i = 0;
	while (i < t.n && t.p[i] != '?')
		i++;
	if (!chars_ok(t.p, t.n, is_uri_char))
		return refuse(h, 400, "request-target with a character a path or query cannot have");
	h->req->path = i > 0 ? span(t.p, i) : span("/", 1);
	if (i < t.n)
		h->req->query = span(t.p + i + 1, t.n - i - 1);
	return OK;
}

/* The length of T's "http://" or "https://" (any case), or 0. */
static size_t scheme_len(struct hp_span t)
{
	if (t.n >= 7 && hp_span_ieq(span(t.p, 7), "http://"))
		return 7;
	if (t.n >= 8 && hp_span_ieq(span(t.p, 8), "https://"))
		return 8;
	return 0;
}

/* Reads the request-target's form (RFC 9112 section 3.2): origin-form,
 * absolute-form (http or https), or "*" for OPTIONS. */
static int parse_target(struct head *h)
{
	struct hp_request *q = h->req;
	struct hp_span t = q->target;
	if (t.p[0] == '/')
		return path_query(h, t);
	if (t.n == 1 && t.p[0] == '*') {
		if (q->method.n != 7 || memcmp(q->method.p, "OPTIONS", 7) != 0)
			return refuse(h, 400, "asterisk-form request-target with a method other than OPTIONS");
		q->path = t;
		return OK;
	}
	size_t k = scheme_len(t), a = k;
	if (k == 0)
		return refuse(h, 400, "request-target in neither origin, absolute nor asterisk form");
	while (a < t.n && t.p[a] != '/' && t.p[a] != '?')
		a++;
	if (!host_ok(span(t.p + k, a - k)))
		return refuse(h, 400, "request-target whose authority is not host[:port]");
	return path_query(h, span(t.p + a, t.n - a));
}

/* ---- the request line ---- */

/* Reads the method at *I: a token and one SP. */
static int read_method(struct head *h, size_t *i)
{
	size_t s = *i;
	while (*i < h->lim && is_tchar(h->b[*i]))
		(*i)++;
	if (*i == h->lim)
		return NEED;
	char c = h->b[*i];
	if (*i == s)
		return refuse(h, 400, "request line without a method");
	if (c == '\r' || c == '\n')
		return refuse(h, 400, "request line with one part");
	if (c != ' ')
		return refuse(h, 400, "method that is not a token");
	h->req->method = span(h->b + s, *i - s);
	(*i)++;
	return OK;
}

/* Reads the request-target at *I up to its SP: at most HP_MAX_TARGET bytes. */
static int read_target(struct head *h, size_t *i)
{
	size_t s = *i;
	for (; *i < h->lim && h->b[*i] != ' '; (*i)++) {
		if (*i - s == HP_MAX_TARGET)
			return refuse(h, 414, "request-target too long");
		char c = h->b[*i];
		if (c == '\r' || c == '\n')
			return refuse(h, 400, "request line with two parts");
		if (!is_target_char(c))
			return refuse(h, 400, "request-target with a character it cannot have");
	}
	if (*i == h->lim)
		return NEED;
	if (*i == s)
		return refuse(h, 400, "request line with two spaces in a row");
	h->req->target = span(h->b + s, *i - s);
	(*i)++;
	return parse_target(h);
}

/* Reads "HTTP/" DIGIT "." DIGIT CRLF at *I (RFC 9112 section 2.3). */
static int read_version(struct head *h, size_t *i)
{
	static const char form[] = "HTTP/9.9\r\n";
	size_t s = *i;
	for (size_t k = 0; k < sizeof form - 1; k++) {
		if (s + k == h->lim)
			return NEED;
		char c = h->b[s + k];
		if (form[k] == '9' ? c < '0' || c > '9' : c != form[k])
			return refuse(h, 400, k < 8 ? "malformed HTTP version" :
				      "request line that does not end in CRLF");
	}
	if (h->b[s + 5] != '1')
		return refuse(h, 505, "HTTP major version other than 1");
	h->req->minor = h->b[s + 7] == '0' ? 0 : 1;
	*i = s + sizeof form - 1;
	return OK;
}

/* Reads the request line at h->pos (after at most one empty line: RFC 9112
 * section 2.2 says to ignore at least one; a second is a bad request line). */
static int read_request_line(struct head *h)
{
	size_t i = h->pos;
	if (i < h->lim && h->b[i] == '\r') {
		if (i + 1 == h->lim)
			return NEED;
		if (h->b[i + 1] == '\n')
			i += 2;
	}
	int r = read_method(h, &i);
	if (r == OK)
		r = read_target(h, &i);
	if (r == OK)
		r = read_version(h, &i);
	if (r == OK)
		h->pos = i;
	return r;
}

/* ---- header fields ---- */

/* Host: one, a valid uri-host [":" port]. */
static int field_host(struct head *h, struct hp_span v)
{
	if (h->host)
		return refuse(h, 400, "two Host fields");
	if (!host_ok(v))
		return refuse(h, 400, "Host that is not host[:port]");
	h->host = true;
	h->req->host = v;
	return OK;
}

/* Reads 1*DIGIT (E, all of it) up to 2^63 - 1 into *X. */
static bool read_length(struct hp_span e, uint64_t *x)
{
	*x = 0;
	if (e.n == 0)
		return false;
	for (size_t i = 0; i < e.n; i++) {
		if (e.p[i] < '0' || e.p[i] > '9')
			return false;
		unsigned d = (unsigned)(e.p[i] - '0');
		if (*x > ((uint64_t)INT64_MAX - d) / 10)
			return false;
		*x = *x * 10 + d;
	}
	return true;
}

/* Content-Length: 1*DIGIT, or a list of the same value (RFC 9110 section
 * 8.6), in as many fields; never with Transfer-Encoding. */
static int field_length(struct head *h, struct hp_span v)
{
	size_t i = 0;
	struct hp_span e;
	if (h->te)
		return refuse(h, 400, "Content-Length with Transfer-Encoding");
	while (list_next(v, &i, &e)) {
		uint64_t x;
		if (!read_length(e, &x))
			return refuse(h, 400, "Content-Length that is not 1*DIGIT below 2^63");
		if (h->cl && x != h->req->length)
			return refuse(h, 400, "Content-Length values that differ");
		h->cl = true;
		h->req->length = x;
	}
	return OK;
}

/* True when P (N bytes) is *( OWS ";" OWS token BWS "=" BWS ( token /
 * quoted-string ) ): a coding's parameters (RFC 9110 section 10.1.4). */
static bool params_ok(const char *p, size_t n)
{
	size_t i = 0, t;
	while (i < n) {
		i = skip_ws(p, n, i);
		if (i == n || p[i] != ';')
			return false;
		i = skip_ws(p, n, i + 1);
		if ((t = token_len(p, n, i)) == 0)
			return false;
		i = skip_ws(p, n, i + t);
		if (i == n || p[i] != '=')
			return false;
		i = skip_ws(p, n, i + 1);
		if (i < n && p[i] == '"') {
			if (!quoted_string(p, n, &i))
				return false;
		} else if ((t = token_len(p, n, i)) == 0) {
			return false;
		} else {
			i += t;
		}
	}
	return true;
}

/* Checks one coding E of Transfer-Encoding; *CHUNKED once it is "chunked",
 * *OTHER when it is another. */
static int te_coding(struct head *h, struct hp_span e, bool *chunked, bool *other)
{
	size_t t = token_len(e.p, e.n, 0);
	if (e.n == 0)
		return refuse(h, 400, "Transfer-Encoding with an empty element");
	if (*chunked)
		return refuse(h, 400, "Transfer-Encoding with a coding after chunked");
	if (t == 0)
		return refuse(h, 400, "Transfer-Encoding coding that is not a token");
	if (hp_span_ieq(span(e.p, t), "chunked")) {
		if (t != e.n)
			return refuse(h, 400, "Transfer-Encoding chunked with parameters");
		*chunked = true;
	} else if (!params_ok(e.p + t, e.n - t)) {
		return refuse(h, 400, "Transfer-Encoding with malformed parameters");
	} else {
		*other = true;
	}
	return OK;
}

/* Transfer-Encoding: one field, HTTP/1.1, no Content-Length, codings
 * ending in chunked; another coding before it is 501. */
static int field_te(struct head *h, struct hp_span v)
{
	size_t i = 0;
	struct hp_span e;
	bool chunked = false, other = false;
	if (h->req->minor == 0)
		return refuse(h, 400, "Transfer-Encoding in HTTP/1.0");
	if (h->te)
		return refuse(h, 400, "two Transfer-Encoding fields");
	if (h->cl)
		return refuse(h, 400, "Transfer-Encoding with Content-Length");
	h->te = true;
	while (list_next(v, &i, &e))
		if (te_coding(h, e, &chunked, &other) == BAD)
			return BAD;
	if (!chunked)
		return refuse(h, 400, "Transfer-Encoding whose last coding is not chunked");
	if (other)
		return refuse(h, 501, "Transfer-Encoding with a coding other than chunked");
	return OK;
}

/* Connection: a list of tokens (empty elements ignored, RFC 9110 section 5.6.1). */
static int field_connection(struct head *h, struct hp_span v)
{
	size_t i = 0;
	struct hp_span e;
	while (list_next(v, &i, &e)) {
		if (e.n > 0 && token_len(e.p, e.n, 0) != e.n)
			return refuse(h, 400, "Connection option that is not a token");
		if (hp_span_ieq(e, "close"))
			h->close = true;
		else if (hp_span_ieq(e, "keep-alive"))
			h->keep = true;
	}
	return OK;
}

/* Expect: 100-continue only; ignored in HTTP/1.0 (RFC 9110 section 10.1.1). */
static int field_expect(struct head *h, struct hp_span v)
{
	if (!hp_span_ieq(v, "100-continue"))
		return refuse(h, 417, "Expect other than 100-continue");
	h->req->expect_continue = h->req->minor == 1;
	return OK;
}

/* Applies the meaning of field F, for the fields that frame the request. */
static int field_apply(struct head *h, const struct hp_header *f)
{
	if (hp_span_ieq(f->name, "host"))
		return field_host(h, f->value);
	if (hp_span_ieq(f->name, "content-length"))
		return field_length(h, f->value);
	if (hp_span_ieq(f->name, "transfer-encoding"))
		return field_te(h, f->value);
	if (hp_span_ieq(f->name, "connection"))
		return field_connection(h, f->value);
	if (hp_span_ieq(f->name, "expect"))
		return field_expect(h, f->value);
	return OK;
}

/* Finds the CRLF ending the line at S: OK with *E at its CR; NEED when it
 * has not come yet; BAD for a bare CR or LF. */
static int line_end(struct head *h, size_t s, size_t *e)
{
	for (size_t i = s; i < h->lim; i++) {
		if (h->b[i] == '\n')
			return refuse(h, 400, "bare LF");
		if (h->b[i] != '\r')
			continue;
		*e = i;
		if (i + 1 == h->lim)
			return NEED;
		if (h->b[i + 1] != '\n')
			return refuse(h, 400, "bare CR");
		return OK;
	}
	*e = h->lim;
	return NEED;
}

/* Checks field line [S, E) (or as much of it as came, when not COMPLETE):
 * token ":" OWS value OWS; OK with *F filled. */
static int field_syntax(struct head *h, size_t s, size_t e, bool complete, struct hp_header *f)
{
	size_t i = s + token_len(h->b, e, s);
	if (i == e)
		return complete ? refuse(h, 400, "header field without a colon") : NEED;
	if (is_ws(h->b[i]))
		return refuse(h, 400, "whitespace between a field name and its colon");
	if (h->b[i] != ':')
		return refuse(h, 400, "field name that is not a token");
	if (i == s)
		return refuse(h, 400, "empty field name");
	for (size_t k = i + 1; k < e; k++)
		if (!is_field_char(h->b[k]))
			return refuse(h, 400, "control character in a field value");
	if (!complete)
		return NEED;
	f->name = span(h->b + s, i - s);
	f->value = trim(span(h->b + i + 1, e - i - 1));
	return OK;
}

/* Reads the field line at h->pos into the next header. */
static int read_field(struct head *h)
{
	struct hp_request *q = h->req;
	size_t s = h->pos, e;
	if (q->nheaders == HP_MAX_HEADERS)
		return refuse(h, 431, "too many header fields");
	if (is_ws(h->b[s]))
		return refuse(h, 400, "obsolete line folding");
	int end = line_end(h, s, &e);
	if (end == BAD)
		return BAD;
	struct hp_header *f = &q->headers[q->nheaders];
	int r = field_syntax(h, s, e, end == OK, f);
	if (r != OK)
		return r;
	q->nheaders++;
	h->pos = e + 2;
	return field_apply(h, f);
}

/* What the whole head says: Host in HTTP/1.1, the body, keep-alive. */
static int head_done(struct head *h)
{
	struct hp_request *q = h->req;
	if (q->minor == 1 && !h->host)
		return refuse(h, 400, "HTTP/1.1 request without Host");
	q->body = h->te ? HP_BODY_CHUNKED : h->cl ? HP_BODY_LENGTH : HP_BODY_NONE;
	q->keep_alive = !h->close && (q->minor == 1 || h->keep);
	return OK;
}

/* Reads the header fields from h->pos, then the empty line ending the head. */
static int read_fields(struct head *h)
{
	for (;;) {
		size_t s = h->pos;
		if (s == h->lim)
			return NEED;
		if (h->b[s] == '\n')
			return refuse(h, 400, "bare LF");
		if (h->b[s] == '\r') {
			if (s + 1 == h->lim)
				return NEED;
			if (h->b[s + 1] != '\n')
				return refuse(h, 400, "bare CR");
			h->pos = s + 2;
			return head_done(h);
		}
		int r = read_field(h);
		if (r != OK)
			return r;
	}
}

/* Parses the head at the start of BUF (see http_parse.h). */
ssize_t hp_parse_head(const char *buf, size_t n, size_t max, struct hp_request *req,
		      unsigned *status, const char **why)
{
	struct head h = {
		.b = buf, .lim = n < max ? n : max, .req = req, .status = status, .why = why,
	};
	memset(req, 0, sizeof *req);
	int r = read_request_line(&h);
	if (r == OK)
		r = read_fields(&h);
	if (r == OK)
		return (ssize_t)h.pos;
	if (r == BAD)
		return -1;
	if (n >= max) {
		refuse(&h, 431, "request head larger than the limit");
		return -1;
	}
	return 0;
}

/* ---- the chunked body (RFC 9112 section 7.1) ---- */

enum ck_state {
	CK_SIZE,                     /* chunk-size: 1*HEXDIG */
	CK_EXT_WS,                   /* BWS that must lead to ";" */
	CK_EXT_NAME_START,           /* after ";": BWS, then a name */
	CK_EXT_NAME,
	CK_EXT_NAME_WS,              /* BWS after a name: "=" or ";" */
	CK_EXT_VALUE_START,          /* after "=": BWS, then a token or quoted-string */
	CK_EXT_TOKEN,
	CK_EXT_QUOTED,
	CK_EXT_QUOTED_PAIR,
	CK_EXT_AFTER_VALUE,          /* after a closing quote */
	CK_SIZE_LF,                  /* the LF ending the size line */
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TRAILER,                  /* the start of a trailer line, or of the final CRLF */
	CK_TRAILER_NAME,
	CK_TRAILER_VALUE,
	CK_TRAILER_LF,
	CK_END_LF,                   /* the LF ending the body */
	CK_DONE,
	CK_FAILED,
};

/* Starts decoding a body of at most MAX decoded bytes. */
void hp_chunked_init(struct hp_chunked *c, uint64_t max)
{
	*c = (struct hp_chunked){ .state = CK_SIZE, .max = max };
}

/* A refusal of the body: its status, and WHY in *W. */
static unsigned ck_refuse(const char **w, unsigned status, const char *why)
{
	*w = why;
	return status;
}

/* After a size, extension name or value: ";", BWS or the line's CR. */
static unsigned ck_after(struct hp_chunked *c, char ch, const char **w)
{
	if (ch == ';')
		c->state = CK_EXT_NAME_START;
	else if (is_ws(ch))
		c->state = CK_EXT_WS;
	else if (ch == '\r')
		c->state = CK_SIZE_LF;
	else
		return ck_refuse(w, 400, ch == '\n' ? "bare LF in a chunk size line" :
				 "malformed chunk size or extension");
	return 0;
}

/* One byte of the chunk size. */
static unsigned ck_size(struct hp_chunked *c, char ch, const char **w)
{
	int d = hex_val(ch);
	if (d >= 0) {
		if (c->left > UINT64_MAX >> 4)
			return ck_refuse(w, 400, "chunk size over 64 bits");
		c->left = c->left << 4 | (uint64_t)d;
		return 0;
	}
	if (c->line == 1)
		return ck_refuse(w, 400, "chunk size that is not 1*HEXDIG");
	if (c->left > c->max - c->total)
		return ck_refuse(w, 413, "chunked body larger than the limit");
	return ck_after(c, ch, w);
}

/* Moves C to STATE: 0 (accepted). */
static unsigned ck_go(struct hp_chunked *c, int state)
{
	c->state = state;
	return 0;
}

/* A byte where BWS may come before what OK says: on to NEXT when OK. */
static unsigned ck_bws(struct hp_chunked *c, char ch, bool ok, int next, const char **w)
{
	if (ok)
		return ck_go(c, next);
	return is_ws(ch) ? 0 : ck_refuse(w, 400, "malformed chunk extension");
}

/* A byte of a quoted extension value (RFC 9110 section 5.6.4). */
static unsigned ck_quoted(struct hp_chunked *c, char ch, const char **w)
{
	if (!is_field_char(ch))
		return ck_refuse(w, 400, "control character in a chunk extension");
	if (c->state == CK_EXT_QUOTED_PAIR)
		return ck_go(c, CK_EXT_QUOTED);
	if (ch == '"')
		return ck_go(c, CK_EXT_AFTER_VALUE);
	return ch == '\\' ? ck_go(c, CK_EXT_QUOTED_PAIR) : 0;
}

/* One byte of a chunk extension: *( BWS ";" BWS name [ BWS "=" BWS
 * ( token / quoted-string ) ] ) (RFC 9112 section 7.1.1). */
static unsigned ck_ext(struct hp_chunked *c, char ch, const char **w)
{
	switch (c->state) {
	case CK_EXT_WS:
		return ck_bws(c, ch, ch == ';', CK_EXT_NAME_START, w);
	case CK_EXT_NAME_START:
		return ck_bws(c, ch, is_tchar(ch), CK_EXT_NAME, w);
	case CK_EXT_NAME:
		if (is_tchar(ch))
			return 0;
		if (ch == '=' || is_ws(ch))
			return ck_go(c, ch == '=' ? CK_EXT_VALUE_START : CK_EXT_NAME_WS);
		return ck_after(c, ch, w);
	case CK_EXT_NAME_WS:
		if (ch == ';')
			return ck_go(c, CK_EXT_NAME_START);
		return ck_bws(c, ch, ch == '=', CK_EXT_VALUE_START, w);
	case CK_EXT_VALUE_START:
		if (ch == '"')
			return ck_go(c, CK_EXT_QUOTED);
		return ck_bws(c, ch, is_tchar(ch), CK_EXT_TOKEN, w);
	case CK_EXT_TOKEN:
		return is_tchar(ch) ? 0 : ck_after(c, ch, w);
	case CK_EXT_QUOTED:
	case CK_EXT_QUOTED_PAIR:
		return ck_quoted(c, ch, w);
	default:                     /* CK_EXT_AFTER_VALUE */
		return ck_after(c, ch, w);
	}
}

/* The LF ending the size line: the chunk's data, or the trailer section. */
static unsigned ck_size_lf(struct hp_chunked *c, char ch, const char **w)
{
	if (ch != '\n')
		return ck_refuse(w, 400, "bare CR in a chunk size line");
	c->line = 0;
	c->state = c->left == 0 ? CK_TRAILER : CK_DATA;
	return 0;
}

/* One byte of the trailer section: field lines checked like header fields. */
static unsigned ck_trailer(struct hp_chunked *c, char ch, const char **w)
{
	if (++c->trailer_bytes > HP_LINE_MAX)
		return ck_refuse(w, 400, "trailer section longer than 8 KiB");
	switch (c->state) {
	case CK_TRAILER:
		if (ch == '\r' || is_tchar(ch))
			return ck_go(c, ch == '\r' ? CK_END_LF : CK_TRAILER_NAME);
		return ck_refuse(w, 400, is_ws(ch) ? "obsolete line folding in the trailer section" :
				 "malformed trailer field");
	case CK_TRAILER_NAME:
		if (is_tchar(ch) || ch == ':')
			return ck_go(c, ch == ':' ? CK_TRAILER_VALUE : CK_TRAILER_NAME);
		return ck_refuse(w, 400, is_ws(ch) ? "whitespace between a trailer name and its colon" :
				 "malformed trailer field");
	case CK_TRAILER_VALUE:
		if (ch == '\r' || is_field_char(ch))
			return ck_go(c, ch == '\r' ? CK_TRAILER_LF : CK_TRAILER_VALUE);
		return ck_refuse(w, 400, "control character in a trailer field");
	case CK_TRAILER_LF:
		c->line = 0;
		c->state = CK_TRAILER;
		return ch == '\n' ? 0 : ck_refuse(w, 400, "bare CR in the trailer section");
	default:                     /* CK_END_LF */
		c->state = CK_DONE;
		return ch == '\n' ? 0 : ck_refuse(w, 400, "bare CR after the trailer section");
	}
}

/* One byte outside chunk data; a status when it is refused. */
static unsigned ck_byte(struct hp_chunked *c, char ch, const char **w)
{
	if (c->state == CK_DATA_CR || c->state == CK_DATA_LF) {
		bool want = c->state == CK_DATA_CR ? ch == '\r' : ch == '\n';
		c->state = c->state == CK_DATA_CR ? CK_DATA_LF : CK_SIZE;
		return want ? 0 : ck_refuse(w, 400, "chunk data not followed by CRLF");
	}
	if (++c->line > HP_LINE_MAX)
		return ck_refuse(w, 400, "chunk size or trailer line longer than 8 KiB");
	if (c->state == CK_SIZE)
		return ck_size(c, ch, w);
	if (c->state == CK_SIZE_LF)
		return ck_size_lf(c, ch, w);
	if (c->state >= CK_TRAILER)
		return ck_trailer(c, ch, w);
	return ck_ext(c, ch, w);
}

/* Hands N bytes of chunk data at P to DATA. */
static int ck_data(struct hp_chunked *c, const char *p, size_t n, hp_data_fn data, void *arg)
{
	if (data && data(arg, p, n) != 0)
		return -1;
	c->left -= n;
	c->total += n;
	if (c->left == 0)
		c->state = CK_DATA_CR;
	return 0;
}

/* Feeds IN (N bytes) to the decoder (see http_parse.h). */
ssize_t hp_chunked_feed(struct hp_chunked *c, const char *in, size_t n, hp_data_fn data,
			void *arg, bool *done, unsigned *status, const char **why)
{
	size_t i = 0;
	unsigned st;
	*done = false;
	if (c->state == CK_FAILED) {
		*status = 400;
		*why = "chunked body refused already";
		return -1;
	}
	while (i < n && c->state != CK_DONE) {
		if (c->state == CK_DATA) {
			size_t k = n - i < c->left ? n - i : (size_t)c->left;
			if (ck_data(c, in + i, k, data, arg) != 0) {
				c->state = CK_FAILED;
				return -2;
			}
			i += k;
		} else if ((st = ck_byte(c, in[i++], why)) != 0) {
			c->state = CK_FAILED;
			*status = st;
			return -1;
		}
	}
	*done = c->state == CK_DONE;
	return (ssize_t)i;
}
