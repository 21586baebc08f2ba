/*
 * proc.c - the process tree as the agent sees it: list children, signal them, kill and
 * reap every descendant.
 *
 * Why this works: the main agent is PID 1 (inside a sandbox) or a child subreaper (on a
 * test host), and every connection handler is a child subreaper too
 * (prctl(PR_SET_CHILD_SUBREAPER)).  A process whose parent dies is reparented to its
 * nearest living subreaper ancestor, so no descendant can escape by double-forking or by
 * setsid(): sooner or later it is our child, and "kill the children, reap, repeat until
 * waitpid says ECHILD" reaches all of them.  See prctl(2), PR_SET_CHILD_SUBREAPER.
 */
#include "agent.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "util.h"

/* How long one kill round waits for a SIGCHLD before looking again.  Only a safety net:
 * every exit of a child wakes us through the signalfd. */
#define KILL_ROUND_MS 100

static void pids_add(pid_t **v, size_t *n, size_t *cap, pid_t p)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = brig_xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*n)++] = p;
}

/* Reads a small /proc file whole into a NUL-terminated buffer. */
static int read_small(const char *path, brig_buf *b)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char tmp[4096];
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof(tmp));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        brig_buf_append(b, tmp, (size_t)r);
    }
    brig_buf_append(b, "", 0);
    return 0;
}

/* Parses the ppid out of /proc/<pid>/stat: "pid (comm) state ppid ...".  comm may hold
 * spaces and parentheses, hence the search for the last ')'. */
static pid_t stat_ppid(const char *stat)
{
    const char *p = strrchr(stat, ')');
    if (p == NULL)
        return -1;
    char state;
    int ppid;
    if (sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

/* Fallback for kernels without CONFIG_PROC_CHILDREN. */
static pid_t *children_by_scan(size_t *n)
{
    pid_t self = getpid(), *v = NULL;
    size_t cap = 0;
    *n = 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%.20s/stat", e->d_name);
        brig_buf b = {0};
        if (read_small(path, &b) == 0 && stat_ppid(b.data) == self)
            pids_add(&v, n, &cap, (pid_t)atoi(e->d_name));
        brig_buf_dispose(&b);
    }
    closedir(d);
    return v;
}

pid_t *brig_agent_proc_children(size_t *n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
    brig_buf b = {0};
    if (read_small(path, &b) < 0) {
        brig_buf_dispose(&b);
        return children_by_scan(n);
    }
    pid_t *v = NULL;
    size_t cap = 0;
    *n = 0;
    for (char *p = b.data, *end; *p != '\0'; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0)
            pids_add(&v, n, &cap, (pid_t)pid);
    }
    brig_buf_dispose(&b);
    return v;
}

void brig_agent_proc_signal(pid_t pid, int sig)
{
    pid_t pg = getpgid(pid);
    kill(pid, sig);
    if (pg > 1 && pg != getpgrp())
        kill(-pg, sig);
}

int brig_agent_proc_reap(brig_agent_watch *w)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            if (w != NULL && p == w->pid) {
                w->status = st;
                w->done = true;
            }
            continue;
        }
        if (p == 0)
            return 1;
        if (errno == EINTR)
            continue;
        return 0; /* ECHILD */
    }
}

uint64_t brig_agent_signalfd_drain(int sfd)
{
    uint64_t seen = 0;
    struct signalfd_siginfo si[8];
    for (;;) {
        ssize_t r = read(sfd, si, sizeof(si));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (size_t i = 0; i < (size_t)r / sizeof(si[0]); i++)
            if (si[i].ssi_signo < 64)
                seen |= UINT64_C(1) << si[i].ssi_signo;
    }
    return seen;
}

uint64_t brig_agent_proc_kill_all(int sfd, brig_agent_watch *w)
{
    uint64_t seen = 0;
    /* The command's group goes first and in one call: the kernel delivers a group kill
     * atomically with respect to fork(), so a fork bomb inside the group cannot outrun it.
     * Only while the leader is unreaped is its pid guaranteed to still name that group. */
    if (w != NULL && !w->done)
        kill(-w->pid, SIGKILL);
    bool pid1 = getpid() == 1;
    for (;;) {
        if (pid1) {
            kill(-1, SIGKILL); /* everyone in the namespace but us */
        } else {
            size_t n = 0;
            _cleanup_free_ pid_t *kids = brig_agent_proc_children(&n);
            for (size_t i = 0; i < n; i++)
                brig_agent_proc_signal(kids[i], SIGKILL);
        }
        if (brig_agent_proc_reap(w) == 0)
            return seen;
        struct pollfd p = {.fd = sfd, .events = POLLIN};
        if (poll(&p, 1, KILL_ROUND_MS) > 0)
            seen |= brig_agent_signalfd_drain(sfd);
    }
}
