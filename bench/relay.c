/*
 * mcp-bench-relay: a byte relay with no parsing, the floor for any stdio
 * proxy.
 *
 * It spawns the command given after `--` (or as its arguments) and copies
 * its own stdin to the child's stdin and the child's stdout to its own
 * stdout, in one poll loop, without looking at the bytes.  When both ends
 * of a direction are pipes it moves the data with splice(2) (no copy
 * through user space); otherwise, or with --no-splice, it uses read/write
 * through a 256 KiB buffer per direction. With --lines (implies
 * --no-splice) it also finds every line and writes only whole lines: the
 * least any proxy that looks at each message must do, with no parsing.
 * With --scan it also checks every whole line with mcp-chain's own
 * validating scanner (src/core/jscan.c) before writing it: the least a
 * proxy must do that refuses malformed messages, without mapping ids or
 * tracking requests. Lines the scanner declines still go on; their count
 * is printed at exit. A line longer than the buffer goes on in parts,
 * unchecked, as with --lines.
 *
 * End of file is passed on in each direction; the relay exits with the
 * child's exit status once the child's stdout has closed and the child
 * has exited.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jscan.h"

#define PROG "mcp-bench-relay"
#define BUF_SIZE (256 * 1024)
#define SPLICE_MAX (1 << 20)

/* One direction of the relay: bytes flow from `in` to `out`. */
struct dir {
	int in, out;          /* -1 once closed */
	bool use_splice;      /* move with splice(2) */
	bool out_blocked;     /* last attempt found `out` full: wait for POLLOUT */
	char *buf;            /* read/write mode: pending bytes */
	size_t off, len;      /* read/write mode: buf[off..len) is pending */
	bool lines;           /* write whole lines only */
	bool scan;            /* and check each one with jscan_message() */
	size_t ready;         /* buf[off..ready) can be written (== len unless lines) */
};

/* Print a message with errno text to stderr and exit with status 1. */
static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* True if fd is a pipe (FIFO). */
static bool is_pipe(int fd)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

/* Put fd in non-blocking mode if it is a pipe or a socket. */
static void set_nonblock(int fd)
{
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
		return;
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Close the direction's output, passing end of file on. */
static void close_out(struct dir *d)
{
	if (d->out >= 0)
		close(d->out);
	d->out = -1;
}

/* Close the direction's input. */
static void close_in(struct dir *d)
{
	if (d->in >= 0)
		close(d->in);
	d->in = -1;
}

/* Move bytes with splice until the input is empty or the output is full. */
static void pump_splice(struct dir *d)
{
	for (;;) {
		ssize_t n = splice(d->in, NULL, d->out, NULL, SPLICE_MAX,
		                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0)
			continue;
		if (n == 0) {
			close_in(d);
			close_out(d);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			/* Either side may be the cause; poll tells which next time. */
			struct pollfd p = { .fd = d->out, .events = POLLOUT };
			d->out_blocked = poll(&p, 1, 0) == 0;
			return;
		}
		if (errno == EINVAL) {
			/* Not spliceable after all: fall back to read/write. */
			d->use_splice = false;
			return;
		}
		/* The reader of `out` went away (EPIPE) or a real error. */
		close_in(d);
		close_out(d);
		return;
	}
}

/* Write the bytes ready to go; true if all of them were written. */
static bool flush_buf(struct dir *d)
{
	while (d->off < d->ready) {
		ssize_t n = write(d->out, d->buf + d->off, d->ready - d->off);
		if (n > 0) {
			d->off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			d->out_blocked = true;
			return false;
		} else {
			close_in(d);
			close_out(d);
			return false;
		}
	}
	/* keep an unfinished line at the front */
	memmove(d->buf, d->buf + d->ready, d->len - d->ready);
	d->len -= d->ready;
	d->off = d->ready = 0;
	d->out_blocked = false;
	return true;
}

static unsigned long declined;   /* lines jscan_message() refused (--scan) */

/* Marks the whole lines among the bytes just read as ready, one by one. */
static void frame(struct dir *d)
{
	const char *p = d->buf + d->ready, *e = d->buf + d->len, *q;
	if (!d->lines) {
		d->ready = d->len;
		return;
	}
	while ((q = memchr(p, '\n', (size_t)(e - p))) != NULL) {
		struct jscan js;
		if (d->scan && !jscan_message(p, (size_t)(q - p), &js))
			declined++;
		p = q + 1;
	}
	d->ready = (size_t)(p - d->buf);
	if (d->ready == 0 && d->len == BUF_SIZE)
		d->ready = d->len;   /* a line longer than the buffer: pass it on in parts */
}

/* Move bytes with read/write until the input is empty or the output full. */
static void pump_copy(struct dir *d)
{
	if (!d->buf && !(d->buf = malloc(BUF_SIZE))) {
		errno = ENOMEM;
		die("malloc");
	}
	for (;;) {
		if (!flush_buf(d) || d->in < 0)
			return;
		ssize_t n = read(d->in, d->buf + d->len, BUF_SIZE - d->len);
		if (n > 0) {
			d->len += (size_t)n;
			frame(d);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		d->ready = d->len;   /* end of input: an unfinished line goes as it is */
		flush_buf(d);
		close_in(d);
		close_out(d);
		return;
	}
}

/* Move what can be moved in direction d. */
static void pump(struct dir *d)
{
	if (d->in < 0 && d->ready == d->off)
		return;
	if (d->use_splice)
		pump_splice(d);
	if (!d->use_splice && d->out >= 0)
		pump_copy(d);
}

/* Spawn argv with pipes on its stdin and stdout; sets the parent's ends. */
static pid_t spawn(char **argv, int *to_child, int *from_child)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, PROG ": cannot run %s: %s\n", argv[0],
		        strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to_child = in[1];
	*from_child = out[0];
	return pid;
}

/* Relay until both directions are closed, then exit like the child. */
int main(int argc, char **argv)
{
	int first = 1;
	bool splice_ok = true, lines = false, scan = false;
	while (first < argc && argv[first][0] == '-') {
		if (strcmp(argv[first], "--no-splice") == 0) {
			splice_ok = false;
			first++;
		} else if (strcmp(argv[first], "--lines") == 0) {
			splice_ok = false;
			lines = true;
			first++;
		} else if (strcmp(argv[first], "--scan") == 0) {
			splice_ok = false;
			lines = scan = true;
			first++;
		} else if (strcmp(argv[first], "--") == 0) {
			first++;
			break;
		} else {
			fprintf(stderr, "usage: " PROG " [--no-splice | --lines | --scan] [--] "
			        "COMMAND [ARGS...]\n");
			return 2;
		}
	}
	if (first >= argc) {
		fprintf(stderr, "usage: " PROG " [--no-splice | --lines | --scan] [--] COMMAND "
		        "[ARGS...]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int to_child, from_child;
	pid_t pid = spawn(argv + first, &to_child, &from_child);

	struct dir up = { .in = STDIN_FILENO, .out = to_child, .lines = lines,
			  .scan = scan };
	struct dir down = { .in = from_child, .out = STDOUT_FILENO, .lines = lines,
			    .scan = scan };
	up.use_splice = splice_ok && is_pipe(up.in);
	down.use_splice = splice_ok && is_pipe(down.out);
	int fds[] = { STDIN_FILENO, STDOUT_FILENO, to_child, from_child };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		set_nonblock(fds[i]);

	struct dir *dirs[2] = { &up, &down };
	while (down.in >= 0 || down.len > down.off) {
		struct pollfd p[2];
		struct dir *owner[2];
		int np = 0;
		for (int i = 0; i < 2; i++) {
			struct dir *d = dirs[i];
			if (d->out < 0)
				continue;
			if (d->out_blocked || (d->in < 0 && d->len > d->off))
				p[np] = (struct pollfd){ .fd = d->out, .events = POLLOUT };
			else if (d->in >= 0)
				p[np] = (struct pollfd){ .fd = d->in, .events = POLLIN };
			else
				continue;
			owner[np++] = d;
		}
		if (np == 0)
			break;
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (int i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (p[i].events == POLLOUT)
				owner[i]->out_blocked = false;
			pump(owner[i]);
		}
	}
	close_out(&up);
	close_in(&up);
	if (declined)
		fprintf(stderr, PROG ": the scan declined %lu lines\n", declined);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
