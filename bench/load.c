/*
 * mcp-bench-load: a closed-loop load driver for stdio MCP servers.
 *
 * It spawns the command given after `--` with its stdin and stdout on
 * pipes, performs the MCP handshake, runs a warm-up, then keeps exactly
 * `-c K` operations in flight until `-n N` operations have completed.  Every
 * response is checked (id, and content where the mode allows it) and every
 * operation's latency is recorded.  The result is ONE JSON line on stdout:
 *
 *   {"mode":..,"n":..,"c":..,"ok":..,"errors":..,"rps":..,"p50_us":..,
 *    "p90_us":..,"p99_us":..,"max_us":..,"child_cpu_us_per_req":..,
 *    "child_peak_rss_kb":.., ...more fields, see README.md}
 *
 * Messages from the child are read with a small skimmer (jskim.c) rather
 * than jansson trees, so that the driver stays cheap next to the process
 * under test; --strict-json adds a full jansson validation of every line.
 *
 * Modes (--mode):
 *   echo      tools/call echo {text}; the text carries the request id and is
 *             compared byte for byte (default)
 *   progress  tools/call slow {ms, steps} with a progressToken; counts the
 *             notifications/progress per request and those arriving after
 *             their response (late) or never
 *   list      one operation = tools/list over every page (follows nextCursor)
 *   blob      tools/call blob {bytes}; checks the size of the returned text
 *   startup   one operation = spawn + initialize + first tools/call echo;
 *             the child is restarted for each operation
 *   idle      (--url only) open -n sessions and leave them idle; the
 *             server's VmRSS after the first and after the last gives the
 *             memory each idle session costs
 *
 * With --url the command is an HTTP server: it is spawned (stdin a pipe
 * kept open, stdout to the --child-stderr file) and driven over
 * Streamable HTTP by load_http.c instead of its pipes: --sessions S
 * sessions, one connection per operation in flight, every JSON-RPC
 * message it answers checked here as a stdio line would be.
 *
 * What the resource numbers measure:
 *   child_cpu_us_per_req  CPU time (user+system, all threads) of the direct
 *             child during the measured phase only, from its POSIX CPU clock
 *             (clock_getcpuclockid), divided by N.  For a proxy this is the
 *             proxy alone, not the backend it spawned.
 *   tree_cpu_us_per_req   the same summed over the child and every
 *             descendant found in /proc/PID/task/TID/children.
 *   child_vcsw_per_req / child_ivcsw_per_req  the child's voluntary and
 *             involuntary context switches in the measured phase
 *             (/proc/PID/status), divided by N.
 *   child_peak_rss_kb     VmHWM of the direct child from /proc/PID/status,
 *             read after the measured phase while it is still running
 *             (rss_source "VmHWM").  With --no-pid-stats it is ru_maxrss from
 *             wait4() instead (rss_source "wait4"), which on Linux is the
 *             largest of the child and every descendant it has reaped, so for
 *             a proxy it is usually the backend's figure, not the proxy's.
 *   wait4_maxrss_kb / wait4_cpu_us  the raw wait4() figures (whole life,
 *             including reaped descendants).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jskim.h"
#include "load.h"

#define MAX_TREE 4096
#define MAX_ERROR_LOGS 5

/* The kinds of operation the driver can run. */
enum mode { MODE_ECHO, MODE_PROGRESS, MODE_LIST, MODE_BLOB, MODE_STARTUP, MODE_IDLE };

/* Names of the modes, indexed by enum mode. */
static const char *const mode_names[] = {
	"echo", "progress", "list", "blob", "startup", "idle",
};

/* What a request id was used for. */
enum req_kind { REQ_NONE, REQ_INIT, REQ_OP };

/* Per request-id bookkeeping. */
struct req {
	uint8_t kind;       /* enum req_kind */
	uint8_t answered;   /* response seen */
	int32_t slot;       /* slot that sent it */
	uint32_t progress;  /* progress notifications before the response */
	double last_prog;   /* last progress value seen */
};

/* One of the K concurrent operation loops. */
struct slot {
	bool active;        /* an operation is running */
	bool stamp;         /* op_start still to be stamped at the next write */
	int64_t op_start;   /* when the operation's first request was written */
	long tools;         /* list mode: tools seen in this listing */
	long pages;         /* list mode: pages seen in this listing */
};

/* The spawned process and its pipes. */
struct child {
	pid_t pid;
	int to_fd;          /* its stdin */
	int from_fd;        /* its stdout */
	bool eof;           /* its stdout closed */
	struct buf w;       /* pending bytes for its stdin */
	size_t woff;        /* bytes of w already written */
	struct buf r;       /* bytes read from its stdout */
	size_t scanned;     /* bytes of r known to hold no newline */
	int status;         /* wait status once reaped */
	struct rusage ru;   /* wait4() usage once reaped */
	bool reaped;
	bool killed;        /* had to be signalled to exit */
	int64_t next_check; /* --url: when to look whether it still runs */
};

/* Command line settings. */
static struct {
	enum mode mode;
	long n, c, warmup, size, bytes, ms, steps, grace_ms, expect_tools;
	long sessions, settle_ms;
	double timeout_s;
	const char *tool_prefix;
	const char *child_stderr;
	const char *url;    /* --url: drive an HTTP server instead of pipes */
	bool accept_sse;    /* --accept both (default) or json */
	const char *header; /* --header: one more request header, or NULL */
	bool pid_stats;
	bool quiet;
	bool strict;
	char **argv;
} opt = {
	.mode = MODE_ECHO, .n = 1000, .c = 1, .warmup = -1, .size = 32,
	.bytes = 1 << 20, .ms = 60, .steps = 60, .grace_ms = 200,
	.expect_tools = 0, .sessions = 1, .settle_ms = 500, .timeout_s = 120,
	.tool_prefix = "", .child_stderr = NULL, .url = NULL, .accept_sse = true,
	.pid_stats = true, .quiet = false, .argv = NULL,
};

static struct child ch;           /* the current child */
static struct req *reqs;          /* indexed by request id */
static size_t n_reqs;             /* allocated entries in reqs */
static long next_id = 1;          /* next request id to use */
static struct slot *slots;        /* opt.c slots */
static long ops_to_start;         /* operations left to start in the phase */
static long ops_active;           /* operations running */
static bool measuring;            /* latencies are being recorded */
static int64_t *lat;              /* recorded latencies (ns) */
static long n_lat;                /* entries used in lat */
static int64_t last_done;         /* time the last operation finished */
static char *fatal;               /* reason the run had to stop, if any */
static struct buf scratch;        /* --url: the request being built */

/* Counters reported at the end. */
static struct {
	long ok, failed, errors, logged;
	long prog_received, prog_late, prog_unknown, prog_disorder;
	long list_tools, list_pages;
	long sessions_open;           /* --url: sessions past their handshake */
	int64_t init_done;            /* time of the initialize response */
} st;

/* Print a message to stderr and exit with status 2; an HTTP server under
 * test (which leads its own process group) is killed first, so that it
 * does not outlive the run holding its port. */
void die(const char *fmt, ...)
{
	if (opt.url && ch.pid > 0 && !ch.reaped)
		kill(-ch.pid, SIGKILL);
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* Remember the first fatal condition (the run stops at the next check). */
void set_fatal(const char *fmt, ...)
{
	if (fatal)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&fatal, fmt, ap) < 0)
		fatal = "fatal error";
	va_end(ap);
}

/* Count an error and describe the first few on stderr. */
void error_at(const char *fmt, ...)
{
	st.errors++;
	if (opt.quiet || st.logged++ >= MAX_ERROR_LOGS)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, PROG ": error: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Monotonic clock in nanoseconds. */
int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Make sure b has room for extra more bytes. */
void buf_reserve(struct buf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		die("out of memory (%zu bytes)", cap);
	b->data = p;
	b->cap = cap;
}

/* Append n bytes at p to b. */
void buf_append(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n + 1);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

/* Append printf-formatted text to b. */
void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->data ? b->data + b->len : NULL,
	                  b->data ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("vsnprintf failed");
	if ((size_t)n + 1 > b->cap - b->len) {
		buf_reserve(b, (size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/* The bookkeeping entry for request id, growing the table as needed. */
static struct req *req_at(long id)
{
	if ((size_t)id >= n_reqs) {
		size_t n = n_reqs ? n_reqs : 4096;
		while (n <= (size_t)id)
			n *= 2;
		struct req *p = realloc(reqs, n * sizeof *p);
		if (!p)
			die("out of memory");
		memset(p + n_reqs, 0, (n - n_reqs) * sizeof *p);
		reqs = p;
		n_reqs = n;
	}
	return &reqs[id];
}

/* Allocate a request id for kind, sent by slot. */
static long new_req(enum req_kind kind, int32_t slot)
{
	long id = next_id++;
	struct req *r = req_at(id);
	r->kind = (uint8_t)kind;
	r->slot = slot;
	return id;
}

/* Write the echo text for request id into dst (opt.size bytes + NUL). */
static size_t make_text(long id, char *dst)
{
	int n = snprintf(dst, (size_t)opt.size + 1, "r%ld-", id);
	size_t len = (size_t)n < (size_t)opt.size ? (size_t)n : (size_t)opt.size;
	for (size_t i = len; i < (size_t)opt.size; i++)
		dst[i] = (char)('a' + (id + (long)i) % 26);
	dst[opt.size] = '\0';
	return (size_t)opt.size;
}

/* Queue the request that starts (or continues) the operation of slot s. */
static void send_op_request(int32_t s, const char *cursor)
{
	long id = new_req(REQ_OP, s);
	struct buf *w = opt.url ? &scratch : &ch.w;
	switch (opt.mode) {
	case MODE_ECHO:
	case MODE_STARTUP: {
		char *text = malloc((size_t)opt.size + 1);
		if (!text)
			die("out of memory");
		make_text(id, text);
		buf_printf(w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
		           "\"tools/call\",\"params\":{\"name\":\"%secho\","
		           "\"arguments\":{\"text\":\"%s\"}}}\n",
		           id, opt.tool_prefix, text);
		free(text);
		break;
	}
	case MODE_PROGRESS:
		buf_printf(w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
		           "\"tools/call\",\"params\":{\"name\":\"%sslow\","
		           "\"arguments\":{\"ms\":%ld,\"steps\":%ld},\"_meta\":"
		           "{\"progressToken\":\"tok-%ld\"}}}\n",
		           id, opt.tool_prefix, opt.ms, opt.steps, id);
		break;
	case MODE_BLOB:
		buf_printf(w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
		           "\"tools/call\",\"params\":{\"name\":\"%sblob\","
		           "\"arguments\":{\"bytes\":%ld}}}\n",
		           id, opt.tool_prefix, opt.bytes);
		break;
	case MODE_LIST:
		if (cursor) {
			json_t *c = json_string(cursor);
			char *enc = json_dumps(c, JSON_ENCODE_ANY);
			buf_printf(w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
			           "\"tools/list\",\"params\":{\"cursor\":%s}}\n",
			           id, enc);
			free(enc);
			json_decref(c);
		} else {
			buf_printf(w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
			           "\"tools/list\",\"params\":{}}\n", id);
		}
		break;
	case MODE_IDLE:
		die("internal: no operations in idle mode");
	}
	if (opt.url) {
		http_send(s, id, scratch.data, scratch.len);
		scratch.len = 0;
	}
}

/* Start the next operation on slot s, if the phase has any left. */
static void start_op(int32_t s)
{
	struct slot *sl = &slots[s];
	if (ops_to_start <= 0) {
		sl->active = false;
		return;
	}
	ops_to_start--;
	ops_active++;
	sl->active = true;
	sl->stamp = true;
	sl->tools = 0;
	sl->pages = 0;
	send_op_request(s, NULL);
}

/* Close the operation of slot s (answered at t) and start the next one. */
static void finish_op(int32_t s, int64_t t, bool ok)
{
	struct slot *sl = &slots[s];
	if (ok)
		st.ok++;
	else
		st.failed++;
	if (measuring && n_lat < opt.n)
		lat[n_lat++] = t - sl->op_start;
	last_done = t;
	ops_active--;
	sl->active = false;
	start_op(s);
}

/* What a message from the child says, as far as the checks need it.
 * Pointers point into the line (raw JSON, escapes left in place). */
struct msg {
	bool has_id;           /* has an id member */
	bool id_ok;            /* ... and it is an integer */
	long id;
	const char *id_raw;    /* the id's JSON text */
	size_t id_raw_len;
	char method[64];       /* method, if a short string without escapes */
	bool has_method;
	bool has_result;       /* result is an object */
	const char *error;     /* error member's JSON text, if any */
	size_t error_len;
	const char *text;      /* result.content[0].text, inside the quotes */
	size_t text_len;
	bool text_escaped;     /* ... holds backslash escapes */
	bool is_error;         /* result.isError is true */
	bool has_tools;        /* result.tools is an array */
	long tools;            /* its length */
	char *cursor;          /* result.nextCursor (owned, decoded copy) */
	const char *token;     /* params.progressToken's JSON text */
	size_t token_len;
	double progress;       /* params.progress */
};

/* Decode the JSON string span [v, vend) (quotes included); NULL if bad. */
static char *decode_string(const char *v, const char *vend, size_t *len)
{
	json_t *j = json_loadb(v, (size_t)(vend - v), JSON_DECODE_ANY, NULL);
	char *out = NULL;
	if (json_is_string(j)) {
		*len = json_string_length(j);
		out = malloc(*len + 1);
		if (out)
			memcpy(out, json_string_value(j), *len + 1);
	}
	json_decref(j);
	return out;
}

/* jskim callback: the members the checks use (0 msg, 1 result, 2 content[0], 3 params). */
static const char *pick_member(void *ctx, const char *key, size_t klen,
                               const char *v, const char *e, int depth)
{
	struct msg *m = ctx;
	const char *vend;
	switch (depth) {
	case 0:
		if (jskim_key_is(key, klen, "id")) {
			vend = jskim_value(v, e);
			if (!vend)
				return NULL;
			char *end = NULL;
			long id = *v == '"' ? 0 : strtol(v, &end, 10);
			m->has_id = true;
			m->id_ok = end == vend;
			m->id = id;
			m->id_raw = v;
			m->id_raw_len = (size_t)(vend - v);
			return vend;
		} else if (jskim_key_is(key, klen, "method") && *v == '"') {
			bool esc = false;
			vend = jskim_string(v, e, &esc);
			if (vend && !esc && (size_t)(vend - v - 2) < sizeof m->method) {
				memcpy(m->method, v + 1, (size_t)(vend - v - 2));
				m->method[vend - v - 2] = '\0';
			}
			m->has_method = true;
			return vend;
		} else if (jskim_key_is(key, klen, "error")) {
			vend = jskim_value(v, e);
			m->error = v;
			m->error_len = vend ? (size_t)(vend - v) : 0;
			return vend;
		} else if (jskim_key_is(key, klen, "result") && *v == '{') {
			vend = jskim_object(v, e, pick_member, m, 1);
			m->has_result = vend != NULL;
			return vend;
		} else if (jskim_key_is(key, klen, "params") && *v == '{') {
			return jskim_object(v, e, pick_member, m, 3);
		}
		break;
	case 1:
		if (jskim_key_is(key, klen, "tools") && *v == '[') {
			vend = jskim_array(v, e, NULL, NULL, 0, &m->tools);
			m->has_tools = vend != NULL;
			return vend;
		} else if (jskim_key_is(key, klen, "nextCursor") && *v == '"') {
			vend = jskim_string(v, e, NULL);
			size_t len;
			if (vend)
				m->cursor = decode_string(v, vend, &len);
			return vend;
		} else if (jskim_key_is(key, klen, "isError")) {
			m->is_error = e - v >= 4 && memcmp(v, "true", 4) == 0;
		} else if (jskim_key_is(key, klen, "content") && *v == '[') {
			return jskim_array(v, e, pick_member, m, 2, NULL);
		}
		break;
	case 2:
		/* a text item is assumed when `text` is a string */
		if (jskim_key_is(key, klen, "text") && *v == '"') {
			bool esc = false;
			vend = jskim_string(v, e, &esc);
			if (vend) {
				m->text = v + 1;
				m->text_len = (size_t)(vend - v - 2);
				m->text_escaped = esc;
			}
			return vend;
		}
		break;
	case 3:
		if (jskim_key_is(key, klen, "progressToken")) {
			vend = jskim_value(v, e);
			m->token = v;
			m->token_len = vend ? (size_t)(vend - v) : 0;
			return vend;
		} else if (jskim_key_is(key, klen, "progress")) {
			m->progress = strtod(v, NULL);
		}
		break;
	}
	return NULL;
}

/* Check the response to an operation request; true if it is correct. */
static bool check_op_response(const struct msg *m)
{
	if (!m->has_result) {
		error_at("request %ld: no result (error %.*s)", m->id,
		         (int)(m->error_len < 200 ? m->error_len : 200),
		         m->error ? m->error : "?");
		return false;
	}
	switch (opt.mode) {
	case MODE_ECHO:
	case MODE_STARTUP: {
		char *want = malloc((size_t)opt.size + 1);
		if (!want)
			die("out of memory");
		make_text(m->id, want);
		const char *text = m->text;
		size_t len = m->text_len;
		char *decoded = NULL;
		if (text && m->text_escaped) {
			decoded = decode_string(text - 1, text + len + 1, &len);
			text = decoded;
		}
		bool good = text && len == (size_t)opt.size &&
		            memcmp(text, want, len) == 0;
		if (!good)
			error_at("request %ld: echo text mismatch (got %.*s)", m->id,
			         text ? (int)(len < 40 ? len : 40) : 9,
			         text ? text : "(no text)");
		free(decoded);
		free(want);
		return good;
	}
	case MODE_PROGRESS:
		if (!m->text || m->is_error) {
			error_at("request %ld: slow call failed", m->id);
			return false;
		}
		return true;
	case MODE_BLOB:
		if (!m->text || m->text_escaped || m->text_len != (size_t)opt.bytes ||
		    (m->text_len && (m->text[0] != 'x' ||
		                     m->text[m->text_len - 1] != 'x'))) {
			error_at("request %ld: blob of %zu bytes, wanted %ld", m->id,
			         m->text ? m->text_len : 0, opt.bytes);
			return false;
		}
		return true;
	case MODE_LIST:
		if (!m->has_tools) {
			error_at("request %ld: tools/list without tools", m->id);
			return false;
		}
		return true;
	case MODE_IDLE:
		break;
	}
	return false;
}

/* Handle a response to one of our requests, received at time t. */
static void on_response(const struct msg *m, int64_t t)
{
	if (!m->id_ok || m->id <= 0 || m->id >= next_id) {
		error_at("response with unknown id %.*s",
		         (int)(m->id_raw_len < 60 ? m->id_raw_len : 60),
		         m->id_raw ? m->id_raw : "");
		return;
	}
	long id = m->id;
	struct req *r = &reqs[id];
	if (r->answered) {
		error_at("second response for id %ld", id);
		return;
	}
	r->answered = 1;
	if (r->kind == REQ_INIT) {
		if (!m->has_result)
			set_fatal("initialize failed: %.*s",
			          (int)(m->error_len < 300 ? m->error_len : 300),
			          m->error ? m->error : "?");
		if (!st.init_done)
			st.init_done = t;  /* the first one: later sessions' do not count */
		return;
	}
	int32_t s = r->slot;
	bool good = check_op_response(m);
	if (opt.mode == MODE_LIST && good) {
		slots[s].tools += m->tools;
		slots[s].pages++;
		if (m->cursor && slots[s].pages < 100000) {
			send_op_request(s, m->cursor);
			return;
		}
		if (opt.expect_tools > 0 && slots[s].tools != opt.expect_tools) {
			error_at("listing had %ld tools, expected %ld",
			         slots[s].tools, opt.expect_tools);
			good = false;
		} else if (st.list_pages == 0) {
			st.list_tools = slots[s].tools;
			st.list_pages = slots[s].pages;
		} else if (slots[s].tools != st.list_tools) {
			error_at("listing had %ld tools, an earlier one %ld",
			         slots[s].tools, st.list_tools);
			good = false;
		}
	}
	finish_op(s, t, good);
}

/* Handle a notifications/progress message. */
static void on_progress(const struct msg *m)
{
	long id = -1;
	if (m->token && m->token_len > 5 && memcmp(m->token, "\"tok-", 5) == 0)
		id = strtol(m->token + 5, NULL, 10);
	if (id <= 0 || id >= next_id || reqs[id].kind != REQ_OP ||
	    opt.mode != MODE_PROGRESS) {
		st.prog_unknown++;
		return;
	}
	struct req *r = &reqs[id];
	if (r->answered) {
		st.prog_late++;
		return;
	}
	if (r->progress > 0 && m->progress <= r->last_prog)
		st.prog_disorder++;
	r->last_prog = m->progress;
	r->progress++;
	st.prog_received++;
}

/* Queue an answer to a request the child sent us (ping; others refused). */
static void on_child_request(const struct msg *m)
{
	if (opt.url) {
		/* none of the servers measured sends one; answering would need a
		 * POST of its own */
		error_at("the server sent a request (%s) that the HTTP driver does not answer",
		         m->method);
		return;
	}
	if (strcmp(m->method, "ping") == 0)
		buf_printf(&ch.w, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{}}\n",
		           (int)m->id_raw_len, m->id_raw);
	else
		buf_printf(&ch.w, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"error\":{"
		           "\"code\":-32601,\"message\":\"not supported by " PROG
		           "\"}}\n", (int)m->id_raw_len, m->id_raw);
}

/* Handle one line from the child, received at time t. */
static void on_line(const char *line, size_t len, int64_t t)
{
	if (opt.strict) {
		/* Full validation (escapes, numbers, UTF-8) with jansson. */
		json_error_t err;
		json_t *j = json_loadb(line, len, 0, &err);
		bool valid = json_is_object(j);
		json_decref(j);
		if (!valid) {
			error_at("invalid JSON from child: %s (%.60s)", err.text, line);
			return;
		}
	}
	struct msg m = { 0 };
	const char *end = jskim_object(line, line + len, pick_member, &m, 0);
	if (!end || jskim_ws(end, line + len) != line + len) {
		error_at("malformed line from child (%.60s)", line);
	} else if (!m.has_method) {
		on_response(&m, t);
	} else if (m.has_id) {
		on_child_request(&m);
	} else if (strcmp(m.method, "notifications/progress") == 0) {
		on_progress(&m);
	}
	free(m.cursor);
}

/* One JSON-RPC message from the HTTP transport (see load.h). */
void load_on_message(const char *msg, size_t len, int64_t t)
{
	on_line(msg, len, t);
}

/* A new initialize request id (see load.h). */
long load_new_init(void)
{
	return new_req(REQ_INIT, -1);
}

/* Request id is about to be written at t (see load.h). */
void load_on_write(long id, int64_t t)
{
	struct req *r = req_at(id);
	if (r->kind == REQ_OP && slots[r->slot].stamp) {
		slots[r->slot].stamp = false;
		slots[r->slot].op_start = t;
	}
}

/* True once request id has its answer (see load.h). */
bool load_answered(long id)
{
	return id > 0 && id < next_id && reqs[id].answered;
}

/* Request id will never be answered (see load.h). */
void load_on_lost(long id, int64_t t)
{
	struct req *r = req_at(id);
	if (r->answered)
		return;
	r->answered = 1;
	if (r->kind == REQ_OP)
		finish_op(r->slot, t, false);
}

/* A session finished its handshake, dt ns after its initialize went. */
void load_on_session(int64_t dt)
{
	st.sessions_open++;
	if (opt.mode == MODE_IDLE && measuring && n_lat < opt.n)
		lat[n_lat++] = dt;
}

/* Stamp the start time of operations whose first request is about to go. */
static void stamp_ops(int64_t t)
{
	for (long i = 0; i < opt.c; i++) {
		if (slots[i].stamp) {
			slots[i].stamp = false;
			slots[i].op_start = t;
		}
	}
}

/* Write as much pending output as the pipe takes. */
static void try_write(void)
{
	while (ch.woff < ch.w.len && ch.to_fd >= 0) {
		ssize_t n = write(ch.to_fd, ch.w.data + ch.woff, ch.w.len - ch.woff);
		if (n > 0) {
			ch.woff += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			set_fatal("writing to the child failed: %s", strerror(errno));
			ch.woff = ch.w.len;
		}
	}
	if (ch.woff == ch.w.len)
		ch.woff = ch.w.len = 0;
}

/* Read what the child wrote and handle every complete line. */
static void do_read(void)
{
	for (int rounds = 0; rounds < 8; rounds++) {
		buf_reserve(&ch.r, 262144);
		size_t room = ch.r.cap - ch.r.len;
		ssize_t n = read(ch.from_fd, ch.r.data + ch.r.len, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0) {
			ch.eof = true;
			break;
		}
		ch.r.len += (size_t)n;
		if ((size_t)n < room)
			break; /* the pipe is drained */
	}
	int64_t t = now_ns();
	size_t start = 0;
	char *nl;
	while ((nl = memchr(ch.r.data + ch.scanned, '\n',
	                    ch.r.len - ch.scanned)) != NULL) {
		size_t end = (size_t)(nl - ch.r.data);
		if (end > start)
			on_line(ch.r.data + start, end - start, t);
		start = end + 1;
		ch.scanned = start;
	}
	if (start > 0) {
		memmove(ch.r.data, ch.r.data + start, ch.r.len - start);
		ch.r.len -= start;
	}
	ch.scanned = ch.r.len;
	if (ch.r.cap > (256u << 20) && ch.r.len < 65536) {
		/* Give back the memory of a huge answer. */
		char *p = malloc(65536);
		if (p) {
			memcpy(p, ch.r.data, ch.r.len);
			free(ch.r.data);
			ch.r.data = p;
			ch.r.cap = 65536;
		}
	}
}

/* --url: fail if the server has exited (looked at every 100 ms at most;
 * the child is left to finish_child to reap). */
static void check_server(void)
{
	int64_t t = now_ns();
	if (t < ch.next_check)
		return;
	ch.next_check = t + 100000000;
	siginfo_t si = { 0 };
	if (waitid(P_PID, (id_t)ch.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	    si.si_pid == ch.pid)
		set_fatal("the server exited (%s %d) during the run",
		          si.si_code == CLD_EXITED ? "status" : "signal", si.si_status);
}

/* One turn of the I/O loop: write, wait up to timeout_ms, read. */
static void pump(int timeout_ms)
{
	if (opt.url) {
		http_pump(timeout_ms > 100 ? 100 : timeout_ms);
		check_server();
		return;
	}
	if (ch.w.len > ch.woff) {
		stamp_ops(now_ns());
		try_write();
	}
	struct pollfd p[2];
	int np = 0;
	if (!ch.eof)
		p[np++] = (struct pollfd){ .fd = ch.from_fd, .events = POLLIN };
	if (ch.w.len > ch.woff && ch.to_fd >= 0)
		p[np++] = (struct pollfd){ .fd = ch.to_fd, .events = POLLOUT };
	if (np == 0) {
		set_fatal("the child closed its stdout");
		return;
	}
	int r = poll(p, (nfds_t)np, timeout_ms);
	if (r < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	for (int i = 0; r > 0 && i < np; i++) {
		if (p[i].fd == ch.from_fd && p[i].revents)
			do_read();
		else if (p[i].fd == ch.to_fd && (p[i].revents & (POLLERR | POLLHUP)))
			set_fatal("the child closed its stdin");
	}
	if (ch.eof)
		set_fatal("the child closed its stdout");
}

/* Pump until done() is true, a fatal error, or the deadline (ns). */
static void pump_until(bool (*done)(void), int64_t deadline)
{
	while (!fatal && !done()) {
		int64_t left = deadline - now_ns();
		if (left <= 0) {
			char what[512] = "";
			if (opt.url)
				http_describe_open(what, sizeof what);
			set_fatal("timed out%s%s", *what ? ": " : "", what);
			return;
		}
		pump(left > 1000000000 ? 1000 : (int)(left / 1000000) + 1);
	}
}

/* True when the phase's operations have all finished. */
static bool phase_done(void)
{
	return ops_active == 0 && ops_to_start == 0;
}

/* True once the initialize response arrived. */
static bool init_done(void)
{
	return st.init_done != 0;
}

/* --url: true once the sessions asked for are past their handshake. */
static bool sessions_done(void)
{
	return http_sessions_done();
}

/* Never true: used to pump for a fixed time. */
static bool never(void)
{
	return false;
}

/* Put fd in non-blocking mode. */
static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl: %s", strerror(errno));
}

/* Spawn the command with pipes on its stdin and stdout.  With --url its
 * stdout goes where its stderr goes (it speaks HTTP, not stdio), its stdin
 * stays an open pipe (supergateway exits when its stdin closes) and it
 * leads a process group of its own, swept when it is reaped. */
static void spawn_child(void)
{
	int in[2], out[2];
	free(ch.w.data);
	free(ch.r.data);
	memset(&ch, 0, sizeof ch);
	if (opt.url) {
		http_check_port_free();
		if (fatal)
			return;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	ch.pid = fork();
	if (ch.pid < 0)
		die("fork: %s", strerror(errno));
	if (ch.pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		int fd = opt.child_stderr ? open(opt.child_stderr,
		                                 O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		if (opt.url) {
			setpgid(0, 0);
			dup2(fd >= 0 ? fd : open("/dev/null", O_WRONLY), STDOUT_FILENO);
		}
		execvp(opt.argv[0], opt.argv);
		fprintf(stderr, PROG ": cannot run %s: %s\n", opt.argv[0],
		        strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	ch.to_fd = in[1];
	ch.from_fd = out[0];
	set_nonblock(ch.to_fd);
	set_nonblock(ch.from_fd);
	if (opt.url) {
		setpgid(ch.pid, ch.pid);  /* as the child does: no race either way */
		close(ch.from_fd);
		ch.from_fd = -1;
		ch.eof = true;
	}
}

/* Send initialize, wait for its answer, then send initialized.  With --url:
 * wait for the server to listen, then do the handshake of the first
 * `sessions` sessions. */
static void handshake(int64_t deadline, long sessions)
{
	if (opt.url) {
		if (fatal)
			return;
		http_wait_ready(ch.pid, deadline);
		if (!fatal)
			http_open_sessions(0, sessions);
		pump_until(sessions_done, deadline);
		return;
	}
	long id = new_req(REQ_INIT, -1);
	st.init_done = 0;
	buf_printf(&ch.w, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
	           "\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
	           "\"capabilities\":{},\"clientInfo\":{\"name\":\"" PROG "\","
	           "\"version\":\"0.1.0\"}}}\n", id);
	pump_until(init_done, deadline);
	if (!fatal)
		buf_printf(&ch.w, "{\"jsonrpc\":\"2.0\",\"method\":"
		           "\"notifications/initialized\"}\n");
}

/* Run count operations with opt.c in flight; record latencies if measure. */
static void run_phase(long count, bool measure, int64_t deadline)
{
	measuring = measure;
	ops_to_start = count;
	for (int32_t s = 0; s < (int32_t)opt.c && ops_to_start > 0; s++)
		start_op(s);
	pump_until(phase_done, deadline);
	measuring = false;
}

/* Read a "Key:   N kB" field of /proc/PID/status; -1 if unavailable. */
static long proc_status_kb(pid_t pid, const char *key)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long v = -1;
	size_t klen = strlen(key);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Collect root and all its descendants into pids; returns how many. */
static size_t list_tree(pid_t root, pid_t *pids, size_t max)
{
	size_t n = 0;
	if (max == 0)
		return 0;
	pids[n++] = root;
	for (size_t i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/task", (int)pids[i]);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char cpath[320];
			snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children",
			         (int)pids[i], e->d_name);
			FILE *f = fopen(cpath, "r");
			if (!f)
				continue;
			int kid;
			while (n < max && fscanf(f, "%d", &kid) == 1)
				pids[n++] = (pid_t)kid;
			fclose(f);
		}
		closedir(d);
	}
	return n;
}

/* CPU time (ns) used so far by process pid, or -1. */
static int64_t proc_cpu_ns(pid_t pid)
{
	clockid_t cid;
	struct timespec ts;
	if (clock_getcpuclockid(pid, &cid) != 0 || clock_gettime(cid, &ts) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time (ns) of the child and, if tree, all its descendants. */
static int64_t child_cpu_ns(bool tree)
{
	pid_t pids[MAX_TREE];
	size_t n = tree ? list_tree(ch.pid, pids, MAX_TREE) : 1;
	if (!tree)
		pids[0] = ch.pid;
	int64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t v = proc_cpu_ns(pids[i]);
		if (v > 0)
			sum += v;
	}
	return sum;
}

/* Sum of VmHWM (kB) over the child's descendants (not the child). */
static long descendants_hwm_kb(void)
{
	pid_t pids[MAX_TREE];
	size_t n = list_tree(ch.pid, pids, MAX_TREE);
	long sum = 0;
	for (size_t i = 1; i < n; i++) {
		long v = proc_status_kb(pids[i], "VmHWM");
		if (v > 0)
			sum += v;
	}
	return sum;
}

/* Our own CPU time in ns. */
static int64_t self_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Close the child's stdin, drain its stdout and reap it (killing if slow).
 * An HTTP server (--url) is told to stop with SIGTERM at once, as such a
 * server is; what is left of its process group once it is reaped is
 * killed. */
static void finish_child(void)
{
	if (ch.pid <= 0)
		return;
	if (opt.url)
		http_close_all();
	if (ch.to_fd >= 0) {
		try_write();
		close(ch.to_fd);
		ch.to_fd = -1;
	}
	int64_t deadline = now_ns() + 5000000000LL;
	int sig = 0;
	if (opt.url)
		kill(ch.pid, SIGTERM);
	for (;;) {
		pid_t r = wait4(ch.pid, &ch.status, WNOHANG, &ch.ru);
		if (r == ch.pid) {
			ch.reaped = true;
			break;
		}
		if (!ch.eof) {
			struct pollfd p = { .fd = ch.from_fd, .events = POLLIN };
			if (poll(&p, 1, 50) > 0) {
				char junk[65536];
				ssize_t n = read(ch.from_fd, junk, sizeof junk);
				if (n == 0)
					ch.eof = true;
			}
		} else {
			poll(NULL, 0, 5);
		}
		if (now_ns() > deadline) {
			sig = sig == 0 && !opt.url ? SIGTERM : SIGKILL;
			ch.killed = true;
			kill(ch.pid, sig);
			deadline = now_ns() + 2000000000LL;
		}
	}
	if (opt.url)
		kill(-ch.pid, SIGKILL);  /* its group: backends it left behind */
	if (ch.from_fd >= 0)
		close(ch.from_fd);
	ch.from_fd = -1;
}

/* Compare two int64_t for qsort. */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile q (0..1) of the sorted v[0..n), in microseconds. */
static double pct_us(const int64_t *v, long n, double q)
{
	if (n <= 0)
		return 0;
	long k = (long)ceil(q * (double)n) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return (double)v[k] / 1000.0;
}

/* Print a JSON string value (for messages). */
static void print_json_string(const char *s)
{
	json_t *j = json_string(s);
	char *e = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	fputs(e ? e : "\"?\"", stdout);
	free(e);
	json_decref(j);
}

/* Describe how the child ended, as a short string. */
static const char *child_end(char *tmp, size_t len)
{
	if (!ch.reaped)
		snprintf(tmp, len, "not reaped");
	else if (WIFEXITED(ch.status))
		snprintf(tmp, len, "%sexit %d", ch.killed ? "killed, " : "",
		         WEXITSTATUS(ch.status));
	else if (WIFSIGNALED(ch.status))
		snprintf(tmp, len, "%ssignal %d", ch.killed ? "killed, " : "",
		         WTERMSIG(ch.status));
	else
		snprintf(tmp, len, "unknown");
	return tmp;
}

/* Print usage to f. */
static void usage(FILE *f)
{
	fprintf(f,
	  "usage: " PROG " [options] -- COMMAND [ARGS...]\n"
	  "  --mode M          echo (default), progress, list, blob, startup,\n"
	  "                    idle (--url only: -n sessions left idle)\n"
	  "  -n N              operations to measure (default 1000)\n"
	  "  -c K, --inflight K  operations in flight (default 1)\n"
	  "  --warmup W        unmeasured operations first (default n/10, max 1000;\n"
	  "                    0 for blob and startup)\n"
	  "  --size B          echo text length (default 32)\n"
	  "  --bytes N         blob size (default 1048576)\n"
	  "  --ms MS --steps S slow call duration and progress steps (60, 60)\n"
	  "  --grace-ms MS     progress: wait this long for late notifications\n"
	  "  --expect-tools N  list: every listing must have N tools\n"
	  "  --tool-prefix P   prepend P to the tool names (echo, blob, slow)\n"
	  "  --timeout S       give up after S seconds per phase (default 120)\n"
	  "  --child-stderr F  append the child's stderr to file F\n"
	  "  --no-pid-stats    take peak RSS from wait4() instead of VmHWM\n"
	  "  --strict-json     also validate every line fully with jansson\n"
	  "  --quiet           do not describe errors on stderr\n"
	  "  --url URL         COMMAND is an HTTP server: drive it over Streamable HTTP\n"
	  "                    at URL (http://HOST:PORT/PATH), one connection per\n"
	  "                    operation in flight\n"
	  "  --sessions S      --url: S sessions, operation slot i in session i %% S (1)\n"
	  "  --header H        --url: one more request header (\"Authorization: Bearer ...\")\n"
	  "  --accept A        --url: both (Accept: application/json, text/event-stream,\n"
	  "                    the default) or json (Accept: application/json)\n"
	  "  --settle-ms MS    idle: wait this long before each VmRSS reading (500)\n");
}

/* Parse a non-negative integer option value or exit. */
static long num_arg(const char *name, const char *v)
{
	char *end = NULL;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || !*v || *end || x < 0)
		die("bad value for %s: %s", name, v);
	return x;
}

/* Parse the command line into opt. */
static void parse_args(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--no-pid-stats") == 0) {
			opt.pid_stats = false;
			continue;
		} else if (strcmp(a, "--pid-stats") == 0) {
			opt.pid_stats = true;
			continue;
		} else if (strcmp(a, "--quiet") == 0) {
			opt.quiet = true;
			continue;
		} else if (strcmp(a, "--strict-json") == 0) {
			opt.strict = true;
			continue;
		}
		if (!v) {
			usage(stderr);
			exit(2);
		}
		i++;
		if (strcmp(a, "--mode") == 0) {
			size_t m;
			for (m = 0; m < sizeof mode_names / sizeof *mode_names; m++)
				if (strcmp(v, mode_names[m]) == 0)
					break;
			if (m == sizeof mode_names / sizeof *mode_names)
				die("unknown mode %s", v);
			opt.mode = (enum mode)m;
		} else if (strcmp(a, "-n") == 0) {
			opt.n = num_arg(a, v);
		} else if (strcmp(a, "-c") == 0 || strcmp(a, "--inflight") == 0) {
			opt.c = num_arg(a, v);
		} else if (strcmp(a, "--warmup") == 0) {
			opt.warmup = num_arg(a, v);
		} else if (strcmp(a, "--size") == 0) {
			opt.size = num_arg(a, v);
		} else if (strcmp(a, "--bytes") == 0) {
			opt.bytes = num_arg(a, v);
		} else if (strcmp(a, "--ms") == 0) {
			opt.ms = num_arg(a, v);
		} else if (strcmp(a, "--steps") == 0) {
			opt.steps = num_arg(a, v);
		} else if (strcmp(a, "--grace-ms") == 0) {
			opt.grace_ms = num_arg(a, v);
		} else if (strcmp(a, "--expect-tools") == 0) {
			opt.expect_tools = num_arg(a, v);
		} else if (strcmp(a, "--tool-prefix") == 0) {
			opt.tool_prefix = v;
		} else if (strcmp(a, "--timeout") == 0) {
			opt.timeout_s = (double)num_arg(a, v);
		} else if (strcmp(a, "--child-stderr") == 0) {
			opt.child_stderr = v;
		} else if (strcmp(a, "--url") == 0) {
			opt.url = v;
		} else if (strcmp(a, "--sessions") == 0) {
			opt.sessions = num_arg(a, v);
		} else if (strcmp(a, "--settle-ms") == 0) {
			opt.settle_ms = num_arg(a, v);
		} else if (strcmp(a, "--header") == 0) {
			if (!strchr(v, ':') || strpbrk(v, "\r\n"))
				die("--header takes one \"Name: value\"");
			opt.header = v;
		} else if (strcmp(a, "--accept") == 0) {
			if (strcmp(v, "both") != 0 && strcmp(v, "json") != 0)
				die("--accept takes both or json");
			opt.accept_sse = strcmp(v, "both") == 0;
		} else {
			usage(stderr);
			exit(2);
		}
	}
	if (i >= argc)
		die("no command given (put it after --)");
	opt.argv = argv + i;
	if (opt.n < 1 || opt.c < 1 || opt.c > 1000000)
		die("-n and -c must be at least 1");
	if (opt.size < 12)
		opt.size = 12;
	if (strchr(opt.tool_prefix, '"') || strchr(opt.tool_prefix, '\\'))
		die("--tool-prefix must not contain quotes or backslashes");
	if (opt.warmup < 0) {
		opt.warmup = opt.n / 10 > 1000 ? 1000 : opt.n / 10;
		if (opt.mode == MODE_BLOB || opt.mode == MODE_STARTUP)
			opt.warmup = 0;
	}
	if (opt.url && opt.mode == MODE_STARTUP)
		die("--mode startup is for stdio servers");
	if (!opt.url && opt.mode == MODE_IDLE)
		die("--mode idle needs --url");
	if (opt.sessions < 1)
		die("--sessions must be at least 1");
	if (opt.mode == MODE_IDLE) {
		if (opt.n < 2)
			die("--mode idle needs -n 2 or more sessions");
		opt.sessions = opt.n;
		opt.warmup = 0;
	}
	if (opt.url)
		http_init(opt.url, opt.c, opt.sessions, opt.accept_sse, opt.header);
}

/* Run the startup mode: n fresh children, time to first answered call. */
static void run_startup(int64_t *cpu_ns, long *peak_kb, long *w4_kb,
                        int64_t *init_sum)
{
	int64_t *init = calloc((size_t)opt.n, sizeof *init);
	if (!init)
		die("out of memory");
	opt.c = 1;
	for (long i = 0; i < opt.n && !fatal; i++) {
		int64_t t0 = now_ns();
		int64_t deadline = t0 + (int64_t)(opt.timeout_s * 1e9);
		spawn_child();
		handshake(deadline, 1);
		if (!fatal)
			run_phase(1, false, deadline);
		if (!fatal) {
			lat[n_lat++] = last_done - t0;
			init[i] = st.init_done - t0;
		}
		long hwm = proc_status_kb(ch.pid, "VmHWM");
		if (hwm > *peak_kb)
			*peak_kb = hwm;
		finish_child();
		*cpu_ns += (int64_t)ch.ru.ru_utime.tv_sec * 1000000000 +
		           (int64_t)ch.ru.ru_utime.tv_usec * 1000 +
		           (int64_t)ch.ru.ru_stime.tv_sec * 1000000000 +
		           (int64_t)ch.ru.ru_stime.tv_usec * 1000;
		if (ch.ru.ru_maxrss > *w4_kb)
			*w4_kb = ch.ru.ru_maxrss;
	}
	qsort(init, (size_t)n_lat, sizeof *init, cmp_i64);
	*init_sum = n_lat ? init[n_lat / 2] : 0;
	free(init);
}

/* What the idle mode measured. */
struct idle {
	long rss_one_kb;      /* the server's VmRSS with one session */
	long rss_all_kb;      /* ... with all of them */
	long procs;           /* its descendants (backends) at the end */
	long procs_rss_kb;    /* their VmRSS, summed */
};

/* Sleep ms milliseconds. */
static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Close the connections, let the server settle and read its VmRSS. */
static long idle_rss_kb(void)
{
	http_close_all();
	sleep_ms(opt.settle_ms);
	return proc_status_kb(ch.pid, "VmRSS");
}

/* The backends of the idle mode: the server's descendants and their RSS. */
static void idle_backends(struct idle *id)
{
	pid_t pids[MAX_TREE];
	size_t n = list_tree(ch.pid, pids, MAX_TREE);
	id->procs = n ? (long)n - 1 : 0;
	id->procs_rss_kb = 0;
	for (size_t i = 1; i < n; i++) {
		long v = proc_status_kb(pids[i], "VmRSS");
		if (v > 0)
			id->procs_rss_kb += v;
	}
}

/* SIGINT, SIGTERM, SIGHUP with --url: the HTTP server leads a process
 * group of its own, out of reach of a terminal's ^C, so it is killed here
 * before the driver goes the way the signal says. */
static void on_stop_signal(int sig)
{
	if (ch.pid > 0 && !ch.reaped)
		kill(-ch.pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Drive the child and print the JSON result line. */
int main(int argc, char **argv)
{
	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	if (opt.url) {
		signal(SIGINT, on_stop_signal);
		signal(SIGTERM, on_stop_signal);
		signal(SIGHUP, on_stop_signal);
	}
	slots = calloc((size_t)opt.c, sizeof *slots);
	lat = calloc((size_t)opt.n, sizeof *lat);
	if (!slots || !lat)
		die("out of memory");

	int64_t t_start = 0, t_end = 0, cpu0 = 0, cpu1 = 0, tree0 = 0, tree1 = 0;
	long csw0[2] = { -1, -1 }, csw1[2] = { -1, -1 };  /* the child's context switches */
	int64_t self0 = 0, self1 = 0, init_p50 = 0, startup_cpu = 0;
	struct http_counts hc0 = { 0 };  /* --url: counts before the measured phase */
	long peak_kb = -1, tree_kb = -1, w4_kb = 0;
	struct idle idle = { -1, -1, 0, 0 };
	if (opt.mode == MODE_IDLE) {
		/* session 0, then the server's RSS; sessions 1..n-1, then again */
		int64_t t0 = now_ns();
		spawn_child();
		handshake(t0 + (int64_t)(opt.timeout_s * 1e9), 1);
		if (st.init_done)
			st.init_done -= t0;
		if (!fatal) {
			idle.rss_one_kb = idle_rss_kb();
			hc0 = http_counts();
			cpu0 = child_cpu_ns(false);
			tree0 = child_cpu_ns(true);
			self0 = self_cpu_ns();
			t_start = now_ns();
			measuring = true;
			http_open_sessions(1, opt.n - 1);
			pump_until(sessions_done, t_start + (int64_t)(opt.timeout_s * 1e9));
			measuring = false;
			t_end = now_ns();
			cpu1 = child_cpu_ns(false);
			tree1 = child_cpu_ns(true);
			self1 = self_cpu_ns();
		}
		if (!fatal) {
			idle.rss_all_kb = idle_rss_kb();
			idle_backends(&idle);
		}
		st.ok = st.sessions_open;
		peak_kb = proc_status_kb(ch.pid, "VmHWM");
		tree_kb = peak_kb >= 0 ? peak_kb + descendants_hwm_kb() : -1;
		finish_child();
		w4_kb = ch.ru.ru_maxrss;
	} else if (opt.mode == MODE_STARTUP) {
		t_start = now_ns();
		self0 = self_cpu_ns();
		run_startup(&startup_cpu, &peak_kb, &w4_kb, &init_p50);
		self1 = self_cpu_ns();
		t_end = now_ns();
	} else {
		int64_t t0 = now_ns();
		spawn_child();
		handshake(t0 + (int64_t)(opt.timeout_s * 1e9), opt.sessions);
		if (st.init_done)
			st.init_done -= t0;
		if (!fatal && opt.warmup > 0)
			run_phase(opt.warmup, false,
			          now_ns() + (int64_t)(opt.timeout_s * 1e9));
		if (st.errors)
			set_fatal("%ld errors during warm-up", st.errors);
		st.ok = st.failed = 0;
		if (!fatal) {
			if (opt.url)
				hc0 = http_counts();
			cpu0 = child_cpu_ns(false);
			tree0 = child_cpu_ns(true);
			self0 = self_cpu_ns();
			csw0[0] = proc_status_kb(ch.pid, "voluntary_ctxt_switches");
			csw0[1] = proc_status_kb(ch.pid, "nonvoluntary_ctxt_switches");
			t_start = now_ns();
			run_phase(opt.n, true, t_start + (int64_t)(opt.timeout_s * 1e9));
			t_end = last_done;
			cpu1 = child_cpu_ns(false);
			tree1 = child_cpu_ns(true);
			self1 = self_cpu_ns();
			csw1[0] = proc_status_kb(ch.pid, "voluntary_ctxt_switches");
			csw1[1] = proc_status_kb(ch.pid, "nonvoluntary_ctxt_switches");
		}
		if (!fatal && opt.mode == MODE_PROGRESS && opt.grace_ms > 0) {
			pump_until(never, now_ns() + opt.grace_ms * 1000000);
			if (fatal && strncmp(fatal, "timed out", 9) == 0) {
				free(fatal);
				fatal = NULL;
			}
		}
		peak_kb = proc_status_kb(ch.pid, "VmHWM");
		tree_kb = peak_kb >= 0 ? peak_kb + descendants_hwm_kb() : -1;
		finish_child();
		w4_kb = ch.ru.ru_maxrss;
	}

	long missing = opt.n - st.ok - st.failed;
	if (missing > 0)
		st.errors += missing; /* never answered */
	qsort(lat, (size_t)n_lat, sizeof *lat, cmp_i64);
	double secs = t_end > t_start ? (double)(t_end - t_start) / 1e9 : 0;
	const char *rss_source = "VmHWM";
	if (!opt.pid_stats || peak_kb < 0) {
		peak_kb = w4_kb;
		rss_source = "wait4";
	}
	/* idle: the measured phase opens sessions 1..n-1 (session 0 came first) */
	long measured = opt.mode == MODE_IDLE ? opt.n - 1 : opt.n;
	long done = opt.mode == MODE_IDLE ? (st.ok > 0 ? st.ok - 1 : 0) : st.ok;
	char tmp[64];
	printf("{\"mode\":\"%s\",\"n\":%ld,\"c\":%ld,\"ok\":%ld,\"errors\":%ld,"
	       "\"rps\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
	       "\"max_us\":%.1f,",
	       mode_names[opt.mode], opt.n, opt.c, st.ok, st.errors,
	       secs > 0 ? (double)done / secs : 0, pct_us(lat, n_lat, 0.50),
	       pct_us(lat, n_lat, 0.90), pct_us(lat, n_lat, 0.99),
	       pct_us(lat, n_lat, 1.0));
	if (opt.mode == MODE_STARTUP) {
		printf("\"child_cpu_us_per_req\":%.1f,\"cpu_source\":\"wait4 whole "
		       "life per start\",\"init_p50_us\":%.1f,",
		       opt.n ? (double)startup_cpu / 1000.0 / (double)opt.n : 0,
		       (double)init_p50 / 1000.0);
	} else {
		printf("\"child_cpu_us_per_req\":%.3f,\"tree_cpu_us_per_req\":%.3f,"
		       "\"cpu_source\":\"cpu clock, measured phase\","
		       "\"init_us\":%.1f,",
		       (double)(cpu1 - cpu0) / 1000.0 / (double)measured,
		       (double)(tree1 - tree0) / 1000.0 / (double)measured,
		       (double)st.init_done / 1000.0);
		if (csw0[0] >= 0 && csw1[0] >= 0 && csw0[1] >= 0 && csw1[1] >= 0)
			printf("\"child_vcsw_per_req\":%.4f,\"child_ivcsw_per_req\":%.4f,",
			       (double)(csw1[0] - csw0[0]) / (double)measured,
			       (double)(csw1[1] - csw0[1]) / (double)measured);
	}
	printf("\"child_peak_rss_kb\":%ld,\"rss_source\":\"%s\","
	       "\"tree_peak_rss_kb\":", peak_kb, rss_source);
	if (tree_kb >= 0)
		printf("%ld,", tree_kb);
	else
		printf("null,");
	printf("\"wait4_maxrss_kb\":%ld,"
	       "\"wait4_cpu_us\":%.0f,\"load_cpu_us_per_req\":%.3f,"
	       "\"secs\":%.3f,\"child_end\":\"%s\"",
	       w4_kb,
	       (double)ch.ru.ru_utime.tv_sec * 1e6 + (double)ch.ru.ru_utime.tv_usec
	       + (double)ch.ru.ru_stime.tv_sec * 1e6 + (double)ch.ru.ru_stime.tv_usec,
	       (double)(self1 - self0) / 1000.0 / (double)measured, secs,
	       child_end(tmp, sizeof tmp));
	if (opt.url) {
		/* measured phase only */
		struct http_counts hc = http_counts();
		printf(",\"transport\":\"http\",\"accept\":\"%s\",\"sessions\":%ld,"
		       "\"resp_json\":%ld,\"resp_sse\":%ld,\"sse_events\":%ld,"
		       "\"connects\":%ld,\"resp_other_status\":%ld,\"last_other_status\":%d",
		       opt.accept_sse ? "both" : "json", opt.sessions,
		       hc.resp_json - hc0.resp_json, hc.resp_sse - hc0.resp_sse,
		       hc.events - hc0.events, hc.connects - hc0.connects,
		       hc.status_other - hc0.status_other, hc.last_status);
	}
	if (opt.mode == MODE_IDLE) {
		printf(",\"idle_sessions\":%ld,\"rss_one_kb\":%ld,\"rss_all_kb\":%ld,"
		       "\"kb_per_session\":", opt.n, idle.rss_one_kb, idle.rss_all_kb);
		if (idle.rss_one_kb >= 0 && idle.rss_all_kb >= 0)
			printf("%.2f", (double)(idle.rss_all_kb - idle.rss_one_kb) /
			               (double)(opt.n - 1));
		else
			printf("null");
		printf(",\"backend_procs\":%ld,\"backend_rss_kb\":%ld,\"settle_ms\":%ld",
		       idle.procs, idle.procs_rss_kb, opt.settle_ms);
	}
	if (opt.mode == MODE_PROGRESS) {
		long expected = opt.n * opt.steps;
		long never_seen = expected - st.prog_received - st.prog_late;
		printf(",\"steps\":%ld,\"progress_expected\":%ld,"
		       "\"progress_received\":%ld,\"progress_late\":%ld,"
		       "\"progress_missing\":%ld,\"progress_unknown\":%ld,"
		       "\"progress_disorder\":%ld",
		       opt.steps, expected, st.prog_received, st.prog_late,
		       never_seen > 0 ? never_seen : 0, st.prog_unknown,
		       st.prog_disorder);
	}
	if (opt.mode == MODE_LIST)
		printf(",\"tools_per_list\":%ld,\"pages_per_list\":%ld",
		       st.list_tools, st.list_pages);
	if (opt.mode == MODE_BLOB)
		printf(",\"bytes\":%ld,\"mib_per_s\":%.1f", opt.bytes,
		       secs > 0 ? (double)opt.bytes * (double)st.ok / secs / 1048576.0
		                : 0);
	if (fatal) {
		printf(",\"fatal\":");
		print_json_string(fatal);
	}
	printf("}\n");
	fflush(stdout);
	return (fatal || st.errors) ? 1 : 0;
}
