/*
 * aggregate.c - several backends behind one endpoint: namespaced names,
 * merged lists, merged initialize, the status resource; and the chain's
 * router (chain.h) for them. With one backend it routes everything to it
 * unchanged and only keeps the client told across restarts.
 *
 * It uses the core the way a backend does: it is a peer of the chain (it
 * answers lists, paging and the status resource as responses the chain
 * carries back through the modules), and asks backends for their lists
 * through each backend's own modules (slot_call).
 */
#include "aggregate.h"

#include <ev.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "era.h"
#include "msg.h"
#include "hmap.h"
#include "log.h"
#include "mcpc_version.h"
#include "rpc.h"
#include "agg_tasks.h"

#define NAME_MAX_LEN 64
#define STATUS_URI "mcp-chain://status"

enum list_kind { LIST_TOOLS, LIST_PROMPTS, LIST_KINDS };

static const char *const list_method[LIST_KINDS] = { "tools/list", "prompts/list" };
static const char *const list_key[LIST_KINDS] = { "tools", "prompts" };
static const char *const list_cap[LIST_KINDS] = { "tools", "prompts" };
static const char *const list_note[LIST_KINDS] = {
	"notifications/tools/list_changed", "notifications/prompts/list_changed"
};

/* A list result's cacheScope, most private last. */
enum { SCOPE_NONE, SCOPE_PUBLIC, SCOPE_PRIVATE };

struct aggregate;

/* A backend as the aggregate sees it. */
struct slot {
	struct aggregate *a;         /* the aggregate it belongs to */
	struct peer *peer;
	const struct cfg_server *entry;
	const char *prefix;
	size_t index;                /* in a->v */
	bool removed;                /* taken out by a reload: ignored */
	json_t *items[LIST_KINDS];   /* owned: its tools and prompts, its names */
	json_t *paging[LIST_KINDS];  /* owned: a refresh being gathered */
	bool changed[LIST_KINDS];    /* tell clients when the refresh ends */
	json_int_t ttl[LIST_KINDS];  /* its list's ttlMs, or -1 when it gave none */
	int scope[LIST_KINDS];       /* its cacheScope: SCOPE_* */
	json_int_t pttl[LIST_KINDS]; /* the same, of the refresh being gathered */
	int pscope[LIST_KINDS];
	double expires[LIST_KINDS];  /* ev_now() after which its list is stale; 0: never */
	bool sent_initialized;       /* this run got notifications/initialized */
	bool was_down;
	bool joined;                 /* has been ready once */
	bool init_pending;           /* its handshake for the client's initialize
				      * has not answered yet */
};

/* Where an exposed name leads. */
struct mapping {
	size_t slot;
	char *orig;
	struct mapping *next;        /* the mappings of one kind, for freeing */
};

/* An initialize being answered for the aggregate. */
struct agg_init {
	struct aggregate *a;
	void (*cb)(void *arg, json_t *response);
	void *arg;
	size_t pending;
	ev_timer settle;             /* re-checks once the current stack unwinds */
	ev_timer bound;              /* the join bound (initJoinMs) */
};

struct aggregate {
	struct chain_router router;   /* what the chain asks (first member) */
	struct chain *chain;
	const struct cfg *cfg;
	struct slot **v;       /* each slot allocated once, never moved */
	size_t n;
	bool multi;
	bool client_initialized;
	struct peer peer;             /* the aggregate's own peer ("mcp-chain") */
	struct hmap map[LIST_KINDS];  /* exposed name -> mapping */
	struct mapping *maps[LIST_KINDS];
	json_t *view[LIST_KINDS];     /* owned: merged lists with exposed names */
	char *view_line[LIST_KINDS];  /* owned: a whole response holding the view,
				       * with id 0; made on demand */
	size_t view_len[LIST_KINDS];
	json_t *uri_owner;            /* owned: uri -> slot index */
	json_t *templates;            /* owned: [[template, slot index], ...] */
	json_t *client_params;        /* owned */
	json_t *waiting[LIST_KINDS];  /* owned: ids of list requests waiting for
				       * a refresh of lists whose ttlMs ran out */
	struct agg_tasks *tasks;      /* owned: live task ids -> backend */
	struct agg_init *init;
	bool joined_late;             /* initialize was answered without a backend
				       * still starting: every list is promised */
	json_t *(*status_fn)(void *arg);
	void *status_arg;
};

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

static void rebuild(struct aggregate *a, enum list_kind k);

/* True when the status resource is exposed: by default with several backends. */
static bool status_on(struct aggregate *a)
{
	return a->cfg->status_set ? a->cfg->status : a->multi;
}

static void fetch_list(struct slot *s, enum list_kind k, const char *cursor);

/* The slot of a backend peer, or NULL. */
static struct slot *slot_of(struct aggregate *a, struct peer *p)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->peer == p && !a->v[i]->removed)
			return a->v[i];
	return NULL;
}

/* The first backend not removed by a reload (there is always one). */
static struct slot *first_active(struct aggregate *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (!a->v[i]->removed)
			return a->v[i];
	return a->v[0];
}

/*
 * Asks slot S's backend METHOD (PARAMS stolen) through the backend's own
 * modules, as a request of the aggregate's chain: a backend shared with
 * other chains answers it with an error when this one lets go of it.
 */
static int slot_call(struct slot *s, const char *method, json_t *params,
		     void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	return chain_call_in(s->a->chain, s->peer, method, params, s->peer->pl, cb, arg);
}

/* A backend's initialize result capabilities (borrowed). */
static json_t *caps_of(struct slot *s)
{
	return s->peer->ready ? json_object_get(s->peer->init_result, "capabilities") : NULL;
}

/* Sends a notification of the aggregate's own to every client. */
static void notify_clients(struct aggregate *a, const char *method)
{
	chain_notify(a->multi ? &a->peer : first_active(a)->peer, NULL, rpc_notification(method, NULL));
}

/* ---------- names ---------- */

/* FNV-1a of a string, for short stable name suffixes. */
static unsigned fnv(const char *a, const char *b)
{
	unsigned h = 2166136261u;
	for (const char *p = a; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = b; p && *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* Makes PREFIX SEP ORIG safe for clients: [A-Za-z0-9_-], at most 64. */
static void expose(struct aggregate *a, char out[NAME_MAX_LEN + 1], const char *prefix, const char *orig,
		   const char *salt)
{
	char raw[1024];
	snprintf(raw, sizeof raw, "%s%s%s", prefix, a->cfg->separator, orig);
	size_t n = strlen(raw);
	for (size_t i = 0; i < n; i++) {
		char c = raw[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			raw[i] = '_';
	}
	if (n <= NAME_MAX_LEN && !salt) {
		memcpy(out, raw, n + 1);
		return;
	}
	/* too long, or taken: keep the head, add a hash of the full name */
	size_t keep = n < NAME_MAX_LEN - 9 ? n : NAME_MAX_LEN - 9;
	memcpy(out, raw, keep);
	snprintf(out + keep, NAME_MAX_LEN + 1 - keep, "_%08x", fnv(orig, salt ? salt : prefix));
}

/* A backend's head: its prefix and the separator (task ids are exposed as
 * head + the backend's own id). */
static void slot_head(struct slot *s, char *out, size_t n)
{
	snprintf(out, n, "%s%s", s->prefix, s->a->cfg->separator);
}

/* Frees every mapping of kind K. */
static void clear_maps(struct aggregate *a, enum list_kind k)
{
	while (a->maps[k]) {
		struct mapping *m = a->maps[k];
		a->maps[k] = m->next;
		free(m->orig);
		free(m);
	}
	hmap_release(&a->map[k]);
}

/* Records NAME -> (slot, orig). */
static void add_mapping(struct aggregate *a, enum list_kind k, const char *name, size_t slot, const char *orig)
{
	struct mapping *m = calloc(1, sizeof *m);
	if (!m)
		return;
	m->slot = slot;
	m->orig = strdup(orig);
	m->next = a->maps[k];
	a->maps[k] = m;
	hmap_put(&a->map[k], name, strlen(name), m);
}

/* Adds one backend item to the merged view under its exposed name. */
static void expose_item(struct aggregate *a, enum list_kind k, size_t i, json_t *item)
{
	const char *orig = json_string_value(json_object_get(item, "name"));
	char name[NAME_MAX_LEN + 1], plain[1024];
	if (!orig)
		return;
	expose(a, name, a->v[i]->prefix, orig, NULL);
	for (unsigned n = 0; hmap_get(&a->map[k], name, strlen(name)); n++) {
		char salt[300];
		snprintf(salt, sizeof salt, "%s/%u", a->v[i]->entry->name, n);
		expose(a, name, a->v[i]->prefix, orig, salt);
		log_warn("%s %s of %s collides with another name; exposed as %s",
			 list_key[k], orig, a->v[i]->entry->name, name);
	}
	snprintf(plain, sizeof plain, "%s%s%s", a->v[i]->prefix, a->cfg->separator, orig);
	if (strcmp(plain, name) != 0)
		log_info("%s: %s \"%s\" exposed as \"%s\" (client-safe name)",
			 a->v[i]->entry->name, k == LIST_TOOLS ? "tool" : "prompt", orig, name);
	add_mapping(a, k, name, i, orig);
	if (!a->v[i]->peer->ready)
		return;  /* its names stay reserved while it is down */
	json_t *copy = json_copy(item);
	json_object_set_new(copy, "name", json_string(name));
	json_array_append_new(a->view[k], copy);
}

/* Rebuilds the merged view and name map of kind K from the slots. */
static void rebuild(struct aggregate *a, enum list_kind k)
{
	clear_maps(a, k);
	free(a->view_line[k]);
	a->view_line[k] = NULL;
	json_decref(a->view[k]);
	a->view[k] = json_array();
	for (size_t i = 0; i < a->n; i++) {
		size_t j;
		json_t *item;
		if (a->v[i]->removed)
			continue;
		json_array_foreach(a->v[i]->items[k], j, item)
			expose_item(a, k, i, item);
	}
}

/* ---------- list caches ---------- */

struct fetch {
	struct slot *s;
	enum list_kind k;
};

static void check_init_done(struct aggregate *a);

static void flush_waiting(struct aggregate *a, enum list_kind k);

/* Takes the ttlMs and cacheScope of a page of a refresh (the first page
 * starts afresh; later ones can only shorten or narrow them). */
static void page_hints(struct slot *s, enum list_kind k, json_t *result)
{
	json_t *ttl = json_object_get(result, "ttlMs");
	const char *scope = json_string_value(json_object_get(result, "cacheScope"));
	if (json_is_number(ttl)) {
		double v = json_number_value(ttl);
		json_int_t ms = v < 0 ? 0 : v > 1e12 ? (json_int_t)1e12 : (json_int_t)v;
		if (s->pttl[k] < 0 || ms < s->pttl[k])
			s->pttl[k] = ms;
	}
	if (scope) {
		int sc = strcmp(scope, "public") == 0 ? SCOPE_PUBLIC : SCOPE_PRIVATE;
		if (sc > s->pscope[k])
			s->pscope[k] = sc;
	}
}

/* A page of a backend's list arrived. */
static void on_list_page(struct exchange *ex, json_t *msg, void *arg)
{
	struct fetch *f = arg;
	struct slot *s = f->s;
	struct aggregate *a = s->a;
	enum list_kind k = f->k;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	free(f);
	if (!s->paging[k])
		return;
	json_array_extend(s->paging[k], json_object_get(result, list_key[k]));
	page_hints(s, k, result);
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (result && next && *next && s->peer->ready) {
		fetch_list(s, k, next);
		return;
	}
	if (!result) {
		log_warn("%s: %s failed; keeping what was listed", s->entry->name, list_method[k]);
		json_decref(s->paging[k]);
		if (s->ttl[k] >= 0)
			s->expires[k] = ev_now(EV_DEFAULT);  /* still stale: asked again next time */
	} else {
		json_decref(s->items[k]);
		s->items[k] = s->paging[k];
		s->ttl[k] = s->pttl[k];
		s->scope[k] = s->pscope[k];
		/* its own cache of the list lasts as long as the backend says */
		s->expires[k] = s->ttl[k] >= 0 ? ev_now(EV_DEFAULT) + (double)s->ttl[k] / 1000. : 0.;
	}
	s->paging[k] = NULL;
	rebuild(a, k);
	if (s->changed[k] && a->client_initialized)
		notify_clients(a, list_note[k]);
	s->changed[k] = false;
	flush_waiting(a, k);
	check_init_done(a);
}

/* Asks a backend for (the next page of) its list of kind K. */
static void fetch_list(struct slot *s, enum list_kind k, const char *cursor)
{
	struct fetch *f = calloc(1, sizeof *f);
	if (!f)
		return;
	f->s = s;
	f->k = k;
	if (!s->paging[k]) {
		s->paging[k] = json_array();
		s->pttl[k] = -1;
		s->pscope[k] = SCOPE_NONE;
	}
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
	if (slot_call(s, list_method[k], params, on_list_page, f) < 0) {
		json_decref(s->paging[k]);
		s->paging[k] = NULL;
	}
}

/* Keeps a backend's resource templates, for routing URIs never listed. */
static void on_templates(struct exchange *ex, json_t *msg, void *arg)
{
	struct slot *s = arg;
	struct aggregate *a = s->a;
	json_t *result = json_object_get(msg, "result");
	json_t *items = json_object_get(result, "resourceTemplates");
	size_t idx = s->index, i;
	json_t *it;
	(void)ex;
	json_array_foreach(items, i, it) {
		const char *tpl = json_string_value(json_object_get(it, "uriTemplate"));
		if (tpl)
			json_array_append_new(a->templates, json_pack("[s,I]", tpl, (json_int_t)idx));
	}
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (next && *next && s->peer->ready)
		slot_call(s, "resources/templates/list", json_pack("{s:s}", "cursor", next),
			  on_templates, s);
}

/* Refreshes every list a backend has. */
static void refresh(struct slot *s, bool tell)
{
	struct aggregate *a = s->a;
	json_t *caps = caps_of(s);
	for (size_t i = json_array_size(a->templates); i-- > 0;)  /* forget its old ones */
		if ((size_t)json_integer_value(json_array_get(json_array_get(a->templates, i), 1)) ==
		    s->index)
			json_array_remove(a->templates, i);
	if (json_object_get(caps, "resources"))
		slot_call(s, "resources/templates/list", json_object(), on_templates, s);
	for (int k = 0; k < LIST_KINDS; k++) {
		if (!json_object_get(caps, list_cap[k]) || s->paging[k])
			continue;
		s->changed[k] = tell;
		fetch_list(s, (enum list_kind)k, NULL);
	}
}

/* True while any list refresh is running. */
static bool fetching(struct aggregate *a)
{
	for (size_t i = 0; i < a->n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (a->v[i]->paging[k])
				return true;
	return false;
}

/* ---------- aggregated initialize ---------- */

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
			if (!json_object_get(caps, list_cap[k]))
				json_object_set_new(caps, list_cap[k], json_object());
		if (!json_object_get(caps, "resources"))
			json_object_set_new(caps, "resources", json_pack("{s:b}", "listChanged", 1));
	}
	/* we tell clients when a backend's lists change or it restarts */
	for (int k = 0; k < LIST_KINDS; k++)
		if (json_object_get(caps, list_cap[k]))
			json_object_set_new(json_object_get(caps, list_cap[k]), "listChanged", json_true());
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
static void check_init_done(struct aggregate *a)
{
	if (a->init && a->init->pending == 0 && !fetching(a))
		answer_init(a);
}

/* Deferred re-check (lets a READY event start its list refresh first). */
static void on_settle(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct agg_init *in = w->data;
	(void)loop;
	(void)revents;
	check_init_done(in->a);
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
static int agg_initialize(struct peer *p, json_t *params,
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

/* ---------- the aggregate's own answers ---------- */

/* Delivers the aggregate's response to request ID. */
static void agg_reply(struct aggregate *a, json_t *id, json_t *resp_without_id)
{
	json_object_set(resp_without_id, "id", id);
	a->peer.rx_bytes = 0;
	chain_receive(&a->peer, resp_without_id);
}

#define VIEW_HEAD "{\"jsonrpc\":\"2.0\",\"id\":"
#define VIEW_ID "0"
#define VIEW_RESULT ",\"result\":"

/* The slots whose list of kind K is in the merged view. */
static bool in_view(struct slot *s, enum list_kind k)
{
	return !s->removed && s->peer->ready && s->items[k];
}

/*
 * The caching hints of the merged list of kind K: *TTL the smallest of
 * the backends' ttlMs, a backend that gave none counting as 0 (-1 when
 * none gave one); *SCOPE private when any backend's list is private or
 * says nothing while others speak (the front would call it private),
 * public when every one says public (SCOPE_NONE when none says).
 */
static void merged_hints(struct aggregate *a, enum list_kind k, json_int_t *ttl, int *scope)
{
	bool any_ttl = false, any_scope = false, all_public = true;
	json_int_t min = -1;
	for (size_t i = 0; i < a->n; i++) {
		struct slot *s = a->v[i];
		if (!in_view(s, k))
			continue;
		json_int_t t = s->ttl[k] >= 0 ? s->ttl[k] : 0;
		any_ttl |= s->ttl[k] >= 0;
		if (min < 0 || t < min)
			min = t;
		any_scope |= s->scope[k] != SCOPE_NONE;
		all_public &= s->scope[k] == SCOPE_PUBLIC;
	}
	*ttl = any_ttl ? min : -1;
	*scope = !any_scope ? SCOPE_NONE : all_public ? SCOPE_PUBLIC : SCOPE_PRIVATE;
}

/* Sets the merged list's hints on result R. */
static void set_hints(struct aggregate *a, enum list_kind k, json_t *r)
{
	json_int_t ttl;
	int scope;
	merged_hints(a, k, &ttl, &scope);
	if (ttl >= 0)
		json_object_set_new(r, "ttlMs", json_integer(ttl));
	if (scope != SCOPE_NONE)
		json_object_set_new(r, "cacheScope",
				    json_string(scope == SCOPE_PUBLIC ? "public" : "private"));
}

/* Makes the cached response of kind K: its head, the view, its hints, its end. */
static bool make_view_line(struct aggregate *a, enum list_kind k)
{
	char *text = json_dumps(a->view[k], JSON_COMPACT);
	if (!text)
		return false;
	size_t tn = strlen(text);
	char head[64], tail[96] = "";
	int hn = snprintf(head, sizeof head, VIEW_HEAD VIEW_ID VIEW_RESULT "{\"%s\":", list_key[k]);
	json_int_t ttl;
	int scope;
	merged_hints(a, k, &ttl, &scope);
	int tl = 0;
	if (ttl >= 0)
		tl += snprintf(tail + tl, sizeof tail - (size_t)tl, ",\"ttlMs\":%" JSON_INTEGER_FORMAT, ttl);
	if (scope != SCOPE_NONE)
		tl += snprintf(tail + tl, sizeof tail - (size_t)tl, ",\"cacheScope\":\"%s\"",
			       scope == SCOPE_PUBLIC ? "public" : "private");
	char *line = malloc((size_t)hn + tn + (size_t)tl + 2);
	if (line) {
		memcpy(line, head, (size_t)hn);
		memcpy(line + hn, text, tn);
		memcpy(line + hn + tn, tail, (size_t)tl);
		memcpy(line + hn + tn + tl, "}}", 2);
		a->view_line[k] = line;
		a->view_len[k] = (size_t)hn + tn + (size_t)tl + 2;
	}
	free(text);
	return line != NULL;
}

/*
 * Answers a list request from the cached response of the merged list, as
 * a message of bytes (msg_init_own): the chain splices the requester's id
 * over the placeholder, so a listing costs no scan, allocation or copy
 * here unless a module reads it. Returns false when the caller
 * must answer with a tree.
 */
static bool agg_list_fast(struct aggregate *a, json_t *id, enum list_kind k)
{
	if (!json_is_integer(id) || !a->view[k])
		return false;
	if (!a->view_line[k] && !make_view_line(a, k))
		return false;
	const char *line = a->view_line[k], *res = line + strlen(VIEW_HEAD VIEW_ID VIEW_RESULT);
	struct jspan idspan = { line + strlen(VIEW_HEAD), strlen(VIEW_ID) };
	struct jspan result = { res, (size_t)(line + a->view_len[k] - 1 - res) };
	struct msg m;
	msg_init_own(&m, line, a->view_len[k], idspan, json_integer_value(id), result);
	a->peer.rx_bytes = 0;
	chain_receive_msg(&a->peer, &m);
	return true;
}

/* Answers list request ID of kind K from the merged view. */
static void answer_list(struct aggregate *a, json_t *id, enum list_kind k)
{
	if (agg_list_fast(a, id, k))
		return;
	json_t *r = json_object();
	/* no view before any backend listed: an empty list (new, not leaked) */
	json_object_set_new(r, list_key[k], a->view[k] ? json_incref(a->view[k]) : json_array());
	set_hints(a, k, r);
	agg_reply(a, id, rpc_result(json_null(), r));
}

/* True while some backend's list of kind K is being fetched. */
static bool paging_kind(struct aggregate *a, enum list_kind k)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->paging[k])
			return true;
	return false;
}

/* Answers the list requests that waited for a refresh, once none runs. */
static void flush_waiting(struct aggregate *a, enum list_kind k)
{
	if (!a->waiting[k] || paging_kind(a, k))
		return;
	json_t *ids = a->waiting[k];
	size_t i;
	json_t *id;
	a->waiting[k] = NULL;
	json_array_foreach(ids, i, id)
		answer_list(a, id, k);
	json_decref(ids);
}

/*
 * A backend's list whose ttlMs ran out is not served from the cache:
 * fetches every stale list of kind K and holds request ID until they are
 * in (or failed). False when nothing is stale (answer now).
 */
static bool refresh_stale(struct aggregate *a, json_t *id, enum list_kind k)
{
	double now = ev_now(EV_DEFAULT);
	bool any = false;
	for (size_t i = 0; i < a->n; i++) {
		struct slot *s = a->v[i];
		if (!in_view(s, k) || s->expires[k] <= 0 || now < s->expires[k])
			continue;
		if (!s->paging[k])
			fetch_list(s, k, NULL);
		any |= s->paging[k] != NULL;
	}
	if (!any || !paging_kind(a, k))
		return false;
	if (!a->waiting[k])
		a->waiting[k] = json_array();
	json_array_append(a->waiting[k], id);
	return true;
}

/* Hex-encodes a cursor so that clients treat it as opaque. */
static json_t *make_cursor(size_t slot, const char *inner)
{
	char raw[600], hex[1300];
	int n = snprintf(raw, sizeof raw, "%zu:%s", slot, inner ? inner : "");
	if (n < 0 || (size_t)n >= sizeof raw)
		return NULL;
	for (int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)raw[i]);
	return json_string(hex);
}

/* Decodes a cursor; returns 0 or -1. INNER gets the backend's cursor. */
static int read_cursor(struct aggregate *a, const char *hex, size_t *slot, char *inner, size_t n)
{
	char raw[600];
	size_t len = strlen(hex);
	if (len % 2 || len / 2 >= sizeof raw)
		return -1;
	for (size_t i = 0; i < len / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		raw[i] = (char)v;
	}
	raw[len / 2] = '\0';
	char *colon = strchr(raw, ':');
	if (!colon)
		return -1;
	*colon = '\0';
	char *end;
	unsigned long s = strtoul(raw, &end, 10);
	if (*end || s >= a->n)
		return -1;
	*slot = s;
	snprintf(inner, n, "%s", colon + 1);
	return 0;
}

struct page_req {
	struct aggregate *a;
	json_t *id;           /* the client-side request's id on the aggregate */
	size_t slot;
	const char *method;   /* resources/list or resources/templates/list */
	const char *key;
	bool tasks;           /* tasks/list: backends with tasks.list, ids exposed */
	bool first;           /* the status resource goes on the first page */
};

static void next_page(struct page_req *pr, const char *inner);

/* The first slot at or after I with resources, or a->n. */
static size_t next_resource_slot(struct aggregate *a, size_t i)
{
	for (; i < a->n; i++)
		if (!a->v[i]->removed && json_object_get(caps_of(a->v[i]), "resources"))
			return i;
	return a->n;
}

/* The first slot at or after I that lists tasks, or a->n. */
static size_t next_task_slot(struct aggregate *a, size_t i)
{
	for (; i < a->n; i++)
		if (!a->v[i]->removed &&
		    json_object_get(json_object_get(caps_of(a->v[i]), "tasks"), "list"))
			return i;
	return a->n;
}

/* The next slot a page request PR goes on to after slot I. */
static size_t next_page_slot(struct page_req *pr, size_t i)
{
	return pr->tasks ? next_task_slot(pr->a, i) : next_resource_slot(pr->a, i);
}

/* Remembers where listed URIs and templates live. */
static void learn_owners(struct page_req *pr, json_t *items)
{
	struct aggregate *a = pr->a;
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) {
		const char *uri = json_string_value(json_object_get(it, "uri"));
		const char *tpl = json_string_value(json_object_get(it, "uriTemplate"));
		if (uri && !json_object_get(a->uri_owner, uri))
			json_object_set_new(a->uri_owner, uri, json_integer((json_int_t)pr->slot));
		if (tpl)
			json_array_append_new(a->templates, json_pack("[s,I]", tpl, (json_int_t)pr->slot));
	}
}

/* Finishes a page (ITEMS stolen) with the caching hints of the backend's
 * result FROM (borrowed, may be NULL): our cursor points at what follows. */
static void finish_page(struct page_req *pr, json_t *items, const char *inner_next, json_t *from)
{
	struct aggregate *a = pr->a;
	json_t *result = json_object();
	json_t *ttl = json_object_get(from, "ttlMs"), *scope = json_object_get(from, "cacheScope");
	if (ttl)
		json_object_set(result, "ttlMs", ttl);
	if (scope)
		json_object_set(result, "cacheScope", scope);
	if (pr->first && status_on(a) && strcmp(pr->method, "resources/list") == 0)
		json_array_insert_new(items, 0, json_pack("{s:s,s:s,s:s,s:s}", "uri", STATUS_URI,
			"name", "mcp-chain status", "description",
			"State of every backend behind this mcp-chain", "mimeType", "application/json"));
	json_object_set_new(result, pr->key, items);
	json_t *cur = NULL;
	if (inner_next && *inner_next)
		cur = make_cursor(pr->slot, inner_next);
	else if (next_page_slot(pr, pr->slot + 1) < a->n)
		cur = make_cursor(next_page_slot(pr, pr->slot + 1), "");
	if (cur)
		json_object_set_new(result, "nextCursor", cur);
	agg_reply(a, pr->id, rpc_result(json_null(), result));
	json_decref(pr->id);
	free(pr);
}

/* A backend's resources page arrived. */
static void on_resource_page(struct exchange *ex, json_t *msg, void *arg)
{
	struct page_req *pr = arg;
	struct aggregate *a = pr->a;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	json_t *items = json_object_get(result, pr->key);
	if (!json_is_array(items)) {
		log_warn("%s: %s failed; skipped", a->v[pr->slot]->entry->name, pr->method);
		size_t next = next_page_slot(pr, pr->slot + 1);
		if (next < a->n) {
			pr->slot = next;
			next_page(pr, NULL);
			return;
		}
		finish_page(pr, json_array(), NULL, NULL);
		return;
	}
	if (pr->tasks) {  /* the backend's ids, exposed; its live tasks learnt */
		json_t *copy = json_deep_copy(result);
		char head[300];
		slot_head(a->v[pr->slot], head, sizeof head);
		agg_tasks_expose(a->tasks, copy, pr->slot, head);
		finish_page(pr, json_incref(json_object_get(copy, pr->key)),
			    json_string_value(json_object_get(result, "nextCursor")), NULL);
		json_decref(copy);
		return;
	}
	learn_owners(pr, items);
	finish_page(pr, json_copy(items), json_string_value(json_object_get(result, "nextCursor")),
		    result);
}

/* Asks the current slot for the page at INNER. */
static void next_page(struct page_req *pr, const char *inner)
{
	struct aggregate *a = pr->a;
	struct slot *s = a->v[pr->slot];
	json_t *params = inner && *inner ? json_pack("{s:s}", "cursor", inner) : json_object();
	if (!s->peer->ready ||
	    slot_call(s, pr->method, params, on_resource_page, pr) < 0) {
		json_t *err = rpc_errorf(NULL, RPC_BACKEND_GONE, "backend unavailable");
		on_resource_page(NULL, err, pr);
		json_decref(err);
	}
}

/* resources/list and resources/templates/list across backends. */
static void agg_resources(struct aggregate *a, json_t *msg, const char *method, const char *key)
{
	json_t *id = json_object_get(msg, "id");
	const char *cursor = json_string_value(json_object_get(json_object_get(msg, "params"), "cursor"));
	struct page_req *pr = calloc(1, sizeof *pr);
	char inner[600] = "";
	if (!pr) {
		agg_reply(a, id, rpc_error(NULL, RPC_INTERNAL_ERROR, "out of memory", NULL));
		return;
	}
	pr->a = a;
	pr->id = json_incref(id);
	/* static strings: the request (and its method string) is freed on return */
	pr->method = strcmp(method, "resources/list") == 0 ? "resources/list" :
		     "resources/templates/list";
	pr->key = key;
	pr->tasks = strcmp(method, "tasks/list") == 0;
	if (pr->tasks)
		pr->method = "tasks/list";
	if (cursor) {
		if (read_cursor(a, cursor, &pr->slot, inner, sizeof inner) < 0) {
			agg_reply(a, id, rpc_error(NULL, RPC_INVALID_PARAMS, "invalid cursor", NULL));
			json_decref(pr->id);
			free(pr);
			return;
		}
	} else {
		pr->first = true;
		pr->slot = next_page_slot(pr, 0);
	}
	if (pr->slot >= a->n) {
		finish_page(pr, json_array(), NULL, NULL);
		return;
	}
	next_page(pr, inner);
}

/* The status resource's contents. */
static void agg_status(struct aggregate *a, json_t *id)
{
	json_t *st = a->status_fn ? a->status_fn(a->status_arg) : json_object();
	char *text = json_dumps(st, JSON_INDENT(2));
	json_decref(st);
	json_t *r = json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", STATUS_URI,
			      "mimeType", "application/json", "text", text ? text : "{}");
	free(text);
	agg_reply(a, id, rpc_result(json_null(), r));
}

/* Sends logging/setLevel to every backend that logs; answers at once. */
static void agg_set_level(struct aggregate *a, json_t *msg)
{
	for (size_t i = 0; i < a->n; i++) {
		if (!json_object_get(caps_of(a->v[i]), "logging"))
			continue;
		json_t *params = json_deep_copy(json_object_get(msg, "params"));
		slot_call(a->v[i], "logging/setLevel", params, NULL, NULL);
	}
	agg_reply(a, json_object_get(msg, "id"), rpc_result(json_null(), json_object()));
}

/* ---------- tasks ---------- */

static int agg_send(struct peer *p, json_t *msg, const struct peer_out *o);

/* The requests about a task named by params.taskId. */
static bool is_task_method(const char *m)
{
	return strcmp(m, "tasks/get") == 0 || strcmp(m, "tasks/result") == 0 ||
		strcmp(m, "tasks/cancel") == 0 || strcmp(m, "tasks/update") == 0;
}

/* A request the aggregate relays to a backend to see its answer. */
struct relay {
	struct aggregate *a;
	json_t *id;           /* owned: the request's id on the aggregate */
	size_t slot;
	char *exposed;        /* owned: tasks/result's task id, or NULL */
};

/* The backend answered a relayed request: its task ids are exposed. */
static void on_relay(struct exchange *ex, json_t *msg, void *arg)
{
	struct relay *r = arg;
	struct aggregate *a = r->a;
	json_t *resp = json_deep_copy(msg);
	json_t *result = json_object_get(resp, "result");
	(void)ex;
	json_object_del(resp, "id");
	if (result && r->slot < a->n) {
		char head[300];
		slot_head(a->v[r->slot], head, sizeof head);
		agg_tasks_expose(a->tasks, result, r->slot, head);
		if (r->exposed)  /* tasks/result answers once the task has ended */
			agg_tasks_del(a->tasks, r->exposed);
	}
	agg_reply(a, r->id, resp);
	json_decref(r->id);
	free(r->exposed);
	free(r);
}

/* Relays request METHOD with PARAMS (stolen) to backend slot S for ID. */
static void relay(struct aggregate *a, struct slot *s, const char *method, json_t *params,
		  json_t *id, const char *exposed)
{
	struct relay *r = calloc(1, sizeof *r);
	if (!r || !s->peer->ready) {
		free(r);
		json_decref(params);
		agg_reply(a, id, rpc_errorf(NULL, RPC_BACKEND_GONE, "backend %s is not available%s%s%s",
			s->entry->name, s->peer->why_down[0] ? " (" : "", s->peer->why_down,
			s->peer->why_down[0] ? ")" : ""));
		return;
	}
	r->a = a;
	r->id = json_incref(id);
	r->slot = s->index;
	r->exposed = exposed ? strdup(exposed) : NULL;
	/* answered (or failed) through on_relay whatever happens */
	if (slot_call(s, method, params, on_relay, r) < 0) {
		json_t *err = rpc_errorf(NULL, RPC_INTERNAL_ERROR, "out of memory");
		on_relay(NULL, err, r);
		json_decref(err);
	}
}

/*
 * The backend of exposed task id ID: its entry in the table, else the
 * backend whose head starts ID (the longest), for a task whose entry went
 * (it ended, or the table was full). NULL when none; *ORIG then unset.
 */
static struct slot *task_owner(struct aggregate *a, const char *id, const char **orig)
{
	size_t slot;
	if (agg_tasks_get(a->tasks, id, &slot, orig) && slot < a->n && !a->v[slot]->removed)
		return a->v[slot];
	struct slot *best = NULL;
	size_t best_n = 0;
	for (size_t i = 0; i < a->n; i++) {
		char head[300];
		slot_head(a->v[i], head, sizeof head);
		size_t n = strlen(head);
		if (a->v[i]->removed || n <= best_n || strncmp(id, head, n) != 0 || !id[n])
			continue;
		best = a->v[i];
		best_n = n;
	}
	if (best)
		*orig = id + best_n;
	return best;
}

/* tasks/get, tasks/result, tasks/cancel, tasks/update: to the task's backend. */
static void agg_task_request(struct aggregate *a, json_t *msg, const char *m, json_t *id)
{
	json_t *params = json_object_get(msg, "params");
	const char *tid = json_string_value(json_object_get(params, "taskId")), *orig = NULL;
	struct slot *s = tid ? task_owner(a, tid, &orig) : NULL;
	if (!s) {
		agg_reply(a, id, rpc_errorf(NULL, RPC_INVALID_PARAMS, tid ?
			"Failed to retrieve task: Task not found (%s is no task of any backend)" :
			"Invalid params: %s needs a taskId", tid ? tid : m));
		return;
	}
	json_t *p = json_deep_copy(params);
	json_object_set_new(p, "taskId", json_string(orig));
	relay(a, s, m, p, id, strcmp(m, "tasks/result") == 0 ? tid : NULL);
}

static struct peer *route_request(struct aggregate *a, json_t *msg, const char *method,
				  int *code, char *err, size_t errlen);

/*
 * A request with params.task (the backend may answer with a task): routed
 * as it would be (names renamed), then relayed so that the task id in the
 * answer is exposed and remembered. One the aggregate answers itself is
 * answered as such (no task: a receiver may ignore params.task).
 */
static void agg_task_augmented(struct aggregate *a, json_t *msg, const char *m, json_t *id,
			       const struct peer_out *o)
{
	int code = RPC_INVALID_PARAMS;
	char why[300] = "";
	struct peer *to = route_request(a, msg, m, &code, why, sizeof why);
	struct slot *s = to ? slot_of(a, to) : NULL;
	if (to == &a->peer) {
		json_object_del(json_object_get(msg, "params"), "task");
		agg_send(&a->peer, msg, o);
		return;
	}
	if (!s) {
		agg_reply(a, id, rpc_error(NULL, code, why[0] ? why : "no backend for this request",
					   NULL));
		return;
	}
	relay(a, s, m, json_deep_copy(json_object_get(msg, "params")), id, NULL);
}

/* The aggregate's send operation: requests the router answers itself. */
static int agg_send(struct peer *p, json_t *msg, const struct peer_out *o)
{
	struct aggregate *a = container_of(p, struct aggregate, peer);
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (!m || !id)
		return 0;  /* notifications to the aggregate end here */
	if (strcmp(m, "tools/list") == 0 || strcmp(m, "prompts/list") == 0) {
		enum list_kind k = m[0] == 't' ? LIST_TOOLS : LIST_PROMPTS;
		if (json_object_get(json_object_get(msg, "params"), "cursor")) {
			agg_reply(a, id, rpc_error(NULL, RPC_INVALID_PARAMS, "invalid cursor", NULL));
			return 0;
		}
		if (!refresh_stale(a, id, k))
			answer_list(a, id, k);
	} else if (strcmp(m, "resources/list") == 0) {
		agg_resources(a, msg, m, "resources");
	} else if (strcmp(m, "resources/templates/list") == 0) {
		agg_resources(a, msg, m, "resourceTemplates");
	} else if (strcmp(m, "tasks/list") == 0) {
		agg_resources(a, msg, m, "tasks");
	} else if (is_task_method(m)) {
		agg_task_request(a, msg, m, id);
	} else if (json_is_object(json_object_get(json_object_get(msg, "params"), "task"))) {
		agg_task_augmented(a, msg, m, id, o);
	} else if (strcmp(m, "resources/read") == 0) {
		agg_status(a, id);
	} else if (strcmp(m, "logging/setLevel") == 0) {
		agg_set_level(a, msg);
	} else {
		agg_reply(a, id, rpc_result(json_null(), json_object()));  /* ping */
	}
	return 0;
}

/* The session waiting for the aggregate's initialize goes away. */
static void agg_forget_initialize(struct peer *p, void *arg)
{
	struct aggregate *a = container_of(p, struct aggregate, peer);
	if (a->init && a->init->arg == arg)
		a->init->cb = NULL;
}

static const struct peer_ops agg_ops = {
	.send = agg_send, .initialize = agg_initialize,
	.forget_initialize = agg_forget_initialize,
};

/* ---------- routing ---------- */

/* Matches URI against an RFC 6570 template, each {expression} taking any run. */
static bool template_match(const char *t, const char *u)
{
	while (*t) {
		if (*t == '{') {
			const char *close = strchr(t, '}');
			if (!close)
				return false;
			for (const char *v = u + 1; ; v++) {
				if (template_match(close + 1, v))
					return true;
				if (!*v)
					return false;
			}
		}
		if (*t != *u)
			return false;
		t++;
		u++;
	}
	return *u == '\0';
}

/* The backend that owns URI. */
static struct slot *owner_of_uri(struct aggregate *a, const char *uri)
{
	json_t *o = json_object_get(a->uri_owner, uri);
	if (o && (size_t)json_integer_value(o) < a->n)
		return a->v[json_integer_value(o)];
	size_t i;
	json_t *pair;
	json_array_foreach(a->templates, i, pair) {
		if (template_match(json_string_value(json_array_get(pair, 0)), uri))
			return a->v[json_integer_value(json_array_get(pair, 1))];
	}
	size_t first = next_resource_slot(a, 0);
	return first < a->n ? a->v[first] : NULL;
}

/*
 * The backend with modules of its own whose exposed prefix NAME starts
 * with (the longest), or NULL. A name its own modules hid from its list
 * (a per-backend policy) is not in the map, yet its call must reach those
 * modules so that they refuse it as they would globally.
 */
static struct slot *hidden_owner(struct aggregate *a, const char *name, const char **orig)
{
	struct slot *best = NULL;
	size_t best_n = 0;
	for (size_t i = 0; i < a->n; i++) {
		struct slot *s = a->v[i];
		char head[300];
		int n = snprintf(head, sizeof head, "%s%s", s->prefix, a->cfg->separator);
		if (s->removed || pipeline_size(s->peer->pl) == 0 || n <= 0 ||
		    (size_t)n >= sizeof head || (size_t)n <= best_n ||
		    strncmp(name, head, (size_t)n) != 0 || !name[n])
			continue;
		best = s;
		best_n = (size_t)n;
	}
	if (best)
		*orig = name + best_n;
	return best;
}

/* Routes a named call: rewrites the name at KEY of OBJ to the backend's own. */
static struct peer *route_name(struct aggregate *a, enum list_kind k, json_t *obj, const char *key,
			       int *code, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(obj, key)), *orig = NULL;
	struct mapping *m = name ? hmap_get(&a->map[k], name, strlen(name)) : NULL;
	struct slot *s = m ? a->v[m->slot] : name ? hidden_owner(a, name, &orig) : NULL;
	if (!s) {
		*code = RPC_INVALID_PARAMS;
		snprintf(err, errlen, "Unknown %s: %s", k == LIST_TOOLS ? "tool" : "prompt",
			 name ? name : "(none)");
		return NULL;
	}
	json_object_set_new(obj, key, json_string(m ? m->orig : orig));
	return s->peer;
}

/* Picks the destination of a client request (MSG may be rewritten). */
static struct peer *route_request(struct aggregate *a, json_t *msg, const char *method,
				  int *code, char *err, size_t errlen)
{
	json_t *params = json_object_get(msg, "params");
	if (strcmp(method, "tools/call") == 0)
		return route_name(a, LIST_TOOLS, params, "name", code, err, errlen);
	if (strcmp(method, "prompts/get") == 0)
		return route_name(a, LIST_PROMPTS, params, "name", code, err, errlen);
	if (strcmp(method, "completion/complete") == 0) {
		json_t *ref = json_object_get(params, "ref");
		if (json_object_get(ref, "name"))
			return route_name(a, LIST_PROMPTS, ref, "name", code, err, errlen);
		struct slot *s = owner_of_uri(a, json_string_value(json_object_get(ref, "uri")) ?: "");
		return s ? s->peer : NULL;
	}
	if (strcmp(method, "resources/read") == 0 || strcmp(method, "resources/subscribe") == 0 ||
	    strcmp(method, "resources/unsubscribe") == 0) {
		const char *uri = json_string_value(json_object_get(params, "uri"));
		if (uri && status_on(a) && strcmp(uri, STATUS_URI) == 0) {
			if (strcmp(method, "resources/read") == 0)
				return &a->peer;
			/* it sends no resources/updated: the capability says so too */
			*code = RPC_INVALID_PARAMS;
			snprintf(err, errlen, "%s cannot be subscribed to: read it again for news",
				 STATUS_URI);
			return NULL;
		}
		struct slot *s = owner_of_uri(a, uri ? uri : "");
		if (!s) {
			*code = RPC_INVALID_PARAMS;
			snprintf(err, errlen, "no backend serves resources");
		}
		return s ? s->peer : NULL;
	}
	if (strcmp(method, "tools/list") == 0 || strcmp(method, "prompts/list") == 0 ||
	    strcmp(method, "resources/list") == 0 ||
	    strcmp(method, "resources/templates/list") == 0 || strcmp(method, "ping") == 0 ||
	    strcmp(method, "logging/setLevel") == 0 || strcmp(method, "tasks/list") == 0 ||
	    is_task_method(method))
		return &a->peer;
	for (size_t i = 0; i < a->n; i++)  /* anything else: the first ready backend */
		if (!a->v[i]->removed && a->v[i]->peer->ready)
			return a->v[i]->peer;
	return first_active(a)->peer;
}

/* Sends notifications/initialized to a backend once per run. */
static void send_initialized(struct slot *s)
{
	if (s->sent_initialized || !s->peer->ready)
		return;
	s->sent_initialized = true;
	if (s->peer->told_initialized)
		return;   /* a backend shared with other sessions: told once a run */
	s->peer->told_initialized = true;
	chain_notify(&s->a->peer, s->peer, rpc_notification("notifications/initialized", NULL));
}

/* Client notifications the aggregate handles (MSG borrowed). */
static bool client_notification(struct aggregate *a, struct peer *client, json_t *msg,
				const char *method)
{
	if (strcmp(method, "notifications/initialized") == 0) {
		a->client_initialized = true;
		if (!a->multi) {
			struct slot *s = first_active(a);
			s->sent_initialized = true;
			if (s->peer->told_initialized)
				return true;   /* a backend shared by sessions: told once a run */
			s->peer->told_initialized = true;
			return false;  /* the client's own, unchanged */
		}
		for (size_t i = 0; i < a->n; i++)
			if (!a->v[i]->removed)
				send_initialized(a->v[i]);
		return true;
	}
	if (a->multi && strcmp(method, "notifications/roots/list_changed") == 0) {
		for (size_t i = 0; i < a->n; i++)
			if (!a->v[i]->removed && a->v[i]->peer->ready)
				chain_notify(client, a->v[i]->peer, json_incref(msg));
		return true;
	}
	return false;
}

/* Backend notifications the aggregate handles (MSG borrowed; a task's
 * status has its id exposed in place and goes on to the clients). */
static bool backend_notification(struct aggregate *a, struct peer *backend, json_t *msg,
				 const char *method)
{
	struct slot *s = slot_of(a, backend);
	if (!a->multi || !s)
		return false;
	if (strcmp(method, "notifications/tasks/status") == 0) {
		char head[300];
		slot_head(s, head, sizeof head);
		agg_tasks_expose(a->tasks, json_object_get(msg, "params"), s->index, head);
		return false;
	}
	for (int k = 0; k < LIST_KINDS; k++) {
		if (strcmp(method, list_note[k]) == 0) {
			s->changed[k] = true;
			if (!s->paging[k])
				fetch_list(s, (enum list_kind)k, NULL);
			return true;
		}
	}
	return false;
}

/* ---------- what the chain asks (chain_router) ---------- */

/* The peer the front initializes: the backend, or the aggregate. */
static struct peer *op_init_target(struct chain_router *r, struct peer *client)
{
	struct aggregate *a = (struct aggregate *)r;
	(void)client;
	if (aggregate_backends(a) == 0)
		return NULL;
	return a->multi ? &a->peer : first_active(a)->peer;
}

/* Where a client message goes; with several backends it is read and renamed. */
static struct peer *op_route(struct chain_router *r, struct peer *client, struct msg *m,
			     const char *method, int *code, char *why, size_t n)
{
	struct aggregate *a = (struct aggregate *)r;
	if (aggregate_backends(a) == 0) {
		*code = RPC_BACKEND_GONE;
		snprintf(why, n, "no backend is configured");
		return NULL;
	}
	if (!a->multi)
		return first_active(a)->peer;   /* transparent: the bytes go as they came */
	json_t *t = msg_tree(m);
	if (!t) {
		*code = RPC_PARSE_ERROR;
		snprintf(why, n, "mcp-chain could not parse the message");
		return NULL;
	}
	(void)client;
	if (json_is_object(json_object_get(json_object_get(t, "params"), "task")) &&
	    json_object_get(t, "id"))
		return &a->peer;  /* it relays it, to learn the task's backend */
	return route_request(a, t, method, code, why, n);
}

/* initialized and list_changed, from a client or a backend. */
static bool op_notification(struct chain_router *r, struct peer *from, json_t *msg,
			    const char *method)
{
	struct aggregate *a = (struct aggregate *)r;
	if (aggregate_backends(a) == 0)
		return false;
	return from->role == PEER_CLIENT ? client_notification(a, from, msg, method) :
		backend_notification(a, from, msg, method);
}

static const struct chain_router_ops router_ops = {
	.init_target = op_init_target, .route = op_route, .notification = op_notification,
};

/* ---------- the application's side ---------- */

/* A backend is initialized (first time, late, or after a restart). */
void aggregate_backend_ready(struct aggregate *a, struct peer *backend)
{
	struct slot *s = slot_of(a, backend);
	if (!s)
		return;
	bool restarted = s->was_down;
	bool late = !restarted && a->multi && a->peer.ready && !s->joined;
	s->was_down = false;
	s->joined = true;
	if (restarted)
		s->sent_initialized = false;  /* a new run needs its own */
	if (a->client_initialized)
		send_initialized(s);
	if (!a->multi) {
		if (restarted && a->client_initialized) {
			json_t *caps = caps_of(s);
			for (int k = 0; k < LIST_KINDS; k++)
				if (json_object_get(caps, list_cap[k]))
					notify_clients(a, list_note[k]);
			if (json_object_get(caps, "resources"))
				notify_clients(a, "notifications/resources/list_changed");
		}
		return;
	}
	if (late)
		log_info("%s: joined the aggregate after the client's initialize", s->entry->name);
	refresh(s, restarted || a->peer.ready);
	if ((restarted || late) && a->client_initialized &&
	    json_object_get(caps_of(s), "resources"))
		notify_clients(a, "notifications/resources/list_changed");
}

/* A backend went down: its names leave the lists until it is back. */
void aggregate_backend_down(struct aggregate *a, struct peer *backend)
{
	struct slot *s = slot_of(a, backend);
	if (!s)
		return;
	s->was_down = true;
	s->sent_initialized = false;
	if (!a->multi)
		return;
	agg_tasks_drop_slot(a->tasks, s->index);  /* a new run knows none of them */
	for (int k = 0; k < LIST_KINDS; k++) {
		json_decref(s->paging[k]);
		s->paging[k] = NULL;
		if (s->items[k] && json_array_size(s->items[k])) {
			rebuild(a, (enum list_kind)k);
			if (a->client_initialized)
				notify_clients(a, list_note[k]);
		}
		flush_waiting(a, (enum list_kind)k);
	}
}

/* One backend or none: nothing to rewrite. */
bool aggregate_transparent(const struct aggregate *a)
{
	return !a->multi;
}

/* The chain's view of the aggregate. */
struct chain_router *aggregate_router(struct aggregate *a)
{
	return &a->router;
}

/* A new aggregate for CHAIN and CFG. */
struct aggregate *aggregate_new(struct chain *chain, const struct cfg *cfg)
{
	struct aggregate *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->router.ops = &router_ops;
	a->chain = chain;
	a->cfg = cfg;
	peer_init(&a->peer, &agg_ops, PEER_BACKEND, "mcp-chain");
	a->peer.chain = chain;   /* it speaks for itself before it is a peer of the chain */
	a->peer.answers_inline = true;
	a->uri_owner = json_object();
	a->templates = json_array();
	a->tasks = agg_tasks_new(AGG_TASKS_MAX);
	if (!a->tasks) {
		aggregate_free(a);
		return NULL;
	}
	return a;
}

/* Adds a backend. */
void aggregate_add_backend(struct aggregate *a, struct peer *backend,
			   const struct cfg_server *entry)
{
	struct slot **v = realloc(a->v, (a->n + 1) * sizeof *v);
	if (!v)
		return;
	a->v = v;
	struct slot *s = calloc(1, sizeof *s);
	if (!s)
		return;
	s->a = a;
	s->index = a->n;
	s->peer = backend;
	s->entry = entry;
	s->prefix = entry->prefix ? entry->prefix : entry->name;
	for (int k = 0; k < LIST_KINDS; k++)
		s->ttl[k] = s->pttl[k] = -1;
	s->was_down = a->client_initialized;  /* added by a reload: tell the client */
	a->v[a->n++] = s;
	if (!a->multi && aggregate_backends(a) >= 2) {
		a->multi = true;
		chain_add_peer(a->chain, &a->peer);
	}
}

/* Takes a backend out (a reload removed or replaced it). */
void aggregate_remove_backend(struct aggregate *a, struct peer *backend)
{
	struct slot *s = slot_of(a, backend);
	if (!s)
		return;
	s->removed = true;
	if (s->init_pending) {
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
	for (int k = 0; k < LIST_KINDS; k++) {
		json_decref(s->items[k]);
		json_decref(s->paging[k]);
		s->items[k] = s->paging[k] = NULL;
		rebuild(a, (enum list_kind)k);
		if (a->multi && a->client_initialized)
			notify_clients(a, list_note[k]);
		flush_waiting(a, (enum list_kind)k);
	}
	agg_tasks_drop_slot(a->tasks, s->index);
	for (size_t i = json_array_size(a->templates); i-- > 0;)
		if ((size_t)json_integer_value(json_array_get(json_array_get(a->templates, i), 1)) == s->index)
			json_array_remove(a->templates, i);
	const char *uri;
	json_t *v, *tmp;
	json_object_foreach_safe(a->uri_owner, tmp, uri, v)
		if ((size_t)json_integer_value(v) == s->index)
			json_object_del(a->uri_owner, uri);
	if (a->multi && a->client_initialized)
		notify_clients(a, "notifications/resources/list_changed");
}

/* Takes a new configuration: options, and each kept backend's entry. */
void aggregate_reconfigure(struct aggregate *a, const struct cfg *cfg)
{
	a->cfg = cfg;
	for (int k = 0; k < LIST_KINDS; k++)
		rebuild(a, (enum list_kind)k);
}

/* After a reload: the middleware may show other lists; clients look again. */
void aggregate_lists_changed(struct aggregate *a)
{
	if (!a->client_initialized || aggregate_backends(a) == 0)
		return;
	for (int k = 0; k < LIST_KINDS; k++)
		notify_clients(a, list_note[k]);
	notify_clients(a, "notifications/resources/list_changed");
}

/* A kept backend's entry in the new configuration. */
void aggregate_update_backend(struct aggregate *a, struct peer *backend,
			      const struct cfg_server *entry)
{
	struct slot *s = slot_of(a, backend);
	if (!s)
		return;
	s->entry = entry;
	s->prefix = entry->prefix ? entry->prefix : entry->name;
}

/* Number of backends not removed. */
size_t aggregate_backends(const struct aggregate *a)
{
	size_t n = 0;
	for (size_t i = 0; i < a->n; i++)
		n += !a->v[i]->removed;
	return n;
}

/* Installs the status describer. */
void aggregate_set_status(struct aggregate *a, json_t *(*status_fn)(void *arg), void *arg)
{
	a->status_fn = status_fn;
	a->status_arg = arg;
}

/* Frees the aggregate (the chain must no longer route through it). */
void aggregate_free(struct aggregate *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++)
		for (int k = 0; k < LIST_KINDS; k++) {
			json_decref(a->v[i]->items[k]);
			json_decref(a->v[i]->paging[k]);
		}
	for (int k = 0; k < LIST_KINDS; k++) {
		clear_maps(a, (enum list_kind)k);
		json_decref(a->view[k]);
		free(a->view_line[k]);
		json_decref(a->waiting[k]);  /* their requests fail with the peer below */
	}
	agg_tasks_free(a->tasks);
	if (a->init) {
		ev_timer_stop(EV_DEFAULT, &a->init->settle);
		ev_timer_stop(EV_DEFAULT, &a->init->bound);
		free(a->init);
	}
	if (a->multi) {
		chain_peer_gone(&a->peer, "shutting down");
		chain_remove_peer(&a->peer);
	}
	peer_release(&a->peer);
	json_decref(a->uri_owner);
	json_decref(a->templates);
	json_decref(a->client_params);
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	free(a);
}
