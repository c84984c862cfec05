/*
 * log_test.c - helpers shared by the log family's unit tests (see
 * log_test.h): lines read back, the writing loop iteration, stderr caught
 * in a file, and audit_verify into memory.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <ev.h>

#include "log_test.h"
#include "mw_log.h"

/* Number of newline-terminated lines in S. */
size_t lgt_count_lines(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* Start of line I (0-based) of S. */
const char *lgt_line_ptr(const char *s, size_t i)
{
	while (i-- > 0) {
		s = strchr(s, '\n');
		assert_non_null(s);
		s++;
	}
	return s;
}

/* Line I of S parsed as JSON (new reference). */
json_t *lgt_line_at(const char *s, size_t i)
{
	const char *p = lgt_line_ptr(s, i);
	const char *e = strchr(p, '\n');
	json_error_t je;
	json_t *o = json_loadb(p, e ? (size_t)(e - p) : strlen(p), 0, &je);
	if (!o)
		fail_msg("line %zu is not JSON: %s", i, je.text);
	return o;
}

/* Runs one loop iteration, whose prepare watchers write queued lines. */
void lgt_loop_once(void)
{
	ev_run(EV_DEFAULT, EVRUN_NOWAIT);
}

static int saved_stderr = -1;

/* Sends fd 2 to the file PATH until lgt_capture_end. */
void lgt_capture_begin(const char *path)
{
	fflush(stderr);
	saved_stderr = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved_stderr >= 0);
	dup2(fd, 2);
	close(fd);
}

/* Gives fd 2 back. */
void lgt_capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
}

/* audit_verify on PATH; the report goes to REPORT (BUFLEN bytes). */
int lgt_verify(const char *path, char *report, size_t buflen)
{
	FILE *f = fmemopen(report, buflen, "w");
	assert_non_null(f);
	int rc = audit_verify(path, f);
	fclose(f);
	return rc;
}
