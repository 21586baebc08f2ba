/*
 * agentconn.c - see agentconn.h.
 */
#include "agentconn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "frame.h"
#include "util.h"

/* A handshake that failed: the agent is unavailable; fd is closed. */
static int failed(int fd, const char *id, brig_error **err)
{
    if (err && *err)
        (*err)->kind = BRIG_E_UNAVAILABLE;
    brig_error_prefix(err, "agent of %s", id);
    close(fd);
    return -1;
}

int brig_agent_handshake_begin(int fd, const char *id, int timeout_ms, brig_error **err)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return brig_proto_client_hello_send(fd, err) < 0 ? failed(fd, id, err) : fd;
}

int brig_agent_handshake_end(int fd, const char *id, brig_error **err)
{
    return brig_proto_client_hello_recv(fd, NULL, err) < 0 ? failed(fd, id, err) : fd;
}

int brig_agent_handshake(int fd, const char *id, int timeout_ms, brig_error **err)
{
    if (brig_agent_handshake_begin(fd, id, timeout_ms, err) < 0)
        return -1;
    return brig_agent_handshake_end(fd, id, err);
}

int brig_pidfd_wait(int pidfd, int timeout_ms)
{
    struct pollfd p = {pidfd, POLLIN, 0};
    int64_t deadline = brig_now_mono_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - brig_now_mono_ms());
        int r = poll(&p, 1, left < 0 ? 0 : left);
        if (r > 0)
            return 0;
        if (r == 0 || errno != EINTR)
            return -1;
    }
}

pid_t brig_pidfile_read(const char *path)
{
    char buf[32] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    return r > 0 ? (pid_t)atoi(buf) : 0;
}
