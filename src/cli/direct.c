/*
 * direct.c - `mcp-chain --direct`: newline-delimited JSON-RPC on stdio with
 * no handshake, for scripts. A request whose method is a tool's name (as a
 * client sees it, '.' accepted for the separator) calls that tool with
 * `params` as its arguments and is answered with the tool's result;
 * `rpc.discover` lists the tools as methods with their input schemas; MCP
 * methods (`tools/list`, `resources/read`...) pass to the chain as they are.
 *
 * Like the other shell commands this is a client of a chain it spawns and
 * initializes itself, so every middleware applies. Progress of a call
 * arrives as notifications/progress whose progressToken is the request's id.
 */
#include "cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "mcpc_version.h"
#include "rpc.h"

struct direct;

/* One request of the script's, sent on to the chain. */
struct dreq {
	struct dreq *next;
	struct direct *d;
	json_t *client_id;       /* owned */
	json_int_t id;           /* ours, at the chain */
	char token[40];          /* our progress token, for a tool call */
};

struct direct {
	const struct cli_opts *o;
	const char *sep;
	struct conn *conn;
	struct writer out;       /* our stdout */
	struct framer in_fr;     /* our stdin */
	ev_io in_io;
	bool in_open;
	bool ready;
	json_t *held;            /* lines that came before the chain was ready */
	json_t *tools;           /* the tools as the chain lists them */
	bool tools_loading;
	struct dreq *reqs;
	unsigned long next_token;
	ev_signal sigint, sigterm;
};

static void handle(struct direct *d, json_t *msg);

/* Sends MSG (stolen) to the script. */
static void emit(struct direct *d, json_t *msg)
{
	writer_send(&d->out, msg);
	json_decref(msg);
}

/* Ends when the script's input has ended and nothing is open. */
static void maybe_finish(struct direct *d)
{
	if (!d->in_open && !d->reqs && !d->tools_loading && d->ready &&
	    json_array_size(d->held) == 0)
		conn_finish(d->conn, CLI_EXIT_OK);
}

/* Unlinks and frees R. */
static void dreq_free(struct direct *d, struct dreq *r)
{
	for (struct dreq **pp = &d->reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	json_decref(r->client_id);
	free(r);
}

/* The chain answered a request of the script's: pass it back. */
static void on_reply(struct conn *c, json_t *result, json_t *error, void *arg)
{
	struct dreq *r = arg;
	struct direct *d = r->d;
	(void)c;
	if (error)
		emit(d, json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", r->client_id, "error", error));
	else
		emit(d, rpc_result(r->client_id, json_incref(result)));
	dreq_free(d, r);
	maybe_finish(d);
}

/* Sends METHOD with PARAMS (stolen) for the script's request ID. */
static void forward(struct direct *d, json_t *id, const char *method, json_t *params, bool progress)
{
	struct dreq *r = calloc(1, sizeof *r);
	if (!r) {
		json_decref(params);
		emit(d, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory", NULL));
		return;
	}
	r->d = d;
	r->client_id = json_incref(id);
	r->next = d->reqs;
	d->reqs = r;
	if (progress) {
		snprintf(r->token, sizeof r->token, "direct-%lu", ++d->next_token);
		json_t *meta = json_object_get(params, "_meta");
		if (!json_is_object(meta))
			json_object_set_new(params, "_meta", meta = json_object());
		json_object_set_new(meta, "progressToken", json_string(r->token));
	}
	r->id = conn_request(d->conn, method, params, on_reply, r);
	if (r->id < 0) {
		emit(d, rpc_error(id, RPC_BACKEND_GONE, "the chain is gone", NULL));
		dreq_free(d, r);
	}
}

/* rpc.discover: the callable methods (tools) with their input schemas. */
static json_t *discover(struct direct *d)
{
	json_t *methods = json_array();
	size_t i;
	json_t *t;
	json_array_foreach(d->tools, i, t) {
		json_t *schema = json_object_get(t, "inputSchema");
		json_t *params = json_array(), *req = json_object_get(schema, "required");
		const char *k;
		json_t *prop;
		json_object_foreach(json_object_get(schema, "properties"), k, prop) {
			bool required = false;
			size_t j;
			json_t *r;
			json_array_foreach(req, j, r)
				required |= json_is_string(r) && strcmp(json_string_value(r), k) == 0;
			json_array_append_new(params, json_pack("{s:s,s:b,s:O}", "name", k,
								"required", required, "schema", prop));
		}
		json_t *m = json_pack("{s:O,s:s,s:o,s:O?}", "name", json_object_get(t, "name"),
				      "paramStructure", "by-name", "params", params,
				      "inputSchema", schema);
		if (json_is_string(json_object_get(t, "description")))
			json_object_set(m, "description", json_object_get(t, "description"));
		json_array_append_new(methods, m);
	}
	return json_pack("{s:s,s:{s:s,s:s},s:o}", "openrpc", "1.3.2", "info", "title",
			 "mcp-chain --direct", "version", MCPC_VERSION, "methods", methods);
}

/* A request whose method is not MCP's: a tool, or rpc.discover. */
static void call_tool(struct direct *d, json_t *id, const char *method, json_t *params)
{
	if (strcmp(method, "rpc.discover") == 0) {
		emit(d, rpc_result(id, discover(d)));
		return;
	}
	json_t *tool = cli_tool_find(d->tools, method, d->sep);
	if (!tool) {
		emit(d, rpc_errorf(id, RPC_METHOD_NOT_FOUND, "Method not found: %s (rpc.discover lists "
				   "the tools)", method));
		return;
	}
	char err[400];
	json_t *args = params ? params : json_object();
	if (cli_schema_check(json_object_get(tool, "inputSchema"), args, err, sizeof err) < 0) {
		emit(d, rpc_error(id, RPC_INVALID_PARAMS, err,
				  json_pack("{s:O?}", "inputSchema", json_object_get(tool, "inputSchema"))));
		if (!params)
			json_decref(args);
		return;
	}
	json_t *call = json_pack("{s:O,s:O}", "name", json_object_get(tool, "name"), "arguments", args);
	if (!params)
		json_decref(args);
	forward(d, id, "tools/call", call, true);
}

/* The script cancels one of its requests: tell the chain, answer nothing. */
static void cancel(struct direct *d, json_t *params)
{
	json_t *cid = json_object_get(params, "requestId");
	for (struct dreq *r = d->reqs; r; r = r->next) {
		if (cid && json_equal(r->client_id, cid)) {
			json_t *p = json_pack("{s:I}", "requestId", (json_int_t)r->id);
			if (json_object_get(params, "reason"))
				json_object_set(p, "reason", json_object_get(params, "reason"));
			conn_notify(d->conn, "notifications/cancelled", p);
			conn_forget(d->conn, r->id);
			dreq_free(d, r);
			maybe_finish(d);
			return;
		}
	}
}

/* One message from the script. */
static void handle(struct direct *d, json_t *msg)
{
	struct rpc_info info;
	enum rpc_kind kind = rpc_classify(msg, &info);
	json_t *params = json_object_get(msg, "params");
	if (kind == RPC_INVALID) {
		emit(d, rpc_error(info.id, info.code, info.reason, NULL));
		return;
	}
	if (kind == RPC_RESPONSE)
		return;  /* we never ask the script anything */
	if (kind == RPC_NOTIFICATION) {
		if (strcmp(info.method, "notifications/cancelled") == 0)
			cancel(d, params);
		else if (strcmp(info.method, "notifications/initialized") != 0)
			conn_notify(d->conn, info.method, json_incref(params));
		return;
	}
	if (strcmp(info.method, "initialize") == 0) {  /* an MCP client may use us too */
		emit(d, rpc_result(info.id, json_incref(conn_server_info(d->conn))));
		return;
	}
	if (strchr(info.method, '/') || strcmp(info.method, "ping") == 0) {
		forward(d, info.id, info.method, json_incref(params), false);
		return;
	}
	if (params && !json_is_object(params)) {
		emit(d, rpc_error(info.id, RPC_INVALID_PARAMS,
				  "params must be an object: the tool's arguments by name", NULL));
		return;
	}
	call_tool(d, info.id, info.method, params);
}

/* One line from the script. */
static void on_line(struct direct *d, const char *line, size_t len)
{
	json_t *err = NULL;
	json_t *msg = rpc_parse(line, len, &err);
	if (!msg) {
		emit(d, err);
		return;
	}
	if (!d->ready || d->tools_loading || json_array_size(d->held) > 0)
		json_array_append(d->held, msg);  /* in order, once the tools are known */
	else
		handle(d, msg);
	json_decref(msg);
}

/* Handles what was held while the tools were loading. */
static void replay_held(struct direct *d)
{
	while (json_array_size(d->held) > 0 && !d->tools_loading) {
		json_t *msg = json_incref(json_array_get(d->held, 0));
		json_array_remove(d->held, 0);
		handle(d, msg);
		json_decref(msg);
	}
	maybe_finish(d);
}

/* Our stdin is readable. */
static void on_in(struct ev_loop *loop, ev_io *w, int revents)
{
	struct direct *d = w->data;
	(void)loop;
	(void)revents;
	for (;;) {
		size_t len, total;
		const char *line;
		ssize_t n = framer_read(&d->in_fr, STDIN_FILENO, NULL);
		if (n < 0 && errno == EAGAIN)
			return;
		enum frame_kind k;
		while ((k = framer_next(&d->in_fr, &line, &len, &total)) != FRAME_NONE) {
			if (k == FRAME_LINE)
				on_line(d, line, len);
			else
				emit(d, rpc_error(NULL, RPC_INVALID_REQUEST, "message too large", NULL));
		}
		if (n <= 0) {
			ev_io_stop(EV_DEFAULT, &d->in_io);
			d->in_open = false;
			maybe_finish(d);
			return;
		}
	}
}

/* The tools arrived (at start, or after list_changed). */
static void on_tools(struct conn *c, json_t *items, json_t *error, void *arg)
{
	struct direct *d = arg;
	(void)c;
	d->tools_loading = false;
	if (error)
		cli_error("tools/list: %s", cli_error_message(error));
	json_decref(d->tools);
	d->tools = items ? json_incref(items) : json_array();
	replay_held(d);
}

/* Loads the tools again. */
static void load_tools(struct direct *d)
{
	d->tools_loading = true;
	conn_list_all(d->conn, "tools/list", "tools", on_tools, d);
}

/* A notification from the chain: progress mapped to the script's id. */
static void on_notify(struct conn *c, const char *method, json_t *params, void *arg)
{
	struct direct *d = arg;
	(void)c;
	if (strcmp(method, "notifications/progress") == 0) {
		const char *tok = json_string_value(json_object_get(params, "progressToken"));
		for (struct dreq *r = d->reqs; r && tok; r = r->next) {
			if (r->token[0] && strcmp(r->token, tok) == 0) {
				json_t *p = json_copy(params);
				json_object_set(p, "progressToken", r->client_id);
				emit(d, rpc_notification(method, p));
				return;
			}
		}
		return;
	}
	if (strcmp(method, "notifications/tools/list_changed") == 0 && d->ready && !d->tools_loading)
		load_tools(d);
	emit(d, rpc_notification(method, json_incref(params)));
}

/* The chain is up: learn its tools, then serve. */
static void on_ready(struct conn *c, bool ready, void *arg)
{
	struct direct *d = arg;
	size_t i;
	json_t *msg;
	(void)c;
	if (ready) {
		d->ready = true;
		load_tools(d);
		return;
	}
	json_array_foreach(d->held, i, msg)  /* nobody will answer them now */
		if (json_object_get(msg, "id") && json_object_get(msg, "method"))
			emit(d, rpc_error(json_object_get(msg, "id"), RPC_BACKEND_GONE,
					  "the chain did not come up (see stderr)", NULL));
	json_array_clear(d->held);
}

/* Our stdout failed (the script went away). */
static void on_out_error(struct writer *w, int err, void *arg)
{
	struct direct *d = arg;
	(void)w;
	(void)err;
	conn_finish(d->conn, CLI_EXIT_OK);
}

/* SIGINT / SIGTERM: end now. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct direct *d = w->data;
	(void)loop;
	(void)revents;
	conn_finish(d->conn, CLI_EXIT_INTERRUPTED);
}

int cli_direct(const struct cli_opts *o)
{
	struct cfg_errors errs = { 0 };
	struct cfg *cfg = cfg_load(o->config, &errs);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!cfg)
		return CLI_EXIT_RPC_ERROR;
	struct direct d = { .o = o, .sep = cfg->separator, .held = json_array(), .in_open = true };
	struct conn_hooks h = { .on_ready = on_ready, .on_notify = on_notify, .arg = &d };
	d.conn = conn_start(o, false, &h);
	if (!d.conn) {
		json_decref(d.held);
		cfg_free(cfg);
		return CLI_EXIT_CHAIN;
	}
	writer_init(&d.out, STDOUT_FILENO, on_out_error, &d);
	framer_init(&d.in_fr, cfg->max_message);
	fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
	ev_io_init(&d.in_io, on_in, STDIN_FILENO, EV_READ);
	d.in_io.data = &d;
	ev_io_start(EV_DEFAULT, &d.in_io);
	ev_signal_init(&d.sigint, on_signal, SIGINT);
	ev_signal_init(&d.sigterm, on_signal, SIGTERM);
	d.sigint.data = d.sigterm.data = &d;
	ev_signal_start(EV_DEFAULT, &d.sigint);
	ev_signal_start(EV_DEFAULT, &d.sigterm);
	ev_run(EV_DEFAULT, 0);
	ev_signal_stop(EV_DEFAULT, &d.sigint);
	ev_signal_stop(EV_DEFAULT, &d.sigterm);
	ev_io_stop(EV_DEFAULT, &d.in_io);
	int code = conn_exit_code(d.conn);
	if (code == CLI_EXIT_CHAIN)
		conn_show_tail(d.conn);
	conn_free(d.conn);  /* answers what is still open, through on_reply */
	cli_drain(&d.out);
	writer_release(&d.out);
	framer_release(&d.in_fr);
	json_decref(d.tools);
	json_decref(d.held);
	cfg_free(cfg);
	return code;
}
