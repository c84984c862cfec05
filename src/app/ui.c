/*
 * ui.c - the live page's data (docs/http-front.md, "The live page"): the
 * snapshot the front's /ui/state and /ui/events serve -- backends (state,
 * restarts, tools, requests, errors, mean latency), sessions (through the
 * front's iterator, at most UI_MAX_SESSIONS listed), the front's traffic
 * counters and, for a new reader, the kept events -- and each event told
 * as it happens (an observe.h listener) sent to the open streams. The
 * page computes rates from successive snapshots: the server keeps no
 * history for it.
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregate.h"
#include "embedded.h"
#include "http_front.h"
#include "mcpc_version.h"
#include "observe.h"
#include "peer.h"

/* Sessions a snapshot lists; the rest are counted. */
#define UI_MAX_SESSIONS 200
/* Backends of sessions' own a snapshot lists at most (the shared ones: all). */
#define UI_MAX_BACKENDS 200

/* The page's icon: a browser asks for one, and a 404 would be an error. */
static const char favicon[] = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">"
	"<rect width=\"16\" height=\"16\" rx=\"3\" fill=\"#5b8def\"/></svg>";

static const struct http_ui_asset assets[] = {
	{ "/ui", "text/html; charset=utf-8", ui_index_html, 0 },
	{ "/ui/app.js", "text/javascript; charset=utf-8", ui_app_js, 0 },
	{ "/ui/app.css", "text/css; charset=utf-8", ui_app_css, 0 },
	{ "/ui/favicon.svg", "image/svg+xml", (const unsigned char *)favicon, sizeof favicon - 1 },
};
#define NASSETS (sizeof assets / sizeof *assets)
static struct http_ui_asset served[NASSETS];

/* An event as the page reads it (a new reference). */
static json_t *event_json(const struct obs_event *e)
{
	static const char *const kinds[] = { "decision", "backend", "error", "session" };
	json_t *j = json_pack("{s:I,s:f,s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?}",
		"serial", (json_int_t)e->serial, "time", e->time,
		"kind", e->kind <= OBS_SESSION ? kinds[e->kind] : "other", "what", e->what,
		"source", e->source, "method", e->method, "name", e->name, "client", e->client,
		"backend", e->backend, "detail", e->detail);
	if (j && e->code)
		json_object_set_new(j, "code", json_integer(e->code));
	return j;
}

/* Appends E to the array ARG (an observe_each callback). */
static void keep_event(void *arg, const struct obs_event *e)
{
	json_array_append_new(arg, event_json(e));
}

/* One backend of the aggregate AGG as the page lists it. */
static json_t *backend_json(struct aggregate *agg, struct backend *b, double now)
{
	const struct backend_stats *st = backend_stats(b);
	const struct peer *p = backend_peer(b);
	unsigned long long answered = p->answered[0] + p->answered[1] + p->answered[2];
	json_t *d = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I}", "name", p->name,
		"state", backend_state_name(backend_state(b)), "protocol", backend_protocol(b),
		"restarts", (json_int_t)st->restarts, "requests", (json_int_t)st->requests,
		"answered", (json_int_t)answered, "errors", (json_int_t)p->answered[1],
		"toolErrors", (json_int_t)p->answered[2]);
	long tools = agg ? aggregate_tool_count(agg, p) : -1;
	if (tools >= 0)
		json_object_set_new(d, "tools", json_integer(tools));
	json_object_set_new(d, "seconds", json_real(p->answered_seconds));
	if (st->started_at)
		json_object_set_new(d, "uptimeSeconds", json_real(now - st->started_at));
	if (p->why_down[0] && backend_state(b) != BACKEND_READY)
		json_object_set_new(d, "reason", json_string(p->why_down));
	return d;
}

/* The sessions being listed, and how many were not. */
struct sess_list {
	json_t *list;
	size_t count;
};

/* Lists one session (an http_front_each_session callback). */
static void add_session(void *arg, const struct http_session_info *i)
{
	struct sess_list *sl = arg;
	if (sl->count++ >= UI_MAX_SESSIONS)
		return;
	char who[17] = "";
	for (size_t k = 0; i->subject && k < 8; k++)
		snprintf(who + 2 * k, 3, "%02x", i->subject[k]);
	json_array_append_new(sl->list, json_pack("{s:I,s:s,s:s?,s:s?,s:s?,s:s,s:s,s:f,s:f,s:I}",
		"serial", (json_int_t)i->serial, "sid", i->sid, "client", i->client,
		"principal", who[0] ? who : NULL, "version", i->version,
		"transport", i->transport, "peer", i->peer, "age", i->age, "idle", i->idle,
		"open", (json_int_t)i->open));
}

/* The snapshot: one JSON object as one line into OUT. */
static void snapshot(void *arg, struct buf *out, bool with_events)
{
	struct app *a = arg;
	double now = ev_now(EV_DEFAULT);
	json_t *backends = json_array();
	for (size_t i = 0; i < a->nbackends; i++)
		json_array_append_new(backends, backend_json(a->agg, a->backends[i], now));
	/* sessions' own ("scope": "session"), named by their session */
	for (struct schain *sc = a->schains; sc; sc = sc->next) {
		for (size_t i = 0; !sc->released && i < sc->nbackends &&
		     json_array_size(backends) < UI_MAX_BACKENDS; i++) {
			json_t *d = backend_json(sc->agg, sc->backends[i], now);
			json_object_set_new(d, "session", json_integer(sc->serial));
			json_array_append_new(backends, d);
		}
	}
	struct sess_list sl = { json_array(), 0 };
	http_front_each_session(a->http, add_session, &sl);
	json_t *s = json_pack("{s:s,s:f,s:o,s:{s:I,s:I,s:o},s:o}", "version", MCPC_VERSION,
		"time", (double)time(NULL), "backends", backends,
		"sessions", "count", (json_int_t)sl.count,
		"more", (json_int_t)(sl.count > UI_MAX_SESSIONS ? sl.count - UI_MAX_SESSIONS : 0),
		"list", sl.list, "traffic", http_front_traffic(a->http));
	json_object_set_new(s, "mcpPath", json_string(a->cfg->listen.path ? a->cfg->listen.path :
						      CFG_DEFAULT_LISTEN_PATH));
	if (s && with_events) {
		json_t *ev = json_array();
		observe_each(keep_event, ev);
		json_object_set_new(s, "events", ev);
	}
	if (!s || json_dump_callback(s, buf_dump_cb, out, JSON_COMPACT | JSON_REAL_PRECISION(15)) < 0)
		log_error("ui: cannot make a snapshot (out of memory)");
	json_decref(s);
}

/* An event as it happens: to the open streams (none: nothing to do). */
static void on_event(void *arg, const struct obs_event *e)
{
	struct app *a = arg;
	if (!a->http || http_front_ui_streams(a->http) == 0)
		return;
	json_t *j = event_json(e);
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	if (text)
		http_front_ui_send(a->http, "event", text, strlen(text));
	free(text);
	json_decref(j);
}

/* Serves the page when --listen has it on, and listens to the events. */
int app_ui_start(struct app *a)
{
	if (!a->http || !a->cfg->listen.ui)
		return 0;
	const size_t lens[] = { ui_index_html_len, ui_app_js_len, ui_app_css_len };
	for (size_t i = 0; i < NASSETS; i++) {
		served[i] = assets[i];
		if (i < sizeof lens / sizeof *lens)
			served[i].n = lens[i];
	}
	http_front_set_ui(a->http, served, NASSETS, snapshot, a);
	return observe_listen(on_event, a);
}

/* Stops listening (before the front goes). */
void app_ui_stop(struct app *a)
{
	observe_unlisten(on_event, a);
}
