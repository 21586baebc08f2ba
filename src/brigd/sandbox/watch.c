/*
 * watch.c - the watch on running sandboxes' inits (see watch.h).
 */
#include "watch.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

struct brig_watch {
    pthread_t thread;
    int epfd;                /* epoll over the inits' exit fds */
    int wake;                /* eventfd that stops the thread (key 0) */
    brig_watch_lost_fn lost; /* what ends a sandbox whose agent died */
};

void brig_watch_add(brigd *d, brig_sandbox *sb)
{
    brig_watch *w = d->watch;
    int fd = w ? d->rt->ops->exit_fd(d->rt, brig_sandbox_runtime(sb)) : -1;
    if (fd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = brig_sandbox_serial(sb)};
    /* Watched already (a frozen sandbox resumed): armed again. */
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 &&
        (errno != EEXIST || epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &ev) < 0))
        brig_warn("sandbox %s: cannot watch its agent: %s", brig_sandbox_id(sb), strerror(errno));
}

static void *watcher(void *arg)
{
    brigd *d = arg;
    brig_watch *w = d->watch;
    for (;;) {
        struct epoll_event ev[16];
        int n = epoll_wait(w->epfd, ev, 16, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            brig_err("watch: %s", strerror(errno));
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 0) /* the wake-up eventfd: stop */
                return NULL;
            char id[BRIG_ID_MAX];
            if (brig_registry_running_id(d, ev[i].data.u64, id))
                w->lost(d, id);
        }
    }
}

static void watch_free(brig_watch *w)
{
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->wake >= 0)
        close(w->wake);
    free(w);
}

int brig_watch_start(brigd *d, brig_watch_lost_fn lost, brig_error **err)
{
    brig_watch *w = brig_xcalloc(1, sizeof(*w));
    w->lost = lost;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->wake = eventfd(0, EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (w->epfd < 0 || w->wake < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake, &ev) < 0) {
        brig_error_sys(err, "watch on sandbox inits");
        watch_free(w);
        return -1;
    }
    d->watch = w; /* before the thread runs: it finds it there */
    int e = pthread_create(&w->thread, NULL, watcher, d);
    if (e != 0) {
        d->watch = NULL;
        watch_free(w);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start the watch on sandbox inits");
    }
    return 0;
}

void brig_watch_stop(brigd *d)
{
    brig_watch *w = d->watch;
    if (w == NULL)
        return;
    uint64_t one = 1;
    (void)!write(w->wake, &one, sizeof(one));
    pthread_join(w->thread, NULL);
    d->watch = NULL;
    watch_free(w);
}
