/*
 * buf.h - a growable byte buffer with a read offset, used for line
 * framing and output queues. The buffer owns its memory.
 */
#ifndef MCPC_BUF_H
#define MCPC_BUF_H

#include <stddef.h>

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

/* Bytes not yet consumed. */
static inline size_t buf_pending(const struct buf *b) { return b->len - b->off; }

/* Moves unconsumed bytes to the start of the buffer. */
void buf_compact(struct buf *b);

/* Gives back memory above LIMIT bytes of capacity when the buffer is empty. */
void buf_shrink(struct buf *b, size_t limit);

#endif
