/*
 * pipeline.c - running messages through ordered middleware modules.
 *
 * The pipeline is an array; "next" is index + 1, so any number of
 * pipelines (global, per backend, old and new across a reload) coexist.
 * Building one from configuration is pipeline_build.c's: this file knows
 * modules only as the struct of callbacks they embed.
 */
#include "middleware.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "observe.h"
#include "rpc.h"

struct pipeline {
	struct mw_module **mods;
	size_t n;
	int refs;
};

/* Starts the modules. */
int pipeline_start(struct pipeline *pl)
{
	for (size_t i = 0; pl && i < pl->n; i++)
		if (pl->mods[i]->ops->start && pl->mods[i]->ops->start(pl->mods[i]) < 0)
			return -1;
	return 0;
}

/* Lazily makes the per-exchange scratch object. */
json_t *mw_scratch(struct mw_ctx *ctx)
{
	if (!ctx->scratch)
		ctx->scratch = json_object();
	return ctx->scratch;
}

/* New empty pipeline. */
struct pipeline *pipeline_new(void)
{
	struct pipeline *pl = calloc(1, sizeof *pl);
	if (pl)
		pl->refs = 1;
	return pl;
}

/* Appends a module. */
int pipeline_add(struct pipeline *pl, struct mw_module *m)
{
	struct mw_module **v = realloc(pl->mods, (pl->n + 1) * sizeof *v);
	if (!v)
		return -1;
	pl->mods = v;
	pl->mods[pl->n++] = m;
	return 0;
}

/* Module count. */
size_t pipeline_size(const struct pipeline *pl)
{
	return pl ? pl->n : 0;
}

void pipeline_check_credential(const struct pipeline *pl, struct mw_cred_check *chk,
			       struct mw_cred_wait *wait)
{
	chk->result = MW_CRED_NONE;
	chk->error = NULL;
	chk->why[0] = chk->scope[0] = '\0';
	chk->has_subject = false;
	chk->per_request = false;
	for (size_t i = 0; pl && i < pl->n; i++) {
		struct mw_module *m = pl->mods[i];
		if (!m->ops->check_credential)
			continue;
		m->ops->check_credential(m, chk, wait);
		if (chk->result != MW_CRED_OK)
			return;   /* refused, or pending: the first such module answers */
	}
}

json_t *pipeline_resource_metadata(const struct pipeline *pl)
{
	for (size_t i = 0; pl && i < pl->n; i++) {
		struct mw_module *m = pl->mods[i];
		json_t *md = m->ops->resource_metadata ? m->ops->resource_metadata(m) : NULL;
		if (md)
			return md;
	}
	return NULL;
}

void mw_cred_wait_add(struct mw_cred_wait **head, struct mw_cred_wait *w)
{
	if (!w)
		return;   /* the asker does not wait (it answers 503) */
	mw_cred_wait_cancel(w);
	w->next = *head;
	if (w->next)
		w->next->prevp = &w->next;
	w->prevp = head;
	*head = w;
}

void mw_cred_wait_cancel(struct mw_cred_wait *w)
{
	if (!w->prevp)
		return;
	*w->prevp = w->next;
	if (w->next)
		w->next->prevp = w->prevp;
	w->next = NULL;
	w->prevp = NULL;
}

void mw_cred_wait_wake(struct mw_cred_wait **head)
{
	struct mw_cred_wait *list = *head;
	*head = NULL;
	if (list)
		list->prevp = &list;
	while (list) {   /* each unlinked before its READY, which may free it */
		struct mw_cred_wait *w = list;
		mw_cred_wait_cancel(w);
		w->ready(w);
	}
}

/* Takes a reference. */
struct pipeline *pipeline_ref(struct pipeline *pl)
{
	if (pl)
		pl->refs++;
	return pl;
}

/* Drops a reference, destroying the modules with the last. */
void pipeline_unref(struct pipeline *pl)
{
	if (!pl || --pl->refs > 0)
		return;
	for (size_t i = 0; i < pl->n; i++)
		pl->mods[i]->ops->destroy(pl->mods[i]);
	free(pl->mods);
	free(pl);
}

/* Total modules across the walk's stages. */
static size_t walk_len(const struct mw_walk *w)
{
	return pipeline_size(w->stage[0]) + pipeline_size(w->stage[1]);
}

/* The I-th module across the stages. */
static struct mw_module *walk_mod(const struct mw_walk *w, size_t i)
{
	size_t n0 = pipeline_size(w->stage[0]);
	return i < n0 ? w->stage[0]->mods[i] : w->stage[1]->mods[i - n0];
}

/* Hands the walk back to its owner (which may free W). */
static void finish(struct mw_walk *w, enum mw_verdict v)
{
	w->done(w, v);
}

/*
 * After a hook that was given BEFORE: a module that put another tree in
 * its place replaced the message, so its bytes no longer say it. (One that
 * changed the tree in place is found out when it is written.)
 */
static void settle(struct mw_walk *w, json_t *before)
{
	if (w->m->tree != before && w->m->raw) {
		json_t *t = w->m->tree;
		w->m->tree = NULL;   /* BEFORE is no longer ours to free */
		msg_set_tree(w->m, t);
	}
}

/* Makes the tree for module M if it reads the message; false on failure. */
static bool ensure_parsed(struct mw_walk *w, struct mw_module *m)
{
	if (!msg_is_raw(w->m) || (m->ops->reads && !m->ops->reads(m, w->ctx)))
		return true;
	if (msg_tree(w->m))
		return true;
	log_error("pipeline: a message the chain scanned as valid does not parse");
	return false;
}

/* True unless the message certainly has no params._meta[KEY]. */
bool mw_meta_has(const struct mw_ctx *ctx, const char *key)
{
	const struct mw_walk *w = ctx->walk;
	return !w || msg_meta_has(w->m, key);
}

/* Parses the message in hand for a module that did not plan to read it. */
int mw_read(struct mw_ctx *ctx, json_t **msg)
{
	struct mw_walk *w = ctx->walk;
	if (*msg)
		return 0;
	if (!w || msg != &w->m->tree || !msg_is_raw(w->m))
		return -1;
	if (msg_tree(w->m))
		return 0;
	if (ctx->kind == RPC_RESPONSE)  /* as ensure_parsed does: nothing unread goes on */
		msg_set_tree(w->m, rpc_errorf(NULL, RPC_INTERNAL_ERROR,
					      "mcp-chain could not parse the response"));
	return -1;
}

/*
 * The string value SPAN decoded, NUL-terminated: in BUF (CAP bytes) when it
 * is short and has no escape, as nearly every name is (a listing decodes
 * one per entry and module); else a new string, *HEAP set for the caller
 * to free. NULL when it is not a string or memory runs out.
 */
static char *span_string(struct jspan v, char *buf, size_t cap, bool *heap)
{
	*heap = false;
	if (v.n < 2 || v.p[0] != '"')
		return NULL;
	if (!memchr(v.p, '\\', v.n) && v.n - 2 < cap) {
		memcpy(buf, v.p + 1, v.n - 2);   /* (a checked string has no raw NUL) */
		buf[v.n - 2] = '\0';
		return buf;
	}
	*heap = true;
	if (!memchr(v.p, '\\', v.n))
		return strndup(v.p + 1, v.n - 2);
	json_t *j = json_loadb(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char *r = json_is_string(j) ? strdup(json_string_value(j)) : NULL;
	json_decref(j);  /* as json_string_value would give it: up to a NUL */
	return r;
}

/* Appends one entry's text to OUT after a separator if needed; false when out of memory. */
static bool put_entry(struct buf *out, const char *p, size_t n)
{
	if (out->data[out->len - 1] != '[' && buf_append(out, ",", 1) < 0)
		return false;
	return buf_append(out, p, n) == 0;
}

/* Edits the list result[KEY] of the unparsed response in hand. */
int mw_list_edit(struct mw_ctx *ctx, const char *key, const char *field,
		 mw_entry_fn fn, void *arg)
{
	struct mw_walk *w = ctx->walk;
	struct jspan result, item, fv;
	struct jscan_items it;
	struct buf out = BUF_INIT;
	const char *first = NULL, *last_end = NULL, *at;  /* entries not copied yet */
	size_t changed = 0;
	bool ok = true;
	int r;
	if (!w || !msg_is_raw(w->m))
		return -1;
	const char *raw = w->m->raw;
	size_t raw_len = w->m->raw_len;
	result = w->m->js.span[MSG_SPAN_RESULT];
	if (!result.p && jscan_member((struct jspan){ raw, raw_len }, "result", &result) != 1)
		return -1;
	/* the list is walked once, entry by entry, and must be the only KEY */
	if (jscan_member_start(result, key, &at) != 1 ||
	    !jscan_items_begin(&it, (struct jspan){ at, (size_t)(result.p + result.n - at) }))
		return -1;
	const char *open = it.p - 1;  /* the list's '[' */
	while (ok && (r = jscan_items_next(&it, &item, field, &fv)) == 1) {
		char small[256];
		bool heap = false;
		char *name = fv.p ? span_string(fv, small, sizeof small, &heap) : NULL;
		struct mw_entry e = { item.p, item.n, name };
		json_t *repl = NULL;
		enum mw_entry_verdict v = fn(arg, &e, &repl);
		if (heap)
			free(name);
		if (v != MW_ENTRY_KEEP && !changed++) {
			/* the first change: the bytes up to the '[', the entries before */
			ok = buf_append(&out, raw, (size_t)(open + 1 - raw)) == 0 &&
				(!first || buf_append(&out, first, (size_t)(last_end - first)) == 0);
		}
		if (v == MW_ENTRY_KEEP && !changed) {
			first = first ? first : item.p;
			last_end = item.p + item.n;
		} else if (v == MW_ENTRY_KEEP) {
			ok = ok && put_entry(&out, item.p, item.n);
		} else if (v == MW_ENTRY_REPLACE && repl) {
			char *text = json_dumps(repl, JSON_COMPACT | JSON_ENCODE_ANY);
			ok = ok && text && put_entry(&out, text, strlen(text));
			free(text);
		}
		json_decref(repl);
	}
	const char *close = it.p;   /* the list's ']' once R is 0 */
	if (ok && r == 0 && jscan_member_after(result, close + 1, key) != 0)
		ok = false;  /* a repeated KEY, or bytes that do not hold together */
	if (ok && r == 0 && changed) {
		ok = buf_append(&out, close, (size_t)(raw + raw_len - close)) == 0;
		if (ok) {
			msg_take_bytes(w->m, out.data, out.len, (size_t)(open + 1 - raw),
				       (size_t)(close - raw));
			out.data = NULL;
		}
	}
	buf_release(&out);
	return ok && r == 0 ? (int)changed : -1;
}

json_t *mw_id(struct mw_ctx *ctx)
{
	if (!ctx->id && ctx->id_text && ctx->id_text->n)
		ctx->id = msg_val_json(ctx->id_text);
	return ctx->id;
}

/*
 * Gives a module's reply the requester's id: a module that replied to a
 * message it did not read could not copy it.
 */
static void reply_id(struct mw_walk *w)
{
	json_t *t = w->m->tree;
	json_t *id = t ? mw_id(w->ctx) : NULL;
	if (id && json_is_null(json_object_get(t, "id")))
		json_object_set(t, "id", id);
}

void mw_note(struct mw_ctx *ctx, const char *what, int code, const char *detail)
{
	struct mw_walk *w = ctx->walk;
	struct obs_event e = {
		.kind = OBS_DECISION, .what = what, .source = w ? w->cur : NULL,
		.method = ctx->method, .name = ctx->name, .client = ctx->client,
		.backend = ctx->backend, .detail = detail, .code = code, .ex = ctx->ex,
	};
	if (w)
		w->noted = 1;
	observe_note(&e);
}

/* Tells what a module that replied (V: MW_REPLY) or dropped the message
 * decided, unless it told it itself. A reply that is an error, or a tool
 * result with isError (how policy refuses a call), is a refusal. */
static void note_verdict(struct mw_walk *w, enum mw_verdict v)
{
	if (w->noted || (v != MW_REPLY && v != MW_DROP))
		return;
	json_t *err = w->m->tree ? json_object_get(w->m->tree, "error") : NULL;
	json_t *res = w->m->tree && !err ? json_object_get(w->m->tree, "result") : NULL;
	bool refused = err || json_is_true(json_object_get(res, "isError"));
	json_t *msg = err ? json_object_get(err, "message") :
		json_object_get(json_array_get(json_object_get(res, "content"), 0), "text");
	mw_note(w->ctx, v == MW_DROP ? "dropped" : refused ? "denied" : "answered",
		(int)json_integer_value(json_object_get(err, "code")),
		refused ? json_string_value(msg) : NULL);
}

/* Forward steps until the end, a verdict or an async module. */
void mw_walk_forward(struct mw_walk *w)
{
	size_t n = walk_len(w);
	w->response = 0;
	while (w->pos < n) {
		struct mw_module *m = walk_mod(w, w->pos++);
		w->reached = w->pos;
		if (!m->ops->on_message)
			continue;
		w->ctx->walk = w;
		if (!ensure_parsed(w, m)) {
			w->reached--;  /* the module never saw it */
			if (w->ctx->kind == RPC_REQUEST) {
				msg_set_tree(w->m, rpc_error(mw_id(w->ctx), RPC_PARSE_ERROR,
					"mcp-chain could not parse the request", NULL));
				finish(w, MW_REPLY);
			} else {
				finish(w, MW_DROP);
			}
			return;
		}
		json_t *before = w->m->tree;
		w->cur = m->ops->name;
		w->noted = 0;
		enum mw_verdict v = m->ops->on_message(m, w->ctx, &w->m->tree);
		if (v == MW_ASYNC)
			return;
		settle(w, before);
		note_verdict(w, v);
		if (v == MW_REPLY) {
			w->reached--;  /* the replying module does not see it back */
			reply_id(w);
			finish(w, MW_REPLY);
			return;
		}
		if (v == MW_DROP) {
			finish(w, MW_DROP);
			return;
		}
	}
	finish(w, MW_PASS);
}

/* Tells the modules a request passed that it ended without a response. */
void mw_walk_abandon(struct mw_walk *w)
{
	while (w->reached > 0) {
		struct mw_module *m = walk_mod(w, --w->reached);
		if (m->ops->on_abandon)
			m->ops->on_abandon(m, w->ctx);
	}
}

/* Ends a request whose walk forward a module holds, if the module allows. */
bool mw_walk_cancel(struct mw_walk *w)
{
	if (!w->held || w->response || w->pos == 0)
		return false;
	struct mw_module *holder = walk_mod(w, w->pos - 1);
	if (!holder->ops->on_cancel)
		return false;
	holder->ops->on_cancel(holder, w->ctx);
	w->held = 0;
	w->m->tree = NULL;       /* the holder freed what it kept */
	w->reached = w->pos - 1; /* the holder is done with it */
	mw_walk_abandon(w);
	return true;
}

/* Backward steps over the modules the request went through. */
void mw_walk_back(struct mw_walk *w)
{
	w->response = 1;
	while (w->reached > 0) {
		struct mw_module *m = walk_mod(w, --w->reached);
		if (!m->ops->on_response)
			continue;
		w->ctx->walk = w;
		if (!ensure_parsed(w, m))
			msg_set_tree(w->m, rpc_errorf(NULL, RPC_INTERNAL_ERROR,
						      "mcp-chain could not parse the response"));
		json_t *before = w->m->tree;
		w->cur = m->ops->name;
		w->noted = 0;
		if (m->ops->on_response(m, w->ctx, &w->m->tree) == MW_ASYNC)
			return;
		settle(w, before);
	}
	finish(w, MW_PASS);
}

/* Marks the walk in progress as held by an async module. */
struct mw_walk *mw_walk_hold(struct mw_ctx *ctx)
{
	struct mw_walk *w = ctx->walk;
	w->held = 1;
	w->hold_tree = w->m->tree;
	msg_keep(w->m);   /* the owner's buffer is reused once we return */
	return w;
}

/* Continues a walk after an async step. */
void mw_resume(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	w->held = 0;
	w->m->tree = msg;   /* the holder owned what it kept and gives this back */
	settle(w, w->hold_tree);
	if (!w->response)
		note_verdict(w, v);
	if (w->response) {
		mw_walk_back(w);
		return;
	}
	if (v == MW_REPLY) {
		w->reached--;
		reply_id(w);
		finish(w, MW_REPLY);
	} else if (v == MW_DROP) {
		finish(w, MW_DROP);
	} else {
		mw_walk_forward(w);
	}
}
