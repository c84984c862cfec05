/*
 * test_be_stdio.c - unit tests for src/external/be_stdio.c, the stdio
 * transport of a backend: a child spawned from argv whose stdout is framed
 * into lines (each JSON object handed on, a batch split, anything else
 * logged and skipped, an oversized response answered with an error), whose
 * stdin takes our messages (flow control at the writer's high-water mark),
 * and whose end is classified: a clean exit unasked is "ended", any other
 * exit, a signal or a stdout closed for good is "down", an exit while
 * stopping is "gone"; a command that does not exist cannot start.
 *
 * The backends are real (backend.c with be_stdio_ops); the children are
 * small /bin/sh scripts (a test tool only: the product never runs a
 * shell). A fake ready client in the same chain receives what the backend
 * sends, since a backend's notifications go to every ready client. Every
 * wait runs libev's default loop with a bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "ext_test.h"
#include "log.h"
#include "peer.h"
#include "rpc.h"
#include "writer.h"

static struct chain *CH;
static struct cfg *C;
static struct backend *BE;
static char dir[64];
static char log_path[96];

static struct ext_client CL;  /* what the backend sends */

/* ---- backend events ---- */

static enum backend_event events[16];
static int nevents;

static void on_event(struct backend *b, enum backend_event ev, void *arg)
{
	(void)b;
	(void)arg;
	if (nevents < 16)
		events[nevents] = ev;
	nevents++;
}

static bool not_running(const void *arg)
{
	(void)arg;
	return !backend_running(BE);
}

static bool congested_is(const void *arg)
{
	return backend_peer(BE)->congested == *(const bool *)arg;
}

/* ---- configuration ---- */

/* Loads a configuration with one stdio entry "s" running /bin/sh SCRIPT (a file)
 * with restart off, plus the top-level members of EXTRA (JSON text or NULL),
 * and makes its backend (not started). */
static struct backend *make_sh(const char *script, const char *extra)
{
	char path[128];
	snprintf(path, sizeof path, "%s/script.sh", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(script, f);
	fclose(f);
	json_error_t e;
	json_t *top = extra ? json_loads(extra, 0, &e) : json_object();
	assert_non_null(top);
	json_object_set_new(top, "mcpServers", json_pack("{s:{s:s, s:[s], s:b}}", "s",
		"command", "/bin/sh", "args", path, "restart", 0));
	char *text = json_dumps(top, 0);
	json_decref(top);
	C = ext_cfg(text);
	free(text);
	BE = backend_new(CH, C, &C->servers[0], on_event, NULL);
	assert_non_null(BE);
	return BE;
}

/* What was logged since setup. */
static const char *logged(void)
{
	static char buf[16384];
	int fd = open(log_path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* The "n" param of the client's message I. */
static json_int_t got_n(size_t i)
{
	json_t *m = json_array_get(CL.got, i);
	assert_non_null(m);
	return json_integer_value(json_object_get(json_object_get(m, "params"), "n"));
}

static json_t *note(int n)
{
	return json_pack("{s:s, s:s, s:{s:i}}", "jsonrpc", "2.0", "method",
			 "notifications/message", "params", "n", n);
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	ev_now_update(EV_DEFAULT);
	CH = chain_new();
	ext_client_init(&CL, CH);
	nevents = 0;
	snprintf(dir, sizeof dir, "/tmp/test_be_stdio.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(log_path, sizeof log_path, "%s/log", dir);
	assert_int_equal(log_open_file(log_path), 0);
	log_set_level(getenv("DBG") ? LOG_DEBUG : LOG_INFO);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (BE) {
		if (backend_running(BE)) {  /* reap it: no zombie, no stray child */
			backend_signal(BE, SIGKILL);
			ext_run_until(not_running, NULL, 2.0);
		}
		backend_free(BE);
		BE = NULL;
	}
	cfg_free(C);
	C = NULL;
	ext_client_release(&CL);
	chain_free(CH);
	CH = NULL;
	if (getenv("DBG"))
		fputs(logged(), stderr);
	log_open_file("/dev/null");
	unlink(log_path);
	char path[128];
	snprintf(path, sizeof path, "%s/script.sh", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}

#define NOTE(n) "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"n\":" #n "}}"

/* ---- stdout framing ---- */

/*
 * Every line that is a JSON object is handed on, in order, whether it came
 * in one write or in pieces; a batch is split into its messages; CRLF ends
 * a line too; a line that is not JSON is skipped with a warning that names
 * the backend (JSON that is not a message is the chain's to refuse); a last
 * line without "\n" before the exit still counts.
 *
 * FIXED BUG (be_stdio.c, on_line): every line that parsed as JSON went to
 * backend_deliver_line, which hands it to the chain as one message, so a
 * batch from a handshake-era server was dropped as "invalid message"
 * (its responses lost: their requests waited for the timeout) and the
 * split below it was never reached.
 */
static void test_stdout_lines(void **state)
{
	(void)state;
	make_sh("printf '%s\\n' '" NOTE(1) "';"
		"printf 'not json at all\\n';"
		"printf '42\\n';"
		"printf '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/mes';"
		"printf 'sage\",\"params\":{\"n\":2}}\\n\\n';"
		"printf '[" NOTE(3) "," NOTE(4) "]\\n';"
		"printf '" NOTE(5) "\\r\\n';"
		"printf '" NOTE(6) "'", NULL);
	assert_int_equal(backend_start(BE), 0);
	assert_true(backend_running(BE));
	ext_wait_got(&CL, 6, 2.0);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(got_n(i), (json_int_t)i + 1);
	ext_wait_state(BE, BACKEND_ENDED, 2.0);  /* exit status 0, unasked */
	assert_int_equal(json_array_size(CL.got), 6);
	const char *log = logged();
	assert_non_null(strstr(log, "s: skipped a line on stdout that is not a JSON-RPC "
				    "message: not json at all"));
	assert_non_null(strstr(log, "s: invalid message dropped: a message must be a JSON object"));
}

/* A skipped line is quoted up to 200 bytes, then "...". */
static void test_stdout_garbage_quote_cut(void **state)
{
	(void)state;
	char script[512];
	/* 250 'x' then a newline */
	snprintf(script, sizeof script,
		 "i=0; while [ $i -lt 250 ]; do printf x; i=$((i+1)); done; printf '\\n';"
		 "printf '%%s\\n' '" NOTE(1) "'");
	make_sh(script, NULL);
	assert_int_equal(backend_start(BE), 0);
	ext_wait_got(&CL, 1, 2.0);
	char want[256];
	memset(want, 'x', 200);
	strcpy(want + 200, "...\n");
	const char *log = logged();
	const char *at = strstr(log, "message: xxx");
	assert_non_null(at);
	assert_non_null(strstr(at, want));
	assert_null(strstr(log, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			       "x"));  /* not 201 of them */
}

/* An initialize callback: keeps a copy of the answer in ARG (an array). */
static void on_init(void *arg, json_t *resp)
{
	json_array_append_new(arg, json_deep_copy(resp));
}

/*
 * A line over maxMessageBytes is dropped with a warning; when it is a
 * response whose id can be read, the request it answers gets an error
 * instead (here our own initialize); an oversized request or notification
 * is only dropped, and the lines after it still flow.
 */
static void test_stdout_oversize(void **state)
{
	(void)state;
	/* reads initialize, answers it with 5000 bytes of padding */
	make_sh("read l; id=${l#*\\\"id\\\":}; id=${id%%[,\\}]*};"
		"pad=$(i=0; while [ $i -lt 100 ]; do printf 0123456789012345678901234567890123456789"
		"0123456789; i=$((i+1)); done);"
		"printf '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"p\":\"%s\"}}\\n' $pad;"
		"printf '{\"jsonrpc\":\"2.0\",\"method\":\"y\",\"params\":{\"p\":\"%s\"}}\\n' $pad;"
		"printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"p\":\"%s\"}}\\n' $id $pad;"
		"printf '%s\\n' '" NOTE(7) "'; exec cat >/dev/null",
		"{\"maxMessageBytes\":4096}");
	assert_int_equal(backend_start(BE), 0);
	json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", "2025-06-18",
				   "capabilities", "clientInfo", "name", "c", "version", "1");
	struct peer *p = backend_peer(BE);
	json_t *answers = json_array();
	assert_int_equal(p->ops->initialize(p, params, on_init, answers), 0);
	json_decref(params);
	ext_wait_got(&CL, 1, 2.0);
	assert_int_equal(json_array_size(CL.got), 1);
	assert_int_equal(got_n(0), 7);
	assert_int_equal(json_array_size(answers), 1);
	json_t *err = json_object_get(json_array_get(answers, 0), "error");
	assert_non_null(err);
	assert_int_equal(json_integer_value(json_object_get(err, "code")), RPC_INTERNAL_ERROR);
	assert_non_null(strstr(json_string_value(json_object_get(err, "message")),
			       "exceeds maxMessageBytes (4096)"));
	assert_int_equal(backend_state(BE), BACKEND_STARTED);  /* the handshake failed */
	const char *log = logged();
	int drops = 0;
	for (const char *at = log; (at = strstr(at, "s: dropped a ")); at++)
		drops++;
	assert_int_equal(drops, 3);
	assert_non_null(strstr(log, "larger than maxMessageBytes (4096)"));
	json_decref(answers);
}

/* ---- stdin ---- */

/* What we send reaches the child's stdin as one line each, tree or raw
 * pieces alike (cat echoes them back as its own notifications). */
static void test_send_round_trip(void **state)
{
	(void)state;
	make_sh("exec cat", NULL);
	json_t *n1 = note(1);
	assert_int_equal(be_stdio_ops.send(BE, n1), -1);  /* not started: nowhere to go */
	assert_false(be_stdio_ops.running(BE));
	assert_int_equal(backend_start(BE), 0);
	assert_true(be_stdio_ops.running(BE));
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	assert_true(backend_stats(BE)->started_at > 0);
	assert_int_equal(backend_send_transport(BE, n1), 0);
	json_decref(n1);
	const char *a = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",";
	const char *b = "\"params\":{\"n\":2}}";
	struct iovec iov[2] = { { (void *)a, strlen(a) }, { (void *)b, strlen(b) } };
	assert_int_equal(be_stdio_ops.send_raw(BE, iov, 2), 0);
	ext_wait_got(&CL, 2, 2.0);
	assert_int_equal(got_n(0), 1);
	assert_int_equal(got_n(1), 2);
	assert_false(backend_peer(BE)->congested);
	/* stopping closes its stdin: cat ends, and that end was asked for */
	backend_stop(BE, 1.0);
	assert_int_equal(backend_state(BE), BACKEND_STOPPING);
	json_t *n3 = note(3);
	assert_int_equal(backend_send_transport(BE, n3), -1);  /* stdin is closed */
	json_decref(n3);
	ext_wait_state(BE, BACKEND_GONE, 2.0);
	assert_int_equal(nevents, 1);
	assert_int_equal(events[0], BACKEND_EV_GONE);
	assert_string_equal(backend_peer(BE)->why_down, "exited with status 0");
	assert_false(backend_running(BE));
	assert_int_equal(json_array_size(CL.got), 2);
}

/* A child that does not read: over the writer's high-water mark the peer
 * is congested; once the child drains its stdin, it is not any more. */
static void test_stdin_congestion(void **state)
{
	(void)state;
	make_sh("kill -STOP $$; exec cat >/dev/null", NULL);
	assert_int_equal(backend_start(BE), 0);
	size_t big = WRITER_HIGH_WATER + (1 << 20);
	char *s = malloc(big);
	assert_non_null(s);
	memset(s, 'a', big - 1);
	s[big - 1] = '\0';
	json_t *m = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method", "x",
			      "params", "s", s);
	free(s);
	assert_false(backend_peer(BE)->congested);
	assert_int_equal(backend_send_transport(BE, m), 0);
	json_decref(m);
	assert_true(backend_peer(BE)->congested);
	backend_signal(BE, SIGCONT);
	bool want = false;
	if (!ext_run_until(congested_is, &want, 5.0))
		fail_msg("still congested");
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
}

/* ---- stdout flow control ---- */

/* While paused nothing is read from stdout; resumed, it all comes. */
static void test_pause_stdout(void **state)
{
	(void)state;
	make_sh("printf '%s\\n' '" NOTE(1) "' '" NOTE(2) "'; exec cat >/dev/null", NULL);
	assert_int_equal(backend_start(BE), 0);
	be_stdio_ops.pause(BE, true);
	ext_run_until(NULL, NULL, 0.1);
	assert_int_equal(json_array_size(CL.got), 0);
	be_stdio_ops.pause(BE, false);
	ext_wait_got(&CL, 2, 2.0);
	assert_int_equal(got_n(0), 1);
	assert_int_equal(got_n(1), 2);
}

/* ---- ends ---- */

/*
 * The child's last words are read when it is reaped, even when its exit
 * is seen before its stdout (here: stdout paused until then), and a last
 * line without "\n" among them counts as at EOF.
 *
 * FIXED BUG (be_stdio.c, on_proc_exit): the last read after the exit
 * stopped after one short read, and close_stdout threw away a final line
 * without "\n" still in the framer: the message was lost whenever SIGCHLD
 * was handled before stdout's EOF (about one run in three of
 * test_stdout_lines).
 */
static void test_last_words_at_exit(void **state)
{
	(void)state;
	make_sh("printf '%s\\n' '" NOTE(1) "'; printf '%s' '" NOTE(2) "'; exit 0", NULL);
	assert_int_equal(backend_start(BE), 0);
	be_stdio_ops.pause(BE, true);
	ext_wait_state(BE, BACKEND_ENDED, 2.0);
	assert_int_equal(json_array_size(CL.got), 2);
	assert_int_equal(got_n(0), 1);
	assert_int_equal(got_n(1), 2);
	be_stdio_ops.pause(BE, false);  /* stdout is closed: nothing to resume */
	ext_run_until(NULL, NULL, 0.02);
	assert_int_equal(json_array_size(CL.got), 2);
}

/* A non-zero exit unasked is a down named by its status; below info level
 * (stderr not relayed line by line) its last stderr lines are logged with
 * the backend's name; its last stdout words count. */
static void test_exit_status_down(void **state)
{
	(void)state;
	make_sh("echo first >&2; echo second >&2; printf '%s\\n' '" NOTE(1) "'; exit 3", NULL);
	log_set_level(LOG_WARN);  /* stderr lines are not relayed as they come */
	assert_int_equal(backend_start(BE), 0);
	ext_wait_state(BE, BACKEND_FAILED, 2.0);  /* "restart": false */
	assert_string_equal(backend_peer(BE)->why_down, "exited with status 3");
	assert_int_equal(events[0], BACKEND_EV_DOWN);
	assert_int_equal(json_array_size(CL.got), 1);
	assert_false(backend_running(BE));
	const char *log = logged();
	assert_null(strstr(log, "[s] first"));
	assert_non_null(strstr(log, "s: stderr: first"));  /* the tail, on a bad end */
	assert_non_null(strstr(log, "s: stderr: second"));
}

/* A clean exit unasked: ended, and no stderr tail is logged (even below info). */
static void test_exit_zero_ended(void **state)
{
	(void)state;
	make_sh("echo bye >&2; exit 0", NULL);
	log_set_level(LOG_WARN);
	assert_int_equal(backend_start(BE), 0);
	ext_wait_state(BE, BACKEND_ENDED, 2.0);
	assert_string_equal(backend_peer(BE)->why_down, "exited with status 0");
	assert_int_equal(nevents, 1);
	assert_int_equal(events[0], BACKEND_EV_ENDED);
	assert_null(strstr(logged(), "stderr: bye"));
}

/* A signal passed on: the child dies of it, a down named by the signal. */
static void test_signal_down(void **state)
{
	(void)state;
	make_sh("exec sleep 30", NULL);
	assert_int_equal(backend_start(BE), 0);
	backend_signal(BE, SIGTERM);
	ext_wait_state(BE, BACKEND_FAILED, 2.0);
	assert_string_equal(backend_peer(BE)->why_down, "killed by signal 15 (Terminated)");
}

/* stdout closed while the child runs on: after a second it is down for
 * that, and the child is stopped (its stdin closed). */
static void test_stdout_closed_child_runs(void **state)
{
	(void)state;
	make_sh("exec >&-; read x; exit 5", NULL);
	assert_int_equal(backend_start(BE), 0);
	double t0 = ev_time();
	ext_wait_state(BE, BACKEND_FAILED, 3.0);
	double took = ev_time() - t0;
	assert_true(took >= 0.9);
	assert_string_equal(backend_peer(BE)->why_down, "closed its stdout");
	assert_int_equal(nevents, 2);  /* down, failed: reported once */
	if (!ext_run_until(not_running, NULL, 2.0))  /* its stdin closed: read ends */
		fail_msg("the child still runs");
	assert_string_equal(backend_peer(BE)->why_down, "closed its stdout");
	assert_int_equal(nevents, 2);
}

/* Stopping a child that ignores its stdin and SIGTERM: SIGKILL after
 * twice the grace; that end was asked for: gone. */
static void test_stop_escalates(void **state)
{
	(void)state;
	make_sh("trap '' TERM; printf '%s\\n' '" NOTE(1) "'; while :; do sleep 0.05; done", NULL);
	assert_int_equal(backend_start(BE), 0);
	ext_wait_got(&CL, 1, 2.0);  /* the trap is set */
	double t0 = ev_time();
	backend_stop(BE, 0.05);
	ext_wait_state(BE, BACKEND_GONE, 3.0);
	double took = ev_time() - t0;
	assert_true(took >= 0.09);
	assert_true(took < 2.0);
	assert_string_equal(backend_peer(BE)->why_down, "killed by signal 9 (Killed)");
	assert_int_equal(events[0], BACKEND_EV_GONE);
}

/* A command that does not exist cannot start, for good, with the spawn
 * error as the reason. */
static void test_missing_command(void **state)
{
	(void)state;
	C = ext_cfg("{\"mcpServers\":{\"m\":{\"command\":\"/nonexistent/mcp-server\","
		    "\"restart\":{\"initialDelayMs\":1,\"maxRestarts\":5}}}}");
	BE = backend_new(CH, C, &C->servers[0], on_event, NULL);
	assert_int_equal(be_stdio_ops.start(BE), BE_START_PERMANENT);
	assert_string_equal(backend_peer(BE)->why_down,
			    "cannot start \"/nonexistent/mcp-server\": No such file or directory");
	assert_false(be_stdio_ops.running(BE));
	assert_int_equal(backend_start(BE), -1);
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	ext_run_until(NULL, NULL, 0.02);
	assert_int_equal(backend_stats(BE)->restarts, 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	ev_default_loop(0);
	backend_use_transports(be_transports);
	writer_setup();  /* the before-sleep flush of every writer */
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_stdout_lines),
		T(test_stdout_garbage_quote_cut),
		T(test_stdout_oversize),
		T(test_send_round_trip),
		T(test_stdin_congestion),
		T(test_pause_stdout),
		T(test_last_words_at_exit),
		T(test_exit_status_down),
		T(test_exit_zero_ended),
		T(test_signal_down),
		T(test_stdout_closed_child_runs),
		T(test_stop_escalates),
		T(test_missing_command),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
