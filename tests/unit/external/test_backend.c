/*
 * test_backend.c - unit tests for src/external/backend.c: supervision
 * (restart after an unexpected down with exponential backoff, the restart
 * window, crash loop -> failed, "restart": false, stopping on purpose),
 * the initialize handshake repeated after a restart, and pending requests
 * failed when the transport goes down.
 *
 * The fake transport: backend_new picks a transport by the entry's type
 * from the table it was given (backend_use_transports); this file gives
 * one where entries with "type":"http" run on a fake, whose start
 * succeeds or fails on demand, and the test calls backend_down to
 * simulate the transport going away. The last tests use the real stdio
 * transport with /bin/false (supervision of a real child; the stdio
 * transport itself is test_be_stdio.c's).
 */
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
#include <ev.h>

#include "backend.h"
#include "chain.h"
#include "config.h"
#include "ext_test.h"
#include "log.h"
#include "observe.h"
#include "peer.h"
#include "rpc.h"

/* ---- the fake transport ---- */

/* The chain every test of this file uses (made in main, renewed by teardowns). */
static struct chain *CH;

static struct {
	int starts, stops, destroys, pauses;
	bool fail_start;        /* start fails with why_down "connection refused" */
	bool up;                /* what running() says */
	double start_at[64];    /* wall time of each start */
	double last_grace;
	json_t *sent;           /* messages sent to the backend (copies) */
} FT;

static int ft_start(struct backend *b)
{
	if (FT.starts < 64)
		FT.start_at[FT.starts] = ev_time();
	FT.starts++;
	if (FT.fail_start) {
		snprintf(backend_peer(b)->why_down, sizeof backend_peer(b)->why_down,
			 "connection refused");
		return -1;
	}
	FT.up = true;
	backend_set_transport(b, &FT);
	return 0;
}

static int ft_send(struct backend *b, json_t *msg)
{
	(void)b;
	json_array_append_new(FT.sent, json_deep_copy(msg));
	return 0;
}

/* Begins a stop; the test reports the down (the transport's exit) itself. */
static void ft_stop(struct backend *b, double grace)
{
	(void)b;
	FT.stops++;
	FT.last_grace = grace;
}

static bool ft_running(struct backend *b)
{
	(void)b;
	return FT.up;
}

static void ft_pause(struct backend *b, bool paused)
{
	(void)b;
	(void)paused;
	FT.pauses++;
}

static void ft_destroy(struct backend *b)
{
	FT.destroys++;
	backend_set_transport(b, NULL);
}

static const struct be_transport_ops fake_ops = {
	.kind = "fake",
	.start = ft_start,
	.send = ft_send,
	.stop = ft_stop,
	.running = ft_running,
	.pause = ft_pause,
	.destroy = ft_destroy,
};

/* ---- events, configuration, the backend ---- */

static enum backend_event events[64];
static int nevents;

static void on_event(struct backend *b, enum backend_event ev, void *arg)
{
	(void)b;
	assert_ptr_equal(arg, events);
	if (nevents < 64)
		events[nevents] = ev;
	nevents++;
}

/* Number of events EV seen. */
static int count_ev(enum backend_event ev)
{
	int n = 0;
	for (int i = 0; i < nevents && i < 64; i++)
		n += events[i] == ev;
	return n;
}

static struct cfg *C;
static struct backend *BE;

/* Loads TEXT and makes the backend of its first entry (not started). */
static struct backend *make(const char *text)
{
	C = ext_cfg(text);
	BE = backend_new(CH, C, &C->servers[0], on_event, events);
	assert_non_null(BE);
	return BE;
}

/* A fake-transport entry with these restart settings (JSON text). The fake
 * is a handshake-era server: pinned, since "auto" probes an HTTP upstream
 * with server/discover first (test_be_era.c covers that). */
static struct backend *make_fake(const char *restart)
{
	char text[1024];
	snprintf(text, sizeof text,
		 "{\"mcpServers\":{\"fake\":{\"type\":\"http\",\"url\":\"http://127.0.0.1:9/mcp\","
		 "\"protocol\":\"handshake\",\"restart\":%s}}}", restart);
	return make(text);
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	ev_now_update(EV_DEFAULT);
	memset(&FT, 0, sizeof FT);
	FT.sent = json_array();
	nevents = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (BE) {
		backend_free(BE);
		BE = NULL;
	}
	cfg_free(C);
	C = NULL;
	json_decref(FT.sent);
	FT.sent = NULL;
	chain_free(CH);
	CH = chain_new();
	assert_int_equal(chain_open_exchanges(CH), 0);
	return 0;
}

/* ---- running the loop, bounded ---- */

static int want_starts;
static bool starts_reached(const void *arg)
{
	(void)arg;
	return FT.starts >= want_starts;
}

/* Waits for start number N (1-based); returns its wall time. */
static double wait_start(int n, double cap)
{
	want_starts = n;
	if (!ext_run_until(starts_reached, NULL, cap))
		fail_msg("start #%d did not happen within %g s (state %s)", n, cap,
			 backend_state_name(backend_state(BE)));
	return FT.start_at[n - 1];
}

/* The transport goes down unexpectedly now; returns the wall time. */
static double down(const char *reason)
{
	ev_now_update(EV_DEFAULT);  /* the restart timer counts from now */
	double t = ev_time();
	FT.up = false;
	backend_down(BE, reason);
	return t;
}

static const char *why(void)
{
	return backend_peer(BE)->why_down;
}

/* ---- supervision with the fake transport ---- */

/* An unexpected down: pending state, then a restart after initialDelayMs. */
static void test_restart_after_initial_delay(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":10,\"maxDelayMs\":1000,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_state(BE), BACKEND_STOPPED);
	assert_string_equal(backend_state_name(BACKEND_STOPPED), "stopped");
	assert_int_equal(FT.starts, 0);
	assert_int_equal(backend_start(BE), 0);
	assert_int_equal(FT.starts, 1);
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	assert_true(backend_running(BE));
	assert_true(backend_stats(BE)->started_at > 0);
	assert_int_equal(backend_stats(BE)->restarts, 0);
	assert_ptr_equal(backend_transport(BE), &FT);
	assert_false(backend_peer(BE)->ready);  /* not initialized */

	double t = down("exited with status 1");
	assert_int_equal(backend_state(BE), BACKEND_RESTARTING);
	assert_string_equal(backend_state_name(BACKEND_RESTARTING), "restarting");
	assert_int_equal(nevents, 1);
	assert_int_equal(events[0], BACKEND_EV_DOWN);
	assert_string_equal(why(), "exited with status 1");
	assert_true(backend_stats(BE)->started_at == 0);
	assert_false(backend_peer(BE)->ready);
	assert_int_equal(FT.starts, 1);  /* not at once */

	double s = wait_start(2, 0.5);
	print_message("restart after %.1f ms\n", (s - t) * 1000);
	assert_true(s - t >= 0.009);
	assert_true(s - t < 0.5);   /* not maxDelayMs; room for a loaded machine */
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	assert_int_equal(backend_stats(BE)->restarts, 1);
	assert_int_equal(nevents, 1);  /* a restart is no event; READY comes with initialize */
}

/*
 * Each restart waits twice as long as the last, up to maxDelayMs. The
 * delays are long enough that a loaded machine (CI under ASan) stays
 * within the bound between one delay and the next doubling.
 */
static void test_backoff_doubles_to_max(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":80,\"maxDelayMs\":320,\"maxRestarts\":100,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	const double want[] = { 0.080, 0.160, 0.320, 0.320 };
	for (int i = 0; i < 4; i++) {
		double t = down("exited with status 1");
		double s = wait_start(i + 2, 2.0);
		print_message("restart %d after %.1f ms (want %.0f)\n", i + 1, (s - t) * 1000,
			      want[i] * 1000);
		assert_true(s - t >= want[i] - 0.001);
		assert_true(s - t < want[i] * 1.75);  /* not the next doubling */
	}
	assert_int_equal(backend_stats(BE)->restarts, 4);
	assert_int_equal(count_ev(BACKEND_EV_DOWN), 4);
	assert_int_equal(count_ev(BACKEND_EV_FAILED), 0);
}

/*
 * FIXED BUG (src/external/backend.c, backend_down/supervise): the backoff was
 * never reset after a good run. supervise() reset the delay when
 * stats.started_at showed the run lasted longer than windowMs, but
 * backend_down() set stats.started_at = 0 just before calling it, so the
 * test was always false: a backend that crashed a few times long ago and
 * then ran for hours was restarted after the old, doubled delay (up to
 * maxDelayMs) instead of initialDelayMs.
 *
 * Six quick downs double the delay to 160 ms, so the next one would wait
 * 320 ms; after a good run it waits 5 ms. The bound between them (160 ms)
 * leaves room for a loaded machine (a CI run under ASan once took 35 ms
 * to restart against a bound of 30 ms, with three downs and 40 ms).
 */
static void test_backoff_reset_after_good_run(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":5,\"maxDelayMs\":1000,\"maxRestarts\":100,\"windowMs\":30}");
	assert_int_equal(backend_start(BE), 0);
	for (int i = 0; i < 6; i++) {   /* after 5, 10, 20, 40, 80 and 160 ms */
		down("exited with status 1");
		wait_start(i + 2, 1.0);
	}
	ext_run_for(0.045);      /* up longer than windowMs */
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	double t = down("exited with status 1");
	double s = wait_start(8, 1.0);
	print_message("restart after a good run: %.1f ms (want 5; 320 without the reset)\n",
		      (s - t) * 1000);
	assert_true(s - t < 0.160);  /* before the fix: 320 ms */
}

/* Downs are counted per window: a window that passed starts a new count. */
static void test_window_resets_crash_count(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":5,\"maxDelayMs\":5,\"maxRestarts\":2,\"windowMs\":40}");
	assert_int_equal(backend_start(BE), 0);
	double t0 = down("exited with status 1");  /* 1 in this window */
	wait_start(2, 0.5);
	down("exited with status 1");              /* 2 */
	wait_start(3, 0.5);
	while (ev_time() - t0 < 0.050)             /* the window passes */
		ext_run_for(0.050 - (ev_time() - t0));
	down("exited with status 1");              /* 1 in a new window */
	assert_int_equal(backend_state(BE), BACKEND_RESTARTING);
	wait_start(4, 0.5);
	down("exited with status 1");              /* 2 */
	assert_int_equal(backend_state(BE), BACKEND_RESTARTING);
	wait_start(5, 0.5);
	down("exited with status 1");              /* 3 > maxRestarts */
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	assert_int_equal(backend_stats(BE)->restarts, 4);
}

/* More than maxRestarts downs within windowMs: failed, for good. */
static void test_crash_loop_fails(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1,\"maxDelayMs\":4,\"maxRestarts\":2,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	down("exited with status 1");
	wait_start(2, 0.5);
	down("exited with status 2");
	wait_start(3, 0.5);
	assert_int_equal(backend_state(BE), BACKEND_STARTED);
	down("killed by signal 9");
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	assert_string_equal(backend_state_name(BACKEND_FAILED), "failed");
	assert_int_equal(count_ev(BACKEND_EV_DOWN), 3);
	assert_int_equal(count_ev(BACKEND_EV_FAILED), 1);
	assert_int_equal(events[nevents - 1], BACKEND_EV_FAILED);
	assert_non_null(strstr(why(), "crash loop"));
	assert_non_null(strstr(why(), "3 times"));
	assert_non_null(strstr(why(), "killed by signal 9"));
	assert_int_equal(backend_stats(BE)->restarts, 2);
	assert_false(backend_peer(BE)->ready);
	ext_run_for(0.030);
	assert_int_equal(FT.starts, 3);  /* no more restarts */
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	/* a client's initialize is refused now */
	assert_int_equal(backend_peer(BE)->ops->initialize(backend_peer(BE), NULL, NULL, NULL), -1);
}

/* A transport that cannot start counts as a crash; the loop ends failed. */
static void test_start_failure_crash_loop(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1,\"maxDelayMs\":2,\"maxRestarts\":2,\"windowMs\":60000}");
	FT.fail_start = true;
	assert_int_equal(backend_start(BE), -1);
	assert_int_equal(backend_state(BE), BACKEND_RESTARTING);
	assert_string_equal(why(), "connection refused");
	assert_int_equal(count_ev(BACKEND_EV_DOWN), 1);
	ext_wait_state(BE, BACKEND_FAILED, 0.5);
	assert_int_equal(FT.starts, 3);
	assert_int_equal(backend_stats(BE)->restarts, 2);
	assert_non_null(strstr(why(), "crash loop"));
	assert_non_null(strstr(why(), "3 times"));
}

/*
 * FIXED BUG (src/external/backend.c, supervise): when the last down came from a
 * failed start, REASON was peer.why_down itself (backend_start passed it
 * to backend_down), and supervise() formatted the crash-loop message into
 * peer.why_down with REASON as a "%s" argument: overlapping snprintf
 * source and destination, undefined behaviour. With glibc the last reason
 * was lost (the message quoted its own beginning).
 */
static void test_start_failure_crash_loop_reason(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1,\"maxDelayMs\":2,\"maxRestarts\":2,\"windowMs\":60000}");
	FT.fail_start = true;
	assert_int_equal(backend_start(BE), -1);
	ext_wait_state(BE, BACKEND_FAILED, 0.5);
	print_message("why_down: %s\n", why());
	assert_non_null(strstr(why(), "(last: connection refused)"));
}

/* "restart": false: failed at the first unexpected down. */
static void test_no_restart(void **state)
{
	(void)state;
	make_fake("false");
	assert_int_equal(backend_start(BE), 0);
	down("exited with status 3");
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	assert_int_equal(nevents, 2);
	assert_int_equal(events[0], BACKEND_EV_DOWN);
	assert_int_equal(events[1], BACKEND_EV_FAILED);
	assert_string_equal(why(), "exited with status 3");  /* not a crash loop */
	ext_run_for(0.030);
	assert_int_equal(FT.starts, 1);
	assert_int_equal(backend_stats(BE)->restarts, 0);
}

/* The same with {"enabled": false}. */
static void test_no_restart_object(void **state)
{
	(void)state;
	make_fake("{\"enabled\":false,\"initialDelayMs\":1}");
	assert_int_equal(backend_start(BE), 0);
	down("exited with status 1");
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	ext_run_for(0.020);
	assert_int_equal(FT.starts, 1);
}

/* backend_stop: the transport is stopped, its down is expected: gone, no restart. */
static void test_stop_no_restart(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1,\"maxDelayMs\":1,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	backend_stop(BE, 1.5);
	assert_int_equal(FT.stops, 1);
	assert_true(FT.last_grace == 1.5);
	assert_int_equal(backend_state(BE), BACKEND_STOPPING);
	backend_stop(BE, 1.5);  /* again: nothing more */
	assert_int_equal(FT.stops, 1);
	FT.up = false;
	backend_down(BE, "exited with status 0");  /* the transport's exit */
	assert_int_equal(backend_state(BE), BACKEND_GONE);
	assert_string_equal(backend_state_name(BACKEND_GONE), "gone");
	assert_int_equal(nevents, 1);
	assert_int_equal(events[0], BACKEND_EV_GONE);
	ext_run_for(0.020);
	assert_int_equal(FT.starts, 1);
	assert_int_equal(backend_stats(BE)->restarts, 0);
}

/* backend_stop while a restart is pending: the restart is cancelled. */
static void test_stop_while_restarting(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":10,\"maxDelayMs\":10,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	down("exited with status 1");
	assert_int_equal(backend_state(BE), BACKEND_RESTARTING);
	backend_stop(BE, 1.0);
	assert_int_equal(FT.stops, 0);  /* nothing running to stop */
	assert_int_equal(backend_state(BE), BACKEND_GONE);
	assert_int_equal(events[nevents - 1], BACKEND_EV_GONE);
	ext_run_for(0.030);
	assert_int_equal(FT.starts, 1);
	assert_int_equal(backend_state(BE), BACKEND_GONE);
}

/* ---- handshake and pending requests ---- */

static json_t *init_answers;  /* what the initialize callback got */

static void on_init(void *arg, json_t *resp)
{
	assert_ptr_equal(arg, &init_answers);
	json_array_append_new(init_answers, json_deep_copy(resp));
}

/* The last message the transport sent, which must be METHOD. */
static json_t *last_sent(const char *method)
{
	json_t *m = json_array_get(FT.sent, json_array_size(FT.sent) - 1);
	assert_non_null(m);
	assert_string_equal(json_string_value(json_object_get(m, "method")), method);
	return m;
}

/* The backend answers request REQ with RESULT (text). */
static void reply(json_t *req, const char *result)
{
	json_error_t e;
	json_t *r = json_loads(result, 0, &e);
	assert_non_null(r);
	backend_deliver(BE, rpc_result(json_object_get(req, "id"), r), 100);
}

/* initialize is done with the client's parameters; a down fails the open
 * requests at once; the restarted backend is initialized again the same
 * way, without the client. */
static void test_handshake_down_and_reinit(void **state)
{
	(void)state;
	struct ext_client cl;
	ext_client_init(&cl, CH);
	init_answers = json_array();

	make_fake("{\"initialDelayMs\":5,\"maxDelayMs\":5,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	struct peer *p = backend_peer(BE);
	json_error_t e;
	json_t *params = json_loads("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
				    "\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}", 0, &e);
	assert_int_equal(p->ops->initialize(p, params, on_init, &init_answers), 0);
	assert_int_equal(backend_state(BE), BACKEND_INITIALIZING);
	json_t *req = last_sent("initialize");
	assert_true(json_equal(json_object_get(req, "params"), params));
	reply(req, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
		   "\"serverInfo\":{\"name\":\"srv\",\"version\":\"1\"}}");
	assert_int_equal(backend_state(BE), BACKEND_READY);
	assert_true(p->ready);
	assert_int_equal(json_array_size(init_answers), 1);
	assert_non_null(json_object_get(json_array_get(init_answers, 0), "result"));
	assert_non_null(backend_init_result(BE));
	assert_int_equal(count_ev(BACKEND_EV_READY), 1);

	/* a client request is open at the backend when it goes down */
	json_t *call = json_loads("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
				  "\"params\":{\"name\":\"slow\"}}", 0, &e);
	chain_receive(&cl.peer, call);
	last_sent("tools/call");
	assert_int_equal(chain_open_exchanges(CH), 1);
	size_t sent = json_array_size(FT.sent);
	down("exited with status 1");
	assert_int_equal(chain_open_exchanges(CH), 0);
	assert_int_equal(json_array_size(cl.got), 1);
	json_t *err = json_array_get(cl.got, 0);
	assert_int_equal(json_integer_value(json_object_get(err, "id")), 5);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(err, "error"), "code")),
			 RPC_BACKEND_GONE);
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(err, "error"),
								 "message")), "exited with status 1"));

	/* restarted: initialize again with the same parameters */
	wait_start(2, 0.5);
	assert_int_equal(backend_state(BE), BACKEND_INITIALIZING);
	assert_int_equal(json_array_size(FT.sent), sent + 1);
	req = last_sent("initialize");
	assert_true(json_equal(json_object_get(req, "params"), params));
	reply(req, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
		   "\"serverInfo\":{\"name\":\"srv\",\"version\":\"2\"}}");
	assert_int_equal(backend_state(BE), BACKEND_READY);
	assert_int_equal(count_ev(BACKEND_EV_READY), 2);
	assert_int_equal(json_array_size(init_answers), 1);  /* the client was answered once */
	assert_int_equal(backend_stats(BE)->requests, 3);     /* initialize x2, tools/call */

	json_decref(params);
	json_decref(init_answers);
	init_answers = NULL;
	ext_client_release(&cl);
}

/* initialize params asking for revision V. */
static json_t *init_params(const char *v)
{
	return json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", v, "capabilities",
			 "clientInfo", "name", "c", "version", "1");
}

/* The revision answer I of init_answers names. */
static const char *answered(size_t i)
{
	json_t *r = json_object_get(json_array_get(init_answers, i), "result");
	assert_non_null(r);
	return json_string_value(json_object_get(r, "protocolVersion"));
}

/*
 * A backend shared by several clients answers each with the revision it
 * asked for, where the backend may speak it: a client that waited for the
 * first one's handshake, and one that came when it was ready, asking an
 * older revision than the handshake's get theirs (a 2025-03-26 client
 * keeps its batches); one asking a newer one gets the handshake's; the
 * handshake's own client gets the backend's answer as it came, even a
 * revision newer than it asked.
 */
static void test_shared_answer_names_asked_version(void **state)
{
	(void)state;
	init_answers = json_array();
	make_fake("{\"initialDelayMs\":5,\"maxDelayMs\":5,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	struct peer *p = backend_peer(BE);
	json_t *first = init_params("2025-06-18"), *older = init_params("2025-03-26"),
		*oldest = init_params("2024-11-05"), *newer = init_params("2025-11-25"),
		*unknown = init_params("2030-01-01");
	assert_int_equal(p->ops->initialize(p, first, on_init, &init_answers), 0);
	assert_int_equal(p->ops->initialize(p, older, on_init, &init_answers), 0);  /* waits */
	json_t *req = last_sent("initialize");
	assert_true(json_equal(json_object_get(req, "params"), first));
	reply(req, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
		   "\"serverInfo\":{\"name\":\"srv\",\"version\":\"1\"}}");
	assert_int_equal(json_array_size(init_answers), 2);
	const char *got[2] = { answered(0), answered(1) };
	/* the waiters are called in some order: one each */
	assert_true((strcmp(got[0], "2025-06-18") == 0 && strcmp(got[1], "2025-03-26") == 0) ||
		    (strcmp(got[0], "2025-03-26") == 0 && strcmp(got[1], "2025-06-18") == 0));
	/* ready: later clients from the cached answer */
	assert_int_equal(p->ops->initialize(p, oldest, on_init, &init_answers), 0);
	assert_string_equal(answered(2), "2024-11-05");
	assert_int_equal(p->ops->initialize(p, newer, on_init, &init_answers), 0);
	assert_string_equal(answered(3), "2025-06-18");
	assert_int_equal(p->ops->initialize(p, unknown, on_init, &init_answers), 0);
	assert_string_equal(answered(4), "2025-06-18");
	assert_int_equal(p->ops->initialize(p, first, on_init, &init_answers), 0);
	assert_string_equal(answered(5), "2025-06-18");
	/* the rest of the answer is the backend's, and what it keeps is unchanged */
	json_t *r = json_object_get(json_array_get(init_answers, 2), "result");
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")),
			    "srv");
	assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
	assert_string_equal(json_string_value(json_object_get(backend_init_result(BE),
							      "protocolVersion")), "2025-06-18");
	assert_int_equal(json_array_size(FT.sent), 1);   /* one handshake for all */
	json_decref(init_answers);

	/* the handshake's own client: as the backend answered, newer than it asked */
	teardown(NULL);
	setup(NULL);
	init_answers = json_array();
	make_fake("{\"initialDelayMs\":5,\"maxDelayMs\":5,\"maxRestarts\":10,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	p = backend_peer(BE);
	assert_int_equal(p->ops->initialize(p, older, on_init, &init_answers), 0);
	reply(last_sent("initialize"), "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
		   "\"serverInfo\":{\"name\":\"srv\",\"version\":\"1\"}}");
	assert_string_equal(answered(0), "2025-06-18");
	assert_int_equal(p->ops->initialize(p, older, on_init, &init_answers), 0);
	assert_string_equal(answered(1), "2025-06-18");   /* the same question, the same answer */
	json_decref(init_answers);
	init_answers = NULL;
	json_decref(first);
	json_decref(older);
	json_decref(oldest);
	json_decref(newer);
	json_decref(unknown);
}

/* ---- the real stdio transport ---- */

/* /bin/false exits at once: restarted with backoff until the crash loop. */
static void test_stdio_false_crash_loop(void **state)
{
	(void)state;
	if (access("/bin/false", X_OK) != 0)
		skip();
	make("{\"mcpServers\":{\"f\":{\"command\":\"/bin/false\",\"restart\":"
	     "{\"initialDelayMs\":10,\"maxDelayMs\":20,\"maxRestarts\":2,\"windowMs\":60000}}}}");
	double t0 = ev_time();
	assert_int_equal(backend_start(BE), 0);
	ext_wait_state(BE, BACKEND_FAILED, 1.0);
	double took = ev_time() - t0;
	print_message("failed after %.1f ms: %s\n", took * 1000, why());
	assert_true(took >= 0.029);  /* 10 + 20 ms of backoff */
	assert_int_equal(backend_stats(BE)->restarts, 2);
	assert_int_equal(count_ev(BACKEND_EV_DOWN), 3);
	assert_int_equal(count_ev(BACKEND_EV_FAILED), 1);
	assert_non_null(strstr(why(), "crash loop"));
	assert_non_null(strstr(why(), "1"));
	assert_false(backend_running(BE));
	ext_run_for(0.030);
	assert_int_equal(backend_stats(BE)->restarts, 2);
}

/* /bin/false with "restart": false: failed after the first exit. */
static void test_stdio_false_no_restart(void **state)
{
	(void)state;
	if (access("/bin/false", X_OK) != 0)
		skip();
	make("{\"mcpServers\":{\"f\":{\"command\":\"/bin/false\",\"restart\":false}}}");
	assert_int_equal(backend_start(BE), 0);
	ext_wait_state(BE, BACKEND_FAILED, 1.0);
	assert_int_equal(backend_stats(BE)->restarts, 0);
	assert_null(strstr(why(), "crash loop"));
	ext_run_for(0.020);
	assert_int_equal(backend_stats(BE)->restarts, 0);
}

/*
 * Starts that keep failing are quick failures even when the backoff is
 * longer than windowMs: each failure used to open a new window, so a
 * start that could never succeed was retried for ever.
 */
static void test_start_failures_outlast_window(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":10,\"maxDelayMs\":20,\"maxRestarts\":2,\"windowMs\":5}");
	FT.fail_start = true;
	assert_int_equal(backend_start(BE), -1);
	ext_wait_state(BE, BACKEND_FAILED, 0.5);
	assert_int_equal(FT.starts, 3);
	assert_non_null(strstr(why(), "(last: connection refused)"));
	ext_run_for(0.050);
	assert_int_equal(FT.starts, 3);
}

/* A clean end on its own: pending initialize failed, ENDED, no restart;
 * stopping it afterwards is quiet and keeps the reason. */
static void test_ended_not_restarted(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1,\"maxRestarts\":10}");
	assert_int_equal(backend_start(BE), 0);
	FT.up = false;
	backend_ended(BE, "exited with status 0");
	assert_int_equal(backend_state(BE), BACKEND_ENDED);
	assert_string_equal(backend_state_name(BACKEND_ENDED), "ended");
	assert_int_equal(count_ev(BACKEND_EV_ENDED), 1);
	assert_int_equal(count_ev(BACKEND_EV_DOWN), 0);
	assert_false(backend_peer(BE)->ready);
	ext_run_for(0.020);
	assert_int_equal(FT.starts, 1);
	assert_int_equal(backend_peer(BE)->ops->initialize(backend_peer(BE), NULL, NULL, NULL), -1);
	backend_stop(BE, 1.0);
	assert_int_equal(backend_state(BE), BACKEND_GONE);
	assert_string_equal(why(), "exited with status 0");
}

/* While stopping on purpose a clean end is an ordinary stop. */
static void test_ended_while_stopping(void **state)
{
	(void)state;
	make_fake("{\"initialDelayMs\":1}");
	assert_int_equal(backend_start(BE), 0);
	backend_stop(BE, 1.0);
	FT.up = false;
	backend_ended(BE, "exited with status 0");
	assert_int_equal(backend_state(BE), BACKEND_GONE);
	assert_int_equal(count_ev(BACKEND_EV_GONE), 1);
	assert_int_equal(count_ev(BACKEND_EV_ENDED), 0);
}

/* "type":"http" on the fake, stdio on the real transport. */
static const struct be_transport_def transports[] = {
	{ CFG_STDIO, &be_stdio_ops },
	{ CFG_HTTP, &fake_ops },
	{ CFG_STDIO, NULL },
};

/* The backend events told to the observers, as "WHAT:DETAIL" lines. */
static char told[1024];
static void on_observed(void *arg, const struct obs_event *e)
{
	size_t n = strlen(told);
	(void)arg;
	if (e->kind == OBS_BACKEND)
		snprintf(told + n, sizeof told - n, "%s:%s:%s\n", e->what, e->backend,
			 e->detail ? e->detail : "");
}

/* What the live page's events say of supervision (observe.h): each down
 * with its reason, each restart with its delay, the end of a crash loop,
 * a stop on purpose; a start is not told (ready is: "up"). */
static void test_observed(void **state)
{
	(void)state;
	told[0] = '\0';
	assert_int_equal(observe_listen(on_observed, NULL), 0);
	make_fake("{\"initialDelayMs\":1,\"maxDelayMs\":1,\"maxRestarts\":1,\"windowMs\":60000}");
	assert_int_equal(backend_start(BE), 0);
	assert_string_equal(told, "");
	down("exited with status 1");
	assert_string_equal(told, "down:fake:exited with status 1\nrestarting:fake:in 0.001 s\n");
	wait_start(2, 0.5);
	told[0] = '\0';
	down("killed by signal 9");
	assert_int_equal(backend_state(BE), BACKEND_FAILED);
	assert_non_null(strstr(told, "down:fake:killed by signal 9\nfailed:fake:crash loop"));
	backend_free(BE);
	BE = NULL;
	cfg_free(C);
	C = NULL;
	told[0] = '\0';
	make_fake("{\"initialDelayMs\":1}");
	assert_int_equal(backend_start(BE), 0);
	backend_stop(BE, 0.1);
	FT.up = false;
	backend_down(BE, "stopped");
	assert_int_equal(backend_state(BE), BACKEND_GONE);
	assert_string_equal(told, "stopped:fake:stopped\n");
	observe_unlisten(on_observed, NULL);
}

int main(void)
{
	backend_use_transports(transports);
	CH = chain_new();
	log_set_level(LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_restart_after_initial_delay),
		T(test_backoff_doubles_to_max),
		T(test_window_resets_crash_count),
		T(test_crash_loop_fails),
		T(test_start_failure_crash_loop),
		T(test_no_restart),
		T(test_no_restart_object),
		T(test_stop_no_restart),
		T(test_stop_while_restarting),
		T(test_handshake_down_and_reinit),
		T(test_shared_answer_names_asked_version),
		T(test_stdio_false_crash_loop),
		T(test_stdio_false_no_restart),
		/* regressions of bugs these tests found (fixed) */
		T(test_backoff_reset_after_good_run),
		T(test_start_failure_crash_loop_reason),
		T(test_start_failures_outlast_window),
		T(test_ended_not_restarted),
		T(test_ended_while_stopping),
		T(test_observed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
