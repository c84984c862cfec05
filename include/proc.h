/*
 * proc.h - a child process with pipes: spawned from argv (never through a
 * shell) in its own process group, its stderr logged line by line with
 * the owner's name, reaped by an ev_child watcher, stopped by closing its
 * stdin, then SIGTERM, then SIGKILL to the whole group.
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
	int kill_step;           /* 0: none, 1: TERM sent, 2: KILL sent */
	double grace;
	struct framer err_fr;
	char *tail[PROC_TAIL];   /* last stderr lines, ring */
	unsigned tail_next;
	char error[200];         /* why proc_spawn failed */
	proc_exit_fn on_exit;
	void *arg;
};

/*
 * Starts ARGV[0] (looked up in PATH) with ENV added to our environment
 * and CWD (NULL: ours). Returns 0, or -1 with the reason logged.
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

/* Logs the last stderr lines at warn level. */
void proc_log_tail(struct proc *p);

/* Describes a wait status ("exited with status 1", "killed by signal 9"). */
void proc_describe_status(int status, char *out, size_t n);

/* Frees buffers; the child must have been reaped. */
void proc_release(struct proc *p);

#endif
