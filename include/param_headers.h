/*
 * param_headers.h - the 2026-07-28 era's x-mcp-header: a tool may mark
 * arguments (in its inputSchema) that a client on Streamable HTTP mirrors
 * into "Mcp-Param-{Name}" request headers, so that an intermediary can
 * route on them without reading the body.
 *
 * A backend's table learns each tool's marks from the tools/list results
 * that cross it, drops from those results the tools whose marks break the
 * specification's rules (as a client must), and gives the headers of a
 * tools/call from its arguments. Values go in a header as they are when
 * that is safe, else in the "=?base64?...?=" form (param_encode). The HTTP
 * front's table learns from the lists it serves and checks the headers a
 * client sent against the body (param_check), as a server must.
 */
#ifndef MCPC_PARAM_HEADERS_H
#define MCPC_PARAM_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hmap.h"

struct param_table {
	struct hmap tools;   /* tool name -> json_t array of [name, [key...]] (owned) */
};

#define PARAM_TABLE_INIT { HMAP_INIT }

/* Frees what T learned. */
void param_table_release(struct param_table *t);

/*
 * Learns the marks of the tools in TOOLS (a tools/list result's "tools",
 * borrowed), replacing what was known of each. A tool whose marks are
 * invalid is not learned; with DROP it is also removed from TOOLS, with a
 * warning naming WHO (a client must not offer it). Returns the number of
 * tools with invalid marks.
 */
size_t param_learn(struct param_table *t, json_t *tools, const char *who, bool drop);

/* Adds a header NAME: VALUE (both NUL-terminated, VALUE encoded); < 0 on failure. */
typedef int (*param_header_fn)(void *arg, const char *name, const char *value);

/*
 * Calls ADD for each "Mcp-Param-{Name}" header a tools/call of TOOL with
 * ARGUMENTS (borrowed; may be NULL) carries: one for each marked argument
 * present and not null. Returns 0, or the first negative ADD returned.
 */
int param_headers(const struct param_table *t, const char *tool, json_t *arguments,
		  param_header_fn add, void *arg);

/*
 * The header value for text S (N bytes): S itself when it is visible ASCII
 * and spaces with none at either end and is not itself of the form
 * "=?base64?...?=", else "=?base64?" + its Base64 + "?=". Malloc'd; NULL
 * when out of memory.
 */
char *param_encode(const char *s, size_t n);

/* Gives the value of request header NAME (decoded from its Base64 form),
 * NULL when absent; *BAD when it cannot be decoded. Malloc'd. */
typedef char *(*param_get_fn)(void *arg, const char *name, bool *bad);

/*
 * Checks the Mcp-Param-* headers of a tools/call of TOOL with ARGUMENTS
 * against them: each marked argument that param_headers would send (one
 * present, not null, and a string, a boolean or an integer) must have its
 * header, equal to it (an integer compared as a number). NULL when they
 * agree (or TOOL has no marks), else why not, in WHY (N bytes).
 */
const char *param_check(const struct param_table *t, const char *tool, json_t *arguments,
			param_get_fn get, void *arg, char *why, size_t n);

#endif
