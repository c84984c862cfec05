/*
 * http_ui.c - the HTTP front's live page (/ui, docs/http-front.md): the
 * page's assets as the app gives them, after the Host and Origin checks
 * alone (they hold no data); one snapshot at /ui/state; and the SSE
 * streams of /ui/events -- a snapshot at once and every second, and the
 * events the app sends as they happen. The data ask what /metrics asks
 * (Host, Origin, bearer token). Streams are bounded in number
 * (HTTP_UI_STREAMS, then 503) and in what each holds for a reader that
 * does not keep up (HTTP_UI_BUFFER, then it is dropped). The front writes
 * what the app gives it: it knows no backend and no module.
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "http_conn.h"
#include "http_int.h"
#include "log.h"

/* What every answer of the page carries: its scripts and styles come from
 * here only, it is never framed, and nothing of it is cached. */
#define UI_HEADERS "Content-Security-Policy: default-src 'self'; frame-ancestors 'none'; " \
	"base-uri 'none'; form-action 'none'\r\n" \
	"X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n" \
	"Referrer-Policy: no-referrer\r\n"

/* Seconds between two snapshots of a stream. */
#define UI_TICK 1.0

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents);

/* The page's assets and snapshot function (http_front.h). */
void http_front_set_ui(struct http_front *f, const struct http_ui_asset *assets, size_t n,
		       http_ui_snapshot_fn snapshot, void *arg)
{
	f->ui_assets = assets;
	f->ui_nassets = n;
	f->ui_snapshot = snapshot;
	f->ui_arg = arg;
	ev_init(&f->ui_tick, on_tick);
	f->ui_tick.repeat = UI_TICK;
	f->ui_tick.data = f;
}

/* The /ui/events streams open. */
size_t http_front_ui_streams(const struct http_front *f) { return f->ui_nstreams; }

/* True when URL is the live page's (and it is on). */
bool http_ui_path(const struct http_front *f, const char *url)
{
	return f->ui_snapshot && (strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0);
}

/* The asset at URL ("/ui/" is "/ui"), or NULL. */
static const struct http_ui_asset *asset_at(const struct http_front *f, const char *url)
{
	if (strcmp(url, "/ui/") == 0)
		url = "/ui";
	for (size_t i = 0; i < f->ui_nassets; i++)
		if (strcmp(f->ui_assets[i].path, url) == 0)
			return &f->ui_assets[i];
	return NULL;
}

/* Takes R out of the front's list of streams (its reference with it; R
 * itself lives while its connection holds it); false when it was not in. */
static bool ui_unlink(struct hreq *r)
{
	struct http_front *f = r->f;
	bool found = false;
	for (struct hreq **pp = &f->ui_streams; *pp; pp = &(*pp)->unext) {
		if (*pp == r) {
			*pp = r->unext;
			f->ui_nstreams--;
			found = true;
			break;
		}
	}
	if (!f->ui_streams)
		ev_timer_stop(EV_DEFAULT, &f->ui_tick);
	if (found)
		http_stream_unref(r);   /* the list's reference */
	return found;
}

/* Drops R (WHY for the log): its connection closes when it is next asked
 * for bytes, or when the HTTP layer's timeout lets a stalled reader go;
 * its place among the streams is free at once. */
static void ui_drop(struct hreq *r, const char *why)
{
	log_warn("http: dropped a /ui/events stream: %s (%zu bytes waiting)", why,
		 buf_pending(&r->out));
	r->aborted = true;
	buf_release(&r->out);
	http_stream_wake(r);
	ui_unlink(r);
}

/* Appends one SSE event EVENT with DATA (N bytes, one line) to R; a reader
 * already HTTP_UI_BUFFER behind is dropped instead. */
static void ui_send(struct hreq *r, const char *event, const char *data, size_t n)
{
	if (r->aborted || r->done)
		return;
	if (buf_pending(&r->out) > HTTP_UI_BUFFER) {
		ui_drop(r, "its client does not read");
		return;
	}
	if (buf_printf(&r->out, "event: %s\ndata: ", event) < 0 || buf_append(&r->out, data, n) < 0 ||
	    buf_append(&r->out, "\n\n", 2) < 0) {
		ui_drop(r, "out of memory");
		return;
	}
	http_stream_wake(r);
}

/* An event to every stream (one that falls behind is dropped). */
void http_front_ui_send(struct http_front *f, const char *event, const char *data, size_t n)
{
	struct hreq *next;
	for (struct hreq *r = f->ui_streams; r; r = next) {
		next = r->unext;   /* R may leave the list */
		ui_send(r, event, data, n);
	}
}

/* A snapshot (WITH_EVENTS: the kept events too) into B, as one line. */
static void snapshot(struct http_front *f, struct buf *b, bool with_events)
{
	f->ui_snapshot(f->ui_arg, b, with_events);
}

/* Every second: a snapshot to each stream (made once for all). */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_front *f = w->data;
	(void)loop;
	(void)revents;
	if (!f->ui_streams) {
		ev_timer_stop(EV_DEFAULT, w);
		return;
	}
	struct buf b = BUF_INIT;
	snapshot(f, &b, false);
	http_front_ui_send(f, "snapshot", b.data ? b.data : "", buf_pending(&b));
	buf_release(&b);
}

/* R, a /ui/events stream, ended: out of the front's list (if it was still). */
void http_ui_end(struct hreq *r)
{
	ui_unlink(r);
}

/* Ends every /ui/events stream (a drain or the stop) and the timer. */
void http_ui_stop(struct http_front *f)
{
	for (struct hreq *r = f->ui_streams; r; r = r->unext) {
		r->done = true;
		http_stream_wake(r);
	}
	ev_timer_stop(EV_DEFAULT, &f->ui_tick);
}

/* GET /ui/events on C: a new stream, its first snapshot with the kept
 * events; 503 past HTTP_UI_STREAMS or while draining. */
static int open_stream(struct http_front *f, struct hc_conn *c)
{
	if (f->draining || f->stopped)
		return http_stream_reply_error(NULL, c, 503, -32000,
			"Service Unavailable: mcp-chain is shutting down");
	if (f->ui_nstreams >= HTTP_UI_STREAMS)
		return http_stream_reply_error_with(NULL, c, 503, -32000,
			"Service Unavailable: too many /ui/events streams open", "Retry-After: 5\r\n");
	struct hreq *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	r->f = f;
	r->conn = c;
	r->refs = 2;   /* the connection's (on_end lets go) and the list's */
	r->ep = EP_UI;
	r->kind = REQ_GET;
	r->sse = true;
	ev_init(&r->grace, http_stream_on_grace);
	r->grace.data = r;
	http_ring_init(&r->ring);
	hc_set_ctx(c, r);
	r->unext = f->ui_streams;
	f->ui_streams = r;
	f->ui_nstreams++;
	struct buf b = BUF_INIT;
	snapshot(f, &b, true);
	ui_send(r, "snapshot", b.data ? b.data : "", buf_pending(&b));
	buf_release(&b);
	if (!ev_is_active(&f->ui_tick))
		ev_timer_again(EV_DEFAULT, &f->ui_tick);
	return http_stream_reply_stream(r, NULL);
}

/* A request for URL of the live page: an asset, a snapshot or the stream. */
int http_ui_serve(struct http_front *f, struct hc_conn *c, const char *url, const char *method)
{
	enum req_kind kind;
	const char *why = NULL;
	unsigned status = hf_check_headers(f, c, method, &kind, &why);
	if (!status && kind != REQ_GET) {
		status = 405;
		why = "Method Not Allowed";
	}
	if (status)
		return http_stream_reply_with(NULL, c, status, "text/plain", why, strlen(why), NULL,
					      status == 405 ? "Allow: GET\r\n" : NULL);
	const struct http_ui_asset *a = asset_at(f, url);
	if (a)
		return http_stream_reply_with(NULL, c, 200, a->ctype, (const char *)a->body, a->n,
					      NULL, UI_HEADERS);
	bool state = strcmp(url, "/ui/state") == 0;
	if (!state && strcmp(url, "/ui/events") != 0)
		return http_stream_reply_with(NULL, c, 404, "text/plain", "not found\n", 10, NULL,
					      UI_HEADERS);
	char awhy[300], chal[1024];
	status = http_auth_check(f, c, NULL, NULL, NULL, NULL, awhy, chal, sizeof chal);
	if (status)
		return http_auth_refuse(NULL, c, status, awhy, chal);
	if (!state)
		return open_stream(f, c);
	struct buf b = BUF_INIT;
	snapshot(f, &b, true);
	int rc = http_stream_reply_with(NULL, c, 200, JSON_TYPE, b.data ? b.data : "",
					buf_pending(&b), NULL, UI_HEADERS);
	buf_release(&b);
	return rc;
}
