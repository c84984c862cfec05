/*
 * pipeline_build.c - building pipelines from configuration: each entry
 * {"use": "NAME", ...options} of a "middleware" array is looked up in the
 * module registry (mw_use_registry) and created, and every problem is
 * reported at the JSON pointer of its key, the module's own option errors
 * included (mw_error, mw_check_keys). The modules are created, not
 * started; running them is pipeline.c's.
 */
#include "middleware.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cfg_errors.h"
#include "names.h"

/* Reports an option error at the module's path + KEY. */
void mw_error(struct mw_build *b, const char *key, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cfg_error(b->errs, "%s: %s%s: %s", b->file, b->path, key, msg);
	b->nerr++;
}

/*
 * Reports the members of OBJ that are neither in KEYS (NULL-terminated, or
 * NULL for none) nor ALSO (NULL for none), each at PREFIX/KEY with the
 * key escaped as a JSON pointer segment (RFC 6901), with the nearest
 * known key as a hint. Returns how many there were.
 */
static int unknown_keys(struct mw_build *b, const char *prefix, json_t *obj,
			const char *const *keys, const char *also)
{
	static const char *const none[] = { NULL };
	const char *k;
	json_t *v;
	int bad = 0;
	json_object_foreach(obj, k, v) {
		bool ok = also && strcmp(k, also) == 0;
		for (size_t i = 0; keys && keys[i] && !ok; i++)
			ok = strcmp(keys[i], k) == 0;
		if (ok)
			continue;
		char at[400];
		size_t l = (size_t)snprintf(at, sizeof at, "%s/", prefix);
		for (const char *c = k; *c && l + 3 < sizeof at; c++) {
			if (*c == '~' || *c == '/') {
				at[l++] = '~';
				at[l++] = *c == '~' ? '0' : '1';
			} else {
				at[l++] = *c;
			}
		}
		at[l < sizeof at ? l : sizeof at - 1] = '\0';
		const char *near = names_nearest(k, keys ? keys : none);
		if (near)
			mw_error(b, at, "unknown option (did you mean \"%s\"?)", near);
		else
			mw_error(b, at, "unknown option");
		bad++;
	}
	return bad;
}

/* Reports unknown option keys. */
int mw_check_keys(struct mw_build *b, json_t *opts, const char *const *keys)
{
	return unknown_keys(b, "", opts, keys, "use");
}

/* Reports unknown keys of a nested option object. */
void mw_check_keys_at(struct mw_build *b, const char *key, json_t *obj,
		      const char *const *keys)
{
	unknown_keys(b, key, obj, keys, NULL);
}

/* The modules pipelines are built from (see mw_use_registry). */
static const struct mw_def no_modules[] = { { NULL, NULL } };
static const struct mw_def *registry = no_modules;

/* Sets the table of modules that pipeline_build knows. */
void mw_use_registry(const struct mw_def *defs)
{
	registry = defs ? defs : no_modules;
}

/* Looks a module up by name. */
const struct mw_def *mw_find(const char *name)
{
	for (const struct mw_def *d = registry; d->name; d++)
		if (strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

/* Lists the registry's names into OUT, for error messages. */
static void list_modules(char *out, size_t n)
{
	size_t l = 0;
	out[0] = '\0';
	for (const struct mw_def *d = registry; d->name && l + 2 < n; d++)
		l += (size_t)snprintf(out + l, n - l, "%s%s", l ? ", " : "", d->name);
	if (!out[0])
		snprintf(out, n, "none yet");
}

/* Creates one module from its entry. */
static struct mw_module *build_one(json_t *entry, struct mw_build *b)
{
	if (!json_is_object(entry)) {
		mw_error(b, "", "a module is an object {\"use\": \"NAME\", ...options}");
		return NULL;
	}
	json_t *use = json_object_get(entry, "use");
	if (!json_is_string(use)) {
		mw_error(b, "/use", "missing or not a string: name the module to use");
		return NULL;
	}
	const struct mw_def *d = mw_find(json_string_value(use));
	if (!d) {
		char names[256];
		const char *known[32];
		size_t n = 0;
		for (const struct mw_def *r = registry; r->name && n + 1 < 32; r++)
			known[n++] = r->name;
		known[n] = NULL;
		const char *near = names_nearest(json_string_value(use), known);
		list_modules(names, sizeof names);
		mw_error(b, "/use", "unknown module \"%s\" (%s%s%savailable: %s)",
			 json_string_value(use), near ? "did you mean \"" : "",
			 near ? near : "", near ? "\"? " : "", names);
		return NULL;
	}
	int before = b->nerr;
	struct mw_module *m = d->create(entry, b);
	if (!m && b->nerr == before)
		mw_error(b, "", "module \"%s\" could not be created", d->name);
	return m;
}

/* Builds a pipeline from configuration. */
struct pipeline *pipeline_build(json_t *arr, const char *file, const char *path,
				struct cfg_errors *errs)
{
	return pipeline_build_store(arr, file, path, errs, false);
}

/* Builds a pipeline from configuration that may have the shared store. */
struct pipeline *pipeline_build_store(json_t *arr, const char *file, const char *path,
				      struct cfg_errors *errs, bool store)
{
	struct pipeline *pl = pipeline_new();
	int nerr = 0;
	size_t i;
	json_t *entry;
	if (!pl)
		return NULL;
	json_array_foreach(arr, i, entry) {
		char p[512];
		snprintf(p, sizeof p, "%s/%zu", path, i);
		struct mw_build b = { .file = file, .path = p, .errs = errs, .store = store };
		struct mw_module *m = build_one(entry, &b);
		nerr += b.nerr;
		if (m && pipeline_add(pl, m) < 0)
			m->ops->destroy(m);
	}
	if (nerr) {
		pipeline_unref(pl);
		return NULL;
	}
	return pl;
}
