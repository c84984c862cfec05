/*
 * agg_tasks.h - the aggregate's task ids (internal to src/aggregate/).
 *
 * With several backends a task id a client sees is the backend's own id
 * behind the backend's head (prefix + separator), as tool names are:
 * "fs__7f3a". The head alone says where the id goes, so a task whose
 * entry is gone (it ended, or the table was full) can still be asked for
 * its result; the table remembers the live ones exactly, which decides
 * where two heads overlap ("a" + "__" and "a__b" + "__").
 *
 * The table is bounded: when full, the oldest entry goes. An entry goes
 * too when a result or notification shows its task in a terminal status
 * (completed, failed, cancelled).
 *
 * Ownership: functions borrow their json_t and string arguments; strings
 * returned through pointers are borrowed from the table until it changes.
 */
#ifndef MCPC_AGG_TASKS_H
#define MCPC_AGG_TASKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define AGG_TASKS_MAX 4096
#define AGG_RELATED_TASK "io.modelcontextprotocol/related-task"

struct agg_tasks;

/* An empty table of at most MAX entries; NULL when out of memory. */
struct agg_tasks *agg_tasks_new(size_t max);

/* Frees T and its entries (NULL is fine). */
void agg_tasks_free(struct agg_tasks *t);

/* Remembers that EXPOSED is backend SLOT's task ORIG (the oldest entry
 * goes when T is full); replaces an entry of the same id. */
void agg_tasks_put(struct agg_tasks *t, const char *exposed, size_t slot, const char *orig);

/* The entry of EXPOSED: true with *SLOT and *ORIG (borrowed) set. */
bool agg_tasks_get(const struct agg_tasks *t, const char *exposed, size_t *slot,
		   const char **orig);

/* Forgets EXPOSED (absent is fine). */
void agg_tasks_del(struct agg_tasks *t, const char *exposed);

/* Forgets every task of backend SLOT (it was taken out). */
void agg_tasks_drop_slot(struct agg_tasks *t, size_t slot);

/* Number of entries. */
size_t agg_tasks_count(const struct agg_tasks *t);

/* True for completed, failed and cancelled. */
bool agg_task_terminal(const char *status);

/*
 * Rewrites every task id in OBJ (a result, or a notification's params) of
 * backend SLOT, whose head is HEAD, to the exposed form, and keeps T up
 * to date from the statuses it shows. Task objects are looked for in OBJ
 * itself (tasks/get, tasks/cancel, notifications/tasks/status), in
 * OBJ.task (a CreateTaskResult), in each of OBJ.tasks (tasks/list); the
 * related-task _meta of OBJ has its id rewritten too. OBJ is changed in
 * place. Returns the number of ids rewritten.
 */
size_t agg_tasks_expose(struct agg_tasks *t, json_t *obj, size_t slot, const char *head);

#endif
