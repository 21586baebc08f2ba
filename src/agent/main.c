/*
 * main.c - brig-agent, PID 1 of a sandbox: reaps every process, accepts brigd's connections
 * and forks one handler process per connection (conn.c), and on SIGTERM/SIGINT from outside
 * the sandbox stops every process in an orderly way before exiting 0 (the sandbox's own
 * processes cannot stop it: is_stop).  docs/agent.md describes the process model.
 *
 *   brig-agent --listen-fd N   serve an already listening socket (runc --preserve-fds)
 *   ... --seccomp-fd N         first load the system-call filter in fd N (brigd's, compiled once)
 *   brig-agent --listen PATH   create, bind and listen on a unix socket (tests, debugging)
 *   brig-agent --listen-tcp P  listen on TCP port P of every address: inside a microVM,
 *                              whose only way in is QEMU's forward from the host (microvm.c)
 *   ... --console-off          once ready, fds 0-2 become /dev/null (gVisor: see below)
 *   brig-agent --version
 *
 * The main process does nothing slow: it polls the listening socket, a signalfd and the
 * handlers' control channels, forks, reaps, and keeps the table of processes that routes
 * proc_* connections to their supervisors (handlers.c).  Everything a peer can influence
 * happens in the handler processes.
 *
 * It also works when it is not PID 1 (tests on a host): it then makes itself a child
 * subreaper so orphans of its commands still come back to it, and on shutdown it signals
 * only its own children and their process groups, never kill(-1).
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <linux/audit.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "log.h"
#include "util.h"

#define SHUTDOWN_GRACE_S 5 /* SIGTERM to SIGKILL */
#define LISTEN_BACKLOG   128

/* The agent's state; one instance, in main(). */
typedef struct agent {
    pid_t pid;               /* our pid: 1 inside a sandbox */
    int lfd;                 /* the listening socket */
    const char *listen_path; /* the socket we created (--listen), unlinked at exit; or NULL */
    int sfd;                 /* signalfd: SIGCHLD, SIGTERM, SIGINT, SIGUSR1/2; non-blocking */
    bool quiet;              /* quiesced for a checkpoint (below): no listening socket */
    bool quiet_told;         /* ... and its socket's path removed: every connection is closed */
    bool accept_paused;      /* accept hit a resource limit: retry after a child exits */
    brig_handlers reg;       /* the handlers' control channels and the processes (handlers.c) */
} agent;

static void usage(FILE *f)
{
    fprintf(f, "usage: brig-agent (--listen-fd N | --listen PATH | --listen-tcp PORT) "
               "[--seccomp-fd N] [--console-off] | --version\n");
}

/* Descriptors 0-2 must be open: the handlers' pipes must not land on them (exec.c dup2s
 * them onto 0-2 in the command).  A runtime may start us with any of them closed. */
static void ensure_stdio(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) < 0)
            _exit(1);
}

static int adopt_listen_fd(agent *a, int fd, brig_error **err)
{
    struct stat st;
    int on = 0;
    socklen_t len = sizeof(on);
    if (fstat(fd, &st) < 0)
        return brig_error_sys(err, "--listen-fd %d", fd);
    if (!S_ISSOCK(st.st_mode) || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0 || !on)
        return brig_error_set(err, BRIG_E_INVALID, 0, "--listen-fd %d is not a listening socket",
                              fd);
    /* Keep it off 0-2 (see ensure_stdio), and out of every command. */
    if (fd < 3) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (hi < 0)
            return brig_error_sys(err, "dup --listen-fd");
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, fd) < 0)
            return brig_error_sys(err, "/dev/null");
        close(null);
        fd = hi;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    a->lfd = fd;
    return 0;
}

static int open_listen_path(agent *a, const char *path, brig_error **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return brig_error_set(err, BRIG_E_INVALID, 0, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return brig_error_set(err, BRIG_E_INVALID, 0, "%s exists and is not a socket", path);
        unlink(path); /* a stale socket of an earlier run */
    }
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "socket");
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return brig_error_sys(err, "bind %s", path);
    if (listen(fd, LISTEN_BACKLOG) < 0) {
        unlink(path);
        return brig_error_sys(err, "listen %s", path);
    }
    a->lfd = fd;
    a->listen_path = path;
    fd = -1;
    return 0;
}

static int open_listen_tcp(agent *a, long port, brig_error **err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    if (fd < 0)
        return brig_error_sys(err, "socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return brig_error_sys(err, "bind port %ld", port);
    if (listen(fd, LISTEN_BACKLOG) < 0)
        return brig_error_sys(err, "listen port %ld", port);
    a->lfd = fd;
    fd = -1;
    return 0;
}

static int setup_signals(agent *a, brig_error **err)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    /* Blocked signals are queued even for PID 1 of a pid namespace, which otherwise drops
     * signals it has no handler for (kernel/signal.c, sig_task_ignored / SIGNAL_UNKILLABLE). */
    sigprocmask(SIG_BLOCK, &mask, NULL);
    a->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a->sfd < 0)
        return brig_error_sys(err, "signalfd");
    return 0;
}

static bool resource_errno(int e)
{
    return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Accepts one connection and forks its handler, with a control channel to us (ctl.c). */
static void accept_one(agent *a)
{
    int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        if (resource_errno(errno)) {
            brig_warn("accept: %s", strerror(errno));
            a->accept_paused = true;
        }
        return; /* EINTR, EAGAIN, ECONNABORTED: nothing to do */
    }
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
        brig_warn("socketpair for a connection: %s", strerror(errno));
        a->accept_paused = resource_errno(errno);
        close(fd);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(a->lfd);
        close(a->sfd);
        close(ctl[0]);
        brig_handlers_close_all(&a->reg); /* other handlers' channels are not ours */
        brig_agent_conn_serve(fd, ctl[1], a->pid);
    }
    close(ctl[1]);
    if (pid < 0) {
        brig_warn("fork for a connection: %s", strerror(errno));
        close(ctl[0]);
    } else {
        brig_handlers_add(&a->reg, ctl[0], pid);
    }
    close(fd);
}

/* Non-PID-1 shutdown: SIGTERM to every child not signalled yet (handlers, and orphans that
 * were reparented to us since), and to their process groups. */
static void term_new_children(pid_t **done, size_t *ndone, size_t *cap)
{
    size_t n = 0;
    _cleanup_free_ pid_t *kids = brig_agent_proc_children(&n);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < *ndone && (*done)[j] != kids[i])
            j++;
        if (j < *ndone)
            continue;
        brig_agent_proc_signal(kids[i], SIGTERM);
        if (*ndone == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *done = brig_xrealloc(*done, *cap * sizeof(**done));
        }
        (*done)[(*ndone)++] = kids[i];
    }
}

/* SIGTERM to every process, up to SHUTDOWN_GRACE_S seconds for them to exit, SIGKILL to
 * the rest, reap everything.  As PID 1 that is every process of the sandbox (kill(-1)); on
 * a host only our own descendants. */
static void agent_shutdown(agent *a)
{
    close(a->lfd);
    a->lfd = -1;
    /* Every supervisor learns that it is forgotten: it exits once its process is gone. */
    brig_handlers_close_all(&a->reg);
    if (a->listen_path != NULL)
        unlink(a->listen_path);

    bool pid1 = a->pid == 1;
    _cleanup_free_ pid_t *done = NULL;
    size_t ndone = 0, cap = 0;
    if (pid1)
        kill(-1, SIGTERM);
    else
        term_new_children(&done, &ndone, &cap);

    _cleanup_close_ int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec its = {.it_value = {.tv_sec = SHUTDOWN_GRACE_S}};
    if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0)
        brig_warn("shutdown timer: %s; killing at once", strerror(errno));
    else
        while (brig_agent_proc_reap(NULL) > 0) {
            struct pollfd p[2] = {{.fd = a->sfd, .events = POLLIN}, {.fd = tfd, .events = POLLIN}};
            if (poll(p, 2, -1) < 0 && errno != EINTR)
                break;
            if (p[1].revents & POLLIN)
                break;
            if (p[0].revents & POLLIN) {
                brig_agent_signalfd_drain(a->sfd);
                if (!pid1)
                    term_new_children(&done, &ndone, &cap);
            }
        }
    brig_agent_proc_kill_all(a->sfd, NULL);
}

/* Whether a SIGTERM/SIGINT is a stop.  As PID 1 only one sent from outside the
 * sandbox's pid namespace is (the runtime's, brigd's): kill(2) or pidfd_send_signal
 * from an ancestor namespace arrives as SI_USER with ssi_pid 0.  The sandbox's own
 * processes can reach PID 1 with these signals too, blocked as they are (the kernel
 * drops only unblocked ones without a handler): by kill/sigqueue (their pid is
 * visible here, so ssi_pid is not 0) or through F_SETOWN/F_SETSIG on a file of
 * theirs (si_code POLL_*, ssi_pid 0).  Those are read and dropped.  Not PID 1 (a
 * test host), every one is a stop. */
static bool from_outside(const agent *a, const struct signalfd_siginfo *si)
{
    return a->pid != 1 || (si->ssi_code == SI_USER && si->ssi_pid == 0);
}

static bool is_stop(const agent *a, const struct signalfd_siginfo *si)
{
    return (si->ssi_signo == SIGTERM || si->ssi_signo == SIGINT) && from_outside(a, si);
}

/* Quiescing for gVisor's checkpoint (docs/snapshots.md): gVisor cannot save a socket bound
 * to, or connected through, a host socket, and ours (--listen under runsc --host-uds=create)
 * and every connection brigd made to it are.  SIGUSR2 from outside (`runsc kill`): the
 * listening socket closes, every connection is dropped (handlers.c), and once they are all
 * closed the socket's path goes, which tells brigd (it sees the host's file go).  SIGUSR1
 * from outside, after the restore: listening again.  Processes and their output stay. */
static void quiesce(agent *a)
{
    if (a->listen_path == NULL || a->quiet)
        return;
    close(a->lfd);
    a->lfd = -1;
    a->quiet = true;
    a->quiet_told = false;
    brig_handlers_quiesce(&a->reg);
    brig_info("quiescing: every connection closes");
}

static void wake(agent *a)
{
    if (!a->quiet)
        return;
    brig_error *err = NULL;
    if (open_listen_path(a, a->listen_path, &err) < 0) {
        brig_err("listening again: %s", err->msg);
        brig_error_clear(&err);
        return;
    }
    a->quiet = false;
    brig_handlers_wake(&a->reg);
    brig_info("listening again");
}

/* Drains the signalfd; true when a stop (is_stop) was among the signals. */
static bool read_signals(agent *a)
{
    bool stop = false;
    struct signalfd_siginfo si[8];
    for (;;) {
        ssize_t r = read(a->sfd, si, sizeof(si));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (size_t i = 0; i < (size_t)r / sizeof(si[0]); i++) {
            stop |= is_stop(a, &si[i]);
            if (si[i].ssi_signo == SIGUSR2 && from_outside(a, &si[i]))
                quiesce(a);
            else if (si[i].ssi_signo == SIGUSR1 && from_outside(a, &si[i]))
                wake(a);
        }
    }
    return stop;
}

/* The accept loop; returns the exit status once shut down. */
static int agent_run(agent *a)
{
    _cleanup_free_ struct pollfd *p = NULL;
    size_t pcap = 0;
    for (;;) {
        size_t np = 2 + a->reg.n;
        if (np > pcap) {
            pcap = np * 2;
            p = brig_xrealloc(p, pcap * sizeof(*p));
        }
        p[0] = (struct pollfd){.fd = a->sfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = a->accept_paused ? -1 : a->lfd, .events = POLLIN};
        for (size_t i = 0; i < a->reg.n; i++)
            p[2 + i] = (struct pollfd){.fd = a->reg.v[i].ctl, .events = POLLIN};
        int n = poll(p, (nfds_t)np, a->accept_paused ? 1000 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            brig_err("poll: %s", strerror(errno));
            agent_shutdown(a);
            return 1;
        }
        if (n == 0)
            a->accept_paused = false;
        if (p[0].revents & POLLIN) {
            bool stop = read_signals(a);
            brig_agent_proc_reap(NULL);
            a->accept_paused = false;
            if (stop) {
                agent_shutdown(a);
                return 0;
            }
        }
        /* Control messages first: a registration must be in the table before a route
         * that depends on it (handlers wait for the answer, so there is no race within
         * one channel; this keeps the table current before new handlers are forked). */
        size_t nreg = a->reg.n;
        for (size_t i = 0; i < nreg; i++)
            if (p[2 + i].revents)
                brig_handlers_serve(&a->reg, i);
        brig_handlers_sweep(&a->reg);
        if (a->quiet && !a->quiet_told && brig_handlers_quiet(&a->reg)) {
            unlink(a->listen_path);
            a->quiet_told = true;
            brig_info("quiesced");
        }
        if (a->quiet) {
            continue;
        } else if (p[1].revents & POLLIN) {
            accept_one(a);
        } else if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            brig_err("the listening socket failed");
            agent_shutdown(a);
            return 1;
        }
    }
}

/* Limits every command inherits; lowering needs no privilege: no core dumps (a
 * crashing program must not fill the disk), and open files capped at 65536. */
static void lower_limits(void)
{
    struct rlimit rl = {0, 0};
    if (setrlimit(RLIMIT_CORE, &rl) < 0)
        brig_warn("RLIMIT_CORE: %s", strerror(errno));
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
        (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536)) {
        rl.rlim_cur = rl.rlim_max = 65536;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            brig_warn("RLIMIT_NOFILE: %s", strerror(errno));
    }
}

/* A call of a foreign ABI ends its whole process.  brigd's seccomp profile admits
 * x86-64 alone (runtime/seccomp.c), so an i386 call (int $0x80) or an x32 one (bit 30
 * of the number) gets libseccomp's bad-arch action, which runc leaves at
 * SECCOMP_RET_KILL_THREAD: made by a second thread, the call would end that thread
 * only and leave its process running without it, holding whatever it held.  This
 * filter, inherited by every command, says SECCOMP_RET_KILL_PROCESS for the same
 * calls; of two filters' actions the kernel takes the stronger.  Installed only where
 * the runtime set no_new_privs (every sandbox): an agent run on a host for tests
 * leaves its process as it found it. */
static void kill_foreign_abis(void)
{
#if defined(__x86_64__)
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        /* x32: 0x40000000 + n.  Numbers from 0x80000000 up stay the other filter's. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xC0000000),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x40000000, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = BRIG_ARRAY_LEN(code), .filter = code};
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        brig_warn("seccomp filter for foreign ABIs: %s", strerror(errno));
#endif
}

/* brigd's system-call filter for the sandbox (runtime/seccomp.c): a classic BPF program
 * in fd, read at offset 0 (every sandbox shares the one sealed file), loaded before we
 * do anything a sandbox's program could influence, then inherited by every command.
 * Fails closed: a sandbox whose filter does not load does not start. */
static int load_filter(int fd)
{
    static struct sock_filter code[BPF_MAXINSNS];
    ssize_t got = pread(fd, code, sizeof(code), 0);
    close(fd);
    if (got <= 0 || got % (ssize_t)sizeof(code[0]) != 0) {
        brig_err("--seccomp-fd: no BPF program (%zd bytes)", got);
        return -1;
    }
    struct sock_fprog prog = {.len = (unsigned short)(got / (ssize_t)sizeof(code[0])),
                              .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
        brig_err("--seccomp-fd: loading the filter: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Our stdout and stderr are a host file (the runtime's console: agent.log).  Under
 * gVisor the sandbox's root reopens it through /proc/1/fd/1 (gVisor's /proc does not
 * refuse that for a non-dumpable process as Linux does) and could write to it without
 * bound, outside its disk: once ready, and before any handler is forked, we hold none of
 * it.  What we log afterwards is lost; start-up problems are in the file already. */
static void console_detach(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        brig_warn("console-off: /dev/null: %s", strerror(errno));
        return;
    }
    for (int i = 0; i <= 2; i++)
        if (dup2(fd, i) < 0)
            brig_warn("console-off: dup2 %d: %s", i, strerror(errno));
    if (fd > 2)
        close(fd);
}

/* The command line. */
typedef struct options {
    const char *path; /* --listen */
    long listen_fd;   /* --listen-fd; -1: none */
    long tcp_port;    /* --listen-tcp; -1: none */
    long filter_fd;   /* --seccomp-fd; -1: none */
    bool console_off; /* --console-off */
} options;

/* A descriptor number of the command line into *fd: 0, or -1 (said on stderr). */
static int fd_arg(const char *flag, const char *v, long *fd)
{
    char *end;
    errno = 0;
    *fd = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || *fd < 0 || *fd > INT32_MAX) {
        fprintf(stderr, "brig-agent: bad %s: %s\n", flag, v);
        return -1;
    }
    return 0;
}

/* Parses argv into *o: -1 to go on, else the exit status (--version, --help, a mistake). */
static int parse_options(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"listen-fd", required_argument, NULL, 'f'},
        {"seccomp-fd", required_argument, NULL, 's'},
        {"listen", required_argument, NULL, 'l'},
        {"listen-tcp", required_argument, NULL, 't'},
        {"console-off", no_argument, NULL, 'c'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.listen_fd = -1, .tcp_port = -1, .filter_fd = -1};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (fd_arg("--listen-fd", optarg, &o->listen_fd) < 0)
                return 2;
            break;
        case 's':
            if (fd_arg("--seccomp-fd", optarg, &o->filter_fd) < 0)
                return 2;
            break;
        case 'l':
            o->path = optarg;
            break;
        case 't':
            if (fd_arg("--listen-tcp", optarg, &o->tcp_port) < 0)
                return 2;
            if (o->tcp_port == 0 || o->tcp_port > 65535) {
                fprintf(stderr, "brig-agent: bad --listen-tcp: %s\n", optarg);
                return 2;
            }
            break;
        case 'c':
            o->console_off = true;
            break;
        case 'V':
            printf("brig-agent %s\n", BRIG_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || (o->path != NULL) + (o->listen_fd >= 0) + (o->tcp_port > 0) != 1) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    options o;
    int done = parse_options(argc, argv, &o);
    if (done >= 0)
        return done;
    const char *path = o.path;
    long listen_fd = o.listen_fd;

    brig_log_init("brig-agent", BRIG_LOG_INFO);
    /* The log is a host file of one sandbox, and much of what reaches it (a tar's
     * stderr in an error, say) the sandbox chose: one rate for all of it, shared with
     * the connection handlers we fork. */
    brig_log_limit_all();
    ensure_stdio();
    umask(022);
    /* Whatever the runtime left open must not leak into commands.  Best effort: older
     * kernels and gVisor may lack close_range. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);

    /* Not dumpable: the sandbox's own root shares our uid, and must not ptrace
     * PID 1 or its handlers, nor open their /proc files (a traced agent could be
     * stopped, or made to write without bound to its log outside the sandbox's
     * disk).  Commands are exec'd, which makes them dumpable again. */
    if (prctl(PR_SET_DUMPABLE, 0) < 0)
        brig_warn("PR_SET_DUMPABLE: %s", strerror(errno));
    if (o.filter_fd >= 0 && load_filter((int)o.filter_fd) < 0)
        return 1;
    lower_limits();
    kill_foreign_abis();
    agent a = {.pid = getpid(), .lfd = -1, .sfd = -1};
    brig_error *err = NULL;
    if (a.pid != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        brig_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    int r = path             ? open_listen_path(&a, path, &err)
            : o.tcp_port > 0 ? open_listen_tcp(&a, o.tcp_port, &err)
                             : adopt_listen_fd(&a, (int)listen_fd, &err);
    if (r == 0)
        r = setup_signals(&a, &err);
    if (r < 0) {
        brig_err("%s", err->msg);
        brig_error_clear(&err);
        if (a.listen_path != NULL)
            unlink(a.listen_path);
        return 1;
    }
    /* jansson seeds its hash tables from /dev/urandom at the first JSON object: once here,
     * not in every handler we fork (an open and a read on each connection's path). */
    json_object_seed(0);
    brig_info("brig-agent %s ready (pid %d)", BRIG_VERSION, (int)a.pid);
    if (o.console_off)
        console_detach();
    return agent_run(&a);
}
