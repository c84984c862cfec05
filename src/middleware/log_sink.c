/*
 * log_sink.c - where audit lines go: audit files, opened for appending
 * (created 0600), shared by every log module that names the same file so
 * that a hash chain never forks (two modules, or the old and new pipeline
 * across a reload), and reopened on SIGHUP once logrotate has moved the
 * file away; and mcp-chain's stderr, shared the same way.
 *
 * Lines are queued per sink and written with one write(2) per loop
 * iteration, by an ev_prepare watcher (libev runs it just before the loop
 * waits), so a line costs a copy rather than a system call. A queue is
 * also written as soon as it passes LOG_SINK_FLUSH_AT bytes, before a
 * reopen, when its sink is released, and at exit. A queue only holds
 * whole lines and files are O_APPEND, so lines never interleave with
 * another writer's.
 */
#include "log_int.h"
#include "mw_log.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

#define KEEP_MAX (256 * 1024)   /* queue memory kept once written */

struct log_sink {
	struct log_sink *next;   /* every open sink */
	int refs;
	char *path;              /* NULL for stderr */
	int fd;
	bool chain;
	bool failing;            /* the last write failed (logged once) */
	bool lost;               /* the last line did not fit in memory (logged once) */
	dev_t dev;
	ino_t ino;
	struct buf out;          /* whole lines not yet written */
	char prev[AUDIT_HEX];    /* hash of the last line queued (chain) */
	char written[AUDIT_HEX]; /* hash of the last line written (chain) */
};

static struct log_sink *sinks;
static struct log_sink *stderr_sink;
static ev_prepare flush_hook;

static const char prev_key[] = ",\"prev\":\"";
#define PREV_KEY_LEN (sizeof prev_key - 1)

/* ---- writing queued lines ---- */

/* Writes N bytes at P to FD, finishing short writes; returns how many
 * were written (fewer than N with errno set when a write failed). */
static size_t write_some(int fd, const char *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, p + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			break;
		}
		done += (size_t)w;
	}
	return done;
}

/* Logs a failed write once until writes succeed again. */
static void write_failed(struct log_sink *s, const char *why)
{
	if (!s->failing)
		log_error("log: cannot write to audit file %s: %s (not logged again "
			  "until a write succeeds)", s->path, why);
	s->failing = true;
}

/*
 * After W bytes of the queued lines Q made it to a chained file: the
 * last whole line written is where the chain continues (its hash ends
 * it: ,"hash":"<64 hex>"}).
 */
static void chain_after_short_write(struct log_sink *s, const char *q, size_t w)
{
	const char *nl = w ? memrchr(q, '\n', w) : NULL;
	if (nl && nl - q >= 66)
		memcpy(s->written, nl - 66, AUDIT_HEX - 1);
	memcpy(s->prev, s->written, AUDIT_HEX);
}

/*
 * Writes S's queue to its file. Lines that could not be written are lost
 * (reported once), and a chain goes on from the last line written, so
 * the file stays verifiable.
 */
static void flush_file(struct log_sink *s)
{
	const char *q = s->out.data + s->out.off;
	size_t n = buf_pending(&s->out);
	size_t w = write_some(s->fd, q, n);
	if (w < n) {
		int err = errno;
		if (s->chain)
			chain_after_short_write(s, q, w);
		write_failed(s, strerror(err));
	} else {
		memcpy(s->written, s->prev, AUDIT_HEX);
		if (s->failing)
			log_info("log: writing to audit file %s again", s->path);
		s->failing = false;
	}
	buf_consume(&s->out, n);
}

/*
 * Writes the stderr queue. Lines that would block are dropped, as they
 * were when written one by one; a line begun is kept to be finished
 * next time, so that the next line does not run into it.
 */
static void flush_stderr(struct log_sink *s)
{
	const char *q = s->out.data + s->out.off;
	size_t n = buf_pending(&s->out);
	size_t w = write_some(s->fd, q, n);
	size_t keep = 0;
	if (w < n && w > 0 && q[w - 1] != '\n') {
		const char *nl = memchr(q + w, '\n', n - w);
		keep = nl ? (size_t)(nl - (q + w)) + 1 : 0;
	}
	buf_consume(&s->out, w);
	if (keep)
		s->out.len = s->out.off + keep;
	else
		buf_consume(&s->out, n - w);
}

/* Writes S's queue now. */
static void sink_flush(struct log_sink *s)
{
	if (buf_pending(&s->out) == 0)
		return;
	if (s->path)
		flush_file(s);
	else
		flush_stderr(s);
	buf_shrink(&s->out, KEEP_MAX);
}

/* Writes every queue. */
void log_sink_flush_all(void)
{
	for (struct log_sink *s = sinks; s; s = s->next)
		sink_flush(s);
}

/* Before the loop waits: the lines of this iteration go out. */
static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	log_sink_flush_all();
}

/* ---- queueing lines ---- */

/* Queues TEXT and a newline. */
static int queue_plain(struct log_sink *s, const char *text, size_t len)
{
	if (s->out.cap - s->out.len < len + 1 && buf_reserve(&s->out, len + 1) < 0)
		return -1;
	memcpy(s->out.data + s->out.len, text, len);
	s->out.len += len;
	s->out.data[s->out.len++] = '\n';
	return 0;
}

/*
 * Queues TEXT with ,"prev":"<hash>" before its closing brace, sealed:
 * the bytes json_dumps gave for the object with a last member "prev".
 */
static int queue_sealed(struct log_sink *s, const char *text, size_t len)
{
	char hash[AUDIT_HEX], seal[AUDIT_SEAL_LEN + 1];
	if (len < 2 || text[len - 1] != '}' ||
	    buf_reserve(&s->out, len + PREV_KEY_LEN + 64 + 1 + AUDIT_SEAL_LEN) < 0)
		return -1;
	char *line = s->out.data + s->out.len, *p = line;
	memcpy(p, text, len - 1);
	p += len - 1;
	memcpy(p, prev_key, PREV_KEY_LEN);
	p += PREV_KEY_LEN;
	memcpy(p, s->prev, 64);
	p += 64;
	*p++ = '"';
	*p++ = '}';
	audit_seal(line, (size_t)(p - line), hash, seal);
	memcpy(p - 1, seal, AUDIT_SEAL_LEN);   /* the seal replaces the brace */
	s->out.len += (size_t)(p - 1 - line) + AUDIT_SEAL_LEN;
	memcpy(s->prev, hash, AUDIT_HEX);
	return 0;
}

/* Queues one line; writes the queue once it is large. */
int log_sink_write_text(struct log_sink *s, const char *text, size_t len)
{
	int rc = s->chain ? queue_sealed(s, text, len) : queue_plain(s, text, len);
	if (rc < 0) {
		if (!s->lost)
			log_error("log: out of memory: an audit line for %s was lost "
				  "(not logged again until a line fits)", s->path ? s->path : "stderr");
		s->lost = true;
		return -1;
	}
	s->lost = false;
	if (buf_pending(&s->out) > LOG_SINK_FLUSH_AT)
		sink_flush(s);
	return 0;
}

/* ---- the list of sinks ---- */

/*
 * Adds S to the list. The first sink starts the flush watcher, unref'd so
 * that it never keeps the loop alive, and the first ever registers the
 * exit flush (for a module that a leftover exchange keeps alive).
 */
static void sink_link(struct log_sink *s)
{
	static bool at_exit;
	if (!at_exit)
		at_exit = atexit(log_sink_flush_all) == 0;
	if (!sinks) {
		ev_prepare_init(&flush_hook, on_prepare);
		ev_prepare_start(EV_DEFAULT, &flush_hook);
		ev_unref(EV_DEFAULT);
	}
	s->next = sinks;
	sinks = s;
}

/* Removes S from the list; the last one stops the flush watcher. */
static void sink_unlink(struct log_sink *s)
{
	for (struct log_sink **pp = &sinks; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	if (!sinks && ev_is_active(&flush_hook)) {
		ev_ref(EV_DEFAULT);   /* as ev_unref took it at start */
		ev_prepare_stop(EV_DEFAULT, &flush_hook);
	}
}

/* ---- audit files ---- */

/* Opens PATH to append to (created 0600); readable too for a chain. */
static int open_append(const char *path, bool chain)
{
	return open(path, (chain ? O_RDWR : O_WRONLY) | O_APPEND | O_CREAT |
		    O_CLOEXEC | O_NOCTTY, 0600);
}

/* The file sink open on the file ST describes, or NULL. */
static struct log_sink *find_sink(const struct stat *st)
{
	for (struct log_sink *s = sinks; s; s = s->next)
		if (s->path && s->dev == st->st_dev && s->ino == st->st_ino)
			return s;
	return NULL;
}

/* Another reference to S for a module that wants CHAIN (or NULL). */
static struct log_sink *share(struct log_sink *s, const char *path, bool chain)
{
	if (s->chain != chain) {
		log_error("log: %s is already written %s a hash chain by another log "
			  "module; give every module on one file the same \"chain\"",
			  path, s->chain ? "with" : "without");
		return NULL;
	}
	s->refs++;
	return s;
}

/* A new sink for the file open on FD; closes FD on failure. */
static struct log_sink *sink_new(const char *path, int fd, const struct stat *st,
				 bool chain)
{
	char why[256];
	struct log_sink *s = calloc(1, sizeof *s);
	if (s)
		s->path = strdup(path);
	if (!s || !s->path) {
		log_error("log: %s: out of memory", path);
		goto fail;
	}
	memcpy(s->prev, AUDIT_GENESIS, AUDIT_HEX);
	if (chain && audit_tail(fd, s->prev, why, sizeof why) < 0) {
		log_error("log: cannot continue the hash chain of %s: %s; move the file "
			  "away (\"mcp-chain audit verify\" shows where it breaks)", path, why);
		goto fail;
	}
	memcpy(s->written, s->prev, AUDIT_HEX);
	s->fd = fd;
	s->chain = chain;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->refs = 1;
	sink_link(s);
	return s;
fail:
	close(fd);
	if (s)
		free(s->path);
	free(s);
	return NULL;
}

/* Opens or shares the sink for PATH. */
struct log_sink *log_sink_open(const char *path, bool chain)
{
	struct stat st;
	int fd = open_append(path, chain);
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_error("log: cannot open audit file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct log_sink *s = find_sink(&st);
	if (s) {
		close(fd);
		return share(s, path, chain);
	}
	return sink_new(path, fd, &st, chain);
}

/* The shared sink on fd 2. */
struct log_sink *log_sink_stderr(void)
{
	if (stderr_sink) {
		stderr_sink->refs++;
		return stderr_sink;
	}
	struct log_sink *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->fd = 2;
	s->refs = 1;
	sink_link(s);
	stderr_sink = s;
	return s;
}

/* Drops a reference; the last writes the queue and closes the file. */
void log_sink_release(struct log_sink *s)
{
	if (!s || --s->refs > 0)
		return;
	sink_flush(s);
	sink_unlink(s);
	if (s == stderr_sink)
		stderr_sink = NULL;
	else
		close(s->fd);
	buf_release(&s->out);
	free(s->path);
	free(s);
}

/* Reopens S at its path if another file is there now. */
static int sink_reopen(struct log_sink *s)
{
	struct stat st;
	char why[256];
	sink_flush(s);   /* what was queued belongs to the old file */
	int fd = open_append(s->path, s->chain);
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_error("log: cannot reopen %s: %s (still writing to the old file)",
			  s->path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_dev == s->dev && st.st_ino == s->ino) {
		close(fd);
		return 0;
	}
	/* an empty new file continues the chain of the one moved away */
	if (s->chain && audit_tail(fd, s->prev, why, sizeof why) < 0) {
		log_error("log: cannot continue the hash chain in the new %s: %s "
			  "(still writing to the old file)", s->path, why);
		close(fd);
		return -1;
	}
	memcpy(s->written, s->prev, AUDIT_HEX);
	close(s->fd);
	s->fd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	log_info("log: reopened audit file %s", s->path);
	return 0;
}

/* Reopens every audit file (SIGHUP). */
int mw_log_reopen_all(void)
{
	int rc = 0;
	for (struct log_sink *s = sinks; s; s = s->next)
		if (s->path && sink_reopen(s) < 0)
			rc = -1;
	return rc;
}
