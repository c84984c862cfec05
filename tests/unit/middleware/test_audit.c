/*
 * test_audit.c - unit tests for src/middleware/audit.c: sealing a line
 * (against a SHA-256 worked out elsewhere), checking one sealed line and
 * every way it can be broken, reading the hash at the end of a file
 * (audit_tail), and audit_verify on intact, damaged, missing and empty
 * files. Chained files are written here with audit_seal alone.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log_test.h"
#include "mw_log.h"
#include "tmpdir_test.h"
#include "src/middleware/log_int.h"

/* ---- helpers ---- */

/*
 * Appends to OUT (room: 8192 bytes) the sealed line for BODY (members,
 * no braces) following PREV; PREV becomes its hash.
 */
static void seal_line(char *out, const char *body, char prev[AUDIT_HEX])
{
	char text[4096], hash[AUDIT_HEX], seal[AUDIT_SEAL_LEN + 1];
	int n = snprintf(text, sizeof text, "{%s,\"prev\":\"%s\"}", body, prev);
	assert_true(n > 0 && (size_t)n < sizeof text);
	audit_seal(text, (size_t)n, hash, seal);
	assert_int_equal(strlen(seal), AUDIT_SEAL_LEN);
	size_t len = strlen(out);
	memcpy(out + len, text, (size_t)n - 1);   /* the seal replaces the brace */
	strcpy(out + len + (size_t)n - 1, seal);
	memcpy(prev, hash, AUDIT_HEX);
}

/* Writes N chained lines to PATH, from FIRST_PREV (NULL: a new chain);
 * the last line's hash goes to LAST when not NULL. */
static void write_chain(const char *path, int n, const char *first_prev, char *last)
{
	char prev[AUDIT_HEX], *out = calloc(1, 8192 * (size_t)(n + 1));
	assert_non_null(out);
	memcpy(prev, first_prev ? first_prev : AUDIT_GENESIS, AUDIT_HEX);
	for (int i = 0; i < n; i++) {
		char body[128];
		snprintf(body, sizeof body, "\"n\":%d,\"name\":\"echo\",\"outcome\":\"ok\"", i);
		seal_line(out, body, prev);
	}
	tmpd_spit(path, out);
	free(out);
	if (last)
		memcpy(last, prev, AUDIT_HEX);
}

/* audit_tail on the file PATH. */
static int tail(const char *path, char hash[AUDIT_HEX], char *why, size_t whylen)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	int rc = audit_tail(fd, hash, why, whylen);
	close(fd);
	return rc;
}

/* ---- one line ---- */

/* The seal is the SHA-256 of the line without its closing brace. */
static void test_seal(void **state)
{
	(void)state;
	char text[128], hash[AUDIT_HEX], seal[AUDIT_SEAL_LEN + 1];
	int n = snprintf(text, sizeof text, "{\"n\":1,\"prev\":\"%s\"}", AUDIT_GENESIS);
	audit_seal(text, (size_t)n, hash, seal);
	/* python3 -c 'import hashlib; print(hashlib.sha256(b"{\"n\":1,\"prev\":\"" + b"0" * 64 + b"\"").hexdigest())' */
	assert_string_equal(hash, "f7274d863b6be6b688fdd27cf5a0fb5d8c4ecbf0ce2d537878136edf7e56d06b");
	assert_string_equal(seal, ",\"hash\":\"f7274d863b6be6b688fdd27cf5a0fb5d8c4ecbf0ce2d537878136edf7e56d06b\"}\n");
}

/* A sealed line checks; each kind of damage is named. */
static void test_check(void **state)
{
	(void)state;
	char line[8192] = "", hash[AUDIT_HEX], prev[AUDIT_HEX], p[AUDIT_HEX];
	memcpy(p, AUDIT_GENESIS, AUDIT_HEX);
	seal_line(line, "\"a\":\"b\"", p);
	size_t len = strlen(line) - 1;   /* without the newline */
	assert_null(audit_check(line, len, hash, prev));
	assert_string_equal(hash, p);
	assert_string_equal(prev, AUDIT_GENESIS);

	/* a changed byte */
	line[2] = 'A';   /* {"a": becomes {"A": */
	assert_non_null(strstr(audit_check(line, len, hash, prev), "the line was changed"));
	line[2] = 'a';
	/* an upper-case hex digit in the hash */
	char *h = strstr(line, "\"hash\":\"") + 8;
	char was = h[0];
	h[0] = 'F';
	assert_non_null(strstr(audit_check(line, len, hash, prev), "not 64 hex digits"));
	h[0] = was;
	/* too short, or not ending with "hash" */
	assert_non_null(strstr(audit_check("{}", 2, hash, prev), "not a chained audit record"));
	assert_non_null(strstr(audit_check(line, len - 1, hash, prev), "not a chained audit record"));
	assert_null(audit_check(line, len, hash, prev));

	/* sealed correctly but with a bad "prev", or none */
	char bad[8192] = "";
	char short_prev[AUDIT_HEX] = "abc";
	seal_line(bad, "\"a\":1", short_prev);
	assert_string_equal(audit_check(bad, strlen(bad) - 1, hash, prev), "no valid \"prev\" member");
	/* a duplicated member: not read as an object */
	bad[0] = '\0';
	memcpy(p, AUDIT_GENESIS, AUDIT_HEX);
	char body[128];
	snprintf(body, sizeof body, "\"prev\":\"%s\"", AUDIT_GENESIS);
	seal_line(bad, body, p);
	assert_string_equal(audit_check(bad, strlen(bad) - 1, hash, prev), "not a JSON object");
}

/* ---- the end of a file ---- */

/* audit_tail: empty, one line, many, a last line past the read block,
 * no final newline, a broken last line. */
static void test_tail(void **state)
{
	(void)state;
	char p[128], hash[AUDIT_HEX], want[AUDIT_HEX], why[256];
	tmpd_path(p, sizeof p, "tail.jsonl");
	tmpd_spit(p, "");
	memcpy(hash, "untouched", 10);
	assert_int_equal(tail(p, hash, why, sizeof why), 1);
	assert_string_equal(hash, "untouched");

	write_chain(p, 1, NULL, want);
	assert_int_equal(tail(p, hash, why, sizeof why), 0);
	assert_string_equal(hash, want);
	write_chain(p, 50, NULL, want);
	assert_int_equal(tail(p, hash, why, sizeof why), 0);
	assert_string_equal(hash, want);

	/* a last line of 6000 bytes: found across two 4096-byte reads */
	char *big = malloc(6200), *out = calloc(1, 16384), prev[AUDIT_HEX];
	assert_true(big && out);
	memcpy(prev, AUDIT_GENESIS, AUDIT_HEX);
	seal_line(out, "\"x\":1", prev);
	strcpy(big, "\"x\":\"");
	memset(big + 5, 'z', 6000);
	strcpy(big + 6005, "\"");
	/* too long for seal_line's buffer: sealed by hand */
	char *t = malloc(6400), seal[AUDIT_SEAL_LEN + 1];
	int n = snprintf(t, 6400, "{%s,\"prev\":\"%s\"}", big, prev);
	audit_seal(t, (size_t)n, want, seal);
	size_t len = strlen(out);
	memcpy(out + len, t, (size_t)n - 1);
	strcpy(out + len + (size_t)n - 1, seal);
	tmpd_spit(p, out);
	assert_int_equal(tail(p, hash, why, sizeof why), 0);
	assert_string_equal(hash, want);

	/* cut short: no newline at the end */
	out[strlen(out) - 1] = '\0';
	tmpd_spit(p, out);
	assert_int_equal(tail(p, hash, why, sizeof why), -1);
	assert_non_null(strstr(why, "incomplete"));
	free(big);
	free(out);
	free(t);

	/* a last line that is not a record */
	tmpd_spit(p, "{\"time\":\"not chained\"}\n");
	assert_int_equal(tail(p, hash, why, sizeof why), -1);
	assert_non_null(strstr(why, "its last line is broken: not a chained audit record"));
}

/* ---- verification ---- */

/* Copies the file SRC to DST with line I replaced by the text WITH
 * (NULL: removed) or swapped with line I + 1 (SWAP). */
static void doctor(const char *src, const char *dst, size_t i, const char *with, bool swap)
{
	char *s = tmpd_slurp(src);
	assert_non_null(s);
	FILE *f = fopen(dst, "wb");
	size_t n = lgt_count_lines(s);
	for (size_t k = 0; k < n; k++) {
		size_t src_k = swap && k == i ? i + 1 : swap && k == i + 1 ? i : k;
		const char *p = lgt_line_ptr(s, src_k);
		size_t len = (size_t)(strchr(p, '\n') - p);
		if (!swap && k == i) {
			if (with)
				fprintf(f, "%s\n", with);
			continue;
		}
		fwrite(p, 1, len + 1, f);
	}
	fclose(f);
	free(s);
}

/* An intact file: the summary names the count and the last hash. */
static void test_verify_intact(void **state)
{
	(void)state;
	char p[128], rep[1024], want[1024], last[AUDIT_HEX];
	tmpd_path(p, sizeof p, "intact.jsonl");
	write_chain(p, 3, NULL, last);
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);
	snprintf(want, sizeof want, "%s: 3 lines, hash chain intact; last hash %s\n", p, last);
	assert_string_equal(rep, want);

	/* one line; a file that continues another's chain says so */
	char first[AUDIT_HEX];
	memset(first, 'a', 64);
	first[64] = '\0';
	write_chain(p, 1, first, last);
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);
	snprintf(want, sizeof want, "%s: 1 line, hash chain intact; last hash %s\n"
		 "%s: line 1 continues a chain from an earlier file (its \"prev\" is %s)\n",
		 p, last, p, first);
	assert_string_equal(rep, want);
}

/* audit_verify: edited, removed, reordered, truncated, garbage. */
static void test_verify_detects_damage(void **state)
{
	(void)state;
	char p[128], q[128], rep[1024];
	tmpd_path(p, sizeof p, "chain-verify.jsonl");
	tmpd_path(q, sizeof q, "chain-damaged.jsonl");
	write_chain(p, 4, NULL, NULL);
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);

	/* edited: one character of line 2 changed */
	char *s = tmpd_slurp(p);
	assert_non_null(s);
	char *l2 = (char *)lgt_line_ptr(s, 1);
	char *at = strstr(l2, "\"echo\"");
	at[1] = 'E';
	tmpd_spit(q, s);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, "chain-damaged.jsonl:2: "));
	assert_non_null(strstr(rep, "changed"));

	/* the last line edited is caught too */
	free(s);
	s = tmpd_slurp(p);
	assert_non_null(s);
	at = strstr((char *)lgt_line_ptr(s, 3), "\"ok\"");
	memcpy(at, "\"no\"", 4);
	tmpd_spit(q, s);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":4: "));
	free(s);

	/* removed: line 2 gone, line 3 (now 2) no longer follows line 1 */
	doctor(p, q, 1, NULL, false);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":2: \"prev\" is not the hash of line 1"));

	/* reordered: lines 2 and 3 swapped */
	doctor(p, q, 1, NULL, true);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":2: "));

	/* truncated in the middle of the last line */
	s = tmpd_slurp(p);
	assert_non_null(s);
	s[strlen(s) - 20] = '\0';
	tmpd_spit(q, s);
	free(s);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":4: incomplete"));

	/* a line that is not a chained record */
	doctor(p, q, 2, "{\"time\":\"x\"}", false);
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 1);
	assert_non_null(strstr(rep, ":3: not a chained audit record"));
}

/* audit_verify on a missing file, an empty one and a directory. */
static void test_verify_unreadable_and_empty(void **state)
{
	(void)state;
	char p[128], rep[512];
	tmpd_path(p, sizeof p, "does-not-exist.jsonl");
	assert_int_equal(lgt_verify(p, rep, sizeof rep), -1);
	assert_non_null(strstr(rep, "cannot read"));
	tmpd_path(p, sizeof p, "empty.jsonl");
	tmpd_spit(p, "");
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "empty"));
	assert_int_equal(lgt_verify(tmpd_dir, rep, sizeof rep), -1);   /* EISDIR on read */
	assert_non_null(strstr(rep, "read error after line 0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seal),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_verify_intact),
		cmocka_unit_test(test_verify_detects_damage),
		cmocka_unit_test(test_verify_unreadable_and_empty),
	};
	return cmocka_run_group_tests(tests, tmpd_setup, tmpd_teardown);
}
