/*
 * args.c - the shell commands' command line: options, tool arguments as
 * one JSON object or key=value pairs, and finding a tool by the name a
 * user typed.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const commands[] = { "list", "call", "read", "prompt", "replay", NULL };

/* True when S is one of the shell commands. */
static bool is_command(const char *s)
{
	for (size_t i = 0; commands[i]; i++)
		if (strcmp(s, commands[i]) == 0)
			return true;
	return false;
}

bool cli_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			break;
		if (strcmp(a, "--direct") == 0)
			return true;
		if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0 || strcmp(a, "--timeout") == 0 ||
		    strcmp(a, "-l") == 0 || strcmp(a, "--log-level") == 0 || strcmp(a, "--log-file") == 0 ||
		    strcmp(a, "--record") == 0)
			i++;  /* its value */
		else if (a[0] != '-')
			return is_command(a);  /* the first word decides */
	}
	return false;
}

/* Takes the value of option NAME at ARGV[*I] ("--opt V" or "--opt=V"). */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (strcmp(argv[*i], name) != 0 || *i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* True when ARGV[I] is the option LONG (or SHORT), with or without "=V". */
static bool is_opt(const char *a, const char *lng, const char *shrt)
{
	size_t n = strlen(lng);
	return (strncmp(a, lng, n) == 0 && (a[n] == 0 || a[n] == '=')) ||
	       (shrt && strcmp(a, shrt) == 0);
}

/* Parses one option at ARGV[*I]; returns 0 or -1 with ERR set. */
static int parse_opt(int argc, char **argv, int *i, struct cli_opts *o, char *err, size_t errlen)
{
	const char *a = argv[*i], *v;
	if (strcmp(a, "--json") == 0) {
		o->json = true;
	} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
		o->verbose = true;
	} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
		o->help = true;
	} else if (strcmp(a, "--direct") == 0) {
		o->cmd = "direct";
	} else if (is_opt(a, "--config", "-c")) {
		if (!(v = opt_value(argc, argv, i, a[1] == 'c' ? "-c" : "--config")) || !*v)
			return snprintf(err, errlen, "--config needs a FILE"), -1;
		o->config = v;
	} else if (is_opt(a, "--timeout", NULL)) {
		char *end;
		if (!(v = opt_value(argc, argv, i, "--timeout")))
			return snprintf(err, errlen, "--timeout needs SECONDS"), -1;
		o->timeout = strtod(v, &end);
		if (end == v || *end || !(o->timeout > 0) || o->timeout > 1e7)
			return snprintf(err, errlen, "--timeout: \"%s\" is not a number of seconds", v), -1;
	} else {
		snprintf(err, errlen, "unknown option \"%s\"", a);
		return -1;
	}
	return 0;
}

int cli_parse_opts(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen)
{
	*o = (struct cli_opts){ .config = getenv("MCP_CHAIN_CONFIG") };
	o->pos = calloc((size_t)argc + 1, sizeof *o->pos);
	if (!o->pos)
		return snprintf(err, errlen, "out of memory"), -1;
	bool rest = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!rest && strcmp(a, "--") == 0) {
			rest = true;
		} else if (!rest && a[0] == '-' && a[1] && !(o->cmd && a[1] >= '0' && a[1] <= '9')) {
			if (parse_opt(argc, argv, &i, o, err, errlen) < 0)
				return -1;
		} else if (!o->cmd && !rest) {
			if (!is_command(a))
				return snprintf(err, errlen, "unknown command \"%s\"", a), -1;
			o->cmd = a;
		} else {
			o->pos[o->npos++] = argv[i];
		}
	}
	if (o->help)
		return 0;
	if (!o->cmd)
		return snprintf(err, errlen, "no command given"), -1;
	if (strcmp(o->cmd, "direct") == 0 && o->npos > 0)
		return snprintf(err, errlen, "--direct takes no arguments"), -1;
	if (strcmp(o->cmd, "replay") == 0)
		return o->npos == 1 ? 0 : (snprintf(err, errlen, "replay takes one FILE"), -1);
	if (!o->config)
		return snprintf(err, errlen, "no configuration given (use -c FILE or $MCP_CHAIN_CONFIG)"), -1;
	return 0;
}

/* The JSON type the schema gives property KEY, or NULL. */
static const char *prop_type(json_t *schema, const char *key)
{
	json_t *p = json_object_get(json_object_get(schema, "properties"), key);
	return json_string_value(json_object_get(p, "type"));
}

/* Adds one key=value pair to OBJ; returns 0 or -1 with ERR set. */
static int add_pair(json_t *obj, const char *arg, json_t *schema, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		snprintf(err, errlen, "\"%s\": arguments are key=value pairs or one JSON object", arg);
		return -1;
	}
	char key[256];
	if ((size_t)(eq - arg) >= sizeof key)
		return snprintf(err, errlen, "argument name too long"), -1;
	memcpy(key, arg, (size_t)(eq - arg));
	key[eq - arg] = 0;
	if (json_object_get(obj, key)) {
		snprintf(err, errlen, "argument \"%s\" given twice", key);
		return -1;
	}
	const char *text = eq + 1, *want = prop_type(schema, key);
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	if (!v || (want && strcmp(want, "string") == 0 && !json_is_string(v))) {
		json_decref(v);
		v = json_string(text);
	}
	if (!v) {
		snprintf(err, errlen, "argument \"%s\": the value is not valid UTF-8", key);
		return -1;
	}
	json_object_set_new(obj, key, v);
	return 0;
}

json_t *cli_args_build(char **argv, int argc, json_t *schema, char *err, size_t errlen)
{
	if (argc == 1 && argv[0][strspn(argv[0], " \t\n")] == '{') {
		json_error_t je;
		json_t *obj = json_loads(argv[0], JSON_REJECT_DUPLICATES, &je);
		if (!obj || !json_is_object(obj)) {
			snprintf(err, errlen, "the arguments are not a JSON object: %s",
				 obj ? "not an object" : je.text);
			json_decref(obj);
			return NULL;
		}
		return obj;
	}
	json_t *obj = json_object();
	for (int i = 0; i < argc; i++) {
		if (add_pair(obj, argv[i], schema, err, errlen) < 0) {
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

json_t *cli_tool_find(json_t *tools, const char *name, const char *sep)
{
	size_t i;
	json_t *t;
	json_array_foreach(tools, i, t)
		if (json_is_string(json_object_get(t, "name")) &&
		    strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return t;
	const char *dot = strchr(name, '.');
	if (!dot || !sep)
		return NULL;
	char alt[512];
	int n = snprintf(alt, sizeof alt, "%.*s%s%s", (int)(dot - name), name, sep, dot + 1);
	if (n < 0 || (size_t)n >= sizeof alt)
		return NULL;
	return cli_tool_find(tools, alt, NULL);
}

void cli_one_line(const char *text, char *out, size_t max)
{
	size_t n = 0;
	if (max == 0)
		return;
	while (text && *text == ' ')
		text++;
	for (; text && text[n] && text[n] != '\n' && n + 1 < max; n++)
		out[n] = text[n];
	if (text && text[n] && text[n] != '\n' && max > 4) {
		n = max - 4;
		while (n > 0 && ((unsigned char)out[n] & 0xC0) == 0x80)
			n--;  /* never cut a UTF-8 sequence */
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = 0;
}
