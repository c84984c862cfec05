/*
 * mw_log.h - the "log" (audit) middleware module: one JSON line per
 * finished exchange, written to stderr, a file or syslog, with secrets
 * redacted before anything is written, and optionally a SHA-256 hash
 * chain over the file's lines that audit_verify() checks.
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

/*
 * Redaction, as the module does it to its lines (the "redact" option):
 * also used by `mcp-chain record`, which redacts what it records the same
 * way.
 */

struct log_redact;

/*
 * Parses the "redact" option OPT (borrowed; NULL: none) into *OUT (NULL
 * when nothing is to be redacted). Reports problems at /redact/...
 * through B. Returns 0, or -1 after at least one mw_error.
 */
int log_redact_parse(json_t *opt, struct mw_build *b, struct log_redact **out);

/*
 * Redacts LINE in place: members named by "keys" inside its bodies
 * ("params", "result", "error"), and inside body strings that hold a
 * JSON document, become the replacement; every match of a
 * pattern in any string of the line (and in member names inside bodies)
 * is replaced. A string that cannot be checked is replaced whole.
 */
void log_redact_line(const struct log_redact *r, json_t *line);

/* Frees R (NULL is fine). */
void log_redact_free(struct log_redact *r);

#endif
