/*
 * test_scoped.c - unit tests for src/app/scoped.c: with --listen, the
 * process-wide chain for shared backends, a chain of its own for each
 * session when the backends are session-scoped (started at once, stopped
 * when the session gives it back, freed once down), the one chain every
 * 2026-07-28 call shares, and the bounds on sessions, processes and
 * starts per second.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "app_test.h"
#include "backend.h"
#include "ext_test.h"

/* Session chains of A: all of them, and those not released. */
static size_t count_schains(const struct app *a, bool live_only)
{
	size_t n = 0;
	for (const struct schain *sc = a->schains; sc; sc = sc->next)
		n += !live_only || !sc->released;
	return n;
}

/* The session chain of A whose chain is C. */
static struct schain *schain_of(struct app *a, struct chain *c)
{
	for (struct schain *sc = a->schains; sc; sc = sc->next)
		if (sc->chain == c)
			return sc;
	fail_msg("no session chain for %p", (void *)c);
	return NULL;
}

static void test_shared_backends_share_the_chain(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("shared.json",
		"{\"mcpServers\":{\"one\":{\"command\":\"%1$s\",\"scope\":\"shared\"}}}",
		apt_fixture());
	struct app *a = apt_app(path, true);
	assert_int_equal(a->nbackends, 1);   /* in the process-wide chain */
	assert_ptr_equal(app_session_chain(a, 1, NULL, NULL, why, sizeof why), a->chain);
	assert_ptr_equal(app_session_chain(a, 2, "{}", NULL, why, sizeof why), a->chain);
	assert_null(a->schains);
	app_release_session_chain(a, a->chain, 1);   /* nothing of its own to stop */
	assert_int_equal(backend_state(a->backends[0]), BACKEND_STOPPED);
	apt_stop_and_free(a);
}

static void test_session_chains_made_bounded_and_freed(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("scoped.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"},\"b\":{\"command\":\"%1$s\"}},"
		"\"listen\":{\"maxScopedSessions\":2,\"maxStartsPerSecond\":100}}", apt_fixture());
	struct app *a = apt_app(path, true);
	assert_int_equal(a->nbackends, 0);   /* session-scoped: none process-wide */

	struct chain *c1 = app_session_chain(a, 1, NULL, NULL, why, sizeof why);
	struct chain *c2 = app_session_chain(a, 2, NULL, NULL, why, sizeof why);
	assert_non_null(c1);
	assert_non_null(c2);
	assert_ptr_not_equal(c1, a->chain);
	assert_ptr_not_equal(c1, c2);
	struct schain *s1 = schain_of(a, c1);
	assert_int_equal(s1->nbackends, 2);
	assert_int_equal(s1->serial, 1);
	ext_wait_state(s1->backends[0], BACKEND_STARTED, 5);   /* started at once */
	ext_wait_state(s1->backends[1], BACKEND_STARTED, 5);
	ext_wait_state(schain_of(a, c2)->backends[1], BACKEND_STARTED, 5);
	assert_int_equal(app_processes_running(a), 4);

	/* a third session is over listen.maxScopedSessions */
	assert_null(app_session_chain(a, 3, NULL, NULL, why, sizeof why));
	assert_non_null(strstr(why, "Service Unavailable"));
	assert_non_null(strstr(why, "maxScopedSessions is 2"));

	/* the first session ends: its backends stop, then the loop frees it
	 * (while running: a server's ended sessions must not pile up) */
	app_release_session_chain(a, c1, 1);
	assert_true(s1->released);
	assert_int_equal(count_schains(a, true), 1);
	apt_wait_gone(s1->backends, s1->nbackends, 10);
	for (int i = 0; i < 100 && count_schains(a, false) > 1; i++)
		ev_run(EV_DEFAULT, EVRUN_NOWAIT);
	assert_int_equal(count_schains(a, false), 1);
	assert_false(ev_is_active(&a->step));   /* and stops watching */
	assert_ptr_equal(a->schains->chain, c2);
	assert_int_equal(app_processes_running(a), 2);

	/* room again */
	struct chain *c3 = app_session_chain(a, 3, NULL, NULL, why, sizeof why);
	assert_non_null(c3);
	assert_int_equal(count_schains(a, true), 2);
	apt_stop_and_free(a);   /* the stop reaches sessions' own backends too */
}

static void test_bounds(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("bounds.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"}},"
		"\"listen\":{\"maxProcesses\":3,\"maxStartsPerSecond\":2}}", apt_fixture());
	struct app *a = apt_app(path, true);
	/* more processes than allowed at once */
	assert_int_equal(app_within_bounds(a, 1, 4, why, sizeof why), -1);
	assert_non_null(strstr(why, "maxProcesses is 3"));
	/* the bucket holds two starts a second: two pass, the third waits */
	assert_int_equal(app_within_bounds(a, 2, 1, why, sizeof why), 0);
	assert_int_equal(app_within_bounds(a, 3, 1, why, sizeof why), 0);
	assert_int_equal(app_within_bounds(a, 4, 1, why, sizeof why), -1);
	assert_non_null(strstr(why, "maxStartsPerSecond is 2"));
	/* refilled with time (the loop's clock) */
	a->tokens_at -= 1.0;
	assert_int_equal(app_within_bounds(a, 5, 1, why, sizeof why), 0);
	apt_stop_and_free(a);
}

static void test_stateless_calls_share_one_chain_per_capabilities(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("stateless.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, true);
	struct chain *c = app_session_chain(a, 1, "{}", NULL, why, sizeof why);
	assert_non_null(c);
	assert_ptr_equal(app_session_chain(a, 2, "{}", NULL, why, sizeof why), c);
	assert_ptr_equal(a->schains->chain, c);
	assert_string_equal(a->schains->caps, "{}");
	assert_int_equal(count_schains(a, false), 1);
	/* calls that declare other capabilities: backends initialized with those */
	struct chain *s = app_session_chain(a, 4, "{\"sampling\":{}}", NULL, why, sizeof why);
	assert_non_null(s);
	assert_ptr_not_equal(s, c);
	assert_ptr_equal(app_session_chain(a, 5, "{\"sampling\":{}}", NULL, why, sizeof why), s);
	assert_int_equal(count_schains(a, false), 2);
	/* a call ending does not stop what every such call shares */
	app_release_session_chain(a, c, 1);
	assert_int_equal(count_schains(a, false), 2);
	/* a session of its own is still a chain apart */
	struct chain *own = app_session_chain(a, 3, NULL, NULL, why, sizeof why);
	assert_non_null(own);
	assert_ptr_not_equal(own, c);
	assert_ptr_not_equal(own, s);
	/* the stop releases them with the rest */
	app_begin_stop(a, "the test is over", LOG_DEBUG);
	assert_int_equal(count_schains(a, true), 0);
	apt_wait_quiet(a, 10);
	app_free(a);
}

static void test_refused_while_stopping(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("stopping.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, true);
	app_begin_stop(a, "the test stops", LOG_DEBUG);
	assert_null(app_session_chain(a, 1, NULL, NULL, why, sizeof why));
	assert_string_equal(why, "Service Unavailable: mcp-chain is shutting down");
	assert_null(a->schains);
	apt_wait_quiet(a, 10);
	app_free(a);
}

/*
 * Session-scoped and shared entries together: each session's chain has its
 * own backend and the app's shared one linked in, in its aggregate; the
 * bounds count its own processes only; a session's end lets go of the
 * shared backend (which runs on) and a reload that replaces the shared
 * backend puts the new one in the running session.
 */
static void test_mixed_scopes(void **state)
{
	char why[256] = "";
	(void)state;
	const char *path = apt_write("mixed.json",
		"{\"mcpServers\":{\"own\":{\"command\":\"%1$s\"},"
		"\"common\":{\"command\":\"%1$s\",\"scope\":\"shared\"}},"
		"\"listen\":{\"maxProcesses\":2,\"maxStartsPerSecond\":100}}", apt_fixture());
	struct app *a = apt_app(path, true);
	assert_int_equal(a->nbackends, 1);   /* the shared one, process-wide */
	struct backend *common = a->backends[0];
	struct chain *c1 = app_session_chain(a, 1, NULL, NULL, why, sizeof why);
	struct chain *c2 = app_session_chain(a, 2, NULL, NULL, why, sizeof why);
	assert_non_null(c1);
	assert_non_null(c2);
	struct schain *s1 = schain_of(a, c1), *s2 = schain_of(a, c2);
	assert_int_equal(s1->nbackends, 1);
	assert_int_equal(s1->nshared, 1);
	assert_ptr_equal(s1->shared[0], common);
	assert_ptr_equal(s2->shared[0], common);
	assert_int_equal(s1->nall, 2);
	assert_string_equal(backend_peer(s1->all[0])->name, "own");   /* configuration order */
	assert_ptr_equal(s1->all[1], common);
	assert_int_equal(backend_peer(common)->nserves, 2);
	/* maxProcesses counts the sessions' own: the shared one is not started here */
	assert_null(app_session_chain(a, 3, NULL, NULL, why, sizeof why));
	assert_non_null(strstr(why, "maxProcesses is 2"));

	/* a reload replacing the shared backend: the running sessions get the new one */
	apt_write("mixed.json",
		"{\"mcpServers\":{\"own\":{\"command\":\"%1$s\"},"
		"\"common\":{\"command\":\"%1$s\",\"args\":[\"--changed\"],\"scope\":\"shared\"}},"
		"\"listen\":{\"maxProcesses\":2,\"maxStartsPerSecond\":100}}", apt_fixture());
	app_reload(a);
	assert_int_equal(a->nbackends, 1);
	assert_ptr_not_equal(a->backends[0], common);
	assert_int_equal(backend_peer(common)->nserves, 0);
	assert_int_equal(s1->nshared, 1);
	assert_ptr_equal(s1->shared[0], a->backends[0]);
	assert_ptr_equal(s2->shared[0], a->backends[0]);
	common = a->backends[0];
	assert_int_equal(backend_peer(common)->nserves, 2);

	/* a session ends: it lets go of the shared backend, which serves the other */
	app_release_session_chain(a, c1, 1);
	assert_int_equal(s1->nshared, 0);
	assert_int_equal(backend_peer(common)->nserves, 1);
	assert_int_equal(backend_state(common), BACKEND_STARTED);
	apt_wait_gone(s1->backends, s1->nbackends, 10);
	app_sweep_session_chains(a, false);
	assert_int_equal(count_schains(a, false), 1);
	apt_stop_and_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared_backends_share_the_chain),
		cmocka_unit_test(test_session_chains_made_bounded_and_freed),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_stateless_calls_share_one_chain_per_capabilities),
		cmocka_unit_test(test_refused_while_stopping),
		cmocka_unit_test(test_mixed_scopes),
	};
	return apt_main("app_scoped", tests, sizeof tests / sizeof tests[0]);
}
