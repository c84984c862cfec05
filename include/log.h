/*
 * log.h - leveled logging to stderr (or a sink file); never to stdout,
 * which belongs to the protocol.
 */
#ifndef MCPC_LOG_H
#define MCPC_LOG_H

#include <stdarg.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the threshold; messages above it are discarded. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Parses "error", "warn", "info" or "debug"; returns 0 or -1. */
int log_parse_level(const char *s, enum log_level *out);

/* Appends to FILE (created 0600) instead of stderr; returns 0 or -1. */
int log_open_file(const char *path);

/* True when LEVEL would be written (to skip costly formatting). */
int log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

/*
 * Writes one line as it is, without our time and level, when LEVEL passes:
 * for a child's stderr relayed, which carries its own prefix (and the
 * client reading ours adds its time).
 */
void log_bare(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The trace id (32 hex digits, copied) that the
 * lines written from now on end with, as " trace_id=ID"; NULL: none. The
 * chain sets it while it handles a traced request (trace.h).
 */
void log_set_trace_id(const char *id);

/* Logs at error level and returns -1, for "return log_fail(...)". */
int log_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
