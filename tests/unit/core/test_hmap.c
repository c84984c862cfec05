/*
 * test_hmap.c - unit tests for src/core/hmap.c (byte-keyed hash map).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hmap.h"

static void test_put_get_del(void **state)
{
	struct hmap m = HMAP_INIT;
	int a = 1, b = 2;
	(void)state;
	assert_null(hmap_get(&m, "x", 1));        /* empty map, no slots yet */
	assert_null(hmap_del(&m, "x", 1));
	assert_int_equal(hmap_put(&m, "alpha", 5, &a), 0);
	assert_int_equal(hmap_put(&m, "beta", 4, &b), 0);
	assert_int_equal(m.count, 2);
	assert_ptr_equal(hmap_get(&m, "alpha", 5), &a);
	assert_ptr_equal(hmap_get(&m, "beta", 4), &b);
	assert_null(hmap_get(&m, "alph", 4));     /* prefix is another key */
	assert_null(hmap_get(&m, "alphaa", 6));
	assert_ptr_equal(hmap_del(&m, "alpha", 5), &a);
	assert_null(hmap_get(&m, "alpha", 5));
	assert_null(hmap_del(&m, "alpha", 5));
	assert_int_equal(m.count, 1);
	assert_ptr_equal(hmap_get(&m, "beta", 4), &b);
	hmap_release(&m);
	assert_int_equal(m.count, 0);
	assert_null(hmap_get(&m, "beta", 4));
}

/* Keys are bytes: embedded NULs and the empty key work; the key is copied. */
static void test_binary_keys(void **state)
{
	struct hmap m = HMAP_INIT;
	int a, b, c;
	char key[4] = { 'k', '\0', 'x', '\0' };
	(void)state;
	assert_int_equal(hmap_put(&m, key, 3, &a), 0);
	assert_int_equal(hmap_put(&m, key, 1, &b), 0);
	assert_int_equal(hmap_put(&m, "", 0, &c), 0);
	key[2] = 'y';                             /* the map kept its own copy */
	assert_null(hmap_get(&m, key, 3));
	key[2] = 'x';
	assert_ptr_equal(hmap_get(&m, key, 3), &a);
	assert_ptr_equal(hmap_get(&m, "k", 1), &b);
	assert_ptr_equal(hmap_get(&m, "", 0), &c);
	hmap_release(&m);
}

static void test_replace(void **state)
{
	struct hmap m = HMAP_INIT;
	int a, b;
	(void)state;
	assert_int_equal(hmap_put(&m, "k", 1, &a), 0);
	assert_int_equal(hmap_put(&m, "k", 1, &b), 0);
	assert_int_equal(m.count, 1);
	assert_ptr_equal(hmap_get(&m, "k", 1), &b);
	assert_ptr_equal(hmap_del(&m, "k", 1), &b);
	assert_int_equal(m.count, 0);
	assert_null(hmap_get(&m, "k", 1));
	hmap_release(&m);
}

/* hmap_add stores only a key that is not there, and says which it did. */
static void test_add(void **state)
{
	struct hmap m = HMAP_INIT;
	int a, b;
	(void)state;
	assert_int_equal(hmap_add(&m, "key-one", 7, &a), 0);
	assert_int_equal(hmap_add(&m, "key-one", 7, &b), 1);
	assert_int_equal(m.count, 1);
	assert_ptr_equal(hmap_get(&m, "key-one", 7), &a);
	assert_int_equal(hmap_add(&m, "key-one-longer-than-16", 22, &b), 0);
	assert_int_equal(hmap_add(&m, "key-one-longer-than-16", 22, &a), 1);
	assert_ptr_equal(hmap_get(&m, "key-one-longer-than-16", 22), &b);
	assert_null(hmap_get(&m, "key-one-longer-than-17", 22));
	assert_null(hmap_get(&m, "key-onf", 7));
	assert_ptr_equal(hmap_del(&m, "key-one", 7), &a);
	assert_int_equal(hmap_add(&m, "key-one", 7, &b), 0);
	assert_ptr_equal(hmap_get(&m, "key-one", 7), &b);
	hmap_release(&m);
}

#define MANY 20000

/* Growth past many entries keeps every entry reachable. */
static void test_growth(void **state)
{
	struct hmap m = HMAP_INIT;
	static int vals[MANY];
	char key[32];
	(void)state;
	for (int i = 0; i < MANY; i++) {
		int n = snprintf(key, sizeof key, "key-%d", i);
		assert_int_equal(hmap_put(&m, key, (size_t)n, &vals[i]), 0);
	}
	assert_int_equal(m.count, MANY);
	assert_true(m.nslots >= MANY);            /* load factor <= 1 */
	for (int i = 0; i < MANY; i++) {
		int n = snprintf(key, sizeof key, "key-%d", i);
		assert_ptr_equal(hmap_get(&m, key, (size_t)n), &vals[i]);
	}
	/* remove the odd ones, the even ones stay */
	for (int i = 1; i < MANY; i += 2) {
		int n = snprintf(key, sizeof key, "key-%d", i);
		assert_ptr_equal(hmap_del(&m, key, (size_t)n), &vals[i]);
	}
	assert_int_equal(m.count, MANY / 2);
	for (int i = 0; i < MANY; i++) {
		int n = snprintf(key, sizeof key, "key-%d", i);
		if (i % 2)
			assert_null(hmap_get(&m, key, (size_t)n));
		else
			assert_ptr_equal(hmap_get(&m, key, (size_t)n), &vals[i]);
	}
	hmap_release(&m);
}

/* Integer keys, as the chain uses them (json_int_t bytes). */
static void test_integer_keys(void **state)
{
	struct hmap m = HMAP_INIT;
	static long long ids[1000];
	(void)state;
	for (long long i = 0; i < 1000; i++) {
		ids[i] = i + 1;
		assert_int_equal(hmap_put(&m, &ids[i], sizeof ids[i], &ids[i]), 0);
	}
	for (long long i = 1; i <= 1000; i++) {
		long long *v = hmap_get(&m, &i, sizeof i);
		assert_non_null(v);
		assert_int_equal(*v, i);
	}
	hmap_release(&m);
}

/* Sums the ints a map holds. */
static void sum_fn(void *value, void *arg)
{
	*(int *)arg += *(int *)value;
}

/*
 * Keys of the lengths compiled as constants (8, 9) and their neighbours,
 * sharing prefixes: each length is its own key, found, replaced, added and
 * removed alike (hmap.c's KEYLEN picks a copy of each operation by length).
 */
static void test_key_lengths(void **state)
{
	static const size_t lens[] = { 0, 1, 7, 8, 9, 10, 15, 16, 17, 24 };
	enum { N = sizeof lens / sizeof *lens, PER = 40 };
	struct hmap m = HMAP_INIT;
	unsigned char key[32];
	int vals[N][PER];
	(void)state;
	for (size_t l = 0; l < N; l++) {
		for (int i = 0; i < PER; i++) {
			memset(key, 'k', sizeof key);
			key[0] = (unsigned char)i;   /* one prefix shared by every length */
			assert_int_equal(hmap_add(&m, key, lens[l], &vals[l][i]), lens[l] ? 0 : i > 0);
		}
	}
	assert_int_equal(m.count, (N - 1) * PER + 1);
	for (size_t l = 1; l < N; l++) {
		for (int i = 0; i < PER; i++) {
			memset(key, 'k', sizeof key);
			key[0] = (unsigned char)i;
			assert_ptr_equal(hmap_get(&m, key, lens[l]), &vals[l][i]);
			assert_int_equal(hmap_add(&m, key, lens[l], &vals[0][0]), 1);
			assert_int_equal(hmap_put(&m, key, lens[l], &vals[0][1]), 0);
			assert_ptr_equal(hmap_get(&m, key, lens[l]), &vals[0][1]);
			key[lens[l] - 1] = 0xee;   /* the last byte differs: another key */
			assert_null(hmap_get(&m, key, lens[l]));
			assert_null(hmap_del(&m, key, lens[l]));
		}
	}
	for (size_t l = 1; l < N; l++) {
		for (int i = 0; i < PER; i++) {
			memset(key, 'k', sizeof key);
			key[0] = (unsigned char)i;
			assert_ptr_equal(hmap_del(&m, key, lens[l]), &vals[0][1]);
			assert_null(hmap_get(&m, key, lens[l]));
		}
	}
	assert_int_equal(m.count, 1);   /* the empty key */
	hmap_release(&m);
}

static void test_each(void **state)
{
	struct hmap m = HMAP_INIT;
	int v[5] = { 1, 2, 4, 8, 16 };
	int sum = 0;
	(void)state;
	hmap_each(&m, sum_fn, &sum);              /* empty map */
	assert_int_equal(sum, 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(hmap_put(&m, &i, sizeof i, &v[i]), 0);
	hmap_each(&m, sum_fn, &sum);
	assert_int_equal(sum, 31);
	hmap_release(&m);
}

static void test_drain(void **state)
{
	struct hmap m = HMAP_INIT;
	static int vals[100];
	size_t n = 99;
	(void)state;
	void **v = hmap_drain(&m, &n);            /* empty map */
	assert_non_null(v);
	assert_int_equal(n, 0);
	free(v);
	for (int i = 0; i < 100; i++) {
		vals[i] = i;
		assert_int_equal(hmap_put(&m, &i, sizeof i, &vals[i]), 0);
	}
	v = hmap_drain(&m, &n);
	assert_non_null(v);
	assert_int_equal(n, 100);
	assert_int_equal(m.count, 0);
	int seen[100] = { 0 };
	for (size_t i = 0; i < n; i++)
		seen[*(int *)v[i]]++;
	for (int i = 0; i < 100; i++)
		assert_int_equal(seen[i], 1);
	free(v);
	/* the drained map is empty and usable again */
	int k = 5;
	assert_null(hmap_get(&m, &k, sizeof k));
	assert_int_equal(hmap_put(&m, &k, sizeof k, &vals[5]), 0);
	assert_ptr_equal(hmap_get(&m, &k, sizeof k), &vals[5]);
	hmap_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_del),
		cmocka_unit_test(test_binary_keys),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_integer_keys),
		cmocka_unit_test(test_key_lengths),
		cmocka_unit_test(test_each),
		cmocka_unit_test(test_drain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
