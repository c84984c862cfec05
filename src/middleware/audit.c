/*
 * audit.c - the hash chain of an audit file, and its verification
 * ("mcp-chain audit verify FILE").
 *
 * A chained line is a compact JSON object whose last two members are
 * "prev" and "hash":
 *
 *     {"time":...,"outcome":"ok",...,"prev":"<64 hex>","hash":"<64 hex>"}
 *
 * "hash" is the SHA-256 of every byte of the line before ,"hash": and
 * "prev" is the "hash" of the line before it (64 zeros where a chain
 * begins). Editing a line breaks its own hash; removing, inserting or
 * moving a line breaks the "prev" of the line after it. Lines cut off the
 * end of a file leave no trace: keep the last hash (verify prints it)
 * somewhere else if that matters. The hashes carry no key, so they show
 * accidents and careless edits, not a writer who recomputes them all.
 */
#include "log_int.h"
#include "mw_log.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char seal_key[] = ",\"hash\":\"";
#define SEAL_KEY_LEN (sizeof seal_key - 1)
#define SEAL_BODY (AUDIT_SEAL_LEN - 1)   /* the seal without its newline */

/* Writes the SHA-256 of LEN bytes at DATA as hex ('?'s if it failed). */
static void sha256_hex(const void *data, size_t len, char hex[AUDIT_HEX])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) || n != 32) {
		memset(hex, '?', AUDIT_HEX - 1);   /* visibly broken, never valid */
		hex[AUDIT_HEX - 1] = '\0';
		return;
	}
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}

/* True when S holds exactly 64 lowercase hex digits. */
static bool is_hex64(const char *s)
{
	size_t i = 0;
	for (; s[i] && i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == 64 && s[i] == '\0';
}

/* Hashes the object and makes the seal that closes its line. */
void audit_seal(const char *text, size_t len, char hash[AUDIT_HEX],
		char seal[AUDIT_SEAL_LEN + 1])
{
	sha256_hex(text, len - 1, hash);
	snprintf(seal, AUDIT_SEAL_LEN + 1, "%s%s\"}\n", seal_key, hash);
}

/* Reads "prev" from the line, which must be one JSON object. */
static const char *read_prev(const char *line, size_t len, char prev[AUDIT_HEX])
{
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	const char *p = json_string_value(json_object_get(o, "prev"));
	const char *why = NULL;
	if (!json_is_object(o))
		why = "not a JSON object";
	else if (!p || !is_hex64(p))
		why = "no valid \"prev\" member";
	else
		memcpy(prev, p, AUDIT_HEX);
	json_decref(o);
	return why;
}

/* Checks one line's seal and content. */
const char *audit_check(const char *line, size_t len, char hash[AUDIT_HEX],
			char prev[AUDIT_HEX])
{
	char actual[AUDIT_HEX];
	if (len <= SEAL_BODY || memcmp(line + len - SEAL_BODY, seal_key, SEAL_KEY_LEN) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0)
		return "not a chained audit record (it does not end with a \"hash\" member)";
	memcpy(hash, line + len - SEAL_BODY + SEAL_KEY_LEN, 64);
	hash[64] = '\0';
	if (!is_hex64(hash))
		return "its \"hash\" is not 64 hex digits";
	sha256_hex(line, len - SEAL_BODY, actual);
	if (strcmp(actual, hash) != 0)
		return "its hash does not match its content: the line was changed";
	return read_prev(line, len, prev);
}

/* Start of the last line of a file that ends at END (its newline). */
static off_t last_line_start(int fd, off_t end)
{
	char buf[4096];
	off_t pos = end;
	while (pos > 0) {
		size_t n = pos < (off_t)sizeof buf ? (size_t)pos : sizeof buf;
		if (pread(fd, buf, n, pos - (off_t)n) != (ssize_t)n)
			return -1;
		char *nl = memrchr(buf, '\n', n);
		if (nl)
			return pos - (off_t)n + (nl - buf) + 1;
		pos -= (off_t)n;
	}
	return 0;
}

/* Reads the last line (without its newline) of a file of SIZE bytes. */
static char *read_last_line(int fd, off_t size, size_t *len, char *why, size_t whylen)
{
	char c;
	errno = 0;
	if (pread(fd, &c, 1, size - 1) != 1 || c != '\n') {
		snprintf(why, whylen, "its last line is incomplete (no newline at the end)");
		return NULL;
	}
	off_t start = last_line_start(fd, size - 1);
	*len = start < 0 ? 0 : (size_t)(size - 1 - start);
	char *line = start < 0 ? NULL : malloc(*len + 1);
	if (!line || pread(fd, line, *len, start) != (ssize_t)*len) {
		snprintf(why, whylen, "cannot read its last line: %s", strerror(errno ? errno : EIO));
		free(line);
		return NULL;
	}
	return line;
}

/* Reads the hash of the file's last line. */
int audit_tail(int fd, char hash[AUDIT_HEX], char *why, size_t whylen)
{
	struct stat st;
	char prev[AUDIT_HEX], h[AUDIT_HEX];
	size_t len;
	if (fstat(fd, &st) < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	if (st.st_size == 0)
		return 1;
	char *line = read_last_line(fd, st.st_size, &len, why, whylen);
	if (!line)
		return -1;
	const char *bad = audit_check(line, len, h, prev);
	free(line);
	if (bad) {
		snprintf(why, whylen, "its last line is broken: %s", bad);
		return -1;
	}
	memcpy(hash, h, AUDIT_HEX);
	return 0;
}

/* Where a verification has got to. */
struct verify {
	const char *path;
	FILE *report;
	size_t lineno;
	char hash[AUDIT_HEX];        /* of the line before */
	char first_prev[AUDIT_HEX];  /* "prev" of line 1 */
};

/* Reports the first broken line; returns 1. */
static int broken(struct verify *v, const char *why)
{
	fprintf(v->report, "%s:%zu: %s\n", v->path, v->lineno, why);
	return 1;
}

/* Checks one line read with its newline (N bytes). */
static int verify_line(struct verify *v, const char *line, size_t n)
{
	char hash[AUDIT_HEX], prev[AUDIT_HEX];
	if (line[n - 1] != '\n')
		return broken(v, "incomplete: no newline at the end "
			      "(the file was cut short or a write was interrupted)");
	const char *why = audit_check(line, n - 1, hash, prev);
	if (why)
		return broken(v, why);
	if (v->lineno == 1) {
		memcpy(v->first_prev, prev, AUDIT_HEX);
	} else if (strcmp(prev, v->hash) != 0) {
		fprintf(v->report, "%s:%zu: \"prev\" is not the hash of line %zu: "
			"a line was removed, inserted or moved here\n",
			v->path, v->lineno, v->lineno - 1);
		return 1;
	}
	memcpy(v->hash, hash, AUDIT_HEX);
	return 0;
}

/* Prints the summary of an intact file. */
static void summary(const struct verify *v)
{
	if (v->lineno == 0) {
		fprintf(v->report, "%s: empty, nothing to verify\n", v->path);
		return;
	}
	fprintf(v->report, "%s: %zu line%s, hash chain intact; last hash %s\n",
		v->path, v->lineno, v->lineno == 1 ? "" : "s", v->hash);
	if (strcmp(v->first_prev, AUDIT_GENESIS) != 0)
		fprintf(v->report, "%s: line 1 continues a chain from an earlier file "
			"(its \"prev\" is %s)\n", v->path, v->first_prev);
}

/* Verifies an audit file's hash chain. */
int audit_verify(const char *path, FILE *report)
{
	struct verify v = { .path = path, .report = report };
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(report, "%s: cannot read: %s\n", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (rc == 0 && (n = getline(&line, &cap, f)) > 0) {
		v.lineno++;
		rc = verify_line(&v, line, (size_t)n);
	}
	if (rc == 0 && ferror(f)) {
		fprintf(report, "%s: read error after line %zu\n", path, v.lineno);
		rc = -1;
	}
	if (rc == 0)
		summary(&v);
	free(line);
	fclose(f);
	return rc;
}
