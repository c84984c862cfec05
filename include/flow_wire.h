/*
 * flow_wire.h - MCP-Flow's own framing, as its implementation guide
 * (version 0.1) writes it; every multi-byte integer big-endian.
 *
 * - Control stream: frames of a 4-byte length and that many bytes of one
 *   JSON-RPC message, in JSON or (negotiated) CBOR.
 * - Execution stream (unidirectional, opened by the server): an 8-byte
 *   header, the request id (4 bytes) and the stream tag (4 bytes), then
 *   the payload to the stream's end.
 * - Datagram: a 6-byte header, channel (1), flags (1, zero), request id
 *   (4), then the payload.
 *
 * Pure functions: no I/O, no allocation except the reader's buffer.
 */
#ifndef MCPC_FLOW_WIRE_H
#define MCPC_FLOW_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define FLOW_FRAME_HDR 4
#define FLOW_EXEC_HDR 8
#define FLOW_DGRAM_HDR 6

enum flow_channel {
	FLOW_CH_RESERVED = 0,
	FLOW_CH_PROGRESS = 1,
	FLOW_CH_AUDIO = 2,
	FLOW_CH_LOG = 3,
};

/* MCP-Flow's error codes. */
enum {
	FLOW_ERR_STREAM_LIMIT = -32000,  /* also "Cancelled" */
	FLOW_ERR_BAD_STREAM_REF = -32001,
	FLOW_ERR_STREAM_INJECTION = -32002,
	FLOW_ERR_ENCODING = -32003,
	FLOW_ERR_NO_DATAGRAMS = -32004,
};

enum flow_encoding { FLOW_ENC_JSON, FLOW_ENC_CBOR };

/*
 * The control stream's reader: bytes in as they come, whole frames out.
 * A frame whose length exceeds MAX is an error (the stream cannot be
 * resynchronized after it: the caller ends the session).
 */
struct flow_reader {
	struct buf in;
	size_t max;
};

void flow_reader_init(struct flow_reader *r, size_t max);
void flow_reader_release(struct flow_reader *r);

/* Copies LEN bytes of DATA (borrowed) in. 0, or -1 out of memory. */
int flow_reader_feed(struct flow_reader *r, const uint8_t *data, size_t len);

enum flow_read {
	FLOW_READ_FRAME,    /* *P, *N: the next frame's body (borrowed until the next call) */
	FLOW_READ_MORE,     /* no whole frame yet */
	FLOW_READ_TOO_BIG,  /* *N: the length the frame declared (> max) */
};
enum flow_read flow_reader_next(struct flow_reader *r, const uint8_t **p, size_t *n);

/* Bytes held that are not a whole frame yet (at the stream's end: a
 * truncated frame when not 0). */
size_t flow_reader_pending(const struct flow_reader *r);

/* Writes the 4-byte length of a body of LEN bytes (LEN <= UINT32_MAX). */
void flow_frame_hdr(uint8_t hdr[FLOW_FRAME_HDR], uint32_t len);

void flow_exec_hdr_put(uint8_t hdr[FLOW_EXEC_HDR], uint32_t request_id, uint32_t tag);
void flow_exec_hdr_get(const uint8_t hdr[FLOW_EXEC_HDR], uint32_t *request_id, uint32_t *tag);

void flow_dgram_hdr_put(uint8_t hdr[FLOW_DGRAM_HDR], uint8_t channel, uint32_t request_id);
/* Reads a datagram's header: false when LEN < 6, the flags are not 0 or
 * the channel is unknown. *PAYLOAD, *PLEN: what follows it. */
bool flow_dgram_parse(const uint8_t *p, size_t len, uint8_t *channel, uint32_t *request_id,
		      const uint8_t **payload, size_t *plen);

/*
 * Which encoding a frame's body is in, by its first byte: JSON text
 * begins with '{' or '[' (after white space), a CBOR message with a map
 * or array head (major types 5 and 4). -1 when neither.
 */
int flow_body_encoding(const uint8_t *p, size_t len);

#endif
