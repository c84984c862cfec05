/*
 * test_seal.c - unit tests for src/core/seal.c: the round trip (bytes and
 * text, empty plain text), and every way a box must refuse to open: another
 * key, other associated data, any byte altered (nonce, ciphertext, tag),
 * truncated, not base64url; two seals of the same text differ (a random
 * nonce); key files (raw, hex, too open, malformed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "seal.h"
#include "tmpdir_test.h"

static const unsigned char K1[SEAL_KEY_LEN] = "0123456789abcdef0123456789abcde";
static const unsigned char K2[SEAL_KEY_LEN] = "0123456789abcdef0123456789abcdX";
static const char AAD[] = "upstream\nissuer\nsubject";
static const char PLAIN[] = "{\"access_token\":\"secret\"}";

/* Seals PLAIN under K1 with AAD. */
static unsigned char *sealed(size_t *n)
{
	unsigned char *b = NULL;
	assert_int_equal(seal(K1, AAD, strlen(AAD), PLAIN, strlen(PLAIN), &b, n), 0);
	assert_int_equal(*n, strlen(PLAIN) + SEAL_OVERHEAD);
	return b;
}

static void test_round_trip(void **state)
{
	(void)state;
	size_t n, m;
	unsigned char *b = sealed(&n), *p = NULL;
	assert_null(memmem(b, n, "secret", 6));
	assert_int_equal(unseal(K1, AAD, strlen(AAD), b, n, &p, &m), 0);
	assert_int_equal(m, strlen(PLAIN));
	assert_string_equal((char *)p, PLAIN);
	free(p);
	/* a second seal of the same text: another nonce, other bytes */
	size_t n2;
	unsigned char *b2 = sealed(&n2);
	assert_memory_not_equal(b, b2, n);
	free(b2);
	free(b);
	/* empty plain text, no AAD */
	assert_int_equal(seal(K1, NULL, 0, "", 0, &b, &n), 0);
	assert_int_equal(n, SEAL_OVERHEAD);
	assert_int_equal(unseal(K1, NULL, 0, b, n, &p, &m), 0);
	assert_int_equal(m, 0);
	free(p);
	free(b);
}

static void test_wrong_key(void **state)
{
	(void)state;
	size_t n, m;
	unsigned char *b = sealed(&n), *p = (unsigned char *)"x";
	assert_int_equal(unseal(K2, AAD, strlen(AAD), b, n, &p, &m), -1);
	assert_null(p);
	free(b);
}

static void test_wrong_aad(void **state)
{
	(void)state;
	size_t n, m;
	unsigned char *b = sealed(&n), *p;
	assert_int_equal(unseal(K1, "upstream\nissuer\nsubjecT", strlen(AAD), b, n, &p, &m), -1);
	assert_int_equal(unseal(K1, AAD, strlen(AAD) - 1, b, n, &p, &m), -1);
	assert_int_equal(unseal(K1, NULL, 0, b, n, &p, &m), -1);
	assert_null(p);
	free(b);
}

static void test_altered_byte(void **state)
{
	(void)state;
	size_t n, m;
	unsigned char *b = sealed(&n), *p;
	for (size_t i = 0; i < n; i++) {   /* nonce, ciphertext and tag alike */
		b[i] ^= 0x01;
		assert_int_equal(unseal(K1, AAD, strlen(AAD), b, n, &p, &m), -1);
		b[i] ^= 0x01;
	}
	assert_int_equal(unseal(K1, AAD, strlen(AAD), b, n, &p, &m), 0);
	free(p);
	free(b);
}

static void test_truncated(void **state)
{
	(void)state;
	size_t n, m;
	unsigned char *b = sealed(&n), *p;
	for (size_t len = 0; len < n; len++)
		assert_int_equal(unseal(K1, AAD, strlen(AAD), b, len, &p, &m), -1);
	free(b);
}

static void test_text(void **state)
{
	(void)state;
	char *t = seal_text(K1, AAD, strlen(AAD), PLAIN, strlen(PLAIN));
	unsigned char *p;
	size_t m;
	assert_non_null(t);
	assert_int_equal(strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
			 strlen(t));
	assert_int_equal(unseal_text(K1, AAD, strlen(AAD), t, &p, &m), 0);
	assert_string_equal((char *)p, PLAIN);
	free(p);
	assert_int_equal(unseal_text(K2, AAD, strlen(AAD), t, &p, &m), -1);
	t[5] = t[5] == 'A' ? 'B' : 'A';
	assert_int_equal(unseal_text(K1, AAD, strlen(AAD), t, &p, &m), -1);
	t[strlen(t) - 3] = '\0';
	assert_int_equal(unseal_text(K1, AAD, strlen(AAD), t, &p, &m), -1);
	assert_int_equal(unseal_text(K1, AAD, strlen(AAD), "not base64url!", &p, &m), -1);
	assert_int_equal(unseal_text(K1, AAD, strlen(AAD), "", &p, &m), -1);
	free(t);
}

/* Writes TEXT (N bytes) as file NAME with MODE; its path into OUT. */
static void key_file(char *out, size_t size, const char *name, const char *text, size_t n,
		     mode_t mode)
{
	tmpd_path(out, size, name);
	FILE *f = fopen(out, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, n, f), n);
	fclose(f);
	assert_int_equal(chmod(out, mode), 0);
}

static void test_key_files(void **state)
{
	(void)state;
	char p[512], why[300];
	unsigned char k[SEAL_KEY_LEN];
	key_file(p, sizeof p, "raw", (const char *)K1, SEAL_KEY_LEN, 0600);
	assert_int_equal(seal_key_load(p, k, why, sizeof why), 0);
	assert_memory_equal(k, K1, SEAL_KEY_LEN);
	const char hex[] = "  000102030405060708090a0b0c0d0e0f101112131415161718191A1B1C1D1E1F\n";
	key_file(p, sizeof p, "hex", hex, strlen(hex), 0400);
	assert_int_equal(seal_key_load(p, k, why, sizeof why), 0);
	for (int i = 0; i < SEAL_KEY_LEN; i++)
		assert_int_equal(k[i], i);
	key_file(p, sizeof p, "open", (const char *)K1, SEAL_KEY_LEN, 0640);
	assert_int_equal(seal_key_load(p, k, why, sizeof why), -1);
	assert_non_null(strstr(why, "chmod 600"));
	key_file(p, sizeof p, "short", "abc", 3, 0600);
	assert_int_equal(seal_key_load(p, k, why, sizeof why), -1);
	assert_non_null(strstr(why, "head -c32 /dev/urandom"));
	key_file(p, sizeof p, "badhex", "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
		 64, 0600);
	assert_int_equal(seal_key_load(p, k, why, sizeof why), -1);
	tmpd_path(p, sizeof p, "missing");
	assert_int_equal(seal_key_load(p, k, why, sizeof why), -1);
}

/* A key list: one key a line, the first seals, comments and blank lines
 * skipped; a bad line named by its number; a raw 32-byte file is one key. */
static void test_key_lists(void **state)
{
	(void)state;
	char p[512], why[300];
	unsigned char k[3][SEAL_KEY_LEN];
	size_t n = 9;
	const char list[] = "# new key first, the old one while ids sealed with it live\n"
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n\n"
		"  ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff \n";
	key_file(p, sizeof p, "list", list, strlen(list), 0600);
	assert_int_equal(seal_keys_load(p, k, 3, &n, why, sizeof why), 0);
	assert_int_equal(n, 2);
	for (int i = 0; i < SEAL_KEY_LEN; i++) {
		assert_int_equal(k[0][i], i);
		assert_int_equal(k[1][i], 0xff);
	}
	assert_int_equal(seal_keys_load(p, k, 1, &n, why, sizeof why), -1);
	assert_non_null(strstr(why, "more than 1 keys"));
	assert_int_equal(n, 0);
	const char badline[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\nnope\n";
	key_file(p, sizeof p, "badline", badline, strlen(badline), 0600);
	assert_int_equal(seal_keys_load(p, k, 3, &n, why, sizeof why), -1);
	assert_non_null(strstr(why, ":2: not a key"));
	key_file(p, sizeof p, "empty", "# nothing\n", 10, 0600);
	assert_int_equal(seal_keys_load(p, k, 3, &n, why, sizeof why), -1);
	assert_non_null(strstr(why, "no key"));
	key_file(p, sizeof p, "rawlist", (const char *)K1, SEAL_KEY_LEN, 0600);
	assert_int_equal(seal_keys_load(p, k, 3, &n, why, sizeof why), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(k[0], K1, SEAL_KEY_LEN);
	key_file(p, sizeof p, "openlist", list, strlen(list), 0644);
	assert_int_equal(seal_keys_load(p, k, 3, &n, why, sizeof why), -1);
	assert_non_null(strstr(why, "chmod 600"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_wrong_aad),
		cmocka_unit_test(test_altered_byte),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_key_lists),
		cmocka_unit_test(test_key_files),
	};
	return cmocka_run_group_tests(tests, tmpd_setup, tmpd_teardown);
}
