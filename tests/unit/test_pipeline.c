/*
 * test_pipeline.c - unit tests for src/middleware/pipeline.c (middleware
 * modules, pipelines and walks).
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

#include "config.h"
#include "middleware.h"

/* ---- a configurable test module ---- */

struct tmod {
	struct mw_module base;   /* must be first */
	const char *tag;
	enum mw_verdict on_msg;  /* verdict for on_message */
	enum mw_verdict on_resp; /* verdict for on_response */
	bool replace;            /* replace the message with a new object */
	struct mw_walk *held;    /* an MW_ASYNC step in progress */
	json_t *held_msg;
};

static char trace[512];      /* "A>" per on_message, "A<" per on_response */
static int destroyed;

/* Appends to the trace. */
static void note(const char *tag, const char *dir)
{
	strncat(trace, tag, sizeof trace - strlen(trace) - 1);
	strncat(trace, dir, sizeof trace - strlen(trace) - 1);
}

/* Appends TAG to the array MSG.KEY (records who saw the message). */
static void stamp(json_t *msg, const char *key, const char *tag)
{
	json_t *a = json_object_get(msg, key);
	if (!a) {
		a = json_array();
		json_object_set_new(msg, key, a);
	}
	json_array_append_new(a, json_string(tag));
}

/* Replaces *MSG by a copy with a marker, dropping the old one. */
static void replace_msg(json_t **msg, const char *tag)
{
	json_t *n = json_deep_copy(*msg);
	json_object_set_new(n, "replacedBy", json_string(tag));
	json_decref(*msg);
	*msg = n;
}

static enum mw_verdict t_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct tmod *t = (struct tmod *)m;
	note(t->tag, ">");
	assert_non_null(ctx->walk);
	assert_ptr_equal(ctx->walk->ctx, ctx);
	assert_int_equal(ctx->walk->response, 0);
	stamp(*msg, "seen", t->tag);
	json_object_set_new(mw_scratch(ctx), t->tag, json_true());
	if (t->replace)
		replace_msg(msg, t->tag);
	switch (t->on_msg) {
	case MW_REPLY: {
		json_t *id = json_object_get(*msg, "id");
		json_t *r = rpc_result(id, json_pack("{s:s}", "by", t->tag));
		json_decref(*msg);
		*msg = r;
		return MW_REPLY;
	}
	case MW_ASYNC:
		t->held = mw_walk_hold(ctx);
		assert_int_equal(t->held->held, 1);
		t->held_msg = *msg;   /* the module keeps it until mw_resume */
		*msg = NULL;
		return MW_ASYNC;
	default:
		return t->on_msg;
	}
}

static enum mw_verdict t_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct tmod *t = (struct tmod *)m;
	note(t->tag, "<");
	assert_int_equal(ctx->walk->response, 1);
	/* what this module put in the scratch on the way in is still there */
	assert_true(json_is_true(json_object_get(ctx->scratch, t->tag)));
	stamp(*msg, "back", t->tag);
	if (t->replace)
		replace_msg(msg, t->tag);
	if (t->on_resp == MW_ASYNC) {
		t->held = mw_walk_hold(ctx);
		t->held_msg = *msg;
		*msg = NULL;
		return MW_ASYNC;
	}
	return t->on_resp;   /* MW_REPLY and MW_DROP act as MW_PASS here */
}

static void t_destroy(struct mw_module *m)
{
	destroyed++;
	free(m);
}

static const struct mw_module_ops tmod_ops = {
	.name = "test", .on_message = t_on_message, .on_response = t_on_response,
	.destroy = t_destroy,
};

static const struct mw_module_ops passive_ops = {   /* no hooks at all */
	.name = "passive", .destroy = t_destroy,
};

/* Makes a module and appends it to PL. */
static struct tmod *add(struct pipeline *pl, const char *tag, enum mw_verdict on_msg)
{
	struct tmod *t = calloc(1, sizeof *t);
	assert_non_null(t);
	t->base.ops = &tmod_ops;
	t->tag = tag;
	t->on_msg = on_msg;
	t->on_resp = MW_PASS;
	assert_int_equal(pipeline_add(pl, &t->base), 0);
	return t;
}

/* ---- a walk driver ---- */

struct run {
	struct mw_walk w;
	struct mw_ctx ctx;
	int done_calls;
	enum mw_verdict verdict;
	json_t *out;             /* owned: what done received */
};

static void on_done(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	struct run *r = (struct run *)w;   /* w is the first member */
	r->done_calls++;
	r->verdict = v;
	json_decref(r->out);
	r->out = msg;
}

/* Prepares a walk of a new request through S0 then S1. */
static void run_init(struct run *r, struct pipeline *s0, struct pipeline *s1)
{
	memset(r, 0, sizeof *r);
	r->ctx.dir = MW_TO_BACKEND;
	r->ctx.kind = RPC_REQUEST;
	r->ctx.method = "tools/call";
	r->w.stage[0] = s0;
	r->w.stage[1] = s1;
	r->w.ctx = &r->ctx;
	r->w.done = on_done;
	r->w.msg = rpc_request(7, "tools/call", json_pack("{s:s}", "name", "t"));
}

/* Starts the way back with a response to the request. */
static void run_back(struct run *r, json_t *resp)
{
	r->ctx.kind = RPC_RESPONSE;
	r->w.msg = resp;
	mw_walk_back(&r->w);
}

/* Frees what the run holds. */
static void run_release(struct run *r)
{
	json_decref(r->out);
	r->out = NULL;
	json_decref(r->ctx.scratch);
	r->ctx.scratch = NULL;
}

/* Asserts MSG.KEY is the list of tags in WANT (space separated). */
static void expect_stamps(json_t *msg, const char *key, const char *want)
{
	char got[256] = "";
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(msg, key), i, v) {
		if (i)
			strcat(got, " ");
		strcat(got, json_string_value(v));
	}
	assert_string_equal(got, want);
}

static int setup(void **state)
{
	(void)state;
	trace[0] = '\0';
	destroyed = 0;
	return 0;
}

/* ---- tests ---- */

static void test_pipeline_basics(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	assert_non_null(pl);
	assert_int_equal(pipeline_size(pl), 0);
	assert_int_equal(pipeline_size(NULL), 0);
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_PASS);
	assert_int_equal(pipeline_size(pl), 2);
	assert_ptr_equal(pipeline_ref(pl), pl);
	pipeline_unref(pl);
	assert_int_equal(destroyed, 0);          /* one reference left */
	pipeline_unref(pl);
	assert_int_equal(destroyed, 2);          /* each module destroyed once */
	assert_null(pipeline_ref(NULL));
	pipeline_unref(NULL);
}

static void test_scratch(void **state)
{
	(void)state;
	struct mw_ctx ctx = { 0 };
	json_t *s = mw_scratch(&ctx);
	assert_true(json_is_object(s));
	assert_ptr_equal(mw_scratch(&ctx), s);
	json_decref(ctx.scratch);
}

/* Requests go through in order, responses back in reverse. */
static void test_order(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_PASS);
	add(pl, "C", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.w.msg);                    /* ownership went to done */
	expect_stamps(r.out, "seen", "A B C");
	assert_int_equal(r.w.reached, 3);

	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_int_equal(r.done_calls, 2);
	assert_int_equal(r.verdict, MW_PASS);
	expect_stamps(r.out, "back", "C B A");
	run_release(&r);
	pipeline_unref(pl);
	assert_int_equal(destroyed, 3);
}

/* MW_REPLY short-circuits: later modules never run, earlier ones see the reply. */
static void test_reply_short_circuit(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_PASS);
	add(pl, "C", MW_REPLY);
	add(pl, "D", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.out, "result"), "by")), "C");
	assert_int_equal(json_integer_value(json_object_get(r.out, "id")), 7);
	assert_int_equal(r.w.reached, 2);        /* C does not see its own reply */

	json_t *reply = r.out;
	r.out = NULL;
	run_back(&r, reply);
	assert_string_equal(trace, "A>B>C>B<A<");
	assert_int_equal(r.done_calls, 2);
	expect_stamps(r.out, "back", "B A");
	run_release(&r);
	pipeline_unref(pl);
}

/* MW_DROP stops the message; later modules never see it. */
static void test_drop(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_DROP);
	add(pl, "C", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_DROP);
	assert_non_null(r.out);                  /* the dropped message is handed over to free */
	expect_stamps(r.out, "seen", "A B");
	/* the error the owner answers with goes back through A, never C */
	json_t *err = rpc_error(json_object_get(r.out, "id"), RPC_INVALID_REQUEST, "refused", NULL);
	run_back(&r, err);
	assert_int_equal(r.done_calls, 2);
	assert_null(strstr(trace, "C<"));
	assert_non_null(strstr(trace, "A<"));
	assert_string_equal(trace + strlen(trace) - 2, "A<");
	run_release(&r);
	pipeline_unref(pl);
}

/* MW_ASYNC: the walk waits, then resumes where it stopped. */
static void test_async_resume_pass(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	struct tmod *b = add(pl, "B", MW_ASYNC);
	add(pl, "C", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>");
	assert_int_equal(r.done_calls, 0);       /* nothing finished yet */
	assert_ptr_equal(b->held, &r.w);
	assert_int_equal(r.w.held, 1);
	assert_non_null(b->held_msg);

	/* later (e.g. from a timer): continue with the message, possibly changed */
	json_object_set_new(b->held_msg, "approved", json_true());
	mw_resume(b->held, MW_PASS, b->held_msg);
	assert_int_equal(r.w.held, 0);
	assert_string_equal(trace, "A>B>C>");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_PASS);
	assert_true(json_is_true(json_object_get(r.out, "approved")));
	expect_stamps(r.out, "seen", "A B C");

	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>B>C>C<B<A<");
	run_release(&r);
	pipeline_unref(pl);
}

/* An async module may answer the request itself when it resumes. */
static void test_async_resume_reply(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	struct tmod *b = add(pl, "B", MW_ASYNC);
	add(pl, "C", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	json_t *reply = rpc_error(json_object_get(b->held_msg, "id"), -32042, "denied", NULL);
	json_decref(b->held_msg);
	mw_resume(b->held, MW_REPLY, reply);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_ptr_equal(r.out, reply);
	assert_int_equal(r.w.reached, 1);
	json_t *out = r.out;
	r.out = NULL;
	run_back(&r, out);
	assert_string_equal(trace, "A>B>A<");
	run_release(&r);
	pipeline_unref(pl);
}

/* An async module may drop when it resumes. */
static void test_async_resume_drop(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct tmod *a = add(pl, "A", MW_ASYNC);
	add(pl, "B", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	mw_resume(a->held, MW_DROP, a->held_msg);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_DROP);
	assert_string_equal(trace, "A>");
	run_release(&r);
	pipeline_unref(pl);
}

/* MW_ASYNC on the way back: the response waits, then goes on. */
static void test_async_on_response(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	struct tmod *b = add(pl, "B", MW_PASS);
	add(pl, "C", MW_PASS);
	b->on_resp = MW_ASYNC;
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_int_equal(r.done_calls, 1);
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>B>C>C<B<");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.w.held, 1);
	mw_resume(b->held, MW_PASS, b->held_msg);
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_int_equal(r.done_calls, 2);
	assert_int_equal(r.verdict, MW_PASS);
	expect_stamps(r.out, "back", "C B A");
	run_release(&r);
	pipeline_unref(pl);
}

/* MW_REPLY and MW_DROP on the way back act as MW_PASS. */
static void test_response_verdicts_pass(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_PASS)->on_resp = MW_DROP;
	add(pl, "C", MW_PASS)->on_resp = MW_REPLY;
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_int_equal(r.done_calls, 2);
	assert_int_equal(r.verdict, MW_PASS);
	run_release(&r);
	pipeline_unref(pl);
}

/* Modules that replace the message: the replacement travels on, the old one is freed. */
static void test_replacement(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS)->replace = true;
	add(pl, "B", MW_PASS);
	add(pl, "C", MW_PASS)->replace = true;
	struct run r;
	run_init(&r, pl, NULL);
	json_t *orig = r.w.msg;
	json_incref(orig);                       /* watch the original */
	mw_walk_forward(&r.w);
	assert_int_equal(orig->refcount, 1);     /* only our watch is left */
	json_decref(orig);
	assert_string_equal(json_string_value(json_object_get(r.out, "replacedBy")), "C");
	expect_stamps(r.out, "seen", "A B C");
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(json_string_value(json_object_get(r.out, "replacedBy")), "A");
	expect_stamps(r.out, "back", "C B A");
	assert_int_equal(r.out->refcount, 1);
	run_release(&r);
	pipeline_unref(pl);
}

/* A walk runs through two stages as one sequence. */
static void test_two_stages(void **state)
{
	(void)state;
	struct pipeline *g = pipeline_new(), *be = pipeline_new();
	add(g, "A", MW_PASS);
	add(g, "B", MW_PASS);
	add(be, "C", MW_PASS);
	add(be, "D", MW_PASS);
	struct run r;
	run_init(&r, g, be);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>D>");
	assert_int_equal(r.w.reached, 4);
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>B>C>D>D<C<B<A<");
	run_release(&r);

	/* a reply in the second stage goes back through the first */
	trace[0] = '\0';
	pipeline_unref(be);
	be = pipeline_new();
	add(be, "C", MW_REPLY);
	add(be, "D", MW_PASS);
	run_init(&r, g, be);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>");
	assert_int_equal(r.verdict, MW_REPLY);
	json_t *reply = r.out;
	r.out = NULL;
	run_back(&r, reply);
	assert_string_equal(trace, "A>B>C>B<A<");
	run_release(&r);

	/* only a second stage */
	trace[0] = '\0';
	run_init(&r, NULL, be);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "C>");
	run_release(&r);
	pipeline_unref(g);
	pipeline_unref(be);
	assert_int_equal(destroyed, 6);
}

/* Modules without hooks are skipped; empty walks finish at once. */
static void test_skips_and_empty(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct tmod *p = calloc(1, sizeof *p);
	p->base.ops = &passive_ops;
	assert_int_equal(pipeline_add(pl, &p->base), 0);
	add(pl, "A", MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>");
	assert_int_equal(r.verdict, MW_PASS);
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_string_equal(trace, "A>A<");
	assert_int_equal(r.done_calls, 2);
	run_release(&r);
	pipeline_unref(pl);

	run_init(&r, NULL, NULL);
	mw_walk_forward(&r.w);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_PASS);
	run_back(&r, rpc_result(json_object_get(r.out, "id"), NULL));
	assert_int_equal(r.done_calls, 2);
	assert_true(json_is_object(json_object_get(r.out, "result")));
	run_release(&r);
}

/* ---- building pipelines from configuration ---- */

/* True when some error line equals LINE. */
static bool has_error(const struct cfg_errors *e, const char *line)
{
	for (size_t i = 0; i < e->count; i++)
		if (strcmp(e->lines[i], line) == 0)
			return true;
	return false;
}

/* True when some error line starts with PREFIX. */
static bool has_error_prefix(const struct cfg_errors *e, const char *prefix)
{
	for (size_t i = 0; i < e->count; i++)
		if (strncmp(e->lines[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

static void test_build_empty(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct pipeline *pl = pipeline_build(NULL, "f.json", "/middleware", &e);
	assert_non_null(pl);
	assert_int_equal(pipeline_size(pl), 0);
	assert_int_equal(e.count, 0);
	pipeline_unref(pl);
	json_t *arr = json_array();
	pl = pipeline_build(arr, "f.json", "/middleware", &e);
	assert_non_null(pl);
	assert_int_equal(pipeline_size(pl), 0);
	assert_int_equal(pipeline_start(pl), 0);
	pipeline_unref(pl);
	json_decref(arr);
	assert_int_equal(pipeline_start(NULL), 0);
}

/* Every bad entry is reported, with the pointer to it. */
static void test_build_errors(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	json_t *arr = json_loads("[5, {\"opt\":1}, {\"use\":7}, {\"use\":\"no-such-module\"}]", 0, NULL);
	assert_non_null(arr);
	assert_null(pipeline_build(arr, "f.json", "/mcpServers/s/middleware", &e));
	assert_int_equal(e.count, 4);
	assert_true(has_error(&e, "f.json: /mcpServers/s/middleware/0: a module is an object "
			      "{\"use\": \"NAME\", ...options}"));
	assert_true(has_error(&e, "f.json: /mcpServers/s/middleware/1/use: missing or not a string: "
			      "name the module to use"));
	assert_true(has_error(&e, "f.json: /mcpServers/s/middleware/2/use: missing or not a string: "
			      "name the module to use"));
	assert_true(has_error_prefix(&e, "f.json: /mcpServers/s/middleware/3/use: unknown module "
				     "\"no-such-module\" (available: "));
	cfg_errors_release(&e);
	json_decref(arr);
	assert_null(mw_find("no-such-module"));
}

/* mw_error and mw_check_keys, as modules use them to validate their options. */
static void test_module_option_errors(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	struct mw_build b = { .file = "f.json", .path = "/middleware/2", .errs = &e };
	mw_error(&b, "/rules/0/allow", "must be %s", "an array");
	assert_int_equal(b.nerr, 1);
	assert_true(has_error(&e, "f.json: /middleware/2/rules/0/allow: must be an array"));
	json_t *opts = json_loads("{\"use\":\"m\",\"rules\":[],\"rulez\":1,\"x\":2}", 0, NULL);
	static const char *const keys[] = { "rules", NULL };
	assert_int_equal(mw_check_keys(&b, opts, keys), 2);
	assert_int_equal(b.nerr, 3);
	assert_true(has_error(&e, "f.json: /middleware/2/rulez: unknown option"));
	assert_true(has_error(&e, "f.json: /middleware/2/x: unknown option"));
	assert_int_equal(mw_check_keys(&b, opts, (const char *const[]){ "rules", "rulez", "x", NULL }), 0);
	json_decref(opts);
	cfg_errors_release(&e);
}

static int starts;

static int t_start_ok(struct mw_module *m)
{
	(void)m;
	starts++;
	return 0;
}

static int t_start_fail(struct mw_module *m)
{
	(void)m;
	starts++;
	return -1;
}

/* pipeline_start starts each module in order and stops at a failure. */
static void test_start(void **state)
{
	(void)state;
	static const struct mw_module_ops ok_ops = { .name = "ok", .start = t_start_ok,
						     .destroy = t_destroy };
	static const struct mw_module_ops fail_ops = { .name = "fail", .start = t_start_fail,
						       .destroy = t_destroy };
	struct pipeline *pl = pipeline_new();
	struct tmod *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
	a->base.ops = &ok_ops;
	b->base.ops = &passive_ops;   /* no start: skipped */
	c->base.ops = &ok_ops;
	pipeline_add(pl, &a->base);
	pipeline_add(pl, &b->base);
	pipeline_add(pl, &c->base);
	starts = 0;
	assert_int_equal(pipeline_start(pl), 0);
	assert_int_equal(starts, 2);
	struct tmod *d = calloc(1, sizeof *d), *e2 = calloc(1, sizeof *e2);
	d->base.ops = &fail_ops;
	e2->base.ops = &ok_ops;
	pipeline_add(pl, &d->base);
	pipeline_add(pl, &e2->base);
	starts = 0;
	assert_int_equal(pipeline_start(pl), -1);
	assert_int_equal(starts, 3);                 /* the one after the failure is not started */
	pipeline_unref(pl);
	assert_int_equal(destroyed, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_pipeline_basics, setup),
		cmocka_unit_test_setup(test_scratch, setup),
		cmocka_unit_test_setup(test_order, setup),
		cmocka_unit_test_setup(test_reply_short_circuit, setup),
		cmocka_unit_test_setup(test_drop, setup),
		cmocka_unit_test_setup(test_async_resume_pass, setup),
		cmocka_unit_test_setup(test_async_resume_reply, setup),
		cmocka_unit_test_setup(test_async_resume_drop, setup),
		cmocka_unit_test_setup(test_async_on_response, setup),
		cmocka_unit_test_setup(test_response_verdicts_pass, setup),
		cmocka_unit_test_setup(test_replacement, setup),
		cmocka_unit_test_setup(test_two_stages, setup),
		cmocka_unit_test_setup(test_skips_and_empty, setup),
		cmocka_unit_test_setup(test_build_empty, setup),
		cmocka_unit_test_setup(test_build_errors, setup),
		cmocka_unit_test_setup(test_module_option_errors, setup),
		cmocka_unit_test_setup(test_start, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
