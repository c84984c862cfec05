/*
 * agg_resources.c - resources across the aggregate's backends: resources/list
 * and resources/templates/list paged from one backend to the next behind an
 * opaque cursor (tasks/list too, over the backends that list tasks, with
 * their ids exposed), where each URI lives (learnt from those pages and
 * from each backend's templates) for routing, and the status resource.
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---------- where URIs live ---------- */

/* Forgets backend slot IDX's templates. */
static void forget_templates(struct aggregate *a, size_t idx)
{
	for (size_t i = json_array_size(a->templates); i-- > 0;)
		if ((size_t)json_integer_value(json_array_get(json_array_get(a->templates, i), 1)) == idx)
			json_array_remove(a->templates, i);
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

/* Forgets a backend's old templates and asks for its new ones. */
void agg_res_fetch_templates(struct slot *s)
{
	forget_templates(s->a, s->index);  /* forget its old ones */
	if (json_object_get(caps_of(s), "resources"))
		slot_call(s, "resources/templates/list", json_object(), on_templates, s);
}

/* Forgets where a backend taken out had its templates and URIs. */
void agg_res_forget(struct slot *s)
{
	struct aggregate *a = s->a;
	forget_templates(a, s->index);
	const char *uri;
	json_t *v, *tmp;
	json_object_foreach_safe(a->uri_owner, tmp, uri, v)
		if ((size_t)json_integer_value(v) == s->index)
			json_object_del(a->uri_owner, uri);
}

/* ---------- pages across backends ---------- */

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

/* A client's page request, going from backend to backend. */
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
void agg_res_list(struct aggregate *a, json_t *msg, const char *method, const char *key)
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

/* ---------- the backend of a URI ---------- */

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
struct slot *agg_res_owner(struct aggregate *a, const char *uri)
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

/* ---------- the status resource ---------- */

/* The status resource's contents. */
void agg_res_status(struct aggregate *a, json_t *id)
{
	json_t *st = a->status_fn ? a->status_fn(a->status_arg) : json_object();
	char *text = json_dumps(st, JSON_INDENT(2));
	json_decref(st);
	json_t *r = json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", STATUS_URI,
			      "mimeType", "application/json", "text", text ? text : "{}");
	free(text);
	agg_reply(a, id, rpc_result(json_null(), r));
}
