/*
 * front.h - the stdio front: one client session on stdin/stdout.
 *
 * stdin is read without blocking and framed into lines; stdout carries
 * protocol messages only, one compact JSON line each, flushed before the
 * loop sleeps. The front never exits the process itself: it reports the
 * end of input or a broken stdout to its owner.
 *
 * Flow control: while more than WRITER_HIGH_WATER bytes wait for stdout
 * (a client that does not read), or the chain pauses the client (its
 * backends' input is full), stdin is not read and the lines already read
 * wait in the framer; every reply, the ones mcp-chain makes itself
 * included, then has a bounded queue. Nothing is dropped: input resumes
 * once stdout drains. The end of input is reported after its last line.
 *
 * A client that stops reading for good: once stdout is full, if its queue
 * has not shrunk for the stall time (stdio_front_set_stall; off until
 * set), the front drops what is queued, closes the session (its open
 * requests are cancelled at the backends) and reports "client stopped
 * reading" to its owner.
 */
#ifndef MCPC_FRONT_H
#define MCPC_FRONT_H

#include <stddef.h>

struct stdio_front;
struct session;

/* Called when the client is gone; REASON says why (static string). */
typedef void (*front_closed_fn)(struct stdio_front *f, const char *reason, void *arg);

struct chain;

/* Starts reading stdin for a new session of CHAIN; lines up to MAX bytes. */
struct stdio_front *stdio_front_new(struct chain *chain, size_t max, front_closed_fn on_closed,
				    void *arg);

/*
 * The same on IN_FD and OUT_FD (not owned: the caller closes them), for
 * tests that put pipes or socket pairs in place of stdin and stdout.
 */
struct stdio_front *stdio_front_new_fds(struct chain *chain, int in_fd, int out_fd, size_t max,
					front_closed_fn on_closed, void *arg);

/*
 * Ends the session when stdout has been full for SECONDS with nothing
 * read meanwhile; 0 waits forever (the default). May be called again (reload).
 */
void stdio_front_set_stall(struct stdio_front *f, double seconds);

/* Stops reading stdin (stdout stays usable). */
void stdio_front_stop_reading(struct stdio_front *f);

/* The front's session. */
struct session *stdio_front_session(struct stdio_front *f);

/* Bytes still queued for stdout. */
size_t stdio_front_queued(const struct stdio_front *f);

/* Frees the front and its session (stdout is flushed first if possible). */
void stdio_front_free(struct stdio_front *f);

#endif
