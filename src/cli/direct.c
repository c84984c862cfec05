/*
 * direct.c - `mcp-chain --direct`: placeholder until direct mode lands.
 */
#include "cli_int.h"

int cli_direct(const struct cli_opts *o)
{
	(void)o;
	cli_error("--direct is not built yet");
	return CLI_EXIT_RPC_ERROR;
}
