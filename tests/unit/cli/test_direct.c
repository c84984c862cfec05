/*
 * test_direct.c - unit tests for src/cli/direct.c: `mcp-chain --direct`,
 * a script's JSON-RPC on stdin (here a pipe) answered on stdout (a file),
 * through the scripted fake chain (fake_chain.h).
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

#define TOOLS_RESULT \
	"{\"result\": {\"tools\": [{\"name\": \"fs__echo\", \"description\": \"Echo\"," \
	" \"inputSchema\": {\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\"}," \
	" \"n\": {\"type\": \"integer\"}}, \"required\": [\"text\"]}}]}}"

struct run {
	struct fake f;
	struct capture cap;
	int code;
	json_t *out;    /* the lines written to stdout, parsed */
	json_t *sent;   /* what the fake chain received */
};

static void run_direct(struct run *r, const char *script, const char *input)
{
	fake_setup(&r->f, CONFIG, script);
	struct cli_opts o = { .cmd = "direct", .config = r->f.config };
	int saved = stdin_feed(input);
	capture_begin(&r->cap, r->f.dir);
	r->code = cli_direct(&o);
	capture_end(&r->cap);
	stdin_restore(saved);
	r->sent = fake_received(&r->f);
	r->out = json_array();
	for (char *line = r->cap.out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		json_t *m = json_loadb(line, (size_t)(nl - line), 0, NULL);
		assert_non_null(m);
		json_array_append_new(r->out, m);
	}
}

static void run_done(struct run *r)
{
	capture_free(&r->cap);
	json_decref(r->sent);
	json_decref(r->out);
	fake_cleanup(&r->f);
}

/* The index of the output line answering ID (JSON text), or -1. */
static int answer_at(json_t *lines, const char *id_json)
{
	json_t *id = json_loads(id_json, JSON_DECODE_ANY, NULL);
	size_t i;
	json_t *m;
	int at = -1;
	json_array_foreach(lines, i, m)
		if (!json_object_get(m, "method") && json_equal(json_object_get(m, "id"), id))
			at = (int)i;
	json_decref(id);
	return at;
}

static json_t *answer(json_t *lines, const char *id_json)
{
	int at = answer_at(lines, id_json);
	return at < 0 ? NULL : json_array_get(lines, (size_t)at);
}

static int error_code(json_t *reply)
{
	return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static int setup(void **state)
{
	(void)state;
	log_set_level(LOG_WARN);
	return 0;
}

#define SCRIPT \
	"{\"tools/list\": " TOOLS_RESULT "," \
	" \"tools/call\": [{\"before\": [{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\"," \
	"  \"params\": {\"progressToken\": \"$token\", \"progress\": 1}}," \
	"  {\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\"," \
	"  \"params\": {\"progressToken\": \"stranger\", \"progress\": 1}}]," \
	"  \"result\": {\"content\": [{\"type\": \"text\", \"text\": \"echoed\"}]}}, {}]," \
	" \"ping\": {\"before\": [{\"jsonrpc\": \"2.0\", \"method\": \"notifications/tools/list_changed\"}]," \
	"  \"result\": {}}}"

#define INPUT \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"fs.echo\",\"params\":{\"text\":\"hi\"}}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"rpc.discover\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"nosuch\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"fs__echo\",\"params\":[1]}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"fs__echo\",\"params\":{}}\n" \
	"this is not JSON\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"initialize\",\"params\":{}}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"fs__echo\",\"params\":{\"text\":\"slow\"}}\n" \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9,\"reason\":\"enough\"}}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n" \
	"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}\n"

/* Every kind of line a script may send, answered in the script's terms. */
static void test_script_session(void **state)
{
	(void)state;
	struct run r;
	run_direct(&r, SCRIPT, INPUT);
	assert_int_equal(r.code, CLI_EXIT_OK);

	/* a tool called by name ('.' for the separator), progress mapped to the script's id */
	json_t *a1 = answer(r.out, "1");
	assert_non_null(a1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
		json_object_get(a1, "result"), "content"), 0), "text")), "echoed");
	int progress_at = -1, list_changed = 0;
	size_t i;
	json_t *m;
	json_array_foreach(r.out, i, m) {
		const char *method = json_string_value(json_object_get(m, "method"));
		if (method && strcmp(method, "notifications/progress") == 0) {
			assert_int_equal(progress_at, -1);   /* the stranger's is not passed */
			progress_at = (int)i;
			assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "params"),
									 "progressToken")), 1);
		}
		if (method && strcmp(method, "notifications/tools/list_changed") == 0)
			list_changed++;
	}
	assert_true(progress_at >= 0 && progress_at < answer_at(r.out, "1"));
	assert_int_equal(list_changed, 1);

	/* rpc.discover: the tools as methods */
	json_t *doc = json_object_get(answer(r.out, "\"two\""), "result");
	assert_string_equal(json_string_value(json_object_get(doc, "openrpc")), "1.3.2");
	json_t *meth = json_array_get(json_object_get(doc, "methods"), 0);
	assert_int_equal(json_array_size(json_object_get(doc, "methods")), 1);
	assert_string_equal(json_string_value(json_object_get(meth, "name")), "fs__echo");
	assert_string_equal(json_string_value(json_object_get(meth, "description")), "Echo");
	json_t *want = json_loads("[{\"name\": \"text\", \"required\": true, \"schema\": {\"type\": \"string\"}},"
				  " {\"name\": \"n\", \"required\": false, \"schema\": {\"type\": \"integer\"}}]",
				  0, NULL);
	assert_true(json_equal(json_object_get(meth, "params"), want));
	json_decref(want);

	/* MCP methods pass as they are */
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
		json_object_get(answer(r.out, "3"), "result"), "tools"), 0), "name")), "fs__echo");
	assert_non_null(json_object_get(answer(r.out, "11"), "result"));
	/* errors */
	assert_int_equal(error_code(answer(r.out, "4")), -32601);
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(answer(r.out, "4"),
		"error"), "message")), "Method not found: nosuch"));
	assert_int_equal(error_code(answer(r.out, "5")), -32602);
	json_t *a6 = answer(r.out, "6");
	assert_int_equal(error_code(a6), -32602);
	assert_non_null(json_object_get(json_object_get(json_object_get(a6, "error"), "data"), "inputSchema"));
	assert_int_equal(error_code(answer(r.out, "null")), -32700);
	/* initialize: the chain's own answer */
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(
		answer(r.out, "8"), "result"), "serverInfo"), "name")), "fake");
	/* the cancelled request is not answered */
	assert_null(answer(r.out, "9"));

	/* at the chain */
	json_t *calls = fake_received_method(&r.f, "tools/call");
	assert_int_equal(json_array_size(calls), 2);
	json_t *p1 = json_object_get(json_array_get(calls, 0), "params");
	assert_string_equal(json_string_value(json_object_get(p1, "name")), "fs__echo");
	assert_string_equal(json_string_value(json_object_get(json_object_get(p1, "arguments"), "text")), "hi");
	assert_string_equal(json_string_value(json_object_get(json_object_get(p1, "_meta"), "progressToken")),
			    "direct-1");
	json_t *cancels = fake_received_method(&r.f, "notifications/cancelled");
	assert_int_equal(json_array_size(cancels), 1);
	json_t *cp = json_object_get(json_array_get(cancels, 0), "params");
	assert_true(json_equal(json_object_get(cp, "requestId"), json_object_get(json_array_get(calls, 1), "id")));
	assert_string_equal(json_string_value(json_object_get(cp, "reason")), "enough");
	json_t *roots = fake_received_method(&r.f, "notifications/roots/list_changed");
	assert_int_equal(json_array_size(roots), 1);
	json_t *inits = fake_received_method(&r.f, "notifications/initialized");
	assert_int_equal(json_array_size(inits), 1);   /* ours only */
	json_t *lists = fake_received_method(&r.f, "tools/list");
	assert_int_equal(json_array_size(lists), 3);   /* at start, the script's, after list_changed */
	json_decref(calls);
	json_decref(cancels);
	json_decref(roots);
	json_decref(inits);
	json_decref(lists);
	run_done(&r);
}

/* The chain does not come up: requests held are answered -32000; exit 3. */
static void test_chain_not_ready(void **state)
{
	(void)state;
	struct run r;
	run_direct(&r, "{\"initialize\": {\"error\": {\"code\": -32603, \"message\": \"no backends\"}}}",
		   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n"
		   "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n");
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	assert_int_equal(json_array_size(r.out), 1);
	json_t *a = answer(r.out, "1");
	assert_int_equal(error_code(a), -32000);
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "error"), "message")),
			    "the chain did not come up (see stderr)");
	assert_non_null(strstr(r.cap.err, "the chain did not initialize: no backends"));
	run_done(&r);
}

/* The chain dies with a request open: it is answered with an error; exit 3. */
static void test_chain_dies(void **state)
{
	(void)state;
	struct run r;
	run_direct(&r, "{\"tools/list\": " TOOLS_RESULT ", \"tools/call\": {\"exit\": 6}}",
		   "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"fs__echo\",\"params\":{\"text\":\"a\"}}\n");
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	json_t *a = answer(r.out, "\"x\"");
	assert_int_equal(error_code(a), -32000);
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "error"), "message")),
			    "the chain exited with status 6");
	run_done(&r);
}

int main(int argc, char **argv)
{
	int rc = fake_chain_main(argc, argv);
	if (rc >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);  /* as cli_main */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_script_session),
		cmocka_unit_test(test_chain_not_ready),
		cmocka_unit_test(test_chain_dies),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
