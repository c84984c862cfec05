/*
 * pipeline.c - running messages through ordered middleware modules.
 *
 * The pipeline is an array; "next" is index + 1, so any number of
 * pipelines (global, per backend, old and new across a reload) coexist.
 */
#include "middleware.h"

#include <stdlib.h>

struct pipeline {
	struct mw_module **mods;
	size_t n;
	int refs;
};

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

/* Hands the message to the walk's owner. */
static void finish(struct mw_walk *w, enum mw_verdict v)
{
	json_t *msg = w->msg;
	w->msg = NULL;
	w->done(w, v, msg);
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
		enum mw_verdict v = m->ops->on_message(m, w->ctx, &w->msg);
		if (v == MW_ASYNC)
			return;
		if (v == MW_REPLY) {
			w->reached--;  /* the replying module does not see it back */
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

/* Backward steps over the modules the request went through. */
void mw_walk_back(struct mw_walk *w)
{
	w->response = 1;
	while (w->reached > 0) {
		struct mw_module *m = walk_mod(w, --w->reached);
		if (!m->ops->on_response)
			continue;
		w->ctx->walk = w;
		if (m->ops->on_response(m, w->ctx, &w->msg) == MW_ASYNC)
			return;
	}
	finish(w, MW_PASS);
}

/* Marks the walk in progress as held by an async module. */
struct mw_walk *mw_walk_hold(struct mw_ctx *ctx)
{
	ctx->walk->held = 1;
	return ctx->walk;
}

/* Continues a walk after an async step. */
void mw_resume(struct mw_walk *w, enum mw_verdict v, json_t *msg)
{
	w->held = 0;
	w->msg = msg;
	if (w->response) {
		mw_walk_back(w);
		return;
	}
	if (v == MW_REPLY) {
		w->reached--;
		finish(w, MW_REPLY);
	} else if (v == MW_DROP) {
		finish(w, MW_DROP);
	} else {
		mw_walk_forward(w);
	}
}
