/*
 * test_agg_tasks.c - unit tests for src/aggregate/agg_tasks.c: the bounded
 * table of live task ids and the rewriting of ids in backends' results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../../../src/aggregate/agg_tasks.h"

static json_t *J(const char *s)
{
	json_error_t e;
	json_t *v = json_loads(s, 0, &e);
	if (!v)
		fail_msg("bad JSON %s: %s", s, e.text);
	return v;
}

/* put, get, replace, del; the oldest goes when the table is full. */
static void test_table_bounded(void **state)
{
	(void)state;
	struct agg_tasks *t = agg_tasks_new(2);
	size_t slot;
	const char *orig;
	agg_tasks_put(t, "a__1", 0, "1");
	agg_tasks_put(t, "b__1", 1, "1");
	assert_true(agg_tasks_get(t, "b__1", &slot, &orig));
	assert_int_equal(slot, 1);
	assert_string_equal(orig, "1");
	agg_tasks_put(t, "a__2", 0, "2");   /* full: a__1, the oldest, goes */
	assert_int_equal(agg_tasks_count(t), 2);
	assert_false(agg_tasks_get(t, "a__1", &slot, &orig));
	assert_true(agg_tasks_get(t, "a__2", &slot, &orig));
	agg_tasks_put(t, "a__2", 0, "2");   /* the same id again: one entry */
	assert_int_equal(agg_tasks_count(t), 2);
	agg_tasks_del(t, "b__1");
	agg_tasks_del(t, "absent");
	assert_int_equal(agg_tasks_count(t), 1);
	agg_tasks_put(t, "b__9", 1, "9");
	agg_tasks_drop_slot(t, 0);
	assert_false(agg_tasks_get(t, "a__2", &slot, &orig));
	assert_true(agg_tasks_get(t, "b__9", &slot, &orig));
	agg_tasks_free(t);
}

/* Ids in a CreateTaskResult, a Task, a list and a related-task _meta are
 * exposed; live ones are learnt, terminal ones forgotten. */
static void test_expose(void **state)
{
	(void)state;
	struct agg_tasks *t = agg_tasks_new(AGG_TASKS_MAX);
	size_t slot;
	const char *orig;
	json_t *r = J("{\"task\":{\"taskId\":\"x\",\"status\":\"working\"}}");
	assert_int_equal(agg_tasks_expose(t, r, 3, "fs__"), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "task"), "taskId")),
			    "fs__x");
	assert_true(agg_tasks_get(t, "fs__x", &slot, &orig));
	assert_int_equal(slot, 3);
	assert_string_equal(orig, "x");
	json_decref(r);

	r = J("{\"taskId\":\"x\",\"status\":\"completed\"}");   /* tasks/get: it ended */
	agg_tasks_expose(t, r, 3, "fs__");
	assert_string_equal(json_string_value(json_object_get(r, "taskId")), "fs__x");
	assert_false(agg_tasks_get(t, "fs__x", &slot, &orig));
	json_decref(r);

	r = J("{\"tasks\":[{\"taskId\":\"p\",\"status\":\"input_required\"},"
	      "{\"taskId\":\"q\",\"status\":\"failed\"}],\"nextCursor\":\"c\"}");
	assert_int_equal(agg_tasks_expose(t, r, 1, "g-"), 2);
	assert_true(agg_tasks_get(t, "g-p", &slot, &orig));
	assert_false(agg_tasks_get(t, "g-q", &slot, &orig));
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(r, "tasks"), 1), "taskId")), "g-q");
	json_decref(r);

	r = J("{\"content\":[],\"_meta\":{\"" AGG_RELATED_TASK "\":{\"taskId\":\"z\"}}}");
	assert_int_equal(agg_tasks_expose(t, r, 1, "g-"), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(r,
		"_meta"), AGG_RELATED_TASK), "taskId")), "g-z");
	assert_false(agg_tasks_get(t, "g-z", &slot, &orig));  /* no status: not learnt */
	json_decref(r);

	r = J("{\"content\":[{\"type\":\"text\",\"text\":\"no task here\"}]}");
	assert_int_equal(agg_tasks_expose(t, r, 1, "g-"), 0);
	json_decref(r);
	assert_true(agg_task_terminal("cancelled"));
	assert_false(agg_task_terminal("working"));
	assert_false(agg_task_terminal(NULL));
	agg_tasks_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_bounded),
		cmocka_unit_test(test_expose),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
