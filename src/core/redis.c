/*
 * redis.c - the shared store (include/redis.h): one hiredis asynchronous
 * connection on libev's default loop.
 *
 * A connection goes CONNECTING (TCP, then AUTH and SELECT pipelined,
 * bounded by connectTimeoutMs) -> UP, and on any failure DOWN, from where
 * a timer tries again after 0.1 s, doubling to 5 s. An outage is logged
 * once when it starts ("redis: down (why)") and once when it ends.
 *
 * Every command is an op on one list in the order it was given; as all
 * commands have the same timeout that is also the order of their
 * deadlines, so one timer, armed for the head, ends those that ran out.
 * An op that timed out or was forgotten stays allocated while hiredis
 * still holds it (its late answer is then thrown away). Commands given
 * while connecting wait on the list unsent and go out once up; commands
 * given while down end with REDIS_DOWN from a zero timer, never from
 * inside redis_cmd.
 */
#include "redis.h"

/* hiredis names REDIS_OK and REDIS_ERR too (macros, 0 and -1): take our
 * enum's values before its headers replace the names. */
enum { ST_OK = REDIS_OK, T_ERR = REDIS_ERR };

#include <ev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/adapters/libev.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"

#define BACKOFF_MIN 0.1
#define BACKOFF_MAX 5.0
#define MAX_USES 8            /* distinct users counted by redis_count_fallback */
#define SHA_CACHE 8           /* scripts whose SHA1 is remembered */

enum state { S_DOWN, S_CONNECTING, S_UP };

struct redis_op {
	struct redis *r;
	redis_cb cb;                /* NULL once ended or forgotten */
	void *arg;
	double deadline;            /* ev_now() seconds */
	struct redis_op *prev, *next;   /* in r's pending list, or next in r's later list */
	char *cmd;                  /* the formatted command (owned) */
	size_t len;
	const char *script;         /* redis_eval: the script, for the EVAL retry */
	bool pending;               /* on the pending list */
	bool later;                 /* on the later list (ends with REDIS_DOWN) */
	bool held;                  /* hiredis holds it (a reply will come) */
	bool retried;               /* EVAL sent after NOSCRIPT */
};

struct fallback {
	const char *use;            /* static */
	unsigned long long n[2];    /* [open] */
	bool logged;                /* in this outage */
};

struct redis {
	struct redis_opts o;        /* strings owned */
	redisAsyncContext *ac;      /* NULL while down */
	enum state state;
	int hello;                  /* AUTH/SELECT answers still awaited */
	bool outage;                /* "down" logged, "up" not yet */
	bool freeing;
	char why[160];              /* why we closed the connection ourselves */
	double backoff;
	ev_timer retry;             /* the next connect */
	ev_timer connect_timer;     /* connecting too long */
	ev_timer tick;              /* the head op's deadline */
	ev_timer later_timer;       /* ends the later list */
	struct redis_op *head, *tail;   /* pending, oldest first */
	struct redis_op *later, *later_tail;
	unsigned long long commands, errors[3], reconnects;   /* errors: down, timeout, reply */
	struct fallback uses[MAX_USES];
	struct { const char *script; char sha[41]; } shas[SHA_CACHE];
	unsigned nextsha;
};

static struct redis *default_store;

static void connect_now(struct redis *r);
static void send_op(struct redis *r, struct redis_op *op);

/* ---- ops ---- */

/* Frees OP when nothing refers to it any more. */
static void op_maybe_free(struct redis_op *op)
{
	if (op->pending || op->later || op->held)
		return;
	free(op->cmd);
	free(op);
}

/* Takes OP off the pending list. */
static void unlink_pending(struct redis *r, struct redis_op *op)
{
	if (!op->pending)
		return;
	*(op->prev ? &op->prev->next : &r->head) = op->next;
	*(op->next ? &op->next->prev : &r->tail) = op->prev;
	op->prev = op->next = NULL;
	op->pending = false;
}

/* Arms the timeout timer for the oldest pending op. */
static void arm_tick(struct redis *r)
{
	if (!r->head) {
		ev_timer_stop(EV_DEFAULT, &r->tick);
		return;
	}
	if (ev_is_active(&r->tick))
		return;   /* fires no later than the head's deadline; rearmed then */
	double in = r->head->deadline - ev_now(EV_DEFAULT);
	ev_timer_set(&r->tick, in > 0 ? in : 0., 0.);
	ev_timer_start(EV_DEFAULT, &r->tick);
}

/* Ends OP with ST and REPLY: its callback, if any, is called now. */
static void finish(struct redis_op *op, enum redis_status st, const struct redis_reply *reply)
{
	struct redis *r = op->r;
	redis_cb cb = op->cb;
	unlink_pending(r, op);
	op->cb = NULL;
	if (st == REDIS_DOWN)
		r->errors[0]++;
	else if (st == REDIS_TIMEOUT)
		r->errors[1]++;
	else if (reply && reply->type == (enum redis_type)T_ERR)
		r->errors[2]++;
	if (cb && !r->freeing)
		cb(op->arg, st, reply);
	op_maybe_free(op);
}

/* Moves OP to the later list: it ends with REDIS_DOWN from the loop. */
static void defer_down(struct redis *r, struct redis_op *op)
{
	unlink_pending(r, op);
	op->later = true;
	op->next = NULL;
	*(r->later_tail ? &r->later_tail->next : &r->later) = op;
	r->later_tail = op;
	if (!ev_is_active(&r->later_timer)) {
		ev_timer_set(&r->later_timer, 0., 0.);
		ev_timer_start(EV_DEFAULT, &r->later_timer);
	}
}

/* Ends the ops on the later list with REDIS_DOWN. */
static void on_later(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct redis *r = w->data;
	struct redis_op *op = r->later;
	(void)loop;
	(void)revents;
	r->later = r->later_tail = NULL;   /* callbacks may defer more: a new list */
	while (op) {
		struct redis_op *next = op->next;
		op->later = false;
		op->next = NULL;
		finish(op, REDIS_DOWN, NULL);
		op = next;
	}
}

/* Ends the pending ops whose deadline passed with REDIS_TIMEOUT. */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct redis *r = w->data;
	double now = ev_now(loop);
	(void)revents;
	while (r->head && r->head->deadline <= now)
		finish(r->head, REDIS_TIMEOUT, NULL);
	arm_tick(r);
}

/* ---- replies ---- */

/* Frees the element arrays conv() made under OUT. */
static void conv_free(struct redis_reply *out)
{
	if (out->type != REDIS_ARR || !out->elem)
		return;
	for (size_t i = 0; i < out->n; i++)
		conv_free((struct redis_reply *)&out->elem[i]);
	free((void *)out->elem);
}

/* Converts IN into OUT (arrays on the heap: conv_free); -1 out of memory. */
static int conv(const redisReply *in, struct redis_reply *out)
{
	memset(out, 0, sizeof *out);
	switch (in->type) {
	case REDIS_REPLY_INTEGER:
		out->type = REDIS_INT;
		out->integer = in->integer;
		return 0;
	case REDIS_REPLY_STRING:
	case REDIS_REPLY_STATUS:
	case REDIS_REPLY_ERROR:
		out->type = in->type == REDIS_REPLY_ERROR ? (enum redis_type)T_ERR : REDIS_STR;
		out->str = in->str;
		out->len = in->len;
		return 0;
	case REDIS_REPLY_ARRAY:
		break;
	default:
		out->type = REDIS_NIL;
		return 0;
	}
	out->type = REDIS_ARR;
	if (in->elements == 0)
		return 0;
	struct redis_reply *el = calloc(in->elements, sizeof *el);
	if (!el)
		return -1;
	out->elem = el;
	for (size_t i = 0; i < in->elements; i++) {
		out->n = i + 1;
		if (conv(in->element[i], &el[i]) < 0)
			return -1;
	}
	return 0;
}

/* Sends OP's script in full (EVAL) in place of its EVALSHA; false if it
 * cannot. The formatted EVALSHA is "*N\r\n$7\r\nEVALSHA\r\n$40\r\nSHA\r\n"
 * then the rest, which EVAL shares. */
static bool resend_eval(struct redis *r, struct redis_op *op)
{
	const char *rest = strstr(op->cmd, "\r\n");
	if (!rest || !r->ac)
		return false;
	size_t head = (size_t)(rest + 2 - op->cmd);
	size_t skip = head + 13 + 47, slen = strlen(op->script);
	struct buf b = { 0 };
	buf_append(&b, op->cmd, head);
	buf_printf(&b, "$4\r\nEVAL\r\n$%zu\r\n", slen);
	buf_append(&b, op->script, slen);
	buf_append(&b, "\r\n", 2);
	if (buf_append(&b, op->cmd + skip, op->len - skip) < 0) {
		buf_release(&b);
		return false;
	}
	free(op->cmd);
	op->cmd = b.data;   /* handed over: the buffer is the new command */
	op->len = b.len;
	op->retried = true;
	send_op(r, op);
	return op->held;
}

/* hiredis's answer to OP (NULL: the connection went). */
static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct redis_op *op = priv;
	struct redis *r = op->r;
	redisReply *rep = reply;
	(void)ac;
	op->held = false;
	if (r->freeing) {   /* redis_free frees those still on its lists */
		if (!op->pending)
			op_maybe_free(op);
		return;
	}
	if (!op->pending || !op->cb) {   /* timed out or forgotten */
		op_maybe_free(op);
		return;
	}
	if (!rep) {
		finish(op, REDIS_DOWN, NULL);
		return;
	}
	if (rep->type == REDIS_REPLY_ERROR && op->script && !op->retried &&
	    strncmp(rep->str, "NOSCRIPT", 8) == 0 && resend_eval(r, op))
		return;
	struct redis_reply out;
	if (conv(rep, &out) < 0) {
		conv_free(&out);
		out = (struct redis_reply){ .type = (enum redis_type)T_ERR,
					    .str = "ERR out of memory", .len = 17 };
	}
	finish(op, REDIS_OK, &out);
	conv_free(&out);
}

/* Hands OP to hiredis; on failure it ends REDIS_DOWN from the loop. */
static void send_op(struct redis *r, struct redis_op *op)
{
	if (r->ac && redisAsyncFormattedCommand(r->ac, on_reply, op, op->cmd, op->len) == ST_OK) {
		op->held = true;
		return;
	}
	defer_down(r, op);
}

/* ---- the connection ---- */

/* The connection is gone (WHY): ops not yet sent end, a retry is set. */
static void went_down(struct redis *r, const char *why)
{
	if (r->state == S_DOWN || r->freeing)
		return;
	r->state = S_DOWN;
	r->ac = NULL;
	ev_timer_stop(EV_DEFAULT, &r->connect_timer);
	if (!r->outage) {
		log_warn("redis: down (%s)", why);
		r->outage = true;
	}
	for (struct redis_op *op = r->head, *next; op; op = next) {
		next = op->next;
		if (!op->held)
			defer_down(r, op);
	}
	ev_timer_set(&r->retry, r->backoff, 0.);
	ev_timer_start(EV_DEFAULT, &r->retry);
	r->backoff = r->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : r->backoff * 2;
}

/* Connected, authenticated, selected: the waiting ops go out. */
static void went_up(struct redis *r)
{
	r->state = S_UP;
	r->backoff = BACKOFF_MIN;
	ev_timer_stop(EV_DEFAULT, &r->connect_timer);
	if (r->outage) {
		log_info("redis: up");
		r->reconnects++;
		r->outage = false;
	}
	for (size_t i = 0; i < MAX_USES; i++)
		r->uses[i].logged = false;
	for (struct redis_op *op = r->head, *next; op; op = next) {
		next = op->next;
		if (!op->held)
			send_op(r, op);
	}
}

/* Closes the connection ourselves, for WHY. */
static void close_conn(struct redis *r, const char *why)
{
	redisAsyncContext *ac = r->ac;
	snprintf(r->why, sizeof r->why, "%s", why);
	if (ac && !(ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)))
		redisAsyncDisconnect(ac);   /* on_disconnect follows */
}

/* The answer to AUTH or SELECT. */
static void on_hello(redisAsyncContext *ac, void *reply, void *priv)
{
	struct redis *r = ac->data;
	redisReply *rep = reply;
	char why[160];
	if (!rep || r->freeing || r->state != S_CONNECTING)
		return;
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof why, "%s refused: %.100s", (const char *)priv, rep->str);
		close_conn(r, why);
		return;
	}
	if (--r->hello == 0)
		went_up(r);
}

/* TCP connected (or not). */
static void on_connect(const redisAsyncContext *cac, int status)
{
	struct redis *r = cac->data;
	redisAsyncContext *ac = (redisAsyncContext *)cac;
	char db[16];
	if (r->freeing)
		return;
	if (status != ST_OK) {
		went_down(r, cac->errstr[0] ? cac->errstr : "connect failed");  /* hiredis frees it */
		return;
	}
	r->hello = 0;
	if (r->o.password) {
		const char *argv[] = { "AUTH", r->o.password };
		if (redisAsyncCommandArgv(ac, on_hello, (void *)"AUTH", 2, argv, NULL) == ST_OK)
			r->hello++;
	}
	if (r->o.db) {
		snprintf(db, sizeof db, "%u", r->o.db);
		const char *argv[] = { "SELECT", db };
		if (redisAsyncCommandArgv(ac, on_hello, (void *)"SELECT", 2, argv, NULL) == ST_OK)
			r->hello++;
	}
	if (r->hello == 0)
		went_up(r);
}

/* The connection closed (by the peer, an error, or us). */
static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct redis *r = ac->data;
	char why[200];
	if (r->freeing)
		return;
	if (r->why[0])
		snprintf(why, sizeof why, "%s", r->why);
	else if (status != ST_OK && ac->errstr[0])
		snprintf(why, sizeof why, "%s", ac->errstr);
	else
		snprintf(why, sizeof why, "connection closed");
	went_down(r, why);
}

/* Connecting took longer than connectTimeoutMs. */
static void on_connect_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct redis *r = w->data;
	redisAsyncContext *ac = r->ac;
	(void)loop;
	(void)revents;
	snprintf(r->why, sizeof r->why, "connect timed out after %g s", r->o.connect_timeout);
	went_down(r, r->why);
	if (ac)
		redisAsyncFree(ac);   /* the ops it held end REDIS_DOWN (on_reply) */
}

/* Time to try again. */
static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	connect_now(w->data);
}

/* Starts connecting. */
static void connect_now(struct redis *r)
{
	char why[200];
	r->why[0] = '\0';
	redisAsyncContext *ac = redisAsyncConnect(r->o.host, (int)r->o.port);
	if (!ac || ac->err) {
		snprintf(why, sizeof why, "%s", ac ? ac->errstr : "out of memory");
		if (ac)
			redisAsyncFree(ac);
		r->state = S_CONNECTING;
		went_down(r, why);
		return;
	}
	ac->data = r;
	r->ac = ac;
	r->state = S_CONNECTING;
	redisLibevAttach(EV_DEFAULT, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	ev_timer_set(&r->connect_timer, r->o.connect_timeout, 0.);
	ev_timer_start(EV_DEFAULT, &r->connect_timer);
}

/* ---- the API ---- */

/* A copy of S, or of DEF when S is NULL. */
static char *dup_or(const char *s, const char *def)
{
	return s || def ? strdup(s ? s : def) : NULL;
}

struct redis *redis_new(const struct redis_opts *o)
{
	struct redis *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->o = *o;
	r->o.host = dup_or(o->host, "127.0.0.1");
	r->o.password = dup_or(o->password, NULL);
	r->o.prefix = dup_or(o->prefix, "mcp-chain:");
	r->o.port = o->port ? o->port : 6379;
	r->o.timeout = o->timeout > 0 ? o->timeout : 0.25;
	r->o.connect_timeout = o->connect_timeout > 0 ? o->connect_timeout : 1.0;
	if (!r->o.host || !r->o.prefix || (o->password && !r->o.password)) {
		redis_free(r);
		return NULL;
	}
	r->backoff = BACKOFF_MIN;
	ev_init(&r->retry, on_retry);
	ev_init(&r->connect_timer, on_connect_timeout);
	ev_init(&r->tick, on_tick);
	ev_init(&r->later_timer, on_later);
	r->retry.data = r->connect_timer.data = r->tick.data = r->later_timer.data = r;
	connect_now(r);
	return r;
}

/* Frees the ops on the list at OP (linked through next) nobody else holds. */
static void drop_list(struct redis_op *op)
{
	while (op) {
		struct redis_op *next = op->next;
		op->pending = op->later = false;
		op->cb = NULL;
		op_maybe_free(op);
		op = next;
	}
}

void redis_free(struct redis *r)
{
	if (!r)
		return;
	if (default_store == r)
		default_store = NULL;
	r->freeing = true;   /* no callback from here on */
	ev_timer_stop(EV_DEFAULT, &r->retry);
	ev_timer_stop(EV_DEFAULT, &r->connect_timer);
	ev_timer_stop(EV_DEFAULT, &r->tick);
	ev_timer_stop(EV_DEFAULT, &r->later_timer);
	struct redis_op *pending = r->head, *later = r->later;
	r->head = r->tail = r->later = r->later_tail = NULL;
	for (struct redis_op *op = pending; op; op = op->next)
		op->cb = NULL;
	if (r->ac)
		redisAsyncFree(r->ac);   /* hiredis lets go of its ops: on_reply(NULL) */
	drop_list(pending);
	drop_list(later);
	free((char *)r->o.host);
	if (r->o.password)
		memset((char *)r->o.password, 0, strlen(r->o.password));
	free((char *)r->o.password);
	free((char *)r->o.prefix);
	free(r);
}

struct redis *redis_default(void)
{
	return default_store;
}

void redis_set_default(struct redis *r)
{
	default_store = r;
}

bool redis_up(const struct redis *r)
{
	return r && r->state == S_UP;
}

const char *redis_prefix(const struct redis *r)
{
	return r->o.prefix;
}

/* A new op for the formatted command CMD (LEN bytes, stolen; LEN < 0: it
 * could not be made), queued or ending REDIS_DOWN from the loop. */
static struct redis_op *op_start(struct redis *r, redis_cb cb, void *arg, char *cmd, int len)
{
	struct redis_op *op = calloc(1, sizeof *op);
	r->commands++;
	if (!op) {
		free(cmd);   /* hiredis allocates commands with malloc */
		return NULL;
	}
	op->r = r;
	op->cb = cb;
	op->arg = arg;
	if (len < 0 || r->state == S_DOWN) {
		free(cmd);
		defer_down(r, op);
		return op;
	}
	op->cmd = cmd;
	op->len = (size_t)len;
	op->deadline = ev_now(EV_DEFAULT) + r->o.timeout;
	op->pending = true;
	op->prev = r->tail;
	*(r->tail ? &r->tail->next : &r->head) = op;
	r->tail = op;
	arm_tick(r);
	if (r->state == S_UP)
		send_op(r, op);
	return op;
}

struct redis_op *redis_cmd(struct redis *r, redis_cb cb, void *arg, int argc,
			   const char *const *argv, const size_t *lens)
{
	char *cmd = NULL;
	int len = redisFormatCommandArgv(&cmd, argc, (const char **)argv, lens);
	return op_start(r, cb, arg, cmd, len);
}

/* SCRIPT's SHA1 in hex, remembered for the last few scripts. */
static const char *script_sha(struct redis *r, const char *script)
{
	unsigned char md[SHA_DIGEST_LENGTH];
	for (size_t i = 0; i < SHA_CACHE; i++)
		if (r->shas[i].script == script)
			return r->shas[i].sha;
	unsigned k = r->nextsha++ % SHA_CACHE;
	SHA1((const unsigned char *)script, strlen(script), md);
	for (size_t i = 0; i < SHA_DIGEST_LENGTH; i++)
		snprintf(r->shas[k].sha + 2 * i, 3, "%02x", md[i]);
	r->shas[k].script = script;
	return r->shas[k].sha;
}

struct redis_op *redis_eval(struct redis *r, const char *script, redis_cb cb, void *arg,
			    int nkeys, const char *const *keys, int nargs,
			    const char *const *args)
{
	char nk[16], *cmd = NULL;
	int argc = 3 + nkeys + nargs;
	const char **argv = calloc((size_t)argc, sizeof *argv);
	int len = -1;
	if (argv) {
		snprintf(nk, sizeof nk, "%d", nkeys);
		argv[0] = "EVALSHA";
		argv[1] = script_sha(r, script);
		argv[2] = nk;
		for (int i = 0; i < nkeys; i++)
			argv[3 + i] = keys[i];
		for (int i = 0; i < nargs; i++)
			argv[3 + nkeys + i] = args[i];
		len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
		free(argv);
	}
	struct redis_op *op = op_start(r, cb, arg, cmd, len);
	if (op)
		op->script = script;
	return op;
}

void redis_forget(struct redis_op *op)
{
	if (!op)
		return;
	op->cb = NULL;
	if (op->pending && !op->held) {
		unlink_pending(op->r, op);
		op_maybe_free(op);
	} else if (op->pending) {
		unlink_pending(op->r, op);   /* freed when hiredis lets go of it */
	}
	/* on the later list: freed when it is drained, without a call */
}

void redis_metrics(const struct redis *r, struct buf *out)
{
	buf_printf(out, "# HELP mcp_chain_redis_up 1 while the shared store is connected.\n"
		   "# TYPE mcp_chain_redis_up gauge\n"
		   "mcp_chain_redis_up %d\n"
		   "# HELP mcp_chain_redis_commands_total Commands given to the shared store.\n"
		   "# TYPE mcp_chain_redis_commands_total counter\n"
		   "mcp_chain_redis_commands_total %llu\n"
		   "# HELP mcp_chain_redis_errors_total Commands that did not succeed, by why.\n"
		   "# TYPE mcp_chain_redis_errors_total counter\n"
		   "mcp_chain_redis_errors_total{why=\"down\"} %llu\n"
		   "mcp_chain_redis_errors_total{why=\"timeout\"} %llu\n"
		   "mcp_chain_redis_errors_total{why=\"reply\"} %llu\n"
		   "# HELP mcp_chain_redis_reconnects_total Connections made again after an outage.\n"
		   "# TYPE mcp_chain_redis_reconnects_total counter\n"
		   "mcp_chain_redis_reconnects_total %llu\n"
		   "# HELP mcp_chain_redis_fallbacks_total Decisions made without the store, by user and outcome.\n"
		   "# TYPE mcp_chain_redis_fallbacks_total counter\n",
		   redis_up(r), r->commands, r->errors[0], r->errors[1], r->errors[2],
		   r->reconnects);
	for (size_t i = 0; i < MAX_USES && r->uses[i].use; i++)
		for (int open = 1; open >= 0; open--)
			buf_printf(out, "mcp_chain_redis_fallbacks_total{use=\"%s\",outcome=\"%s\"} %llu\n",
				   r->uses[i].use, open ? "open" : "closed", r->uses[i].n[open]);
}

void redis_count_fallback(struct redis *r, const char *use, bool open)
{
	size_t i = 0;
	while (i < MAX_USES && r->uses[i].use && strcmp(r->uses[i].use, use) != 0)
		i++;
	if (i == MAX_USES)
		i = MAX_USES - 1;   /* more users than foreseen: counted with the last */
	struct fallback *f = &r->uses[i];
	if (!f->use)
		f->use = use;
	f->n[open]++;
	if (!f->logged) {
		f->logged = true;
		log_warn("redis: %s goes on without the store (%s) until it is back", use,
			 open ? "failing open: not enforced" : "failing closed: refused");
	}
}
