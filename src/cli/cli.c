/*
 * cli.c - entry of the shell commands: parses the command line, sets up
 * logging and the loop, and runs the command.
 */
#include "cli_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char usage[] =
	"usage: mcp-chain list   [-c FILE] [--json]\n"
	"       mcp-chain call   [-c FILE] [--json] [--timeout S] NAME [ARGS]\n"
	"       mcp-chain read   [-c FILE] [--json] [--timeout S] URI\n"
	"       mcp-chain prompt [-c FILE] [--json] [--timeout S] NAME [ARGS]\n"
	"       mcp-chain --direct [-c FILE]\n"
	"       mcp-chain replay FILE\n"
	"ARGS: one JSON object, or key=value pairs (values parsed as JSON when\n"
	"they parse, else strings). -v shows the chain's log. See docs/cli.md.\n";

int cli_main(int argc, char **argv)
{
	struct cli_opts o;
	char err[300];
	if (cli_parse_opts(argc, argv, &o, err, sizeof err) < 0) {
		cli_error("%s", err);
		fputs(usage, stderr);
		free(o.pos);
		return CLI_EXIT_RPC_ERROR;
	}
	if (o.help) {
		fputs(usage, stdout);
		free(o.pos);
		return CLI_EXIT_OK;
	}
	/* Our log is the chain's stderr passing through (-v) and our own
	 * warnings; without -v the chain's lines are kept for failures. */
	log_set_level(o.verbose ? LOG_INFO : LOG_WARN);
	signal(SIGPIPE, SIG_IGN);
	writer_setup();
	int rc;
	if (strcmp(o.cmd, "list") == 0)
		rc = o.npos ? (cli_error("list takes no arguments"), CLI_EXIT_RPC_ERROR) : cli_list(&o);
	else if (strcmp(o.cmd, "direct") == 0)
		rc = cli_direct(&o);
	else if (strcmp(o.cmd, "replay") == 0)
		rc = cli_replay(&o);
	else
		rc = cli_call(&o);
	free(o.pos);
	return rc;
}
