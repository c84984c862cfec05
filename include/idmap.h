/*
 * idmap.h - pointers by the ids a peer gives its own requests: integer
 * keys that count up. Most live in a ring of slots indexed by the id's low
 * bits, one slot per id, so putting, finding and removing one is a few
 * instructions; an id whose slot is taken (by one still open from many
 * ids ago) goes to a hash map beside the ring. The map never owns the
 * values; a value is never NULL.
 */
#ifndef MCPC_IDMAP_H
#define MCPC_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"

struct idmap_slot {
	int64_t id;
	void *value;          /* NULL: the slot is free */
};

struct idmap {
	struct idmap_slot *ring;  /* owned; IDMAP_RING slots, made on first put */
	size_t count;             /* values in all, ring and spill */
	struct hmap spill;        /* id (int64_t bytes) -> value, for the rest */
};

#define IDMAP_RING 256
#define IDMAP_INIT { NULL, 0, HMAP_INIT }

/* Frees the ring and the spill map (not the values). */
void idmap_release(struct idmap *m);

/* Stores VALUE (not NULL) under ID, replacing any previous one; 0 or -1 (out of memory). */
int idmap_put(struct idmap *m, int64_t id, void *value);

/* The value under ID, or NULL. */
void *idmap_get(const struct idmap *m, int64_t id);

/* Removes ID and returns its value, or NULL when absent. */
void *idmap_del(struct idmap *m, int64_t id);

/* Calls FN for each value; FN must not change the map. */
void idmap_each(const struct idmap *m, void (*fn)(void *value, void *arg), void *arg);

/* Moves every value into a new array (caller frees it) and empties the map. */
void **idmap_drain(struct idmap *m, size_t *count);

#endif
