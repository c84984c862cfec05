/*
 * log_test.h - helpers shared by the unit tests of the log family
 * (test_log.c, test_log_sink.c, test_audit.c): reading the lines a sink
 * wrote, running the loop iteration that writes them, catching what goes
 * to stderr, and audit_verify with its report kept in memory.
 *
 * Helpers fail the running cmocka test rather than returning an error.
 */
#ifndef MCPC_LOG_TEST_H
#define MCPC_LOG_TEST_H

#include <stddef.h>

#include <jansson.h>

/* Number of newline-terminated lines in S (0 for NULL). */
size_t lgt_count_lines(const char *s);

/* Start of line I (0-based) of S, which must have that many lines. */
const char *lgt_line_ptr(const char *s, size_t i);

/* Line I of S parsed as JSON; a new reference for the caller. */
json_t *lgt_line_at(const char *s, size_t i);

/* Runs one loop iteration, whose prepare watchers write queued lines. */
void lgt_loop_once(void);

/* Sends fd 2 to the file PATH until lgt_capture_end. */
void lgt_capture_begin(const char *path);

/* Gives fd 2 back after lgt_capture_begin. */
void lgt_capture_end(void);

/* audit_verify on PATH, its report into REPORT (BUFLEN bytes); returns
 * what audit_verify returned. */
int lgt_verify(const char *path, char *report, size_t buflen);

#endif
