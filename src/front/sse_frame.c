/*
 * sse_frame.c - SSE events as the HTTP front writes them (see
 * sse_frame.h): a message's lines as data lines under an id "STREAM-SEQ",
 * a resumable stream's head, and event ids read back from Last-Event-ID.
 */
#include "sse_frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frames one SSE event: the lines ID (IDN bytes), DATA (N bytes) as data
 * lines, the blank line. */
size_t sse_frame_write(char *out, const char *id, size_t idn, const char *data, size_t n)
{
	size_t len = 0;
#define PUT(p, k) do { if (out) memcpy(out + len, (p), (k)); len += (k); } while (0)
	PUT(id, idn);
	size_t i = 0;
	bool broke;
	do {   /* one data line per line of DATA, the last one too when DATA ends a line */
		size_t j = i;
		while (j < n && data[j] != '\n' && data[j] != '\r')
			j++;
		PUT("data: ", 6);
		PUT(data + i, j - i);
		PUT("\n", 1);
		broke = j < n;
		if (j < n && data[j] == '\r' && j + 1 < n && data[j + 1] == '\n')
			j++;
		i = j + 1;
	} while (i < n || (broke && i == n));
	PUT("\n", 1);
#undef PUT
	return len;
}

/* The id and type lines of event STREAM-SEQ. */
size_t sse_frame_id_lines(char id[SSE_FRAME_ID_MAX], unsigned stream, uint64_t seq)
{
	return (size_t)snprintf(id, SSE_FRAME_ID_MAX, "id: %u-%llu\nevent: message\n", stream,
				(unsigned long long)seq);
}

/* Appends an SSE event. */
int sse_frame_event(struct buf *out, unsigned stream, uint64_t seq, const char *data, size_t n)
{
	char id[SSE_FRAME_ID_MAX];
	size_t idn = sse_frame_id_lines(id, stream, seq);
	size_t len = sse_frame_write(NULL, id, idn, data, n);
	if (buf_reserve(out, len) < 0)
		return -1;
	out->len += sse_frame_write(out->data + out->len, id, idn, data, n);
	return 0;
}

/* Appends an SSE event whose data is one message line given as pieces
 * (no CR or LF in them: a line the chain writes has none). */
int sse_frame_event_iov(struct buf *out, unsigned stream, uint64_t seq, const struct iovec *iov,
			int n)
{
	char id[SSE_FRAME_ID_MAX];
	size_t idn = sse_frame_id_lines(id, stream, seq), len = idn + 8;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (buf_reserve(out, len) < 0)
		return -1;
	char *at = out->data + out->len;
	memcpy(at, id, idn);
	memcpy(at + idn, "data: ", 6);
	at += idn + 6;
	for (int i = 0; i < n; i++) {
		memcpy(at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	memcpy(at, "\n\n", 2);
	out->len += len;
	return 0;
}

/* Appends a resumable stream's head: the retry hint, the priming event. */
int sse_frame_head(struct buf *out, unsigned stream, unsigned retry_ms, bool prime)
{
	if (!retry_ms && !prime)
		return 0;
	if (retry_ms && buf_printf(out, "retry: %u\n", retry_ms) < 0)
		return -1;
	/* "data:" even when empty: parsers dispatch (and so record the id of)
	 * only an event with a data line */
	if (prime && buf_printf(out, "id: %u-0\ndata: \n", stream) < 0)
		return -1;
	return buf_append(out, "\n", 1);
}

/* Reads "S-N" (decimal, no sign, no spaces). */
int sse_frame_id_parse(const char *s, unsigned *stream, uint64_t *seq)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long st = strtoul(s, &end, 10);
	if (errno || *end != '-' || st > UINT32_MAX || end[1] < '0' || end[1] > '9')
		return -1;
	const char *n = end + 1;
	unsigned long long q = strtoull(n, &end, 10);
	if (errno || *end)
		return -1;
	*stream = (unsigned)st;
	*seq = q;
	return 0;
}
