/*
 * http_parse.h - HTTP/1.1 request framing for the HTTP front, strict
 * (RFC 9112 and RFC 9110, to the letter): the request line, the header
 * section and the chunked body. Pure functions over bytes: no I/O, no
 * allocation, no loop; the connection layer (http_conn.c) feeds them.
 *
 * Everything a framing-sensitive intermediary could read another way is
 * refused, so a request smuggled past a reverse proxy is never served:
 * after any refusal the connection must be closed.
 */
#ifndef MCPC_HTTP_PARSE_H
#define MCPC_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HP_MAX_HEADERS 64        /* more header fields: 431 */
#define HP_MAX_TARGET 8192       /* a longer request-target: 414 */

/* Bytes of the input (not NUL-terminated). */
struct hp_span {
	const char *p;
	size_t n;
};

/* One header field: its name as sent, its value without surrounding whitespace. */
struct hp_header {
	struct hp_span name, value;
};

enum hp_body { HP_BODY_NONE, HP_BODY_LENGTH, HP_BODY_CHUNKED };

/* A request's head, as hp_parse_head found it (spans point into its input). */
struct hp_request {
	struct hp_span method;       /* a token, case-sensitive ("GET") */
	struct hp_span target;       /* the request-target as sent */
	struct hp_span path;         /* its path: origin-form's, or absolute-form's
				      * (after the authority; "/" when empty);
				      * "*" for asterisk-form */
	struct hp_span query;        /* after '?', without it; n == 0: none */
	unsigned minor;              /* HTTP/1.minor: 0 or 1 */
	struct hp_header headers[HP_MAX_HEADERS];
	size_t nheaders;
	enum hp_body body;
	uint64_t length;             /* HP_BODY_LENGTH: the Content-Length */
	bool keep_alive;             /* false: close after the response (HTTP/1.0
				      * without "Connection: keep-alive", or a
				      * "close" connection option) */
	bool expect_continue;        /* "Expect: 100-continue" */
	struct hp_span host;         /* the one Host field's value (n == 0: none,
				      * which HTTP/1.0 may do) */
};

/*
 * Parses the head at the start of BUF (N bytes): the request line, the
 * header fields, the empty line. Lines end in CRLF.
 * Returns the head's length in bytes (> 0) with *REQ filled; 0 when it is
 * not complete yet and may still fit in MAX bytes; -1 when it is refused,
 * with *STATUS the status to answer and *WHY a short static text:
 *   400 a malformed request line, method or target; a bare LF or CR; a
 *       NUL or other control character (but HTAB) in a field value;
 *       whitespace between a field name and its colon; obsolete line
 *       folding; a field name that is not a token; no Host in HTTP/1.1,
 *       two Host fields, or a Host value with characters a host cannot
 *       have; Content-Length that is not 1*DIGIT, larger than 2^63 - 1,
 *       or given twice with different values (the same value twice is
 *       one); Transfer-Encoding with Content-Length, or in HTTP/1.0, or
 *       twice, or whose last coding is not "chunked", or malformed
 *       (empty elements, parameters on chunked);
 *   414 a request-target longer than HP_MAX_TARGET;
 *   417 an Expect other than "100-continue";
 *   431 a head larger than MAX (incomplete after MAX bytes counts), or
 *       more than HP_MAX_HEADERS fields;
 *   501 Transfer-Encoding whose codings end in "chunked" but include one
 *       we do not implement ("gzip, chunked");
 *   505 an HTTP major version other than 1 ("HTTP/2.0"; HTTP/1.x with x
 *       above 1 is read as 1.1, RFC 9112 section 2.3; a version that is
 *       not "HTTP/" DIGIT "." DIGIT is 400).
 * Tokens are compared case-insensitively where RFC 9110 says so (field
 * names, "chunked", "close", "keep-alive", "100-continue").
 * Details of the letter:
 *   - one empty line (CRLF) before the request line is skipped (RFC 9112
 *     section 2.2: "at least one") and counted in the head's length; a
 *     second is a request line without a method (400);
 *   - the request-target holds only the characters RFC 3986 allows there
 *     (pchar, "/", "?", valid pct-encodings; "[" "]" only in an IPv6
 *     authority): anything else, "#" and bytes above 0x7F included, is 400;
 *     absolute-form is "http://" or "https://" (any case) with an authority
 *     that is host[:port] (no userinfo); authority-form is 400;
 *   - a Host value, like an absolute-form authority, is uri-host [":" port]
 *     with port = *DIGIT; an empty host is 400 (an "http" URI must not have
 *     one, RFC 9110 section 4.2.1), so host.n > 0 whenever Host was sent;
 *   - Content-Length values are compared as numbers ("05" is "5"); empty
 *     list elements are 400 there and in Transfer-Encoding, and ignored in
 *     Connection (RFC 9110 section 5.6.1);
 *   - "Expect: 100-continue" in HTTP/1.0 is ignored (expect_continue stays
 *     false, RFC 9110 section 10.1.1); other Expect values are 417 in both;
 *   - a refusal depends only on the bytes up to where it is found: calling
 *     again with more bytes of the same stream gives the same status, and
 *     errors are reported as soon as their bytes are in (0 means none yet).
 *     Each call reads BUF from its start again.
 * path: for absolute-form with an empty path it points to a static "/",
 * not into BUF; every other span points into BUF.
 */
ssize_t hp_parse_head(const char *buf, size_t n, size_t max, struct hp_request *req,
		      unsigned *status, const char **why);

/* The first header field NAME (case-insensitive) of REQ, or NULL. */
const struct hp_span *hp_header(const struct hp_request *req, const char *name);

/* True when span S equals the NUL-terminated TEXT, case-insensitively. */
bool hp_span_ieq(struct hp_span s, const char *text);

/* A chunked body being decoded (RFC 9112 section 7.1). */
struct hp_chunked {
	int state;                   /* private */
	uint64_t left;               /* private: bytes left in the current chunk */
	size_t line;                 /* private: bytes of the current size, extension
				      * or trailer line so far (bounded) */
	size_t trailer_bytes;        /* private: the trailer section's size so far */
	uint64_t total;              /* decoded bytes so far */
	uint64_t max;                /* decoded bytes allowed in all */
};

/* Starts decoding a body of at most MAX decoded bytes. */
void hp_chunked_init(struct hp_chunked *c, uint64_t max);

/* Takes N decoded bytes at P (borrowed, valid during the call); nonzero stops decoding. */
typedef int (*hp_data_fn)(void *arg, const char *p, size_t n);

/*
 * Feeds IN (N bytes) to the decoder: DATA is called for each run of body
 * bytes, in order. Returns how many bytes of IN were consumed (everything
 * up to the end of the body: what follows belongs to the next request),
 * with *DONE set once the last chunk and the trailer section are through.
 * Returns -1 with *STATUS and *WHY when the body is refused: 400 for bad
 * framing (a chunk size that is not 1*HEXDIG or overflows 64 bits, a
 * missing CRLF after a chunk's data, a bare LF or CR, a size or extension
 * line or trailer section longer than 8 KiB, a malformed trailer field),
 * 413 as soon as the chunk sizes announce more than MAX in all (before
 * the chunk's data is read). Returns -2 when DATA returned nonzero.
 * After -1 or -2 the decoder is done with: the connection must close.
 * Chunk extensions (;name[=token or quoted-string], BWS around ";" and
 * "=") and trailer fields are checked, then dropped. The 413 is decided
 * where the size's hex digits end; a size of more than 16 significant
 * digits is 400 (overflow) first. The 8 KiB bounds count CR and LF. Any
 * split of the same bytes into calls gives the same result and the same
 * data. Once *DONE, further calls consume nothing. DATA may be NULL.
 */
ssize_t hp_chunked_feed(struct hp_chunked *c, const char *in, size_t n, hp_data_fn data,
			void *arg, bool *done, unsigned *status, const char **why);

#endif
