/*
 * record.c - `mcp-chain --config FILE --record OUT`: the normal stdio
 * server, with every message both ways written to OUT as one JSON line
 * ({"t", "dir", "backend", "msg"}), secrets redacted as the `log` module
 * redacts them.
 *
 * Recorded at the command-line level, in a process of our own: the
 * recorder spawns the chain (`/proc/self/exe` with the same arguments
 * minus --record) and relays lines between its stdio and the chain's,
 * unchanged, writing each to OUT on the way. The chain is not touched.
 * What this level cannot see is which backend a message went to: it is
 * inferred from the names (a tool or prompt's prefix; the only backend
 * when there is one) and the request a response or progress answers, and
 * left null otherwise. docs/cli.md says which core hook would make it exact.
 */
#include "cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "middleware.h"
#include "rpc.h"
#include "../middleware/log_int.h"

/* Keys redacted in every recording, on top of the log modules' own. */
static const char default_keys[] =
	"{\"keys\": [\"io.mcp-chain/token\", \"authorization\", \"password\", \"apiKey\","
	" \"api_key\", \"secret\", \"access_token\", \"refresh_token\"]}";

struct side {
	struct framer fr;
	ev_io io;
	int fd;
	bool open;
};

struct recorder {
	struct cfg *cfg;
	FILE *out;
	struct log_redact *redact[8];
	size_t nredact;
	struct proc proc;
	struct writer to_chain, to_client;
	struct side client, chain;   /* our stdin; the chain's stdout */
	json_t *req_backend[2];      /* by direction: id text -> backend */
	json_t *token_backend;       /* progress token text -> backend */
	ev_io err_io;                /* the chain's stderr, copied to ours */
	bool exited;
	int status;
	ev_signal sigs[3];
};

/* Adds the redaction of OPT (a "redact" option) to R; 0 or -1. */
static int add_redact(struct recorder *r, json_t *opt, const char *file, const char *where)
{
	struct cfg_errors errs = { 0 };
	struct mw_build b = { .file = file, .path = where, .errs = &errs };
	struct log_redact *lr = NULL;
	int rc = log_redact_parse(opt, &b, &lr);
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (lr && r->nredact < sizeof r->redact / sizeof *r->redact)
		r->redact[r->nredact++] = lr;
	else
		log_redact_free(lr);
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

/* Writes one line of the recording for LINE (LEN bytes). */
static void record(struct recorder *r, const char *line, size_t len, bool to_client)
{
	json_t *msg = json_loadb(line, len, JSON_DECODE_ANY, NULL);
	struct timespec ts;
	struct tm tm;
	char t[64];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + n, sizeof t - n, ".%06ldZ", ts.tv_nsec / 1000);
	const char *b = json_is_object(msg) ? backend_of(r, msg, to_client) : NULL;
	if (msg)
		for (size_t i = 0; i < r->nredact; i++)
			log_redact_line(r->redact[i], msg);
	json_t *entry = json_pack("{s:s,s:s,s:s?,s:o?}", "t", t, "dir", to_client ? "out" : "in",
				  "backend", b, "msg", msg);
	if (!msg)  /* not JSON: kept as text, so the recording shows what passed */
		json_object_set_new(entry, "raw", json_stringn_nocheck(line, len));
	json_dumpf(entry, r->out, JSON_COMPACT);
	fputc('\n', r->out);
	fflush(r->out);
	json_decref(entry);
}

/* Lines arrived on side S: record each and pass it on to TO. */
static void on_side(struct recorder *r, struct side *s, struct writer *to, bool to_client)
{
	for (;;) {
		size_t avail, len, total;
		const char *line;
		char *dst = framer_reserve(&s->fr, &avail);
		ssize_t n = dst ? read(s->fd, dst, avail) : (errno = ENOMEM, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n > 0)
			framer_commit(&s->fr, (size_t)n);
		else if (framer_pending(&s->fr) > 0)
			framer_push(&s->fr, "\n", 1);
		enum frame_kind k;
		while ((k = framer_next(&s->fr, &line, &len, &total)) != FRAME_NONE) {
			if (k != FRAME_LINE)
				continue;  /* the chain answers oversized input itself */
			record(r, line, len, to_client);
			struct iovec iov = { (void *)line, len };
			writer_send_iov(to, &iov, 1);
		}
		if (n <= 0) {
			ev_io_stop(EV_DEFAULT, &s->io);
			s->open = false;
			if (!to_client)
				writer_close(to);  /* end of input reaches the chain */
			if (r->exited && !r->chain.open)
				ev_break(EV_DEFAULT, EVBREAK_ALL);
			return;
		}
	}
}

static void on_client(struct ev_loop *loop, ev_io *w, int revents)
{
	struct recorder *r = w->data;
	(void)loop;
	(void)revents;
	on_side(r, &r->client, &r->to_chain, false);
}

static void on_chain(struct ev_loop *loop, ev_io *w, int revents)
{
	struct recorder *r = w->data;
	(void)loop;
	(void)revents;
	on_side(r, &r->chain, &r->to_client, true);
}

/* The chain exited: stop once its output is all relayed. */
static void on_exit_cb(struct proc *p, int status, void *arg)
{
	struct recorder *r = arg;
	(void)p;
	r->exited = true;
	r->status = status;
	if (!r->chain.open)
		ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/* A signal for the chain (its own process group does not get the terminal's). */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct recorder *r = w->data;
	(void)loop;
	(void)revents;
	if (r->proc.pid > 0)
		kill(r->proc.pid, w->signum);
}

/* A write failed: the other side went away; the chain notices on its own. */
static void on_write_error(struct writer *w, int err, void *arg)
{
	(void)w;
	(void)err;
	(void)arg;
}

/* Starts watching FD as side S. */
static void side_init(struct recorder *r, struct side *s, int fd, void (*cb)(struct ev_loop *, ev_io *, int))
{
	s->fd = fd;
	s->open = true;
	framer_init(&s->fr, r->cfg->max_message + 1);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&s->io, cb, fd, EV_READ);
	s->io.data = r;
	ev_io_start(EV_DEFAULT, &s->io);
}

/* The chain's arguments: ours without "--record FILE". */
static char **chain_argv(int argc, char **argv)
{
	char **v = calloc((size_t)argc + 1, sizeof *v);
	int n = 0;
	if (!v)
		return NULL;
	v[n++] = "/proc/self/exe";
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--record") == 0) {
			i++;
			continue;
		}
		if (strncmp(argv[i], "--record=", 9) == 0)
			continue;
		v[n++] = argv[i];
	}
	return v;
}

/* Finds the value of --record and of the configuration in ARGV. */
static void find_paths(int argc, char **argv, const char **rec, const char **config)
{
	*config = getenv("MCP_CHAIN_CONFIG");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "--record") == 0) && i + 1 < argc)
			*rec = argv[++i];
		else if (strncmp(a, "--record=", 9) == 0)
			*rec = a + 9;
		else if ((strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) && i + 1 < argc)
			*config = argv[++i];
		else if (strncmp(a, "--config=", 9) == 0)
			*config = a + 9;
	}
}

/* Loads the configuration and the redaction rules. */
static int setup(struct recorder *r, const char *config, const char *rec)
{
	struct cfg_errors errs = { 0 };
	r->cfg = config ? cfg_load(config, &errs) : NULL;
	for (size_t i = 0; i < errs.count; i++)
		fprintf(stderr, "%s\n", errs.lines[i]);
	cfg_errors_release(&errs);
	if (!r->cfg) {
		if (!config)
			cli_error("--record: no configuration given (use --config FILE)");
		return -1;
	}
	json_t *defaults = json_loads(default_keys, 0, NULL);
	add_redact(r, defaults, "(built in)", "");
	json_decref(defaults);
	redact_from(r, r->cfg->middleware, "/middleware");
	for (size_t i = 0; i < r->cfg->nservers; i++)
		redact_from(r, json_object_get(json_object_get(json_object_get(r->cfg->root,
			"mcpServers"), r->cfg->servers[i].name), "middleware"), "/mcpServers");
	int fd = open(rec, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	r->out = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!r->out) {
		cli_error("--record: cannot open %s: %s", rec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return 0;
}

/* Frees what setup and the run made. */
static void teardown(struct recorder *r)
{
	for (size_t i = 0; i < r->nredact; i++)
		log_redact_free(r->redact[i]);
	if (r->out)
		fclose(r->out);
	cfg_free(r->cfg);
	for (int i = 0; i < 2; i++)
		json_decref(r->req_backend[i]);
	json_decref(r->token_backend);
}

int cli_record(int argc, char **argv)
{
	struct recorder r = { .req_backend = { json_object(), json_object() },
			      .token_backend = json_object() };
	const char *rec = NULL, *config = NULL;
	find_paths(argc, argv, &rec, &config);
	char **cargv = rec ? chain_argv(argc, argv) : NULL;
	if (!rec || setup(&r, config, rec) < 0 || !cargv) {
		if (!rec)
			cli_error("--record needs a FILE");
		free(cargv);
		teardown(&r);
		return CLI_EXIT_RPC_ERROR;
	}
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_WARN);
	writer_setup();
	int code = CLI_EXIT_CHAIN;
	if (proc_spawn(&r.proc, "chain", cargv, NULL, NULL, on_exit_cb, &r) == 0) {
		cli_pass_stderr(&r.proc, &r.err_io);  /* its stderr is ours, unchanged */
		writer_init(&r.to_chain, r.proc.in_fd, on_write_error, &r);
		r.proc.in_fd = -1;
		writer_init(&r.to_client, STDOUT_FILENO, on_write_error, &r);
		side_init(&r, &r.client, STDIN_FILENO, on_client);
		side_init(&r, &r.chain, r.proc.out_fd, on_chain);
		int sig[] = { SIGINT, SIGTERM, SIGHUP };
		for (int i = 0; i < 3; i++) {
			ev_signal_init(&r.sigs[i], on_signal, sig[i]);
			r.sigs[i].data = &r;
			ev_signal_start(EV_DEFAULT, &r.sigs[i]);
		}
		ev_run(EV_DEFAULT, 0);
		for (int i = 0; i < 3; i++)
			ev_signal_stop(EV_DEFAULT, &r.sigs[i]);
		ev_io_stop(EV_DEFAULT, &r.client.io);
		ev_io_stop(EV_DEFAULT, &r.chain.io);
		cli_pass_stderr_stop(&r.err_io);
		cli_drain(&r.to_client);
		writer_release(&r.to_client);
		writer_release(&r.to_chain);
		code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : CLI_EXIT_CHAIN;
		proc_release(&r.proc);
		framer_release(&r.client.fr);
		framer_release(&r.chain.fr);
	}
	free(cargv);
	teardown(&r);
	return code;
}
