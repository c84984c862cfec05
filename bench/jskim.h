/*
 * jskim: a tiny, allocation-free JSON skimmer shared by the benchmark
 * tools.
 *
 * It walks JSON text without building a tree: it finds where values end
 * and hands the members of an object to a callback as raw spans, so a
 * caller can pick out the few members it needs (an id, a method name, a
 * text) at memory speed.  It checks structure (brackets, strings, commas,
 * colons) but not the contents of numbers, literals, escapes or UTF-8, so
 * a caller that needs a full validation still uses jansson.
 */
#ifndef MCP_BENCH_JSKIM_H
#define MCP_BENCH_JSKIM_H

#include <stdbool.h>
#include <stddef.h>

/* Called for each member of an object: key (without quotes, klen bytes,
 * escapes left as they are), the value starting at v, the end of the text
 * e, the caller's ctx and the depth given to jskim_object.  Returns where
 * the value ends if it consumed it, or NULL to have it skipped. */
typedef const char *jskim_fn(void *ctx, const char *key, size_t klen,
                             const char *v, const char *e, int depth);

/* Skip JSON white space from p; returns the first other byte (or e). */
const char *jskim_ws(const char *p, const char *e);

/* Skip the string whose opening quote is at p; returns the byte after the
 * closing quote, or NULL if malformed.  Sets *escaped (when escaped is not
 * NULL) if the string holds a backslash escape. */
const char *jskim_string(const char *p, const char *e, bool *escaped);

/* Skip any JSON value starting at p (after white space); NULL if
 * malformed. */
const char *jskim_value(const char *p, const char *e);

/* Walk the object at p, calling fn for each member; returns the end of the
 * object or NULL if malformed. */
const char *jskim_object(const char *p, const char *e, jskim_fn *fn,
                         void *ctx, int depth);

/* Walk the array at p; if fn is not NULL and the first element is an
 * object, walk it with jskim_object(fn, ctx, depth).  Stores the number of
 * elements in *count when count is not NULL.  Returns the end or NULL. */
const char *jskim_array(const char *p, const char *e, jskim_fn *fn, void *ctx,
                        int depth, long *count);

/* True if the klen-byte key equals the NUL-terminated name. */
bool jskim_key_is(const char *key, size_t klen, const char *name);

/* True if the string span [v, vend) (quotes included) is exactly the JSON
 * string "name" written without escapes. */
bool jskim_str_is(const char *v, const char *vend, const char *name);

#endif
