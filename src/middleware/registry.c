/*
 * registry.c - the middleware modules mcp-chain knows, by "use" name.
 * A new module is one file in src/middleware/ and one line here.
 */
#include "middleware.h"

const struct mw_def mw_registry[] = {
	{ NULL, NULL },
};
