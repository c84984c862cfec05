/*
 * redis_test.c - a real redis-server for the shared store's tests: see
 * redis_test.h.
 */
#include "redis_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <ev.h>

unsigned rdt_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* True when something accepts on 127.0.0.1:PORT. */
static bool accepts(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

pid_t rdt_start(unsigned port)
{
	char p[16];
	snprintf(p, sizeof p, "%u", port);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		dup2(null, 2);
		execlp("redis-server", "redis-server", "--port", p, "--save", "", "--appendonly",
		       "no", "--bind", "127.0.0.1", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !accepts(port); i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			fail_msg("redis-server exited before accepting (is it installed?)");
		usleep(10000);
	}
	assert_true(accepts(port));
	return pid;
}

void rdt_stop(pid_t pid)
{
	int st;
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
}

/* Wakes the loop. */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

bool rdt_run_until(const int *flag, double seconds)
{
	double end = ev_time() + seconds;
	while ((!flag || !*flag) && ev_time() < end) {
		ev_timer t;   /* a fresh one each time: the loop never sleeps past END */
		ev_timer_init(&t, on_tick, 0.01, 0.);
		ev_timer_start(EV_DEFAULT, &t);
		ev_run(EV_DEFAULT, EVRUN_ONCE);
		ev_timer_stop(EV_DEFAULT, &t);
	}
	return flag && *flag;
}

void rdt_run_for(double seconds)
{
	rdt_run_until(NULL, seconds);
}
