/*
 * fetch.h - one HTTP request on the loop, for what mcp-chain fetches on
 * its own behalf: an issuer's metadata and keys, a token endpoint, an
 * introspection endpoint. libcurl's multi interface (curl_ev.h) does the
 * I/O; nothing blocks. The answer is bounded (max_body) and the request
 * times out (timeout_ms): a slow or silent server ends as an error.
 *
 * Not for MCP traffic (the external HTTP transport has its own streaming
 * transfers): a fetch gathers its whole body before it reports.
 */
#ifndef MCPC_FETCH_H
#define MCPC_FETCH_H

#include <stdbool.h>
#include <stddef.h>

struct fetch;

struct fetch_req {
	const char *url;            /* borrowed for the call */
	const char *const *headers; /* borrowed: "Name: value" strings, NULL-terminated, or NULL */
	const char *body;           /* borrowed: a POST's body (copied), or NULL for GET */
	size_t body_len;
	const char *content_type;   /* of BODY; default application/x-www-form-urlencoded */
	long timeout_ms;            /* whole request; 0: 10 s */
	size_t max_body;            /* 0: 1 MiB; a longer answer fails */
	bool allow_http;            /* plain http:// to any host (otherwise loopback only) */
};

struct fetch_res {
	bool ok;              /* an HTTP answer came, whatever its status */
	long status;          /* its status code, 0 without one */
	const char *body;     /* borrowed for the callback: NUL-terminated, body_len bytes */
	size_t body_len;
	long max_age;         /* Cache-Control max-age in seconds; 0 for no-store/no-cache; -1 none */
	const char *www_authenticate;  /* borrowed: the header's value, or NULL */
	const char *content_type;      /* borrowed: the Content-Type, or NULL */
	const char *error;    /* borrowed: why it failed (!ok), never NULL then */
};

/* The request ended. Called from the loop, once; F is freed after it returns. */
typedef void (*fetch_done_fn)(void *arg, const struct fetch_res *res);

/*
 * Starts RQ. Returns the request (owned by the loop until DONE returns or
 * fetch_cancel), or NULL with the reason in WHY (of N bytes): a URL that is
 * not http(s), plain http to a host that is not loopback without
 * allow_http, libcurl missing.
 */
struct fetch *fetch_start(const struct fetch_req *rq, fetch_done_fn done, void *arg,
			  char *why, size_t n);

/* Aborts F (steals it); DONE is not called. NULL is fine. */
void fetch_cancel(struct fetch *f);

/* Requests under way (for tests and shutdown). */
size_t fetch_count(void);

/* True when URL's scheme is https, or http to a loopback host. */
bool fetch_url_safe(const char *url);

#endif
