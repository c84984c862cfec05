/*
 * aggregate.c - several backends behind one endpoint: the aggregate
 * object, the chain's router (chain.h) for it, and its own peer's glue.
 * The router sends each client request to the backend that owns its name,
 * URI or task, or to the aggregate's own peer, whose send operation
 * dispatches what the aggregate answers itself to the files that do
 * (agg_int.h lists them). With one backend it routes everything to it
 * unchanged and only keeps the client told across restarts.
 *
 * It uses the core the way a backend does: it is a peer of the chain (it
 * answers lists, paging and the status resource as responses the chain
 * carries back through the modules), and asks backends for their lists
 * through each backend's own modules (slot_call).
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msg.h"

/* Refreshes every list a backend has. */
static void refresh(struct slot *s, bool tell)
{
	agg_res_fetch_templates(s);
	agg_list_refresh(s, tell);
}

/* ---------- routing ---------- */

/* The requests about a task named by params.taskId. */
static bool is_task_method(const char *m)
{
	return strcmp(m, "tasks/get") == 0 || strcmp(m, "tasks/result") == 0 ||
		strcmp(m, "tasks/cancel") == 0 || strcmp(m, "tasks/update") == 0;
}

/* Routes a named call: rewrites the name at KEY of OBJ to the backend's own. */
static struct peer *route_name(struct aggregate *a, enum list_kind k, json_t *obj, const char *key,
			       int *code, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(obj, key)), *orig = NULL;
	struct slot *s = name ? agg_names_find(a, k, name, &orig) : NULL;
	if (!s) {
		*code = RPC_INVALID_PARAMS;
		snprintf(err, errlen, "Unknown %s: %s", k == LIST_TOOLS ? "tool" : "prompt",
			 name ? name : "(none)");
		return NULL;
	}
	json_object_set_new(obj, key, json_string(orig));
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
		struct slot *s = agg_res_owner(a, json_string_value(json_object_get(ref, "uri")) ?: "");
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
		struct slot *s = agg_res_owner(a, uri ? uri : "");
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

/* ---------- notifications ---------- */

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
		if (strcmp(method, agg_list_note[k]) == 0) {
			s->changed[k] = true;
			if (!s->paging[k])
				agg_list_fetch(s, (enum list_kind)k, NULL);
			return true;
		}
	}
	return false;
}

/* ---------- the aggregate's own peer ---------- */

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

static int agg_send(struct peer *p, json_t *msg, const struct peer_out *o);

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
	agg_relay_to(a, s, m, json_deep_copy(json_object_get(msg, "params")), id, NULL);
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
		agg_list_answer(a, msg, id, m[0] == 't' ? LIST_TOOLS : LIST_PROMPTS);
	} else if (strcmp(m, "resources/list") == 0) {
		agg_res_list(a, msg, m, "resources");
	} else if (strcmp(m, "resources/templates/list") == 0) {
		agg_res_list(a, msg, m, "resourceTemplates");
	} else if (strcmp(m, "tasks/list") == 0) {
		agg_res_list(a, msg, m, "tasks");
	} else if (is_task_method(m)) {
		agg_relay_task(a, msg, m, id);
	} else if (json_is_object(json_object_get(json_object_get(msg, "params"), "task"))) {
		agg_task_augmented(a, msg, m, id, o);
	} else if (strcmp(m, "resources/read") == 0) {
		agg_res_status(a, id);
	} else if (strcmp(m, "logging/setLevel") == 0) {
		agg_set_level(a, msg);
	} else {
		agg_reply(a, id, rpc_result(json_null(), json_object()));  /* ping */
	}
	return 0;
}

static const struct peer_ops agg_ops = {
	.send = agg_send, .initialize = agg_init_start, .forget_initialize = agg_init_forget,
};

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
				if (json_object_get(caps, agg_list_cap[k]))
					notify_clients(a, agg_list_note[k]);
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
			agg_names_rebuild(a, (enum list_kind)k);
			if (a->client_initialized)
				notify_clients(a, agg_list_note[k]);
		}
		agg_list_flush_waiting(a, (enum list_kind)k);
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
	agg_init_drop(s);
	for (int k = 0; k < LIST_KINDS; k++) {
		json_decref(s->items[k]);
		json_decref(s->paging[k]);
		s->items[k] = s->paging[k] = NULL;
		agg_names_rebuild(a, (enum list_kind)k);
		if (a->multi && a->client_initialized)
			notify_clients(a, agg_list_note[k]);
		agg_list_flush_waiting(a, (enum list_kind)k);
	}
	agg_tasks_drop_slot(a->tasks, s->index);
	agg_res_forget(s);
	if (a->multi && a->client_initialized)
		notify_clients(a, "notifications/resources/list_changed");
}

/* Takes a new configuration: options, and each kept backend's entry. */
void aggregate_reconfigure(struct aggregate *a, const struct cfg *cfg)
{
	a->cfg = cfg;
	for (int k = 0; k < LIST_KINDS; k++)
		agg_names_rebuild(a, (enum list_kind)k);
}

/* After a reload: the middleware may show other lists; clients look again. */
void aggregate_lists_changed(struct aggregate *a)
{
	if (!a->client_initialized || aggregate_backends(a) == 0)
		return;
	for (int k = 0; k < LIST_KINDS; k++)
		notify_clients(a, agg_list_note[k]);
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

/* The tools BACKEND's cached list holds, or -1. */
long aggregate_tool_count(const struct aggregate *a, const struct peer *backend)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->peer == backend && !a->v[i]->removed)
			return a->v[i]->items[LIST_TOOLS] ?
				(long)json_array_size(a->v[i]->items[LIST_TOOLS]) : -1;
	return -1;
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
		agg_names_clear(a, (enum list_kind)k);
		json_decref(a->view[k]);
		free(a->view_line[k]);
		json_decref(a->waiting[k]);  /* their requests fail with the peer below */
	}
	agg_tasks_free(a->tasks);
	agg_init_free(a);
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
