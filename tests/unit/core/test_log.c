/*
 * test_log.c - unit tests for src/core/log.c (leveled logging: the
 * threshold, the line format, whole lines, the cut of a long one).
 *
 * Every test logs to a file of its own (log_open_file) and reads it back.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "tmpdir_test.h"

static char path[128];
static int serial;

/* A new, empty log file; logging goes there. */
static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof path, "%s/log-%d.txt", tmpd_dir, serial++);
	log_set_level(LOG_INFO);
	return log_open_file(path);
}

/* The file's whole content (owned by the caller), NUL-terminated; *N its length. */
static char *slurp(size_t *n)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char *buf = malloc(16384);
	assert_non_null(buf);
	*n = fread(buf, 1, 16383, f);
	buf[*n] = '\0';
	fclose(f);
	return buf;
}

/* Number of lines (each ends with \n) in S. */
static size_t lines(const char *s)
{
	size_t k = 0;
	for (; *s; s++)
		k += *s == '\n';
	return k;
}

/* True when LINE starts "YYYY-MM-DDTHH:MM:SS.mmmZ mcp-chain LEVEL: ". */
static bool has_prefix(const char *line, const char *level)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	for (size_t i = 0; shape[i]; i++) {
		if (shape[i] == 'd' ? line[i] < '0' || line[i] > '9' : line[i] != shape[i])
			return false;
	}
	char want[64];
	snprintf(want, sizeof want, " mcp-chain %s: ", level);
	return strncmp(line + sizeof shape - 1, want, strlen(want)) == 0;
}

static void test_parse_level(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		enum log_level level;
	} ok[] = {
		{ "error", LOG_ERROR }, { "warn", LOG_WARN }, { "warning", LOG_WARN },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		enum log_level l = (enum log_level)-1;
		assert_int_equal(log_parse_level(ok[i].name, &l), 0);
		assert_int_equal(l, ok[i].level);
	}
	static const char *const bad[] = { "", "Info", "DEBUG", "trace", "verbose", "info " };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		enum log_level l = LOG_DEBUG;
		assert_int_equal(log_parse_level(bad[i], &l), -1);
		assert_int_equal(l, LOG_DEBUG);   /* untouched */
	}
}

/* The threshold decides what is written, and log_enabled agrees with it. */
static void test_threshold(void **state)
{
	(void)state;
	log_set_level(LOG_WARN);
	assert_int_equal(log_get_level(), LOG_WARN);
	assert_true(log_enabled(LOG_ERROR));
	assert_true(log_enabled(LOG_WARN));
	assert_false(log_enabled(LOG_INFO));
	assert_false(log_enabled(LOG_DEBUG));
	log_error("e %d", 1);
	log_warn("w %s", "two");
	log_info("i");
	log_debug("d");
	log_bare(LOG_INFO, "bare info");
	log_bare(LOG_ERROR, "bare error");
	size_t n;
	char *s = slurp(&n);
	assert_int_equal(lines(s), 3);
	char *second = strchr(s, '\n') + 1;
	assert_true(has_prefix(s, "error"));
	assert_non_null(strstr(s, "error: e 1\n"));
	assert_true(has_prefix(second, "warn"));
	assert_non_null(strstr(second, "warn: w two\n"));
	assert_string_equal(strchr(second, '\n') + 1, "bare error\n");
	free(s);

	log_set_level(LOG_DEBUG);
	log_debug("now %s", "seen");
	s = slurp(&n);
	assert_int_equal(lines(s), 4);
	assert_non_null(strstr(s, " mcp-chain debug: now seen\n"));
	free(s);
}

/* log_fail logs at error level and returns -1; errno survives logging. */
static void test_fail_and_errno(void **state)
{
	(void)state;
	errno = ENOENT;
	assert_int_equal(log_fail("could not open %s", "x.json"), -1);
	assert_int_equal(errno, ENOENT);
	errno = EPIPE;
	log_info("info");
	log_bare(LOG_INFO, "bare");
	assert_int_equal(errno, EPIPE);
	size_t n;
	char *s = slurp(&n);
	assert_true(has_prefix(s, "error"));
	assert_non_null(strstr(s, "error: could not open x.json\n"));
	assert_int_equal(lines(s), 3);
	free(s);
}

/* A message longer than a line is cut, marked "...", and still one line. */
static void test_long_line_is_cut(void **state)
{
	(void)state;
	size_t len = 10000;
	char *big = malloc(len + 1);
	assert_non_null(big);
	memset(big, 'x', len);
	big[len] = '\0';
	log_info("%s", big);
	log_bare(LOG_INFO, "%s", big);
	log_info("after");
	size_t n;
	char *s = slurp(&n);
	assert_int_equal(lines(s), 3);
	char *first_end = strchr(s, '\n');
	assert_int_equal((size_t)(first_end - s) + 1, 4096 - 1);
	assert_memory_equal(first_end - 3, "...", 3);
	char *second = first_end + 1, *second_end = strchr(second, '\n');
	assert_int_equal((size_t)(second_end - second) + 1, 4096 - 1);
	assert_memory_equal(second, "xxxx", 4);
	assert_memory_equal(second_end - 3, "...", 3);
	assert_true(has_prefix(second_end + 1, "info"));
	free(s);
	free(big);
}

/* A line that just fits is not cut; an embedded newline is the caller's. */
static void test_fits_exactly(void **state)
{
	(void)state;
	char msg[4096];
	size_t room = 4096 - 2;   /* the line, its "\n", one byte kept */
	memset(msg, 'y', room);
	msg[room] = '\0';
	log_bare(LOG_ERROR, "%s", msg);
	size_t n;
	char *s = slurp(&n);
	assert_int_equal(n, room + 1);
	assert_int_equal(s[room], '\n');
	assert_null(strstr(s, "..."));
	free(s);
}

/* The file is created 0600 and appended to, never truncated. */
static void test_file_mode_and_append(void **state)
{
	(void)state;
	log_info("one");
	assert_int_equal(log_open_file(path), 0);   /* again: the same file, appended */
	log_info("two");
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	size_t n;
	char *s = slurp(&n);
	assert_int_equal(lines(s), 2);
	assert_non_null(strstr(s, "info: one\n"));
	assert_non_null(strstr(s, "info: two\n"));
	free(s);
	char bad[160];
	snprintf(bad, sizeof bad, "%s/no/such/dir/log.txt", tmpd_dir);
	assert_int_equal(log_open_file(bad), -1);
	log_info("three");   /* still to the file that opened */
	s = slurp(&n);
	assert_int_equal(lines(s), 3);
	free(s);
}

int main(void)
{
	if (tmpd_setup(NULL) < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_parse_level, setup),
		cmocka_unit_test_setup(test_threshold, setup),
		cmocka_unit_test_setup(test_fail_and_errno, setup),
		cmocka_unit_test_setup(test_long_line_is_cut, setup),
		cmocka_unit_test_setup(test_fits_exactly, setup),
		cmocka_unit_test_setup(test_file_mode_and_append, setup),
	};
	return cmocka_run_group_tests(tests, NULL, tmpd_teardown);
}
