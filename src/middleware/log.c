/*
 * log.c - the "log" middleware module: an audit trail of one JSON line
 * per finished exchange (a request and its response), and optionally one
 * per notification, written to stderr, a file or syslog after redaction.
 *
 * Cost: the line of an exchange is made from its context when the
 * response passes (ctx->start, names, ctx->id_text, sizes, ctx->outcome): the
 * module keeps nothing per exchange but a copy of the params when
 * "params" asks for them, and reads (so has the chain parse) a message
 * only for a body it logs or an error's code and message. The line is
 * written as text straight into a reused buffer, and queued in its sink,
 * which writes once per loop iteration (log_sink.c). Only redaction,
 * which works on a tree, builds the line as a jansson object; both ways
 * give the same bytes.
 *
 * Cancelled exchanges: an exchange that its requester cancelled (or
 * left behind by going away) ends without a response; the chain calls
 * on_abandon and the line is written with outcome "cancelled".
 */
#include "mw_log.h"

#include <ev.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "log.h"
#include "log_int.h"
#include "redact.h"
#include "rpc.h"

#define TEXT_KEEP (64 * 1024)  /* line buffer memory kept between lines */

enum sink_kind { SINK_STDERR, SINK_FILE, SINK_SYSLOG };

struct log_mod {
	struct mw_module base;      /* must be first */
	enum sink_kind sink;
	char *path;                 /* SINK_FILE, after ${VAR} expansion */
	bool chain, params, result, notifications;
	int facility;               /* SINK_SYSLOG */
	char **methods;             /* NULL-terminated globs; NULL: all */
	struct redact *redact;      /* NULL: nothing to redact */
	struct log_sink *out;       /* the file or stderr, once started */
	struct buf text;            /* the line being made (reused) */
	char key[32];               /* this module's member in a scratch:
				     * the params kept ("params": true) */
};

static const char *const log_keys[] = {
	"sink", "path", "chain", "facility", "params", "result",
	"notifications", "methods", "redact", NULL,
};

/* ---- options ---- */

/* Reads the boolean option KEY, if present, into *OUT. */
static void opt_bool(json_t *opts, const char *key, bool *out, struct mw_build *b)
{
	json_t *v = json_object_get(opts, key);
	char p[32];
	if (!v)
		return;
	if (!json_is_boolean(v)) {
		snprintf(p, sizeof p, "/%s", key);
		mw_error(b, p, "must be true or false");
		return;
	}
	*out = json_is_true(v);
}

/* Parses "path", which goes with (and only with) the file sink. */
static void parse_path(struct log_mod *lm, json_t *v, struct mw_build *b)
{
	char err[256];
	if (lm->sink != SINK_FILE) {
		if (v)
			mw_error(b, "/path", "only with \"sink\": \"file\"");
		return;
	}
	if (!v) {
		mw_error(b, "/path", "missing: \"sink\": \"file\" needs the file to append to");
		return;
	}
	if (!json_is_string(v) || json_string_length(v) == 0) {
		mw_error(b, "/path", "must be a non-empty string");
		return;
	}
	lm->path = cfg_expand(json_string_value(v), err, sizeof err);
	if (!lm->path)
		mw_error(b, "/path", "%s", err);
}

/* Parses "facility", which goes with (and only with) the syslog sink. */
static void parse_facility(struct log_mod *lm, json_t *v, struct mw_build *b)
{
	if (lm->sink != SINK_SYSLOG) {
		if (v)
			mw_error(b, "/facility", "only with \"sink\": \"syslog\"");
		return;
	}
	const char *name = v ? json_string_value(v) : "user";
	lm->facility = name ? log_syslog_facility(name) : -1;
	if (lm->facility < 0)
		mw_error(b, "/facility", "must be one of %s", log_syslog_names);
}

/* Parses "sink" and the options that belong to one sink. */
static void parse_sink(struct log_mod *lm, json_t *opts, struct mw_build *b)
{
	json_t *v = json_object_get(opts, "sink");
	const char *s = v ? json_string_value(v) : "stderr";
	if (s && strcmp(s, "stderr") == 0) {
		lm->sink = SINK_STDERR;
	} else if (s && strcmp(s, "file") == 0) {
		lm->sink = SINK_FILE;
	} else if (s && strcmp(s, "syslog") == 0) {
		lm->sink = SINK_SYSLOG;
	} else {
		mw_error(b, "/sink", "must be \"stderr\", \"file\" or \"syslog\"");
		return;
	}
	parse_path(lm, json_object_get(opts, "path"), b);
	parse_facility(lm, json_object_get(opts, "facility"), b);
	if (json_object_get(opts, "chain") && lm->sink != SINK_FILE)
		mw_error(b, "/chain", "only with \"sink\": \"file\" (a hash chain needs a file)");
}

/* Parses "methods": globs of the methods to log. */
static void parse_methods(struct log_mod *lm, json_t *v, struct mw_build *b)
{
	size_t i, n = 0;
	json_t *e;
	if (!v)
		return;
	if (!json_is_array(v) || json_array_size(v) == 0) {
		mw_error(b, "/methods", "must be a non-empty array of method names or globs "
			 "(omit it to log every method)");
		return;
	}
	lm->methods = calloc(json_array_size(v) + 1, sizeof *lm->methods);
	json_array_foreach(v, i, e) {
		char p[48];
		snprintf(p, sizeof p, "/methods/%zu", i);
		if (!json_is_string(e) || json_string_length(e) == 0)
			mw_error(b, p, "must be a non-empty string, e.g. \"tools/call\" or \"resources/*\"");
		else if (lm->methods && !(lm->methods[n++] = strdup(json_string_value(e))))
			mw_error(b, p, "out of memory");
	}
}

/* ---- writing lines ---- */

/* L redacted, as text appended to OUT (bodies are copied first: they
 * belong to the exchange). Returns 0 or -1. */
static int text_redacted(const struct log_mod *lm, const struct log_line *l,
			 struct buf *out)
{
	json_t *line = log_line_json(l);
	json_t *copy = line ? json_deep_copy(line) : NULL;
	json_decref(line);
	if (!copy)
		return -1;
	redact_line(lm->redact, copy);
	int rc = json_dump_callback(copy, log_dump_to_buf, out, JSON_COMPACT);
	json_decref(copy);
	return rc;
}

/* Hands the text of a line (LEN bytes in lm->text) to the module's sink. */
static void deliver(struct log_mod *lm, size_t len)
{
	if (lm->sink == SINK_SYSLOG) {
		if (buf_append(&lm->text, "", 1) == 0)
			log_syslog_write(lm->facility, lm->text.data);
		return;
	}
	if (!lm->out && lm->sink == SINK_STDERR)
		lm->out = log_sink_stderr();   /* a module used without start */
	if (lm->out)
		log_sink_write_text(lm->out, lm->text.data, len);
}

/* Makes L's text (redacted if asked) and writes it. */
static void emit(struct log_mod *lm, const struct log_line *l)
{
	lm->text.off = lm->text.len = 0;
	int rc = lm->redact ? text_redacted(lm, l, &lm->text) : log_line_text(l, &lm->text);
	if (rc < 0)
		log_error("log: out of memory: an audit line was not written");
	else
		deliver(lm, lm->text.len);
	lm->text.len = 0;
	buf_shrink(&lm->text, TEXT_KEEP);
}

/* True when METHOD is one the module logs. */
static bool wanted(const struct log_mod *lm, const char *method)
{
	if (!lm->methods)
		return true;
	for (char **g = lm->methods; *g; g++)
		if (fnmatch(*g, method, 0) == 0)
			return true;
	return false;
}

/* True when the module logs the message (or exchange) CTX is about. */
static bool tracked(const struct log_mod *lm, const struct mw_ctx *ctx)
{
	return ctx->method && wanted(lm, ctx->method);
}

/* ---- exchanges ---- */

/* Keeps a copy of a request's params in its exchange's scratch (which
 * owns it): later modules may change the request. */
static void snapshot_params(struct log_mod *lm, struct mw_ctx *ctx, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	if (!params)
		return;
	json_t *copy = json_deep_copy(params);
	json_t *scratch = copy ? mw_scratch(ctx) : NULL;
	if (!scratch)
		json_decref(copy);
	if (!scratch || json_object_set_new(scratch, lm->key, copy) < 0)
		log_error("log: out of memory: the params of a request are not logged");
}

/* Drops what the module kept for CTX's exchange. */
static void forget(struct log_mod *lm, struct mw_ctx *ctx)
{
	if (lm->params && ctx->scratch)
		json_object_del(ctx->scratch, lm->key);
}

/* Fills L with what CTX says of its exchange as it ends now, the
 * response being BYTES_OUT bytes. */
static void exchange_line(const struct log_mod *lm, const struct mw_ctx *ctx,
			  size_t bytes_out, struct log_line *l)
{
	/* The clock, not the loop's cached ev_now(): "duration_us" runs to
	 * the response passing this module, and ev_now() would give 0 to an
	 * exchange answered within one loop iteration. */
	double us = (ev_time() - ctx->start) * 1e6;
	memset(l, 0, sizeof *l);
	l->time = ctx->start;
	l->from = ctx->dir == MW_TO_BACKEND ? "client" : "backend";
	l->client = ctx->client;
	l->protocol = ctx->protocol;
	l->backend = ctx->backend;
	l->method = ctx->method;
	l->name = ctx->name;
	l->id = ctx->id;             /* set when something asked mw_id() */
	l->id_text = ctx->id_text;
	l->duration_us = us > 0 ? (json_int_t)(us + 0.5) : 0;
	l->bytes_in = (json_int_t)ctx->request_bytes;
	l->bytes_out = (json_int_t)bytes_out;
	l->params = lm->params ? json_object_get(ctx->scratch, lm->key) : NULL;
}

/*
 * Sets L's outcome, and for an error its code and message, from the
 * response MSG; from CTX while the response travels unread (it is then
 * not an error: those are read).
 */
static void set_outcome(struct log_line *l, const struct mw_ctx *ctx, json_t *msg)
{
	static const char *const names[] = {
		[MW_OUTCOME_NONE] = "ok", [MW_OUTCOME_OK] = "ok",
		[MW_OUTCOME_TOOL_ERROR] = "tool_error", [MW_OUTCOME_ERROR] = "error",
	};
	json_t *err = msg ? json_object_get(msg, "error") : NULL;
	if (!msg) {
		l->outcome = names[ctx->outcome];
	} else if (!err) {
		json_t *res = json_object_get(msg, "result");
		l->outcome = json_is_true(json_object_get(res, "isError")) ? "tool_error" : "ok";
	} else {
		json_t *code = json_object_get(err, "code");
		json_t *message = json_object_get(err, "message");
		l->outcome = "error";
		l->code = json_is_integer(code) ? code : NULL;
		l->message = json_is_string(message) ? message : NULL;
	}
}

/* Writes the line of a notification (MSG may be NULL when unread). */
static void write_notification(struct log_mod *lm, const struct mw_ctx *ctx, json_t *msg)
{
	struct log_line l = {
		.time = ctx->start,
		.notification = true,
		.from = ctx->dir == MW_TO_BACKEND ? "client" : "backend",
		.client = ctx->client,
		.protocol = ctx->protocol,
		.backend = ctx->backend,
		.method = ctx->method,
		.params = lm->params ? json_object_get(msg, "params") : NULL,
	};
	emit(lm, &l);
}

/* ---- hooks ---- */

/*
 * Whether the next hook needs the message: a request or notification
 * only for params it logs, a response only for a result it logs or an
 * error's code and message (an unknown outcome is read to be safe).
 */
static bool log_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	struct log_mod *lm = (struct log_mod *)m;
	bool need;
	if (ctx->kind == RPC_RESPONSE)
		need = lm->result || ctx->outcome == MW_OUTCOME_ERROR ||
		       ctx->outcome == MW_OUTCOME_NONE;
	else if (ctx->kind == RPC_REQUEST)
		need = lm->params;
	else
		need = lm->notifications && lm->params;
	return need && tracked(lm, ctx);
}

/* A request's params may be kept; a notification may be logged at once. */
static enum mw_verdict log_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct log_mod *lm = (struct log_mod *)m;
	if (ctx->kind == RPC_REQUEST) {
		if (lm->params && *msg && tracked(lm, ctx))
			snapshot_params(lm, ctx, *msg);
		return MW_PASS;
	}
	if (lm->notifications && tracked(lm, ctx))
		write_notification(lm, ctx, *msg);
	return MW_PASS;
}

/* The response ends the exchange: its line is written (*MSG may be NULL
 * when unread). */
static enum mw_verdict log_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct log_mod *lm = (struct log_mod *)m;
	struct log_line l;
	if (!tracked(lm, ctx))
		return MW_PASS;
	exchange_line(lm, ctx, ctx->response_bytes, &l);
	set_outcome(&l, ctx, *msg);
	if (lm->result && *msg) {
		l.result = json_object_get(*msg, "result");
		l.error = json_object_get(*msg, "error");
	}
	emit(lm, &l);
	forget(lm, ctx);
	return MW_PASS;
}

/* The exchange ended without a response (cancelled, or its client left). */
static void log_on_abandon(struct mw_module *m, struct mw_ctx *ctx)
{
	struct log_mod *lm = (struct log_mod *)m;
	struct log_line l;
	if (!tracked(lm, ctx))
		return;
	exchange_line(lm, ctx, 0, &l);
	l.outcome = "cancelled";
	emit(lm, &l);
	forget(lm, ctx);
}

/* Opens the file, takes the stderr sink, or names the syslog identity. */
static int log_start(struct mw_module *m)
{
	struct log_mod *lm = (struct log_mod *)m;
	if (lm->sink == SINK_FILE && !lm->out &&
	    !(lm->out = log_sink_open(lm->path, lm->chain)))
		return -1;
	if (lm->sink == SINK_STDERR && !lm->out && !(lm->out = log_sink_stderr())) {
		log_error("log: out of memory");
		return -1;
	}
	if (lm->sink == SINK_SYSLOG)
		log_syslog_open();
	return 0;
}

/* Writes what is still queued, lets go of the sink and frees the module. */
static void log_destroy(struct mw_module *m)
{
	struct log_mod *lm = (struct log_mod *)m;
	log_sink_release(lm->out);
	buf_release(&lm->text);
	redact_free(lm->redact);
	for (char **g = lm->methods; g && *g; g++)
		free(*g);
	free(lm->methods);
	free(lm->path);
	free(lm);
}

static const struct mw_module_ops log_ops = {
	.name = "log",
	.reads = log_reads,
	.on_message = log_on_message,
	.on_response = log_on_response,
	.on_abandon = log_on_abandon,
	.start = log_start,
	.destroy = log_destroy,
};

/* Validates the options and makes the module (nothing is opened). */
struct mw_module *mw_log_create(json_t *opts, struct mw_build *b)
{
	static unsigned serial;
	int before = b->nerr;
	struct log_mod *lm = calloc(1, sizeof *lm);
	if (!lm) {
		mw_error(b, "", "out of memory");
		return NULL;
	}
	lm->base.ops = &log_ops;
	snprintf(lm->key, sizeof lm->key, "log#%u", ++serial);
	mw_check_keys(b, opts, log_keys);
	parse_sink(lm, opts, b);
	opt_bool(opts, "chain", &lm->chain, b);
	opt_bool(opts, "params", &lm->params, b);
	opt_bool(opts, "result", &lm->result, b);
	opt_bool(opts, "notifications", &lm->notifications, b);
	parse_methods(lm, json_object_get(opts, "methods"), b);
	redact_parse(json_object_get(opts, "redact"), b, &lm->redact);
	if (b->nerr > before) {
		log_destroy(&lm->base);
		return NULL;
	}
	return &lm->base;
}
