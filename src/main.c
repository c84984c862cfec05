/*
 * main.c - mcp-chain's command line: the proxy (src/app/), the shell
 * commands (src/cli/), "check", "schema" and "audit verify".
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>

#include "app.h"
#include "backend.h"
#include "cli.h"
#include "config.h"
#include "curl_ev.h"
#include "embedded.h"
#include "log.h"
#include "middleware.h"
#include "mw_log.h"
#include "mcpc_version.h"
#include "proc.h"
#include "writer.h"

static const char usage[] =
	"usage: mcp-chain --config FILE [--listen ADDR:PORT] [--flow ADDR:PORT] [--log-level LEVEL]\n"
	"                 [--log-file FILE]\n"
	"       mcp-chain check FILE\n"
	"       mcp-chain schema\n"
	"       mcp-chain audit verify FILE\n"
	"       mcp-chain list|call|read|prompt [-c FILE] ...   (docs/cli.md)\n"
	"       mcp-chain --direct [-c FILE]\n"
	"       mcp-chain auth login|status|logout [NAME] [-c FILE]   (OAuth upstreams)\n"
	"       mcp-chain replay FILE | --config FILE --record OUT\n"
	"       mcp-chain --version | --help\n"
	"\n"
	"Runs an MCP server on stdio that forwards to the backend(s) in FILE\n"
	"(Claude's \"mcpServers\" format), through the configured middleware.\n"
	"\n"
	"  -c, --config FILE      configuration file (or $MCP_CHAIN_CONFIG)\n"
	"      --listen ADDR:PORT serve Streamable HTTP on ADDR:PORT (\"[::1]:PORT\",\n"
	"                         PORT, or \"-\" for the \"listen\" section) instead of\n"
	"                         stdio; port 0 takes a free port (logged)\n"
	"      --flow ADDR:PORT   serve MCP-Flow (MCP over WebTransport, UDP) on ADDR:PORT\n"
	"                         (\"-\" for the \"flow\" section, which holds the\n"
	"                         certificate); with --listen, both (docs/mcp-flow.md)\n"
	"  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	"                         (or $MCP_CHAIN_LOG; overrides \"logLevel\")\n"
	"      --log-file FILE    append logs to FILE instead of stderr\n"
	"  -V, --version          print the version\n"
	"  -h, --help             print this help\n"
	"\n"
	"check FILE validates a configuration and exits 0 (valid) or 1.\n"
	"schema prints the configuration's JSON Schema (draft 2020-12; a file's\n"
	"\"$schema\" may name it, for editors).\n"
	"audit verify FILE checks a \"chain\": true audit log; exits 0 (intact),\n"
	"1 (names the first broken line) or 2 (unreadable).\n"
	"\n"
	"From the shell (each starts the chain on FILE as its MCP client):\n"
	"  list [--json]                    backends, tools, prompts, resources (follows\n"
	"                                   list_changed: 250 ms quiet, at most 2 s)\n"
	"  call NAME [ARGS] [--json]        call a tool; ARGS: {...} or key=value...\n"
	"  read URI                         read a resource\n"
	"  prompt NAME [ARGS]               get a prompt\n"
	"  --direct                         JSON-RPC on stdio: methods are tool names\n"
	"  --record OUT                     also write every message to OUT (redacted)\n"
	"  replay OUT                       serve a recording as an MCP server\n"
	"  (--timeout SECONDS, -v shows the chain's log; exit codes in docs/cli.md)\n";

/* Prints every configuration error. */
static void print_errors(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->count; i++)
		fprintf(stderr, "%s\n", errs->lines[i]);
}

/* With several backends: names each one's tools will carry, and clashes. */
static void report_prefixes(const struct cfg *c)
{
	const struct cfg_server *on[64];
	size_t n = 0;
	for (size_t i = 0; i < c->nservers && n < 64; i++)
		if (c->servers[i].enabled)
			on[n++] = &c->servers[i];
	if (n < 2)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *pi = on[i]->prefix ? on[i]->prefix : on[i]->name;
		fprintf(stderr, "%s: server \"%s\": tools and prompts exposed as %s%sNAME\n",
			c->path, on[i]->name, pi, c->separator);
		for (size_t j = i + 1; j < n; j++) {
			const char *pj = on[j]->prefix ? on[j]->prefix : on[j]->name;
			if (strcmp(pi, pj) == 0)
				fprintf(stderr, "%s: warning: servers \"%s\" and \"%s\" share the prefix \"%s\": "
					"a name both have is exposed once plain (for \"%s\") and once with "
					"a hash suffix; set \"prefix\" to keep names readable\n",
					c->path, on[i]->name, on[j]->name, pi, on[i]->name);
		}
	}
}

/* "mcp-chain check FILE". */
static int cmd_check(const char *path)
{
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load(path, &errs);
	print_errors(&errs);
	cfg_errors_release(&errs);
	if (!c)
		return 1;
	for (size_t i = 0; i < c->nservers; i++) {
		struct cfg_server *s = &c->servers[i];
		fprintf(stderr, "%s: server \"%s\"%s: %s", path, s->name,
			s->enabled ? "" : " (disabled)", s->command ? s->command : s->url);
		for (size_t j = 1; s->command && s->argv && s->argv[j]; j++)
			fprintf(stderr, " %s", s->argv[j]);
		fprintf(stderr, " (with --listen: %s)\n", s->scope == CFG_SCOPE_SESSION ?
			"one for each session" : "one for every session");
	}
	report_prefixes(c);
	fprintf(stderr, "%s: ok\n", path);
	cfg_free(c);
	return 0;
}

/* "mcp-chain schema": the configuration's JSON Schema, built in. */
static int cmd_schema(void)
{
	if (fwrite(config_schema_json, 1, config_schema_json_len, stdout) != config_schema_json_len ||
	    fflush(stdout) != 0) {
		perror("mcp-chain: schema");
		return 1;
	}
	return 0;
}

/* Applies the log level: flag, then environment, then config. */
static int set_log_level(const char *flag, const struct cfg *c)
{
	const char *env = getenv("MCP_CHAIN_LOG");
	const char *s = flag ? flag : env;
	enum log_level l;
	if (s && log_parse_level(s, &l) < 0) {
		fprintf(stderr, "mcp-chain: unknown log level \"%s\" (error, warn, info, debug)\n", s);
		return -1;
	}
	if (s)
		log_set_level(l);
	else if (c && c->has_log_level)
		log_set_level(c->log_level);
	return 0;
}

/*
 * Runs the proxy on CFG (stolen) until shutdown; returns the exit status.
 * REC (stolen, may be NULL) records what crosses, reading CFG, which the
 * app keeps until it is freed: it stops first, once the loop is over.
 */
static int run(struct cfg *cfg, const char *level_flag, const char *listen,
	       const char *flow, struct recorder *rec)
{
	proc_watchdog_start();  /* before any child: the filter module's too */
	writer_setup();
	struct app *a = app_new(cfg, level_flag, listen != NULL || flow != NULL);
	/* the front first: a port in use ends here, before any process starts */
	int rc = a && app_open_front(a, listen, flow) == 0 ? app_run(a) : 1;
	cli_record_stop(rec);
	app_free(a);
	curl_ev_release();
	/* the watchdog kills what is left of our groups at the end of its pipe
	 * and exits: wait for it, so that nothing of ours outlives us (the loop
	 * is over; it only reads a pipe and signals, so this ends at once) */
	pid_t wd = proc_watchdog_stop();
	while (wd > 0 && waitpid(wd, NULL, 0) < 0 && errno == EINTR)
		;
	log_debug("exited");
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-file", required_argument, NULL, 'f' },
		{ "record", required_argument, NULL, 'r' },
		{ "listen", required_argument, NULL, 'L' },
		{ "flow", required_argument, NULL, 'F' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = getenv("MCP_CHAIN_CONFIG"), *level = NULL, *record = NULL;
	const char *listen = NULL, *flow = NULL;
	int c;
	mw_use_registry(mw_registry);
	backend_use_transports(be_transports);
	/* OAuth logins of HTTP upstreams (src/app/auth.c). */
	if (argc > 1 && strcmp(argv[1], "auth") == 0)
		return app_auth_main(argc - 1, argv + 1);
	/* The shell commands (src/cli/): a client of the chain, not the chain. */
	if (cli_wanted(argc, argv))
		return cli_main(argc, argv);

	while ((c = getopt_long(argc, argv, "+c:l:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'l': level = optarg; break;
		case 'r': record = optarg; break;
		case 'L': listen = optarg; break;
		case 'F': flow = optarg; break;
		case 'f':
			if (log_open_file(optarg) < 0) {
				fprintf(stderr, "mcp-chain: cannot open log file %s\n", optarg);
				return 1;
			}
			break;
		case 'V': fputs("mcp-chain " MCPC_VERSION "\n", stdout); return 0;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc && strcmp(argv[optind], "audit") == 0) {
		if (optind + 2 >= argc || strcmp(argv[optind + 1], "verify") != 0) {
			fputs("usage: mcp-chain audit verify FILE\n", stderr);
			return 2;
		}
		int rc = audit_verify(argv[optind + 2], stdout);
		return rc < 0 ? 2 : rc;  /* 0 intact, 1 broken, 2 unreadable */
	}
	if (optind < argc && strcmp(argv[optind], "check") == 0) {
		const char *file = optind + 1 < argc ? argv[optind + 1] : config;
		if (!file) {
			fputs("usage: mcp-chain check FILE\n", stderr);
			return 2;
		}
		return cmd_check(file);
	}
	if (optind < argc && strcmp(argv[optind], "schema") == 0) {
		if (optind + 1 < argc) {
			fputs("usage: mcp-chain schema\n", stderr);
			return 2;
		}
		return cmd_schema();
	}
	if (optind < argc || !config) {
		fputs(optind < argc ? "mcp-chain: unexpected argument\n" :
		      "mcp-chain: no configuration given (use --config FILE)\n", stderr);
		fputs(usage, stderr);
		return 2;
	}
	if (set_log_level(level, NULL) < 0)
		return 2;
	struct cfg_errors errs = { 0 };
	struct cfg *cfg = cfg_load(config, &errs);
	print_errors(&errs);
	cfg_errors_release(&errs);
	if (!cfg)
		return 1;
	if (set_log_level(level, cfg) < 0) {
		cfg_free(cfg);
		return 2;
	}
	const char *lf = level ? level : getenv("MCP_CHAIN_LOG");
	/* the recorder reads the first configuration (the app keeps it until
	 * it is freed, reloads or not) */
	struct recorder *rec = record ? cli_record_start(cfg, record) : NULL;
	if (record && !rec) {
		cfg_free(cfg);
		return 1;
	}
	return run(cfg, lf, listen, flow, rec);
}
