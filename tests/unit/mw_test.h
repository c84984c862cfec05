/*
 * mw_test.h - helpers shared by the middleware modules' unit tests.
 */
#ifndef MCPC_MW_TEST_H
#define MCPC_MW_TEST_H

#include <stdbool.h>

#include "config.h"
#include "middleware.h"

/* True when some error line contains TEXT. */
bool mwt_has_error(const struct cfg_errors *e, const char *text);

/* Builds (does not start) a pipeline from the JSON array TEXT, errors into E. */
struct pipeline *mwt_build(const char *text, struct cfg_errors *e);

/* Same from a printf-formatted array. */
struct pipeline *mwt_buildf(struct cfg_errors *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Makes W carry TEXT (borrowed, kept alive by the caller) unparsed, as the
 * chain does for a scanned message: raw bytes and spans, msg NULL.
 * Returns false when the scanner declines TEXT.
 */
bool mwt_set_raw(struct mw_walk *w, const char *text);

#endif
