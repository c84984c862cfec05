/*
 * conn.c - the shell commands' MCP client connection to a chain they
 * spawn: `/proc/self/exe --config FILE` through the core's process
 * spawning (own process group, so a terminal's Ctrl-C reaches only us and
 * we decide what the chain is told), its stdout framed into lines, its
 * stdin fed through a writer, all on the default loop.
 *
 * The chain's stderr is its log: with -v it passes through unchanged;
 * otherwise its last lines are kept and shown when something fails.
 *
 * list_changed notifications in the settle window after `initialized` are
 * noted (conn_settle): a command waits for them on a timer of the loop,
 * never a sleep.
 */
#include "cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mcpc_version.h"
#include "rpc.h"

struct pending {
	struct pending *next;
	json_int_t id;
	conn_reply_fn fn;
	void *arg;
};

struct conn {
	struct proc proc;
	struct writer in;        /* the chain's stdin */
	struct framer out_fr;    /* the chain's stdout, in lines */
	ev_io out_io;
	bool out_open;
	bool exited;
	int status;              /* as from waitpid, once exited */
	bool ready;
	bool finishing;
	int code;
	json_int_t next_id;
	struct pending *pending;
	json_t *init_result;
	struct conn_hooks h;
	ev_io err_io;            /* with -v: the chain's stderr, copied to ours */
	bool err_passed;
	unsigned changed;        /* CONN_* kinds a list_changed named, not cleared */
	bool may_change;         /* the chain declared listChanged for some kind */
	ev_tstamp ready_at;      /* when `initialized` was sent (0: not yet) */
	ev_tstamp last_change;   /* the last list_changed noted, or ready_at */
	ev_timer settle;         /* a conn_settle waiting for quiet */
	conn_settle_fn settle_fn;
	void *settle_arg;
};

static void settle_check(struct conn *c);

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("mcp-chain: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The chain wrote to stderr: copy it to ours as it is. */
static void on_err(struct ev_loop *loop, ev_io *w, int revents)
{
	char buf[4096];
	(void)revents;
	ssize_t n = read(w->fd, buf, sizeof buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		ev_io_stop(loop, w);
		close(w->fd);
		w->fd = -1;
		return;
	}
	for (ssize_t off = 0, k; off < n; off += k)
		if ((k = write(STDERR_FILENO, buf + off, (size_t)(n - off))) <= 0)
			break;
}

void cli_pass_stderr(struct proc *p, ev_io *w)
{
	ev_io_stop(EV_DEFAULT, &p->err_io);
	ev_io_init(w, on_err, p->err_fd, EV_READ);
	p->err_fd = -1;  /* ours now: proc neither reads nor closes it */
	ev_io_start(EV_DEFAULT, w);
}

void cli_pass_stderr_stop(ev_io *w)
{
	ev_io_stop(EV_DEFAULT, w);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

void cli_drain(struct writer *w)
{
	if (w->fd < 0 || w->failed)
		return;
	fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) & ~O_NONBLOCK);
	writer_flush(w);
}

const char *cli_error_message(json_t *error)
{
	const char *m = json_string_value(json_object_get(error, "message"));
	return m ? m : "unknown error";
}

/* Takes the pending entry ID out of the list; NULL when unknown. */
static struct pending *take_pending(struct conn *c, json_int_t id)
{
	for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
		struct pending *p = *pp;
		if (p->id == id) {
			*pp = p->next;
			return p;
		}
	}
	return NULL;
}

/* Answers every pending request with an error (the chain is gone). */
static void fail_pending(struct conn *c, const char *why)
{
	json_t *err = json_pack("{s:i,s:s}", "code", RPC_BACKEND_GONE, "message", why);
	struct pending *p;
	while ((p = c->pending)) {
		c->pending = p->next;
		p->fn(c, NULL, err, p->arg);
		free(p);
	}
	json_decref(err);
}

/*
 * The chain has exited and its stdout is closed (both, so that nothing it
 * wrote before it died is lost): fail what is still open, stop the loop.
 */
static void maybe_done(struct conn *c)
{
	if (!c->exited || c->out_open)
		return;
	if (!c->finishing || c->pending) {
		char why[120], msg[160];
		proc_describe_status(c->status, why, sizeof why);
		snprintf(msg, sizeof msg, "the chain %s", why);
		if (!c->finishing) {  /* it went away on its own */
			c->code = CLI_EXIT_CHAIN;
			cli_error("%s%s", msg, c->ready ? "" : " before it was ready");
		}
		c->finishing = true;
		fail_pending(c, msg);
		if (!c->ready && c->h.on_ready) {
			c->ready = true;  /* on_ready is called once */
			c->h.on_ready(c, false, c->h.arg);
		}
	}
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* A response from the chain. */
static void on_response(struct conn *c, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	struct pending *p = json_is_integer(id) ? take_pending(c, json_integer_value(id)) : NULL;
	if (!p)
		return;  /* forgotten (cancelled) or not ours */
	json_t *err = json_object_get(msg, "error");
	p->fn(c, err ? NULL : json_object_get(msg, "result"), err, p->arg);
	free(p);
}

/* A request from the chain: ping, or whatever the command handles. */
static void on_server_request(struct conn *c, json_t *msg, const char *method)
{
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	json_t *error = NULL, *result = NULL, *reply;
	if (strcmp(method, "ping") == 0)
		result = json_object();
	else if (c->h.on_request)
		result = c->h.on_request(c, method, params, &error, c->h.arg);
	else
		error = json_pack("{s:i,s:s}", "code", RPC_METHOD_NOT_FOUND, "message",
				  "this mcp-chain command does not answer that request");
	if (result)
		reply = rpc_result(id, result);
	else
		reply = rpc_error(id, (int)json_integer_value(json_object_get(error, "code")),
				  cli_error_message(error), NULL);
	json_decref(error);
	writer_send(&c->in, reply);
	json_decref(reply);
}

/* Notes a list_changed METHOD in the settle window. */
static void note_changed(struct conn *c, const char *method)
{
	static const struct { const char *method; unsigned kind; } kinds[] = {
		{ "notifications/tools/list_changed", CONN_TOOLS },
		{ "notifications/prompts/list_changed", CONN_PROMPTS },
		{ "notifications/resources/list_changed", CONN_RESOURCES },
	};
	ev_tstamp now = ev_now(EV_DEFAULT);
	if (c->ready_at > 0 && now >= c->ready_at + CONN_SETTLE_MAX)
		return;   /* past the window: what was listed stands */
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		if (strcmp(method, kinds[i].method) == 0) {
			c->changed |= kinds[i].kind;
			c->last_change = now;
			settle_check(c);
			return;
		}
	}
}

/* The settle timer fired: look again. */
static void on_settle(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	settle_check(w->data);
}

/* Calls the waiting conn_settle callback if it is time, else arms the timer. */
static void settle_check(struct conn *c)
{
	conn_settle_fn fn = c->settle_fn;
	if (!fn || c->finishing)
		return;
	ev_now_update(EV_DEFAULT);
	ev_tstamp now = ev_now(EV_DEFAULT);
	ev_tstamp cap = c->ready_at + CONN_SETTLE_MAX;
	ev_tstamp quiet = c->last_change + CONN_SETTLE_QUIET;
	ev_tstamp due = quiet < cap ? quiet : cap;
	unsigned changed = c->changed;
	ev_timer_stop(EV_DEFAULT, &c->settle);
	if (!changed && c->may_change && now < due) {
		ev_timer_set(&c->settle, due - now, 0.);
		ev_timer_start(EV_DEFAULT, &c->settle);
		return;
	}
	c->settle_fn = NULL;
	c->changed = 0;
	fn(c, changed, c->settle_arg);
}

/* True when the initialize result CAPS declares listChanged for a list. */
static bool declares_list_changed(json_t *caps)
{
	static const char *const kinds[] = { "tools", "prompts", "resources" };
	for (size_t i = 0; i < 3; i++)
		if (json_is_true(json_object_get(json_object_get(caps, kinds[i]), "listChanged")))
			return true;
	return false;
}

/* One line from the chain's stdout. */
static void on_line(struct conn *c, const char *line, size_t len)
{
	json_t *perr = NULL;
	json_t *msg = rpc_parse(line, len, &perr);
	struct rpc_info info;
	json_decref(perr);
	if (!msg) {
		log_warn("chain: a line that is not JSON on its stdout: %.*s", (int)(len > 200 ? 200 : len), line);
		return;
	}
	switch (rpc_classify(msg, &info)) {
	case RPC_RESPONSE:
		on_response(c, msg);
		break;
	case RPC_REQUEST:
		on_server_request(c, msg, info.method);
		break;
	case RPC_NOTIFICATION:
		note_changed(c, info.method);
		if (c->h.on_notify)
			c->h.on_notify(c, info.method, json_object_get(msg, "params"), c->h.arg);
		break;
	default:
		break;
	}
	json_decref(msg);
}

/* Closes our end of the chain's stdout. */
static void close_out(struct conn *c)
{
	if (!c->out_open)
		return;
	ev_io_stop(EV_DEFAULT, &c->out_io);
	close(c->proc.out_fd);
	c->proc.out_fd = -1;
	c->out_open = false;
	maybe_done(c);
}

/* The chain's stdout is readable. */
static void on_out(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	(void)loop;
	(void)revents;
	for (;;) {
		size_t len, total;
		const char *line;
		ssize_t n = framer_read(&c->out_fr, c->proc.out_fd, NULL);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_out(c);
			return;
		}
		enum frame_kind k;
		while ((k = framer_next(&c->out_fr, &line, &len, &total)) != FRAME_NONE)
			if (k == FRAME_LINE)
				on_line(c, line, len);
	}
}

/* The chain exited. */
static void on_exit_cb(struct proc *p, int status, void *arg)
{
	struct conn *c = arg;
	(void)p;
	c->exited = true;
	c->status = status;
	writer_release(&c->in);
	maybe_done(c);
}

/* Writing to the chain failed (it went away). */
static void on_in_error(struct writer *w, int err, void *arg)
{
	(void)w;
	(void)err;
	(void)arg;  /* the exit watcher reports it */
}

/* The chain answered initialize. */
static void on_initialized(struct conn *c, json_t *result, json_t *error, void *arg)
{
	(void)arg;
	if (c->ready)
		return;
	c->ready = true;
	if (error) {
		cli_error("the chain did not initialize: %s", cli_error_message(error));
		c->h.on_ready(c, false, c->h.arg);
		conn_finish(c, CLI_EXIT_CHAIN);  /* the command shows the chain's log */
		return;
	}
	c->init_result = json_incref(result);
	c->may_change = declares_list_changed(json_object_get(result, "capabilities"));
	ev_now_update(EV_DEFAULT);
	c->ready_at = c->last_change = ev_now(EV_DEFAULT);
	conn_notify(c, "notifications/initialized", NULL);
	c->h.on_ready(c, true, c->h.arg);
}

/* Sends initialize with what this command really supports. */
static void send_initialize(struct conn *c, bool interactive)
{
	json_t *caps = json_object();
	if (interactive) {
		json_object_set_new(caps, "elicitation", json_object());
		json_object_set_new(caps, "sampling", json_object());
	}
	json_t *params = json_pack("{s:s,s:o,s:{s:s,s:s}}", "protocolVersion", "2025-06-18",
				   "capabilities", caps, "clientInfo", "name", "mcp-chain-cli",
				   "version", MCPC_VERSION);
	conn_request(c, "initialize", params, on_initialized, NULL);
}

struct conn *conn_start(const struct cli_opts *o, bool interactive, const struct conn_hooks *h)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->h = *h;
	c->next_id = 1;
	ev_timer_init(&c->settle, on_settle, 0., 0.);
	c->settle.data = c;
	char *argv[] = { "/proc/self/exe", "--config", (char *)o->config, NULL };
	if (proc_spawn(&c->proc, "chain", argv, NULL, NULL, on_exit_cb, c) < 0) {
		cli_error("cannot start the chain: %s", c->proc.error);
		free(c);
		return NULL;
	}
	if (o->verbose) {
		cli_pass_stderr(&c->proc, &c->err_io);
		c->err_passed = true;
	}
	writer_init(&c->in, c->proc.in_fd, on_in_error, c);
	c->proc.in_fd = -1;  /* the writer owns it now */
	framer_init(&c->out_fr, (size_t)1 << 30);
	ev_io_init(&c->out_io, on_out, c->proc.out_fd, EV_READ);
	c->out_io.data = c;
	ev_io_start(EV_DEFAULT, &c->out_io);
	c->out_open = true;
	send_initialize(c, interactive);
	return c;
}

json_int_t conn_request(struct conn *c, const char *method, json_t *params,
			conn_reply_fn fn, void *arg)
{
	struct pending *p = calloc(1, sizeof *p);
	if (!p || c->exited) {
		free(p);
		json_decref(params);
		return -1;
	}
	p->id = c->next_id++;
	p->fn = fn;
	p->arg = arg;
	p->next = c->pending;
	c->pending = p;
	json_t *msg = rpc_request(p->id, method, params);
	writer_send(&c->in, msg);
	json_decref(msg);
	return p->id;
}

void conn_notify(struct conn *c, const char *method, json_t *params)
{
	json_t *msg = rpc_notification(method, params);
	if (!c->exited)
		writer_send(&c->in, msg);
	json_decref(msg);
}

void conn_forget(struct conn *c, json_int_t id)
{
	free(take_pending(c, id));
}

void conn_finish(struct conn *c, int code)
{
	if (c->finishing)
		return;
	c->finishing = true;
	c->code = code;
	ev_timer_stop(EV_DEFAULT, &c->settle);
	c->settle_fn = NULL;
	if (c->exited) {
		maybe_done(c);
		return;
	}
	writer_close(&c->in);  /* end of input: the chain shuts down */
	proc_stop(&c->proc, 5.0);
}

bool conn_finishing(const struct conn *c)
{
	return c->finishing;
}

void conn_show_tail(struct conn *c)
{
	if (log_get_level() < LOG_INFO)  /* else it passed through already */
		proc_log_tail(&c->proc);
}

int conn_exit_code(const struct conn *c)
{
	return c->code;
}

json_t *conn_server_info(struct conn *c)
{
	return c->init_result;
}

void conn_free(struct conn *c)
{
	if (!c)
		return;
	c->finishing = true;
	fail_pending(c, "mcp-chain is exiting");
	ev_timer_stop(EV_DEFAULT, &c->settle);
	ev_io_stop(EV_DEFAULT, &c->out_io);
	if (c->err_passed)
		cli_pass_stderr_stop(&c->err_io);
	writer_release(&c->in);
	framer_release(&c->out_fr);
	proc_release(&c->proc);
	json_decref(c->init_result);
	free(c);
}

void conn_settle(struct conn *c, conn_settle_fn fn, void *arg)
{
	c->settle_fn = fn;
	c->settle_arg = arg;
	settle_check(c);
}

void conn_changed_clear(struct conn *c, unsigned kinds)
{
	c->changed &= ~kinds;
}

/* ---- listing every page ---- */

struct lister {
	const char *method, *key;
	json_t *items;
	conn_reply_fn fn;
	void *arg;
};

static void on_page(struct conn *c, json_t *result, json_t *error, void *arg);

/* Asks for the page at CURSOR (NULL: the first); on failure ends the listing. */
static void ask_page(struct conn *c, struct lister *l, json_t *cursor)
{
	json_t *params = cursor ? json_pack("{s:O}", "cursor", cursor) : NULL;
	if (conn_request(c, l->method, params, on_page, l) >= 0)
		return;
	json_t *err = json_pack("{s:i,s:s}", "code", RPC_BACKEND_GONE, "message", "the chain is gone");
	l->fn(c, NULL, err, l->arg);
	json_decref(err);
	json_decref(l->items);
	free(l);
}

/* One page arrived: keep its items, ask for the next. */
static void on_page(struct conn *c, json_t *result, json_t *error, void *arg)
{
	struct lister *l = arg;
	json_t *next = json_object_get(result, "nextCursor");
	if (!error)
		json_array_extend(l->items, json_object_get(result, l->key));
	if (!error && json_is_string(next)) {
		ask_page(c, l, next);
		return;
	}
	l->fn(c, error ? NULL : l->items, error, l->arg);
	json_decref(l->items);
	free(l);
}

void conn_list_all(struct conn *c, const char *list_method, const char *result_key,
		   conn_reply_fn fn, void *arg)
{
	struct lister *l = malloc(sizeof *l);
	if (!l)
		return;
	*l = (struct lister){ list_method, result_key, json_array(), fn, arg };
	ask_page(c, l, NULL);
}
