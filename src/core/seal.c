/*
 * seal.c - AES-256-GCM boxes (see seal.h), on OpenSSL's EVP interface.
 */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "jose.h"

/* One AES-256-GCM pass: ENC seals, else opens (TAG read then). 0 or -1. */
static int gcm(int enc, const unsigned char *key, const unsigned char *nonce, const void *aad,
	       size_t aadlen, const unsigned char *in, size_t n, unsigned char *out,
	       unsigned char *tag)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int len = 0, ok = x != NULL && n <= (size_t)INT32_MAX && aadlen <= (size_t)INT32_MAX;
	ok = ok && EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_LEN, NULL) == 1 &&
	     EVP_CipherInit_ex(x, NULL, NULL, key, nonce, enc) == 1;
	if (ok && aadlen)
		ok = EVP_CipherUpdate(x, NULL, &len, aad, (int)aadlen) == 1;
	if (ok && n)
		ok = EVP_CipherUpdate(x, out, &len, in, (int)n) == 1;
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN, tag) == 1;
	ok = ok && EVP_CipherFinal_ex(x, out + n, &len) == 1;
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN, tag) == 1;
	EVP_CIPHER_CTX_free(x);
	return ok ? 0 : -1;
}

int seal(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
	 const void *plain, size_t n, unsigned char **out, size_t *outlen)
{
	unsigned char *b = malloc(n + SEAL_OVERHEAD + 1);
	*out = NULL;
	if (!b)
		return -1;
	if (RAND_bytes(b, SEAL_NONCE_LEN) != 1 ||
	    gcm(1, key, b, aad, aadlen, plain, n, b + SEAL_NONCE_LEN,
		b + SEAL_NONCE_LEN + n) < 0) {
		free(b);
		return -1;
	}
	*out = b;
	*outlen = n + SEAL_OVERHEAD;
	return 0;
}

int unseal(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
	   const unsigned char *sealed, size_t n, unsigned char **out, size_t *outlen)
{
	*out = NULL;
	if (n < SEAL_OVERHEAD)
		return -1;
	size_t len = n - SEAL_OVERHEAD;
	unsigned char tag[SEAL_TAG_LEN], *p = malloc(len + 16 + 1);   /* room for Final */
	if (!p)
		return -1;
	memcpy(tag, sealed + n - SEAL_TAG_LEN, SEAL_TAG_LEN);
	if (gcm(0, key, sealed, aad, aadlen, sealed + SEAL_NONCE_LEN, len, p, tag) < 0) {
		OPENSSL_cleanse(p, len);
		free(p);
		return -1;
	}
	p[len] = '\0';
	*out = p;
	*outlen = len;
	return 0;
}

char *seal_text(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
		const void *plain, size_t n)
{
	unsigned char *b;
	size_t len;
	if (seal(key, aad, aadlen, plain, n, &b, &len) < 0)
		return NULL;
	char *t = jose_b64url_encode(b, len);
	free(b);
	return t;
}

int unseal_text(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
		const char *text, unsigned char **out, size_t *outlen)
{
	unsigned char *b;
	size_t len;
	*out = NULL;
	if (jose_b64url_decode(text, strlen(text), &b, &len) < 0)
		return -1;
	int rc = unseal(key, aad, aadlen, b, len, out, outlen);
	free(b);
	return rc;
}

/* The value of hex digit C, or -1. */
static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int seal_keys_load(const char *path, unsigned char (*keys)[SEAL_KEY_LEN], size_t max,
		   size_t *count, char *why, size_t n)
{
	static const char hint[] = "make one with: head -c32 /dev/urandom > FILE (or openssl "
				   "rand -hex 32 > FILE); chmod 600 FILE";
	char buf[4096];
	struct stat st;
	*count = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(why, n, "cannot read %s: %s (%s)", path, strerror(errno), hint);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_mode & 077) {
		close(fd);
		snprintf(why, n, "%s may be read by group or others (mode %03o): chmod 600 %s",
			 path, (unsigned)(st.st_mode & 0777), path);
		return -1;
	}
	ssize_t got = read(fd, buf, sizeof buf - 1);
	close(fd);
	size_t len = got > 0 ? (size_t)got : 0;
	int rc = 0;
	if (len == SEAL_KEY_LEN && max > 0) {
		memcpy(keys[0], buf, SEAL_KEY_LEN);
		*count = 1;
		OPENSSL_cleanse(buf, sizeof buf);
		return 0;
	}
	buf[len] = '\0';
	unsigned line = 0;
	for (char *p = buf, *next; p && *p && rc == 0; p = next) {
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		line++;
		size_t a = 0, b = strlen(p);
		while (a < b && strchr(" \t\r", p[a]))
			a++;
		while (b > a && strchr(" \t\r", p[b - 1]))
			b--;
		if (a == b || p[a] == '#')
			continue;
		if (b - a != 2 * SEAL_KEY_LEN) {
			snprintf(why, n, "%s:%u: not a key (64 hex digits a line); %s", path, line, hint);
			rc = -1;
			break;
		}
		if (*count == max) {
			snprintf(why, n, "%s: more than %zu keys", path, max);
			rc = -1;
			break;
		}
		for (size_t i = 0; i < SEAL_KEY_LEN; i++) {
			int h = hexval(p[a + 2 * i]), l = hexval(p[a + 2 * i + 1]);
			if (h < 0 || l < 0) {
				snprintf(why, n, "%s:%u: not a key (64 hex digits a line); %s",
					 path, line, hint);
				rc = -1;
				break;
			}
			keys[*count][i] = (unsigned char)(h << 4 | l);
		}
		if (rc == 0)
			(*count)++;
	}
	OPENSSL_cleanse(buf, sizeof buf);
	if (rc == 0 && *count == 0) {
		snprintf(why, n, "%s: no key in it; %s", path, hint);
		rc = -1;
	}
	if (rc < 0) {
		OPENSSL_cleanse(keys, max * SEAL_KEY_LEN);
		*count = 0;
	}
	return rc;
}

int seal_key_load(const char *path, unsigned char key[SEAL_KEY_LEN], char *why, size_t n)
{
	size_t count = 0;
	return seal_keys_load(path, (unsigned char (*)[SEAL_KEY_LEN])key, 1, &count, why, n);
}
