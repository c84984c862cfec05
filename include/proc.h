/*
 * proc.h - a child process with pipes: spawned from argv (never through a
 * shell) in its own process group, its stderr logged line by line with
 * the owner's name, reaped by an ev_child watcher, stopped by closing its
 * stdin, then SIGTERM, then SIGKILL to the whole group.
 *
 * The watchdog (proc_watchdog_start) is a small process forked at
 * start-up that outlives us by a moment: it learns every process group
 * proc_spawn creates, and when our end of its pipe closes -- we exited,
 * however, even by SIGKILL -- it sends SIGKILL to each group still there.
 * PR_SET_PDEATHSIG would reach only the direct child, not what "npx"
 * starts under it.
 */
#ifndef MCPC_PROC_H
#define MCPC_PROC_H

#include <ev.h>
#include <stdbool.h>
#include <sys/types.h>

#include "framer.h"

#define PROC_TAIL 8

struct proc;

/* The child was reaped; STATUS is as from waitpid. */
typedef void (*proc_exit_fn)(struct proc *p, int status, void *arg);

struct proc {
	const char *name;        /* borrowed, for log lines */
	pid_t pid;               /* 0 when not running */
	pid_t pgid;              /* its process group, kept after reaping */
	int in_fd;               /* child's stdin (write end), -1 when closed */
	int out_fd;              /* child's stdout (read end), owned */
	int err_fd;              /* child's stderr (read end), owned */
	ev_child child;
	ev_io err_io;
	ev_timer kill_timer;
	int kill_step;           /* 0: none, 1: TERM (or INT) sent, 2: KILL sent */
	double grace;
	struct framer err_fr;
	char *tail[PROC_TAIL];   /* last stderr lines, ring */
	unsigned tail_next;
	char error[200];         /* why proc_spawn failed */
	int spawn_errno;         /* and its errno */
	proc_exit_fn on_exit;
	void *arg;
};

/*
 * Starts ARGV[0] (looked up in PATH) with ENV added to our environment
 * and CWD (NULL: ours). Returns 0, or -1 with the reason in p->error and
 * p->spawn_errno (not logged: the caller decides what the failure means).
 */
int proc_spawn(struct proc *p, const char *name, char *const argv[],
	       char *const env[], const char *cwd, proc_exit_fn on_exit, void *arg);

/*
 * Begins stopping: the caller closes stdin; after GRACE seconds SIGTERM
 * goes to the group, after GRACE more SIGKILL.
 */
void proc_stop(struct proc *p, double grace);

/* Sends SIG to the child's process group (if it ever ran). */
void proc_signal_group(struct proc *p, int sig);

/*
 * Passes SIG (SIGINT, SIGTERM) on to the group now, as the process would
 * get it run directly; a later escalation of proc_stop sends SIGKILL.
 */
void proc_signal(struct proc *p, int sig);

/* True when a failed spawn cannot succeed later with the same settings
 * (the command or the directory is missing or not executable). */
bool proc_spawn_error_is_permanent(const struct proc *p);

/*
 * Forks the watchdog. Call once, before the loop and any spawn; returns
 * 0, or -1 (logged; children then end only as we stop them).
 */
int proc_watchdog_start(void);

/* The watchdog's pid, or 0 when none runs. */
pid_t proc_watchdog_pid(void);

/*
 * Closes our end of the watchdog's pipe, as our exit would: it kills the
 * groups it knows and exits. Returns its pid, for the caller to reap (tests).
 */
pid_t proc_watchdog_stop(void);

/* Logs the last stderr lines at warn level. */
void proc_log_tail(struct proc *p);

/* Describes a wait status ("exited with status 1", "killed by signal 9"). */
void proc_describe_status(int status, char *out, size_t n);

/* Frees buffers; the child must have been reaped. */
void proc_release(struct proc *p);

#endif
