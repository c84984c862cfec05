/*
 * param_headers.c - the 2026-07-28 era's x-mcp-header marks, learned from
 * tools/list results and mirrored into a tools/call's request headers.
 */
#include "param_headers.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "log.h"

#define MARK "x-mcp-header"

static void free_marks(void *value, void *arg)
{
	(void)arg;
	json_decref(value);
}

void param_table_release(struct param_table *t)
{
	hmap_each(&t->tools, free_marks, NULL);
	hmap_release(&t->tools);
}

/* True for an HTTP field-name token (RFC 9110: 1*tchar). */
static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

/*
 * Collects the marks under schema NODE into MARKS ([name, [key...]] each),
 * PATH the chain of "properties" keys that leads to NODE (NULL once the
 * chain passed through anything else: a mark there is unreachable).
 * Returns NULL, or why the tool's marks are invalid (in WHY).
 */
static const char *collect(json_t *node, json_t *path, bool is_root, json_t *marks,
			   char *why, size_t n)
{
	if (json_is_array(node)) {
		size_t i;
		json_t *el;
		json_array_foreach(node, i, el) {
			const char *bad = collect(el, NULL, false, marks, why, n);
			if (bad)
				return bad;
		}
		return NULL;
	}
	if (!json_is_object(node))
		return NULL;
	json_t *mark = json_object_get(node, MARK);
	if (mark) {
		const char *name = json_string_value(mark);
		const char *type = json_string_value(json_object_get(node, "type"));
		if (!path || is_root) {
			snprintf(why, n, "an %s mark that is not on a property reached through "
				 "\"properties\" alone", MARK);
			return why;
		}
		if (!name || !is_token(name)) {
			snprintf(why, n, "the %s mark %.60s is not an HTTP header name token", MARK,
				 name ? name : "(not a string)");
			return why;
		}
		if (!type || (strcmp(type, "string") && strcmp(type, "integer") && strcmp(type, "boolean"))) {
			snprintf(why, n, "the %s mark %.60s is on a property whose type is not "
				 "string, integer or boolean", MARK, name);
			return why;
		}
		size_t i;
		json_t *m;
		json_array_foreach(marks, i, m) {
			if (strcasecmp(json_string_value(json_array_get(m, 0)), name) == 0) {
				snprintf(why, n, "the %s mark %.60s is used twice", MARK, name);
				return why;
			}
		}
		json_array_append_new(marks, json_pack("[s,O]", name, path));
	}
	const char *key;
	json_t *v;
	json_object_foreach(node, key, v) {
		const char *bad = NULL;
		if (strcmp(key, "properties") == 0 && path && json_is_object(v)) {
			const char *prop;
			json_t *schema;
			json_object_foreach(v, prop, schema) {
				json_t *p = json_copy(path);
				json_array_append_new(p, json_string(prop));
				bad = collect(schema, p, false, marks, why, n);
				json_decref(p);
				if (bad)
					return bad;
			}
		} else if (strcmp(key, MARK) != 0) {
			bad = collect(v, NULL, false, marks, why, n);   /* unreachable from here */
		}
		if (bad)
			return bad;
	}
	return NULL;
}

size_t param_learn(struct param_table *t, json_t *tools, const char *who, bool drop)
{
	size_t removed = 0;
	for (size_t i = 0; i < json_array_size(tools);) {
		json_t *tool = json_array_get(tools, i);
		const char *name = json_string_value(json_object_get(tool, "name"));
		json_t *schema = json_object_get(tool, "inputSchema");
		json_t *marks = json_array(), *root = json_array();
		char why[200];
		const char *bad = name ? collect(schema, root, true, marks, why, sizeof why) : NULL;
		json_decref(root);
		if (bad) {
			json_decref(hmap_del(&t->tools, name, strlen(name)));
			json_decref(marks);
			removed++;
			if (!drop) {
				i++;
				continue;
			}
			log_warn("%s: tool \"%s\" left out of tools/list: %s", who, name, bad);
			json_array_remove(tools, i);
			continue;
		}
		i++;
		if (!name) {
			json_decref(marks);
			continue;
		}
		json_t *old = hmap_del(&t->tools, name, strlen(name));
		json_decref(old);
		if (json_array_size(marks) == 0 || hmap_put(&t->tools, name, strlen(name), marks) < 0)
			json_decref(marks);
	}
	return removed;
}

char *param_encode(const char *s, size_t n)
{
	bool plain = n > 0 && s[0] != ' ' && s[0] != '\t' && s[n - 1] != ' ' && s[n - 1] != '\t';
	for (size_t i = 0; plain && i < n; i++)
		plain = (s[i] >= 0x20 && s[i] <= 0x7e) || s[i] == '\t';
	if (plain && n >= 11 && strncmp(s, "=?base64?", 9) == 0 && strncmp(s + n - 2, "?=", 2) == 0)
		plain = false;   /* would read as encoded */
	if (plain)
		return strndup(s, n);
	char *out = malloc(11 + 4 * ((n + 2) / 3) + 1);
	if (!out)
		return NULL;
	memcpy(out, "=?base64?", 9);
	int k = EVP_EncodeBlock((unsigned char *)out + 9, (const unsigned char *)s, (int)n);
	memcpy(out + 9 + k, "?=", 3);
	return out;
}

/* The header text of argument value V, or NULL when it has none (absent,
 * null, or of a type a mark cannot carry). */
static char *value_text(json_t *v)
{
	char num[32];
	if (json_is_string(v))
		return param_encode(json_string_value(v), json_string_length(v));
	if (json_is_boolean(v))
		return strdup(json_is_true(v) ? "true" : "false");
	if (json_is_integer(v)) {
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return strdup(num);
	}
	double d = json_is_real(v) ? json_real_value(v) : 0.5;
	if (d > -9007199254740992.0 && d < 9007199254740992.0 && d == (double)(long long)d) {
		snprintf(num, sizeof num, "%lld", (long long)d);   /* 42.0: an integer */
		return strdup(num);
	}
	return NULL;
}

/* The value of ARGUMENTS at mark M's path (borrowed), or NULL. */
static json_t *marked_value(json_t *m, json_t *arguments)
{
	json_t *v = arguments, *key;
	size_t j;
	json_array_foreach(json_array_get(m, 1), j, key)
		v = json_object_get(v, json_string_value(key));
	return v;
}

int param_headers(const struct param_table *t, const char *tool, json_t *arguments,
		  param_header_fn add, void *arg)
{
	json_t *marks = tool ? hmap_get(&t->tools, tool, strlen(tool)) : NULL;
	size_t i;
	json_t *m;
	json_array_foreach(marks, i, m) {
		json_t *v = marked_value(m, arguments);
		char *text = value_text(v);
		if (!text)
			continue;   /* absent or null: no header */
		char *hname;
		int rc = asprintf(&hname, "Mcp-Param-%s", json_string_value(json_array_get(m, 0)));
		if (rc >= 0) {
			rc = add(arg, hname, text);
			free(hname);
		}
		free(text);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* True when header text H states argument value V. */
static bool same_value(const char *h, json_t *v)
{
	if (json_is_string(v))
		return strlen(h) == json_string_length(v) && memcmp(h, json_string_value(v), strlen(h)) == 0;
	if (json_is_boolean(v))
		return strcmp(h, json_is_true(v) ? "true" : "false") == 0;
	if (json_is_number(v)) {   /* as numbers: "42" and 42.0 agree */
		char *end;
		double d = strtod(h, &end);
		return *h && !*end && d == json_number_value(v);
	}
	return false;
}

const char *param_check(const struct param_table *t, const char *tool, json_t *arguments,
			param_get_fn get, void *arg, char *why, size_t n)
{
	json_t *marks = tool ? hmap_get(&t->tools, tool, strlen(tool)) : NULL;
	size_t i;
	json_t *m;
	json_array_foreach(marks, i, m) {
		json_t *v = marked_value(m, arguments);
		char *text = value_text(v);
		if (!text)
			continue;   /* no value a header can carry: none expected */
		free(text);
		const char *mark = json_string_value(json_array_get(m, 0));
		char *hname;
		if (asprintf(&hname, "Mcp-Param-%s", mark) < 0) {
			snprintf(why, n, "out of memory");
			return why;
		}
		bool bad = false;
		char *h = get(arg, hname, &bad);
		if (bad)
			snprintf(why, n, "the %.80s header's Base64 form cannot be decoded", hname);
		else if (!h)
			snprintf(why, n, "the %.80s header is required: the tool marks that argument "
				 "x-mcp-header and the body carries it", hname);
		else if (!same_value(h, v))
			snprintf(why, n, "the %.80s header does not match the body", hname);
		bool ok = !bad && h && same_value(h, v);
		free(h);
		free(hname);
		if (!ok)
			return why;
	}
	return NULL;
}
