/*
 * test_redis.c - unit tests for the shared store (src/core/redis.c)
 * against a real redis-server on a free loopback port: a SET/GET round
 * trip, array replies (nested too), an error reply, a script by EVALSHA
 * and again after SCRIPT FLUSH (the NOSCRIPT fallback), a command that
 * times out and the answers after it, a database SELECTed, a refused
 * AUTH, forgotten commands, the server stopped (commands end REDIS_DOWN
 * from the loop, at once) and started again (reconnected), freeing with
 * commands pending, and the /metrics lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>

#include "buf.h"
#include "redis.h"
#include "redis_test.h"

static unsigned port;
static pid_t server;

/* What one command ended with. */
struct res {
	int done;
	enum redis_status st;
	enum redis_type type;
	long long integer;
	char str[256];
	size_t n;
	char elem[4][64];          /* the first elements' strings (or "int:N", "arr:N") */
};

static void on_res(void *arg, enum redis_status st, const struct redis_reply *reply)
{
	struct res *r = arg;
	r->done++;
	r->st = st;
	if (!reply)
		return;
	r->type = reply->type;
	r->integer = reply->integer;
	snprintf(r->str, sizeof r->str, "%s", reply->str ? reply->str : "");
	r->n = reply->n;
	for (size_t i = 0; i < reply->n && i < 4; i++) {
		const struct redis_reply *e = &reply->elem[i];
		if (e->type == REDIS_INT)
			snprintf(r->elem[i], sizeof r->elem[i], "int:%lld", e->integer);
		else if (e->type == REDIS_ARR)
			snprintf(r->elem[i], sizeof r->elem[i], "arr:%zu:%s", e->n,
				 e->n > 1 && e->elem[1].str ? e->elem[1].str : "");
		else
			snprintf(r->elem[i], sizeof r->elem[i], "%s", e->str ? e->str : "nil");
	}
}

/* A store on the test's server with a timeout of TIMEOUT s, once up. */
static struct redis *store(double timeout, unsigned db)
{
	struct redis *r = redis_new(&(struct redis_opts){ .host = "127.0.0.1", .port = port,
		.timeout = timeout, .db = db, .prefix = "t:" });
	assert_non_null(r);
	for (int i = 0; i < 200 && !redis_up(r); i++)
		rdt_run_for(0.01);
	assert_true(redis_up(r));
	return r;
}

/* Runs the command ARGV (NULL-terminated) on R and waits for its end. */
static void run(struct redis *r, struct res *res, const char *const *argv)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	memset(res, 0, sizeof *res);
	assert_non_null(redis_cmd(r, on_res, res, argc, argv, NULL));
	assert_int_equal(res->done, 0);   /* never from inside redis_cmd */
	assert_true(rdt_run_until(&res->done, 3));
	assert_int_equal(res->done, 1);
}

#define RUN(r, res, ...) run(r, res, (const char *const[]){ __VA_ARGS__, NULL })

static int setup(void **state)
{
	(void)state;
	port = rdt_free_port();
	server = rdt_start(port);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rdt_stop(server);
	return 0;
}

static void test_roundtrip(void **state)
{
	(void)state;
	struct redis *r = store(1, 0);
	struct res res;
	assert_string_equal(redis_prefix(r), "t:");
	RUN(r, &res, "SET", "t:k", "hello");
	assert_int_equal(res.st, REDIS_OK);
	assert_int_equal(res.type, REDIS_STR);
	assert_string_equal(res.str, "OK");
	RUN(r, &res, "GET", "t:k");
	assert_int_equal(res.type, REDIS_STR);
	assert_string_equal(res.str, "hello");
	RUN(r, &res, "GET", "t:none");
	assert_int_equal(res.type, REDIS_NIL);
	RUN(r, &res, "INCR", "t:n");
	assert_int_equal(res.type, REDIS_INT);
	assert_int_equal(res.integer, 1);
	/* binary-safe arguments with lengths */
	memset(&res, 0, sizeof res);
	const char *argv[] = { "SET", "t:bin", "a\0b" };
	const size_t lens[] = { 3, 5, 3 };
	assert_non_null(redis_cmd(r, on_res, &res, 3, argv, lens));
	assert_true(rdt_run_until(&res.done, 3));
	RUN(r, &res, "STRLEN", "t:bin");
	assert_int_equal(res.integer, 3);
	redis_free(r);
}

static void test_arrays_and_errors(void **state)
{
	(void)state;
	struct redis *r = store(1, 0);
	struct res res;
	RUN(r, &res, "DEL", "t:l");
	RUN(r, &res, "RPUSH", "t:l", "a", "b", "c");
	RUN(r, &res, "LRANGE", "t:l", "0", "-1");
	assert_int_equal(res.type, REDIS_ARR);
	assert_int_equal(res.n, 3);
	assert_string_equal(res.elem[0], "a");
	assert_string_equal(res.elem[2], "c");
	RUN(r, &res, "EVAL", "return {1, {2, 'x'}, 'y'}", "0");
	assert_int_equal(res.type, REDIS_ARR);
	assert_int_equal(res.n, 3);
	assert_string_equal(res.elem[0], "int:1");
	assert_string_equal(res.elem[1], "arr:2:x");
	assert_string_equal(res.elem[2], "y");
	RUN(r, &res, "LRANGE", "t:nothing", "0", "-1");
	assert_int_equal(res.type, REDIS_ARR);
	assert_int_equal(res.n, 0);
	RUN(r, &res, "INCR", "t:l");
	assert_int_equal(res.st, REDIS_OK);
	assert_int_equal(res.type, REDIS_ERR);
	assert_non_null(strstr(res.str, "WRONGTYPE"));
	redis_free(r);
}

static const char script[] = "return ARGV[1] .. redis.call('GET', KEYS[1])";

/* Runs the script with key t:s and argument "got " and waits. */
static void eval(struct redis *r, struct res *res)
{
	const char *keys[] = { "t:s" }, *args[] = { "got " };
	memset(res, 0, sizeof *res);
	assert_non_null(redis_eval(r, script, on_res, res, 1, keys, 1, args));
	assert_int_equal(res->done, 0);
	assert_true(rdt_run_until(&res->done, 3));
}

static void test_eval_noscript(void **state)
{
	(void)state;
	struct redis *r = store(1, 0);
	struct res res;
	struct buf m = { 0 };
	RUN(r, &res, "SET", "t:s", "v");
	RUN(r, &res, "SCRIPT", "FLUSH");
	eval(r, &res);   /* unknown: NOSCRIPT, then EVAL */
	assert_int_equal(res.st, REDIS_OK);
	assert_int_equal(res.type, REDIS_STR);
	assert_string_equal(res.str, "got v");
	eval(r, &res);   /* known now: EVALSHA */
	assert_string_equal(res.str, "got v");
	RUN(r, &res, "SCRIPT", "FLUSH");
	eval(r, &res);
	assert_string_equal(res.str, "got v");
	redis_metrics(r, &m);
	buf_append(&m, "", 1);
	assert_non_null(strstr(m.data, "mcp_chain_redis_up 1\n"));
	assert_non_null(strstr(m.data, "mcp_chain_redis_errors_total{why=\"reply\"} 0\n"));
	assert_non_null(strstr(m.data, "# TYPE mcp_chain_redis_commands_total counter\n"));
	buf_release(&m);
	redis_free(r);
}

static void test_timeout(void **state)
{
	(void)state;
	struct redis *r = store(0.1, 0);
	struct res slow, after;
	memset(&slow, 0, sizeof slow);
	const char *argv[] = { "BLPOP", "t:empty", "0.5" };
	ev_now_update(EV_DEFAULT);
	double t0 = ev_now(EV_DEFAULT);
	assert_non_null(redis_cmd(r, on_res, &slow, 3, argv, NULL));
	assert_true(rdt_run_until(&slow.done, 2));
	assert_int_equal(slow.st, REDIS_TIMEOUT);
	assert_true(ev_now(EV_DEFAULT) - t0 < 0.3);
	rdt_run_for(0.6);                 /* the late answer comes and is dropped */
	assert_int_equal(slow.done, 1);
	RUN(r, &after, "PING");
	assert_int_equal(after.st, REDIS_OK);
	assert_string_equal(after.str, "PONG");
	redis_free(r);
}

static void test_select_and_auth(void **state)
{
	(void)state;
	struct redis *r1 = store(1, 3), *r0 = store(1, 0);
	struct res res;
	RUN(r1, &res, "SET", "t:db", "three");
	RUN(r0, &res, "GET", "t:db");
	assert_int_equal(res.type, REDIS_NIL);
	RUN(r1, &res, "GET", "t:db");
	assert_string_equal(res.str, "three");
	redis_free(r1);
	redis_free(r0);
	/* AUTH refused (the server has no password): never up, commands end DOWN */
	struct redis *ra = redis_new(&(struct redis_opts){ .port = port, .password = "secret" });
	assert_non_null(ra);
	rdt_run_for(0.2);
	assert_false(redis_up(ra));
	memset(&res, 0, sizeof res);
	const char *argv[] = { "PING" };
	redis_cmd(ra, on_res, &res, 1, argv, NULL);
	assert_true(rdt_run_until(&res.done, 1));
	assert_int_not_equal(res.st, REDIS_OK);
	redis_free(ra);
}

static void test_forget(void **state)
{
	(void)state;
	struct redis *r = store(0.1, 0);
	struct res a, b, c;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	const char *ping[] = { "PING" }, *slow[] = { "BLPOP", "t:empty", "0.3" };
	redis_forget(redis_cmd(r, on_res, &a, 1, ping, NULL));
	redis_forget(redis_cmd(r, on_res, &b, 3, slow, NULL));
	rdt_run_for(0.5);
	assert_int_equal(a.done, 0);
	assert_int_equal(b.done, 0);
	RUN(r, &c, "PING");
	assert_string_equal(c.str, "PONG");
	/* freed with commands pending: no callback, nothing leaks */
	redis_cmd(r, on_res, &a, 3, slow, NULL);
	redis_cmd(r, on_res, &b, 1, ping, NULL);
	redis_free(r);
	rdt_run_for(0.1);
	assert_int_equal(a.done, 0);
	assert_int_equal(b.done, 0);
}

static void test_down_and_back(void **state)
{
	(void)state;
	struct redis *r = store(0.25, 0);
	struct res res;
	struct buf m = { 0 };
	RUN(r, &res, "SET", "t:k", "before");
	rdt_stop(server);
	server = 0;
	for (int i = 0; i < 100 && redis_up(r); i++)
		rdt_run_for(0.01);
	assert_false(redis_up(r));
	for (int i = 0; i < 3; i++) {
		ev_now_update(EV_DEFAULT);
		double t0 = ev_now(EV_DEFAULT);
		RUN(r, &res, "GET", "t:k");
		assert_int_equal(res.st, REDIS_DOWN);
		ev_now_update(EV_DEFAULT);
		assert_true(ev_now(EV_DEFAULT) - t0 < 0.1);   /* no stall */
		rdt_run_for(0.2);
	}
	server = rdt_start(port);
	for (int i = 0; i < 800 && !redis_up(r); i++)
		rdt_run_for(0.01);
	assert_true(redis_up(r));
	RUN(r, &res, "SET", "t:k", "after");
	RUN(r, &res, "GET", "t:k");
	assert_int_equal(res.st, REDIS_OK);
	assert_string_equal(res.str, "after");
	redis_count_fallback(r, "limit", true);
	redis_count_fallback(r, "limit", false);
	redis_metrics(r, &m);
	buf_append(&m, "", 1);
	assert_non_null(strstr(m.data, "mcp_chain_redis_reconnects_total 1\n"));
	assert_non_null(strstr(m.data, "mcp_chain_redis_errors_total{why=\"down\"} 3\n"));
	assert_non_null(strstr(m.data,
		"mcp_chain_redis_fallbacks_total{use=\"limit\",outcome=\"open\"} 1\n"));
	assert_non_null(strstr(m.data,
		"mcp_chain_redis_fallbacks_total{use=\"limit\",outcome=\"closed\"} 1\n"));
	buf_release(&m);
	redis_free(r);
}

static void test_default(void **state)
{
	(void)state;
	assert_null(redis_default());
	struct redis *r = redis_new(&(struct redis_opts){ .port = port });
	redis_set_default(r);
	assert_ptr_equal(redis_default(), r);
	assert_string_equal(redis_prefix(r), "mcp-chain:");
	redis_free(r);
	assert_null(redis_default());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_arrays_and_errors),
		cmocka_unit_test(test_eval_noscript),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_select_and_auth),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_default),
		cmocka_unit_test(test_down_and_back),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
