/*
 * oauth_store.c - where an upstream's OAuth registration and tokens are
 * kept (see oauth_client.h): one JSON file per upstream name and issuer,
 * NAME.HASH.json in $XDG_STATE_HOME/mcp-chain/oauth (HASH: the first 64
 * bits of SHA-256 of the issuer, in hex), the directory 0700, the file
 * 0600, written to a temporary file and renamed over the old one. Nothing
 * here logs what a file holds.
 */
#include "oauth_client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "seal.h"

#define NAME_MAX_ENC 200

char *oauth_store_dir(void)
{
	const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char *d = NULL;
	int rc;
	if (x && x[0] == '/')
		rc = asprintf(&d, "%s/mcp-chain/oauth", x);
	else if (home && home[0])
		rc = asprintf(&d, "%s/.local/state/mcp-chain/oauth", home);
	else
		return NULL;
	return rc < 0 ? NULL : d;
}

/* NAME with every byte but A-Z a-z 0-9 _ - as %XX (no '.', no '/'). */
static int encode_name(const char *name, char *out, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
		if (o + (plain ? 1 : 3) >= n)
			return -1;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = 0;
	return o ? 0 : -1;
}

/* The file for NAME at ISSUER: a new string, or NULL. */
static char *file_for(const char *dir, const char *name, const char *issuer)
{
	char enc[NAME_MAX_ENC], hex[17];
	unsigned char h[SHA256_DIGEST_LENGTH];
	if (encode_name(name, enc, sizeof enc) < 0)
		return NULL;
	SHA256((const unsigned char *)issuer, strlen(issuer), h);
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	char *f = NULL;
	return asprintf(&f, "%s/%s.%s.json", dir, enc, hex) < 0 ? NULL : f;
}

/* True when file name D is one of NAME's (ENC: NAME encoded). */
static bool is_ours(const char *d, const char *enc)
{
	size_t el = strlen(enc);
	return strncmp(d, enc, el) == 0 && d[el] == '.' && strlen(d + el + 1) == 16 + 5 &&
	       strspn(d + el + 1, "0123456789abcdef") == 16 && strcmp(d + el + 17, ".json") == 0;
}

/* Makes DIR (and its parents) with mode 0700 for what is created; 0 or -1. */
static int make_dirs(const char *dir)
{
	char p[4096];
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
		return -1;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -1;
	return chmod(p, 0700);
}

/* Sets KEY of O to the string V when V is not NULL. */
static void put(json_t *o, const char *key, const char *v)
{
	if (v)
		json_object_set_new(o, key, json_string(v));
}

/* T for upstream NAME as the store's JSON text (new string), or NULL. */
static char *tokens_text(const char *name, const struct oauth_tokens *t)
{
	json_t *c = json_object(), *j = json_object();
	put(c, "client_id", t->client_id);
	put(c, "client_secret", t->client_secret);
	put(c, "auth_method", t->auth_method);
	put(c, "redirect_uri", t->redirect_uri);
	json_object_set_new(c, "registered", json_boolean(t->registered));
	json_object_set_new(j, "version", json_integer(1));
	put(j, "upstream", name);
	put(j, "url", t->url);
	put(j, "issuer", t->issuer);
	put(j, "token_endpoint", t->token_endpoint);
	json_object_set_new(j, "client", c);
	put(j, "resource", t->resource);
	put(j, "access_token", t->access_token);
	put(j, "refresh_token", t->refresh_token);
	put(j, "scope", t->scope);
	json_object_set_new(j, "expires_at", json_integer((json_int_t)t->expires_at));
	json_object_set_new(j, "saved_at", json_integer((json_int_t)time(NULL)));
	char *text = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	return text;
}

/* Wipes and frees TEXT. */
static void wipe(char *text)
{
	if (text) {
		OPENSSL_cleanse(text, strlen(text));
		free(text);
	}
}

/* Writes TEXT as FILE in DIR (made 0700): a 0600 temporary file renamed
 * over it. 0, or -1 with WHY. */
static int write_atomic(const char *dir, const char *file, const char *text, char *why, size_t n)
{
	char *tmp = NULL;
	int fd = -1;
	if (make_dirs(dir) < 0) {
		snprintf(why, n, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (asprintf(&tmp, "%s.tmp%ld", file, (long)getpid()) < 0) {
		snprintf(why, n, "out of memory");
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t len = strlen(text), off = 0;
	while (fd >= 0 && off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (fd < 0 || off < len || fchmod(fd, 0600) < 0 || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, file) < 0) {
		snprintf(why, n, "cannot write %s: %s", file, strerror(errno));
		if (fd >= 0)
			close(fd);   /* (may have been closed: harmless EBADF) */
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int oauth_store_save(const char *name, const struct oauth_tokens *t, char *why, size_t n)
{
	char *dir = oauth_store_dir(), *file = NULL, *text = NULL;
	int rc = -1;
	if (!dir) {
		snprintf(why, n, "no state directory ($XDG_STATE_HOME and $HOME are unset)");
		return -1;
	}
	if (!t->issuer || !(file = file_for(dir, name, t->issuer))) {
		snprintf(why, n, "cannot name the store's file for \"%s\"", name);
		goto out;
	}
	if (!(text = tokens_text(name, t))) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	rc = write_atomic(dir, file, text, why, n);
out:
	wipe(text);
	free(file);
	free(dir);
	return rc;
}

/* Copies string KEY of O into *DST (replaced; NULL when absent). */
static int get(json_t *o, const char *key, char **dst)
{
	const char *v = json_string_value(json_object_get(o, key));
	free(*dst);
	*dst = v ? strdup(v) : NULL;
	return v && !*dst ? -1 : 0;
}

/* Reads the store's JSON J (stolen) of FILE into T; 1, or -1 with WHY. */
static int read_json(const char *file, json_t *j, struct oauth_tokens *t, char *why, size_t n)
{
	json_t *c = json_object_get(j, "client");
	memset(t, 0, sizeof *t);
	int rc = get(j, "url", &t->url) | get(j, "issuer", &t->issuer) |
		 get(j, "token_endpoint", &t->token_endpoint) | get(c, "client_id", &t->client_id) |
		 get(c, "client_secret", &t->client_secret) | get(c, "auth_method", &t->auth_method) |
		 get(c, "redirect_uri", &t->redirect_uri) | get(j, "resource", &t->resource) |
		 get(j, "access_token", &t->access_token) |
		 get(j, "refresh_token", &t->refresh_token) | get(j, "scope", &t->scope);
	t->registered = json_is_true(json_object_get(c, "registered"));
	t->expires_at = json_number_value(json_object_get(j, "expires_at"));
	json_decref(j);
	if (rc || !t->issuer) {
		snprintf(why, n, "%s: %s", file, rc ? "out of memory" : "no issuer");
		oauth_tokens_release(t);
		return -1;
	}
	return 1;
}

/* Reads FILE into T; 1, or -1 with WHY. */
static int read_file(const char *file, struct oauth_tokens *t, char *why, size_t n)
{
	json_error_t e;
	json_t *j = json_load_file(file, 0, &e);
	if (!json_is_object(j)) {
		snprintf(why, n, "%s: %s", file, j ? "not a JSON object" : e.text);
		json_decref(j);
		return -1;
	}
	return read_json(file, j, t, why, n);
}

int oauth_store_load(const char *name, const char *issuer, struct oauth_tokens *t,
		     char *why, size_t n)
{
	char *dir = oauth_store_dir(), *best = NULL;
	char enc[NAME_MAX_ENC];
	memset(t, 0, sizeof *t);
	if (!dir || encode_name(name, enc, sizeof enc) < 0) {
		free(dir);
		return 0;
	}
	if (issuer) {
		best = file_for(dir, name, issuer);
		if (best && access(best, F_OK) < 0) {
			free(best);
			best = NULL;
		}
	} else {
		DIR *d = opendir(dir);
		struct dirent *de;
		double newest = -1;
		while (d && (de = readdir(d))) {
			char *p;
			struct stat st;
			if (!is_ours(de->d_name, enc) || asprintf(&p, "%s/%s", dir, de->d_name) < 0)
				continue;
			double m = stat(p, &st) == 0 ? (double)st.st_mtim.tv_sec +
							 st.st_mtim.tv_nsec / 1e9 : -1;
			if (m > newest) {
				newest = m;
				free(best);
				best = p;
			} else {
				free(p);
			}
		}
		if (d)
			closedir(d);
	}
	int rc = best ? read_file(best, t, why, n) : 0;
	free(best);
	free(dir);
	return rc;
}

int oauth_store_remove(const char *name, char *why, size_t n)
{
	char *dir = oauth_store_dir();
	char enc[NAME_MAX_ENC];
	int count = 0;
	bool failed = false;
	if (!dir || encode_name(name, enc, sizeof enc) < 0) {
		free(dir);
		return 0;
	}
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *p;
		if (!is_ours(de->d_name, enc) || asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			continue;
		if (unlink(p) == 0) {
			count++;
		} else if (!failed) {
			snprintf(why, n, "cannot remove %s: %s", p, strerror(errno));
			failed = true;
		}
		free(p);
	}
	if (d)
		closedir(d);
	free(dir);
	return failed ? -1 : count;
}

/* ---- one set of tokens per principal, sealed (oauth "perPrincipal") ---- */

/* SUBJECT (32 bytes) in hex into HEX (65 bytes). */
static void subject_hex(const unsigned char *subject, char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", subject[i]);
}

/* The associated data that binds a sealed file to its upstream NAME, its
 * ISSUER and its principal SHEX: a new string, or NULL. */
static char *sealed_aad(const char *name, const char *issuer, const char *shex)
{
	char *a = NULL;
	return asprintf(&a, "mcp-chain oauth store\n%s\n%s\n%s", name, issuer, shex) < 0 ? NULL : a;
}

/* True when file name D is one of NAME's (ENC: NAME encoded) for the
 * principal SHEX: ENC.ISSUERHASH.SHEX.json. */
static bool is_principals(const char *d, const char *enc, const char *shex)
{
	size_t el = strlen(enc);
	if (strncmp(d, enc, el) != 0 || d[el] != '.')
		return false;
	d += el + 1;
	return strlen(d) == 16 + 1 + 64 + 5 && strspn(d, "0123456789abcdef") == 16 &&
	       d[16] == '.' && strncmp(d + 17, shex, 64) == 0 && strcmp(d + 81, ".json") == 0;
}

int oauth_store_save_for(const char *name, const unsigned char subject[32],
			 const unsigned char key[32], const struct oauth_tokens *t,
			 char *why, size_t n)
{
	char *dir = oauth_store_dir(), *base = NULL, *file = NULL, *text = NULL, *aad = NULL;
	char *sealed = NULL, *out = NULL, shex[65];
	int rc = -1;
	if (!dir) {
		snprintf(why, n, "no state directory ($XDG_STATE_HOME and $HOME are unset)");
		return -1;
	}
	subject_hex(subject, shex);
	if (!t->issuer || !(base = file_for(dir, name, t->issuer)) ||
	    asprintf(&file, "%.*s.%s.json", (int)(strlen(base) - 5), base, shex) < 0) {
		file = NULL;
		snprintf(why, n, "cannot name the store's file for \"%s\"", name);
		goto out;
	}
	if (!(text = tokens_text(name, t)) || !(aad = sealed_aad(name, t->issuer, shex)) ||
	    !(sealed = seal_text(key, aad, strlen(aad), text, strlen(text)))) {
		snprintf(why, n, "cannot seal the tokens (out of memory?)");
		goto out;
	}
	json_t *j = json_pack("{s:i,s:s,s:s,s:s,s:s}", "version", 1, "upstream", name,
			      "issuer", t->issuer, "subject", shex, "sealed", sealed);
	out = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (!out) {
		snprintf(why, n, "out of memory");
		goto out;
	}
	rc = write_atomic(dir, file, out, why, n);
out:
	wipe(text);
	free(out);
	free(sealed);
	free(aad);
	free(file);
	free(base);
	free(dir);
	return rc;
}

/* Opens FILE, sealed for NAME and SHEX under KEY, into T: 1, or -1 with WHY. */
static int read_sealed(const char *file, const char *name, const char *shex,
		       const unsigned char key[32], struct oauth_tokens *t, char *why, size_t n)
{
	json_error_t e;
	json_t *j = json_load_file(file, 0, &e);
	const char *iss = json_string_value(json_object_get(j, "issuer"));
	const char *box = json_string_value(json_object_get(j, "sealed"));
	char *aad = iss ? sealed_aad(name, iss, shex) : NULL;
	unsigned char *plain = NULL;
	size_t len = 0;
	int rc = -1;
	if (!json_is_object(j) || !iss || !box)
		snprintf(why, n, "%s: %s", file, j ? "not a sealed token file" : e.text);
	else if (!aad || unseal_text(key, aad, strlen(aad), box, &plain, &len) < 0)
		snprintf(why, n, "%s: cannot be opened with tokenStore's key (another key, or "
			 "altered)", file);
	else
		rc = 0;
	json_decref(j);
	free(aad);
	if (rc < 0)
		return -1;
	json_t *inner = json_loadb((const char *)plain, len, 0, &e);
	OPENSSL_cleanse(plain, len);
	free(plain);
	if (!json_is_object(inner)) {
		json_decref(inner);
		snprintf(why, n, "%s: not a token file inside", file);
		return -1;
	}
	return read_json(file, inner, t, why, n);
}

int oauth_store_load_for(const char *name, const unsigned char subject[32],
			 const unsigned char key[32], struct oauth_tokens *t, char *why, size_t n)
{
	char *dir = oauth_store_dir(), *best = NULL, enc[NAME_MAX_ENC], shex[65];
	memset(t, 0, sizeof *t);
	if (!dir || encode_name(name, enc, sizeof enc) < 0) {
		free(dir);
		return 0;
	}
	subject_hex(subject, shex);
	DIR *d = opendir(dir);
	struct dirent *de;
	double newest = -1;
	while (d && (de = readdir(d))) {
		char *p;
		struct stat st;
		if (!is_principals(de->d_name, enc, shex) ||
		    asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			continue;
		double m = stat(p, &st) == 0 ? (double)st.st_mtim.tv_sec +
						 st.st_mtim.tv_nsec / 1e9 : -1;
		if (m > newest) {
			newest = m;
			free(best);
			best = p;
		} else {
			free(p);
		}
	}
	if (d)
		closedir(d);
	int rc = best ? read_sealed(best, name, shex, key, t, why, n) : 0;
	free(best);
	free(dir);
	return rc;
}

int oauth_store_remove_for(const char *name, const unsigned char subject[32], char *why,
			   size_t n)
{
	char *dir = oauth_store_dir(), enc[NAME_MAX_ENC], shex[65];
	int count = 0;
	bool failed = false;
	if (!dir || encode_name(name, enc, sizeof enc) < 0) {
		free(dir);
		return 0;
	}
	subject_hex(subject, shex);
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *p;
		if (!is_principals(de->d_name, enc, shex) ||
		    asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			continue;
		if (unlink(p) == 0) {
			count++;
		} else if (!failed) {
			snprintf(why, n, "cannot remove %s: %s", p, strerror(errno));
			failed = true;
		}
		free(p);
	}
	if (d)
		closedir(d);
	free(dir);
	return failed ? -1 : count;
}
