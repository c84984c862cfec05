/*
 * app_test.h - helpers shared by the unit tests of src/app/: a
 * configuration file written from text (a reload reads the file again),
 * the fixture server's path, and the main of a test file.
 *
 * Every helper fails the running cmocka test rather than returning an
 * error.
 */
#ifndef MCPC_APP_TEST_H
#define MCPC_APP_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include "app.h"

struct CMUnitTest;

/* The mcp-fixture-server binary ($FIXTURE, set by meson). */
const char *apt_fixture(void);

/*
 * Writes TEXT (printf-formatted; each "%1$s" is the fixture's path) as the
 * configuration file NAME in the run's temporary directory; returns its
 * path (static storage, valid until the next call).
 */
const char *apt_write(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Loads the configuration file PATH, printing its errors and failing the
 * test when it has some; the caller owns the result. */
struct cfg *apt_load(const char *path);

/* app_new on the file PATH, failing the test when it returns NULL. */
struct app *apt_app(const char *path, bool listening);

/* Runs the loop until no backend of A has anything running (all stopped
 * and reaped); fails the test after CAP seconds. */
void apt_wait_quiet(struct app *a, double cap);

/* Runs the loop until each of the N backends V is gone and reaped; fails
 * the test after CAP seconds. */
void apt_wait_gone(struct backend *const *v, size_t n, double cap);

/* Begins A's stop, waits until nothing of it runs, frees A. */
void apt_stop_and_free(struct app *a);

/*
 * The main of a test file: logs at error level (debug with DBG set),
 * sets up the writer's flush hook and the module registry, runs TESTS
 * (N of them) as group NAME inside a temporary directory.
 */
int apt_main(const char *name, const struct CMUnitTest *tests, size_t n);

#endif
