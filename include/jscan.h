/*
 * jscan.h - a validating, allocation-free JSON scanner for the hot path.
 *
 * It checks a whole JSON-RPC message and records where the few members
 * routing needs are (id, method, the progress token, a cancelled request
 * id), so that a message nobody needs to read can be forwarded as the
 * bytes it came in, with only its id (and progress token) spliced.
 *
 * It accepts a subset of what jansson accepts: anything unusual (escaped
 * keys or methods, surrogate escapes, very long integers, deep nesting,
 * duplicate routing members) makes it decline, and the caller takes the
 * full parsing path, which gives the exact error for invalid input.
 */
#ifndef MCPC_JSCAN_H
#define MCPC_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A span of the input; p == NULL when absent. */
struct jspan {
	const char *p;
	size_t n;
};

struct jscan {
	struct jspan id;         /* raw value text of "id" */
	struct jspan method;     /* contents of "method", without quotes */
	struct jspan token;      /* params._meta.progressToken (requests) or
				  * params.progressToken (progress), raw */
	struct jspan request_id; /* params.requestId (cancelled), raw */
	struct jspan name;       /* params.name when a string, without quotes
				  * (escapes left as they are) */
	struct jspan uri;        /* params.uri, likewise */
	struct jspan meta;       /* params._meta when an object, raw */
	int64_t id_int;          /* the id's value when it is an integer */
	bool subject_escaped;    /* name or uri holds escapes */
	bool is_error;           /* result.isError is true */
	bool id_is_string;
	bool has_jsonrpc;
	bool has_result;
	bool has_error;
	bool has_params;
};

/*
 * Scans the message in [P, P+N). Returns true when it is a valid JSON
 * object with "jsonrpc":"2.0" and simple routing members (filled in OUT);
 * false means "take the full path", not necessarily "invalid".
 */
bool jscan_message(const char *p, size_t n, struct jscan *out);

/* True when span S holds exactly the bytes of NUL-terminated STR. */
bool jspan_eq(struct jspan s, const char *str);

/* The same for a string literal LIT, compared inline. */
#define jspan_is(s, lit) \
	((s).p && (s).n == sizeof(lit) - 1 && memcmp((s).p, (lit), sizeof(lit) - 1) == 0)

#endif
