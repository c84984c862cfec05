/*
 * log.c - the "log" middleware module: an audit trail of one JSON line
 * per finished exchange (a request and its response), and optionally one
 * per notification, written to stderr, a file or syslog after redaction.
 *
 * Cost: a request leaves a small record (time, names, id, size) in its
 * exchange's scratch; bodies are copied only when "params" or "result"
 * ask for them, and a line is serialized once, when it is written.
 *
 * Cancelled exchanges: an exchange that its requester cancelled (or
 * left behind by going away) ends without a response; the chain calls
 * on_abandon and the record is written with outcome "cancelled".
 */
#include "mw_log.h"

#include <ev.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "hmap.h"
#include "log.h"
#include "log_int.h"
#include "rpc.h"

#define MESSAGE_MAX 256   /* bytes of an error message kept in a line */

enum sink_kind { SINK_STDERR, SINK_FILE, SINK_SYSLOG };

struct log_mod {
	struct mw_module base;      /* must be first */
	enum sink_kind sink;
	char *path;                 /* SINK_FILE, after ${VAR} expansion */
	bool chain, params, result, notifications;
	int facility;               /* SINK_SYSLOG */
	char **methods;             /* NULL-terminated globs; NULL: all */
	struct log_redact *redact;  /* NULL: nothing to redact */
	struct log_sink *file;      /* once started */
	char key[32];               /* this module's member in a scratch */
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

/* Sets KEY to the string S unless S is NULL. */
static void set_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

/* Copies member KEY of SRC (if any) into DST. */
static void copy(json_t *dst, json_t *src, const char *key)
{
	json_t *v = json_object_get(src, key);
	if (v)
		json_object_set(dst, key, v);
}

/* Loop time T as "2025-01-31T12:34:56.789Z". */
static json_t *iso_time(double t)
{
	char buf[48];
	struct tm tm;
	time_t sec = (time_t)t;
	int ms = (int)((t - (double)sec) * 1000.0);
	gmtime_r(&sec, &tm);
	size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof buf - n, ".%03dZ", ms < 0 ? 0 : ms > 999 ? 999 : ms);
	return json_string(buf);
}

/* Writes TEXT to the module's sink. */
static void write_text(struct log_mod *lm, const char *text)
{
	if (lm->sink == SINK_SYSLOG)
		log_syslog_write(lm->facility, text);
	else
		log_write_line(2, text, strlen(text), "\n", 1);   /* dropped if stderr is full */
}

/* Redacts a copy of LINE (borrowed) and writes it. */
static void emit(struct log_mod *lm, json_t *line)
{
	json_t *out = lm->redact ? json_deep_copy(line) : json_incref(line);
	if (!out) {
		log_error("log: out of memory: an audit line was not written");
		return;
	}
	if (lm->redact)
		log_redact_line(lm->redact, out);
	if (lm->sink == SINK_FILE) {
		if (lm->file)
			log_sink_write(lm->file, out);
	} else {
		char *text = json_dumps(out, JSON_COMPACT);
		if (text)
			write_text(lm, text);
		free(text);
	}
	json_decref(out);
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

/* A new line with the head of REC; CTX (or NULL) has the final names. */
static json_t *line_new(json_t *rec, const struct mw_ctx *ctx)
{
	json_t *line = json_object();
	json_object_set_new(line, "time",
			    iso_time(json_real_value(json_object_get(rec, "start"))));
	copy(line, rec, "from");
	if (ctx && ctx->client)
		set_str(line, "client", ctx->client);
	else
		copy(line, rec, "client");
	if (ctx && ctx->backend)
		set_str(line, "backend", ctx->backend);
	else
		copy(line, rec, "backend");
	copy(line, rec, "method");
	copy(line, rec, "name");
	copy(line, rec, "id");
	return line;
}

/* MESSAGE cut to MESSAGE_MAX bytes on a character boundary. */
static json_t *short_message(json_t *message)
{
	const char *s = json_string_value(message);
	size_t n = json_string_length(message);
	if (n <= MESSAGE_MAX)
		return json_incref(message);
	for (n = MESSAGE_MAX; n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; n--)
		;
	return json_sprintf("%.*s...", (int)n, s);
}

/* Adds "outcome" (and for an error its code and message) from MSG. */
static void set_outcome(json_t *line, json_t *msg)
{
	json_t *err = json_object_get(msg, "error");
	json_t *res = json_object_get(msg, "result");
	if (!err) {
		set_str(line, "outcome", json_is_true(json_object_get(res, "isError")) ?
			"tool_error" : "ok");
		return;
	}
	set_str(line, "outcome", "error");
	json_t *code = json_object_get(err, "code");
	json_t *message = json_object_get(err, "message");
	if (json_is_integer(code))
		json_object_set(line, "code", code);
	if (json_is_string(message))
		json_object_set_new(line, "message", short_message(message));
}

/* Adds duration, sizes and bodies to LINE (stolen), then writes it. */
static void complete(struct log_mod *lm, json_t *line, json_t *rec, size_t bytes_out,
		     json_t *msg)
{
	double us = (ev_time() - json_real_value(json_object_get(rec, "start"))) * 1e6;
	json_object_set_new(line, "duration_us", json_integer(us > 0 ? (json_int_t)(us + 0.5) : 0));
	copy(line, rec, "bytes_in");
	json_object_set_new(line, "bytes_out", json_integer((json_int_t)bytes_out));
	copy(line, rec, "params");
	if (lm->result && msg) {
		copy(line, msg, "result");
		copy(line, msg, "error");
	}
	emit(lm, line);
	json_decref(line);
}

/* Writes the line of an exchange that ended without a response. */
static void write_cancelled(struct log_mod *lm, json_t *rec)
{
	json_t *line = line_new(rec, NULL);
	set_str(line, "outcome", "cancelled");
	complete(lm, line, rec, 0, NULL);
}

/* Writes the line of a notification. */
static void write_notification(struct log_mod *lm, const struct mw_ctx *ctx, json_t *msg)
{
	json_t *line = json_object();
	json_object_set_new(line, "time", iso_time(ctx->start));
	set_str(line, "kind", "notification");
	set_str(line, "from", ctx->dir == MW_TO_BACKEND ? "client" : "backend");
	set_str(line, "client", ctx->client);
	set_str(line, "backend", ctx->backend);
	set_str(line, "method", ctx->method);
	if (lm->params)
		copy(line, msg, "params");
	emit(lm, line);
	json_decref(line);
}

/* ---- open exchanges ---- */

/* Records a request in its exchange's scratch (which owns the record). */
static void track(struct log_mod *lm, struct mw_ctx *ctx, json_t *msg)
{
	json_t *scratch = mw_scratch(ctx);
	json_t *rec = json_object();
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	if (!scratch || !rec || json_object_set_new(scratch, lm->key, rec) < 0) {
		log_error("log: out of memory: an exchange is not logged");
		return;
	}
	json_object_set_new(rec, "start", json_real(ctx->start));
	set_str(rec, "from", ctx->dir == MW_TO_BACKEND ? "client" : "backend");
	set_str(rec, "client", ctx->client);
	set_str(rec, "backend", ctx->backend);
	set_str(rec, "method", ctx->method);
	set_str(rec, "name", ctx->name);
	if (id)
		json_object_set(rec, "id", id);
	json_object_set_new(rec, "bytes_in", json_integer((json_int_t)ctx->request_bytes));
	if (lm->params && params)   /* a snapshot: later modules may change it */
		json_object_set_new(rec, "params", json_deep_copy(params));
}

/* ---- hooks ---- */

/* A request is recorded; a notification may be logged at once. */
static enum mw_verdict log_on_message(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct log_mod *lm = (struct log_mod *)m;
	if (!ctx->method)
		return MW_PASS;
	if (ctx->kind == RPC_REQUEST) {
		if (wanted(lm, ctx->method))
			track(lm, ctx, *msg);
		return MW_PASS;
	}
	if (lm->notifications && wanted(lm, ctx->method))
		write_notification(lm, ctx, *msg);
	return MW_PASS;
}

/* The response ends the exchange: its line is written. */
static enum mw_verdict log_on_response(struct mw_module *m, struct mw_ctx *ctx, json_t **msg)
{
	struct log_mod *lm = (struct log_mod *)m;
	json_t *rec = json_object_get(ctx->scratch, lm->key);
	if (!rec)
		return MW_PASS;
	json_t *line = line_new(rec, ctx);
	set_outcome(line, *msg);
	complete(lm, line, rec, ctx->response_bytes, *msg);
	json_object_del(ctx->scratch, lm->key);
	return MW_PASS;
}

/* The exchange ended without a response (cancelled, or its client left). */
static void log_on_abandon(struct mw_module *m, struct mw_ctx *ctx)
{
	struct log_mod *lm = (struct log_mod *)m;
	json_t *rec = json_object_get(ctx->scratch, lm->key);
	if (!rec)
		return;
	write_cancelled(lm, rec);
	json_object_del(ctx->scratch, lm->key);
}

/* Opens the file or names the syslog identity. */
static int log_start(struct mw_module *m)
{
	struct log_mod *lm = (struct log_mod *)m;
	if (lm->sink == SINK_FILE && !lm->file &&
	    !(lm->file = log_sink_open(lm->path, lm->chain)))
		return -1;
	if (lm->sink == SINK_SYSLOG)
		log_syslog_open();
	return 0;
}

/* Writes what is still pending, closes the file and frees the module. */
static void log_destroy(struct mw_module *m)
{
	struct log_mod *lm = (struct log_mod *)m;
	log_sink_release(lm->file);
	log_redact_free(lm->redact);
	for (char **g = lm->methods; g && *g; g++)
		free(*g);
	free(lm->methods);
	free(lm->path);
	free(lm);
}

static const struct mw_module_ops log_ops = {
	.name = "log",
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
	log_redact_parse(json_object_get(opts, "redact"), b, &lm->redact);
	if (b->nerr > before) {
		log_destroy(&lm->base);
		return NULL;
	}
	return &lm->base;
}
