/*
 * router.c - routing client traffic to backends; with several backends,
 * the aggregate: namespaced names, merged lists, merged initialize.
 */
#include "router.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "chain.h"
#include "msg.h"
#include "hmap.h"
#include "log.h"
#include "mcpc_version.h"
#include "rpc.h"

#define NAME_MAX_LEN 64
#define STATUS_URI "mcp-chain://status"

enum list_kind { LIST_TOOLS, LIST_PROMPTS, LIST_KINDS };

static const char *const list_method[LIST_KINDS] = { "tools/list", "prompts/list" };
static const char *const list_key[LIST_KINDS] = { "tools", "prompts" };
static const char *const list_cap[LIST_KINDS] = { "tools", "prompts" };
static const char *const list_note[LIST_KINDS] = {
	"notifications/tools/list_changed", "notifications/prompts/list_changed"
};

/* A backend as the router sees it. */
struct slot {
	struct peer *peer;
	const struct cfg_server *entry;
	const char *prefix;
	size_t index;                /* in R.v */
	bool removed;                /* taken out by a reload: ignored */
	json_t *items[LIST_KINDS];   /* owned: its tools and prompts, its names */
	json_t *paging[LIST_KINDS];  /* owned: a refresh being gathered */
	bool changed[LIST_KINDS];    /* tell clients when the refresh ends */
	bool sent_initialized;       /* this run got notifications/initialized */
	bool was_down;
};

/* Where an exposed name leads. */
struct mapping {
	size_t slot;
	char *orig;
	struct mapping *next;        /* the mappings of one kind, for freeing */
};

/* An initialize being answered for the aggregate. */
struct agg_init {
	void (*cb)(void *arg, json_t *response);
	void *arg;
	size_t pending;
	ev_timer settle;             /* re-checks once the current stack unwinds */
	ev_timer bound;              /* the start-up bound */
};

static struct {
	struct chain *chain;
	const struct cfg *cfg;
	struct slot **v;       /* each slot allocated once, never moved */
	size_t n;
	bool multi;
	bool client_initialized;
	struct peer agg;
	struct hmap map[LIST_KINDS];  /* exposed name -> mapping */
	struct mapping *maps[LIST_KINDS];
	json_t *view[LIST_KINDS];     /* owned: merged lists with exposed names */
	char *view_line[LIST_KINDS];  /* owned: a whole response holding the view,
				       * with id 0; made on demand */
	size_t view_len[LIST_KINDS];
	json_t *uri_owner;            /* owned: uri -> slot index */
	json_t *templates;            /* owned: [[template, slot index], ...] */
	json_t *client_params;        /* owned */
	struct agg_init *init;
	json_t *(*status_fn)(void *arg);
	void *status_arg;
} R;

static void rebuild(enum list_kind k);

/* True when the status resource is exposed: by default with several backends. */
static bool status_on(void)
{
	return R.cfg->status_set ? R.cfg->status : R.multi;
}

static void fetch_list(struct slot *s, enum list_kind k, const char *cursor);

/* The slot of a backend peer, or NULL. */
static struct slot *slot_of(struct peer *p)
{
	for (size_t i = 0; i < R.n; i++)
		if (R.v[i]->peer == p && !R.v[i]->removed)
			return R.v[i];
	return NULL;
}

/* The first backend not removed by a reload (there is always one). */
static struct slot *first_active(void)
{
	for (size_t i = 0; i < R.n; i++)
		if (!R.v[i]->removed)
			return R.v[i];
	return R.v[0];
}

/* A backend's initialize result capabilities (borrowed). */
static json_t *caps_of(struct slot *s)
{
	json_t *resp = NULL;
	(void)resp;
	return s->peer->ready ? json_object_get(s->peer->init_result, "capabilities") : NULL;
}

/* Sends a notification of the aggregate's own to every client. */
static void notify_clients(const char *method)
{
	chain_notify(R.multi ? &R.agg : first_active()->peer, NULL, rpc_notification(method, NULL));
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
static void expose(char out[NAME_MAX_LEN + 1], const char *prefix, const char *orig,
		   const char *salt)
{
	char raw[1024];
	snprintf(raw, sizeof raw, "%s%s%s", prefix, R.cfg->separator, orig);
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

/* Frees every mapping of kind K. */
static void clear_maps(enum list_kind k)
{
	while (R.maps[k]) {
		struct mapping *m = R.maps[k];
		R.maps[k] = m->next;
		free(m->orig);
		free(m);
	}
	hmap_release(&R.map[k]);
}

/* Records NAME -> (slot, orig). */
static void add_mapping(enum list_kind k, const char *name, size_t slot, const char *orig)
{
	struct mapping *m = calloc(1, sizeof *m);
	if (!m)
		return;
	m->slot = slot;
	m->orig = strdup(orig);
	m->next = R.maps[k];
	R.maps[k] = m;
	hmap_put(&R.map[k], name, strlen(name), m);
}

/* Adds one backend item to the merged view under its exposed name. */
static void expose_item(enum list_kind k, size_t i, json_t *item)
{
	const char *orig = json_string_value(json_object_get(item, "name"));
	char name[NAME_MAX_LEN + 1], plain[1024];
	if (!orig)
		return;
	expose(name, R.v[i]->prefix, orig, NULL);
	for (unsigned n = 0; hmap_get(&R.map[k], name, strlen(name)); n++) {
		char salt[300];
		snprintf(salt, sizeof salt, "%s/%u", R.v[i]->entry->name, n);
		expose(name, R.v[i]->prefix, orig, salt);
		log_warn("%s %s of %s collides with another name; exposed as %s",
			 list_key[k], orig, R.v[i]->entry->name, name);
	}
	snprintf(plain, sizeof plain, "%s%s%s", R.v[i]->prefix, R.cfg->separator, orig);
	if (strcmp(plain, name) != 0)
		log_info("%s: %s \"%s\" exposed as \"%s\" (client-safe name)",
			 R.v[i]->entry->name, k == LIST_TOOLS ? "tool" : "prompt", orig, name);
	add_mapping(k, name, i, orig);
	if (!R.v[i]->peer->ready)
		return;  /* its names stay reserved while it is down */
	json_t *copy = json_copy(item);
	json_object_set_new(copy, "name", json_string(name));
	json_array_append_new(R.view[k], copy);
}

/* Rebuilds the merged view and name map of kind K from the slots. */
static void rebuild(enum list_kind k)
{
	clear_maps(k);
	free(R.view_line[k]);
	R.view_line[k] = NULL;
	json_decref(R.view[k]);
	R.view[k] = json_array();
	for (size_t i = 0; i < R.n; i++) {
		size_t j;
		json_t *item;
		if (R.v[i]->removed)
			continue;
		json_array_foreach(R.v[i]->items[k], j, item)
			expose_item(k, i, item);
	}
}

/* ---------- list caches ---------- */

struct fetch {
	struct slot *s;
	enum list_kind k;
};

static void check_init_done(void);

/* A page of a backend's list arrived. */
static void on_list_page(struct exchange *ex, json_t *msg, void *arg)
{
	struct fetch *f = arg;
	struct slot *s = f->s;
	enum list_kind k = f->k;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	free(f);
	if (!s->paging[k])
		return;
	json_array_extend(s->paging[k], json_object_get(result, list_key[k]));
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (result && next && *next && s->peer->ready) {
		fetch_list(s, k, next);
		return;
	}
	if (!result) {
		log_warn("%s: %s failed; keeping what was listed", s->entry->name, list_method[k]);
		json_decref(s->paging[k]);
	} else {
		json_decref(s->items[k]);
		s->items[k] = s->paging[k];
	}
	s->paging[k] = NULL;
	rebuild(k);
	if (s->changed[k] && R.client_initialized)
		notify_clients(list_note[k]);
	s->changed[k] = false;
	check_init_done();
}

/* Asks a backend for (the next page of) its list of kind K. */
static void fetch_list(struct slot *s, enum list_kind k, const char *cursor)
{
	struct fetch *f = calloc(1, sizeof *f);
	if (!f)
		return;
	f->s = s;
	f->k = k;
	if (!s->paging[k])
		s->paging[k] = json_array();
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
	if (chain_call_via(s->peer, list_method[k], params, s->peer->pl, on_list_page, f) < 0) {
		json_decref(s->paging[k]);
		s->paging[k] = NULL;
	}
}

/* Keeps a backend's resource templates, for routing URIs never listed. */
static void on_templates(struct exchange *ex, json_t *msg, void *arg)
{
	struct slot *s = arg;
	json_t *result = json_object_get(msg, "result");
	json_t *items = json_object_get(result, "resourceTemplates");
	size_t idx = s->index, i;
	json_t *it;
	(void)ex;
	json_array_foreach(items, i, it) {
		const char *tpl = json_string_value(json_object_get(it, "uriTemplate"));
		if (tpl)
			json_array_append_new(R.templates, json_pack("[s,I]", tpl, (json_int_t)idx));
	}
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (next && *next && s->peer->ready)
		chain_call_via(s->peer, "resources/templates/list",
			       json_pack("{s:s}", "cursor", next), s->peer->pl, on_templates, s);
}

/* Refreshes every list a backend has. */
static void refresh(struct slot *s, bool tell)
{
	json_t *caps = caps_of(s);
	for (size_t i = json_array_size(R.templates); i-- > 0;)  /* forget its old ones */
		if ((size_t)json_integer_value(json_array_get(json_array_get(R.templates, i), 1)) ==
		    s->index)
			json_array_remove(R.templates, i);
	if (json_object_get(caps, "resources"))
		chain_call_via(s->peer, "resources/templates/list", json_object(),
			       s->peer->pl, on_templates, s);
	for (int k = 0; k < LIST_KINDS; k++) {
		if (!json_object_get(caps, list_cap[k]) || s->paging[k])
			continue;
		s->changed[k] = tell;
		fetch_list(s, (enum list_kind)k, NULL);
	}
}

/* True while any list refresh is running. */
static bool fetching(void)
{
	for (size_t i = 0; i < R.n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (R.v[i]->paging[k])
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
static json_t *merged_result(void)
{
	json_t *caps = json_object();
	char *instr = NULL;
	size_t ilen = 0;
	for (size_t i = 0; i < R.n; i++) {
		if (R.v[i]->removed)
			continue;
		json_t *c = caps_of(R.v[i]);
		json_t *copy = json_deep_copy(c);
		merge_caps(caps, copy);
		json_decref(copy);
		const char *t = json_string_value(json_object_get(R.v[i]->peer->init_result, "instructions"));
		if (!t)
			continue;
		size_t add = strlen(t) + strlen(R.v[i]->entry->name) + 16;
		char *p = realloc(instr, ilen + add);
		if (!p)
			continue;
		instr = p;
		ilen += (size_t)snprintf(instr + ilen, add, "%s## %s\n%s", ilen ? "\n\n" : "",
					 R.v[i]->entry->name, t);
	}
	/* we tell clients when a backend's lists change or it restarts */
	for (int k = 0; k < LIST_KINDS; k++)
		if (json_object_get(caps, list_cap[k]))
			json_object_set_new(json_object_get(caps, list_cap[k]), "listChanged", json_true());
	if (status_on()) {
		if (!json_object_get(caps, "resources"))
			json_object_set_new(caps, "resources", json_object());
	}
	const char *asked = json_string_value(json_object_get(R.client_params, "protocolVersion"));
	json_t *r = json_pack("{s:s,s:o,s:{s:s,s:s}}", "protocolVersion", asked ? asked : "2025-11-25",
			      "capabilities", caps, "serverInfo", "name", "mcp-chain",
			      "version", MCPC_VERSION);
	if (instr)
		json_object_set_new(r, "instructions", json_string(instr));
	free(instr);
	return r;
}

/* Answers the aggregate's initialize once every backend is settled. */
static void check_init_done(void)
{
	struct agg_init *in = R.init;
	if (!in || in->pending > 0 || fetching())
		return;
	R.init = NULL;
	ev_timer_stop(EV_DEFAULT, &in->settle);
	ev_timer_stop(EV_DEFAULT, &in->bound);
	size_t ready = 0;
	for (size_t i = 0; i < R.n; i++)
		ready += R.v[i]->peer->ready;
	json_t *resp = rpc_result(json_null(), merged_result());
	log_info("aggregate: initialized with %zu of %zu backends ready", ready, R.n);
	R.agg.ready = true;
	if (in->cb)
		in->cb(in->arg, resp);
	json_decref(resp);
	free(in);
}

/* Deferred re-check (lets a READY event start its list refresh first). */
static void on_settle(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	check_init_done();
}

/* The start-up bound passed: answer with the backends that are ready. */
static void on_bound(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	if (!R.init)
		return;
	log_warn("aggregate: start-up bound of %g s reached; answering without the backends still starting",
		 R.cfg->init_timeout);
	for (size_t i = 0; i < R.n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (R.v[i]->paging[k])
				R.v[i]->changed[k] = true;  /* tell the client when it lands */
	R.init->pending = 0;
	json_t *none = NULL;
	(void)none;
	struct agg_init *in = R.init;
	for (size_t i = 0; i < R.n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (R.v[i]->paging[k]) {
				/* answer now; the refresh finishes later */
			}
	R.init = NULL;
	size_t ready = 0;
	for (size_t i = 0; i < R.n; i++)
		ready += R.v[i]->peer->ready;
	json_t *resp = rpc_result(json_null(), merged_result());
	log_info("aggregate: initialized with %zu of %zu backends ready", ready, R.n);
	R.agg.ready = true;
	ev_timer_stop(EV_DEFAULT, &in->settle);
	if (in->cb)
		in->cb(in->arg, resp);
	json_decref(resp);
	free(in);
}

/* One backend answered (or failed) its initialize. */
static void on_backend_init(void *arg, json_t *resp)
{
	struct slot *s = arg;
	(void)resp;
	(void)s;
	if (!R.init)
		return;
	if (R.init->pending > 0)
		R.init->pending--;
	ev_timer_set(&R.init->settle, 0., 0.);
	ev_timer_start(EV_DEFAULT, &R.init->settle);
}

/* The aggregate's initialize: every backend, concurrently. */
static int agg_initialize(struct peer *p, json_t *params,
			  void (*cb)(void *arg, json_t *response), void *arg)
{
	(void)p;
	if (R.init)
		return -1;
	if (R.agg.ready) {  /* a later session: answer from what we have */
		json_t *resp = rpc_result(json_null(), merged_result());
		cb(arg, resp);
		json_decref(resp);
		return 0;
	}
	struct agg_init *in = calloc(1, sizeof *in);
	if (!in)
		return -1;
	in->cb = cb;
	in->arg = arg;
	json_decref(R.client_params);
	R.client_params = json_deep_copy(params);
	ev_timer_init(&in->settle, on_settle, 0., 0.);
	ev_timer_init(&in->bound, on_bound, R.cfg->init_timeout, 0.);
	ev_timer_start(EV_DEFAULT, &in->bound);
	R.init = in;
	for (size_t i = 0; i < R.n; i++) {
		struct peer *b = R.v[i]->peer;
		in->pending++;
		if (b->ops->initialize(b, params, on_backend_init, R.v[i]) < 0) {
			log_warn("%s: not available (%s)", R.v[i]->entry->name,
				 b->why_down[0] ? b->why_down : "not started");
			in->pending--;
		}
	}
	ev_timer_start(EV_DEFAULT, &in->settle);
	return 0;
}

/* ---------- the aggregate's own answers ---------- */

/* Delivers the aggregate's response to request ID. */
static void agg_reply(json_t *id, json_t *resp_without_id)
{
	json_object_set(resp_without_id, "id", id);
	R.agg.rx_bytes = 0;
	chain_receive(&R.agg, resp_without_id);
}

#define VIEW_HEAD "{\"jsonrpc\":\"2.0\",\"id\":"
#define VIEW_ID "0"
#define VIEW_RESULT ",\"result\":"

/* Makes the cached response of kind K: its head, the view, its end. */
static bool make_view_line(enum list_kind k)
{
	char *text = json_dumps(R.view[k], JSON_COMPACT);
	if (!text)
		return false;
	size_t tn = strlen(text);
	char head[64];
	int hn = snprintf(head, sizeof head, VIEW_HEAD VIEW_ID VIEW_RESULT "{\"%s\":", list_key[k]);
	char *line = malloc((size_t)hn + tn + 2);
	if (line) {
		memcpy(line, head, (size_t)hn);
		memcpy(line + hn, text, tn);
		memcpy(line + hn + tn, "}}", 2);
		R.view_line[k] = line;
		R.view_len[k] = (size_t)hn + tn + 2;
	}
	free(text);
	return line != NULL;
}

/*
 * Answers a list request from the cached response of the merged list, as
 * bytes through the fast path when no middleware reads responses: the
 * chain splices the requester's id over the placeholder, so a listing
 * costs no scan, allocation or copy here. Returns false when the caller
 * must answer with a tree.
 */
static bool agg_list_fast(json_t *id, enum list_kind k)
{
	if (!json_is_integer(id) || !R.view[k])
		return false;
	if (!R.view_line[k] && !make_view_line(k))
		return false;
	const char *line = R.view_line[k], *res = line + strlen(VIEW_HEAD VIEW_ID VIEW_RESULT);
	struct jspan idspan = { line + strlen(VIEW_HEAD), strlen(VIEW_ID) };
	struct jspan result = { res, (size_t)(line + R.view_len[k] - 1 - res) };
	struct msg m;
	msg_init_own(&m, line, R.view_len[k], idspan, json_integer_value(id), result);
	R.agg.rx_bytes = 0;
	chain_receive_msg(&R.agg, &m);
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
static int read_cursor(const char *hex, size_t *slot, char *inner, size_t n)
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
	if (*end || s >= R.n)
		return -1;
	*slot = s;
	snprintf(inner, n, "%s", colon + 1);
	return 0;
}

struct page_req {
	json_t *id;           /* the client-side request's id on the aggregate */
	size_t slot;
	const char *method;   /* resources/list or resources/templates/list */
	const char *key;
	bool first;           /* the status resource goes on the first page */
};

static void next_page(struct page_req *pr, const char *inner);

/* The first slot at or after I with resources, or R.n. */
static size_t next_resource_slot(size_t i)
{
	for (; i < R.n; i++)
		if (!R.v[i]->removed && json_object_get(caps_of(R.v[i]), "resources"))
			return i;
	return R.n;
}

/* Remembers where listed URIs and templates live. */
static void learn_owners(struct page_req *pr, json_t *items)
{
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) {
		const char *uri = json_string_value(json_object_get(it, "uri"));
		const char *tpl = json_string_value(json_object_get(it, "uriTemplate"));
		if (uri && !json_object_get(R.uri_owner, uri))
			json_object_set_new(R.uri_owner, uri, json_integer((json_int_t)pr->slot));
		if (tpl)
			json_array_append_new(R.templates, json_pack("[s,I]", tpl, (json_int_t)pr->slot));
	}
}

/* Finishes a resources page: our cursor points at what follows. */
static void finish_page(struct page_req *pr, json_t *items, const char *inner_next)
{
	json_t *result = json_object();
	if (pr->first && status_on() && strcmp(pr->method, "resources/list") == 0)
		json_array_insert_new(items, 0, json_pack("{s:s,s:s,s:s,s:s}", "uri", STATUS_URI,
			"name", "mcp-chain status", "description",
			"State of every backend behind this mcp-chain", "mimeType", "application/json"));
	json_object_set(result, pr->key, items);
	json_t *cur = NULL;
	if (inner_next && *inner_next)
		cur = make_cursor(pr->slot, inner_next);
	else if (next_resource_slot(pr->slot + 1) < R.n)
		cur = make_cursor(next_resource_slot(pr->slot + 1), "");
	if (cur)
		json_object_set_new(result, "nextCursor", cur);
	agg_reply(pr->id, rpc_result(json_null(), result));
	json_decref(pr->id);
	free(pr);
}

/* A backend's resources page arrived. */
static void on_resource_page(struct exchange *ex, json_t *msg, void *arg)
{
	struct page_req *pr = arg;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	json_t *items = json_object_get(result, pr->key);
	if (!json_is_array(items)) {
		log_warn("%s: %s failed; skipped", R.v[pr->slot]->entry->name, pr->method);
		size_t next = next_resource_slot(pr->slot + 1);
		if (next < R.n) {
			pr->slot = next;
			next_page(pr, NULL);
			return;
		}
		finish_page(pr, json_array(), NULL);
		return;
	}
	learn_owners(pr, items);
	json_t *copy = json_copy(items);
	finish_page(pr, copy, json_string_value(json_object_get(result, "nextCursor")));
	json_decref(copy);
}

/* Asks the current slot for the page at INNER. */
static void next_page(struct page_req *pr, const char *inner)
{
	struct slot *s = R.v[pr->slot];
	json_t *params = inner && *inner ? json_pack("{s:s}", "cursor", inner) : json_object();
	if (!s->peer->ready ||
	    chain_call_via(s->peer, pr->method, params, s->peer->pl, on_resource_page, pr) < 0) {
		json_t *err = rpc_errorf(NULL, RPC_BACKEND_GONE, "backend unavailable");
		on_resource_page(NULL, err, pr);
		json_decref(err);
	}
}

/* resources/list and resources/templates/list across backends. */
static void agg_resources(json_t *msg, const char *method, const char *key)
{
	json_t *id = json_object_get(msg, "id");
	const char *cursor = json_string_value(json_object_get(json_object_get(msg, "params"), "cursor"));
	struct page_req *pr = calloc(1, sizeof *pr);
	char inner[600] = "";
	pr->id = json_incref(id);
	/* static strings: the request (and its method string) is freed on return */
	pr->method = strcmp(method, "resources/list") == 0 ? "resources/list" :
		     "resources/templates/list";
	pr->key = key;
	if (cursor) {
		if (read_cursor(cursor, &pr->slot, inner, sizeof inner) < 0) {
			agg_reply(id, rpc_error(NULL, RPC_INVALID_PARAMS, "invalid cursor", NULL));
			json_decref(pr->id);
			free(pr);
			return;
		}
	} else {
		pr->first = true;
		pr->slot = next_resource_slot(0);
	}
	if (pr->slot >= R.n) {
		finish_page(pr, json_array(), NULL);
		return;
	}
	next_page(pr, inner);
}

/* The status resource's contents. */
static void agg_status(json_t *id)
{
	json_t *st = R.status_fn ? R.status_fn(R.status_arg) : json_object();
	char *text = json_dumps(st, JSON_INDENT(2));
	json_decref(st);
	json_t *r = json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", STATUS_URI,
			      "mimeType", "application/json", "text", text ? text : "{}");
	free(text);
	agg_reply(id, rpc_result(json_null(), r));
}

/* Sends logging/setLevel to every backend that logs; answers at once. */
static void agg_set_level(json_t *msg)
{
	for (size_t i = 0; i < R.n; i++) {
		if (!json_object_get(caps_of(R.v[i]), "logging"))
			continue;
		json_t *params = json_deep_copy(json_object_get(msg, "params"));
		chain_call_via(R.v[i]->peer, "logging/setLevel", params, R.v[i]->peer->pl, NULL, NULL);
	}
	agg_reply(json_object_get(msg, "id"), rpc_result(json_null(), json_object()));
}

/* The aggregate's send operation: requests the router answers itself. */
static int agg_send(struct peer *p, json_t *msg, struct exchange *ex)
{
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	(void)p;
	(void)ex;
	if (!m || !id)
		return 0;  /* notifications to the aggregate end here */
	if (strcmp(m, "tools/list") == 0 || strcmp(m, "prompts/list") == 0) {
		enum list_kind k = m[0] == 't' ? LIST_TOOLS : LIST_PROMPTS;
		if (json_object_get(json_object_get(msg, "params"), "cursor")) {
			agg_reply(id, rpc_error(NULL, RPC_INVALID_PARAMS, "invalid cursor", NULL));
			return 0;
		}
		if (agg_list_fast(id, k))
			return 0;
		json_t *r = json_object();
		json_object_set(r, list_key[k], R.view[k] ? R.view[k] : json_array());
		agg_reply(id, rpc_result(json_null(), r));
	} else if (strcmp(m, "resources/list") == 0) {
		agg_resources(msg, m, "resources");
	} else if (strcmp(m, "resources/templates/list") == 0) {
		agg_resources(msg, m, "resourceTemplates");
	} else if (strcmp(m, "resources/read") == 0) {
		agg_status(id);
	} else if (strcmp(m, "logging/setLevel") == 0) {
		agg_set_level(msg);
	} else {
		agg_reply(id, rpc_result(json_null(), json_object()));  /* ping */
	}
	return 0;
}

/* The session waiting for the aggregate's initialize goes away. */
static void agg_forget_initialize(struct peer *p, void *arg)
{
	(void)p;
	if (R.init && R.init->arg == arg)
		R.init->cb = NULL;
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
static struct slot *owner_of_uri(const char *uri)
{
	json_t *o = json_object_get(R.uri_owner, uri);
	if (o && (size_t)json_integer_value(o) < R.n)
		return R.v[json_integer_value(o)];
	size_t i;
	json_t *pair;
	json_array_foreach(R.templates, i, pair) {
		if (template_match(json_string_value(json_array_get(pair, 0)), uri))
			return R.v[json_integer_value(json_array_get(pair, 1))];
	}
	size_t first = next_resource_slot(0);
	return first < R.n ? R.v[first] : NULL;
}

/* Routes a named call: rewrites the name at KEY of OBJ to the backend's own. */
static struct peer *route_name(enum list_kind k, json_t *obj, const char *key,
			       int *code, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(obj, key));
	struct mapping *m = name ? hmap_get(&R.map[k], name, strlen(name)) : NULL;
	if (!m) {
		*code = RPC_INVALID_PARAMS;
		snprintf(err, errlen, "Unknown %s: %s", k == LIST_TOOLS ? "tool" : "prompt",
			 name ? name : "(none)");
		return NULL;
	}
	json_object_set_new(obj, key, json_string(m->orig));
	return R.v[m->slot]->peer;
}

/* Picks the destination of a client request. */
struct peer *router_route_request(struct peer *client, json_t *msg, const char *method,
				  int *code, char *err, size_t errlen)
{
	(void)client;
	if (R.n == 0) {  /* not set up (unit tests): the one backend peer */
		struct peer *p = chain_first_peer(client->chain, PEER_BACKEND);
		if (!p) {
			*code = RPC_BACKEND_GONE;
			snprintf(err, errlen, "no backend is configured");
		}
		return p;
	}
	if (!R.multi)
		return first_active()->peer;
	json_t *params = json_object_get(msg, "params");
	if (strcmp(method, "tools/call") == 0)
		return route_name(LIST_TOOLS, params, "name", code, err, errlen);
	if (strcmp(method, "prompts/get") == 0)
		return route_name(LIST_PROMPTS, params, "name", code, err, errlen);
	if (strcmp(method, "completion/complete") == 0) {
		json_t *ref = json_object_get(params, "ref");
		if (json_object_get(ref, "name"))
			return route_name(LIST_PROMPTS, ref, "name", code, err, errlen);
		struct slot *s = owner_of_uri(json_string_value(json_object_get(ref, "uri")) ?: "");
		return s ? s->peer : NULL;
	}
	if (strcmp(method, "resources/read") == 0 || strcmp(method, "resources/subscribe") == 0 ||
	    strcmp(method, "resources/unsubscribe") == 0) {
		const char *uri = json_string_value(json_object_get(params, "uri"));
		if (uri && status_on() && strcmp(uri, STATUS_URI) == 0)
			return &R.agg;
		struct slot *s = owner_of_uri(uri ? uri : "");
		if (!s) {
			*code = RPC_INVALID_PARAMS;
			snprintf(err, errlen, "no backend serves resources");
		}
		return s ? s->peer : NULL;
	}
	if (strcmp(method, "tools/list") == 0 || strcmp(method, "prompts/list") == 0 ||
	    strcmp(method, "resources/list") == 0 ||
	    strcmp(method, "resources/templates/list") == 0 || strcmp(method, "ping") == 0 ||
	    strcmp(method, "logging/setLevel") == 0)
		return &R.agg;
	for (size_t i = 0; i < R.n; i++)  /* anything else: the first ready backend */
		if (R.v[i]->peer->ready)
			return R.v[i]->peer;
	return first_active()->peer;
}

/* Sends notifications/initialized to a backend once per run. */
static void send_initialized(struct slot *s)
{
	if (s->sent_initialized || !s->peer->ready)
		return;
	s->sent_initialized = true;
	chain_notify(&R.agg, s->peer, rpc_notification("notifications/initialized", NULL));
}

/* Client notifications the router handles. */
bool router_client_notification(struct peer *client, json_t *msg, const char *method)
{
	(void)client;
	if (strcmp(method, "notifications/initialized") == 0) {
		R.client_initialized = true;
		if (!R.multi) {
			if (R.n)
				first_active()->sent_initialized = true;
			return false;  /* the client's own, unchanged */
		}
		for (size_t i = 0; i < R.n; i++)
			send_initialized(R.v[i]);
		json_decref(msg);
		return true;
	}
	if (R.multi && strcmp(method, "notifications/roots/list_changed") == 0) {
		for (size_t i = 0; i < R.n; i++)
			if (R.v[i]->peer->ready)
				chain_notify(client, R.v[i]->peer, json_incref(msg));
		json_decref(msg);
		return true;
	}
	return false;
}

/* Backend notifications the router handles. */
bool router_backend_notification(struct peer *backend, json_t *msg, const char *method)
{
	struct slot *s = slot_of(backend);
	if (!R.multi || !s)
		return false;
	for (int k = 0; k < LIST_KINDS; k++) {
		if (strcmp(method, list_note[k]) == 0) {
			json_decref(msg);
			if (!s->paging[k]) {
				s->changed[k] = true;
				fetch_list(s, (enum list_kind)k, NULL);
			} else {
				s->changed[k] = true;
			}
			return true;
		}
	}
	return false;
}

/* A backend is initialized (first time or after a restart). */
void router_backend_ready(struct peer *backend)
{
	struct slot *s = slot_of(backend);
	if (!s)
		return;
	bool restarted = s->was_down;
	s->was_down = false;
	if (restarted)
		s->sent_initialized = false;  /* a new run needs its own */
	if (R.client_initialized)
		send_initialized(s);
	if (!R.multi) {
		if (restarted && R.client_initialized) {
			json_t *caps = caps_of(s);
			for (int k = 0; k < LIST_KINDS; k++)
				if (json_object_get(caps, list_cap[k]))
					notify_clients(list_note[k]);
			if (json_object_get(caps, "resources"))
				notify_clients("notifications/resources/list_changed");
		}
		return;
	}
	refresh(s, restarted || R.agg.ready);
	if (restarted && R.client_initialized && json_object_get(caps_of(s), "resources"))
		notify_clients("notifications/resources/list_changed");
}

/* A backend went down: its names leave the lists until it is back. */
void router_backend_down(struct peer *backend)
{
	struct slot *s = slot_of(backend);
	if (!s)
		return;
	s->was_down = true;
	s->sent_initialized = false;
	if (!R.multi)
		return;
	for (int k = 0; k < LIST_KINDS; k++) {
		json_decref(s->paging[k]);
		s->paging[k] = NULL;
		if (s->items[k] && json_array_size(s->items[k])) {
			rebuild((enum list_kind)k);
			if (R.client_initialized)
				notify_clients(list_note[k]);
		}
	}
}

/* One backend or none: nothing to rewrite. */
bool router_transparent(void)
{
	return !R.multi;
}

/* The peer the front initializes. */
struct peer *router_init_target(struct peer *client)
{
	(void)client;
	if (R.n == 0)
		return chain_first_peer(client->chain, PEER_BACKEND);
	return R.multi ? &R.agg : first_active()->peer;
}

/* Sets up. */
void router_setup(struct chain *chain, const struct cfg *cfg)
{
	R.chain = chain;
	R.cfg = cfg;
	peer_init(&R.agg, &agg_ops, PEER_BACKEND, "mcp-chain");
	R.agg.chain = chain;   /* it speaks for itself before it is a peer of the chain */
	R.agg.answers_inline = true;
	R.uri_owner = json_object();
	R.templates = json_array();
}

/* Adds a backend. */
void router_add_backend(struct peer *backend, const struct cfg_server *entry)
{
	struct slot **v = realloc(R.v, (R.n + 1) * sizeof *v);
	if (!v)
		return;
	R.v = v;
	R.v[R.n] = calloc(1, sizeof **R.v);
	if (!R.v[R.n])
		return;
	R.v[R.n]->index = R.n;
	R.v[R.n]->peer = backend;
	R.v[R.n]->entry = entry;
	R.v[R.n]->prefix = entry->prefix ? entry->prefix : entry->name;
	R.v[R.n]->was_down = R.client_initialized;  /* added by a reload: tell the client */
	R.n++;
	if (!R.multi && router_backends() >= 2) {
		R.multi = true;
		chain_add_peer(R.chain, &R.agg);
	}
}

/* Takes a backend out (a reload removed or replaced it). */
void router_remove_backend(struct peer *backend)
{
	struct slot *s = slot_of(backend);
	if (!s)
		return;
	s->removed = true;
	for (int k = 0; k < LIST_KINDS; k++) {
		json_decref(s->items[k]);
		json_decref(s->paging[k]);
		s->items[k] = s->paging[k] = NULL;
		rebuild((enum list_kind)k);
		if (R.multi && R.client_initialized)
			notify_clients(list_note[k]);
	}
	for (size_t i = json_array_size(R.templates); i-- > 0;)
		if ((size_t)json_integer_value(json_array_get(json_array_get(R.templates, i), 1)) == s->index)
			json_array_remove(R.templates, i);
	const char *uri;
	json_t *v, *tmp;
	json_object_foreach_safe(R.uri_owner, tmp, uri, v)
		if ((size_t)json_integer_value(v) == s->index)
			json_object_del(R.uri_owner, uri);
	if (R.multi && R.client_initialized)
		notify_clients("notifications/resources/list_changed");
}

/* Takes a new configuration: options, and each kept backend's entry. */
void router_reconfigure(const struct cfg *cfg)
{
	R.cfg = cfg;
	for (int k = 0; k < LIST_KINDS; k++)
		rebuild((enum list_kind)k);
}

/* After a reload: the middleware may show other lists; clients look again. */
void router_lists_changed(void)
{
	if (!R.client_initialized || R.n == 0)
		return;
	for (int k = 0; k < LIST_KINDS; k++)
		notify_clients(list_note[k]);
	notify_clients("notifications/resources/list_changed");
}

/* A kept backend's entry in the new configuration. */
void router_update_backend(struct peer *backend, const struct cfg_server *entry)
{
	struct slot *s = slot_of(backend);
	if (!s)
		return;
	s->entry = entry;
	s->prefix = entry->prefix ? entry->prefix : entry->name;
}

/* Number of backends not removed. */
size_t router_backends(void)
{
	size_t n = 0;
	for (size_t i = 0; i < R.n; i++)
		n += !R.v[i]->removed;
	return n;
}

/* Installs the status describer. */
void router_set_status(json_t *(*status_fn)(void *arg), void *arg)
{
	R.status_fn = status_fn;
	R.status_arg = arg;
}

/* Frees everything. */
void router_release(void)
{
	for (size_t i = 0; i < R.n; i++)
		for (int k = 0; k < LIST_KINDS; k++) {
			json_decref(R.v[i]->items[k]);
			json_decref(R.v[i]->paging[k]);
		}
	for (int k = 0; k < LIST_KINDS; k++) {
		hmap_release(&R.map[k]);
		json_decref(R.view[k]);
		free(R.view_line[k]);
	}
	for (int k = 0; k < LIST_KINDS; k++)
		clear_maps((enum list_kind)k);
	if (R.init) {
		ev_timer_stop(EV_DEFAULT, &R.init->settle);
		ev_timer_stop(EV_DEFAULT, &R.init->bound);
		free(R.init);
	}
	if (R.multi) {
		chain_peer_gone(&R.agg, "shutting down");
		chain_remove_peer(&R.agg);
	}
	peer_release(&R.agg);
	json_decref(R.uri_owner);
	json_decref(R.templates);
	json_decref(R.client_params);
	for (size_t i = 0; i < R.n; i++)
		free(R.v[i]);
	free(R.v);
	memset(&R, 0, sizeof R);
}
