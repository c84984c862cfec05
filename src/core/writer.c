/*
 * writer.c - non-blocking, before-sleep-flushed output queues.
 */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "pipesz.h"

#define DIRECT_MIN ((size_t)64 << 10)  /* lines this long are written at once */
#define DIRECT_IOV 8                    /* in at most this many pieces */

static struct writer *dirty_list;
static ev_prepare flush_hook;

static void on_writable(struct ev_loop *loop, ev_io *io, int revents);
static void fail(struct writer *w, int err);

/* Sets up an idle writer. */
void writer_init(struct writer *w, int fd, writer_error_fn on_error, void *arg)
{
	*w = (struct writer){ .fd = fd, .on_error = on_error, .arg = arg };
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	ev_io_init(&w->io, on_writable, fd, EV_WRITE);
	w->io.data = w;
}

/* Puts W on the list flushed before the loop sleeps. */
static void mark_dirty(struct writer *w)
{
	if (w->dirty)
		return;
	w->dirty = true;
	w->next_dirty = dirty_list;
	dirty_list = w;
}

/* Takes W off the dirty list. */
static void unmark_dirty(struct writer *w)
{
	if (!w->dirty)
		return;
	for (struct writer **pp = &dirty_list; *pp; pp = &(*pp)->next_dirty) {
		if (*pp == w) {
			*pp = w->next_dirty;
			break;
		}
	}
	w->dirty = false;
}

/* Serializes MSG as a line. */
int writer_send(struct writer *w, json_t *msg)
{
	if (w->failed || w->fd < 0)
		return -1;
	size_t keep = buf_pending(&w->out);  /* the dump may compact the buffer */
	if (json_dump_callback(msg, buf_dump_cb, &w->out, JSON_COMPACT) < 0 ||
	    buf_append(&w->out, "\n", 1) < 0) {
		w->out.len = w->out.off + keep;
		return -1;
	}
	mark_dirty(w);
	return 0;
}

/* Queues bytes as they are. */
int writer_send_raw(struct writer *w, const char *data, size_t n)
{
	if (w->failed || w->fd < 0)
		return -1;
	if (buf_append(&w->out, data, n) < 0)
		return -1;
	mark_dirty(w);
	return 0;
}

/*
 * Writes what the fd takes of the line in IOV (N pieces and a "\n") at
 * once; returns the bytes written, or -1 when the writer failed. Only for
 * an empty queue, so nothing is written out of order.
 */
static ssize_t write_now(struct writer *w, const struct iovec *iov, int n)
{
	struct iovec v[DIRECT_IOV + 1];
	memcpy(v, iov, (size_t)n * sizeof *iov);
	v[n] = (struct iovec){ (void *)"\n", 1 };
	for (;;) {
		ssize_t done = writev(w->fd, v, n + 1);
		if (done >= 0)
			return done;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno != EINTR) {
			fail(w, errno);
			return -1;
		}
	}
}

/*
 * Queues the pieces of one line. A large line meeting an empty queue is
 * written at once as far as the fd takes it, and only the rest is copied:
 * a megabyte listing would otherwise be copied whole into fresh memory.
 */
int writer_send_iov(struct writer *w, const struct iovec *iov, int n)
{
	size_t total = 1, skip = 0;
	if (w->failed || w->fd < 0)
		return -1;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (total >= DIRECT_MIN && n <= DIRECT_IOV && buf_pending(&w->out) == 0) {
		pipesz_fit(w->fd, total, &w->pipe_cap);
		ssize_t done = write_now(w, iov, n);
		if (done < 0)
			return -1;
		if ((size_t)done == total)
			return 0;
		skip = (size_t)done;
	}
	if (w->out.cap - w->out.len < total - skip && buf_reserve(&w->out, total - skip) < 0) {
		if (skip)   /* a line cut short: the stream cannot go on */
			fail(w, ENOMEM);
		return -1;
	}
	char *to = w->out.data + w->out.len;
	if (skip == 0) {   /* the whole line: every message but a large one cut short */
		for (int i = 0; i < n; i++) {
			memcpy(to, iov[i].iov_base, iov[i].iov_len);
			to += iov[i].iov_len;
		}
		*to++ = '\n';
		w->out.len = (size_t)(to - w->out.data);
		mark_dirty(w);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		size_t len = iov[i].iov_len, from = skip < len ? skip : len;
		skip -= from;
		memcpy(w->out.data + w->out.len, (const char *)iov[i].iov_base + from, len - from);
		w->out.len += len - from;
	}
	if (skip == 0)
		w->out.data[w->out.len++] = '\n';
	mark_dirty(w);
	return 0;
}

/* Bytes waiting. */
size_t writer_queued(const struct writer *w)
{
	return buf_pending(&w->out);
}

/* Marks the writer failed and tells its owner (once). */
static void fail(struct writer *w, int err)
{
	if (w->failed)
		return;
	w->failed = true;
	ev_io_stop(EV_DEFAULT, &w->io);
	unmark_dirty(w);
	buf_release(&w->out);
	if (w->on_error)
		w->on_error(w, err, w->arg);
}

/* Closes the fd now. */
static void close_fd(struct writer *w)
{
	ev_io_stop(EV_DEFAULT, &w->io);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* Writes as much as the fd takes. */
int writer_flush(struct writer *w)
{
	while (buf_pending(&w->out) > 0 && !w->failed) {
		ssize_t n = write(w->fd, w->out.data + w->out.off, buf_pending(&w->out));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (buf_pending(&w->out) >= DIRECT_MIN &&
			    pipesz_fit(w->fd, buf_pending(&w->out), &w->pipe_cap))
				continue;   /* the pipe grew: room now */
			ev_io_start(EV_DEFAULT, &w->io);
			return 0;
		}
		if (n < 0) {
			fail(w, errno);
			return -1;
		}
		buf_consume(&w->out, (size_t)n);
	}
	if (ev_is_active(&w->io))   /* it rarely is: no call for nothing on every flush */
		ev_io_stop(EV_DEFAULT, &w->io);
	buf_shrink(&w->out, 1u << 20);
	if (w->close_when_done)
		close_fd(w);
	if (w->on_drain)
		w->on_drain(w, w->arg);
	return 0;
}

/* The fd can take more bytes. */
static void on_writable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct writer *w = io->data;
	(void)loop;
	(void)revents;
	writer_flush(w);
}

/* Closes after draining. */
void writer_close(struct writer *w)
{
	if (w->fd < 0)
		return;
	w->close_when_done = true;
	if (buf_pending(&w->out) == 0 || w->failed) {
		unmark_dirty(w);
		close_fd(w);
	}
}

/* Tears down at once. */
void writer_release(struct writer *w)
{
	unmark_dirty(w);
	close_fd(w);
	buf_release(&w->out);
}

/* Tears down at once; the fd stays open. */
void writer_abandon(struct writer *w)
{
	w->failed = true;
	w->on_drain = NULL;
	w->on_error = NULL;
	writer_detach(w);
}

void writer_detach(struct writer *w)
{
	unmark_dirty(w);
	ev_io_stop(EV_DEFAULT, &w->io);
	buf_release(&w->out);
}

/* Flushes all writers that were written to in this iteration. */
void writer_flush_all(void)
{
	while (dirty_list) {
		struct writer *w = dirty_list;
		dirty_list = w->next_dirty;
		w->dirty = false;
		if (!w->failed && w->fd >= 0)
			writer_flush(w);
	}
}

/* Before-sleep hook. */
static void on_prepare(struct ev_loop *loop, ev_prepare *p, int revents)
{
	(void)loop;
	(void)p;
	(void)revents;
	writer_flush_all();
}

/* Installs the hook once. */
void writer_setup(void)
{
	if (ev_is_active(&flush_hook))
		return;
	ev_prepare_init(&flush_hook, on_prepare);
	ev_prepare_start(EV_DEFAULT, &flush_hook);
	ev_unref(EV_DEFAULT);  /* the hook alone must not keep the loop alive */
}
