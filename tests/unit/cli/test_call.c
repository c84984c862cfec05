/*
 * test_call.c - unit tests for src/cli/call.c: `call`, `read` and
 * `prompt` against the scripted fake chain (fake_chain.h): what is sent,
 * what is printed where, and the exit codes.
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

#define TOOLS \
	"\"tools/list\": {\"result\": {\"tools\": [{\"name\": \"fs__echo\", \"description\": \"Echo\"," \
	" \"inputSchema\": {\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\"}," \
	" \"n\": {\"type\": \"integer\"}}, \"required\": [\"text\"]}}]}}"

struct run {
	struct fake f;
	struct capture cap;
	int code;
	json_t *sent;   /* what the fake chain received */
};

/* Runs CMD with ARGS (NULL-terminated) against SCRIPT. */
static void run_cmd(struct run *r, const char *script, const char *cmd, bool json, bool verbose,
		    double timeout, const char **args)
{
	char *pos[8];
	int n = 0;
	while (args[n]) {
		pos[n] = (char *)args[n];
		n++;
	}
	fake_setup(&r->f, CONFIG, script);
	struct cli_opts o = { .cmd = cmd, .config = r->f.config, .json = json, .verbose = verbose,
			      .timeout = timeout, .pos = pos, .npos = n };
	capture_begin(&r->cap, r->f.dir);
	r->code = cli_call(&o);
	capture_end(&r->cap);
	r->sent = fake_received(&r->f);
}

static void run_done(struct run *r)
{
	capture_free(&r->cap);
	json_decref(r->sent);
	fake_cleanup(&r->f);
}

/* The first message sent with METHOD, borrowed. */
static json_t *sent_method(struct run *r, const char *method)
{
	size_t i;
	json_t *m;
	json_array_foreach(r->sent, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		if (mm && strcmp(mm, method) == 0)
			return m;
	}
	return NULL;
}

static int setup(void **state)
{
	(void)state;
	log_set_level(LOG_WARN);
	return 0;
}

/* Arguments typed by the schema, the progress token, text to stdout, progress lines. */
static void test_call_text(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=hi", "n=3", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"before\": ["
		"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\", \"params\":"
		" {\"progressToken\": \"$token\", \"progress\": 1, \"total\": 4, \"message\": \"step\"}},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\", \"params\":"
		" {\"progressToken\": \"$token\", \"progress\": 7}},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/progress\", \"params\":"
		" {\"progressToken\": \"other\", \"progress\": 2, \"total\": 4}},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\", \"params\":"
		" {\"level\": \"info\", \"data\": \"quiet\"}}],"
		" \"result\": {\"content\": [{\"type\": \"text\", \"text\": \"hello\"},"
		" {\"type\": \"image\", \"mimeType\": \"image/png\", \"data\": \"AAAA\"},"
		" {\"type\": \"resource\", \"resource\": {\"uri\": \"u\", \"text\": \"inner\\n\"}},"
		" {\"type\": \"text\", \"text\": \"\"}]}}}",
		"call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_OK);
	assert_string_equal(r.cap.out, "hello\ninner\n\n");
	assert_non_null(strstr(r.cap.err, "progress: 1/4 (25%) step\n"));
	assert_non_null(strstr(r.cap.err, "progress: 7\n"));
	assert_null(strstr(r.cap.err, "progress: 2"));   /* not our token */
	assert_null(strstr(r.cap.err, "quiet"));          /* log messages only with -v */
	assert_non_null(strstr(r.cap.err, "(image content, image/png; --json shows it)\n"));
	json_t *call = sent_method(&r, "tools/call");
	assert_non_null(call);
	json_t *p = json_object_get(call, "params");
	assert_string_equal(json_string_value(json_object_get(p, "name")), "fs__echo");
	json_t *want = json_pack("{s:s,s:i}", "text", "hi", "n", 3);
	assert_true(json_equal(json_object_get(p, "arguments"), want));
	json_decref(want);
	assert_string_equal(json_string_value(json_object_get(json_object_get(p, "_meta"), "progressToken")),
			    "mcp-chain-cli");
	run_done(&r);
}

/* "fs.echo" finds fs__echo; isError prints to stderr and exits 1. */
static void test_call_dotted_is_error(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs.echo", "{\"text\": \"x\"}", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"result\": {\"isError\": true, \"content\":"
		" [{\"type\": \"text\", \"text\": \"denied\"}]}}}", "call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_TOOL_ERROR);
	assert_string_equal(r.cap.out, "");
	assert_non_null(strstr(r.cap.err, "denied\n"));
	json_t *p = json_object_get(sent_method(&r, "tools/call"), "params");
	assert_string_equal(json_string_value(json_object_get(p, "name")), "fs__echo");
	assert_string_equal(json_string_value(json_object_get(json_object_get(p, "arguments"), "text")), "x");
	run_done(&r);
}

/* --json prints the whole result; without it, structuredContent stands in for no content. */
static void test_call_json_and_structured(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=a", NULL };
	const char *script = "{" TOOLS ", \"tools/call\": {\"result\": {\"content\": [],"
			     " \"structuredContent\": {\"k\": 1}}}}";
	run_cmd(&r, script, "call", true, false, 0, args);
	assert_int_equal(r.code, 0);
	json_t *got = json_loads(r.cap.out, 0, NULL);
	json_t *want = json_pack("{s:[],s:{s:i}}", "content", "structuredContent", "k", 1);
	assert_true(json_equal(got, want));
	json_decref(got);
	run_done(&r);

	run_cmd(&r, script, "call", false, false, 0, args);
	assert_int_equal(r.code, 0);
	got = json_loads(r.cap.out, 0, NULL);
	assert_true(json_equal(got, json_object_get(want, "structuredContent")));
	json_decref(got);
	json_decref(want);
	run_done(&r);
}

/* A name not listed is still sent; its error exits 2 with a hint. */
static void test_call_unlisted_rpc_error(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "nosuch", "a=1", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"error\": {\"code\": -32602, \"message\":"
		" \"Unknown tool\"}}}", "call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "mcp-chain: Unknown tool\n"));
	assert_non_null(strstr(r.cap.err, "(no tool named \"nosuch\" is listed; mcp-chain list shows them)"));
	json_t *p = json_object_get(sent_method(&r, "tools/call"), "params");
	assert_string_equal(json_string_value(json_object_get(p, "name")), "nosuch");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "arguments"), "a")), 1);
	run_done(&r);

	/* a slip of the name: the listed name nearest it is offered */
	const char *slip[] = { "fs__ehco", "text=a", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"error\": {\"code\": -32602, \"message\":"
		" \"Unknown tool\"}}}", "call", false, false, 0, slip);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "(no tool named \"fs__ehco\" is listed; did you mean "
			       "\"fs__echo\"? mcp-chain list shows them)"));
	run_done(&r);
}

#define LC_INIT \
	"\"initialize\": {\"result\": {\"protocolVersion\": \"2025-06-18\", \"capabilities\":" \
	" {\"tools\": {\"listChanged\": true}}, \"serverInfo\": {\"name\": \"c\", \"version\": \"1\"}}}"

/* A tool registered after initialized (list_changed): found, checked and called. */
static void test_call_after_list_changed(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=hi", NULL };
	run_cmd(&r, "{" LC_INIT ", \"tools/list\": [{\"before\": [{\"jsonrpc\": \"2.0\", \"method\":"
		" \"notifications/tools/list_changed\"}], \"result\": {\"tools\": []}},"
		" {\"result\": {\"tools\": [{\"name\": \"fs__echo\", \"inputSchema\": {\"type\": \"object\","
		" \"properties\": {\"text\": {\"type\": \"string\"}}, \"required\": [\"text\"]}}]}}],"
		" \"tools/call\": {\"result\": {\"content\": [{\"type\": \"text\", \"text\": \"ok\"}]}}}",
		"call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_OK);
	assert_string_equal(r.cap.out, "ok\n");
	json_t *lists = fake_received_method(&r.f, "tools/list");
	assert_int_equal(json_array_size(lists), 2);
	json_decref(lists);
	json_t *p = json_object_get(sent_method(&r, "tools/call"), "params");
	assert_string_equal(json_string_value(json_object_get(json_object_get(p, "arguments"), "text")), "hi");
	run_done(&r);

	/* no list_changed (none declared): the name is sent unlisted at once */
	const char *none[] = { "nosuch", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"error\": {\"code\": -32602, \"message\":"
		" \"Unknown tool\"}}}", "call", false, false, 0, none);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	lists = fake_received_method(&r.f, "tools/list");
	assert_int_equal(json_array_size(lists), 1);
	json_decref(lists);
	run_done(&r);
}

/* Arguments that fail the schema, or do not parse, are not sent: exit 2. */
static void test_call_bad_arguments(void **state)
{
	(void)state;
	struct run r;
	const char *missing[] = { "fs__echo", "n=3", NULL };
	run_cmd(&r, "{" TOOLS "}", "call", false, false, 0, missing);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "mcp-chain: fs__echo: "));
	assert_non_null(strstr(r.cap.err, "text"));
	assert_null(sent_method(&r, "tools/call"));
	run_done(&r);

	const char *typed[] = { "fs__echo", "text=a", "n=notanumber", NULL };
	run_cmd(&r, "{" TOOLS "}", "call", false, false, 0, typed);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "n"));
	assert_null(sent_method(&r, "tools/call"));
	run_done(&r);

	const char *garbled[] = { "fs__echo", "no-equals-sign", NULL };
	run_cmd(&r, "{" TOOLS "}", "call", false, false, 0, garbled);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_null(sent_method(&r, "tools/call"));
	run_done(&r);
}

/* tools/list failing ends the call with 2; the chain dying with 3. */
static void test_call_list_error_and_chain_death(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=a", NULL };
	run_cmd(&r, "{\"tools/list\": {\"error\": {\"code\": -32603, \"message\": \"list broke\"}}}",
		"call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "mcp-chain: tools/list: list broke\n"));
	assert_null(sent_method(&r, "tools/call"));
	run_done(&r);

	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"stderr\": \"backend trouble\\n\", \"exit\": 4}}",
		"call", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_CHAIN);
	assert_non_null(strstr(r.cap.err, "the chain exited with status 4"));
	assert_non_null(strstr(r.cap.err, "backend trouble"));  /* the tail, shown on failure */
	run_done(&r);
}

/* -v: the chain's log messages on stderr, as [level] data. */
static void test_call_verbose_messages(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=a", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {\"before\": [{\"jsonrpc\": \"2.0\", \"method\":"
		" \"notifications/message\", \"params\": {\"level\": \"info\", \"data\": {\"a\": 1}}},"
		"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\", \"params\": {\"data\": 2}}],"
		" \"result\": {\"content\": []}}}", "call", false, true, 0, args);
	assert_int_equal(r.code, 0);
	assert_non_null(strstr(r.cap.err, "[info] {\"a\":1}\n"));
	assert_non_null(strstr(r.cap.err, "[log] 2\n"));
	assert_string_equal(r.cap.out, "");
	run_done(&r);
}

/* Wrong positional arguments: exit 2 before anything starts. */
static void test_usage(void **state)
{
	(void)state;
	struct run r;
	const char *none[] = { NULL };
	run_cmd(&r, "{}", "call", false, false, 0, none);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_string_equal(r.cap.err, "mcp-chain: call needs a NAME\n");
	assert_int_equal(json_array_size(r.sent), 0);
	run_done(&r);
	run_cmd(&r, "{}", "read", false, false, 0, none);
	assert_string_equal(r.cap.err, "mcp-chain: read needs a URI\n");
	run_done(&r);
	const char *two[] = { "a://1", "a://2", NULL };
	run_cmd(&r, "{}", "read", false, false, 0, two);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_string_equal(r.cap.err, "mcp-chain: read takes one URI\n");
	run_done(&r);

	/* a configuration that does not load */
	char *pos[] = { "x" };
	struct cli_opts o = { .cmd = "call", .config = "/nonexistent/mcp-chain.json", .pos = pos, .npos = 1 };
	char dir[] = "/tmp/cli-test-XXXXXX";
	struct capture cap;
	assert_non_null(mkdtemp(dir));
	capture_begin(&cap, dir);
	int code = cli_call(&o);
	capture_end(&cap);
	assert_int_equal(code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(cap.err, "/nonexistent/mcp-chain.json"));
	unlink(cap.out_path);
	unlink(cap.err_path);
	rmdir(dir);
	capture_free(&cap);
}

/* read: text as text, a blob decoded (stdout is not a terminal). */
static void test_read(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "file:///x", NULL };
	run_cmd(&r, "{\"resources/read\": {\"result\": {\"contents\": ["
		"{\"uri\": \"file:///x\", \"text\": \"line\"},"
		"{\"uri\": \"file:///y\", \"blob\": \"aGk=\", \"mimeType\": \"text/plain\"},"
		"{\"uri\": \"file:///z\", \"blob\": \"AP8=\", \"mimeType\": \"image/png\"}]}}}",
		"read", false, false, 0, args);
	assert_int_equal(r.code, 0);
	assert_memory_equal(r.cap.out, "line\nhi\x00\xff", 10);
	assert_null(sent_method(&r, "tools/list"));  /* read asks nothing first */
	json_t *p = json_object_get(sent_method(&r, "resources/read"), "params");
	assert_string_equal(json_string_value(json_object_get(p, "uri")), "file:///x");
	run_done(&r);

	run_cmd(&r, "{\"resources/read\": {\"error\": {\"code\": -32002, \"message\": \"Resource not found\"}}}",
		"read", false, false, 0, args);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "mcp-chain: Resource not found\n"));
	run_done(&r);
}

#define PROMPTS \
	"\"prompts/list\": {\"result\": {\"prompts\": [{\"name\": \"fs__greet\", \"arguments\":" \
	" [{\"name\": \"who\", \"required\": true}, {\"name\": \"tone\", \"description\": \"d\"}]}]}}"

/* prompt: the arguments checked as strings, the messages printed by role. */
static void test_prompt(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__greet", "who=5", NULL };
	run_cmd(&r, "{" PROMPTS ", \"prompts/get\": {\"result\": {\"messages\": ["
		"{\"role\": \"user\", \"content\": {\"type\": \"text\", \"text\": \"Hi 5\"}},"
		"{\"content\": {\"type\": \"text\", \"text\": \"no role\\n\"}}]}}}",
		"prompt", false, false, 0, args);
	assert_int_equal(r.code, 0);
	assert_string_equal(r.cap.out, "[user]\nHi 5\n[?]\nno role\n");
	json_t *p = json_object_get(sent_method(&r, "prompts/get"), "params");
	assert_string_equal(json_string_value(json_object_get(p, "name")), "fs__greet");
	json_t *want = json_pack("{s:s}", "who", "5");   /* a string, as the prompt takes */
	assert_true(json_equal(json_object_get(p, "arguments"), want));
	json_decref(want);
	assert_null(json_object_get(p, "_meta"));
	run_done(&r);

	const char *missing[] = { "fs__greet", "tone=x", NULL };
	run_cmd(&r, "{" PROMPTS "}", "prompt", false, false, 0, missing);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "who"));
	assert_null(sent_method(&r, "prompts/get"));
	run_done(&r);

	const char *unknown[] = { "fs__greet", "who=a", "colour=red", NULL };
	run_cmd(&r, "{" PROMPTS "}", "prompt", false, false, 0, unknown);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "colour"));
	assert_null(sent_method(&r, "prompts/get"));
	run_done(&r);

	const char *nosuch[] = { "nosuch", NULL };
	run_cmd(&r, "{" PROMPTS ", \"prompts/get\": {\"error\": {\"code\": -32602, \"message\": \"no\"}}}",
		"prompt", false, false, 0, nosuch);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "(no prompt named \"nosuch\" is listed"));
	assert_null(strstr(r.cap.err, "did you mean"));
	run_done(&r);

	const char *slip[] = { "fs__gret", "who=a", NULL };
	run_cmd(&r, "{" PROMPTS ", \"prompts/get\": {\"error\": {\"code\": -32602, \"message\": \"no\"}}}",
		"prompt", false, false, 0, slip);
	assert_int_equal(r.code, CLI_EXIT_RPC_ERROR);
	assert_non_null(strstr(r.cap.err, "(no prompt named \"fs__gret\" is listed; did you mean "
			       "\"fs__greet\"?"));
	run_done(&r);
}

/* --timeout: exit 124; the call in flight is cancelled at the chain. */
static void test_timeout_cancels(void **state)
{
	(void)state;
	struct run r;
	const char *args[] = { "fs__echo", "text=a", NULL };
	run_cmd(&r, "{" TOOLS ", \"tools/call\": {}}", "call", false, false, 1.0, args);
	assert_int_equal(r.code, CLI_EXIT_TIMEOUT);
	assert_non_null(strstr(r.cap.err, "mcp-chain: timed out after 1 s"));
	json_t *call = sent_method(&r, "tools/call");
	json_t *cancel = sent_method(&r, "notifications/cancelled");
	if (call) {  /* the call was in flight (it is, unless the start took a second) */
		assert_non_null(strstr(r.cap.err, ": the request is cancelled"));
		assert_non_null(cancel);
		json_t *p = json_object_get(cancel, "params");
		assert_true(json_equal(json_object_get(p, "requestId"), json_object_get(call, "id")));
		assert_string_equal(json_string_value(json_object_get(p, "reason")), "timed out");
	} else {
		assert_null(cancel);
	}
	run_done(&r);
}

/* Polls the fake chain's log; sends us SIGINT once the call reached it. */
static void on_poll(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fake *f = w->data;
	(void)revents;
	json_t *calls = fake_received_method(f, "tools/call");
	if (json_array_size(calls) > 0) {
		ev_timer_stop(loop, w);
		kill(getpid(), SIGINT);
	}
	json_decref(calls);
}

/* Ctrl-C: exit 130; the call in flight is cancelled at the chain. */
static void test_interrupt_cancels(void **state)
{
	(void)state;
	struct run r;
	char *pos[] = { "fs__echo", "text=a" };
	fake_setup(&r.f, CONFIG, "{" TOOLS ", \"tools/call\": {}}");
	struct cli_opts o = { .cmd = "call", .config = r.f.config, .pos = pos, .npos = 2 };
	ev_timer poll;
	ev_timer_init(&poll, on_poll, 0.01, 0.01);
	poll.data = &r.f;
	ev_timer_start(EV_DEFAULT, &poll);
	capture_begin(&r.cap, r.f.dir);
	r.code = cli_call(&o);
	capture_end(&r.cap);
	ev_timer_stop(EV_DEFAULT, &poll);
	r.sent = fake_received(&r.f);
	assert_int_equal(r.code, CLI_EXIT_INTERRUPTED);
	assert_non_null(strstr(r.cap.err, "mcp-chain: interrupted: the request is cancelled\n"));
	json_t *call = sent_method(&r, "tools/call");
	json_t *p = json_object_get(sent_method(&r, "notifications/cancelled"), "params");
	assert_non_null(p);
	assert_true(json_equal(json_object_get(p, "requestId"), json_object_get(call, "id")));
	assert_string_equal(json_string_value(json_object_get(p, "reason")), "interrupted (Ctrl-C)");
	run_done(&r);
}

int main(int argc, char **argv)
{
	int rc = fake_chain_main(argc, argv);
	if (rc >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);  /* as cli_main */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_text),
		cmocka_unit_test(test_call_dotted_is_error),
		cmocka_unit_test(test_call_json_and_structured),
		cmocka_unit_test(test_call_unlisted_rpc_error),
		cmocka_unit_test(test_call_after_list_changed),
		cmocka_unit_test(test_call_bad_arguments),
		cmocka_unit_test(test_call_list_error_and_chain_death),
		cmocka_unit_test(test_call_verbose_messages),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_prompt),
		cmocka_unit_test(test_timeout_cancels),
		cmocka_unit_test(test_interrupt_cancels),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
