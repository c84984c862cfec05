/*
 * cfg_test.h - reading the error lines a configuration check collected,
 * shared by the core tests that build configurations, pipelines and
 * redaction rules (test_config.c, test_pipeline_build.c, test_redact.c).
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
