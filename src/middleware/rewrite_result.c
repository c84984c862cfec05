/*
 * rewrite_result.c - the "rewrite" module's work on tools/call results:
 * PCRE2 patterns replaced in the text the client gets (text content,
 * embedded resource text, every string of structuredContent, an error's
 * message), then a cap on the size of the result with a marker saying
 * what was cut.
 *
 * A pattern that fails on a string (say, it hits the backtracking limit)
 * does not let the string through unredacted: the text is withheld.
 */
#include "rewrite_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glob_match.h"
#include "log.h"

/* Bounds the backtracking one pattern may do on one string. */
#define MATCH_LIMIT 10000000u
#define DEFAULT_REPLACE "[redacted]"
#define WITHHELD "[mcp-chain: text withheld: a redaction pattern failed on it]"

/* A pattern to replace in tool results. */
struct result_rule {
	pcre2_code *re;
	pcre2_match_data *md;
	char *replace;
	bool has_tools;
	struct glob_list tools;     /* backend tool names it applies to */
};

/* ---- patterns ---- */

/* Replaces the text of S by the withheld marker after a matching error RC. */
static int withhold(json_t *s, int rc)
{
	PCRE2_UCHAR why[120];
	pcre2_get_error_message(rc, why, sizeof why);
	log_warn("rewrite: a result text was withheld: pattern failed: %s", (char *)why);
	json_string_set(s, WITHHELD);
	return 1;
}

/* Runs rule R over the string S in place; returns 1 when it changed. */
static int redact_string(const struct rw_results *rs, struct result_rule *r, json_t *s)
{
	PCRE2_SPTR subj = (PCRE2_SPTR)json_string_value(s);
	size_t len = json_string_length(s);
	int rc = pcre2_match(r->re, subj, len, 0, 0, r->md, rs->mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0)
		return withhold(s, rc);
	PCRE2_SIZE cap = len + len / 4 + 256;
	for (int attempt = 0; attempt < 2; attempt++) {
		PCRE2_UCHAR *out = malloc(cap);
		PCRE2_SIZE outlen = cap;
		uint32_t opts = PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
			PCRE2_SUBSTITUTE_UNSET_EMPTY | (attempt ? 0 : PCRE2_SUBSTITUTE_MATCHED);
		if (!out)
			return withhold(s, PCRE2_ERROR_NOMEMORY);
		rc = pcre2_substitute(r->re, subj, len, 0, opts, r->md, rs->mctx,
				      (PCRE2_SPTR)r->replace, PCRE2_ZERO_TERMINATED,
				      out, &outlen);
		if (rc >= 0 && json_string_setn(s, (char *)out, outlen) == 0) {
			free(out);
			return 1;
		}
		free(out);
		if (rc != PCRE2_ERROR_NOMEMORY)
			return withhold(s, rc < 0 ? rc : PCRE2_ERROR_BADDATA);
		cap = outlen + 1;   /* the length it needs, now known */
	}
	return withhold(s, PCRE2_ERROR_NOMEMORY);
}

/* Runs R over every string in the tree V; returns the number changed. */
static int redact_tree(const struct rw_results *rs, struct result_rule *r, json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;
	int n = 0;
	if (json_is_string(v))
		return redact_string(rs, r, v);
	json_object_foreach(v, k, e)
		n += redact_tree(rs, r, e);
	json_array_foreach(v, i, e)
		n += redact_tree(rs, r, e);
	return n;
}

/* Runs R over a response MSG's texts; returns the number changed. */
static int redact_response(const struct rw_results *rs, struct result_rule *r, json_t *msg)
{
	json_t *result = json_object_get(msg, "result"), *item, *s;
	size_t i;
	int n = 0;
	if (!result) {
		s = json_object_get(json_object_get(msg, "error"), "message");
		return json_is_string(s) ? redact_string(rs, r, s) : 0;
	}
	json_array_foreach(json_object_get(result, "content"), i, item) {
		s = json_object_get(item, "text");
		if (!s)
			s = json_object_get(json_object_get(item, "resource"), "text");
		if (json_is_string(s))
			n += redact_string(rs, r, s);
	}
	return n + redact_tree(rs, r, json_object_get(result, "structuredContent"));
}

/* ---- size cap ---- */

/* The object holding a content ITEM's payload, its key in *KEY; *TEXT if cuttable. */
static json_t *payload_of(json_t *item, const char **key, bool *text)
{
	json_t *res = json_object_get(item, "resource");
	*text = true;
	*key = "text";
	if (json_is_string(json_object_get(item, "text")))
		return item;
	if (json_is_string(json_object_get(res, "text")))
		return res;
	*text = false;
	*key = "data";
	if (json_is_string(json_object_get(item, "data")))
		return item;
	*key = "blob";
	return json_is_string(json_object_get(res, "blob")) ? res : NULL;
}

/* Payload bytes of content ITEM. */
static size_t item_size(json_t *item)
{
	const char *key;
	bool text;
	json_t *h = payload_of(item, &key, &text);
	return h ? json_string_length(json_object_get(h, key)) : 0;
}

/* Bytes of the text, data and structured content of RESULT. */
static size_t result_size(json_t *result)
{
	json_t *item, *sc = json_object_get(result, "structuredContent");
	size_t i, n = sc ? json_dumpb(sc, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
	json_array_foreach(json_object_get(result, "content"), i, item)
		n += item_size(item);
	return n;
}

/* Cuts the cuttable payload of ITEM to at most BUDGET bytes (UTF-8 safe). */
static bool cut_item(json_t *item, size_t budget)
{
	const char *key;
	bool text;
	json_t *h = payload_of(item, &key, &text);
	if (!h || !text || budget == 0)
		return false;
	const char *s = json_string_value(json_object_get(h, key));
	while (budget > 0 && ((unsigned char)s[budget] & 0xc0) == 0x80)
		budget--;
	json_object_set_new(h, key, json_stringn(s, budget));
	return budget > 0;
}

/* Keeps the content of RESULT within the cap; returns the bytes kept. */
static size_t cap_content(const struct rw_results *rs, json_t *result)
{
	json_t *kept = json_array(), *item;
	size_t i, budget = rs->max_result;
	json_array_foreach(json_object_get(result, "content"), i, item) {
		size_t n = item_size(item);
		if (n <= budget) {
			budget -= n;
			json_array_append(kept, item);
		} else if (cut_item(item, budget)) {
			budget -= item_size(item);
			json_array_append(kept, item);
		}
	}
	json_object_set_new(result, "content", kept);
	return rs->max_result - budget;
}

/* Cuts RESULT to the size cap and says so in a last text item. */
static void cap_result(const struct rw_results *rs, json_t *result)
{
	size_t total = result_size(result);
	if (total <= rs->max_result)
		return;
	size_t kept = cap_content(rs, result);
	json_t *sc = json_object_get(result, "structuredContent");
	bool sc_gone = false;
	if (sc) {
		size_t n = json_dumpb(sc, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
		sc_gone = kept + n > rs->max_result;
		if (sc_gone)
			json_object_del(result, "structuredContent");
		else
			kept += n;
	}
	json_t *marker = json_sprintf("[mcp-chain: result truncated: %zu of %zu bytes kept, "
				      "the limit is %zu%s]", kept, total, rs->max_result,
				      sc_gone ? "; structured content removed" : "");
	json_array_append_new(json_object_get(result, "content"),
			      json_pack("{s:s,s:o}", "type", "text", "text", marker));
}

/* ---- the module's entry points ---- */

/* True when there are patterns or a cap. */
bool rw_results_active(const struct rw_results *rs)
{
	return rs->nrules || rs->max_result;
}

/* Rewrites the result of a call of the backend's tool TOOL. */
void rw_results_apply(const struct rw_results *rs, const char *tool, json_t *msg,
		      size_t wire)
{
	int changed = 0;
	for (size_t i = 0; i < rs->nrules; i++) {
		struct result_rule *r = &rs->rules[i];
		if (!r->has_tools || glob_list_match(&r->tools, tool))
			changed += redact_response(rs, r, msg);
	}
	json_t *result = json_object_get(msg, "result");
	/* the wire size bounds the result: most results skip the count */
	if (rs->max_result && json_is_object(result) &&
	    (changed || !wire || wire > rs->max_result))
		cap_result(rs, result);
}

/* Compiles the patterns to machine code; matching works without it. */
void rw_results_start(struct rw_results *rs)
{
	for (size_t i = 0; i < rs->nrules; i++)
		pcre2_jit_compile(rs->rules[i].re, PCRE2_JIT_COMPLETE);
}

/* ---- options ---- */

/* Checks the $ references of replacement REP against the groups of RE. */
static const char *check_replacement(pcre2_code *re, const char *rep, char *why, size_t n)
{
	uint32_t groups = 0;
	pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
	for (const char *p = rep; (p = strchr(p, '$')) != NULL; ) {
		bool brace = *++p == '{';
		const char *s = p += brace;
		if (*s == '$' && !brace) {
			p++;
			continue;
		}
		while (isalnum((unsigned char)*p) || *p == '_' || (*p == '*' && p == s))
			p++;
		if (p == s)
			return "a lone \"$\": write \"$$\" for a dollar sign";
		if (brace && *p++ != '}')
			return "\"${\" without its \"}\"";
		char ref[64];
		snprintf(ref, sizeof ref, "%.*s", (int)(p - s - brace), s);
		if (ref[0] == '*')
			continue;
		if (isdigit((unsigned char)ref[0]) ? strtoul(ref, NULL, 10) > groups :
		    pcre2_substring_number_from_name(re, (PCRE2_SPTR)ref) == PCRE2_ERROR_NOSUBSTRING) {
			snprintf(why, n, "\"$%s\" names no group of the pattern", ref);
			return why;
		}
	}
	return NULL;
}

/* Compiles the pattern of rule V at KEY into R. */
static void parse_pattern(struct mw_build *b, const char *key, json_t *v,
			  struct result_rule *r)
{
	json_t *pat = json_object_get(v, "pattern");
	int err;
	PCRE2_SIZE off;
	char k[100];
	snprintf(k, sizeof k, "%s/pattern", key);
	if (!json_is_string(pat) || json_string_length(pat) == 0) {
		mw_error(b, k, "must be a non-empty string (a PCRE2 pattern)");
		return;
	}
	r->re = pcre2_compile((PCRE2_SPTR)json_string_value(pat), json_string_length(pat),
			      PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
	if (!r->re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(err, msg, sizeof msg);
		mw_error(b, k, "does not compile at offset %zu: %s", (size_t)off, (char *)msg);
		return;
	}
	r->md = pcre2_match_data_create_from_pattern(r->re, NULL);
	if (!r->md)
		mw_error(b, key, "out of memory");
	else if (pcre2_match(r->re, (PCRE2_SPTR)"", 0, 0, 0, r->md, NULL) >= 0)
		mw_error(b, k, "matches the empty string, so it would match everywhere");
}

/* Parses result rule I (V) into R. */
static void parse_rule(struct mw_build *b, size_t i, json_t *v, struct result_rule *r)
{
	static const char *const keys[] = { "pattern", "replace", "tools", NULL };
	char key[64], k[80], why[120];
	snprintf(key, sizeof key, "/results/%zu", i);
	if (!json_is_object(v)) {
		mw_error(b, key, "must be an object {\"pattern\", \"replace\", \"tools\"}");
		return;
	}
	mw_check_keys_at(b, key, v, keys);
	parse_pattern(b, key, v, r);
	rw_parse_str(b, key, v, "replace", true, &r->replace);
	if (!r->replace && !json_object_get(v, "replace"))
		r->replace = strdup(DEFAULT_REPLACE);
	const char *bad = r->re && r->replace ?
		check_replacement(r->re, r->replace, why, sizeof why) : NULL;
	snprintf(k, sizeof k, "%s/replace", key);
	if (bad)
		mw_error(b, k, "%s", bad);
	json_t *tools = json_object_get(v, "tools");
	snprintf(k, sizeof k, "%s/tools", key);
	r->has_tools = tools != NULL;
	if (tools)
		glob_list_parse(b, k, tools, &r->tools);
}

/* Parses "results" (V) into RS. */
static void parse_rules(struct mw_build *b, json_t *v, struct rw_results *rs)
{
	json_t *e;
	size_t i;
	if (!v)
		return;
	if (!json_is_array(v)) {
		mw_error(b, "/results", "must be an array of {\"pattern\", \"replace\"}");
		return;
	}
	rs->rules = calloc(json_array_size(v) + 1, sizeof *rs->rules);
	rs->mctx = pcre2_match_context_create(NULL);
	if (!rs->rules || !rs->mctx) {
		mw_error(b, "/results", "out of memory");
		return;
	}
	pcre2_set_match_limit(rs->mctx, MATCH_LIMIT);
	json_array_foreach(v, i, e)
		parse_rule(b, i, e, &rs->rules[rs->nrules++]);
}

/* Parses "results" and "maxResultBytes". */
void rw_results_parse(struct mw_build *b, json_t *opts, struct rw_results *rs)
{
	json_t *cap = json_object_get(opts, "maxResultBytes");
	parse_rules(b, json_object_get(opts, "results"), rs);
	if (!cap)
		return;
	if (!json_is_integer(cap) || json_integer_value(cap) < 1)
		mw_error(b, "/maxResultBytes", "must be a positive integer (bytes)");
	else
		rs->max_result = (size_t)json_integer_value(cap);
}

/* Frees the rules. */
void rw_results_release(struct rw_results *rs)
{
	for (size_t i = 0; i < rs->nrules; i++) {
		pcre2_match_data_free(rs->rules[i].md);
		pcre2_code_free(rs->rules[i].re);
		free(rs->rules[i].replace);
		glob_list_release(&rs->rules[i].tools);
	}
	pcre2_match_context_free(rs->mctx);
	free(rs->rules);
	memset(rs, 0, sizeof *rs);
}
