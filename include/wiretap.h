/*
 * wiretap.h - one place that sees every message crossing a peer's edge.
 *
 * When a tap is set (mcp-chain --record), the stdio front and the chain
 * hand it each message a client or a backend sends (WIRETAP_IN) and each
 * message written to one (WIRETAP_OUT), as the line on the wire, with the
 * peer it came from or went to. It is a process-wide sink like the log:
 * it holds no session state. With no tap set each call costs one branch.
 */
#ifndef MCPC_WIRETAP_H
#define MCPC_WIRETAP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

struct peer;

enum wiretap_dir { WIRETAP_IN, WIRETAP_OUT };

/* Gets LINE (LEN bytes, no "\n", borrowed for the call) crossing P's edge. */
typedef void (*wiretap_fn)(void *arg, const struct peer *p, enum wiretap_dir dir,
			   const char *line, size_t len);

/* Sets the tap (NULL: none); ARG is handed back to it. */
void wiretap_set(wiretap_fn fn, void *arg);

extern wiretap_fn wiretap_hook;

/* The tapping points: a line, the pieces of one, or a tree (serialized). */
void wiretap_line_(const struct peer *p, enum wiretap_dir dir, const char *line, size_t len);
void wiretap_iov_(const struct peer *p, enum wiretap_dir dir, const struct iovec *iov, int n);
void wiretap_json_(const struct peer *p, enum wiretap_dir dir, json_t *msg);

static inline void wiretap_line(const struct peer *p, enum wiretap_dir dir, const char *line,
				size_t len)
{
	if (wiretap_hook)
		wiretap_line_(p, dir, line, len);
}

static inline void wiretap_iov(const struct peer *p, enum wiretap_dir dir,
			       const struct iovec *iov, int n)
{
	if (wiretap_hook)
		wiretap_iov_(p, dir, iov, n);
}

static inline void wiretap_json(const struct peer *p, enum wiretap_dir dir, json_t *msg)
{
	if (wiretap_hook)
		wiretap_json_(p, dir, msg);
}

#endif
