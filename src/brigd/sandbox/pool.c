/*
 * pool.c - the warm pool (see pool.h).
 */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "sandbox.h"
#include "template.h"
#include "util.h"

#define MAX_SPECS 16
#define RETRY_MS  5000 /* after a failed start, before the next try */
/* A refill yields to requests: it starts once no sandbox request has run for
 * QUIET_MS, or DEFER_MS after it was needed, whichever comes first. */
#define QUIET_MS 5
#define DEFER_MS 100

typedef struct entry {
    brig_pooled p;
    char build[64]; /* the template build it was started from (brig_template.build) */
    struct entry *next;
} entry;

typedef struct spec {
    char template[64];
    char tariff[32];
    int target;
    int ready;
    int64_t hits, misses; /* creates of this template and tariff served by the pool, or not */
    entry *entries;
    int64_t retry_at; /* mono ms: no start before this after a failure */
} spec;

struct brig_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    pthread_t filler;
    spec specs[MAX_SPECS];
    int n_specs;
};

/* The pool's specs come from the parsed config (settings.c checks them). */
static void load_specs(brigd *d, brig_pool *p)
{
    for (int i = 0; i < d->cfg.n_pool && p->n_specs < MAX_SPECS; i++) {
        spec *sp = &p->specs[p->n_specs++];
        snprintf(sp->template, sizeof(sp->template), "%s", d->cfg.pool[i].template);
        snprintf(sp->tariff, sizeof(sp->tariff), "%s", d->cfg.pool[i].tariff);
        sp->target = d->cfg.pool[i].count;
    }
}

static void destroy_entry(brigd *d, entry *e)
{
    brig_error *err = NULL;
    int r = d->rt->ops->destroy(d->rt, e->p.id, e->p.rt, &err);
    if (e->p.net) { /* after the runtime: see finish() in sandbox.c */
        if (r == 0)
            brig_net_release(d->net, e->p.net);
        else
            brig_net_detach(d->net, e->p.net);
    }
    if (r < 0) {
        brig_err("pool: destroy %s: %s", e->p.id, err->msg);
        brig_error_clear(&err);
    } else {
        brig_sandbox_uid_release(d, e->p.uid_base);
    }
    d->rt->ops->release(d->rt, e->p.rt);
    free(e);
}

/* Starts one sandbox for sp (called without the pool lock). */
static entry *start_one(brigd *d, const spec *sp, brig_error **err)
{
    brig_template t;
    if (brig_template_lookup(&d->cfg, sp->template, &t, err) < 0)
        return NULL;
    if (!t.built) {
        brig_template_dispose(&t);
        brig_error_set(err, BRIG_E_CONFLICT, 0, "template %s is not built", sp->template);
        return NULL;
    }
    const brig_tariff *tariff = brig_config_tariff(&d->cfg, sp->tariff);
    entry *e = brig_xcalloc(1, sizeof(*e));
    brig_id_new("sbx", e->p.id);
    memcpy(e->build, t.build, sizeof(e->build));
    e->p.uid_base = brig_sandbox_uid_take(d);
    if (e->p.uid_base == 0) {
        brig_template_dispose(&t);
        free(e);
        brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "no free user-id range");
        return NULL;
    }
    brig_rt_spec rs = {
        .id = e->p.id,
        .rootfs = t.rootfs,
        .memory_mib = tariff->memory_mib,
        .pids_limit = d->cfg.pids_limit,
        .cpus = tariff->vcpus,
        .disk_mib = tariff->disk_mib,
        .uid_base = (unsigned)e->p.uid_base,
        .uid_size = BRIG_UID_RANGE,
    };
    int r = d->rt->ops->create(d->rt, &rs, &e->p.rt, err);
    brig_template_dispose(&t);
    if (r < 0) {
        brig_sandbox_uid_release(d, e->p.uid_base);
        free(e);
        return NULL;
    }
    /* Connected now, reaching nothing: a claim only changes the policy. */
    static const brig_egress none = {.mode = BRIG_EGRESS_NONE};
    if (d->net && brig_sandbox_net_attach(d, e->p.id, e->p.rt, &none, &e->p.net, err) < 0) {
        destroy_entry(d, e);
        return NULL;
    }
    return e;
}

static int64_t pooled_total(brig_pool *p)
{
    int64_t n = 0;
    for (int i = 0; i < p->n_specs; i++)
        n += p->specs[i].ready;
    return n;
}

/* Waits on the pool's condition for at most ms milliseconds (p->lock held). */
static void wait_ms(brig_pool *p, int64_t ms)
{
    struct timespec ts = brig_mono_after(ms);
    pthread_cond_timedwait(&p->cond, &p->lock, &ts);
}

/* How long to wait before a refill may start: 0 when brigd has been quiet for
 * QUIET_MS.  A claim is mostly followed at once by its caller's upload and exec,
 * and a sandbox start (runc, mounts) on the same cores would slow them down. */
static int64_t quiet_in_ms(brigd *d, int64_t now)
{
    pthread_mutex_lock(&d->lock);
    int64_t left = d->ops_inflight > 0 ? QUIET_MS : d->ops_idle_since + QUIET_MS - now;
    pthread_mutex_unlock(&d->lock);
    return left > 0 ? left : 0;
}

static void *filler(void *arg)
{
    brigd *d = arg;
    brig_pool *p = d->pool;
    int64_t needed_at = 0; /* mono ms: since when the pool is short; 0: it is not */
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        /* The spec that is short the most (and not backing off), if the host has
         * room for one more sandbox. */
        spec *need = NULL;
        int64_t now = brig_now_mono_ms();
        pthread_mutex_lock(&d->lock);
        bool room = d->n_sandboxes + pooled_total(p) < d->cfg.max_sandboxes;
        pthread_mutex_unlock(&d->lock);
        for (int i = 0; room && i < p->n_specs; i++) {
            spec *sp = &p->specs[i];
            if (sp->ready < sp->target && now >= sp->retry_at &&
                (need == NULL || sp->target - sp->ready > need->target - need->ready))
                need = sp;
        }
        if (need == NULL) {
            needed_at = 0;
            wait_ms(p, 1000);
            continue;
        }
        if (needed_at == 0)
            needed_at = now;
        int64_t quiet = quiet_in_ms(d, now);
        if (quiet > 0 && now - needed_at < DEFER_MS) {
            int64_t deadline = needed_at + DEFER_MS - now;
            wait_ms(p, quiet < deadline ? quiet : deadline);
            continue;
        }
        needed_at = 0;
        spec copy = *need;
        pthread_mutex_unlock(&p->lock);
        brig_error *err = NULL;
        entry *e = start_one(d, &copy, &err);
        pthread_mutex_lock(&p->lock);
        if (e == NULL) {
            brig_warn("pool %s/%s: %s", copy.template, copy.tariff, err->msg);
            brig_error_clear(&err);
            need->retry_at = brig_now_mono_ms() + RETRY_MS;
        } else if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            destroy_entry(d, e);
            pthread_mutex_lock(&p->lock);
        } else {
            e->next = need->entries;
            need->entries = e;
            need->ready++;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int brig_pool_start(brigd *d, brig_error **err)
{
    d->pool = NULL;
    if (d->cfg.n_pool == 0)
        return 0;
    brig_pool *p = brig_xcalloc(1, sizeof(*p));
    load_specs(d, p);
    pthread_mutex_init(&p->lock, NULL);
    brig_cond_init_mono(&p->cond);
    d->pool = p;
    int e = pthread_create(&p->filler, NULL, filler, d);
    if (e != 0) {
        d->pool = NULL;
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start the warm-pool thread");
    }
    brig_info("warm pool: %s", d->cfg.warm_pool);
    return 0;
}

void brig_pool_stop(brigd *d)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->filler, NULL);
    for (int i = 0; i < p->n_specs; i++) {
        while (p->specs[i].entries) {
            entry *e = p->specs[i].entries;
            p->specs[i].entries = e->next;
            destroy_entry(d, e);
        }
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
    d->pool = NULL;
}

int brig_pool_claim(brigd *d, const char *template, const char *template_build, const char *tariff,
                    brig_pooled *out)
{
    brig_pool *p = d->pool;
    if (p == NULL)
        return -1;
    entry *stale = NULL, *hit = NULL;
    pthread_mutex_lock(&d->lock);
    d->ops_idle_since = brig_now_mono_ms(); /* the claimer's next requests come at once */
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_specs && hit == NULL; i++) {
        spec *sp = &p->specs[i];
        if (strcmp(sp->template, template) != 0 || strcmp(sp->tariff, tariff) != 0)
            continue;

        /* Entries of an older build of the template are of no use any more. */
        for (entry **pp = &sp->entries; *pp;) {
            entry *e = *pp;
            if (strcmp(e->build, template_build) != 0) {
                *pp = e->next;
                e->next = stale;
                stale = e;
                sp->ready--;
            } else if (hit == NULL) {
                *pp = e->next;
                hit = e;
                sp->ready--;
            } else {
                pp = &e->next;
            }
        }
        if (hit)
            sp->hits++;
        else
            sp->misses++;
    }
    pthread_cond_signal(&p->cond); /* top it up */
    pthread_mutex_unlock(&p->lock);
    while (stale) {
        entry *e = stale;
        stale = e->next;
        destroy_entry(d, e);
    }
    if (hit == NULL)
        return -1;
    *out = hit->p;
    free(hit);
    return 0;
}

json_t *brig_pool_stats(brigd *d)
{
    json_t *o = json_object();
    brig_pool *p = d->pool;
    if (p == NULL)
        return o;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_specs; i++) {
        char k[100];
        snprintf(k, sizeof(k), "%s/%s", p->specs[i].template, p->specs[i].tariff);
        json_object_set_new(o, k,
                            json_pack("{s:i, s:i, s:I, s:I}", "ready", p->specs[i].ready, "target",
                                      p->specs[i].target, "hits", (json_int_t)p->specs[i].hits,
                                      "misses", (json_int_t)p->specs[i].misses));
    }
    pthread_mutex_unlock(&p->lock);
    return o;
}
