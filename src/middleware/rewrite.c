/*
 * rewrite.c - the "rewrite" middleware: how the client sees the backend's
 * tools, and what comes back from them.
 *
 *   {"use": "rewrite",
 *    "tools": {"read_file": {"rename": "fs_read", "description": "...",
 *                            "title": "...", "hide": false,
 *                            "fixed": {"encoding": "utf8"},
 *                            "defaults": {"limit": 100}}},
 *    "results": [{"pattern": "[\\w.+-]+@[\\w-]+(\\.[\\w-]+)+",
 *                 "replace": "[email]", "tools": ["read_*"]}],
 *    "maxResultBytes": 100000}
 *
 * On the way in, a tools/call under a new name goes on under the real one
 * (the old name, like a hidden tool, is unknown to the client); fixed
 * arguments overwrite what the client sent, defaults fill what it left
 * out. On the way back, tools/list entries are renamed, re-described or
 * hidden, and their inputSchema loses the fixed arguments (defaults become
 * optional); tools/call results have their text run through the patterns,
 * then are cut to the size cap with a marker that says so.
 *
 * Behind this module the names are the backend's: modules after it in the
 * pipeline see "read_file", in the message and in ctx->name.
 */
#include "mw_rewrite.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rewrite_int.h"
#include "rpc.h"

/* What to change about one of the backend's tools. */
struct tool_rw {
	char *name;                 /* the backend's name */
	char *rename;               /* the client's name, or NULL */
	char *title, *description;  /* or NULL */
	bool hide;
	json_t *fixed, *defaults;   /* objects (owned) or NULL */
};

struct rewrite {
	struct mw_module base;      /* must be first */
	struct tool_rw *tools;
	size_t ntools;
	struct rw_results results;  /* patterns and cap (rewrite_result.c) */
};

/* String member KEY of object O, or NULL. */
static const char *str_of(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The entry for the backend's tool NAME, or NULL. */
static struct tool_rw *by_real(const struct rewrite *rw, const char *name)
{
	for (size_t i = 0; i < rw->ntools; i++)
		if (strcmp(rw->tools[i].name, name) == 0)
			return &rw->tools[i];
	return NULL;
}

/* The entry renamed to NAME, or NULL. */
static struct tool_rw *by_new(const struct rewrite *rw, const char *name)
{
	for (size_t i = 0; i < rw->ntools; i++)
		if (rw->tools[i].rename && strcmp(rw->tools[i].rename, name) == 0)
			return &rw->tools[i];
	return NULL;
}

/* ---- requests ---- */

/* Forces T's fixed arguments and fills in its defaults in PARAMS. */
static void apply_arguments(json_t *params, const struct tool_rw *t)
{
	const char *k;
	json_t *v, *args;
	if (!t->fixed && !t->defaults)
		return;
	args = json_object_get(params, "arguments");
	if (!json_is_object(args)) {
		args = json_object();
		json_object_set_new(params, "arguments", args);
	}
	json_object_foreach(t->fixed, k, v)
		json_object_set_new(args, k, json_deep_copy(v));
	json_object_foreach(t->defaults, k, v)
		if (!json_object_get(args, k))
			json_object_set_new(args, k, json_deep_copy(v));
}

/* The entry a client's call of NAME is for; *UNKNOWN when hidden or renamed away. */
static struct tool_rw *called(const struct rewrite *rw, const char *name, bool *unknown)
{
	struct tool_rw *t = by_new(rw, name);
	if (!t) {
		t = by_real(rw, name);
		*unknown = t && t->rename;
	}
	*unknown |= t && t->hide;
	return t;
}

/* Maps a tools/call from the client's view to the backend's. */
static enum mw_verdict rewrite_on_message(struct mw_module *m, struct mw_ctx *ctx,
					  json_t **msg)
{
	struct rewrite *rw = (struct rewrite *)m;
	if (ctx->kind != RPC_REQUEST || ctx->dir != MW_TO_BACKEND || !rw->ntools ||
	    ctx->method_code != MCP_TOOLS_CALL || !*msg)
		return MW_PASS;   /* unread: reads() found nothing to map */
	json_t *params = json_object_get(*msg, "params");
	const char *name = str_of(params, "name");
	bool unknown = false;
	struct tool_rw *t = name ? called(rw, name, &unknown) : NULL;
	if (unknown) {
		json_t *r = rpc_errorf(json_object_get(*msg, "id"), RPC_INVALID_PARAMS,
				       "Unknown tool: %s", name);
		json_decref(*msg);
		*msg = r;
		return MW_REPLY;
	}
	if (!t)
		return MW_PASS;
	if (t->rename) {
		json_object_set_new(params, "name", json_string(t->name));
		ctx->name = t->name;   /* the module outlives the exchange */
	}
	apply_arguments(params, t);
	mw_note(ctx, "rewritten", 0, t->rename ? t->rename : name);
	return MW_PASS;
}

/* ---- tools/list ---- */

/* Removes from the "required" array of SCHEMA every key of OBJ. */
static void drop_required(json_t *schema, json_t *obj)
{
	json_t *req = json_object_get(schema, "required"), *e;
	size_t i = 0;
	if (!json_is_array(req) || !obj)
		return;
	while (i < json_array_size(req)) {
		e = json_array_get(req, i);
		if (json_is_string(e) && json_object_get(obj, json_string_value(e)))
			json_array_remove(req, i);
		else
			i++;
	}
	if (json_array_size(req) == 0)
		json_object_del(schema, "required");
}

/* Takes T's fixed arguments out of a tool's SCHEMA and shows its defaults. */
static void edit_schema(json_t *schema, const struct tool_rw *t)
{
	json_t *props = json_object_get(schema, "properties"), *v;
	const char *k;
	if (!json_is_object(schema))
		return;
	json_object_foreach(t->fixed, k, v)
		json_object_del(props, k);
	json_object_foreach(t->defaults, k, v) {
		json_t *p = json_object_get(props, k);
		if (json_is_object(p))
			json_object_set_new(p, "default", json_deep_copy(v));
	}
	drop_required(schema, t->fixed);
	drop_required(schema, t->defaults);
}

/* Shows the tools/list entry TOOL the way T says. */
static void present_tool(json_t *tool, const struct tool_rw *t)
{
	json_t *ann = json_object_get(tool, "annotations");
	if (t->rename)
		json_object_set_new(tool, "name", json_string(t->rename));
	if (t->title) {
		json_object_set_new(tool, "title", json_string(t->title));
		if (json_object_get(ann, "title"))
			json_object_set_new(ann, "title", json_string(t->title));
	}
	if (t->description)
		json_object_set_new(tool, "description", json_string(t->description));
	if (t->fixed || t->defaults)
		edit_schema(json_object_get(tool, "inputSchema"), t);
}

/* Rewrites the tools of a tools/list RESULT; hidden ones are left out. */
static void list_tools(const struct rewrite *rw, json_t *result)
{
	json_t *arr = json_object_get(result, "tools"), *out = NULL, *e;
	size_t i;
	json_array_foreach(arr, i, e) {
		const char *name = str_of(e, "name");
		struct tool_rw *t = name ? by_real(rw, name) : NULL;
		/* a backend tool whose name a rename took is shadowed */
		bool drop = t ? t->hide : name && by_new(rw, name);
		if (t && !drop)
			present_tool(e, t);
		if (drop && !out) {
			out = json_array();
			for (size_t j = 0; j < i; j++)
				json_array_append(out, json_array_get(arr, j));
		} else if (!drop && out) {
			json_array_append(out, e);
		}
	}
	if (out)
		json_object_set_new(result, "tools", out);
}

/* mw_list_edit's callback: the same as list_tools, one entry at a time. */
static enum mw_entry_verdict list_entry(void *arg, const struct mw_entry *e,
					json_t **replace)
{
	const struct rewrite *rw = arg;
	struct tool_rw *t = e->key ? by_real(rw, e->key) : NULL;
	if (t ? t->hide : e->key && by_new(rw, e->key))
		return MW_ENTRY_DROP;
	if (!t)
		return MW_ENTRY_KEEP;
	json_t *tool = json_loadb(e->text, e->len, JSON_ALLOW_NUL, NULL);
	if (!tool)
		return MW_ENTRY_KEEP;  /* cannot be: the chain checked the bytes */
	present_tool(tool, t);
	*replace = tool;
	return MW_ENTRY_REPLACE;
}

/* Rewrites tools/list and tools/call responses for the client. */
static enum mw_verdict rewrite_on_response(struct mw_module *m, struct mw_ctx *ctx,
					   json_t **msg)
{
	struct rewrite *rw = (struct rewrite *)m;
	if (ctx->dir != MW_TO_BACKEND || !ctx->method)
		return MW_PASS;
	if (ctx->method_code == MCP_TOOLS_LIST && rw->ntools) {
		/* as bytes, parsing only the entries it changes; else the tree */
		if ((*msg || mw_list_edit(ctx, "tools", "name", list_entry, rw) < 0) &&
		    mw_read(ctx, msg) == 0)
			list_tools(rw, json_object_get(*msg, "result"));
	} else if (ctx->method_code == MCP_TOOLS_CALL) {
		const char *real = ctx->name;
		struct tool_rw *t = real ? by_real(rw, real) : NULL;
		if (t && t->rename && ctx->name == t->name)
			ctx->name = t->rename;   /* modules before us see the client's name */
		if (rw_results_active(&rw->results))
			rw_results_apply(&rw->results, real, *msg, ctx->response_bytes);
	}
	return MW_PASS;
}

/*
 * Read: a call this module maps (renamed, hidden, fixed or default
 * arguments), and call results when result rules exist. tools/list
 * results are edited as bytes. Any other message passes unparsed.
 */
static bool rewrite_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	struct rewrite *rw = (struct rewrite *)m;
	if (ctx->dir != MW_TO_BACKEND || !ctx->method || ctx->kind == RPC_NOTIFICATION)
		return false;
	if (ctx->kind == RPC_RESPONSE) {
		if (ctx->method_code == MCP_TOOLS_LIST)
			return false;  /* edited as bytes (mw_list_edit) */
		return ctx->method_code == MCP_TOOLS_CALL && rw_results_active(&rw->results);
	}
	if (!rw->ntools || ctx->method_code != MCP_TOOLS_CALL || !ctx->name)
		return rw->ntools > 0 && ctx->method_code == MCP_TOOLS_CALL;
	bool unknown = false;
	struct tool_rw *t = called(rw, ctx->name, &unknown);
	return unknown || (t && (t->rename || t->fixed || t->defaults));
}

/* Compiles the patterns for speed once the module goes live. */
static int rewrite_start(struct mw_module *m)
{
	rw_results_start(&((struct rewrite *)m)->results);
	return 0;
}

/* ---- options ---- */

/* Writes KEY + "/" + NAME escaped as a JSON pointer token into OUT. */
void rw_key_join(char *out, size_t n, const char *key, const char *name)
{
	size_t l = (size_t)snprintf(out, n, "%s/", key);
	for (; *name && l + 3 < n; name++) {
		if (*name == '~' || *name == '/') {
			out[l++] = '~';
			out[l++] = *name == '~' ? '0' : '1';
		} else {
			out[l++] = *name;
		}
	}
	out[l < n ? l : n - 1] = '\0';
}


/* Copies the string option NAME of OBJ into *OUT; EMPTY_OK allows "". */
void rw_parse_str(struct mw_build *b, const char *key, json_t *obj,
		  const char *name, bool empty_ok, char **out)
{
	json_t *v = json_object_get(obj, name);
	char k[400];
	if (!v)
		return;
	rw_key_join(k, sizeof k, key, name);
	if (!json_is_string(v) || (!empty_ok && json_string_length(v) == 0)) {
		mw_error(b, k, "must be a %sstring", empty_ok ? "" : "non-empty ");
		return;
	}
	*out = strdup(json_string_value(v));
}

/* Copies the object option NAME of OBJ into *OUT. */
static void parse_obj(struct mw_build *b, const char *key, json_t *obj,
		      const char *name, json_t **out)
{
	json_t *v = json_object_get(obj, name);
	char k[400];
	if (!v)
		return;
	rw_key_join(k, sizeof k, key, name);
	if (!json_is_object(v)) {
		mw_error(b, k, "must be an object of argument names and values");
		return;
	}
	*out = json_deep_copy(v);
}

/* Parses the entry V for the backend's tool NAME into T. */
static void parse_tool(struct mw_build *b, const char *name, json_t *v, struct tool_rw *t)
{
	static const char *const keys[] = { "rename", "title", "description", "hide",
					    "fixed", "defaults", NULL };
	char key[300], k[400], k2[500];
	const char *arg;
	json_t *x;
	rw_key_join(key, sizeof key, "/tools", name);
	t->name = strdup(name);
	if (!json_is_object(v)) {
		mw_error(b, key, "must be an object (rename, title, description, hide, fixed, defaults)");
		return;
	}
	mw_check_keys_at(b, key, v, keys);
	rw_parse_str(b, key, v, "rename", false, &t->rename);
	rw_parse_str(b, key, v, "title", false, &t->title);
	rw_parse_str(b, key, v, "description", true, &t->description);
	parse_obj(b, key, v, "fixed", &t->fixed);
	parse_obj(b, key, v, "defaults", &t->defaults);
	x = json_object_get(v, "hide");
	rw_key_join(k, sizeof k, key, "hide");
	if (x && !json_is_boolean(x))
		mw_error(b, k, "must be true or false");
	t->hide = json_is_true(x);
	json_object_foreach(t->defaults, arg, x) {
		if (t->fixed && json_object_get(t->fixed, arg)) {
			rw_key_join(k, sizeof k, key, "defaults");
			rw_key_join(k2, sizeof k2, k, arg);
			mw_error(b, k2, "is also a fixed argument: fixed wins, drop one");
		}
	}
}

/* Checks that renames neither collide nor shadow another configured tool. */
static void check_renames(struct mw_build *b, const struct rewrite *rw)
{
	for (size_t i = 0; i < rw->ntools; i++) {
		const struct tool_rw *t = &rw->tools[i];
		char tk[300], key[400];
		rw_key_join(tk, sizeof tk, "/tools", t->name);
		rw_key_join(key, sizeof key, tk, "rename");
		if (!t->rename)
			continue;
		const struct tool_rw *o = by_real(rw, t->rename);
		if (o == t)
			mw_error(b, key, "is the tool's own name");
		else if (o && !o->rename && !o->hide)
			mw_error(b, key, "\"%s\" is another tool's name: rename or hide that one too",
				 t->rename);
		if (by_new(rw, t->rename) != t)
			mw_error(b, key, "\"%s\" is also the new name of another tool", t->rename);
	}
}

/* Parses "tools" into RW. */
static void parse_tools(struct mw_build *b, json_t *v, struct rewrite *rw)
{
	const char *name;
	json_t *e;
	if (!v)
		return;
	if (!json_is_object(v)) {
		mw_error(b, "/tools", "must be an object: {\"tool name\": {rename, ...}}");
		return;
	}
	rw->tools = calloc(json_object_size(v) + 1, sizeof *rw->tools);
	if (!rw->tools) {
		mw_error(b, "/tools", "out of memory");
		return;
	}
	json_object_foreach(v, name, e)
		parse_tool(b, name, e, &rw->tools[rw->ntools++]);
	check_renames(b, rw);
}

/* Frees the module. */
static void rewrite_destroy(struct mw_module *m)
{
	struct rewrite *rw = (struct rewrite *)m;
	for (size_t i = 0; i < rw->ntools; i++) {
		struct tool_rw *t = &rw->tools[i];
		free(t->name);
		free(t->rename);
		free(t->title);
		free(t->description);
		json_decref(t->fixed);
		json_decref(t->defaults);
	}
	rw_results_release(&rw->results);
	free(rw->tools);
	free(rw);
}

static const struct mw_module_ops rewrite_ops = {
	.name = "rewrite",
	.reads = rewrite_reads,
	.on_message = rewrite_on_message,
	.on_response = rewrite_on_response,
	.start = rewrite_start,
	.destroy = rewrite_destroy,
};

/* Creates a rewrite module from its options. */
struct mw_module *mw_rewrite_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = { "tools", "results", "maxResultBytes", NULL };
	int before = b->nerr;
	struct rewrite *rw = calloc(1, sizeof *rw);
	if (!rw) {
		mw_error(b, "", "out of memory");
		return NULL;
	}
	rw->base.ops = &rewrite_ops;
	mw_check_keys(b, opts, keys);
	parse_tools(b, json_object_get(opts, "tools"), rw);
	rw_results_parse(b, opts, &rw->results);
	if (b->nerr > before) {
		rewrite_destroy(&rw->base);
		return NULL;
	}
	return &rw->base;
}
