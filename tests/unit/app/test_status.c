/*
 * test_status.c - unit tests for src/app/status.c: the status resource's
 * description of each backend (state, command, counters, uptime, why it
 * is down), /readyz, and the /metrics text with its label escaping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app_test.h"
#include "backend.h"
#include "ext_test.h"
#include "mcpc_version.h"
#include "peer.h"
#include "redis.h"

/* The description of backend NAME in the status resource (borrowed from
 * *ALL, a new reference the caller releases). */
static json_t *described(struct app *a, const char *name, json_t **all)
{
	*all = app_describe_backends(a);
	assert_non_null(*all);
	assert_string_equal(json_string_value(json_object_get(*all, "version")), MCPC_VERSION);
	json_t *d = json_object_get(json_object_get(*all, "backends"), name);
	if (!d)
		fail_msg("no backend \"%s\" in the status", name);
	return d;
}

static void test_describe_each_state(void **state)
{
	(void)state;
	const char *path = apt_write("describe.json",
		"{\"mcpServers\":{\"up\":{\"command\":\"%1$s\"},"
		"\"missing\":{\"command\":\"/nonexistent/mcp-server\",\"restart\":false},"
		"\"off\":{\"command\":\"%1$s\",\"disabled\":true}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	json_t *all;
	json_t *d = described(a, "up", &all);
	/* not started: what it would run, nothing counted, no uptime */
	assert_int_equal(json_object_size(json_object_get(all, "backends")), 2);
	assert_string_equal(json_string_value(json_object_get(d, "state")), "stopped");
	assert_string_equal(json_string_value(json_object_get(d, "command")), apt_fixture());
	assert_int_equal(json_integer_value(json_object_get(d, "restarts")), 0);
	assert_int_equal(json_integer_value(json_object_get(d, "requests")), 0);
	assert_int_equal(json_integer_value(json_object_get(d, "errors")), 0);
	assert_string_equal(json_string_value(json_object_get(d, "protocol")), "unknown");
	assert_null(json_object_get(d, "uptimeSeconds"));
	assert_null(json_object_get(d, "reason"));
	assert_null(json_object_get(json_object_get(all, "backends"), "off"));
	json_decref(all);

	for (size_t i = 0; i < a->nbackends; i++)
		backend_start(a->backends[i]);
	ext_wait_state(a->backends[0], BACKEND_STARTED, 5);
	ext_wait_state(a->backends[1], BACKEND_FAILED, 5);
	d = described(a, "up", &all);
	assert_string_equal(json_string_value(json_object_get(d, "state")), "started");
	assert_true(json_is_real(json_object_get(d, "uptimeSeconds")));
	assert_true(json_real_value(json_object_get(d, "uptimeSeconds")) >= 0);
	/* a backend that is down says why */
	d = json_object_get(json_object_get(all, "backends"), "missing");
	assert_string_equal(json_string_value(json_object_get(d, "state")), "failed");
	const char *why = json_string_value(json_object_get(d, "reason"));
	assert_non_null(why);
	assert_true(strlen(why) > 0);
	json_decref(all);

	apt_stop_and_free(a);
}

/* /readyz: not while a backend is starting, yes once each is ready or gone. */
static void test_all_ready(void **state)
{
	(void)state;
	const char *path = apt_write("ready.json",
		"{\"mcpServers\":{\"a\":{\"command\":\"%1$s\"},\"b\":{\"command\":\"%1$s\"}}}",
		apt_fixture());
	struct app *a = apt_app(path, false);
	assert_false(app_all_ready(a));   /* stopped: not ready */
	for (size_t i = 0; i < a->nbackends; i++)
		backend_start(a->backends[i]);
	ext_wait_state(a->backends[1], BACKEND_STARTED, 5);
	assert_false(app_all_ready(a));   /* started, no handshake yet */
	app_begin_stop(a, "the test is over", LOG_DEBUG);
	apt_wait_quiet(a, 10);
	assert_int_equal(backend_state(a->backends[0]), BACKEND_GONE);
	assert_true(app_all_ready(a));    /* gone: nothing to wait for */
	app_free(a);
}

/* The text of /metrics for A, NUL-terminated (the caller frees it). */
static char *metrics(struct app *a)
{
	struct buf b = { 0 };
	app_write_metrics(&b, a);
	assert_int_equal(buf_append(&b, "", 1), 0);
	char *s = strdup(b.data + b.off);
	buf_release(&b);
	assert_non_null(s);
	return s;
}

/* Fails unless TEXT has LINE as a whole line. */
static void has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("no line \"%s\" in:\n%s", line, text);
}

static void test_metrics_text(void **state)
{
	(void)state;
	/* a name with a quote, a backslash and a newline, as JSON allows */
	const char *path = apt_write("metrics.json",
		"{\"mcpServers\":{\"plain\":{\"command\":\"%1$s\"},"
		"\"we\\\"ird\\\\na\\nme\":{\"command\":\"%1$s\"}}}", apt_fixture());
	struct app *a = apt_app(path, false);
	char *m = metrics(a);
	has_line(m, "# TYPE mcp_chain_requests_total counter");
	has_line(m, "mcp_chain_requests_total{from=\"client\"} 0");
	has_line(m, "mcp_chain_requests_total{from=\"backend\"} 0");
	has_line(m, "mcp_chain_responses_total{outcome=\"tool_error\"} 0");
	has_line(m, "mcp_chain_errors_total{kind=\"over_limit\"} 0");
	has_line(m, "mcp_chain_cancelled_total 0");
	has_line(m, "mcp_chain_requests_open 0");
	has_line(m, "# TYPE mcp_chain_backend_up gauge");
	has_line(m, "mcp_chain_backend_up{backend=\"plain\"} 0");
	has_line(m, "mcp_chain_backend_state{backend=\"plain\",state=\"stopped\"} 1");
	has_line(m, "mcp_chain_backend_responses_total{backend=\"plain\",outcome=\"ok\"} 0");
	has_line(m, "mcp_chain_backend_restarts_total{backend=\"plain\"} 0");
	has_line(m, "mcp_chain_backend_requests_total{backend=\"plain\"} 0");
	/* the label escaped as the exposition format asks: \" \\ \n */
	has_line(m, "mcp_chain_backend_up{backend=\"we\\\"ird\\\\na\\nme\"} 0");
	/* each family's help and type once, before its samples */
	const char *help = strstr(m, "# HELP mcp_chain_backend_restarts_total");
	assert_non_null(help);
	assert_null(strstr(help + 1, "# HELP mcp_chain_backend_restarts_total"));
	assert_true(help < strstr(m, "mcp_chain_backend_restarts_total{"));
	free(m);

	backend_start(a->backends[0]);
	ext_wait_state(a->backends[0], BACKEND_STARTED, 5);
	m = metrics(a);
	has_line(m, "mcp_chain_backend_state{backend=\"plain\",state=\"started\"} 1");
	free(m);
	apt_stop_and_free(a);
}

/* With a "redis" section the app makes the shared store, and /metrics
 * tells its state (here down: nothing listens on port 1). */
static void test_metrics_redis(void **state)
{
	(void)state;
	const char *path = apt_write("redis.json",
		"{\"mcpServers\":{\"plain\":{\"command\":\"%1$s\"}},"
		"\"redis\":{\"port\":1,\"connectTimeoutMs\":100}}", apt_fixture());
	struct app *a = apt_app(path, false);
	assert_non_null(a->redis);
	assert_ptr_equal(redis_default(), a->redis);
	char *m = metrics(a);
	has_line(m, "# TYPE mcp_chain_redis_up gauge");
	has_line(m, "mcp_chain_redis_up 0");
	has_line(m, "mcp_chain_redis_reconnects_total 0");
	free(m);
	apt_stop_and_free(a);
	assert_null(redis_default());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_describe_each_state),
		cmocka_unit_test(test_all_ready),
		cmocka_unit_test(test_metrics_text),
		cmocka_unit_test(test_metrics_redis),
	};
	return apt_main("app_status", tests, sizeof tests / sizeof tests[0]);
}
