/*
 * seal.h - authenticated encryption of small secrets with a 32-byte key:
 * AES-256-GCM with a random 96-bit nonce, bound to associated data (AAD)
 * that is not encrypted but must be the same to open the box. Used for
 * the per-principal token store and the login links; generic enough for
 * anything that must come back untouched from where it was kept (a file,
 * a URL).
 *
 *   sealed = nonce (12) || ciphertext (as long as the plain text) || tag (16)
 *
 * The text form is that in base64url without padding (jose.h), for URLs.
 */
#ifndef MCPC_SEAL_H
#define MCPC_SEAL_H

#include <stddef.h>

#define SEAL_KEY_LEN 32
#define SEAL_NONCE_LEN 12
#define SEAL_TAG_LEN 16
#define SEAL_OVERHEAD (SEAL_NONCE_LEN + SEAL_TAG_LEN)

/*
 * Seals the N bytes at PLAIN under KEY with AAD (AADLEN bytes; may be
 * NULL with 0): *OUT a new buffer of *OUTLEN = N + SEAL_OVERHEAD bytes the
 * caller frees. 0, or -1 (no memory, no randomness) with *OUT NULL.
 */
int seal(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
	 const void *plain, size_t n, unsigned char **out, size_t *outlen);

/*
 * Opens what seal made: *OUT a new buffer of *OUTLEN bytes plus a NUL
 * after them (the caller wipes and frees it). 0, or -1 (too short, another
 * key, other AAD, any byte altered) with *OUT NULL.
 */
int unseal(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
	   const unsigned char *sealed, size_t n, unsigned char **out, size_t *outlen);

/* seal, as base64url text: a new string, or NULL. */
char *seal_text(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
		const void *plain, size_t n);

/* unseal of seal_text's TEXT (borrowed, NUL-terminated); as unseal. */
int unseal_text(const unsigned char key[SEAL_KEY_LEN], const void *aad, size_t aadlen,
		const char *text, unsigned char **out, size_t *outlen);

/*
 * Reads a key file: 32 raw bytes, or 64 hex digits (white space around
 * them ignored). Refuses a file that group or others may read. 0, or -1
 * with WHY (N bytes; with the hint to make one).
 */
int seal_key_load(const char *path, unsigned char key[SEAL_KEY_LEN], char *why, size_t n);

/*
 * Reads a key list, for keys that rotate: one key of 64 hex digits a line
 * (blank lines and lines beginning with '#' ignored), the first the one
 * that seals, every one of them opening; or a file of 32 raw bytes (one
 * key). Up to MAX keys into KEYS, their count into *COUNT. Refuses a file
 * group or others may read. 0, or -1 with WHY (N bytes).
 */
int seal_keys_load(const char *path, unsigned char (*keys)[SEAL_KEY_LEN], size_t max,
		   size_t *count, char *why, size_t n);

#endif
