/*
 * framer.c - newline framing with a bound on line length.
 */
#include "framer.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "pipesz.h"

#define READ_CHUNK 65536
#define PIPE_DEFAULT 65536  /* what a new pipe holds */

/* Sets up an empty framer. */
void framer_init(struct framer *f, size_t max)
{
	memset(f, 0, sizeof *f);
	f->max = max;
}

/* Frees the buffer. */
void framer_release(struct framer *f)
{
	buf_release(&f->b);
}

/* Room to read into. */
char *framer_reserve(struct framer *f, size_t *avail)
{
	if (buf_reserve(&f->b, READ_CHUNK) < 0)
		return NULL;
	*avail = f->b.cap - f->b.len;
	return f->b.data + f->b.len;
}

/* Accounts for bytes read into the reserved space. */
void framer_commit(struct framer *f, size_t n)
{
	f->b.len += n;
}

/* Copies bytes in. */
int framer_push(struct framer *f, const char *data, size_t n)
{
	if (buf_reserve(&f->b, n) < 0)
		return -1;
	memcpy(f->b.data + f->b.len, data, n);
	f->b.len += n;
	return 0;
}

/* Begins discarding a line that outgrew the bound, keeping its head. */
static void start_discard(struct framer *f)
{
	size_t have = buf_pending(&f->b);
	f->prefix_len = have < FRAMER_PREFIX ? have : FRAMER_PREFIX;
	memcpy(f->prefix, f->b.data + f->b.off, f->prefix_len);
	f->discarding = true;
	f->discarded = have;
	f->discard_cr = have && f->b.data[f->b.len - 1] == '\r';
	f->b.off = f->b.len = 0;
	f->scan = 0;
}

/* Skips input up to the newline ending an oversized line. */
static enum frame_kind finish_discard(struct framer *f, const char **line,
				      size_t *len, size_t *total)
{
	char *p = f->b.data + f->b.off;
	size_t n = buf_pending(&f->b);
	char *nl = memchr(p, '\n', n);

	if (!nl) {
		f->discarded += n;
		if (n)
			f->discard_cr = p[n - 1] == '\r';
		f->b.off = f->b.len = 0;
		return FRAME_NONE;
	}
	size_t used = (size_t)(nl - p);
	f->discarded += used;
	if (used ? p[used - 1] == '\r' : f->discard_cr)
		f->discarded--;  /* "\r\n" ends the line, as on the normal path */
	buf_consume(&f->b, used + 1);
	f->scan = 0;
	f->discarding = false;
	*line = f->prefix;
	*len = f->prefix_len;
	*total = f->discarded;
	return FRAME_OVERSIZE;
}

/* Returns the next complete line, if any. */
enum frame_kind framer_next(struct framer *f, const char **line, size_t *len,
			    size_t *total)
{
	for (;;) {
		if (f->discarding)
			return finish_discard(f, line, len, total);
		char *p = f->b.data + f->b.off;
		size_t n = buf_pending(&f->b);
		char *nl = n > f->scan ? memchr(p + f->scan, '\n', n - f->scan) : NULL;
		if (!nl) {
			/* a line of exactly max bytes may still await the "\n" of its "\r\n" */
			if (n > f->max && !(n == f->max + 1 && p[n - 1] == '\r')) {
				start_discard(f);
				continue;
			}
			f->scan = n;
			if (n == 0)
				buf_shrink(&f->b, 1u << 20);
			return FRAME_NONE;
		}
		size_t l = (size_t)(nl - p);
		f->scan = 0;
		buf_consume(&f->b, l + 1);
		if (l > 0 && p[l - 1] == '\r')
			l--;
		if (l > f->max) {
			f->prefix_len = l < FRAMER_PREFIX ? l : FRAMER_PREFIX;
			memcpy(f->prefix, p, f->prefix_len);
			*line = f->prefix;
			*len = f->prefix_len;
			*total = l;
			return FRAME_OVERSIZE;
		}
		size_t i = 0;
		while (i < l && (p[i] == ' ' || p[i] == '\t'))
			i++;
		if (i == l)
			continue;
		*line = p;
		*len = l;
		if (total)
			*total = l;
		return FRAME_LINE;
	}
}

/* Bytes of a partial line waiting for its newline. */
size_t framer_pending(const struct framer *f)
{
	return f->discarding ? f->discarded : buf_pending(&f->b);
}

/* Reads what FD holds into F. */
ssize_t framer_read(struct framer *f, int fd, bool *full)
{
	size_t avail;
	char *dst = framer_reserve(f, &avail);
	if (!dst) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t n;
	do
		n = read(fd, dst, avail);
	while (n < 0 && errno == EINTR);
	/* a read of a pipe-full or more: a burst, its writer may be waiting */
	if (n >= PIPE_DEFAULT)
		pipesz_fit(fd, (size_t)n * 4, &f->pipe_cap);
	if (full)
		*full = n > 0 && (size_t)n == avail;
	if (n > 0) {
		framer_commit(f, (size_t)n);
	} else if (n == 0) {
		if (framer_pending(f) > 0)
			framer_push(f, "\n", 1);   /* the last line had no newline */
	} else if (errno == EWOULDBLOCK) {
		errno = EAGAIN;
	}
	return n;
}
