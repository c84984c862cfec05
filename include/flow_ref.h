/*
 * flow_ref.h - an MCP-Flow client's side of execution streams: the
 * ref/stream items of an answer ({"type": "ref/stream", "streamTag": T,
 * "mimeType": M, "uri"?}) and the MCP content each stands for once its
 * stream's bytes are in. Pure functions over jansson values.
 */
#ifndef MCPC_FLOW_REF_H
#define MCPC_FLOW_REF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The array of content items of answer MSG (borrowed): result.content, or
 * result.contents (resources/read, *CONTENTS true); NULL when none. */
json_t *flow_ref_items(json_t *msg, bool *contents);

/* True with *TAG when ITEM (borrowed) is a ref/stream item. */
bool flow_ref_tag(json_t *item, uint32_t *tag);

/*
 * The content (new reference) that ref item REF (borrowed) stands for,
 * with its stream's DATA (N bytes, borrowed): a text/... type a text item, image/...
 * and audio/... an image or audio item, else an embedded resource with a
 * base64 blob (uri: the ref's, or mcp-flow://stream/T). For resources/read
 * (CONTENTS) a resource contents item {uri, mimeType, text or blob}.
 * NULL out of memory, or for a text stream that is not UTF-8.
 */
json_t *flow_ref_content(json_t *ref, const uint8_t *data, size_t n, bool contents);

#endif
