/*
 * registry.c - the middleware modules mcp-chain knows, by "use" name.
 * A new module is one file in src/middleware/ and one line here.
 */
#include "middleware.h"
#include "mw_log.h"
#include "mw_policy.h"
#include "mw_rewrite.h"
#include "mw_auth.h"
#include "mw_limit.h"
#include "mw_filter.h"

const struct mw_def mw_registry[] = {
	{ "policy", mw_policy_create },
	{ "rewrite", mw_rewrite_create },
	{ "log", mw_log_create },
	{ "auth", mw_auth_create },
	{ "limit", mw_limit_create },
	{ "filter", mw_filter_create },
	{ NULL, NULL },
};
