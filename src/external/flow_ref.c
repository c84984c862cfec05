/*
 * flow_ref.c - the MCP content that an MCP-Flow ref/stream item stands
 * for (flow_ref.h).
 */
#include "flow_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

json_t *flow_ref_items(json_t *msg, bool *contents)
{
	json_t *result = json_object_get(msg, "result");
	json_t *items = json_object_get(result, "content");
	*contents = false;
	if (json_is_array(items))
		return items;
	items = json_object_get(result, "contents");
	*contents = true;
	return json_is_array(items) ? items : NULL;
}

bool flow_ref_tag(json_t *item, uint32_t *tag)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	json_t *t = json_object_get(item, "streamTag");
	if (!type || strcmp(type, "ref/stream") || !json_is_integer(t) ||
	    json_integer_value(t) < 0 || json_integer_value(t) > (json_int_t)UINT32_MAX)
		return false;
	*tag = (uint32_t)json_integer_value(t);
	return true;
}

/* Standard base64 of DATA (N bytes), a new JSON string; NULL out of memory. */
static json_t *base64(const uint8_t *data, size_t n)
{
	if (n > (size_t)INT32_MAX / 4 * 3 - 3)
		return NULL;
	char *p = malloc((n + 2) / 3 * 4 + 1);
	if (!p)
		return NULL;
	int len = EVP_EncodeBlock((unsigned char *)p, data, (int)n);
	json_t *s = len >= 0 ? json_stringn_nocheck(p, (size_t)len) : NULL;
	free(p);
	return s;
}

json_t *flow_ref_content(json_t *ref, const uint8_t *data, size_t n, bool contents)
{
	const char *mime = json_string_value(json_object_get(ref, "mimeType"));
	json_t *uri = json_object_get(ref, "uri");
	uint32_t tag = 0;
	char fallback[48];
	if (!mime)
		mime = "application/octet-stream";
	flow_ref_tag(ref, &tag);
	snprintf(fallback, sizeof fallback, "mcp-flow://stream/%u", tag);
	bool text = strncmp(mime, "text/", 5) == 0;
	json_t *body = text ? json_stringn((const char *)data, n) : base64(data, n);
	if (!body)
		return NULL;
	if (!contents && text)
		return json_pack("{s:s, s:o}", "type", "text", "text", body);
	if (!contents && (!strncmp(mime, "image/", 6) || !strncmp(mime, "audio/", 6)))
		return json_pack("{s:s, s:o, s:s}", "type", mime[0] == 'i' ? "image" : "audio",
				 "data", body, "mimeType", mime);
	json_t *res = json_pack("{s:s, s:s, s:o}", "uri",
				json_is_string(uri) ? json_string_value(uri) : fallback,
				"mimeType", mime, text ? "text" : "blob", body);
	if (!res || contents)
		return res;
	return json_pack("{s:s, s:o}", "type", "resource", "resource", res);
}
