/*
 * cfg_errors.c - the error lines of a configuration check (see
 * include/cfg_errors.h): appended by the loader and the pipeline builder,
 * read and released by whoever asked for the check.
 */
#include "cfg_errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends an error line. */
void cfg_error(struct cfg_errors *errs, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	char **l = realloc(errs->lines, (errs->count + 1) * sizeof *l);
	if (!l)
		return;
	errs->lines = l;
	errs->lines[errs->count++] = strdup(line);
}

/* Frees the error lines. */
void cfg_errors_release(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->count; i++)
		free(errs->lines[i]);
	free(errs->lines);
	errs->lines = NULL;
	errs->count = 0;
}
