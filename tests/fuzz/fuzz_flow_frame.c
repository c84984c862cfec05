/*
 * fuzz_flow_frame.c - libFuzzer target for src/core/flow_wire.c (and
 * cbor_json.c behind it). Byte 0 sets the reader's bound, byte 1 seeds the
 * sizes of the chunks the rest is fed in. The frames that come out must be
 * a model's (4-byte big-endian length, that many bytes), TOO_BIG exactly
 * when the model's next length exceeds the bound (the stream ends there),
 * and what is pending at the end the model's leftover. Each body is
 * classified with flow_body_encoding and, when CBOR, decoded. The whole
 * input is also read as a datagram and an execution stream header.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cbor_json.h"
#include "flow_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "fuzz_flow_frame: line %d: %s\n", __LINE__, #cond); abort(); } } while (0)

/* The big-endian 4 bytes at P. */
static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Datagram and execution headers of the raw input, checked both ways. */
static void headers(const uint8_t *data, size_t size)
{
	uint8_t ch;
	uint32_t id, tag;
	const uint8_t *pl;
	size_t plen;
	if (flow_dgram_parse(data, size, &ch, &id, &pl, &plen)) {
		uint8_t h[FLOW_DGRAM_HDR];
		flow_dgram_hdr_put(h, ch, id);
		CHECK(memcmp(h, data, FLOW_DGRAM_HDR) == 0);
		CHECK(pl == data + FLOW_DGRAM_HDR && plen == size - FLOW_DGRAM_HDR);
	}
	if (size >= FLOW_EXEC_HDR) {
		uint8_t h[FLOW_EXEC_HDR];
		flow_exec_hdr_get(data, &id, &tag);
		flow_exec_hdr_put(h, id, tag);
		CHECK(memcmp(h, data, FLOW_EXEC_HDR) == 0);
	}
}

/* Takes the frames there are, checking each against the model at *M;
 * false once the stream is over (TOO_BIG). */
static bool drain(struct flow_reader *r, const uint8_t **m, const uint8_t *fed, size_t max)
{
	const uint8_t *p;
	size_t n;
	enum flow_read k;
	while ((k = flow_reader_next(r, &p, &n)) != FLOW_READ_MORE) {
		CHECK(fed - *m >= FLOW_FRAME_HDR);
		uint32_t len = be32(*m);
		if (k == FLOW_READ_TOO_BIG) {
			CHECK(len > max && n == len);
			return false;
		}
		CHECK(len <= max && n == len && (size_t)(fed - *m) >= FLOW_FRAME_HDR + (size_t)len);
		CHECK(memcmp(p, *m + FLOW_FRAME_HDR, n) == 0);
		*m += FLOW_FRAME_HDR + (size_t)len;
		int enc = flow_body_encoding(p, n);
		CHECK(enc == -1 || enc == FLOW_ENC_JSON || enc == FLOW_ENC_CBOR);
		if (enc == FLOW_ENC_CBOR) {
			char why[128];
			json_t *v = cbor_to_json(p, n, why, sizeof why);
			CHECK(!v || json_is_object(v) || json_is_array(v));
			json_decref(v);
		}
	}
	/* no whole frame is left behind */
	size_t held = (size_t)(fed - *m);
	CHECK(flow_reader_pending(r) == held);
	if (held >= FLOW_FRAME_HDR) {
		uint32_t len = be32(*m);
		CHECK(len <= max && held < FLOW_FRAME_HDR + (size_t)len);
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	headers(data, size);
	if (size < 2)
		return 0;
	size_t max = data[0] < 0xF0 ? data[0] : (size_t)(data[0] - 0xEF) * 4096;
	unsigned seed = data[1];
	data += 2;
	size -= 2;
	struct flow_reader r;
	flow_reader_init(&r, max);
	const uint8_t *m = data;
	for (size_t off = 0; off < size;) {
		seed = seed * 1103515245u + 12345u;
		size_t n = 1 + (seed >> 16) % 61;
		if (n > size - off)
			n = size - off;
		CHECK(flow_reader_feed(&r, data + off, n) == 0);
		off += n;
		if (!drain(&r, &m, data + off, max))
			break;
	}
	flow_reader_release(&r);
	return 0;
}
