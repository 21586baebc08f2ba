/*
 * exec.c - the `exec` operation: run one command, stream its output, relay its stdin,
 * enforce its timeout, report how it ended (docs/protocol.md, "exec").
 *
 * Shape: the handler forks the command into its own session and process group with
 * stdout/stderr pipes (and a stdin pipe when asked), then runs one poll loop over the
 * socket, the pipes, a signalfd (SIGCHLD, SIGTERM, SIGINT) and a timerfd, until the
 * command itself is reaped.  Then it drains what the pipes already hold, sends the EOF
 * frames and the `exit` message.
 *
 * Invariants of the loop:
 * - Nothing blocks: the socket is used with MSG_DONTWAIT, our pipe ends are O_NONBLOCK.
 * - Backpressure instead of unbounded buffers: the command's output is read only while
 *   fewer than OUTQ_HIGH bytes wait for the socket, and the client's stdin is read only
 *   while fewer than INQ_HIGH bytes wait for the command.  The timer and signals are
 *   always watched, so a stalled client or a command that never reads its stdin cannot
 *   stop a timeout.
 * - The result does not wait for background jobs: a `cmd &` inherits the pipes and may
 *   keep them open forever, so the end is the command's exit, not the pipes' EOF.
 * - A client that goes away (EOF, error, broken framing) gets the command tree killed:
 *   nobody would read its result.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "log.h"
#include "util.h"

extern char **environ;

#define OUTQ_HIGH (256u << 10) /* stop reading the command's output above this backlog */
#define INQ_HIGH  (1u << 20)   /* stop reading the client's stdin above this backlog */

/* The default environment of a command; the request's `env` overrides and extends it. */
static const char *const default_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
    "LANG=C.UTF-8",
    "TERM=dumb", /* output goes to pipes read by programs: ask tools for no escape codes */
};

/* A parsed exec request.  Strings are borrowed from the request JSON unless noted. */
typedef struct exec_spec {
    const char **argv;  /* NULL-terminated; the array is owned */
    const char *cwd;    /* absolute */
    char **envp;        /* NULL-terminated "NAME=value"; array and strings owned */
    int64_t timeout_ms; /* 0 = none */
    bool want_stdin;    /* the client streams stdin on channel 0 */
} exec_spec;

static void spec_dispose(exec_spec *s)
{
    free(s->argv);
    for (char **e = s->envp; e != NULL && *e != NULL; e++)
        free(*e);
    free(s->envp);
}

/* Validates every field's type (docs/protocol.md); fills s. */
static int spec_parse(json_t *req, exec_spec *s, brig_error **err)
{
    json_t *jargv = brig_agent_field(req, "argv"), *jcmd = brig_agent_field(req, "cmd");
    if ((jargv == NULL) == (jcmd == NULL))
        return brig_agent_bad_request(err, "exec needs exactly one of \"argv\" and \"cmd\"");
    if (jargv != NULL) {
        if (!json_is_array(jargv) || json_array_size(jargv) == 0)
            return brig_agent_bad_request(err, "\"argv\" must be a non-empty array of strings");
        size_t n = json_array_size(jargv);
        s->argv = brig_xcalloc(n + 1, sizeof(*s->argv));
        for (size_t i = 0; i < n; i++)
            if ((s->argv[i] = brig_agent_cstring(json_array_get(jargv, i))) == NULL)
                return brig_agent_bad_request(err, "\"argv\" must hold strings without NUL");
    } else {
        const char *cmd = brig_agent_cstring(jcmd);
        if (cmd == NULL)
            return brig_agent_bad_request(err, "\"cmd\" must be a string without NUL");
        /* bash -l for a login environment (profile PATH etc.); the minimal template is
         * busybox only and has just /bin/sh. */
        bool bash = access("/bin/bash", X_OK) == 0;
        s->argv = brig_xcalloc(4, sizeof(*s->argv));
        s->argv[0] = bash ? "/bin/bash" : "/bin/sh";
        s->argv[1] = bash ? "-lc" : "-c";
        s->argv[2] = cmd;
    }

    json_t *jcwd = brig_agent_field(req, "cwd");
    if (jcwd != NULL) {
        s->cwd = brig_agent_cstring(jcwd);
        if (s->cwd == NULL || s->cwd[0] != '/')
            return brig_agent_bad_request(err, "\"cwd\" must be an absolute path");
    } else {
        struct stat st;
        s->cwd = stat("/root", &st) == 0 && S_ISDIR(st.st_mode) ? "/root" : "/";
    }

    json_t *jenv = brig_agent_field(req, "env");
    if (jenv != NULL && !json_is_object(jenv))
        return brig_agent_bad_request(err, "\"env\" must be an object of strings");
    size_t nenv = BRIG_ARRAY_LEN(default_env) + (jenv ? json_object_size(jenv) : 0);
    s->envp = brig_xcalloc(nenv + 1, sizeof(*s->envp));
    size_t k = 0;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(default_env); i++) {
        size_t nlen = (size_t)(strchr(default_env[i], '=') - default_env[i]);
        _cleanup_free_ char *name = brig_xstrndup(default_env[i], nlen);
        if (jenv == NULL || json_object_get(jenv, name) == NULL)
            s->envp[k++] = brig_xstrdup(default_env[i]);
    }
    const char *name;
    json_t *jval;
    json_object_foreach(jenv, name, jval)
    {
        const char *val = brig_agent_cstring(jval);
        if (name[0] == '\0' || strchr(name, '=') != NULL)
            return brig_agent_bad_request(err, "env names must be non-empty without '='");
        if (val == NULL)
            return brig_agent_bad_request(err, "env value of %.64s must be a string without NUL",
                                          name);
        s->envp[k++] = brig_asprintf("%s=%s", name, val);
    }

    json_t *jt = brig_agent_field(req, "timeout_ms");
    if (jt != NULL && (!json_is_integer(jt) || json_integer_value(jt) < 0))
        return brig_agent_bad_request(err, "\"timeout_ms\" must be a non-negative integer");
    s->timeout_ms = jt ? json_integer_value(jt) : 0;

    json_t *jin = brig_agent_field(req, "stdin");
    if (jin != NULL && !json_is_boolean(jin))
        return brig_agent_bad_request(err, "\"stdin\" must be a boolean");
    s->want_stdin = jin != NULL && json_is_true(jin);
    return 0;
}

/* ---- the child ---- */

/* What the child reports on its CLOEXEC report pipe when it fails before execve. */
enum { STAGE_SETUP = 1, STAGE_CWD = 2 };
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

/* Runs in the forked child.  The report pipe is O_CLOEXEC: a successful execve closes it
 * (the parent reads EOF: "started").  A failing cwd is reported through it (the parent
 * answers an error instead of "started"); a failing execve is not: like a shell, the
 * child explains on its stderr and exits 127 (not found) or 126 (not executable). */
static void __attribute__((noreturn))
child_run(const exec_spec *s, int in, int out, int errp, int report)
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
    /* The agent keeps fds 0-2 open (main.c), so our pipe ends are >= 3 and the dup2s
     * cannot clobber one another. */
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errp, 2) < 0)
        child_fail(report, STAGE_SETUP);
    if (chdir(s->cwd) < 0)
        child_fail(report, STAGE_CWD);
    /* execvp looks PATH up in environ, not in an envp argument: give it the command's. */
    environ = s->envp;
    execvp(s->argv[0], (char *const *)s->argv);
    int e = errno;
    dprintf(2, "brig-agent: %s: %s\n", s->argv[0], strerror(e));
    _exit(e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG || e == ELOOP ? 127 : 126);
}

/* ---- the running command ---- */

typedef struct exec_run {
    brig_agent_conn *c;
    int sfd;         /* signalfd: SIGCHLD, SIGTERM, SIGINT; non-blocking */
    int tfd;         /* timerfd of the timeout, -1 without one */
    int out[3];      /* our read ends of stdout (1) and stderr (2); -1 once ended; [0] unused */
    int in;          /* our write end of the command's stdin, -1 when unused or closed */
    bool want_stdin; /* the client may send DATA on channel 0 */
    bool in_eof;     /* ... and has ended it */
    brig_buf inq;    /* stdin bytes not yet written to the command */
    size_t inq_off;
    brig_buf outq; /* encoded frames not yet sent to the client */
    size_t outq_off;
    /* Incremental frame reader for the non-blocking socket. */
    uint8_t rx_hdr[BRIG_FRAME_HDR];
    size_t rx_hdr_got;
    brig_frame_hdr rx;
    uint8_t *rx_buf;
    size_t rx_got;
    brig_agent_watch cmd; /* the command: pid, and its wait status once reaped */
    bool timed_out;
    int64_t t0, t1; /* monotonic ms at fork and at the command's exit */
} exec_run;

static size_t outq_pending(const exec_run *r)
{
    return r->outq.len - r->outq_off;
}

static size_t inq_pending(const exec_run *r)
{
    return r->inq.len - r->inq_off;
}

static void queue_frame(exec_run *r, uint8_t type, uint16_t chan, const void *p, size_t n)
{
    uint8_t hdr[BRIG_FRAME_HDR];
    brig_frame_encode_hdr(hdr, type, chan, (uint32_t)n);
    brig_buf_append(&r->outq, hdr, sizeof(hdr));
    brig_buf_append(&r->outq, p, n);
}

/* Takes ownership of msg. */
static void queue_json(exec_run *r, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (s == NULL)
        abort(); /* jansson fails here only on OOM */
    queue_frame(r, BRIG_FRAME_CONTROL, 0, s, strlen(s));
    free(s);
}

/* Sends what the socket takes now.  Returns -1 when the peer is gone. */
static int outq_flush(exec_run *r, brig_error **err)
{
    while (outq_pending(r) > 0) {
        ssize_t w = send(r->c->fd, r->outq.data + r->outq_off, outq_pending(r),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            r->c->gone = true;
            return brig_error_set(err, BRIG_E_PROTOCOL, errno, "client gone during exec");
        }
        r->outq_off += (size_t)w;
    }
    if (r->outq_off == r->outq.len) {
        r->outq.len = r->outq_off = 0;
    } else if (r->outq_off > OUTQ_HIGH) {
        memmove(r->outq.data, r->outq.data + r->outq_off, outq_pending(r));
        r->outq.len -= r->outq_off;
        r->outq_off = 0;
    }
    return 0;
}

static void close_stdin(exec_run *r)
{
    if (r->in >= 0)
        close(r->in);
    r->in = -1;
    r->inq.len = r->inq_off = 0;
}

/* One complete frame from the client.  During exec only DATA on channel 0 is expected, and
 * only when the request asked for stdin and the channel is still open. */
static int rx_frame(exec_run *r, brig_error **err)
{
    if (r->rx.type != BRIG_FRAME_DATA || r->rx.chan != BRIG_CHAN_IN || !r->want_stdin || r->in_eof)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                              "unexpected frame (type %u, channel %u) during exec", r->rx.type,
                              r->rx.chan);
    if (r->rx.len == 0)
        r->in_eof = true;
    else if (r->in >= 0) /* else the command closed its stdin: drop the bytes */
        brig_buf_append(&r->inq, r->rx_buf, r->rx.len);
    return 0;
}

/* Reads what the socket holds, frame by frame, until it would block or the stdin backlog
 * is full.  Returns -1 when the client is gone or broke the framing. */
static int rx_pump(exec_run *r, brig_error **err)
{
    while (inq_pending(r) < INQ_HIGH) {
        bool in_hdr = r->rx_hdr_got < BRIG_FRAME_HDR;
        uint8_t *dst = in_hdr ? r->rx_hdr + r->rx_hdr_got : r->rx_buf + r->rx_got;
        size_t want = in_hdr ? BRIG_FRAME_HDR - r->rx_hdr_got : r->rx.len - r->rx_got;
        if (want > 0) {
            ssize_t n = recv(r->c->fd, dst, want, MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
            if (n < 0)
                return brig_error_set(err, BRIG_E_PROTOCOL, errno, "client gone during exec");
            if (n == 0)
                return brig_error_set(err, BRIG_E_PROTOCOL, 0, "client closed during exec");
            if (in_hdr)
                r->rx_hdr_got += (size_t)n;
            else
                r->rx_got += (size_t)n;
            if ((size_t)n < want)
                continue;
            if (in_hdr) {
                if (brig_frame_decode_hdr(r->rx_hdr, &r->rx, err) < 0)
                    return -1;
                r->rx_buf = brig_xrealloc(r->rx_buf, r->rx.len + 1);
                r->rx_got = 0;
                if (r->rx.len > 0)
                    continue;
            }
        }
        if (rx_frame(r, err) < 0)
            return -1;
        r->rx_hdr_got = r->rx_got = 0;
    }
    return 0;
}

/* Writes queued stdin to the command; closes its stdin once the client ended channel 0
 * and everything is written, or when the command closed its end (EPIPE). */
static void stdin_pump(exec_run *r)
{
    while (r->in >= 0 && inq_pending(r) > 0) {
        ssize_t w = write(r->in, r->inq.data + r->inq_off, inq_pending(r));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            close_stdin(r); /* EPIPE: the command does not want more */
            return;
        }
        r->inq_off += (size_t)w;
    }
    if (inq_pending(r) > 0) {
        /* A command that always lags a little must not make the buffer grow by the whole
         * stream: drop what was written once it outweighs the backlog limit. */
        if (r->inq_off > INQ_HIGH) {
            memmove(r->inq.data, r->inq.data + r->inq_off, inq_pending(r));
            r->inq.len -= r->inq_off;
            r->inq_off = 0;
        }
        return;
    }
    r->inq.len = r->inq_off = 0;
    if (r->in_eof && r->in >= 0)
        close_stdin(r);
}

/* Ends an output channel: the empty DATA frame. */
static void out_end(exec_run *r, int chan)
{
    if (r->out[chan] < 0)
        return;
    close(r->out[chan]);
    r->out[chan] = -1;
    queue_frame(r, BRIG_FRAME_DATA, (uint16_t)chan, NULL, 0);
}

/* Reads at most `limit` bytes (one read of up to a DATA chunk) from an output pipe into
 * the queue.  Returns the bytes read; 0 when there was nothing (the channel is ended at
 * EOF or on an error). */
static size_t out_pump(exec_run *r, int chan, size_t limit)
{
    static uint8_t buf[BRIG_DATA_CHUNK];
    for (;;) {
        ssize_t n = read(r->out[chan], buf, limit < sizeof(buf) ? limit : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0) {
            out_end(r, chan);
            return 0;
        }
        queue_frame(r, BRIG_FRAME_DATA, (uint16_t)chan, buf, (size_t)n);
        return (size_t)n;
    }
}

/* After the command exited: take exactly what the pipe holds now (FIONREAD), so that a
 * background job that keeps writing cannot hold the result, then end the channel. */
static void out_drain(exec_run *r, int chan)
{
    int avail = 0;
    if (r->out[chan] >= 0 && ioctl(r->out[chan], FIONREAD, &avail) == 0)
        while (avail > 0 && r->out[chan] >= 0) {
            size_t n = out_pump(r, chan, (size_t)avail);
            if (n == 0)
                break;
            avail -= (int)n;
        }
    out_end(r, chan);
}

/* The client is gone or broke the protocol: nobody will read the result. */
static void abort_run(exec_run *r)
{
    r->c->replied = true;
    brig_agent_proc_kill_all(r->sfd, &r->cmd);
}

/* Handles pending signals.  SIGTERM/SIGINT come from the agent's shutdown (or from the
 * parent-death signal when the agent died); they are passed on to our process tree, except
 * when the agent is PID 1: its kill(-1, SIGTERM) already reached every process. */
static void on_signals(exec_run *r)
{
    uint64_t seen = brig_agent_signalfd_drain(r->sfd);
    if (seen & ((UINT64_C(1) << SIGTERM) | (UINT64_C(1) << SIGINT))) {
        if (getppid() != r->c->agent_pid) {
            brig_agent_proc_kill_all(r->sfd, &r->cmd); /* the agent died: nobody else will */
        } else if (r->c->agent_pid != 1) {
            size_t n = 0;
            _cleanup_free_ pid_t *kids = brig_agent_proc_children(&n);
            for (size_t i = 0; i < n; i++)
                brig_agent_proc_signal(kids[i], SIGTERM);
        }
    }
    brig_agent_proc_reap(&r->cmd);
}

static void on_timeout(exec_run *r)
{
    r->timed_out = true;
    brig_agent_proc_kill_all(r->sfd, &r->cmd);
}

/* The poll loop; returns once the command is reaped, or -1 when the client is gone. */
static int run_loop(exec_run *r, brig_error **err)
{
    while (!r->cmd.done) {
        enum { P_SOCK, P_SIG, P_TIMER, P_OUT1, P_OUT2, P_IN, P_N };
        struct pollfd p[P_N];
        bool rx_ok = inq_pending(r) < INQ_HIGH;
        bool out_ok = outq_pending(r) < OUTQ_HIGH;
        p[P_SOCK] = (struct pollfd){
            .fd = r->c->fd,
            .events = (short)((rx_ok ? POLLIN : 0) | (outq_pending(r) ? POLLOUT : 0))};
        p[P_SIG] = (struct pollfd){.fd = r->sfd, .events = POLLIN};
        p[P_TIMER] = (struct pollfd){.fd = r->tfd, .events = POLLIN};
        p[P_OUT1] = (struct pollfd){.fd = out_ok ? r->out[1] : -1, .events = POLLIN};
        p[P_OUT2] = (struct pollfd){.fd = out_ok ? r->out[2] : -1, .events = POLLIN};
        p[P_IN] = (struct pollfd){.fd = inq_pending(r) ? r->in : -1, .events = POLLOUT};
        if (poll(p, P_N, -1) < 0) {
            if (errno == EINTR)
                continue;
            return brig_error_set(err, BRIG_E_INTERNAL, errno, "poll");
        }
        if (p[P_SIG].revents & POLLIN) {
            on_signals(r);
            if (r->cmd.done)
                break;
        }
        if (p[P_TIMER].revents & POLLIN) {
            on_timeout(r);
            break;
        }
        short sock = p[P_SOCK].revents;
        if (sock & POLLIN || (rx_ok && sock & (POLLHUP | POLLERR))) {
            if (rx_pump(r, err) < 0)
                return -1;
        } else if (sock & (POLLHUP | POLLERR | POLLNVAL)) {
            return brig_error_set(err, BRIG_E_PROTOCOL, 0, "client gone during exec");
        }
        if (sock & POLLOUT && outq_flush(r, err) < 0)
            return -1;
        for (int chan = 1; chan <= 2; chan++)
            if (p[P_OUT1 + chan - 1].revents)
                out_pump(r, chan, BRIG_DATA_CHUNK);
        stdin_pump(r);
    }
    return 0;
}

/* Blocking flush of the tail (the command has exited).  A SIGTERM (agent shutdown) stops
 * it: the client then sees the connection end without an `exit` message. */
static int flush_all(exec_run *r, brig_error **err)
{
    while (outq_pending(r) > 0) {
        struct pollfd p[2] = {{.fd = r->c->fd, .events = POLLOUT},
                              {.fd = r->sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return brig_error_set(err, BRIG_E_INTERNAL, errno, "poll");
        }
        if (p[1].revents & POLLIN) {
            uint64_t seen = brig_agent_signalfd_drain(r->sfd);
            brig_agent_proc_reap(NULL);
            if (seen & ((UINT64_C(1) << SIGTERM) | (UINT64_C(1) << SIGINT)))
                return brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent shutting down");
        }
        if (p[0].revents && outq_flush(r, err) < 0)
            return -1;
    }
    return 0;
}

static json_t *exit_msg(const exec_run *r)
{
    int code = 0, sig = 0;
    if (r->timed_out) {
        code = 128 + SIGKILL;
        sig = SIGKILL;
    } else if (WIFSIGNALED(r->cmd.status)) {
        sig = WTERMSIG(r->cmd.status);
        code = 128 + sig;
    } else {
        code = WEXITSTATUS(r->cmd.status);
    }
    return json_pack("{s:s, s:i, s:o, s:b, s:I}", "type", "exit", "exit_code", code, "signal",
                     sig ? json_integer(sig) : json_null(), "timed_out", r->timed_out,
                     "duration_ms", (json_int_t)(r->t1 - r->t0));
}

/* Pipes with O_CLOEXEC on both ends and O_NONBLOCK on ours only: the command's end must
 * stay blocking (pipe2(O_NONBLOCK) would set both). */
static int pipe_ours(int fds[2], int our_end, brig_error **err)
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    int fl = fcntl(fds[our_end], F_GETFL);
    fcntl(fds[our_end], F_SETFL, fl | O_NONBLOCK);
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Forks the command.  On success r->cmd.pid runs (or already failed to execve, which the
 * loop reports as exit 126/127); a bad cwd is an error and the child is reaped. */
static int spawn(exec_run *r, const exec_spec *s, brig_error **err)
{
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1}, rep[2] = {-1, -1};
    int ret = -1;
    if (pipe_ours(outp, 0, err) < 0 || pipe_ours(errp, 0, err) < 0)
        goto out;
    if (pipe2(rep, O_CLOEXEC) < 0) {
        brig_error_sys(err, "pipe");
        goto out;
    }
    if (s->want_stdin) {
        if (pipe_ours(inp, 1, err) < 0)
            goto out;
    } else if ((inp[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        brig_error_sys(err, "open /dev/null");
        goto out;
    }
    r->t0 = brig_now_mono_ms();
    pid_t pid = fork();
    if (pid < 0) {
        brig_error_sys(err, "fork");
        goto out;
    }
    if (pid == 0)
        child_run(s, inp[0], outp[1], errp[1], rep[1]);
    r->cmd.pid = pid;
    close_fd(&rep[1]);
    child_report cr;
    ssize_t got = brig_read_full(rep[0], &cr, sizeof(cr));
    if (got == (ssize_t)sizeof(cr)) {
        waitpid(pid, NULL, 0);
        errno = cr.errnum;
        if (cr.stage == STAGE_CWD)
            brig_agent_fail(err, cr.errnum, "cwd %s", s->cwd);
        else
            brig_error_sys(err, "preparing the command");
        goto out;
    }
    r->out[1] = outp[0];
    r->out[2] = errp[0];
    r->in = s->want_stdin ? inp[1] : -1;
    outp[0] = errp[0] = inp[1] = -1;
    ret = 0;
out:
    close_fd(&outp[0]);
    close_fd(&outp[1]);
    close_fd(&errp[0]);
    close_fd(&errp[1]);
    close_fd(&inp[0]);
    close_fd(&inp[1]);
    close_fd(&rep[0]);
    close_fd(&rep[1]);
    return ret;
}

static int arm_timer(exec_run *r, int64_t ms, brig_error **err)
{
    if (ms <= 0)
        return 0;
    r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (r->tfd < 0)
        return brig_error_sys(err, "timerfd_create");
    if (ms > INT64_C(1) << 40)
        ms = INT64_C(1) << 40; /* ~35 years: "never", without overflowing the kernel's ktime */
    struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}};
    if (timerfd_settime(r->tfd, 0, &its, NULL) < 0)
        return brig_error_sys(err, "timerfd_settime");
    return 0;
}

int brig_agent_exec(brig_agent_conn *c, json_t *req, brig_error **err)
{
    exec_spec s = {0};
    exec_run r = {.c = c, .sfd = -1, .tfd = -1, .out = {-1, -1, -1}, .in = -1};
    sigset_t mask;
    int ret = -1;
    if (spec_parse(req, &s, err) < 0)
        goto done;

    /* Block before the fork: a SIGCHLD from a command that dies at once must not be lost
     * (with SIG_DFL and unblocked, SIGCHLD is discarded).  They stay blocked until the
     * handler exits. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    r.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (r.sfd < 0) {
        brig_error_sys(err, "signalfd");
        goto done;
    }
    r.want_stdin = s.want_stdin;
    if (spawn(&r, &s, err) < 0)
        goto done;
    /* From here the answer is "started" and then `exit`; no error reply can follow. */
    c->replied = true;
    queue_json(&r, json_pack("{s:s, s:I}", "type", "started", "pid", (json_int_t)r.cmd.pid));
    if (arm_timer(&r, s.timeout_ms, err) < 0) {
        abort_run(&r);
        goto done;
    }
    if (run_loop(&r, err) < 0) {
        abort_run(&r);
        goto done;
    }
    r.t1 = brig_now_mono_ms();
    out_drain(&r, 1);
    out_drain(&r, 2);
    close_stdin(&r);
    queue_json(&r, exit_msg(&r));
    ret = flush_all(&r, err);
done:
    close_fd(&r.out[1]);
    close_fd(&r.out[2]);
    close_stdin(&r);
    close_fd(&r.tfd);
    close_fd(&r.sfd);
    brig_buf_dispose(&r.inq);
    brig_buf_dispose(&r.outq);
    free(r.rx_buf);
    spec_dispose(&s);
    return ret;
}
