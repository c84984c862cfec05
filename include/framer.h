/*
 * framer.h - newline-delimited message framing with a size bound.
 *
 * Bytes go in (framer_reserve/framer_commit to read straight into the
 * buffer, or framer_push); complete lines come out of framer_next. A line
 * longer than the bound is never buffered whole: it is discarded as it
 * streams, and framer_next reports it once, with its first bytes kept so
 * that the caller can still find the request id and answer it.
 */
#ifndef MCPC_FRAMER_H
#define MCPC_FRAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

#define FRAMER_PREFIX 4096

enum frame_kind { FRAME_NONE, FRAME_LINE, FRAME_OVERSIZE };

struct framer {
	struct buf b;
	size_t scan;          /* bytes from b.off already searched for '\n' */
	size_t max;           /* largest line accepted, newline excluded */
	bool discarding;      /* inside an oversized line */
	size_t discarded;     /* its length so far */
	bool discard_cr;      /* the last discarded byte was '\r' */
	size_t pipe_cap;      /* what the fd read holds, if a pipe: pipesz_fit */
	size_t prefix_len;
	char prefix[FRAMER_PREFIX];
};

/* Prepares F for lines of at most MAX bytes. */
void framer_init(struct framer *f, size_t max);

/* Frees the buffer. */
void framer_release(struct framer *f);

/*
 * Returns a pointer where up to *AVAIL bytes may be written (e.g. by
 * read(2)), or NULL when memory ran out. Follow with framer_commit.
 */
char *framer_reserve(struct framer *f, size_t *avail);

/* Declares N bytes written at the pointer framer_reserve returned. */
void framer_commit(struct framer *f, size_t n);

/* Copies N bytes in; returns 0 or -1. For tests and non-fd sources. */
int framer_push(struct framer *f, const char *data, size_t n);

/*
 * Takes the next frame. FRAME_LINE: LINE and LEN give a complete line without
 * its "\n" (or "\r\n"), valid until the next framer call; empty lines are
 * skipped. FRAME_OVERSIZE: LINE and LEN give the kept prefix and *TOTAL the
 * whole line's length. FRAME_NONE: need more input.
 */
enum frame_kind framer_next(struct framer *f, const char **line, size_t *len,
			    size_t *total);

/* Bytes buffered but not yet returned (a partial last line). */
size_t framer_pending(const struct framer *f);

/*
 * The one way every descriptor is read: one read(2) from FD into F,
 * retried on EINTR. Returns the bytes read (> 0); 0 at end of input, with
 * a last line that had no "\n" completed so that framer_next hands it
 * over; or -1 with errno: EAGAIN when nothing is there now, ENOMEM when F
 * cannot grow, else the read's error. With FULL, *FULL says whether the
 * read filled all the room it had (more may be waiting: read again).
 */
ssize_t framer_read(struct framer *f, int fd, bool *full);

#endif
