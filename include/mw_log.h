/*
 * mw_log.h - the "log" (audit) middleware module: one JSON line per
 * finished exchange, written to stderr, a file or syslog, with secrets
 * redacted before anything is written (the core's redact.h), and
 * optionally a SHA-256 hash chain over the file's lines that
 * audit_verify() checks.
 *
 * Options and the line format: docs/middleware/log.md.
 */
#ifndef MCPC_MW_LOG_H
#define MCPC_MW_LOG_H

#include <jansson.h>
#include <stdio.h>

#include "middleware.h"

/*
 * Creates a log module from its entry OPTS (borrowed). Validates every
 * option and reports each problem through mw_error; opens nothing (the
 * file is opened by the module's start hook). Returns NULL on errors.
 */
struct mw_module *mw_log_create(json_t *opts, struct mw_build *b);

/*
 * Reopens every open audit file at its configured path, for SIGHUP after
 * logrotate moved it away; a chained file continues its hash chain into
 * the new file. Returns 0, or -1 if a file could not be reopened (that
 * module keeps writing to the old one; the reason is logged).
 */
int mw_log_reopen_all(void);

/*
 * Checks the hash chain of the audit file at PATH. Writes to REPORT
 * (borrowed) either "PATH:LINE: why" for the first broken line, or a
 * one-line summary ending with the last line's hash. Returns 0 when the
 * chain is intact, 1 when a line is broken, -1 when PATH cannot be read.
 */
int audit_verify(const char *path, FILE *report);

#endif
