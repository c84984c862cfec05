/*
 * era.c - protocol eras: revision lists, _meta access, the unsupported
 * version error.
 */
#include "era.h"

#include <stdio.h>
#include <string.h>

#include "rpc.h"

const char *const era_handshake_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL
};

const char *const era_stateless_versions[] = {
	ERA_STATELESS_VERSION, NULL
};

static bool listed(const char *const *list, const char *v)
{
	if (!v)
		return false;
	for (; *list; list++)
		if (strcmp(*list, v) == 0)
			return true;
	return false;
}

bool era_handshake_supported(const char *version)
{
	return listed(era_handshake_versions, version);
}

bool era_stateless_supported(const char *version)
{
	return listed(era_stateless_versions, version);
}

enum era era_of_version(const char *version)
{
	if (era_stateless_supported(version))
		return ERA_STATELESS;
	if (era_handshake_supported(version))
		return ERA_HANDSHAKE;
	return ERA_UNKNOWN;
}

const char *era_handshake_version(const char *version)
{
	for (const char *const *v = era_handshake_versions; version && *v; v++)
		if (strcmp(*v, version) == 0)
			return *v;
	return NULL;
}

json_t *era_result_for(json_t *result, const char *asked)
{
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	/* revisions are dates, YYYY-MM-DD: their order is the strings' */
	if (!era_handshake_supported(asked) || !era_handshake_supported(v) || strcmp(asked, v) >= 0)
		return json_incref(result);
	json_t *r = json_copy(result);   /* shallow: only the revision differs */
	if (!r || json_object_set_new(r, "protocolVersion", json_string(asked)) < 0) {
		json_decref(r);
		return json_incref(result);
	}
	return r;
}

json_t *era_meta(json_t *params, const char *key)
{
	json_t *meta = json_is_object(params) ? json_object_get(params, "_meta") : NULL;
	return json_is_object(meta) ? json_object_get(meta, key) : NULL;
}

const char *era_request_version(json_t *params)
{
	return json_string_value(era_meta(params, ERA_META_VERSION));
}

json_t *era_all_versions(void)
{
	json_t *a = json_array();
	for (const char *const *v = era_stateless_versions; *v; v++)
		json_array_append_new(a, json_string(*v));
	for (const char *const *v = era_handshake_versions; *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

json_t *era_unsupported_error(json_t *id, const char *requested)
{
	json_t *data = json_pack("{s:o}", "supported", era_all_versions());
	json_object_set_new(data, "requested", requested ? json_string(requested) : json_null());
	char msg[160];
	snprintf(msg, sizeof msg, "Unsupported protocol version: %.64s (supported: %s, %s to %s)",
		 requested ? requested : "(none)", ERA_STATELESS_VERSION, "2024-11-05", "2025-11-25");
	return rpc_error(id, RPC_UNSUPPORTED_VERSION, msg, data);
}

const char *era_check_envelope(json_t *params, int *code)
{
	json_t *v = era_meta(params, ERA_META_VERSION);
	*code = RPC_INVALID_PARAMS;
	if (!v)
		return "the request has no _meta \"" ERA_META_VERSION "\": every request of "
		       "protocol " ERA_STATELESS_VERSION " states it";
	if (!json_is_string(v))
		return "_meta \"" ERA_META_VERSION "\" must be a string";
	if (!era_stateless_supported(json_string_value(v))) {
		*code = RPC_UNSUPPORTED_VERSION;
		return "unsupported protocol version";
	}
	if (!json_is_object(era_meta(params, ERA_META_CLIENT_CAPS)))
		return "the request has no _meta \"" ERA_META_CLIENT_CAPS "\" object: every request "
		       "of protocol " ERA_STATELESS_VERSION " states it";
	return NULL;
}

bool era_stateless_removed(const char *method)
{
	static const char *const removed[] = { "initialize", "ping", "logging/setLevel",
		"resources/subscribe", "resources/unsubscribe", NULL };
	for (size_t i = 0; method && removed[i]; i++)
		if (strcmp(method, removed[i]) == 0)
			return true;
	return false;
}

bool era_strip_own_meta(json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	json_t *meta = json_object_get(params, "_meta");
	if (!json_is_object(meta))
		return false;
	bool had = json_object_del(meta, ERA_META_INPUT_KEY) == 0;
	had = (json_object_del(meta, ERA_META_RELATED) == 0) || had;
	if (had && json_object_size(meta) == 0)
		json_object_del(params, "_meta");
	return had;
}
