/*
 * test_pipeline.c - unit tests for src/core/pipeline.c (middleware
 * modules, pipelines and walks). Building pipelines from configuration
 * is tested in test_pipeline_build.c.
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

#include "jscan.h"
#include "middleware.h"
#include "observe.h"
#include "rpc.h"

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
	struct msg m;            /* the walk's message */
	int done_calls;
	enum mw_verdict verdict;
	json_t *out;             /* owned: what done received */
};

static void on_done(struct mw_walk *w, enum mw_verdict v)
{
	struct run *r = (struct run *)w;   /* w is the first member */
	json_t *msg = w->m->tree;          /* done takes the tree, as the chain does */
	w->m->tree = NULL;
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
	r->ctx.method_code = MCP_TOOLS_CALL;
	r->w.stage[0] = s0;
	r->w.stage[1] = s1;
	r->w.ctx = &r->ctx;
	r->w.m = &r->m;
	r->w.done = on_done;
	r->m.tree = rpc_request(7, "tools/call", json_pack("{s:s}", "name", "t"));
}

/* Starts the way back with a response to the request. */
static void run_back(struct run *r, json_t *resp)
{
	r->ctx.kind = RPC_RESPONSE;
	r->m.tree = resp;
	mw_walk_back(&r->w);
}

/* Frees what the run holds. */
static void run_release(struct run *r)
{
	json_decref(r->out);
	r->out = NULL;
	msg_release(&r->m);
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
	assert_null(r.m.tree);                    /* ownership went to done */
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
	json_t *orig = r.m.tree;
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

/* ---- messages that travel unparsed (raw) ---- */

/* A module whose reads() answer is set per test; it records what it saw. */
struct rmod {
	struct mw_module base;   /* must be first */
	const char *tag;
	bool reads;              /* what reads() answers */
	enum mw_verdict on_msg;  /* verdict of on_message */
	enum mw_verdict on_resp; /* verdict of on_response (MW_ASYNC holds) */
	int reads_calls;
	int seen;                /* hook calls */
	bool saw_null;           /* the last hook got *MSG == NULL */
	json_t *saw;             /* the tree the last hook got (pointer only) */
	json_t *saw_copy;        /* owned: a copy of it */
	struct mw_walk *held;
};

/* Answers as configured, counting the calls. */
static bool r_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	struct rmod *t = (struct rmod *)m;
	assert_non_null(ctx);
	t->reads_calls++;
	return t->reads;
}

/* Records what a hook of T got in *MSG. */
static void r_record(struct rmod *t, json_t *msg)
{
	t->seen++;
	t->saw_null = msg == NULL;
	t->saw = msg;
	json_decref(t->saw_copy);
	t->saw_copy = msg ? json_deep_copy(msg) : NULL;
}

/* Records a request, then passes, replies, drops or holds it as configured. */
static enum mw_verdict r_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct rmod *t = (struct rmod *)m;
	note(t->tag, ">");
	r_record(t, *msg);
	switch (t->on_msg) {
	case MW_REPLY:
		json_decref(*msg);
		*msg = rpc_result(NULL, json_pack("{s:s}", "by", t->tag));
		return MW_REPLY;
	case MW_DROP:
		return MW_DROP;
	case MW_ASYNC:
		t->held = mw_walk_hold(ctx);
		return MW_ASYNC;   /* *msg is kept by the walk while NULL */
	default:
		return MW_PASS;
	}
}

/* Records a response, then passes or holds it. */
static enum mw_verdict r_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct rmod *t = (struct rmod *)m;
	note(t->tag, "<");
	r_record(t, *msg);
	if (t->on_resp == MW_ASYNC) {
		t->held = mw_walk_hold(ctx);
		return MW_ASYNC;
	}
	return MW_PASS;
}

/* Frees the module. */
static void r_destroy(struct mw_module *m)
{
	struct rmod *t = (struct rmod *)m;
	json_decref(t->saw_copy);
	destroyed++;
	free(m);
}

static const struct mw_module_ops rmod_ops = {
	.name = "rtest", .reads = r_reads, .on_message = r_on_message,
	.on_response = r_on_response, .destroy = r_destroy,
};

/* Like rmod_ops but without a reads() hook: such a module reads everything. */
static const struct mw_module_ops rmod_noreads_ops = {
	.name = "rtest-noreads", .on_message = r_on_message,
	.on_response = r_on_response, .destroy = r_destroy,
};

/* Makes a raw-aware module that READS (or not) and appends it to PL. */
static struct rmod *radd(struct pipeline *pl, const char *tag, bool reads, enum mw_verdict v)
{
	struct rmod *t = calloc(1, sizeof *t);
	assert_non_null(t);
	t->base.ops = &rmod_ops;
	t->tag = tag;
	t->reads = reads;
	t->on_msg = v;
	t->on_resp = MW_PASS;
	assert_int_equal(pipeline_add(pl, &t->base), 0);
	return t;
}

/* Makes W carry TEXT (N bytes, kept alive by the caller) unparsed, as the chain does. */
static void set_raw_n(struct mw_walk *w, const char *text, size_t n)
{
	json_t *err = NULL;
	msg_release(w->m);
	if (msg_init_line(w->m, text, n, &err) < 0 || !msg_is_raw(w->m))
		fail_msg("the scanner declines the test message %.*s", (int)n, text);
}

/* Same for a NUL-terminated TEXT. */
static void set_raw(struct mw_walk *w, const char *text)
{
	set_raw_n(w, text, strlen(text));
}

/* Asserts that span S holds exactly the text WANT. */
static void expect_span(struct jspan s, const char *want)
{
	assert_non_null(s.p);
	if (s.n != strlen(want) || memcmp(s.p, want, s.n) != 0)
		fail_msg("span is \"%.*s\", want \"%s\"", (int)s.n, s.p, want);
}

/* Asserts that the tree MSG is the JSON TEXT. */
static void expect_tree(json_t *msg, const char *text)
{
	json_t *want = json_loads(text, 0, NULL);
	assert_non_null(want);
	assert_non_null(msg);
	assert_true(json_equal(msg, want));
	json_decref(want);
}

static const char raw_req[] =
	"{\"jsonrpc\":\"2.0\", \"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	"\"arguments\":{\"n\":2.50},\"_meta\":{\"progressToken\":\"tok\",\"k\":1}}}";
static const char raw_resp[] =
	"{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}";

/* What a raw walk's done saw of the bytes (they are freed once it returns). */
static char done_raw[512];
static char done_span_id[32];

/* The walk is over: keeps the message and a copy of the bytes it carries. */
static void on_done_raw(struct mw_walk *w, enum mw_verdict v)
{
	on_done(w, v);
	done_raw[0] = done_span_id[0] = '\0';
	if (w->m->raw) {
		snprintf(done_raw, sizeof done_raw, "%.*s", (int)w->m->raw_len, w->m->raw);
		if (w->m->js.span[MSG_SPAN_ID].p)
			snprintf(done_span_id, sizeof done_span_id, "%.*s",
				 (int)w->m->js.span[MSG_SPAN_ID].n, w->m->js.span[MSG_SPAN_ID].p);
	}
}

/* Prepares a walk of the request TEXT, unparsed, through S0. */
static void run_init_raw(struct run *r, struct pipeline *s0, const char *text)
{
	run_init(r, s0, NULL);
	set_raw(&r->w, text);
	r->w.done = on_done_raw;
	done_raw[0] = done_span_id[0] = '\0';
}

/* Modules that do not read: msg stays NULL to the end, both ways. */
static void test_raw_unread_to_end(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", false, MW_PASS);
	struct rmod *c = radd(pl, "C", false, MW_PASS);
	struct run r;
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.out);                      /* still unread */
	assert_ptr_equal(r.m.raw, raw_req);      /* the caller's bytes, not a copy */
	assert_null(r.m.own);
	assert_string_equal(done_raw, raw_req);
	assert_string_equal(done_span_id, "7");
	for (struct rmod *t = a; t; t = t == a ? b : t == b ? c : NULL) {
		assert_int_equal(t->seen, 1);
		assert_true(t->saw_null);
		assert_int_equal(t->reads_calls, 1);
	}
	assert_int_equal(r.w.reached, 3);

	/* the response, also unread */
	r.ctx.kind = RPC_RESPONSE;
	set_raw(&r.w, raw_resp);
	mw_walk_back(&r.w);
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_int_equal(r.done_calls, 2);
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.out);
	assert_string_equal(done_raw, raw_resp);
	assert_string_equal(done_span_id, "12");
	assert_true(a->saw_null && b->saw_null && c->saw_null);
	assert_int_equal(a->seen + b->seen + c->seen, 6);
	run_release(&r);
	pipeline_unref(pl);
	assert_int_equal(destroyed, 3);
}

/* A module that reads gets the parsed tree; the ones after it see the same tree. */
static void test_raw_parsed_when_read(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", true, MW_PASS);
	struct rmod *c = radd(pl, "C", false, MW_PASS);
	struct run r;
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>C>");
	assert_true(a->saw_null);
	assert_false(b->saw_null);
	expect_tree(b->saw_copy, raw_req);       /* the tree equals the text */
	assert_ptr_equal(c->saw, b->saw);        /* the very same tree, not parsed again */
	assert_int_equal(c->reads_calls, 0);     /* no need to ask once parsed */
	assert_int_equal(r.verdict, MW_PASS);
	assert_ptr_equal(r.out, b->saw);         /* and done gets it */
	expect_tree(r.out, raw_req);
	assert_null(r.m.own);

	/* the way back: C does not read, B does, A sees B's tree */
	json_decref(r.out);
	r.out = NULL;
	r.ctx.kind = RPC_RESPONSE;
	set_raw(&r.w, raw_resp);
	mw_walk_back(&r.w);
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_true(c->saw_null);
	assert_false(b->saw_null);
	expect_tree(b->saw_copy, raw_resp);
	assert_ptr_equal(a->saw, b->saw);
	assert_ptr_equal(r.out, b->saw);
	expect_tree(r.out, raw_resp);
	run_release(&r);
	pipeline_unref(pl);
}

/* A module without a reads() hook reads every message. */
static void test_raw_no_reads_hook_reads(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", false, MW_PASS);
	b->base.ops = &rmod_noreads_ops;
	struct run r;
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_true(a->saw_null);
	assert_false(b->saw_null);
	assert_int_equal(b->reads_calls, 0);
	expect_tree(r.out, raw_req);
	run_release(&r);
	pipeline_unref(pl);
}

/* MW_REPLY and MW_DROP from a module that did not read (its *MSG was NULL). */
static void test_raw_reply_and_drop(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", false, MW_REPLY);
	struct rmod *c = radd(pl, "C", false, MW_PASS);
	struct run r;
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>");
	assert_true(b->saw_null);
	assert_int_equal(c->seen, 0);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.out, "result"), "by")), "B");
	assert_int_equal(r.w.reached, 1);        /* B does not see its own reply */
	/* the reply goes back as a tree through A */
	json_t *reply = r.out;
	r.out = NULL;
	run_back(&r, reply);
	assert_string_equal(trace, "A>B>A<");
	assert_int_equal(r.done_calls, 2);
	assert_ptr_equal(r.out, reply);
	run_release(&r);
	pipeline_unref(pl);

	trace[0] = '\0';
	pl = pipeline_new();
	radd(pl, "A", false, MW_PASS);
	b = radd(pl, "B", false, MW_DROP);
	c = radd(pl, "C", false, MW_PASS);
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>");
	assert_true(b->saw_null);
	assert_int_equal(c->seen, 0);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_DROP);
	assert_null(r.out);                      /* nothing was parsed, nothing to free */
	assert_int_equal(r.w.reached, 2);
	run_release(&r);
	pipeline_unref(pl);
}

/* An async module holding a raw walk: the bytes are copied, spans follow the copy. */
static void test_raw_hold_copies(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", false, MW_ASYNC);
	struct rmod *c = radd(pl, "C", false, MW_PASS);
	char buf[sizeof raw_req];
	memcpy(buf, raw_req, sizeof raw_req);
	struct run r;
	run_init_raw(&r, pl, buf);
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>B>");
	assert_int_equal(r.done_calls, 0);
	assert_ptr_equal(b->held, &r.w);
	assert_int_equal(r.w.held, 1);
	assert_null(r.m.tree);
	/* a copy, owned by the walk, with the same bytes */
	assert_non_null(r.m.own);
	assert_ptr_equal(r.m.raw, r.m.own);
	assert_ptr_not_equal(r.m.raw, buf);
	assert_int_equal(r.m.raw_len, strlen(raw_req));
	assert_memory_equal(r.m.raw, raw_req, r.m.raw_len);
	/* the spans point into the copy and still hold their text */
	for (int i = 0; i < MSG_SPANS; i++) {
		if (i == MSG_SPAN_RESULT || i == MSG_SPAN_RID)
			continue;  /* a request has none */
		assert_true(r.m.js.span[i].p >= r.m.raw);
		assert_true(r.m.js.span[i].p + r.m.js.span[i].n <= r.m.raw + r.m.raw_len);
	}
	expect_span(r.m.js.span[MSG_SPAN_ID], "7");
	expect_span(r.m.js.span[MSG_SPAN_TOKEN], "\"tok\"");
	expect_span(r.m.js.span[MSG_SPAN_META], "{\"progressToken\":\"tok\",\"k\":1}");

	/* the caller reuses its buffer before the module resumes */
	memset(buf, 'X', sizeof buf - 1);
	mw_resume(b->held, MW_PASS, NULL);
	assert_string_equal(trace, "A>B>C>");
	assert_true(c->saw_null);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.out);
	assert_string_equal(done_raw, raw_req);  /* readable inside done */
	assert_string_equal(done_span_id, "7");
	assert_non_null(r.m.own);            /* kept by the message until its owner frees it */
	run_release(&r);
	pipeline_unref(pl);
}

/* A module reading after a hold parses the copy, not the reused buffer. */
static void test_raw_hold_then_read(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_ASYNC);
	struct rmod *b = radd(pl, "B", true, MW_PASS);
	char buf[sizeof raw_req];
	memcpy(buf, raw_req, sizeof raw_req);
	struct run r;
	run_init_raw(&r, pl, buf);
	mw_walk_forward(&r.w);
	assert_int_equal(r.done_calls, 0);
	memset(buf, ' ', sizeof buf - 1);
	mw_resume(a->held, MW_PASS, NULL);
	assert_false(b->saw_null);
	expect_tree(b->saw_copy, raw_req);
	assert_int_equal(r.verdict, MW_PASS);
	expect_tree(r.out, raw_req);
	assert_non_null(r.m.own);   /* the copy stays beside the tree, for the wire */
	run_release(&r);
	pipeline_unref(pl);
}

/* Holding the walk back: the response's bytes are copied likewise. */
static void test_raw_hold_back(void **state)
{
	(void)state;
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", false, MW_PASS);
	radd(pl, "C", false, MW_PASS);
	b->on_resp = MW_ASYNC;
	struct run r;
	run_init_raw(&r, pl, raw_req);
	mw_walk_forward(&r.w);
	assert_int_equal(r.done_calls, 1);
	assert_null(r.m.own);                /* nobody held it: nothing copied */

	char buf[sizeof raw_resp];
	memcpy(buf, raw_resp, sizeof raw_resp);
	r.ctx.kind = RPC_RESPONSE;
	set_raw(&r.w, buf);
	mw_walk_back(&r.w);
	assert_string_equal(trace, "A>B>C>C<B<");
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.w.held, 1);
	assert_ptr_equal(r.m.raw, r.m.own);
	assert_ptr_not_equal(r.m.raw, buf);
	assert_memory_equal(r.m.raw, raw_resp, strlen(raw_resp));
	expect_span(r.m.js.span[MSG_SPAN_ID], "12");
	assert_null(r.m.js.span[MSG_SPAN_TOKEN].p);
	memset(buf, 'X', sizeof buf - 1);
	mw_resume(b->held, MW_PASS, NULL);
	assert_string_equal(trace, "A>B>C>C<B<A<");
	assert_true(a->saw_null);
	assert_int_equal(r.done_calls, 2);
	assert_int_equal(r.verdict, MW_PASS);
	assert_null(r.out);
	assert_string_equal(done_raw, raw_resp);
	assert_string_equal(done_span_id, "12");
	assert_non_null(r.m.own);   /* the message's own copy, freed by its owner */
	run_release(&r);
	pipeline_unref(pl);
}

/* Bytes that do not parse: a request is answered with a parse error, a response becomes an error. */
static void test_raw_unparseable(void **state)
{
	(void)state;
	static const char bad[] = "{\"jsonrpc\":\"2.0\",\"id\":7,";
	struct pipeline *pl = pipeline_new();
	struct rmod *a = radd(pl, "A", false, MW_PASS);
	struct rmod *b = radd(pl, "B", true, MW_PASS);
	struct run r;
	run_init(&r, pl, NULL);
	json_decref(r.m.tree);
	r.m.tree = NULL;
	r.m.raw = bad;                           /* as if the scanner had let it through */
	r.m.raw_len = strlen(bad);
	r.w.done = on_done_raw;
	mw_walk_forward(&r.w);
	assert_string_equal(trace, "A>");        /* B never runs */
	assert_int_equal(b->seen, 0);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.verdict, MW_REPLY);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r.out, "error"), "code")),
			 RPC_PARSE_ERROR);
	json_decref(r.out);
	r.out = NULL;

	/* back: B gets an error response instead */
	r.w.reached = 2;
	r.ctx.kind = RPC_RESPONSE;
	r.m.raw = bad;
	r.m.raw_len = strlen(bad);
	mw_walk_back(&r.w);
	assert_int_equal(r.done_calls, 2);
	assert_false(b->saw_null);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(b->saw_copy, "error"), "code")),
			 RPC_INTERNAL_ERROR);
	assert_ptr_equal(a->saw, b->saw);
	assert_non_null(json_object_get(r.out, "error"));
	run_release(&r);
	pipeline_unref(pl);
}

/* Runs mw_meta_has(KEY) on the raw request TEXT. */
static bool meta_has_raw(const char *text, const char *key)
{
	struct msg m = { 0 };
	struct mw_walk w = { .m = &m };
	struct mw_ctx ctx = { .walk = &w, .dir = MW_TO_BACKEND, .kind = RPC_REQUEST };
	w.ctx = &ctx;
	set_raw(&w, text);
	bool has = mw_meta_has(&ctx, key);
	msg_release(&m);
	return has;
}

/* Runs mw_meta_has(KEY) on TEXT parsed. */
static bool meta_has_parsed(const char *text, const char *key)
{
	struct msg m;
	struct mw_walk w = { .m = &m };
	struct mw_ctx ctx = { .walk = &w, .dir = MW_TO_BACKEND, .kind = RPC_REQUEST };
	w.ctx = &ctx;
	msg_init_tree(&m, json_loads(text, 0, NULL));
	assert_non_null(m.tree);
	bool has = mw_meta_has(&ctx, key);
	msg_release(&m);
	return has;
}

#define META_REQ(meta) "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"," \
	"\"params\":{\"name\":\"t\"" meta "}}"

/* mw_meta_has: from the bytes (conservative) and from a tree (exact). */
static void test_meta_has(void **state)
{
	(void)state;
	static const char none[] = META_REQ("");
	static const char present[] = META_REQ(",\"_meta\":{\"a\":1,\"io.x/key\":\"v\"}");
	static const char absent[] = META_REQ(",\"_meta\":{\"a\":1,\"io.x/keys\":2,\"y\":\"io.x/ke\"}");
	static const char as_value[] = META_REQ(",\"_meta\":{\"a\":\"io.x/key\"}");
	static const char elsewhere[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"t\",\"arguments\":{\"io.x/key\":1},\"_meta\":{}}}";
	/* unparsed */
	assert_false(meta_has_raw(none, "io.x/key"));
	assert_true(meta_has_raw(present, "io.x/key"));
	assert_true(meta_has_raw(present, "a"));
	assert_false(meta_has_raw(absent, "io.x/key"));
	assert_true(meta_has_raw(as_value, "io.x/key"));   /* only a value: true, to be safe */
	assert_false(meta_has_raw(elsewhere, "io.x/key")); /* outside _meta does not count */
	/* parsed: a real lookup */
	assert_false(meta_has_parsed(none, "io.x/key"));
	assert_true(meta_has_parsed(present, "io.x/key"));
	assert_false(meta_has_parsed(absent, "io.x/key"));
	assert_false(meta_has_parsed(as_value, "io.x/key"));
	assert_false(meta_has_parsed(elsewhere, "io.x/key"));
	/* no walk at all: nothing is known, so true */
	struct mw_ctx ctx = { 0 };
	assert_true(mw_meta_has(&ctx, "io.x/key"));
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
	assert_int_equal(pipeline_start(NULL), 0);
}

/* ---- decisions told (observe.h) ---- */

/* What the decision listener heard: "source:what:code" per event. */
static char told[512];

static void on_told(void *arg, const struct obs_event *e)
{
	(void)arg;
	char one[96];
	snprintf(one, sizeof one, "%s:%s:%d%s%s ", e->source ? e->source : "-", e->what, e->code,
		 e->detail ? ":" : "", e->detail ? e->detail : "");
	strncat(told, one, sizeof told - strlen(told) - 1);
	assert_int_equal(e->kind, OBS_DECISION);
	assert_string_equal(e->method, "tools/call");
}

/* A module that refuses with an error, telling its own decision or not. */
static enum mw_verdict refuse_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct tmod *t = (struct tmod *)m;
	if (t->replace)   /* here: tells it itself */
		mw_note(ctx, "limited", -32012, "too many");
	json_t *r = rpc_error(json_object_get(*msg, "id"), -32600, "not allowed", NULL);
	json_decref(*msg);
	*msg = r;
	return MW_REPLY;
}

static const struct mw_module_ops refuse_ops = {
	.name = "refuser", .on_message = refuse_on_message, .destroy = t_destroy,
};

/* Adds a refusing module to PL; SELF: it tells its decision itself. */
static void add_refuser(struct pipeline *pl, bool self)
{
	struct tmod *t = calloc(1, sizeof *t);
	assert_non_null(t);
	t->base.ops = &refuse_ops;
	t->replace = self;
	assert_int_equal(pipeline_add(pl, &t->base), 0);
}

/* A reply with an error is told as "denied", a drop as "dropped", a
 * module's own word is told instead of them, and passing tells nothing. */
static void test_decisions_told(void **state)
{
	(void)state;
	told[0] = '\0';
	observe_listen(on_told, NULL);
	struct pipeline *pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add_refuser(pl, false);
	struct run r;
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(told, "refuser:denied:-32600:not allowed ");
	run_release(&r);
	pipeline_unref(pl);

	told[0] = '\0';
	pl = pipeline_new();
	add_refuser(pl, true);
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(told, "refuser:limited:-32012:too many ");
	run_release(&r);
	pipeline_unref(pl);

	told[0] = '\0';
	pl = pipeline_new();
	add(pl, "A", MW_PASS);
	add(pl, "B", MW_DROP);
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(told, "test:dropped:0 ");
	run_release(&r);
	pipeline_unref(pl);

	told[0] = '\0';
	pl = pipeline_new();
	add(pl, "A", MW_REPLY);   /* a result: answered, not denied */
	run_init(&r, pl, NULL);
	mw_walk_forward(&r.w);
	assert_string_equal(told, "test:answered:0 ");
	json_t *reply = r.out;
	r.out = NULL;
	told[0] = '\0';
	run_back(&r, reply);
	assert_string_equal(told, "");   /* the way back tells nothing of itself */
	run_release(&r);
	pipeline_unref(pl);
	observe_unlisten(on_told, NULL);
	observe_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_pipeline_basics, setup),
		cmocka_unit_test_setup(test_scratch, setup),
		cmocka_unit_test_setup(test_order, setup),
		cmocka_unit_test_setup(test_reply_short_circuit, setup),
		cmocka_unit_test_setup(test_drop, setup),
		cmocka_unit_test_setup(test_decisions_told, setup),
		cmocka_unit_test_setup(test_async_resume_pass, setup),
		cmocka_unit_test_setup(test_async_resume_reply, setup),
		cmocka_unit_test_setup(test_async_resume_drop, setup),
		cmocka_unit_test_setup(test_async_on_response, setup),
		cmocka_unit_test_setup(test_response_verdicts_pass, setup),
		cmocka_unit_test_setup(test_replacement, setup),
		cmocka_unit_test_setup(test_two_stages, setup),
		cmocka_unit_test_setup(test_skips_and_empty, setup),
		cmocka_unit_test_setup(test_raw_unread_to_end, setup),
		cmocka_unit_test_setup(test_raw_parsed_when_read, setup),
		cmocka_unit_test_setup(test_raw_no_reads_hook_reads, setup),
		cmocka_unit_test_setup(test_raw_reply_and_drop, setup),
		cmocka_unit_test_setup(test_raw_hold_copies, setup),
		cmocka_unit_test_setup(test_raw_hold_then_read, setup),
		cmocka_unit_test_setup(test_raw_hold_back, setup),
		cmocka_unit_test_setup(test_raw_unparseable, setup),
		cmocka_unit_test_setup(test_meta_has, setup),
		cmocka_unit_test_setup(test_start, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
