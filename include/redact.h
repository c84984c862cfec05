/*
 * redact.h - redaction rules: member names ("keys") and PCRE2 patterns
 * whose matches are replaced in a JSON line before anyone writes it. The
 * "log" middleware module redacts its lines with them (its "redact"
 * option) and `mcp-chain --record` redacts what it records with the same
 * rules, so both live here, in the core, and the two share one option
 * format (docs/middleware/log.md).
 */
#ifndef MCPC_REDACT_H
#define MCPC_REDACT_H

#include <jansson.h>

#include "middleware.h"

/* Compiled rules: keys, patterns and the replacement. Opaque. */
struct redact;

/*
 * Compiles the "redact" option OPT (borrowed; NULL: none),
 * {"keys": [...], "patterns": [...], "replacement": "..."}, into *OUT (a
 * new rule set the caller frees with redact_free; NULL when nothing is to
 * be redacted). Reports every problem at /redact/... under B's path.
 * Returns 0, or -1 after at least one mw_error.
 */
int redact_parse(json_t *opt, struct mw_build *b, struct redact **out);

/*
 * Redacts LINE (borrowed, changed in place): members named by "keys"
 * inside its bodies ("params", "result", "error"), and inside body
 * strings that hold a JSON document, become the replacement; every match
 * of a pattern in any string of the line (and in member names inside
 * bodies) is replaced. A string that cannot be checked is replaced whole.
 */
void redact_line(const struct redact *r, json_t *line);

/* Frees R (NULL is fine). */
void redact_free(struct redact *r);

#endif
