/*
 * fetch.c - one bounded HTTP request on the loop (see fetch.h).
 */
#include "fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "curl_dl.h"
#include "curl_ev.h"
#include "mcpc_version.h"

#define DEFAULT_TIMEOUT_MS 10000L
#define DEFAULT_MAX_BODY   (1u << 20)
#define HEADER_MAX         4096

struct fetch {
	struct curl_ev_xfer base;    /* first member */
	fetch_done_fn done;
	void *arg;
	struct curl_slist *hdrs;     /* owned */
	char *post;                  /* owned: the body sent */
	struct buf body;             /* the answer */
	size_t max_body;
	bool too_long;
	long max_age;
	char *www_auth;              /* owned */
	char err[CURL_ERROR_SIZE];
};

static size_t live;

/* True when HOST (as in a URL) names the loopback interface. */
static bool loopback_host(const char *host)
{
	if (strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0)
		return true;
	if (strncmp(host, "127.", 4) != 0)
		return false;
	return strspn(host, "0123456789.") == strlen(host);   /* 127.0.0.1.example.com is not */
}

bool fetch_url_safe(const char *url)
{
	if (strncasecmp(url, "https://", 8) == 0)
		return true;
	if (strncasecmp(url, "http://", 7) != 0)
		return false;
	const char *h = url + 7, *end = h + strcspn(h, "/?#");
	char host[256];
	const char *at = memchr(h, '@', (size_t)(end - h));
	if (at)
		return false;   /* credentials in a URL: never */
	size_t len = (size_t)(end - h);
	if (*h == '[') {
		const char *rb = memchr(h, ']', len);
		len = rb ? (size_t)(rb - h) + 1 : len;
	} else {
		const char *colon = memchr(h, ':', len);
		len = colon ? (size_t)(colon - h) : len;
	}
	if (len == 0 || len >= sizeof host)
		return false;
	memcpy(host, h, len);
	host[len] = 0;
	return loopback_host(host);
}

/* CURLOPT_WRITEFUNCTION: a piece of the answer, kept while it fits. */
static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct fetch *f = ud;
	size_t n = size * nmemb;
	if (f->body.len + n > f->max_body) {
		f->too_long = true;
		return 0;   /* aborts the transfer */
	}
	return buf_append(&f->body, p, n) < 0 ? 0 : n;
}

/* The max-age of a Cache-Control value V (N bytes): -1 none, 0 no-store. */
static long cache_max_age(const char *v, size_t n)
{
	char s[256];
	snprintf(s, sizeof s, "%.*s", (int)(n < 255 ? n : 255), v);
	for (char *p = s; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	if (strstr(s, "no-store") || strstr(s, "no-cache"))
		return 0;
	const char *m = strstr(s, "max-age=");
	if (!m)
		return -1;
	long age = strtol(m + 8, NULL, 10);
	return age < 0 ? 0 : age;
}

/* CURLOPT_HEADERFUNCTION: the headers fetch reports. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct fetch *f = ud;
	size_t n = size * nmemb, len = n;
	while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n'))
		len--;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {   /* a new answer (after a 1xx) */
		f->max_age = -1;
		free(f->www_auth);
		f->www_auth = NULL;
		return n;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon || len > HEADER_MAX)
		return n;
	size_t nl = (size_t)(colon - p);
	const char *v = colon + 1;
	while (v < p + len && (*v == ' ' || *v == '\t'))
		v++;
	size_t vl = (size_t)(p + len - v);
	if (nl == 13 && strncasecmp(p, "Cache-Control", 13) == 0)
		f->max_age = cache_max_age(v, vl);
	else if (nl == 16 && strncasecmp(p, "WWW-Authenticate", 16) == 0 && !f->www_auth)
		f->www_auth = strndup(v, vl);
	return n;
}

/* Frees F and its handle. */
static void fetch_free(struct fetch *f)
{
	if (!f)
		return;
	curl_ev_remove(&f->base);
	if (f->base.easy)
		curl_easy_cleanup(f->base.easy);
	curl_slist_free_all(f->hdrs);
	free(f->post);
	buf_release(&f->body);
	free(f->www_auth);
	free(f);
	live--;
}

/* curl_ev: the transfer ended. */
static void on_done(struct curl_ev_xfer *base, CURLcode rc)
{
	struct fetch *f = (struct fetch *)base;
	struct fetch_res res = { .max_age = f->max_age };
	char why[CURL_ERROR_SIZE + 64];
	if (buf_append(&f->body, "", 1) < 0) {   /* the NUL; not counted */
		rc = CURLE_OUT_OF_MEMORY;
	} else {
		f->body.len--;
	}
	if (rc == CURLE_OK) {
		res.ok = true;
		curl_easy_getinfo(f->base.easy, CURLINFO_RESPONSE_CODE, &res.status);
		res.body = f->body.data;
		res.body_len = f->body.len;
		res.www_authenticate = f->www_auth;
		char *ct = NULL;
		if (curl_easy_getinfo(f->base.easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK)
			res.content_type = ct;
	} else {
		snprintf(why, sizeof why, "%s", f->too_long ? "the answer is too long" :
			 f->err[0] ? f->err : curl_easy_strerror(rc));
		res.error = why;
	}
	f->done(f->arg, &res);
	fetch_free(f);
}

struct fetch *fetch_start(const struct fetch_req *rq, fetch_done_fn done, void *arg,
			  char *why, size_t n)
{
	if (strncasecmp(rq->url, "https://", 8) != 0 && strncasecmp(rq->url, "http://", 7) != 0) {
		snprintf(why, n, "not an http(s) URL");
		return NULL;
	}
	if (!rq->allow_http && !fetch_url_safe(rq->url)) {
		snprintf(why, n, "plain http to a host that is not loopback (use https)");
		return NULL;
	}
	if (curl_ev_setup() < 0) {
		snprintf(why, n, "libcurl is not available");
		return NULL;
	}
	struct fetch *f = calloc(1, sizeof *f);
	if (!f || !(f->base.easy = curl_easy_init())) {
		free(f);
		snprintf(why, n, "out of memory");
		return NULL;
	}
	live++;
	f->done = done;
	f->arg = arg;
	f->base.done = on_done;
	f->max_body = rq->max_body ? rq->max_body : DEFAULT_MAX_BODY;
	f->max_age = -1;
	CURL *e = f->base.easy;
	curl_easy_setopt(e, CURLOPT_URL, rq->url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->err);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "mcp-chain/" MCPC_VERSION);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, rq->timeout_ms > 0 ? rq->timeout_ms : DEFAULT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	/* redirects are not followed: a metadata or token URL answers itself */
	bool bad = false;
	for (size_t i = 0; rq->headers && rq->headers[i]; i++) {
		struct curl_slist *l = curl_slist_append(f->hdrs, rq->headers[i]);
		bad |= !l;
		f->hdrs = l ? l : f->hdrs;
	}
	if (rq->body) {
		char ct[200];
		snprintf(ct, sizeof ct, "Content-Type: %s",
			 rq->content_type ? rq->content_type : "application/x-www-form-urlencoded");
		struct curl_slist *l = curl_slist_append(f->hdrs, ct);
		bad |= !l;
		f->hdrs = l ? l : f->hdrs;
		f->post = malloc(rq->body_len + 1);
		bad |= !f->post;
		if (f->post) {
			memcpy(f->post, rq->body, rq->body_len);
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, f->post);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		}
	}
	if (f->hdrs)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->hdrs);
	if (bad || curl_ev_add(&f->base) < 0) {
		snprintf(why, n, bad ? "out of memory" : "cannot start the request");
		fetch_free(f);
		return NULL;
	}
	return f;
}

void fetch_cancel(struct fetch *f)
{
	fetch_free(f);
}

size_t fetch_count(void)
{
	return live;
}
