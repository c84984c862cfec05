/*
 * backend.c - ExternalMCPServer over a child process's stdio.
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain.h"
#include "framer.h"
#include "log.h"
#include "proc.h"
#include "rpc.h"
#include "writer.h"

#define EOF_WAIT 1.0  /* seconds to wait for the exit status after EOF */

struct init_waiter {
	void (*cb)(void *arg, json_t *response);
	void *arg;
	struct init_waiter *next;
};

struct backend {
	struct peer peer;
	const struct cfg_server *cfg;
	double init_timeout;
	ev_timer init_timer;
	enum backend_state state;
	struct proc proc;
	struct writer in;         /* to the child's stdin */
	struct framer out_fr;     /* from the child's stdout */
	ev_io out_io;
	ev_timer eof_timer;
	bool out_open;
	bool reaped;
	int status;
	json_t *init_result;      /* owned: the backend's initialize result */
	struct init_waiter *waiters;
	backend_gone_fn on_gone;
	void *gone_arg;
};

static void on_stdout(struct ev_loop *loop, ev_io *w, int revents);
static void on_eof_timer(struct ev_loop *loop, ev_timer *w, int revents);
static void on_init_timeout(struct ev_loop *loop, ev_timer *w, int revents);

/* The peer's send operation: one line to the child's stdin. */
static int peer_send(struct peer *p, json_t *msg, struct exchange *ex)
{
	struct backend *b = (struct backend *)p;
	(void)ex;
	if (b->state == BACKEND_STOPPED || b->in.fd < 0)
		return -1;
	int rc = writer_send(&b->in, msg);
	if (writer_queued(&b->in) > WRITER_HIGH_WATER)
		chain_congestion(p, true);
	return rc;
}

/* The child's stdin drained: let the client's input flow again. */
static void on_in_drain(struct writer *w, void *arg)
{
	struct backend *b = arg;
	(void)w;
	chain_congestion(&b->peer, false);
}

/* Flow control: stop or resume reading the child's stdout. */
static void peer_pause(struct peer *p, bool paused)
{
	struct backend *b = (struct backend *)p;
	if (!b->out_open)
		return;
	if (paused)
		ev_io_stop(EV_DEFAULT, &b->out_io);
	else
		ev_io_start(EV_DEFAULT, &b->out_io);
}

/* Calls every waiter with the handshake's outcome. */
static void wake_waiters(struct backend *b, json_t *resp)
{
	struct init_waiter *w = b->waiters;
	b->waiters = NULL;
	while (w) {
		struct init_waiter *next = w->next;
		w->cb(w->arg, resp);
		free(w);
		w = next;
	}
}

/* The backend answered our initialize. */
static void on_init_response(struct exchange *ex, json_t *msg, void *arg)
{
	struct backend *b = arg;
	json_t *result = json_object_get(msg, "result");
	(void)ex;
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	/* a late answer (after the timeout) still makes the backend usable */
	if (result && (b->state == BACKEND_INITIALIZING || b->state == BACKEND_STARTED)) {
		json_decref(b->init_result);
		b->init_result = json_incref(result);
		b->state = BACKEND_READY;
		b->peer.ready = true;
		const char *v = json_string_value(json_object_get(result, "protocolVersion"));
		json_t *si = json_object_get(result, "serverInfo");
		log_info("%s: initialized: %s %s, protocol %s", b->peer.name,
			 json_string_value(json_object_get(si, "name")) ?: "?",
			 json_string_value(json_object_get(si, "version")) ?: "?",
			 v ? v : "?");
	} else if (b->state == BACKEND_INITIALIZING) {
		b->state = BACKEND_STARTED;
		log_warn("%s: initialize failed", b->peer.name);
	}
	wake_waiters(b, msg);
}

/* The backend did not answer initialize in time: fail the waiting clients. */
static void on_init_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct backend *b = w->data;
	(void)loop;
	(void)revents;
	if (b->state != BACKEND_INITIALIZING)
		return;
	b->state = BACKEND_STARTED;
	snprintf(b->peer.why_down, sizeof b->peer.why_down,
		 "did not answer initialize within %g s", b->init_timeout);
	log_error("%s: %s", b->peer.name, b->peer.why_down);
	json_t *err = rpc_errorf(json_null(), RPC_BACKEND_GONE, "backend %s %s",
				 b->peer.name, b->peer.why_down);
	wake_waiters(b, err);
	json_decref(err);
}

/* The peer's initialize operation. */
static int peer_initialize(struct peer *p, json_t *params,
			   void (*cb)(void *arg, json_t *response), void *arg)
{
	struct backend *b = (struct backend *)p;
	if (b->state == BACKEND_READY && b->init_result) {
		json_t *r = rpc_result(json_null(), json_incref(b->init_result));
		cb(arg, r);
		json_decref(r);
		return 0;
	}
	if (b->state != BACKEND_STARTED && b->state != BACKEND_INITIALIZING)
		return -1;
	struct init_waiter *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	w->cb = cb;
	w->arg = arg;
	w->next = b->waiters;
	b->waiters = w;
	if (b->state == BACKEND_INITIALIZING)
		return 0;
	b->state = BACKEND_INITIALIZING;
	ev_timer_set(&b->init_timer, b->init_timeout, 0.);
	ev_timer_start(EV_DEFAULT, &b->init_timer);
	if (chain_call(p, "initialize", json_deep_copy(params), on_init_response, b) < 0) {
		b->waiters = w->next;
		free(w);
		b->state = BACKEND_STARTED;
		return -1;
	}
	return 0;
}

static const struct peer_ops backend_ops = {
	.send = peer_send,
	.initialize = peer_initialize,
	.pause = peer_pause,
};

/* New backend. */
struct backend *backend_new(const struct cfg *top, const struct cfg_server *cfg,
			    backend_gone_fn on_gone, void *arg)
{
	struct backend *b = calloc(1, sizeof *b);
	size_t max = top->max_message;
	if (!b)
		return NULL;
	b->cfg = cfg;
	b->init_timeout = top->init_timeout;
	ev_init(&b->init_timer, on_init_timeout);
	b->init_timer.data = b;
	b->on_gone = on_gone;
	b->gone_arg = arg;
	peer_init(&b->peer, &backend_ops, PEER_BACKEND, cfg->name);
	framer_init(&b->out_fr, max);
	b->in.fd = -1;
	b->proc.in_fd = b->proc.out_fd = b->proc.err_fd = -1;
	ev_init(&b->eof_timer, on_eof_timer);
	b->eof_timer.data = b;
	chain_add_peer(&b->peer);
	return b;
}

/* Answers the request an oversized line was for, if its id can be found. */
static void on_oversize(struct backend *b, const char *head, size_t n, size_t total)
{
	json_t *id = rpc_scan_id(head, n);
	log_warn("%s: dropped a %zu-byte message: larger than maxMessageBytes (%zu)",
		 b->peer.name, total, b->out_fr.max);
	if (!id)
		return;
	json_t *err = rpc_errorf(id, RPC_INTERNAL_ERROR,
		"the backend's response (%zu bytes) exceeds maxMessageBytes (%zu)",
		total, b->out_fr.max);
	json_decref(id);
	if (strstr(head, "\"method\"") == NULL)  /* it was a response */
		chain_receive(&b->peer, err);
	else
		json_decref(err);
}

/* Parses one stdout line and hands it to the chain. */
static void on_line(struct backend *b, const char *line, size_t n)
{
	json_error_t e;
	json_t *msg = json_loadb(line, n, JSON_ALLOW_NUL, &e);
	b->peer.rx_bytes = n;
	if (!msg || !(json_is_object(msg) || json_is_array(msg))) {
		log_warn("%s: skipped a line on stdout that is not a JSON-RPC message: %.*s%s",
			 b->peer.name, (int)(n > 200 ? 200 : n), line, n > 200 ? "..." : "");
		json_decref(msg);
		return;
	}
	if (json_is_object(msg)) {
		chain_receive(&b->peer, msg);
		return;
	}
	size_t i;
	json_t *m;
	json_array_foreach(msg, i, m)
		chain_receive(&b->peer, json_incref(m));
	json_decref(msg);
}

/* Takes complete lines out of the stdout framer. */
static void drain_lines(struct backend *b)
{
	const char *line;
	size_t n, total;
	enum frame_kind k;
	while ((k = framer_next(&b->out_fr, &line, &n, &total)) != FRAME_NONE) {
		if (k == FRAME_LINE)
			on_line(b, line, n);
		else
			on_oversize(b, line, n, total);
	}
}

/* Reads stdout until it would block; returns false at EOF or error. */
static bool read_stdout(struct backend *b)
{
	for (;;) {
		size_t avail;
		char *dst = framer_reserve(&b->out_fr, &avail);
		if (!dst)
			return false;
		ssize_t n = read(b->proc.out_fd, dst, avail);
		if (n > 0) {
			framer_commit(&b->out_fr, (size_t)n);
			drain_lines(b);
			if (!b->out_open)
				return false;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (framer_pending(&b->out_fr) > 0) {
			framer_push(&b->out_fr, "\n", 1);
			drain_lines(b);
		}
		return false;
	}
}

/* Ends everything open at the backend with REASON; reports it gone. */
static void finish(struct backend *b, const char *reason)
{
	bool expected = b->state == BACKEND_STOPPING;
	ev_timer_stop(EV_DEFAULT, &b->eof_timer);
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	snprintf(b->peer.why_down, sizeof b->peer.why_down, "%s", reason);
	b->state = BACKEND_STOPPED;
	b->peer.ready = false;
	json_t *err = rpc_errorf(json_null(), RPC_BACKEND_GONE, "%s: %s", b->peer.name, reason);
	wake_waiters(b, err);
	json_decref(err);
	chain_peer_gone(&b->peer, reason);
	if (!expected) {
		log_error("%s: %s", b->peer.name, reason);
		proc_log_tail(&b->proc);
	} else {
		log_info("%s: %s", b->peer.name, reason);
	}
	if (b->on_gone)
		b->on_gone(b, b->gone_arg);
}

/* Stops reading stdout. */
static void close_stdout(struct backend *b)
{
	ev_io_stop(EV_DEFAULT, &b->out_io);
	if (b->proc.out_fd >= 0)
		close(b->proc.out_fd);
	b->proc.out_fd = -1;
	b->out_open = false;
}

/* stdout is readable. */
static void on_stdout(struct ev_loop *loop, ev_io *w, int revents)
{
	struct backend *b = w->data;
	(void)revents;
	if (read_stdout(b))
		return;
	close_stdout(b);
	if (b->reaped || b->state == BACKEND_STOPPED)
		return;
	/* usually the exit status follows at once; name it if it does */
	ev_timer_set(&b->eof_timer, EOF_WAIT, 0.);
	ev_timer_start(loop, &b->eof_timer);
}

/* stdout closed long ago and the process still runs. */
static void on_eof_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct backend *b = w->data;
	(void)loop;
	(void)revents;
	writer_close(&b->in);
	proc_stop(&b->proc, b->proc.grace > 0 ? b->proc.grace : 2.0);
	if (b->state != BACKEND_STOPPED)
		finish(b, "closed its stdout");
}

/* The child was reaped. */
static void on_proc_exit(struct proc *p, int status, void *arg)
{
	struct backend *b = arg;
	char what[128];
	(void)p;
	b->reaped = true;
	b->status = status;
	if (b->out_open) {
		read_stdout(b);  /* last words; a grandchild may keep it open */
		close_stdout(b);
	}
	writer_release(&b->in);
	proc_describe_status(status, what, sizeof what);
	if (b->state != BACKEND_STOPPED)
		finish(b, what);
}

/* Child stdin failed (EPIPE): the exit handler reports the rest. */
static void on_in_error(struct writer *w, int err, void *arg)
{
	struct backend *b = arg;
	(void)w;
	log_debug("%s: writing to its stdin failed: %s", b->peer.name, strerror(err));
}

/* Spawns the process. */
int backend_start(struct backend *b)
{
	const struct cfg_server *c = b->cfg;
	if (proc_spawn(&b->proc, b->peer.name, c->argv, c->env, c->cwd, on_proc_exit, b) < 0) {
		snprintf(b->peer.why_down, sizeof b->peer.why_down, "%s", b->proc.error);
		return -1;
	}
	writer_init(&b->in, b->proc.in_fd, on_in_error, b);
	b->in.on_drain = on_in_drain;
	b->proc.in_fd = -1;  /* the writer owns it now */
	ev_io_init(&b->out_io, on_stdout, b->proc.out_fd, EV_READ);
	b->out_io.data = b;
	ev_io_start(EV_DEFAULT, &b->out_io);
	b->out_open = true;
	b->reaped = false;
	b->state = BACKEND_STARTED;
	return 0;
}

/* Begins a graceful stop. */
void backend_stop(struct backend *b, double grace)
{
	if (b->state == BACKEND_STOPPED)
		return;
	b->state = BACKEND_STOPPING;
	b->peer.ready = false;
	writer_close(&b->in);
	b->proc.grace = grace;
	proc_stop(&b->proc, grace);
}

/* True while the child exists. */
bool backend_running(const struct backend *b)
{
	return b->proc.pid > 0;
}

/* State. */
enum backend_state backend_state(const struct backend *b) { return b->state; }

/* The backend as a chain peer. */
struct peer *backend_peer(struct backend *b) { return &b->peer; }

/* Frees a stopped backend. */
void backend_free(struct backend *b)
{
	if (!b)
		return;
	if (b->state != BACKEND_STOPPED)
		chain_peer_gone(&b->peer, "shutting down");
	proc_signal_group(&b->proc, SIGKILL);
	ev_timer_stop(EV_DEFAULT, &b->eof_timer);
	ev_timer_stop(EV_DEFAULT, &b->init_timer);
	close_stdout(b);
	writer_release(&b->in);
	proc_release(&b->proc);
	framer_release(&b->out_fr);
	json_decref(b->init_result);
	chain_remove_peer(&b->peer);
	peer_release(&b->peer);
	free(b);
}
