/*
 * mw_test.c - helpers shared by the middleware modules' unit tests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "mw_test.h"

#include "jscan.h"

/* True when some error line contains TEXT. */
bool mwt_has_error(const struct cfg_errors *e, const char *text)
{
	for (size_t i = 0; i < e->count; i++)
		if (strstr(e->lines[i], text))
			return true;
	return false;
}

/* Builds a pipeline from a JSON array, failing the test on bad JSON. */
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

/* Builds a pipeline from a printf-formatted JSON array. */
struct pipeline *mwt_buildf(struct cfg_errors *e, const char *fmt, ...)
{
	char text[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	return mwt_build(text, e);
}

/* Makes W carry TEXT unparsed. */
bool mwt_set_raw(struct mw_walk *w, const char *text)
{
	struct jscan js;
	if (!jscan_message(text, strlen(text), &js))
		return false;
	w->msg = NULL;
	w->raw = text;
	w->raw_len = strlen(text);
	w->span[MW_SPAN_ID] = js.id;
	w->span[MW_SPAN_TOKEN] = js.token;
	w->span[MW_SPAN_META] = js.meta;
	return true;
}
