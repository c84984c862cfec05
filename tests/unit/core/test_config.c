/*
 * test_config.c - unit tests for src/core/config.c (configuration loading,
 * validation and ${VAR} expansion).
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfg_test.h"
#include "config.h"
#include "middleware.h"

#define NAME "cfg.json"

/* Prints the errors (shown only when a test fails). */
static void dump_errors(const struct cfg_errors *e)
{
	for (size_t i = 0; i < e->count; i++)
		print_message("  error: %s\n", e->lines[i]);
}

/* Asserts TEXT fails to load with the error line LINE among others. */
#define expect_error(text, line) do { \
	struct cfg_errors e_ = { 0 }; \
	struct cfg *c_ = cfg_load_string((text), NAME, &e_); \
	if (c_ || !cfgt_has_error(&e_, (line))) { \
		dump_errors(&e_); \
		cfg_free(c_); \
		cfg_errors_release(&e_); \
		fail_msg("expected error \"%s\"", (line)); \
	} \
	cfg_errors_release(&e_); \
} while (0)

/* Loads TEXT, which must be valid. */
static struct cfg *load_ok(const char *text)
{
	struct cfg_errors e = { 0 };
	struct cfg *c = cfg_load_string(text, NAME, &e);
	if (!c) {
		dump_errors(&e);
		cfg_errors_release(&e);
		fail_msg("expected a valid configuration: %s", text);
	}
	assert_int_equal(e.count, 0);
	return c;
}

/* Bytes in use on the heap (glibc), to catch leaks without a sanitizer. */
static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}

static void test_valid_claude_entry(void **state)
{
	(void)state;
	struct cfg *c = load_ok(
		"{\n"
		"  \"mcpServers\": {\n"
		"    \"filesystem\": {\n"
		"      \"command\": \"npx\",\n"
		"      \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/tmp\"],\n"
		"      \"env\": {\"DEBUG\": \"1\", \"EMPTY\": \"\"}\n"
		"    }\n"
		"  }\n"
		"}\n");
	assert_string_equal(c->path, NAME);
	assert_int_equal(c->nservers, 1);
	struct cfg_server *s = &c->servers[0];
	assert_string_equal(s->name, "filesystem");
	assert_string_equal(s->command, "npx");
	assert_string_equal(s->argv[0], "npx");
	assert_string_equal(s->argv[1], "-y");
	assert_string_equal(s->argv[2], "@modelcontextprotocol/server-filesystem");
	assert_string_equal(s->argv[3], "/tmp");
	assert_null(s->argv[4]);
	assert_non_null(s->env);
	/* order follows the object (jansson keeps insertion order) */
	assert_string_equal(s->env[0], "DEBUG=1");
	assert_string_equal(s->env[1], "EMPTY=");
	assert_null(s->env[2]);
	assert_null(s->cwd);
	assert_true(s->enabled);
	assert_null(s->middleware);
	assert_int_equal(c->max_message, CFG_DEFAULT_MAX_MESSAGE);
	assert_true(c->grace == CFG_DEFAULT_GRACE);
	assert_false(c->has_log_level);
	assert_null(c->middleware);
	cfg_free(c);
}

/* The minimal entry: a command alone; argv is just the command. */
static void test_minimal_entry(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"s\":{\"command\":\"srv\",\"type\":\"stdio\"}}}");
	assert_string_equal(c->servers[0].argv[0], "srv");
	assert_null(c->servers[0].argv[1]);
	assert_null(c->servers[0].env);
	cfg_free(c);
}

/* Options and per-entry fields all read. */
static void test_all_options(void **state)
{
	(void)state;
	struct cfg *c = load_ok(
		"{\"mcpServers\":{\"a\":{\"command\":\"x\",\"cwd\":\"/srv\",\"enabled\":true,"
		"\"middleware\":[]}},"
		"\"maxMessageBytes\":65536,\"shutdownGraceMs\":1500,\"logLevel\":\"debug\","
		"\"maxOpenRequests\":50,\"middleware\":[]}");
	assert_string_equal(c->servers[0].cwd, "/srv");
	assert_int_equal(c->max_open, 50);
	assert_true(json_is_array(c->servers[0].middleware));
	assert_int_equal(c->max_message, 65536);
	assert_true(c->grace == 1.5);
	assert_true(c->has_log_level);
	assert_int_equal(c->log_level, LOG_DEBUG);
	assert_true(json_is_array(c->middleware));
	cfg_free(c);
}

/* maxOpenRequests: 10000 by default, a positive integer when given. */
static void test_max_open_requests(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_int_equal(c->max_open, CFG_DEFAULT_MAX_OPEN);
	cfg_free(c);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxOpenRequests\":0}",
		     NAME ": /maxOpenRequests: must be an integer from 1 to 1000000");
}

/* A syntax error is reported as NAME:LINE:COLUMN. */
static void test_syntax_error(void **state)
{
	struct cfg_errors e = { 0 };
	(void)state;
	const char *text =
		"{\n"
		"  \"mcpServers\": {\n"
		"    \"fs\": { \"command\": \"x\", }\n"
		"  }\n"
		"}\n";
	assert_null(cfg_load_string(text, NAME, &e));
	assert_int_equal(e.count, 1);
	char file[64];
	int line = 0, col = 0, used = 0;
	assert_int_equal(sscanf(e.lines[0], "%63[^:]:%d:%d: %n", file, &line, &col, &used), 3);
	assert_string_equal(file, NAME);
	assert_int_equal(line, 3);
	assert_true(col > 20 && col < 40);       /* near the stray comma / brace */
	assert_true(used > 0 && e.lines[0][used] != '\0');  /* followed by a message */
	cfg_errors_release(&e);

	/* a duplicate key is an error too, with its position */
	assert_null(cfg_load_string("{\"mcpServers\":{},\n\"mcpServers\":{}}", NAME, &e));
	assert_int_equal(e.count, 1);
	assert_true(cfgt_has_error_prefix(&e, NAME ":2:"));
	cfg_errors_release(&e);

	/* empty text */
	assert_null(cfg_load_string("", NAME, &e));
	assert_int_equal(e.count, 1);
	assert_true(cfgt_has_error_prefix(&e, NAME ":"));
	cfg_errors_release(&e);
}

static void test_unknown_keys(void **state)
{
	(void)state;
	expect_error("{\"mcpServers\":{\"fs\":{\"comand\":\"x\"}}}",
		     NAME ": /mcpServers/fs/comand: unknown key (did you mean \"command\"?)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\"}},\"loglevel\":\"info\"}",
		     NAME ": /loglevel: unknown key (did you mean \"logLevel\"?)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"timeoutMs\":5}}}",
		     NAME ": /mcpServers/fs/timeoutMs: unknown key (did you mean \"timeout\"?)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\"}},\"listen\":{\"adress\":\"::1\"}}",
		     NAME ": /listen/adress: unknown key (did you mean \"address\"?)");
	/* pointer segments are escaped per RFC 6901 */
	expect_error("{\"mcpServers\":{\"a/b~c\":{\"command\":\"x\",\"bogus\":1}}}",
		     NAME ": /mcpServers/a~1b~0c/bogus: unknown key");
}

static void test_wrong_types(void **state)
{
	(void)state;
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":[\"a\",\"b\",3]}}}",
		     NAME ": /mcpServers/fs/args/2: must be a string");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":\"a b\"}}}",
		     NAME ": /mcpServers/fs/args: must be an array of strings");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"env\":{\"A\":1}}}}",
		     NAME ": /mcpServers/fs/env/A: must be a string");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"env\":[\"A=1\"]}}}",
		     NAME ": /mcpServers/fs/env: must be an object of strings");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"env\":{\"A=B\":\"1\"}}}}",
		     NAME ": /mcpServers/fs/env/A=B: not a valid environment variable name");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"cwd\":5}}}",
		     NAME ": /mcpServers/fs/cwd: must be a string");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"enabled\":\"yes\"}}}",
		     NAME ": /mcpServers/fs/enabled: must be true or false");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":7}}}",
		     NAME ": /mcpServers/fs/command: must be a non-empty string");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"\"}}}",
		     NAME ": /mcpServers/fs/command: must be a non-empty string");
	expect_error("{\"mcpServers\":{\"fs\":\"npx\"}}",
		     NAME ": /mcpServers/fs: must be an object with a \"command\"");
	expect_error("{\"mcpServers\":[]}",
		     NAME ": /mcpServers: must be an object of named servers");
	expect_error("[]", NAME ": /: the configuration must be a JSON object");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"type\":\"websocket\"}}}",
		     NAME ": /mcpServers/fs/type: must be \"stdio\", \"http\" (Streamable HTTP), "
		     "\"sse\" (HTTP+SSE) or \"mcp-flow\" (MCP over WebTransport)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"middleware\":{}}}}",
		     NAME ": /mcpServers/fs/middleware: must be an array of modules");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\"}},\"middleware\":\"m\"}",
		     NAME ": /middleware: must be an array of modules");
}

/* An mcp-flow entry: https to a numeric host or localhost with its port, the
 * certificate's hash in hex or base64, caFile; and only there. */
static void test_flow_entry(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\","
		"\"url\":\"https://127.0.0.1:4433/mcp-flow\",\"certificateHash\":"
		"\"00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\"}}}");
	assert_int_equal(c->servers[0].transport, CFG_FLOW);
	assert_true(c->servers[0].has_cert_hash);
	assert_int_equal(c->servers[0].cert_hash[1], 0x11);
	assert_int_equal(c->servers[0].cert_hash[31], 0xff);
	assert_null(c->servers[0].ca_file);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\","
		"\"url\":\"https://[::1]:4433/\",\"certificateHash\":"
		"\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"}}}");
	assert_int_equal(c->servers[0].cert_hash[31], 31);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\","
		"\"url\":\"https://localhost:9/x\",\"caFile\":\"/etc/ca.pem\"}}}");
	assert_false(c->servers[0].has_cert_hash);
	assert_string_equal(c->servers[0].ca_file, "/etc/ca.pem");
	cfg_free(c);
	expect_error("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\",\"url\":\"http://127.0.0.1:1/\"}}}",
		     NAME ": /mcpServers/r/url: an mcp-flow server's url must be https://");
	expect_error("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\",\"url\":\"https://127.0.0.1/\"}}}",
		     NAME ": /mcpServers/r/url: must name the port (https://HOST:PORT/PATH)");
	expect_error("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\",\"url\":\"https://example.com:4433/\"}}}",
		     NAME ": /mcpServers/r/url: the host must be a numeric address or localhost "
		     "(no DNS lookup on the loop)");
	expect_error("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\",\"url\":\"https://127.0.0.1:1/\","
		     "\"certificateHash\":\"abc\"}}}",
		     NAME ": /mcpServers/r/certificateHash: must be the SHA-256 of the certificate's DER: "
		     "64 hex digits or base64");
	expect_error("{\"mcpServers\":{\"r\":{\"type\":\"mcp-flow\",\"url\":\"https://127.0.0.1:1/\","
		     "\"headers\":{}}}}",
		     NAME ": /mcpServers/r/headers: not used by an mcp-flow server");
	expect_error("{\"mcpServers\":{\"r\":{\"command\":\"x\",\"caFile\":\"/a\"}}}",
		     NAME ": /mcpServers/r/caFile: only for an mcp-flow server (\"type\": \"mcp-flow\")");
}

/* Middleware lists are built into pipelines; bad entries are reported where they are. */
static void test_middleware_pipelines(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"middleware\":[]}},"
				"\"middleware\":[]}");
	assert_non_null(c->pipeline);
	assert_int_equal(pipeline_size(c->pipeline), 0);
	assert_non_null(c->servers[0].pipeline);
	cfg_free(c);
	/* never NULL in a loaded config, even without "middleware" */
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_non_null(c->pipeline);
	assert_non_null(c->servers[0].pipeline);
	cfg_free(c);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"middleware\":[\"log\"]}",
		     NAME ": /middleware/0: a module is an object {\"use\": \"NAME\", ...options}");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"middleware\":[{\"use\":\"x\"},{}]}}}",
		     NAME ": /mcpServers/a/middleware/1/use: missing or not a string: name the module to use");
	struct cfg_errors e = { 0 };
	assert_null(cfg_load_string("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},"
				    "\"middleware\":[{\"use\":\"no-such-module\"}]}", NAME, &e));
	assert_true(cfgt_has_error_prefix(&e, NAME ": /middleware/0/use: unknown module \"no-such-module\""));
	cfg_errors_release(&e);
	/* a module name one slip away is offered, before the list (the core
	 * links no module: a table of names stands for main()'s) */
	static const struct mw_def named[] = { { "log", NULL }, { "policy", NULL }, { NULL, NULL } };
	mw_use_registry(named);
	assert_null(cfg_load_string("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},"
				    "\"middleware\":[{\"use\":\"polcy\"}]}", NAME, &e));
	assert_true(cfgt_has_error_prefix(&e, NAME ": /middleware/0/use: unknown module \"polcy\" "
					  "(did you mean \"policy\"? available: log, policy)"));
	cfg_errors_release(&e);
	mw_use_registry(NULL);
}

/* "protocol": the era spoken to a backend; errors name the key's path. */
static void test_protocol(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"},"
				"\"b\":{\"command\":\"x\",\"protocol\":\"handshake\"},"
				"\"c\":{\"url\":\"http://h/mcp\",\"protocol\":\"2026-07-28\"},"
				"\"d\":{\"command\":\"x\",\"protocol\":\"auto\"}}}");
	assert_int_equal(c->servers[0].protocol, CFG_PROTO_AUTO);
	assert_int_equal(c->servers[1].protocol, CFG_PROTO_HANDSHAKE);
	assert_int_equal(c->servers[2].protocol, CFG_PROTO_STATELESS);
	assert_int_equal(c->servers[3].protocol, CFG_PROTO_AUTO);
	cfg_free(c);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"protocol\":\"2025-06-18\"}}}",
		     NAME ": /mcpServers/a/protocol: must be \"auto\", \"handshake\" or \"2026-07-28\"");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"protocol\":true}}}",
		     NAME ": /mcpServers/a/protocol: must be \"auto\", \"handshake\" or \"2026-07-28\"");
	expect_error("{\"mcpServers\":{\"s\":{\"type\":\"sse\",\"url\":\"http://h/sse\","
		     "\"protocol\":\"2026-07-28\"}}}",
		     NAME ": /mcpServers/s/protocol: the HTTP+SSE transport (\"type\": \"sse\") predates 2026-07-28");
}

static void test_missing_command(void **state)
{
	(void)state;
	expect_error("{\"mcpServers\":{\"fs\":{\"env\":{}}}}",
		     NAME ": /mcpServers/fs: missing \"command\"");
	expect_error("{\"maxMessageBytes\":5000}", NAME ": /: missing \"mcpServers\"");
}

/* Asserts that a failing load of TEXT gives back all its memory. */
static void expect_failed_load_frees_all(const char *text)
{
	struct cfg_errors e = { 0 };
	/* warm up once so lazily made library state is not counted */
	assert_null(cfg_load_string(text, NAME, &e));
	cfg_errors_release(&e);
	/* many loads, so a leak shows over malloc's own caching noise (tcache) */
	size_t before = heap_in_use();
	for (int i = 0; i < 100; i++) {
		assert_null(cfg_load_string(text, NAME, &e));
		assert_true(e.count >= 1);
		cfg_errors_release(&e);
	}
	size_t after = heap_in_use();
#ifndef __SANITIZE_ADDRESS__
	if (after > before + 1024)
		fail_msg("100 failed loads leaked %zu bytes", after - before);
#else
	(void)before;       /* LeakSanitizer reports it at exit instead */
	(void)after;
#endif
}

/*
 * BUG (config.c, load_args + free_strv): when "command" is missing or
 * invalid, argv[0] stays NULL, so free_strv (which stops at the first NULL)
 * never frees the argument strings after it: every arg leaks. Shown by the
 * heap staying larger after cfg_load_string fails (and by LeakSanitizer in
 * the ASan build).
 */
static void test_missing_command_frees_args(void **state)
{
	(void)state;
	expect_failed_load_frees_all("{\"mcpServers\":{\"fs\":{\"args\":[\"leak-a\",\"leak-b\"]}}}");
}

/*
 * BUG (config.c, load_args + free_strv): a non-string element of "args"
 * leaves its argv slot NULL, so the args after it are never freed.
 */
static void test_bad_arg_frees_following_args(void **state)
{
	(void)state;
	expect_failed_load_frees_all("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":[\"a\",3,\"leak-c\"]}}}");
}

/* Failed loads without those holes give back everything. */
static void test_failed_load_frees_all(void **state)
{
	(void)state;
	expect_failed_load_frees_all("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":[\"a\",\"b\",3],"
				     "\"env\":{\"A\":\"1\",\"B\":2},\"cwd\":\"/\",\"bogus\":1}},\"logLevel\":\"x\"}");
}

/* A valid load and free returns the heap to where it was. */
static void test_valid_load_frees_everything(void **state)
{
	(void)state;
	const char *text = "{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":[\"a\",\"b\"],"
			   "\"env\":{\"K\":\"v\"},\"cwd\":\"/\"}}}";
	cfg_free(load_ok(text));
	size_t before = heap_in_use();
	cfg_free(load_ok(text));
	assert_int_equal(heap_in_use(), before);
	cfg_free(NULL);
}

/* ${VAR} and ${VAR:-default} in command, args, env and cwd. */
static void test_expansion(void **state)
{
	(void)state;
	setenv("MCPC_T_CMD", "/usr/bin/node", 1);
	setenv("MCPC_T_DIR", "/home/me", 1);
	setenv("MCPC_T_TOKEN", "s3cr=t", 1);
	unsetenv("MCPC_T_UNSET");
	struct cfg *c = load_ok(
		"{\"mcpServers\":{\"fs\":{"
		"\"command\":\"${MCPC_T_CMD}\","
		"\"args\":[\"--root=${MCPC_T_DIR}/data\",\"${MCPC_T_UNSET:-fallback}\","
		"\"${MCPC_T_UNSET:-}\",\"$MCPC_T_DIR\",\"a${MCPC_T_DIR}b${MCPC_T_DIR}c\","
		"\"${MCPC_T_UNSET:-x:-y}\"],"
		"\"env\":{\"TOKEN\":\"${MCPC_T_TOKEN}\",\"HOME2\":\"${MCPC_T_UNSET:-/nohome}\"},"
		"\"cwd\":\"${MCPC_T_DIR}/work\"}}}");
	struct cfg_server *s = &c->servers[0];
	assert_string_equal(s->command, "/usr/bin/node");
	assert_string_equal(s->argv[0], "/usr/bin/node");
	assert_string_equal(s->argv[1], "--root=/home/me/data");
	assert_string_equal(s->argv[2], "fallback");
	assert_string_equal(s->argv[3], "");
	assert_string_equal(s->argv[4], "$MCPC_T_DIR");        /* only ${...} expands */
	assert_string_equal(s->argv[5], "a/home/meb/home/mec");
	assert_string_equal(s->argv[6], "x:-y");
	assert_null(s->argv[7]);
	assert_string_equal(s->env[0], "TOKEN=s3cr=t");
	assert_string_equal(s->env[1], "HOME2=/nohome");
	assert_string_equal(s->cwd, "/home/me/work");
	cfg_free(c);
	unsetenv("MCPC_T_CMD");
	unsetenv("MCPC_T_DIR");
	unsetenv("MCPC_T_TOKEN");
}

/* An unset variable without a default is an error naming the path. */
static void test_expansion_unset(void **state)
{
	(void)state;
	unsetenv("MCPC_T_NOPE");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"${MCPC_T_NOPE}\"}}}",
		     NAME ": /mcpServers/fs/command: environment variable MCPC_T_NOPE is not set"
		     " (write ${MCPC_T_NOPE:-default} for a default)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"args\":[\"ok\",\"--k=${MCPC_T_NOPE}\"]}}}",
		     NAME ": /mcpServers/fs/args/1: environment variable MCPC_T_NOPE is not set"
		     " (write ${MCPC_T_NOPE:-default} for a default)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"env\":{\"KEY\":\"${MCPC_T_NOPE}\"}}}}",
		     NAME ": /mcpServers/fs/env/KEY: environment variable MCPC_T_NOPE is not set"
		     " (write ${MCPC_T_NOPE:-default} for a default)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"cwd\":\"${MCPC_T_NOPE}/d\"}}}",
		     NAME ": /mcpServers/fs/cwd: environment variable MCPC_T_NOPE is not set"
		     " (write ${MCPC_T_NOPE:-default} for a default)");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"cwd\":\"${MCPC_T_NOPE\"}}}",
		     NAME ": /mcpServers/fs/cwd: unterminated \"${\"");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"cwd\":\"${}\"}}}",
		     NAME ": /mcpServers/fs/cwd: bad variable name in \"${}\"");
	expect_error("{\"mcpServers\":{\"fs\":{\"command\":\"x\",\"cwd\":\"${:-d}\"}}}",
		     NAME ": /mcpServers/fs/cwd: bad variable name in \"${:-d}\"");
}

/* ${file:PATH} reads a secret from a file, without its trailing newline. */
static void test_expand_file(void **state)
{
	char err[300], path[] = "/tmp/mcpc-secret-XXXXXX";
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret\n", 7), 7);
	close(fd);
	char in[128];
	snprintf(in, sizeof in, "Bearer ${file:%s}!", path);
	char *r = cfg_expand(in, err, sizeof err);
	assert_non_null(r);
	assert_string_equal(r, "Bearer s3cret!");
	free(r);
	unlink(path);
	r = cfg_expand("${file:/nonexistent/mcpc}", err, sizeof err);
	assert_null(r);
	assert_non_null(strstr(err, "cannot read /nonexistent/mcpc"));
}

/* cfg_expand on its own. */
static void test_cfg_expand(void **state)
{
	char err[256];
	char *r;
	(void)state;
	setenv("MCPC_T_A", "alpha", 1);
	unsetenv("MCPC_T_B");
	r = cfg_expand("", err, sizeof err);
	assert_string_equal(r, "");
	free(r);
	r = cfg_expand("plain $ text {}", err, sizeof err);
	assert_string_equal(r, "plain $ text {}");
	free(r);
	r = cfg_expand("${MCPC_T_A}", err, sizeof err);
	assert_string_equal(r, "alpha");
	free(r);
	r = cfg_expand("<${MCPC_T_A:-no}|${MCPC_T_B:-dflt}>", err, sizeof err);
	assert_string_equal(r, "<alpha|dflt>");
	free(r);
	err[0] = '\0';
	assert_null(cfg_expand("x${MCPC_T_B}y", err, sizeof err));
	assert_non_null(strstr(err, "MCPC_T_B"));
	err[0] = '\0';
	assert_null(cfg_expand("${MCPC_T_A", err, sizeof err));
	assert_string_equal(err, "unterminated \"${\"");
	unsetenv("MCPC_T_A");
}

/* Every error is reported in one run, not just the first. */
static void test_several_errors(void **state)
{
	struct cfg_errors e = { 0 };
	(void)state;
	assert_null(cfg_load_string(
		"{\"mcpServers\":{"
		"\"a\":{\"comand\":\"x\",\"disabled\":true},"
		"\"b\":{\"command\":\"y\",\"args\":[1],\"enabled\":\"no\"}},"
		"\"logLevel\":\"loud\",\"maxMessageBytes\":10,\"extra\":true}", NAME, &e));
	if (e.count != 7)
		dump_errors(&e);
	assert_true(cfgt_has_error(&e, NAME ": /extra: unknown key"));
	assert_true(cfgt_has_error(&e, NAME ": /mcpServers/a/comand: unknown key (did you mean \"command\"?)"));
	assert_true(cfgt_has_error(&e, NAME ": /mcpServers/a: missing \"command\""));
	assert_true(cfgt_has_error(&e, NAME ": /mcpServers/b/args/0: must be a string"));
	assert_true(cfgt_has_error(&e, NAME ": /mcpServers/b/enabled: must be true or false"));
	assert_true(cfgt_has_error(&e, NAME ": /logLevel: must be one of \"error\", \"warn\", \"info\", \"debug\""));
	assert_true(cfgt_has_error(&e, NAME ": /maxMessageBytes: must be an integer from 4096 to 4294967296"));
	assert_int_equal(e.count, 7);
	cfg_errors_release(&e);
	assert_int_equal(e.count, 0);
	assert_null(e.lines);
}

static void test_zero_enabled(void **state)
{
	(void)state;
	expect_error("{\"mcpServers\":{}}",
		     NAME ": /mcpServers: no enabled server: give one entry with a \"command\"");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"enabled\":false}}}",
		     NAME ": /mcpServers: no enabled server: give one entry with a \"command\"");
	/* "disabled": true wins over "enabled": true */
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"enabled\":true,\"disabled\":true}}}",
		     NAME ": /mcpServers: no enabled server: give one entry with a \"command\"");
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\",\"enabled\":false},"
				"\"b\":{\"command\":\"y\"},\"c\":{\"command\":\"z\",\"disabled\":true}}}");
	assert_int_equal(c->nservers, 3);
	int enabled = 0;
	for (size_t i = 0; i < c->nservers; i++) {
		if (c->servers[i].enabled) {
			enabled++;
			assert_string_equal(c->servers[i].name, "b");
		}
	}
	assert_int_equal(enabled, 1);
	cfg_free(c);
}

/*
 * Two enabled servers. NOTE: this follows the several-backends contract of
 * the working tree (two enabled servers load, both enabled); the committed
 * one-backend version refused them with "/mcpServers: 2 servers enabled".
 */
static void test_two_enabled(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"},\"b\":{\"command\":\"y\"}}}");
	assert_int_equal(c->nservers, 2);
	assert_string_equal(c->servers[0].name, "a");
	assert_string_equal(c->servers[1].name, "b");
	assert_true(c->servers[0].enabled);
	assert_true(c->servers[1].enabled);
	cfg_free(c);
}

static void test_max_message_bounds(void **state)
{
	(void)state;
	const char *msg = NAME ": /maxMessageBytes: must be an integer from 4096 to 4294967296";
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":4095}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":4294967297}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":0}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":-1}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":\"1MB\"}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":65536.0}", msg);
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":4096}");
	assert_int_equal(c->max_message, 4096);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"maxMessageBytes\":4294967296}");
	assert_int_equal(c->max_message, (size_t)4294967296ULL);
	cfg_free(c);
	/* shutdownGraceMs, the other integer option */
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"shutdownGraceMs\":600001}",
		     NAME ": /shutdownGraceMs: must be an integer from 0 to 600000");
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"shutdownGraceMs\":0}");
	assert_true(c->grace == 0.0);
	cfg_free(c);
}

static void test_init_timeout(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_true(c->init_timeout == CFG_DEFAULT_INIT_TIMEOUT);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initTimeoutMs\":2500}");
	assert_true(c->init_timeout == 2.5);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initTimeoutMs\":100}");
	assert_true(c->init_timeout == 0.1);
	cfg_free(c);
	const char *msg = NAME ": /initTimeoutMs: must be an integer from 100 to 3600000";
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initTimeoutMs\":99}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initTimeoutMs\":3600001}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initTimeoutMs\":\"60s\"}", msg);
}

/* initJoinMs: how long the client's initialize waits for slow backends. */
static void test_init_join(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_true(c->init_join == CFG_DEFAULT_INIT_JOIN);
	assert_true(CFG_DEFAULT_INIT_JOIN <= 5.0);  /* under Codex's 10 s, Claude Desktop's 30 s */
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initJoinMs\":1200}");
	assert_true(c->init_join == 1.2);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initJoinMs\":0}");
	assert_true(c->init_join == 0.0);
	cfg_free(c);
	const char *msg = NAME ": /initJoinMs: must be an integer from 0 to 3600000";
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initJoinMs\":-1}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initJoinMs\":3600001}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"initJoinMs\":\"5s\"}", msg);
}

/* clientStallMs: how long a stdio client may leave a full stdout unread. */
static void test_client_stall(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_true(c->client_stall == CFG_DEFAULT_CLIENT_STALL);
	assert_true(CFG_DEFAULT_CLIENT_STALL == 60.0);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"clientStallMs\":1500}");
	assert_true(c->client_stall == 1.5);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"clientStallMs\":0}");
	assert_true(c->client_stall == 0.0);   /* wait forever */
	cfg_free(c);
	const char *msg = NAME ": /clientStallMs: must be an integer from 0 to 86400000";
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"clientStallMs\":-1}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"clientStallMs\":86400001}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"clientStallMs\":\"60s\"}", msg);
}

static void test_log_level(void **state)
{
	(void)state;
	static const struct { const char *s; enum log_level l; } ok[] = {
		{ "error", LOG_ERROR }, { "warn", LOG_WARN }, { "warning", LOG_WARN },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		char text[200];
		snprintf(text, sizeof text,
			 "{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"logLevel\":\"%s\"}", ok[i].s);
		struct cfg *c = load_ok(text);
		assert_true(c->has_log_level);
		assert_int_equal(c->log_level, ok[i].l);
		cfg_free(c);
	}
	const char *msg = NAME ": /logLevel: must be one of \"error\", \"warn\", \"info\", \"debug\"";
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"logLevel\":\"verbose\"}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"logLevel\":\"INFO\"}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"logLevel\":3}", msg);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"logLevel\":\"\"}", msg);
}

/* Writes TEXT to a new temporary file; returns its path (static). */
static const char *temp_file(const char *text)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/mcpc-test-config-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t n = strlen(text);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
	return path;
}

static void test_load_file(void **state)
{
	struct cfg_errors e = { 0 };
	(void)state;
	const char *path = temp_file("{\"mcpServers\":{\"fs\":{\"command\":\"srv\",\"args\":[\"--x\"]}},"
				     "\"logLevel\":\"warn\"}\n");
	struct cfg *c = cfg_load(path, &e);
	assert_non_null(c);
	assert_int_equal(e.count, 0);
	assert_string_equal(c->path, path);
	assert_string_equal(c->servers[0].argv[1], "--x");
	assert_int_equal(c->log_level, LOG_WARN);
	cfg_free(c);
	unlink(path);

	/* a syntax error names the file, line and column */
	path = temp_file("{\n  \"mcpServers\": {\n    \"fs\": {\"command\" \"srv\"}\n  }\n}\n");
	assert_null(cfg_load(path, &e));
	assert_int_equal(e.count, 1);
	char want[128];
	snprintf(want, sizeof want, "%s:3:", path);
	assert_true(cfgt_has_error_prefix(&e, want));
	cfg_errors_release(&e);
	unlink(path);

	/* a validation error names the file and the pointer */
	path = temp_file("{\"mcpServers\":{\"fs\":{\"comand\":\"srv\"}}}");
	assert_null(cfg_load(path, &e));
	snprintf(want, sizeof want, "%s: /mcpServers/fs/comand: unknown key (did you mean \"command\"?)",
		 path);
	assert_true(cfgt_has_error(&e, want));
	cfg_errors_release(&e);
	unlink(path);

	/* a missing file: the path and the reason, no line number */
	assert_null(cfg_load("/nonexistent/mcpc-config.json", &e));
	assert_int_equal(e.count, 1);
	assert_true(cfgt_has_error_prefix(&e, "/nonexistent/mcpc-config.json: "));
	assert_false(cfgt_has_error_prefix(&e, "/nonexistent/mcpc-config.json:0"));
	assert_false(cfgt_has_error_prefix(&e, "/nonexistent/mcpc-config.json:-1"));
	cfg_errors_release(&e);
}

/* cfg_error formats and appends. */
static void test_cfg_error(void **state)
{
	struct cfg_errors e = { 0 };
	(void)state;
	cfg_error(&e, "%s:%d", "a", 1);
	cfg_error(&e, "second");
	assert_int_equal(e.count, 2);
	assert_string_equal(e.lines[0], "a:1");
	assert_string_equal(e.lines[1], "second");
	cfg_errors_release(&e);
	assert_int_equal(e.count, 0);
}

/* Without "listen" the HTTP front's defaults apply; set is false. */
static void test_listen_defaults(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}}}");
	assert_false(c->listen.set);
	assert_string_equal(c->listen.address, "127.0.0.1");
	assert_int_equal(c->listen.port, 8080);
	assert_string_equal(c->listen.path, "/mcp");
	assert_string_equal(c->listen.sse_path, "/sse");
	assert_string_equal(c->listen.messages_path, "/messages");
	assert_null(c->listen.origins);
	assert_int_equal(c->listen.max_connections, 256);
	assert_true(c->listen.conn_timeout == 60.0);
	assert_true(c->listen.session_idle == 1800.0);
	assert_int_equal(c->listen.stream_buffer, 8 << 20);
	assert_true(c->listen.resume_grace == 5.0);
	cfg_free(c);
}

/* Every "listen" member is read. */
static void test_listen_section(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}},"
		"\"listen\":{\"address\":\"::1\",\"port\":0,\"path\":\"/x/mcp\",\"ssePath\":null,"
		"\"messagesPath\":\"/x/msg\","
		"\"allowedOrigins\":[\"https://app.example\"],\"allowedHosts\":[\"mcp.local\"],"
		"\"maxConnections\":4,\"connectionTimeoutMs\":2000,\"sessionIdleMs\":5000,"
		"\"streamBufferBytes\":65536,\"resumeGraceMs\":0}}");
	assert_true(c->listen.set);
	assert_string_equal(c->listen.address, "::1");
	assert_int_equal(c->listen.port, 0);
	assert_string_equal(c->listen.path, "/x/mcp");
	assert_null(c->listen.sse_path);
	assert_string_equal(c->listen.messages_path, "/x/msg");
	assert_string_equal(c->listen.origins[0], "https://app.example");
	assert_null(c->listen.origins[1]);
	assert_string_equal(c->listen.hosts[0], "mcp.local");
	assert_int_equal(c->listen.max_connections, 4);
	assert_true(c->listen.conn_timeout == 2.0);
	assert_true(c->listen.session_idle == 5.0);
	assert_int_equal(c->listen.stream_buffer, 65536);
	assert_true(c->listen.resume_grace == 0.0);
	cfg_free(c);
}

/* Bad "listen" members are each reported at their pointer. */
static void test_listen_errors(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct cfg *c = cfg_load_string("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}},"
		"\"listen\":{\"address\":\"localhost\",\"port\":70000,\"path\":\"mcp\",\"ssePath\":\"/mcp\","
		"\"messagesPath\":null,\"allowedOrigins\":[1],\"maxConnections\":0,\"resumeGraceMs\":-1,"
		"\"bogus\":1}}", NAME, &e);
	assert_null(c);
	assert_true(cfgt_has_error(&e, NAME ": /listen/address: must be a numeric IPv4 or IPv6 address"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/port: must be an integer from 0 to 65535"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/path: must be a path starting with \"/\""));
	assert_true(cfgt_has_error(&e, NAME ": /listen/messagesPath: must be a path starting with \"/\""));
	assert_true(cfgt_has_error(&e, NAME ": /listen/ssePath: path, ssePath and messagesPath must differ"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/allowedOrigins/0: must be a non-empty string"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/maxConnections: must be an integer from 1 to 65536"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/resumeGraceMs: must be an integer from 0 to 3600000"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/bogus: unknown key"));
	cfg_errors_release(&e);
}

/* --listen's HOST:PORT, [V6]:PORT and PORT forms; bad ones change nothing. */
static void test_listen_parse(void **state)
{
	(void)state;
	struct cfg_listen l = { .address = strdup("127.0.0.1"), .port = 8080 };
	assert_int_equal(cfg_listen_parse(&l, "127.0.0.2:9000"), 0);
	assert_string_equal(l.address, "127.0.0.2");
	assert_int_equal(l.port, 9000);
	assert_int_equal(cfg_listen_parse(&l, "[::1]:0"), 0);
	assert_string_equal(l.address, "::1");
	assert_int_equal(l.port, 0);
	assert_int_equal(cfg_listen_parse(&l, "8081"), 0);
	assert_string_equal(l.address, "::1");
	assert_int_equal(l.port, 8081);
	assert_int_equal(cfg_listen_parse(&l, "localhost:80"), -1);
	assert_int_equal(cfg_listen_parse(&l, "1.2.3.4:99999"), -1);
	assert_int_equal(cfg_listen_parse(&l, "1.2.3.4:"), -1);
	assert_int_equal(cfg_listen_parse(&l, "[::1]8080"), -1);
	assert_int_equal(cfg_listen_parse(&l, "::1:8080"), -1);
	assert_int_equal(cfg_listen_parse(&l, "-1"), -1);
	assert_string_equal(l.address, "::1");
	assert_int_equal(l.port, 8081);
	free(l.address);
}

/* "scope": a child process is session-scoped unless told, an upstream shared. */
static void test_scope_defaults(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"srv\"},"
		"\"b\":{\"url\":\"http://127.0.0.1:1/mcp\"},"
		"\"c\":{\"command\":\"srv\",\"scope\":\"shared\"},"
		"\"d\":{\"url\":\"http://127.0.0.1:1/mcp\",\"scope\":\"session\"}}}");
	assert_int_equal(c->servers[0].scope, CFG_SCOPE_SESSION);
	assert_int_equal(c->servers[1].scope, CFG_SCOPE_SHARED);
	assert_int_equal(c->servers[2].scope, CFG_SCOPE_SHARED);
	assert_int_equal(c->servers[3].scope, CFG_SCOPE_SESSION);
	assert_true(cfg_has_session_scope(c));
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"srv\",\"scope\":\"shared\"},"
		"\"b\":{\"command\":\"srv\",\"enabled\":false}}}");
	assert_false(cfg_has_session_scope(c));  /* the disabled one does not count */
	cfg_free(c);
}

/* A bad "scope" is reported at its key. */
static void test_scope_errors(void **state)
{
	(void)state;
	expect_error("{\"mcpServers\":{\"a/b\":{\"command\":\"srv\",\"scope\":\"process\"}}}",
		NAME ": /mcpServers/a~1b/scope: must be \"session\" or \"shared\"");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"srv\",\"scope\":1}}}",
		NAME ": /mcpServers/a/scope: must be \"session\" or \"shared\"");
}

/* cfg_has_session_scope: any enabled session-scoped entry, a mix included. */
static void test_has_session_scope(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"srv\",\"scope\":\"shared\"},"
		"\"b\":{\"url\":\"http://h/\"},\"off\":{\"command\":\"srv\",\"disabled\":true}}}");
	assert_false(cfg_has_session_scope(c));
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"fs\":{\"command\":\"srv\"},"
		"\"web\":{\"url\":\"http://h/\"},\"x\":{\"command\":\"srv\",\"scope\":\"shared\"}}}");
	assert_true(cfg_has_session_scope(c));
	cfg_free(c);
}

/* The bounds on session-scoped backends: defaults, values, errors. */
static void test_listen_scope_bounds(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}}}");
	assert_int_equal(c->listen.max_scoped_sessions, CFG_DEFAULT_MAX_SCOPED_SESSIONS);
	assert_int_equal(c->listen.max_processes, CFG_DEFAULT_MAX_PROCESSES);
	assert_int_equal(c->listen.max_starts, CFG_DEFAULT_MAX_STARTS);
	cfg_free(c);
	c = load_ok("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}},\"listen\":"
		"{\"maxScopedSessions\":2,\"maxProcesses\":3,\"maxStartsPerSecond\":4}}");
	assert_int_equal(c->listen.max_scoped_sessions, 2);
	assert_int_equal(c->listen.max_processes, 3);
	assert_int_equal(c->listen.max_starts, 4);
	cfg_free(c);
	struct cfg_errors e = { 0 };
	c = cfg_load_string("{\"mcpServers\":{\"s\":{\"command\":\"srv\"}},\"listen\":"
		"{\"maxScopedSessions\":0,\"maxProcesses\":\"9\",\"maxStartsPerSecond\":0}}", NAME, &e);
	assert_null(c);
	assert_true(cfgt_has_error(&e, NAME ": /listen/maxScopedSessions: must be an integer from 1 to 65536"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/maxProcesses: must be an integer from 1 to 65536"));
	assert_true(cfgt_has_error(&e, NAME ": /listen/maxStartsPerSecond: must be an integer from 1 to 10000"));
	cfg_errors_release(&e);
}


/* "redis": its members or a URL, the defaults, and errors by key path. */
static void test_redis_section(void **state)
{
	(void)state;
	struct cfg *c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}");
	assert_false(c->redis.set);
	cfg_free(c);
	setenv("MCPC_TEST_REDIS_PW", "s3cret", 1);
	c = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"host\":\"10.0.0.5\","
		    "\"port\":6380,\"password\":\"${MCPC_TEST_REDIS_PW}\",\"db\":2,\"prefix\":\"p:\","
		    "\"timeoutMs\":100,\"connectTimeoutMs\":2000}}");
	assert_true(c->redis.set);
	assert_string_equal(c->redis.host, "10.0.0.5");
	assert_int_equal(c->redis.port, 6380);
	assert_string_equal(c->redis.password, "s3cret");
	assert_int_equal(c->redis.db, 2);
	assert_string_equal(c->redis.prefix, "p:");
	assert_true(c->redis.timeout == 0.1 && c->redis.connect_timeout == 2.0);
	struct cfg *d = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"url\":"
				"\"redis://:${MCPC_TEST_REDIS_PW}@10.0.0.5:6380/2\",\"prefix\":\"p:\","
				"\"timeoutMs\":100,\"connectTimeoutMs\":2000}}");
	assert_true(cfg_redis_equal(&c->redis, &d->redis));
	cfg_free(d);
	d = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{}}");
	assert_false(cfg_redis_equal(&c->redis, &d->redis));
	assert_string_equal(d->redis.host, "127.0.0.1");
	assert_int_equal(d->redis.port, 6379);
	assert_null(d->redis.password);
	assert_string_equal(d->redis.prefix, "mcp-chain:");
	assert_true(d->redis.timeout == 0.25 && d->redis.connect_timeout == 1.0);
	cfg_free(d);
	cfg_free(c);
	d = load_ok("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"url\":\"redis://cache\"}}");
	assert_string_equal(d->redis.host, "cache");
	assert_int_equal(d->redis.port, 6379);
	cfg_free(d);
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"port\":0}}",
		     NAME ": /redis/port: must be an integer from 1 to 65535");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"timeoutMs\":0}}",
		     NAME ": /redis/timeoutMs: must be an integer from 1 to 60000");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"url\":\"http://x\"}}",
		     NAME ": /redis/url: must be redis://[:PASSWORD@]HOST[:PORT][/DB]");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"url\":\"redis://h:99999\"}}",
		     NAME ": /redis/url: the port must be a number from 1 to 65535");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"url\":\"redis://h\","
		     "\"host\":\"h\"}}", NAME ": /redis/host: not with \"url\", which says it already");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"hots\":\"h\"}}",
		     NAME ": /redis/hots: unknown key (did you mean \"host\"?)");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":\"redis://h\"}",
		     NAME ": /redis: must be an object: {\"host\", \"port\", ...} or {\"url\": "
		     "\"redis://[:PASSWORD@]HOST[:PORT][/DB]\"}");
	expect_error("{\"mcpServers\":{\"a\":{\"command\":\"x\"}},\"redis\":{\"password\":\"${MCPC_NO_SUCH_VAR_X}\"}}",
		     NAME ": /redis/password: environment variable MCPC_NO_SUCH_VAR_X is not set "
		     "(write ${MCPC_NO_SUCH_VAR_X:-default} for a default)");
	unsetenv("MCPC_TEST_REDIS_PW");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_max_open_requests),
		cmocka_unit_test(test_valid_claude_entry),
		cmocka_unit_test(test_flow_entry),
		cmocka_unit_test(test_minimal_entry),
		cmocka_unit_test(test_all_options),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_middleware_pipelines),
		cmocka_unit_test(test_missing_command),
		cmocka_unit_test(test_missing_command_frees_args),
		cmocka_unit_test(test_bad_arg_frees_following_args),
		cmocka_unit_test(test_failed_load_frees_all),
		cmocka_unit_test(test_valid_load_frees_everything),
		cmocka_unit_test(test_expansion),
		cmocka_unit_test(test_expansion_unset),
		cmocka_unit_test(test_cfg_expand),
		cmocka_unit_test(test_expand_file),
		cmocka_unit_test(test_several_errors),
		cmocka_unit_test(test_zero_enabled),
		cmocka_unit_test(test_two_enabled),
		cmocka_unit_test(test_max_message_bounds),
		cmocka_unit_test(test_init_timeout),
		cmocka_unit_test(test_init_join),
		cmocka_unit_test(test_client_stall),
		cmocka_unit_test(test_log_level),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_cfg_error),
		cmocka_unit_test(test_protocol),
		cmocka_unit_test(test_listen_defaults),
		cmocka_unit_test(test_listen_section),
		cmocka_unit_test(test_listen_errors),
		cmocka_unit_test(test_listen_parse),
		cmocka_unit_test(test_scope_defaults),
		cmocka_unit_test(test_scope_errors),
		cmocka_unit_test(test_has_session_scope),
		cmocka_unit_test(test_listen_scope_bounds),
		cmocka_unit_test(test_redis_section),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
