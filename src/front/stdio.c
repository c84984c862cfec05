/*
 * stdio.c - the stdio transport of the front: stdin lines in, stdout
 * lines out, for one session.
 */
#include "front.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain.h"
#include "framer.h"
#include "log.h"
#include "rpc.h"
#include "session.h"
#include "writer.h"

struct stdio_front {
	struct framer fr;
	int in_fd;
	ev_io in_io;
	struct writer out;
	struct session *session;
	bool reading;
	bool eof;             /* input ended; lines may still wait in the framer */
	bool paused;          /* the chain paused the client's input */
	bool out_full;        /* stdout's queue is above WRITER_HIGH_WATER */
	bool stalled;         /* the client stopped reading: output is dropped */
	double stall_after;   /* seconds without progress while full; 0: never */
	ev_timer stall_timer; /* runs while out_full, every stall_after */
	size_t stall_mark;    /* bytes queued at the last tick */
	front_closed_fn on_closed;
	void *arg;
};

/* True when the client's input may be read and handed on now. */
static bool input_wanted(const struct stdio_front *f)
{
	return f->reading && !f->paused && !f->out_full;
}

/* Starts or stops the stdin watcher to match input_wanted(). */
static void input_update(struct stdio_front *f)
{
	bool want = input_wanted(f) && !f->eof;
	if (want && !ev_is_active(&f->in_io))
		ev_io_start(EV_DEFAULT, &f->in_io);
	else if (!want && ev_is_active(&f->in_io))
		ev_io_stop(EV_DEFAULT, &f->in_io);
}

/*
 * Input may flow again: the lines already framed (and an end of input
 * already read) are handled from the loop, in on_stdin, as if stdin had
 * become readable; never from here, which may be deep in a write.
 */
static void input_resume(struct stdio_front *f)
{
	input_update(f);
	if (input_wanted(f))
		ev_feed_event(EV_DEFAULT, &f->in_io, EV_READ);
}

/* Starts the stall watch (stdout just went above the high-water mark). */
static void stall_watch_start(struct stdio_front *f)
{
	if (f->stall_after <= 0)
		return;
	f->stall_mark = writer_queued(&f->out);
	f->stall_timer.repeat = f->stall_after;
	ev_timer_again(EV_DEFAULT, &f->stall_timer);
}

/*
 * After a write: above the high-water mark, stop reading the client (the
 * replies mcp-chain makes itself, to parse errors for one, would grow the
 * queue without bound), pause the backends' output, and start watching for
 * a client that has stopped reading for good.
 */
static void check_full(struct stdio_front *f)
{
	if (f->out_full || writer_queued(&f->out) <= WRITER_HIGH_WATER)
		return;
	f->out_full = true;
	input_update(f);
	chain_congestion(session_peer(f->session), true);
	stall_watch_start(f);
}

/* The session's write function: a line on stdout, from the message's
 * pieces or its tree (stdio has one stream: what it is about is moot). */
static int write_out(void *arg, const struct session_out *o)
{
	struct stdio_front *f = arg;
	if (f->stalled)
		return 0;  /* nobody reads it: dropped, as if written to a closed pipe */
	int rc = o->iov ? writer_send_iov(&f->out, o->iov, o->n) : writer_send(&f->out, o->tree);
	check_full(f);
	return rc;
}

/*
 * The client read nothing for stall_after seconds with stdout full: end
 * the session as at the end of input. What is queued is dropped (nobody
 * reads it, and the exit would otherwise wait for it), the requests still
 * open are cancelled at the backends with the reason, and the owner is told.
 */
static void on_stall(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct stdio_front *f = w->data;
	(void)revents;
	size_t queued = writer_queued(&f->out);
	if (queued < f->stall_mark) {  /* it read something: wait again */
		f->stall_mark = queued;
		return;
	}
	ev_timer_stop(loop, w);
	log_warn("client: stopped reading for %.0f s (%zu bytes waiting for stdout); "
		 "closing the session", f->stall_after, queued);
	f->stalled = true;
	writer_abandon(&f->out);   /* no more writes; the queue goes */
	stdio_front_stop_reading(f);
	session_close(f->session, "client stopped reading");
	f->on_closed(f, "client stopped reading", f->arg);
}

/* stdout drained: let the client's input and the backends' output flow again. */
static void on_out_drain(struct writer *w, void *arg)
{
	struct stdio_front *f = arg;
	(void)w;
	chain_congestion(session_peer(f->session), false);
	if (f->out_full) {
		f->out_full = false;
		ev_timer_stop(EV_DEFAULT, &f->stall_timer);
		input_resume(f);
	}
}

/* Flow control from the chain: stop or resume reading stdin. */
static void pause_input(void *arg, bool paused)
{
	struct stdio_front *f = arg;
	if (f->paused == paused)
		return;
	f->paused = paused;
	if (paused)
		input_update(f);
	else
		input_resume(f);
}

/* stdout broke: the client is gone. */
static void on_out_error(struct writer *w, int err, void *arg)
{
	struct stdio_front *f = arg;
	(void)w;
	log_info("client: stdout closed (%s)", strerror(err));
	stdio_front_stop_reading(f);
	f->on_closed(f, "stdout closed", f->arg);
}

/* Answers a line longer than the limit, addressed to its id if found. */
static void on_oversize(struct stdio_front *f, const char *head, size_t n, size_t total)
{
	json_t *id = rpc_scan_id(head, n);
	log_warn("client: rejected a %zu-byte message (maxMessageBytes is %zu)", total, f->fr.max);
	json_t *data = json_pack("{s:I,s:I}", "size", (json_int_t)total,
				 "maxMessageBytes", (json_int_t)f->fr.max);
	session_reject(f->session, rpc_error(id, RPC_INVALID_REQUEST,
		"message too large: it exceeds maxMessageBytes", data));
	json_decref(id);
}

/*
 * Parses complete lines and hands them to the session while input is
 * wanted. Returns true when no complete line is left, false when it
 * stopped for flow control (input_resume brings it back).
 */
static bool drain_lines(struct stdio_front *f)
{
	const char *line;
	size_t n, total;
	enum frame_kind k;
	for (;;) {
		if (!input_wanted(f))
			return false;
		if ((k = framer_next(&f->fr, &line, &n, &total)) == FRAME_NONE)
			return true;
		if (k == FRAME_OVERSIZE) {
			on_oversize(f, line, n, total);
		} else {
			session_receive_line(f->session, line, n);  /* one message, a batch, or -32700 */
		}
	}
}

/* The input ended and every line of it was handed on: tell the owner. */
static void end_of_input(struct stdio_front *f)
{
	if (!f->reading)
		return;
	stdio_front_stop_reading(f);
	f->on_closed(f, "end of input", f->arg);
}

/*
 * stdin is readable (or input may flow again, fed by input_resume):
 * first the lines already framed, then reads until the fd is empty or
 * flow control stops it.
 */
static void on_stdin(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stdio_front *f = w->data;
	(void)loop;
	(void)revents;
	if (!drain_lines(f))
		return;
	if (f->eof) {
		end_of_input(f);
		return;
	}
	for (;;) {
		if (!input_wanted(f))
			return;  /* flow control: input_resume calls again */
		bool full;
		ssize_t n = framer_read(&f->fr, f->in_fd, &full);
		if (n > 0) {
			if (!drain_lines(f) || !full)
				return;  /* drained; the loop says when more comes (saves a read) */
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 && errno == ENOMEM) {
			log_error("client: out of memory reading stdin");
			break;
		}
		log_info("client: end of input (%s)", n == 0 ? "EOF" : strerror(errno));
		if (n < 0 && framer_pending(&f->fr) > 0)  /* a last line without "\n" */
			framer_push(&f->fr, "\n", 1);   /* (framer_read did so at EOF) */
		f->eof = true;
		input_update(f);
		if (!drain_lines(f))
			return;  /* the rest once stdout drains; then the end */
		break;
	}
	end_of_input(f);
}

/* Creates the front and its session on stdin and stdout. */
struct stdio_front *stdio_front_new(struct chain *chain, size_t max, front_closed_fn on_closed,
				    void *arg)
{
	return stdio_front_new_fds(chain, 0, 1, max, on_closed, arg);
}

/* Creates the front and its session on IN_FD and OUT_FD. */
struct stdio_front *stdio_front_new_fds(struct chain *chain, int in_fd, int out_fd, size_t max,
					front_closed_fn on_closed, void *arg)
{
	struct stdio_front *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->on_closed = on_closed;
	f->arg = arg;
	f->in_fd = in_fd;
	framer_init(&f->fr, max);
	writer_init(&f->out, out_fd, on_out_error, f);
	f->out.on_drain = on_out_drain;
	f->session = session_new(chain, "client", write_out, f);
	if (!f->session) {
		free(f);
		return NULL;
	}
	session_set_pause(f->session, pause_input);
	session_set_trace_tags(f->session, "pipe", NULL);
	int fl = fcntl(in_fd, F_GETFL);
	if (fl >= 0)
		fcntl(in_fd, F_SETFL, fl | O_NONBLOCK);
	ev_init(&f->stall_timer, on_stall);
	f->stall_timer.data = f;
	ev_io_init(&f->in_io, on_stdin, in_fd, EV_READ);
	f->in_io.data = f;
	ev_io_start(EV_DEFAULT, &f->in_io);
	f->reading = true;
	return f;
}

/* Stops reading stdin. */
void stdio_front_stop_reading(struct stdio_front *f)
{
	if (!f->reading)
		return;
	f->reading = false;
	ev_io_stop(EV_DEFAULT, &f->in_io);
	ev_clear_pending(EV_DEFAULT, &f->in_io);
}

/* Seconds without progress on a full stdout before the session ends; 0: never. */
void stdio_front_set_stall(struct stdio_front *f, double seconds)
{
	f->stall_after = seconds;
	if (seconds <= 0)
		ev_timer_stop(EV_DEFAULT, &f->stall_timer);
	else if (ev_is_active(&f->stall_timer))
		f->stall_timer.repeat = seconds;  /* from the next tick */
	else if (f->out_full && !f->stalled)
		stall_watch_start(f);
}

/* The session. */
struct session *stdio_front_session(struct stdio_front *f)
{
	return f->session;
}

/* Bytes waiting for stdout. */
size_t stdio_front_queued(const struct stdio_front *f)
{
	return writer_queued(&f->out);
}

/* Frees everything; blocks briefly on stdout only to hand over what is queued. */
void stdio_front_free(struct stdio_front *f)
{
	if (!f)
		return;
	stdio_front_stop_reading(f);
	ev_timer_stop(EV_DEFAULT, &f->stall_timer);
	f->out.on_drain = NULL;
	f->out.on_error = NULL;
	session_free(f->session);   /* what it still answers (a pending initialize) */
	f->session = NULL;
	writer_flush(&f->out);      /* ... leaves with the rest */
	writer_detach(&f->out);     /* off the flush list: F is going */
	framer_release(&f->fr);
	int fl = fcntl(f->in_fd, F_GETFL);
	if (fl >= 0)
		fcntl(f->in_fd, F_SETFL, fl & ~O_NONBLOCK);
	free(f);
}
