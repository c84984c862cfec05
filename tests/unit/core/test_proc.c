/*
 * test_proc.c - unit tests for src/core/proc.c: spawning from argv (never
 * a shell) in a process group of its own, descriptors (non-blocking and
 * close-on-exec in the parent, none of ours in the child), reaping,
 * stderr relayed line by line, the stop sequence (grace, SIGTERM,
 * SIGKILL), a signal passed on to the group, spawn errors, and the
 * watchdog that kills the groups when our end of its pipe closes.
 *
 * The tests run real programs (/bin/sh, /bin/sleep...) on libev's default
 * loop, each wait bounded. /bin/sh is used here as a test tool only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "log.h"
#include "proc.h"

static struct proc P;
static int exits;        /* on_exit calls */
static int exit_status;  /* the last one's status */
static char log_path[64];

static void on_exit_cb(struct proc *p, int status, void *arg)
{
	assert_ptr_equal(p, &P);
	assert_ptr_equal(arg, &exits);
	exits++;
	exit_status = status;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Runs the loop until DONE() or CAP seconds of wall time (a short timer
 * per iteration bounds each ev_run). */
static bool run_until(bool (*done)(void), double cap)
{
	double end = ev_time() + cap;
	while (!(done && done()) && ev_time() < end) {
		ev_timer tick;
		ev_now_update(EV_DEFAULT);
		ev_timer_init(&tick, on_tick, 0.005, 0.);
		ev_timer_start(EV_DEFAULT, &tick);
		ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &tick);
	}
	return done && done();
}

static bool reaped(void)
{
	return exits > 0;
}

/* True while PID exists and is not a zombie (orphans may stay zombies
 * where nothing reaps them). */
static bool alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Waits (bounded, polling /proc) until PID is gone. */
static bool gone_within(pid_t pid, double cap)
{
	double end = ev_time() + cap;
	while (alive(pid) && ev_time() < end)
		poll(NULL, 0, 5);
	return !alive(pid);
}

/* Reads FD (non-blocking) until EOF or CAP seconds; NUL-terminated. */
static size_t read_all(int fd, char *buf, size_t size, double cap)
{
	size_t n = 0;
	double end = ev_time() + cap;
	while (n < size - 1 && ev_time() < end) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		poll(&pf, 1, 10);
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r == 0)
			break;
		if (r > 0)
			n += (size_t)r;
	}
	buf[n] = '\0';
	return n;
}

static char *logged(void);

/* The relayed lines logged since setup (those that start with "["). */
static char *relayed(void)
{
	static char out[8192];
	size_t n = 0;
	const char *l = logged();
	while (*l) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
		if (*l == '[' && n + len < sizeof out) {
			memcpy(out + n, l, len);
			n += len;
		}
		l += len;
	}
	out[n] = '\0';
	return out;
}

/* What was logged since setup. */
static char *logged(void)
{
	static char buf[8192];
	int fd = open(log_path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void spawn(char *const argv[])
{
	assert_int_equal(proc_spawn(&P, "t", argv, NULL, NULL, on_exit_cb, &exits), 0);
	assert_true(P.pid > 0);
}

static int setup(void **state)
{
	(void)state;
	ev_default_loop(0);
	ev_now_update(EV_DEFAULT);
	memset(&P, 0, sizeof P);
	exits = 0;
	exit_status = -1;
	snprintf(log_path, sizeof log_path, "/tmp/test_proc.%d.log", (int)getpid());
	unlink(log_path);
	assert_int_equal(log_open_file(log_path), 0);
	log_set_level(LOG_INFO);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (P.pid > 0) {
		proc_signal_group(&P, SIGKILL);
		run_until(reaped, 2.0);
	}
	proc_release(&P);
	unlink(log_path);
	return 0;
}

/* argv goes to the program as it is: no shell expands or splits it. */
static void test_argv_never_a_shell(void **state)
{
	(void)state;
	char *argv[] = { "echo", "a  b", "$HOME;*", "`id`", NULL };
	char out[256];
	spawn(argv);
	read_all(P.out_fd, out, sizeof out, 2.0);
	assert_string_equal(out, "a  b $HOME;* `id`\n");
	assert_true(run_until(reaped, 2.0));
	assert_true(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0);
	assert_int_equal(P.pid, 0);
}

/* The child leads a process group of its own, kept after reaping. */
static void test_own_process_group(void **state)
{
	(void)state;
	char *argv[] = { "sleep", "30", NULL };
	spawn(argv);
	assert_int_equal(getpgid(P.pid), P.pid);
	assert_int_equal(P.pgid, P.pid);
	assert_int_not_equal(getpgid(P.pid), getpgrp());
	pid_t pid = P.pid;
	proc_signal_group(&P, SIGKILL);
	assert_true(run_until(reaped, 2.0));
	assert_int_equal(P.pgid, pid);
}

/* Our ends are close-on-exec, stdout and stderr non-blocking; the child
 * holds none of our descriptors. */
static void test_descriptors(void **state)
{
	(void)state;
	int leak = open("/dev/null", O_RDONLY);  /* not close-on-exec */
	assert_true(leak >= 3);
	char *argv[] = { "ls", "/proc/self/fd", NULL };
	char out[256];
	spawn(argv);
	close(leak);
	int fds[] = { P.in_fd, P.out_fd, P.err_fd };
	for (int i = 0; i < 3; i++)
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(P.out_fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(P.err_fd, F_GETFL) & O_NONBLOCK);
	read_all(P.out_fd, out, sizeof out, 2.0);
	assert_string_equal(out, "0\n1\n2\n3\n");  /* 3: ls's own listing */
	assert_true(run_until(reaped, 2.0));
}

/* The exit status reaches on_exit; it is described for the log. */
static void test_reaped_with_status(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "exit 3", NULL };
	char what[64];
	spawn(argv);
	assert_true(run_until(reaped, 2.0));
	assert_int_equal(exits, 1);
	proc_describe_status(exit_status, what, sizeof what);
	assert_string_equal(what, "exited with status 3");
	assert_int_equal(P.pid, 0);
}

/* stderr lines are relayed as they are, after the name, without our time
 * and level; the last ones are kept for the exit report. */
static void test_stderr_lines(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "echo '2026-01-01 INFO one' >&2; printf 'two' >&2; exit 1", NULL };
	spawn(argv);
	assert_true(run_until(reaped, 2.0));
	assert_string_equal(relayed(), "[t] 2026-01-01 INFO one\n[t] two\n");
	assert_int_equal(strstr(strstr(logged(), "one") + 1, "one"), NULL);
	assert_int_equal(P.tail_next, 2);
	assert_string_equal(P.tail[0], "2026-01-01 INFO one");
	assert_string_equal(P.tail[1], "two");
	size_t before = strlen(logged());
	proc_log_tail(&P);  /* relayed already at this level: not again */
	assert_int_equal(strlen(logged()), before);
	log_set_level(LOG_WARN);
	proc_log_tail(&P);  /* not relayed at this level: the tail says it */
	assert_non_null(strstr(logged(), "warn: t: stderr: two\n"));
}

static double t_reaped;
static bool reaped_at(void)
{
	if (exits && !t_reaped)
		t_reaped = ev_time();
	return exits > 0;
}

/* proc_stop: after the grace SIGTERM, after another SIGKILL. */
static void test_stop_grace_then_term(void **state)
{
	(void)state;
	char *argv[] = { "sleep", "30", NULL };  /* stdin closing does not end it */
	spawn(argv);
	ev_now_update(EV_DEFAULT);  /* the timer counts from the loop's time */
	double t0 = ev_time();
	t_reaped = 0;
	proc_stop(&P, 0.05);
	assert_true(run_until(reaped_at, 2.0));
	assert_true(t_reaped - t0 >= 0.045);
	assert_true(WIFSIGNALED(exit_status) && WTERMSIG(exit_status) == SIGTERM);
}

static void test_stop_term_ignored_then_kill(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "trap '' TERM; sleep 30", NULL };
	spawn(argv);
	poll(NULL, 0, 50);  /* let the trap be set */
	ev_now_update(EV_DEFAULT);  /* the timer counts from the loop's time */
	double t0 = ev_time();
	t_reaped = 0;
	proc_stop(&P, 0.05);
	assert_true(run_until(reaped_at, 2.0));
	assert_true(t_reaped - t0 >= 0.095);
	assert_true(WIFSIGNALED(exit_status) && WTERMSIG(exit_status) == SIGKILL);
}

/* proc_signal passes the signal on to the whole group at once: a
 * grandchild gets it too. */
static void test_signal_reaches_group(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "sleep 30 & echo $!; wait", NULL };
	char out[64] = "";
	spawn(argv);
	size_t n = 0;
	double end = ev_time() + 2.0;
	while (!strchr(out, '\n') && ev_time() < end) {
		n += read_all(P.out_fd, out + n, sizeof out - n, 0.02);
		out[n] = '\0';
	}
	pid_t grandchild = (pid_t)atoi(out);
	assert_true(grandchild > 0);
	assert_true(alive(grandchild));
	proc_signal(&P, SIGINT);
	assert_true(run_until(reaped, 2.0));
	assert_true(WIFSIGNALED(exit_status) && WTERMSIG(exit_status) == SIGINT);
	assert_true(gone_within(grandchild, 2.0));
}

/* After a signal passed on, the stop's first escalation is SIGKILL. */
static void test_signal_then_stop_kills(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "trap '' INT TERM; sleep 30", NULL };
	spawn(argv);
	poll(NULL, 0, 50);
	proc_signal(&P, SIGINT);
	ev_now_update(EV_DEFAULT);  /* the timer counts from the loop's time */
	double t0 = ev_time();
	t_reaped = 0;
	proc_stop(&P, 0.05);
	assert_true(run_until(reaped_at, 2.0));
	assert_true(t_reaped - t0 < 0.095 + 0.5);
	assert_true(WIFSIGNALED(exit_status) && WTERMSIG(exit_status) == SIGKILL);
	assert_null(strstr(logged(), "sending SIGTERM"));
	assert_non_null(strstr(logged(), "sending SIGKILL"));
}

/* A command that does not exist: -1, the reason kept, nothing logged
 * (the caller decides), and a retry cannot mend it. */
static void test_spawn_missing_command(void **state)
{
	(void)state;
	char *argv[] = { "/no/such/command", NULL };
	assert_int_equal(proc_spawn(&P, "t", argv, NULL, NULL, on_exit_cb, &exits), -1);
	assert_int_equal(P.pid, 0);
	assert_int_equal(P.spawn_errno, ENOENT);
	assert_string_equal(P.error, "cannot start \"/no/such/command\": No such file or directory");
	assert_true(proc_spawn_error_is_permanent(&P));
	assert_string_equal(logged(), "");
}

/* ENV entries are added to ours or override them; CWD is honoured. */
static void test_env_and_cwd(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "echo \"$PROC_TEST_A $PWD\"", NULL };
	char *env[] = { "PROC_TEST_A=x=1", NULL };
	char out[256];
	assert_int_equal(proc_spawn(&P, "t", argv, env, "/", on_exit_cb, &exits), 0);
	read_all(P.out_fd, out, sizeof out, 2.0);
	assert_string_equal(out, "x=1 /\n");
	assert_true(run_until(reaped, 2.0));
}

/*
 * The watchdog: a process of its own, in its own group, deaf to the
 * signals a terminal or a client sends; when our end of its pipe closes
 * (as when we die, even by SIGKILL) it kills every group it learnt of --
 * here one whose leader ignores SIGTERM and has a child -- and exits.
 */
static void test_watchdog_kills_groups_at_eof(void **state)
{
	(void)state;
	assert_int_equal(proc_watchdog_pid(), 0);
	assert_int_equal(proc_watchdog_start(), 0);
	pid_t wd = proc_watchdog_pid();
	assert_true(wd > 0);
	assert_int_equal(proc_watchdog_start(), 0);  /* once */
	assert_int_equal(proc_watchdog_pid(), wd);
	char *argv[] = { "sh", "-c", "trap '' INT TERM HUP; sleep 30 & echo $!; wait", NULL };
	char out[64] = "";
	spawn(argv);
	size_t n = 0;
	double end = ev_time() + 2.0;
	while (!strchr(out, '\n') && ev_time() < end) {
		n += read_all(P.out_fd, out + n, sizeof out - n, 0.02);
		out[n] = '\0';
	}
	pid_t grandchild = (pid_t)atoi(out);
	assert_true(grandchild > 0);
	kill(wd, SIGTERM);
	kill(wd, SIGINT);
	kill(wd, SIGHUP);
	poll(NULL, 0, 50);
	assert_true(alive(wd));
	assert_int_equal(getpgid(wd), wd);
	assert_int_equal(proc_watchdog_stop(), wd);
	assert_int_equal(proc_watchdog_pid(), 0);
	assert_true(run_until(reaped, 2.0));  /* the child, by the watchdog */
	assert_true(WIFSIGNALED(exit_status) && WTERMSIG(exit_status) == SIGKILL);
	assert_true(gone_within(grandchild, 2.0));
	assert_true(gone_within(wd, 2.0));
	waitpid(wd, NULL, WNOHANG);  /* unless the loop's SIGCHLD handler did */
}

/*
 * The same when the owner is killed with SIGKILL: a forked stand-in for
 * mcp-chain starts the watchdog and a child, and is killed; the child goes.
 */
static void test_watchdog_owner_killed(void **state)
{
	(void)state;
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t owner = fork();
	assert_true(owner >= 0);
	if (owner == 0) {
		close(pfd[0]);
		ev_loop_fork(EV_DEFAULT);
		if (proc_watchdog_start() < 0)
			_exit(1);
		char *argv[] = { "sleep", "30", NULL };
		struct proc q;
		if (proc_spawn(&q, "q", argv, NULL, NULL, NULL, NULL) < 0)
			_exit(1);
		pid_t pids[2] = { q.pid, proc_watchdog_pid() };
		if (write(pfd[1], pids, sizeof pids) != (ssize_t)sizeof pids)
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	pid_t pids[2] = { 0, 0 };
	struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 5000), 1);
	assert_int_equal(read(pfd[0], pids, sizeof pids), (ssize_t)sizeof pids);
	close(pfd[0]);
	assert_true(alive(pids[0]));
	kill(owner, SIGKILL);
	waitpid(owner, NULL, 0);
	assert_true(gone_within(pids[0], 2.0));
	assert_true(gone_within(pids[1], 2.0));
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_argv_never_a_shell),
		T(test_own_process_group),
		T(test_descriptors),
		T(test_reaped_with_status),
		T(test_stderr_lines),
		T(test_stop_grace_then_term),
		T(test_stop_term_ignored_then_kill),
		T(test_signal_reaches_group),
		T(test_signal_then_stop_kills),
		T(test_spawn_missing_command),
		T(test_env_and_cwd),
		T(test_watchdog_kills_groups_at_eof),
		T(test_watchdog_owner_killed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
