/*
 * test_names.c - unit tests for src/core/names.c (the listed name nearest
 * a mistyped one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "names.h"

static const char *const server_keys[] = {
	"type", "command", "args", "env", "cwd", "enabled", "middleware", "disabled",
	"prefix", "timeout", "restart", "url", "headers", "protocol", "scope", NULL
};

/* The common slips: a letter missing, one too many, one wrong, two swapped. */
static void test_one_edit(void **state)
{
	(void)state;
	assert_string_equal(names_nearest("comand", server_keys), "command");
	assert_string_equal(names_nearest("commmand", server_keys), "command");
	assert_string_equal(names_nearest("commend", server_keys), "command");
	assert_string_equal(names_nearest("comamnd", server_keys), "command");
	assert_string_equal(names_nearest("arg", server_keys), "args");
	assert_string_equal(names_nearest("ur", server_keys), "url");
	assert_string_equal(names_nearest("header", server_keys), "headers");
}

/* A longer key may be two edits off ("timeoutMs" for "timeout"), a short one only one. */
static void test_limit_grows_with_length(void **state)
{
	(void)state;
	assert_string_equal(names_nearest("timeoutMs", server_keys), "timeout");
	assert_string_equal(names_nearest("middlewares", server_keys), "middleware");
	assert_string_equal(names_nearest("ev", server_keys), "env");
	assert_null(names_nearest("ag", server_keys));      /* two from "args": a guess */
	assert_null(names_nearest("xyz", server_keys));
	assert_null(names_nearest("restartPolicy", server_keys));
	assert_null(names_nearest("commandLine", server_keys));  /* 4 edits */
}

/* Case alone costs nothing; a known key gets no hint; ties go to the earlier name. */
static void test_case_known_and_ties(void **state)
{
	(void)state;
	assert_string_equal(names_nearest("Command", server_keys), "command");
	assert_string_equal(names_nearest("initTimeoutMS", (const char *const[]){
		"initTimeoutMs", "initJoinMs", NULL }), "initTimeoutMs");
	assert_null(names_nearest("command", server_keys));
	assert_null(names_nearest("env", server_keys));
	/* "cat" is one edit from "car" and from "bat" */
	assert_string_equal(names_nearest("cat", (const char *const[]){ "car", "bat", NULL }),
			    "car");
	assert_string_equal(names_nearest("cat", (const char *const[]){ "bat", "car", NULL }),
			    "bat");
}

/* Nothing to offer: an empty key, an empty list, names too long to compare. */
static void test_edges(void **state)
{
	(void)state;
	char longkey[NAMES_MAX_LEN + 2];
	memset(longkey, 'a', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	char longname[NAMES_MAX_LEN + 1];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_null(names_nearest("", server_keys));
	assert_null(names_nearest("command", (const char *const[]){ NULL }));
	assert_null(names_nearest(longkey, (const char *const[]){ longname, NULL }));
	/* the longest that is compared: one letter changed is found */
	char near[NAMES_MAX_LEN + 1];
	memcpy(near, longname, sizeof near);
	near[10] = 'b';
	assert_string_equal(names_nearest(near, (const char *const[]){ "x", longname, NULL }),
			    longname);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_edit),
		cmocka_unit_test(test_limit_grows_with_length),
		cmocka_unit_test(test_case_known_and_ties),
		cmocka_unit_test(test_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
