/*
 * microvm_qmp.c - the VMM's control channel (microvm_internal.h): QEMU's machine protocol
 * (QMP) on a unix socket in the VM's directory, for pause and resume.
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
#include <sys/un.h>
#include <unistd.h>

#include "microvm_internal.h"
#include "util.h"

#define QMP_TIMEOUT_S 10 /* stop waits for the vCPUs to halt: quick, even under TCG */

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

/* Sends {"execute": cmd}; its "return" (caller decrefs), or NULL with *err. */
static json_t *qmp_exec(qmp *q, const char *cmd, brig_error **err)
{
    char line[128];
    int n = snprintf(line, sizeof(line), "{\"execute\": \"%s\"}\n", cmd);
    if (write(q->fd, line, (size_t)n) != n) {
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

int brig_vm_qmp(const char *dir, const char *cmd, char *status, size_t n, brig_error **err)
{
    struct sockaddr_un sa;
    int dfd = -1;
    if (qmp_addr(dir, &sa, &dfd, err) < 0)
        return -1;
    qmp *q = brig_xcalloc(1, sizeof(*q));
    q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {QMP_TIMEOUT_S, 0};
    int rc = -1;
    if (q->fd < 0 || setsockopt(q->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(q->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        /* no socket, or no VMM listening on it: the VM is gone */
        brig_error_set(err, BRIG_E_UNAVAILABLE, errno, "its VM is not running");
        goto out;
    }
    json_t *greeting = qmp_next(q, err), *caps = NULL, *ret = NULL;
    if (greeting && (caps = qmp_exec(q, "qmp_capabilities", err)) != NULL &&
        (ret = qmp_exec(q, cmd, err)) != NULL) {
        const char *s = json_string_value(json_object_get(ret, "status"));
        if (status)
            snprintf(status, n, "%s", s ? s : "");
        rc = 0;
    }
    json_decref(greeting);
    json_decref(caps);
    json_decref(ret);
out:
    if (q->fd >= 0)
        close(q->fd);
    free(q);
    close(dfd);
    return rc;
}
