/*
 * cfg_test.c - reading collected configuration errors (see cfg_test.h).
 */
#include <string.h>

#include "cfg_test.h"

/* True when some error line equals LINE. */
bool cfgt_has_error(const struct cfg_errors *e, const char *line)
{
	for (size_t i = 0; i < e->count; i++)
		if (strcmp(e->lines[i], line) == 0)
			return true;
	return false;
}

/* True when some error line starts with PREFIX. */
bool cfgt_has_error_prefix(const struct cfg_errors *e, const char *prefix)
{
	for (size_t i = 0; i < e->count; i++)
		if (strncmp(e->lines[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}
