/*
 * log_int.h - the parts of the "log" module shared between its files:
 * audit files (log_sink.c), the hash chain (audit.c) and redaction
 * (log_redact.c). Not a public interface: see include/mw_log.h.
 */
#ifndef MCPC_LOG_INT_H
#define MCPC_LOG_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "middleware.h"

/* ---- the hash chain (audit.c) ---- */

#define AUDIT_HEX 65          /* 64 lowercase hex digits and a NUL */
#define AUDIT_SEAL_LEN 76     /* ,"hash":"<64 hex>"}\n */
#define AUDIT_GENESIS \
	"0000000000000000000000000000000000000000000000000000000000000000"

/*
 * Seals the compact JSON object TEXT (LEN bytes, ending in '}', holding
 * "prev" already): HASH gets the SHA-256 of TEXT without its closing
 * brace, SEAL the AUDIT_SEAL_LEN bytes (plus a NUL) that replace that
 * brace on the written line.
 */
void audit_seal(const char *text, size_t len, char hash[AUDIT_HEX],
		char seal[AUDIT_SEAL_LEN + 1]);

/*
 * Checks one sealed line LINE (LEN bytes, no newline): well-formed, its
 * hash matching its content. Fills HASH and PREV. Returns NULL, or why
 * the line is broken (a static string).
 */
const char *audit_check(const char *line, size_t len, char hash[AUDIT_HEX],
			char prev[AUDIT_HEX]);

/*
 * Reads the hash of the last line of the audit file open on FD into
 * HASH. Returns 0, 1 for an empty file (HASH untouched), or -1 with the
 * reason in WHY (WHYLEN bytes).
 */
int audit_tail(int fd, char hash[AUDIT_HEX], char *why, size_t whylen);

/* ---- audit files (log_sink.c) ---- */

/* An open audit file, shared by every module that names the same file. */
struct log_sink;

/*
 * Opens PATH for appending (created 0600), or takes another reference to
 * the sink already open on that file. CHAIN: continue the file's hash
 * chain. Returns the sink, or NULL (logged).
 */
struct log_sink *log_sink_open(const char *path, bool chain);

/* Drops a reference; the last one closes the file. */
void log_sink_release(struct log_sink *s);

/*
 * Appends LINE (borrowed; gets a "prev" member when chained) as one
 * line. Returns 0 or -1 (logged once until a write succeeds again).
 */
int log_sink_write(struct log_sink *s, json_t *line);

/*
 * Writes TEXT (LEN bytes) then TAIL (TLEN bytes) to FD with one writev,
 * finishing a short write. Returns 0 or -1 (errno set; EAGAIN is not
 * waited for).
 */
int log_write_line(int fd, const char *text, size_t len, const char *tail,
		   size_t tlen);

/* ---- syslog (log_syslog.c) ---- */

/* The syslog facility named NAME ("user", "daemon", "local0"...), or -1. */
int log_syslog_facility(const char *name);

/* The facility names, for messages. */
extern const char log_syslog_names[];

/* Sets the identity "mcp-chain" with the pid for later lines. */
void log_syslog_open(void);

/* Sends TEXT (one line, no newline) at priority info to FACILITY. */
void log_syslog_write(int facility, const char *text);

/* ---- redaction (log_redact.c) ---- */

struct log_redact;

/*
 * Parses the "redact" option OPT (borrowed; NULL: none) into *OUT (NULL
 * when nothing is to be redacted). Reports problems at /redact/...
 * through B. Returns 0, or -1 after at least one mw_error.
 */
int log_redact_parse(json_t *opt, struct mw_build *b, struct log_redact **out);

/*
 * Redacts LINE in place: members named by "keys" inside its bodies
 * ("params", "result", "error"), and inside body strings that hold a
 * JSON document, become the replacement; every match of a
 * pattern in any string of the line (and in member names inside bodies)
 * is replaced. A string that cannot be checked is replaced whole.
 */
void log_redact_line(const struct log_redact *r, json_t *line);

/* Frees R (NULL is fine). */
void log_redact_free(struct log_redact *r);

#endif
