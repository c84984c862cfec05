/*
 * agg_lists.c - the aggregate's caches of its backends' tools and prompts:
 * each backend's list fetched page by page through its own modules, kept
 * with its ttlMs and cacheScope, fetched again on its list_changed or once
 * its ttlMs ran out; and list requests answered from the merged view, as a
 * cached whole response the chain splices the requester's id over.
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msg.h"

const char *const agg_list_method[LIST_KINDS] = { "tools/list", "prompts/list" };
const char *const agg_list_key[LIST_KINDS] = { "tools", "prompts" };
const char *const agg_list_cap[LIST_KINDS] = { "tools", "prompts" };
const char *const agg_list_note[LIST_KINDS] = {
	"notifications/tools/list_changed", "notifications/prompts/list_changed"
};

/* ---------- fetching ---------- */

/* A page of a backend's list being fetched. */
struct fetch {
	struct slot *s;
	enum list_kind k;
};

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
	json_array_extend(s->paging[k], json_object_get(result, agg_list_key[k]));
	page_hints(s, k, result);
	const char *next = json_string_value(json_object_get(result, "nextCursor"));
	if (result && next && *next && s->peer->ready) {
		agg_list_fetch(s, k, next);
		return;
	}
	if (!result) {
		log_warn("%s: %s failed; keeping what was listed", s->entry->name, agg_list_method[k]);
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
	agg_names_rebuild(a, k);
	if (s->changed[k] && a->client_initialized)
		notify_clients(a, agg_list_note[k]);
	s->changed[k] = false;
	agg_list_flush_waiting(a, k);
	agg_init_check(a);
}

/* Asks a backend for (the next page of) its list of kind K. */
void agg_list_fetch(struct slot *s, enum list_kind k, const char *cursor)
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
	if (slot_call(s, agg_list_method[k], params, on_list_page, f) < 0) {
		json_decref(s->paging[k]);
		s->paging[k] = NULL;
	}
}

/* Refreshes every list a backend has (but its resource templates). */
void agg_list_refresh(struct slot *s, bool tell)
{
	json_t *caps = caps_of(s);
	for (int k = 0; k < LIST_KINDS; k++) {
		if (!json_object_get(caps, agg_list_cap[k]) || s->paging[k])
			continue;
		s->changed[k] = tell;
		agg_list_fetch(s, (enum list_kind)k, NULL);
	}
}

/* True while any list refresh is running. */
bool agg_list_fetching(struct aggregate *a)
{
	for (size_t i = 0; i < a->n; i++)
		for (int k = 0; k < LIST_KINDS; k++)
			if (a->v[i]->paging[k])
				return true;
	return false;
}

/* ---------- answering ---------- */

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
	int hn = snprintf(head, sizeof head, VIEW_HEAD VIEW_ID VIEW_RESULT "{\"%s\":", agg_list_key[k]);
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
	json_object_set_new(r, agg_list_key[k], a->view[k] ? json_incref(a->view[k]) : json_array());
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
void agg_list_flush_waiting(struct aggregate *a, enum list_kind k)
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
			agg_list_fetch(s, k, NULL);
		any |= s->paging[k] != NULL;
	}
	if (!any || !paging_kind(a, k))
		return false;
	if (!a->waiting[k])
		a->waiting[k] = json_array();
	json_array_append(a->waiting[k], id);
	return true;
}

/* tools/list or prompts/list: the merged view, once no list is stale. */
void agg_list_answer(struct aggregate *a, json_t *msg, json_t *id, enum list_kind k)
{
	if (json_object_get(json_object_get(msg, "params"), "cursor")) {
		agg_reply(a, id, rpc_error(NULL, RPC_INVALID_PARAMS, "invalid cursor", NULL));
		return;
	}
	if (!refresh_stale(a, id, k))
		answer_list(a, id, k);
}
