/*
 * flow_wire.c - MCP-Flow's framing (flow_wire.h): the control stream's
 * length-prefixed frames, the execution stream's and the datagram's
 * headers, and telling a body's encoding by its first byte.
 */
#include "flow_wire.h"

/* Writes V big-endian in 4 bytes at P. */
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* The big-endian 4 bytes at P. */
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An empty reader refusing frames longer than MAX. */
void flow_reader_init(struct flow_reader *r, size_t max)
{
	r->in = (struct buf)BUF_INIT;
	r->max = max;
}

/* Frees the reader's buffer. */
void flow_reader_release(struct flow_reader *r)
{
	buf_release(&r->in);
}

/* Copies bytes in. */
int flow_reader_feed(struct flow_reader *r, const uint8_t *data, size_t len)
{
	return buf_append(&r->in, data, len);
}

/* The next whole frame, consumed; its body stays in the buffer (its memory
 * is only reused by the next feed). */
enum flow_read flow_reader_next(struct flow_reader *r, const uint8_t **p, size_t *n)
{
	size_t have = buf_pending(&r->in);
	if (have < FLOW_FRAME_HDR)
		return FLOW_READ_MORE;
	const uint8_t *at = (const uint8_t *)r->in.data + r->in.off;
	uint32_t len = get32(at);
	if (len > r->max) {
		*n = len;
		return FLOW_READ_TOO_BIG;
	}
	if (have - FLOW_FRAME_HDR < len)
		return FLOW_READ_MORE;
	*p = at + FLOW_FRAME_HDR;
	*n = len;
	buf_consume(&r->in, FLOW_FRAME_HDR + (size_t)len);
	return FLOW_READ_FRAME;
}

/* Bytes held that are not a whole frame yet. */
size_t flow_reader_pending(const struct flow_reader *r)
{
	return buf_pending(&r->in);
}

/* A frame's 4-byte length. */
void flow_frame_hdr(uint8_t hdr[FLOW_FRAME_HDR], uint32_t len)
{
	put32(hdr, len);
}

/* An execution stream's header: request id, stream tag. */
void flow_exec_hdr_put(uint8_t hdr[FLOW_EXEC_HDR], uint32_t request_id, uint32_t tag)
{
	put32(hdr, request_id);
	put32(hdr + 4, tag);
}

/* Reads an execution stream's header. */
void flow_exec_hdr_get(const uint8_t hdr[FLOW_EXEC_HDR], uint32_t *request_id, uint32_t *tag)
{
	*request_id = get32(hdr);
	*tag = get32(hdr + 4);
}

/* A datagram's header: channel, zero flags, request id. */
void flow_dgram_hdr_put(uint8_t hdr[FLOW_DGRAM_HDR], uint8_t channel, uint32_t request_id)
{
	hdr[0] = channel;
	hdr[1] = 0;
	put32(hdr + 2, request_id);
}

/* Reads a datagram's header; the reserved channel 0 is not a known one. */
bool flow_dgram_parse(const uint8_t *p, size_t len, uint8_t *channel, uint32_t *request_id,
		      const uint8_t **payload, size_t *plen)
{
	if (len < FLOW_DGRAM_HDR || p[1] != 0)
		return false;
	if (p[0] != FLOW_CH_PROGRESS && p[0] != FLOW_CH_AUDIO && p[0] != FLOW_CH_LOG)
		return false;
	*channel = p[0];
	*request_id = get32(p + 2);
	*payload = p + FLOW_DGRAM_HDR;
	*plen = len - FLOW_DGRAM_HDR;
	return true;
}

/* JSON by its first non-blank byte, CBOR by a map or array head. The two
 * cannot be confused: '{' (0x7B) and '[' (0x5B) are CBOR string heads and
 * JSON's white space bytes CBOR unsigned integers. */
int flow_body_encoding(const uint8_t *p, size_t len)
{
	if (len == 0)
		return -1;
	uint8_t major = p[0] >> 5;
	if (major == 4 || major == 5)
		return FLOW_ENC_CBOR;
	for (size_t i = 0; i < len; i++) {
		switch (p[i]) {
		case ' ':
		case '\t':
		case '\r':
		case '\n':
			continue;
		case '{':
		case '[':
			return FLOW_ENC_JSON;
		default:
			return -1;
		}
	}
	return -1;
}
