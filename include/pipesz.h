/*
 * pipesz.h - growing a pipe to fit what is about to cross it.
 *
 * A pipe holds 64 KiB by default, so a megabyte listing crosses it in
 * about sixteen pipe-fulls, each a wake-up of the reader and then of the
 * writer. A pipe that carries a large message is grown, once and only
 * then, so that the message crosses in one or two writes. Pipes that carry
 * only small messages keep the default size: the kernel counts the
 * capacity of a user's pipes against a per-user limit
 * (/proc/sys/fs/pipe-user-pages-soft).
 */
#ifndef MCPC_PIPESZ_H
#define MCPC_PIPESZ_H

#include <stdbool.h>
#include <stddef.h>

/* The most a pipe is grown to; the kernel's default ceiling for a user
 * (/proc/sys/fs/pipe-max-size). */
#define PIPESZ_MAX ((size_t)1 << 20)

/*
 * Grows FD, when it is a pipe that holds less, to hold WANT bytes (rounded
 * up to a power of two, at most PIPESZ_MAX). *CAP is the caller's memory
 * of the pipe's size: 0 at first (not yet known), then the size, or
 * PIPESZ_MAX once the pipe is as large as it gets or FD is no pipe or may
 * not grow, so that a call for a size already had makes no system call.
 * Returns true when the pipe grew. The fd works the same whatever happens.
 */
bool pipesz_fit(int fd, size_t want, size_t *cap);

#endif
