/*
 * rpc.h - JSON-RPC 2.0 codec: parsing a line, classifying a message,
 * building responses and errors, and keys for ids.
 *
 * Ownership: functions that take a json_t say whether they borrow or
 * steal it; functions returning json_t return a new reference.
 */
#ifndef MCPC_RPC_H
#define MCPC_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_NOT_INITIALIZED -32002  /* MCP: request before initialize */
#define RPC_REQUEST_TIMEOUT -32001  /* mcp-chain: request timed out */
#define RPC_BACKEND_GONE -32000     /* mcp-chain: backend unavailable */

enum rpc_kind {
	RPC_INVALID,
	RPC_REQUEST,       /* method + id */
	RPC_NOTIFICATION,  /* method, no id */
	RPC_RESPONSE,      /* result or error + id */
};

struct rpc_info {
	enum rpc_kind kind;
	const char *method;  /* borrowed from the message; NULL for responses */
	json_t *id;          /* borrowed; NULL for notifications */
	/* when kind == RPC_INVALID: */
	int code;
	const char *reason;
};

/*
 * Parses one line. Returns a new reference, or NULL with *ERR set to a
 * ready-to-send -32700 error response (new reference).
 */
json_t *rpc_parse(const char *line, size_t len, json_t **err);

/*
 * Classifies MSG (borrowed) and checks its shape: an object with
 * "jsonrpc":"2.0", a string method, an id that is a string or a number,
 * params that are an object or array, exactly one of result and error.
 * Returns the kind; RPC_INVALID fills code/reason and, when it could be
 * read, the id so that the error can be addressed.
 */
enum rpc_kind rpc_classify(json_t *msg, struct rpc_info *info);

/* New error response; borrows ID (NULL -> null), steals DATA (may be NULL). */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data);

/* Like rpc_error with a printf-formatted message. */
json_t *rpc_errorf(json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* New success response; borrows ID, steals RESULT. */
json_t *rpc_result(json_t *id, json_t *result);

/* New request with an integer id; steals PARAMS (may be NULL). */
json_t *rpc_request(json_int_t id, const char *method, json_t *params);

/* New notification; steals PARAMS (may be NULL). */
json_t *rpc_notification(const char *method, json_t *params);

/*
 * Writes a byte key for an id (string or number) into KEY (at least
 * RPC_KEY_MAX bytes); returns its length, or 0 for an id that cannot be
 * keyed (then the caller treats the id as unknown).
 *
 * THE ID KEY RULE (every path that keys an id must give the same bytes;
 * two ids have equal keys exactly when they name the same request):
 *  - a number whose value is an integer in int64_t range, written as an
 *    integer (7, -0) or as a real (7.0, 7e0, -0.0): 'n' then the int64_t
 *    in host byte order (9 bytes). rpc_id_key_int() writes it; the
 *    scanner's jscan.id_int (an integer id of at most 18 digits) keys
 *    with it too;
 *  - any other number (7.5, 1e19, 10000000000000000000.5, which is
 *    1e19 as a double): 'r' then the IEEE-754 double in host byte order
 *    (9 bytes). Two texts that round to the same double name the same
 *    request (jansson keeps only the double). Out-of-range values are
 *    never converted to an integer (no undefined behaviour); 1e400 is
 *    not an id at all (jansson refuses the message);
 *  - a string: 's' then its bytes as decoded (escapes resolved, NULs
 *    kept), at most RPC_KEY_MAX - 1 of them, else no key (0).
 *    rpc_id_key_string() writes it.
 * A number and a string never share a key ("1" is not 1). An id known
 * only as its JSON text keys with rpc_id_key_text().
 */
#define RPC_KEY_MAX 512
size_t rpc_id_key(json_t *id, unsigned char *key);

/* The key of the integer id V (9 bytes), by the rule above. */
size_t rpc_id_key_int(json_int_t v, unsigned char *key);

/* The key of a string id of N decoded bytes at S, or 0 when too long. */
size_t rpc_id_key_string(const char *s, size_t n, unsigned char *key);

/*
 * The key of the id whose JSON text is the N bytes at P (a span
 * jscan_message recorded, say), by the same rule: plain ASCII strings and
 * short integers without parsing, anything else through jansson; any
 * bytes give rpc_id_key's key of what jansson reads there. 0 when P is
 * not a string or a number (or too long a string).
 */
size_t rpc_id_key_text(const char *p, size_t n, unsigned char *key);

/*
 * Best-effort scan of the head of an oversized message for its top-level
 * "id". Returns a new reference, or NULL when not found.
 */
json_t *rpc_scan_id(const char *head, size_t len);

/* True when the head of a message has a top-level "method" member. */
bool rpc_scan_has_method(const char *head, size_t len);

/* Returns params._meta.progressToken (borrowed) or NULL. */
json_t *rpc_progress_token(json_t *msg);

#endif
