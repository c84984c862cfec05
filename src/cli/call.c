/*
 * call.c - `mcp-chain call NAME [ARGS]`, `read URI` and `prompt NAME
 * [ARGS]`: one request through the chain, as any client would send it.
 *
 * call: the tool is looked up in tools/list (so its inputSchema can be
 * checked before the call and a typo named; a name not listed yet is
 * looked up again after a list_changed in the settle window after
 * `initialized`, see conn_settle), called with a progress
 * token, and its text content printed. Progress draws a bar on a terminal
 * and a line per update otherwise. Ctrl-C (or --timeout) sends
 * notifications/cancelled for the call and exits 130 (124).
 */
#include "cli_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "names.h"
#include "rpc.h"

#define PROGRESS_TOKEN "mcp-chain-cli"

struct call_state {
	const struct cli_opts *o;
	const char *sep;
	struct conn *conn;
	json_int_t inflight;   /* the request sent, or 0 */
	bool unlisted;         /* the name asked for is not in the list */
	bool settled;          /* the list is what it will be (conn_settle) */
	json_t *listed;        /* the list without the name, while settling */
	char hint[NAMES_MAX_LEN + 1];   /* then the listed name nearest it, or "" */
	bool bar_drawn;
	bool interactive;
	ev_signal sigint, sigterm;
	ev_timer timeout;
};

/* Clears the progress bar before anything else is printed on stderr. */
static void clear_bar(struct call_state *s)
{
	if (s->bar_drawn)
		fputs("\r\033[K", stderr);
	s->bar_drawn = false;
}

/* Ends the command with CODE, cancelling the request in flight. */
static void stop_with(struct call_state *s, int code, const char *why)
{
	clear_bar(s);
	if (s->inflight > 0) {
		conn_notify(s->conn, "notifications/cancelled",
			    json_pack("{s:I,s:s}", "requestId", (json_int_t)s->inflight, "reason", why));
		conn_forget(s->conn, s->inflight);
		s->inflight = 0;
	}
	conn_finish(s->conn, code);
}

/* Ctrl-C or SIGTERM. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct call_state *s = w->data;
	(void)loop;
	(void)revents;
	if (conn_finishing(s->conn))
		return;
	cli_error("interrupted%s", s->inflight ? ": the request is cancelled" : "");
	stop_with(s, CLI_EXIT_INTERRUPTED, w->signum == SIGINT ? "interrupted (Ctrl-C)" : "terminated");
}

/* --timeout passed. */
static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct call_state *s = w->data;
	(void)loop;
	(void)revents;
	if (conn_finishing(s->conn))
		return;
	cli_error("timed out after %g s%s", s->o->timeout, s->inflight ? ": the request is cancelled" : "");
	stop_with(s, CLI_EXIT_TIMEOUT, "timed out");
}

/* notifications/progress for our request: a bar on a terminal, else a line. */
static void show_progress(struct call_state *s, json_t *params)
{
	double done = json_number_value(json_object_get(params, "progress"));
	json_t *tot = json_object_get(params, "total");
	const char *msg = json_string_value(json_object_get(params, "message"));
	double total = json_number_value(tot);
	bool tty = isatty(STDERR_FILENO);
	if (!tty) {
		if (tot && total > 0)
			fprintf(stderr, "progress: %g/%g (%.0f%%)%s%s\n", done, total, 100 * done / total,
				msg ? " " : "", msg ? msg : "");
		else
			fprintf(stderr, "progress: %g%s%s\n", done, msg ? " " : "", msg ? msg : "");
		return;
	}
	char bar[31];
	int fill = tot && total > 0 ? (int)(30 * (done > total ? total : done) / total) : 0;
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	if (tot && total > 0)
		fprintf(stderr, "\r\033[K[%s] %3.0f%% %g/%g%s%.60s", bar, 100 * done / total, done, total,
			msg ? " " : "", msg ? msg : "");
	else
		fprintf(stderr, "\r\033[K[working] %g%s%.60s", done, msg ? " " : "", msg ? msg : "");
	fflush(stderr);
	s->bar_drawn = true;
}

/* Notifications from the chain: our progress; log messages on stderr. */
static void on_notify(struct conn *c, const char *method, json_t *params, void *arg)
{
	struct call_state *s = arg;
	(void)c;
	json_t *tok = json_object_get(params, "progressToken");
	if (strcmp(method, "notifications/progress") == 0 && json_is_string(tok) &&
	    strcmp(json_string_value(tok), PROGRESS_TOKEN) == 0 && s->inflight) {
		show_progress(s, params);
	} else if (strcmp(method, "notifications/message") == 0 && s->o->verbose) {
		char *d = json_dumps(json_object_get(params, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
		clear_bar(s);
		fprintf(stderr, "[%s] %s\n", json_string_value(json_object_get(params, "level")) ?
			json_string_value(json_object_get(params, "level")) : "log", d ? d : "");
		free(d);
	}
}

/* Prints the text parts of a content array: text to OUT, others noted on stderr. */
static void print_content(json_t *content, FILE *out)
{
	size_t i;
	json_t *part;
	json_array_foreach(content, i, part) {
		const char *type = json_string_value(json_object_get(part, "type"));
		json_t *res = json_object_get(part, "resource");
		const char *text = json_string_value(json_object_get(part, "text"));
		if (!text && res)
			text = json_string_value(json_object_get(res, "text"));
		if (text) {
			fputs(text, out);
			if (!*text || text[strlen(text) - 1] != '\n')
				fputc('\n', out);
		} else {
			const char *mime = json_string_value(json_object_get(part, "mimeType"));
			const char *uri = json_string_value(json_object_get(part, "uri"));
			fprintf(stderr, "(%s content%s%s%s%s; --json shows it)\n", type ? type : "other",
				mime ? ", " : "", mime ? mime : "", uri ? " " : "", uri ? uri : "");
		}
	}
}

/*
 * Prints resource contents: text as text; a blob decoded, as bytes to
 * stdout when it is not a terminal (or the blob is text/...), else only
 * noted on stderr.
 */
static void print_contents(json_t *contents)
{
	size_t i, n;
	json_t *part;
	bool tty = isatty(STDOUT_FILENO);
	json_array_foreach(contents, i, part) {
		const char *blob = json_string_value(json_object_get(part, "blob"));
		const char *mime = json_string_value(json_object_get(part, "mimeType"));
		bool text = mime && strncmp(mime, "text/", 5) == 0;
		json_t *one = json_pack("[O]", part);
		unsigned char *bytes = blob && (!tty || text) ? cli_b64_decode(blob, &n) : NULL;
		if (bytes)
			fwrite(bytes, 1, n, stdout);
		else if (blob)
			fprintf(stderr, "(binary content%s%s, %zu base64 characters: redirect stdout to "
				"save it, or use --json)\n", mime ? ", " : "", mime ? mime : "", strlen(blob));
		else
			print_content(one, stdout);
		free(bytes);
		json_decref(one);
	}
}

/* Prints a result as --json asks, or its text. */
static void print_json(json_t *result)
{
	json_dumpf(result, stdout, JSON_INDENT(2));
	putchar('\n');
}

/* Prints a JSON-RPC error, with a hint when the name was not listed. */
static void print_rpc_error(struct call_state *s, json_t *error)
{
	cli_error("%s", cli_error_message(error));
	if (s->unlisted && s->hint[0])
		cli_error("(no %s named \"%s\" is listed; did you mean \"%s\"? mcp-chain list shows them)",
			  strcmp(s->o->cmd, "call") == 0 ? "tool" : "prompt", s->o->pos[0], s->hint);
	else if (s->unlisted)
		cli_error("(no %s named \"%s\" is listed; mcp-chain list shows them)",
			  strcmp(s->o->cmd, "call") == 0 ? "tool" : "prompt", s->o->pos[0]);
}

/* Keeps in S->hint the name of ITEMS nearest NAME, if one is near enough. */
static void find_hint(struct call_state *s, json_t *items, const char *name)
{
	size_t n = json_array_size(items), k = 0;
	const char **names = calloc(n + 1, sizeof *names);
	s->hint[0] = '\0';
	if (!names)
		return;   /* no hint then: the error says the rest */
	for (size_t i = 0; i < n; i++) {
		const char *v = json_string_value(json_object_get(json_array_get(items, i), "name"));
		if (v)
			names[k++] = v;
	}
	const char *near = names_nearest(name, names);
	if (near)
		snprintf(s->hint, sizeof s->hint, "%s", near);
	free(names);
}

/* tools/call answered. */
static void on_call_reply(struct conn *c, json_t *result, json_t *error, void *arg)
{
	struct call_state *s = arg;
	s->inflight = 0;
	clear_bar(s);
	if (error) {
		print_rpc_error(s, error);
		conn_finish(c, CLI_EXIT_RPC_ERROR);
		return;
	}
	bool is_error = json_is_true(json_object_get(result, "isError"));
	if (s->o->json) {
		print_json(result);
	} else {
		json_t *content = json_object_get(result, "content");
		json_t *sc = json_object_get(result, "structuredContent");
		print_content(content, is_error ? stderr : stdout);
		if (json_array_size(content) == 0 && sc) {
			json_dumpf(sc, is_error ? stderr : stdout, JSON_INDENT(2));
			fputc('\n', is_error ? stderr : stdout);
		}
	}
	conn_finish(c, is_error ? CLI_EXIT_TOOL_ERROR : CLI_EXIT_OK);
}

/* resources/read or prompts/get answered. */
static void on_other_reply(struct conn *c, json_t *result, json_t *error, void *arg)
{
	struct call_state *s = arg;
	size_t i;
	json_t *v;
	s->inflight = 0;
	if (error) {
		print_rpc_error(s, error);
		conn_finish(c, CLI_EXIT_RPC_ERROR);
		return;
	}
	if (s->o->json) {
		print_json(result);
	} else if (strcmp(s->o->cmd, "read") == 0) {
		print_contents(json_object_get(result, "contents"));
	} else {
		json_array_foreach(json_object_get(result, "messages"), i, v) {
			const char *role = json_string_value(json_object_get(v, "role"));
			printf("[%s]\n", role ? role : "?");
			json_t *one = json_pack("[O]", json_object_get(v, "content"));
			print_content(one, stdout);
			json_decref(one);
		}
	}
	conn_finish(c, CLI_EXIT_OK);
}

/* The schema of a prompt's arguments (strings), for the same checks as a tool's. */
static json_t *prompt_schema(json_t *prompt)
{
	json_t *schema = json_pack("{s:s,s:{},s:[],s:b}", "type", "object", "properties",
				   "required", "additionalProperties", 0);
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(prompt, "arguments"), i, a) {
		json_t *name = json_object_get(a, "name");
		if (!json_is_string(name))
			continue;
		json_t *p = json_pack("{s:s}", "type", "string");
		if (json_object_get(a, "description"))
			json_object_set(p, "description", json_object_get(a, "description"));
		json_object_set_new(json_object_get(schema, "properties"), json_string_value(name), p);
		if (json_is_true(json_object_get(a, "required")))
			json_array_append(json_object_get(schema, "required"), name);
	}
	return schema;
}

static void on_names(struct conn *c, json_t *items, json_t *error, void *arg);

/* Lists the tools (call) or prompts (prompt), for on_names. */
static void list_names(struct call_state *s)
{
	bool tool = strcmp(s->o->cmd, "call") == 0;
	conn_changed_clear(s->conn, tool ? CONN_TOOLS : CONN_PROMPTS);
	conn_list_all(s->conn, tool ? "tools/list" : "prompts/list", tool ? "tools" : "prompts",
		      on_names, s);
}

/* The name was not listed: the list changed (list again) or settled (go on without it). */
static void on_names_settled(struct conn *c, unsigned changed, void *arg)
{
	struct call_state *s = arg;
	json_t *listed = s->listed;
	s->listed = NULL;
	if (!conn_finishing(c)) {
		s->settled = !(changed & (strcmp(s->o->cmd, "call") == 0 ? CONN_TOOLS : CONN_PROMPTS));
		if (s->settled)
			on_names(c, listed, NULL, s);
		else
			list_names(s);
	}
	json_decref(listed);
}

/* The list of tools or prompts arrived: find the name, check, send. */
static void on_names(struct conn *c, json_t *items, json_t *error, void *arg)
{
	struct call_state *s = arg;
	bool tool = strcmp(s->o->cmd, "call") == 0;
	const char *name = s->o->pos[0];
	char err[400];
	if (conn_finishing(c))
		return;  /* interrupted, or timed out, while listing */
	if (error) {
		cli_error("%s: %s", tool ? "tools/list" : "prompts/list", cli_error_message(error));
		conn_finish(c, CLI_EXIT_RPC_ERROR);
		return;
	}
	/* A name that is not listed is still sent: the chain decides (a
	 * policy refuses it as it would for any client). */
	json_t *item = cli_tool_find(items, name, s->sep);
	if (!item && !s->settled) {   /* it may come with a list_changed */
		json_decref(s->listed);
		s->listed = json_incref(items);
		conn_settle(c, on_names_settled, s);
		return;
	}
	json_t *unlisted = item ? NULL : json_pack("{s:s}", "name", name);
	s->unlisted = !item;
	if (!item)
		find_hint(s, items, name);
	item = item ? item : unlisted;
	json_t *schema = !tool ? prompt_schema(item) :
		json_incref(json_object_get(item, "inputSchema"));
	if (unlisted) {
		json_decref(schema);
		schema = NULL;
	}
	json_t *args = cli_args_build(s->o->pos + 1, s->o->npos - 1, schema, err, sizeof err);
	if (!args || cli_schema_check(schema, args, err, sizeof err) < 0) {
		cli_error("%s: %s", json_string_value(json_object_get(item, "name")), err);
		json_decref(unlisted);
		json_decref(args);
		json_decref(schema);
		conn_finish(c, CLI_EXIT_RPC_ERROR);
		return;
	}
	json_decref(schema);
	json_t *params = json_pack("{s:O,s:o}", "name", json_object_get(item, "name"), "arguments", args);
	json_decref(unlisted);
	if (tool)
		json_object_set_new(params, "_meta", json_pack("{s:s}", "progressToken", PROGRESS_TOKEN));
	s->inflight = conn_request(c, tool ? "tools/call" : "prompts/get", params,
				   tool ? on_call_reply : on_other_reply, s);
}

/* The chain is up. */
static void on_ready(struct conn *c, bool ready, void *arg)
{
	struct call_state *s = arg;
	if (!ready)
		return;
	if (strcmp(s->o->cmd, "read") == 0)
		s->inflight = conn_request(c, "resources/read", json_pack("{s:s}", "uri", s->o->pos[0]),
					   on_other_reply, s);
	else
		list_names(s);
}

/* Checks the positional arguments; returns 0 or prints and returns -1. */
static int check_usage(const struct cli_opts *o)
{
	if (o->npos < 1) {
		cli_error("%s needs a %s", o->cmd, strcmp(o->cmd, "read") == 0 ? "URI" : "NAME");
		return -1;
	}
	if (strcmp(o->cmd, "read") == 0 && o->npos > 1) {
		cli_error("read takes one URI");
		return -1;
	}
	return 0;
}

int cli_call(const struct cli_opts *o)
{
	if (check_usage(o) < 0)
		return CLI_EXIT_RPC_ERROR;
	struct cfg_errors errs = { 0 };
	struct cfg *cfg = cfg_load(o->config, &errs);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!cfg)
		return CLI_EXIT_RPC_ERROR;
	struct call_state s = { .o = o, .sep = cfg->separator, .interactive = isatty(STDIN_FILENO) };
	struct conn_hooks h = { .on_ready = on_ready, .on_notify = on_notify,
				.on_request = cli_ask_user, .arg = &s };
	s.conn = conn_start(o, s.interactive, &h);
	if (!s.conn) {
		cfg_free(cfg);
		return CLI_EXIT_CHAIN;
	}
	ev_signal_init(&s.sigint, on_signal, SIGINT);
	ev_signal_init(&s.sigterm, on_signal, SIGTERM);
	s.sigint.data = s.sigterm.data = &s;
	ev_signal_start(EV_DEFAULT, &s.sigint);
	ev_signal_start(EV_DEFAULT, &s.sigterm);
	ev_timer_init(&s.timeout, on_timeout, o->timeout, 0.);
	s.timeout.data = &s;
	if (o->timeout > 0)
		ev_timer_start(EV_DEFAULT, &s.timeout);
	ev_run(EV_DEFAULT, 0);
	ev_timer_stop(EV_DEFAULT, &s.timeout);
	ev_signal_stop(EV_DEFAULT, &s.sigint);
	ev_signal_stop(EV_DEFAULT, &s.sigterm);
	clear_bar(&s);
	int code = conn_exit_code(s.conn);
	if (code == CLI_EXIT_CHAIN)
		conn_show_tail(s.conn);
	conn_free(s.conn);
	json_decref(s.listed);
	cfg_free(cfg);
	return code;
}
