/*
 * test_pipeline_build.c - unit tests for src/core/pipeline_build.c:
 * pipelines built from a "middleware" array through a module registry,
 * every bad entry reported at its JSON pointer (with the nearest module
 * name as a hint), and the option checks modules make while they are
 * created (mw_error, mw_check_keys).
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

#include "cfg_test.h"
#include "middleware.h"

/* ---- a registry of test modules ---- */

static int created, destroyed;

static void t_destroy(struct mw_module *m)
{
	destroyed++;
	free(m);
}

static const struct mw_module_ops t_ops = { .name = "t", .destroy = t_destroy };

/* "ok": created unless its option "fail" is true, then reported at /fail. */
static struct mw_module *ok_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = { "fail", NULL };
	if (mw_check_keys(b, opts, keys))
		return NULL;
	if (json_is_true(json_object_get(opts, "fail"))) {
		mw_error(b, "/fail", "asked to fail");
		return NULL;
	}
	struct mw_module *m = calloc(1, sizeof *m);
	m->ops = &t_ops;
	created++;
	return m;
}

/* "silent": fails without saying why (the builder says it for it). */
static struct mw_module *silent_create(json_t *opts, struct mw_build *b)
{
	(void)opts;
	(void)b;
	return NULL;
}

static const struct mw_def test_registry[] = {
	{ "ok", ok_create }, { "silent", silent_create }, { NULL, NULL },
};

static int setup(void **state)
{
	(void)state;
	created = destroyed = 0;
	mw_use_registry(test_registry);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	mw_use_registry(NULL);
	return 0;
}

/* ---- tests ---- */

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
	assert_true(cfgt_has_error(&e, "f.json: /mcpServers/s/middleware/0: a module is an object "
			      "{\"use\": \"NAME\", ...options}"));
	assert_true(cfgt_has_error(&e, "f.json: /mcpServers/s/middleware/1/use: missing or not a string: "
			      "name the module to use"));
	assert_true(cfgt_has_error(&e, "f.json: /mcpServers/s/middleware/2/use: missing or not a string: "
			      "name the module to use"));
	assert_true(cfgt_has_error_prefix(&e, "f.json: /mcpServers/s/middleware/3/use: unknown module "
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
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2/rules/0/allow: must be an array"));
	json_t *opts = json_loads("{\"use\":\"m\",\"rules\":[],\"rulez\":1,\"x\":2}", 0, NULL);
	static const char *const keys[] = { "rules", NULL };
	assert_int_equal(mw_check_keys(&b, opts, keys), 2);
	assert_int_equal(b.nerr, 3);
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2/rulez: unknown option (did you mean \"rules\"?)"));
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2/x: unknown option"));
	assert_int_equal(mw_check_keys(&b, opts, (const char *const[]){ "rules", "rulez", "x", NULL }), 0);
	json_decref(opts);
	/* a key is a pointer segment at either level (RFC 6901), with its hint */
	opts = json_loads("{\"use\":\"m\",\"a/b~\":1}", 0, NULL);
	assert_int_equal(mw_check_keys(&b, opts, NULL), 1);
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2/a~1b~0: unknown option"));
	json_decref(opts);
	opts = json_loads("{\"alow\":[]}", 0, NULL);
	mw_check_keys_at(&b, "/rules/0", opts, (const char *const[]){ "allow", "deny", "ask", NULL });
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2/rules/0/alow: unknown option "
				   "(did you mean \"allow\"?)"));
	json_decref(opts);
	cfg_errors_release(&e);
}

/* Modules come from the registry in order; one bad entry fails the whole
 * pipeline, the modules already made destroyed, every problem reported. */
static void test_build_from_registry(void **state)
{
	(void)state;
	struct cfg_errors e = { 0 };
	json_t *arr = json_loads("[{\"use\":\"ok\"},{\"use\":\"ok\"}]", 0, NULL);
	struct pipeline *pl = pipeline_build(arr, "f.json", "/middleware", &e);
	assert_non_null(pl);
	assert_int_equal(pipeline_size(pl), 2);
	assert_int_equal(e.count, 0);
	assert_non_null(mw_find("ok"));
	pipeline_unref(pl);
	assert_int_equal(destroyed, 2);
	json_decref(arr);

	created = destroyed = 0;
	arr = json_loads("[{\"use\":\"ok\"},{\"use\":\"ok\",\"fail\":true,\"fial\":1},"
			 "{\"use\":\"silent\"},{\"use\":\"okk\"}]", 0, NULL);
	assert_null(pipeline_build(arr, "f.json", "/middleware", &e));
	assert_int_equal(created, 1);
	assert_int_equal(destroyed, 1);
	assert_int_equal(e.count, 3);
	assert_true(cfgt_has_error(&e, "f.json: /middleware/1/fial: unknown option "
				   "(did you mean \"fail\"?)"));
	assert_true(cfgt_has_error(&e, "f.json: /middleware/2: module \"silent\" could not be created"));
	assert_true(cfgt_has_error(&e, "f.json: /middleware/3/use: unknown module \"okk\" "
				   "(did you mean \"ok\"? available: ok, silent)"));
	cfg_errors_release(&e);
	json_decref(arr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_empty),
		cmocka_unit_test(test_build_errors),
		cmocka_unit_test(test_module_option_errors),
		cmocka_unit_test_setup_teardown(test_build_from_registry, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
