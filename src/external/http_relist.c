/*
 * http_relist.c - a 2026-07-28 tools/call refused for its headers.
 *
 * A server of the 2026-07-28 era checks the Mcp-Param-* headers of a
 * tools/call against the arguments its tool marks with x-mcp-header, and
 * answers 400 with -32020 (HeaderMismatch) when they disagree. The
 * transport makes those headers from the marks it learned from the tool
 * list; a refusal means the server's tools changed since. As the
 * specification suggests to a client, the list is fetched again (every
 * page: each answer teaches the marks as any tools/list answer does,
 * note_response in http_xfer.c) and the call is sent once more with
 * headers from the new marks. The client sees the answer to that second
 * call, or the first refusal when the list cannot be had; a second
 * refusal reaches it as it is.
 */
#include "http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "era.h"
#include "log.h"

#define RELIST_PAGES 100   /* pages followed at most */
#define HEADER_MISMATCH -32020

/* A refused call waiting for a fresh list. */
struct relist {
	struct out *call;    /* owned: sent again after; NULL once cancelled */
	json_t *refusal;     /* owned: the answer if the list fails */
	json_t *id;          /* owned: the id of our tools/list in flight */
	unsigned pages;
	struct relist *next;
};

bool relist_wanted(const struct out *o, const struct hx *x, json_t *err)
{
	json_t *code = json_object_get(json_object_get(err, "error"), "code");
	return o->version && !o->relisted && o->kind == OUT_CHAIN && o->method && o->name &&
	       strcmp(o->method, "tools/call") == 0 && x->status == 400 &&
	       json_integer_value(code) == HEADER_MISMATCH;
}

/* Unlinks and frees R. */
static void relist_free(struct be_http *s, struct relist *r)
{
	for (struct relist **pp = &s->relists; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	out_free(r->call);
	json_decref(r->refusal);
	json_decref(r->id);
	free(r);
}

/* The pending relist whose tools/list has id ID, or NULL. */
static struct relist *relist_of(struct be_http *s, json_t *id)
{
	for (struct relist *r = s->relists; id && r; r = r->next)
		if (json_equal(r->id, id))
			return r;
	return NULL;
}

/* POSTs our tools/list for R from CURSOR (NULL: the first page); 0 or -1. */
static int relist_page(struct be_http *s, struct relist *r, const char *cursor)
{
	char id[48];
	json_t *body = json_loadb(r->call->body, r->call->len, 0, NULL);
	json_t *meta = json_deep_copy(json_object_get(json_object_get(body, "params"), "_meta"));
	json_decref(body);
	if (!json_is_object(meta)) {
		json_decref(meta);
		return -1;
	}
	json_object_del(meta, "progressToken");   /* the call's, not the list's */
	snprintf(id, sizeof id, "mcp-chain-relist-%u", ++s->relist_seq);
	json_t *params = json_pack("{s:o}", "_meta", meta);
	if (params && cursor)
		json_object_set_new(params, "cursor", json_string(cursor));
	json_t *req = params ? json_pack("{s:s,s:s,s:s,s:o}", "jsonrpc", "2.0", "id", id,
					 "method", "tools/list", "params", params) : NULL;
	struct out *o = req ? out_new(req, OUT_RELIST) : NULL;
	json_decref(req);
	if (!o || !o->version)
		goto fail;
	json_decref(r->id);
	r->id = json_string(id);
	r->pages++;
	if (s->mode->post(s, o) == 0)
		return 0;
fail:
	out_free(o);
	return -1;
}

/* The list could not be had: the client gets the first refusal. */
static void relist_failed(struct be_http *s, struct relist *r, const char *why)
{
	if (r->call) {
		log_warn("%s: \"%s\" was refused for its Mcp-Param headers (-32020) and the tool "
			 "list could not be fetched again: %s", s->name, r->call->name, why);
		http_push(s, r->refusal, 0);
		r->refusal = NULL;
	}
	relist_free(s, r);
}

int relist_begin(struct be_http *s, struct out *call, json_t *refusal)
{
	struct relist *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	r->call = call;
	r->refusal = refusal;
	r->next = s->relists;
	s->relists = r;
	log_info("%s: \"%s\" was refused for its Mcp-Param headers (-32020): fetching the tool "
		 "list again", s->name, call->name);
	if (relist_page(s, r, NULL) == 0)
		return 0;
	r->call = NULL;   /* both stay the caller's */
	r->refusal = NULL;
	relist_free(s, r);
	return -1;
}

bool relist_intercept(struct be_http *s, json_t *msg)
{
	if (json_object_get(msg, "method"))
		return false;
	struct relist *r = relist_of(s, json_object_get(msg, "id"));
	if (!r)
		return false;
	json_t *result = json_object_get(msg, "result");
	const char *cursor = json_string_value(json_object_get(result, "nextCursor"));
	if (!result) {
		relist_failed(s, r, "the server answered tools/list with an error");
	} else if (!r->call) {
		relist_free(s, r);   /* cancelled meanwhile */
	} else if (cursor && r->pages < RELIST_PAGES) {
		if (relist_page(s, r, cursor) < 0)
			relist_failed(s, r, "out of memory");
	} else {
		struct out *call = r->call;
		r->call = NULL;
		call->relisted = true;
		log_info("%s: sending \"%s\" again with the new marks", s->name, call->name);
		relist_free(s, r);
		if (s->mode->post(s, call) < 0) {
			http_fail(s, call, RPC_INTERNAL_ERROR, 0, "cannot send \"%s\" again", call->name);
			out_free(call);
		}
	}
	return true;
}

void relist_step_done(struct be_http *s, struct hx *x, CURLcode rc)
{
	struct relist *r = relist_of(s, x->msg->id);
	bool ok = rc == CURLE_OK && x->status / 100 == 2;
	if (ok && !x->sse)
		hx_push_body(x);   /* relist_intercept takes the answer on */
	if (!r || (ok && x->got_response))
		return;
	char why[200];
	if (!ok)
		snprintf(why, sizeof why, "%s", rc != CURLE_OK ? hx_error(x, rc) : "");
	if (!ok && rc == CURLE_OK)
		snprintf(why, sizeof why, "HTTP %ld", x->status);
	relist_failed(s, r, ok ? "no tools/list response" : why);
}

void relist_cancel(struct be_http *s, json_t *rid)
{
	for (struct relist *r = s->relists; rid && r; r = r->next)
		if (r->call && r->call->id && json_equal(r->call->id, rid)) {
			out_free(r->call);
			r->call = NULL;   /* the list's answer is still ours to take */
		}
}

void relist_drop_all(struct be_http *s)
{
	while (s->relists)
		relist_free(s, s->relists);
}
