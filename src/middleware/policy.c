/*
 * policy.c - the "policy" middleware: which tools, prompts and resources
 * a client may see and use.
 *
 *   {"use": "policy", "rules": [
 *      {"deny": ["delete_*", "write_file"]},
 *      {"allow": ["read_*"], "clients": ["claude-code"]},
 *      {"allow": ["*"], "roles": ["admin"]},
 *      {"ask": ["move_file"]},
 *      {"deny": ["*.env", "*secret*"], "on": "resources"}]}
 *
 * For one name, the rules that apply to it (its kind is in "on", the
 * client matches "clients", one of the principal's roles -- given by
 * auth -- matches "roles") decide: a "deny" match refuses whatever else
 * matches; when one of them has an "allow" list, the name must match an
 * "allow" or an "ask" pattern; an "ask" match asks the user through
 * elicitation/create before the request goes on.
 *
 * Denied names are taken out of list results and refused when used:
 * tools/call with a tool result marked isError (the model reads why),
 * other requests with a JSON-RPC error.
 */
#include "mw_policy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glob_match.h"
#include "rpc.h"

enum { K_TOOL = 1, K_PROMPT = 2, K_RESOURCE = 4 };
enum pol_action { POL_ALLOW, POL_DENY, POL_ASK };

/* Longest argument text quoted in the question to the user. */
#define ASK_ARGS_MAX 1000

struct rule {
	unsigned kinds;       /* K_* it applies to */
	bool has_allow;       /* an "allow" key, even an empty list */
	bool has_clients, has_roles;
	struct glob_list allow, deny, ask, clients, roles;
};

struct policy {
	struct mw_module base;  /* must be first */
	struct rule *rules;
	size_t nrules;
	unsigned kinds;         /* union of the rules' kinds: skip the rest */
	char *ask_message;      /* template, or NULL for the default */
	/*
	 * The decision reads() took for the request of DECIDED_FOR, which
	 * on_message (called right after it, with the message unparsed)
	 * uses once instead of deciding again.
	 */
	const struct mw_ctx *decided_for;
	enum pol_action decided;
	struct ask *asks;       /* questions whose walk is held, for on_cancel */
};

/* What a request is about. */
struct subject {
	unsigned kind;          /* K_*, or 0 when the policy has no say */
	const char *name;       /* borrowed from the message */
	bool use;               /* a use the user may be asked about */
	bool is_call;           /* tools/call: refused with a tool result */
};

/*
 * A question to the user in progress. Freed by ask_done, which the chain
 * calls exactly once, even after the request was cancelled.
 */
struct ask {
	struct mw_walk *walk;   /* held, NULL while mw_ask_client runs */
	json_t *msg;            /* the request, owned while held */
	json_t *answer;         /* an answer that came before the hold */
	struct subject subj;    /* name points into msg */
	bool answered;
	bool cancelled;         /* the request ended: the answer is not used */
	const struct mw_ctx *ctx;  /* the held request's, for on_cancel */
	struct ask *next, **pprev; /* in the policy's list while held */
};

/* Takes A out of its policy's list of held questions, if it is in it. */
static void ask_unlink(struct ask *a)
{
	if (!a->pprev)
		return;
	*a->pprev = a->next;
	if (a->next)
		a->next->pprev = a->pprev;
	a->next = NULL;
	a->pprev = NULL;
}

/* A list method and where its names are. */
struct list_kind {
	enum mcp_method method;
	const char *key, *field;
	unsigned kind;
};

static const struct list_kind lists[] = {
	{ MCP_TOOLS_LIST, "tools", "name", K_TOOL },
	{ MCP_PROMPTS_LIST, "prompts", "name", K_PROMPT },
	{ MCP_RESOURCES_LIST, "resources", "uri", K_RESOURCE },
	{ MCP_RESOURCES_TEMPLATES_LIST, "resourceTemplates", "uriTemplate", K_RESOURCE },
};

/* The word for a kind in messages. */
static const char *kind_word(unsigned kind)
{
	return kind == K_TOOL ? "tool" : kind == K_PROMPT ? "prompt" : "resource";
}

/* ---- deciding ---- */

/* Who asks: the client (principal) and its roles, either may be NULL. */
struct asker {
	const char *client;
	json_t *roles;
};

/* The asker of the exchange CTX describes. */
static struct asker asker_of(const struct mw_ctx *ctx)
{
	return (struct asker){ ctx->client, ctx->roles };
}

/* True when one of the strings in the array ROLES matches a pattern of L. */
static bool any_role(const struct glob_list *l, json_t *roles)
{
	size_t i;
	json_t *v;
	json_array_foreach(roles, i, v)
		if (json_is_string(v) && glob_list_match(l, json_string_value(v)))
			return true;
	return false;
}

/* True when rule R applies to a name of KIND asked for by A. */
static bool rule_applies(const struct rule *r, unsigned kind, struct asker a)
{
	return (r->kinds & kind) &&
	       (!r->has_clients || glob_list_match(&r->clients, a.client)) &&
	       (!r->has_roles || any_role(&r->roles, a.roles));
}

/* What the rules say about NAME of KIND for A. */
static enum pol_action decide(const struct policy *p, unsigned kind,
			      const char *name, struct asker a)
{
	bool listed = false, allowed = false, ask = false;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct rule *r = &p->rules[i];
		if (!rule_applies(r, kind, a))
			continue;
		if (glob_list_match(&r->deny, name))
			return POL_DENY;
		listed |= r->has_allow;
		allowed |= glob_list_match(&r->allow, name);
		ask |= glob_list_match(&r->ask, name);
	}
	if (listed && !allowed && !ask)
		return POL_DENY;
	return ask ? POL_ASK : POL_ALLOW;
}

/* String member KEY of object O, or NULL. */
static const char *str_of(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/*
 * Fills S with what a client's request MSG (borrowed) is about; while the
 * message travels unparsed (MSG NULL) the chain's ctx->name is that name.
 */
static void subject_of(const struct mw_ctx *ctx, json_t *msg, struct subject *s)
{
	json_t *params = msg ? json_object_get(msg, "params") : NULL;
	const char *name = msg ? str_of(params, "name") : ctx->name;
	memset(s, 0, sizeof *s);
	switch (ctx->method_code) {
	case MCP_TOOLS_CALL:
		*s = (struct subject){ K_TOOL, name, true, true };
		break;
	case MCP_PROMPTS_GET:
		*s = (struct subject){ K_PROMPT, name, true, false };
		break;
	case MCP_RESOURCES_READ:
		*s = (struct subject){ K_RESOURCE, msg ? str_of(params, "uri") : ctx->name, true,
				       false };
		break;
	case MCP_RESOURCES_SUBSCRIBE:
		*s = (struct subject){ K_RESOURCE, msg ? str_of(params, "uri") : ctx->name, false,
				       false };
		break;
	case MCP_COMPLETION_COMPLETE: {
		json_t *ref = json_object_get(params, "ref");
		const char *type = str_of(ref, "type");
		if (type && strcmp(type, "ref/prompt") == 0)
			*s = (struct subject){ K_PROMPT, str_of(ref, "name"), false, false };
		else if (type && strcmp(type, "ref/resource") == 0)
			*s = (struct subject){ K_RESOURCE, str_of(ref, "uri"), false, false };
		break;
	}
	default:
		break;
	}
}

/* ---- answering ---- */

/* Replaces *MSG by the refusal of the request about S, saying TEXT. */
static void refuse(json_t **msg, const struct subject *s, const char *text)
{
	json_t *id = json_object_get(*msg, "id");
	json_t *r;
	if (s->is_call)
		r = rpc_result(id, json_pack("{s:[{s:s,s:s}],s:b}", "content",
					     "type", "text", "text", text,
					     "isError", 1));
	else
		r = rpc_error(id, RPC_INVALID_PARAMS, text,
			      json_pack("{s:s}", "refusedBy", "policy"));
	json_decref(*msg);
	*msg = r;
}

/* Refuses the request about S because the rules deny it. */
static void refuse_denied(json_t **msg, const struct subject *s)
{
	char text[600];
	snprintf(text, sizeof text,
		 "Refused by the mcp-chain policy: the %s \"%.400s\" is not allowed%s.",
		 kind_word(s->kind), s->name, s->is_call ? ", so it was not called" : "");
	refuse(msg, s, text);
}

/* Appends at most N bytes of SRC to the buffer OUT of size CAP at *LEN. */
static void append(char *out, size_t cap, size_t *len, const char *src, size_t n)
{
	if (*len + n >= cap)
		n = cap - *len - 1;
	memcpy(out + *len, src, n);
	*len += n;
	out[*len] = '\0';
}

/* The arguments of request MSG as short JSON text (caller frees), or NULL. */
static char *args_text(json_t *msg)
{
	json_t *args = json_object_get(json_object_get(msg, "params"), "arguments");
	if (!args)
		return NULL;
	char *t = json_dumps(args, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	if (t && strlen(t) > ASK_ARGS_MAX)
		strcpy(t + ASK_ARGS_MAX - 3, "...");
	return t;
}

/* Expands {client}, {kind}, {name} and {arguments} in TPL into OUT. */
static void expand(const char *tpl, const char *const vals[4], char *out, size_t cap)
{
	static const char *const keys[] = { "{client}", "{kind}", "{name}", "{arguments}" };
	size_t len = 0;
	out[0] = '\0';
	while (*tpl) {
		size_t k = 0;
		while (k < 4 && strncmp(tpl, keys[k], strlen(keys[k])) != 0)
			k++;
		if (k < 4) {
			append(out, cap, &len, vals[k], strlen(vals[k]));
			tpl += strlen(keys[k]);
		} else {
			append(out, cap, &len, tpl++, 1);
		}
	}
}

/* The params of the elicitation/create request about S (new reference). */
static json_t *ask_params(const struct policy *p, const struct mw_ctx *ctx,
			  json_t *msg, const struct subject *s)
{
	static const char dflt[] =
		"Allow the client \"{client}\" to use the {kind} \"{name}\"?"
		" Arguments: {arguments}";
	char text[2048];
	char *args = args_text(msg);
	const char *vals[4] = { ctx->client ? ctx->client : "(unnamed)",
				kind_word(s->kind), s->name, args ? args : "none" };
	expand(p->ask_message ? p->ask_message : dflt, vals, text, sizeof text);
	free(args);
	return json_pack("{s:s,s:{s:s,s:{}}}", "message", text, "requestedSchema",
			 "type", "object", "properties");
}

/* The refusal text for the user's answer RESP, or "" to go on. */
static void answer_refusal(json_t *resp, const struct subject *s, char *out, size_t cap)
{
	json_t *err = json_object_get(resp, "error");
	const char *action = str_of(json_object_get(resp, "result"), "action");
	const char *k = kind_word(s->kind);
	out[0] = '\0';
	if (err)
		snprintf(out, cap, "Refused by the mcp-chain policy: the %s \"%.300s\" needs "
			 "the user's confirmation, but the client cannot ask the user "
			 "(elicitation unavailable: %.200s, code %d)%s.", k, s->name,
			 str_of(err, "message") ? str_of(err, "message") : "no message",
			 (int)json_integer_value(json_object_get(err, "code")),
			 s->is_call ? "; it was not called" : "");
	else if (action && strcmp(action, "accept") == 0)
		return;
	else if (action && strcmp(action, "decline") == 0)
		snprintf(out, cap, "Refused: the user declined the use of the %s \"%.300s\"%s.",
			 k, s->name, s->is_call ? "; it was not called" : "");
	else
		snprintf(out, cap, "Refused: the user did not confirm the use of the %s "
			 "\"%.300s\" (%s)%s.", k, s->name,
			 action && strcmp(action, "cancel") == 0 ? "cancelled" : "no valid answer",
			 s->is_call ? "; it was not called" : "");
}

/* Applies the answer RESP to the request *MSG; returns the verdict. */
static enum mw_verdict settle(struct ask *a, json_t *resp, json_t **msg)
{
	char text[800];
	answer_refusal(resp, &a->subj, text, sizeof text);
	if (!text[0])
		return MW_PASS;
	refuse(msg, &a->subj, text);
	return MW_REPLY;
}

/* The client answered (or could not): settle now or record for the caller. */
static void ask_done(json_t *response, void *arg)
{
	struct ask *a = arg;
	ask_unlink(a);
	if (a->cancelled) {
		free(a);   /* the request is gone: the answer has nothing to settle */
		return;
	}
	if (!a->walk) {
		/* answered inside mw_ask_client: ask_user settles it */
		a->answered = true;
		a->answer = json_incref(response);
		return;
	}
	json_t *msg = a->msg;
	struct mw_walk *w = a->walk;
	enum mw_verdict v = settle(a, response, &msg);
	free(a);
	mw_resume(w, v, msg);
}

/* Asks the user whether the request *MSG about S may go on. */
static enum mw_verdict ask_user(struct policy *p, struct mw_ctx *ctx, json_t **msg,
				const struct subject *s)
{
	struct ask *a = calloc(1, sizeof *a);
	if (!a) {
		refuse(msg, s, "Refused by the mcp-chain policy: out of memory");
		return MW_REPLY;
	}
	a->subj = *s;
	int rc = mw_ask_client(ctx, "elicitation/create", ask_params(p, ctx, *msg, s),
			       ask_done, a);
	if (a->answered || rc < 0) {
		/* answered at once, or (out of memory) never will be */
		json_t *answer = a->answered ? a->answer :
			rpc_error(NULL, RPC_INTERNAL_ERROR, "cannot send the question", NULL);
		enum mw_verdict v = settle(a, answer, msg);
		json_decref(answer);
		free(a);
		return v;
	}
	a->msg = *msg;
	*msg = NULL;
	a->walk = mw_walk_hold(ctx);
	a->ctx = ctx;
	a->next = p->asks;
	if (p->asks)
		p->asks->pprev = &a->next;
	a->pprev = &p->asks;
	p->asks = a;
	return MW_ASYNC;
}

/*
 * The request a question is held for was cancelled (or its client left):
 * the question is withdrawn at the client (its ask_done comes now, or, if
 * it cannot be withdrawn, whenever the answer comes, and is ignored).
 */
static void policy_on_cancel(struct mw_module *m, struct mw_ctx *ctx)
{
	struct policy *p = (struct policy *)m;
	for (struct ask *a = p->asks; a; a = a->next) {
		if (a->ctx != ctx)
			continue;
		ask_unlink(a);
		a->cancelled = true;
		json_decref(a->msg);
		a->msg = NULL;
		mw_ask_withdraw(ctx, a, "the request the question was about was cancelled");
		return;   /* A may be freed now */
	}
}

/* ---- hooks ---- */

/* Refuses or questions a client's request about a name the rules cover. */
static enum mw_verdict policy_on_message(struct mw_module *m, struct mw_ctx *ctx,
					 json_t **msg)
{
	struct policy *p = (struct policy *)m;
	struct subject s;
	if (ctx->kind != RPC_REQUEST || ctx->dir != MW_TO_BACKEND)
		return MW_PASS;
	subject_of(ctx, *msg, &s);
	bool cached = !*msg && p->decided_for == ctx;
	p->decided_for = NULL;
	if (!(s.kind & p->kinds) || !s.name)
		return MW_PASS;
	switch (cached ? p->decided : decide(p, s.kind, s.name, asker_of(ctx))) {
	case POL_DENY:
		refuse_denied(msg, &s);
		mw_note(ctx, "denied", s.is_call ? 0 : RPC_INVALID_PARAMS, "the rules deny it");
		return MW_REPLY;
	case POL_ASK:
		return s.use ? ask_user(p, ctx, msg, &s) : MW_PASS;
	default:
		return MW_PASS;
	}
}

/* The list kind for METHOD, or NULL. */
static const struct list_kind *list_kind_of(enum mcp_method method)
{
	for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
		if (method == lists[i].method)
			return &lists[i];
	return NULL;
}

/* Takes the entries denied to A out of the list RESULT[LK->key]. */
static void filter_list(const struct policy *p, const struct list_kind *lk,
			json_t *result, struct asker a)
{
	json_t *arr = json_object_get(result, lk->key), *out = NULL, *e;
	size_t i;
	json_array_foreach(arr, i, e) {
		const char *name = str_of(e, lk->field);
		bool denied = name && decide(p, lk->kind, name, a) == POL_DENY;
		if (denied && !out) {
			out = json_array();
			for (size_t j = 0; j < i; j++)
				json_array_append(out, json_array_get(arr, j));
		} else if (!denied && out) {
			json_array_append(out, e);
		}
	}
	if (out)
		json_object_set_new(result, lk->key, out);
}

/* What keep_allowed needs to decide on a list's entries. */
struct list_edit {
	const struct policy *p;
	const struct list_kind *lk;
	struct asker a;
};

/* mw_list_edit's callback: leaves out the entries denied to the asker. */
static enum mw_entry_verdict keep_allowed(void *arg, const struct mw_entry *e,
					  json_t **replace)
{
	const struct list_edit *le = arg;
	(void)replace;
	if (e->key && decide(le->p, le->lk->kind, e->key, le->a) == POL_DENY)
		return MW_ENTRY_DROP;
	return MW_ENTRY_KEEP;
}

/*
 * The message is read for a list to filter, a question to ask (its
 * arguments go into it) and completion (its subject is deeper); a use
 * allowed or denied is decided on ctx->name alone.
 */
static bool policy_reads(struct mw_module *m, const struct mw_ctx *ctx)
{
	struct policy *p = (struct policy *)m;
	struct subject s;
	if (ctx->dir != MW_TO_BACKEND || !ctx->method || ctx->kind == RPC_NOTIFICATION)
		return false;
	if (ctx->kind == RPC_RESPONSE)
		return false;  /* lists are filtered as bytes (mw_list_edit) */
	if (ctx->method_code == MCP_COMPLETION_COMPLETE)
		return true;
	subject_of(ctx, NULL, &s);
	if (!(s.kind & p->kinds) || !s.name)
		return false;
	p->decided = decide(p, s.kind, s.name, asker_of(ctx));
	p->decided_for = ctx;
	return s.use && p->decided == POL_ASK;
}

/* Hides denied names from the lists a client gets. */
static enum mw_verdict policy_on_response(struct mw_module *m, struct mw_ctx *ctx,
					  json_t **msg)
{
	struct policy *p = (struct policy *)m;
	if (ctx->dir != MW_TO_BACKEND)
		return MW_PASS;
	const struct list_kind *lk = list_kind_of(ctx->method_code);
	if (!lk || !(lk->kind & p->kinds))
		return MW_PASS;
	struct list_edit le = { p, lk, asker_of(ctx) };
	if (*msg || mw_list_edit(ctx, lk->key, lk->field, keep_allowed, &le) < 0) {
		if (mw_read(ctx, msg) == 0)  /* parsed already, or unusual bytes */
			filter_list(p, lk, json_object_get(*msg, "result"), le.a);
	}
	return MW_PASS;
}

/* ---- options ---- */

/* Parses "on": a kind name or an array of them. Returns the K_* set. */
static unsigned parse_kinds(struct mw_build *b, const char *key, json_t *v)
{
	static const char *const names[] = { "tools", "prompts", "resources" };
	unsigned kinds = 0;
	size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
	for (i = 0; i < n; i++) {
		json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
		size_t k = 0;
		while (k < 3 && !(json_is_string(e) && strcmp(json_string_value(e), names[k]) == 0))
			k++;
		if (k == 3) {
			mw_error(b, key, "must be \"tools\", \"prompts\", \"resources\" or an array of them");
			return 0;
		}
		kinds |= 1u << k;
	}
	if (!kinds)
		mw_error(b, key, "empty: name at least one of tools, prompts, resources");
	return kinds;
}

/* Parses the pattern list NAME of rule OBJ at KEY into L; true if present. */
static bool parse_list(struct mw_build *b, const char *key, json_t *obj,
		       const char *name, struct glob_list *l)
{
	char k[300];
	json_t *v = json_object_get(obj, name);
	if (!v)
		return false;
	snprintf(k, sizeof k, "%s/%s", key, name);
	glob_list_parse(b, k, v, l);
	return true;
}

/* Parses rule I (V) into R. */
static void parse_rule(struct mw_build *b, size_t i, json_t *v, struct rule *r)
{
	static const char *const keys[] = { "allow", "deny", "ask", "clients", "roles", "on",
					    NULL };
	char key[64], k[80];
	snprintf(key, sizeof key, "/rules/%zu", i);
	if (!json_is_object(v)) {
		mw_error(b, key, "a rule is an object with \"allow\", \"deny\" or \"ask\"");
		return;
	}
	mw_check_keys_at(b, key, v, keys);
	r->has_allow = parse_list(b, key, v, "allow", &r->allow);
	bool any = r->has_allow;
	any |= parse_list(b, key, v, "deny", &r->deny);
	any |= parse_list(b, key, v, "ask", &r->ask);
	if (!any)
		mw_error(b, key, "a rule needs \"allow\", \"deny\" or \"ask\"");
	r->has_clients = parse_list(b, key, v, "clients", &r->clients);
	snprintf(k, sizeof k, "%s/clients", key);
	if (r->has_clients && r->clients.n == 0)
		mw_error(b, k, "empty: leave \"clients\" out to apply the rule to every client");
	r->has_roles = parse_list(b, key, v, "roles", &r->roles);
	snprintf(k, sizeof k, "%s/roles", key);
	if (r->has_roles && r->roles.n == 0)
		mw_error(b, k, "empty: leave \"roles\" out to apply the rule whatever the roles");
	snprintf(k, sizeof k, "%s/on", key);
	json_t *on = json_object_get(v, "on");
	r->kinds = on ? parse_kinds(b, k, on) : K_TOOL;
}

/* Parses "askMessage" into P. */
static void parse_ask_message(struct mw_build *b, json_t *v, struct policy *p)
{
	if (!v)
		return;
	if (!json_is_string(v) || json_string_length(v) == 0) {
		mw_error(b, "/askMessage", "must be a non-empty string");
		return;
	}
	p->ask_message = strdup(json_string_value(v));
}

/* Frees the module. */
static void policy_destroy(struct mw_module *m)
{
	struct policy *p = (struct policy *)m;
	for (size_t i = 0; i < p->nrules; i++) {
		glob_list_release(&p->rules[i].allow);
		glob_list_release(&p->rules[i].deny);
		glob_list_release(&p->rules[i].ask);
		glob_list_release(&p->rules[i].clients);
		glob_list_release(&p->rules[i].roles);
	}
	free(p->rules);
	free(p->ask_message);
	while (p->asks)
		ask_unlink(p->asks);   /* their ask_done must not reach back here */
	free(p);
}

static const struct mw_module_ops policy_ops = {
	.name = "policy",
	.reads = policy_reads,
	.on_message = policy_on_message,
	.on_cancel = policy_on_cancel,
	.on_response = policy_on_response,
	.destroy = policy_destroy,
};

/* Creates a policy module from its options. */
struct mw_module *mw_policy_create(json_t *opts, struct mw_build *b)
{
	static const char *const keys[] = { "rules", "askMessage", NULL };
	int before = b->nerr;
	json_t *rules = json_object_get(opts, "rules"), *v;
	size_t i;
	mw_check_keys(b, opts, keys);
	if (!json_is_array(rules)) {
		mw_error(b, "/rules", "missing or not an array of rules");
		return NULL;
	}
	struct policy *p = calloc(1, sizeof *p);
	if (p)
		p->rules = calloc(json_array_size(rules) + 1, sizeof *p->rules);
	if (!p || !p->rules) {
		free(p);
		mw_error(b, "", "out of memory");
		return NULL;
	}
	p->base.ops = &policy_ops;
	p->nrules = json_array_size(rules);
	json_array_foreach(rules, i, v) {
		parse_rule(b, i, v, &p->rules[i]);
		p->kinds |= p->rules[i].kinds;
	}
	parse_ask_message(b, json_object_get(opts, "askMessage"), p);
	if (b->nerr > before) {
		policy_destroy(&p->base);
		return NULL;
	}
	return &p->base;
}
