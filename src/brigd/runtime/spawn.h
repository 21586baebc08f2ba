/*
 * spawn.h - brigd's child processes.
 *
 * brigd is a child subreaper (PR_SET_CHILD_SUBREAPER): container init processes
 * that runc leaves behind are reparented to brigd, never to the host's init, and
 * brigd reaps them.  One reaper thread owns waitpid(-1); a function that spawned
 * a child and wants its status registers it at spawn time and gets the status
 * handed over by the reaper, so the two never race for the same child.
 *
 * brig_proc_init() must run before any other thread exists: it blocks SIGCHLD
 * for the whole process.
 */
#ifndef BRIG_SPAWN_H
#define BRIG_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "util.h"

int brig_proc_init(brig_error **err);
void brig_proc_shutdown(void);

#define SPAWN_EXTRA_MAX 32 /* extra_fds a child may get (a microVM's disks) */

typedef struct brig_spawn {
    const char *const *argv; /* argv[0] is an absolute path or looked up in PATH */
    int stdin_fd;            /* -1: /dev/null */
    int stdout_fd;           /* -1: /dev/null */
    int stderr_fd;           /* -1: /dev/null */
    const int *extra_fds;    /* become fds 3, 4, ... in the child (SPAWN_EXTRA_MAX) */
    size_t n_extra;
    int own_group; /* its own process group (pgid = its pid): killpg() reaches its children */
    /* NULL, or paths the child does not see: it runs in a mount namespace of its own (a
     * slave of ours) with an empty read-only tmpfs over each. */
    const char *const *mask;
} brig_spawn;

/* Starts a child with default signal dispositions and an empty signal mask.
 * The caller must collect it with brig_proc_wait(). */
int brig_proc_spawn(const brig_spawn *s, pid_t *pid, brig_error **err);

/* Blocks until the reaper has collected pid; returns its wait status. */
int brig_proc_wait(pid_t pid);

/* Spawns argv with stdout+stderr captured (at most `cap` bytes kept, the rest
 * read and dropped), waits, and stores the wait status.  out may be NULL. */
int brig_proc_run(const char *const *argv, brig_buf *out, size_t cap, int *status,
                  brig_error **err);

/* A new user namespace, owned by host uid `base`, whose uid and gid maps are
 * `0 base size`; returns an fd of it (O_CLOEXEC) in *out.  Costs a short-lived
 * child process. */
int brig_proc_userns(unsigned base, unsigned size, int *out, brig_error **err);
/* The same with ids from.. (instead of 0..) mapped to base..: through it an id-mapped mount
 * shows files owned by from+k as owned by base+k (a snapshot's layer, oci_layer.c). */
int brig_proc_userns_map(unsigned from, unsigned base, unsigned size, int *out, brig_error **err);

/* "exited with status 1" / "killed by signal 9". */
void brig_proc_describe(int status, char *buf, size_t len);

#endif
