/*
 * log_sink.c - audit files: opened for appending (created 0600), shared
 * by every log module that names the same file so that a hash chain
 * never forks (two modules, or the old and new pipeline across a reload),
 * and reopened on SIGHUP once logrotate has moved the file away.
 *
 * Each line is written with one writev on an O_APPEND descriptor, so
 * lines never interleave with another writer's.
 */
#include "log_int.h"
#include "mw_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"

struct log_sink {
	struct log_sink *next;   /* every open sink */
	int refs;
	char *path;
	int fd;
	bool chain;
	bool failing;            /* the last write failed (logged once) */
	dev_t dev;
	ino_t ino;
	char prev[AUDIT_HEX];    /* hash of the last line (chain) */
};

static struct log_sink *sinks;

/* Opens PATH to append to (created 0600); readable too for a chain. */
static int open_append(const char *path, bool chain)
{
	return open(path, (chain ? O_RDWR : O_WRONLY) | O_APPEND | O_CREAT |
		    O_CLOEXEC | O_NOCTTY, 0600);
}

/* Writes TEXT and TAIL with one writev, finishing a short write. */
int log_write_line(int fd, const char *text, size_t len, const char *tail,
		   size_t tlen)
{
	struct iovec iov[2] = { { (void *)text, len }, { (void *)tail, tlen } };
	struct iovec *v = iov;
	int cnt = 2;
	while (cnt > 0) {
		ssize_t w = writev(fd, v, cnt);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		size_t left = (size_t)w;
		for (; cnt > 0 && left >= v->iov_len; v++, cnt--)
			left -= v->iov_len;
		if (cnt > 0) {
			v->iov_base = (char *)v->iov_base + left;
			v->iov_len -= left;
		}
	}
	return 0;
}

/* The sink open on the file ST describes, or NULL. */
static struct log_sink *find_sink(const struct stat *st)
{
	for (struct log_sink *s = sinks; s; s = s->next)
		if (s->dev == st->st_dev && s->ino == st->st_ino)
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
	s->fd = fd;
	s->chain = chain;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->refs = 1;
	s->next = sinks;
	sinks = s;
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

/* Drops a reference, closing the file with the last. */
void log_sink_release(struct log_sink *s)
{
	if (!s || --s->refs > 0)
		return;
	for (struct log_sink **pp = &sinks; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	close(s->fd);
	free(s->path);
	free(s);
}

/* Logs a failed write once until writes succeed again; returns -1. */
static int write_failed(struct log_sink *s, const char *why)
{
	if (!s->failing)
		log_error("log: cannot write to audit file %s: %s (not logged again "
			  "until a write succeeds)", s->path, why);
	s->failing = true;
	return -1;
}

/* Appends one line, sealed when chained. */
int log_sink_write(struct log_sink *s, json_t *line)
{
	char hash[AUDIT_HEX], seal[AUDIT_SEAL_LEN + 1];
	if (s->chain)
		json_object_set_new(line, "prev", json_string(s->prev));
	char *text = json_dumps(line, JSON_COMPACT);
	if (!text)
		return write_failed(s, "cannot serialize the line");
	size_t len = strlen(text);
	int rc;
	if (s->chain) {
		audit_seal(text, len, hash, seal);
		rc = log_write_line(s->fd, text, len - 1, seal, AUDIT_SEAL_LEN);
	} else {
		rc = log_write_line(s->fd, text, len, "\n", 1);
	}
	free(text);
	if (rc < 0)
		return write_failed(s, strerror(errno));
	if (s->chain)
		memcpy(s->prev, hash, AUDIT_HEX);
	if (s->failing)
		log_info("log: writing to audit file %s again", s->path);
	s->failing = false;
	return 0;
}

/* Reopens S at its path if another file is there now. */
static int sink_reopen(struct log_sink *s)
{
	struct stat st;
	char why[256];
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
		if (sink_reopen(s) < 0)
			rc = -1;
	return rc;
}
