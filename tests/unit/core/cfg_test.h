/*
 * cfg_test.h - reading the error lines a configuration check collected,
 * shared by the core tests that build configurations and pipelines
 * (test_config.c, test_pipeline.c).
 */
#ifndef MCPC_CFG_TEST_H
#define MCPC_CFG_TEST_H

#include <stdbool.h>

#include "config.h"

/* True when some error line of E equals LINE. */
bool cfgt_has_error(const struct cfg_errors *e, const char *line);

/* True when some error line of E starts with PREFIX. */
bool cfgt_has_error_prefix(const struct cfg_errors *e, const char *prefix);

#endif
