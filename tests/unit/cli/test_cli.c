/*
 * test_cli.c - unit tests for src/cli/cli.c: cli_main, the entry of the
 * shell commands: usage and help, the log level, and which command runs
 * (here against the scripted fake chain of fake_chain.h).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/cli/cli_int.h"
#include "fake_chain.h"
#include "log.h"

#define CONFIG "{\"mcpServers\": {\"fs\": {\"command\": \"/bin/true\"}}}"

#define SCRIPT \
	"{\"tools/list\": {\"result\": {\"tools\": [{\"name\": \"fs__echo\"}]}}," \
	" \"prompts/list\": {\"result\": {\"prompts\": []}}," \
	" \"resources/list\": {\"result\": {\"resources\": []}}," \
	" \"resources/templates/list\": {\"result\": {\"resourceTemplates\": []}}," \
	" \"tools/call\": {\"result\": {\"content\": [{\"type\": \"text\", \"text\": \"called\"}]}}}"

struct run {
	struct fake f;
	struct capture cap;
	int code;
};

/* Runs cli_main on ARGS (NULL-terminated; "CFG" stands for the config's path). */
static void run_main(struct run *r, const char **args, const char *input)
{
	char *argv[16];
	int argc = 0;
	fake_setup(&r->f, CONFIG, SCRIPT);
	argv[argc++] = "mcp-chain";
	for (; *args; args++)
		argv[argc++] = strcmp(*args, "CFG") == 0 ? r->f.config : (char *)*args;
	argv[argc] = NULL;
	int saved = input ? stdin_feed(input) : -1;
	capture_begin(&r->cap, r->f.dir);
	r->code = cli_main(argc, argv);
	capture_end(&r->cap);
	if (input)
		stdin_restore(saved);
}

static void run_done(struct run *r)
{
	capture_free(&r->cap);
	fake_cleanup(&r->f);
}

/* --help: the usage on stdout, exit 0, nothing run. */
static void test_help(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "call", "--help", NULL };
	run_main(&r, args, NULL);
	assert_int_equal(r.code, CLI_EXIT_OK);
	assert_non_null(strstr(r.cap.out, "usage: mcp-chain list   [-c FILE] [--json]\n"));
	assert_non_null(strstr(r.cap.out, "mcp-chain replay FILE\n"));
	assert_string_equal(r.cap.err, "");
	json_t *sent = fake_received(&r.f);
	assert_int_equal(json_array_size(sent), 0);
	json_decref(sent);
	run_done(&r);
}

/* A bad command line: the reason and the usage on stderr, exit 2. */
static void test_usage_errors(void **state)
{
	(void)state;
	struct run r;
	const char *bogus[] = { "list", "-c", "CFG", "--bogus", NULL };
	run_main(&r, bogus, NULL);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_string_equal(r.cap.out, "");
	assert_non_null(strstr(r.cap.err, "mcp-chain: unknown option \"--bogus\"\nusage: mcp-chain list"));
	run_done(&r);

	const char *extra[] = { "list", "-c", "CFG", "extra", NULL };
	run_main(&r, extra, NULL);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_string_equal(r.cap.err, "mcp-chain: list takes no arguments\n");
	json_t *sent = fake_received(&r.f);
	assert_int_equal(json_array_size(sent), 0);   /* no chain started */
	json_decref(sent);
	run_done(&r);
}

/* Each command reaches its implementation; -v raises the log level; SIGPIPE ignored. */
static void test_dispatch(void **state)
{
	(void)state;
	struct run r;
	const char *call[] = { "call", "-c", "CFG", "fs__echo", NULL };
	run_main(&r, call, NULL);
	assert_int_equal(r.code, CLI_EXIT_OK);
	assert_string_equal(r.cap.out, "called\n");
	assert_int_equal(log_get_level(), LOG_WARN);
	struct sigaction sa;
	sigaction(SIGPIPE, NULL, &sa);
	assert_true(sa.sa_handler == SIG_IGN);
	run_done(&r);

	const char *list[] = { "list", "-v", "-c", "CFG", NULL };
	run_main(&r, list, NULL);
	assert_int_equal(r.code, CLI_EXIT_OK);
	assert_string_equal(r.cap.out, "fs (ready)\n  tools:\n    fs__echo()\n");
	assert_int_equal(log_get_level(), LOG_INFO);
	run_done(&r);

	const char *direct[] = { "--direct", "-c", "CFG", NULL };
	run_main(&r, direct, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"fs__echo\"}\n");
	assert_int_equal(r.code, CLI_EXIT_OK);
	json_t *reply = json_loads(r.cap.out, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(reply, "id")), 1);
	assert_non_null(json_object_get(json_object_get(reply, "result"), "content"));
	json_decref(reply);
	run_done(&r);

	const char *replay[] = { "replay", "/nonexistent/recording.jsonl", NULL };
	run_main(&r, replay, NULL);
	assert_int_not_equal(r.code, CLI_EXIT_OK);
	assert_non_null(strstr(r.cap.err, "/nonexistent/recording.jsonl"));
	run_done(&r);
}

int main(int argc, char **argv)
{
	int rc = fake_chain_main(argc, argv);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_dispatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
