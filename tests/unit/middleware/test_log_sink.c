/*
 * test_log_sink.c - unit tests for src/middleware/log_sink.c: lines
 * queued per loop iteration and written together, at once past
 * LOG_SINK_FLUSH_AT, on release and before a reopen; one sink per file
 * (shared, the same "chain" required); chained lines sealed and the chain
 * continued across a restart and a rotation; a broken tail refused;
 * write errors reported once, and after a short write the chain going on
 * from the last line written; stderr lines never cut in two.
 *
 * The sink is driven directly; lines are written by its ev_prepare
 * watcher, which one loop iteration (lgt_loop_once) runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <ev.h>

#include "log.h"
#include "log_test.h"
#include "mw_log.h"
#include "tmpdir_test.h"
#include "src/middleware/log_int.h"

/* ---- helpers ---- */

/* The string member KEY of line I of S, copied into OUT (65 bytes). */
static void member_at(const char *s, size_t i, const char *key, char out[AUDIT_HEX])
{
	json_t *l = lgt_line_at(s, i);
	const char *v = json_string_value(json_object_get(l, key));
	assert_non_null(v);
	assert_int_equal(strlen(v), 64);
	memcpy(out, v, AUDIT_HEX);
	json_decref(l);
}

/* Queues the line {"n":N} to S. */
static void put(struct log_sink *s, int n)
{
	char text[64];
	int len = snprintf(text, sizeof text, "{\"n\":%d}", n);
	assert_int_equal(log_sink_write_text(s, text, (size_t)len), 0);
}

/* Number of times NEEDLE occurs in S. */
static int occurrences(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* ---- queueing ---- */

/* Lines wait for the end of the loop iteration, then all go, in order;
 * the file is created 0600. */
static void test_batched_per_iteration(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "batch.jsonl");
	struct log_sink *s = log_sink_open(p, false);
	assert_non_null(s);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	for (int i = 0; i < 5; i++)
		put(s, i);
	char *t = tmpd_slurp(p);
	assert_string_equal(t, "");
	free(t);
	lgt_loop_once();
	t = tmpd_slurp(p);
	assert_string_equal(t, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n");
	free(t);
	put(s, 5);
	log_sink_flush_all();   /* as at exit */
	t = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(t), 6);
	free(t);
	log_sink_release(s);
}

/* Past LOG_SINK_FLUSH_AT bytes queued, lines are written at once. */
static void test_flushed_when_large(void **state)
{
	(void)state;
	char p[128];
	tmpd_path(p, sizeof p, "large.jsonl");
	struct log_sink *s = log_sink_open(p, false);
	assert_non_null(s);
	size_t n = LOG_SINK_FLUSH_AT / 2 - 100;
	char *line = malloc(n + 1);
	memset(line, 'z', n);
	line[0] = '{';
	line[n - 1] = '}';
	assert_int_equal(log_sink_write_text(s, line, n), 0);
	assert_int_equal(log_sink_write_text(s, line, n), 0);
	char *t = tmpd_slurp(p);
	assert_int_equal(strlen(t), 0);   /* just under the mark: still queued */
	free(t);
	assert_int_equal(log_sink_write_text(s, line, n), 0);
	t = tmpd_slurp(p);
	assert_int_equal(strlen(t), 3 * (n + 1));
	assert_int_equal(lgt_count_lines(t), 3);
	free(t);
	free(line);
	log_sink_release(s);
}

/* One sink per file, whatever the path says; released last, it writes
 * what is queued; a module wanting the other "chain" is refused. */
static void test_shared_and_released(void **state)
{
	(void)state;
	char p[128], alias[160], cap[128];
	tmpd_path(p, sizeof p, "shared.jsonl");
	snprintf(alias, sizeof alias, "%s/./shared.jsonl", tmpd_dir);
	tmpd_path(cap, sizeof cap, "stderr-shared.txt");
	struct log_sink *a = log_sink_open(p, true);
	struct log_sink *b = log_sink_open(alias, true);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	lgt_capture_begin(cap);
	struct log_sink *c = log_sink_open(p, false);
	lgt_capture_end();
	assert_null(c);
	char *err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "is already written with a hash chain"));
	free(err);
	put(a, 1);
	put(b, 2);
	log_sink_release(a);   /* b still holds it: nothing written yet */
	char *t = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(t), 0);
	free(t);
	log_sink_release(b);
	t = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(t), 2);
	free(t);
	char rep[512];
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);   /* one chain, not two */
	assert_non_null(strstr(rep, "2 lines, hash chain intact"));
}

/* A file that cannot be opened gives NULL and says why. */
static void test_open_fails(void **state)
{
	(void)state;
	char p[128], cap[128];
	tmpd_path(p, sizeof p, "no/such/dir/a.jsonl");
	tmpd_path(cap, sizeof cap, "stderr-open.txt");
	lgt_capture_begin(cap);
	struct log_sink *s = log_sink_open(p, false);
	lgt_capture_end();
	assert_null(s);
	char *err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "cannot open audit file"));
	assert_non_null(strstr(err, "No such file or directory"));
	free(err);
}

/* ---- the hash chain ---- */

/* Lines carry prev/hash as their last members; a restart continues. */
static void test_chain_survives_restart(void **state)
{
	(void)state;
	char p[128], rep[512], h[AUDIT_HEX], pv[AUDIT_HEX];
	tmpd_path(p, sizeof p, "chain-restart.jsonl");
	for (int run = 0; run < 2; run++) {
		struct log_sink *s = log_sink_open(p, true);
		assert_non_null(s);
		put(s, 2 * run);
		put(s, 2 * run + 1);
		log_sink_release(s);
	}
	char *t = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(t), 4);
	assert_memory_equal(t, "{\"n\":0,\"prev\":\"" AUDIT_GENESIS "\",\"hash\":\"",
			    strlen("{\"n\":0,\"prev\":\"" AUDIT_GENESIS "\",\"hash\":\""));
	for (size_t i = 1; i < 4; i++) {
		member_at(t, i - 1, "hash", h);
		member_at(t, i, "prev", pv);
		assert_string_equal(pv, h);
	}
	free(t);
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "4 lines, hash chain intact"));
}

/* A chained line must be an object; the loss is said once. */
static void test_chain_refuses_bad_text(void **state)
{
	(void)state;
	char p[128], cap[128];
	tmpd_path(p, sizeof p, "chain-bad-text.jsonl");
	tmpd_path(cap, sizeof cap, "stderr-bad-text.txt");
	struct log_sink *s = log_sink_open(p, true);
	assert_non_null(s);
	lgt_capture_begin(cap);
	assert_int_equal(log_sink_write_text(s, "[1]", 3), -1);
	assert_int_equal(log_sink_write_text(s, "}", 1), -1);
	put(s, 1);
	assert_int_equal(log_sink_write_text(s, "nope", 4), -1);
	lgt_capture_end();
	log_sink_release(s);
	char *err = tmpd_slurp(cap), *t = tmpd_slurp(p);
	assert_int_equal(occurrences(err, "an audit line for"), 2);
	assert_int_equal(lgt_count_lines(t), 1);
	free(err);
	free(t);
}

/* A chained file whose last line is broken is not continued. */
static void test_chain_refuses_broken_tail(void **state)
{
	(void)state;
	char p[128], cap[128];
	tmpd_path(p, sizeof p, "chain-broken-tail.jsonl");
	tmpd_path(cap, sizeof cap, "stderr-broken-tail.txt");
	tmpd_spit(p, "{\"time\":\"not chained\"}\n");
	lgt_capture_begin(cap);
	struct log_sink *s = log_sink_open(p, true);
	lgt_capture_end();
	assert_null(s);
	char *err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "cannot continue the hash chain"));
	free(err);
	/* unchained, the same file is fine */
	s = log_sink_open(p, false);
	assert_non_null(s);
	log_sink_release(s);
}

/* ---- reopening ---- */

/* SIGHUP after a rotation: queued lines go to the old file, later ones
 * to a new 0600 file that continues the chain. */
static void test_reopen_after_rotation(void **state)
{
	(void)state;
	char p[128], old[128], rep[1024], h[AUDIT_HEX], pv[AUDIT_HEX];
	tmpd_path(p, sizeof p, "rotate.jsonl");
	tmpd_path(old, sizeof old, "rotate.jsonl.1");
	struct log_sink *s = log_sink_open(p, true);
	assert_non_null(s);
	put(s, 0);
	lgt_loop_once();
	assert_int_equal(mw_log_reopen_all(), 0);   /* nothing moved: same file */
	put(s, 1);
	assert_int_equal(rename(p, old), 0);
	assert_int_equal(mw_log_reopen_all(), 0);
	put(s, 2);
	lgt_loop_once();
	char *a = tmpd_slurp(old), *b = tmpd_slurp(p);
	assert_int_equal(lgt_count_lines(a), 2);
	assert_int_equal(lgt_count_lines(b), 1);
	assert_non_null(strstr(b, "{\"n\":2,"));
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	member_at(a, 1, "hash", h);
	member_at(b, 0, "prev", pv);
	assert_string_equal(pv, h);
	free(a);
	free(b);
	assert_int_equal(lgt_verify(old, rep, sizeof rep), 0);
	assert_int_equal(lgt_verify(p, rep, sizeof rep), 0);
	assert_non_null(strstr(rep, "continues a chain"));
	log_sink_release(s);
}

/* A reopen that fails keeps the old file: its directory gone, or a new
 * file whose chain cannot be continued. */
static void test_reopen_fails_keeps_old(void **state)
{
	(void)state;
	char sub[128], moved[128], p[160], q[192], cap[128];
	tmpd_path(sub, sizeof sub, "sub");
	tmpd_path(moved, sizeof moved, "sub-moved");
	tmpd_path(cap, sizeof cap, "stderr-reopen.txt");
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(p, sizeof p, "%s/a.jsonl", sub);
	struct log_sink *s = log_sink_open(p, true);
	assert_non_null(s);
	put(s, 0);
	assert_int_equal(rename(sub, moved), 0);
	lgt_capture_begin(cap);
	assert_int_equal(mw_log_reopen_all(), -1);
	lgt_capture_end();
	char *err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "cannot reopen"));
	free(err);
	put(s, 1);
	lgt_loop_once();
	snprintf(q, sizeof q, "%s/a.jsonl", moved);
	char *t = tmpd_slurp(q);
	assert_int_equal(lgt_count_lines(t), 2);   /* both in the old file */
	free(t);

	/* back in place, but what is there now is not a chained file */
	assert_int_equal(mkdir(sub, 0700), 0);
	tmpd_spit(p, "garbage\n");
	lgt_capture_begin(cap);
	assert_int_equal(mw_log_reopen_all(), -1);
	lgt_capture_end();
	err = tmpd_slurp(cap);
	assert_non_null(strstr(err, "cannot continue the hash chain in the new"));
	free(err);
	put(s, 2);
	log_sink_release(s);
	t = tmpd_slurp(q);
	assert_int_equal(lgt_count_lines(t), 3);
	free(t);
	char rep[512];
	assert_int_equal(lgt_verify(q, rep, sizeof rep), 0);
	unlink(p);
	unlink(q);
	rmdir(sub);
	rmdir(moved);
}

/* ---- write errors ---- */

/* A sink that cannot be written says so once, not per line or batch. */
static void test_write_failure_reported_once(void **state)
{
	(void)state;
	char cap[128];
	if (access("/dev/full", W_OK) != 0)
		skip();
	tmpd_path(cap, sizeof cap, "stderr-full.txt");
	struct log_sink *s = log_sink_open("/dev/full", false);
	assert_non_null(s);
	lgt_capture_begin(cap);
	for (int i = 0; i < 3; i++) {
		put(s, i);
		lgt_loop_once();
	}
	lgt_capture_end();
	char *err = tmpd_slurp(cap);
	assert_int_equal(occurrences(err, "cannot write to audit file /dev/full"), 1);
	free(err);
	log_sink_release(s);
}

/*
 * A write cut short (the file size limit): the lines not written are
 * lost, the chain goes on from the last whole line written, and the
 * recovery is said once.
 */
static void test_short_write_chain(void **state)
{
	(void)state;
	char p[128], cap[128], h[AUDIT_HEX], hash[AUDIT_HEX], prev[AUDIT_HEX];
	tmpd_path(p, sizeof p, "short.jsonl");
	tmpd_path(cap, sizeof cap, "stderr-short.txt");
	struct log_sink *s = log_sink_open(p, true);
	assert_non_null(s);
	put(s, 0);
	put(s, 1);
	lgt_loop_once();
	char *t = tmpd_slurp(p);
	size_t two = strlen(t);
	member_at(t, 1, "hash", h);
	free(t);

	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = (rlim_t)(two + 40);   /* 40 bytes of the next line fit */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	put(s, 2);
	put(s, 3);
	enum log_level level = log_get_level();
	log_set_level(LOG_INFO);
	lgt_capture_begin(cap);
	lgt_loop_once();
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, was);
	put(s, 4);
	lgt_loop_once();
	put(s, 5);
	lgt_loop_once();
	lgt_capture_end();
	log_set_level(level);
	char *err = tmpd_slurp(cap);
	assert_int_equal(occurrences(err, "cannot write to audit file"), 1);
	assert_int_equal(occurrences(err, "writing to audit file"), 1);
	free(err);

	/* lines 0, 1, 40 bytes of line 2, then line 4 following line 1 */
	t = tmpd_slurp(p);
	const char *four = t + two + 40;
	assert_memory_equal(four, "{\"n\":4,", 7);
	size_t len = (size_t)(strchr(four, '\n') - four);
	assert_null(audit_check(four, len, hash, prev));
	assert_string_equal(prev, h);
	assert_non_null(strstr(four, "{\"n\":5,"));
	free(t);
	log_sink_release(s);
}

/* ---- stderr ---- */

/* One stderr sink; lines go to fd 2. When fd 2 would block, the line
 * begun is finished next time and the ones after it are dropped. */
static void test_stderr(void **state)
{
	(void)state;
	char cap[128];
	tmpd_path(cap, sizeof cap, "stderr-sink.txt");
	struct log_sink *a = log_sink_stderr(), *b = log_sink_stderr();
	assert_non_null(a);
	assert_ptr_equal(a, b);
	lgt_capture_begin(cap);
	put(a, 1);
	put(b, 2);
	lgt_loop_once();
	lgt_capture_end();
	char *t = tmpd_slurp(cap);
	assert_string_equal(t, "{\"n\":1}\n{\"n\":2}\n");
	free(t);

	/* a pipe of one page, non-blocking, as fd 2 */
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	int size = fcntl(fds[1], F_SETPIPE_SZ, 4096);
	if (size != 4096) {
		close(fds[0]);
		close(fds[1]);
		log_sink_release(a);
		log_sink_release(b);
		skip();
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	fflush(stderr);
	int saved = dup(2);
	dup2(fds[1], 2);
	size_t n = 1536;   /* four lines: the page ends inside the third */
	char *line = malloc(n);
	for (int i = 0; i < 4; i++) {
		memset(line, 'a' + i, n);
		line[0] = '{';
		line[n - 2] = '}';
		assert_int_equal(log_sink_write_text(a, line, n - 1), 0);
	}
	lgt_loop_once();
	char *got = calloc(1, 4 * n + 1);
	ssize_t r1 = read(fds[0], got, 4 * n);
	assert_int_equal(r1, 4096);
	lgt_loop_once();   /* the rest of the third line */
	ssize_t r2 = read(fds[0], got + r1, 4 * n);
	dup2(saved, 2);
	close(saved);
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(r1 + r2, 3 * n);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(got[i * n + n - 1], '\n');
		assert_int_equal(got[i * n + 1], 'a' + i);
	}
	free(got);
	free(line);
	log_sink_release(a);
	log_sink_release(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batched_per_iteration),
		cmocka_unit_test(test_flushed_when_large),
		cmocka_unit_test(test_shared_and_released),
		cmocka_unit_test(test_open_fails),
		cmocka_unit_test(test_chain_survives_restart),
		cmocka_unit_test(test_chain_refuses_bad_text),
		cmocka_unit_test(test_chain_refuses_broken_tail),
		cmocka_unit_test(test_reopen_after_rotation),
		cmocka_unit_test(test_reopen_fails_keeps_old),
		cmocka_unit_test(test_write_failure_reported_once),
		cmocka_unit_test(test_short_write_chain),
		cmocka_unit_test(test_stderr),
	};
	return cmocka_run_group_tests(tests, tmpd_setup, tmpd_teardown);
}
