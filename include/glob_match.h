/*
 * glob_match.h - shell-style wildcard matching of names (tool and prompt
 * names, resource URIs, client identities) for the middleware modules.
 *
 *   *       any run of characters, "/" included, possibly empty
 *   ?       exactly one character (a whole UTF-8 sequence)
 *   [abc]   one byte from the set; ranges "a-z"; "[!...]" or "[^...]"
 *           negates; "]" first in the set is literal
 *   \x      the character x literally
 *
 * Matching is case-sensitive and covers the whole string.
 */
#ifndef MCPC_GLOB_MATCH_H
#define MCPC_GLOB_MATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct mw_build;

/* True when the whole of S matches the pattern PAT (both borrowed). */
bool glob_match(const char *pat, const char *s);

/*
 * Checks PAT's syntax: returns NULL when it is valid, else a static
 * message ("unterminated [...]", "trailing backslash", "empty pattern").
 */
const char *glob_check(const char *pat);

/* A list of patterns, owned. */
struct glob_list {
	char **v;
	size_t n;
};

/*
 * Fills L from V (borrowed): a string or an array of strings, each a
 * valid pattern. Reports problems at KEY through mw_error and returns -1;
 * L is then empty (nothing to release).
 */
int glob_list_parse(struct mw_build *b, const char *key, json_t *v,
		    struct glob_list *l);

/* True when S matches one of L's patterns (false for a NULL S). */
bool glob_list_match(const struct glob_list *l, const char *s);

/* Frees L's patterns. */
void glob_list_release(struct glob_list *l);

#endif
