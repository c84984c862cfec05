/*
 * selfcert.c - a short-lived self-signed ECDSA P-256 certificate (selfcert.h),
 * made with GnuTLS and written to a private temporary directory for the
 * QUIC layer to load.
 */
#include "selfcert.h"

#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Writes DATA (N bytes) to PATH, mode 0600. 0 or -1. */
static int write_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, data, n);
	int rc = close(fd);
	return w == (ssize_t)n && rc == 0 ? 0 : -1;
}

int selfcert_make(struct selfcert *sc, unsigned days, char *why, size_t n)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t cpem = { 0 }, kpem = { 0 }, der = { 0 };
	int rc = -1, e;
	memset(sc, 0, sizeof *sc);
	const char *tmp = getenv("TMPDIR");
	snprintf(sc->dir, sizeof sc->dir, "%s/mcp-chain-cert.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 30 ? tmp : "/tmp");
	if (!mkdtemp(sc->dir)) {
		snprintf(why, n, "cannot make a temporary directory");
		sc->dir[0] = '\0';
		return -1;
	}
	snprintf(sc->cert_file, sizeof sc->cert_file, "%s/cert.pem", sc->dir);
	snprintf(sc->key_file, sizeof sc->key_file, "%s/key.pem", sc->dir);
	unsigned char serial[16];
	time_t now = time(NULL);
	if ((e = gnutls_x509_privkey_init(&key)) < 0 ||
	    (e = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
					      GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
					      0)) < 0 ||
	    (e = gnutls_x509_crt_init(&crt)) < 0 ||
	    (e = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
	    (e = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial)) < 0)
		goto fail;
	serial[0] &= 0x7f;   /* a positive serial number */
	static const unsigned char v4[4] = { 127, 0, 0, 1 };
	static const unsigned char v6[16] = { [15] = 1 };
	if ((e = gnutls_x509_crt_set_serial(crt, serial, sizeof serial)) < 0 ||
	    (e = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0 ||
	    (e = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)days * 86400 - 3600)) < 0 ||
	    (e = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost",
					       9)) < 0 ||
	    (e = gnutls_x509_crt_set_key(crt, key)) < 0 ||
	    (e = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
						      GNUTLS_FSAN_APPEND)) < 0 ||
	    (e = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v4, 4,
						      GNUTLS_FSAN_APPEND)) < 0 ||
	    (e = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v6, 16,
						      GNUTLS_FSAN_APPEND)) < 0 ||
	    (e = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
	    (e = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	    (e = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0 ||
	    (e = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cpem)) < 0 ||
	    (e = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_DER, &der)) < 0 ||
	    (e = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL,
						   GNUTLS_PKCS_PLAIN, &kpem)) < 0)
		goto fail;
	unsigned char h[32];
	if ((e = gnutls_hash_fast(GNUTLS_DIG_SHA256, der.data, der.size, h)) < 0)
		goto fail;
	EVP_EncodeBlock((unsigned char *)sc->hash_b64, h, sizeof h);
	for (size_t i = 0; i < sizeof h; i++)
		snprintf(sc->hash_hex + 2 * i, 3, "%02x", h[i]);
	if (write_file(sc->key_file, kpem.data, kpem.size) < 0 ||
	    write_file(sc->cert_file, cpem.data, cpem.size) < 0) {
		snprintf(why, n, "cannot write the certificate in %s", sc->dir);
		goto out;
	}
	rc = 0;
	goto out;
fail:
	snprintf(why, n, "cannot make a certificate: %s", gnutls_strerror(e));
out:
	if (kpem.data) {
		memset(kpem.data, 0, kpem.size);
		gnutls_free(kpem.data);
	}
	gnutls_free(cpem.data);
	gnutls_free(der.data);
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (key)
		gnutls_x509_privkey_deinit(key);
	if (rc < 0)
		selfcert_remove(sc);
	return rc;
}

void selfcert_remove(struct selfcert *sc)
{
	if (!sc->dir[0])
		return;
	unlink(sc->key_file);
	unlink(sc->cert_file);
	rmdir(sc->dir);
	sc->dir[0] = '\0';
}
