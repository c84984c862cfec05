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
 */
#define RPC_KEY_MAX 512
size_t rpc_id_key(json_t *id, unsigned char *key);

/* The same key for an integer id, and for a string id of N decoded bytes:
 * the one encoding every id map uses (msg.c keys ids it has not parsed
 * with these). */
size_t rpc_id_key_int(json_int_t v, unsigned char *key);
size_t rpc_id_key_str(const char *s, size_t n, unsigned char *key);

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
