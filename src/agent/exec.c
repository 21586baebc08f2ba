/*
 * exec.c - the `exec` operation up to the running process: the user, the environment, the
 * command line, the descriptors (pipes, or a pseudo-terminal), the fork, the registration with
 * PID 1; then the handler becomes the process's supervisor (super.c) for the rest of its life.
 *
 * The child half (child_run) runs between fork and execve: a new session and process group,
 * stdin/stdout/stderr, the controlling terminal, groups/gid/uid, the working directory, and
 * the default signal state.  A failure there that is the client's business (a bad cwd, a
 * user that cannot be switched to) travels back on a CLOEXEC pipe and becomes the error
 * answer; a failed execve is reported like a shell does (stderr, exit 127 or 126).
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>

#include "log.h"
#include "util.h"

extern char **environ;

/* The default environment of a command; the request's `env` overrides and extends it. */
static const char *const default_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
};

/* Everything the child needs, prepared before the fork (the child only makes system calls). */
typedef struct spawn_plan {
    const char **argv;     /* NULL-terminated; array owned, strings borrowed */
    char **envp;           /* NULL-terminated; array and strings owned */
    const char *cwd;       /* borrowed or static */
    const brig_user *user; /* NULL: stay root with the agent's groups */
    int in, out, err;      /* the child's stdin/stdout/stderr */
    int tty;               /* the pty slave to make the controlling terminal, or -1 */
} spawn_plan;

static void plan_dispose(spawn_plan *p)
{
    free(p->argv);
    for (char **e = p->envp; e != NULL && *e != NULL; e++)
        free(*e);
    free(p->envp);
}

/* Appends NAME=value unless the request's env sets NAME. */
static void env_default(char **envp, size_t *k, json_t *jenv, const char *name, const char *value)
{
    if (jenv == NULL || json_object_get(jenv, name) == NULL)
        envp[(*k)++] = brig_asprintf("%s=%s", name, value);
}

static void plan_build(spawn_plan *p, const brig_exec_spec *s, const brig_user *u)
{
    if (s->argv != NULL) {
        size_t n = json_array_size(s->argv);
        p->argv = brig_xcalloc(n + 1, sizeof(*p->argv));
        for (size_t i = 0; i < n; i++)
            p->argv[i] = json_string_value(json_array_get(s->argv, i));
    } else {
        /* bash -l for a login environment (profile PATH etc.); the minimal template is
         * busybox only and has just /bin/sh. */
        bool bash = access("/bin/bash", X_OK) == 0;
        p->argv = brig_xcalloc(4, sizeof(*p->argv));
        p->argv[0] = bash ? "/bin/bash" : "/bin/sh";
        p->argv[1] = bash ? "-lc" : "-c";
        p->argv[2] = s->cmd;
    }

    json_t *jenv = s->env;
    size_t cap = BRIG_ARRAY_LEN(default_env) + 4 + (jenv ? json_object_size(jenv) : 0);
    p->envp = brig_xcalloc(cap + 1, sizeof(*p->envp));
    size_t k = 0;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(default_env); i++) {
        size_t nlen = (size_t)(strchr(default_env[i], '=') - default_env[i]);
        _cleanup_free_ char *name = brig_xstrndup(default_env[i], nlen);
        env_default(p->envp, &k, jenv, name, default_env[i] + nlen + 1);
    }
    env_default(p->envp, &k, jenv, "HOME", u ? u->home : "/root");
    /* A terminal understands escape codes; a pipe read by a program should get none. */
    env_default(p->envp, &k, jenv, "TERM", s->pty ? "xterm-256color" : "dumb");
    if (u != NULL) {
        env_default(p->envp, &k, jenv, "USER", u->name);
        env_default(p->envp, &k, jenv, "LOGNAME", u->name);
    }
    const char *name;
    json_t *jval;
    json_object_foreach(jenv, name, jval) p->envp[k++] =
        brig_asprintf("%s=%s", name, json_string_value(jval));

    /* The default working directory: the home directory, or / when it does not exist (as
     * login(1) does). */
    struct stat st;
    const char *home = u ? u->home : "/root";
    p->cwd = s->cwd ? s->cwd : stat(home, &st) == 0 && S_ISDIR(st.st_mode) ? home : "/";
    p->user = u;
}

/* ---- the child ---- */

/* What the child reports on its CLOEXEC report pipe when it fails before execve. */
enum { STAGE_SETUP = 1, STAGE_CWD, STAGE_USER };
typedef struct child_report {
    int stage;
    int errnum;
} child_report;

static void __attribute__((noreturn)) child_fail(int report, int stage)
{
    child_report rep = {.stage = stage, .errnum = errno};
    (void)!write(report, &rep, sizeof(rep));
    _exit(127);
}

/* Runs in the vforked child (vfork_child).  The report pipe is O_CLOEXEC: a successful execve
 * closes it (the parent reads EOF: "started"). */
static void __attribute__((noreturn)) child_run(const spawn_plan *p, int report)
{
    /* Undo the handler's signal state: ignored dispositions and the blocked mask survive
     * execve (signal(7)), and a command must start with the defaults. */
    static const int reset[] = {SIGPIPE, SIGXFSZ, SIGTERM, SIGINT, SIGCHLD, SIGHUP};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(reset); i++)
        signal(reset[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    if (setsid() < 0)
        child_fail(report, STAGE_SETUP);
    /* The first terminal a session leader opens... is not automatic with O_NOCTTY: ask. */
    if (p->tty >= 0 && ioctl(p->tty, TIOCSCTTY, 0) < 0)
        child_fail(report, STAGE_SETUP);
    /* The agent keeps fds 0-2 open (main.c), so our descriptors are >= 3 and the dup2s
     * cannot clobber one another. */
    if (dup2(p->in, 0) < 0 || dup2(p->out, 1) < 0 || dup2(p->err, 2) < 0)
        child_fail(report, STAGE_SETUP);
    if (p->user != NULL) {
        /* Groups first: after setuid we could not change them any more. */
        if (setgroups(p->user->ngroups, p->user->groups) < 0 || setgid(p->user->gid) < 0 ||
            setuid(p->user->uid) < 0)
            child_fail(report, STAGE_USER);
    }
    if (chdir(p->cwd) < 0)
        child_fail(report, STAGE_CWD);
    /* execvp looks PATH up in environ, not in an envp argument: give it the command's. */
    environ = p->envp;
    execvp(p->argv[0], (char *const *)p->argv);
    int e = errno;
    dprintf(2, "brig-agent: %s: %s\n", p->argv[0], strerror(e));
    _exit(e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG || e == ELOOP ? 127 : 126);
}

/* ---- descriptors ---- */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A pipe with O_CLOEXEC on both ends and O_NONBLOCK on ours only: the command's end must stay
 * blocking (pipe2(O_NONBLOCK) would set both). */
static int pipe_ours(int fds[2], int our_end, brig_error **err)
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    int fl = fcntl(fds[our_end], F_GETFL);
    fcntl(fds[our_end], F_SETFL, fl | O_NONBLOCK);
    return 0;
}

/* A new pseudo-terminal of cols x rows: *master (ours, non-blocking) and *slave. */
static int pty_open(const brig_exec_spec *s, int *master, int *slave, brig_error **err)
{
    *master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (*master < 0 && errno == ENOSPC) /* the sandbox's devpts max= (brigd's pty_max) */
        return brig_error_set(err, BRIG_E_NO_SPACE, ENOSPC,
                              "no free pseudo-terminal: this sandbox has every pty it may "
                              "have open");
    if (*master < 0)
        return brig_error_sys(err, "open /dev/ptmx");
    if (unlockpt(*master) < 0)
        return brig_error_sys(err, "unlockpt");
    /* TIOCGPTPEER (Linux 4.13) opens the slave without a path lookup in /dev/pts; the path
     * is the fallback. */
    *slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*slave < 0) {
        char name[64];
        if (ptsname_r(*master, name, sizeof(name)) != 0)
            return brig_error_sys(err, "ptsname");
        *slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (*slave < 0)
            return brig_error_sys(err, "open %s", name);
    }
    struct winsize ws = {.ws_row = s->rows, .ws_col = s->cols};
    if (ioctl(*master, TIOCSWINSZ, &ws) < 0)
        return brig_error_sys(err, "TIOCSWINSZ");
    return 0;
}

/* Whether the command gets a stdin pipe (or, on a pty, a terminal we write to). */
static bool stdin_kept(const brig_exec_spec *s)
{
    if (s->background)
        return s->want_stdin || !s->stdin_closed;
    return s->want_stdin;
}

/* The descriptors of one spawn, -1 when not open: the command's ends are named in the plan,
 * ours go to the child record; whatever is left is closed at the end (spawn_fds_close). */
typedef struct spawn_fds {
    int outp[2], errp[2], inp[2]; /* stdout, stderr, stdin pipes */
    int rep[2];                   /* the child's report of a failure before execve */
    int master, slave;            /* the pty */
    int null;                     /* /dev/null as stdin */
} spawn_fds;

static void spawn_fds_close(spawn_fds *f)
{
    int *all[] = {&f->outp[0], &f->outp[1], &f->errp[0], &f->errp[1], &f->inp[0], &f->inp[1],
                  &f->rep[0],  &f->rep[1],  &f->master,  &f->slave,   &f->null};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(all); i++)
        close_fd(all[i]);
}

/* Opens the report pipe and the command's stdin, stdout and stderr (a pty, or pipes and
 * /dev/null when it gets no stdin), naming the command's ends in p. */
static int spawn_fds_open(const brig_exec_spec *s, spawn_plan *p, spawn_fds *f, brig_error **err)
{
    if (pipe2(f->rep, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    if (s->pty) {
        if (pty_open(s, &f->master, &f->slave, err) < 0)
            return -1;
        p->in = p->out = p->err = p->tty = f->slave;
        return 0;
    }
    if (pipe_ours(f->outp, 0, err) < 0 || pipe_ours(f->errp, 0, err) < 0)
        return -1;
    p->out = f->outp[1];
    p->err = f->errp[1];
    p->tty = -1;
    if (stdin_kept(s)) {
        if (pipe_ours(f->inp, 1, err) < 0)
            return -1;
        p->in = f->inp[0];
        return 0;
    }
    if ((f->null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        return brig_error_sys(err, "open /dev/null");
    p->in = f->null;
    return 0;
}

/* vfork: the child borrows this process's memory until its execve, so no copy of our
 * address space is made only to be thrown away (under gVisor a copy is a new host stub
 * process and a large part of an exec's cost).  Every signal stays blocked until the child
 * has reset its dispositions (child_run), so no handler of ours runs on the borrowed
 * memory; child_run writes no memory of ours but environ, restored here.  A function of
 * its own: nothing of the caller's lives across the vfork. */
static pid_t vfork_child(const spawn_plan *p, int report)
{
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    char **env = environ;
    pid_t pid = vfork();
    if (pid == 0)
        child_run(p, report);
    int e = errno;
    environ = env;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}

/* Forks the command.  On success ch describes it (it runs, or failed to execve, which the
 * supervisor reports as exit 126/127); a failure before execve is an error and the child is
 * reaped. */
static int spawn(const brig_exec_spec *s, spawn_plan *p, brig_child *ch, brig_error **err)
{
    spawn_fds f = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, -1, -1, -1};
    int ret = -1;
    if (spawn_fds_open(s, p, &f, err) < 0)
        goto out;
    ch->t0 = brig_now_mono_ms();
    ch->started_at = brig_now_real_ms();
    pid_t pid = vfork_child(p, f.rep[1]);
    if (pid < 0) {
        brig_error_sys(err, "fork");
        goto out;
    }
    close_fd(&f.rep[1]);
    child_report cr;
    ssize_t got = brig_read_full(f.rep[0], &cr, sizeof(cr));
    if (got == (ssize_t)sizeof(cr)) {
        waitpid(pid, NULL, 0);
        if (cr.stage == STAGE_CWD)
            brig_agent_fail(err, cr.errnum, "cwd %s", p->cwd);
        else if (cr.stage == STAGE_USER)
            brig_agent_fail(err, cr.errnum, "switching to user %s", p->user->name);
        else
            brig_error_set(err, BRIG_E_INTERNAL, cr.errnum, "preparing the command");
        goto out;
    }
    ch->pid = pid;
    ch->pty = s->pty;
    if (s->pty) {
        ch->out[1] = f.master;
        ch->out[2] = -1;
        /* Always a writer to the terminal: without stdin the supervisor sends it EOF. */
        if ((ch->in = fcntl(f.master, F_DUPFD_CLOEXEC, 3)) < 0) {
            brig_error_sys(err, "dup");
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            goto out;
        }
        f.master = -1;
    } else {
        ch->out[1] = f.outp[0];
        ch->out[2] = f.errp[0];
        ch->in = f.inp[1];
        f.outp[0] = f.errp[0] = f.inp[1] = -1;
    }
    ret = 0;
out:
    spawn_fds_close(&f);
    return ret;
}

/* Tells PID 1 that this handler supervises pid, and waits until it is in the table: a client
 * that reads `started` and at once asks about the process must find it. */
static int register_pid(brig_agent_conn *c, pid_t pid, brig_error **err)
{
    brig_ctl_msg m = {.type = BRIG_CTL_REGISTER, .pid = pid};
    brig_ctl_msg ans;
    if (brig_ctl_call(c->ctl, &m, -1, &ans, sizeof(ans), err) < 0)
        return -1;
    if (ans.type != BRIG_CTL_ACK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "the agent refused the process");
    return 0;
}

int brig_agent_exec(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    const brig_exec_spec *s = &q->u.exec;
    brig_user user = {0};
    spawn_plan plan = {0};
    brig_child ch = {.out = {-1, -1, -1}, .in = -1};
    int sfd = -1, ret = -1;
    if (s->user != NULL && brig_agent_user_lookup(s->user, &user, err) < 0)
        goto done;
    plan_build(&plan, s, s->user ? &user : NULL);

    /* Block before the fork: a SIGCHLD from a command that dies at once must not be lost
     * (with SIG_DFL and unblocked, SIGCHLD is discarded).  They stay blocked until the
     * handler exits. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        brig_error_sys(err, "signalfd");
        goto done;
    }
    if (spawn(s, &plan, &ch, err) < 0)
        goto done;
    if (register_pid(c, ch.pid, err) < 0) {
        brig_agent_watch w = {.pid = ch.pid};
        brig_agent_proc_kill_all(sfd, &w);
        goto done;
    }
    /* From here the answer is `started`; the supervisor owns the connection and the
     * descriptors, and returns when the process record is no longer kept. */
    c->replied = true;
    brig_agent_supervise(c, req, s, sfd, &ch);
    ret = 0;
done:
    close_fd(&ch.out[1]);
    close_fd(&ch.out[2]);
    close_fd(&ch.in);
    close_fd(&sfd);
    plan_dispose(&plan);
    brig_agent_user_dispose(&user);
    return ret;
}
