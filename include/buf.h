/*
 * buf.h - a growable byte buffer with a read offset, used for line
 * framing and output queues. The buffer owns its memory.
 */
#ifndef MCPC_BUF_H
#define MCPC_BUF_H

#include <stddef.h>
#include <string.h>

struct buf {
	char *data;   /* owned; NULL until the first reserve */
	size_t off;   /* start of unconsumed bytes */
	size_t len;   /* end of valid bytes */
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0, 0 }

/* Frees the memory and resets to empty. */
void buf_release(struct buf *b);

/* Ensures room for N more bytes at data+len; returns 0 or -1 (ENOMEM). */
int buf_reserve(struct buf *b, size_t n);

/* Appends N bytes; returns 0 or -1. */
int buf_append(struct buf *b, const void *p, size_t n);

/* Appends printf-style text; returns 0 or -1. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Marks N bytes at data+off consumed; resets when empty. */
void buf_consume(struct buf *b, size_t n);

/*
 * Copies N bytes, at most 32, from SRC to DST (apart): two fixed-size
 * moves that may overlap each other. The chain copies ids, methods and
 * map keys of a few bytes on every message; under the copy strategy of
 * meson.build a memcpy of a size known only at run time ends in a loop
 * over single bytes: 60-70 instructions for a key or method of 9-11 bytes.
 */
static inline void buf_copy_short(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n >= 16) {
		memcpy(d, s, 16);
		memcpy(d + n - 16, s + n - 16, 16);
	} else if (n >= 8) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n > 0) {
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}

/* Bytes not yet consumed. */
static inline size_t buf_pending(const struct buf *b) { return b->len - b->off; }

/* Moves unconsumed bytes to the start of the buffer. */
/* Empties B, keeping its memory. */
static inline void buf_reset(struct buf *b) { b->len = b->off = 0; }

/* A writer for json_dump_callback: appends the N bytes at P to the struct
 * buf DATA; 0 or -1. */
int buf_dump_cb(const char *p, size_t n, void *data);

void buf_compact(struct buf *b);

/* Gives back memory above LIMIT bytes of capacity when the buffer is empty. */
void buf_shrink(struct buf *b, size_t limit);

#endif
