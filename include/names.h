/*
 * names.h - the listed name nearest a mistyped one, for "did you mean"
 * hints in configuration errors.
 */
#ifndef MCPC_NAMES_H
#define MCPC_NAMES_H

#include <stddef.h>

/* Names longer than this are never matched. */
#define NAMES_MAX_LEN 64

/*
 * The name of LIST (NULL-terminated; borrowed) nearest KEY, or NULL when
 * none is near enough to be the one meant. Near enough: at most one edit
 * for a key of up to five characters, two for a longer one, where an edit
 * inserts, deletes or replaces a character or swaps two neighbours, and a
 * difference of case alone is free ("Command" is "command"). On a tie the
 * earlier name wins. KEY itself is never returned as its own hint: a key
 * that is in LIST gets NULL.
 */
const char *names_nearest(const char *key, const char *const *list);

#endif
