/*
 * tar.c - tar_extract and tar_create (docs/protocol.md, "File-system operations"), with the
 * sandbox's own `tar` (GNU tar in the Debian template, busybox tar in the minimal one).
 *
 * Using the sandbox's tar keeps archive parsing, a large attack surface, out of the agent:
 * tar runs as a child of the handler with the archive on a pipe, and it is tar that refuses
 * member names with `..` and strips leading `/`, so nothing lands outside DIR.  tar cannot
 * read a compressed archive from a pipe without being told, so the first bytes are looked at
 * first: the gzip magic (1f 8b) adds -z.
 *
 * tar's stderr is read while the archive flows (so a chatty tar cannot stall on a full pipe)
 * and its last lines become the error message when it fails.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "util.h"

#define ERR_KEEP 2048 /* bytes of tar's stderr kept for the error message */

extern char **environ;

/* A running tar. */
typedef struct tar_run {
    pid_t pid;
    int in;    /* our end of its stdin (extract), -1 */
    int out;   /* our end of its stdout (create), -1 */
    int errfd; /* our end of its stderr, -1 at EOF */
    char errtail[ERR_KEEP + 1];
    size_t errlen;
} tar_run;

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void __attribute__((noreturn)) tar_child(char *const argv[], int in, int out, int errfd)
{
    static const int reset[] = {SIGPIPE, SIGXFSZ, SIGTERM, SIGINT, SIGCHLD, SIGHUP};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(reset); i++)
        signal(reset[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    static char *env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                          "LANG=C.UTF-8", NULL};
    if (setsid() < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0 || chdir("/") < 0)
        _exit(127);
    environ = env;
    execvp(argv[0], argv);
    dprintf(2, "tar: %s\n", strerror(errno));
    _exit(127);
}

/* Starts tar with argv; extract: its stdin is a pipe from us, else its stdout is. */
static int tar_start(tar_run *t, char *const argv[], bool extract, brig_error **err)
{
    int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1}, null = -1;
    int ret = -1;
    if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(extract ? inp : outp, O_CLOEXEC) < 0 ||
        (null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
        brig_error_sys(err, "pipe");
        goto out;
    }
    t->pid = fork();
    if (t->pid < 0) {
        brig_error_sys(err, "fork");
        goto out;
    }
    if (t->pid == 0)
        tar_child(argv, extract ? inp[0] : null, extract ? errp[1] : outp[1], errp[1]);
    t->in = inp[1];
    t->out = outp[0];
    t->errfd = errp[0];
    inp[1] = outp[0] = errp[0] = -1;
    fcntl(t->errfd, F_SETFL, O_NONBLOCK);
    if (t->in >= 0)
        fcntl(t->in, F_SETFL, O_NONBLOCK);
    ret = 0;
out:
    close_fd(&inp[0]);
    close_fd(&inp[1]);
    close_fd(&outp[0]);
    close_fd(&outp[1]);
    close_fd(&errp[0]);
    close_fd(&errp[1]);
    close_fd(&null);
    return ret;
}

/* Reads what tar's stderr holds, keeping the tail. */
static void err_read(tar_run *t)
{
    char buf[4096];
    while (t->errfd >= 0) {
        ssize_t n = read(t->errfd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close_fd(&t->errfd);
            return;
        }
        size_t k = (size_t)n;
        if (k >= ERR_KEEP) {
            memcpy(t->errtail, buf + k - ERR_KEEP, ERR_KEEP);
            t->errlen = ERR_KEEP;
        } else {
            if (t->errlen + k > ERR_KEEP) {
                size_t drop = t->errlen + k - ERR_KEEP;
                memmove(t->errtail, t->errtail + drop, t->errlen - drop);
                t->errlen -= drop;
            }
            memcpy(t->errtail + t->errlen, buf, k);
            t->errlen += k;
        }
    }
}

/* Waits for tar to exit (its stdin closed, its stdout read); returns its wait status. */
static int tar_wait(tar_run *t)
{
    close_fd(&t->in);
    close_fd(&t->out);
    while (t->errfd >= 0) {
        struct pollfd p = {.fd = t->errfd, .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            break;
        err_read(t);
    }
    int st = 0;
    while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
        ;
    t->pid = -1;
    return st;
}

/* Kills tar (the client is gone) and reaps it. */
static void tar_kill(tar_run *t)
{
    if (t->pid > 0) {
        kill(-t->pid, SIGKILL);
        kill(t->pid, SIGKILL);
        close_fd(&t->errfd);
        tar_wait(t);
    }
    close_fd(&t->in);
    close_fd(&t->out);
    close_fd(&t->errfd);
}

/* The error for a tar that exited with status st. */
static int tar_failed(tar_run *t, int st, brig_error **err)
{
    t->errtail[t->errlen] = '\0';
    /* Trailing newlines out; the message is tar's own words. */
    while (t->errlen > 0 && t->errtail[t->errlen - 1] == '\n')
        t->errtail[--t->errlen] = '\0';
    const char *msg = t->errtail;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code == 127 && strstr(msg, "tar:") == msg)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "this sandbox has no usable tar (%s)", msg);
    brig_err_kind kind = BRIG_E_INVALID; /* a broken or unsafe archive: the client's */
    if (strstr(msg, "No space left") != NULL || strstr(msg, "Disk quota") != NULL)
        return brig_agent_fail(err, ENOSPC, "tar: %s", msg);
    if (strstr(msg, "Permission denied") != NULL || strstr(msg, "Read-only file") != NULL)
        return brig_agent_fail(err, EACCES, "tar: %s", msg);
    return brig_error_set(err, kind, 0, "tar exited with status %d: %s", code,
                          msg[0] ? msg : "no message");
}

/* Writes n bytes to tar's stdin while draining its stderr.  Returns 0, or -1 when tar does
 * not take more (it exited or closed its stdin: EPIPE). */
static int feed(tar_run *t, const uint8_t *p, size_t n)
{
    while (n > 0 && t->in >= 0) {
        struct pollfd pf[2] = {{.fd = t->in, .events = POLLOUT},
                               {.fd = t->errfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (pf[1].revents)
            err_read(t);
        if (pf[0].revents & (POLLERR | POLLHUP))
            return -1;
        if (!(pf[0].revents & POLLOUT))
            continue;
        ssize_t w = write(t->in, p, n);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return t->in >= 0 ? 0 : -1;
}

/* Reads the next frame of the upload; it must be DATA on channel 0.  Returns 1 with data, 0
 * at the empty frame, -1 when the client is gone or broke the protocol. */
static int next_chunk(brig_agent_conn *c, brig_error **err)
{
    if (brig_frame_read(c->fd, &c->frame, NULL, err) < 0)
        return -1;
    if (c->frame.hdr.type != BRIG_FRAME_DATA || c->frame.hdr.chan != BRIG_CHAN_IN)
        return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                              "expected DATA on channel 0 during tar_extract, got type %u",
                              c->frame.hdr.type);
    return c->frame.hdr.len > 0 ? 1 : 0;
}

int brig_agent_tar_extract(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                           brig_error **err)
{
    (void)req;
    const char *dir = q->u.fs.path;
    if (brig_agent_mkdir_parents(dir, err) < 0) {
        brig_agent_reply_error(c, *err);
        brig_agent_discard_input(c);
        return -1;
    }
    /* The first two bytes decide about -z. */
    brig_buf head = {0};
    int more = 1;
    while (head.len < 2 && (more = next_chunk(c, err)) == 1)
        brig_buf_append(&head, c->frame.payload, c->frame.hdr.len);
    if (more < 0) {
        brig_buf_dispose(&head);
        return -1;
    }
    bool gz = head.len >= 2 && (uint8_t)head.data[0] == 0x1f && (uint8_t)head.data[1] == 0x8b;
    char *argv[] = {"tar", "-x", "-f", "-", "-C", (char *)dir, gz ? "-z" : NULL, NULL};
    tar_run t = {.pid = -1, .in = -1, .out = -1, .errfd = -1};
    if (tar_start(&t, argv, true, err) < 0) {
        brig_buf_dispose(&head);
        if (more == 1) {
            brig_agent_reply_error(c, *err);
            brig_agent_discard_input(c);
        }
        return -1;
    }
    uint64_t total = head.len;
    bool fed = feed(&t, (uint8_t *)head.data, head.len) == 0;
    brig_buf_dispose(&head);
    /* The rest of the stream; once tar stopped taking it, it is read and dropped, so the
     * client (still sending) learns tar's verdict at the end. */
    while (more == 1 && (more = next_chunk(c, err)) == 1) {
        total += c->frame.hdr.len;
        if (fed)
            fed = feed(&t, c->frame.payload, c->frame.hdr.len) == 0;
    }
    if (more < 0) {
        tar_kill(&t);
        return -1;
    }
    int st = tar_wait(&t);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        tar_failed(&t, st, err);
        brig_agent_reply_error(c, *err); /* here: the stream is over, nothing to discard */
        return -1;
    }
    c->replied = true;
    return brig_agent_send_json(c,
                                json_pack("{s:s, s:I}", "type",
                                          brig_agentproto_reply_name(BRIG_REPLY_OK), "bytes",
                                          (json_int_t)total),
                                err);
}

int brig_agent_tar_create(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                          brig_error **err)
{
    (void)req;
    const char *dir = q->u.fs.path;
    struct stat st;
    if (stat(dir, &st) < 0)
        return brig_agent_fail(err, errno, "%s", dir);
    if (!S_ISDIR(st.st_mode))
        return brig_agent_fail(err, ENOTDIR, "%s", dir);
    char *argv[] = {"tar", "-c", "-f", "-", "-C", (char *)dir, ".", NULL};
    tar_run t = {.pid = -1, .in = -1, .out = -1, .errfd = -1};
    if (tar_start(&t, argv, false, err) < 0)
        return -1;
    c->replied = true;
    if (brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_TAR), err) < 0) {
        tar_kill(&t);
        return -1;
    }
    static uint8_t buf[BRIG_DATA_CHUNK];
    while (t.out >= 0) {
        struct pollfd pf[2] = {{.fd = t.out, .events = POLLIN}, {.fd = t.errfd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            tar_kill(&t);
            return brig_error_sys(err, "poll");
        }
        if (pf[1].revents)
            err_read(&t);
        if (!pf[0].revents)
            continue;
        ssize_t n = read(t.out, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close_fd(&t.out);
            break;
        }
        if (brig_agent_send(c, BRIG_FRAME_DATA, BRIG_CHAN_IN, buf, (size_t)n, err) < 0) {
            tar_kill(&t);
            return -1;
        }
    }
    int status = tar_wait(&t);
    if (brig_agent_send(c, BRIG_FRAME_DATA, BRIG_CHAN_IN, NULL, 0, err) < 0)
        return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* The stream is over; the error is the final message. */
        tar_failed(&t, status, err);
        brig_agent_reply_error(c, *err);
        return -1;
    }
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}
