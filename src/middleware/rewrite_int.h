/*
 * rewrite_int.h - the parts of the "rewrite" module shared between its
 * files: tools and hooks (rewrite.c), result patterns and the size cap
 * (rewrite_result.c). Not a public interface: see include/mw_rewrite.h.
 */
#ifndef MCPC_REWRITE_INT_H
#define MCPC_REWRITE_INT_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>

#include "middleware.h"

struct result_rule;

/* What the module does to tools/call results. */
struct rw_results {
	struct result_rule *rules;
	size_t nrules;
	pcre2_match_context *mctx;  /* NULL without rules */
	size_t max_result;          /* bytes; 0: no cap */
};

/* ---- results (rewrite_result.c) ---- */

/* Parses "results" and "maxResultBytes" of OPTS (borrowed) into RS. */
void rw_results_parse(struct mw_build *b, json_t *opts, struct rw_results *rs);

/* True when RS has anything to do. */
bool rw_results_active(const struct rw_results *rs);

/* Compiles RS's patterns to machine code (optional speed-up). */
void rw_results_start(struct rw_results *rs);

/*
 * Rewrites the tools/call response MSG (borrowed, changed in place) of the
 * backend's tool TOOL (may be NULL); WIRE is its size as received, 0 if
 * unknown.
 */
void rw_results_apply(const struct rw_results *rs, const char *tool, json_t *msg,
		      size_t wire);

/* Frees what RS holds. */
void rw_results_release(struct rw_results *rs);

/* ---- option helpers (rewrite.c) ---- */

/* Writes KEY + "/" + NAME, NAME escaped as a JSON pointer token, to OUT. */
void rw_key_join(char *out, size_t n, const char *key, const char *name);

/* Copies the string option NAME of OBJ at KEY into *OUT; EMPTY_OK allows "". */
void rw_parse_str(struct mw_build *b, const char *key, json_t *obj,
		  const char *name, bool empty_ok, char **out);

#endif
