/*
 * mw_test.c - helpers shared by the middleware modules' unit tests (see
 * mw_test.h): pipelines built from JSON, one message walked as the chain
 * would walk it, JSON paths, and the default loop run for a while.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mw_test.h"

#include <ev.h>

#include "jscan.h"

/* ---- building ---- */

/* True when some error line contains TEXT. */
bool mwt_has_error(const struct cfg_errors *e, const char *text)
{
	for (size_t i = 0; i < e->count; i++)
		if (strstr(e->lines[i], text))
			return true;
	return false;
}

/* Builds a pipeline from a JSON array (caller unrefs), failing the test on bad JSON. */
struct pipeline *mwt_build(const char *text, struct cfg_errors *e)
{
	json_error_t je;
	json_t *arr = json_loads(text, 0, &je);
	if (!arr)
		fail_msg("bad test JSON (%s): %s", je.text, text);
	struct pipeline *pl = pipeline_build(arr, "t.json", "/middleware", e);
	json_decref(arr);
	return pl;
}

/* Builds a pipeline from a printf-formatted JSON array (caller unrefs). */
struct pipeline *mwt_buildf(struct cfg_errors *e, const char *fmt, ...)
{
	char text[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	return mwt_build(text, e);
}

/* Builds a pipeline that must have no error (caller unrefs); not started. */
struct pipeline *mwt_build_ok(const char *text)
{
	struct cfg_errors errs = { 0 };
	struct pipeline *pl = mwt_build(text, &errs);
	for (size_t i = 0; i < errs.count; i++)
		print_error("unexpected: %s\n", errs.lines[i]);
	assert_int_equal(errs.count, 0);
	assert_non_null(pl);
	cfg_errors_release(&errs);
	return pl;
}

/* Builds and starts a pipeline that must have no error (caller unrefs). */
struct pipeline *mwt_start_ok(const char *text)
{
	struct pipeline *pl = mwt_build_ok(text);
	assert_int_equal(pipeline_start(pl), 0);
	return pl;
}

/* mwt_start_ok from a printf-formatted array (caller unrefs). */
struct pipeline *mwt_start_okf(const char *fmt, ...)
{
	char text[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	return mwt_start_ok(text);
}

/* Asserts TEXT fails to build with an error line containing WANT; frees all it built. */
void mwt_expect_error(const char *text, const char *want)
{
	struct cfg_errors errs = { 0 };
	struct pipeline *pl = mwt_build(text, &errs);
	if (pl || !mwt_has_error(&errs, want)) {
		for (size_t i = 0; i < errs.count; i++)
			print_error("got: %s\n", errs.lines[i]);
		pipeline_unref(pl);
		cfg_errors_release(&errs);
		fail_msg("expected an error containing \"%s\" for %s", want, text);
	}
	cfg_errors_release(&errs);
}

/* Asserts the one-module pipeline USE with OPTS fails to build with WANT. */
void mwt_expect_module_error(const char *use, const char *opts, const char *want)
{
	char text[1024];
	snprintf(text, sizeof text, "[{\"use\":\"%s\",%s}]", use, opts);
	mwt_expect_error(text, want);
}

/* ---- messages ---- */

/* TEXT parsed (a new reference for the caller), failing the test on bad JSON. */
json_t *mwt_json(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
	if (!v)
		fail_msg("bad test JSON %s: %s", text, e.text);
	return v;
}

/* Makes W carry TEXT (borrowed) unparsed, with the scanner's spans. */
bool mwt_set_raw(struct mw_walk *w, const char *text)
{
	json_t *err = NULL;
	msg_release(w->m);
	if (msg_init_line(w->m, text, strlen(text), &err) < 0 || !msg_is_raw(w->m)) {
		json_decref(err);
		msg_release(w->m);
		return false;
	}
	return true;
}

/* ---- walking one message ---- */

/* Records the verdict and keeps MSG (stolen), freeing the message kept before. */
void mwt_on_done(struct mw_walk *w, enum mw_verdict v)
{
	struct mwt_run *r = (struct mwt_run *)(void *)w;
	json_t *msg = w->m->tree;   /* done takes the tree, as the chain does */
	w->m->tree = NULL;
	json_decref(r->got);
	r->got = msg;
	free(r->went_on);
	free(r->went_on_id);
	free(r->went_on_result);
	r->went_on = r->went_on_id = r->went_on_result = NULL;
	if (!msg && w->m->raw) {  /* what the chain would splice and send */
		struct jspan id = w->m->js.span[MSG_SPAN_ID], res = w->m->js.span[MSG_SPAN_RESULT];
		r->went_on = strndup(w->m->raw, w->m->raw_len);
		r->went_on_id = id.p ? strndup(id.p, id.n) : NULL;
		r->went_on_result = res.p ? strndup(res.p, res.n) : NULL;
	}
	r->verdict = v;
	r->done++;
}

/* The bytes R's message went on as, unread, parsed (a new reference), or NULL. */
json_t *mwt_went_on(const struct mwt_run *r)
{
	if (!r->went_on)
		return NULL;
	json_t *v = json_loads(r->went_on, 0, NULL);
	if (!v)
		fail_msg("the bytes that went on do not parse: %s", r->went_on);
	return v;
}

/* A and B are the same message but for their ids. */
void mwt_expect_same_but_id(json_t *a, json_t *b)
{
	assert_non_null(a);
	assert_non_null(b);
	json_t *ca = json_deep_copy(a), *cb = json_deep_copy(b);
	json_object_del(ca, "id");
	json_object_del(cb, "id");
	if (!json_equal(ca, cb)) {
		char *sa = json_dumps(ca, JSON_SORT_KEYS), *sb = json_dumps(cb, JSON_SORT_KEYS);
		print_error("unparsed: %s\nparsed:   %s\n", sa, sb);
		free(sa);
		free(sb);
		fail();
	}
	json_decref(ca);
	json_decref(cb);
}

/* The bytes' message and the tree's are the same but for the ids. */
void mwt_expect_same_list(const struct mwt_run *r, json_t *bytes, json_t *tree,
			  const char *id)
{
	mwt_expect_same_but_id(bytes, tree);
	if (!r->went_on)
		return;
	assert_non_null(r->went_on_id);
	assert_string_equal(r->went_on_id, id);
	json_t *res = mwt_json(r->went_on_result);
	assert_true(json_equal(res, json_object_get(bytes, "result")));
	json_decref(res);
}

/*
 * Puts M's message on R's walk: the tree (stolen or parsed), or a copy of
 * the text that R owns. Returns a new reference to the message as a tree,
 * for the caller to read and free.
 */
static json_t *put_message(struct mwt_run *r, const struct mwt_msg *m)
{
	r->w.m = &r->m;
	msg_release(&r->m);
	if (m->raw) {
		assert_non_null(m->text);
		free(r->text);
		r->text = strdup(m->text);
		assert_non_null(r->text);
		if (m->unscanned) {   /* bytes without spans */
			r->m.raw = r->text;
			r->m.raw_len = strlen(r->text);
		} else {
			assert_true(mwt_set_raw(&r->w, r->text));
		}
		return mwt_json(r->text);
	}
	msg_init_tree(&r->m, m->msg ? m->msg : mwt_json(m->text));
	return json_incref(r->m.tree);
}

/* Starts walking M forward through PL in R (overwritten); returns what done() got (borrowed). */
json_t *mwt_forward(struct mwt_run *r, struct pipeline *pl, const struct mwt_msg *m)
{
	memset(r, 0, sizeof *r);
	json_t *msg = put_message(r, m);
	const char *method = m->method ? m->method :
		json_string_value(json_object_get(msg, "method"));
	if (method) {
		snprintf(r->method, sizeof r->method, "%s", method);
		r->ctx.method = r->method;
		r->ctx.method_code = mcp_method_code(r->method);
	}
	r->ctx.dir = m->dir;
	r->ctx.kind = m->kind != RPC_INVALID ? m->kind :
		json_object_get(msg, "id") ? RPC_REQUEST : RPC_NOTIFICATION;
	if (r->ctx.kind == RPC_REQUEST)
		r->id = json_incref(json_object_get(msg, "id"));
	json_decref(msg);
	r->ctx.id = r->id;
	r->ctx.client = m->client;
	r->ctx.credential = m->credential;
	r->ctx.credential_len = m->credential ? strlen(m->credential) : 0;
	r->ctx.backend = m->backend;
	if (m->name) {
		snprintf(r->name, sizeof r->name, "%s", m->name);
		r->ctx.name = r->name;
	}
	r->ctx.start = m->start;
	r->ctx.request_bytes = m->bytes;
	r->w.stage[0] = pl;
	r->w.ctx = &r->ctx;
	r->w.done = m->done ? m->done : mwt_on_done;
	mw_walk_forward(&r->w);
	return r->got;
}

/* mwt_forward, asserting that done() came back at once; returns what it got (borrowed). */
json_t *mwt_walk(struct mwt_run *r, struct pipeline *pl, const struct mwt_msg *m)
{
	mwt_forward(r, pl, m);
	assert_int_equal(r->done, 1);
	return r->got;
}

/* How the response MSG ended, as the chain tells modules (chain.c keeps its own, static). */
static enum mw_outcome outcome_of(json_t *msg)
{
	json_t *res = json_object_get(msg, "result");
	return json_object_get(msg, "error") ? MW_OUTCOME_ERROR :
		json_is_true(json_object_get(res, "isError")) ? MW_OUTCOME_TOOL_ERROR :
		MW_OUTCOME_OK;
}

/* Starts walking the response M back through R's modules; returns what done() got (borrowed). */
json_t *mwt_back(struct mwt_run *r, const struct mwt_msg *m)
{
	json_t *msg = put_message(r, m);
	r->ctx.kind = RPC_RESPONSE;
	r->ctx.outcome = outcome_of(msg);
	json_decref(msg);
	if (m->backend)
		r->ctx.backend = m->backend;
	r->ctx.response_bytes = m->bytes;
	mw_walk_back(&r->w);
	return r->got;
}

/* Walks the response M back after a request that passed; returns what done() got (borrowed). */
json_t *mwt_respond(struct mwt_run *r, const struct mwt_msg *m)
{
	assert_int_equal(r->verdict, MW_PASS);
	mwt_back(r, m);
	assert_int_equal(r->done, 2);
	return r->got;
}

/* Walks the client request METHOD/PARAMS (stolen) through PL; a call is about its tool. */
json_t *mwt_request(struct mwt_run *r, struct pipeline *pl, const char *method, json_t *params)
{
	const char *name = strcmp(method, "tools/call") == 0 ?
		json_string_value(json_object_get(params, "name")) : NULL;
	return mwt_walk(r, pl, &(struct mwt_msg){ .kind = RPC_REQUEST, .method = method,
		.name = name, .msg = rpc_request(9, method, params) });
}

/* Walks the response MSG (stolen) back; WIRE is its size as received. */
json_t *mwt_respond_msg(struct mwt_run *r, json_t *msg, size_t wire)
{
	return mwt_respond(r, &(struct mwt_msg){ .msg = msg, .bytes = wire });
}

/* Walks a response with RESULT (stolen) back. */
json_t *mwt_respond_result(struct mwt_run *r, json_t *result)
{
	return mwt_respond_msg(r, rpc_result(json_object_get(r->got, "id"), result), 0);
}

/* Frees what R owns (not its pipeline's state) and zeroes R. */
void mwt_run_release(struct mwt_run *r)
{
	if (r->w.held)
		r->m.tree = NULL;   /* the module holding the walk owns what it kept */
	msg_release(&r->m);
	json_decref(r->got);
	json_decref(r->ctx.scratch);
	json_decref(r->id);
	free(r->text);
	free(r->went_on);
	free(r->went_on_id);
	free(r->went_on_result);
	memset(r, 0, sizeof *r);
}

/* Ends R as the chain ends an exchange: a request that passed is abandoned; then released. */
void mwt_run_end(struct mwt_run *r)
{
	if (r->ctx.kind == RPC_REQUEST && r->done == 1 && r->verdict == MW_PASS)
		mw_walk_abandon(&r->w);
	mwt_run_release(r);
}

/* The error code of R's reply, 0 when none. */
json_int_t mwt_error_code(const struct mwt_run *r)
{
	return json_integer_value(json_object_get(json_object_get(r->got, "error"), "code"));
}

/* The error message of R's reply (borrowed from R), or NULL. */
const char *mwt_error_message(const struct mwt_run *r)
{
	return json_string_value(json_object_get(json_object_get(r->got, "error"), "message"));
}

/* ---- reading JSON ---- */

/* Member PATH (dot-separated keys and indexes) of V, borrowed from V, or NULL. */
json_t *mwt_at(json_t *v, const char *path)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof buf, "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, strtoul(k, NULL, 10)) : json_object_get(v, k);
	return v;
}

/* The string at PATH of V, borrowed from V. */
const char *mwt_str_at(json_t *v, const char *path)
{
	return json_string_value(mwt_at(v, path));
}

/* Asserts V at PATH equals the JSON text WANT. */
void mwt_expect_json(json_t *v, const char *path, const char *want)
{
	json_t *w = mwt_json(want);
	json_t *got = mwt_at(v, path);
	if (!json_equal(got, w)) {
		char *g = json_dumps(got, JSON_ENCODE_ANY | JSON_SORT_KEYS);
		fail_msg("%s is %s, want %s", path, g ? g : "(nothing)", want);
	}
	json_decref(w);
}

/* ---- the loop ---- */

/* Wakes the loop up. */
static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Runs the default loop until *FLAG becomes nonzero or SECONDS pass. */
void mwt_run_until(const int *flag, double seconds)
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

/* Runs the default loop for SECONDS. */
void mwt_run_for(double seconds)
{
	int never = 0;
	mwt_run_until(&never, seconds);
}

/* Every middleware test builds pipelines from the real registry, as main.c does. */
__attribute__((constructor)) static void use_registry(void)
{
	mw_use_registry(mw_registry);
}
