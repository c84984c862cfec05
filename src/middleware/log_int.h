/*
 * log_int.h - the parts of the "log" module shared between its files:
 * the lines (log.c), sinks and audit files (log_sink.c), the hash chain
 * (audit.c) and syslog (log_syslog.c). Not a public interface (the unit
 * tests use it): see include/mw_log.h. Redaction is the core's
 * (include/redact.h): the recorder uses it too.
 */
#ifndef MCPC_LOG_INT_H
#define MCPC_LOG_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "middleware.h"
#include "mw_log.h"

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

/* ---- sinks (log_sink.c) ---- */

/*
 * Where lines go: an audit file, shared by every module that names the
 * same file, or mcp-chain's stderr, shared by every module writing there.
 * Lines are queued in the sink and written together, with one write(2),
 * before the loop next waits (an ev_prepare watcher on EV_DEFAULT), at
 * once when more than LOG_SINK_FLUSH_AT bytes are queued, and when the
 * sink is reopened or released. A queued line is always whole, so lines
 * of modules sharing a sink never interleave.
 */
struct log_sink;

#define LOG_SINK_FLUSH_AT (64 * 1024)

/*
 * Opens PATH for appending (created 0600), or takes another reference to
 * the sink already open on that file. CHAIN: continue the file's hash
 * chain. Returns the sink, or NULL (logged).
 */
struct log_sink *log_sink_open(const char *path, bool chain);

/* Another reference to the sink on fd 2, or NULL when out of memory. */
struct log_sink *log_sink_stderr(void);

/* Drops a reference; the last one writes what is queued and closes. */
void log_sink_release(struct log_sink *s);

/*
 * Queues the compact JSON object TEXT (LEN bytes, borrowed, ending in
 * '}') as one line. A chained sink adds "prev" before the closing brace
 * and seals the line (audit_seal). Returns 0, or -1 when out of memory
 * or, for a chained sink, when TEXT does not end in '}' (the line is
 * lost; logged once until a line is queued again); a plain sink writes
 * the bytes it is given. Write errors are reported when the lines are
 * written, once until a write succeeds again.
 */
int log_sink_write_text(struct log_sink *s, const char *text, size_t len);

/* Writes what every sink has queued, now. */
void log_sink_flush_all(void);

/* ---- syslog (log_syslog.c) ---- */

/* The syslog facility named NAME ("user", "daemon", "local0"...), or -1. */
int log_syslog_facility(const char *name);

/* The facility names, for messages. */
extern const char log_syslog_names[];

/* Sets the identity "mcp-chain" with the pid for later lines. */
void log_syslog_open(void);

/* Sends TEXT (one line, no newline) at priority info to FACILITY. */
void log_syslog_write(int facility, const char *text);

/* ---- lines (log.c) ---- */

struct buf;

/*
 * What one line says, every pointer borrowed. The members are written in
 * this order, each left out when NULL; the numbers only for an exchange
 * (not for a notification).
 */
struct log_line {
	double time;               /* loop time the exchange began */
	bool notification;         /* "kind": "notification", no numbers */
	const char *from, *client, *protocol, *backend, *method, *name;
	json_t *id;
	const struct msg_val *id_text; /* when ID is NULL: the id as its JSON
				    * text (NULL or empty: no id) */
	const char *outcome;
	json_t *code;              /* an integer */
	json_t *message;           /* a string; cut to 256 bytes when written */
	json_int_t duration_us, bytes_in, bytes_out;
	json_t *params, *result, *error;
};

/*
 * Appends L as one compact JSON object (no newline) to OUT: the bytes
 * json_dumps(log_line_json(L), JSON_COMPACT) gives, without building the
 * object. A string member that is not UTF-8 is left out, as jansson
 * would. Returns 0, or -1 when out of memory (OUT as it was).
 */
int log_line_text(const struct log_line *l, struct buf *out);

/*
 * L as a jansson object (new reference; NULL when out of memory), for
 * redaction, which works on the tree. It shares L's id, code and bodies
 * (references, not copies): redact a json_deep_copy of it.
 */
json_t *log_line_json(const struct log_line *l);

/* json_dump_callback callback appending to the struct buf DATA. */
int log_dump_to_buf(const char *p, size_t n, void *data);

#endif
