/*
 * microvm_qmp.c - the VMM's control channel (microvm_internal.h): QEMU's machine protocol
 * (QMP) on a unix socket in the VM's directory, for pause and resume, and the memory
 * snapshots (migration to and from a file whose descriptor is passed over the socket:
 * getfd, SCM_RIGHTS; QEMU opens no path of ours, and -sandbox on denies exec: migration).
 *
 * brigd binds and listens on the socket and hands QEMU the listening descriptor (QEMU runs
 * as the sandbox's uid and reaches no host path of ours); brigd, and a restarted brigd,
 * connect to the path.  QEMU serves one connection at a time: a second waits in the
 * backlog until the first one closes, and each of ours is short (a greeting, the
 * capabilities handshake, one command).  The path is reached through a descriptor of the
 * directory (/proc/self/fd/N/qmp.sock): a state dir deep enough would not fit sun_path.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "microvm_internal.h"
#include "util.h"

#define QMP_TIMEOUT_S      10    /* stop waits for the vCPUs to halt: quick, even under TCG */
#define MIGRATE_TIMEOUT_MS 60000 /* a memory snapshot written or read back (~0.5 s here) */

/* sun_path of dir's qmp.sock, through *dirfd (the caller closes it). */
static int qmp_addr(const char *dir, struct sockaddr_un *sa, int *dirfd, brig_error **err)
{
    *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "%s", dir);
    *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/" BRIG_VM_QMP_SOCK, *dirfd);
    return 0;
}

int brig_vm_qmp_listen(const char *dir, brig_error **err)
{
    struct sockaddr_un sa;
    int dfd = -1;
    if (qmp_addr(dir, &sa, &dfd, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlinkat(dfd, BRIG_VM_QMP_SOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0 ||
        fchmodat(dfd, BRIG_VM_QMP_SOCK, 0600, 0) < 0) {
        brig_error_sys(err, "the VMM's control socket in %s", dir);
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    close(dfd);
    return fd;
}

/* A connection and what was read of it past the last message. */
typedef struct qmp {
    int fd;
    size_t len;
    char buf[16384];
} qmp;

/* The next message that is not an event (QMP's are one JSON object a line). */
static json_t *qmp_next(qmp *q, brig_error **err)
{
    for (;;) {
        char *nl = memchr(q->buf, '\n', q->len);
        if (nl) {
            size_t n = (size_t)(nl - q->buf) + 1;
            json_t *j = json_loadb(q->buf, n, 0, NULL);
            memmove(q->buf, q->buf + n, q->len - n);
            q->len -= n;
            if (json_is_object(j) && json_object_get(j, "event") == NULL)
                return j;
            json_decref(j);
            continue;
        }
        if (q->len == sizeof(q->buf)) {
            brig_error_set(err, BRIG_E_INTERNAL, 0, "the VMM's control socket: a message too long");
            return NULL;
        }
        ssize_t r = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
        if (r <= 0) {
            brig_error_set(err, BRIG_E_UNAVAILABLE, r < 0 ? errno : 0,
                           "the VMM's control socket: %s", r == 0 ? "closed" : "read");
            return NULL;
        }
        q->len += (size_t)r;
    }
}

/* Writes line, with fd passed along it (SCM_RIGHTS) when fd >= 0. */
static int qmp_send(qmp *q, const char *line, int fd)
{
    struct iovec iov = {(void *)line, strlen(line)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(q->fd, &mh, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -1;
}

/* Sends {"execute": cmd, "arguments": args} (args taken; NULL: none), fd along it when >= 0;
 * its "return" (caller decrefs), or NULL with *err. */
static json_t *qmp_call(qmp *q, const char *cmd, json_t *args, int fd, brig_error **err)
{
    json_t *req = json_pack("{s:s}", "execute", cmd);
    if (args)
        json_object_set_new(req, "arguments", args);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    _cleanup_free_ char *line = brig_asprintf("%s\n", text ? text : "{}");
    free(text);
    if (qmp_send(q, line, fd) < 0) {
        brig_error_sys(err, "the VMM's control socket: %s", cmd);
        return NULL;
    }
    json_t *j = qmp_next(q, err);
    if (j == NULL)
        return NULL;
    json_t *ret = json_incref(json_object_get(j, "return"));
    if (ret == NULL) {
        const char *desc = json_string_value(json_object_get(json_object_get(j, "error"), "desc"));
        brig_error_set(err, BRIG_E_INTERNAL, 0, "QEMU refused %s: %s", cmd,
                       desc ? desc : "no answer");
    }
    json_decref(j);
    return ret;
}

static json_t *qmp_exec(qmp *q, const char *cmd, brig_error **err)
{
    return qmp_call(q, cmd, NULL, -1, err);
}

/* A connection to dir's VMM, past its greeting and the capabilities handshake; NULL with
 * BRIG_E_UNAVAILABLE when no VMM listens there (the VM is gone). */
static qmp *qmp_open(const char *dir, brig_error **err)
{
    struct sockaddr_un sa;
    int dfd = -1;
    if (qmp_addr(dir, &sa, &dfd, err) < 0)
        return NULL;
    qmp *q = brig_xcalloc(1, sizeof(*q));
    q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {QMP_TIMEOUT_S, 0};
    json_t *greeting = NULL, *caps = NULL;
    if (q->fd < 0 || setsockopt(q->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(q->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "its VM is not running");
    else if ((greeting = qmp_next(q, err)) != NULL)
        caps = qmp_exec(q, "qmp_capabilities", err);
    close(dfd);
    bool ok = caps != NULL;
    json_decref(greeting);
    json_decref(caps);
    if (!ok) {
        if (q->fd >= 0)
            close(q->fd);
        free(q);
        return NULL;
    }
    return q;
}

static void qmp_close(qmp *q)
{
    if (q) {
        close(q->fd);
        free(q);
    }
}

int brig_vm_qmp(const char *dir, const char *cmd, char *status, size_t n, brig_error **err)
{
    qmp *q = qmp_open(dir, err);
    json_t *ret = q ? qmp_exec(q, cmd, err) : NULL;
    if (ret && status) {
        const char *s = json_string_value(json_object_get(ret, "status"));
        snprintf(status, n, "%s", s ? s : "");
    }
    qmp_close(q);
    int rc = ret ? 0 : -1;
    json_decref(ret);
    return rc;
}

/* The "status" member of cmd's return ("" when none), into buf; -1 with *err. */
static int qmp_status(qmp *q, const char *cmd, char *buf, size_t n, brig_error **err)
{
    json_t *ret = qmp_exec(q, cmd, err);
    const char *s = json_string_value(json_object_get(ret, "status"));
    snprintf(buf, n, "%s", s ? s : "");
    json_decref(ret);
    return ret ? 0 : -1;
}

/* Polls cmd's status while it is `busy` (query-migrate: "active"...), up to
 * MIGRATE_TIMEOUT_MS; the last status into buf. */
static int qmp_wait(qmp *q, const char *cmd, const char *const *busy, char *buf, size_t n,
                    brig_error **err)
{
    int64_t deadline = brig_now_mono_ms() + MIGRATE_TIMEOUT_MS;
    for (;;) {
        if (qmp_status(q, cmd, buf, n, err) < 0)
            return -1;
        bool waiting = false;
        for (size_t i = 0; busy[i]; i++)
            waiting |= strcmp(buf, busy[i]) == 0;
        if (!waiting)
            return 0;
        if (brig_now_mono_ms() > deadline)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "the VM's migration is still %s",
                                  buf);
        usleep(5000);
    }
}

int brig_vm_qmp_save(const char *dir, int fd, brig_error **err)
{
    static const char *const busy[] = {"",       "none",           "setup", "active",
                                       "device", "pre-switchover", NULL};
    qmp *q = qmp_open(dir, err);
    json_t *r1 = q ? qmp_exec(q, "stop", err) : NULL;
    json_t *r2 = r1 ? qmp_call(q, "getfd", json_pack("{s:s}", "fdname", "mem"), fd, err) : NULL;
    json_t *r3 = r2 ? qmp_call(q, "migrate", json_pack("{s:s}", "uri", "fd:mem"), -1, err) : NULL;
    char st[32] = "";
    int rc = r3 ? qmp_wait(q, "query-migrate", busy, st, sizeof(st), err) : -1;
    if (rc == 0 && strcmp(st, "completed") != 0)
        rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "the VM's memory was not saved (%s)", st);
    json_decref(r1);
    json_decref(r2);
    json_decref(r3);
    qmp_close(q);
    return rc;
}

int brig_vm_qmp_restore(const char *dir, int fd, brig_error **err)
{
    static const char *const busy[] = {"inmigrate", "prelaunch", NULL};
    qmp *q = qmp_open(dir, err);
    json_t *r1 = q ? qmp_call(q, "getfd", json_pack("{s:s}", "fdname", "mem"), fd, err) : NULL;
    json_t *r2 =
        r1 ? qmp_call(q, "migrate-incoming", json_pack("{s:s}", "uri", "fd:mem"), -1, err) : NULL;
    char st[32] = "";
    int rc = r2 ? qmp_wait(q, "query-status", busy, st, sizeof(st), err) : -1;
    /* QEMU runs the VM once it is in unless it was told not to; it may also stay paused */
    json_t *r3 = rc == 0 && strcmp(st, "running") != 0 ? qmp_exec(q, "cont", err) : NULL;
    if (rc == 0 && strcmp(st, "running") != 0 && r3 == NULL)
        rc = -1;
    json_decref(r1);
    json_decref(r2);
    json_decref(r3);
    qmp_close(q);
    return rc;
}
