/*
 * test_mw_limit.c - unit tests for the "limit" middleware module
 * (src/middleware/limit.c): option validation with key paths, the
 * concurrency limit with its FIFO queue (let through by responses and by
 * abandoned exchanges, refused when full or after queueTimeoutMs), the
 * token bucket, keys per rule, name, backend and client, several rules at
 * once, and clean destruction with requests still queued; records reused
 * across many requests (ASan poisons the spare ones), a queued request
 * cancelled through on_cancel, tokens given back when another rule
 * refuses, and the remembered counter surviving sweeps. Shared rules
 * against a real redis-server (two pipelines standing for two instances):
 * a rate and a concurrency limit counted across both, a cancel while the
 * store is asked, and "onStoreDown" while it is stopped and after.
 *
 * Requests are walked through pipelines built from JSON; timers run on
 * the default libev loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mw_test.h"
#include <ev.h>

#include "buf.h"
#include "cfg_errors.h"
#include "config.h"
#include "middleware.h"
#include "mw_limit.h"
#include "redis.h"
#include "redis_test.h"

/* ---- helpers ---- */

/* A started pipeline with one limit module whose rules are RULES. */
static struct pipeline *limit_with(const char *rules)
{
	return mwt_start_okf("[{\"use\":\"limit\",\"rules\":%s}]", rules);
}

/* Asserts that the rules RULES are refused with an error containing WANT. */
static void expect_error(const char *rules, const char *want)
{
	char text[2048];
	snprintf(text, sizeof text, "[{\"use\":\"limit\",\"rules\":%s}]", rules);
	mwt_expect_error(text, want);
}

/* Walks a METHOD request about NAME (id ID) from CLIENT to BACKEND through PL. */
static void request(struct mwt_run *x, struct pipeline *pl, int id, const char *method,
		    const char *name, const char *client, const char *backend)
{
	mwt_forward(x, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = method, .name = name,
		.client = client, .backend = backend,
		.msg = json_pack("{s:s,s:i,s:s,s:{s:s?}}", "jsonrpc", "2.0", "id", id,
				 "method", method, "params", "name", name) });
}

/* Walks a tools/call of NAME (id ID) from CLIENT to BACKEND through PL. */
static void call_as(struct mwt_run *x, struct pipeline *pl, int id, const char *name,
		    const char *client, const char *backend)
{
	request(x, pl, id, "tools/call", name, client, backend);
}

/* Walks a tools/call of NAME with id ID through PL. */
static void call(struct mwt_run *x, struct pipeline *pl, int id, const char *name)
{
	call_as(x, pl, id, name, "c", "fx");
}

/* Walks the response back and frees what the chain frees. */
static void respond(struct mwt_run *x)
{
	assert_int_equal(x->done, 1);
	mwt_respond(x, &(struct mwt_msg){
		.msg = json_pack("{s:s,s:i,s:{}}", "jsonrpc", "2.0", "id", 1, "result") });
	mwt_run_release(x);
}

/* ---- options ---- */

/* Every option accepted in a valid combination. */
static void test_options_valid(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"tools\":[\"slow*\"],\"per\":\"name\",\"concurrency\":2,"
		"\"queue\":0,\"queueTimeoutMs\":500,\"timeoutMs\":3000},"
		"{\"methods\":\"resources/*\",\"backends\":\"fs\",\"clients\":[\"ci-*\"],"
		"\"per\":\"client\",\"rate\":0.5,\"burst\":3},{\"rate\":10},{\"timeoutMs\":1},"
		"{\"per\":\"backend\",\"concurrency\":1},{\"per\":\"rule\",\"concurrency\":1}]");
	assert_int_equal(pipeline_size(pl), 1);
	pipeline_unref(pl);
}

/* Each wrong option is reported at its own path. */
static void test_options_errors(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = mwt_build("[{\"use\":\"limit\"}]", &e);
	assert_null(pl);
	assert_true(mwt_has_error(&e, "t.json: /middleware/0/rules: missing"));
	cfg_errors_release(&e);
	expect_error("[]", "/middleware/0/rules: missing or not a non-empty array");
	expect_error("[3]", "/middleware/0/rules/0: a rule is an object");
	expect_error("[{\"tools\":[\"a\"]}]", "/middleware/0/rules/0: a rule needs");
	expect_error("[{\"concurrency\":0}]", "/middleware/0/rules/0/concurrency: must be a whole number from 1");
	expect_error("[{\"concurrency\":1.5}]", "/rules/0/concurrency: must be a whole number");
	expect_error("[{\"concurrency\":1,\"queue\":-1}]", "/rules/0/queue: must be a whole number from 0");
	expect_error("[{\"queue\":3,\"rate\":1}]", "/middleware/0/rules/0/queue: only with \"concurrency\"");
	expect_error("[{\"queueTimeoutMs\":3,\"rate\":1}]", "/rules/0/queueTimeoutMs: only with \"concurrency\"");
	expect_error("[{\"rate\":0}]", "/middleware/0/rules/0/rate: must be a number");
	expect_error("[{\"rate\":\"5/s\"}]", "/rules/0/rate: must be a number");
	expect_error("[{\"burst\":3,\"concurrency\":1}]", "/middleware/0/rules/0/burst: only with \"rate\"");
	expect_error("[{\"rate\":1,\"burst\":0}]", "/rules/0/burst: must be a whole number from 1");
	expect_error("[{\"timeoutMs\":0}]", "/middleware/0/rules/0/timeoutMs: must be a whole number");
	expect_error("[{\"rate\":1,\"per\":\"tool\"}]", "/middleware/0/rules/0/per: must be \"rule\"");
	expect_error("[{\"rate\":1,\"tools\":[]}]", "/middleware/0/rules/0/tools: empty");
	expect_error("[{\"rate\":1,\"tools\":[\"[x\"]}]", "/middleware/0/rules/0/tools/0: unterminated");
	expect_error("[{\"rate\":1,\"clients\":7}]", "/middleware/0/rules/0/clients");
	expect_error("[{\"rate\":1,\"tool\":\"x\"}]", "/middleware/0/rules/0/tool: unknown option");
}

/* ---- concurrency ---- */

/* Over the limit waits in order; a full queue refuses; responses let through. */
static void test_concurrency_queue(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"tools\":\"slow\",\"concurrency\":1,\"queue\":2}]");
	struct mwt_run a, b, c, d, other;
	call(&a, pl, 1, "slow");
	assert_int_equal(a.done, 1);
	call(&b, pl, 2, "slow");
	call(&c, pl, 3, "slow");
	assert_int_equal(b.done + c.done, 0);      /* both held */
	call(&d, pl, 4, "slow");
	assert_int_equal(d.done, 1);
	assert_int_equal(d.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&d), MW_LIMIT_BUSY);
	assert_non_null(strstr(mwt_error_message(&d), "1 running, 2 waiting (concurrency 1, queue 2)"));
	assert_non_null(strstr(mwt_error_message(&d), "limit rule /middleware/0/rules/0"));
	assert_int_equal(json_integer_value(json_object_get(d.got, "id")), 4);
	mwt_run_end(&d);
	call(&other, pl, 5, "echo");                /* no rule: not counted */
	assert_int_equal(other.verdict, MW_PASS);
	respond(&other);
	respond(&a);                                /* b goes, c still waits */
	assert_int_equal(b.done, 1);
	assert_int_equal(b.verdict, MW_PASS);
	assert_int_equal(json_integer_value(json_object_get(b.got, "id")), 2);
	assert_int_equal(c.done, 0);
	respond(&b);
	assert_int_equal(c.done, 1);
	respond(&c);
	call(&a, pl, 6, "slow");                    /* all free again */
	assert_int_equal(a.verdict, MW_PASS);
	respond(&a);
	pipeline_unref(pl);
}

/* An exchange ending without a response gives its slot back. */
static void test_abandon_frees_slot(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "x");
	call(&b, pl, 2, "y");
	assert_int_equal(b.done, 0);
	mwt_run_end(&a);             /* cancelled: on_abandon */
	assert_int_equal(b.done, 1);
	assert_int_equal(b.verdict, MW_PASS);
	mwt_run_end(&b);
	call(&a, pl, 3, "z");
	assert_int_equal(a.verdict, MW_PASS);
	respond(&a);
	pipeline_unref(pl);
}

/* A queued request is refused once queueTimeoutMs passes. */
static void test_queue_timeout(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queueTimeoutMs\":40}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "x");
	call(&b, pl, 2, "x");
	assert_int_equal(b.done, 0);
	mwt_run_until(&b.done, 2.0);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&b), MW_LIMIT_BUSY);
	assert_non_null(strstr(mwt_error_message(&b), "waited 0.04 s for a free slot"));
	mwt_run_end(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* Keys per name, backend and client count separately. */
static void test_per_keys(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"per\":\"name\",\"concurrency\":1,\"queue\":0}]");
	struct mwt_run a, b, c;
	call(&a, pl, 1, "one");
	call(&b, pl, 2, "two");
	assert_int_equal(b.verdict, MW_PASS);
	call(&c, pl, 3, "one");
	assert_int_equal(c.verdict, MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&c), "tool \"one\""));
	mwt_run_end(&c);
	respond(&a);
	respond(&b);
	pipeline_unref(pl);

	pl = limit_with("[{\"per\":\"backend\",\"concurrency\":1,\"queue\":0}]");
	call_as(&a, pl, 1, "t", "c", "fs");
	call_as(&b, pl, 2, "t", "c", "git");
	assert_int_equal(b.verdict, MW_PASS);
	call_as(&c, pl, 3, "u", "c", "fs");
	assert_int_equal(c.verdict, MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&c), "backend \"fs\""));
	mwt_run_end(&c);
	respond(&a);
	respond(&b);
	pipeline_unref(pl);

	pl = limit_with("[{\"per\":\"client\",\"clients\":\"ci-*\",\"concurrency\":1,\"queue\":0}]");
	call_as(&a, pl, 1, "t", "ci-1", "fs");
	call_as(&b, pl, 2, "t", "ci-2", "fs");
	assert_int_equal(b.verdict, MW_PASS);
	call_as(&c, pl, 3, "t", "ci-1", "fs");
	assert_int_equal(c.verdict, MW_REPLY);
	assert_non_null(strstr(mwt_error_message(&c), "client \"ci-1\""));
	mwt_run_end(&c);
	call_as(&c, pl, 4, "t", "alice", "fs");     /* not matched by "clients" */
	assert_int_equal(c.verdict, MW_PASS);
	respond(&c);
	respond(&a);
	respond(&b);
	pipeline_unref(pl);
}

/* Every matching rule applies; slots are taken in rule order, FIFO. */
static void test_several_rules(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"tools\":\"a*\",\"per\":\"name\",\"concurrency\":1},"
					 "{\"concurrency\":1}]");
	struct mwt_run a1, a2, b1, c1;
	call(&a1, pl, 1, "a1");
	assert_int_equal(a1.verdict, MW_PASS);
	call(&b1, pl, 2, "b1");      /* waits at rule 1 */
	call(&a2, pl, 3, "a1");      /* waits at rule 0 */
	assert_int_equal(a2.done + b1.done, 0);
	respond(&a1);                /* a2 takes rule 0, then queues behind b1 */
	assert_int_equal(b1.done, 1);
	assert_int_equal(a2.done, 0);
	call(&c1, pl, 4, "a1");      /* rule 0 is held by a2 */
	assert_int_equal(c1.done, 0);
	respond(&b1);
	assert_int_equal(a2.done, 1);
	assert_int_equal(a2.verdict, MW_PASS);
	assert_int_equal(c1.done, 0);
	respond(&a2);
	assert_int_equal(c1.done, 1);
	respond(&c1);
	pipeline_unref(pl);
}

/* Without "methods", only the methods that do work are counted. */
static void test_default_methods(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "t");
	request(&b, pl, 2, "tools/list", NULL, "c", "fx");
	assert_int_equal(b.verdict, MW_PASS);
	respond(&b);
	request(&b, pl, 3, "prompts/get", "p", "c", "fx");
	assert_int_equal(mwt_error_code(&b), MW_LIMIT_BUSY);
	mwt_run_end(&b);
	respond(&a);
	pipeline_unref(pl);
	pl = limit_with("[{\"methods\":\"*\",\"concurrency\":1,\"queue\":0}]");
	call(&a, pl, 1, "t");
	request(&b, pl, 2, "tools/list", NULL, "c", "fx");
	assert_int_equal(mwt_error_code(&b), MW_LIMIT_BUSY);
	mwt_run_end(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* Each method that does work is counted, and only those; "tools" alone
 * means tools/call. */
static void test_method_classes(void **state)
{
	(void)state;
	static const char *const work[] = {
		"tools/call", "prompts/get", "resources/read", "completion/complete",
	};
	static const char *const other[] = {
		"tools/list", "prompts/list", "resources/list", "resources/subscribe",
		"completion/x", "ping", "logging/setLevel", "t", "",
	};
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0}]");
	struct mwt_run a, b;
	for (size_t i = 0; i < sizeof work / sizeof work[0]; i++) {
		request(&a, pl, 1, work[i], "n", "c", "fx");
		assert_int_equal(a.verdict, MW_PASS);
		request(&b, pl, 2, work[(i + 1) % 4], "n", "c", "fx");
		assert_int_equal(mwt_error_code(&b), MW_LIMIT_BUSY);
		mwt_run_end(&b);
		for (size_t j = 0; j < sizeof other / sizeof other[0]; j++) {
			request(&b, pl, 3, other[j], NULL, "c", "fx");
			assert_int_equal(b.verdict, MW_PASS);
			respond(&b);
		}
		respond(&a);
	}
	pipeline_unref(pl);
	pl = limit_with("[{\"tools\":\"n\",\"concurrency\":1,\"queue\":0}]");
	call(&a, pl, 1, "n");
	request(&b, pl, 2, "prompts/get", "n", "c", "fx");
	assert_int_equal(b.verdict, MW_PASS);
	respond(&b);
	request(&b, pl, 3, "tools/call", "n", "c", "fx");
	assert_int_equal(mwt_error_code(&b), MW_LIMIT_BUSY);
	mwt_run_end(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* ---- rate ---- */

/* The bucket allows a burst, then refuses with retryAfterMs, then refills. */
static void test_rate(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"tools\":\"t\",\"rate\":20,\"burst\":2}]");
	struct mwt_run x;
	ev_now_update(EV_DEFAULT);
	for (int i = 0; i < 2; i++) {
		call(&x, pl, i, "t");
		assert_int_equal(x.verdict, MW_PASS);
		respond(&x);
	}
	call(&x, pl, 3, "t");
	assert_int_equal(x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	assert_non_null(strstr(mwt_error_message(&x), "reached (20 per second, burst 2); retry in 0.0"));
	json_int_t retry = json_integer_value(json_object_get(json_object_get(
		json_object_get(x.got, "error"), "data"), "retryAfterMs"));
	assert_true(retry >= 1 && retry <= 51);
	mwt_run_end(&x);
	call(&x, pl, 4, "other");    /* not matched: no bucket */
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	mwt_run_for(0.06);
	ev_now_update(EV_DEFAULT);
	call(&x, pl, 5, "t");
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	pipeline_unref(pl);
}

/* The rate is checked before any slot is taken or waited for. */
static void test_rate_before_slots(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0},{\"rate\":0.001,\"burst\":1}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "t");
	call(&b, pl, 2, "t");        /* over both limits: the rate answers, no queueing */
	assert_int_equal(b.done, 1);
	assert_int_equal(mwt_error_code(&b), MW_LIMIT_RATE);
	mwt_run_end(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* ---- other traffic, timeouts, destruction ---- */

/* Notifications and requests towards the client are never limited. */
static void test_other_traffic(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "t");
	mwt_forward(&b, pl, &(struct mwt_msg){ .dir = MW_TO_CLIENT, .kind = RPC_REQUEST,
		.method = "sampling/createMessage",
		.msg = json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 9, "method",
				 "sampling/createMessage") });
	assert_int_equal(b.verdict, MW_PASS);
	respond(&b);
	mwt_forward(&b, pl, &(struct mwt_msg){ .kind = RPC_NOTIFICATION,
		.method = "notifications/roots/list_changed",
		.msg = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
				 "notifications/roots/list_changed") });
	assert_int_equal(b.verdict, MW_PASS);
	mwt_run_release(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* A timeout that cannot end the request yet (no chain here) keeps trying
 * quietly until the response comes, which stops it. */
static void test_timeout_until_response(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"timeoutMs\":20}]");
	struct mwt_run a;
	call(&a, pl, 1, "t");
	assert_int_equal(a.verdict, MW_PASS);
	mwt_run_for(0.15);           /* mw_abort returns -1 without a chain */
	respond(&a);
	mwt_run_for(0.1);
	pipeline_unref(pl);
}

/* Destroying the module with requests queued frees them. */
static void test_destroy_with_queue(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"timeoutMs\":1000}]");
	struct mwt_run a, b;
	call(&a, pl, 1, "t");
	call(&b, pl, 2, "t");
	assert_int_equal(b.done, 0);
	pipeline_unref(pl);          /* as at exit with both still open */
	mwt_run_release(&a);
	mwt_run_release(&b);
	mwt_run_for(0.05);
}

/* ---- records, cancellation, counters ---- */

#define MANY 600   /* more than the spare records kept and the table's first size */

/* Many requests at once, answered out of order, round after round: the
 * records are reused (ASan poisons the spare ones) and the counts stay right. */
static void test_records_reused(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":600,\"queue\":0,\"timeoutMs\":60000}]");
	struct mwt_run *x = calloc(MANY, sizeof *x), extra;
	assert_non_null(x);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < MANY; i++) {
			call(&x[i], pl, i, "t");
			assert_int_equal(x[i].verdict, MW_PASS);
		}
		call(&extra, pl, MANY, "t");         /* all slots taken */
		assert_int_equal(mwt_error_code(&extra), MW_LIMIT_BUSY);
		mwt_run_end(&extra);
		for (int i = round % 2; i < MANY; i += 2)
			respond(&x[i]);
		for (int i = 0; i < MANY / 2; i++) { /* half the slots are free again */
			call(&extra, pl, MANY + i, "t");
			assert_int_equal(extra.verdict, MW_PASS);
			respond(&extra);
		}
		for (int i = 1 - round % 2; i < MANY; i += 2) {
			if (i % 3)
				respond(&x[i]);
			else
				mwt_run_end(&x[i]);          /* abandoned */
		}
	}
	pipeline_unref(pl);
	free(x);
}

/* A queued request cancelled by its client leaves the queue at once and
 * gives back the slots it held; the chain never hears from its walk again. */
static void test_cancel_queued(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":2,\"queue\":0},"
					 "{\"tools\":\"slow\",\"concurrency\":1,\"queue\":1}]");
	struct mwt_run a, b, c, d;
	call(&a, pl, 1, "slow");
	call(&b, pl, 2, "slow");     /* holds a slot of rule 0, waits at rule 1 */
	assert_int_equal(b.done, 0);
	assert_true(mw_walk_cancel(&b.w));
	assert_int_equal(b.done, 0);
	mwt_run_release(&b);
	call(&c, pl, 3, "other");    /* rule 0 has room again */
	assert_int_equal(c.verdict, MW_PASS);
	call(&d, pl, 4, "slow");     /* rule 0 full now */
	assert_int_equal(mwt_error_code(&d), MW_LIMIT_BUSY);
	mwt_run_end(&d);
	respond(&a);                 /* nobody waits any more */
	call(&d, pl, 5, "slow");
	assert_int_equal(d.verdict, MW_PASS);
	respond(&d);
	respond(&c);
	pipeline_unref(pl);
}

/* A request one rule's bucket refuses takes no token from the others. */
static void test_rate_given_back(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"rate\":0.001,\"burst\":2},"
					 "{\"tools\":\"t\",\"rate\":0.001,\"burst\":1}]");
	struct mwt_run x;
	call(&x, pl, 1, "t");
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	call(&x, pl, 2, "t");        /* rule 1 is empty: rule 0 keeps its token */
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	assert_non_null(strstr(mwt_error_message(&x), "limit rule /middleware/0/rules/1"));
	mwt_run_end(&x);
	call(&x, pl, 3, "u");
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	call(&x, pl, 4, "u");
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	assert_non_null(strstr(mwt_error_message(&x), "limit rule /middleware/0/rules/0"));
	mwt_run_end(&x);
	pipeline_unref(pl);
}

/* Counters of keys seen once are swept, the one remembered last included,
 * while a busy one stays and keeps counting. */
static void test_counter_sweep(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"per\":\"name\",\"concurrency\":1,\"queue\":0}]");
	static char names[1100][8];
	struct mwt_run a, x;
	call(&a, pl, 1, "busy");
	for (int i = 0; i < 1100; i++) {
		snprintf(names[i], sizeof names[i], "k%d", i);
		call(&x, pl, i, names[i]);
		assert_int_equal(x.verdict, MW_PASS);
		respond(&x);
	}
	call(&x, pl, 2, "busy");
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_BUSY);
	mwt_run_end(&x);
	call(&x, pl, 3, names[0]);
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	respond(&a);
	call(&a, pl, 4, "busy");
	assert_int_equal(a.verdict, MW_PASS);
	respond(&a);
	pipeline_unref(pl);
}

/* A rule counting as a whole counts per module: after a reload the new
 * pipeline's module starts from zero while the old one finishes its own. */
static void test_rule_counter_per_module(void **state)
{
	(void)state;
	const char *rules = "[{\"concurrency\":1,\"queue\":0}]";
	struct pipeline *old = limit_with(rules), *pl;
	struct mwt_run a, b, c;
	call(&a, old, 1, "t");
	pl = limit_with(rules);      /* the reload */
	call(&b, pl, 2, "t");
	assert_int_equal(b.verdict, MW_PASS);
	call(&c, old, 3, "t");
	assert_int_equal(mwt_error_code(&c), MW_LIMIT_BUSY);
	mwt_run_end(&c);
	call(&c, pl, 4, "t");
	assert_int_equal(mwt_error_code(&c), MW_LIMIT_BUSY);
	mwt_run_end(&c);
	respond(&a);
	pipeline_unref(old);
	respond(&b);
	call(&b, pl, 5, "t");
	assert_int_equal(b.verdict, MW_PASS);
	respond(&b);
	pipeline_unref(pl);
}

/* ---- requests that travel unparsed ---- */

/* What a raw walk's done saw of the bytes (they are freed once it returns). */
struct xraw {
	struct mwt_run x;        /* must be first */
	char raw[512];
	char id[32];
};

/* The walk's end: keeps the message and a copy of the bytes it carries. */
static void on_done_raw(struct mw_walk *w, enum mw_verdict v)
{
	struct xraw *r = (struct xraw *)(void *)w;
	mwt_on_done(w, v);
	r->raw[0] = r->id[0] = '\0';
	if (w->m->raw)
		snprintf(r->raw, sizeof r->raw, "%.*s", (int)w->m->raw_len, w->m->raw);
	if (w->m->raw && w->m->js.span[MSG_SPAN_ID].p)
		snprintf(r->id, sizeof r->id, "%.*s", (int)w->m->js.span[MSG_SPAN_ID].n,
			 w->m->js.span[MSG_SPAN_ID].p);
}

/* Walks TEXT, a tools/call of NAME, unparsed from "c" to "fx" through PL. */
static void call_raw(struct xraw *r, struct pipeline *pl, const char *name, const char *text)
{
	memset(r, 0, sizeof *r);
	mwt_forward(&r->x, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = "tools/call",
		.name = name, .client = "c", .backend = "fx", .text = text, .raw = true,
		.done = on_done_raw });
}

/* Walks an unparsed response back: it stays unread. */
static void respond_raw(struct xraw *r)
{
	assert_int_equal(r->x.done, 1);
	mwt_respond(&r->x, &(struct mwt_msg){
		.text = "{\"jsonrpc\":\"2.0\",\"id\":31,\"result\":{}}", .raw = true });
	assert_null(r->x.got);
	assert_string_equal(r->id, "31");
	mwt_run_release(&r->x);
}

#define LIM_CALL(id, name) "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"tools/call\"," \
	"\"params\":{\"name\":\"" name "\",\"arguments\":{\"n\":1.50}}}"

/* Counting needs no message: requests and responses pass unread. */
static void test_raw_unread(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":2},{\"tools\":\"t\",\"rate\":0.001,\"burst\":1}]");
	struct xraw a, b;
	call_raw(&a, pl, "t", LIM_CALL("1", "t"));
	assert_int_equal(a.x.done, 1);
	assert_int_equal(a.x.verdict, MW_PASS);
	assert_null(a.x.got);
	assert_string_equal(a.raw, LIM_CALL("1", "t"));
	/* refused without reading: the module's reply is the message */
	call_raw(&b, pl, "t", LIM_CALL("2", "t"));
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&b.x), MW_LIMIT_RATE);
	mwt_run_end(&b.x);
	respond_raw(&a);
	pipeline_unref(pl);
}

/* A queued request keeps its bytes: released later, the right bytes go on. */
static void test_raw_queued_then_released(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":1}]");
	static const char text_b[] = LIM_CALL("\"b\"", "slow");
	struct xraw a, b;
	call_raw(&a, pl, "slow", LIM_CALL("1", "slow"));
	assert_int_equal(a.x.verdict, MW_PASS);
	call_raw(&b, pl, "slow", text_b);
	assert_int_equal(b.x.done, 0);            /* queued */
	assert_int_equal(b.x.w.held, 1);
	assert_non_null(b.x.m.own);           /* the walk keeps its own copy */
	assert_ptr_not_equal(b.x.m.raw, b.x.text);
	memset(b.x.text, 'X', strlen(b.x.text));  /* the owner (the transport) reuses its buffer */
	respond_raw(&a);                          /* the slot frees: b goes */
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.verdict, MW_PASS);
	assert_null(b.x.got);
	assert_string_equal(b.raw, text_b);
	assert_string_equal(b.id, "\"b\"");
	assert_non_null(b.x.m.own);           /* kept by the message until its owner frees it */
	respond_raw(&b);
	pipeline_unref(pl);
}

/* A queued unparsed request that waits too long is refused with an error. */
static void test_raw_queue_timeout(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queueTimeoutMs\":30}]");
	struct xraw a, b;
	call_raw(&a, pl, "x", LIM_CALL("1", "x"));
	call_raw(&b, pl, "x", LIM_CALL("2", "x"));
	assert_int_equal(b.x.done, 0);
	mwt_run_until(&b.x.done, 2.0);
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&b.x), MW_LIMIT_BUSY);
	assert_non_null(strstr(mwt_error_message(&b.x), "without getting one"));
	mwt_run_end(&b.x);
	respond_raw(&a);
	pipeline_unref(pl);
}

/* ---- shared rules ---- */

/* Shared options: the store, "onStoreDown", no queue. */
static void test_shared_options(void **state)
{
	(void)state;
	expect_error("[{\"rate\":1,\"shared\":true}]",
		     "/middleware/0/rules/0/shared: needs the top-level \"redis\" section");
	expect_error("[{\"rate\":1,\"onStoreDown\":\"closed\"}]",
		     "/middleware/0/rules/0/onStoreDown: only with \"shared\": true");
	expect_error("[{\"rate\":1,\"shared\":1}]", "/rules/0/shared: must be true or false");
	struct cfg_errors e = { 0 };
	json_t *arr = mwt_json("[{\"use\":\"limit\",\"rules\":[{\"concurrency\":1,\"shared\":true,"
			       "\"queue\":3},{\"rate\":1,\"shared\":true,\"onStoreDown\":\"half\"}]}]");
	assert_null(pipeline_build_store(arr, "t.json", "/middleware", &e, true));
	assert_true(mwt_has_error(&e, "/rules/0/queue: not with \"shared\""));
	assert_true(mwt_has_error(&e, "/rules/1/onStoreDown: must be \"open\""));
	cfg_errors_release(&e);
	json_decref(arr);
}

/* The world of a shared test: a server, the store, two instances. */
struct shared {
	pid_t server;
	unsigned port;
	struct redis *store;
	struct pipeline *a, *b;
};

/* Starts a server and the store, and two pipelines of the rules RULES. */
static void shared_start(struct shared *w, const char *rules)
{
	char text[2048];
	struct cfg_errors e = { 0 };
	w->port = rdt_free_port();
	w->server = rdt_start(w->port);
	w->store = redis_new(&(struct redis_opts){ .port = w->port, .timeout = 0.5 });
	assert_non_null(w->store);
	redis_set_default(w->store);
	for (int i = 0; i < 200 && !redis_up(w->store); i++)
		rdt_run_for(0.01);
	assert_true(redis_up(w->store));
	snprintf(text, sizeof text, "[{\"use\":\"limit\",\"rules\":%s}]", rules);
	json_t *arr = mwt_json(text);
	w->a = pipeline_build_store(arr, "t.json", "/middleware", &e, true);
	w->b = pipeline_build_store(arr, "t.json", "/middleware", &e, true);
	json_decref(arr);
	assert_int_equal(e.count, 0);
	assert_non_null(w->a);
	assert_non_null(w->b);
	cfg_errors_release(&e);
}

/* Stops what shared_start started. */
static void shared_stop(struct shared *w)
{
	pipeline_unref(w->a);
	pipeline_unref(w->b);
	redis_free(w->store);
	rdt_stop(w->server);
}

/* Calls tool NAME (id ID) through PL and waits for the store's answer. */
static void shared_call(struct mwt_run *x, struct pipeline *pl, int id, const char *name)
{
	call(x, pl, id, name);
	assert_int_equal(x->done, 0);     /* held while the store answers */
	assert_true(rdt_run_until(&x->done, 3));
}

/* Rate 3 a minute, shared: the fourth call across both instances is refused. */
static void test_shared_rate(void **state)
{
	(void)state;
	struct shared w;
	struct mwt_run x;
	shared_start(&w, "[{\"shared\":true,\"rate\":0.05,\"burst\":3}]");
	for (int i = 0; i < 3; i++) {
		shared_call(&x, i % 2 ? w.b : w.a, i + 1, "t");
		assert_int_equal(x.verdict, MW_PASS);
		respond(&x);
	}
	shared_call(&x, w.b, 4, "t");
	assert_int_equal(x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	assert_non_null(strstr(mwt_error_message(&x), "across instances"));
	assert_true(json_integer_value(mwt_at(x.got, "error.data.retryAfterMs")) > 1000);
	mwt_run_end(&x);
	shared_call(&x, w.a, 5, "t");
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	mwt_run_end(&x);
	shared_stop(&w);
}

/* Concurrency 1, shared: the second at once is refused, the slot comes
 * back with the first's response; a cancel while asking gives it back too. */
static void test_shared_concurrency(void **state)
{
	(void)state;
	struct shared w;
	struct mwt_run x, y, z;
	shared_start(&w, "[{\"shared\":true,\"concurrency\":1,\"tools\":\"slow\"},"
		     "{\"concurrency\":1,\"queue\":1,\"tools\":\"slow\"}]");
	shared_call(&x, w.a, 1, "slow");
	assert_int_equal(x.verdict, MW_PASS);
	shared_call(&y, w.b, 2, "slow");
	assert_int_equal(y.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&y), MW_LIMIT_BUSY);
	assert_non_null(strstr(mwt_error_message(&y), "across instances (shared concurrency 1)"));
	mwt_run_end(&y);
	respond(&x);                           /* the lease goes */
	shared_call(&y, w.b, 3, "slow");
	assert_int_equal(y.verdict, MW_PASS);
	respond(&y);
	call(&z, w.a, 4, "slow");              /* cancelled while the store is asked */
	assert_int_equal(z.done, 0);
	assert_true(mw_walk_cancel(&z.w));
	mwt_run_release(&z);
	rdt_run_for(0.1);
	shared_call(&y, w.b, 5, "slow");       /* its lease was given back */
	assert_int_equal(y.verdict, MW_PASS);
	shared_call(&z, w.a, 6, "slow");       /* over the shared limit: no queue */
	assert_int_equal(mwt_error_code(&z), MW_LIMIT_BUSY);
	mwt_run_end(&z);
	respond(&y);
	shared_stop(&w);
}

/* The store stopped: an "open" rule lets requests through, a "closed" one
 * refuses them; all is counted again once it is back. */
static void test_shared_store_down(void **state)
{
	(void)state;
	struct shared w;
	struct mwt_run x;
	struct buf m = { 0 };
	shared_start(&w, "[{\"shared\":true,\"concurrency\":5,\"tools\":\"open\"},"
		     "{\"shared\":true,\"rate\":0.05,\"burst\":1,\"tools\":\"closed\","
		     "\"onStoreDown\":\"closed\"}]");
	rdt_stop(w.server);
	for (int i = 0; i < 100 && redis_up(w.store); i++)
		rdt_run_for(0.01);
	assert_false(redis_up(w.store));
	shared_call(&x, w.a, 1, "open");
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	shared_call(&x, w.b, 2, "closed");
	assert_int_equal(x.verdict, MW_REPLY);
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_BUSY);
	assert_non_null(strstr(mwt_error_message(&x), "the shared store is unavailable (down)"));
	mwt_run_end(&x);
	redis_metrics(w.store, &m);
	buf_append(&m, "", 1);
	assert_non_null(strstr(m.data,
		"mcp_chain_redis_fallbacks_total{use=\"limit\",outcome=\"open\"} 1\n"));
	assert_non_null(strstr(m.data,
		"mcp_chain_redis_fallbacks_total{use=\"limit\",outcome=\"closed\"} 1\n"));
	buf_release(&m);
	w.server = rdt_start(w.port);
	for (int i = 0; i < 800 && !redis_up(w.store); i++)
		rdt_run_for(0.01);
	assert_true(redis_up(w.store));
	shared_call(&x, w.b, 3, "closed");
	assert_int_equal(x.verdict, MW_PASS);
	respond(&x);
	shared_call(&x, w.a, 4, "closed");     /* counted in the store again */
	assert_int_equal(mwt_error_code(&x), MW_LIMIT_RATE);
	mwt_run_end(&x);
	shared_stop(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_valid),
		cmocka_unit_test(test_options_errors),
		cmocka_unit_test(test_concurrency_queue),
		cmocka_unit_test(test_abandon_frees_slot),
		cmocka_unit_test(test_queue_timeout),
		cmocka_unit_test(test_per_keys),
		cmocka_unit_test(test_several_rules),
		cmocka_unit_test(test_default_methods),
		cmocka_unit_test(test_method_classes),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_rate_before_slots),
		cmocka_unit_test(test_other_traffic),
		cmocka_unit_test(test_timeout_until_response),
		cmocka_unit_test(test_destroy_with_queue),
		cmocka_unit_test(test_records_reused),
		cmocka_unit_test(test_cancel_queued),
		cmocka_unit_test(test_rate_given_back),
		cmocka_unit_test(test_counter_sweep),
		cmocka_unit_test(test_rule_counter_per_module),
		cmocka_unit_test(test_raw_unread),
		cmocka_unit_test(test_raw_queued_then_released),
		cmocka_unit_test(test_raw_queue_timeout),
		cmocka_unit_test(test_shared_options),
		cmocka_unit_test(test_shared_rate),
		cmocka_unit_test(test_shared_concurrency),
		cmocka_unit_test(test_shared_store_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
