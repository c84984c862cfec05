/*
 * test_conn.c - unit tests for src/cli/conn.c: the shell commands' client
 * connection to a chain they spawn (here the scripted fake chain of
 * fake_chain.h): the handshake, requests and replies, requests and
 * notifications from the chain, paging, and the chain going away.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/cli/cli_int.h"
#include "fake_chain.h"
#include "log.h"

#define CONFIG "{\"mcpServers\": {\"fs\": {\"command\": \"/bin/true\"}}}"

/* What the hooks and reply callbacks saw. */
struct seen {
	int ready_calls;
	bool ready;
	json_t *replies;      /* [{tag, result, error}] in order */
	json_t *notes;        /* [{method, params}] */
	int want;             /* finish after this many replies (0: never) */
	void (*on_up)(struct conn *c, struct seen *s);
	json_int_t forget_id;
};

static struct seen seen;
static bool guard_fired;

static void on_reply(struct conn *c, json_t *result, json_t *error, void *arg)
{
	json_array_append_new(seen.replies, json_pack("{s:s,s:O*,s:O*}", "tag", (const char *)arg,
						      "result", result, "error", error));
	if (seen.want && (int)json_array_size(seen.replies) == seen.want)
		conn_finish(c, 7);
}

static void on_ready(struct conn *c, bool ready, void *arg)
{
	(void)arg;
	seen.ready_calls++;
	seen.ready = ready;
	if (seen.on_up)
		seen.on_up(c, &seen);
}

static void on_notify(struct conn *c, const char *method, json_t *params, void *arg)
{
	(void)c;
	(void)arg;
	json_array_append_new(seen.notes, json_pack("{s:s,s:O?}", "method", method, "params", params));
}

/* Answers sampling with a result and anything else with an error. */
static json_t *on_request(struct conn *c, const char *method, json_t *params, json_t **error,
			  void *arg)
{
	(void)c;
	(void)arg;
	if (strcmp(method, "sampling/createMessage") == 0)
		return json_pack("{s:s,s:O}", "answered", method, "echo", params);
	*error = json_pack("{s:i,s:s}", "code", -32001, "message", "not here");
	return NULL;
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	guard_fired = true;
	ev_break(loop, EVBREAK_ALL);
}

static int setup(void **state)
{
	(void)state;
	memset(&seen, 0, sizeof seen);
	seen.replies = json_array();
	seen.notes = json_array();
	guard_fired = false;
	log_set_level(LOG_WARN);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	json_decref(seen.replies);
	json_decref(seen.notes);
	return 0;
}

/*
 * Starts a connection to the fake chain playing SCRIPT, runs the loop to
 * its end (bounded), with stdout and stderr captured in CAP.
 */
static struct conn *run(struct fake *f, const char *script, bool verbose, bool interactive,
			const struct conn_hooks *hooks, struct capture *cap)
{
	fake_setup(f, CONFIG, script);
	struct cli_opts o = { .cmd = "call", .config = f->config, .verbose = verbose };
	struct conn_hooks h = { .on_ready = on_ready, .on_notify = on_notify };
	capture_begin(cap, f->dir);
	struct conn *c = conn_start(&o, interactive, hooks ? hooks : &h);
	if (c) {
		ev_timer guard;
		ev_timer_init(&guard, on_guard, 10., 0.);
		ev_timer_start(EV_DEFAULT, &guard);
		ev_run(EV_DEFAULT, 0);
		ev_timer_stop(EV_DEFAULT, &guard);
	}
	capture_end(cap);
	assert_non_null(c);
	assert_false(guard_fired);
	return c;
}

static const char *reply_tag(size_t i)
{
	return json_string_value(json_object_get(json_array_get(seen.replies, i), "tag"));
}

static json_t *reply_part(size_t i, const char *part)
{
	return json_object_get(json_array_get(seen.replies, i), part);
}

static void send_two(struct conn *c, struct seen *s)
{
	(void)s;
	assert_int_equal(conn_request(c, "echo", json_pack("{s:i}", "a", 1), on_reply, "echo"), 2);
	assert_int_equal(conn_request(c, "fail", NULL, on_reply, "fail"), 3);
}

/* initialize, initialized, then requests answered with a result and an error. */
static void test_handshake_and_replies(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = send_two;
	seen.want = 2;
	struct conn *c = run(&f, "{\"echo\": {\"result\": {\"ok\": 1}},"
			     " \"fail\": {\"error\": {\"code\": -32602, \"message\": \"bad\"}}}",
			     false, false, NULL, &cap);
	assert_int_equal(seen.ready_calls, 1);
	assert_true(seen.ready);
	assert_int_equal(json_array_size(seen.replies), 2);
	assert_string_equal(reply_tag(0), "echo");
	assert_int_equal(json_integer_value(json_object_get(reply_part(0, "result"), "ok")), 1);
	assert_null(reply_part(0, "error"));
	assert_string_equal(reply_tag(1), "fail");
	assert_null(reply_part(1, "result"));
	assert_string_equal(cli_error_message(reply_part(1, "error")), "bad");
	assert_int_equal(conn_exit_code(c), 7);
	assert_true(conn_finishing(c));
	assert_string_equal(json_string_value(json_object_get(json_object_get(conn_server_info(c),
		"serverInfo"), "name")), "fake");

	json_t *got = fake_received(&f);
	assert_int_equal(json_array_size(got), 4);
	json_t *init = json_array_get(got, 0);
	assert_string_equal(json_string_value(json_object_get(init, "method")), "initialize");
	assert_int_equal(json_integer_value(json_object_get(init, "id")), 1);
	json_t *ip = json_object_get(init, "params");
	assert_string_equal(json_string_value(json_object_get(ip, "protocolVersion")), "2025-06-18");
	assert_string_equal(json_string_value(json_object_get(json_object_get(ip, "clientInfo"), "name")),
			    "mcp-chain-cli");
	assert_int_equal(json_object_size(json_object_get(ip, "capabilities")), 0);  /* not interactive */
	assert_string_equal(json_string_value(json_object_get(json_array_get(got, 1), "method")),
			    "notifications/initialized");
	assert_null(json_object_get(json_array_get(got, 1), "id"));
	json_t *echo = json_array_get(got, 2);
	assert_string_equal(json_string_value(json_object_get(echo, "method")), "echo");
	assert_int_equal(json_integer_value(json_object_get(echo, "id")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(echo, "params"), "a")), 1);
	assert_null(json_object_get(json_array_get(got, 3), "params"));
	json_decref(got);
	assert_string_equal(cap.out, "");
	assert_string_equal(cap.err, "");
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void finish_now(struct conn *c, struct seen *s)
{
	(void)s;
	conn_finish(c, 0);
	conn_finish(c, 9);  /* the first code holds */
}

/* Interactive: elicitation and sampling declared; -v passes the chain's stderr through. */
static void test_interactive_and_verbose(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = finish_now;
	struct conn *c = run(&f, "{\"start\": {\"stderr\": \"hello from the chain\\n\"}}", true, true,
			     NULL, &cap);
	assert_true(seen.ready);
	assert_int_equal(conn_exit_code(c), 0);
	json_t *init = fake_received_method(&f, "initialize");
	json_t *caps = json_object_get(json_object_get(json_array_get(init, 0), "params"), "capabilities");
	assert_non_null(json_object_get(caps, "elicitation"));
	assert_non_null(json_object_get(caps, "sampling"));
	assert_int_equal(json_object_size(caps), 2);
	json_decref(init);
	assert_string_equal(cap.err, "hello from the chain\n");  /* unchanged */
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

/* Without -v the chain's stderr is kept, and shown by conn_show_tail. */
static void test_stderr_tail(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = finish_now;
	struct conn *c = run(&f, "{\"start\": {\"stderr\": \"a secret log line\\n\"}}", false, false,
			     NULL, &cap);
	assert_null(strstr(cap.err, "a secret log line"));
	capture_free(&cap);
	capture_begin(&cap, f.dir);
	conn_show_tail(c);
	capture_end(&cap);
	assert_non_null(strstr(cap.err, "a secret log line"));
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

/* initialize refused: on_ready(false) once, exit code 3, the reason printed. */
static void test_initialize_error(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	struct conn *c = run(&f, "{\"initialize\": {\"error\": {\"code\": -32603, \"message\": \"nope\"}}}",
			     false, false, NULL, &cap);
	assert_int_equal(seen.ready_calls, 1);
	assert_false(seen.ready);
	assert_int_equal(conn_exit_code(c), CLI_EXIT_CHAIN);
	assert_null(conn_server_info(c));
	assert_non_null(strstr(cap.err, "mcp-chain: the chain did not initialize: nope\n"));
	json_t *n = fake_received_method(&f, "notifications/initialized");
	assert_int_equal(json_array_size(n), 0);
	json_decref(n);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void request_after_exit(struct conn *c, struct seen *s)
{
	(void)s;
	assert_int_equal(conn_request(c, "x", json_object(), on_reply, "x"), -1);
	conn_list_all(c, "tools/list", "tools", on_reply, "list");
	conn_notify(c, "notifications/whatever", json_object());  /* dropped, no crash, no leak */
}

/* The chain dies before it is ready: on_ready(false), code 3; nothing more can be sent. */
static void test_dies_before_ready(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = request_after_exit;
	struct conn *c = run(&f, "{\"start\": {\"exit\": 3}}", false, false, NULL, &cap);
	assert_int_equal(seen.ready_calls, 1);
	assert_false(seen.ready);
	assert_int_equal(conn_exit_code(c), CLI_EXIT_CHAIN);
	assert_non_null(strstr(cap.err, "mcp-chain: the chain exited with status 3 before it was ready\n"));
	/* the initialize pending was failed, and the listing says the chain is gone */
	assert_int_equal(json_array_size(seen.replies), 1);
	assert_string_equal(reply_tag(0), "list");
	assert_null(reply_part(0, "result"));
	assert_int_equal(json_integer_value(json_object_get(reply_part(0, "error"), "code")), -32000);
	assert_string_equal(cli_error_message(reply_part(0, "error")), "the chain is gone");
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void send_crash(struct conn *c, struct seen *s)
{
	(void)s;
	conn_request(c, "crash", NULL, on_reply, "crash");
}

/* The chain dies with a request open: it is answered with -32000, code 3. */
static void test_dies_with_pending(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = send_crash;
	struct conn *c = run(&f, "{\"crash\": {\"stderr\": \"dying\\n\", \"exit\": 5}}", false, false,
			     NULL, &cap);
	assert_true(seen.ready);
	assert_int_equal(json_array_size(seen.replies), 1);
	assert_null(reply_part(0, "result"));
	assert_int_equal(json_integer_value(json_object_get(reply_part(0, "error"), "code")), -32000);
	assert_string_equal(cli_error_message(reply_part(0, "error")), "the chain exited with status 5");
	assert_int_equal(conn_exit_code(c), CLI_EXIT_CHAIN);
	assert_non_null(strstr(cap.err, "mcp-chain: the chain exited with status 5\n"));
	assert_null(strstr(cap.err, "before it was ready"));
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void send_hang_and_finish(struct conn *c, struct seen *s)
{
	(void)s;
	conn_request(c, "hang", NULL, on_reply, "hang");
	conn_finish(c, 0);
}

/* Finishing with a request open: it is failed when the chain exits; the code stays. */
static void test_finish_with_pending(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = send_hang_and_finish;
	struct conn *c = run(&f, "{\"hang\": {}}", false, false, NULL, &cap);
	assert_int_equal(json_array_size(seen.replies), 1);
	assert_string_equal(cli_error_message(reply_part(0, "error")), "the chain exited with status 0");
	assert_int_equal(conn_exit_code(c), 0);
	assert_string_equal(cap.err, "");  /* we ended it: no complaint */
	json_t *h = fake_received_method(&f, "hang");
	assert_int_equal(json_array_size(h), 1);  /* sent before stdin closed */
	json_decref(h);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void send_go(struct conn *c, struct seen *s)
{
	(void)s;
	conn_request(c, "go", NULL, on_reply, "go");
}

#define SERVER_TALK \
	"{\"go\": {\"before\": [" \
	"{\"jsonrpc\": \"2.0\", \"id\": \"p1\", \"method\": \"ping\"}," \
	"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"sampling/createMessage\", \"params\": {\"x\": 1}}," \
	"{\"jsonrpc\": \"2.0\", \"id\": 8, \"method\": \"elicitation/create\"}," \
	"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\", \"params\": {\"level\": \"info\"}}," \
	"{\"jsonrpc\": \"2.0\", \"id\": 99, \"result\": {\"not\": \"ours\"}}]," \
	" \"raw\": [\"this is not JSON\"], \"result\": {\"done\": true}}}"

/* The response the fake chain received for ITS request ID (as text). */
static json_t *answer_for(json_t *got, const char *id_json)
{
	json_t *want = json_loads(id_json, JSON_DECODE_ANY, NULL);
	size_t i;
	json_t *m, *found = NULL;
	json_array_foreach(got, i, m)
		if (!json_object_get(m, "method") && json_equal(json_object_get(m, "id"), want))
			found = m;
	json_decref(want);
	return found;
}

/* The chain's requests: ping answered, the others through on_request; notifications passed. */
static void test_server_requests_with_hook(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	struct conn_hooks h = { .on_ready = on_ready, .on_notify = on_notify, .on_request = on_request };
	seen.on_up = send_go;
	seen.want = 1;
	struct conn *c = run(&f, SERVER_TALK, false, false, &h, &cap);
	/* an unknown response id and a line that is not JSON are skipped */
	assert_int_equal(json_array_size(seen.replies), 1);
	assert_string_equal(reply_tag(0), "go");
	assert_true(json_is_true(json_object_get(reply_part(0, "result"), "done")));
	assert_non_null(strstr(cap.err, "this is not JSON"));  /* warned about */
	assert_int_equal(json_array_size(seen.notes), 1);
	json_t *n = json_array_get(seen.notes, 0);
	assert_string_equal(json_string_value(json_object_get(n, "method")), "notifications/message");
	assert_string_equal(json_string_value(json_object_get(json_object_get(n, "params"), "level")), "info");

	json_t *got = fake_received(&f);
	json_t *ping = answer_for(got, "\"p1\"");
	assert_non_null(ping);
	assert_int_equal(json_object_size(json_object_get(ping, "result")), 0);
	json_t *samp = answer_for(got, "7");
	assert_non_null(samp);
	assert_string_equal(json_string_value(json_object_get(json_object_get(samp, "result"), "answered")),
			    "sampling/createMessage");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(samp,
		"result"), "echo"), "x")), 1);
	json_t *eli = answer_for(got, "8");
	assert_non_null(eli);
	assert_null(json_object_get(eli, "result"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(eli, "error"), "code")), -32001);
	assert_string_equal(cli_error_message(json_object_get(eli, "error")), "not here");
	json_decref(got);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

/* Without on_request every request but ping is refused with -32601. */
static void test_server_requests_without_hook(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = send_go;
	seen.want = 1;
	struct conn *c = run(&f, SERVER_TALK, false, false, NULL, &cap);
	json_t *got = fake_received(&f);
	assert_non_null(json_object_get(answer_for(got, "\"p1\""), "result"));
	for (int i = 0; i < 2; i++) {
		json_t *a = answer_for(got, i ? "8" : "7");
		assert_non_null(a);
		assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
				 -32601);
	}
	json_decref(got);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void send_and_forget(struct conn *c, struct seen *s)
{
	(void)s;
	json_int_t a = conn_request(c, "a", NULL, on_reply, "a");
	conn_request(c, "b", NULL, on_reply, "b");
	conn_forget(c, a);
	conn_forget(c, 12345);  /* unknown: nothing */
}

/* A forgotten request's reply is dropped; the others still arrive. */
static void test_forget(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = send_and_forget;
	seen.want = 1;
	struct conn *c = run(&f, "{\"a\": {\"result\": {}}, \"b\": {\"result\": {}}}", false, false, NULL,
			     &cap);
	assert_int_equal(json_array_size(seen.replies), 1);
	assert_string_equal(reply_tag(0), "b");
	json_t *a = fake_received_method(&f, "a");
	assert_int_equal(json_array_size(a), 1);  /* it was sent, and answered */
	json_decref(a);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

static void list_both(struct conn *c, struct seen *s)
{
	(void)s;
	conn_list_all(c, "tools/list", "tools", on_reply, "tools");
	conn_list_all(c, "prompts/list", "prompts", on_reply, "prompts");
}

/* conn_list_all follows nextCursor and concatenates; an error on any page ends it. */
static void test_list_all_pages(void **state)
{
	(void)state;
	struct fake f;
	struct capture cap;
	seen.on_up = list_both;
	seen.want = 2;
	struct conn *c = run(&f,
		"{\"tools/list\": ["
		"{\"result\": {\"tools\": [{\"name\": \"a\"}], \"nextCursor\": \"c1\"}},"
		"{\"result\": {\"tools\": [{\"name\": \"b\"}, {\"name\": \"c\"}], \"nextCursor\": \"c2\"}},"
		"{\"result\": {\"tools\": [{\"name\": \"d\"}]}}],"
		" \"prompts/list\": ["
		"{\"result\": {\"prompts\": [{\"name\": \"p\"}], \"nextCursor\": \"x\"}},"
		"{\"error\": {\"code\": -32603, \"message\": \"page 2 broke\"}}]}",
		false, false, NULL, &cap);
	assert_int_equal(json_array_size(seen.replies), 2);
	json_t *tools = NULL, *perr = NULL;
	for (size_t i = 0; i < 2; i++) {
		if (strcmp(reply_tag(i), "tools") == 0)
			tools = reply_part(i, "result");
		else
			perr = reply_part(i, "error");
	}
	assert_int_equal(json_array_size(tools), 4);
	const char *names = "abcd";
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(json_string_value(json_object_get(json_array_get(tools, i), "name"))[0],
				 names[i]);
	assert_string_equal(cli_error_message(perr), "page 2 broke");
	json_t *sent = fake_received_method(&f, "tools/list");
	assert_int_equal(json_array_size(sent), 3);
	assert_null(json_object_get(json_array_get(sent, 0), "params"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(sent, 1),
		"params"), "cursor")), "c1");
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(sent, 2),
		"params"), "cursor")), "c2");
	json_decref(sent);
	capture_free(&cap);
	conn_free(c);
	fake_cleanup(&f);
}

/* A chain that cannot be started: NULL and the reason printed. */
static void test_start_fails(void **state)
{
	(void)state;
	struct cli_opts o = { .cmd = "list", .config = "/nonexistent.json" };
	struct conn_hooks h = { .on_ready = on_ready };
	char dir[] = "/tmp/cli-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct capture cap;
	/* too many open files: the pipes cannot be made */
	struct rlimit lim, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
	low = lim;
	low.rlim_cur = 64;
	int fds[64];
	int n = 0, fd;
	capture_begin(&cap, dir);
	setrlimit(RLIMIT_NOFILE, &low);
	while (n < 64 && (fd = dup(0)) >= 0)
		fds[n++] = fd;
	struct conn *c = conn_start(&o, false, &h);
	while (n > 0)
		close(fds[--n]);
	setrlimit(RLIMIT_NOFILE, &lim);
	capture_end(&cap);
	assert_null(c);
	assert_non_null(strstr(cap.err, "mcp-chain: cannot start the chain: "));
	assert_int_equal(seen.ready_calls, 0);
	capture_free(&cap);
	char p[200];
	snprintf(p, sizeof p, "%s/stdout", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/stderr", dir);
	unlink(p);
	rmdir(dir);
}

/* cli_error prefixes; cli_error_message falls back. */
static void test_error_helpers(void **state)
{
	(void)state;
	json_t *e = json_pack("{s:i,s:s}", "code", 1, "message", "m");
	json_t *bad = json_pack("{s:i}", "message", 3);
	assert_string_equal(cli_error_message(e), "m");
	assert_string_equal(cli_error_message(bad), "unknown error");
	assert_string_equal(cli_error_message(NULL), "unknown error");
	json_decref(e);
	json_decref(bad);
	char dir[] = "/tmp/cli-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct capture cap;
	capture_begin(&cap, dir);
	cli_error("%s %d", "x", 42);
	capture_end(&cap);
	assert_string_equal(cap.err, "mcp-chain: x 42\n");
	assert_string_equal(cap.out, "");
	capture_free(&cap);
	unlink(cap.out_path);
	unlink(cap.err_path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	int rc = fake_chain_main(argc, argv);
	if (rc >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);  /* as cli_main */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_handshake_and_replies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interactive_and_verbose, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stderr_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_initialize_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dies_before_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dies_with_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_with_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_server_requests_with_hook, setup, teardown),
		cmocka_unit_test_setup_teardown(test_server_requests_without_hook, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_all_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_start_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_helpers, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
