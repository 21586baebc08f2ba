/*
 * spareconn.c - see spareconn.h.
 */
#include "spareconn.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"

void brig_spareconn_init(brig_spareconn *s)
{
    pthread_mutex_init(&s->lock, NULL);
    s->n = 0;
    s->off = false;
}

void brig_spareconn_dispose(brig_spareconn *s)
{
    brig_spareconn_close(s, true);
    pthread_mutex_destroy(&s->lock);
}

/* The agent's HELLO answer read, and nothing after it: an idle handler writes nothing more,
 * so anything to read (its EOF) or an error means it is gone. */
static bool ready(int fd)
{
    if (brig_proto_client_hello_recv(fd, NULL, NULL) < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 0;
}

int brig_spareconn_take(brig_spareconn *s)
{
    for (;;) {
        pthread_mutex_lock(&s->lock);
        /* The oldest: its handler has had the longest to answer. */
        int fd = s->n > 0 ? s->fd[0] : -1;
        if (s->n > 0)
            memmove(s->fd, s->fd + 1, (size_t)--s->n * sizeof(s->fd[0]));
        pthread_mutex_unlock(&s->lock);
        if (fd < 0 || ready(fd))
            return fd;
        close(fd);
    }
}

bool brig_spareconn_keep(brig_spareconn *s, int fd)
{
    pthread_mutex_lock(&s->lock);
    bool kept = !s->off && s->n < BRIG_SPARECONN_MAX;
    if (kept)
        s->fd[s->n++] = fd;
    pthread_mutex_unlock(&s->lock);
    return kept;
}

int brig_spareconn_count(brig_spareconn *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void brig_spareconn_close(brig_spareconn *s, bool off)
{
    pthread_mutex_lock(&s->lock);
    while (s->n > 0)
        close(s->fd[--s->n]);
    if (off)
        s->off = true;
    pthread_mutex_unlock(&s->lock);
}

void brig_spareconn_allow(brig_spareconn *s)
{
    pthread_mutex_lock(&s->lock);
    s->off = false;
    pthread_mutex_unlock(&s->lock);
}
