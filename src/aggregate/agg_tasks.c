/*
 * agg_tasks.c - the aggregate's bounded table of live task ids, and the
 * rewriting of task ids in backends' results to their exposed form
 * (see agg_tasks.h).
 */
#include "agg_tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

struct task_ent {
	char *exposed;              /* owned: the id the client knows */
	char *orig;                 /* owned: the backend's own id */
	size_t slot;
	struct task_ent *prev, *next;  /* oldest first */
};

struct agg_tasks {
	struct hmap map;            /* exposed -> task_ent */
	struct task_ent *head, *tail;
	size_t max;
};

/* A new table. */
struct agg_tasks *agg_tasks_new(size_t max)
{
	struct agg_tasks *t = calloc(1, sizeof *t);
	if (t)
		t->max = max ? max : 1;
	return t;
}

/* Unlinks and frees E (its map entry must be gone). */
static void ent_free(struct agg_tasks *t, struct task_ent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		t->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		t->tail = e->prev;
	free(e->exposed);
	free(e->orig);
	free(e);
}

/* Frees the table. */
void agg_tasks_free(struct agg_tasks *t)
{
	if (!t)
		return;
	while (t->head)
		ent_free(t, t->head);
	hmap_release(&t->map);
	free(t);
}

/* Forgets one id. */
void agg_tasks_del(struct agg_tasks *t, const char *exposed)
{
	struct task_ent *e = hmap_del(&t->map, exposed, strlen(exposed));
	if (e)
		ent_free(t, e);
}

/* Remembers a live task; the oldest goes when the table is full. */
void agg_tasks_put(struct agg_tasks *t, const char *exposed, size_t slot, const char *orig)
{
	agg_tasks_del(t, exposed);
	while (t->map.count >= t->max && t->head)
		agg_tasks_del(t, t->head->exposed);
	struct task_ent *e = calloc(1, sizeof *e);
	if (!e)
		return;
	e->exposed = strdup(exposed);
	e->orig = strdup(orig);
	e->slot = slot;
	if (!e->exposed || !e->orig || hmap_put(&t->map, exposed, strlen(exposed), e) < 0) {
		free(e->exposed);
		free(e->orig);
		free(e);
		return;
	}
	e->prev = t->tail;
	if (t->tail)
		t->tail->next = e;
	else
		t->head = e;
	t->tail = e;
}

/* Looks an id up. */
bool agg_tasks_get(const struct agg_tasks *t, const char *exposed, size_t *slot,
		   const char **orig)
{
	struct task_ent *e = hmap_get(&t->map, exposed, strlen(exposed));
	if (!e)
		return false;
	*slot = e->slot;
	*orig = e->orig;
	return true;
}

/* Forgets a backend's tasks. */
void agg_tasks_drop_slot(struct agg_tasks *t, size_t slot)
{
	struct task_ent *e = t->head;
	while (e) {
		struct task_ent *next = e->next;
		if (e->slot == slot)
			agg_tasks_del(t, e->exposed);
		e = next;
	}
}

/* Entries in the table. */
size_t agg_tasks_count(const struct agg_tasks *t)
{
	return t->map.count;
}

/* The statuses after which a task changes no more. */
bool agg_task_terminal(const char *status)
{
	return status && (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
			  strcmp(status, "cancelled") == 0);
}

/* HEAD + ORIG in a new string, or NULL. */
static char *exposed_id(const char *head, const char *orig)
{
	size_t hn = strlen(head), on = strlen(orig);
	char *s = malloc(hn + on + 1);
	if (s) {
		memcpy(s, head, hn);
		memcpy(s + hn, orig, on + 1);
	}
	return s;
}

/* Rewrites the taskId of task object TASK; with LEARN, keeps T told. */
static size_t expose_one(struct agg_tasks *t, json_t *task, size_t slot, const char *head,
			 bool learn)
{
	const char *orig = json_string_value(json_object_get(task, "taskId"));
	if (!orig)
		return 0;
	char *ex = exposed_id(head, orig);
	if (!ex)
		return 0;
	const char *status = json_string_value(json_object_get(task, "status"));
	if (learn && status) {
		if (agg_task_terminal(status))
			agg_tasks_del(t, ex);
		else
			agg_tasks_put(t, ex, slot, orig);
	}
	json_object_set_new(task, "taskId", json_string(ex));  /* frees ORIG */
	free(ex);
	return 1;
}

/* Rewrites every task id of a backend's result or notification. */
size_t agg_tasks_expose(struct agg_tasks *t, json_t *obj, size_t slot, const char *head)
{
	size_t n = 0, i;
	json_t *it;
	if (!json_is_object(obj))
		return 0;
	n += expose_one(t, obj, slot, head, true);
	n += expose_one(t, json_object_get(obj, "task"), slot, head, true);
	json_array_foreach(json_object_get(obj, "tasks"), i, it)
		n += expose_one(t, it, slot, head, true);
	json_t *meta = json_object_get(json_object_get(obj, "_meta"), AGG_RELATED_TASK);
	n += expose_one(t, meta, slot, head, false);
	return n;
}
