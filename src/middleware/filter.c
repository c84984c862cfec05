/*
 * filter.c - the "filter" middleware module: policy written in any
 * language, as a program that mcp-chain starts once and keeps running.
 *
 * Each message the filter wants (by method, sender and kind) becomes one
 * JSON line on the program's stdin:
 *   {"id":N,"direction":"toBackend","kind":"request",
 *    "context":{"method":..,"client":..,"backend":..,"name":..},
 *    "message":{...}}
 * and the walk is held (MW_ASYNC) until the line that answers it:
 *   {"id":N,"action":"pass"}                  unchanged
 *   {"id":N,"action":"pass","message":{...}}  changed (id and method kept)
 *   {"id":N,"action":"reply","result":{...}}  or "error":{code,message}
 *   {"id":N,"action":"drop","reason":"..."}
 * Answers may come in any order. Writes are non-blocking and buffered; the
 * program is spawned with proc_spawn (argv, never a shell) and its stderr
 * is logged.
 *
 * Failure: a program that exits, closes its stdout, or misses the
 * per-message deadline (it is then considered hung and stopped) leaves
 * its pending messages -- and every message until it is restarted -- to
 * the failure mode: "closed" refuses requests and drops notifications,
 * "open" lets them pass. Each such decision is logged with the reason. The
 * program is started again after restartDelayMs, backing off to 30 s.
 *
 * Lifetime: resuming a walk may end the last exchange holding this
 * module's pipeline; callbacks mark the module busy so that a destroy
 * inside one is finished when it returns.
 */
#include "mw_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "framer.h"
#include "glob_match.h"
#include "hmap.h"
#include "log.h"
#include "proc.h"
#include "rpc.h"

#define LINE_MAX_BYTES ((size_t)64 << 20)  /* longest answer, and most queued to it */
#define BACKOFF_MAX 30.0                   /* seconds the backoff grows to */
#define STOP_GRACE 1.0                     /* seconds from SIGTERM to SIGKILL */

enum fstate { F_DOWN, F_UP, F_STOPPING };
enum { FROM_CLIENT = 1, FROM_BACKEND = 2 };

struct filter {
	struct mw_module base;   /* must be first */
	char **argv;             /* owned, NULL-terminated, after ${VAR} expansion */
	size_t nargv;            /* its slots (one may be NULL after an error) */
	char **env;              /* owned "KEY=VALUE" list, or NULL */
	char *cwd;               /* owned, or NULL */
	char *name;              /* owned: "filter NAME", for logs */
	double timeout;          /* seconds per message */
	double restart_delay;    /* seconds */
	double backoff;          /* the next restart's delay */
	bool fail_open;
	bool responses;
	unsigned from;           /* FROM_* bits */
	bool has_methods;
	struct glob_list methods;
	/* running */
	enum fstate state;
	bool spawned;            /* proc needs proc_release */
	bool killed;             /* stopped by us as hung: its exit is expected */
	double up_since;
	struct proc proc;
	ev_io rd, wr;
	struct framer in;
	struct buf out;
	ev_timer restart;
	uint64_t next_id;
	struct hmap pending;     /* id -> pend */
	char why_down[200];
	int busy;                /* depth of our callbacks on the stack */
	bool dead;               /* destroyed while busy */
};

/* A message waiting for the filter's answer. */
struct pend {
	struct filter *f;
	uint64_t id;
	struct mw_walk *walk;
	json_t *msg;             /* owned until resumed */
	enum rpc_kind kind;
	const char *method;      /* the chain's, valid while the walk is held */
	ev_timer timer;
};

static void filter_free(struct filter *f);
static void on_pend_timeout(struct ev_loop *loop, ev_timer *w, int revents);

/* ---- callbacks' guard ---- */

/* Marks F in use by a callback. */
static void enter(struct filter *f)
{
	f->busy++;
}

/* Ends a callback; finishes a destroy that happened inside it. */
static void leave(struct filter *f)
{
	if (--f->busy == 0 && f->dead)
		filter_free(f);
}

/* ---- verdicts ---- */

/* Replaces the request *MSG by an error response (CODE, WHY). */
static void make_error(json_t **msg, int code, const char *why)
{
	json_t *err = rpc_error(json_object_get(*msg, "id"), code, why, NULL);
	json_decref(*msg);
	*msg = err;
}

/* Replaces the result or error of the response *MSG by an error. */
static void response_error(json_t *msg, int code, const char *why)
{
	json_object_del(msg, "result");
	json_object_set_new(msg, "error", json_pack("{s:i,s:s}", "code", code, "message", why));
}

/* The failure mode's verdict on *MSG (of KIND, METHOD; replaced by an error
 * when closed) for WHY; logged. */
static enum mw_verdict fail_mode(struct filter *f, enum rpc_kind kind, const char *method,
				 json_t **msg, const char *why)
{
	char text[400];
	const char *k = kind == RPC_REQUEST ? "request" :
			kind == RPC_NOTIFICATION ? "notification" : "response to";
	log_warn("%s: %s; %s \"%s\" %s (failure mode %s)", f->name, why, k, method,
		 f->fail_open ? "passed unchecked" : kind == RPC_NOTIFICATION ? "dropped" :
		 "refused", f->fail_open ? "open" : "closed");
	if (f->fail_open)
		return MW_PASS;
	snprintf(text, sizeof text, "refused: the filter is unavailable: %s", why);
	if (kind == RPC_NOTIFICATION)
		return MW_DROP;
	if (kind == RPC_RESPONSE) {
		response_error(*msg, MW_FILTER_UNAVAILABLE, text);
		return MW_PASS;
	}
	make_error(msg, MW_FILTER_UNAVAILABLE, text);
	return MW_REPLY;
}

/* Frees P, then continues its walk with V and MSG (stolen). */
static void resume_pend(struct pend *p, enum mw_verdict v, json_t *msg)
{
	struct mw_walk *w = p->walk;
	ev_timer_stop(EV_DEFAULT, &p->timer);
	free(p);
	mw_resume(w, v, msg);
}

/* Settles P (already out of the table) by the failure mode for WHY. */
static void fail_pend(struct pend *p, const char *why)
{
	json_t *msg = p->msg;
	enum mw_verdict v = fail_mode(p->f, p->kind, p->method, &msg, why);
	resume_pend(p, v, msg);
}

/* ---- the program ---- */

/* Fails every pending message for WHY. */
static void fail_all(struct filter *f, const char *why)
{
	size_t n;
	void **v = hmap_drain(&f->pending, &n);
	for (size_t i = 0; v && i < n; i++)
		fail_pend(v[i], why);
	free(v);
}

/* Closes our ends of the pipes and forgets buffered lines. */
static void close_pipes(struct filter *f)
{
	ev_io_stop(EV_DEFAULT, &f->rd);
	ev_io_stop(EV_DEFAULT, &f->wr);
	if (f->proc.in_fd >= 0)
		close(f->proc.in_fd);
	if (f->proc.out_fd >= 0)
		close(f->proc.out_fd);
	f->proc.in_fd = f->proc.out_fd = -1;
	framer_release(&f->in);
	buf_release(&f->out);
}

/* The program is no use any more (WHY): stop it and fail what waits. */
static void filter_down(struct filter *f, const char *why)
{
	if (f->state != F_UP)
		return;
	f->state = F_STOPPING;
	snprintf(f->why_down, sizeof f->why_down, "%s", why);
	log_warn("%s: %s; messages get the failure mode (%s) until it is restarted",
		 f->name, why, f->fail_open ? "open" : "closed");
	close_pipes(f);
	if (f->proc.pid > 0) {
		proc_signal_group(&f->proc, SIGTERM);
		f->proc.kill_step = 1;   /* TERM is sent: the next step is KILL */
		proc_stop(&f->proc, STOP_GRACE);
	}
	fail_all(f, why);
}

static int spawn(struct filter *f);

/* The delay before the next restart: doubled after each quick failure. */
static double next_backoff(const struct filter *f)
{
	double d = f->backoff > 0 ? f->backoff * 2 : f->restart_delay;
	if (d < 0.1 && f->backoff > 0)
		d = 0.1;
	double cap = f->restart_delay > BACKOFF_MAX ? f->restart_delay : BACKOFF_MAX;
	return d < cap ? d : cap;
}

/* The restart delay passed: start the program again. */
static void on_restart(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct filter *f = w->data;
	(void)loop;
	(void)revents;
	enter(f);
	if (f->state == F_DOWN && spawn(f) < 0) {
		snprintf(f->why_down, sizeof f->why_down, "%s", f->proc.error);
		f->backoff = next_backoff(f);
		ev_timer_set(&f->restart, f->backoff, 0.);
		ev_timer_start(EV_DEFAULT, &f->restart);
	}
	leave(f);
}

/* The program was reaped. */
static void on_exit_cb(struct proc *p, int status, void *arg)
{
	struct filter *f = arg;
	char st[120], why[200];
	enter(f);
	proc_describe_status(status, st, sizeof st);
	snprintf(why, sizeof why, "the program %s%s", WIFSIGNALED(status) ? "was " : "", st);
	if (f->state == F_UP) {
		filter_down(f, why);
	} else {
		snprintf(f->why_down, sizeof f->why_down, "%s", why);
		log_msg(f->killed ? LOG_INFO : LOG_WARN, "%s: %s", f->name, why);
	}
	if (!f->killed)
		proc_log_tail(p);
	f->killed = false;
	close_pipes(f);
	proc_release(p);
	f->spawned = false;
	f->state = F_DOWN;
	f->backoff = ev_now(EV_DEFAULT) - f->up_since >= 60 ? f->restart_delay :
		     next_backoff(f);
	log_info("%s: restarting in %g s", f->name, f->backoff);
	ev_timer_set(&f->restart, f->backoff, 0.);
	ev_timer_start(EV_DEFAULT, &f->restart);
	leave(f);
}

/* Writes what is queued for the program; returns 0, or -1 on a hard error. */
static int flush_out(struct filter *f)
{
	while (buf_pending(&f->out) > 0) {
		ssize_t n = write(f->proc.in_fd, f->out.data + f->out.off, buf_pending(&f->out));
		if (n > 0) {
			buf_consume(&f->out, (size_t)n);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			return -1;
		}
	}
	if (buf_pending(&f->out) > 0)
		ev_io_start(EV_DEFAULT, &f->wr);
	else
		ev_io_stop(EV_DEFAULT, &f->wr);
	return 0;
}

/* The program's stdin can take more. */
static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct filter *f = w->data;
	char why[200];
	(void)loop;
	(void)revents;
	enter(f);
	if (flush_out(f) < 0) {
		snprintf(why, sizeof why, "cannot write to the program: %s", strerror(errno));
		filter_down(f, why);
	}
	leave(f);
}

static void answer(struct filter *f, const char *line, size_t len);

/* The program wrote: take every complete answer line. */
static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct filter *f = w->data;
	(void)loop;
	(void)revents;
	enter(f);
	for (;;) {
		size_t len, total;
		const char *line;
		ssize_t n = framer_read(&f->in, f->proc.out_fd, NULL);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			filter_down(f, n == 0 ? "the program closed its output" :
				    "cannot read from the program");
			break;
		}
		enum frame_kind k;
		while (f->state == F_UP && !f->dead &&
		       (k = framer_next(&f->in, &line, &len, &total)) != FRAME_NONE) {
			if (k == FRAME_OVERSIZE)
				log_warn("%s: an answer of %zu bytes ignored (too long)", f->name, total);
			else
				answer(f, line, len);
		}
		if (f->state != F_UP || f->dead)
			break;
	}
	leave(f);
}

/* Starts the program; returns 0 or -1 (logged). */
static int spawn(struct filter *f)
{
	if (proc_spawn(&f->proc, f->name, f->argv, f->env, f->cwd, on_exit_cb, f) < 0)
		return log_fail("%s: %s", f->name, f->proc.error);
	f->spawned = true;
	f->state = F_UP;
	f->up_since = ev_now(EV_DEFAULT);
	fcntl(f->proc.in_fd, F_SETFL, O_NONBLOCK);
	framer_init(&f->in, LINE_MAX_BYTES);
	ev_io_init(&f->rd, on_readable, f->proc.out_fd, EV_READ);
	ev_io_init(&f->wr, on_writable, f->proc.in_fd, EV_WRITE);
	f->rd.data = f->wr.data = f;
	ev_io_start(EV_DEFAULT, &f->rd);
	return 0;
}

/* ---- answers ---- */

/* A copy of NEW_MSG (borrowed) with MSG's "jsonrpc", "id" and "method"
 * (borrowed); returns it (new reference) if it is still a KIND, else NULL. */
static json_t *merge(json_t *msg, json_t *new_msg, enum rpc_kind kind)
{
	static const char *const kept[] = { "jsonrpc", "id", "method" };
	struct rpc_info info;
	if (!json_is_object(new_msg))
		return NULL;
	json_t *out = json_copy(new_msg);
	for (size_t i = 0; out && i < 3; i++) {
		json_t *v = json_object_get(msg, kept[i]);
		if (v)
			json_object_set(out, kept[i], v);  /* the very same values */
		else
			json_object_del(out, kept[i]);
	}
	if (out && rpc_classify(out, &info) == kind)
		return out;
	json_decref(out);
	return NULL;
}

/* The response that answer A (borrowed) gives the request or response MSG
 * (borrowed), as a new reference; NULL when A has no valid one. */
static json_t *reply_of(json_t *msg, json_t *a, enum rpc_kind kind)
{
	json_t *result = json_object_get(a, "result"), *error = json_object_get(a, "error");
	if (kind == RPC_NOTIFICATION || !result == !error)
		return NULL;
	json_t *r = json_pack("{s:s,s:O?}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"));
	json_object_set(r, result ? "result" : "error", result ? result : error);
	struct rpc_info info;
	if (!r || rpc_classify(r, &info) != RPC_RESPONSE) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* Applies the drop answer A to P's message *MSG (replaced, for a request or
 * response, by an error); returns the verdict. */
static enum mw_verdict apply_drop(struct filter *f, struct pend *p, json_t *a, json_t **msg)
{
	char text[400];
	const char *reason = json_string_value(json_object_get(a, "reason"));
	snprintf(text, sizeof text, "%s \"%s\" refused by the filter%s%s",
		 p->kind == RPC_RESPONSE ? "the response to" : "request", p->method,
		 reason ? ": " : "", reason ? reason : "");
	log_info("%s: %s %s", f->name, p->kind == RPC_NOTIFICATION ? "dropped" : "refused",
		 p->method);
	if (p->kind == RPC_NOTIFICATION)
		return MW_DROP;
	if (p->kind == RPC_RESPONSE) {
		response_error(*msg, MW_FILTER_REFUSED, text);
		return MW_PASS;
	}
	make_error(msg, MW_FILTER_REFUSED, text);
	return MW_REPLY;
}

/* Applies answer A (borrowed) to *MSG (may be replaced); returns the verdict,
 * or -1 when A is nonsense (then *MSG is unchanged). */
static int apply(struct filter *f, struct pend *p, json_t *a, json_t **msg)
{
	const char *action = json_string_value(json_object_get(a, "action"));
	json_t *changed = json_object_get(a, "message"), *out;
	if (action && strcmp(action, "pass") == 0) {
		if (!changed)
			return MW_PASS;
		if (!(out = merge(*msg, changed, p->kind)))
			return -1;
		json_decref(*msg);
		*msg = out;
		return MW_PASS;
	}
	if (action && strcmp(action, "reply") == 0) {
		if (!(out = reply_of(*msg, a, p->kind)))
			return -1;
		json_decref(*msg);
		*msg = out;
		return p->kind == RPC_RESPONSE ? MW_PASS : MW_REPLY;
	}
	if (action && strcmp(action, "drop") == 0)
		return apply_drop(f, p, a, msg);
	return -1;
}

/* One answer line from the program. */
static void answer(struct filter *f, const char *line, size_t len)
{
	json_error_t je;
	json_t *a = json_loadb(line, len, 0, &je);
	json_t *idv = json_object_get(a, "id");
	if (!json_is_integer(idv)) {
		log_warn("%s: an answer without an integer \"id\" ignored%s%s", f->name,
			 a ? "" : ": not JSON: ", a ? "" : je.text);
		json_decref(a);
		return;
	}
	uint64_t id = (uint64_t)json_integer_value(idv);
	struct pend *p = hmap_del(&f->pending, &id, sizeof id);
	if (!p) {
		log_debug("%s: a late answer (id %" PRIu64 ") ignored", f->name, id);
		json_decref(a);
		return;
	}
	json_t *msg = p->msg;
	int v = apply(f, p, a, &msg);
	json_decref(a);
	if (v < 0) {
		fail_pend(p, "the program answered with an invalid action or message");
		return;
	}
	resume_pend(p, (enum mw_verdict)v, msg);
}

/* A message got no answer in time: the program is taken as hung. */
static void on_pend_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct pend *p = w->data;
	struct filter *f = p->f;
	char why[200];
	(void)loop;
	(void)revents;
	enter(f);
	snprintf(why, sizeof why, "the program did not answer within %g s", f->timeout);
	f->killed = true;
	filter_down(f, why);
	leave(f);
}

/* ---- hooks ---- */

/* True when the filter sees messages of KIND about METHOD in CTX. */
static bool wanted(const struct filter *f, const struct mw_ctx *ctx, enum rpc_kind kind)
{
	unsigned from = ctx->dir == MW_TO_BACKEND ? FROM_CLIENT : FROM_BACKEND;
	if (!ctx->method || !(f->from & from) || (kind == RPC_RESPONSE && !f->responses))
		return false;
	return !f->has_methods || glob_list_match(&f->methods, ctx->method);
}

/* Sets KEY of O to the string S unless S is NULL. */
static void set_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

/* The line about MSG (borrowed) for the program, with id ID (new reference). */
static json_t *line_of(const struct mw_ctx *ctx, enum rpc_kind kind, json_t *msg, uint64_t id)
{
	bool to_backend = (ctx->dir == MW_TO_BACKEND) == (kind != RPC_RESPONSE);
	json_t *c = json_object();
	set_str(c, "method", ctx->method);
	set_str(c, "client", ctx->client);
	set_str(c, "backend", ctx->backend);
	set_str(c, "name", ctx->name);
	return json_pack("{s:I,s:s,s:s,s:o,s:O}", "id", (json_int_t)id,
		"direction", to_backend ? "toBackend" : "toClient",
		"kind", kind == RPC_REQUEST ? "request" :
			kind == RPC_NOTIFICATION ? "notification" : "response",
		"context", c, "message", msg);
}

/* Queues MSG's line for the program; returns 0, or -1 with WHY filled. */
static int send_line(struct filter *f, const struct mw_ctx *ctx, enum rpc_kind kind,
		     json_t *msg, uint64_t id, char *why, size_t n)
{
	json_t *line = line_of(ctx, kind, msg, id);
	char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
	json_decref(line);
	size_t len = text ? strlen(text) : 0;
	int rc = -1;
	if (!text)
		snprintf(why, n, "the message cannot be serialized");
	else if (buf_pending(&f->out) + len + 1 > LINE_MAX_BYTES)
		snprintf(why, n, "the program is not reading its input");
	else if (buf_append(&f->out, text, len) == 0 && buf_append(&f->out, "\n", 1) == 0)
		rc = 0;
	else
		snprintf(why, n, "out of memory");
	free(text);
	if (rc == 0 && flush_out(f) < 0)
		ev_io_start(EV_DEFAULT, &f->wr);  /* the error is handled there */
	return rc;
}

/* Sends MSG to the program and holds the walk until it answers. */
static enum mw_verdict ask(struct filter *f, struct mw_ctx *ctx, enum rpc_kind kind,
			   json_t **msg)
{
	char why[300];
	if (f->state != F_UP) {
		snprintf(why, sizeof why, "the program is not running (%s)",
			 f->why_down[0] ? f->why_down : "never started");
		return fail_mode(f, kind, ctx->method, msg, why);
	}
	struct pend *p = calloc(1, sizeof *p);
	uint64_t id = ++f->next_id;
	if (!p || hmap_put(&f->pending, &id, sizeof id, p) < 0) {
		free(p);
		return fail_mode(f, kind, ctx->method, msg, "out of memory");
	}
	if (send_line(f, ctx, kind, *msg, id, why, sizeof why) < 0) {
		hmap_del(&f->pending, &id, sizeof id);
		free(p);
		return fail_mode(f, kind, ctx->method, msg, why);
	}
	*p = (struct pend){ .f = f, .id = id, .msg = *msg, .kind = kind, .method = ctx->method };
	ev_timer_init(&p->timer, on_pend_timeout, f->timeout, 0.);
	p->timer.data = p;
	ev_timer_start(EV_DEFAULT, &p->timer);
	p->walk = mw_walk_hold(ctx);
	return MW_ASYNC;
}

/* What on_cancel looks for: the question held for CTX. */
struct pend_find {
	const struct mw_ctx *ctx;
	struct pend *found;
};

/* hmap_each visitor: notes the question whose walk is for the context sought. */
static void find_pend(void *value, void *arg)
{
	struct pend *p = value;
	struct pend_find *pf = arg;
	if (p->walk && p->walk->ctx == pf->ctx)
		pf->found = p;
}

/*
 * The request whose question to the program is open was cancelled: the
 * question is forgotten (a late answer is ignored as for a timed-out one).
 */
static void filter_on_cancel(struct mw_module *m, struct mw_ctx *ctx)
{
	struct filter *f = (struct filter *)m;
	struct pend_find pf = { ctx, NULL };
	hmap_each(&f->pending, find_pend, &pf);
	if (!pf.found)
		return;
	hmap_del(&f->pending, &pf.found->id, sizeof pf.found->id);
	ev_timer_stop(EV_DEFAULT, &pf.found->timer);
	json_decref(pf.found->msg);
	free(pf.found);
}

/* A request or notification: the program decides. */
static enum mw_verdict filter_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct filter *f = (struct filter *)m;
	if (!wanted(f, ctx, ctx->kind))
		return MW_PASS;
	return ask(f, ctx, ctx->kind, msg);
}

/* A response, with "responses": true: the program decides too. */
static enum mw_verdict filter_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct filter *f = (struct filter *)m;
	if (!wanted(f, ctx, RPC_RESPONSE))
		return MW_PASS;
	return ask(f, ctx, RPC_RESPONSE, msg);
}

/* Starts the program. */
static int filter_start(struct mw_module *m)
{
	struct filter *f = (struct filter *)m;
	if (f->state != F_DOWN || ev_is_active(&f->restart))
		return 0;
	return spawn(f);
}

/* Frees a pending message at destruction (its walk is never resumed). */
static void drop_pend(void *value, void *arg)
{
	struct pend *p = value;
	(void)arg;
	ev_timer_stop(EV_DEFAULT, &p->timer);
	json_decref(p->msg);
	free(p);
}

/* Frees everything F owns. */
static void filter_free(struct filter *f)
{
	for (size_t i = 0; i < f->nargv; i++)
		free(f->argv[i]);
	for (char **e = f->env; e && *e; e++)
		free(*e);
	free(f->argv);
	free(f->env);
	free(f->cwd);
	free(f->name);
	glob_list_release(&f->methods);
	free(f);
}

/* Stops the program (its stdin closes, then SIGTERM) and frees the module. */
static void filter_destroy(struct mw_module *m)
{
	struct filter *f = (struct filter *)m;
	ev_timer_stop(EV_DEFAULT, &f->restart);
	close_pipes(f);
	if (f->spawned) {
		proc_signal_group(&f->proc, SIGTERM);
		proc_release(&f->proc);
		f->spawned = false;
	}
	f->state = F_DOWN;
	hmap_each(&f->pending, drop_pend, NULL);
	hmap_release(&f->pending);
	if (f->busy)
		f->dead = true;
	else
		filter_free(f);
}

static const struct mw_module_ops filter_ops = {
	.name = "filter",
	.on_message = filter_on_message,
	.on_response = filter_on_response,
	.on_cancel = filter_on_cancel,
	.start = filter_start,
	.destroy = filter_destroy,
};

/* ---- options ---- */

/* Expands ${VAR} in the string V at KEY; returns it (caller frees) or NULL. */
static char *expand(struct mw_build *b, const char *key, json_t *v)
{
	char err[256];
	if (!json_is_string(v) || json_string_length(v) == 0) {
		mw_error(b, key, "must be a non-empty string");
		return NULL;
	}
	char *s = cfg_expand(json_string_value(v), err, sizeof err);
	if (!s)
		mw_error(b, key, "%s", err);
	return s;
}

/* Parses "command" and "args" into F->argv. */
static void parse_argv(struct filter *f, json_t *opts, struct mw_build *b)
{
	json_t *cmd = json_object_get(opts, "command"), *args = json_object_get(opts, "args"), *v;
	size_t i, n = json_is_array(args) ? json_array_size(args) : 0;
	if (!cmd) {
		mw_error(b, "/command", "missing: the filter program to run (argv, no shell)");
		return;
	}
	if (args && !json_is_array(args))
		mw_error(b, "/args", "must be an array of strings");
	f->argv = calloc(n + 2, sizeof *f->argv);
	if (!f->argv) {
		mw_error(b, "", "out of memory");
		return;
	}
	f->argv[0] = expand(b, "/command", cmd);
	json_array_foreach(json_is_array(args) ? args : NULL, i, v) {
		char k[48];
		snprintf(k, sizeof k, "/args/%zu", i);
		if (json_is_string(v) && json_string_length(v) == 0)
			f->argv[i + 1] = strdup("");
		else
			f->argv[i + 1] = expand(b, k, v);
	}
	f->nargv = n + 1;
}

/* Parses "env" (object of strings) and "cwd". */
static void parse_env(struct filter *f, json_t *opts, struct mw_build *b)
{
	json_t *env = json_object_get(opts, "env"), *cwd = json_object_get(opts, "cwd"), *v;
	const char *k;
	size_t i = 0;
	if (cwd)
		f->cwd = expand(b, "/cwd", cwd);
	if (!env)
		return;
	if (!json_is_object(env)) {
		mw_error(b, "/env", "must be an object of strings");
		return;
	}
	f->env = calloc(json_object_size(env) + 1, sizeof *f->env);
	json_object_foreach(env, k, v) {
		char key[300];
		snprintf(key, sizeof key, "/env/%s", k);
		char *val = json_is_string(v) && json_string_length(v) == 0 ? strdup("") :
			    expand(b, key, v);
		if (!*k || strchr(k, '='))
			mw_error(b, key, "not a valid variable name");
		else if (val && f->env && asprintf(&f->env[i], "%s=%s", k, val) >= 0)
			i++;
		free(val);
	}
}

/* Reads the integer option NAME in [MIN, MAX] ms into *OUT seconds. */
static void parse_ms(struct mw_build *b, json_t *opts, const char *name, json_int_t min,
		     json_int_t max, double *out)
{
	json_t *v = json_object_get(opts, name);
	char key[64];
	snprintf(key, sizeof key, "/%s", name);
	if (v && (!json_is_integer(v) || json_integer_value(v) < min ||
		  json_integer_value(v) > max))
		mw_error(b, key, "must be a whole number of milliseconds from %" JSON_INTEGER_FORMAT
			 " to %" JSON_INTEGER_FORMAT, min, max);
	else if (v)
		*out = (double)json_integer_value(v) / 1000.0;
}

/* Parses "failure", "from", "responses" and "methods". */
static void parse_choices(struct filter *f, json_t *opts, struct mw_build *b)
{
	json_t *fail = json_object_get(opts, "failure"), *from = json_object_get(opts, "from");
	json_t *resp = json_object_get(opts, "responses"), *methods = json_object_get(opts, "methods");
	const char *s = json_string_value(fail), *fr = json_string_value(from);
	if (fail && !(s && (strcmp(s, "closed") == 0 || strcmp(s, "open") == 0)))
		mw_error(b, "/failure", "must be \"closed\" (refuse) or \"open\" (pass)");
	f->fail_open = s && strcmp(s, "open") == 0;
	f->from = FROM_CLIENT | FROM_BACKEND;
	if (from && fr && strcmp(fr, "client") == 0)
		f->from = FROM_CLIENT;
	else if (from && fr && strcmp(fr, "backend") == 0)
		f->from = FROM_BACKEND;
	else if (from && !(fr && strcmp(fr, "both") == 0))
		mw_error(b, "/from", "must be \"client\", \"backend\" or \"both\"");
	if (resp && !json_is_boolean(resp))
		mw_error(b, "/responses", "must be true or false");
	f->responses = json_is_true(resp);
	if (methods) {
		f->has_methods = true;
		if (glob_list_parse(b, "/methods", methods, &f->methods) == 0 && f->methods.n == 0)
			mw_error(b, "/methods", "empty: leave \"methods\" out to filter every method");
	}
}

/* Validates the options and makes the module (nothing is started). */
struct mw_module *mw_filter_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = {
		"command", "args", "env", "cwd", "timeoutMs", "failure", "from",
		"responses", "methods", "restartDelayMs", NULL,
	};
	int before = b->nerr;
	struct filter *f = calloc(1, sizeof *f);
	if (!f) {
		mw_error(b, "", "out of memory");
		return NULL;
	}
	f->base.ops = &filter_ops;
	f->proc.in_fd = f->proc.out_fd = f->proc.err_fd = -1;
	f->timeout = 2.0;
	f->restart_delay = 1.0;
	ev_init(&f->restart, on_restart);
	f->restart.data = f;
	mw_check_keys(b, opts, keys);
	parse_argv(f, opts, b);
	parse_env(f, opts, b);
	parse_ms(b, opts, "timeoutMs", 1, 600000, &f->timeout);
	parse_ms(b, opts, "restartDelayMs", 0, 600000, &f->restart_delay);
	parse_choices(f, opts, b);
	if (f->argv && f->argv[0] && asprintf(&f->name, "filter %s", f->argv[0]) < 0)
		f->name = NULL;
	if (b->nerr == before && !f->name)
		mw_error(b, "", "out of memory");
	if (b->nerr > before) {
		filter_destroy(&f->base);
		return NULL;
	}
	return &f->base;
}
