/*
 * schema.c - checks a tool's arguments against its inputSchema before the
 * call, so that a typo is named by the shell rather than by the server.
 *
 * Only what a person gets wrong on a command line is checked: required
 * keys, the type of each top-level property, enum, and unknown keys when
 * additionalProperties is false. Anything the schema says beyond that is
 * the server's to check.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The JSON Schema type name of V. */
static const char *type_of(json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

/* True when V is of the schema type NAME. */
static bool is_type(json_t *v, const char *name)
{
	const char *t = type_of(v);
	if (strcmp(name, t) == 0)
		return true;
	if (strcmp(name, "number") == 0)
		return json_is_integer(v);
	if (strcmp(name, "integer") == 0 && json_is_real(v)) {
		double d = json_real_value(v);
		return d == floor(d);
	}
	return false;
}

/* True when V matches TYPE (a string, an array of them, or absent). */
static bool type_ok(json_t *v, json_t *type)
{
	if (json_is_string(type))
		return is_type(v, json_string_value(type));
	if (!json_is_array(type) || json_array_size(type) == 0)
		return true;
	size_t i;
	json_t *t;
	json_array_foreach(type, i, t)
		if (json_is_string(t) && is_type(v, json_string_value(t)))
			return true;
	return false;
}

/* Writes V (compact, cut) into OUT. */
static void show(json_t *v, char *out, size_t n)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	cli_one_line(s ? s : "?", out, n > 60 ? 60 : n);
	free(s);
}

/* Writes the type list of TYPE into OUT ("integer", "string or null"). */
static void show_type(json_t *type, char *out, size_t n)
{
	if (json_is_string(type)) {
		snprintf(out, n, "%s", json_string_value(type));
		return;
	}
	size_t len = 0, i;
	json_t *t;
	out[0] = 0;
	json_array_foreach(type, i, t)
		if (len < n)
			len += (size_t)snprintf(out + len, n - len, "%s%s", i ? " or " : "",
						json_string_value(t) ? json_string_value(t) : "?");
}

/* Checks one property value against its schema PROP. */
static int check_prop(const char *key, json_t *v, json_t *prop, char *err, size_t errlen)
{
	json_t *type = json_object_get(prop, "type");
	char a[64], b[64];
	if (type && !type_ok(v, type)) {
		show_type(type, a, sizeof a);
		show(v, b, sizeof b);
		snprintf(err, errlen, "argument \"%s\": expected %s, got %s %s", key, a, type_of(v), b);
		return -1;
	}
	json_t *en = json_object_get(prop, "enum");
	if (!json_is_array(en))
		return 0;
	size_t i;
	json_t *e;
	json_array_foreach(en, i, e)
		if (json_equal(e, v))
			return 0;
	char *all = json_dumps(en, JSON_COMPACT);
	show(v, b, sizeof b);
	snprintf(err, errlen, "argument \"%s\": %s is not one of %s", key, b, all ? all : "the allowed values");
	free(all);
	return -1;
}

/* Lists the schema's property names into OUT ("a, b, c"). */
static void known_keys(json_t *props, char *out, size_t n)
{
	const char *k;
	json_t *v;
	size_t len = 0;
	out[0] = 0;
	json_object_foreach(props, k, v)
		if (len < n)
			len += (size_t)snprintf(out + len, n - len, "%s%s", len ? ", " : "", k);
	if (!len)
		snprintf(out, n, "none");
}

int cli_schema_check(json_t *schema, json_t *args, char *err, size_t errlen)
{
	if (!json_is_object(args))
		return snprintf(err, errlen, "the arguments must be a JSON object"), -1;
	if (!json_is_object(schema))
		return 0;
	json_t *props = json_object_get(schema, "properties");
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(schema, "required"), i, r) {
		const char *k = json_string_value(r);
		if (k && !json_object_get(args, k)) {
			json_t *d = json_object_get(json_object_get(props, k), "description");
			snprintf(err, errlen, "missing required argument \"%s\"%s%s", k,
				 json_is_string(d) ? ": " : "", json_is_string(d) ? json_string_value(d) : "");
			return -1;
		}
	}
	const char *key;
	json_t *v;
	bool closed = json_is_false(json_object_get(schema, "additionalProperties"));
	json_object_foreach(args, key, v) {
		json_t *prop = json_object_get(props, key);
		if (!prop && closed) {
			char known[300];
			known_keys(props, known, sizeof known);
			snprintf(err, errlen, "unknown argument \"%s\" (known: %s)", key, known);
			return -1;
		}
		if (json_is_object(prop) && check_prop(key, v, prop, err, errlen) < 0)
			return -1;
	}
	return 0;
}
