/*
 * spawn.c - spawning, subreaping and waiting (see spawn.h).
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include "log.h"

extern char **environ;

/* A child somebody will brig_proc_wait() for. */
typedef struct waiter {
    pid_t pid;
    int done;
    int status;
    struct waiter *next;
} waiter;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static waiter *waiters;
static pthread_t reaper;
static int sig_fd = -1;  /* signalfd for SIGCHLD */
static int stop_fd = -1; /* eventfd: wakes the reaper to exit */

static waiter *find(pid_t pid)
{
    for (waiter *w = waiters; w; w = w->next)
        if (w->pid == pid)
            return w;
    return NULL;
}

static void reap_all(void)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        pthread_mutex_lock(&lock);
        waiter *w = find(pid);
        if (w) {
            w->done = 1;
            w->status = st;
            pthread_cond_broadcast(&cond);
        }
        pthread_mutex_unlock(&lock);
        if (w == NULL)
            brig_debug("reaped orphan %d", (int)pid);
    }
}

static void *reaper_main(void *arg)
{
    (void)arg;
    struct pollfd pfd[2] = {{sig_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    for (;;) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            brig_err("reaper: poll: %s", strerror(errno));
            return NULL;
        }
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
        }
        /* Always reap: SIGCHLDs coalesce. */
        reap_all();
        if (pfd[1].revents)
            return NULL;
    }
}

int brig_proc_init(brig_error **err)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return brig_error_sys(err, "prctl(PR_SET_CHILD_SUBREAPER)");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return brig_error_sys(err, "block SIGCHLD");
    sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sig_fd < 0)
        return brig_error_sys(err, "signalfd");
    stop_fd = eventfd(0, EFD_CLOEXEC);
    if (stop_fd < 0)
        return brig_error_sys(err, "eventfd");
    int r = pthread_create(&reaper, NULL, reaper_main, NULL);
    if (r != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, r, "start reaper thread");
    return 0;
}

void brig_proc_shutdown(void)
{
    if (stop_fd < 0)
        return;
    uint64_t one = 1;
    (void)!write(stop_fd, &one, sizeof(one));
    pthread_join(reaper, NULL);
    close(stop_fd);
    close(sig_fd);
    stop_fd = sig_fd = -1;
}

/* The child of spawn_masked, after fork: async-signal-safe calls only.  fds: stdio
 * (-1: /dev/null) and the extra fds, all at >= 64. */
static void masked_child(const brig_spawn *s, const int *fds, size_t nfds)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        _exit(127);
    for (size_t i = 0; s->mask[i]; i++)
        if (mount("tmpfs", s->mask[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,mode=0555") < 0)
            _exit(127);
    for (int i = 0; i < (int)nfds; i++) {
        int fd = fds[i] >= 0 ? fds[i] : open("/dev/null", i == 0 ? O_RDONLY : O_WRONLY);
        if (fd < 0 || dup2(fd, i) < 0)
            _exit(127);
    }
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(s->argv[0], (char *const *)s->argv, environ);
    _exit(127);
}

/* A spawn with s->mask: fork, a mount namespace, exec (posix_spawn cannot). */
static int spawn_masked(const brig_spawn *s, const int *dups, size_t ndups, pid_t *pid,
                        brig_error **err)
{
    int fds[3 + SPAWN_EXTRA_MAX];
    int stdio[3] = {s->stdin_fd, s->stdout_fd, s->stderr_fd};
    size_t nfds = 0;
    for (int i = 0; i < 3; i++) {
        fds[nfds] = stdio[i] >= 0 ? fcntl(stdio[i], F_DUPFD_CLOEXEC, 64) : -1;
        if (stdio[i] >= 0 && fds[nfds] < 0) {
            for (size_t j = 0; j < nfds; j++)
                if (fds[j] >= 0)
                    close(fds[j]);
            return brig_error_sys(err, "dup fd for child");
        }
        nfds++;
    }
    for (size_t i = 0; i < ndups; i++)
        fds[nfds++] = dups[i];
    pthread_mutex_lock(&lock);
    pid_t p = fork();
    if (p == 0)
        masked_child(s, fds, nfds);
    if (p > 0) {
        waiter *w = brig_xcalloc(1, sizeof(*w));
        w->pid = p;
        w->next = waiters;
        waiters = w;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (p < 0)
        return brig_error_sys(err, "fork");
    *pid = p;
    return 0;
}

int brig_proc_spawn(const brig_spawn *s, pid_t *pid, brig_error **err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int dups[SPAWN_EXTRA_MAX];
    size_t ndups = 0;
    int r = -1;
    if (s->n_extra > BRIG_ARRAY_LEN(dups))
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "too many fds for a child");
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);

    /* Move the extra fds out of the way first (to >= 64, close-on-exec), so that
     * each dup2 below has distinct source and target and the target loses
     * FD_CLOEXEC; then stdio. */
    for (size_t i = 0; i < s->n_extra; i++) {
        dups[i] = fcntl(s->extra_fds[i], F_DUPFD_CLOEXEC, 64);
        if (dups[i] < 0) {
            brig_error_sys(err, "dup fd for child");
            goto out;
        }
        ndups++;
    }
    if (s->mask) {
        r = spawn_masked(s, dups, ndups, pid, err);
        goto out;
    }
    int stdio[3] = {s->stdin_fd, s->stdout_fd, s->stderr_fd};
    for (int i = 0; i < 3; i++) {
        if (stdio[i] < 0)
            posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0);
        else
            posix_spawn_file_actions_adddup2(&fa, stdio[i], i);
    }
    for (size_t i = 0; i < ndups; i++)
        posix_spawn_file_actions_adddup2(&fa, dups[i], 3 + (int)i);

    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (s->own_group) {
        posix_spawnattr_setpgroup(&attr, 0);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attr, flags);

    pthread_mutex_lock(&lock);
    int e = posix_spawnp(pid, s->argv[0], &fa, &attr, (char *const *)s->argv, environ);
    if (e == 0) {
        waiter *w = brig_xcalloc(1, sizeof(*w));
        w->pid = *pid;
        w->next = waiters;
        waiters = w;
        r = 0;
    }
    pthread_mutex_unlock(&lock);
    if (e != 0)
        brig_error_set(err, BRIG_E_INTERNAL, e, "cannot run %s", s->argv[0]);
out:
    for (size_t i = 0; i < ndups; i++)
        close(dups[i]);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return r;
}

int brig_proc_wait(pid_t pid)
{
    pthread_mutex_lock(&lock);
    waiter **pp = &waiters;
    while (*pp && (*pp)->pid != pid)
        pp = &(*pp)->next;
    if (*pp == NULL) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    waiter *w = *pp;
    while (!w->done)
        pthread_cond_wait(&cond, &lock);
    /* Unlink: the list may have changed while we slept. */
    for (pp = &waiters; *pp != w; pp = &(*pp)->next)
        ;
    *pp = w->next;
    int st = w->status;
    free(w);
    pthread_mutex_unlock(&lock);
    return st;
}

int brig_proc_run(const char *const *argv, brig_buf *out, size_t cap, int *status, brig_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    brig_spawn s = {.argv = argv, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = p[1]};
    pid_t pid;
    int r = brig_proc_spawn(&s, &pid, err);
    close(p[1]);
    if (r < 0) {
        close(p[0]);
        return -1;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = read(p[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (out && out->len < cap)
            brig_buf_append(out, buf, (size_t)n < cap - out->len ? (size_t)n : cap - out->len);
    }
    close(p[0]);
    *status = brig_proc_wait(pid);
    return 0;
}

int brig_proc_userns(unsigned base, unsigned size, int *out, brig_error **err)
{
    return brig_proc_userns_map(0, base, size, out, err);
}

int brig_proc_userns_map(unsigned from, unsigned base, unsigned size, int *out, brig_error **err)
{
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    if (pipe2(down, O_CLOEXEC) < 0) {
        close(up[0]);
        close(up[1]);
        return brig_error_sys(err, "pipe");
    }
    /* Registered under the lock, like a spawn, so the reaper hands us its status. */
    pthread_mutex_lock(&lock);
    pid_t pid = fork();
    if (pid == 0) {
        /* Child: async-signal-safe calls only (we forked a threaded process).  It
         * becomes the range's root first, so that the namespace's owner - whom the
         * kernel charges per-user counters to (inotify instances, queued signals,
         * message queue bytes) - is this sandbox, not the host's root. */
        char c = 'n';
        if (syscall(SYS_setgroups, 0, NULL) == 0 && syscall(SYS_setresgid, base, base, base) == 0 &&
            syscall(SYS_setresuid, base, base, base) == 0 && unshare(CLONE_NEWUSER) == 0)
            c = 'y';
        (void)!write(up[1], &c, 1);
        (void)!read(down[0], &c, 1);
        _exit(0);
    }
    if (pid > 0) {
        waiter *w = brig_xcalloc(1, sizeof(*w));
        w->pid = pid;
        w->next = waiters;
        waiters = w;
    }
    pthread_mutex_unlock(&lock);
    close(up[1]);
    close(down[0]);
    int r = -1;
    if (pid < 0) {
        brig_error_sys(err, "fork");
        goto out;
    }
    char c = 0;
    if (read(up[0], &c, 1) != 1 || c != 'y') {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot create a user namespace");
        goto reap;
    }
    char path[64], map[64];
    int n = snprintf(map, sizeof(map), "%u %u %u\n", from, base, size);
    const char *files[] = {"uid_map", "gid_map"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, (size_t)n) != n) {
            brig_error_sys(err, "write %s", path);
            if (fd >= 0)
                close(fd);
            goto reap;
        }
        close(fd);
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    *out = open(path, O_RDONLY | O_CLOEXEC);
    if (*out < 0)
        brig_error_sys(err, "open %s", path);
    else
        r = 0;
reap:
    (void)!write(down[1], "x", 1);
    brig_proc_wait(pid);
out:
    close(up[0]);
    close(down[1]);
    return r;
}

void brig_proc_describe(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "ended with wait status %d", status);
}
