/*
 * test_ask.c - unit tests for src/cli/ask.c: a server's sampling and
 * elicitation requests answered by the person at the terminal (here a
 * pseudo-terminal the test types into), or refused when stdin is not one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/cli/cli_int.h"
#include "fake_chain.h"

struct tty {
	int master, saved_in;
	char dir[64];
	struct capture cap;
};

/* Puts a pseudo-terminal on stdin, with TYPED already typed into it. */
static bool tty_open(struct tty *t, const char *typed)
{
	t->master = posix_openpt(O_RDWR | O_NOCTTY);
	if (t->master < 0 || grantpt(t->master) < 0 || unlockpt(t->master) < 0) {
		if (t->master >= 0)
			close(t->master);
		return false;
	}
	int slave = open(ptsname(t->master), O_RDWR | O_NOCTTY);
	if (slave < 0) {
		close(t->master);
		return false;
	}
	struct termios tio;
	tcgetattr(slave, &tio);
	tio.c_lflag &= ~(tcflag_t)ECHO;   /* nothing comes back to the master */
	tcsetattr(slave, TCSANOW, &tio);
	t->saved_in = dup(STDIN_FILENO);
	dup2(slave, STDIN_FILENO);
	close(slave);
	clearerr(stdin);
	size_t n = strlen(typed);
	assert_int_equal(write(t->master, typed, n), (ssize_t)n);
	snprintf(t->dir, sizeof t->dir, "/tmp/cli-test-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	capture_begin(&t->cap, t->dir);
	return true;
}

static void tty_close(struct tty *t)
{
	capture_end(&t->cap);
	dup2(t->saved_in, STDIN_FILENO);
	close(t->saved_in);
	close(t->master);
	clearerr(stdin);
	unlink(t->cap.out_path);
	unlink(t->cap.err_path);
	rmdir(t->dir);
}

/* Counts the occurrences of NEEDLE in HAY. */
static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static json_t *ask(const char *method, const char *params_json, json_t **error)
{
	json_t *params = json_loads(params_json, 0, NULL);
	assert_non_null(params);
	*error = NULL;
	json_t *r = cli_ask_user(NULL, method, params, error, NULL);
	json_decref(params);
	return r;
}

/* Any other request is refused, terminal or not. */
static void test_other_requests_refused(void **state)
{
	(void)state;
	json_t *error;
	assert_null(ask("roots/list", "{}", &error));
	assert_int_equal(json_integer_value(json_object_get(error, "code")), -32600);
	assert_string_equal(cli_error_message(error), "mcp-chain's shell commands do not answer this request");
	json_decref(error);
}

/* stdin not a terminal: refused, with a message that says why, also on stderr. */
static void test_not_a_terminal(void **state)
{
	(void)state;
	int saved = stdin_feed("yes\n");
	char dir[] = "/tmp/cli-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct capture cap;
	json_t *e1, *e2;
	capture_begin(&cap, dir);
	json_t *r1 = ask("elicitation/create", "{\"message\": \"m\"}", &e1);
	json_t *r2 = ask("sampling/createMessage", "{\"messages\": []}", &e2);
	capture_end(&cap);
	stdin_restore(saved);
	assert_null(r1);
	assert_null(r2);
	assert_string_equal(cli_error_message(e1),
			    "the server asked for elicitation, but stdin is not a terminal to ask the user");
	assert_string_equal(cli_error_message(e2),
			    "the server asked for sampling, but stdin is not a terminal to ask the user");
	assert_int_equal(json_integer_value(json_object_get(e2, "code")), -32600);
	assert_non_null(strstr(cap.err, "mcp-chain: the server asked for elicitation, but stdin is not "
				"a terminal to ask the user: refused\n"));
	json_decref(e1);
	json_decref(e2);
	unlink(cap.out_path);
	unlink(cap.err_path);
	rmdir(dir);
	capture_free(&cap);
}

#define FORM \
	"{\"message\": \"Who are you?\", \"requestedSchema\": {\"type\": \"object\", \"properties\": {" \
	"\"name\": {\"type\": \"string\", \"description\": \"your name\"}," \
	"\"age\": {\"type\": \"integer\"}," \
	"\"ok\": {\"type\": \"boolean\"}," \
	"\"color\": {\"type\": \"string\", \"enum\": [\"red\", \"blue\"]}," \
	"\"note\": {\"type\": \"string\"}}, \"required\": [\"name\", \"color\"]}}"

/* Elicitation: one prompt per field, typed values, retries for what does not fit. */
static void test_elicitation_accept(void **state)
{
	(void)state;
	struct tty t;
	json_t *error;
	/* name: empty (required) then Bob; age: abc then 42; ok: y; color: green
	 * then red; note: skipped; then the confirmation: Enter accepts */
	if (!tty_open(&t, "\nBob\nabc\n42\ny\ngreen\nred\n\n\n"))
		skip();
	json_t *r = ask("elicitation/create", FORM, &error);
	tty_close(&t);
	assert_null(error);
	json_t *want = json_pack("{s:s,s:{s:s,s:i,s:b,s:s}}", "action", "accept", "content",
				 "name", "Bob", "age", 42, "ok", 1, "color", "red");
	assert_true(json_equal(r, want));
	json_decref(want);
	json_decref(r);
	assert_non_null(strstr(t.cap.err, "The server asks: Who are you?\n"));
	assert_non_null(strstr(t.cap.err, "  name* (string) your name: "));
	assert_non_null(strstr(t.cap.err, "  color* (string [\"red\",\"blue\"]): "));
	assert_non_null(strstr(t.cap.err, "  note (string): "));
	assert_int_equal(count(t.cap.err, "(that does not fit; again)"), 3);
	assert_string_equal(t.cap.out, "");
	capture_free(&t.cap);
}

/* The confirmation: n declines, c cancels, both without content. */
static void test_elicitation_decline_cancel(void **state)
{
	(void)state;
	static const char *const typed[] = { "Ann\n\n\nblue\n\nno\n", "Ann\n\n\nblue\n\nC\n" };
	static const char *const action[] = { "decline", "cancel" };
	for (int i = 0; i < 2; i++) {
		struct tty t;
		json_t *error;
		if (!tty_open(&t, typed[i]))
			skip();
		json_t *r = ask("elicitation/create", FORM, &error);
		tty_close(&t);
		json_t *want = json_pack("{s:s}", "action", action[i]);
		assert_true(json_equal(r, want));
		json_decref(want);
		json_decref(r);
		capture_free(&t.cap);
	}
}

/* Sampling: the conversation shown; the line typed is the reply; empty refuses. */
static void test_sampling(void **state)
{
	(void)state;
	struct tty t;
	json_t *error;
	const char *params = "{\"messages\": [{\"role\": \"user\", \"content\": {\"type\": \"text\","
			     " \"text\": \"What is 2+2?\"}}, {\"role\": \"user\", \"content\":"
			     " {\"type\": \"image\"}}]}";
	if (!tty_open(&t, "four\n"))
		skip();
	json_t *r = ask("sampling/createMessage", params, &error);
	tty_close(&t);
	assert_null(error);
	json_t *want = json_pack("{s:s,s:{s:s,s:s},s:s,s:s}", "role", "assistant", "content", "type",
				 "text", "text", "four", "model", "human (mcp-chain call)",
				 "stopReason", "endTurn");
	assert_true(json_equal(r, want));
	json_decref(want);
	json_decref(r);
	assert_non_null(strstr(t.cap.err, "  [user] What is 2+2?\n"));
	assert_non_null(strstr(t.cap.err, "  [user] (not text)\n"));
	capture_free(&t.cap);

	if (!tty_open(&t, "\n"))
		skip();
	r = ask("sampling/createMessage", params, &error);
	tty_close(&t);
	assert_null(r);
	assert_string_equal(cli_error_message(error), "the user refused to answer the sampling request");
	json_decref(error);
	capture_free(&t.cap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_other_requests_refused),
		cmocka_unit_test(test_not_a_terminal),
		cmocka_unit_test(test_elicitation_accept),
		cmocka_unit_test(test_elicitation_decline_cancel),
		cmocka_unit_test(test_sampling),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
