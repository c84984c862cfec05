/*
 * log.c - leveled logging. Each line is written with one write(2) so
 * that lines from the loop never interleave; stdout is never touched.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level threshold = LOG_INFO;
static int log_fd = 2;

static char trace_id[33];   /* log_set_trace_id's, "" when none */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

/* Sets the threshold. */
void log_set_level(enum log_level level) { threshold = level; }

/* Returns the threshold. */
enum log_level log_get_level(void) { return threshold; }

/* True when LEVEL passes the threshold. */
int log_enabled(enum log_level level) { return level <= threshold; }

/* Parses a level name. */
int log_parse_level(const char *s, enum log_level *out)
{
	for (int i = 0; i <= LOG_DEBUG; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcmp(s, "warning") == 0) {
		*out = LOG_WARN;
		return 0;
	}
	return -1;
}

/* Redirects logging to an append-only file. */
int log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (log_fd != 2)
		close(log_fd);
	log_fd = fd;
	return 0;
}

/* A copy: the span it comes from may end while the line is still to come. */
void log_set_trace_id(const char *id)
{
	size_t n = id ? strnlen(id, 32) : 0;
	memcpy(trace_id, id ? id : "", n);
	trace_id[n] = '\0';
}

/* Formats the rest of LINE (N bytes used) and writes it whole; TRACE: with
 * the request's trace id at the end. */
static void write_line(char *line, size_t size, size_t n, const char *fmt, va_list ap,
		       bool trace)
{
	int m = vsnprintf(line + n, size - n, fmt, ap);
	if (m < 0)
		m = 0;
	n += (size_t)m;
	if (trace && trace_id[0] && n < size - 48)
		n += (size_t)snprintf(line + n, size - n, " trace_id=%s", trace_id);
	if (n > size - 2) {
		n = size - 5;
		memcpy(line + n, "...", 3);
		n += 3;
	}
	line[n++] = '\n';
	ssize_t w;
	do
		w = write(log_fd, line, n);
	while (w < 0 && errno == EINTR);
}

/* Formats one line "TIME mcp-chain LEVEL: message" and writes it whole. */
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	struct timespec ts;
	struct tm tm;
	int saved = errno;

	if (level > threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ mcp-chain %s: ",
			      ts.tv_nsec / 1000000, level_names[level]);
	write_line(line, sizeof line, n, fmt, ap, true);
	errno = saved;
}

/* Writes one line as it is. */
void log_bare(enum log_level level, const char *fmt, ...)
{
	char line[4096];
	va_list ap;
	int saved = errno;

	if (level > threshold)
		return;
	va_start(ap, fmt);
	write_line(line, sizeof line, 0, fmt, ap, false);
	va_end(ap);
	errno = saved;
}

/* Logs one line at LEVEL. */
void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

/* Logs at error level and returns -1. */
int log_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LOG_ERROR, fmt, ap);
	va_end(ap);
	return -1;
}
