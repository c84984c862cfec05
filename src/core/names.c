/*
 * names.c - the listed name nearest a mistyped one.
 */
#include "names.h"

#include <stdint.h>
#include <string.h>

/* C in lower case (ASCII): a difference of case alone is no edit. */
static char fold(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;
	return m < c ? m : c;
}

/*
 * Edits from A to B (insert, delete, replace, swap of neighbours: the
 * "optimal string alignment" distance), over three rows of the table.
 */
static size_t distance(const char *a, size_t n, const char *b, size_t m)
{
	size_t rows[3][NAMES_MAX_LEN + 1];
	size_t *two = rows[0], *prev = rows[1], *cur = rows[2];
	for (size_t j = 0; j <= m; j++)
		prev[j] = j;
	for (size_t i = 1; i <= n; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= m; j++) {
			size_t cost = fold(a[i - 1]) != fold(b[j - 1]);
			cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
			if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) &&
			    fold(a[i - 2]) == fold(b[j - 1]) && two[j - 2] + 1 < cur[j])
				cur[j] = two[j - 2] + 1;
		}
		size_t *t = two;
		two = prev;
		prev = cur;
		cur = t;
	}
	return prev[m];
}

const char *names_nearest(const char *key, const char *const *list)
{
	size_t n = strlen(key);
	if (n == 0 || n > NAMES_MAX_LEN)
		return NULL;
	size_t limit = n <= 5 ? 1 : 2, best_d = SIZE_MAX;
	const char *best = NULL;
	for (; *list; list++) {
		size_t m = strlen(*list);
		if (m > NAMES_MAX_LEN || (m > n ? m - n : n - m) > limit)
			continue;
		if (strcmp(*list, key) == 0)
			return NULL;
		size_t d = distance(key, n, *list, m);
		if (d <= limit && d < best_d) {
			best_d = d;
			best = *list;
		}
	}
	return best;
}
