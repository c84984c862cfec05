/*
 * test_list.c - unit tests for src/cli/list.c: `mcp-chain list` against
 * the scripted fake chain (fake_chain.h): which lists are asked for, how
 * tools and prompts are put under their backend, the states, the text and
 * --json output and the exit codes.
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

#define ONE "{\"mcpServers\": {\"fs\": {\"command\": \"/bin/true\"}}}"
#define THREE \
	"{\"mcpServers\": {\"a\": {\"command\": \"/bin/true\"}," \
	" \"b\": {\"command\": \"/bin/true\", \"prefix\": \"bee\"}," \
	" \"c\": {\"command\": \"/bin/true\", \"enabled\": false}}, \"status\": false}"

struct run {
	struct fake f;
	struct capture cap;
	int code;
	json_t *sent;
};

static void run_list(struct run *r, const char *config, const char *script, bool json)
{
	fake_setup(&r->f, config, script);
	struct cli_opts o = { .cmd = "list", .config = r->f.config, .json = json };
	capture_begin(&r->cap, r->f.dir);
	r->code = cli_list(&o);
	capture_end(&r->cap);
	r->sent = fake_received(&r->f);
}

static void run_done(struct run *r)
{
	capture_free(&r->cap);
	json_decref(r->sent);
	fake_cleanup(&r->f);
}

/* The methods of the requests sent, after the handshake, joined by ' '. */
static void methods_sent(struct run *r, char *out, size_t n)
{
	size_t i;
	json_t *m;
	out[0] = 0;
	json_array_foreach(r->sent, i, m) {
		const char *method = json_string_value(json_object_get(m, "method"));
		if (method && json_object_get(m, "id") && strcmp(method, "initialize") != 0)
			snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? " " : "", method);
	}
}

static int setup(void **state)
{
	(void)state;
	log_set_level(LOG_WARN);
	return 0;
}

#define FULL \
	"{\"tools/list\": {\"result\": {\"tools\": [{\"name\": \"fs__echo\", \"description\":" \
	" \"Echo it\\nmore\", \"inputSchema\": {\"type\": \"object\", \"properties\": {\"text\": {}," \
	" \"n\": {}}, \"required\": [\"text\"]}}]}}," \
	" \"prompts/list\": {\"result\": {\"prompts\": [{\"name\": \"fs__greet\", \"arguments\":" \
	" [{\"name\": \"who\", \"required\": true}, {\"name\": \"tone\"}]}]}}," \
	" \"resources/list\": {\"result\": {\"resources\": [{\"uri\": \"file:///a\", \"name\": \"A\"," \
	" \"description\": \"the a\"}]}}," \
	" \"resources/templates/list\": {\"result\": {\"resourceTemplates\": [{\"uriTemplate\":" \
	" \"file:///{x}\", \"name\": \"X\"}]}}}"

/* One backend, no status resource: ready; every list printed under it. */
static void test_one_backend_text(void **state)
{
	(void)state;
	struct run r;
	char methods[300];
	run_list(&r, ONE, FULL, false);
	assert_int_equal(r.code, 0);
	assert_string_equal(r.cap.out,
		"fs (ready)\n"
		"  tools:\n"
		"    fs__echo(text*, n)  - Echo it\n"
		"  prompts:\n"
		"    fs__greet(who*, tone)\n"
		"resources (all backends)\n"
		"  resources:\n"
		"    file:///a  A  - the a\n"
		"  templates:\n"
		"    file:///{x}  X\n");
	assert_string_equal(r.cap.err, "");
	methods_sent(&r, methods, sizeof methods);
	assert_string_equal(methods, "tools/list prompts/list resources/list resources/templates/list "
			    "resources/read");
	json_t *read = json_array_get(r.sent, json_array_size(r.sent) - 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(read, "params"), "uri")),
			    "mcp-chain://status");
	run_done(&r);
}

#define TOOLS_ONLY_INIT \
	"\"initialize\": {\"result\": {\"protocolVersion\": \"2025-06-18\", \"capabilities\":" \
	" {\"tools\": {}}, \"serverInfo\": {\"name\": \"chain\", \"version\": \"9\"}}}"

#define THREE_TOOLS \
	"\"tools/list\": {\"result\": {\"tools\": [{\"name\": \"a__t1\"}, {\"name\": \"bee__t2\"}," \
	" {\"name\": \"zzz\"}, {\"name\": \"a__t3\", \"inputSchema\": {}}]}}"

/* Only what is declared is asked; tools go to the backend by prefix; several: unknown. */
static void test_several_backends(void **state)
{
	(void)state;
	struct run r;
	char methods[300];
	run_list(&r, THREE, "{" TOOLS_ONLY_INIT ", " THREE_TOOLS "}", false);
	assert_int_equal(r.code, 0);
	assert_string_equal(r.cap.out,
		"a (unknown)\n"
		"  tools:\n"
		"    a__t1()\n"
		"    a__t3()\n"
		"b (unknown)\n"
		"  tools:\n"
		"    bee__t2()\n"
		"c (disabled)\n");
	methods_sent(&r, methods, sizeof methods);
	assert_string_equal(methods, "tools/list");  /* no prompts, resources, status */
	run_done(&r);
}

#define STATUS(text) \
	"\"resources/read\": {\"result\": {\"contents\": [{\"uri\": \"mcp-chain://status\", \"text\": " \
	text "}]}}"

/* The status resource gives the states; a failed backend exits 3 and is named. */
static void test_status_json(void **state)
{
	(void)state;
	struct run r;
	run_list(&r, THREE, "{\"prompts/list\": {\"result\": {\"prompts\": []}},"
		" \"resources/templates/list\": {\"result\": {}}, \"tools/list\": {\"result\": {\"tools\": [{\"name\":"
		" \"a__t1\"}, {\"name\": \"bee__t2\"}]}}, "
		STATUS("\"{\\\"backends\\\": {\\\"a\\\": {\\\"state\\\": \\\"ready\\\"}, \\\"b\\\":"
		       " {\\\"state\\\": \\\"failed\\\", \\\"reason\\\": \\\"exited with status 1\\\"}}}\"")
		", \"resources/list\": {\"result\": {\"resources\": [{\"uri\": \"r://1\"}]}}}", true);
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	assert_non_null(strstr(r.cap.err, "mcp-chain: backend \"b\" is failed: exited with status 1\n"));
	json_t *doc = json_loads(r.cap.out, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "server"), "name")),
			    "fake");
	json_t *b = json_object_get(doc, "backends");
	assert_int_equal(json_array_size(b), 3);
	json_t *want = json_loads(
		"[{\"name\": \"a\", \"tools\": [{\"name\": \"a__t1\"}], \"prompts\": [], \"state\": \"ready\"},"
		" {\"name\": \"b\", \"tools\": [{\"name\": \"bee__t2\"}], \"prompts\": [], \"state\": \"failed\","
		"  \"reason\": \"exited with status 1\"},"
		" {\"name\": \"c\", \"tools\": [], \"prompts\": [], \"state\": \"disabled\"}]", 0, NULL);
	assert_true(json_equal(b, want));
	json_decref(want);
	assert_int_equal(json_array_size(json_object_get(doc, "resources")), 1);
	assert_int_equal(json_array_size(json_object_get(doc, "resourceTemplates")), 0);
	json_decref(doc);
	run_done(&r);
}

/* A list that fails: exit 2, named; nothing printed on stdout. */
static void test_list_error(void **state)
{
	(void)state;
	struct run r;
	run_list(&r, ONE, "{\"prompts/list\": {\"error\": {\"code\": -32603, \"message\": \"boom\"}}}", false);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "mcp-chain: prompts: boom\n"));
	assert_string_equal(r.cap.out, "");
	run_done(&r);
}

/* The chain dies: exit 3, with its last stderr lines. */
static void test_chain_dies(void **state)
{
	(void)state;
	struct run r;
	run_list(&r, ONE, "{\"tools/list\": {\"stderr\": \"fs: cannot start\\n\", \"exit\": 1}}", false);
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	assert_non_null(strstr(r.cap.err, "the chain exited with status 1"));
	assert_non_null(strstr(r.cap.err, "fs: cannot start"));
	assert_string_equal(r.cap.out, "");
	run_done(&r);

	run_list(&r, ONE, "{\"start\": {\"exit\": 2}}", false);
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	assert_non_null(strstr(r.cap.err, "before it was ready"));
	run_done(&r);

	/* a configuration that does not load: 2, and no chain */
	struct cli_opts o = { .cmd = "list", .config = "/nonexistent/list.json" };
	char dir[] = "/tmp/cli-test-XXXXXX";
	struct capture cap;
	assert_non_null(mkdtemp(dir));
	capture_begin(&cap, dir);
	int code = cli_list(&o);
	capture_end(&cap);
	assert_int_equal(code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(cap.err, "/nonexistent/list.json"));
	unlink(cap.out_path);
	unlink(cap.err_path);
	rmdir(dir);
	capture_free(&cap);
}

#define LC_INIT \
	"\"initialize\": {\"result\": {\"protocolVersion\": \"2025-06-18\", \"capabilities\":" \
	" {\"tools\": {\"listChanged\": true}, \"prompts\": {}}, \"serverInfo\": {\"name\": \"c\"," \
	" \"version\": \"1\"}}}"
#define TOOLS_CHANGED "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/tools/list_changed\"}"
#define PROMPTS_CHANGED "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/prompts/list_changed\"}"

/* A list_changed once the tools are listed: they are listed again before printing. */
static void test_list_changed_followed(void **state)
{
	(void)state;
	struct run r;
	char methods[300];
	run_list(&r, ONE, "{" LC_INIT ", \"tools/list\": [{\"result\": {\"tools\": [{\"name\":"
		 " \"early\"}]}}, {\"result\": {\"tools\": [{\"name\": \"early\"}, {\"name\": \"late\"}]}}],"
		 " \"prompts/list\": {\"before\": [" TOOLS_CHANGED "], \"result\": {\"prompts\": []}}}",
		 false);
	assert_int_equal(r.code, 0);
	assert_string_equal(r.cap.out, "fs (ready)\n  tools:\n    early()\n    late()\n");
	methods_sent(&r, methods, sizeof methods);
	assert_string_equal(methods, "tools/list prompts/list tools/list");
	run_done(&r);
}

/* One that arrives with the list it names (while it lists): that list again. */
static void test_list_changed_while_listing(void **state)
{
	(void)state;
	struct run r;
	char methods[300];
	run_list(&r, ONE, "{" LC_INIT ", \"tools/list\": {\"result\": {\"tools\": []}},"
		 " \"prompts/list\": [{\"before\": [" PROMPTS_CHANGED "], \"result\": {\"prompts\": []}},"
		 " {\"result\": {\"prompts\": [{\"name\": \"p\"}]}}]}", true);
	assert_int_equal(r.code, 0);
	methods_sent(&r, methods, sizeof methods);
	assert_string_equal(methods, "tools/list prompts/list prompts/list");
	json_t *doc = json_loads(r.cap.out, 0, NULL);
	json_t *prompts = json_object_get(json_array_get(json_object_get(doc, "backends"), 0), "prompts");
	assert_int_equal(json_array_size(prompts), 1);
	json_decref(doc);
	run_done(&r);
}

/* One before the list was asked for (with initialize's reply) changes nothing. */
static void test_list_changed_before_listing(void **state)
{
	(void)state;
	struct run r;
	char methods[300];
	run_list(&r, ONE, "{\"initialize\": {\"before\": [" TOOLS_CHANGED "], \"result\":"
		 " {\"protocolVersion\": \"2025-06-18\", \"capabilities\": {\"tools\": {\"listChanged\":"
		 " true}}, \"serverInfo\": {\"name\": \"c\", \"version\": \"1\"}}},"
		 " \"tools/list\": {\"result\": {\"tools\": [{\"name\": \"t\"}]}}}", false);
	assert_int_equal(r.code, 0);
	methods_sent(&r, methods, sizeof methods);
	assert_string_equal(methods, "tools/list");
	assert_string_equal(r.cap.out, "fs (ready)\n  tools:\n    t()\n");
	run_done(&r);
}

int main(int argc, char **argv)
{
	int rc = fake_chain_main(argc, argv);
	if (rc >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);  /* as cli_main */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_backend_text),
		cmocka_unit_test(test_several_backends),
		cmocka_unit_test(test_status_json),
		cmocka_unit_test(test_list_error),
		cmocka_unit_test(test_chain_dies),
		cmocka_unit_test(test_list_changed_followed),
		cmocka_unit_test(test_list_changed_while_listing),
		cmocka_unit_test(test_list_changed_before_listing),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
