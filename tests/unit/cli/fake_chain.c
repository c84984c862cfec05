/*
 * fake_chain.c - the scripted chain of fake_chain.h, and the helpers the
 * tests of the shell commands share (temporary files, capturing fds).
 */
#include "fake_chain.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer.h"

/* A copy of V with "$id" and "$token" strings replaced. */
static json_t *subst(json_t *v, json_t *id, json_t *token)
{
	const char *s = json_string_value(v);
	if (s && strcmp(s, "$id") == 0)
		return json_incref(id ? id : json_null());
	if (s && strcmp(s, "$token") == 0)
		return json_incref(token ? token : json_null());
	if (json_is_object(v)) {
		json_t *o = json_object();
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x)
			json_object_set_new(o, k, subst(x, id, token));
		return o;
	}
	if (json_is_array(v)) {
		json_t *a = json_array();
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
			json_array_append_new(a, subst(x, id, token));
		return a;
	}
	return json_incref(v);
}

/* Writes MSG (stolen) as one line on stdout. */
static void send_line(json_t *msg)
{
	json_dumpf(msg, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(msg);
}

/* Plays STEP for the request REQ (NULL at start and end of input). */
static void play(json_t *step, json_t *req)
{
	json_t *id = json_object_get(req, "id");
	json_t *token = json_object_get(json_object_get(json_object_get(req, "params"), "_meta"),
					"progressToken");
	size_t i;
	json_t *m;
	const char *err = json_string_value(json_object_get(step, "stderr"));
	if (err) {
		fputs(err, stderr);
		fflush(stderr);
	}
	json_array_foreach(json_object_get(step, "before"), i, m)
		send_line(subst(m, id, token));
	json_array_foreach(json_object_get(step, "raw"), i, m) {
		fprintf(stdout, "%s\n", json_string_value(m));
		fflush(stdout);
	}
	if (json_object_get(step, "exit"))
		_exit((int)json_integer_value(json_object_get(step, "exit")));
	if (json_object_get(step, "result"))
		send_line(json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id, "result",
				    json_object_get(step, "result")));
	else if (json_object_get(step, "error"))
		send_line(json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id", id, "error",
				    json_object_get(step, "error")));
}

/* The step for the Nth request of METHOD. */
static json_t *step_for(json_t *script, json_t *counts, const char *method)
{
	json_t *s = json_object_get(script, method);
	if (!json_is_array(s))
		return s;
	json_int_t n = json_integer_value(json_object_get(counts, method));
	json_object_set_new(counts, method, json_integer(n + 1));
	size_t last = json_array_size(s) - 1;
	return json_array_get(s, (size_t)n < last ? (size_t)n : last);
}

int fake_chain_main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "--config") != 0) {
		writer_setup();  /* as cli_main: writes are flushed before the loop sleeps */
		return -1;
	}
	json_t *script = json_load_file(getenv("FAKE_CHAIN_SCRIPT"), 0, NULL);
	FILE *log = fopen(getenv("FAKE_CHAIN_LOG"), "a");
	json_t *counts = json_object();
	json_t *init = json_pack("{s:{s:s,s:{s:{},s:{},s:{}},s:{s:s,s:s}}}", "result",
				 "protocolVersion", "2025-06-18", "capabilities", "tools", "prompts",
				 "resources", "serverInfo", "name", "fake", "version", "1");
	if (!script || !log)
		_exit(99);
	play(json_object_get(script, "start"), NULL);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) > 0) {
		fputs(line, log);
		fflush(log);
		json_t *msg = json_loads(line, 0, NULL);
		const char *method = json_string_value(json_object_get(msg, "method"));
		if (method && json_object_get(msg, "id")) {
			json_t *step = step_for(script, counts, method);
			if (!step && strcmp(method, "initialize") == 0)
				step = init;
			if (step)
				play(step, msg);
			else
				send_line(json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id",
						    json_object_get(msg, "id"), "error", "code", -32601,
						    "message", "no such method"));
		}
		json_decref(msg);
	}
	play(json_object_get(script, "eof"), NULL);
	_exit(0);
}

/* Writes TEXT to PATH. */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

void fake_setup(struct fake *f, const char *config_json, const char *script_json)
{
	snprintf(f->dir, sizeof f->dir, "/tmp/cli-test-XXXXXX");
	if (!mkdtemp(f->dir))
		abort();
	snprintf(f->config, sizeof f->config, "%s/config.json", f->dir);
	snprintf(f->script, sizeof f->script, "%s/script.json", f->dir);
	snprintf(f->log, sizeof f->log, "%s/received.log", f->dir);
	write_file(f->config, config_json);
	write_file(f->script, script_json);
	write_file(f->log, "");
	setenv("FAKE_CHAIN_SCRIPT", f->script, 1);
	setenv("FAKE_CHAIN_LOG", f->log, 1);
}

char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0, n;
	char *buf = malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2)
			buf = realloc(buf, cap *= 2);
	}
	buf[len] = 0;
	fclose(f);
	return buf;
}

json_t *fake_received(struct fake *f)
{
	json_t *all = json_array();
	char *text = read_all(f->log);
	for (char *line = text, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		json_t *m = json_loadb(line, (size_t)(nl - line), 0, NULL);
		json_array_append_new(all, m ? m : json_string("(not JSON)"));
	}
	free(text);
	return all;
}

json_t *fake_received_method(struct fake *f, const char *method)
{
	json_t *all = fake_received(f), *some = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(all, i, m) {
		const char *mm = json_string_value(json_object_get(m, "method"));
		if (mm && strcmp(mm, method) == 0)
			json_array_append(some, m);
	}
	json_decref(all);
	return some;
}

void fake_cleanup(struct fake *f)
{
	DIR *d = opendir(f->dir);
	struct dirent *e;
	char path[400];
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", f->dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	unsetenv("FAKE_CHAIN_SCRIPT");
	unsetenv("FAKE_CHAIN_LOG");
}

void capture_begin(struct capture *c, const char *dir)
{
	snprintf(c->out_path, sizeof c->out_path, "%s/stdout", dir);
	snprintf(c->err_path, sizeof c->err_path, "%s/stderr", dir);
	fflush(stdout);
	fflush(stderr);
	c->saved_out = dup(STDOUT_FILENO);
	c->saved_err = dup(STDERR_FILENO);
	int o = open(c->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int e = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (o < 0 || e < 0)
		abort();
	dup2(o, STDOUT_FILENO);
	dup2(e, STDERR_FILENO);
	close(o);
	close(e);
	c->out = c->err = NULL;
}

void capture_end(struct capture *c)
{
	fflush(stdout);
	fflush(stderr);
	dup2(c->saved_out, STDOUT_FILENO);
	dup2(c->saved_err, STDERR_FILENO);
	close(c->saved_out);
	close(c->saved_err);
	c->out = read_all(c->out_path);
	c->err = read_all(c->err_path);
}

void capture_free(struct capture *c)
{
	free(c->out);
	free(c->err);
	c->out = c->err = NULL;
}

int stdin_feed(const char *text)
{
	int p[2];
	if (pipe(p) < 0)
		abort();
	size_t len = strlen(text);
	if (write(p[1], text, len) != (ssize_t)len)
		abort();
	close(p[1]);
	int saved = dup(STDIN_FILENO);
	dup2(p[0], STDIN_FILENO);
	close(p[0]);
	return saved;
}

void stdin_restore(int saved)
{
	dup2(saved, STDIN_FILENO);
	close(saved);
	clearerr(stdin);
}
