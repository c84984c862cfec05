/*
 * test_idmap.c - unit tests for src/core/idmap.c (pointers by the ids a
 * peer gives its own requests: a ring, and a hash map for the ids whose
 * slot is taken).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "idmap.h"

static char vals[4096];   /* values are addresses in here: &vals[k] */

#define V(k) ((void *)&vals[k])

/* Ids that count up, each removed a few later: all in the ring. */
static void test_counting_ids(void **state)
{
	(void)state;
	struct idmap m = IDMAP_INIT;
	assert_null(idmap_get(&m, 1));
	assert_null(idmap_del(&m, 1));
	for (int64_t id = 1; id <= 10000; id++) {
		assert_int_equal(idmap_put(&m, id, V(id % 4096)), 0);
		if (id > 16) {
			assert_ptr_equal(idmap_del(&m, id - 16), V((id - 16) % 4096));
			assert_null(idmap_get(&m, id - 16));
		}
		assert_ptr_equal(idmap_get(&m, id), V(id % 4096));
	}
	assert_int_equal(m.count, 16);
	assert_int_equal(m.spill.count, 0);
	idmap_release(&m);
	assert_int_equal(m.count, 0);
	assert_null(idmap_get(&m, 9999));
}

/* An id whose slot is held by an old one still open goes beside the ring. */
static void test_taken_slot_spills(void **state)
{
	(void)state;
	struct idmap m = IDMAP_INIT;
	assert_int_equal(idmap_put(&m, 5, V(1)), 0);
	assert_int_equal(idmap_put(&m, 5 + IDMAP_RING, V(2)), 0);
	assert_int_equal(idmap_put(&m, 5 + 2 * IDMAP_RING, V(3)), 0);
	assert_int_equal(m.count, 3);
	assert_int_equal(m.spill.count, 2);
	assert_ptr_equal(idmap_get(&m, 5), V(1));
	assert_ptr_equal(idmap_get(&m, 5 + IDMAP_RING), V(2));
	assert_ptr_equal(idmap_get(&m, 5 + 2 * IDMAP_RING), V(3));

	/* the old one leaves; the slot is free, but the spilled id stays one id */
	assert_ptr_equal(idmap_del(&m, 5), V(1));
	assert_null(idmap_get(&m, 5));
	assert_int_equal(idmap_put(&m, 5 + IDMAP_RING, V(4)), 0);   /* a replacement */
	assert_int_equal(m.count, 2);
	assert_ptr_equal(idmap_get(&m, 5 + IDMAP_RING), V(4));
	assert_ptr_equal(idmap_del(&m, 5 + IDMAP_RING), V(4));
	assert_null(idmap_get(&m, 5 + IDMAP_RING));
	assert_null(idmap_del(&m, 5 + IDMAP_RING));
	assert_int_equal(m.count, 1);

	/* the free slot takes the next one */
	assert_int_equal(idmap_put(&m, 5 + 3 * IDMAP_RING, V(5)), 0);
	assert_int_equal(m.spill.count, 1);
	assert_ptr_equal(idmap_get(&m, 5 + 3 * IDMAP_RING), V(5));
	assert_int_equal(m.count, 2);
	idmap_release(&m);
}

/* A put under an id already there replaces it, in the ring and beside it. */
static void test_replace(void **state)
{
	(void)state;
	struct idmap m = IDMAP_INIT;
	assert_int_equal(idmap_put(&m, 7, V(1)), 0);
	assert_int_equal(idmap_put(&m, 7, V(2)), 0);
	assert_int_equal(m.count, 1);
	assert_ptr_equal(idmap_get(&m, 7), V(2));
	assert_int_equal(idmap_put(&m, 7 + IDMAP_RING, V(3)), 0);
	assert_int_equal(idmap_put(&m, 7 + IDMAP_RING, V(4)), 0);
	assert_int_equal(m.count, 2);
	assert_ptr_equal(idmap_get(&m, 7 + IDMAP_RING), V(4));
	idmap_release(&m);
}

/* Negative and very large ids: the low bits pick the slot, the whole id is the key. */
static void test_any_int64(void **state)
{
	(void)state;
	struct idmap m = IDMAP_INIT;
	int64_t ids[] = { 0, -1, INT64_MIN, INT64_MAX, -(int64_t)IDMAP_RING - 1,
			  (int64_t)1 << 40, ((int64_t)1 << 40) + IDMAP_RING };
	size_t n = sizeof ids / sizeof *ids;
	for (size_t i = 0; i < n; i++)
		assert_int_equal(idmap_put(&m, ids[i], V(i)), 0);
	assert_int_equal(m.count, n);
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(idmap_get(&m, ids[i]), V(i));
	assert_null(idmap_get(&m, 1));
	assert_null(idmap_get(&m, INT64_MAX - 1));
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(idmap_del(&m, ids[i]), V(i));
	assert_int_equal(m.count, 0);
	idmap_release(&m);
}

static void count_value(void *value, void *arg)
{
	size_t *seen = arg;
	seen[(char *)value - vals]++;
}

/* Each and drain see every value once, wherever it lives; drain empties. */
static void test_each_and_drain(void **state)
{
	(void)state;
	struct idmap m = IDMAP_INIT;
	size_t seen[4096] = { 0 };
	idmap_each(&m, count_value, seen);   /* empty and never used: nothing */
	size_t n;
	void **v = idmap_drain(&m, &n);
	assert_non_null(v);
	assert_int_equal(n, 0);
	free(v);

	for (int64_t k = 0; k < 600; k++)   /* 600 ids: some share a slot */
		assert_int_equal(idmap_put(&m, k * 3, V(k)), 0);
	assert_true(m.spill.count > 0);
	idmap_each(&m, count_value, seen);
	for (size_t k = 0; k < 600; k++)
		assert_int_equal(seen[k], 1);
	v = idmap_drain(&m, &n);
	assert_int_equal(n, 600);
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < n; i++)
		count_value(v[i], seen);
	for (size_t k = 0; k < 600; k++)
		assert_int_equal(seen[k], 1);
	free(v);
	assert_int_equal(m.count, 0);
	assert_null(idmap_get(&m, 3));
	assert_null(idmap_get(&m, 1797));
	/* usable again after a drain */
	assert_int_equal(idmap_put(&m, 3, V(9)), 0);
	assert_ptr_equal(idmap_get(&m, 3), V(9));
	idmap_release(&m);
}

/* Random puts and removes agree with a plain table, ids spread over a few rings. */
static void test_random_against_model(void **state)
{
	(void)state;
	enum { SPAN = 4 * IDMAP_RING };
	static void *model[SPAN];
	memset(model, 0, sizeof model);
	struct idmap m = IDMAP_INIT;
	size_t live = 0;
	srand(12345);
	for (int step = 0; step < 200000; step++) {
		int64_t id = rand() % SPAN;
		int op = rand() % 3;
		if (op == 0) {
			void *v = V(rand() % 4096);
			assert_int_equal(idmap_put(&m, id, v), 0);
			live += model[id] == NULL;
			model[id] = v;
		} else if (op == 1) {
			void *v = idmap_del(&m, id);
			assert_ptr_equal(v, model[id]);
			live -= model[id] != NULL;
			model[id] = NULL;
		} else {
			assert_ptr_equal(idmap_get(&m, id), model[id]);
		}
		assert_int_equal(m.count, live);
	}
	for (int64_t id = 0; id < SPAN; id++)
		assert_ptr_equal(idmap_get(&m, id), model[id]);
	idmap_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counting_ids),
		cmocka_unit_test(test_taken_slot_spills),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_any_int64),
		cmocka_unit_test(test_each_and_drain),
		cmocka_unit_test(test_random_against_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
