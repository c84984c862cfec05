/*
 * app_test.c - helpers shared by the unit tests of src/app/ (app_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "app_test.h"
#include "backend.h"
#include "ext_test.h"
#include "log.h"
#include "middleware.h"
#include "tmpdir_test.h"
#include "writer.h"

const char *apt_fixture(void)
{
	const char *f = getenv("FIXTURE");
	if (!f || !*f)
		fail_msg("FIXTURE is not set (meson sets it to mcp-fixture-server)");
	return f;
}

const char *apt_write(const char *name, const char *fmt, ...)
{
	static char path[512];
	char *text;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	tmpd_path(path, sizeof path, name);
	tmpd_spit(path, text);
	free(text);
	return path;
}

struct cfg *apt_load(const char *path)
{
	struct cfg_errors errs = { 0 };
	struct cfg *c = cfg_load(path, &errs);
	for (size_t i = 0; i < errs.count; i++)
		print_message("%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!c)
		fail_msg("bad test configuration %s", path);
	return c;
}

struct app *apt_app(const char *path, bool listening)
{
	/* a level given outside the file: a reload leaves it alone */
	struct app *a = app_new(apt_load(path), getenv("DBG") ? "debug" : "error", listening);
	if (!a)
		fail_msg("app_new refused %s", path);
	return a;
}

/* True when nothing of the app's backends runs. */
static bool quiet(const void *arg)
{
	return !app_any_running(arg);
}

void apt_wait_quiet(struct app *a, double cap)
{
	if (!ext_run_until(quiet, a, cap))
		fail_msg("a backend was still running after %g s", cap);
}

struct backends {
	struct backend *const *v;
	size_t n;
};

/* True when every backend of ARG (struct backends) is gone and reaped. */
static bool all_gone(const void *arg)
{
	const struct backends *bs = arg;
	for (size_t i = 0; i < bs->n; i++)
		if (backend_state(bs->v[i]) != BACKEND_GONE || backend_running(bs->v[i]))
			return false;
	return true;
}

void apt_wait_gone(struct backend *const *v, size_t n, double cap)
{
	struct backends bs = { v, n };
	if (!ext_run_until(all_gone, &bs, cap))
		fail_msg("a backend was not gone after %g s", cap);
}

void apt_stop_and_free(struct app *a)
{
	app_begin_stop(a, "the test is over", LOG_DEBUG);
	apt_wait_quiet(a, 10);
	app_free(a);
}

int apt_main(const char *name, const struct CMUnitTest *tests, size_t n)
{
	log_set_level(getenv("DBG") ? LOG_DEBUG : LOG_ERROR);
	writer_setup();
	mw_use_registry(mw_registry);   /* as main.c does */
	backend_use_transports(be_transports);
	return _cmocka_run_group_tests(name, tests, n, tmpd_setup, tmpd_teardown);
}
