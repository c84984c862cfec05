/*
 * h3.h - the HTTP/3 (RFC 9114) and WebTransport over HTTP/3
 * (draft-ietf-webtrans-http3-02, what Chromium speaks) framing that
 * MCP-Flow needs, on both sides: variable-length integers, frames,
 * SETTINGS, the stream preambles, capsules (RFC 9297), datagram
 * prefixes, and the request and response headers through QPACK (RFC
 * 9204: nghttp3's encoder and decoder with a dynamic table of 0, so that
 * no QPACK stream ever carries anything).
 *
 * Pure functions over bytes: no I/O. Parsers never read past LEN and say
 * "need more" apart from "malformed".
 */
#ifndef MCPC_H3_H
#define MCPC_H3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct buf;

/* QUIC variable-length integers (RFC 9000, section 16): values < 2^62
 * (h3_varint_len and h3_varint_put give 0 above H3_VARINT_MAX). */
#define H3_VARINT_MAX ((UINT64_C(1) << 62) - 1)
size_t h3_varint_len(uint64_t v);
/* Writes V at P (room for h3_varint_len(V) bytes); returns that length. */
size_t h3_varint_put(uint8_t *p, uint64_t v);
/* Reads one at P (LEN bytes): its length, or 0 when LEN is too short. */
size_t h3_varint_get(const uint8_t *p, size_t len, uint64_t *v);
/* Appends V to OUT: 0 or -1 (out of memory, or V above H3_VARINT_MAX). */
int h3_varint_append(struct buf *out, uint64_t v);

/* Frame types (RFC 9114 section 7.2; WebTransport's bidi signal). */
enum {
	H3_FRAME_DATA = 0x00,
	H3_FRAME_HEADERS = 0x01,
	H3_FRAME_CANCEL_PUSH = 0x03,
	H3_FRAME_SETTINGS = 0x04,
	H3_FRAME_PUSH_PROMISE = 0x05,
	H3_FRAME_GOAWAY = 0x07,
	H3_FRAME_MAX_PUSH_ID = 0x0d,
	H3_WT_BIDI_SIGNAL = 0x41,  /* begins a client's WebTransport bidi stream */
};

/* Unidirectional stream types. */
enum {
	H3_UNI_CONTROL = 0x00,
	H3_UNI_PUSH = 0x01,
	H3_UNI_QPACK_ENCODER = 0x02,
	H3_UNI_QPACK_DECODER = 0x03,
	H3_UNI_WEBTRANSPORT = 0x54,
};

/* Error codes (RFC 9114 section 8.1) and WebTransport's. */
enum {
	H3_NO_ERROR = 0x100,
	H3_GENERAL_PROTOCOL_ERROR = 0x101,
	H3_INTERNAL_ERROR = 0x102,
	H3_STREAM_CREATION_ERROR = 0x103,
	H3_CLOSED_CRITICAL_STREAM = 0x104,
	H3_FRAME_UNEXPECTED = 0x105,
	H3_FRAME_ERROR = 0x106,
	H3_EXCESSIVE_LOAD = 0x107,
	H3_ID_ERROR = 0x108,
	H3_SETTINGS_ERROR = 0x109,
	H3_MISSING_SETTINGS = 0x10a,
	H3_REQUEST_REJECTED = 0x10b,
	H3_REQUEST_CANCELLED = 0x10c,
	H3_REQUEST_INCOMPLETE = 0x10d,
	H3_MESSAGE_ERROR = 0x10e,
	H3_CONNECT_ERROR = 0x10f,
	H3_VERSION_FALLBACK = 0x110,
	H3_DATAGRAM_ERROR = 0x33,
};
/* WebTransport's stream reset code space: application code E maps to
 * 0x52e4a40fa8db + E + E / 0x1e (skipping the reserved codepoints). */
#define H3_WT_SESSION_GONE UINT64_C(0x170d7b68)
uint64_t h3_wt_error_to_h3(uint32_t e);
/* false when C is not in WebTransport's range (or is a reserved one). */
bool h3_wt_error_from_h3(uint64_t c, uint32_t *e);

/*
 * One whole frame at the start of P (LEN bytes). Returns the bytes it
 * takes (type, length and payload) with *TYPE, *PAYLOAD, *PLEN set; 0 when
 * more bytes are needed; -1 when its payload length exceeds MAX (the
 * caller closes with H3_EXCESSIVE_LOAD or H3_FRAME_ERROR).
 * Streaming DATA: h3_frame_head reads a frame's type and length alone
 * (bytes taken, 0 need more), so that a large DATA frame's payload can be
 * consumed as it arrives.
 */
ssize_t h3_frame_parse(const uint8_t *p, size_t len, size_t max, uint64_t *type,
		       const uint8_t **payload, size_t *plen);
size_t h3_frame_head(const uint8_t *p, size_t len, uint64_t *type, uint64_t *plen);
/* Appends a frame head (TYPE, PLEN) to OUT: 0 or -1. */
int h3_frame_head_append(struct buf *out, uint64_t type, uint64_t plen);

/* Setting identifiers. */
enum {
	H3_SETTING_QPACK_MAX_TABLE_CAPACITY = 0x01,
	H3_SETTING_MAX_FIELD_SECTION_SIZE = 0x06,
	H3_SETTING_QPACK_BLOCKED_STREAMS = 0x07,
	H3_SETTING_ENABLE_CONNECT_PROTOCOL = 0x08,
	H3_SETTING_H3_DATAGRAM = 0x33,
	H3_SETTING_H3_DATAGRAM_DRAFT04 = 0xffd277,
	H3_SETTING_ENABLE_WEBTRANSPORT = 0x2b603742,   /* draft-02 */
	H3_SETTING_WEBTRANSPORT_MAX_SESSIONS = 0xc671706a,
};

struct h3_settings {
	uint64_t qpack_max_table_capacity;
	uint64_t max_field_section_size;  /* 0: unlimited */
	uint64_t qpack_blocked_streams;
	bool enable_connect_protocol;
	bool h3_datagram;                 /* 0x33 or the draft-04 0xffd277 */
	bool enable_webtransport;         /* 0x2b603742 = 1 */
	uint64_t webtransport_max_sessions;
};

/*
 * A SETTINGS frame's payload (P, LEN) into S (zeroed first). Unknown and
 * GREASE identifiers are ignored. -1 when malformed: a truncated pair, a
 * duplicate identifier, an HTTP/2 setting (0x02 to 0x05), a boolean not 0
 * or 1.
 */
int h3_settings_parse(const uint8_t *p, size_t len, struct h3_settings *s);

/*
 * Appends what a WebTransport endpoint opens its control stream with:
 * the stream type (0x00) and a SETTINGS frame with QPACK table capacity
 * 0, ENABLE_CONNECT_PROTOCOL (server only), H3_DATAGRAM, ENABLE_WEBTRANSPORT
 * and WEBTRANSPORT_MAX_SESSIONS = MAX_SESSIONS. 0 or -1.
 */
int h3_control_preamble(struct buf *out, bool server, uint64_t max_sessions);

/*
 * A stream's first bytes. Bidirectional, client-opened: either a request
 * (the first frame's type, usually HEADERS) or a WebTransport stream: the
 * signal 0x41 then the session id. Unidirectional: the stream type, and
 * for 0x54 the session id.
 * Returns the preamble's length (for a request stream: 0, nothing is
 * taken) with *KIND and *SESSION set; 0 with *KIND H3_PRE_MORE when more
 * bytes are needed.
 */
enum h3_preamble_kind {
	H3_PRE_MORE,
	H3_PRE_REQUEST,    /* bidi: an HTTP/3 request, frames follow */
	H3_PRE_WT_BIDI,    /* bidi: WebTransport, *SESSION set */
	H3_PRE_CONTROL,
	H3_PRE_QPACK_ENCODER,
	H3_PRE_QPACK_DECODER,
	H3_PRE_PUSH,
	H3_PRE_WT_UNI,     /* uni: WebTransport, *SESSION set */
	H3_PRE_UNKNOWN,    /* uni of another type: to be ignored (STOP_SENDING
			    * H3_STREAM_CREATION_ERROR) */
};
size_t h3_preamble_parse(const uint8_t *p, size_t len, bool bidi, enum h3_preamble_kind *kind,
			 uint64_t *session);
/* Appends a WebTransport stream's preamble (0x41 or 0x54, SESSION). */
int h3_wt_preamble(struct buf *out, bool bidi, uint64_t session);

/* Capsules (RFC 9297) carried in DATA frames on the CONNECT stream. */
enum {
	H3_CAPSULE_DATAGRAM = 0x00,
	H3_CAPSULE_CLOSE_WEBTRANSPORT_SESSION = 0x2843,
	H3_CAPSULE_DRAIN_WEBTRANSPORT_SESSION = 0x78ae,
};
/* Like h3_frame_parse, for one capsule (type, length, value). */
ssize_t h3_capsule_parse(const uint8_t *p, size_t len, size_t max, uint64_t *type,
			 const uint8_t **value, size_t *vlen);
/* CLOSE_WEBTRANSPORT_SESSION's value: a 32-bit code and a UTF-8 reason
 * (at most 1024 bytes). -1 when malformed. *REASON borrowed from P. */
int h3_close_parse(const uint8_t *p, size_t len, uint32_t *code, const char **reason,
		   size_t *rlen);
/* Appends a DATA frame carrying a CLOSE_WEBTRANSPORT_SESSION capsule
 * (REASON cut at 1024 bytes). 0 or -1. */
int h3_close_append(struct buf *out, uint32_t code, const char *reason);

/* HTTP/3 datagram payload (RFC 9297): the quarter stream id of the
 * request stream, then the payload. 0 when malformed. */
size_t h3_datagram_parse(const uint8_t *p, size_t len, uint64_t *quarter_id);

/*
 * The request headers of an extended CONNECT (or any request), decoded
 * from a HEADERS frame's payload (a QPACK field section with no dynamic
 * table reference). Values are copied (cut at their field's size: a value
 * cut short sets TRUNCATED). -1 with WHY when the field section is
 * malformed (RFC 9114 4.2 too: an uppercase name, a NUL, CR or LF in a
 * value) or refers to a dynamic table.
 */
struct h3_request {
	char method[16];
	char protocol[32];
	char scheme[16];
	char authority[256];
	char path[1024];
	char origin[512];
	bool has_origin;
	bool wt_draft02;  /* sec-webtransport-http3-draft02: 1 */
	bool truncated;
	bool bad_pseudo;  /* an unknown pseudo-header, one repeated, or one after a regular header */
};
int h3_request_decode(const uint8_t *p, size_t len, struct h3_request *r, char *why, size_t n);

/*
 * Appends a whole HEADERS frame (head and QPACK field section) that
 * answers with STATUS: ":status", and for 200 to a WebTransport CONNECT
 * "sec-webtransport-http3-draft: draft02". 0 or -1.
 */
int h3_response_append(struct buf *out, int status, bool webtransport);

/*
 * The client side: appends a HEADERS frame of an extended CONNECT to
 * AUTHORITY and PATH (":protocol webtransport", ":scheme https",
 * "sec-webtransport-http3-draft02: 1", ORIGIN when not NULL). 0 or -1.
 */
int h3_connect_append(struct buf *out, const char *authority, const char *path,
		      const char *origin);

/* A response's :status from a HEADERS frame's payload; -1 when malformed
 * or absent. */
int h3_response_status(const uint8_t *p, size_t len);

#endif
