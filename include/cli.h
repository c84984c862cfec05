/*
 * cli.h - mcp-chain for people and scripts: `list`, `call`, `read`,
 * `prompt` and `--direct`.
 *
 * Each is an MCP client of the chain: it spawns this same binary as
 * `mcp-chain --config FILE` (argv, never a shell) and speaks MCP over the
 * child's stdin/stdout, so it sees exactly what any client sees (policy,
 * rewrite, namespacing, auth) and shares no state with the chain.
 *
 * The pure helpers below (argument parsing, key=value arguments, the
 * inputSchema check, tool lookup) are declared here for the unit tests.
 *
 * Ownership: json_t parameters say whether they are borrowed or stolen;
 * returned json_t are new references.
 */
#ifndef MCPC_CLI_H
#define MCPC_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Exit codes shared by the commands (docs/cli.md). */
#define CLI_EXIT_OK 0
#define CLI_EXIT_TOOL_ERROR 1   /* the result had isError (a policy refusal too) */
#define CLI_EXIT_RPC_ERROR 2    /* a JSON-RPC error, a usage error, bad arguments */
#define CLI_EXIT_CHAIN 3        /* the chain or a backend failed */
#define CLI_EXIT_TIMEOUT 124    /* --timeout passed (as timeout(1)) */
#define CLI_EXIT_INTERRUPTED 130

/* True when ARGV asks for a shell command (argv[1] is one, or --direct). */
bool cli_wanted(int argc, char **argv);

/* Runs the command; returns the process exit code. */
int cli_main(int argc, char **argv);

/*
 * --record: starts writing every message of the chain configured by CFG
 * (borrowed; it must outlive the recorder) to the file PATH, redacted,
 * through the core's wiretap. Returns the recorder, or NULL (said why).
 */
struct cfg;
struct recorder;
struct recorder *cli_record_start(const struct cfg *cfg, const char *path);

/* Stops recording and frees R (NULL is fine). */
void cli_record_stop(struct recorder *r);

/* ---- command line ---- */

struct cli_opts {
	const char *cmd;        /* "list", "call", "read", "prompt", "direct" */
	const char *config;     /* -c FILE, else $MCP_CHAIN_CONFIG */
	bool json;              /* --json */
	bool verbose;           /* -v: the chain's stderr passes through */
	bool help;              /* -h, --help */
	double timeout;         /* --timeout SECONDS; 0: none */
	char **pos;             /* positional arguments after the command */
	int npos;
};

/*
 * Parses ARGV (argv[0] is the program) into O; POS points into ARGV.
 * Returns 0, or -1 with the reason in ERR. O->pos is allocated (free it).
 */
int cli_parse_opts(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen);

/* ---- arguments ---- */

/*
 * Builds a tool's or prompt's arguments from ARGV: one JSON object
 * ("{...}"), or key=value pairs whose values are parsed as JSON when
 * they parse and kept as strings otherwise; a value given as key=value
 * stays the text typed when SCHEMA (borrowed, may be NULL) says that
 * property is a string. Returns a new object, or NULL with ERR set.
 */
json_t *cli_args_build(char **argv, int argc, json_t *schema, char *err, size_t errlen);

/*
 * Checks ARGS (borrowed) against an inputSchema (borrowed, may be NULL):
 * required keys, each property's type and enum, unknown keys when
 * additionalProperties is false. Returns 0, or -1 with a message naming
 * the bad key in ERR.
 */
int cli_schema_check(json_t *schema, json_t *args, char *err, size_t errlen);

/*
 * Finds the tool a user named in TOOLS (borrowed array): by its exact
 * name, else with the first '.' read as SEP ("fs.read_file" for
 * "fs__read_file"). Returns it borrowed, or NULL.
 */
json_t *cli_tool_find(json_t *tools, const char *name, const char *sep);

/*
 * replay: true when the LIVE value (borrowed) matches the recorded REC
 * (borrowed): equal, except that a recorded string that redaction
 * replaced ("[REDACTED]" in it) matches any value, since the secret is
 * not in the recording to compare.
 */
bool cli_replay_same(json_t *rec, json_t *live);

/*
 * Decodes base64 (standard or URL alphabet, padding and line breaks
 * ignored). Returns a malloc'd buffer with its length in *OUTLEN, or NULL
 * for a character outside the alphabet.
 */
unsigned char *cli_b64_decode(const char *in, size_t *outlen);

/* One line of a description: up to the first newline, at most MAX bytes. */
void cli_one_line(const char *text, char *out, size_t max);

#endif
