/*
 * mcp-bench-server: a small, fast MCP server on stdio for benchmarking.
 *
 * It speaks newline-delimited JSON-RPC 2.0 and implements just enough of
 * MCP to drive the benchmark: initialize, notifications/initialized, ping,
 * tools/list (with a configurable number of filler tools and cursor
 * pagination), notifications/cancelled and tools/call for three tools:
 *
 *   echo {text}       returns the text back as one text content item
 *   blob {bytes}      returns a text content item of exactly N bytes
 *   slow {ms, steps}  sends `steps` notifications/progress spread over `ms`
 *                     milliseconds (when the request carried a progressToken)
 *                     and then the result; other requests keep being served
 *                     meanwhile (timers, not sleeps)
 *
 * Plain echo calls take a fast path that skims the message (jskim.c) and
 * copies the id and text through as they came; everything else is parsed
 * with jansson.  Output is collected in one buffer and written once per batch of input
 * read (and once per batch of expired timers), so the server does a couple
 * of system calls per batch and is not the bottleneck of a measurement.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jskim.h"

#define SERVER_NAME "mcp-bench-server"
#define SERVER_VERSION "0.1.0"
#define DEFAULT_PROTOCOL "2025-06-18"

/* A growable byte buffer. */
struct buf {
	char *data;
	size_t len;
	size_t cap;
};

/* One running `slow` call. */
struct slow_job {
	json_t *id;        /* request id (owned reference) */
	json_t *token;     /* progress token or NULL (owned reference) */
	int64_t start_ns;  /* when the call arrived */
	int64_t total_ns;  /* requested duration */
	int steps;         /* progress notifications to send */
	int done;          /* progress notifications sent so far */
};

/* Command line settings. */
static struct {
	long tools;           /* total tools in tools/list (at least 3) */
	long page_size;       /* tools per page; 0 = everything in one page */
	const char *prefix;   /* prefix for every tool name */
	bool fast;            /* answer plain echo calls without jansson */
} opt = { 3, 0, "", true };

static struct buf out;            /* pending output, flushed per batch */
static char prefixed_echo[128];   /* "echo" with the --name-prefix */
static char **pages;              /* pre-rendered tools/list results */
static size_t *page_lens;         /* lengths of the entries in pages */
static long n_pages;              /* number of entries in pages */
static struct slow_job *jobs;     /* running slow calls */
static size_t n_jobs, cap_jobs;   /* used and allocated entries in jobs */

/* Print a message to stderr and exit with status 1. */
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, SERVER_NAME ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* Monotonic clock in nanoseconds. */
static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Make sure b has room for extra more bytes. */
static void buf_reserve(struct buf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 65536;
	while (cap < b->len + extra)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		die("out of memory (%zu bytes)", cap);
	b->data = p;
	b->cap = cap;
}

/* Append n bytes to b. */
static void buf_put(struct buf *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

/* Append a NUL-terminated string to b. */
static void buf_puts(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

/* Append printf-formatted text to b. */
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("vsnprintf failed");
	buf_reserve(b, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Append the compact JSON encoding of any JSON value to b. */
static void buf_json(struct buf *b, const json_t *v)
{
	size_t room = b->cap - b->len;
	size_t need = json_dumpb(v, b->cap ? b->data + b->len : NULL,
	                         b->cap ? room : 0, JSON_COMPACT | JSON_ENCODE_ANY);
	if (need == 0)
		die("cannot encode a JSON value");
	if (need > room) {
		buf_reserve(b, need);
		need = json_dumpb(v, b->data + b->len, need,
		                  JSON_COMPACT | JSON_ENCODE_ANY);
	}
	b->len += need;
}

/* Write all pending output to stdout, waiting if stdout is non-blocking. */
static void flush_out(void)
{
	size_t off = 0;
	while (off < out.len) {
		ssize_t w = write(STDOUT_FILENO, out.data + off, out.len - off);
		if (w > 0) {
			off += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };
			poll(&p, 1, -1);
		} else {
			/* The reader went away: nothing more to do. */
			exit(0);
		}
	}
	out.len = 0;
	if (out.cap > (64u << 20)) {
		/* Give back the memory of a huge blob answer. */
		free(out.data);
		out.data = NULL;
		out.cap = 0;
	}
}

/* Start a response line: {"jsonrpc":"2.0","id":ID, */
static void begin_response(const json_t *id)
{
	buf_puts(&out, "{\"jsonrpc\":\"2.0\",\"id\":");
	buf_json(&out, id);
	buf_put(&out, ",", 1);
}

/* Queue a JSON-RPC error response. */
static void send_error(const json_t *id, int code, const char *msg)
{
	json_t *m = json_string(msg);
	begin_response(id);
	buf_printf(&out, "\"error\":{\"code\":%d,\"message\":", code);
	buf_json(&out, m);
	buf_puts(&out, "}}\n");
	json_decref(m);
}

/* Queue a result whose content is one text item with the given string. */
static void send_text_result(const json_t *id, const json_t *text)
{
	begin_response(id);
	buf_puts(&out, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
	buf_json(&out, text);
	buf_puts(&out, "}]}}\n");
}

/* Render one tool definition into b. */
static void render_tool(struct buf *b, long i)
{
	if (i == 0) {
		buf_printf(b, "{\"name\":\"%secho\",\"description\":\"Returns the text "
		         "argument as text content\",\"inputSchema\":{\"type\":\"object\","
		         "\"properties\":{\"text\":{\"type\":\"string\"}},"
		         "\"required\":[\"text\"]}}", opt.prefix);
	} else if (i == 1) {
		buf_printf(b, "{\"name\":\"%sblob\",\"description\":\"Returns a text "
		         "content item of exactly `bytes` bytes\",\"inputSchema\":{"
		         "\"type\":\"object\",\"properties\":{\"bytes\":{\"type\":"
		         "\"integer\",\"minimum\":0}},\"required\":[\"bytes\"]}}",
		           opt.prefix);
	} else if (i == 2) {
		buf_printf(b, "{\"name\":\"%sslow\",\"description\":\"Sends `steps` "
		         "progress notifications over `ms` milliseconds, then "
		         "answers\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
		         "\"ms\":{\"type\":\"integer\",\"minimum\":0},\"steps\":{\"type\":"
		         "\"integer\",\"minimum\":0}}}}", opt.prefix);
	} else {
		buf_printf(b, "{\"name\":\"%stool_%05ld\",\"description\":\"Filler "
		           "tool number %ld, present only to make tools/list large\","
		           "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"x\":"
		           "{\"type\":\"string\",\"description\":\"unused\"}}}}",
		           opt.prefix, i, i);
	}
}

/* Pre-render every tools/list page (the result object, without the id). */
static void build_pages(void)
{
	long per = opt.page_size > 0 ? opt.page_size : opt.tools;
	n_pages = (opt.tools + per - 1) / per;
	pages = calloc((size_t)n_pages, sizeof *pages);
	page_lens = calloc((size_t)n_pages, sizeof *page_lens);
	if (!pages || !page_lens)
		die("out of memory");
	for (long p = 0; p < n_pages; p++) {
		struct buf b = { 0 };
		buf_puts(&b, "{\"tools\":[");
		long first = p * per, last = first + per;
		if (last > opt.tools)
			last = opt.tools;
		for (long i = first; i < last; i++) {
			if (i > first)
				buf_put(&b, ",", 1);
			render_tool(&b, i);
		}
		buf_puts(&b, "]");
		if (p + 1 < n_pages)
			buf_printf(&b, ",\"nextCursor\":\"%ld\"", p + 1);
		buf_puts(&b, "}");
		pages[p] = b.data;
		page_lens[p] = b.len;
	}
}

/* Answer initialize, agreeing to the client's protocol version. */
static void handle_initialize(const json_t *id, const json_t *params)
{
	static const char *const known[] = {
		"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25",
	};
	const char *want = json_string_value(json_object_get(params,
	                                                     "protocolVersion"));
	const char *ver = DEFAULT_PROTOCOL;
	for (size_t i = 0; want && i < sizeof known / sizeof known[0]; i++)
		if (strcmp(want, known[i]) == 0)
			ver = known[i];
	begin_response(id);
	buf_printf(&out, "\"result\":{\"protocolVersion\":\"%s\",\"capabilities\":"
	           "{\"tools\":{\"listChanged\":false}},\"serverInfo\":{\"name\":\""
	           SERVER_NAME "\",\"version\":\"" SERVER_VERSION "\"}}}\n", ver);
}

/* Answer tools/list with the page named by the cursor. */
static void handle_list(const json_t *id, const json_t *params)
{
	long page = 0;
	const json_t *cur = json_object_get(params, "cursor");
	if (cur && !json_is_null(cur)) {
		const char *s = json_string_value(cur);
		char *end = NULL;
		if (s)
			page = strtol(s, &end, 10);
		if (!s || !*s || *end || page < 0 || page >= n_pages) {
			send_error(id, -32602, "invalid cursor");
			return;
		}
	}
	begin_response(id);
	buf_puts(&out, "\"result\":");
	buf_put(&out, pages[page], page_lens[page]);
	buf_puts(&out, "}\n");
}

/* Answer a blob call with a text item of exactly n bytes. */
static void handle_blob(const json_t *id, json_int_t n)
{
	begin_response(id);
	buf_puts(&out, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
	buf_reserve(&out, (size_t)n);
	memset(out.data + out.len, 'x', (size_t)n);
	out.len += (size_t)n;
	buf_puts(&out, "\"}]}}\n");
}

/* Register a slow call; its timers fire from the main loop. */
static void start_slow(const json_t *id, const json_t *token, json_int_t ms,
                       json_int_t steps)
{
	if (n_jobs == cap_jobs) {
		cap_jobs = cap_jobs ? cap_jobs * 2 : 64;
		jobs = realloc(jobs, cap_jobs * sizeof *jobs);
		if (!jobs)
			die("out of memory");
	}
	struct slow_job *j = &jobs[n_jobs++];
	j->id = json_deep_copy(id);
	j->token = token ? json_deep_copy(token) : NULL;
	j->start_ns = now_ns();
	j->total_ns = (int64_t)ms * 1000000;
	j->steps = (int)steps;
	j->done = 0;
}

/* Remove slow job i (order of the rest is not kept). */
static void drop_job(size_t i)
{
	json_decref(jobs[i].id);
	json_decref(jobs[i].token);
	jobs[i] = jobs[--n_jobs];
}

/* When the next step of job j is due. */
static int64_t job_due(const struct slow_job *j)
{
	int next = j->done + 1;
	int steps = j->steps > 0 ? j->steps : 1;
	if (next > steps)
		next = steps;
	return j->start_ns + j->total_ns * next / steps;
}

/* Queue every progress step and result that is due by now. */
static void run_timers(int64_t now)
{
	for (size_t i = 0; i < n_jobs;) {
		struct slow_job *j = &jobs[i];
		while (j->done < j->steps && job_due(j) <= now) {
			j->done++;
			if (j->token) {
				buf_puts(&out, "{\"jsonrpc\":\"2.0\",\"method\":"
				         "\"notifications/progress\",\"params\":"
				         "{\"progressToken\":");
				buf_json(&out, j->token);
				buf_printf(&out, ",\"progress\":%d,\"total\":%d,"
				           "\"message\":\"step %d of %d\"}}\n",
				           j->done, j->steps, j->done, j->steps);
			}
		}
		if (j->done >= j->steps && j->start_ns + j->total_ns <= now) {
			begin_response(j->id);
			buf_printf(&out, "\"result\":{\"content\":[{\"type\":\"text\","
			           "\"text\":\"slow: %d steps done\"}]}}\n", j->steps);
			drop_job(i);
		} else {
			i++;
		}
	}
}

/* Milliseconds until the next timer is due, or -1 when none is running. */
static int next_timeout_ms(int64_t now)
{
	if (n_jobs == 0)
		return -1;
	int64_t best = INT64_MAX;
	for (size_t i = 0; i < n_jobs; i++) {
		int64_t due = jobs[i].done < jobs[i].steps
		              ? job_due(&jobs[i]) : jobs[i].start_ns + jobs[i].total_ns;
		if (due < best)
			best = due;
	}
	if (best <= now)
		return 0;
	return (int)((best - now + 999999) / 1000000);
}

/* Read a non-negative integer argument; false if present and invalid. */
static bool int_arg(const json_t *args, const char *key, json_int_t dflt,
                    json_int_t max, json_int_t *v)
{
	const json_t *x = json_object_get(args, key);
	if (!x) {
		*v = dflt;
		return true;
	}
	if (!json_is_integer(x) || json_integer_value(x) < 0 ||
	    json_integer_value(x) > max)
		return false;
	*v = json_integer_value(x);
	return true;
}

/* Answer tools/call for echo, blob and slow. */
static void handle_call(const json_t *id, const json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	const json_t *args = json_object_get(params, "arguments");
	if (!name) {
		send_error(id, -32602, "tools/call: missing tool name");
		return;
	}
	size_t plen = strlen(opt.prefix);
	if (plen && strncmp(name, opt.prefix, plen) == 0)
		name += plen; /* listed names carry the prefix; accept both */
	if (strcmp(name, "echo") == 0) {
		const json_t *text = json_object_get(args, "text");
		if (!json_is_string(text))
			send_error(id, -32602, "echo: `text` must be a string");
		else
			send_text_result(id, text);
	} else if (strcmp(name, "blob") == 0) {
		json_int_t n;
		if (!int_arg(args, "bytes", 0, (json_int_t)1 << 32, &n))
			send_error(id, -32602, "blob: `bytes` must be 0..2^32");
		else
			handle_blob(id, n);
	} else if (strcmp(name, "slow") == 0) {
		json_int_t ms, steps;
		if (!int_arg(args, "ms", 100, 3600000, &ms) ||
		    !int_arg(args, "steps", 10, 1000000, &steps)) {
			send_error(id, -32602, "slow: bad `ms` or `steps`");
			return;
		}
		const json_t *meta = json_object_get(params, "_meta");
		const json_t *tok = json_object_get(meta, "progressToken");
		if (tok && !json_is_string(tok) && !json_is_integer(tok))
			tok = NULL;
		start_slow(id, tok, ms, steps);
	} else {
		send_error(id, -32602, "unknown tool");
	}
}

/* Stop the slow job whose request was cancelled. */
static void handle_cancelled(const json_t *params)
{
	const json_t *rid = json_object_get(params, "requestId");
	for (size_t i = 0; rid && i < n_jobs; i++) {
		if (json_equal(jobs[i].id, rid)) {
			drop_job(i);
			return;
		}
	}
}

/* What the fast path found in a message. */
struct fast {
	const char *id, *id_end;       /* the id's JSON text */
	const char *text, *text_end;   /* params.arguments.text (a string) */
	bool is_call;                  /* method is "tools/call" */
	bool is_echo;                  /* params.name is "echo" */
};

/* jskim callback for the fast path (depth 0 message, 1 params, 2 arguments). */
static const char *fast_member(void *ctx, const char *key, size_t klen,
                               const char *v, const char *e, int depth)
{
	struct fast *f = ctx;
	const char *vend = NULL;
	if (depth == 0 && jskim_key_is(key, klen, "id")) {
		vend = jskim_value(v, e);
		f->id = v;
		f->id_end = vend;
	} else if (depth == 0 && jskim_key_is(key, klen, "method")) {
		vend = jskim_value(v, e);
		f->is_call = vend && jskim_str_is(v, vend, "tools/call");
	} else if (depth == 0 && jskim_key_is(key, klen, "params") && *v == '{') {
		vend = jskim_object(v, e, fast_member, f, 1);
	} else if (depth == 1 && jskim_key_is(key, klen, "name")) {
		vend = jskim_value(v, e);
		f->is_echo = vend && (jskim_str_is(v, vend, "echo") ||
		                      jskim_str_is(v, vend, prefixed_echo));
	} else if (depth == 1 && jskim_key_is(key, klen, "arguments") &&
	           *v == '{') {
		vend = jskim_object(v, e, fast_member, f, 2);
	} else if (depth == 2 && jskim_key_is(key, klen, "text") && *v == '"') {
		vend = jskim_string(v, e, NULL);
		f->text = v;
		f->text_end = vend;
	}
	return vend;
}

/* Answer a plain echo call by copying id and text through; false if not one. */
static bool fast_echo(const char *line, size_t len)
{
	struct fast f = { 0 };
	const char *end = jskim_object(line, line + len, fast_member, &f, 0);
	if (!end || jskim_ws(end, line + len) != line + len || !f.is_call ||
	    !f.is_echo || !f.id_end || !f.text_end || *f.id == '{' ||
	    *f.id == '[')
		return false;
	buf_puts(&out, "{\"jsonrpc\":\"2.0\",\"id\":");
	buf_put(&out, f.id, (size_t)(f.id_end - f.id));
	buf_puts(&out, ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
	buf_put(&out, f.text, (size_t)(f.text_end - f.text));
	buf_puts(&out, "}]}}\n");
	return true;
}

/* Handle one JSON-RPC message (a single line of input). */
static void handle_line(const char *line, size_t len)
{
	if (opt.fast && fast_echo(line, len))
		return;
	json_error_t err;
	json_t *msg = json_loadb(line, len, 0, &err);
	if (!msg) {
		json_t *null = json_null();
		send_error(null, -32700, "parse error");
		return;
	}
	const json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *params = json_object_get(msg, "params");
	if (!json_is_object(msg) || !method) {
		/* A response to a request we never sent, or garbage: ignore. */
	} else if (!id) {
		if (strcmp(method, "notifications/cancelled") == 0)
			handle_cancelled(params);
		/* notifications/initialized and any other notification: nothing. */
	} else if (strcmp(method, "tools/call") == 0) {
		handle_call(id, params);
	} else if (strcmp(method, "tools/list") == 0) {
		handle_list(id, params);
	} else if (strcmp(method, "initialize") == 0) {
		handle_initialize(id, params);
	} else if (strcmp(method, "ping") == 0) {
		begin_response(id);
		buf_puts(&out, "\"result\":{}}\n");
	} else {
		send_error(id, -32601, "method not found");
	}
	json_decref(msg);
}

/* Print usage to f. */
static void usage(FILE *f)
{
	fprintf(f,
	        "usage: " SERVER_NAME " [--tools N] [--page-size N] [--name-prefix S]\n"
	        "  --tools N        tools in tools/list (echo, blob, slow, then\n"
	        "                   filler tools; at least 3, default 3)\n"
	        "  --page-size N    tools per tools/list page (0 = one page)\n"
	        "  --name-prefix S  prefix for every tool's name ([A-Za-z0-9_.-],\n"
	        "                   calls accept the name with or without it)\n"
	        "  --no-fast        parse every message with jansson (by default\n"
	        "                   plain echo calls take a copy-through fast path)\n");
}

/* Parse the command line into opt. */
static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--tools") == 0 && i + 1 < argc) {
			opt.tools = strtol(argv[++i], NULL, 10);
		} else if (strcmp(a, "--page-size") == 0 && i + 1 < argc) {
			opt.page_size = strtol(argv[++i], NULL, 10);
		} else if (strcmp(a, "--no-fast") == 0) {
			opt.fast = false;
		} else if (strcmp(a, "--name-prefix") == 0 && i + 1 < argc) {
			opt.prefix = argv[++i];
		} else {
			usage(stderr);
			exit(2);
		}
	}
	if (opt.tools < 3)
		opt.tools = 3;
	if (opt.tools > 10000000 || opt.page_size < 0)
		die("bad --tools or --page-size");
	if (strlen(opt.prefix) > 100 ||
	    strspn(opt.prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                       "0123456789_.-") != strlen(opt.prefix))
		die("--name-prefix must be at most 100 of [A-Za-z0-9_.-]");
	snprintf(prefixed_echo, sizeof prefixed_echo, "%secho", opt.prefix);
}

/* Serve stdin until end of file. */
int main(int argc, char **argv)
{
	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	build_pages();

	struct buf in = { 0 };
	size_t scanned = 0; /* bytes of `in` known to hold no newline */
	bool eof = false;
	while (!eof || n_jobs > 0) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		int timeout = next_timeout_ms(now_ns());
		int r = eof ? poll(NULL, 0, timeout) : poll(&p, 1, timeout);
		if (r < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (!eof && r > 0) {
			buf_reserve(&in, 65536);
			ssize_t n = read(STDIN_FILENO, in.data + in.len, in.cap - in.len);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				die("read: %s", strerror(errno));
			if (n == 0)
				eof = true;
			if (n > 0)
				in.len += (size_t)n;
			size_t start = 0;
			char *nl;
			while ((nl = memchr(in.data + scanned, '\n',
			                    in.len - scanned)) != NULL) {
				size_t end = (size_t)(nl - in.data);
				if (end > start)
					handle_line(in.data + start, end - start);
				start = end + 1;
				scanned = start;
			}
			memmove(in.data, in.data + start, in.len - start);
			in.len -= start;
			scanned = in.len;
		}
		run_timers(now_ns());
		if (out.len)
			flush_out();
	}
	return 0;
}
