/*
 * transports.c - the transports mcp-chain knows, by configuration type.
 * A new backend type is one file in src/external/ and one line here.
 */
#include "backend.h"

const struct be_transport_def be_transports[] = {
	{ CFG_STDIO, &be_stdio_ops },
	{ CFG_HTTP, &be_http_ops },
	{ CFG_SSE, &be_http_ops },
	{ CFG_FLOW, &be_flow_ops },
	{ CFG_STDIO, NULL },
};
