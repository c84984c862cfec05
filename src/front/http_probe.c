/*
 * http_probe.c - the x-mcp-header marks a 2026-07-28 tools/call's
 * Mcp-Param-* headers are checked against: learned from the tools/list
 * answers crossing the front, or, before any was served, fetched by a
 * stateless session of the front's own while the calls that need them
 * wait (docs/http-front.md).
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "log.h"
#include "param_headers.h"
#include "session.h"

/* ---- the x-mcp-header marks before a list was served ---- */

#define PROBE_BOUND 10.0      /* s the fetch of the tool list may take */
#define PROBE_RETRY 5.0       /* s before a failed fetch is tried again */
#define PROBE_MAX_PAGES 100

/* Learns the marks of a tools/list RESULT (borrowed) crossing the front;
 * its last page makes them known. */
void http_probe_learn(struct http_front *f, json_t *result)
{
	json_t *tools = json_object_get(result, "tools");
	if (!json_is_array(tools))
		return;
	param_learn(&f->params, tools, "http", false);
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (!next || !*next)
		f->marks_known = true;
}

static void probe_answer(void *arg, json_t *m);

/* The probe session's next tools/list (CURSOR: NULL for the first page),
 * a call of the front's own through its session. */
static void probe_send(struct http_front *f, const char *cursor)
{
	json_t *params = json_pack("{s:O}", "_meta", f->probe_meta);
	if (cursor)
		json_object_set_new(params, "cursor", json_string(cursor));
	f->probe_pages++;
	if (session_call(f->probe->s, "tools/list", params, probe_answer, f->probe) < 0)
		http_probe_end(f, "out of memory");
}

/*
 * The fetch is over (WHY: NULL, or why it failed): the held calls go on
 * (each POST is taken again from the start: now checked against what was
 * learned). The probe session ends as a stateless call's does, soon after.
 */
void http_probe_end(struct http_front *f, const char *why)
{
	struct hsess *hs = f->probe;
	if (!hs)
		return;
	f->probe = NULL;
	ev_timer_stop(EV_DEFAULT, &f->probe_bound);
	json_decref(f->probe_meta);
	f->probe_meta = NULL;
	if (why) {
		f->probe_after = ev_now(EV_DEFAULT) + PROBE_RETRY;
		log_warn("http: the tool list for checking Mcp-Param-* headers could not be fetched "
			 "(%s): calls are checked against the lists served", why);
	} else {
		log_debug("http: tool list fetched for checking Mcp-Param-* headers");
	}
	hs->idle.repeat = 0.5;
	ev_timer_again(EV_DEFAULT, &hs->idle);
	while (f->probe_wait) {
		struct hreq *r = f->probe_wait;
		f->probe_wait = r->pnext;
		r->pnext = NULL;
		http_stream_wake(r);
		http_stream_unref(r);
	}
}

/* The probe's bound passed. */
void http_probe_on_bound(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	http_probe_end(w->data, "no answer in time");
}

/* The answer to the probe's tools/list (M borrowed). */
static void probe_answer(void *arg, json_t *m)
{
	struct hsess *hs = arg;
	struct http_front *f = hs->f;
	if (f->probe != hs)
		return;   /* the fetch ended already */
	json_t *result = json_object_get(m, "result");
	json_t *tools = json_object_get(result, "tools");
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (!json_is_array(tools)) {
		const char *e = json_string_value(json_object_get(json_object_get(m, "error"), "message"));
		char why[200];
		snprintf(why, sizeof why, "%s", e ? e : "no tool list in the answer");
		http_probe_end(f, why);
		return;
	}
	param_learn(&f->params, tools, "http", false);
	if (next && *next && f->probe_pages < PROBE_MAX_PAGES) {
		probe_send(f, next);
		return;
	}
	f->marks_known = true;
	http_probe_end(f, NULL);
}

/*
 * A 2026-07-28 tools/call R (PARAMS its params, borrowed) came before the
 * front learned any tool list, so it cannot tell which arguments the tool
 * marks x-mcp-header (a client may list on another instance, or before a
 * restart): R is held while a stateless session of its own, bound to R's
 * credential, fetches the list as that client would see it. True when R
 * is held (taken again from the start when the fetch ends).
 */
bool http_probe_hold(struct http_front *f, struct hreq *r, json_t *params)
{
	if (f->marks_known || f->stopped || ev_now(EV_DEFAULT) < f->probe_after)
		return false;
	bool start = !f->probe;
	if (start) {
		char why[300] = "";
		json_t *meta = json_object(), *v;
		const char *k;
		json_object_foreach(json_object_get(params, "_meta"), k, v)
			if (strncmp(k, "io.modelcontextprotocol/", 24) == 0)
				json_object_set(meta, k, v);
		char *caps = http_sess_caps_key(params);
		struct hsess *hs = caps ? http_sess_new(f, caps, NULL, NULL, why, sizeof why) : NULL;
		free(caps);
		if (!hs) {
			json_decref(meta);
			return false;
		}
		hs->stateless = true;
		http_auth_bind(hs, r);
		f->probe = hs;
		f->probe_meta = meta;
		f->probe_pages = 0;
		ev_timer_set(&f->probe_bound, PROBE_BOUND, 0.);
		ev_timer_start(EV_DEFAULT, &f->probe_bound);
		log_debug("http: session #%u: fetching the tool list to check Mcp-Param-* headers",
			  hs->serial);
	}
	r->refs++;
	r->pnext = f->probe_wait;
	f->probe_wait = r;   /* no answer yet: http_probe_end takes it again */
	if (start)
		probe_send(f, NULL);   /* may end at once (an answer from a cache) */
	return true;
}
