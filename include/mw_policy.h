/*
 * mw_policy.h - the "policy" middleware module: allow, deny or ask about
 * tools, prompts and resources by name, optionally per client.
 * Options and behaviour: docs/middleware/policy.md.
 */
#ifndef MCPC_MW_POLICY_H
#define MCPC_MW_POLICY_H

#include "middleware.h"

/*
 * Creates the module from its entry OPTS (borrowed). Returns NULL after
 * at least one mw_error when the options are wrong.
 */
struct mw_module *mw_policy_create(json_t *opts, struct mw_build *b);

#endif
