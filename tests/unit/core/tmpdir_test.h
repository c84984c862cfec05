/*
 * tmpdir_test.h - a temporary directory for a whole unit test run, shared
 * by the core and middleware tests that write files: made under /tmp
 * (named after the test program), paths built inside it, whole files read
 * and written, and everything in it removed at the end.
 *
 * Helpers fail the running cmocka test rather than returning an error,
 * unless a comment says otherwise.
 */
#ifndef MCPC_TMPDIR_TEST_H
#define MCPC_TMPDIR_TEST_H

#include <stddef.h>

/* The directory, once tmpd_setup made it ("" before). */
extern char tmpd_dir[];

/*
 * Makes the directory, /tmp/PROGRAM.XXXXXX. A cmocka group setup:
 * returns 0, or -1 when it cannot be made. STATE is unused.
 */
int tmpd_setup(void **state);

/*
 * Removes the directory and everything under it. A cmocka group
 * teardown: returns 0, or -1 when something could not be removed.
 */
int tmpd_teardown(void **state);

/* Writes the path of NAME inside the directory into OUT (N bytes). */
void tmpd_path(char *out, size_t n, const char *name);

/* The whole content of PATH, NUL-terminated (the caller frees it), or NULL
 * when it cannot be opened. */
char *tmpd_slurp(const char *path);

/* Writes TEXT as the whole content of PATH. */
void tmpd_spit(const char *path, const char *text);

#endif
