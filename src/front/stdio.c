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
	ev_io in_io;
	struct writer out;
	struct session *session;
	bool reading;
	front_closed_fn on_closed;
	void *arg;
};

/* The session's write function: a line on stdout. */
static int write_msg(void *arg, json_t *msg)
{
	struct stdio_front *f = arg;
	int rc = writer_send(&f->out, msg);
	if (writer_queued(&f->out) > WRITER_HIGH_WATER)
		chain_congestion(session_peer(f->session), true);
	return rc;
}

/* The session's raw write function: pieces of one line on stdout. */
static int write_raw(void *arg, const struct iovec *iov, int n)
{
	struct stdio_front *f = arg;
	int rc = writer_send_iov(&f->out, iov, n);
	if (writer_queued(&f->out) > WRITER_HIGH_WATER)
		chain_congestion(session_peer(f->session), true);
	return rc;
}

/* stdout drained: let the backends' output flow again. */
static void on_out_drain(struct writer *w, void *arg)
{
	struct stdio_front *f = arg;
	(void)w;
	chain_congestion(session_peer(f->session), false);
}

/* Flow control: stop or resume reading stdin. */
static void pause_input(void *arg, bool paused)
{
	struct stdio_front *f = arg;
	if (!f->reading)
		return;
	if (paused)
		ev_io_stop(EV_DEFAULT, &f->in_io);
	else
		ev_io_start(EV_DEFAULT, &f->in_io);
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

/* Parses complete lines and hands them to the session. */
static void drain_lines(struct stdio_front *f)
{
	const char *line;
	size_t n, total;
	enum frame_kind k;
	unsigned nth = 0;
	while (f->reading && (k = framer_next(&f->fr, &line, &n, &total)) != FRAME_NONE) {
		if (k == FRAME_OVERSIZE) {
			on_oversize(f, line, n, total);
		} else if (!session_receive_line(f->session, line, n)) {
			json_t *err = NULL;
			json_t *msg = rpc_parse(line, n, &err);
			session_peer(f->session)->rx_bytes = n;
			if (msg)
				session_receive(f->session, msg);
			else
				session_reject(f->session, err);
		}
		writer_cut_through(++nth);
	}
}

/* stdin is readable. */
static void on_stdin(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stdio_front *f = w->data;
	(void)loop;
	(void)revents;
	while (f->reading) {
		size_t avail;
		char *dst = framer_reserve(&f->fr, &avail);
		if (!dst) {
			log_error("client: out of memory reading stdin");
			break;
		}
		ssize_t n = read(0, dst, avail);
		if (n > 0) {
			framer_commit(&f->fr, (size_t)n);
			drain_lines(f);
			if ((size_t)n < avail)
				return;  /* drained; the loop says when more comes (saves a read) */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (framer_pending(&f->fr) > 0) {  /* a last line without "\n" */
			framer_push(&f->fr, "\n", 1);
			drain_lines(f);
		}
		log_info("client: end of input (%s)", n == 0 ? "EOF" : strerror(errno));
		break;
	}
	if (f->reading) {
		stdio_front_stop_reading(f);
		f->on_closed(f, "end of input", f->arg);
	}
}

/* Creates the front and its session. */
struct stdio_front *stdio_front_new(struct chain *chain, size_t max, front_closed_fn on_closed,
				    void *arg)
{
	struct stdio_front *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->on_closed = on_closed;
	f->arg = arg;
	framer_init(&f->fr, max);
	writer_init(&f->out, 1, on_out_error, f);
	f->out.on_drain = on_out_drain;
	f->session = session_new(chain, "client", write_msg, f);
	if (!f->session) {
		free(f);
		return NULL;
	}
	session_set_pause(f->session, pause_input);
	session_set_write_raw(f->session, write_raw);
	int fl = fcntl(0, F_GETFL);
	if (fl >= 0)
		fcntl(0, F_SETFL, fl | O_NONBLOCK);
	ev_io_init(&f->in_io, on_stdin, 0, EV_READ);
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
	f->out.on_drain = NULL;
	f->out.on_error = NULL;
	writer_flush(&f->out);
	session_free(f->session);
	ev_io_stop(EV_DEFAULT, &f->out.io);
	buf_release(&f->out.out);
	framer_release(&f->fr);
	int fl = fcntl(0, F_GETFL);
	if (fl >= 0)
		fcntl(0, F_SETFL, fl & ~O_NONBLOCK);
	free(f);
}
