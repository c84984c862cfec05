/*
 * cbor_json.h - CBOR (RFC 8949) to and from JSON values, for MCP-Flow's
 * negotiated encoding: what JSON-RPC carries crosses both ways without
 * loss.
 *
 * Mapping: null, true, false, integers (JSON integers are CBOR major types
 * 0 and 1, and back), reals (float64, or the shortest float that holds the
 * value exactly), text strings, arrays, maps with text keys. From CBOR
 * only: a byte string becomes its standard base64 text (an MCP blob's
 * form), indefinite-length strings, arrays and maps are accepted, tags are
 * refused (24, embedded CBOR, too: one item only).
 * Refused, with a clear WHY: integers beyond int64 (and tags 2 and 3),
 * NaN and infinities, undefined and other simple values, map keys that are
 * not text, duplicate keys, invalid UTF-8, nesting deeper than
 * CBOR_JSON_MAX_DEPTH, anything after the one item.
 */
#ifndef MCPC_CBOR_JSON_H
#define MCPC_CBOR_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

#define CBOR_JSON_MAX_DEPTH 256

/* Appends V (borrowed) encoded as one CBOR item to OUT. 0, or -1 with WHY
 * (N bytes): a real that is not finite, nesting too deep, out of memory. */
int cbor_from_json(const json_t *v, struct buf *out, char *why, size_t n);

/* The JSON value (new reference, the caller's) of the one CBOR item that
 * is exactly DATA (LEN bytes, borrowed); NULL with WHY (N bytes). */
json_t *cbor_to_json(const uint8_t *data, size_t len, char *why, size_t n);

#endif
