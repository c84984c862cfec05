/*
 * redact.c - redaction rules: members named by "keys" and matches of
 * "patterns" (PCRE2) are replaced in a line before it is written. The log
 * module redacts each line before it reaches any sink, so every sink and
 * the hash chain only ever see the redacted text; the recorder
 * (--record) redacts each message it records. Keys also apply inside a
 * body string that holds a JSON document (tools often answer with JSON as
 * text). It fails closed: a string that cannot be checked (a match error,
 * no memory) is replaced whole.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "redact.h"

#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_REPLACEMENT "[REDACTED]"

struct redact {
	char **keys;              /* member names, matched case-insensitively */
	size_t nkeys;
	pcre2_code **re;
	pcre2_match_data **md;    /* one per pattern */
	size_t nre;
	char *with;               /* the replacement */
};

/* Frees the rules. */
void redact_free(struct redact *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nkeys; i++)
		free(r->keys[i]);
	for (size_t i = 0; i < r->nre; i++) {
		pcre2_match_data_free(r->md[i]);
		pcre2_code_free(r->re[i]);
	}
	free(r->keys);
	free(r->re);
	free(r->md);
	free(r->with);
	free(r);
}

/* Checks that V is an array of non-empty strings; reports at KEY. */
static bool string_array(json_t *v, struct mw_build *b, const char *key)
{
	size_t i;
	json_t *e;
	bool ok = true;
	if (!json_is_array(v)) {
		mw_error(b, key, "must be an array of strings");
		return false;
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0) {
			char p[64];
			snprintf(p, sizeof p, "%s/%zu", key, i);
			mw_error(b, p, "must be a non-empty string");
			ok = false;
		}
	}
	return ok;
}

/* Copies the key names of the array KEYS. */
static void parse_keys(struct redact *r, json_t *keys, struct mw_build *b)
{
	size_t i;
	json_t *e;
	r->keys = calloc(json_array_size(keys) + 1, sizeof *r->keys);
	if (!r->keys) {
		mw_error(b, "/redact/keys", "out of memory");
		return;
	}
	json_array_foreach(keys, i, e)
		if ((r->keys[r->nkeys] = strdup(json_string_value(e))))
			r->nkeys++;
}

/* True when RE matches the empty string (it would match everywhere). */
static bool matches_empty(pcre2_code *re, pcre2_match_data *md)
{
	return pcre2_match(re, (PCRE2_SPTR)"", 0, 0, 0, md, NULL) >= 0;
}

/* Compiles pattern I; reports at /redact/patterns/I. */
static void compile_one(struct redact *r, json_t *pat, size_t i, struct mw_build *b)
{
	char key[64];
	int err;
	PCRE2_SIZE off;
	snprintf(key, sizeof key, "/redact/patterns/%zu", i);
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)json_string_value(pat),
				       json_string_length(pat), PCRE2_UTF, &err, &off, NULL);
	if (!re) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(err, msg, sizeof msg);
		mw_error(b, key, "does not compile at offset %zu: %s", (size_t)off, (char *)msg);
		return;
	}
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	if (!md || matches_empty(re, md)) {
		mw_error(b, key, md ? "matches the empty string, so it would match everywhere"
				    : "out of memory");
		pcre2_match_data_free(md);
		pcre2_code_free(re);
		return;
	}
	pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);   /* faster if available */
	r->re[r->nre] = re;
	r->md[r->nre++] = md;
}

/* Compiles every pattern of the array PATS. */
static void parse_patterns(struct redact *r, json_t *pats, struct mw_build *b)
{
	size_t i;
	json_t *e;
	r->re = calloc(json_array_size(pats) + 1, sizeof *r->re);
	r->md = calloc(json_array_size(pats) + 1, sizeof *r->md);
	if (!r->re || !r->md) {
		mw_error(b, "/redact/patterns", "out of memory");
		return;
	}
	json_array_foreach(pats, i, e)
		compile_one(r, e, i, b);
}

/* Reports members of the "redact" object other than its three options. */
static void check_redact_keys(json_t *opt, struct mw_build *b)
{
	const char *k;
	json_t *v;
	json_object_foreach(opt, k, v) {
		if (strcmp(k, "keys") && strcmp(k, "patterns") && strcmp(k, "replacement")) {
			char key[300];
			snprintf(key, sizeof key, "/redact/%s", k);
			mw_error(b, key, "unknown option (redact takes keys, patterns, replacement)");
		}
	}
}

/* Parses the "redact" option. */
int redact_parse(json_t *opt, struct mw_build *b, struct redact **out)
{
	*out = NULL;
	if (!opt)
		return 0;
	if (!json_is_object(opt)) {
		mw_error(b, "/redact", "must be an object {\"keys\": [...], \"patterns\": [...]}");
		return -1;
	}
	int before = b->nerr;
	json_t *keys = json_object_get(opt, "keys"), *pats = json_object_get(opt, "patterns");
	json_t *with = json_object_get(opt, "replacement");
	struct redact *r = calloc(1, sizeof *r);
	check_redact_keys(opt, b);
	if (keys && string_array(keys, b, "/redact/keys") && r)
		parse_keys(r, keys, b);
	if (pats && string_array(pats, b, "/redact/patterns") && r)
		parse_patterns(r, pats, b);
	if (with && !json_is_string(with))
		mw_error(b, "/redact/replacement", "must be a string");
	if (r)
		r->with = strdup(json_is_string(with) ? json_string_value(with) : DEFAULT_REPLACEMENT);
	if (!r || !r->with)
		mw_error(b, "/redact", "out of memory");
	if (b->nerr > before || (r->nkeys == 0 && r->nre == 0)) {
		redact_free(r);
		return b->nerr > before ? -1 : 0;
	}
	*out = r;
	return 0;
}

/* S (LEN bytes) with pattern I replaced: a new string, or NULL if no match. */
static char *subst(const struct redact *r, size_t i, const char *s, size_t len,
		   size_t *outlen, bool *failed)
{
	const uint32_t opts = PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
			      PCRE2_SUBSTITUTE_LITERAL | PCRE2_NO_UTF_CHECK;
	int rc = pcre2_match(r->re[i], (PCRE2_SPTR)s, len, 0, PCRE2_NO_UTF_CHECK, r->md[i], NULL);
	if (rc == PCRE2_ERROR_NOMATCH)
		return NULL;
	PCRE2_SIZE cap = len + 2 * strlen(r->with) + 1;
	for (int tries = 0; rc >= 0 && tries < 2; tries++) {
		char *buf = malloc(cap);
		PCRE2_SIZE n = cap;
		if (!buf)
			break;
		rc = pcre2_substitute(r->re[i], (PCRE2_SPTR)s, len, 0, opts, r->md[i], NULL,
				      (PCRE2_SPTR)r->with, PCRE2_ZERO_TERMINATED,
				      (PCRE2_UCHAR *)buf, &n);
		if (rc >= 0) {
			*outlen = n;
			return buf;
		}
		free(buf);
		cap = n;   /* PCRE2_ERROR_NOMEMORY: the size needed */
		if (rc == PCRE2_ERROR_NOMEMORY)
			rc = 0;
	}
	*failed = true;
	return NULL;
}

/*
 * S (LEN bytes) with every pattern applied: a new string (its length in
 * *OUTLEN), or NULL when nothing matched. A failure gives the replacement.
 */
static char *redact_text(const struct redact *r, const char *s, size_t len,
			 size_t *outlen)
{
	char *own = NULL;
	bool failed = false;
	for (size_t i = 0; i < r->nre && !failed; i++) {
		size_t n;
		char *out = subst(r, i, s, len, &n, &failed);
		if (out) {
			free(own);
			own = out;
			s = own;
			len = n;
		}
	}
	if (failed) {
		free(own);
		own = strdup(r->with);
		len = own ? strlen(own) : 0;
	}
	*outlen = len;
	return own;
}

/* Applies the patterns to one string value; returns 1 if it changed. */
static int redact_string(const struct redact *r, json_t *v)
{
	size_t n;
	char *out = redact_text(r, json_string_value(v), json_string_length(v), &n);
	if (out && json_string_setn(v, out, n) < 0)
		json_string_set(v, r->with);
	free(out);
	return out != NULL;
}

/* True when member NAME is to be replaced whole. */
static bool key_listed(const struct redact *r, const char *name)
{
	for (size_t i = 0; i < r->nkeys; i++)
		if (strcasecmp(r->keys[i], name) == 0)
			return true;
	return false;
}

/* Renames the members of OBJ whose names match a pattern; returns how many. */
static int redact_names(const struct redact *r, json_t *obj)
{
	const char *k;
	json_t *v, *renamed = NULL;
	void *tmp;
	int changes = 0;
	json_object_foreach_safe(obj, tmp, k, v) {
		size_t n;
		char *name = redact_text(r, k, strlen(k), &n);
		if (!name)
			continue;
		if (!renamed)
			renamed = json_object();
		json_object_setn(renamed, name, n, v);
		json_object_del(obj, k);
		free(name);
		changes++;
	}
	if (renamed)
		json_object_update(obj, renamed);
	json_decref(renamed);
	return changes;
}

static int redact_tree(const struct redact *r, json_t *v, bool body);

/* Redacts the members of an object; returns the number of changes. */
static int redact_object(const struct redact *r, json_t *obj, bool body)
{
	const char *k;
	json_t *v;
	int changes = 0;
	json_object_foreach(obj, k, v) {
		if (body && key_listed(r, k)) {
			json_object_set_new(obj, k, json_string(r->with));
			changes++;
		} else {
			changes += redact_tree(r, v, body);
		}
	}
	if (body && r->nre)
		changes += redact_names(r, obj);
	return changes;
}

/*
 * Tools often answer with a JSON document inside a text string: the keys
 * apply inside it too. Re-serializes the string only if something in it
 * was redacted; returns the number of changes.
 */
static int redact_embedded(const struct redact *r, json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v), i = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
		i++;
	if (i == n || (s[i] != '{' && s[i] != '['))
		return 0;
	json_t *doc = json_loadb(s, n, 0, NULL);
	int changes = doc ? redact_tree(r, doc, true) : 0;
	if (changes) {
		char *text = json_dumps(doc, JSON_COMPACT);
		json_string_set(v, text ? text : r->with);
		free(text);
	}
	json_decref(doc);
	return changes;
}

/* Redacts a value (BODY: inside params, result or error); counts changes. */
static int redact_tree(const struct redact *r, json_t *v, bool body)
{
	size_t i;
	json_t *e;
	int changes = 0;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return redact_object(r, v, body);
	case JSON_ARRAY:
		json_array_foreach(v, i, e)
			changes += redact_tree(r, e, body);
		return changes;
	case JSON_STRING:
		if (body && r->nkeys)
			changes += redact_embedded(r, v);
		if (r->nre)
			changes += redact_string(r, v);
		return changes;
	default:
		return 0;
	}
}

/* Redacts a whole line in place. */
void redact_line(const struct redact *r, json_t *line)
{
	const char *k;
	json_t *v;
	json_object_foreach(line, k, v) {
		bool body = !strcmp(k, "params") || !strcmp(k, "result") || !strcmp(k, "error");
		redact_tree(r, v, body);
	}
}
