/*
 * glob.c - wildcard matching for names and URIs (see glob_match.h).
 *
 * Iterative: on a mismatch the match restarts one character after the
 * last "*", so the cost is O(len(pat) * len(s)) at worst and there is no
 * recursion to exhaust on long inputs.
 */
#include "glob_match.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "middleware.h"

/* Length of the UTF-8 sequence starting at S (1 for stray bytes). */
static size_t utf8_len(const char *s)
{
	unsigned char c = (unsigned char)*s;
	size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	for (size_t i = 1; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			return 1;
	return n;
}

/* End of the class starting at P (just past "["), or NULL if unterminated. */
static const char *class_end(const char *p)
{
	if (*p == '!' || *p == '^')
		p++;
	if (*p == ']')
		p++;
	for (; *p && *p != ']'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p == ']' ? p : NULL;
}

/* True when byte C is in the class between P (after "[") and END ("]"). */
static bool class_has(const char *p, const char *end, unsigned char c)
{
	bool neg = *p == '!' || *p == '^';
	bool in = false;
	if (neg)
		p++;
	while (p < end) {
		if (*p == '\\' && p + 1 < end)
			p++;
		unsigned char lo = (unsigned char)*p++, hi = lo;
		if (*p == '-' && p + 1 < end) {
			p++;
			if (*p == '\\' && p + 1 < end)
				p++;
			hi = (unsigned char)*p++;
		}
		if (c >= lo && c <= hi)
			in = true;
	}
	return in != neg;
}

/*
 * Matches one pattern element at *P against S; on success advances *P and
 * returns the number of bytes of S consumed, else returns 0.
 */
static size_t match_one(const char **p, const char *s)
{
	const char *q = *p;
	if (!*s)
		return 0;
	if (*q == '?') {
		*p = q + 1;
		return utf8_len(s);
	}
	if (*q == '[') {
		const char *end = class_end(q + 1);
		if (end) {
			if (!class_has(q + 1, end, (unsigned char)*s))
				return 0;
			*p = end + 1;
			return 1;
		}
	}
	if (*q == '\\' && q[1])
		q++;
	if (*q != *s)
		return 0;
	*p = q + 1;
	return 1;
}

/* Matches the whole of S against PAT. */
bool glob_match(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;
	if (!pat || !s)
		return false;
	for (;;) {
		if (*pat == '*') {
			while (*pat == '*')
				pat++;
			star = pat;
			resume = s;
			continue;
		}
		if (!*pat && !*s)
			return true;
		size_t n = *pat ? match_one(&pat, s) : 0;
		if (n) {
			s += n;
			continue;
		}
		if (!star || !*resume)
			return false;
		resume += utf8_len(resume);
		pat = star;
		s = resume;
	}
}

/* Checks a pattern's syntax. */
const char *glob_check(const char *pat)
{
	if (!pat || !*pat)
		return "empty pattern";
	for (const char *p = pat; *p; p++) {
		if (*p == '\\') {
			if (!p[1])
				return "trailing backslash";
			p++;
		} else if (*p == '[') {
			const char *end = class_end(p + 1);
			if (!end)
				return "unterminated [...]";
			p = end;
		}
	}
	return NULL;
}

/* Copies one pattern into L after checking it. */
static int list_add(struct mw_build *b, const char *key, json_t *v,
		    struct glob_list *l)
{
	const char *why = json_is_string(v) ? glob_check(json_string_value(v)) :
		"must be a string";
	if (why) {
		mw_error(b, key, "%s", why);
		return -1;
	}
	char *copy = strdup(json_string_value(v));
	if (!copy) {
		mw_error(b, key, "out of memory");
		return -1;
	}
	l->v[l->n++] = copy;
	return 0;
}

/* Parses a string or an array of patterns. */
int glob_list_parse(struct mw_build *b, const char *key, json_t *v,
		    struct glob_list *l)
{
	size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
	json_t *e;
	int bad = 0;
	l->n = 0;
	if (!json_is_array(v) && !json_is_string(v)) {
		mw_error(b, key, "must be a pattern or an array of patterns");
		l->v = NULL;
		return -1;
	}
	l->v = calloc(n ? n : 1, sizeof *l->v);
	if (!l->v) {
		mw_error(b, key, "out of memory");
		return -1;
	}
	if (json_is_string(v))
		bad = list_add(b, key, v, l);
	json_array_foreach(v, i, e) {
		char k[256];
		snprintf(k, sizeof k, "%s/%zu", key, i);
		bad |= list_add(b, k, e, l);
	}
	if (bad)
		glob_list_release(l);
	return bad ? -1 : 0;
}

/* True when S matches one of the patterns. */
bool glob_list_match(const struct glob_list *l, const char *s)
{
	for (size_t i = 0; s && i < l->n; i++)
		if (glob_match(l->v[i], s))
			return true;
	return false;
}

/* Frees the patterns. */
void glob_list_release(struct glob_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
