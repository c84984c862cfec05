/*
 * peer.c - peer bookkeeping shared by sessions and backends.
 */
#include "peer.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* Prepares a peer with empty tables. */
void peer_init(struct peer *p, const struct peer_ops *ops, enum peer_role role,
	       const char *name)
{
	memset(p, 0, sizeof *p);
	p->ops = ops;
	p->role = role;
	p->name = name;
	p->next_id = 1;
}

/* Frees the tables. */
void peer_release(struct peer *p)
{
	idmap_release(&p->sent);
	hmap_release(&p->received);
	peer_set_credential(p, NULL, 0);
	free(p->serves);   /* empty: chain_remove_peer unlinked it */
	p->serves = NULL;
	p->nserves = 0;
}

int peer_set_credential(struct peer *p, const char *s, size_t n)
{
	struct peer_cred *old = p->cred;
	if (s && old && old->len == n && CRYPTO_memcmp(old->s, s, n) == 0)
		return 0;
	struct peer_cred *c = NULL;
	if (s) {
		c = malloc(sizeof *c + n + 1);
		if (!c)
			return -1;
		c->refs = 1;
		c->len = n;
		memcpy(c->s, s, n);
		c->s[n] = '\0';
		unsigned hl = 0;
		if (EVP_Digest(s, n, c->hash, &hl, EVP_sha256(), NULL) != 1 || hl != 32) {
			OPENSSL_cleanse(c->s, n);
			free(c);
			return -1;
		}
	}
	p->cred = c;
	peer_cred_unref(old);
	return 0;
}

struct peer_cred *peer_cred_ref(struct peer_cred *c)
{
	if (c)
		c->refs++;
	return c;
}

void peer_cred_unref(struct peer_cred *c)
{
	if (!c || --c->refs > 0)
		return;
	OPENSSL_cleanse(c->s, c->len);
	free(c);
}
