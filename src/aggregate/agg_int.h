/*
 * agg_int.h - what the aggregate's files share (internal to src/aggregate/):
 * the aggregate and its backends' slots, the two cached list kinds, the
 * small helpers every file uses, and each file's entry points.
 *
 * aggregate.c is the object, the chain's router and its peer's glue;
 * agg_names.c the exposed names; agg_lists.c the tools and prompts caches;
 * agg_resources.c resources paged across backends and the status resource;
 * agg_init.c the joined initialize; agg_relay.c the task relay; agg_tasks.c
 * the table of live task ids.
 *
 * Ownership: functions borrow their json_t arguments unless they say they
 * steal them.
 */
#ifndef MCPC_AGG_INT_H
#define MCPC_AGG_INT_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "aggregate.h"
#include "chain.h"
#include "hmap.h"
#include "rpc.h"
#include "agg_tasks.h"

#define STATUS_URI "mcp-chain://status"

/* The lists the aggregate caches and merges under exposed names. */
enum list_kind { LIST_TOOLS, LIST_PROMPTS, LIST_KINDS };

/* Per kind: its method, its result's key, its capability, its list_changed. */
extern const char *const agg_list_method[LIST_KINDS];
extern const char *const agg_list_key[LIST_KINDS];
extern const char *const agg_list_cap[LIST_KINDS];
extern const char *const agg_list_note[LIST_KINDS];

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

/* Where an exposed name leads (agg_names.c). */
struct mapping;

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

/* ---------- helpers every file uses ---------- */

/* True when the status resource is exposed: by default with several backends. */
static inline bool status_on(struct aggregate *a)
{
	return a->cfg->status_set ? a->cfg->status : a->multi;
}

/* The slot of a backend peer, or NULL. */
static inline struct slot *slot_of(struct aggregate *a, struct peer *p)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->peer == p && !a->v[i]->removed)
			return a->v[i];
	return NULL;
}

/* The first backend not removed by a reload (there is always one). */
static inline struct slot *first_active(struct aggregate *a)
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
static inline int slot_call(struct slot *s, const char *method, json_t *params,
			    void (*cb)(struct exchange *ex, json_t *msg, void *arg), void *arg)
{
	return chain_call_in(s->a->chain, s->peer, method, params, s->peer->pl, cb, arg);
}

/* A backend's initialize result capabilities (borrowed). */
static inline json_t *caps_of(struct slot *s)
{
	return s->peer->ready ? json_object_get(s->peer->init_result, "capabilities") : NULL;
}

/* Sends a notification of the aggregate's own to every client. */
static inline void notify_clients(struct aggregate *a, const char *method)
{
	chain_notify(a->multi ? &a->peer : first_active(a)->peer, NULL, rpc_notification(method, NULL));
}

/* A backend's head: its prefix and the separator (task ids are exposed as
 * head + the backend's own id). */
static inline void slot_head(struct slot *s, char *out, size_t n)
{
	snprintf(out, n, "%s%s", s->prefix, s->a->cfg->separator);
}

/* Delivers the aggregate's response (stolen) to request ID. */
static inline void agg_reply(struct aggregate *a, json_t *id, json_t *resp_without_id)
{
	json_object_set(resp_without_id, "id", id);
	a->peer.rx_bytes = 0;
	chain_receive(&a->peer, resp_without_id);
}

/* ---------- agg_names.c: the exposed names of tools and prompts ---------- */

/* Rebuilds the merged view (a->view[K]) and the name map of kind K from
 * the slots, dropping the cached response of the view. */
void agg_names_rebuild(struct aggregate *a, enum list_kind k);

/* Forgets every name of kind K (for freeing). */
void agg_names_clear(struct aggregate *a, enum list_kind k);

/*
 * The backend of exposed name NAME of kind K, *ORIG set to its own name
 * (borrowed until the next rebuild, or a suffix of NAME): the one NAME
 * maps to, else the backend with modules of its own whose head starts
 * NAME (its modules hid the name from its list). NULL when none.
 */
struct slot *agg_names_find(struct aggregate *a, enum list_kind k, const char *name,
			    const char **orig);

/* ---------- agg_lists.c: the tools and prompts caches ---------- */

/* Asks backend S for (the next page, at CURSOR, of) its list of kind K. */
void agg_list_fetch(struct slot *s, enum list_kind k, const char *cursor);

/* Refreshes every cached list backend S has; TELL: clients hear of it. */
void agg_list_refresh(struct slot *s, bool tell);

/* True while any list refresh is running. */
bool agg_list_fetching(struct aggregate *a);

/* Answers the list requests that waited for a refresh, once none runs. */
void agg_list_flush_waiting(struct aggregate *a, enum list_kind k);

/* Answers tools/list or prompts/list request MSG (of id ID) from the
 * merged view, after refreshing the lists whose ttlMs ran out. */
void agg_list_answer(struct aggregate *a, json_t *msg, json_t *id, enum list_kind k);

/* ---------- agg_resources.c: resources across backends ---------- */

/* resources/list, resources/templates/list (KEY the result's array) or
 * tasks/list request MSG: pages across the backends behind one cursor. */
void agg_res_list(struct aggregate *a, json_t *msg, const char *method, const char *key);

/* The backend that owns URI: listed by it, matching one of its templates,
 * else the first with resources; NULL when none has resources. */
struct slot *agg_res_owner(struct aggregate *a, const char *uri);

/* Forgets S's templates and asks it for them again (if it has resources). */
void agg_res_fetch_templates(struct slot *s);

/* Forgets where S's templates and URIs were (it was taken out). */
void agg_res_forget(struct slot *s);

/* Answers resources/read request ID of the status resource. */
void agg_res_status(struct aggregate *a, json_t *id);

/* ---------- agg_init.c: the client's initialize, joined ---------- */

/* The aggregate peer's initialize operation (peer_ops.initialize). */
int agg_init_start(struct peer *p, json_t *params, void (*cb)(void *arg, json_t *response),
		   void *arg);

/* The aggregate peer's forget_initialize operation: the session waiting
 * with ARG went away. */
void agg_init_forget(struct peer *p, void *arg);

/* Answers the client's initialize once every backend is settled. */
void agg_init_check(struct aggregate *a);

/* Stops waiting for taken-out backend S's initialize, if it was waited for. */
void agg_init_drop(struct slot *s);

/* Stops and frees the initialize being answered, if any. */
void agg_init_free(struct aggregate *a);

/* ---------- agg_relay.c: requests relayed to see the backend's answer ---------- */

/* Relays request METHOD with PARAMS (stolen) to backend S for request ID
 * of the aggregate: the answer's task ids are exposed before it goes back;
 * EXPOSED (tasks/result's task id, or NULL) is forgotten then. */
void agg_relay_to(struct aggregate *a, struct slot *s, const char *method, json_t *params,
		  json_t *id, const char *exposed);

/* tasks/get, tasks/result, tasks/cancel, tasks/update (METHOD, request MSG
 * of id ID): to the backend of the task, with its own id. */
void agg_relay_task(struct aggregate *a, json_t *msg, const char *method, json_t *id);

#endif
