/*
 * tmpdir_test.c - a temporary directory for a whole unit test run (see
 * tmpdir_test.h): made, filled through paths and whole-file reads and
 * writes, and removed with everything under it.
 */
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir_test.h"

char tmpd_dir[128];

/* Makes /tmp/PROGRAM.XXXXXX. */
int tmpd_setup(void **state)
{
	(void)state;
	snprintf(tmpd_dir, sizeof tmpd_dir, "/tmp/%s.XXXXXX", program_invocation_short_name);
	return mkdtemp(tmpd_dir) ? 0 : -1;
}

/* Removes one entry met by nftw (children come before their directory). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Removes the directory and everything under it. */
int tmpd_teardown(void **state)
{
	(void)state;
	if (!tmpd_dir[0])
		return 0;
	int rc = nftw(tmpd_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	tmpd_dir[0] = '\0';
	return rc == 0 ? 0 : -1;
}

/* Writes the path of NAME inside the directory into OUT. */
void tmpd_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", tmpd_dir, name);
}

/* Reads a whole file (caller frees), or NULL if it cannot be opened. */
char *tmpd_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = calloc(1, (size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return s;
}

/* Writes TEXT as the whole content of PATH. */
void tmpd_spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}
