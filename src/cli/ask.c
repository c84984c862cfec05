/*
 * ask.c - a server's sampling and elicitation requests, answered by the
 * person at the terminal (`call`, `read`, `prompt` with stdin a terminal;
 * only then are the capabilities declared at initialize). Otherwise the
 * request is refused with an error that says why.
 *
 * Reading the answer blocks the loop: nothing else is due while a person
 * types, and the chain queues what arrives meanwhile.
 */
#include "cli_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc.h"

/* Reads one line from stdin without its newline; NULL at end of input. */
static char *read_line(const char *prompt)
{
	char *line = NULL;
	size_t cap = 0;
	fputs(prompt, stderr);
	fflush(stderr);
	ssize_t n = getline(&line, &cap, stdin);
	if (n < 0) {
		free(line);
		return NULL;
	}
	if (n > 0 && line[n - 1] == '\n')
		line[n - 1] = 0;
	return line;
}

/* Sets *ERROR to an error object and returns NULL. */
static json_t *refuse(json_t **error, const char *msg)
{
	*error = json_pack("{s:i,s:s}", "code", RPC_INVALID_REQUEST, "message", msg);
	return NULL;
}

/* Converts what was typed for property PROP; NULL when it does not fit. */
static json_t *typed_value(json_t *prop, const char *text)
{
	const char *type = json_string_value(json_object_get(prop, "type"));
	json_t *v;
	if (!type || strcmp(type, "string") == 0)
		v = json_string(text);
	else if (strcmp(type, "boolean") == 0)
		v = strchr("yYtT1", text[0]) ? json_true() : strchr("nNfF0", text[0]) ? json_false() : NULL;
	else
		v = json_loads(text, JSON_DECODE_ANY, NULL);
	/* the same checks as a tool's arguments: type and enum */
	json_t *schema = json_pack("{s:{s:O}}", "properties", "v", prop);
	json_t *args = v ? json_pack("{s:O}", "v", v) : NULL;
	char err[200];
	if (v && cli_schema_check(schema, args, err, sizeof err) < 0) {
		json_decref(v);
		v = NULL;
	}
	json_decref(schema);
	json_decref(args);
	return v;
}

/* Asks for one field; returns its value, json_null() for skipped, NULL at EOF. */
static json_t *ask_field(const char *key, json_t *prop, bool required)
{
	const char *type = json_string_value(json_object_get(prop, "type"));
	const char *desc = json_string_value(json_object_get(prop, "description"));
	char *choices = json_object_get(prop, "enum") ?
		json_dumps(json_object_get(prop, "enum"), JSON_COMPACT) : NULL;
	char prompt[600];
	snprintf(prompt, sizeof prompt, "  %s%s (%s%s%s)%s%s: ", key, required ? "*" : "",
		 type ? type : "string", choices ? " " : "", choices ? choices : "",
		 desc ? " " : "", desc ? desc : "");
	free(choices);
	for (;;) {
		char *line = read_line(prompt);
		if (!line)
			return NULL;
		if (!line[0] && !required) {
			free(line);
			return json_null();
		}
		json_t *v = line[0] ? typed_value(prop, line) : NULL;
		free(line);
		if (v)
			return v;
		fputs("  (that does not fit; again)\n", stderr);
	}
}

/* elicitation/create: one prompt per field of the requested schema. */
static json_t *elicit(json_t *params, json_t **error)
{
	const char *msg = json_string_value(json_object_get(params, "message"));
	json_t *schema = json_object_get(params, "requestedSchema");
	json_t *req = json_object_get(schema, "required");
	json_t *content = json_object();
	const char *key;
	json_t *prop;
	fprintf(stderr, "The server asks: %s\n(fields marked * are required; empty skips)\n",
		msg ? msg : "");
	json_object_foreach(json_object_get(schema, "properties"), key, prop) {
		bool required = false;
		size_t i;
		json_t *r;
		json_array_foreach(req, i, r)
			required |= json_is_string(r) && strcmp(json_string_value(r), key) == 0;
		json_t *v = ask_field(key, prop, required);
		if (!v) {
			json_decref(content);
			return json_pack("{s:s}", "action", "cancel");
		}
		if (!json_is_null(v))
			json_object_set(content, key, v);
		json_decref(v);
	}
	char *ok = read_line("Send this answer? [Y]es / [n]o (decline) / [c]ancel: ");
	const char *action = !ok ? "cancel" : strchr("nN", ok[0]) && ok[0] ? "decline" :
			     strchr("cC", ok[0]) && ok[0] ? "cancel" : "accept";
	free(ok);
	(void)error;
	if (strcmp(action, "accept") != 0) {
		json_decref(content);
		return json_pack("{s:s}", "action", action);
	}
	return json_pack("{s:s,s:o}", "action", "accept", "content", content);
}

/* sampling/createMessage: the person writes the reply the model would. */
static json_t *sample(json_t *params, json_t **error)
{
	size_t i;
	json_t *m;
	fputs("The server asks for a model reply to:\n", stderr);
	json_array_foreach(json_object_get(params, "messages"), i, m) {
		const char *text = json_string_value(json_object_get(json_object_get(m, "content"), "text"));
		const char *role = json_string_value(json_object_get(m, "role"));
		fprintf(stderr, "  [%s] %s\n", role ? role : "?", text ? text : "(not text)");
	}
	char *line = read_line("Your reply (empty refuses): ");
	if (!line || !line[0]) {
		free(line);
		return refuse(error, "the user refused to answer the sampling request");
	}
	json_t *r = json_pack("{s:s,s:{s:s,s:s},s:s,s:s}", "role", "assistant", "content", "type",
			      "text", "text", line, "model", "human (mcp-chain call)", "stopReason",
			      "endTurn");
	free(line);
	return r;
}

json_t *cli_ask_user(struct conn *c, const char *method, json_t *params, json_t **error,
		     void *arg)
{
	bool elicitation = strcmp(method, "elicitation/create") == 0;
	(void)c;
	(void)arg;
	if (!elicitation && strcmp(method, "sampling/createMessage") != 0)
		return refuse(error, "mcp-chain's shell commands do not answer this request");
	if (!isatty(STDIN_FILENO)) {
		char msg[200];
		snprintf(msg, sizeof msg, "the server asked for %s, but stdin is not a terminal to ask "
			 "the user", elicitation ? "elicitation" : "sampling");
		cli_error("%s: refused", msg);
		return refuse(error, msg);
	}
	fputs("\r\033[K", stderr);  /* under a progress bar */
	return elicitation ? elicit(params, error) : sample(params, error);
}
