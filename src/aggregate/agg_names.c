/*
 * agg_names.c - the names the aggregate exposes for tools and prompts:
 * each backend's own name behind its prefix and the separator, made safe
 * for clients (shortened with a stable hash, collisions salted), the
 * merged views that carry them, and which backend a name leads back to.
 * A backend that is down keeps its names reserved.
 */
#include "agg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define NAME_MAX_LEN 64

/* Where an exposed name leads. */
struct mapping {
	size_t slot;
	char *orig;
	struct mapping *next;        /* the mappings of one kind, for freeing */
};

/* FNV-1a of a string, for short stable name suffixes. */
static unsigned fnv(const char *a, const char *b)
{
	unsigned h = 2166136261u;
	for (const char *p = a; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *p = b; p && *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* Makes PREFIX SEP ORIG safe for clients: [A-Za-z0-9_-], at most 64. */
static void expose(struct aggregate *a, char out[NAME_MAX_LEN + 1], const char *prefix, const char *orig,
		   const char *salt)
{
	char raw[1024];
	snprintf(raw, sizeof raw, "%s%s%s", prefix, a->cfg->separator, orig);
	size_t n = strlen(raw);
	for (size_t i = 0; i < n; i++) {
		char c = raw[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			raw[i] = '_';
	}
	if (n <= NAME_MAX_LEN && !salt) {
		memcpy(out, raw, n + 1);
		return;
	}
	/* too long, or taken: keep the head, add a hash of the full name */
	size_t keep = n < NAME_MAX_LEN - 9 ? n : NAME_MAX_LEN - 9;
	memcpy(out, raw, keep);
	snprintf(out + keep, NAME_MAX_LEN + 1 - keep, "_%08x", fnv(orig, salt ? salt : prefix));
}

/* Frees every mapping of kind K. */
void agg_names_clear(struct aggregate *a, enum list_kind k)
{
	while (a->maps[k]) {
		struct mapping *m = a->maps[k];
		a->maps[k] = m->next;
		free(m->orig);
		free(m);
	}
	hmap_release(&a->map[k]);
}

/* Records NAME -> (slot, orig). */
static void add_mapping(struct aggregate *a, enum list_kind k, const char *name, size_t slot, const char *orig)
{
	struct mapping *m = calloc(1, sizeof *m);
	if (!m)
		return;
	m->slot = slot;
	m->orig = strdup(orig);
	m->next = a->maps[k];
	a->maps[k] = m;
	hmap_put(&a->map[k], name, strlen(name), m);
}

/* Adds one backend item to the merged view under its exposed name. */
static void expose_item(struct aggregate *a, enum list_kind k, size_t i, json_t *item)
{
	const char *orig = json_string_value(json_object_get(item, "name"));
	char name[NAME_MAX_LEN + 1], plain[1024];
	if (!orig)
		return;
	expose(a, name, a->v[i]->prefix, orig, NULL);
	for (unsigned n = 0; hmap_get(&a->map[k], name, strlen(name)); n++) {
		char salt[300];
		snprintf(salt, sizeof salt, "%s/%u", a->v[i]->entry->name, n);
		expose(a, name, a->v[i]->prefix, orig, salt);
		log_warn("%s %s of %s collides with another name; exposed as %s",
			 agg_list_key[k], orig, a->v[i]->entry->name, name);
	}
	snprintf(plain, sizeof plain, "%s%s%s", a->v[i]->prefix, a->cfg->separator, orig);
	if (strcmp(plain, name) != 0)
		log_info("%s: %s \"%s\" exposed as \"%s\" (client-safe name)",
			 a->v[i]->entry->name, k == LIST_TOOLS ? "tool" : "prompt", orig, name);
	add_mapping(a, k, name, i, orig);
	if (!a->v[i]->peer->ready)
		return;  /* its names stay reserved while it is down */
	json_t *copy = json_copy(item);
	json_object_set_new(copy, "name", json_string(name));
	json_array_append_new(a->view[k], copy);
}

/* Rebuilds the merged view and name map of kind K from the slots. */
void agg_names_rebuild(struct aggregate *a, enum list_kind k)
{
	agg_names_clear(a, k);
	free(a->view_line[k]);
	a->view_line[k] = NULL;
	json_decref(a->view[k]);
	a->view[k] = json_array();
	for (size_t i = 0; i < a->n; i++) {
		size_t j;
		json_t *item;
		if (a->v[i]->removed)
			continue;
		json_array_foreach(a->v[i]->items[k], j, item)
			expose_item(a, k, i, item);
	}
}

/*
 * The backend with modules of its own whose exposed prefix NAME starts
 * with (the longest), or NULL. A name its own modules hid from its list
 * (a per-backend policy) is not in the map, yet its call must reach those
 * modules so that they refuse it as they would globally.
 */
static struct slot *hidden_owner(struct aggregate *a, const char *name, const char **orig)
{
	struct slot *best = NULL;
	size_t best_n = 0;
	for (size_t i = 0; i < a->n; i++) {
		struct slot *s = a->v[i];
		char head[300];
		int n = snprintf(head, sizeof head, "%s%s", s->prefix, a->cfg->separator);
		if (s->removed || pipeline_size(s->peer->pl) == 0 || n <= 0 ||
		    (size_t)n >= sizeof head || (size_t)n <= best_n ||
		    strncmp(name, head, (size_t)n) != 0 || !name[n])
			continue;
		best = s;
		best_n = (size_t)n;
	}
	if (best)
		*orig = name + best_n;
	return best;
}

/* The backend NAME of kind K leads to, *ORIG its own name. */
struct slot *agg_names_find(struct aggregate *a, enum list_kind k, const char *name,
			    const char **orig)
{
	struct mapping *m = hmap_get(&a->map[k], name, strlen(name));
	if (!m)
		return hidden_owner(a, name, orig);
	*orig = m->orig;
	return a->v[m->slot];
}
