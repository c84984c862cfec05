/*
 * test_reload.c - unit tests for src/app/reload.c: which entries count as
 * the same launch, a reload that keeps, replaces, removes and adds
 * backends, the reloads that must keep the running configuration, the
 * replaced configurations freed (all but the first, which --record
 * reads), and no reload once the stop has begun.
 *
 * The backends are mcp-fixture-server processes that are started but
 * never initialized (no client asks): enough for a reload, which only
 * starts, keeps and stops them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "aggregate.h"
#include "app_test.h"
#include "backend.h"
#include "ext_test.h"
#include "peer.h"
#include "redis.h"

/* ---- same launch ---- */

static void test_same_launch(void **state)
{
	char *argv_ab[] = { "a", "b", NULL }, *argv_ab2[] = { "a", "b", NULL };
	char *argv_a[] = { "a", NULL }, *empty[] = { NULL };
	char *env1[] = { "K=1", NULL }, *env2[] = { "K=2", NULL };
	char *h1[] = { "X-A: 1", NULL };
	struct cfg_server x = { .command = "a", .argv = argv_ab }, y = x;
	(void)state;
	assert_true(app_same_launch(&x, &y));
	y.argv = argv_ab2;   /* equal vectors, not the same storage */
	assert_true(app_same_launch(&x, &y));
	y.argv = argv_a;     /* one argument fewer */
	assert_false(app_same_launch(&x, &y));
	assert_false(app_same_launch(&y, &x));
	y = x;
	y.command = "b";
	assert_false(app_same_launch(&x, &y));
	y = x;
	y.cwd = "/tmp";      /* NULL (inherit) is not a directory */
	assert_false(app_same_launch(&x, &y));
	y = x;
	y.env = env1;
	assert_false(app_same_launch(&x, &y));
	x.env = env2;
	assert_false(app_same_launch(&x, &y));
	x.env = env1;
	assert_true(app_same_launch(&x, &y));
	y.headers = h1;
	assert_false(app_same_launch(&x, &y));
	y = x;
	y.protocol = x.protocol + 1;
	assert_false(app_same_launch(&x, &y));
	y = x;
	y.transport = CFG_HTTP;
	assert_false(app_same_launch(&x, &y));
	y = x;
	y.url = "http://127.0.0.1:1/mcp";
	assert_false(app_same_launch(&x, &y));
	/* no vector and an empty one start the same process */
	x.env = NULL;
	y = x;
	y.env = empty;
	assert_true(app_same_launch(&x, &y));
	/* what a reload may change on a running backend is not a launch */
	y = x;
	y.timeout = 5;
	y.prefix = "p";
	y.restart = !x.restart;
	assert_true(app_same_launch(&x, &y));
}

/* ---- reconciling backends ---- */

/* The backend of A in service named NAME, or NULL. */
static struct backend *named(struct app *a, const char *name)
{
	for (size_t i = 0; i < a->nbackends; i++)
		if (strcmp(backend_peer(a->backends[i])->name, name) == 0)
			return a->backends[i];
	return NULL;
}

/* Starts every backend of A and waits until each is up. */
static void start_all(struct app *a)
{
	for (size_t i = 0; i < a->nbackends; i++)
		assert_int_equal(backend_start(a->backends[i]), 0);
	for (size_t i = 0; i < a->nbackends; i++)
		ext_wait_state(a->backends[i], BACKEND_STARTED, 5);
}

static void test_reload_keeps_replaces_removes_adds(void **state)
{
	(void)state;
	const char *path = apt_write("reconcile.json",
		"{\"mcpServers\":{"
		"\"keep\":{\"command\":\"%1$s\"},"
		"\"change\":{\"command\":\"%1$s\"},"
		"\"drop\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	assert_int_equal(a->nbackends, 3);
	start_all(a);
	struct backend *keep = named(a, "keep"), *change = named(a, "change"),
		*drop = named(a, "drop");
	const struct cfg *first = a->cfg;

	apt_write("reconcile.json",
		"{\"mcpServers\":{"
		"\"keep\":{\"command\":\"%1$s\",\"timeout\":2500,\"prefix\":\"k\"},"
		"\"change\":{\"command\":\"%1$s\",\"args\":[\"--tools\",\"3\"]},"
		"\"add\":{\"command\":\"%1$s\"}}}", apt_fixture());
	app_reload(a);

	assert_ptr_not_equal(a->cfg, first);
	assert_int_equal(a->nbackends, 3);
	/* kept: the same process, now on the new entry's settings */
	assert_ptr_equal(named(a, "keep"), keep);
	assert_ptr_equal(backend_top(keep), a->cfg);
	assert_true(backend_peer(keep)->timeout == 2.5);
	assert_int_equal(backend_state(keep), BACKEND_STARTED);
	/* changed: a new backend in its place, started */
	assert_non_null(named(a, "change"));
	assert_ptr_not_equal(named(a, "change"), change);
	assert_string_equal(backend_cfg(named(a, "change"))->argv[1], "--tools");
	/* added, started; removed: out of service */
	assert_non_null(named(a, "add"));
	assert_null(named(a, "drop"));
	ext_wait_state(named(a, "change"), BACKEND_STARTED, 5);
	ext_wait_state(named(a, "add"), BACKEND_STARTED, 5);
	/* the replaced and the removed one are stopping, out of service */
	assert_int_equal(a->nretired, 2);
	assert_true(a->retired[0] == change || a->retired[1] == change);
	assert_true(a->retired[0] == drop || a->retired[1] == drop);
	assert_int_equal(aggregate_backends(a->agg), 3);
	apt_wait_gone(a->retired, a->nretired, 10);
	/* a later reload frees them */
	app_reload(a);
	assert_int_equal(a->nretired, 0);
	assert_int_equal(a->nbackends, 3);
	assert_ptr_equal(named(a, "keep"), keep);
	apt_stop_and_free(a);
}

/* ---- reloads that keep the running configuration ---- */

static void test_reload_keeps_config_on_error(void **state)
{
	(void)state;
	const char *path = apt_write("bad.json",
		"{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	start_all(a);
	struct cfg *running = a->cfg;
	struct backend *one = a->backends[0];

	apt_write("bad.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\",}}}", apt_fixture());
	app_reload(a);   /* a syntax error */
	assert_ptr_equal(a->cfg, running);
	assert_int_equal(a->nold, 0);

	apt_write("bad.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\",\"timeout\":\"x\"}}}",
		  apt_fixture());
	app_reload(a);   /* a wrong type */
	assert_ptr_equal(a->cfg, running);

	apt_write("bad.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"},"
		  "\"two\":{\"command\":\"%1$s\"}}}", apt_fixture());
	app_reload(a);   /* one backend to several changes what initialize said */
	assert_ptr_equal(a->cfg, running);
	assert_int_equal(a->nbackends, 1);
	assert_ptr_equal(a->backends[0], one);
	assert_int_equal(a->nretired, 0);
	assert_int_equal(backend_state(one), BACKEND_STARTED);
	apt_stop_and_free(a);
}

/* A changed "redis" section needs a restart: the rest is applied, the
 * store mcp-chain started with stays. */
static void test_reload_keeps_store(void **state)
{
	(void)state;
	const char *path = apt_write("store.json",
		"{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"}},"
		"\"redis\":{\"port\":1,\"prefix\":\"first:\"}}", apt_fixture());
	struct app *a = apt_app(path, false);
	struct redis *store = a->redis;
	assert_non_null(store);
	struct cfg *running = a->cfg;
	apt_write("store.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"}},"
		  "\"redis\":{\"port\":2,\"prefix\":\"second:\"}}", apt_fixture());
	app_reload(a);
	assert_ptr_not_equal(a->cfg, running);
	assert_ptr_equal(a->redis, store);
	assert_ptr_equal(redis_default(), store);
	assert_string_equal(redis_prefix(store), "first:");
	apt_stop_and_free(a);
}

static void test_reload_refused_while_stopping(void **state)
{
	(void)state;
	const char *path = apt_write("stopping.json",
		"{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	start_all(a);
	struct cfg *running = a->cfg;
	app_begin_stop(a, "the test stops", LOG_DEBUG);
	assert_int_equal(a->phase, APP_STOPPING);
	apt_write("stopping.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\",\"timeout\":100}}}",
		  apt_fixture());
	app_reload(a);
	assert_ptr_equal(a->cfg, running);
	apt_wait_quiet(a, 10);
	app_free(a);
}

/*
 * Replaced configurations are freed once no backend points into them,
 * all but the first: --record's recorder reads it for the whole run.
 * (Before, the first was freed at the first reload that kept every
 * backend, and the recorder read freed memory at the next message.)
 */
static void test_reload_frees_replaced_configs_but_first(void **state)
{
	(void)state;
	const char *path = apt_write("many.json",
		"{\"mcpServers\":{\"one\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	start_all(a);
	const struct cfg *first = a->first;
	assert_ptr_equal(first, a->cfg);
	for (int i = 0; i < 4; i++) {
		apt_write("many.json", "{\"mcpServers\":{\"one\":{\"command\":\"%1$s\","
			  "\"timeout\":%2$d}}}", apt_fixture(), 1000 + i);
		app_reload(a);
		assert_ptr_equal(a->first, first);
		assert_ptr_not_equal(a->cfg, first);
		/* the first and nothing else waits: the kept backend moved on */
		assert_int_equal(a->nold, 1);
		assert_ptr_equal(a->old[0], first);
		assert_ptr_equal(backend_top(a->backends[0]), a->cfg);
	}
	/* still whole (ASan would see a read of freed memory here) */
	assert_int_equal(first->nservers, 1);
	assert_string_equal(first->servers[0].name, "one");
	assert_string_equal(first->path, path);
	assert_true(fabs(backend_peer(a->backends[0])->timeout - 1.003) < 1e-9);
	apt_stop_and_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_launch),
		cmocka_unit_test(test_reload_keeps_replaces_removes_adds),
		cmocka_unit_test(test_reload_keeps_config_on_error),
		cmocka_unit_test(test_reload_keeps_store),
		cmocka_unit_test(test_reload_refused_while_stopping),
		cmocka_unit_test(test_reload_frees_replaced_configs_but_first),
	};
	return apt_main("app_reload", tests, sizeof tests / sizeof tests[0]);
}
