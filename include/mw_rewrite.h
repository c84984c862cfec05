/*
 * mw_rewrite.h - the "rewrite" middleware module: renames, hides and
 * re-describes tools, fixes or defaults their arguments, redacts their
 * results with PCRE2 patterns and caps their size.
 * Options and behaviour: docs/middleware/rewrite.md.
 */
#ifndef MCPC_MW_REWRITE_H
#define MCPC_MW_REWRITE_H

#include "middleware.h"

/*
 * Creates the module from its entry OPTS (borrowed). Returns NULL after
 * at least one mw_error when the options are wrong.
 */
struct mw_module *mw_rewrite_create(json_t *opts, struct mw_build *b);

#endif
