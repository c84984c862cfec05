/*
 * replay.c - `mcp-chain replay FILE`: a stdio MCP server that answers
 * from a recording made with --record, so that a recording attached to a
 * bug report (or a test) runs without the real servers.
 *
 * A request is matched to a recorded client request by its method and
 * params (`_meta` aside; `initialize` by its method alone); the recorded
 * response goes back with the new request's id, preceded by the progress
 * notifications the recording shows for that request (with the new
 * progress token), at the pace the recording shows (clients are known to
 * lose progress that arrives together with its response). A value the
 * recording shows redacted matches any. Equal requests are answered in recorded order, the
 * last answer repeating. Anything unmatched gets an error saying so.
 */
#include "cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"

#define REPLAY_UNMATCHED -32000

/* One recorded exchange. */
struct exchange {
	const char *method;   /* borrowed from request */
	json_t *request;      /* the client's message */
	json_t *response;     /* the answer, or NULL if the recording has none */
	json_t *progress;     /* notifications/progress for it, in order */
	json_t *times;        /* seconds after the request: each progress, then the response */
	double t;             /* when the request was recorded */
	bool used;
};

struct replay;

/* An answer on its way: its messages, each at its recorded offset. */
struct sending {
	struct sending *next;
	struct replay *r;
	ev_timer timer;
	json_t *msgs;         /* ready to send, in order */
	json_t *times;        /* borrowed from the exchange */
	size_t next_msg;
};

struct replay {
	struct exchange *ex;
	size_t nex;
	struct writer out;
	struct framer in_fr;
	ev_io in_io;
	bool in_open;
	struct sending *sending;
};

/* Params without _meta (new reference; an empty object when absent). */
static json_t *plain_params(json_t *msg)
{
	json_t *p = json_object_get(msg, "params");
	json_t *c = json_is_object(p) ? json_copy(p) : p ? json_incref(p) : json_object();
	if (json_is_object(c))
		json_object_del(c, "_meta");
	return c;
}

/* Matches a recorded value with a live one (cli.h says how). */
bool cli_replay_same(json_t *rec, json_t *live)
{
	const char *s = json_string_value(rec);
	if (s && strstr(s, "[REDACTED]"))
		return true;
	if (json_is_object(rec) && json_is_object(live)) {
		const char *k;
		json_t *v;
		if (json_object_size(rec) != json_object_size(live))
			return false;
		json_object_foreach(rec, k, v)
			if (!json_object_get(live, k) || !cli_replay_same(v, json_object_get(live, k)))
				return false;
		return true;
	}
	if (json_is_array(rec) && json_is_array(live)) {
		if (json_array_size(rec) != json_array_size(live))
			return false;
		for (size_t i = 0; i < json_array_size(rec); i++)
			if (!cli_replay_same(json_array_get(rec, i), json_array_get(live, i)))
				return false;
		return true;
	}
	return json_equal(rec, live);
}

/* The exchange whose request has id ID and no response yet. */
static struct exchange *open_exchange(struct replay *r, json_t *id)
{
	for (size_t i = r->nex; i-- > 0;)
		if (!r->ex[i].response && json_equal(json_object_get(r->ex[i].request, "id"), id))
			return &r->ex[i];
	return NULL;
}

/* The open exchange whose progress token is TOKEN. */
static struct exchange *by_token(struct replay *r, json_t *token)
{
	for (size_t i = r->nex; i-- > 0 && token;)
		if (!r->ex[i].response && json_equal(rpc_progress_token(r->ex[i].request), token))
			return &r->ex[i];
	return NULL;
}

/* Seconds of an ISO-8601 UTC time as --record writes it; 0 if unreadable. */
static double parse_time(const char *t)
{
	struct tm tm = { 0 };
	const char *rest = t ? strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!rest)
		return 0;
	double frac = *rest == '.' ? strtod(rest, NULL) : 0;
	return (double)timegm(&tm) + frac;
}

/* Adds one recorded line. Returns 0, or -1 when it is not a recording line. */
static int add_line(struct replay *r, json_t *entry)
{
	const char *dir = json_string_value(json_object_get(entry, "dir"));
	json_t *msg = json_object_get(entry, "msg");
	double t = parse_time(json_string_value(json_object_get(entry, "t")));
	if (!dir || (!msg && !json_object_get(entry, "raw")))
		return -1;
	if (!json_is_object(msg))
		return 0;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (strcmp(dir, "in") == 0 && method && id) {
		struct exchange *ex = realloc(r->ex, (r->nex + 1) * sizeof *ex);
		if (!ex)
			return -1;
		r->ex = ex;
		r->ex[r->nex++] = (struct exchange){ json_string_value(json_object_get(msg, "method")),
			json_incref(msg), NULL, json_array(), json_array(), t, false };
	} else if (strcmp(dir, "out") == 0 && !method && id) {
		struct exchange *ex = open_exchange(r, id);
		if (ex) {
			ex->response = json_incref(msg);
			json_array_append_new(ex->times, json_real(t > ex->t ? t - ex->t : 0));
		}
	} else if (strcmp(dir, "out") == 0 && method && strcmp(method, "notifications/progress") == 0) {
		struct exchange *ex = by_token(r, json_object_get(json_object_get(msg, "params"), "progressToken"));
		if (ex) {
			json_array_append(ex->progress, msg);
			json_array_append_new(ex->times, json_real(t > ex->t ? t - ex->t : 0));
		}
	}
	return 0;
}

/* Loads the recording; returns 0 or -1 (reported). */
static int load(struct replay *r, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	if (!f) {
		cli_error("replay: cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (n <= 1)
			continue;
		json_error_t je;
		json_t *entry = json_loadb(line, (size_t)n, 0, &je);
		if (!entry || add_line(r, entry) < 0) {
			cli_error("replay: %s:%zu: not a recording line (%s)", path, lineno,
				  entry ? "no dir/msg" : je.text);
			rc = -1;
		}
		json_decref(entry);
	}
	free(line);
	fclose(f);
	return rc;
}

/* The recorded exchange for request MSG, or NULL. */
static struct exchange *match(struct replay *r, json_t *msg, const char *method)
{
	struct exchange *last = NULL;
	json_t *want = plain_params(msg);
	bool any_params = strcmp(method, "initialize") == 0;
	for (size_t i = 0; i < r->nex; i++) {
		struct exchange *e = &r->ex[i];
		if (!e->response || strcmp(e->method, method) != 0)
			continue;
		json_t *have = plain_params(e->request);
		bool ok = any_params || cli_replay_same(have, want);
		json_decref(have);
		if (!ok)
			continue;
		if (!e->used) {
			json_decref(want);
			return e;
		}
		last = e;
	}
	json_decref(want);
	return last;
}

/* Stops once input has ended and every answer is out. */
static void maybe_done(struct replay *r)
{
	if (!r->in_open && !r->sending)
		ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* Unlinks and frees S. */
static void sending_free(struct sending *s)
{
	for (struct sending **pp = &s->r->sending; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	ev_timer_stop(EV_DEFAULT, &s->timer);
	json_decref(s->msgs);
	free(s);
}

/* Recorded offset of message I of S. */
static double offset(struct sending *s, size_t i)
{
	return json_number_value(json_array_get(s->times, i));
}

/* Sends what is due of S and waits for the next; frees S at the end. */
static void send_due(struct sending *s)
{
	struct replay *r = s->r;
	for (;;) {
		json_t *m = json_array_get(s->msgs, s->next_msg);
		if (!json_is_null(m))
			writer_send(&r->out, m);
		s->next_msg++;
		if (s->next_msg >= json_array_size(s->msgs)) {
			sending_free(s);
			maybe_done(r);
			return;
		}
		double gap = offset(s, s->next_msg) - offset(s, s->next_msg - 1);
		if (gap > 0.0005) {
			ev_timer_set(&s->timer, gap, 0.);
			ev_timer_start(EV_DEFAULT, &s->timer);
			return;
		}
	}
}

/* The next message of an answer is due. */
static void on_due(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	send_due(w->data);
}

/* Answers one request from the client. */
static void answer(struct replay *r, json_t *msg, const char *method)
{
	json_t *id = json_object_get(msg, "id");
	struct exchange *e = match(r, msg, method);
	if (!e) {
		json_t *reply = strcmp(method, "ping") == 0 ? rpc_result(id, json_object()) :
			rpc_errorf(id, REPLAY_UNMATCHED, "replay: nothing recorded for %s with these params",
				   method);
		writer_send(&r->out, reply);
		json_decref(reply);
		return;
	}
	e->used = true;
	struct sending *snd = calloc(1, sizeof *snd);
	if (!snd)
		return;
	snd->r = r;
	snd->msgs = json_array();
	snd->times = e->times;
	json_t *token = rpc_progress_token(msg);
	size_t i;
	json_t *p;
	json_array_foreach(e->progress, i, p) {
		json_t *n = json_deep_copy(p);
		if (token)
			json_object_set(json_object_get(n, "params"), "progressToken", token);
		json_array_append_new(snd->msgs, token ? n : json_null());  /* none asked: none sent */
		if (!token)
			json_decref(n);
	}
	json_t *reply = json_copy(e->response);
	json_object_set(reply, "id", id);
	json_array_append_new(snd->msgs, reply);
	snd->next = r->sending;
	r->sending = snd;
	ev_init(&snd->timer, on_due);
	snd->timer.data = snd;
	send_due(snd);
}

/* One line from the client. */
static void on_line(struct replay *r, const char *line, size_t len)
{
	json_t *err = NULL, *msg = rpc_parse(line, len, &err);
	struct rpc_info info;
	if (!msg) {
		writer_send(&r->out, err);
		json_decref(err);
		return;
	}
	enum rpc_kind k = rpc_classify(msg, &info);
	if (k == RPC_REQUEST) {
		answer(r, msg, info.method);
	} else if (k == RPC_INVALID) {
		json_t *e = rpc_error(info.id, info.code, info.reason, NULL);
		writer_send(&r->out, e);
		json_decref(e);
	}
	json_decref(msg);
}

/* stdin is readable. */
static void on_in(struct ev_loop *loop, ev_io *w, int revents)
{
	struct replay *r = w->data;
	(void)revents;
	for (;;) {
		size_t len, total;
		const char *line;
		ssize_t n = framer_read(&r->in_fr, STDIN_FILENO, NULL);
		if (n < 0 && errno == EAGAIN)
			return;
		enum frame_kind k;
		while ((k = framer_next(&r->in_fr, &line, &len, &total)) != FRAME_NONE)
			if (k == FRAME_LINE)
				on_line(r, line, len);
		if (n <= 0) {
			ev_io_stop(loop, w);
			r->in_open = false;
			maybe_done(r);
			return;
		}
	}
}

/* Our stdout failed: the client went away. */
static void on_out_error(struct writer *w, int err, void *arg)
{
	struct replay *r = arg;
	(void)w;
	(void)err;
	ev_io_stop(EV_DEFAULT, &r->in_io);
	r->in_open = false;
	while (r->sending)
		sending_free(r->sending);
	ev_break(EV_DEFAULT, EVBREAK_ALL);
}

int cli_replay(const struct cli_opts *o)
{
	struct replay r = { 0 };
	int code = CLI_EXIT_OK;
	if (load(&r, o->pos[0]) < 0) {
		code = CLI_EXIT_RPC_ERROR;
	} else {
		writer_init(&r.out, STDOUT_FILENO, on_out_error, &r);
		framer_init(&r.in_fr, (size_t)1 << 30);
		fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
		ev_io_init(&r.in_io, on_in, STDIN_FILENO, EV_READ);
		r.in_io.data = &r;
		ev_io_start(EV_DEFAULT, &r.in_io);
		r.in_open = true;
		ev_run(EV_DEFAULT, 0);
		while (r.sending)
			sending_free(r.sending);
		ev_io_stop(EV_DEFAULT, &r.in_io);
		cli_drain(&r.out);
		writer_release(&r.out);
		framer_release(&r.in_fr);
	}
	for (size_t i = 0; i < r.nex; i++) {
		json_decref(r.ex[i].request);
		json_decref(r.ex[i].response);
		json_decref(r.ex[i].progress);
		json_decref(r.ex[i].times);
	}
	free(r.ex);
	return code;
}
