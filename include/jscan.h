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
 *
 * The contract with rpc_parse() (json_loadb with JSON_ALLOW_NUL |
 * JSON_DECODE_ANY), checked by tests/fuzz/fuzz_jscan.c: whatever
 * jscan_message() accepts jansson accepts, and every member recorded
 * holds what jansson reads there. So a \u0000 in an object key, at any
 * depth, declines (jansson refuses it whatever the flags), while one in a
 * string value passes (JSON_ALLOW_NUL). An integer id's id_int keys as
 * rpc_id_key_int() (the id key rule in rpc.h); a real id declines.
 * White space may hold raw CR and LF, as JSON allows: the scan says so
 * (LINES), at no cost to compact input, so that the bytes never reach a
 * line-framed peer as several lines (msg_init_line blanks them).
 * One difference is deliberate: a forwarded message keeps its bytes, so
 * an id written -0 goes back as -0, unless a module changed the message
 * and it is serialized from its tree, as 0 (the same number; JSON-RPC
 * compares ids by value).
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

/* Indexes of the spans that struct jscan also holds as an array. */
enum jscan_span {
	JSCAN_ID,
	JSCAN_TOKEN,
	JSCAN_REQUEST_ID,
	JSCAN_META,
	JSCAN_RESULT,
	JSCAN_SPANS
};

struct jscan {
	/*
	 * The spans a message goes on using after the scan, by name or as
	 * SPAN[JSCAN_*]: struct msg embeds the scan as jscan_message writes
	 * it, instead of copying it (msg.h).
	 */
	union {
		struct {
			struct jspan id;         /* raw value text of "id" */
			struct jspan token;      /* params._meta.progressToken (requests)
						  * or params.progressToken (progress), raw */
			struct jspan request_id; /* params.requestId (cancelled), raw */
			struct jspan meta;       /* params._meta when an object, raw */
			struct jspan result;     /* "result" when an object, raw */
		};
		struct jspan span[JSCAN_SPANS];
	};
	struct jspan method;     /* contents of "method", without quotes */
	struct jspan name;       /* params.name when a string, without quotes
				  * (escapes left as they are) */
	struct jspan uri;        /* params.uri, likewise */
	int64_t id_int;          /* the id's value when it is an integer */
	bool subject_escaped;    /* name or uri holds escapes */
	bool lines;              /* a raw CR or LF in the white space (JSON
				  * allows them nowhere else): the bytes are
				  * not one line as they are (msg.c blanks them) */
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

/*
 * Walking into a message jscan_message() accepted (valid JSON), without
 * parsing it: these only find where values end. On bytes that are not
 * valid JSON they stay in bounds but may give any span.
 *
 * jscan_member: the value of member KEY of the object in span OBJ (its
 * last occurrence, as jansson keeps it). Returns 1 and sets *VAL (the
 * value's text), 0 when there is no such member, -1 when OBJ is not an
 * object or one of its keys has escapes (then parse the message instead).
 */
int jscan_member(struct jspan obj, const char *key, struct jspan *val);

/*
 * Where the value of the first member KEY of the object OBJ starts: 1
 * and *AT, 0 when there is none, -1 as jscan_member. The members before
 * it are skipped, the value itself is not (walk it with jscan_items).
 */
int jscan_member_start(struct jspan obj, const char *key, const char **at);

/*
 * After a value of the object OBJ that ends at P: 1 when a member KEY
 * comes later (a repeat, which a parser would take instead), 0 when
 * none does, -1 as jscan_member.
 */
int jscan_member_after(struct jspan obj, const char *p, const char *key);

/* The elements of an array, one at a time (jscan_items_begin/next). */
struct jscan_items {
	const char *p, *e;
	bool first;
	bool escaped;   /* an object element had an escaped key */
};

/* Starts on the array in span ARR; false when ARR is not an array. */
bool jscan_items_begin(struct jscan_items *it, struct jspan arr);

/*
 * The next element's text in *ITEM: returns 1, 0 after the last one (then
 * IT->p is at the array's ']'), -1 when the array does not hold together. With FIELD, *FV gets the value of
 * the element's last member FIELD when the element is an object (else
 * {NULL, 0}), found in the same pass; an object with an escaped key ends
 * the walk with -1 and sets IT->escaped.
 */
int jscan_items_next(struct jscan_items *it, struct jspan *item, const char *field,
		     struct jspan *fv);

/* True when span S holds exactly the bytes of NUL-terminated STR. */
bool jspan_eq(struct jspan s, const char *str);

/* The same for a string literal LIT, compared inline. */
#define jspan_is(s, lit) \
	((s).p && (s).n == sizeof(lit) - 1 && memcmp((s).p, (lit), sizeof(lit) - 1) == 0)

#endif
