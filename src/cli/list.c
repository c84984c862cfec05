/*
 * list.c - `mcp-chain list`: every backend with its state, and what a
 * client sees of it: tools (name, one line of description, arguments with
 * the required ones marked), prompts, then resources and templates.
 *
 * States come from the `mcp-chain://status` resource when the chain
 * exposes it; with one backend and no status resource, an initialized
 * chain means a ready backend, and with several ("status": false) the
 * state is "unknown". Tools and prompts are put under the
 * backend whose prefix + separator starts their name (the configuration
 * says which); resources carry no prefix, so they are listed once for all.
 *
 * What a client sees can change right after `initialized`: a list_changed
 * that arrives while listing, or in the settle window after it (conn.c:
 * CONN_SETTLE_QUIET after the last one, at most CONN_SETTLE_MAX after
 * `initialized`), has its kind listed again before anything is printed.
 * The status resource is read last, once the lists have settled.
 */
#include "cli_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The steps of a listing: the four lists, then the status resource. */
enum { STEP_TOOLS, STEP_PROMPTS, STEP_RESOURCES, STEP_TEMPLATES, STEP_STATUS, NSTEPS };

struct list_state {
	const struct cli_opts *o;
	struct cfg *cfg;
	struct conn *conn;
	json_t *out;      /* {tools, prompts, resources, resourceTemplates, status} */
	unsigned todo;    /* 1 << STEP_* still to do */
	int step;         /* the one under way */
	bool done;        /* everything listed: print */
	int code;
};

static void next_step(struct list_state *s);

/* One list arrived (or failed: kept empty, with the error noted). */
static void on_list(struct conn *c, json_t *items, json_t *error, void *arg)
{
	struct list_state *s = arg;
	static const char *const keys[] = { "tools", "prompts", "resources", "resourceTemplates" };
	if (conn_finishing(c))
		return;  /* the chain went away: its own error says why */
	if (error) {
		cli_error("%s: %s", keys[s->step], cli_error_message(error));
		s->code = CLI_EXIT_RPC_ERROR;
	}
	json_object_set_new(s->out, keys[s->step], items ? json_incref(items) : json_array());
	next_step(s);
}

/* The status resource arrived (an error: the chain does not expose it). */
static void on_status(struct conn *c, json_t *result, json_t *error, void *arg)
{
	struct list_state *s = arg;
	if (conn_finishing(c))
		return;
	json_t *text = json_object_get(json_array_get(json_object_get(result, "contents"), 0), "text");
	json_t *st = (!error && json_is_string(text)) ? json_loads(json_string_value(text), 0, NULL) : NULL;
	if (st)
		json_object_set_new(s->out, "status", st);
	s->done = true;
	conn_finish(s->conn, s->code);
}

/* True when the chain declared capability NAME. */
static bool has_cap(struct list_state *s, const char *name)
{
	return json_object_get(json_object_get(conn_server_info(s->conn), "capabilities"), name) != NULL;
}

/* The lists are in and settled: read the status resource, or finish. */
static void read_status(struct list_state *s)
{
	if (has_cap(s, "resources")) {
		conn_request(s->conn, "resources/read",
			     json_pack("{s:s}", "uri", "mcp-chain://status"), on_status, s);
		return;
	}
	s->done = true;
	conn_finish(s->conn, s->code);
}

/* The lists settled, or a list_changed named CHANGED: list those again. */
static void on_settled(struct conn *c, unsigned changed, void *arg)
{
	struct list_state *s = arg;
	if (conn_finishing(c))
		return;
	if (!changed) {
		read_status(s);
		return;
	}
	s->todo |= 1u << STEP_STATUS;   /* and settle again after */
	if (changed & CONN_TOOLS)
		s->todo |= 1u << STEP_TOOLS;
	if (changed & CONN_PROMPTS)
		s->todo |= 1u << STEP_PROMPTS;
	if (changed & CONN_RESOURCES)
		s->todo |= 1u << STEP_RESOURCES | 1u << STEP_TEMPLATES;
	next_step(s);
}

/*
 * Asks for the next list that is to do; when the lists are in, waits for
 * them to settle (conn_settle: on_settled lists again or reads the status).
 */
static void next_step(struct list_state *s)
{
	static const char *const methods[] = { "tools/list", "prompts/list", "resources/list",
					       "resources/templates/list" };
	static const char *const caps[] = { "tools", "prompts", "resources", "resources" };
	static const char *const keys[] = { "tools", "prompts", "resources", "resourceTemplates" };
	static const unsigned kinds[] = { CONN_TOOLS, CONN_PROMPTS, CONN_RESOURCES, 0 };
	for (s->step = STEP_TOOLS; s->step < STEP_STATUS; s->step++) {
		if (!(s->todo & 1u << s->step))
			continue;
		s->todo &= ~(1u << s->step);
		if (!has_cap(s, caps[s->step])) {
			json_object_set_new(s->out, keys[s->step], json_array());
			continue;
		}
		/* a list_changed from now on is news to this list */
		conn_changed_clear(s->conn, kinds[s->step]);
		conn_list_all(s->conn, methods[s->step], keys[s->step], on_list, s);
		return;
	}
	if (s->todo & 1u << STEP_STATUS) {
		s->todo &= ~(1u << STEP_STATUS);
		conn_settle(s->conn, on_settled, s);
	}
}

/* The chain is up: start listing. */
static void on_ready(struct conn *c, bool ready, void *arg)
{
	struct list_state *s = arg;
	(void)c;
	if (!ready) {
		s->code = CLI_EXIT_CHAIN;
		return;
	}
	s->todo = (1u << NSTEPS) - 1;
	next_step(s);
}

/* Index of the enabled backend whose prefix starts NAME (longest), or -1. */
static int owner_of(struct cfg *cfg, const char *name)
{
	int best = -1, enabled = 0, only = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < cfg->nservers; i++) {
		const struct cfg_server *e = &cfg->servers[i];
		if (!e->enabled)
			continue;
		enabled++;
		only = (int)i;
		const char *p = e->prefix ? e->prefix : e->name;
		size_t pl = strlen(p), sl = strlen(cfg->separator);
		if (pl + sl > best_len && strncmp(name, p, pl) == 0 &&
		    strncmp(name + pl, cfg->separator, sl) == 0) {
			best = (int)i;
			best_len = pl + sl;
		}
	}
	return enabled == 1 ? only : best;
}

/* Builds the per-backend document of `list --json`. */
static json_t *by_backend(struct list_state *s)
{
	json_t *backends = json_array();
	json_t *st = json_object_get(json_object_get(s->out, "status"), "backends");
	size_t enabled = 0;
	for (size_t i = 0; i < s->cfg->nservers; i++)
		enabled += s->cfg->servers[i].enabled;
	/* no status resource: one backend is ready if the chain initialized;
	 * of several (with "status": false) nothing can be told */
	const char *unknown = enabled > 1 ? "unknown" : "ready";
	for (size_t i = 0; i < s->cfg->nservers; i++) {
		const struct cfg_server *e = &s->cfg->servers[i];
		json_t *b = json_pack("{s:s,s:[],s:[]}", "name", e->name, "tools", "prompts");
		json_t *one = json_object_get(st, e->name);
		const char *state = !e->enabled ? "disabled" :
			json_string_value(json_object_get(one, "state"));
		json_object_set_new(b, "state", json_string(state ? state : unknown));
		if (json_object_get(one, "reason"))
			json_object_set(b, "reason", json_object_get(one, "reason"));
		json_array_append_new(backends, b);
	}
	static const char *const kinds[] = { "tools", "prompts" };
	for (int k = 0; k < 2; k++) {
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(s->out, kinds[k]), j, t) {
			const char *name = json_string_value(json_object_get(t, "name"));
			int i = name ? owner_of(s->cfg, name) : -1;
			if (i >= 0)
				json_array_append(json_object_get(json_array_get(backends, (size_t)i), kinds[k]), t);
		}
	}
	return backends;
}

/* Prints the arguments of a tool's schema or a prompt's list: "a*, b". */
static void print_args(json_t *tool_or_prompt)
{
	json_t *schema = json_object_get(tool_or_prompt, "inputSchema");
	json_t *req = json_object_get(schema, "required");
	const char *k;
	json_t *v;
	size_t i, n = 0;
	putchar('(');
	json_object_foreach(json_object_get(schema, "properties"), k, v) {
		bool required = false;
		json_t *r;
		json_array_foreach(req, i, r)
			required |= json_is_string(r) && strcmp(json_string_value(r), k) == 0;
		printf("%s%s%s", n++ ? ", " : "", k, required ? "*" : "");
	}
	json_array_foreach(json_object_get(tool_or_prompt, "arguments"), i, v)
		printf("%s%s%s", n++ ? ", " : "",
		       json_string_value(json_object_get(v, "name")) ? json_string_value(json_object_get(v, "name")) : "?",
		       json_is_true(json_object_get(v, "required")) ? "*" : "");
	putchar(')');
}

/* Prints ITEMS under a heading: "  tools:" then one line each. */
static void print_items(const char *heading, json_t *items, const char *key)
{
	size_t i;
	json_t *t;
	char line[100];
	if (json_array_size(items) == 0)
		return;
	printf("  %s:\n", heading);
	json_array_foreach(items, i, t) {
		const char *name = json_string_value(json_object_get(t, key));
		printf("    %s", name ? name : "?");
		if (strcmp(key, "name") == 0)
			print_args(t);
		else if (json_is_string(json_object_get(t, "name")))
			printf("  %s", json_string_value(json_object_get(t, "name")));
		cli_one_line(json_string_value(json_object_get(t, "description")), line, sizeof line);
		printf("%s%s\n", line[0] ? "  - " : "", line);
	}
}

/* Prints the listing; returns the exit code (non-zero: a backend not ready). */
static int print_listing(struct list_state *s)
{
	json_t *backends = by_backend(s);
	int code = s->code;
	size_t i;
	json_t *b;
	json_array_foreach(backends, i, b) {
		const char *state = json_string_value(json_object_get(b, "state"));
		const char *reason = json_string_value(json_object_get(b, "reason"));
		if (strcmp(state, "ready") != 0 && strcmp(state, "disabled") != 0 &&
		    strcmp(state, "unknown") != 0) {
			cli_error("backend \"%s\" is %s%s%s", json_string_value(json_object_get(b, "name")),
				  state, reason ? ": " : "", reason ? reason : "");
			code = code ? code : CLI_EXIT_CHAIN;
		}
	}
	if (s->o->json) {
		json_t *doc = json_pack("{s:O?,s:O,s:O,s:O}", "server",
			json_object_get(conn_server_info(s->conn), "serverInfo"), "backends", backends,
			"resources", json_object_get(s->out, "resources"),
			"resourceTemplates", json_object_get(s->out, "resourceTemplates"));
		json_dumpf(doc, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(doc);
	} else {
		json_array_foreach(backends, i, b) {
			const char *reason = json_string_value(json_object_get(b, "reason"));
			printf("%s (%s%s%s)\n", json_string_value(json_object_get(b, "name")),
			       json_string_value(json_object_get(b, "state")), reason ? ": " : "",
			       reason ? reason : "");
			print_items("tools", json_object_get(b, "tools"), "name");
			print_items("prompts", json_object_get(b, "prompts"), "name");
		}
		if (json_array_size(json_object_get(s->out, "resources")) ||
		    json_array_size(json_object_get(s->out, "resourceTemplates")))
			printf("resources (all backends)\n");
		print_items("resources", json_object_get(s->out, "resources"), "uri");
		print_items("templates", json_object_get(s->out, "resourceTemplates"), "uriTemplate");
	}
	json_decref(backends);
	return code;
}

int cli_list(const struct cli_opts *o)
{
	struct cfg_errors errs = { 0 };
	struct list_state s = { .o = o, .cfg = cfg_load(o->config, &errs), .out = json_object() };
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!s.cfg) {
		json_decref(s.out);
		return CLI_EXIT_RPC_ERROR;
	}
	struct conn_hooks h = { .on_ready = on_ready, .arg = &s };
	s.conn = conn_start(o, false, &h);
	int code = CLI_EXIT_CHAIN;
	if (s.conn) {
		ev_run(EV_DEFAULT, 0);
		code = conn_exit_code(s.conn);
		if (code == 0 && s.done)
			code = print_listing(&s);
		else if (code == CLI_EXIT_CHAIN)
			conn_show_tail(s.conn);
		conn_free(s.conn);
	}
	json_decref(s.out);
	cfg_free(s.cfg);
	return code;
}
