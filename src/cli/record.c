/*
 * record.c - `mcp-chain --config FILE --record OUT`: the normal stdio
 * server, with every message both ways written to OUT as one JSON line
 * ({"t", "dir", "backend", "msg"}), secrets redacted as the `log` module
 * redacts them (the core's redact.h, with the log modules' "redact"
 * options).
 *
 * The recorder is the chain's wiretap (include/wiretap.h): it sees each
 * line as it crosses a peer's edge, in this process. Between the client
 * and the chain ("dir": "in" from the client, "out" to it) the backend a
 * message is about is told from its names (a tool or prompt's prefix; the
 * only backend when there is one) and from the request a response or
 * progress answers, and is null when it is about no one backend (the
 * handshake, ping, a merged list); between the chain and a backend
 * ("to-backend", "from-backend") it is the backend itself, handshakes
 * included.
 */
#include "cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "middleware.h"
#include "peer.h"
#include "redact.h"
#include "rpc.h"
#include "wiretap.h"

/* Keys redacted in every recording, on top of the log modules' own. */
static const char default_keys[] =
	"{\"keys\": [\"io.mcp-chain/token\", \"authorization\", \"password\", \"apiKey\","
	" \"api_key\", \"secret\", \"access_token\", \"refresh_token\"]}";

struct recorder {
	const struct cfg *cfg;
	FILE *out;
	struct redact *redact[8];
	size_t nredact;
	json_t *req_backend[2];      /* by direction: id text -> backend */
	json_t *token_backend;       /* progress token text -> backend */
};

/* Adds the redaction of OPT (a "redact" option) to R; 0 or -1. */
static int add_redact(struct recorder *r, json_t *opt, const char *file, const char *where)
{
	struct cfg_errors errs = { 0 };
	struct mw_build b = { .file = file, .path = where, .errs = &errs };
	struct redact *rules = NULL;
	int rc = redact_parse(opt, &b, &rules);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (rules && r->nredact < sizeof r->redact / sizeof *r->redact)
		r->redact[r->nredact++] = rules;
	else
		redact_free(rules);
	return rc;
}

/* Collects the "redact" options of every `log` module in MW. */
static void redact_from(struct recorder *r, json_t *mw, const char *where)
{
	size_t i;
	json_t *m;
	json_array_foreach(mw, i, m) {
		const char *use = json_string_value(json_object_get(m, "use"));
		if (use && strcmp(use, "log") == 0 && json_object_get(m, "redact"))
			add_redact(r, json_object_get(m, "redact"), r->cfg->path, where);
	}
}

/* The enabled backend that owns NAME by its prefix (or the only one). */
static const char *backend_of_name(struct recorder *r, const char *name)
{
	const char *best = NULL, *only = NULL;
	size_t best_len = 0, enabled = 0, sl = strlen(r->cfg->separator);
	for (size_t i = 0; i < r->cfg->nservers; i++) {
		const struct cfg_server *e = &r->cfg->servers[i];
		if (!e->enabled)
			continue;
		enabled++;
		only = e->name;
		const char *p = e->prefix ? e->prefix : e->name;
		size_t pl = strlen(p);
		if (name && pl + sl > best_len && strncmp(name, p, pl) == 0 &&
		    strncmp(name + pl, r->cfg->separator, sl) == 0) {
			best = e->name;
			best_len = pl + sl;
		}
	}
	return enabled == 1 ? only : best;
}

/* A text key for an id or token. */
static void key_of(json_t *v, char *out, size_t n)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(out, n, "%s", s ? s : "");
	free(s);
}

/* Which backend MSG (going TO_CLIENT or not) is about, if it can be told. */
static const char *backend_of(struct recorder *r, json_t *msg, bool to_client)
{
	char key[128];
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	const char *method = json_string_value(json_object_get(msg, "method"));
	if (!method && id) {  /* a response: to a request the other way */
		key_of(id, key, sizeof key);
		return json_string_value(json_object_get(r->req_backend[!to_client], key));
	}
	if (method && strcmp(method, "notifications/progress") == 0) {
		key_of(json_object_get(params, "progressToken"), key, sizeof key);
		return json_string_value(json_object_get(r->token_backend, key));
	}
	const char *b = backend_of_name(r, json_string_value(json_object_get(params, "name")));
	if (id && b) {
		key_of(id, key, sizeof key);
		json_object_set_new(r->req_backend[to_client], key, json_string(b));
		json_t *tok = rpc_progress_token(msg);
		if (tok) {
			key_of(tok, key, sizeof key);
			json_object_set_new(r->token_backend, key, json_string(b));
		}
	}
	return b;
}

/* Writes one line of the recording for LINE (LEN bytes) going DIR for BACKEND (or inferred). */
static void record(struct recorder *r, const char *line, size_t len, const char *dir,
		   const char *backend, bool to_client)
{
	json_t *msg = json_loadb(line, len, JSON_DECODE_ANY, NULL);
	struct timespec ts;
	struct tm tm;
	char t[64];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + n, sizeof t - n, ".%06ldZ", ts.tv_nsec / 1000);
	const char *b = backend ? backend :
		json_is_object(msg) ? backend_of(r, msg, to_client) : NULL;
	if (msg)
		for (size_t i = 0; i < r->nredact; i++)
			redact_line(r->redact[i], msg);
	json_t *entry = json_pack("{s:s,s:s,s:s?,s:o?}", "t", t, "dir", dir,
				  "backend", b, "msg", msg);
	if (!msg)  /* not JSON: kept as text, so the recording shows what passed */
		json_object_set_new(entry, "raw", json_stringn_nocheck(line, len));
	json_dumpf(entry, r->out, JSON_COMPACT);
	fputc('\n', r->out);
	fflush(r->out);
	json_decref(entry);
}

/* The wiretap: one recording line per message crossing a peer's edge. */
static void on_tap(void *arg, const struct peer *p, enum wiretap_dir d, const char *line,
		   size_t len)
{
	struct recorder *r = arg;
	if (p->role == PEER_CLIENT)
		record(r, line, len, d == WIRETAP_IN ? "in" : "out", NULL, d == WIRETAP_OUT);
	else
		record(r, line, len, d == WIRETAP_IN ? "from-backend" : "to-backend", p->name, false);
}

/* Starts recording every message of the chain configured by CFG to the file PATH. */
struct recorder *cli_record_start(const struct cfg *cfg, const char *path)
{
	struct recorder *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->cfg = cfg;
	r->req_backend[0] = json_object();
	r->req_backend[1] = json_object();
	r->token_backend = json_object();
	json_t *defaults = json_loads(default_keys, 0, NULL);
	add_redact(r, defaults, "(built in)", "");
	json_decref(defaults);
	redact_from(r, cfg->middleware, "/middleware");
	for (size_t i = 0; i < cfg->nservers; i++)
		redact_from(r, json_object_get(json_object_get(json_object_get(cfg->root,
			"mcpServers"), cfg->servers[i].name), "middleware"), "/mcpServers");
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	r->out = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!r->out) {
		cli_error("--record: cannot open %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		cli_record_stop(r);
		return NULL;
	}
	wiretap_set(on_tap, r);
	return r;
}

/* Stops recording and frees R. */
void cli_record_stop(struct recorder *r)
{
	if (!r)
		return;
	wiretap_set(NULL, NULL);
	for (size_t i = 0; i < r->nredact; i++)
		redact_free(r->redact[i]);
	if (r->out)
		fclose(r->out);
	for (int i = 0; i < 2; i++)
		json_decref(r->req_backend[i]);
	json_decref(r->token_backend);
	free(r);
}
