/*
 * proc.c - spawning, watching and stopping backend child processes.
 *
 * posix_spawnp (vfork-based in glibc) reports a failed exec to the caller
 * directly, so nothing blocks waiting on the child. The child gets its
 * own process group so that "npx" and the shells it starts can be
 * signalled together; every other descriptor of ours is closed in it.
 *
 * The watchdog is forked before the loop runs and reads our pipe with a
 * blocking read(2): each record is one int32, +pgid for a new group,
 * -pgid for one known empty. At EOF (we are gone, however) it sends
 * SIGKILL to every group it still knows and exits. It ignores the
 * signals a terminal or a client sends us and sits in a group of its own,
 * so that only our end can end it. Groups are pruned (kill(-g, 0) says
 * ESRCH) on every record, so a group number is not kept long after its
 * last process; Linux reuses no pid while it names a live group.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

extern char **environ;

static void on_child(struct ev_loop *loop, ev_child *w, int revents);
static void on_stderr(struct ev_loop *loop, ev_io *w, int revents);
static void on_kill_timer(struct ev_loop *loop, ev_timer *w, int revents);

static int wd_fd = -1;   /* our end of the watchdog's pipe */
static pid_t wd_pid;

/* Tells the watchdog about a group: +PGID new, -PGID gone. */
static void wd_send(pid_t pgid)
{
	int32_t rec = (int32_t)pgid;
	if (wd_fd < 0)
		return;
	ssize_t n;
	do
		n = write(wd_fd, &rec, sizeof rec);  /* 4 bytes: atomic */
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof rec)
		log_warn("watchdog: cannot register process group %d: %s", (int)pgid,
			 n < 0 ? strerror(errno) : "short write");
}

/* The watchdog's set of groups: adds, removes, prunes the empty ones. */
static size_t wd_apply(pid_t **groups, size_t n, size_t *cap, pid_t rec)
{
	if (rec > 0 && n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		pid_t *g = realloc(*groups, c * sizeof *g);
		if (g) {
			*groups = g;
			*cap = c;
		}
	}
	if (rec > 0 && n < *cap)
		(*groups)[n++] = rec;
	for (size_t i = 0; i < n;) {
		pid_t g = (*groups)[i];
		if (g == -rec || (kill(-g, 0) < 0 && errno == ESRCH))
			(*groups)[i] = (*groups)[--n];
		else
			i++;
	}
	return n;
}

/* The watchdog process: never returns. */
static void __attribute__((noreturn)) watchdog_main(int fd)
{
	int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
	sigset_t none;
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		signal(sigs[i], SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	int null = open("/dev/null", O_RDWR);
	for (int i = 0; i < 3 && null >= 0; i++)
		dup2(null, i);
	if (fd != 3) {
		dup2(fd, 3);
		fd = 3;
	}
	closefrom(4);
	pid_t *groups = NULL;
	size_t n = 0, cap = 0;
	int32_t rec[256];
	for (;;) {
		ssize_t r = read(fd, rec, sizeof rec);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (size_t i = 0; i < (size_t)r / sizeof *rec; i++)
			n = wd_apply(&groups, n, &cap, rec[i]);
	}
	for (size_t i = 0; i < n; i++)
		kill(-groups[i], SIGKILL);
	_exit(0);
}

/* Forks the watchdog. */
int proc_watchdog_start(void)
{
	int fds[2];
	if (wd_pid > 0)
		return 0;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return log_fail("watchdog: pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return log_fail("watchdog: fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(fds[1]);
		watchdog_main(fds[0]);
	}
	close(fds[0]);
	fcntl(fds[1], F_SETFL, O_NONBLOCK);  /* a stuck watchdog must not stop us */
	wd_fd = fds[1];
	wd_pid = pid;
	log_debug("watchdog: pid %d", (int)pid);
	return 0;
}

/* The watchdog's pid. */
pid_t proc_watchdog_pid(void)
{
	return wd_pid;
}

/* Lets the watchdog go: it kills what it knows and exits. */
pid_t proc_watchdog_stop(void)
{
	pid_t pid = wd_pid;
	if (wd_fd >= 0)
		close(wd_fd);
	wd_fd = -1;
	wd_pid = 0;
	return pid;
}

/* Length of the "KEY=" part of an environment entry. */
static size_t key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');
	return eq ? (size_t)(eq - kv) + 1 : strlen(kv);
}

/* Our environment with EXTRA's entries added or overriding. */
static char **build_env(char *const extra[])
{
	size_t n = 0, m = 0;
	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	char **env = calloc(n + m + 1, sizeof *env);
	size_t k = 0;
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool overridden = false;
		for (size_t j = 0; j < m && !overridden; j++)
			overridden = key_len(extra[j]) == key_len(environ[i]) &&
				memcmp(extra[j], environ[i], key_len(extra[j])) == 0;
		if (!overridden)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++)
		env[k++] = extra[j];
	return env;
}

/* Sets the spawn attributes: own group, clean mask, default signals. */
static void set_attrs(posix_spawnattr_t *at)
{
	sigset_t none, dflt;
	sigemptyset(&none);
	sigemptyset(&dflt);
	int sigs[] = { SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGQUIT };
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaddset(&dflt, sigs[i]);
	posix_spawnattr_init(at);
	posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(at, 0);
	posix_spawnattr_setsigmask(at, &none);
	posix_spawnattr_setsigdefault(at, &dflt);
}

/* Closes the three pipes' both ends as far as they were opened. */
static void close_pipes(int fds[3][2])
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (fds[i][j] >= 0)
				close(fds[i][j]);
}

/* Starts the child. */
int proc_spawn(struct proc *p, const char *name, char *const argv[],
	       char *const env[], const char *cwd, proc_exit_fn on_exit, void *arg)
{
	int fds[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;

	memset(p, 0, sizeof *p);
	p->name = name;
	p->in_fd = p->out_fd = p->err_fd = -1;
	for (int i = 0; i < 3; i++) {
		if (pipe2(fds[i], O_CLOEXEC) < 0) {
			close_pipes(fds);
			return log_fail("%s: pipe: %s", name, strerror(errno));
		}
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[0][0], 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1][1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[2][1], 2);
	if (cwd)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	set_attrs(&at);
	char **envp = build_env(env);
	int rc = envp ? posix_spawnp(&p->pid, argv[0], &fa, &at, argv, envp) : ENOMEM;
	free(envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		close_pipes(fds);
		p->pid = 0;
		p->spawn_errno = rc;
		snprintf(p->error, sizeof p->error, "cannot start \"%s\"%s%s: %s", argv[0],
			 cwd ? " in " : "", cwd ? cwd : "", strerror(rc));
		return -1;
	}
	close(fds[0][0]);
	close(fds[1][1]);
	close(fds[2][1]);
	p->pgid = p->pid;
	wd_send(p->pgid);
	p->in_fd = fds[0][1];
	p->out_fd = fds[1][0];
	p->err_fd = fds[2][0];
	fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
	p->on_exit = on_exit;
	p->arg = arg;
	framer_init(&p->err_fr, 65536);
	ev_child_init(&p->child, on_child, p->pid, 0);
	p->child.data = p;
	ev_child_start(EV_DEFAULT, &p->child);
	ev_io_init(&p->err_io, on_stderr, p->err_fd, EV_READ);
	p->err_io.data = p;
	ev_io_start(EV_DEFAULT, &p->err_io);
	ev_init(&p->kill_timer, on_kill_timer);
	p->kill_timer.data = p;
	log_info("%s: started \"%s\" (pid %d)", name, argv[0], (int)p->pid);
	return 0;
}

/* Remembers a stderr line for the exit report. */
static void keep_tail(struct proc *p, const char *line, size_t n)
{
	unsigned i = p->tail_next++ % PROC_TAIL;
	free(p->tail[i]);
	p->tail[i] = strndup(line, n);
}

/* Relays complete stderr lines as they are, after the backend's name. */
static void drain_stderr_lines(struct proc *p)
{
	const char *line;
	size_t n, total;
	enum frame_kind k;
	while ((k = framer_next(&p->err_fr, &line, &n, &total)) != FRAME_NONE) {
		if (k == FRAME_OVERSIZE)
			log_bare(LOG_INFO, "[%s] %.*s... (%zu bytes, cut)", p->name,
				 (int)(n > 200 ? 200 : n), line, total);
		else
			log_bare(LOG_INFO, "[%s] %.*s", p->name, (int)n, line);
		keep_tail(p, line, k == FRAME_OVERSIZE && n > 200 ? 200 : n);
	}
}

/* Reads what the child wrote to stderr; returns false at EOF or error. */
static bool read_stderr(struct proc *p)
{
	for (;;) {
		ssize_t n = framer_read(&p->err_fr, p->err_fd, NULL);
		if (n > 0) {
			drain_stderr_lines(p);
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return true;
		drain_stderr_lines(p);   /* a last line without "\n", completed */
		return false;
	}
}

/* Closes the stderr pipe. */
static void close_stderr(struct proc *p)
{
	ev_io_stop(EV_DEFAULT, &p->err_io);
	if (p->err_fd >= 0)
		close(p->err_fd);
	p->err_fd = -1;
}

/* stderr is readable. */
static void on_stderr(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc *p = w->data;
	(void)loop;
	(void)revents;
	if (!read_stderr(p))
		close_stderr(p);
}

/* Describes a wait status. */
void proc_describe_status(int status, char *out, size_t n)
{
	if (WIFEXITED(status))
		snprintf(out, n, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, n, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(out, n, "ended with wait status %d", status);
}

/* Logs the last lines the child wrote to stderr, unless each was relayed
 * as it came. */
void proc_log_tail(struct proc *p)
{
	if (log_enabled(LOG_INFO))
		return;
	unsigned start = p->tail_next > PROC_TAIL ? p->tail_next - PROC_TAIL : 0;
	for (unsigned i = start; i < p->tail_next; i++)
		log_warn("%s: stderr: %s", p->name, p->tail[i % PROC_TAIL]);
}

/* The child was reaped. */
static void on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct proc *p = w->data;
	(void)revents;
	ev_child_stop(loop, w);
	ev_timer_stop(loop, &p->kill_timer);
	if (p->err_fd >= 0) {
		read_stderr(p);  /* whatever it said last; never blocks */
		close_stderr(p);
	}
	pid_t pid = p->pid;
	p->pid = 0;
	/* grandchildren (npx -> sh -> node) must not outlive it */
	if (kill(-pid, SIGTERM) == 0)
		log_debug("%s: SIGTERM sent to the rest of process group %d", p->name, (int)pid);
	else if (errno == ESRCH)
		wd_send(-pid);  /* the group is empty: the watchdog forgets it */
	if (p->on_exit)
		p->on_exit(p, w->rstatus, p->arg);
}

/* Escalates: SIGTERM, then SIGKILL, to the group. */
static void on_kill_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc *p = w->data;
	(void)revents;
	if (p->pid <= 0)
		return;
	int sig = p->kill_step == 0 ? SIGTERM : SIGKILL;
	log_warn("%s: still running after %.1fs, sending %s", p->name, p->grace,
		 sig == SIGTERM ? "SIGTERM" : "SIGKILL");
	kill(-p->pid, sig);
	p->kill_step++;
	if (sig == SIGTERM) {
		ev_timer_set(w, p->grace, 0.);
		ev_timer_start(loop, w);
	}
}

/* Starts the stop sequence. */
void proc_stop(struct proc *p, double grace)
{
	if (p->pid <= 0 || ev_is_active(&p->kill_timer))
		return;
	p->grace = grace;
	ev_timer_set(&p->kill_timer, grace, 0.);
	ev_timer_start(EV_DEFAULT, &p->kill_timer);
}

/* Signals the child's group. */
void proc_signal_group(struct proc *p, int sig)
{
	if (p->pgid > 0)
		kill(-p->pgid, sig);  /* also reaches a reaped leader's leftovers */
}

/* Passes a signal on to the group; the next escalation is SIGKILL. */
void proc_signal(struct proc *p, int sig)
{
	if (p->pgid <= 0)
		return;
	kill(-p->pgid, sig);
	if (sig != SIGKILL && p->kill_step == 0)
		p->kill_step = 1;
}

/* True for the spawn errors a retry cannot mend. */
bool proc_spawn_error_is_permanent(const struct proc *p)
{
	switch (p->spawn_errno) {
	case ENOENT: case EACCES: case ENOTDIR: case ENOEXEC: case ELOOP: case ENAMETOOLONG:
	case EISDIR:
		return true;
	default:
		return false;
	}
}

/* Frees buffers and closes what is left open. */
void proc_release(struct proc *p)
{
	ev_child_stop(EV_DEFAULT, &p->child);
	ev_timer_stop(EV_DEFAULT, &p->kill_timer);
	close_stderr(p);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->out_fd = p->in_fd = -1;
	framer_release(&p->err_fr);
	for (int i = 0; i < PROC_TAIL; i++) {
		free(p->tail[i]);
		p->tail[i] = NULL;
	}
}
