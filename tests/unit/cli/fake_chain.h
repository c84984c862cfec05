/*
 * fake_chain.h - a scripted stand-in for the chain, for the tests of the
 * shell commands.
 *
 * The commands spawn `/proc/self/exe --config FILE`: in a test that is the
 * test binary itself, so its main() first calls fake_chain_main(), which
 * (when argv is `--config FILE`) plays a chain from the JSON script named
 * by $FAKE_CHAIN_SCRIPT and appends every line it reads to
 * $FAKE_CHAIN_LOG. The script is an object:
 *
 *   "start":  STEP done before reading anything (e.g. {"exit": 3})
 *   "eof":    STEP done at the end of stdin (default: exit 0)
 *   METHOD:   STEP, or an array of them (the Nth request of METHOD gets
 *             the Nth; the last repeats)
 *
 * A STEP is an object: "stderr" (text written to stderr), "before" (messages
 * written first; the strings "$id" and "$token" in them become the
 * request's id and progress token), "raw" (lines written as they are),
 * then "result" or "error" (the reply), "exit" (exit with that status
 * without replying) or nothing (no reply: the request hangs). A method
 * absent from the script gets a -32601 error; "initialize" defaults to a
 * result declaring tools, prompts and resources.
 */
#ifndef FAKE_CHAIN_H
#define FAKE_CHAIN_H

#include <jansson.h>
#include <stdbool.h>

/* In the child: plays the chain and exits; else sets up the writers
 * (as cli_main does) and returns -1. */
int fake_chain_main(int argc, char **argv);

struct fake {
	char dir[64];
	char config[96];
	char script[96];
	char log[96];
};

/*
 * Makes a temporary directory with CONFIG_JSON (a valid mcp-chain config)
 * and SCRIPT_JSON, and points the environment at them.
 */
void fake_setup(struct fake *f, const char *config_json, const char *script_json);

/* Every message the fake chain read, in order (new array). */
json_t *fake_received(struct fake *f);

/* The messages received with METHOD (new array). */
json_t *fake_received_method(struct fake *f, const char *method);

/* Removes the directory. */
void fake_cleanup(struct fake *f);

/* Captures stdout and stderr (fds 1 and 2) into files until capture_end. */
struct capture {
	int saved_out, saved_err;
	char out_path[96], err_path[96];
	char *out, *err;   /* set by capture_end (malloc'd) */
};

void capture_begin(struct capture *c, const char *dir);
void capture_end(struct capture *c);
void capture_free(struct capture *c);

/* Feeds TEXT to fd 0 through a pipe (closed after it) until stdin_restore. */
int stdin_feed(const char *text);
void stdin_restore(int saved);

/* Reads a whole file (malloc'd, NUL-terminated), or NULL. */
char *read_all(const char *path);

#endif
