/*
 * agg_init.c - the client's initialize, answered by the aggregate: every
 * backend initialized concurrently, the answer the union of their
 * capabilities and instructions, given once every backend is ready (with
 * its lists fetched) or failed, or when the join bound (initJoinMs) passes;
 * a backend ready later joins and the client hears list_changed.
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "era.h"
#include "log.h"
#include "mcpc_version.h"

/* Merges capability object SRC into DST (OR of booleans, union of keys). */
static void merge_caps(json_t *dst, json_t *src)
{
	const char *k;
	json_t *v;
	json_object_foreach(src, k, v) {
		json_t *have = json_object_get(dst, k);
		if (!have)
			json_object_set(dst, k, v);
		else if (json_is_object(have) && json_is_object(v))
			merge_caps(have, v);
		else if (json_is_true(v))
			json_object_set(dst, k, v);
	}
}

/* The initialize result of the aggregate. */
static json_t *merged_result(struct aggregate *a)
{
	json_t *caps = json_object();
	char *instr = NULL;
	size_t ilen = 0;
	for (size_t i = 0; i < a->n; i++) {
		if (a->v[i]->removed)
			continue;
		json_t *c = caps_of(a->v[i]);
		json_t *copy = json_deep_copy(c);
		merge_caps(caps, copy);
		json_decref(copy);
		const char *t = json_string_value(json_object_get(a->v[i]->peer->init_result, "instructions"));
		if (!t)
			continue;
		size_t add = strlen(t) + strlen(a->v[i]->entry->name) + 16;
		char *p = realloc(instr, ilen + add);
		if (!p)
			continue;
		instr = p;
		ilen += (size_t)snprintf(instr + ilen, add, "%s## %s\n%s", ilen ? "\n\n" : "",
					 a->v[i]->entry->name, t);
	}
	if (a->joined_late) {
		/* backends still starting may bring any list: promise every one,
		 * so that the client looks when list_changed says they joined */
		for (int k = 0; k < LIST_KINDS; k++)
			if (!json_object_get(caps, agg_list_cap[k]))
				json_object_set_new(caps, agg_list_cap[k], json_object());
		if (!json_object_get(caps, "resources"))
			json_object_set_new(caps, "resources", json_pack("{s:b}", "listChanged", 1));
	}
	/* we tell clients when a backend's lists change or it restarts */
	for (int k = 0; k < LIST_KINDS; k++)
		if (json_object_get(caps, agg_list_cap[k]))
			json_object_set_new(json_object_get(caps, agg_list_cap[k]), "listChanged",
					    json_true());
	if (status_on(a)) {
		if (!json_object_get(caps, "resources"))
			json_object_set_new(caps, "resources", json_object());
	}
	/* it speaks 2026-07-28 itself when every backend that is up does */
	unsigned eras = ERA_BIT_HANDSHAKE | ERA_BIT_STATELESS;
	size_t up = 0;
	for (size_t i = 0; i < a->n; i++) {
		if (a->v[i]->removed || !a->v[i]->peer->ready)
			continue;
		up++;
		if (!(a->v[i]->peer->eras & ERA_BIT_STATELESS))
			eras &= ~ERA_BIT_STATELESS;
	}
	a->peer.eras = up ? eras : ERA_BIT_HANDSHAKE;
	const char *asked = era_handshake_version(
		json_string_value(json_object_get(a->client_params, "protocolVersion")));
	json_t *r = json_pack("{s:s,s:o,s:{s:s,s:s}}", "protocolVersion",
			      asked ? asked : era_handshake_versions[0],
			      "capabilities", caps, "serverInfo", "name", "mcp-chain",
			      "version", MCPC_VERSION);
	if (instr)
		json_object_set_new(r, "instructions", json_string(instr));
	free(instr);
	return r;
}

/* How long the client's initialize waits for backends still starting. */
static double join_bound(const struct cfg *cfg)
{
	return cfg->init_join < cfg->init_timeout ? cfg->init_join : cfg->init_timeout;
}

/* Answers the client's initialize now, with the backends that are ready. */
static void answer_init(struct aggregate *a)
{
	struct agg_init *in = a->init;
	a->init = NULL;
	ev_timer_stop(EV_DEFAULT, &in->settle);
	ev_timer_stop(EV_DEFAULT, &in->bound);
	size_t ready = 0;
	for (size_t i = 0; i < a->n; i++)
		ready += !a->v[i]->removed && a->v[i]->peer->ready;
	json_t *resp = rpc_result(json_null(), merged_result(a));
	log_info("aggregate: initialized with %zu of %zu backends ready", ready, aggregate_backends(a));
	a->peer.ready = true;
	if (in->cb)
		in->cb(in->arg, resp);
	json_decref(resp);
	free(in);
}

/* Answers the aggregate's initialize once every backend is settled. */
void agg_init_check(struct aggregate *a)
{
	if (a->init && a->init->pending == 0 && !agg_list_fetching(a))
		answer_init(a);
}

/* Deferred re-check (lets a READY event start its list refresh first). */
static void on_settle(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct agg_init *in = w->data;
	(void)loop;
	(void)revents;
	agg_init_check(in->a);
}

/*
 * The join bound passed: answer with the backends that are ready. The
 * others go on starting; each joins when it is ready (aggregate_backend_ready
 * refreshes its lists and tells the client), so one stuck backend never
 * holds the endpoint past the client's own connection timeout.
 */
static void on_bound(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct agg_init *in = w->data;
	struct aggregate *a = in->a;
	(void)loop;
	(void)revents;
	log_warn("aggregate: join bound of %g s reached; answering without the backends still starting",
		 join_bound(a->cfg));
	for (size_t i = 0; i < a->n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (a->v[i]->paging[k])
				a->v[i]->changed[k] = true;  /* tell the client when it lands */
	for (size_t i = 0; i < a->n; i++)
		if (!a->v[i]->removed && !a->v[i]->peer->ready)
			a->joined_late = true;
	answer_init(a);
}

/* One backend answered (or failed) its initialize. */
static void on_backend_init(void *arg, json_t *resp)
{
	struct slot *s = arg;
	struct aggregate *a = s->a;
	(void)resp;
	s->init_pending = false;
	if (!a->init)
		return;
	if (a->init->pending > 0)
		a->init->pending--;
	ev_timer_set(&a->init->settle, 0., 0.);
	ev_timer_start(EV_DEFAULT, &a->init->settle);
}

/* The aggregate's initialize: every backend, concurrently. */
int agg_init_start(struct peer *p, json_t *params,
		   void (*cb)(void *arg, json_t *response), void *arg)
{
	struct aggregate *a = container_of(p, struct aggregate, peer);
	if (a->init)
		return -1;
	if (a->peer.ready) {  /* a later session: answer from what we have */
		json_t *merged = merged_result(a);
		json_t *resp = rpc_result(json_null(), era_result_for(merged,
			json_string_value(json_object_get(params, "protocolVersion"))));
		json_decref(merged);
		cb(arg, resp);
		json_decref(resp);
		return 0;
	}
	struct agg_init *in = calloc(1, sizeof *in);
	if (!in)
		return -1;
	in->a = a;
	in->cb = cb;
	in->arg = arg;
	json_decref(a->client_params);
	a->client_params = json_deep_copy(params);
	ev_timer_init(&in->settle, on_settle, 0., 0.);
	ev_timer_init(&in->bound, on_bound, join_bound(a->cfg), 0.);
	in->settle.data = in->bound.data = in;
	ev_timer_start(EV_DEFAULT, &in->bound);
	a->init = in;
	for (size_t i = 0; i < a->n; i++) {
		struct peer *b = a->v[i]->peer;
		if (a->v[i]->removed)
			continue;
		in->pending++;
		a->v[i]->init_pending = true;   /* before: it may answer at once */
		if (b->ops->initialize(b, params, on_backend_init, a->v[i]) < 0) {
			log_warn("%s: not available (%s)", a->v[i]->entry->name,
				 b->why_down[0] ? b->why_down : "not started");
			a->v[i]->init_pending = false;
			in->pending--;
		}
	}
	ev_timer_start(EV_DEFAULT, &in->settle);
	return 0;
}

/* The session waiting for the aggregate's initialize goes away. */
void agg_init_forget(struct peer *p, void *arg)
{
	struct aggregate *a = container_of(p, struct aggregate, peer);
	if (a->init && a->init->arg == arg)
		a->init->cb = NULL;
}

/* A backend taken out is not waited for. */
void agg_init_drop(struct slot *s)
{
	struct aggregate *a = s->a;
	struct peer *backend = s->peer;
	if (!s->init_pending)
		return;
	/* its answer would come to this slot, maybe after the aggregate is
	 * gone (a backend shared with other sessions): not waited for */
	s->init_pending = false;
	if (backend->ops->forget_initialize)
		backend->ops->forget_initialize(backend, s);
	if (a->init && a->init->pending > 0) {
		a->init->pending--;
		ev_timer_set(&a->init->settle, 0., 0.);
		ev_timer_start(EV_DEFAULT, &a->init->settle);
	}
}

/* Frees the initialize being answered. */
void agg_init_free(struct aggregate *a)
{
	if (!a->init)
		return;
	ev_timer_stop(EV_DEFAULT, &a->init->settle);
	ev_timer_stop(EV_DEFAULT, &a->init->bound);
	free(a->init);
}
