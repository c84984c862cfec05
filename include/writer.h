/*
 * writer.h - a non-blocking output queue on a file descriptor.
 *
 * Messages are serialized straight into the queue (one compact JSON line
 * each) and flushed before the loop next sleeps, so several messages
 * produced in one loop iteration leave in one write(2). Whatever cannot be
 * written yet waits for the fd to become writable. Nothing is ever lost
 * while the peer reads; a write error closes the writer and reports it.
 */
#ifndef MCPC_WRITER_H
#define MCPC_WRITER_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "buf.h"

struct writer;

/* Called once when the fd fails (e.g. EPIPE); ERR is errno. */
typedef void (*writer_error_fn)(struct writer *w, int err, void *arg);

/* Called when the queue has drained below the low-water mark. */
typedef void (*writer_drain_fn)(struct writer *w, void *arg);

struct writer {
	int fd;               /* not owned: writer_close closes it */
	struct buf out;
	ev_io io;
	bool dirty;           /* queued on the flush list */
	bool failed;
	bool close_when_done; /* close fd after the last byte */
	size_t pipe_cap;      /* what the fd holds, if a pipe: pipesz_fit */
	struct writer *next_dirty;
	writer_error_fn on_error;
	writer_drain_fn on_drain;
	void *arg;
};

/* Prepares W on FD, which it sets non-blocking. */
void writer_init(struct writer *w, int fd, writer_error_fn on_error, void *arg);

/*
 * Queues MSG (borrowed) as one line. Returns 0, or -1 when the writer has
 * failed or memory ran out (the message is then not sent).
 */
int writer_send(struct writer *w, json_t *msg);

/* Queues raw bytes (must end with '\n' to form a line). */
int writer_send_raw(struct writer *w, const char *data, size_t n);

/* Above this many queued bytes the owner should stop feeding the writer. */
#define WRITER_HIGH_WATER ((size_t)4 << 20)

/* Queues the pieces of one line (a "\n" is added). Returns 0 or -1. */
int writer_send_iov(struct writer *w, const struct iovec *iov, int n);

/* Bytes queued and not yet written. */
size_t writer_queued(const struct writer *w);

/* Writes what it can now; returns 0, or -1 on a fatal error. */
int writer_flush(struct writer *w);

/* Closes the fd once the queue is empty (at once if it is). */
void writer_close(struct writer *w);

/* Stops watchers, closes the fd if open and frees the queue now. */
void writer_release(struct writer *w);

/* The same, leaving the fd open (it is someone else's, stdout say). */
/* Nobody reads W any more: what is queued is dropped, later writes are
 * refused, and neither callback is called again; its fd stays open. */
void writer_abandon(struct writer *w);

void writer_detach(struct writer *w);

/* Installs the before-sleep flush hook on the default loop. */
void writer_setup(void);

/* Flushes every dirty writer now (also run before each loop sleep). */
void writer_flush_all(void);

#endif
