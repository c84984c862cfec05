/*
 * test_mw_limit.c - unit tests for the "limit" middleware module
 * (src/middleware/limit.c): option validation with key paths, the
 * concurrency limit with its FIFO queue (let through by responses and by
 * abandoned exchanges, refused when full or after queueTimeoutMs), the
 * token bucket, keys per rule, name, backend and client, several rules at
 * once, and clean destruction with requests still queued.
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

#include "config.h"
#include "middleware.h"
#include "mw_limit.h"

/* ---- helpers ---- */

/* A started pipeline with one limit module whose rules are RULES. */
static struct pipeline *limit_with(const char *rules)
{
	char text[2048];
	struct cfg_errors e = { 0 };
	snprintf(text, sizeof text, "[{\"use\":\"limit\",\"rules\":%s}]", rules);
	struct pipeline *pl = mwt_build(text, &e);
	for (size_t i = 0; i < e.count; i++)
		print_message("  error: %s\n", e.lines[i]);
	assert_non_null(pl);
	assert_int_equal(pipeline_start(pl), 0);
	cfg_errors_release(&e);
	return pl;
}

/* Asserts that the rules RULES are refused with an error containing WANT. */
static void expect_error(const char *rules, const char *want)
{
	char text[2048];
	struct cfg_errors e = { 0 };
	snprintf(text, sizeof text, "[{\"use\":\"limit\",\"rules\":%s}]", rules);
	struct pipeline *pl = mwt_build(text, &e);
	if (pl || !mwt_has_error(&e, want)) {
		for (size_t i = 0; i < e.count; i++)
			print_message("  error: %s\n", e.lines[i]);
		pipeline_unref(pl);
		cfg_errors_release(&e);
		fail_msg("expected an error containing \"%s\" for %s", want, text);
	}
	cfg_errors_release(&e);
}

/* One exchange as the chain runs it. */
struct xch {
	struct mw_walk w;
	struct mw_ctx ctx;
	json_t *got;
	enum mw_verdict v;
	int done;
};

/* The walk's end: keeps the message. */
static void on_done(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct xch *x = (struct xch *)(void *)w;
	json_decref(x->got);
	x->got = msg;
	x->v = v;
	x->done++;
}

/* Walks a METHOD request about NAME (id ID) from CLIENT to BACKEND through PL. */
static void request(struct xch *x, struct pipeline *pl, int id, const char *method,
		    const char *name, const char *client, const char *backend)
{
	memset(x, 0, sizeof *x);
	x->ctx.dir = MW_TO_BACKEND;
	x->ctx.kind = RPC_REQUEST;
	x->ctx.method = method;
	x->ctx.name = name;
	x->ctx.client = client;
	x->ctx.backend = backend;
	x->w.stage[0] = pl;
	x->w.ctx = &x->ctx;
	x->w.msg = json_pack("{s:s,s:i,s:s,s:{s:s?}}", "jsonrpc", "2.0", "id", id,
			     "method", method, "params", "name", name);
	x->w.done = on_done;
	mw_walk_forward(&x->w);
}

/* Walks a tools/call of NAME (id ID) from CLIENT to BACKEND through PL. */
static void call_as(struct xch *x, struct pipeline *pl, int id, const char *name,
		    const char *client, const char *backend)
{
	request(x, pl, id, "tools/call", name, client, backend);
}

/* Walks a tools/call of NAME with id ID through PL. */
static void call(struct xch *x, struct pipeline *pl, int id, const char *name)
{
	call_as(x, pl, id, name, "c", "fx");
}

/* Walks the response back and frees what the chain frees. */
static void respond(struct xch *x)
{
	assert_int_equal(x->done, 1);
	assert_int_equal(x->v, MW_PASS);
	x->ctx.kind = RPC_RESPONSE;
	json_decref(x->got);
	x->got = NULL;
	x->w.msg = json_pack("{s:s,s:i,s:{}}", "jsonrpc", "2.0", "id", 1, "result");
	mw_walk_back(&x->w);
	assert_int_equal(x->done, 2);
	json_decref(x->got);
	json_decref(x->ctx.scratch);
	x->got = x->ctx.scratch = NULL;
}

/* Ends an exchange that was answered by the module or ends unanswered. */
static void finish(struct xch *x)
{
	if (x->done == 1 && x->v == MW_PASS)
		mw_walk_abandon(&x->w);
	json_decref(x->got);
	json_decref(x->ctx.scratch);
	x->got = x->ctx.scratch = NULL;
}

/* The error code of X's reply (0 when none). */
static json_int_t code_of(const struct xch *x)
{
	return json_integer_value(json_object_get(json_object_get(x->got, "error"), "code"));
}

/* The error message of X's reply. */
static const char *message_of(const struct xch *x)
{
	return json_string_value(json_object_get(json_object_get(x->got, "error"), "message"));
}

/* Wakes the loop up. */
static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Runs the loop until *FLAG becomes nonzero or SECONDS pass. */
static void run_until(const int *flag, double seconds)
{
	double end = ev_time() + seconds;
	while (!*flag && ev_time() < end) {
		ev_timer t;
		ev_timer_init(&t, tick, 0.01, 0.);
		ev_timer_start(EV_DEFAULT, &t);
		ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &t);
	}
}

/* Runs the loop for SECONDS. */
static void run_for(double seconds)
{
	int never = 0;
	run_until(&never, seconds);
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
	struct xch a, b, c, d, other;
	call(&a, pl, 1, "slow");
	assert_int_equal(a.done, 1);
	call(&b, pl, 2, "slow");
	call(&c, pl, 3, "slow");
	assert_int_equal(b.done + c.done, 0);      /* both held */
	call(&d, pl, 4, "slow");
	assert_int_equal(d.done, 1);
	assert_int_equal(d.v, MW_REPLY);
	assert_int_equal(code_of(&d), MW_LIMIT_BUSY);
	assert_non_null(strstr(message_of(&d), "1 running, 2 waiting (concurrency 1, queue 2)"));
	assert_non_null(strstr(message_of(&d), "limit rule /middleware/0/rules/0"));
	assert_int_equal(json_integer_value(json_object_get(d.got, "id")), 4);
	finish(&d);
	call(&other, pl, 5, "echo");                /* no rule: not counted */
	assert_int_equal(other.v, MW_PASS);
	respond(&other);
	respond(&a);                                /* b goes, c still waits */
	assert_int_equal(b.done, 1);
	assert_int_equal(b.v, MW_PASS);
	assert_int_equal(json_integer_value(json_object_get(b.got, "id")), 2);
	assert_int_equal(c.done, 0);
	respond(&b);
	assert_int_equal(c.done, 1);
	respond(&c);
	call(&a, pl, 6, "slow");                    /* all free again */
	assert_int_equal(a.v, MW_PASS);
	respond(&a);
	pipeline_unref(pl);
}

/* An exchange ending without a response gives its slot back. */
static void test_abandon_frees_slot(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1}]");
	struct xch a, b;
	call(&a, pl, 1, "x");
	call(&b, pl, 2, "y");
	assert_int_equal(b.done, 0);
	finish(&a);                                 /* cancelled: on_abandon */
	assert_int_equal(b.done, 1);
	assert_int_equal(b.v, MW_PASS);
	finish(&b);
	call(&a, pl, 3, "z");
	assert_int_equal(a.v, MW_PASS);
	respond(&a);
	pipeline_unref(pl);
}

/* A queued request is refused once queueTimeoutMs passes. */
static void test_queue_timeout(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queueTimeoutMs\":40}]");
	struct xch a, b;
	call(&a, pl, 1, "x");
	call(&b, pl, 2, "x");
	assert_int_equal(b.done, 0);
	run_until(&b.done, 2.0);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.v, MW_REPLY);
	assert_int_equal(code_of(&b), MW_LIMIT_BUSY);
	assert_non_null(strstr(message_of(&b), "waited 0.04 s for a free slot"));
	finish(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* Keys per name, backend and client count separately. */
static void test_per_keys(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"per\":\"name\",\"concurrency\":1,\"queue\":0}]");
	struct xch a, b, c;
	call(&a, pl, 1, "one");
	call(&b, pl, 2, "two");
	assert_int_equal(b.v, MW_PASS);
	call(&c, pl, 3, "one");
	assert_int_equal(c.v, MW_REPLY);
	assert_non_null(strstr(message_of(&c), "tool \"one\""));
	finish(&c);
	respond(&a);
	respond(&b);
	pipeline_unref(pl);

	pl = limit_with("[{\"per\":\"backend\",\"concurrency\":1,\"queue\":0}]");
	call_as(&a, pl, 1, "t", "c", "fs");
	call_as(&b, pl, 2, "t", "c", "git");
	assert_int_equal(b.v, MW_PASS);
	call_as(&c, pl, 3, "u", "c", "fs");
	assert_int_equal(c.v, MW_REPLY);
	assert_non_null(strstr(message_of(&c), "backend \"fs\""));
	finish(&c);
	respond(&a);
	respond(&b);
	pipeline_unref(pl);

	pl = limit_with("[{\"per\":\"client\",\"clients\":\"ci-*\",\"concurrency\":1,\"queue\":0}]");
	call_as(&a, pl, 1, "t", "ci-1", "fs");
	call_as(&b, pl, 2, "t", "ci-2", "fs");
	assert_int_equal(b.v, MW_PASS);
	call_as(&c, pl, 3, "t", "ci-1", "fs");
	assert_int_equal(c.v, MW_REPLY);
	assert_non_null(strstr(message_of(&c), "client \"ci-1\""));
	finish(&c);
	call_as(&c, pl, 4, "t", "alice", "fs");     /* not matched by "clients" */
	assert_int_equal(c.v, MW_PASS);
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
	struct xch a1, a2, b1, c1;
	call(&a1, pl, 1, "a1");
	assert_int_equal(a1.v, MW_PASS);
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
	assert_int_equal(a2.v, MW_PASS);
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
	struct xch a, b;
	call(&a, pl, 1, "t");
	request(&b, pl, 2, "tools/list", NULL, "c", "fx");
	assert_int_equal(b.v, MW_PASS);
	respond(&b);
	request(&b, pl, 3, "prompts/get", "p", "c", "fx");
	assert_int_equal(code_of(&b), MW_LIMIT_BUSY);
	finish(&b);
	respond(&a);
	pipeline_unref(pl);
	pl = limit_with("[{\"methods\":\"*\",\"concurrency\":1,\"queue\":0}]");
	call(&a, pl, 1, "t");
	request(&b, pl, 2, "tools/list", NULL, "c", "fx");
	assert_int_equal(code_of(&b), MW_LIMIT_BUSY);
	finish(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* ---- rate ---- */

/* The bucket allows a burst, then refuses with retryAfterMs, then refills. */
static void test_rate(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"tools\":\"t\",\"rate\":20,\"burst\":2}]");
	struct xch x;
	ev_now_update(EV_DEFAULT);
	for (int i = 0; i < 2; i++) {
		call(&x, pl, i, "t");
		assert_int_equal(x.v, MW_PASS);
		respond(&x);
	}
	call(&x, pl, 3, "t");
	assert_int_equal(x.v, MW_REPLY);
	assert_int_equal(code_of(&x), MW_LIMIT_RATE);
	assert_non_null(strstr(message_of(&x), "reached (20 per second, burst 2); retry in 0.0"));
	json_int_t retry = json_integer_value(json_object_get(json_object_get(
		json_object_get(x.got, "error"), "data"), "retryAfterMs"));
	assert_true(retry >= 1 && retry <= 51);
	finish(&x);
	call(&x, pl, 4, "other");    /* not matched: no bucket */
	assert_int_equal(x.v, MW_PASS);
	respond(&x);
	run_for(0.06);
	ev_now_update(EV_DEFAULT);
	call(&x, pl, 5, "t");
	assert_int_equal(x.v, MW_PASS);
	respond(&x);
	pipeline_unref(pl);
}

/* The rate is checked before any slot is taken or waited for. */
static void test_rate_before_slots(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0},{\"rate\":0.001,\"burst\":1}]");
	struct xch a, b;
	call(&a, pl, 1, "t");
	call(&b, pl, 2, "t");        /* over both limits: the rate answers, no queueing */
	assert_int_equal(b.done, 1);
	assert_int_equal(code_of(&b), MW_LIMIT_RATE);
	finish(&b);
	respond(&a);
	pipeline_unref(pl);
}

/* ---- other traffic, timeouts, destruction ---- */

/* Notifications and requests towards the client are never limited. */
static void test_other_traffic(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":0}]");
	struct xch a, b;
	call(&a, pl, 1, "t");
	memset(&b, 0, sizeof b);
	b.ctx.dir = MW_TO_CLIENT;
	b.ctx.kind = RPC_REQUEST;
	b.ctx.method = "sampling/createMessage";
	b.w.stage[0] = pl;
	b.w.ctx = &b.ctx;
	b.w.msg = json_pack("{s:s,s:i,s:s}", "jsonrpc", "2.0", "id", 9, "method",
			    "sampling/createMessage");
	b.w.done = on_done;
	mw_walk_forward(&b.w);
	assert_int_equal(b.v, MW_PASS);
	respond(&b);
	memset(&b, 0, sizeof b);
	b.ctx.dir = MW_TO_BACKEND;
	b.ctx.kind = RPC_NOTIFICATION;
	b.ctx.method = "notifications/roots/list_changed";
	b.w.stage[0] = pl;
	b.w.ctx = &b.ctx;
	b.w.msg = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", b.ctx.method);
	b.w.done = on_done;
	mw_walk_forward(&b.w);
	assert_int_equal(b.v, MW_PASS);
	json_decref(b.got);
	respond(&a);
	pipeline_unref(pl);
}

/* A timeout that cannot end the request yet (no chain here) keeps trying
 * quietly until the response comes, which stops it. */
static void test_timeout_until_response(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"timeoutMs\":20}]");
	struct xch a;
	call(&a, pl, 1, "t");
	assert_int_equal(a.v, MW_PASS);
	run_for(0.15);               /* mw_abort returns -1 without a chain */
	respond(&a);
	run_for(0.1);
	pipeline_unref(pl);
}

/* Destroying the module with requests queued frees them. */
static void test_destroy_with_queue(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"timeoutMs\":1000}]");
	struct xch a, b;
	call(&a, pl, 1, "t");
	call(&b, pl, 2, "t");
	assert_int_equal(b.done, 0);
	json_decref(a.got);
	pipeline_unref(pl);          /* as at exit with both still open */
	run_for(0.05);
}

/* Runs the tests. */
/* ---- requests that travel unparsed ---- */

/* What a raw walk's done saw of the bytes (they are freed once it returns). */
struct xraw {
	struct xch x;            /* must be first */
	char raw[512];
	char id[32];
};

/* The walk's end: keeps the message and a copy of the bytes it carries. */
static void on_done_raw(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct xraw *r = (struct xraw *)(void *)w;
	on_done(w, v, msg);
	r->raw[0] = r->id[0] = '\0';
	if (w->raw)
		snprintf(r->raw, sizeof r->raw, "%.*s", (int)w->raw_len, w->raw);
	if (w->raw && w->span[MW_SPAN_ID].p)
		snprintf(r->id, sizeof r->id, "%.*s", (int)w->span[MW_SPAN_ID].n,
			 w->span[MW_SPAN_ID].p);
}

/* Walks TEXT, a tools/call of NAME, unparsed from "c" to "fx" through PL. */
static void call_raw(struct xraw *r, struct pipeline *pl, const char *name, const char *text)
{
	memset(r, 0, sizeof *r);
	r->x.ctx.dir = MW_TO_BACKEND;
	r->x.ctx.kind = RPC_REQUEST;
	r->x.ctx.method = "tools/call";
	r->x.ctx.name = name;
	r->x.ctx.client = "c";
	r->x.ctx.backend = "fx";
	r->x.w.stage[0] = pl;
	r->x.w.ctx = &r->x.ctx;
	r->x.w.done = on_done_raw;
	assert_true(mwt_set_raw(&r->x.w, text));
	mw_walk_forward(&r->x.w);
}

/* Walks an unparsed response back: it stays unread. */
static void respond_raw(struct xraw *r)
{
	assert_int_equal(r->x.done, 1);
	assert_int_equal(r->x.v, MW_PASS);
	r->x.ctx.kind = RPC_RESPONSE;
	assert_true(mwt_set_raw(&r->x.w, "{\"jsonrpc\":\"2.0\",\"id\":31,\"result\":{}}"));
	mw_walk_back(&r->x.w);
	assert_int_equal(r->x.done, 2);
	assert_null(r->x.got);
	assert_string_equal(r->id, "31");
	json_decref(r->x.ctx.scratch);
	r->x.ctx.scratch = NULL;
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
	assert_int_equal(a.x.v, MW_PASS);
	assert_null(a.x.got);
	assert_string_equal(a.raw, LIM_CALL("1", "t"));
	/* refused without reading: the module's reply is the message */
	call_raw(&b, pl, "t", LIM_CALL("2", "t"));
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.v, MW_REPLY);
	assert_int_equal(code_of(&b.x), MW_LIMIT_RATE);
	finish(&b.x);
	respond_raw(&a);
	pipeline_unref(pl);
}

/* A queued request keeps its bytes: released later, the right bytes go on. */
static void test_raw_queued_then_released(void **state)
{
	(void)state;
	struct pipeline *pl = limit_with("[{\"concurrency\":1,\"queue\":1}]");
	static const char text_b[] = LIM_CALL("\"b\"", "slow");
	char buf[sizeof text_b];
	memcpy(buf, text_b, sizeof buf);
	struct xraw a, b;
	call_raw(&a, pl, "slow", LIM_CALL("1", "slow"));
	assert_int_equal(a.x.v, MW_PASS);
	call_raw(&b, pl, "slow", buf);
	assert_int_equal(b.x.done, 0);            /* queued */
	assert_int_equal(b.x.w.held, 1);
	assert_non_null(b.x.w.raw_own);           /* the walk keeps its own copy */
	assert_ptr_not_equal(b.x.w.raw, buf);
	memset(buf, 'X', sizeof buf - 1);         /* the transport reuses its buffer */
	respond_raw(&a);                          /* the slot frees: b goes */
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.v, MW_PASS);
	assert_null(b.x.got);
	assert_string_equal(b.raw, text_b);
	assert_string_equal(b.id, "\"b\"");
	assert_null(b.x.w.raw_own);               /* freed once done returned */
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
	run_until(&b.x.done, 2.0);
	assert_int_equal(b.x.done, 1);
	assert_int_equal(b.x.v, MW_REPLY);
	assert_int_equal(code_of(&b.x), MW_LIMIT_BUSY);
	assert_non_null(strstr(message_of(&b.x), "without getting one"));
	finish(&b.x);
	respond_raw(&a);
	pipeline_unref(pl);
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
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_rate_before_slots),
		cmocka_unit_test(test_other_traffic),
		cmocka_unit_test(test_timeout_until_response),
		cmocka_unit_test(test_destroy_with_queue),
		cmocka_unit_test(test_raw_unread),
		cmocka_unit_test(test_raw_queued_then_released),
		cmocka_unit_test(test_raw_queue_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
