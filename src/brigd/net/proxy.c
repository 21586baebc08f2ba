/*
 * proxy.c - the network module's one thread: an epoll loop over every
 * sandbox's DNS sockets (UDP and TCP port 53 on its gateway address), the
 * upstream queries in flight, and the NFLOG socket that reports denied
 * packets.  What each event means is dnsserve.c's (the sandbox side),
 * upstream.c's and nflog.c's; this file runs the loop and opens and closes a
 * sandbox's sockets.
 *
 * Lifetime: everything runs under n->lock.  A sandbox detached while its
 * events wait in the current epoll batch is marked dead and parked in
 * n->graveyard; its watches are skipped, and it is freed after the batch.
 */
#include <libmnl/libmnl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dnsproxy.h"

/* ---- the loop ----------------------------------------------------------- */

static void handle(brig_net_host *n, watch *w)
{
    if (w->s && w->s->dead)
        return;
    switch (w->type) {
    case W_WAKE: {
        uint64_t v;
        (void)!read(n->proxy->wake_fd, &v, sizeof(v));
        break;
    }
    case W_NFLOG:
        brig_nflog_read(n, n->proxy->nflog, n->proxy->buf, sizeof(n->proxy->buf));
        break;
    case W_UDP:
        brig_dnsserve_udp(n, w->s);
        break;
    case W_TCP_LISTEN:
        brig_dnsserve_accept(n, w->s);
        break;
    case W_TCP_CONN:
        brig_dnsserve_tcp(n, w->s, w->obj);
        break;
    case W_UPSTREAM:
        /* An answer may cost a firewall transaction (allowlist): a few per
         * sandbox per round, so that one sandbox's flood of answers cannot
         * hold up everyone else's.  The rest stay readable for the next
         * round (epoll is level-triggered and reports them after the others). */
        if (w->s->round != n->proxy->round) {
            w->s->round = n->proxy->round;
            w->s->round_answers = 0;
        }
        if (w->s->round_answers++ < BRIG_NET_ANSWERS_PER_ROUND)
            brig_dnsserve_answer(n, w->s, w->obj);
        break;
    }
}

static void *loop(void *arg)
{
    brig_net_host *n = arg;
    brig_proxy *p = n->proxy;
    struct epoll_event evs[64];
    for (;;) {
        pthread_mutex_lock(&n->lock);
        int64_t d = brig_dnsserve_deadline(n);
        pthread_mutex_unlock(&n->lock);
        int64_t now = brig_now_mono_ms();
        int timeout = d == INT64_MAX ? -1 : d <= now ? 0 : (int)(d - now);
        int k = epoll_wait(p->ep, evs, (int)BRIG_ARRAY_LEN(evs), timeout);
        pthread_mutex_lock(&n->lock);
        if (p->stop) {
            pthread_mutex_unlock(&n->lock);
            return NULL;
        }
        p->round++;
        for (int i = 0; i < k; i++)
            handle(n, evs[i].data.ptr);
        brig_dnsserve_expire(n);
        /* Detached sandboxes: none of their watches is in epoll any more,
         * and this batch is done with them. */
        while (n->graveyard) {
            brig_net_sandbox *s = n->graveyard;
            n->graveyard = s->next;
            brig_proxy_sandbox_free(s);
            brig_net_sandbox_free(s);
        }
        pthread_mutex_unlock(&n->lock);
    }
}

/* ---- start and stop ----------------------------------------------------- */

int brig_proxy_start(brig_net_host *n, brig_error **err)
{
    brig_proxy *p = brig_xcalloc(1, sizeof(*p));
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->ep < 0 || p->wake_fd < 0) {
        int e = errno;
        if (p->ep >= 0)
            close(p->ep);
        if (p->wake_fd >= 0)
            close(p->wake_fd);
        free(p);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: epoll");
    }
    n->proxy = p;
    p->wake_w = (watch){.type = W_WAKE};
    brig_proxy_watch_add(p, p->wake_fd, &p->wake_w);
    p->nflog = brig_nflog_open();
    p->ct = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (p->ct && mnl_socket_bind(p->ct, 0, MNL_SOCKET_AUTOPID) < 0) {
        mnl_socket_close(p->ct);
        p->ct = NULL;
    }
    if (p->ct == NULL)
        brig_warn("net: ctnetlink socket: %s; upstream DNS queries keep their conntrack entries",
                  strerror(errno));
    if (p->nflog) {
        p->nflog_w = (watch){.type = W_NFLOG};
        brig_proxy_watch_add(p, mnl_socket_get_fd(p->nflog), &p->nflog_w);
    }
    int e = pthread_create(&p->thread, NULL, loop, n);
    if (e != 0) {
        brig_proxy_stop(n);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: start thread");
    }
    p->running = true;
    return 0;
}

void brig_proxy_stop(brig_net_host *n)
{
    brig_proxy *p = n->proxy;
    if (p == NULL)
        return;
    if (p->running) {
        pthread_mutex_lock(&n->lock);
        p->stop = true;
        pthread_mutex_unlock(&n->lock);
        uint64_t one = 1;
        (void)!write(p->wake_fd, &one, sizeof(one));
        pthread_join(p->thread, NULL);
    }
    if (p->nflog)
        mnl_socket_close(p->nflog);
    if (p->ct)
        mnl_socket_close(p->ct);
    close(p->wake_fd);
    close(p->ep);
    free(p);
    n->proxy = NULL;
}

void brig_proxy_wake(brig_net_host *n)
{
    uint64_t one = 1;
    if (n->proxy)
        (void)!write(n->proxy->wake_fd, &one, sizeof(one));
}

/* ---- a sandbox's sockets ---------------------------------------------------- */

static int bound_socket(int type, uint32_t gw, brig_error **err)
{
    int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "DNS proxy socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = gw};
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 16) < 0)) {
        int e = errno;
        close(fd);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "DNS proxy: bind port 53");
    }
    return fd;
}

int brig_proxy_add(brig_net_host *n, brig_net_sandbox *s, brig_error **err)
{
    s->udp_fd = bound_socket(SOCK_DGRAM, s->gw, err);
    if (s->udp_fd < 0)
        return -1;
    s->tcp_fd = bound_socket(SOCK_STREAM, s->gw, err);
    if (s->tcp_fd < 0) {
        close(s->udp_fd);
        s->udp_fd = -1;
        return -1;
    }
    watch *u = brig_xcalloc(1, sizeof(*u)), *t = brig_xcalloc(1, sizeof(*t));
    *u = (watch){.type = W_UDP, .s = s};
    *t = (watch){.type = W_TCP_LISTEN, .s = s};
    s->udp_watch = u;
    s->tcp_watch = t;
    brig_proxy_watch_add(n->proxy, s->udp_fd, u);
    brig_proxy_watch_add(n->proxy, s->tcp_fd, t);
    return 0;
}

void brig_proxy_remove(brig_net_host *n, brig_net_sandbox *s)
{
    brig_proxy *p = n->proxy;
    /* fds are closed now; memory the current batch may still point at is
     * freed with the sandbox (brig_net_sandbox_free). */
    for (brig_dns_pending *q = s->queries; q; q = q->next)
        brig_upstream_close(n, q);
    for (brig_dns_conn *c = s->conns; c; c = c->next)
        if (c->fd >= 0) {
            brig_proxy_watch_del(p, c->fd);
            close(c->fd);
            c->fd = -1;
        }
    if (s->udp_fd >= 0) {
        brig_proxy_watch_del(p, s->udp_fd);
        close(s->udp_fd);
        s->udp_fd = -1;
    }
    if (s->tcp_fd >= 0) {
        brig_proxy_watch_del(p, s->tcp_fd);
        close(s->tcp_fd);
        s->tcp_fd = -1;
    }
}

void brig_proxy_sandbox_free(brig_net_sandbox *s)
{
    for (brig_dns_pending *q = s->queries, *nx; q; q = nx) {
        nx = q->next;
        if (q->fd >= 0)
            close(q->fd);
        free(q->msg);
        free(q);
    }
    for (brig_dns_conn *c = s->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->fd >= 0)
            close(c->fd);
        free(c);
    }
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    if (s->tcp_fd >= 0)
        close(s->tcp_fd);
    free(s->udp_watch);
    free(s->tcp_watch);
    s->queries = NULL;
    s->conns = NULL;
}
