/*
 * test_http_parse.c - unit tests for src/front/http_parse.c: the strict
 * HTTP/1.1 request line, header section and chunked body. Every rule has
 * a refusal and an acceptance; every head is also read at each length up
 * to its own (the bytes arriving one by one), which must give 0 until it
 * is complete, or the same refusal as the whole; every body is decoded
 * whole, split at each point, and byte by byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_parse.h"

#define MAX 65536                /* the head's limit, unless a test says */
#define L(s) s, sizeof(s) - 1    /* a literal and its length (NULs included) */

static struct hp_request req;
static char text[32768];

/* T (N bytes) printable, for failure messages (static, truncated). */
static const char *esc(const char *t, size_t n)
{
	static char out[512];
	size_t o = 0;
	for (size_t i = 0; i < n && o + 8 < sizeof out; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c == '\r' || c == '\n')
			o += (size_t)snprintf(out + o, sizeof out - o, "%s", c == '\r' ? "\\r" : "\\n");
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	return out;
}

/* hp_parse_head on the first K bytes of T with limit MAX_; *ST its status. */
static ssize_t parse_k(const char *t, size_t k, size_t max, unsigned *st)
{
	const char *why = NULL;
	*st = 0;
	ssize_t r = hp_parse_head(t, k, max, &req, st, &why);
	if (r == -1)
		assert_non_null(why);
	return r;
}

/* T (N bytes) is one head under limit MAX_: incomplete at every shorter
 * length, then read whole; REQ holds it. */
static void accepted_max(const char *t, size_t n, size_t max)
{
	unsigned st;
	for (size_t k = 0; k < n; k++) {
		ssize_t r = parse_k(t, k, max, &st);
		if (r != 0) {
			print_error("\"%s\" at %zu bytes: %zd (%u), want 0\n", esc(t, n), k, r, st);
			fail();
		}
	}
	ssize_t r = parse_k(t, n, max, &st);
	if (r != (ssize_t)n) {
		print_error("\"%s\": %zd (%u), want %zu\n", esc(t, n), r, st, n);
		fail();
	}
}

/* T (N bytes) is one head: see accepted_max. */
static void accepted_n(const char *t, size_t n)
{
	accepted_max(t, n, MAX);
}

/* The NUL-terminated T is one head. */
static void accepted(const char *t)
{
	accepted_n(t, strlen(t));
}

/* T (N bytes) is refused with STATUS under limit MAX_; at every shorter
 * length it is incomplete or refused with STATUS already. */
static void refused_max(const char *t, size_t n, size_t max, unsigned status)
{
	unsigned st;
	for (size_t k = 0; k <= n; k++) {
		ssize_t r = parse_k(t, k, max, &st);
		if ((k == n || r != 0) && (r != -1 || st != status)) {
			print_error("\"%s\" at %zu bytes: %zd (%u), want -1 (%u)\n", esc(t, n), k, r,
				    st, status);
			fail();
		}
	}
}

/* T (N bytes) is refused with STATUS. */
static void refused_n(const char *t, size_t n, unsigned status)
{
	refused_max(t, n, MAX, status);
}

/* The NUL-terminated T is refused with STATUS. */
static void refused(const char *t, unsigned status)
{
	refused_n(t, strlen(t), status);
}

/* T's first K bytes (a head not complete yet) are refused with STATUS already. */
static void early_n(const char *t, size_t k, unsigned status)
{
	unsigned st;
	assert_int_equal(parse_k(t, k, MAX, &st), -1);
	assert_int_equal(st, status);
}

/* The NUL-terminated T is refused with STATUS already. */
static void early(const char *t, unsigned status)
{
	early_n(t, strlen(t), status);
}

/* An HTTP/1.1 request with Host and FIELDS (each ending in CRLF), in text. */
static const char *with(const char *fields)
{
	snprintf(text, sizeof text, "POST /mcp HTTP/1.1\r\nHost: h\r\n%s\r\n", fields);
	return text;
}

/* An HTTP/1.0 request without Host, with FIELDS, in text. */
static const char *with10(const char *fields)
{
	snprintf(text, sizeof text, "POST /mcp HTTP/1.0\r\n%s\r\n", fields);
	return text;
}

/* True when span S is the text T. */
static bool is(struct hp_span s, const char *t)
{
	return s.n == strlen(t) && memcmp(s.p, t, s.n) == 0;
}

/* ---- the request line ---- */

/* A plain request: every part where it should be. */
static void test_request_line_ok(void **state)
{
	(void)state;
	const char *t = "GET /a/b?x=1&y=%41 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\r\n";
	accepted(t);
	assert_true(is(req.method, "GET"));
	assert_true(is(req.target, "/a/b?x=1&y=%41"));
	assert_true(is(req.path, "/a/b"));
	assert_true(is(req.query, "x=1&y=%41"));
	assert_int_equal(req.minor, 1);
	assert_int_equal(req.nheaders, 2);
	assert_true(is(req.headers[1].name, "Accept"));
	assert_true(is(req.headers[1].value, "*/*"));
	assert_true(is(req.host, "example.com:8080"));
	assert_int_equal(req.body, HP_BODY_NONE);
	assert_true(req.keep_alive);
	assert_false(req.expect_continue);
	/* spans point into the input */
	assert_ptr_equal(req.method.p, t);
	assert_ptr_equal(req.target.p, t + 4);
	/* methods are tokens, case-sensitive, none is special but OPTIONS for "*" */
	accepted("get / HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.method, "get"));
	accepted("M-SEARCH! / HTTP/1.1\r\nHost: h\r\n\r\n");
	/* no query, and an empty one */
	accepted("GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_int_equal(req.query.n, 0);
	accepted("GET /x? HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.path, "/x"));
	assert_int_equal(req.query.n, 0);
}

/* Anything but method SP target SP version CRLF is 400. */
static void test_request_line_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET\r\n\r\n",                          /* one part */
		"GET /\r\n\r\n",                        /* two parts */
		"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",   /* two spaces */
		"GET /  HTTP/1.1\r\nHost: h\r\n\r\n",
		" GET / HTTP/1.1\r\nHost: h\r\n\r\n",   /* leading space */
		"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",   /* trailing space */
		"GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n",   /* HTAB as separator */
		"GET /\tHTTP/1.1\r\nHost: h\r\n\r\n",
		"G@T / HTTP/1.1\r\nHost: h\r\n\r\n",    /* not a token */
		"GE(T / HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n",
		"\r\n\r\n",
		":\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(bad[i], 400);
	refused_n(L("G\0T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
	refused_n(L("GET /\x80 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

/* origin-form, absolute-form (http, https, any case), "*" for OPTIONS. */
static void test_target_forms(void **state)
{
	(void)state;
	accepted("GET http://example.com/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n");
	assert_true(is(req.target, "http://example.com/p?q"));
	assert_true(is(req.path, "/p"));
	assert_true(is(req.query, "q"));
	accepted("GET https://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
	assert_true(is(req.path, "/"));            /* an empty path is "/" */
	assert_int_equal(req.query.n, 0);
	accepted("GET HTTPS://[::1]:8443?a=b HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
	assert_true(is(req.path, "/"));
	assert_true(is(req.query, "a=b"));
	accepted("GET Http://127.0.0.1:8080/x/y HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.path, "/x/y"));
	accepted("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.path, "*"));
	assert_int_equal(req.query.n, 0);
	/* every character RFC 3986 allows in a path and a query */
	accepted("GET /az09-._~!$&'()*+,;=:@%2F//?/?:@%aa HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.query, "/?:@%aa"));

	static const char *const bad[] = {
		"GET * HTTP/1.1\r\nHost: h\r\n\r\n",           /* "*" is for OPTIONS */
		"options * HTTP/1.1\r\nHost: h\r\n\r\n",
		"OPTIONS *x HTTP/1.1\r\nHost: h\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n",  /* authority-form */
		"GET ftp://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http:/x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http:// HTTP/1.1\r\nHost: h\r\n\r\n",     /* no host */
		"GET http://:80/ HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n", /* userinfo */
		"GET http://h:8x/ HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http://[::1/ HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http://[zz]/ HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET ?q HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a#f HTTP/1.1\r\nHost: h\r\n\r\n",        /* a fragment */
		"GET /a\"b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a<b> HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a\\b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a{b} HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a|b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a^b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a`b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n",       /* bad pct-encodings */
		"GET /a%4 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a% HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a?%g0 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /[x] HTTP/1.1\r\nHost: h\r\n\r\n",        /* brackets outside a host */
		"GET http://h/[x] HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(bad[i], 400);
	accepted("OPTIONS /* HTTP/1.1\r\nHost: h\r\n\r\n");   /* "*" is a sub-delim */
	refused_n(L("GET /a\0 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

/* A request-target of HP_MAX_TARGET bytes is read; one more is 414, as
 * soon as that byte is in. */
static void test_target_length(void **state)
{
	(void)state;
	static char t[HP_MAX_TARGET + 64];
	memcpy(t, "GET /", 5);
	memset(t + 5, 'a', HP_MAX_TARGET - 1);
	size_t n = 4 + HP_MAX_TARGET;
	strcpy(t + n, " HTTP/1.1\r\nHost: h\r\n\r\n");
	unsigned st;
	assert_int_equal(parse_k(t, strlen(t), MAX, &st), (ssize_t)strlen(t));
	assert_int_equal(req.target.n, HP_MAX_TARGET);
	strcpy(t + n, "a HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_int_equal(parse_k(t, n, MAX, &st), 0);
	early_n(t, n + 1, 414);
	refused(t, 414);
}

/* HTTP/1.x: 1.0 is 1.0, 1.1 and above are 1.1; another major is 505;
 * anything not "HTTP/" DIGIT "." DIGIT is 400. */
static void test_version(void **state)
{
	(void)state;
	accepted("GET / HTTP/1.0\r\n\r\n");
	assert_int_equal(req.minor, 0);
	assert_int_equal(req.host.n, 0);
	accepted("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_int_equal(req.minor, 1);
	accepted("GET / HTTP/1.2\r\nHost: h\r\n\r\n");
	assert_int_equal(req.minor, 1);
	accepted("GET / HTTP/1.9\r\nHost: h\r\n\r\n");
	assert_int_equal(req.minor, 1);
	refused("GET / HTTP/1.2\r\n\r\n", 400);     /* read as 1.1: Host needed */
	refused("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505);
	refused("GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505);
	refused("GET / HTTP/3.1\r\n\r\n", 505);
	/* the HTTP/2 preface: "*" is for OPTIONS, found before the version */
	refused("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400);
	static const char *const bad[] = {
		"GET / HTTP/1.10\r\nHost: h\r\n\r\n",
		"GET / HTTP/11\r\nHost: h\r\n\r\n",
		"GET / HTTP/1\r\nHost: h\r\n\r\n",
		"GET / http/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/a.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.x\r\nHost: h\r\n\r\n",
		"GET / HTTP/1,1\r\nHost: h\r\n\r\n",
		"GET / HTTPS/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/2.0x\r\nHost: h\r\n\r\n",  /* malformed beats the major */
		"GET / HTTP/1.1\r\r\nHost: h\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(bad[i], 400);
}

/* One CRLF before the request line is skipped and counted; not two. */
static void test_leading_crlf(void **state)
{
	(void)state;
	accepted("\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
	assert_true(is(req.method, "GET"));
	refused("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	refused("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	refused("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
	refused(" \r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

/* Lines end in CRLF: a bare LF or CR anywhere in the head is 400. */
static void test_line_endings(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET / HTTP/1.1\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\rHost: h\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n\n",
		"GET / HTTP/1.1\r\nHost: h\r\n\r\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX: a\nb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n\nX: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX\n: a\r\n\r\n",
		"GET / HTTP/1.1\n\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(bad[i], 400);
	accepted("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\r\n");
}

/* Field lines: token ":" OWS value OWS; the value's bytes. */
static void test_field_syntax(void **state)
{
	(void)state;
	accepted(with("X-A:v\r\nX-B:  a b\t \r\nX-C: \t\r\nX-D: a\tb\r\n"
		      "!#$%&'*+-.^_`|~09az: tchar\r\n"));
	assert_int_equal(req.nheaders, 6);
	assert_true(is(req.headers[1].value, "v"));
	assert_true(is(req.headers[2].value, "a b"));       /* OWS is not part of the value */
	assert_true(is(req.headers[3].value, ""));
	assert_true(is(req.headers[4].value, "a\tb"));
	assert_true(is(req.headers[5].name, "!#$%&'*+-.^_`|~09az"));
	accepted(with("X-O: caf\xc3\xa9 \xff\x80" "end\r\n"));   /* obs-text */
	assert_true(is(req.headers[1].value, "caf\xc3\xa9 \xff\x80" "end"));
	accepted(with("X: \"quoted, \\\" value\" (comment) {} [] <>\r\n"));

	refused(with("X-A : v\r\n"), 400);         /* whitespace before the colon */
	refused(with("X-A\t: v\r\n"), 400);
	refused(with("X-A: v\r\n continued\r\n"), 400);   /* obs-fold */
	refused(with("X-A: v\r\n\tcontinued\r\n"), 400);
	refused("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
	refused(with("X(A): v\r\n"), 400);         /* not a token */
	refused(with("X/A: v\r\n"), 400);
	refused(with("X\x80: v\r\n"), 400);
	refused(with(": v\r\n"), 400);             /* empty name */
	refused(with("X-A\r\n"), 400);             /* no colon */
	refused(with("X-A v\r\n"), 400);
	refused(with("X-A: a\x7f" "b\r\n"), 400);  /* DEL */
	refused(with("X-A: a\x01" "b\r\n"), 400);
	refused(with("X-A: a\x1f\r\n"), 400);
	refused(with("X-A: \x0b\r\n"), 400);
	refused_n(L("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n"), 400);
	refused_n(L("GET / HTTP/1.1\r\nHost: h\r\nX-\0: ab\r\n\r\n"), 400);
}

/* Host: needed in HTTP/1.1, once, a host with an optional port. */
static void test_host(void **state)
{
	(void)state;
	static const char *const good[] = {
		"h", "example.com", "EXAMPLE.com:80", "127.0.0.1", "127.0.0.1:8080", "[::1]",
		"[::1]:8080", "[2001:db8::1]", "[::ffff:1.2.3.4]:1", "a%41b", "a-b_c~d.e",
		"!$&'()*+,;=", "h:", "h:65536999",
	};
	static const char *const bad[] = {
		"", ":80", "a b", "a/b", "u@h", "h:8x", "h:-1", "[::1", "[::1]x", "[zz]",
		"[1.2.3.4]", "[v1.x]", "::1", "h:80:80", "a%4", "a%zz", "h?", "h#", "\"h\"",
		"[::1]:8x", "[]",
	};
	char f[128];
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		snprintf(f, sizeof f, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
		accepted(f);
		assert_true(is(req.host, good[i]));
		assert_true(is(*hp_header(&req, "host"), good[i]));
	}
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(f, sizeof f, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
		refused(f, 400);
		snprintf(f, sizeof f, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", bad[i]);
		refused(f, 400);
	}
	accepted("GET / HTTP/1.1\r\nhOsT:  h \r\n\r\n");
	assert_true(is(req.host, "h"));
	refused("GET / HTTP/1.1\r\n\r\n", 400);                    /* none */
	refused("GET / HTTP/1.1\r\nX: h\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n", 400);      /* two */
	refused("GET / HTTP/1.1\r\nHost: h\r\nhost: g\r\n\r\n", 400);
	refused("GET / HTTP/1.0\r\nHost: h\r\nHost: h\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nHost: h, g\r\n\r\n", 400);
	accepted("GET / HTTP/1.0\r\n\r\n");                        /* HTTP/1.0 may go without */
	assert_int_equal(req.host.n, 0);
	accepted("GET / HTTP/1.0\r\nHost: h\r\n\r\n");
	assert_true(is(req.host, "h"));
}

/* Content-Length: 1*DIGIT up to 2^63 - 1, repeated only with the same value. */
static void test_content_length(void **state)
{
	(void)state;
	static const struct { const char *f; uint64_t v; } good[] = {
		{ "Content-Length: 5\r\n", 5 },
		{ "Content-Length: 0\r\n", 0 },
		{ "content-length:  42 \r\n", 42 },
		{ "Content-Length: 007\r\n", 7 },
		{ "Content-Length: 9223372036854775807\r\n", INT64_MAX },
		{ "Content-Length: 5\r\nContent-Length: 5\r\n", 5 },
		{ "Content-Length: 5, 5\r\n", 5 },
		{ "Content-Length: 5,5 ,  5\r\nContent-Length: 05\r\n", 5 },
	};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		accepted(with(good[i].f));
		assert_int_equal(req.body, HP_BODY_LENGTH);
		assert_true(req.length == good[i].v);
	}
	accepted(with10("Content-Length: 3\r\n"));
	assert_int_equal(req.body, HP_BODY_LENGTH);
	static const char *const bad[] = {
		"Content-Length:\r\n", "Content-Length: \r\n", "Content-Length: +5\r\n",
		"Content-Length: -1\r\n", "Content-Length: 0x5\r\n", "Content-Length: 5a\r\n",
		"Content-Length: 5 5\r\n", "Content-Length: 5.0\r\n", "Content-Length: 1e3\r\n",
		"Content-Length: 9223372036854775808\r\n",
		"Content-Length: 18446744073709551616\r\n",
		"Content-Length: 99999999999999999999999\r\n",
		"Content-Length: 5, 6\r\n", "Content-Length: 5\r\nContent-Length: 6\r\n",
		"Content-Length: 5\r\nContent-Length: 5, 6\r\n", "Content-Length: 5,\r\n",
		"Content-Length: ,5\r\n", "Content-Length: 5,,5\r\n", "Content-Length: \"5\"\r\n",
		"Content-Length: 5\r\nContent-Length: \r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(with(bad[i]), 400);
	accepted(with(""));
	assert_int_equal(req.body, HP_BODY_NONE);
}

/* Transfer-Encoding: HTTP/1.1 only, once, never with Content-Length,
 * ending in chunked; other codings before it are 501. */
static void test_transfer_encoding(void **state)
{
	(void)state;
	static const char *const good[] = {
		"Transfer-Encoding: chunked\r\n", "Transfer-Encoding: Chunked\r\n",
		"transfer-encoding: CHUNKED\r\n", "Transfer-Encoding: chunked \r\n",
		"Transfer-Encoding:\tchunked\t\r\n", "Transfer-Encoding:chunked\r\n",
	};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		accepted(with(good[i]));
		assert_int_equal(req.body, HP_BODY_CHUNKED);
	}
	static const char *const bad[] = {
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\ntransfer-encoding: gzip, chunked\r\n",
		"Transfer-Encoding: xchunked\r\n", "Transfer-Encoding: chunkedx\r\n",
		"Transfer-Encoding: chunked, identity\r\n", "Transfer-Encoding: chunked, gzip\r\n",
		"Transfer-Encoding: chunked;x=1\r\n", "Transfer-Encoding: chunked ; x=1\r\n",
		"Transfer-Encoding: chunked, chunked\r\n", "Transfer-Encoding: chunked chunked\r\n",
		"Transfer-Encoding: gzip\r\n", "Transfer-Encoding: identity\r\n",
		"Transfer-Encoding:\r\n", "Transfer-Encoding: ,chunked\r\n",
		"Transfer-Encoding: chunked,\r\n", "Transfer-Encoding: gzip,,chunked\r\n",
		"Transfer-Encoding: gzip;, chunked\r\n", "Transfer-Encoding: gzip;q, chunked\r\n",
		"Transfer-Encoding: gzip;q=, chunked\r\n", "Transfer-Encoding: gzip;=1, chunked\r\n",
		"Transfer-Encoding: gzip;q=\"1, chunked\r\n", "Transfer-Encoding: gzip q=1, chunked\r\n",
		"Transfer-Encoding: \"chunked\"\r\n", "Transfer-Encoding: chunk\xe9" "d\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		refused(with(bad[i]), 400);
	refused(with10("Transfer-Encoding: chunked\r\n"), 400);
	static const char *const unimplemented[] = {
		"Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: identity, chunked\r\n",
		"Transfer-Encoding: GZIP ,chunked\r\n", "Transfer-Encoding: deflate, gzip, chunked\r\n",
		"Transfer-Encoding: gzip;q=1 ; x = \"a,b\\\"c\", chunked\r\n",
	};
	for (size_t i = 0; i < sizeof unimplemented / sizeof *unimplemented; i++)
		refused(with(unimplemented[i]), 501);
}

/* Connection: close ends the connection; HTTP/1.0 keeps it only with keep-alive. */
static void test_connection(void **state)
{
	(void)state;
	static const struct { const char *t; bool keep; } cases[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n\r\n", true },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", false },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: , ,close,\r\n\r\n", false },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", true },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection:\r\n\r\n", true },
		{ "GET / HTTP/1.0\r\n\r\n", false },
		{ "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true },
		{ "GET / HTTP/1.0\r\nConnection: KEEP-ALIVE\r\n\r\n", true },
		{ "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false },
		{ "GET / HTTP/1.0\r\nConnection: upgrade\r\n\r\n", false },
		{ "GET / HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n", false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		accepted(cases[i].t);
		assert_int_equal(req.keep_alive, cases[i].keep);
	}
	refused("GET / HTTP/1.1\r\nHost: h\r\nConnection: clo se\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nHost: h\r\nConnection: \"close\"\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nHost: h\r\nConnection: close;x\r\n\r\n", 400);
}

/* Expect: 100-continue, any case; anything else 417; ignored in HTTP/1.0. */
static void test_expect(void **state)
{
	(void)state;
	accepted(with("Expect: 100-continue\r\n"));
	assert_true(req.expect_continue);
	accepted(with("expect:  100-Continue \r\n"));
	assert_true(req.expect_continue);
	accepted(with(""));
	assert_false(req.expect_continue);
	accepted(with10("Expect: 100-continue\r\n"));
	assert_false(req.expect_continue);
	refused(with("Expect: 200-ok\r\n"), 417);
	refused(with("Expect: 100-continue, foo\r\n"), 417);
	refused(with("Expect: 100-continuex\r\n"), 417);
	refused(with("Expect:\r\n"), 417);
	refused(with("Expect: 100-continue\r\nExpect: x\r\n"), 417);
	refused(with10("Expect: x\r\n"), 417);
	refused(with("Expect: 100-\x01\r\n"), 400);  /* a malformed line is 400 first */
}

/* HP_MAX_HEADERS fields are read, one more is 431; a head not complete
 * within MAX bytes is 431 once MAX bytes are in, 0 before. */
static void test_limits(void **state)
{
	(void)state;
	char f[2048] = "";
	size_t o = 0;
	for (int i = 1; i < HP_MAX_HEADERS; i++)
		o += (size_t)snprintf(f + o, sizeof f - o, "X-%d: %d\r\n", i, i);
	accepted(with(f));
	assert_int_equal(req.nheaders, HP_MAX_HEADERS);
	assert_true(is(req.headers[HP_MAX_HEADERS - 1].name, "X-63"));
	snprintf(f + o, sizeof f - o, "X-64: 64\r\n");
	refused(with(f), 431);
	snprintf(f + o, sizeof f - o, " folded\r\n");   /* the 65th line is counted first */
	refused(with(f), 431);

	const char *t = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
	size_t n = strlen(t);
	accepted_max(t, n, n);                         /* exactly MAX bytes */
	refused_max(t, n, n - 1, 431);
	unsigned st;
	assert_int_equal(parse_k(t, n - 2, n - 1, &st), 0);
	assert_int_equal(parse_k(t, n - 1, n - 1, &st), -1);
	assert_int_equal(st, 431);
	assert_int_equal(parse_k(t, n, 0, &st), -1);
	assert_int_equal(st, 431);
	assert_int_equal(parse_k(t, 0, 0, &st), -1);
	/* bytes past MAX do not count, even a complete head */
	assert_int_equal(parse_k(t, n, 10, &st), -1);
	assert_int_equal(st, 431);
	/* an error before MAX is still what it is */
	refused_max(L("GET / HTTP/1.1\r\nX\n: a\r\n\r\n"), 20, 400);
}

/* Refusals come as soon as their bytes are in: a slow sender of garbage
 * is refused at once. */
static void test_early(void **state)
{
	(void)state;
	early_n(L("\0"), 400);
	early("\x16\x03\x01", 400);                 /* TLS to a plain port */
	early("GET /\n", 400);
	early("GET / HTTP/1.1\n", 400);
	early("GET / HTTP/1.1\r\nX: a\rb", 400);
	early("GET / HTTP/1.1\r\nX: a\x01", 400);
	early("GET /\x7f", 400);
	early("GET / HTTP/2.0\r\n", 505);
	early("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n", 501);
	early("GET / HTTP/1.1\r\nHost: h\r\nExpect: x\r\n", 417);
	unsigned st;
	assert_int_equal(parse_k("GET / HTTP/1.1\r\nX: a\r", 21, MAX, &st), 0);
}

/* Incomplete heads are 0 however they are cut (each length), and a head
 * is read the same whatever follows it. */
static void test_incremental(void **state)
{
	(void)state;
	const char *t = "\r\nPOST http://[::1]:9/mcp?x=%20 HTTP/1.1\r\nHost: [::1]:9\r\n"
			"Content-Type: application/json\r\nContent-Length: 2, 2\r\n"
			"Connection: keep-alive\r\nExpect: 100-continue\r\nX-E:\r\n\r\n";
	size_t n = strlen(t);
	accepted(t);
	assert_int_equal(req.body, HP_BODY_LENGTH);
	assert_true(req.length == 2);
	assert_true(req.expect_continue);
	assert_true(req.keep_alive);
	snprintf(text, sizeof text, "%s{}GARBAGE\n\n", t);
	unsigned st;
	assert_int_equal(parse_k(text, strlen(text), MAX, &st), (ssize_t)n);
	assert_int_equal(req.nheaders, 6);
	assert_true(is(req.path, "/mcp"));
	assert_true(is(req.query, "x=%20"));
}

/* Pipelined requests: the first head's length, then the next from there. */
static void test_pipelined(void **state)
{
	(void)state;
	const char *a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
	const char *b = "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
	const char *c = "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
	snprintf(text, sizeof text, "%s%s%s", a, b, c);
	size_t n = strlen(text), off = 0;
	unsigned st;
	ssize_t r = parse_k(text, n, MAX, &st);
	assert_int_equal(r, (ssize_t)strlen(a));
	assert_true(is(req.path, "/a"));
	off += (size_t)r;
	r = parse_k(text + off, n - off, MAX, &st);
	assert_int_equal(r, (ssize_t)strlen(b) - 3);
	assert_true(is(req.path, "/b"));
	assert_true(req.length == 3);
	off += (size_t)r + req.length;
	r = parse_k(text + off, n - off, MAX, &st);
	assert_int_equal(r, (ssize_t)strlen(c));
	assert_true(is(req.path, "/c"));
	assert_false(req.keep_alive);
}

/* hp_header finds the first field by name in any case; hp_span_ieq. */
static void test_lookup(void **state)
{
	(void)state;
	accepted(with("Accept: a\r\naccept: b\r\nX-Empty:\r\n"));
	const struct hp_span *v = hp_header(&req, "ACCEPT");
	assert_non_null(v);
	assert_true(is(*v, "a"));
	assert_non_null(hp_header(&req, "x-empty"));
	assert_int_equal(hp_header(&req, "x-empty")->n, 0);
	assert_null(hp_header(&req, "X-Empt"));
	assert_null(hp_header(&req, "X-Emptyy"));
	assert_null(hp_header(&req, "Content-Length"));
	assert_true(hp_span_ieq((struct hp_span){ "KeeP-alive", 10 }, "keep-ALIVE"));
	assert_true(hp_span_ieq((struct hp_span){ "", 0 }, ""));
	assert_true(hp_span_ieq((struct hp_span){ "abcdef", 3 }, "ABC"));
	assert_false(hp_span_ieq((struct hp_span){ "abc", 3 }, "abcd"));
	assert_false(hp_span_ieq((struct hp_span){ "abcd", 4 }, "abc"));
	assert_false(hp_span_ieq((struct hp_span){ "a[c", 3 }, "a{c"));   /* not a case pair */
	assert_false(hp_span_ieq((struct hp_span){ "a@c", 3 }, "a`c"));
	assert_false(hp_span_ieq((struct hp_span){ "a\0c", 3 }, "a"));
}

/* ---- the chunked body ---- */

struct sink {
	char out[65536];
	size_t n;
	size_t stop_at;              /* nonzero: refuse once this many bytes are in */
};

/* Collects decoded bytes into the sink ARG. */
static int collect(void *arg, const char *p, size_t n)
{
	struct sink *s = arg;
	assert_true(n > 0);
	assert_true(s->n + n <= sizeof s->out);
	memcpy(s->out + s->n, p, n);
	s->n += n;
	return s->stop_at && s->n >= s->stop_at;
}

/* The outcome of decoding some bytes. */
struct outcome {
	ssize_t r;                   /* bytes consumed, or -1 / -2 */
	unsigned status;
	bool done;
	struct sink s;
};

/* Feeds T (N bytes) to a fresh decoder under MAX_ in pieces cut at CUT
 * (0: none) or of STEP bytes (0: whole), into *O. */
static void feed(const char *t, size_t n, uint64_t max, size_t cut, size_t step,
		 struct outcome *o)
{
	struct hp_chunked c;
	const char *why = NULL;
	size_t off = 0;
	hp_chunked_init(&c, max);
	memset(o, 0, sizeof *o);
	while (!o->done) {
		size_t k = step ? step : cut > off ? cut - off : n - off;
		k = k < n - off ? k : n - off;
		o->r = hp_chunked_feed(&c, t + off, k, collect, &o->s, &o->done, &o->status, &why);
		if (o->r < 0) {
			assert_true(o->r == -2 || why != NULL);
			return;
		}
		assert_true(o->done || (size_t)o->r == k);
		off += (size_t)o->r;
		if (off == n)
			break;
	}
	o->r = (ssize_t)off;
	assert_true(c.total == o->s.n);
}

/* T (N bytes) gives the same outcome as REF under MAX_ however it is cut. */
static void same_cut_anyhow(const char *t, size_t n, uint64_t max, const struct outcome *ref)
{
	static struct outcome o;
	for (size_t cut = 0; cut <= n + 1; cut++) {
		feed(t, n, max, cut, cut > n ? 1 : 0, &o);
		if (o.r != ref->r || o.status != ref->status || o.done != ref->done ||
		    o.s.n != ref->s.n || memcmp(o.s.out, ref->s.out, o.s.n) != 0) {
			print_error("\"%s\" cut at %zu: %zd (%u) done %d, whole %zd (%u) done %d\n",
				    esc(t, n), cut, o.r, o.status, o.done, ref->r, ref->status,
				    ref->done);
			fail();
		}
	}
}

/* T (N bytes) decodes to WANT (W bytes) consuming USED bytes, done; split
 * anywhere and byte by byte alike. */
static void decodes(const char *t, size_t n, uint64_t max, const char *want, size_t w, size_t used)
{
	static struct outcome o;
	feed(t, n, max, 0, 0, &o);
	if (o.r != (ssize_t)used || !o.done) {
		print_error("\"%s\": %zd (%u) done %d, want %zu done\n", esc(t, n), o.r, o.status,
			    o.done, used);
		fail();
	}
	assert_int_equal(o.s.n, w);
	assert_memory_equal(o.s.out, want, w);
	same_cut_anyhow(t, n, max, &o);
}

/* T (N bytes) is refused with STATUS under MAX_, however it is cut. */
static void body_refused(const char *t, size_t n, uint64_t max, unsigned status)
{
	static struct outcome o;
	feed(t, n, max, 0, 0, &o);
	if (o.r != -1 || o.status != status) {
		print_error("\"%s\": %zd (%u), want -1 (%u)\n", esc(t, n), o.r, o.status, status);
		fail();
	}
	same_cut_anyhow(t, n, max, &o);
}

/* T (N bytes) is fine so far but not done, however it is cut. */
static void body_pending(const char *t, size_t n, uint64_t max)
{
	static struct outcome o;
	feed(t, n, max, 0, 0, &o);
	assert_int_equal(o.r, (ssize_t)n);
	assert_false(o.done);
	same_cut_anyhow(t, n, max, &o);
}

#define DECODES(t, want) decodes(L(t), UINT64_MAX, L(want), sizeof(t) - 1)

/* Chunks of any size, hex in either case, then the last chunk. */
static void test_chunked_ok(void **state)
{
	(void)state;
	DECODES("5\r\nhello\r\n0\r\n\r\n", "hello");
	DECODES("0\r\n\r\n", "");
	DECODES("1\r\na\r\n2\r\nbc\r\n3\r\ndef\r\n0\r\n\r\n", "abcdef");
	DECODES("A\r\n0123456789\r\na\r\n0123456789\r\n000\r\n\r\n", "01234567890123456789");
	DECODES("00000000000000000000005\r\nhe\r\nl\r\n0\r\n\r\n", "he\r\nl");
	decodes(L("3\r\n\0\r\n\r\n0\r\n\r\n"), UINT64_MAX, L("\0\r\n"), 13);   /* data is data */
	body_pending(L("5\r\nhel"), UINT64_MAX);
	body_pending(L("5\r\nhello\r\n0\r\n"), UINT64_MAX);
	body_pending(L("ffffffffffffffff\r\n"), UINT64_MAX);    /* the largest size */
	body_pending(L("0000000000000000ffffffffffffffff\r\n"), UINT64_MAX);
}

/* Extensions: ;name[=token or quoted-string], BWS around ";" and "=". */
static void test_chunked_extensions(void **state)
{
	(void)state;
	DECODES("5;a\r\nhello\r\n0;b=c\r\n\r\n", "hello");
	DECODES("5 ; a = b \t;c;d=\"x;y\\\"z\"\r\nhello\r\n0\r\n\r\n", "hello");
	DECODES("5;a=\"\"\r\nhello\r\n0\r\n\r\n", "hello");
	DECODES("5\t;a\t=\t\"\xff\t\"\r\nhello\r\n0\r\n\r\n", "hello");
	DECODES("5;!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~\r\nhello\r\n0\r\n\r\n", "hello");
	static const char *const bad[] = {
		"5;\r\nhello\r\n0\r\n\r\n", "5 \r\nhello\r\n0\r\n\r\n", "5;a=\r\nhello\r\n",
		"5;a \r\nhello\r\n", "5;a=b \r\nhello\r\n", "5;=b\r\nhello\r\n", "5;a=b=c\r\n",
		"5;a=\"x\r\nhello\r\n", "5;a=\"x\"y\r\n", "5;a=(b)\r\n", "5;a==b\r\n", "5;;a\r\n",
		"5,a\r\n", "5;a=\"\x01\"\r\n", "5;a=\"\\\x7f\"\r\n", "5;a b\r\n", "5 5\r\n",
		"5;a=\"x\"\"y\"\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		body_refused(bad[i], strlen(bad[i]), UINT64_MAX, 400);
	body_refused(L("5\0\r\n"), UINT64_MAX, 400);
	body_refused(L("5;a=\"\0\"\r\n"), UINT64_MAX, 400);
}

/* The chunk size: 1*HEXDIG within 64 bits. */
static void test_chunked_size(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"\r\n", ";a\r\n", " 5\r\n", "g\r\n", "-5\r\n", "+5\r\n", "0x5\r\n", "5x\r\n",
		"10000000000000000\r\n", "fffffffffffffffff\r\n", "\xff\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		body_refused(bad[i], strlen(bad[i]), UINT64_MAX, 400);
	/* overflow is found at the digit that overflows: no line end needed */
	body_refused(L("10000000000000000"), UINT64_MAX, 400);
}

/* Chunk data must be followed by CRLF; bare LF and CR are refused everywhere. */
static void test_chunked_crlf(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "5\r\nhello\r0\r\n\r\n",
		"5\r\nhello\r\r\n", "5\r\nhello0\r\n\r\n", "5\nhello\r\n0\r\n\r\n",
		"5\rhello\r\n0\r\n\r\n", "5\r\rhello", "0\n\r\n", "0\r\n\n", "0\r\n\rx",
		"5;a\nhello", "5;a=\"b\"\n", "5\r\nhello\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		body_refused(bad[i], strlen(bad[i]), UINT64_MAX, 400);
}

/* The trailer section: field lines checked like header fields, dropped. */
static void test_chunked_trailers(void **state)
{
	(void)state;
	DECODES("5\r\nhello\r\n0\r\nX-T: v\r\nChecksum:\t a b \xff\r\nE:\r\n\r\n", "hello");
	DECODES("0\r\n!#$%&'*+-.^_`|~09az:v\r\n\r\n", "");
	static const char *const bad[] = {
		"0\r\nX-T : v\r\n\r\n", "0\r\nX-T\t: v\r\n\r\n", "0\r\nX-T: v\r\n folded\r\n\r\n",
		"0\r\nX-T: v\r\n\tfolded\r\n\r\n", "0\r\n: v\r\n\r\n", "0\r\nX-T\r\n\r\n",
		"0\r\nX(T): v\r\n\r\n", "0\r\nX-T: a\x7f\r\n\r\n", "0\r\nX-T: a\x01\r\n\r\n",
		"0\r\nX-T: v\n\r\n", "0\r\nX-T: v\rx\r\n\r\n", "0\r\nX-T: v\r\n\n",
		"0\r\n \r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		body_refused(bad[i], strlen(bad[i]), UINT64_MAX, 400);
	body_refused(L("0\r\nX-T: a\0b\r\n\r\n"), UINT64_MAX, 400);
}

/* Appends C N times to T at *O. */
static void fill(char *t, size_t *o, char c, size_t n)
{
	memset(t + *o, c, n);
	*o += n;
}

/* Appends the text S to T at *O. */
static void put(char *t, size_t *o, const char *s)
{
	memcpy(t + *o, s, strlen(s));
	*o += strlen(s);
}

/* Size lines and trailer lines up to 8 KiB (CRLF included), the trailer
 * section too; a byte more is 400. */
static void test_chunked_line_limits(void **state)
{
	(void)state;
	static char t[20000];
	size_t o = 0;
	put(t, &o, "1;");                       /* a size line of 8192 bytes */
	fill(t, &o, 'e', 8192 - 4);
	put(t, &o, "\r\nx\r\n0\r\n\r\n");
	decodes(t, o, UINT64_MAX, "x", 1, o);
	o = 0;
	put(t, &o, "1;");                       /* 8193 bytes */
	fill(t, &o, 'e', 8192 - 3);
	put(t, &o, "\r\nx\r\n0\r\n\r\n");
	body_refused(t, o, UINT64_MAX, 400);
	o = 0;
	put(t, &o, "1;");                       /* refused once the 8193rd byte is in */
	fill(t, &o, 'e', 8192);
	body_refused(t, o, UINT64_MAX, 400);

	o = 0;
	put(t, &o, "0\r\nX:");                  /* a trailer line of 8192 bytes, then the end: 8194 */
	fill(t, &o, 'v', 8192 - 4);
	put(t, &o, "\r\n\r\n");
	body_refused(t, o, UINT64_MAX, 400);
	o = 0;
	put(t, &o, "0\r\nX:");                  /* 8190 bytes and the end: 8192 */
	fill(t, &o, 'v', 8192 - 6);
	put(t, &o, "\r\n\r\n");
	decodes(t, o, UINT64_MAX, "", 0, o);
	o = 0;
	put(t, &o, "0\r\n");                    /* a section of short lines, 8194 bytes */
	for (int i = 0; i < 1024; i++)
		put(t, &o, "X: abc\r\n");
	put(t, &o, "\r\n");
	body_refused(t, o, UINT64_MAX, 400);
	o -= 10;                                /* one line fewer: 8186 bytes */
	put(t, &o, "\r\n");
	decodes(t, o, UINT64_MAX, "", 0, o);
	o = 0;
	put(t, &o, "0\r\nX:");                  /* a line that never ends */
	fill(t, &o, 'v', 9000);
	body_refused(t, o, UINT64_MAX, 400);
}

/* The limit: refused when a size would take the total past it, before
 * its data; the limit itself is fine. */
static void test_chunked_max(void **state)
{
	(void)state;
	decodes(L("5\r\nhello\r\n0\r\n\r\n"), 5, L("hello"), 15);
	decodes(L("2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n"), 5, L("hello"), 20);
	decodes(L("0\r\n\r\n"), 0, "", 0, 5);
	body_refused(L("6\r\nhello!\r\n0\r\n\r\n"), 5, 413);
	body_refused(L("2\r\nhe\r\n4\r\nllo!\r\n0\r\n\r\n"), 5, 413);
	body_refused(L("1\r\nx\r\n0\r\n\r\n"), 0, 413);
	body_refused(L("ffffffffffffffff\r\n"), UINT64_MAX - 1, 413);
	/* as soon as the size's digits end: no data asked for, none given */
	body_refused(L("6;ext"), 5, 413);
	body_refused(L("6\r"), 5, 413);
	static struct outcome o;
	feed(L("3\r\nabc\r\n6\r\n"), 8, 0, 0, &o);
	assert_int_equal(o.r, -1);
	assert_int_equal(o.status, 413);
	assert_int_equal(o.s.n, 3);
	/* the overflow of 64 bits is bad framing, whatever the limit: the
	 * size is weighed against it only once its digits end */
	body_refused(L("10000000000000000"), 5, 400);
	body_pending(L("1000000"), 5);
	body_refused(L("1000000\r"), 5, 413);
}

/* DATA refusing stops the decoder with -2; a refused decoder stays refused. */
static void test_chunked_stop(void **state)
{
	(void)state;
	struct hp_chunked c;
	static struct sink s;
	bool done = true;
	unsigned st = 0;
	const char *why = NULL;
	const char *t = "3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
	s.stop_at = 5;
	hp_chunked_init(&c, UINT64_MAX);
	assert_int_equal(hp_chunked_feed(&c, t, strlen(t), collect, &s, &done, &st, &why), -2);
	assert_false(done);
	assert_int_equal(s.n, 6);
	assert_int_equal(hp_chunked_feed(&c, "0\r\n\r\n", 5, collect, &s, &done, &st, &why), -1);

	hp_chunked_init(&c, UINT64_MAX);
	assert_int_equal(hp_chunked_feed(&c, "", 0, collect, &s, &done, &st, &why), 0);
	assert_false(done);
	assert_int_equal(hp_chunked_feed(&c, "x", 1, collect, &s, &done, &st, &why), -1);
	assert_int_equal(st, 400);
	assert_non_null(why);
	st = 0;
	assert_int_equal(hp_chunked_feed(&c, "0\r\n\r\n", 5, collect, &s, &done, &st, &why), -1);
	assert_int_equal(st, 400);

	/* no DATA callback: the bytes are counted and dropped */
	hp_chunked_init(&c, UINT64_MAX);
	assert_int_equal(hp_chunked_feed(&c, t, strlen(t), NULL, NULL, &done, &st, &why),
			 (ssize_t)strlen(t));
	assert_true(done);
	assert_true(c.total == 6);
}

/* The decoder stops at the body's end: the rest is the next request. */
static void test_chunked_pipelined(void **state)
{
	(void)state;
	const char *body = "4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nT: 1\r\n\r\n";
	const char *next = "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";
	snprintf(text, sizeof text, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
		 "\r\n%s%s", body, next);
	size_t n = strlen(text);
	unsigned st;
	ssize_t head = parse_k(text, n, MAX, &st);
	assert_true(head > 0);
	assert_int_equal(req.body, HP_BODY_CHUNKED);
	const char *rest = text + head;
	size_t left = n - (size_t)head;
	decodes(rest, left, UINT64_MAX, "Wikipedia", 9, strlen(body));

	struct hp_chunked c;
	static struct sink s;
	bool done = false;
	const char *why;
	hp_chunked_init(&c, UINT64_MAX);
	assert_int_equal(hp_chunked_feed(&c, rest, left, collect, &s, &done, &st, &why),
			 (ssize_t)strlen(body));
	assert_true(done);
	assert_int_equal(hp_chunked_feed(&c, next, strlen(next), collect, &s, &done, &st, &why), 0);
	assert_true(done);
	assert_int_equal(s.n, 9);
	rest += strlen(body);
	assert_int_equal(parse_k(rest, strlen(rest), MAX, &st), (ssize_t)strlen(next));
	assert_true(is(req.path, "/next"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_line_ok),
		cmocka_unit_test(test_request_line_bad),
		cmocka_unit_test(test_target_forms),
		cmocka_unit_test(test_target_length),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_leading_crlf),
		cmocka_unit_test(test_line_endings),
		cmocka_unit_test(test_field_syntax),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_transfer_encoding),
		cmocka_unit_test(test_connection),
		cmocka_unit_test(test_expect),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_early),
		cmocka_unit_test(test_incremental),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_chunked_ok),
		cmocka_unit_test(test_chunked_extensions),
		cmocka_unit_test(test_chunked_size),
		cmocka_unit_test(test_chunked_crlf),
		cmocka_unit_test(test_chunked_trailers),
		cmocka_unit_test(test_chunked_line_limits),
		cmocka_unit_test(test_chunked_max),
		cmocka_unit_test(test_chunked_stop),
		cmocka_unit_test(test_chunked_pipelined),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
