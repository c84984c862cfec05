/*
 * cfg_errors.h - the list a configuration check collects its error lines
 * in, each "FILE...: message". Loading a configuration (config.c) and
 * building its pipelines (pipeline_build.c) both append to it; it knows
 * neither, so the two point one way.
 */
#ifndef MCPC_CFG_ERRORS_H
#define MCPC_CFG_ERRORS_H

#include <stddef.h>

/* A list of error lines, each "FILE...: message". Owns its lines. */
struct cfg_errors {
	char **lines;
	size_t count;
};

/* Appends a formatted error line (dropped when memory runs out). */
void cfg_error(struct cfg_errors *errs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Frees the error lines; ERRS is empty again and may be reused. */
void cfg_errors_release(struct cfg_errors *errs);

#endif
