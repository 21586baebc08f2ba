/*
 * inject.c - the egress proxy of credential injection (docs/secrets.md): each
 * sandbox with rules has two listeners on its gateway address (HTTP and HTTPS
 * ports; the firewall's prerouting_nat chain redirects its TCP 80 and 443 there),
 * one thread accepts on all of them, and each connection runs on a thread of its
 * own (injconn.c).  The proxy's own upstream connections leave from the host, so
 * the firewall's egress chain never sees them: brig_inject_allows applies the
 * sandbox's policy to them the way that chain does (fw.c's order), so going
 * through the proxy is never more than the policy allows.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "injproxy.h"
#include "log.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

typedef struct brig_injector {
    int ep, wake_fd;
    pthread_t thread;
    bool running;
    bool stop;            /* under n->lock */
    brig_inj_conn *conns; /* in flight, under n->lock */
    pthread_cond_t idle;  /* signalled when conns empties */
    brig_injtls *tls;     /* NULL: HTTPS relayed only */
} brig_injector;

/* ---- rules -------------------------------------------------------------------------- */

static brig_inj_cfg *cfg_copy(const char *id, const brig_inject *in)
{
    brig_inj_cfg *c = brig_xcalloc(1, sizeof(*c));
    atomic_init(&c->refs, 1);
    c->sandbox_id = brig_xstrdup(id);
    c->n_rules = in->n_rules;
    c->rules = brig_xcalloc(in->n_rules ? in->n_rules : 1, sizeof(*c->rules));
    for (size_t i = 0; i < in->n_rules; i++) {
        const brig_inject_rule *r = &in->rules[i];
        brig_inject_header *h = brig_xcalloc(r->n_headers ? r->n_headers : 1, sizeof(*h));
        for (size_t k = 0; k < r->n_headers; k++)
            h[k] = (brig_inject_header){brig_xstrdup(r->headers[k].name),
                                        brig_xstrdup(r->headers[k].value)};
        c->rules[i] = (brig_inject_rule){brig_xstrdup(r->host), h, r->n_headers};
    }
    c->n_secrets = in->n_secrets;
    c->secrets = brig_xcalloc(in->n_secrets ? in->n_secrets : 1, sizeof(*c->secrets));
    for (size_t i = 0; i < in->n_secrets; i++) {
        const brig_inject_secret *s = &in->secrets[i];
        c->secrets[i] =
            (brig_inject_secret){brig_xstrdup(s->name), brig_xstrdup(s->value),
                                 brig_xstrdup(s->placeholder), s->expires_ms, s->expiry_logged};
    }
    return c;
}

/* The rules of in with in's secrets (but expired grants), the grants of old still
 * live (or expired without a record yet) and not named by in (a rules change keeps
 * them), and grant (may be NULL;
 * replaces any of its name). */
static brig_inj_cfg *cfg_merge(const char *id, const brig_inject *in, const brig_inj_cfg *old,
                               const brig_inject_secret *grant)
{
    size_t cap = in->n_secrets + (old ? old->n_secrets : 0) + 1, k = 0;
    brig_inject_secret *all = brig_xcalloc(cap, sizeof(*all));
    int64_t now = brig_now_real_ms();
    for (size_t i = 0; i < in->n_secrets; i++) {
        const brig_inject_secret *x = &in->secrets[i];
        if ((grant == NULL || strcmp(grant->name, x->name) != 0) &&
            (x->expires_ms == 0 || x->expires_ms > now))
            all[k++] = *x;
    }
    for (size_t i = 0; old && i < old->n_secrets; i++) {
        const brig_inject_secret *o = &old->secrets[i];
        bool named = grant && strcmp(grant->name, o->name) == 0;
        for (size_t j = 0; j < in->n_secrets && !named; j++)
            named = strcmp(in->secrets[j].name, o->name) == 0;
        if ((o->expires_ms > now || !o->expiry_logged) && !named)
            all[k++] = *o; /* an expired one until its expiry is recorded */
    }
    if (grant)
        all[k++] = *grant;
    brig_inject view = {in->rules, in->n_rules, all, k};
    brig_inj_cfg *c = cfg_copy(id, &view);
    free(all);
    return c;
}

/* ---- listeners ------------------------------------------------------------------------ */

static int listener(uint32_t gw, int port, brig_error **err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return brig_error_sys(err, "egress proxy socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = gw};
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "egress proxy: bind port %d", port);
    }
    return fd;
}

/* Under n->lock. */
static void listeners_close(brig_net_host *n, brig_net_sandbox *s)
{
    for (int i = 0; i < 2; i++)
        if (s->inj_fd[i] >= 0) {
            if (n->injector)
                epoll_ctl(n->injector->ep, EPOLL_CTL_DEL, s->inj_fd[i], NULL);
            close(s->inj_fd[i]);
            s->inj_fd[i] = -1;
        }
}

/* Under n->lock. */
static int listeners_open(brig_net_host *n, brig_net_sandbox *s, brig_error **err)
{
    static const int ports[2] = {BRIG_NET_INJECT_HTTP_PORT, BRIG_NET_INJECT_TLS_PORT};
    for (int i = 0; i < 2; i++) {
        if (s->inj_fd[i] >= 0)
            continue;
        s->inj_fd[i] = listener(s->gw, ports[i], err);
        if (s->inj_fd[i] < 0) {
            listeners_close(n, s);
            return -1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = s->inj_fd[i]};
        epoll_ctl(n->injector->ep, EPOLL_CTL_ADD, s->inj_fd[i], &ev);
    }
    return 0;
}

int brig_inject_set(brig_net_host *n, brig_net_sandbox *s, const brig_inject *inj, brig_error **err)
{
    bool on = inj && inj->n_rules > 0;
    if (on && n->injector == NULL)
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "the egress proxy is not running");
    pthread_mutex_lock(&n->lock);
    bool was_on = s->inj != NULL;
    brig_inj_cfg *c = on ? cfg_merge(s->id, inj, s->inj, NULL) : NULL;
    int rc = on ? listeners_open(n, s, err) : 0;
    if (rc == 0) {
        if (!on)
            listeners_close(n, s);
        brig_inj_cfg *old = s->inj;
        s->inj = c;
        c = old;
    }
    pthread_mutex_unlock(&n->lock);
    brig_inject_cfg_unref(c);
    /* The redirect last (on) or first (off) would be tidier; either way a
     * connection redirected without listeners is refused, never let through.
     * Off and never on (every create of a project without rules): the redirect
     * was never added (the table is new at each start), so nftables is spared a
     * transaction. */
    if (rc == 0 && (on || was_on))
        rc = brig_fw_inject(n->fw, s->ifname, on, err);
    return rc;
}

int brig_inject_grant(brig_net_host *n, brig_net_sandbox *s, const brig_inject_secret *g,
                      brig_error **err)
{
    pthread_mutex_lock(&n->lock);
    brig_inj_cfg *old = s->inj;
    if (old == NULL) {
        pthread_mutex_unlock(&n->lock);
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "the sandbox's project has no injection rules to use %s", g->name);
    }
    brig_inject view = {old->rules, old->n_rules, old->secrets, old->n_secrets};
    s->inj = cfg_merge(s->id, &view, old, g);
    json_t *rec = json_pack("{ss ss s[s] sI}", "kind", "proxy", "verdict", "granted", "secrets",
                            g->name, "expires_at_ms", (json_int_t)g->expires_ms);
    json_object_set_new(rec, "time", brig_net_time_now());
    brig_net_log_add(s, rec);
    pthread_mutex_unlock(&n->lock);
    brig_inject_cfg_unref(old);
    uint64_t one = 1; /* the timer: a new expiry to wait for */
    if (n->injector)
        (void)!write(n->injector->wake_fd, &one, sizeof(one));
    return 0;
}

void brig_inject_end(brig_net_host *n, brig_net_sandbox *s, const char *name, int64_t expires_ms,
                     const char *reason)
{
    pthread_mutex_lock(&n->lock);
    brig_inj_cfg *old = s->inj;
    const brig_inject_secret *g = NULL;
    for (size_t i = 0; old && i < old->n_secrets && g == NULL; i++)
        if (strcmp(old->secrets[i].name, name) == 0 && old->secrets[i].expires_ms == expires_ms)
            g = &old->secrets[i];
    int64_t now = brig_now_real_ms();
    if (g == NULL || g->expiry_logged || g->expires_ms <= now) {
        pthread_mutex_unlock(&n->lock); /* replaced, or expired on its own (the timer's) */
        return;
    }
    /* A new copy, not a change in place: connections read theirs without the lock. */
    brig_inject_secret ended = {g->name, g->value, g->placeholder, now, true};
    brig_inject view = {old->rules, old->n_rules, old->secrets, old->n_secrets};
    s->inj = cfg_merge(s->id, &view, old, &ended);
    json_t *rec = json_pack("{ss ss s[s] sI ss}", "kind", "proxy", "verdict", "expired", "secrets",
                            name, "expires_at_ms", (json_int_t)now, "reason", reason);
    json_object_set_new(rec, "time", brig_net_time_now());
    brig_net_log_add(s, rec);
    pthread_mutex_unlock(&n->lock);
    brig_inject_cfg_unref(old);
}

/* ---- expiries ------------------------------------------------------------------------- */

#define EXPIRY_WAIT_MAX 60000 /* ms: the timer looks again at least this often (clock steps) */

/* Under n->lock: records each grant that expired since (once: its expiry_logged);
 * returns the ms until the next expiry, or -1 when none is pending. */
static int expiries(brig_net_host *n)
{
    int64_t now = brig_now_real_ms(), next = -1;
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next) {
        for (size_t i = 0; s->inj && i < s->inj->n_secrets; i++) {
            brig_inject_secret *g = &s->inj->secrets[i];
            if (g->expires_ms == 0 || g->expiry_logged)
                continue;
            if (g->expires_ms > now) {
                next = next < 0 || g->expires_ms - now < next ? g->expires_ms - now : next;
                continue;
            }
            g->expiry_logged = true;
            json_t *rec = json_pack("{ss ss s[s] sI}", "kind", "proxy", "verdict", "expired",
                                    "secrets", g->name, "expires_at_ms", (json_int_t)g->expires_ms);
            json_object_set_new(rec, "time", brig_net_time_now());
            brig_net_log_add(s, rec);
        }
    }
    return next < 0 ? -1 : (int)(next < EXPIRY_WAIT_MAX ? next + 1 : EXPIRY_WAIT_MAX);
}

void brig_inject_remove(brig_net_host *n, brig_net_sandbox *s)
{
    listeners_close(n, s);
    brig_inject_cfg_unref(s->inj);
    s->inj = NULL;
}

/* ---- connections ---------------------------------------------------------------------- */

static void *conn_main(void *arg)
{
    brig_inj_conn *c = arg;
    brig_net_host *n = c->n;
    brig_injconn_serve(c);
    pthread_mutex_lock(&n->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        n->injector->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (n->injector->conns == NULL)
        pthread_cond_broadcast(&n->injector->idle);
    pthread_mutex_unlock(&n->lock);
    atomic_fetch_sub(&c->cfg->active, 1);
    brig_inject_cfg_unref(c->cfg);
    free(c);
    return NULL;
}

/* Under n->lock: the sandbox listening on fd, and whether fd is its HTTPS one. */
static brig_net_sandbox *owner_of(brig_net_host *n, int fd, bool *tls)
{
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        if (s->inj && (s->inj_fd[0] == fd || s->inj_fd[1] == fd)) {
            *tls = s->inj_fd[1] == fd;
            return s;
        }
    return NULL;
}

/* Under n->lock: accepts one connection on fd and starts its thread. */
static void accept_one(brig_net_host *n, int fd)
{
    bool tls = false;
    brig_net_sandbox *s = owner_of(n, fd, &tls);
    if (s == NULL) /* closed since epoll saw it (its number may be another socket's now) */
        return;
    int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (cfd < 0)
        return;
    brig_inj_conn *c = brig_xcalloc(1, sizeof(*c));
    socklen_t sl = sizeof(c->dst);
    if (atomic_load(&s->inj->active) >= BRIG_INJ_CONNS_MAX ||
        getsockopt(cfd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &sl) < 0) {
        close(cfd);
        free(c);
        return;
    }
    *c = (brig_inj_conn){.n = n,
                         .cfg = s->inj,
                         .fd = cfd,
                         .up = -1,
                         .dst = c->dst,
                         .tls = tls,
                         .tls_state = n->injector->tls};
    atomic_fetch_add(&c->cfg->refs, 1);
    atomic_fetch_add(&c->cfg->active, 1);
    c->next = n->injector->conns;
    if (c->next)
        c->next->prev = c;
    n->injector->conns = c;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_t t;
    if (pthread_create(&t, &at, conn_main, c) != 0) {
        n->injector->conns = c->next;
        if (c->next)
            c->next->prev = NULL;
        atomic_fetch_sub(&c->cfg->active, 1);
        brig_inject_cfg_unref(c->cfg);
        close(cfd);
        free(c);
    }
    pthread_attr_destroy(&at);
}

/* Accepts connections, and is the timer of grants' expiries (woken by each grant). */
static void *accept_loop(void *arg)
{
    brig_net_host *n = arg;
    brig_injector *j = n->injector;
    struct epoll_event evs[32];
    pthread_mutex_lock(&n->lock);
    int wait = expiries(n);
    pthread_mutex_unlock(&n->lock);
    for (;;) {
        int k = epoll_wait(j->ep, evs, (int)BRIG_ARRAY_LEN(evs), wait);
        pthread_mutex_lock(&n->lock);
        if (j->stop) {
            pthread_mutex_unlock(&n->lock);
            return NULL;
        }
        wait = expiries(n);
        for (int i = 0; i < k; i++) {
            if (evs[i].data.fd == j->wake_fd) {
                uint64_t v;
                (void)!read(j->wake_fd, &v, sizeof(v));
            } else {
                accept_one(n, evs[i].data.fd);
            }
        }
        pthread_mutex_unlock(&n->lock);
    }
}

int brig_inject_start(brig_net_host *n, const brig_net_config *cfg, brig_error **err)
{
    brig_injtls *tls = NULL;
    if (brig_injtls_new(cfg, &tls, err) < 0)
        return -1;
    brig_injector *j = brig_xcalloc(1, sizeof(*j));
    j->tls = tls;
    j->ep = epoll_create1(EPOLL_CLOEXEC);
    j->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_cond_init(&j->idle, NULL);
    n->injector = j;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = j->wake_fd};
    if (j->ep < 0 || j->wake_fd < 0 || epoll_ctl(j->ep, EPOLL_CTL_ADD, j->wake_fd, &ev) < 0) {
        brig_error_sys(err, "egress proxy: epoll");
        brig_inject_stop(n);
        return -1;
    }
    int e = pthread_create(&j->thread, NULL, accept_loop, n);
    if (e != 0) {
        brig_inject_stop(n);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "egress proxy: start thread");
    }
    j->running = true;
    return 0;
}

void brig_inject_stop(brig_net_host *n)
{
    brig_injector *j = n->injector;
    if (j == NULL)
        return;
    pthread_mutex_lock(&n->lock);
    j->stop = true;
    for (brig_net_sandbox *s = n->sandboxes; s; s = s->next)
        brig_inject_remove(n, s);
    /* Connections in flight end at once: their threads see their sockets shut. */
    for (brig_inj_conn *c = j->conns; c; c = c->next) {
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        if (c->up >= 0)
            shutdown(c->up, SHUT_RDWR);
    }
    while (j->conns)
        pthread_cond_wait(&j->idle, &n->lock);
    pthread_mutex_unlock(&n->lock);
    if (j->running) {
        uint64_t one = 1;
        (void)!write(j->wake_fd, &one, sizeof(one));
        pthread_join(j->thread, NULL);
    }
    if (j->ep >= 0)
        close(j->ep);
    if (j->wake_fd >= 0)
        close(j->wake_fd);
    pthread_cond_destroy(&j->idle);
    brig_injtls_free(j->tls);
    free(j);
    n->injector = NULL;
}
