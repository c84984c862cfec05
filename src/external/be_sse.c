/*
 * be_sse.c - the legacy HTTP+SSE generation of the HTTP upstream
 * transport (protocol revision 2024-11-05).
 *
 * A GET opens the event stream; its first "endpoint" event names the URL
 * (usually relative, with a session in its query) where messages are
 * POSTed; everything the server sends, responses included, arrives as
 * "message" events on the stream. Messages sent before the endpoint is
 * known are held. The endpoint must have the stream's origin, so that the
 * configured headers (credentials) never go elsewhere. The transport is
 * down when the stream cannot be opened or ends.
 */
#include "http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rpc.h"

/* Writes "scheme://host:port" of U into OUT; 0 or -1. */
static int origin(CURLU *u, char *out, size_t outlen)
{
	char *scheme = NULL, *host = NULL, *port = NULL;
	int rc = -1;
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
		rc = snprintf(out, outlen, "%s://%s:%s", scheme, host, port) < (int)outlen ? 0 : -1;
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	return rc;
}

/* Resolves REF against BASE; a new string, or NULL with WHY (of N) set. */
static char *resolve(const char *base, const char *ref, char *why, size_t n)
{
	char o1[512], o2[512], *abs = NULL, *out = NULL;
	CURLU *u = curl_url(), *b = curl_url();
	if (!u || !b || curl_url_set(b, CURLUPART_URL, base, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &abs, 0) != CURLUE_OK)
		snprintf(why, n, "the endpoint event names no usable URL: %.100s", ref);
	else if (origin(u, o1, sizeof o1) < 0 || origin(b, o2, sizeof o2) < 0 || strcmp(o1, o2))
		snprintf(why, n, "the endpoint %.100s is not on the stream's origin", abs);
	else
		out = strdup(abs);
	curl_free(abs);
	curl_url_cleanup(u);
	curl_url_cleanup(b);
	return out;
}

/* The "endpoint" event (inside libcurl): where to POST from now on. */
static int legacy_event(struct hx *x, const struct sse_event *ev)
{
	struct be_http *s = x->s;
	if (x->kind != HX_STREAM || strcmp(ev->type, "endpoint") != 0)
		return 0;
	char *url = resolve(s->url, ev->data, x->why, sizeof x->why);
	if (!url) {
		x->refused = true;
		return -1;  /* ends the stream; stream_done reports why */
	}
	free(s->endpoint);
	s->endpoint = url;
	log_debug("%s: messages go to %s", s->name, url);
	http_wake(s);  /* post what was held */
	return 0;
}

/* The event stream ended: the transport is down. */
static void stream_done(struct hx *x, CURLcode rc)
{
	struct be_http *s = x->s;
	char why[400], m[200];
	if (s->down || s->stopping)
		return;
	if (x->refused)
		snprintf(why, sizeof why, "%s", x->why);
	else if (x->status == 0)
		snprintf(why, sizeof why, "cannot reach %s: %s", s->url, hx_error(x, rc));
	else if (x->status / 100 != 2)
		snprintf(why, sizeof why, "HTTP %ld for the SSE stream %s%s%s", x->status, s->url,
			 hx_reply_message(x, m, sizeof m) ? ": " : "", m);
	else if (!x->sse)
		snprintf(why, sizeof why, "%s is not an event stream", s->url);
	else if (rc != CURLE_OK)
		snprintf(why, sizeof why, "the SSE stream broke: %s", hx_error(x, rc));
	else
		snprintf(why, sizeof why, "the SSE stream closed");
	http_down(s, why);
}

/* Opens the event stream. */
int sse_start(struct be_http *s)
{
	struct peer *p = backend_peer(s->b);
	struct hx *x = hx_new(s, HX_STREAM, s->url, NULL, stream_done);
	if (!x) {
		snprintf(p->why_down, sizeof p->why_down, "out of memory");
		return -1;
	}
	s->stream = x;
	int rc = hx_header(x, "Accept", "text/event-stream");
	if (rc < 0 || hx_start(x, 0) < 0) {
		if (rc < 0)
			hx_abort(x);
		snprintf(p->why_down, sizeof p->why_down, "cannot start an HTTP request");
		return -1;
	}
	return 0;
}

/* A POST ended: its answer comes on the stream; only failures matter. */
static void lpost_done(struct hx *x, CURLcode rc)
{
	struct be_http *s = x->s;
	char m[200];
	if (s->down || s->stopping || (rc == CURLE_OK && x->status / 100 == 2))
		return;
	if (rc == CURLE_OK)
		http_fail(s, x->msg, RPC_BACKEND_GONE, x->status, "HTTP %ld from %s%s%s", x->status,
			  s->endpoint, hx_reply_message(x, m, sizeof m) ? ": " : "", m);
	else
		http_fail(s, x->msg, RPC_BACKEND_GONE, 0, "HTTP request to %s failed: %s",
			  s->endpoint, hx_error(x, rc));
}

/* POSTs O to the endpoint. */
static int legacy_post(struct be_http *s, struct out *o)
{
	struct hx *x = hx_new_post(s, s->endpoint, o, lpost_done);
	return x ? hx_start(x, 0) : -1;
}

/* Messages wait for the endpoint. */
static bool legacy_can_post(struct be_http *s)
{
	return s->endpoint != NULL && http_auth_ready(s);
}

/* Nothing to look at before delivery. */
static bool legacy_intercept(struct be_http *s, json_t *msg)
{
	(void)s;
	(void)msg;
	return false;
}

const struct http_mode http_legacy = {
	.post = legacy_post,
	.can_post = legacy_can_post,
	.intercept = legacy_intercept,
	.named_event = legacy_event,
};
