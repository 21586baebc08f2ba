/*
 * ctl.c - the control channel between PID 1 and a handler process: a SOCK_SEQPACKET
 * socketpair made for each handler before it is forked, so every message arrives whole and
 * an EOF says that the other side is gone.  Messages are fixed binary structs (agent.h,
 * brig_ctl_msg), optionally with one descriptor attached (SCM_RIGHTS): a client connection
 * being routed to the supervisor that owns the process it asks about.
 *
 * Both ends are our own code, but PID 1 still treats what arrives as untrusted input: sizes
 * and types are checked (handlers.c), unexpected descriptors are closed.
 */
#include "agent.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int brig_ctl_send(int ctl, const void *msg, size_t n, int pass_fd, bool nonblock)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = n};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    for (;;) {
        ssize_t r = sendmsg(ctl, &mh, MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
        if (r >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

ssize_t brig_ctl_recv(int ctl, void *buf, size_t cap, int *fd, bool nonblock)
{
    if (fd != NULL)
        *fd = -1;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    /* Room for a few descriptors: a misbehaving peer's extras are closed, not leaked. */
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t r;
    do
        r = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC | (nonblock ? MSG_DONTWAIT : 0));
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int got;
            memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (fd != NULL && *fd < 0)
                *fd = got;
            else
                close(got);
        }
    }
    if (mh.msg_flags & MSG_TRUNC) {
        if (fd != NULL && *fd >= 0) {
            close(*fd);
            *fd = -1;
        }
        errno = EMSGSIZE;
        return -1;
    }
    /* MSG_CTRUNC: a descriptor did not fit (or we are out of descriptors, EMFILE): the
     * message is still good, *fd stays -1. */
    return r;
}

ssize_t brig_ctl_call(int ctl, const brig_ctl_msg *msg, int pass_fd, void *ans, size_t ans_cap,
                      brig_error **err)
{
    if (brig_ctl_send(ctl, msg, sizeof(*msg), pass_fd, false) < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "agent control channel");
    ssize_t r = brig_ctl_recv(ctl, ans, ans_cap, NULL, false);
    if (r < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "agent control channel");
    if (r == 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "the agent is shutting down");
    if ((size_t)r < sizeof(uint32_t))
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "short control message");
    return r;
}
