/*
 * test_buf.c - unit tests for src/core/buf.c (growable byte buffer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"

/* Appending then consuming returns the bytes in order and resets when empty. */
static void test_append_consume(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(buf_pending(&b), 0);
	assert_int_equal(buf_append(&b, "hello ", 6), 0);
	assert_int_equal(buf_append(&b, "world", 5), 0);
	assert_int_equal(buf_pending(&b), 11);
	assert_memory_equal(b.data + b.off, "hello world", 11);
	buf_consume(&b, 6);
	assert_int_equal(buf_pending(&b), 5);
	assert_memory_equal(b.data + b.off, "world", 5);
	buf_consume(&b, 5);
	assert_int_equal(buf_pending(&b), 0);
	assert_int_equal(b.off, 0);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	assert_null(b.data);
	assert_int_equal(b.cap, 0);
}

/* Growth keeps earlier bytes intact across many reallocations. */
static void test_growth(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	for (int i = 0; i < 100000; i++) {
		unsigned char c = (unsigned char)(i % 251);
		assert_int_equal(buf_append(&b, &c, 1), 0);
	}
	assert_int_equal(buf_pending(&b), 100000);
	assert_true(b.cap >= 100000);
	for (int i = 0; i < 100000; i++)
		assert_int_equal((unsigned char)b.data[i], i % 251);
	buf_release(&b);
}

/* Compaction moves pending bytes to offset 0. */
static void test_compact(void **state)
{
	struct buf b = BUF_INIT;
	(void)state;
	assert_int_equal(buf_append(&b, "abcdef", 6), 0);
	buf_consume(&b, 4);
	buf_compact(&b);
	assert_int_equal(b.off, 0);
	assert_int_equal(buf_pending(&b), 2);
	assert_memory_equal(b.data, "ef", 2);
	buf_release(&b);
}

/* Reserving reuses consumed space at the front before growing. */
/* buf_printf appends formatted text, longer than any first guess too. */
static void test_printf(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	assert_int_equal(buf_printf(&b, "a=%d ", 42), 0);
	char big[5000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(buf_printf(&b, "%s!", big), 0);
	assert_int_equal(buf_pending(&b), 5 + 4999 + 1);
	assert_memory_equal(b.data, "a=42 xx", 7);
	assert_int_equal(b.data[b.len - 1], '!');
	buf_release(&b);
}

static void test_reserve_reuses_consumed_space(void **state)
{
	struct buf b = BUF_INIT;
	char block[3000];
	(void)state;
	memset(block, 'x', sizeof block);
	assert_int_equal(buf_append(&b, block, sizeof block), 0);
	size_t cap = b.cap;
	buf_consume(&b, 2500);
	assert_int_equal(buf_reserve(&b, 2000), 0);
	assert_int_equal(b.cap, cap);         /* compacted, not grown */
	assert_int_equal(b.off, 0);
	assert_int_equal(buf_pending(&b), 500);
	assert_true(b.cap - b.len >= 2000);
	buf_release(&b);
}

/* Shrinking frees a large idle buffer and leaves a busy one alone. */
static void test_shrink(void **state)
{
	struct buf b = BUF_INIT;
	static char big[8192];
	(void)state;
	assert_int_equal(buf_append(&b, big, sizeof big), 0);
	buf_shrink(&b, 4096);                 /* not empty: kept */
	assert_non_null(b.data);
	buf_consume(&b, sizeof big);
	buf_shrink(&b, 1u << 20);             /* under the limit: kept */
	assert_non_null(b.data);
	buf_shrink(&b, 4096);
	assert_null(b.data);
	assert_int_equal(b.cap, 0);
	buf_release(&b);
}

/*
 * A short copy writes exactly the N bytes asked for, whatever N up to 32
 * and wherever the bytes start: the bytes around them stay as they were.
 */
static void test_copy_short(void **state)
{
	unsigned char src[40], dst[48], want[48];
	(void)state;
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)(0x41 + i);
	for (size_t off = 0; off < 4; off++) {
		for (size_t n = 0; n <= 32; n++) {
			memset(dst, 0xEE, sizeof dst);
			memset(want, 0xEE, sizeof want);
			memcpy(want + 8, src + off, n);
			buf_copy_short(dst + 8, src + off, n);
			assert_memory_equal(dst, want, sizeof dst);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_consume),
		cmocka_unit_test(test_printf),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_compact),
		cmocka_unit_test(test_reserve_reuses_consumed_space),
		cmocka_unit_test(test_shrink),
		cmocka_unit_test(test_copy_short),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
