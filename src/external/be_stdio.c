/*
 * be_stdio.c - the stdio transport of a backend: a child process whose
 * stdout carries newline-delimited JSON-RPC (a line that is not JSON is
 * logged and skipped, never forwarded) and whose stdin takes ours.
 *
 * The transport is down when the child has been reaped, or when its
 * stdout closed and it did not exit within a second (then it is stopped).
 */
#include "backend.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chain.h"
#include "framer.h"
#include "log.h"
#include "proc.h"
#include "rpc.h"
#include "writer.h"

#define EOF_WAIT 1.0  /* seconds to wait for the exit status after EOF */

struct be_stdio {
	struct backend *b;
	struct proc proc;
	struct writer in;         /* to the child's stdin */
	struct framer out_fr;     /* from the child's stdout */
	ev_io out_io;
	ev_timer eof_timer;
	bool out_open;
	bool down;                /* backend_down was called for this run */
	double grace;
};

/* The transport state of B. */
static struct be_stdio *T(struct backend *b)
{
	return backend_transport(b);
}

/* Reports the transport down once per run. */
static void report_down(struct be_stdio *s, const char *reason)
{
	if (s->down)
		return;
	s->down = true;
	backend_down(s->b, reason);
}

/* Reports a clean end (exit status 0, unasked) once per run. */
static void report_end(struct be_stdio *s, const char *reason)
{
	if (s->down)
		return;
	s->down = true;
	backend_ended(s->b, reason);
}

/* Answers the request an oversized line was for, if its id can be found. */
static void on_oversize(struct be_stdio *s, const char *head, size_t n, size_t total)
{
	const char *name = backend_peer(s->b)->name;
	json_t *id = rpc_scan_id(head, n);
	log_warn("%s: dropped a %zu-byte message: larger than maxMessageBytes (%zu)",
		 name, total, s->out_fr.max);
	if (!id)
		return;
	json_t *err = rpc_errorf(id, RPC_INTERNAL_ERROR,
		"the backend's response (%zu bytes) exceeds maxMessageBytes (%zu)",
		total, s->out_fr.max);
	json_decref(id);
	if (!rpc_scan_has_method(head, n))  /* it was a response */
		backend_deliver(s->b, err, 0);
	else
		json_decref(err);
}

/* Parses one stdout line and hands it on. */
static void on_line(struct be_stdio *s, const char *line, size_t n)
{
	json_error_t e;
	size_t lead = 0;
	while (lead < n && (line[lead] == ' ' || line[lead] == '\t'))
		lead++;
	/* a batch is split below: the chain takes one message at a time */
	if ((lead == n || line[lead] != '[') && backend_deliver_line(s->b, line, n))
		return;
	json_t *msg = json_loadb(line, n, JSON_ALLOW_NUL, &e);
	if (!msg || !(json_is_object(msg) || json_is_array(msg))) {
		log_warn("%s: skipped a line on stdout that is not a JSON-RPC message: %.*s%s",
			 backend_peer(s->b)->name, (int)(n > 200 ? 200 : n), line,
			 n > 200 ? "..." : "");
		json_decref(msg);
		return;
	}
	if (json_is_object(msg)) {
		backend_deliver(s->b, msg, n);
		return;
	}
	size_t i;
	json_t *m;
	json_array_foreach(msg, i, m)
		backend_deliver(s->b, json_incref(m), 0);
	json_decref(msg);
}

/* Takes complete lines out of the stdout framer. */
static void drain_lines(struct be_stdio *s)
{
	const char *line;
	size_t n, total;
	enum frame_kind k;
	while (s->out_open && (k = framer_next(&s->out_fr, &line, &n, &total)) != FRAME_NONE) {
		if (k == FRAME_LINE)
			on_line(s, line, n);
		else
			on_oversize(s, line, n, total);
	}
}

/* Reads stdout until it would block; returns false at EOF or error. */
static bool read_stdout(struct be_stdio *s)
{
	for (;;) {
		bool full;
		ssize_t n = framer_read(&s->out_fr, s->proc.out_fd, &full);
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			drain_lines(s);   /* a last line without "\n", completed */
			return false;
		}
		drain_lines(s);
		if (!s->out_open)
			return false;
		if (!full)
			return true;  /* drained for now: level-triggered, saves a read */
	}
}

/* Stops reading stdout. */
static void close_stdout(struct be_stdio *s)
{
	ev_io_stop(EV_DEFAULT, &s->out_io);
	if (s->proc.out_fd >= 0)
		close(s->proc.out_fd);
	s->proc.out_fd = -1;
	s->out_open = false;
}

/* stdout is readable. */
static void on_stdout(struct ev_loop *loop, ev_io *w, int revents)
{
	struct be_stdio *s = w->data;
	(void)revents;
	if (read_stdout(s))
		return;
	close_stdout(s);
	if (s->proc.pid <= 0 || s->down)
		return;
	/* usually the exit status follows at once; name it if it does */
	ev_timer_set(&s->eof_timer, EOF_WAIT, 0.);
	ev_timer_start(loop, &s->eof_timer);
}

/* stdout closed a while ago and the process still runs: stop it. */
static void on_eof_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct be_stdio *s = w->data;
	(void)loop;
	(void)revents;
	writer_close(&s->in);
	proc_stop(&s->proc, s->grace > 0 ? s->grace : 2.0);
	report_down(s, "closed its stdout");
}

/* The child was reaped. */
static void on_proc_exit(struct proc *p, int status, void *arg)
{
	struct be_stdio *s = arg;
	char what[128];
	(void)p;
	ev_timer_stop(EV_DEFAULT, &s->eof_timer);
	if (s->out_open) {
		/* last words; a grandchild may keep it open */
		if (read_stdout(s) && s->out_open && framer_pending(&s->out_fr) > 0 &&
		    framer_push(&s->out_fr, "\n", 1) == 0)
			drain_lines(s);  /* a last line without "\n", as at EOF */
		close_stdout(s);
	}
	writer_release(&s->in);
	proc_describe_status(status, what, sizeof what);
	bool asked = backend_state(s->b) == BACKEND_STOPPING;
	bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!s->down && !asked && !clean)
		proc_log_tail(&s->proc);
	if (s->down)
		log_debug("%s: %s", backend_peer(s->b)->name, what);
	if (clean && !asked)
		report_end(s, what);
	else
		report_down(s, what);
}

/* Child stdin failed (EPIPE): the exit handler reports the rest. */
static void on_in_error(struct writer *w, int err, void *arg)
{
	struct be_stdio *s = arg;
	(void)w;
	log_debug("%s: writing to its stdin failed: %s", backend_peer(s->b)->name,
		  strerror(err));
}

/* The child's stdin drained: let the client's input flow again. */
static void on_in_drain(struct writer *w, void *arg)
{
	struct be_stdio *s = arg;
	(void)w;
	chain_congestion(backend_peer(s->b), false);
}

/* Frees the transport state. */
static void stdio_destroy(struct backend *b)
{
	struct be_stdio *s = T(b);
	if (!s)
		return;
	proc_signal_group(&s->proc, SIGKILL);
	ev_timer_stop(EV_DEFAULT, &s->eof_timer);
	close_stdout(s);
	writer_release(&s->in);
	proc_release(&s->proc);
	framer_release(&s->out_fr);
	free(s);
	backend_set_transport(b, NULL);
}

/* Spawns the child. */
static int stdio_start(struct backend *b)
{
	const struct cfg_server *c = backend_cfg(b);
	struct peer *peer = backend_peer(b);
	stdio_destroy(b);
	struct be_stdio *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	s->b = b;
	s->proc.in_fd = s->proc.out_fd = s->proc.err_fd = -1;
	s->in.fd = -1;
	framer_init(&s->out_fr, backend_top(b)->max_message);
	ev_init(&s->eof_timer, on_eof_timer);
	s->eof_timer.data = s;
	backend_set_transport(b, s);
	if (proc_spawn(&s->proc, peer->name, c->argv, c->env, c->cwd, on_proc_exit, s) < 0) {
		snprintf(peer->why_down, sizeof peer->why_down, "%s", s->proc.error);
		return proc_spawn_error_is_permanent(&s->proc) ? BE_START_PERMANENT : -1;
	}
	writer_init(&s->in, s->proc.in_fd, on_in_error, s);
	s->in.on_drain = on_in_drain;
	s->proc.in_fd = -1;  /* the writer owns it now */
	ev_io_init(&s->out_io, on_stdout, s->proc.out_fd, EV_READ);
	s->out_io.data = s;
	ev_io_start(EV_DEFAULT, &s->out_io);
	s->out_open = true;
	return 0;
}

/* One line to the child's stdin. */
static int stdio_send(struct backend *b, json_t *msg)
{
	struct be_stdio *s = T(b);
	if (!s || s->in.fd < 0)
		return -1;
	int rc = writer_send(&s->in, msg);
	if (writer_queued(&s->in) > WRITER_HIGH_WATER)
		chain_congestion(backend_peer(b), true);
	return rc;
}

/* The pieces of one line to the child's stdin. */
static int stdio_send_raw(struct backend *b, const struct iovec *iov, int n)
{
	struct be_stdio *s = T(b);
	if (!s || s->in.fd < 0)
		return -1;
	int rc = writer_send_iov(&s->in, iov, n);
	if (writer_queued(&s->in) > WRITER_HIGH_WATER)
		chain_congestion(backend_peer(b), true);
	return rc;
}

/* Closes stdin, then escalates after GRACE. */
static void stdio_stop(struct backend *b, double grace)
{
	struct be_stdio *s = T(b);
	if (!s)
		return;
	s->grace = grace;
	writer_close(&s->in);
	if (s->proc.pid > 0)
		proc_stop(&s->proc, grace);
	else
		report_down(s, "stopped");
}

/* True while the child exists. */
static bool stdio_running(struct backend *b)
{
	struct be_stdio *s = T(b);
	return s && s->proc.pid > 0;
}

/* Passes a signal on to the child's process group. */
static void stdio_signal(struct backend *b, int sig)
{
	struct be_stdio *s = T(b);
	if (s)
		proc_signal(&s->proc, sig);
}

/* Flow control on the child's stdout. */
static void stdio_pause(struct backend *b, bool paused)
{
	struct be_stdio *s = T(b);
	if (!s || !s->out_open)
		return;
	if (paused)
		ev_io_stop(EV_DEFAULT, &s->out_io);
	else
		ev_io_start(EV_DEFAULT, &s->out_io);
}

const struct be_transport_ops be_stdio_ops = {
	.kind = "stdio",
	.start = stdio_start,
	.send = stdio_send,
	.send_raw = stdio_send_raw,
	.stop = stdio_stop,
	.running = stdio_running,
	.pause = stdio_pause,
	.destroy = stdio_destroy,
	.signal = stdio_signal,
};
