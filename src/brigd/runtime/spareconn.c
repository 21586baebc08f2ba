/*
 * spareconn.c - see spareconn.h.
 */
#include "spareconn.h"

#include <poll.h>
#include <unistd.h>

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

/* An idle handler never writes: anything to read (its EOF) or an error means it is gone. */
static bool alive(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 0;
}

int brig_spareconn_take(brig_spareconn *s)
{
    int fd = -1;
    pthread_mutex_lock(&s->lock);
    while (fd < 0 && s->n > 0) {
        fd = s->fd[--s->n]; /* the newest: the least likely to have been dropped meanwhile */
        if (!alive(fd)) {
            close(fd);
            fd = -1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return fd;
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
