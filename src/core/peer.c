/*
 * peer.c - peer bookkeeping shared by sessions and backends.
 */
#include "peer.h"

#include <stdlib.h>
#include <string.h>

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
	free(p->serves);   /* empty: chain_remove_peer unlinked it */
	p->serves = NULL;
	p->nserves = 0;
}
