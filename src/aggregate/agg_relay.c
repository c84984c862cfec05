/*
 * agg_relay.c - requests the aggregate relays to a backend to read the
 * answer: those about a task (tasks/get, tasks/result, tasks/cancel,
 * tasks/update), sent to the backend whose task it is with the backend's
 * own id, and requests with params.task, whose answer may make a task.
 * The task ids in the answers are exposed (agg_tasks.c) before they go back.
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
void agg_relay_to(struct aggregate *a, struct slot *s, const char *method, json_t *params,
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
void agg_relay_task(struct aggregate *a, json_t *msg, const char *m, json_t *id)
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
	agg_relay_to(a, s, m, p, id, strcmp(m, "tasks/result") == 0 ? tid : NULL);
}
