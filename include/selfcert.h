/*
 * selfcert.h - a short-lived self-signed certificate made at start: ECDSA
 * P-256, valid for DAYS (under 14, so that browsers take it by its hash,
 * WebTransport's serverCertificateHashes), for 127.0.0.1, ::1 and
 * localhost. For an MCP-Flow front given no certificate.
 */
#ifndef MCPC_SELFCERT_H
#define MCPC_SELFCERT_H

#include <stddef.h>

struct selfcert {
	char dir[64];       /* a private directory (0700) holding the two files */
	char cert_file[96]; /* cert.pem */
	char key_file[96];  /* key.pem */
	char hash_b64[48];  /* SHA-256 of the certificate's DER, base64 */
	char hash_hex[65];  /* ... in hex */
};

/* Makes one valid DAYS days from now into SC. 0, or -1 with WHY (N bytes). */
int selfcert_make(struct selfcert *sc, unsigned days, char *why, size_t n);

/* Removes its files and directory (the key is in memory once loaded). */
void selfcert_remove(struct selfcert *sc);

#endif
