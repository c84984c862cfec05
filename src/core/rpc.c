/*
 * rpc.c - JSON-RPC 2.0 parsing, validation and construction.
 */
#include "rpc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Parses a line, producing a -32700 response on failure. */
json_t *rpc_parse(const char *line, size_t len, json_t **err)
{
	json_error_t e;
	json_t *msg = json_loadb(line, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
	if (msg)
		return msg;
	json_t *data = json_pack("{s:s,s:i}", "detail", e.text, "column", e.column);
	*err = rpc_error(NULL, RPC_PARSE_ERROR, "Parse error", data);
	return NULL;
}

/* Marks INFO invalid and returns RPC_INVALID. */
static enum rpc_kind invalid(struct rpc_info *info, const char *reason)
{
	info->kind = RPC_INVALID;
	info->code = RPC_INVALID_REQUEST;
	info->reason = reason;
	return RPC_INVALID;
}

/* True for the id types JSON-RPC allows here: string or number. */
static bool valid_id(json_t *id)
{
	return json_is_string(id) || json_is_integer(id) || json_is_real(id);
}

/* Classifies a response (no method). */
static enum rpc_kind classify_response(json_t *msg, json_t *id, struct rpc_info *info)
{
	json_t *result = json_object_get(msg, "result");
	json_t *error = json_object_get(msg, "error");
	if (!id)
		return invalid(info, "a response needs an \"id\"");
	if (!json_is_null(id) && !valid_id(id))
		return invalid(info, "\"id\" must be a string or a number");
	info->id = id;
	if (!result && !error)
		return invalid(info, "a message needs a \"method\" (request or notification) or a \"result\"/\"error\" (response)");
	if (result && error)
		return invalid(info, "a response has either \"result\" or \"error\", not both");
	if (error && (!json_is_object(error) || !json_is_integer(json_object_get(error, "code"))))
		return invalid(info, "\"error\" must be an object with an integer \"code\"");
	info->kind = RPC_RESPONSE;
	return RPC_RESPONSE;
}

/* Validates MSG and says what it is. */
enum rpc_kind rpc_classify(json_t *msg, struct rpc_info *info)
{
	memset(info, 0, sizeof *info);
	if (!json_is_object(msg))
		return invalid(info, "a message must be a JSON object");
	json_t *id = json_object_get(msg, "id");
	if (id && valid_id(id))
		info->id = id;
	json_t *v = json_object_get(msg, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return invalid(info, "\"jsonrpc\" must be \"2.0\"");
	json_t *method = json_object_get(msg, "method");
	if (!method)
		return classify_response(msg, id, info);
	if (!json_is_string(method))
		return invalid(info, "\"method\" must be a string");
	info->method = json_string_value(method);
	json_t *params = json_object_get(msg, "params");
	if (params && !json_is_object(params) && !json_is_array(params))
		return invalid(info, "\"params\" must be an object or an array");
	if (!id) {
		info->kind = RPC_NOTIFICATION;
		return RPC_NOTIFICATION;
	}
	if (!valid_id(id))
		return invalid(info, "\"id\" must be a string or a number");
	info->kind = RPC_REQUEST;
	return RPC_REQUEST;
}

/* Builds an error response. */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data)
{
	json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
	if (data)
		json_object_set_new(err, "data", data);
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0",
			 "id", id ? id : json_null(), "error", err);
}

/* Builds an error response with a formatted message. */
json_t *rpc_errorf(json_t *id, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return rpc_error(id, code, msg, NULL);
}

/* Builds a success response. */
json_t *rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "result", result ? result : json_object());
}

/* Builds a request. */
json_t *rpc_request(json_int_t id, const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s,s:I,s:s}", "jsonrpc", "2.0", "id", id,
			      "method", method);
	if (params)
		json_object_set_new(m, "params", params);
	return m;
}

/* Builds a notification. */
json_t *rpc_notification(const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", method);
	if (params)
		json_object_set_new(m, "params", params);
	return m;
}

/* The key of an integer id (also of a real whose value is that integer). */
size_t rpc_id_key_int(json_int_t v, unsigned char *key)
{
	int64_t x = (int64_t)v;
	key[0] = 'n';
	memcpy(key + 1, &x, sizeof x);
	return 1 + sizeof x;
}

/* The key of a string id: its N bytes (NULs included). */
size_t rpc_id_key_string(const char *s, size_t n, unsigned char *key)
{
	if (n + 1 > RPC_KEY_MAX)
		return 0;
	key[0] = 's';
	memcpy(key + 1, s, n);
	return n + 1;
}

/*
 * Whether the real D is an integer that int64_t holds, in *V. The range
 * is checked before converting: casting a double outside it is undefined
 * behaviour (10000000000000000000.5 used to be cast as it was).
 */
static bool real_as_int(double d, int64_t *v)
{
	/* -2^63 is a double; 2^63 is the first one above the range */
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return false;   /* also NaN, which JSON cannot spell */
	if (d != (double)(int64_t)d)
		return false;
	*v = (int64_t)d;
	return true;
}

/* Encodes an id as type tag + bytes (the rule is in rpc.h). */
size_t rpc_id_key(json_t *id, unsigned char *key)
{
	if (json_is_integer(id))
		return rpc_id_key_int(json_integer_value(id), key);
	if (json_is_real(id)) {
		double d = json_real_value(id);
		int64_t v;
		if (real_as_int(d, &v))   /* 7.0 and 7 name the same request */
			return rpc_id_key_int(v, key);
		key[0] = 'r';
		memcpy(key + 1, &d, sizeof d);
		return 1 + sizeof d;
	}
	if (json_is_string(id))
		return rpc_id_key_string(json_string_value(id), json_string_length(id), key);
	return 0;
}

/*
 * The key of an id given as its JSON text, without a jansson value in
 * the common cases: a string of printable ASCII without escapes, an
 * integer of at most 18 digits. Anything else is parsed as rpc_parse
 * would, so the key is always rpc_id_key's, whatever the bytes.
 */
size_t rpc_id_key_text(const char *p, size_t n, unsigned char *key)
{
	if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
		size_t i = 1;   /* printable ASCII but '"' and '\\' is its own text */
		while (i < n - 1 && p[i] >= 0x20 && p[i] < 0x7F && p[i] != '"' && p[i] != '\\')
			i++;
		if (i == n - 1)
			return rpc_id_key_string(p + 1, n - 2, key);
	}
	size_t neg = n && p[0] == '-', i = neg;
	while (i < n && p[i] >= '0' && p[i] <= '9')
		i++;
	if (i == n && n > neg && n - neg <= 18 && (p[neg] != '0' || n - neg == 1)) {
		int64_t v = 0;
		for (i = neg; i < n; i++)
			v = v * 10 + (p[i] - '0');
		return rpc_id_key_int(neg ? -v : v, key);
	}
	json_t *id = json_loadb(p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	size_t k = rpc_id_key(id, key);
	json_decref(id);
	return k;
}

/* Skips a JSON string starting at p[i] == '"'; returns index after it. */
static size_t skip_string(const char *p, size_t n, size_t i)
{
	for (i++; i < n; i++) {
		if (p[i] == '\\')
			i++;
		else if (p[i] == '"')
			return i + 1;
	}
	return n;
}

/* Tries to decode the JSON value starting at p[i] as an id. */
static json_t *decode_id_at(const char *p, size_t n, size_t i)
{
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	size_t end = i;
	if (i < n && p[i] == '"')
		end = skip_string(p, n, i);
	else
		while (end < n && (p[end] == '-' || p[end] == '+' || p[end] == '.' ||
				   p[end] == 'e' || p[end] == 'E' || (p[end] >= '0' && p[end] <= '9')))
			end++;
	if (end == i || end > n)
		return NULL;
	json_t *id = json_loadb(p + i, end - i, JSON_DECODE_ANY, NULL);
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		json_decref(id);
		return NULL;
	}
	return id;
}

/* Offset just after the ':' of top-level member KEY in the head, or 0. */
static size_t scan_member(const char *p, size_t n, const char *key)
{
	int depth = 0;
	bool want_key = false;
	size_t klen = strlen(key);
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '"') {
			size_t end = skip_string(p, n, i);
			if (depth == 1 && want_key && end - i == klen + 2 &&
			    memcmp(p + i + 1, key, klen) == 0) {
				size_t j = end;
				while (j < n && (p[j] == ' ' || p[j] == '\t'))
					j++;
				if (j < n && p[j] == ':')
					return j + 1;
			}
			want_key = false;
			i = end - 1;
		} else if (c == '{' || c == '[') {
			depth++;
			want_key = c == '{' && depth == 1;
		} else if (c == '}' || c == ']') {
			depth--;
		} else if (c == ',' && depth == 1) {
			want_key = true;
		}
	}
	return 0;
}

/* True when the head has a top-level "method" member. */
bool rpc_scan_has_method(const char *head, size_t len)
{
	return scan_member(head, len, "method") > 0;
}

/* Finds the top-level "id" in the head of a message. */
json_t *rpc_scan_id(const char *p, size_t n)
{
	size_t at = scan_member(p, n, "id");
	return at ? decode_id_at(p, n, at) : NULL;
}

/* Finds the progress token of a request. */
json_t *rpc_progress_token(json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	json_t *meta = json_object_get(params, "_meta");
	return json_object_get(meta, "progressToken");
}
