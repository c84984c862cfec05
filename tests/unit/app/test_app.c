/*
 * test_app.c - unit tests for src/app/app.c: an app made from a
 * configuration (the process-wide chain's backends, which entries are
 * shared, a module that cannot start), then whole runs on stdio: a
 * client's session to the end of its input, a first signal that stops
 * in order, a second that forces the exit.
 *
 * A run serves fds 0 and 1: the test puts pipes there (keeping its own
 * stdout aside for cmocka) and is the client at their other ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include "aggregate.h"
#include "app_test.h"
#include "backend.h"
#include "ext_test.h"

static void test_new_builds_the_shared_chain(void **state)
{
	(void)state;
	const char *path = apt_write("new.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"},"
		"\"b\":{\"command\":\"%1$s\",\"scope\":\"shared\"},"
		"\"off\":{\"command\":\"%1$s\",\"disabled\":true}}}", apt_fixture());
	/* on stdio every enabled entry is the one session's */
	struct app *a = apt_app(path, false);
	assert_int_equal(a->phase, APP_RUNNING);
	assert_int_equal(a->nbackends, 2);
	assert_int_equal(aggregate_backends(a->agg), 2);
	assert_true(app_shared_entry(a, &a->cfg->servers[0]));
	assert_false(app_shared_entry(a, &a->cfg->servers[2]));   /* disabled */
	for (size_t i = 0; i < a->nbackends; i++)
		assert_int_equal(backend_state(a->backends[i]), BACKEND_STOPPED);  /* not yet */
	assert_false(app_any_running(a));
	app_free(a);
	/* with --listen a child is session-scoped unless it says "shared" */
	a = apt_app(path, true);
	assert_int_equal(a->nbackends, 1);
	assert_string_equal(backend_peer(a->backends[0])->name, "b");
	assert_false(app_shared_entry(a, &a->cfg->servers[0]));
	assert_true(app_shared_entry(a, &a->cfg->servers[1]));
	app_free(a);
}

/* A module that cannot start: no app, and the configuration freed (ASan
 * would report it leaked otherwise). */
static void test_new_fails_when_a_module_cannot_start(void **state)
{
	(void)state;
	const char *path = apt_write("badmod.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"}},"
		"\"middleware\":[{\"use\":\"log\",\"sink\":\"file\","
		"\"path\":\"/nonexistent-dir/x/audit.jsonl\"}]}",
		apt_fixture());
	assert_null(app_new(apt_load(path), "error", false));
}

/* ---- whole runs on stdio ---- */

/* The client's ends: IN writes to the app's stdin, OUT reads its stdout. */
struct client {
	int in, out;
	int saved_in, saved_out;
};

/* Puts pipes on fds 0 and 1, keeping the test's own aside. */
static void plug(struct client *c)
{
	int to_app[2], from_app[2];
	assert_int_equal(pipe(to_app), 0);
	assert_int_equal(pipe(from_app), 0);
	fflush(stdout);
	c->saved_in = dup(0);
	c->saved_out = dup(1);
	assert_true(c->saved_in >= 0 && c->saved_out >= 0);
	assert_int_equal(dup2(to_app[0], 0), 0);
	assert_int_equal(dup2(from_app[1], 1), 1);
	close(to_app[0]);
	close(from_app[1]);
	c->in = to_app[1];
	c->out = from_app[0];
}

/* Gives the test its fds back (closing the app's ends of the pipes, if
 * it left them open) and closes the client's writing end. */
static void unplug(struct client *c)
{
	dup2(c->saved_in, 0);
	dup2(c->saved_out, 1);
	close(c->saved_in);
	close(c->saved_out);
	if (c->in >= 0)
		close(c->in);
}

/* Writes TEXT to the app's stdin. */
static void say(struct client *c, const char *text)
{
	size_t n = strlen(text);
	assert_int_equal(write(c->in, text, n), (ssize_t)n);
}

/* Everything the app wrote to stdout, NUL-terminated; after unplug, so
 * that no writing end is left open. Closes the reading end. */
static char *heard(struct client *c)
{
	size_t len = 0, cap = 1 << 16;
	char *s = malloc(cap);
	ssize_t n;
	assert_non_null(s);
	while ((n = read(c->out, s + len, cap - 1 - len)) > 0) {
		len += (size_t)n;
		if (len == cap - 1) {
			s = realloc(s, cap *= 2);
			assert_non_null(s);
		}
	}
	s[len] = '\0';
	close(c->out);
	return s;
}

#define INIT "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":" \
	"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}," \
	"\"clientInfo\":{\"name\":\"test_app\",\"version\":\"1\"}}}\n" \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"

/* A session to the end of its input: every request answered, the
 * backend stopped, status 0. */
static void test_run_to_end_of_input(void **state)
{
	struct client c;
	(void)state;
	const char *path = apt_write("run.json",
		"{\"mcpServers\":{\"fx\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	plug(&c);
	assert_int_equal(app_open_front(a, NULL, NULL), 0);
	say(&c, INIT "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"echo\",\"arguments\":{\"n\":7}}}\n");
	close(c.in);
	c.in = -1;
	int rc = app_run(a);
	assert_false(app_any_running(a));
	assert_int_equal(backend_state(a->backends[0]), BACKEND_GONE);
	app_free(a);
	unplug(&c);
	char *out = heard(&c);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"));
	assert_non_null(strstr(out, "\"protocolVersion\":\"2025-06-18\""));
	assert_non_null(strstr(out, "\"id\":2,\"result\":"));
	assert_null(strstr(out, "\"error\""));
	free(out);
}

/* Sends this process the signal in W's data, from the loop. */
static void on_kill(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	kill(getpid(), (int)(intptr_t)w->data);
}

/* Runs a session that stays open while SIGNALS signals arrive 50 ms
 * apart, the backend started with ARGS (JSON array text); returns the
 * status and what the client heard. */
static int run_signalled(int sig, int signals, const char *args, char **out)
{
	struct client c;
	const char *path = apt_write("sig.json",
		"{\"mcpServers\":{\"fx\":{\"command\":\"%1$s\",\"args\":%2$s}}}",
		apt_fixture(), args);
	struct app *a = apt_app(path, false);
	ev_timer kills[2];
	plug(&c);
	assert_int_equal(app_open_front(a, NULL, NULL), 0);
	say(&c, INIT "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
	for (int i = 0; i < signals; i++) {
		ev_timer_init(&kills[i], on_kill, 0.2 + 0.05 * i, 0.);
		kills[i].data = (void *)(intptr_t)sig;
		ev_timer_start(EV_DEFAULT, &kills[i]);
	}
	int rc = app_run(a);
	for (int i = 0; i < signals; i++)
		ev_timer_stop(EV_DEFAULT, &kills[i]);
	int phase = a->phase;
	app_free(a);
	unplug(&c);
	*out = heard(&c);
	assert_int_equal(phase, APP_STOPPING);
	return rc;
}

/* SIGTERM with the client still there: the backends are told and stop,
 * the session is closed, status 0. */
static void test_first_signal_stops_in_order(void **state)
{
	char *out;
	(void)state;
	assert_int_equal(run_signalled(SIGTERM, 1, "[]", &out), 0);
	assert_non_null(strstr(out, "\"id\":2,\"result\":{}"));
	free(out);
}

/* A second signal does not wait for a backend that ignores the first
 * (and the end of its input): status 128 + the signal. */
static void test_second_signal_forces_the_exit(void **state)
{
	char *out;
	(void)state;
	assert_int_equal(run_signalled(SIGINT, 2, "[\"--ignore-signals\",\"--ignore-eof\"]", &out),
			 128 + SIGINT);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_builds_the_shared_chain),
		cmocka_unit_test(test_new_fails_when_a_module_cannot_start),
		cmocka_unit_test(test_run_to_end_of_input),
		cmocka_unit_test(test_first_signal_stops_in_order),
		cmocka_unit_test(test_second_signal_forces_the_exit),
	};
	return apt_main("app", tests, sizeof tests / sizeof tests[0]);
}
